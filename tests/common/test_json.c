/* common/json.h, the one JSON writer: every control byte escaped, C1 and
 * bidi controls as \uXXXX, bytes that are not UTF-8 as \ufffd (one per
 * byte), members' commas placed by the writer inside containers, numbers
 * (NaN as null, 64-bit integers exact), a fixed buffer that reports its
 * overflow and never ends inside an escape or a character. The output is
 * also handed to Python's json module, a real parser. */
#include "common/common.h"
#include "common/json.h"
#include "tests/support/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 1 when Python's json module parses text and finds `expect` (a Python
 * expression) equal to it. */
static int python_agrees(const char *text, const char *expect)
{
    const char *dir = tu_scratch("common_json");
    char doc[1100], exp[1100];
    snprintf(doc, sizeof doc, "%s/doc.json", dir);
    snprintf(exp, sizeof exp, "%s/expect.py", dir);
    struct folio_err err = {0};
    if (folio_write_file_atomic(doc, text, strlen(text), &err) ||
        folio_write_file_atomic(exp, expect, strlen(expect), &err))
        return 0;
    return tu_sh("python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])) =="
                 " eval(open(sys.argv[2]).read()) else 1)' '%s' '%s'",
                 doc, exp) == 0;
}

static void test_escaping(void)
{
    /* every byte 0x01..0x7f in one string */
    char all[128];
    for (int i = 1; i < 128; i++)
        all[i - 1] = (char)i;
    all[127] = 0;
    struct json_buf b;
    json_init(&b);
    json_str(&b, all);
    TU_NEED(!json_status(&b), "status %d", json_status(&b));
    for (size_t i = 0; i < b.len; i++)
        CHECK((unsigned char)b.s[i] >= 0x20 && b.s[i] != 0x7f, "raw control byte 0x%02x at %zu", b.s[i], i);
    CHECK(strstr(b.s, "\\u0001") && strstr(b.s, "\\u001f") && strstr(b.s, "\\u007f") && strstr(b.s, "\\n") &&
              strstr(b.s, "\\t") && strstr(b.s, "\\r") && strstr(b.s, "\\\"") && strstr(b.s, "\\\\"),
          "escapes: %s", b.s);
    CHECK(python_agrees(b.s, "''.join(chr(i) for i in range(1, 128))"), "python reads back: %s", b.s);
    json_free(&b);

    /* C1 (CSI, NEL), bidi (RLO, LRI), stray, cut, overlong, surrogate; plain UTF-8 kept */
    json_init(&b);
    json_str(&b, "\xc2\x9b\xc2\x85\xe2\x80\xae\xe2\x81\xa6|\xff|\xe2\x82|\xc0\xaf|\xed\xa0\x80|\xc3\xa9\xf0\x9f\x93\x84");
    CHECK(b.s && strcmp(b.s, "\"\\u009b\\u0085\\u202e\\u2066|\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd|"
                             "\\ufffd\\ufffd\\ufffd|\xc3\xa9\xf0\x9f\x93\x84\"") == 0,
          "got %s", b.s);
    CHECK(tu_valid_utf8(b.s), "output is UTF-8");
    json_free(&b);

    /* counted strings keep NUL bytes, as \u0000 */
    json_init(&b);
    json_strn(&b, "a\0b", 3);
    CHECK(b.s && strcmp(b.s, "\"a\\u0000b\"") == 0, "got %s", b.s);
    json_free(&b);
}

static void test_structure(void)
{
    struct json_buf b;
    json_init(&b);
    json_obj(&b);
    json_key(&b, "n");
    json_num(&b, NAN);
    json_key(&b, "x");
    json_num(&b, 0.125);
    json_key(&b, "big");
    json_int(&b, -9007199254740993LL);
    json_key(&b, "u");
    json_uint(&b, UINT64_MAX);
    json_key(&b, "a");
    json_arr(&b);
    json_bool(&b, 1);
    json_null(&b);
    json_arr(&b);
    json_arr_end(&b);
    json_obj(&b);
    json_key(&b, "k\"");
    json_str(&b, "v");
    json_obj_end(&b);
    json_value_raw(&b, "{\"raw\":1}");
    json_arr_end(&b);
    json_key(&b, "e");
    json_obj(&b);
    json_obj_end(&b);
    json_obj_end(&b);
    TU_NEED(!json_status(&b), "status %d", json_status(&b));
    const char *want = "{\"n\":null,\"x\":0.125,\"big\":-9007199254740993,\"u\":18446744073709551615,"
                       "\"a\":[true,null,[],{\"k\\\"\":\"v\"},{\"raw\":1}],\"e\":{}}";
    CHECK(strcmp(b.s, want) == 0, "got %s", b.s);
    CHECK(python_agrees(b.s, "{'n': None, 'x': 0.125, 'big': -9007199254740993, 'u': 18446744073709551615,"
                             " 'a': [True, None, [], {'k\"': 'v'}, {'raw': 1}], 'e': {}}"),
          "python reads back: %s", b.s);
    json_free(&b);

    /* nesting past JSON_MAX_DEPTH and a close without an open are errors */
    json_init(&b);
    for (int i = 0; i <= JSON_MAX_DEPTH; i++)
        json_arr(&b);
    CHECK(json_status(&b) == FOLIO_ELIMIT, "too deep: %d", json_status(&b));
    json_free(&b);
    json_init(&b);
    json_obj_end(&b);
    CHECK(json_status(&b) == FOLIO_EINVAL, "unbalanced close: %d", json_status(&b));
    json_free(&b);
}

static void test_fixed(void)
{
    char buf[16];
    struct json_buf b;
    json_init_fixed(&b, buf, sizeof buf);
    json_obj(&b);
    json_key(&b, "k");
    json_str(&b, "12345");
    json_obj_end(&b);
    CHECK(!json_status(&b) && strcmp(buf, "{\"k\":\"12345\"}") == 0, "fits: %s", buf);
    json_free(&b);

    /* over the buffer: FOLIO_ELIMIT, and the prefix never ends inside an
     * escape or a UTF-8 sequence */
    json_init_fixed(&b, buf, sizeof buf);
    json_str(&b, "abc\xc3\xa9\xc3\xa9\n\n\n\n\n\n");
    CHECK(json_status(&b) == FOLIO_ELIMIT && b.oom, "overflow reported: %d", json_status(&b));
    CHECK(strlen(buf) < sizeof buf && tu_valid_utf8(buf), "prefix: %s", buf);
    size_t l = strlen(buf), bs = 0;
    for (size_t i = l; i > 0 && buf[i - 1] == '\\'; i--)
        bs++;
    CHECK(bs % 2 == 0, "cut inside an escape: %s", buf);
    json_free(&b);

    /* json_escape: the inside of a string for a format, cut on a character */
    char e[8];
    json_escape(e, sizeof e, "\xe6\x96\x87\xe6\x96\x87\xe6\x96\x87");
    CHECK(strcmp(e, "\xe6\x96\x87\xe6\x96\x87") == 0, "cut on a character: %s", e);
    json_escape(e, sizeof e, "a\"b");
    CHECK(strcmp(e, "a\\\"b") == 0, "escaped: %s", e);
}

int main(void)
{
    test_escaping();
    test_structure();
    test_fixed();
    return tu_finish();
}
