/* folio file DIR --file-by PATTERN [--watch]: filing.c does the work. */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/review/review.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char USAGE[] =
    "usage: folio file DIR --file-by PATTERN [--watch [--interval S]] [--model-key K]\n"
    "\n"
    "Files the classified originals that `folio ingest DIR` moved to DIR/.folio/done/\n"
    "into DIR/.folio/filed/PATTERN, once their result has committed, and again when\n"
    "a correction changes the label. Fields: {label} (the newest whole-document\n"
    "correction, else the result), {yyyy} {mm} {dd} (the day it was ingested, UTC),\n"
    "{name} (the file's name) and {id} (the document id). Every value becomes one\n"
    "safe path component ('/' and controls as '_', no leading '.'); a taken name\n"
    "gets a counter (a.1.pdf), nothing is ever overwritten. Each move is a row in\n"
    "folio.filings. Run it on the host that ingests (files are local to it).\n"
    "\n";

struct file_args {
    const char *db, *pattern, *model_key, *ocr_lang;
    int watch, interval, searchable;
};
#define AT(m, type) CLI_AT(struct file_args, m, type)

static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "file-by", .kind = CLI_STR, .off = AT(pattern, const char *), .min = 1, .arg = "PATTERN",
     .help = "e.g. {label}/{yyyy}/{mm}/{name}"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(model_key, const char *), .arg = "K",
     .help = "whose results decide the label (default \"default\")"},
    {.name = "searchable-pdf", .kind = CLI_FLAG, .off = AT(searchable, int),
     .help = "also NAME.searchable.pdf beside each: Tesseract's PDF\nrenderer; PDF pages with a text layer kept as they are"},
    {.name = "ocr-lang", .kind = CLI_STR, .off = AT(ocr_lang, const char *), .min = 1, .arg = "LANGS",
     .help = "Tesseract languages of --searchable-pdf (default eng)"},
    {.name = "watch", .kind = CLI_FLAG, .off = AT(watch, int), .help = "keep filing until SIGTERM/SIGINT"},
    {.name = "interval", .kind = CLI_INT, .off = AT(interval, int), .min = 1, .max = 86400, .arg = "S",
     .help = "seconds between passes with --watch (default 5)"},
};

static const struct cli_cmd CMD = {
    .name = "file", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .min_pos = 1,
    .max_pos = 1,
};

int cmd_file(int argc, char **argv)
{
    struct file_args a = {.model_key = "default", .interval = 5, .ocr_lang = "eng"};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    if (!a.pattern)
        return cli_usage_error("file", "--file-by PATTERN is required");
    char dir[PATH_MAX];
    if (!realpath(argv[pos], dir)) {
        fprintf(stderr, "folio: error: %s: %s\n", argv[pos], strerror(errno));
        return FOLIO_EXIT_FAIL;
    }
    struct folio_err err = {0};
    char probe[PATH_MAX];
    struct filing_vars v = {"label", "2026", "01", "31", "name.pdf", "1"};
    if (filing_expand(a.pattern, &v, probe, sizeof probe, &err)) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_USAGE;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    PGconn *c = NULL;
    if (cli_connect(a.db, "folio file", &c))
        return FOLIO_EXIT_FAIL;
    struct filing_opts o = {.dir = dir, .pattern = a.pattern, .model_key = a.model_key, .searchable = a.searchable,
                            .ocr_lang = a.ocr_lang};
    struct filing_stats st = {0};
    int rc = 0;
    for (;;) {
        if ((rc = filing_pass(c, &o, &st, &err)))
            break;
        if (!a.watch)
            break;
        /* the wait is the signal wait: SIGTERM ends it at once */
        struct timespec ts = {.tv_sec = a.interval};
        if (sigtimedwait(&sigs, NULL, &ts) > 0)
            break;
    }
    PQfinish(c);
    printf("folio file: %lld filed, %lld not found, %lld failed\n", st.filed, st.missing, st.failed);
    if (a.searchable)
        printf("folio file: %lld searchable PDFs, %lld pages OCR'd (%.0f ms per page), %lld text pages kept\n",
               st.searchable, st.searchable_pages,
               st.searchable_pages ? st.searchable_ms / (double)st.searchable_pages : 0.0, st.searchable_kept);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return st.failed ? FOLIO_EXIT_FAIL : FOLIO_EXIT_OK;
}
