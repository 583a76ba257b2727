/* vlm_bench on tiny random models: ready cold then warm (the second open
 * must hit the pipeline cache the first one saved), pages for batch 1 and
 * 3 (one engine planned for 3; the warm-up exercises every variant both
 * use without a full batch: first_use_after_warm 0; pipelined passes give
 * the same log-probs), LM split — the JSON
 * lines appear and the numbers are positive. FOLIO_VLM_BENCH_FULL=1
 * runs the Qwen2.5-VL-7B shape (GPU machines). */
#include "tests/support/testutil.h"
#include "bench/engine/bench.h"
#include "engine/vlm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    const char *full = getenv("FOLIO_VLM_BENCH_FULL");
    const char *img = getenv("FOLIO_VIS_BENCH_IMAGE");
    int big = full && *full == '1';
    struct vlm_bench_opts o = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                               .small = !big, .iters = big ? 3 : 1,
                               .image = img ? (uint32_t)atoi(img) : (big ? 1024 : 112),
                               .cache_dir = NULL};
    static const uint32_t batches[2] = {1, 3};
    o.batches = batches;
    o.nbatches = 2;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    REQUIRE(mem != NULL, "open_memstream");
    struct folio_err e = {0};
    int rc = vlm_bench(&o, mem, &e);
    fclose(mem);
    CHECK(rc == 0, "vlm_bench: %s / %s", e.msg, e.detail);
    fputs(buf ? buf : "", stdout);
    CHECK(buf && strstr(buf, "\"cache\":\"cold\"") && strstr(buf, "\"cache\":\"warm\"") &&
              strstr(buf, "\"what\":\"pages\"") && strstr(buf, "\"what\":\"lm_split\""),
          "missing JSON lines");
    CHECK(buf && strstr(buf, "\"cache\":\"warm\",\"cache_hit\":1"), "warm open missed the cache");
    /* planned for 3; the warm-up is bounded by rows, not by the plan, and
     * neither batch size then met a variant it had not exercised */
    CHECK(buf && strstr(buf, "\"planned_batch\":3,\"warmup_tall_pages\":"),
          "the ready line lacks the plan and the warm-up's pages");
    int seen = 0;
    for (const char *at = buf; at && (at = strstr(at, "\"first_use_after_warm\":")); at++, seen++)
        CHECK(atoi(at + 23) == 0, "a timed batch used %d pipelines the warm-up had not exercised",
              atoi(at + 23));
    CHECK(seen == 2, "%d pages lines carry first_use_after_warm, want 2", seen);
    /* the pipelined passes (the next pass prepared on a thread while this
     * one runs) give the in-line passes' log-probs bit for bit */
    seen = 0;
    for (const char *at = buf; at && (at = strstr(at, "\"pipelined_same\":")); at++, seen++)
        CHECK(!strncmp(at + 17, "true", 4), "pipelined passes changed the log-probs");
    CHECK(seen == 2, "%d pages lines carry pipelined_same, want 2", seen);
    for (int b = 1; b <= 3; b += 2) {
        char key[64];
        snprintf(key, sizeof key, "\"batch\":%d,", b);
        const char *at = buf ? strstr(buf, key) : NULL;
        const char *pps = at ? strstr(at, "\"gpu_pages_per_s\":") : NULL;
        CHECK(pps && atof(pps + 18) > 0, "no pages line with gpu_pages_per_s for batch %d", b);
        const char *pl = at ? strstr(at, "\"pipelined_pages_per_s\":") : NULL;
        CHECK(pl && atof(pl + 24) > 0, "no pipelined_pages_per_s for batch %d", b);
    }
    free(buf);
    return tu_finish();
}
