/*
 * pipeline/queue — the queue protocol over PostgreSQL: claim, heartbeat,
 * complete, fail, release, reap, cleanup, the worker registry and
 * document bytes (pipeline/db/queue.c).
 */
#ifndef FOLIO_PIPELINE_QUEUE_H
#define FOLIO_PIPELINE_QUEUE_H

#include "pipeline/db/db.h"

/* ---- queue protocol (pipeline/db/queue.c; docs/DESIGN.md §4, docs/reference/pg-queue.md) ----
 * Every statement is autocommit and short: ownership of a running job lives
 * in its lease columns, never in an open transaction. All times are the
 * database's (now() plus intervals); a worker never sends a timestamp. */
#define QUEUE_NOTIFY_CHANNEL "folio_jobs"

struct queue_cfg {
    const char *model_key;   /* jobs served; "default" when NULL */
    double lease_s;          /* lease granted at claim and by each heartbeat */
    int max_attempts;        /* > 0 overrides each job's own max_attempts */
    double retry_base_s;     /* backoff after attempt n: base * 2^(n-1), ±50 % jitter */
    double retry_max_s;      /* backoff cap (before jitter) */
};
void queue_cfg_default(struct queue_cfg *q);

struct queue_job {
    int64_t id, document_id;
    char token[37];          /* lease token of this claim (uuid text) */
    int64_t worker_id;       /* who claimed it (0: none); fail and release
                                name it, the server checks it is this login's */
    int attempt, max_attempts;
    int pages;
    char sha256[65];         /* hex, for logs and fault injection */
    char media_type[32];
};

/* Claims up to k runnable jobs: FOR UPDATE SKIP LOCKED in claim-index order,
 * state running, attempts + 1, a fresh random token, lease from now(). */
int queue_claim(PGconn *c, const struct queue_cfg *q, int64_t worker_id, int k,
                struct queue_job *out, int *n, struct folio_err *err);

/* Extends the leases of the given (id, token) pairs and refreshes the
 * worker row (heartbeat time and counters) in one statement. alive[i] is
 * set to 1 for each pair still owned, 0 for a lost lease. */
struct queue_worker_stats {
    int64_t done, failed, lost;
    const char *state; /* workers.state; NULL keeps it */
    const char *paths_array;         /* workers.paths as a text[] literal; NULL keeps it */
    const char *paths_disabled_json; /* workers.paths_disabled; NULL keeps it */
};
int queue_heartbeat(PGconn *c, const struct queue_cfg *q, int64_t worker_id,
                    const struct queue_worker_stats *st, const int64_t *ids,
                    const char (*tokens)[37], int n, unsigned char *alive, struct folio_err *err);

struct queue_result {
    const char *label;
    double confidence;
    int needs_review;
    const char *scores_json;  /* {"label": p, ...} */
    const char *engine_path;  /* vision | ocr+lm | ocr+rules */
    const char *fallback_reason;
    const char *ocr_text;     /* NULL = none */
    double ocr_confidence;    /* 0..100; < 0 = NULL */
    int ocr_orientation;      /* < 0 = NULL */
    const char *ocr_pages_json; /* NULL = none */
    const char *timings_json; /* {"stage_ms": ...} */
    const char *review_reason; /* why needs_review is set; NULL = none */
};
/* Token-checked completion in one statement (one transaction): the job row
 * is updated to done first and the result inserted only if that matched;
 * ON CONFLICT (document, model key) DO NOTHING. *accepted = 0 means the lease
 * was lost and nothing was written. Safe to retry after a lost connection:
 * a result already written under this token reports accepted = 1. */
int queue_complete(PGconn *c, const struct queue_job *j, int64_t worker_id,
                   const struct queue_result *r, int *accepted, struct folio_err *err);

/* Several completions in one round trip and one transaction (libpq
 * pipeline: BEGIN, one queue_complete statement per job, COMMIT, sync),
 * each with queue_complete's token check and accepted[i]. Any error
 * rolls the whole batch back: then every accepted[i] is 0 and the caller
 * completes the jobs one by one (so one bad result cannot sink the
 * others, and a transient error is retried per job as usual). */
int queue_complete_many(PGconn *c, const struct queue_job *const *jobs, int64_t worker_id,
                        const struct queue_result *const *res, int n, int *accepted, struct folio_err *err);

/* Token-checked failure: back to queued after exponential backoff with
 * jitter, or dead at max attempts; the error text is kept in last_error.
 * *state_out gets "queued", "dead" or "lost" (token no longer ours). */
int queue_fail(PGconn *c, const struct queue_cfg *q, const struct queue_job *j, const char *error,
               char state_out[8], struct folio_err *err);

/* Token-checked release on shutdown: queued again at once, attempt not
 * counted. *released = 0 when the lease was already gone. */
int queue_release(PGconn *c, const struct queue_job *j, int *released, struct folio_err *err);

/* Re-queues running jobs whose lease expired (dead at max attempts), in one
 * statement guarded by a transaction-scoped advisory lock so concurrent
 * reapers do not fight. *ran = 0 when another worker held the guard. */
int queue_reap(PGconn *c, const struct queue_cfg *q, int *ran, int *requeued, int *dead,
               struct folio_err *err);

/* Deletes up to `limit` done jobs finished more than retain_s ago (results
 * are kept; dead jobs stay as the dead-letter list). Same guard style. */
int queue_cleanup(PGconn *c, double retain_s, int limit, int *deleted, struct folio_err *err);

/* True when a failed call should be retried on a new connection: the
 * connection is gone, the error carries no SQLSTATE (libpq lost the
 * server mid-statement), or its SQLSTATE is transient
 * (db_sqlstate_transient). */
int queue_err_transient(PGconn *c, const struct folio_err *err);

/* LISTEN on QUEUE_NOTIFY_CHANNEL. */
int queue_listen(PGconn *c, struct folio_err *err);
/* Reads pending notifications without blocking; returns how many arrived,
 * or FOLIO_EDB when the connection broke. */
int queue_drain_notifies(PGconn *c);

/* Worker registry: one row per process lifetime (never reused: a restarted
 * process is a new worker, so orphans stay visible). */
struct queue_worker_info {
    const char *host;
    int pid;
    const char *model_key;
    const char *state;         /* "ocr-only", "ready", ... */
    const char *device;        /* NULL = none */
    const char *paths_array;   /* PostgreSQL array literal, e.g. {ocr+rules} */
    const char *paths_disabled_json;
    const char *detail_json;
};
int queue_worker_register(PGconn *c, const struct queue_worker_info *w, int64_t *id,
                          struct folio_err *err);
int queue_worker_stopped(PGconn *c, int64_t id, const struct queue_worker_stats *st,
                         struct folio_err *err);

/* Document bytes for a job (blobs.data), malloc'd. */
int queue_fetch_blob(PGconn *c, int64_t document_id, uint8_t **data, size_t *len,
                     struct folio_err *err);
/* The same from wherever documents.blob_store says the bytes are: folio.blobs,
 * or the fs store `store` (pipeline/db/blobstore.h; NULL = none configured, a
 * clear error for an fs document). A missing or corrupt blob is an error
 * about this document (FOLIO_EIO / FOLIO_EFORMAT, never FOLIO_EDB), so the
 * job fails with the reason and the worker goes on. FOLIO_EUNSUPPORTED: the document is
 * in an fs store and this process has none, an error about the worker (it
 * releases the job without spending the attempt). */
struct blobstore;
int queue_fetch_document(PGconn *c, const struct blobstore *store, int64_t document_id, uint8_t **data,
                         size_t *len, struct folio_err *err);

#endif
