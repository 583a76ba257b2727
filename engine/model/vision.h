/*
 * vis — the vision tower of every family (engine/arch/; the Qwen2.5-VL
 * reference: docs/reference/qwen25vl.md §3) on folio's Vulkan ops: patch
 * rows in, the LM's image-token embeddings out.
 *
 * Life cycle, as lm: vis_pipeline_keys() -> vkr_prewarm() -> vis_open() ->
 * vkr_seal(). vis_open uploads the weights into their own arena and plans
 * one activation arena for cfg.max_patches: an image never allocates.
 *
 * One vis_encode is one command buffer, one submit:
 *   patch embedding (the two temporal kernels summed at load: a still image
 *   is two identical frames, so K0·x + K1·x = (K0+K1)·x exactly, at half the
 *   FLOPs) -> blocks (norm, Q/K/V with biases, vision 2-D RoPE, attention
 *   over the block's window or the whole image, output projection,
 *   residual, norm, SwiGLU (2.5) or quick-GELU (2) MLP, residual) ->
 *   merger (norm per patch, 4 patches concatenated, GELU MLP) ->
 *   un-reordering into raster order of the merged grid.
 *
 * Families: Qwen2-VL and Qwen2.5-VL (engine/arch/qwen2vl/), Qwen3-VL
 * (engine/arch/qwen3vl/: patch 16, position table, DeepStack rows as
 * extra output columns) are one tower skeleton (tower_internal.h,
 * vision.c) with a descriptor each of what their blocks do differently
 * (engine/arch/arch.h); every function here serves all of them, batches
 * included.
 *
 * Input: the resized page's bytes (vis_image.rgb), turned into patch rows
 * in the tower's order on the device (op_patchify, the pass's first
 * dispatch), or f32 patch rows from the host (tests, tools).
 *
 * Window layout (Qwen2.5-VL): the patch rows go in window order (whole
 * 2x2 groups move: op_patchify writes them so, or the host copies f32
 * rows so), with their (row, col) RoPE
 * positions and each row's window as a key range [lo, hi) for the
 * attention kernel, so window layers are block-diagonal attention with no
 * N x N mask; full layers pass no ranges. The merger's rows come out in
 * window order and one scatter puts them back in raster order.
 */
#ifndef FOLIO_VISION_H
#define FOLIO_VISION_H

#include "common/common.h"
#include "engine/model/gguf_model.h"
#include "engine/vk/vkr.h"

#include <stdint.h>
#include <stdio.h>

struct vis;

struct vis_config {
    uint32_t max_patches;  /* largest image, in 14-px patches; 0 = 6400 (1600 tokens) */
    /* Keep activations in f32 through every matmul (no f16 staging in the
     * tensor-core kernel): the residual stream of real towers outgrows f16
     * (docs/reference/qwen25vl.md §7.14). Default 0 = the op library's pick. */
    int f32_matmul;
    int gpu_weights; /* enum ops_gpu_weights, as lm_config */
    /* Images per vis_encode_batch; 0 = 1. max_patches is then the batch's
     * total. */
    uint32_t max_images;
    /* Rows per MLP chunk; 0 = as many as one device block holds (tests set
     * it low to run the chunked MLP). */
    uint32_t ffn_rows;
};

/* Every pipeline vis_open's model can ask for on this device. Returns the
 * count (<= max; a list longer than max is logged as an error: pass
 * VIS_PIPELINE_KEYS_MAX). */
#define VIS_PIPELINE_KEYS_MAX 160
int vis_pipeline_keys(const struct vkr *vk, const struct gguf_model *m,
                      struct vkr_pipeline_key *out, int max);

/* m: from gguf_model_open_vision (not owned; must outlive the vis). */
int vis_open(struct vkr *vk, const struct gguf_model *m, const struct vis_config *cfg,
             struct vis **out, struct folio_err *err);
int vis_open_file(struct vkr *vk, const char *path, const struct vis_config *cfg,
                  struct vis **out, struct folio_err *err);
void vis_close(struct vis *v);
/* Plans the activations again (the weights stay) for max_patches in
 * batches of up to max_images; on failure back on the old plan (as
 * lm_replan). */
int vis_replan(struct vis *v, uint32_t max_patches, uint32_t max_images, struct folio_err *err);
const struct gguf_vision_hparams *vis_hparams(const struct vis *v);
uint32_t vis_max_patches(const struct vis *v);
/* Width of each output row (the LM's embedding width). */
uint32_t vis_out_dim(const struct vis *v);
void vis_memory(const struct vis *v, uint64_t *weights, uint64_t *activations);

/* Encodes one image: patches = grid_h*grid_w rows of 3 x patch x patch
 * floats (588 for patch 14, 768 for Qwen3-VL's 16: the folded still-image
 * layout, prep_patches temporal 1) in merge-group order; out =
 * (grid_h/2)(grid_w/2) rows of vis_out_dim floats in raster order of the
 * merged grid. */
int vis_encode(struct vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w, float *out,
               struct folio_err *err);

/* Several images in one pass (one command buffer, one submit): the
 * images' patch rows are concatenated; window layers attend within each
 * image's windows, full layers within each image (per-row key ranges: no
 * attention across images), RoPE positions per image, the merger over all
 * rows. Each image's merged rows land in its own out. 1..max_images
 * images with at most max_patches patches together. */
struct vis_image {
    const float *patches;      /* as vis_encode; NULL where rgb is given */
    uint32_t grid_h, grid_w;
    float *out;                /* (grid_h/2)(grid_w/2) x vis_out_dim floats; NULL: left on
                                * the device (vis_rows) */
    /* Instead of patches: the resized page itself, grid_h x grid_w patches
     * of 8-bit RGB (prep_image_resize: rows packed, 3 bytes a pixel). It
     * goes up as it is (a quarter of the f32 rows' bytes) and the patch
     * rows are made on the device (op_patchify), normalised with the
     * tower's image_mean / image_std: the rows prep_patches would give,
     * bit for bit. The engine's path; patches stay for tests and tools. */
    const uint8_t *rgb;
};
int vis_encode_batch(struct vis *v, const struct vis_image *images, uint32_t n,
                     struct folio_err *err);
/* The device tensor holding the last pass's merged rows (the images' rows
 * in order, vis_out_dim floats each) until the next pass: 1, or 0 where the
 * rows have DeepStack columns and only reach the host whole (or where
 * FOLIO_VIS_ROWS=host asks for the trip through the host, for
 * comparisons). The text model can take them from there (lm_seq.dev)
 * with no trip through the host. */
int vis_rows(const struct vis *v, struct vkr_tensor *rows);

/* Debugging and parity: run only the patch embedding and the first
 * `blocks` blocks (no merger), and copy the residual stream (n_patches x
 * n_embd, in the tower's sequence order: window order for 2.5) to x. */
int vis_encode_partial(struct vis *v, const float *patches, uint32_t grid_h, uint32_t grid_w,
                       uint32_t blocks, float *x, struct folio_err *err);

/* The window order (docs/reference/qwen25vl.md §3.3) of a merged grid: idx[i] = raster
 * merged index of the i-th merged token in window order (identity when
 * win == 0); seg (may be NULL) gets each window's merged-token count and
 * *nseg the number of windows. Exposed for tests. */
void vis_window_index(uint32_t rows, uint32_t cols, uint32_t win, int32_t *idx, uint32_t *seg,
                      uint32_t *nseg);

/* GPU milliseconds (timestamps on) or wall milliseconds of the last
 * submit. */
double vis_last_submit_ms(const struct vis *v);

#endif
