/*
 * folio-engine: the engine's diagnostics and benchmarks without the rest
 * of folio (no PostgreSQL, no OCR), for GPU machines that only have a
 * Vulkan loader. `folio doctor` and `folio bench ops` call the same
 * functions (engine_doctor_ops, and ops_bench from bench/engine).
 */
#include "bench/engine/bench.h"
#include "common/cliopt.h"
#include "common/common.h"
#include "engine/engine.h"

#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio-engine doctor [--json] [--device SPEC] [--allow-cpu] [--serial-pipelines]\n"
    "       folio-engine bench ops [--quick] [--device SPEC] [--allow-cpu] [--reps N]\n"
    "       folio-engine bench engine [--text | --vision] [--batch N,...] [--small] [--device SPEC] [--allow-cpu] (--help)\n"
    "                              [--only roofline|matmul|gemm|attention] [--dtype TYPE]\n"
    "       folio-engine bench tokenizer [--model GGUF] [--case all|throughput|scaling] (--help)\n"
    "\n"
    "SPEC is a device index, UUID or name substring. CPU devices (lavapipe)\n"
    "are used only with --allow-cpu or when no GPU exists.\n";

#define AT(m, type) CLI_AT(struct engine_doctor_opts, m, type)
static const struct cli_opt DOCTOR_OPTS[] = {
    {.name = "json", .kind = CLI_FLAG, .off = AT(json, int)},
    {.name = "device", .kind = CLI_STR, .off = AT(device, const char *)},
    {.name = "allow-cpu", .kind = CLI_FLAG, .off = AT(allow_cpu, int)},
    {.name = "serial-pipelines", .kind = CLI_FLAG, .off = AT(serial, int)},
};
#undef AT
static const struct cli_cmd DOCTOR = {.name = "doctor", .prog = "folio-engine", .usage = USAGE,
                                      .opts = DOCTOR_OPTS, .nopts = sizeof DOCTOR_OPTS / sizeof DOCTOR_OPTS[0]};

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "doctor") == 0) {
        struct engine_doctor_opts d = {0};
        int pos, prc = cli_parse(&DOCTOR, &d, argc - 1, argv + 1, &pos);
        if (prc != CLI_GO)
            return prc;
        struct folio_err err = {0};
        if (engine_doctor_ops(&d, stdout, &err) != 0) {
            folio_err_print(stderr, &err);
            return FOLIO_EXIT_FAIL;
        }
        return FOLIO_EXIT_OK;
    }
    if (argc >= 3 && strcmp(argv[1], "bench") == 0 && strcmp(argv[2], "ops") == 0)
        return ops_bench_main("folio-engine", argc - 2, argv + 2, stdout);
    if (argc >= 3 && strcmp(argv[1], "bench") == 0 && strcmp(argv[2], "engine") == 0)
        return engine_bench_main("folio-engine", argc - 2, argv + 2, stdout);
    if (argc >= 3 && strcmp(argv[1], "bench") == 0 && strcmp(argv[2], "tokenizer") == 0)
        return tokenizer_bench_main("folio-engine", argc - 2, argv + 2);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(USAGE, stdout);
        return FOLIO_EXIT_OK;
    }
    fputs(USAGE, stderr);
    return FOLIO_EXIT_USAGE;
}
