/*
 * lm open/close: weights into a device arena, one activation plan, and the
 * pipeline list. The forward pass itself is lm_forward.c.
 *
 * Memory is decided here, once: every activation tensor is sized for the
 * worst pass the configuration allows (batch x max_tokens prompt rows plus
 * every label row) and placed at open, so a request never allocates. The
 * KV cache is one tensor per layer (K and V). A cache, a prompt's queries
 * or a label scratch larger than one binding (maxStorageBufferRange) is
 * attended to in query and key chunks (op_attention_ranged), for which a
 * small split scratch is planned here.
 *
 * token_embd stays on the host (in the GGUF mapping): a prompt needs a few
 * thousand of its 152k rows, which the CPU dequantizes and uploads with the
 * pass. It is uploaded only when it doubles as the LM head (tied models).
 */
#include "engine/model/lm_internal.h"
#include "engine/model/quant.h"
#include "engine/model/qwen3vl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCRATCH_BUDGET (64ull << 20)

static void key(struct vkr_pipeline_key *k, const char *shader, uint32_t nspec, uint32_t s0,
                uint32_t s1)
{
    *k = ops_key(shader, nspec, s0, s1);
}

int lm_pipeline_keys(const struct vkr *vk, const struct gguf_model *m,
                     struct vkr_pipeline_key *out, int max)
{
    struct vkr_pipeline_key all[512];
    int n = 0;
    int types[8];
    int nt = gguf_model_matrix_types(m, types, 0, 8);
    for (int j = 0; j < nt; j++)
        n += ops_matmul_keys(vk, types[j], &all[n]);
    key(&all[n++], "gather", 1, QUANT_F32, 0);
    key(&all[n++], "norm", 1, 0, 0);
    if (ops_gemm_available(vk))
        key(&all[n++], "norm", 2, 0, 1);
    key(&all[n++], "softmax", 0, 0, 0);
    key(&all[n++], "rope", 1, OP_ROPE_MROPE, 0);
    n += ops_attention_keys(vk, m->text.head_dim, 0, &all[n]);
    key(&all[n++], "attn_lse", 0, 0, 0); /* attention past one binding */
    key(&all[n++], "attn_merge", 0, 0, 0);
    key(&all[n++], "elem", 1, OP_ADD, 0);
    key(&all[n++], "elem", 1, OP_SWIGLU, 0);
    if (m->text.family == GGUF_TEXT_QWEN3VL) /* Qwen3-VL hook (qwen3vl.c) */
        n += q3_lm_keys(&all[n]);
    n = ops_keys_unique(all, n);
    int k = n < max ? n : max;
    if (out)
        memcpy(out, all, (size_t)k * sizeof *out);
    return k;
}

const struct gguf_text_hparams *lm_hparams(const struct lm *lm)
{
    return &lm->hp;
}

double lm_last_submit_ms(const struct lm *lm)
{
    return lm->last_ms;
}

/* Matrices go through staging to be expanded to f16 (to_f16: ops_weights_f16). */
static int upload_tensor(struct lm *lm, const struct gguf_tensor_info *t, struct lm_w *w,
                         struct vkr_arena *staging, int to_f16, struct folio_err *err)
{
    w->k = (uint32_t)t->ne[0];
    w->n = (uint32_t)(t->n_elems / t->ne[0]);
    int rc = ops_upload_weight(lm->vk, lm->wa, t->n_dims == 2 ? staging : NULL, t->data, t->type,
                               w->n, w->k, to_f16, &w->t, &w->type, err);
    if (rc)
        folio_err_context(err, "uploading tensor %s (%" PRIu64 " bytes)", t->name, t->n_bytes);
    return rc;
}

static struct lm_w *slot_for(struct lm *lm, const char *name)
{
    unsigned li;
    char rest[64];
    if (strcmp(name, "output_norm.weight") == 0)
        return &lm->out_norm;
    if (strcmp(name, "output.weight") == 0)
        return &lm->out_w;
    if (strcmp(name, "token_embd.weight") == 0)
        return lm->hp.tied_output ? &lm->out_w : NULL;
    if (sscanf(name, "blk.%u.%63s", &li, rest) != 2 || li >= lm->hp.n_layer)
        return NULL;
    struct lm_layer *L = &lm->L[li];
    static const char *const names[14] = {
        "attn_norm.weight", "attn_q.weight", "attn_q.bias", "attn_k.weight",
        "attn_k.bias", "attn_v.weight", "attn_v.bias", "attn_output.weight",
        "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
        "attn_q_norm.weight", "attn_k_norm.weight"};
    struct lm_w *slots[14] = {&L->attn_norm, &L->wq, &L->bq, &L->wk, &L->bk, &L->wv,
                              &L->bv, &L->wo, &L->ffn_norm, &L->wg, &L->wu, &L->wd,
                              &L->qn, &L->kn};
    for (int i = 0; i < 14; i++)
        if (strcmp(rest, names[i]) == 0)
            return slots[i];
    return NULL;
}

static int too_big(struct lm *lm, const char *what, uint64_t bytes, struct folio_err *err)
{
    folio_err_set(err, FOLIO_ELIMIT, "text model: %s needs %" PRIu64 " bytes in one binding; "
                  "this device binds at most %" PRIu64, what, bytes, vkr_limits(lm->vk)->max_range);
    folio_err_hint(err, "lower --max-tokens or --batch (now %u tokens x %u sequences)",
                   lm->cfg.max_tokens, lm->cfg.batch);
    return FOLIO_ELIMIT;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t lcm_u64(uint64_t a, uint64_t b)
{
    return a / gcd_u64(a, b) * b;
}

/* Sizes every activation for the worst pass and places it (fixed order:
 * the plan and the allocations must agree). */
static int plan_activations(struct lm *lm, struct folio_err *err)
{
    const struct vkr_limits *lim = vkr_limits(lm->vk);
    uint64_t align = lim->min_ssbo_align ? lim->min_ssbo_align : 4;
    uint64_t r1 = ops_align_rows(lm->vk, (uint64_t)lm->QW * 4);
    uint64_t r2 = ops_align_rows(lm->vk, (uint64_t)lm->KW * 4);
    lm->ra = (uint32_t)(r1 > r2 ? r1 : r2);
    lm->ialign = (uint32_t)(align >= 4 ? align / 4 : 1);
    const struct lm_config *c = &lm->cfg;
    uint64_t B = c->batch, T = c->max_tokens, NL = c->max_labels, LT = c->max_label_tokens;
    uint64_t groups = B * NL;
    uint64_t label_rows = B * NL * (LT - 1) + groups * lm->ra;
    uint64_t rows = B * T + lm->ra + label_rows;
    uint64_t kv = rows + lm->ra;
    uint64_t one = T + 2 * (LT - 1); /* a pair of labels around one prompt */
    uint64_t budget = SCRATCH_BUDGET / ((uint64_t)lm->KW * 4);
    if (budget > lim->max_range / ((uint64_t)lm->KW * 4))
        budget = lim->max_range / ((uint64_t)lm->KW * 4);
    uint64_t sc = NL * one < budget ? NL * one : budget;
    if (c->scratch_rows)
        sc = c->scratch_rows;
    if (sc < one)
        sc = one;
    uint64_t lg = B + (B * NL * (LT - 1) > (c->all_logits ? B * T : 0)
                           ? B * NL * (LT - 1)
                           : (c->all_logits ? B * T : 0));
    uint64_t pg = B * NL * LT;
    /* padded label queries (lm_forward.c): whole blocks of 16 per label */
    uint64_t one_qp = (2 * (LT - 1) + 15) / 16 * 16 + 1;
    uint64_t qp = NL * (one_qp - 1) + 1;
    if (qp > lim->max_range / ((uint64_t)lm->QW * 4))
        qp = lim->max_range / ((uint64_t)lm->QW * 4);
    if (qp < one_qp)
        qp = one_qp; /* past one binding: attended to in chunks */
    uint64_t ints = rows * 6 + B * NL * (T + LT) + lg + pg + 3 * (B * NL * one_qp + groups) +
                    (6 + 5 * groups) * lm->ialign;
    if (rows > UINT32_MAX / 8 || ints > UINT32_MAX / 8 || lg * lm->V > UINT32_MAX)
        return folio_err_set(err, FOLIO_ELIMIT, "text model: %" PRIu64 " rows per pass is too many",
                             rows);
    /* Attention operands past one binding go through the split path; its
     * scratch is only worth its memory where that can happen. */
    uint64_t asb[4] = {16, 16, 16, 16};
    if (kv * lm->KW * 4 > lim->max_range || sc * lm->KW * 4 > lim->max_range ||
        rows * lm->QW * 4 > lim->max_range || qp * lm->QW * 4 > lim->max_range)
        op_attention_scratch_bytes(lm->vk, (uint32_t)(rows > qp ? rows : qp), lm->hp.n_head,
                                   lm->D, asb);
    if ((uint64_t)lm->V * 4 > lim->max_range)
        return too_big(lm, "one logits row", (uint64_t)lm->V * 4, err);
    lm->rows_cap = (uint32_t)rows;
    lm->kv_cap = (uint32_t)kv;
    lm->scratch_cap = (uint32_t)sc;
    lm->qp_cap = (uint32_t)qp;
    lm->lg_cap = (uint32_t)lg;
    lm->ints_cap = (uint32_t)ints;

    uint64_t E = lm->E, QW = lm->QW, KW = lm->KW, F = lm->F, V = lm->V;
    uint32_t nsz = 21 + 2 * lm->hp.n_layer;
    uint64_t *sizes = malloc(nsz * sizeof *sizes);
    if (!sizes)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    int n = 0;
    sizes[n++] = rows * E * 4;  /* x */
    sizes[n++] = rows * E * 4;  /* h */
    sizes[n++] = rows * QW * 4; /* q */
    sizes[n++] = rows * QW * 4; /* o */
    sizes[n++] = rows * E * 4;  /* t2 */
    /* The MLP runs in row chunks whose gate/up fit one device block: a
     * batch of pages is tens of thousands of rows, and rows x n_ff floats
     * would pass the block size (1 GiB) long before the rest does. Chunks
     * are whole multiples of the rows that keep every view aligned. */
    uint64_t fg = lcm_u64(lcm_u64(ops_align_rows(lm->vk, E * 4), ops_align_rows(lm->vk, E * 2)),
                          lcm_u64(ops_align_rows(lm->vk, F * 4), ops_align_rows(lm->vk, F * 2)));
    uint64_t fr = lim->block_size / (F * 4) / fg * fg;
    if (c->ffn_rows && c->ffn_rows < fr)
        fr = (c->ffn_rows + fg - 1) / fg * fg;
    if (fr == 0)
        fr = fg;
    if (fr > rows)
        fr = rows;
    lm->ffn_rows = (uint32_t)fr;
    sizes[n++] = fr * F * 4;    /* gate */
    sizes[n++] = fr * F * 4;    /* up */
    sizes[n++] = sc * KW * 4;   /* ks */
    sizes[n++] = sc * KW * 4;   /* vs */
    sizes[n++] = qp * QW * 4;   /* qp */
    sizes[n++] = qp * QW * 4;   /* op */
    sizes[n++] = lg * E * 4;    /* lg_h */
    sizes[n++] = lg * E * 4;    /* lg_hn */
    sizes[n++] = lg * V * 4;    /* logits */
    sizes[n++] = lg * V * 4;    /* probs */
    sizes[n++] = pg * 4;        /* pg */
    sizes[n++] = ints * 4;      /* ints */
    for (int i = 0; i < 4; i++)
        sizes[n++] = asb[i];    /* split attention scratch */
    int fixed = n;
    for (uint32_t i = 0; i < lm->hp.n_layer; i++) {
        sizes[n++] = kv * KW * 4;
        sizes[n++] = kv * KW * 4;
    }
    int rc = vkr_arena_plan(lm->aa, sizes, n, err);
    if (rc) {
        free(sizes);
        if (rc == FOLIO_ELIMIT) /* the arena's generic hint, in this model's knobs */
            folio_err_hint(err, "lower --max-tokens or --batch (now %u tokens x %u sequences)",
                           c->max_tokens, c->batch);
        return rc;
    }
    vkr_arena_reset(lm->aa);
    struct vkr_tensor *dst[] = {&lm->x, &lm->h, &lm->q, &lm->o, &lm->t2, &lm->gate, &lm->up,
                                &lm->ks, &lm->vs, &lm->qp, &lm->op, &lm->lg_h, &lm->lg_hn, &lm->logits,
                                &lm->probs, &lm->pg, &lm->ints, &lm->asc.o, &lm->asc.lse,
                                &lm->asc.lse_c, &lm->asc.ranges};
    for (int i = 0; i < fixed && !rc; i++)
        rc = vkr_arena_alloc(lm->aa, sizes[i], dst[i], err);
    for (uint32_t i = 0; i < lm->hp.n_layer && !rc; i++) {
        rc = vkr_arena_alloc(lm->aa, kv * KW * 4, &lm->L[i].kc, err);
        if (!rc)
            rc = vkr_arena_alloc(lm->aa, kv * KW * 4, &lm->L[i].vc, err);
    }
    free(sizes);
    if (rc)
        return rc;
    lm->lab_row = malloc((size_t)B * NL * sizeof *lm->lab_row);
    lm->lg_row = malloc((size_t)B * NL * sizeof *lm->lg_row);
    lm->lab_qp = malloc((size_t)B * NL * sizeof *lm->lab_qp);
    lm->lab_base = malloc((size_t)B * NL * sizeof *lm->lab_base);
    lm->lab_ka = malloc((size_t)B * NL * sizeof *lm->lab_ka);
    lm->emb = malloc((size_t)rows * E * sizeof *lm->emb);
    lm->iv = malloc((size_t)ints * sizeof *lm->iv);
    lm->pgh = malloc((size_t)pg * sizeof *lm->pgh);
    lm->seq_start = calloc(B, sizeof *lm->seq_start);
    lm->seq_n = calloc(B, sizeof *lm->seq_n);
    lm->next_pos = calloc(B, sizeof *lm->next_pos);
    lm->lastlg = malloc((size_t)B * V * sizeof *lm->lastlg);
    lm->lastlse = malloc((size_t)B * sizeof *lm->lastlse);
    lm->rowbuf = malloc((size_t)V * sizeof *lm->rowbuf);
    if (!lm->emb || !lm->iv || !lm->pgh || !lm->seq_start || !lm->seq_n || !lm->next_pos ||
        !lm->lastlg || !lm->lastlse || !lm->rowbuf || !lm->lab_row || !lm->lg_row || !lm->lab_qp ||
        !lm->lab_base || !lm->lab_ka)
        return folio_err_set(err, FOLIO_ENOMEM, "text model: out of host memory for %" PRIu64
                             " staging rows", rows);
    return 0;
}

int lm_open(struct vkr *vk, const struct gguf_model *m, const struct lm_config *cfg,
            struct lm **out, struct folio_err *err)
{
    *out = NULL;
    if (!m || m->is_vision)
        return folio_err_set(err, FOLIO_EINVAL, "lm_open needs a text model (qwen2vl)");
    struct lm *lm = calloc(1, sizeof *lm);
    if (!lm)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    lm->vk = vk;
    lm->m = m;
    lm->hp = m->text;
    if (cfg)
        lm->cfg = *cfg;
    if (!lm->cfg.max_tokens)
        lm->cfg.max_tokens = 2048;
    if (!lm->cfg.batch)
        lm->cfg.batch = 1;
    if (!lm->cfg.max_labels)
        lm->cfg.max_labels = 32;
    if (!lm->cfg.max_label_tokens)
        lm->cfg.max_label_tokens = 16;
    const struct gguf_text_hparams *h = &lm->hp;
    lm->E = h->n_embd;
    lm->D = h->head_dim;
    lm->QW = h->n_head * h->head_dim;
    lm->KW = h->n_head_kv * h->head_dim;
    lm->F = h->n_ff;
    lm->V = h->n_vocab;
    lm->Ein = lm->E * (1 + h->n_deepstack);
    lm->rope_mode = h->family == GGUF_TEXT_QWEN3VL ? OP_ROPE_IMROPE : OP_ROPE_MROPE;
    int rc = 0;
    if (!ops_attention_head_supported(lm->D))
        rc = folio_err_set(err, FOLIO_EUNSUPPORTED, "text model: head size %u has no attention "
                           "kernel (even sizes up to 256 are supported)", lm->D);
    else if (h->mrope_sections[0] + h->mrope_sections[1] + h->mrope_sections[2] != (int)lm->D / 2)
        rc = folio_err_set(err, FOLIO_EMODEL, "text model: M-RoPE sections %d+%d+%d do not cover "
                           "head_dim/2 = %u", h->mrope_sections[0], h->mrope_sections[1],
                           h->mrope_sections[2], lm->D / 2);
    lm->embd = gguf_find_tensor(m->file, "token_embd.weight");
    lm->L = calloc(h->n_layer ? h->n_layer : 1, sizeof *lm->L);
    if (!rc && (!lm->L || !lm->embd))
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    if (!rc)
        rc = vkr_arena_create(vk, "lm-weights", VKR_ARENA_WEIGHTS, &lm->wa, err);
    if (!rc)
        rc = vkr_arena_create(vk, "lm-activations", VKR_ARENA_ACTIVATIONS, &lm->aa, err);
    char why[200];
    struct vkr_arena *staging = NULL;
    int to_f16 = 0;
    if (!rc && (to_f16 = ops_weights_f16(vk, (enum ops_gpu_weights)lm->cfg.gpu_weights,
                               gguf_model_matrix_f16_bytes(m), why, sizeof why)))
        rc = vkr_arena_create(vk, "lm-staging", VKR_ARENA_WEIGHTS, &staging, err);
    for (uint64_t i = 0; !rc && i < m->n_items; i++) {
        const struct gguf_tensor_info *t = m->items[i].t;
        if (m->items[i].on_host)
            continue;
        struct lm_w *w = slot_for(lm, t->name);
        if (!w) {
            rc = folio_err_set(err, FOLIO_EMODEL, "text model: unexpected tensor %s", t->name);
            break;
        }
        rc = upload_tensor(lm, t, w, staging, to_f16, err);
    }
    vkr_arena_destroy(staging);
    if (!rc && !lm->out_w.t.size)
        rc = folio_err_set(err, FOLIO_EMODEL, "text model: no LM head (output.weight)");
    lm->gemm16 = !rc && ops_gemm_available(vk) && lm->E % 2 == 0 && lm->F % 2 == 0;
    for (uint32_t i = 0; lm->gemm16 && i < h->n_layer; i++) {
        const struct lm_layer *L = &lm->L[i];
        lm->gemm16 = L->wq.type == QUANT_F16 && L->wk.type == QUANT_F16 &&
                     L->wv.type == QUANT_F16 && L->wo.type == QUANT_F16 &&
                     L->wg.type == QUANT_F16 && L->wu.type == QUANT_F16 &&
                     L->wd.type == QUANT_F16;
    }
    if (!rc)
        rc = plan_activations(lm, err);
    if (!rc)
        rc = q3_lm_open(lm, err); /* Qwen3-VL: DeepStack rows; nothing otherwise */
    if (rc) {
        lm_close(lm);
        return rc;
    }
    folio_log(FOLIO_LOG_INFO, "lm_open",
              "layers=%u embd=%u heads=%u/%u ff=%u vocab=%u weights_bytes=%" PRIu64
              " act_bytes=%" PRIu64 " max_tokens=%u batch=%u gpu_weights=\"%s\" f16_path=%d",
              h->n_layer, lm->E, h->n_head, h->n_head_kv, lm->F, lm->V, vkr_arena_used(lm->wa),
              vkr_arena_capacity(lm->aa), lm->cfg.max_tokens, lm->cfg.batch, why, lm->gemm16);
    *out = lm;
    return 0;
}

int lm_open_file(struct vkr *vk, const char *path, const struct lm_config *cfg, struct lm **out,
                 struct folio_err *err)
{
    struct gguf_model *m;
    int rc = gguf_model_open_text(path, &m, err);
    if (rc)
        return rc;
    rc = lm_open(vk, m, cfg, out, err);
    if (rc) {
        gguf_model_close(m);
        return rc;
    }
    (*out)->owned = m;
    return 0;
}

void lm_memory(const struct lm *lm, uint64_t *weights, uint64_t *activations)
{
    if (weights)
        *weights = vkr_arena_used(lm->wa);
    if (activations)
        *activations = vkr_arena_capacity(lm->aa);
}

/* The host staging plan_activations allocates. */
static void free_staging(struct lm *lm)
{
    free(lm->emb);
    free(lm->iv);
    free(lm->pgh);
    free(lm->seq_start);
    free(lm->seq_n);
    free(lm->next_pos);
    free(lm->lastlg);
    free(lm->lastlse);
    free(lm->rowbuf);
    free(lm->lab_row);
    free(lm->lg_row);
    free(lm->lab_qp);
    free(lm->lab_base);
    free(lm->lab_ka);
    lm->emb = NULL;
    lm->iv = NULL;
    lm->pgh = NULL;
    lm->seq_start = lm->seq_n = NULL;
    lm->next_pos = NULL;
    lm->lastlg = lm->rowbuf = NULL;
    lm->lastlse = NULL;
    lm->lab_row = lm->lg_row = lm->lab_qp = lm->lab_base = lm->lab_ka = NULL;
}

static int replan_to(struct lm *lm, uint32_t batch, struct folio_err *err)
{
    free_staging(lm);
    vkr_arena_destroy(lm->aa);
    lm->aa = NULL;
    lm->nseq = 0; /* the KV cache's prompts are gone */
    lm->cfg.batch = batch;
    int rc = vkr_arena_create(lm->vk, "lm-activations", VKR_ARENA_ACTIVATIONS, &lm->aa, err);
    return rc ? rc : plan_activations(lm, err);
}

int lm_replan(struct lm *lm, uint32_t batch, struct folio_err *err)
{
    if (batch == 0)
        return folio_err_set(err, FOLIO_EINVAL, "text model: a batch of 0 sequences");
    uint32_t old = lm->cfg.batch;
    int rc = replan_to(lm, batch, err);
    if (rc) {
        struct folio_err e2 = {0};
        if (replan_to(lm, old, &e2) != 0) {
            *err = e2;
            return e2.code ? e2.code : FOLIO_EDEVICE;
        }
    }
    return rc;
}

void lm_close(struct lm *lm)
{
    if (!lm)
        return;
    q3_lm_close(lm);
    if (lm->aa)
        vkr_arena_destroy(lm->aa);
    if (lm->wa)
        vkr_arena_destroy(lm->wa);
    free(lm->L);
    free_staging(lm);
    if (lm->owned)
        gguf_model_close(lm->owned);
    free(lm);
}

void lm_label_softmax(const double *logprob, uint32_t n, double *prob, int *best)
{
    double mx = -INFINITY;
    int b = 0;
    for (uint32_t i = 0; i < n; i++)
        if (logprob[i] > mx) {
            mx = logprob[i];
            b = (int)i;
        }
    if (prob) {
        double s = 0.0;
        for (uint32_t i = 0; i < n; i++)
            s += exp(logprob[i] - mx);
        for (uint32_t i = 0; i < n; i++)
            prob[i] = exp(logprob[i] - mx) / s;
    }
    if (best)
        *best = b;
}
