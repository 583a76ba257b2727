/* folio status: a person's view of the queue, the fleet and recent problems,
 * read from the same views users query with psql. */
#include "pipeline/pipeline.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio status [--db CONNINFO]\n"
    "\n"
    "Shows jobs per state, live workers, results per label and the latest\n"
    "rejections and dead jobs.\n";

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
            int l = (int)strlen(folio_lq(buf, sizeof buf, PQgetvalue(r, t, f)));
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
            printf(" %-*s", w[f], folio_lq(buf, sizeof buf, PQgetvalue(r, t, f)));
        printf("\n");
    }
    printf("\n");
}

int cmd_status(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = NULL;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ch == 'd')
            db = optarg;
        else if (ch == 'h') {
            fputs(USAGE, stdout);
            return FOLIO_EXIT_OK;
        } else
            return cli_usage_error("status", "unknown or incomplete option '%s'", argv[optind - 1]);
    }
    if (optind < argc)
        return cli_usage_error("status", "unexpected argument '%s'", argv[optind]);
    struct folio_err err = {0};
    PGconn *c;
    if (db_connect(db_conninfo(db), "folio-status", &c, &err)) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    static const struct {
        const char *title, *sql;
    } Q[] = {
        {"jobs", "SELECT model_key, state, jobs, backing_off, lease_expired, oldest::timestamp(0) "
                 "FROM folio.queue_overview ORDER BY model_key, state"},
        {"workers (alive)", "SELECT worker_id, host, pid, state, device, array_to_string(paths, ',') AS paths, "
                            "running, jobs_done, jobs_failed, heartbeat_at::timestamp(0) "
                            "FROM folio.worker_overview WHERE alive ORDER BY worker_id"},
        {"results by label", "SELECT model_key, label, documents, avg_confidence, needs_review "
                             "FROM folio.label_summary ORDER BY documents DESC LIMIT 20"},
        {"latest rejections", "SELECT rejected_at::timestamp(0), reason, path_display AS path, message "
                              "FROM folio.rejections ORDER BY id DESC LIMIT 10"},
        {"dead jobs", "SELECT job_id, document_id, attempts, path, last_error "
                      "FROM folio.dead_jobs ORDER BY finished_at DESC NULLS LAST LIMIT 10"},
    };
    int rc = FOLIO_EXIT_OK;
    for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++) {
        PGresult *r = PQexec(c, Q[i].sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            db_err_from_result(r, c, "reading status", &err);
            if (strstr(err.msg, "42P01"))
                folio_err_hint(&err, "the schema is missing: run folio migrate first");
            folio_err_print(stderr, &err);
            rc = FOLIO_EXIT_FAIL;
            break;
        }
        print_table(Q[i].title, r);
        PQclear(r);
    }
    PQfinish(c);
    return rc;
}
