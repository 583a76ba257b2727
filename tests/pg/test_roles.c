/* The least-privilege roles (schema/008_roles.sql, issue 21), as logins
 * granted folio_ingest, folio_worker and folio_reader:
 *  - the real `folio ingest` and `folio worker` run end to end under them;
 *  - what the adversarial test did with the old grants now fails: a worker
 *    deleting a queued job, setting one done, forging a result, reading
 *    document_sources, rewriting what a job is for or another worker's
 *    identity; ingest reading blobs, inserting a job in any state or
 *    reading job errors; a reader writing anything. */
#include "pipeline/db/db.h"
#include "tests/pg/worker_testlib.h"

static char g_db[512];

/* Runs sql as conninfo; returns the SQLSTATE ("00000" on success) in out. */
static const char *run_as(const char *conninfo, const char *sql, char out[6])
{
    PGconn *c = PQconnectdb(conninfo);
    snprintf(out, 6, "XXXXX");
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "connect %s: %s", conninfo, PQerrorMessage(c));
        PQfinish(c);
        return out;
    }
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        snprintf(out, 6, "00000");
    } else {
        const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        snprintf(out, 6, "%s", s ? s : "?????");
    }
    PQclear(r);
    PQfinish(c);
    return out;
}

static void login(const char *role, const char *group, char *conninfo, size_t n, PGconn *admin)
{
    char sql[400];
    snprintf(sql, sizeof sql,
             "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '%s') THEN"
             " CREATE ROLE %s LOGIN; END IF; END $$; GRANT %s TO %s",
             role, role, group, role);
    PGresult *r = PQexec(admin, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(admin));
    PQclear(r);
    snprintf(conninfo, n, "host=%s port=%s dbname=folio_test_roles user=%s", getenv("FOLIO_TEST_PGHOST"),
             getenv("FOLIO_TEST_PGPORT"), role);
}

#define DENIED(conn, sql, want, why)                                                         \
    do {                                                                                     \
        char st_[6];                                                                         \
        run_as((conn), (sql), st_);                                                          \
        CHECK(strcmp(st_, (want)) == 0, "%s: SQLSTATE %s, want %s (%s)", (why), st_, (want), (sql)); \
    } while (0)

/* One statement on an open connection: its first value, or NULL with the
 * SQLSTATE in st. */
static char *one(PGconn *x, const char *sql, char st[6])
{
    PGresult *r = PQexec(x, sql);
    char *v = NULL;
    snprintf(st, 6, "00000");
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0)
        v = strdup(PQgetvalue(r, 0, 0));
    else if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
        snprintf(st, 6, "%s", PQresultErrorField(r, PG_DIAG_SQLSTATE) ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : "?????");
    PQclear(r);
    return v;
}

#define REFUSED(x, sql, why)                                                                    \
    do {                                                                                        \
        char st_[6];                                                                            \
        free(one((x), (sql), st_));                                                             \
        CHECK(strcmp(st_, "42501") == 0, "%s: SQLSTATE %s, want 42501 (%s)", (why), st_, (sql)); \
    } while (0)

/* The forgeries of issue 32, as two folio_worker logins A and B: B learns
 * A's lease token (from the owner here; it cannot read it itself) and
 * tries to complete, fail, heartbeat or claim as A or as itself. Each is
 * refused or a no-op, and A then completes its own job. */
static int forgeries(PGconn *c, const char *wk, long long q, long long d)
{
    char wk2[400], p[1200], st[6];
    login("folio_t32_worker2", "folio_worker", wk2, sizeof wk2, c);
    PGconn *a = PQconnectdb(wk), *b = PQconnectdb(wk2);
    REQUIRE(PQstatus(a) == CONNECTION_OK && PQstatus(b) == CONNECTION_OK, "two worker logins");
    static const char REG[] = "SELECT folio.worker_register('h', 1, 'default', 'ready', NULL, '{}', '{}', '{}')";
    char *ida = one(a, REG, st), *idb = one(b, REG, st);
    REQUIRE(ida && idb, "both register: %s", st);
    REFUSED(a, "SELECT lease_token FROM folio.jobs", "worker reads lease tokens");
    REFUSED(a, "SELECT claim_token FROM folio.jobs", "worker reads claim tokens");
    REFUSED(a, "SELECT * FROM folio.jobs", "worker reads every job column");
    snprintf(p, sizeof p, "SELECT token FROM folio.claim_jobs('default', 60, %s, 0, 1)", idb);
    REFUSED(a, p, "A claims under B's worker id");
    snprintf(p, sizeof p, "SELECT token FROM folio.claim_jobs('default', 60, %s, 0, 1)", ida);
    char *tok = one(a, p, st);
    REQUIRE(tok, "A claims job %lld: %s", q, st);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'running'") == 1, "A holds the job");

    /* B, with A's token: as itself a no-op, as A refused. */
    snprintf(p, sizeof p, "SELECT moved FROM folio.complete_job(%lld, '%s', 'letter', 1, false, '{}', 'vision',"
             " NULL, NULL, NULL, NULL, NULL, '{}', %s, NULL)", q, tok, idb);
    char *mv = one(b, p, st);
    CHECK(mv && strcmp(mv, "0") == 0, "B completes A's job under its own id: moved %s (%s)", mv ? mv : "-", st);
    free(mv);
    snprintf(p, sizeof p, "SELECT moved FROM folio.complete_job(%lld, '%s', 'letter', 1, false, '{}', 'vision',"
             " NULL, NULL, NULL, NULL, NULL, '{}', %s, NULL)", q, tok, ida);
    REFUSED(b, p, "B completes A's job as A");
    snprintf(p, sizeof p, "SELECT * FROM folio.fail_job(%lld, '%s', %s, 1, 1, 1, 'x')", q, tok, ida);
    REFUSED(b, p, "B fails A's job as A");
    snprintf(p, sizeof p, "SELECT * FROM folio.fail_job(%lld, '%s', %s, 1, 1, 1, 'x')", q, tok, idb);
    free(one(b, p, st));
    snprintf(p, sizeof p, "SELECT folio.release_job(%lld, '%s', %s)", q, tok, ida);
    REFUSED(b, p, "B releases A's job as A");
    snprintf(p, sizeof p, "SELECT * FROM folio.heartbeat_jobs('{%lld}', '{%s}', %s, 0, 0, 0, NULL, 60, NULL, NULL)",
             q, tok, ida);
    REFUSED(b, p, "B heartbeats as A");
    snprintf(p, sizeof p, "SELECT folio.worker_stopped(%s, 0, 0, 0)", ida);
    REFUSED(b, p, "B stops A's worker row");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'running' AND lease_token IS NOT NULL") == 1 &&
              wt_q1(c, "SELECT count(*) FROM folio.results WHERE label = 'letter'") == 0,
          "A's job is still A's, no result from B");

    /* Direct writes: none. */
    snprintf(p, sizeof p,
             "INSERT INTO folio.results (document_id, model_key, label, confidence, engine_path, job_id, attempt)"
             " VALUES (%lld, 'default', 'letter', 1, 'vision', %lld, 1)", d, q);
    REFUSED(b, p, "worker inserts a result");
    snprintf(p, sizeof p, "INSERT INTO folio.page_results (document_id, model_key, page, label, confidence)"
             " VALUES (%lld, 'default', 1, 'letter', 1)", d);
    REFUSED(b, p, "worker inserts a page result");
    snprintf(p, sizeof p, "INSERT INTO folio.document_segments (document_id, model_key, first_page, last_page, label)"
             " VALUES (%lld, 'default', 1, 2, 'letter')", d);
    REFUSED(b, p, "worker inserts a split suggestion");
    REFUSED(b, "UPDATE folio.jobs SET state = 'dead', lease_token = NULL WHERE state = 'queued'", "worker kills queued jobs");
    REFUSED(b, "UPDATE folio.jobs SET run_after = 'infinity'", "worker makes jobs never run");
    REFUSED(b, "UPDATE folio.workers SET state = 'stopped'", "worker rewrites worker rows");
    REFUSED(b, "INSERT INTO folio.workers (host, pid) VALUES ('x', 1)", "worker inserts a worker row");
    REFUSED(b, "INSERT INTO folio.learned_models (examples, per_label, model) VALUES (1, '{}', 'x')",
            "worker inserts a learned model");

    /* A completes its own job. */
    snprintf(p, sizeof p, "SELECT moved FROM folio.complete_job(%lld, '%s', 'invoice', 1, false, '{}', 'vision',"
             " NULL, NULL, NULL, NULL, NULL, '{}', %s, NULL)", q, tok, ida);
    mv = one(a, p, st);
    CHECK(mv && strcmp(mv, "1") == 0, "A completes its own job: moved %s (%s)", mv ? mv : "-", st);
    free(mv);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE label = 'invoice'") == 2, "A's result is there");

    /* Learned models: the training role writes them, bounded. */
    char tr[400];
    login("folio_t32_trainer", "folio_trainer", tr, sizeof tr, c);
    DENIED(tr, "INSERT INTO folio.learned_models (examples, per_label, model) VALUES (1, '{}', 'x')", "00000",
           "trainer stores a model");
    DENIED(tr, "INSERT INTO folio.learned_models (examples, per_label, model)"
               " VALUES (1, '{}', decode(repeat('00', 9 * 1048576), 'hex'))", "23514",
           "trainer stores a 9 MiB model");
    free(tok);
    free(ida);
    free(idb);
    PQfinish(a);
    PQfinish(b);
    return 0;
}

int main(void)
{
    PGconn *c = wt_fresh_schema("folio_test_roles", g_db, sizeof g_db);
    REQUIRE(c, "fresh migrated database");
    char wk[400], ing[400], rd[400];
    login("folio_t21_worker", "folio_worker", wk, sizeof wk, c);
    login("folio_t21_ingest", "folio_ingest", ing, sizeof ing, c);
    login("folio_t21_reader", "folio_reader", rd, sizeof rd, c);

    /* 1. The real commands under the narrow roles. */
    const char *dir = tu_scratch("roles");
    char inbox[1100], log[1100], p[1200];
    snprintf(inbox, sizeof inbox, "%s/inbox", dir);
    snprintf(log, sizeof log, "%s/run.log", dir);
    uint8_t *page = NULL;
    size_t plen = 0;
    REQUIRE_OK(wt_render(dir, "invoice", "INVOICE\nInvoice number 8\nAmount due: 3.00\n", 900, 400, &page, &plen) == 0,
               "render");
    free(page);
    REQUIRE_OK(tu_sh("mkdir -p '%s' && cp '%s/invoice.tif' '%s/'", inbox, dir, inbox) == 0, "inbox");
    CHECK(tu_sh("%s ingest --db '%s' --stable-ms 0 --no-progress '%s' >>'%s' 2>&1", tu_folio_bin(), ing, inbox,
                log) == 0, "ingest as folio_ingest; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued'") == 1, "job queued by folio_ingest");
    /* folio_ingest records where the file went (schema 018's column grant) */
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.document_sources WHERE stored_at LIKE '%/.folio/done/%/invoice.tif'") == 1,
          "stored_at written by folio_ingest; see %s", log);
    const char *const args[] = {"--lease", "3", "--poll", "0.2", "--ocr-threads", "1", NULL};
    pid_t w = wt_spawn_worker(wk, NULL, log, args);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.results r JOIN folio.jobs j ON j.id = r.job_id"
                         " WHERE j.state = 'done' AND r.label = 'invoice'", 1, 30000) == 0,
          "job done by folio_worker; see %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 15000) == 0, "worker exit; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.workers WHERE state = 'stopped'") == 1, "worker row stopped");

    /* A second document and job to attack (queued). */
    snprintf(p, sizeof p,
             "WITH d AS (INSERT INTO folio.documents (sha256, media_type, bytes, pages)"
             " VALUES (sha256('x'::bytea), 'image/tiff', 1, 1) RETURNING id, sha256),"
             " b AS (INSERT INTO folio.blobs (sha256, data) SELECT sha256, 'x' FROM d),"
             " s AS (INSERT INTO folio.document_sources (document_id, path, path_display, host, name_display)"
             "       SELECT id, 'p', 'p', 'h', 'p' FROM d)"
             " INSERT INTO folio.jobs (document_id) SELECT id FROM d");
    PGresult *pr = PQexec(c, p);
    CHECK(PQresultStatus(pr) == PGRES_COMMAND_OK, "plant the job to attack: %s", PQerrorMessage(c));
    PQclear(pr);
    long long q = wt_q1(c, "SELECT id FROM folio.jobs WHERE state = 'queued'");
    long long d = wt_q1(c, "SELECT document_id FROM folio.jobs WHERE state = 'queued'");
    REQUIRE(q > 0 && d > 0, "queued job to attack");

    /* 2. folio_worker. */
    snprintf(p, sizeof p, "DELETE FROM folio.jobs WHERE id = %lld", q);
    DENIED(wk, p, "42501", "worker deletes a queued job");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued'") == 1, "worker deleted a queued job");
    snprintf(p, sizeof p, "UPDATE folio.jobs SET state = 'done' WHERE id = %lld", q);
    DENIED(wk, p, "42501", "worker sets a queued job done");
    snprintf(p, sizeof p,
             "INSERT INTO folio.results (document_id, model_key, label, confidence, engine_path, job_id, attempt)"
             " VALUES (%lld, 'default', 'letter', 1, 'vision', %lld, 1)", d, q);
    DENIED(wk, p, "42501", "worker forges a result");
    DENIED(wk, "SELECT * FROM folio.document_sources", "42501", "worker reads document_sources");
    snprintf(p, sizeof p, "UPDATE folio.jobs SET document_id = document_id, model_key = 'x' WHERE id = %lld", q);
    DENIED(wk, p, "42501", "worker rewrites what a job is for");
    DENIED(wk, "UPDATE folio.workers SET host = 'elsewhere', pid = 1", "42501", "worker rewrites a worker identity");
    DENIED(wk, "SELECT count(*) FROM folio.blobs", "00000", "worker reads blobs (it must)");
    /* reclassify --reuse-ocr (schema 010): the stored text, nothing else of the history */
    DENIED(wk, "SELECT h.ocr_text, h.ocr_confidence, h.ocr_orientation, h.ocr_pages FROM folio.jobs j"
               " JOIN folio.results_history h ON h.id = j.reuse_text_from", "00000", "worker reads stored text");
    DENIED(wk, "SELECT label FROM folio.results_history", "42501", "worker reads old labels");
    DENIED(wk, "UPDATE folio.jobs SET reuse_text_from = NULL", "42501", "worker changes which text a job reuses");

    if (forgeries(c, wk, q, d))
        return tu_finish();

    /* 3. folio_ingest. */
    DENIED(ing, "SELECT data FROM folio.blobs", "42501", "ingest reads blobs");
    snprintf(p, sizeof p, "INSERT INTO folio.jobs (document_id, model_key, state) VALUES (%lld, 'k2', 'done')", d);
    DENIED(ing, p, "42501", "ingest inserts a done job");
    snprintf(p, sizeof p, "INSERT INTO folio.jobs (document_id, model_key, attempts) VALUES (%lld, 'k3', 9)", d);
    DENIED(ing, p, "42501", "ingest inserts a job with attempts");
    DENIED(ing, "SELECT last_error FROM folio.jobs", "42501", "ingest reads job errors");
    DENIED(ing, "UPDATE folio.jobs SET state = 'dead'", "42501", "ingest updates jobs");

    /* 4. folio_reader: the read-only commands, then nothing else. */
    snprintf(p, sizeof p, "%s status --db '%s' >>'%s' 2>&1", tu_folio_bin(), rd, log);
    CHECK(tu_sh("%s", p) == 0, "status as folio_reader; see %s", log);
    snprintf(p, sizeof p, "%s show 1 --db '%s' >>'%s' 2>&1", tu_folio_bin(), rd, log);
    CHECK(tu_sh("%s", p) == 0, "show as folio_reader; see %s", log);
    snprintf(p, sizeof p, "%s jobs list --db '%s' >>'%s' 2>&1", tu_folio_bin(), rd, log);
    CHECK(tu_sh("%s", p) == 0, "jobs list as folio_reader; see %s", log);
    snprintf(p, sizeof p, "%s report --db '%s' --out '%s/report.html' >>'%s' 2>&1", tu_folio_bin(), rd, dir, log);
    CHECK(tu_sh("%s", p) == 0, "report as folio_reader; see %s", log);
    /* the other read-only commands (issue 32: every one, as that role) */
    static const char *const ro[] = {"export --format csv", "export --format jsonl", "search memo", "eval",
                                     "models list", "labels list", "labels export", "jobs list --state dead"};
    char rlog[1100];
    snprintf(rlog, sizeof rlog, "%s/reader.log", dir);
    for (size_t i = 0; i < sizeof ro / sizeof ro[0]; i++) {
        snprintf(p, sizeof p, "%s %s --db '%s' >>'%s' 2>&1", tu_folio_bin(), ro[i], rd, rlog);
        int rc = tu_sh("%s", p);
        /* search and eval exit 1 when nothing matches or nothing is
         * corrected; a refused query is a permission error in the log */
        CHECK(rc == 0 || ((strncmp(ro[i], "search", 6) == 0 || strcmp(ro[i], "eval") == 0) && rc == 1),
              "%s as folio_reader: rc %d; see %s", ro[i], rc, rlog);
    }
    {
        char out[256];
        tu_sh_out(out, sizeof out, "grep -ci 'permission denied' '%s'", rlog);
        CHECK(atoi(out) == 0, "no permission denied for folio_reader's commands: %s lines; see %s", out, rlog);
    }
    DENIED(rd, "SELECT lease_token FROM folio.jobs", "42501", "reader reads lease tokens");
    DENIED(rd, "SELECT * FROM folio.claim_jobs('default', 60, NULL, 0, 1)", "42501", "reader claims a job");
    DENIED(rd, "SELECT count(*) FROM folio.results", "00000", "reader reads results");
    DENIED(rd, "SELECT count(*) FROM folio.document_status", "00000", "reader reads the views");
    DENIED(rd, "DELETE FROM folio.results", "42501", "reader deletes results");
    DENIED(rd, "SELECT data FROM folio.blobs", "42501", "reader reads blobs");

    PQfinish(c);
    return tu_finish();
}
