/*
 * Element-wise ops (add/mul with broadcast, activations, SwiGLU, scale)
 * and F32<->F16 conversion. Long vectors are dispatched in element ranges
 * that fit maxStorageBufferRange; a broadcast operand (nb < n) is bound
 * whole and the ranges are whole multiples of nb.
 */
#include "engine/ops/ops_internal.h"

#include <inttypes.h>

struct elem_push {
    uint32_t n, nb;
    float s, c;
    uint32_t as, bs, ys;
};

struct vkr_pipeline_key ops_elem_key(int op)
{
    return ops_key("elem", 1, (uint32_t)op, 0);
}

struct vkr_pipeline_key ops_convert_key(int to_f16)
{
    return ops_key("convert", 1, to_f16 ? 0u : 1u, 0); /* spec 0: f32 -> f16 (0) or back (1) */
}

int op_elem(struct vkr_cmd *c, const struct op_elem *e, struct folio_err *err)
{
    enum op_elem_kind op = e->op;
    struct vkr_tensor a = e->a, y = e->y;
    const struct vkr_tensor *b = e->b;
    uint64_t n = e->n, nb = e->nb;
    float s = e->s, c0 = e->c0;
    struct vkr *vk = vkr_cmd_vkr(c);
    int binary = op == OP_ADD || op == OP_MUL || op == OP_SWIGLU;
    if (n == 0)
        return 0;
    if (binary && !b)
        return folio_err_set(err, FOLIO_EINVAL, "elementwise op %d needs a second operand", (int)op);
    if (op == OP_SWIGLU)
        nb = n;
    if (!binary)
        nb = 1;
    if (nb == 0 || n % nb != 0)
        return folio_err_set(err, FOLIO_EINVAL, "elementwise: n=%" PRIu64 " is not a multiple of "
                             "the broadcast length %" PRIu64, n, nb);
    uint32_t pid;
    int rc = ops_pipe_key(vk, ops_elem_key((int)op), &pid, err);
    if (rc)
        return rc;
    int bfull = binary && nb == n;
    /* Chunk in "rows" of nb elements when b broadcasts, else of 1. */
    uint64_t unit = bfull || !binary ? 1 : nb;
    uint64_t per = vkr_rows_per_range(vk, unit * 4) * unit;
    if (per > 0xFFFFFFFFull - 65536)
        per = (0xFFFFFFFFull - 65536) / unit * unit;
    if (per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "elementwise: broadcast row exceeds the binding range");
    rc = ops_need(a, n * 4, "elementwise input", err);
    if (!rc)
        rc = ops_need(y, n * 4, "elementwise output", err);
    if (rc)
        return rc;
    struct vkr_bind bb;
    if (binary && !bfull) {
        rc = ops_bind(vk, *b, nb * 4, &bb, "broadcast operand", err);
        if (rc)
            return rc;
    }
    for (uint64_t e0 = 0; e0 < n; e0 += per) {
        uint64_t e1 = e0 + per < n ? e0 + per : n;
        struct vkr_bind bd[3];
        uint32_t as, ys, bs = 0;
        rc = vkr_bind_rows(vk, a, 4, e0, e1, &bd[0], &as, err);
        if (!rc)
            rc = vkr_bind_rows(vk, y, 4, e0, e1, &bd[2], &ys, err);
        if (!rc && bfull)
            rc = vkr_bind_rows(vk, *b, 4, e0, e1, &bd[1], &bs, err);
        if (rc)
            return rc;
        if (binary && !bfull)
            bd[1] = bb;
        if (!binary)
            bd[1] = bd[0];
        struct elem_push pc = {(uint32_t)(e1 - e0), (uint32_t)(bfull ? e1 - e0 : nb), s, c0,
                               as / 4, bs / 4, ys / 4};
        uint32_t gx, gy;
        ops_grid((e1 - e0 + 255) / 256, &gx, &gy);
        rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = bd, .nb = 3,
                                                        .push = &pc, .push_bytes = sizeof pc,
                                                        .groups = {gx, gy, 1}, .label = "elem"},
                                                        err);
        if (rc)
            return rc;
    }
    return 0;
}

int op_convert(struct vkr_cmd *c, int to_f16, struct vkr_tensor a, struct vkr_tensor y,
               uint64_t n, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (n == 0)
        return 0;
    uint32_t pid;
    int rc = ops_pipe_key(vk, ops_convert_key(to_f16), &pid, err);
    if (rc)
        return rc;
    uint64_t f32b = n * 4, f16b = (n + 1) / 2 * 4;
    /* the f16 side of an odd n ends in half a word, inside the slot the
     * rounded size asks for */
    rc = ops_need(a, to_f16 ? f32b : f16b, "convert input", err);
    if (!rc)
        rc = ops_need(y, to_f16 ? f16b : f32b, "convert output", err);
    if (rc)
        return rc;
    /* Ranges of an even count of elements (whole f16 words) whose f32 side
     * fits one binding; the f16 side is half as long. */
    uint64_t per = vkr_rows_per_range(vk, 4) & ~(uint64_t)1;
    if (per > 0xFFFFFFFFull - 65536)
        per = 0xFFFFFFFFull - 65536;
    if (per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "convert: the binding range holds no element pair");
    for (uint64_t e0 = 0; e0 < n; e0 += per) {
        uint64_t e1 = e0 + per < n ? e0 + per : n;
        struct vkr_tensor f32 = to_f16 ? a : y, f16 = to_f16 ? y : a;
        struct vkr_bind b32, b16;
        uint32_t s32, s16;
        rc = vkr_bind_rows(vk, f32, 4, e0, e1, &b32, &s32, err);
        if (!rc) /* a whole last word: e1 rounded up to even (inside f16b) */
            rc = vkr_bind_rows(vk, f16, 2, e0, (e1 + 1) & ~(uint64_t)1, &b16, &s16, err);
        if (rc)
            return rc;
        struct vkr_bind b[2] = {to_f16 ? b32 : b16, to_f16 ? b16 : b32};
        uint32_t pc[3] = {(uint32_t)(e1 - e0), (to_f16 ? s32 : s16) / 4, (to_f16 ? s16 : s32) / 4};
        uint32_t gx, gy;
        ops_grid(((e1 - e0 + 1) / 2 + 255) / 256, &gx, &gy);
        rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 2,
                                                        .push = pc, .push_bytes = sizeof pc,
                                                        .groups = {gx, gy, 1}, .label = "convert"},
                                                        err);
        if (rc)
            return rc;
    }
    return 0;
}
