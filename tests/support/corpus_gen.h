/*
 * Test corpus generator for the ingest tests: real files in every format
 * ingest accepts, written by the real encoders (TurboJPEG, Leptonica), plus
 * the hostile ones (bomb headers, truncation, junk). Header-only so each
 * test binary that needs it just includes it; every function returns a
 * malloc'd buffer (free with free()) or NULL.
 *
 * Pages look like scans: white paper, rows of dark "words", light noise, so
 * that compressed sizes and decode costs resemble real documents.
 */
#ifndef FOLIO_TEST_CORPUS_GEN_H
#define FOLIO_TEST_CORPUS_GEN_H

#include "common/rng.h"

#include <leptonica/allheaders.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

/* A w x h gray "scan": text-like dark runs on light paper. */
static inline uint8_t *cg_gray_page(int w, int h, uint32_t seed)
{
    uint8_t *p = malloc((size_t)w * (size_t)h);
    if (!p)
        return NULL;
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++)
        p[i] = (uint8_t)(240 + (folio_rng32_next(&s) & 3));
    int line_h = h / 40 > 4 ? h / 40 : 4;
    for (int y0 = line_h; y0 + line_h < h; y0 += line_h * 2) {
        int x = w / 12;
        while (x < w - w / 12) {
            int ww = 3 + (int)(folio_rng32_next(&s) % (unsigned)(w / 20 + 4));
            uint8_t ink = (uint8_t)(20 + folio_rng32_next(&s) % 40);
            int top = y0 + (int)(folio_rng32_next(&s) % 3);
            for (int y = top; y < y0 + line_h * 2 / 3; y++)
                for (int xx = x; xx < x + ww && xx < w; xx++)
                    p[(size_t)y * (size_t)w + (size_t)xx] = ink;
            x += ww + 2 + (int)(folio_rng32_next(&s) % (unsigned)(w / 60 + 2));
        }
    }
    return p;
}

/* Left half dark, right half light, top 10 rows mid grey: any rotation or
 * mirror of it is recognisable. */
static inline uint8_t *cg_marker_rgb(int w, int h)
{
    uint8_t *p = malloc((size_t)w * (size_t)h * 3);
    if (!p)
        return NULL;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t v = y < 10 ? 128 : x < w / 2 ? 20 : 235;
            uint8_t *q = p + ((size_t)y * (size_t)w + (size_t)x) * 3;
            q[0] = v;
            q[1] = v;
            q[2] = v;
        }
    return p;
}

static inline uint8_t *cg_dup(const void *src, size_t n)
{
    uint8_t *d = malloc(n ? n : 1);
    if (d && n)
        memcpy(d, src, n);
    return d;
}

/* pixel_format TJPF_GRAY/TJPF_RGB/TJPF_CMYK; subsamp TJSAMP_*. */
static inline uint8_t *cg_jpeg(const uint8_t *px, int w, int h, int pixel_format, int subsamp,
                               int quality, int progressive, size_t *len)
{
    tjhandle tj = tjInitCompress();
    if (!tj)
        return NULL;
    unsigned char *jb = NULL;
    unsigned long jl = 0;
    int flags = progressive ? TJFLAG_PROGRESSIVE : 0;
    uint8_t *out = NULL;
    if (tjCompress2(tj, px, w, 0, h, pixel_format, &jb, &jl, subsamp, quality, flags) == 0) {
        out = cg_dup(jb, jl);
        *len = jl;
    }
    tjFree(jb);
    tjDestroy(tj);
    return out;
}

/* A gray scan page as a JPEG (color 4:2:0 when color is set). */
static inline uint8_t *cg_scan_jpeg(int w, int h, uint32_t seed, int color, int progressive,
                                    size_t *len)
{
    uint8_t *g = cg_gray_page(w, h, seed);
    if (!g)
        return NULL;
    uint8_t *out;
    if (color) {
        uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
        if (!rgb) {
            free(g);
            return NULL;
        }
        for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
            rgb[3 * i] = g[i];
            rgb[3 * i + 1] = g[i];
            rgb[3 * i + 2] = (uint8_t)(g[i] > 200 ? 225 : g[i]);
        }
        out = cg_jpeg(rgb, w, h, TJPF_RGB, TJSAMP_420, 85, progressive, len);
        free(rgb);
    } else {
        out = cg_jpeg(g, w, h, TJPF_GRAY, TJSAMP_GRAY, 85, progressive, len);
    }
    free(g);
    return out;
}

/* A uniform CMYK JPEG whose samples follow the Adobe (inverted) convention:
 * c,m,y,k are ink amounts 0..255; stored as 255 - ink. TurboJPEG writes it
 * as YCCK with an Adobe APP14 marker. */
static inline uint8_t *cg_cmyk_jpeg(int w, int h, int c, int m, int y, int k, size_t *len)
{
    uint8_t *px = malloc((size_t)w * (size_t)h * 4);
    if (!px)
        return NULL;
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
        px[4 * i] = (uint8_t)(255 - c);
        px[4 * i + 1] = (uint8_t)(255 - m);
        px[4 * i + 2] = (uint8_t)(255 - y);
        px[4 * i + 3] = (uint8_t)(255 - k);
    }
    uint8_t *out = cg_jpeg(px, w, h, TJPF_CMYK, TJSAMP_444, 95, 0, len);
    free(px);
    return out;
}

/* Inserts an EXIF APP1 segment with the given orientation after SOI. */
static inline uint8_t *cg_jpeg_with_exif(const uint8_t *j, size_t n, int orientation, size_t *len)
{
    static const uint8_t tmpl[] = {
        0xFF, 0xE1, 0x00, 0x22, 'E', 'x', 'i', 'f', 0, 0,
        'M', 'M', 0, 42, 0, 0, 0, 8,           /* TIFF header, IFD0 at 8 */
        0, 1,                                  /* one entry */
        0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, /* orientation SHORT x1 */
        0, 0, 0, 0};                           /* no next IFD */
    uint8_t *out = malloc(n + sizeof tmpl);
    if (!out)
        return NULL;
    memcpy(out, j, 2);
    memcpy(out + 2, tmpl, sizeof tmpl);
    out[2 + 29] = (uint8_t)orientation; /* low byte of the big-endian SHORT value */
    memcpy(out + 2 + sizeof tmpl, j + 2, n - 2);
    *len = n + sizeof tmpl;
    return out;
}

/* Rewrites the size in the first SOFn of a JPEG (a "bomb" header). */
static inline void cg_jpeg_set_size(uint8_t *j, size_t n, int w, int h)
{
    for (size_t i = 2; i + 9 < n;) {
        if (j[i] != 0xFF) {
            i++;
            continue;
        }
        uint8_t m = j[i + 1];
        size_t seg = (size_t)j[i + 2] << 8 | j[i + 3];
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            j[i + 5] = (uint8_t)(h >> 8);
            j[i + 6] = (uint8_t)h;
            j[i + 7] = (uint8_t)(w >> 8);
            j[i + 8] = (uint8_t)w;
            return;
        }
        i += 2 + seg;
    }
}

static inline uint32_t cg_crc32(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

/* Rewrites the IHDR size of a PNG and fixes its CRC (a "bomb" header). */
static inline void cg_png_set_size(uint8_t *p, size_t n, uint32_t w, uint32_t h)
{
    if (n < 33)
        return;
    uint8_t *d = p + 16;
    d[0] = (uint8_t)(w >> 24); d[1] = (uint8_t)(w >> 16); d[2] = (uint8_t)(w >> 8); d[3] = (uint8_t)w;
    d[4] = (uint8_t)(h >> 24); d[5] = (uint8_t)(h >> 16); d[6] = (uint8_t)(h >> 8); d[7] = (uint8_t)h;
    uint32_t crc = cg_crc32(p + 12, 17);
    p[29] = (uint8_t)(crc >> 24); p[30] = (uint8_t)(crc >> 16); p[31] = (uint8_t)(crc >> 8); p[32] = (uint8_t)crc;
}

/* An 8-bpp Leptonica Pix of a gray scan page (1 bpp when binary). */
static inline PIX *cg_pix(int w, int h, uint32_t seed, int binary)
{
    uint8_t *g = cg_gray_page(w, h, seed);
    if (!g)
        return NULL;
    PIX *pix = pixCreate(w, h, 8);
    if (pix) {
        for (int y = 0; y < h; y++) {
            l_uint32 *line = pixGetData(pix) + (size_t)y * (size_t)pixGetWpl(pix);
            for (int x = 0; x < w; x++)
                SET_DATA_BYTE(line, x, g[(size_t)y * (size_t)w + (size_t)x]);
        }
    }
    free(g);
    if (pix && binary) {
        PIX *b = pixThresholdToBinary(pix, 128);
        pixDestroy(&pix);
        pix = b;
    }
    return pix;
}

/* Writes pix in a Leptonica format (IFF_PNG, IFF_TIFF_G4, IFF_PNM, IFF_GIF,
 * IFF_BMP, IFF_WEBP (lossless), IFF_TIFF_ZIP). */
static inline uint8_t *cg_lept_write(PIX *pix, int iff, size_t *len)
{
    l_uint8 *d = NULL;
    size_t n = 0;
    l_ok rc = iff == IFF_WEBP ? pixWriteMemWebP(&d, &n, pix, 100, 1) : pixWriteMem(&d, &n, pix, iff);
    if (rc != 0 || !d)
        return NULL;
    uint8_t *out = cg_dup(d, n);
    lept_free(d);
    *len = n;
    return out;
}

/* A multi-page TIFF (G4 when binary) of `pages` scan pages, page i being
 * (w + 8 i) x (h + 4 i) so that pages are distinguishable by size. */
static inline uint8_t *cg_multipage_tiff(int pages, int w, int h, int binary, size_t *len)
{
    PIXA *pa = pixaCreate(pages);
    if (!pa)
        return NULL;
    for (int i = 0; i < pages; i++) {
        PIX *p = cg_pix(w + 8 * i, h + 4 * i, (uint32_t)(77 + i), binary);
        if (!p) {
            pixaDestroy(&pa);
            return NULL;
        }
        pixaAddPix(pa, p, L_INSERT);
    }
    l_uint8 *d = NULL;
    size_t n = 0;
    uint8_t *out = NULL;
    if (pixaWriteMemMultipageTiff(&d, &n, pa) == 0 && d) {
        out = cg_dup(d, n);
        *len = n;
    }
    lept_free(d);
    pixaDestroy(&pa);
    return out;
}

static inline uint8_t *cg_random_bytes(size_t n, uint32_t seed)
{
    uint8_t *d = malloc(n ? n : 1);
    if (!d)
        return NULL;
    uint32_t s = seed | 1;
    for (size_t i = 0; i < n; i++)
        d[i] = (uint8_t)folio_rng32_next(&s);
    /* Never start with a magic number by accident. */
    if (n)
        d[0] = 0x00;
    return d;
}

static inline uint8_t *cg_pdf(size_t *len)
{
    static const char pdf[] =
        "%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
        "2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
        "3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]>>endobj\n"
        "trailer<</Root 1 0 R>>\n%%EOF\n";
    *len = sizeof pdf - 1;
    return cg_dup(pdf, sizeof pdf - 1);
}

#endif
