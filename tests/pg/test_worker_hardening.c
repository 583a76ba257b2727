/* Issue 21's adversarial findings against the real `folio worker`, each
 * bounded in time and stopping by itself:
 *   1. A transient database error (folio.blobs locked the way VACUUM FULL
 *      or ALTER TABLE lock it, under statement_timeout) is retried with
 *      backoff and never uses up an attempt: every document ends done
 *      with attempts = 1.
 *   2. No raw lines on stderr: every line a worker writes is logfmt
 *      (Tesseract's chatter comes back through the OCR child, libpq
 *      notices through a notice processor), `folio migrate` re-run prints
 *      its notices as logfmt, and new connections prepare their hot
 *      statements without provoking `prepared statement does not exist`
 *      errors in the server log.
 *   3. The worker's pixel cap (--max-pixels, default = ingest's): a page
 *      over it fails from its header with the numbers, counting an
 *      attempt, instead of being decoded.
 *   4. (fault-injection builds) A job that does not finish within its
 *      time budget (--job-deadline) is stopped, fails with the reason,
 *      counts its attempt, and its lease is not renewed meanwhile. */
#include "pipeline/db/db.h"
#include "tests/pg/worker_testlib.h"

static char g_db[512];

int main(void)
{
    PGconn *c = wt_fresh_schema("folio_test_worker_hardening", g_db, sizeof g_db);
    REQUIRE(c, "fresh migrated database");
    struct folio_err err = {0};
    const char *dir = tu_scratch("worker_hardening");
    char log[1100], sql[600];
    snprintf(log, sizeof log, "%s/worker.log", dir);
    char srvlog[1100];
    snprintf(srvlog, sizeof srvlog, "%s/server.log", getenv("FOLIO_TEST_PGHOST"));
    char cnt[64] = "";
    tu_sh_out(cnt, sizeof cnt, "grep -c 'prepared statement \"folio_' '%s' || true", srvlog);
    long prep_errors_before = atol(cnt);
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
        REQUIRE(wt_add_doc(c, tag, inv, inv_len, 2, sha) > 0, "plant %s", tag);
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

    /* 2. Raw stderr lines and provoked server errors. */
    CHECK(tu_sh("! grep -v '^ts=' '%s' | grep -q .", log) == 0, "raw (non-logfmt) lines in the worker log: %s", log);
    char mlog[1100];
    snprintf(mlog, sizeof mlog, "%s/migrate.log", dir);
    CHECK(tu_sh("%s migrate --db '%s' >'%s' 2>&1", tu_folio_bin(), g_db, mlog) == 0, "migrate re-run; see %s", mlog);
    CHECK(tu_sh("! grep -Eq '^(NOTICE|WARNING|ERROR):' '%s'", mlog) == 0, "raw libpq notices from migrate; see %s", mlog);
    /* a server NOTICE on a folio connection comes out as a logfmt line */
    char nlog[1100];
    snprintf(nlog, sizeof nlog, "%s/notice.log", dir);
    PGconn *fc = NULL;
    REQUIRE_OK(db_connect(g_db, "notice-test", &fc, &err) == 0, "db_connect: %s", err.msg);
    fflush(stderr);
    int saved = dup(2), nfd = open(nlog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(nfd, 2);
    PQclear(PQexec(fc, "DO $$ BEGIN RAISE NOTICE 'folio notice test'; RAISE WARNING 'folio warning test'; END $$"));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(nfd);
    PQfinish(fc);
    CHECK(tu_sh("grep -q '^ts=.*level=info event=db_notice text=\"NOTICE:  folio notice test\"' '%s' &&"
                " grep -q '^ts=.*level=warn event=db_notice text=\"WARNING:  folio warning test\"' '%s' &&"
                " ! grep -v '^ts=' '%s' | grep -q .", nlog, nlog, nlog) == 0,
          "server notices not logged as logfmt; see %s", nlog);
    cnt[0] = 0;
    tu_sh_out(cnt, sizeof cnt, "grep -c 'prepared statement \"folio_' '%s' || true", srvlog);
    CHECK(atol(cnt) == prep_errors_before, "%ld new 'prepared statement does not exist' errors in %s",
          atol(cnt) - prep_errors_before, srvlog);

    /* 3. --max-pixels 100000 against a 1000x500 page. */
    long long jbig = wt_add_doc(c, "big", inv, inv_len, 1, sha);
    REQUIRE(jbig > 0, "plant big");
    const char *const cap_args[] = {"--lease", "3", "--poll", "0.2", "--ocr-threads", "1", "--max-pixels", "100000",
                                    NULL};
    w = wt_spawn_worker(g_db, NULL, log, cap_args);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM folio.jobs WHERE id = %lld AND state = 'dead' AND attempts = 1"
                              " AND last_error LIKE '%%1000x500 = 0.5 megapixels, over the limit of 0.1 megapixels%%'", jbig);
    CHECK(wt_wait_for(c, sql, 1, 30000) == 0, "page over --max-pixels not refused from its header; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results") == 0, "a result for a page over --max-pixels");
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 15000) == 0, "worker exit");

#ifdef FOLIO_FAULT_INJECTION
    /* 4. sleep_ms:60000 holds the job (cancellably, like a slow page); a
     * 2 s budget with a 3 s lease (renewed every second). */
    PQclear(PQexec(c, "TRUNCATE folio.results, folio.jobs, folio.documents, folio.workers CASCADE"));
    long long jslow = wt_add_doc(c, "slow", inv, inv_len, 3, sha);
    REQUIRE(jslow > 0, "plant slow");
    const char *const budget_args[] = {"--lease", "3", "--poll", "0.2", "--ocr-threads", "1", "--retry-base", "30",
                                       "--job-deadline", "2", NULL};
    w = wt_spawn_worker(g_db, "sleep_ms:60000", log, budget_args);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM folio.jobs WHERE id = %lld AND state = 'queued' AND attempts = 1"
                              " AND last_error LIKE 'job ran past its time budget of 2 s%%'", jslow);
    CHECK(wt_wait_for(c, sql, 1, 20000) == 0, "job over its budget not failed with the reason; see %s", log);
    CHECK(tu_sh("grep -q 'event=job_over_budget job=%lld' '%s'", jslow, log) == 0, "no job_over_budget; see %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 15000) == 0, "worker exit");
#endif

    free(inv);
    PQfinish(c);
    return tu_finish();
}
