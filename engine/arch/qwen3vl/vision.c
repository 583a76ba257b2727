/*
 * Qwen3-VL, the vision tower's family table (tower_internal.h; the
 * skeleton, shared with Qwen2-VL, is engine/model/vision.c; which tensor
 * goes where is the tensor table of qwen3vl.c). What differs from
 * Qwen2-VL's blocks (engine/arch/qwen2vl/vision.c):
 *  - patch 16 (768 columns per still-image row), the Conv3D's bias;
 *  - the position table is interpolated to each image's grid on the host
 *    (O(patches x width), the first image's grid cached) and added after
 *    the patch embedding;
 *  - fused QKV in the file, split into three matrices at load (row slices
 *    of the same bytes), so the per-matrix matmul/RoPE path is the shared
 *    one;
 *  - no windows: every block attends over its image (a batch: each row's
 *    image as its key range);
 *  - LayerNorm with biases, GELU(tanh) MLP;
 *  - DeepStack mergers after flagged blocks, whose outputs are returned as
 *    extra columns of each merged row (qwen3vl.h).
 * The f16 data path (weights expanded at load, tensor-core GEMM) is taken
 * when every matrix is f16 and the GEMM exists; the residual stream,
 * LayerNorm statistics and activations stay f32.
 */
#include "engine/arch/qwen3vl/qwen3vl.h"
#include "engine/quant/quant.h"
#include "engine/model/tower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* torch.linspace(0, side - 1, n) in float32: the first half counts up from
 * the start, the second down from the end (its algorithm, so the floor and
 * fractions below are the reference's). */
static float linspace_at(uint32_t side, uint32_t n, uint32_t i)
{
    if (n == 1)
        return 0.0f;
    float end = (float)(side - 1), step = end / (float)(n - 1);
    return i < n / 2 ? step * (float)i : end - step * (float)(n - 1 - i);
}

void q3_pos_interpolate(const float *table, uint32_t side, uint32_t d, uint32_t gh, uint32_t gw,
                        float *out)
{
    for (uint32_t r = 0; r < gh; r++) {
        float hv = linspace_at(side, gh, r);
        uint32_t h0 = (uint32_t)hv, h1 = h0 + 1 < side ? h0 + 1 : side - 1;
        float dh = hv - (float)h0;
        for (uint32_t c = 0; c < gw; c++) {
            float wv = linspace_at(side, gw, c);
            uint32_t w0 = (uint32_t)wv, w1 = w0 + 1 < side ? w0 + 1 : side - 1;
            float dw = wv - (float)w0;
            /* the four corner weights and their sum in the reference's order */
            const float wt[4] = {(1.0f - dh) * (1.0f - dw), (1.0f - dh) * dw, dh * (1.0f - dw),
                                 dh * dw};
            const float *src[4] = {table + ((size_t)h0 * side + w0) * d,
                                   table + ((size_t)h0 * side + w1) * d,
                                   table + ((size_t)h1 * side + w0) * d,
                                   table + ((size_t)h1 * side + w1) * d};
            /* raster (r, c) -> 2x2 merge-group order */
            size_t k = ((size_t)((r / 2) * (gw / 2) + c / 2) * 2 + r % 2) * 2 + c % 2;
            float *dst = out + k * d;
            for (uint32_t j = 0; j < d; j++) {
                float s = src[0][j] * wt[0];
                s += src[1][j] * wt[1];
                s += src[2][j] * wt[2];
                s += src[3][j] * wt[3];
                dst[j] = s;
            }
        }
    }
}

/* ------------------------------------------------------------------ open */

static int check(const struct vis *v, struct folio_err *err)
{
    if (v->hp.spatial_merge != 2)
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "vision: merge %u (Qwen3-VL merges 2x2)",
                             v->hp.spatial_merge);
    if (!ops_attention_head_supported(v->Dh) || v->Dh % 4)
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "vision: head size %u has no attention "
                             "kernel or 2-D RoPE (multiples of 4 up to 256)", v->Dh);
    return 0;
}

static int load_table(struct vis *v, const struct gguf_tensor_info *t, struct folio_err *err)
{
    uint64_t rb = quant_row_bytes(t->type, v->D);
    free(v->table);
    v->table = malloc((size_t)v->hp.n_pos * v->D * sizeof *v->table);
    if (!v->table)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t i = 0; i < v->hp.n_pos; i++)
        if (quant_dequantize_row(t->type, (const uint8_t *)t->data + i * rb,
                                 v->table + (size_t)i * v->D, v->D))
            return folio_err_set(err, FOLIO_EMODEL, "vision: position table type %d", t->type);
    return 0;
}

/* A block's fused QKV: Q, K, V are consecutive row blocks (biases: element
 * ranges) of the one tensor. */
static int load_qkv(struct vis *v, struct vis_layer *L, const struct gguf_tensor_info *t, int bias,
                    struct vkr_arena *st, int f16, struct folio_err *err)
{
    const uint32_t D = v->D;
    struct vis_w *w[3] = {bias ? &L->bq : &L->wq, bias ? &L->bk : &L->wk, bias ? &L->bv : &L->wv};
    int rc = 0;
    for (uint32_t j = 0; j < 3 && !rc; j++)
        rc = bias ? vis_upload_vec(v, t, (uint64_t)j * D, D, w[j], err)
                  : vis_upload(v, t, (uint64_t)j * D, D, w[j], st, f16, err);
    return rc;
}

/* One tensor of the file to its slot(s): the table entry says which
 * (qwen3vl.c); the position table and the fused QKV are this family's. */
static int load(struct vis *v, const struct gguf_load_item *it, struct vis_w *w,
                struct vkr_arena *st, int f16, struct folio_err *err)
{
    const struct gguf_tensor_info *t = it->t;
    switch (it->spec ? it->spec->load : ARCH_LOAD_SLOT) {
    case ARCH_LOAD_TABLE:
        return load_table(v, t, err);
    case ARCH_LOAD_QKV:
    case ARCH_LOAD_QKV_BIAS:
        return load_qkv(v, &v->L[it->index], t, it->spec->load == ARCH_LOAD_QKV_BIAS, st, f16,
                        err);
    default:
        break;
    }
    if (!w)
        return folio_err_set(err, FOLIO_EMODEL, "vision: unexpected tensor %s", t->name);
    if (t->n_dims == 1)
        return vis_upload_vec(v, t, 0, (uint32_t)t->ne[0], w, err);
    return vis_upload(v, t, 0, (uint32_t)(t->n_elems / t->ne[0]), w, st, f16, err);
}

static int complete(const struct vis *v, struct folio_err *err)
{
    for (uint32_t i = 0; i < v->hp.n_layer; i++) {
        const struct vis_layer *L = &v->L[i];
        if (!L->ln1.set || !L->ln1b.set || !L->wq.set || !L->bq.set || !L->wo.set ||
            !L->bo.set || !L->ln2.set || !L->ln2b.set || !L->wu.set || !L->bu.set ||
            !L->wd.set || !L->bd.set)
            return folio_err_set(err, FOLIO_EMODEL, "vision: block %u is incomplete", i);
    }
    for (uint32_t j = 0; j < v->nds; j++) {
        const struct vis_ds *d = &v->ds[j];
        if (!d->nw.set || !d->nb.set || !d->w1.set || !d->b1.set || !d->w2.set || !d->b2.set)
            return folio_err_set(err, FOLIO_EMODEL, "vision: DeepStack merger of block %u is "
                                 "incomplete", v->hp.deepstack_layers[j]);
    }
    if (!v->patchb.set || !v->table || !v->post.set || !v->postb.set || !v->mm0.set ||
        !v->mm0b.set || !v->mm2.set || !v->mm2b.set)
        return folio_err_set(err, FOLIO_EMODEL, "vision: patch embedding, position table or "
                             "merger tensors missing");
    return 0;
}

/* The position rows of each image of a staged batch, in its merge-group
 * order; an image with the grid of the one before is a copy, and the
 * first image's grid is kept from the last pass. */
static int stage(struct vis *v, const struct vis_image *im, uint32_t n, struct folio_err *err)
{
    const uint32_t D = v->D;
    uint64_t off = 0, prev = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t gh = im[j].grid_h, gw = im[j].grid_w;
        uint64_t rows = (uint64_t)gh * gw;
        float *dst = v->pebuf + off * D;
        if (j == 0 && v->pe_gh == gh && v->pe_gw == gw) {
            /* cached */
        } else if (j > 0 && gh == im[j - 1].grid_h && gw == im[j - 1].grid_w) {
            memcpy(dst, v->pebuf + prev * D, (size_t)rows * D * sizeof *dst);
        } else {
            q3_pos_interpolate(v->table, v->hp.pos_side, D, gh, gw, dst);
        }
        prev = off;
        off += rows;
    }
    v->pe_gh = im[0].grid_h;
    v->pe_gw = im[0].grid_w;
    return vkr_upload(v->vk, v->pe, 0, v->pebuf, off * D * 4, err);
}

/* --------------------------------------------------------------- forward */

/* y = x W^T + b, and y += that when acc (the residual). f16 path: the GEMM
 * with x in f16 (xh) or f32 and the sum in its epilogue; else the op
 * library's pick, through t for the sum. */
static int lin(struct vis *v, struct vkr_cmd *c, int f16, const struct vis_w *w,
               const struct vis_w *b, struct vkr_tensor x, int xh, struct vkr_tensor y, uint32_t m,
               int acc, struct folio_err *err)
{
    /* A shape the GEMM cannot stage (an f32 FFN activation of width 90 in
     * the parity kit's tower; every released model's is a multiple of 4)
     * takes the op library's pick instead, which reads the same f16 weights. */
    if (f16 && ops_gemm_shape_ok(w->n, w->k, xh ? QUANT_F16 : QUANT_F32, QUANT_F32))
        return vis_mm16(w, b, x, xh ? QUANT_F16 : QUANT_F32, y, QUANT_F32, m, acc ? &y : NULL,
                        OP_MM_ACT_NONE, NULL, c, err);
    uint64_t mn = (uint64_t)m * w->n;
    struct vkr_tensor t = vkr_view(v->t, 0, mn * 4);
    int rc = vis_mm(v, c, w, b, x, acc ? t : y, m, err);
    if (!rc && acc)
        rc = op_elem(c, &(struct op_elem){.op = OP_ADD, .a = y, .b = &t, .y = y, .n = mn, .nb = mn},
                                          err);
    return rc;
}

/* LayerNorm of rows x n (f16 output on the f16 path: the GEMM's input). */
static int lnorm(struct vis *v, struct vkr_cmd *c, int f16, struct vkr_tensor x,
                 struct vkr_tensor y, const struct vis_w *w, const struct vis_w *b, uint32_t rows,
                 uint32_t n, struct folio_err *err)
{
    return op_norm(c, &(struct op_norm){.x = x, .y = y, .w = &w->t, .b = &b->t, .rows = rows,
                                        .n = n, .eps = v->hp.eps, .layer = 1,
                                        .ytype = f16 ? QUANT_F16 : QUANT_F32}, err);
}

/* A merger: [rows x n] normalised, GELU(erf) MLP to y (M x O). The final
 * merger normalises each patch (n = D, rows = N), DeepStack's the 4
 * concatenated rows (n = MD, rows = M); both then read h as M x MD. */
static int merger(struct vis *v, struct vkr_cmd *c, int f16, const struct vis_w *nw,
                  const struct vis_w *nb, uint32_t rows, uint32_t n, const struct vis_w *w1,
                  const struct vis_w *b1, const struct vis_w *w2, const struct vis_w *b2,
                  uint32_t M, struct vkr_tensor y, struct folio_err *err)
{
    int rc = lnorm(v, c, f16, v->x, v->h, nw, nb, rows, n, err);
    if (!rc)
        rc = lin(v, c, f16, w1, b1, v->h, f16, v->z, M, 0, err);
    if (!rc)
        rc = op_elem(c, &(struct op_elem){.op = OP_GELU_ERF, .a = v->z, .y = v->z,
                                          .n = (uint64_t)M * v->MD}, err);
    if (!rc)
        rc = lin(v, c, f16, w2, b2, v->z, 0, y, M, 0, err);
    return rc;
}

/* The MLP in row chunks (the skeleton's plan: up holds ffn_rows rows). */
static int mlp(struct vis *v, struct vkr_cmd *c, int f16, const struct vis_layer *L, uint32_t N,
               struct folio_err *err)
{
    const uint64_t hb = f16 ? 2 : 4; /* h holds f16 GEMM inputs on the f16 path */
    int rc = 0;
    for (uint32_t r0 = 0; r0 < N && !rc; r0 += v->ffn_rows) {
        uint32_t m = N - r0 < v->ffn_rows ? N - r0 : v->ffn_rows;
        struct vkr_tensor hv = vkr_view(v->h, (uint64_t)r0 * v->D * hb, (uint64_t)m * v->D * hb);
        struct vkr_tensor xv = vkr_view(v->x, (uint64_t)r0 * v->D * 4, (uint64_t)m * v->D * 4);
        rc = lin(v, c, f16, &L->wu, &L->bu, hv, f16, v->up, m, 0, err);
        if (!rc) /* hidden_act gelu_pytorch_tanh */
            rc = op_elem(c, &(struct op_elem){.op = OP_GELU_TANH, .a = v->up, .y = v->up,
                                              .n = (uint64_t)m * v->F}, err);
        if (!rc)
            rc = lin(v, c, f16, &L->wd, &L->bd, v->up, 0, xv, m, 1, err);
    }
    return rc;
}

static int record(struct vis *v, struct vkr_cmd *c, uint32_t N, uint32_t blocks, int merge,
                  const struct vkr_tensor *fullr, struct folio_err *err)
{
    const uint32_t M = N / 4;
    const uint64_t ND = (uint64_t)N * v->D;
    int f16 = v->gemm16 && N >= 64;
    int rc = op_elem(c, &(struct op_elem){.op = OP_ADD, .a = v->x, .b = &v->pe, .y = v->x, .n = ND,
                                          .nb = ND}, err);
    for (uint32_t i = 0; i < blocks && !rc; i++) {
        const struct vis_layer *L = &v->L[i];
        rc = lnorm(v, c, f16, v->x, v->h, &L->ln1, &L->ln1b, N, v->D, err);
        struct vkr_tensor ot;
        int o16;
        if (!rc)
            rc = vis_attention(v, c, L, N, f16, 1, fullr, &ot, &o16, err);
        if (!rc)
            rc = lin(v, c, f16, &L->wo, &L->bo, ot, o16, v->x, N, 1, err);
        if (!rc)
            rc = lnorm(v, c, f16, v->x, v->h, &L->ln2, &L->ln2b, N, v->D, err);
        if (!rc)
            rc = mlp(v, c, f16, L, N, err);
        if (!rc && merge && L->ds >= 0) {
            const struct vis_ds *d = &v->ds[L->ds];
            rc = merger(v, c, f16, &d->nw, &d->nb, M, v->MD, &d->w1, &d->b1, &d->w2, &d->b2, M,
                        d->out, err);
        }
    }
    if (!rc && merge)
        rc = merger(v, c, f16, &v->post, &v->postb, N, v->D, &v->mm0, &v->mm0b, &v->mm2,
                    &v->mm2b, M, v->e, err);
    return rc;
}

const struct vis_family vis_family_qwen3vl = {
    .name = "qwen3vl", .scatter = 0, .check = check,
    .load = load, .complete = complete, .stage = stage, .record = record};
