/*
 * qwen3vl — the Qwen3-VL family (dense 2B/4B/8B/32B) in one folder
 * (engine/arch/qwen3vl/), behind its descriptors (engine/arch/arch.h):
 *  - qwen3vl.c: detection, the text key table, the tensor tables, the
 *    tower's hyper-parameter and shape hooks, its preprocessing and what
 *    `folio doctor` prints;
 *  - text.c: the decoder hooks the generic lm calls through the descriptor;
 *  - vision.c: the tower's family table of the vision skeleton
 *    (tower_internal.h).
 * The math is transformers' modeling_qwen3_vl.py; the file layout is
 * llama.cpp's converter (conversion/qwen3vl.py: text architecture qwen3vl,
 * projector qwen3vl_merger). Private to engine/arch/ (the registry, arch.c),
 * tests aside.
 *
 * Text (a Qwen3 decoder):
 *  - q and k are RMS-normalised per head (weights of one head size) after
 *    the projections, before RoPE; no q/k/v biases;
 *  - the head size is its own (attention.key_length): heads x head_dim need
 *    not equal the width;
 *  - interleaved M-RoPE (OP_ROPE_IMROPE);
 *  - DeepStack: the output of decoder layer l < n_deepstack gets, at each
 *    image-token row, the l-th DeepStack feature of that token added. The
 *    vision tower hands them over as extra columns of each image row
 *    (llama.cpp's layout): an embedding row is n_embd * (1 + n_deepstack)
 *    wide, [main | ds0 | ds1 | ...]; lm_seq.embd rows have that width.
 *
 * Vision (the Qwen3-VL tower, reached through vision.h's vis_*): patch 16 Conv3D with bias (the two
 * temporal kernels folded for still images), learned position embeddings
 * bilinearly interpolated to the patch grid on the host (one grid cached),
 * blocks of LayerNorm -> fused QKV (split at load) -> 2-D RoPE -> full
 * attention -> projection -> LayerNorm -> GELU(tanh) MLP, DeepStack
 * mergers after flagged blocks (LayerNorm over the 4 merged rows, GELU(erf)
 * MLP), the final merger (LayerNorm per patch, GELU(erf) MLP).
 */
#ifndef FOLIO_QWEN3VL_H
#define FOLIO_QWEN3VL_H

#include "common/common.h"
#include "engine/arch/arch.h"
#include "engine/model/gguf_model.h"
#include "engine/vk/vkr.h"

#include <stdint.h>

struct lm;
struct lm_layer;
struct lm_seq;
struct vkr_cmd;
struct vkr_pipeline_key;

extern const struct arch_text arch_qwen3vl_text;
extern const struct arch_tower arch_qwen3vl_tower;
extern const struct vis_family vis_family_qwen3vl; /* vision.c */

/* ---- text (lm hooks, text.c) ---- */
/* Pipelines the Qwen3-VL hooks add (q/k norm, DeepStack gather, scatter and add;
 * the interleaved rope is the generic list's, from rope_mode). */
int q3_lm_keys(struct vkr_pipeline_key *out);
/* At lm_open once the plan is made: the DeepStack rows' arena. */
int q3_lm_open(struct lm *lm, struct folio_err *err);
void q3_lm_close(struct lm *lm);
/* Host side of a pass: the image rows of the prompts and their DeepStack
 * features, uploaded (none for a scoring pass). */
int q3_lm_stage(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq, int prefill,
                struct folio_err *err);
/* Per-head RMSNorm of q (nq rows x n_head heads) and k (nk rows x n_head_kv). */
int q3_lm_qk_norm(struct lm *lm, struct vkr_cmd *c, const struct lm_layer *L, struct vkr_tensor q,
                  uint32_t nq, struct vkr_tensor k, uint32_t nk, struct folio_err *err);
/* After decoder layer `layer`: x[image rows] += DeepStack rows of that layer. */
int q3_lm_deepstack_add(struct lm *lm, struct vkr_cmd *c, uint32_t layer, uint32_t nrows,
                        struct folio_err *err);


/* The learned position table (side x side rows of d floats) bilinearly
 * interpolated to a gh x gw patch grid as transformers'
 * fast_pos_embed_interpolate (align-corners linspace over the table),
 * written in 2x2 merge-group order: out gh*gw rows of d. Exposed for tests. */
void q3_pos_interpolate(const float *table, uint32_t side, uint32_t d, uint32_t gh, uint32_t gw,
                        float *out);

#endif
