/* Chaos: 300 documents, 4 real worker processes, kill -9 of a random worker
 * every 1–2.5 s with a replacement started at once, one immediate
 * (crash-style) restart of the PostgreSQL server in the middle, and 3
 * planted poison documents that kill whichever worker claims them. The
 * workers log in as a folio_worker role (schema 012).
 *
 * Runs on its OWN cluster (ops/pg-local.sh in a private folder): restarting
 * the shared fixture cluster would break the tests running beside it.
 *
 * At the end: every job done, except the poison ones, which are dead after
 * exactly max_attempts; exactly one result per (document, model key); no
 * result for a dead job; every result written by the job's final claim
 * (token and attempt), i.e. no stale token ever wrote. Counts are printed.
 * Bounded: the chaos phase stops after 60 s, the test gives up at 300 s. */
#include "pipeline/db/db.h"
#include "tests/pg/worker_testlib.h"

#include <time.h>

#define NDOCS 300
#define NPOISON 3
#define NWORKERS 4

static char g_dir[256], g_db[512], g_wdb[512];

static const char *runas(void) { return geteuid() == 0 ? "runuser -u postgres --" : ""; }

static int pg_start(void)
{
    return tu_sh("bash %s/ops/pg-local.sh start %s 5441 --fast >/dev/null", getenv("FOLIO_SOURCE_DIR"), g_dir);
}

/* Immediate stop = the server crashes: no checkpoint, connections cut,
 * WAL replayed at the next start. */
static int pg_crash(void)
{
    return tu_sh("PGB=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1); %s $PGB/pg_ctl -D %s/data -m immediate -w stop >/dev/null",
                 runas(), g_dir);
}

static void pg_stop(void) { tu_sh("bash %s/ops/pg-local.sh stop %s >/dev/null", getenv("FOLIO_SOURCE_DIR"), g_dir); }

static PGconn *connect_retry(void)
{
    for (int i = 0; i < 100; i++) {
        PGconn *c = PQconnectdb(g_db);
        if (PQstatus(c) == CONNECTION_OK)
            return c;
        PQfinish(c);
        folio_sleep_ms(100);
    }
    return NULL;
}

static const char *const WORKER_ARGS[] = {"--lease", "2", "--poll", "0.3", "--retry-base", "0.2", "--retry-max", "2",
                                          "--ocr-threads", "1", "--grace", "5", NULL};

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/folio-chaos-%d", (int)getpid());
    tu_sh("rm -rf %s", g_dir);
    REQUIRE_OK(pg_start() == 0, "private cluster did not start in %s", g_dir);
    snprintf(g_db, sizeof g_db, "host=%s port=5441 dbname=folio user=%s connect_timeout=5", g_dir,
             geteuid() == 0 ? "postgres" : getenv("USER") ? getenv("USER") : "postgres");
    PGconn *c = connect_retry();
    REQUIRE(c, "connect %s", g_db);
    struct folio_err err = {0};
    int applied = 0;
    struct migrate_opts mo = {0};
    REQUIRE_OK(migrate_run(c, &mo, &applied, &err) == 0, "migrate: %s", err.msg);
    /* The workers log in as folio_worker (schema 012: every write through
     * the owner's token- and worker-checked functions), as a fleet would. */
    PGresult *lr = PQexec(c, "CREATE ROLE folio_chaos_worker LOGIN; GRANT folio_worker TO folio_chaos_worker");
    REQUIRE_OK(PQresultStatus(lr) == PGRES_COMMAND_OK, "worker login: %s", PQerrorMessage(c));
    PQclear(lr);
    snprintf(g_wdb, sizeof g_wdb, "host=%s port=5441 dbname=folio user=folio_chaos_worker connect_timeout=5", g_dir);

    const char *dir = tu_scratch("chaos");
    uint8_t *page = NULL;
    size_t page_len = 0;
    REQUIRE_OK(wt_render(dir, "page", "INVOICE 2231\nAmount due: 12.50\n", 700, 250, &page, &page_len) == 0,
               "render page");
    PQclear(PQexec(c, "BEGIN"));
    for (int i = 0; i < NDOCS; i++) {
        char tag[32], sha[65];
        snprintf(tag, sizeof tag, "chaos-%d", i);
        int poison = i % (NDOCS / NPOISON) == 7;
        REQUIRE_OK((poison ? wt_add_poison(c, tag, 3, sha) : wt_add_doc(c, tag, page, page_len, 8, sha)) > 0,
                   "plant document %d", i);
    }
    PQclear(PQexec(c, "COMMIT"));
    free(page);
    REQUIRE_OK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued'") == NDOCS, "queued");

    char log[1100];
    snprintf(log, sizeof log, "%s/workers.log", dir);
    pid_t pids[NWORKERS];
    for (int i = 0; i < NWORKERS; i++)
        pids[i] = wt_spawn_worker(g_wdb, "crash_on_document:" WT_POISON ",sleep_ms:250", log, WORKER_ARGS);

    unsigned int seed = (unsigned int)time(NULL);
    int kills = 0, crashes = 0, spawned = NWORKERS, pg_restarts = 0;
    double t0 = folio_mono_ms(), next_kill = t0 + 1500, pg_restart_at = t0 + 8000;
    long long finished = 0;
    for (;;) {
        double now = folio_mono_ms();
        /* Replace workers that died by themselves (poison). */
        for (int i = 0; i < NWORKERS; i++) {
            int st;
            if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                crashes++;
                pids[i] = wt_spawn_worker(g_wdb, "crash_on_document:" WT_POISON ",sleep_ms:250", log, WORKER_ARGS);
                spawned++;
            }
        }
        if (now - t0 < 60000 && now >= next_kill) {
            int v = rand_r(&seed) % NWORKERS;
            kill(pids[v], SIGKILL);
            waitpid(pids[v], NULL, 0);
            kills++;
            pids[v] = wt_spawn_worker(g_wdb, "crash_on_document:" WT_POISON ",sleep_ms:250", log, WORKER_ARGS);
            spawned++;
            next_kill = now + 1000 + rand_r(&seed) % 1500;
        }
        if (!pg_restarts && now >= pg_restart_at) {
            if (c)
                PQfinish(c);
            c = NULL;
            CHECK(pg_crash() == 0, "crash-stop the server");
            folio_sleep_ms(500);
            CHECK(pg_start() == 0, "restart the server");
            pg_restarts++;
            fprintf(stderr, "chaos: server restarted at %.1f s\n", (now - t0) / 1000);
        }
        if (!c || PQstatus(c) != CONNECTION_OK) {
            if (c)
                PQfinish(c);
            c = connect_retry();
        }
        finished = c ? wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state IN ('done', 'dead')") : -1;
        if (finished == NDOCS || now - t0 > 300000)
            break;
        folio_sleep_ms(200);
    }
    double elapsed = (folio_mono_ms() - t0) / 1000;
    folio_sleep_ms(1000); /* a replacement started just now must reach its signal set-up */
    for (int i = 0; i < NWORKERS; i++)
        kill(pids[i], SIGTERM);
    int clean = 0;
    for (int i = 0; i < NWORKERS; i++)
        clean += wt_wait_exit(pids[i], 15000) == 0;

    REQUIRE(c, "no connection at the end");
    long long done = wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'");
    long long dead = wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'dead'");
    long long dead_poison = wt_q1(c, "SELECT count(*) FROM folio.jobs j JOIN folio.documents d ON d.id = j.document_id"
                                     " WHERE j.state = 'dead' AND encode(d.sha256, 'hex') LIKE '" WT_POISON "%' AND j.attempts = 3");
    long long results = wt_q1(c, "SELECT count(*) FROM folio.results");
    long long distinct = wt_q1(c, "SELECT count(DISTINCT (document_id, model_key)) FROM folio.results");
    long long stale = wt_q1(c, "SELECT count(*) FROM folio.results r JOIN folio.jobs j ON j.id = r.job_id"
                               " WHERE r.lease_token IS DISTINCT FROM j.claim_token OR r.attempt <> j.attempts");
    long long orphans = wt_q1(c, "SELECT count(*) FROM folio.jobs j WHERE (j.state = 'done') <> EXISTS"
                                 " (SELECT 1 FROM folio.results r WHERE r.document_id = j.document_id"
                                 "  AND r.model_key = j.model_key)");
    long long over = wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE attempts > max_attempts");
    long long attempts = wt_q1(c, "SELECT sum(attempts) FROM folio.jobs");
    long long retried = wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done' AND attempts > 1");
    long long lost = wt_q1(c, "SELECT coalesce(sum(jobs_lost), 0) FROM folio.workers");
    long long wrows = wt_q1(c, "SELECT count(*) FROM folio.workers");
    printf("chaos: %.1f s, docs=%d workers=%d spawned=%d kill9=%d poison_crashes=%d pg_restarts=%d "
           "clean_exits=%d/%d\n",
           elapsed, NDOCS, NWORKERS, spawned, kills, crashes, pg_restarts, clean, NWORKERS);
    printf("chaos: done=%lld dead=%lld (poison dead at 3 attempts: %lld) results=%lld distinct=%lld "
           "stale_writes=%lld done_without_result_or_vice_versa=%lld attempts=%lld retried_done=%lld "
           "lost_by_workers=%lld worker_rows=%lld\n",
           done, dead, dead_poison, results, distinct, stale, orphans, attempts, retried, lost, wrows);

    CHECK(finished == NDOCS, "only %lld of %d jobs finished within the bound", finished, NDOCS);
    CHECK(done == NDOCS - NPOISON, "done %lld, want %d", done, NDOCS - NPOISON);
    CHECK(dead == NPOISON && dead_poison == NPOISON, "dead %lld (poison %lld), want %d", dead, dead_poison, NPOISON);
    CHECK(results == NDOCS - NPOISON && distinct == results, "results %lld distinct %lld", results, distinct);
    CHECK(stale == 0, "%lld results not written by the final claim", stale);
    CHECK(orphans == 0, "%lld jobs whose state disagrees with the results", orphans);
    CHECK(over == 0, "%lld jobs over max_attempts", over);
    CHECK(kills >= 8, "only %d kills", kills);
    CHECK(crashes >= NPOISON, "poison crashed %d workers, want >= %d", crashes, NPOISON);
    CHECK(pg_restarts == 1, "server restarts %d", pg_restarts);
    CHECK(clean == NWORKERS, "%d of %d workers exited 0 on SIGTERM", clean, NWORKERS);

    PQfinish(c);
    pg_stop();
    if (!tu_failures)
        tu_sh("rm -rf %s", g_dir);
    return tu_finish();
}
