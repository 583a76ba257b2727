/*
 * Qwen3-VL: the descriptors (qwen3vl.h). The tensor tables are the layout
 * of llama.cpp's converter (conversion/qwen3vl.py: text architecture
 * qwen3vl, projector qwen3vl_merger); the checker walks them and the
 * loaders put each tensor into the slot its entry names.
 */
#include "engine/arch/qwen3vl/qwen3vl.h"
#include "engine/model/lm_internal.h"
#include "engine/model/model_check.h"
#include "engine/model/preprocess.h"
#include "engine/model/tower_internal.h"
#include "engine/ops/ops.h"

#include <math.h>
#include <stddef.h>

#define T1(g, nm, cls, fl, ld, a, slot) {nm, g, cls, fl, ld, 1, {a, AD_1, AD_1, AD_1}, slot}
#define T2(g, nm, cls, fl, ld, a, b, slot) {nm, g, cls, fl, ld, 2, {a, b, AD_1, AD_1}, slot}
#define LW(f) offsetof(struct lm_layer, f)
#define VL(f) offsetof(struct vis_layer, f)
#define VV(f) offsetof(struct vis, f)
#define VD(f) offsetof(struct vis_ds, f)

/* ---------------------------------------------------------------- text */

/* One decoder layer, in file order (llama.cpp's qwen3vl graph): q/k
 * RMSNorm weights over one head, and no q/k/v biases (HF attention_bias
 * false; a file that has them is still run with them, so they are
 * optional at the end of the layer). */
static const struct arch_tensor TEXT[] = {
    T2(ARCH_PRE, "token_embd.weight", ARCH_MAT, ARCH_HOST_UNLESS_TIED, 0, AD_E, AD_V,
       offsetof(struct lm, out_w)),
    T1(ARCH_LAYER, "blk.%u.attn_norm.weight", ARCH_VEC, 0, 0, AD_E, LW(attn_norm)),
    T2(ARCH_LAYER, "blk.%u.attn_q.weight", ARCH_MAT, 0, 0, AD_E, AD_Q, LW(wq)),
    T1(ARCH_LAYER, "blk.%u.attn_q_norm.weight", ARCH_VEC, 0, 0, AD_D, LW(qn)),
    T2(ARCH_LAYER, "blk.%u.attn_k.weight", ARCH_MAT, 0, 0, AD_E, AD_KV, LW(wk)),
    T1(ARCH_LAYER, "blk.%u.attn_k_norm.weight", ARCH_VEC, 0, 0, AD_D, LW(kn)),
    T2(ARCH_LAYER, "blk.%u.attn_v.weight", ARCH_MAT, 0, 0, AD_E, AD_KV, LW(wv)),
    T2(ARCH_LAYER, "blk.%u.attn_output.weight", ARCH_MAT, 0, 0, AD_Q, AD_E, LW(wo)),
    T1(ARCH_LAYER, "blk.%u.ffn_norm.weight", ARCH_VEC, 0, 0, AD_E, LW(ffn_norm)),
    T2(ARCH_LAYER, "blk.%u.ffn_gate.weight", ARCH_MAT, 0, 0, AD_E, AD_F, LW(wg)),
    T2(ARCH_LAYER, "blk.%u.ffn_up.weight", ARCH_MAT, 0, 0, AD_E, AD_F, LW(wu)),
    T2(ARCH_LAYER, "blk.%u.ffn_down.weight", ARCH_MAT, 0, 0, AD_F, AD_E, LW(wd)),
    T1(ARCH_LAYER, "blk.%u.attn_q.bias", ARCH_VEC, ARCH_OPTIONAL, 0, AD_Q, LW(bq)),
    T1(ARCH_LAYER, "blk.%u.attn_k.bias", ARCH_VEC, ARCH_OPTIONAL, 0, AD_KV, LW(bk)),
    T1(ARCH_LAYER, "blk.%u.attn_v.bias", ARCH_VEC, ARCH_OPTIONAL, 0, AD_KV, LW(bv)),
    T1(ARCH_POST, "output_norm.weight", ARCH_VEC, 0, 0, AD_E, offsetof(struct lm, out_norm)),
    T2(ARCH_POST, "output.weight", ARCH_MAT, ARCH_OPTIONAL, 0, AD_E, AD_V,
       offsetof(struct lm, out_w)),
};

static void describe_text(FILE *out, const struct gguf_text_hparams *h)
{
    fprintf(out, "qwen3vl       per-head q/k RMSNorm, interleaved M-RoPE, %u DeepStack "
            "layers\n", h->n_deepstack);
}

const struct arch_text arch_qwen3vl_text = {
    .name = "qwen3vl",
    .display = "dense Qwen3-VL",
    .keys = {"qwen3vl.embedding_length", "qwen3vl.block_count", "qwen3vl.feed_forward_length",
             "qwen3vl.attention.head_count", "qwen3vl.attention.head_count_kv",
             "qwen3vl.context_length", "qwen3vl.rope.freq_base",
             "qwen3vl.attention.layer_norm_rms_epsilon", "qwen3vl.attention.key_length",
             "qwen3vl.attention.value_length", "qwen3vl.rope.dimension_count",
             "qwen3vl.rope.dimension_sections", "qwen3vl.n_deepstack_layers"},
    .own_head_dim = 1,
    .tensors = TEXT,
    .n_tensors = sizeof TEXT / sizeof TEXT[0],
    .rope_mode = OP_ROPE_IMROPE,
    .prompt_no_system = 1, /* Qwen3-VL's chat template has no default system turn */
    .refused = "qwen3vlmoe",
    .refused_msg = "model file '%s' is a Qwen3-VL mixture-of-experts model (architecture "
                   "qwen3vlmoe); folio runs the dense Qwen3-VL models only",
    .refused_hint = "use a dense Qwen3-VL GGUF (2B, 4B, 8B or 32B), or Qwen2.5-VL",
    .hook_keys = q3_lm_keys,
    .hook_open = q3_lm_open,
    .hook_close = q3_lm_close,
    .hook_stage = q3_lm_stage,
    .hook_qk = q3_lm_qk_norm,
    .hook_layer_done = q3_lm_deepstack_add,
    .describe = describe_text,
};

/* ---------------------------------------------------------------- tower */

/* The tower: Conv3D split into two kernels plus its bias, a learned
 * position table (kept on the host: it is interpolated to each image's
 * grid there), fused QKV, LayerNorms with biases, a GELU MLP with biases,
 * the merger (v.post_ln + mm.0/mm.2) and one DeepStack merger per flagged
 * block (v.deepstack.<block>.{norm,fc1,fc2}, its norm over the 4 merged
 * rows). */
static const struct arch_tensor TOWER[] = {
    {"v.patch_embd.weight", ARCH_PRE, ARCH_FLOAT, 0, ARCH_LOAD_PATCH0, 4,
     {AD_P, AD_P, AD_3, AD_E}, 0},
    {"v.patch_embd.weight.1", ARCH_PRE, ARCH_FLOAT, 0, ARCH_LOAD_PATCH1, 4,
     {AD_P, AD_P, AD_3, AD_E}, 0},
    T1(ARCH_PRE, "v.patch_embd.bias", ARCH_VEC, 0, 0, AD_E, VV(patchb)),
    T2(ARCH_PRE, "v.position_embd.weight", ARCH_MAT, ARCH_HOST, ARCH_LOAD_TABLE, AD_E, AD_NPOS, 0),
    T1(ARCH_LAYER, "v.blk.%u.ln1.weight", ARCH_VEC, 0, 0, AD_E, VL(ln1)),
    T1(ARCH_LAYER, "v.blk.%u.ln1.bias", ARCH_VEC, 0, 0, AD_E, VL(ln1b)),
    T2(ARCH_LAYER, "v.blk.%u.attn_qkv.weight", ARCH_MAT, 0, ARCH_LOAD_QKV, AD_E, AD_E3, 0),
    T1(ARCH_LAYER, "v.blk.%u.attn_qkv.bias", ARCH_VEC, 0, ARCH_LOAD_QKV_BIAS, AD_E3, 0),
    T2(ARCH_LAYER, "v.blk.%u.attn_out.weight", ARCH_MAT, 0, 0, AD_E, AD_E, VL(wo)),
    T1(ARCH_LAYER, "v.blk.%u.attn_out.bias", ARCH_VEC, 0, 0, AD_E, VL(bo)),
    T1(ARCH_LAYER, "v.blk.%u.ln2.weight", ARCH_VEC, 0, 0, AD_E, VL(ln2)),
    T1(ARCH_LAYER, "v.blk.%u.ln2.bias", ARCH_VEC, 0, 0, AD_E, VL(ln2b)),
    T2(ARCH_LAYER, "v.blk.%u.ffn_up.weight", ARCH_MAT, 0, 0, AD_E, AD_F, VL(wu)),
    T1(ARCH_LAYER, "v.blk.%u.ffn_up.bias", ARCH_VEC, 0, 0, AD_F, VL(bu)),
    T2(ARCH_LAYER, "v.blk.%u.ffn_down.weight", ARCH_MAT, 0, 0, AD_F, AD_E, VL(wd)),
    T1(ARCH_LAYER, "v.blk.%u.ffn_down.bias", ARCH_VEC, 0, 0, AD_E, VL(bd)),
    T1(ARCH_POST, "v.post_ln.weight", ARCH_VEC, 0, 0, AD_E, VV(post)),
    T1(ARCH_POST, "v.post_ln.bias", ARCH_VEC, 0, 0, AD_E, VV(postb)),
    T2(ARCH_POST, "mm.0.weight", ARCH_MAT, 0, 0, AD_M, AD_M, VV(mm0)),
    T1(ARCH_POST, "mm.0.bias", ARCH_VEC, 0, 0, AD_M, VV(mm0b)),
    T2(ARCH_POST, "mm.2.weight", ARCH_MAT, 0, 0, AD_M, AD_O, VV(mm2)),
    T1(ARCH_POST, "mm.2.bias", ARCH_VEC, 0, 0, AD_O, VV(mm2b)),
    T1(ARCH_DEEPSTACK, "v.deepstack.%u.norm.weight", ARCH_VEC, 0, 0, AD_M, VD(nw)),
    T1(ARCH_DEEPSTACK, "v.deepstack.%u.norm.bias", ARCH_VEC, 0, 0, AD_M, VD(nb)),
    T2(ARCH_DEEPSTACK, "v.deepstack.%u.fc1.weight", ARCH_MAT, 0, 0, AD_M, AD_M, VD(w1)),
    T1(ARCH_DEEPSTACK, "v.deepstack.%u.fc1.bias", ARCH_VEC, 0, 0, AD_M, VD(b1)),
    T2(ARCH_DEEPSTACK, "v.deepstack.%u.fc2.weight", ARCH_MAT, 0, 0, AD_M, AD_O, VD(w2)),
    T1(ARCH_DEEPSTACK, "v.deepstack.%u.fc2.bias", ARCH_VEC, 0, 0, AD_O, VD(b2)),
};

/* clip.vision.is_deepstack_layers, one bool per block (the converter's
 * flags for deepstack_visual_indexes); absent = none. */
static int deepstack_layers(struct model_check *c)
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
        return model_check_bad_hparam(c, "clip.vision.is_deepstack_layers must have one entry "
                                         "per block");
    for (uint32_t i = 0; i < h->n_layer; i++) {
        int64_t b;
        if (gguf_array_i64(v, i, &b))
            return model_check_bad_hparam(c, "clip.vision.is_deepstack_layers entries must be "
                                             "booleans");
        if (!b)
            continue;
        if (h->n_deepstack >= GGUF_MAX_DEEPSTACK)
            return model_check_bad_hparam(c, "more than 8 DeepStack layers");
        h->deepstack_layers[h->n_deepstack++] = i;
    }
    return 0;
}

static int hparams(struct model_check *c)
{
    c->m->vision.use_silu = 0; /* GELU (tanh) MLP: the converter writes clip.use_gelu */
    return deepstack_layers(c);
}

/* The FFN width and the position table's side from the shapes. */
static int shapes(struct model_check *c)
{
    struct gguf_vision_hparams *h = &c->m->vision;
    const struct gguf_tensor_info *up = gguf_find_tensor(c->f, "v.blk.0.ffn_up.weight");
    const struct gguf_tensor_info *pe = gguf_find_tensor(c->f, "v.position_embd.weight");
    if (!up || up->n_dims != 2)
        return model_check_expect(c, "v.blk.0.ffn_up.weight", ARCH_MAT, 0, 2, h->n_embd, 0, 1,
                                  1, 0, NULL);
    if (!pe || pe->n_dims != 2)
        return model_check_expect(c, "v.position_embd.weight", ARCH_MAT, 1, 2, h->n_embd, 0, 1,
                                  1, 0, NULL);
    if (up->ne[1] == 0 || up->ne[1] > (1u << 20))
        return model_check_bad_hparam(c, "vision FFN width implausible");
    h->n_ff = (uint32_t)up->ne[1];
    uint64_t np = pe->ne[1], side = (uint64_t)sqrt((double)np);
    while (side * side > np)
        side--;
    while ((side + 1) * (side + 1) <= np)
        side++;
    if (np == 0 || side * side != np || side > 4096)
        return model_check_bad_hparam(c, "v.position_embd.weight must have a square number of "
                                         "rows");
    h->n_pos = (uint32_t)np;
    h->pos_side = (uint32_t)side;
    return 0;
}

/* Its preprocessing (16-px patches, so 32-px resize steps;
 * preprocessor_config min 65536 / max 16777216 pixels) and the pixel cap
 * of the plan in its own patches. */
static void pixels(const struct gguf_vision_hparams *h, uint32_t cfg_min, uint32_t cfg_max,
                   uint32_t max_image_tokens, struct prep_config *prep)
{
    uint32_t f = h->patch_size * 2;
    prep->patch = h->patch_size;
    prep->min_pixels = cfg_min ? cfg_min : 65536u;
    prep->max_pixels = cfg_max ? cfg_max : 16777216u;
    uint64_t plan_px = (uint64_t)max_image_tokens * f * f;
    if (prep->max_pixels > plan_px)
        prep->max_pixels = (uint32_t)plan_px;
    /* an upscale rounds each side up to 32 px: with the default min at most a
     * quarter of the plan that stays inside it (a min near the plan would
     * ask for more patches than planned and the page would be refused) */
    uint32_t min_cap = cfg_min ? prep->max_pixels : prep->max_pixels / 4;
    if (prep->min_pixels > min_cap)
        prep->min_pixels = min_cap;
}

static void describe_tower(FILE *out, const struct gguf_vision_hparams *h)
{
    fprintf(out, "qwen3vl       position table %ux%u, DeepStack after blocks", h->pos_side,
            h->pos_side);
    for (uint32_t j = 0; j < h->n_deepstack; j++)
        fprintf(out, " %u", h->deepstack_layers[j]);
    fputs(h->n_deepstack ? "\n" : " (none)\n", out);
}

static const char *const KEYS[] = {"clip.vision.is_deepstack_layers", NULL};

const struct arch_tower arch_qwen3vl_tower = {
    .projector = {"qwen3vl_merger"},
    .display = "Qwen3-VL",
    .json_name = "qwen3vl",
    .mlp_name = "gelu",
    .keys = KEYS,
    .hparams = hparams,
    .shapes = shapes,
    .tensors = TOWER,
    .n_tensors = sizeof TOWER / sizeof TOWER[0],
    .tower = &vis_family_qwen3vl,
    .norm_kind = 1,
    .act = OP_GELU_TANH,
    .prompt_no_system = 1,
    .pixels = pixels,
    .describe = describe_tower,
};
