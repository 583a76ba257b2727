/*
 * vlm — the vision-language engine of a worker: one page image and a label
 * set in, a label distribution out (docs/DESIGN.md §6.4, tier 1), plus what a
 * worker needs around it to be trusted on a real driver:
 *
 *  open:  Vulkan device -> driver gate (a built-in table of known-bad
 *         drivers plus rules from a file; a match disables the vision path
 *         before any of its pipelines is created, or the whole GPU) ->
 *         models loaded, memory planned for the largest allowed page ->
 *         every pipeline pre-warmed (on-disk cache when configured), then
 *         the registry is sealed -> a warm-up pass of the whole path on a
 *         dummy page -> a known-answer self-test of small ops against their
 *         C references on this device (a failure disables the vision path
 *         with the numbers). Each step is timed in the report.
 *  classify: preprocess (smart resize: a page larger than planned is
 *         downscaled, never refused) -> vision tower -> chat prompt with
 *         the image tokens expanded and 3-D positions -> one fused LM pass
 *         scoring every label -> softmax over labels.
 *  faults: a lost device (or any fatal Vulkan error) marks the vlm dead;
 *         every later call fails with FOLIO_EDEVICELOST, so the caller
 *         falls back for the batch, closes it and re-opens after
 *         vlm_backoff_ms(). Test builds inject a loss with
 *         FOLIO_FAULT=device_lost:N (the N-th classify of an instance).
 *         Over two devices (vlm_config.device "A,B") either one lost
 *         kills the engine, and the re-open opens both again.
 *
 * The OCR-text tier uses the same text model: vlm_classify_text.
 */
#ifndef FOLIO_VLM_H
#define FOLIO_VLM_H

#include "common/common.h"
#include "engine/vlm_gate.h" /* the driver gate vlm_open runs (vlm_config.gate_rules) */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct vlm;
struct vkr;
struct vkr_device_info;
struct gguf_text_hparams;
struct gguf_vision_hparams;

/* ---- engine ---- */
struct vlm_config {
    const char *model_path;    /* text GGUF (required) */
    const char *mmproj_path;   /* vision projector; NULL = no vision path */
    /* vkr selector; NULL = first GPU. "A,B" (two selectors): one model over
     * both devices, the vision tower and the first text layers on A, the
     * other layers on B (lm_open_split: the memory planner's split); the
     * same device named twice opens two logical devices. */
    const char *device;
    int allow_cpu;
    int validate;              /* as vkr_config (-1 = $FOLIO_VK_VALIDATE) */
    const char *cache_dir;     /* as vkr_config */
    uint32_t max_image_tokens; /* merged tokens of the largest page planned; 0 = 1600 */
    uint32_t max_pixels, min_pixels; /* preprocessing; 0 = 12845056 / 3136 (capped by the plan) */
    uint32_t max_labels;       /* 0 = 32 */
    uint32_t max_label_tokens; /* 0 = 16 */
    uint32_t max_text_tokens;  /* the OCR-text tier's prompt room; 0 = 1024 */
    const char *gate_file;     /* extra driver-gate rules; NULL = built-ins only */
    const char *gate_rules;    /* the same as text (tests) */
    int skip_warmup;           /* tests that time nothing */
    int f32_matmul;            /* vision matmuls without f16 staging */
    int gpu_weights;           /* 0 auto, 1 f16, 2 native (enum ops_gpu_weights) */
    /* Largest n vlm_classify_batch takes; memory for that many pages of
     * max_image_tokens is planned at open. 0 = chosen from the device
     * memory plan (vlm_max_batch says what was chosen). */
    uint32_t max_batch;
};

struct vlm_report {
    double vk_ms, load_ms, prewarm_ms, warmup_ms, selftest_ms, total_ms;
    int vision_enabled;
    char vision_reason[256];   /* why it is off ("" when on) */
    char device[256], driver[96];
    uint32_t pipelines;
    int cache_hit;             /* as vkr_stats */
    uint64_t weights_bytes, activation_bytes;
    uint32_t max_image_tokens;
    uint32_t max_batch;
    uint32_t devices;          /* 1, or 2 with --device A,B */
    uint32_t split_layer;      /* two devices: the first text layer on the second */
};

#define VLM_MAX_DEVICES 2

/* Opens the engine. A gate rule for the whole GPU, or an unusable text
 * model, fails (FOLIO_EUNSUPPORTED / the loader's code) with the reason:
 * the caller runs without the GPU tiers. A vision problem (no mmproj, a
 * gate rule, a failed self-test or tower load) only disables vision. */
int vlm_open(const struct vlm_config *cfg, struct vlm **out, struct folio_err *err);
/* The warm-up's page passes, in order (vlm_open runs them after a short
 * text; `bench engine` times the same ones and then checks that its timed
 * passes meet no variant they missed): square pages of `side` pixels,
 * `pages` of them in one pass, each scored against `labels` labels. For a
 * tower whose merged token covers merge_px pixels a side, pages of at most
 * max_side pixels a side, passes of at most max_batch pages and at most
 * max_labels labels; the tall pass's pages have at least min_rows merged
 * tokens each besides the kernels' own row classes (where the plan allows:
 * the caller's attention past one binding). Returns the count (at most
 * VLM_WARM_MAX). */
#define VLM_WARM_MAX 16
/* The merged tokens a page needs for both models' attention to run in
 * ranges (attn_lse, attn_merge: its output past one binding; devices with a
 * small maxStorageBufferRange, and the range64k tests, reach it): the
 * warm-up's min_rows, so that those pipelines are met before the first job
 * wherever a planned pass can meet them. */
uint32_t vlm_warm_split_rows(const struct vkr *vk, const struct gguf_text_hparams *th,
                             const struct gguf_vision_hparams *vh);
struct vlm_warm_pass {
    uint32_t side, pages, labels;
    int unsplit; /* the text model's GEMMs with K unsplit and the int8 GEMM's tiles of
                    long prompts (lm_set_gemm_split): OP_MM_TILES_WIDE or _TALL */
};
int vlm_warm_plan(const struct vkr *vk, uint32_t merge_px, uint32_t max_side, uint32_t max_batch,
                  uint32_t max_labels, uint32_t min_rows, struct vlm_warm_pass *out);
void vlm_close(struct vlm *v);
const struct vlm_report *vlm_report(const struct vlm *v);
int vlm_vision_enabled(const struct vlm *v);
int vlm_dead(const struct vlm *v);
/* Delay before re-open attempt `failures` (1, 2, ...): 0.5 s doubling to 60 s. */
uint32_t vlm_backoff_ms(int failures);
/* The OCR-text tier on this engine's text model and tokenizer: one
 * document's text among nl label names (lm_text_classify: token_budget 0
 * = as many tokens as the prompt allows). out's prob/logprob pointers are
 * the caller's (or NULL). */
struct lm_text_result;
int vlm_classify_text(struct vlm *v, const char *text, const char *const *names, uint32_t nl,
                      uint32_t token_budget, struct lm_text_result *out, struct folio_err *err);
struct vkr *vlm_vkr(struct vlm *v);   /* the first device's runtime */
/* Pipelines requested after seal, summed over the engine's devices (must stay 0). */
uint64_t vlm_requests_after_seal(const struct vlm *v);

struct vlm_page {
    const uint8_t *pixels;
    uint32_t width, height;
    size_t stride;
    int channels;              /* 1 or 3 */
};

struct vlm_result {
    int best;
    double confidence;
    double *prob, *logprob;    /* caller's arrays of nl, or NULL */
    int32_t *prompt_ids;       /* malloc'd: the prompt with image tokens expanded */
    uint32_t n_prompt, image_tokens, grid_h, grid_w, width, height;
    int downscaled;            /* smart resize shrank the page to the plan */
    double preprocess_ms, vision_ms, lm_ms, total_ms;
};
void vlm_result_free(struct vlm_result *r);

/* Classifies one page among nl labels (each scored as the answer followed
 * by <|im_end|>). FOLIO_EDEVICELOST: the vlm is dead (see above). */
/* Whether a label set can be scored at all: every label's continuation
 * within max_label_tokens and at most max_labels labels. Callers check
 * once when a label set is loaded, so that a long label is refused with
 * its name and token count instead of failing every document. */
int vlm_check_labels(const struct vlm *v, const char *const *labels, uint32_t nl,
                     struct folio_err *err);
int vlm_classify(struct vlm *v, const struct vlm_page *page, const char *const *labels,
                 uint32_t nl, struct vlm_result *out, struct folio_err *err);

/* ---- several pages per GPU pass ----
 * vlm_classify is vlm_prepare + vlm_classify_batch of one page. A worker
 * prepares pages on its CPU threads and hands up to vlm_max_batch of them
 * to one GPU pass. */

/* One page made ready on the CPU (smart resize, patches, prompt with the image tokens
 * expanded, label continuations). Any thread, concurrently with other vlm_prepare calls
 * and with a running vlm_classify_batch: it reads only state fixed at open. */
struct vlm_prepared;
int vlm_prepare(struct vlm *v, const struct vlm_page *page, const char *const *labels,
                uint32_t nl, struct vlm_prepared **out, struct folio_err *err);
void vlm_prepared_free(struct vlm_prepared *p);
/* Largest n vlm_classify_batch takes (planned at open: vlm_config.max_batch, 0 = chosen
 * from the device memory plan). */
uint32_t vlm_max_batch(const struct vlm *v);
/* One GPU pass over n (1..vlm_max_batch) prepared pages; out[i] is page i's result
 * (caller sets out[i].prob/logprob arrays or NULL as for vlm_classify). 0 = the pass ran.
 * Non-zero = the whole pass failed (FOLIO_EDEVICELOST: the vlm is dead, as today).
 * Timings: preprocess_ms is the page's own; vision_ms and lm_ms are the page's share
 * (pass time / n). */
int vlm_classify_batch(struct vlm *v, struct vlm_prepared *const *pages, uint32_t n,
                       struct vlm_result *out, struct folio_err *err);

/* Known-answer tests of small ops against their C references on this
 * device (the pipelines the loaded models use). 0 = pass; else the first
 * failure with the op and numbers. Called by vlm_open. */
int vlm_selftest(struct vlm *v, struct folio_err *err);

/* One JSON object (no newline): the report, for `folio doctor` and logs. */
int vlm_report_json(const struct vlm *v, char *buf, size_t n);

#endif
