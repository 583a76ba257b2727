/*
 * The decoder pass (docs/reference/qwen25vl.md §4.1): per layer RMSNorm -> Q/K/V with
 * biases -> M-RoPE -> grouped-query attention over the KV cache -> output
 * projection -> residual -> RMSNorm -> SwiGLU MLP -> residual; then the
 * final norm and the LM head on the rows whose logits are needed. One
 * command buffer, one submit per device: a model split over two devices
 * records the first's layers, submits, moves the residual stream rows to
 * the second through host staging and records the rest there (the index
 * words are uploaded to both; every KV cache stays with its layer).
 *
 * Rows of a pass, in order: the prompts of the batch concatenated (ragged),
 * then, from an aligned row, the label rows packed densely — for each
 * sequence, for each label, the label's tokens but its last (whose output
 * predicts nothing we score). K and V of row r land in cache slot
 * slot0 + r, so a fused classify pass and a later lm_score pass both see
 * the prompts' K/V where prefill left them.
 *
 * Attention masks use the kernel's per-query key ranges:
 *  - a prompt row i of sequence b sees slots [start_b, start_b + i + 1):
 *    causal within its own sequence, blind to the rest of the batch;
 *  - a label row needs the prompt AND its own earlier tokens, two disjoint
 *    slot ranges: [start_b, start_b + n_b) and [slot0 + r0, slot0 + r + 1)
 *    for the label's first row r0. The kernel takes both per query
 *    (op_attention.two_ranges), so label rows attend straight into the
 *    KV cache: one attention dispatch for all label rows per layer, no
 *    copy of the prompt's K/V. Labels that share leading tokens never see
 *    each other, and all start at the same position. Since a query block
 *    of the kernel (16 rows) walks the union of its rows' prompt ranges
 *    once, the labels of a sequence share blocks: 16 labels of 3 tokens
 *    are 2 blocks, each reading the prompt once.
 *    A block that straddles two sequences walks both prompts (they are
 *    adjacent slots); its label slots are walked separately, so the
 *    prompts of the pages between are skipped.
 *  - few blocks against many keys leave a large GPU idle: the op splits
 *    each block's keys over several workgroups and merges them (split K,
 *    op_attention.c), into scratch the plan holds for that (lm.c).
 *
 * Row views (the label rows' queries and outputs, a cache window) must
 * start at the device's storage-buffer offset alignment; the label rows
 * start at a multiple of lm->ra to keep that true. Pad rows before them
 * carry zero embeddings and are never attended to.
 *
 * The tail: a pass reads the last layer's output at a few rows (each
 * prompt's last, the label rows), yet every row's K and V in that layer
 * are needed (label rows and later lm_score passes attend to them). So
 * the last layer projects K and V for every row, then gathers the rows
 * the head reads into the head's own rows (lg_h, in logits-row order)
 * and runs the rest there: q, attention (each row with its key ranges:
 * a prompt's last row its prompt, a label row as above), the output
 * projection and the MLP. 1,429 prompt rows and 48 label rows: the last
 * layer's products on 49 rows instead of 1,477, 1/28 of the prefill's
 * work for Qwen2.5-VL-7B. Passes that return every prompt row's logits
 * (parity tests) run the last layer on every row, as does a family whose
 * hook_layer_done changes the last layer (lm->full_tail) and
 * FOLIO_LM_TAIL=all (comparisons).
 *
 * Token rows' embeddings: each token row's raw token_embd row (as the
 * GGUF stores it) is copied into packed host staging and uploaded with the
 * pass's inputs; one gather on the first device dequantizes them into
 * their rows of the residual stream (lm.c's top says why the table stays
 * on the host). The gather's ids are one per row, the rows that take no
 * token embedding out of its range: it skips them, so they keep what was
 * uploaded (host-float rows, zero pads) or what the image scatter writes.
 * A type without a gather, and the devices after the first of a split
 * (the residual stream arrives there whole), upload f32 rows as before.
 *
 * Scores: softmax of the needed logits rows on the GPU, then one gather
 * picks p(token) for every label token (the probabilities read as a table
 * of one-float rows, so any vocabulary size works), so only a few floats
 * come back.
 * A probability under 1e-30 has lost its precision in f32 (and underflows
 * at e^-103): that token's logits row is fetched and its log-probability
 * computed exactly on the host. The prompts' last logits rows stay in the
 * logits buffer after a prefill and lm_score fetches them before its own
 * pass, so its first tokens are exact too.
 */
#include "engine/model/lm_internal.h"
#include "engine/quant/quant.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t up_to(uint32_t x, uint32_t a)
{
    return (x + a - 1) / a * a;
}

/* Bump allocator over the per-pass int32 words (each section aligned). */
struct isec {
    struct lm *lm;
    uint32_t used;
    int over;
};

static uint32_t isec_take(struct isec *s, uint32_t n)
{
    uint32_t at = up_to(s->used, s->lm->ialign);
    if ((uint64_t)at + n > s->lm->ints_cap) {
        s->over = 1;
        return 0;
    }
    s->used = at + n;
    return at;
}

static struct vkr_tensor iview(struct lm *lm, uint32_t off, uint32_t n)
{
    return vkr_view(lm->ints, (uint64_t)off * 4, (uint64_t)(n ? n : 1) * 4);
}

/* Kernel choice: a label pass has a few dozen rows. f16 weights (the LM
 * head of the f16 data path) and int8 rows (--gpu-weights int8) take the
 * tensor-core GEMM above matvec's 8 rows: it reads the head once, where
 * matvec reads it once per 8 rows (H100, f16, 16 labels: 4.6 ms in 4
 * matvec dispatches against 0.6 ms). Other types: on the
 * H200 a 16-label pass (32 rows) spent 98 ms in the tiled kernel and 104 ms
 * in the cooperative-matrix one (few, long workgroups: ~42 GB/s of
 * weights), while the matvec kernel streams the LM head at ~390 GB/s; so
 * up to 32 rows, reading the weights once per 8 rows with matvec is the
 * faster choice. Larger passes keep the op library's pick. */
static int mm(struct lm *lm, struct vkr_cmd *c, const struct lm_w *w, const struct lm_w *bias,
              struct vkr_tensor x, struct vkr_tensor y, uint32_t m, struct folio_err *err)
{
    enum op_mm_kernel k = OP_MM_AUTO;
    if (!lm->cfg.op_auto_kernels && m > 8 && m <= 32)
        k = OP_MM_MATVEC;
    if ((w->type == QUANT_F16 && lm->gemm16 && m > 8) ||
        (w->type == QUANT_I8R && lm->sk.size && m > 8 && ops_gemm_i8_available(lm->vk)))
        k = OP_MM_GEMM;
    struct op_matmul a = {.w = w->t, .wtype = w->type, .n = w->n, .k = w->k, .x = x, .m = m,
                          .y = y, .bias = bias && bias->t.size ? &bias->t : NULL, .kernel = k};
    /* the GEMM's split-K scratch; int8 rows (an LM head small enough to be
     * made int8) need it for any kernel AUTO takes: its int8 GEMM quantizes
     * x there */
    if (lm->sk.size && (k == OP_MM_GEMM || w->type == QUANT_I8R))
        a.split = &lm->sk;
    a.split_k = lm->split_k;
    a.i8_tiles = lm->i8_tiles;
    return op_matmul(c, &a, err);
}

/* The f16 data path (weights expanded at load, tensor-core GEMM), as in
 * vision.c: f16 GEMM inputs from the norms and the fused SwiGLU, residual
 * sums in the GEMM epilogues, the residual stream in f32. */
static int mm16(const struct lm *lm, struct vkr_cmd *c, const struct lm_w *w,
                const struct lm_w *bias, struct op_matmul a, struct folio_err *err)
{
    a.w = w->t, a.wtype = w->type, a.n = w->n, a.k = w->k;
    a.bias = bias && bias->t.size ? &bias->t : NULL;
    a.kernel = OP_MM_GEMM;
    a.split = lm->sk.size ? &lm->sk : NULL;
    a.split_k = lm->split_k;
    a.i8_tiles = lm->i8_tiles;
    return op_matmul(c, &a, err);
}

static int check_input(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq,
                       const struct lm_label *labels, uint32_t nl, int prefill, float *logits,
                       struct folio_err *err)
{
    if (prefill) {
        if (nseq == 0 || nseq > lm->cfg.batch)
            return folio_err_set(err, FOLIO_EINVAL, "text model: %u sequences in one pass; this "
                                 "engine was opened for 1..%u (--batch)", nseq, lm->cfg.batch);
        /* device image rows: the first sequence that takes them, and the
         * row the next one must start at (consecutive rows of one tensor) */
        const struct lm_seq *f = NULL;
        uint32_t next = 0;
        for (uint32_t b = 0; b < nseq; b++) {
            const struct lm_seq *s = &seqs[b];
            if (s->n == 0 || s->n > lm->cfg.max_tokens)
                return folio_err_set(err, FOLIO_EINVAL, "text model: sequence %u has %u tokens; "
                                     "the engine takes 1..%u (--max-tokens)", b, s->n,
                                     lm->cfg.max_tokens);
            uint32_t nimg = 0;
            for (uint32_t i = 0; i < s->n; i++) {
                int32_t t = s->tokens[i];
                if (t >= (int32_t)lm->V || (t < 0 && !s->embd && !s->dev))
                    return folio_err_set(err, FOLIO_EINVAL, "text model: sequence %u token %u "
                                         "is id %d, outside the vocabulary of %u (and no "
                                         "embedding row given)", b, i, t, lm->V);
                nimg += t < 0;
            }
            if (s->embd || !s->dev)
                continue;
            if (!f) {
                f = s;
                next = s->dev_row0;
            }
            uint32_t want = next; /* where this sequence's rows must start */
            next += nimg;
            if (!nimg)
                continue;
            /* device rows: one tensor, consecutive rows, on the only device */
            if (lm->nparts > 1 || lm->Ein != lm->E)
                return folio_err_set(err, FOLIO_EINVAL, "text model: sequence %u takes its image "
                                     "rows from the device; that needs the model on one device "
                                     "and rows without DeepStack features (give embd)", b);
            if (s->dev->block != f->dev->block || s->dev->offset != f->dev->offset ||
                s->dev_row0 != want)
                return folio_err_set(err, FOLIO_EINVAL, "text model: sequence %u takes device "
                                     "rows from %u; the pass's device rows must be consecutive "
                                     "rows of one tensor (next: %u)", b, s->dev_row0, want);
            if (((uint64_t)s->dev_row0 + nimg) * lm->E * 4 > s->dev->size)
                return folio_err_set(err, FOLIO_EINVAL, "text model: sequence %u takes device "
                                     "rows %u..%u from a tensor of %" PRIu64 " rows", b,
                                     s->dev_row0, s->dev_row0 + nimg - 1,
                                     s->dev->size / ((uint64_t)lm->E * 4));
        }
    } else if (lm->nseq == 0) {
        return folio_err_set(err, FOLIO_ESTATE, "text model: lm_score needs a prefill first");
    }
    if (logits && !lm->cfg.all_logits)
        return folio_err_set(err, FOLIO_EINVAL, "text model: all-position logits need "
                             "all_logits in the configuration");
    if (nl > lm->cfg.max_labels)
        return folio_err_set(err, FOLIO_EINVAL, "text model: %u labels; the engine takes at most "
                             "%u", nl, lm->cfg.max_labels);
    for (uint32_t l = 0; l < nl; l++) {
        if (labels[l].n == 0 || labels[l].n > lm->cfg.max_label_tokens)
            return folio_err_set(err, FOLIO_EINVAL, "text model: label %u has %u tokens; the "
                                 "engine takes 1..%u", l, labels[l].n, lm->cfg.max_label_tokens);
        for (uint32_t j = 0; j < labels[l].n; j++)
            if (labels[l].tokens[j] < 0 || labels[l].tokens[j] >= (int32_t)lm->V)
                return folio_err_set(err, FOLIO_EINVAL, "text model: label %u token %u is id %d, "
                                     "outside the vocabulary of %u", l, j, labels[l].tokens[j],
                                     lm->V);
    }
    return 0;
}

static int embed_row(struct lm *lm, int32_t tok, float *dst, struct folio_err *err)
{
    uint64_t rb = quant_row_bytes(lm->embd->type, lm->E);
    const uint8_t *src = (const uint8_t *)lm->embd->data + (uint64_t)tok * rb;
    if (quant_dequantize_row(lm->embd->type, src, dst, lm->E))
        return folio_err_set(err, FOLIO_EMODEL, "text model: cannot dequantize token_embd row %d",
                             tok);
    return 0;
}

/* log sum exp of a logits row, in double */
static double row_lse(const float *x, uint32_t n)
{
    double mx = -INFINITY, z = 0.0;
    for (uint32_t i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (uint32_t i = 0; i < n; i++)
        z += exp((double)x[i] - mx);
    return mx + log(z);
}

static void set_pos(int32_t *p, int32_t v)
{
    p[0] = p[1] = p[2] = v;
}

/* One pass's layout: which rows, groups and index sections it uses. */
struct pass {
    const struct lm_seq *seqs;
    const struct lm_label *labels;
    uint32_t nseq, nl;
    int prefill;
    float *logits;
    uint32_t np, slot0, nrows;
    uint32_t lab0, nlab_rows; /* the label rows: [lab0, lab0 + nlab_rows) = [lab0, nrows) */
    uint32_t nlast, nall, nlg, npg;
    int tail; /* the last layer on the head's rows alone (see the top) */
    /* image rows taken on the device (lm_seq.dev): how many, from where,
     * and their rows of the pass (index section o_img) */
    uint32_t nimg;
    struct vkr_tensor img;
    uint32_t o_pos, o_rngp, o_rngl, o_lg, o_pg, o_post, o_rngt, o_img, ints_used;
    /* token rows gathered on the first device (gather_ready): nerow raw
     * rows packed in erow_h; section o_emb has one word per row, a row's
     * raw row (>= 0, gathered), EMB_HOST or EMB_DEV */
    int gather;
    uint32_t nerow, o_emb;
};

/* o_emb's rows that take no gathered row (negative: the gather reads them
 * as uint, past any table, and skips them). EMB_HOST: uploaded from the
 * host's f32 staging (host-float rows, zero pads, token rows on the host
 * path); EMB_DEV: an image row the scatter writes on the device. */
#define EMB_HOST (-1)
#define EMB_DEV (-2)

/* Whether row i of s takes its embedding on the device. */
static int dev_row(const struct lm_seq *s, uint32_t i)
{
    return s->tokens[i] < 0 && !s->embd && s->dev;
}

/* Whether this pass gathers its token rows on the first device: emb_gpu
 * (lm.c) and the gather's pipeline there. lm_pipeline_keys lists it; a
 * registry sealed without it (a caller's own key list) takes the host
 * path from then on instead of failing every pass; before seal the
 * pipeline is made here, as any op would. */
static int gather_ready(struct lm *lm)
{
    if (!lm->emb_gpu)
        return 0;
    struct vkr *vk = lm->part[0].vk;
    struct vkr_pipeline_key k = ops_gather_key(lm->embd->type);
    if (vkr_pipeline_ready(vk, &k))
        return 1;
    struct vkr_stats st;
    vkr_get_stats(vk, &st);
    uint32_t id;
    struct folio_err e = {0};
    if (!st.sealed && vkr_pipeline(vk, &k, &id, &e) == 0)
        return 1;
    lm->emb_gpu = 0;
    folio_log(FOLIO_LOG_WARN, "lm_embed_host", "type=%s reason=\"%s\"",
              quant_type_name(lm->embd->type),
              st.sealed ? "gather pipeline not pre-warmed (lm_pipeline_keys)" : e.msg);
    return 0;
}

/* FOLIO_LM_TAIL=all: the last layer on every row (comparisons). */
static int tail_env_all(void)
{
    const char *e = getenv("FOLIO_LM_TAIL");
    return e && strcmp(e, "all") == 0;
}

/* The last prefill's last logits rows, before this pass reuses the buffer. */
static int fetch_last(struct lm *lm, uint32_t nseq, struct folio_err *err)
{
    const uint32_t V = lm->V;
    lm_part_use(lm, lm->nparts - 1);
    int rc = vkr_download(lm->vk, lm->logits, 0, lm->lastlg, (uint64_t)nseq * V * 4, err);
    for (uint32_t b = 0; !rc && b < nseq; b++)
        lm->lastlse[b] = row_lse(lm->lastlg + (size_t)b * V, V);
    if (!rc)
        lm->last_pending = 0;
    return rc;
}

/* Rows, label groups and index sections of the pass (no device work). */
static int pass_plan(struct lm *lm, struct pass *ps, struct folio_err *err)
{
    const uint32_t nseq = ps->nseq, nl = ps->nl;
    const struct lm_label *labels = ps->labels;
    uint32_t np = 0, slot0 = 0;
    ps->nimg = 0;
    if (ps->prefill) {
        for (uint32_t b = 0; b < nseq; b++) {
            const struct lm_seq *s = &ps->seqs[b];
            lm->seq_start[b] = np;
            lm->seq_n[b] = s->n;
            lm->next_pos[b] = s->pos ? s->next_pos : (int32_t)s->n;
            np += s->n;
            uint32_t k = 0;
            for (uint32_t i = 0; i < s->n; i++)
                k += dev_row(s, i);
            if (k && !ps->nimg) /* check_input: the rest follow on */
                ps->img = vkr_view(*s->dev, (uint64_t)s->dev_row0 * lm->E * 4,
                                   s->dev->size - (uint64_t)s->dev_row0 * lm->E * 4);
            ps->nimg += k;
        }
        lm->nseq = nseq;
        lm->kv_used = np;
    } else {
        slot0 = up_to(lm->kv_used, lm->ra);
    }
    /* label rows, densely from an aligned row (their queries and outputs
     * are one view each); single-token labels have none */
    uint32_t nlab_rows = 0;
    for (uint32_t l = 0; l < nl; l++)
        nlab_rows += labels[l].n - 1;
    nlab_rows *= nseq;
    uint32_t lab0 = nlab_rows ? up_to(np, lm->ra) : np, nrows = lab0;
    for (uint32_t b = 0; b < nseq && nl; b++)
        for (uint32_t l = 0; l < nl; l++) {
            lm->lab_row[b * nl + l] = labels[l].n > 1 ? nrows : UINT32_MAX;
            nrows += labels[l].n - 1;
        }
    ps->np = np;
    ps->slot0 = slot0;
    ps->nrows = nrows;
    ps->lab0 = lab0;
    ps->nlab_rows = nlab_rows;
    if (nrows > lm->rows_cap || slot0 + nrows > lm->kv_cap)
        return folio_err_set(err, FOLIO_ELIMIT, "text model: pass of %u rows exceeds the planned "
                             "%u rows", nrows, lm->rows_cap);
    /* logits rows: last prompt rows, [all prompt rows], label rows */
    ps->nlast = ps->prefill ? nseq : 0;
    ps->nall = ps->logits ? np : 0;
    ps->nlg = ps->nlast + ps->nall + nlab_rows;
    ps->npg = 0;
    for (uint32_t l = 0; l < nl; l++)
        ps->npg += ps->prefill ? labels[l].n : labels[l].n - 1;
    ps->npg *= nseq;
    if (ps->nlg > lm->lg_cap)
        return folio_err_set(err, FOLIO_ELIMIT, "text model: %u logits rows exceed the planned %u",
                             ps->nlg, lm->lg_cap);
    /* the tail pays where the head reads fewer rows than the pass has
     * (every logits row is a prompt's last row or a label row) */
    ps->tail = ps->prefill && np && !ps->nall && ps->nlg && ps->nlg < nrows && !lm->full_tail &&
               !tail_env_all();
    struct isec is = {.lm = lm};
    ps->o_pos = isec_take(&is, nrows * 3);
    ps->o_rngp = isec_take(&is, np * 2);
    ps->o_rngl = isec_take(&is, nlab_rows * 4);
    ps->o_lg = isec_take(&is, ps->nlg);
    ps->o_pg = isec_take(&is, ps->npg);
    ps->o_post = ps->tail ? isec_take(&is, ps->nlg * 3) : 0;
    ps->o_rngt = ps->tail ? isec_take(&is, ps->nlg * 4) : 0;
    ps->o_img = ps->nimg ? isec_take(&is, ps->nimg) : 0;
    ps->o_emb = isec_take(&is, nrows);
    ps->gather = gather_ready(lm);
    if (is.over)
        return folio_err_set(err, FOLIO_ELIMIT, "text model: pass indices exceed the plan");
    ps->ints_used = is.used;
    return 0;
}

/* Row r's token embedding: its raw row packed for the gather (row id
 * into o_emb), or on the host path dequantized into emb (EMB_HOST). */
static int embed_token(struct lm *lm, struct pass *ps, uint32_t r, int32_t tok,
                       struct folio_err *err)
{
    int32_t *id = lm->iv + ps->o_emb + r;
    if (!ps->gather) {
        *id = EMB_HOST;
        return embed_row(lm, tok, lm->emb + (size_t)r * lm->E, err);
    }
    const uint64_t rb = lm->emb_rb;
    const uint8_t *src = (const uint8_t *)lm->embd->data + (uint64_t)tok * rb;
    memcpy(lm->erow_h + (size_t)ps->nerow * rb, src, (size_t)rb);
    *id = (int32_t)ps->nerow++;
    return 0;
}

/* The host inputs: embedding rows (lm->emb, or raw rows in lm->erow_h for
 * the gather) and every index (lm->iv). */
static int pass_stage(struct lm *lm, struct pass *ps, struct folio_err *err)
{
    const uint32_t E = lm->E, V = lm->V, nseq = ps->nseq, nl = ps->nl, np = ps->np;
    const struct lm_label *labels = ps->labels;
    int rc = 0;
    /* every prompt row and label row is written below (or gathered); only
     * the alignment pads before the label rows need clearing, not the
     * whole staging (90 MB for 16 pages of 512^2: ~10 ms of host time per
     * pass) */
    memset(lm->emb + (size_t)np * E, 0, (size_t)(ps->lab0 - np) * E * sizeof *lm->emb);
    int32_t *iv = lm->iv;
    ps->nerow = 0;
    for (uint32_t r = np; r < ps->lab0; r++)
        iv[ps->o_emb + r] = EMB_HOST;
    const uint32_t o_pos = ps->o_pos, o_rngp = ps->o_rngp, o_lg = ps->o_lg;
    memset(iv + o_pos, 0, (size_t)ps->nrows * 3 * sizeof *iv);
    uint32_t nimg = 0;
    for (uint32_t b = 0; b < nseq && ps->prefill; b++) {
        const struct lm_seq *s = &ps->seqs[b];
        uint32_t r0 = lm->seq_start[b];
        for (uint32_t i = 0; i < s->n && !rc; i++) {
            float *dst = lm->emb + (size_t)(r0 + i) * E;
            if (dev_row(s, i)) { /* copied on the device (pass_submit); never uploaded */
                iv[ps->o_img + nimg++] = (int32_t)(r0 + i);
                iv[ps->o_emb + r0 + i] = EMB_DEV;
            } else if (s->tokens[i] >= 0) {
                rc = embed_token(lm, ps, r0 + i, s->tokens[i], err);
            } else {
                memcpy(dst, s->embd + (size_t)i * lm->Ein, (size_t)E * sizeof *dst);
                iv[ps->o_emb + r0 + i] = EMB_HOST;
            }
            if (s->pos)
                memcpy(iv + o_pos + (r0 + i) * 3, s->pos + (size_t)i * 3, 3 * sizeof *iv);
            else
                set_pos(iv + o_pos + (r0 + i) * 3, (int32_t)i);
            iv[o_rngp + 2 * (r0 + i)] = (int32_t)r0;
            iv[o_rngp + 2 * (r0 + i) + 1] = (int32_t)(r0 + i + 1);
        }
        iv[o_lg + b] = (int32_t)(r0 + s->n - 1);
    }
    for (uint32_t i = 0; i < ps->nall; i++)
        iv[o_lg + ps->nlast + i] = (int32_t)i;
    /* label rows: embeddings, positions, their two key ranges (the
     * prompt's slots; the label's own slots up to the row's), logits rows */
    uint32_t lgc = ps->nlast + ps->nall;
    for (uint32_t b = 0; b < nseq && !rc; b++)
        for (uint32_t l = 0; l < nl && !rc; l++) {
            uint32_t bl = b * nl + l, r = lm->lab_row[bl], k = labels[l].n - 1;
            if (r == UINT32_MAX)
                continue;
            lm->lg_row[bl] = lgc;
            for (uint32_t j = 0; j < k && !rc; j++) {
                rc = embed_token(lm, ps, r + j, labels[l].tokens[j], err);
                set_pos(iv + o_pos + (r + j) * 3, lm->next_pos[b] + (int32_t)j);
                int32_t *rg = iv + ps->o_rngl + 4 * (r + j - ps->lab0);
                rg[0] = (int32_t)lm->seq_start[b];
                rg[1] = (int32_t)(lm->seq_start[b] + lm->seq_n[b]);
                rg[2] = (int32_t)(ps->slot0 + r);
                rg[3] = (int32_t)(ps->slot0 + r + j + 1);
                iv[o_lg + lgc++] = (int32_t)(r + j);
            }
        }
    /* the tail's rows: logits row i is pass row iv[o_lg + i], a prompt's
     * last row (the first nlast; they see their prompt) or a label row
     * (its two ranges) */
    for (uint32_t i = 0; ps->tail && i < ps->nlg; i++) {
        uint32_t r = (uint32_t)iv[o_lg + i];
        int32_t *rg = iv + ps->o_rngt + 4 * i;
        memcpy(iv + ps->o_post + 3 * i, iv + o_pos + 3 * r, 3 * sizeof *iv);
        if (i < ps->nlast) {
            rg[0] = (int32_t)lm->seq_start[i];
            rg[1] = (int32_t)(lm->seq_start[i] + lm->seq_n[i]);
            rg[2] = rg[3] = 0; /* empty */
        } else {
            memcpy(rg, iv + ps->o_rngl + 4 * (r - ps->lab0), 4 * sizeof *iv);
        }
    }
    /* which probability each label token reads */
    uint32_t pgc = 0;
    for (uint32_t b = 0; b < nseq; b++)
        for (uint32_t l = 0; l < nl; l++)
            for (uint32_t j = ps->prefill ? 0 : 1; j < labels[l].n; j++) {
                uint64_t prow = j == 0 ? b : lm->lg_row[b * nl + l] + j - 1;
                uint64_t idx = prow * V + (uint64_t)labels[l].tokens[j];
                iv[ps->o_pg + pgc++] = (int32_t)(uint32_t)idx; /* < 2^32: lm.c plans it */
            }
    return rc;
}

/* The rows the head reads (logits-row order) from the residual stream
 * into lg_h. */
static int head_rows(struct lm *lm, struct vkr_cmd *c, const struct pass *ps,
                     struct folio_err *err)
{
    return op_gather(c, &(struct op_gather){.table = lm->x, .wtype = QUANT_F32, .rows = ps->nrows,
                                            .k = lm->E, .ids = iview(lm, ps->o_lg, ps->nlg),
                                            .n_ids = ps->nlg, .y = lm->lg_h}, err);
}

/* The tail's inputs once every row's K and V are projected: the head's
 * rows of the residual stream into lg_h and their attention norm into h's
 * first rows (h's other rows are done with). */
static int tail_rows(struct lm *lm, struct vkr_cmd *c, const struct pass *ps, int htype,
                     struct folio_err *err)
{
    const struct lm_layer *L = &lm->L[lm->hp.n_layer - 1];
    int rc = head_rows(lm, c, ps, err);
    if (!rc)
        rc = op_norm(c, &(struct op_norm){.x = lm->lg_h, .y = lm->h, .w = &L->attn_norm.t, .rows = ps->nlg,
                                          .n = lm->E, .eps = lm->hp.rms_eps, .ytype = htype}, err);
    return rc;
}

/* One decoder layer of the pass into c (on the layer's own device). */
static int record_layer(struct lm *lm, struct vkr_cmd *c, const struct pass *ps, uint32_t li,
                        int f16, struct folio_err *err)
{
    const uint32_t E = lm->E, KW = lm->KW, QW = lm->QW, nrows = ps->nrows, np = ps->np;
    const struct gguf_text_hparams *hp = &lm->hp;
    float eps = hp->rms_eps, scale = 1.0f / sqrtf((float)lm->D);
    struct vkr_tensor pos = iview(lm, ps->o_pos, nrows * 3);
    struct lm_layer *L = &lm->L[li];
    /* The KV cache is f16 (lm_internal.h). K is projected in f32 into o,
     * which is free until this layer's attention writes it, normalised
     * there where the family does (Qwen3-VL) and rotated into the cache;
     * V goes to the cache from the GEMM's f16 epilogue, or on the f32 path
     * through t2 (free until the output projection) and a conversion. */
    uint64_t kv0 = (uint64_t)ps->slot0 * KW * 2, kvn = (uint64_t)nrows * KW * 2;
    struct vkr_tensor kv_k = vkr_view(L->kc, kv0, kvn), kv_v = vkr_view(L->vc, kv0, kvn);
    /* The rows past K/V: every row, or in the tail (see the top) the
     * head's rows alone, gathered into lg_h. */
    const int tail = ps->tail && li == hp->n_layer - 1;
    const uint32_t nr = tail ? ps->nlg : nrows;
    struct vkr_tensor x = tail ? lm->lg_h : lm->x;
    /* Q/K/V as one product (lm_qkv_fused): f16 [q | k | v] rows in o,
     * which is free until the attention writes it; RoPE rotates q out of
     * them into q (f32) and k into the cache, and a copy pass of the same
     * shape puts v there. The tail runs q on the head's rows only: apart. */
    const uint32_t QKW = QW + 2 * KW;
    const int fz = f16 && !tail && lm_qkv_fused(lm, L);
    struct vkr_tensor qkv = vkr_view(lm->o, 0, (uint64_t)nrows * QKW * 2);
    /* A family's q/k hook (Qwen3-VL's per-head norms) takes f32 q and k
     * rows: with the fused product, copy passes unpack them first, k into
     * t2 (free on the f16 path; o holds the fused rows). */
    const int unpack = fz && lm->arch->hook_qk;
    struct vkr_tensor k32 = vkr_view(unpack ? lm->t2 : lm->o, 0, (uint64_t)nrows * KW * 4);
    int rc;
    if (f16 && fz) {
        const int F16 = QUANT_F16;
        rc = op_norm(c, &(struct op_norm){.x = lm->x, .y = lm->h, .w = &L->attn_norm.t,
                                          .rows = nrows, .n = E, .eps = eps, .ytype = F16}, err);
        if (!rc)
            rc = mm16(lm, c, &L->wqkv, &L->bqkv,
                      (struct op_matmul){.x = lm->h, .xtype = F16, .y = qkv, .ytype = F16,
                                         .m = nrows}, err);
    } else if (f16) {
        const int F16 = QUANT_F16, F32 = QUANT_F32;
        rc = op_norm(c, &(struct op_norm){.x = lm->x, .y = lm->h, .w = &L->attn_norm.t,
                                          .rows = nrows, .n = E, .eps = eps, .ytype = F16}, err);
        if (!rc && !tail)
            rc = mm16(lm, c, &L->wq, &L->bq,
                      (struct op_matmul){.x = lm->h, .xtype = F16, .y = lm->q, .ytype = F32,
                                         .m = nrows}, err);
        /* int8 weights: k and v read the int8 rows of h that q's product
         * left in the GEMM scratch (in the tail k's, as q runs later) */
        int ki8 = L->wq.type == QUANT_I8R && L->wk.type == QUANT_I8R && !tail;
        int vi8 = L->wv.type == QUANT_I8R && (tail ? L->wk.type == QUANT_I8R : ki8);
        if (!rc)
            rc = mm16(lm, c, &L->wk, &L->bk,
                      (struct op_matmul){.x = lm->h, .xtype = F16, .y = k32, .ytype = F32,
                                         .m = nrows, .x_in_scratch = ki8}, err);
        if (!rc)
            rc = mm16(lm, c, &L->wv, &L->bv,
                      (struct op_matmul){.x = lm->h, .xtype = F16, .y = kv_v, .ytype = F16,
                                         .m = nrows, .x_in_scratch = vi8}, err);
        if (!rc && tail)
            rc = tail_rows(lm, c, ps, F16, err);
        if (!rc && tail)
            rc = mm16(lm, c, &L->wq, &L->bq,
                      (struct op_matmul){.x = lm->h, .xtype = F16, .y = lm->q, .ytype = F32,
                                         .m = nr}, err);
    } else {
        struct vkr_tensor v32 = vkr_view(lm->t2, 0, (uint64_t)nrows * KW * 4);
        rc = op_norm(c, &(struct op_norm){.x = lm->x, .y = lm->h, .w = &L->attn_norm.t,
                                          .rows = nrows, .n = E, .eps = eps}, err);
        if (!rc)
            rc = mm(lm, c, &L->wk, &L->bk, lm->h, k32, nrows, err);
        if (!rc)
            rc = mm(lm, c, &L->wv, &L->bv, lm->h, v32, nrows, err);
        if (!rc)
            rc = op_convert(c, 1, v32, kv_v, (uint64_t)nrows * KW, err);
        if (!rc && tail)
            rc = tail_rows(lm, c, ps, QUANT_F32, err);
        if (!rc)
            rc = mm(lm, c, &L->wq, &L->bq, lm->h, lm->q, nr, err);
    }
    /* the fused rows' slices, each t rows of the whole row's stride */
    const uint64_t slice = (uint64_t)nrows * QKW * 2;
    struct vkr_tensor ks = vkr_view(lm->o, (uint64_t)QW * 2, slice);
    struct op_rope rq = {.x = lm->q, .y = lm->q, .pos = tail ? iview(lm, ps->o_post, nr * 3) : pos,
                         .t = nr, .h = hp->n_head,
                         .d = lm->D, .mode = (enum op_rope_mode)lm->rope_mode,
                         .base = hp->rope_theta,
                         .sections = {(uint32_t)hp->mrope_sections[0],
                                      (uint32_t)hp->mrope_sections[1],
                                      (uint32_t)hp->mrope_sections[2]}};
    if (!rc && unpack) {
        struct op_rope u = rq;
        u.x = qkv, u.xtype = QUANT_F16, u.x_stride = QKW, u.copy = 1;
        rc = op_rope(c, &u, err);
        u.x = ks, u.y = k32, u.h = hp->n_head_kv; /* (rq's pos: never the tail's here) */
        if (!rc)
            rc = op_rope(c, &u, err);
    }
    if (!rc && lm->arch->hook_qk) /* the family's (Qwen3-VL: per-head q/k RMSNorm) */
        rc = lm->arch->hook_qk(lm, c, L, lm->q, nr, k32, nrows, err);
    if (fz && !unpack) { /* rotated straight out of the fused rows */
        rq.x = qkv;
        rq.xtype = QUANT_F16;
        rq.x_stride = QKW;
    }
    if (!rc)
        rc = op_rope(c, &rq, err);
    struct op_rope rk = rq;
    int kf = fz && !unpack; /* k rotated straight out of the fused rows too */
    rk.x = kf ? ks : k32;
    rk.xtype = kf ? QUANT_F16 : QUANT_F32;
    rk.x_stride = kf ? QKW : 0;
    rk.y = kv_k;
    rk.ytype = QUANT_F16;
    rk.h = hp->n_head_kv;
    rk.pos = pos;
    rk.t = nrows;
    if (!rc)
        rc = op_rope(c, &rk, err);
    if (!rc && fz) {
        struct op_rope rv = rk;
        rv.x = vkr_view(lm->o, ((uint64_t)QW + KW) * 2, slice);
        rv.xtype = QUANT_F16;
        rv.x_stride = QKW;
        rv.y = kv_v;
        rv.copy = 1;
        rc = op_rope(c, &rv, err);
    }
    if (!rc && tail) {
        /* the head's rows, each against its own key ranges */
        struct vkr_tensor rg = iview(lm, ps->o_rngt, nr * 4);
        struct op_attention at = {.q = vkr_view(lm->q, 0, (uint64_t)nr * QW * 4), .k = L->kc,
                                  .v = L->vc, .o = vkr_view(lm->o, 0, (uint64_t)nr * QW * 4),
                                  .tq = nr, .tk = ps->slot0 + nrows, .hq = hp->n_head,
                                  .hkv = hp->n_head_kv, .d = lm->D, .scale = scale,
                                  .causal = 0, .ranges = &rg, .two_ranges = 1, .kv_f16 = 1,
                                  .kernel = OP_ATTN_AUTO, .ksplit = &lm->ksp,
                                  .splits = lm->cfg.attn_splits};
        rc = op_attention_ranged(c, &at, &lm->asc, err);
    }
    if (!rc && np && !tail) {
        struct vkr_tensor rg = iview(lm, ps->o_rngp, np * 2);
        struct op_attention at = {.q = lm->q, .k = L->kc, .v = L->vc, .o = lm->o, .tq = np,
                                  .tk = np, .hq = hp->n_head, .hkv = hp->n_head_kv,
                                  .d = lm->D, .scale = scale, .causal = 0, .ranges = &rg,
                                  .kv_f16 = 1};
        rc = op_attention_ranged(c, &at, &lm->asc, err);
    }
    if (!rc && ps->nlab_rows && !tail) {
        uint32_t nq = ps->nlab_rows;
        uint64_t q0 = (uint64_t)ps->lab0 * QW * 4, qn = (uint64_t)nq * QW * 4;
        struct vkr_tensor rg = iview(lm, ps->o_rngl, nq * 4);
        struct op_attention at = {.q = vkr_view(lm->q, q0, qn), .k = L->kc, .v = L->vc,
                                  .o = vkr_view(lm->o, q0, qn), .tq = nq,
                                  .tk = ps->slot0 + nrows, .hq = hp->n_head,
                                  .hkv = hp->n_head_kv, .d = lm->D, .scale = scale,
                                  .causal = 0, .ranges = &rg, .two_ranges = 1, .kv_f16 = 1,
                                  /* labels: a few rows against the whole page, K
                                   * split over the multiprocessors; AUTO's kernel */
                                  .kernel = OP_ATTN_AUTO, .ksplit = &lm->ksp,
                                  .splits = lm->cfg.attn_splits};
        rc = op_attention_ranged(c, &at, &lm->asc, err);
    }
    if (!rc && f16) {
        const int F16 = QUANT_F16, F32 = QUANT_F32;
        /* The attention's output into h as f16 first (h is free between
         * the q/k/v products and the MLP's norm): the GEMM rounds its input
         * to f16 anyway, and f32 input doubles the subgroup kernel's loads
         * (H100, 1,400 rows: o took 0.47 ms against q's 0.25 at the same
         * shape; BENCHMARKS.md, 2026-12-07). Not for int8 weights on the
         * int8 GEMM: its quantization reads the f32 rows as they are, so
         * the f16 copy would be one pass more. */
        int o16 = (uint64_t)QW * 2 <= (uint64_t)E * 4 &&
                  !(L->wo.type == QUANT_I8R && ops_gemm_i8_available(lm->vk));
        uint64_t on = (uint64_t)nr * QW;
        if (o16)
            rc = op_convert(c, 1, vkr_view(lm->o, 0, on * 4), vkr_view(lm->h, 0, on * 2), on, err);
        if (!rc)
            rc = mm16(lm, c, &L->wo, NULL,
                      (struct op_matmul){.x = o16 ? lm->h : lm->o, .xtype = o16 ? F16 : F32,
                                         .y = x, .ytype = F32, .m = nr, .res = &x}, err);
        if (!rc)
            rc = op_norm(c, &(struct op_norm){.x = x, .y = lm->h, .w = &L->ffn_norm.t,
                                              .rows = nr, .n = E, .eps = eps, .ytype = F16},
                                              err);
        for (uint32_t r0 = 0; r0 < nr && !rc; r0 += lm->ffn_rows) {
            uint32_t m = nr - r0 < lm->ffn_rows ? nr - r0 : lm->ffn_rows;
            struct vkr_tensor hv = vkr_view(lm->h, (uint64_t)r0 * E * 2, (uint64_t)m * E * 2);
            struct vkr_tensor xv = vkr_view(x, (uint64_t)r0 * E * 4, (uint64_t)m * E * 4);
            rc = mm16(lm, c, &L->wg, NULL,
                      (struct op_matmul){.x = hv, .xtype = F16, .y = lm->gate, .ytype = F32, .m = m},
                                         err);
            if (!rc)
                rc = mm16(lm, c, &L->wu, NULL,
                          (struct op_matmul){.x = hv, .xtype = F16, .y = lm->up, .ytype = F16,
                                             .m = m, .act = OP_MM_ACT_SWIGLU, .gate = &lm->gate,
                                             .x_in_scratch = L->wg.type == QUANT_I8R &&
                                                             L->wu.type == QUANT_I8R},
                          err);
            if (!rc)
                rc = mm16(lm, c, &L->wd, NULL,
                          (struct op_matmul){.x = lm->up, .xtype = F16, .y = xv, .ytype = F32,
                                             .m = m,
                                             .res = &xv}, err);
        }
        if (!rc && lm->arch->hook_layer_done && !tail) /* the family's (Qwen3-VL: DeepStack) */
            rc = lm->arch->hook_layer_done(lm, c, li, nrows, err);
        return rc;
    }
    if (!rc)
        rc = mm(lm, c, &L->wo, NULL, lm->o, lm->t2, nr, err);
    if (!rc)
        rc = op_elem(c, &(struct op_elem){.op = OP_ADD, .a = x, .b = &lm->t2, .y = x,
                                          .n = (uint64_t)nr * E, .nb = (uint64_t)nr * E},
                                          err);
    if (!rc)
        rc = op_norm(c, &(struct op_norm){.x = x, .y = lm->h, .w = &L->ffn_norm.t,
                                          .rows = nr, .n = E, .eps = eps}, err);
    /* the MLP in row chunks (lm.c: gate/up hold ffn_rows rows) */
    for (uint32_t r0 = 0; r0 < nr && !rc; r0 += lm->ffn_rows) {
        uint32_t m = nr - r0 < lm->ffn_rows ? nr - r0 : lm->ffn_rows;
        uint64_t mf = (uint64_t)m * lm->F, me = (uint64_t)m * E;
        struct vkr_tensor hv = vkr_view(lm->h, (uint64_t)r0 * E * 4, me * 4);
        struct vkr_tensor xv = vkr_view(x, (uint64_t)r0 * E * 4, me * 4);
        struct vkr_tensor tv = vkr_view(lm->t2, (uint64_t)r0 * E * 4, me * 4);
        rc = mm(lm, c, &L->wg, NULL, hv, lm->gate, m, err);
        if (!rc)
            rc = mm(lm, c, &L->wu, NULL, hv, lm->up, m, err);
        if (!rc)
            rc = op_elem(c, &(struct op_elem){.op = OP_SWIGLU, .a = lm->gate, .b = &lm->up,
                                              .y = lm->gate, .n = mf, .nb = mf}, err);
        if (!rc)
            rc = mm(lm, c, &L->wd, NULL, lm->gate, tv, m, err);
        if (!rc)
            rc = op_elem(c, &(struct op_elem){.op = OP_ADD, .a = xv, .b = &tv, .y = xv, .n = me,
                                              .nb = me}, err);
    }
    if (!rc && lm->arch->hook_layer_done && !tail) /* the family's (Qwen3-VL: DeepStack) */
        rc = lm->arch->hook_layer_done(lm, c, li, nrows, err);
    return rc;
}

/* The final norm, the LM head on the needed rows, softmax and the label
 * token probabilities (on the last device). */
static int record_head(struct lm *lm, struct vkr_cmd *c, const struct pass *ps,
                       struct folio_err *err)
{
    const uint32_t nlg = ps->nlg, V = lm->V;
    if (!nlg)
        return 0;
    /* the tail left the last layer's output in lg_h already */
    int rc = ps->tail ? 0 : head_rows(lm, c, ps, err);
    if (!rc)
        rc = op_norm(c, &(struct op_norm){.x = lm->lg_h, .y = lm->lg_hn, .w = &lm->out_norm.t,
                                          .rows = nlg, .n = lm->E, .eps = lm->hp.rms_eps}, err);
    if (!rc)
        rc = mm(lm, c, &lm->out_w, NULL, lm->lg_hn, lm->logits, nlg, err);
    uint32_t nsm = ps->nl ? nlg : ps->nlast;
    if (!rc && nsm)
        rc = op_softmax(c, lm->logits, lm->probs, nsm, V, 1.0f, err);
    if (!rc && ps->npg)
        rc = op_gather(c, &(struct op_gather){.table = lm->probs, .wtype = QUANT_F32,
                                              .rows = (uint32_t)((uint64_t)nlg * V), .k = 1,
                                              .ids = iview(lm, ps->o_pg, ps->npg), .n_ids = ps->npg,
                                              .y = lm->pg}, err);
    return rc;
}

/* Rows [from, to) of the residual stream from the host's staging rows, as
 * piece *n of run (counted only, where run is NULL). */
static void host_rows(const struct lm *lm, struct vkr_piece *run, uint32_t *n, uint32_t from,
                      uint32_t to)
{
    const uint64_t rb = (uint64_t)lm->E * 4;
    if (to <= from)
        return;
    if (run)
        run[*n] = (struct vkr_piece){.t = lm->x, .dst = from * rb,
                                     .src = lm->emb + (size_t)from * lm->E, .len = (to - from) * rb};
    (*n)++;
}

/* The pass's host rows of the residual stream into run (NULL: counted
 * only): with whole, every row (the residual stream between devices);
 * else the runs of EMB_HOST rows, so neither device image rows (a page's
 * 1,369 are 19.6 MB the host neither writes nor uploads) nor gathered
 * token rows go up as f32. Returns how many pieces. */
static uint32_t host_runs(const struct lm *lm, const struct pass *ps, int whole,
                          struct vkr_piece *run)
{
    uint32_t n = 0;
    if (whole) {
        host_rows(lm, run, &n, 0, ps->nrows);
        return n;
    }
    const int32_t *id = lm->iv + ps->o_emb;
    for (uint32_t r = 0; r < ps->nrows;) {
        uint32_t from = r;
        while (r < ps->nrows && id[r] == EMB_HOST)
            r++;
        host_rows(lm, run, &n, from, r);
        while (r < ps->nrows && id[r] != EMB_HOST)
            r++;
    }
    return n;
}

/* The pass's host rows, its packed raw token rows (the gather's table,
 * first device) and its integers: one gathered upload (one submission
 * where they fit the staging buffer, not one per piece). whole: the
 * residual stream's every row from emb (a later device of a split). */
static int upload_inputs(struct lm *lm, const struct pass *ps, int whole, struct folio_err *err)
{
    uint32_t n = host_runs(lm, ps, whole, NULL);
    struct vkr_piece *run = malloc(((size_t)n + 2) * sizeof *run);
    if (!run)
        return folio_err_set(err, FOLIO_ENOMEM, "text model: out of host memory for %u uploads",
                             n + 2);
    host_runs(lm, ps, whole, run);
    if (!whole && ps->gather && ps->nerow)
        run[n++] = (struct vkr_piece){.t = lm->erow, .src = lm->erow_h,
                                      .len = (uint64_t)ps->nerow * lm->emb_rb};
    run[n] = (struct vkr_piece){.t = lm->ints, .src = lm->iv, .len = (uint64_t)ps->ints_used * 4};
    int rc = vkr_upload_pieces(lm->vk, run, n + 1, err);
    free(run);
    return rc;
}

/* The token rows from their raw rows into x (first device): one id per
 * row, those without a raw row skipped (see EMB_HOST). */
static int token_rows(struct lm *lm, struct vkr_cmd *c, const struct pass *ps,
                      struct folio_err *err)
{
    if (!ps->nerow)
        return 0;
    return op_gather(c, &(struct op_gather){.table = lm->erow, .wtype = lm->embd->type,
                                            .rows = ps->nerow, .k = lm->E,
                                            .ids = iview(lm, ps->o_emb, ps->nrows),
                                            .n_ids = ps->nrows, .y = lm->x}, err);
}

/* Runs the pass's layers device by device: one command buffer, one submit
 * per device. The residual stream rows cross from one device to the next
 * through host-visible staging (download, upload); each layer's KV cache
 * stays on its own device. */
static int pass_submit(struct lm *lm, const struct pass *ps, struct folio_err *err)
{
    const uint64_t xbytes = (uint64_t)ps->nrows * lm->E * 4;
    /* f16 data path for every pass above matvec's 8 rows: a label pass of a
     * few dozen rows is bound by reading the weights, which the GEMM does
     * once where matvec reads them once per 8 rows (H200: 52 -> see
     * BENCHMARKS.md). */
    int f16 = lm->gemm16 && ps->nrows > 8;
    int rc = 0;
    lm->last_ms = lm->last_up_ms = lm->last_rec_ms = 0;
    for (uint32_t p = 0; p < lm->nparts && !rc; p++) {
        double tu = folio_mono_ms();
        if (p) /* the residual stream of the previous device's last layer */
            rc = vkr_download(lm->part[p - 1].vk, lm->part[p - 1].x, 0, lm->emb, xbytes, err);
        lm_part_use(lm, p);
        if (!rc)
            rc = upload_inputs(lm, ps, p > 0, err);
        double tr = folio_mono_ms();
        lm->last_up_ms += tr - tu;
        struct vkr_cmd *c = NULL;
        if (!rc)
            rc = vkr_cmd_begin(lm->vk, &c, err);
        if (rc)
            break;
        if (p == 0 && ps->gather)
            rc = token_rows(lm, c, ps, err);
        if (!rc && ps->nimg) /* the image rows, straight from where the tower left them */
            rc = op_scatter(c, vkr_view(ps->img, 0, (uint64_t)ps->nimg * lm->E * 4),
                            iview(lm, ps->o_img, ps->nimg), ps->nimg, lm->E, lm->x, ps->nrows,
                            err);
        for (uint32_t li = lm->part[p].l0; li < lm->part[p].l1 && !rc; li++)
            rc = record_layer(lm, c, ps, li, f16, err);
        if (!rc && p == lm->nparts - 1)
            rc = record_head(lm, c, ps, err);
        if (rc) {
            vkr_cmd_abort(c);
            break;
        }
        double t0 = folio_mono_ms();
        lm->last_rec_ms += t0 - tr;
        rc = vkr_cmd_submit(c, err);
        lm->last_ms += folio_mono_ms() - t0;
    }
    if (rc && lm->nparts > 1)
        folio_err_context(err, "text model layers %u..%u on device %u of %u (%d: %s)",
                          lm->part[lm->cur].l0, lm->part[lm->cur].l1 - 1, lm->cur + 1,
                          lm->nparts, vkr_device(lm->vk)->index, vkr_device(lm->vk)->name);
    return rc;
}

/* Downloads what the pass scored and sums each label's log-probabilities. */
static int pass_scores(struct lm *lm, const struct pass *ps, double *logprob,
                       struct folio_err *err)
{
    const uint32_t V = lm->V, nl = ps->nl;
    const struct lm_label *labels = ps->labels;
    int rc = 0;
    if (ps->prefill) {
        /* the prompts' last logits rows stay on the device for lm_score
         * (fetched by it, before its pass overwrites them): a fused
         * classify pass scored the first label tokens on the GPU already,
         * and fetching nseq x V floats plus their log-sum-exp on the host
         * per pass (~10 MB and 2.4M exp() for 16 pages) bought nothing */
        lm->last_pending = 1;
    }
    if (ps->nall)
        rc = vkr_download(lm->vk, lm->logits, (uint64_t)ps->nlast * V * 4, ps->logits,
                          (uint64_t)ps->nall * V * 4, err);
    if (!rc && ps->npg)
        rc = vkr_download(lm->vk, lm->pg, 0, lm->pgh, (uint64_t)ps->npg * 4, err);
    if (rc)
        return rc;
    uint32_t pgc = 0;
    for (uint32_t b = 0; b < ps->nseq && logprob && !rc; b++)
        for (uint32_t l = 0; l < nl && !rc; l++) {
            double s = 0.0;
            for (uint32_t j = 0; j < labels[l].n && !rc; j++) {
                uint32_t tok = (uint32_t)labels[l].tokens[j];
                if (j == 0 && !ps->prefill) {
                    s += lm->lastlg[(size_t)b * V + tok] - lm->lastlse[b];
                    continue;
                }
                uint64_t prow = j == 0 ? b : lm->lg_row[b * nl + l] + j - 1;
                float p = lm->pgh[pgc++];
                if (p > 1e-30f) {
                    s += log((double)p);
                    continue;
                }
                /* Too improbable for an f32 probability (log p < -69):
                 * take this row's logits and do it exactly. Rare, so one
                 * row at a time. */
                rc = vkr_download(lm->vk, lm->logits, prow * V * 4, lm->rowbuf, (uint64_t)V * 4,
                                  err);
                if (!rc)
                    s += lm->rowbuf[tok] - row_lse(lm->rowbuf, V);
            }
            logprob[(size_t)b * nl + l] = s;
        }
    return rc;
}

int lm_run(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq, const struct lm_label *labels,
           uint32_t nl, int prefill, float *logits, double *logprob, struct folio_err *err)
{
    int rc = check_input(lm, seqs, nseq, labels, nl, prefill, logits, err);
    if (rc)
        return rc;
    if (!prefill)
        nseq = lm->nseq;
    if (!prefill && lm->last_pending && (rc = fetch_last(lm, nseq, err)) != 0)
        return rc;
    struct pass ps = {.seqs = seqs, .labels = labels, .nseq = nseq, .nl = nl,
                      .prefill = prefill, .logits = logits};
    double t0 = folio_mono_ms();
    rc = pass_plan(lm, &ps, err);
    if (!rc)
        rc = pass_stage(lm, &ps, err);
    lm_part_use(lm, 0);
    if (!rc && lm->arch->hook_stage) /* the family's (Qwen3-VL: DeepStack rows), first device */
        rc = lm->arch->hook_stage(lm, seqs, nseq, prefill, err);
    double t1 = folio_mono_ms();
    if (!rc)
        rc = pass_submit(lm, &ps, err);
    double t2 = folio_mono_ms();
    if (!rc)
        rc = pass_scores(lm, &ps, logprob, err);
    /* where a pass's host time goes, beside the GPU's (the host's share
     * of a page at batch 1 is what the bench's *_ms less *_submit_ms show) */
    if (!rc)
        folio_log(FOLIO_LOG_DEBUG, "lm_pass", "rows=%u stage_ms=%.2f upload_ms=%.2f record_ms=%.2f "
                  "submit_ms=%.2f scores_ms=%.2f", ps.nrows, t1 - t0, lm->last_up_ms,
                  lm->last_rec_ms, lm->last_ms, folio_mono_ms() - t2);
    return rc;
}

int lm_prefill(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq, float *logits,
               struct folio_err *err)
{
    return lm_run(lm, seqs, nseq, NULL, 0, 1, logits, NULL, err);
}

int lm_score(struct lm *lm, const struct lm_label *labels, uint32_t nl, double *logprob,
             struct folio_err *err)
{
    return lm_run(lm, NULL, 0, labels, nl, 0, NULL, logprob, err);
}

int lm_classify(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq,
                const struct lm_label *labels, uint32_t nl, double *logprob, double *prob,
                int *best, struct folio_err *err)
{
    if (nl == 0)
        return folio_err_set(err, FOLIO_EINVAL, "text model: classify needs at least one label");
    int rc = lm_run(lm, seqs, nseq, labels, nl, 1, NULL, logprob, err);
    if (rc)
        return rc;
    for (uint32_t b = 0; b < nseq; b++)
        lm_label_softmax(logprob + (size_t)b * nl, nl, prob ? prob + (size_t)b * nl : NULL,
                         best ? &best[b] : NULL);
    return 0;
}
