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
#include "engine/engine.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: bench engine [--text | --vision] [OPTIONS]\n"
    "  (no mode)         whole page: ready time, pages/s, vision/prefill/scoring split\n"
    "  --text            text model only: prefill tokens/s and label scoring time\n"
    "  --vision          vision tower only: ms and TFLOP/s per page\n"
    "  --device SEL      Vulkan device: index, UUID or name substring (default: first GPU)\n"
    "  --allow-cpu       allow a CPU Vulkan device (lavapipe)\n"
    "  --image N         square page side in pixels (default 1024)\n"
    "  --tokens N        prompt length for --text prefill (default 1400)\n"
    "  --labels N        labels to score (default 16)\n"
    "  --label-tokens N  tokens per label (default 3)\n"
    "  --text-tokens N   whole page: prompt tokens besides the image (chat header,\n"
    "                    instruction, closing; default 67)\n"
    "  --iters N         timed repetitions, best reported (default 3)\n"
    "  --batch N[,N...]  whole page: pages per GPU pass, each size measured on one\n"
    "                    engine planned for the largest (default 1; e.g. 1,4,8,16)\n"
    "  --small           small models instead of the 7B shape (smoke test)\n"
    "  --family F        qwen2.5vl (default: the Qwen2.5-VL-7B shape) or qwen3vl\n"
    "                    (the Qwen3-VL-8B shape: DeepStack, 16-px patches)\n"
    "  --gpu-weights M   auto | f16 | native: matrices expanded to f16 at load for\n"
    "                    the tensor-core GEMM, or kept as stored (default auto)\n"
    "  --pages N ...     an N-page document through the GPU stage, page by page vs\n"
    "                    batched (--pages --help: its own options)\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "bench engine: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\ntry 'bench engine --help'\n");
    return 2;
}

static int num(const char *s, long long max, uint32_t *out)
{
    long long v;
    if (folio_parse_int(s, 1, max, &v))
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* "1,4,8,16": at most 8 sizes, each 1..64. */
static int parse_batches(const char *s, uint32_t *out, uint32_t *n)
{
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return -1;
    memcpy(buf, s, strlen(s) + 1);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n >= 8 || num(t, 64, &out[*n]))
            return -1;
        (*n)++;
    }
    return *n ? 0 : -1;
}

int engine_bench_main(int argc, char **argv, FILE *out)
{
    static const struct option opts[] = {
        {"text", no_argument, NULL, 't'},          {"vision", no_argument, NULL, 'v'},
        {"device", required_argument, NULL, 'd'},  {"allow-cpu", no_argument, NULL, 'c'},
        {"image", required_argument, NULL, 'm'},   {"tokens", required_argument, NULL, 'n'},
        {"labels", required_argument, NULL, 'l'},  {"label-tokens", required_argument, NULL, 'k'},
        {"text-tokens", required_argument, NULL, 'T'},
        {"iters", required_argument, NULL, 'i'},   {"small", no_argument, NULL, 's'},
        {"gpu-weights", required_argument, NULL, 'w'}, {"batch", required_argument, NULL, 'b'},
        {"family", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    const char *device = NULL;
    int allow_cpu = 0, small = 0, text = 0, vision = 0, ch, gw = 0, qwen3 = 0;
    uint32_t image = 0, tokens = 0, labels = 0, label_tokens = 0, text_tokens = 0, iters = 0;
    uint32_t batches[8], nbatch = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--pages") == 0 || strncmp(argv[i], "--pages=", 8) == 0)
            return engine_bench_pages(argc, argv, out); /* bench_pages.c */
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 't': text = 1; break;
        case 'v': vision = 1; break;
        case 'd': device = optarg; break;
        case 'c': allow_cpu = 1; break;
        case 's': small = 1; break;
        case 'm':
            if (num(optarg, 16384, &image))
                return usage_error("--image: '%s' is not 1..16384", optarg);
            break;
        case 'n':
            if (num(optarg, 1 << 20, &tokens))
                return usage_error("--tokens: '%s' is not 1..1048576", optarg);
            break;
        case 'l':
            if (num(optarg, 4096, &labels))
                return usage_error("--labels: '%s' is not 1..4096", optarg);
            break;
        case 'k':
            if (num(optarg, 256, &label_tokens))
                return usage_error("--label-tokens: '%s' is not 1..256", optarg);
            break;
        case 'T':
            if (num(optarg, 1 << 16, &text_tokens) || text_tokens < 28)
                return usage_error("--text-tokens: '%s' is not 28..65536 (chat header, vision "
                                   "markers and closing take 27)", optarg);
            break;
        case 'i':
            if (num(optarg, 1000, &iters))
                return usage_error("--iters: '%s' is not 1..1000", optarg);
            break;
        case 'w':
            if ((gw = engine_gpu_weights_parse(optarg)) < 0)
                return usage_error("--gpu-weights: '%s' is not auto, f16 or native", optarg);
            break;
        case 'f':
            if (strcmp(optarg, "qwen3vl") == 0)
                qwen3 = 1;
            else if (strcmp(optarg, "qwen2.5vl") != 0)
                return usage_error("--family: '%s' is not qwen2.5vl or qwen3vl", optarg);
            else
                qwen3 = 0;
            break;
        case 'b':
            if (parse_batches(optarg, batches, &nbatch))
                return usage_error("--batch: '%s' is not a list of at most 8 sizes 1..64 "
                                   "(e.g. 1,4,8,16)", optarg);
            break;
        case 'h': fputs(USAGE, out); return 0;
        default: return usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (nbatch && (text || vision))
        return usage_error("%s", "--batch measures the whole page (no --text / --vision)");
    if (text && vision)
        return usage_error("%s", "--text and --vision exclude each other (no mode = whole page)");
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
        return 1;
    }
    return 0;
}
