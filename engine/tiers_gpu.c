/*
 * The GPU thread of the model tiers and its bounded queue (tiers.c has
 * the design, "Stages"): job threads queue prepared pages and OCR texts
 * and sleep; this thread runs what is ready as one pass and wakes them.
 */
#include "common/fault.h"
#include "engine/tiers_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    tiers_set_item_err(it, FOLIO_EFORMAT, msg, 0);
}

/* Runs the taken items on v; returns 1 when the device was lost (msg says
 * why). No lock held: only this thread touches the device. */
static int run_pass(struct engine_models *m, struct vlm *v, struct gpu_item **it, uint32_t n, char *why,
                    size_t whyn)
{
    struct folio_err e = {0};
    if (it[0]->kind == GPU_TEXT) {
        const char *txt = it[0]->text ? it[0]->text : "";
        int rc = vlm_classify_text(v, txt, it[0]->names, it[0]->nl, 0, &it[0]->tr, &e);
        int l = rc && dev_lost(v, rc);
        if (rc)
            tiers_set_item_err(it[0], rc, e.msg, l);
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
            tiers_set_item_err(it[i], rc, e.msg, 1);
        snprintf(why, whyn, "%s", e.msg);
        return 1;
    }
    if (n == 1) {
        tiers_set_item_err(it[0], rc, e.msg, 0);
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
                tiers_set_item_err(it[k], r, ei.msg, 1);
            snprintf(why, whyn, "%s", ei.msg);
            return 1;
        }
        tiers_set_item_err(it[i], r, ei.msg, 0);
    }
    return 0;
}

static void unlink_item(struct engine_models *m, struct gpu_item *it)
{
    TIERS_MU_HELD(m);
    struct gpu_item **pp = &m->head, *prev = NULL;
    while (*pp && *pp != it) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    assert(it->state == GPU_QUEUED && m->queued > 0); /* only queued items are in the list */
    *pp = it->next;
    if (m->tail == it)
        m->tail = prev;
    it->next = NULL;
    m->queued--;
}

void *tiers_gpu_main(void *arg)
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
                tiers_set_item_err(it, FOLIO_ESTATE, m->quit ? "engine closing" : m->reason, 0);
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
            tiers_lost(m, why);
        else
            tiers_refresh_after_seal(m);
        if (!was_lost && n && take[0]->rc == 0)
            m->losses = 0;
        for (uint32_t i = 0; i < n; i++) {
            assert(take[i]->state == GPU_TAKEN);
            take[i]->state = GPU_DONE;
        }
        pthread_cond_broadcast(&m->done_cv);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int tiers_cancelled(const struct engine_doc *doc)
{
    return doc->cancel && atomic_load(doc->cancel) != 0;
}

void tiers_wait_a_bit(struct engine_models *m)
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
int tiers_room(const struct engine_models *m)
{
    return m->queue_cap - m->queued - m->reserved;
}

/* Queues it and sleeps until the GPU thread answered it (mu held on entry
 * and exit). FOLIO_ETIMEOUT when the job was cancelled before its pass. */
int tiers_submit_wait(struct engine_models *m, struct gpu_item *it, const struct engine_doc *doc,
                       struct folio_err *err)
{
    TIERS_MU_HELD(m);
    while (!m->quit && tiers_room(m) < 1 && !tiers_cancelled(doc))
        tiers_wait_a_bit(m);
    if (tiers_cancelled(doc))
        return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while waiting for the GPU");
    if (m->quit || !m->has_thread) {
        tiers_set_item_err(it, FOLIO_ESTATE, "engine closing", 0);
        return 0;
    }
    assert(it->state == GPU_IDLE); /* an item is queued once */
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
        if (it->state == GPU_QUEUED && tiers_cancelled(doc)) {
            unlink_item(m, it);
            pthread_cond_broadcast(&m->done_cv);
            return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while queued for the GPU");
        }
        tiers_wait_a_bit(m);
    }
    return 0;
}

/* Queues the window's prepared pages together (mu held), contiguous, so
 * the GPU thread finds them in one pass. Items with no prepared page (not
 * decoded, refused) are skipped: their reason is already set. */
void tiers_queue_window(struct engine_models *m, struct gpu_item *it, int k)
{
    TIERS_MU_HELD(m);
    int queued = 0;
    for (int i = 0; i < k; i++) {
        if (!it[i].prep)
            continue; /* not decoded or not prepared: its reason is set */
        if (m->quit) {
            tiers_set_item_err(&it[i], FOLIO_ESTATE, "engine closing", 0);
            continue;
        }
        assert(it[i].state == GPU_IDLE);
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
}

/* Sleeps until the GPU thread answered every queued page of the window
 * (mu held on entry and exit). On cancel the pages still queued are taken
 * back out, the ones in a pass are waited for (the GPU thread writes into
 * them), and FOLIO_ETIMEOUT is returned: afterwards no item of the window
 * is referenced by the queue, so its memory may go. */
int tiers_wait_window(struct engine_models *m, struct gpu_item *it, int k, const struct engine_doc *doc,
                      struct folio_err *err)
{
    TIERS_MU_HELD(m);
    int cancel = 0;
    for (;;) {
        int waiting = 0;
        for (int i = 0; i < k; i++) {
            if (it[i].state == GPU_QUEUED && tiers_cancelled(doc)) {
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
        tiers_wait_a_bit(m);
    }
    return cancel ? folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while queued for the GPU") : 0;
}
