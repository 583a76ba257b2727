/* Tiny Qwen2-VL / Qwen2.5-VL GGUF files built in memory for tests: every
 * tensor and key the real files have, with small dimensions. Header-only
 * (static functions) so each test that includes it stays one file. */
#ifndef FOLIO_TEST_TINYMODEL_H
#define FOLIO_TEST_TINYMODEL_H

#include "engine/gguf/gguf_write.h"
#include "engine/quant/quant.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tiny_opts {
    uint32_t version;   /* 2 or 3 */
    int mat_type;       /* type of the 2-D weights */
    int tied;           /* omit output.weight */
    const char *skip;   /* omit this tensor */
    const char *extra;  /* add this (unknown) tensor */
    const char *bad_shape; /* give this tensor a wrong shape */
    int vec_type;       /* type for 1-D tensors (F32 normally) */
    const char *arch;   /* general.architecture override */
    int qwen2vl_vision; /* mmproj: Qwen2-VL instead of Qwen2.5-VL */
    int swap_ffn;       /* mmproj (Qwen2-VL): legacy swapped ffn names */
};

enum { TINY_E = 32, TINY_HEADS = 2, TINY_KV = 1, TINY_FF = 64, TINY_LAYERS = 2, TINY_VOCAB = 272 };
/* tokenizer: 256 byte tokens, the merged tokens, Qwen's specials; the
 * embedding has TINY_VOCAB rows (padded past the tokens, as Qwen's is) */
enum { TINY_MERGES = 4, TINY_SPECIALS = 6, TINY_TOKENS = 256 + TINY_MERGES + TINY_SPECIALS,
       TINY_INVO = 258, TINY_IM_END = 256 + TINY_MERGES + 2 };
enum { TINY_VE = 32, TINY_VHEADS = 2, TINY_VFF = 64, TINY_VLAYERS = 2, TINY_PATCH = 4,
       TINY_PROJ = 32 };

static uint32_t tiny_rng = 12345;

static float tiny_rand(void)
{
    tiny_rng = tiny_rng * 1664525u + 1013904223u;
    return (float)((tiny_rng >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void tiny_tensor(struct gguf_writer *w, const struct tiny_opts *o, int type,
                        uint32_t nd, uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3,
                        const char *fmt, ...) __attribute__((format(printf, 9, 10)));

static void tiny_tensor(struct gguf_writer *w, const struct tiny_opts *o, int type,
                        uint32_t nd, uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3,
                        const char *fmt, ...)
{
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (o->skip && strcmp(o->skip, name) == 0)
        return;
    if (o->bad_shape && strcmp(o->bad_shape, name) == 0)
        ne0 = ne0 == 32 ? 64 : 32;
    uint64_t ne[4] = {ne0, ne1, ne2, ne3};
    uint64_t n = ne0 * ne1 * ne2 * ne3;
    float *x = malloc(n * sizeof *x);
    uint64_t bytes = quant_row_bytes(type, ne0) * (n / ne0);
    void *q = malloc(bytes ? bytes : 1);
    if (!x || !q) {
        free(x);
        free(q);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        x[i] = tiny_rand();
    for (uint64_t r = 0; r < n / ne0; r++)
        quant_quantize_row(type, x + r * ne0, (uint8_t *)q + r * quant_row_bytes(type, ne0),
                           (int64_t)ne0);
    gguf_w_tensor(w, name, type, nd, ne, q);
    free(x);
    free(q);
}

static int tiny_text(const struct tiny_opts *o, uint8_t **out, size_t *len)
{
    struct gguf_writer *w;
    if (gguf_writer_new(o->version ? o->version : 3, 32, &w, NULL))
        return -1;
    int mt = o->mat_type ? o->mat_type : QUANT_Q8_0, vt = o->vec_type ? o->vec_type : QUANT_F32;
    gguf_w_str(w, "general.architecture", o->arch ? o->arch : "qwen2vl");
    gguf_w_str(w, "general.type", "model");
    gguf_w_u32(w, "qwen2vl.context_length", 4096);
    gguf_w_u32(w, "qwen2vl.embedding_length", TINY_E);
    gguf_w_u32(w, "qwen2vl.block_count", TINY_LAYERS);
    gguf_w_u32(w, "qwen2vl.feed_forward_length", TINY_FF);
    gguf_w_u32(w, "qwen2vl.attention.head_count", TINY_HEADS);
    gguf_w_u32(w, "qwen2vl.attention.head_count_kv", TINY_KV);
    gguf_w_f32(w, "qwen2vl.rope.freq_base", 1000000.0f);
    gguf_w_f32(w, "qwen2vl.attention.layer_norm_rms_epsilon", 1e-6f);
    int32_t sec[4] = {2, 3, 3, 0}; /* head_dim 16 → 8 pairs */
    gguf_w_array(w, "qwen2vl.rope.dimension_sections", GGUF_I32, sec, 4);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
    /* GPT-2 byte-level spellings of the 256 bytes, then merges and specials */
    static char bytes[256][3];
    const char *toks[TINY_TOKENS];
    int32_t types[TINY_TOKENS];
    for (int b = 0; b < 256; b++) {
        int pr = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        unsigned cp = (unsigned)b, k = 0;
        if (!pr) {
            for (int x = 0; x < b; x++)
                k += !((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae);
            cp = 256 + k;
        }
        if (cp < 0x80) {
            bytes[b][0] = (char)cp;
            bytes[b][1] = 0;
        } else {
            bytes[b][0] = (char)(0xc0 | (cp >> 6));
            bytes[b][1] = (char)(0x80 | (cp & 0x3f));
            bytes[b][2] = 0;
        }
        toks[b] = bytes[b];
        types[b] = 1;
    }
    static const char *const merged[TINY_MERGES] = {"in", "vo", "invo", "\xc4\xa0in"};
    static const char *const merges[TINY_MERGES] = {"i n", "v o", "in vo", "\xc4\xa0 in"};
    static const char *const specials[TINY_SPECIALS] = {
        "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
        "<|image_pad|>"};
    for (int i = 0; i < TINY_MERGES; i++) {
        toks[256 + i] = merged[i];
        types[256 + i] = 1;
    }
    for (int i = 0; i < TINY_SPECIALS; i++) {
        toks[256 + TINY_MERGES + i] = specials[i];
        types[256 + TINY_MERGES + i] = 3;
    }
    gguf_w_array_str(w, "tokenizer.ggml.tokens", toks, TINY_TOKENS);
    gguf_w_array(w, "tokenizer.ggml.token_type", GGUF_I32, types, TINY_TOKENS);
    gguf_w_array_str(w, "tokenizer.ggml.merges", merges, TINY_MERGES);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", TINY_IM_END);

    tiny_tensor(w, o, mt, 2, TINY_E, TINY_VOCAB, 1, 1, "token_embd.weight");
    uint64_t E = TINY_E, Q = TINY_E, KV = TINY_E / TINY_HEADS * TINY_KV, F = TINY_FF;
    for (int i = 0; i < TINY_LAYERS; i++) {
        tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "blk.%d.attn_norm.weight", i);
        tiny_tensor(w, o, mt, 2, E, Q, 1, 1, "blk.%d.attn_q.weight", i);
        tiny_tensor(w, o, vt, 1, Q, 1, 1, 1, "blk.%d.attn_q.bias", i);
        tiny_tensor(w, o, mt, 2, E, KV, 1, 1, "blk.%d.attn_k.weight", i);
        tiny_tensor(w, o, vt, 1, KV, 1, 1, 1, "blk.%d.attn_k.bias", i);
        tiny_tensor(w, o, mt, 2, E, KV, 1, 1, "blk.%d.attn_v.weight", i);
        tiny_tensor(w, o, vt, 1, KV, 1, 1, 1, "blk.%d.attn_v.bias", i);
        tiny_tensor(w, o, mt, 2, Q, E, 1, 1, "blk.%d.attn_output.weight", i);
        tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "blk.%d.ffn_norm.weight", i);
        tiny_tensor(w, o, mt, 2, E, F, 1, 1, "blk.%d.ffn_gate.weight", i);
        tiny_tensor(w, o, mt, 2, E, F, 1, 1, "blk.%d.ffn_up.weight", i);
        tiny_tensor(w, o, mt, 2, F, E, 1, 1, "blk.%d.ffn_down.weight", i);
    }
    tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "output_norm.weight");
    if (!o->tied)
        tiny_tensor(w, o, mt, 2, E, TINY_VOCAB, 1, 1, "output.weight");
    if (o->extra)
        tiny_tensor(w, o, QUANT_F32, 1, E, 1, 1, 1, "%s", o->extra);
    int rc = gguf_w_finish(w, out, len, NULL);
    gguf_writer_free(w);
    return rc;
}

static int tiny_vision(const struct tiny_opts *o, uint8_t **out, size_t *len)
{
    struct gguf_writer *w;
    if (gguf_writer_new(o->version ? o->version : 3, 32, &w, NULL))
        return -1;
    int mt = o->mat_type ? o->mat_type : QUANT_Q8_0, vt = o->vec_type ? o->vec_type : QUANT_F32;
    int v2 = o->qwen2vl_vision;
    gguf_w_str(w, "general.architecture", o->arch ? o->arch : "clip");
    gguf_w_str(w, "general.type", "mmproj");
    gguf_w_bool(w, "clip.has_vision_encoder", 1);
    gguf_w_str(w, "clip.projector_type", v2 ? "qwen2vl_merger" : "qwen2.5vl_merger");
    if (!v2)
        gguf_w_bool(w, "clip.use_silu", 1);
    gguf_w_u32(w, "clip.vision.image_size", 560);
    gguf_w_u32(w, "clip.vision.patch_size", TINY_PATCH);
    gguf_w_u32(w, "clip.vision.embedding_length", TINY_VE);
    gguf_w_u32(w, "clip.vision.feed_forward_length", v2 ? TINY_PROJ : TINY_VFF);
    gguf_w_u32(w, "clip.vision.block_count", TINY_VLAYERS);
    gguf_w_u32(w, "clip.vision.attention.head_count", TINY_VHEADS);
    gguf_w_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    gguf_w_u32(w, "clip.vision.projection_dim", TINY_PROJ);
    float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    float stdv[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    gguf_w_array(w, "clip.vision.image_mean", GGUF_F32, mean, 3);
    gguf_w_array(w, "clip.vision.image_std", GGUF_F32, stdv, 3);
    if (!v2)
        gguf_w_u32(w, "clip.vision.n_wa_pattern", 2);
    uint64_t E = TINY_VE, F = TINY_VFF, P = TINY_PATCH, M = 4 * TINY_VE;
    tiny_tensor(w, o, QUANT_F16, 4, P, P, 3, E, "v.patch_embd.weight");
    tiny_tensor(w, o, QUANT_F16, 4, P, P, 3, E, "v.patch_embd.weight.1");
    for (int i = 0; i < TINY_VLAYERS; i++) {
        tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "v.blk.%d.ln1.weight", i);
        if (v2)
            tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "v.blk.%d.ln1.bias", i);
        static const char *const qkvo[4] = {"attn_q", "attn_k", "attn_v", "attn_out"};
        for (int k = 0; k < 4; k++) {
            tiny_tensor(w, o, mt, 2, E, E, 1, 1, "v.blk.%d.%s.weight", i, qkvo[k]);
            tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "v.blk.%d.%s.bias", i, qkvo[k]);
        }
        tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "v.blk.%d.ln2.weight", i);
        if (v2)
            tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "v.blk.%d.ln2.bias", i);
        if (!v2) {
            tiny_tensor(w, o, mt, 2, E, F, 1, 1, "v.blk.%d.ffn_gate.weight", i);
            tiny_tensor(w, o, vt, 1, F, 1, 1, 1, "v.blk.%d.ffn_gate.bias", i);
        }
        const char *up = o->swap_ffn ? "ffn_down" : "ffn_up";
        const char *down = o->swap_ffn ? "ffn_up" : "ffn_down";
        tiny_tensor(w, o, mt, 2, E, F, 1, 1, "v.blk.%d.%s.weight", i, up);
        tiny_tensor(w, o, vt, 1, F, 1, 1, 1, "v.blk.%d.%s.bias", i, up);
        tiny_tensor(w, o, mt, 2, F, E, 1, 1, "v.blk.%d.%s.weight", i, down);
        tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "v.blk.%d.%s.bias", i, down);
    }
    tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "v.post_ln.weight");
    if (v2)
        tiny_tensor(w, o, vt, 1, E, 1, 1, 1, "v.post_ln.bias");
    tiny_tensor(w, o, mt, 2, M, M, 1, 1, "mm.0.weight");
    tiny_tensor(w, o, vt, 1, M, 1, 1, 1, "mm.0.bias");
    tiny_tensor(w, o, mt, 2, M, TINY_PROJ, 1, 1, "mm.2.weight");
    tiny_tensor(w, o, vt, 1, TINY_PROJ, 1, 1, 1, "mm.2.bias");
    if (o->extra)
        tiny_tensor(w, o, QUANT_F32, 1, E, 1, 1, 1, "%s", o->extra);
    int rc = gguf_w_finish(w, out, len, NULL);
    gguf_writer_free(w);
    return rc;
}

#endif
