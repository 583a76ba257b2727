/* folio split DOC [--at PAGES | --suggested]: split.c does the work. */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/review/review.h"

#include <stdio.h>
#include <stdlib.h>

static const char USAGE[] =
    "usage: folio split DOC (--at PAGE[,PAGE...] | --suggested) [--model-key K]\n"
    "\n"
    "Makes a new document of each part of multi-page PDF DOC (its id): along the\n"
    "worker's split suggestion (folio.split_suggestions) or starting a part at\n"
    "each PAGE given. Each part is ingested like a scanned file (validated, stored,\n"
    "queued) and its job reuses the original's page text; the original is kept and\n"
    "linked (folio.document_splits). Splitting again finds the same parts.\n"
    "\n";

struct split_args {
    const char *db, *at, *model_key;
    int suggested;
};
#define AT(m, type) CLI_AT(struct split_args, m, type)

static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "at", .kind = CLI_STR, .off = AT(at, const char *), .min = 1, .arg = "PAGES",
     .help = "first pages of the parts after the first (3,5: 1-2, 3-4, 5-)"},
    {.name = "suggested", .kind = CLI_FLAG, .off = AT(suggested, int),
     .help = "split along the stored suggestion of the result"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(model_key, const char *), .arg = "K",
     .help = "whose suggestion and which queue (default \"default\")"},
};

static const struct cli_cmd CMD = {
    .name = "split", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .min_pos = 1,
    .max_pos = 1,
};

int cmd_split(int argc, char **argv)
{
    struct split_args a = {.model_key = "default"};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    long long doc;
    if (folio_parse_int(argv[pos], 1, INT64_MAX, &doc))
        return cli_usage_error("split", "DOC is a document id, got '%s'", argv[pos]);
    if (!a.at == !a.suggested)
        return cli_usage_error("split", "give one of --at PAGES or --suggested");
    const char *conninfo = db_conninfo(a.db);
    PGconn *c = NULL;
    if (cli_connect(a.db, "folio split", &c))
        return FOLIO_EXIT_FAIL;
    struct split_report rep;
    struct folio_err err = {0};
    int rc = split_apply(c, conninfo, doc, a.model_key, a.at, &rep, &err);
    PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return rc == FOLIO_EINVAL ? FOLIO_EXIT_USAGE : FOLIO_EXIT_FAIL;
    }
    for (int i = 0; i < rep.n; i++)
        printf("pages %d-%d: document %lld (%s%s)\n", rep.part[i].first, rep.part[i].last, rep.part[i].child,
               rep.part[i].is_new ? "new" : "split off before", rep.part[i].text_reused ? ", text reused" : "");
    return FOLIO_EXIT_OK;
}
