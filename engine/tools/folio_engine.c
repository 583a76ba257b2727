/*
 * folio-engine: the engine's diagnostics and benchmarks without the rest
 * of folio (no PostgreSQL, no OCR), for GPU machines that only have a
 * Vulkan loader. `folio doctor` and `folio bench ops` call the same
 * functions (engine_doctor_ops, and ops_bench from bench/engine).
 */
#include "common/common.h"
#include "bench/engine/bench.h"
#include "engine/engine.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio-engine doctor [--json] [--device SPEC] [--allow-cpu] [--serial-pipelines]\n"
    "       folio-engine bench ops [--quick] [--device SPEC] [--allow-cpu] [--reps N]\n"
    "       folio-engine bench engine [--text | --vision] [--batch N,...] [--small] [--device SPEC] [--allow-cpu] (--help)\n"
    "                              [--only roofline|matmul|gemm|attention] [--dtype TYPE]\n"
    "\n"
    "SPEC is a device index, UUID or name substring. CPU devices (lavapipe)\n"
    "are used only with --allow-cpu or when no GPU exists.\n";

static int parse(int argc, char **argv, struct ops_tool_opts *o, int *json)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 'j'},        {"device", required_argument, 0, 'd'},
        {"allow-cpu", no_argument, 0, 'c'},   {"serial-pipelines", no_argument, 0, 's'},
        {"quick", no_argument, 0, 'q'},       {"reps", required_argument, 0, 'r'},
        {"only", required_argument, 0, 'o'},  {"dtype", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        long long v;
        switch (ch) {
        case 'j': *json = 1; break;
        case 'd': o->device = optarg; break;
        case 'c': o->allow_cpu = 1; break;
        case 's': o->serial = 1; break;
        case 'q': o->quick = 1; break;
        case 'o': o->only = optarg; break;
        case 't': o->dtype = optarg; break;
        case 'r':
            if (folio_parse_int(optarg, 1, 1000, &v) != 0) {
                fprintf(stderr, "folio-engine: --reps wants 1..1000\n");
                return 2;
            }
            o->reps = (int)v;
            break;
        case 'h': fputs(USAGE, stdout); return 1;
        default:
            fprintf(stderr, "folio-engine: unknown or incomplete option '%s'\n%s", argv[optind - 1], USAGE);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "folio-engine: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct ops_tool_opts o = {0};
    struct folio_err err = {0};
    int rc, json = 0;
    if (argc >= 2 && strcmp(argv[1], "doctor") == 0) {
        int p = parse(argc - 1, argv + 1, &o, &json);
        if (p)
            return p == 1 ? 0 : 2;
        struct engine_doctor_opts d = {.device = o.device, .allow_cpu = o.allow_cpu, .json = json,
                                       .serial = o.serial};
        rc = engine_doctor_ops(&d, stdout, &err);
    } else if (argc >= 3 && strcmp(argv[1], "bench") == 0 && strcmp(argv[2], "ops") == 0) {
        int p = parse(argc - 2, argv + 2, &o, &json);
        if (p)
            return p == 1 ? 0 : 2;
        rc = ops_bench(&o, stdout, &err);
    } else if (argc >= 3 && strcmp(argv[1], "bench") == 0 && strcmp(argv[2], "engine") == 0) {
        return engine_bench_main(argc - 2, argv + 2, stdout);
    } else if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(USAGE, stdout);
        return 0;
    } else {
        fputs(USAGE, stderr);
        return 2;
    }
    if (rc) {
        folio_err_print(stderr, &err);
        return 1;
    }
    return 0;
}
