/* A stored page as PNG (page_png.h). */
#include "pipeline/document/page_png.h"

#include "ingest/ingest.h"

#include <leptonica/allheaders.h>
#include <stdlib.h>

int page_png(const uint8_t *data, size_t n, int page, int max_side, uint8_t **png, size_t *len,
             struct folio_err *err)
{
    *png = NULL;
    *len = 0;
    struct ingest_page p = {0};
    int rc = ingest_decode_page(data, n, page, max_side, 3, &p, err);
    if (rc)
        return rc;
    PIX *pix = pixCreate(p.width, p.height, 32);
    if (!pix) {
        ingest_page_free(&p);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate a %dx%d image", p.width, p.height);
    }
    l_uint32 *d = pixGetData(pix);
    int wpl = pixGetWpl(pix);
    for (int y = 0; y < p.height; y++) {
        const uint8_t *src = p.pixels + (size_t)y * p.stride;
        l_uint32 *line = d + (size_t)y * (size_t)wpl;
        for (int x = 0; x < p.width; x++)
            composeRGBPixel(src[3 * x], src[3 * x + 1], src[3 * x + 2], &line[x]);
    }
    ingest_page_free(&p);
    l_uint8 *buf = NULL;
    size_t got = 0;
    int lrc = pixWriteMemPng(&buf, &got, pix, 0.0);
    pixDestroy(&pix);
    if (lrc != 0 || !buf)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot encode the page as PNG");
    /* Leptonica allocates with malloc by default; hand the buffer over. */
    *png = buf;
    *len = got;
    return 0;
}
