/*
 * Private to the worker (not part of worker.h): the state its threads
 * share and the calls between its parts. The worker is split the way
 * River splits its client, one concern per file:
 *
 *   worker.c           worker_run: set-up, start, the dispatcher's run,
 *                      shutdown (a sequence of steps)
 *   worker_dispatch.c  the dispatcher: connection, registration, LISTEN,
 *                      claim, reaper/cleanup, signals, the poll loop
 *   worker_exec.c      an OCR thread and one job's stages: fetch, classify,
 *                      then the outcome (done, failed, released, dropped)
 *   worker_complete.c  writing a result: the result JSON, group commit
 *                      (write_group) and complete_job
 *   worker_maint.c     the heartbeat thread (lease renewal, self-fencing,
 *                      the workers row), stats and label/learned refresh
 *   worker_shared.c    what the parts share (jitter, budget, slot count,
 *                      wake-up, reconnect and transient waits): below them
 *
 * Each file calls only files listed after it (worker.c the parts, exec
 * complete and maint, dispatch maint), never back up: cmake/circles.py
 * fails the build on a circle.
 *
 * Locking: every field marked "guarded by mu" is read and written with
 * worker.mu held; the _Atomic ones are read without it.
 */
#ifndef FOLIO_PIPELINE_WORKER_INTERNAL_H
#define FOLIO_PIPELINE_WORKER_INTERNAL_H

#include "common/lockcheck.h"
#include "pipeline/db/db.h"
#include "pipeline/db/queue.h"
#include "pipeline/worker/worker.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>

struct engine;
struct engine_labels;
struct engine_learned;
struct engine_models;
struct ingest_membudget;
struct ocr_engine;

/* A slot's state moves FREE -> ASSIGNED (the dispatcher hands it a job)
 * -> BUSY (its OCR thread runs the job) -> FREE, always with worker.mu
 * held (worker_slot_move). */
enum { SLOT_FREE, SLOT_ASSIGNED, SLOT_BUSY };
enum { CANCEL_NONE = 0, CANCEL_LOST = 1, CANCEL_SHUTDOWN = 2, CANCEL_BUDGET = 3 };

struct slot {
    int state;               /* guarded by worker.mu */
    struct queue_job job;    /* valid while not FREE */
    double lease_until_ms;   /* monotonic; guarded by worker.mu */
    double started_ms;       /* monotonic claim time, for the job's time budget */
    _Atomic int cancel;      /* CANCEL_*: read by Tesseract's cancel callback */
};

struct worker_fault {
    char crash_prefix[65];   /* crash_on_document:<sha256 prefix> */
    int sleep_ms;            /* sleep_ms:<n> before OCR, cancellable */
    int slow_results_ms;     /* slow_results_ms:<n>: a result write's round trip takes n ms longer */
};

struct done_entry; /* worker_complete.c */

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
    _Atomic int misconfigured; /* a document's store is not this worker's: no more claims */
    int wake_fd;
    struct worker_fault fault;
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
    int retrain_refused; /* this login may not store models: retrain off until restart */
};

/* The dispatcher's connections (worker_dispatch.c); lives in worker_run. */
struct dispatcher {
    struct worker *w;
    PGconn *c;
    double next_connect_ms, connect_backoff_ms;
    PGconn *lc; /* --listen-db: a direct connection that only LISTENs */
    double next_listen_ms, listen_backoff_ms;
    unsigned int seed;
};

/* What the workers row says about the paths, as they are now: written at
 * registration and refreshed by every heartbeat, so a lost GPU, its
 * re-open and a give-up all show (paths, paths_disabled, state). */
struct worker_paths {
    char array[64];      /* text[] literal: {vision,ocr+lm,ocr+rules} */
    char disabled[1000]; /* jsonb: {"vision": "why", ...} */
    const char *state;   /* ready: a model tier runs or is being re-opened;
                          * ocr-only: none configured, or off until restart */
};

/* ---- shared helpers (worker_shared.c: below every part) ---- */

/* v scaled by a random factor in [0.5, 1.5): spreads a fleet's retries
 * and polls so they do not march in step. */
double worker_jitter(unsigned int *seed, double v);
/* The job time budget in ms (--job-deadline or derived); 0 = none. */
double worker_job_budget_ms(const struct worker_opts *o);
/* Pokes the dispatcher's poll (a slot freed up). */
void worker_wake_dispatcher(struct worker *w);
/* The number of slots not FREE (takes mu). */
int worker_busy_slots(struct worker *w);

/* Under mu: moves slot s from state `from` to `to` (debug builds check
 * both the lock and the state it leaves). */
static inline void worker_slot_move(struct worker *w, struct slot *s, int from, int to)
{
    FOLIO_MU_HELD(&w->mu);
    assert(s >= w->slots && s < w->slots + w->nslots && s->state == from);
    (void)w;
    (void)from;
    s->state = to;
}

static inline int worker_job_cancelled(struct slot *s) { return atomic_load(&s->cancel) != CANCEL_NONE; }

/* Connects (or re-connects) with jittered backoff until connected, the
 * lease of the slot's job runs out, or the job is cancelled. */
int worker_ensure_conn(struct ocr_thread *t, struct slot *s);
/* After a transient error from a working server: waits a jittered,
 * doubling backoff. Nonzero when the step should stop retrying. */
int worker_transient_wait(struct ocr_thread *t, struct slot *s, const struct folio_err *err, double first_ms,
                          double *backoff);

/* ---- the dispatcher (worker_dispatch.c) ---- */

void worker_disp_init(struct dispatcher *d, struct worker *w);
/* Runs until every slot is free after a signal (0) or poll fails (error).
 * sfd is the signalfd of SIGTERM/SIGINT. */
int worker_disp_run(struct dispatcher *d, int sfd, struct folio_err *err);
/* Marks the workers row stopped (a few tries across reconnects), logs the
 * totals and closes the dispatcher's connections. */
void worker_disp_finish(struct dispatcher *d, int mark_stopped);

/* ---- an OCR thread and its jobs (worker_exec.c) ---- */

void *worker_ocr_thread_main(void *arg);

/* Retries a database step across reconnects until the lease runs out.
 * Leaves rcvar 0, the step's own (non-transient) error, or FOLIO_EDB when
 * the lease ran out first. A retried completion is safe: queue_complete
 * recognises a result its lost COMMIT acknowledgement already landed. */
#define WITH_DB_RETRY(t, s, rcvar, errp, call)                                              \
    do {                                                                                    \
        double rt_first_ = folio_mono_ms(), rt_backoff_ = 100;                              \
        for (;;) {                                                                          \
            if (((rcvar) = worker_ensure_conn((t), (s))) != 0)                              \
                break;                                                                      \
            (rcvar) = (call);                                                               \
            if ((rcvar) == 0 || !queue_err_transient((t)->conn, (errp)))                    \
                break;                                                                      \
            if (!db_conn_broken((t)->conn) &&                                               \
                worker_transient_wait((t), (s), (errp), rt_first_, &rt_backoff_))           \
                break;                                                                      \
            PQfinish((t)->conn);                                                            \
            (t)->conn = NULL;                                                               \
        }                                                                                   \
    } while (0)

/* ---- writing a result (worker_complete.c) ---- */

/* Each records one outcome of the slot's job: its queue call, counter,
 * metric and log line. qn is the document's name, quoted for logs. */
struct engine_result;
struct doc_classified;
/* Builds the result (scores, timings, pages JSON) and writes it, then
 * counts it done, failed (the server refused the result) or lost (the
 * lease is no longer ours). t0: the job's start; err: the job's error
 * slot, reused for the write. */
void worker_finish_done(struct ocr_thread *t, struct slot *s, const struct doc_classified *dc, double fetch_ms,
                        double t0, const char *qn, struct folio_err *err);
/* A failed attempt (err says why; cancel == CANCEL_BUDGET: over budget). */
void worker_finish_failed(struct ocr_thread *t, struct slot *s, const struct engine_result *er,
                          const struct folio_err *err, int cancel, const char *qn);
/* Back to the queue, attempt not counted (shutdown, or a lost GPU). */
void worker_finish_released(struct ocr_thread *t, struct slot *s, const struct engine_result *er, int device_lost,
                            const char *qn);
/* Back to the queue, attempt not counted, because this worker cannot read
 * the document's store: it claims no more and reports not ready (why). */
void worker_finish_misconfigured(struct ocr_thread *t, struct slot *s, const struct folio_err *why, const char *qn);
/* Nothing written: the lease is lost or the database was unreachable for
 * a whole lease, so someone else may own the job now. */
void worker_finish_dropped(struct ocr_thread *t, struct slot *s, int lease_lost, const char *qn);

/* ---- maintenance (worker_maint.c) ---- */

void *worker_heartbeat_main(void *arg);
/* (Re)loads the active labels (and the learned model) at most every
 * WORKER_LABELS_REFRESH_MS on the thread's connection. */
int worker_refresh_labels(struct ocr_thread *t, struct folio_err *err);
/* A label set the model tiers cannot score stops the worker at start
 * (FOLIO_ELIMIT); anything else is left to the OCR threads. */
int worker_check_start_labels(struct worker *w, struct folio_err *err);
void worker_paths_now(struct worker *w, struct worker_paths *wp);
void worker_stats_now(struct worker *w, struct queue_worker_stats *st, const char *state);

#endif
