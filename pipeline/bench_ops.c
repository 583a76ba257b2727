/* folio bench ops: the engine's op benchmark (ops_bench), the same one
 * `folio-engine bench ops` runs on GPU machines. JSON lines on stdout. */
#include "pipeline/pipeline.h"
#include "bench/engine/bench.h"

#include <getopt.h>
#include <stdio.h>

static const char USAGE[] =
    "usage: folio bench ops [--quick] [--device SPEC] [--allow-cpu] [--reps N]\n"
    "                       [--only roofline|matmul|gemm|attention] [--dtype TYPE]\n"
    "\n"
    "Matmul per weight type at LLM shapes and attention at vision/text sizes:\n"
    "GFLOP/s, GB/s and the fraction of the roofline measured in the same run.\n";

int bench_ops(int argc, char **argv)
{
    static const struct option opts[] = {
        {"quick", no_argument, 0, 'q'},      {"device", required_argument, 0, 'd'},
        {"allow-cpu", no_argument, 0, 'c'},  {"reps", required_argument, 0, 'r'},
        {"only", required_argument, 0, 'o'}, {"dtype", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},       {0, 0, 0, 0}};
    struct ops_tool_opts o = {0};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        long long v;
        switch (ch) {
        case 'h': fputs(USAGE, stdout); return FOLIO_EXIT_OK;
        case 'q': o.quick = 1; break;
        case 'd': o.device = optarg; break;
        case 'c': o.allow_cpu = 1; break;
        case 'o': o.only = optarg; break;
        case 't': o.dtype = optarg; break;
        case 'r':
            if (folio_parse_int(optarg, 1, 1000, &v) != 0)
                return cli_usage_error("bench ops", "--reps wants 1..1000, got '%s'", optarg);
            o.reps = (int)v;
            break;
        default:
            return cli_usage_error("bench ops", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("bench ops", "unexpected argument '%s'", argv[optind]);
    struct folio_err err = {0};
    if (ops_bench(&o, stdout, &err) != 0) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
