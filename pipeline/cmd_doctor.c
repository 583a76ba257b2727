/* folio doctor: argument parsing now; the work arrives with issue 5 (Vulkan runtime). */
#include "pipeline/pipeline.h"

#include <getopt.h>
#include <stdio.h>

static const char USAGE[] =
    "usage: folio doctor [OPTIONS]\n"
    "\n"
    "Checks Vulkan devices, drivers, pipelines, models and the database.\n"
    "\n"
    "  --json               machine-readable output\n"
    "  --db CONNINFO        also check this database\n"
    "  --model FILE         inspect a text model GGUF\n"
    "  --mmproj FILE        inspect a vision projector GGUF\n"
    "  --device SPEC        Vulkan device: index, UUID or name substring\n";

int cmd_doctor(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 1000},
        {"db", required_argument, 0, 1001},
        {"model", required_argument, 0, 1002},
        {"mmproj", required_argument, 0, 1003},
        {"device", required_argument, 0, 1004},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ch == 'h') {
            fputs(USAGE, stdout);
            return FOLIO_EXIT_OK;
        }
        if (ch == '?' || ch == ':')
            return cli_usage_error("doctor", "unknown or incomplete option '%s'", argv[optind - 1]);
    }
    if (optind < argc)
        return cli_usage_error("doctor", "unexpected argument '%s'", argv[optind]);
    return cli_not_built("folio doctor", "issue 5 (Vulkan runtime)");
}
