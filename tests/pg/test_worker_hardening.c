/* Issue 21's adversarial findings against the real `folio worker`, each
 * bounded in time and stopping by itself:
 *   1. A transient database error (folio.blobs locked the way VACUUM FULL
 *      or ALTER TABLE lock it, under statement_timeout) is retried with
 *      backoff and never uses up an attempt: every document ends done
 *      with attempts = 1. */
#include "pipeline/pipeline.h"
#include "tests/pg/worker_testlib.h"

static char g_db[512];

int main(void)
{
    REQUIRE_OK(tu_pg_fresh_db("folio_test_worker_hardening", g_db, sizeof g_db) == 0, "fresh db");
    PGconn *c = PQconnectdb(g_db);
    REQUIRE_OK(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    struct folio_err err = {0};
    int applied = 0;
    struct migrate_opts mo = {0};
    REQUIRE_OK(migrate_run(c, &mo, &applied, &err) == 0, "migrate: %s", err.msg);
    const char *dir = tu_scratch("worker_hardening");
    char log[1100], sql[600];
    snprintf(log, sizeof log, "%s/worker.log", dir);
    uint8_t *inv = NULL;
    size_t inv_len = 0;
    REQUIRE_OK(wt_render(dir, "invoice", "INVOICE\nInvoice number 21\nAmount due: 9.00\n", 1000, 500, &inv,
                         &inv_len) == 0, "render invoice");

    /* 1. Lock on folio.blobs for 4 s; the worker's statements time out
     * after 300 ms all that time. */
    char sha[65];
    for (int i = 0; i < 3; i++) {
        char tag[16];
        snprintf(tag, sizeof tag, "lock%d", i);
        wt_sha(tag, NULL, sha);
        REQUIRE(wt_add_doc(c, sha, inv, inv_len, 2) > 0, "plant %s", tag);
    }
    PGconn *locker = PQconnectdb(g_db);
    REQUIRE_OK(PQstatus(locker) == CONNECTION_OK, "locker connect");
    PQclear(PQexec(locker, "BEGIN"));
    PGresult *r = PQexec(locker, "LOCK TABLE folio.blobs IN ACCESS EXCLUSIVE MODE");
    REQUIRE(PQresultStatus(r) == PGRES_COMMAND_OK, "lock blobs: %s", PQerrorMessage(locker));
    PQclear(r);
    char db_timeout[700];
    snprintf(db_timeout, sizeof db_timeout, "%s options='-c statement_timeout=300'", g_db);
    const char *const args[] = {"--lease", "3", "--poll", "0.2", "--retry-base", "0.2", "--retry-max", "1",
                                "--ocr-threads", "2", "--batch", "2", NULL};
    pid_t w = wt_spawn_worker(db_timeout, NULL, log, args);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'running'", 2, 20000) == 0,
          "2 jobs running while blobs are locked; see %s", log);
    folio_sleep_ms(4000);
    PQclear(PQexec(locker, "COMMIT"));
    PQfinish(locker);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state IN ('done', 'dead')", 3, 60000) == 0,
          "3 jobs not settled after the lock; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'") == 3, "all 3 done; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE attempts = 1 AND last_error IS NULL") == 3,
          "a lock under statement_timeout used up attempts; see %s", log);
    CHECK(tu_sh("grep -q 'event=db_transient.*57014' %s", log) == 0, "the retries are logged; see %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 15000) == 0, "worker exit");
    snprintf(sql, sizeof sql, "TRUNCATE folio.results, folio.jobs, folio.documents, folio.workers CASCADE");
    PQclear(PQexec(c, sql));

    free(inv);
    PQfinish(c);
    return tu_finish();
}
