/*
 * The op library's pipeline list. ops_pipeline_keys() is the single place
 * that knows every (shader, specialization) the ops can use, so pre-warm
 * covers exactly what requests will ask for and the sealed registry never
 * sees a miss. It sits above the op files (it asks them for their keys),
 * while they use only ops_common.c below them.
 */
#include "engine/ops/ops_internal.h"

#include <stdlib.h>
#include <string.h>

static const int WTYPES[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0,
                             QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
/* Head sizes pre-warmed for the generic list (tests, doctor, bench): each
 * class of both kernels. A model pre-warms its own head size through
 * ops_attention_keys, whatever it is. */
static const uint32_t HEADS[] = {16, 32, 64, 72, 80, 96, 128, 256};

int ops_matmul_keys(const struct vkr *vk, int wtype, struct vkr_pipeline_key *out)
{
    int n = 0;
    out[n++] = ops_mm_key(vk, OP_MM_MATVEC, wtype);
    out[n++] = ops_mm_key(vk, OP_MM_TILED, wtype);
    if (ops_coopmat_available(vk))
        out[n++] = ops_mm_key(vk, OP_MM_COOPMAT, wtype);
    if (wtype != QUANT_F16) {
        /* --gpu-weights may expand this type to f16 at load: its expansion
         * kernel and every f16 kernel are needed as well. */
        out[n++] = ops_dequant_key(wtype);
        return n + ops_matmul_keys(vk, QUANT_F16, &out[n]);
    }
    return n + ops_gemm_keys(vk, &out[n]);
}

int ops_matmul_i8_keys(const struct vkr *vk, const int *wtypes, int nw, const uint32_t *ks, int nk,
                       const uint32_t *ks16, int nk16, struct vkr_pipeline_key *out)
{
    int n = 0;
    /* int8 rows as a weight type of the other kernels (few rows, or no
     * int8 GEMM) and their quantization at load from each type given */
    out[n++] = ops_mm_key(vk, OP_MM_MATVEC, QUANT_I8R);
    out[n++] = ops_mm_key(vk, OP_MM_TILED, QUANT_I8R);
    if (ops_coopmat_available(vk))
        out[n++] = ops_mm_key(vk, OP_MM_COOPMAT, QUANT_I8R);
    for (int i = 0; i < nw; i++)
        out[n++] = ops_quant_rows_key(vk, wtypes[i]);
    return n + ops_gemm_i8_keys(vk, ks, nk, ks16, nk16, &out[n]);
}

int ops_key_at_load(const struct vkr_pipeline_key *k)
{
    /* ops_upload_weight's expansions into f16 and int8 rows */
    return strcmp(k->shader, "dequant_f16") == 0 || strcmp(k->shader, "quant_rows") == 0;
}

int ops_key_optional(const struct vkr_pipeline_key *k)
{
    if (strcmp(k->shader, "flash_attn_cm2") == 0) /* op_attention's kernel_for */
        return 1;
    /* op_matmul: AUTO's K-fixed f16 forms, else the K-from-push one (spec 8:
     * K). A model's int8 GEMM has its K-fixed forms only (ops_gemm_i8_keys):
     * they are its path. */
    return strcmp(k->shader, "gemm_cm2") == 0 && k->nspec > 8 && k->spec[8] != 0;
}

int ops_pipeline_keys(const struct vkr *vk, struct vkr_pipeline_key *out, int max)
{
    struct vkr_pipeline_key all[512];
    int n = 0;
    for (size_t i = 0; i < sizeof WTYPES / sizeof WTYPES[0]; i++) {
        n += ops_matmul_keys(vk, WTYPES[i], &all[n]);
        all[n++] = ops_gather_key(WTYPES[i]);
    }
    n += ops_matmul_i8_keys(vk, WTYPES, (int)(sizeof WTYPES / sizeof WTYPES[0]), NULL, 0, NULL, 0,
                            &all[n]);
    for (int f16 = 0; f16 < 2; f16++)
        for (int layer = 0; layer < 2; layer++)
            all[n++] = ops_norm_key(layer, f16);
    all[n++] = ops_softmax_key();
    for (int m = OP_ROPE_NEOX; m <= OP_ROPE_IMROPE; m++)
        for (int io = 0; io < 4; io++) /* f16 output (bit 0), f16 input (bit 1) */
            all[n++] = ops_rope_key(m, io & 1, io >> 1);
    for (size_t i = 0; i < sizeof HEADS / sizeof HEADS[0]; i++)
        for (int io = OP_ATTN_IO_F32; io <= OP_ATTN_IO_KV16; io++)
            n += ops_attention_keys(vk, HEADS[i], io, &all[n]);
    for (int kv16 = 0; kv16 < 2; kv16++)
        n += ops_attention_split_keys(kv16, &all[n]);
    all[n++] = ops_attention_combine_key();
    for (int op = 0; op <= OP_SCALE; op++)
        all[n++] = ops_elem_key(op);
    all[n++] = ops_convert_key(1);
    all[n++] = ops_convert_key(0);
    all[n++] = ops_scatter_key();
    all[n++] = ops_concat2x2_key();
    all[n++] = ops_patchify_key();
    /* bench ops' roofline probes (bench/engine/ops_bench.c): no op owns them */
    all[n++] = ops_key("peak_fma", 0, 0, 0);
    all[n++] = ops_key("peak_bw", 0, 0, 0);
    n = ops_keys_unique(all, n);
    int k = n < max ? n : max;
    if (out)
        memcpy(out, all, (size_t)k * sizeof *out);
    return k;
}

int ops_prewarm_begin(struct vkr *vk, const struct vkr_pipeline_key *keys, int n,
                      struct folio_err *err)
{
    struct vkr_pipeline_key *load = malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof *load);
    if (!load)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    struct vkr_pipeline_key *rest = load + (n > 0 ? n : 1);
    int nl = 0, nr = 0, failed = 0; /* the caller counts failures at vkr_prewarm_finish */
    for (int i = 0; i < n; i++) {
        if (ops_key_at_load(&keys[i]))
            load[nl++] = keys[i];
        else
            rest[nr++] = keys[i];
    }
    int rc = vkr_prewarm(vk, load, nl, &failed, err);
    if (!rc)
        rc = vkr_prewarm_start(vk, rest, nr, err);
    free(load);
    return rc;
}

int ops_prewarm(struct vkr *vk, int *failed, struct folio_err *err)
{
    struct vkr_pipeline_key keys[512];
    int n = ops_pipeline_keys(vk, keys, 512);
    return vkr_prewarm(vk, keys, n, failed, err);
}
