/*
 * The tensor-core GEMM: epilogues, operand types and alignments, and every
 * configuration of every route. Runs where the device has it (the H200;
 * lavapipe has no cooperative matrices: these cases report themselves
 * skipped there). See ops_test.h for the harness.
 */
#include "tests/engine/ops/ops_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A weights arena for one case's operands; NULL (the failure checked) when
 * the device has none to give. */
static struct vkr_arena *gemm_arena(struct T *t)
{
    struct vkr_arena *ar = NULL;
    struct folio_err ae = {0};
    int rc = vkr_arena_create(t->vk, "gemm", VKR_ARENA_WEIGHTS, &ar, &ae);
    CHECK(rc == 0, "gemm arena: %s", ae.msg);
    return rc == 0 ? ar : NULL;
}

/* The GEMM's f16 outputs and activation epilogues (SwiGLU against an f32
 * gate, GELU, quick-GELU), on the vision tower's small shapes too: under
 * lowered binding ranges (ranged mode) these rows are dispatched in chunks
 * of 45 or 91 rows, which is where an f16 store of a chunk edge would
 * clobber its neighbour. */
void test_gemm_epilogues(struct T *t)
{
    if (!ops_gemm_available(t->vk)) {
        fprintf(stderr, "ops: tensor-core GEMM not on this device; GEMM epilogue cases not run\n");
        return;
    }
    static const uint32_t shapes[][3] = {{160, 90, 64}, {160, 64, 90}, {45, 256, 256},
                                         {161, 130, 1176}, {300, 96, 520}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int act = 0; act < 4; act++)
            for (int yt = 0; yt < 2; yt++)
                for (int sp = 0; sp < 2; sp++) { /* sp: K in 3 slices (splitk.comp's epilogue) */
                uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
                if ((uint64_t)m * (n > k ? n : k) * 4 > vkr_limits(t->vk)->block_size)
                    continue;
                struct vkr_arena *ar = gemm_arena(t);
                if (!ar)
                    return;
                size_t nk = (size_t)n * k, mk = (size_t)m * k, mn = (size_t)m * n;
                struct gemm_operands o;
                gemm_operands(t, m, n, k, &o);
                const float *wd = o.wd, *xd = o.xd;
                float *bias = malloc(sizeof(float) * n), *gate = malloc(sizeof(float) * mn);
                float *yr = malloc(sizeof(float) * mn), *yg = malloc(sizeof(float) * mn);
                float *sc = malloc(sizeof(float) * mn);
                uint8_t *yh = malloc(mn * 2);
                fill(t, bias, n, 1.0f);
                fill(t, gate, mn, 3.0f);
                ops_ref_matmul(wd, xd, bias, yr, m, n, k);
                for (size_t i = 0; i < mn; i++) {
                    double s = 0, v = yr[i];
                    for (uint32_t q = 0; q < k; q++)
                        s += fabs((double)wd[(i % n) * k + q] * xd[(i / n) * k + q]);
                    double g = gate[i], slope = 1.2; /* |d act / d v| bound for GELU, quick-GELU */
                    if (act == OP_MM_ACT_SWIGLU) {
                        slope = fabs(g / (1.0 + exp(-g)));
                        v *= g / (1.0 + exp(-g));
                    } else if (act == OP_MM_ACT_GELU_ERF) {
                        v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752));
                    } else if (act == OP_MM_ACT_QUICK_GELU) {
                        v = v / (1.0 + exp(-1.702 * v));
                    } else {
                        slope = 1.0;
                    }
                    yr[i] = (float)v;
                    /* f16 operands, f32 accumulation; an f16 output adds its own rounding */
                    sc[i] = (float)(s * slope + (yt ? fabs(v) * 0.5 : 0.0));
                }
                struct vkr_tensor gt = put(t, ar, gate, sizeof(float) * mn);
                struct vkr_tensor bt = put(t, ar, bias, sizeof(float) * n);
                struct op_matmul a = {.w = put(t, ar, o.wh, nk * 2), .wtype = QUANT_F16, .n = n,
                                      .k = k, .m = m, .kernel = OP_MM_GEMM, .xtype = QUANT_F16,
                                      .ytype = yt ? QUANT_F16 : QUANT_F32, .bias = &bt,
                                      .act = (enum op_mm_act)act,
                                      .gate = act == OP_MM_ACT_SWIGLU ? &gt : NULL};
                a.x = put(t, ar, o.xh, mk * 2);
                a.y = put(t, ar, NULL, mn * (yt ? 2 : 4));
                struct vkr_tensor skt = put(t, ar, NULL, mn * 4 * 3);
                a.split = &skt;
                a.split_k = sp ? 3 : 1;
                RUN(t, op_matmul(c, &a, e));
                get_f(t, a.y, yt, yh, yg, mn);
                size_t at = 0;
                double wv = worst(yg, yr, sc, mn, 1e-5, 2e-3, &at);
                CHECK(wv <= 1.0, "gemm epilogue m=%u n=%u k=%u act=%d y=%s split=%d: worst %.3g at %zu "
                      "(row %zu col %zu: gpu %g ref %g)", m, n, k, act, yt ? "f16" : "f32", sp ? 3 : 1, wv,
                      at, at / n, at % n, (double)yg[at], (double)yr[at]);
                free(bias), free(gate), free(yr), free(yg), free(sc), free(yh);
                gemm_operands_free(&o);
                vkr_arena_destroy(ar);
            }
}

/* The tensor-core GEMM (f16 weights; f32 or f16 inputs; bias and residual
 * epilogues; every alignment class of k and both tile shapes) against the
 * C reference. */
void test_gemm(struct T *t)
{
    if (!ops_gemm_available(t->vk)) {
        fprintf(stderr, "ops: tensor-core GEMM not on this device; GEMM cases not run\n");
        return;
    }
    /* (m, n, k): k % 8 == 0, k % 8 == 4, k % 4 == 2 (f16 inputs only),
     * edges in m and n, and one shape with enough tiles for the large tile */
    static const uint32_t shapes[][3] = {{64, 64, 256},   {70, 130, 520},  {130, 300, 1540},
                                         {129, 257, 1538}, {300, 1000, 96}, {2048, 2304, 256},
                                         {77, 48, 32}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int xt = 0; xt < 2; xt++)
            for (int epi = 0; epi < 3; epi++)
                for (int sp = 0; sp < 2; sp++) { /* sp: K in 3 slices, else AUTO's */
                uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
                if (xt == 0 && k % 4)
                    continue;
                if (si == 5 && epi != 2)
                    continue; /* the big one once, with everything on */
                if ((uint64_t)m * (n > k ? n : k) * 4 > vkr_limits(t->vk)->block_size)
                    continue; /* lowered block size (ranged mode): tensors must fit one */
                struct vkr_arena *ar = gemm_arena(t);
                if (!ar)
                    return;
                struct gemm_operands o;
                gemm_operands(t, m, n, k, &o);
                /* f32 inputs: the reference multiplies X as it is (the kernel's
                 * own rounding of it is what the bound below allows for) */
                const float *wd = o.wd, *xd = xt ? o.xd : o.x;
                float *bias = malloc(sizeof(float) * n), *res = malloc(sizeof(float) * m * n);
                float *yg = malloc(sizeof(float) * m * n), *yr = malloc(sizeof(float) * m * n);
                float *sc = malloc(sizeof(float) * m * n);
                fill(t, bias, n, 1.0f);
                fill(t, res, (size_t)m * n, 4.0f);
                int use_bias = epi >= 1, use_res = epi == 2;
                ops_ref_matmul(wd, xd, use_bias ? bias : NULL, yr, m, n, k);
                abs_products(wd, xd, sc, m, n, k);
                for (size_t i = 0; use_res && i < (size_t)m * n; i++)
                    yr[i] += res[i];
                struct vkr_tensor rt;
                struct op_matmul a = {.w = put(t, ar, o.wh, (uint64_t)n * k * 2), .wtype = QUANT_F16,
                                      .n = n, .k = k, .m = m, .kernel = OP_MM_GEMM,
                                      .xtype = xt ? QUANT_F16 : QUANT_F32};
                a.x = xt ? put(t, ar, o.xh, (uint64_t)m * k * 2) : put(t, ar, o.x, sizeof(float) * m * k);
                struct vkr_tensor bt = put(t, ar, bias, sizeof(float) * n);
                /* the residual is summed in place: y starts as the residual */
                a.y = put(t, ar, use_res ? res : NULL, sizeof(float) * m * n);
                rt = a.y;
                a.bias = use_bias ? &bt : NULL;
                a.res = use_res ? &rt : NULL;
                struct vkr_tensor skt = put(t, ar, NULL, sizeof(float) * m * n * 3);
                a.split = &skt;
                a.split_k = sp ? 3 : 0;
                RUN(t, op_matmul(c, &a, e));
                get(t, a.y, yg, sizeof(float) * m * n);
                /* Bound: f16 operands (inputs rounded to 11 bits for f32 x, exact
                 * for f16 x) and f32 accumulation: 2e-3 of sum |w x|, plus the
                 * residual's own f32 rounding. */
                size_t at = 0;
                double wv = worst(yg, yr, sc, (size_t)m * n, 1e-5, 2e-3, &at);
                CHECK(wv <= 1.0, "gemm m=%u n=%u k=%u x=%s bias=%d res=%d split=%s: worst %.3g at %zu "
                      "(gpu %g ref %g)", m, n, k, xt ? "f16" : "f32", use_bias, use_res,
                      sp ? "3" : "auto", wv, at,
                      (double)yg[at], (double)yr[at]);
                free(bias), free(res), free(yg), free(yr), free(sc);
                gemm_operands_free(&o);
                vkr_arena_destroy(ar);
            }
}

/* AUTO's split-K choice (op_matmul_split_for, which gemm() itself asks)
 * at the 7B shapes, as measured on the H200 (op_matmul.c "split K"): a
 * label pass's q/o and down products (56 tiles) split, the prefill's q/o
 * and down and the wide label gate/up do not; FOLIO_GEMM_SPLIT=1 and a
 * missing scratch turn it off. Needs a device that reports its
 * multiprocessor count (lavapipe: never splits). */
void test_gemm_split_rule(struct T *t)
{
    /* the f16 GEMM's K-fixed forms are optional (AUTO falls back to K from
     * the push constants where they did not build); the K-from-push ones
     * are not, nor the int8 GEMM's K-fixed forms: a model pre-warms those
     * only (ops_gemm_i8_keys), so they are its path */
    struct vkr_pipeline_key kf = ops_key("gemm_cm2", 9, 1, 0), ki = ops_key("gemm_i8_cm2", 10, 1, 0);
    kf.spec[8] = 3584;
    CHECK(ops_key_optional(&kf) && !ops_key_optional(&ki), "K-fixed f16 GEMM keys are optional");
    ki.spec[8] = 18944;
    kf.spec[8] = 0;
    CHECK(!ops_key_optional(&ki) && !ops_key_optional(&kf),
          "K from the push constants is not, nor an int8 K-fixed form");
    /* AUTO's K-fixed rule at the 7B shapes (BENCHMARKS.md, issue 29), and
     * that pre-warm's question (the tallest pass, a K's widest product)
     * covers every product the rule takes */
    static const uint32_t R[][4] = {{1400, 18944, 3584, 1}, {1400, 3584, 3584, 0}, {1400, 3584, 18944, 0},
                                    {5476, 3840, 1280, 1},  {5476, 1280, 1280, 1}, {5476, 3420, 1280, 1},
                                    {5476, 1280, 3420, 0},  {1369, 3584, 5120, 0}, {48, 18944, 3584, 0},
                                    {11584, 3584, 3584, 0}};
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        CHECK(ops_gemm_k_fixed_rule(R[i][0], R[i][1], R[i][2]) == (int)R[i][3],
              "K-fixed rule at m=%u n=%u k=%u: want %u", R[i][0], R[i][1], R[i][2], R[i][3]);
        for (uint32_t n2 = R[i][1]; n2 <= 4 * R[i][1]; n2 += R[i][1])
            CHECK(!ops_gemm_k_fixed_rule(R[i][0], R[i][1], R[i][2]) ||
                      ops_gemm_k_fixed_rule(UINT32_MAX, n2, R[i][2]),
                  "pre-warm's question misses m=%u n=%u k=%u (asked with n=%u)", R[i][0], R[i][1],
                  R[i][2], n2);
    }
    uint32_t cu = vkr_limits(t->vk)->compute_units;
    if (!ops_gemm_available(t->vk) || cu <= 56) {
        fprintf(stderr, "ops: no GEMM or multiprocessor count on this device; split rule cases not run\n");
        if (cu == 0)
            CHECK(op_matmul_split_for(t->vk, 48, 3584, 18944, 64u << 20) == 1, "split without a count");
        return;
    }
    uint64_t sb = op_matmul_split_bytes(t->vk);
    CHECK(sb >= 48ull * 3584 * 4 * 8, "split scratch planned: %llu bytes", (unsigned long long)sb);
    uint32_t ld = op_matmul_split_for(t->vk, 48, 3584, 18944, sb);
    uint32_t lq = op_matmul_split_for(t->vk, 48, 3584, 3584, sb);
    CHECK(ld >= 3 && ld <= 8, "label down: %u slices", ld);
    CHECK(lq >= 2 && lq <= 7, "label q/o: %u slices", lq);
    if (cu < 296)
        CHECK(op_matmul_split_for(t->vk, 48, 18944, 3584, sb) == 1,
              "label gate/up splits with 296 tiles on %u multiprocessors", cu);
    CHECK(op_matmul_split_for(t->vk, 1400, 3584, 3584, sb) == 1, "prefill q/o splits");
    if (cu < 308)
        CHECK(op_matmul_split_for(t->vk, 1400, 3584, 18944, sb) == 1, "prefill down splits");
    CHECK(op_matmul_split_for(t->vk, 48, 3584, 18944, 0) == 1, "split without scratch");
    const char *old = getenv("FOLIO_GEMM_SPLIT");
    char keep[32] = "";
    if (old)
        snprintf(keep, sizeof keep, "%s", old);
    setenv("FOLIO_GEMM_SPLIT", "1", 1);
    CHECK(op_matmul_split_for(t->vk, 48, 3584, 18944, sb) == 1, "FOLIO_GEMM_SPLIT=1 still splits");
    CHECK(op_matmul_split_bytes(t->vk) == 0, "FOLIO_GEMM_SPLIT=1 still plans scratch");
    if (old)
        setenv("FOLIO_GEMM_SPLIT", keep, 1);
    else
        unsetenv("FOLIO_GEMM_SPLIT");
}

/* Every GEMM configuration of every route the device has (the benchmark's
 * list, cm2 / khr / nv), and the route AUTO takes, against the C reference
 * at an odd tile-unaligned shape and at the Qwen2.5-VL-7B shapes (k up to
 * 18,944; a few dozen rows keep the double-precision reference quick).
 * Bounds, relative to sum |w x|: f32 accumulation 2e-3 (f16 operands);
 * f16 accumulation promoted into f32 every acc16 columns of K (cm2
 * "f16acc" configurations) GEMM_F16ACC_REL: the worst measured on the H200
 * at these shapes was 1.0e-4 of sum |w x| (promotion every 256, k = 1540),
 * the bound is ten times that. */
#define GEMM_F16ACC_REL 1e-3
void test_gemm_configs(struct T *t)
{
    if (!ops_gemm_available(t->vk)) {
        fprintf(stderr, "ops: tensor-core GEMM not on this device; GEMM configuration cases not run\n");
        return;
    }
    /* {260, 1280, 1280} and {256, 3584, 3584} are wide enough (m >= 256,
     * n >= 1024) for AUTO to take the K-specialized cm2 kernel pre-warmed for
     * their K (run_all). The last (4th column 1) runs only where the
     * workgroup-scope kernel exists: whole 128-row tiles at K = 18,944 for
     * its K-fixed row's unclamped interior path (72 rows are all edge tiles),
     * a CPU reference too long for the lavapipe suite. */
    static const uint32_t shapes[][4] = {{130, 300, 1540},  {72, 3584, 18944}, {72, 18944, 3584},
                                         {70, 512, 3584},   {96, 1280, 3420},  {260, 1280, 1280},
                                         {256, 3584, 3584}, {136, 3584, 18944, 1}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        if (shapes[si][3] && !vkr_features(t->vk)->coopmat2_nv)
            continue;
        size_t nk = (size_t)n * k, mk = (size_t)m * k, mn = (size_t)m * n;
        if (nk * 2 > vkr_limits(t->vk)->block_size || mn * 4 > vkr_limits(t->vk)->block_size)
            continue;
        struct vkr_arena *ar = gemm_arena(t);
        if (!ar)
            return;
        struct gemm_operands o;
        gemm_operands(t, m, n, k, &o);
        const float *wd = o.wd, *xd = o.xd;
        float *yr = malloc(sizeof(float) * mn), *yg = malloc(sizeof(float) * mn);
        float *sc = malloc(sizeof(float) * mn);
        for (uint32_t i = 0; i < m; i++)
            for (uint32_t j = 0; j < n; j++) {
                double s = 0, a = 0;
                const float *wr = &wd[(size_t)j * k], *xr = &xd[(size_t)i * k];
                for (uint32_t q = 0; q < k; q++) {
                    double v = (double)wr[q] * xr[q];
                    s += v;
                    a += fabs(v);
                }
                yr[(size_t)i * n + j] = (float)s;
                sc[(size_t)i * n + j] = (float)a;
            }
        struct vkr_tensor wt = put(t, ar, o.wh, nk * 2), xt = put(t, ar, o.xh, mk * 2);
        struct vkr_tensor yt = put(t, ar, NULL, mn * 4);
        for (int cf = -1; cf < ops_gemm_configs(); cf++) {
            int acc16 = 0, probe = 0, k_mult = 2;
            ops_gemm_config_info(cf, &acc16, &probe, &k_mult);
            if (cf >= 0 && (probe || (k_mult > 0 ? k % (uint32_t)k_mult != 0 : k != (uint32_t)-k_mult) ||
                            !ops_gemm_config_fits(t->vk, cf)))
                continue;
            struct op_matmul a = {.w = wt, .wtype = QUANT_F16, .n = n, .k = k, .m = m,
                                  .kernel = OP_MM_GEMM, .xtype = QUANT_F16, .x = xt, .y = yt,
                                  .gemm_config = cf + 1};
            RUN(t, op_matmul(c, &a, e));
            get(t, yt, yg, sizeof(float) * mn);
            char name[64];
            ops_gemm_config_name(cf, name, sizeof name);
            size_t at = 0;
            double rel = acc16 ? GEMM_F16ACC_REL : 2e-3;
            double wv = worst(yg, yr, sc, mn, 1e-5, rel, &at);
            fprintf(stderr, "ops: gemm %s m=%u n=%u k=%u: worst %.3g of the bound (%.3g of sum |w x|)\n",
                    cf < 0 ? ops_gemm_route_name(t->vk) : name, m, n, k, wv, wv * rel);
            CHECK(wv <= 1.0, "gemm %s m=%u n=%u k=%u: worst %.3g at %zu (gpu %g ref %g)", name, m, n, k,
                  wv, at, (double)yg[at], (double)yr[at]);
        }
        free(yr), free(yg), free(sc);
        gemm_operands_free(&o);
        vkr_arena_destroy(ar);
    }
}

/* The tile order (gemm_tiles.glsl, op_matmul.gemm_group): every band
 * height computes every tile once, whether the bands divide the row tiles
 * (G = 3 of 9), leave a shorter last band (G = 2 of 3, 4 of 9), span them
 * all (G past the row tiles) or take them as dispatched (0, 1); with split
 * K (whose partial pass keeps the order) and on the workgroup-scope kernel
 * where the device has it. y starts as NaN, so a tile no workgroup
 * computes fails. */
void test_gemm_order(struct T *t)
{
    if (!ops_gemm_available(t->vk)) {
        fprintf(stderr, "ops: tensor-core GEMM not on this device; GEMM order cases not run\n");
        return;
    }
    int cm2 = -1; /* the first workgroup-scope configuration this device builds */
    for (int cf = 0; cf < ops_gemm_configs() && cm2 < 0; cf++) {
        char name[64];
        int acc16 = 0, probe = 0, k_mult = 2;
        ops_gemm_config_name(cf, name, sizeof name);
        ops_gemm_config_info(cf, &acc16, &probe, &k_mult);
        if (!strncmp(name, "cm2:", 4) && !acc16 && !probe && k_mult > 0 && 96 % k_mult == 0 &&
            ops_gemm_config_fits(t->vk, cf))
            cm2 = cf;
    }
    static const uint32_t shapes[][3] = {{300, 700, 96}, {1100, 300, 96}};
    static const int groups[] = {0, 1, 2, 3, 4, 64};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        size_t mn = (size_t)m * n;
        struct vkr_arena *ar = gemm_arena(t);
        if (!ar)
            return;
        struct gemm_operands o;
        gemm_operands(t, m, n, k, &o);
        float *yr = malloc(sizeof(float) * mn), *yg = malloc(sizeof(float) * mn);
        float *sc = malloc(sizeof(float) * mn), *nan = malloc(sizeof(float) * mn);
        ops_ref_matmul(o.wd, o.xd, NULL, yr, m, n, k);
        abs_products(o.wd, o.xd, sc, m, n, k);
        for (size_t i = 0; i < mn; i++)
            nan[i] = NAN;
        struct vkr_tensor wt = put(t, ar, o.wh, (uint64_t)n * k * 2);
        struct vkr_tensor xt = put(t, ar, o.xh, (uint64_t)m * k * 2);
        struct vkr_tensor yt = put(t, ar, NULL, mn * 4), skt = put(t, ar, NULL, mn * 4 * 3);
        for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
            for (int run = 0; run < 3; run++) { /* AUTO, AUTO split in 3, cm2 */
                if (run == 2 && cm2 < 0)
                    continue;
                struct op_matmul a = {.w = wt, .wtype = QUANT_F16, .n = n, .k = k, .m = m,
                                      .kernel = OP_MM_GEMM, .xtype = QUANT_F16, .x = xt, .y = yt,
                                      .split = &skt, .split_k = run == 1 ? 3 : 1,
                                      .gemm_config = run == 2 ? cm2 + 1 : 0,
                                      .gemm_group = groups[gi] + 1};
                struct folio_err e0 = {0};
                int rc = vkr_upload(t->vk, yt, 0, nan, mn * 4, &e0);
                CHECK(rc == 0, "gemm order: y upload: %s", e0.msg);
                RUN(t, op_matmul(c, &a, e));
                get(t, yt, yg, mn * 4);
                size_t at = 0;
                double wv = worst(yg, yr, sc, mn, 1e-5, 2e-3, &at);
                CHECK(wv <= 1.0, "gemm order m=%u n=%u k=%u group=%d %s: worst %.3g at row %zu col %zu "
                      "(gpu %g ref %g)", m, n, k, groups[gi],
                      run == 0 ? "auto" : run == 1 ? "split 3" : "cm2", wv, at / n, at % n,
                      (double)yg[at], (double)yr[at]);
            }
        free(yr), free(yg), free(sc), free(nan);
        gemm_operands_free(&o);
        vkr_arena_destroy(ar);
    }
}
