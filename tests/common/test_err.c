/* struct folio_err's context chain (issue 20): a caller that adds where
 * an error happened appends to the context and leaves the callee's detail
 * (the facts that prove it) alone; folio_err_set starts a fresh error; a
 * full chain keeps its inner lines; folio_err_print shows every part. */
#include "common/common.h"
#include "tests/support/testutil.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
    struct folio_err e = {0};
    folio_err_set(&e, FOLIO_ENOMEM, "out of device memory: needed 5.1 GiB more");
    folio_err_detail(&e, "heap 0: 4.0 GiB free of 80 GiB");
    folio_err_hint(&e, "use a smaller model");
    folio_err_context(&e, "uploading tensor %s", "blk.3.ffn_up");
    folio_err_context(&e, "loading the text model");
    CHECK(strcmp(e.detail, "heap 0: 4.0 GiB free of 80 GiB") == 0, "detail kept: %s", e.detail);
    CHECK(strcmp(e.context, "uploading tensor blk.3.ffn_up; loading the text model") == 0, "context: %s",
          e.context);
    char out[2048] = "";
    FILE *f = fmemopen(out, sizeof out - 1, "w");
    REQUIRE(f, "fmemopen");
    folio_err_print(f, &e);
    fclose(f);
    CHECK(strstr(out, "folio: error: out of device memory") && strstr(out, "\n  detail: heap 0") &&
              strstr(out, "\n  context: uploading tensor blk.3.ffn_up; loading the text model\n") &&
              strstr(out, "\n  hint: use a smaller model\n"),
          "printed: %s", out);

    /* an error quoting a file's text (a label line, a name) reaches the
     * terminal with its controls, C1 CSI and bidi override escaped, the
     * line breaks and quotes of plain text kept (issue 32) */
    folio_err_set(&e, FOLIO_EINVAL, "line 2: 'a\x1b]0;x\x07" "b' has \"no\" colon \xc2\x9b\xe2\x80\xae\xff");
    folio_err_hint(&e, "tab\there");
    memset(out, 0, sizeof out);
    f = fmemopen(out, sizeof out - 1, "w");
    REQUIRE(f, "fmemopen");
    folio_err_print(f, &e);
    fclose(f);
    CHECK(strstr(out, "folio: error: line 2: 'a\\x1b]0;x\\x07b' has \"no\" colon \\u009b\\u202e\\xff\n") &&
              strstr(out, "  hint: tab\there\n") && !strchr(out, 0x1b) && !strchr(out, 0x07) &&
              !strstr(out, "\xe2\x80\xae"),
          "escaped: %s", out);
    char buf[64] = "";
    f = fmemopen(buf, sizeof buf - 1, "w");
    REQUIRE(f, "fmemopen");
    CHECK(folio_term_write(f, "x\0y\r\n", 5) == 0, "term_write");
    fclose(f);
    CHECK(strcmp(buf, "x\\x00y\\x0d\n") == 0, "NUL and CR escaped: %s", buf);

    /* a new error starts without the old one's context */
    folio_err_set(&e, FOLIO_EIO, "next");
    CHECK(e.context[0] == 0 && e.detail[0] == 0 && e.hint[0] == 0, "set clears: %s", e.context);

    /* a full chain keeps the inner lines and stays terminated */
    for (int i = 0; i < 100; i++)
        folio_err_context(&e, "level %d of a deep call chain", i);
    CHECK(strncmp(e.context, "level 0 of", 10) == 0 && strlen(e.context) < sizeof e.context, "full chain: %.40s",
          e.context);
    folio_err_clear(&e);
    CHECK(e.context[0] == 0 && e.code == 0, "clear");
    folio_err_context(NULL, "no error object is fine");
    return tu_finish();
}
