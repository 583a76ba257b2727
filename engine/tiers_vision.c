/*
 * Tier 1 (vision) over the pages of one document, a window at a time
 * (tiers.c, "Pages of one document"): reserve queue room, decode and
 * prepare the window's pages on this thread, queue them together, and
 * record each page's outcome.
 */
#include "engine/tiers_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tier 1 over the pages of one document, a window at a time (see
 * "Pages of one document" at the top). The items of a window live in it[]
 * (room for cap); each page's outcome lands in its own out: answered
 * (engine_path "vision") or the reason it was not. */

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
        prepare_page(v, names, nl, &docs[i], &outs[i], &it[i]);
        it[i].gen = gen;
    }
    pthread_mutex_lock(&m->mu);
    m->reserved -= k;
    if (--m->users == 0)
        pthread_cond_broadcast(&m->done_cv);
    int rc = 0;
    if (tiers_cancelled(&docs[0]))
        rc = folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while waiting for the GPU");
    else
        rc = tiers_submit_window(m, it, k, &docs[0], err);
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
            tiers_add_reason(&outs[p], "vision failed: out of host memory");
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
