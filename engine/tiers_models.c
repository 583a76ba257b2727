/*
 * The vlm's life for the model tiers (tiers.c has the design): open and
 * re-open with a recorded reason, the loss of a device, which tiers run
 * now, and the helpers that fill a page's result. Calls no other tiers
 * file.
 */
#include "engine/tiers_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tiers_set_paths(struct engine_models *m)
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

void tiers_refresh_after_seal(struct engine_models *m)
{
    atomic_store(&m->after_seal, atomic_load(&m->after_seal_closed) + after_seal_now(m));
}

/* Opens the vlm (mu held); on failure records why and whether retrying
 * can help. */
void tiers_try_open(struct engine_models *m)
{
    TIERS_MU_HELD(m);
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
        tiers_refresh_after_seal(m);
        tiers_set_paths(m);
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
    tiers_set_paths(m);
    char q[400];
    folio_log(FOLIO_LOG_WARN, "engine_models_off", "reason=%s retry=%d",
              folio_lq(q, sizeof q, m->reason), !m->gave_up);
}

/* The vlm died under us (GPU thread, mu held): every later page falls
 * back until the re-open. Waits for job threads still preparing on it. */
void tiers_lost(struct engine_models *m, const char *why)
{
    TIERS_MU_HELD(m);
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
    tiers_set_paths(m);
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

void tiers_add_reason(struct engine_result *out, const char *s)
{
    size_t k = strlen(out->fallback_reason);
    snprintf(out->fallback_reason + k, sizeof out->fallback_reason - k, "%s%s", k ? "; " : "", s);
}

void tiers_set_item_err(struct gpu_item *it, int rc, const char *msg, int lost_dev)
{
    it->rc = rc;
    it->lost = lost_dev;
    snprintf(it->msg, sizeof it->msg, "%s", msg);
}

/* A model tier answered: out takes the distribution (prob, lp: malloc'd). */
void tiers_answer(struct engine_result *out, const char *const *names, int nl, double *prob, double *lp,
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
