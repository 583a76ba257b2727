/*
 * folio show DOC: everything folio knows about one document, for the
 * person who asks "why was this classified as X": where it came from, its
 * jobs, each result with the full distribution, timings and OCR text, and
 * optionally a page as PNG.
 */
#include "pipeline/cli.h"
#include "pipeline/commands.h"
#include "pipeline/db.h"
#include "pipeline/page_png.h"
#include "pipeline/queue.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio show DOC [--model-key K] [--no-text] [--page N --png FILE]\n"
    "\n"
    "DOC is a document id, a sha256 prefix (6+ hex digits) or a file name as\n"
    "ingested. Prints the document, its sources, jobs and results (label,\n"
    "confidence, engine path and why, the distribution over labels, timings,\n"
    "OCR text).\n"
    "\n";

struct show_args {
    const char *db, *model_key, *png;
    int no_text, page;
};
#define AT(m, type) CLI_AT(struct show_args, m, type)

/* Also the keys of [show] in the configuration file (pipeline/config.c). */
static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(model_key, const char *), .arg = "K",
     .help = "results of one model configuration only"},
    {.name = "no-text", .kind = CLI_FLAG, .off = AT(no_text, int), .help = "leave the OCR text out"},
    {.name = "page", .kind = CLI_INT, .off = AT(page, int), .min = 1, .max = 1000000,
     .want = "a page number from 1", .arg = "N", .help = "page for --png, from 1 (default 1)"},
    {.name = "png", .kind = CLI_STR, .off = AT(png, const char *), .arg = "FILE",
     .help = "write that page as a PNG image"},
};

const struct cli_cmd cmd_show_cli = {
    .name = "show", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 1,
};

static PGresult *q(PGconn *c, const char *sql, int n, const char *const *params, struct folio_err *err)
{
    PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        db_err_from_result(r, c, "folio show", err);
        return NULL;
    }
    return r;
}

/* The document id DOC names, or an error saying why none or several. */
static int resolve(PGconn *c, const char *doc, char id[32], struct folio_err *err)
{
    size_t l = strlen(doc);
    bool digits = l > 0 && strspn(doc, "0123456789") == l;
    bool hex = l >= 6 && l <= 64 && strspn(doc, "0123456789abcdefABCDEF") == l;
    const char *sql =
        digits && l < 6 ? "SELECT id FROM folio.documents WHERE id = $1::bigint"
        : hex ? "SELECT id FROM folio.documents WHERE encode(sha256, 'hex') LIKE lower($1) || '%' "
                "OR ($1 ~ '^[0-9]{1,18}$' AND id = $1::bigint) LIMIT 3"
              : "SELECT DISTINCT document_id FROM folio.document_sources WHERE name_display = $1 "
                "OR path_display = $1 LIMIT 3";
    PGresult *r = q(c, sql, 1, &doc, err);
    if (!r)
        return FOLIO_EDB;
    int n = PQntuples(r);
    if (n == 1)
        snprintf(id, 32, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    if (n == 0) {
        folio_err_set(err, FOLIO_EINVAL, "no document matches '%s'", doc);
        folio_err_hint(err, "use a document id, a sha256 prefix or a file name; 'folio export' lists them");
        return FOLIO_EINVAL;
    }
    if (n > 1) {
        folio_err_set(err, FOLIO_EINVAL, "'%s' matches several documents", doc);
        folio_err_hint(err, "give more of the sha256, or the document id");
        return FOLIO_EINVAL;
    }
    return 0;
}

/* Each line of text, after prefix. */
static void print_lines(const char *prefix, const char *text)
{
    for (const char *line = text; line && *line;) {
        size_t ll = strcspn(line, "\n");
        printf("%s%.*s\n", prefix, (int)ll, line);
        line = line[ll] ? line + ll + 1 : NULL;
    }
}

static void kv(const char *k, const char *v)
{
    char b[600];
    printf("  %-16s %s\n", k, folio_lq(b, sizeof b, v));
}

int cmd_show(int argc, char **argv)
{
    struct show_args a = {.page = 1};
    int pos, prc = cli_parse(&cmd_show_cli, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    if (pos >= argc)
        return cli_usage_error("show", "missing DOC (a document id, sha256 prefix or file name)");
    const char *db = a.db, *model_key = a.model_key, *png = a.png, *doc = argv[pos];
    bool no_text = a.no_text;
    long long page = a.page;

    struct folio_err err = {0};
    PGconn *c;
    if (cli_connect(db, "folio-show", &c))
        return FOLIO_EXIT_FAIL;
    char id[32];
    int rc = resolve(c, doc, id, &err);
    PGresult *r = NULL;
    const char *p1[] = {id, model_key};
    if (rc == 0 && (r = q(c,
                          "SELECT id, encode(sha256, 'hex'), media_type, bytes, pages, "
                          "coalesce(width || 'x' || height, ''), coalesce(decode_warning, ''), "
                          "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') "
                          "FROM folio.documents WHERE id = $1::bigint",
                          1, p1, &err))) {
        printf("document %s\n", PQgetvalue(r, 0, 0));
        kv("sha256", PQgetvalue(r, 0, 1));
        kv("media_type", PQgetvalue(r, 0, 2));
        kv("bytes", PQgetvalue(r, 0, 3));
        kv("pages", PQgetvalue(r, 0, 4));
        kv("first page", PQgetvalue(r, 0, 5));
        if (PQgetvalue(r, 0, 6)[0])
            kv("decode warning", PQgetvalue(r, 0, 6));
        kv("ingested", PQgetvalue(r, 0, 7));
        PQclear(r);
    } else if (rc == 0) {
        rc = FOLIO_EDB;
    }
    if (rc == 0 && (r = q(c,
                          "SELECT path_display, host, disposition, duplicate, "
                          "to_char(seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') "
                          "FROM folio.document_sources WHERE document_id = $1::bigint ORDER BY id",
                          1, p1, &err))) {
        printf("\nsources\n");
        for (int i = 0; i < PQntuples(r); i++) {
            char b[600];
            printf("  %s  %s on %s, %s%s\n", PQgetvalue(r, i, 4), folio_lq(b, sizeof b, PQgetvalue(r, i, 0)),
                   PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3)[0] == 't' ? ", duplicate" : "");
        }
        PQclear(r);
    } else if (rc == 0) {
        rc = FOLIO_EDB;
    }
    if (rc == 0 && (r = q(c,
                          "SELECT id, model_key, state, attempts || '/' || max_attempts, coalesce(last_error, '') "
                          "FROM folio.jobs WHERE document_id = $1::bigint "
                          "AND ($2::text IS NULL OR model_key = $2) ORDER BY id",
                          2, p1, &err))) {
        printf("\njobs\n");
        if (PQntuples(r) == 0)
            printf("  (none: finished jobs are deleted after --retain)\n");
        for (int i = 0; i < PQntuples(r); i++) {
            char b[900];
            printf("  job %s  model_key=%s state=%s attempts=%s%s%s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                   PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), PQgetvalue(r, i, 4)[0] ? " last_error=" : "",
                   PQgetvalue(r, i, 4)[0] ? folio_lq(b, sizeof b, PQgetvalue(r, i, 4)) : "");
        }
        PQclear(r);
    } else if (rc == 0) {
        rc = FOLIO_EDB;
    }
    if (rc == 0 &&
        (r = q(c,
               "SELECT r.model_key, r.label, round(r.confidence::numeric, 4), r.needs_review, r.engine_path, "
               "coalesce(r.fallback_reason, ''), r.timings::text, coalesce(r.ocr_text, ''), "
               "coalesce(round(r.ocr_confidence::numeric, 1)::text, ''), coalesce(r.ocr_pages::text, ''), "
               "to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), coalesce(r.worker_id::text, ''), "
               "(SELECT string_agg(format('%s %s', lpad(round(v::numeric, 4)::text, 7), k), E'\\n' "
               "ORDER BY v DESC, k) FROM (SELECT key AS k, CASE WHEN jsonb_typeof(value) = 'number' "
               "THEN value::text::float8 END AS v FROM jsonb_each(r.scores)) e WHERE v IS NOT NULL) "
               "FROM folio.results r WHERE r.document_id = $1::bigint "
               "AND ($2::text IS NULL OR r.model_key = $2) ORDER BY r.id",
               2, p1, &err))) {
        if (PQntuples(r) == 0)
            printf("\nresults\n  (none yet)\n");
        for (int i = 0; i < PQntuples(r); i++) {
            printf("\nresult (model_key %s)\n", PQgetvalue(r, i, 0));
            kv("label", PQgetvalue(r, i, 1));
            kv("confidence", PQgetvalue(r, i, 2));
            kv("needs review", PQgetvalue(r, i, 3)[0] == 't' ? "yes" : "no");
            kv("engine path", PQgetvalue(r, i, 4));
            if (PQgetvalue(r, i, 5)[0])
                kv("fallback reason", PQgetvalue(r, i, 5));
            kv("classified", PQgetvalue(r, i, 10));
            if (PQgetvalue(r, i, 11)[0])
                kv("worker", PQgetvalue(r, i, 11));
            kv("timings (ms)", PQgetvalue(r, i, 6));
            if (PQgetvalue(r, i, 9)[0])
                kv("ocr pages", PQgetvalue(r, i, 9));
            if (PQgetvalue(r, i, 8)[0])
                kv("ocr confidence", PQgetvalue(r, i, 8));
            printf("  distribution\n");
            print_lines("    ", PQgetvalue(r, i, 12));
            if (!no_text && PQgetvalue(r, i, 7)[0]) {
                printf("  ocr text\n");
                print_lines("    | ", PQgetvalue(r, i, 7));
            }
        }
        PQclear(r);
    } else if (rc == 0) {
        rc = FOLIO_EDB;
    }
    if (rc == 0 && png) {
        uint8_t *data = NULL, *img = NULL;
        size_t len = 0, ilen = 0;
        rc = queue_fetch_blob(c, strtoll(id, NULL, 10), &data, &len, &err);
        if (rc == 0)
            rc = page_png(data, len, (int)page - 1, 0, &img, &ilen, &err);
        if (rc)
            folio_err_prefix(&err, "page %lld: ", page);
        if (rc == 0)
            rc = folio_write_file_atomic(png, img, ilen, &err);
        if (rc == 0)
            printf("\npage %lld written to %s (%zu bytes)\n", page, png, ilen);
        free(data);
        free(img);
    }
    fflush(stdout);
    if (rc) {
        folio_err_print(stderr, &err);
        PQfinish(c);
        return FOLIO_EXIT_FAIL;
    }
    PQfinish(c);
    return FOLIO_EXIT_OK;
}
