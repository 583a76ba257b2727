/* Rotary embeddings: NeoX, M-RoPE, vision, interleaved M-RoPE; f32 output
 * and f16 output (K into the text model's f16 KV cache). See ops_test.h. */
#include "tests/engine/ops/ops_test.h"

#include <stdlib.h>
#include <string.h>

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
}
