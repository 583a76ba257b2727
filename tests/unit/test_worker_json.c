/* The JSON writer the worker uses for scores, timings and `folio classify`
 * output: OCR text with quotes, control bytes and invalid UTF-8 still
 * becomes valid JSON (PostgreSQL's jsonb would refuse anything else and
 * the job would fail), numbers that are not finite become null. */
#include "common/json.h"
#include "tests/support/testutil.h"

#include <math.h>
#include <string.h>

int main(void)
{
    struct json_buf b;
    json_init(&b);
    json_raw(&b, "{");
    json_key(&b, "t");
    json_str(&b, "a\"b\\c\nd\te\x01 \xc3\xa9 \xff\xfe \xe2\x82 ok \xf0\x9f\x93\x84");
    json_raw(&b, ",");
    json_key(&b, "n");
    json_num(&b, NAN);
    json_raw(&b, ",");
    json_key(&b, "x");
    json_num(&b, 0.125);
    json_raw(&b, "}");
    REQUIRE(!b.oom && b.s, "buffer");
    const char *want = "{\"t\":\"a\\\"b\\\\c\\nd\\te\\u0001 \xc3\xa9 \\ufffd\\ufffd \\ufffd\\ufffd ok \xf0\x9f\x93\x84\","
                       "\"n\":null,\"x\":0.125}";
    CHECK(strcmp(b.s, want) == 0, "got %s", b.s);
    /* Overlong and surrogate encodings are not valid UTF-8 either. */
    json_free(&b);
    json_init(&b);
    json_str(&b, "\xc0\xaf\xed\xa0\x80");
    CHECK(b.s && strcmp(b.s, "\"\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"") == 0, "got %s", b.s);
    json_free(&b);
    /* Grows past its first allocation. */
    json_init(&b);
    for (int i = 0; i < 10000; i++)
        json_raw(&b, "0123456789");
    CHECK(b.len == 100000 && !b.oom, "len %zu", b.len);
    json_free(&b);
    return tu_finish();
}
