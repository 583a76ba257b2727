/*
 * Synthetic vision towers: a complete mmproj GGUF in memory, written with
 * folio's own GGUF writer (the benchmark is vision_bench.c).
 *
 * Weights: rows ~ U(-1,1)·sqrt(3/k) keep unit variance through every
 * projection; norm weights 1, biases small. As in lm_synth.c, each tensor
 * repeats a pool of 64 random rows so the 7B shape (677 M parameters) is
 * made in seconds; the GPU still reads every byte, which is what the
 * benchmark measures.
 */
#include "bench/engine/synth.h"
#include "common/rng.h"
#include "engine/gguf/gguf_write.h"
#include "engine/quant/quant.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum fill { F_MAT, F_ONE, F_BIAS };

static int add(struct gguf_writer *w, struct folio_rng *r, int type, enum fill how, uint32_t nd,
               const uint64_t *ne, struct folio_err *err, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));

static int add(struct gguf_writer *w, struct folio_rng *r, int type, enum fill how, uint32_t nd,
               const uint64_t *ne, struct folio_err *err, const char *fmt, ...)
{
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    uint64_t k = ne[0], rows = 1;
    for (uint32_t i = 1; i < nd; i++)
        rows *= ne[i];
    if (nd == 4) { /* patch kernel: rows of 588 */
        k = ne[0] * ne[1] * ne[2];
        rows = ne[3];
    }
    uint64_t rb = quant_row_bytes(type, k), pool = rows < 64 ? rows : 64;
    uint8_t *data = malloc(rb * rows);
    float *row = malloc(k * sizeof *row);
    int rc = data && row ? 0 : folio_err_set(err, FOLIO_ENOMEM, "synthetic tower: out of host "
                                             "memory for %s", name);
    float sc = sqrtf(3.0f / (float)k);
    for (uint64_t i = 0; i < pool && !rc; i++) {
        for (uint64_t j = 0; j < k; j++)
            row[j] = how == F_MAT ? folio_rng_signed(r) * sc : how == F_ONE ? 1.0f + 0.05f * folio_rng_signed(r)
                                                                 : 0.02f * folio_rng_signed(r);
        rc = quant_quantize_row(type, row, data + i * rb, (int64_t)k);
    }
    for (uint64_t i = pool; i < rows && !rc; i++)
        memcpy(data + i * rb, data + (i % pool) * rb, rb);
    if (!rc && gguf_w_tensor(w, name, type, nd, ne, data))
        rc = folio_err_set(err, FOLIO_ENOMEM, "synthetic tower: cannot add %s", name);
    free(data);
    free(row);
    return rc;
}

/* What sets the families' files apart, in the order llama.cpp's converter
 * writes them (gguf_model.c checks each family's keys and tensors). */
struct tower_family {
    const char *projector;
    const char *act_key;   /* bool key set after the projector type, or NULL */
    uint32_t image_size, patch;
    int merge_key;         /* clip.vision.spatial_merge_size */
    const float *mean, *std;
    int norm_bias;         /* LayerNorm with biases (RMSNorm without: Qwen2.5-VL) */
    int gate;              /* SwiGLU MLP: ffn_gate beside ffn_up */
    int fused_qkv;         /* one attn_qkv projection instead of attn_q, attn_k, attn_v */
    int pos_table;         /* patch-embedding bias and a learned position table */
};

static const float CLIP_MEAN[3] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float CLIP_STD[3] = {0.26862954f, 0.26130258f, 0.27577711f};
static const float HALF[3] = {0.5f, 0.5f, 0.5f};

static struct tower_family family_of(const struct vis_synth *s)
{
    if (s->qwen3)
        return (struct tower_family){.projector = "qwen3vl_merger", .act_key = "clip.use_gelu",
                                     .image_size = s->pos_side * 16, .patch = 16, .merge_key = 1,
                                     .mean = HALF, .std = HALF, .norm_bias = 1, .fused_qkv = 1,
                                     .pos_table = 1};
    if (s->qwen25)
        return (struct tower_family){.projector = "qwen2.5vl_merger", .act_key = "clip.use_silu",
                                     .image_size = 560, .patch = 14, .mean = CLIP_MEAN,
                                     .std = CLIP_STD, .gate = 1};
    return (struct tower_family){.projector = "qwen2vl_merger", .image_size = 560, .patch = 14,
                                 .mean = CLIP_MEAN, .std = CLIP_STD, .norm_bias = 1};
}

/* Block i: norm, attention projections, norm, MLP. */
static int add_block(struct gguf_writer *w, struct folio_rng *r, const struct tower_family *f,
                     const struct vis_synth *s, int mt, uint32_t i, struct folio_err *err)
{
    static const char *const qkvo[4] = {"attn_q", "attn_k", "attn_v", "attn_out"};
    static const char *const fused[2] = {"attn_qkv", "attn_out"};
    uint64_t E = s->n_embd, F = s->n_ff, vE[1] = {E}, vF[1] = {F}, mEF[2] = {E, F}, mFE[2] = {F, E};
    int rc = add(w, r, QUANT_F32, F_ONE, 1, vE, err, "v.blk.%u.ln1.weight", i);
    if (!rc && f->norm_bias)
        rc = add(w, r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.ln1.bias", i);
    for (int k = 0; k < (f->fused_qkv ? 2 : 4) && !rc; k++) {
        const char *name = f->fused_qkv ? fused[k] : qkvo[k];
        uint64_t n = f->fused_qkv && k == 0 ? 3 * E : E, mw[2] = {E, n}, vb[1] = {n};
        rc = add(w, r, mt, F_MAT, 2, mw, err, "v.blk.%u.%s.weight", i, name);
        if (!rc)
            rc = add(w, r, QUANT_F32, F_BIAS, 1, vb, err, "v.blk.%u.%s.bias", i, name);
    }
    if (!rc)
        rc = add(w, r, QUANT_F32, F_ONE, 1, vE, err, "v.blk.%u.ln2.weight", i);
    if (!rc && f->norm_bias)
        rc = add(w, r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.ln2.bias", i);
    if (!rc && f->gate)
        rc = add(w, r, mt, F_MAT, 2, mEF, err, "v.blk.%u.ffn_gate.weight", i);
    if (!rc && f->gate)
        rc = add(w, r, QUANT_F32, F_BIAS, 1, vF, err, "v.blk.%u.ffn_gate.bias", i);
    if (!rc)
        rc = add(w, r, mt, F_MAT, 2, mEF, err, "v.blk.%u.ffn_up.weight", i);
    if (!rc)
        rc = add(w, r, QUANT_F32, F_BIAS, 1, vF, err, "v.blk.%u.ffn_up.bias", i);
    if (!rc)
        rc = add(w, r, mt, F_MAT, 2, mFE, err, "v.blk.%u.ffn_down.weight", i);
    if (!rc)
        rc = add(w, r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.ffn_down.bias", i);
    return rc;
}

/* A merger's MLP over 4 merged rows: fc1 (4E -> 4E), fc2 (4E -> proj_dim). */
static int add_merger_mlp(struct gguf_writer *w, struct folio_rng *r, const struct vis_synth *s,
                          int mt, const char *fc1, const char *fc2, struct folio_err *err)
{
    uint64_t M = 4 * (uint64_t)s->n_embd, O = s->proj_dim, vM[1] = {M}, vO[1] = {O};
    uint64_t mMM[2] = {M, M}, mMO[2] = {M, O};
    int rc = add(w, r, mt, F_MAT, 2, mMM, err, "%s.weight", fc1);
    if (!rc)
        rc = add(w, r, QUANT_F32, F_BIAS, 1, vM, err, "%s.bias", fc1);
    if (!rc)
        rc = add(w, r, mt, F_MAT, 2, mMO, err, "%s.weight", fc2);
    if (!rc)
        rc = add(w, r, QUANT_F32, F_BIAS, 1, vO, err, "%s.bias", fc2);
    return rc;
}

/* Every family's tower as llama.cpp's converter lays it out: Qwen2-VL,
 * Qwen2.5-VL (check_vision) and Qwen3-VL (check_vision_q3). */
static int write_tower(struct gguf_writer *w, const struct vis_synth *s, const uint8_t *deepstack,
                       struct folio_err *err)
{
    struct tower_family f = family_of(s);
    uint32_t E = s->n_embd;
    int mt = s->mat_type ? s->mat_type : QUANT_F16, rc = 0;
    gguf_w_str(w, "general.architecture", "clip");
    gguf_w_str(w, "general.type", "mmproj");
    gguf_w_bool(w, "clip.has_vision_encoder", 1);
    gguf_w_str(w, "clip.projector_type", f.projector);
    if (f.act_key)
        gguf_w_bool(w, f.act_key, 1);
    gguf_w_u32(w, "clip.vision.image_size", f.image_size);
    gguf_w_u32(w, "clip.vision.patch_size", f.patch);
    if (f.merge_key)
        gguf_w_u32(w, "clip.vision.spatial_merge_size", 2);
    gguf_w_u32(w, "clip.vision.embedding_length", E);
    gguf_w_u32(w, "clip.vision.feed_forward_length", s->n_ff);
    gguf_w_u32(w, "clip.vision.block_count", s->n_layer);
    gguf_w_u32(w, "clip.vision.attention.head_count", s->n_head);
    gguf_w_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    gguf_w_u32(w, "clip.vision.projection_dim", s->proj_dim);
    gguf_w_array(w, "clip.vision.image_mean", GGUF_F32, f.mean, 3);
    gguf_w_array(w, "clip.vision.image_std", GGUF_F32, f.std, 3);
    if (f.gate)
        gguf_w_u32(w, "clip.vision.n_wa_pattern", s->n_layer >= 8 ? 8 : 2);
    if (s->qwen3 && s->n_deepstack)
        gguf_w_array(w, "clip.vision.is_deepstack_layers", GGUF_BOOL, deepstack, s->n_layer);
    struct folio_rng r = {s->seed ? s->seed : 0x5eed};
    uint64_t pk[4] = {f.patch, f.patch, 3, E}, vE[1] = {E};
    uint64_t pt[2] = {E, (uint64_t)s->pos_side * s->pos_side};
    int kt = mt == QUANT_BF16 ? QUANT_F32 : mt; /* the converter's patch-kernel rule */
    rc = add(w, &r, kt, F_MAT, 4, pk, err, "v.patch_embd.weight");
    if (!rc)
        rc = add(w, &r, kt, F_MAT, 4, pk, err, "v.patch_embd.weight.1");
    if (!rc && f.pos_table)
        rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.patch_embd.bias");
    if (!rc && f.pos_table) /* the table's rows ~ U(-1,1) like an embedding, not a projection */
        rc = add(w, &r, mt, F_ONE, 2, pt, err, "v.position_embd.weight");
    for (uint32_t i = 0; i < s->n_layer && !rc; i++)
        rc = add_block(w, &r, &f, s, mt, i, err);
    if (!rc)
        rc = add(w, &r, QUANT_F32, F_ONE, 1, vE, err, "v.post_ln.weight");
    if (!rc && f.norm_bias)
        rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.post_ln.bias");
    if (!rc)
        rc = add_merger_mlp(w, &r, s, mt, "mm.0", "mm.2", err);
    /* Qwen3-VL's DeepStack mergers: LayerNorm over the 4 merged rows, then the MLP */
    uint64_t vM[1] = {4 * (uint64_t)E};
    for (uint32_t i = 0; s->qwen3 && i < s->n_layer && !rc; i++) {
        if (!deepstack[i])
            continue;
        char fc1[48], fc2[48];
        snprintf(fc1, sizeof fc1, "v.deepstack.%u.fc1", i);
        snprintf(fc2, sizeof fc2, "v.deepstack.%u.fc2", i);
        rc = add(w, &r, QUANT_F32, F_ONE, 1, vM, err, "v.deepstack.%u.norm.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vM, err, "v.deepstack.%u.norm.bias", i);
        if (!rc)
            rc = add_merger_mlp(w, &r, s, mt, fc1, fc2, err);
    }
    return rc;
}

int vis_synth_gguf(const struct vis_synth *s, uint8_t **out, size_t *len, struct folio_err *err)
{
    if (s->qwen3 && (!s->pos_side || s->n_deepstack > 8))
        return folio_err_set(err, FOLIO_EINVAL, "synthetic tower: Qwen3-VL shape");
    /* Qwen3-VL: which blocks feed a DeepStack merger */
    uint8_t *deepstack = calloc(s->n_layer ? s->n_layer : 1, 1);
    if (!deepstack)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t j = 0; s->qwen3 && j < s->n_deepstack; j++)
        if (s->deepstack[j] < s->n_layer)
            deepstack[s->deepstack[j]] = 1;
    struct gguf_writer *w = NULL;
    int rc = gguf_writer_new(3, 32, &w, err);
    if (!rc)
        rc = write_tower(w, s, deepstack, err);
    if (!rc)
        rc = gguf_w_finish(w, out, len, err);
    gguf_writer_free(w);
    free(deepstack);
    return rc;
}
