/*
 * Rows into folio's int8 rows (QUANT_I8R, engine/quant/quant.h): the
 * weights once at load (--gpu-weights int8, ops_upload_weight), the int8
 * GEMM's activations before every product (op_matmul.c). One symmetric
 * scale per row: per output channel for weights, per token for
 * activations, computed on the device, so nothing is calibrated offline.
 */
#include "engine/ops/ops_internal.h"

#include <inttypes.h>
#include <string.h>

struct vkr_pipeline_key ops_quant_rows_key(const struct vkr *vk, int xtype)
{
    /* one row per workgroup; a CPU device runs a workgroup's invocations as
     * SIMD lanes, as matvec's key explains */
    return ops_key("quant_rows", 2, (uint32_t)xtype, strcmp(vkr_device(vk)->type, "cpu") == 0 ? 8 : 128);
}

struct qr_push {
    uint32_t rows, K, row_bytes, w_skip, y_skip;
};

int op_quant_rows(struct vkr_cmd *c, struct vkr_tensor x, int xtype, uint32_t rows, uint32_t k,
                  struct vkr_tensor y, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    uint32_t be = quant_supported(xtype) ? (uint32_t)quant_block_elems(xtype) : 0;
    if (!quant_supported(xtype) || xtype == QUANT_I8R || k % QUANT_I8R_ALIGN || k % be)
        return folio_err_set(err, FOLIO_EINVAL, "quant_rows: %s rows of %u elements cannot be "
                             "made int8 rows (k must be a multiple of %d and of the type's block)",
                             quant_supported(xtype) ? quant_type_name(xtype) : "unknown type", k,
                             QUANT_I8R_ALIGN);
    uint64_t xb = quant_row_bytes(xtype, k), yb = quant_row_bytes(QUANT_I8R, k);
    int rc = ops_need(x, xb * rows, "quant_rows input", err);
    if (!rc)
        rc = ops_need(y, yb * rows, "quant_rows output", err);
    uint32_t pid;
    if (!rc)
        rc = ops_pipe_key(vk, ops_quant_rows_key(vk, xtype), &pid, err);
    if (rc)
        return rc;
    uint64_t rbs[2] = {xb, yb};
    uint64_t per = ops_rows_per(vk, rbs, 2);
    if (per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "quant_rows: one row exceeds the binding range");
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint64_t r1 = r0 + per < rows ? r0 + per : rows;
        struct vkr_bind b[2];
        uint32_t xs, ys;
        rc = vkr_bind_rows(vk, x, xb, r0, r1, &b[0], &xs, err);
        if (!rc)
            rc = vkr_bind_rows(vk, y, yb, r0, r1, &b[1], &ys, err);
        if (rc)
            return rc;
        struct qr_push pc = {(uint32_t)(r1 - r0), k, (uint32_t)xb, xs, ys};
        uint32_t gx, gy;
        ops_grid(r1 - r0, &gx, &gy);
        rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 2,
                                                        .push = &pc, .push_bytes = sizeof pc,
                                                        .groups = {gx, gy, 1},
                                                        .label = "quant_rows"},
                                                        err);
        if (rc)
            return rc;
    }
    return 0;
}

