/*
 * qwen3vl — the Qwen3-VL family (dense 2B/4B/8B/32B) in one place: what it
 * adds to folio's Qwen2-VL engine, called from small marked hooks in lm.c,
 * lm_forward.c, vision.c and vlm.c. The math is transformers'
 * modeling_qwen3_vl.py; the file layout is llama.cpp's converter
 * (conversion/qwen3vl.py: text architecture qwen3vl, projector
 * qwen3vl_merger), checked in gguf_model.c.
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
 * Vision (the Qwen3-VL tower, q3vis_*): patch 16 Conv3D with bias (the two
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
#include "engine/model/gguf_model.h"
#include "engine/vk/vkr.h"

#include <stdint.h>

struct lm;
struct lm_layer;
struct lm_seq;
struct vkr_cmd;
struct vkr_pipeline_key;

/* ---- text (lm hooks) ---- */
/* Pipelines the Qwen3-VL decoder adds (interleaved rope, DeepStack scatter). */
int q3_lm_keys(struct vkr_pipeline_key *out);
/* At lm_open once the plan is made: the DeepStack rows' arena. */
int q3_lm_open(struct lm *lm, struct folio_err *err);
void q3_lm_close(struct lm *lm);
/* Host side of a pass: the image rows of the prompts and their DeepStack
 * features, uploaded (none for a scoring pass). */
int q3_lm_stage(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq, int prefill,
                struct folio_err *err);
/* Per-head RMSNorm of q (nrows x n_head heads) and k (nrows x n_head_kv). */
int q3_lm_qk_norm(struct lm *lm, struct vkr_cmd *c, const struct lm_layer *L, struct vkr_tensor q,
                  struct vkr_tensor k, uint32_t nrows, struct folio_err *err);
/* After decoder layer `layer`: x[image rows] += DeepStack rows of that layer. */
int q3_lm_deepstack_add(struct lm *lm, struct vkr_cmd *c, uint32_t layer, uint32_t nrows,
                        struct folio_err *err);

/* ---- vision (vis hooks) ---- */
struct q3vis;
struct vis_config;
int q3vis_pipeline_keys(const struct vkr *vk, const struct gguf_model *m,
                        struct vkr_pipeline_key *out, int max);
int q3vis_open(struct vkr *vk, const struct gguf_model *m, const struct vis_config *cfg,
               struct q3vis **out, struct folio_err *err);
void q3vis_close(struct q3vis *v);
uint32_t q3vis_max_patches(const struct q3vis *v);
/* n_embd of the text model * (1 + n_deepstack): [main | ds0 | ds1 ...] */
uint32_t q3vis_out_dim(const struct q3vis *v);
void q3vis_memory(const struct q3vis *v, uint64_t *weights, uint64_t *activations);
double q3vis_last_submit_ms(const struct q3vis *v);
/* patches: grid_h*grid_w rows of 3*16*16 floats (prep_patches, temporal 1,
 * patch 16) in merge-group order; out: merged rows of q3vis_out_dim. */
int q3vis_encode(struct q3vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w,
                 float *out, struct folio_err *err);
/* The residual stream after the patch embedding + position embedding and
 * `blocks` blocks (n_patches x n_embd, merge-group order). */
int q3vis_encode_partial(struct q3vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w,
                         uint32_t blocks, float *x, struct folio_err *err);

/* ---- synthetic shapes (benchmarks, tests) ---- */
struct lm_synth;
struct vis_synth;
/* Random-weight Qwen3-VL-8B (text 4096 x 36 layers, 32 x 128 heads / 8 KV,
 * FFN 12288, vocab 151936, 3 DeepStack layers, untied; tower 1152 x 27,
 * 16 heads, FFN 4304, 48 x 48 position table, DeepStack after blocks 8,
 * 16, 24) or a small one (small != 0). Either pointer may be NULL; fields
 * other than the shape (types, seeds) are left for the caller. */
void q3_synth_shapes(int small, struct lm_synth *ls, struct vis_synth *vs);

/* The learned position table (side x side rows of d floats) bilinearly
 * interpolated to a gh x gw patch grid as transformers'
 * fast_pos_embed_interpolate (align-corners linspace over the table),
 * written in 2x2 merge-group order: out gh*gw rows of d. Exposed for tests. */
void q3_pos_interpolate(const float *table, uint32_t side, uint32_t d, uint32_t gh, uint32_t gw,
                        float *out);

#endif
