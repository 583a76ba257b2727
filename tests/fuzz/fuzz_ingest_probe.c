/*
 * libFuzzer target: ingest_probe and ingest_decode_page on arbitrary bytes.
 * Both face files from anyone; neither may crash, leak or allocate beyond
 * the limits whatever the bytes say. Small limits keep each run cheap.
 */
#include "ingest/ingest.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ingest_limits lim = {.max_bytes = 1 << 20, .max_pixels = 4 << 20, .max_pages = 16};
    struct ingest_info info;
    struct folio_err err;
    if (ingest_probe(data, size, &lim, &info, &err) == 0) {
        for (int p = 0; p < info.pages && p < 4; p++) {
            struct ingest_page pg;
            if (ingest_decode_page(data, size, p, 64, p % 2 ? 1 : 3, &pg, &err) == 0)
                ingest_page_free(&pg);
        }
    }
    return 0;
}
