/* `folio worker --max-text-bytes`: the real worker cuts a page's OCR text
 * to the cap before the text tiers see it and records the cut in
 * results.ocr_pages.text_cut; without the option nothing is cut and the
 * record says so (issue 24: bounded text per document). */
#include "pipeline/db/migrate.h"
#include "tests/pg/worker_testlib.h"

int main(void)
{
    char db[512];
    REQUIRE_OK(tu_pg_fresh_db("folio_test_worker_text_cap", db, sizeof db) == 0, "fresh db");
    PGconn *c = PQconnectdb(db);
    REQUIRE_OK(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    struct folio_err err = {0};
    int applied = 0;
    struct migrate_opts mo = {0};
    REQUIRE_OK(migrate_run(c, &mo, &applied, &err) == 0, "migrate: %s", err.msg);
    const char *dir = tu_scratch("worker_text_cap");
    char log[1100];
    snprintf(log, sizeof log, "%s/worker.log", dir);
    uint8_t *page = NULL;
    size_t len = 0;
    REQUIRE_OK(wt_render(dir, "invoice", "INVOICE\nInvoice number 88\nBill to: Northwind\nAmount due: 40.00\n",
                         1200, 600, &page, &len) == 0, "render");

    char sha[65];
    long long j_cap = wt_add_doc(c, "capped", page, len, 2, sha);
    REQUIRE(j_cap > 0, "planted job");
    const char *const capped[] = {"--poll", "0.2", "--lease", "5", "--ocr-threads", "1",
                                  "--max-text-bytes", "12,1MiB", NULL};
    pid_t w = wt_spawn_worker(db, NULL, log, capped);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", 1, 60000) == 0,
          "job not done within 60 s; see %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 10000) == 0, "worker exit");
    char sql[600];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM folio.results WHERE job_id = %lld AND octet_length(ocr_text) <= 12"
             " AND ocr_text LIKE 'INVOICE%%' AND ocr_text NOT LIKE '%%Northwind%%'"
             " AND (ocr_pages->'text_cut'->>'pages')::int = 1"
             " AND (ocr_pages->'text_cut'->>'bytes')::int > 20"
             " AND (ocr_pages->'text_cut'->>'document')::boolean = false", j_cap);
    CHECK(wt_q1(c, sql) == 1, "capped result: text cut to 12 bytes and the cut recorded; see %s", log);

    long long j_all = wt_add_doc(c, "uncapped", page, len, 2, sha);
    const char *const plain[] = {"--poll", "0.2", "--lease", "5", "--ocr-threads", "1", NULL};
    w = wt_spawn_worker(db, NULL, log, plain);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", 2, 60000) == 0,
          "second job not done within 60 s; see %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 10000) == 0, "worker exit");
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM folio.results WHERE job_id = %lld AND ocr_text LIKE '%%Northwind%%'"
             " AND ocr_pages->'text_cut' = '{\"pages\": 0, \"bytes\": 0, \"document\": false}'::jsonb",
             j_all);
    CHECK(wt_q1(c, sql) == 1, "uncapped result: full text, nothing recorded as cut; see %s", log);

    /* A bad value is refused before the worker touches the database. */
    char out[2048] = {0};
    int rc = tu_sh_out(out, sizeof out, "%s worker --db '%s' --max-text-bytes 0 2>&1", tu_folio_bin(), db);
    CHECK(rc == 2 && strstr(out, "--max-text-bytes"), "--max-text-bytes 0: rc %d, %s", rc, out);
    free(page);
    PQfinish(c);
    return tu_finish();
}
