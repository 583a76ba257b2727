/*
 * gguf model checks — from a parsed container to "this is a text model /
 * vision projector of a family folio runs", or the first reason it is not.
 *
 * The family is found by its descriptor (engine/arch/arch.h: the text
 * architecture or the projector type); the shared keys are read here, the
 * family's own through its key table and hooks. The expected tensor set is
 * the family's tensor table spelled out per layer from the
 * hyper-parameters (model_check_table): each tensor's presence, dtype
 * class and shape is checked in a fixed order, so the error names the
 * first mismatch the way a reader walks the model (token_embd, then
 * blk.0.*, ...). Every tensor
 * the file holds must be claimed by an expectation: an unknown extra tensor
 * means a model variant folio's graphs do not implement (fused QKV, extra
 * norms), and running it anyway would compute something else silently.
 *
 * The result carries the load list (name, type, shape, file offset, bytes)
 * in that same order — what the engine's weight upload walks — and the
 * device memory it needs. token_embd stays on the host (rows are gathered
 * per request) unless the output head is tied to it.
 */
#include "engine/arch/arch.h"
#include "engine/model/gguf_model.h"
#include "engine/model/model_check.h"
#include "engine/quant/quant.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The primitives (expect a tensor, record an assumption) are model_check.c. */

static int arch_is(struct model_check *c, const char *want, const char *what_hint)
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

static int text_hparams(struct model_check *c, const struct arch_text *A)
{
    const struct arch_text_keys *K = &A->keys;
    struct gguf_text_hparams *h = &c->m->text;
    struct gguf_file *f = c->f;
    int own = A->own_head_dim;
    int rc;
    if ((rc = gguf_get_u32(f, K->embd, &h->n_embd, c->err)) ||
        (rc = gguf_get_u32(f, K->blocks, &h->n_layer, c->err)) ||
        (rc = gguf_get_u32(f, K->ff, &h->n_ff, c->err)) ||
        (rc = gguf_get_u32(f, K->heads, &h->n_head, c->err)) ||
        (rc = model_check_opt_u32(c, K->heads_kv, h->n_head,
                                  "head_count: no grouped-query attention", &h->n_head_kv)) ||
        (rc = model_check_opt_u32(c, K->ctx, 0, "unknown; not used by folio", &h->n_ctx_train)) ||
        (rc = model_check_opt_f32(c, K->theta, 10000.0f, "llama.cpp's default", &h->rope_theta)) ||
        (rc = gguf_get_f32(f, K->eps, &h->rms_eps, c->err)))
        return rc;
    if (h->n_embd == 0 || h->n_embd > 65536 || h->n_layer == 0 || h->n_layer > 1024 ||
        h->n_ff == 0 || h->n_ff > (1u << 20) || h->n_head == 0 || h->n_head_kv == 0 ||
        h->n_head > 1024)
        return model_check_bad_hparam(c, "a size is 0 or implausibly large");
    /* A family's head size may be its own (key_length: Qwen3-VL 4B has
     * 32 x 128 heads on a 2560-wide stream); else embedding_length /
     * head_count. */
    if ((!own && h->n_embd % h->n_head) || h->n_head % h->n_head_kv)
        return model_check_bad_hparam(c, "head_count must divide embedding_length and "
                                         "head_count_kv must divide head_count");
    h->head_dim = h->n_embd / h->n_head;
    uint32_t kl, vl, rot;
    if ((rc = model_check_opt_u32(c, K->key_len, h->head_dim, "embedding_length / head_count",
                                  &kl)))
        return rc;
    if (own && kl)
        h->head_dim = kl;
    vl = h->head_dim;
    if ((K->val_len && (rc = model_check_opt_u32(c, K->val_len, h->head_dim,
                                                 "attention.key_length", &vl))) ||
        (rc = model_check_opt_u32(c, K->rot, h->head_dim, "the head size: rotary over whole heads",
                                  &rot)))
        return rc;
    if (kl != h->head_dim || vl != h->head_dim || rot != h->head_dim || h->head_dim % 2 ||
        h->head_dim == 0 || h->head_dim > 1024)
        return model_check_bad_hparam(c, "attention.key_length / value_length / "
                                         "rope.dimension_count differ from the head size (or it "
                                         "is odd)");
    if (K->deepstack) {
        if ((rc = gguf_get_u32_or(f, K->deepstack, 0, &h->n_deepstack, c->err)))
            return rc;
        if (h->n_deepstack > h->n_layer || h->n_deepstack > GGUF_MAX_DEEPSTACK)
            return model_check_bad_hparam(c, "n_deepstack_layers exceeds the block count (or 8)");
    }
    if (!(h->rms_eps > 0 && h->rms_eps < 1) || !(h->rope_theta > 0) || isinf(h->rope_theta))
        return model_check_bad_hparam(c, "rms epsilon or rope base out of range");
    const struct gguf_value *sec;
    if ((rc = gguf_get_array(f, K->sections, GGUF_I64, &sec, c->err)))
        return rc;
    if (gguf_array_len(sec) != 4)
        return model_check_bad_hparam(c, "rope.dimension_sections must have 4 entries");
    int64_t sum = 0;
    for (int i = 0; i < 4; i++) {
        int64_t v;
        if (gguf_array_i64(sec, (uint64_t)i, &v) || v < 0 || v > 4096)
            return model_check_bad_hparam(c, "rope.dimension_sections entry out of range");
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

static int text_tokenizer(struct model_check *c)
{
    struct gguf_text_hparams *h = &c->m->text;
    struct gguf_file *f = c->f;
    struct gguf_str s;
    int rc;
    /* folio implements byte-level BPE with the qwen2 pre-tokenizer only. */
    if ((rc = gguf_get_str(f, "tokenizer.ggml.model", &s, c->err)))
        return rc;
    if (!gguf_str_eq(s, "gpt2"))
        return model_check_bad_hparam(c, "tokenizer.ggml.model is not 'gpt2' (byte-level BPE)");
    if ((rc = gguf_get_str(f, "tokenizer.ggml.pre", &s, c->err)))
        return rc;
    if (!gguf_str_eq(s, "qwen2"))
        return model_check_bad_hparam(c, "tokenizer.ggml.pre is not 'qwen2'");
    const struct gguf_value *toks, *merges;
    if ((rc = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, c->err)) ||
        (rc = gguf_get_array(f, "tokenizer.ggml.merges", GGUF_STRING, &merges, c->err)))
        return rc;
    if (gguf_array_len(toks) == 0 || gguf_array_len(toks) > (1u << 24))
        return model_check_bad_hparam(c, "tokenizer.ggml.tokens is empty or too long");
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
            return model_check_bad_hparam(c, "a special token id is beyond the vocabulary");
        *ids[i] = v == UINT32_MAX ? -1 : (int32_t)v;
    }
    return 0;
}

/* general.architecture -> the family's descriptor (engine/arch/); a
 * variant a family refuses by name (Qwen3-VL's mixture-of-experts
 * qwen3vlmoe: its expert layers are not implemented) says so. */
static int text_family(struct model_check *c, const struct arch_text **out)
{
    struct gguf_str a;
    *out = NULL;
    if (gguf_get_str(c->f, "general.architecture", &a, c->err) == 0) {
        const struct arch_text *A = arch_text_find(a.p, a.n);
        if (A) {
            *out = A;
            return 0;
        }
        if ((A = arch_text_refusing(a.p, a.n)) != NULL) {
            folio_err_set(c->err, FOLIO_EUNSUPPORTED, A->refused_msg, gguf_path(c->f));
            folio_err_hint(c->err, "%s", A->refused_hint);
            return FOLIO_EUNSUPPORTED;
        }
    }
    char runs[300], hint[340];
    snprintf(hint, sizeof hint, "folio runs text GGUFs of %s",
             arch_list(ARCH_LIST_TEXT, runs, sizeof runs));
    return arch_is(c, arch_text_at(0)->name,
                   gguf_find(c->f, "clip.projector_type")
                       ? "this is a vision projector (mmproj) file: pass it with --mmproj"
                       : hint);
}

static int check_text(struct model_check *c)
{
    struct gguf_text_hparams *h = &c->m->text;
    struct gguf_file *f = c->f;
    const struct arch_text *A;
    int rc = text_family(c, &A);
    if (rc)
        return rc;
    h->arch = A;
    if ((rc = text_hparams(c, A)) || (rc = text_tokenizer(c)))
        return rc;

    /* the vocabulary and the tying, off the family's embedding and head */
    const struct arch_tensor *E = arch_text_embedding(A), *O = arch_text_head(A);
    const struct gguf_tensor_info *emb = gguf_find_tensor(f, E->name);
    if (!emb || emb->n_dims != 2)
        return model_check_expect(c, E->name, ARCH_MAT, 1, 2, h->n_embd, h->n_tokens, 1, 1, 0,
                                  NULL);
    if (emb->ne[1] < h->n_tokens || emb->ne[1] > UINT32_MAX) {
        char what[GGUF_MAX_NAME + 64];
        snprintf(what, sizeof what, "%s has fewer rows than the tokenizer has tokens", E->name);
        return model_check_bad_hparam(c, what);
    }
    h->n_vocab = (uint32_t)emb->ne[1];
    h->tied_output = !O || gguf_find_tensor(f, O->name) == NULL;
    /* the family's table: token_embd, the blocks, the head */
    if ((rc = model_check_table(c, A->tensors, A->n_tensors)))
        return rc;
    return model_check_no_extras(c);
}

/* --------------------------------------------------------------- vision */

static int f32_triplet(struct model_check *c, const char *key, float out[3])
{
    const struct gguf_value *v;
    int rc = gguf_get_array(c->f, key, GGUF_F64, &v, c->err);
    if (rc)
        return rc;
    if (gguf_array_len(v) != 3)
        return model_check_bad_hparam(c, "image mean/std must have 3 entries");
    for (int i = 0; i < 3; i++) {
        double d;
        if (gguf_array_f64(v, (uint64_t)i, &d) || !isfinite(d))
            return model_check_bad_hparam(c, "image mean/std entry is not a finite number");
        out[i] = (float)d;
    }
    return 0;
}

static int vision_hparams(struct model_check *c)
{
    struct gguf_vision_hparams *h = &c->m->vision;
    struct gguf_file *f = c->f;
    int has_vision, rc;
    if ((rc = gguf_get_bool_or(f, "clip.has_vision_encoder", 0, &has_vision, c->err)))
        return rc;
    if (!has_vision)
        return model_check_bad_hparam(c, "clip.has_vision_encoder is not true");
    struct gguf_str pt;
    const char *ptkey = gguf_find(f, "clip.vision.projector_type") ? "clip.vision.projector_type"
                                                                   : "clip.projector_type";
    if ((rc = gguf_get_str(f, ptkey, &pt, c->err)))
        return rc;
    const struct arch_tower *T = arch_tower_find(pt.p, pt.n);
    if (!T) {
        char q[160], runs[300];
        folio_err_set(c->err, FOLIO_EMODEL, "mmproj '%s' has projector type %s; folio runs %s",
                      gguf_path(f), folio_lq_bytes(q, sizeof q, pt.p, pt.n > 64 ? 64 : pt.n),
                      arch_list(ARCH_LIST_TOWERS, runs, sizeof runs));
        return FOLIO_EMODEL;
    }
    h->arch = T;
    if ((rc = gguf_get_u32(f, "clip.vision.embedding_length", &h->n_embd, c->err)) ||
        (rc = gguf_get_u32(f, "clip.vision.block_count", &h->n_layer, c->err)) ||
        (rc = gguf_get_u32(f, "clip.vision.attention.head_count", &h->n_head, c->err)) ||
        (rc = gguf_get_u32(f, "clip.vision.patch_size", &h->patch_size, c->err)) ||
        (rc = gguf_get_u32(f, "clip.vision.projection_dim", &h->proj_dim, c->err)) ||
        (rc = model_check_opt_u32(c, "clip.vision.spatial_merge_size", 2,
                                  "every tower folio runs merges 2x2",
                                  &h->spatial_merge)) ||
        (rc = model_check_opt_f32(c, "clip.vision.attention.layer_norm_epsilon", 1e-6f,
                                  "every tower folio runs", &h->eps)) ||
        (rc = gguf_get_bool_or(f, "clip.use_silu", 0, &h->use_silu, c->err)) ||
        (rc = f32_triplet(c, "clip.vision.image_mean", h->image_mean)) ||
        (rc = f32_triplet(c, "clip.vision.image_std", h->image_std)))
        return rc;
    if (h->n_embd == 0 || h->n_embd > 65536 || h->n_layer == 0 || h->n_layer > 1024 ||
        h->n_head == 0 || h->n_embd % h->n_head || (h->n_embd / h->n_head) % 2 ||
        h->patch_size == 0 || h->patch_size > 1024 || h->spatial_merge == 0 ||
        h->spatial_merge > 8 || h->proj_dim == 0 || h->proj_dim > 65536 || !(h->eps > 0))
        return model_check_bad_hparam(c, "a vision size is 0, inconsistent or implausibly large");
    for (int i = 0; i < 3; i++)
        if (!(h->image_std[i] > 0))
            return model_check_bad_hparam(c, "image std must be positive");
    /* the family's own keys and fixed choices (windows, DeepStack, MLP) */
    if ((rc = T->hparams(c)))
        return rc;
    h->head_dim = h->n_embd / h->n_head;
    h->merger_dim = h->n_embd * h->spatial_merge * h->spatial_merge;
    return 0;
}

static int check_vision(struct model_check *c)
{
    struct gguf_vision_hparams *h = &c->m->vision;
    struct gguf_file *f = c->f;
    struct gguf_str a = {0};
    int text = gguf_find(f, "general.architecture") &&
               gguf_value_str(gguf_find(f, "general.architecture"), &a) == 0 &&
               (arch_text_find(a.p, a.n) || arch_text_refusing(a.p, a.n));
    int rc = arch_is(c, "clip",
                     text ? "this is the text model: pass it with --model"
                          : "pass the mmproj GGUF that belongs to the text model");
    if (rc || (rc = vision_hparams(c)))
        return rc;
    /* widths from shapes, then the family's table */
    const struct arch_tower *T = h->arch;
    if ((rc = T->shapes(c)) || (rc = model_check_table(c, T->tensors, T->n_tensors)))
        return rc;
    return model_check_no_extras(c);
}

/* ------------------------------------------------------------- public */

/* Every key the checks and the tokenizer read: the shared ones here, each
 * family's from its descriptor. Anything else a file holds (the
 * converter's tokenizer.chat_template, add_bos_token, clip.use_gelu,
 * image_size, ...) does not change what folio computes; general.* is
 * descriptive metadata. */
static const char *const KNOWN_KEYS[] = {
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.padding_token_id", "clip.has_vision_encoder", "clip.projector_type",
    "clip.vision.projector_type", "clip.use_silu", "clip.vision.attention.head_count",
    "clip.vision.attention.layer_norm_epsilon", "clip.vision.block_count",
    "clip.vision.embedding_length", "clip.vision.feed_forward_length",
    "clip.vision.image_mean", "clip.vision.image_std",
    "clip.vision.patch_size", "clip.vision.projection_dim", "clip.vision.spatial_merge_size",
};

static int text_key_used(const struct arch_text_keys *K, const char *key)
{
    const char *const all[] = {K->embd, K->blocks, K->ff, K->heads, K->heads_kv, K->ctx,
                               K->theta, K->eps, K->key_len, K->val_len, K->rot, K->sections,
                               K->deepstack};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] && strcmp(key, all[i]) == 0)
            return 1;
    return 0;
}

int gguf_key_used(const char *key)
{
    if (strncmp(key, "general.", 8) == 0)
        return 1;
    for (size_t i = 0; i < sizeof KNOWN_KEYS / sizeof KNOWN_KEYS[0]; i++)
        if (strcmp(key, KNOWN_KEYS[i]) == 0)
            return 1;
    const struct arch_text *A;
    for (uint32_t i = 0; (A = arch_text_at(i)) != NULL; i++)
        if (text_key_used(&A->keys, key))
            return 1;
    const struct arch_tower *T;
    for (uint32_t i = 0; (T = arch_tower_at(i)) != NULL; i++)
        for (const char *const *k = T->keys; k && *k; k++)
            if (strcmp(key, *k) == 0)
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
    struct model_check c = {f, m, calloc(nt ? nt : 1, 1), err};
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
