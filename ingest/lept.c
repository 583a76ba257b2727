/*
 * TIFF, PNM, WebP, GIF and BMP through Leptonica (PNG: png.c, through libpng
 * with folio's callbacks, as Leptonica lets libpng warn on stderr).
 *
 * Leptonica reports failures by printing to stderr and returning NULL. The
 * message is what a user needs in a rejection ("IDAT: CRC error"), and
 * stray lines on stderr would break folio's one-event-per-line logs, so a
 * stderr handler captures the text into a per-thread buffer: each call
 * clears it, decodes, and copies what was said into the error. The handler
 * is installed once per process; the buffer being thread-local keeps
 * concurrent decodes from mixing their messages.
 *
 * Limits are checked before anything here runs (decode.c, sniff.c), so a
 * page reaching Leptonica has a size the caller agreed to pay for.
 */
#include "ingest/ingest_internal.h"

#include <leptonica/allheaders.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char lept_msg[320];

static void lept_capture(const char *msg)
{
    size_t have = strlen(lept_msg);
    if (have + 3 >= sizeof lept_msg)
        return;
    if (have) {
        memcpy(lept_msg + have, "; ", 3);
        have += 2;
    }
    size_t room = sizeof lept_msg - have - 1, i = 0;
    for (; msg[i] && i < room; i++)
        lept_msg[have + i] = (msg[i] == '\n' || msg[i] == '\r') ? ' ' : msg[i];
    lept_msg[have + i] = '\0';
    while (have + i > 0 && lept_msg[have + i - 1] == ' ')
        lept_msg[have + --i] = '\0';
}

static pthread_once_t lept_once = PTHREAD_ONCE_INIT;
static void lept_install(void) { leptSetStderrHandler(lept_capture); }

static void lept_begin(void)
{
    pthread_once(&lept_once, lept_install);
    lept_msg[0] = '\0';
}

static const char *lept_said(void) { return lept_msg[0] ? lept_msg : "no message from the decoder"; }

static const char *fmt_name(enum ingest_format f)
{
    switch (f) {
    case INGEST_FMT_PNG: return "PNG";
    case INGEST_FMT_TIFF: return "TIFF";
    case INGEST_FMT_PNM: return "PNM";
    case INGEST_FMT_WEBP: return "WebP";
    case INGEST_FMT_GIF: return "GIF";
    case INGEST_FMT_BMP: return "BMP";
    default: return "image";
    }
}

int ingest_lept_validate(const uint8_t *d, size_t n, enum ingest_format f, int pages,
                  struct folio_err *err)
{
    lept_begin();
    if (f != INGEST_FMT_TIFF) {
        PIX *pix = pixReadMem(d, n);
        if (!pix)
            return folio_err_set(err, FOLIO_EFORMAT, "%s data is corrupt: %s", fmt_name(f), lept_said());
        pixDestroy(&pix);
        return 0;
    }
    /* The offset iterator reads each page once: validating a 2000-page
     * TIFF stays linear instead of re-walking the chain per page. */
    size_t offset = 0;
    for (int p = 0; p < pages; p++) {
        PIX *pix = pixReadMemFromMultipageTiff(d, n, &offset);
        if (!pix)
            return folio_err_set(err, FOLIO_EFORMAT, "TIFF page %d of %d is corrupt: %s", p + 1,
                                 pages, lept_said());
        pixDestroy(&pix);
        if (offset == 0 && p + 1 < pages)
            return folio_err_set(err, FOLIO_EFORMAT,
                                 "TIFF ends after page %d although %d pages are listed", p + 1, pages);
    }
    return 0;
}

/* Copies a 1- or 3-channel 8-bit view of pix into out. */
static int pix_to_page(PIX *pix, int channels, struct ingest_page *out, struct folio_err *err)
{
    PIX *conv = NULL, *flat = NULL;
    PIX *src = pix;
    /* Transparent areas of a scan are paper: composite onto white. */
    if (pixGetDepth(src) == 32 && pixGetSpp(src) == 4) {
        flat = pixAlphaBlendUniform(src, 0xffffff00);
        if (!flat)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot flatten the alpha channel: %s", lept_said());
        src = flat;
    }
    conv = channels == 3 ? pixConvertTo32(src) : pixConvertTo8(src, 0);
    pixDestroy(&flat);
    if (!conv)
        return folio_err_set(err, FOLIO_EFORMAT, "cannot convert a %d-bpp image to %s: %s",
                             pixGetDepth(pix), channels == 3 ? "RGB" : "gray", lept_said());
    int w = pixGetWidth(conv), h = pixGetHeight(conv);
    int rc = ingest_page_alloc(out, w, h, channels, err);
    if (rc) {
        pixDestroy(&conv);
        return rc;
    }
    const l_uint32 *data = pixGetData(conv);
    int wpl = pixGetWpl(conv);
    for (int y = 0; y < h; y++) {
        const l_uint32 *line = data + (size_t)y * (size_t)wpl;
        uint8_t *dst = out->pixels + (size_t)y * out->stride;
        if (channels == 3) {
            for (int x = 0; x < w; x++) {
                l_uint32 px = line[x];
                dst[3 * x] = (uint8_t)(px >> L_RED_SHIFT);
                dst[3 * x + 1] = (uint8_t)(px >> L_GREEN_SHIFT);
                dst[3 * x + 2] = (uint8_t)(px >> L_BLUE_SHIFT);
            }
        } else {
            for (int x = 0; x < w; x++)
                dst[x] = (uint8_t)GET_DATA_BYTE(line, x);
        }
    }
    pixDestroy(&conv);
    return 0;
}

int ingest_lept_decode(const uint8_t *d, size_t n, enum ingest_format f, int page, int channels,
                struct ingest_page *out, struct folio_err *err)
{
    lept_begin();
    PIX *pix = f == INGEST_FMT_TIFF ? pixReadMemTiff(d, n, page) : pixReadMem(d, n);
    if (!pix)
        return folio_err_set(err, FOLIO_EFORMAT, "%s page %d cannot be decoded: %s", fmt_name(f),
                             page + 1, lept_said());
    int rc = pix_to_page(pix, channels, out, err);
    /* PNG pHYs, TIFF XResolution, BMP pels per metre: Leptonica reads them
     * into the Pix; implausible values (1, 72 from screen tools) are for the
     * OCR side to judge, not here. */
    if (rc == 0)
        out->ppi = pixGetXRes(pix) > 0 ? pixGetXRes(pix) : 0;
    pixDestroy(&pix);
    return rc;
}
