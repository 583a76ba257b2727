/* Queue protocol against a real PostgreSQL server (pipeline/db/queue.c):
 * disjoint concurrent claims, lease expiry and the late worker's refused
 * completion, token-less and stale writes, backoff then dead, release,
 * the reaper's guard and dead-at-max, retention cleanup, heartbeats. */
#include "pipeline/db/db.h"
#include "pipeline/db/migrate.h"
#include "pipeline/db/queue.h"
#include "tests/support/testutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* REQUIRE evaluates its condition twice; calls with side effects go
 * through this, which evaluates once. */
#define REQUIRE_OK(cond, ...)                                                                \
    do {                                                                                     \
        int rq_ = (cond);                                                                    \
        REQUIRE(rq_, __VA_ARGS__);                                                           \
    } while (0)

static char g_conninfo[512];

static PGconn *conn(void)
{
    PGconn *c = NULL;
    struct folio_err err = {0};
    if (db_connect(g_conninfo, "test_queue", &c, &err)) {
        folio_err_print(stderr, &err);
        return NULL;
    }
    return c;
}

/* First column of the first row as a long (or -1). */
static long long q1(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
        v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    else if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return v;
}

static int sql(PGconn *c, const char *s)
{
    PGresult *r = PQexec(c, s);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "sql failed: %s: %s", s, PQerrorMessage(c));
    PQclear(r);
    return ok ? 0 : -1;
}

/* Empties the queue and adds n documents with one job each. */
static int seed(PGconn *c, int n, int max_attempts)
{
    char s[512];
    snprintf(s, sizeof s,
             "TRUNCATE folio.results, folio.jobs, folio.documents CASCADE;"
             "INSERT INTO folio.documents (sha256, media_type, bytes, pages)"
             " SELECT sha256(('doc' || i)::bytea), 'image/png', 1, 1 FROM generate_series(1, %d) i;"
             "INSERT INTO folio.jobs (document_id, max_attempts) SELECT id, %d FROM folio.documents;",
             n, max_attempts);
    return sql(c, s);
}

static struct queue_result simple_result(void)
{
    struct queue_result r = {.label = "invoice", .confidence = 0.9, .scores_json = "{\"invoice\":0.9}",
                             .engine_path = "ocr+rules", .fallback_reason = "no model configured",
                             .ocr_text = "INVOICE", .ocr_confidence = 91, .ocr_orientation = 0,
                             .timings_json = "{\"total_ms\":1}"};
    return r;
}

struct claimer {
    struct queue_cfg q;
    int64_t ids[400];
    int n;
    int errors;
};

static void *claim_all(void *arg)
{
    struct claimer *cl = arg;
    PGconn *c = conn();
    if (!c) {
        cl->errors++;
        return NULL;
    }
    struct queue_job jobs[3];
    struct queue_result res = simple_result();
    for (;;) {
        int n = 0;
        struct folio_err err = {0};
        if (queue_claim(c, &cl->q, 0, 3, jobs, &n, &err)) {
            cl->errors++;
            break;
        }
        if (n == 0)
            break;
        for (int i = 0; i < n; i++) {
            cl->ids[cl->n++] = jobs[i].id;
            int acc = 0;
            if (queue_complete(c, &jobs[i], 0, &res, &acc, &err) || !acc)
                cl->errors++;
        }
    }
    PQfinish(c);
    return NULL;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    REQUIRE_OK(tu_pg_fresh_db("folio_test_queue", g_conninfo, sizeof g_conninfo) == 0, "fresh db");
    PGconn *a = conn(), *b = conn();
    REQUIRE_OK(a && b, "connect");
    struct folio_err err = {0};
    int applied = 0;
    struct migrate_opts mo = {0};
    REQUIRE_OK(migrate_run(a, &mo, &applied, &err) == 0, "migrate: %s", err.msg);

    struct queue_cfg q;
    queue_cfg_default(&q);
    q.lease_s = 30;
    q.retry_base_s = 0.2;
    q.retry_max_s = 1;

    /* 1. Two workers claiming concurrently never get the same job, and
     * between them they get every job. */
    REQUIRE_OK(seed(a, 200, 5) == 0, "seed");
    static struct claimer c1, c2;
    c1.q = c2.q = q;
    pthread_t t1, t2;
    pthread_create(&t1, NULL, claim_all, &c1);
    pthread_create(&t2, NULL, claim_all, &c2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(c1.errors == 0 && c2.errors == 0, "claim/complete errors %d %d", c1.errors, c2.errors);
    CHECK(c1.n + c2.n == 200, "claimed %d + %d of 200", c1.n, c2.n);
    CHECK(c1.n > 0 && c2.n > 0, "both workers got work (%d, %d)", c1.n, c2.n);
    int64_t all[400];
    memcpy(all, c1.ids, sizeof(int64_t) * (size_t)c1.n);
    memcpy(all + c1.n, c2.ids, sizeof(int64_t) * (size_t)c2.n);
    qsort(all, (size_t)(c1.n + c2.n), sizeof all[0], cmp64);
    int dup = 0;
    for (int i = 1; i < c1.n + c2.n; i++)
        dup += all[i] == all[i - 1];
    CHECK(dup == 0, "%d jobs claimed twice", dup);
    CHECK(q1(a, "SELECT count(*) FROM folio.results") == 200, "one result per job");
    CHECK(q1(a, "SELECT count(*) FROM folio.jobs WHERE state = 'done' AND attempts = 1") == 200, "all done once");
    CHECK(q1(a, "SELECT count(*) FROM folio.results r JOIN folio.jobs j ON j.id = r.job_id"
                " WHERE r.lease_token IS DISTINCT FROM j.claim_token") == 0, "result tokens match claims");

    /* 2. An expired lease is reaped and re-claimed; the late worker's
     * completion and heartbeat are refused; the new owner's lands. */
    REQUIRE_OK(seed(a, 1, 5) == 0, "seed");
    struct queue_cfg shortq = q;
    shortq.lease_s = 0.2;
    shortq.retry_base_s = 0;
    struct queue_job ja, jb;
    int n = 0;
    REQUIRE_OK(queue_claim(a, &shortq, 0, 1, &ja, &n, &err) == 0 && n == 1, "claim A: %s", err.msg);
    CHECK(ja.attempt == 1, "attempt counted at claim: %d", ja.attempt);
    int ran = 0, requeued = 0, dead = 0;
    REQUIRE_OK(queue_reap(b, &shortq, &ran, &requeued, &dead, &err) == 0, "reap: %s", err.msg);
    CHECK(ran == 1 && requeued == 0, "live lease reaped (ran %d requeued %d)", ran, requeued);
    folio_sleep_ms(400);
    REQUIRE_OK(queue_reap(b, &shortq, &ran, &requeued, &dead, &err) == 0, "reap: %s", err.msg);
    CHECK(ran == 1 && requeued == 1 && dead == 0, "expired lease not re-queued (%d %d %d)", ran, requeued, dead);
    CHECK(q1(a, "SELECT count(*) FROM folio.jobs WHERE last_error LIKE 'lease expired%'") == 1, "reap reason kept");
    REQUIRE_OK(queue_claim(b, &q, 0, 1, &jb, &n, &err) == 0 && n == 1, "claim B: %s", err.msg);
    CHECK(jb.id == ja.id && jb.attempt == 2 && strcmp(jb.token, ja.token) != 0, "re-claim: attempt %d", jb.attempt);
    struct queue_result res = simple_result();
    int acc = -1;
    REQUIRE_OK(queue_complete(a, &ja, 0, &res, &acc, &err) == 0, "late complete: %s", err.msg);
    CHECK(acc == 0, "late worker's completion accepted");
    CHECK(q1(a, "SELECT count(*) FROM folio.results") == 0, "late worker wrote a result");
    unsigned char alive[1] = {1};
    REQUIRE_OK(queue_heartbeat(a, &q, 0, NULL, &ja.id, (const char(*)[37])ja.token, 1, alive, &err) == 0, "hb: %s", err.msg);
    CHECK(alive[0] == 0, "late worker's heartbeat extended a lease it lost");
    REQUIRE_OK(queue_heartbeat(b, &q, 0, NULL, &jb.id, (const char(*)[37])jb.token, 1, alive, &err) == 0, "hb: %s", err.msg);
    CHECK(alive[0] == 1, "owner's heartbeat refused");
    CHECK(q1(a, "SELECT count(*) FROM folio.jobs WHERE lease_expires_at > now() + interval '20 seconds'") == 1,
          "heartbeat extended the lease from the database clock");
    res.label = "letter";
    REQUIRE_OK(queue_complete(b, &jb, 0, &res, &acc, &err) == 0 && acc == 1, "owner complete: %s", err.msg);
    CHECK(q1(a, "SELECT count(*) FROM folio.results WHERE label = 'letter' AND attempt = 2") == 1, "owner's result");
    /* A retried completion (lost COMMIT acknowledgement) is recognised. */
    REQUIRE_OK(queue_complete(b, &jb, 0, &res, &acc, &err) == 0, "retry: %s", err.msg);
    CHECK(acc == 1, "retried completion of a landed result not recognised");
    CHECK(q1(a, "SELECT count(*) FROM folio.results") == 1, "retry duplicated the result");

    /* 3. Token-less and stale completions write nothing. */
    REQUIRE_OK(seed(a, 1, 5) == 0, "seed");
    REQUIRE_OK(queue_claim(a, &q, 0, 1, &ja, &n, &err) == 0 && n == 1, "claim: %s", err.msg);
    struct queue_job stale = ja;
    stale.token[0] = '\0';
    CHECK(queue_complete(a, &stale, 0, &res, &acc, &err) == FOLIO_ESTATE && acc == 0, "token-less completion");
    snprintf(stale.token, sizeof stale.token, "00000000-0000-4000-8000-000000000000");
    REQUIRE_OK(queue_complete(a, &stale, 0, &res, &acc, &err) == 0, "stale: %s", err.msg);
    CHECK(acc == 0, "stale token accepted");
    char st[8];
    REQUIRE_OK(queue_fail(a, &q, &stale, "x", st, &err) == 0, "stale fail: %s", err.msg);
    CHECK(strcmp(st, "lost") == 0, "stale failure changed the job: %s", st);
    int rel = -1;
    REQUIRE_OK(queue_release(a, &stale, &rel, &err) == 0 && rel == 0, "stale release");
    CHECK(q1(a, "SELECT count(*) FROM folio.results") == 0, "stale writes left a result");
    CHECK(q1(a, "SELECT count(*) FROM folio.jobs WHERE state = 'running' AND attempts = 1") == 1, "job untouched");
    CHECK(sql(a, "UPDATE folio.jobs SET state = 'done', lease_token = NULL WHERE lease_token = NULL") == 0 &&
              q1(a, "SELECT count(*) FROM folio.jobs WHERE state = 'running'") == 1,
          "NULL-token SQL update matched");

    /* 4. Release gives the attempt back and requeues at once. */
    REQUIRE_OK(queue_release(a, &ja, &rel, &err) == 0 && rel == 1, "release: %s", err.msg);
    CHECK(q1(a, "SELECT attempts FROM folio.jobs") == 0, "release counted the attempt");
    REQUIRE_OK(queue_claim(b, &q, 0, 1, &jb, &n, &err) == 0 && n == 1 && jb.attempt == 1, "claim after release");

    /* 5. Failure: backoff (not claimable at once), then dead at max with the
     * last error kept. */
    REQUIRE_OK(seed(a, 1, 3) == 0, "seed");
    for (int att = 1; att <= 3; att++) {
        n = 0;
        for (int tries = 0; tries < 100 && n == 0; tries++) {
            REQUIRE_OK(queue_claim(a, &q, 0, 1, &ja, &n, &err) == 0, "claim: %s", err.msg);
            if (!n)
                folio_sleep_ms(50);
        }
        REQUIRE_OK(n == 1, "job never became claimable again (attempt %d)", att);
        CHECK(ja.attempt == att, "attempt %d, expected %d", ja.attempt, att);
        char msg[64];
        snprintf(msg, sizeof msg, "decoder exploded on attempt %d", att);
        REQUIRE_OK(queue_fail(a, &q, &ja, msg, st, &err) == 0, "fail: %s", err.msg);
        if (att < 3) {
            CHECK(strcmp(st, "queued") == 0, "after attempt %d: %s", att, st);
            CHECK(q1(a, "SELECT count(*) FROM folio.jobs WHERE run_after > now()") == 1, "no backoff");
            REQUIRE_OK(queue_claim(b, &q, 0, 1, &jb, &n, &err) == 0, "claim: %s", err.msg);
            CHECK(n == 0, "claimed during backoff");
        } else {
            CHECK(strcmp(st, "dead") == 0, "after max attempts: %s", st);
        }
    }
    CHECK(q1(a, "SELECT count(*) FROM folio.jobs WHERE state = 'dead' AND attempts = 3 AND finished_at IS NOT NULL"
                " AND last_error = 'decoder exploded on attempt 3'") == 1, "dead row keeps the last error");
    /* Backoff grows: attempt n waits base * 2^(n-1) ± 50 %. */
    REQUIRE_OK(seed(a, 1, 9) == 0, "seed");
    struct queue_cfg slow = q;
    slow.retry_base_s = 100;
    slow.retry_max_s = 10000;
    REQUIRE_OK(sql(a, "UPDATE folio.jobs SET attempts = 3") == 0, "set attempts");
    REQUIRE_OK(queue_claim(a, &slow, 0, 1, &ja, &n, &err) == 0 && n == 1, "claim");
    REQUIRE_OK(queue_fail(a, &slow, &ja, "x", st, &err) == 0, "fail");
    long long wait_s = q1(a, "SELECT extract(epoch FROM run_after - now())::bigint FROM folio.jobs");
    CHECK(wait_s >= 390 && wait_s <= 1210, "attempt 4 backoff %lld s, expected 400..1200", wait_s);

    /* 6. A job whose worker keeps dying is dead after max attempts (the
     * reaper counts what the claims counted). */
    REQUIRE_OK(seed(a, 1, 2) == 0, "seed");
    for (int att = 1; att <= 2; att++) {
        REQUIRE_OK(queue_claim(a, &shortq, 0, 1, &ja, &n, &err) == 0 && n == 1, "claim %d", att);
        folio_sleep_ms(300);
        REQUIRE_OK(queue_reap(b, &shortq, &ran, &requeued, &dead, &err) == 0, "reap");
        CHECK(att < 2 ? requeued == 1 : dead == 1, "attempt %d: requeued %d dead %d", att, requeued, dead);
    }
    CHECK(q1(a, "SELECT count(*) FROM folio.jobs WHERE state = 'dead' AND attempts = 2") == 1, "poison dead");

    /* 7. The reaper's guard: while another session holds it, a reaper does
     * nothing. */
    REQUIRE_OK(seed(a, 1, 5) == 0, "seed");
    REQUIRE_OK(queue_claim(a, &shortq, 0, 1, &ja, &n, &err) == 0 && n == 1, "claim");
    folio_sleep_ms(300);
    REQUIRE_OK(sql(b, "BEGIN; SELECT pg_advisory_xact_lock(7380041739620353)") == 0, "hold guard");
    REQUIRE_OK(queue_reap(a, &shortq, &ran, &requeued, &dead, &err) == 0, "reap: %s", err.msg);
    CHECK(ran == 0 && requeued == 0, "reaper ran without the guard");
    REQUIRE_OK(sql(b, "COMMIT") == 0, "release guard");
    REQUIRE_OK(queue_reap(a, &shortq, &ran, &requeued, &dead, &err) == 0, "reap");
    CHECK(ran == 1 && requeued == 1, "reaper after guard released (%d %d)", ran, requeued);

    /* 8. Retention: old done jobs go in small batches; results and dead jobs stay. */
    REQUIRE_OK(seed(a, 120, 5) == 0, "seed");
    REQUIRE_OK(sql(a, "UPDATE folio.jobs SET state = 'done', finished_at = now() - interval '2 hours'"
                   " WHERE id % 10 <> 0;"
                   "UPDATE folio.jobs SET state = 'dead', finished_at = now() - interval '2 hours'"
                   " WHERE id % 10 = 0;"
                   "INSERT INTO folio.results (document_id, model_key, label, confidence, engine_path)"
                   " SELECT document_id, model_key, 'memo', 0.5, 'ocr+rules' FROM folio.jobs") == 0, "old jobs");
    int deleted = 0;
    REQUIRE_OK(queue_cleanup(a, 3600, 50, &deleted, &err) == 0, "cleanup: %s", err.msg);
    CHECK(deleted == 50, "first batch deleted %d", deleted);
    REQUIRE_OK(queue_cleanup(a, 3600, 50, &deleted, &err) == 0 && deleted == 50, "second batch %d", deleted);
    REQUIRE_OK(queue_cleanup(a, 3600, 50, &deleted, &err) == 0 && deleted == 8, "third batch %d", deleted);
    CHECK(q1(a, "SELECT count(*) FROM folio.jobs") == 12, "dead jobs kept");
    CHECK(q1(a, "SELECT count(*) FROM folio.results") == 120, "results kept");
    REQUIRE_OK(queue_cleanup(a, 3 * 3600, 50, &deleted, &err) == 0 && deleted == 0, "young jobs kept");

    /* 9. Batched completion: one round trip, one transaction, each job
     * still token-checked; a stale token in the batch is refused alone; a
     * bad result rolls the batch back so nothing of it is written; a
     * retried batch (lost COMMIT acknowledgement) is recognised. */
    REQUIRE_OK(seed(a, 6, 5) == 0, "seed");
    struct queue_job bj[6];
    REQUIRE_OK(queue_claim(a, &q, 0, 6, bj, &n, &err) == 0 && n == 6, "batch claim: %s", err.msg);
    CHECK(q1(a, "SELECT count(DISTINCT lease_token) FROM folio.jobs WHERE state = 'running'") == 6,
          "one token per claimed job");
    struct queue_result bres[6];
    const struct queue_job *bjp[6];
    const struct queue_result *brp[6];
    int bacc[6];
    for (int i = 0; i < 6; i++) {
        bres[i] = simple_result();
        bjp[i] = &bj[i];
        brp[i] = &bres[i];
    }
    struct queue_job stale3 = bj[2];
    snprintf(stale3.token, sizeof stale3.token, "00000000-0000-4000-8000-000000000000");
    bjp[2] = &stale3;
    REQUIRE_OK(queue_complete_many(b, bjp, 0, brp, 3, bacc, &err) == 0, "batch complete: %s", err.msg);
    CHECK(bacc[0] == 1 && bacc[1] == 1 && bacc[2] == 0, "batch accepted %d %d %d, want 1 1 0", bacc[0], bacc[1],
          bacc[2]);
    CHECK(q1(a, "SELECT count(*) FROM folio.results") == 2, "stale member of a batch wrote a result");
    CHECK(q1(a, "SELECT count(*) FROM folio.jobs WHERE state = 'running'") == 4, "stale member changed its job");
    bjp[2] = &bj[2];
    REQUIRE_OK(queue_complete_many(b, bjp, 0, brp, 3, bacc, &err) == 0, "batch retry: %s", err.msg);
    CHECK(bacc[0] == 1 && bacc[1] == 1 && bacc[2] == 1, "retried batch %d %d %d, want 1 1 1", bacc[0], bacc[1],
          bacc[2]);
    CHECK(q1(a, "SELECT count(*) FROM folio.results") == 3, "retried batch duplicated results");
    bres[4].scores_json = "{not json";
    int brc = queue_complete_many(b, bjp + 3, 0, brp + 3, 3, bacc, &err);
    CHECK(brc == FOLIO_EDB && bacc[0] == 0 && bacc[1] == 0 && bacc[2] == 0, "bad batch: rc %d accepted %d %d %d",
          brc, bacc[0], bacc[1], bacc[2]);
    CHECK(strstr(err.msg, "22P02") != NULL, "bad batch error names the SQLSTATE: %s", err.msg);
    CHECK(q1(a, "SELECT count(*) FROM folio.results") == 3, "a rolled-back batch wrote results");
    CHECK(q1(a, "SELECT count(*) FROM folio.jobs WHERE state = 'running'") == 3, "a rolled-back batch finished jobs");
    CHECK(PQtransactionStatus(b) == PQTRANS_IDLE, "connection left in a transaction after a failed batch");
    bres[4].scores_json = "{\"invoice\":0.9}";
    REQUIRE_OK(queue_complete_many(b, bjp + 3, 0, brp + 3, 3, bacc, &err) == 0, "batch after failure: %s", err.msg);
    CHECK(bacc[0] + bacc[1] + bacc[2] == 3, "batch after a failed one: %d accepted", bacc[0] + bacc[1] + bacc[2]);
    CHECK(q1(a, "SELECT count(*) FROM folio.results r JOIN folio.jobs j ON j.id = r.job_id"
                " WHERE j.state = 'done' AND r.lease_token = j.claim_token") == 6, "six results by their claims");
    struct queue_job notok = bj[0];
    notok.token[0] = '\0';
    bjp[0] = &notok;
    CHECK(queue_complete_many(b, bjp, 0, brp, 2, bacc, &err) == FOLIO_ESTATE, "token-less batch member accepted");

    /* 10. Worker registry. */
    int64_t wid = 0;
    struct queue_worker_info wi = {.host = "testhost", .pid = 42, .state = "ocr-only",
                                   .paths_array = "{ocr+rules}",
                                   .paths_disabled_json = "{\"vision\":\"no model configured\"}"};
    REQUIRE_OK(queue_worker_register(a, &wi, &wid, &err) == 0 && wid > 0, "register: %s", err.msg);
    struct queue_worker_stats ws = {.done = 7, .failed = 1, .lost = 2};
    REQUIRE_OK(queue_heartbeat(a, &q, wid, &ws, NULL, NULL, 0, alive, &err) == 0, "hb: %s", err.msg);
    CHECK(q1(a, "SELECT jobs_done + 10 * jobs_failed + 100 * jobs_lost FROM folio.workers") == 217, "counters");
    REQUIRE_OK(queue_worker_stopped(a, wid, &ws, &err) == 0, "stopped: %s", err.msg);
    CHECK(q1(a, "SELECT count(*) FROM folio.workers WHERE state = 'stopped' AND stopped_at IS NOT NULL") == 1,
          "stopped row");

    PQfinish(a);
    PQfinish(b);
    return tu_finish();
}
