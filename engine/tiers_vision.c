/*
 * Tier 1 (vision) over the pages of one document, a window at a time
 * (tiers.c, "Pages of one document"): reserve queue room, decode and
 * prepare the window's pages on this thread, queue them together, prepare
 * and queue the next window while this one is on the GPU, then wait and
 * record each page's outcome.
 */
#include "engine/tiers_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tier 1 over the pages of one document, a window at a time (see
 * "Pages of one document" at the top). The items of the two windows in
 * flight live in one array of 2 x cap (struct window below); each page's
 * outcome lands in its own out: answered (engine_path "vision") or the
 * reason it was not. */

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
        tiers_add_reason(out, "vision: no page image for this document");
        return;
    }
    if (doc->page(doc->page_ctx, &pg, &pe) != 0) {
        snprintf(b, sizeof b, "vision: page not decoded: %s", pe.msg);
        tiers_add_reason(out, b);
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
        tiers_add_reason(out, "vision failed: out of host memory");
        return;
    }
    struct vlm_page vp = {pg.pixels, (uint32_t)pg.width, (uint32_t)pg.height, pg.stride, pg.channels};
    int prc = vlm_prepare(v, &vp, names, (uint32_t)nl, &it->prep, &pe);
    free(pg.pixels);
    if (prc) {
        vlm_prepared_free(it->prep);
        it->prep = NULL;
        tiers_set_item_err(it, prc, pe.msg, 0);
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
        tiers_answer(out, names, nl, r->prob, r->logprob, r->best, r->confidence, "vision");
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
        tiers_add_reason(out, b);
        if (it->lost && m->cfg.release_on_device_loss)
            rc = folio_err_set(err, FOLIO_EDEVICELOST, "GPU lost during the vision pass: %s", it->msg);
    }
    free(it->vr.prob);
    free(it->vr.logprob);
    it->vr.prob = it->vr.logprob = NULL;
    vlm_result_free(&it->vr);
    return rc;
}

/* A window of a document's pages: the first page's index in the
 * document, its k items (it[]), queued or not. */
struct window {
    int p, k, queued;
    struct gpu_item *it;
};

/* Reserves queue room for up to cap of the n pages left (waiting for at
 * least one slot) and prepares them on this thread (no lock held on entry
 * or exit). *used: the pages the window covers (all n when vision is off:
 * their reasons are recorded and w->k is 0). FOLIO_ETIMEOUT when the job
 * was cancelled: while waiting for room (nothing prepared), or while its
 * pages were prepared (w->k pages held, none queued: window_finish frees
 * them). Otherwise the window is queued. */
static int window_prepare(struct engine_models *m, const char *const *names, int nl,
                          const struct engine_doc *docs, struct engine_result *outs, int n, int cap,
                          struct window *w, int *used, struct folio_err *err)
{
    w->k = w->queued = 0;
    pthread_mutex_lock(&m->mu);
    struct vlm *v;
    for (;;) {
        v = m->vlm;
        if (m->quit || !v || m->closing || !vlm_vision_enabled(v)) {
            for (int p = 0; p < n; p++)
                tiers_add_reason(&outs[p], m->quit ? "vision failed: engine closing" : m->reason);
            pthread_mutex_unlock(&m->mu);
            *used = n;
            return 0;
        }
        if (tiers_room(m) > 0)
            break;
        if (tiers_cancelled(&docs[0])) {
            pthread_mutex_unlock(&m->mu);
            return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while waiting for the GPU");
        }
        tiers_wait_a_bit(m);
    }
    int k = n < cap ? n : cap;
    if (tiers_room(m) < k)
        k = tiers_room(m); /* what fits now: no waiting for a fuller window */
    /* the reservation bounds prepared pages by the queue, like queued ones;
     * the user reference keeps the vlm open while they are prepared
     * (tiers_lost() waits for it) */
    m->reserved += k;
    m->users++;
    uint64_t gen = m->gen;
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < k; i++) {
        prepare_page(v, names, nl, &docs[i], &outs[i], &w->it[i]);
        w->it[i].gen = gen;
    }
    pthread_mutex_lock(&m->mu);
    m->reserved -= k;
    if (--m->users == 0)
        pthread_cond_broadcast(&m->done_cv);
    int rc = 0;
    if (tiers_cancelled(&docs[0]))
        rc = folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while waiting for the GPU");
    else
        tiers_queue_window(m, w->it, k);
    pthread_mutex_unlock(&m->mu);
    w->k = k;
    w->queued = rc == 0;
    *used = k;
    return rc;
}

/* Waits for a window's queued pages (cancel takes them back out) and
 * records each page's outcome; frees what its items hold. */
static int window_finish(struct engine_models *m, const char *const *names, int nl,
                         const struct engine_doc *docs, struct engine_result *outs, struct window *w,
                         struct folio_err *err)
{
    int rc = 0;
    if (w->queued) {
        pthread_mutex_lock(&m->mu);
        rc = tiers_wait_window(m, w->it, w->k, &docs[0], err);
        pthread_mutex_unlock(&m->mu);
    } else if (w->k) {
        /* prepared, then cancelled before it was queued: window_prepare
         * set the error; the pages' outcomes are not recorded */
        rc = FOLIO_ETIMEOUT;
    }
    int orc = 0;
    for (int i = 0; i < w->k; i++) {
        int r = page_outcome(m, names, nl, &w->it[i], &outs[i], rc == 0, err);
        orc = orc ? orc : r;
    }
    w->k = w->queued = 0;
    return rc ? rc : orc;
}

/* Windows overlap: window w+1 is decoded, prepared and queued while
 * window w is on the GPU, and only then does this thread wait for w. A
 * document's CPU work (decode, resize, patches: ~25 ms a 1024² page) no
 * longer sets its pace when it is the only one (a large PDF at
 * --gpu-batch 1: before, every page's preparation left the GPU idle).
 * Two windows are at most 2 x batch pages, the queue's bound, which the
 * reservations keep as before. The first error wins; its window's first
 * page is *failed. */
int engine_models_vision(struct engine_models *m, const char *const *names, int nl,
                         const struct engine_doc *docs, int n, struct engine_result *outs, int *failed,
                         struct folio_err *err)
{
    uint32_t b = atomic_load(&m->batch);
    int cap = b < 1 ? 1 : (int)b;
    cap = cap < n ? cap : n;
    struct gpu_item *it = calloc((size_t)(cap > 0 ? 2 * cap : 1), sizeof *it);
    if (!it) {
        for (int p = 0; p < n; p++)
            tiers_add_reason(&outs[p], "vision failed: out of host memory");
        return 0;
    }
    struct window win[2] = {{.it = it}, {.it = it + cap}};
    struct folio_err later = {0}; /* errors after the first */
    int rc = 0, fail_at = -1, cur = 0, have_prev = 0;
    for (int p = 0; p < n && rc == 0;) {
        struct window *w = &win[cur], *prev = &win[cur ^ 1];
        int used = 0;
        w->p = p;
        int r = window_prepare(m, names, nl, docs + p, outs + p, n - p, cap, w, &used, err);
        if (r) {
            rc = r;
            fail_at = p;
        }
        if (have_prev) {
            struct folio_err *e = rc ? &later : err;
            int r2 = window_finish(m, names, nl, docs + prev->p, outs + prev->p, prev, e);
            have_prev = 0;
            if (r2 && (!rc || prev->p < fail_at)) {
                if (rc) /* the earlier window's error is the one to report */
                    *err = later;
                rc = r2;
                fail_at = prev->p;
            }
        }
        if (rc) {
            if (w->k) /* queued or prepared: out of the queue before it goes */
                (void)window_finish(m, names, nl, docs + p, outs + p, w, &later);
            break;
        }
        if (w->k) {
            have_prev = 1;
            cur ^= 1;
        }
        p += used;
    }
    if (have_prev) {
        struct window *prev = &win[cur ^ 1];
        int r2 = window_finish(m, names, nl, docs + prev->p, outs + prev->p, prev, err);
        if (r2) {
            rc = r2;
            fail_at = prev->p;
        }
    }
    if (rc && failed)
        *failed = fail_at;
    free(it);
    return rc;
}
