/* folio search QUERY: full text over the stored OCR and text-layer text
 * (search.c runs the query the review page's search box runs too). */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/review/review.h"

#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio search [OPTIONS] QUERY...\n"
    "\n"
    "Finds documents by the text their pages hold (OCR, or the PDF's own text\n"
    "layer), best match first. QUERY is web-search syntax: words are ANDed,\n"
    "\"quoted phrases\", OR, and -word to exclude; English stemming (invoices\n"
    "finds invoice). One line per document: rank, id, label, confidence, date\n"
    "(UTC), file name and a snippet with the matches in [brackets]. Exits 1 when\n"
    "nothing matches.\n"
    "\n";

struct search_args {
    const char *db;
    struct doc_filter f;
};
#define AT(m, type) CLI_AT(struct search_args, m, type)

static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "label", .kind = CLI_STR, .off = AT(f.label, const char *), .arg = "LABEL",
     .help = "only documents classified as LABEL"},
    {.name = "tier", .kind = CLI_STR, .off = AT(f.tier, const char *), .arg = "PATH",
     .help = "only results of one engine path (vision, ocr+lm, ...)"},
    {.name = "from", .kind = CLI_STR, .off = AT(f.from, const char *), .arg = "YYYY-MM-DD",
     .help = "only results of this day or later (UTC)"},
    {.name = "to", .kind = CLI_STR, .off = AT(f.to, const char *), .arg = "YYYY-MM-DD",
     .help = "only results of this day or earlier (UTC)"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(f.model_key, const char *), .arg = "K",
     .help = "results of one model configuration (default: all)"},
    {.name = "limit", .kind = CLI_INT, .off = AT(f.limit, int), .min = 1, .max = 100000, .arg = "N",
     .help = "at most N documents (default 20)"},
};

static const struct cli_cmd CMD = {
    .name = "search", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .min_pos = 1,
    .max_pos = 1 << 30,
};

int cmd_search(int argc, char **argv)
{
    struct search_args a = {.f = {.review = DOC_ALL, .limit = 20}};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    /* The words may come as one argument or several (unquoted). */
    char q[4096] = "";
    for (int i = pos; i < argc; i++)
        if (folio_snprintf(q + strlen(q), sizeof q - strlen(q), "%s%s", i > pos ? " " : "", argv[i]) != 0)
            return cli_usage_error("search", "the query is longer than %zu bytes", sizeof q - 1);
    a.f.query = q;
    struct folio_err err = {0};
    if (doc_filter_check(&a.f, &err)) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_USAGE;
    }
    PGconn *c = NULL;
    if (cli_connect(a.db, "folio search", &c))
        return FOLIO_EXIT_FAIL;
    PGresult *r = NULL;
    int rc = doc_query(c, &a.f, &r, &err);
    PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    /* File names and page text are anybody's bytes: quoted and escaped as
     * the logs are, so no control sequence reaches the terminal. */
    static char lbl[256], name[1024], snip[4096];
    for (int i = 0; i < PQntuples(r); i++)
        printf("%s %s %s %s %s %s %s\n", PQgetvalue(r, i, DOC_COL_RANK), PQgetvalue(r, i, DOC_COL_ID),
               folio_lq(lbl, sizeof lbl, PQgetvalue(r, i, DOC_COL_LABEL)), PQgetvalue(r, i, DOC_COL_CONF),
               PQgetvalue(r, i, DOC_COL_DATE), folio_lq(name, sizeof name, PQgetvalue(r, i, DOC_COL_NAME)),
               folio_lq(snip, sizeof snip, PQgetvalue(r, i, DOC_COL_SNIPPET)));
    if (PQntuples(r) == 0)
        fprintf(stderr, "folio: no document matches\n");
    int n = PQntuples(r);
    PQclear(r);
    return n ? FOLIO_EXIT_OK : FOLIO_EXIT_FAIL;
}
