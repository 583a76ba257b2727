/*
 * folio export: results as CSV or JSON lines, streamed row by row (libpq
 * single-row mode), so an export of millions of results needs no more
 * memory than one row. The columns and their order are part of the
 * interface (EXPORT_COLUMNS): new columns are only ever appended.
 */
#include "common/json.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: folio export --format csv|jsonl [--since T] [--label L] [--model-key K] [--out FILE]\n"
    "\n"
    "Writes one line per result (document x model key), oldest first, to stdout\n"
    "or FILE. Columns, in this order: document_id, sha256, name, path (where the\n"
    "file is now: under DIR/.folio/done/ when moved; empty when deleted),\n"
    "media_type, pages, model_key, label, confidence, needs_review, engine_path,\n"
    "fallback_reason, classified_at (UTC, ISO 8601), worker_id, job_id, scores\n"
    "(JSON: label -> probability), segments (JSON: the split suggestions, an array\n"
    "of {first_page, last_page, label, confidence}; [] when the document reads as\n"
    "one), review_reason (why needs_review is set), then ocr_text with --with-text.\n"
    "CSV follows RFC 4180 with a header line; a cell that begins with = + - @, a\n"
    "tab or a carriage return gets a leading apostrophe (and quotes), so that a\n"
    "spreadsheet shows it as text instead of running it as a formula.\n"
    "\n";

struct export_args {
    const char *db, *since, *label, *model_key, *out;
    int format, with_text;
};
#define AT(m, type) CLI_AT(struct export_args, m, type)

static const char *const FORMATS[] = {"csv", "jsonl", NULL};

/* Also the keys of [export] in the configuration file (pipeline/cli/config.c). */
static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "format", .kind = CLI_ENUM, .off = AT(format, int), .choices = FORMATS, .want = "csv or jsonl"},
    {.name = "since", .kind = CLI_STR, .off = AT(since, const char *), .arg = "T",
     .help = "results classified at or after T (e.g. 2026-12-01,\n"
             "'2026-12-01 08:00+01', or 'today', 'yesterday')"},
    {.name = "label", .kind = CLI_STR, .off = AT(label, const char *), .arg = "L", .help = "one label only"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(model_key, const char *), .arg = "K",
     .help = "one model configuration only"},
    {.name = "with-text", .kind = CLI_FLAG, .off = AT(with_text, int),
     .help = "append the OCR text as column ocr_text (always the last)"},
    {.name = "out", .kind = CLI_STR, .off = AT(out, const char *), .arg = "FILE",
     .help = "write to FILE (replaced atomically at the end)"},
};

const struct cli_cmd cmd_export_cli = {
    .name = "export", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0],
};

static const char *const COLS[] = {"document_id", "sha256", "name", "path", "media_type", "pages",
                                   "model_key", "label", "confidence", "needs_review", "engine_path",
                                   "fallback_reason", "classified_at", "worker_id", "job_id", "scores",
                                   "segments", "review_reason", "ocr_text"};
/* JSON type of each column: n number, b boolean, j raw JSON, s string. */
static const char TYPES[] = "nssssnssnbsssnnjjss";

/* One RFC 4180 cell. A cell a spreadsheet would take as a formula (first
 * character = + - @, tab or CR: OWASP's CSV injection guidance) gets a
 * leading apostrophe inside quotes, so file names and label text from the
 * inbox are shown, never evaluated. No numeric column folio writes begins
 * with one of those (ids, confidences and times are never negative). */
static void csv_field(FILE *f, const char *s, bool null)
{
    if (null)
        return;
    bool formula = s[0] && strchr("=+-@\t\r", s[0]);
    if (!formula && !s[strcspn(s, ",\"\r\n")] && s[0] != ' ' && (s[0] == '\0' || s[strlen(s) - 1] != ' ')) {
        fputs(s, f);
        return;
    }
    fputs(formula ? "\"'" : "\"", f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int cmd_export(int argc, char **argv)
{
    struct export_args a = {.format = -1};
    int pos, prc = cli_parse(&cmd_export_cli, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = a.db, *format = a.format < 0 ? NULL : FORMATS[a.format], *since = a.since, *label = a.label,
               *model_key = a.model_key, *out = a.out;
    bool with_text = a.with_text;
    if (!format)
        return cli_usage_error("export", "--format csv or --format jsonl is required");
    bool csv = strcmp(format, "csv") == 0;
    int ncols = with_text ? 19 : 18;

    struct folio_err err = {0};
    PGconn *c;
    if (cli_connect(db, "folio-export", &c))
        return FOLIO_EXIT_FAIL;
    const char *params[3];
    int np = 0;
    char sql[3072];
    snprintf(sql, sizeof sql,
             "SELECT r.document_id, encode(d.sha256, 'hex'), s.name_display, "
             /* where the file is now (schema 018), not where it was found */
             "CASE WHEN s.disposition = 'deleted' THEN NULL ELSE coalesce(s.stored_at, s.path_display) END, "
             "d.media_type, "
             "d.pages, r.model_key, r.label, r.confidence, r.needs_review, r.engine_path, r.fallback_reason, "
             "to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), r.worker_id, "
             "r.job_id, r.scores::text, "
             /* the result's split suggestions (schema 004), page order; a
              * document that reads as one has none */
             "coalesce((SELECT jsonb_agg(jsonb_build_object('first_page', g.first_page, 'last_page', g.last_page, "
             "'label', g.label, 'confidence', g.confidence) ORDER BY g.first_page) "
             "FROM folio.document_segments g WHERE g.result_id = r.id), '[]')::text, r.review_reason%s "
             "FROM folio.results r JOIN folio.documents d ON d.id = r.document_id "
             "LEFT JOIN LATERAL (SELECT name_display, path_display, stored_at, disposition FROM folio.document_sources x "
             "WHERE x.document_id = r.document_id ORDER BY x.id LIMIT 1) s ON true WHERE true",
             with_text ? ", r.ocr_text" : "");
    if (since) {
        params[np++] = since;
        snprintf(sql + strlen(sql), sizeof sql - strlen(sql), " AND r.created_at >= $%d::timestamptz", np);
    }
    if (label) {
        params[np++] = label;
        snprintf(sql + strlen(sql), sizeof sql - strlen(sql), " AND r.label = $%d", np);
    }
    if (model_key) {
        params[np++] = model_key;
        snprintf(sql + strlen(sql), sizeof sql - strlen(sql), " AND r.model_key = $%d", np);
    }
    snprintf(sql + strlen(sql), sizeof sql - strlen(sql), " ORDER BY r.id");

    char tmp[4200] = "";
    FILE *f = stdout;
    if (out) {
        int fd = folio_open_temp(out, tmp, sizeof tmp, &err);
        if (fd < 0 || !(f = fdopen(fd, "w"))) {
            if (fd >= 0) {
                close(fd);
                unlink(tmp);
            }
            fprintf(stderr, "folio: error: cannot write %s: %s\n", out, fd < 0 ? err.msg : strerror(errno));
            PQfinish(c);
            return FOLIO_EXIT_FAIL;
        }
    }
    int rc = FOLIO_EXIT_OK;
    long long rows = 0;
    if (!PQsendQueryParams(c, sql, np, NULL, params, NULL, NULL, 0) || !PQsetSingleRowMode(c)) {
        folio_err_set(&err, FOLIO_EDB, "export query failed to start");
        folio_err_detail(&err, "%s", PQerrorMessage(c));
        folio_err_print(stderr, &err);
        rc = FOLIO_EXIT_FAIL;
    }
    if (rc == FOLIO_EXIT_OK && csv) {
        for (int i = 0; i < ncols; i++)
            fprintf(f, "%s%s", i ? "," : "", COLS[i]);
        fputs("\r\n", f);
    }
    PGresult *r;
    while (rc == FOLIO_EXIT_OK && (r = PQgetResult(c)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_TUPLES_OK) { /* the end of the rows */
            PQclear(r);
            continue;
        }
        if (st != PGRES_SINGLE_TUPLE) {
            db_err_from_result(r, c, "exporting results", &err);
            if (since && (strstr(err.msg, "22007") || strstr(err.msg, "22008")))
                folio_err_hint(&err, "--since wants a date or time PostgreSQL reads, e.g. 2026-12-01 or "
                                     "'2026-12-01 08:00+01'");
            folio_err_print(stderr, &err);
            rc = FOLIO_EXIT_FAIL;
            while ((r = PQgetResult(c)) != NULL)
                PQclear(r);
            break;
        }
        if (csv) {
            for (int i = 0; i < ncols; i++) {
                if (i)
                    fputc(',', f);
                csv_field(f, PQgetvalue(r, 0, i), PQgetisnull(r, 0, i));
            }
            fputs("\r\n", f);
        } else {
            struct json_buf b;
            json_init(&b);
            json_raw(&b, "{");
            for (int i = 0; i < ncols; i++) {
                if (i)
                    json_raw(&b, ",");
                json_key(&b, COLS[i]);
                const char *v = PQgetvalue(r, 0, i);
                if (PQgetisnull(r, 0, i))
                    json_raw(&b, "null");
                else if (TYPES[i] == 'b')
                    json_raw(&b, v[0] == 't' ? "true" : "false");
                else if (TYPES[i] == 'n' || TYPES[i] == 'j')
                    json_raw(&b, v); /* integers, reals and jsonb text from the server */
                else
                    json_str(&b, v);
            }
            json_raw(&b, "}\n");
            if (b.oom) {
                fprintf(stderr, "folio: error: out of memory writing row %lld\n", rows + 1);
                rc = FOLIO_EXIT_FAIL;
            } else {
                fwrite(b.s, 1, b.len, f);
            }
            json_free(&b);
        }
        rows++;
        PQclear(r);
    }
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "folio: error: writing %s: %s\n", out ? out : "stdout", strerror(errno));
        rc = FOLIO_EXIT_FAIL;
    }
    if (out) {
        if (fclose(f) != 0)
            rc = FOLIO_EXIT_FAIL;
        if (rc == FOLIO_EXIT_OK && rename(tmp, out) != 0) {
            fprintf(stderr, "folio: error: cannot rename %s to %s: %s\n", tmp, out, strerror(errno));
            rc = FOLIO_EXIT_FAIL;
        }
        if (rc != FOLIO_EXIT_OK)
            unlink(tmp);
    }
    if (rc == FOLIO_EXIT_OK)
        folio_log(FOLIO_LOG_INFO, "export_done", "rows=%lld format=%s", rows, format);
    PQfinish(c);
    return rc;
}
