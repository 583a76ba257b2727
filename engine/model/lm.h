/*
 * lm — the text decoder of every family (engine/arch/: what differs is in
 * its hooks) on folio's Vulkan ops (the Qwen2.5-VL reference:
 * docs/reference/qwen25vl.md §4): prefill with a KV cache, logits only where needed, and
 * label scoring. It is both the language half of the vision path (image
 * embedding rows are spliced into a sequence) and the OCR-text tier's whole
 * model.
 *
 * Life cycle: lm_pipeline_keys() -> vkr_prewarm() -> lm_open() ->
 * vkr_seal() (or open first and seal after; lm never creates a pipeline
 * that is not in its key list). lm_open uploads every device tensor into a
 * weights arena and plans one activation arena for cfg.max_tokens per
 * sequence and cfg.batch sequences: nothing is allocated per request.
 *
 * A forward pass is one command buffer, one submit, one fence. Batches are
 * ragged: the sequences' rows are concatenated and attention is restricted
 * per query to its own sequence's earlier keys.
 *
 * Label scoring: every label is a token sequence that starts at the same
 * position, right after its prompt. Each label's tokens attend to the whole
 * prompt (its cached K/V, shared, never recomputed) and to the label's own
 * earlier tokens only — so labels sharing leading tokens cannot see each
 * other. score(label) = sum over its tokens of log p(token | prompt, earlier
 * label tokens); the distribution is the softmax of the scores over labels.
 */
#ifndef FOLIO_LM_H
#define FOLIO_LM_H

#include "common/common.h"
#include "engine/model/gguf_model.h"
#include "engine/vk/vkr.h"

#include <stdint.h>
#include <stdio.h>

struct lm;

struct lm_config {
    uint32_t max_tokens;       /* per sequence (prompt rows); 0 = 2048 */
    uint32_t batch;            /* sequences per forward; 0 = 1 */
    uint32_t max_labels;       /* labels per scoring call; 0 = 32 */
    uint32_t max_label_tokens; /* tokens per label; 0 = 16 */
    /* Size the logits buffer for every prompt position of a full batch
     * (parity tests); otherwise only last positions and label rows. */
    int all_logits;
    /* Split-K shares of the label rows' attention (op_attention.splits):
     * 0 = the device's choice (1 where it does not say its multiprocessor
     * count, as lavapipe); tests force several to run the merge. */
    uint32_t attn_splits;
    /* Use the op library's own kernel pick for every matmul instead of
     * the tensor-core kernel from 9 rows up (benchmarks compare both). */
    int op_auto_kernels;
    /* enum ops_gpu_weights: matrices expanded to f16 at load (auto = when
     * the tensor-core GEMM exists and they fit), kept as stored, or made
     * int8 rows for the int8 GEMM (int8). */
    int gpu_weights;
    /* Rows per MLP chunk; 0 = as many as one device block holds (tests set
     * it low to run the chunked MLP). */
    uint32_t ffn_rows;
    /* lm_open_split over two devices: layers [0, split_layer) on the first;
     * 0 = the memory planner's choice. */
    uint32_t split_layer;
};

/* Every pipeline lm_open's model can ask for on this device with
 * lm_config.gpu_weights = gpu_weights (matmul kernels for the weight types
 * in m or the form they take, gathers, norms, rope, attention for the head
 * size, element-wise ops). Returns the count (<= max; a list longer than max
 * is logged as an error: pass LM_PIPELINE_KEYS_MAX). */
#define LM_PIPELINE_KEYS_MAX 192
int lm_pipeline_keys(const struct vkr *vk, const struct gguf_model *m, int gpu_weights,
                     struct vkr_pipeline_key *out, int max);

/* Opens the text model m (from gguf_model_open_text / gguf_model_check; not
 * owned, must outlive the lm: token_embd rows are read from its mapping). */
int lm_open(struct vkr *vk, const struct gguf_model *m, const struct lm_config *cfg,
            struct lm **out, struct folio_err *err);
/* ---- one model over several devices ----
 * Layers [0, s) on vks[0] and [s, n_layer) with the LM head on vks[1]
 * (n = 2), each device with its own weights arena, activations and the KV
 * cache of its layers; a pass records and submits device by device and
 * hands the residual stream rows on through host staging. s is
 * cfg.split_layer or, when 0, the planner's: per-device needs (weights,
 * KV, activations) against vkr_room() of each, balanced so both keep the
 * same share of room. Qwen3-VL's DeepStack layers stay on the first
 * device. Fails with FOLIO_ENOMEM naming both devices' rooms and needs
 * when no split fits. n = 1 is lm_open. Every vks[i] must be pre-warmed
 * with lm_pipeline_keys(vks[i], m). */
#define LM_MAX_DEVICES 2
int lm_open_split(struct vkr *const *vks, uint32_t n, const struct gguf_model *m,
                  const struct lm_config *cfg, struct lm **out, struct folio_err *err);
struct lm_device_plan {
    const struct vkr *vk;
    uint32_t l0, l1;           /* layers on this device */
    int head;                  /* holds the LM head */
    uint64_t room;             /* vkr_room() when planned */
    uint64_t need;             /* the planner's estimate */
    uint64_t weights, activations; /* placed: weights arena used, activation plan */
};
/* The devices of the model (1 or 2); fills at most max plans. */
uint32_t lm_devices(const struct lm *lm, struct lm_device_plan *out, uint32_t max);

/* Whether the f16 data path runs (every layer matrix on the tensor-core
 * GEMM), and how many layers run Q/K/V as one product: for tests and the
 * open log. */
void lm_paths(const struct lm *lm, int *f16_path, uint32_t *qkv_fused);
/* 1 where token rows are dequantized on the device from their raw
 * token_embd rows (one gather per pass); 0 where the host dequantizes them
 * (a type without a gather, or FOLIO_LM_EMBED=host). For tests and the
 * open log. */
int lm_embed_gpu(const struct lm *lm);

/* Same, opening and owning the file. */
int lm_open_file(struct vkr *vk, const char *path, const struct lm_config *cfg, struct lm **out,
                 struct folio_err *err);
void lm_close(struct lm *lm);
/* Plans the activations again for `batch` sequences per forward (the
 * weights stay): vlm_open sizes its batch from the batch-1 plan. On
 * failure the lm is back on its previous plan and the error says why;
 * were even that to fail, the error is the second one and the lm must be
 * closed. */
int lm_replan(struct lm *lm, uint32_t batch, struct folio_err *err);
const struct gguf_text_hparams *lm_hparams(const struct lm *lm);
/* K slices of every GEMM of the next passes (op_matmul.split_k): 0 AUTO
 * (the default), 1 never split. The warm-up runs one pass unsplit: a
 * product splits K only while its output tiles leave multiprocessors
 * idle, so the unsplit forms of the few-row tiles appear at batch sizes
 * the warm-up does not run (H100, batch 8: the V projection's). With
 * i8_tiles OP_MM_TILES_WIDE the int8 GEMM takes the tiles of products of
 * many output tiles at any row count, with OP_MM_TILES_TALL its 160-row
 * tiles (op_matmul.i8_tiles): long prompts take them, a warm-up pass of
 * a few hundred rows would not. */
void lm_set_gemm_split(struct lm *lm, uint32_t split_k, int i8_tiles);
/* Device bytes of weights and of the planned activations. */
void lm_memory(const struct lm *lm, uint64_t *weights, uint64_t *activations);

/* One prompt. Text tokens index token_embd; a row whose token is negative
 * takes its embedding from embd (n rows of n_embd * (1 + n_deepstack) f32,
 * e.g. vision-tower outputs; Qwen3-VL's DeepStack features follow the main
 * embedding in each row, engine/arch/qwen3vl/qwen3vl.h).
 * pos: NULL for text-only positions 0..n-1, else n x 3 int32 (t, h, w)
 * M-RoPE positions (docs/reference/qwen25vl.md §4.3) with next_pos the first position
 * after the prompt (where labels start).
 * dev: with embd NULL, the rows whose token is negative take, in order,
 * rows dev_row0, dev_row0 + 1, ... of the device tensor *dev (n_embd
 * floats each; vis_rows: the vision tower's output where it ran), copied
 * on the device at the start of the pass: no trip through the host. The
 * tensor must be on the text model's device (one device, no DeepStack
 * rows), and the sequences of a pass that use it must take consecutive
 * rows of one tensor. The copy is op_scatter, whose pipeline is the
 * tower's (vis_pipeline_keys), not lm_pipeline_keys'. */
struct lm_seq {
    const int32_t *tokens;
    uint32_t n;
    const float *embd;
    const int32_t *pos;
    int32_t next_pos;
    const struct vkr_tensor *dev;
    uint32_t dev_row0;
};

struct lm_label {
    const int32_t *tokens;
    uint32_t n;                /* >= 1 */
};

/* Prefill nseq prompts (one submission). The KV cache then holds them for
 * lm_score. logits: NULL, or sum(n) x n_vocab floats: the logits at every
 * prompt position (needs cfg.all_logits). */
int lm_prefill(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq, float *logits,
               struct folio_err *err);

/* Scores nl labels after each prompt of the last lm_prefill, in one pass
 * that reads the prompts' cached K/V. logprob: nseq x nl, the sum of each
 * label's token log-probabilities after each prompt. */
int lm_score(struct lm *lm, const struct lm_label *labels, uint32_t nl, double *logprob,
             struct folio_err *err);

/* Prefill and label scoring fused into one submission: the label rows ride
 * along in the prompts' matmuls. logprob as lm_score; prob (nseq x nl, may
 * be NULL) the softmax over labels; best (nseq, may be NULL) the argmax. */
int lm_classify(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq,
                const struct lm_label *labels, uint32_t nl, double *logprob, double *prob,
                int *best, struct folio_err *err);

/* softmax over n label scores (max-subtracted, double). */
void lm_label_softmax(const double *logprob, uint32_t n, double *prob, int *best);

/* GPU milliseconds of the last pass's dispatches by label (timestamps on),
 * wall milliseconds of the last submit. */
double lm_last_submit_ms(const struct lm *lm);

/* ---- the OCR-text tier ---- */
struct tok;
struct lm_text_result {
    int best;                  /* index into the labels */
    double confidence;         /* probability of best */
    double *prob;              /* caller's array of nl, or NULL: the distribution */
    double *logprob;           /* caller's array of nl, or NULL: summed token log-probs */
    uint32_t prompt_tokens;
    int truncated;             /* the OCR text was cut to fit the budget */
};
/* Classifies ndoc OCR texts (lens NULL: NUL-terminated) among nl label
 * names with the text-only chat prompt ("Classify this document. Answer
 * with one label: a, b, c." + the text cut to token_budget tokens, 0 = as
 * many as --max-tokens allows); each label is scored as the answer
 * followed by <|im_end|>. Batches of cfg.batch documents share one
 * forward. out: ndoc results (set prob/logprob pointers first or NULL).
 * tok: the tokenizer of the same GGUF (tok_load). */
int lm_text_classify(struct lm *lm, const struct tok *tok, const char *const *texts,
                     const size_t *lens, uint32_t ndoc, const char *const *labels, uint32_t nl,
                     uint32_t token_budget, struct lm_text_result *out, struct folio_err *err);

#endif
