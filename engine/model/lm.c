/*
 * lm open/close: weights into a device arena, one activation plan, and the
 * pipeline list. The forward pass itself is lm_forward.c.
 *
 * Memory is decided here, once: every activation tensor is sized for the
 * worst pass the configuration allows (batch x max_tokens prompt rows plus
 * every label row) and placed at open, so a request never allocates. The
 * KV cache is one tensor per layer (K and V). A cache or a pass's queries
 * larger than one binding (maxStorageBufferRange) is attended to in query
 * and key chunks (op_attention_ranged), for which a small split scratch is
 * planned here; label rows attend straight into the cache (two key ranges
 * per row, lm_forward.c), and the shares of their split-K attention get
 * the scratch the op says it can take on this device. The cache is f16:
 * half the memory, and half the K/V reads of every attention over it.
 *
 * token_embd stays on the host (in the GGUF mapping): a prompt needs a few
 * thousand of its 152k rows, and the whole table would hold 0.3 GB of
 * device memory at Q4_K (2.2 GB as f32) for rows a pass never reads. It is
 * uploaded only when it doubles as the LM head (tied models). What
 * crosses per pass is each token row's raw row as stored (2,016 bytes at
 * Q4_K x 3,584, 1/7 of its f32 row), packed into a small activation
 * (erow, one pass's rows) and dequantized into the residual stream by one
 * gather on the first device (lm_forward.c): the CPU only copies bytes,
 * where dequantizing 1,400 rows and uploading their 20 MB of f32 took
 * 8-10 ms of a 95 ms H100 prefill. A type the gather lacks (and
 * FOLIO_LM_EMBED=host, for comparisons) keeps the host dequantize.
 *
 * Over two devices (lm_open_split) each device is a part: its layers'
 * weights and KV cache, and a whole activation set, because every device
 * runs every row of the pass (only the last has the head's buffers). The
 * layout (row capacities, alignments, chunk sizes) is shared and taken
 * against the tightest of the devices' limits, so one host staging and one
 * index upload serve all. The split is chosen before anything is placed:
 * vkr_plan_bytes gives each part's exact block bytes for every split
 * point, and the one that leaves both devices the same share of their
 * room wins; the weights arenas are told what comes (vkr_arena_expect) so
 * that estimate and placement agree. The lm's own fields always mirror
 * the current part (lm_part_use), which keeps the forward pass and the
 * family's hooks (engine/arch/arch.h) written for one device.
 */
#include "engine/model/lm_internal.h"
#include "engine/quant/quant.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The token embedding's tensor: the load item of the table entry flagged
 * ARCH_HOST_UNLESS_TIED (in the list whether it stays on the host or is
 * also the tied LM head). */
static const struct gguf_tensor_info *embedding_of(const struct gguf_model *m)
{
    for (uint64_t i = 0; i < m->n_items; i++)
        if (m->items[i].spec && (m->items[i].spec->flags & ARCH_HOST_UNLESS_TIED))
            return m->items[i].t;
    return NULL;
}

/* 1 where the gather can dequantize token_embd's rows of n_embd (its
 * type supported and the row a whole number of blocks, as op_gather
 * requires). lm_pipeline_keys and lm_open must agree on it: the pipeline
 * a pass records is pre-warmed only where this said so. */
static int embed_gatherable(const struct gguf_tensor_info *t, uint32_t E)
{
    if (!t || !quant_supported(t->type) || E == 0)
        return 0;
    int be = quant_block_elems(t->type);
    return be > 0 && E % (uint32_t)be == 0 && quant_row_bytes(t->type, E) != 0;
}

int lm_pipeline_keys(const struct vkr *vk, const struct gguf_model *m, int gpu_weights,
                     struct vkr_pipeline_key *out, int max)
{
    struct vkr_pipeline_key all[512];
    int n = 0;
    int types[8];
    int nt = gguf_model_matrix_types(m, types, 0, 8);
    for (int j = 0; j < nt; j++)
        n += ops_matmul_keys(vk, types[j], &all[n]);
    all[n++] = ops_gather_key(QUANT_F32);
    /* the token rows from their raw token_embd rows (lm_forward.c); an
     * F32 table's key is the one above (ops_keys_unique) */
    const struct gguf_tensor_info *embd = embedding_of(m);
    if (embed_gatherable(embd, m->text.n_embd))
        all[n++] = ops_gather_key(embd->type);
    all[n++] = ops_norm_key(0, 0);
    if (ops_gemm_available(vk))
        all[n++] = ops_norm_key(0, 1);
    all[n++] = ops_softmax_key();
    /* Q rotated in place and K from f32 staging into the f16 KV cache, in
     * the family's rotary layout (the self-test's too) */
    all[n++] = ops_rope_key(m->text.arch->rope_mode, 0, 0);
    all[n++] = ops_rope_key(m->text.arch->rope_mode, 1, 0);
    if (ops_gemm_available(vk)) {
        /* Q/K/V as one product (lm_qkv_fused): q, k and v out of its f16 rows */
        all[n++] = ops_rope_key(m->text.arch->rope_mode, 0, 1);
        all[n++] = ops_rope_key(m->text.arch->rope_mode, 1, 1);
    }
    all[n++] = ops_convert_key(1); /* V into the cache where no GEMM writes f16 */
    n += ops_attention_keys(vk, m->text.head_dim, OP_ATTN_IO_KV16, &all[n]);
    n += ops_attention_split_keys(1, &all[n]); /* attention past one binding */
    all[n++] = ops_attention_combine_key(); /* the label pass's split K */
    all[n++] = ops_elem_key(OP_ADD);
    all[n++] = ops_elem_key(OP_SWIGLU);
    /* the GEMM forms specialized for this model's K: every projection reads
     * n_embd columns, the down projection n_ff, the output projection the
     * attention width */
    /* (with the widest product of each K: n_embd columns feed q/k/v and
     * the MLP's gate/up, n_ff the down projection, the attention width the
     * output projection) */
    uint32_t qkv = (m->text.n_head + 2 * m->text.n_head_kv) * m->text.head_dim;
    n += ops_gemm_keys_for_k(vk, m->text.n_embd, m->text.n_ff > qkv ? m->text.n_ff : qkv, &all[n]);
    n += ops_gemm_keys_for_k(vk, m->text.n_ff, m->text.n_embd, &all[n]);
    n += ops_gemm_keys_for_k(vk, m->text.n_head * m->text.head_dim, m->text.n_embd, &all[n]);
    if (gpu_weights == OPS_WEIGHTS_INT8) {
        /* f32 outputs: q, k, gate and the head read n_embd, down n_ff, o the
         * attention width; f16 outputs (q/k/v as one, v, up) read n_embd
         * (lm_forward.c) */
        const uint32_t ks[] = {m->text.n_embd, m->text.n_ff, m->text.n_head * m->text.head_dim};
        n += ops_matmul_i8_keys(vk, types, nt, ks, 3, &m->text.n_embd, 1, &all[n]);
    }
    if (m->text.arch->hook_keys) /* the family's hooks (engine/arch/arch.h) */
        n += m->text.arch->hook_keys(&all[n]);
    n = ops_keys_unique(all, n);
    int k = n < max ? n : max;
    if (n > max) /* a caller's list too short: the keys left out would miss after seal */
        folio_log(FOLIO_LOG_ERROR, "lm_pipeline_keys_truncated", "keys=%d room=%d", n, max);
    if (out)
        memcpy(out, all, (size_t)k * sizeof *out);
    return k;
}

void lm_set_gemm_split(struct lm *lm, uint32_t split_k, int i8_tiles)
{
    lm->split_k = split_k;
    lm->i8_tiles = (enum op_mm_tiles)i8_tiles;
}

const struct gguf_text_hparams *lm_hparams(const struct lm *lm)
{
    return &lm->hp;
}

double lm_last_submit_ms(const struct lm *lm)
{
    return lm->last_ms;
}

/* Matrices go through staging to be converted (to_f16: the form ops_weights_form chose). */
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

/* A layer's q, k or v weight or bias into its part of the layer's fused
 * region (ops_fused_upload: [q | k | v] rows of the model width, the
 * biases one vector); any other tensor, or a part that does not fit the
 * region, as a tensor of its own. */
static int upload_slot(struct lm *lm, const struct gguf_load_item *it, struct lm_w *w,
                       struct vkr_arena *staging, int to_f16, struct folio_err *err)
{
    const struct gguf_tensor_info *t = it->t;
    struct lm_layer *L = it->spec && it->spec->group == ARCH_LAYER ? &lm->L[it->index] : NULL;
    struct lm_w *parts[2][3] = {{NULL}};
    if (L) {
        parts[0][0] = &L->wq, parts[0][1] = &L->wk, parts[0][2] = &L->wv;
        parts[1][0] = &L->bq, parts[1][1] = &L->bk, parts[1][2] = &L->bv;
    }
    int b = -1, j = -1;
    for (int i = 0; i < 6 && L; i++)
        if (w == parts[i / 3][i % 3])
            b = i / 3, j = i % 3;
    if (b < 0)
        return upload_tensor(lm, t, w, staging, to_f16, err);
    const uint32_t QW = lm->QW, KW = lm->KW, all = QW + 2 * KW;
    struct ops_fused *f = b ? &L->fb : &L->fq;
    if (!f->nparts) {
        const uint32_t rows[3] = {QW, KW, KW};
        f->nparts = 3;
        for (int i = 0; i < 3; i++) {
            f->part[i].n = b ? 1 : rows[i];
            f->part[i].k = b ? rows[i] : lm->E;
        }
    }
    w->k = (uint32_t)t->ne[0];
    w->n = (uint32_t)(t->n_elems / t->ne[0]);
    int mat = t->n_dims == 2;
    int to = mat ? ops_weight_type(lm->vk, t->type, w->n, w->k, to_f16) : t->type;
    int rc = ops_fused_upload(lm->vk, lm->wa, mat ? staging : NULL, f, (uint32_t)j, t->data,
                              t->type, w->n, w->k, to, &w->t, err);
    if (rc) {
        folio_err_context(err, "uploading tensor %s (%" PRIu64 " bytes)", t->name, t->n_bytes);
        return rc;
    }
    w->type = to;
    if (f->set)
        *(b ? &L->bqkv : &L->wqkv) = (struct lm_w){.t = f->t, .type = f->type, .n = b ? 1 : all,
                                                   .k = b ? all : lm->E};
    return 0;
}

/* Q/K/V as one product (lm_forward.c's record_layer) where the f16 data
 * path runs, the layer's region is complete (and its biases', where it has
 * any) and the [q | k | v] f16 rows of a full pass fit o; a family q/k
 * hook (it takes q and k as f32 rows, unpacked from the fused ones) also
 * needs k's f32 rows to fit t2. */
/* Bytes of the fused product's f16 [q | k | v] rows for `rows` rows, with
 * the slack the k and v slices' last rows run into (op_rope reads whole
 * strides): what plan_layout gives o, and what lm_qkv_fused checks. */
static uint64_t qkv_rows_bytes(const struct lm *lm, uint64_t rows)
{
    return rows * ((uint64_t)lm->QW + 2 * lm->KW) * 2 + ((uint64_t)lm->QW + lm->KW) * 2;
}

int lm_qkv_fused(const struct lm *lm, const struct lm_layer *L)
{
    int nobias = !L->bq.t.size && !L->bk.t.size && !L->bv.t.size;
    uint64_t need = qkv_rows_bytes(lm, lm->rows_cap);
    int hook_ok = !lm->arch->hook_qk || (uint64_t)lm->rows_cap * lm->KW * 4 <= lm->t2.size;
    return lm->gemm16 && !lm->qkv_apart && L->wqkv.t.size && (nobias || L->bqkv.t.size) &&
           hook_ok && need <= lm->o.size;
}

int lm_embed_gpu(const struct lm *lm)
{
    return lm->emb_gpu;
}

void lm_paths(const struct lm *lm, int *f16_path, uint32_t *qkv_fused)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < lm->hp.n_layer; i++)
        n += lm_qkv_fused(lm, &lm->L[i]);
    if (f16_path)
        *f16_path = lm->gemm16;
    if (qkv_fused)
        *qkv_fused = n;
}

/* The slot a load item's table entry names (engine/arch/arch.h): in the
 * lm, or in its block. */
static struct lm_w *slot_of(struct lm *lm, const struct gguf_load_item *it)
{
    const struct arch_tensor *s = it->spec;
    if (!s || s->load != ARCH_LOAD_SLOT || (s->group == ARCH_LAYER && it->index >= lm->hp.n_layer))
        return NULL;
    char *base = s->group == ARCH_LAYER ? (char *)&lm->L[it->index] : (char *)lm;
    return (struct lm_w *)(base + s->slot);
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

/* ---- devices ---- */

/* The per-device fields a part holds and the lm mirrors for part[cur]. */
#define LM_PART_FIELDS(X)                                                                    \
    X(vk) X(wa) X(aa) X(x) X(h) X(q) X(o) X(t2) X(gate) X(up) X(ksp) X(lg_h) X(lg_hn)         \
    X(logits) X(probs) X(pg) X(ints) X(asc) X(sk) X(erow)

/* The current part's fields back into part[cur]. */
static void part_save(struct lm *lm)
{
    struct lm_part *P = &lm->part[lm->cur];
#define SAVE(f) P->f = lm->f;
    LM_PART_FIELDS(SAVE)
#undef SAVE
}

/* part[p]'s fields into the lm's own (without saving the current ones). */
static void part_load(struct lm *lm, uint32_t p)
{
    const struct lm_part *P = &lm->part[p];
#define LOAD(f) lm->f = P->f;
    LM_PART_FIELDS(LOAD)
#undef LOAD
    lm->cur = p;
}

void lm_part_use(struct lm *lm, uint32_t p)
{
    if (p == lm->cur)
        return;
    part_save(lm);
    part_load(lm, p);
}

/* Row counts whose views stay aligned on every device of the model. */
static uint64_t align_rows_all(const struct lm *lm, uint64_t row_bytes)
{
    uint64_t a = 1;
    for (uint32_t p = 0; p < lm->nparts; p++)
        a = lcm_u64(a, ops_align_rows(lm->part[p].vk, row_bytes));
    return a;
}

/* The tightest of the devices' limits (the layout is shared). */
static struct vkr_limits limits_all(const struct lm *lm)
{
    struct vkr_limits l = *vkr_limits(lm->part[0].vk);
    for (uint32_t p = 1; p < lm->nparts; p++) {
        const struct vkr_limits *o = vkr_limits(lm->part[p].vk);
        l.max_range = o->max_range < l.max_range ? o->max_range : l.max_range;
        l.block_size = o->block_size < l.block_size ? o->block_size : l.block_size;
        l.min_ssbo_align = (uint32_t)lcm_u64(l.min_ssbo_align ? l.min_ssbo_align : 4,
                                             o->min_ssbo_align ? o->min_ssbo_align : 4);
    }
    return l;
}

/* Which device of a split a failure was on (both may be one physical GPU). */
static void part_context(const struct lm *lm, uint32_t p, struct folio_err *err)
{
    const struct lm_part *P = &lm->part[p];
    folio_err_context(err, "the %s of %u devices (%d: %s) with layers %u..%u%s, planned "
                      "need %" PRIu64 " bytes", p == 0 ? "first" : "second", lm->nparts,
                      vkr_device(P->vk)->index, vkr_device(P->vk)->name, P->l0,
                      P->l1 ? P->l1 - 1 : 0, p == lm->nparts - 1 ? " and the LM head" : "",
                      P->need);
}

/* ---- activations ---- */

/* Sizes every activation for the worst pass (shared by all devices: each
 * runs every row of the pass through its layers). Fixed order: the plan
 * and the allocations must agree. */
static int plan_layout(struct lm *lm, struct folio_err *err)
{
    const struct vkr_limits L = limits_all(lm), *lim = &L;
    uint64_t align = lim->min_ssbo_align ? lim->min_ssbo_align : 4;
    uint64_t r1 = align_rows_all(lm, (uint64_t)lm->QW * 4);
    uint64_t r2 = align_rows_all(lm, (uint64_t)lm->KW * 4); /* K / V staging */
    uint64_t r3 = align_rows_all(lm, (uint64_t)lm->KW * 2); /* the f16 cache */
    lm->ra = (uint32_t)lcm_u64(lcm_u64(r1, r2), r3);
    lm->ialign = (uint32_t)(align >= 4 ? align / 4 : 1);
    const struct lm_config *c = &lm->cfg;
    uint64_t B = c->batch, T = c->max_tokens, NL = c->max_labels, LT = c->max_label_tokens;
    /* label rows are dense after the prompts' rows, from an aligned row
     * (lm_forward.c) */
    uint64_t label_rows = B * NL * (LT - 1);
    uint64_t rows = B * T + lm->ra + label_rows;
    uint64_t kv = rows + lm->ra;
    uint64_t lg = B + (B * NL * (LT - 1) > (c->all_logits ? B * T : 0)
                           ? B * NL * (LT - 1)
                           : (c->all_logits ? B * T : 0));
    uint64_t pg = B * NL * LT;
    /* the pass's index sections (lm_forward.c pass_plan), each aligned:
     * positions, prompt key ranges, label key ranges (two per row), logits
     * rows, probabilities, and the last layer's rows alone (the tail: one
     * row per logits row, positions and two key ranges), and the rows of
     * image rows taken on the device (lm_seq.dev), and each row's raw
     * token_embd row (the embedding gather) */
    uint64_t ints = rows * 3 + B * T * 2 + label_rows * 4 + lg + pg + lg * 7 + B * T + rows +
                    9 * lm->ialign;
    if (rows > UINT32_MAX / 8 || ints > UINT32_MAX / 8 || lg * lm->V > UINT32_MAX)
        return folio_err_set(err, FOLIO_ELIMIT, "text model: %" PRIu64 " rows per pass is too many",
                             rows);
    /* Attention operands past one binding go through the split path; its
     * scratch is only worth its memory where that can happen. */
    uint64_t asb[4] = {16, 16, 16, 16};
    if (kv * lm->KW * 2 > lim->max_range || rows * lm->QW * 4 > lim->max_range)
        for (uint32_t p = 0; p < lm->nparts; p++) {
            uint64_t b[4] = {16, 16, 16, 16};
            op_attention_scratch_bytes(lm->part[p].vk, (uint32_t)rows, lm->hp.n_head, lm->D, b);
            for (int i = 0; i < 4; i++)
                asb[i] = b[i] > asb[i] ? b[i] : asb[i];
        }
    /* The label rows' split-K shares (and the tail's: the label rows and
     * each prompt's last): what the op can take for them on the tightest
     * device (or the forced count); nothing where none splits. */
    uint64_t ksb[2] = {16, 16};
    for (uint32_t p = 0; p < lm->nparts; p++) {
        uint64_t b[2];
        op_attention_ksplit_bytes(lm->part[p].vk, (uint32_t)(label_rows + B), lm->hp.n_head, lm->D,
                                  c->attn_splits, b);
        for (int i = 0; i < 2; i++)
            ksb[i] = b[i] > ksb[i] ? b[i] : ksb[i];
    }
    if ((uint64_t)lm->V * 4 > lim->max_range)
        return too_big(lm, "one logits row", (uint64_t)lm->V * 4, err);
    lm->rows_cap = (uint32_t)rows;
    lm->kv_cap = (uint32_t)kv;
    lm->lg_cap = (uint32_t)lg;
    lm->ints_cap = (uint32_t)ints;

    uint64_t E = lm->E, QW = lm->QW, KW = lm->KW, F = lm->F, V = lm->V;
    uint64_t *sizes = lm->act_sz;
    int n = 0;
    sizes[n++] = rows * E * 4;  /* x */
    sizes[n++] = rows * E * 4;  /* h */
    sizes[n++] = rows * QW * 4; /* q */
    /* o: the attention's output, and before it the fused Q/K/V product's
     * f16 [q | k | v] rows with the slack its k and v slices' last rows
     * run into (lm_qkv_fused: wider than q's f32 rows where KW > QW / 2) */
    uint64_t qkv_rows = qkv_rows_bytes(lm, rows);
    sizes[n++] = rows * QW * 4 > qkv_rows ? rows * QW * 4 : qkv_rows;
    sizes[n++] = rows * E * 4;  /* t2 */
    /* The MLP runs in row chunks whose gate/up fit one device block: a
     * batch of pages is tens of thousands of rows, and rows x n_ff floats
     * would pass the block size (1 GiB) long before the rest does. Chunks
     * are whole multiples of the rows that keep every view aligned. */
    uint64_t fg = lcm_u64(lcm_u64(align_rows_all(lm, E * 4), align_rows_all(lm, E * 2)),
                          lcm_u64(align_rows_all(lm, F * 4), align_rows_all(lm, F * 2)));
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
    sizes[n++] = ksb[0];        /* split-K attention: the shares' outputs */
    sizes[n++] = ksb[1];        /* and their log-sum-exps */
    sizes[n++] = lg * E * 4;    /* lg_h */
    sizes[n++] = lg * E * 4;    /* lg_hn */
    sizes[n++] = lg * V * 4;    /* logits */
    sizes[n++] = lg * V * 4;    /* probs */
    sizes[n++] = pg * 4;        /* pg */
    sizes[n++] = ints * 4;      /* ints */
    for (int i = 0; i < 4; i++)
        sizes[n++] = asb[i];    /* split attention scratch */
    uint64_t skb = 16;
    for (uint32_t p = 0; p < lm->nparts; p++) {
        uint64_t b = op_matmul_split_bytes(lm->part[p].vk);
        skb = lm->gemm16 && b > skb ? b : skb;
    }
    sizes[n++] = skb;           /* split-K scratch */
    /* the pass's raw token_embd rows, at most one per row (emb_gpu) */
    sizes[n++] = lm->emb_gpu ? rows * lm->emb_rb : 16;
    lm->kv_bytes = kv * KW * 2; /* f16 */
    return 0;
}

/* Index of the head's activations in act_sz (lg_h .. pg): only the last
 * device has the LM head, the others plan them as empty. */
static int is_head_act(int i)
{
    return i >= 9 && i <= 13;
}

/* Index of erow in act_sz: only the first device gathers token rows, the
 * others plan it as empty. */
static int is_first_act(int i)
{
    return i == 20;
}

/* act_sz[i] as part p of nparts plans it. */
static uint64_t act_size(const struct lm *lm, uint32_t p, uint32_t nparts, int i)
{
    if ((p != nparts - 1 && is_head_act(i)) || (p != 0 && is_first_act(i)))
        return 4;
    return lm->act_sz[i];
}

/* The activation plan of part p (its layers' KV cache included). */
static uint64_t part_act_sizes(const struct lm *lm, uint32_t p, uint64_t *sizes)
{
    const struct lm_part *P = &lm->part[p];
    int n = 0;
    uint64_t sum = 0;
    for (int i = 0; i < LM_NACT; i++)
        sizes[n++] = act_size(lm, p, lm->nparts, i);
    for (uint32_t i = P->l0; i < P->l1; i++) {
        sizes[n++] = lm->kv_bytes;
        sizes[n++] = lm->kv_bytes;
    }
    for (int i = 0; i < n; i++)
        sum += (sizes[i] + VKR_TENSOR_ALIGN - 1) / VKR_TENSOR_ALIGN * VKR_TENSOR_ALIGN;
    return sum;
}

static int plan_part(struct lm *lm, uint32_t p, struct folio_err *err)
{
    lm_part_use(lm, p);
    const struct lm_part *P = &lm->part[p];
    uint32_t nsz = LM_NACT + 2 * (P->l1 - P->l0);
    uint64_t *sizes = malloc(nsz * sizeof *sizes);
    if (!sizes)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    part_act_sizes(lm, p, sizes);
    int rc = vkr_arena_plan(lm->aa, sizes, (int)nsz, err);
    if (rc) {
        free(sizes);
        if (rc == FOLIO_ELIMIT) /* the arena's generic hint, in this model's knobs */
            folio_err_hint(err, "lower --max-tokens or --batch (now %u tokens x %u sequences)",
                           lm->cfg.max_tokens, lm->cfg.batch);
        return rc;
    }
    vkr_arena_reset(lm->aa);
    struct vkr_tensor *dst[LM_NACT] = {&lm->x, &lm->h, &lm->q, &lm->o, &lm->t2, &lm->gate,
                                       &lm->up, &lm->ksp.o, &lm->ksp.lse, &lm->lg_h,
                                       &lm->lg_hn, &lm->logits, &lm->probs, &lm->pg, &lm->ints,
                                       &lm->asc.o, &lm->asc.lse, &lm->asc.lse_c, &lm->asc.ranges,
                                       &lm->sk, &lm->erow};
    for (int i = 0; i < LM_NACT && !rc; i++)
        rc = vkr_arena_alloc(lm->aa, sizes[i], dst[i], err);
    for (uint32_t i = P->l0; i < P->l1 && !rc; i++) {
        rc = vkr_arena_alloc(lm->aa, lm->kv_bytes, &lm->L[i].kc, err);
        if (!rc)
            rc = vkr_arena_alloc(lm->aa, lm->kv_bytes, &lm->L[i].vc, err);
    }
    free(sizes);
    part_save(lm);
    return rc;
}

/* Host staging for one pass (shared by the devices). */
static int plan_host(struct lm *lm, struct folio_err *err)
{
    const struct lm_config *c = &lm->cfg;
    uint64_t B = c->batch, NL = c->max_labels, LT = c->max_label_tokens;
    uint64_t rows = lm->rows_cap, ints = lm->ints_cap, V = lm->V, E = lm->E;
    uint64_t pg = B * NL * LT;
    lm->lab_row = malloc((size_t)B * NL * sizeof *lm->lab_row);
    lm->lg_row = malloc((size_t)B * NL * sizeof *lm->lg_row);
    lm->emb = malloc((size_t)rows * E * sizeof *lm->emb);
    lm->erow_h = malloc(lm->emb_gpu ? (size_t)(rows * lm->emb_rb) : 1);
    lm->iv = malloc((size_t)ints * sizeof *lm->iv);
    lm->pgh = malloc((size_t)pg * sizeof *lm->pgh);
    lm->seq_start = calloc(B, sizeof *lm->seq_start);
    lm->seq_n = calloc(B, sizeof *lm->seq_n);
    lm->next_pos = calloc(B, sizeof *lm->next_pos);
    lm->lastlg = malloc((size_t)B * V * sizeof *lm->lastlg);
    lm->lastlse = malloc((size_t)B * sizeof *lm->lastlse);
    lm->rowbuf = malloc((size_t)V * sizeof *lm->rowbuf);
    if (!lm->emb || !lm->erow_h || !lm->iv || !lm->pgh || !lm->seq_start || !lm->seq_n ||
        !lm->next_pos || !lm->lastlg || !lm->lastlse || !lm->rowbuf || !lm->lab_row ||
        !lm->lg_row)
        return folio_err_set(err, FOLIO_ENOMEM, "text model: out of host memory for %" PRIu64
                             " staging rows", rows);
    return 0;
}

static int plan_activations(struct lm *lm, struct folio_err *err)
{
    int rc = plan_layout(lm, err);
    for (uint32_t p = 0; p < lm->nparts && !rc; p++)
        if ((rc = plan_part(lm, p, err)) != 0 && lm->nparts > 1)
            part_context(lm, p, err);
    if (!rc)
        rc = plan_host(lm, err);
    return rc;
}

/* ---- the split ---- */

/* The layer a tensor belongs to; n_layer for the head and anything else. */
static uint32_t tensor_layer(const struct lm *lm, const struct gguf_load_item *it)
{
    if (it->spec && it->spec->group == ARCH_LAYER && it->index < lm->hp.n_layer)
        return it->index;
    return lm->hp.n_layer;
}

static uint32_t part_of_layer(const struct lm *lm, uint32_t li)
{
    for (uint32_t p = 0; p < lm->nparts; p++)
        if (li >= lm->part[p].l0 && li < lm->part[p].l1)
            return p;
    return lm->nparts - 1; /* the head */
}

/* Device bytes of a tensor as ops_upload_weight will place it. */
static uint64_t tensor_bytes(const struct vkr *vk, const struct gguf_tensor_info *t, int to_f16)
{
    uint64_t n = t->n_elems / t->ne[0], k = (uint64_t)t->ne[0], b = t->n_bytes;
    if (t->n_dims == 2 && n <= UINT32_MAX && k <= UINT32_MAX)
        b = quant_row_bytes(ops_weight_type(vk, t->type, (uint32_t)n, (uint32_t)k, to_f16), k) * n;
    return (b + VKR_TENSOR_ALIGN - 1) / VKR_TENSOR_ALIGN * VKR_TENSOR_ALIGN;
}

static char *human_mib(uint64_t b, char *buf, size_t n)
{
    snprintf(buf, n, "%.1f MiB", (double)b / (double)(1u << 20));
    return buf;
}

/* What each device needs for the split at s: the weights arena of its
 * layers (+ the head on the last) as vkr would place them, its
 * activations with its layers' KV cache, and the f16 expansion's staging
 * (stage). wsz: each device tensor's bytes on each device, in upload
 * order; sizes: room for them. */
static void split_needs(const struct lm *lm, const uint64_t *wsz, const uint64_t *stage,
                        uint64_t *sizes, uint32_t s, uint64_t need[2])
{
    const struct gguf_model *m = lm->m;
    uint32_t nl = lm->hp.n_layer;
    for (uint32_t p = 0; p < 2; p++) {
        int n = 0;
        for (uint64_t i = 0; i < m->n_items; i++) {
            uint32_t li = tensor_layer(lm, &m->items[i]);
            if (wsz[p * m->n_items + i] && (p ? li >= s : li < s))
                sizes[n++] = wsz[p * m->n_items + i];
        }
        need[p] = vkr_plan_bytes(lm->part[p].vk, VKR_ARENA_WEIGHTS, sizes, n);
        n = 0;
        for (int i = 0; i < LM_NACT; i++)
            sizes[n++] = act_size(lm, p, 2, i);
        for (uint32_t i = p ? s : 0; i < (p ? nl : s); i++) {
            sizes[n++] = lm->kv_bytes;
            sizes[n++] = lm->kv_bytes;
        }
        need[p] += vkr_plan_bytes(lm->part[p].vk, VKR_ARENA_ACTIVATIONS, sizes, n) + stage[p];
    }
}

/* Chooses layers [0, s) for the first device (or checks cfg.split_layer). */
static int plan_split(struct lm *lm, struct folio_err *err)
{
    uint32_t nl = lm->hp.n_layer, lo = lm->hp.n_deepstack > 1 ? lm->hp.n_deepstack : 1;
    struct lm_part *P = lm->part;
    if (nl < 2 || lo >= nl)
        return folio_err_set(err, FOLIO_EINVAL, "text model: %u layers (%u of them DeepStack) "
                             "cannot be split over two devices", nl, lm->hp.n_deepstack);
    /* per device (its own f16 choice and block size): each device tensor's bytes */
    uint64_t ni = lm->m->n_items;
    uint64_t *wsz = calloc(2 * ni + 1, sizeof *wsz);
    uint64_t *sizes = calloc(ni + LM_NACT + 2 * (uint64_t)nl + 1, sizeof *sizes);
    if (!wsz || !sizes) {
        free(wsz);
        free(sizes);
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    }
    char why[200];
    uint64_t stage[2] = {0, 0};
    for (uint32_t p = 0; p < 2; p++) {
        int to_f16 = ops_weights_form(P[p].vk, (enum ops_gpu_weights)lm->cfg.gpu_weights,
                                     gguf_model_matrix_f16_bytes(lm->m), why, sizeof why);
        uint64_t big = 0; /* the largest native matrix: what lm-staging holds at a time */
        for (uint64_t i = 0; i < ni; i++) {
            const struct gguf_tensor_info *t = lm->m->items[i].t;
            if (lm->m->items[i].on_host)
                continue;
            wsz[p * ni + i] = tensor_bytes(P[p].vk, t, to_f16);
            if (t->n_dims == 2 && t->n_bytes > big)
                big = t->n_bytes;
        }
        /* the f16 expansion's staging arena lives next to the weights while
         * they load: its first block, and one more when a matrix passes it */
        uint64_t first = 16ull << 20, bs = vkr_limits(P[p].vk)->block_size;
        first = first < bs ? first : bs;
        stage[p] = !to_f16 ? 0 : big > first ? first + (big < bs ? bs : big) : first;
        P[p].room = vkr_room(P[p].vk);
    }
    uint32_t best = 0;
    double best_r = INFINITY;
    uint64_t need[2];
    for (uint32_t s = lo; s < nl; s++) {
        if (lm->cfg.split_layer && s != lm->cfg.split_layer)
            continue;
        split_needs(lm, wsz, stage, sizes, s, need);
        double r0 = P[0].room ? (double)need[0] / (double)P[0].room : INFINITY;
        double r1 = P[1].room ? (double)need[1] / (double)P[1].room : INFINITY;
        double r = r0 > r1 ? r0 : r1;
        if (r < best_r) {
            best_r = r;
            best = s;
        }
    }
    if (!best && !lm->cfg.split_layer)
        best = lo; /* no device has any room: the message names the first split */
    if (lm->cfg.split_layer && !best) {
        free(wsz);
        free(sizes);
        return folio_err_set(err, FOLIO_EINVAL, "text model: split_layer %u is outside %u..%u "
                             "(%u layers, the first device keeps at least one and the DeepStack "
                             "ones)", lm->cfg.split_layer, lo, nl - 1, nl);
    }
    split_needs(lm, wsz, stage, sizes, best, need);
    free(wsz);
    free(sizes);
    P[0].l0 = 0;
    P[0].l1 = P[1].l0 = best;
    P[1].l1 = nl;
    P[0].need = need[0];
    P[1].need = need[1];
    if (best_r > 1.0 && !lm->cfg.split_layer) {
        char a[32], b[32], c2[32], d[32];
        folio_err_set(err, FOLIO_ENOMEM, "text model does not fit devices %d (%s) and %d (%s) "
                      "together: at its best split (layers 0..%u | %u..%u) the first needs %s and "
                      "has room for %s, the second needs %s and has room for %s",
                      vkr_device(P[0].vk)->index, vkr_device(P[0].vk)->name,
                      vkr_device(P[1].vk)->index, vkr_device(P[1].vk)->name, best - 1, best,
                      nl - 1, human_mib(need[0], a, sizeof a), human_mib(P[0].room, b, sizeof b),
                      human_mib(need[1], c2, sizeof c2), human_mib(P[1].room, d, sizeof d));
        folio_err_hint(err, "use devices with more memory, a smaller quantisation, or lower "
                       "--max-tokens / --gpu-batch (the KV cache and activations scale with them)");
        return FOLIO_ENOMEM;
    }
    char q0[300], q1[300];
    folio_log(FOLIO_LOG_INFO, "lm_split", "layers=%u split=%u dev0=%s need0=%" PRIu64
              " room0=%" PRIu64 " dev1=%s need1=%" PRIu64 " room1=%" PRIu64 " chosen=%s", nl, best,
              folio_lq(q0, sizeof q0, vkr_device(P[0].vk)->name), need[0], P[0].room,
              folio_lq(q1, sizeof q1, vkr_device(P[1].vk)->name), need[1], P[1].room,
              lm->cfg.split_layer ? "configured" : "planner");
    return 0;
}

/* ---- open ---- */

static void lm_defaults(struct lm *lm, const struct gguf_model *m, const struct lm_config *cfg)
{
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
    lm->arch = h->arch;
    lm->rope_mode = h->arch->rope_mode;
}

static int check_shape(const struct lm *lm, struct folio_err *err)
{
    const struct gguf_text_hparams *h = &lm->hp;
    if (!ops_attention_head_supported(lm->D))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "text model: head size %u has no attention "
                             "kernel (even sizes up to 256 are supported)", lm->D);
    if (h->mrope_sections[0] + h->mrope_sections[1] + h->mrope_sections[2] != (int)lm->D / 2)
        return folio_err_set(err, FOLIO_EMODEL, "text model: M-RoPE sections %d+%d+%d do not "
                             "cover head_dim/2 = %u", h->mrope_sections[0], h->mrope_sections[1],
                             h->mrope_sections[2], lm->D / 2);
    return 0;
}

/* Every device tensor into the weights arena of its layer's device
 * (matrices through that device's staging when expanded to f16). */
static int upload_weights(struct lm *lm, char *why, size_t why_n, struct folio_err *err)
{
    const struct gguf_model *m = lm->m;
    struct vkr_arena *staging[LM_MAX_DEVICES] = {0};
    int to_f16[LM_MAX_DEVICES] = {0}, rc = 0;
    for (uint32_t p = 0; p < lm->nparts && !rc; p++) {
        lm_part_use(lm, p);
        if ((to_f16[p] = ops_weights_form(lm->vk, (enum ops_gpu_weights)lm->cfg.gpu_weights,
                                         gguf_model_matrix_f16_bytes(m), why, why_n)))
            rc = vkr_arena_create(lm->vk, "lm-staging", VKR_ARENA_WEIGHTS, &staging[p], err);
        if (!rc && lm->nparts > 1) { /* blocks sized to what comes, not grown past it */
            uint64_t w = 0;
            for (uint64_t i = 0; i < m->n_items; i++)
                if (!m->items[i].on_host &&
                    part_of_layer(lm, tensor_layer(lm, &m->items[i])) == p)
                    w += tensor_bytes(lm->vk, m->items[i].t, to_f16[p]);
            vkr_arena_expect(lm->wa, w);
        }
    }
    for (uint64_t i = 0; !rc && i < m->n_items; i++) {
        const struct gguf_tensor_info *t = m->items[i].t;
        if (m->items[i].on_host)
            continue;
        struct lm_w *w = slot_of(lm, &m->items[i]);
        if (!w) {
            rc = folio_err_set(err, FOLIO_EMODEL, "text model: unexpected tensor %s", t->name);
            break;
        }
        uint32_t p = part_of_layer(lm, tensor_layer(lm, &m->items[i]));
        lm_part_use(lm, p);
        rc = upload_slot(lm, &m->items[i], w, staging[p], to_f16[p], err);
        if (rc && lm->nparts > 1)
            part_context(lm, p, err);
    }
    for (uint32_t p = 0; p < lm->nparts; p++)
        vkr_arena_destroy(staging[p]);
    if (!rc && !lm->out_w.t.size)
        rc = folio_err_set(err, FOLIO_EMODEL, "text model: no LM head (output.weight)");
    return rc;
}

int lm_open_split(struct vkr *const *vks, uint32_t n, const struct gguf_model *m,
                  const struct lm_config *cfg, struct lm **out, struct folio_err *err)
{
    *out = NULL;
    if (!m || m->is_vision || !m->text.arch)
        return folio_err_set(err, FOLIO_EINVAL, "lm_open needs a checked text model "
                             "(gguf_model_open_text)");
    if (n < 1 || n > LM_MAX_DEVICES)
        return folio_err_set(err, FOLIO_EINVAL, "text model: %u devices; one model runs on 1..%d",
                             n, LM_MAX_DEVICES);
    struct lm *lm = calloc(1, sizeof *lm);
    if (!lm)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    lm_defaults(lm, m, cfg);
    const struct gguf_text_hparams *h = &lm->hp;
    lm->nparts = n;
    int rc = check_shape(lm, err);
    lm->embd = embedding_of(m);
    /* FOLIO_LM_EMBED=host: token rows dequantized on the host (the path a
     * type without a gather takes), for comparisons against the gather */
    const char *ee = getenv("FOLIO_LM_EMBED");
    lm->emb_gpu = embed_gatherable(lm->embd, lm->E) && !(ee && strcmp(ee, "host") == 0);
    lm->emb_rb = lm->emb_gpu ? quant_row_bytes(lm->embd->type, lm->E) : 0;
    lm->L = calloc(h->n_layer ? h->n_layer : 1, sizeof *lm->L);
    if (!rc && (!lm->L || !lm->embd))
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t p = 0; p < n && !rc; p++) {
        struct lm_part *P = &lm->part[p];
        P->vk = vks[p];
        P->l0 = p ? h->n_layer : 0;
        P->l1 = h->n_layer;
        rc = vkr_arena_create(vks[p], "lm-weights", VKR_ARENA_WEIGHTS, &P->wa, err);
        if (!rc)
            rc = vkr_arena_create(vks[p], "lm-activations", VKR_ARENA_ACTIVATIONS, &P->aa, err);
    }
    /* part[0] current: its fields in the lm's own */
    part_load(lm, 0);
    if (!rc)
        rc = plan_layout(lm, err); /* the layout the split's estimate needs */
    /* the family's state (Qwen3-VL: DeepStack rows on the first device),
     * before the split so that its room counts them */
    if (!rc && lm->arch->hook_open)
        rc = lm->arch->hook_open(lm, err);
    if (!rc && n > 1)
        rc = plan_split(lm, err);
    char why[200] = "";
    if (!rc)
        rc = upload_weights(lm, why, sizeof why, err);
    /* the f16 data path: every layer matrix in a form the tensor-core GEMM
     * reads (f16, or int8 rows where the int8 GEMM runs) on every device */
    lm->gemm16 = !rc && lm->E % 2 == 0 && lm->F % 2 == 0;
    int i8 = 1;
    for (uint32_t p = 0; p < n && lm->gemm16; p++) {
        lm->gemm16 = ops_gemm_available(lm->part[p].vk);
        i8 &= ops_gemm_i8_available(lm->part[p].vk);
    }
    for (uint32_t i = 0; lm->gemm16 && i < h->n_layer; i++) {
        const struct lm_w *ws[] = {&lm->L[i].wq, &lm->L[i].wk, &lm->L[i].wv, &lm->L[i].wo,
                                   &lm->L[i].wg, &lm->L[i].wu, &lm->L[i].wd};
        for (size_t j = 0; j < sizeof ws / sizeof ws[0]; j++)
            lm->gemm16 &= ws[j]->type == QUANT_F16 || (i8 && ws[j]->type == QUANT_I8R);
    }
    if (!rc)
        rc = plan_activations(lm, err);
    lm_part_use(lm, 0);
    if (rc) {
        lm_close(lm);
        return rc;
    }
    uint64_t wb = 0, ab = 0;
    lm_memory(lm, &wb, &ab);
    const char *qe = getenv("FOLIO_LM_QKV");
    lm->qkv_apart = qe && strcmp(qe, "apart") == 0;
    uint32_t fused;
    lm_paths(lm, NULL, &fused);
    folio_log(FOLIO_LOG_INFO, "lm_open",
              "layers=%u embd=%u heads=%u/%u ff=%u vocab=%u weights_bytes=%" PRIu64
              " act_bytes=%" PRIu64 " kv_bytes=%" PRIu64 " max_tokens=%u batch=%u"
              " f16_path=%d qkv_fused_layers=%u devices=%u split=%u gpu_weights=\"%s\""
              " embed=%s embd_type=%s",
              h->n_layer, lm->E, h->n_head, h->n_head_kv, lm->F, lm->V, wb, ab,
              2 * lm->kv_bytes * h->n_layer,
              lm->cfg.max_tokens, lm->cfg.batch, lm->gemm16, fused, n, lm->part[0].l1, why,
              lm->emb_gpu ? "gpu" : "host",
              quant_type_name(lm->embd->type) ? quant_type_name(lm->embd->type) : "?");
    *out = lm;
    return 0;
}

int lm_open(struct vkr *vk, const struct gguf_model *m, const struct lm_config *cfg,
            struct lm **out, struct folio_err *err)
{
    return lm_open_split(&vk, 1, m, cfg, out, err);
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
    struct lm *l = (struct lm *)lm; /* part[cur] is the lm's own fields */
    part_save(l);
    uint64_t w = 0, a = 0;
    for (uint32_t p = 0; p < lm->nparts; p++) {
        w += lm->part[p].wa ? vkr_arena_used(lm->part[p].wa) : 0;
        a += lm->part[p].aa ? vkr_arena_capacity(lm->part[p].aa) : 0;
    }
    if (weights)
        *weights = w;
    if (activations)
        *activations = a;
}

uint32_t lm_devices(const struct lm *lm, struct lm_device_plan *out, uint32_t max)
{
    struct lm *l = (struct lm *)lm;
    part_save(l);
    for (uint32_t p = 0; p < lm->nparts && p < max; p++) {
        const struct lm_part *P = &lm->part[p];
        out[p] = (struct lm_device_plan){.vk = P->vk, .l0 = P->l0, .l1 = P->l1,
                                         .head = p == lm->nparts - 1, .room = P->room,
                                         .need = P->need,
                                         .weights = P->wa ? vkr_arena_used(P->wa) : 0,
                                         .activations = P->aa ? vkr_arena_capacity(P->aa) : 0};
    }
    return lm->nparts;
}

/* The host staging plan_activations allocates. */
static void free_staging(struct lm *lm)
{
    free(lm->emb);
    free(lm->erow_h);
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
    lm->emb = NULL;
    lm->erow_h = NULL;
    lm->iv = NULL;
    lm->pgh = NULL;
    lm->seq_start = lm->seq_n = NULL;
    lm->next_pos = NULL;
    lm->lastlg = lm->rowbuf = NULL;
    lm->lastlse = NULL;
    lm->lab_row = lm->lg_row = NULL;
}

static int replan_to(struct lm *lm, uint32_t batch, struct folio_err *err)
{
    free_staging(lm);
    part_save(lm);
    int rc = 0;
    for (uint32_t p = 0; p < lm->nparts; p++) {
        vkr_arena_destroy(lm->part[p].aa);
        lm->part[p].aa = NULL;
    }
    lm->nseq = 0; /* the KV cache's prompts are gone */
    lm->cfg.batch = batch;
    for (uint32_t p = 0; p < lm->nparts && !rc; p++)
        rc = vkr_arena_create(lm->part[p].vk, "lm-activations", VKR_ARENA_ACTIVATIONS,
                              &lm->part[p].aa, err);
    lm->aa = lm->part[lm->cur].aa;
    if (!rc)
        rc = plan_activations(lm, err);
    /* The family's state is sized for a full batch as well (Qwen3-VL:
     * every prompt row may be an image row, whose DeepStack rows stay on
     * the first device); planned for the batch of the open until now, a
     * larger batch's image rows overflowed them. */
    if (!rc && lm->arch->hook_open) {
        if (lm->arch->hook_close)
            lm->arch->hook_close(lm);
        rc = lm->arch->hook_open(lm, err);
    }
    return rc;
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
    if (lm->arch && lm->arch->hook_close)
        lm->arch->hook_close(lm);
    part_save(lm);
    for (uint32_t p = 0; p < lm->nparts; p++) {
        vkr_arena_destroy(lm->part[p].aa);
        vkr_arena_destroy(lm->part[p].wa);
    }
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
