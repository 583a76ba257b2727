/* folio status: a person's view of the queue, the fleet and recent problems,
 * read from the same views users query with psql. */
#include "common/json.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"

#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio status [--db CONNINFO] [--json] [--watch [--interval S] [--count N]]\n"
    "\n"
    "Shows jobs per state, live workers, results per label, the latest\n"
    "rejections, split suggestions and dead jobs, plus throughput over the last\n"
    "minute and an estimate of when the queue is empty at that rate.\n"
    "\n";

/* One cell: a NULL (no worker yet, no error) is left blank; a value is
 * escaped, and quoted only when it must be (an empty string shows as ""). */
static const char *cell(char *buf, size_t n, PGresult *r, int t, int f)
{
    if (PQgetisnull(r, t, f)) {
        buf[0] = '\0';
        return buf;
    }
    return folio_lq(buf, n, PQgetvalue(r, t, f));
}

/* Prints a result as an aligned text table; values are escaped so that a
 * hostile file name cannot move the cursor around the terminal. */
static void print_table(const char *title, PGresult *r)
{
    int nf = PQnfields(r), nt = PQntuples(r);
    printf("%s\n", title);
    if (nt == 0) {
        printf("  (none)\n\n");
        return;
    }
    int w[32] = {0};
    if (nf > 32)
        nf = 32;
    /* A column holds at most 60 bytes: folio_lq cuts longer values on a
     * character boundary, ends them in "..." and closes their quote, so a
     * cut never splits a UTF-8 sequence or an escape. */
    char buf[61];
    for (int f = 0; f < nf; f++) {
        w[f] = (int)strlen(PQfname(r, f));
        for (int t = 0; t < nt; t++) {
            int l = (int)strlen(cell(buf, sizeof buf, r, t, f));
            if (l > w[f])
                w[f] = l;
        }
    }
    printf(" ");
    for (int f = 0; f < nf; f++)
        printf(" %-*s", w[f], PQfname(r, f));
    printf("\n");
    for (int t = 0; t < nt; t++) {
        printf(" ");
        for (int f = 0; f < nf; f++)
            printf(" %-*s", w[f], cell(buf, sizeof buf, r, t, f));
        printf("\n");
    }
    printf("\n");
}

/* File scope: the config layer reads the keys [status] accepts from it. */
struct status_args {
    const char *db;
    int json, watch, count;
    double interval;
};
#define AT(m, type) CLI_AT(struct status_args, m, type)

/* Also the keys of [status] in the configuration file (pipeline/cli/config.c). */
static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *)},
    {.name = "json", .kind = CLI_FLAG, .off = AT(json, int), .help = "one JSON object (with --watch: one per line)"},
    {.name = "watch", .kind = CLI_FLAG, .off = AT(watch, int), .help = "refresh until interrupted"},
    {.name = "interval", .kind = CLI_DOUBLE, .off = AT(interval, double), .lo = 0.1, .hi = 86400,
     .want = "seconds from 0.1 to 86400", .arg = "S", .help = "seconds between refreshes (default 2)"},
    {.name = "count", .kind = CLI_INT, .off = AT(count, int), .min = 1, .max = 1000000000,
     .want = "a positive number", .arg = "N", .help = "stop after N refreshes (default: never)"},
};

const struct cli_cmd cmd_status_cli = {
    .name = "status", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .help_col = 17,
};

static const struct {
    const char *key, *title, *sql;
} Q[] = {
    {"jobs", "jobs", "SELECT model_key, state, jobs, backing_off, lease_expired, oldest::timestamp(0) "
                     "FROM folio.queue_overview ORDER BY model_key, state"},
    {"workers", "workers (alive)", "SELECT worker_id, host, pid, state, device, array_to_string(paths, ',') AS paths, "
                                   "running, jobs_done, jobs_failed, heartbeat_at::timestamp(0) "
                                   "FROM folio.worker_overview WHERE alive ORDER BY worker_id"},
    {"labels", "results by label", "SELECT model_key, label, documents, avg_confidence, needs_review "
                                   "FROM folio.label_summary ORDER BY documents DESC LIMIT 20"},
    {"rejections", "latest rejections", "SELECT rejected_at::timestamp(0), reason, path_display AS path, message "
                                        "FROM folio.rejections ORDER BY id DESC LIMIT 10"},
    {"split_suggestions", "split suggestions (pages whose labels differ; review, nothing is split)",
     "SELECT document_id, name, pages, first_page || '-' || last_page AS segment, label, "
     "round(confidence::numeric, 3) AS confidence FROM folio.split_suggestions "
     "ORDER BY document_id DESC, model_key, first_page LIMIT 30"},
    {"dead_jobs", "dead jobs", "SELECT job_id, document_id, attempts, path, last_error "
                               "FROM folio.dead_jobs ORDER BY finished_at DESC NULLS LAST LIMIT 10"},
    /* Throughput from the results table (done jobs may already be deleted
     * by retention); the ETA is the runnable queue over that rate. */
    {"throughput", "throughput (last minute)",
     "SELECT t.results, t.pages, q.queued, CASE WHEN t.results > 0 THEN round(q.queued * 60.0 / t.results) "
     "END AS eta_s FROM (SELECT count(*) AS results, coalesce(sum(d.pages), 0) AS pages FROM folio.results r "
     "JOIN folio.documents d ON d.id = r.document_id WHERE r.created_at > now() - interval '1 minute') t, "
     "(SELECT count(*) AS queued FROM folio.jobs WHERE state IN ('queued', 'running')) q"},
};

/* Row t as a JSON object; numbers and booleans keep their type. */
static void json_row(struct json_buf *b, PGresult *r, int t)
{
    json_raw(b, "{");
    for (int f = 0; f < PQnfields(r); f++) {
        if (f)
            json_raw(b, ",");
        json_key(b, PQfname(r, f));
        Oid ty = PQftype(r, f);
        const char *v = PQgetvalue(r, t, f);
        if (PQgetisnull(r, t, f))
            json_raw(b, "null");
        else if (ty == 16) /* bool */
            json_raw(b, v[0] == 't' ? "true" : "false");
        else if (ty == 20 || ty == 21 || ty == 23 || ty == 700 || ty == 701 || ty == 1700)
            json_raw(b, v); /* int8, int2, int4, float4, float8, numeric: server text is valid JSON */
        else
            json_str(b, v);
    }
    json_raw(b, "}");
}

/* One snapshot, printed as tables or one JSON line. */
static int status_once(PGconn *c, int as_json, struct folio_err *err)
{
    PGresult *res[sizeof Q / sizeof Q[0]] = {0};
    int rc = 0;
    PGresult *b = PQexec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    PQclear(b);
    for (size_t i = 0; i < sizeof Q / sizeof Q[0] && !rc; i++) {
        res[i] = PQexec(c, Q[i].sql);
        if (PQresultStatus(res[i]) != PGRES_TUPLES_OK) {
            db_err_from_result(res[i], c, "reading status", err);
            res[i] = NULL;
            if (strstr(err->msg, "42P01"))
                folio_err_hint(err, "the schema is missing: run folio migrate first");
            rc = FOLIO_EDB;
        }
    }
    PQclear(PQexec(c, "COMMIT"));
    if (!rc && as_json) {
        struct json_buf j;
        json_init(&j);
        json_raw(&j, "{");
        for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++) {
            if (i)
                json_raw(&j, ",");
            json_key(&j, Q[i].key);
            if (strcmp(Q[i].key, "throughput") == 0) { /* always one row: an object */
                json_row(&j, res[i], 0);
                continue;
            }
            json_raw(&j, "[");
            for (int t = 0; t < PQntuples(res[i]); t++) {
                if (t)
                    json_raw(&j, ",");
                json_row(&j, res[i], t);
            }
            json_raw(&j, "]");
        }
        json_raw(&j, "}\n");
        if (j.oom)
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory building the status JSON");
        else
            fwrite(j.s, 1, j.len, stdout);
        json_free(&j);
    } else if (!rc) {
        for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++)
            print_table(Q[i].title, res[i]);
    }
    for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++)
        PQclear(res[i]);
    fflush(stdout);
    return rc;
}

int cmd_status(int argc, char **argv)
{
    struct status_args a = {.interval = 2};
    int pos, prc = cli_parse(&cmd_status_cli, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = a.db;
    int as_json = a.json, watch = a.watch;
    double interval = a.interval;
    long long count = a.count;
    struct folio_err err = {0};
    PGconn *c;
    if (cli_connect(db, "folio-status", &c))
        return FOLIO_EXIT_FAIL;
    int rc = FOLIO_EXIT_OK;
    for (long long n = 1;; n++) {
        /* A terminal watch redraws in place; JSON lines and pipes append. */
        if (watch && !as_json && isatty(STDOUT_FILENO))
            fputs("\033[H\033[2J", stdout);
        if (status_once(c, as_json, &err)) {
            folio_err_print(stderr, &err);
            rc = FOLIO_EXIT_FAIL;
            break;
        }
        if (!watch || (count && n >= count))
            break;
        folio_sleep_ms((int64_t)(interval * 1000));
    }
    PQfinish(c);
    return rc;
}
