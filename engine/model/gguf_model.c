/*
 * gguf model checks — from a parsed container to "this is a Qwen2-VL text
 * model / vision projector folio can run", or the first reason it is not.
 *
 * The expected tensor set is spelled out per layer from the hyper-parameters
 * (docs/reference/qwen25vl.md §1): each tensor's presence, dtype class and shape
 * is checked in a fixed order, so the error names the first mismatch the
 * way a reader walks the model (token_embd, then blk.0.*, ...). Every tensor
 * the file holds must be claimed by an expectation: an unknown extra tensor
 * means a model variant folio's graphs do not implement (fused QKV, extra
 * norms), and running it anyway would compute something else silently.
 *
 * The result carries the load list (name, type, shape, file offset, bytes)
 * in that same order — what the engine's weight upload walks — and the
 * device memory it needs. token_embd stays on the host (rows are gathered
 * per request) unless the output head is tied to it.
 */
#include "engine/model/gguf_model.h"
#include "engine/quant/quant.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum dclass {
    D_VEC,   /* norms and biases: always F32 in converted files */
    D_MAT,   /* weight matrices: any supported type */
    D_FLOAT, /* patch embedding: F32/F16/BF16 (ne0 = 14 cannot be block-quantised) */
};

struct ctx {
    struct gguf_file *f;
    struct gguf_model *m;
    uint8_t *claimed; /* per tensor index */
    struct folio_err *err;
};

static const char *dclass_desc(enum dclass c)
{
    return c == D_VEC ? "f32" : c == D_FLOAT ? "f32, f16 or bf16" : "a supported type";
}

static int dclass_ok(enum dclass c, int type)
{
    if (c == D_VEC)
        return type == QUANT_F32;
    if (c == D_FLOAT)
        return type == QUANT_F32 || type == QUANT_F16 || type == QUANT_BF16;
    return quant_supported(type);
}

static void shape_str(char *b, size_t n, uint32_t nd, const uint64_t *ne)
{
    size_t k = (size_t)snprintf(b, n, "[");
    for (uint32_t d = 0; d < nd && k < n; d++)
        k += (size_t)snprintf(b + k, n - k, d ? ", %" PRIu64 : "%" PRIu64, ne[d]);
    if (k < n)
        snprintf(b + k, n - k, "]");
}

/* Checks one tensor against the expected shape (nd dims of ne0..ne3) and
 * dtype class, and appends it to the load list. Optional tensors may be
 * absent (*found = 0). */
static int expect(struct ctx *c, const char *name, enum dclass cls, int on_host, uint32_t nd,
                  uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3, int optional,
                  int *found)
{
    const struct gguf_tensor_info *t = gguf_find_tensor(c->f, name);
    if (found)
        *found = t != NULL;
    if (!t) {
        if (optional)
            return 0;
        folio_err_set(c->err, FOLIO_EMODEL, "model file '%s' lacks tensor '%s'",
                      gguf_path(c->f), name);
        folio_err_hint(c->err, "the file is not a complete llama.cpp conversion of this model");
        return FOLIO_EMODEL;
    }
    uint64_t want[GGUF_MAX_DIMS] = {ne0, ne1, ne2, ne3};
    int shape_ok = t->n_dims == nd;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS && shape_ok; d++)
        shape_ok = t->ne[d] == (d < nd ? want[d] : 1);
    if (!shape_ok) {
        char a[96], b[96];
        shape_str(a, sizeof a, t->n_dims, t->ne);
        shape_str(b, sizeof b, nd, want);
        folio_err_set(c->err, FOLIO_EMODEL, "tensor '%s' in '%s' has shape %s, expected %s", name,
                      gguf_path(c->f), a, b);
        folio_err_detail(c->err, "shapes are in ggml order (ne0 first); the expectation comes "
                                 "from the file's own hyper-parameters");
        return FOLIO_EMODEL;
    }
    if (!dclass_ok(cls, t->type)) {
        folio_err_set(c->err, FOLIO_EMODEL, "tensor '%s' in '%s' is %s, expected %s", name,
                      gguf_path(c->f), quant_type_name(t->type), dclass_desc(cls));
        return FOLIO_EMODEL;
    }
    uint64_t idx = (uint64_t)(t - gguf_tensor(c->f, 0));
    if (c->claimed[idx]) {
        folio_err_set(c->err, FOLIO_EMODEL, "tensor '%s' in '%s' would be used twice", name,
                      gguf_path(c->f));
        return FOLIO_EMODEL;
    }
    c->claimed[idx] = 1;
    struct gguf_model *m = c->m;
    m->items[m->n_items++] = (struct gguf_load_item){t, on_host};
    if (on_host)
        m->host_bytes += t->n_bytes;
    else
        m->device_bytes += (t->n_bytes + 255) & ~(uint64_t)255;
    return 0;
}

static int expectf(struct ctx *c, enum dclass cls, uint32_t nd, uint64_t ne0, uint64_t ne1,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int expectf(struct ctx *c, enum dclass cls, uint32_t nd, uint64_t ne0, uint64_t ne1,
                   const char *fmt, ...)
{
    char name[GGUF_MAX_NAME + 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return expect(c, name, cls, 0, nd, ne0, ne1, 1, 1, 0, NULL);
}

static int bad_hparam(struct ctx *c, const char *what)
{
    folio_err_set(c->err, FOLIO_EMODEL, "model file '%s' has inconsistent hyper-parameters: %s",
                  gguf_path(c->f), what);
    return FOLIO_EMODEL;
}

/* Optional keys: the file's value, or dflt recorded as an assumption (the
 * doctor prints it; the engine logs it at open). */
static void assume(struct ctx *c, const char *key, const char *why, const char *fmt, double v)
{
    struct gguf_model *m = c->m;
    if (m->n_assumed >= GGUF_MAX_ASSUMED)
        return;
    struct gguf_assumed *a = &m->assumed[m->n_assumed++];
    a->key = key;
    a->why = why;
    snprintf(a->value, sizeof a->value, fmt, v);
}

static int opt_u32(struct ctx *c, const char *key, uint32_t dflt, const char *why, uint32_t *out)
{
    if (!gguf_find(c->f, key))
        assume(c, key, why, "%.0f", (double)dflt);
    return gguf_get_u32_or(c->f, key, dflt, out, c->err);
}

static int opt_f32(struct ctx *c, const char *key, float dflt, const char *why, float *out)
{
    if (!gguf_find(c->f, key))
        assume(c, key, why, "%g", (double)dflt);
    return gguf_get_f32_or(c->f, key, dflt, out, c->err);
}

static int no_extras(struct ctx *c)
{
    for (uint64_t i = 0; i < gguf_tensor_count(c->f); i++) {
        if (!c->claimed[i]) {
            folio_err_set(c->err, FOLIO_EMODEL,
                          "model file '%s' has an unexpected tensor '%s'", gguf_path(c->f),
                          gguf_tensor(c->f, i)->name);
            folio_err_detail(c->err, "%" PRIu64 " tensors in the file, %" PRIu64
                             " expected for this architecture", gguf_tensor_count(c->f),
                             c->m->n_items);
            folio_err_hint(c->err, "this is a variant of the model folio does not implement "
                                   "(e.g. fused QKV); use a llama.cpp conversion of "
                                   "Qwen2-VL, Qwen2.5-VL or Qwen3-VL");
            return FOLIO_EMODEL;
        }
    }
    return 0;
}

static int arch_is(struct ctx *c, const char *want, const char *what_hint)
{
    struct gguf_str a;
    int rc = gguf_get_str(c->f, "general.architecture", &a, c->err);
    if (rc)
        return rc;
    if (gguf_str_eq(a, want))
        return 0;
    char q[160];
    folio_err_set(c->err, FOLIO_EMODEL, "model file '%s' has architecture %s; expected '%s'",
                  gguf_path(c->f), folio_lq_bytes(q, sizeof q, a.p, a.n > 64 ? 64 : a.n), want);
    folio_err_hint(c->err, "%s", what_hint);
    return FOLIO_EMODEL;
}

/* ---------------------------------------------------------------- text */

/* The text keys per architecture (static strings: the assumption list
 * keeps the pointers). */
struct text_keys {
    const char *embd, *blocks, *ff, *heads, *heads_kv, *ctx, *theta, *eps, *key_len, *val_len,
        *rot, *sections, *deepstack;
};
static const struct text_keys KEYS_QWEN2VL = {
    "qwen2vl.embedding_length", "qwen2vl.block_count", "qwen2vl.feed_forward_length",
    "qwen2vl.attention.head_count", "qwen2vl.attention.head_count_kv", "qwen2vl.context_length",
    "qwen2vl.rope.freq_base", "qwen2vl.attention.layer_norm_rms_epsilon",
    "qwen2vl.attention.key_length", NULL, "qwen2vl.rope.dimension_count",
    "qwen2vl.rope.dimension_sections", NULL};
/* Qwen3-VL (llama.cpp's conversion/qwen3vl.py, Qwen3VLTextModel). */
static const struct text_keys KEYS_QWEN3VL = {
    "qwen3vl.embedding_length", "qwen3vl.block_count", "qwen3vl.feed_forward_length",
    "qwen3vl.attention.head_count", "qwen3vl.attention.head_count_kv", "qwen3vl.context_length",
    "qwen3vl.rope.freq_base", "qwen3vl.attention.layer_norm_rms_epsilon",
    "qwen3vl.attention.key_length", "qwen3vl.attention.value_length",
    "qwen3vl.rope.dimension_count", "qwen3vl.rope.dimension_sections",
    "qwen3vl.n_deepstack_layers"};

static int text_hparams(struct ctx *c, const struct text_keys *K)
{
    struct gguf_text_hparams *h = &c->m->text;
    struct gguf_file *f = c->f;
    int q3 = h->family == GGUF_TEXT_QWEN3VL;
    int rc;
    if ((rc = gguf_get_u32(f, K->embd, &h->n_embd, c->err)) ||
        (rc = gguf_get_u32(f, K->blocks, &h->n_layer, c->err)) ||
        (rc = gguf_get_u32(f, K->ff, &h->n_ff, c->err)) ||
        (rc = gguf_get_u32(f, K->heads, &h->n_head, c->err)) ||
        (rc = opt_u32(c, K->heads_kv, h->n_head, "head_count: no grouped-query attention",
                      &h->n_head_kv)) ||
        (rc = opt_u32(c, K->ctx, 0, "unknown; not used by folio", &h->n_ctx_train)) ||
        (rc = opt_f32(c, K->theta, 10000.0f, "llama.cpp's default", &h->rope_theta)) ||
        (rc = gguf_get_f32(f, K->eps, &h->rms_eps, c->err)))
        return rc;
    if (h->n_embd == 0 || h->n_embd > 65536 || h->n_layer == 0 || h->n_layer > 1024 ||
        h->n_ff == 0 || h->n_ff > (1u << 20) || h->n_head == 0 || h->n_head_kv == 0 ||
        h->n_head > 1024)
        return bad_hparam(c, "a size is 0 or implausibly large");
    /* Qwen3's head size is its own (key_length): 4B has 32 x 128 heads on a
     * 2560-wide stream. Qwen2's is embedding_length / head_count. */
    if ((!q3 && h->n_embd % h->n_head) || h->n_head % h->n_head_kv)
        return bad_hparam(c, "head_count must divide embedding_length and head_count_kv must "
                             "divide head_count");
    h->head_dim = h->n_embd / h->n_head;
    uint32_t kl, vl, rot;
    if ((rc = opt_u32(c, K->key_len, h->head_dim, "embedding_length / head_count", &kl)))
        return rc;
    if (q3 && kl)
        h->head_dim = kl;
    vl = h->head_dim;
    if ((K->val_len && (rc = opt_u32(c, K->val_len, h->head_dim, "attention.key_length", &vl))) ||
        (rc = opt_u32(c, K->rot, h->head_dim, "the head size: rotary over whole heads", &rot)))
        return rc;
    if (kl != h->head_dim || vl != h->head_dim || rot != h->head_dim || h->head_dim % 2 ||
        h->head_dim == 0 || h->head_dim > 1024)
        return bad_hparam(c, "attention.key_length / value_length / rope.dimension_count differ "
                             "from the head size (or it is odd)");
    if (K->deepstack) {
        if ((rc = gguf_get_u32_or(f, K->deepstack, 0, &h->n_deepstack, c->err)))
            return rc;
        if (h->n_deepstack > h->n_layer || h->n_deepstack > GGUF_MAX_DEEPSTACK)
            return bad_hparam(c, "n_deepstack_layers exceeds the block count (or 8)");
    }
    if (!(h->rms_eps > 0 && h->rms_eps < 1) || !(h->rope_theta > 0) || isinf(h->rope_theta))
        return bad_hparam(c, "rms epsilon or rope base out of range");
    const struct gguf_value *sec;
    if ((rc = gguf_get_array(f, K->sections, GGUF_I64, &sec, c->err)))
        return rc;
    if (gguf_array_len(sec) != 4)
        return bad_hparam(c, "rope.dimension_sections must have 4 entries");
    int64_t sum = 0;
    for (int i = 0; i < 4; i++) {
        int64_t v;
        if (gguf_array_i64(sec, (uint64_t)i, &v) || v < 0 || v > 4096)
            return bad_hparam(c, "rope.dimension_sections entry out of range");
        h->mrope_sections[i] = (int32_t)v;
        sum += v;
    }
    /* The sections count frequency pairs: together they cover head_dim/2. */
    if (sum != h->head_dim / 2) {
        folio_err_set(c->err, FOLIO_EMODEL, "model file '%s': rope.dimension_sections "
                      "[%d, %d, %d, %d] sum to %lld, expected head_dim/2 = %u", gguf_path(f),
                      h->mrope_sections[0], h->mrope_sections[1], h->mrope_sections[2],
                      h->mrope_sections[3], (long long)sum, h->head_dim / 2);
        return FOLIO_EMODEL;
    }
    return 0;
}

static int text_tokenizer(struct ctx *c)
{
    struct gguf_text_hparams *h = &c->m->text;
    struct gguf_file *f = c->f;
    struct gguf_str s;
    int rc;
    /* folio implements byte-level BPE with the qwen2 pre-tokenizer only. */
    if ((rc = gguf_get_str(f, "tokenizer.ggml.model", &s, c->err)))
        return rc;
    if (!gguf_str_eq(s, "gpt2"))
        return bad_hparam(c, "tokenizer.ggml.model is not 'gpt2' (byte-level BPE)");
    if ((rc = gguf_get_str(f, "tokenizer.ggml.pre", &s, c->err)))
        return rc;
    if (!gguf_str_eq(s, "qwen2"))
        return bad_hparam(c, "tokenizer.ggml.pre is not 'qwen2'");
    const struct gguf_value *toks, *merges;
    if ((rc = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, c->err)) ||
        (rc = gguf_get_array(f, "tokenizer.ggml.merges", GGUF_STRING, &merges, c->err)))
        return rc;
    if (gguf_array_len(toks) == 0 || gguf_array_len(toks) > (1u << 24))
        return bad_hparam(c, "tokenizer.ggml.tokens is empty or too long");
    h->n_tokens = (uint32_t)gguf_array_len(toks);
    static const char *const idkeys[3] = {"tokenizer.ggml.bos_token_id",
                                          "tokenizer.ggml.eos_token_id",
                                          "tokenizer.ggml.padding_token_id"};
    int32_t *ids[3] = {&h->bos_id, &h->eos_id, &h->pad_id};
    for (int i = 0; i < 3; i++) {
        uint32_t v;
        if ((rc = gguf_get_u32_or(f, idkeys[i], UINT32_MAX, &v, c->err)))
            return rc;
        if (v != UINT32_MAX && v >= h->n_tokens)
            return bad_hparam(c, "a special token id is beyond the vocabulary");
        *ids[i] = v == UINT32_MAX ? -1 : (int32_t)v;
    }
    return 0;
}

/* general.architecture -> family; Qwen3-VL's mixture-of-experts text model
 * (qwen3vlmoe) is refused by name: its expert layers are not implemented. */
static int text_family(struct ctx *c)
{
    struct gguf_str a;
    if (gguf_get_str(c->f, "general.architecture", &a, c->err) == 0) {
        if (gguf_str_eq(a, "qwen3vl")) {
            c->m->text.family = GGUF_TEXT_QWEN3VL;
            return 0;
        }
        if (gguf_str_eq(a, "qwen3vlmoe")) {
            folio_err_set(c->err, FOLIO_EUNSUPPORTED, "model file '%s' is a Qwen3-VL "
                          "mixture-of-experts model (architecture qwen3vlmoe); folio runs the "
                          "dense Qwen3-VL models only", gguf_path(c->f));
            folio_err_hint(c->err, "use a dense Qwen3-VL GGUF (2B, 4B, 8B or 32B), or Qwen2.5-VL");
            return FOLIO_EUNSUPPORTED;
        }
    }
    c->m->text.family = GGUF_TEXT_QWEN2VL;
    return arch_is(c, "qwen2vl",
                   gguf_find(c->f, "clip.projector_type")
                       ? "this is a vision projector (mmproj) file: pass it with --mmproj"
                       : "folio runs Qwen2-VL / Qwen2.5-VL (architecture qwen2vl) and dense "
                         "Qwen3-VL (qwen3vl) text GGUFs");
}

/* One decoder layer, in file order. Qwen2-VL: q/k/v biases. Qwen3-VL
 * (llama.cpp's qwen3vl graph): q/k RMSNorm weights over one head instead,
 * and no q/k/v biases (HF attention_bias false; a file that has them is
 * still run with them). */
static int check_text_layer(struct ctx *c, uint32_t i, int q3, uint64_t E, uint64_t Q,
                            uint64_t KV, uint64_t F)
{
    uint64_t D = c->m->text.head_dim;
    int rc;
    if ((rc = expectf(c, D_VEC, 1, E, 1, "blk.%u.attn_norm.weight", i)) ||
        (rc = expectf(c, D_MAT, 2, E, Q, "blk.%u.attn_q.weight", i)) ||
        (rc = q3 ? expectf(c, D_VEC, 1, D, 1, "blk.%u.attn_q_norm.weight", i)
                 : expectf(c, D_VEC, 1, Q, 1, "blk.%u.attn_q.bias", i)) ||
        (rc = expectf(c, D_MAT, 2, E, KV, "blk.%u.attn_k.weight", i)) ||
        (rc = q3 ? expectf(c, D_VEC, 1, D, 1, "blk.%u.attn_k_norm.weight", i)
                 : expectf(c, D_VEC, 1, KV, 1, "blk.%u.attn_k.bias", i)) ||
        (rc = expectf(c, D_MAT, 2, E, KV, "blk.%u.attn_v.weight", i)) ||
        (!q3 && (rc = expectf(c, D_VEC, 1, KV, 1, "blk.%u.attn_v.bias", i))) ||
        (rc = expectf(c, D_MAT, 2, Q, E, "blk.%u.attn_output.weight", i)) ||
        (rc = expectf(c, D_VEC, 1, E, 1, "blk.%u.ffn_norm.weight", i)) ||
        (rc = expectf(c, D_MAT, 2, E, F, "blk.%u.ffn_gate.weight", i)) ||
        (rc = expectf(c, D_MAT, 2, E, F, "blk.%u.ffn_up.weight", i)) ||
        (rc = expectf(c, D_MAT, 2, F, E, "blk.%u.ffn_down.weight", i)))
        return rc;
    static const char *const bias[3] = {"attn_q", "attn_k", "attn_v"};
    const uint64_t bw[3] = {Q, KV, KV};
    for (int k = 0; q3 && k < 3; k++) {
        char nm[GGUF_MAX_NAME + 32];
        snprintf(nm, sizeof nm, "blk.%u.%s.bias", i, bias[k]);
        if ((rc = expect(c, nm, D_VEC, 0, 1, bw[k], 1, 1, 1, 1, NULL)))
            return rc;
    }
    return 0;
}

static int check_text(struct ctx *c)
{
    struct gguf_text_hparams *h = &c->m->text;
    struct gguf_file *f = c->f;
    int rc = text_family(c);
    int q3 = h->family == GGUF_TEXT_QWEN3VL;
    if (rc || (rc = text_hparams(c, q3 ? &KEYS_QWEN3VL : &KEYS_QWEN2VL)) ||
        (rc = text_tokenizer(c)))
        return rc;

    const struct gguf_tensor_info *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb || emb->n_dims != 2)
        return expect(c, "token_embd.weight", D_MAT, 1, 2, h->n_embd, h->n_tokens, 1, 1, 0, NULL);
    if (emb->ne[1] < h->n_tokens || emb->ne[1] > UINT32_MAX)
        return bad_hparam(c, "token_embd.weight has fewer rows than the tokenizer has tokens");
    h->n_vocab = (uint32_t)emb->ne[1];
    h->tied_output = gguf_find_tensor(f, "output.weight") == NULL;

    uint64_t E = h->n_embd, Q = (uint64_t)h->n_head * h->head_dim,
             KV = (uint64_t)h->n_head_kv * h->head_dim, F = h->n_ff;
    if ((rc = expect(c, "token_embd.weight", D_MAT, !h->tied_output, 2, E, h->n_vocab, 1, 1, 0,
                     NULL)))
        return rc;
    for (uint32_t i = 0; i < h->n_layer; i++)
        if ((rc = check_text_layer(c, i, q3, E, Q, KV, F)))
            return rc;
    if ((rc = expect(c, "output_norm.weight", D_VEC, 0, 1, E, 1, 1, 1, 0, NULL)) ||
        (rc = expect(c, "output.weight", D_MAT, 0, 2, E, h->n_vocab, 1, 1, 1, NULL)))
        return rc;
    return no_extras(c);
}

/* --------------------------------------------------------------- vision */

static int f32_triplet(struct ctx *c, const char *key, float out[3])
{
    const struct gguf_value *v;
    int rc = gguf_get_array(c->f, key, GGUF_F64, &v, c->err);
    if (rc)
        return rc;
    if (gguf_array_len(v) != 3)
        return bad_hparam(c, "image mean/std must have 3 entries");
    for (int i = 0; i < 3; i++) {
        double d;
        if (gguf_array_f64(v, (uint64_t)i, &d) || !isfinite(d))
            return bad_hparam(c, "image mean/std entry is not a finite number");
        out[i] = (float)d;
    }
    return 0;
}

/* Qwen3-VL: clip.vision.is_deepstack_layers, one bool per block (the
 * converter's flags for deepstack_visual_indexes); absent = none. */
static int deepstack_layers(struct ctx *c)
{
    struct gguf_vision_hparams *h = &c->m->vision;
    h->n_deepstack = 0;
    if (!gguf_find(c->f, "clip.vision.is_deepstack_layers"))
        return 0;
    const struct gguf_value *v;
    int rc = gguf_get_array(c->f, "clip.vision.is_deepstack_layers", -1, &v, c->err);
    if (rc)
        return rc;
    if (gguf_array_len(v) != h->n_layer)
        return bad_hparam(c, "clip.vision.is_deepstack_layers must have one entry per block");
    for (uint32_t i = 0; i < h->n_layer; i++) {
        int64_t b;
        if (gguf_array_i64(v, i, &b))
            return bad_hparam(c, "clip.vision.is_deepstack_layers entries must be booleans");
        if (!b)
            continue;
        if (h->n_deepstack >= GGUF_MAX_DEEPSTACK)
            return bad_hparam(c, "more than 8 DeepStack layers");
        h->deepstack_layers[h->n_deepstack++] = i;
    }
    return 0;
}

static int vision_hparams(struct ctx *c)
{
    struct gguf_vision_hparams *h = &c->m->vision;
    struct gguf_file *f = c->f;
    int has_vision, rc;
    if ((rc = gguf_get_bool_or(f, "clip.has_vision_encoder", 0, &has_vision, c->err)))
        return rc;
    if (!has_vision)
        return bad_hparam(c, "clip.has_vision_encoder is not true");
    struct gguf_str pt;
    const char *ptkey = gguf_find(f, "clip.vision.projector_type") ? "clip.vision.projector_type"
                                                                   : "clip.projector_type";
    if ((rc = gguf_get_str(f, ptkey, &pt, c->err)))
        return rc;
    if (gguf_str_eq(pt, "qwen2vl_merger")) {
        h->kind = GGUF_VISION_QWEN2VL;
    } else if (gguf_str_eq(pt, "qwen2.5vl_merger") || gguf_str_eq(pt, "qwen2.5o")) {
        h->kind = GGUF_VISION_QWEN25VL;
    } else if (gguf_str_eq(pt, "qwen3vl_merger")) {
        h->kind = GGUF_VISION_QWEN3VL;
    } else {
        char q[160];
        folio_err_set(c->err, FOLIO_EMODEL, "mmproj '%s' has projector type %s; folio runs "
                      "qwen2vl_merger (Qwen2-VL), qwen2.5vl_merger (Qwen2.5-VL) and "
                      "qwen3vl_merger (Qwen3-VL)",
                      gguf_path(f), folio_lq_bytes(q, sizeof q, pt.p, pt.n > 64 ? 64 : pt.n));
        return FOLIO_EMODEL;
    }
    if ((rc = gguf_get_u32(f, "clip.vision.embedding_length", &h->n_embd, c->err)) ||
        (rc = gguf_get_u32(f, "clip.vision.block_count", &h->n_layer, c->err)) ||
        (rc = gguf_get_u32(f, "clip.vision.attention.head_count", &h->n_head, c->err)) ||
        (rc = gguf_get_u32(f, "clip.vision.patch_size", &h->patch_size, c->err)) ||
        (rc = gguf_get_u32(f, "clip.vision.projection_dim", &h->proj_dim, c->err)) ||
        (rc = opt_u32(c, "clip.vision.spatial_merge_size", 2,
                      "every released Qwen2-VL / Qwen2.5-VL merges 2x2", &h->spatial_merge)) ||
        (rc = opt_f32(c, "clip.vision.attention.layer_norm_epsilon", 1e-6f,
                      "every released Qwen2-VL / Qwen2.5-VL", &h->eps)) ||
        (rc = gguf_get_bool_or(f, "clip.use_silu", 0, &h->use_silu, c->err)) ||
        (rc = f32_triplet(c, "clip.vision.image_mean", h->image_mean)) ||
        (rc = f32_triplet(c, "clip.vision.image_std", h->image_std)))
        return rc;
    if (h->n_embd == 0 || h->n_embd > 65536 || h->n_layer == 0 || h->n_layer > 1024 ||
        h->n_head == 0 || h->n_embd % h->n_head || (h->n_embd / h->n_head) % 2 ||
        h->patch_size == 0 || h->patch_size > 1024 || h->spatial_merge == 0 ||
        h->spatial_merge > 8 || h->proj_dim == 0 || h->proj_dim > 65536 || !(h->eps > 0))
        return bad_hparam(c, "a vision size is 0, inconsistent or implausibly large");
    for (int i = 0; i < 3; i++)
        if (!(h->image_std[i] > 0))
            return bad_hparam(c, "image std must be positive");
    if (h->kind == GGUF_VISION_QWEN25VL) {
        if ((rc = gguf_get_u32(f, "clip.vision.n_wa_pattern", &h->n_wa_pattern, c->err)) ||
            (rc = opt_u32(c, "clip.vision.window_size", 112,
                          "every released Qwen2.5-VL; llama.cpp's converter does not write it",
                          &h->window_size)))
            return rc;
        if (h->n_wa_pattern == 0 || h->window_size == 0 ||
            h->window_size % (h->patch_size * h->spatial_merge) != 0)
            return bad_hparam(c, "n_wa_pattern / window_size invalid (the window must be a "
                                 "multiple of patch_size * spatial_merge_size)");
        h->use_silu = 1; /* Qwen2.5-VL's MLP is SwiGLU whatever the flag says */
    } else if (h->kind == GGUF_VISION_QWEN3VL) {
        h->use_silu = 0; /* GELU (tanh) MLP: the converter writes clip.use_gelu */
        if ((rc = deepstack_layers(c)))
            return rc;
    } else {
        h->use_silu = 0;
    }
    h->head_dim = h->n_embd / h->n_head;
    h->merger_dim = h->n_embd * h->spatial_merge * h->spatial_merge;
    return 0;
}

/* The Qwen3-VL tower as llama.cpp's converter writes it (conversion/qwen3vl.py):
 * Conv3D split into two kernels plus its bias, a learned position table
 * (kept on the host: it is interpolated to each image's grid there), fused
 * QKV, LayerNorms with biases, a GELU MLP with biases, the merger
 * (v.post_ln + mm.0/mm.2) and one DeepStack merger per flagged block
 * (v.deepstack.<block>.{norm,fc1,fc2}, its norm over the 4 merged rows). */
static int check_vision_q3(struct ctx *c)
{
    struct gguf_vision_hparams *h = &c->m->vision;
    struct gguf_file *f = c->f;
    const struct gguf_tensor_info *up = gguf_find_tensor(f, "v.blk.0.ffn_up.weight");
    const struct gguf_tensor_info *pe = gguf_find_tensor(f, "v.position_embd.weight");
    if (!up || up->n_dims != 2)
        return expect(c, "v.blk.0.ffn_up.weight", D_MAT, 0, 2, h->n_embd, 0, 1, 1, 0, NULL);
    if (!pe || pe->n_dims != 2)
        return expect(c, "v.position_embd.weight", D_MAT, 1, 2, h->n_embd, 0, 1, 1, 0, NULL);
    if (up->ne[1] == 0 || up->ne[1] > (1u << 20))
        return bad_hparam(c, "vision FFN width implausible");
    h->n_ff = (uint32_t)up->ne[1];
    uint64_t np = pe->ne[1], side = (uint64_t)sqrt((double)np);
    while (side * side > np)
        side--;
    while ((side + 1) * (side + 1) <= np)
        side++;
    if (np == 0 || side * side != np || side > 4096)
        return bad_hparam(c, "v.position_embd.weight must have a square number of rows");
    h->n_pos = (uint32_t)np;
    h->pos_side = (uint32_t)side;
    uint64_t E = h->n_embd, F = h->n_ff, P = h->patch_size, M = h->merger_dim, O = h->proj_dim;
    int rc;
    if ((rc = expect(c, "v.patch_embd.weight", D_FLOAT, 0, 4, P, P, 3, E, 0, NULL)) ||
        (rc = expect(c, "v.patch_embd.weight.1", D_FLOAT, 0, 4, P, P, 3, E, 0, NULL)) ||
        (rc = expect(c, "v.patch_embd.bias", D_VEC, 0, 1, E, 1, 1, 1, 0, NULL)) ||
        (rc = expect(c, "v.position_embd.weight", D_MAT, 1, 2, E, np, 1, 1, 0, NULL)))
        return rc;
    for (uint32_t i = 0; i < h->n_layer; i++)
        if ((rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.ln1.weight", i)) ||
            (rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.ln1.bias", i)) ||
            (rc = expectf(c, D_MAT, 2, E, 3 * E, "v.blk.%u.attn_qkv.weight", i)) ||
            (rc = expectf(c, D_VEC, 1, 3 * E, 1, "v.blk.%u.attn_qkv.bias", i)) ||
            (rc = expectf(c, D_MAT, 2, E, E, "v.blk.%u.attn_out.weight", i)) ||
            (rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.attn_out.bias", i)) ||
            (rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.ln2.weight", i)) ||
            (rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.ln2.bias", i)) ||
            (rc = expectf(c, D_MAT, 2, E, F, "v.blk.%u.ffn_up.weight", i)) ||
            (rc = expectf(c, D_VEC, 1, F, 1, "v.blk.%u.ffn_up.bias", i)) ||
            (rc = expectf(c, D_MAT, 2, F, E, "v.blk.%u.ffn_down.weight", i)) ||
            (rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.ffn_down.bias", i)))
            return rc;
    if ((rc = expect(c, "v.post_ln.weight", D_VEC, 0, 1, E, 1, 1, 1, 0, NULL)) ||
        (rc = expect(c, "v.post_ln.bias", D_VEC, 0, 1, E, 1, 1, 1, 0, NULL)) ||
        (rc = expect(c, "mm.0.weight", D_MAT, 0, 2, M, M, 1, 1, 0, NULL)) ||
        (rc = expect(c, "mm.0.bias", D_VEC, 0, 1, M, 1, 1, 1, 0, NULL)) ||
        (rc = expect(c, "mm.2.weight", D_MAT, 0, 2, M, O, 1, 1, 0, NULL)) ||
        (rc = expect(c, "mm.2.bias", D_VEC, 0, 1, O, 1, 1, 1, 0, NULL)))
        return rc;
    for (uint32_t j = 0; j < h->n_deepstack; j++) {
        uint32_t b = h->deepstack_layers[j];
        if ((rc = expectf(c, D_VEC, 1, M, 1, "v.deepstack.%u.norm.weight", b)) ||
            (rc = expectf(c, D_VEC, 1, M, 1, "v.deepstack.%u.norm.bias", b)) ||
            (rc = expectf(c, D_MAT, 2, M, M, "v.deepstack.%u.fc1.weight", b)) ||
            (rc = expectf(c, D_VEC, 1, M, 1, "v.deepstack.%u.fc1.bias", b)) ||
            (rc = expectf(c, D_MAT, 2, M, O, "v.deepstack.%u.fc2.weight", b)) ||
            (rc = expectf(c, D_VEC, 1, O, 1, "v.deepstack.%u.fc2.bias", b)))
            return rc;
    }
    return no_extras(c);
}

static int check_vision(struct ctx *c)
{
    struct gguf_vision_hparams *h = &c->m->vision;
    struct gguf_file *f = c->f;
    int rc = arch_is(c, "clip",
                     gguf_find(f, "qwen2vl.block_count")
                         ? "this is the text model: pass it with --model"
                         : "pass the mmproj GGUF that belongs to the Qwen2-VL / Qwen2.5-VL model");
    if (rc || (rc = vision_hparams(c)))
        return rc;
    if (h->kind == GGUF_VISION_QWEN3VL)
        return check_vision_q3(c);
    int v25 = h->kind == GGUF_VISION_QWEN25VL;

    /* FFN width from shapes (Qwen2-VL's feed_forward_length metadata is the
     * output width, not the MLP's). Legacy Qwen2-VL files swap the up/down
     * names: then "ffn_down" is [n_embd, n_ff]. */
    const struct gguf_tensor_info *up = gguf_find_tensor(f, "v.blk.0.ffn_up.weight");
    const struct gguf_tensor_info *down = gguf_find_tensor(f, "v.blk.0.ffn_down.weight");
    if (!up || !down || up->n_dims != 2 || down->n_dims != 2)
        return expect(c, !up || up->n_dims != 2 ? "v.blk.0.ffn_up.weight" : "v.blk.0.ffn_down.weight",
                      D_MAT, 0, 2, h->n_embd, 0, 1, 1, 0, NULL);
    h->ffn_swapped = !v25 && down->ne[0] == h->n_embd && up->ne[1] == h->n_embd &&
                     up->ne[0] != h->n_embd;
    uint64_t ff = h->ffn_swapped ? up->ne[0] : up->ne[1];
    if (ff == 0 || ff > (1u << 20))
        return bad_hparam(c, "vision FFN width implausible");
    h->n_ff = (uint32_t)ff;

    uint64_t E = h->n_embd, F = h->n_ff, P = h->patch_size;
    const char *upn = h->ffn_swapped ? "ffn_down" : "ffn_up";
    const char *downn = h->ffn_swapped ? "ffn_up" : "ffn_down";
    if ((rc = expect(c, "v.patch_embd.weight", D_FLOAT, 0, 4, P, P, 3, E, 0, NULL)) ||
        (rc = expect(c, "v.patch_embd.weight.1", D_FLOAT, 0, 4, P, P, 3, E, 0, NULL)))
        return rc;
    static const char *const qkvo[4] = {"attn_q", "attn_k", "attn_v", "attn_out"};
    for (uint32_t i = 0; i < h->n_layer; i++) {
        if ((rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.ln1.weight", i)) ||
            (!v25 && (rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.ln1.bias", i))))
            return rc;
        for (int k = 0; k < 4; k++)
            if ((rc = expectf(c, D_MAT, 2, E, E, "v.blk.%u.%s.weight", i, qkvo[k])) ||
                (rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.%s.bias", i, qkvo[k])))
                return rc;
        if ((rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.ln2.weight", i)) ||
            (!v25 && (rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.ln2.bias", i))))
            return rc;
        if (v25 && ((rc = expectf(c, D_MAT, 2, E, F, "v.blk.%u.ffn_gate.weight", i)) ||
                    (rc = expectf(c, D_VEC, 1, F, 1, "v.blk.%u.ffn_gate.bias", i))))
            return rc;
        if ((rc = expectf(c, D_MAT, 2, E, F, "v.blk.%u.%s.weight", i, upn)) ||
            (rc = expectf(c, D_VEC, 1, F, 1, "v.blk.%u.%s.bias", i, upn)) ||
            (rc = expectf(c, D_MAT, 2, F, E, "v.blk.%u.%s.weight", i, downn)) ||
            (rc = expectf(c, D_VEC, 1, E, 1, "v.blk.%u.%s.bias", i, downn)))
            return rc;
    }
    uint64_t M = h->merger_dim, O = h->proj_dim;
    if ((rc = expect(c, "v.post_ln.weight", D_VEC, 0, 1, E, 1, 1, 1, 0, NULL)) ||
        (!v25 && (rc = expect(c, "v.post_ln.bias", D_VEC, 0, 1, E, 1, 1, 1, 0, NULL))) ||
        (rc = expect(c, "mm.0.weight", D_MAT, 0, 2, M, M, 1, 1, 0, NULL)) ||
        (rc = expect(c, "mm.0.bias", D_VEC, 0, 1, M, 1, 1, 1, 0, NULL)) ||
        (rc = expect(c, "mm.2.weight", D_MAT, 0, 2, M, O, 1, 1, 0, NULL)) ||
        (rc = expect(c, "mm.2.bias", D_VEC, 0, 1, O, 1, 1, 1, 0, NULL)))
        return rc;
    return no_extras(c);
}

/* ------------------------------------------------------------- public */

/* Every key the checks and the tokenizer read. Anything else a file holds
 * (the converter's tokenizer.chat_template, add_bos_token, clip.use_gelu,
 * image_size, ...) does not change what folio computes; general.* is
 * descriptive metadata. */
static const char *const KNOWN_KEYS[] = {
    "qwen2vl.context_length", "qwen2vl.embedding_length", "qwen2vl.block_count",
    "qwen2vl.feed_forward_length", "qwen2vl.attention.head_count",
    "qwen2vl.attention.head_count_kv", "qwen2vl.attention.key_length",
    "qwen2vl.attention.layer_norm_rms_epsilon", "qwen2vl.rope.dimension_count",
    "qwen2vl.rope.dimension_sections", "qwen2vl.rope.freq_base", "tokenizer.ggml.model",
    "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.padding_token_id", "clip.has_vision_encoder", "clip.projector_type",
    "clip.vision.projector_type", "clip.use_silu", "clip.vision.attention.head_count",
    "clip.vision.attention.layer_norm_epsilon", "clip.vision.block_count",
    "clip.vision.embedding_length", "clip.vision.feed_forward_length",
    "clip.vision.image_mean", "clip.vision.image_std", "clip.vision.n_wa_pattern",
    "clip.vision.patch_size", "clip.vision.projection_dim", "clip.vision.spatial_merge_size",
    "clip.vision.window_size",
    /* Qwen3-VL */
    "qwen3vl.context_length", "qwen3vl.embedding_length", "qwen3vl.block_count",
    "qwen3vl.feed_forward_length", "qwen3vl.attention.head_count",
    "qwen3vl.attention.head_count_kv", "qwen3vl.attention.key_length",
    "qwen3vl.attention.value_length", "qwen3vl.attention.layer_norm_rms_epsilon",
    "qwen3vl.rope.dimension_count", "qwen3vl.rope.dimension_sections", "qwen3vl.rope.freq_base",
    "qwen3vl.n_deepstack_layers", "clip.vision.is_deepstack_layers",
};

int gguf_key_used(const char *key)
{
    if (strncmp(key, "general.", 8) == 0)
        return 1;
    for (size_t i = 0; i < sizeof KNOWN_KEYS / sizeof KNOWN_KEYS[0]; i++)
        if (strcmp(key, KNOWN_KEYS[i]) == 0)
            return 1;
    return 0;
}

/* The keys folio does not read: one debug line each, and a count. */
static void note_ignored(struct gguf_model *m)
{
    for (uint64_t i = 0; i < gguf_kv_count(m->file); i++) {
        const char *k = gguf_kv_key(m->file, i);
        if (!k || gguf_key_used(k))
            continue;
        m->n_ignored++;
        char q[160];
        folio_log(FOLIO_LOG_DEBUG, "gguf_key_ignored", "path=%s key=%s",
                  gguf_path(m->file), folio_lq_bytes(q, sizeof q, k, strlen(k) > 96 ? 96 : strlen(k)));
    }
}

int gguf_model_check(struct gguf_file *f, int vision, struct gguf_model **out,
                     struct folio_err *err)
{
    *out = NULL;
    struct gguf_model *m = calloc(1, sizeof *m);
    uint64_t nt = gguf_tensor_count(f);
    struct ctx c = {f, m, calloc(nt ? nt : 1, 1), err};
    if (m)
        m->items = calloc(nt ? nt : 1, sizeof *m->items);
    if (!m || !c.claimed || !m->items) {
        free(c.claimed);
        if (m)
            free(m->items);
        free(m);
        gguf_close(f);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory checking a model file");
    }
    m->file = f;
    m->is_vision = vision;
    m->text.bos_id = m->text.eos_id = m->text.pad_id = -1;
    int rc = vision ? check_vision(&c) : check_text(&c);
    free(c.claimed);
    if (rc) {
        gguf_model_close(m);
        return rc;
    }
    note_ignored(m);
    for (uint32_t i = 0; i < m->n_assumed; i++)
        folio_log(FOLIO_LOG_INFO, "gguf_key_assumed", "path=%s key=%s value=%s why=\"%s\"",
                  gguf_path(f), m->assumed[i].key, m->assumed[i].value, m->assumed[i].why);
    *out = m;
    return 0;
}

static int open_check(const char *path, int vision, struct gguf_model **out,
                      struct folio_err *err)
{
    struct gguf_file *f;
    *out = NULL;
    int rc = gguf_open(path, &f, err);
    return rc ? rc : gguf_model_check(f, vision, out, err);
}

int gguf_model_open_text(const char *path, struct gguf_model **out, struct folio_err *err)
{
    return open_check(path, 0, out, err);
}

int gguf_model_open_vision(const char *path, struct gguf_model **out, struct folio_err *err)
{
    return open_check(path, 1, out, err);
}

void gguf_model_close(struct gguf_model *m)
{
    if (!m)
        return;
    gguf_close(m->file);
    free(m->items);
    free(m);
}

uint64_t gguf_model_matrix_f16_bytes(const struct gguf_model *m)
{
    uint64_t b = 0;
    for (uint64_t i = 0; i < m->n_items; i++)
        if (!m->items[i].on_host && m->items[i].t->n_dims == 2)
            b += m->items[i].t->n_elems * 2;
    return b;
}

int gguf_model_matrix_types(const struct gguf_model *m, int *types, int n, int max)
{
    for (uint64_t i = 0; i < m->n_items; i++) {
        const struct gguf_tensor_info *t = m->items[i].t;
        if (t->n_dims != 2 || m->items[i].on_host)
            continue;
        int seen = 0;
        for (int j = 0; j < n; j++)
            seen |= types[j] == t->type;
        if (!seen && n < max)
            types[n++] = t->type;
    }
    return n;
}
