/* The workers row is written from strings folio does not choose: the
 * Tesseract language list (--ocr-lang, a file name in the tessdata
 * folder), the Tesseract version, the model tiers' reason. Issue 20: the
 * registration's detail jsonb was assembled by hand with ocr_lang not
 * escaped at all, so a quote, a control byte or a byte that is not UTF-8
 * made PostgreSQL refuse the INSERT and the worker never registered.
 * Here a real `folio worker` runs with a language whose name holds all
 * three (a copy of eng.traineddata under that name, found through
 * TESSDATA_PREFIX); its row must appear, with the name as jsonb gives it
 * back: the quote and the control byte intact, the stray byte as U+FFFD
 * (common/json.h's rule). */
#include "engine/ocr.h"
#include "pipeline/db/db.h"
#include "tests/pg/worker_testlib.h"

static char g_db[512];

int main(void)
{
    PGconn *c = wt_fresh_schema("folio_test_worker_register_odd", g_db, sizeof g_db);
    REQUIRE(c, "fresh migrated database");
    const char *dir = tu_scratch("worker_register_odd");
    char tess[1100], log[1100];
    snprintf(tess, sizeof tess, "%s/tessdata", dir);
    snprintf(log, sizeof log, "%s/worker.log", dir);
    const char *lang = "e\"n\x01g\xff";
    /* the tessdata folder: osd and configs as installed, eng under the odd name */
    REQUIRE(tu_sh("set -e; src=$(ls -d /usr/share/tesseract-ocr/*/tessdata | head -1); mkdir -p '%s';"
                  " for f in \"$src\"/*; do ln -s \"$f\" '%s'/; done;"
                  " ln -s \"$src/eng.traineddata\" \"%s/$(printf 'e\"n\\001g\\377').traineddata\"",
                  tess, tess, tess) == 0,
            "tessdata copy in %s", tess);
    setenv("TESSDATA_PREFIX", tess, 1);
    const char *const args[] = {"--ocr-lang", lang, "--ocr-threads", "1", "--poll", "0.2", NULL};
    pid_t w = wt_spawn_worker(g_db, NULL, log, args);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.workers", 1, 30000) == 0,
          "the worker registered (the odd language name did not break its row); see %s", log);
    PGresult *r = PQexec(c, "SELECT detail->>'ocr_lang', detail->>'tesseract', jsonb_typeof(detail->'engine'),"
                            " paths_disabled::text FROM folio.workers");
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        CHECK(strcmp(PQgetvalue(r, 0, 0), "e\"n\x01g\xef\xbf\xbd") == 0, "ocr_lang as stored: %s",
              PQgetvalue(r, 0, 0));
        CHECK(strcmp(PQgetvalue(r, 0, 1), ocr_tesseract_version()) == 0, "tesseract version: %s",
              PQgetvalue(r, 0, 1));
        CHECK(strcmp(PQgetvalue(r, 0, 2), "null") == 0, "no model: engine is null, got %s", PQgetvalue(r, 0, 2));
        CHECK(strstr(PQgetvalue(r, 0, 3), "no model configured") != NULL, "paths_disabled: %s",
              PQgetvalue(r, 0, 3));
    } else {
        CHECK(0, "workers row: %s", PQerrorMessage(c));
    }
    PQclear(r);
    CHECK(tu_sh("! grep -q 'level=error' '%s'", log) == 0, "no errors in the worker log: %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 15000) == 0, "worker exit");
    PQfinish(c);
    return tu_finish();
}
