/* --file-by patterns (pipeline/review/filing.c): fields expand, every value
 * becomes exactly one path component whatever it holds ('/', '\', controls,
 * a leading '.', "..", nothing at all, 300 bytes of UTF-8), literal '.',
 * '..' and empty components and unknown or unclosed fields are refused with
 * the pattern named, and a leading '/' (outside the tree) too. */
#include "pipeline/review/review.h"
#include "tests/support/testutil.h"

#include <stdio.h>
#include <string.h>

static const char *expand(const char *pattern, const struct filing_vars *v, int *rc)
{
    static char out[4096];
    static struct folio_err err;
    err = (struct folio_err){0};
    *rc = filing_expand(pattern, v, out, sizeof out, &err);
    return *rc ? err.msg : out;
}

int main(void)
{
    struct filing_vars v = {.label = "invoice", .yyyy = "2026", .mm = "03", .dd = "31", .name = "scan 7.pdf",
                            .id = "42"};
    int rc;
    const char *s = expand("{label}/{yyyy}/{mm}/{name}", &v, &rc);
    CHECK(rc == 0 && strcmp(s, "invoice/2026/03/scan 7.pdf") == 0, "plain: %s", s);
    s = expand("{yyyy}-{mm}-{dd}/{label} #{id} {name}", &v, &rc);
    CHECK(rc == 0 && strcmp(s, "2026-03-31/invoice #42 scan 7.pdf") == 0, "mixed literal: %s", s);

    /* hostile values: still one component each, inside the tree */
    struct filing_vars h = v;
    h.name = "../../etc/passwd";
    s = expand("{label}/{name}", &h, &rc);
    CHECK(rc == 0 && strcmp(s, "invoice/_._.._etc_passwd") == 0, "climbing name: %s", s);
    h.name = "..";
    s = expand("{label}/{name}", &h, &rc);
    CHECK(rc == 0 && strcmp(s, "invoice/_.") == 0, "dot-dot name: %s", s);
    h.name = ".hidden";
    s = expand("{name}", &h, &rc);
    CHECK(rc == 0 && strcmp(s, "_hidden") == 0, "hidden name: %s", s);
    h.name = "a\\b\nc\x1b[2Jd\x7f";
    s = expand("{name}", &h, &rc);
    CHECK(rc == 0 && strcmp(s, "a_b_c_[2Jd_") == 0, "controls and backslash: %s", s);
    h.name = "";
    s = expand("{label}/{name}", &h, &rc);
    CHECK(rc == 0 && strcmp(s, "invoice/_") == 0, "empty value: %s", s);
    char longname[400] = "";
    for (int i = 0; i < 100; i++)
        strcat(longname, "\xc3\xa9"); /* é: 200 bytes */
    strcat(longname, ".pdf");
    h.name = longname;
    s = expand("{name}", &h, &rc);
    CHECK(rc == 0 && strlen(s) == 120 && strncmp(s, "\xc3\xa9", 2) == 0 && (unsigned char)s[119] == 0xa9,
          "long value cut at 120 bytes on a character boundary: %zu", strlen(s));

    /* patterns that are refused */
    static const char *BAD[] = {"../{name}", "{label}/../{name}", "./{name}", "{label}//{name}", "/srv/{name}",
                                "{label}/", "{colour}/{name}", "{label/{name}", ""};
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        s = expand(BAD[i], &v, &rc);
        CHECK(rc == FOLIO_EINVAL && strstr(s, "--file-by"), "'%s' refused: rc=%d %s", BAD[i], rc, s);
    }
    return tu_finish();
}
