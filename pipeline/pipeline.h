/*
 * pipeline — PostgreSQL access, migrations, the queue protocol, the worker
 * loop and the `folio` CLI. The only module that includes libpq.
 */
#ifndef FOLIO_PIPELINE_H
#define FOLIO_PIPELINE_H

#include "common/common.h"
#include "common/json.h"

#include <libpq-fe.h>

/* CLI exit codes (documented in README and `folio --help`). */
enum { FOLIO_EXIT_OK = 0, FOLIO_EXIT_FAIL = 1, FOLIO_EXIT_USAGE = 2 };

/* ---- database ---- */
/* The conninfo in force: --db value if given, else $FOLIO_DB, else "" (libpq
 * then uses its own PG* environment defaults). */
const char *db_conninfo(const char *flag_value);
/* Connects and sets the session up for folio (application_name, UTC,
 * search_path untouched). On failure fills err with libpq's message and a
 * hint naming where the conninfo came from. */
int db_connect(const char *conninfo, const char *app_name, PGconn **out,
               struct folio_err *err);
/* Connection pooler in front of the server. TRANSACTION: consecutive
 * transactions may run on different server sessions (PgBouncer
 * pool_mode = transaction), so nothing may rely on session state. */
enum db_pooler { DB_POOLER_NONE = 0, DB_POOLER_TRANSACTION = 1 };
/* "transaction" | "none" | "session" (= none) | NULL/"" (= none). */
int db_pooler_parse(const char *s, enum db_pooler *out, struct folio_err *err);
/* --pooler value if given (non-NULL), else $FOLIO_DB_POOLER, else none. */
int db_pooler_resolve(const char *flag_value, enum db_pooler *out, struct folio_err *err);
/* db_connect with a pooler mode; a TRANSACTION connection is marked so that
 * db_pooled() is true for it. */
int db_open(const char *conninfo, enum db_pooler pooler, const char *app_name, PGconn **out,
            struct folio_err *err);
/* True for a connection opened in transaction-pooler mode: send no named
 * prepared statements, no LISTEN, no session SET or advisory session lock. */
int db_pooled(const PGconn *c);
/* Runs a statement that returns no rows (or ignores them); checks status. */
int db_exec(PGconn *c, const char *sql, struct folio_err *err);
/* Fills err from a failed PGresult (message, detail, hint, SQLSTATE) and
 * clears the result. Returns FOLIO_EDB. */
int db_err_from_result(PGresult *r, PGconn *c, const char *what, struct folio_err *err);
/* True when the connection is gone (server restart, network): callers then
 * reconnect with backoff instead of failing the job. */
int db_conn_broken(PGconn *c);
/* Replaces the password of conninfo (password=..., quoted or not, or a
 * URI's user:password@) wherever it appears in msg (cap bytes) by "***":
 * libpq quotes a malformed conninfo back in its error text. */
void db_scrub(char *msg, size_t cap, const char *conninfo);
/* A --db CONNINFO carrying a password moves to $FOLIO_DB (what
 * db_conninfo falls back to): the argument's bytes are overwritten, so
 * /proc/PID/cmdline no longer shows the password, and the pair is
 * removed from argv (so a re-exec does not carry it). Returns the new
 * argc. Call first thing in main. A password file (libpq's passfile= or
 * $PGPASSFILE, ~/.pgpass) keeps it off both. */
int db_hide_password_arg(int argc, char **argv);
/* True for a SQLSTATE that says "the server cannot do it now", not "this
 * statement or its data is wrong": connection and shutdown classes,
 * statement and lock timeouts, serialization failures and deadlocks,
 * read-only transactions (a failover in progress), insufficient resources
 * (too many connections, disk full, out of memory), system and I/O errors.
 * Retrying such an error must never use up a document's attempts. */
int db_sqlstate_transient(const char *sqlstate);

/* ---- migrations ---- */
struct migrate_opts {
    const char *dir; /* read NNN_*.sql from here; NULL = the embedded set */
    int dry_run;     /* list what would be applied, change nothing */
};
/* Applies pending migrations in version order, each in its own transaction,
 * recorded in folio.schema_migrations. Concurrent runs serialise on an
 * advisory lock. Re-running applies nothing. *applied gets the count. */
int migrate_run(PGconn *c, const struct migrate_opts *o, int *applied, struct folio_err *err);

/* ---- subcommands (each returns a FOLIO_EXIT_* code) ---- */
int cmd_migrate(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_jobs(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_correct(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_reclassify(int argc, char **argv);
int cmd_labels(int argc, char **argv);
int cmd_eval(int argc, char **argv);

/* ---- benchmarks: `folio bench SUBJECT`, argv[0] is the subject ---- */
int bench_ingest(int argc, char **argv);
int bench_queue(int argc, char **argv);
int bench_ocr(int argc, char **argv);
int bench_ops(int argc, char **argv);
int bench_tokenizer(int argc, char **argv);
/* Hostile texts of about n bytes for the tokenizer's scaling case, shared by
 * the bench and tests/unit/test_tokenizer.c (malloc'd, *len set; NULL when
 * out of memory). */
enum { TOK_HOSTILE_MARKS, TOK_HOSTILE_SPACES, TOK_HOSTILE_PUNCT, TOK_HOSTILE_WORD, TOK_HOSTILE_N };
const char *bench_tok_hostile_name(int kind);
char *bench_tok_hostile(int kind, size_t n, size_t *len);
int bench_engine(int argc, char **argv);
int bench_pdf(int argc, char **argv);
/* A 300-dpi-like office scan as a colour JPEG (bench_ingest.c; bench pdf
 * wraps the same pages in PDFs). malloc'd, NULL on failure. */
uint8_t *bench_scan_page_jpeg(int w, int h, uint32_t seed, size_t *len);
/* The PDFs of bench pdf, ingest and ocr (bench_pdf.c), in memory: scan
 * pages (one JPEG each: the given ones cycled, else bench_scan_page_jpeg's)
 * or born-digital text (Helvetica lines: the given ones cycled, else
 * invoice lines). A comment of BENCH_PDF_TAG_LEN bytes (newline included)
 * at BENCH_PDF_TAG_AT may be overwritten to make copies unique. */
#define BENCH_PDF_TAG_AT 9
#define BENCH_PDF_TAG_LEN 48
struct bench_pdf_spec {
    int pages, scan;
    uint8_t *const *jpeg;
    const size_t *jpeg_len;
    int njpeg, jpeg_w, jpeg_h, jpeg_gray;
    const char *const *lines;
    int nlines;
};
int bench_pdf_bytes(const struct bench_pdf_spec *sp, uint8_t **out, size_t *out_len, struct folio_err *err);
int bench_accuracy(int argc, char **argv);

/* Prints "folio CMD: MSG" plus "try 'folio CMD --help'"; returns FOLIO_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* db_connect for a command: --db value (or $FOLIO_DB ...); on failure prints
 * the error and returns FOLIO_EXIT_FAIL, else FOLIO_EXIT_OK. */
int cli_connect(const char *db_flag, const char *app_name, PGconn **out);
/* A number in min..max (inclusive, no trailing junk) into *out; -1 if not. */
int cli_parse_double(const char *s, double min, double max, double *out);
/* FOLIO_EINVAL naming the flag when path cannot be read or is not a GGUF file. */
int cli_check_gguf(const char *flag, const char *path, struct folio_err *err);

/* ---- queue protocol (pipeline/queue.c; DESIGN.md §4, reference/pg-queue.md) ----
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
 * or the fs store `store` (pipeline/blobstore.h; NULL = none configured, a
 * clear error for an fs document). A missing or corrupt blob is an error
 * about this document (FOLIO_EIO / FOLIO_EFORMAT, never FOLIO_EDB), so the
 * job fails with the reason and the worker goes on. */
struct blobstore;
int queue_fetch_document(PGconn *c, const struct blobstore *store, int64_t document_id, uint8_t **data,
                         size_t *len, struct folio_err *err);

/* ---- worker (pipeline/worker.c) ---- */
struct worker_opts {
    const char *conninfo;
    struct queue_cfg queue;
    enum db_pooler pooler;      /* every connection to conninfo */
    const char *listen_conninfo; /* NULL: LISTEN on the main connection (none when pooled) */
    int batch;            /* --claim-batch: jobs claimed in one statement (capped by free
                           * OCR threads); > 1 also groups result writes */
    double grace_s;       /* SIGTERM: time to finish in-flight jobs */
    double retain_s;      /* delete done jobs older than this */
    double poll_s;        /* idle poll interval (jittered) next to LISTEN */
    double reap_s;        /* reaper/cleanup period (jittered) */
    const char *ocr_lang;
    int ocr_threads;
    int ocr_threads_auto;       /* not given: raised to gpu_batch + 2 with vision on */
    int gpu_batch;              /* --gpu-batch: pages per GPU pass, 0 = the engine's choice */
    uint32_t max_label_tokens;  /* --max-label-tokens: 0 = the engine's 16 */
    int ocr_max_pages;
    int page_deadline_ms;
    size_t max_page_text, max_doc_text; /* --max-text-bytes PAGE,DOC; 0 = doctext.h defaults */
    int max_pages_classified;  /* pages classified per document (default 20) */
    int pdf_page_ms, pdf_memory_mb; /* PDF helper limits (0 = ingest's defaults) */
    uint64_t max_pixels;       /* per page; the same default as ingest's --max-pixels */
    uint64_t decode_memory;    /* --decode-memory: decoded-page budget; 0 = worker_decode_memory_default */
    double job_deadline_s;     /* a job's time budget; 0 = derived from the page deadline */
    const char *model_path, *mmproj_path;
    const char *device;        /* Vulkan device selector; naming one allows CPU devices */
    const char *gate_file;     /* extra driver-gate rules */
    uint32_t max_image_tokens; /* vision plan, 0 = 1600 */
    int release_on_device_loss; /* --on-device-loss release: requeue instead of OCR fallback */
    int gpu_weights;            /* --gpu-weights: engine_gpu_weights_parse */
    struct metrics *metrics;    /* --metrics-listen (pipeline/metrics.h); NULL = off */
    double osd_min_conf;        /* --osd-min-conf: OSD confidence a page turn needs */
    double review_below;        /* --review-below P; < 0 = the stored/default policy */
    int retrain_after;          /* --retrain-after N new corrections (0 = never) */
    const struct blobstore *blobs; /* --blob-store (pipeline/blobstore.h); NULL = pg */
};
void worker_opts_default(struct worker_opts *o);
/* The decode budget when --decode-memory is not given: one page at the
 * pixel limit decoded as RGB, plus room for ordinary pages beside it. */
uint64_t worker_decode_memory_default(uint64_t max_pixels);
/* Runs until SIGTERM/SIGINT (drains, releases, deregisters, returns 0). A
 * second signal exits the process at once. Transient database errors never
 * end it; only start-up errors (bad options, no OCR data) do. */
int worker_run(const struct worker_opts *o, struct folio_err *err);

/* Debian's libtesseract uses OpenMP, whose runtime reads OMP_THREAD_LIMIT
 * once, when the library is loaded: before main. Setting it later has no
 * effect, and OCR then costs ~3x the CPU per page (measured with `folio
 * bench ocr`). When it is unset, this sets it to 1 and re-executes the
 * program with the same arguments; it returns only when no re-exec was
 * needed (or exec failed, which is logged). Call first thing in main for
 * subcommands that OCR. */
void worker_ensure_omp_limit(char **argv);

#endif
