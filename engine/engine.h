/*
 * engine — pixels in, labels out. Knows nothing of jobs, files or
 * PostgreSQL (docs/DESIGN.md §6). This header is the engine's public API, the
 * tools' too (the doctor below); the Vulkan runtime (engine/vk), ops and
 * model code have their own headers that only the engine, its benches
 * (bench/engine) and its tests include.
 */
#ifndef FOLIO_ENGINE_H
#define FOLIO_ENGINE_H

#include "common/common.h"

#include <stdio.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Vulkan header version the engine was compiled against, "1.3.239". */
const char *engine_vulkan_header_version(void);

/* ===================================================================
 * Classification (docs/DESIGN.md §6.4). One API for every tier: the caller
 * describes a document and how to get its text; the engine walks the
 * fallback chain (vision → OCR text + LM → OCR text + keyword rules),
 * records which tier answered and why the higher ones were skipped:
 * vision and OCR text + LM (tiers.c, when a model is open), the learned
 * classifier (learned.c, when one is loaded; it abstains rather than
 * guess, classify.c's text_floor says when), then the keyword rules.
 * =================================================================== */

#define ENGINE_LABEL_MAX 64
#define ENGINE_UNKNOWN_LABEL "unknown"

/* The label set: names plus the keywords the rules tier looks for. */
struct engine_labels;
struct engine_labels *engine_labels_new(void);
void engine_labels_free(struct engine_labels *l);
/* Adds a label; keywords may be NULL/0. Names longer than
 * ENGINE_LABEL_MAX bytes are refused (FOLIO_EINVAL). */
int engine_labels_add(struct engine_labels *l, const char *name, const char *const *keywords,
                      int n_keywords, struct folio_err *err);
int engine_labels_count(const struct engine_labels *l);
const char *engine_labels_name(const struct engine_labels *l, int i);

/* The document's text, produced on demand by the caller (the engine has no
 * OCR of its own: Tesseract lives in folio_ocr so engine-only builds need
 * none). */
struct engine_text {
    char *text;             /* UTF-8, malloc'd by the provider; the engine frees it */
    double confidence;      /* OCR mean word confidence 0..100; < 0 when unknown */
    int orientation;        /* of the first page, degrees turned upright (0/90/180/270) */
    int pages_read;         /* pages that produced text */
    int pages_skipped;      /* beyond the page cap */
    int pages_timed_out;    /* stopped by the per-page deadline */
    int pages_text_cut;     /* pages whose text was cut to the per-page byte cap */
    size_t text_bytes_cut;  /* bytes dropped from read pages by the page and document caps */
    int text_doc_cut;       /* the document's byte cap was reached (later pages unread) */
    double ms;              /* time spent producing it (decode + OCR) */
    double decode_ms, ocr_ms;
};
typedef int (*engine_text_fn)(void *ctx, struct engine_text *out, struct folio_err *err);

/* The page the vision tier looks at (the document's first page), made on
 * demand like the text: 8-bit gray or RGB. */
struct engine_page {
    uint8_t *pixels;        /* malloc'd by the provider; the engine frees it */
    int width, height, channels;
    size_t stride;
    double ms;              /* time spent producing it */
};
typedef int (*engine_page_fn)(void *ctx, struct engine_page *out, struct folio_err *err);

struct engine_doc {
    engine_text_fn text;    /* required for the text tiers */
    void *text_ctx;
    engine_page_fn page;    /* NULL: the vision tier is skipped for this document */
    void *page_ctx;
    /* Non-zero (shutdown, lease lost): a page still queued for the GPU is
     * taken back out and engine_classify returns FOLIO_ETIMEOUT. May be NULL. */
    const _Atomic int *cancel;
};

/* The model tiers (vision, OCR text + LM): one set per process, opened once
 * and shared by the engines of every thread. One GPU thread owns the device:
 * engine_classify(_pages) on any thread preprocesses its pages there and
 * queues them;
 * the GPU thread runs up to max_batch ready pages per pass (tiers.c). Open
 * never fails for a GPU or model problem: the tiers are then off with the
 * reason, and a lost device is re-opened with backoff (tiers.c). */
struct engine_models;
struct engine_models_config {
    const char *model_path;  /* text GGUF; NULL = no model tiers */
    const char *mmproj_path; /* vision projector; NULL = no vision tier */
    const char *device;      /* Vulkan device selector; NULL = first GPU */
    int allow_cpu;           /* allow lavapipe (tests) */
    uint32_t max_image_tokens; /* plan for pages of this many image tokens; 0 = 1600 */
    const char *gate_file;   /* extra driver-gate rules */
    const char *cache_dir;   /* pipeline cache; NULL = default */
    /* On a lost device: 0 = the document falls back to the OCR tiers now;
     * 1 = engine_models_classify returns FOLIO_EDEVICELOST so the caller
     * can release the job to the queue for a worker with a healthy GPU. */
    int release_on_device_loss;
    /* --gpu-weights: 0 auto (f16 when the tensor-core GEMM exists and the
     * expanded weights fit), 1 f16, 2 native (engine_gpu_weights_parse) */
    int gpu_weights;
    /* --gpu-batch: most pages per GPU pass (memory for that many planned at
     * open); 0 = the engine's choice from the device's memory plan. */
    uint32_t max_batch;
    /* --max-label-tokens: the longest label the LM plan holds (0 = 16).
     * Each page of a pass reserves a vocabulary-wide logits row per label
     * token, so a smaller plan lets more pages share a pass. */
    uint32_t max_label_tokens;
};
/* Pages per GPU pass of the open engine (0 while none is open). */
uint32_t engine_models_max_batch(struct engine_models *m);
/* Compute pipelines requested after the registry was sealed, summed over
 * every engine this process opened (re-opens included): must stay 0. */
unsigned long long engine_models_pipelines_after_seal(struct engine_models *m);
struct engine_gpu_stats {
    unsigned long long passes, pages; /* vision passes run (split re-runs included), pages
                                       * submitted to them (each once) */
    unsigned long long splits;        /* failed batches re-run page by page */
    uint32_t max_batch;
};
void engine_models_gpu_stats(struct engine_models *m, struct engine_gpu_stats *out);
/* "auto" | "f16" | "native" -> 0 | 1 | 2; -1 for anything else. */
int engine_gpu_weights_parse(const char *s);
int engine_models_open(const struct engine_models_config *cfg, struct engine_models **out,
                       struct folio_err *err);
void engine_models_close(struct engine_models *m);
/* Tiers enabled now, "vision,ocr+lm,ocr+rules" .. "ocr+rules" (safe from
 * any thread), and a copy of why any is off ("" when none is). */
const char *engine_models_paths(const struct engine_models *m);
void engine_models_reason(struct engine_models *m, char *buf, size_t n);
/* 1 when the model tiers are off until restart (no model, or repeated
 * losses); 0 while they run or a lost device is being re-opened. */
int engine_models_gave_up(struct engine_models *m);
/* Device, driver, paths, the open report (ready time per step). */
int engine_models_report_json(struct engine_models *m, char *buf, size_t n);
/* The open report's figures the metrics export, as values (no GPU open:
 * *out zeroed and 0 returned with out->open = 0). */
struct engine_report {
    int open;                 /* a GPU engine is open */
    char device[256];
    unsigned long long weights_bytes, activation_bytes;
    unsigned pipelines;
    double ready_ms;
};
int engine_models_report(struct engine_models *m, struct engine_report *out);

/* The learned tier (ocr+learned, engine/learned.c): naive Bayes over the
 * OCR text, trained from corrections. A trainer collects (label, text)
 * examples and builds a blob the caller stores (PostgreSQL, a file); a
 * model is loaded from such a blob, read-only afterwards, and may be
 * shared by every thread's engine. */
struct engine_trainer;
struct engine_trainer *engine_trainer_new(void);
void engine_trainer_free(struct engine_trainer *t);
int engine_trainer_add(struct engine_trainer *t, const char *label, const char *text, struct folio_err *err);
int engine_trainer_docs(const struct engine_trainer *t, const char *label);
/* Builds the model of the labels with >= min_per_label examples (others
 * are left out); FOLIO_EINVAL naming the shortfall when fewer than 2 are
 * left. *blob is malloc'd. Sorts the trainer's examples (not const). */
int engine_trainer_build(struct engine_trainer *t, int min_per_label, uint8_t **blob, size_t *len,
                         struct folio_err *err);
/* The evidence scale written into the next blob built (the calibration
 * chosen on held-out corrections; learned.c). */
void engine_trainer_set_evidence(struct engine_trainer *t, double evidence);
struct engine_learned;
/* Validates and loads a blob; FOLIO_EFORMAT says what is wrong with it. */
int engine_learned_load(const uint8_t *blob, size_t len, struct engine_learned **out, struct folio_err *err);
void engine_learned_free(struct engine_learned *m);
int engine_learned_count(const struct engine_learned *m);
/* Calibration: how many features' worth of evidence a page's mean
 * log-likelihood counts as (learned.c); for `bench accuracy` tuning. */
void engine_learned_set_evidence(struct engine_learned *m, double evidence);
double engine_learned_evidence(const struct engine_learned *m);
/* 1 when the model learned label (it answers only among those). */
int engine_learned_knows(const struct engine_learned *m, const char *label);
/* The index of label among the model's (engine_learned_label), or -1. */
int engine_learned_find(const struct engine_learned *m, const char *label);
const char *engine_learned_label(const struct engine_learned *m, int i);
int engine_learned_examples(const struct engine_learned *m, int i);
/* Scores text over the labels of l that the model knows (others get 0).
 * Returns 1 (no answer, the reason added to out->fallback_reason) when it
 * abstains: fewer than 2 of its labels active, the text unlike its
 * training data, or its best label not well ahead (learned.c); 0 with out
 * filled otherwise. */
struct engine_result;
int engine_learned_score(const struct engine_learned *m, const struct engine_labels *l, const char *text,
                         struct engine_result *out, struct folio_err *err);

/* Review policy: a result needs review when its probability is under
 * review_below or its lead over the second label is under review_margin;
 * ties always do. Defaults measured by `folio bench accuracy`. */
#define ENGINE_REVIEW_BELOW_DEFAULT 0.5
#define ENGINE_REVIEW_MARGIN_DEFAULT 0.1

struct engine_config {
    const char *model_path;  /* text GGUF; NULL = no LM tiers */
    const char *mmproj_path; /* vision projector; NULL = no vision tier */
    double review_below;     /* probability under which needs_review is set (0 = none) */
    struct engine_models *models; /* shared model tiers (engine_models_open), or NULL */
    double review_margin;    /* lead over the runner-up under which needs_review is set */
    const struct engine_learned *learned; /* ocr+learned tier, or NULL (borrowed) */
};

struct engine_result {
    char label[ENGINE_LABEL_MAX + 1];
    double confidence;       /* probability of the winning label, 0..1 */
    int needs_review;
    int n_labels;            /* entries in names/scores (the label set's order) */
    const char *const *names;/* borrowed from the label set */
    double *scores;          /* normalised distribution, sums to 1 (all 0 for unknown) */
    double *raw;             /* rules tier: weighted keyword hits per label */
    char engine_path[16];    /* "vision", "ocr+lm", "ocr+learned", "ocr+rules" */
    char fallback_reason[160];
    struct engine_text text; /* OCR output the text tiers used */
    double rules_ms, total_ms;
    int32_t *prompt_ids;     /* vision tier: the prompt with image tokens expanded (malloc'd) */
    uint32_t n_prompt_ids;
    double vision_ms, lm_ms; /* vision: preprocess + tower; LM pass (either model tier) */
    char review_reason[96];  /* why needs_review is set ("" when it is not) */
};
void engine_result_free(struct engine_result *r);

struct engine;
/* Opens the engine. With no model configured this succeeds with only the
 * rules tier enabled (the reason is kept for results and `folio doctor`).
 * With model tiers open, a label set they cannot score (a label longer
 * than the per-label token limit, too many labels) is refused with
 * FOLIO_ELIMIT naming the label and its token count. */
int engine_open(const struct engine_config *cfg, const struct engine_labels *labels,
                struct engine **out, struct folio_err *err);
void engine_close(struct engine *e);
/* Why the higher tiers are skipped on every document ("" if none are). */
const char *engine_disabled_reason(const struct engine *e);

/* Classifies one document. One engine per thread (the text provider and
 * result are the caller's). engine_classify_pages of one page. */
int engine_classify(struct engine *e, const struct engine_doc *doc, struct engine_result *out,
                    struct folio_err *err);

/* Classifies the n pages of one document, each described by its own
 * engine_doc (providers for that page alone), into out[0..n-1]: for every
 * page the same result engine_classify of that page gives, but the pages
 * reach the GPU together. Vision first, for all pages: up to the GPU
 * batch of them (engine_models_max_batch) are decoded and prepared on the
 * calling thread, one decoded page at a time, and queued together, so
 * they can share one pass; the next window follows when those are back.
 * Prepared pages waiting for the GPU never exceed its queue bound (a
 * window takes only the queue room free when it starts, at least one
 * page). Then, page by page in order, the text tiers for the pages vision
 * did not answer. Each page falls back on its own: a page that cannot be
 * decoded, fails its pass (the pass is re-run page by page) or scores
 * non-finite gets the text tiers with its reason, its neighbours keep
 * their vision result.
 *
 * Order: page p's text provider is called only after pages 0..p-1 are
 * final in out (labels, text), so a caller may hand budgets from one
 * page's text to the next. pages[].cancel is the document's flag (the
 * same for every page): it takes the document's queued pages back out
 * (pages inside a pass are waited for), and between pages ends the call;
 * FOLIO_ETIMEOUT. On any error every out[] entry is still freed with
 * engine_result_free; *failed (may be NULL) names the page (0-based) the
 * error came from (for the GPU steps, the first page of its window). */
int engine_classify_pages(struct engine *e, const struct engine_doc *pages, int n, struct engine_result *out,
                          int *failed, struct folio_err *err);

/* ---- every page, not only the first (engine/pages.c) ----
 * Each page of a multi-page document is classified on its own (providers
 * for that page; engine_classify_pages batches them). From those pages:
 *  - the document's result is the first page's (label, confidence and
 *    distribution): a batch scan is filed under what it starts with, and
 *    the pages keep what the rest is;
 *  - split suggestions: the pages cut into contiguous segments. A page
 *    opens a new segment when its label differs from the current
 *    segment's, is not "unknown", has confidence >= ENGINE_SEGMENT_MIN_CONF
 *    and beats the current segment's label on that page by at least
 *    ENGINE_SEGMENT_MARGIN; any other page (a weak or unknown page, such as
 *    an invoice's terms page) continues the segment it follows. A segment's
 *    confidence is the mean over its pages of its label's probability.
 *    More than one segment means "this file may hold several documents":
 *    flagged for review, never split. */
#define ENGINE_SEGMENT_MIN_CONF 0.5
#define ENGINE_SEGMENT_MARGIN 0.2
struct engine_segment {
    int first_page, last_page; /* 0-based, inclusive */
    char label[ENGINE_LABEL_MAX + 1];
    double confidence;
};
/* Fills out (room for n entries) and returns the number of segments
 * (1..n; 0 when n is 0). */
int engine_pages_segments(const struct engine_result *pages, int n, struct engine_segment *out);

/* The rules tier alone, over given text: word-boundary, case-insensitive
 * counts of each label's keywords and name. Exposed for tests and tools. */
int engine_rules_score(const struct engine_labels *l, const char *text, struct engine_result *out,
                       struct folio_err *err);

/* Applies the review policy (above) to a filled result: sets needs_review
 * and review_reason. engine_classify calls it; exposed for tools. */
void engine_review(struct engine_result *r, double review_below, double review_margin);

/* Splits "keyword^W" in place into the keyword and its weight (1 when
 * none is given); FOLIO_EINVAL for a weight that is not a number in
 * 0..100. */
int engine_keyword_split(char *kw, double *weight);

/* Label files, the one format shared by `classify --labels`, `folio labels
 * import/export` and the built-in sets: one label per line,
 *   name (what it is, for people): keyword, "phrase, with comma", weighted^3   # comment
 * the (description) optional. Parse errors name the source and line. */
int engine_labels_parse(struct engine_labels *l, const char *text, const char *source, struct folio_err *err);
/* The same, but a bad line does not stop the parse: each one goes to
 * report (its error names SOURCE and the line) and the rest is still read,
 * so `folio labels test` lists every problem in one run; then FOLIO_EINVAL
 * counting them. report NULL: stop at the first, as engine_labels_parse. */
int engine_labels_parse_each(struct engine_labels *l, const char *text, const char *source,
                             void (*report)(void *ctx, const struct folio_err *e), void *ctx,
                             struct folio_err *err);
#define ENGINE_LABEL_DESCRIPTION_MAX 500
int engine_labels_set_description(struct engine_labels *l, int i, const char *description, struct folio_err *err);
/* "" when the label has none. */
const char *engine_labels_description(const struct engine_labels *l, int i);
/* The default taxonomy in that format: a business inbox (receipt, invoice,
 * purchase order, ... memo), what `folio classify` uses without --labels
 * and what `folio migrate` installs in a new database (schema 015). */
extern const char ENGINE_DEFAULT_LABELS[];
/* The 16 RVL-CDIP research classes, the default before issue 33 (and
 * what `folio bench accuracy`'s generated corpus is drawn from). */
extern const char ENGINE_RVL_CDIP_LABELS[];
/* A built-in set by name ("business" = ENGINE_DEFAULT_LABELS, "rvl-cdip"),
 * NULL when there is none; engine_label_set_name(i) lists them (NULL past
 * the end). */
const char *engine_label_set(const char *name);
const char *engine_label_set_name(int i);
/* Keywords of label i as written ("amount due^3"), for export. */
int engine_labels_keyword(const struct engine_labels *l, int i, int k, char *buf, size_t n);

/* ---- the doctor (`folio doctor`, `folio-engine doctor`; engine/doctor.c) ----
 * What tools show of the engine without its internal headers. */
struct engine_doctor_opts {
    const char *device;   /* selector, NULL = first GPU (a CPU device when there is none) */
    int allow_cpu;        /* also consider CPU devices (lavapipe) */
    int json;             /* one JSON object instead of text */
    int serial;           /* create pipelines on one thread */
};
/* Devices, limits, features, the op library's pipelines pre-warmed (and
 * the cache result), requests after seal, allocation-callback totals. */
int engine_doctor_ops(const struct engine_doctor_opts *o, FILE *out, struct folio_err *err);
/* A model file (text GGUF or vision projector): what it holds and what it
 * needs, or the first thing wrong with it (FOLIO_EFORMAT and the like). */
int engine_doctor_model(const char *path, int json, FILE *out, struct folio_err *err);
/* Reads a model file's header, metadata and tensor table and checks them
 * as the engine will at open (every tensor inside the file, the expected
 * tensors in a usable dtype and shape), with no device: vision = 1 for an
 * mmproj. A truncated or corrupt file is a configuration error the caller
 * reports before it looks for a GPU, since without one the engine would
 * never read the file and the service would quietly run on OCR alone. */
int engine_check_model_file(const char *path, int vision, struct folio_err *err);

#endif
