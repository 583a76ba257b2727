/*
 * `bench engine` argument handling shared by `folio bench engine` and the
 * engine-only `folio-engine bench engine` (GPU machines without libpq), so
 * the two cannot drift. Three measurements on random-weight models of the
 * real Qwen2.5-VL-7B shape, made in memory (no download):
 *   (default)  a whole page: ready time cold/warm, pages/s with the
 *              preprocess / vision / LM split (vlm_bench)
 *   --text     text model prefill and label scoring (lm_bench)
 *   --vision   the vision tower alone (vis_bench)
 * JSON lines on out. Returns a process exit code: 0 ok, 1 failure, 2 usage.
 */
#include "bench/engine/bench.h"
#include "common/cliopt.h"
#include "engine/engine.h"

#include <stdio.h>
#include <string.h>

static const char USAGE[] = "usage: bench engine [--text | --vision] [OPTIONS]\n";

struct bench_engine_args {
    int text, vision, allow_cpu, small, gw, qwen3;
    const char *device;
    uint32_t image, tokens, labels, label_tokens, text_tokens, iters;
    uint32_t batches[8], nbatch;
};

/* --batch "1,4,8,16": at most 8 sizes, each 1..64. */
static int take_batches(const struct cli_opt *o, void *args, const char *v, const char *cmd)
{
    (void)o;
    (void)cmd;
    struct bench_engine_args *a = args;
    char buf[128];
    if (strlen(v) >= sizeof buf)
        return -1;
    memcpy(buf, v, strlen(v) + 1);
    a->nbatch = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long long n;
        if (a->nbatch >= 8 || folio_parse_int(t, 1, 64, &n))
            return -1;
        a->batches[a->nbatch++] = (uint32_t)n;
    }
    return a->nbatch ? 0 : -1;
}

static const char *const GPU_WEIGHTS[] = {"auto", "f16", "native", "int8", NULL}; /* engine_gpu_weights_parse's order */
static const char *const FAMILIES[] = {"qwen2.5vl", "qwen3vl", NULL};

#define AT(m, type) CLI_AT(struct bench_engine_args, m, type)
static const struct cli_opt OPTS[] = {
    {.kind = CLI_TEXT, .help = "  (no mode)         whole page: ready time, pages/s, vision/prefill/scoring split\n"},
    {.name = "text", .kind = CLI_FLAG, .off = AT(text, int),
     .help = "text model only: prefill tokens/s and label scoring time"},
    {.name = "vision", .kind = CLI_FLAG, .off = AT(vision, int), .help = "vision tower only: ms and TFLOP/s per page"},
    {.name = "device", .kind = CLI_STR, .off = AT(device, const char *), .arg = "SEL",
     .help = "Vulkan device: index, UUID or name substring (default: first GPU)"},
    {.name = "allow-cpu", .kind = CLI_FLAG, .off = AT(allow_cpu, int), .help = "allow a CPU Vulkan device (lavapipe)"},
    {.name = "image", .kind = CLI_U32, .off = AT(image, uint32_t), .min = 1, .max = 16384, .arg = "N",
     .help = "square page side in pixels (default 1024)"},
    {.name = "tokens", .kind = CLI_U32, .off = AT(tokens, uint32_t), .min = 1, .max = 1 << 20, .arg = "N",
     .help = "prompt length for --text prefill (default 1400)"},
    {.name = "labels", .kind = CLI_U32, .off = AT(labels, uint32_t), .min = 1, .max = 4096, .arg = "N",
     .help = "labels to score (default 16)"},
    {.name = "label-tokens", .kind = CLI_U32, .off = AT(label_tokens, uint32_t), .min = 1, .max = 256, .arg = "N",
     .help = "tokens per label (default 3)"},
    {.name = "text-tokens", .kind = CLI_U32, .off = AT(text_tokens, uint32_t), .min = 28, .max = 1 << 16, .arg = "N",
     .want = "28..65536 (chat header, vision markers and closing take 27)",
     .help = "whole page: prompt tokens besides the image (chat header,\ninstruction, closing; default 67)"},
    {.name = "iters", .kind = CLI_U32, .off = AT(iters, uint32_t), .min = 1, .max = 1000, .arg = "N",
     .help = "timed repetitions, best reported (default 3)"},
    {.name = "batch", .kind = CLI_FN, .fn = take_batches, .arg = "N[,N...]",
     .want = "a list of at most 8 sizes 1..64 (e.g. 1,4,8,16)",
     .help = "whole page: pages per GPU pass, each size measured on one\nengine planned for the largest "
             "(default 1; e.g. 1,4,8,16)"},
    {.name = "small", .kind = CLI_FLAG, .off = AT(small, int), .help = "small models instead of the 7B shape (smoke test)"},
    {.name = "family", .kind = CLI_ENUM, .off = AT(qwen3, int), .choices = FAMILIES, .arg = "F",
     .help = "qwen2.5vl (default: the Qwen2.5-VL-7B shape) or qwen3vl\n(the Qwen3-VL-8B shape: DeepStack, 16-px patches)"},
    {.name = "gpu-weights", .kind = CLI_ENUM, .off = AT(gw, int), .choices = GPU_WEIGHTS, .arg = "M",
     .help = "auto | f16 | native | int8: matrices expanded to f16 at load\nfor the tensor-core GEMM, kept as stored "
             "or int8 rows\nfor the int8 GEMM (default auto)"},
    {.kind = CLI_TEXT, .help = "  --pages N ...     an N-page document through the GPU stage, page by page vs\n"
                               "                    batched (--pages --help: its own options)\n"},
};
#undef AT

int engine_bench_main(const char *prog, int argc, char **argv, FILE *out)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--pages") == 0 || strncmp(argv[i], "--pages=", 8) == 0)
            return engine_bench_pages(prog, argc, argv, out); /* bench_pages.c */
    const struct cli_cmd cmd = {.name = "bench engine", .prog = prog, .usage = USAGE, .opts = OPTS,
                                .nopts = sizeof OPTS / sizeof OPTS[0], .help_col = 20};
    struct bench_engine_args a = {0};
    int pos, prc = cli_parse(&cmd, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *device = a.device;
    int allow_cpu = a.allow_cpu, small = a.small, text = a.text, vision = a.vision, gw = a.gw, qwen3 = a.qwen3;
    uint32_t image = a.image, tokens = a.tokens, labels = a.labels, label_tokens = a.label_tokens,
             text_tokens = a.text_tokens, iters = a.iters, *batches = a.batches, nbatch = a.nbatch;
    if (nbatch && (text || vision))
        return cli_cmd_usage_error(&cmd, "--batch measures the whole page (no --text / --vision)");
    if (text && vision)
        return cli_cmd_usage_error(&cmd, "--text and --vision exclude each other (no mode = whole page)");
    struct folio_err err = {0};
    int rc;
    if (text) {
        struct lm_bench_opts o = {.device = device, .allow_cpu = allow_cpu,
                                  .prompt_tokens = tokens, .labels = labels,
                                  .label_tokens = label_tokens, .iters = iters, .small = small,
                                  .gpu_weights = gw, .qwen3 = qwen3};
        rc = lm_bench(&o, out, &err);
    } else if (vision) {
        struct vis_bench_opts o = {.device = device, .allow_cpu = allow_cpu, .image = image,
                                   .iters = iters, .small = small, .gpu_weights = gw,
                                   .qwen3 = qwen3};
        rc = vis_bench(&o, out, &err);
    } else {
        struct vlm_bench_opts o = {.device = device, .allow_cpu = allow_cpu, .image = image,
                                   .labels = labels, .label_tokens = label_tokens,
                                   .text_tokens = text_tokens, .iters = iters, .small = small, .gpu_weights = gw,
                                   .qwen3 = qwen3,
                                   .batches = nbatch ? batches : NULL, .nbatches = nbatch};
        rc = vlm_bench(&o, out, &err);
    }
    if (rc != 0) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
