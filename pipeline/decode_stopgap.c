/*
 * STOPGAP until the ingest module's decoder lands on main: weak definitions
 * of ingest_decode_page/ingest_page_free over Leptonica's pixReadMem (PNG,
 * TIFF, PNM, JPEG...), so the worker can be built and tested now. The
 * ingest module's real (strong) definitions replace these at link time;
 * this file is deleted when they land.
 */
#include "ingest/ingest.h"

#include <leptonica/allheaders.h>
#include <stdlib.h>
#include <string.h>

__attribute__((weak)) int ingest_decode_page(const uint8_t *data, size_t len, int page, int max_side,
                                             int want_channels, struct ingest_page *out,
                                             struct folio_err *err)
{
    (void)max_side;
    memset(out, 0, sizeof *out);
    if (page != 0)
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "stopgap decoder reads page 0 only");
    PIX *p = pixReadMem(data, len);
    if (!p)
        return folio_err_set(err, FOLIO_EFORMAT, "cannot decode a %zu-byte image", len);
    PIX *g = pixConvertTo8(p, 0);
    pixDestroy(&p);
    if (!g)
        return folio_err_set(err, FOLIO_EFORMAT, "cannot convert the image to gray");
    int w = pixGetWidth(g), h = pixGetHeight(g);
    out->pixels = malloc((size_t)w * (size_t)h * (size_t)(want_channels == 3 ? 3 : 1));
    if (!out->pixels) {
        pixDestroy(&g);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate a %dx%d page", w, h);
    }
    out->width = w;
    out->height = h;
    out->channels = want_channels == 3 ? 3 : 1;
    out->stride = (size_t)w * (size_t)out->channels;
    l_uint32 *d = pixGetData(g);
    int wpl = pixGetWpl(g);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t v = (uint8_t)GET_DATA_BYTE(d + y * wpl, x);
            for (int ch = 0; ch < out->channels; ch++)
                out->pixels[(size_t)y * out->stride + (size_t)x * (size_t)out->channels + (size_t)ch] = v;
        }
    pixDestroy(&g);
    return 0;
}

__attribute__((weak)) void ingest_page_free(struct ingest_page *p)
{
    if (!p)
        return;
    free(p->pixels);
    p->pixels = NULL;
}

__attribute__((weak)) int ingest_probe(const uint8_t *data, size_t len, const struct ingest_limits *lim,
                                       struct ingest_info *out, struct folio_err *err)
{
    (void)lim;
    memset(out, 0, sizeof *out);
    l_int32 format = 0, w = 0, h = 0;
    if (pixReadHeaderMem(data, len, &format, &w, &h, NULL, NULL, NULL) != 0)
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "not an image Leptonica can read (%zu bytes)", len);
    snprintf(out->media_type, sizeof out->media_type, "image/x-leptonica-%d", (int)format);
    out->pages = 1;
    out->width = w;
    out->height = h;
    return 0;
}

__attribute__((weak)) void ingest_limits_default(struct ingest_limits *l)
{
    l->max_bytes = 512ull << 20;
    l->max_pixels = 300000000ull;
    l->max_pages = 2000;
}
