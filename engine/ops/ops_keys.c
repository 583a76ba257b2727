/*
 * The op library's pipeline list. ops_pipeline_keys() is the single place
 * that knows every (shader, specialization) the ops can use, so pre-warm
 * covers exactly what requests will ask for and the sealed registry never
 * sees a miss. It sits above the op files (it asks them for their keys),
 * while they use only ops_common.c below them.
 */
#include "engine/ops/ops_internal.h"

#include <string.h>

static const int WTYPES[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0,
                             QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
/* Head sizes pre-warmed for the generic list (tests, doctor, bench): each
 * class of both kernels. A model pre-warms its own head size through
 * ops_attention_keys, whatever it is. */
static const uint32_t HEADS[] = {16, 32, 64, 72, 80, 96, 128, 256};

static void key(struct vkr_pipeline_key *k, const char *shader, uint32_t nspec, uint32_t s0,
                uint32_t s1)
{
    *k = ops_key(shader, nspec, s0, s1);
}

int ops_matmul_keys(const struct vkr *vk, int wtype, struct vkr_pipeline_key *out)
{
    int n = 0;
    out[n++] = ops_key("matvec", 2, (uint32_t)wtype, 128);
    out[n++] = ops_key("matmul", 1, (uint32_t)wtype, 0);
    if (ops_coopmat_available(vk))
        out[n++] = ops_key("matmul_cm", 1, (uint32_t)wtype, 0);
    if (wtype != QUANT_F16) {
        /* --gpu-weights may expand this type to f16 at load: its expansion
         * kernel and every f16 kernel are needed as well. */
        out[n++] = ops_key("dequant_f16", 1, (uint32_t)wtype, 0);
        return n + ops_matmul_keys(vk, QUANT_F16, &out[n]);
    }
    return n + ops_gemm_keys(vk, &out[n]);
}

int ops_pipeline_keys(const struct vkr *vk, struct vkr_pipeline_key *out, int max)
{
    struct vkr_pipeline_key all[512];
    int n = 0;
    for (size_t i = 0; i < sizeof WTYPES / sizeof WTYPES[0]; i++) {
        n += ops_matmul_keys(vk, WTYPES[i], &all[n]);
        key(&all[n++], "gather", 1, (uint32_t)WTYPES[i], 0);
    }
    key(&all[n++], "norm", 1, 0, 0);
    key(&all[n++], "norm", 1, 1, 0);
    key(&all[n++], "norm", 2, 0, 1);
    key(&all[n++], "norm", 2, 1, 1);
    key(&all[n++], "softmax", 0, 0, 0);
    for (uint32_t m = 0; m < 4; m++)
        key(&all[n++], "rope", 1, m, 0);
    for (size_t i = 0; i < sizeof HEADS / sizeof HEADS[0]; i++)
        for (int f16 = 0; f16 < 2; f16++)
            n += ops_attention_keys(vk, HEADS[i], f16, &all[n]);
    key(&all[n++], "attn_lse", 0, 0, 0);
    key(&all[n++], "attn_merge", 0, 0, 0);
    for (uint32_t op = 0; op <= OP_SCALE; op++)
        key(&all[n++], "elem", 1, op, 0);
    key(&all[n++], "convert", 1, 0, 0);
    key(&all[n++], "convert", 1, 1, 0);
    key(&all[n++], "scatter", 0, 0, 0);
    key(&all[n++], "concat2x2", 0, 0, 0);
    key(&all[n++], "peak_fma", 0, 0, 0);
    key(&all[n++], "peak_bw", 0, 0, 0);
    n = ops_keys_unique(all, n);
    int k = n < max ? n : max;
    if (out)
        memcpy(out, all, (size_t)k * sizeof *out);
    return k;
}

int ops_prewarm(struct vkr *vk, int *failed, struct folio_err *err)
{
    struct vkr_pipeline_key keys[512];
    int n = ops_pipeline_keys(vk, keys, 512);
    return vkr_prewarm(vk, keys, n, failed, err);
}
