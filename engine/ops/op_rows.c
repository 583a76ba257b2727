/*
 * Row movement: gather (embedding lookup, any weight type, dequantized to
 * f32), scatter of rows into a sequence, and the patch merger's 2x2
 * concatenation. A table larger than one binding is gathered in ranged
 * dispatches: each covers table rows [r0, r1) and writes only the ids that
 * fall inside it. Scatter works the same way round (destination rows in
 * ranges), and concat2x2 in bands of grid rows.
 */
#include "engine/ops/ops_internal.h"

#include <inttypes.h>

struct gather_push {
    uint32_t n_ids, K, row_bytes, w_skip, r0, r1, is, ys;
};
struct scatter_push {
    uint32_t n, width, dst_rows, r0, r1, ss, is, ds;
};
struct concat_push {
    uint32_t gh, gw, w, xs, ys;
};

int op_gather(struct vkr_cmd *c, struct vkr_tensor table, int wtype, uint32_t rows, uint32_t k,
              struct vkr_tensor ids, uint32_t n_ids, struct vkr_tensor y, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (!quant_supported(wtype))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "gather: type %d not supported", wtype);
    uint32_t be = (uint32_t)quant_block_elems(wtype);
    if (k == 0 || k % be)
        return folio_err_set(err, FOLIO_EINVAL, "gather: row length %u is not a multiple of %u", k, be);
    if (n_ids == 0 || rows == 0)
        return 0;
    uint32_t pid, spec = (uint32_t)wtype;
    int rc = ops_pipe(vk, "gather", 1, &spec, &pid, err);
    if (rc)
        return rc;
    uint64_t rb = quant_row_bytes(wtype, k);
    rc = ops_need(table, rb * rows, "gather table", err);
    if (rc)
        return rc;
    uint64_t per = vkr_rows_per_range(vk, rb);
    uint64_t out_rb[2] = {(uint64_t)k * 4, 4};
    uint64_t per_id = ops_rows_per(vk, out_rb, 2);
    rc = ops_need(ids, (uint64_t)n_ids * 4, "gather ids", err);
    if (!rc)
        rc = ops_need(y, (uint64_t)n_ids * k * 4, "gather output", err);
    if (rc)
        return rc;
    if (per == 0 || per_id == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "gather: a table row exceeds the binding range");
    /* ids (and output rows) in chunks, table rows in ranges within each. */
    for (uint64_t i0 = 0; i0 < n_ids; i0 += per_id) {
        uint64_t i1 = i0 + per_id < n_ids ? i0 + per_id : n_ids;
        struct vkr_bind b[3];
        uint32_t is, ys;
        rc = vkr_bind_rows(vk, ids, 4, i0, i1, &b[1], &is, err);
        if (!rc)
            rc = vkr_bind_rows(vk, y, (uint64_t)k * 4, i0, i1, &b[2], &ys, err);
        if (rc)
            return rc;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint64_t r1 = r0 + per < rows ? r0 + per : rows;
            uint32_t ws;
            rc = vkr_bind_rows(vk, table, rb, r0, r1, &b[0], &ws, err);
            if (rc)
                return rc;
            struct gather_push pc = {(uint32_t)(i1 - i0), k, (uint32_t)rb, ws, (uint32_t)r0,
                                     (uint32_t)r1, is / 4, ys / 4};
            uint32_t gx, gy;
            ops_grid(i1 - i0, &gx, &gy);
            rc = vkr_cmd_dispatch(c, pid, b, 3, &pc, sizeof pc, gx, gy, 1, "gather", err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int op_scatter(struct vkr_cmd *c, struct vkr_tensor src, struct vkr_tensor idx, uint32_t n,
               uint32_t width, struct vkr_tensor dst, uint32_t dst_rows, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (n == 0 || width == 0)
        return 0;
    uint32_t pid;
    int rc = ops_pipe(vk, "scatter", 0, NULL, &pid, err);
    if (rc)
        return rc;
    uint64_t rb = (uint64_t)width * 4;
    rc = ops_need(src, (uint64_t)n * rb, "scatter source", err);
    if (!rc)
        rc = ops_need(idx, (uint64_t)n * 4, "scatter indices", err);
    if (!rc)
        rc = ops_need(dst, (uint64_t)dst_rows * rb, "scatter destination", err);
    if (rc)
        return rc;
    uint64_t src_rb[2] = {rb, 4};
    uint64_t per = ops_rows_per(vk, src_rb, 2), dper = vkr_rows_per_range(vk, rb);
    if (per == 0 || dper == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "scatter: a row of %u floats exceeds the binding "
                             "range", width);
    /* source rows in chunks, destination rows in ranges within each */
    for (uint64_t i0 = 0; i0 < n; i0 += per) {
        uint64_t i1 = i0 + per < n ? i0 + per : n;
        struct vkr_bind b[3];
        uint32_t ss, is;
        rc = vkr_bind_rows(vk, src, rb, i0, i1, &b[0], &ss, err);
        if (!rc)
            rc = vkr_bind_rows(vk, idx, 4, i0, i1, &b[1], &is, err);
        if (rc)
            return rc;
        for (uint64_t r0 = 0; r0 < dst_rows; r0 += dper) {
            uint64_t r1 = r0 + dper < dst_rows ? r0 + dper : dst_rows;
            uint32_t ds;
            rc = vkr_bind_rows(vk, dst, rb, r0, r1, &b[2], &ds, err);
            if (rc)
                return rc;
            struct scatter_push pc = {(uint32_t)(i1 - i0), width, dst_rows, (uint32_t)r0,
                                      (uint32_t)r1, ss / 4, is / 4, ds / 4};
            uint32_t gx, gy;
            ops_grid(i1 - i0, &gx, &gy);
            rc = vkr_cmd_dispatch(c, pid, b, 3, &pc, sizeof pc, gx, gy, 1, "scatter", err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int op_concat2x2(struct vkr_cmd *c, struct vkr_tensor x, struct vkr_tensor y, uint32_t gh,
                 uint32_t gw, uint32_t w, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (gh % 2 || gw % 2)
        return folio_err_set(err, FOLIO_EINVAL, "concat2x2: grid %ux%u is not even", gh, gw);
    uint64_t total = (uint64_t)gh * gw * w;
    if (total == 0)
        return 0;
    uint32_t pid;
    int rc = ops_pipe(vk, "concat2x2", 0, NULL, &pid, err);
    if (rc)
        return rc;
    rc = ops_need(x, total * 4, "concat input", err);
    if (!rc)
        rc = ops_need(y, total * 4, "concat output", err);
    if (rc)
        return rc;
    /* In bands of two grid rows: input and output of a band are the same
     * contiguous 2 * gw * w floats. */
    uint64_t band = 2ull * gw * w * 4;
    uint64_t per = vkr_rows_per_range(vk, band);
    if (per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "concat2x2: two grid rows (%" PRIu64 " bytes) "
                             "exceed the binding range", band);
    for (uint64_t b0 = 0; b0 < gh / 2; b0 += per) {
        uint64_t b1 = b0 + per < gh / 2 ? b0 + per : gh / 2;
        struct vkr_bind b[2];
        uint32_t xs, ys;
        rc = vkr_bind_rows(vk, x, band, b0, b1, &b[0], &xs, err);
        if (!rc)
            rc = vkr_bind_rows(vk, y, band, b0, b1, &b[1], &ys, err);
        if (rc)
            return rc;
        struct concat_push pc = {(uint32_t)(2 * (b1 - b0)), gw, w, xs / 4, ys / 4};
        uint32_t gx, gy;
        ops_grid(((b1 - b0) * 2 * gw * w + 255) / 256, &gx, &gy);
        rc = vkr_cmd_dispatch(c, pid, b, 2, &pc, sizeof pc, gx, gy, 1, "concat2x2", err);
        if (rc)
            return rc;
    }
    return 0;
}
