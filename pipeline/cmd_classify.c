/* folio classify: argument parsing now; the work arrives with issue 4 (OCR classification path). */
#include "pipeline/pipeline.h"

#include <getopt.h>
#include <stdio.h>

static const char USAGE[] =
    "usage: folio classify [OPTIONS] FILE...\n"
    "\n"
    "Classifies files directly, without a database; prints one JSON object per file.\n"
    "\n"
    "  --json               full output (every label's score, timings, token ids)\n"
    "  --model FILE         text model GGUF\n"
    "  --mmproj FILE        vision projector GGUF\n"
    "  --device SPEC        Vulkan device: index, UUID or name substring\n"
    "  --ocr-lang LANGS     Tesseract languages (default eng)\n";

int cmd_classify(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 1000},
        {"model", required_argument, 0, 1001},
        {"mmproj", required_argument, 0, 1002},
        {"device", required_argument, 0, 1003},
        {"ocr-lang", required_argument, 0, 1004},
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
            return cli_usage_error("classify", "unknown or incomplete option '%s'", argv[optind - 1]);
    }
    if (optind >= argc)
        return cli_usage_error("classify", "missing argument");
    return cli_not_built("folio classify", "issue 4 (OCR classification path)");
}
