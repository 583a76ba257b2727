/*
 * folio eval: how good the stored results of a model key are, against the
 * user's corrections (default) or a truth file: the summary (accuracy,
 * precision of the results not flagged for review, and the engine's own
 * accuracy: a corrected document's result is its correction (schema 015),
 * so against the corrections the result is right by construction and
 * engine_label tells what the engine said), per label precision/recall,
 * the confusion matrix, and reliability bins (is a 0.8 confidence right
 * 80 % of the time?). A readable table by default, JSON lines with
 * --json. All counting is SQL over a temp table of (document, true label),
 * so a truth file and the corrections go through the same queries.
 */
#include "common/json.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio eval [OPTIONS]\n"
    "\n"
    "Scores the results of a model key against folio.corrections (the newest per\n"
    "document) or a truth file; prints a table (--json: JSON lines).\n"
    "\n";

struct eval_args {
    const char *db, *key, *truth;
    int json;
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
    {.name = "json", .kind = CLI_FLAG, .off = AT(json, int), .help = "JSON lines instead of the table"},
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

#define PAIRS " FROM eval_pairs WHERE model_key = $1"
/* Today's JSON lines (--json): the summary, per label, confusion, reliability. */
static int print_json(PGconn *c, const char *key, struct folio_err *err)
{
    int rc = 0;
    if (!rc)
        rc = print_rows(c,
                        "SELECT json_build_object('eval', 'summary', 'model_key', $1::text,"
                        " 'documents', count(*), 'right', count(*) FILTER (WHERE truth = predicted),"
                        " 'accuracy', round(avg((truth = predicted)::int)::numeric, 4),"
                        " 'accepted', count(*) FILTER (WHERE NOT needs_review),"
                        " 'precision_accepted', round(avg((truth = predicted)::int) FILTER (WHERE NOT needs_review)::numeric, 4),"
                        " 'engine_right', count(*) FILTER (WHERE truth = engine),"
                        " 'engine_accuracy', round(avg((truth = engine)::int)::numeric, 4))::text"
                        PAIRS,
                        key, err);
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
                        key, err);
    if (!rc)
        rc = print_rows(c,
                        "SELECT json_build_object('eval', 'confusion', 'truth', truth, 'predicted',"
                        " json_object_agg(predicted, n))::text FROM (SELECT truth, predicted, count(*) AS n" PAIRS
                        " GROUP BY 1, 2) x GROUP BY truth ORDER BY truth",
                        key, err);
    if (!rc)
        rc = print_rows(c,
                        "SELECT json_build_object('eval', 'reliability', 'conf', format('%s-%s', round(b / 10.0, 1), round((b + 1) / 10.0, 1)),"
                        " 'n', count(*), 'accuracy', round(avg((truth = predicted)::int)::numeric, 3),"
                        " 'mean_conf', round(avg(confidence)::numeric, 3))::text"
                        " FROM (SELECT least(floor(confidence * 10)::int, 9) AS b, *" PAIRS ") x GROUP BY b ORDER BY b",
                        key, err);
    return rc;
}

/* The same numbers as a table a person reads. */
static int print_table(PGconn *c, const char *key, struct folio_err *err)
{
    int rc = print_rows(c,
                        "SELECT format(E'model key %s: %s documents, %s right (accuracy %s); %s accepted, %s right"
                        " (precision above the review threshold %s)\\nengine''s own answers: %s right (accuracy %s;"
                        " a corrected document''s result is its correction)\\n',"
                        " $1::text, count(*), count(*) FILTER (WHERE truth = predicted),"
                        " coalesce(round(avg((truth = predicted)::int)::numeric, 3)::text, '-'),"
                        " count(*) FILTER (WHERE NOT needs_review),"
                        " count(*) FILTER (WHERE NOT needs_review AND truth = predicted),"
                        " coalesce(round(avg((truth = predicted)::int) FILTER (WHERE NOT needs_review)::numeric, 3)::text, '-'),"
                        " count(*) FILTER (WHERE truth = engine),"
                        " coalesce(round(avg((truth = engine)::int)::numeric, 3)::text, '-'))" PAIRS,
                        key, err);
    if (!rc)
        rc = print_rows(c,
                        "SELECT format('%-24s %6s %9s %9s %7s', 'label', 'truth', 'predicted', 'precision', 'recall')"
                        " UNION ALL (SELECT format('%-24s %6s %9s %9s %7s', left(l.label, 24),"
                        "  (SELECT count(*)" PAIRS " AND truth = l.label),"
                        "  (SELECT count(*)" PAIRS " AND predicted = l.label),"
                        "  coalesce((SELECT round(avg((truth = predicted)::int)::numeric, 3)" PAIRS
                        "            AND predicted = l.label)::text, '-'),"
                        "  coalesce((SELECT round(avg((truth = predicted)::int)::numeric, 3)" PAIRS
                        "            AND truth = l.label)::text, '-'))"
                        " FROM (SELECT truth AS label" PAIRS " UNION SELECT predicted" PAIRS ") l ORDER BY l.label)",
                        key, err);
    if (!rc)
        rc = print_rows(c,
                        "SELECT E'\\nmistakes (truth -> predicted: documents)' WHERE EXISTS (SELECT 1" PAIRS
                        " AND truth <> predicted)"
                        " UNION ALL (SELECT format('  %s -> %s: %s', truth, predicted, count(*))" PAIRS
                        " AND truth <> predicted GROUP BY truth, predicted ORDER BY count(*) DESC, truth, predicted)",
                        key, err);
    if (!rc)
        rc = print_rows(c,
                        "SELECT format(E'\\n%-9s %6s %9s %10s', 'conf', 'n', 'accuracy', 'mean conf')"
                        " UNION ALL (SELECT format('%-9s %6s %9s %10s', format('%s-%s', round(b / 10.0, 1),"
                        "  round((b + 1) / 10.0, 1)), count(*), round(avg((truth = predicted)::int)::numeric, 3),"
                        "  round(avg(confidence)::numeric, 3))"
                        " FROM (SELECT least(floor(confidence * 10)::int, 9) AS b, *" PAIRS ") x GROUP BY b ORDER BY b)",
                        key, err);
    return rc;
}
#undef PAIRS

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
                        " r.needs_review, r.model_key, coalesce(r.engine_label, r.label) AS engine"
                        " FROM eval_truth t JOIN folio.results r USING (document_id)", &err);
    if (!rc && !a.json)
        rc = print_table(c, key, &err);
    else if (!rc)
        rc = print_json(c, key, &err);
    if (c)
        PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
