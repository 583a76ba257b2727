/*
 * Synthetic qwen2vl text models: a complete GGUF in memory, written with
 * folio's own GGUF writer and quantisers, so tests and benchmarks can run a
 * model of any shape (up to the real 7B) without downloading weights.
 *
 * Values are scaled so a forward pass behaves like a trained model's in the
 * ways that matter to the engine: matrix rows ~ U(-1,1)·sqrt(3/k) keep unit
 * variance through every projection, norm weights sit near 1, biases are
 * small, so logits spread over a few units and label scores differ.
 *
 * For the 7B shape, quantising 7.6 G random values would take minutes; with
 * pool_rows set each tensor repeats a small pool of quantised rows instead.
 * The bytes are still all read by every pass, which is what a benchmark
 * measures.
 */
#include "bench/engine/synth.h"
#include "common/rng.h"
#include "engine/gguf/gguf_write.h"
#include "engine/model/lm.h"
#include "engine/quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's use_more_bits(i, n): the layers Q4_K_M gives Q6_K attn_v and
 * ffn_down (docs/reference/qwen25vl.md §1.1). */
static int more_bits(uint32_t i, uint32_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

enum fill { F_MAT, F_EMB, F_NORM, F_BIAS };

static int add(struct gguf_writer *w, struct folio_rng *r, const struct lm_synth *s, const char *name,
               int type, uint64_t k, uint64_t rows, enum fill how, struct folio_err *err)
{
    uint64_t rb = quant_row_bytes(type, k);
    if (rb == 0)
        return folio_err_set(err, FOLIO_EINVAL, "synthetic model: %s: row of %llu is not a "
                             "multiple of the %s block", name, (unsigned long long)k,
                             quant_type_name(type));
    uint64_t pool = s->pool_rows && s->pool_rows < rows ? s->pool_rows : rows;
    uint8_t *data = malloc(rb * rows);
    float *row = malloc(k * sizeof *row);
    if (!data || !row) {
        free(data);
        free(row);
        return folio_err_set(err, FOLIO_ENOMEM, "synthetic model: out of host memory for %s "
                             "(%llu bytes)", name, (unsigned long long)(rb * rows));
    }
    float a = how == F_MAT ? sqrtf(3.0f / (float)k) : how == F_EMB ? 1.0f : 0.1f;
    int rc = 0;
    for (uint64_t i = 0; i < pool && !rc; i++) {
        for (uint64_t j = 0; j < k; j++)
            row[j] = (how == F_NORM ? 1.0f : 0.0f) + a * folio_rng_signed(r);
        rc = quant_quantize_row(type, row, data + i * rb, (int64_t)k);
    }
    for (uint64_t i = pool; i < rows && !rc; i++)
        memcpy(data + i * rb, data + (i % pool) * rb, rb);
    uint64_t ne[2] = {k, rows};
    if (!rc)
        rc = gguf_w_tensor(w, name, type, rows == 1 && how != F_MAT ? 1 : 2, ne, data);
    free(data);
    free(row);
    if (rc)
        return folio_err_set(err, rc < 0 ? rc : FOLIO_EINVAL, "synthetic model: cannot add %s",
                             name);
    return 0;
}

int lm_synth_gguf(const struct lm_synth *s, uint8_t **out, size_t *len, struct folio_err *err)
{
    *out = NULL;
    *len = 0;
    if (!s->n_head || !s->n_head_kv || (!s->head_dim && s->n_embd % s->n_head) ||
        s->n_head % s->n_head_kv || !s->n_layer || !s->n_vocab || !s->n_ff ||
        (s->qwen3 ? s->n_deepstack > s->n_layer : s->head_dim || s->n_deepstack))
        return folio_err_set(err, FOLIO_EINVAL, "synthetic model: inconsistent shape");
    uint32_t D = s->head_dim ? s->head_dim : s->n_embd / s->n_head, half = D / 2;
    const char *A = s->qwen3 ? "qwen3vl" : "qwen2vl";
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", A, suffix), key)
    struct gguf_writer *w;
    int rc = gguf_writer_new(3, 32, &w, err);
    if (rc)
        return rc;
    struct folio_rng r = {s->seed ? s->seed : 0x9E3779B97F4A7C15ull};
    gguf_w_str(w, "general.architecture", A);
    gguf_w_str(w, "general.type", "model");
    gguf_w_str(w, "general.name", s->qwen3 ? "folio synthetic qwen3vl" : "folio synthetic qwen2vl");
    gguf_w_u32(w, KEY("context_length"), 32768);
    gguf_w_u32(w, KEY("embedding_length"), s->n_embd);
    gguf_w_u32(w, KEY("block_count"), s->n_layer);
    gguf_w_u32(w, KEY("feed_forward_length"), s->n_ff);
    gguf_w_u32(w, KEY("attention.head_count"), s->n_head);
    gguf_w_u32(w, KEY("attention.head_count_kv"), s->n_head_kv);
    gguf_w_f32(w, KEY("rope.freq_base"), s->qwen3 ? 5000000.0f : 1000000.0f);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    /* Qwen2.5-VL's [16, 24, 24] (Qwen3-VL's [24, 20, 20]) of 64 pairs,
     * scaled to this head size. */
    int32_t sec[4] = {(int32_t)(half / 4), 0, 0, 0};
    sec[1] = (int32_t)(half - (uint32_t)sec[0]) / 2;
    sec[2] = (int32_t)half - sec[0] - sec[1];
    if (s->qwen3) {
        sec[1] = sec[2] = (int32_t)(half * 20 / 64);
        sec[0] = (int32_t)half - 2 * sec[1];
        gguf_w_u32(w, KEY("attention.key_length"), D);
        gguf_w_u32(w, KEY("attention.value_length"), D);
        gguf_w_u32(w, KEY("n_deepstack_layers"), s->n_deepstack);
    }
    gguf_w_array(w, KEY("rope.dimension_sections"), GGUF_I32, sec, 4);
#undef KEY
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
    char **toks = malloc((size_t)s->n_vocab * sizeof *toks);
    char *tb = malloc((size_t)s->n_vocab * 12);
    if (!toks || !tb) {
        free(toks);
        free(tb);
        gguf_writer_free(w);
        return folio_err_set(err, FOLIO_ENOMEM, "synthetic model: out of host memory");
    }
    static const char *const specials[6] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                            "<|vision_start|>", "<|vision_end|>",
                                            "<|image_pad|>"};
    int32_t *types = s->byte_vocab ? malloc((size_t)s->n_vocab * sizeof *types) : NULL;
    if (s->byte_vocab && (!types || s->n_vocab < 262)) {
        free(toks);
        free(tb);
        free(types);
        gguf_writer_free(w);
        return folio_err_set(err, FOLIO_EINVAL, "synthetic model: a byte vocabulary needs "
                             ">= 262 tokens");
    }
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        toks[i] = tb + (size_t)i * 12;
        snprintf(toks[i], 12, "t%u", i);
        if (!s->byte_vocab)
            continue;
        types[i] = 1;
        if (i < 256) { /* GPT-2's byte -> code point map, UTF-8 */
            uint32_t cp = i, n = 0;
            if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174))
                for (uint32_t b = 0; b < i; b++)
                    n += !((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174);
            if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174))
                cp = 256 + n;
            if (cp < 0x80) {
                toks[i][0] = (char)cp;
                toks[i][1] = 0;
            } else {
                toks[i][0] = (char)(0xC0 | (cp >> 6));
                toks[i][1] = (char)(0x80 | (cp & 0x3F));
                toks[i][2] = 0;
            }
        } else if (i < 262) {
            toks[i] = (char *)specials[i - 256];
            types[i] = 3;
        }
    }
    gguf_w_array_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, s->n_vocab);
    if (types)
        gguf_w_array(w, "tokenizer.ggml.token_type", GGUF_I32, types, s->n_vocab);
    free(toks);
    free(tb);
    free(types);
    const char *merges[1] = {s->byte_vocab ? "a b" : "t 0"};
    gguf_w_array_str(w, "tokenizer.ggml.merges", merges, 1);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", s->byte_vocab ? 258 : s->n_vocab > 1 ? 1 : 0);

    int mt = s->mat_type;
    uint64_t E = s->n_embd, Q = (uint64_t)s->n_head * D, KV = (uint64_t)s->n_head_kv * D,
             F = s->n_ff;
    char nm[96];
    rc = add(w, &r, s, "token_embd.weight", mt, E, s->n_vocab, F_EMB, err);
    for (uint32_t i = 0; i < s->n_layer && !rc; i++) {
        int vt = s->q4km && more_bits(i, s->n_layer) ? QUANT_Q6_K : mt;
        struct {
            const char *n;
            int type;
            uint64_t k, rows;
            enum fill how;
        } t[12] = {
            {"attn_norm.weight", QUANT_F32, E, 1, F_NORM}, {"attn_q.weight", mt, E, Q, F_MAT},
            {"attn_q.bias", QUANT_F32, Q, 1, F_BIAS},      {"attn_k.weight", mt, E, KV, F_MAT},
            {"attn_k.bias", QUANT_F32, KV, 1, F_BIAS},     {"attn_v.weight", vt, E, KV, F_MAT},
            {"attn_v.bias", QUANT_F32, KV, 1, F_BIAS},     {"attn_output.weight", mt, Q, E, F_MAT},
            {"ffn_norm.weight", QUANT_F32, E, 1, F_NORM},  {"ffn_gate.weight", mt, E, F, F_MAT},
            {"ffn_up.weight", mt, E, F, F_MAT},            {"ffn_down.weight", vt, F, E, F_MAT},
        };
        if (s->qwen3) { /* no biases; q/k norms over one head */
            t[2].n = "attn_q_norm.weight";
            t[4].n = "attn_k_norm.weight";
            t[2].k = t[4].k = D;
            t[2].how = t[4].how = F_NORM;
            t[6].n = NULL;
        }
        for (int j = 0; j < 12 && !rc; j++) {
            if (!t[j].n)
                continue;
            snprintf(nm, sizeof nm, "blk.%u.%s", i, t[j].n);
            rc = add(w, &r, s, nm, t[j].type, t[j].k, t[j].rows, t[j].how, err);
        }
    }
    if (!rc)
        rc = add(w, &r, s, "output_norm.weight", QUANT_F32, E, 1, F_NORM, err);
    if (!rc && !s->tied)
        rc = add(w, &r, s, "output.weight", s->q4km ? QUANT_Q6_K : mt, E, s->n_vocab, F_MAT, err);
    if (!rc)
        rc = gguf_w_finish(w, out, len, err);
    gguf_writer_free(w);
    return rc;
}
