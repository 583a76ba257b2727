/*
 * Row-wise ops: RMSNorm / LayerNorm and softmax. One workgroup per row;
 * rows are dispatched in chunks whose bindings fit maxStorageBufferRange.
 */
#include "engine/ops/ops_internal.h"

struct norm_push {
    uint32_t n, rows, has_w, has_b;
    float eps;
    uint32_t xs, ys;
};
struct softmax_push {
    uint32_t n, rows;
    float scale;
    uint32_t xs, ys;
};

/* Shared driver: chunks rows, binds x/y per chunk plus up to two whole
 * extra tensors, and dispatches one workgroup per row. */
static int rows_dispatch(struct vkr_cmd *c, uint32_t pid, const char *label, struct vkr_tensor x,
                         struct vkr_tensor y, uint32_t y_elem, const struct vkr_bind *extra,
                         int nextra, uint32_t rows, uint32_t n, void *push, uint32_t push_bytes,
                         uint32_t *push_rows, uint32_t *push_xs, uint32_t *push_ys,
                         struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    uint64_t rb = (uint64_t)n * 4, yrb = (uint64_t)n * y_elem;
    int rc = ops_need(x, rb * rows, label, err);
    if (!rc)
        rc = ops_need(y, yrb * rows, label, err);
    if (rc)
        return rc;
    uint64_t per = vkr_rows_per_range(vk, rb);
    if (per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "%s: a row of %u floats exceeds the binding range",
                             label, n);
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint64_t r1 = r0 + per < rows ? r0 + per : rows;
        struct vkr_bind b[4];
        uint32_t xs, ys;
        rc = vkr_bind_rows(vk, x, rb, r0, r1, &b[0], &xs, err);
        if (!rc)
            rc = vkr_bind_rows(vk, y, yrb, r0, r1, &b[1], &ys, err);
        if (rc)
            return rc;
        for (int i = 0; i < nextra; i++)
            b[2 + i] = extra[i];
        *push_rows = (uint32_t)(r1 - r0);
        *push_xs = xs / 4;
        *push_ys = ys / y_elem;
        uint32_t gx, gy;
        ops_grid(r1 - r0, &gx, &gy);
        rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 2 + nextra,
                                                        .push = push, .push_bytes = push_bytes,
                                                        .groups = {gx, gy, 1}, .label = label},
                                                        err);
        if (rc)
            return rc;
    }
    return 0;
}

struct vkr_pipeline_key ops_norm_key(int layer, int f16_out)
{
    /* spec 0: LayerNorm (1) or RMSNorm (0); spec 1, only for f16 output: 1 */
    return ops_key("norm", f16_out ? 2 : 1, layer ? 1u : 0u, f16_out ? 1u : 0u);
}

struct vkr_pipeline_key ops_softmax_key(void)
{
    return ops_key("softmax", 0, 0, 0);
}

int op_norm(struct vkr_cmd *c, const struct op_norm *a, struct folio_err *err)
{
    const struct vkr_tensor *w = a->w, *b = a->b;
    struct vkr_tensor x = a->x, y = a->y;
    uint32_t rows = a->rows, n = a->n;
    int layer = a->layer, ytype = a->ytype;
    float eps = a->eps;
    struct vkr *vk = vkr_cmd_vkr(c);
    if (rows == 0 || n == 0)
        return 0;
    int f16 = ytype == QUANT_F16;
    if (f16 && n % 2)
        return folio_err_set(err, FOLIO_EINVAL, "norm: f16 output needs an even row width, got %u", n);
    uint32_t pid;
    int rc = ops_pipe_key(vk, ops_norm_key(layer, f16), &pid, err);
    if (rc)
        return rc;
    struct vkr_bind extra[2];
    rc = ops_bind(vk, w ? *w : x, (uint64_t)n * 4, &extra[0], "norm weight", err);
    if (!rc)
        rc = ops_bind(vk, b ? *b : x, (uint64_t)n * 4, &extra[1], "norm bias", err);
    if (rc)
        return rc;
    struct norm_push pc = {n, 0, w != NULL, b != NULL, eps, 0, 0};
    return rows_dispatch(c, pid, layer ? "layernorm" : "rmsnorm", x, y, f16 ? 2 : 4, extra, 2,
                         rows, n, &pc, sizeof pc, &pc.rows, &pc.xs, &pc.ys, err);
}

int op_softmax(struct vkr_cmd *c, struct vkr_tensor x, struct vkr_tensor y, uint32_t rows,
               uint32_t n, float scale, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (rows == 0 || n == 0)
        return 0;
    uint32_t pid;
    int rc = ops_pipe_key(vk, ops_softmax_key(), &pid, err);
    if (rc)
        return rc;
    struct softmax_push pc = {n, 0, scale, 0, 0};
    return rows_dispatch(c, pid, "softmax", x, y, 4, NULL, 0, rows, n, &pc, sizeof pc, &pc.rows,
                         &pc.xs, &pc.ys, err);
}
