/* folio: one binary, subcommands. Exit codes: 0 ok, 1 failure, 2 usage. */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/config.h"
#include "pipeline/db/db.h"
#include "pipeline/worker/worker.h"

#include <stdio.h>
#include <string.h>

struct subcommand {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
};

static const struct subcommand CMDS[] = {
    {"migrate", cmd_migrate, "create or upgrade the folio schema in PostgreSQL"},
    {"ingest", cmd_ingest, "take scans from a folder into the queue"},
    {"worker", cmd_worker, "claim jobs and classify documents"},
    {"classify", cmd_classify, "classify files directly, no database (JSON per file)"},
    {"status", cmd_status, "show the queue, workers and recent rejections"},
    {"doctor", cmd_doctor, "check devices, drivers, models and the database"},
    {"bench", cmd_bench, "measure throughput (JSON lines)"},
    {"version", cmd_version, "print versions of folio and its libraries"},
    {"config", cmd_config, "check the configuration file, show effective options"},
    {"jobs", cmd_jobs, "list, retry or cancel jobs (dead letters, failures)"},
    {"export", cmd_export, "stream results as CSV or JSON lines"},
    {"show", cmd_show, "one document: sources, jobs, results, OCR text, page PNG"},
    {"report", cmd_report, "write an HTML report, or serve the review page (--listen)"},
    {"correct", cmd_correct, "record what a document really is (trains ocr+learned)"},
    {"train", cmd_train, "train the ocr+learned tier from the corrections"},
    {"file", cmd_file, "file classified originals by label and date (--file-by)"},
    {"split", cmd_split, "make new documents of the parts of a multi-page PDF"},
    {"search", cmd_search, "find documents by the text of their pages"},
    {"models", cmd_models, "list, show, activate or drop ocr+learned models"},
    {"eval", cmd_eval, "accuracy, confusion and calibration of stored results"},
    {"labels", cmd_labels, "list, export, import or test label sets"},
    {"reclassify", cmd_reclassify, "re-queue documents for a new result, keeping the old"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: folio COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++)
        fprintf(f, "  %-9s %s\n", CMDS[i].name, CMDS[i].summary);
    fprintf(f, "\nRun 'folio COMMAND --help' for a command's options.\n"
               "Database: --db CONNINFO, else $FOLIO_DB, else libpq's PG* defaults.\n"
               "Configuration: --config FILE, else $FOLIO_CONFIG, else " CONFIG_DEFAULT_PATH "\n"
               "(see 'folio config --help'); command line > FOLIO_* environment > file.\n"
               "Exit codes: 0 ok, 1 failure, 2 usage error.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return FOLIO_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return FOLIO_EXIT_OK;
    }
    argc = db_hide_password_arg(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return FOLIO_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(1, argv + 1);
    /* Subcommands that run Tesseract need OMP_THREAD_LIMIT set before the
     * OpenMP runtime loads (see worker_ensure_omp_limit). */
    if (strcmp(argv[1], "worker") == 0 || strcmp(argv[1], "classify") == 0 || strcmp(argv[1], "bench") == 0)
        worker_ensure_omp_limit(argv);
    /* Commands with options read the configuration file and FOLIO_*
     * variables: they arrive as arguments in front of the user's own. */
    const struct config_command *cc = config_find_command(argv[1]);
    if (cc) {
        int nargc = 0;
        char **nargv = NULL;
        int rc = config_apply(cc, argc - 1, argv + 1, &nargc, &nargv);
        if (rc != FOLIO_EXIT_OK)
            return rc;
        rc = cc->fn(nargc, nargv);
        config_argv_free(nargc, nargv);
        return rc;
    }
    for (size_t i = 0; i < sizeof CMDS / sizeof CMDS[0]; i++)
        if (strcmp(argv[1], CMDS[i].name) == 0)
            return CMDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "folio: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return FOLIO_EXIT_USAGE;
}
