/* folio bench SUBJECT: throughput measurements, one JSON object per line on
 * stdout. Each subject lives in its own bench_<subject>.c. */
#include "bench/pipeline/bench.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"

#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio bench SUBJECT [OPTIONS]\n"
    "\n"
    "subjects (each takes --help):\n"
    "  ingest     files/s into the local server vs bare decode+sha256\n"
    "  queue      claim+complete cycles/s at 1, 4, 16 workers\n"
    "  ocr        OCR pages/s per core vs the tesseract CLI\n"
    "  pdf        PDF render ms/page vs pdftoppm, probe, text layer vs OCR\n"
    "  ops        Vulkan op GFLOP/s and GB/s vs the device roofline\n"
    "  tokenizer  tokenizer MB/s\n"
    "  engine     pages/s of the full vision-language engine\n"
    "  accuracy   orientation and classification accuracy on a generated corpus\n";

static const struct {
    const char *name;
    int (*fn)(int, char **);
} SUBJECTS[] = {
    {"ingest", bench_ingest}, {"queue", bench_queue},         {"ocr", bench_ocr},
    {"ops", bench_ops},       {"tokenizer", bench_tokenizer}, {"engine", bench_engine},
    {"pdf", bench_pdf},
    {"accuracy", bench_accuracy},
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
        if (strcmp(argv[1], SUBJECTS[i].name) == 0)
            return SUBJECTS[i].fn(argc - 1, argv + 1);
    return cli_usage_error("bench", "unknown subject '%s'", argv[1]);
}
