/*
 * ingest decode API against real files made by the real encoders: every
 * accepted format, CMYK/YCCK and progressive JPEG, EXIF orientation, DCT
 * scaling to a maximum side, multi-page TIFF (G4), and the hostile inputs
 * (bomb headers rejected from the header without allocating, truncation,
 * corruption, junk, limits).
 */
#include "ingest/ingest.h"
#include "tests/support/corpus_gen.h"
#include "tests/support/testutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static double mean_abs_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += abs((int)a[i] - (int)b[i]);
    return n ? s / (double)n : 0;
}

static double mean(const struct ingest_page *p)
{
    double s = 0;
    size_t n = (size_t)p->width * (size_t)p->height * (size_t)p->channels;
    for (size_t i = 0; i < n; i++)
        s += p->pixels[i];
    return n ? s / (double)n : 0;
}

static const uint8_t *px(const struct ingest_page *p, int x, int y)
{
    return p->pixels + (size_t)y * p->stride + (size_t)x * (size_t)p->channels;
}

/* A lossless format must round-trip the exact gray values. */
static void check_lossless(const char *what, int iff, const char *media)
{
    const int w = 300, h = 200;
    PIX *pix = cg_pix(w, h, 5, 0);
    size_t n = 0;
    uint8_t *d = cg_lept_write(pix, iff, &n);
    CHECK(d != NULL, "%s: encoder produced nothing", what);
    if (!d) {
        pixDestroy(&pix);
        return;
    }
    struct ingest_info info;
    struct folio_err err = {0};
    int rc = ingest_probe(d, n, NULL, &info, &err);
    CHECK(rc == 0, "%s: probe rc %d: %s", what, rc, err.msg);
    CHECK(strcmp(info.media_type, media) == 0, "%s: media type %s", what, info.media_type);
    CHECK(info.pages == 1 && info.width == w && info.height == h, "%s: %d pages %dx%d", what,
          info.pages, info.width, info.height);
    struct ingest_page pg;
    rc = ingest_decode_page(d, n, 0, 0, 1, &pg, &err);
    CHECK(rc == 0, "%s: decode rc %d: %s", what, rc, err.msg);
    if (rc == 0) {
        CHECK(pg.width == w && pg.height == h && pg.channels == 1, "%s: decoded %dx%dx%d", what,
              pg.width, pg.height, pg.channels);
        int mismatches = 0;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                l_uint32 v;
                pixGetPixel(pix, x, y, &v);
                if (*px(&pg, x, y) != v)
                    mismatches++;
            }
        CHECK(mismatches == 0, "%s: %d pixels differ from the source", what, mismatches);
        ingest_page_free(&pg);
    }
    /* RGB output of a gray source has r == g == b. */
    rc = ingest_decode_page(d, n, 0, 100, 3, &pg, &err);
    CHECK(rc == 0, "%s: decode rgb rc %d: %s", what, rc, err.msg);
    if (rc == 0) {
        CHECK(pg.width == 100 && pg.height == 67 && pg.channels == 3, "%s: fit gives %dx%dx%d", what,
              pg.width, pg.height, pg.channels);
        const uint8_t *q = px(&pg, 50, 30);
        CHECK(q[0] == q[1] && q[1] == q[2], "%s: gray source decoded to (%d,%d,%d)", what, q[0], q[1], q[2]);
        ingest_page_free(&pg);
    }
    free(d);
    pixDestroy(&pix);
}

static void test_lossless_formats(void)
{
    check_lossless("png", IFF_PNG, "image/png");
    check_lossless("pnm", IFF_PNM, "image/x-portable-anymap");
    check_lossless("bmp", IFF_BMP, "image/bmp");
    check_lossless("gif", IFF_GIF, "image/gif");
    check_lossless("webp", IFF_WEBP, "image/webp");
    check_lossless("tiff-zip", IFF_TIFF_ZIP, "image/tiff");
}

static void test_jpeg_baseline_progressive_gray(void)
{
    const int w = 640, h = 480;
    size_t nb = 0, np = 0, ng = 0;
    uint8_t *base = cg_scan_jpeg(w, h, 9, 1, 0, &nb);
    uint8_t *prog = cg_scan_jpeg(w, h, 9, 1, 1, &np);
    uint8_t *gray = cg_scan_jpeg(w, h, 9, 0, 0, &ng);
    TU_NEED(base && prog && gray, "jpeg encode");
    struct folio_err err = {0};
    struct ingest_info info;
    CHECK(ingest_probe(base, nb, NULL, &info, &err) == 0, "baseline probe: %s", err.msg);
    CHECK(strcmp(info.media_type, "image/jpeg") == 0 && info.width == w && info.height == h &&
              info.pages == 1 && info.exif_orientation == 0 && info.warning[0] == '\0',
          "baseline info %s %dx%d p%d o%d w'%s'", info.media_type, info.width, info.height, info.pages,
          info.exif_orientation, info.warning);
    CHECK(ingest_probe(prog, np, NULL, &info, &err) == 0, "progressive probe: %s", err.msg);
    CHECK(ingest_probe(gray, ng, NULL, &info, &err) == 0, "gray probe: %s", err.msg);

    struct ingest_page a, b, g;
    TU_NEED(ingest_decode_page(base, nb, 0, 0, 3, &a, &err) == 0, "decode baseline: %s", err.msg);
    TU_NEED(ingest_decode_page(prog, np, 0, 0, 3, &b, &err) == 0, "decode progressive: %s", err.msg);
    TU_NEED(ingest_decode_page(gray, ng, 0, 0, 1, &g, &err) == 0, "decode gray: %s", err.msg);
    CHECK(a.width == w && a.height == h && a.channels == 3, "baseline %dx%d", a.width, a.height);
    CHECK(b.width == w && b.height == h, "progressive %dx%d", b.width, b.height);
    /* Same pixels, same quality: the two encodings decode nearly alike. */
    double d = mean_abs_diff(a.pixels, b.pixels, (size_t)w * h * 3);
    CHECK(d < 1.0, "progressive differs from baseline by %.2f on average", d);
    /* Gray decode agrees with the source page. */
    uint8_t *src = cg_gray_page(w, h, 9);
    d = mean_abs_diff(g.pixels, src, (size_t)w * h);
    CHECK(g.channels == 1 && d < 6.0, "gray decode differs from the source by %.2f", d);
    free(src);
    ingest_page_free(&a);
    ingest_page_free(&b);
    ingest_page_free(&g);
    free(base);
    free(prog);
    free(gray);
}

static void test_jpeg_cmyk(void)
{
    /* Pure red ink mix: no cyan, full magenta and yellow, no black. */
    size_t n = 0;
    uint8_t *j = cg_cmyk_jpeg(64, 48, 0, 255, 255, 0, &n);
    TU_NEED(j, "cmyk encode");
    struct folio_err err = {0};
    struct ingest_info info;
    CHECK(ingest_probe(j, n, NULL, &info, &err) == 0, "cmyk probe: %s", err.msg);
    struct ingest_page p;
    TU_NEED(ingest_decode_page(j, n, 0, 0, 3, &p, &err) == 0, "cmyk decode: %s", err.msg);
    const uint8_t *c = px(&p, 32, 24);
    CHECK(c[0] > 235 && c[1] < 20 && c[2] < 20, "CMYK red decoded as (%d,%d,%d)", c[0], c[1], c[2]);
    /* Leptonica's own CMYK conversion agrees. */
    PIX *lp = pixReadMem(j, n);
    CHECK(lp && pixGetDepth(lp) == 32, "leptonica reads the CMYK JPEG");
    if (lp) {
        l_int32 r, g, b;
        pixGetRGBPixel(lp, 32, 24, &r, &g, &b);
        CHECK(abs(r - c[0]) <= 2 && abs(g - c[1]) <= 2 && abs(b - c[2]) <= 2,
              "leptonica (%d,%d,%d) vs ingest (%d,%d,%d)", r, g, b, c[0], c[1], c[2]);
        pixDestroy(&lp);
    }
    ingest_page_free(&p);
    /* Gray output of CMYK: a 50% black page is mid grey. */
    free(j);
    j = cg_cmyk_jpeg(64, 48, 0, 0, 0, 128, &n);
    TU_NEED(j, "cmyk encode 2");
    TU_NEED(ingest_decode_page(j, n, 0, 16, 1, &p, &err) == 0, "cmyk gray decode: %s", err.msg);
    CHECK(p.width == 16 && p.height == 12 && p.channels == 1, "cmyk gray fit %dx%d", p.width, p.height);
    CHECK(abs(*px(&p, 8, 6) - 127) <= 3, "50%% black decoded as %d", *px(&p, 8, 6));
    ingest_page_free(&p);
    free(j);
}

static void test_exif_orientation(void)
{
    const int w = 80, h = 60;
    uint8_t *rgb = cg_marker_rgb(w, h);
    size_t n = 0, ne = 0;
    uint8_t *j = cg_jpeg(rgb, w, h, TJPF_RGB, TJSAMP_444, 95, 0, &n);
    TU_NEED(j, "jpeg");
    struct folio_err err = {0};
    struct ingest_info info;
    /* Orientation 6: stored image must be turned 90 degrees clockwise, so the
     * grey top band ends up on the right and the dark left half on top. */
    uint8_t *e = cg_jpeg_with_exif(j, n, 6, &ne);
    CHECK(ingest_probe(e, ne, NULL, &info, &err) == 0, "exif probe: %s", err.msg);
    CHECK(info.exif_orientation == 6 && info.width == w && info.height == h,
          "orientation %d, size %dx%d (stored size expected)", info.exif_orientation, info.width, info.height);
    struct ingest_page p;
    TU_NEED(ingest_decode_page(e, ne, 0, 0, 1, &p, &err) == 0, "decode: %s", err.msg);
    CHECK(p.width == h && p.height == w, "rotated size %dx%d", p.width, p.height);
    CHECK(*px(&p, h - 3, w / 2) > 100 && *px(&p, h - 3, w / 2) < 160, "right edge is the grey band (%d)",
          *px(&p, h - 3, w / 2));
    CHECK(*px(&p, 20, 10) < 60, "top is the dark half (%d)", *px(&p, 20, 10));
    CHECK(*px(&p, 20, w - 10) > 200, "bottom is the light half (%d)", *px(&p, 20, w - 10));
    ingest_page_free(&p);
    free(e);
    /* Orientation 3: upside down. */
    e = cg_jpeg_with_exif(j, n, 3, &ne);
    TU_NEED(ingest_decode_page(e, ne, 0, 0, 1, &p, &err) == 0, "decode 3: %s", err.msg);
    CHECK(p.width == w && p.height == h, "size %dx%d", p.width, p.height);
    CHECK(*px(&p, w / 2, h - 3) > 100 && *px(&p, w / 2, h - 3) < 160, "grey band at the bottom (%d)",
          *px(&p, w / 2, h - 3));
    CHECK(*px(&p, 10, 30) > 200 && *px(&p, w - 10, 30) < 60, "left/right swapped (%d,%d)",
          *px(&p, 10, 30), *px(&p, w - 10, 30));
    ingest_page_free(&p);
    free(e);
    free(j);
    free(rgb);
}

static void test_dct_scaling(void)
{
    const int w = 2550, h = 3300;
    size_t n = 0;
    uint8_t *j = cg_scan_jpeg(w, h, 3, 1, 0, &n);
    TU_NEED(j, "jpeg");
    struct folio_err err = {0};
    struct ingest_page full, fit, tiny;
    TU_NEED(ingest_decode_page(j, n, 0, 0, 1, &full, &err) == 0, "full: %s", err.msg);
    TU_NEED(ingest_decode_page(j, n, 0, 1000, 1, &fit, &err) == 0, "fit: %s", err.msg);
    TU_NEED(ingest_decode_page(j, n, 0, 100, 3, &tiny, &err) == 0, "tiny: %s", err.msg);
    CHECK(full.width == w && full.height == h, "full %dx%d", full.width, full.height);
    CHECK(fit.height == 1000 && fit.width == 773, "fit %dx%d", fit.width, fit.height);
    CHECK(tiny.height == 100 && tiny.width == 77 && tiny.channels == 3, "tiny %dx%d", tiny.width, tiny.height);
    /* Scaling keeps the page's overall brightness. */
    CHECK(abs((int)(mean(&full) - mean(&fit))) < 3, "mean full %.1f fit %.1f", mean(&full), mean(&fit));
    CHECK(abs((int)(mean(&full) - mean(&tiny))) < 4, "mean full %.1f tiny %.1f", mean(&full), mean(&tiny));
    /* A page smaller than max_side is never upscaled. */
    struct ingest_page same;
    TU_NEED(ingest_decode_page(j, n, 0, 5000, 1, &same, &err) == 0, "same: %s", err.msg);
    CHECK(same.width == w && same.height == h, "no upscale %dx%d", same.width, same.height);
    ingest_page_free(&same);
    ingest_page_free(&full);
    ingest_page_free(&fit);
    ingest_page_free(&tiny);
    free(j);
}

static void test_multipage_tiff(void)
{
    size_t n = 0;
    uint8_t *t = cg_multipage_tiff(3, 400, 300, 1, &n);
    TU_NEED(t, "tiff");
    struct folio_err err = {0};
    struct ingest_info info;
    CHECK(ingest_probe(t, n, NULL, &info, &err) == 0, "probe: %s", err.msg);
    CHECK(info.pages == 3 && info.width == 400 && info.height == 300 &&
              strcmp(info.media_type, "image/tiff") == 0,
          "tiff info %s p%d %dx%d", info.media_type, info.pages, info.width, info.height);
    for (int p = 0; p < 3; p++) {
        struct ingest_page pg;
        int rc = ingest_decode_page(t, n, p, 0, 1, &pg, &err);
        CHECK(rc == 0, "page %d: %s", p, err.msg);
        if (rc == 0) {
            CHECK(pg.width == 400 + 8 * p && pg.height == 300 + 4 * p, "page %d is %dx%d", p, pg.width,
                  pg.height);
            /* G4 is 1 bpp: decoded values are only black and white. */
            int other = 0;
            for (int i = 0; i < pg.width * pg.height; i++)
                other += pg.pixels[i] != 0 && pg.pixels[i] != 255;
            CHECK(other == 0, "page %d has %d non-binary pixels", p, other);
            ingest_page_free(&pg);
        }
    }
    struct ingest_page pg;
    CHECK(ingest_decode_page(t, n, 3, 0, 1, &pg, &err) == FOLIO_EINVAL, "page 4 of 3 is refused");
    /* Page limit. */
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_pages = 2;
    CHECK(ingest_probe(t, n, &lim, &info, &err) == FOLIO_ELIMIT, "3 pages over max 2");
    CHECK(strcmp(info.reason, "too_many_pages") == 0 && strcmp(info.limit_name, "max_pages") == 0 &&
              info.limit_value == 2 && info.actual_value == 3,
          "reason %s %s %llu %llu", info.reason, info.limit_name, (unsigned long long)info.limit_value,
          (unsigned long long)info.actual_value);
    /* Pixel limit applies to every page, not just the first. */
    lim.max_pages = 10;
    lim.max_pixels = 400 * 300 + 1;
    CHECK(ingest_probe(t, n, &lim, &info, &err) == FOLIO_ELIMIT && info.failed_page == 1,
          "page 2 over the pixel limit (failed page %d)", info.failed_page);
    free(t);
}

static void test_bombs(void)
{
    struct folio_err err = {0};
    struct ingest_info info;
    size_t n = 0;
    uint8_t *j = cg_scan_jpeg(64, 64, 1, 1, 0, &n);
    TU_NEED(j, "jpeg");
    cg_jpeg_set_size(j, n, 65000, 65000);
    long rss0 = maxrss_kb();
    double t0 = folio_mono_ms();
    int rc = ingest_probe(j, n, NULL, &info, &err);
    double ms = folio_mono_ms() - t0;
    CHECK(rc == FOLIO_ELIMIT, "65000x65000 JPEG rc %d (%s)", rc, err.msg);
    CHECK(strcmp(info.reason, "too_many_pixels") == 0 && info.limit_value == 300000000ull &&
              info.actual_value == 65000ull * 65000ull,
          "reason %s limit %llu actual %llu", info.reason, (unsigned long long)info.limit_value,
          (unsigned long long)info.actual_value);
    CHECK(strstr(err.msg, "65000x65000") != NULL, "message names the size: %s", err.msg);
    /* Even a 1/8-scale RGB decode would need ~200 MB: the RSS must not grow. */
    CHECK(maxrss_kb() - rss0 < 16 * 1024, "probe grew max RSS by %ld KiB", maxrss_kb() - rss0);
    fprintf(stderr, "jpeg bomb rejected in %.2f ms\n", ms);
    /* decode_page refuses it too (hard ceiling). */
    struct ingest_page pg;
    CHECK(ingest_decode_page(j, n, 0, 100, 1, &pg, &err) == FOLIO_ELIMIT, "decode of the bomb is refused");
    free(j);

    PIX *pix = cg_pix(32, 32, 1, 0);
    uint8_t *p = cg_lept_write(pix, IFF_PNG, &n);
    pixDestroy(&pix);
    TU_NEED(p, "png");
    cg_png_set_size(p, n, 100000, 100000);
    rss0 = maxrss_kb();
    rc = ingest_probe(p, n, NULL, &info, &err);
    CHECK(rc == FOLIO_ELIMIT && strcmp(info.reason, "too_many_pixels") == 0 &&
              info.actual_value == 10000000000ull,
          "100000x100000 PNG rc %d reason %s actual %llu", rc, info.reason,
          (unsigned long long)info.actual_value);
    CHECK(maxrss_kb() - rss0 < 16 * 1024, "png probe grew max RSS by %ld KiB", maxrss_kb() - rss0);
    CHECK(ingest_decode_page(p, n, 0, 100, 1, &pg, &err) == FOLIO_ELIMIT, "decode of the png bomb is refused");
    free(p);
}

static void test_bad_inputs(void)
{
    struct folio_err err = {0};
    struct ingest_info info;
    int rc;

    rc = ingest_probe((const uint8_t *)"", 0, NULL, &info, &err);
    CHECK(rc == FOLIO_EFORMAT && strcmp(info.reason, "empty") == 0, "empty: rc %d %s", rc, info.reason);

    uint8_t *r = cg_random_bytes(5000, 42);
    rc = ingest_probe(r, 5000, NULL, &info, &err);
    CHECK(rc == FOLIO_EUNSUPPORTED && strcmp(info.reason, "unsupported_format") == 0, "random: %d %s", rc,
          info.reason);
    free(r);

    size_t n = 0;
    uint8_t *pdf = cg_pdf(&n);
    /* A PDF is sniffed by content and handed to the PDF helper (the PDF
     * cases themselves are in test_ingest_pdf). */
    rc = ingest_probe(pdf, n, NULL, &info, &err);
    CHECK(rc == 0 && info.pages == 1 && info.width == 2550 && info.height == 3300 &&
              strcmp(info.media_type, "application/pdf") == 0,
          "pdf: %d %s %s", rc, info.reason, err.msg);
    rc = ingest_probe(pdf, 40, NULL, &info, &err);
    CHECK(rc == FOLIO_EFORMAT && strcmp(info.reason, "corrupt") == 0 && strstr(err.msg, "PDF"),
          "40 bytes of a pdf: %d %s %s", rc, info.reason, err.msg);
    free(pdf);

    /* Truncated JPEG: libjpeg only warns, ingest must refuse. */
    uint8_t *j = cg_scan_jpeg(800, 600, 2, 1, 0, &n);
    TU_NEED(j, "jpeg");
    rc = ingest_probe(j, n * 6 / 10, NULL, &info, &err);
    CHECK(rc == FOLIO_EFORMAT && strcmp(info.reason, "corrupt") == 0, "truncated: %d %s", rc, info.reason);
    CHECK(strstr(err.msg, "truncated") || strstr(err.msg, "Premature"), "truncated message: %s", err.msg);
    /* Truncated progressive JPEG too. */
    size_t npj = 0;
    uint8_t *pj = cg_scan_jpeg(800, 600, 2, 1, 1, &npj);
    rc = ingest_probe(pj, npj / 2, NULL, &info, &err);
    CHECK(rc == FOLIO_EFORMAT, "truncated progressive: %d %s", rc, err.msg);
    free(pj);

    /* Junk between two header segments: libjpeg warns "extraneous bytes
     * before marker" and decodes the image whole, so it is accepted with
     * the warning recorded. */
    size_t seg1 = 2 + 2 + ((size_t)j[4] << 8 | j[5]); /* end of the first segment after SOI */
    uint8_t *wj = malloc(n + 4);
    memcpy(wj, j, seg1);
    memcpy(wj + seg1, "\x12\x34\x56\x78", 4);
    memcpy(wj + seg1 + 4, j + seg1, n - seg1);
    rc = ingest_probe(wj, n + 4, NULL, &info, &err);
    CHECK(rc == 0, "warning-only JPEG accepted: %d %s", rc, err.msg);
    CHECK(strstr(info.warning, "extraneous") != NULL, "warning recorded: '%s'", info.warning);
    free(wj);

    /* Corrupted entropy data in the middle. */
    uint8_t *cj = cg_dup(j, n);
    for (size_t i = n / 2; i < n / 2 + 200; i++)
        cj[i] = (uint8_t)(i * 7);
    rc = ingest_probe(cj, n, NULL, &info, &err);
    CHECK(rc == FOLIO_EFORMAT || rc == 0, "garbled JPEG: %d %s", rc, err.msg);
    free(cj);

    /* Byte limit. */
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_bytes = 1000;
    rc = ingest_probe(j, n, &lim, &info, &err);
    CHECK(rc == FOLIO_ELIMIT && strcmp(info.reason, "too_large") == 0 && info.limit_value == 1000 &&
              info.actual_value == n,
          "too large: %d %s %llu", rc, info.reason, (unsigned long long)info.actual_value);
    free(j);

    /* Truncated and corrupt PNG. */
    PIX *pix = cg_pix(200, 150, 4, 0);
    uint8_t *p = cg_lept_write(pix, IFF_PNG, &n);
    pixDestroy(&pix);
    TU_NEED(p, "png");
    rc = ingest_probe(p, n / 2, NULL, &info, &err);
    CHECK(rc == FOLIO_EFORMAT && strcmp(info.reason, "corrupt") == 0, "truncated png: %d %s", rc, err.msg);
    fprintf(stderr, "truncated png message: %s\n", err.msg);
    for (size_t i = n / 2; i < n / 2 + 16; i++)
        p[i] ^= 0x5a;
    rc = ingest_probe(p, n, NULL, &info, &err);
    CHECK(rc == FOLIO_EFORMAT, "corrupt png: %d %s", rc, err.msg);
    free(p);

    /* Truncated G4 TIFF. */
    uint8_t *t = cg_multipage_tiff(2, 300, 200, 1, &n);
    TU_NEED(t, "tiff");
    rc = ingest_probe(t, n / 3, NULL, &info, &err);
    CHECK(rc == FOLIO_EFORMAT, "truncated tiff: %d %s", rc, err.msg);
    free(t);

    /* Bad arguments to decode. */
    struct ingest_page pg;
    CHECK(ingest_decode_page((const uint8_t *)"x", 1, 0, 0, 2, &pg, &err) == FOLIO_EINVAL, "channels 2");
    CHECK(ingest_decode_page((const uint8_t *)"xxxx", 4, 0, 0, 1, &pg, &err) == FOLIO_EUNSUPPORTED,
          "junk blob");
}

static void test_sniff_ignores_names(void)
{
    /* A PNG is a PNG whatever it is called: sniffing sees only bytes. */
    PIX *pix = cg_pix(20, 20, 1, 0);
    size_t n = 0;
    uint8_t *p = cg_lept_write(pix, IFF_PNG, &n);
    pixDestroy(&pix);
    TU_NEED(p, "png");
    CHECK(ingest_sniff(p, n) == INGEST_FMT_PNG, "png sniffed");
    CHECK(ingest_sniff(p, 4) == INGEST_FMT_UNKNOWN, "4 bytes are not enough for PNG");
    free(p);
}

/* Every fuzz seed and every input that once crashed goes through probe
 * and decode again: they must come back with an answer, never a crash. */
static void test_replay_fuzz_inputs(void)
{
    static const char *const dirs[] = {"tests/fuzz/corpus/ingest", "tests/fuzz/crashes/ingest"};
    const char *src = getenv("FOLIO_SOURCE_DIR");
    TU_NEED(src != NULL, "FOLIO_SOURCE_DIR is set by ctest");
    int seen = 0;
    for (size_t k = 0; k < 2; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", src, dirs[k]);
        DIR *d = opendir(dir);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char p[4352];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            uint8_t *data = NULL;
            size_t n = 0;
            struct folio_err err = {0};
            if (folio_read_file(p, 1 << 24, &data, &n, &err) != 0)
                continue;
            struct ingest_info info;
            struct ingest_limits lim = {.max_bytes = 1 << 20, .max_pixels = 4 << 20, .max_pages = 16};
            int rc = ingest_probe(data, n, &lim, &info, &err);
            if (k == 0)
                CHECK(rc == 0, "seed %s is a valid image: %s", de->d_name, err.msg);
            for (int pg = 0; rc == 0 && pg < info.pages; pg++) {
                struct ingest_page page;
                int drc = ingest_decode_page(data, n, pg, 64, 3, &page, &err);
                CHECK(drc == 0, "%s page %d decodes: %s", de->d_name, pg, err.msg);
                if (drc == 0)
                    ingest_page_free(&page);
            }
            free(data);
            seen++;
        }
        closedir(d);
    }
    CHECK(seen >= 10, "replayed %d fuzz inputs", seen);
}

int main(void)
{
    test_sniff_ignores_names();
    test_lossless_formats();
    test_jpeg_baseline_progressive_gray();
    test_jpeg_cmyk();
    test_exif_orientation();
    test_dct_scaling();
    test_multipage_tiff();
    test_bombs();
    test_bad_inputs();
    test_replay_fuzz_inputs();
    return tu_finish();
}
