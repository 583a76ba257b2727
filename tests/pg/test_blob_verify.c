/* Bytes stored in folio.blobs are checked against the document's sha256
 * on every read (issue 32), through real PostgreSQL and real `folio
 * ingest` / `folio worker` processes under the least-privilege logins
 * (folio_ingest, folio_worker):
 *  - a good row reads back and its job is done; a row corrupted in place
 *    (same size, one byte changed) is refused in process and by the worker,
 *    whose job fails with "stored bytes are corrupt ... re-ingest the
 *    original file to repair it" while the worker keeps running and the
 *    document stays;
 *  - re-ingesting the original (a duplicate) rewrites the corrupt row from
 *    the good file (schema 019), and a second re-ingest of a good row
 *    changes nothing; `folio jobs retry` then brings the job to done;
 *  - a missing row is put back by a re-ingest the same way;
 *  - folio.blob_repair writes only bytes that hash to their name. */
#include "pipeline/db/queue.h"
#include "tests/pg/worker_testlib.h"

static void login(PGconn *admin, const char *role, const char *group, const char *dbname, char *ci, size_t n)
{
    char sql[400];
    snprintf(sql, sizeof sql,
             "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '%s') THEN"
             " CREATE ROLE %s LOGIN; END IF; END $$; GRANT %s TO %s",
             role, role, group, role);
    TU_NEED(wt_sql_ok(admin, sql) == 0, "login %s", role);
    snprintf(ci, n, "host=%s port=%s dbname=%s user=%s", getenv("FOLIO_TEST_PGHOST"), getenv("FOLIO_TEST_PGPORT"),
             dbname, role);
}

/* Writes bytes to dir/name. */
static void put_file(const char *dir, const char *name, const uint8_t *data, size_t len)
{
    char p[1300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    TU_NEED(f, "create %s", p);
    TU_NEED(fwrite(data, 1, len, f) == len && fclose(f) == 0, "write %s", p);
}

/* One-shot ingest of inbox; its log lines go to out. */
static int ingest_once(const char *ci, const char *inbox, char *out, size_t n)
{
    int rc = tu_sh_out(out, n, "'%s' ingest --db '%s' '%s' 2>&1", tu_folio_bin(), ci, inbox);
    if (rc != 0)
        fprintf(stderr, "ingest: rc=%d %s\n", rc, out);
    return rc;
}

int main(void)
{
    char db[512];
    PGconn *c = wt_fresh_schema("folio_test_blob_verify", db, sizeof db);
    REQUIRE(c, "fresh schema");
    char ci_ing[512], ci_wk[512];
    login(c, "folio_bv_ingest", "folio_ingest", "folio_test_blob_verify", ci_ing, sizeof ci_ing);
    login(c, "folio_bv_worker", "folio_worker", "folio_test_blob_verify", ci_wk, sizeof ci_wk);

    const char *dir = tu_scratch("blob_verify");
    char inbox[1100], log[1100], sql[700], out[4096];
    snprintf(inbox, sizeof inbox, "%s/inbox", dir);
    snprintf(log, sizeof log, "%s/procs.log", dir);
    struct folio_err err = {0};
    REQUIRE_OK(folio_mkdirs(inbox, &err) == 0, "mkdir %s", inbox);

    uint8_t *good = NULL, *bad = NULL;
    size_t good_len = 0, bad_len = 0;
    REQUIRE_OK(wt_render(dir, "good", "MEMORANDUM\nTo: all staff\nFrom: the board\nSubject: budget\n", 1000, 500,
                         &good, &good_len) == 0 &&
                   wt_render(dir, "bad", "INVOICE 1001\nAmount due: 12.50\nPayment terms: 30 days\n", 1000, 500, &bad,
                             &bad_len) == 0,
               "render pages");
    put_file(inbox, "good.tif", good, good_len);
    put_file(inbox, "bad.tif", bad, bad_len);
    REQUIRE_OK(ingest_once(ci_ing, inbox, out, sizeof out) == 0, "ingest as folio_ingest");
    REQUIRE_OK(wt_q1(c, "SELECT count(*) FROM folio.documents d JOIN folio.blobs b USING (sha256)"
                        " WHERE sha256(b.data) = d.sha256") == 2,
               "ingest recorded the real hash of both files");
    long long good_doc = wt_q1(c, "SELECT document_id FROM folio.document_sources WHERE name_display = 'good.tif'");
    long long bad_doc = wt_q1(c, "SELECT document_id FROM folio.document_sources WHERE name_display = 'bad.tif'");
    REQUIRE(good_doc > 0 && bad_doc > 0, "documents");

    /* Corrupt one row in place: same size, one byte changed. */
    snprintf(sql, sizeof sql,
             "UPDATE folio.blobs b SET data = overlay(b.data placing '\\x58'::bytea from 101 for 1)"
             " FROM folio.documents d WHERE d.sha256 = b.sha256 AND d.id = %lld AND get_byte(b.data, 100) <> 88",
             bad_doc);
    REQUIRE_OK(wt_sql_ok(c, sql) == 0, "corrupt the row");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM folio.blobs b JOIN folio.documents d USING (sha256)"
                              " WHERE d.id = %lld AND sha256(b.data) <> d.sha256 AND length(b.data) = d.bytes", bad_doc);
    REQUIRE_OK(wt_q1(c, sql) == 1, "the row is corrupt, same size");

    /* In process: the good row reads, the corrupt one is refused with the
     * reason and the repair. */
    uint8_t *data = NULL;
    size_t len = 0;
    CHECK(queue_fetch_blob(c, good_doc, &data, &len, &err) == 0 && len == good_len && memcmp(data, good, len) == 0,
          "a good row reads back: %s", err.msg);
    free(data);
    data = NULL;
    CHECK(queue_fetch_blob(c, bad_doc, &data, &len, &err) == FOLIO_EFORMAT && !data &&
              strstr(err.msg, "stored bytes are corrupt") && strstr(err.msg, "re-ingest the original") &&
              strstr(err.detail, "hash to") && strstr(err.hint, "folio jobs retry"),
          "a corrupt row is refused with the reason: %s | %s | %s", err.msg, err.detail, err.hint);

    /* The worker (as folio_worker): the good job is done, the corrupt one
     * fails with the reason on every attempt and ends dead; the worker
     * lives on and the document stays. */
    const char *const wargs[] = {"--poll", "0.2", "--lease", "5", "--ocr-threads", "1", "--retry-base", "0.1",
                                 "--retry-max", "0.2", NULL};
    pid_t w = wt_spawn_worker(ci_wk, NULL, log, wargs);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state IN ('done', 'dead')", 2, 90000) == 0,
          "both jobs settled; see %s", log);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM folio.jobs j JOIN folio.results r ON r.job_id = j.id"
                              " WHERE j.document_id = %lld AND j.state = 'done' AND r.label = 'memo'", good_doc);
    CHECK(wt_q1(c, sql) == 1, "the good document is classified");
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM folio.jobs WHERE document_id = %lld AND state = 'dead' AND attempts = max_attempts"
             " AND last_error LIKE '%%stored bytes are corrupt%%re-ingest the original file to repair it%%'"
             " AND last_error LIKE '%%hash to%%'",
             bad_doc);
    CHECK(wt_q1(c, sql) == 1, "the corrupt row failed its job with the reason; see %s", log);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM folio.results WHERE document_id = %lld", bad_doc);
    CHECK(wt_q1(c, sql) == 0, "no result from corrupt bytes");
    CHECK(waitpid(w, NULL, WNOHANG) == 0, "the worker is still running after a corrupt row");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM folio.documents WHERE id = %lld", bad_doc);
    CHECK(wt_q1(c, sql) == 1, "the document is kept");

    /* Re-ingest the original: the row is rewritten from it, the document
     * and its job are the same ones (a duplicate, no new job). */
    put_file(inbox, "bad-again.tif", bad, bad_len);
    put_file(inbox, "good-again.tif", good, good_len);
    CHECK(ingest_once(ci_ing, inbox, out, sizeof out) == 0, "re-ingest the originals");
    const char *rep = strstr(out, "event=blob_repaired");
    CHECK(rep && strstr(rep, "bad-again.tif") && !strstr(rep + 1, "event=blob_repaired"),
          "one blob_repaired line, for the corrupt one: %s", out);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.documents d JOIN folio.blobs b USING (sha256)"
                   " WHERE sha256(b.data) = d.sha256") == 2 &&
              wt_q1(c, "SELECT count(*) FROM folio.documents") == 2 && wt_q1(c, "SELECT count(*) FROM folio.jobs") == 2,
          "the corrupt row is repaired by the re-ingest; no new document or job");
    int rc = tu_sh_out(out, sizeof out, "'%s' jobs retry --db '%s' --error 'stored bytes are corrupt' 2>&1",
                       tu_folio_bin(), db);
    CHECK(rc == 0, "jobs retry: rc=%d %s", rc, out);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM folio.jobs j JOIN folio.results r ON r.job_id = j.id"
                              " WHERE j.document_id = %lld AND j.state = 'done' AND r.label = 'invoice'", bad_doc);
    CHECK(wt_wait_for(c, sql, 1, 60000) == 0, "the repaired document is classified after the retry; see %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 20000) == 0, "worker exits 0 on SIGTERM");

    /* A lost row is put back the same way. */
    snprintf(sql, sizeof sql, "DELETE FROM folio.blobs b USING folio.documents d WHERE d.sha256 = b.sha256"
                              " AND d.id = %lld", good_doc);
    REQUIRE_OK(wt_sql_ok(c, sql) == 0, "delete a row");
    CHECK(queue_fetch_blob(c, good_doc, &data, &len, &err) == FOLIO_EFORMAT && strstr(err.msg, "no stored bytes"),
          "a missing row is its own error: %s", err.msg);
    put_file(inbox, "good-third.tif", good, good_len);
    CHECK(ingest_once(ci_ing, inbox, out, sizeof out) == 0 && strstr(out, "event=blob_repaired"), "re-ingest: %s",
          out);
    CHECK(queue_fetch_blob(c, good_doc, &data, &len, &err) == 0 && len == good_len, "the row is back: %s", err.msg);
    free(data);

    /* The repair function writes only bytes that hash to their name. */
    PGconn *ing = PQconnectdb(ci_ing);
    REQUIRE(PQstatus(ing) == CONNECTION_OK, "connect as ingest: %s", PQerrorMessage(ing));
    snprintf(sql, sizeof sql,
             "SELECT coalesce(folio.blob_repair(d.sha256, '\\x00'::bytea), false)::int FROM folio.documents d"
             " WHERE d.id = %lld",
             good_doc);
    PGresult *r = PQexec(ing, sql);
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "0") == 0,
          "other bytes under a document's name are refused: %s", PQerrorMessage(ing));
    PQclear(r);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.documents d JOIN folio.blobs b USING (sha256)"
                   " WHERE sha256(b.data) = d.sha256") == 2,
          "both rows still good");
    PQfinish(ing);
    /* A worker login may not call it. */
    PGconn *wk = PQconnectdb(ci_wk);
    REQUIRE(PQstatus(wk) == CONNECTION_OK, "connect as worker: %s", PQerrorMessage(wk));
    r = PQexec(wk, "SELECT folio.blob_repair(sha256('x'::bytea), 'x'::bytea)");
    CHECK(PQresultStatus(r) == PGRES_FATAL_ERROR && strcmp(PQresultErrorField(r, PG_DIAG_SQLSTATE), "42501") == 0,
          "folio_worker cannot call blob_repair");
    PQclear(r);
    PQfinish(wk);

    free(good);
    free(bad);
    PQfinish(c);
    return tu_finish();
}
