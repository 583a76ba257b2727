/*
 * The worker's maintenance: the heartbeat thread, the workers row's
 * paths and counters, and the label set / learned model each OCR thread
 * refreshes between jobs.
 *
 * The heartbeat has its own PGconn, so a slow claim or a long completion
 * can never starve the lease renewals. Every lease/3 it renews all
 * in-flight jobs in one statement and refreshes the workers row; then it
 * fences: a job the database says is lost, one with no renewal for a
 * whole lease, or one past its time budget gets its cancel flag.
 */
#include "common/json.h"
#include "engine/engine.h"
#include "pipeline/db/learn_db.h"
#include "pipeline/worker/worker_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LABELS_REFRESH_MS WORKER_LABELS_REFRESH_MS /* learn_db.h */

/* ------------------------------------------------------------ labels */

/* The active ocr+learned model of the worker's model key (learn_db.c),
 * after retraining it when enough corrections arrived (first thread
 * only: one retrain per worker, and an advisory lock makes it one per
 * fleet). The engine that borrows the old model is closed by the caller
 * before the model is freed here on the next refresh. */
static int refresh_learned(struct ocr_thread *t, struct folio_err *err)
{
    const struct worker_opts *o = t->w->o;
    struct learn_train_opts lo = {.model_key = o->queue.model_key, .min_per_label = 5};
    int trained = 0;
    if (t->idx == 0 && o->retrain_after > 0 && !t->retrain_refused) {
        int rc = learn_db_maybe_retrain(t->conn, &lo, o->retrain_after, &trained, err);
        if (rc && strstr(err->msg, "(SQLSTATE 42501)")) {
            /* schema 012: only folio_trainer stores models, and a worker
             * login has it only when the admin opted in (folio-setup-db
             * --worker-retrain). Without it the worker keeps classifying
             * with the model it has and stops retraining: once refused, a
             * retrain would train for nothing at every label refresh. */
            char q[600];
            folio_log(FOLIO_LOG_WARN, "learned_retrain_refused", "msg=%s hint=%s", folio_lq(q, sizeof q, err->msg),
                      "\"this login may not store models: retrain is off in this worker until it restarts; retrain "
                      "with folio learn train, or let worker logins do it: folio-setup-db --worker-login NAME "
                      "--worker-retrain\"");
            t->retrain_refused = 1;
            folio_err_clear(err);
            rc = 0;
        }
        if (rc)
            return rc;
    }
    long long id = 0;
    struct engine_learned *m = NULL;
    int rc = learn_db_latest(t->conn, o->queue.model_key, t->learned_id, &id, &m, err);
    if (rc == FOLIO_EFORMAT) {
        /* a bad blob must not stop the worker: the rules tier still runs */
        char q[400];
        folio_log(FOLIO_LOG_WARN, "learned_model_unusable", "msg=%s", folio_lq(q, sizeof q, err->msg));
        folio_err_clear(err);
        return 0;
    }
    if (rc)
        return rc;
    if (!m && (id != 0 || t->learned_id == 0))
        return 0; /* the one held is still the active one, or none was and is */
    engine_close(t->engine); /* it borrows the old model (or, none active now, the dropped one) */
    t->engine = NULL;
    engine_learned_free(t->learned);
    t->learned = m;
    t->learned_id = id;
    if (m)
        folio_log(FOLIO_LOG_INFO, "learned_model_loaded", "thread=%d model_id=%lld labels=%d", t->idx, id,
                  engine_learned_count(m));
    else
        folio_log(FOLIO_LOG_INFO, "learned_model_unloaded", "thread=%d msg=\"no model is active: rules tier\"",
                  t->idx);
    return 0;
}

/* An engine for the new label set, with the review policy of the model
 * key (--review-below overrides it). */
static int open_engine(struct ocr_thread *t, const struct engine_labels *nl, struct engine **ne,
                       struct folio_err *err)
{
    const struct worker_opts *o = t->w->o;
    struct engine_config cfg = {.model_path = o->model_path, .mmproj_path = o->mmproj_path,
                                .models = t->w->models, .learned = t->learned,
                                .review_below = ENGINE_REVIEW_BELOW_DEFAULT,
                                .review_margin = ENGINE_REVIEW_MARGIN_DEFAULT};
    int rc = learn_db_policy(t->conn, o->queue.model_key, &cfg.review_below, &cfg.review_margin, err);
    if (o->review_below >= 0)
        cfg.review_below = o->review_below;
    if (!rc)
        rc = engine_open(&cfg, nl, ne, err);
    return rc;
}

/* (Re)loads the active labels at most every LABELS_REFRESH_MS, so edits to
 * folio.labels reach running workers without a restart. */
int worker_refresh_labels(struct ocr_thread *t, struct folio_err *err)
{
    if (t->engine && folio_mono_ms() - t->labels_at_ms < LABELS_REFRESH_MS)
        return 0;
    struct engine_labels *nl = NULL;
    int rc = learn_db_labels(t->conn, &nl, err);
    struct engine *ne = NULL;
    if (!rc)
        rc = refresh_learned(t, err);
    if (!rc)
        rc = open_engine(t, nl, &ne, err);
    if (rc == FOLIO_ELIMIT && t->engine) {
        /* the model tiers refuse the new set (a label too long to score):
         * say so once per refresh and keep classifying with the old one */
        char q[600], qh[400];
        folio_log(FOLIO_LOG_ERROR, "labels_refused", "reason=%s hint=%s kept=previous",
                  folio_lq(q, sizeof q, err->msg), folio_lq(qh, sizeof qh, err->hint));
        engine_labels_free(nl);
        t->labels_at_ms = folio_mono_ms();
        folio_err_clear(err);
        return 0;
    }
    if (rc) {
        engine_labels_free(nl);
        return rc;
    }
    engine_close(t->engine);
    engine_labels_free(t->labels);
    t->engine = ne;
    t->labels = nl;
    t->labels_at_ms = folio_mono_ms();
    return 0;
}

/* A label set the model tiers cannot score stops the worker at start, once,
 * with the label and its token count, instead of failing those tiers on
 * every document. Only that refusal: a database that is not reachable yet
 * is the OCR threads' business (they retry). */
int worker_check_start_labels(struct worker *w, struct folio_err *err)
{
    PGconn *c = NULL;
    struct engine_labels *ls = NULL;
    struct engine *e = NULL;
    struct folio_err le = {0};
    int rc = db_connect(w->o->conninfo, "folio-worker-labels", &c, &le);
    if (!rc)
        rc = learn_db_labels(c, &ls, &le);
    if (!rc) {
        struct engine_config cfg = {.model_path = w->o->model_path, .mmproj_path = w->o->mmproj_path,
                                    .models = w->models};
        rc = engine_open(&cfg, ls, &e, &le);
    }
    engine_close(e);
    engine_labels_free(ls);
    if (c)
        PQfinish(c);
    if (rc == FOLIO_ELIMIT) {
        *err = le;
        return rc;
    }
    return 0;
}

/* ------------------------------------------------------------ workers row */

void worker_paths_now(struct worker *w, struct worker_paths *wp)
{
    const char *paths = w->models ? engine_models_paths(w->models) : "ocr+rules";
    char reason[320] = "no model configured";
    if (w->models)
        engine_models_reason(w->models, reason, sizeof reason);
    char esc[400];
    json_escape(esc, sizeof esc, reason);
    int has_vision = strstr(paths, "vision") != NULL, has_lm = strstr(paths, "ocr+lm") != NULL;
    snprintf(wp->disabled, sizeof wp->disabled, "{%s%s%s%s%s%s%s}", has_vision ? "" : "\"vision\":\"",
             has_vision ? "" : esc, has_vision ? "" : "\"", !has_vision && !has_lm ? "," : "",
             has_lm ? "" : "\"ocr+lm\":\"", has_lm ? "" : esc, has_lm ? "" : "\"");
    snprintf(wp->array, sizeof wp->array, "{%s}", paths);
    /* A short re-open backoff after one loss is not OCR-only: the worker
     * is still a GPU worker, paths_disabled says what is off and why. */
    int gpu_worker = w->models && w->o->model_path && !engine_models_gave_up(w->models);
    wp->state = has_vision || has_lm || gpu_worker ? "ready" : "ocr-only";
}

void worker_stats_now(struct worker *w, struct queue_worker_stats *st, const char *state)
{
    st->done = atomic_load(&w->done);
    st->failed = atomic_load(&w->failed);
    st->lost = atomic_load(&w->lost);
    st->state = state;
    st->paths_array = st->paths_disabled_json = NULL;
}

/* ------------------------------------------------------------ heartbeat */

/* The heartbeat thread's own state: its connection and the jobs of one
 * renewal (copied from the slots under mu, sent without it). */
struct heartbeat {
    struct worker *w;
    PGconn *c;
    int64_t *ids;
    char (*toks)[37];
    int *slot_of;        /* ids[k] is the job of slots[slot_of[k]] */
    unsigned char *alive; /* queue_heartbeat's answer per job */
    int n;
};

/* Under mu: the in-flight jobs to renew (not those past their budget). */
static void hb_collect(struct heartbeat *h)
{
    struct worker *w = h->w;
    FOLIO_MU_HELD(&w->mu);
    h->n = 0;
    for (int i = 0; h->ids && h->toks && h->slot_of && h->alive && i < w->nslots; i++)
        if (w->slots[i].state != SLOT_FREE && atomic_load(&w->slots[i].cancel) != CANCEL_BUDGET) {
            h->ids[h->n] = w->slots[i].job.id;
            memcpy(h->toks[h->n], w->slots[i].job.token, 37);
            h->slot_of[h->n++] = i;
        }
}

/* Without mu: renews the collected leases and refreshes the workers row
 * in one statement, (re)connecting first when needed. */
static int hb_send(struct heartbeat *h, int64_t worker_id)
{
    struct worker *w = h->w;
    const struct worker_opts *o = w->o;
    struct folio_err err = {0};
    int rc = FOLIO_EDB;
    if (!h->c || PQstatus(h->c) != CONNECTION_OK) {
        if (h->c)
            PQfinish(h->c);
        h->c = NULL;
        db_open(o->conninfo, o->pooler, "folio-worker-heartbeat", &h->c, &err);
    }
    struct queue_worker_stats st;
    struct worker_paths wp;
    worker_paths_now(w, &wp);
    worker_stats_now(w, &st, atomic_load(&w->draining) ? NULL : wp.state); /* keep 'draining' */
    st.paths_array = wp.array;
    st.paths_disabled_json = wp.disabled;
    if (h->c && h->ids)
        rc = queue_heartbeat(h->c, &o->queue, worker_id, &st, h->ids, (const char(*)[37])h->toks, h->n, h->alive,
                             &err);
    if (rc) {
        char q[600];
        folio_log(FOLIO_LOG_WARN, "heartbeat_failed", "jobs=%d error=%s", h->n, folio_lq(q, sizeof q, err.msg));
        if (h->c && queue_err_transient(h->c, &err)) {
            PQfinish(h->c);
            h->c = NULL;
        }
    }
    return rc;
}

/* Under mu: a renewed job's lease now holds until start + lease; one the
 * database no longer gives us is cancelled as lost. */
static void hb_apply(struct heartbeat *h, double start)
{
    struct worker *w = h->w;
    FOLIO_MU_HELD(&w->mu);
    for (int k = 0; k < h->n; k++) {
        struct slot *s = &w->slots[h->slot_of[k]];
        if (s->state == SLOT_FREE || s->job.id != h->ids[k])
            continue; /* finished meanwhile */
        if (h->alive[k]) {
            s->lease_until_ms = start + w->o->queue.lease_s * 1000.0;
        } else if (atomic_load(&s->cancel) != CANCEL_LOST) {
            atomic_store(&s->cancel, CANCEL_LOST);
            folio_log(FOLIO_LOG_WARN, "lease_lost", "job=%lld attempt=%d", (long long)s->job.id, s->job.attempt);
        }
    }
}

/* Under mu, self-fencing: a job whose lease may have lapsed (no renewal
 * for a whole lease) is stopped even if the database never said so. A
 * job past its time budget is stopped and no longer renewed: a stuck job
 * cannot keep its lease alive forever. */
static void hb_fence(struct worker *w, double now)
{
    FOLIO_MU_HELD(&w->mu);
    double budget = worker_job_budget_ms(w->o);
    for (int i = 0; i < w->nslots; i++) {
        struct slot *s = &w->slots[i];
        if (s->state != SLOT_FREE && budget > 0 && now - s->started_ms > budget &&
            atomic_load(&s->cancel) == CANCEL_NONE) {
            atomic_store(&s->cancel, CANCEL_BUDGET);
            folio_log(FOLIO_LOG_WARN, "job_over_budget", "job=%lld attempt=%d budget_ms=%.0f", (long long)s->job.id,
                      s->job.attempt, budget);
        }
        if (s->state != SLOT_FREE && now > s->lease_until_ms && atomic_load(&s->cancel) == CANCEL_NONE) {
            atomic_store(&s->cancel, CANCEL_LOST);
            folio_log(FOLIO_LOG_WARN, "lease_lapsed", "job=%lld attempt=%d msg=\"no renewal for a whole lease\"",
                      (long long)s->job.id, s->job.attempt);
        }
    }
}

/* Under mu: sleeps one period or until quit; nonzero on quit. */
static int hb_wait(struct worker *w, double period_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = ts.tv_nsec + (long long)(period_ms * 1e6);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(&w->hb_cv, &w->mu, &ts);
    return w->quit;
}

void *worker_heartbeat_main(void *arg)
{
    struct worker *w = arg;
    struct heartbeat h = {.w = w};
    double period_ms = w->o->queue.lease_s * 1000.0 / 3.0;
    h.ids = calloc((size_t)w->nslots, sizeof *h.ids);
    h.toks = calloc((size_t)w->nslots, sizeof *h.toks);
    h.slot_of = calloc((size_t)w->nslots, sizeof *h.slot_of);
    h.alive = calloc((size_t)w->nslots, 1);
    if (!h.ids || !h.toks || !h.slot_of || !h.alive) {
        folio_log(FOLIO_LOG_ERROR, "heartbeat_oom", "slots=%d", w->nslots);
        /* Without renewals every lease lapses: fence all jobs. */
    }
    pthread_mutex_lock(&w->mu);
    while (!w->quit) {
        if (hb_wait(w, period_ms))
            break;
        int64_t worker_id = w->worker_id;
        hb_collect(&h);
        pthread_mutex_unlock(&w->mu);

        double start = folio_mono_ms();
        int rc = hb_send(&h, worker_id);

        pthread_mutex_lock(&w->mu);
        double now = folio_mono_ms();
        if (rc == 0)
            hb_apply(&h, start);
        hb_fence(w, now);
    }
    pthread_mutex_unlock(&w->mu);
    if (h.c)
        PQfinish(h.c);
    free(h.ids);
    free(h.toks);
    free(h.slot_of);
    free(h.alive);
    return NULL;
}
