/*
 * The op test body, shared by test_ops.c (device limits as they are) and
 * test_ops_ranged.c (FOLIO_VK_MAX_ALLOC / FOLIO_VK_MAX_RANGE lowered so
 * that weights span several blocks and exceed the binding range). Every op
 * runs on random inputs across shape classes and dtypes and is compared
 * with its C reference (engine/ops/ops_ref.c); the bounds are stated next
 * to each comparison. All pipelines are pre-warmed and the registry sealed
 * first: the run must finish with zero requests after seal and zero
 * validation messages.
 */
#include "tests/support/testutil.h"
#include "common/common.h"
#include "common/rng.h"
#include "engine/quant/quant.h"
#include "engine/ops/ops.h"
#include "engine/ops/ops_internal.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct T {
    struct vkr *vk;
    struct vkr_arena *w, *act;
    struct folio_rng rng;
    int ranged;
};

static float frand(struct T *t)
{
    return folio_rng_signed(&t->rng);
}

static void fill(struct T *t, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = frand(t) * scale;
}

/* Places bytes in an arena and uploads them. Aborts the test on failure:
 * nothing later can run without its inputs. */
static struct vkr_tensor put(struct T *t, struct vkr_arena *a, const void *data, uint64_t bytes)
{
    struct folio_err e = {0};
    struct vkr_tensor x;
    if (vkr_arena_alloc(a, bytes, &x, &e) != 0 || (data && vkr_upload(t->vk, x, 0, data, bytes, &e) != 0)) {
        fprintf(stderr, "FAIL: placing %llu bytes: %s / %s\n", (unsigned long long)bytes, e.msg, e.detail);
        exit(1);
    }
    return x;
}

static void get(struct T *t, struct vkr_tensor x, void *out, uint64_t bytes)
{
    struct folio_err e = {0};
    if (vkr_download(t->vk, x, 0, out, bytes, &e) != 0) {
        fprintf(stderr, "FAIL: download: %s\n", e.msg);
        exit(1);
    }
}

#define RUN(t, body)                                                                         \
    do {                                                                                     \
        struct folio_err e_ = {0};                                                           \
        struct vkr_cmd *c_ = NULL;                                                           \
        int rc_ = vkr_cmd_begin((t)->vk, &c_, &e_);                                          \
        if (!rc_) {                                                                          \
            struct vkr_cmd *c = c_;                                                          \
            struct folio_err *e = &e_;                                                       \
            rc_ = (body);                                                                    \
            if (rc_)                                                                         \
                vkr_cmd_abort(c_);                                                           \
            else                                                                             \
                rc_ = vkr_cmd_submit(c_, &e_);                                               \
        }                                                                                    \
        CHECK(rc_ == 0, "%s: %s (%s)", #body, e_.msg, e_.detail);                           \
    } while (0)

/* max over i of |g - r| / (tol_abs + tol_rel * scale_i) must be <= 1 */
static double worst(const float *g, const float *r, const float *scale, size_t n, double tabs,
                    double trel, size_t *at)
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

static void test_matmul(struct T *t)
{
    static const int types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0,
                                QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    /* (m, n, k): tiny, odd, non-multiple-of-tile, and decode shapes */
    static const uint32_t shapes[][3] = {{1, 1, 256}, {1, 37, 512}, {3, 70, 256}, {8, 33, 768},
                                         {9, 65, 256}, {70, 130, 512}, {64, 64, 256},
                                         {130, 300, 1536}, /* "large", q4_K/q6_K/f16 only */
                                         /* float rows not a multiple of 4 (a resized
                                          * vocabulary's LM head is n; an odd MLP width k) */
                                         {3, 101, 37}, {70, 67, 70}, {9, 45, 1}};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int ty = types[ti];
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
            /* The large shape would be thousands of 16 KiB-range dispatches
             * in ranged mode; the other shapes already span many ranges. */
            if (si == 7 && (t->ranged || (ty != QUANT_Q4_K && ty != QUANT_Q6_K && ty != QUANT_F16)))
                continue;
            if (k % (uint32_t)quant_block_elems(ty))
                continue; /* odd rows: float types only */
            for (int kern = 0; kern < 3; kern++) {
                enum op_mm_kernel kk = kern == 0 ? OP_MM_AUTO : kern == 1 ? OP_MM_TILED : OP_MM_COOPMAT;
                if (kk == OP_MM_COOPMAT && (!ops_coopmat_available(t->vk) || k % 4))
                    continue;
                if (kk != OP_MM_AUTO && m <= 8 && si != 0)
                    continue; /* forced tiled/coopmat on tiny m once is enough */
                uint64_t rb = quant_row_bytes(ty, k);
                float *wf = malloc(sizeof(float) * n * k), *wd = malloc(sizeof(float) * n * k);
                float *x = malloc(sizeof(float) * m * k), *bias = malloc(sizeof(float) * n);
                float *yg = malloc(sizeof(float) * m * n), *yr = malloc(sizeof(float) * m * n);
                float *sc = malloc(sizeof(float) * m * n);
                uint8_t *wq = malloc(rb * n);
                fill(t, wf, (size_t)n * k, 1.0f);
                fill(t, x, (size_t)m * k, 1.0f);
                fill(t, bias, n, 1.0f);
                for (uint32_t r = 0; r < n; r++) {
                    quant_quantize_row(ty, wf + (size_t)r * k, wq + rb * r, k);
                    quant_dequantize_row(ty, wq + rb * r, wd + (size_t)r * k, k);
                }
                int use_bias = (si % 2) == 1;
                ops_ref_matmul(wd, x, use_bias ? bias : NULL, yr, m, n, k);
                for (uint32_t i = 0; i < m; i++)
                    for (uint32_t j = 0; j < n; j++) {
                        double s = 0;
                        for (uint32_t e = 0; e < k; e++)
                            s += fabs((double)wd[(size_t)j * k + e] * x[(size_t)i * k + e]);
                        sc[(size_t)i * n + j] = (float)s;
                    }
                vkr_arena_reset(t->act);
                struct op_matmul a = {.w = put(t, t->w, wq, rb * n), .wtype = ty, .n = n, .k = k,
                                      .x = put(t, t->act, x, sizeof(float) * m * k), .m = m,
                                      .kernel = kk};
                struct vkr_tensor bt = put(t, t->act, bias, sizeof(float) * n);
                a.y = put(t, t->act, NULL, sizeof(float) * m * n);
                a.bias = use_bias ? &bt : NULL;
                RUN(t, op_matmul(c, &a, e));
                get(t, a.y, yg, sizeof(float) * m * n);
                /* Bound: |gpu - ref| <= 1e-6 + 5e-5 * sum_k |w_k x_k| (f32 vs double
                 * accumulation over k <= 768; f16 operands for the coopmat kernel
                 * round x to 11 bits: 2e-3 there). */
                size_t at = 0;
                enum op_mm_kernel eff = kk == OP_MM_AUTO ? op_matmul_pick(t->vk, ty, m) : kk;
                double tol = eff == OP_MM_COOPMAT || eff == OP_MM_GEMM ? 2e-3 : 5e-5;
                double wv = worst(yg, yr, sc, (size_t)m * n, 1e-6, tol, &at);
                CHECK(wv <= 1.0, "matmul %s m=%u n=%u k=%u kernel=%d: worst %.3g at %zu (gpu %g ref %g)",
                      quant_type_name(ty), m, n, k, (int)kk, wv, at, (double)yg[at], (double)yr[at]);
                free(wf), free(wd), free(x), free(bias), free(yg), free(yr), free(sc), free(wq);
            }
        }
    }
}


/* Weight expansion (--gpu-weights f16): every type dequantized on the
 * device must equal the C dequantization rounded to f16 (exactly: both
 * round the same float to nearest-even), and an expanded weight must give
 * the same matmul as the native one within the f16 bound. Runs on every
 * device (the expansion kernel needs no tensor cores). */
static void test_expand_f16(struct T *t)
{
    static const int types[] = {QUANT_F32, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K,
                                QUANT_Q6_K};
    const uint32_t n = 37, k = 512;
    struct folio_err e = {0};
    struct vkr_arena *stage = NULL;
    if (vkr_arena_create(t->vk, "stage", VKR_ARENA_WEIGHTS, &stage, &e) != 0) {
        CHECK(0, "staging arena: %s", e.msg);
        return;
    }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int ty = types[ti];
        uint64_t rb = quant_row_bytes(ty, k);
        float *wf = malloc(sizeof(float) * n * k), *wd = malloc(sizeof(float) * n * k);
        uint8_t *wq = malloc(rb * n), *h = malloc((size_t)n * k * 2), *hg = malloc((size_t)n * k * 2);
        fill(t, wf, (size_t)n * k, 1.0f);
        for (uint32_t r = 0; r < n; r++) {
            quant_quantize_row(ty, wf + (size_t)r * k, wq + rb * r, k);
            quant_dequantize_row(ty, wq + rb * r, wd + (size_t)r * k, k);
        }
        quant_quantize_row(QUANT_F16, wd, h, (int64_t)n * k);
        struct vkr_tensor wt;
        int wt_type = -1;
        int rc = ops_upload_weight(t->vk, t->w, stage, wq, ty, n, k, 2, &wt, &wt_type, &e);
        CHECK(rc == 0, "expand %s: %s", quant_type_name(ty), e.msg);
        if (rc == 0) {
            CHECK(wt_type == QUANT_F16, "expand %s: type %d after expansion", quant_type_name(ty),
                  wt_type);
            get(t, wt, hg, (uint64_t)n * k * 2);
            size_t bad = 0;
            for (size_t i = 0; i < (size_t)n * k * 2; i += 2)
                bad += memcmp(h + i, hg + i, 2) != 0;
            CHECK(bad == 0, "expand %s: %zu of %u elements differ from the C dequantization",
                  quant_type_name(ty), bad, n * k);
        }
        free(wf), free(wd), free(wq), free(h), free(hg);
    }
    /* auto keeps f32 matrices as they are (the user chose precision) */
    struct vkr_tensor wt;
    int wt_type = -1;
    float row[256] = {0};
    CHECK(ops_upload_weight(t->vk, t->w, stage, row, QUANT_F32, 1, 256, 1, &wt, &wt_type, &e) == 0 &&
          wt_type == QUANT_F32, "auto must keep an f32 matrix f32 (type %d)", wt_type);
    char why[200];
    CHECK(ops_weights_f16(t->vk, OPS_WEIGHTS_NATIVE, 1, why, sizeof why) == 0, "native: %s", why);
    CHECK(ops_weights_f16(t->vk, OPS_WEIGHTS_F16, 1, why, sizeof why) == 2, "f16: %s", why);
    CHECK(ops_weights_f16(t->vk, OPS_WEIGHTS_AUTO, UINT64_MAX / 2, why, sizeof why) == 0,
          "auto must refuse weights larger than the device: %s", why);
    /* f16 inputs are a GEMM-only feature: other kernels refuse them clearly */
    vkr_arena_reset(t->act);
    struct op_matmul a = {.w = put(t, t->act, NULL, 64 * 64 * 2), .wtype = QUANT_F16, .n = 64,
                          .k = 64, .x = put(t, t->act, NULL, 64 * 64 * 2), .m = 64,
                          .y = put(t, t->act, NULL, 64 * 64 * 4), .kernel = OP_MM_TILED,
                          .xtype = QUANT_F16};
    struct vkr_cmd *c = NULL;
    if (vkr_cmd_begin(t->vk, &c, &e) != 0) {
        CHECK(0, "%s", e.msg);
        vkr_arena_destroy(stage);
        return;
    }
    int rc = op_matmul(c, &a, &e);
    CHECK(rc == FOLIO_EUNSUPPORTED && strstr(e.msg, "tensor-core GEMM"),
          "tiled matmul with f16 inputs: rc %d (%s)", rc, e.msg);
    vkr_cmd_abort(c);
    vkr_arena_destroy(stage);
}

/* The tensor-core GEMM (f16 weights; f32 or f16 inputs; bias and residual
 * epilogues; every alignment class of k and both tile shapes) against the
 * C reference. Runs where the device has it (the H200; not lavapipe). */
/* The GEMM's f16 outputs and activation epilogues (SwiGLU against an f32
 * gate, GELU, quick-GELU), on the vision tower's small shapes too: under
 * lowered binding ranges (ranged mode) these rows are dispatched in chunks
 * of 45 or 91 rows, which is where an f16 store of a chunk edge would
 * clobber its neighbour. */
static void test_gemm_epilogues(struct T *t)
{
    if (!ops_gemm_available(t->vk)) {
        fprintf(stderr, "ops: tensor-core GEMM not on this device; GEMM epilogue cases not run\n");
        return;
    }
    static const uint32_t shapes[][3] = {{160, 90, 64}, {160, 64, 90}, {45, 256, 256},
                                         {161, 130, 1176}, {300, 96, 520}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int act = 0; act < 4; act++)
            for (int yt = 0; yt < 2; yt++) {
                uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
                if ((uint64_t)m * (n > k ? n : k) * 4 > vkr_limits(t->vk)->block_size)
                    continue;
                struct vkr_arena *ar = NULL;
                struct folio_err ae = {0};
                if (vkr_arena_create(t->vk, "gemm", VKR_ARENA_WEIGHTS, &ar, &ae) != 0) {
                    CHECK(0, "gemm arena: %s", ae.msg);
                    return;
                }
                size_t nk = (size_t)n * k, mk = (size_t)m * k, mn = (size_t)m * n;
                float *wf = malloc(sizeof(float) * nk), *wd = malloc(sizeof(float) * nk);
                float *x = malloc(sizeof(float) * mk), *xd = malloc(sizeof(float) * mk);
                float *bias = malloc(sizeof(float) * n), *gate = malloc(sizeof(float) * mn);
                float *yr = malloc(sizeof(float) * mn), *yg = malloc(sizeof(float) * mn);
                float *sc = malloc(sizeof(float) * mn);
                uint8_t *wh = malloc(nk * 2), *xh = malloc(mk * 2), *yh = malloc(mn * 2);
                fill(t, wf, nk, 1.0f);
                fill(t, x, mk, 1.0f);
                fill(t, bias, n, 1.0f);
                fill(t, gate, mn, 3.0f);
                quant_quantize_row(QUANT_F16, wf, wh, (int64_t)nk);
                quant_dequantize_row(QUANT_F16, wh, wd, (int64_t)nk);
                quant_quantize_row(QUANT_F16, x, xh, (int64_t)mk);
                quant_dequantize_row(QUANT_F16, xh, xd, (int64_t)mk);
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
                struct op_matmul a = {.w = put(t, ar, wh, nk * 2), .wtype = QUANT_F16, .n = n,
                                      .k = k, .m = m, .kernel = OP_MM_GEMM, .xtype = QUANT_F16,
                                      .ytype = yt ? QUANT_F16 : QUANT_F32, .bias = &bt,
                                      .act = (enum op_mm_act)act,
                                      .gate = act == OP_MM_ACT_SWIGLU ? &gt : NULL};
                a.x = put(t, ar, xh, mk * 2);
                a.y = put(t, ar, NULL, mn * (yt ? 2 : 4));
                RUN(t, op_matmul(c, &a, e));
                if (yt) {
                    get(t, a.y, yh, mn * 2);
                    quant_dequantize_row(QUANT_F16, yh, yg, (int64_t)mn);
                } else {
                    get(t, a.y, yg, sizeof(float) * mn);
                }
                size_t at = 0;
                double wv = worst(yg, yr, sc, mn, 1e-5, 2e-3, &at);
                CHECK(wv <= 1.0, "gemm epilogue m=%u n=%u k=%u act=%d y=%s: worst %.3g at %zu "
                      "(row %zu col %zu: gpu %g ref %g)", m, n, k, act, yt ? "f16" : "f32", wv,
                      at, at / n, at % n, (double)yg[at], (double)yr[at]);
                free(wf), free(wd), free(x), free(xd), free(bias), free(gate), free(yr), free(yg);
                free(sc), free(wh), free(xh), free(yh);
                vkr_arena_destroy(ar);
            }
}

static void test_gemm(struct T *t)
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
            for (int epi = 0; epi < 3; epi++) {
                uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
                if (xt == 0 && k % 4)
                    continue;
                if (si == 5 && epi != 2)
                    continue; /* the big one once, with everything on */
                if ((uint64_t)m * (n > k ? n : k) * 4 > vkr_limits(t->vk)->block_size)
                    continue; /* lowered block size (ranged mode): tensors must fit one */
                struct vkr_arena *ar = NULL;
                struct folio_err ae = {0};
                if (vkr_arena_create(t->vk, "gemm", VKR_ARENA_WEIGHTS, &ar, &ae) != 0) {
                    CHECK(0, "gemm arena: %s", ae.msg);
                    return;
                }
                float *wf = malloc(sizeof(float) * n * k), *wd = malloc(sizeof(float) * n * k);
                float *x = malloc(sizeof(float) * m * k), *xd = malloc(sizeof(float) * m * k);
                float *bias = malloc(sizeof(float) * n), *res = malloc(sizeof(float) * m * n);
                float *yg = malloc(sizeof(float) * m * n), *yr = malloc(sizeof(float) * m * n);
                float *sc = malloc(sizeof(float) * m * n);
                uint8_t *wh = malloc((size_t)n * k * 2), *xh = malloc((size_t)m * k * 2);
                fill(t, wf, (size_t)n * k, 1.0f);
                fill(t, x, (size_t)m * k, 1.0f);
                fill(t, bias, n, 1.0f);
                fill(t, res, (size_t)m * n, 4.0f);
                quant_quantize_row(QUANT_F16, wf, wh, (int64_t)n * k);
                quant_dequantize_row(QUANT_F16, wh, wd, (int64_t)n * k);
                quant_quantize_row(QUANT_F16, x, xh, (int64_t)m * k);
                if (xt)
                    quant_dequantize_row(QUANT_F16, xh, xd, (int64_t)m * k);
                else
                    memcpy(xd, x, sizeof(float) * m * k);
                int use_bias = epi >= 1, use_res = epi == 2;
                ops_ref_matmul(wd, xd, use_bias ? bias : NULL, yr, m, n, k);
                for (uint32_t i = 0; i < m; i++)
                    for (uint32_t j = 0; j < n; j++) {
                        double s = 0;
                        for (uint32_t q = 0; q < k; q++)
                            s += fabs((double)wd[(size_t)j * k + q] * xd[(size_t)i * k + q]);
                        sc[(size_t)i * n + j] = (float)s;
                        if (use_res)
                            yr[(size_t)i * n + j] += res[(size_t)i * n + j];
                    }
                struct vkr_tensor rt;
                struct op_matmul a = {.w = put(t, ar, wh, (uint64_t)n * k * 2), .wtype = QUANT_F16,
                                      .n = n, .k = k, .m = m, .kernel = OP_MM_GEMM,
                                      .xtype = xt ? QUANT_F16 : QUANT_F32};
                a.x = xt ? put(t, ar, xh, (uint64_t)m * k * 2) : put(t, ar, x, sizeof(float) * m * k);
                struct vkr_tensor bt = put(t, ar, bias, sizeof(float) * n);
                /* the residual is summed in place: y starts as the residual */
                a.y = put(t, ar, use_res ? res : NULL, sizeof(float) * m * n);
                rt = a.y;
                a.bias = use_bias ? &bt : NULL;
                a.res = use_res ? &rt : NULL;
                RUN(t, op_matmul(c, &a, e));
                get(t, a.y, yg, sizeof(float) * m * n);
                /* Bound: f16 operands (inputs rounded to 11 bits for f32 x, exact
                 * for f16 x) and f32 accumulation: 2e-3 of sum |w x|, plus the
                 * residual's own f32 rounding. */
                size_t at = 0;
                double wv = worst(yg, yr, sc, (size_t)m * n, 1e-5, 2e-3, &at);
                CHECK(wv <= 1.0, "gemm m=%u n=%u k=%u x=%s bias=%d res=%d: worst %.3g at %zu "
                      "(gpu %g ref %g)", m, n, k, xt ? "f16" : "f32", use_bias, use_res, wv, at,
                      (double)yg[at], (double)yr[at]);
                free(wf), free(wd), free(x), free(xd), free(bias), free(res), free(yg), free(yr);
                free(sc), free(wh), free(xh);
                vkr_arena_destroy(ar);
            }
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
static void test_gemm_configs(struct T *t)
{
    if (!ops_gemm_available(t->vk)) {
        fprintf(stderr, "ops: tensor-core GEMM not on this device; GEMM configuration cases not run\n");
        return;
    }
    static const uint32_t shapes[][3] = {{130, 300, 1540}, {72, 3584, 18944}, {72, 18944, 3584},
                                         {70, 512, 3584}, {96, 1280, 3420}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        size_t nk = (size_t)n * k, mk = (size_t)m * k, mn = (size_t)m * n;
        if (nk * 2 > vkr_limits(t->vk)->block_size || mn * 4 > vkr_limits(t->vk)->block_size)
            continue;
        struct vkr_arena *ar = NULL;
        struct folio_err ae = {0};
        if (vkr_arena_create(t->vk, "gemm", VKR_ARENA_WEIGHTS, &ar, &ae) != 0) {
            CHECK(0, "gemm arena: %s", ae.msg);
            return;
        }
        float *wd = malloc(sizeof(float) * nk), *xd = malloc(sizeof(float) * mk);
        float *yr = malloc(sizeof(float) * mn), *yg = malloc(sizeof(float) * mn);
        float *sc = malloc(sizeof(float) * mn);
        uint8_t *wh = malloc(nk * 2), *xh = malloc(mk * 2);
        fill(t, wd, nk, 1.0f);
        fill(t, xd, mk, 1.0f);
        quant_quantize_row(QUANT_F16, wd, wh, (int64_t)nk);
        quant_dequantize_row(QUANT_F16, wh, wd, (int64_t)nk);
        quant_quantize_row(QUANT_F16, xd, xh, (int64_t)mk);
        quant_dequantize_row(QUANT_F16, xh, xd, (int64_t)mk);
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
        struct vkr_tensor wt = put(t, ar, wh, nk * 2), xt = put(t, ar, xh, mk * 2);
        struct vkr_tensor yt = put(t, ar, NULL, mn * 4);
        for (int cf = -1; cf < ops_gemm_configs(); cf++) {
            int acc16 = 0, probe = 0, k_mult = 2;
            ops_gemm_config_info(cf, &acc16, &probe, &k_mult);
            if (cf >= 0 && (probe || k % (uint32_t)k_mult || !ops_gemm_config_fits(t->vk, cf)))
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
        free(wd), free(xd), free(yr), free(yg), free(sc), free(wh), free(xh);
        vkr_arena_destroy(ar);
    }
}

static void test_norm_softmax(struct T *t)
{
    /* out16: the f16 output the tensor-core GEMM reads (even widths) */
    static const uint32_t ns[] = {1, 37, 1280, 2, 38, 1280};
    for (size_t i = 0; i < 6; i++)
        for (int layer = 0; layer < 2; layer++)
            for (int wb = 0; wb < 2; wb++) {
                uint32_t rows = 5, n = ns[i];
                int out16 = i >= 3;
                float *x = malloc(sizeof(float) * rows * n), *g = malloc(sizeof(float) * rows * n);
                float *r = malloc(sizeof(float) * rows * n), *w = malloc(sizeof(float) * n);
                float *b = malloc(sizeof(float) * n);
                fill(t, x, (size_t)rows * n, 3.0f);
                for (uint32_t j = 0; j < rows * n; j++)
                    x[j] += 2.0f; /* a mean to remove for LayerNorm */
                fill(t, w, n, 1.0f);
                fill(t, b, n, 1.0f);
                vkr_arena_reset(t->act);
                struct vkr_tensor xt = put(t, t->act, x, sizeof(float) * rows * n);
                struct vkr_tensor yt = put(t, t->act, NULL, sizeof(float) * rows * n);
                struct vkr_tensor wt = put(t, t->act, w, sizeof(float) * n);
                struct vkr_tensor bt = put(t, t->act, b, sizeof(float) * n);
                RUN(t, op_norm_to(c, layer, xt, yt, out16 ? QUANT_F16 : QUANT_F32, wb ? &wt : NULL,
                                  wb && layer ? &bt : NULL, rows, n, 1e-6f, e));
                if (out16) {
                    uint16_t *h = malloc(2u * rows * n);
                    get(t, yt, h, 2u * rows * n);
                    quant_dequantize_row(QUANT_F16, h, g, (int64_t)rows * n);
                    free(h);
                } else {
                    get(t, yt, g, sizeof(float) * rows * n);
                }
                ops_ref_norm(layer, x, r, wb ? w : NULL, wb && layer ? b : NULL, rows, n, 1e-6f);
                size_t at = 0;
                /* Bound: 2e-5 absolute + 2e-5 relative; f16 output: its rounding,
                 * 2^-11 relative (5e-4 with margin). */
                double wv = worst(g, r, NULL, (size_t)rows * n, 2e-5, out16 ? 5e-4 : 2e-5, &at);
                CHECK(wv <= 1.0, "%s n=%u w=%d f16=%d: worst %.3g at %zu (gpu %g ref %g)",
                      layer ? "layernorm" : "rmsnorm", n, wb, out16, wv, at, (double)g[at],
                      (double)r[at]);
                free(x), free(g), free(r), free(w), free(b);
            }
    static const uint32_t sn[] = {1, 33, 1000};
    for (size_t i = 0; i < 3; i++) {
        uint32_t rows = 4, n = sn[i];
        float *x = malloc(sizeof(float) * rows * n), *g = malloc(sizeof(float) * rows * n);
        float *r = malloc(sizeof(float) * rows * n);
        fill(t, x, (size_t)rows * n, 8.0f);
        vkr_arena_reset(t->act);
        struct vkr_tensor xt = put(t, t->act, x, sizeof(float) * rows * n);
        struct vkr_tensor yt = put(t, t->act, NULL, sizeof(float) * rows * n);
        RUN(t, op_softmax(c, xt, yt, rows, n, 0.7f, e));
        get(t, yt, g, sizeof(float) * rows * n);
        ops_ref_softmax(x, r, rows, n, 0.7f);
        size_t at = 0;
        /* Bound: 1e-7 absolute + 1e-5 relative (probabilities). */
        double wv = worst(g, r, NULL, (size_t)rows * n, 1e-7, 1e-5, &at);
        CHECK(wv <= 1.0, "softmax n=%u: worst %.3g at %zu", n, wv, at);
        free(x), free(g), free(r);
    }
}

static void test_rope(struct T *t)
{
    struct op_rope cases[] = {
        {.t = 7, .h = 3, .d = 64, .mode = OP_ROPE_NEOX, .base = 1e6f},
        {.t = 9, .h = 4, .d = 128, .mode = OP_ROPE_MROPE, .base = 1e6f, .sections = {16, 24, 24}},
        {.t = 12, .h = 2, .d = 80, .mode = OP_ROPE_VISION, .base = 1e4f},
        {.t = 1, .h = 1, .d = 4, .mode = OP_ROPE_VISION, .base = 1e4f},
        /* Qwen3-VL-8B's layout, and a tiny one whose last pairs fall back to t */
        {.t = 9, .h = 4, .d = 128, .mode = OP_ROPE_IMROPE, .base = 5e6f, .sections = {24, 20, 20}},
        {.t = 5, .h = 2, .d = 24, .mode = OP_ROPE_IMROPE, .base = 5e6f, .sections = {6, 3, 3}},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct op_rope a = cases[ci];
        uint32_t streams = a.mode == OP_ROPE_NEOX ? 1 : a.mode == OP_ROPE_VISION ? 2 : 3;
        size_t nx = (size_t)a.t * a.h * a.d;
        float *x = malloc(sizeof(float) * nx), *g = malloc(sizeof(float) * nx), *r = malloc(sizeof(float) * nx);
        int32_t *pos = malloc(sizeof(int32_t) * a.t * streams);
        fill(t, x, nx, 1.0f);
        for (uint32_t i = 0; i < a.t * streams; i++)
            pos[i] = (int32_t)((frand(t) + 1.0f) * (a.mode == OP_ROPE_VISION ? 50.0f : 1000.0f));
        vkr_arena_reset(t->act);
        a.x = put(t, t->act, x, sizeof(float) * nx);
        a.y = put(t, t->act, NULL, sizeof(float) * nx);
        a.pos = put(t, t->act, pos, sizeof(int32_t) * a.t * streams);
        RUN(t, op_rope(c, &a, e));
        get(t, a.y, g, sizeof(float) * nx);
        ops_ref_rope(&a, x, pos, r);
        size_t at = 0;
        /* Bound: 1e-3 absolute: angles up to 2000 rad carry f32 rounding of
         * ~1e-4 rad, and GPU sin/cos/pow are not correctly rounded. */
        double wv = worst(g, r, NULL, nx, 1e-3, 0.0, &at);
        CHECK(wv <= 1.0, "rope mode %d: worst %.3g at %zu (gpu %g ref %g)", (int)a.mode, wv, at,
              (double)g[at], (double)r[at]);
        free(x), free(g), free(r), free(pos);
    }
}

/* Runs one attention shape through every kernel the device has for its
 * head size (scalar everywhere; the tensor-core kernel where available, so
 * on an NVIDIA GPU both run) and both element types, against the C
 * reference. f holds every input; q, k and v start at element offsets qo,
 * ko and vo (slices of one tensor, as from a fused QKV matmul) and use the
 * strides in a. Bounds:
 *  - scalar f32: 2e-5 absolute + 1e-4 relative (outputs are convex
 *    combinations of v in [-1, 1]; online vs two-pass softmax);
 *  - scalar f16: the reference runs on the f16-rounded inputs; 1e-3
 *    relative for the f16 output (2^-11);
 *  - tensor cores: against ops_ref_attention_f16mm (the same f16 rounding
 *    of Q * scale * log2 e, K, V and P): 1.5e-3 absolute + 1e-3 relative,
 *    because the kernel rounds P after a running rather than the final row
 *    max (each weight within 2^-11 relative of the reference's, so the
 *    output within 2 * 2^-11 * max|v|) and may write f16. A wrong mask,
 *    rescale or tile edge moves outputs by ~1/(visible keys) >= 5e-3. */
static void attn_all(struct T *t, struct op_attention a, const float *f, size_t nf, size_t qo,
                     size_t ko, size_t vo, const uint32_t *rg, const char *what)
{
    size_t no = (size_t)a.tq * a.hq * a.d;
    float *fr = malloc(sizeof(float) * nf), *g = malloc(sizeof(float) * no);
    float *r = malloc(sizeof(float) * no);
    uint16_t *h = malloc(sizeof(uint16_t) * (nf > no ? nf : no));
    for (int kern = OP_ATTN_SCALAR; kern <= OP_ATTN_COOPMAT; kern++) {
        if (kern == OP_ATTN_COOPMAT && op_attention_pick(t->vk, a.d) != OP_ATTN_COOPMAT)
            continue;
        for (int f16 = 0; f16 < 2; f16++) {
            /* lavapipe compiles each specialisation with LLVM on first use
             * (minutes under ASan on a cold Mesa cache), so the scalar f16
             * variant runs for the text head size only; the tensor-core
             * kernel runs every case in both types. */
            if (f16 && kern == OP_ATTN_SCALAR && a.d != 128)
                continue;
            uint64_t es = f16 ? 2 : 4;
            for (size_t i = 0; i < nf; i++) {
                h[i] = quant_f32_to_f16(f[i]);
                fr[i] = f16 ? quant_f16_to_f32(h[i]) : f[i];
            }
            vkr_arena_reset(t->act);
            struct vkr_tensor ft = put(t, t->act, f16 ? (const void *)h : (const void *)f, nf * es);
            a.q = (struct vkr_tensor){.block = ft.block, .offset = ft.offset + qo * es,
                                      .size = ft.size - qo * es};
            a.k = (struct vkr_tensor){.block = ft.block, .offset = ft.offset + ko * es,
                                      .size = ft.size - ko * es};
            a.v = (struct vkr_tensor){.block = ft.block, .offset = ft.offset + vo * es,
                                      .size = ft.size - vo * es};
            a.o = put(t, t->act, NULL, no * es);
            struct vkr_tensor rt = put(t, t->act, rg ? (const void *)rg : (const void *)f, rg ? 8ull * a.tq : 4);
            a.ranges = rg ? &rt : NULL;
            a.f16 = f16;
            a.kernel = (enum op_attn_kernel)kern;
            RUN(t, op_attention(c, &a, e));
            if (f16) {
                get(t, a.o, h, no * 2);
                for (size_t i = 0; i < no; i++)
                    g[i] = quant_f16_to_f32(h[i]);
            } else {
                get(t, a.o, g, no * 4);
            }
            if (kern == OP_ATTN_COOPMAT)
                ops_ref_attention_f16mm(&a, fr + qo, fr + ko, fr + vo, rg, r);
            else
                ops_ref_attention(&a, fr + qo, fr + ko, fr + vo, rg, r);
            size_t at = 0;
            double tabs = kern == OP_ATTN_COOPMAT ? 1.5e-3 : 2e-5;
            double trel = kern == OP_ATTN_COOPMAT || f16 ? 1e-3 : 1e-4;
            double wv = worst(g, r, NULL, no, tabs, trel, &at);
            CHECK(wv <= 1.0, "attention %s (tq %u tk %u heads %u/%u d %u causal %d) %s %s: worst "
                  "%.3g at %zu (gpu %g ref %g)", what, a.tq, a.tk, a.hq, a.hkv, a.d, a.causal,
                  kern == OP_ATTN_COOPMAT ? "coopmat" : "scalar", f16 ? "f16" : "f32", wv, at,
                  (double)g[at], (double)r[at]);
        }
    }
    free(fr), free(g), free(r), free(h);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

enum { R_NONE, R_WIN, R_WIN64, R_LABEL };

static void test_attention(struct T *t)
{
    struct {
        uint32_t tq, tk, hq, hkv, d;
        int causal, ranges;
        const char *what;
    } cases[] = {
        {37, 37, 2, 2, 64, 0, R_NONE, "plain, odd length"},
        {45, 45, 4, 2, 128, 1, R_NONE, "causal + GQA, text head"},
        {3, 40, 4, 1, 128, 1, R_NONE, "decode against a KV cache"},
        {50, 50, 2, 2, 80, 0, R_WIN, "block-diagonal windows, vision head"},
        {20, 20, 1, 1, 16, 1, R_WIN, "causal within windows, an empty row"},
        {200, 200, 2, 1, 128, 1, R_NONE, "many key tiles, GQA 2:1"},
        {150, 150, 2, 2, 80, 0, R_WIN64, "64-patch windows, a partial one, 3 query blocks"},
        {70, 70, 3, 3, 16, 0, R_NONE, "head 16"},
        {33, 33, 2, 2, 72, 1, R_NONE, "head 72 (no tensor-core kernel)"},
        {21, 21, 2, 1, 256, 1, R_NONE, "head 256 (scalar only)"},
        {65, 130, 2, 2, 64, 1, R_NONE, "causal with a KV offset, 2 query blocks"},
        {1, 1, 1, 1, 64, 0, R_NONE, "one token"},
        {12, 99, 4, 2, 128, 0, R_LABEL, "label scoring: 3 labels x 4 tokens after a 29-key prefix"},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct op_attention a = {.tq = cases[ci].tq, .tk = cases[ci].tk, .hq = cases[ci].hq,
                                 .hkv = cases[ci].hkv, .d = cases[ci].d, .causal = cases[ci].causal};
        a.scale = 1.0f / sqrtf((float)a.d);
        size_t nq = (size_t)a.tq * a.hq * a.d, nk = (size_t)a.tk * a.hkv * a.d;
        if (t->ranged && (nq * 4 > vkr_limits(t->vk)->max_range || nk * 4 > vkr_limits(t->vk)->max_range))
            continue; /* attention binds q/k/v whole by design */
        size_t ko = align64(nq), vo = ko + align64(nk), nf = vo + nk;
        float *f = calloc(nf, sizeof(float));
        uint32_t *rg = malloc(sizeof(uint32_t) * 2 * a.tq);
        fill(t, f, nq, 2.0f);
        fill(t, f + ko, nk, 2.0f);
        fill(t, f + vo, nk, 1.0f);
        for (uint32_t i = 0; i < a.tq; i++) {
            uint32_t lo = 0, hi = a.tk;
            if (cases[ci].ranges == R_WIN) { /* [0,16) [16,40) [40,..) */
                lo = i < 16 ? 0 : i < 40 ? 16 : 40;
                hi = i < 16 ? 16 : i < 40 ? 40 : a.tk;
            } else if (cases[ci].ranges == R_WIN64) {
                lo = i / 64 * 64;
                hi = lo + 64;
            } else if (cases[ci].ranges == R_LABEL) {
                /* K/V: per label the 29 prefix keys then its 4 tokens;
                 * a label token sees the prefix and its label's earlier
                 * tokens, never another label's. */
                uint32_t lab = i / 4, tok = i % 4, blk = 29 + 4;
                lo = lab * blk;
                hi = lo + 29 + tok + 1;
            }
            rg[2 * i] = lo;
            rg[2 * i + 1] = hi < a.tk ? hi : a.tk;
        }
        if (cases[ci].ranges == R_WIN && a.tq > 5)
            rg[2 * 5] = rg[2 * 5 + 1] = 3; /* a query that sees nothing -> zeros */
        attn_all(t, a, f, nf, 0, ko, vo, cases[ci].ranges != R_NONE ? rg : NULL, cases[ci].what);
        free(f), free(rg);
    }
}

/* op_attention_ranged: the same cases plus strided (fused QKV) operands and
 * a head size outside the fused kernel's own test list, through the split
 * path. In ranged mode (16 KiB bindings) every case but the smallest
 * exceeds one binding, so queries and keys are cut into chunks whose
 * partial outputs are merged by log-sum-exp; the result must meet the
 * fused kernel's bound against the same reference. */
static void test_attention_split(struct T *t)
{
    struct {
        uint32_t tq, tk, hq, hkv, d;
        int causal, windows, fused;
    } cases[] = {
        {37, 37, 2, 2, 64, 0, 0, 0},    {45, 45, 4, 2, 128, 1, 0, 0}, {3, 90, 4, 1, 128, 1, 0, 0},
        {50, 50, 2, 2, 80, 0, 1, 0},    {20, 20, 1, 1, 32, 1, 1, 0},  {200, 200, 2, 1, 128, 1, 0, 0},
        {70, 70, 4, 2, 64, 1, 0, 1},    {130, 130, 2, 2, 64, 0, 1, 0},
    };
    int split = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct op_attention a = {.tq = cases[ci].tq, .tk = cases[ci].tk, .hq = cases[ci].hq,
                                 .hkv = cases[ci].hkv, .d = cases[ci].d, .causal = cases[ci].causal};
        a.scale = 1.0f / sqrtf((float)a.d);
        uint32_t w = cases[ci].fused ? (a.hq + 2 * a.hkv) * a.d : 0;
        size_t nq = (size_t)a.tq * a.hq * a.d, nk = (size_t)a.tk * a.hkv * a.d;
        size_t nf = cases[ci].fused ? (size_t)a.tq * w : nq + 2 * nk;
        float *f = malloc(sizeof(float) * nf), *g = malloc(sizeof(float) * nq);
        float *r = malloc(sizeof(float) * nq);
        uint32_t *rg = malloc(sizeof(uint32_t) * 2 * a.tq);
        fill(t, f, nf, 2.0f);
        for (uint32_t i = 0; i < a.tq; i++) { /* windows of 16, 24, then the rest */
            uint32_t lo = i < 16 ? 0 : i < 40 ? 16 : 40, hi = i < 16 ? 16 : i < 40 ? 40 : a.tk;
            rg[2 * i] = lo;
            rg[2 * i + 1] = hi < a.tk ? hi : a.tk;
        }
        if (cases[ci].windows && a.tq > 5)
            rg[2 * 5] = rg[2 * 5 + 1] = 3;
        vkr_arena_reset(t->act);
        struct vkr_tensor ft = put(t, t->act, f, sizeof(float) * nf);
        uint64_t ko = cases[ci].fused ? (uint64_t)a.hq * a.d * 4 : nq * 4;
        uint64_t vo = cases[ci].fused ? ko + (uint64_t)a.hkv * a.d * 4 : (nq + nk) * 4;
        a.q = ft;
        a.k = (struct vkr_tensor){.block = ft.block, .offset = ft.offset + ko, .size = ft.size - ko};
        a.v = (struct vkr_tensor){.block = ft.block, .offset = ft.offset + vo, .size = ft.size - vo};
        if (cases[ci].fused)
            a.q_stride = a.k_stride = a.v_stride = w;
        a.o = put(t, t->act, NULL, sizeof(float) * nq);
        struct vkr_tensor rt = put(t, t->act, rg, sizeof(uint32_t) * 2 * a.tq);
        a.ranges = cases[ci].windows ? &rt : NULL;
        uint64_t sb[4];
        op_attention_scratch_bytes(t->vk, a.tq, a.hq, a.d, sb);
        struct op_attention_scratch sc = {put(t, t->act, NULL, sb[0]), put(t, t->act, NULL, sb[1]),
                                          put(t, t->act, NULL, sb[2]), put(t, t->act, NULL, sb[3])};
        split += nf * 4 > vkr_limits(t->vk)->max_range;
        /* the split machinery is under test here, the kernels in attn_all:
         * the f32 kernel whose bound this is (chunks always run it) */
        a.kernel = OP_ATTN_SCALAR;
        RUN(t, op_attention_ranged(c, &a, &sc, e));
        get(t, a.o, g, sizeof(float) * nq);
        ops_ref_attention(&a, f, f + ko / 4, f + vo / 4, cases[ci].windows ? rg : NULL, r);
        size_t at = 0;
        double wv = worst(g, r, NULL, nq, 2e-5, 1e-4, &at); /* the fused kernel's bound */
        CHECK(wv <= 1.0, "split attention case %zu: worst %.3g at %zu (gpu %g ref %g)", ci, wv,
              at, (double)g[at], (double)r[at]);
        free(f), free(g), free(r), free(rg);
    }
    if (t->ranged)
        CHECK(split >= 6, "only %d split-attention cases exceeded the binding range", split);
}

/* q, k and v as slices of one fused QKV output (row strides). */
static void test_attention_fused(struct T *t)
{
    struct op_attention a = {.tq = 30, .tk = 30, .hq = 4, .hkv = 2, .d = 64, .causal = 1};
    a.scale = 0.125f;
    uint32_t w = (a.hq + 2 * a.hkv) * a.d;
    size_t nf = (size_t)a.tq * w;
    if (t->ranged && nf * 4 > vkr_limits(t->vk)->max_range)
        return; /* attention binds q/k/v whole by design */
    float *f = malloc(sizeof(float) * nf);
    fill(t, f, nf, 2.0f);
    a.q_stride = a.k_stride = a.v_stride = w;
    size_t ko = (size_t)a.hq * a.d, vo = ko + (size_t)a.hkv * a.d;
    attn_all(t, a, f, nf, 0, ko, vo, NULL, "fused QKV strides");
    free(f);
}

static void attn_refused(struct T *t, const struct op_attention *a, int want, const char *says)
{
    struct folio_err e = {0};
    struct vkr_cmd *c = NULL;
    int rc = vkr_cmd_begin(t->vk, &c, &e);
    CHECK(rc == 0, "cmd_begin: %s", e.msg);
    if (rc)
        return;
    rc = op_attention(c, a, &e);
    vkr_cmd_abort(c);
    CHECK(rc == want && strstr(e.msg, says), "bad attention (d %u heads %u/%u): rc %d, \"%s\" "
          "(wanted %d, \"%s\")", a->d, a->hq, a->hkv, rc, e.msg, want, says);
}

/* Shapes the kernels cannot run are refused with a message naming them. */
static void test_attention_errors(struct T *t)
{
    vkr_arena_reset(t->act);
    struct vkr_tensor x = put(t, t->act, NULL, 1u << 16);
    struct {
        struct op_attention a;
        int rc;
        const char *says;
    } bad[] = {
        {{.tq = 4, .tk = 4, .hq = 1, .hkv = 1, .d = 65}, FOLIO_EUNSUPPORTED, "head size 65"},
        {{.tq = 4, .tk = 4, .hq = 1, .hkv = 1, .d = 258}, FOLIO_EUNSUPPORTED, "head size 258"},
        {{.tq = 4, .tk = 4, .hq = 3, .hkv = 2, .d = 64}, FOLIO_EINVAL, "not a multiple of 2 KV"},
        {{.tq = 4, .tk = 4, .hq = 1, .hkv = 1, .d = 72, .kernel = OP_ATTN_COOPMAT},
         FOLIO_EUNSUPPORTED, "cooperative-matrix kernel is not available for head size 72"},
        {{.tq = 4, .tk = 4, .hq = 2, .hkv = 2, .d = 64, .q_stride = 129}, FOLIO_EINVAL,
         "must be even"},
        {{.tq = 4, .tk = 4, .hq = 2, .hkv = 2, .d = 64, .k_stride = 100}, FOLIO_EINVAL,
         "shorter than its heads"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct op_attention a = bad[i].a;
        a.q = a.k = a.v = a.o = x;
        a.scale = 1.0f;
        attn_refused(t, &a, bad[i].rc, bad[i].says);
    }
    struct op_attention a = {.tq = 4, .tk = 4, .hq = 1, .hkv = 1, .d = 64, .scale = 1.0f};
    a.q = a.k = a.v = a.o = x;
    a.k.offset += 4, a.k.size -= 4;
    attn_refused(t, &a, FOLIO_EINVAL, "8-byte aligned");
    if (t->ranged) { /* past one binding: the split path is f32 only */
        struct op_attention big = {.tq = 200, .tk = 200, .hq = 2, .hkv = 1, .d = 64, .f16 = 1,
                                   .scale = 1.0f};
        big.q = big.k = big.v = big.o = x;
        struct folio_err e = {0};
        struct vkr_cmd *c = NULL;
        int rc = vkr_cmd_begin(t->vk, &c, &e);
        if (!rc) {
            rc = op_attention_ranged(c, &big, NULL, &e);
            vkr_cmd_abort(c);
        }
        CHECK(rc == FOLIO_EUNSUPPORTED && strstr(e.msg, "f16 tensors past one binding"),
              "f16 split: rc %d \"%s\"", rc, e.msg);
    }
    struct vkr_pipeline_key k[2];
    CHECK(ops_attention_keys(t->vk, 65, 0, k) == 0, "odd head sizes have no kernel");
    int n = ops_attention_keys(t->vk, 80, 1, k);
    CHECK(n >= 1 && strcmp(k[0].shader, "attention") == 0 && k[0].spec[0] == 80 &&
          k[0].spec[2] == 1, "head 80 f16 keys: %d, %s", n, n ? k[0].shader : "-");
    CHECK((n == 2) == (op_attention_pick(t->vk, 80) == OP_ATTN_COOPMAT),
          "the tensor-core key is declared exactly where AUTO picks it");
}

static void test_elem(struct T *t)
{
    const uint64_t n = 1000;
    for (int op = OP_ADD; op <= OP_SCALE; op++)
        for (int bc = 0; bc < 2; bc++) {
            int binary = op == OP_ADD || op == OP_MUL || op == OP_SWIGLU;
            if (bc && (op != OP_ADD && op != OP_MUL))
                continue;
            uint64_t nb = bc ? 100 : n;
            float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
            float *g = malloc(sizeof(float) * n), *r = malloc(sizeof(float) * n);
            fill(t, a, n, 6.0f);
            fill(t, b, n, 2.0f);
            vkr_arena_reset(t->act);
            struct vkr_tensor at_ = put(t, t->act, a, sizeof(float) * n);
            struct vkr_tensor bt = put(t, t->act, b, sizeof(float) * nb);
            struct vkr_tensor yt = put(t, t->act, NULL, sizeof(float) * n);
            RUN(t, op_elem(c, (enum op_elem_kind)op, at_, binary ? &bt : NULL, yt, n, nb, 1.5f, -0.25f, e));
            get(t, yt, g, sizeof(float) * n);
            ops_ref_elem((enum op_elem_kind)op, a, b, r, n, binary ? nb : 1, 1.5f, -0.25f);
            size_t at = 0;
            /* Bound: 1e-6 absolute + 1e-5 relative (erf approximation 1.5e-7). */
            double wv = worst(g, r, NULL, n, 1e-6, 1e-5, &at);
            CHECK(wv <= 1.0, "elem op %d bcast %d: worst %.3g at %zu (gpu %g ref %g)", op, bc, wv, at,
                  (double)g[at], (double)r[at]);
            free(a), free(b), free(g), free(r);
        }
    /* F32 <-> F16, odd length */
    const uint64_t m = 1001;
    float *a = malloc(sizeof(float) * m), *back = malloc(sizeof(float) * m);
    uint16_t *h = calloc(m + 1, sizeof(uint16_t));
    fill(t, a, m, 1000.0f);
    a[0] = 1e-6f, a[1] = 70000.0f, a[2] = -0.0f;
    vkr_arena_reset(t->act);
    struct vkr_tensor at_ = put(t, t->act, a, sizeof(float) * m);
    struct vkr_tensor ht = put(t, t->act, NULL, (m + 1) * 2);
    struct vkr_tensor bt = put(t, t->act, NULL, sizeof(float) * m);
    RUN(t, op_convert(c, 1, at_, ht, m, e) || op_convert(c, 0, ht, bt, m, e));
    get(t, ht, h, (m + 1) * 2);
    get(t, bt, back, sizeof(float) * m);
    int bad = 0;
    for (uint64_t i = 0; i < m; i++) {
        /* Bound: within one f16 ulp of quant_f32_to_f16 (packHalf2x16's
         * rounding mode is implementation-defined); the way back exact. */
        int d = (int)h[i] - (int)quant_f32_to_f16(a[i]);
        if (d < -1 || d > 1 || back[i] != quant_f16_to_f32(h[i]))
            bad++;
    }
    CHECK(bad == 0, "convert f32<->f16: %d of %d wrong", bad, (int)m);
    free(a), free(back), free(h);
}

static void test_rows(struct T *t)
{
    static const int types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0,
                                QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    const uint32_t rows = 150, nid = 23;
    for (size_t ti = 0; ti < 10; ti++) {
        /* then the float types again with rows of 37 (not a multiple of 4) */
        int ty = types[ti < 7 ? ti : ti - 7];
        const uint32_t k = ti < 7 ? 256 : 37;
        uint64_t rb = quant_row_bytes(ty, k);
        float *wf = malloc(sizeof(float) * rows * k), *wd = malloc(sizeof(float) * rows * k);
        uint8_t *wq = malloc(rb * rows);
        float *g = malloc(sizeof(float) * nid * k);
        int32_t ids[23];
        fill(t, wf, (size_t)rows * k, 1.0f);
        for (uint32_t r = 0; r < rows; r++) {
            quant_quantize_row(ty, wf + (size_t)r * k, wq + rb * r, k);
            quant_dequantize_row(ty, wq + rb * r, wd + (size_t)r * k, k);
        }
        for (uint32_t i = 0; i < nid; i++)
            ids[i] = (int32_t)((frand(t) + 1.0f) * 0.5f * (rows - 1));
        ids[0] = 0, ids[1] = (int32_t)rows - 1, ids[2] = ids[3];
        vkr_arena_reset(t->act);
        struct vkr_tensor tab = put(t, t->w, wq, rb * rows);
        struct vkr_tensor it = put(t, t->act, ids, sizeof ids);
        struct vkr_tensor yt = put(t, t->act, NULL, sizeof(float) * nid * k);
        RUN(t, op_gather(c, tab, ty, rows, k, it, nid, yt, e));
        get(t, yt, g, sizeof(float) * nid * k);
        int bad = 0;
        /* Bound: 1e-6 relative (same bytes, same formula; only the order of
         * the scale products may differ from the C dequantiser). */
        for (uint32_t i = 0; i < nid; i++)
            for (uint32_t j = 0; j < k; j++) {
                float r = wd[(size_t)ids[i] * k + j], x = g[(size_t)i * k + j];
                if (!(fabsf(x - r) <= 1e-6f * fabsf(r) + 1e-7f))
                    bad++;
            }
        CHECK(bad == 0, "gather %s: %d of %u values wrong", quant_type_name(ty), bad, nid * k);
        free(wf), free(wd), free(wq), free(g);
    }
    /* scatter: 5 rows into a sequence of 12, one index out of range
     * (skipped); then 70 rows of 256 into 90 (70 KiB of destination: many
     * ranges with 16 KiB bindings) */
    static const uint32_t sc_shapes[][3] = {{48, 5, 12}, {256, 70, 90}};
    for (int si = 0; si < 2; si++) {
        const uint32_t width = sc_shapes[si][0], n = sc_shapes[si][1], dst_rows = sc_shapes[si][2];
        float *src = malloc(sizeof(float) * n * width), *dst = malloc(sizeof(float) * dst_rows * width);
        float *ref = malloc(sizeof(float) * dst_rows * width), *got = malloc(sizeof(float) * dst_rows * width);
        int32_t *idx = malloc(sizeof(int32_t) * n);
        for (uint32_t i = 0; i < n; i++)
            idx[i] = (int32_t)((i * 37 + 3) % (dst_rows + 4)); /* a few out of range */
        if (si == 0)
            memcpy(idx, (int32_t[5]){3, 4, 5, 11, 40}, sizeof(int32_t) * 5);
        fill(t, src, (size_t)n * width, 1.0f);
        fill(t, dst, (size_t)dst_rows * width, 1.0f);
        memcpy(ref, dst, sizeof(float) * dst_rows * width);
        ops_ref_scatter(src, idx, n, width, ref, dst_rows);
        vkr_arena_reset(t->act);
        struct vkr_tensor st = put(t, t->act, src, sizeof(float) * n * width);
        struct vkr_tensor xt = put(t, t->act, idx, sizeof(int32_t) * n);
        struct vkr_tensor dt = put(t, t->act, dst, sizeof(float) * dst_rows * width);
        RUN(t, op_scatter(c, st, xt, n, width, dt, dst_rows, e));
        get(t, dt, got, sizeof(float) * dst_rows * width);
        CHECK(memcmp(got, ref, sizeof(float) * dst_rows * width) == 0,
              "scatter %ux%u into %u differs from the reference", n, width, dst_rows);
        free(src), free(dst), free(ref), free(got), free(idx);
    }
    /* concat2x2 over a 4 x 6 grid of width 5, then 12 x 10 of width 64
     * (30 KiB: bands of grid rows with 16 KiB bindings) */
    static const uint32_t cc_shapes[][3] = {{4, 6, 5}, {12, 10, 64}};
    for (int si = 0; si < 2; si++) {
        const uint32_t gh = cc_shapes[si][0], gw = cc_shapes[si][1], w = cc_shapes[si][2];
        size_t nc = (size_t)gh * gw * w;
        float *cx = malloc(sizeof(float) * nc), *cy = malloc(sizeof(float) * nc);
        float *cr = malloc(sizeof(float) * nc);
        fill(t, cx, nc, 1.0f);
        ops_ref_concat2x2(cx, cr, gh, gw, w);
        vkr_arena_reset(t->act);
        struct vkr_tensor cxt = put(t, t->act, cx, sizeof(float) * nc);
        struct vkr_tensor cyt = put(t, t->act, NULL, sizeof(float) * nc);
        RUN(t, op_concat2x2(c, cxt, cyt, gh, gw, w, e));
        get(t, cyt, cy, sizeof(float) * nc);
        CHECK(memcmp(cy, cr, sizeof(float) * nc) == 0, "concat2x2 %ux%ux%u differs from the "
              "reference", gh, gw, w);
        free(cx), free(cy), free(cr);
    }
}

/* Ranged mode only: the same matmuls and gather on a second runtime with
 * the device's own limits must give bit-identical results (ranges change
 * which dispatch computes a row, never how). */
static void test_identical(struct T *t)
{
    const char *ma = getenv("FOLIO_VK_MAX_ALLOC"), *mr = getenv("FOLIO_VK_MAX_RANGE");
    char sa[32], sr[32];
    snprintf(sa, sizeof sa, "%s", ma ? ma : "");
    snprintf(sr, sizeof sr, "%s", mr ? mr : "");
    unsetenv("FOLIO_VK_MAX_ALLOC");
    unsetenv("FOLIO_VK_MAX_RANGE");
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config cfg = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                             .validate = -1, .cache_dir = ""};
    struct folio_err oe = {0};
    struct T u = {.rng = {1}, .ranged = 0};
    int rc = vkr_open(&cfg, &u.vk, &oe);
    setenv("FOLIO_VK_MAX_ALLOC", sa, 1);
    setenv("FOLIO_VK_MAX_RANGE", sr, 1);
    CHECK(rc == 0, "second runtime: %s", oe.msg);
    if (rc)
        return;
    if (vkr_arena_create(u.vk, "w", VKR_ARENA_WEIGHTS, &u.w, &oe) != 0 ||
        vkr_arena_create(u.vk, "a", VKR_ARENA_WEIGHTS, &u.act, &oe) != 0) {
        CHECK(0, "arenas: %s", oe.msg);
        vkr_close(u.vk);
        return;
    }
    const uint32_t m = 40, n = 150, k = 512; /* q6_K rows of 420 bytes: unaligned starts */
    int ty = QUANT_Q6_K;
    uint64_t rb = quant_row_bytes(ty, k);
    float *wf = malloc(sizeof(float) * n * k), *x = malloc(sizeof(float) * m * k);
    uint8_t *wq = malloc(rb * n);
    float *y1 = malloc(sizeof(float) * m * n), *y2 = malloc(sizeof(float) * m * n);
    fill(t, wf, (size_t)n * k, 1.0f);
    fill(t, x, (size_t)m * k, 1.0f);
    for (uint32_t r = 0; r < n; r++)
        quant_quantize_row(ty, wf + (size_t)r * k, wq + rb * r, k);
    for (int kern = 0; kern < 2; kern++) {
        struct T *both[2] = {t, &u};
        float *outs[2] = {y1, y2};
        for (int i = 0; i < 2; i++) {
            struct T *tt = both[i];
            vkr_arena_reset(tt->act);
            struct op_matmul a = {.w = put(tt, tt->w, wq, rb * n), .wtype = ty, .n = n, .k = k,
                                  .x = put(tt, tt->act, x, sizeof(float) * m * k),
                                  .m = kern == 0 ? 8 : m,
                                  .kernel = kern == 0 ? OP_MM_MATVEC : OP_MM_TILED};
            a.y = put(tt, tt->act, NULL, sizeof(float) * m * n);
            RUN(tt, op_matmul(c, &a, e));
            get(tt, a.y, outs[i], sizeof(float) * a.m * n);
        }
        uint32_t rows = kern == 0 ? 8 : m;
        CHECK(memcmp(y1, y2, sizeof(float) * rows * n) == 0,
              "kernel %d: ranged and unranged results differ", kern);
    }
    struct vkr_stats s;
    vkr_get_stats(u.vk, &s);
    CHECK(s.validation_messages == 0, "validation messages on the second runtime");
    free(wf), free(x), free(wq), free(y1), free(y2);
    vkr_arena_destroy(u.act);
    vkr_arena_destroy(u.w);
    vkr_close(u.vk);
}

/* Opens the test device, pre-warms everything, seals, runs all ops. */
static int run_all(int ranged)
{
    struct T t = {.rng = {0x9E3779B97F4A7C15ull}, .ranged = ranged};
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config cfg = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                             .validate = -1, .cache_dir = ""};
    struct folio_err e = {0};
    int rc = vkr_open(&cfg, &t.vk, &e);
    REQUIRE(rc == 0, "vkr_open: %s / %s / %s", e.msg, e.detail, e.hint);
    int failed = -1;
    rc = ops_prewarm(t.vk, &failed, &e);
    REQUIRE(rc == 0 && failed == 0, "prewarm: rc %d failed %d: %s", rc, failed, e.msg);
    {
        /* every GEMM configuration (test_gemm_configs), as bench ops --only gemm does */
        struct vkr_pipeline_key gk[512];
        int ng = ops_gemm_keys_all(t.vk, 1, gk);
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

    static void (*const tests[])(struct T *) = {test_matmul, test_expand_f16, test_gemm, test_gemm_epilogues,
                                                test_gemm_configs,
                                                 test_norm_softmax, test_rope, test_attention,
                                                 test_attention_fused, test_attention_errors,
                                                 test_attention_split, test_elem, test_rows};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
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
