/*
 * PNG through libpng with folio's own error and warning callbacks.
 *
 * Why not Leptonica's reader (lept.c, which still reads the other
 * formats): it creates its libpng reader with the default handlers, so
 * libpng's warnings ("iCCP: known incorrect sRGB profile", "tEXt: CRC
 * error") went to stderr as raw lines in the middle of folio's logfmt
 * logs, and Leptonica offers no hook to redirect them. Here a warning is
 * logged as one logfmt line (event=png_warning) and the first one is kept
 * for the ingest record; an error ends the decode with libpng's message.
 *
 * The pixels match what Leptonica produced: 16-bit samples cut to 8,
 * palettes and low bit depths expanded, transparency composited onto
 * white paper, colour turned to gray with Leptonica's luminance weights
 * (0.3, 0.5, 0.2), pHYs in pixels per metre read as ppi. Non-interlaced
 * files are converted row by row, so only the output page is held.
 *
 * Limits were checked from the IHDR before this runs (sniff.c, decode.c).
 */
#include "ingest/ingest_internal.h"

#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

struct png_ctx {
    const uint8_t *d;
    size_t n, off;
    char msg[240];   /* the error that ended the decode */
    char *warning;   /* the first warning (caller's buffer; may be NULL) */
    size_t wn;
    int warnings;
};

static void on_error(png_structp png, png_const_charp msg)
{
    struct png_ctx *c = png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    struct png_ctx *c = png_get_error_ptr(png);
    if (c->warning && c->wn && !c->warnings)
        snprintf(c->warning, c->wn, "PNG: %s", msg);
    /* a hostile file can warn once per chunk: the first few are enough */
    if (c->warnings++ < 5) {
        char q[300];
        folio_log(FOLIO_LOG_WARN, "png_warning", "message=%s", folio_lq(q, sizeof q, msg));
    }
}

static void on_read(png_structp png, png_bytep out, size_t len)
{
    struct png_ctx *c = png_get_io_ptr(png);
    if (len > c->n - c->off)
        png_error(png, "file ends early (truncated)");
    memcpy(out, c->d + c->off, len);
    c->off += len;
}

/* One decoded row (g, ga, rgb or rgba samples) into an output row. */
static void convert_row(const uint8_t *in, int in_ch, uint8_t *out, int out_ch, int w)
{
    for (int x = 0; x < w; x++) {
        const uint8_t *s = in + (size_t)x * (size_t)in_ch;
        unsigned r, g, b, a = 255;
        if (in_ch <= 2) {
            r = g = b = s[0];
            if (in_ch == 2)
                a = s[1];
        } else {
            r = s[0];
            g = s[1];
            b = s[2];
            if (in_ch == 4)
                a = s[3];
        }
        if (a != 255) { /* onto white paper, as pixAlphaBlendUniform */
            r = (a * r + (255 - a) * 255 + 127) / 255;
            g = (a * g + (255 - a) * 255 + 127) / 255;
            b = (a * b + (255 - a) * 255 + 127) / 255;
        }
        if (out_ch == 3) {
            out[3 * x] = (uint8_t)r;
            out[3 * x + 1] = (uint8_t)g;
            out[3 * x + 2] = (uint8_t)b;
        } else {
            out[x] = in_ch <= 2 ? (uint8_t)r : (uint8_t)(0.3f * r + 0.5f * g + 0.2f * b + 0.5f);
        }
    }
}

int ingest_png_decode(const uint8_t *d, size_t n, int channels, struct ingest_page *out, char *warning, size_t wn,
                      struct folio_err *err)
{
    memset(out, 0, sizeof *out);
    if (warning && wn)
        warning[0] = 0;
    struct png_ctx c = {.d = d, .n = n, .warning = warning, .wn = wn};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &c, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot create a PNG reader");
    }
    uint8_t *volatile row = NULL;
    volatile int rc = 0;
    if (setjmp(png_jmpbuf(png))) {
        rc = folio_err_set(err, FOLIO_EFORMAT, "PNG data is corrupt: %s", c.msg[0] ? c.msg : "libpng gave no reason");
        goto done;
    }
    png_set_read_fn(png, &c, on_read);
    /* the caller checked the size against its limits; these keep libpng's
     * own allocations for ancillary chunks (text, ICC profiles) small */
    png_set_user_limits(png, 1u << 20, 1u << 20);
    png_set_chunk_malloc_max(png, 8u << 20);
    png_read_info(png, info);
    png_set_expand(png);
    png_set_strip_16(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int w = (int)png_get_image_width(png, info), h = (int)png_get_image_height(png, info);
    int in_ch = png_get_channels(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if (in_ch < 1 || in_ch > 4 || png_get_bit_depth(png, info) != 8 || rowbytes < (size_t)w * (size_t)in_ch) {
        rc = folio_err_set(err, FOLIO_EFORMAT, "PNG decodes to %d channels of %d bits, not 8-bit samples", in_ch,
                           png_get_bit_depth(png, info));
        goto done;
    }
    rc = ingest_page_alloc(out, w, h, channels, err);
    if (rc)
        goto done;
    /* interlaced: the passes refine the whole image, so it is held once */
    size_t rows = passes > 1 ? (size_t)h : 1;
    row = malloc(rowbytes * rows);
    if (!row) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory decoding a %dx%d PNG", w, h);
        goto done;
    }
    if (passes > 1) {
        png_bytep *ptrs = malloc((size_t)h * sizeof *ptrs);
        if (!ptrs) {
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory decoding a %dx%d PNG", w, h);
            goto done;
        }
        for (int y = 0; y < h; y++)
            ptrs[y] = row + (size_t)y * rowbytes;
        /* png_read_image longjmps on error: ptrs must not leak then */
        png_bytep *volatile keep = ptrs;
        if (setjmp(png_jmpbuf(png))) {
            free(keep);
            rc = folio_err_set(err, FOLIO_EFORMAT, "PNG data is corrupt: %s", c.msg[0] ? c.msg : "libpng gave no reason");
            goto done;
        }
        png_read_image(png, ptrs);
        free(ptrs);
        for (int y = 0; y < h; y++)
            convert_row(row + (size_t)y * rowbytes, in_ch, out->pixels + (size_t)y * out->stride, channels, w);
    } else {
        for (int y = 0; y < h; y++) {
            png_read_row(png, row, NULL);
            convert_row(row, in_ch, out->pixels + (size_t)y * out->stride, channels, w);
        }
    }
    png_read_end(png, NULL);
    png_uint_32 xres = 0, yres = 0;
    int unit = 0;
    if (png_get_pHYs(png, info, &xres, &yres, &unit) && unit == PNG_RESOLUTION_METER && xres > 0)
        out->ppi = (int)lround(xres * 0.0254);
done:
    free(row);
    png_destroy_read_struct(&png, &info, NULL);
    if (rc)
        ingest_page_free(out);
    return rc;
}

int ingest_png_validate(const uint8_t *d, size_t n, char *warning, size_t wn, struct folio_err *err)
{
    struct ingest_page p;
    int rc = ingest_png_decode(d, n, 1, &p, warning, wn, err);
    ingest_page_free(&p);
    return rc;
}
