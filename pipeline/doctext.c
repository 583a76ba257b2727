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

/* Decodes and OCRs the document's pages one at a time (a 300-dpi page is
 * ~8 MB gray; never hold them all), up to --ocr-max-pages. */
int worker_doc_text(void *ctx, struct engine_text *out, struct folio_err *err)
{
    struct doc_text_ctx *c = ctx;
    double t0 = folio_mono_ms();
    int maxp = c->max_pages;
    int n = c->pages < 1 ? 1 : c->pages;
    int todo = maxp > 0 && n > maxp ? maxp : n;
    out->pages_skipped = n - todo;
    out->confidence = -1;
    struct json_buf text;
    json_init(&text);
    double conf_sum = 0;
    int conf_n = 0;
    for (int p = 0; p < todo; p++) {
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
        if (p == 0)
            out->orientation = r.orientation;
        if (r.timed_out) {
            out->pages_timed_out++;
            folio_log(FOLIO_LOG_WARN, "ocr_page_deadline", "job=%lld page=%d deadline_ms=%d",
                      c->job_id, p + 1, c->page_deadline_ms);
        }
        if (p > 0)
            json_raw(&text, "\f"); /* page break, as the tesseract CLI writes */
        json_raw(&text, r.text);
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

