/*
 * Fused flash-style attention (shaders/attention.comp): causal or not,
 * grouped-query heads, optional per-query key ranges for block-diagonal
 * (windowed) attention. Q, K, V and O are each bound whole, so each must
 * fit maxStorageBufferRange (5000 vision tokens x 1280 f32 = 25 MB).
 */
#include "engine/ops/ops_internal.h"

struct attn_push {
    uint32_t Tq, Tk, Hq, Hkv, qs, ks, vs, os;
    float scale;
    uint32_t causal, has_ranges;
    int32_t kv_off;
};

int op_attention(struct vkr_cmd *c, const struct op_attention *a, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (!ops_attention_head_supported(a->d))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "attention: head size %u is not built "
                             "(32, 64, 72, 80, 96, 128)", a->d);
    if (a->hkv == 0 || a->hq % a->hkv != 0)
        return folio_err_set(err, FOLIO_EINVAL, "attention: %u query heads are not a multiple of "
                             "%u KV heads", a->hq, a->hkv);
    if (a->tq == 0)
        return 0;
    uint32_t pid;
    int rc = ops_pipe(vk, "attention", 1, &a->d, &pid, err);
    if (rc)
        return rc;
    struct vkr_bind b[5];
    uint32_t qs = a->q_stride ? a->q_stride : a->hq * a->d, ks = a->k_stride ? a->k_stride : a->hkv * a->d;
    uint32_t vs = a->v_stride ? a->v_stride : a->hkv * a->d, os = a->o_stride ? a->o_stride : a->hq * a->d;
    if (qs < a->hq * a->d || os < a->hq * a->d || ks < a->hkv * a->d || vs < a->hkv * a->d)
        return folio_err_set(err, FOLIO_EINVAL, "attention: a row stride is shorter than its heads");
    /* Bytes up to the end of the last token's heads. */
    uint64_t qb = ((uint64_t)(a->tq - 1) * qs + (uint64_t)a->hq * a->d) * 4;
    uint64_t ob = ((uint64_t)(a->tq - 1) * os + (uint64_t)a->hq * a->d) * 4;
    uint64_t kb = a->tk ? ((uint64_t)(a->tk - 1) * ks + (uint64_t)a->hkv * a->d) * 4 : 4;
    uint64_t vb = a->tk ? ((uint64_t)(a->tk - 1) * vs + (uint64_t)a->hkv * a->d) * 4 : 4;
    rc = ops_bind(vk, a->q, qb, &b[0], "attention q", err);
    if (!rc)
        rc = ops_bind(vk, a->k, kb, &b[1], "attention k", err);
    if (!rc)
        rc = ops_bind(vk, a->v, vb, &b[2], "attention v", err);
    if (!rc)
        rc = ops_bind(vk, a->o, ob, &b[3], "attention o", err);
    if (!rc)
        rc = ops_bind(vk, a->ranges ? *a->ranges : a->q, a->ranges ? (uint64_t)a->tq * 8 : 4, &b[4],
                      "attention ranges", err);
    if (rc)
        return rc;
    struct attn_push pc = {a->tq, a->tk, a->hq, a->hkv, qs, ks, vs, os, a->scale, a->causal != 0,
                           a->ranges != NULL, (int32_t)a->tk - (int32_t)a->tq};
    uint32_t gx = (a->tq + 15) / 16;
    if (gx > vkr_limits(vk)->max_wg_count[0] || a->hq > vkr_limits(vk)->max_wg_count[1])
        return folio_err_set(err, FOLIO_ELIMIT, "attention: %u queries x %u heads exceed the "
                             "dispatch limits", a->tq, a->hq);
    return vkr_cmd_dispatch(c, pid, b, 5, &pc, sizeof pc, gx, a->hq, 1, "attention", err);
}
