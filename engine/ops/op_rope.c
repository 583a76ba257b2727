/*
 * Rotary position embeddings: NeoX, M-RoPE (sections) and the vision 2-D
 * variant, exactly as docs/reference/qwen25vl.md §3.5 and §4.2 define them (see
 * shaders/rope.comp for the formulas). Tokens are dispatched in chunks
 * whose bindings fit maxStorageBufferRange. The output may be f16: the
 * text model rotates K from f32 staging straight into its f16 KV cache.
 * The input may be f16 and either side a slice of fused [q | k | v] rows
 * (row strides): the tower's Q/K/V GEMM writes one such row per patch.
 */
#include "engine/ops/ops_internal.h"

struct rope_push {
    uint32_t T, H, D, s0, s1;
    float base;
    uint32_t xs, ys, ps, xr, yr, copy;
};

struct vkr_pipeline_key ops_rope_key(int mode, int f16_out, int f16_in)
{
    /* rope.comp's FLAGS: bit 0 f16 output, bit 1 f16 input */
    return ops_key("rope", 2, (uint32_t)mode, (f16_out != 0) | (f16_in != 0) << 1);
}

int op_rope(struct vkr_cmd *c, const struct op_rope *a, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (a->d == 0 || a->d % 2 || (a->mode == OP_ROPE_VISION && a->d % 4))
        return folio_err_set(err, FOLIO_EINVAL, "rope: head size %u must be even (a multiple of "
                             "4 for vision)", a->d);
    if ((a->mode == OP_ROPE_MROPE || a->mode == OP_ROPE_IMROPE) &&
        a->sections[0] + a->sections[1] + a->sections[2] != a->d / 2)
        return folio_err_set(err, FOLIO_EINVAL, "rope: M-RoPE sections %u+%u+%u must sum to d/2 = %u",
                             a->sections[0], a->sections[1], a->sections[2], a->d / 2);
    if ((a->ytype != QUANT_F32 && a->ytype != QUANT_F16) ||
        (a->xtype != QUANT_F32 && a->xtype != QUANT_F16))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "rope: types %d -> %d (f32 or f16 only)",
                             a->xtype, a->ytype);
    int f16 = a->ytype == QUANT_F16, x16 = a->xtype == QUANT_F16;
    const uint32_t hd = a->h * a->d;
    const uint32_t xr = a->x_stride ? a->x_stride : hd, yr = a->y_stride ? a->y_stride : hd;
    if (xr < hd || yr < hd || (f16 && yr % 2))
        return folio_err_set(err, FOLIO_EINVAL, "rope: row strides %u / %u for %u x %u heads "
                             "(at least the heads, even for an f16 output)", xr, yr, a->h, a->d);
    /* Rows of another width or stride, or an f16 side, would overwrite
     * input not yet read: only f32 over itself rotates in place */
    int same = !f16 && !x16 && a->x.offset == a->y.offset && xr == yr;
    if (!same && a->x.block == a->y.block && a->x.offset < a->y.offset + a->y.size &&
        a->y.offset < a->x.offset + a->x.size)
        return folio_err_set(err, FOLIO_EINVAL, "rope: an output that is not the f32 input itself "
                             "must not overlap the input (rotate into a separate tensor)");
    if (a->t == 0 || a->h == 0)
        return 0;
    uint32_t pid;
    int rc = ops_pipe_key(vk, ops_rope_key((int)a->mode, f16, x16), &pid, err);
    if (rc)
        return rc;
    uint32_t streams = a->mode == OP_ROPE_NEOX ? 1 : a->mode == OP_ROPE_VISION ? 2 : 3;
    uint64_t rb[3] = {(uint64_t)xr * (x16 ? 2 : 4), streams * 4u, (uint64_t)yr * (f16 ? 2 : 4)};
    rc = ops_need(a->x, rb[0] * a->t, "rope input", err);
    if (!rc)
        rc = ops_need(a->y, rb[2] * a->t, "rope output", err);
    if (!rc)
        rc = ops_need(a->pos, rb[1] * a->t, "rope positions", err);
    if (rc)
        return rc;
    uint64_t per = ops_rows_per(vk, rb, 3);
    if (per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "rope: one token exceeds the binding range");
    for (uint64_t t0 = 0; t0 < a->t; t0 += per) {
        uint64_t t1 = t0 + per < a->t ? t0 + per : a->t;
        struct vkr_bind b[3];
        uint32_t xs, ys, ps;
        rc = vkr_bind_rows(vk, a->x, rb[0], t0, t1, &b[0], &xs, err);
        if (!rc)
            rc = vkr_bind_rows(vk, a->y, rb[2], t0, t1, &b[1], &ys, err);
        if (!rc)
            rc = vkr_bind_rows(vk, a->pos, rb[1], t0, t1, &b[2], &ps, err);
        if (rc)
            return rc;
        if ((f16 && ys % 4) || (x16 && xs % 2))
            return folio_err_set(err, FOLIO_EINVAL, "rope: an f16 output must start 4-byte "
                                 "aligned, an f16 input 2-byte (offsets %llu, %llu)",
                                 (unsigned long long)a->y.offset, (unsigned long long)a->x.offset);
        /* interleaved M-RoPE needs only the h and w counts */
        int im = a->mode == OP_ROPE_IMROPE;
        struct rope_push pc = {(uint32_t)(t1 - t0), a->h, a->d, a->sections[im ? 1 : 0],
                               a->sections[im ? 2 : 1], a->base, xs / (x16 ? 2 : 4),
                               ys / (f16 ? 2 : 4), ps / 4, xr, yr, a->copy != 0};
        uint64_t threads = (t1 - t0) * a->h * (a->d / 2);
        uint32_t gx, gy;
        ops_grid((threads + 63) / 64, &gx, &gy);
        rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 3,
                                                        .push = &pc, .push_bytes = sizeof pc,
                                                        .groups = {gx, gy, 1}, .label = "rope"},
                                                        err);
        if (rc)
            return rc;
    }
    return 0;
}
