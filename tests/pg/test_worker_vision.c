/* The real `folio worker` with the parity kit's tiny Qwen2.5-VL pair on
 * lavapipe (--device llvmpipe), a real server and real Tesseract: files
 * dropped into a folder -> `folio ingest` -> worker -> results in SQL.
 *  1. model + mmproj: every document classified with engine_path
 *     'vision', the workers row lists the vision path, and the worker's
 *     log shows zero pipeline requests after the registry was sealed;
 *  2. a gate rule file matching lavapipe's driver (path=vision):
 *     'ocr+lm', with the rule's reason in fallback_reason;
 *  1b. a label too long to score: the worker refuses to start, naming it;
 *  3. no mmproj: 'ocr+lm'; 4. no model: 'ocr+rules';
 *  5. FOLIO_FAULT=device_lost:2 (test builds): the second vision pass
 *     loses the device mid-run; the documents queued meanwhile are
 *     answered by the OCR tiers with the reason, three more arriving after
 *     the re-open backoff get vision again from a re-opened engine; every
 *     document ends done with exactly one result (none lost, none
 *     doubled) and the worker is still up (drains, exits 0 on SIGTERM);
 *     its workers row is back to ready with vision;
 *  7. FOLIO_FAULT=device_lost:1: repeated losses make the worker give up
 *     on the GPU, and its workers row says so (state, paths,
 *     paths_disabled refreshed by the heartbeat). */
#include "pipeline/db/migrate.h"
#include "tests/pg/worker_testlib.h"

#include <sys/stat.h>

#define NDOC 3

static char g_db[512];
static char g_model[1200], g_mmproj[1200];

/* Fresh queue, the pages copied into the inbox, one ingest pass. */
static int ingest(PGconn *c, const char *dir, const char *inbox)
{
    if (wt_sql_ok(c, "TRUNCATE folio.results, folio.jobs, folio.document_sources, folio.blobs,"
                  " folio.documents, folio.workers CASCADE"))
        return -1;
    if (tu_sh("rm -rf %s && mkdir -p %s && cp %s/p*.tif %s/", inbox, inbox, dir, inbox))
        return -1;
    return tu_sh("%s ingest --db '%s' --stable-ms 0 --no-progress %s >>%s/ingest.log 2>&1", tu_folio_bin(), g_db,
                 inbox, dir);
}

/* Runs one worker over the queue until every job is done, then stops it. */
static int run_worker(PGconn *c, const char *log, const char *fault, const char *const *extra, int ndoc)
{
    const char *args[32] = {"--lease", "30", "--poll", "0.2", "--retry-base", "0.2", "--retry-max", "1",
                            "--ocr-threads", "1", "--batch", "1", "--device", "llvmpipe",
                            "--max-image-tokens", "64"};
    int n = 16;
    for (int i = 0; extra && extra[i] && n < 30; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    pid_t w = wt_spawn_worker(g_db, fault, log, args);
    int rc = wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", ndoc, 240000);
    CHECK(rc == 0, "jobs not all done within 240 s; see %s", log);
    CHECK(waitpid(w, NULL, WNOHANG) == 0, "worker exited early; see %s", log);
    kill(w, SIGTERM);
    int st = wt_wait_exit(w, 60000);
    CHECK(st == 0, "worker exit status %d after SIGTERM; see %s", st, log);
    return rc;
}

static long long count_path(PGconn *c, const char *path)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM folio.results WHERE engine_path = '%s'", path);
    return wt_q1(c, sql);
}

int main(void)
{
    const char *src = getenv("FOLIO_SOURCE_DIR");
    snprintf(g_model, sizeof g_model, "%s/tests/fixtures/parity/qwen25vl/text-F32.gguf", src);
    snprintf(g_mmproj, sizeof g_mmproj, "%s/tests/fixtures/parity/qwen25vl/mmproj-F32.gguf", src);
    REQUIRE_OK(tu_pg_fresh_db("folio_test_worker_vision", g_db, sizeof g_db) == 0, "fresh db");
    PGconn *c = PQconnectdb(g_db);
    REQUIRE_OK(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    struct folio_err err = {0};
    int applied = 0;
    struct migrate_opts mo = {0};
    REQUIRE_OK(migrate_run(c, &mo, &applied, &err) == 0, "migrate: %s", err.msg);
    /* labels the tiny tokenizer spells in a few tokens */
    REQUIRE_OK(wt_sql_ok(c, "UPDATE folio.labels SET active = false") == 0 &&
                   wt_sql_ok(c, "INSERT INTO folio.labels (name, keywords) VALUES"
                             " ('receipt', '{receipt,total}'), ('resume', '{resume,experience}'),"
                             " ('datasheet', '{datasheet,voltage}')"
                             " ON CONFLICT (name) DO UPDATE SET active = true, keywords = EXCLUDED.keywords") == 0,
               "labels");
    const char *dir = tu_scratch("worker_vision");
    char inbox[1100], log[1100], gate[1100];
    snprintf(inbox, sizeof inbox, "%s/inbox", dir);
    static const char *const texts[NDOC] = {"RECEIPT\nTotal 12.00\nThank you\n",
                                            "RESUME\nExperience: ten years\nEducation\n",
                                            "DATASHEET\nVoltage 3.3 V\nCurrent 20 mA\n"};
    for (int i = 0; i < NDOC; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        uint8_t *d = NULL;
        size_t len = 0;
        REQUIRE_OK(wt_render(dir, name, texts[i], 700, 400 + 60 * i, &d, &len) == 0, "render %s", name);
        free(d);
    }

    /* 1. vision */
    REQUIRE_OK(ingest(c, dir, inbox) == 0, "ingest");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued'") == NDOC, "queued jobs");
    snprintf(log, sizeof log, "%s/vision.log", dir);
    const char *vis_args[] = {"--model", g_model, "--mmproj", g_mmproj, NULL};
    run_worker(c, log, NULL, vis_args, NDOC);
    CHECK(count_path(c, "vision") == NDOC, "vision results: %lld of %d; see %s", count_path(c, "vision"), NDOC,
          log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.workers WHERE 'vision' = ANY(paths)"
                   " AND detail->'engine'->>'vision' = 'true'") == 1,
          "workers row lacks the vision path");
    CHECK(tu_sh("grep -q 'event=vlm_closed.*pipeline_requests_after_seal=0 ' %s", log) == 0,
          "no 'pipeline_requests_after_seal=0' in %s", log);
    CHECK(tu_sh("grep -q 'pipeline_requests_after_seal=[1-9]' %s", log) != 0, "pipelines built after seal: %s",
          log);

    /* 1b. a label too long for the per-label token limit: the worker
     * refuses the label set at start, once, naming it and its token
     * count, and claims nothing (issue 19) */
    REQUIRE_OK(ingest(c, dir, inbox) == 0, "ingest 1b");
    REQUIRE_OK(wt_sql_ok(c, "INSERT INTO folio.labels (name, keywords) VALUES"
                         " ('quarterly consolidated statement of comprehensive income zz', '{}')") == 0,
               "long label");
    snprintf(log, sizeof log, "%s/longlabel.log", dir);
    const char *long_args[] = {"--lease", "30", "--poll", "0.2", "--ocr-threads", "1", "--device",
                               "llvmpipe", "--max-image-tokens", "64", "--model", g_model,
                               "--mmproj", g_mmproj, NULL};
    pid_t lw = wt_spawn_worker(g_db, NULL, log, long_args);
    int lst = wt_wait_exit(lw, 240000);
    CHECK(lst != 0 && lst != -1, "long label: worker exit status %d; see %s", lst, log);
    if (lst == -1) {
        kill(lw, SIGKILL);
        wt_wait_exit(lw, 10000);
    }
    CHECK(tu_sh("grep -q 'label \"quarterly consolidated statement of comprehensive income zz\" is "
                "[0-9]* tokens' %s", log) == 0, "long label: no refusal naming it in %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued' AND attempts = 0") == NDOC,
          "long label: jobs were claimed");
    REQUIRE_OK(wt_sql_ok(c, "DELETE FROM folio.labels WHERE name LIKE 'quarterly%'") == 0, "drop long label");

    /* 2. a gate rule matching lavapipe */
    snprintf(gate, sizeof gate, "%s/gate.conf", dir);
    FILE *g = fopen(gate, "w");
    REQUIRE(g != NULL, "gate file");
    fputs("# lavapipe stands in for a bad driver\nvendor=any driver=llvmpipe path=vision reason=e2e gate rule\n", g);
    fclose(g);
    REQUIRE_OK(ingest(c, dir, inbox) == 0, "ingest 2");
    snprintf(log, sizeof log, "%s/gated.log", dir);
    const char *gate_args[] = {"--model", g_model, "--mmproj", g_mmproj, "--gate-file", gate, NULL};
    run_worker(c, log, NULL, gate_args, NDOC);
    CHECK(count_path(c, "ocr+lm") == NDOC, "gated: %lld ocr+lm results; see %s", count_path(c, "ocr+lm"), log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE fallback_reason LIKE '%e2e gate rule%'") == NDOC,
          "gated: reason missing");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.workers WHERE NOT ('vision' = ANY(paths))"
                   " AND paths_disabled->>'vision' LIKE '%e2e gate rule%'") == 1,
          "gated: workers row");

    /* 3. no mmproj */
    REQUIRE_OK(ingest(c, dir, inbox) == 0, "ingest 3");
    snprintf(log, sizeof log, "%s/text.log", dir);
    const char *text_args[] = {"--model", g_model, NULL};
    run_worker(c, log, NULL, text_args, NDOC);
    CHECK(count_path(c, "ocr+lm") == NDOC, "no mmproj: %lld ocr+lm; see %s", count_path(c, "ocr+lm"), log);

    /* 4. no model */
    REQUIRE_OK(ingest(c, dir, inbox) == 0, "ingest 4");
    snprintf(log, sizeof log, "%s/rules.log", dir);
    run_worker(c, log, NULL, NULL, NDOC);
    CHECK(count_path(c, "ocr+rules") == NDOC, "no model: %lld ocr+rules; see %s", count_path(c, "ocr+rules"), log);

#ifdef FOLIO_FAULT_INJECTION
    /* 5. device lost on the second vision pass; three more documents
     * arrive after the re-open backoff (0.5 s) and see vision again */
    REQUIRE_OK(ingest(c, dir, inbox) == 0, "ingest 5");
    snprintf(log, sizeof log, "%s/lost.log", dir);
    const char *lost_args[] = {"--lease", "30", "--poll", "0.2", "--ocr-threads", "1", "--batch", "1",
                               "--device", "llvmpipe", "--max-image-tokens", "64", "--model", g_model,
                               "--mmproj", g_mmproj, NULL};
    pid_t w = wt_spawn_worker(g_db, "device_lost:2", log, lost_args);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", NDOC, 240000) == 0,
          "device loss: first documents not done; see %s", log);
    folio_sleep_ms(1500);
    for (int i = NDOC; i < 2 * NDOC; i++) {
        char name[16], txt[64];
        snprintf(name, sizeof name, "q%d", i);
        snprintf(txt, sizeof txt, "RECEIPT %d\nTotal %d.00\n", i, 10 + i);
        uint8_t *d = NULL;
        size_t len = 0;
        REQUIRE_OK(wt_render(dir, name, txt, 700, 300 + 40 * i, &d, &len) == 0, "render %s", name);
        free(d);
    }
    REQUIRE_OK(tu_sh("mkdir -p %s && cp %s/q*.tif %s/ && %s ingest --db '%s' --stable-ms 0 --no-progress %s "
                     ">>%s/ingest.log 2>&1", inbox, dir, inbox, tu_folio_bin(), g_db, inbox, dir) == 0,
               "ingest 5b");
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", 2 * NDOC, 240000) == 0,
          "device loss: later documents not done; see %s", log);
    CHECK(waitpid(w, NULL, WNOHANG) == 0, "worker died after the device loss; see %s", log);
    /* device_lost:2 loses every re-opened engine on its second pass: feed
     * single pages until the last thing the GPU did was to get lost (how
     * many passes each engine saw depends on when the re-opens won the
     * backoff, and the fixtures' pages are one or two per file) */
    int extra = 0;
    while (extra < 6 && tu_sh("[ \"$(grep -oE 'event=(vlm_ready|engine_gpu_lost)' %s | tail -1)\" = "
                              "event=engine_gpu_lost ]", log) != 0) {
        char name[16], txt[64];
        snprintf(name, sizeof name, "x%d", extra);
        snprintf(txt, sizeof txt, "MEMO %d\nMeeting at %d\n", extra, 9 + extra);
        uint8_t *d = NULL;
        size_t len = 0;
        REQUIRE_OK(wt_render(dir, name, txt, 600, 300 + 30 * extra, &d, &len) == 0, "render %s", name);
        free(d);
        REQUIRE_OK(tu_sh("cp %s/%s.tif %s/ && %s ingest --db '%s' --stable-ms 0 --no-progress %s >>%s/ingest.log 2>&1",
                         dir, name, inbox, tu_folio_bin(), g_db, inbox, dir) == 0, "ingest %s", name);
        extra++;
        CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", 2 * NDOC + extra, 240000) == 0,
              "device loss: extra page %d not done; see %s", extra, log);
        folio_sleep_ms(1500);
    }
    /* The workers row tells the truth (issue 21): the GPU is lost and
     * waiting for its re-open: still a ready GPU worker, vision off for
     * now with the reason, not frozen at the paths it registered with and
     * not "ocr-only". */
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.workers WHERE state = 'ready' AND paths = '{ocr+rules}'"
                         " AND paths_disabled->>'vision' LIKE '%re-opening with backoff%'", 1, 15000) == 0,
          "workers row after the loss does not say vision is re-opening; see %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 60000) == 0, "worker exit after SIGTERM; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results") == 2 * NDOC + extra &&
              wt_q1(c, "SELECT count(DISTINCT document_id) FROM folio.results") == 2 * NDOC + extra,
          "device loss: %lld results for %d documents", wt_q1(c, "SELECT count(*) FROM folio.results"),
          2 * NDOC + extra);
    CHECK(tu_sh("[ $(grep -c 'event=vlm_ready' %s) -ge 2 ]", log) == 0, "no re-open after the loss; see %s", log);
    /* Vision before the loss; whether a document reaches the re-opened
     * engine before device_lost:2 takes it again depends on how long the
     * re-open takes under load (CI on 2 cores: the first batch finished on
     * the OCR tiers while it ran), so the re-open itself is what is
     * checked above (two vlm_ready lines), and at least one vision result. */
    CHECK(count_path(c, "vision") >= 1, "device loss: %lld vision results", count_path(c, "vision"));
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE engine_path <> 'vision'"
                   " AND fallback_reason LIKE '%lost%'") >= 1,
          "device loss: no OCR-tier result with the reason; see %s", log);
    CHECK(tu_sh("grep -q 'event=engine_gpu_lost' %s", log) == 0, "no engine_gpu_lost in %s", log);

    /* 6. --on-device-loss release: the document whose pass lost the GPU
     * goes back to the queue (attempt not counted) instead of to the OCR
     * tiers; it is classified again, nothing is lost or doubled, and the
     * worker stays up. */
    for (int i = 0; i < NDOC; i++) {
        char name[16], txt[64];
        snprintf(name, sizeof name, "r%d", i);
        snprintf(txt, sizeof txt, "INVOICE %d\nAmount due %d.00\n", i, 20 + i);
        uint8_t *d = NULL;
        size_t len = 0;
        REQUIRE_OK(wt_render(dir, name, txt, 700, 320 + 40 * i, &d, &len) == 0, "render %s", name);
        free(d);
    }
    REQUIRE_OK(tu_sh("mkdir -p %s && cp %s/r*.tif %s/ && %s ingest --db '%s' --stable-ms 0 --no-progress %s "
                     ">>%s/ingest.log 2>&1", inbox, dir, inbox, tu_folio_bin(), g_db, inbox, dir) == 0,
               "ingest 6");
    snprintf(log, sizeof log, "%s/release.log", dir);
    const char *rel_args[] = {"--lease", "30", "--poll", "0.2", "--ocr-threads", "1", "--batch", "1",
                              "--device", "llvmpipe", "--max-image-tokens", "64", "--model", g_model,
                              "--mmproj", g_mmproj, "--on-device-loss", "release", NULL};
    w = wt_spawn_worker(g_db, "device_lost:2", log, rel_args);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", 3 * NDOC + extra, 240000) == 0,
          "release mode: documents not done; see %s", log);
    CHECK(waitpid(w, NULL, WNOHANG) == 0, "worker died after the device loss (release mode); see %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 60000) == 0, "worker exit after SIGTERM (release mode); see %s", log);
    CHECK(tu_sh("grep -q 'event=job_released.*reason=device_lost' %s", log) == 0,
          "release mode: no job released on the device loss; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results") == 3 * NDOC + extra &&
              wt_q1(c, "SELECT count(DISTINCT document_id) FROM folio.results") == 3 * NDOC + extra,
          "release mode: %lld results for %d documents", wt_q1(c, "SELECT count(*) FROM folio.results"),
          3 * NDOC + extra);
    CHECK(tu_sh("j=$(grep -o 'event=job_released job=[0-9]*' %s | head -1 | cut -d= -f3); "
                "[ -n \"$j\" ] && grep -q \"event=job_done job=$j \" %s", log, log) == 0,
          "release mode: the released job was not classified again; see %s", log);

    /* 7. Every re-opened engine loses its device on its first pass: after
     * ENGINE_MAX_REOPEN losses the worker gives up on the GPU, and its
     * workers row must say so (paths, paths_disabled and state are
     * refreshed by the heartbeat, not frozen at registration). */
    REQUIRE_OK(wt_sql_ok(c, "TRUNCATE folio.results, folio.jobs, folio.document_sources, folio.blobs,"
                         " folio.documents, folio.workers CASCADE") == 0, "reset 7");
    REQUIRE_OK(tu_sh("rm -rf %s && mkdir -p %s && cp %s/p*.tif %s/q*.tif %s/r*.tif %s/ && %s ingest --db '%s'"
                     " --stable-ms 0 --no-progress %s >>%s/ingest.log 2>&1", inbox, inbox, dir, dir, dir, inbox,
                     tu_folio_bin(), g_db, inbox, dir) == 0, "ingest 7");
    snprintf(log, sizeof log, "%s/giveup.log", dir);
    const char *gu_args[] = {"--lease", "3", "--poll", "0.2", "--ocr-threads", "1", "--batch", "1",
                             "--device", "llvmpipe", "--max-image-tokens", "64", "--model", g_model,
                             "--mmproj", g_mmproj, NULL};
    w = wt_spawn_worker(g_db, "device_lost:1", log, gu_args);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", 3 * NDOC, 240000) == 0,
          "give-up: documents not done; see %s", log);
    /* A re-open is tried only for a document arriving after the backoff
     * (0.5, 1, 2 s): feed one more page until the worker gives up. */
    int more = 0;
    /* Given up: a re-open that failed for the last time (engine_models_off
     * retry=0), or a loss of the re-opened engine on its first page
     * (engine_gpu_lost gave_up=1; an injected loss counts the caller's
     * passes, not the re-open's warm-up, since the warm-up no longer runs
     * a full batch) */
    static const char GAVE_UP[] = "grep -Eq 'event=engine_models_off.*retry=0|event=engine_gpu_lost.*gave_up=1' %s";
    while (tu_sh(GAVE_UP, log) != 0 && more < 8) {
        char name[16], txt[64];
        snprintf(name, sizeof name, "g%d", more);
        snprintf(txt, sizeof txt, "MEMO %d\nMeeting at %d\n", more, 9 + more);
        uint8_t *d = NULL;
        size_t len = 0;
        REQUIRE_OK(wt_render(dir, name, txt, 600, 300 + 30 * more, &d, &len) == 0, "render %s", name);
        free(d);
        REQUIRE_OK(tu_sh("cp %s/%s.tif %s/ && %s ingest --db '%s' --stable-ms 0 --no-progress %s >>%s/ingest.log 2>&1",
                         dir, name, inbox, tu_folio_bin(), g_db, inbox, dir) == 0, "ingest %s", name);
        more++;
        wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", 3 * NDOC + more, 60000);
        folio_sleep_ms(1500);
    }
    CHECK(tu_sh(GAVE_UP, log) == 0, "give-up: the worker never gave up on the GPU; see %s", log);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.workers WHERE state = 'ocr-only' AND paths = '{ocr+rules}'"
                         " AND paths_disabled ? 'vision' AND paths_disabled->>'vision' LIKE '%OCR-only%'",
                      1, 10000) == 0, "workers row after giving up on the GPU; see %s", log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 60000) == 0, "worker exit after SIGTERM (give-up); see %s", log);
#endif
    PQfinish(c);
    return tu_finish();
}
