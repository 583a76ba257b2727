/* The op tests' harness: device, arenas, pre-warm and seal, the helpers
 * every case group uses. See ops_test.h. */
#include "tests/engine/ops/ops_test.h"
#include "tests/engine/expect_route.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

float frand(struct T *t)
{
    return folio_rng_signed(&t->rng);
}

void fill(struct T *t, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = frand(t) * scale;
}

struct vkr_tensor put(struct T *t, struct vkr_arena *a, const void *data, uint64_t bytes)
{
    struct folio_err e = {0};
    struct vkr_tensor x;
    if (vkr_arena_alloc(a, bytes, &x, &e) != 0 || (data && vkr_upload(t->vk, x, 0, data, bytes, &e) != 0)) {
        fprintf(stderr, "FAIL: placing %llu bytes: %s / %s\n", (unsigned long long)bytes, e.msg, e.detail);
        exit(1);
    }
    return x;
}

void get(struct T *t, struct vkr_tensor x, void *out, uint64_t bytes)
{
    struct folio_err e = {0};
    if (vkr_download(t->vk, x, 0, out, bytes, &e) != 0) {
        fprintf(stderr, "FAIL: download: %s\n", e.msg);
        exit(1);
    }
}

void get_f(struct T *t, struct vkr_tensor y, int f16, void *tmp, float *out, size_t n)
{
    if (!f16) {
        get(t, y, out, n * sizeof *out);
        return;
    }
    get(t, y, tmp, n * 2);
    quant_dequantize_row(QUANT_F16, tmp, out, (int64_t)n);
}

void abs_products(const float *w, const float *x, float *sc, uint32_t m, uint32_t n, uint32_t k)
{
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = 0; j < n; j++) {
            double s = 0;
            for (uint32_t q = 0; q < k; q++)
                s += fabs((double)w[(size_t)j * k + q] * x[(size_t)i * k + q]);
            sc[(size_t)i * n + j] = (float)s;
        }
}

double worst(const float *g, const float *r, const float *scale, size_t n, double tabs, double trel,
             size_t *at)
{
    double w = 0.0;
    for (size_t i = 0; i < n; i++) {
        double s = scale ? scale[i] : fabs((double)r[i]);
        double q = fabs((double)g[i] - r[i]) / (tabs + trel * s);
        if (!(q <= w)) {
            w = q;
            *at = i;
        }
        if (isnan(g[i]))
            return INFINITY;
    }
    return w;
}

void gemm_operands(struct T *t, uint32_t m, uint32_t n, uint32_t k, struct gemm_operands *o)
{
    size_t nk = (size_t)n * k, mk = (size_t)m * k;
    float *wf = malloc(sizeof(float) * nk);
    o->wd = malloc(sizeof(float) * nk);
    o->x = malloc(sizeof(float) * mk);
    o->xd = malloc(sizeof(float) * mk);
    o->wh = malloc(nk * 2);
    o->xh = malloc(mk * 2);
    if (!wf || !o->wd || !o->x || !o->xd || !o->wh || !o->xh) {
        fprintf(stderr, "FAIL: out of host memory for GEMM operands %ux%ux%u\n", m, n, k);
        exit(1);
    }
    fill(t, wf, nk, 1.0f);
    fill(t, o->x, mk, 1.0f);
    quant_quantize_row(QUANT_F16, wf, o->wh, (int64_t)nk);
    quant_dequantize_row(QUANT_F16, o->wh, o->wd, (int64_t)nk);
    quant_quantize_row(QUANT_F16, o->x, o->xh, (int64_t)mk);
    quant_dequantize_row(QUANT_F16, o->xh, o->xd, (int64_t)mk);
    free(wf);
}

void gemm_operands_free(struct gemm_operands *o)
{
    free(o->wd), free(o->x), free(o->xd), free(o->wh), free(o->xh);
    *o = (struct gemm_operands){0};
}

/* Opens the test device, pre-warms everything, seals, runs all ops. */
/* 1 when the comma-separated list of numbers holds n. */
static int group_listed(const char *list, long n)
{
    for (const char *p = list; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            return 0;
        if (v == n)
            return 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

int run_all(int ranged)
{
    struct T t = {.rng = {0x9E3779B97F4A7C15ull}, .ranged = ranged};
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config cfg = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                             .validate = -1, .cache_dir = ""};
    struct folio_err e = {0};
    int rc = vkr_open(&cfg, &t.vk, &e);
    REQUIRE(rc == 0, "vkr_open: %s / %s / %s", e.msg, e.detail, e.hint);
    expect_gemm_route(t.vk);
    static void (*const tests[])(struct T *) = {test_matmul, test_expand_f16, test_gemm, test_gemm_epilogues,
                                                test_gemm_configs, test_gemm_split_rule,
                                                 test_norm_softmax, test_rope, test_attention,
                                                 test_attention_fused, test_attention_errors,
                                                 test_attention_split, test_elem, test_rows,
                                                 test_int8,
                                                 /* last: the groups above keep their inputs */
                                                 test_attention_two_ranges, test_gemm_order,
                                                 /* its own random stream */
                                                 test_patchify};
    /* FOLIO_TEST_GROUPS=2,15: only those case groups (the numbers the log
     * prints), for a short run of the kernels a change touched (a device
     * call; the lavapipe26 tests) */
    const char *only = getenv("FOLIO_TEST_GROUPS");
    /* the groups that ask for GEMM tiles other than AUTO's: every tile's
     * pipelines are pre-warmed only for them (on lavapipe 26 those are most
     * of the run's shader compiles) */
    int configs = !(only && *only);
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        configs |= (tests[i] == test_gemm_configs || tests[i] == test_gemm || tests[i] == test_int8 ||
                    /* its workgroup-scope row */
                    (tests[i] == test_gemm_order && vkr_features(t.vk)->coopmat2_nv)) &&
                   only && *only && group_listed(only, (long)i);
    int failed = -1;
    rc = ops_prewarm(t.vk, &failed, &e);
    REQUIRE(rc == 0 && failed == 0, "prewarm: rc %d failed %d: %s", rc, failed, e.msg);
    if (configs) {
        /* every GEMM configuration (test_gemm_configs), as bench ops --only gemm does */
        static struct vkr_pipeline_key gk[2048];
        int ng = ops_gemm_keys_all(t.vk, 1, gk);
        ng += ops_gemm_keys_for_k(t.vk, 1280, UINT32_MAX, &gk[ng]);
        ng += ops_gemm_keys_for_k(t.vk, 3584, UINT32_MAX, &gk[ng]);
        /* the int8 GEMM's tiles, and its K-fixed form at the 7B K (int8.c) */
        const uint32_t i8k[] = {3584, 18944};
        ng += ops_gemm_i8_keys_all(t.vk, NULL, 0, &gk[ng]);
        ng += ops_gemm_i8_keys(t.vk, i8k, 2, i8k, 2, &gk[ng]);
        ng = ops_keys_unique(gk, ng); /* the table's K-fixed rows repeat for_k's keys */
        rc = vkr_prewarm(t.vk, gk, ng, &failed, &e);
        REQUIRE(rc == 0 && failed == 0, "GEMM configurations: rc %d failed %d: %s", rc, failed, e.msg);
    }
    vkr_seal(t.vk);
    struct vkr_stats s0;
    vkr_get_stats(t.vk, &s0);
    rc = vkr_arena_create(t.vk, "weights", VKR_ARENA_WEIGHTS, &t.w, &e);
    REQUIRE(rc == 0, "%s", e.msg);
    rc = vkr_arena_create(t.vk, "act", VKR_ARENA_ACTIVATIONS, &t.act, &e);
    REQUIRE(rc == 0, "%s", e.msg);
    /* The largest single pass above needs well under 1 MiB of activations. */
    uint64_t plan[] = {1u << 20};
    rc = vkr_arena_plan(t.act, plan, 1, &e);
    REQUIRE(rc == 0, "plan: %s", e.msg);

    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (only && *only && !group_listed(only, (long)i))
            continue;
        double t0 = folio_mono_ms();
        tests[i](&t);
        fprintf(stderr, "ops: case group %zu took %.0f ms\n", i, folio_mono_ms() - t0);
    }

    if (ranged)
        test_identical(&t);
    struct vkr_stats s;
    vkr_get_stats(t.vk, &s);
    CHECK(s.pipeline_requests_after_seal == 0, "%llu pipeline requests after seal",
          (unsigned long long)s.pipeline_requests_after_seal);
    CHECK(s.pipelines_built == s0.pipelines_built, "pipelines created after seal: %u -> %u",
          s0.pipelines_built, s.pipelines_built);
    if (ranged) {
        CHECK(vkr_arena_blocks(t.w) > 1, "weights should span several blocks, got %u",
              vkr_arena_blocks(t.w));
        CHECK(vkr_limits(t.vk)->max_range <= 65536, "range override not applied");
    }
    fprintf(stderr, "ops: %llu dispatches, %llu submits, %u weight blocks, validation messages %llu\n",
            (unsigned long long)s.dispatches, (unsigned long long)s.submits, vkr_arena_blocks(t.w),
            (unsigned long long)s.validation_messages);
    vkr_arena_destroy(t.act);
    vkr_arena_destroy(t.w);
    vkr_get_stats(t.vk, &s);
    CHECK(s.validation_messages == 0, "%llu validation messages", (unsigned long long)s.validation_messages);
    vkr_close(t.vk);
    return tu_finish();
}
