/* --pooler transaction through a real PgBouncer (Debian 12: 1.18) in
 * transaction mode with ONE server connection: every client shares one
 * server session, so whatever a client leaves in a session (a named
 * prepared statement, a SET, a LISTEN) is visible to the next one.
 *
 *  1. Queue calls on pooled connections (claim, heartbeat, batched and
 *     single completion, failure, release, reaper) work and leave nothing
 *     behind; db_pooled tells the two kinds of connection apart.
 *  2. End to end through the pooler: `folio ingest --watch --pooler
 *     transaction` and `folio worker --pooler transaction --listen-db
 *     DIRECT --claim-batch 3`; the worker polls only every 30 s, so prompt
 *     results prove the NOTIFY reached it over the direct LISTEN connection;
 *     with a slow first result write, the two results that finish meanwhile
 *     go in one transaction.
 *     Afterwards the shared server session has no prepared statement, no
 *     LISTEN and no changed setting. A worker behind the pooler without
 *     --listen-db finds work by polling and LISTENs nowhere.
 *  3. Control: a direct-mode connection through the same pooler does leave
 *     its prepared statements and SET there (the leak checks can see one).
 *  4. A bad --pooler value is a usage error that names it. */
#include "pipeline/db/db.h"
#include "pipeline/db/migrate.h"
#include "pipeline/db/queue.h"
#include "tests/pg/worker_testlib.h"

static char g_pgb[256];

static void pgb_stop(void) { tu_sh("bash %s/ops/pgbouncer-local.sh stop %s >/dev/null", getenv("FOLIO_SOURCE_DIR"), g_pgb); }

static PGconn *pooled(const char *conninfo, enum db_pooler mode)
{
    PGconn *c = NULL;
    struct folio_err err = {0};
    if (db_open(conninfo, mode, "test_pooler", &c, &err)) {
        folio_err_print(stderr, &err);
        return NULL;
    }
    return c;
}

/* A setting of the shared server session, read through the pooler. */
static int setting_is(PGconn *c, const char *name, const char *want)
{
    const char *v[] = {name};
    PGresult *r = PQexecParams(c, "SELECT current_setting($1)", 1, NULL, v, NULL, NULL, 0);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), want) == 0;
    if (!ok)
        fprintf(stderr, "%s = %s, want %s\n", name, PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : "?", want);
    PQclear(r);
    return ok;
}

static void drop_file(const char *inbox, const char *name, const uint8_t *data, size_t len)
{
    char tmp[1200], final[1200];
    snprintf(tmp, sizeof tmp, "%s/.%s.part", inbox, name);
    snprintf(final, sizeof final, "%s/%s", inbox, name);
    FILE *f = fopen(tmp, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
    CHECK(f && rename(tmp, final) == 0, "drop %s into the inbox", name);
}

int main(void)
{
    char direct[512], viapool[700];
    REQUIRE_OK(tu_pg_fresh_db("folio_test_pooler", direct, sizeof direct) == 0, "fresh db");
    snprintf(g_pgb, sizeof g_pgb, "/tmp/folio-pgb-%d", (int)getpid());
    tu_sh("rm -rf %s", g_pgb);
    REQUIRE_OK(tu_sh("bash %s/ops/pgbouncer-local.sh start %s %s %s 6432 --pool-size 1 >/dev/null",
                     getenv("FOLIO_SOURCE_DIR"), g_pgb, getenv("FOLIO_TEST_PGHOST"), getenv("FOLIO_TEST_PGPORT")) == 0,
               "pgbouncer did not start in %s", g_pgb);
    /* the fresh database's name and user, through the pooler's socket */
    const char *dbn = strstr(direct, "dbname=");
    snprintf(viapool, sizeof viapool, "host=%s port=6432 %s", g_pgb, dbn ? dbn : "");

    PGconn *d = PQconnectdb(direct);
    REQUIRE_OK(PQstatus(d) == CONNECTION_OK, "connect direct: %s", PQerrorMessage(d));
    struct folio_err err = {0};
    int applied = 0;
    struct migrate_opts mo = {0};
    REQUIRE_OK(migrate_run(d, &mo, &applied, &err) == 0, "migrate: %s", err.msg);

    /* 1. queue calls on pooled connections */
    PGconn *a = pooled(viapool, DB_POOLER_TRANSACTION), *b = pooled(viapool, DB_POOLER_TRANSACTION);
    REQUIRE_OK(a && b, "connect through the pooler");
    CHECK(db_pooled(a) && !db_pooled(d), "db_pooled: pooled %d direct %d", db_pooled(a), db_pooled(d));
    CHECK(setting_is(a, "TimeZone", "UTC"), "session time zone through the pooler");
    REQUIRE_OK(wt_q1(d, "WITH x AS (INSERT INTO folio.documents (sha256, media_type, bytes, pages)"
                        "  SELECT sha256(('pooled' || i)::bytea), 'image/png', 1, 1 FROM generate_series(1, 8) i"
                        "  RETURNING id),"
                        " y AS (INSERT INTO folio.jobs (document_id) SELECT id FROM x RETURNING 1)"
                        " SELECT count(*) FROM y") == 8,
               "seed");
    struct queue_cfg q;
    queue_cfg_default(&q);
    q.lease_s = 30;
    struct queue_job j[8];
    int n = 0;
    REQUIRE_OK(queue_claim(a, &q, 0, 5, j, &n, &err) == 0 && n == 5, "pooled claim of 5: %s", err.msg);
    CHECK(wt_q1(d, "SELECT count(DISTINCT lease_token) FROM folio.jobs WHERE state = 'running' AND attempts = 1"
                   " AND lease_token = claim_token AND lease_expires_at > now() + interval '20 seconds'") == 5,
          "pooled claim of 5 (folio.claim_jobs): 5 distinct tokens, attempt 1, lease from now()");
    int64_t ids[5];
    char toks[5][37];
    unsigned char alive[5];
    for (int i = 0; i < 5; i++) {
        ids[i] = j[i].id;
        memcpy(toks[i], j[i].token, 37);
    }
    REQUIRE_OK(queue_heartbeat(b, &q, 0, NULL, ids, (const char(*)[37])toks, 5, alive, &err) == 0, "hb: %s", err.msg);
    CHECK(alive[0] && alive[4], "pooled heartbeat lost leases");
    struct queue_result res = {.label = "invoice", .confidence = 0.9, .scores_json = "{\"invoice\":0.9}",
                               .engine_path = "ocr+rules", .fallback_reason = "test", .ocr_confidence = -1,
                               .ocr_orientation = -1, .timings_json = "{}"};
    const struct queue_job *jp[3] = {&j[0], &j[1], &j[2]};
    const struct queue_result *rp[3] = {&res, &res, &res};
    int acc[3] = {0, 0, 0};
    REQUIRE_OK(queue_complete_many(b, jp, 0, rp, 3, acc, &err) == 0, "pooled batch: %s", err.msg);
    CHECK(acc[0] + acc[1] + acc[2] == 3, "pooled batch accepted %d of 3", acc[0] + acc[1] + acc[2]);
    REQUIRE_OK(queue_complete(a, &j[3], 0, &res, &acc[0], &err) == 0 && acc[0], "pooled complete: %s", err.msg);
    char st[8];
    REQUIRE_OK(queue_fail(b, &q, &j[4], "boom", st, &err) == 0 && strcmp(st, "queued") == 0, "pooled fail: %s", err.msg);
    REQUIRE_OK(queue_claim(a, &q, 0, 1, j, &n, &err) == 0 && n == 1, "pooled claim: %s", err.msg);
    int rel = 0;
    REQUIRE_OK(queue_release(b, &j[0], &rel, &err) == 0 && rel == 1, "pooled release: %s", err.msg);
    int ran = 0, requeued = 0, dead = 0;
    REQUIRE_OK(queue_reap(a, &q, &ran, &requeued, &dead, &err) == 0, "pooled reap: %s", err.msg);
    CHECK(wt_q1(d, "SELECT count(*) FROM folio.results r JOIN folio.jobs j ON j.id = r.job_id"
                   " WHERE j.state = 'done' AND r.lease_token = j.claim_token") == 4, "four results by their claims");
    CHECK(wt_q1(a, "SELECT count(*) FROM pg_prepared_statements") == 0, "pooled queue calls left prepared statements");
    CHECK(setting_is(a, "plan_cache_mode", "auto"), "pooled queue calls changed plan_cache_mode");
    /* an old schema: the error says what to do */
    REQUIRE_OK(wt_exec(d, "ALTER FUNCTION folio.claim_jobs(text, float8, bigint, integer, integer)"
                         " RENAME TO claim_jobs_hidden"), "hide claim_jobs");
    CHECK(queue_claim(a, &q, 0, 1, j, &n, &err) == FOLIO_ESTATE && strstr(err.hint, "folio migrate"),
          "claim without schema 007: %s / %s", err.msg, err.hint);
    REQUIRE_OK(wt_exec(d, "ALTER FUNCTION folio.claim_jobs_hidden(text, float8, bigint, integer, integer)"
                         " RENAME TO claim_jobs"), "restore claim_jobs");
    /* the pooled completion runs in folio.complete_job (schema 009): its
     * plan stays in the server session instead of being made per call */
    REQUIRE_OK(queue_claim(a, &q, 0, 1, j, &n, &err) == 0 && n == 1, "claim for the completion: %s", err.msg);
    REQUIRE_OK(wt_exec(d, "ALTER FUNCTION folio.complete_job RENAME TO complete_job_hidden"), "hide complete_job");
    CHECK(queue_complete(a, &j[0], 0, &res, &acc[0], &err) == FOLIO_ESTATE && !acc[0] &&
              strstr(err.msg, "complete_job") && strstr(err.hint, "folio migrate"),
          "pooled completion without schema 009: %s / %s", err.msg, err.hint);
    REQUIRE_OK(wt_exec(d, "ALTER FUNCTION folio.complete_job_hidden RENAME TO complete_job"), "restore complete_job");
    CHECK(queue_complete(a, &j[0], 0, &res, &acc[0], &err) == 0 && acc[0], "pooled complete via the function: %s",
          err.msg);
    CHECK(queue_complete(b, &j[0], 0, &res, &acc[0], &err) == 0 && acc[0],
          "a retried pooled completion (lost COMMIT ack) is recognised as written: %s", err.msg);
    j[0].token[0] = j[0].token[0] == 'a' ? 'b' : 'a';
    CHECK(queue_complete(b, &j[0], 0, &res, &acc[0], &err) == 0 && !acc[0],
          "a pooled completion with a foreign token is refused");
    PQclear(PQexec(d, "TRUNCATE folio.results, folio.jobs, folio.documents CASCADE"));

    /* 2. ingest + worker through the pooler, LISTEN on a direct connection */
    const char *scratch = tu_scratch("pooler");
    char inbox[1100], log[1100];
    snprintf(inbox, sizeof inbox, "%s/inbox", scratch);
    snprintf(log, sizeof log, "%s/procs.log", scratch);
    REQUIRE_OK(folio_mkdirs(inbox, &err) == 0, "mkdir inbox");
    static const char *const texts[3] = {"MEMORANDUM\nTo: all staff\nFrom: the board\n",
                                         "MEMORANDUM\nTo: the lab\nFrom: facilities\n",
                                         "MEMORANDUM\nTo: sales\nFrom: finance\n"};
    uint8_t *pages[3] = {NULL, NULL, NULL};
    size_t lens[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "scan%d", i);
        REQUIRE_OK(wt_render(scratch, name, texts[i], 900, 400, &pages[i], &lens[i]) == 0, "render %s", name);
    }
    const char *const ingest_args[] = {"--pooler", "transaction", "--watch", "--stable-ms", "300", inbox, NULL};
    const char *const worker_args[] = {"--pooler", "transaction", "--listen-db", direct, "--poll", "30",
                                       "--lease", "10", "--ocr-threads", "3", "--claim-batch", "3", NULL};
    pid_t wi = wt_spawn("ingest", viapool, NULL, log, ingest_args);
    /* A slow first result write (1.5 s round trip) lets the other two
     * threads finish meanwhile: they must then go in one write. */
    pid_t ww = wt_spawn_worker(viapool, "slow_results_ms:1500", log, worker_args);
    CHECK(wt_wait_for(d, "SELECT count(*) FROM folio.workers WHERE state = 'ocr-only'", 1, 15000) == 0,
          "worker did not register through the pooler; see %s", log);
    folio_sleep_ms(1500); /* both idle: ingest watching, worker in its 30 s poll wait */
    double t0 = folio_mono_ms();
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "scan%d.tif", i);
        drop_file(inbox, name, pages[i], lens[i]);
        free(pages[i]);
    }
    CHECK(wt_wait_for(d, "SELECT count(*) FROM folio.results WHERE label = 'memo'", 3, 20000) == 0,
          "3 results not there within 20 s (the worker polls every 30 s: NOTIFY did not reach it); see %s", log);
    printf("pooler: inbox to 3 results: %.1f s\n", (folio_mono_ms() - t0) / 1000);
    CHECK(wt_q1(d, "SELECT count(*) FROM folio.results r JOIN folio.jobs j ON j.id = r.job_id"
                   " WHERE r.lease_token = j.claim_token AND j.state = 'done'") == 3, "results by their claims");
    /* rows written by one transaction share xmin */
    long long writes = wt_q1(d, "SELECT count(DISTINCT xmin::text) FROM folio.results");
    printf("pooler: 3 results in %lld transactions\n", writes);
    CHECK(writes == 2, "3 results in %lld transactions, want 2 (one alone, then two grouped)", writes);
    kill(ww, SIGTERM);
    kill(wi, SIGTERM);
    CHECK(wt_wait_exit(ww, 15000) == 0, "worker exit");
    CHECK(wt_wait_exit(wi, 15000) >= 0, "ingest exit");
    char out[256] = "";
    tu_sh_out(out, sizeof out, "grep -c 'event=worker_started.*pooler=transaction listen=listen-db' %s", log);
    CHECK(atoi(out) == 1, "worker_started line does not report pooler and listen connection: %s", out);
    CHECK(wt_q1(a, "SELECT count(*) FROM pg_prepared_statements") == 0,
          "ingest or worker left prepared statements in the shared server session");
    CHECK(wt_q1(a, "SELECT count(*) FROM pg_listening_channels()") == 0, "a LISTEN went through the pooler");
    CHECK(setting_is(a, "plan_cache_mode", "auto"), "plan_cache_mode changed through the pooler");

    /* 2b. behind the pooler without --listen-db: polling finds the work,
     * and no LISTEN is left in the shared server session */
    REQUIRE_OK(wt_exec(d, "INSERT INTO folio.jobs (document_id, model_key)"
                         " SELECT id, 'second' FROM folio.documents LIMIT 1"), "queue a second model key");
    const char *const poll_args[] = {"--pooler", "transaction", "--poll", "0.3", "--lease", "5", "--ocr-threads", "1",
                                     "--model-key", "second", NULL};
    ww = wt_spawn_worker(viapool, NULL, log, poll_args);
    CHECK(wt_wait_for(d, "SELECT count(*) FROM folio.results WHERE model_key = 'second'", 1, 20000) == 0,
          "polling worker behind the pooler did not finish the job; see %s", log);
    CHECK(wt_q1(a, "SELECT count(*) FROM pg_listening_channels()") == 0, "a LISTEN went through the pooler");
    kill(ww, SIGTERM);
    CHECK(wt_wait_exit(ww, 15000) == 0, "polling worker exit");
    tu_sh_out(out, sizeof out, "grep -c 'event=worker_started.*pooler=transaction listen=off' %s", log);
    CHECK(atoi(out) == 1, "worker_started line does not say listen=off: %s", out);

    /* 3. control: the direct protocol through the same pooler leaks */
    PGconn *x = pooled(viapool, DB_POOLER_NONE);
    REQUIRE_OK(x != NULL, "direct-mode connection through the pooler");
    REQUIRE_OK(queue_claim(x, &q, 0, 1, j, &n, &err) == 0, "direct-mode claim: %s", err.msg);
    CHECK(wt_q1(a, "SELECT count(*) FROM pg_prepared_statements") > 0, "control: no prepared statement seen");
    CHECK(setting_is(a, "plan_cache_mode", "force_generic_plan"), "control: SET not seen");

    /* 4. bad mode */
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s worker --pooler statement --db '%s' >%s/bad.txt 2>&1", tu_folio_bin(), direct, scratch);
    int rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "bad --pooler exit %d, want 2", WEXITSTATUS(rc));
    tu_sh_out(out, sizeof out, "grep -c \"unknown pooler mode 'statement'\" %s/bad.txt", scratch);
    CHECK(atoi(out) == 1, "bad --pooler message does not name the value");

    PQfinish(x);
    PQfinish(a);
    PQfinish(b);
    PQfinish(d);
    pgb_stop();
    if (!tu_failures)
        tu_sh("rm -rf %s", g_pgb);
    return tu_finish();
}
