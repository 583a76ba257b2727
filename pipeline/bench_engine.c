/*
 * folio bench engine --text: the text model's prefill and label-scoring
 * speed on a model of the real Qwen2.5-VL-7B text shape with Q4_K_M-like
 * dtypes, made in memory from random weights by folio's quantisers, next
 * to the matmul FLOP/s and memory bandwidth measured in the same run
 * (lm_bench in engine/model/lm_bench.c does the work; the engine-only
 * tool calls the same function). JSON lines on stdout.
 */
#include "engine/model/lm.h"
#include "pipeline/pipeline.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio bench engine --text [OPTIONS]\n"
    "  --device SEL      Vulkan device: index, UUID or name substring (default: first GPU)\n"
    "  --allow-cpu       allow a CPU Vulkan device (lavapipe)\n"
    "  --tokens N        prompt length for prefill (default 1400)\n"
    "  --labels N        labels to score (default 16)\n"
    "  --label-tokens N  tokens per label (default 3)\n"
    "  --iters N         timed repetitions, best reported (default 3)\n"
    "  --small           a small model instead of the 7B shape (smoke test)\n";

static int num(const char *s, long long max, uint32_t *out)
{
    long long v;
    if (folio_parse_int(s, 1, max, &v))
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int bench_engine(int argc, char **argv)
{
    static const struct option opts[] = {
        {"text", no_argument, NULL, 't'},     {"vision", no_argument, NULL, 'v'},
        {"device", required_argument, NULL, 'd'}, {"allow-cpu", no_argument, NULL, 'c'},
        {"tokens", required_argument, NULL, 'n'}, {"labels", required_argument, NULL, 'l'},
        {"label-tokens", required_argument, NULL, 'k'},
        {"iters", required_argument, NULL, 'i'}, {"small", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},     {NULL, 0, NULL, 0}};
    struct lm_bench_opts o = {0};
    int text = 0, vision = 0, ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 't': text = 1; break;
        case 'v': vision = 1; break;
        case 'd': o.device = optarg; break;
        case 'c': o.allow_cpu = 1; break;
        case 's': o.small = 1; break;
        case 'n':
            if (num(optarg, 1 << 20, &o.prompt_tokens))
                return cli_usage_error("bench engine", "--tokens: '%s' is not 1..1048576", optarg);
            break;
        case 'l':
            if (num(optarg, 4096, &o.labels))
                return cli_usage_error("bench engine", "--labels: '%s' is not 1..4096", optarg);
            break;
        case 'k':
            if (num(optarg, 256, &o.label_tokens))
                return cli_usage_error("bench engine", "--label-tokens: '%s' is not 1..256", optarg);
            break;
        case 'i':
            if (num(optarg, 1000, &o.iters))
                return cli_usage_error("bench engine", "--iters: '%s' is not 1..1000", optarg);
            break;
        case 'h': fputs(USAGE, stdout); return FOLIO_EXIT_OK;
        default:
            return cli_usage_error("bench engine", "unknown or incomplete option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("bench engine", "unexpected argument '%s'", argv[optind]);
    if (vision)
        return cli_not_built("folio bench engine --vision", "issue 9 (vision model)");
    if (!text)
        return cli_usage_error("bench engine", "say what to measure: --text");
    struct folio_err err = {0};
    if (lm_bench(&o, stdout, &err) != 0) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
