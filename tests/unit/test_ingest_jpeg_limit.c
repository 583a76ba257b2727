/* A JPEG whose frame header claims 65535x65535 (past libjpeg's 65500 per
 * side, which libjpeg reports as an error of its own) is a size limit:
 * `too_many_pixels` with the claimed size, not `corrupt` (issue 21). The
 * worker's decoder says the same. */
#include "ingest/ingest.h"
#include "tests/support/corpus_gen.h"
#include "tests/support/testutil.h"

#include <stdlib.h>
#include <string.h>

/* Rewrites the first SOF's height and width. */
static int patch_sof(uint8_t *d, size_t n, int w, int h)
{
    for (size_t i = 2; i + 9 < n; i++)
        if (d[i] == 0xFF && d[i + 1] >= 0xC0 && d[i + 1] <= 0xC2) {
            d[i + 5] = (uint8_t)(h >> 8);
            d[i + 6] = (uint8_t)h;
            d[i + 7] = (uint8_t)(w >> 8);
            d[i + 8] = (uint8_t)w;
            return 0;
        }
    return -1;
}

int main(void)
{
    size_t n = 0;
    uint8_t *d = cg_scan_jpeg(320, 200, 7, 1, 0, &n);
    REQUIRE(d, "encode a JPEG");
    REQUIRE(patch_sof(d, n, 65535, 65535) == 0, "find the frame header");
    struct folio_err err = {0};
    struct ingest_info info;
    int rc = ingest_probe(d, n, NULL, &info, &err);
    CHECK(rc == FOLIO_ELIMIT, "probe rc %d (%s)", rc, err.msg);
    CHECK(strcmp(info.reason, "too_many_pixels") == 0, "reason '%s', want too_many_pixels (%s)", info.reason, err.msg);
    CHECK(info.actual_value == 65535ull * 65535ull && strcmp(info.limit_name, "max_pixels") == 0,
          "limit %s actual %llu", info.limit_name, (unsigned long long)info.actual_value);
    CHECK(strstr(err.msg, "65535x65535") != NULL, "message names the size: %s", err.msg);
    struct ingest_page pg;
    rc = ingest_decode_page(d, n, 0, 2000, 1, &pg, &err);
    CHECK(rc == FOLIO_ELIMIT, "decode rc %d (%s)", rc, err.msg);
    if (rc == 0)
        ingest_page_free(&pg);
    /* within libjpeg's range, a broken-but-small header is still corrupt */
    REQUIRE(patch_sof(d, n, 0, 200) == 0, "patch");
    rc = ingest_probe(d, n, NULL, &info, &err);
    CHECK(rc == FOLIO_EFORMAT && strcmp(info.reason, "corrupt") == 0, "zero width: rc %d reason %s", rc, info.reason);
    free(d);
    return tu_finish();
}
