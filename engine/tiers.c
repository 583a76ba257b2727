/*
 * The model tiers of the fallback chain (DESIGN.md §6.4): vision, then
 * OCR text + LM, each skipped with a recorded reason; the rules tier in
 * classify.c is the floor under them.
 *
 * One struct engine_models per process holds the GPU engine (vlm: text
 * model, vision tower, gate, self-test) and is shared by the engines of
 * every worker thread; the engines are cheap (labels, rules) and are
 * re-made when labels change, the models are not. A mutex makes the GPU
 * one-pass-at-a-time: OCR runs in parallel on the threads, the passes
 * queue here.
 *
 * Recovery: a lost device (or any fatal Vulkan error) marks the vlm dead;
 * the document at hand falls back to the OCR tiers with the reason, the
 * vlm is closed, and the next document after vlm_backoff_ms() re-opens
 * it. After ENGINE_MAX_REOPEN failed re-opens or losses in a row the
 * models stay off until restart: the worker keeps running on OCR + rules
 * and engine_models_paths() says so (the workers row shows it).
 */
#include "common/json.h"
#include "engine/engine.h"
#include "engine/model/lm.h"
#include "engine/tiers.h"
#include "engine/vlm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENGINE_MAX_REOPEN 3

struct engine_models {
    struct engine_models_config cfg;
    pthread_mutex_t mu;
    struct vlm *vlm;
    int losses;            /* consecutive losses / failed re-opens */
    int gave_up;
    double retry_at_ms;
    char reason[320];      /* why a tier is off now ("" when all run) */
    _Atomic int level;     /* 2 vision+lm, 1 lm, 0 rules only: read without the lock */
};

static const char *const PATHS[3] = {"ocr+rules", "ocr+lm,ocr+rules", "vision,ocr+lm,ocr+rules"};

static void set_paths(struct engine_models *m)
{
    atomic_store(&m->level, m->vlm && vlm_vision_enabled(m->vlm) ? 2 : m->vlm ? 1 : 0);
}

/* Opens the vlm; on failure records why and whether retrying can help. */
static void try_open(struct engine_models *m)
{
    struct vlm_config vc = {.model_path = m->cfg.model_path, .mmproj_path = m->cfg.mmproj_path,
                            .device = m->cfg.device, .allow_cpu = m->cfg.allow_cpu,
                            .validate = -1, .cache_dir = m->cfg.cache_dir,
                            .max_image_tokens = m->cfg.max_image_tokens,
                            .gate_file = m->cfg.gate_file, .gpu_weights = m->cfg.gpu_weights};
    struct folio_err e = {0};
    int rc = vlm_open(&vc, &m->vlm, &e);
    if (rc == 0) {
        m->reason[0] = 0;
        if (!vlm_vision_enabled(m->vlm))
            snprintf(m->reason, sizeof m->reason, "vision off: %s",
                     vlm_report(m->vlm)->vision_reason);
        set_paths(m);
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

int engine_models_open(const struct engine_models_config *cfg, struct engine_models **out,
                       struct folio_err *err)
{
    *out = NULL;
    struct engine_models *m = calloc(1, sizeof *m);
    if (!m)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    m->cfg = *cfg;
    pthread_mutex_init(&m->mu, NULL);
    if (!cfg->model_path) {
        m->gave_up = 1;
        snprintf(m->reason, sizeof m->reason, "no model configured (--model)");
        set_paths(m);
    } else {
        try_open(m);
    }
    *out = m;
    return 0;
}

void engine_models_close(struct engine_models *m)
{
    if (!m)
        return;
    vlm_close(m->vlm);
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

int engine_models_report_json(struct engine_models *m, char *buf, size_t n)
{
    pthread_mutex_lock(&m->mu);
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

/* The vlm died under us: fall back now, re-open later. */
static void lost(struct engine_models *m, const char *why)
{
    vlm_close(m->vlm);
    m->vlm = NULL;
    m->losses++;
    m->gave_up = m->losses >= ENGINE_MAX_REOPEN;
    m->retry_at_ms = folio_mono_ms() + vlm_backoff_ms(m->losses);
    snprintf(m->reason, sizeof m->reason, "GPU lost (%s)%s", why,
             m->gave_up ? "; OCR-only until restart after repeated failures"
                        : "; re-opening with backoff");
    set_paths(m);
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
    pthread_mutex_lock(&m->mu);
    int rc = m->vlm ? vlm_check_labels(m->vlm, names, (uint32_t)nl, err) : 0;
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int engine_models_classify(struct engine_models *m, const char *const *names, int nl,
                           const struct engine_doc *doc, struct engine_result *out, int *done,
                           struct folio_err *err)
{
    *done = 0;
    pthread_mutex_lock(&m->mu);
    if (!m->vlm && !m->gave_up && folio_mono_ms() >= m->retry_at_ms)
        try_open(m);
    if (!m->vlm) {
        add_reason(out, m->reason);
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    int rc = 0;
    /* tier 1: vision */
    if (!vlm_vision_enabled(m->vlm)) {
        add_reason(out, m->reason);
    } else if (!doc->page) {
        add_reason(out, "vision: no page image for this document");
    } else {
        struct engine_page pg;
        memset(&pg, 0, sizeof pg);
        struct folio_err pe = {0};
        double t0 = folio_mono_ms();
        if (doc->page(doc->page_ctx, &pg, &pe) != 0) {
            char b[200];
            snprintf(b, sizeof b, "vision: page not decoded: %s", pe.msg);
            add_reason(out, b);
        } else {
            double *prob = calloc((size_t)nl, sizeof *prob);
            double *lp = calloc((size_t)nl, sizeof *lp);
            struct vlm_result r;
            memset(&r, 0, sizeof r);
            r.prob = prob;
            r.logprob = lp;
            struct vlm_page vp = {pg.pixels, (uint32_t)pg.width, (uint32_t)pg.height, pg.stride,
                                  pg.channels};
            struct folio_err ve = {0};
            int vrc = prob && lp ? vlm_classify(m->vlm, &vp, names, (uint32_t)nl, &r, &ve)
                                 : folio_err_set(&ve, FOLIO_ENOMEM, "out of host memory");
            free(pg.pixels);
            if (vrc == 0) {
                free(out->scores);
                free(out->raw);
                out->scores = prob;
                out->raw = lp;
                out->n_labels = nl;
                out->names = names;
                snprintf(out->label, sizeof out->label, "%s", names[r.best]);
                out->confidence = r.confidence;
                snprintf(out->engine_path, sizeof out->engine_path, "vision");
                out->prompt_ids = r.prompt_ids;
                out->n_prompt_ids = r.n_prompt;
                r.prompt_ids = NULL;
                out->vision_ms = r.preprocess_ms + r.vision_ms + pg.ms;
                out->lm_ms = r.lm_ms;
                out->text.decode_ms += pg.ms;
                (void)t0;
                *done = 1;
                m->losses = 0;
                pthread_mutex_unlock(&m->mu);
                return 0;
            }
            free(prob);
            free(lp);
            vlm_result_free(&r);
            char b[300];
            snprintf(b, sizeof b, "vision failed: %s", ve.msg);
            add_reason(out, b);
            if (vrc == FOLIO_EDEVICELOST || vlm_dead(m->vlm)) {
                lost(m, ve.msg);
                pthread_mutex_unlock(&m->mu);
                if (m->cfg.release_on_device_loss)
                    return folio_err_set(err, FOLIO_EDEVICELOST,
                                         "GPU lost during the vision pass: %s", ve.msg);
                return 0; /* the OCR tiers answer for this document */
            }
        }
    }
    pthread_mutex_unlock(&m->mu);

    /* tier 2: OCR text + LM (text fetched outside the lock: OCR is slow) */
    if (!out->text.text) {
        rc = doc->text(doc->text_ctx, &out->text, err);
        if (rc)
            return rc;
    }
    pthread_mutex_lock(&m->mu);
    if (!m->vlm) {
        add_reason(out, m->reason);
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    double *prob = calloc((size_t)nl, sizeof *prob);
    double *lp = calloc((size_t)nl, sizeof *lp);
    struct lm_text_result tr;
    memset(&tr, 0, sizeof tr);
    tr.prob = prob;
    tr.logprob = lp;
    const char *txt = out->text.text ? out->text.text : "";
    struct folio_err le = {0};
    double t0 = folio_mono_ms();
    int lrc = prob && lp ? lm_text_classify(vlm_lm(m->vlm), vlm_tok(m->vlm), &txt, NULL, 1,
                                            names, (uint32_t)nl, 0, &tr, &le)
                         : folio_err_set(&le, FOLIO_ENOMEM, "out of host memory");
    if (lrc == 0) {
        free(out->scores);
        free(out->raw);
        out->scores = prob;
        out->raw = lp;
        out->n_labels = nl;
        out->names = names;
        snprintf(out->label, sizeof out->label, "%s", names[tr.best]);
        out->confidence = tr.confidence;
        snprintf(out->engine_path, sizeof out->engine_path, "ocr+lm");
        out->lm_ms = folio_mono_ms() - t0;
        if (tr.truncated)
            add_reason(out, "ocr+lm: OCR text cut to the prompt budget");
        *done = 1;
    } else {
        free(prob);
        free(lp);
        char b[300];
        snprintf(b, sizeof b, "ocr+lm failed: %s", le.msg);
        add_reason(out, b);
        if (lrc == FOLIO_EDEVICELOST || vlm_dead(m->vlm)) {
            lost(m, le.msg);
            if (m->cfg.release_on_device_loss) {
                pthread_mutex_unlock(&m->mu);
                return folio_err_set(err, FOLIO_EDEVICELOST, "GPU lost during the ocr+lm pass: %s",
                                     le.msg);
            }
        }
    }
    pthread_mutex_unlock(&m->mu);
    return 0;
}

int engine_gpu_weights_parse(const char *s)
{
    static const char *const names[] = {"auto", "f16", "native"};
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}
