/*
 * folio show DOC: everything folio knows about one document, for the
 * person who asks "why was this classified as X": where it came from, its
 * jobs, each result with the full distribution, timings and OCR text, and
 * optionally a page as PNG.
 */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/document/page_png.h"
#include "pipeline/db/queue.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio show DOC [--model-key K] [--no-text] [--page N --png FILE]\n"
    "\n"
    "DOC is " DB_DOC_HELP ".\n"
    "Prints the document, its sources, jobs and results (label,\n"
    "confidence, engine path and why, the distribution over labels, timings,\n"
    "OCR text).\n"
    "\n";

struct show_args {
    const char *db, *model_key, *png;
    int no_text, page;
};
#define AT(m, type) CLI_AT(struct show_args, m, type)

/* Also the keys of [show] in the configuration file (pipeline/cli/config.c). */
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

/* Each line of text after prefix, through the terminal escaper: a PDF's
 * text layer or OCR output may carry escape sequences, C1 controls or bidi
 * overrides that must reach the operator's terminal as text. */
static void print_lines(const char *prefix, const char *text)
{
    for (const char *line = text; line && *line;) {
        size_t ll = strcspn(line, "\n");
        fputs(prefix, stdout);
        folio_term_write(stdout, line, ll);
        fputc('\n', stdout);
        line = line[ll] ? line + ll + 1 : NULL;
    }
}

static void kv(const char *k, const char *v)
{
    printf("  %-16s ", k);
    folio_term_puts(stdout, v);
    fputc('\n', stdout);
}

/* A JSON column as jsonb_pretty wrote it, indented under its key: whole,
 * neither escaped nor cut. */
static void kv_json(const char *k, const char *pretty)
{
    if (!strchr(pretty, '\n')) {
        kv(k, pretty);
        return;
    }
    printf("  %s\n", k);
    print_lines("    ", pretty);
}

/* The text of the classified pages, which the worker joined with form
 * feeds, one block per page: pages[i] is the number of the i-th page
 * (page_results order), or i + 1 when unknown. */
static void print_text(const char *text, PGresult *pages)
{
    printf("  text\n");
    int i = 0;
    for (const char *s = text; s; i++) {
        const char *ff = strchr(s, '\f');
        size_t n = ff ? (size_t)(ff - s) : strlen(s);
        const char *pg = pages && i < PQntuples(pages) ? PQgetvalue(pages, i, 0) : NULL;
        const char *src = pages && i < PQntuples(pages) ? PQgetvalue(pages, i, 5) : "";
        printf("    --- page %d%s%s%s ---\n", pg ? atoi(pg) : i + 1, src[0] ? " (" : "", src, src[0] ? " text)" : "");
        char *one = strndup(s, n);
        if (one) {
            print_lines("    | ", one);
            free(one);
        }
        s = ff ? ff + 1 : NULL;
    }
}

int cmd_show(int argc, char **argv)
{
    struct show_args a = {.page = 1};
    int pos, prc = cli_parse(&cmd_show_cli, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    if (pos >= argc)
        return cli_usage_error("show", "missing DOC (" DB_DOC_HELP ")");
    const char *db = a.db, *model_key = a.model_key, *png = a.png, *doc = argv[pos];
    bool no_text = a.no_text;
    long long page = a.page;

    struct folio_err err = {0};
    PGconn *c;
    if (cli_connect(db, "folio-show", &c))
        return FOLIO_EXIT_FAIL;
    char id[32];
    long long doc_id = 0;
    int rc = db_resolve_doc(c, doc, &doc_id, &err);
    snprintf(id, sizeof id, "%lld", doc_id);
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
                          "to_char(seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), "
                          "to_char(seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), coalesce(stored_at, '') "
                          "FROM folio.document_sources WHERE document_id = $1::bigint ORDER BY id",
                          1, p1, &err))) {
        printf("\nsources\n");
        for (int i = 0; i < PQntuples(r); i++) {
            const char *disp = PQgetvalue(r, i, 2);
            printf("  %s  ", PQgetvalue(r, i, 4));
            folio_term_puts(stdout, PQgetvalue(r, i, 0));
            printf(" on ");
            folio_term_puts(stdout, PQgetvalue(r, i, 1));
            /* where ingest put it (schema 018); rows from before that, or
             * whose record failed, get the rule: DIR/.folio/done/<UTC date
             * of the commit>/ under the path relative to DIR */
            if (strcmp(disp, "moved") == 0 && PQgetvalue(r, i, 6)[0]) {
                printf(", moved to ");
                folio_term_puts(stdout, PQgetvalue(r, i, 6));
            } else if (strcmp(disp, "moved") == 0) {
                printf(", moved to .folio/done/%s/ in its inbox", PQgetvalue(r, i, 5));
            } else {
                printf(", %s", disp);
            }
            printf("%s\n", PQgetvalue(r, i, 3)[0] == 't' ? ", duplicate" : "");
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
            printf("  job %s  model_key=", PQgetvalue(r, i, 0));
            folio_term_puts(stdout, PQgetvalue(r, i, 1));
            printf(" state=%s attempts=%s\n", PQgetvalue(r, i, 2), PQgetvalue(r, i, 3));
            if (PQgetvalue(r, i, 4)[0])
                print_lines("    last error: ", PQgetvalue(r, i, 4));
        }
        PQclear(r);
    } else if (rc == 0) {
        rc = FOLIO_EDB;
    }
    if (rc == 0 &&
        (r = q(c,
               "SELECT r.model_key, r.label, round(r.confidence::numeric, 4), r.needs_review, r.engine_path, "
               "coalesce(r.fallback_reason, ''), jsonb_pretty(r.timings), coalesce(r.ocr_text, ''), "
               "coalesce(round(r.ocr_confidence::numeric, 1)::text, ''), "
               "coalesce(jsonb_pretty(nullif(r.ocr_pages - 'results' - 'segments', '{}'::jsonb)), ''), "
               "to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), coalesce(r.worker_id::text, ''), "
               "(SELECT string_agg(format('%s %s', lpad(round(v::numeric, 4)::text, 7), k), E'\\n' "
               "ORDER BY v DESC, k) FROM (SELECT key AS k, CASE WHEN jsonb_typeof(value) = 'number' "
               "THEN value::text::float8 END AS v FROM jsonb_each(r.scores)) e WHERE v IS NOT NULL), "
               "r.id, coalesce(r.review_reason, ''), coalesce(r.engine_label, '') "
               "FROM folio.results r WHERE r.document_id = $1::bigint "
               "AND ($2::text IS NULL OR r.model_key = $2) ORDER BY r.id",
               2, p1, &err))) {
        if (PQntuples(r) == 0)
            printf("\nresults\n  (none yet)\n");
        for (int i = 0; rc == 0 && i < PQntuples(r); i++) {
            printf("\nresult (model_key ");
            folio_term_puts(stdout, PQgetvalue(r, i, 0));
            printf(")\n");
            kv("label", PQgetvalue(r, i, 1));
            /* a person's correction is the result (schema 015); what the
             * engine said is kept beside it and shown with it (issue 33) */
            if (PQgetvalue(r, i, 15)[0])
                kv("engine said", PQgetvalue(r, i, 15));
            kv("confidence", PQgetvalue(r, i, 2));
            kv("needs review", PQgetvalue(r, i, 3)[0] == 't' ? "yes" : "no");
            if (PQgetvalue(r, i, 14)[0])
                kv("review reason", PQgetvalue(r, i, 14));
            kv("engine path", PQgetvalue(r, i, 4));
            if (PQgetvalue(r, i, 5)[0])
                kv("fallback reason", PQgetvalue(r, i, 5));
            kv("classified", PQgetvalue(r, i, 10));
            if (PQgetvalue(r, i, 11)[0])
                kv("worker", PQgetvalue(r, i, 11));
            kv_json("timings (ms)", PQgetvalue(r, i, 6));
            if (PQgetvalue(r, i, 9)[0])
                kv_json("ocr pages", PQgetvalue(r, i, 9));
            if (PQgetvalue(r, i, 8)[0])
                kv("ocr confidence", PQgetvalue(r, i, 8));
            printf("  distribution\n");
            print_lines("    ", PQgetvalue(r, i, 12));
            /* one row per classified page, then the label runs the worker
             * suggests as splits */
            const char *pr[1] = {PQgetvalue(r, i, 13)};
            PGresult *pages = q(c,
                                "SELECT page, label, round(confidence::numeric, 4), engine_path, "
                                "coalesce(fallback_reason, ''), text_source FROM folio.page_results "
                                "WHERE result_id = $1::bigint ORDER BY page",
                                1, pr, &err);
            PGresult *segs = pages ? q(c,
                                       "SELECT first_page, last_page, label, round(confidence::numeric, 4), "
                                       "needs_review FROM folio.document_segments "
                                       "WHERE result_id = $1::bigint ORDER BY first_page",
                                       1, pr, &err)
                                   : NULL;
            if (!pages || !segs) {
                PQclear(pages);
                rc = FOLIO_EDB;
                break;
            }
            if (PQntuples(pages) > 0) {
                printf("  pages\n    %-5s %-24s %-10s %-10s %-5s %s\n", "page", "label", "confidence", "path",
                       "text", "fallback reason");
                for (int k = 0; k < PQntuples(pages); k++) {
                    printf("    %-5s ", PQgetvalue(pages, k, 0));
                    folio_term_puts(stdout, PQgetvalue(pages, k, 1));
                    int pad = 24 - (int)strlen(PQgetvalue(pages, k, 1));
                    printf("%*s %-10s %-10s %-5s ", pad > 0 ? pad : 0, "", PQgetvalue(pages, k, 2),
                           PQgetvalue(pages, k, 3), PQgetvalue(pages, k, 5));
                    folio_term_puts(stdout, PQgetvalue(pages, k, 4));
                    fputc('\n', stdout);
                }
            }
            if (PQntuples(segs) > 0) {
                printf("  split suggestions\n");
                for (int k = 0; k < PQntuples(segs); k++) {
                    printf("    pages %s-%s  ", PQgetvalue(segs, k, 0), PQgetvalue(segs, k, 1));
                    folio_term_puts(stdout, PQgetvalue(segs, k, 2));
                    printf("  %s%s\n", PQgetvalue(segs, k, 3),
                           PQgetvalue(segs, k, 4)[0] == 't' ? "  needs review" : "");
                }
            }
            if (!no_text && PQgetvalue(r, i, 7)[0])
                print_text(PQgetvalue(r, i, 7), PQntuples(pages) ? pages : NULL);
            PQclear(pages);
            PQclear(segs);
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
