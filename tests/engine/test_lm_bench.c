/*
 * lm_bench (what `folio bench engine --text` prints) runs end to end on a
 * small model: it must print the roofline, prefill and labels JSON lines
 * with finite, positive numbers. No timing is asserted.
 *
 * With FOLIO_LM_BENCH_FULL=1 it runs the real measurement instead (the
 * Qwen2.5-VL-7B text shape, 1,400 tokens, 16 labels) and copies the JSON
 * lines to stdout: this engine-only binary is how a GPU machine without
 * libpq runs the benchmark.
 */
#include "tests/support/testutil.h"
#include "bench/engine/bench.h"
#include "common/common.h"
#include "engine/model/lm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    const char *full = getenv("FOLIO_LM_BENCH_FULL");
    int big = full && *full == '1';
    struct lm_bench_opts o = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                              .small = !big, .prompt_tokens = big ? 0 : 16,
                              .labels = big ? 0 : 3, .iters = big ? 0 : 1};
    FILE *f = tmpfile();
    REQUIRE(f != NULL, "tmpfile");
    struct folio_err e = {0};
    int rc = lm_bench(&o, f, &e);
    CHECK(rc == 0, "lm_bench: %s / %s / %s", e.msg, e.detail, e.hint);
    rewind(f);
    char line[4096];
    int roof = 0, pre = 0, lab = 0;
    while (fgets(line, sizeof line, f)) {
        fputs(line, stdout);
        CHECK(line[0] == '{' && strstr(line, "}\n") && !strstr(line, "nan") &&
                  !strstr(line, "inf"),
              "not a finite JSON line: %s", line);
        roof += strstr(line, "\"what\":\"roofline\"") != NULL;
        pre += strstr(line, "\"what\":\"prefill\"") && strstr(line, "\"tokens_per_s\":");
        lab += strstr(line, "\"what\":\"labels\"") && strstr(line, "\"score_ms\":");
    }
    fclose(f);
    CHECK(roof == 1 && pre == 1 && lab == 1, "lines: roofline %d prefill %d labels %d", roof, pre,
          lab);
    return tu_finish();
}
