/* RMSNorm / LayerNorm (f32 and f16 outputs) and softmax. See ops_test.h. */
#include "tests/engine/ops/ops_test.h"

#include <stdlib.h>

void test_norm_softmax(struct T *t)
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
                RUN(t, op_norm(c, &(struct op_norm){.x = xt, .y = yt, .w = wb ? &wt : NULL,
                                                    .b = wb && layer ? &bt : NULL, .rows = rows,
                                                    .n = n, .eps = 1e-6f, .layer = layer,
                                                    .ytype = out16 ? QUANT_F16 : QUANT_F32}, e));
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
