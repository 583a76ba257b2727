/*
 * doctor and bench ops (engine_doctor_ops, engine_doctor_model and
 * ops_bench, behind `folio doctor`, `folio bench ops` and `folio-engine`):
 * the doctor report names the device, limits, features, pipelines built,
 * requests after seal (0), cache result and allocation-callback totals; a
 * missing model file is reported as such; a quick roofline + attention bench prints
 * well-formed JSON lines with positive rates and a summary with zero
 * requests after seal.
 */
#include "tests/support/testutil.h"
#include "common/common.h"
#include "bench/engine/bench.h"
#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    char cache[600];
    snprintf(cache, sizeof cache, "%s", tu_scratch("tools"));
    setenv("XDG_CACHE_HOME", cache, 1);
    struct engine_doctor_opts o = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1, .json = 1};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f != NULL, "open_memstream");
    struct folio_err e = {0};
    int rc = engine_doctor_ops(&o, f, &e);
    fclose(f);
    CHECK(rc == 0, "doctor: %s", e.msg);
    static const char *keys[] = {"\"devices\":[", "\"limits\":", "\"max_range\":", "\"features\":",
                                 "\"push_descriptor\":", "\"built\":", "\"requests_after_seal\":0",
                                 "\"cache\":\"miss\"", "\"host_alloc_callbacks\":", "\"validation_messages\":0"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK(buf && strstr(buf, keys[i]), "doctor JSON lacks %s: %s", keys[i], buf ? buf : "");
    free(buf);

    /* Second run: the cache written by the first must hit. */
    o.json = 0;
    f = open_memstream(&buf, &len);
    rc = engine_doctor_ops(&o, f, &e);
    fclose(f);
    CHECK(rc == 0 && buf && strstr(buf, "pipeline cache: hit") && strstr(buf, "requests after seal 0"),
          "doctor text: %s", buf ? buf : e.msg);
    free(buf);

    /* The model half of the doctor's face: a file that is not there is one
     * JSON line naming it and the error, and a failure the doctor reports. */
    char missing[700];
    snprintf(missing, sizeof missing, "%s/no-such-model.gguf", cache);
    f = open_memstream(&buf, &len);
    folio_err_clear(&e);
    rc = engine_doctor_model(missing, 1, f, &e);
    fclose(f);
    CHECK(rc == FOLIO_EIO && buf && strstr(buf, "no-such-model.gguf") && strstr(buf, "\"ok\":false"),
          "doctor model, missing file: rc %d %s", rc, buf ? buf : e.msg);
    free(buf);

    struct ops_tool_opts b = {.device = o.device, .allow_cpu = 1, .quick = 1, .reps = 1, .only = "attention"};
    f = open_memstream(&buf, &len);
    rc = ops_bench(&b, f, &e);
    fclose(f);
    CHECK(rc == 0, "bench: %s", e.msg);
    int lines = 0, attn = 0;
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        lines++;
        CHECK(l[0] == '{', "not a JSON line: %.80s", l);
        if (strncmp(l, "{\"bench\":\"ops\",\"op\":\"attention\"", 31) == 0) {
            attn++;
            char *g = strstr(l, "\"ms\":");
            CHECK(g && atof(g + 5) > 0, "attention time: %.200s", l);
        }
    }
    /* 5 model shapes x {f32, f16} x every kernel the device has (scalar;
     * tensor cores on a GPU with them), each with TFLOP/s. */
    CHECK(attn >= 10 && attn % 10 == 0 && strstr(buf, "\"op\":\"roofline\"") &&
          strstr(buf, "\"requests_after_seal\":0") && strstr(buf, "\"tflops\":"),
          "bench output (%d lines): %s", lines, buf ? buf : "");
    static const char *const cases[] = {"vision_full", "vision_window64", "text_prefill",
                                        "label_scoring", "text_decode"};
    for (int i = 0; i < 5; i++)
        CHECK(buf && strstr(buf, cases[i]), "attention case %s missing", cases[i]);
    free(buf);
    return tu_finish();
}
