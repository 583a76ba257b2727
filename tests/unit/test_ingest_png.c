/* PNG through libpng with folio's callbacks (ingest/png.c, issue 21):
 *
 * 1. A PNG whose ancillary chunks make libpng warn (a tEXt chunk with a
 *    bad CRC, an iCCP chunk whose profile is not one) is accepted, and
 *    stderr gets logfmt lines only (event=png_warning), never libpng's raw
 *    "libpng warning: ..." (Leptonica's reader printed those); the probe
 *    keeps the first warning for the ingest record.
 * 2. The pixels are Leptonica's: RGBA composited onto white, a palette,
 *    16-bit samples, Adam7 interlacing, colour to gray, pHYs as ppi.
 * 3. A PNG with a damaged IDAT is corrupt, with libpng's reason. */
#include "ingest/ingest.h"
#include "tests/support/testutil.h"

#include <leptonica/allheaders.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t crc32_png(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return c ^ 0xffffffffu;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* png with a chunk inserted after IHDR (offset 33); crc_ok 0 breaks its CRC. */
static uint8_t *with_chunk(const uint8_t *png, size_t n, const char *type, const uint8_t *data, size_t dn,
                           int crc_ok, size_t *out_n)
{
    size_t cn = 12 + dn;
    uint8_t *o = malloc(n + cn);
    if (!o)
        return NULL;
    memcpy(o, png, 33);
    uint8_t *c = o + 33;
    put32(c, (uint32_t)dn);
    memcpy(c + 4, type, 4);
    memcpy(c + 8, data, dn);
    put32(c + 8 + dn, crc32_png(c + 4, 4 + dn) ^ (crc_ok ? 0 : 0x5a5a5a5au));
    memcpy(o + 33 + cn, png + 33, n - 33);
    *out_n = n + cn;
    return o;
}

static uint8_t *lept_png(PIX *p, size_t *n)
{
    uint8_t *d = NULL;
    return pixWriteMemPng(&d, n, p, 0) == 0 ? d : NULL;
}

/* Largest difference between a decoded page and Leptonica's view of pix. */
static int max_diff(const struct ingest_page *pg, PIX *pix, int channels)
{
    PIX *src = pix, *flat = NULL;
    if (pixGetDepth(src) == 32 && pixGetSpp(src) == 4)
        src = flat = pixAlphaBlendUniform(src, 0xffffff00);
    PIX *conv = channels == 3 ? pixConvertTo32(src) : pixConvertTo8(src, 0);
    pixDestroy(&flat);
    if (!conv || pixGetWidth(conv) != pg->width || pixGetHeight(conv) != pg->height)
        return 999;
    int worst = 0;
    for (int y = 0; y < pg->height; y++)
        for (int x = 0; x < pg->width; x++) {
            l_uint32 v;
            pixGetPixel(conv, x, y, &v);
            const uint8_t *q = pg->pixels + (size_t)y * pg->stride + (size_t)x * (size_t)channels;
            int d[3] = {0, 0, 0};
            if (channels == 3) {
                d[0] = abs((int)((v >> L_RED_SHIFT) & 255) - q[0]);
                d[1] = abs((int)((v >> L_GREEN_SHIFT) & 255) - q[1]);
                d[2] = abs((int)((v >> L_BLUE_SHIFT) & 255) - q[2]);
            } else {
                d[0] = abs((int)v - q[0]);
            }
            for (int k = 0; k < 3; k++)
                worst = d[k] > worst ? d[k] : worst;
        }
    pixDestroy(&conv);
    return worst;
}

/* A colourful RGBA test card: gradients, a half-transparent band. */
static PIX *card(int w, int h)
{
    PIX *p = pixCreate(w, h, 32);
    if (!p)
        return NULL;
    pixSetSpp(p, 4);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            l_uint32 a = y < h / 3 ? 255 : y < 2 * h / 3 ? 128 : (l_uint32)(x * 255 / (w - 1));
            pixSetPixel(p, x, y, ((l_uint32)(x * 255 / w) << 24) | ((l_uint32)(y * 255 / h) << 16) |
                                     ((l_uint32)((x + y) & 255) << 8) | a);
        }
    return p;
}

struct membuf {
    uint8_t *d;
    size_t n, cap;
};

static void mem_write(png_structp png, png_bytep p, size_t len)
{
    struct membuf *m = png_get_io_ptr(png);
    if (m->n + len > m->cap) {
        size_t nc = (m->n + len) * 2;
        uint8_t *nd = realloc(m->d, nc);
        if (!nd)
            png_error(png, "out of memory");
        m->d = nd;
        m->cap = nc;
    }
    memcpy(m->d + m->n, p, len);
    m->n += len;
}

static void mem_flush(png_structp png) { (void)png; }

/* Leptonica cannot write Adam7: an interlaced RGBA copy through libpng. */
static uint8_t *adam7_png(PIX *pix, size_t *n)
{
    int w = pixGetWidth(pix), h = pixGetHeight(pix);
    struct membuf m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    uint8_t *rows = malloc((size_t)w * (size_t)h * 4);
    png_bytep *ptr = malloc((size_t)h * sizeof *ptr);
    if (!info || !rows || !ptr || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        free(ptr);
        free(m.d);
        return NULL;
    }
    for (int y = 0; y < h; y++) {
        ptr[y] = rows + (size_t)y * (size_t)w * 4;
        for (int x = 0; x < w; x++) {
            l_uint32 v;
            pixGetPixel(pix, x, y, &v);
            ptr[y][4 * x] = (uint8_t)(v >> L_RED_SHIFT);
            ptr[y][4 * x + 1] = (uint8_t)(v >> L_GREEN_SHIFT);
            ptr[y][4 * x + 2] = (uint8_t)(v >> L_BLUE_SHIFT);
            ptr[y][4 * x + 3] = (uint8_t)(v >> L_ALPHA_SHIFT);
        }
    }
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGBA, PNG_INTERLACE_ADAM7,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_pHYs(png, info, 11811, 11811, PNG_RESOLUTION_METER); /* 300 ppi */
    png_set_rows(png, info, ptr);
    png_write_png(png, info, PNG_TRANSFORM_IDENTITY, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(ptr);
    *n = m.n;
    return m.d;
}

static void parity(const char *what, PIX *pix, int interlace)
{
    size_t n = 0;
    uint8_t *d = interlace ? adam7_png(pix, &n) : lept_png(pix, &n);
    TU_NEED(!interlace || (d && n > 28 && d[28] == 1), "%s: written interlaced", what);
    TU_NEED(d, "%s: encode", what);
    PIX *back = pixReadMem(d, n);
    TU_NEED(back, "%s: Leptonica reads it back", what);
    for (int ch = 1; ch <= 3; ch += 2) {
        struct ingest_page pg;
        struct folio_err err = {0};
        int rc = ingest_decode_page(d, n, 0, 0, ch, &pg, &err);
        CHECK(rc == 0, "%s (%d channels): %s", what, ch, err.msg);
        if (rc == 0) {
            int md = max_diff(&pg, back, ch);
            CHECK(md <= 1, "%s (%d channels): differs from Leptonica's pixels by up to %d", what, ch, md);
            CHECK(pg.ppi == pixGetXRes(back), "%s: ppi %d, Leptonica %d", what, pg.ppi, pixGetXRes(back));
        }
        ingest_page_free(&pg);
    }
    pixDestroy(&back);
    free(d);
}

int main(void)
{
    /* 1. Warnings. */
    PIX *g = pixCreate(300, 200, 8);
    REQUIRE(g, "pixCreate");
    pixSetAllArbitrary(g, 200);
    size_t n = 0;
    uint8_t *png = lept_png(g, &n);
    pixDestroy(&g);
    REQUIRE(png, "encode a PNG");
    const uint8_t text[] = "Comment\0made by a careless scanner";
    size_t n1 = 0, n2 = 0;
    uint8_t *bad_text = with_chunk(png, n, "tEXt", text, sizeof text - 1, 0, &n1);
    /* iCCP: name, NUL, method 0, then a "compressed profile" that is not zlib */
    const uint8_t iccp[] = "junk\0\0not a zlib stream at all";
    uint8_t *both = bad_text ? with_chunk(bad_text, n1, "iCCP", iccp, sizeof iccp - 1, 1, &n2) : NULL;
    REQUIRE(both, "build the hostile PNG");
    char keep[1100];
    const char *dir = tu_scratch("ingest_png");
    snprintf(keep, sizeof keep, "%s/warns.png", dir);
    FILE *kf = fopen(keep, "wb"); /* kept for a look with other readers */
    if (kf) {
        fwrite(both, 1, n2, kf);
        fclose(kf);
    }

    char path[1100];
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    int saved = tu_stderr_begin(path);
    REQUIRE(saved >= 0, "capture stderr");
    struct ingest_info info;
    struct folio_err err = {0};
    int prc = ingest_probe(both, n2, NULL, &info, &err);
    struct ingest_page pg;
    struct folio_err derr = {0};
    int drc = ingest_decode_page(both, n2, 0, 0, 3, &pg, &derr);
    char got[8192];
    tu_stderr_end(saved, path, got, sizeof got);
    CHECK(prc == 0, "probe of the warning PNG: %s", err.msg);
    CHECK(drc == 0 && pg.width == 300 && pg.height == 200, "decode of the warning PNG: %s", derr.msg);
    if (drc == 0)
        ingest_page_free(&pg);
    CHECK(strncmp(info.warning, "PNG: ", 5) == 0, "the first warning is kept: '%s'", info.warning);
    CHECK(strstr(got, "event=png_warning") && strstr(got, "CRC"), "warnings logged: %s", got);
    CHECK(strstr(got, "iCCP") != NULL, "the iCCP warning logged: %s", got);
    int lines = 0, raw = 0;
    for (char *line = strtok(got, "\n"); line; line = strtok(NULL, "\n")) {
        lines++;
        if (strncmp(line, "ts=", 3) != 0 || !strstr(line, " level=") || !strstr(line, " event=")) {
            raw++;
            fprintf(stderr, "not logfmt: %s\n", line);
        }
    }
    CHECK(lines >= 2 && raw == 0, "%d stderr lines, %d not logfmt", lines, raw);
    free(bad_text);
    free(both);

    /* 2. Pixel parity with Leptonica's reader. */
    PIX *c = card(97, 61);
    REQUIRE(c, "test card");
    pixSetResolution(c, 300, 300);
    parity("RGBA", c, 0);
    parity("RGBA interlaced", c, 1);
    PIX *rgb = pixRemoveAlpha(c);
    PIX *cm = rgb ? pixOctreeColorQuant(rgb, 128, 0) : NULL;
    if (cm)
        parity("palette", cm, 0);
    PIX *gray = rgb ? pixConvertRGBToLuminance(rgb) : NULL;
    PIX *bw = gray ? pixThresholdToBinary(gray, 128) : NULL;
    if (bw) {
        pixSetResolution(bw, 200, 200);
        parity("1-bit", bw, 0);
    }
    PIX *g16 = gray ? pixConvert8To16(gray, 8) : NULL;
    if (g16)
        parity("16-bit gray", g16, 0);
    CHECK(cm && bw && g16, "test images made");
    pixDestroy(&c);
    pixDestroy(&rgb);
    pixDestroy(&cm);
    pixDestroy(&gray);
    pixDestroy(&bw);
    pixDestroy(&g16);

    /* 3. Damaged image data. */
    size_t cut = n - 20; /* inside IDAT, before IEND */
    png[cut] ^= 0xff;
    int rc = ingest_decode_page(png, n, 0, 0, 1, &pg, &err);
    CHECK(rc == FOLIO_EFORMAT && strstr(err.msg, "PNG data is corrupt: "), "damaged IDAT: rc=%d %s", rc, err.msg);
    free(png);
    return tu_finish();
}
