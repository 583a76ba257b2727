/* folio bench SUBJECT: throughput measurements, one JSON object per line.
 * Each subject arrives with the issue that builds the thing it measures. */
#include "pipeline/pipeline.h"

#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio bench SUBJECT [OPTIONS]\n"
    "\n"
    "subjects:\n"
    "  ingest     files/s into the local server vs bare decode+sha256\n"
    "  queue      claim+complete cycles/s at 1, 4, 16 workers\n"
    "  ocr        OCR pages/s per core vs the tesseract CLI\n"
    "  ops        Vulkan op GFLOP/s and GB/s vs the device roofline\n"
    "  tokenizer  tokenizer MB/s\n"
    "  engine     pages/s of the full vision-language engine\n";

struct bench_subject {
    const char *name;
    const char *issue;
};

static const struct bench_subject SUBJECTS[] = {
    {"ingest", "issue 3 (ingest stage)"},      {"queue", "issue 4 (queue worker fleet)"},
    {"ocr", "issue 4 (queue worker fleet)"},   {"ops", "issue 5 (Vulkan runtime)"},
    {"tokenizer", "issue 6 (model files)"},    {"engine", "issues 8 and 9 (text and vision models)"},
};

int cmd_bench(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("bench", "missing SUBJECT");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(USAGE, stdout);
        return FOLIO_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof SUBJECTS / sizeof SUBJECTS[0]; i++)
        if (strcmp(argv[1], SUBJECTS[i].name) == 0) {
            char what[64];
            snprintf(what, sizeof what, "folio bench %s", SUBJECTS[i].name);
            return cli_not_built(what, SUBJECTS[i].issue);
        }
    return cli_usage_error("bench", "unknown subject '%s'", argv[1]);
}
