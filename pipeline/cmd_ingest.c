/* folio ingest: argument parsing now; the work arrives with issue 3 (ingest stage). */
#include "pipeline/pipeline.h"

#include <getopt.h>
#include <stdio.h>

static const char USAGE[] =
    "usage: folio ingest [OPTIONS] DIR\n"
    "\n"
    "Takes every scan dropped into DIR into the queue (one document + one job per\n"
    "file), or rejects it with a reason under DIR/.folio/rejected/.\n"
    "\n"
    "  --db CONNINFO        PostgreSQL connection (default $FOLIO_DB, then PG*)\n"
    "  --watch              keep running: inotify plus periodic rescans\n"
    "  --recursive          descend into subdirectories\n"
    "  --rescan SECONDS     full rescan period in --watch mode (default 60)\n"
    "  --stable-ms MS       size+mtime must hold still this long (default 2000)\n"
    "  --follow-symlinks    accept symbolic links (refused by default)\n"
    "  --max-bytes SIZE     largest file accepted (default 512MiB)\n"
    "  --max-pixels N       largest page in pixels (default 300000000)\n"
    "  --max-pages N        most pages per document (default 2000)\n"
    "  --after MODE         move (default) | delete | keep\n"
    "  --model-key KEY      model configuration the jobs are queued for (default \"default\")\n";

int cmd_ingest(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 1000},
        {"watch", no_argument, 0, 1001},
        {"recursive", no_argument, 0, 1002},
        {"rescan", required_argument, 0, 1003},
        {"stable-ms", required_argument, 0, 1004},
        {"follow-symlinks", no_argument, 0, 1005},
        {"max-bytes", required_argument, 0, 1006},
        {"max-pixels", required_argument, 0, 1007},
        {"max-pages", required_argument, 0, 1008},
        {"after", required_argument, 0, 1009},
        {"model-key", required_argument, 0, 1010},
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
            return cli_usage_error("ingest", "unknown or incomplete option '%s'", argv[optind - 1]);
    }
    if (optind >= argc)
        return cli_usage_error("ingest", "missing argument");
    return cli_not_built("the ingest stage", "issue 3 (ingest stage)");
}
