/*
 * Per-page classification (classify_doc.h). The pages go to the calling
 * thread's engine together (engine_classify_pages: their vision passes
 * are batched, the text tiers run page by page); each page's text tiers read
 * only that page (its PDF text layer when usable, else Tesseract within
 * the document's OCR budget). The document's text for full-text search is
 * the classified pages' texts joined with form feeds.
 */
#include "pipeline/document/classify_doc.h"
#include "common/json.h"
#include "ingest/ingest.h"
#include "pipeline/document/page_image.h"
#include "pipeline/document/doctext.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void worker_classified_free(struct doc_classified *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_pages; i++)
        engine_result_free(&c->pages[i].r);
    free(c->pages);
    free(c->segs);
    engine_result_free(&c->doc);
    memset(c, 0, sizeof *c);
}

static double *dup_doubles(const double *v, int n)
{
    if (!v || n <= 0)
        return NULL;
    double *d = malloc((size_t)n * sizeof *d);
    if (d)
        memcpy(d, v, (size_t)n * sizeof *d);
    return d;
}

/* The document's result from its pages: the first page's answer, every
 * page's text and counts. */
static int derive(struct doc_classified *c, struct folio_err *err)
{
    const struct engine_result *first = &c->pages[0].r;
    struct engine_result *d = &c->doc;
    *d = *first;
    d->scores = dup_doubles(first->scores, first->n_labels);
    d->raw = dup_doubles(first->raw, first->n_labels);
    d->prompt_ids = NULL;
    d->n_prompt_ids = 0;
    d->text = (struct engine_text){.confidence = -1, .orientation = first->text.orientation};
    if (first->n_labels > 0 && first->scores && (!d->scores || !d->raw))
        return folio_err_set(err, FOLIO_ENOMEM, "cannot copy the first page's scores");
    if (first->prompt_ids) { /* moved: the document shows what page 1 was asked */
        d->prompt_ids = first->prompt_ids;
        d->n_prompt_ids = first->n_prompt_ids;
        c->pages[0].r.prompt_ids = NULL;
        c->pages[0].r.n_prompt_ids = 0;
    }
    struct json_buf text;
    json_init(&text);
    double conf = 0;
    int conf_n = 0, any_text = 0;
    d->rules_ms = d->vision_ms = d->lm_ms = 0;
    for (int p = 0; p < c->n_pages; p++) {
        const struct engine_result *r = &c->pages[p].r;
        if (p)
            json_raw(&text, "\f");
        if (r->text.text) {
            json_raw(&text, r->text.text);
            any_text = 1;
        }
        if (r->text.confidence >= 0) {
            conf += r->text.confidence;
            conf_n++;
        }
        d->text.pages_read += r->text.pages_read;
        d->text.pages_skipped += r->text.pages_skipped;
        d->text.pages_timed_out += r->text.pages_timed_out;
        d->text.pages_text_cut += r->text.pages_text_cut;
        d->text.text_bytes_cut += r->text.text_bytes_cut;
        d->text.text_doc_cut |= r->text.text_doc_cut;
        d->text.ms += r->text.ms;
        d->text.decode_ms += r->text.decode_ms;
        d->text.ocr_ms += r->text.ocr_ms;
        d->rules_ms += r->rules_ms;
        d->vision_ms += r->vision_ms;
        d->lm_ms += r->lm_ms;
    }
    d->text.pages_skipped += c->pages_total - c->n_pages;
    d->text.confidence = conf_n ? conf / conf_n : -1;
    if (text.oom) {
        json_free(&text);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot hold the document text");
    }
    if (any_text) {
        d->text.text = text.s ? text.s : strdup("");
        if (!d->text.text)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot hold the document text");
    } else {
        json_free(&text);
    }
    if (c->n_segs > 1) {
        /* the split is a question for a person; say so, after the first
         * page's own reason when it had one (issue 33: the reason was
         * empty for these) */
        d->needs_review = 1;
        size_t k = strlen(d->review_reason);
        snprintf(d->review_reason + k, sizeof d->review_reason - k, "%s%d documents in one file? split suggested",
                 k ? "; " : "", c->n_segs);
    }
    return 0;
}

/* One document's pages in flight (engine_classify_pages): each page's
 * providers, and the state handed from one page to the next in page
 * order, as the pages become final. */
struct doc_run {
    struct doc_classified *out;
    struct engine_result *rs; /* the engine's results, moved to out->pages at the end */
    struct doc_text_ctx *tc;
    struct doc_page_ctx *pc;
    struct doc_page_text *pt;
    int settled;        /* pages 0..settled-1 are done: text layer, budget, counts */
    size_t doc_room;    /* the document's text budget left for the next page */
};

struct doc_page_text {
    struct doc_run *run;
    int page;
};

/* Page p is final: a vision page's PDF text layer (for full-text search),
 * its text source, its share of the document's text budget, the counts. */
static void settle_page(struct doc_run *run, int p)
{
    struct doc_classified *out = run->out;
    struct engine_result *r = &run->rs[p];
    struct doc_text_ctx *tc = &run->tc[p];
    if (tc->pdf && !r->text.text) {
        /* Vision answered without text: a usable text layer still feeds
         * full-text search, at no OCR cost (budget 0). */
        int none = 0;
        struct doc_text_ctx lt = *tc;
        lt.ocr_left = &none;
        lt.max_doc_bytes = run->doc_room;
        struct engine_text et;
        memset(&et, 0, sizeof et);
        struct folio_err le = {0};
        if (worker_doc_text(&lt, &et, &le) == 0 && (lt.pdf_text_pages || lt.reused_pages)) {
            r->text.text = et.text;
            tc->pdf_text_pages = lt.pdf_text_pages;
            tc->reused_pages = lt.reused_pages;
            tc->reused_source = lt.reused_source;
        } else {
            free(et.text);
        }
    }
    out->pages[p].text_source = worker_text_source(tc);
    size_t got = r->text.text ? strlen(r->text.text) + 1 : 0;
    run->doc_room = run->doc_room > got + 1 ? run->doc_room - got : 1;
    out->pdf_text_pages += tc->pdf_text_pages;
    out->ocr_pages += tc->ocr_pages;
    out->reused_pages += tc->reused_pages;
}

static void settle(struct doc_run *run, int upto)
{
    for (; run->settled < upto; run->settled++)
        settle_page(run, run->settled);
}

/* engine_text_fn of page p: the engine calls it once pages 0..p-1 are
 * final (engine.h), so their text has been charged to the budget first,
 * exactly as when the pages were classified one after the other. */
static int page_text(void *ctx, struct engine_text *out, struct folio_err *err)
{
    struct doc_page_text *pt = ctx;
    struct doc_run *run = pt->run;
    settle(run, pt->page);
    run->tc[pt->page].max_doc_bytes = run->doc_room;
    return worker_doc_text(&run->tc[pt->page], out, err);
}

int worker_classify_document(struct engine *e, const uint8_t *data, size_t len, const struct doc_pages_opts *o,
                             struct doc_classified *out, struct folio_err *err)
{
    memset(out, 0, sizeof *out);
    double t0 = folio_mono_ms();
    struct ingest_pdf *pdf = NULL;
    int rc = 0, total = o->pages < 1 ? 1 : o->pages;
    if (o->cancel && atomic_load(o->cancel))
        return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled before page 1");
    if (ingest_sniff(data, len) == INGEST_FMT_PDF) {
        struct ingest_limits lim;
        if (o->pdf_limits)
            lim = *o->pdf_limits;
        else
            ingest_limits_default(&lim);
        lim.max_pages = INT_MAX - 1; /* probed at ingest; every page size is wanted here */
        rc = ingest_pdf_open(data, len, &lim, &pdf, err);
        if (rc) {
            ingest_pdf_close(pdf);
            return rc;
        }
        total = ingest_pdf_pages(pdf);
    }
    int maxc = o->max_classified > 0 ? o->max_classified : DOC_MAX_PAGES_CLASSIFIED;
    int n = total < maxc ? total : maxc;
    out->pages_total = total;
    out->pages = calloc((size_t)n, sizeof *out->pages);
    out->segs = calloc((size_t)n, sizeof *out->segs);
    struct doc_run run = {.out = out, .settled = 0,
                          .doc_room = o->max_doc_bytes ? o->max_doc_bytes : DOC_TEXT_DOC_MAX_DEFAULT};
    run.tc = calloc((size_t)n, sizeof *run.tc);
    run.pc = calloc((size_t)n, sizeof *run.pc);
    run.pt = calloc((size_t)n, sizeof *run.pt);
    run.rs = calloc((size_t)n, sizeof *run.rs);
    struct engine_doc *docs = calloc((size_t)n, sizeof *docs);
    if (!out->pages || !out->segs || !run.tc || !run.pc || !run.pt || !run.rs || !docs) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "cannot hold results for %d pages", n);
        goto done;
    }
    int ocr_left = o->ocr_max_pages > 0 ? o->ocr_max_pages : INT_MAX;
    struct doc_reuse reuse = {.fetch = o->stored_text, .ctx = o->stored_ctx};
    for (int p = 0; p < n; p++) {
        run.tc[p] = (struct doc_text_ctx){.ocr = o->ocr, .cancel = o->cancel, .data = data, .len = len,
                                          .pages = p + 1, .job_id = o->job_id,
                                          .page_deadline_ms = o->page_deadline_ms, .first_page = p, .pdf = pdf,
                                          .ocr_left = &ocr_left, .max_page_bytes = o->max_page_bytes,
                                          .max_pixels = o->max_pixels, .reuse = o->stored_text ? &reuse : NULL,
                                          .decode_budget = o->decode_budget};
        run.pc[p] = (struct doc_page_ctx){.data = data, .len = len, .page = p, .pdf = pdf,
                                          .max_image_tokens = o->max_image_tokens, .max_pixels = o->max_pixels,
                                          .decode_budget = o->decode_budget, .cancel = o->cancel};
        run.pt[p] = (struct doc_page_text){.run = &run, .page = p};
        docs[p] = (struct engine_doc){page_text, &run.pt[p], worker_doc_page, &run.pc[p], o->cancel};
    }
    /* the pages go to the engine together: it batches their vision passes */
    int failed = 0;
    rc = engine_classify_pages(e, docs, n, run.rs, &failed, err);
    if (rc) {
        if (total > 1)
            folio_err_prefix(err, "page %d of %d: ", failed + 1, total);
    } else {
        settle(&run, n);
        out->n_segs = engine_pages_segments(run.rs, n, out->segs);
    }
    for (int p = 0; p < n; p++)
        out->pages[p].r = run.rs[p]; /* freed with the rest even on failure */
    out->n_pages = n;
    doc_reuse_free(&reuse);
    if (rc == 0)
        rc = derive(out, err);
done:
    ingest_pdf_close(pdf);
    free(run.tc);
    free(run.pc);
    free(run.pt);
    free(run.rs);
    free(docs);
    if (rc) {
        worker_classified_free(out);
        return rc;
    }
    out->doc.total_ms = folio_mono_ms() - t0;
    return 0;
}

void worker_pages_json(const struct doc_classified *c, struct json_buf *out)
{
    const struct engine_text *t = &c->doc.text;
    char b[512];
    snprintf(b, sizeof b,
             "{\"total\":%d,\"classified\":%d,\"read\":%d,\"skipped\":%d,\"timed_out\":%d,\"pdf_text\":%d,"
             "\"ocr\":%d,\"reused\":%d,\"text_cut\":{\"pages\":%d,\"bytes\":%zu,\"document\":%s},\"results\":[",
             c->pages_total, c->n_pages, t->pages_read, t->pages_skipped, t->pages_timed_out, c->pdf_text_pages,
             c->ocr_pages, c->reused_pages, t->pages_text_cut, t->text_bytes_cut, t->text_doc_cut ? "true" : "false");
    json_raw(out, b);
    for (int p = 0; p < c->n_pages; p++) {
        const struct engine_result *r = &c->pages[p].r;
        snprintf(b, sizeof b, "%s{\"page\":%d,\"label\":", p ? "," : "", p + 1);
        json_raw(out, b);
        json_str(out, r->label);
        json_raw(out, ",\"confidence\":");
        json_num(out, r->confidence);
        json_raw(out, ",\"scores\":");
        worker_scores_json(r, out);
        json_raw(out, ",\"engine_path\":");
        json_str(out, r->engine_path);
        json_raw(out, ",\"text_source\":");
        json_str(out, c->pages[p].text_source ? c->pages[p].text_source : "none");
        json_raw(out, ",\"fallback_reason\":");
        json_str(out, r->fallback_reason);
        json_raw(out, "}");
    }
    json_raw(out, "]");
    if (c->n_segs > 1) {
        json_raw(out, ",\"segments\":[");
        for (int s = 0; s < c->n_segs; s++) {
            const struct engine_segment *g = &c->segs[s];
            snprintf(b, sizeof b, "%s{\"first_page\":%d,\"last_page\":%d,\"label\":", s ? "," : "",
                     g->first_page + 1, g->last_page + 1);
            json_raw(out, b);
            json_str(out, g->label);
            json_raw(out, ",\"confidence\":");
            json_num(out, g->confidence);
            json_raw(out, "}");
        }
        json_raw(out, "]");
    }
    json_raw(out, "}");
}
