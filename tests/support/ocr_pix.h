/* For the OCR tests (tests/unit/test_ocr_*.c): a Leptonica image as the
 * 8-bit gray buffer ocr_page takes, and ocr_page on it. Header-only so
 * that only the tests that include it link Leptonica and the OCR layer. */
#ifndef FOLIO_TESTS_OCR_PIX_H
#define FOLIO_TESTS_OCR_PIX_H

#include "engine/ocr.h"

#include <leptonica/allheaders.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Gray 8-bit copy of pix (malloc'd), *w x *h; NULL when out of memory. */
static inline uint8_t *tu_pix_gray(PIX *pix, int *w, int *h)
{
    PIX *g = pixConvertTo8(pix, 0);
    if (!g)
        return NULL;
    *w = pixGetWidth(g);
    *h = pixGetHeight(g);
    uint8_t *buf = malloc((size_t)*w * (size_t)*h);
    l_uint32 *data = pixGetData(g);
    int wpl = pixGetWpl(g);
    for (int y = 0; buf && y < *h; y++)
        for (int x = 0; x < *w; x++)
            buf[(size_t)y * (size_t)*w + (size_t)x] = (uint8_t)GET_DATA_BYTE(data + y * wpl, x);
    pixDestroy(&g);
    return buf;
}

/* ocr_page on pix (not consumed) as a gray page stating `ppi` (0 = none);
 * -1 when the copy fails, else ocr_page's code (its error printed). */
static inline int tu_ocr_pix(struct ocr_engine *e, PIX *pix, int ppi, struct ocr_page_result *r)
{
    int w, h;
    uint8_t *buf = tu_pix_gray(pix, &w, &h);
    if (!buf)
        return -1;
    struct ocr_image img = {.width = w, .height = h, .channels = 1, .stride = (size_t)w, .pixels = buf, .ppi = ppi};
    struct folio_err err = {0};
    int rc = ocr_page(e, &img, NULL, r, &err);
    if (rc)
        folio_err_print(stderr, &err);
    free(buf);
    return rc;
}

#endif
