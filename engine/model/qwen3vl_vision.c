/*
 * Qwen3-VL, vision side: the tower of qwen3vl.h (q3vis_*), reached through
 * vision.c's public vis_* functions (one marked hook each).
 *
 * As vision.c: weights in their own arena, every activation planned at open
 * for cfg.max_patches, one command buffer and one submit per image. What
 * differs from Qwen2-VL's tower:
 *  - patch 16 (768 columns per still-image row), the Conv3D's bias;
 *  - the position table is interpolated to the image's grid on the host
 *    (O(patches x width), the last grid cached) and added after the patch
 *    embedding;
 *  - fused QKV in the file, split into three matrices at load (row slices
 *    of the same bytes), so the per-matrix matmul/RoPE path is shared in
 *    shape with vision.c;
 *  - no windows: every block attends over the whole image;
 *  - DeepStack mergers after flagged blocks, whose outputs are returned as
 *    extra columns of each merged row (qwen3vl.h).
 * The f16 data path (weights expanded at load, tensor-core GEMM) is taken
 * as in vision.c when every matrix is f16 and the GEMM exists; the residual
 * stream, LayerNorm statistics and activations stay f32.
 */
#include "engine/model/qwen3vl.h"
#include "engine/model/quant.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_PATCHES 6400u

struct q3w {
    struct vkr_tensor t;
    int type;
    uint32_t n, k;
    int set;
};

struct q3layer {
    struct q3w ln1, ln1b, wq, bq, wk, bk, wv, bv, wo, bo, ln2, ln2b, wu, bu, wd, bd;
    int ds; /* DeepStack merger index after this block, -1 none */
};

struct q3ds {
    struct q3w nw, nb, w1, b1, w2, b2;
    struct vkr_tensor out; /* M x O */
};

struct q3vis {
    struct vkr *vk;
    const struct gguf_model *m;
    struct gguf_vision_hparams hp;
    struct vis_config cfg;
    uint32_t D, H, Dh, F, MD, O, P, PC, nds;
    int gemm16;
    struct vkr_arena *wa, *aa;
    struct q3layer *L;
    struct q3ds ds[GGUF_MAX_DEEPSTACK];
    struct q3w patch, patchb, post, postb, mm0, mm0b, mm2, mm2b;
    float *table; /* n_pos x D */
    uint32_t nmax, mmax;
    struct vkr_tensor in, x, h, q, k, v, o, t, up, z, pe, pos, e;
    float *inbuf, *pebuf, *obuf;
    int32_t *ibuf;
    uint32_t pe_gh, pe_gw; /* grid of pebuf (0: none) */
    double last_ms;
};

int q3vis_pipeline_keys(const struct vkr *vk, const struct gguf_model *m,
                        struct vkr_pipeline_key *out, int max)
{
    struct vkr_pipeline_key all[256];
    int n = 0;
    int types[8] = {QUANT_F32}; /* the folded patch kernel is F32 */
    int nt = gguf_model_matrix_types(m, types, 1, 8);
    for (int j = 0; j < nt; j++)
        n += ops_matmul_keys(vk, types[j], &all[n]);
    all[n++] = ops_key("norm", 1, 1, 0);
    if (ops_gemm_available(vk))
        all[n++] = ops_key("norm", 2, 1, 1);
    all[n++] = ops_key("rope", 1, OP_ROPE_VISION, 0);
    n += ops_attention_keys(vk, m->vision.head_dim, 0, &all[n]);
    all[n++] = ops_key("attn_lse", 0, 0, 0); /* attention past one binding */
    all[n++] = ops_key("attn_merge", 0, 0, 0);
    all[n++] = ops_key("elem", 1, OP_ADD, 0);
    all[n++] = ops_key("elem", 1, OP_GELU_TANH, 0);
    all[n++] = ops_key("elem", 1, OP_GELU_ERF, 0);
    n = ops_keys_unique(all, n);
    int k = n < max ? n : max;
    if (out)
        memcpy(out, all, (size_t)k * sizeof *out);
    return k;
}

uint32_t q3vis_max_patches(const struct q3vis *v) { return v->nmax; }
uint32_t q3vis_out_dim(const struct q3vis *v) { return v->O * (1 + v->nds); }
double q3vis_last_submit_ms(const struct q3vis *v) { return v->last_ms; }

void q3vis_memory(const struct q3vis *v, uint64_t *weights, uint64_t *activations)
{
    if (weights)
        *weights = v->wa ? vkr_arena_used(v->wa) : 0;
    if (activations)
        *activations = v->aa ? vkr_arena_capacity(v->aa) : 0;
}

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

static int upload_rows(struct q3vis *v, const struct gguf_tensor_info *t, uint64_t row0,
                       uint32_t rows, struct q3w *w, struct vkr_arena *staging, int to_f16,
                       struct folio_err *err)
{
    w->k = (uint32_t)t->ne[0];
    w->n = rows;
    uint64_t rb = quant_row_bytes(t->type, w->k);
    int rc = ops_upload_weight(v->vk, v->wa, t->n_dims == 2 ? staging : NULL,
                               (const uint8_t *)t->data + row0 * rb, t->type, w->n, w->k,
                               t->n_dims == 2 ? to_f16 : 0, &w->t, &w->type, err);
    if (rc) {
        folio_err_detail(err, "while uploading tensor %s (%" PRIu64 " bytes)", t->name, t->n_bytes);
        return rc;
    }
    w->set = 1;
    return 0;
}

/* Bias slices: 1-D tensors are rows of one element per value. */
static int upload_vec(struct q3vis *v, const struct gguf_tensor_info *t, uint64_t off,
                      uint32_t len, struct q3w *w, struct folio_err *err)
{
    w->k = len;
    w->n = 1;
    w->type = QUANT_F32;
    int rc = vkr_arena_upload(v->wa, (const float *)t->data + off, (uint64_t)len * 4, &w->t, err);
    w->set = !rc;
    return rc;
}

static int upload_patch(struct q3vis *v, const struct gguf_tensor_info *k0,
                        const struct gguf_tensor_info *k1, struct folio_err *err)
{
    uint64_t rowb = quant_row_bytes(k0->type, v->PC);
    if (!rowb || k1->type != k0->type || k0->n_elems != (uint64_t)v->D * v->PC)
        return folio_err_set(err, FOLIO_EMODEL, "vision: patch kernels are not two [%u,%u,3,%u] "
                             "tensors of one type", v->P, v->P, v->D);
    float *w = malloc((size_t)v->D * v->PC * sizeof *w), *r = malloc(v->PC * sizeof *r);
    int rc = w && r ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    /* K0 + K1: a still image is two identical frames */
    for (uint32_t o = 0; !rc && o < v->D; o++) {
        float *dst = w + (size_t)o * v->PC;
        if (quant_dequantize_row(k0->type, (const uint8_t *)k0->data + o * rowb, dst, v->PC) ||
            quant_dequantize_row(k1->type, (const uint8_t *)k1->data + o * rowb, r, v->PC))
            rc = folio_err_set(err, FOLIO_EMODEL, "vision: patch kernel type %d", k0->type);
        for (uint32_t j = 0; !rc && j < v->PC; j++)
            dst[j] += r[j];
    }
    if (!rc)
        rc = vkr_arena_upload(v->wa, w, (uint64_t)v->D * v->PC * 4, &v->patch.t, err);
    v->patch.type = QUANT_F32;
    v->patch.n = v->D;
    v->patch.k = v->PC;
    v->patch.set = !rc;
    free(w);
    free(r);
    return rc;
}

static int load_table(struct q3vis *v, const struct gguf_tensor_info *t, struct folio_err *err)
{
    uint64_t rb = quant_row_bytes(t->type, v->D);
    v->table = malloc((size_t)v->hp.n_pos * v->D * sizeof *v->table);
    if (!v->table)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t i = 0; i < v->hp.n_pos; i++)
        if (quant_dequantize_row(t->type, (const uint8_t *)t->data + i * rb,
                                 v->table + (size_t)i * v->D, v->D))
            return folio_err_set(err, FOLIO_EMODEL, "vision: position table type %d", t->type);
    return 0;
}

/* One tensor of the file to its slot(s). */
static int load_tensor(struct q3vis *v, const struct gguf_tensor_info *t, struct vkr_arena *st,
                       int f16, const struct gguf_tensor_info **k0,
                       const struct gguf_tensor_info **k1, struct folio_err *err)
{
    const char *nm = t->name;
    const uint32_t D = v->D;
    unsigned li;
    char rest[64];
    struct q3w *w = NULL;
    if (!strcmp(nm, "v.patch_embd.weight")) {
        *k0 = t;
        return 0;
    }
    if (!strcmp(nm, "v.patch_embd.weight.1")) {
        *k1 = t;
        return 0;
    }
    if (!strcmp(nm, "v.position_embd.weight"))
        return load_table(v, t, err);
    if (!strcmp(nm, "v.patch_embd.bias"))
        w = &v->patchb;
    else if (!strcmp(nm, "v.post_ln.weight"))
        w = &v->post;
    else if (!strcmp(nm, "v.post_ln.bias"))
        w = &v->postb;
    else if (!strcmp(nm, "mm.0.weight"))
        w = &v->mm0;
    else if (!strcmp(nm, "mm.0.bias"))
        w = &v->mm0b;
    else if (!strcmp(nm, "mm.2.weight"))
        w = &v->mm2;
    else if (!strcmp(nm, "mm.2.bias"))
        w = &v->mm2b;
    else if (sscanf(nm, "v.deepstack.%u.%63s", &li, rest) == 2 && li < v->hp.n_layer &&
             v->L[li].ds >= 0) {
        struct q3ds *d = &v->ds[v->L[li].ds];
        static const char *const dn[6] = {"norm.weight", "norm.bias", "fc1.weight",
                                          "fc1.bias", "fc2.weight", "fc2.bias"};
        struct q3w *ds[6] = {&d->nw, &d->nb, &d->w1, &d->b1, &d->w2, &d->b2};
        for (int i = 0; i < 6; i++)
            if (!strcmp(rest, dn[i]))
                w = ds[i];
    } else if (sscanf(nm, "v.blk.%u.%63s", &li, rest) == 2 && li < v->hp.n_layer) {
        struct q3layer *L = &v->L[li];
        if (!strcmp(rest, "attn_qkv.weight")) {
            /* Q, K, V: consecutive row blocks of the fused matrix */
            int rc = upload_rows(v, t, 0, D, &L->wq, st, f16, err);
            if (!rc)
                rc = upload_rows(v, t, D, D, &L->wk, st, f16, err);
            if (!rc)
                rc = upload_rows(v, t, 2 * (uint64_t)D, D, &L->wv, st, f16, err);
            return rc;
        }
        if (!strcmp(rest, "attn_qkv.bias")) {
            int rc = upload_vec(v, t, 0, D, &L->bq, err);
            if (!rc)
                rc = upload_vec(v, t, D, D, &L->bk, err);
            if (!rc)
                rc = upload_vec(v, t, 2 * (uint64_t)D, D, &L->bv, err);
            return rc;
        }
        static const char *const ln[10] = {"ln1.weight", "ln1.bias", "attn_out.weight",
                                           "attn_out.bias", "ln2.weight", "ln2.bias",
                                           "ffn_up.weight", "ffn_up.bias", "ffn_down.weight",
                                           "ffn_down.bias"};
        struct q3w *ls[10] = {&L->ln1, &L->ln1b, &L->wo, &L->bo, &L->ln2, &L->ln2b,
                              &L->wu, &L->bu, &L->wd, &L->bd};
        for (int i = 0; i < 10; i++)
            if (!strcmp(rest, ln[i]))
                w = ls[i];
    }
    if (!w)
        return folio_err_set(err, FOLIO_EMODEL, "vision: unexpected tensor %s", nm);
    if (t->n_dims == 1)
        return upload_vec(v, t, 0, (uint32_t)t->ne[0], w, err);
    return upload_rows(v, t, 0, (uint32_t)(t->n_elems / t->ne[0]), w, st, f16, err);
}

static int plan(struct q3vis *v, struct folio_err *err)
{
    const struct vkr_limits *lim = vkr_limits(v->vk);
    uint64_t N = v->nmax, M = v->mmax, D = v->D, F = v->F, O = v->O, MD = v->MD;
    if (N * D * 4 > lim->max_range)
        return folio_err_set(err, FOLIO_ELIMIT, "vision: %" PRIu64 " patches x %" PRIu64
                             " floats exceed one binding; plan fewer patches", N, D);
    uint64_t sizes[13 + GGUF_MAX_DEEPSTACK];
    struct vkr_tensor *dst[13 + GGUF_MAX_DEEPSTACK];
    int n = 0;
#define PL(tensor, bytes) (dst[n] = &v->tensor, sizes[n++] = (bytes))
    PL(in, N * v->PC * 4);
    PL(x, N * D * 4);
    PL(h, N * D * 4);
    PL(q, N * D * 4);
    PL(k, N * D * 4);
    PL(v, N * D * 4);
    PL(o, N * D * 4);
    PL(t, N * D * 4);
    PL(up, N * F * 4);
    PL(z, M * MD * 4);
    PL(pe, N * D * 4);
    PL(pos, N * 8);
    PL(e, M * O * 4);
    for (uint32_t j = 0; j < v->nds; j++)
        PL(ds[j].out, M * O * 4);
#undef PL
    int rc = vkr_arena_plan(v->aa, sizes, n, err);
    if (rc)
        return rc;
    vkr_arena_reset(v->aa);
    for (int i = 0; i < n && !rc; i++)
        rc = vkr_arena_alloc(v->aa, sizes[i], dst[i], err);
    if (rc)
        return rc;
    v->inbuf = malloc((size_t)N * v->PC * sizeof *v->inbuf);
    v->pebuf = malloc((size_t)N * D * sizeof *v->pebuf);
    v->obuf = malloc((size_t)M * O * sizeof *v->obuf);
    v->ibuf = malloc((size_t)N * 2 * sizeof *v->ibuf);
    if (!v->inbuf || !v->pebuf || !v->obuf || !v->ibuf)
        return folio_err_set(err, FOLIO_ENOMEM, "vision: out of host memory for %" PRIu64
                             " patches", N);
    return 0;
}

static int complete(const struct q3vis *v, struct folio_err *err)
{
    for (uint32_t i = 0; i < v->hp.n_layer; i++) {
        const struct q3layer *L = &v->L[i];
        if (!L->ln1.set || !L->ln1b.set || !L->wq.set || !L->bq.set || !L->wo.set ||
            !L->bo.set || !L->ln2.set || !L->ln2b.set || !L->wu.set || !L->bu.set ||
            !L->wd.set || !L->bd.set)
            return folio_err_set(err, FOLIO_EMODEL, "vision: block %u is incomplete", i);
    }
    for (uint32_t j = 0; j < v->nds; j++) {
        const struct q3ds *d = &v->ds[j];
        if (!d->nw.set || !d->nb.set || !d->w1.set || !d->b1.set || !d->w2.set || !d->b2.set)
            return folio_err_set(err, FOLIO_EMODEL, "vision: DeepStack merger of block %u is "
                                 "incomplete", v->hp.deepstack_layers[j]);
    }
    if (!v->patch.set || !v->patchb.set || !v->table || !v->post.set || !v->postb.set ||
        !v->mm0.set || !v->mm0b.set || !v->mm2.set || !v->mm2b.set)
        return folio_err_set(err, FOLIO_EMODEL, "vision: patch embedding, position table or "
                             "merger tensors missing");
    return 0;
}

static int all_f16(const struct q3vis *v)
{
    int ok = v->mm0.type == QUANT_F16 && v->mm2.type == QUANT_F16 && v->D % 2 == 0;
    for (uint32_t i = 0; ok && i < v->hp.n_layer; i++) {
        const struct q3layer *L = &v->L[i];
        ok = L->wq.type == QUANT_F16 && L->wk.type == QUANT_F16 && L->wv.type == QUANT_F16 &&
             L->wo.type == QUANT_F16 && L->wu.type == QUANT_F16 && L->wd.type == QUANT_F16;
    }
    for (uint32_t j = 0; ok && j < v->nds; j++)
        ok = v->ds[j].w1.type == QUANT_F16 && v->ds[j].w2.type == QUANT_F16;
    return ok;
}

int q3vis_open(struct vkr *vk, const struct gguf_model *m, const struct vis_config *cfg,
               struct q3vis **out, struct folio_err *err)
{
    *out = NULL;
    struct q3vis *v = calloc(1, sizeof *v);
    if (!v)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    v->vk = vk;
    v->m = m;
    v->hp = m->vision;
    if (cfg)
        v->cfg = *cfg;
    const struct gguf_vision_hparams *h = &v->hp;
    uint32_t S = h->spatial_merge;
    v->nmax = v->cfg.max_patches ? v->cfg.max_patches : DEFAULT_MAX_PATCHES;
    v->nmax = v->nmax / (S * S) * (S * S);
    v->mmax = v->nmax / (S * S);
    v->D = h->n_embd;
    v->H = h->n_head;
    v->Dh = h->head_dim;
    v->F = h->n_ff;
    v->MD = h->merger_dim;
    v->O = h->proj_dim;
    v->P = h->patch_size;
    v->PC = 3 * v->P * v->P;
    v->nds = h->n_deepstack;
    int rc = 0;
    if (S != 2)
        rc = folio_err_set(err, FOLIO_EUNSUPPORTED, "vision: merge %u (Qwen3-VL merges 2x2)", S);
    else if (!ops_attention_head_supported(v->Dh) || v->Dh % 4)
        rc = folio_err_set(err, FOLIO_EUNSUPPORTED, "vision: head size %u has no attention "
                           "kernel or 2-D RoPE (multiples of 4 up to 256)", v->Dh);
    else if (v->mmax == 0)
        rc = folio_err_set(err, FOLIO_EINVAL, "vision: max_patches %u is below one merged "
                           "token", v->cfg.max_patches);
    v->L = calloc(h->n_layer, sizeof *v->L);
    if (!rc && !v->L)
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t i = 0; !rc && i < h->n_layer; i++)
        v->L[i].ds = -1;
    for (uint32_t j = 0; !rc && j < v->nds; j++)
        v->L[h->deepstack_layers[j]].ds = (int)j;
    if (!rc)
        rc = vkr_arena_create(vk, "vision-weights", VKR_ARENA_WEIGHTS, &v->wa, err);
    if (!rc)
        rc = vkr_arena_create(vk, "vision-activations", VKR_ARENA_ACTIVATIONS, &v->aa, err);
    char why[200] = "";
    struct vkr_arena *staging = NULL;
    int to_f16 = 0;
    enum ops_gpu_weights gw = v->cfg.f32_matmul ? OPS_WEIGHTS_NATIVE
                                                : (enum ops_gpu_weights)v->cfg.gpu_weights;
    if (!rc && (to_f16 = ops_weights_f16(vk, gw, gguf_model_matrix_f16_bytes(m), why,
                                         sizeof why)))
        rc = vkr_arena_create(vk, "vision-staging", VKR_ARENA_WEIGHTS, &staging, err);
    const struct gguf_tensor_info *k0 = NULL, *k1 = NULL;
    for (uint64_t i = 0; !rc && i < m->n_items; i++)
        rc = load_tensor(v, m->items[i].t, staging, to_f16, &k0, &k1, err);
    vkr_arena_destroy(staging);
    if (!rc && (!k0 || !k1))
        rc = folio_err_set(err, FOLIO_EMODEL, "vision: no patch embedding (v.patch_embd.weight "
                           "and .weight.1)");
    if (!rc)
        rc = upload_patch(v, k0, k1, err);
    if (!rc)
        rc = complete(v, err);
    v->gemm16 = !rc && ops_gemm_available(vk) && !v->cfg.f32_matmul && all_f16(v);
    if (!rc)
        rc = plan(v, err);
    if (rc) {
        q3vis_close(v);
        return rc;
    }
    folio_log(FOLIO_LOG_INFO, "vis_open",
              "family=qwen3vl blocks=%u embd=%u heads=%u ff=%u out=%u deepstack=%u patch=%u "
              "pos_table=%ux%u max_patches=%u weights_bytes=%" PRIu64 " act_bytes=%" PRIu64
              " f16_path=%d gpu_weights=\"%s\"",
              h->n_layer, v->D, v->H, v->F, v->O, v->nds, v->P, h->pos_side, h->pos_side, v->nmax,
              vkr_arena_used(v->wa), vkr_arena_capacity(v->aa), v->gemm16, why);
    *out = v;
    return 0;
}

void q3vis_close(struct q3vis *v)
{
    if (!v)
        return;
    vkr_arena_destroy(v->aa);
    vkr_arena_destroy(v->wa);
    free(v->L);
    free(v->table);
    free(v->inbuf);
    free(v->pebuf);
    free(v->obuf);
    free(v->ibuf);
    free(v);
}

/* --------------------------------------------------------------- forward */

/* y = x W^T + b, and y += that when acc (the residual). f16 path: the GEMM
 * with x in f16 (xh) or f32 and the sum in its epilogue; else the op
 * library's pick, through tmp for the sum. */
static int lin(struct q3vis *v, struct vkr_cmd *c, int f16, const struct q3w *w,
               const struct q3w *b, struct vkr_tensor x, int xh, struct vkr_tensor y, uint32_t m,
               int acc, struct folio_err *err)
{
    if (f16) {
        struct op_matmul a = {.w = w->t, .wtype = w->type, .n = w->n, .k = w->k, .x = x, .m = m,
                              .y = y, .bias = &b->t, .kernel = OP_MM_GEMM,
                              .xtype = xh ? QUANT_F16 : QUANT_F32, .ytype = QUANT_F32,
                              .res = acc ? &y : NULL};
        return op_matmul(c, &a, err);
    }
    enum op_mm_kernel k = v->cfg.f32_matmul && m > 8 ? OP_MM_TILED : OP_MM_AUTO;
    struct op_matmul a = {.w = w->t, .wtype = w->type, .n = w->n, .k = w->k, .x = x, .m = m,
                          .y = acc ? v->t : y, .bias = &b->t, .kernel = k};
    int rc = op_matmul(c, &a, err);
    if (!rc && acc)
        rc = op_elem(c, OP_ADD, y, &v->t, y, (uint64_t)m * w->n, (uint64_t)m * w->n, 1.0f, 0.0f,
                     err);
    return rc;
}

/* LayerNorm of rows x n (f16 output on the f16 path: the GEMM's input). */
static int lnorm(struct q3vis *v, struct vkr_cmd *c, int f16, struct vkr_tensor x,
                 struct vkr_tensor y, const struct q3w *w, const struct q3w *b, uint32_t rows,
                 uint32_t n, struct folio_err *err)
{
    return op_norm_to(c, 1, x, y, f16 ? QUANT_F16 : QUANT_F32, &w->t, &b->t, rows, n, v->hp.eps,
                      err);
}

/* A merger: [rows x n] normalised, GELU(erf) MLP to y (M x O). The final
 * merger normalises each patch (n = D, rows = N), DeepStack's the 4
 * concatenated rows (n = MD, rows = M); both then read h as M x MD. */
static int merger(struct q3vis *v, struct vkr_cmd *c, int f16, const struct q3w *nw,
                  const struct q3w *nb, uint32_t rows, uint32_t n, const struct q3w *w1,
                  const struct q3w *b1, const struct q3w *w2, const struct q3w *b2, uint32_t M,
                  struct vkr_tensor y, struct folio_err *err)
{
    int rc = lnorm(v, c, f16, v->x, v->h, nw, nb, rows, n, err);
    if (!rc)
        rc = lin(v, c, f16, w1, b1, v->h, f16, v->z, M, 0, err);
    if (!rc)
        rc = op_elem(c, OP_GELU_ERF, v->z, NULL, v->z, (uint64_t)M * v->MD, 0, 1.0f, 0.0f, err);
    if (!rc)
        rc = lin(v, c, f16, w2, b2, v->z, 0, y, M, 0, err);
    return rc;
}

static int record(struct q3vis *v, struct vkr_cmd *c, uint32_t N, uint32_t blocks, int merge,
                  struct folio_err *err)
{
    const uint32_t M = N / 4;
    const uint64_t ND = (uint64_t)N * v->D, NF = (uint64_t)N * v->F;
    int f16 = v->gemm16 && N >= 64;
    struct op_matmul pa = {.w = v->patch.t, .wtype = QUANT_F32, .n = v->D, .k = v->PC,
                           .x = v->in, .m = N, .y = v->x, .bias = &v->patchb.t,
                           .kernel = v->cfg.f32_matmul && N > 8 ? OP_MM_TILED : OP_MM_AUTO};
    int rc = op_matmul(c, &pa, err);
    if (!rc)
        rc = op_elem(c, OP_ADD, v->x, &v->pe, v->x, ND, ND, 1.0f, 0.0f, err);
    for (uint32_t i = 0; i < blocks && !rc; i++) {
        const struct q3layer *L = &v->L[i];
        rc = lnorm(v, c, f16, v->x, v->h, &L->ln1, &L->ln1b, N, v->D, err);
        if (!rc)
            rc = lin(v, c, f16, &L->wq, &L->bq, v->h, f16, v->q, N, 0, err);
        if (!rc)
            rc = lin(v, c, f16, &L->wk, &L->bk, v->h, f16, v->k, N, 0, err);
        if (!rc)
            rc = lin(v, c, f16, &L->wv, &L->bv, v->h, f16, v->v, N, 0, err);
        struct op_rope rq = {.x = v->q, .y = v->q, .pos = v->pos, .t = N, .h = v->H, .d = v->Dh,
                             .mode = OP_ROPE_VISION, .base = 10000.0f};
        struct op_rope rk = rq;
        rk.x = rk.y = v->k;
        if (!rc)
            rc = op_rope(c, &rq, err);
        if (!rc)
            rc = op_rope(c, &rk, err);
        struct op_attention at = {.q = v->q, .k = v->k, .v = v->v, .o = v->o, .tq = N, .tk = N,
                                  .hq = v->H, .hkv = v->H, .d = v->Dh,
                                  .scale = 1.0f / sqrtf((float)v->Dh)};
        if (!rc)
            rc = op_attention(c, &at, err);
        if (!rc)
            rc = lin(v, c, f16, &L->wo, &L->bo, v->o, 0, v->x, N, 1, err);
        if (!rc)
            rc = lnorm(v, c, f16, v->x, v->h, &L->ln2, &L->ln2b, N, v->D, err);
        if (!rc)
            rc = lin(v, c, f16, &L->wu, &L->bu, v->h, f16, v->up, N, 0, err);
        if (!rc) /* hidden_act gelu_pytorch_tanh */
            rc = op_elem(c, OP_GELU_TANH, v->up, NULL, v->up, NF, 0, 1.0f, 0.0f, err);
        if (!rc)
            rc = lin(v, c, f16, &L->wd, &L->bd, v->up, 0, v->x, N, 1, err);
        if (!rc && merge && L->ds >= 0) {
            const struct q3ds *d = &v->ds[L->ds];
            rc = merger(v, c, f16, &d->nw, &d->nb, M, v->MD, &d->w1, &d->b1, &d->w2, &d->b2, M,
                        d->out, err);
        }
    }
    if (!rc && merge)
        rc = merger(v, c, f16, &v->post, &v->postb, N, v->D, &v->mm0, &v->mm0b, &v->mm2,
                    &v->mm2b, M, v->e, err);
    return rc;
}

/* Host side of one image: patch rows, RoPE positions, position embedding. */
static int stage(struct q3vis *v, const float *patches, uint32_t gh, uint32_t gw,
                 struct folio_err *err)
{
    if (!gh || !gw || gh % 2 || gw % 2)
        return folio_err_set(err, FOLIO_EINVAL, "vision: patch grid %ux%u is not a multiple of "
                             "the merge size 2", gh, gw);
    uint64_t N = (uint64_t)gh * gw;
    if (N > v->nmax)
        return folio_err_set(err, FOLIO_ELIMIT, "vision: image of %" PRIu64 " patches; the "
                             "engine was planned for at most %u", N, v->nmax);
    uint32_t cols = gw / 2;
    for (uint32_t k = 0; k < N; k++) {
        uint32_t g = k / 4, s = k % 4;
        v->ibuf[k * 2] = (int32_t)((g / cols) * 2 + s / 2);
        v->ibuf[k * 2 + 1] = (int32_t)((g % cols) * 2 + s % 2);
    }
    if (v->pe_gh != gh || v->pe_gw != gw) {
        q3_pos_interpolate(v->table, v->hp.pos_side, v->D, gh, gw, v->pebuf);
        v->pe_gh = gh;
        v->pe_gw = gw;
    }
    int rc = vkr_upload(v->vk, v->in, 0, patches, N * v->PC * 4, err);
    if (!rc)
        rc = vkr_upload(v->vk, v->pos, 0, v->ibuf, N * 8, err);
    if (!rc)
        rc = vkr_upload(v->vk, v->pe, 0, v->pebuf, N * v->D * 4, err);
    return rc;
}

static int run(struct q3vis *v, const float *patches, uint32_t gh, uint32_t gw, uint32_t blocks,
               int merge, float *dst, struct folio_err *err)
{
    if (vkr_dead(v->vk))
        return folio_err_set(err, FOLIO_EDEVICELOST, "vision: the device was lost; re-open the "
                             "engine");
    int rc = stage(v, patches, gh, gw, err);
    if (rc)
        return rc;
    uint32_t N = gh * gw, M = N / 4;
    struct vkr_cmd *c;
    rc = vkr_cmd_begin(v->vk, &c, err);
    if (rc)
        return rc;
    rc = record(v, c, N, blocks, merge, err);
    if (rc) {
        vkr_cmd_abort(c);
        return rc;
    }
    double t0 = folio_mono_ms();
    rc = vkr_cmd_submit(c, err);
    v->last_ms = folio_mono_ms() - t0;
    if (rc)
        return rc;
    if (!merge)
        return vkr_download(v->vk, v->x, 0, dst, (uint64_t)N * v->D * 4, err);
    /* rows [main | ds0 | ds1 ...] */
    const uint32_t W = q3vis_out_dim(v);
    for (uint32_t j = 0; j <= v->nds && !rc; j++) {
        rc = vkr_download(v->vk, j ? v->ds[j - 1].out : v->e, 0, v->obuf,
                          (uint64_t)M * v->O * 4, err);
        for (uint32_t r = 0; !rc && r < M; r++)
            memcpy(dst + (size_t)r * W + (size_t)j * v->O, v->obuf + (size_t)r * v->O,
                   (size_t)v->O * sizeof *dst);
    }
    return rc;
}

int q3vis_encode(struct q3vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w,
                 float *out, struct folio_err *err)
{
    return run(v, patches, grid_h, grid_w, v->hp.n_layer, 1, out, err);
}

int q3vis_encode_partial(struct q3vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w,
                         uint32_t blocks, float *x, struct folio_err *err)
{
    if (blocks > v->hp.n_layer)
        blocks = v->hp.n_layer;
    return run(v, patches, grid_h, grid_w, blocks, 0, x, err);
}
