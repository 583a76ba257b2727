/*
 * The queue protocol (docs/DESIGN.md §4; docs/reference/pg-queue.md §4 for why).
 *
 * Every call is one autocommit statement. Nothing is held open while a
 * document is OCR'd: who owns a running job is written in its lease columns
 * (lease_token, lease_expires_at), and every write a worker makes about a
 * job names the token it was given at claim. A token that no longer matches
 * (the reaper re-queued the job, another worker claimed it) makes the write
 * a no-op, which is how a late worker's output is dropped.
 *
 * Since schema 012 every write runs inside an owner's SECURITY DEFINER
 * function (folio.claim_jobs, heartbeat_jobs, complete_job, fail_job,
 * release_job, reap_jobs, cleanup_jobs, worker_register, worker_stopped),
 * which also checks that the worker id is one this login registered: a
 * folio_worker login has no write on the queue tables and cannot read a
 * token, so it can forge nothing (tests/pg/test_roles.c).
 *
 * Completion is one statement with two data-modifying CTEs: the token-
 * checked UPDATE to done runs first and the result INSERT selects from its
 * RETURNING, so the INSERT happens only when the UPDATE matched, and both
 * commit or neither does. That is the "UPDATE first, 0 rows → discard"
 * transaction of the design in one round trip; ON CONFLICT DO NOTHING on
 * (document, model key) keeps the result unique whatever the queue does.
 *
 * Attempts are counted at claim, so a document that kills its worker uses up
 * an attempt each time and the reaper marks it dead at max_attempts instead
 * of letting it crash-loop the fleet. A release on shutdown gives the
 * attempt back. Per-job statements are prepared once per connection (see
 * exec_hot); everything else is unnamed PQexecParams.
 */
#include "pipeline/db/blobstore.h"
#include "pipeline/db/db.h"
#include "pipeline/db/queue.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

/* Advisory lock keys (transaction-scoped): 'folio' + purpose. */
#define REAPER_LOCK_KEY "7380041739620353"
#define CLEANUP_LOCK_KEY "7380041739620354"

void queue_cfg_default(struct queue_cfg *q)
{
    memset(q, 0, sizeof *q);
    q->model_key = "default";
    q->lease_s = 60;
    q->retry_base_s = 10;
    q->retry_max_s = 600;
}

static const char *mk(const struct queue_cfg *q) { return q->model_key ? q->model_key : "default"; }

static PGresult *exec(PGconn *c, const char *sql, int n, const char *const *vals)
{
    return PQexecParams(c, sql, n, NULL, vals, NULL, NULL, 0);
}

/* Runs a hot-path statement as a named prepared statement, preparing it on
 * this connection the first time (the server answers 26000 for an unknown
 * name), so nothing is tracked client-side and a reconnect just prepares
 * again. Parse and plan then happen once per connection instead of once
 * per job. A connection in transaction-pooler mode (db_pooled: PgBouncer
 * before 1.21 has no prepared statements in that mode, and the SET below
 * would leak to other clients' sessions) sends the same SQL as unnamed
 * statements; FOLIO_DB_NO_PREPARE=1 does the same on any connection. */
/* Which statements this thread has prepared on which session (connection
 * and backend pid), so a new session prepares first instead of provoking
 * a 26000 error per statement in the server log. Only a hint: a stale
 * entry (a reused address and pid) still ends in the 26000 path below. */
#define PREP_SEEN_MAX 32
struct prep_seen {
    const PGconn *c;
    int pid;
    char name[48];
};
static _Thread_local struct prep_seen prep_seen[PREP_SEEN_MAX];
static _Thread_local unsigned prep_seen_next;

static int prep_known(PGconn *c, const char *name)
{
    int pid = PQbackendPID(c);
    for (int i = 0; i < PREP_SEEN_MAX; i++)
        if (prep_seen[i].c == c && prep_seen[i].pid == pid && !strcmp(prep_seen[i].name, name))
            return 1;
    return 0;
}

static void prep_remember(PGconn *c, const char *name)
{
    struct prep_seen *e = &prep_seen[prep_seen_next++ % PREP_SEEN_MAX];
    e->c = c;
    e->pid = PQbackendPID(c);
    snprintf(e->name, sizeof e->name, "%s", name);
}

static PGresult *exec_hot(PGconn *c, const char *name, const char *sql, int n, const char *const *vals)
{
    const char *off = getenv("FOLIO_DB_NO_PREPARE");
    if ((off && off[0] == '1') || db_pooled(c))
        return exec(c, sql, n, vals);
    PGresult *r = NULL;
    const char *st = "26000";
    if (prep_known(c, name)) {
        r = PQexecPrepared(c, name, n, vals, NULL, NULL, 0);
        st = PQresultStatus(r) == PGRES_FATAL_ERROR ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    }
    if (st && strcmp(st, "26000") == 0) {
        PQclear(r);
        /* A custom plan per call would re-run the planner's selectivity
         * probe of jobs_claim (run_after <= now() is past the histogram, so
         * the planner reads the index's live end, wading through entries
         * of just-claimed rows): measured 5–6 ms of planning against
         * 0.2 ms of execution. The generic plans of these statements are
         * the right ones (primary keys, the claim index in order). */
        PGresult *g = PQexec(c, "SET plan_cache_mode = force_generic_plan");
        PQclear(g);
        PGresult *p = PQprepare(c, name, sql, n, NULL);
        const char *pst = PQresultStatus(p) == PGRES_COMMAND_OK ? NULL : PQresultErrorField(p, PG_DIAG_SQLSTATE);
        /* 42P05: prepared before this thread's cache forgot it; fine */
        if (PQresultStatus(p) != PGRES_COMMAND_OK && !(pst && strcmp(pst, "42P05") == 0))
            return p;
        PQclear(p);
        prep_remember(c, name);
        r = PQexecPrepared(c, name, n, vals, NULL, NULL, 0);
    }
    return r;
}

int queue_claim(PGconn *c, const struct queue_cfg *q, int64_t worker_id, int k,
                struct queue_job *out, int *n, struct folio_err *err)
{
    *n = 0;
    if (k <= 0)
        return 0;
    /* folio.claim_jobs (schema 007, an owner's function since 012): a
     * folio_worker login has no UPDATE on jobs and cannot read tokens, so
     * the claim runs as the owner, for this login's worker id only. Its
     * plan is kept per server session, which also serves workers behind
     * a transaction pooler. */
    static const char SQL[] = "SELECT * FROM folio.claim_jobs($1, $2::float8, $3::bigint, $4::int, $5::int)";
    char lb[32], wb[24], mb[16], kb[16];
    snprintf(lb, sizeof lb, "%.3f", q->lease_s);
    snprintf(wb, sizeof wb, "%lld", (long long)worker_id);
    snprintf(mb, sizeof mb, "%d", q->max_attempts);
    snprintf(kb, sizeof kb, "%d", k);
    const char *v[] = {mk(q), lb, worker_id > 0 ? wb : NULL, mb, kb};
    PGresult *r = db_pooled(c) ? exec(c, SQL, 5, v) : exec_hot(c, "folio_claim_v3", SQL, 5, v);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (st && strcmp(st, "42883") == 0) {
            PQclear(r);
            folio_err_set(err, FOLIO_ESTATE, "claiming jobs: folio.claim_jobs is missing (schema older than 012)");
            folio_err_hint(err, "run: folio migrate (on a direct connection)");
            return FOLIO_ESTATE;
        }
        return db_err_from_result(r, c, "claiming jobs", err);
    }
    int rows = PQntuples(r);
    for (int i = 0; i < rows && i < k; i++) {
        struct queue_job *j = &out[i];
        memset(j, 0, sizeof *j);
        j->id = strtoll(PQgetvalue(r, i, 0), NULL, 10);
        j->document_id = strtoll(PQgetvalue(r, i, 1), NULL, 10);
        snprintf(j->token, sizeof j->token, "%s", PQgetvalue(r, i, 2));
        j->worker_id = worker_id > 0 ? worker_id : 0;
        j->attempt = atoi(PQgetvalue(r, i, 3));
        j->max_attempts = atoi(PQgetvalue(r, i, 4));
        j->pages = atoi(PQgetvalue(r, i, 5));
        snprintf(j->sha256, sizeof j->sha256, "%s", PQgetvalue(r, i, 6));
        snprintf(j->media_type, sizeof j->media_type, "%s", PQgetvalue(r, i, 7));
        (*n)++;
    }
    PQclear(r);
    return 0;
}

/* Appends a PostgreSQL array literal element list; ids and uuids need no
 * quoting. */
static char *array_literal(int n, const int64_t *ids, const char (*toks)[37])
{
    size_t cap = 3 + (size_t)n * 40;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t o = 0;
    s[o++] = '{';
    for (int i = 0; i < n; i++) {
        if (i)
            s[o++] = ',';
        int w = ids ? snprintf(s + o, cap - o, "%lld", (long long)ids[i])
                    : snprintf(s + o, cap - o, "%s", toks[i]);
        o += (size_t)w;
    }
    s[o++] = '}';
    s[o] = '\0';
    return s;
}

int queue_heartbeat(PGconn *c, const struct queue_cfg *q, int64_t worker_id,
                    const struct queue_worker_stats *st, const int64_t *ids,
                    const char (*tokens)[37], int n, unsigned char *alive, struct folio_err *err)
{
    /* folio.heartbeat_jobs (schema 012): token- and worker-checked, as
     * the owner. */
    static const char SQL[] = "SELECT * FROM folio.heartbeat_jobs($1::bigint[], $2::uuid[], $3::bigint, $4::bigint,"
                              " $5::bigint, $6::bigint, $7, $8::float8, $9::text[], $10::jsonb)";
    char *ia = array_literal(n, ids, NULL), *ta = array_literal(n, NULL, tokens);
    if (!ia || !ta) {
        free(ia);
        free(ta);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot build the heartbeat for %d jobs", n);
    }
    char wb[24], d[24], f[24], l[24], lb[32];
    snprintf(wb, sizeof wb, "%lld", (long long)worker_id);
    const char *wv = worker_id > 0 ? wb : NULL;
    snprintf(d, sizeof d, "%lld", (long long)(st ? st->done : 0));
    snprintf(f, sizeof f, "%lld", (long long)(st ? st->failed : 0));
    snprintf(l, sizeof l, "%lld", (long long)(st ? st->lost : 0));
    snprintf(lb, sizeof lb, "%.3f", q->lease_s);
    const char *v[] = {ia, ta, wv, d, f, l, st ? st->state : NULL, lb, st ? st->paths_array : NULL,
                       st ? st->paths_disabled_json : NULL};
    PGresult *r = exec_hot(c, "folio_heartbeat_v3", SQL, 10, v);
    free(ia);
    free(ta);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "heartbeat", err);
    for (int i = 0; i < n; i++)
        alive[i] = 0;
    for (int row = 0; row < PQntuples(r); row++) {
        int64_t id = strtoll(PQgetvalue(r, row, 0), NULL, 10);
        for (int i = 0; i < n; i++)
            if (ids[i] == id)
                alive[i] = 1;
    }
    PQclear(r);
    return 0;
}

#define COMPLETE_NPARAMS 15
/* folio.complete_job (schema 009; since 012 it runs as the owner and
 * checks the token and the worker id, so a folio_worker login needs no
 * INSERT on results): the token-checked UPDATE to done, the INSERT ... ON
 * CONFLICT and whether a result under this token already exists, one
 * statement whose plan the server session keeps (also behind a pooler). */
static const char COMPLETE_CALL[] =
    "SELECT * FROM folio.complete_job($1::bigint, $2::uuid, $3, $4::real, $5::boolean, $6::jsonb, $7, $8, $9,"
    " $10::real, $11::smallint, $12::jsonb, $13::jsonb, $14::bigint, $15)";

/* 42883 (undefined function): the schema predates 009. */
static int complete_missing(PGresult *r, struct folio_err *err)
{
    const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (!st || strcmp(st, "42883") != 0)
        return 0;
    folio_err_set(err, FOLIO_ESTATE, "writing the result: folio.complete_job is missing (schema older than 012)");
    folio_err_hint(err, "run: folio migrate (on a direct connection)");
    return 1;
}

/* Text of one completion's numbers; the values point into it. */
struct complete_params {
    char idb[24], conf[32], ocrc[32], orient[8], wb[24];
    const char *v[COMPLETE_NPARAMS];
};

static void complete_params(struct complete_params *p, const struct queue_job *j, int64_t worker_id,
                            const struct queue_result *res)
{
    snprintf(p->idb, sizeof p->idb, "%lld", (long long)j->id);
    snprintf(p->conf, sizeof p->conf, "%.6f", res->confidence);
    snprintf(p->ocrc, sizeof p->ocrc, "%.3f", res->ocr_confidence);
    snprintf(p->orient, sizeof p->orient, "%d", res->ocr_orientation);
    snprintf(p->wb, sizeof p->wb, "%lld", (long long)worker_id);
    const char *v[COMPLETE_NPARAMS] = {p->idb,
                                       j->token,
                                       res->label,
                                       p->conf,
                                       res->needs_review ? "true" : "false",
                                       res->scores_json ? res->scores_json : "{}",
                                       res->engine_path,
                                       res->fallback_reason,
                                       res->ocr_text,
                                       res->ocr_confidence >= 0 ? p->ocrc : NULL,
                                       res->ocr_orientation >= 0 ? p->orient : NULL,
                                       res->ocr_pages_json,
                                       res->timings_json ? res->timings_json : "{}",
                                       worker_id > 0 ? p->wb : NULL,
                                       res->review_reason};
    memcpy(p->v, v, sizeof v);
}

/* accepted: this statement moved the job to done, or a result written
 * under this token is already there (a retry after a lost COMMIT ack). */
static int complete_accepted(PGresult *r) { return atoi(PQgetvalue(r, 0, 0)) > 0 || PQgetvalue(r, 0, 2)[0] == 't'; }

int queue_complete(PGconn *c, const struct queue_job *j, int64_t worker_id,
                   const struct queue_result *res, int *accepted, struct folio_err *err)
{
    *accepted = 0;
    if (!j->token[0])
        return folio_err_set(err, FOLIO_ESTATE, "job %lld: completion without a lease token refused",
                             (long long)j->id);
    struct complete_params p;
    complete_params(&p, j, worker_id, res);
    PGresult *r = db_pooled(c) ? exec(c, COMPLETE_CALL, COMPLETE_NPARAMS, p.v)
                               : exec_hot(c, "folio_complete_v3", COMPLETE_CALL, COMPLETE_NPARAMS, p.v);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        if (complete_missing(r, err)) {
            PQclear(r);
            return FOLIO_ESTATE;
        }
        return db_err_from_result(r, c, "writing the result", err);
    }
    *accepted = complete_accepted(r);
    PQclear(r);
    return 0;
}

/* Reads the pipeline's results up to and including the sync. Keeps the
 * first error in err; returns 0 when every statement succeeded. */
static int complete_many_results(PGconn *c, int n, int *accepted, struct folio_err *err)
{
    int rc = 0;
    /* BEGIN, n completions, COMMIT: each ends with a NULL; then the sync. */
    for (int q = 0; q < n + 2; q++) {
        PGresult *r;
        while ((r = PQgetResult(c)) != NULL) {
            ExecStatusType st = PQresultStatus(r);
            if (st == PGRES_FATAL_ERROR && !rc) {
                rc = db_err_from_result(r, c, q == 0 ? "starting a batch of results"
                                              : q <= n ? "writing a result of a batch"
                                                       : "committing a batch of results", err);
                continue;
            }
            if (st == PGRES_TUPLES_OK && q >= 1 && q <= n && PQntuples(r) == 1)
                accepted[q - 1] = complete_accepted(r);
            else if (st == PGRES_COMMAND_OK && q == n + 1 && strcmp(PQcmdStatus(r), "COMMIT") != 0 && !rc)
                rc = folio_err_set(err, FOLIO_EDB, "a batch of results was rolled back");
            PQclear(r);
        }
        if (db_conn_broken(c))
            return rc ? rc : folio_err_set(err, FOLIO_EDB, "connection lost writing a batch of results");
    }
    PGresult *r = PQgetResult(c);
    int synced = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
    if (!synced && !rc)
        rc = folio_err_set(err, FOLIO_EDB, "batch of results out of step with the server: %s", PQerrorMessage(c));
    return rc;
}

int queue_complete_many(PGconn *c, const struct queue_job *const *jobs, int64_t worker_id,
                        const struct queue_result *const *res, int n, int *accepted, struct folio_err *err)
{
    for (int i = 0; i < n; i++) {
        accepted[i] = 0;
        if (!jobs[i]->token[0])
            return folio_err_set(err, FOLIO_ESTATE, "job %lld: completion without a lease token refused",
                                 (long long)jobs[i]->id);
    }
    if (n == 0)
        return 0;
    if (n == 1)
        return queue_complete(c, jobs[0], worker_id, res[0], &accepted[0], err);
    struct complete_params *p = malloc(sizeof *p * (size_t)n);
    if (!p)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot build a batch of %d results", n);
    if (PQenterPipelineMode(c) != 1) {
        free(p);
        return folio_err_set(err, FOLIO_EDB, "cannot enter pipeline mode: %s", PQerrorMessage(c));
    }
    /* Unnamed statements: a pipeline cannot take exec_hot's prepare-on-
     * 26000 detour, and these plans are primary-key lookups. */
    int sent = PQsendQueryParams(c, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    for (int i = 0; sent && i < n; i++) {
        complete_params(&p[i], jobs[i], worker_id, res[i]);
        sent = PQsendQueryParams(c, COMPLETE_CALL, COMPLETE_NPARAMS, NULL, p[i].v, NULL, NULL, 0);
    }
    if (sent)
        sent = PQsendQueryParams(c, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    if (sent)
        sent = PQpipelineSync(c);
    int rc = sent ? complete_many_results(c, n, accepted, err)
                  : folio_err_set(err, FOLIO_EDB, "sending a batch of results: %s", PQerrorMessage(c));
    free(p);
    if (!db_conn_broken(c) && PQexitPipelineMode(c) != 1 && !rc)
        rc = folio_err_set(err, FOLIO_EDB, "cannot leave pipeline mode: %s", PQerrorMessage(c));
    if (rc) {
        /* Nothing of the batch committed (an error aborts the whole
         * transaction): no result counts as written. */
        for (int i = 0; i < n; i++)
            accepted[i] = 0;
        if (!db_conn_broken(c) && PQtransactionStatus(c) != PQTRANS_IDLE)
            PQclear(PQexec(c, "ROLLBACK"));
    }
    return rc;
}

int queue_fail(PGconn *c, const struct queue_cfg *q, const struct queue_job *j, const char *error,
               char state_out[8], struct folio_err *err)
{
    snprintf(state_out, 8, "lost");
    static const char SQL[] = "SELECT * FROM folio.fail_job($1::bigint, $2::uuid, $7::bigint, $3::int, $4::float8,"
                              " $5::float8, $6)";
    char idb[24], mb[16], base[32], cap[32], wb[24];
    snprintf(idb, sizeof idb, "%lld", (long long)j->id);
    snprintf(mb, sizeof mb, "%d", q->max_attempts);
    snprintf(base, sizeof base, "%.3f", q->retry_base_s);
    snprintf(cap, sizeof cap, "%.3f", q->retry_max_s);
    snprintf(wb, sizeof wb, "%lld", (long long)j->worker_id);
    const char *v[] = {idb, j->token, q->max_attempts > 0 ? mb : NULL, base, cap,
                       error && error[0] ? error : "failed (no message)", j->worker_id > 0 ? wb : NULL};
    PGresult *r = exec_hot(c, "folio_fail_v2", SQL, 7, v);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "recording a job failure", err);
    if (PQntuples(r) == 1)
        snprintf(state_out, 8, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

int queue_release(PGconn *c, const struct queue_job *j, int *released, struct folio_err *err)
{
    *released = 0;
    static const char SQL[] = "SELECT folio.release_job($1::bigint, $2::uuid, $3::bigint)";
    char idb[24], wb[24];
    snprintf(idb, sizeof idb, "%lld", (long long)j->id);
    snprintf(wb, sizeof wb, "%lld", (long long)j->worker_id);
    const char *v[] = {idb, j->token, j->worker_id > 0 ? wb : NULL};
    PGresult *r = exec_hot(c, "folio_release_v2", SQL, 3, v);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "releasing a job", err);
    *released = atoi(PQgetvalue(r, 0, 0)) > 0;
    PQclear(r);
    return 0;
}

int queue_reap(PGconn *c, const struct queue_cfg *q, int *ran, int *requeued, int *dead,
               struct folio_err *err)
{
    *ran = *requeued = *dead = 0;
    /* In folio.reap_jobs: the guard is transaction-scoped (works through a
     * transaction pooler) and taken in a MATERIALIZED CTE so it is evaluated once, before the
     * UPDATE looks at any row. The UPDATE re-checks state and expiry on every
     * row it locks, so a job completed meanwhile is left alone. */
    static const char SQL[] = "SELECT * FROM folio.reap_jobs($1::int, $2::float8, $3::float8, " REAPER_LOCK_KEY ")";
    char mb[16], base[32], cap[32];
    snprintf(mb, sizeof mb, "%d", q->max_attempts);
    snprintf(base, sizeof base, "%.3f", q->retry_base_s);
    snprintf(cap, sizeof cap, "%.3f", q->retry_max_s);
    const char *v[] = {q->max_attempts > 0 ? mb : NULL, base, cap};
    PGresult *r = exec(c, SQL, 3, v);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "reaping expired leases", err);
    *ran = PQgetvalue(r, 0, 0)[0] == 't';
    *requeued = atoi(PQgetvalue(r, 0, 1));
    *dead = atoi(PQgetvalue(r, 0, 2));
    PQclear(r);
    return 0;
}

int queue_cleanup(PGconn *c, double retain_s, int limit, int *deleted, struct folio_err *err)
{
    *deleted = 0;
    static const char SQL[] = "SELECT folio.cleanup_jobs($1::float8, $2::int, " CLEANUP_LOCK_KEY ")";
    char rb[32], lb[16];
    snprintf(rb, sizeof rb, "%.3f", retain_s);
    snprintf(lb, sizeof lb, "%d", limit);
    const char *v[] = {rb, lb};
    PGresult *r = exec(c, SQL, 2, v);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "deleting finished jobs", err);
    *deleted = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

int queue_err_transient(PGconn *c, const struct folio_err *err)
{
    if (db_conn_broken(c))
        return 1;
    if (!err || err->code != FOLIO_EDB)
        return 0;
    const char *st = strstr(err->msg, "(SQLSTATE ");
    if (!st)
        return 1;
    char code[6];
    snprintf(code, sizeof code, "%.5s", st + 10);
    return db_sqlstate_transient(code);
}

int queue_listen(PGconn *c, struct folio_err *err)
{
    return db_exec(c, "LISTEN " QUEUE_NOTIFY_CHANNEL, err);
}

int queue_drain_notifies(PGconn *c)
{
    if (!PQconsumeInput(c))
        return FOLIO_EDB;
    int n = 0;
    PGnotify *nt;
    while ((nt = PQnotifies(c)) != NULL) {
        n++;
        PQfreemem(nt);
    }
    return n;
}

int queue_worker_register(PGconn *c, const struct queue_worker_info *w, int64_t *id,
                          struct folio_err *err)
{
    static const char SQL[] =
        "SELECT folio.worker_register($1, $2::int, $3, $4, $5, $6::text[], $7::jsonb, $8::jsonb)";
    char pb[16];
    snprintf(pb, sizeof pb, "%d", w->pid);
    const char *v[] = {w->host, pb, w->model_key ? w->model_key : "default", w->state, w->device,
                       w->paths_array ? w->paths_array : "{}",
                       w->paths_disabled_json ? w->paths_disabled_json : "{}",
                       w->detail_json ? w->detail_json : "{}"};
    PGresult *r = exec(c, SQL, 8, v);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "registering the worker", err);
    *id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return 0;
}

int queue_worker_stopped(PGconn *c, int64_t id, const struct queue_worker_stats *st,
                         struct folio_err *err)
{
    static const char SQL[] =
        "SELECT folio.worker_stopped($1::bigint, $2::bigint, $3::bigint, $4::bigint)";
    char ib[24], d[24], f[24], l[24];
    snprintf(ib, sizeof ib, "%lld", (long long)id);
    snprintf(d, sizeof d, "%lld", (long long)st->done);
    snprintf(f, sizeof f, "%lld", (long long)st->failed);
    snprintf(l, sizeof l, "%lld", (long long)st->lost);
    const char *v[] = {ib, d, f, l};
    PGresult *r = exec(c, SQL, 4, v);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "marking the worker stopped", err);
    PQclear(r);
    return 0;
}

int queue_fetch_blob(PGconn *c, int64_t document_id, uint8_t **data, size_t *len,
                     struct folio_err *err)
{
    return queue_fetch_document(c, NULL, document_id, data, len, err);
}

int queue_fetch_document(PGconn *c, const struct blobstore *store, int64_t document_id, uint8_t **data,
                         size_t *len, struct folio_err *err)
{
    *data = NULL;
    *len = 0;
    char ib[24];
    snprintf(ib, sizeof ib, "%lld", (long long)document_id);
    const char *v[] = {ib};
    /* Binary result: the bytes as stored, no hex round trip. The location
     * travels with the bytes (LEFT JOIN), so an fs document costs the same
     * one round trip and a pg one is read exactly as before. */
    PGresult *r = PQexecParams(c,
                               "SELECT d.blob_store, d.sha256, b.data FROM folio.documents d"
                               " LEFT JOIN folio.blobs b ON b.sha256 = d.sha256 AND d.blob_store = 'pg'"
                               " WHERE d.id = $1",
                               1, NULL, v, NULL, NULL, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "reading the document's bytes", err);
    if (PQntuples(r) != 1) {
        PQclear(r);
        return folio_err_set(err, FOLIO_EFORMAT, "document %lld does not exist", (long long)document_id);
    }
    if (strcmp(PQgetvalue(r, 0, 0), "fs") == 0) {
        uint8_t sha[FOLIO_SHA256_LEN];
        int ok = PQgetlength(r, 0, 1) == FOLIO_SHA256_LEN;
        if (ok)
            memcpy(sha, PQgetvalue(r, 0, 1), FOLIO_SHA256_LEN);
        PQclear(r);
        if (!ok)
            return folio_err_set(err, FOLIO_EFORMAT, "document %lld has a malformed sha256", (long long)document_id);
        if (blobstore_in_pg(store)) {
            char hex[2 * FOLIO_SHA256_LEN + 1];
            folio_hex(sha, FOLIO_SHA256_LEN, hex);
            folio_err_set(err, FOLIO_EUNSUPPORTED,
                          "document %lld (sha256 %s) is in the fs blob store, and this process has none",
                          (long long)document_id, hex);
            folio_err_hint(err, "pass --blob-store fs:PATH, the store ingest wrote it to");
            return FOLIO_EUNSUPPORTED;
        }
        /* A blob is at most one ingest --max-bytes (< 1 GiB). */
        int rc = blobstore_get(store, sha, (size_t)1 << 30, data, len, err);
        if (rc)
            folio_err_prefix(err, "document %lld: ", (long long)document_id);
        return rc;
    }
    if (PQgetisnull(r, 0, 2)) {
        PQclear(r);
        folio_err_set(err, FOLIO_EFORMAT, "document %lld has no stored bytes (folio.blobs row missing)",
                      (long long)document_id);
        folio_err_hint(err, "re-ingest the file; workers read pixels from folio.blobs");
        return FOLIO_EFORMAT;
    }
    size_t n = (size_t)PQgetlength(r, 0, 2);
    /* The bytes must be the ones the document was recorded with: a row
     * changed behind folio's back (a bad restore, a disk, an UPDATE) would
     * otherwise be classified as this document, and ingest's dedupe would
     * keep the bad copy for good. The fs store checks the same on read. */
    uint8_t got[FOLIO_SHA256_LEN];
    if (PQgetlength(r, 0, 1) != FOLIO_SHA256_LEN) {
        PQclear(r);
        return folio_err_set(err, FOLIO_EFORMAT, "document %lld has a malformed sha256", (long long)document_id);
    }
    if (folio_sha256(PQgetvalue(r, 0, 2), n, got) != 0) {
        PQclear(r);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot hash the %zu bytes of document %lld", n,
                             (long long)document_id);
    }
    if (memcmp(got, PQgetvalue(r, 0, 1), FOLIO_SHA256_LEN) != 0) {
        char want[2 * FOLIO_SHA256_LEN + 1], gh[2 * FOLIO_SHA256_LEN + 1];
        folio_hex((const uint8_t *)PQgetvalue(r, 0, 1), FOLIO_SHA256_LEN, want);
        folio_hex(got, FOLIO_SHA256_LEN, gh);
        PQclear(r);
        /* The message is what the job records (and `jobs list` cuts at
         * 200 characters): what is wrong and the repair come first. */
        folio_err_set(err, FOLIO_EFORMAT,
                      "document %lld's stored bytes are corrupt (folio.blobs row does not match its sha256); "
                      "re-ingest the original file to repair it",
                      (long long)document_id);
        folio_err_detail(err, "the document records sha256 %s; its %zu bytes in folio.blobs hash to %s", want, n,
                         gh);
        folio_err_hint(err, "drop the original file into the inbox again (ingest rewrites a corrupt blob from it); "
                            "a job that ran out of attempts meanwhile: folio jobs retry --error 'stored bytes are corrupt'");
        return FOLIO_EFORMAT;
    }
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        PQclear(r);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate %zu bytes for document %lld", n,
                             (long long)document_id);
    }
    memcpy(buf, PQgetvalue(r, 0, 2), n);
    PQclear(r);
    *data = buf;
    *len = n;
    return 0;
}
