/*
 * folio export: results as CSV or JSON lines, streamed row by row (libpq
 * single-row mode), so an export of millions of results needs no more
 * memory than one row. The columns and their order are part of the
 * interface (EXPORT_COLUMNS): new columns are only ever appended.
 */
#include "common/json.h"
#include "pipeline/cli.h"
#include "pipeline/commands.h"
#include "pipeline/db.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: folio export --format csv|jsonl [--since T] [--label L] [--model-key K] [--out FILE]\n"
    "\n"
    "Writes one line per result (document x model key), oldest first, to stdout\n"
    "or FILE. Columns, in this order: document_id, sha256, name, path,\n"
    "media_type, pages, model_key, label, confidence, needs_review, engine_path,\n"
    "fallback_reason, classified_at (UTC, ISO 8601), worker_id, job_id, scores\n"
    "(JSON: label -> probability), segments (JSON: the split suggestions, an array\n"
    "of {first_page, last_page, label, confidence}; [] when the document reads as\n"
    "one). CSV follows RFC 4180 with a header line.\n"
    "\n"
    "  --db CONNINFO        PostgreSQL connection (default $FOLIO_DB, then PG*)\n"
    "  --since T            results classified at or after T (e.g. 2026-12-01,\n"
    "                       '2026-12-01 08:00+01', or 'today', 'yesterday')\n"
    "  --label L            one label only\n"
    "  --model-key K        one model configuration only\n"
    "  --with-text          append the OCR text as column ocr_text (always the last)\n"
    "  --out FILE           write to FILE (replaced atomically at the end)\n";

static const struct option opts[] = {
    {"db", required_argument, 0, 'd'},   {"format", required_argument, 0, 'f'},
    {"since", required_argument, 0, 's'}, {"label", required_argument, 0, 'l'},
    {"model-key", required_argument, 0, 'k'}, {"out", required_argument, 0, 'o'},
    {"with-text", no_argument, 0, 't'},  {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};

const struct option *cmd_export_options(void) { return opts; }

static const char *const COLS[] = {"document_id", "sha256", "name", "path", "media_type", "pages",
                                   "model_key", "label", "confidence", "needs_review", "engine_path",
                                   "fallback_reason", "classified_at", "worker_id", "job_id", "scores",
                                   "segments", "ocr_text"};
/* JSON type of each column: n number, b boolean, j raw JSON, s string. */
static const char TYPES[] = "nssssnssnbsssnnjjs";

static void csv_field(FILE *f, const char *s, bool null)
{
    if (null)
        return;
    if (!s[strcspn(s, ",\"\r\n")] && s[0] != ' ' && (s[0] == '\0' || s[strlen(s) - 1] != ' ')) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int cmd_export(int argc, char **argv)
{
    const char *db = NULL, *format = NULL, *since = NULL, *label = NULL, *model_key = NULL, *out = NULL;
    bool with_text = false;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'h': fputs(USAGE, stdout); return FOLIO_EXIT_OK;
        case 'd': db = optarg; break;
        case 'f':
            if (strcmp(optarg, "csv") && strcmp(optarg, "jsonl"))
                return cli_usage_error("export", "--format wants csv or jsonl, got '%s'", optarg);
            format = optarg;
            break;
        case 's': since = optarg; break;
        case 'l': label = optarg; break;
        case 'k': model_key = optarg; break;
        case 'o': out = optarg; break;
        case 't': with_text = true; break;
        default: return cli_usage_error("export", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("export", "unexpected argument '%s'", argv[optind]);
    if (!format)
        return cli_usage_error("export", "--format csv or --format jsonl is required");
    bool csv = strcmp(format, "csv") == 0;
    int ncols = with_text ? 18 : 17;

    struct folio_err err = {0};
    PGconn *c;
    if (cli_connect(db, "folio-export", &c))
        return FOLIO_EXIT_FAIL;
    const char *params[3];
    int np = 0;
    char sql[3072];
    snprintf(sql, sizeof sql,
             "SELECT r.document_id, encode(d.sha256, 'hex'), s.name_display, s.path_display, d.media_type, "
             "d.pages, r.model_key, r.label, r.confidence, r.needs_review, r.engine_path, r.fallback_reason, "
             "to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), r.worker_id, "
             "r.job_id, r.scores::text, "
             /* the result's split suggestions (schema 004), page order; a
              * document that reads as one has none */
             "coalesce((SELECT jsonb_agg(jsonb_build_object('first_page', g.first_page, 'last_page', g.last_page, "
             "'label', g.label, 'confidence', g.confidence) ORDER BY g.first_page) "
             "FROM folio.document_segments g WHERE g.result_id = r.id), '[]')::text%s "
             "FROM folio.results r JOIN folio.documents d ON d.id = r.document_id "
             "LEFT JOIN LATERAL (SELECT name_display, path_display FROM folio.document_sources x "
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
        if (folio_snprintf(tmp, sizeof tmp, "%s.tmp-%d", out, (int)getpid()) != 0 || !(f = fopen(tmp, "w"))) {
            fprintf(stderr, "folio: error: cannot write %s: %s\n", out, strerror(errno));
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
