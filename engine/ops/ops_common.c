/*
 * The op library's pipeline list and shared helpers. ops_pipeline_keys()
 * is the single place that knows every (shader, specialization) the ops
 * can use, so pre-warm covers exactly what requests will ask for and the
 * sealed registry never sees a miss.
 */
#include "engine/ops/ops_internal.h"

#include <inttypes.h>
#include <string.h>

static const int WTYPES[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0,
                             QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
/* Head sizes pre-warmed for the generic list (tests, doctor, bench): each
 * class of both kernels. A model pre-warms its own head size through
 * ops_attention_keys, whatever it is. */
static const uint32_t HEADS[] = {16, 32, 64, 72, 80, 96, 128, 256};

int ops_coopmat_available(const struct vkr *vk)
{
    /* The kernel assumes 32-lane subgroups (8 per 256-thread workgroup). */
    return vkr_features(vk)->coopmat_nv && vkr_limits(vk)->subgroup_size == 32 &&
           vkr_limits(vk)->max_shared >= 32768 && vkr_has_shader("matmul_cm");
}

struct vkr_pipeline_key ops_key(const char *shader, uint32_t nspec, uint32_t s0, uint32_t s1)
{
    struct vkr_pipeline_key k;
    memset(&k, 0, sizeof k);
    k.shader = shader;
    k.nspec = nspec;
    k.spec[0] = s0;
    k.spec[1] = s1;
    return k;
}

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

int ops_keys_unique(struct vkr_pipeline_key *k, int n)
{
    int w = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < w && !seen; j++)
            seen = vkr_pipeline_key_equal(&k[j], &k[i]);
        if (!seen)
            k[w++] = k[i];
    }
    return w;
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

int ops_pipe(struct vkr *vk, const char *shader, uint32_t nspec, const uint32_t *spec,
             uint32_t *id, struct folio_err *err)
{
    struct vkr_pipeline_key k;
    memset(&k, 0, sizeof k);
    k.shader = shader;
    k.nspec = nspec;
    for (uint32_t i = 0; i < nspec; i++)
        k.spec[i] = spec[i];
    return vkr_pipeline(vk, &k, id, err);
}

void ops_grid(uint64_t groups, uint32_t *gx, uint32_t *gy)
{
    if (groups <= 65535) {
        *gx = (uint32_t)(groups ? groups : 1);
        *gy = 1;
    } else {
        *gx = 65535;
        *gy = (uint32_t)((groups + 65534) / 65535);
    }
}

int ops_need(struct vkr_tensor t, uint64_t bytes, const char *what, struct folio_err *err)
{
    if (t.size < bytes)
        return folio_err_set(err, FOLIO_EINVAL, "%s: tensor of %" PRIu64 " bytes, op needs %" PRIu64,
                             what, t.size, bytes);
    return 0;
}

int ops_bind(const struct vkr *vk, struct vkr_tensor t, uint64_t bytes, struct vkr_bind *b,
             const char *what, struct folio_err *err)
{
    int rc = ops_need(t, bytes, what, err);
    if (rc)
        return rc;
    uint64_t range = (bytes + 3) & ~(uint64_t)3;
    if (range == 0)
        range = 4;
    if (range > vkr_limits(vk)->max_range)
        return folio_err_set(err, FOLIO_ELIMIT, "%s: %" PRIu64 " bytes exceed the binding range %"
                             PRIu64 " of this device", what, bytes, vkr_limits(vk)->max_range);
    b->t = t;
    b->offset = 0;
    b->range = range;
    return 0;
}

uint64_t ops_rows_per(const struct vkr *vk, const uint64_t *row_bytes, int n)
{
    uint64_t r = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        uint64_t x = vkr_rows_per_range(vk, row_bytes[i]);
        if (x < r)
            r = x;
    }
    return r;
}
