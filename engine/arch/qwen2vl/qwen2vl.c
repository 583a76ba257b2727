/*
 * Qwen2-VL / Qwen2.5-VL: the descriptors (qwen2vl.h). The tensor tables
 * are the layout llama.cpp's converter writes (docs/reference/qwen25vl.md
 * §1); the checker walks them and the loaders put each tensor into the
 * slot its entry names.
 */
#include "engine/arch/qwen2vl/qwen2vl.h"
#include "engine/model/lm_internal.h"
#include "engine/model/model_check.h"
#include "engine/model/tower_internal.h"
#include "engine/ops/ops.h"

#include <stddef.h>

#define T1(g, nm, cls, fl, ld, a, slot) {nm, g, cls, fl, ld, 1, {a, AD_1, AD_1, AD_1}, slot}
#define T2(g, nm, cls, fl, ld, a, b, slot) {nm, g, cls, fl, ld, 2, {a, b, AD_1, AD_1}, slot}
#define LW(f) offsetof(struct lm_layer, f)
#define VL(f) offsetof(struct vis_layer, f)
#define VV(f) offsetof(struct vis, f)

/* ---------------------------------------------------------------- text */

/* One decoder layer in file order: q/k/v with biases. token_embd stays on
 * the host (rows gathered per request) unless it is also the LM head. */
static const struct arch_tensor TEXT[] = {
    T2(ARCH_PRE, "token_embd.weight", ARCH_MAT, ARCH_HOST_UNLESS_TIED, 0, AD_E, AD_V,
       offsetof(struct lm, out_w)),
    T1(ARCH_LAYER, "blk.%u.attn_norm.weight", ARCH_VEC, 0, 0, AD_E, LW(attn_norm)),
    T2(ARCH_LAYER, "blk.%u.attn_q.weight", ARCH_MAT, 0, 0, AD_E, AD_Q, LW(wq)),
    T1(ARCH_LAYER, "blk.%u.attn_q.bias", ARCH_VEC, 0, 0, AD_Q, LW(bq)),
    T2(ARCH_LAYER, "blk.%u.attn_k.weight", ARCH_MAT, 0, 0, AD_E, AD_KV, LW(wk)),
    T1(ARCH_LAYER, "blk.%u.attn_k.bias", ARCH_VEC, 0, 0, AD_KV, LW(bk)),
    T2(ARCH_LAYER, "blk.%u.attn_v.weight", ARCH_MAT, 0, 0, AD_E, AD_KV, LW(wv)),
    T1(ARCH_LAYER, "blk.%u.attn_v.bias", ARCH_VEC, 0, 0, AD_KV, LW(bv)),
    T2(ARCH_LAYER, "blk.%u.attn_output.weight", ARCH_MAT, 0, 0, AD_Q, AD_E, LW(wo)),
    T1(ARCH_LAYER, "blk.%u.ffn_norm.weight", ARCH_VEC, 0, 0, AD_E, LW(ffn_norm)),
    T2(ARCH_LAYER, "blk.%u.ffn_gate.weight", ARCH_MAT, 0, 0, AD_E, AD_F, LW(wg)),
    T2(ARCH_LAYER, "blk.%u.ffn_up.weight", ARCH_MAT, 0, 0, AD_E, AD_F, LW(wu)),
    T2(ARCH_LAYER, "blk.%u.ffn_down.weight", ARCH_MAT, 0, 0, AD_F, AD_E, LW(wd)),
    T1(ARCH_POST, "output_norm.weight", ARCH_VEC, 0, 0, AD_E, offsetof(struct lm, out_norm)),
    T2(ARCH_POST, "output.weight", ARCH_MAT, ARCH_OPTIONAL, 0, AD_E, AD_V,
       offsetof(struct lm, out_w)),
};

const struct arch_text arch_qwen2vl_text = {
    .name = "qwen2vl",
    .display = "Qwen2-VL / Qwen2.5-VL",
    .keys = {"qwen2vl.embedding_length", "qwen2vl.block_count", "qwen2vl.feed_forward_length",
             "qwen2vl.attention.head_count", "qwen2vl.attention.head_count_kv",
             "qwen2vl.context_length", "qwen2vl.rope.freq_base",
             "qwen2vl.attention.layer_norm_rms_epsilon", "qwen2vl.attention.key_length", NULL,
             "qwen2vl.rope.dimension_count", "qwen2vl.rope.dimension_sections", NULL},
    .tensors = TEXT,
    .n_tensors = sizeof TEXT / sizeof TEXT[0],
    .rope_mode = OP_ROPE_MROPE,
};

/* --------------------------------------------------------------- towers */

/* The patch kernel: Conv3D's two temporal halves, folded by the skeleton. */
#define PATCH                                                                               \
    {"v.patch_embd.weight", ARCH_PRE, ARCH_FLOAT, 0, ARCH_LOAD_PATCH0, 4,                   \
     {AD_P, AD_P, AD_3, AD_E}, 0},                                                          \
    {"v.patch_embd.weight.1", ARCH_PRE, ARCH_FLOAT, 0, ARCH_LOAD_PATCH1, 4,                 \
     {AD_P, AD_P, AD_3, AD_E}, 0}
#define ATTN(x, w, b)                                                                       \
    T2(ARCH_LAYER, "v.blk.%u." x ".weight", ARCH_MAT, 0, 0, AD_E, AD_E, VL(w)),             \
    T1(ARCH_LAYER, "v.blk.%u." x ".bias", ARCH_VEC, 0, 0, AD_E, VL(b))
#define MERGER                                                                              \
    T2(ARCH_POST, "mm.0.weight", ARCH_MAT, 0, 0, AD_M, AD_M, VV(mm0)),                      \
    T1(ARCH_POST, "mm.0.bias", ARCH_VEC, 0, 0, AD_M, VV(mm0b)),                             \
    T2(ARCH_POST, "mm.2.weight", ARCH_MAT, 0, 0, AD_M, AD_O, VV(mm2)),                      \
    T1(ARCH_POST, "mm.2.bias", ARCH_VEC, 0, 0, AD_O, VV(mm2b))

/* Qwen2-VL: LayerNorms with biases, up/down MLP. Legacy files swap the
 * up/down names (then "ffn_down" is [n_embd, n_ff]): the swapped entries
 * put each into the slot of its shape. */
static const struct arch_tensor TOWER2[] = {
    PATCH,
    T1(ARCH_LAYER, "v.blk.%u.ln1.weight", ARCH_VEC, 0, 0, AD_E, VL(ln1)),
    T1(ARCH_LAYER, "v.blk.%u.ln1.bias", ARCH_VEC, 0, 0, AD_E, VL(ln1b)),
    ATTN("attn_q", wq, bq), ATTN("attn_k", wk, bk), ATTN("attn_v", wv, bv),
    ATTN("attn_out", wo, bo),
    T1(ARCH_LAYER, "v.blk.%u.ln2.weight", ARCH_VEC, 0, 0, AD_E, VL(ln2)),
    T1(ARCH_LAYER, "v.blk.%u.ln2.bias", ARCH_VEC, 0, 0, AD_E, VL(ln2b)),
    T2(ARCH_LAYER, "v.blk.%u.ffn_up.weight", ARCH_MAT, ARCH_IF_NOT_SWAPPED, 0, AD_E, AD_F, VL(wu)),
    T2(ARCH_LAYER, "v.blk.%u.ffn_down.weight", ARCH_MAT, ARCH_IF_SWAPPED, 0, AD_E, AD_F, VL(wu)),
    T1(ARCH_LAYER, "v.blk.%u.ffn_up.bias", ARCH_VEC, ARCH_IF_NOT_SWAPPED, 0, AD_F, VL(bu)),
    T1(ARCH_LAYER, "v.blk.%u.ffn_down.bias", ARCH_VEC, ARCH_IF_SWAPPED, 0, AD_F, VL(bu)),
    T2(ARCH_LAYER, "v.blk.%u.ffn_down.weight", ARCH_MAT, ARCH_IF_NOT_SWAPPED, 0, AD_F, AD_E,
       VL(wd)),
    T2(ARCH_LAYER, "v.blk.%u.ffn_up.weight", ARCH_MAT, ARCH_IF_SWAPPED, 0, AD_F, AD_E, VL(wd)),
    T1(ARCH_LAYER, "v.blk.%u.ffn_down.bias", ARCH_VEC, ARCH_IF_NOT_SWAPPED, 0, AD_E, VL(bd)),
    T1(ARCH_LAYER, "v.blk.%u.ffn_up.bias", ARCH_VEC, ARCH_IF_SWAPPED, 0, AD_E, VL(bd)),
    T1(ARCH_POST, "v.post_ln.weight", ARCH_VEC, 0, 0, AD_E, VV(post)),
    T1(ARCH_POST, "v.post_ln.bias", ARCH_VEC, 0, 0, AD_E, VV(postb)),
    MERGER,
};

/* Qwen2.5-VL: RMSNorms (no biases), SwiGLU MLP. */
static const struct arch_tensor TOWER25[] = {
    PATCH,
    T1(ARCH_LAYER, "v.blk.%u.ln1.weight", ARCH_VEC, 0, 0, AD_E, VL(ln1)),
    ATTN("attn_q", wq, bq), ATTN("attn_k", wk, bk), ATTN("attn_v", wv, bv),
    ATTN("attn_out", wo, bo),
    T1(ARCH_LAYER, "v.blk.%u.ln2.weight", ARCH_VEC, 0, 0, AD_E, VL(ln2)),
    T2(ARCH_LAYER, "v.blk.%u.ffn_gate.weight", ARCH_MAT, 0, 0, AD_E, AD_F, VL(wg)),
    T1(ARCH_LAYER, "v.blk.%u.ffn_gate.bias", ARCH_VEC, 0, 0, AD_F, VL(bg)),
    T2(ARCH_LAYER, "v.blk.%u.ffn_up.weight", ARCH_MAT, 0, 0, AD_E, AD_F, VL(wu)),
    T1(ARCH_LAYER, "v.blk.%u.ffn_up.bias", ARCH_VEC, 0, 0, AD_F, VL(bu)),
    T2(ARCH_LAYER, "v.blk.%u.ffn_down.weight", ARCH_MAT, 0, 0, AD_F, AD_E, VL(wd)),
    T1(ARCH_LAYER, "v.blk.%u.ffn_down.bias", ARCH_VEC, 0, 0, AD_E, VL(bd)),
    T1(ARCH_POST, "v.post_ln.weight", ARCH_VEC, 0, 0, AD_E, VV(post)),
    MERGER,
};

static int hparams2(struct model_check *c)
{
    c->m->vision.use_silu = 0;
    return 0;
}

static int hparams25(struct model_check *c)
{
    struct gguf_vision_hparams *h = &c->m->vision;
    int rc;
    if ((rc = gguf_get_u32(c->f, "clip.vision.n_wa_pattern", &h->n_wa_pattern, c->err)) ||
        (rc = model_check_opt_u32(c, "clip.vision.window_size", 112,
                                  "every released Qwen2.5-VL; llama.cpp's converter does not "
                                  "write it", &h->window_size)))
        return rc;
    if (h->n_wa_pattern == 0 || h->window_size == 0 ||
        h->window_size % (h->patch_size * h->spatial_merge) != 0)
        return model_check_bad_hparam(c, "n_wa_pattern / window_size invalid (the window must be "
                                         "a multiple of patch_size * spatial_merge_size)");
    h->use_silu = 1; /* Qwen2.5-VL's MLP is SwiGLU whatever the flag says */
    return 0;
}

/* FFN width from shapes (Qwen2-VL's feed_forward_length metadata is the
 * output width, not the MLP's). Legacy Qwen2-VL files swap the up/down
 * names: then "ffn_down" is [n_embd, n_ff]. */
static int shapes(struct model_check *c, int v25)
{
    struct gguf_vision_hparams *h = &c->m->vision;
    const struct gguf_tensor_info *up = gguf_find_tensor(c->f, "v.blk.0.ffn_up.weight");
    const struct gguf_tensor_info *down = gguf_find_tensor(c->f, "v.blk.0.ffn_down.weight");
    if (!up || !down || up->n_dims != 2 || down->n_dims != 2)
        return model_check_expect(c, !up || up->n_dims != 2 ? "v.blk.0.ffn_up.weight"
                                                            : "v.blk.0.ffn_down.weight",
                                  ARCH_MAT, 0, 2, h->n_embd, 0, 1, 1, 0, NULL);
    h->ffn_swapped = !v25 && down->ne[0] == h->n_embd && up->ne[1] == h->n_embd &&
                     up->ne[0] != h->n_embd;
    uint64_t ff = h->ffn_swapped ? up->ne[0] : up->ne[1];
    if (ff == 0 || ff > (1u << 20))
        return model_check_bad_hparam(c, "vision FFN width implausible");
    h->n_ff = (uint32_t)ff;
    return 0;
}

static int shapes2(struct model_check *c)
{
    return shapes(c, 0);
}

static int shapes25(struct model_check *c)
{
    return shapes(c, 1);
}

static const char *const KEYS25[] = {"clip.vision.n_wa_pattern", "clip.vision.window_size", NULL};

const struct arch_tower arch_qwen2vl_tower = {
    .projector = {"qwen2vl_merger"},
    .display = "Qwen2-VL",
    .json_name = "qwen2vl",
    .mlp_name = "quick-gelu",
    .hparams = hparams2,
    .shapes = shapes2,
    .tensors = TOWER2,
    .n_tensors = sizeof TOWER2 / sizeof TOWER2[0],
    .tower = &vis_family_qwen2vl,
    .norm_kind = 1,
    .act = OP_QUICK_GELU,
};

const struct arch_tower arch_qwen25vl_tower = {
    .projector = {"qwen2.5vl_merger", "qwen2.5o"},
    .display = "Qwen2.5-VL",
    .json_name = "qwen2.5vl",
    .mlp_name = "swiglu",
    .keys = KEYS25,
    .hparams = hparams25,
    .shapes = shapes25,
    .tensors = TOWER25,
    .n_tensors = sizeof TOWER25 / sizeof TOWER25[0],
    .tower = &vis_family_qwen25vl,
    .norm_kind = 0,
    .act = OP_SWIGLU,
};
