/*
 * The engine's benchmarks and diagnostics, shared by `folio bench ...` and
 * the engine-only `folio-engine` tool (GPU machines have no libpq or
 * Tesseract). Not part of the engine's production API: the engine's own
 * code never calls these; `folio doctor` uses engine_doctor_* (engine.h).
 *
 * Every benchmark builds its models with bench/engine/synth.h and prints
 * JSON lines; BENCHMARKS.md records the commands and results.
 */
#ifndef FOLIO_BENCH_ENGINE_H
#define FOLIO_BENCH_ENGINE_H

#include "common/common.h"

#include <stdint.h>
#include <stdio.h>

/* ---- ops (`bench ops`) ---- */
struct ops_tool_opts {
    const char *device;   /* selector, NULL = first GPU */
    int allow_cpu;        /* also consider CPU devices (lavapipe) */
    int serial;           /* create pipelines on one thread */
    int quick;            /* small shapes (CI / lavapipe) */
    int reps;             /* timed repetitions, 0 = default */
    const char *only;     /* "roofline", "matmul", "gemm" or "attention" */
    const char *where;    /* GEMM shapes whose name holds one of these comma-separated words */
    const char *dtype;    /* one weight type name ("q4_K") */
    const char *tiles;    /* --only gemm: configurations whose name holds one of these words */
};
/* `bench ops`: JSON lines with GFLOP/s, GB/s and the fraction of the
 * roofline measured in the same run (peak FMA rate and read bandwidth). */
int ops_bench(const struct ops_tool_opts *o, FILE *out, struct folio_err *err);
/* `bench ops [OPTIONS]` for `folio bench ops` and `folio-engine bench ops`:
 * parses argv (argv[0] = "ops") with one option table, runs ops_bench.
 * Returns an exit code: 0 ok, 1 failure, 2 usage error. */
int ops_bench_main(const char *prog, int argc, char **argv, FILE *out);

/* ---- text model (`bench engine --text`) ---- */
struct lm_bench_opts {
    const char *device;        /* vkr device selector */
    int allow_cpu;
    uint32_t prompt_tokens;    /* 0 = 1400 */
    uint32_t labels;           /* 0 = 16 */
    uint32_t label_tokens;     /* tokens per label, 0 = 3 */
    uint32_t iters;            /* timed repetitions, 0 = 3 */
    int small;                 /* a small model instead of the 7B shape (CI smoke) */
    int gpu_weights;           /* enum ops_gpu_weights (--gpu-weights) */
    int qwen3;                 /* the Qwen3-VL-8B shape (--family qwen3vl) */
};
/* Builds a 7B-shaped Q4_K_M-like model in memory, measures the device's
 * matmul FLOP/s and memory bandwidth, then prefill tokens/s and label
 * scoring time; prints JSON lines to out. */
int lm_bench(const struct lm_bench_opts *o, FILE *out, struct folio_err *err);

/* ---- vision tower alone (`bench engine --vision`) ---- */
struct vis_bench_opts {
    const char *device;
    int allow_cpu;
    uint32_t image;        /* square page side in pixels, 0 = 1024 */
    uint32_t iters;        /* 0 = 3 */
    int small;             /* tiny tower (CI smoke) instead of the 7B shape */
    int mat_type;          /* 0 = F16 */
    int gpu_weights;       /* enum ops_gpu_weights (--gpu-weights) */
    int qwen3;             /* the Qwen3-VL-8B tower (--family qwen3vl) */
};
/* Builds a random tower (7B shape: 32 blocks of 1280, 16 heads, FFN 3420,
 * windows, merger to 3584), encodes a page of that size and prints JSON
 * lines: ms per page, TFLOP/s against the page's FLOPs (§6.1). */
int vis_bench(const struct vis_bench_opts *o, FILE *out, struct folio_err *err);

/* ---- whole page (`bench engine`, no mode) ---- */
struct vlm_bench_opts {
    const char *device;
    int allow_cpu;
    uint32_t image;            /* square page side, 0 = 1024 */
    uint32_t labels;           /* 0 = 16 */
    uint32_t label_tokens;     /* 0 = 3 */
    uint32_t text_tokens;      /* prompt tokens besides the image (--text-tokens), 0 = 67 */
    uint32_t iters;            /* 0 = 3 */
    int small;                 /* tiny models (CI smoke) instead of the 7B shape */
    const char *cache_dir;     /* NULL = a fresh directory under /tmp (cold first open) */
    int gpu_weights;           /* enum ops_gpu_weights (--gpu-weights) */
    int qwen3;                 /* Qwen3-VL-8B-shaped models instead (--family qwen3vl) */
    const uint32_t *batches;   /* pages per GPU pass to measure (--batch 1,4,8); NULL = 1 */
    uint32_t nbatches;
};
/* Random-weight Qwen2.5-VL-7B-shaped models (Q4_K_M-like text, F16 tower):
 * ready time cold and with the pipeline cache warm (planned for the
 * largest batch; the warm-up is vlm_open's, bounded by rows rather than
 * the batch), then for each batch size pages/s
 * with the preprocess / vision / LM split per page, the LM's prefill /
 * scoring split, and the FLOP rate. JSON lines on out. */
int vlm_bench(const struct vlm_bench_opts *o, FILE *out, struct folio_err *err);

/* ---- the tokenizer (`bench tokenizer`, tokenizer_bench.c) ---- */
/* `bench tokenizer [OPTIONS]` for `folio bench tokenizer` and
 * `folio-engine bench tokenizer`: MB/s of encode on a model's vocabulary
 * (or a synthetic one) and the scaling on hostile texts; JSON lines on
 * stdout. Returns an exit code: 0 ok, 1 failure, 2 usage error. */
int tokenizer_bench_main(const char *prog, int argc, char **argv);
/* Hostile texts of about n bytes for the tokenizer's scaling case, shared by
 * the bench and tests/unit/test_tokenizer.c (malloc'd, *len set; NULL when
 * out of memory). */
enum { TOK_HOSTILE_MARKS, TOK_HOSTILE_SPACES, TOK_HOSTILE_PUNCT, TOK_HOSTILE_WORD, TOK_HOSTILE_N };
const char *bench_tok_hostile_name(int kind);
char *bench_tok_hostile(int kind, size_t n, size_t *len);

/* ---- the `bench engine` command ---- */
/* `bench engine [--text | --vision] [OPTIONS]` for `folio bench engine` and
 * `folio-engine bench engine`: parses argv (argv[0] = "engine"), runs the
 * benchmark, prints JSON lines to out (--help to stdout). prog names the
 * program in messages ("folio", "folio-engine"). Returns an exit code:
 * 0 ok, 1 failure, 2 usage error. */
int engine_bench_main(const char *prog, int argc, char **argv, FILE *out);
/* `bench engine --pages N --model M --mmproj P [...]` (bench_pages.c):
 * one N-page document through engine_models page by page and with
 * engine_classify_pages; same argv and exit codes. */
int engine_bench_pages(const char *prog, int argc, char **argv, FILE *out);

#endif
