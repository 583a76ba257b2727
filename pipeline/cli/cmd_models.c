/*
 * folio models list | show ID | activate ID | drop ID: the ocr+learned
 * models of folio.learned_models (schema 014). Each model is a version:
 * what it learned from, its scores on the held-out corrections beside the
 * model that was active when it was trained, and why the guard in
 * learn_db_train made it active or kept it inactive. `activate` is the
 * person's override of that guard (workers switch at their next label
 * refresh); `drop` deletes a model, and dropping the active one leaves the
 * key with the rules tier until a model is activated or trained.
 */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio models [--db CONNINFO] [--model-key KEY] list\n"
    "       folio models [--db CONNINFO] show|activate|drop ID\n"
    "\n"
    "The ocr+learned models (folio train, or a worker's automatic retrain). One\n"
    "model per key is active: a new one only when, on the held-out corrections, it\n"
    "is no worse than the active one; `activate` overrides that.\n"
    "\n";

struct models_args {
    const char *db, *key;
};

static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = CLI_AT(struct models_args, db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "model-key", .kind = CLI_STR, .off = CLI_AT(struct models_args, key, const char *), .arg = "KEY",
     .help = "list only this key's models"},
};

static const struct cli_cmd CMD = {
    .name = "models", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 2,
    .help_col = 24,
};

/* One row per printed line, the first column of each. */
static int print_lines(PGconn *c, const char *sql, int np, const char *const *p, const char *what,
                       struct folio_err *err, int *rows)
{
    PGresult *r = PQexecParams(c, sql, np, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, what, err);
    /* the comparison, model key and trainer's role are database text:
     * written through the terminal escaper (line breaks stay) */
    for (int i = 0; i < PQntuples(r); i++) {
        folio_term_puts(stdout, PQgetvalue(r, i, 0));
        fputc('\n', stdout);
    }
    if (rows)
        *rows = PQntuples(r);
    PQclear(r);
    return 0;
}

static int list(PGconn *c, const char *key, struct folio_err *err)
{
    const char *p[1] = {key};
    printf("%-6s %-12s %-8s %8s %8s %6s %8s %9s  %-19s  %s\n", "id", "model_key", "state", "examples", "learned",
           "labels", "accuracy", "precision", "created", "comparison");
    int rows = 0;
    int rc = print_lines(
        c,
        "SELECT format('%-6s %-12s %-8s %8s %8s %6s %8s %9s  %-19s  %s', id, left(model_key, 12),"
        "  CASE WHEN active THEN 'active' ELSE 'inactive' END, examples, coalesce(trained_on::text, '-'),"
        "  (SELECT count(*) FROM jsonb_object_keys(per_label)),"
        "  coalesce(round((held_out->'model'->>'accuracy')::numeric, 3)::text, '-'),"
        "  coalesce(round((held_out->'model'->>'precision_accepted')::numeric, 3)::text, '-'),"
        "  to_char(created_at, 'YYYY-MM-DD HH24:MI:SS'), coalesce(comparison, ''))"
        " FROM folio.learned_models WHERE $1::text IS NULL OR model_key = $1 ORDER BY model_key, id",
        1, p, "reading folio.learned_models", err, &rows);
    if (!rc && rows == 0)
        printf("(no models: folio train makes one from folio.corrections)\n");
    return rc;
}

static int show(PGconn *c, const char *id, struct folio_err *err)
{
    const char *p[1] = {id};
    int rows = 0;
    int rc = print_lines(c,
                         "SELECT format(E'model %s (%s, %s)\\n  trained   %s by %s from %s examples, %s learned from,"
                         " corrections up to id %s\\n  labels    %s\\n  held-out  %s\\n  guard     %s',"
                         " id, model_key, CASE WHEN active THEN 'active' ELSE 'inactive' END,"
                         " to_char(created_at, 'YYYY-MM-DD HH24:MI:SS'), trained_by, examples,"
                         " coalesce(trained_on::text, 'all'), corrections_upto, per_label::text,"
                         " coalesce(held_out::text, 'not measured (trained before schema 14)'),"
                         " coalesce(comparison, ''))"
                         " FROM folio.learned_models WHERE id = $1::bigint",
                         1, p, "reading folio.learned_models", err, &rows);
    if (!rc && rows == 0)
        rc = folio_err_set(err, FOLIO_EINVAL, "there is no model %s (folio models list shows them)", id);
    return rc;
}

/* activate: the one active model of its key, in one transaction. */
static int activate(PGconn *c, const char *id, struct folio_err *err)
{
    const char *p[1] = {id};
    int rc = db_exec(c, "BEGIN", err);
    PGresult *r = NULL;
    if (!rc) {
        r = PQexecParams(c,
                         "WITH m AS (SELECT model_key FROM folio.learned_models WHERE id = $1::bigint),"
                         " off AS (UPDATE folio.learned_models l SET active = false FROM m"
                         "          WHERE l.model_key = m.model_key AND l.active AND l.id <> $1::bigint)"
                         " SELECT model_key FROM m",
                         1, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            rc = db_err_from_result(r, c, "switching off the active model", err);
        else if (PQntuples(r) == 0)
            rc = folio_err_set(err, FOLIO_EINVAL, "there is no model %s (folio models list shows them)", id);
        if (r && !rc)
            PQclear(r);
    }
    if (!rc) {
        /* a separate statement: the UPDATE above must be visible before
         * the unique index sees a second active row */
        r = PQexecParams(c,
                         "UPDATE folio.learned_models SET active = true,"
                         " comparison = coalesce(comparison, '') || ' (activated by ' || current_user || ' at '"
                         "   || to_char(now(), 'YYYY-MM-DD HH24:MI:SS') || ')'"
                         " WHERE id = $1::bigint AND NOT active",
                         1, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = db_err_from_result(r, c, "activating the model", err);
        else
            PQclear(r);
    }
    if (!rc)
        rc = db_exec(c, "COMMIT", err);
    if (rc)
        PQclear(PQexec(c, "ROLLBACK"));
    if (!rc)
        printf("model %s is active (workers load it at their next label refresh)\n", id);
    return rc;
}

static int drop(PGconn *c, const char *id, struct folio_err *err)
{
    const char *p[1] = {id};
    PGresult *r = PQexecParams(c, "DELETE FROM folio.learned_models WHERE id = $1::bigint RETURNING active, model_key",
                               1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "dropping the model", err);
    int rc = 0;
    if (PQntuples(r) == 0)
        rc = folio_err_set(err, FOLIO_EINVAL, "there is no model %s (folio models list shows them)", id);
    else if (strcmp(PQgetvalue(r, 0, 0), "t") == 0)
        printf("model %s dropped; it was the active one: key %s uses the rules tier until a model is activated"
               " (folio models activate ID) or trained\n",
               id, PQgetvalue(r, 0, 1));
    else
        printf("model %s dropped\n", id);
    PQclear(r);
    return rc;
}

int cmd_models(int argc, char **argv)
{
    struct models_args a = {0};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *sub = pos < argc ? argv[pos] : "list";
    const char *id = pos + 1 < argc ? argv[pos + 1] : NULL;
    int want_id = strcmp(sub, "show") == 0 || strcmp(sub, "activate") == 0 || strcmp(sub, "drop") == 0;
    if (!want_id && strcmp(sub, "list") != 0)
        return cli_usage_error("models", "unknown subcommand '%s' (list, show, activate, drop)", sub);
    if (want_id && !id)
        return cli_usage_error("models", "%s wants a model ID (folio models list shows them)", sub);
    if (!want_id && id)
        return cli_usage_error("models", "list takes no ID");
    if (id && strspn(id, "0123456789") != strlen(id))
        return cli_usage_error("models", "'%s' is not a model id (a number)", id);
    struct folio_err err = {0};
    PGconn *c = NULL;
    int rc = db_connect(db_conninfo(a.db), "folio models", &c, &err);
    if (!rc) {
        if (strcmp(sub, "list") == 0)
            rc = list(c, a.key, &err);
        else if (strcmp(sub, "show") == 0)
            rc = show(c, id, &err);
        else if (strcmp(sub, "activate") == 0)
            rc = activate(c, id, &err);
        else
            rc = drop(c, id, &err);
    }
    if (c)
        PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
