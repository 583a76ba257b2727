/* The README's promise, end to end with real processes: `folio ingest
 * --watch INBOX` and `folio worker` running; a scan dropped into the inbox
 * shows up as a result row within seconds. The worker polls only every
 * 30 s here, so a prompt result proves ingest's NOTIFY woke it. */
#include "pipeline/db/migrate.h"
#include "tests/pg/worker_testlib.h"

int main(void)
{
    char db[512];
    REQUIRE_OK(tu_pg_fresh_db("folio_test_worker_inbox", db, sizeof db) == 0, "fresh db");
    PGconn *c = PQconnectdb(db);
    REQUIRE_OK(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    struct folio_err err = {0};
    int applied = 0;
    struct migrate_opts mo = {0};
    REQUIRE_OK(migrate_run(c, &mo, &applied, &err) == 0, "migrate: %s", err.msg);

    const char *scratch = tu_scratch("worker_inbox");
    char dir[1100], inbox[1100], log[1100];
    snprintf(dir, sizeof dir, "%s", scratch);
    snprintf(inbox, sizeof inbox, "%s/inbox", dir);
    snprintf(log, sizeof log, "%s/procs.log", dir);
    REQUIRE_OK(folio_mkdirs(inbox, &err) == 0, "mkdir inbox");
    uint8_t *page = NULL;
    size_t len = 0;
    REQUIRE_OK(wt_render(dir, "scan", "MEMORANDUM\nTo: all staff\nFrom: the board\nSubject: budget\n", 1200, 600,
                         &page, &len) == 0, "render");

    const char *const ingest_args[] = {"--watch", "--stable-ms", "300", inbox, NULL};
    const char *const worker_args[] = {"--poll", "30", "--lease", "5", "--ocr-threads", "1", NULL};
    pid_t wi = wt_spawn("ingest", db, NULL, log, ingest_args);
    pid_t ww = wt_spawn_worker(db, NULL, log, worker_args);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.workers WHERE state = 'ocr-only'", 1, 15000) == 0,
          "worker did not register");
    folio_sleep_ms(1500); /* both idle: ingest watching, worker in its 30 s poll wait */

    char tmp[1200], final[1200];
    snprintf(tmp, sizeof tmp, "%s/.scan.tif.part", inbox);
    snprintf(final, sizeof final, "%s/scan.tif", inbox);
    FILE *f = fopen(tmp, "wb");
    REQUIRE(f, "create %s", tmp);
    fwrite(page, 1, len, f);
    fclose(f);
    free(page);
    double t0 = folio_mono_ms();
    REQUIRE_OK(rename(tmp, final) == 0, "drop the scan into the inbox");
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.results WHERE label = 'memo' AND engine_path = 'ocr+rules'",
                      1, 20000) == 0,
          "no result within 20 s of dropping the file; see %s", log);
    printf("inbox to result: %.1f s\n", (folio_mono_ms() - t0) / 1000);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.document_status WHERE state = 'done' AND label = 'memo'"
                   " AND name = 'scan.tif'") == 1,
          "document_status shows the file as done");

    kill(ww, SIGTERM);
    kill(wi, SIGTERM);
    CHECK(wt_wait_exit(ww, 15000) == 0, "worker exit");
    CHECK(wt_wait_exit(wi, 15000) >= 0, "ingest exit");
    PQfinish(c);
    return tu_finish();
}
