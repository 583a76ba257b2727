/*
 * Attention whose operands exceed one binding (maxStorageBufferRange): a
 * long KV cache, a long prompt's queries, label rows attending to a whole
 * batch's cache. The fused kernel (op_attention, shaders/attention.comp)
 * binds q, k, v and o whole; here the queries are cut into chunks that
 * fit, and for each query chunk the keys into chunks that fit:
 *
 *   for each key chunk:  attn_lse    clip each query's range to the chunk,
 *                                    log-sum-exp of its visible scores
 *                        attention   that chunk's normalised output
 *                        attn_merge  fold it into the running output
 *
 * The first key chunk writes the output and the running log-sum-exp
 * directly; later ones go through the caller's scratch and are merged.
 * Scores are computed twice on this path (once for the log-sum-exp), which
 * costs compute only where one binding cannot hold the operands at all —
 * lowered limits in tests, or prompts of hundreds of thousands of rows.
 * When everything fits, this is exactly one op_attention call. Q and O
 * are f32 on this path; K and V may be f16 (an f16 KV cache, kv_f16).
 * Queries may carry one key range or two (two_ranges: a label row's
 * prompt and its own slots); attn_lse clips each to the chunk. Each
 * chunk's op_attention may split its keys further (split K, when the
 * caller gave op_attention.ksplit): its normalised output is the same.
 *
 * Chunk starts are multiples of the rows that keep every view at
 * minStorageBufferOffsetAlignment, since the fused kernel takes its
 * operands at binding offset 0.
 */
#include "engine/ops/ops_internal.h"

#include <inttypes.h>

struct lse_push {
    uint32_t Tq, Tk, Hq, Hkv, D, qs, ks, causal, has_ranges, k0;
    int32_t kv_off;
    float scale;
};
struct merge_push {
    uint32_t Tq, Hq, D, os, ocs;
};

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

uint64_t ops_align_rows(const struct vkr *vk, uint64_t row_bytes)
{
    uint64_t a = vkr_limits(vk)->min_ssbo_align ? vkr_limits(vk)->min_ssbo_align : 4;
    return a / gcd64(a, row_bytes);
}

static uint64_t lcm64(uint64_t a, uint64_t b)
{
    return a / gcd64(a, b) * b;
}

/* Whole rows of row_bytes that one binding holds, rounded down to g. */
static uint64_t chunk_rows(const struct vkr *vk, uint64_t row_bytes, uint64_t g)
{
    uint64_t n = vkr_limits(vk)->max_range / row_bytes;
    return n / g * g;
}

void op_attention_scratch_bytes(const struct vkr *vk, uint32_t tq, uint32_t hq, uint32_t d,
                                uint64_t out[4])
{
    uint64_t row = (uint64_t)hq * d * 4;
    uint64_t g = lcm64(ops_align_rows(vk, row), ops_align_rows(vk, 8));
    uint64_t r = chunk_rows(vk, row, g);
    if (r > tq)
        r = tq;
    if (r == 0)
        r = 1;
    out[0] = r * row;            /* one key chunk's output */
    out[1] = r * hq * 4;         /* running log-sum-exp */
    out[2] = r * hq * 4;         /* the chunk's log-sum-exp */
    out[3] = r * 16;             /* the chunk's relative key ranges (up to two per query) */
}

uint64_t ops_attention_split_rows(const struct vkr *vk, uint32_t hq, uint32_t d)
{
    /* o is bound whole on the fused path and is hq * d f32 a row whatever
     * the operands' strides: one row more than a binding holds splits */
    uint64_t row = (uint64_t)hq * d * 4;
    return row ? vkr_limits(vk)->max_range / row + 1 : UINT64_MAX;
}

int ops_attention_split_keys(int kv16, struct vkr_pipeline_key *out)
{
    out[0] = ops_key("attn_lse", 1, kv16 != 0, 0); /* reads K */
    out[1] = ops_key("attn_merge", 0, 0, 0);       /* outputs only: f32 */
    return 2;
}

int op_attention_ranged(struct vkr_cmd *c, const struct op_attention *a,
                        const struct op_attention_scratch *s, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    uint64_t R = vkr_limits(vk)->max_range;
    if (a->tq == 0)
        return 0;
    if (a->hkv == 0 || a->hq % a->hkv != 0)
        return folio_err_set(err, FOLIO_EINVAL, "attention: %u query heads are not a multiple of "
                             "%u KV heads", a->hq, a->hkv);
    uint32_t qs = a->q_stride ? a->q_stride : a->hq * a->d, ks = a->k_stride ? a->k_stride : a->hkv * a->d;
    uint32_t vs = a->v_stride ? a->v_stride : a->hkv * a->d, os = a->o_stride ? a->o_stride : a->hq * a->d;
    uint64_t kes = a->f16 || a->kv_f16 ? 2 : 4; /* bytes of a K / V element */
    if (a->two_ranges && !a->ranges)
        return folio_err_set(err, FOLIO_EINVAL, "attention: two key ranges per query asked for "
                             "without a ranges buffer");
    uint64_t rw = a->two_ranges ? 16 : 8; /* bytes of one query's key ranges */
    uint64_t qb = (uint64_t)a->tq * qs * 4, ob = (uint64_t)a->tq * os * 4;
    uint64_t kb = (uint64_t)a->tk * ks * kes, vb = (uint64_t)a->tk * vs * kes;
    if (qb <= R && ob <= R && kb <= R && vb <= R && (uint64_t)a->tq * rw <= R)
        return op_attention(c, a, err);
    if (a->f16) /* attn_lse reads f32 queries, attn_merge f32 outputs (K and V may be f16) */
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "attention: f16 tensors past one binding "
                             "(%u queries x %u keys) are not split; use f32 here", a->tq, a->tk);
    if (!s)
        return folio_err_set(err, FOLIO_ELIMIT, "attention: %u queries x %u keys exceed one "
                             "binding (%" PRIu64 " bytes) and no split scratch was planned",
                             a->tq, a->tk, R);
    uint64_t row = (uint64_t)a->hq * a->d * 4;
    uint64_t gq = lcm64(lcm64(ops_align_rows(vk, (uint64_t)qs * 4), ops_align_rows(vk, (uint64_t)os * 4)),
                        lcm64(ops_align_rows(vk, rw), ops_align_rows(vk, row)));
    uint64_t gk = lcm64(ops_align_rows(vk, (uint64_t)ks * kes), ops_align_rows(vk, (uint64_t)vs * kes));
    uint64_t qper = chunk_rows(vk, (uint64_t)(qs > os ? qs : os) * 4, gq);
    uint64_t kper = chunk_rows(vk, (uint64_t)(ks > vs ? ks : vs) * kes, gk);
    uint64_t cap = s->o.size / row;
    if (s->lse.size / ((uint64_t)a->hq * 4) < cap)
        cap = s->lse.size / ((uint64_t)a->hq * 4);
    if (s->lse_c.size / ((uint64_t)a->hq * 4) < cap)
        cap = s->lse_c.size / ((uint64_t)a->hq * 4);
    if (s->ranges.size / rw < cap)
        cap = s->ranges.size / rw;
    if (qper > cap)
        qper = cap / gq * gq;
    if (qper == 0 || kper == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "attention: one query or key row (%u or %u "
                             "floats) does not fit the binding range %" PRIu64 " (or the split "
                             "scratch holds no chunk)", qs, ks, R);
    uint32_t pl, pm;
    struct vkr_pipeline_key split[2];
    ops_attention_split_keys(a->kv_f16, split);
    int rc = ops_pipe_key(vk, split[0], &pl, err);
    if (!rc)
        rc = ops_pipe_key(vk, split[1], &pm, err);
    if (rc)
        return rc;
    if (a->ranges)
        rc = ops_need(*a->ranges, (uint64_t)a->tq * rw, "attention ranges", err);
    if (!rc)
        rc = ops_need(a->q, qb - (uint64_t)(qs - a->hq * a->d) * 4, "attention q", err);
    if (!rc)
        rc = ops_need(a->o, ob - (uint64_t)(os - a->hq * a->d) * 4, "attention o", err);
    if (rc)
        return rc;
    int64_t kv_off = (int64_t)a->tk - (int64_t)a->tq;
    for (uint64_t i0 = 0; i0 < a->tq; i0 += qper) {
        uint64_t i1 = i0 + qper < a->tq ? i0 + qper : a->tq, nq = i1 - i0;
        /* a view's size reaches the end of its last row's heads */
        struct vkr_tensor q = vkr_view(a->q, i0 * qs * 4, ((nq - 1) * qs + a->hq * a->d) * 4);
        struct vkr_tensor o = vkr_view(a->o, i0 * os * 4, ((nq - 1) * os + a->hq * a->d) * 4);
        struct vkr_tensor ri = a->ranges ? vkr_view(*a->ranges, i0 * rw, nq * rw) : q;
        struct vkr_bind bq, bri, bro, bo, boc, bl, blc;
        rc = ops_bind(vk, q, q.size, &bq, "attention q chunk", err);
        if (!rc)
            rc = ops_bind(vk, ri, a->ranges ? nq * rw : 4, &bri, "attention ranges chunk", err);
        if (!rc)
            rc = ops_bind(vk, s->ranges, nq * rw, &bro, "split ranges", err);
        if (!rc)
            rc = ops_bind(vk, o, o.size, &bo, "attention o chunk", err);
        if (!rc)
            rc = ops_bind(vk, s->o, nq * row, &boc, "split output", err);
        if (!rc)
            rc = ops_bind(vk, s->lse, nq * a->hq * 4, &bl, "split log-sum-exp", err);
        if (!rc)
            rc = ops_bind(vk, s->lse_c, nq * a->hq * 4, &blc, "split chunk log-sum-exp", err);
        if (rc)
            return rc;
        uint32_t gx, gy;
        ops_grid(nq, &gx, &gy);
        for (uint64_t k0 = 0, first = 1; k0 < a->tk || first; k0 += kper, first = 0) {
            uint64_t k1 = k0 + kper < a->tk ? k0 + kper : a->tk, nk = k1 - k0;
            struct vkr_tensor k =
                nk ? vkr_view(a->k, k0 * ks * kes, ((nk - 1) * ks + a->hkv * a->d) * kes) : a->k;
            struct vkr_tensor v =
                nk ? vkr_view(a->v, k0 * vs * kes, ((nk - 1) * vs + a->hkv * a->d) * kes) : a->v;
            struct vkr_bind bk;
            rc = ops_bind(vk, k, nk ? k.size : 4, &bk, "attention k chunk", err);
            if (rc)
                return rc;
            struct vkr_bind lb[5] = {bq, bk, bri, bro, first ? bl : blc};
            struct lse_push lp = {(uint32_t)nq, (uint32_t)nk, a->hq, a->hkv, a->d, qs, ks,
                                  a->causal != 0, a->ranges ? (a->two_ranges ? 2u : 1u) : 0u,
                                  (uint32_t)k0,
                                  (int32_t)((int64_t)i0 + kv_off - (int64_t)k0), a->scale};
            rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pl, .b = lb, .nb = 5,
                                                            .push = &lp, .push_bytes = sizeof lp,
                                                            .groups = {gx, gy, a->hq},
                                                            .label = "attn_lse"}, err);
            if (rc)
                return rc;
            struct op_attention ac = *a;
            ac.q = q;
            ac.k = k;
            ac.v = v;
            ac.o = first ? o : s->o;
            ac.o_stride = first ? os : a->hq * a->d;
            ac.tq = (uint32_t)nq;
            ac.tk = (uint32_t)nk;
            ac.causal = 0;
            struct vkr_tensor rr = vkr_view(s->ranges, 0, nq * rw);
            ac.ranges = &rr; /* two_ranges as the caller's: attn_lse wrote as many */
            /* The chunks' outputs are merged by attn_lse's f32 log-sum-exp:
             * they must be normalised by the same f32 scores, which the
             * tensor-core kernel (f16 Q*K products) does not give. */
            ac.kernel = OP_ATTN_SCALAR;
            rc = op_attention(c, &ac, err);
            if (rc)
                return rc;
            if (first)
                continue;
            struct vkr_bind mb[4] = {bo, boc, bl, blc};
            struct merge_push mp = {(uint32_t)nq, a->hq, a->d, os, a->hq * a->d};
            rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pm, .b = mb, .nb = 4,
                                                            .push = &mp, .push_bytes = sizeof mp,
                                                            .groups = {gx, gy, a->hq},
                                                            .label = "attn_merge"}, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}
