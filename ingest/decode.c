/*
 * The public decode API: ingest_probe (is this file acceptable, and what is
 * it?) and ingest_decode_page (give me page N as pixels).
 *
 * ingest_probe runs in a fixed order so that a hostile file costs almost
 * nothing: byte limit, content sniff, header-only page sizes checked
 * against the pixel and page limits, and only then a decoder that touches
 * the whole stream. Each failure is reported twice: as a folio_err for
 * people and as a stable reason code (plus the limit and the actual value)
 * in ingest_info for the rejection record.
 *
 * ingest_decode_page shares the same sniffing; it has no caller limits
 * (the blob was probed when it came in) but still refuses pages beyond
 * INGEST_HARD_MAX_PIXELS, so a blob from elsewhere cannot overflow a size.
 * Downscaling is DCT scaling for JPEG followed by an area average; EXIF
 * orientation is applied last because fitting a longest side does not
 * depend on it. The pixel buffers themselves (allocate, fit, orient) are
 * page.c: the decoders below this file use them too.
 */
#include "ingest/ingest_internal.h"

#include <stdlib.h>
#include <string.h>

void ingest_limits_default(struct ingest_limits *l)
{
    l->max_bytes = UINT64_C(512) << 20;
    l->max_pixels = UINT64_C(300000000);
    l->max_pages = 2000;
    l->pdf_dpi = l->pdf_page_ms = l->pdf_memory_mb = l->pdf_cpu_s = 0; /* pdf.c's defaults */
}

/* ---- probe ---- */

static int reject(struct ingest_info *info, const char *reason, int code)
{
    snprintf(info->reason, sizeof info->reason, "%s", reason);
    return code;
}

static int over_limit(struct ingest_info *info, struct folio_err *err, const char *reason,
                      const char *limit_name, uint64_t limit, uint64_t actual)
{
    snprintf(info->limit_name, sizeof info->limit_name, "%s", limit_name);
    info->limit_value = limit;
    info->actual_value = actual;
    return reject(info, reason, err ? err->code : FOLIO_ELIMIT);
}

/* Checks one page's claimed size against the caller's and the hard limit. */
static int check_page(struct ingest_info *info, const struct ingest_limits *lim, int page, int pages,
                      struct ingest_dims dm, uint64_t cost_px, struct folio_err *err)
{
    if (dm.w == 0 || dm.h == 0) {
        info->failed_page = page;
        folio_err_set(err, FOLIO_EFORMAT, "%s page %d of %d has no size (width %u, height %u)",
                      info->media_type, page + 1, pages, dm.w, dm.h);
        return reject(info, "corrupt", FOLIO_EFORMAT);
    }
    uint64_t px = (uint64_t)dm.w * dm.h;
    if (cost_px < px)
        cost_px = px;
    uint64_t limit = lim->max_pixels < INGEST_HARD_MAX_PIXELS ? lim->max_pixels : INGEST_HARD_MAX_PIXELS;
    if (cost_px > limit) {
        info->failed_page = page;
        folio_err_set(err, FOLIO_ELIMIT, "page %d is %ux%u = %.1f megapixels, over the limit of %.1f megapixels",
                      page + 1, dm.w, dm.h, (double)px / 1e6, (double)limit / 1e6);
        if (cost_px != px)
            folio_err_detail(err, "decoding it would allocate %llu pixels (all frames together)",
                             (unsigned long long)cost_px);
        folio_err_hint(err, limit == lim->max_pixels
                                ? "raise --max-pixels if such pages are expected"
                                : "folio never decodes pages this large");
        return over_limit(info, err, "too_many_pixels", "max_pixels", limit, cost_px);
    }
    return 0;
}

/* PDF: the helper opens the document (corrupt and encrypted files end
 * here), the page count is checked, then every page's size at the render
 * resolution, and only then is anything drawn: each page once at
 * PDF_VALIDATE_DPI, which runs its whole content stream and decodes its
 * images (what a bomb or a broken stream trips over) under the per-page
 * time limit, at a cost of a few kilobytes of pixels. */
#define PDF_VALIDATE_DPI 18.0

static int probe_pdf(const uint8_t *data, size_t len, const struct ingest_limits *lim,
                     struct ingest_info *out, struct folio_err *err)
{
    int dpi, page_ms, mem_mb, cpu_s;
    ingest_pdf_limits(lim, &dpi, &page_ms, &mem_mb, &cpu_s);
    out->pdf_dpi = dpi;
    /* The whole validation has a wall clock too (the open's own request
     * is under the page limit, which the document limit is never below). */
    int doc_ms = lim && lim->pdf_doc_ms > 0 ? lim->pdf_doc_ms : 3 * page_ms;
    double doc_deadline = folio_mono_ms() + doc_ms;
    struct ingest_pdf *p = NULL;
    int rc = ingest_pdf_open(data, len, lim, &p, err);
    if (rc) {
        reject(out, p ? ingest_pdf_reason(p) : "internal", rc);
        ingest_pdf_close(p);
        return rc;
    }
    ingest_pdf_set_deadline(p, doc_deadline, doc_ms);
    int pages = ingest_pdf_pages(p);
    out->pages = pages;
    if (pages > lim->max_pages) {
        folio_err_set(err, FOLIO_ELIMIT, "PDF has %d pages, over the limit of %d pages", pages, lim->max_pages);
        folio_err_hint(err, "raise --max-pages if documents this long are expected");
        ingest_pdf_close(p);
        return over_limit(out, err, "too_many_pages", "max_pages", (uint64_t)lim->max_pages, (uint64_t)pages);
    }
    for (int pg = 0; pg < pages; pg++) {
        struct ingest_dims dm = {0, 0};
        ingest_pdf_page_pixels(p, pg, dpi, &dm.w, &dm.h);
        if (pg == 0) {
            out->width = (int)dm.w;
            out->height = (int)dm.h;
        }
        rc = check_page(out, lim, pg, pages, dm, 0, err);
        if (rc) {
            if (strcmp(out->reason, "too_many_pixels") == 0)
                folio_err_detail(err, "PDF pages are sized at %d dpi", dpi);
            ingest_pdf_close(p);
            return rc;
        }
    }
    for (int pg = 0; pg < pages; pg++) {
        struct ingest_page tiny;
        rc = ingest_pdf_render(p, pg, PDF_VALIDATE_DPI, 1, &tiny, err);
        if (rc) {
            out->failed_page = pg;
            folio_err_prefix(err, "page %d of %d: ", pg + 1, pages);
            reject(out, rc == FOLIO_ENOMEM ? "internal" : ingest_pdf_reason(p), rc);
            ingest_pdf_close(p);
            return rc;
        }
        ingest_page_free(&tiny);
    }
    ingest_pdf_close(p);
    return 0;
}

int ingest_probe(const uint8_t *data, size_t len, const struct ingest_limits *lim,
                 struct ingest_info *out, struct folio_err *err)
{
    memset(out, 0, sizeof *out);
    out->failed_page = -1;
    struct ingest_limits defl;
    if (!lim) {
        ingest_limits_default(&defl);
        lim = &defl;
    }
    if (len == 0) {
        folio_err_set(err, FOLIO_EFORMAT, "file is empty (0 bytes)");
        folio_err_hint(err, "a scanner or copy that has not finished writes files like this; "
                            "folio only takes files that have stopped changing");
        return reject(out, "empty", FOLIO_EFORMAT);
    }
    if (len > lim->max_bytes) {
        folio_err_set(err, FOLIO_ELIMIT, "file is %zu bytes, over the limit of %llu bytes", len,
                      (unsigned long long)lim->max_bytes);
        folio_err_hint(err, "raise --max-bytes if files this large are expected");
        return over_limit(out, err, "too_large", "max_bytes", lim->max_bytes, len);
    }
    enum ingest_format f = ingest_sniff(data, len);
    out->format = f;
    snprintf(out->media_type, sizeof out->media_type, "%s", ingest_format_media_type(f));
    if (f == INGEST_FMT_UNKNOWN) {
        /* No file bytes in the message: it lands in folio.rejections and
         * reason.json, readable by more people than the file was. */
        folio_err_set(err, FOLIO_EUNSUPPORTED, "file is not an image or PDF folio reads (no known "
                      "signature in its first bytes)");
        folio_err_hint(err, "folio reads PDF, JPEG, PNG, TIFF, PNM, WebP, GIF and BMP, recognised by content");
        return reject(out, "unsupported_format", FOLIO_EUNSUPPORTED);
    }
    if (f == INGEST_FMT_PDF)
        return probe_pdf(data, len, lim, out, err);

    int rc = 0;
    struct jpeg_header jh;
    struct ingest_dims dm = {0, 0};
    uint64_t cost = 0;
    struct ingest_dims *tiff_dims = NULL;
    int pages = 1;
    switch (f) {
    case INGEST_FMT_JPEG:
        rc = ingest_jpeg_read_header(data, len, &jh, err);
        if (rc == 0) {
            dm.w = (uint32_t)jh.width;
            dm.h = (uint32_t)jh.height;
            out->exif_orientation = jh.exif_orientation;
        } else if (rc == FOLIO_ELIMIT) {
            out->width = jh.width;
            out->height = jh.height;
            folio_err_hint(err, "the file says it is a %.1f-megapixel page; scan at a lower resolution",
                           (double)jh.width * jh.height / 1e6);
            return over_limit(out, err, "too_many_pixels", "max_pixels",
                              lim->max_pixels < INGEST_HARD_MAX_PIXELS ? lim->max_pixels : INGEST_HARD_MAX_PIXELS,
                              (uint64_t)jh.width * (uint64_t)jh.height);
        }
        break;
    case INGEST_FMT_PNG: rc = ingest_sniff_png_dims(data, len, &dm, err); break;
    case INGEST_FMT_GIF: rc = ingest_sniff_gif_dims(data, len, &dm, &cost, err); break;
    case INGEST_FMT_BMP: rc = ingest_sniff_bmp_dims(data, len, &dm, err); break;
    case INGEST_FMT_PNM: rc = ingest_sniff_pnm_dims(data, len, &dm, err); break;
    case INGEST_FMT_WEBP: rc = ingest_sniff_webp_dims(data, len, &dm, err); break;
    case INGEST_FMT_TIFF: {
        int cap = lim->max_pages < 1 ? 1 : lim->max_pages + 1;
        tiff_dims = calloc((size_t)cap, sizeof *tiff_dims);
        if (!tiff_dims) {
            folio_err_set(err, FOLIO_ENOMEM, "out of memory for %d TIFF page headers", cap);
            return reject(out, "internal", FOLIO_ENOMEM);
        }
        rc = ingest_sniff_tiff_pages(data, len, lim->max_pages, tiff_dims, cap, &pages, err);
        if (rc == 0 && pages > lim->max_pages) {
            folio_err_set(err, FOLIO_ELIMIT, "TIFF has more than %d pages, over the limit of %d pages",
                          lim->max_pages, lim->max_pages);
            folio_err_hint(err, "raise --max-pages if documents this long are expected");
            free(tiff_dims);
            out->pages = pages;
            return over_limit(out, err, "too_many_pages", "max_pages", (uint64_t)lim->max_pages,
                              (uint64_t)pages);
        }
        if (rc == 0)
            dm = tiff_dims[0];
        break;
    }
    default: break;
    }
    if (rc) {
        free(tiff_dims);
        return reject(out, rc == FOLIO_ENOMEM ? "internal" : "corrupt", rc);
    }
    out->pages = pages;
    out->width = (int)dm.w;
    out->height = (int)dm.h;
    for (int p = 0; p < pages; p++) {
        rc = check_page(out, lim, p, pages, tiff_dims ? tiff_dims[p] : dm, cost, err);
        if (rc) {
            free(tiff_dims);
            return rc;
        }
    }
    free(tiff_dims);

    if (f == INGEST_FMT_JPEG)
        rc = ingest_jpeg_validate(data, len, &jh, out->warning, sizeof out->warning, err);
    else if (f == INGEST_FMT_PNG)
        rc = ingest_png_validate(data, len, out->warning, sizeof out->warning, err);
    else
        rc = ingest_lept_validate(data, len, f, pages, err);
    if (rc)
        return reject(out, rc == FOLIO_ENOMEM ? "internal" : "corrupt", rc);
    return 0;
}

/* ---- decode ---- */

int ingest_decode_page(const uint8_t *data, size_t len, int page, int max_side,
                       int want_channels, struct ingest_page *out, struct folio_err *err)
{
    return ingest_decode_page_capped(data, len, page, max_side, want_channels, 0, out, err);
}

int ingest_decode_page_capped(const uint8_t *data, size_t len, int page, int max_side, int want_channels,
                              uint64_t max_pixels, struct ingest_page *out, struct folio_err *err)
{
    struct ingest_decode_opts o = {.max_side = max_side, .channels = want_channels, .max_pixels = max_pixels};
    return ingest_decode_page_opts(data, len, page, &o, out, err);
}

/* The longest side of a w x h page stating `ppi` when it is brought down
 * to target_ppi; 0 when it is not finer, or the stated value is not
 * plausible (a long side of 3..20 inches, as ocr_effective_ppi judges). */
static int side_at_ppi(uint32_t w, uint32_t h, int ppi, int target_ppi)
{
    uint32_t side = w > h ? w : h;
    if (target_ppi <= 0 || ppi <= target_ppi || side < (uint32_t)ppi * 3 || side > (uint32_t)ppi * 20)
        return 0;
    return (int)(((uint64_t)side * (uint64_t)target_ppi + (uint64_t)ppi - 1) / (uint64_t)ppi);
}

static int min_side(int a, int b) { return a <= 0 ? b : b <= 0 ? a : a < b ? a : b; }

/* Bytes a w x h page fitted into max_side takes with c channels. */
static uint64_t fitted_bytes(uint64_t w, uint64_t h, int max_side, int c)
{
    uint64_t side = w > h ? w : h;
    if (max_side > 0 && side > (uint64_t)max_side) {
        w = (w * (uint64_t)max_side + side - 1) / side;
        h = (h * (uint64_t)max_side + side - 1) / side;
    }
    return w * h * (uint64_t)c;
}

int ingest_decode_page_opts(const uint8_t *data, size_t len, int page, const struct ingest_decode_opts *o,
                            struct ingest_page *out, struct folio_err *err)
{
    memset(out, 0, sizeof *out);
    int max_side = o->max_side, want_channels = o->channels;
    uint64_t max_pixels = o->max_pixels;
    if (!data || (want_channels != 1 && want_channels != 3) || page < 0 || max_side < 0)
        return folio_err_set(err, FOLIO_EINVAL,
                             "ingest_decode_page: bad arguments (page %d, max_side %d, channels %d)",
                             page, max_side, want_channels);
    enum ingest_format f = ingest_sniff(data, len);
    struct ingest_dims dm = {0, 0};
    uint64_t cost = 0;
    int rc = 0, pages = 1, orientation = 0;
    struct jpeg_header jh;
    switch (f) {
    case INGEST_FMT_JPEG:
        rc = ingest_jpeg_read_header(data, len, &jh, err);
        dm.w = (uint32_t)jh.width;
        dm.h = (uint32_t)jh.height;
        orientation = jh.exif_orientation;
        break;
    case INGEST_FMT_PNG: rc = ingest_sniff_png_dims(data, len, &dm, err); break;
    case INGEST_FMT_GIF: rc = ingest_sniff_gif_dims(data, len, &dm, &cost, err); break;
    case INGEST_FMT_BMP: rc = ingest_sniff_bmp_dims(data, len, &dm, err); break;
    case INGEST_FMT_PNM: rc = ingest_sniff_pnm_dims(data, len, &dm, err); break;
    case INGEST_FMT_WEBP: rc = ingest_sniff_webp_dims(data, len, &dm, err); break;
    case INGEST_FMT_PDF: {
        /* A blob was probed when it came in; here only the hard ceilings
         * apply, so every page size is read whatever the count. */
        struct ingest_limits dl;
        ingest_limits_default(&dl);
        dl.max_pages = INT32_MAX - 1;
        struct ingest_pdf *p = NULL;
        rc = ingest_pdf_open(data, len, &dl, &p, err);
        if (rc == 0 && page >= ingest_pdf_pages(p))
            rc = folio_err_set(err, FOLIO_EINVAL, "page %d requested, the PDF has %d page%s", page + 1,
                               ingest_pdf_pages(p), ingest_pdf_pages(p) == 1 ? "" : "s");
        if (rc == 0)
            rc = ingest_pdf_render(p, page, ingest_pdf_fit_dpi(p, page, max_side, 0), want_channels, out, err);
        ingest_pdf_close(p);
        return rc;
    }
    case INGEST_FMT_TIFF: {
        /* Walk just far enough to reach the requested page. */
        struct ingest_dims *dims = calloc((size_t)page + 1, sizeof *dims);
        if (!dims)
            return folio_err_set(err, FOLIO_ENOMEM, "out of memory reading TIFF headers");
        rc = ingest_sniff_tiff_pages(data, len, page, dims, page + 1, &pages, err);
        if (rc == 0 && pages > page)
            dm = dims[page];
        free(dims);
        break;
    }
    default:
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "blob is not an image folio decodes (%s)",
                             ingest_format_media_type(f));
    }
    if (rc)
        return rc;
    if (page >= pages)
        return folio_err_set(err, FOLIO_EINVAL, "page %d requested, the %s has %d page%s", page + 1,
                             ingest_format_media_type(f), pages, pages == 1 ? "" : "s");
    uint64_t px = (uint64_t)dm.w * dm.h;
    if (dm.w == 0 || dm.h == 0 || px > INGEST_HARD_MAX_PIXELS || cost > INGEST_HARD_MAX_PIXELS)
        return folio_err_set(err, FOLIO_ELIMIT, "page %d is %ux%u, outside what folio decodes", page + 1,
                             dm.w, dm.h);
    if (max_pixels && (px > max_pixels || cost > max_pixels)) {
        /* refused from the header, before a pixel buffer exists */
        folio_err_set(err, FOLIO_ELIMIT, "page %d is %ux%u = %.1f megapixels, over the limit of %.1f megapixels",
                      page + 1, dm.w, dm.h, (double)(px > cost ? px : cost) / 1e6, (double)max_pixels / 1e6);
        folio_err_hint(err, "the worker's --max-pixels should equal ingest's; raise both if pages this large are expected");
        return FOLIO_ELIMIT;
    }

    /* What the decode will hold at its peak, from the header: JPEG the
     * DCT-scaled raster (plus a CMYK buffer), Leptonica a 32-bit Pix and a
     * converted copy (alpha flattening may add one more); then the fitted
     * and the turned copy. An estimate on the safe side, not a measure. */
    uint64_t need;
    if (f == INGEST_FMT_JPEG) {
        max_side = min_side(max_side, side_at_ppi(dm.w, dm.h, jh.ppi, o->target_ppi));
        int sw, sh, num, denom;
        ingest_jpeg_scaled(&jh, max_side, &sw, &sh, &num, &denom);
        need = (uint64_t)sw * (uint64_t)sh * (uint64_t)(want_channels + (ingest_jpeg_is_cmyk(&jh) ? 4 : 0)) +
               2 * fitted_bytes((uint64_t)sw, (uint64_t)sh, max_side, want_channels);
    } else {
        /* png.c: the page, and a 4-byte-per-pixel copy when interlaced */
        uint64_t per_px = f == INGEST_FMT_PNG ? 4 + (uint64_t)want_channels : 8 + (uint64_t)want_channels;
        need = px * per_px + 2 * fitted_bytes(dm.w, dm.h, max_side, want_channels);
    }
    char what[96];
    snprintf(what, sizeof what, "page %d (%ux%u %s)", page + 1, dm.w, dm.h, ingest_format_media_type(f));
    rc = ingest_membudget_reserve(o->budget, need, o->cancel, what, err);
    if (rc)
        return rc;

    if (f == INGEST_FMT_JPEG)
        rc = ingest_jpeg_decode(data, len, &jh, max_side, want_channels, out, err);
    else if (f == INGEST_FMT_PNG)
        rc = ingest_png_decode(data, len, want_channels, out, NULL, 0, err);
    else
        rc = ingest_lept_decode(data, len, f, page, want_channels, out, err);
    /* Leptonica says the resolution only once it has decoded the page */
    if (rc == 0 && f != INGEST_FMT_JPEG)
        max_side = min_side(max_side, side_at_ppi((uint32_t)out->width, (uint32_t)out->height, out->ppi, o->target_ppi));
    if (rc == 0)
        rc = ingest_page_fit(out, max_side, err);
    if (rc == 0)
        rc = ingest_page_orient(out, orientation, err);
    if (rc) {
        ingest_page_free(out);
        ingest_membudget_release(o->budget, need);
        return rc;
    }
    /* From here the page holds only its own pixels. */
    uint64_t kept = (uint64_t)out->stride * (uint64_t)out->height;
    if (o->budget) {
        ingest_membudget_release(o->budget, need > kept ? need - kept : 0);
        out->budget = o->budget;
        out->reserved = need > kept ? kept : need;
    }
    return 0;
}
