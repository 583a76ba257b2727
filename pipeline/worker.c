/*
 * The worker process: claims jobs, classifies documents, writes results
 * (DESIGN.md §4, §6.4). Threads and what each owns:
 *
 *   dispatcher (the calling thread)  one PGconn: LISTEN, claim, reaper,
 *       retention cleanup, the workers row; a signalfd for SIGTERM/SIGINT
 *       (signals are blocked in every thread, so there is no handler and no
 *       global flag); an eventfd that OCR threads poke when a slot frees.
 *   N OCR threads (--ocr-threads)  one TessBaseAPI each, initialised once
 *       before the first claim, and one PGconn each (blob fetch, labels,
 *       completion), so completions never queue behind a shared connection.
 *   heartbeat thread  its own PGconn, so a slow claim or a long completion
 *       can never starve the lease renewals. Every lease/3 it renews all
 *       in-flight jobs in one statement and refreshes the workers row.
 *   GPU thread (engine/tiers.c, one per device)  owns the vlm: the OCR
 *       threads decode and preprocess their page, queue it (bounded) and
 *       sleep; it runs up to --gpu-batch ready pages per pass and wakes
 *       each with its result. A job waiting for the GPU keeps its slot, so
 *       the heartbeat renews it like any other; on shutdown or a lost
 *       lease its cancel flag takes a still-queued page back out. With the
 *       vision tier on and --ocr-threads not given, the thread count is at
 *       least 2 x gpu-batch + 2: a full batch waits on the GPU while as many
 *       threads fetch and prepare the next one.
 *
 * One slot per OCR thread. The dispatcher claims at most as many jobs as
 * there are free slots (capped by --claim-batch, in one statement): a
 * claimed job never waits in a local queue where a crash would strand it
 * until its lease expires. With --claim-batch > 1 results are also written
 * in groups: an OCR thread that finishes while another thread's write is
 * on the wire queues its result, and the next writer sends every queued
 * result in one round trip and one transaction (queue_complete_many, each
 * still token-checked); a failed group falls back to one write per job.
 *
 * Poolers: with --pooler transaction every connection is opened pooled
 * (db_pooled: no named statements, no LISTEN); wake-ups then come from
 * polling, or from LISTEN on --listen-db, a direct connection of its own.
 *
 * Lease safety: each slot carries the monotonic time until which its lease
 * is known to hold (claim or last renewal + lease). When a renewal reports
 * the job lost, or that time passes without a renewal (database down,
 * network split), the slot's cancel flag stops Tesseract within a word or
 * two and the output is dropped: a worker never writes on a lease it may
 * have lost (and the token check would refuse it anyway).
 *
 * Database outages: any thread whose connection breaks reconnects with
 * jittered exponential backoff. The dispatcher stops claiming meanwhile;
 * OCR threads keep their in-flight work and retry the completion until the
 * lease would have expired. Nothing here exits on a database error.
 *
 * Shutdown: the first signal stops claiming and gives in-flight jobs
 * --grace seconds; then their OCR is cancelled and they are released
 * (token-checked, attempt not counted). The workers row is marked stopped
 * and worker_run returns 0. A second signal exits at once: leases cover it.
 */
#include "common/fault.h"
#include "common/json.h"
#include "engine/engine.h"
#include "engine/ocr.h"
#include "ingest/ingest.h"
#include "pipeline/cli.h"
#include "pipeline/db.h"
#include "pipeline/docpage.h"
#include "pipeline/docpages.h"
#include "pipeline/doctext.h"
#include "pipeline/learn_db.h"
#include "pipeline/metrics.h"
#include "pipeline/queue.h"
#include "pipeline/service.h"
#include "pipeline/worker.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

enum { SLOT_FREE, SLOT_ASSIGNED, SLOT_BUSY };
enum { CANCEL_NONE = 0, CANCEL_LOST = 1, CANCEL_SHUTDOWN = 2, CANCEL_BUDGET = 3 };

#define LABELS_REFRESH_MS WORKER_LABELS_REFRESH_MS /* learn_db.h */
#define CLEANUP_BATCH 500

struct slot {
    int state;               /* guarded by worker.mu */
    struct queue_job job;    /* valid while not FREE */
    double lease_until_ms;   /* monotonic; guarded by worker.mu */
    double started_ms;       /* monotonic claim time, for the job's time budget */
    _Atomic int cancel;      /* CANCEL_*: read by Tesseract's cancel callback */
};

struct fault {
    char crash_prefix[65];   /* crash_on_document:<sha256 prefix> */
    int sleep_ms;            /* sleep_ms:<n> before OCR, cancellable */
    int slow_results_ms;     /* slow_results_ms:<n>: a result write's round trip takes n ms longer */
};

struct worker {
    const struct worker_opts *o;
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* slot assigned, start-up progress, quit */
    pthread_cond_t hb_cv;    /* quit, for the heartbeat thread only: a broadcast
                              * on cv must not trigger an early renewal */
    struct slot *slots;
    int nslots;
    int quit;                /* threads exit (guarded by mu) */
    int ready, init_failed;  /* OCR threads' start-up (guarded by mu) */
    struct folio_err init_err;
    int64_t worker_id;
    struct engine_models *models; /* vision + ocr+lm tiers, shared by the threads (or NULL) */
    _Atomic long long done, failed, lost;
    struct done_entry *done_head; /* results waiting for a group write (guarded by mu) */
    int done_writing;             /* a thread is writing a group (guarded by mu) */
    pthread_cond_t done_cv;       /* a group write ended */
    _Atomic int draining;    /* SIGTERM seen: the heartbeat keeps the row's 'draining' */
    int wake_fd;
    struct fault fault;
    char host[256];
    struct ingest_membudget *decode_budget; /* shared by the OCR threads' decodes */
};

struct ocr_thread {
    struct worker *w;
    int idx;
    pthread_t tid;
    struct ocr_engine *ocr;
    PGconn *conn;
    struct engine_labels *labels;
    struct engine *engine;
    double labels_at_ms;
    unsigned int seed;
    struct engine_learned *learned; /* ocr+learned model (learn_db), or NULL */
    long long learned_id;
};

/* ------------------------------------------------------------ helpers */

static double jitter(unsigned int *seed, double v)
{
    /* ±50 %: spreads a fleet's retries and polls so they do not march in step. */
    return v * (0.5 + (double)rand_r(seed) / ((double)RAND_MAX + 1.0));
}

/* The job time budget: --job-deadline, or by default what the slowest
 * legitimate job can take (every page OCR'd to its hard stop, plus two
 * minutes for fetch, vision and completion); 0 = none (no page deadline). */
static double worker_job_budget_ms(const struct worker_opts *o)
{
    if (o->job_deadline_s > 0)
        return o->job_deadline_s * 1000.0;
    if (o->page_deadline_ms <= 0)
        return 0;
    double page_hard = o->page_deadline_ms * 1.25 + 2000.0;
    return (o->ocr_max_pages > 0 ? o->ocr_max_pages : 10) * page_hard + 120000.0;
}

static void wake_dispatcher(struct worker *w)
{
    uint64_t one = 1;
    ssize_t r = write(w->wake_fd, &one, sizeof one);
    (void)r; /* a full counter already means "wake up" */
}

static void parse_faults(struct fault *f)
{
    memset(f, 0, sizeof *f);
#ifdef FOLIO_FAULT_INJECTION
    folio_fault_arg(FOLIO_FAULT_crash_on_document, f->crash_prefix, sizeof f->crash_prefix);
    f->sleep_ms = (int)folio_fault_num(FOLIO_FAULT_sleep_ms);
    f->slow_results_ms = (int)folio_fault_num(FOLIO_FAULT_slow_results_ms);
    if (f->crash_prefix[0] || f->sleep_ms || f->slow_results_ms)
        folio_log(FOLIO_LOG_WARN, "fault_injection", "crash_on_document=%s sleep_ms=%d slow_results_ms=%d",
                  f->crash_prefix[0] ? f->crash_prefix : "-", f->sleep_ms, f->slow_results_ms);
#endif
}

static int job_cancelled(struct slot *s) { return atomic_load(&s->cancel) != CANCEL_NONE; }

static double slot_lease_until(struct worker *w, struct slot *s)
{
    pthread_mutex_lock(&w->mu);
    double t = s->lease_until_ms;
    pthread_mutex_unlock(&w->mu);
    return t;
}

/* Connects (or re-connects) with jittered backoff until connected, the
 * lease of the slot's job runs out, or the job is cancelled. */
static int ensure_conn(struct ocr_thread *t, struct slot *s)
{
    if (t->conn && PQstatus(t->conn) == CONNECTION_OK)
        return 0;
    double backoff = 200;
    for (;;) {
        if (t->conn) {
            PQfinish(t->conn);
            t->conn = NULL;
        }
        struct folio_err err = {0};
        char app[64];
        snprintf(app, sizeof app, "folio-worker-ocr%d", t->idx);
        if (db_open(t->w->o->conninfo, t->w->o->pooler, app, &t->conn, &err) == 0)
            return 0;
        double left = slot_lease_until(t->w, s) - folio_mono_ms();
        char q[600];
        folio_log(FOLIO_LOG_WARN, "db_reconnect", "thread=ocr%d job=%lld retry_ms=%.0f lease_left_ms=%.0f error=%s",
                  t->idx, (long long)s->job.id, backoff, left, folio_lq(q, sizeof q, err.msg));
        if (left <= backoff || job_cancelled(s))
            return FOLIO_EDB;
        folio_sleep_ms((int64_t)jitter(&t->seed, backoff));
        backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
    }
}

/* The newest ocr+learned model of the worker's model key (learn_db.c),
 * after retraining it when enough corrections arrived (first thread
 * only: one retrain per worker, and an advisory lock makes it one per
 * fleet). The engine that borrows the old model is closed by the caller
 * before the model is freed here on the next refresh. */
static int refresh_learned(struct ocr_thread *t, struct folio_err *err)
{
    const struct worker_opts *o = t->w->o;
    struct learn_train_opts lo = {.model_key = o->queue.model_key, .min_per_label = 5};
    int trained = 0;
    if (t->idx == 0 && o->retrain_after > 0) {
        int rc = learn_db_maybe_retrain(t->conn, &lo, o->retrain_after, &trained, err);
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
    if (rc || !m)
        return rc;
    engine_close(t->engine); /* it borrows the old model */
    t->engine = NULL;
    engine_learned_free(t->learned);
    t->learned = m;
    t->learned_id = id;
    folio_log(FOLIO_LOG_INFO, "learned_model_loaded", "thread=%d model_id=%lld labels=%d", t->idx, id,
              engine_learned_count(m));
    return 0;
}

/* The active label set from folio.labels, in id order with its keywords. */
static int load_label_set(PGconn *conn, struct engine_labels **out, struct folio_err *err)
{
    *out = NULL;
    PGresult *r = PQexec(conn,
                         "SELECT l.name, k.kw FROM folio.labels l"
                         " LEFT JOIN LATERAL unnest(l.keywords) WITH ORDINALITY AS k(kw, i) ON true"
                         " WHERE l.active ORDER BY l.id, k.i");
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, conn, "reading folio.labels", err);
    struct engine_labels *nl = engine_labels_new();
    int rc = nl ? 0 : folio_err_set(err, FOLIO_ENOMEM, "cannot allocate the label set");
    int rows = PQntuples(r);
    const char **kw = calloc((size_t)(rows ? rows : 1), sizeof *kw);
    if (!kw && !rc)
        rc = folio_err_set(err, FOLIO_ENOMEM, "cannot allocate %d keywords", rows);
    for (int i = 0; i < rows && !rc;) {
        const char *name = PQgetvalue(r, i, 0);
        int nk = 0, j = i;
        for (; j < rows && strcmp(PQgetvalue(r, j, 0), name) == 0; j++)
            if (!PQgetisnull(r, j, 1))
                kw[nk++] = PQgetvalue(r, j, 1);
        rc = engine_labels_add(nl, name, kw, nk, err);
        i = j;
    }
    free(kw);
    PQclear(r);
    if (rc) {
        engine_labels_free(nl);
        return rc;
    }
    *out = nl;
    return 0;
}

/* (Re)loads the active labels at most every LABELS_REFRESH_MS, so edits to
 * folio.labels reach running workers without a restart. */
static int refresh_labels(struct ocr_thread *t, struct folio_err *err)
{
    if (t->engine && folio_mono_ms() - t->labels_at_ms < LABELS_REFRESH_MS)
        return 0;
    struct engine_labels *nl = NULL;
    int rc = load_label_set(t->conn, &nl, err);
    struct engine *ne = NULL;
    if (!rc)
        rc = refresh_learned(t, err);
    if (!rc) {
        struct engine_config cfg = {.model_path = t->w->o->model_path, .mmproj_path = t->w->o->mmproj_path,
                                    .models = t->w->models, .learned = t->learned,
                                    .review_below = ENGINE_REVIEW_BELOW_DEFAULT,
                                    .review_margin = ENGINE_REVIEW_MARGIN_DEFAULT};
        rc = learn_db_policy(t->conn, t->w->o->queue.model_key, &cfg.review_below, &cfg.review_margin, err);
        if (t->w->o->review_below >= 0)
            cfg.review_below = t->w->o->review_below;
        if (!rc)
            rc = engine_open(&cfg, nl, &ne, err);
    }
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

/* ------------------------------------------------------------ one job */

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

/* How long one step retries a server that keeps answering with a
 * transient error (a table locked by VACUUM FULL, statement_timeout, a
 * standby mid-failover) while the heartbeat still holds the lease. Past
 * it the error fails the job (one attempt), so a permanent setting that
 * only looks transient (a statement_timeout no blob read can meet)
 * cannot hold a job forever. */
#define TRANSIENT_RETRY_MS (300 * 1000.0)

/* After a transient error from a working server: waits a jittered,
 * doubling backoff before the step is retried on a fresh connection.
 * Returns nonzero when the step should stop retrying: the job was
 * cancelled (lease lost, shutdown) or TRANSIENT_RETRY_MS has passed. */
static int transient_wait(struct ocr_thread *t, struct slot *s, const struct folio_err *err, double first_ms,
                          double *backoff)
{
    if (job_cancelled(s) || folio_mono_ms() - first_ms + *backoff > TRANSIENT_RETRY_MS)
        return 1;
    char q[600];
    folio_log(FOLIO_LOG_WARN, "db_transient", "thread=ocr%d job=%lld retry_ms=%.0f error=%s", t->idx,
              (long long)s->job.id, *backoff, folio_lq(q, sizeof q, err->msg));
    double until = folio_mono_ms() + jitter(&t->seed, *backoff);
    while (folio_mono_ms() < until && !job_cancelled(s))
        folio_sleep_ms(20);
    *backoff = *backoff * 2 > 5000 ? 5000 : *backoff * 2;
    return job_cancelled(s);
}

/* Retries a database step across reconnects until the lease runs out.
 * Leaves rcvar 0, the step's own (non-transient) error, or FOLIO_EDB when
 * the lease ran out first. A retried completion is safe: queue_complete
 * recognises a result its lost COMMIT acknowledgement already landed. */
#define WITH_DB_RETRY(t, s, rcvar, errp, call)                                              \
    do {                                                                                    \
        double rt_first_ = folio_mono_ms(), rt_backoff_ = 100;                              \
        for (;;) {                                                                          \
            if (((rcvar) = ensure_conn((t), (s))) != 0)                                     \
                break;                                                                      \
            (rcvar) = (call);                                                               \
            if ((rcvar) == 0 || !queue_err_transient((t)->conn, (errp)))                    \
                break;                                                                      \
            if (!db_conn_broken((t)->conn) &&                                               \
                transient_wait((t), (s), (errp), rt_first_, &rt_backoff_))                  \
                break;                                                                      \
            PQfinish((t)->conn);                                                            \
            (t)->conn = NULL;                                                               \
        }                                                                                   \
    } while (0)

/* ------------------------------------------------------------ grouped results */

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
    int rc = ensure_conn(t, s);
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

/* Completes the slot's job: grouped with other threads' results when
 * --claim-batch > 1 (group commit: whoever finds no write in flight
 * writes everything queued so far), else, or when the group write
 * failed, alone with retries across reconnects. */
static int complete_job(struct ocr_thread *t, struct slot *s, const struct queue_result *res, int *accepted,
                        struct folio_err *err)
{
    struct worker *w = t->w;
    if (w->o->batch > 1 && w->nslots > 1) {
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
        if (state == DONE_WRITTEN)
            return 0;
    }
    int rc;
    WITH_DB_RETRY(t, s, rc, err, queue_complete(t->conn, &s->job, w->worker_id, res, accepted, err));
    return rc;
}

/* The document's display name (its file name as first ingested, made
 * printable at ingest) for the job's log lines (issue 17): what an
 * operator greps for. Best effort, one indexed row: a missing row, a
 * broken connection or a schema before 011 (no grant) logs "-" and never
 * holds up or fails the job. */
static void fetch_doc_name(PGconn *c, int64_t document_id, char *out, size_t n)
{
    snprintf(out, n, "-");
    if (!c || PQstatus(c) != CONNECTION_OK)
        return;
    char ib[24];
    snprintf(ib, sizeof ib, "%lld", (long long)document_id);
    const char *v[] = {ib};
    PGresult *r = PQexecParams(c,
                               "SELECT name_display FROM folio.document_sources"
                               " WHERE document_id = $1 ORDER BY id LIMIT 1",
                               1, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        snprintf(out, n, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
}

static void run_job(struct ocr_thread *t, struct slot *s)
{
    struct worker *w = t->w;
    const struct queue_job *j = &s->job;
    double t0 = folio_mono_ms();
    struct folio_err err = {0};
    uint8_t *data = NULL;
    size_t len = 0;
    int rc;
    char q[900];

    WITH_DB_RETRY(t, s, rc, &err, queue_fetch_document(t->conn, w->o->blobs, j->document_id, &data, &len, &err));
    char name[256], qn[600];
    fetch_doc_name(rc == 0 ? t->conn : NULL, j->document_id, name, sizeof name);
    folio_lq(qn, sizeof qn, name);
    double fetch_ms = folio_mono_ms() - t0;
    if (rc == 0)
        WITH_DB_RETRY(t, s, rc, &err, refresh_labels(t, &err));

#ifdef FOLIO_FAULT_INJECTION
    if (w->fault.crash_prefix[0] &&
        strncmp(j->sha256, w->fault.crash_prefix, strlen(w->fault.crash_prefix)) == 0) {
        folio_log(FOLIO_LOG_WARN, "fault_crash", "job=%lld sha256=%s attempt=%d", (long long)j->id,
                  j->sha256, j->attempt);
        raise(SIGKILL);
    }
    for (int slept = 0; rc == 0 && slept < w->fault.sleep_ms && !job_cancelled(s); slept += 20)
        folio_sleep_ms(20);
#endif

    /* Every page (up to --max-pages-classified); er is the document's
     * result derived from them (docpages.h): a view of dc.doc, which dc
     * owns and frees. */
    struct doc_classified dc;
    memset(&dc, 0, sizeof dc);
    struct ingest_limits pdf_lim;
    ingest_limits_default(&pdf_lim);
    pdf_lim.pdf_page_ms = w->o->pdf_page_ms;
    pdf_lim.pdf_memory_mb = w->o->pdf_memory_mb;
    /* reclassify --reuse-ocr: text stored with the replaced result, looked
     * up only when a text tier asks for a page's text */
    struct learn_db_reuse reuse = {.conn = &t->conn, .job_id = j->id};
    if (rc == 0) {
        struct doc_pages_opts po = {.pages = j->pages, .max_classified = w->o->max_pages_classified,
                                    .stored_text = learn_db_stored_text, .stored_ctx = &reuse,
                                    .pdf_limits = &pdf_lim,
                                    .ocr_max_pages = w->o->ocr_max_pages,
                                    .max_image_tokens = w->o->max_image_tokens, .ocr = t->ocr,
                                    .cancel = &s->cancel, .job_id = j->id,
                                    .page_deadline_ms = w->o->page_deadline_ms,
                                    .max_page_bytes = w->o->max_page_text,
                                    .max_doc_bytes = w->o->max_doc_text,
                                    .max_pixels = w->o->max_pixels, .decode_budget = w->decode_budget};
        rc = worker_classify_document(t->engine, data, len, &po, &dc, &err);
    }
    struct engine_result er = dc.doc;
    free(data);

    int cancel = atomic_load(&s->cancel);
    /* FOLIO_EDB with no usable connection means the retries ran out with
     * the lease; with a working connection it is a statement the server
     * refused, which fails the job like any other error. */
    int unreachable = rc == FOLIO_EDB && (!t->conn || db_conn_broken(t->conn));
    if (cancel == CANCEL_LOST || (unreachable && cancel != CANCEL_SHUTDOWN)) {
        /* Lease lost or the database was unreachable for a whole lease:
         * someone else may own the job now. Drop everything. */
        atomic_fetch_add(&w->lost, 1);
        metrics_job(w->o->metrics, "lost", NULL, 0);
        folio_log(FOLIO_LOG_WARN, "job_dropped", "job=%lld name=%s attempt=%d reason=%s", (long long)j->id, qn,
                  j->attempt, cancel == CANCEL_LOST ? "lease_lost" : "database_unreachable");
    } else if (rc == FOLIO_EDEVICELOST) {
        /* --on-device-loss release: the GPU died under this document; put
         * the job back (attempt not counted) for a worker with a healthy
         * GPU instead of settling for the OCR tiers. This worker's engine
         * re-opens with backoff, OCR-only after repeated losses, so a
         * document cannot bounce here forever. */
        int released = 0;
        WITH_DB_RETRY(t, s, rc, &err, queue_release(t->conn, j, &released, &err));
        metrics_job(w->o->metrics, "released", &er, 0);
        folio_log(FOLIO_LOG_WARN, "job_released", "job=%lld name=%s attempt=%d released=%d reason=device_lost",
                  (long long)j->id, qn, j->attempt, released);
    } else if (cancel == CANCEL_SHUTDOWN) {
        int released = 0;
        WITH_DB_RETRY(t, s, rc, &err, queue_release(t->conn, j, &released, &err));
        metrics_job(w->o->metrics, "released", &er, 0);
        folio_log(FOLIO_LOG_INFO, "job_released", "job=%lld name=%s attempt=%d released=%d", (long long)j->id,
                  qn, j->attempt, released);
    } else if (rc) {
        char state[8] = "";
        char msg[1400];
        snprintf(msg, sizeof msg, "%s%s%s", err.msg, err.detail[0] ? ": " : "", err.detail);
        if (cancel == CANCEL_BUDGET)
            snprintf(msg, sizeof msg, "job ran past its time budget of %.0f s (--job-deadline) and was stopped (%s)",
                     worker_job_budget_ms(w->o) / 1000.0, err.msg);
        struct folio_err ferr = {0};
        int frc;
        /* a job over its budget is no longer renewed: its own lease still
         * holds long enough for this (else the reaper counts it) */
        atomic_store(&s->cancel, CANCEL_NONE);
        WITH_DB_RETRY(t, s, frc, &ferr, queue_fail(t->conn, &w->o->queue, j, msg, state, &ferr));
        atomic_store(&s->cancel, cancel);
        atomic_fetch_add(&w->failed, 1);
        metrics_job(w->o->metrics, "failed", &er, 0);
        folio_log(FOLIO_LOG_WARN, "job_failed", "job=%lld name=%s attempt=%d max_attempts=%d state=%s error=%s",
                  (long long)j->id, qn, j->attempt, j->max_attempts, frc ? "unknown" : state,
                  folio_lq(q, sizeof q, msg));
    } else {
        double total_ms = folio_mono_ms() - t0;
        struct json_buf scores, timings, pages;
        json_init(&scores);
        json_init(&timings);
        json_init(&pages);
        build_result_json(&er, fetch_ms, total_ms, &scores, &timings, &pages, &dc);
        struct queue_result res = {.label = er.label,
                                   .confidence = er.confidence,
                                   .needs_review = er.needs_review,
                                   .scores_json = scores.s,
                                   .engine_path = er.engine_path,
                                   .fallback_reason = er.fallback_reason,
                                   .ocr_text = er.text.text,
                                   .ocr_confidence = er.text.confidence,
                                   .ocr_orientation = er.text.orientation,
                                   .ocr_pages_json = pages.s,
                                   .timings_json = timings.s,
                                   .review_reason = er.review_reason[0] ? er.review_reason : NULL};
        int accepted = 0;
        if (scores.oom || timings.oom || pages.oom)
            rc = folio_err_set(&err, FOLIO_ENOMEM, "cannot build the result JSON");
        else
            rc = complete_job(t, s, &res, &accepted, &err);
        if (rc == 0 && accepted) {
            atomic_fetch_add(&w->done, 1);
            metrics_job(w->o->metrics, "done", &er, total_ms);
            folio_log(FOLIO_LOG_INFO, "job_done",
                      "job=%lld document=%lld name=%s attempt=%d label=%s confidence=%.3f ms=%.0f",
                      (long long)j->id, (long long)j->document_id, qn, j->attempt, folio_lq(q, sizeof q, er.label),
                      er.confidence, total_ms);
        } else if (rc && t->conn && !db_conn_broken(t->conn)) {
            /* The server refused the result itself (not the lease): record
             * why, rather than leaving the job to expire with no reason. */
            char state[8] = "";
            char msg[1400];
            snprintf(msg, sizeof msg, "%s%s%s", err.msg, err.detail[0] ? ": " : "", err.detail);
            struct folio_err ferr = {0};
            int frc;
            WITH_DB_RETRY(t, s, frc, &ferr, queue_fail(t->conn, &w->o->queue, j, msg, state, &ferr));
            atomic_fetch_add(&w->failed, 1);
            metrics_job(w->o->metrics, "failed", &er, 0);
            folio_log(FOLIO_LOG_WARN, "job_failed", "job=%lld name=%s attempt=%d state=%s error=%s", (long long)j->id,
                      qn, j->attempt, frc ? "unknown" : state, folio_lq(q, sizeof q, msg));
        } else {
            atomic_fetch_add(&w->lost, 1);
            metrics_job(w->o->metrics, "lost", &er, 0);
            folio_log(FOLIO_LOG_WARN, "job_lost", "job=%lld name=%s attempt=%d msg=%s", (long long)j->id, qn,
                      j->attempt,
                      rc ? folio_lq(q, sizeof q, err.msg) : "\"lease no longer ours; result discarded\"");
        }
        json_free(&scores);
        json_free(&timings);
        json_free(&pages);
    }
    worker_classified_free(&dc);
}

static void *ocr_thread_main(void *arg)
{
    struct ocr_thread *t = arg;
    struct worker *w = t->w;
    struct ocr_opts oo;
    ocr_opts_default(&oo);
    oo.lang = w->o->ocr_lang;
    oo.page_deadline_ms = w->o->page_deadline_ms;
    oo.osd_min_conf = (float)w->o->osd_min_conf;
    struct folio_err err = {0};
    int rc = ocr_open(&oo, &t->ocr, &err);
    pthread_mutex_lock(&w->mu);
    if (rc) {
        if (!w->init_failed)
            w->init_err = err;
        w->init_failed = 1;
    } else {
        w->ready++;
    }
    pthread_cond_broadcast(&w->cv);
    struct slot *s = &w->slots[t->idx];
    while (!rc) {
        while (!w->quit && s->state != SLOT_ASSIGNED)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->quit)
            break;
        s->state = SLOT_BUSY;
        pthread_mutex_unlock(&w->mu);

        run_job(t, s);

        pthread_mutex_lock(&w->mu);
        s->state = SLOT_FREE;
        atomic_store(&s->cancel, CANCEL_NONE);
        pthread_mutex_unlock(&w->mu);
        wake_dispatcher(w);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    ocr_close(t->ocr);
    engine_close(t->engine);
    engine_labels_free(t->labels);
    engine_learned_free(t->learned);
    if (t->conn)
        PQfinish(t->conn);
    return NULL;
}

/* ------------------------------------------------------------ heartbeat */


/* What the workers row says about the paths, as they are now: written at
 * registration and refreshed by every heartbeat, so a lost GPU, its
 * re-open and a give-up all show (paths, paths_disabled, state). */
struct worker_paths {
    char array[64];      /* text[] literal: {vision,ocr+lm,ocr+rules} */
    char disabled[1000]; /* jsonb: {"vision": "why", ...} */
    const char *state;   /* ready: a model tier runs or is being re-opened;
                          * ocr-only: none configured, or off until restart */
};

static void worker_paths_now(struct worker *w, struct worker_paths *wp)
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

static void stats_now(struct worker *w, struct queue_worker_stats *st, const char *state)
{
    st->done = atomic_load(&w->done);
    st->failed = atomic_load(&w->failed);
    st->lost = atomic_load(&w->lost);
    st->state = state;
    st->paths_array = st->paths_disabled_json = NULL;
}

static void *heartbeat_main(void *arg)
{
    struct worker *w = arg;
    const struct worker_opts *o = w->o;
    PGconn *c = NULL;
    double period_ms = o->queue.lease_s * 1000.0 / 3.0;
    int64_t *ids = calloc((size_t)w->nslots, sizeof *ids);
    char(*toks)[37] = calloc((size_t)w->nslots, sizeof *toks);
    int *slot_of = calloc((size_t)w->nslots, sizeof *slot_of);
    unsigned char *alive = calloc((size_t)w->nslots, 1);
    if (!ids || !toks || !slot_of || !alive) {
        folio_log(FOLIO_LOG_ERROR, "heartbeat_oom", "slots=%d", w->nslots);
        /* Without renewals every lease lapses: fence all jobs. */
    }
    pthread_mutex_lock(&w->mu);
    while (!w->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = ts.tv_nsec + (long long)(period_ms * 1e6);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&w->hb_cv, &w->mu, &ts);
        if (w->quit)
            break;
        int64_t worker_id = w->worker_id;
        int n = 0;
        for (int i = 0; ids && toks && slot_of && alive && i < w->nslots; i++)
            if (w->slots[i].state != SLOT_FREE && atomic_load(&w->slots[i].cancel) != CANCEL_BUDGET) {
                ids[n] = w->slots[i].job.id;
                memcpy(toks[n], w->slots[i].job.token, 37);
                slot_of[n++] = i;
            }
        pthread_mutex_unlock(&w->mu);

        double start = folio_mono_ms();
        struct folio_err err = {0};
        int rc = FOLIO_EDB;
        if (!c || PQstatus(c) != CONNECTION_OK) {
            if (c)
                PQfinish(c);
            c = NULL;
            db_open(o->conninfo, o->pooler, "folio-worker-heartbeat", &c, &err);
        }
        struct queue_worker_stats st;
        struct worker_paths wp;
        worker_paths_now(w, &wp);
        stats_now(w, &st, atomic_load(&w->draining) ? NULL : wp.state); /* keep 'draining' */
        st.paths_array = wp.array;
        st.paths_disabled_json = wp.disabled;
        if (c && ids)
            rc = queue_heartbeat(c, &o->queue, worker_id, &st, ids, (const char(*)[37])toks, n, alive, &err);
        if (rc) {
            char q[600];
            folio_log(FOLIO_LOG_WARN, "heartbeat_failed", "jobs=%d error=%s", n, folio_lq(q, sizeof q, err.msg));
            if (c && queue_err_transient(c, &err)) {
                PQfinish(c);
                c = NULL;
            }
        }

        pthread_mutex_lock(&w->mu);
        double now = folio_mono_ms();
        for (int k = 0; rc == 0 && k < n; k++) {
            struct slot *s = &w->slots[slot_of[k]];
            if (s->state == SLOT_FREE || s->job.id != ids[k])
                continue; /* finished meanwhile */
            if (alive[k]) {
                s->lease_until_ms = start + o->queue.lease_s * 1000.0;
            } else if (atomic_load(&s->cancel) != CANCEL_LOST) {
                atomic_store(&s->cancel, CANCEL_LOST);
                folio_log(FOLIO_LOG_WARN, "lease_lost", "job=%lld attempt=%d", (long long)s->job.id, s->job.attempt);
            }
        }
        /* Self-fencing: a job whose lease may have lapsed (no renewal for a
         * whole lease) is stopped even if the database never said so. A
         * job past its time budget is stopped and no longer renewed: a
         * stuck job cannot keep its lease alive forever. */
        double budget = worker_job_budget_ms(o);
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
    pthread_mutex_unlock(&w->mu);
    if (c)
        PQfinish(c);
    free(ids);
    free(toks);
    free(slot_of);
    free(alive);
    return NULL;
}

/* ------------------------------------------------------------ dispatcher */

void worker_ensure_omp_limit(char **argv)
{
    if (getenv("OMP_THREAD_LIMIT"))
        return;
    if (setenv("OMP_THREAD_LIMIT", "1", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    char q[300];
    folio_log(FOLIO_LOG_WARN, "omp_reexec_failed", "error=%s hint=\"export OMP_THREAD_LIMIT=1 before starting folio\"",
              folio_lq(q, sizeof q, strerror(errno)));
}

void worker_opts_default(struct worker_opts *o)
{
    memset(o, 0, sizeof *o);
    queue_cfg_default(&o->queue);
    o->batch = 1;
    o->grace_s = 30;
    o->retain_s = 7 * 86400;
    o->poll_s = 2;
    o->reap_s = 10;
    o->ocr_lang = "eng";
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o->ocr_threads = n > 0 ? (int)n : 1;
    o->ocr_threads_auto = 1;
    o->ocr_max_pages = 10;
    o->max_pages_classified = DOC_MAX_PAGES_CLASSIFIED;
    o->page_deadline_ms = 60000;
    struct ingest_limits il;
    ingest_limits_default(&il);
    o->max_pixels = il.max_pixels; /* what ingest let in is what a worker decodes */
    o->osd_min_conf = OCR_OSD_MIN_CONF_DEFAULT;
    o->review_below = -1;
    o->retrain_after = 20;
}

uint64_t worker_decode_memory_default(uint64_t max_pixels)
{
    /* what ingest_decode_page_opts estimates for one RGB page through
     * Leptonica at the pixel limit, plus room for ordinary pages beside it */
    return (max_pixels ? max_pixels : (UINT64_C(1) << 29)) * 11 + (UINT64_C(512) << 20);
}

struct dispatcher {
    struct worker *w;
    PGconn *c;
    double next_connect_ms, connect_backoff_ms;
    PGconn *lc; /* --listen-db: a direct connection that only LISTENs */
    double next_listen_ms, listen_backoff_ms;
    unsigned int seed;
};

static void disp_drop_conn(struct dispatcher *d, const struct folio_err *err)
{
    char q[600];
    if (d->c)
        PQfinish(d->c);
    d->c = NULL;
    d->next_connect_ms = folio_mono_ms() + jitter(&d->seed, d->connect_backoff_ms);
    folio_log(FOLIO_LOG_WARN, "db_unavailable", "thread=dispatcher retry_ms=%.0f error=%s", d->connect_backoff_ms,
              folio_lq(q, sizeof q, err ? err->msg : "connection lost"));
    d->connect_backoff_ms = d->connect_backoff_ms * 2 > 5000 ? 5000 : d->connect_backoff_ms * 2;
}

/* Connects, LISTENs and (first time) registers the worker row. */
static int disp_connect(struct dispatcher *d)
{
    struct worker *w = d->w;
    struct folio_err err = {0};
    if (folio_mono_ms() < d->next_connect_ms)
        return FOLIO_EDB;
    /* Behind a transaction pooler a LISTEN would land on whichever server
     * session ran it and be lost with it: wake-ups come from polling or
     * from the --listen-db connection instead. */
    if (db_open(w->o->conninfo, w->o->pooler, "folio-worker", &d->c, &err) ||
        (!db_pooled(d->c) && !w->o->listen_conninfo && queue_listen(d->c, &err))) {
        disp_drop_conn(d, &err);
        return FOLIO_EDB;
    }
    if (w->worker_id == 0) {
        /* the model tiers' open report (device, driver, ready time per step) */
        char detail[2560], eng[2048] = "null";
        if (w->models && engine_models_report_json(w->models, eng, sizeof eng) != 0)
            snprintf(eng, sizeof eng, "null");
        struct json_buf dj; /* ocr_lang and the versions are any bytes: escaped */
        json_init_fixed(&dj, detail, sizeof detail);
        json_obj(&dj);
        json_key(&dj, "tesseract");
        json_str(&dj, ocr_tesseract_version());
        json_key(&dj, "ocr_threads");
        json_int(&dj, w->nslots);
        json_key(&dj, "ocr_lang");
        json_str(&dj, w->o->ocr_lang);
        json_key(&dj, "engine");
        json_value_raw(&dj, eng);
        json_obj_end(&dj);
        if (json_status(&dj)) /* only a huge --ocr-lang gets here: a row without detail beats none */
            snprintf(detail, sizeof detail, "{}");
        struct worker_paths wp;
        worker_paths_now(w, &wp);
        struct queue_worker_info wi = {.host = w->host, .pid = (int)getpid(), .model_key = w->o->queue.model_key,
                                       .state = wp.state, .device = w->o->device, .paths_array = wp.array,
                                       .paths_disabled_json = wp.disabled, .detail_json = detail};
        int64_t id = 0;
        if (queue_worker_register(d->c, &wi, &id, &err)) {
            disp_drop_conn(d, &err);
            return FOLIO_EDB;
        }
        pthread_mutex_lock(&w->mu);
        w->worker_id = id;
        pthread_mutex_unlock(&w->mu);
        folio_log(FOLIO_LOG_INFO, "worker_registered", "worker=%lld host=%s pid=%d ocr_threads=%d lease_s=%.1f",
                  (long long)id, w->host, (int)getpid(), w->nslots, w->o->queue.lease_s);
    } else {
        folio_log(FOLIO_LOG_INFO, "db_reconnected", "thread=dispatcher worker=%lld", (long long)w->worker_id);
    }
    d->connect_backoff_ms = 200;
    return 0;
}

/* (Re)opens the --listen-db connection and LISTENs on it, with jittered
 * backoff between failures. Returns 1 when it just came up (notifications
 * sent while it was down are gone: claim once at once). */
static int disp_listen(struct dispatcher *d)
{
    const struct worker_opts *o = d->w->o;
    if (!o->listen_conninfo || d->lc || folio_mono_ms() < d->next_listen_ms)
        return 0;
    struct folio_err err = {0};
    if (db_open(o->listen_conninfo, DB_POOLER_NONE, "folio-worker-listen", &d->lc, &err) == 0 &&
        queue_listen(d->lc, &err) == 0) {
        d->listen_backoff_ms = 200;
        folio_log(FOLIO_LOG_INFO, "listen_connected", "channel=%s", QUEUE_NOTIFY_CHANNEL);
        return 1;
    }
    char q[600];
    if (d->lc)
        PQfinish(d->lc);
    d->lc = NULL;
    if (d->listen_backoff_ms < 200)
        d->listen_backoff_ms = 200;
    d->next_listen_ms = folio_mono_ms() + jitter(&d->seed, d->listen_backoff_ms);
    folio_log(FOLIO_LOG_WARN, "listen_unavailable", "retry_ms=%.0f error=%s msg=\"polling meanwhile\"",
              d->listen_backoff_ms, folio_lq(q, sizeof q, err.msg));
    d->listen_backoff_ms = d->listen_backoff_ms * 2 > 5000 ? 5000 : d->listen_backoff_ms * 2;
    return 0;
}

/* Claims up to min(batch, free slots) jobs and hands them to idle OCR
 * threads. Returns the number claimed, or FOLIO_EDB. */
static int disp_claim(struct dispatcher *d, int *free_after)
{
    struct worker *w = d->w;
    pthread_mutex_lock(&w->mu);
    int nfree = 0;
    for (int i = 0; i < w->nslots; i++)
        nfree += w->slots[i].state == SLOT_FREE;
    pthread_mutex_unlock(&w->mu);
    *free_after = nfree;
    if (nfree == 0)
        return 0;
    int k = nfree < w->o->batch ? nfree : w->o->batch;
    struct queue_job jobs[64];
    if (k > 64)
        k = 64;
    int n = 0;
    struct folio_err err = {0};
    double start = folio_mono_ms();
    int crc = queue_claim(d->c, &w->o->queue, w->worker_id, k, jobs, &n, &err);
    /* One line per claim at debug level: ops/fleet-bench.sh reads claim
     * latency from it. */
    folio_log(FOLIO_LOG_DEBUG, "claim", "asked=%d got=%d ms=%.3f", k, n, folio_mono_ms() - start);
    if (crc) {
        char q[600];
        folio_log(FOLIO_LOG_WARN, "claim_failed", "error=%s", folio_lq(q, sizeof q, err.msg));
        if (queue_err_transient(d->c, &err))
            disp_drop_conn(d, &err);
        return FOLIO_EDB;
    }
    metrics_observe(w->o->metrics, M_CLAIM_SECONDS, NULL, (folio_mono_ms() - start) / 1000.0);
    metrics_add(w->o->metrics, M_JOBS_CLAIMED, NULL, NULL, n);
    pthread_mutex_lock(&w->mu);
    for (int i = 0, s = 0; i < n; i++) {
        while (w->slots[s].state != SLOT_FREE)
            s++;
        w->slots[s].job = jobs[i];
        w->slots[s].lease_until_ms = start + w->o->queue.lease_s * 1000.0;
        w->slots[s].started_ms = start;
        atomic_store(&w->slots[s].cancel, CANCEL_NONE);
        w->slots[s].state = SLOT_ASSIGNED;
        folio_log(FOLIO_LOG_DEBUG, "job_claimed", "job=%lld document=%lld attempt=%d", (long long)jobs[i].id,
                  (long long)jobs[i].document_id, jobs[i].attempt);
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    *free_after = nfree - n;
    return n;
}

static void disp_maintenance(struct dispatcher *d)
{
    struct worker *w = d->w;
    struct folio_err err = {0};
    int ran = 0, requeued = 0, dead = 0, deleted = 0;
    if (queue_reap(d->c, &w->o->queue, &ran, &requeued, &dead, &err) == 0) {
        if (requeued || dead)
            folio_log(FOLIO_LOG_INFO, "reaper", "requeued=%d dead=%d", requeued, dead);
        if (ran && queue_cleanup(d->c, w->o->retain_s, CLEANUP_BATCH, &deleted, &err) == 0 && deleted)
            folio_log(FOLIO_LOG_INFO, "cleanup", "deleted=%d retain_s=%.0f", deleted, w->o->retain_s);
    }
    if (err.code) {
        char q[600];
        folio_log(FOLIO_LOG_WARN, "maintenance_failed", "error=%s", folio_lq(q, sizeof q, err.msg));
        if (queue_err_transient(d->c, &err))
            disp_drop_conn(d, &err);
    }
}

static int busy_slots(struct worker *w)
{
    pthread_mutex_lock(&w->mu);
    int n = 0;
    for (int i = 0; i < w->nslots; i++)
        n += w->slots[i].state != SLOT_FREE;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* A label set the model tiers cannot score stops the worker at start, once,
 * with the label and its token count, instead of failing those tiers on
 * every document. Only that refusal: a database that is not reachable yet
 * is the OCR threads' business (they retry). */
static int check_start_labels(struct worker *w, struct folio_err *err)
{
    PGconn *c = NULL;
    struct engine_labels *ls = NULL;
    struct engine *e = NULL;
    struct folio_err le = {0};
    int rc = db_connect(w->o->conninfo, "folio-worker-labels", &c, &le);
    if (!rc)
        rc = load_label_set(c, &ls, &le);
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

int worker_run(const struct worker_opts *o, struct folio_err *err)
{
    if (o->ocr_threads < 1 || o->ocr_threads > 256 || o->batch < 1 || o->queue.lease_s < 0.5)
        return folio_err_set(err, FOLIO_EINVAL,
                             "bad worker options: ocr-threads %d (1..256), batch %d (>= 1), lease %.1f s (>= 0.5)",
                             o->ocr_threads, o->batch, o->queue.lease_s);
    ocr_process_init();

    /* Signals go to the signalfd only: block them before any thread starts
     * so every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0)
        return folio_err_set(err, FOLIO_EIO, "cannot block SIGTERM/SIGINT");
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        return folio_err_set(err, FOLIO_EIO, "signalfd: %s", strerror(errno));

    struct worker w;
    memset(&w, 0, sizeof w);
    w.o = o;
    /* The model tiers once per process (loaded, planned, pre-warmed,
     * warmed up and self-tested before any job is claimed); a GPU or
     * model problem leaves them off with the reason, never the worker. */
    if (o->model_path || o->mmproj_path) {
        struct engine_models_config mc = {.model_path = o->model_path, .mmproj_path = o->mmproj_path,
                                          .device = o->device, .allow_cpu = o->device != NULL,
                                          .max_image_tokens = o->max_image_tokens, .gate_file = o->gate_file,
                                          .release_on_device_loss = o->release_on_device_loss,
                                          .gpu_weights = o->gpu_weights,
                                          .max_batch = (uint32_t)o->gpu_batch,
                                          .max_label_tokens = o->max_label_tokens};
        if (engine_models_open(&mc, &w.models, err)) {
            close(sfd);
            return err->code ? err->code : FOLIO_ENOMEM;
        }
        char q[400], why[320], rep[2048];
        if (o->metrics && engine_models_report_json(w.models, rep, sizeof rep) == 0)
            metrics_set_engine(o->metrics, rep);
        folio_log(FOLIO_LOG_INFO, "worker_models", "paths=%s reason=%s", engine_models_paths(w.models),
                  folio_lq(q, sizeof q, (engine_models_reason(w.models, why, sizeof why), why)));
    }

    /* Enough job threads to keep the GPU fed (issue 14). Each thread holds
     * one page; while a pass runs, the threads not in it prepare the next
     * pass's pages, so with T threads passes settle at T/2 pages (measured:
     * 6 threads, --gpu-batch 4 -> passes of 3). Full passes of B need B
     * threads waiting on the GPU plus B preparing, and two more for claims
     * and completions: 2B + 2. Only when --ocr-threads was not given: an
     * explicit count is kept. */
    w.nslots = o->ocr_threads;
    if (w.models && o->ocr_threads_auto && strncmp(engine_models_paths(w.models), "vision", 6) == 0) {
        int want = 2 * (int)engine_models_max_batch(w.models) + 2;
        if (want > w.nslots)
            w.nslots = want > 256 ? 256 : want;
    }
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_cond_init(&w.hb_cv, NULL);
    pthread_cond_init(&w.done_cv, NULL);
    parse_faults(&w.fault);
    if (gethostname(w.host, sizeof w.host - 1) != 0)
        snprintf(w.host, sizeof w.host, "unknown");
    w.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    w.slots = calloc((size_t)w.nslots, sizeof *w.slots);
    struct ocr_thread *threads = calloc((size_t)w.nslots, sizeof *threads);
    /* Pages as large as --max-pixels allows take turns instead of every
     * thread holding one at once (ingest/membudget.c). */
    uint64_t dm = o->decode_memory ? o->decode_memory : worker_decode_memory_default(o->max_pixels);
    if (ingest_membudget_create(dm, &w.decode_budget, err) == 0)
        folio_log(FOLIO_LOG_INFO, "worker_decode_memory", "budget_mib=%.0f", (double)dm / (1 << 20));
    if (w.wake_fd < 0 || !w.slots || !threads || !w.decode_budget) {
        ingest_membudget_free(w.decode_budget);
        close(sfd);
        if (w.wake_fd >= 0)
            close(w.wake_fd);
        free(w.slots);
        free(threads);
        engine_models_close(w.models);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot set up %d OCR slots", w.nslots);
    }

    /* OCR engines first: a missing language is a start-up error, reported
     * before the worker takes any job. */
    int started = 0, rc = 0;
    for (int i = 0; i < w.nslots; i++) {
        threads[i].w = &w;
        threads[i].idx = i;
        threads[i].seed = (unsigned int)(getpid() * 7919 + i);
        if (pthread_create(&threads[i].tid, NULL, ocr_thread_main, &threads[i]) != 0) {
            rc = folio_err_set(err, FOLIO_EIO, "cannot start OCR thread %d of %d", i + 1, w.nslots);
            break;
        }
        started++;
    }
    pthread_mutex_lock(&w.mu);
    while (!rc && !w.init_failed && w.ready < started)
        pthread_cond_wait(&w.cv, &w.mu);
    if (!rc && w.init_failed) {
        *err = w.init_err;
        rc = err->code ? err->code : FOLIO_EINVAL;
    }
    pthread_mutex_unlock(&w.mu);
    if (!rc && w.models)
        rc = check_start_labels(&w, err);

    pthread_t hb;
    int hb_started = 0;
    if (!rc) {
        if (pthread_create(&hb, NULL, heartbeat_main, &w) != 0)
            rc = folio_err_set(err, FOLIO_EIO, "cannot start the heartbeat thread");
        else
            hb_started = 1;
    }

    struct dispatcher d = {.w = &w, .connect_backoff_ms = 200, .listen_backoff_ms = 200,
                           .seed = (unsigned int)getpid() * 2654435761u};
    int stopping = 0;
    double grace_end = 0, next_maint = 0, next_poll = 0;
    int claim_now = 1;
    if (!rc)
        folio_log(FOLIO_LOG_INFO, "worker_started",
                  "ocr_threads=%d gpu_batch=%u claim_batch=%d lease_s=%.1f grace_s=%.1f model_key=%s pooler=%s listen=%s",
                  w.nslots, w.models ? engine_models_max_batch(w.models) : 0, o->batch, o->queue.lease_s, o->grace_s, o->queue.model_key,
                  o->pooler == DB_POOLER_TRANSACTION ? "transaction" : "none",
                  o->listen_conninfo ? "listen-db" : o->pooler == DB_POOLER_TRANSACTION ? "off" : "db");
    struct service_watchdog wd;
    service_watchdog_init(&wd);
    if (!rc)
        service_ready(w.models ? engine_models_paths(w.models) : "ocr+rules");
    while (!rc) {
        double now = folio_mono_ms();
        service_watchdog_tick(&wd);
        metrics_set_ready(o->metrics, 1, w.models ? engine_models_paths(w.models) : "ocr+rules");
        metrics_set(o->metrics, M_JOBS_IN_FLIGHT, busy_slots(&w));
        if (w.models)
            metrics_set(o->metrics, M_PIPELINES_AFTER_SEAL, (double)engine_models_pipelines_after_seal(w.models));
        if (!d.c)
            disp_connect(&d);
        if (disp_listen(&d))
            claim_now = 1;
        if (stopping) {
            if (busy_slots(&w) == 0)
                break;
            if (now >= grace_end) {
                pthread_mutex_lock(&w.mu);
                for (int i = 0; i < w.nslots; i++)
                    if (w.slots[i].state != SLOT_FREE && atomic_load(&w.slots[i].cancel) == CANCEL_NONE)
                        atomic_store(&w.slots[i].cancel, CANCEL_SHUTDOWN);
                pthread_mutex_unlock(&w.mu);
            }
        }
        if (d.c && w.worker_id && now >= next_maint) {
            disp_maintenance(&d);
            next_maint = now + jitter(&d.seed, o->reap_s * 1000.0);
        }
        if (d.c && w.worker_id && !stopping && (claim_now || now >= next_poll)) {
            int free_after = 0;
            int n = disp_claim(&d, &free_after);
            /* A full batch means more may be waiting: go again at once. */
            claim_now = n > 0 && free_after > 0;
            if (!claim_now)
                next_poll = now + jitter(&d.seed, o->poll_s * 1000.0);
        }

        double wait = claim_now ? 0 : next_poll - folio_mono_ms();
        if (!d.c)
            wait = d.next_connect_ms - folio_mono_ms();
        if (next_maint - folio_mono_ms() < wait)
            wait = next_maint - folio_mono_ms();
        if (o->listen_conninfo && !d.lc && d.next_listen_ms - folio_mono_ms() < wait)
            wait = d.next_listen_ms - folio_mono_ms();
        if (stopping)
            wait = wait > 50 ? 50 : wait;
        if (wait > service_watchdog_max_wait_ms(&wd))
            wait = service_watchdog_max_wait_ms(&wd);
        if (wait < 0)
            wait = 0;
        struct pollfd pf[4] = {{sfd, POLLIN, 0}, {w.wake_fd, POLLIN, 0}, {d.c ? PQsocket(d.c) : -1, POLLIN, 0},
                               {d.lc ? PQsocket(d.lc) : -1, POLLIN, 0}};
        int pr = poll(pf, 4, (int)wait);
        if (pr < 0 && errno != EINTR) {
            rc = folio_err_set(err, FOLIO_EIO, "poll: %s", strerror(errno));
            break;
        }
        if (pr > 0 && (pf[0].revents & POLLIN)) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (stopping) {
                    folio_log(FOLIO_LOG_WARN, "worker_exit_now", "signal=%u msg=\"second signal; leases cover in-flight jobs\"",
                              si.ssi_signo);
                    _exit(FOLIO_EXIT_FAIL);
                }
                stopping = 1;
                atomic_store(&w.draining, 1);
                service_stopping();
                grace_end = folio_mono_ms() + o->grace_s * 1000.0;
                folio_log(FOLIO_LOG_INFO, "worker_draining", "signal=%u in_flight=%d grace_s=%.1f", si.ssi_signo,
                          busy_slots(&w), o->grace_s);
                if (d.c && w.worker_id) {
                    struct queue_worker_stats st;
                    stats_now(&w, &st, "draining");
                    unsigned char dummy;
                    struct folio_err e2 = {0};
                    queue_heartbeat(d.c, &o->queue, w.worker_id, &st, NULL, NULL, 0, &dummy, &e2);
                }
            }
        }
        if (pr > 0 && (pf[1].revents & POLLIN)) {
            uint64_t v;
            ssize_t rr = read(w.wake_fd, &v, sizeof v);
            (void)rr;
            claim_now = 1; /* a slot freed up */
        }
        if (d.c && pr > 0 && (pf[2].revents & (POLLIN | POLLERR | POLLHUP))) {
            int nn = queue_drain_notifies(d.c);
            if (nn < 0 || db_conn_broken(d.c))
                disp_drop_conn(&d, NULL);
            else if (nn > 0)
                claim_now = 1;
        }
        if (d.lc && pr > 0 && (pf[3].revents & (POLLIN | POLLERR | POLLHUP))) {
            int nn = queue_drain_notifies(d.lc);
            if (nn < 0 || db_conn_broken(d.lc)) {
                PQfinish(d.lc);
                d.lc = NULL;
                d.next_listen_ms = folio_mono_ms() + jitter(&d.seed, d.listen_backoff_ms);
                folio_log(FOLIO_LOG_WARN, "listen_lost", "msg=\"polling until it is back\"");
            } else if (nn > 0) {
                claim_now = 1;
            }
        }
    }

    /* Stop threads (all slots are free, or start-up failed). */
    pthread_mutex_lock(&w.mu);
    w.quit = 1;
    pthread_cond_broadcast(&w.cv);
    pthread_cond_broadcast(&w.hb_cv);
    pthread_mutex_unlock(&w.mu);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i].tid, NULL);
    if (hb_started)
        pthread_join(hb, NULL);

    if (!rc && w.worker_id) {
        struct queue_worker_stats st;
        stats_now(&w, &st, "stopped");
        struct folio_err e2 = {0};
        for (int tries = 0; tries < 5; tries++) {
            if (!d.c) {
                d.next_connect_ms = 0;
                disp_connect(&d);
            }
            if (d.c && queue_worker_stopped(d.c, w.worker_id, &st, &e2) == 0)
                break;
            if (d.c && queue_err_transient(d.c, &e2))
                disp_drop_conn(&d, &e2);
            folio_sleep_ms(200);
        }
        folio_log(FOLIO_LOG_INFO, "worker_stopped", "worker=%lld done=%lld failed=%lld lost=%lld", (long long)w.worker_id,
                  (long long)st.done, (long long)st.failed, (long long)st.lost);
    }
    if (d.c)
        PQfinish(d.c);
    if (d.lc)
        PQfinish(d.lc);
    if (w.models) {
        /* how full the GPU passes were: pages / passes is the mean batch */
        struct engine_gpu_stats gs;
        engine_models_gpu_stats(w.models, &gs);
        folio_log(FOLIO_LOG_INFO, "worker_gpu", "passes=%llu pages=%llu splits=%llu max_batch=%u after_seal=%llu",
                  gs.passes, gs.pages, gs.splits, gs.max_batch, engine_models_pipelines_after_seal(w.models));
    }
    engine_models_close(w.models);
    ingest_membudget_free(w.decode_budget);
    close(sfd);
    close(w.wake_fd);
    free(w.slots);
    free(threads);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    pthread_cond_destroy(&w.hb_cv);
    pthread_cond_destroy(&w.done_cv);
    return rc;
}
