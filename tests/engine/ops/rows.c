/* Row ops: gather from every weight type, scatter, concat2x2. See ops_test.h. */
#include "tests/engine/ops/ops_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void test_rows(struct T *t)
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
        RUN(t, op_gather(c, &(struct op_gather){.table = tab, .wtype = ty, .rows = rows, .k = k,
                                                .ids = it, .n_ids = nid, .y = yt}, e));
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
