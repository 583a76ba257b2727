/* The worker's GPU stage (issue 14): the real `folio worker` with the
 * parity kit's tiny Qwen2.5-VL pair on lavapipe, a real server, real
 * Tesseract; documents go in through `folio ingest`.
 *  1. --gpu-batch 1: the baseline labels, one result per document;
 *  2. --gpu-batch 4, --ocr-threads not given: the worker runs at least
 *     2 x batch + 2 job threads, passes carry several pages (the worker_gpu
 *     line: pages > passes), every document ends done with exactly one
 *     result (0 lost, 0 doubled), with the same labels as batch 1 and the
 *     same confidence within 1e-3; job log lines carry the display name,
 *     logfmt-quoted when it holds a space;
 *  2b. a 4-page TIFF with one job thread: its pages share one pass of 4
 *     (the worker_gpu line: passes=1 pages=4), every page by vision;
 * with fault injection (test builds):
 *  3. gpu_page_fail:H fails every pass holding the page of height H, and
 *     gpu_gather_ms makes the first pass a full batch: the batch is split
 *     (gpu_batch_split), its other pages get vision, the bad page falls
 *     back to the OCR tiers with the reason;
 *  4. a device loss inside a full batch (device_lost:2 + gpu_gather_ms):
 *     every page of that pass falls back to the OCR tiers with the
 *     reason (not one, not failed); none lost, none doubled;
 *  5. SIGTERM with pages queued for the GPU (gpu_gather_ms holds the GPU
 *     thread): after --grace the queued pages are taken back out, their
 *     jobs released (queued again, attempt not counted), no job left
 *     running, no result written, exit 0. */
#include "pipeline/db/db.h"
#include "tests/pg/worker_testlib.h"

#include <leptonica/allheaders.h>

#define NDOC 8

static char g_db[512];
static char g_model[1200], g_mmproj[1200];
static char g_dir[1024], g_inbox[1100];

/* Fresh queue holding the first n pages, one ingest pass. Page 7 goes in
 * as "scan 7.tif": a display name logfmt must quote. n < 0: the one file
 * multi.tif instead. */
static int ingest(PGconn *c, int n)
{
    if (wt_sql_ok(c, "TRUNCATE folio.results, folio.jobs, folio.document_sources, folio.blobs,"
                  " folio.documents, folio.workers CASCADE"))
        return -1;
    if (tu_sh("rm -rf %s && mkdir -p %s", g_inbox, g_inbox))
        return -1;
    if (n < 0 && tu_sh("cp %s/multi.tif %s/", g_dir, g_inbox))
        return -1;
    for (int i = 0; i < n; i++)
        if (tu_sh(i == 7 ? "cp %s/b%d.tif '%s/scan %d.tif'" : "cp %s/b%d.tif %s/b%d.tif", g_dir, i, g_inbox, i))
            return -1;
    return tu_sh("%s ingest --db '%s' --stable-ms 0 --no-progress %s >>%s/ingest.log 2>&1", tu_folio_bin(), g_db,
                 g_inbox, g_dir);
}

static pid_t spawn(const char *log, const char *fault, const char *const *extra)
{
    const char *args[40] = {"--lease", "30", "--poll", "0.2", "--retry-base", "0.2", "--retry-max", "1",
                            "--device", "llvmpipe", "--max-image-tokens", "64", "--model", g_model,
                            "--mmproj", g_mmproj};
    int n = 16;
    for (int i = 0; extra && extra[i] && n < 38; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return wt_spawn_worker(g_db, fault, log, args);
}

/* Runs one worker until n jobs are done, then SIGTERM; 0 when it exited 0. */
static int run_until_done(PGconn *c, const char *log, const char *fault, const char *const *extra, int n)
{
    pid_t w = spawn(log, fault, extra);
    int rc = wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", n, 300000);
    CHECK(rc == 0, "jobs not all done within 300 s; see %s", log);
    CHECK(waitpid(w, NULL, WNOHANG) == 0, "worker exited early; see %s", log);
    kill(w, SIGTERM);
    int st = wt_wait_exit(w, 60000);
    CHECK(st == 0, "worker exit status %d after SIGTERM; see %s", st, log);
    return rc || st;
}

/* One result per document, none missing, none doubled. */
static void check_exactly_once(PGconn *c, int n, const char *what)
{
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results") == n &&
              wt_q1(c, "SELECT count(DISTINCT document_id) FROM folio.results") == n &&
              wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'done'") == n,
          "%s: %lld results for %d documents (%lld distinct)", what, wt_q1(c, "SELECT count(*) FROM folio.results"), n,
          wt_q1(c, "SELECT count(DISTINCT document_id) FROM folio.results"));
}

/* "sha label confidence" per document, ordered by sha: the labels of a run. */
static void labels_of(PGconn *c, char (*out)[128], int n)
{
    PGresult *r = PQexec(c, "SELECT encode(d.sha256, 'hex'), r.label, r.confidence, r.engine_path"
                            " FROM folio.results r JOIN folio.documents d ON d.id = r.document_id ORDER BY 1");
    for (int i = 0; i < n; i++)
        snprintf(out[i], 128, "%s %s %s %s", i < PQntuples(r) ? PQgetvalue(r, i, 0) : "-",
                 i < PQntuples(r) ? PQgetvalue(r, i, 1) : "-", i < PQntuples(r) ? PQgetvalue(r, i, 2) : "0",
                 i < PQntuples(r) ? PQgetvalue(r, i, 3) : "-");
    PQclear(r);
}

int main(void)
{
    const char *src = getenv("FOLIO_SOURCE_DIR");
    snprintf(g_model, sizeof g_model, "%s/tests/fixtures/parity/qwen25vl/text-F32.gguf", src);
    snprintf(g_mmproj, sizeof g_mmproj, "%s/tests/fixtures/parity/qwen25vl/mmproj-F32.gguf", src);
    PGconn *c = wt_fresh_schema("folio_test_worker_batch", g_db, sizeof g_db);
    REQUIRE(c != NULL, "fresh schema");
    REQUIRE_OK(wt_sql_ok(c, "UPDATE folio.labels SET active = false") == 0 &&
                   wt_sql_ok(c, "INSERT INTO folio.labels (name, keywords) VALUES"
                             " ('receipt', '{receipt,total}'), ('resume', '{resume,experience}'),"
                             " ('datasheet', '{datasheet,voltage}')"
                             " ON CONFLICT (name) DO UPDATE SET active = true, keywords = EXCLUDED.keywords") == 0,
               "labels");
    snprintf(g_dir, sizeof g_dir, "%s", tu_scratch("worker_batch"));
    snprintf(g_inbox, sizeof g_inbox, "%s/inbox", g_dir);
    static const char *const texts[3] = {"RECEIPT\nTotal %d.00\nThank you\n", "RESUME %d\nExperience: ten years\n",
                                         "DATASHEET %d\nVoltage 3.3 V\nCurrent 20 mA\n"};
    for (int i = 0; i < NDOC; i++) {
        char name[16], txt[96];
        snprintf(name, sizeof name, "b%d", i);
        snprintf(txt, sizeof txt, texts[i % 3], 10 + i);
        uint8_t *d = NULL;
        size_t len = 0;
        /* distinct heights: gpu_page_fail picks one page by its height */
        REQUIRE_OK(wt_render(g_dir, name, txt, 640, 300 + 20 * i, &d, &len) == 0, "render %s", name);
        free(d);
    }
    char log[1200];

    /* 1. baseline: one page per pass (the rendered files hold one or two
     * pages; a job's pages go to the GPU one after the other) */
    REQUIRE_OK(ingest(c, NDOC) == 0, "ingest 1");
    snprintf(log, sizeof log, "%s/batch1.log", g_dir);
    const char *b1[] = {"--gpu-batch", "1", "--ocr-threads", "2", NULL};
    run_until_done(c, log, NULL, b1, NDOC);
    check_exactly_once(c, NDOC, "batch 1");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE engine_path = 'vision'") == NDOC,
          "batch 1: not every document by vision; see %s", log);
    static char base[NDOC][128], got[NDOC][128];
    labels_of(c, base, NDOC);

    /* 2. four pages per pass, thread count chosen by the worker */
    REQUIRE_OK(ingest(c, NDOC) == 0, "ingest 2");
    snprintf(log, sizeof log, "%s/batch4.log", g_dir);
    const char *b4[] = {"--gpu-batch", "4", NULL};
    run_until_done(c, log, NULL, b4, NDOC);
    check_exactly_once(c, NDOC, "batch 4");
    labels_of(c, got, NDOC);
    for (int i = 0; i < NDOC; i++) {
        char sb[80], lb[80], pb[16], sg[80], lg[80], pg[16];
        double cb = 0, cg = 0;
        int nb = sscanf(base[i], "%79s %79s %lf %15s", sb, lb, &cb, pb);
        int ng = sscanf(got[i], "%79s %79s %lf %15s", sg, lg, &cg, pg);
        CHECK(nb == 4 && ng == 4 && strcmp(sb, sg) == 0 && strcmp(lb, lg) == 0 && strcmp(pg, "vision") == 0 &&
                  cb - cg < 1e-3 && cg - cb < 1e-3,
              "batch 4 differs from batch 1: '%s' vs '%s'", got[i], base[i]);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want_threads = cores > 10 ? (int)cores : 10; /* the default (cores), raised to 2 x batch + 2 */
    CHECK(tu_sh("grep -q 'event=worker_started ocr_threads=%d gpu_batch=4 ' %s", want_threads, log) == 0,
          "batch 4: the worker did not size its threads to 2 x batch + 2 (%d); see %s", want_threads, log);
    CHECK(tu_sh("grep 'event=worker_gpu ' %s | sed 's/.*passes=\\([0-9]*\\) pages=\\([0-9]*\\).*/\\1 \\2/' |"
                " awk '{ exit !($2 >= %d && $1 < $2) }'", log, NDOC) == 0,
          "batch 4: no pass carried several pages (worker_gpu line); see %s", log);
    CHECK(tu_sh("grep -q 'event=job_done job=[0-9]* document=[0-9]* name=b0.tif attempt=1 ' %s", log) == 0,
          "job_done lacks the display name; see %s", log);
    CHECK(tu_sh("grep -q 'event=job_done job=[0-9]* document=[0-9]* name=\"scan 7.tif\" ' %s", log) == 0,
          "job_done lacks the quoted display name \"scan 7.tif\"; see %s", log);

    /* 2b. the pages of one document share a pass (issue 15): a 4-page
     * TIFF (the first pages of b0..b3) and one job thread, so nothing
     * else can fill the pass: one pass of 4, every page by vision */
    {
        char p[1200], out[1200];
        snprintf(out, sizeof out, "%s/multi.tif", g_dir);
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "%s/b%d.tif", g_dir, i);
            PIX *pix = pixRead(p);
            REQUIRE(pix, "read %s", p);
            REQUIRE_OK(pixWriteTiff(out, pix, IFF_TIFF_G4, i ? "a" : "w") == 0, "multi-page tiff");
            pixDestroy(&pix);
        }
    }
    REQUIRE_OK(ingest(c, -1) == 0, "ingest 2b");
    snprintf(log, sizeof log, "%s/multipage.log", g_dir);
    const char *b2b[] = {"--gpu-batch", "4", "--ocr-threads", "1", NULL};
    run_until_done(c, log, NULL, b2b, 1);
    check_exactly_once(c, 1, "4-page document");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.page_results WHERE engine_path = 'vision'") == 4,
          "4-page document: %lld of 4 pages by vision; see %s",
          wt_q1(c, "SELECT count(*) FROM folio.page_results WHERE engine_path = 'vision'"), log);
    CHECK(tu_sh("grep -q 'event=worker_gpu passes=1 pages=4 ' %s", log) == 0,
          "4-page document: its pages did not go to the GPU in one pass of 4 (worker_gpu line); see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results r JOIN folio.page_results p"
                   " ON p.document_id = r.document_id AND p.page = 1"
                   " WHERE r.label = p.label AND abs(r.confidence - p.confidence) < 1e-6") == 1,
          "4-page document: its result is not its first page's; see %s", log);

#ifdef FOLIO_FAULT_INJECTION
    /* 3. one bad page inside a full batch */
    REQUIRE_OK(ingest(c, 4) == 0, "ingest 3");
    snprintf(log, sizeof log, "%s/badpage.log", g_dir);
    const char *b3[] = {"--gpu-batch", "4", "--ocr-threads", "4", NULL};
    run_until_done(c, log, "gpu_page_fail:340,gpu_gather_ms:2000", b3, 4);
    check_exactly_once(c, 4, "bad page");
    CHECK(tu_sh("grep -q 'event=gpu_batch_split pages=[2-4] ' %s", log) == 0,
          "bad page: the failed batch was not split; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE engine_path = 'vision'") == 3,
          "bad page: %lld vision results, want the 3 neighbours; see %s",
          wt_q1(c, "SELECT count(*) FROM folio.results WHERE engine_path = 'vision'"), log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results r JOIN folio.documents d ON d.id = r.document_id"
                   " WHERE d.height = 340 AND r.engine_path <> 'vision'"
                   " AND r.fallback_reason LIKE '%injected page failure%'") == 1,
          "bad page: the page of height 340 did not fall back with its reason; see %s", log);

    /* 3b. a page whose scores come back NaN (a model that overflows on it):
     * it falls back with the reason, its neighbours keep vision, nothing
     * is written with a NaN confidence or retried until dead */
    REQUIRE_OK(ingest(c, 4) == 0, "ingest 3b");
    snprintf(log, sizeof log, "%s/nanpage.log", g_dir);
    run_until_done(c, log, "gpu_nan:340,gpu_gather_ms:2000", b3, 4);
    check_exactly_once(c, 4, "NaN page");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results r JOIN folio.documents d ON d.id = r.document_id"
                   " WHERE d.height = 340 AND r.engine_path <> 'vision'"
                   " AND r.fallback_reason LIKE '%not finite%'") == 1,
          "NaN page: the page of height 340 did not fall back with the reason; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE engine_path = 'vision'") == 3,
          "NaN page: %lld vision results, want the 3 neighbours; see %s",
          wt_q1(c, "SELECT count(*) FROM folio.results WHERE engine_path = 'vision'"), log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'dead'") == 0,
          "NaN page: a job ended dead; see %s", log);

    /* 4. the device is lost inside a full batch. device_lost:2 is the
     * second real pass (the first is the warm-up's, not counted). A
     * document's pages (every rendered file here has two) go to the GPU
     * together, so the first pass holds the first documents' pages and the
     * one that loses the GPU the others'; each page of it, and any page
     * prepared before the re-open, falls back to the OCR tiers with the
     * reason, none failed, none lost */
    REQUIRE_OK(ingest(c, 4) == 0, "ingest 4");
    snprintf(log, sizeof log, "%s/lost.log", g_dir);
    const char *b4l[] = {"--gpu-batch", "4", "--ocr-threads", "4", NULL};
    run_until_done(c, log, "device_lost:2,gpu_gather_ms:2000", b4l, 4);
    check_exactly_once(c, 4, "device loss in a batch");
    CHECK(tu_sh("grep -q 'event=engine_gpu_lost' %s", log) == 0, "no engine_gpu_lost in %s", log);
    long long vis = wt_q1(c, "SELECT count(*) FROM folio.page_results WHERE engine_path = 'vision'");
    long long fell = wt_q1(c, "SELECT count(*) FROM folio.page_results WHERE engine_path <> 'vision'"
                              " AND fallback_reason LIKE '%injected device loss%'");
    long long all = wt_q1(c, "SELECT count(*) FROM folio.page_results");
    CHECK(vis >= 2 && fell >= 2 && vis + fell == all,
          "device loss: %lld pages by vision (want the first pass, >= 2), %lld fell back with the reason"
          " (want the whole lost batch, >= 2), of %lld; see %s", vis, fell, all, log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE attempts > 1") == 0,
          "device loss: a job was retried instead of falling back");

    /* 5. SIGTERM while pages wait in the GPU queue */
    REQUIRE_OK(ingest(c, 4) == 0, "ingest 5");
    snprintf(log, sizeof log, "%s/sigterm.log", g_dir);
    const char *b5[] = {"--gpu-batch", "4", "--ocr-threads", "4", "--grace", "1", NULL};
    pid_t w = spawn(log, "gpu_gather_ms:8000", b5);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state = 'running'", 4, 240000) == 0,
          "sigterm: four jobs never ran; see %s", log);
    folio_sleep_ms(2000); /* decoded, prepared and queued; the GPU thread holds off 8 s */
    kill(w, SIGTERM);
    int st = wt_wait_exit(w, 60000);
    CHECK(st == 0, "sigterm: worker exit status %d; see %s", st, log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued' AND attempts = 0") == 4,
          "sigterm: %lld of 4 jobs released back to the queue; see %s",
          wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued' AND attempts = 0"), log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results") == 0, "sigterm: a result was written; see %s", log);
    CHECK(tu_sh("[ $(grep -c 'event=job_released ' %s) -eq 4 ]", log) == 0, "sigterm: not 4 job_released lines in %s",
          log);
    CHECK(tu_sh("grep -q 'event=worker_gpu passes=0 ' %s", log) == 0,
          "sigterm: a queued page still reached the GPU after shutdown; see %s", log);
#endif
    PQfinish(c);
    return tu_finish();
}
