/* folio bench ops: the engine's op benchmark (ops_bench), the same one
 * `folio-engine bench ops` runs on GPU machines. JSON lines on stdout. */
#include "bench/engine/bench.h"
#include "bench/pipeline/bench.h"
#include "engine/ops/ops.h"
#include "pipeline/cli.h"

#include <stdio.h>

static const char USAGE[] =
    "usage: folio bench ops [--quick] [--device SPEC] [--allow-cpu] [--reps N]\n"
    "                       [--only roofline|matmul|gemm|attention] [--dtype TYPE]\n"
    "\n"
    "Matmul per weight type at LLM shapes and attention at vision/text sizes:\n"
    "GFLOP/s, GB/s and the fraction of the roofline measured in the same run.\n";

#define AT(m, type) CLI_AT(struct ops_tool_opts, m, type)
static const struct cli_opt OPTS[] = {
    {.name = "quick", .kind = CLI_FLAG, .off = AT(quick, int)},
    {.name = "device", .kind = CLI_STR, .off = AT(device, const char *)},
    {.name = "allow-cpu", .kind = CLI_FLAG, .off = AT(allow_cpu, int)},
    {.name = "reps", .kind = CLI_INT, .off = AT(reps, int), .min = 1, .max = 1000},
    {.name = "only", .kind = CLI_STR, .off = AT(only, const char *)},
    {.name = "dtype", .kind = CLI_STR, .off = AT(dtype, const char *)},
};
static const struct cli_cmd CMD = {.name = "bench ops", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0]};

int bench_ops(int argc, char **argv)
{
    struct ops_tool_opts o = {0};
    int pos, prc = cli_parse(&CMD, &o, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    struct folio_err err = {0};
    if (ops_bench(&o, stdout, &err) != 0) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
