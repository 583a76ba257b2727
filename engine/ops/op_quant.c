/*
 * Rows into folio's int8 rows (QUANT_I8R, engine/quant/quant.h): the
 * weights once at load (--gpu-weights int8, ops_upload_weight), the int8
 * GEMM's activations before every product (op_matmul.c). One symmetric
 * scale per row: per output channel for weights, per token for
 * activations, computed on the device, so nothing is calibrated offline.
 */
#include "engine/ops/ops_internal.h"

#include <string.h>

struct vkr_pipeline_key ops_quant_rows_key(const struct vkr *vk, int xtype)
{
    /* one row per workgroup; a CPU device runs a workgroup's invocations as
     * SIMD lanes, as matvec's key explains */
    return ops_key("quant_rows", 2, (uint32_t)xtype, ops_on_cpu(vk) ? 8 : 128);
}

int op_quant_rows(struct vkr_cmd *c, struct vkr_tensor x, int xtype, uint32_t rows, uint32_t k,
                  struct vkr_tensor y, struct folio_err *err)
{
    uint32_t be = quant_supported(xtype) ? (uint32_t)quant_block_elems(xtype) : 0;
    if (!quant_supported(xtype) || xtype == QUANT_I8R || k % QUANT_I8R_ALIGN || k % be)
        return folio_err_set(err, FOLIO_EINVAL, "quant_rows: %s rows of %u elements cannot be "
                             "made int8 rows (k must be a multiple of %d and of the type's block)",
                             quant_supported(xtype) ? quant_type_name(xtype) : "unknown type", k,
                             QUANT_I8R_ALIGN);
    return ops_rows_convert(c, ops_quant_rows_key(vkr_cmd_vkr(c), xtype), x,
                            quant_row_bytes(xtype, k), y, quant_row_bytes(QUANT_I8R, k), 1, rows, k,
                            "quant_rows", err);
}
