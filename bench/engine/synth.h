/*
 * Synthetic models: complete GGUF files made in memory with random weights
 * (no downloads), for the engine's tests and benchmarks. Not part of the
 * engine's production API: only bench/, tools and tests include this.
 *
 * The files are what llama.cpp's converter writes for each family, so the
 * production loaders (gguf_model_check) read them like real models.
 */
#ifndef FOLIO_BENCH_SYNTH_H
#define FOLIO_BENCH_SYNTH_H

#include "common/common.h"

#include <stddef.h>
#include <stdint.h>

/* ---- text decoders (bench/engine/lm_synth.c) ---- */
struct lm_synth {
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab;
    int mat_type;       /* type of the 2-D weights (QUANT_*) */
    int q4km;           /* Q4_K_M mix: Q6_K output and attn_v/ffn_down in llama.cpp's
                           use_more_bits layers, mat_type elsewhere */
    int tied;           /* no output.weight */
    uint64_t seed;
    /* 0: every row random. Else each tensor's rows repeat a pool of this
     * many random rows, so a 7B-shaped file is made in seconds. */
    uint32_t pool_rows;
    /* Qwen3-VL (architecture qwen3vl): q/k norms, no biases, head_dim of
     * its own (0 = n_embd / n_head), n_deepstack DeepStack layers */
    int qwen3;
    uint32_t head_dim, n_deepstack;
    /* A vocabulary the tokenizer can encode text with: the 256 byte-level
     * tokens, then Qwen's chat and vision specials (control), then fillers
     * (n_vocab >= 262). Tests that run whole pages through vlm use it. */
    int byte_vocab;
};
/* A complete qwen2vl / qwen3vl text GGUF (malloc'd) that gguf_model_check accepts. */
int lm_synth_gguf(const struct lm_synth *s, uint8_t **out, size_t *len, struct folio_err *err);

/* ---- vision towers (bench/engine/vision_synth.c) ---- */
struct vis_synth {
    int qwen25;            /* 1: Qwen2.5-VL (RMSNorm, SwiGLU, windows), 0: Qwen2-VL */
    uint32_t n_embd, n_layer, n_head, n_ff, proj_dim;
    int mat_type;          /* QUANT_F32 / F16 / BF16 for the 2-D weights */
    uint64_t seed;
    /* Qwen3-VL (qwen3vl_merger, patch 16): a pos_side^2 position table and
     * DeepStack mergers after blocks deepstack[0..n_deepstack-1] */
    int qwen3;
    uint32_t pos_side, n_deepstack, deepstack[8];
};
/* A complete mmproj GGUF (malloc'd) that gguf_model_check accepts. */
int vis_synth_gguf(const struct vis_synth *s, uint8_t **out, size_t *len, struct folio_err *err);

/* ---- Qwen3-VL shapes (bench/engine/qwen3vl_synth.c) ---- */
/* Random-weight Qwen3-VL-8B (text 4096 x 36 layers, 32 x 128 heads / 8 KV,
 * FFN 12288, vocab 151936, 3 DeepStack layers, untied; tower 1152 x 27,
 * 16 heads, FFN 4304, 48 x 48 position table, DeepStack after blocks 8,
 * 16, 24) or a small one (small != 0). Either pointer may be NULL; fields
 * other than the shape (types, seeds) are left for the caller. */
void q3_synth_shapes(int small, struct lm_synth *ls, struct vis_synth *vs);

#endif
