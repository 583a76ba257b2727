/*
 * folio jobs list|retry|cancel: the operator's handle on the queue without
 * SQL. Each action is one statement, so it is atomic against the workers:
 *
 * - retry: dead jobs, and queued ones waiting out a failure backoff, go back
 *   to queued now with their attempts reset (the error text stays as
 *   history until the next attempt overwrites it); NOTIFY wakes workers.
 * - cancel: queued or running jobs become dead with "cancelled by operator".
 *   A running job's lease token is cleared, so its worker's next heartbeat
 *   or completion finds the lease gone and drops the work: the token check
 *   that protects against stale writers also makes cancel safe.
 */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/db/queue.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio jobs list   [FILTERS] [--limit N]\n"
    "       folio jobs retry  FILTERS [--dry-run]\n"
    "       folio jobs cancel FILTERS [--dry-run]\n"
    "\n"
    "Filters (combined with AND; retry and cancel need at least one):\n";


struct filter {
    char ids[4096]; /* PostgreSQL array literal body: 1,2,3 */
    const char *state, *label, *model_key, *error;
    int all; /* --all (a flag) */
};

/* Appends the WHERE conditions (alias j) and their parameters. */
static void filter_sql(const struct filter *f, char *sql, size_t n, const char **params, int *np)
{
    size_t l = strlen(sql);
#define COND(...) (l += (size_t)snprintf(sql + l, n - l, __VA_ARGS__))
    if (f->ids[0]) {
        params[*np] = f->ids;
        ++*np;
        COND(" AND j.id = ANY(('{' || $%d || '}')::bigint[])", *np);
    }
    if (f->state) {
        if (strcmp(f->state, "failed") == 0)
            COND(" AND j.state = 'queued' AND j.last_error IS NOT NULL");
        else {
            params[*np] = f->state;
            ++*np;
            COND(" AND j.state = $%d", *np);
        }
    }
    if (f->label) {
        params[*np] = f->label;
        ++*np;
        COND(" AND EXISTS (SELECT 1 FROM folio.results r WHERE r.document_id = j.document_id AND r.label = $%d)",
             *np);
    }
    if (f->model_key) {
        params[*np] = f->model_key;
        ++*np;
        COND(" AND j.model_key = $%d", *np);
    }
    if (f->error) {
        params[*np] = f->error;
        ++*np;
        COND(" AND strpos(lower(j.last_error), lower($%d)) > 0", *np);
    }
#undef COND
}

static const char LIST_COLS[] =
    "SELECT j.id, j.document_id, coalesce((SELECT s.name_display FROM folio.document_sources s "
    "WHERE s.document_id = j.document_id ORDER BY s.id LIMIT 1), '') AS name, j.model_key, "
    "CASE WHEN j.state = 'queued' AND j.last_error IS NOT NULL THEN 'failed' ELSE j.state END, "
    "j.attempts || '/' || j.max_attempts, "
    "coalesce(to_char(j.run_after AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), ''), "
    "coalesce(left(j.last_error, 200), '') FROM folio.jobs j WHERE true";

static void print_jobs(PGresult *r)
{
    char a[300], b[300], c[500];
    printf("%-8s %-8s %-24s %-10s %-8s %-8s %-19s %s\n", "job", "document", "name", "model_key", "state",
           "attempts", "run_after", "last_error");
    for (int i = 0; i < PQntuples(r); i++)
        printf("%-8s %-8s %-24.24s %-10.10s %-8s %-8s %-19s %s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
               folio_lq(a, sizeof a, PQgetvalue(r, i, 2)), folio_lq(b, sizeof b, PQgetvalue(r, i, 3)),
               PQgetvalue(r, i, 4), PQgetvalue(r, i, 5), PQgetvalue(r, i, 6),
               folio_lq(c, sizeof c, PQgetvalue(r, i, 7)));
    printf("(%d job%s)\n", PQntuples(r), PQntuples(r) == 1 ? "" : "s");
}

static int add_ids(struct filter *f, const char *arg)
{
    /* Digits and commas only: the list goes into an array literal. */
    if (!arg[0] || strspn(arg, "0123456789,") != strlen(arg) || arg[0] == ',' || arg[strlen(arg) - 1] == ',' ||
        strstr(arg, ",,"))
        return -1;
    size_t l = strlen(f->ids);
    return folio_snprintf(f->ids + l, sizeof f->ids - l, "%s%s", l ? "," : "", arg);
}

struct jobs_args {
    struct filter f;
    const char *db;
    int limit, dry, state;
};
#define AT(m, type) CLI_AT(struct jobs_args, m, type)

static int take_ids(const struct cli_opt *opt, void *args, const char *v, const char *cmd)
{
    (void)opt, (void)cmd;
    return add_ids(&((struct jobs_args *)args)->f, v) ? -1 : 0;
}

static const char *const STATES[] = {"queued", "running", "done", "dead", "failed", NULL};

/* Also the keys of [jobs] in the configuration file (pipeline/cli/config.c). */
static const struct cli_opt OPTS[] = {
    {.name = "id", .kind = CLI_FN, .repeats = 1, .fn = take_ids, .want = "job ids like 17 or 17,18", .arg = "N[,N...]",
     .help = "job ids (repeatable)"},
    {.name = "state", .kind = CLI_ENUM, .off = AT(state, int), .choices = STATES,
     .want = "queued, running, done, dead or failed", .arg = "STATE",
     .help = "queued | running | done | dead | failed (queued again\n"
             "after an error, waiting out its backoff)"},
    {.name = "label", .kind = CLI_STR, .off = AT(f.label, const char *), .arg = "L",
     .help = "documents whose result (any model key) has label L"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(f.model_key, const char *), .arg = "KEY",
     .help = "jobs of one model configuration"},
    {.name = "error", .kind = CLI_STR, .off = AT(f.error, const char *), .arg = "TEXT",
     .help = "last error contains TEXT (case-insensitive)"},
    {.name = "all", .kind = CLI_FLAG, .off = AT(f.all, int), .help = "every job the action applies to"},
    {.kind = CLI_TEXT,
     .help = "\n"
             "retry: dead and failed jobs go back to queued now, attempts reset.\n"
             "cancel: queued and running jobs become dead ('cancelled by operator'); a\n"
             "running job's worker loses its lease and drops the work.\n"
             "\n"},
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "limit", .kind = CLI_INT, .off = AT(limit, int), .min = 1, .max = 1000000, .arg = "N",
     .help = "list: at most N jobs, newest first (default 50)"},
    {.name = "dry-run", .kind = CLI_FLAG, .off = AT(dry, int),
     .help = "retry/cancel: list what would change, change nothing"},
};

const struct cli_cmd cmd_jobs_cli = {
    .name = "jobs", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 1,
};

int cmd_jobs(int argc, char **argv)
{
    struct jobs_args a = {.limit = 50, .state = -1};
    int pos, prc = cli_parse(&cmd_jobs_cli, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    if (pos >= argc)
        return cli_usage_error("jobs", "missing action: list, retry or cancel");
    struct filter f = a.f;
    f.state = a.state < 0 ? NULL : STATES[a.state];
    const char *db = a.db, *action = argv[pos];
    long long limit = a.limit;
    bool dry = a.dry;
    bool list = strcmp(action, "list") == 0, retry = strcmp(action, "retry") == 0,
         cancel = strcmp(action, "cancel") == 0;
    if (!list && !retry && !cancel)
        return cli_usage_error("jobs", "unknown action '%s': list, retry or cancel", action);
    if (!list && !f.all && !f.ids[0] && !f.state && !f.label && !f.model_key && !f.error)
        return cli_usage_error("jobs", "%s changes jobs: name them with --id, --state, --label, --model-key, "
                                       "--error, or --all",
                               action);
    if (retry && f.state && strcmp(f.state, "dead") && strcmp(f.state, "failed"))
        return cli_usage_error("jobs", "retry applies to dead and failed jobs, not --state %s", f.state);
    if (cancel && f.state && strcmp(f.state, "queued") && strcmp(f.state, "running") && strcmp(f.state, "failed"))
        return cli_usage_error("jobs", "cancel applies to queued, failed and running jobs, not --state %s", f.state);

    struct folio_err err = {0};
    PGconn *c;
    if (cli_connect(db, "folio-jobs", &c))
        return FOLIO_EXIT_FAIL;
    char sql[4096];
    const char *params[8];
    int np = 0;
    static const char RETRYABLE[] = " AND (j.state = 'dead' OR (j.state = 'queued' AND j.last_error IS NOT NULL))";
    static const char CANCELLABLE[] = " AND j.state IN ('queued', 'running')";
    if (list || dry) {
        snprintf(sql, sizeof sql, "%s%s", LIST_COLS, retry ? RETRYABLE : cancel ? CANCELLABLE : "");
        filter_sql(&f, sql, sizeof sql, params, &np);
        snprintf(sql + strlen(sql), sizeof sql - strlen(sql), " ORDER BY j.id DESC LIMIT %lld",
                 list ? limit : 1000000LL);
    } else if (retry) {
        /* One statement: the queue UPDATE and the wake-up of idle workers. */
        snprintf(sql, sizeof sql,
                 "WITH r AS (UPDATE folio.jobs j SET state = 'queued', attempts = 0, run_after = now(), "
                 "finished_at = NULL, worker_id = NULL WHERE true%s",
                 RETRYABLE);
        filter_sql(&f, sql, sizeof sql, params, &np);
        snprintf(sql + strlen(sql), sizeof sql - strlen(sql),
                 " RETURNING j.id), n AS (SELECT pg_notify('" QUEUE_NOTIFY_CHANNEL "', '') "
                 "WHERE EXISTS (SELECT 1 FROM r)) SELECT id FROM r, (SELECT count(*) FROM n) x ORDER BY id");
    } else {
        snprintf(sql, sizeof sql,
                 "UPDATE folio.jobs j SET state = 'dead', lease_token = NULL, lease_expires_at = NULL, "
                 "finished_at = now(), last_error = 'cancelled by operator (folio jobs cancel)' WHERE true%s",
                 CANCELLABLE);
        filter_sql(&f, sql, sizeof sql, params, &np);
        snprintf(sql + strlen(sql), sizeof sql - strlen(sql), " RETURNING j.id");
    }
    PGresult *r = PQexecParams(c, sql, np, NULL, params, NULL, NULL, 0);
    int rc = FOLIO_EXIT_OK;
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        db_err_from_result(r, c, "folio jobs", &err);
        if (strstr(err.msg, "42P01"))
            folio_err_hint(&err, "the schema is missing: run folio migrate first");
        folio_err_print(stderr, &err);
        rc = FOLIO_EXIT_FAIL;
    } else if (list || dry) {
        if (dry)
            printf("would %s:\n", action);
        print_jobs(r);
        PQclear(r);
    } else {
        int n = PQntuples(r);
        printf("%s %d job%s", retry ? "retried" : "cancelled", n, n == 1 ? "" : "s");
        for (int i = 0; i < n && i < 50; i++)
            printf("%s%s", i ? " " : ": ", PQgetvalue(r, i, 0));
        printf("%s\n", n > 50 ? " ..." : "");
        folio_log(FOLIO_LOG_INFO, retry ? "jobs_retried" : "jobs_cancelled", "jobs=%d", n);
        PQclear(r);
    }
    PQfinish(c);
    return rc;
}
