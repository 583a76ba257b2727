/*
 * The document text provider shared by the worker and `folio classify`
 * (see doctext.h). Pages are decoded and OCR'd one at a time: a 300-dpi
 * page is ~8 MB gray, and a 2000-page TIFF must not be held at once.
 */
#include "pipeline/document/doctext.h"
#include "common/json.h"
#include "ingest/ingest.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Longest side a page is decoded at: Tesseract refuses > 32767, and 300 dpi
 * A0 is ~14000. */
#define DECODE_MAX_SIDE 14000

void worker_scores_json(const struct engine_result *er, struct json_buf *out)
{
    json_raw(out, "{");
    for (int i = 0; i < er->n_labels; i++) {
        if (i)
            json_raw(out, ",");
        json_key(out, er->names[i]);
        json_num(out, er->scores[i]);
    }
    json_raw(out, "}");
}

static int parse_cap(const char *s, size_t *out)
{
    uint64_t v;
    if (folio_parse_size(s, &v) != 0 || v < 1 || v > DOC_TEXT_MAX_LIMIT)
        return -1;
    *out = (size_t)v;
    return 0;
}

int doc_text_parse_caps(const char *s, size_t *page, size_t *doc)
{
    const char *comma = strchr(s, ',');
    if (!comma)
        return parse_cap(s, page) || parse_cap(s, doc) ? -1 : 0;
    char first[64];
    size_t n = (size_t)(comma - s);
    if (n == 0 || n >= sizeof first)
        return -1;
    memcpy(first, s, n);
    first[n] = 0;
    return parse_cap(first, page) || parse_cap(comma + 1, doc) ? -1 : 0;
}

/* Appends one page's text (a form feed before every page but the first
 * read), cut at a character boundary to the per-page cap and to what is
 * left of the document's; every cut is counted and logged. */
static void append_page(struct doc_text_ctx *c, struct engine_text *out, struct json_buf *text,
                        size_t *kept, int p, int first, char *s)
{
    size_t page_cap = c->max_page_bytes ? c->max_page_bytes : DOC_TEXT_PAGE_MAX_DEFAULT;
    size_t doc_cap = c->max_doc_bytes ? c->max_doc_bytes : DOC_TEXT_DOC_MAX_DEFAULT;
    int sep = p > first;
    size_t got = s ? strlen(s) : 0, keep = folio_utf8_prefix(s, got, page_cap);
    if (keep < got)
        out->pages_text_cut++;
    size_t used = *kept + (size_t)sep;
    size_t room = doc_cap > used ? doc_cap - used : 0;
    if (keep > room) {
        keep = folio_utf8_prefix(s, keep, room);
        out->text_doc_cut = 1;
    }
    if (keep < got) {
        out->text_bytes_cut += got - keep;
        folio_log(FOLIO_LOG_WARN, "page_text_cut", "job=%lld page=%d bytes=%zu kept=%zu "
                  "page_cap=%zu doc_cap=%zu", c->job_id, p + 1, got, keep, page_cap, doc_cap);
        s[keep] = 0;
    }
    if (sep)
        json_raw(text, "\f"); /* page break, as the tesseract CLI writes */
    json_raw(text, s ? s : "");
    *kept += keep + (size_t)sep;
}

const char *worker_text_source(const struct doc_text_ctx *c)
{
    return c->ocr_pages         ? "ocr"
           : c->pdf_text_pages  ? "pdf"
           : c->reused_pages    ? c->reused_source
                                : "none";
}

void doc_reuse_free(struct doc_reuse *r)
{
    if (!r)
        return;
    free(r->st.text);
    free(r->st.sources);
    free(r->page);
    free(r->source);
    r->st = (struct doc_stored){0};
    r->page = NULL;
    r->source = NULL;
    r->n_pages = 0;
}

/* Splits the stored text at its form feeds (the page breaks the worker
 * wrote) and the sources at their commas, in place. */
static int reuse_split(struct doc_reuse *r, struct folio_err *err)
{
    int n = 1;
    for (const char *s = r->st.text; *s; s++)
        n += *s == '\f';
    r->page = calloc((size_t)n, sizeof *r->page);
    r->source = calloc((size_t)n, sizeof *r->source);
    if (!r->page || !r->source)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot split the stored text into %d pages", n);
    char *s = r->st.text;
    for (int i = 0; i < n; i++) {
        r->page[i] = s;
        char *ff = strchr(s, '\f');
        if (ff) {
            *ff = '\0';
            s = ff + 1;
        }
        r->source[i] = "ocr"; /* results from before per-page sources */
    }
    char *save = NULL;
    int i = 0;
    for (char *tok = r->st.sources ? strtok_r(r->st.sources, ",", &save) : NULL; tok && i < n;
         tok = strtok_r(NULL, ",", &save), i++)
        r->source[i] = strcmp(tok, "pdf") == 0 ? "pdf" : strcmp(tok, "none") == 0 ? "none" : "ocr";
    r->n_pages = n;
    return 0;
}

int doc_reuse_page(struct doc_reuse *r, int p, const char **text, const char **source, struct folio_err *err)
{
    *text = *source = NULL;
    if (!r || !r->fetch)
        return 0;
    if (!r->loaded) {
        r->loaded = 1;
        int rc = r->fetch(r->ctx, &r->st, err);
        if (rc == 0 && r->st.text)
            rc = reuse_split(r, err);
        if (rc) {
            doc_reuse_free(r);
            return rc;
        }
    }
    /* a page stored as "none" had no text (vision answered it): read it */
    if (p < 0 || p >= r->n_pages || strcmp(r->source[p], "none") == 0)
        return 0;
    *text = r->page[p];
    *source = r->source[p];
    return 0;
}

/* A PDF page's own text when it passes the text-layer rule (*used = 1);
 * otherwise the page is left to OCR. */
static int pdf_page_text(struct doc_text_ctx *c, int p, int first, struct json_buf *text,
                         size_t *kept, int *used, struct engine_text *out, struct folio_err *err)
{
    *used = 0;
    struct ingest_pdf_text t;
    double td = folio_mono_ms();
    int rc = ingest_pdf_text(c->pdf, p, &t, err);
    out->decode_ms += folio_mono_ms() - td;
    if (rc)
        return rc;
    const char *why = "";
    if (ingest_pdf_text_usable(&t, &why)) {
        append_page(c, out, text, kept, p, first, t.text);
        c->pdf_text_pages++;
        out->pages_read++;
        *used = 1;
    } else if (t.chars > 0) {
        folio_log(FOLIO_LOG_DEBUG, "pdf_text_layer_skipped", "job=%lld page=%d chars=%d why=\"%s\"", c->job_id,
                  p + 1, t.chars, why);
    }
    ingest_pdf_text_free(&t);
    return 0;
}

/* Decodes and OCRs the document's pages one at a time (a 300-dpi page is
 * ~8 MB gray; never hold them all), up to --ocr-max-pages, keeping at most
 * the per-page and per-document text caps (doctext.h). */
int worker_doc_text(void *ctx, struct engine_text *out, struct folio_err *err)
{
    struct doc_text_ctx *c = ctx;
    double t0 = folio_mono_ms();
    int maxp = c->max_pages;
    int n = c->pages < 1 ? 1 : c->pages;
    int first = c->first_page > 0 && c->first_page < n ? c->first_page : 0;
    int todo = maxp > 0 && n - first > maxp ? first + maxp : n;
    out->pages_skipped = n - todo;
    out->pages_text_cut = out->text_doc_cut = 0;
    out->text_bytes_cut = 0;
    c->pdf_text_pages = c->ocr_pages = c->reused_pages = 0;
    out->confidence = -1;
    size_t kept = 0; /* bytes of text so far, form feeds included */
    struct json_buf text;
    json_init(&text);
    double conf_sum = 0;
    int conf_n = 0;
    size_t doc_cap = c->max_doc_bytes ? c->max_doc_bytes : DOC_TEXT_DOC_MAX_DEFAULT;
    for (int p = first; p < todo; p++) {
        if (p > first && kept + 1 >= doc_cap) {
            /* the document's text is full: reading more pages would only
             * be thrown away */
            out->text_doc_cut = 1;
            out->pages_skipped += todo - p;
            break;
        }
        if (c->cancel && atomic_load(c->cancel)) {
            json_free(&text);
            return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled before page %d", p + 1);
        }
        if (c->reuse) {
            /* --reuse-ocr: what the page said last time, not read again */
            const char *st = NULL, *src = NULL;
            int rc = doc_reuse_page(c->reuse, p, &st, &src, err);
            char *copy = rc == 0 && st ? strdup(st) : NULL;
            if (rc == 0 && st && !copy)
                rc = folio_err_set(err, FOLIO_ENOMEM, "cannot hold the stored text of page %d", p + 1);
            if (rc) {
                json_free(&text);
                folio_err_prefix(err, "stored text: ");
                return rc;
            }
            if (copy) {
                append_page(c, out, &text, &kept, p, first, copy);
                free(copy);
                c->reused_pages++;
                c->reused_source = src;
                out->pages_read++;
                if (p == 0 && c->reuse->st.orientation >= 0)
                    out->orientation = c->reuse->st.orientation;
                if (c->reuse->st.confidence >= 0) {
                    conf_sum += c->reuse->st.confidence;
                    conf_n++;
                }
                continue;
            }
        }
        if (c->pdf) {
            int used = 0;
            int rc = pdf_page_text(c, p, first, &text, &kept, &used, out, err);
            if (rc) {
                json_free(&text);
                folio_err_prefix(err, "page %d of %d: ", p + 1, n);
                return rc;
            }
            if (used)
                continue;
        }
        if (c->ocr_left && *c->ocr_left <= 0) {
            out->pages_skipped++;
            if (p > first)
                json_raw(&text, "\f");
            kept += p > first;
            continue;
        }
        struct ingest_page pg;
        /* OCR reads 300 dpi best: a finer scan is decoded down to it, and
         * the page keeps its share of the decode budget until OCR is done. */
        struct ingest_decode_opts dopts = {.max_side = DECODE_MAX_SIDE, .channels = 1, .max_pixels = c->max_pixels,
                                           .target_ppi = DOC_TEXT_OCR_PPI, .budget = c->decode_budget,
                                           .cancel = c->cancel};
        double td = folio_mono_ms();
        int rc = c->pdf ? ingest_pdf_render(c->pdf, p, ingest_pdf_fit_dpi(c->pdf, p, DECODE_MAX_SIDE, 0), 1, &pg, err)
                        : ingest_decode_page_opts(c->data, c->len, p, &dopts, &pg, err);
        out->decode_ms += folio_mono_ms() - td;
        if (rc) {
            json_free(&text);
            folio_err_prefix(err, "page %d of %d: ", p + 1, n);
            return rc;
        }
        struct ocr_image img = {.width = pg.width, .height = pg.height, .channels = pg.channels,
                                .stride = pg.stride, .pixels = pg.pixels, .ppi = pg.ppi};
        struct ocr_page_result r;
        double to = folio_mono_ms();
        rc = ocr_page(c->ocr, &img, c->cancel, &r, err);
        out->ocr_ms += folio_mono_ms() - to;
        ingest_page_free(&pg);
        if (rc) {
            json_free(&text);
            folio_err_prefix(err, "page %d of %d: ", p + 1, n);
            return rc;
        }
        if (p == first)
            out->orientation = r.orientation;
        if (r.timed_out) {
            out->pages_timed_out++;
            folio_log(FOLIO_LOG_WARN, "ocr_page_deadline", "job=%lld page=%d deadline_ms=%d",
                      c->job_id, p + 1, c->page_deadline_ms);
        }
        append_page(c, out, &text, &kept, p, first, r.text);
        c->ocr_pages++;
        if (c->ocr_left)
            (*c->ocr_left)--;
        if (r.confidence >= 0) {
            conf_sum += r.confidence;
            conf_n++;
        }
        out->pages_read++;
        ocr_page_result_free(&r);
    }
    if (text.oom) {
        json_free(&text);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot hold the OCR text");
    }
    out->text = text.s ? text.s : strdup("");
    if (!out->text)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot hold the OCR text");
    out->confidence = conf_n ? conf_sum / conf_n : -1;
    out->ms = folio_mono_ms() - t0;
    return 0;
}

