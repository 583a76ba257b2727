/*
 * Matmul of quantized or float weights with f32 activations.
 *
 * Kernels: matvec (m <= 8, one workgroup per weight row: the decode path),
 * tiled (64x64 shared-memory tiles, weights dequantized while staged) and,
 * where built and supported, an f16 cooperative-matrix kernel
 * (GL_NV_cooperative_matrix) for the tensor cores.
 *
 * Ranges: a weight larger than maxStorageBufferRange is dispatched in
 * chunks of whole rows; activations and outputs likewise in chunks of
 * activation rows. Each chunk binds at an offset aligned down to
 * minStorageBufferOffsetAlignment and passes the remainder to the shader,
 * since a chunk of Q6_K rows (210-byte blocks) rarely starts aligned.
 */
#include "engine/ops/ops_internal.h"

#include <inttypes.h>

struct mm_push {
    uint32_t K, N, M, w_skip, row_bytes, x_skip, y_skip, ldy, y_col0, b_skip, has_bias;
};

enum op_mm_kernel op_matmul_pick(const struct vkr *vk, int wtype, uint32_t m)
{
    (void)wtype;
    if (m <= 8)
        return OP_MM_MATVEC;
    if (m >= 64 && ops_coopmat_available(vk))
        return OP_MM_COOPMAT;
    return OP_MM_TILED;
}

int op_matmul(struct vkr_cmd *c, const struct op_matmul *a, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (!quant_supported(a->wtype))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "matmul: weight type %d is not supported",
                             a->wtype);
    uint32_t be = (uint32_t)quant_block_elems(a->wtype);
    if (a->k == 0 || a->k % be != 0)
        return folio_err_set(err, FOLIO_EINVAL, "matmul: k=%u is not a multiple of %u for %s",
                             a->k, be, quant_type_name(a->wtype));
    if (a->m == 0 || a->n == 0)
        return 0;
    uint64_t row_bytes = quant_row_bytes(a->wtype, a->k);
    int rc = ops_need(a->w, row_bytes * a->n, "matmul weights", err);
    if (!rc)
        rc = ops_need(a->x, (uint64_t)a->m * a->k * 4, "matmul input", err);
    if (!rc)
        rc = ops_need(a->y, (uint64_t)a->m * a->n * 4, "matmul output", err);
    if (!rc && a->bias)
        rc = ops_need(*a->bias, (uint64_t)a->n * 4, "matmul bias", err);
    if (rc)
        return rc;
    enum op_mm_kernel kern = a->kernel == OP_MM_AUTO ? op_matmul_pick(vk, a->wtype, a->m) : a->kernel;
    /* the cooperative-matrix kernel stages 4 elements at a time; float rows
     * of other lengths take the tiled kernel's element-wise staging */
    if (kern == OP_MM_COOPMAT && a->k % 4) {
        if (a->kernel == OP_MM_COOPMAT)
            return folio_err_set(err, FOLIO_EUNSUPPORTED, "matmul: the cooperative-matrix kernel "
                                 "needs k (%u) to be a multiple of 4", a->k);
        kern = OP_MM_TILED;
    }
    if (kern == OP_MM_COOPMAT && !ops_coopmat_available(vk))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "matmul: cooperative-matrix kernel not "
                             "available on this device or build");
    uint32_t pid;
    uint32_t spec[2] = {(uint32_t)a->wtype, 128};
    const char *shader = kern == OP_MM_MATVEC ? "matvec" : kern == OP_MM_TILED ? "matmul" : "matmul_cm";
    rc = ops_pipe(vk, shader, kern == OP_MM_MATVEC ? 2 : 1, spec, &pid, err);
    if (rc)
        return rc;

    uint64_t n_per = vkr_rows_per_range(vk, row_bytes);
    uint64_t mrb[2] = {(uint64_t)a->k * 4, (uint64_t)a->n * 4};
    uint64_t m_per = ops_rows_per(vk, mrb, 2);
    if (n_per == 0 || m_per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "matmul: one row (%" PRIu64 " weight bytes, %u "
                             "inputs, %u outputs) exceeds the binding range %" PRIu64,
                             row_bytes, a->k, a->n, vkr_limits(vk)->max_range);
    if (kern == OP_MM_MATVEC && m_per > 8)
        m_per = 8;
    for (uint64_t m0 = 0; m0 < a->m; m0 += m_per) {
        uint64_t m1 = m0 + m_per < a->m ? m0 + m_per : a->m;
        struct vkr_bind b[4];
        uint32_t xs, ys, ws, bs = 0;
        rc = vkr_bind_rows(vk, a->x, (uint64_t)a->k * 4, m0, m1, &b[1], &xs, err);
        if (!rc)
            rc = vkr_bind_rows(vk, a->y, (uint64_t)a->n * 4, m0, m1, &b[2], &ys, err);
        if (rc)
            return rc;
        for (uint64_t n0 = 0; n0 < a->n; n0 += n_per) {
            uint64_t n1 = n0 + n_per < a->n ? n0 + n_per : a->n;
            rc = vkr_bind_rows(vk, a->w, row_bytes, n0, n1, &b[0], &ws, err);
            if (!rc && a->bias)
                rc = vkr_bind_rows(vk, *a->bias, 4, n0, n1, &b[3], &bs, err);
            if (rc)
                return rc;
            if (!a->bias)
                b[3] = b[1];
            struct mm_push pc = {a->k, (uint32_t)(n1 - n0), (uint32_t)(m1 - m0), ws,
                                 (uint32_t)row_bytes, xs / 4, ys / 4, a->n, (uint32_t)n0, bs / 4,
                                 a->bias != NULL};
            uint32_t gx, gy;
            if (kern == OP_MM_MATVEC) {
                ops_grid(n1 - n0, &gx, &gy);
            } else {
                uint64_t tile = kern == OP_MM_TILED ? 64 : 128;
                gx = (uint32_t)((n1 - n0 + tile - 1) / tile);
                gy = (uint32_t)((m1 - m0 + tile - 1) / tile);
            }
            rc = vkr_cmd_dispatch(c, pid, b, 4, &pc, sizeof pc, gx, gy, 1, shader, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}
