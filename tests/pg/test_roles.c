/* The least-privilege roles (schema/008_roles.sql, issue 21), as logins
 * granted folio_ingest, folio_worker and folio_reader:
 *  - the real `folio ingest` and `folio worker` run end to end under them;
 *  - what the adversarial test did with the old grants now fails: a worker
 *    deleting a queued job, setting one done, forging a result, reading
 *    document_sources, rewriting what a job is for or another worker's
 *    identity; ingest reading blobs, inserting a job in any state or
 *    reading job errors; a reader writing anything. */
#include "pipeline/db.h"
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
             " VALUES (decode(repeat('ab', 32), 'hex'), 'image/tiff', 1, 1) RETURNING id, sha256),"
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
    DENIED(wk, p, "00000", "delete runs");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued'") == 1, "worker deleted a queued job");
    snprintf(p, sizeof p, "UPDATE folio.jobs SET state = 'done' WHERE id = %lld", q);
    DENIED(wk, p, "23514", "worker sets a queued job done");
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

    /* 3. folio_ingest. */
    DENIED(ing, "SELECT data FROM folio.blobs", "42501", "ingest reads blobs");
    snprintf(p, sizeof p, "INSERT INTO folio.jobs (document_id, model_key, state) VALUES (%lld, 'k2', 'done')", d);
    DENIED(ing, p, "42501", "ingest inserts a done job");
    snprintf(p, sizeof p, "INSERT INTO folio.jobs (document_id, model_key, attempts) VALUES (%lld, 'k3', 9)", d);
    DENIED(ing, p, "42501", "ingest inserts a job with attempts");
    DENIED(ing, "SELECT last_error FROM folio.jobs", "42501", "ingest reads job errors");
    DENIED(ing, "UPDATE folio.jobs SET state = 'dead'", "42501", "ingest updates jobs");

    /* 4. folio_reader. */
    DENIED(rd, "SELECT count(*) FROM folio.results", "00000", "reader reads results");
    DENIED(rd, "SELECT count(*) FROM folio.document_status", "00000", "reader reads the views");
    DENIED(rd, "DELETE FROM folio.results", "42501", "reader deletes results");
    DENIED(rd, "SELECT data FROM folio.blobs", "42501", "reader reads blobs");

    PQfinish(c);
    return tu_finish();
}
