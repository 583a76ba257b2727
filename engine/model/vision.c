/*
 * The vision tower: open (weights, activation plan) and the forward pass.
 * See vision.h for the data flow; synthetic towers and the benchmark are
 * vision_synth.c.
 *
 * Memory is decided at open for cfg.max_patches: every activation is its
 * own tensor in one planned arena, so no view needs an offset alignment
 * and a page never allocates. The attention kernel binds Q, K and V whole,
 * so open refuses a plan whose N x n_embd floats exceed the device's
 * storage-buffer range and says how many patches would fit.
 *
 * Host work per image is small and done before recording: the patch rows
 * are copied in window order, and the per-row (row, col) positions, key
 * ranges and the merged rows' raster index are computed — O(N) integers.
 */
#include "engine/model/vision.h"
#include "engine/model/quant.h"
#include "engine/model/qwen3vl.h"
#include "engine/ops/ops.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PATCH_COLS 588u /* 3 x 14 x 14, one temporal frame */
#define DEFAULT_MAX_PATCHES 6400u

struct vis_w {
    struct vkr_tensor t;
    int type;
    uint32_t n, k;
    int set;
};

struct vis_layer {
    struct vis_w ln1, ln1b, wq, bq, wk, bk, wv, bv, wo, bo, ln2, ln2b, wg, bg, wu, bu, wd, bd;
};

struct vis {
    struct q3vis *q3; /* Qwen3-VL: its own tower (qwen3vl_vision.c); the rest unused */
    struct vkr *vk;
    const struct gguf_model *m;
    struct gguf_model *owned;
    struct gguf_vision_hparams hp;
    struct vis_config cfg;
    uint32_t D, H, Dh, F, MD, O, win;
    int v25;
    int gemm16; /* f16 data path (record16): all matrices f16 and the GEMM available */
    struct vkr_arena *wa, *aa;
    struct vis_layer *L;
    struct vis_w patch, post, postb, mm0, mm0b, mm2, mm2b;
    uint32_t nmax, mmax;
    uint32_t max_images;
    uint32_t ffn_rows; /* rows per MLP chunk (gate/up hold this many) */
    /* rngf: each row's image as a key range, for the full-attention layers
     * of a batch of images (one image: no ranges) */
    struct vkr_tensor in, x, h, q, k, v, o, t, gate, up, z, e, out, pos, rng, sidx, rngf;
    struct op_attention_scratch asc;
    float *inbuf;
    int32_t *ibuf;
    int32_t *widx;
    uint32_t *wseg;
    double last_ms;
};

static void key(struct vkr_pipeline_key *k, const char *shader, uint32_t nspec, uint32_t s0,
                uint32_t s1)
{
    *k = ops_key(shader, nspec, s0, s1);
}

int vis_pipeline_keys(const struct vkr *vk, const struct gguf_model *m,
                      struct vkr_pipeline_key *out, int max)
{
    if (m->vision.kind == GGUF_VISION_QWEN3VL) /* Qwen3-VL hook */
        return q3vis_pipeline_keys(vk, m, out, max);
    struct vkr_pipeline_key all[512];
    int n = 0;
    int types[8] = {QUANT_F32}; /* the folded patch kernel is F32 */
    int nt = gguf_model_matrix_types(m, types, 1, 8);
    for (int j = 0; j < nt; j++)
        n += ops_matmul_keys(vk, types[j], &all[n]);
    key(&all[n++], "norm", 1, m->vision.kind == GGUF_VISION_QWEN25VL ? 0 : 1, 0);
    if (ops_gemm_available(vk))
        key(&all[n++], "norm", 2, m->vision.kind == GGUF_VISION_QWEN25VL ? 0 : 1, 1);
    key(&all[n++], "rope", 1, OP_ROPE_VISION, 0);
    n += ops_attention_keys(vk, m->vision.head_dim, 0, &all[n]);
    key(&all[n++], "attn_lse", 0, 0, 0); /* attention past one binding */
    key(&all[n++], "attn_merge", 0, 0, 0);
    key(&all[n++], "elem", 1, OP_ADD, 0);
    key(&all[n++], "elem", 1, m->vision.kind == GGUF_VISION_QWEN25VL ? OP_SWIGLU : OP_QUICK_GELU,
        0);
    key(&all[n++], "elem", 1, OP_GELU_ERF, 0);
    key(&all[n++], "scatter", 0, 0, 0);
    n = ops_keys_unique(all, n);
    int k = n < max ? n : max;
    if (out)
        memcpy(out, all, (size_t)k * sizeof *out);
    return k;
}

/* Qwen3-VL hooks: its tower answers for itself */
const struct gguf_vision_hparams *vis_hparams(const struct vis *v) { return &v->hp; }
uint32_t vis_max_patches(const struct vis *v) { return v->q3 ? q3vis_max_patches(v->q3) : v->nmax; }
uint32_t vis_out_dim(const struct vis *v) { return v->q3 ? q3vis_out_dim(v->q3) : v->O; }
double vis_last_submit_ms(const struct vis *v)
{
    return v->q3 ? q3vis_last_submit_ms(v->q3) : v->last_ms;
}

void vis_memory(const struct vis *v, uint64_t *weights, uint64_t *activations)
{
    if (v->q3) {
        q3vis_memory(v->q3, weights, activations);
        return;
    }
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

/* Matrices go through staging to be expanded to f16 (to_f16: ops_weights_f16). */
static int upload(struct vis *v, const struct gguf_tensor_info *t, struct vis_w *w,
                  struct vkr_arena *staging, int to_f16, struct folio_err *err)
{
    w->k = (uint32_t)t->ne[0];
    w->n = (uint32_t)(t->n_elems / t->ne[0]);
    int rc = ops_upload_weight(v->vk, v->wa, t->n_dims == 2 ? staging : NULL, t->data, t->type,
                               w->n, w->k, to_f16, &w->t, &w->type, err);
    if (rc) {
        folio_err_context(err, "uploading tensor %s (%" PRIu64 " bytes)", t->name, t->n_bytes);
        return rc;
    }
    w->set = 1;
    return 0;
}

/* K0 + K1 as one F32 [n_embd x 588] matrix (rows (c, ky, kx), as the GGUF
 * kernel's element order). */
static int upload_patch(struct vis *v, const struct gguf_tensor_info *k0,
                        const struct gguf_tensor_info *k1, struct folio_err *err)
{
    uint64_t rowb = quant_row_bytes(k0->type, PATCH_COLS);
    if (!rowb || k0->n_elems != (uint64_t)v->D * PATCH_COLS || k1->type != k0->type ||
        k1->n_elems != k0->n_elems)
        return folio_err_set(err, FOLIO_EMODEL, "vision: patch kernels %s/%s are not two "
                             "[14,14,3,%u] tensors of one type", k0->name, k1->name, v->D);
    float *w = malloc((size_t)v->D * PATCH_COLS * sizeof *w);
    float *r = malloc(PATCH_COLS * sizeof *r);
    int rc = w && r ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t o = 0; !rc && o < v->D; o++) {
        float *dst = w + (size_t)o * PATCH_COLS;
        rc = quant_dequantize_row(k0->type, (const uint8_t *)k0->data + o * rowb, dst, PATCH_COLS);
        if (!rc)
            rc = quant_dequantize_row(k1->type, (const uint8_t *)k1->data + o * rowb, r,
                                      PATCH_COLS);
        for (uint32_t j = 0; !rc && j < PATCH_COLS; j++)
            dst[j] += r[j];
        if (rc)
            folio_err_set(err, FOLIO_EMODEL, "vision: patch kernel type %d", k0->type);
    }
    uint64_t bytes = (uint64_t)v->D * PATCH_COLS * 4;
    if (!rc)
        rc = vkr_arena_upload(v->wa, w, bytes, &v->patch.t, err);
    v->patch.type = QUANT_F32;
    v->patch.n = v->D;
    v->patch.k = PATCH_COLS;
    v->patch.set = !rc;
    free(w);
    free(r);
    return rc;
}

static struct vis_w *slot_for(struct vis *v, const struct gguf_tensor_info *t)
{
    const char *name = t->name;
    unsigned li;
    char rest[64];
    if (!strcmp(name, "v.post_ln.weight"))
        return &v->post;
    if (!strcmp(name, "v.post_ln.bias"))
        return &v->postb;
    if (!strcmp(name, "mm.0.weight"))
        return &v->mm0;
    if (!strcmp(name, "mm.0.bias"))
        return &v->mm0b;
    if (!strcmp(name, "mm.2.weight"))
        return &v->mm2;
    if (!strcmp(name, "mm.2.bias"))
        return &v->mm2b;
    if (sscanf(name, "v.blk.%u.%63s", &li, rest) != 2 || li >= v->hp.n_layer)
        return NULL;
    struct vis_layer *L = &v->L[li];
    /* up/down by shape: legacy Qwen2-VL files swap their names */
    if (!strncmp(rest, "ffn_up.", 7) || !strncmp(rest, "ffn_down.", 9)) {
        int is_w = strstr(rest, ".weight") != NULL;
        int is_up = is_w ? t->ne[0] == v->D : t->ne[0] == v->F;
        if (is_w)
            return is_up ? &L->wu : &L->wd;
        return is_up ? &L->bu : &L->bd;
    }
    static const char *const names[] = {
        "ln1.weight", "ln1.bias", "attn_q.weight", "attn_q.bias", "attn_k.weight",
        "attn_k.bias", "attn_v.weight", "attn_v.bias", "attn_out.weight", "attn_out.bias",
        "ln2.weight", "ln2.bias", "ffn_gate.weight", "ffn_gate.bias"};
    struct vis_w *slots[] = {&L->ln1, &L->ln1b, &L->wq, &L->bq, &L->wk, &L->bk, &L->wv,
                             &L->bv, &L->wo, &L->bo, &L->ln2, &L->ln2b, &L->wg, &L->bg};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(rest, names[i]))
            return slots[i];
    return NULL;
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
    const struct vkr_limits *lim = vkr_limits(v->vk);
    uint64_t N = v->nmax, M = v->mmax, D = v->D, F = v->F, O = v->O, MD = v->MD;
    /* Attention over more patches than one binding holds goes through the
     * split path (op_attention_ranged); its scratch only where needed. */
    uint64_t asb[4] = {16, 16, 16, 16};
    if (N * D * 4 > lim->max_range)
        op_attention_scratch_bytes(v->vk, (uint32_t)N, v->H, v->Dh, asb);
    uint64_t sizes[21];
    int n = 0;
    sizes[n++] = N * PATCH_COLS * 4; /* in */
    for (int i = 0; i < 7; i++)
        sizes[n++] = N * D * 4;      /* x h q k v o t */
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
    sizes[n++] = v->v25 ? fr * F * 4 : 4; /* gate */
    sizes[n++] = fr * F * 4;         /* up */
    sizes[n++] = M * MD * 4;         /* z */
    sizes[n++] = M * O * 4;          /* e */
    sizes[n++] = M * O * 4;          /* out */
    sizes[n++] = N * 8;              /* pos */
    sizes[n++] = N * 8;              /* rng */
    sizes[n++] = M * 4;              /* sidx */
    for (int i = 0; i < 4; i++)
        sizes[n++] = asb[i];         /* split attention scratch */
    sizes[n++] = v->max_images > 1 ? N * 8 : 8; /* rngf */
    int rc = vkr_arena_plan(v->aa, sizes, n, err);
    if (rc)
        return rc;
    vkr_arena_reset(v->aa);
    struct vkr_tensor *dst[] = {&v->in, &v->x, &v->h, &v->q, &v->k, &v->v, &v->o, &v->t,
                                &v->gate, &v->up, &v->z, &v->e, &v->out, &v->pos, &v->rng,
                                &v->sidx, &v->asc.o, &v->asc.lse, &v->asc.lse_c,
                                &v->asc.ranges, &v->rngf};
    for (int i = 0; i < n && !rc; i++)
        rc = vkr_arena_alloc(v->aa, sizes[i], dst[i], err);
    if (rc)
        return rc;
    v->inbuf = malloc((size_t)N * PATCH_COLS * sizeof *v->inbuf);
    v->ibuf = malloc((size_t)N * 6 * sizeof *v->ibuf); /* pos, rng, rngf */
    v->widx = malloc((size_t)M * sizeof *v->widx);
    v->wseg = malloc((size_t)M * sizeof *v->wseg);
    if (!v->inbuf || !v->ibuf || !v->widx || !v->wseg)
        return folio_err_set(err, FOLIO_ENOMEM, "vision: out of host memory for %" PRIu64
                             " patches", N);
    return 0;
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
    v->vk = vk;
    v->m = m;
    v->hp = m->vision;
    if (cfg)
        v->cfg = *cfg;
    if (v->hp.kind == GGUF_VISION_QWEN3VL) { /* Qwen3-VL hook */
        int rq = q3vis_open(vk, m, cfg, &v->q3, err);
        if (rq) {
            free(v);
            return rq;
        }
        *out = v;
        return 0;
    }
    const struct gguf_vision_hparams *h = &v->hp;
    uint32_t S = h->spatial_merge;
    v->nmax = v->cfg.max_patches ? v->cfg.max_patches : DEFAULT_MAX_PATCHES;
    v->nmax = v->nmax / (S * S) * (S * S);
    v->max_images = v->cfg.max_images ? v->cfg.max_images : 1;
    v->mmax = v->nmax / (S * S);
    v->D = h->n_embd;
    v->H = h->n_head;
    v->Dh = h->head_dim;
    v->F = h->n_ff;
    v->MD = h->merger_dim;
    v->O = h->proj_dim;
    v->v25 = h->kind == GGUF_VISION_QWEN25VL;
    v->win = v->v25 ? h->window_size / (h->patch_size * S) : 0;
    int rc = 0;
    if (h->patch_size != 14 || S != 2)
        rc = folio_err_set(err, FOLIO_EUNSUPPORTED, "vision: patch %u / merge %u (folio runs "
                           "14 / 2)", h->patch_size, S);
    else if (!ops_attention_head_supported(v->Dh))
        rc = folio_err_set(err, FOLIO_EUNSUPPORTED, "vision: head size %u has no attention "
                           "kernel (even sizes up to 256 are supported)", v->Dh);
    else if (v->mmax == 0)
        rc = folio_err_set(err, FOLIO_EINVAL, "vision: max_patches %u is below one merged "
                           "token", v->cfg.max_patches);
    v->L = calloc(h->n_layer, sizeof *v->L);
    if (!rc && !v->L)
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    if (!rc)
        rc = vkr_arena_create(vk, "vision-weights", VKR_ARENA_WEIGHTS, &v->wa, err);
    if (!rc)
        rc = vkr_arena_create(vk, "vision-activations", VKR_ARENA_ACTIVATIONS, &v->aa, err);
    char why[200];
    struct vkr_arena *staging = NULL;
    int to_f16 = 0;
    /* f32_matmul asks for f32 precision through every matmul: no f16 weights. */
    enum ops_gpu_weights gw = v->cfg.f32_matmul ? OPS_WEIGHTS_NATIVE
                                                : (enum ops_gpu_weights)v->cfg.gpu_weights;
    if (!rc && (to_f16 = ops_weights_f16(vk, gw,
                               gguf_model_matrix_f16_bytes(m), why, sizeof why)))
        rc = vkr_arena_create(vk, "vision-staging", VKR_ARENA_WEIGHTS, &staging, err);
    if (!rc)
        folio_log(FOLIO_LOG_INFO, "vis_weights", "gpu_weights=\"%s\"", why);
    const struct gguf_tensor_info *k0 = NULL, *k1 = NULL;
    for (uint64_t i = 0; !rc && i < m->n_items; i++) {
        const struct gguf_tensor_info *t = m->items[i].t;
        if (!strcmp(t->name, "v.patch_embd.weight")) {
            k0 = t;
            continue;
        }
        if (!strcmp(t->name, "v.patch_embd.weight.1")) {
            k1 = t;
            continue;
        }
        struct vis_w *w = slot_for(v, t);
        if (!w)
            rc = folio_err_set(err, FOLIO_EMODEL, "vision: unexpected tensor %s", t->name);
        else
            rc = upload(v, t, w, staging, to_f16, err);
    }
    vkr_arena_destroy(staging);
    if (!rc && (!k0 || !k1))
        rc = folio_err_set(err, FOLIO_EMODEL, "vision: no patch embedding (v.patch_embd.weight "
                           "and .weight.1)");
    if (!rc)
        rc = upload_patch(v, k0, k1, err);
    for (uint32_t i = 0; !rc && i < h->n_layer; i++) {
        struct vis_layer *L = &v->L[i];
        if (!L->ln1.set || !L->wq.set || !L->wk.set || !L->wv.set || !L->wo.set || !L->ln2.set ||
            !L->wu.set || !L->wd.set || (v->v25 && !L->wg.set) || (!v->v25 && !L->ln1b.set))
            rc = folio_err_set(err, FOLIO_EMODEL, "vision: block %u is incomplete", i);
    }
    if (!rc && (!v->post.set || !v->mm0.set || !v->mm2.set || !v->mm0b.set || !v->mm2b.set))
        rc = folio_err_set(err, FOLIO_EMODEL, "vision: merger tensors missing");
    /* The f16 data path needs every matrix in f16 (expanded or stored so). */
    v->gemm16 = !rc && ops_gemm_available(vk) && !v->cfg.f32_matmul && v->mm0.type == QUANT_F16 &&
                v->mm2.type == QUANT_F16 && v->D % 2 == 0;
    for (uint32_t i = 0; v->gemm16 && i < h->n_layer; i++) {
        const struct vis_layer *L = &v->L[i];
        v->gemm16 = L->wq.type == QUANT_F16 && L->wk.type == QUANT_F16 &&
                    L->wv.type == QUANT_F16 && L->wo.type == QUANT_F16 &&
                    L->wu.type == QUANT_F16 && L->wd.type == QUANT_F16 &&
                    (!v->v25 || L->wg.type == QUANT_F16);
    }
    if (!rc)
        rc = plan(v, err);
    if (rc) {
        vis_close(v);
        return rc;
    }
    folio_log(FOLIO_LOG_INFO, "vis_open",
              "family=%s blocks=%u embd=%u heads=%u ff=%u out=%u window=%u max_patches=%u "
              "max_images=%u weights_bytes=%" PRIu64 " act_bytes=%" PRIu64 " f16_path=%d",
              v->v25 ? "qwen2.5vl" : "qwen2vl", h->n_layer, v->D, v->H, v->F, v->O, v->win,
              v->nmax, v->max_images, vkr_arena_used(v->wa), vkr_arena_capacity(v->aa),
              v->gemm16);
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

static int replan_to(struct vis *v, uint32_t max_patches, uint32_t max_images,
                     struct folio_err *err)
{
    uint32_t G = v->hp.spatial_merge * v->hp.spatial_merge;
    free(v->inbuf);
    free(v->ibuf);
    free(v->widx);
    free(v->wseg);
    v->inbuf = NULL;
    v->ibuf = NULL;
    v->widx = NULL;
    v->wseg = NULL;
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
    q3vis_close(v->q3);
    vkr_arena_destroy(v->aa);
    vkr_arena_destroy(v->wa);
    free(v->L);
    free(v->inbuf);
    free(v->ibuf);
    free(v->widx);
    free(v->wseg);
    gguf_model_close(v->owned);
    free(v);
}

/* --------------------------------------------------------------- forward */

static struct vkr_tensor vview(struct vkr_tensor t, uint64_t off, uint64_t size)
{
    t.offset += off;
    t.size = size;
    return t;
}

static int mm(struct vis *v, struct vkr_cmd *c, const struct vis_w *w, const struct vis_w *b,
              struct vkr_tensor x, struct vkr_tensor y, uint32_t m, struct folio_err *err)
{
    enum op_mm_kernel k = OP_MM_AUTO;
    if (v->cfg.f32_matmul && m > 8)
        k = OP_MM_TILED;
    struct op_matmul a = {.w = w->t, .wtype = w->type, .n = w->n, .k = w->k, .x = x, .m = m,
                          .y = y, .bias = b && b->set ? &b->t : NULL, .kernel = k};
    return op_matmul(c, &a, err);
}

/* The f16 data path (weights expanded at load, tensor-core GEMM): x is
 * f32 or f16 (xt), y f32 or f16 (yt); res: residual summed into y in
 * place; act / gate: the MLP activation fused into the epilogue. */
static int mm16(const struct vis_w *w, const struct vis_w *b, struct vkr_tensor x, int xt,
                struct vkr_tensor y, int yt, uint32_t m, const struct vkr_tensor *res,
                enum op_mm_act act, const struct vkr_tensor *gate, struct vkr_cmd *c,
                struct folio_err *err)
{
    struct op_matmul a = {.w = w->t, .wtype = w->type, .n = w->n, .k = w->k, .x = x, .m = m,
                          .y = y, .bias = b && b->set ? &b->t : NULL, .kernel = OP_MM_GEMM,
                          .xtype = xt, .ytype = yt, .res = res, .act = act, .gate = gate};
    return op_matmul(c, &a, err);
}

static int norm(struct vis *v, struct vkr_cmd *c, struct vkr_tensor x, struct vkr_tensor y,
                const struct vis_w *w, const struct vis_w *b, uint32_t rows,
                struct folio_err *err)
{
    return op_norm(c, v->v25 ? 0 : 1, x, y, &w->t, !v->v25 && b->set ? &b->t : NULL, rows, v->D,
                   v->hp.eps, err);
}

static int norm16(struct vis *v, struct vkr_cmd *c, struct vkr_tensor x, struct vkr_tensor y,
                  const struct vis_w *w, const struct vis_w *b, uint32_t rows,
                  struct folio_err *err)
{
    return op_norm_to(c, v->v25 ? 0 : 1, x, y, QUANT_F16, &w->t,
                      !v->v25 && b->set ? &b->t : NULL, rows, v->D, v->hp.eps, err);
}

/* Host side of a batch of images: each image's patch rows and integers in
 * window order, the images one after another (image i's rows start at the
 * sum of the earlier images' patches, its merged rows likewise). Windows
 * never cross an image, so the window ranges need no change for a batch;
 * the full-attention layers of a batch take each row's image as its key
 * range (rngf), so no row attends to another page. */
static int stage(struct vis *v, const struct vis_image *im, uint32_t n, uint32_t *total,
                 struct folio_err *err)
{
    uint32_t S = v->hp.spatial_merge, G = S * S;
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
    uint32_t P = 0, Mb = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t rows = im[j].grid_h / S, cols = im[j].grid_w / S, M = rows * cols, nseg = 0;
        int32_t *widx = v->widx + Mb;
        vis_window_index(rows, cols, v->win, widx, v->wseg, &nseg);
        for (uint32_t i = 0; i < M; i++) {
            uint32_t g = (uint32_t)widx[i], R = g / cols, C = g % cols, r0 = P + i * G;
            memcpy(v->inbuf + (size_t)r0 * PATCH_COLS,
                   im[j].patches + (size_t)g * G * PATCH_COLS,
                   (size_t)G * PATCH_COLS * sizeof(float));
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
    int rc = vkr_upload(v->vk, v->in, 0, v->inbuf, N * PATCH_COLS * 4, err);
    if (!rc)
        rc = vkr_upload(v->vk, v->pos, 0, pos, N * 8, err);
    if (!rc && v->win)
        rc = vkr_upload(v->vk, v->rng, 0, rg, N * 8, err);
    if (!rc && n > 1)
        rc = vkr_upload(v->vk, v->rngf, 0, rf, N * 8, err);
    if (!rc)
        rc = vkr_upload(v->vk, v->sidx, 0, v->widx, (uint64_t)Mb * 4, err);
    *total = (uint32_t)N;
    return rc;
}

/* 2-D RoPE on q and k, then attention over the whole image (full) or its
 * windows; shared by both data paths. */
static int rope_attention(struct vis *v, struct vkr_cmd *c, uint32_t N, int full,
                          const struct vkr_tensor *fullr, struct folio_err *err)
{
    struct op_rope rq = {.x = v->q, .y = v->q, .pos = v->pos, .t = N, .h = v->H, .d = v->Dh,
                         .mode = OP_ROPE_VISION, .base = 10000.0f};
    int rc = op_rope(c, &rq, err);
    struct op_rope rk = rq;
    rk.x = rk.y = v->k;
    if (!rc)
        rc = op_rope(c, &rk, err);
    struct op_attention at = {.q = v->q, .k = v->k, .v = v->v, .o = v->o, .tq = N, .tk = N,
                              .hq = v->H, .hkv = v->H, .d = v->Dh,
                              .scale = 1.0f / sqrtf((float)v->Dh), .causal = 0,
                              .ranges = full ? fullr : &v->rng};
    if (!rc)
        rc = op_attention_ranged(c, &at, &v->asc, err);
    return rc;
}

/* The f16 data path of record(): norms write f16 GEMM inputs, residual
 * sums and MLP activations ride in the GEMM epilogues (no elementwise
 * passes), the residual stream x stays f32 (qwen25vl.md §7.14: real
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
        int full = !v->v25 || (i + 1) % h->n_wa_pattern == 0;
        rc = norm16(v, c, v->x, v->h, &L->ln1, &L->ln1b, N, err);
        if (!rc)
            rc = mm16(&L->wq, &L->bq, v->h, F16, v->q, F32, N, NULL, OP_MM_ACT_NONE, NULL, c, err);
        if (!rc)
            rc = mm16(&L->wk, &L->bk, v->h, F16, v->k, F32, N, NULL, OP_MM_ACT_NONE, NULL, c, err);
        if (!rc)
            rc = mm16(&L->wv, &L->bv, v->h, F16, v->v, F32, N, NULL, OP_MM_ACT_NONE, NULL, c, err);
        if (!rc)
            rc = rope_attention(v, c, N, full, fullr, err);
        if (!rc)
            rc = mm16(&L->wo, &L->bo, v->o, F32, v->x, F32, N, &v->x, OP_MM_ACT_NONE, NULL, c, err);
        if (!rc)
            rc = norm16(v, c, v->x, v->h, &L->ln2, &L->ln2b, N, err);
        for (uint32_t r0 = 0; r0 < N && !rc; r0 += v->ffn_rows) {
            uint32_t m = N - r0 < v->ffn_rows ? N - r0 : v->ffn_rows;
            struct vkr_tensor hv = vview(v->h, (uint64_t)r0 * v->D * 2, (uint64_t)m * v->D * 2);
            struct vkr_tensor xv = vview(v->x, (uint64_t)r0 * v->D * 4, (uint64_t)m * v->D * 4);
            if (v->v25) {
                rc = mm16(&L->wg, &L->bg, hv, F16, v->gate, F32, m, NULL, OP_MM_ACT_NONE, NULL, c,
                          err);
                if (!rc)
                    rc = mm16(&L->wu, &L->bu, hv, F16, v->up, F16, m, NULL, OP_MM_ACT_SWIGLU,
                              &v->gate, c, err);
            } else {
                rc = mm16(&L->wu, &L->bu, hv, F16, v->up, F16, m, NULL, OP_MM_ACT_QUICK_GELU, NULL,
                          c, err);
            }
            if (!rc)
                rc = mm16(&L->wd, &L->bd, v->up, F16, xv, F32, m, &xv, OP_MM_ACT_NONE, NULL, c,
                          err);
        }
    }
    if (!merger || rc)
        return rc;
    rc = norm16(v, c, v->x, v->h, &v->post, &v->postb, N, err);
    if (!rc)
        rc = mm16(&v->mm0, &v->mm0b, v->h, F16, v->z, F16, M, NULL, OP_MM_ACT_GELU_ERF, NULL, c,
                  err);
    if (!rc)
        rc = mm16(&v->mm2, &v->mm2b, v->z, F16, v->e, F32, M, NULL, OP_MM_ACT_NONE, NULL, c, err);
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
    int rc = mm(v, c, &v->patch, NULL, v->in, v->x, N, err);
    if (v->gemm16 && N >= 64)
        return record16(v, c, N, blocks, merger, fullr, err);
    for (uint32_t i = 0; i < blocks && !rc; i++) {
        const struct vis_layer *L = &v->L[i];
        int full = !v->v25 || (i + 1) % h->n_wa_pattern == 0;
        rc = norm(v, c, v->x, v->h, &L->ln1, &L->ln1b, N, err);
        if (!rc)
            rc = mm(v, c, &L->wq, &L->bq, v->h, v->q, N, err);
        if (!rc)
            rc = mm(v, c, &L->wk, &L->bk, v->h, v->k, N, err);
        if (!rc)
            rc = mm(v, c, &L->wv, &L->bv, v->h, v->v, N, err);
        if (!rc)
            rc = rope_attention(v, c, N, full, fullr, err);
        if (!rc)
            rc = mm(v, c, &L->wo, &L->bo, v->o, v->t, N, err);
        if (!rc)
            rc = op_elem(c, OP_ADD, v->x, &v->t, v->x, ND, ND, 1.0f, 0.0f, err);
        if (!rc)
            rc = norm(v, c, v->x, v->h, &L->ln2, &L->ln2b, N, err);
        /* the MLP in row chunks (plan(): gate/up hold ffn_rows rows) */
        for (uint32_t r0 = 0; r0 < N && !rc; r0 += v->ffn_rows) {
            uint32_t m = N - r0 < v->ffn_rows ? N - r0 : v->ffn_rows;
            uint64_t mf = (uint64_t)m * v->F, md = (uint64_t)m * v->D, o4 = (uint64_t)r0 * v->D * 4;
            struct vkr_tensor hv = vview(v->h, o4, md * 4), xv = vview(v->x, o4, md * 4);
            struct vkr_tensor tv = vview(v->t, o4, md * 4);
            if (v->v25) {
                rc = mm(v, c, &L->wg, &L->bg, hv, v->gate, m, err);
                if (!rc)
                    rc = mm(v, c, &L->wu, &L->bu, hv, v->up, m, err);
                if (!rc)
                    rc = op_elem(c, OP_SWIGLU, v->gate, &v->up, v->gate, mf, mf, 1.0f, 0.0f, err);
                if (!rc)
                    rc = mm(v, c, &L->wd, &L->bd, v->gate, tv, m, err);
            } else {
                rc = mm(v, c, &L->wu, &L->bu, hv, v->up, m, err);
                if (!rc)
                    rc = op_elem(c, OP_QUICK_GELU, v->up, NULL, v->up, mf, 0, 1.0f, 0.0f, err);
                if (!rc)
                    rc = mm(v, c, &L->wd, &L->bd, v->up, tv, m, err);
            }
            if (!rc)
                rc = op_elem(c, OP_ADD, xv, &tv, xv, md, md, 1.0f, 0.0f, err);
        }
    }
    if (!merger || rc)
        return rc;
    /* merger: norm per patch; the 4 rows of a group are consecutive, so
     * the normalised [N, D] tensor read as [M, 4D] is the concatenation */
    rc = norm(v, c, v->x, v->h, &v->post, &v->postb, N, err);
    if (!rc)
        rc = mm(v, c, &v->mm0, &v->mm0b, v->h, v->z, M, err);
    if (!rc)
        rc = op_elem(c, OP_GELU_ERF, v->z, NULL, v->z, (uint64_t)M * v->MD, 0, 1.0f, 0.0f, err);
    if (!rc)
        rc = mm(v, c, &v->mm2, &v->mm2b, v->z, v->e, M, err);
    if (!rc)
        rc = op_scatter(c, v->e, v->sidx, M, v->O, v->out, M, err);
    return rc;
}

static int run(struct vis *v, const struct vis_image *im, uint32_t n, uint32_t blocks,
               int merger, struct folio_err *err)
{
    if (vkr_dead(v->vk))
        return folio_err_set(err, FOLIO_EDEVICELOST, "vision: the device was lost; re-open the "
                             "engine");
    uint32_t N = 0, G = v->hp.spatial_merge * v->hp.spatial_merge;
    int rc = stage(v, im, n, &N, err);
    if (rc)
        return rc;
    struct vkr_cmd *c;
    rc = vkr_cmd_begin(v->vk, &c, err);
    if (rc)
        return rc;
    rc = record(v, c, N, blocks, merger, n > 1 ? &v->rngf : NULL, err);
    if (rc) {
        vkr_cmd_abort(c);
        return rc;
    }
    double t0 = folio_mono_ms();
    rc = vkr_cmd_submit(c, err);
    v->last_ms = folio_mono_ms() - t0;
    if (rc)
        return rc;
    if (!merger)
        return vkr_download(v->vk, v->x, 0, im[0].out, (uint64_t)N * v->D * 4, err);
    uint64_t Mb = 0;
    for (uint32_t j = 0; j < n && !rc; j++) {
        uint64_t M = (uint64_t)im[j].grid_h * im[j].grid_w / G;
        rc = vkr_download(v->vk, v->out, Mb * v->O * 4, im[j].out, M * v->O * 4, err);
        Mb += M;
    }
    return rc;
}

int vis_encode(struct vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w, float *out,
               struct folio_err *err)
{
    if (v->q3)
        return q3vis_encode(v->q3, patches, grid_h, grid_w, out, err);
    struct vis_image im = {patches, grid_h, grid_w, out};
    return run(v, &im, 1, v->hp.n_layer, 1, err);
}

int vis_encode_batch(struct vis *v, const struct vis_image *images, uint32_t n,
                     struct folio_err *err)
{
    /* Qwen3-VL's tower (qwen3vl_vision.c) has no batched pass yet: its
     * pages run one after another inside the batch */
    for (uint32_t i = 0; v->q3 && i < n; i++) {
        int rc = q3vis_encode(v->q3, images[i].patches, images[i].grid_h, images[i].grid_w,
                              images[i].out, err);
        if (rc || i + 1 == n)
            return rc;
    }
    return run(v, images, n, v->hp.n_layer, 1, err);
}

int vis_encode_partial(struct vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w,
                       uint32_t blocks, float *x, struct folio_err *err)
{
    if (v->q3)
        return q3vis_encode_partial(v->q3, patches, grid_h, grid_w, blocks, x, err);
    if (blocks > v->hp.n_layer)
        blocks = v->hp.n_layer;
    struct vis_image im = {patches, grid_h, grid_w, x};
    return run(v, &im, 1, blocks, 0, err);
}
