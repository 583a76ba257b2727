/*
 * Qwen2-VL / Qwen2.5-VL, the vision tower's family table (tower_internal.h;
 * the skeleton is engine/model/vision.c, the data flow vision.h; which
 * tensor goes where is the tensor table of qwen2vl.c): patch 14 without
 * bias, blocks of norm -> Q/K/V with biases -> 2-D RoPE -> attention over
 * the block's window (2.5, docs/reference/qwen25vl.md §3.3) or the whole image
 * -> projection -> residual -> norm -> MLP -> residual, then the merger
 * (norm per patch, 4 patches concatenated, GELU MLP) and the scatter from
 * window order back to raster order.
 *  - Qwen2.5-VL: RMSNorm, SwiGLU MLP, windows with full layers every
 *    n_wa_pattern blocks;
 *  - Qwen2-VL: LayerNorm with biases, quick-GELU MLP, full attention.
 */
#include "engine/arch/qwen2vl/qwen2vl.h"
#include "engine/model/tower_internal.h"
#include "engine/quant/quant.h"

#include <stdio.h>
#include <string.h>

static int check(const struct vis *v, struct folio_err *err)
{
    const struct gguf_vision_hparams *h = &v->hp;
    if (h->patch_size != 14 || h->spatial_merge != 2)
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "vision: patch %u / merge %u (folio runs "
                             "14 / 2)", h->patch_size, h->spatial_merge);
    if (!ops_attention_head_supported(v->Dh))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "vision: head size %u has no attention "
                             "kernel (even sizes up to 256 are supported)", v->Dh);
    return 0;
}

/* Qwen2.5-VL (RMSNorm, SwiGLU, windows) rather than Qwen2-VL. */
static int is25(const struct vis *v)
{
    return v->fam == &vis_family_qwen25vl;
}

/* Every tensor of these towers goes into the slot its table entry names
 * (qwen2vl.c: legacy files' swapped up/down names are entries too). */
static int load(struct vis *v, const struct gguf_load_item *it, struct vis_w *w,
                struct vkr_arena *staging, int to_f16, struct folio_err *err)
{
    const struct gguf_tensor_info *t = it->t;
    if (!w)
        return folio_err_set(err, FOLIO_EMODEL, "vision: unexpected tensor %s", t->name);
    return vis_upload(v, t, 0, (uint32_t)(t->n_elems / t->ne[0]), w, staging, to_f16, err);
}

static int complete(const struct vis *v, struct folio_err *err)
{
    for (uint32_t i = 0; i < v->hp.n_layer; i++) {
        const struct vis_layer *L = &v->L[i];
        if (!L->ln1.set || !L->wq.set || !L->wk.set || !L->wv.set || !L->wo.set || !L->ln2.set ||
            !L->wu.set || !L->wd.set || (is25(v) && !L->wg.set) || (!is25(v) && !L->ln1b.set))
            return folio_err_set(err, FOLIO_EMODEL, "vision: block %u is incomplete", i);
    }
    if (!v->post.set || !v->mm0.set || !v->mm2.set || !v->mm0b.set || !v->mm2b.set)
        return folio_err_set(err, FOLIO_EMODEL, "vision: merger tensors missing");
    return 0;
}

/* --------------------------------------------------------------- forward */

static int norm(struct vis *v, struct vkr_cmd *c, struct vkr_tensor x, struct vkr_tensor y,
                const struct vis_w *w, const struct vis_w *b, uint32_t rows,
                struct folio_err *err)
{
    return op_norm(c, &(struct op_norm){.x = x, .y = y, .w = &w->t,
                                        .b = !is25(v) && b->set ? &b->t : NULL, .rows = rows,
                                        .n = v->D, .eps = v->hp.eps, .layer = is25(v) ? 0 : 1},
                                        err);
}

static int norm16(struct vis *v, struct vkr_cmd *c, struct vkr_tensor x, struct vkr_tensor y,
                  const struct vis_w *w, const struct vis_w *b, uint32_t rows,
                  struct folio_err *err)
{
    return op_norm(c, &(struct op_norm){.x = x, .y = y, .w = &w->t,
                                        .b = !is25(v) && b->set ? &b->t : NULL, .rows = rows,
                                        .n = v->D, .eps = v->hp.eps, .layer = is25(v) ? 0 : 1,
                                        .ytype = QUANT_F16}, err);
}

/* The f16 data path of record(): norms write f16 GEMM inputs, residual
 * sums and MLP activations ride in the GEMM epilogues (no elementwise
 * passes), the residual stream x stays f32 (docs/reference/qwen25vl.md §7.14: real
 * towers outgrow f16 there). Called after the patch embedding. */
static int record16(struct vis *v, struct vkr_cmd *c, uint32_t N, uint32_t blocks, int merger,
                    const struct vkr_tensor *fullr, struct folio_err *err)
{
    const struct gguf_vision_hparams *h = &v->hp;
    uint32_t M = N / (h->spatial_merge * h->spatial_merge);
    const int F16 = QUANT_F16, F32 = QUANT_F32;
    int rc = 0;
    for (uint32_t i = 0; i < blocks && !rc; i++) {
        const struct vis_layer *L = &v->L[i];
        int full = !is25(v) || (i + 1) % h->n_wa_pattern == 0;
        rc = norm16(v, c, v->x, v->h, &L->ln1, &L->ln1b, N, err);
        struct vkr_tensor ot;
        int o16;
        if (!rc)
            rc = vis_attention(v, c, L, N, 1, full, fullr, &ot, &o16, err);
        if (!rc)
            rc = vis_mm16(&L->wo, &L->bo, ot, o16 ? F16 : F32, v->x, F32, N, &v->x,
                          OP_MM_ACT_NONE, NULL, c, err);
        if (!rc)
            rc = norm16(v, c, v->x, v->h, &L->ln2, &L->ln2b, N, err);
        for (uint32_t r0 = 0; r0 < N && !rc; r0 += v->ffn_rows) {
            uint32_t m = N - r0 < v->ffn_rows ? N - r0 : v->ffn_rows;
            struct vkr_tensor hv = vkr_view(v->h, (uint64_t)r0 * v->D * 2, (uint64_t)m * v->D * 2);
            struct vkr_tensor xv = vkr_view(v->x, (uint64_t)r0 * v->D * 4, (uint64_t)m * v->D * 4);
            if (is25(v)) {
                rc = vis_mm16(&L->wg, &L->bg, hv, F16, v->gate, F32, m, NULL, OP_MM_ACT_NONE, NULL,
                              c, err);
                if (!rc)
                    rc = vis_mm16(&L->wu, &L->bu, hv, F16, v->up, F16, m, NULL, OP_MM_ACT_SWIGLU,
                                  &v->gate, c, err);
            } else {
                rc = vis_mm16(&L->wu, &L->bu, hv, F16, v->up, F16, m, NULL, OP_MM_ACT_QUICK_GELU,
                              NULL, c, err);
            }
            if (!rc)
                rc = vis_mm16(&L->wd, &L->bd, v->up, F16, xv, F32, m, &xv, OP_MM_ACT_NONE, NULL, c,
                              err);
        }
    }
    if (!merger || rc)
        return rc;
    rc = norm16(v, c, v->x, v->h, &v->post, &v->postb, N, err);
    if (!rc)
        rc = vis_mm16(&v->mm0, &v->mm0b, v->h, F16, v->z, F16, M, NULL, OP_MM_ACT_GELU_ERF, NULL, c,
                      err);
    if (!rc)
        rc = vis_mm16(&v->mm2, &v->mm2b, v->z, F16, v->e, F32, M, NULL, OP_MM_ACT_NONE, NULL, c,
                      err);
    if (!rc)
        rc = op_scatter(c, v->e, v->sidx, M, v->O, v->out, M, err);
    return rc;
}

static int record(struct vis *v, struct vkr_cmd *c, uint32_t N, uint32_t blocks, int merger,
                  const struct vkr_tensor *fullr, struct folio_err *err)
{
    const struct gguf_vision_hparams *h = &v->hp;
    uint32_t M = N / (h->spatial_merge * h->spatial_merge);
    uint64_t ND = (uint64_t)N * v->D;
    int rc = 0;
    if (v->gemm16 && N >= 64)
        return record16(v, c, N, blocks, merger, fullr, err);
    for (uint32_t i = 0; i < blocks && !rc; i++) {
        const struct vis_layer *L = &v->L[i];
        int full = !is25(v) || (i + 1) % h->n_wa_pattern == 0;
        rc = norm(v, c, v->x, v->h, &L->ln1, &L->ln1b, N, err);
        struct vkr_tensor ot;
        int o16;
        if (!rc)
            rc = vis_attention(v, c, L, N, 0, full, fullr, &ot, &o16, err);
        if (!rc)
            rc = vis_mm(v, c, &L->wo, &L->bo, ot, v->t, N, err);
        if (!rc)
            rc = op_elem(c, &(struct op_elem){.op = OP_ADD, .a = v->x, .b = &v->t, .y = v->x,
                                              .n = ND, .nb = ND}, err);
        if (!rc)
            rc = norm(v, c, v->x, v->h, &L->ln2, &L->ln2b, N, err);
        /* the MLP in row chunks (plan(): gate/up hold ffn_rows rows) */
        for (uint32_t r0 = 0; r0 < N && !rc; r0 += v->ffn_rows) {
            uint32_t m = N - r0 < v->ffn_rows ? N - r0 : v->ffn_rows;
            uint64_t mf = (uint64_t)m * v->F, md = (uint64_t)m * v->D, o4 = (uint64_t)r0 * v->D * 4;
            struct vkr_tensor hv = vkr_view(v->h, o4, md * 4), xv = vkr_view(v->x, o4, md * 4);
            struct vkr_tensor tv = vkr_view(v->t, o4, md * 4);
            if (is25(v)) {
                rc = vis_mm(v, c, &L->wg, &L->bg, hv, v->gate, m, err);
                if (!rc)
                    rc = vis_mm(v, c, &L->wu, &L->bu, hv, v->up, m, err);
                if (!rc)
                    rc = op_elem(c, &(struct op_elem){.op = OP_SWIGLU, .a = v->gate, .b = &v->up,
                                                      .y = v->gate, .n = mf, .nb = mf}, err);
                if (!rc)
                    rc = vis_mm(v, c, &L->wd, &L->bd, v->gate, tv, m, err);
            } else {
                rc = vis_mm(v, c, &L->wu, &L->bu, hv, v->up, m, err);
                if (!rc)
                    rc = op_elem(c, &(struct op_elem){.op = OP_QUICK_GELU, .a = v->up, .y = v->up,
                                                      .n = mf}, err);
                if (!rc)
                    rc = vis_mm(v, c, &L->wd, &L->bd, v->up, tv, m, err);
            }
            if (!rc)
                rc = op_elem(c, &(struct op_elem){.op = OP_ADD, .a = xv, .b = &tv, .y = xv, .n = md,
                                                  .nb = md}, err);
        }
    }
    if (!merger || rc)
        return rc;
    /* merger: norm per patch; the 4 rows of a group are consecutive, so
     * the normalised [N, D] tensor read as [M, 4D] is the concatenation */
    rc = norm(v, c, v->x, v->h, &v->post, &v->postb, N, err);
    if (!rc)
        rc = vis_mm(v, c, &v->mm0, &v->mm0b, v->h, v->z, M, err);
    if (!rc)
        rc = op_elem(c, &(struct op_elem){.op = OP_GELU_ERF, .a = v->z, .y = v->z,
                                          .n = (uint64_t)M * v->MD}, err);
    if (!rc)
        rc = vis_mm(v, c, &v->mm2, &v->mm2b, v->z, v->e, M, err);
    if (!rc)
        rc = op_scatter(c, v->e, v->sidx, M, v->O, v->out, M, err);
    return rc;
}


const struct vis_family vis_family_qwen25vl = {
    .name = "qwen2.5vl", .scatter = 1, .check = check, .load = load, .complete = complete,
    .record = record};
const struct vis_family vis_family_qwen2vl = {
    .name = "qwen2vl", .scatter = 1, .check = check, .load = load, .complete = complete,
    .record = record};
