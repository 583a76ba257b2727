/*
 * The report page (review.h): one self-contained HTML file (inline CSS and
 * SVG, images as data: URIs, no JavaScript) from one snapshot, written by
 * `folio report --out` and served at /report by the review page. Every
 * number comes from one SQL query and is also written into a data-*
 * attribute, so a test can compare what the page shows with SQL.
 */
#include "pipeline/db/db.h"
#include "pipeline/db/queue.h"
#include "pipeline/document/page_png.h"
#include "pipeline/review/review.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct report {
    PGconn *c;
    FILE *f;
    const char *model_key; /* NULL = all */
    struct folio_err err;
};

static PGresult *query(struct report *R, const char *sql, int np, const char *const *params)
{
    PGresult *r = PQexecParams(R->c, sql, np, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        db_err_from_result(r, R->c, "folio report", &R->err);
        if (strstr(R->err.msg, "42P01"))
            folio_err_hint(&R->err, "the schema is missing: run folio migrate first");
        return NULL;
    }
    return r;
}

static const char *PALETTE[] = {"#3b6ea8", "#d9822b", "#3f9142", "#b83c3c", "#7a5ba6", "#8c6d3f", "#c7569f", "#5e8c8c"};

static void section_summary(struct report *R)
{
    const char *p[] = {R->model_key};
    PGresult *r = query(R,
                        "SELECT (SELECT count(*) FROM folio.documents), "
                        "(SELECT count(*) FROM folio.results WHERE $1::text IS NULL OR model_key = $1), "
                        "(SELECT count(*) FROM folio.results WHERE needs_review AND ($1::text IS NULL OR model_key = $1)), "
                        "(SELECT count(*) FROM folio.rejections), "
                        "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')",
                        1, p);
    if (!r)
        return;
    fprintf(R->f, "<p class=sub>Generated %s UTC%s", PQgetvalue(r, 0, 4), R->model_key ? " &middot; model key " : "");
    if (R->model_key)
        html_esc(R->f, R->model_key);
    fprintf(R->f, "</p>\n<div class=tiles>\n");
    static const char *names[] = {"documents", "results", "needs_review", "rejections"};
    static const char *titles[] = {"documents", "results", "need review", "rejected files"};
    for (int i = 0; i < 4; i++)
        fprintf(R->f, "<div class=tile data-total=\"%s\" data-value=\"%s\"><b>%s</b>%s</div>\n", names[i],
                PQgetvalue(r, 0, i), PQgetvalue(r, 0, i), titles[i]);
    fprintf(R->f, "</div>\n");
    PQclear(r);
}

/* Per label: count, review count, average confidence and a 10-bin
 * confidence histogram drawn as a small SVG. */
static void section_labels(struct report *R)
{
    const char *p[] = {R->model_key};
    PGresult *r = query(R,
                        "SELECT label, count(*), count(*) FILTER (WHERE needs_review), "
                        "round(avg(confidence)::numeric, 3), "
                        "array_to_string(ARRAY(SELECT count(x.c) FROM generate_series(0, 9) b "
                        "LEFT JOIN unnest(array_agg(confidence)) x(c) ON least(floor(x.c * 10), 9) = b "
                        "GROUP BY b ORDER BY b), ',') "
                        "FROM folio.results WHERE $1::text IS NULL OR model_key = $1 "
                        "GROUP BY label ORDER BY count(*) DESC, label",
                        1, p);
    if (!r)
        return;
    fprintf(R->f, "<h2>Results by label</h2>\n");
    int n = PQntuples(r);
    if (n == 0) {
        fprintf(R->f, "<p class=empty>No results yet.</p>\n");
        PQclear(r);
        return;
    }
    long long max = 1;
    for (int i = 0; i < n; i++)
        if (atoll(PQgetvalue(r, i, 1)) > max)
            max = atoll(PQgetvalue(r, i, 1));
    fprintf(R->f, "<table class=labels><tr><th>label</th><th>documents</th><th></th><th>need review</th>"
                  "<th>avg confidence</th><th>confidence 0 &rarr; 1</th></tr>\n");
    for (int i = 0; i < n; i++) {
        long long cnt = atoll(PQgetvalue(r, i, 1));
        fprintf(R->f, "<tr data-label=\"");
        html_esc(R->f, PQgetvalue(r, i, 0));
        fprintf(R->f, "\" data-count=\"%lld\" data-review=\"%s\"><td>", cnt, PQgetvalue(r, i, 2));
        html_esc(R->f, PQgetvalue(r, i, 0));
        fprintf(R->f,
                "</td><td class=num>%lld</td><td><svg width=\"200\" height=\"14\"><rect width=\"%.1f\" "
                "height=\"14\" fill=\"%s\"/></svg></td><td class=num>%s</td><td class=num>%s</td><td>",
                cnt, 200.0 * (double)cnt / (double)max, PALETTE[i % 8], PQgetvalue(r, i, 2), PQgetvalue(r, i, 3));
        /* histogram */
        long long bins[10] = {0}, bmax = 1;
        const char *s = PQgetvalue(r, i, 4);
        for (int b = 0; b < 10 && *s; b++) {
            bins[b] = strtoll(s, (char **)&s, 10);
            if (*s == ',')
                s++;
            if (bins[b] > bmax)
                bmax = bins[b];
        }
        fprintf(R->f, "<svg width=\"120\" height=\"30\" class=hist>");
        for (int b = 0; b < 10; b++) {
            double h = 28.0 * (double)bins[b] / (double)bmax;
            fprintf(R->f, "<rect x=\"%d\" y=\"%.1f\" width=\"10\" height=\"%.1f\" fill=\"%s\"><title>%.1f-%.1f: %lld"
                          "</title></rect>",
                    b * 12, 29.0 - h, h + 1, PALETTE[i % 8], b / 10.0, (b + 1) / 10.0, bins[b]);
        }
        fprintf(R->f, "</svg></td></tr>\n");
    }
    fprintf(R->f, "</table>\n");
    PQclear(r);
}

/* Pages per minute per engine path over the window, as SVG polylines. */
static void section_throughput(struct report *R, int hours)
{
    char hs[16];
    snprintf(hs, sizeof hs, "%d", hours);
    const char *p[] = {R->model_key, hs};
    /* Bucket width: the span of the data in the window over 60 buckets,
     * at least a minute; pages per minute within each bucket. */
    PGresult *r = query(R,
                        "WITH w AS (SELECT r.created_at, r.engine_path, d.pages FROM folio.results r "
                        "JOIN folio.documents d ON d.id = r.document_id "
                        "WHERE r.created_at > now() - make_interval(hours => $2::int) "
                        "AND ($1::text IS NULL OR r.model_key = $1)), "
                        "s AS (SELECT min(created_at) AS t0, greatest(60, ceil(extract(epoch FROM "
                        "max(created_at) - min(created_at)) / 60)) AS b FROM w) "
                        "SELECT w.engine_path, floor(extract(epoch FROM w.created_at - s.t0) / s.b)::int AS k, "
                        "sum(w.pages) * 60.0 / s.b, s.b, to_char(s.t0 AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') "
                        "FROM w, s GROUP BY 1, 2, s.b, s.t0 ORDER BY 1, 2",
                        2, p);
    if (!r)
        return;
    fprintf(R->f, "<h2>Throughput (pages per minute, last %d h)</h2>\n", hours);
    int n = PQntuples(r);
    if (n == 0) {
        fprintf(R->f, "<p class=empty>No results in this window.</p>\n");
        PQclear(r);
        return;
    }
    double ymax = 0;
    int kmax = 1;
    for (int i = 0; i < n; i++) {
        double v = atof(PQgetvalue(r, i, 2));
        int k = atoi(PQgetvalue(r, i, 1));
        ymax = v > ymax ? v : ymax;
        kmax = k > kmax ? k : kmax;
    }
    const double W = 720, H = 200;
    fprintf(R->f, "<svg width=\"%.0f\" height=\"%.0f\" class=chart><rect width=\"100%%\" height=\"100%%\" "
                  "fill=\"#fafafa\" stroke=\"#ccc\"/>\n",
            W + 60, H + 30);
    fprintf(R->f, "<text x=\"4\" y=\"14\" font-size=\"11\">%.1f</text><text x=\"4\" y=\"%.0f\" "
                  "font-size=\"11\">0</text><text x=\"50\" y=\"%.0f\" font-size=\"11\">from %s UTC, %s s per "
                  "point</text>\n",
            ymax, H + 5, H + 24, PQgetvalue(r, 0, 4), PQgetvalue(r, 0, 3));
    int series = 0;
    for (int i = 0; i < n;) {
        const char *path = PQgetvalue(r, i, 0);
        fprintf(R->f, "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"%s\" data-path=\"", PALETTE[series % 8]);
        html_esc(R->f, path);
        fprintf(R->f, "\" points=\"");
        int j = i;
        for (; j < n && strcmp(PQgetvalue(r, j, 0), path) == 0; j++) {
            double x = 50 + W * atoi(PQgetvalue(r, j, 1)) / kmax;
            double y = H + 5 - (H - 10) * atof(PQgetvalue(r, j, 2)) / (ymax > 0 ? ymax : 1);
            fprintf(R->f, "%.1f,%.1f ", x, y);
        }
        fprintf(R->f, "\"/>\n");
        /* Dots too: a series of one bucket is no line. */
        for (int k = i; k < j; k++)
            fprintf(R->f, "<circle r=\"3\" fill=\"%s\" cx=\"%.1f\" cy=\"%.1f\"><title>%s pages/min</title></circle>",
                    PALETTE[series % 8], 50 + W * atoi(PQgetvalue(r, k, 1)) / kmax,
                    H + 5 - (H - 10) * atof(PQgetvalue(r, k, 2)) / (ymax > 0 ? ymax : 1), PQgetvalue(r, k, 2));
        fprintf(R->f, "\n<text x=\"%.0f\" y=\"%d\" font-size=\"12\" fill=\"%s\">", W - 80, 16 + 14 * series,
                PALETTE[series % 8]);
        html_esc(R->f, path);
        fprintf(R->f, "</text>\n");
        series++;
        i = j;
    }
    fprintf(R->f, "</svg>\n");
    PQclear(r);
}

static void table(struct report *R, const char *title, const char *cls, PGresult *r)
{
    fprintf(R->f, "<h2>%s</h2>\n", title);
    if (PQntuples(r) == 0) {
        fprintf(R->f, "<p class=empty>None.</p>\n");
        return;
    }
    fprintf(R->f, "<table class=%s><tr>", cls);
    for (int f = 0; f < PQnfields(r); f++) {
        fprintf(R->f, "<th>");
        html_esc(R->f, PQfname(r, f));
        fprintf(R->f, "</th>");
    }
    fprintf(R->f, "</tr>\n");
    for (int t = 0; t < PQntuples(r); t++) {
        fprintf(R->f, "<tr data-key=\"");
        html_esc(R->f, PQgetvalue(r, t, 0));
        fprintf(R->f, "\" data-value=\"");
        html_esc(R->f, PQgetvalue(r, t, PQnfields(r) > 1 ? 1 : 0));
        fprintf(R->f, "\">");
        for (int f = 0; f < PQnfields(r); f++) {
            fprintf(R->f, "<td>");
            html_esc(R->f, PQgetvalue(r, t, f));
            fprintf(R->f, "</td>");
        }
        fprintf(R->f, "</tr>\n");
    }
    fprintf(R->f, "</table>\n");
}

static void section_queue(struct report *R)
{
    const char *p[] = {R->model_key};
    PGresult *r = query(R,
                        "SELECT s.state, count(j.id) AS jobs FROM unnest(ARRAY['queued','running','done','dead']) "
                        "AS s(state) LEFT JOIN folio.jobs j ON j.state = s.state "
                        "AND ($1::text IS NULL OR j.model_key = $1) GROUP BY s.state "
                        "ORDER BY array_position(ARRAY['queued','running','done','dead'], s.state)",
                        1, p);
    if (!r)
        return;
    table(R, "Queue", "queue", r);
    PQclear(r);
    r = query(R,
              "SELECT worker_id, host, pid, state, coalesce(device, '') AS device, "
              "array_to_string(paths, ',') AS paths, running, jobs_done, jobs_failed, "
              "to_char(heartbeat_at AT TIME ZONE 'UTC', 'HH24:MI:SS') AS heartbeat "
              "FROM folio.worker_overview WHERE alive ORDER BY worker_id",
              0, NULL);
    if (!r)
        return;
    table(R, "Workers (alive)", "workers", r);
    PQclear(r);
}

static char *base64(const uint8_t *d, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, d, (int)n);
    return out;
}

static void section_review(struct report *R, int limit)
{
    char ls[16];
    snprintf(ls, sizeof ls, "%d", limit);
    const char *p[] = {R->model_key, ls};
    PGresult *r = query(R,
                        "SELECT r.document_id, coalesce((SELECT name_display FROM folio.document_sources s "
                        "WHERE s.document_id = r.document_id ORDER BY s.id LIMIT 1), ''), r.label, "
                        "round(r.confidence::numeric, 3), r.engine_path, r.model_key "
                        "FROM folio.results r WHERE r.needs_review AND ($1::text IS NULL OR r.model_key = $1) "
                        "ORDER BY r.confidence, r.id LIMIT $2::int",
                        2, p);
    if (!r)
        return;
    fprintf(R->f, "<h2>Review queue (lowest confidence first)</h2>\n");
    if (PQntuples(r) == 0)
        fprintf(R->f, "<p class=empty>Nothing to review.</p>\n");
    fprintf(R->f, "<div class=review>\n");
    for (int i = 0; i < PQntuples(r); i++) {
        fprintf(R->f, "<figure data-document=\"%s\">", PQgetvalue(r, i, 0));
        uint8_t *data = NULL, *png = NULL;
        size_t len = 0, plen = 0;
        struct folio_err e = {0};
        /* A thumbnail that cannot be made is a missing picture, not a failed report. */
        if (queue_fetch_blob(R->c, atoll(PQgetvalue(r, i, 0)), &data, &len, &e) == 0 &&
            page_png(data, len, 0, 160, &png, &plen, &e) == 0) {
            char *b64 = base64(png, plen);
            if (b64)
                fprintf(R->f, "<img alt=\"page 1\" src=\"data:image/png;base64,%s\">", b64);
            free(b64);
        } else {
            fprintf(R->f, "<div class=noimg>no preview</div>");
        }
        free(data);
        free(png);
        fprintf(R->f, "<figcaption>#%s ", PQgetvalue(r, i, 0));
        html_esc(R->f, PQgetvalue(r, i, 1));
        fprintf(R->f, "<br><b>");
        html_esc(R->f, PQgetvalue(r, i, 2));
        fprintf(R->f, "</b> %s &middot; ", PQgetvalue(r, i, 3));
        html_esc(R->f, PQgetvalue(r, i, 4));
        fprintf(R->f, "</figcaption></figure>\n");
    }
    fprintf(R->f, "</div>\n");
    PQclear(r);
}

static void section_rejections(struct report *R)
{
    PGresult *r = query(R,
                        "SELECT reason, count(*) AS files, to_char(max(rejected_at) AT TIME ZONE 'UTC', "
                        "'YYYY-MM-DD HH24:MI') AS latest, "
                        "(array_agg(message ORDER BY id DESC))[1] AS latest_message "
                        "FROM folio.rejections GROUP BY reason ORDER BY count(*) DESC, reason",
                        0, NULL);
    if (!r)
        return;
    table(R, "Rejections by reason", "rejections", r);
    PQclear(r);
}

static const char CSS[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}"
    "h1{margin:0}h2{margin-top:28px;border-bottom:1px solid #ddd}"
    ".sub{color:#666}.tiles{display:flex;gap:12px}.tile{border:1px solid #ccc;border-radius:6px;padding:8px 16px;"
    "background:#f4f7fb}.tile b{display:block;font-size:24px}"
    "table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}"
    ".num{text-align:right}.empty{color:#888}"
    ".review{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0;width:170px;font-size:12px}"
    "figure img{border:1px solid #ccc;max-width:160px}.noimg{width:160px;height:100px;background:#eee}";

/* The whole page into R->f from one snapshot, so the numbers agree with
 * each other; R->err is set when a query failed. */
static void report_render(struct report *R, int hours, int review)
{
    PQclear(PQexec(R->c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    fprintf(R->f, "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>folio report</title>"
                  "<style>%s</style></head><body>\n<h1>folio report</h1>\n",
            CSS);
    section_summary(R);
    if (!R->err.code)
        section_labels(R);
    if (!R->err.code)
        section_throughput(R, hours);
    if (!R->err.code)
        section_queue(R);
    if (!R->err.code)
        section_review(R, review);
    if (!R->err.code)
        section_rejections(R);
    fprintf(R->f, "<p class=sub>folio %s</p>\n</body></html>\n", FOLIO_VERSION_STRING);
    PQclear(PQexec(R->c, "COMMIT"));
}

int report_write(PGconn *c, FILE *f, const char *model_key, int hours, int review, struct folio_err *err)
{
    struct report R = {.c = c, .f = f, .model_key = model_key};
    report_render(&R, hours, review);
    *err = R.err;
    return R.err.code;
}

int report_page(const char *conninfo, const char *model_key, int hours, int review, char **page, size_t *len,
                struct folio_err *err)
{
    struct report R = {.model_key = model_key};
    *page = NULL;
    *len = 0;
    if (db_connect(conninfo, "folio-report", &R.c, &R.err) == 0 && (R.f = open_memstream(page, len))) {
        report_render(&R, hours, review);
        fclose(R.f);
    } else if (!R.err.code) {
        folio_err_set(&R.err, FOLIO_ENOMEM, "out of memory");
    }
    if (R.c)
        PQfinish(R.c);
    *err = R.err;
    if (R.err.code) {
        free(*page);
        *page = NULL;
        return R.err.code;
    }
    return 0;
}
