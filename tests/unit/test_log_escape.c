/* Display and log escaping (issue 21): C1 controls (U+009B is a terminal
 * CSI) and bidi overrides never reach logs, display names or reason files
 * raw; a logfmt value that does not fit its buffer is cut on a character
 * boundary, never inside an escape, ends in "..." and keeps its closing
 * quote, so the keys after it stay keys. */
#include "common/common.h"
#include "ingest/ingest.h"
#include "tests/support/testutil.h"

#include <string.h>

static int has_raw_unsafe(const char *s)
{
    return strstr(s, "\xc2\x9b") || strstr(s, "\xc2\x85") || strstr(s, "\xe2\x80\xae") ||
           strstr(s, "\xe2\x81\xa6");
}

int main(void)
{
    /* C1 and bidi: CSI (U+009B), NEL (U+0085), RLO (U+202E), LRI (U+2066) */
    const char *hostile = "invoice\xc2\x9b" "31m\xc2\x85x\xe2\x80\xae" "fdp.exe\xe2\x81\xa6.jpg";
    char buf[256];
    folio_lq(buf, sizeof buf, hostile);
    CHECK(!has_raw_unsafe(buf), "log value shows them raw: %s", buf);
    CHECK(strstr(buf, "\\u009b") && strstr(buf, "\\u202e") && strstr(buf, "\\u2066"), "log escapes: %s", buf);
    ingest_display(buf, sizeof buf, hostile);
    CHECK(!has_raw_unsafe(buf), "display name shows them raw: %s", buf);
    CHECK(strstr(buf, "\\u009b") && strstr(buf, "\\u202e"), "display escapes: %s", buf);
    buf[0] = 0;
    ingest_json_str(buf, sizeof buf, hostile);
    CHECK(!has_raw_unsafe(buf), "reason.json shows them raw: %s", buf);
    CHECK(strstr(buf, "\\u009b") && strstr(buf, "\\u202e"), "json escapes: %s", buf);
    /* ordinary non-ASCII text stays as it is */
    folio_lq(buf, sizeof buf, "R\xc3\xa9sum\xc3\xa9 \xe6\x96\x87");
    CHECK(strcmp(buf, "\"R\xc3\xa9sum\xc3\xa9 \xe6\x96\x87\"") == 0, "plain UTF-8 kept: %s", buf);

    /* Truncation: always closed, marked, on a boundary. */
    char line[160];
    char small[40];
    const char *long_name = "a \"quoted\" name with spaces and more and more and more and more.jpg";
    snprintf(line, sizeof line, "path=%s next=1", folio_lq(small, sizeof small, long_name));
    size_t sl = strlen(small);
    CHECK(sl < sizeof small && small[0] == '"' && small[sl - 1] == '"', "cut value not closed: %s", small);
    CHECK(sl >= 4 && memcmp(small + sl - 4, "...\"", 4) == 0, "cut value not marked: %s", small);
    CHECK(strstr(line, "\" next=1") != NULL, "next key swallowed: %s", line);
    /* a cut never splits an escape: what precedes "..." has no dangling backslash */
    char esc[24];
    folio_lq(esc, sizeof esc, "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n");
    size_t el = strlen(esc), bs = 0;
    for (size_t i = el - 4; i > 0 && esc[i - 1] == '\\'; i--)
        bs++;
    CHECK(el >= 5 && memcmp(esc + el - 4, "...\"", 4) == 0 && bs % 2 == 0, "escape cut in half: %s", esc);
    /* a cut never splits a UTF-8 sequence */
    char u[22];
    folio_lq(u, sizeof u, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9 x");
    CHECK(tu_valid_utf8(u) && u[strlen(u) - 1] == '"', "UTF-8 cut in half: %s", u);
    /* a value that fits exactly is not marked */
    char fit[7]; /* one byte short of "a b c" quoted */
    folio_lq(fit, sizeof fit, "a b c");
    CHECK(strcmp(fit, "\"a...\"") == 0, "one byte short: %s", fit);
    char fit2[8];
    folio_lq(fit2, sizeof fit2, "a b c");
    CHECK(strcmp(fit2, "\"a b c\"") == 0, "value that fits was cut: %s", fit2);
    return tu_finish();
}
