/* Rotary embeddings: NeoX, M-RoPE, vision, interleaved M-RoPE; f32 output
 * and f16 output (K into the text model's f16 KV cache). See ops_test.h. */
#include "tests/engine/ops/ops_test.h"

#include <stdlib.h>
#include <string.h>

/* A slice of fused [q | k | v] rows (the tower's fused Q/K/V product):
 * a's t x h x d heads at slice j of rows 3 h d apart, rotated in place in
 * f32 (the other slices must come back untouched), and read as f16 into a
 * packed f32 and a packed f16 output. */
static void rope_fused(struct T *t, struct op_rope a, uint32_t j, const int32_t *pos,
                       uint32_t streams)
{
    const size_t hd = (size_t)a.h * a.d, W = 3 * hd, nf = a.t * W + 2 * hd, nx = a.t * hd;
    float *xf = malloc(sizeof(float) * nf), *back = malloc(sizeof(float) * nf);
    float *x = malloc(sizeof(float) * nx), *r = malloc(sizeof(float) * nx);
    float *g = malloc(sizeof(float) * nx);
    uint16_t *hf = malloc(sizeof(uint16_t) * nf), *h = malloc(sizeof(uint16_t) * nx);
    fill(t, xf, nf, 1.0f);
    for (int x16 = 0; x16 < 2; x16++) {
        /* the reference reads what the kernel reads: the slice, rounded to
         * f16 where the rows are f16 */
        for (size_t i = 0; i < nf; i++) {
            hf[i] = quant_f32_to_f16(xf[i]);
            back[i] = x16 ? quant_f16_to_f32(hf[i]) : xf[i];
        }
        for (uint32_t tk = 0; tk < a.t; tk++)
            memcpy(x + tk * hd, back + tk * W + j * hd, sizeof(float) * hd);
        ops_ref_rope(&a, x, pos, r);
        for (int f16 = 0; f16 < 1 + x16; f16++) {
            vkr_arena_reset(t->act);
            uint64_t es = x16 ? 2 : 4;
            struct vkr_tensor all = x16 ? put(t, t->act, hf, 2 * nf) : put(t, t->act, xf, 4 * nf);
            struct op_rope b = a;
            b.x = vkr_view(all, j * hd * es, a.t * W * es);
            b.xtype = x16 ? QUANT_F16 : QUANT_F32;
            b.x_stride = (uint32_t)W;
            b.y = x16 ? put(t, t->act, NULL, 4 * nx) : b.x;
            b.y_stride = x16 ? 0 : (uint32_t)W;
            b.ytype = f16 ? QUANT_F16 : QUANT_F32;
            b.pos = put(t, t->act, pos, sizeof(int32_t) * a.t * streams);
            RUN(t, op_rope(c, &b, e));
            size_t diff = 0; /* the slices around it, unchanged (in place) */
            if (!x16) {
                get(t, all, back, 4 * nf);
                for (size_t i = 0; i < nf; i++) {
                    size_t col = i % W;
                    if (i < a.t * W && col >= j * hd && col < (j + 1) * hd)
                        g[i / W * hd + col - j * hd] = back[i];
                    else
                        diff += memcmp(&back[i], &xf[i], 4) != 0;
                }
            } else if (f16) {
                get(t, b.y, h, 2 * nx);
                for (size_t i = 0; i < nx; i++)
                    g[i] = quant_f16_to_f32(h[i]);
            } else {
                get(t, b.y, g, 4 * nx);
            }
            size_t at = 0;
            double wv = worst(g, r, NULL, nx, 1e-3, f16 ? 1.0 / 1024 : 0.0, &at);
            CHECK(wv <= 1.0 && diff == 0, "rope mode %d%s, slice %u of fused rows, %s in, %s out: "
                  "worst %.3g at %zu (gpu %g ref %g), %zu values outside the slice changed",
                  (int)a.mode, a.copy ? " (copy)" : "", j, x16 ? "f16" : "f32 in place",
                  f16 ? "f16" : "f32", wv, at,
                  (double)g[at], (double)r[at], diff);
        }
    }
    free(xf), free(back), free(x), free(r), free(g), free(hf), free(h);
}

void test_rope(struct T *t)
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
        uint16_t *h = malloc(sizeof(uint16_t) * nx);
        ops_ref_rope(&a, x, pos, r);
        for (int f16 = 0; f16 < 2; f16++) {
            vkr_arena_reset(t->act);
            a.x = put(t, t->act, x, sizeof(float) * nx);
            a.y = put(t, t->act, NULL, sizeof(float) * nx);
            a.pos = put(t, t->act, pos, sizeof(int32_t) * a.t * streams);
            a.ytype = f16 ? QUANT_F16 : QUANT_F32;
            RUN(t, op_rope(c, &a, e));
            if (f16) {
                get(t, a.y, h, sizeof(uint16_t) * nx);
                for (size_t i = 0; i < nx; i++)
                    g[i] = quant_f16_to_f32(h[i]);
            } else {
                get(t, a.y, g, sizeof(float) * nx);
            }
            size_t at = 0;
            /* Bound: 1e-3 absolute: angles up to 2000 rad carry f32 rounding
             * of ~1e-4 rad, and GPU sin/cos/pow are not correctly rounded;
             * f16 output adds one f16 step, at most 2^-10 relative
             * (packHalf2x16's rounding mode is implementation-defined). A
             * wrong pairing or word is off by the size of the values. */
            double wv = worst(g, r, NULL, nx, 1e-3, f16 ? 1.0 / 1024 : 0.0, &at);
            CHECK(wv <= 1.0, "rope mode %d %s: worst %.3g at %zu (gpu %g ref %g)", (int)a.mode,
                  f16 ? "f16 out" : "f32 out", wv, at, (double)g[at], (double)r[at]);
        }
        /* slices whose views start bindable, as the tower's (vision.c: qkv_form) */
        uint64_t hd2 = (uint64_t)a.h * a.d * 2, al = vkr_limits(t->vk)->min_ssbo_align;
        for (uint32_t j = 0; j < 3; j++)
            if (j * hd2 % al == 0)
                rope_fused(t, cases[ci], j, pos, streams);
        /* the same pass copying (the text model's V into its cache) */
        struct op_rope cp = cases[ci];
        cp.copy = 1;
        if (2 * hd2 % al == 0)
            rope_fused(t, cp, 2, pos, streams);
        free(x), free(g), free(r), free(pos), free(h);
    }
    /* f16 output over its own f32 input would overwrite rows not yet read */
    struct op_rope a = {.t = 4, .h = 2, .d = 64, .mode = OP_ROPE_NEOX, .base = 1e6f,
                        .ytype = QUANT_F16};
    vkr_arena_reset(t->act);
    a.x = a.y = put(t, t->act, NULL, 4 * 2 * 64 * 4);
    a.pos = put(t, t->act, NULL, 4 * 4);
    struct folio_err e = {0};
    struct vkr_cmd *c = NULL;
    int rc = vkr_cmd_begin(t->vk, &c, &e);
    if (!rc) {
        rc = op_rope(c, &a, &e);
        vkr_cmd_abort(c);
    }
    CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "must not overlap"), "in-place f16 rope: rc %d \"%s\"",
          rc, e.msg);
    /* f32 in place with another stride for y would read rows y overwrote */
    a.ytype = QUANT_F32;
    a.x_stride = 2 * 2 * 64;
    a.t = 2;
    e = (struct folio_err){0};
    rc = vkr_cmd_begin(t->vk, &c, &e);
    if (!rc) {
        rc = op_rope(c, &a, &e);
        vkr_cmd_abort(c);
    }
    CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "must not overlap"), "in-place rope with two "
          "strides: rc %d \"%s\"", rc, e.msg);
}
