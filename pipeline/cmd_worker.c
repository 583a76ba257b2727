/* folio worker: argument parsing now; the work arrives with issue 4 (queue worker fleet). */
#include "pipeline/pipeline.h"

#include <getopt.h>
#include <stdio.h>

static const char USAGE[] =
    "usage: folio worker [OPTIONS]\n"
    "\n"
    "Claims jobs from PostgreSQL and classifies each document, writing results back.\n"
    "\n"
    "  --db CONNINFO        PostgreSQL connection (default $FOLIO_DB, then PG*)\n"
    "  --batch N            jobs claimed at once (default 1)\n"
    "  --lease SECONDS      job lease (default 60)\n"
    "  --grace SECONDS      time to finish in-flight jobs on SIGTERM (default 30)\n"
    "  --retain DURATION    delete finished jobs older than this (default 7d)\n"
    "  --max-attempts N     attempts before a job is dead (default: the job's own)\n"
    "  --model-key KEY      model configuration served (default \"default\")\n"
    "  --model FILE         text model GGUF (enables the ocr+lm path)\n"
    "  --mmproj FILE        vision projector GGUF (enables the vision path)\n"
    "  --device SPEC        Vulkan device: index, UUID or name substring\n"
    "  --ocr-lang LANGS     Tesseract languages (default eng)\n"
    "  --ocr-threads N      documents OCR'd in parallel (default: cores)\n"
    "  --ocr-max-pages N    pages OCR'd per document (default 10)\n";

int cmd_worker(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 1000},
        {"batch", required_argument, 0, 1001},
        {"lease", required_argument, 0, 1002},
        {"grace", required_argument, 0, 1003},
        {"retain", required_argument, 0, 1004},
        {"max-attempts", required_argument, 0, 1005},
        {"model-key", required_argument, 0, 1006},
        {"model", required_argument, 0, 1007},
        {"mmproj", required_argument, 0, 1008},
        {"device", required_argument, 0, 1009},
        {"ocr-lang", required_argument, 0, 1010},
        {"ocr-threads", required_argument, 0, 1011},
        {"ocr-max-pages", required_argument, 0, 1012},
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
            return cli_usage_error("worker", "unknown or incomplete option '%s'", argv[optind - 1]);
    }
    if (optind < argc)
        return cli_usage_error("worker", "unexpected argument '%s'", argv[optind]);
    return cli_not_built("the worker", "issue 4 (queue worker fleet)");
}
