/*
 * engine — pixels in, labels out. Knows nothing of jobs, files or
 * PostgreSQL (DESIGN.md §6). This header is the engine's public API; the
 * Vulkan runtime (engine/vk), ops and model code have their own headers that
 * only the engine and its tests include.
 */
#ifndef FOLIO_ENGINE_H
#define FOLIO_ENGINE_H

#include "common/common.h"

#include <stdio.h>

#include <stddef.h>
#include <stdint.h>

/* Vulkan header version the engine was compiled against, "1.3.239". */
const char *engine_vulkan_header_version(void);

/* ===================================================================
 * Classification (DESIGN.md §6.4). One API for every tier: the caller
 * describes a document and how to get its text; the engine walks the
 * fallback chain (vision → OCR text + LM → OCR text + keyword rules),
 * records which tier answered and why the higher ones were skipped.
 * Today only the rules tier exists; the vision and LM tiers plug in
 * behind engine_classify() without changing callers.
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
};

/* The model tiers (vision, OCR text + LM): one set per process, opened once
 * and shared by the engines of every thread (GPU passes take turns). Open
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
};
/* "auto" | "f16" | "native" -> 0 | 1 | 2; -1 for anything else. */
int engine_gpu_weights_parse(const char *s);
int engine_models_open(const struct engine_models_config *cfg, struct engine_models **out,
                       struct folio_err *err);
void engine_models_close(struct engine_models *m);
/* Tiers enabled now, "vision,ocr+lm,ocr+rules" .. "ocr+rules" (safe from
 * any thread), and a copy of why any is off ("" when none is). */
const char *engine_models_paths(const struct engine_models *m);
void engine_models_reason(struct engine_models *m, char *buf, size_t n);
/* Device, driver, paths, the open report (ready time per step). */
int engine_models_report_json(struct engine_models *m, char *buf, size_t n);

struct engine_config {
    const char *model_path;  /* text GGUF; NULL = no LM tiers */
    const char *mmproj_path; /* vision projector; NULL = no vision tier */
    double review_below;     /* confidence under which needs_review is set (rules: 0) */
    struct engine_models *models; /* shared model tiers (engine_models_open), or NULL */
};

struct engine_result {
    char label[ENGINE_LABEL_MAX + 1];
    double confidence;       /* probability of the winning label, 0..1 */
    int needs_review;
    int n_labels;            /* entries in names/scores (the label set's order) */
    const char *const *names;/* borrowed from the label set */
    double *scores;          /* normalised distribution, sums to 1 (all 0 for unknown) */
    double *raw;             /* rules tier: weighted keyword hits per label */
    char engine_path[16];    /* "vision", "ocr+lm", "ocr+rules" */
    char fallback_reason[160];
    struct engine_text text; /* OCR output the text tiers used */
    double rules_ms, total_ms;
    int32_t *prompt_ids;     /* vision tier: the prompt with image tokens expanded (malloc'd) */
    uint32_t n_prompt_ids;
    double vision_ms, lm_ms; /* vision: preprocess + tower; LM pass (either model tier) */
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
 * result are the caller's). */
int engine_classify(struct engine *e, const struct engine_doc *doc, struct engine_result *out,
                    struct folio_err *err);

/* The rules tier alone, over given text: word-boundary, case-insensitive
 * counts of each label's keywords and name. Exposed for tests and tools. */
int engine_rules_score(const struct engine_labels *l, const char *text, struct engine_result *out,
                       struct folio_err *err);

/* `bench engine [--text | --vision] [OPTIONS]` for `folio bench engine` and
 * `folio-engine bench engine`: parses argv (argv[0] = "engine"), runs the
 * benchmark, prints JSON lines to out. Returns an exit code: 0 ok,
 * 1 failure, 2 usage error. */
int engine_bench_main(int argc, char **argv, FILE *out);

#endif
