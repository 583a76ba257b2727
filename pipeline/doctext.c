/*
 * The document text provider shared by the worker and `folio classify`
 * (see doctext.h). Pages are decoded and OCR'd one at a time: a 300-dpi
 * page is ~8 MB gray, and a 2000-page TIFF must not be held at once.
 */
#include "pipeline/doctext.h"
#include "ingest/ingest.h"
#include "pipeline/pipeline.h"

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

void worker_pages_json(const struct engine_text *t, int pages_total, struct json_buf *out)
{
    char b[256];
    snprintf(b, sizeof b, "{\"total\":%d,\"read\":%d,\"skipped\":%d,\"timed_out\":%d,"
             "\"text_cut\":{\"pages\":%d,\"bytes\":%zu,\"document\":%s}}", pages_total,
             t->pages_read, t->pages_skipped, t->pages_timed_out, t->pages_text_cut,
             t->text_bytes_cut, t->text_doc_cut ? "true" : "false");
    json_raw(out, b);
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

/* Decodes and OCRs the document's pages one at a time (a 300-dpi page is
 * ~8 MB gray; never hold them all), up to --ocr-max-pages, keeping at most
 * the per-page and per-document text caps (doctext.h). */
int worker_doc_text(void *ctx, struct engine_text *out, struct folio_err *err)
{
    struct doc_text_ctx *c = ctx;
    double t0 = folio_mono_ms();
    int maxp = c->max_pages;
    int n = c->pages < 1 ? 1 : c->pages;
    int todo = maxp > 0 && n > maxp ? maxp : n;
    out->pages_skipped = n - todo;
    out->pages_text_cut = out->text_doc_cut = 0;
    out->text_bytes_cut = 0;
    out->confidence = -1;
    size_t page_cap = c->max_page_bytes ? c->max_page_bytes : DOC_TEXT_PAGE_MAX_DEFAULT;
    size_t doc_cap = c->max_doc_bytes ? c->max_doc_bytes : DOC_TEXT_DOC_MAX_DEFAULT;
    size_t kept = 0; /* bytes of text so far, form feeds included */
    struct json_buf text;
    json_init(&text);
    double conf_sum = 0;
    int conf_n = 0;
    for (int p = 0; p < todo; p++) {
        if (p > 0 && kept + 1 >= doc_cap) {
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
        struct ingest_page pg;
        double td = folio_mono_ms();
        int rc = ingest_decode_page(c->data, c->len, p, DECODE_MAX_SIDE, 1, &pg, err);
        out->decode_ms += folio_mono_ms() - td;
        if (rc) {
            json_free(&text);
            folio_err_prefix(err, "page %d of %d: ", p + 1, n);
            return rc;
        }
        struct ocr_image img = {.width = pg.width, .height = pg.height, .channels = pg.channels,
                                .stride = pg.stride, .pixels = pg.pixels};
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
        if (p == 0)
            out->orientation = r.orientation;
        if (r.timed_out) {
            out->pages_timed_out++;
            folio_log(FOLIO_LOG_WARN, "ocr_page_deadline", "job=%lld page=%d deadline_ms=%d",
                      c->job_id, p + 1, c->page_deadline_ms);
        }
        size_t got = r.text ? strlen(r.text) : 0, keep = folio_utf8_prefix(r.text, got, page_cap);
        if (keep < got)
            out->pages_text_cut++;
        size_t room = doc_cap - kept - (p > 0); /* > 0: checked above */
        if (keep > room) {
            keep = folio_utf8_prefix(r.text, keep, room);
            out->text_doc_cut = 1;
        }
        if (keep < got) {
            out->text_bytes_cut += got - keep;
            folio_log(FOLIO_LOG_WARN, "page_text_cut", "job=%lld page=%d bytes=%zu kept=%zu "
                      "page_cap=%zu doc_cap=%zu", c->job_id, p + 1, got, keep, page_cap, doc_cap);
            r.text[keep] = 0;
        }
        if (p > 0)
            json_raw(&text, "\f"); /* page break, as the tesseract CLI writes */
        json_raw(&text, r.text);
        kept += keep + (p > 0);
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

