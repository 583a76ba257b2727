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
 * however many documents have many pages. The results come back per
 * page; the text tiers then run page by page for those vision did not
 * answer. Cancel takes every queued page of the window back out and
 * waits for any already in a pass before the window's memory is freed.
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
 */
#include "common/fault.h"
#include "common/json.h"
#include "engine/engine.h"
#include "engine/model/lm.h"
#include "engine/tiers.h"
#include "engine/vk/vkr.h"
#include "engine/vlm.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ENGINE_MAX_REOPEN 3
#define GPU_BATCH_MAX 256 /* = --gpu-batch's upper bound */

enum gpu_kind { GPU_VISION, GPU_TEXT };
enum gpu_state { GPU_IDLE, GPU_QUEUED, GPU_TAKEN, GPU_DONE };

/* One page (or one OCR text) waiting for, in, or back from a GPU pass.
 * Lives on the submitting job thread's stack. */
struct gpu_item {
    enum gpu_kind kind;
    int state;                  /* enum gpu_state, guarded by m->mu */
    uint64_t gen;               /* vlm generation the page was prepared on */
    struct vlm_prepared *prep;  /* GPU_VISION */
    uint32_t page_h;            /* the page's height (fault injection) */
    double page_ms;             /* GPU_VISION: its decode time */
    int report;                 /* GPU_VISION: rc/vr are the page's outcome (else its reason is set) */
    const char *text;           /* GPU_TEXT */
    const char *const *names;
    uint32_t nl;
    struct vlm_result vr;       /* GPU_VISION result (prob/logprob: the job's arrays) */
    struct lm_text_result tr;   /* GPU_TEXT result */
    int rc;                     /* 0, or why this item failed */
    int lost;                   /* its pass lost the device */
    uint32_t batch;             /* pages in the pass that answered it */
    char msg[256];
    struct gpu_item *next;
};

struct engine_models {
    struct engine_models_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* GPU thread: an item was queued, or quit */
    pthread_cond_t done_cv;  /* job threads: an item is done, the queue has room, preparers left */
    struct vlm *vlm;         /* touched on the device only by the GPU thread */
    uint64_t gen;            /* bumped whenever vlm changes: stale prepared pages are refused */
    int users;               /* job threads inside vlm_prepare on vlm (guarded by mu) */
    int busy;                /* a GPU pass runs outside mu */
    int closing;             /* a lost vlm waits for its preparers before vlm_close */
    struct gpu_item *head, *tail;
    int queued, queue_cap;
    int reserved;            /* slots held by job threads preparing pages for them */
    int quit;
    int has_thread;
    pthread_t gpu;
    int losses;            /* consecutive losses / failed re-opens */
    int gave_up;
    double retry_at_ms;
    char reason[320];      /* why a tier is off now ("" when all run) */
    _Atomic int level;     /* 2 vision+lm, 1 lm, 0 rules only: read without the lock */
    _Atomic unsigned batch;                  /* pages per pass of the open vlm (0: none open) */
    _Atomic unsigned long long after_seal_closed; /* of vlms already closed */
    _Atomic unsigned long long after_seal;   /* closed + the open one, after each pass */
    _Atomic unsigned long long passes, pages, splits;
    uint32_t fault_fail_h;   /* FOLIO_FAULT=gpu_page_fail:H (test builds) */
    uint32_t fault_nan_h;    /* FOLIO_FAULT=gpu_nan:H (test builds) */
    int fault_gather_ms;     /* FOLIO_FAULT=gpu_gather_ms:N (test builds) */
};

static const char *const PATHS[3] = {"ocr+rules", "ocr+lm,ocr+rules", "vision,ocr+lm,ocr+rules"};

static void set_paths(struct engine_models *m)
{
    atomic_store(&m->level, m->vlm && vlm_vision_enabled(m->vlm) ? 2 : m->vlm ? 1 : 0);
}

/* Pipelines requested after the registry was sealed: must stay 0 (every
 * shape the batch can take was pre-warmed at open). Read by the owner of
 * the device (GPU thread, or with no pass running). */
static uint64_t after_seal_now(struct engine_models *m)
{
    if (!m->vlm)
        return 0;
    return vlm_requests_after_seal(m->vlm); /* every device of the engine */
}

static void refresh_after_seal(struct engine_models *m)
{
    atomic_store(&m->after_seal, atomic_load(&m->after_seal_closed) + after_seal_now(m));
}

/* Opens the vlm (mu held); on failure records why and whether retrying
 * can help. */
static void try_open(struct engine_models *m)
{
    struct vlm_config vc = {.model_path = m->cfg.model_path, .mmproj_path = m->cfg.mmproj_path,
                            .device = m->cfg.device, .allow_cpu = m->cfg.allow_cpu,
                            .validate = -1, .cache_dir = m->cfg.cache_dir,
                            .max_image_tokens = m->cfg.max_image_tokens,
                            .gate_file = m->cfg.gate_file, .gpu_weights = m->cfg.gpu_weights,
                            .max_batch = m->cfg.max_batch,
                            .max_label_tokens = m->cfg.max_label_tokens};
    struct folio_err e = {0};
    int rc = vlm_open(&vc, &m->vlm, &e);
    m->gen++;
    if (rc == 0) {
        m->reason[0] = 0;
        if (!vlm_vision_enabled(m->vlm))
            snprintf(m->reason, sizeof m->reason, "vision off: %s",
                     vlm_report(m->vlm)->vision_reason);
        uint32_t b = vlm_max_batch(m->vlm);
        b = b < 1 ? 1 : b > GPU_BATCH_MAX ? GPU_BATCH_MAX : b;
        atomic_store(&m->batch, b);
        m->queue_cap = 2 * (int)b;
        refresh_after_seal(m);
        set_paths(m);
        folio_log(FOLIO_LOG_INFO, "engine_gpu_batch", "max_batch=%u queue=%d", b, m->queue_cap);
        return;
    }
    m->vlm = NULL;
    int transient = rc == FOLIO_EDEVICELOST || rc == FOLIO_EDEVICE;
    if (transient)
        m->losses++;
    if (!transient || m->losses >= ENGINE_MAX_REOPEN)
        m->gave_up = 1;
    snprintf(m->reason, sizeof m->reason, "GPU tiers off%s: %s%s%s",
             m->gave_up && transient ? " after repeated failures (OCR-only until restart)" : "",
             e.msg, e.hint[0] ? "; " : "", e.hint);
    m->retry_at_ms = folio_mono_ms() + vlm_backoff_ms(m->losses);
    set_paths(m);
    char q[400];
    folio_log(FOLIO_LOG_WARN, "engine_models_off", "reason=%s retry=%d",
              folio_lq(q, sizeof q, m->reason), !m->gave_up);
}

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

static void *gpu_main(void *arg);

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
        set_paths(m);
    } else {
        pthread_mutex_lock(&m->mu);
        try_open(m);
        pthread_mutex_unlock(&m->mu);
        if (pthread_create(&m->gpu, NULL, gpu_main, m) != 0) {
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

/* The vlm died under us (GPU thread, mu held): every later page falls
 * back until the re-open. Waits for job threads still preparing on it. */
static void lost(struct engine_models *m, const char *why)
{
    struct vlm *v = m->vlm;
    m->vlm = NULL;
    m->gen++;
    m->closing = 1;
    m->losses++;
    m->gave_up = m->losses >= ENGINE_MAX_REOPEN;
    snprintf(m->reason, sizeof m->reason, "GPU lost (%s)%s", why,
             m->gave_up ? "; OCR-only until restart after repeated failures"
                        : "; re-opening with backoff");
    atomic_store(&m->batch, 0);
    set_paths(m);
    while (m->users > 0)
        pthread_cond_wait(&m->done_cv, &m->mu);
    atomic_fetch_add(&m->after_seal_closed, vlm_requests_after_seal(v));
    vlm_close(v);
    m->closing = 0;
    m->retry_at_ms = folio_mono_ms() + vlm_backoff_ms(m->losses);
    char q[400];
    folio_log(FOLIO_LOG_ERROR, "engine_gpu_lost", "losses=%d gave_up=%d reason=%s", m->losses,
              m->gave_up, folio_lq(q, sizeof q, why));
}

static void add_reason(struct engine_result *out, const char *s)
{
    size_t k = strlen(out->fallback_reason);
    snprintf(out->fallback_reason + k, sizeof out->fallback_reason - k, "%s%s", k ? "; " : "", s);
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

/* ------------------------------------------------------------ GPU thread */

static int dev_lost(struct vlm *v, int rc)
{
    return rc == FOLIO_EDEVICELOST || vlm_dead(v);
}

/* One vision pass over n prepared pages (no lock held). */
static int vision_pass(struct engine_models *m, struct vlm *v, struct gpu_item **it, uint32_t n,
                       struct folio_err *e)
{
    struct vlm_prepared *preps[GPU_BATCH_MAX] = {0};
    struct vlm_result res[GPU_BATCH_MAX];
    memset(res, 0, n * sizeof *res);
    for (uint32_t i = 0; i < n; i++) {
        preps[i] = it[i]->prep;
        res[i] = it[i]->vr;
    }
    int rc;
#ifdef FOLIO_FAULT_INJECTION
    for (uint32_t i = 0; i < n && m->fault_fail_h; i++)
        if (it[i]->page_h == m->fault_fail_h)
            return folio_err_set(e, FOLIO_EIO, "injected page failure (FOLIO_FAULT=gpu_page_fail:%u)",
                                 m->fault_fail_h);
#else
    (void)m;
#endif
    rc = vlm_classify_batch(v, preps, n, res, e);
#ifdef FOLIO_FAULT_INJECTION
    for (uint32_t i = 0; i < n && rc == 0 && m->fault_nan_h; i++)
        if (it[i]->page_h == m->fault_nan_h)
            res[i].confidence = NAN;
#endif
    for (uint32_t i = 0; i < n; i++)
        it[i]->vr = res[i];
    return rc;
}

static void set_item_err(struct gpu_item *it, int rc, const char *msg, int lost_dev)
{
    it->rc = rc;
    it->lost = lost_dev;
    snprintf(it->msg, sizeof it->msg, "%s", msg);
}

/* A model whose activations overflow (a broken or badly quantised file, an
 * f16 range exceeded) scores NaN or infinity. That is the model's fault on
 * this page, not the document's: the page gets an error of its own, so the
 * document falls back to the next tier with the reason instead of writing
 * a NaN confidence that the database refuses (every attempt, until dead:
 * seen with random-weight models on the H200). */
static void nonfinite_check(struct gpu_item *it, double confidence, const char *tier)
{
    if (isfinite(confidence))
        return;
    char msg[200];
    snprintf(msg, sizeof msg, "the %s tier's label scores are not finite (%g): the model's "
             "activations overflowed on this page", tier, confidence);
    set_item_err(it, FOLIO_EFORMAT, msg, 0);
}

/* Runs the taken items on v; returns 1 when the device was lost (msg says
 * why). No lock held: only this thread touches the device. */
static int run_pass(struct engine_models *m, struct vlm *v, struct gpu_item **it, uint32_t n, char *why,
                    size_t whyn)
{
    struct folio_err e = {0};
    if (it[0]->kind == GPU_TEXT) {
        const char *txt = it[0]->text ? it[0]->text : "";
        int rc = lm_text_classify(vlm_lm(v), vlm_tok(v), &txt, NULL, 1, it[0]->names, it[0]->nl, 0,
                                  &it[0]->tr, &e);
        int l = rc && dev_lost(v, rc);
        if (rc)
            set_item_err(it[0], rc, e.msg, l);
        else
            nonfinite_check(it[0], it[0]->tr.confidence, "ocr+lm");
        snprintf(why, whyn, "%s", e.msg);
        return l;
    }
    atomic_fetch_add(&m->passes, 1);
    atomic_fetch_add(&m->pages, n);
    double t0 = folio_mono_ms();
    int rc = vision_pass(m, v, it, n, &e);
    folio_log(FOLIO_LOG_DEBUG, "gpu_pass", "pages=%u rc=%d ms=%.1f", n, rc, folio_mono_ms() - t0);
    if (rc == 0) {
        for (uint32_t i = 0; i < n; i++) {
            it[i]->batch = n;
            nonfinite_check(it[i], it[i]->vr.confidence, "vision");
        }
        return 0;
    }
    if (dev_lost(v, rc)) {
        for (uint32_t i = 0; i < n; i++)
            set_item_err(it[i], rc, e.msg, 1);
        snprintf(why, whyn, "%s", e.msg);
        return 1;
    }
    if (n == 1) {
        set_item_err(it[0], rc, e.msg, 0);
        return 0;
    }
    /* Not the device: some page of the pass is bad. Each page alone, so
     * the good ones still get their answer and the bad one its own error. */
    atomic_fetch_add(&m->splits, 1);
    char q[300];
    folio_log(FOLIO_LOG_WARN, "gpu_batch_split", "pages=%u error=%s", n, folio_lq(q, sizeof q, e.msg));
    for (uint32_t i = 0; i < n; i++) {
        struct folio_err ei = {0};
        vlm_result_free(&it[i]->vr);
        atomic_fetch_add(&m->passes, 1);
        int r = vision_pass(m, v, &it[i], 1, &ei);
        if (r == 0) {
            it[i]->batch = 1;
            nonfinite_check(it[i], it[i]->vr.confidence, "vision"); /* as in a whole pass */
            continue;
        }
        if (dev_lost(v, r)) {
            for (uint32_t k = i; k < n; k++)
                set_item_err(it[k], r, ei.msg, 1);
            snprintf(why, whyn, "%s", ei.msg);
            return 1;
        }
        set_item_err(it[i], r, ei.msg, 0);
    }
    return 0;
}

static void unlink_item(struct engine_models *m, struct gpu_item *it)
{
    struct gpu_item **pp = &m->head, *prev = NULL;
    while (*pp && *pp != it) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = it->next;
    if (m->tail == it)
        m->tail = prev;
    it->next = NULL;
    m->queued--;
}

static void *gpu_main(void *arg)
{
    struct engine_models *m = arg;
    struct gpu_item *take[GPU_BATCH_MAX];
    pthread_mutex_lock(&m->mu);
    for (;;) {
        while (!m->quit && !m->head)
            pthread_cond_wait(&m->work_cv, &m->mu);
        if (!m->head)
            break; /* quit with nothing queued */
#ifdef FOLIO_FAULT_INJECTION
        /* tests: let every ready page join this pass, so that a batch
         * of several pages is certain */
        if (m->fault_gather_ms && !m->quit) {
            pthread_mutex_unlock(&m->mu);
            folio_sleep_ms(m->fault_gather_ms);
            pthread_mutex_lock(&m->mu);
        }
#endif
        uint32_t cap = atomic_load(&m->batch);
        cap = cap < 1 ? 1 : cap;
        uint32_t n = 0;
        for (struct gpu_item *it = m->head, *nx; it; it = nx) {
            nx = it->next;
            if (m->quit || !m->vlm || it->gen != m->gen) {
                /* prepared on a vlm that is gone, or the engine is
                 * closing: the page falls back with the reason */
                unlink_item(m, it);
                set_item_err(it, FOLIO_ESTATE, m->quit ? "engine closing" : m->reason, 0);
                it->state = GPU_DONE;
                continue;
            }
            if (n == 0 && it->kind == GPU_TEXT) {
                take[n++] = it;
                break;
            }
            if (it->kind == GPU_VISION && n < cap)
                take[n++] = it;
        }
        pthread_cond_broadcast(&m->done_cv);
        if (n == 0)
            continue;
        for (uint32_t i = 0; i < n; i++) {
            unlink_item(m, take[i]);
            take[i]->state = GPU_TAKEN;
        }
        struct vlm *v = m->vlm;
        m->busy = 1;
        pthread_mutex_unlock(&m->mu);

        char why[256] = "";
        int was_lost = run_pass(m, v, take, n, why, sizeof why);

        pthread_mutex_lock(&m->mu);
        m->busy = 0;
        if (was_lost)
            lost(m, why);
        else
            refresh_after_seal(m);
        if (!was_lost && n && take[0]->rc == 0)
            m->losses = 0;
        for (uint32_t i = 0; i < n; i++)
            take[i]->state = GPU_DONE;
        pthread_cond_broadcast(&m->done_cv);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* ------------------------------------------------------------ job threads */

static int cancelled(const struct engine_doc *doc)
{
    return doc->cancel && atomic_load(doc->cancel) != 0;
}

static void wait_a_bit(struct engine_models *m)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 50 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&m->done_cv, &m->mu, &ts);
}

/* Queue room for this thread, mu held: slots neither queued nor reserved
 * by a thread still preparing pages for them. */
static int room(const struct engine_models *m)
{
    return m->queue_cap - m->queued - m->reserved;
}

/* Queues it and sleeps until the GPU thread answered it (mu held on entry
 * and exit). FOLIO_ETIMEOUT when the job was cancelled before its pass. */
static int submit_wait(struct engine_models *m, struct gpu_item *it, const struct engine_doc *doc,
                       struct folio_err *err)
{
    while (!m->quit && room(m) < 1 && !cancelled(doc))
        wait_a_bit(m);
    if (cancelled(doc))
        return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while waiting for the GPU");
    if (m->quit || !m->has_thread) {
        set_item_err(it, FOLIO_ESTATE, "engine closing", 0);
        return 0;
    }
    it->state = GPU_QUEUED;
    it->next = NULL;
    if (m->tail)
        m->tail->next = it;
    else
        m->head = it;
    m->tail = it;
    m->queued++;
    pthread_cond_signal(&m->work_cv);
    while (it->state != GPU_DONE) {
        if (it->state == GPU_QUEUED && cancelled(doc)) {
            unlink_item(m, it);
            pthread_cond_broadcast(&m->done_cv);
            return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while queued for the GPU");
        }
        wait_a_bit(m);
    }
    return 0;
}

/* A model tier answered: out takes the distribution (prob, lp: malloc'd). */
static void answer(struct engine_result *out, const char *const *names, int nl, double *prob, double *lp,
                   int best, double confidence, const char *path)
{
    free(out->scores);
    free(out->raw);
    out->scores = prob;
    out->raw = lp;
    out->n_labels = nl;
    out->names = names;
    snprintf(out->label, sizeof out->label, "%s", names[best]);
    out->confidence = confidence;
    snprintf(out->engine_path, sizeof out->engine_path, "%s", path);
}

/* Tier 1 over the pages of one document, a window at a time (see
 * "Pages of one document" at the top). The items of a window live in it[]
 * (room for cap); each page's outcome lands in its own out: answered
 * (engine_path "vision") or the reason it was not. */

/* Queues the window's prepared pages together and sleeps until the GPU
 * thread answered every one (mu held on entry and exit). On cancel the
 * pages still queued are taken back out, the ones in a pass are waited
 * for (the GPU thread writes into them), and FOLIO_ETIMEOUT is returned. */
static int submit_window(struct engine_models *m, struct gpu_item *it, int k, const struct engine_doc *doc,
                         struct folio_err *err)
{
    int queued = 0;
    for (int i = 0; i < k; i++) {
        if (!it[i].prep)
            continue; /* not decoded or not prepared: its reason is set */
        if (m->quit) {
            set_item_err(&it[i], FOLIO_ESTATE, "engine closing", 0);
            continue;
        }
        it[i].state = GPU_QUEUED;
        it[i].next = NULL;
        if (m->tail)
            m->tail->next = &it[i];
        else
            m->head = &it[i];
        m->tail = &it[i];
        m->queued++;
        queued++;
    }
    if (queued)
        pthread_cond_signal(&m->work_cv);
    int cancel = 0;
    for (;;) {
        int waiting = 0;
        for (int i = 0; i < k; i++) {
            if (it[i].state == GPU_QUEUED && cancelled(doc)) {
                unlink_item(m, &it[i]);
                it[i].state = GPU_IDLE;
                cancel = 1;
                pthread_cond_broadcast(&m->done_cv);
            } else if (it[i].state == GPU_QUEUED || it[i].state == GPU_TAKEN) {
                waiting++;
            }
        }
        if (!waiting)
            break;
        wait_a_bit(m);
    }
    return cancel ? folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while queued for the GPU") : 0;
}

/* Decodes and prepares page i of the window on this thread (no lock
 * held); a page that cannot be decoded gets its reason and no item. */
static void prepare_page(struct vlm *v, const char *const *names, int nl, const struct engine_doc *doc,
                         struct engine_result *out, struct gpu_item *it)
{
    memset(it, 0, sizeof *it);
    it->kind = GPU_VISION;
    it->names = names;
    it->nl = (uint32_t)nl;
    struct engine_page pg;
    memset(&pg, 0, sizeof pg);
    struct folio_err pe = {0};
    char b[320];
    if (!doc->page) {
        add_reason(out, "vision: no page image for this document");
        return;
    }
    if (doc->page(doc->page_ctx, &pg, &pe) != 0) {
        snprintf(b, sizeof b, "vision: page not decoded: %s", pe.msg);
        add_reason(out, b);
        return;
    }
    it->page_h = (uint32_t)pg.height;
    it->page_ms = pg.ms;
    it->vr.prob = calloc((size_t)nl, sizeof *it->vr.prob);
    it->vr.logprob = calloc((size_t)nl, sizeof *it->vr.logprob);
    if (!it->vr.prob || !it->vr.logprob) {
        free(pg.pixels);
        free(it->vr.prob);
        free(it->vr.logprob);
        it->vr.prob = it->vr.logprob = NULL;
        add_reason(out, "vision failed: out of host memory");
        return;
    }
    struct vlm_page vp = {pg.pixels, (uint32_t)pg.width, (uint32_t)pg.height, pg.stride, pg.channels};
    int prc = vlm_prepare(v, &vp, names, (uint32_t)nl, &it->prep, &pe);
    free(pg.pixels);
    if (prc) {
        vlm_prepared_free(it->prep);
        it->prep = NULL;
        set_item_err(it, prc, pe.msg, 0);
    }
    it->report = 1; /* answered by its pass, or "vision failed: <why>" */
}

/* The outcome of one item for its page (when record is set);
 * FOLIO_EDEVICELOST under the release policy. Frees what the item holds. */
static int page_outcome(struct engine_models *m, const char *const *names, int nl, struct gpu_item *it,
                        struct engine_result *out, int record, struct folio_err *err)
{
    vlm_prepared_free(it->prep);
    it->prep = NULL;
    int rc = 0;
    if (!record || !it->report) {
        /* cancelled, or its reason is already in out */
    } else if (it->rc == 0) {
        struct vlm_result *r = &it->vr;
        answer(out, names, nl, r->prob, r->logprob, r->best, r->confidence, "vision");
        r->prob = r->logprob = NULL;
        out->prompt_ids = r->prompt_ids;
        out->n_prompt_ids = r->n_prompt;
        r->prompt_ids = NULL;
        out->vision_ms = r->preprocess_ms + r->vision_ms + it->page_ms;
        out->lm_ms = r->lm_ms;
        out->text.decode_ms += it->page_ms;
    } else {
        char b[320];
        snprintf(b, sizeof b, "vision failed: %s", it->msg);
        add_reason(out, b);
        if (it->lost && m->cfg.release_on_device_loss)
            rc = folio_err_set(err, FOLIO_EDEVICELOST, "GPU lost during the vision pass: %s", it->msg);
    }
    free(it->vr.prob);
    free(it->vr.logprob);
    it->vr.prob = it->vr.logprob = NULL;
    vlm_result_free(&it->vr);
    return rc;
}

/* One window: reserves queue room for up to cap of the n pages left,
 * prepares them, queues them together, waits, and records each page's
 * outcome. *used: pages the window covered (all n when vision is off). */
static int vision_window(struct engine_models *m, const char *const *names, int nl, const struct engine_doc *docs,
                         struct engine_result *outs, int n, struct gpu_item *it, int cap, int *used,
                         struct folio_err *err)
{
    pthread_mutex_lock(&m->mu);
    struct vlm *v;
    for (;;) {
        v = m->vlm;
        if (m->quit || !v || m->closing || !vlm_vision_enabled(v)) {
            for (int p = 0; p < n; p++)
                add_reason(&outs[p], m->quit ? "vision failed: engine closing" : m->reason);
            pthread_mutex_unlock(&m->mu);
            *used = n;
            return 0;
        }
        if (room(m) > 0)
            break;
        if (cancelled(&docs[0])) {
            pthread_mutex_unlock(&m->mu);
            return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while waiting for the GPU");
        }
        wait_a_bit(m);
    }
    int k = n < cap ? n : cap;
    if (room(m) < k)
        k = room(m); /* what fits now: no waiting for a fuller window */
    /* the reservation bounds prepared pages by the queue, like queued ones;
     * the user reference keeps the vlm open while they are prepared
     * (lost() waits for it) */
    m->reserved += k;
    m->users++;
    uint64_t gen = m->gen;
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < k; i++) {
        prepare_page(v, names, nl, &docs[i], &outs[i], &it[i]);
        it[i].gen = gen;
    }
    pthread_mutex_lock(&m->mu);
    m->reserved -= k;
    if (--m->users == 0)
        pthread_cond_broadcast(&m->done_cv);
    int rc = 0;
    if (cancelled(&docs[0]))
        rc = folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while waiting for the GPU");
    else
        rc = submit_window(m, it, k, &docs[0], err);
    pthread_mutex_unlock(&m->mu);
    int orc = 0;
    for (int i = 0; i < k; i++) {
        int r = page_outcome(m, names, nl, &it[i], &outs[i], rc == 0, err);
        orc = orc ? orc : r;
    }
    *used = k;
    return rc ? rc : orc;
}

int engine_models_vision(struct engine_models *m, const char *const *names, int nl,
                         const struct engine_doc *docs, int n, struct engine_result *outs, int *failed,
                         struct folio_err *err)
{
    uint32_t b = atomic_load(&m->batch);
    int cap = b < 1 ? 1 : (int)b;
    cap = cap < n ? cap : n;
    struct gpu_item *it = calloc((size_t)(cap > 0 ? cap : 1), sizeof *it);
    if (!it) {
        for (int p = 0; p < n; p++)
            add_reason(&outs[p], "vision failed: out of host memory");
        return 0;
    }
    int rc = 0;
    for (int p = 0; p < n && rc == 0;) {
        int used = 0;
        rc = vision_window(m, names, nl, docs + p, outs + p, n - p, it, cap, &used, err);
        if (rc && failed)
            *failed = p;
        p += used;
    }
    free(it);
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
        add_reason(out, "ocr+lm failed: out of host memory");
        return 0;
    }
    double t0 = folio_mono_ms();
    pthread_mutex_lock(&m->mu);
    int rc = 0;
    if (!m->vlm || m->closing) {
        add_reason(out, m->reason);
        pthread_mutex_unlock(&m->mu);
        free(prob);
        free(lp);
        return 0;
    }
    it.gen = m->gen;
    rc = submit_wait(m, &it, doc, err);
    pthread_mutex_unlock(&m->mu);
    if (rc == 0 && it.rc == 0) {
        answer(out, names, nl, prob, lp, it.tr.best, it.tr.confidence, "ocr+lm");
        out->lm_ms = folio_mono_ms() - t0;
        if (it.tr.truncated)
            add_reason(out, "ocr+lm: OCR text cut to the prompt budget");
        *done = 1;
        return 0;
    }
    free(prob);
    free(lp);
    if (rc)
        return rc;
    char b[320];
    snprintf(b, sizeof b, "ocr+lm failed: %s", it.msg);
    add_reason(out, b);
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
        try_open(m);
    int level = !m->vlm ? 0 : vlm_vision_enabled(m->vlm) ? 2 : 1;
    for (int p = 0; p < n && level < 2; p++)
        add_reason(&outs[p], m->reason);
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
    static const char *const names[] = {"auto", "f16", "native"};
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}
