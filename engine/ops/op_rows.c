/*
 * Row movement: gather (embedding lookup, any weight type, dequantized to
 * f32), scatter of rows into a sequence, and the patch merger's 2x2
 * concatenation. A table larger than one binding is gathered in ranged
 * dispatches: each covers table rows [r0, r1) and writes only the ids that
 * fall inside it. Scatter works the same way round (destination rows in
 * ranges), and concat2x2 in bands of grid rows. Patchify turns a page's
 * resized bytes into the vision tower's patch rows on the device (a page
 * goes up as 3 bytes a pixel instead of 12 in f32 rows), in ranges of
 * output rows whose pixel rows fit a binding.
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
struct patchify_push {
    uint32_t n, k0, width, cols, rows, win, side, merge, y0, rs, ys;
};

/* The loop gather and scatter share: the per-id side (the ids and one
 * tensor of rows in id order) in chunks that fit a binding, the indexed
 * table in row ranges within each chunk, one workgroup per id; the shader
 * touches only the ids whose table row falls in [r0, r1). Skips are bytes
 * into each binding. */
struct index_pass {
    struct vkr_tensor ids, side, table;
    uint64_t n, side_rb, table_rows, table_rb;
    int side_slot, table_slot; /* the ids are slot 1 */
};
struct index_chunk {
    uint32_t n, r0, r1, ids_skip, side_skip, table_skip;
};

static int by_index_ranges(struct vkr_cmd *c, uint32_t pid, const char *label,
                           const struct index_pass *p,
                           void (*fill)(const struct index_chunk *, void *), void *push,
                           uint32_t push_bytes, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    uint64_t side_rb[2] = {p->side_rb, 4};
    uint64_t per = ops_rows_per(vk, side_rb, 2), tper = vkr_rows_per_range(vk, p->table_rb);
    if (per == 0 || tper == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "%s: a row exceeds the binding range", label);
    for (uint64_t i0 = 0; i0 < p->n; i0 += per) {
        uint64_t i1 = i0 + per < p->n ? i0 + per : p->n;
        struct vkr_bind b[3];
        struct index_chunk ch = {.n = (uint32_t)(i1 - i0)};
        int rc = vkr_bind_rows(vk, p->ids, 4, i0, i1, &b[1], &ch.ids_skip, err);
        if (!rc)
            rc = vkr_bind_rows(vk, p->side, p->side_rb, i0, i1, &b[p->side_slot], &ch.side_skip, err);
        if (rc)
            return rc;
        for (uint64_t r0 = 0; r0 < p->table_rows; r0 += tper) {
            uint64_t r1 = r0 + tper < p->table_rows ? r0 + tper : p->table_rows;
            rc = vkr_bind_rows(vk, p->table, p->table_rb, r0, r1, &b[p->table_slot], &ch.table_skip,
                               err);
            if (rc)
                return rc;
            ch.r0 = (uint32_t)r0;
            ch.r1 = (uint32_t)r1;
            fill(&ch, push);
            uint32_t gx, gy;
            ops_grid(ch.n, &gx, &gy);
            rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 3,
                                                            .push = push, .push_bytes = push_bytes,
                                                            .groups = {gx, gy, 1}, .label = label},
                                                            err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static void gather_fill(const struct index_chunk *ch, void *push)
{
    struct gather_push *pc = push;
    pc->n_ids = ch->n;
    pc->w_skip = ch->table_skip;
    pc->r0 = ch->r0;
    pc->r1 = ch->r1;
    pc->is = ch->ids_skip / 4;
    pc->ys = ch->side_skip / 4;
}

static void scatter_fill(const struct index_chunk *ch, void *push)
{
    struct scatter_push *pc = push;
    pc->n = ch->n;
    pc->r0 = ch->r0;
    pc->r1 = ch->r1;
    pc->ss = ch->side_skip / 4;
    pc->is = ch->ids_skip / 4;
    pc->ds = ch->table_skip / 4;
}

struct vkr_pipeline_key ops_gather_key(int wtype)
{
    return ops_key("gather", 1, (uint32_t)wtype, 0);
}

struct vkr_pipeline_key ops_scatter_key(void)
{
    return ops_key("scatter", 0, 0, 0);
}

struct vkr_pipeline_key ops_concat2x2_key(void)
{
    return ops_key("concat2x2", 0, 0, 0);
}

struct vkr_pipeline_key ops_patchify_key(void)
{
    return ops_key("patchify", 0, 0, 0);
}

int op_gather(struct vkr_cmd *c, const struct op_gather *g, struct folio_err *err)
{
    struct vkr_tensor table = g->table, ids = g->ids, y = g->y;
    int wtype = g->wtype;
    uint32_t rows = g->rows, k = g->k, n_ids = g->n_ids;
    struct vkr *vk = vkr_cmd_vkr(c);
    if (!quant_supported(wtype))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "gather: type %d not supported", wtype);
    uint32_t be = (uint32_t)quant_block_elems(wtype);
    if (k == 0 || k % be)
        return folio_err_set(err, FOLIO_EINVAL, "gather: row length %u is not a multiple of %u", k, be);
    if (n_ids == 0 || rows == 0)
        return 0;
    uint32_t pid;
    int rc = ops_pipe_key(vk, ops_gather_key(wtype), &pid, err);
    if (rc)
        return rc;
    uint64_t rb = quant_row_bytes(wtype, k);
    rc = ops_need(table, rb * rows, "gather table", err);
    if (rc)
        return rc;
    rc = ops_need(ids, (uint64_t)n_ids * 4, "gather ids", err);
    if (!rc)
        rc = ops_need(y, (uint64_t)n_ids * k * 4, "gather output", err);
    if (rc)
        return rc;
    struct index_pass ip = {.ids = ids, .side = y, .table = table, .n = n_ids,
                            .side_rb = (uint64_t)k * 4, .table_rows = rows, .table_rb = rb,
                            .side_slot = 2, .table_slot = 0};
    struct gather_push pc = {.K = k, .row_bytes = (uint32_t)rb};
    return by_index_ranges(c, pid, "gather", &ip, gather_fill, &pc, sizeof pc, err);
}

int op_scatter(struct vkr_cmd *c, struct vkr_tensor src, struct vkr_tensor idx, uint32_t n,
               uint32_t width, struct vkr_tensor dst, uint32_t dst_rows, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (n == 0 || width == 0)
        return 0;
    uint32_t pid;
    int rc = ops_pipe_key(vk, ops_scatter_key(), &pid, err);
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
    struct index_pass ip = {.ids = idx, .side = src, .table = dst, .n = n, .side_rb = rb,
                            .table_rows = dst_rows, .table_rb = rb, .side_slot = 0,
                            .table_slot = 2};
    struct scatter_push pc = {.width = width, .dst_rows = dst_rows};
    return by_index_ranges(c, pid, "scatter", &ip, scatter_fill, &pc, sizeof pc, err);
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
    int rc = ops_pipe_key(vk, ops_concat2x2_key(), &pid, err);
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
        rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 2,
                                                        .push = &pc, .push_bytes = sizeof pc,
                                                        .groups = {gx, gy, 1}, .label = "concat2x2"},
                                                        err);
        if (rc)
            return rc;
    }
    return 0;
}

/* The first pixel row patch row k of a's order reads (patchify.comp's
 * mapping, for the ranges: the shader does the same per workgroup). */
static uint32_t patch_top(const struct op_patchify *a, uint32_t rows, uint32_t cols, uint64_t k)
{
    const uint32_t G = a->merge * a->merge, win = a->win;
    uint64_t i = k / G, s = k % G, R;
    if (win == 0) {
        R = i / cols;
    } else {
        uint64_t wr = i / ((uint64_t)win * cols), rem = i - wr * win * cols;
        uint64_t hh = rows - wr * win < win ? rows - wr * win : win;
        uint64_t wc = rem / (hh * win), rem2 = rem - wc * hh * win;
        uint64_t ww = cols - wc * win < win ? cols - wc * win : win;
        R = wr * win + rem2 / ww;
    }
    return (uint32_t)((R * a->merge + s / a->merge) * a->patch);
}

int op_patchify(struct vkr_cmd *c, const struct op_patchify *a, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    const uint32_t P = a->patch, S = a->merge, f = P * S;
    if (P == 0 || S == 0 || !a->width || !a->height || a->width % f || a->height % f)
        return folio_err_set(err, FOLIO_EINVAL, "patchify: image %ux%u is not a multiple of "
                             "patch %u x merge %u", a->width, a->height, P, S);
    const uint32_t rows = a->height / f, cols = a->width / f;
    const uint64_t n = (uint64_t)(a->height / P) * (a->width / P), rb = 3ull * P * P * 4;
    const uint64_t line = (uint64_t)a->width * 3, bytes = line * a->height;
    uint32_t pid;
    int rc = ops_pipe_key(vk, ops_patchify_key(), &pid, err);
    if (!rc)
        rc = ops_need(a->rgb, a->rgb_off + bytes, "patchify image", err);
    if (!rc)
        rc = ops_need(a->lut, 3 * 256 * 4, "patchify table", err);
    if (!rc)
        rc = ops_need(a->y, (a->row0 + n) * rb, "patchify rows", err);
    if (rc)
        return rc;
    struct vkr_bind b[3];
    rc = ops_bind(vk, a->lut, 3 * 256 * 4, &b[1], "patchify table", err);
    /* What one binding holds once vkr_bind_rows has aligned its start down.
     * A whole page fits where bindings are large (a GPU: one dispatch);
     * else rows are taken while their outputs and the pixel rows they read
     * fit, which window order makes a walk over the rows. */
    const uint64_t usable = vkr_limits(vk)->max_range - vkr_limits(vk)->min_ssbo_align - 4;
    const int whole = bytes <= usable && n * rb <= usable;
    for (uint64_t k0 = 0; !rc && k0 < n;) {
        uint64_t k1 = n, y0 = 0, y1 = a->height;
        if (!whole) {
            y0 = patch_top(a, rows, cols, k0);
            y1 = y0 + P;
            for (k1 = k0 + 1; k1 < n && (k1 + 1 - k0) * rb <= usable; k1++) {
                uint64_t t = patch_top(a, rows, cols, k1);
                uint64_t lo = t < y0 ? t : y0, hi = t + P > y1 ? t + P : y1;
                if ((hi - lo) * line > usable)
                    break;
                y0 = lo;
                y1 = hi;
            }
            if ((y1 - y0) * line > usable || rb > usable)
                return folio_err_set(err, FOLIO_ELIMIT, "patchify: one patch row reads %" PRIu64
                                     " bytes of a %u-pixel-wide image and writes %" PRIu64
                                     "; the binding range is %" PRIu64, (y1 - y0) * line,
                                     a->width, rb, vkr_limits(vk)->max_range);
        }
        uint32_t rs, ys;
        rc = vkr_bind_rows(vk, a->rgb, 1, a->rgb_off + y0 * line, a->rgb_off + y1 * line, &b[0],
                           &rs, err);
        if (!rc)
            rc = vkr_bind_rows(vk, a->y, rb, a->row0 + k0, a->row0 + k1, &b[2], &ys, err);
        if (rc)
            return rc;
        struct patchify_push pc = {(uint32_t)(k1 - k0), (uint32_t)k0, a->width, cols, rows,
                                   a->win, P, S, (uint32_t)y0, rs, ys / 4};
        uint32_t gx, gy;
        ops_grid(k1 - k0, &gx, &gy);
        rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 3,
                                                        .push = &pc, .push_bytes = sizeof pc,
                                                        .groups = {gx, gy, 1}, .label = "patchify"},
                                                        err);
        k0 = k1;
    }
    return rc;
}
