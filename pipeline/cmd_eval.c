/*
 * folio eval: how good the stored results of a model key are, against the
 * user's corrections (default) or a truth file. JSON lines: the summary
 * (accuracy, precision of the results not flagged for review), per label
 * precision/recall, the confusion matrix, and reliability bins (is a 0.8
 * confidence right 80 % of the time?). All counting is SQL over a temp
 * table of (document, true label), so a truth file and the corrections go
 * through the same queries.
 */
#include "common/json.h"
#include "pipeline/cli.h"
#include "pipeline/commands.h"
#include "pipeline/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio eval [OPTIONS]\n"
    "\n"
    "Scores the results of a model key against folio.corrections (the newest per\n"
    "document) or a truth file; prints JSON lines.\n"
    "\n";

struct eval_args {
    const char *db, *key, *truth;
};
#define AT(m, type) CLI_AT(struct eval_args, m, type)

static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(key, const char *), .arg = "KEY",
     .help = "results to score (default \"default\")"},
    {.name = "truth", .kind = CLI_STR, .off = AT(truth, const char *), .arg = "FILE",
     .help = "lines of \"DOC<TAB>LABEL\" (DOC: " DB_DOC_HELP ")\n"
             "instead of the corrections"},
};

static const struct cli_cmd CMD = {
    .name = "eval", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .help_col = 19,
};

static int load_truth(PGconn *c, const char *path, struct folio_err *err)
{
    char *text = NULL;
    int rc = folio_read_text(path, 64u << 20, &text, err);
    if (rc)
        return rc;
    int lineno = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        line[strcspn(line, "\r")] = 0;
        if (!*line || *line == '#')
            continue;
        char *tab = strchr(line, '\t');
        if (!tab) {
            rc = folio_err_set(err, FOLIO_EINVAL, "%s line %d: no tab between the document and its label", path, lineno);
            break;
        }
        *tab = 0;
        long long id;
        if ((rc = db_resolve_doc(c, line, &id, err)) != 0) {
            folio_err_prefix(err, "%s line %d: ", path, lineno);
            break;
        }
        char ids[32];
        snprintf(ids, sizeof ids, "%lld", id);
        const char *p[2] = {ids, tab + 1};
        PGresult *r = PQexecParams(c, "INSERT INTO eval_truth VALUES ($1::bigint, $2)", 2, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = db_err_from_result(r, c, "loading the truth file", err);
        else
            PQclear(r);
    }
    free(text);
    return rc;
}

/* Runs sql (one row per output line, first column a JSON text) and prints. */
static int print_rows(PGconn *c, const char *sql, const char *key, struct folio_err *err)
{
    const char *p[1] = {key};
    PGresult *r = PQexecParams(c, sql, 1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "scoring", err);
    for (int i = 0; i < PQntuples(r); i++)
        puts(PQgetvalue(r, i, 0));
    PQclear(r);
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    struct eval_args a = {.key = "default"};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = a.db, *key = a.key, *truth = a.truth;
    struct folio_err err = {0};
    PGconn *c = NULL;
    int rc = db_connect(db_conninfo(db), "folio eval", &c, &err);
    if (!rc)
        rc = db_exec(c, "CREATE TEMP TABLE eval_truth (document_id bigint PRIMARY KEY, label text NOT NULL)", &err);
    if (!rc && truth)
        rc = load_truth(c, truth, &err);
    else if (!rc)
        rc = db_exec(c, "INSERT INTO eval_truth SELECT DISTINCT ON (document_id) document_id, label"
                        " FROM folio.corrections ORDER BY document_id, id DESC", &err);
    if (!rc)
        rc = db_exec(c, "CREATE TEMP VIEW eval_pairs AS SELECT t.label AS truth, r.label AS predicted, r.confidence,"
                        " r.needs_review, r.model_key FROM eval_truth t JOIN folio.results r USING (document_id)", &err);
#define PAIRS " FROM eval_pairs WHERE model_key = $1"
    if (!rc)
        rc = print_rows(c,
                        "SELECT json_build_object('eval', 'summary', 'model_key', $1::text,"
                        " 'documents', count(*), 'right', count(*) FILTER (WHERE truth = predicted),"
                        " 'accuracy', round(avg((truth = predicted)::int)::numeric, 4),"
                        " 'accepted', count(*) FILTER (WHERE NOT needs_review),"
                        " 'precision_accepted', round(avg((truth = predicted)::int) FILTER (WHERE NOT needs_review)::numeric, 4))::text"
                        PAIRS,
                        key, &err);
    if (!rc)
        rc = print_rows(c,
                        "WITH l AS (SELECT truth AS label" PAIRS " UNION SELECT predicted" PAIRS ")"
                        " SELECT json_build_object('eval', 'label', 'label', l.label,"
                        "  'n', (SELECT count(*)" PAIRS " AND truth = l.label),"
                        "  'predicted', (SELECT count(*)" PAIRS " AND predicted = l.label),"
                        "  'precision', (SELECT round(avg((truth = predicted)::int)::numeric, 3)" PAIRS
                        "                 AND predicted = l.label),"
                        "  'recall', (SELECT round(avg((truth = predicted)::int)::numeric, 3)" PAIRS
                        "              AND truth = l.label))::text FROM l ORDER BY l.label",
                        key, &err);
    if (!rc)
        rc = print_rows(c,
                        "SELECT json_build_object('eval', 'confusion', 'truth', truth, 'predicted',"
                        " json_object_agg(predicted, n))::text FROM (SELECT truth, predicted, count(*) AS n" PAIRS
                        " GROUP BY 1, 2) x GROUP BY truth ORDER BY truth",
                        key, &err);
    if (!rc)
        rc = print_rows(c,
                        "SELECT json_build_object('eval', 'reliability', 'conf', format('%s-%s', round(b / 10.0, 1), round((b + 1) / 10.0, 1)),"
                        " 'n', count(*), 'accuracy', round(avg((truth = predicted)::int)::numeric, 3),"
                        " 'mean_conf', round(avg(confidence)::numeric, 3))::text"
                        " FROM (SELECT least(floor(confidence * 10)::int, 9) AS b, *" PAIRS ") x GROUP BY b ORDER BY b",
                        key, &err);
#undef PAIRS
    if (c)
        PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
