/*
 * Qwen3-VL, text side: the decoder hooks of qwen3vl.h (q/k norm, DeepStack),
 * which the generic lm calls through the family's descriptor (qwen3vl.c).
 * The vision tower is vision.c.
 *
 * DeepStack rows travel with the pass: q3_lm_stage collects, for every
 * prompt row whose token is negative (an image row), its n_deepstack
 * feature rows from the embedding row's extra columns, and uploads them
 * with the rows' indices. After layer l the pass gathers x at those rows,
 * adds feature l and scatters them back: three small dispatches per
 * DeepStack layer, O(image rows x width), next to the layer's matmuls.
 */
#include "engine/arch/qwen3vl/qwen3vl.h"
#include "engine/model/lm_internal.h"
#include "engine/ops/ops.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The family's state in an lm (lm->arch_state): the DeepStack rows of a
 * pass and where they go. */
struct q3_ds {
    uint32_t n, cap, rows;
    struct vkr_arena *a;
    struct vkr_tensor feat[GGUF_MAX_DEEPSTACK], idx, tmp; /* cap x E each, cap int32, cap x E */
    float *host;
    int32_t *hidx;
};

static struct q3_ds *ds_of(struct lm *lm)
{
    return lm->arch_state;
}

int q3_lm_keys(struct vkr_pipeline_key *out)
{
    out[0] = ops_scatter_key();
    out[1] = ops_gather_key(QUANT_F32);
    out[2] = ops_elem_key(OP_ADD);
    out[3] = ops_norm_key(0, 0);
    return 4;
}

int q3_lm_open(struct lm *lm, struct folio_err *err)
{
    if (!lm->hp.n_deepstack)
        return 0;
    struct q3_ds *ds = calloc(1, sizeof *ds);
    if (!ds)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    lm->arch_state = ds;
    ds->n = lm->hp.n_deepstack;
    /* rows added after the last layer would change what the head reads */
    if (ds->n >= lm->hp.n_layer)
        lm->full_tail = 1;
    /* every prompt row of a full batch may be an image row */
    uint64_t cap = (uint64_t)lm->cfg.batch * lm->cfg.max_tokens, E = lm->E;
    /* one tensor per layer: every view starts at a binding's alignment */
    uint32_t n = ds->n;
    uint64_t sizes[GGUF_MAX_DEEPSTACK + 2];
    if (cap > UINT32_MAX / 4 || cap * E > UINT32_MAX)
        return folio_err_set(err, FOLIO_ELIMIT, "text model: %" PRIu64 " DeepStack rows", cap);
    for (uint32_t l = 0; l < n; l++)
        sizes[l] = cap * E * 4;
    sizes[n] = cap * 4;
    sizes[n + 1] = cap * E * 4;
    ds->cap = (uint32_t)cap;
    /* on the first device, with the early layers that add the rows */
    int rc = vkr_arena_create(lm->part[0].vk, "lm-deepstack", VKR_ARENA_ACTIVATIONS, &ds->a, err);
    if (!rc)
        rc = vkr_arena_plan(ds->a, sizes, (int)n + 2, err);
    if (!rc)
        vkr_arena_reset(ds->a);
    for (uint32_t l = 0; !rc && l < n; l++)
        rc = vkr_arena_alloc(ds->a, sizes[l], &ds->feat[l], err);
    if (!rc)
        rc = vkr_arena_alloc(ds->a, sizes[n], &ds->idx, err);
    if (!rc)
        rc = vkr_arena_alloc(ds->a, sizes[n + 1], &ds->tmp, err);
    if (rc) {
        if (rc == FOLIO_ELIMIT)
            folio_err_hint(err, "lower --max-tokens or --batch (now %u tokens x %u sequences)",
                           lm->cfg.max_tokens, lm->cfg.batch);
        return rc;
    }
    ds->host = malloc((size_t)n * sizes[0]);
    ds->hidx = malloc((size_t)sizes[n]);
    if (!ds->host || !ds->hidx)
        return folio_err_set(err, FOLIO_ENOMEM, "text model: out of host memory for %" PRIu64
                             " DeepStack rows", cap);
    return 0;
}

void q3_lm_close(struct lm *lm)
{
    struct q3_ds *ds = ds_of(lm);
    if (!ds)
        return;
    vkr_arena_destroy(ds->a);
    free(ds->host);
    free(ds->hidx);
    free(ds);
    lm->arch_state = NULL;
}

int q3_lm_stage(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq, int prefill,
                struct folio_err *err)
{
    struct q3_ds *ds = ds_of(lm);
    if (!ds)
        return 0;
    ds->rows = 0;
    if (!ds->n || !prefill)
        return 0;
    const uint32_t E = lm->E, cap = ds->cap;
    uint32_t k = 0;
    for (uint32_t b = 0; b < nseq; b++) {
        const struct lm_seq *s = &seqs[b];
        for (uint32_t i = 0; i < s->n; i++) {
            if (s->tokens[i] >= 0)
                continue;
            if (k >= cap)
                return folio_err_set(err, FOLIO_ELIMIT, "text model: more than %u image rows",
                                     cap);
            ds->hidx[k] = (int32_t)(lm->seq_start[b] + i);
            const float *row = s->embd + (size_t)i * lm->Ein;
            for (uint32_t l = 0; l < ds->n; l++)
                memcpy(ds->host + ((size_t)l * cap + k) * E, row + (size_t)(1 + l) * E,
                       (size_t)E * sizeof(float));
            k++;
        }
    }
    ds->rows = k;
    if (!k)
        return 0;
    int rc = vkr_upload(lm->vk, ds->idx, 0, ds->hidx, (uint64_t)k * 4, err);
    for (uint32_t l = 0; !rc && l < ds->n; l++)
        rc = vkr_upload(lm->vk, ds->feat[l], 0, ds->host + (size_t)l * cap * E,
                        (uint64_t)k * E * 4, err);
    return rc;
}

int q3_lm_qk_norm(struct lm *lm, struct vkr_cmd *c, const struct lm_layer *L, struct vkr_tensor q,
                  uint32_t nq, struct vkr_tensor k, uint32_t nk, struct folio_err *err)
{
    /* each head's D values are one row of the norm (HF: q_norm over head_dim) */
    const struct gguf_text_hparams *h = &lm->hp;
    int rc = op_norm(c, &(struct op_norm){.x = q, .y = q, .w = &L->qn.t, .rows = nq * h->n_head,
                                          .n = lm->D, .eps = h->rms_eps}, err);
    if (!rc)
        rc = op_norm(c, &(struct op_norm){.x = k, .y = k, .w = &L->kn.t,
                                          .rows = nk * h->n_head_kv, .n = lm->D,
                                          .eps = h->rms_eps}, err);
    return rc;
}

int q3_lm_deepstack_add(struct lm *lm, struct vkr_cmd *c, uint32_t layer, uint32_t nrows,
                        struct folio_err *err)
{
    struct q3_ds *ds = ds_of(lm);
    if (!ds || layer >= ds->n || ds->rows == 0)
        return 0;
    const uint32_t E = lm->E, k = ds->rows;
    struct vkr_tensor idx = ds->idx, feat = ds->feat[layer], tmp = ds->tmp;
    idx.size = (uint64_t)k * 4;
    feat.size = (uint64_t)k * E * 4;
    tmp.size = (uint64_t)k * E * 4;
    int rc = op_gather(c, &(struct op_gather){.table = lm->x, .wtype = QUANT_F32, .rows = nrows,
                                              .k = E, .ids = idx, .n_ids = k, .y = tmp}, err);
    if (!rc)
        rc = op_elem(c, &(struct op_elem){.op = OP_ADD, .a = tmp, .b = &feat, .y = tmp,
                                          .n = (uint64_t)k * E, .nb = (uint64_t)k * E}, err);
    if (!rc)
        rc = op_scatter(c, tmp, idx, k, E, lm->x, nrows, err);
    return rc;
}
