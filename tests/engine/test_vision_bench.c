/* The vision benchmark (vis_bench) on a small random tower: it runs, prints
 * its JSON lines (setup, tower, breakdown) and the embeddings are finite.
 * FOLIO_VIS_BENCH_FULL=1 runs the real Qwen2.5-VL-7B tower shape instead
 * (GPU machines; FOLIO_VIS_BENCH_IMAGE sets the page side, default 1024). */
#include "tests/support/testutil.h"
#include "bench/engine/bench.h"
#include "engine/quant/quant.h"
#include "engine/model/vision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    const char *full = getenv("FOLIO_VIS_BENCH_FULL");
    const char *img = getenv("FOLIO_VIS_BENCH_IMAGE");
    struct vis_bench_opts o = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                               .small = !(full && *full == '1'), .iters = full ? 3 : 1,
                               .image = img ? (uint32_t)atoi(img) : 0,
                               .mat_type = QUANT_F16};
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    REQUIRE(mem != NULL, "open_memstream");
    struct folio_err e = {0};
    int rc = vis_bench(&o, mem, &e);
    fclose(mem);
    CHECK(rc == 0, "vis_bench: %s / %s", e.msg, e.detail);
    fputs(buf ? buf : "", stdout);
    CHECK(buf && strstr(buf, "\"what\":\"setup\"") && strstr(buf, "\"what\":\"tower\"") &&
              strstr(buf, "\"what\":\"breakdown\""),
          "missing JSON lines");
    CHECK(buf && strstr(buf, "\"finite\":true"), "non-finite embeddings");
    free(buf);
    return tu_finish();
}
