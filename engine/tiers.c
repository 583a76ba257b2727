/*
 * The model tiers of the fallback chain (docs/DESIGN.md §6.4): vision, then
 * OCR text + LM, each skipped with a recorded reason; the rules tier in
 * classify.c is the floor under them.
 *
 * One struct engine_models per process (per device) holds the GPU engine
 * (vlm: text model, vision tower, gate, self-test) and is shared by the
 * engines of every worker thread; the engines are cheap (labels, rules)
 * and are re-made when labels change, the models are not.
 *
 * Stages (issue 14). The GPU is fed by many job threads and driven by one:
 *
 *   job thread (any number)   reserve room in the bounded GPU queue,
 *       decode the page (the caller's provider), vlm_prepare it (smart
 *       resize, patches, prompt: CPU only), submit it and sleep until its
 *       result is back (a document's pages: a window of them at once, see
 *       "Pages of one document" below);
 *       OCR for the text tiers runs here too, only when vision did not
 *       answer: never on the GPU thread.
 *   GPU thread (one per engine_models, i.e. per device)  owns every use of
 *       the vlm's device: it takes whatever prepared pages are ready, up to
 *       vlm_max_batch, and runs them as one vlm_classify_batch pass. There
 *       is no artificial wait for a fuller batch: with the GPU busy, pages
 *       pile up while the pass runs, so batches fill by themselves exactly
 *       when the GPU is the bottleneck, and a lone page is not delayed when
 *       it is not. The ocr+lm tier's LM pass is a queue item too, run alone
 *       by the same thread, so the two tiers never touch the device at once
 *       and need no second lock.
 *
 * Pages of one document (engine_classify_pages). A job thread holding a
 * multi-page document works in windows of up to the pass size: it
 * reserves queue room for the window (only what is free now, at least
 * one slot, so it never waits for a fuller window and cannot starve
 * single pages), decodes and prepares those pages one after the other
 * (one decoded page in memory at a time), then queues them in one step,
 * contiguous, so the GPU thread finds them together and runs them in one
 * pass (with other documents' pages when the pass has room). Reserved
 * slots count against the queue bound like queued ones: prepared pages,
 * queued or about to be, never exceed 2 x batch in the whole process,
 * however many documents have many pages. Windows overlap: the thread
 * queues window w, then decodes, prepares and queues window w+1 while w
 * is on the GPU, and only then waits for w, so a lone document's CPU
 * work (~25 ms a 1024² page) does not leave the GPU idle between its
 * passes (two windows are at most 2 x batch pages: the same bound). The
 * results come back per page; the text tiers then run page by page for
 * those vision did not answer. Cancel takes every queued page of both
 * windows back out and waits for any already in a pass before the
 * windows' memory is freed.
 *
 * Why a thread and not the old mutex: under the mutex a page's decode and
 * preprocess ran while holding the GPU, and every pass carried one page;
 * the GPU idled for each page's CPU work. Now CPU work of the next pages
 * overlaps the current pass and a pass carries up to N pages.
 *
 * The queue is bounded (2 x batch): a job thread that finds no room waits
 * before it decodes, so prepared pages (megabytes each) cannot pile up
 * without limit, queued or still being prepared. A job
 * waiting for the GPU stays in its worker slot, so the worker's heartbeat
 * keeps renewing its lease; doc->cancel (shutdown, lease lost) takes a page
 * that is still queued back out at once. A page already in a pass waits
 * for the pass (bounded by one pass time).
 *
 * Failures. A failed pass that is not a device loss is re-run page by page
 * ("gpu_batch_split"): one bad page cannot fail its neighbours, and it
 * fails alone with its own reason. A device loss (or any fatal Vulkan
 * error) applies today's policy to every page of the pass: each falls back
 * to the OCR tiers with the reason, or is released (FOLIO_EDEVICELOST,
 * --on-device-loss release). The vlm is closed once no job thread is still
 * preparing on it; pages prepared on it and still queued are answered
 * "re-opened" and fall back. The next document after vlm_backoff_ms()
 * re-opens it; after ENGINE_MAX_REOPEN failed re-opens or losses in a row
 * the models stay off until restart: the worker keeps running on OCR +
 * rules and engine_models_paths() says so (the workers row shows it).
 *
 * Files (each calls only the ones below it; tiers_internal.h has the
 * shared state):
 *   tiers.c         the API: open, close, counters, the report, labels,
 *                   the steps of a document and tier 2 (the text tier)
 *   tiers_vision.c  tier 1 over a document's pages, a window at a time
 *   tiers_gpu.c     the GPU thread and its bounded queue
 *   tiers_models.c  the vlm's life (open, re-open, loss) and the helpers
 *                   that fill a page's result
 */
#include "common/fault.h"
#include "common/json.h"
#include "engine/tiers_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const PATHS[3] = {"ocr+rules", "ocr+lm,ocr+rules", "vision,ocr+lm,ocr+rules"};

static void parse_faults(struct engine_models *m)
{
#ifdef FOLIO_FAULT_INJECTION
    m->fault_fail_h = (uint32_t)folio_fault_num(FOLIO_FAULT_gpu_page_fail);
    m->fault_gather_ms = (int)folio_fault_num(FOLIO_FAULT_gpu_gather_ms);
    m->fault_nan_h = (uint32_t)folio_fault_num(FOLIO_FAULT_gpu_nan);
    if (m->fault_fail_h || m->fault_gather_ms || m->fault_nan_h)
        folio_log(FOLIO_LOG_WARN, "fault_injection", "gpu_page_fail=%u gpu_nan=%u gpu_gather_ms=%d",
                  m->fault_fail_h, m->fault_nan_h, m->fault_gather_ms);
#else
    (void)m;
#endif
}

int engine_models_open(const struct engine_models_config *cfg, struct engine_models **out,
                       struct folio_err *err)
{
    *out = NULL;
    struct engine_models *m = calloc(1, sizeof *m);
    if (!m)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    m->cfg = *cfg;
    if (cfg->max_batch > GPU_BATCH_MAX) {
        free(m);
        return folio_err_set(err, FOLIO_EINVAL, "--gpu-batch %u is over the limit of %d",
                             cfg->max_batch, GPU_BATCH_MAX);
    }
    pthread_mutex_init(&m->mu, NULL);
    /* monotonic waits: a job polls its cancel flag while it waits */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->work_cv, &ca);
    pthread_cond_init(&m->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    m->queue_cap = 2;
    parse_faults(m);
    if (!cfg->model_path) {
        m->gave_up = 1;
        snprintf(m->reason, sizeof m->reason, "no model configured (--model)");
        tiers_set_paths(m);
    } else {
        pthread_mutex_lock(&m->mu);
        tiers_try_open(m);
        pthread_mutex_unlock(&m->mu);
        if (pthread_create(&m->gpu, NULL, tiers_gpu_main, m) != 0) {
            engine_models_close(m);
            return folio_err_set(err, FOLIO_EIO, "cannot start the GPU thread");
        }
        m->has_thread = 1;
    }
    *out = m;
    return 0;
}

void engine_models_close(struct engine_models *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->quit = 1;
    pthread_cond_broadcast(&m->work_cv);
    pthread_mutex_unlock(&m->mu);
    if (m->has_thread)
        pthread_join(m->gpu, NULL);
    vlm_close(m->vlm);
    pthread_cond_destroy(&m->work_cv);
    pthread_cond_destroy(&m->done_cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

const char *engine_models_paths(const struct engine_models *m)
{
    return PATHS[atomic_load(&((struct engine_models *)m)->level)];
}
int engine_models_gave_up(struct engine_models *m)
{
    pthread_mutex_lock(&m->mu);
    int g = m->gave_up;
    pthread_mutex_unlock(&m->mu);
    return g;
}

void engine_models_reason(struct engine_models *m, char *buf, size_t n)
{
    pthread_mutex_lock(&m->mu);
    snprintf(buf, n, "%s", m->reason);
    pthread_mutex_unlock(&m->mu);
}

uint32_t engine_models_max_batch(struct engine_models *m)
{
    return m ? atomic_load(&m->batch) : 0;
}

unsigned long long engine_models_pipelines_after_seal(struct engine_models *m)
{
    return m ? atomic_load(&m->after_seal) : 0;
}

void engine_models_gpu_stats(struct engine_models *m, struct engine_gpu_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!m)
        return;
    out->passes = atomic_load(&m->passes);
    out->pages = atomic_load(&m->pages);
    out->splits = atomic_load(&m->splits);
    out->max_batch = atomic_load(&m->batch);
}

int engine_models_report_json(struct engine_models *m, char *buf, size_t n)
{
    pthread_mutex_lock(&m->mu);
    /* the report reads the device's counters: not while a pass runs */
    while (m->busy)
        pthread_cond_wait(&m->done_cv, &m->mu);
    int rc;
    if (m->vlm) {
        rc = vlm_report_json(m->vlm, buf, n);
    } else {
        char r[400];
        json_escape(r, sizeof r, m->reason);
        rc = snprintf(buf, n, "{\"vision\":false,\"gpu\":false,\"reason\":\"%s\"}", r) >= (int)n
                 ? FOLIO_ELIMIT
                 : 0;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int engine_models_report(struct engine_models *m, struct engine_report *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&m->mu);
    while (m->busy)
        pthread_cond_wait(&m->done_cv, &m->mu);
    if (m->vlm) {
        const struct vlm_report *r = vlm_report(m->vlm);
        out->open = 1;
        snprintf(out->device, sizeof out->device, "%s", r->device);
        out->weights_bytes = r->weights_bytes;
        out->activation_bytes = r->activation_bytes;
        out->pipelines = r->pipelines;
        out->ready_ms = r->total_ms;
    }
    pthread_mutex_unlock(&m->mu);
    return 0;
}

int engine_models_check_labels(struct engine_models *m, const char *const *names, int nl,
                               struct folio_err *err)
{
    /* the tokenizer and limits only: state fixed at open, safe beside a pass */
    pthread_mutex_lock(&m->mu);
    int rc = m->vlm ? vlm_check_labels(m->vlm, names, (uint32_t)nl, err) : 0;
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* Tier 2: OCR text (fetched by the caller, on this thread) + LM, run by the
 * GPU thread between vision passes. */
static int text_tier(struct engine_models *m, const char *const *names, int nl,
                     const struct engine_doc *doc, struct engine_result *out, int *done,
                     struct folio_err *err)
{
    struct gpu_item it;
    memset(&it, 0, sizeof it);
    it.kind = GPU_TEXT;
    it.names = names;
    it.nl = (uint32_t)nl;
    it.text = out->text.text;
    double *prob = calloc((size_t)nl, sizeof *prob);
    double *lp = calloc((size_t)nl, sizeof *lp);
    it.tr.prob = prob;
    it.tr.logprob = lp;
    if (!prob || !lp) {
        free(prob);
        free(lp);
        tiers_add_reason(out, "ocr+lm failed: out of host memory");
        return 0;
    }
    double t0 = folio_mono_ms();
    pthread_mutex_lock(&m->mu);
    int rc = 0;
    if (!m->vlm || m->closing) {
        tiers_add_reason(out, m->reason);
        pthread_mutex_unlock(&m->mu);
        free(prob);
        free(lp);
        return 0;
    }
    it.gen = m->gen;
    rc = tiers_submit_wait(m, &it, doc, err);
    pthread_mutex_unlock(&m->mu);
    if (rc == 0 && it.rc == 0) {
        tiers_answer(out, names, nl, prob, lp, it.tr.best, it.tr.confidence, "ocr+lm");
        out->lm_ms = folio_mono_ms() - t0;
        if (it.tr.truncated)
            tiers_add_reason(out, "ocr+lm: OCR text cut to the prompt budget");
        *done = 1;
        return 0;
    }
    free(prob);
    free(lp);
    if (rc)
        return rc;
    char b[320];
    snprintf(b, sizeof b, "ocr+lm failed: %s", it.msg);
    tiers_add_reason(out, b);
    if (it.lost && m->cfg.release_on_device_loss)
        return folio_err_set(err, FOLIO_EDEVICELOST, "GPU lost during the ocr+lm pass: %s", it.msg);
    return 0;
}

int engine_models_begin(struct engine_models *m, struct engine_result *outs, int n)
{
    pthread_mutex_lock(&m->mu);
    /* the re-open after a loss: by the first document past the backoff
     * (the GPU thread has nothing to run meanwhile) */
    if (!m->vlm && !m->gave_up && !m->closing && folio_mono_ms() >= m->retry_at_ms)
        tiers_try_open(m);
    int level = !m->vlm ? 0 : vlm_vision_enabled(m->vlm) ? 2 : 1;
    for (int p = 0; p < n && level < 2; p++)
        tiers_add_reason(&outs[p], m->reason);
    pthread_mutex_unlock(&m->mu);
    return level;
}

int engine_models_text(struct engine_models *m, const char *const *names, int nl, const struct engine_doc *doc,
                       struct engine_result *out, int *done, struct folio_err *err)
{
    *done = 0;
    /* the OCR text, on this thread (OCR is slow; never on the GPU thread) */
    if (!out->text.text) {
        int rc = doc->text(doc->text_ctx, &out->text, err);
        if (rc)
            return rc;
    }
    return text_tier(m, names, nl, doc, out, done, err);
}

int engine_gpu_weights_parse(const char *s)
{
    /* enum ops_gpu_weights' order */
    static const char *const names[] = {"auto", "f16", "native", "int8"};
    for (int i = 0; s && i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}
