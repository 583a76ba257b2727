/*
 * The vision tower's skeleton (tower_internal.h), the same for every
 * family: open (weights, activation plan), re-plan, close, staging a batch
 * of images, the pass and the download. A family's blocks and merger are
 * its own (engine/arch/<family>/vision.c), reached through its descriptor
 * (engine/arch/arch.h: the tensor table, the tower's struct
 * vis_family). See vision.h for the data flow; synthetic towers and the
 * benchmark are bench/engine/vision_synth.c.
 *
 * Memory is decided at open for cfg.max_patches: every activation is its
 * own tensor in one planned arena, so no view needs an offset alignment
 * and a page never allocates. Attention over more patches than one binding
 * holds goes through the split path (op_attention_ranged), its scratch
 * planned only where needed.
 *
 * Host work per image is small and done before recording: the page's
 * resized bytes are copied once into staging (op_patchify makes the patch
 * rows in window order on the device; callers with f32 patch rows have
 * them copied in window order instead), and the per-row (row, col)
 * positions, key ranges and the merged rows' raster index are computed —
 * O(N) integers (plus, for Qwen3-VL, the interpolated position rows of a
 * new grid).
 */
#include "engine/arch/arch.h"
#include "engine/model/preprocess.h"
#include "engine/model/tower_internal.h"
#include "engine/quant/quant.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_PATCHES 6400u

/* 1 when the tower's attention reads K and V in f16: where the workgroup-
 * scope kernel runs (it rounds them to f16 for its products anyway, and
 * takes only f16 K/V); half the attention's K/V reads. FOLIO_VIS_KV16=1
 * takes them so on any device (every attention kernel reads f16 K/V, as
 * the text model's cache): tests run the GPU's f16 K/V path on lavapipe. */
static int vis_kv16(const struct vkr *vk, uint32_t head_dim)
{
    const char *e = getenv("FOLIO_VIS_KV16");
    if (e && strcmp(e, "1") == 0)
        return 1;
    return op_attention_available(vk, OP_ATTN_CM2, head_dim, OP_ATTN_IO_KV16);
}

/* The FFN width the tower runs: n_ff rounded up to a multiple of 64 where
 * the tensor-core GEMM runs its MLP and every matrix of the file is a
 * float type (upload_ffn lays the padding out on the host). On the H100,
 * Qwen2.5-VL's 3,420 columns padded to 3,456 took down from 124 to 157
 * TFLOP/s and gate/up from 156 to 161 (BENCHMARKS.md, 2026-12-07).
 * FOLIO_VIS_FFN_PAD=0 keeps n_ff; =N pads to a multiple of N on any
 * device (tests). */
static uint32_t vis_ffn_width(const struct vkr *vk, const struct gguf_model *m)
{
    const uint32_t F = m->vision.n_ff;
    const char *e = getenv("FOLIO_VIS_FFN_PAD");
    long q = e && *e ? strtol(e, NULL, 10) : 0;
    int forced = q > 0;
    if (!forced) {
        if (e && *e) /* "0": n_ff as it is */
            return F;
        q = 64;
    }
    if (F % q == 0 || (!forced && !ops_gemm_available(vk)))
        return F;
    /* padded rows are laid out on the host: float matrices only */
    int types[8];
    int nt = gguf_model_matrix_types(m, types, 0, 8);
    for (int i = 0; i < nt; i++)
        if (types[i] != QUANT_F32 && types[i] != QUANT_F16 && types[i] != QUANT_BF16)
            return F;
    return (uint32_t)((F + q - 1) / q * q);
}

int vis_pipeline_keys(const struct vkr *vk, const struct gguf_model *m,
                      struct vkr_pipeline_key *out, int max)
{
    const struct arch_tower *A = m->vision.arch; /* the family (engine/arch/arch.h) */
    struct vkr_pipeline_key all[512];
    int n = 0;
    int types[8] = {QUANT_F32}; /* the folded patch kernel is F32 */
    int nt = gguf_model_matrix_types(m, types, 1, 8);
    for (int j = 0; j < nt; j++)
        n += ops_matmul_keys(vk, types[j], &all[n]);
    all[n++] = ops_norm_key(A->norm_kind, 0);
    if (ops_gemm_available(vk))
        all[n++] = ops_norm_key(A->norm_kind, 1);
    all[n++] = ops_rope_key(OP_ROPE_VISION, 0, 0);
    n += ops_attention_keys(vk, m->vision.head_dim, OP_ATTN_IO_F32, &all[n]);
    if (ops_gemm_available(vk) || vis_kv16(vk, m->vision.head_dim))
        all[n++] = ops_convert_key(1); /* vis_o16, and V where no GEMM writes it */
    if (vis_kv16(vk, m->vision.head_dim)) { /* K and V in f16 (vis_attention) */
        all[n++] = ops_rope_key(OP_ROPE_VISION, 1, 0);
        if (ops_gemm_available(vk)) { /* the fused Q/K/V rows in f16 (attention_fused) */
            all[n++] = ops_rope_key(OP_ROPE_VISION, 1, 1);
            n += ops_attention_keys(vk, m->vision.head_dim, OP_ATTN_IO_F16, &all[n]);
        }
        n += ops_attention_keys(vk, m->vision.head_dim, OP_ATTN_IO_KV16, &all[n]);
    }
    n += ops_attention_split_keys(0, &all[n]); /* attention past one binding */
    all[n++] = ops_elem_key(OP_ADD);
    all[n++] = ops_elem_key(A->act);
    all[n++] = ops_elem_key(OP_GELU_ERF);
    /* the window order's scatter (Qwen2.5-VL), and the one that hands the
     * tower's rows to the text model on the device (vis_rows, lm_seq.dev):
     * the tower's, so a driver that fails it takes the vision path alone
     * down (the text model never needs it without the tower's rows) */
    all[n++] = ops_scatter_key();
    all[n++] = ops_patchify_key(); /* the pages' bytes into patch rows (vis_image.rgb) */
    /* the GEMM forms specialized for the tower's K, with the widest product
     * of each: blocks read n_embd columns (q/k/v: 3 n_embd out, the MLP's
     * first: n_ff) and n_ff (n_embd out), the merger merger_dim (at most
     * merger_dim out, then the text width) */
    const struct gguf_vision_hparams *h = &m->vision;
    const uint32_t F = vis_ffn_width(vk, m); /* the MLP's columns as the tower runs them */
    uint32_t wide = 3 * h->n_embd > F ? 3 * h->n_embd : F;
    n += ops_gemm_keys_for_k(vk, h->n_embd, wide, &all[n]);
    n += ops_gemm_keys_for_k(vk, F, h->n_embd, &all[n]);
    n += ops_gemm_keys_for_k(vk, h->merger_dim, h->merger_dim > h->proj_dim ? h->merger_dim : h->proj_dim,
                             &all[n]);
    n = ops_keys_unique(all, n);
    int k = n < max ? n : max;
    if (n > max) /* a caller's list too short: the keys left out would miss after seal */
        folio_log(FOLIO_LOG_ERROR, "vis_pipeline_keys_truncated", "keys=%d room=%d", n, max);
    if (out)
        memcpy(out, all, (size_t)k * sizeof *out);
    return k;
}

const struct gguf_vision_hparams *vis_hparams(const struct vis *v) { return &v->hp; }
uint32_t vis_max_patches(const struct vis *v) { return v->nmax; }
/* with DeepStack mergers (Qwen3-VL): [main | ds0 | ds1 ...] */
uint32_t vis_out_dim(const struct vis *v) { return v->O * (1 + v->nds); }
double vis_last_submit_ms(const struct vis *v) { return v->last_ms; }

void vis_memory(const struct vis *v, uint64_t *weights, uint64_t *activations)
{
    if (weights)
        *weights = v->wa ? vkr_arena_used(v->wa) : 0;
    if (activations)
        *activations = v->aa ? vkr_arena_capacity(v->aa) : 0;
}

void vis_window_index(uint32_t rows, uint32_t cols, uint32_t win, int32_t *idx, uint32_t *seg,
                      uint32_t *nseg)
{
    if (win == 0) {
        for (uint32_t i = 0; i < rows * cols; i++)
            idx[i] = (int32_t)i;
        if (seg)
            seg[0] = rows * cols;
        if (nseg)
            *nseg = 1;
        return;
    }
    uint32_t n = 0, ns = 0;
    for (uint32_t wr = 0; wr < rows; wr += win)
        for (uint32_t wc = 0; wc < cols; wc += win) {
            uint32_t c0 = n;
            for (uint32_t r = wr; r < wr + win && r < rows; r++)
                for (uint32_t c = wc; c < wc + win && c < cols; c++)
                    idx[n++] = (int32_t)(r * cols + c);
            if (seg)
                seg[ns] = n - c0;
            ns++;
        }
    if (nseg)
        *nseg = ns;
}

/* ------------------------------------------------------------------ open */

/* Where w sits in a block's weights (its offset in struct vis_layer), or
 * -1 where it is no block's slot; *blk: the block. */
static ptrdiff_t block_slot(const struct vis *v, const struct vis_w *w, uint32_t *blk)
{
    uintptr_t p = (uintptr_t)w, b = (uintptr_t)v->L;
    if (!v->L || p < b || p >= b + (uintptr_t)v->hp.n_layer * sizeof *v->L)
        return -1;
    *blk = (uint32_t)((p - b) / sizeof *v->L);
    return (ptrdiff_t)((p - b) % sizeof *v->L);
}

/* The fused region w is part j of (struct vis_fused), or NULL. */
static struct vis_fused *fused_of(struct vis *v, const struct vis_w *w, int *j)
{
    static const size_t parts[6] = {offsetof(struct vis_layer, wq), offsetof(struct vis_layer, wk),
                                    offsetof(struct vis_layer, wv), offsetof(struct vis_layer, bq),
                                    offsetof(struct vis_layer, bk), offsetof(struct vis_layer, bv)};
    uint32_t i;
    ptrdiff_t at = block_slot(v, w, &i);
    for (int p = 0; at >= 0 && p < 6; p++)
        if ((size_t)at == parts[p]) {
            *j = p % 3;
            return p < 3 ? &v->L[i].qkv : &v->L[i].bqkv;
        }
    return NULL;
}

/* n x k of wtype from src into w, converted to type `to` (staging: through
 * it), as part j of the block's region fz (ops_fused_upload: a part that
 * does not fit the region gets a tensor of its own, and fz stays apart). */
static int upload_part(struct vis *v, struct vis_fused *fz, int j, const void *src, int wtype,
                       int to, struct vis_w *w, struct vkr_arena *staging, struct folio_err *err)
{
    struct ops_fused *f = &fz->f;
    if (!f->nparts) { /* q, k and v: one shape */
        f->nparts = 3;
        for (uint32_t i = 0; i < 3; i++)
            f->part[i].n = w->n, f->part[i].k = w->k;
    }
    int rc = ops_fused_upload(v->vk, v->wa, staging, f, (uint32_t)j, src, wtype, w->n, w->k, to,
                              &w->t, err);
    if (rc)
        return rc;
    w->type = to;
    fz->w = (struct vis_w){.t = f->t, .type = f->type, .n = 3 * w->n, .k = w->k, .set = f->set};
    return 0;
}

/* Which of a block's MLP tensors w is, where the MLP runs padded (v->F >
 * v->Ff): 1 its rows are the FFN's (gate and up), 2 its columns (down, and
 * the gate and up biases), else 0. */
static int ffn_side(const struct vis *v, const struct vis_w *w)
{
    uint32_t i;
    ptrdiff_t at = v->F != v->Ff ? block_slot(v, w, &i) : -1;
    if (at == (ptrdiff_t)offsetof(struct vis_layer, wg) ||
        at == (ptrdiff_t)offsetof(struct vis_layer, wu))
        return 1;
    if (at == (ptrdiff_t)offsetof(struct vis_layer, wd) ||
        at == (ptrdiff_t)offsetof(struct vis_layer, bg) ||
        at == (ptrdiff_t)offsetof(struct vis_layer, bu))
        return 2;
    return 0;
}

/* An MLP tensor with its FFN side padded from v->Ff to v->F with zeros
 * (vis_ffn_width): the padded gate/up rows produce 0, every activation
 * maps 0 to 0, and down's padded columns are 0, so the sums are the file's
 * own. Rows: the file's rows, then zero rows. Columns: each row laid out
 * with its zeros on the host (to: the file's type wtype, or f32 / f16
 * converted from it), one upload. */
static int upload_ffn(struct vis *v, const struct gguf_tensor_info *t, const void *src,
                      int wtype, int to, int side, struct vis_w *w, struct vkr_arena *staging,
                      struct folio_err *err)
{
    const uint32_t Fp = v->F, Ff = v->Ff;
    if ((side == 1 ? w->n : w->k) != Ff)
        return folio_err_set(err, FOLIO_EMODEL, "vision: %s has %u FFN %s; the FFN is %u wide",
                             t->name, side == 1 ? w->n : w->k, side == 1 ? "rows" : "columns", Ff);
    int rc;
    if (side == 1) {
        uint64_t rb = quant_row_bytes(to, w->k);
        rc = vkr_arena_alloc(v->wa, rb * Fp, &w->t, err);
        if (!rc)
            rc = ops_upload_weight_to(v->vk, staging, src, wtype, w->n, w->k, to,
                                      vkr_view(w->t, 0, rb * Ff), err);
        if (!rc)
            rc = vkr_fill(v->vk, vkr_view(w->t, rb * Ff, rb * (Fp - Ff)), 0, err);
        w->n = Fp;
        return rc;
    }
    if (to != QUANT_F32 && to != QUANT_F16 && to != wtype)
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "vision: %s: padding its FFN columns as "
                             "type %d (f32, f16 or the file's own type)", t->name, to);
    const size_t es = quant_row_bytes(to, 2) / 2, srb = quant_row_bytes(wtype, Ff);
    uint8_t *buf = calloc((size_t)w->n, (size_t)Fp * es);
    float *row = malloc((size_t)Ff * sizeof *row);
    rc = buf && row ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t r = 0; !rc && r < w->n; r++) {
        uint8_t *dst = buf + (size_t)r * Fp * es;
        const uint8_t *sr = (const uint8_t *)src + (size_t)r * srb;
        if (to == wtype) {
            memcpy(dst, sr, (size_t)Ff * es);
            continue;
        }
        rc = quant_dequantize_row(wtype, sr, row, Ff);
        for (uint32_t j = 0; !rc && j < Ff; j++) {
            if (to == QUANT_F32)
                memcpy(dst + (size_t)j * 4, &row[j], 4);
            else {
                uint16_t hv = quant_f32_to_f16(row[j]);
                memcpy(dst + (size_t)j * 2, &hv, 2);
            }
        }
        if (rc)
            rc = folio_err_set(err, FOLIO_EMODEL, "vision: %s: type %d rows", t->name, wtype);
    }
    if (!rc)
        rc = vkr_arena_upload(v->wa, buf, (uint64_t)w->n * Fp * es, &w->t, err);
    free(buf);
    free(row);
    w->k = Fp;
    return rc;
}

/* w (n and k set) from src, rows of the file's type wtype, on the device
 * as type `to` (converted through staging where they differ): padded where
 * it is an MLP tensor of a padded tower (upload_ffn), as its part of the
 * block's fused region where it is q, k or v (upload_part), else a tensor
 * of its own. */
static int place(struct vis *v, const struct gguf_tensor_info *t, const void *src, int wtype,
                 int to, struct vis_w *w, struct vkr_arena *staging, struct folio_err *err)
{
    int j, rc, side = ffn_side(v, w);
    struct vis_fused *f = fused_of(v, w, &j);
    if (side)
        rc = upload_ffn(v, t, src, wtype, to, side, w, staging, err);
    else if (f)
        rc = upload_part(v, f, j, src, wtype, to, w, staging, err);
    else if (!(rc = vkr_arena_alloc(v->wa, quant_row_bytes(to, w->k) * w->n, &w->t, err)))
        rc = ops_upload_weight_to(v->vk, staging, src, wtype, w->n, w->k, to, w->t, err);
    if (!rc)
        w->type = to;
    return rc;
}

int vis_upload(struct vis *v, const struct gguf_tensor_info *t, uint64_t row0, uint32_t rows,
               struct vis_w *w, struct vkr_arena *staging, int to_f16, struct folio_err *err)
{
    w->k = (uint32_t)t->ne[0];
    w->n = rows;
    uint64_t rb = quant_row_bytes(t->type, w->k);
    struct vkr_arena *st = t->n_dims == 2 ? staging : NULL;
    /* A tensor never spans blocks (ops_weight_type keeps what would not fit). */
    int to = st ? ops_weight_type(v->vk, t->type, w->n, w->k, to_f16) : t->type;
    int rc = place(v, t, (const uint8_t *)t->data + row0 * rb, t->type, to, w, st, err);
    if (rc) {
        folio_err_context(err, "uploading tensor %s (%" PRIu64 " bytes)", t->name, t->n_bytes);
        return rc;
    }
    w->set = 1;
    return 0;
}

int vis_upload_vec(struct vis *v, const struct gguf_tensor_info *t, uint64_t off, uint32_t len,
                   struct vis_w *w, struct folio_err *err)
{
    w->k = len;
    w->n = 1;
    int rc = place(v, t, (const float *)t->data + off, QUANT_F32, QUANT_F32, w, NULL, err);
    if (rc)
        folio_err_context(err, "uploading a slice of tensor %s", t->name);
    w->set = !rc;
    return rc;
}

/* K0 + K1 as one F32 [n_embd x 3 P P] matrix (rows (c, ky, kx), as the
 * GGUF kernel's element order): a still image is two identical frames, so
 * K0·x + K1·x = (K0+K1)·x exactly, at half the FLOPs. */
static int upload_patch(struct vis *v, const struct gguf_tensor_info *k0,
                        const struct gguf_tensor_info *k1, struct folio_err *err)
{
    const uint32_t PC = v->PC;
    uint64_t rowb = quant_row_bytes(k0->type, PC);
    if (!rowb || k0->n_elems != (uint64_t)v->D * PC || k1->type != k0->type ||
        k1->n_elems != k0->n_elems)
        return folio_err_set(err, FOLIO_EMODEL, "vision: patch kernels %s/%s are not two "
                             "[%u,%u,3,%u] tensors of one type", k0->name, k1->name, v->P, v->P,
                             v->D);
    float *w = malloc((size_t)v->D * PC * sizeof *w);
    float *r = malloc(PC * sizeof *r);
    int rc = w && r ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t o = 0; !rc && o < v->D; o++) {
        float *dst = w + (size_t)o * PC;
        rc = quant_dequantize_row(k0->type, (const uint8_t *)k0->data + o * rowb, dst, PC);
        if (!rc)
            rc = quant_dequantize_row(k1->type, (const uint8_t *)k1->data + o * rowb, r, PC);
        for (uint32_t j = 0; !rc && j < PC; j++)
            dst[j] += r[j];
        if (rc)
            folio_err_set(err, FOLIO_EMODEL, "vision: patch kernel type %d", k0->type);
    }
    if (!rc)
        rc = vkr_arena_upload(v->wa, w, (uint64_t)v->D * PC * 4, &v->patch.t, err);
    v->patch.type = QUANT_F32;
    v->patch.n = v->D;
    v->patch.k = PC;
    v->patch.set = !rc;
    free(w);
    free(r);
    return rc;
}

/* The f16 data path needs every matrix it multiplies in f16 (expanded at
 * load or stored so); the patch kernel stays F32 on the f32 path. */
static int all_f16(const struct vis *v)
{
    int ok = v->mm0.type == QUANT_F16 && v->mm2.type == QUANT_F16 && v->D % 2 == 0;
    for (uint32_t i = 0; ok && i < v->hp.n_layer; i++) {
        const struct vis_layer *L = &v->L[i];
        const struct vis_w *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wg, &L->wu, &L->wd};
        for (size_t j = 0; ok && j < sizeof mats / sizeof mats[0]; j++)
            ok = !mats[j]->set || mats[j]->type == QUANT_F16;
    }
    for (uint32_t j = 0; ok && j < v->nds; j++)
        ok = v->ds[j].w1.type == QUANT_F16 && v->ds[j].w2.type == QUANT_F16;
    return ok;
}

static uint64_t lcm_u64(uint64_t a, uint64_t b)
{
    uint64_t x = a, y = b;
    while (y) {
        uint64_t t = x % y;
        x = y;
        y = t;
    }
    return a / x * b;
}

static int plan(struct vis *v, struct folio_err *err)
{
    const struct vis_family *f = v->fam;
    const struct vkr_limits *lim = vkr_limits(v->vk);
    uint64_t N = v->nmax, M = v->mmax, D = v->D, F = v->F, O = v->O, MD = v->MD;
    /* Attention over more patches than one binding holds goes through the
     * split path (op_attention_ranged); its scratch only where needed. */
    uint64_t asb[4] = {16, 16, 16, 16};
    if (N * D * 4 > lim->max_range)
        op_attention_scratch_bytes(v->vk, (uint32_t)N, v->H, v->Dh, asb);
    uint64_t sizes[24 + GGUF_MAX_DEEPSTACK];
    int n = 0;
    sizes[n++] = N * v->PC * 4; /* in */
    /* rgb: the batch's pages as bytes, each from a multiple of
     * VKR_TENSOR_ALIGN (so each binds on its own): N patches' pixels and
     * the padding of max_images starts */
    sizes[n++] = N * v->PC + (uint64_t)v->max_images * VKR_TENSOR_ALIGN;
    /* x h o; then q, k and v in one region where it fits a block: the
     * fused Q/K/V product (vis_attention) writes [q | k | v] rows there,
     * f32 from its start or f16 from k's, with slack for the last row of
     * the k and v slices; else apart */
    uint64_t R = (N * D * 4 + VKR_TENSOR_ALIGN - 1) / VKR_TENSOR_ALIGN * VKR_TENSOR_ALIGN;
    uint64_t slack = (2 * D * 4 + VKR_TENSOR_ALIGN - 1) / VKR_TENSOR_ALIGN * VKR_TENSOR_ALIGN;
    uint64_t qkvb = 3 * R + slack;
    int one = qkvb <= lim->block_size;
    for (int i = 0; i < 3; i++)
        sizes[n++] = N * D * 4;
    sizes[n++] = one ? qkvb : N * D * 4;
    sizes[n++] = one ? 4 : N * D * 4;
    sizes[n++] = one ? 4 : N * D * 4;
    /* t: scratch; during attention K and V in f16 where the kernels take
     * them so (vis_attention), V starting at the next 256 bytes, or the
     * rotated [q | k] rows in f16 (attention_fused) */
    sizes[n++] = N * D * 4 + (4 * D + 255) / 256 * 256; /* attention_fused: the k slice's slack */
    /* the MLP in row chunks whose gate/up fit one device block (a batch of
     * 16 pages of 1024^2 is 87,616 patches x 3,420 floats = 1.2 GB); chunk
     * starts keep the f16 and f32 row views aligned */
    uint64_t fg = lcm_u64(lcm_u64(ops_align_rows(v->vk, D * 4), ops_align_rows(v->vk, D * 2)),
                          lcm_u64(ops_align_rows(v->vk, F * 4), ops_align_rows(v->vk, F * 2)));
    fg = lcm_u64(fg, 4); /* whole merge groups, as every row count here */
    uint64_t fr = lim->block_size / (F * 4) / fg * fg;
    if (v->cfg.ffn_rows && v->cfg.ffn_rows < fr)
        fr = (v->cfg.ffn_rows + fg - 1) / fg * fg;
    if (fr == 0)
        fr = fg;
    if (fr > N)
        fr = N;
    v->ffn_rows = (uint32_t)fr;
    sizes[n++] = v->hp.arch->act == OP_SWIGLU ? fr * F * 4 : 4; /* gate */
    sizes[n++] = fr * F * 4;                           /* up */
    sizes[n++] = M * MD * 4;                           /* z */
    sizes[n++] = M * O * 4;                            /* e */
    /* out, rng, sidx: the window-order families' un-reordering and ranges */
    sizes[n++] = f->scatter ? M * O * 4 : 4;
    sizes[n++] = N * 8;                                /* pos */
    sizes[n++] = f->scatter ? N * 8 : 8;
    sizes[n++] = f->scatter ? M * 4 : 4;
    for (int i = 0; i < 4; i++)
        sizes[n++] = asb[i];         /* split attention scratch */
    sizes[n++] = v->max_images > 1 ? N * 8 : 8; /* rngf */
    struct vkr_tensor *dst[24 + GGUF_MAX_DEEPSTACK] = {
        &v->in, &v->rgb, &v->x, &v->h, &v->o, &v->q, &v->k, &v->v, &v->t, &v->gate, &v->up, &v->z,
        &v->e, &v->out, &v->pos, &v->rng, &v->sidx, &v->asc.o, &v->asc.lse, &v->asc.lse_c,
        &v->asc.ranges, &v->rngf};
    if (v->table) { /* Qwen3-VL: the position rows, the DeepStack mergers' rows */
        dst[n] = &v->pe;
        sizes[n++] = N * D * 4;
        for (uint32_t j = 0; j < v->nds; j++) {
            dst[n] = &v->ds[j].out;
            sizes[n++] = M * O * 4;
        }
    }
    assert(n <= (int)(sizeof sizes / sizeof sizes[0]));
    int rc = vkr_arena_plan(v->aa, sizes, n, err);
    if (rc)
        return rc;
    vkr_arena_reset(v->aa);
    for (int i = 0; i < n && !rc; i++)
        rc = vkr_arena_alloc(v->aa, sizes[i], dst[i], err);
    if (rc)
        return rc;
    v->qkv = one ? v->q : (struct vkr_tensor){0};
    v->qkv_r = one ? R : 0;
    if (one) {
        v->q = vkr_view(v->qkv, 0, N * D * 4);
        v->k = vkr_view(v->qkv, R, N * D * 4);
        v->v = vkr_view(v->qkv, 2 * R, N * D * 4);
    }
    /* one per merge group, then stage()'s integer inputs */
    v->pieces = malloc(((size_t)M + 4) * sizeof *v->pieces);
    v->ibuf = malloc((size_t)N * 6 * sizeof *v->ibuf); /* pos, rng, rngf */
    v->widx = malloc((size_t)M * sizeof *v->widx);
    v->wseg = malloc((size_t)M * sizeof *v->wseg);
    int more = 1;
    if (v->table)
        more = (v->pebuf = malloc((size_t)N * D * sizeof *v->pebuf)) != NULL;
    if (more && v->nds)
        more = (v->obuf = malloc((size_t)M * O * sizeof *v->obuf)) != NULL;
    if (!v->pieces || !v->ibuf || !v->widx || !v->wseg || !more)
        return folio_err_set(err, FOLIO_ENOMEM, "vision: out of host memory for %" PRIu64
                             " patches", N);
    return 0;
}

/* The slot a load item's table entry names (engine/arch/arch.h): in the
 * tower, a block or a DeepStack merger. NULL: the family loads it itself. */
static struct vis_w *slot_of(struct vis *v, const struct gguf_load_item *it)
{
    const struct arch_tensor *s = it->spec;
    if (!s || s->load != ARCH_LOAD_SLOT)
        return NULL;
    char *base = s->group == ARCH_LAYER       ? (char *)&v->L[it->index]
                 : s->group == ARCH_DEEPSTACK ? (char *)&v->ds[it->index]
                                              : (char *)v;
    return (struct vis_w *)(base + s->slot);
}

/* The file's tensors into their slots: the patch kernels here (folded),
 * every other through the family. */
static int load(struct vis *v, struct folio_err *err)
{
    char why[200] = "";
    struct vkr_arena *staging = NULL;
    int to_f16 = 0, rc = 0;
    /* f32_matmul asks for f32 precision through every matmul: no f16 weights. */
    enum ops_gpu_weights gw = v->cfg.f32_matmul ? OPS_WEIGHTS_NATIVE
                                                : (enum ops_gpu_weights)v->cfg.gpu_weights;
    /* int8 is the text model's: the tower keeps f16, where it already beats
     * transformers' (BENCHMARKS.md), and no int8 error is stated for it */
    int int8 = gw == OPS_WEIGHTS_INT8;
    if (int8)
        gw = OPS_WEIGHTS_AUTO;
    if ((to_f16 = ops_weights_form(v->vk, gw, gguf_model_matrix_f16_bytes(v->m), why, sizeof why)))
        rc = vkr_arena_create(v->vk, "vision-staging", VKR_ARENA_WEIGHTS, &staging, err);
    if (!rc)
        folio_log(FOLIO_LOG_INFO, "vis_weights", "gpu_weights=\"%s%s\"", why,
                  int8 ? "; --gpu-weights int8 is the text model's" : "");
    const struct gguf_tensor_info *k0 = NULL, *k1 = NULL;
    for (uint64_t i = 0; !rc && i < v->m->n_items; i++) {
        const struct gguf_load_item *it = &v->m->items[i];
        int how = it->spec ? it->spec->load : ARCH_LOAD_SLOT;
        if (how == ARCH_LOAD_PATCH0)
            k0 = it->t;
        else if (how == ARCH_LOAD_PATCH1)
            k1 = it->t;
        else
            rc = v->fam->load(v, it, slot_of(v, it), staging, to_f16, err);
    }
    vkr_arena_destroy(staging);
    if (!rc && (!k0 || !k1))
        rc = folio_err_set(err, FOLIO_EMODEL, "vision: no patch embedding (v.patch_embd.weight "
                           "and .weight.1)");
    if (!rc)
        rc = upload_patch(v, k0, k1, err);
    if (!rc)
        rc = v->fam->complete(v, err);
    /* every MLP tensor took the FFN width the tower runs (upload_ffn) */
    for (uint32_t i = 0; !rc && i < v->hp.n_layer; i++) {
        const struct vis_layer *L = &v->L[i];
        if ((L->wg.set && L->wg.n != v->F) || L->wu.n != v->F || L->wd.k != v->F ||
            (L->bg.set && L->bg.k != v->F) || (L->bu.set && L->bu.k != v->F))
            rc = folio_err_set(err, FOLIO_EMODEL, "vision: block %u's MLP is not %u wide "
                               "(n_ff %u)", i, v->F, v->Ff);
    }
    return rc;
}

int vis_open(struct vkr *vk, const struct gguf_model *m, const struct vis_config *cfg,
             struct vis **out, struct folio_err *err)
{
    *out = NULL;
    if (!m || !m->is_vision)
        return folio_err_set(err, FOLIO_EINVAL, "vis_open needs a vision projector (mmproj)");
    struct vis *v = calloc(1, sizeof *v);
    if (!v)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    v->fam = m->vision.arch->tower;
    assert(v->fam->check && v->fam->load && v->fam->complete && v->fam->record);
    v->vk = vk;
    v->m = m;
    v->hp = m->vision;
    if (cfg)
        v->cfg = *cfg;
    const struct gguf_vision_hparams *h = &v->hp;
    uint32_t S = h->spatial_merge;
    v->nmax = v->cfg.max_patches ? v->cfg.max_patches : DEFAULT_MAX_PATCHES;
    v->nmax = S ? v->nmax / (S * S) * (S * S) : 0;
    v->max_images = v->cfg.max_images ? v->cfg.max_images : 1;
    v->mmax = S ? v->nmax / (S * S) : 0;
    v->D = h->n_embd;
    v->H = h->n_head;
    v->Dh = h->head_dim;
    v->Ff = h->n_ff;
    v->F = vis_ffn_width(vk, m); /* padded where the GEMM runs it faster */
    v->MD = h->merger_dim;
    v->O = h->proj_dim;
    v->P = h->patch_size;
    v->PC = 3 * v->P * v->P;
    v->nds = h->n_deepstack;  /* a family without DeepStack mergers has none */
    v->win = h->window_size ? h->window_size / (h->patch_size * S) : 0; /* windowed towers */
    int rc = v->fam->check(v, err);
    if (!rc && v->mmax == 0)
        rc = folio_err_set(err, FOLIO_EINVAL, "vision: max_patches %u is below one merged "
                           "token", v->cfg.max_patches);
    v->L = calloc(h->n_layer ? h->n_layer : 1, sizeof *v->L);
    if (!rc && !v->L)
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t i = 0; !rc && i < h->n_layer; i++)
        v->L[i].ds = -1;
    for (uint32_t j = 0; !rc && j < v->nds; j++) {
        assert(h->deepstack_layers[j] < h->n_layer); /* gguf_model_check's */
        v->L[h->deepstack_layers[j]].ds = (int)j;
    }
    if (!rc)
        rc = vkr_arena_create(vk, "vision-weights", VKR_ARENA_WEIGHTS, &v->wa, err);
    if (!rc)
        rc = vkr_arena_create(vk, "vision-activations", VKR_ARENA_ACTIVATIONS, &v->aa, err);
    if (!rc)
        rc = load(v, err);
    if (!rc) { /* op_patchify's values: the host's own table, so rows match prep_patches' */
        struct prep_config pc = {.patch = v->P, .merge = S};
        float lut[3 * 256];
        memcpy(pc.mean, h->image_mean, sizeof pc.mean);
        memcpy(pc.std, h->image_std, sizeof pc.std);
        prep_norm_table(&pc, lut);
        rc = vkr_arena_upload(v->wa, lut, sizeof lut, &v->lut, err);
    }
    v->gemm16 = !rc && ops_gemm_available(vk) && !v->cfg.f32_matmul && all_f16(v);
    v->kv16 = !rc && vis_kv16(vk, v->Dh);
    const char *qe = getenv("FOLIO_VIS_QKV"); /* "apart": three Q/K/V products */
    v->qkv_apart = qe && strcmp(qe, "apart") == 0;
    if (!rc)
        rc = plan(v, err);
    if (rc) {
        vis_close(v);
        return rc;
    }
    uint32_t fused = 0; /* blocks whose Q/K/V can run as one product */
    for (uint32_t i = 0; i < h->n_layer; i++)
        fused += v->qkv.size && !v->qkv_apart && v->L[i].qkv.w.set && v->L[i].bqkv.w.set;
    folio_log(FOLIO_LOG_INFO, "vis_open",
              "family=%s blocks=%u embd=%u heads=%u ff=%u out=%u window=%u deepstack=%u "
              "patch=%u pos_table=%ux%u max_patches=%u max_images=%u weights_bytes=%" PRIu64
              " act_bytes=%" PRIu64 " f16_path=%d qkv_fused_blocks=%u",
              v->fam->name, h->n_layer, v->D, v->H, v->F, v->O, v->win, v->nds, v->P,
              h->pos_side, h->pos_side, v->nmax, v->max_images, vkr_arena_used(v->wa),
              vkr_arena_capacity(v->aa), v->gemm16, fused);
    *out = v;
    return 0;
}

int vis_open_file(struct vkr *vk, const char *path, const struct vis_config *cfg,
                  struct vis **out, struct folio_err *err)
{
    struct gguf_model *m;
    int rc = gguf_model_open_vision(path, &m, err);
    if (rc)
        return rc;
    rc = vis_open(vk, m, cfg, out, err);
    if (rc) {
        gguf_model_close(m);
        return rc;
    }
    (*out)->owned = m;
    return 0;
}

static void free_host(struct vis *v)
{
    free(v->pieces);
    free(v->ibuf);
    free(v->widx);
    free(v->wseg);
    free(v->pebuf);
    free(v->obuf);
    v->pieces = NULL;
    v->pebuf = v->obuf = NULL;
    v->ibuf = v->widx = NULL;
    v->wseg = NULL;
    v->pe_gh = v->pe_gw = 0; /* the cached position rows went with pebuf */
}

static int replan_to(struct vis *v, uint32_t max_patches, uint32_t max_images,
                     struct folio_err *err)
{
    uint32_t G = v->hp.spatial_merge * v->hp.spatial_merge;
    free_host(v);
    vkr_arena_destroy(v->aa);
    v->aa = NULL;
    v->nmax = max_patches / G * G;
    v->mmax = v->nmax / G;
    v->max_images = max_images ? max_images : 1;
    if (v->mmax == 0)
        return folio_err_set(err, FOLIO_EINVAL, "vision: max_patches %u is below one merged "
                             "token", max_patches);
    int rc = vkr_arena_create(v->vk, "vision-activations", VKR_ARENA_ACTIVATIONS, &v->aa, err);
    return rc ? rc : plan(v, err);
}

int vis_replan(struct vis *v, uint32_t max_patches, uint32_t max_images, struct folio_err *err)
{
    uint32_t on = v->nmax, oi = v->max_images;
    int rc = replan_to(v, max_patches, max_images, err);
    if (rc) {
        struct folio_err e2 = {0};
        if (replan_to(v, on, oi, &e2) != 0) {
            *err = e2;
            return e2.code ? e2.code : FOLIO_EDEVICE;
        }
    }
    return rc;
}

void vis_close(struct vis *v)
{
    if (!v)
        return;
    vkr_arena_destroy(v->aa);
    vkr_arena_destroy(v->wa);
    free(v->L);
    free(v->table);
    free_host(v);
    gguf_model_close(v->owned);
    free(v);
}

/* --------------------------------------------------------------- forward */

int vis_mm(struct vis *v, struct vkr_cmd *c, const struct vis_w *w, const struct vis_w *b,
           struct vkr_tensor x, struct vkr_tensor y, uint32_t m, struct folio_err *err)
{
    enum op_mm_kernel k = OP_MM_AUTO;
    if (v->cfg.f32_matmul && m > 8)
        k = OP_MM_TILED;
    struct op_matmul a = {.w = w->t, .wtype = w->type, .n = w->n, .k = w->k, .x = x, .m = m,
                          .y = y, .bias = b && b->set ? &b->t : NULL, .kernel = k};
    return op_matmul(c, &a, err);
}

int vis_mm16(const struct vis_w *w, const struct vis_w *b, struct vkr_tensor x, int xt,
             struct vkr_tensor y, int yt, uint32_t m, const struct vkr_tensor *res,
             enum op_mm_act act, const struct vkr_tensor *gate, struct vkr_cmd *c,
             struct folio_err *err)
{
    struct op_matmul a = {.w = w->t, .wtype = w->type, .n = w->n, .k = w->k, .x = x, .m = m,
                          .y = y, .bias = b && b->set ? &b->t : NULL, .kernel = OP_MM_GEMM,
                          .xtype = xt, .ytype = yt, .res = res, .act = act, .gate = gate};
    return op_matmul(c, &a, err);
}

/* With kv16, t holds the rotated K and then V in f16, V from the next 256
 * bytes (plan() sizes t for both). */
static struct vkr_tensor kv_half(const struct vis *v, uint32_t N, int which)
{
    uint64_t nb = (uint64_t)N * v->D * 2;
    return vkr_view(v->t, which ? (nb + 255) / 256 * 256 : 0, nb);
}

/* The attention's output o (N rows, f32) into h as f16, the output
 * projection's input on the f16 path: the GEMM rounds its input to f16
 * anyway, and f32 input sends the tower's K = 1,280 product to the
 * subgroup kernel with twice its loads (H100: 0.30 ms against q's 0.17 at
 * the same shape; BENCHMARKS.md, 2026-12-07). h is free between the q/k/v
 * products and the MLP's norm. */
static int vis_o16(struct vis *v, struct vkr_cmd *c, uint32_t N, struct folio_err *err)
{
    uint64_t n = (uint64_t)N * v->D;
    return op_convert(c, 1, vkr_view(v->o, 0, n * 4), vkr_view(v->h, 0, n * 2), n, err);
}

/* The fused form vis_attention takes for N rows: FUSED_F16 ([q | k | v]
 * rows in f16 from qkv_r, attention_fused), FUSED_F32 ([q | k | v] f32 rows from the
 * region's start, rotated in place), or APART (three products: no fused
 * weights or region, an f16 attention without the f16 GEMM, slices that
 * would not start bindable, rows past one binding, FOLIO_VIS_QKV=apart). */
enum { APART, FUSED_F32, FUSED_F16 };
static int qkv_form(const struct vis *v, const struct vis_layer *L, uint32_t N, int f16, int o16)
{
    const struct vkr_limits *lim = vkr_limits(v->vk);
    const uint64_t D = v->D, a = lim->min_ssbo_align;
    if (v->qkv_apart || !v->qkv.size || !L->qkv.w.set || !L->bqkv.w.set)
        return APART;
    if (v->kv16) /* and the o projection on f16 input (o16): the attention writes o there */
        return f16 && o16 && ops_gemm_shape_ok(3 * v->D, v->D, QUANT_F16, QUANT_F16) &&
                       D * 2 % a == 0 && N * D * 6 <= lim->max_range
                   ? FUSED_F16
                   : APART;
    if (f16 && !ops_gemm_shape_ok(3 * v->D, v->D, QUANT_F16, QUANT_F32))
        return APART;
    return D * 4 % a == 0 && N * D * 12 <= lim->max_range ? FUSED_F32 : APART;
}

/* The attention of a block over each image (full; fullr: per-row key
 * ranges of a batch, or NULL) or over the block's windows (rng), into a.o. */
static int attend(struct vis *v, struct vkr_cmd *c, uint32_t N, int full,
                  const struct vkr_tensor *fullr, struct op_attention a, struct folio_err *err)
{
    a.tq = a.tk = N;
    a.hq = a.hkv = v->H;
    a.d = v->Dh;
    a.scale = 1.0f / sqrtf((float)v->Dh);
    a.ranges = full ? fullr : &v->rng;
    return op_attention_ranged(c, &a, &v->asc, err);
}

/* The three products' form: 2-D RoPE on q and k (packed f32 rows), then
 * the attention. With kv16 K is rotated into t as f16, and V (vv)
 * converted there unless it is f16 there already (v16). */
static int rope_attention(struct vis *v, struct vkr_cmd *c, uint32_t N, int full,
                          const struct vkr_tensor *fullr, struct vkr_tensor vv, int v16,
                          struct folio_err *err)
{
    struct op_rope rq = {.x = v->q, .y = v->q, .pos = v->pos, .t = N, .h = v->H, .d = v->Dh,
                         .mode = OP_ROPE_VISION, .base = 10000.0f};
    int rc = op_rope(c, &rq, err);
    struct op_rope rk = rq;
    rk.x = rk.y = v->k;
    struct vkr_tensor vt = vv;
    if (v->kv16) { /* rotated K and V into t as f16 */
        rk.y = kv_half(v, N, 0);
        rk.ytype = QUANT_F16;
        vt = kv_half(v, N, 1);
        if (!rc && !v16)
            rc = op_convert(c, 1, vv, vt, (uint64_t)N * v->D, err);
    }
    if (!rc)
        rc = op_rope(c, &rk, err);
    return rc ? rc : attend(v, c, N, full, fullr, (struct op_attention){.q = v->q, .k = rk.y,
                                                  .v = vt, .o = v->o, .kv_f16 = v->kv16}, err);
}

/* The fused form: [q | k | v] rows (es bytes an element) from the one
 * product. q and k sit side by side in a row, so one RoPE pass rotates
 * both (2 H heads): f32 rows in place, and the attention reads the three
 * slices in place; f16 rows (FUSED_F16) into t as f16 [q | k] rows, and
 * the attention reads those and V in place, all f16, and writes o as f16
 * straight into h, the o projection's input (no conversion passes). */
static int attention_fused(struct vis *v, struct vkr_cmd *c, uint32_t N, int full,
                           const struct vkr_tensor *fullr, struct vkr_tensor all, uint64_t es,
                           struct folio_err *err)
{
    const uint64_t D = v->D;
    const uint32_t W = (uint32_t)(3 * D), W2 = es == 2 ? (uint32_t)(2 * D) : W;
    struct op_rope r = {.x = all, .y = all, .pos = v->pos, .t = N, .h = 2 * v->H, .d = v->Dh,
                        .mode = OP_ROPE_VISION, .base = 10000.0f, .x_stride = W, .y_stride = W};
    if (es == 2) {
        r.y = vkr_view(v->t, 0, (uint64_t)N * W2 * 2);
        r.xtype = r.ytype = QUANT_F16;
        r.y_stride = W2;
    }
    int rc = op_rope(c, &r, err);
    /* slice j of a row starts j D elements in (views sized to whole rows:
     * the regions' slack holds the last row's tail) */
    struct vkr_tensor k = vkr_view(r.y, D * es, r.y.size), vv = vkr_view(all, 2 * D * es, all.size);
    struct op_attention a = {.q = r.y, .k = k, .v = vv, .o = v->o, .q_stride = W2,
                             .k_stride = W2, .v_stride = W};
    if (es == 2) {
        a.o = vkr_view(v->h, 0, (uint64_t)N * D * 2);
        a.f16 = 1;
    }
    return rc ? rc : attend(v, c, N, full, fullr, a, err);
}

int vis_attention(struct vis *v, struct vkr_cmd *c, const struct vis_layer *L, uint32_t N,
                  int f16, int full, const struct vkr_tensor *fullr, struct vkr_tensor *o,
                  int *o16, struct folio_err *err)
{
    const int F16 = QUANT_F16, F32 = QUANT_F32;
    const uint64_t D = v->D;
    /* where the o projection reads: f16 in h on the f16 path where the
     * GEMM takes it (see vis_o16), else o as the attention left it */
    *o16 = f16 && ops_gemm_shape_ok(L->wo.n, L->wo.k, F16, F32);
    *o = *o16 ? vkr_view(v->h, 0, (uint64_t)N * D * 2) : v->o;
    int form = qkv_form(v, L, N, f16, *o16), rc = 0;
    if (form != APART) {
        /* one product of 3 D columns: f16 rows from qkv_r, f32 from the start */
        const uint64_t es = form == FUSED_F16 ? 2 : 4;
        struct vkr_tensor all = vkr_view(v->qkv, es == 2 ? v->qkv_r : 0, (uint64_t)N * 3 * D * es);
        rc = f16 ? vis_mm16(&L->qkv.w, &L->bqkv.w, v->h, F16, all, es == 2 ? F16 : F32, N, NULL,
                            OP_MM_ACT_NONE, NULL, c, err)
                 : vis_mm(v, c, &L->qkv.w, &L->bqkv.w, v->h, all, N, err);
        if (!rc)
            rc = attention_fused(v, c, N, full, fullr, all, es, err);
        if (form == FUSED_F16) /* o is in h already */
            return rc;
    } else {
        /* three products; V straight into the attention's f16 input (t)
         * where it reads f16 and the GEMM writes it */
        int v16 = f16 && v->kv16 && ops_gemm_shape_ok(L->wv.n, L->wv.k, F16, F16);
        const struct vis_w *w[3] = {&L->wq, &L->wk, &L->wv}, *b[3] = {&L->bq, &L->bk, &L->bv};
        struct vkr_tensor y[3] = {v->q, v->k, v16 ? kv_half(v, N, 1) : v->v};
        for (int j = 0; j < 3 && !rc; j++)
            rc = f16 ? vis_mm16(w[j], b[j], v->h, F16, y[j], j == 2 && v16 ? F16 : F32, N, NULL,
                                OP_MM_ACT_NONE, NULL, c, err)
                     : vis_mm(v, c, w[j], b[j], v->h, y[j], N, err);
        if (!rc)
            rc = rope_attention(v, c, N, full, fullr, y[2], v16, err);
    }
    return !rc && *o16 ? vis_o16(v, c, N, err) : rc;
}

/* Host side of a batch of images: each image's patch rows and integers in
 * window order (merge-group order where a family has no windows), the
 * images one after another (image i's rows start at the sum of the earlier
 * images' patches, its merged rows likewise). Windows never cross an
 * image, so the window ranges need no change for a batch; the
 * full-attention layers of a batch take each row's image as its key range
 * (rngf), so no row attends to another page. */
static int stage(struct vis *v, const struct vis_image *im, uint32_t n, uint32_t *total,
                 struct folio_err *err)
{
    const uint32_t S = v->hp.spatial_merge, G = S * S, PC = v->PC;
    if (n == 0 || n > v->max_images)
        return folio_err_set(err, FOLIO_ELIMIT, "vision: %u images in one pass; the tower was "
                             "planned for 1..%u", n, v->max_images);
    uint64_t N = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t gh = im[j].grid_h, gw = im[j].grid_w;
        if (!gh || !gw || gh % S || gw % S)
            return folio_err_set(err, FOLIO_EINVAL, "vision: image %u: patch grid %ux%u is not "
                                 "a multiple of the merge size %u", j, gh, gw, S);
        N += (uint64_t)gh * gw;
    }
    if (N > v->nmax)
        return folio_err_set(err, FOLIO_ELIMIT, "vision: %s of %" PRIu64 " patches; the engine "
                             "was planned for at most %u", n > 1 ? "batch" : "image", N, v->nmax);
    int32_t *pos = v->ibuf;
    uint32_t *rg = (uint32_t *)v->ibuf + N * 2, *rf = (uint32_t *)v->ibuf + N * 4;
    uint32_t P = 0, Mb = 0, np = 0;
    uint64_t roff = 0; /* the next page's bytes in rgb (run() walks them the same way) */
    for (uint32_t j = 0; j < n; j++) {
        uint32_t rows = im[j].grid_h / S, cols = im[j].grid_w / S, M = rows * cols, nseg = 0;
        int32_t *widx = v->widx + Mb;
        if (!im[j].rgb && !im[j].patches)
            return folio_err_set(err, FOLIO_EINVAL, "vision: image %u has neither page bytes "
                                 "nor patch rows", j);
        if (im[j].rgb) { /* the page as it is: op_patchify orders its rows */
            uint64_t len = (uint64_t)im[j].grid_h * im[j].grid_w * PC;
            v->pieces[np++] = (struct vkr_piece){.t = v->rgb, .dst = roff, .src = im[j].rgb,
                                                 .len = len};
            roff += (len + VKR_TENSOR_ALIGN - 1) / VKR_TENSOR_ALIGN * VKR_TENSOR_ALIGN;
        }
        vis_window_index(rows, cols, v->win, widx, v->wseg, &nseg);
        for (uint32_t i = 0; i < M; i++) {
            uint32_t g = (uint32_t)widx[i], R = g / cols, C = g % cols, r0 = P + i * G;
            if (!im[j].rgb)
                v->pieces[np++] = (struct vkr_piece){.t = v->in, .dst = (uint64_t)r0 * PC * 4,
                                                     .src = im[j].patches + (size_t)g * G * PC,
                                                     .len = (uint64_t)G * PC * 4};
            for (uint32_t s = 0; s < G; s++) {
                pos[(r0 + s) * 2] = (int32_t)(R * S + s / S);
                pos[(r0 + s) * 2 + 1] = (int32_t)(C * S + s % S);
                rf[(r0 + s) * 2] = P;
                rf[(r0 + s) * 2 + 1] = P + M * G;
            }
            widx[i] += (int32_t)Mb; /* the scatter's destination row in the batch */
        }
        for (uint32_t w = 0, p = P; w < nseg && v->win; w++) {
            uint32_t lo = p, hi = p + v->wseg[w] * G;
            for (; p < hi; p++) {
                rg[p * 2] = lo;
                rg[p * 2 + 1] = hi;
            }
        }
        P += M * G;
        Mb += M;
    }
    /* the pages' bytes (or the patches in window order), copied once
     * from the caller's memory straight into staging, and the integers:
     * one submission */
    v->pieces[np++] = (struct vkr_piece){.t = v->pos, .src = pos, .len = N * 8};
    if (v->win)
        v->pieces[np++] = (struct vkr_piece){.t = v->rng, .src = rg, .len = N * 8};
    if (n > 1)
        v->pieces[np++] = (struct vkr_piece){.t = v->rngf, .src = rf, .len = N * 8};
    if (v->fam->scatter)
        v->pieces[np++] = (struct vkr_piece){.t = v->sidx, .src = v->widx,
                                             .len = (uint64_t)Mb * 4};
    int rc = vkr_upload_pieces(v->vk, v->pieces, np, err);
    if (!rc && v->fam->stage)
        rc = v->fam->stage(v, im, n, err);
    *total = (uint32_t)N;
    return rc;
}

/* Each image's merged rows to its out: the main rows (and, Qwen3-VL, each
 * DeepStack merger's rows as further columns: [main | ds0 | ds1 ...]). */
static int download(struct vis *v, const struct vis_image *im, uint32_t n,
                    struct folio_err *err)
{
    const uint32_t G = v->hp.spatial_merge * v->hp.spatial_merge, O = v->O, W = vis_out_dim(v);
    uint64_t Mb = 0;
    int rc = 0;
    for (uint32_t j = 0; j < n && !rc; j++) {
        uint64_t M = (uint64_t)im[j].grid_h * im[j].grid_w / G;
        for (uint32_t s = 0; s <= v->nds && !rc && im[j].out; s++) {
            struct vkr_tensor src = s ? v->ds[s - 1].out : v->fam->scatter ? v->out : v->e;
            if (!v->nds) {
                rc = vkr_download(v->vk, src, Mb * O * 4, im[j].out, M * O * 4, err);
                continue;
            }
            rc = vkr_download(v->vk, src, Mb * O * 4, v->obuf, M * O * 4, err);
            for (uint64_t r = 0; !rc && r < M; r++)
                memcpy(im[j].out + r * W + (size_t)s * O, v->obuf + r * O,
                       (size_t)O * sizeof *v->obuf);
        }
        Mb += M;
    }
    return rc;
}

static int run(struct vis *v, const struct vis_image *im, uint32_t n, uint32_t blocks,
               int merger, struct folio_err *err)
{
    if (vkr_dead(v->vk))
        return folio_err_set(err, FOLIO_EDEVICELOST, "vision: the device was lost; re-open the "
                             "engine");
    uint32_t N = 0;
    double ts = folio_mono_ms();
    int rc = stage(v, im, n, &N, err);
    if (rc)
        return rc;
    double tr = folio_mono_ms();
    struct vkr_cmd *c;
    rc = vkr_cmd_begin(v->vk, &c, err);
    if (rc)
        return rc;
    /* each page's patch rows from its bytes (stage() placed them), the
     * patch embedding (Qwen3-VL: with the Conv3D's bias), then the
     * family's blocks and merger */
    uint64_t roff = 0;
    for (uint32_t j = 0, r0 = 0; j < n && !rc; j++) {
        uint32_t gh = im[j].grid_h, gw = im[j].grid_w;
        if (im[j].rgb) {
            struct op_patchify a = {.rgb = v->rgb, .lut = v->lut, .y = v->in, .rgb_off = roff,
                                    .row0 = r0, .width = gw * v->P, .height = gh * v->P,
                                    .patch = v->P, .merge = v->hp.spatial_merge, .win = v->win};
            rc = op_patchify(c, &a, err);
            roff += ((uint64_t)gh * gw * v->PC + VKR_TENSOR_ALIGN - 1) / VKR_TENSOR_ALIGN *
                    VKR_TENSOR_ALIGN;
        }
        r0 += gh * gw;
    }
    if (!rc)
        rc = vis_mm(v, c, &v->patch, &v->patchb, v->in, v->x, N, err);
    if (!rc)
        rc = v->fam->record(v, c, N, blocks, merger, n > 1 ? &v->rngf : NULL, err);
    if (rc) {
        vkr_cmd_abort(c);
        return rc;
    }
    double t0 = folio_mono_ms();
    rc = vkr_cmd_submit(c, err);
    v->last_ms = folio_mono_ms() - t0;
    if (rc)
        return rc;
    double td = folio_mono_ms();
    if (!merger)
        rc = vkr_download(v->vk, v->x, 0, im[0].out, (uint64_t)N * v->D * 4, err);
    else
        rc = download(v, im, n, err);
    /* where a pass's host time goes, beside the GPU's (lm_pass's too) */
    if (!rc)
        folio_log(FOLIO_LOG_DEBUG, "vision_pass", "images=%u rows=%u stage_ms=%.2f record_ms=%.2f "
                  "submit_ms=%.2f download_ms=%.2f", n, N, tr - ts, t0 - tr, v->last_ms,
                  folio_mono_ms() - td);
    return rc;
}

int vis_encode(struct vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w, float *out,
               struct folio_err *err)
{
    struct vis_image im = {patches, grid_h, grid_w, out, NULL};
    return run(v, &im, 1, v->hp.n_layer, 1, err);
}

int vis_encode_batch(struct vis *v, const struct vis_image *images, uint32_t n,
                     struct folio_err *err)
{
    return run(v, images, n, v->hp.n_layer, 1, err);
}

int vis_rows(const struct vis *v, struct vkr_tensor *rows)
{
    const char *e = getenv("FOLIO_VIS_ROWS"); /* host: through the host (comparisons) */
    if (v->nds || (e && strcmp(e, "host") == 0))
        return 0;
    *rows = v->fam->scatter ? v->out : v->e;
    return 1;
}

int vis_encode_partial(struct vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w,
                       uint32_t blocks, float *x, struct folio_err *err)
{
    if (blocks > v->hp.n_layer)
        blocks = v->hp.n_layer;
    struct vis_image im = {patches, grid_h, grid_w, x, NULL};
    return run(v, &im, 1, blocks, 0, err);
}
