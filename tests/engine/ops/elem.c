/* Element-wise ops (with broadcast) and f32 <-> f16 conversion. See ops_test.h. */
#include "tests/engine/ops/ops_test.h"

#include <stdlib.h>

/* F32 -> F16 -> F32 of m elements (m odd: the last f16 word is half used). */
static void convert_case(struct T *t, uint64_t m)
{
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
    CHECK(bad == 0, "convert f32<->f16 of %d: %d wrong", (int)m, bad);
    free(a), free(back), free(h);
}

void test_elem(struct T *t)
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
            RUN(t, op_elem(c, &(struct op_elem){.op = (enum op_elem_kind)op, .a = at_,
                                                .b = binary ? &bt : NULL, .y = yt, .n = n, .nb = nb,
                                                .s = 1.5f, .c0 = -0.25f}, e));
            get(t, yt, g, sizeof(float) * n);
            ops_ref_elem((enum op_elem_kind)op, a, b, r, n, binary ? nb : 1, 1.5f, -0.25f);
            size_t at = 0;
            /* Bound: 1e-6 absolute + 1e-5 relative (erf approximation 1.5e-7). */
            double wv = worst(g, r, NULL, n, 1e-6, 1e-5, &at);
            CHECK(wv <= 1.0, "elem op %d bcast %d: worst %.3g at %zu (gpu %g ref %g)", op, bc, wv, at,
                  (double)g[at], (double)r[at]);
            free(a), free(b), free(g), free(r);
        }
    /* F32 <-> F16, odd lengths: one range, and 36 KiB of f32 (several
     * ranges with 16 KiB bindings: the text model's V into its cache) */
    convert_case(t, 1001);
    convert_case(t, 9001);
}
