/*
 * folio labels list | export | import FILE | test FILE...: the taxonomy in
 * folio.labels, in the one label-file format `folio classify --labels`
 * reads (engine_labels_parse), so a set can be tried on files first and
 * then loaded for the fleet unchanged.
 */
#include "common/json.h"
#include "engine/engine.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/db/learn_db.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: folio labels list|export|import|test [OPTIONS]\n"
    "\n"
    "  list [--db C]                    the labels in folio.labels\n"
    "  export [--db C] [--all]          active (or all) labels as a label file on stdout\n"
    "  import [--db C] [--replace] FILE load a label file: new labels are added, listed\n"
    "                                   ones get the file's keywords and are active;\n"
    "                                   --replace deactivates labels the file does not list\n"
    "  test FILE...                     check label files (errors name the line)\n"
    "  builtin [NAME]                   the built-in sets, or set NAME as a label file\n"
    "\n"
    "Label file: one label per line,\n"
    "  name (description): keyword, \"a, phrase\", weighted^3  # comment\n"
    "(the description optional). FILE may name a built-in set instead: business (the\n"
    "default: receipt, invoice, purchase order, ... memo) or rvl-cdip (the 16 RVL-CDIP\n"
    "classes), e.g. folio labels import --replace rvl-cdip.\n";

/* Reads and parses a label file; with report set, every bad line goes to
 * it and parsing goes on (engine_labels_parse_each). */
static int labels_file_read(const char *path, void (*report)(void *, const struct folio_err *),
                            struct engine_labels **out, struct folio_err *err)
{
    char *text = NULL;
    const char *set = engine_label_set(path);
    int rc = 0;
    if (set && access(path, F_OK) != 0)
        text = strdup(set); /* a built-in set by name, unless a file has that name */
    else
        rc = folio_read_text(path, 16u << 20, &text, err);
    if (rc)
        return rc;
    if (!text)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    struct engine_labels *l = engine_labels_new();
    rc = l ? engine_labels_parse_each(l, text, path, report, NULL, err)
           : folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    free(text);
    if (rc)
        engine_labels_free(l);
    else
        *out = l;
    return rc;
}

int labels_file_parse(const char *path, struct engine_labels **out, struct folio_err *err)
{
    return labels_file_read(path, NULL, out, err);
}

static void print_problem(void *ctx, const struct folio_err *e)
{
    (void)ctx;
    folio_err_print(stderr, e);
}

static int labels_test(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("labels", "test wants FILE...");
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        struct folio_err err = {0};
        struct engine_labels *l = NULL;
        if (labels_file_read(argv[i], print_problem, &l, &err)) {
            folio_err_print(stderr, &err);
            bad++;
            continue;
        }
        folio_term_puts(stdout, argv[i]);
        printf(": %d labels ok\n", engine_labels_count(l));
        engine_labels_free(l);
    }
    return bad ? FOLIO_EXIT_FAIL : FOLIO_EXIT_OK;
}

/* A keyword as the file format writes it: quoted when it holds a comma or
 * a '#', which the parser would otherwise split on. */
static void put_keyword(const char *label, const char *kw)
{
    if (strchr(kw, '"')) {
        /* the format has no escape for a quote; SQL can hold one */
        fprintf(stderr, "folio labels: label '%s': keyword ", label);
        folio_term_puts(stderr, kw);
        fputs(" has a '\"', left out of the export\n", stderr);
        return;
    }
    /* text from the database: controls, C1 and bidi overrides escaped */
    bool quote = strpbrk(kw, ",#") != NULL;
    if (quote)
        fputc('"', stdout);
    folio_term_puts(stdout, kw);
    if (quote)
        fputc('"', stdout);
}

int labels_db_store(PGconn *c, const struct engine_labels *l, int replace, struct folio_err *err)
{
    int rc = 0;
    for (int i = 0; !rc && i < engine_labels_count(l); i++) {
        /* keywords as a text[] literal built from the parsed set: the
         * parser already refused anything it could not represent */
        struct json_buf arr;
        json_init(&arr);
        json_raw(&arr, "{");
        char kw[256];
        for (int k = 0; engine_labels_keyword(l, i, k, kw, sizeof kw) == 0; k++) {
            if (k)
                json_raw(&arr, ",");
            db_array_elem(&arr, kw);
        }
        json_raw(&arr, "}");
        /* a description in the file replaces the stored one; none keeps it */
        const char *p[3] = {engine_labels_name(l, i), arr.s, engine_labels_description(l, i)};
        PGresult *r = arr.oom ? NULL
                              : PQexecParams(c,
                                             "INSERT INTO folio.labels (name, keywords, description) VALUES ($1, $2::text[], $3)"
                                             " ON CONFLICT (name) DO UPDATE SET keywords = excluded.keywords,"
                                             " active = true, description = CASE WHEN $3 <> '' THEN $3"
                                             " ELSE folio.labels.description END",
                                             3, NULL, p, NULL, NULL, 0);
        if (!r)
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory");
        else if (PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = db_err_from_result(r, c, "storing a label", err);
        else
            PQclear(r);
        json_free(&arr);
    }
    if (!rc && replace) {
        struct json_buf names;
        json_init(&names);
        json_raw(&names, "{");
        for (int i = 0; i < engine_labels_count(l); i++) {
            json_raw(&names, i ? ",\"" : "\"");
            json_raw(&names, engine_labels_name(l, i)); /* a-z 0-9 _ - space only */
            json_raw(&names, "\"");
        }
        json_raw(&names, "}");
        const char *p[1] = {names.s};
        PGresult *r = PQexecParams(c, "UPDATE folio.labels SET active = false WHERE NOT (name = ANY ($1::text[]))",
                                   1, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = db_err_from_result(r, c, "deactivating labels", err);
        else
            PQclear(r);
        json_free(&names);
    }
    return rc;
}

static int labels_db(const char *sub, const char *db, int all, int replace, const char *file)
{
    struct folio_err err = {0};
    struct engine_labels *l = NULL;
    if (file && labels_file_parse(file, &l, &err)) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    PGconn *c = NULL;
    if (db_connect(db_conninfo(db), "folio labels", &c, &err)) {
        folio_err_print(stderr, &err);
        engine_labels_free(l);
        return FOLIO_EXIT_FAIL;
    }
    int rc = 0;
    if (strcmp(sub, "import") == 0) {
        rc = db_exec(c, "BEGIN", &err);
        if (!rc)
            rc = labels_db_store(c, l, replace, &err);
        if (!rc)
            rc = db_exec(c, "COMMIT", &err);
        if (!rc)
            printf("%s: %d labels imported%s\n", file, engine_labels_count(l), replace ? ", others deactivated" : "");
    } else {
        PGresult *r = PQexec(c, "SELECT name, active, keywords, description FROM folio.labels ORDER BY id");
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            rc = db_err_from_result(r, c, "reading folio.labels", &err);
        } else {
            PGresult *kr = NULL;
            for (int i = 0; i < PQntuples(r); i++) {
                int active = strcmp(PQgetvalue(r, i, 1), "t") == 0;
                if (strcmp(sub, "list") == 0) {
                    printf("%-24s %-8s ", PQgetvalue(r, i, 0), active ? "active" : "inactive");
                    folio_term_puts(stdout, PQgetvalue(r, i, 3));
                    fputc('\n', stdout);
                    continue;
                }
                if (!active && !all)
                    continue;
                const char *p[1] = {PQgetvalue(r, i, 0)};
                kr = PQexecParams(c, "SELECT unnest(keywords) FROM folio.labels WHERE name = $1", 1, NULL, p, NULL,
                                  NULL, 0);
                if (PQresultStatus(kr) != PGRES_TUPLES_OK) {
                    rc = db_err_from_result(kr, c, "reading keywords", &err);
                    break;
                }
                const char *d = PQgetvalue(r, i, 3);
                /* a description the format cannot carry (a ':' is fine, a
                 * newline or unbalanced parenthesis is not) is left out */
                printf("%s", PQgetvalue(r, i, 0));
                if (d[0] && !strpbrk(d, "\n\r#\"()")) {
                    /* text from the database, as the keywords: escaped */
                    fputs(" (", stdout);
                    folio_term_puts(stdout, d);
                    fputc(')', stdout);
                }
                fputc(':', stdout);
                for (int k = 0, put = 0; k < PQntuples(kr); k++) {
                    if (strchr(PQgetvalue(kr, k, 0), '"') == NULL)
                        fputs(put++ ? ", " : " ", stdout);
                    put_keyword(PQgetvalue(r, i, 0), PQgetvalue(kr, k, 0));
                }
                fputs("\n", stdout);
                PQclear(kr);
            }
            PQclear(r);
        }
    }
    if (rc)
        PQclear(PQexec(c, "ROLLBACK"));
    PQfinish(c);
    engine_labels_free(l);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}

/* The options of list, export and import; USAGE says which takes which. */
struct labels_args {
    const char *db;
    int all, replace;
};

static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = CLI_AT(struct labels_args, db, const char *)},
    {.name = "all", .kind = CLI_FLAG, .off = CLI_AT(struct labels_args, all, int)},
    {.name = "replace", .kind = CLI_FLAG, .off = CLI_AT(struct labels_args, replace, int)},
};

static const struct cli_cmd CMD = {
    .name = "labels", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 1 << 30,
};

int cmd_labels(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("labels", "missing list, export, import or test");
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        fputs(USAGE, stdout);
        return FOLIO_EXIT_OK;
    }
    if (strcmp(sub, "test") == 0)
        return labels_test(argc - 1, argv + 1);
    if (strcmp(sub, "builtin") == 0) {
        if (argc == 2) {
            for (int i = 0; engine_label_set_name(i); i++)
                printf("%s%s\n", engine_label_set_name(i), i == 0 ? " (default)" : "");
            return FOLIO_EXIT_OK;
        }
        const char *t = argc == 3 ? engine_label_set(argv[2]) : NULL;
        if (!t)
            return cli_usage_error("labels", "builtin wants one set name (folio labels builtin lists them)");
        fputs(t, stdout);
        return FOLIO_EXIT_OK;
    }
    if (strcmp(sub, "list") && strcmp(sub, "export") && strcmp(sub, "import"))
        return cli_usage_error("labels", "unknown action '%s' (list, export, import, test, builtin)", sub);
    struct labels_args a = {0};
    int pos, prc = cli_parse(&CMD, &a, argc - 1, argv + 1, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = a.db;
    int all = a.all, replace = a.replace;
    int rest = argc - 1 - pos;
    if (strcmp(sub, "import") == 0 && rest != 1)
        return cli_usage_error("labels", "import wants one FILE");
    if (strcmp(sub, "import") != 0 && rest != 0)
        return cli_usage_error("labels", "unexpected argument '%s'", argv[1 + pos]);
    return labels_db(sub, db, all, replace, strcmp(sub, "import") == 0 ? argv[1 + pos] : NULL);
}
