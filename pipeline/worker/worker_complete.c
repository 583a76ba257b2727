/*
 * The worker's completer: how a job's outcome reaches the queue. A result
 * is written grouped with other threads' results when --claim-batch > 1
 * (group commit: whoever finds no write in flight writes everything
 * queued so far, in one round trip and one transaction), else, or when
 * the group write failed, alone with retries across reconnects. Failed
 * attempts, releases and dropped jobs are recorded here too, each with
 * its counter, metric and log line (worker_internal.h has the map).
 */
#include "common/json.h"
#include "pipeline/document/classify_doc.h"
#include "pipeline/document/doctext.h"
#include "pipeline/service/metrics.h"
#include "pipeline/worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

enum { DONE_WAITING, DONE_WRITTEN, DONE_ALONE };

/* A finished job's result waiting for a group write. Lives on the stack of
 * the OCR thread that produced it, which waits until state leaves
 * DONE_WAITING. */
struct done_entry {
    struct done_entry *next;
    const struct queue_job *job;
    const struct queue_result *res;
    int state;    /* DONE_*, guarded by worker.mu */
    int accepted; /* valid when DONE_WRITTEN */
};

/* Writes a group of results on this thread's connection in one round
 * trip. Entries whose write did not happen are marked DONE_ALONE: their
 * threads complete them one by one with the usual retries. */
static void write_group(struct ocr_thread *t, struct slot *s, struct done_entry *group)
{
    struct worker *w = t->w;
    enum { MAX_GROUP = 256 }; /* = the most OCR threads (worker_run checks), so a group always fits */
    const struct queue_job *jobs[MAX_GROUP];
    const struct queue_result *res[MAX_GROUP];
    int accepted[MAX_GROUP];
    struct done_entry *ent[MAX_GROUP];
    int n = 0;
    for (struct done_entry *e = group; e && n < MAX_GROUP; e = e->next, n++) {
        ent[n] = e;
        jobs[n] = e->job;
        res[n] = e->res;
    }
    struct folio_err err = {0};
    double t0 = folio_mono_ms();
    int rc = worker_ensure_conn(t, s);
#ifdef FOLIO_FAULT_INJECTION
    if (w->fault.slow_results_ms)
        folio_sleep_ms(w->fault.slow_results_ms);
#endif
    if (rc == 0)
        rc = queue_complete_many(t->conn, jobs, w->worker_id, res, n, accepted, &err);
    if (rc) {
        char q[600];
        folio_log(FOLIO_LOG_WARN, "results_group_failed", "jobs=%d error=%s msg=\"writing them one by one\"", n,
                  folio_lq(q, sizeof q, err.msg[0] ? err.msg : "no database connection"));
        if (t->conn && queue_err_transient(t->conn, &err)) {
            PQfinish(t->conn);
            t->conn = NULL;
        }
    } else {
        folio_log(FOLIO_LOG_DEBUG, "results_group", "jobs=%d ms=%.2f", n, folio_mono_ms() - t0);
    }
    pthread_mutex_lock(&w->mu);
    for (int i = 0; i < n; i++) {
        ent[i]->accepted = rc ? 0 : accepted[i];
        ent[i]->state = rc ? DONE_ALONE : DONE_WRITTEN;
    }
    pthread_mutex_unlock(&w->mu);
}

/* Queues the result for a group write and waits until some thread (this
 * one, when no write is in flight) has written it. Returns 1 when the
 * group write took it (*accepted set), 0 when it must be written alone. */
static int complete_grouped(struct ocr_thread *t, struct slot *s, const struct queue_result *res, int *accepted)
{
    struct worker *w = t->w;
    struct done_entry me = {.job = &s->job, .res = res, .state = DONE_WAITING};
    pthread_mutex_lock(&w->mu);
    me.next = w->done_head;
    w->done_head = &me;
    while (me.state == DONE_WAITING) {
        if (w->done_writing) {
            pthread_cond_wait(&w->done_cv, &w->mu);
            continue;
        }
        w->done_writing = 1;
        struct done_entry *group = w->done_head;
        w->done_head = NULL;
        pthread_mutex_unlock(&w->mu);
        write_group(t, s, group);
        pthread_mutex_lock(&w->mu);
        w->done_writing = 0;
        pthread_cond_broadcast(&w->done_cv);
    }
    int state = me.state;
    *accepted = me.accepted;
    pthread_mutex_unlock(&w->mu);
    return state == DONE_WRITTEN;
}

/* Completes the slot's job: grouped with other threads' results when
 * --claim-batch > 1, else, or when the group write failed, alone with
 * retries across reconnects. */
static int complete_job(struct ocr_thread *t, struct slot *s, const struct queue_result *res, int *accepted,
                        struct folio_err *err)
{
    struct worker *w = t->w;
    if (w->o->batch > 1 && w->nslots > 1 && complete_grouped(t, s, res, accepted))
        return 0;
    int rc;
    WITH_DB_RETRY(t, s, rc, err, queue_complete(t->conn, &s->job, w->worker_id, res, accepted, err));
    return rc;
}

static void build_result_json(const struct engine_result *er, double fetch_ms, double total_ms,
                              struct json_buf *scores, struct json_buf *timings, struct json_buf *pages,
                              const struct doc_classified *dc)
{
    worker_scores_json(er, scores);
    json_raw(timings, "{\"fetch_ms\":");
    json_num(timings, fetch_ms);
    json_raw(timings, ",\"decode_ms\":");
    json_num(timings, er->text.decode_ms);
    json_raw(timings, ",\"ocr_ms\":");
    json_num(timings, er->text.ocr_ms);
    json_raw(timings, ",\"rules_ms\":");
    json_num(timings, er->rules_ms);
    json_raw(timings, ",\"total_ms\":");
    json_num(timings, total_ms);
    json_raw(timings, "}");
    worker_pages_json(dc, pages); /* per-page results ride along (schema 004) */
}

/* "msg: detail", the text a failed attempt records. */
static void failure_text(const struct folio_err *err, char *msg, size_t n)
{
    snprintf(msg, n, "%s%s%s", err->msg, err->detail[0] ? ": " : "", err->detail);
}

/* Records a failed attempt (queue_fail decides: retry later or dead) and
 * counts it. Returns queue_fail's status; state is the job's new state. */
static int record_failure(struct ocr_thread *t, struct slot *s, const struct engine_result *er, const char *msg,
                          char state[8])
{
    struct worker *w = t->w;
    struct folio_err ferr = {0};
    int frc;
    WITH_DB_RETRY(t, s, frc, &ferr, queue_fail(t->conn, &w->o->queue, &s->job, msg, state, &ferr));
    atomic_fetch_add(&w->failed, 1);
    metrics_job(w->o->metrics, "failed", er, 0);
    return frc;
}

void worker_finish_failed(struct ocr_thread *t, struct slot *s, const struct engine_result *er,
                          const struct folio_err *err, int cancel, const char *qn)
{
    const struct queue_job *j = &s->job;
    char state[8] = "";
    char msg[1400], q[900];
    failure_text(err, msg, sizeof msg);
    if (cancel == CANCEL_BUDGET)
        snprintf(msg, sizeof msg, "job ran past its time budget of %.0f s (--job-deadline) and was stopped (%s)",
                 worker_job_budget_ms(t->w->o) / 1000.0, err->msg);
    /* a job over its budget is no longer renewed: its own lease still
     * holds long enough for this (else the reaper counts it) */
    atomic_store(&s->cancel, CANCEL_NONE);
    int frc = record_failure(t, s, er, msg, state);
    atomic_store(&s->cancel, cancel);
    folio_log(FOLIO_LOG_WARN, "job_failed", "job=%lld name=%s attempt=%d max_attempts=%d state=%s error=%s",
              (long long)j->id, qn, j->attempt, j->max_attempts, frc ? "unknown" : state,
              folio_lq(q, sizeof q, msg));
}

void worker_finish_released(struct ocr_thread *t, struct slot *s, const struct engine_result *er, int device_lost,
                            const char *qn)
{
    const struct queue_job *j = &s->job;
    struct folio_err err = {0};
    int released = 0, rc;
    WITH_DB_RETRY(t, s, rc, &err, queue_release(t->conn, j, &released, &err));
    (void)rc; /* released says whether it landed; the lease covers the rest */
    metrics_job(t->w->o->metrics, "released", er, 0);
    if (device_lost)
        folio_log(FOLIO_LOG_WARN, "job_released", "job=%lld name=%s attempt=%d released=%d reason=device_lost",
                  (long long)j->id, qn, j->attempt, released);
    else
        folio_log(FOLIO_LOG_INFO, "job_released", "job=%lld name=%s attempt=%d released=%d", (long long)j->id, qn,
                  j->attempt, released);
}

/* The document's bytes are where this worker cannot look (an fs store it
 * was not given): not the document's fault, so the job goes back with its
 * attempt (a correctly started worker takes it), and this worker stops
 * claiming and reports not ready with the reason until it is restarted
 * right. Before, every fs document burnt its attempts here (246 failures
 * in two minutes, the jobs dead). */
void worker_finish_misconfigured(struct ocr_thread *t, struct slot *s, const struct folio_err *why, const char *qn)
{
    struct worker *w = t->w;
    const struct queue_job *j = &s->job;
    struct folio_err err = {0};
    int released = 0, rc;
    atomic_store(&w->misconfigured, 1);
    char reason[600], q[700];
    snprintf(reason, sizeof reason, "%s (%s)", why->msg, why->hint);
    metrics_set_unready(w->o->metrics, reason);
    WITH_DB_RETRY(t, s, rc, &err, queue_release(t->conn, j, &released, &err));
    (void)rc;
    metrics_job(w->o->metrics, "released", NULL, 0);
    folio_log(FOLIO_LOG_ERROR, "job_released", "job=%lld name=%s attempt=%d released=%d reason=blob_store_mismatch "
              "msg=%s", (long long)j->id, qn, j->attempt, released, folio_lq(q, sizeof q, reason));
}

void worker_finish_dropped(struct ocr_thread *t, struct slot *s, int lease_lost, const char *qn)
{
    const struct queue_job *j = &s->job;
    atomic_fetch_add(&t->w->lost, 1);
    metrics_job(t->w->o->metrics, "lost", NULL, 0);
    folio_log(FOLIO_LOG_WARN, "job_dropped", "job=%lld name=%s attempt=%d reason=%s", (long long)j->id, qn,
              j->attempt, lease_lost ? "lease_lost" : "database_unreachable");
}

/* Logs and counts what became of a written result: done, refused by the
 * server (recorded as a failed attempt) or lost with the lease. */
static void written_outcome(struct ocr_thread *t, struct slot *s, const struct engine_result *er, int rc,
                            int accepted, const struct folio_err *err, double total_ms, const char *qn)
{
    struct worker *w = t->w;
    const struct queue_job *j = &s->job;
    char q[900];
    if (rc == 0 && accepted) {
        atomic_fetch_add(&w->done, 1);
        metrics_job(w->o->metrics, "done", er, total_ms);
        folio_log(FOLIO_LOG_INFO, "job_done",
                  "job=%lld document=%lld name=%s attempt=%d label=%s confidence=%.3f ms=%.0f", (long long)j->id,
                  (long long)j->document_id, qn, j->attempt, folio_lq(q, sizeof q, er->label), er->confidence,
                  total_ms);
    } else if (rc && t->conn && !db_conn_broken(t->conn)) {
        /* The server refused the result itself (not the lease): record
         * why, rather than leaving the job to expire with no reason. */
        char state[8] = "";
        char msg[1400];
        failure_text(err, msg, sizeof msg);
        int frc = record_failure(t, s, er, msg, state);
        folio_log(FOLIO_LOG_WARN, "job_failed", "job=%lld name=%s attempt=%d state=%s error=%s", (long long)j->id, qn,
                  j->attempt, frc ? "unknown" : state, folio_lq(q, sizeof q, msg));
    } else {
        atomic_fetch_add(&w->lost, 1);
        metrics_job(w->o->metrics, "lost", er, 0);
        folio_log(FOLIO_LOG_WARN, "job_lost", "job=%lld name=%s attempt=%d msg=%s", (long long)j->id, qn, j->attempt,
                  rc ? folio_lq(q, sizeof q, err->msg) : "\"lease no longer ours; result discarded\"");
    }
}

void worker_finish_done(struct ocr_thread *t, struct slot *s, const struct doc_classified *dc, double fetch_ms,
                        double t0, const char *qn, struct folio_err *err)
{
    const struct engine_result *er = &dc->doc;
    double total_ms = folio_mono_ms() - t0;
    struct json_buf scores, timings, pages;
    json_init(&scores);
    json_init(&timings);
    json_init(&pages);
    build_result_json(er, fetch_ms, total_ms, &scores, &timings, &pages, dc);
    struct queue_result res = {.label = er->label,
                               .confidence = er->confidence,
                               .needs_review = er->needs_review,
                               .scores_json = scores.s,
                               .engine_path = er->engine_path,
                               .fallback_reason = er->fallback_reason,
                               .ocr_text = er->text.text,
                               .ocr_confidence = er->text.confidence,
                               .ocr_orientation = er->text.orientation,
                               .ocr_pages_json = pages.s,
                               .timings_json = timings.s,
                               .review_reason = er->review_reason[0] ? er->review_reason : NULL};
    int accepted = 0, rc;
    if (scores.oom || timings.oom || pages.oom)
        rc = folio_err_set(err, FOLIO_ENOMEM, "cannot build the result JSON");
    else
        rc = complete_job(t, s, &res, &accepted, err);
    written_outcome(t, s, er, rc, accepted, err, total_ms, qn);
    json_free(&scores);
    json_free(&timings);
    json_free(&pages);
}
