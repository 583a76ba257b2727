/*
 * The int8 route (--gpu-weights int8): rows quantized on the device
 * (quant_rows.comp) against the C quantizer, weights of every type made
 * int8 rows at load, and the int8 GEMM (gemm_i8_cm2.comp, where the device
 * has int8 workgroup matrices; lavapipe has none and reports those cases
 * skipped) against a C reference built from the same quantized operands,
 * with each epilogue, at odd, tile-unaligned and the 7B shapes. The
 * matrix-vector and tiled kernels on int8 rows are matmul.c's. See
 * ops_test.h for the harness.
 */
#include "tests/engine/ops/ops_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows of different magnitudes (a factor of 1/16 .. 16 per row, drawn from
 * the stream), so that a scale applied to the wrong row cannot pass. */
static void fill_rows(struct T *t, float *x, uint32_t rows, uint32_t k)
{
    for (uint32_t r = 0; r < rows; r++) {
        float s = exp2f(4.0f * frand(t));
        fill(t, x + (size_t)r * k, k, s);
    }
}

/* GPU int8 rows g against the C quantizer's c (rows of k): scales equal to
 * 1e-6, bytes equal but for values the two round to neighbouring steps (at
 * most one step, at most 1 in 100 bytes): ties that the GPU's 127 / max
 * places the other way, and block types the GPU decodes with another
 * float order (q6_K on the H100: 58 of 10,752). */
static void cmp_rows(const char *what, const uint8_t *g, const uint8_t *c, uint32_t rows, uint32_t k)
{
    uint64_t rb = quant_row_bytes(QUANT_I8R, k), steps = 0;
    int far = 0, scale_bad = 0;
    for (uint32_t r = 0; r < rows; r++) {
        float sg, sc;
        memcpy(&sg, g + r * rb, 4);
        memcpy(&sc, c + r * rb, 4);
        scale_bad |= !(fabsf(sg - sc) <= 1e-6f * fabsf(sc));
        for (uint32_t i = 4; i < QUANT_I8R_HEADER; i++)
            scale_bad |= g[r * rb + i] != 0;
        for (uint32_t i = 0; i < k; i++) {
            int d = (int8_t)g[r * rb + QUANT_I8R_HEADER + i] - (int8_t)c[r * rb + QUANT_I8R_HEADER + i];
            steps += d != 0;
            far |= d > 1 || d < -1;
        }
    }
    CHECK(!scale_bad, "%s: a row's scale or header differs from the C quantizer", what);
    CHECK(!far && steps * 100 <= (uint64_t)rows * k, "%s: %llu of %u bytes differ from the C "
          "quantizer (%s)", what, (unsigned long long)steps, rows * k,
          far ? "some by more than one step" : "by one step");
}

/* Activations: f32 and f16 rows, a zero row among them. */
static void quant_activations(struct T *t)
{
    static const uint32_t shapes[][2] = {{1, 16}, {5, 48}, {37, 3584}, {3, 18944}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int f16 = 0; f16 < 2; f16++) {
            uint32_t rows = shapes[si][0], k = shapes[si][1];
            if ((uint64_t)k * 4 > vkr_limits(t->vk)->max_range)
                continue; /* ranged mode: one row must fit a binding */
            size_t n = (size_t)rows * k;
            uint64_t rb = quant_row_bytes(QUANT_I8R, k);
            float *x = malloc(n * sizeof(float)), *xd = malloc(n * sizeof(float));
            uint8_t *xh = malloc(n * 2), *cq = malloc(rb * rows), *g = malloc(rb * rows);
            fill_rows(t, x, rows, k);
            if (rows > 1)
                memset(x + k, 0, k * sizeof(float)); /* max 0: scale 0, bytes 0 */
            quant_quantize_row(QUANT_F16, x, xh, (int64_t)n);
            quant_dequantize_row(QUANT_F16, xh, xd, (int64_t)n);
            const float *src = f16 ? xd : x;
            for (uint32_t r = 0; r < rows; r++)
                quant_quantize_row(QUANT_I8R, src + (size_t)r * k, cq + rb * r, k);
            vkr_arena_reset(t->act);
            struct vkr_tensor xt = f16 ? put(t, t->act, xh, n * 2) : put(t, t->act, x, n * 4);
            struct vkr_tensor yt = put(t, t->act, NULL, rb * rows);
            RUN(t, op_quant_rows(c, xt, f16 ? QUANT_F16 : QUANT_F32, rows, k, yt, e));
            get(t, yt, g, rb * rows);
            char what[64];
            snprintf(what, sizeof what, "quant_rows %s %ux%u", f16 ? "f16" : "f32", rows, k);
            cmp_rows(what, g, cq, rows, k);
            free(x), free(xd), free(xh), free(cq), free(g);
        }
}

/* Weights of every type made int8 rows at load (ops_upload_weight, form
 * int8): the device's rows against the C quantizer of the C
 * dequantization. */
static void quant_weights(struct T *t)
{
    static const int types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_K,
                                QUANT_Q5_K, QUANT_Q6_K};
    const uint32_t n = 21, k = 512;
    struct folio_err e = {0};
    struct vkr_arena *stage = NULL;
    if (vkr_arena_create(t->vk, "stage", VKR_ARENA_WEIGHTS, &stage, &e) != 0) {
        CHECK(0, "staging arena: %s", e.msg);
        return;
    }
    uint64_t rb8 = quant_row_bytes(QUANT_I8R, k);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int ty = types[ti];
        uint64_t rb = quant_row_bytes(ty, k);
        float *wf = malloc(sizeof(float) * n * k), *wd = malloc(sizeof(float) * n * k);
        uint8_t *wq = malloc(rb * n), *c = malloc(rb8 * n), *g = malloc(rb8 * n);
        fill_rows(t, wf, n, k);
        for (uint32_t r = 0; r < n; r++) {
            quant_quantize_row(ty, wf + (size_t)r * k, wq + rb * r, k);
            quant_dequantize_row(ty, wq + rb * r, wd + (size_t)r * k, k);
            quant_quantize_row(QUANT_I8R, wd + (size_t)r * k, c + rb8 * r, k);
        }
        struct vkr_tensor wt;
        int wt_type = -1;
        int rc = ops_upload_weight(t->vk, t->w, stage, wq, ty, n, k, OPS_FORM_I8, &wt, &wt_type, &e);
        CHECK(rc == 0 && wt_type == QUANT_I8R, "int8 rows from %s: rc %d type %d: %s",
              quant_type_name(ty), rc, wt_type, e.msg);
        if (rc == 0) {
            get(t, wt, g, rb8 * n);
            char what[64];
            snprintf(what, sizeof what, "int8 rows from %s", quant_type_name(ty));
            cmp_rows(what, g, c, n, k);
        }
        free(wf), free(wd), free(wq), free(c), free(g);
    }
    /* rows int8 cannot hold (k not a multiple of 16) take f16 */
    float row[40] = {0};
    struct vkr_tensor wt;
    int wt_type = -1;
    CHECK(ops_upload_weight(t->vk, t->w, stage, row, QUANT_F32, 1, 40, OPS_FORM_I8, &wt, &wt_type,
                            &e) == 0 && wt_type == QUANT_F16,
          "int8 form of a 40-column row: type %d, want f16", wt_type);
    char why[200];
    CHECK(ops_weights_form(t->vk, OPS_WEIGHTS_INT8, 1, why, sizeof why) == OPS_FORM_I8 &&
          strstr(why, "int8"), "int8: %s", why);
    /* bad input: a clear error, nothing written */
    vkr_arena_reset(t->act);
    struct vkr_tensor xt = put(t, t->act, NULL, 4 * 40), yt = put(t, t->act, NULL, 4 * 40);
    struct vkr_cmd *cmd = NULL;
    if (vkr_cmd_begin(t->vk, &cmd, &e) == 0) {
        int rc = op_quant_rows(cmd, xt, QUANT_F32, 1, 40, yt, &e);
        CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "multiple of 16"), "quant_rows of 40 columns: rc %d (%s)",
              rc, e.msg);
        vkr_cmd_abort(cmd);
    }
    vkr_arena_destroy(stage);
}

/* The int8 GEMM: y = act(sum_k Wq Xq * sw * sx + bias) (+ R). The
 * reference multiplies the C quantizer's rows of the same W and X in
 * double; bound 1e-5 + 2e-3 * sum_k |wq xq| (+ 2e-3 |y| for f16 outputs):
 * the int32 sums are exact, what is left is f32 scaling and the few ties
 * the GPU rounds the other way (one step of one element: at most
 * max|w| * sx of the sum).
 *
 * One int8 GEMM case against the C reference on the dequantized rows:
 * epi 0: f16 x, f32 y; 1: f32 x, bias, residual; 2: SwiGLU, f16 y; 3: GELU,
 * f16 x and y; sp 1: K forced into 3 slices (the partials and splitk.comp's
 * epilogue), else AUTO's split; chunked: a scratch for a third of x's rows
 * (the chunked path); tile: the configuration's name (the messages). */
static void gemm_i8_case(struct T *t, uint32_t m, uint32_t n, uint32_t k, int epi, int sp,
                         int chunked, const char *tile)
{
    uint64_t rb8 = quant_row_bytes(QUANT_I8R, k);
    if ((uint64_t)m * (n > k ? n : k) * 4 > vkr_limits(t->vk)->block_size ||
        rb8 * (n > m ? n : m) > vkr_limits(t->vk)->block_size)
        return;
    int xf16 = epi != 1, yf16 = epi >= 2;
    size_t nk = (size_t)n * k, mk = (size_t)m * k, mn = (size_t)m * n;
    float *w = malloc(nk * 4), *wd = malloc(nk * 4), *x = malloc(mk * 4), *xd = malloc(mk * 4);
    uint8_t *wq = malloc(rb8 * n), *xq = malloc(rb8 * m), *xh = malloc(mk * 2);
    float *bias = malloc(n * 4), *r = malloc(mn * 4), *yr = malloc(mn * 4), *yg = malloc(mn * 4);
    float *sc = malloc(mn * 4);
    uint8_t *yh = malloc(mn * 2);
    fill_rows(t, w, n, k);
    fill_rows(t, x, m, k);
    fill(t, bias, n, 1.0f);
    fill(t, r, mn, 3.0f);
    quant_quantize_row(QUANT_F16, x, xh, (int64_t)mk);
    if (xf16) /* the GPU quantizes the f16 X it is given */
        quant_dequantize_row(QUANT_F16, xh, x, (int64_t)mk);
    for (uint32_t j = 0; j < n; j++) {
        quant_quantize_row(QUANT_I8R, w + (size_t)j * k, wq + rb8 * j, k);
        quant_dequantize_row(QUANT_I8R, wq + rb8 * j, wd + (size_t)j * k, k);
    }
    for (uint32_t i = 0; i < m; i++) {
        quant_quantize_row(QUANT_I8R, x + (size_t)i * k, xq + rb8 * i, k);
        quant_dequantize_row(QUANT_I8R, xq + rb8 * i, xd + (size_t)i * k, k);
    }
    ops_ref_matmul(wd, xd, epi == 1 ? bias : NULL, yr, m, n, k);
    abs_products(wd, xd, sc, m, n, k);
    for (size_t i = 0; i < mn; i++) {
        double v = yr[i];
        if (epi == 1)
            v += r[i];
        else if (epi == 2)
            v *= r[i] / (1.0 + exp(-(double)r[i]));
        else if (epi == 3)
            v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752));
        /* the activations' slope (SwiGLU: |silu(g)| <= |g|; GELU <= 1.2) */
        double slope = epi == 2 ? fabs((double)r[i]) : epi == 3 ? 1.2 : 1.0;
        sc[i] = (float)(slope * sc[i] + (yf16 ? fabs(v) : 0.0));
        yr[i] = (float)v;
    }
    struct vkr_arena *ar = NULL;
    struct folio_err ae = {0};
    if (vkr_arena_create(t->vk, "gemm-i8", VKR_ARENA_WEIGHTS, &ar, &ae) != 0) {
        CHECK(0, "arena: %s", ae.msg);
        return;
    }
    struct op_matmul a = {.w = put(t, ar, wq, rb8 * n), .wtype = QUANT_I8R, .n = n, .k = k,
                          .m = m, .kernel = OP_MM_GEMM, .xtype = xf16 ? QUANT_F16 : QUANT_F32,
                          .ytype = yf16 ? QUANT_F16 : QUANT_F32};
    a.x = xf16 ? put(t, ar, xh, mk * 2) : put(t, ar, x, mk * 4);
    struct vkr_tensor bt = put(t, ar, bias, n * 4);
    struct vkr_tensor rt = put(t, ar, r, mn * 4);
    a.y = epi == 1 ? rt : put(t, ar, NULL, mn * (yf16 ? 2 : 4));
    a.bias = epi == 1 ? &bt : NULL;
    a.res = epi == 1 ? &rt : NULL;
    a.gate = epi == 2 ? &rt : NULL;
    a.act = epi == 2 ? OP_MM_ACT_SWIGLU : epi == 3 ? OP_MM_ACT_GELU_ERF : OP_MM_ACT_NONE;
    /* the scratch the quantized X goes to: a third of X's rows at a
     * time on the 1,400-row shape (the chunked path) */
    uint64_t skb = chunked ? rb8 * (m / 3) : rb8 * m + 256 + (sp ? 3 * mn * 4 : 0);
    struct vkr_tensor skt = put(t, ar, NULL, skb);
    a.split = &skt;
    a.split_k = sp ? 3 : 0;
    RUN(t, op_matmul(c, &a, e));
    get_f(t, a.y, yf16, yh, yg, mn);
    size_t at = 0;
    double wv = worst(yg, yr, sc, mn, 1e-5, 2e-3, &at);
    CHECK(wv <= 1.0, "gemm_i8 %s m=%u n=%u k=%u epi=%d split=%s: worst %.3g at %zu (gpu %g ref %g)",
          tile, m, n, k, epi, sp ? "3" : "auto", wv, at, (double)yg[at], (double)yr[at]);
    free(w), free(wd), free(x), free(xd), free(wq), free(xq), free(xh), free(bias), free(r);
    free(yr), free(yg), free(sc), free(yh);
    vkr_arena_destroy(ar);
}

static void gemm_i8(struct T *t)
{
    if (!ops_gemm_i8_available(t->vk)) {
        /* asked for anyway: a clear refusal */
        vkr_arena_reset(t->act);
        struct op_matmul a = {.w = put(t, t->act, NULL, 64 * 80), .wtype = QUANT_I8R, .n = 64,
                              .k = 64, .x = put(t, t->act, NULL, 64 * 64 * 2), .m = 64,
                              .xtype = QUANT_F16, .y = put(t, t->act, NULL, 64 * 64 * 4),
                              .kernel = OP_MM_GEMM};
        struct folio_err e = {0};
        struct vkr_cmd *c = NULL;
        if (vkr_cmd_begin(t->vk, &c, &e) == 0) {
            int rc = op_matmul(c, &a, &e);
            CHECK(rc == FOLIO_EUNSUPPORTED && strstr(e.msg, "int8"),
                  "int8 GEMM on a device without it: rc %d (%s)", rc, e.msg);
            vkr_cmd_abort(c);
        }
        fprintf(stderr, "ops: int8 GEMM not on this device; int8 GEMM cases not run\n");
        return;
    }
    /* odd and tile-unaligned shapes, then the 7B prefill's K (3584, and the
     * down projection's 18,944), one of AUTO's very wide class (n >= 8192)
     * and one it joins for its many output tiles (564 of 128x256: four
     * waves on up to 141 multiprocessors, the H100's and H200's 132), and
     * one on class 4's 160-row tile (252 tiles in two waves of 132, where
     * 128 rows make 308 in three) */
    static const uint32_t shapes[][3] = {{37, 50, 64},      {130, 300, 1536}, {129, 258, 528},
                                         {300, 1000, 96},   {1400, 512, 3584}, {64, 256, 18944},
                                         {200, 3584, 3584}, {150, 9000, 512},  {6000, 3000, 64},
                                         {1400, 3584, 64}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int vi = 0; vi < 8; vi++) {
            int epi = vi % 4, sp = vi / 4;
            if (si >= 4 && (epi != 1 || sp))
                continue; /* the large shapes once, with bias and residual */
            /* a CPU device (lavapipe 26: int8 subgroup matrices emulated by
             * LLVM: the suite's large shapes took minutes each) takes the
             * shapes up to 2^26 multiply-adds; a GPU all of them */
            if (!strcmp(vkr_device(t->vk)->type, "cpu") &&
                (uint64_t)shapes[si][0] * shapes[si][1] * shapes[si][2] > (1u << 26))
                continue;
            gemm_i8_case(t, shapes[si][0], shapes[si][1], shapes[si][2], epi, sp, si == 4, "auto");
        }
    /* every tile configuration the device runs, each forced in turn
     * (FOLIO_GEMM_I8_TILE), at an edge shape and a tile-unaligned one with
     * a K past one step: bias and residual, SwiGLU into f16, split K */
    for (int cfg = 0; cfg < ops_gemm_i8_configs(); cfg++) {
        char name[64], env[16];
        if (!ops_gemm_i8_config_fits(t->vk, cfg))
            continue;
        ops_gemm_i8_config_name(cfg, name, sizeof name);
        snprintf(env, sizeof env, "%d", cfg);
        setenv("FOLIO_GEMM_I8_TILE", env, 1);
        gemm_i8_case(t, 37, 50, 64, 1, 0, 0, name);
        gemm_i8_case(t, 130, 300, 1536, 2, 0, 0, name);
        gemm_i8_case(t, 129, 258, 528, 0, 1, 0, name);
        unsetenv("FOLIO_GEMM_I8_TILE");
    }
    /* x_in_scratch: a second product of the same x reads the int8 rows the
     * first left in the scratch (q/k/v, gate/up); with a scratch too small
     * for x in one piece the flag is ignored (the rows are quantized again) */
    for (int small = 0; small < 2; small++) {
        const uint32_t m = 70, n = 64, k = 128;
        uint64_t rb8 = quant_row_bytes(QUANT_I8R, k);
        float *w = malloc(sizeof(float) * 2 * n * k), *wd = malloc(sizeof(float) * n * k);
        float *x = malloc(sizeof(float) * m * k), *xd = malloc(sizeof(float) * m * k);
        float *yr = malloc(sizeof(float) * m * n), *yg = malloc(sizeof(float) * m * n);
        float *sc = malloc(sizeof(float) * m * n);
        uint8_t *wq = malloc(rb8 * 2 * n), *xq = malloc(rb8);
        fill_rows(t, w, 2 * n, k);
        fill_rows(t, x, m, k);
        for (uint32_t j = 0; j < 2 * n; j++)
            quant_quantize_row(QUANT_I8R, w + (size_t)j * k, wq + rb8 * j, k);
        for (uint32_t j = 0; j < n; j++)
            quant_dequantize_row(QUANT_I8R, wq + rb8 * (n + j), wd + (size_t)j * k, k);
        for (uint32_t i = 0; i < m; i++) {
            quant_quantize_row(QUANT_I8R, x + (size_t)i * k, xq, k);
            quant_dequantize_row(QUANT_I8R, xq, xd + (size_t)i * k, k);
        }
        ops_ref_matmul(wd, xd, NULL, yr, m, n, k);
        abs_products(wd, xd, sc, m, n, k);
        vkr_arena_reset(t->act);
        struct vkr_tensor wt = put(t, t->act, wq, rb8 * 2 * n), xt = put(t, t->act, x, sizeof(float) * m * k);
        struct vkr_tensor y1 = put(t, t->act, NULL, sizeof(float) * m * n);
        struct vkr_tensor y2 = put(t, t->act, NULL, sizeof(float) * m * n);
        struct vkr_tensor skt = put(t, t->act, NULL, small ? rb8 * (m / 2) : rb8 * m + 256);
        struct op_matmul a1 = {.w = vkr_view(wt, 0, rb8 * n), .wtype = QUANT_I8R, .n = n, .k = k,
                               .x = xt, .m = m, .y = y1, .kernel = OP_MM_GEMM, .split = &skt,
                               .split_k = 1};
        struct op_matmul a2 = a1;
        a2.w = vkr_view(wt, rb8 * n, rb8 * n), a2.y = y2, a2.x_in_scratch = 1;
        RUN(t, op_matmul(c, &a1, e) || op_matmul(c, &a2, e));
        get(t, y2, yg, sizeof(float) * m * n);
        size_t at = 0;
        double wv = worst(yg, yr, sc, (size_t)m * n, 1e-5, 2e-3, &at);
        CHECK(wv <= 1.0, "gemm_i8 x_in_scratch (%s scratch): worst %.3g at %zu (gpu %g ref %g)",
              small ? "chunked" : "whole", wv, at, (double)yg[at], (double)yr[at]);
        free(w), free(wd), free(x), free(xd), free(yr), free(yg), free(sc), free(wq), free(xq);
    }
    /* no scratch: a clear error */
    vkr_arena_reset(t->act);
    struct op_matmul a = {.w = put(t, t->act, NULL, 64 * 80), .wtype = QUANT_I8R, .n = 64, .k = 64,
                          .x = put(t, t->act, NULL, 64 * 64 * 2), .m = 64, .xtype = QUANT_F16,
                          .y = put(t, t->act, NULL, 64 * 64 * 4), .kernel = OP_MM_GEMM};
    struct folio_err e = {0};
    struct vkr_cmd *c = NULL;
    if (vkr_cmd_begin(t->vk, &c, &e) == 0) {
        int rc = op_matmul(c, &a, &e);
        CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "scratch"), "int8 GEMM without scratch: rc %d (%s)",
              rc, e.msg);
        vkr_cmd_abort(c);
    }
}

/* AUTO's class per product on a 132-multiprocessor device (the H100's
 * and H200's), no device needed: the cases the rule was measured at
 * (BENCHMARKS.md "Tiles sized to the waves", "A batch's int8 products") */
static void auto_classes(void)
{
    static const struct {
        uint32_t m, n, k, units;
        int tiles, want;
        const char *why;
    } c[] = {
        {1400, 3584, 3584, 132, 0, 4, "one page's o: 252 tiles of 160 rows in 2 waves, 308 of 128 in 3"},
        {1400, 3584, 18944, 132, 0, 0, "its down: long K takes class 0 (the subgroup kernel)"},
        {1400, 4608, 3584, 132, 0, 0, "its q/k/v: 3 waves either way, the smaller tile"},
        {1461, 3584, 3584, 132, 0, 0, "a 1024^2 page with 16 labels' o: 3 waves either way"},
        {1461, 4608, 3584, 132, 0, 4, "its q/k/v: 3 waves of 160 rows against 4 of 128"},
        {1461, 3584, 18944, 132, 0, 0, "its down"},
        {1400, 3584, 3584, 0, 0, 0, "no multiprocessor count: class 0"},
        {1400, 18944, 3584, 132, 0, 1, "gate/up: very wide"},
        {6256, 3584, 18944, 132, 0, 1, "16 pages of 512^2: many tiles, long K too"},
        {391, 3584, 3584, 132, 0, 3, "one 512^2 page's prompt"},
        {391, 3584, 18944, 132, 0, 3, "its down"},
        {391, 18944, 3584, 132, 0, 2, "its gate/up"},
        {48, 3584, 18944, 132, 0, 2, "a label pass"},
        {1400, 512, 3584, 132, 0, 2, "k/v apart"},
        {300, 3584, 3584, 132, OP_MM_TILES_WIDE, 1, "the warm-up's wide pass"},
        {300, 3584, 3584, 132, OP_MM_TILES_TALL, 4, "the warm-up's tall pass"},
        {300, 3584, 18944, 132, OP_MM_TILES_TALL, 0, "its down: class 4 is never long K"},
        {48, 3584, 3584, 132, OP_MM_TILES_TALL, 2, "a label pass in the tall pass"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int got = ops_gemm_i8_class(c[i].m, c[i].n, c[i].k, c[i].units, c[i].tiles);
        CHECK(got == c[i].want, "int8 class of %ux%ux%u on %u units: %d, want %d (%s)", c[i].m,
              c[i].n, c[i].k, c[i].units, got, c[i].want, c[i].why);
    }
}

void test_int8(struct T *t)
{
    auto_classes();
    quant_activations(t);
    quant_weights(t);
    gemm_i8(t);
}
