/*
 * The review page of `folio report --listen` (review.h): the review queue,
 * lowest confidence first, with page thumbnails and per page the label
 * distribution; confirm and correct (whole document or one page) write
 * folio.corrections through learn_db_correct, the code of `folio correct`;
 * filters by label, tier, date and review state, and full-text search.
 * Plain HTML forms: no JavaScript at all, nothing fetched from elsewhere.
 *
 * Access: bound to 127.0.0.1 unless told otherwise; over TCP a person
 * signs in once with the access token (GET /login?token=...), which gives a
 * session cookie; over a Unix socket (for an admin's reverse proxy, which
 * does the authentication) whoever can connect gets a session. Every POST
 * needs the session's CSRF token (an HMAC of the session id under a key
 * that lives only in this process) and, when the browser sends one, an
 * Origin that is this server's. Sessions live as long as the process.
 *
 * libmicrohttpd runs a thread per connection, each request on a database
 * connection of its own, so a slow query holds up only its own request.
 */
#include "common/cliopt.h"
#include "pipeline/db/db.h"
#include "pipeline/service/http.h"
#include "pipeline/db/learn_db.h"
#include "pipeline/document/page_png.h"
#include "pipeline/db/queue.h"
#include "pipeline/review/review.h"

#include <errno.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define RV_COOKIE "folio_session"
#define RV_MAX_BODY 16384
#define RV_MAX_THUMBS 12

struct rv_server {
    const struct review_cfg *cfg;
    unsigned char key[32]; /* signs session ids and CSRF tokens */
};

/* One request: the form fields of a POST as they arrive. */
struct rv_req {
    struct MHD_PostProcessor *pp;
    size_t body;
    int too_big;
    char doc[32], label[80], page[16], csrf[80], back[1024];
};

static void hexof(const unsigned char *in, size_t n, char *out)
{
    static const char H[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = H[in[i] >> 4];
        out[2 * i + 1] = H[in[i] & 15];
    }
    out[2 * n] = '\0';
}

/* HMAC-SHA256(key, what ":" sid) in hex (65 bytes). */
static void mac(const struct rv_server *S, const char *what, const char *sid, char out[65])
{
    char msg[128];
    snprintf(msg, sizeof msg, "%s:%s", what, sid);
    unsigned char m[32];
    unsigned int ml = sizeof m;
    HMAC(EVP_sha256(), S->key, sizeof S->key, (const unsigned char *)msg, strlen(msg), m, &ml);
    hexof(m, 32, out);
}

static int same(const char *a, const char *b)
{
    size_t n = strlen(a);
    return n == strlen(b) && CRYPTO_memcmp(a, b, n) == 0;
}

/* The session id of a valid cookie ("SID.MAC") into sid; 0 when none. */
static int session_of(const struct rv_server *S, struct MHD_Connection *c, char sid[33])
{
    const char *v = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, RV_COOKIE);
    if (!v || strlen(v) != 32 + 1 + 64 || v[32] != '.')
        return 0;
    memcpy(sid, v, 32);
    sid[32] = '\0';
    char want[65];
    mac(S, "session", sid, want);
    return same(v + 33, want);
}

/* A new session: its id into sid and the Set-Cookie value into cookie. */
static int session_new(const struct rv_server *S, char sid[33], char *cookie, size_t n)
{
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return -1;
    hexof(r, sizeof r, sid);
    char m[65];
    mac(S, "session", sid, m);
    /* HttpOnly: no script reads it; SameSite=Strict: no other site's page
     * sends it (the CSRF token is the real check, this the second). */
    snprintf(cookie, n, RV_COOKIE "=%s.%s; Path=/; HttpOnly; SameSite=Strict", sid, m);
    return 0;
}

/* Every page: nothing loads from elsewhere, forms post only here, no
 * framing, and no Referer (which could carry the login URL's token)
 * leaves for another site. Not no-referrer: with it the browser sends
 * "Origin: null", and the Origin check would refuse every form. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *ctype, char *body,
                             size_t len, const char *cookie, const char *location)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body ? body : (void *)"",
                                                             body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "same-origin");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; form-action 'self'; "
                            "frame-ancestors 'none'; base-uri 'none'");
    if (cookie)
        MHD_add_response_header(r, "Set-Cookie", cookie);
    if (location)
        MHD_add_response_header(r, "Location", location);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result text(struct MHD_Connection *c, unsigned int status, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return reply(c, status, "text/plain; charset=utf-8", n < 0 ? NULL : s, n < 0 ? 0 : (size_t)n, NULL, NULL);
}

/* Query-string value (percent-encoded). */
static void urlenc(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || strchr("-._~", ch))
            fputc(ch, f);
        else
            fprintf(f, "%%%02X", ch);
    }
}

static const char *arg(struct MHD_Connection *c, const char *k)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, k);
    return v && *v ? v : NULL;
}

static const char CSS[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:20px;color:#222}h1{margin:0 0 8px}"
    "form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;padding:8px;background:#f4f7fb;"
    "border:1px solid #ccd}form.filters label{display:flex;flex-direction:column;font-size:12px}"
    "section.doc{border:1px solid #ccc;border-radius:6px;margin:12px 0;padding:8px 12px}"
    "section.doc h2{font-size:16px;margin:0}.meta{color:#555}.reason{color:#a33}.corrected{color:#282}"
    ".pages{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0}figure{margin:0;width:190px;font-size:12px}"
    "figure img{border:1px solid #ccc;max-width:180px;max-height:240px}.dist{color:#555}"
    ".actions{display:flex;gap:16px;flex-wrap:wrap}.snippet{background:#ffd;padding:2px 4px}"
    ".empty{color:#888}.err{color:#a33}";

struct page_ctx {
    FILE *f;
    const char *csrf, *back;
    PGresult *labels; /* active labels, for the pickers */
};

static void hidden(FILE *f, const char *name, const char *v)
{
    fprintf(f, "<input type=hidden name=%s value=\"", name);
    html_esc(f, v);
    fputs("\">", f);
}

/* The form fields every action carries. */
static void form_open(const struct page_ctx *P, const char *action, const char *cls, const char *doc)
{
    fprintf(P->f, "<form method=post action=\"%s\" class=%s>", action, cls);
    hidden(P->f, "csrf", P->csrf);
    hidden(P->f, "doc", doc);
    hidden(P->f, "back", P->back);
}

static void picker(const struct page_ctx *P, const char *current)
{
    fputs("<select name=label>", P->f);
    for (int i = 0; i < PQntuples(P->labels); i++) {
        const char *l = PQgetvalue(P->labels, i, 0);
        fputs("<option value=\"", P->f);
        html_esc(P->f, l);
        fprintf(P->f, "\"%s>", strcmp(l, current) == 0 ? " selected" : "");
        html_esc(P->f, l);
        fputs("</option>", P->f);
    }
    fputs("</select>", P->f);
}

/* One document of the list: its pages (thumbnail, page label, the three
 * most likely labels, a per-page picker), why it is here, and the actions. */
static void doc_card(const struct page_ctx *P, PGresult *d, int i, PGresult *pages, int *pi)
{
    FILE *f = P->f;
    const char *id = PQgetvalue(d, i, DOC_COL_ID), *label = PQgetvalue(d, i, DOC_COL_LABEL);
    const char *result = PQgetvalue(d, i, DOC_COL_RESULT);
    int npages = atoi(PQgetvalue(d, i, DOC_COL_PAGES));
    fprintf(f, "<section class=doc data-document=\"%s\" data-label=\"", id);
    html_esc(f, label);
    fputs("\" data-corrected=\"", f);
    html_esc(f, PQgetvalue(d, i, DOC_COL_CORRECTED));
    fprintf(f, "\"><h2>#%s ", id);
    html_esc(f, PQgetvalue(d, i, DOC_COL_NAME));
    fputs("</h2><p class=meta><b>", f);
    html_esc(f, label);
    fprintf(f, "</b> %s &middot; ", PQgetvalue(d, i, DOC_COL_CONF));
    html_esc(f, PQgetvalue(d, i, DOC_COL_TIER));
    fprintf(f, " &middot; %s &middot; %d page%s", PQgetvalue(d, i, DOC_COL_DATE), npages, npages == 1 ? "" : "s");
    if (atof(PQgetvalue(d, i, DOC_COL_RANK)) > 0)
        fprintf(f, " &middot; rank %s", PQgetvalue(d, i, DOC_COL_RANK));
    fputs("</p>", f);
    static const struct { int col; const char *cls, *prefix; } PARAS[] = {
        {DOC_COL_REASON, "reason", "review: "}, {DOC_COL_CORRECTED, "corrected", "corrected: "},
        {DOC_COL_SNIPPET, "snippet", ""},       {DOC_COL_PARTS, "parts", "split into "},
    };
    for (size_t k = 0; k < sizeof PARAS / sizeof PARAS[0]; k++)
        if (PQgetvalue(d, i, PARAS[k].col)[0]) {
            fprintf(f, "<p class=%s>%s", PARAS[k].cls, PARAS[k].prefix);
            html_esc(f, PQgetvalue(d, i, PARAS[k].col));
            fputs("</p>", f);
        }
    fputs("<div class=pages>", f);
    /* pages holds the page rows of every listed result, in list order */
    int shown = 0, more = 0;
    for (; *pi < PQntuples(pages) && strcmp(PQgetvalue(pages, *pi, 0), result) == 0; ++*pi) {
        /* Each thumbnail decodes its page from the whole blob: a long
         * document shows its first pages (folio show --png has the rest). */
        if (shown++ >= RV_MAX_THUMBS) {
            more++;
            continue;
        }
        const char *pg = PQgetvalue(pages, *pi, 1);
        fprintf(f, "<figure data-page=\"%s\"><img loading=lazy alt=\"page %s\" src=\"/thumb?doc=%s&amp;page=%s\">"
                   "<figcaption>page %s: <b>",
                pg, pg, id, pg, pg);
        html_esc(f, PQgetvalue(pages, *pi, 2));
        fprintf(f, "</b> %s<br><span class=dist>", PQgetvalue(pages, *pi, 3));
        html_esc(f, PQgetvalue(pages, *pi, 4));
        fputs("</span>", f);
        if (npages > 1) {
            form_open(P, "/correct", "page", id);
            hidden(f, "page", pg);
            picker(P, PQgetvalue(pages, *pi, 2));
            fprintf(f, "<button type=submit>correct page %s</button></form>", pg);
        }
        fputs("</figcaption></figure>", f);
    }
    if (more)
        fprintf(f, "<p class=meta>and %d more page%s</p>", more, more == 1 ? "" : "s");
    fputs("</div><div class=actions>", f);
    form_open(P, "/confirm", "confirm", id);
    hidden(f, "label", label);
    fputs("<button type=submit>confirm ", f);
    html_esc(f, label);
    fputs("</button></form>", f);
    form_open(P, "/correct", "correct", id);
    picker(P, label);
    fputs("<button type=submit>correct</button></form>", f);
    if (atoi(PQgetvalue(d, i, DOC_COL_SEGMENTS)) > 1 && !PQgetvalue(d, i, DOC_COL_PARTS)[0]) {
        form_open(P, "/split", "split", id);
        fprintf(f, "<button type=submit>split as suggested (%s parts)</button></form>",
                PQgetvalue(d, i, DOC_COL_SEGMENTS));
    }
    fputs("</div></section>\n", f);
}

static void filter_select(FILE *f, const char *name, const char *title, PGresult *r, const char *const *fixed,
                          const char *current)
{
    fprintf(f, "<label>%s<select name=%s><option value=\"\">any</option>", title, name);
    for (int i = 0; r ? i < PQntuples(r) : fixed[i] != NULL; i++) {
        const char *v = r ? PQgetvalue(r, i, 0) : fixed[i];
        fputs("<option value=\"", f);
        html_esc(f, v);
        fprintf(f, "\"%s>", current && strcmp(current, v) == 0 ? " selected" : "");
        html_esc(f, v);
        fputs("</option>", f);
    }
    fputs("</select></label>", f);
}

static PGresult *rows(PGconn *c, const char *sql, int np, const char *const *p, struct folio_err *err)
{
    PGresult *r = PQexecParams(c, sql, np, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        db_err_from_result(r, c, "building the review page", err);
        return NULL;
    }
    return r;
}

/* GET /: the filter form, then the documents. */
static int render_queue(const struct rv_server *S, struct MHD_Connection *mc, PGconn *c, FILE *f, const char *csrf,
                        struct folio_err *err)
{
    const char *rv = arg(mc, "review");
    struct doc_filter flt = {
        .model_key = S->cfg->model_key, .label = arg(mc, "label"), .tier = arg(mc, "tier"),
        .from = arg(mc, "from"), .to = arg(mc, "to"), .query = arg(mc, "q"),
        .review = !rv || strcmp(rv, "open") == 0 ? DOC_OPEN : strcmp(rv, "flagged") == 0 ? DOC_FLAGGED : DOC_ALL,
        .limit = S->cfg->review > 0 ? S->cfg->review : 24,
    };
    /* Where an action returns to: this very list, as a relative URL. */
    char *back = NULL;
    size_t backn = 0;
    FILE *bf = open_memstream(&back, &backn);
    if (!bf)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    fputs("/?", bf);
    static const char *KEYS[] = {"label", "tier", "from", "to", "q", "review"};
    for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++)
        if (arg(mc, KEYS[k])) {
            fprintf(bf, "%s=", KEYS[k]);
            urlenc(bf, arg(mc, KEYS[k]));
            fputc('&', bf);
        }
    fclose(bf);
    struct page_ctx P = {.f = f, .csrf = csrf, .back = back};
    int rc = 0;
    PGresult *d = NULL, *pages = NULL;
    P.labels = rows(c, "SELECT name FROM folio.labels WHERE active ORDER BY name", 0, NULL, err);
    if (!P.labels) {
        rc = FOLIO_EDB;
        goto out;
    }
    fprintf(f, "<form method=get action=\"/\" class=filters>");
    filter_select(f, "label", "label", P.labels, NULL, flt.label);
    static const char *TIERS[] = {"vision", "ocr+lm", "ocr+learned", "ocr+rules", NULL};
    filter_select(f, "tier", "tier", NULL, TIERS, flt.tier);
    fprintf(f, "<label>review<select name=review>");
    static const char *RV[] = {"open", "flagged", "all"};
    static const char *RVT[] = {"needs review, not yet corrected", "flagged for review", "every result"};
    for (int k = 0; k < 3; k++)
        fprintf(f, "<option value=%s%s>%s</option>", RV[k], (int)flt.review == k ? " selected" : "", RVT[k]);
    fputs("</select></label>", f);
    static const char *DK[] = {"from", "to"};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "<label>%s<input type=date name=%s value=\"", DK[k], DK[k]);
        html_esc(f, k ? (flt.to ? flt.to : "") : (flt.from ? flt.from : ""));
        fputs("\"></label>", f);
    }
    fputs("<label>text<input type=search name=q size=30 value=\"", f);
    html_esc(f, flt.query ? flt.query : "");
    fputs("\"></label><button type=submit>show</button></form>\n", f);
    struct folio_err ferr = {0};
    if (doc_filter_check(&flt, &ferr)) {
        fputs("<p class=err>", f);
        html_esc(f, ferr.msg);
        fputs(" &mdash; ", f);
        html_esc(f, ferr.hint);
        fputs("</p>", f);
        goto out;
    }
    if ((rc = doc_query(c, &flt, &d, err)))
        goto out;
    /* Every listed result's pages in one query, in the list's order. */
    char *ids = NULL;
    size_t idn = 0;
    FILE *idf = open_memstream(&ids, &idn);
    if (!idf) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory");
        goto out;
    }
    fputc('{', idf);
    for (int i = 0; i < PQntuples(d); i++)
        fprintf(idf, "%s%s", i ? "," : "", PQgetvalue(d, i, DOC_COL_RESULT));
    fputc('}', idf);
    fclose(idf);
    const char *pp[] = {ids};
    pages = rows(c,
                 "SELECT p.result_id, p.page, p.label, round(p.confidence::numeric, 3), "
                 "coalesce((SELECT string_agg(format('%s %s', k, round(v::numeric, 2)), ', ' ORDER BY v DESC, k) "
                 "  FROM (SELECT key AS k, value::text::float8 AS v FROM jsonb_each(p.scores) "
                 "         WHERE jsonb_typeof(value) = 'number' ORDER BY 2 DESC, 1 LIMIT 3) t), '') "
                 "FROM unnest($1::bigint[]) WITH ORDINALITY AS l(id, n) "
                 "JOIN folio.page_results p ON p.result_id = l.id ORDER BY l.n, p.page",
                 1, pp, err);
    free(ids);
    if (!pages) {
        rc = FOLIO_EDB;
        goto out;
    }
    fprintf(f, "<p class=meta data-count=\"%d\">%d document%s%s</p>\n", PQntuples(d), PQntuples(d),
            PQntuples(d) == 1 ? "" : "s", flt.query ? ", best match first" : ", lowest confidence first");
    if (PQntuples(d) == 0)
        fputs("<p class=empty>Nothing to show.</p>\n", f);
    int pi = 0;
    for (int i = 0; i < PQntuples(d); i++)
        doc_card(&P, d, i, pages, &pi);
out:
    PQclear(P.labels);
    PQclear(d);
    PQclear(pages);
    free(back);
    return rc;
}

static enum MHD_Result page_queue(const struct rv_server *S, struct MHD_Connection *mc, const char *sid,
                                  const char *cookie)
{
    char csrf[65];
    mac(S, "csrf", sid, csrf);
    struct folio_err err = {0};
    PGconn *c = NULL;
    char *page = NULL;
    size_t len = 0;
    FILE *f = NULL;
    if (db_connect(S->cfg->conninfo, "folio-review", &c, &err) == 0 && (f = open_memstream(&page, &len))) {
        fprintf(f, "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>folio review</title>"
                   "<style>%s</style></head><body>\n<h1>folio review</h1>"
                   "<p class=meta><a href=\"/report\">full report</a></p>\n",
                CSS);
        /* one snapshot for the whole page */
        if (db_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", &err) == 0 &&
            render_queue(S, mc, c, f, csrf, &err) == 0)
            db_exec(c, "COMMIT", &err);
        fputs("</body></html>\n", f);
        fclose(f);
    } else if (!err.code) {
        folio_err_set(&err, FOLIO_ENOMEM, "out of memory");
    }
    if (c)
        PQfinish(c);
    if (err.code) {
        free(page);
        return text(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "review page unavailable: %s %s\n", err.msg, err.detail);
    }
    return reply(mc, MHD_HTTP_OK, "text/html; charset=utf-8", page, len, cookie, NULL);
}

static enum MHD_Result page_report(const struct rv_server *S, struct MHD_Connection *mc)
{
    char *page = NULL;
    size_t len = 0;
    struct folio_err err = {0};
    if (report_page(S->cfg->conninfo, S->cfg->model_key, S->cfg->hours, S->cfg->review, &page, &len, &err))
        return text(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "report unavailable: %s %s\n", err.msg, err.detail);
    return reply(mc, MHD_HTTP_OK, "text/html; charset=utf-8", page, len, NULL, NULL);
}

/* GET /thumb?doc=ID&page=N: page N as a PNG of at most 240 pixels. */
static enum MHD_Result page_thumb(struct MHD_Connection *mc, const struct rv_server *S)
{
    long long doc, page;
    if (!arg(mc, "doc") || folio_parse_int(arg(mc, "doc"), 1, INT64_MAX, &doc) ||
        folio_parse_int(arg(mc, "page") ? arg(mc, "page") : "1", 1, 1000000, &page))
        return text(mc, MHD_HTTP_BAD_REQUEST, "thumb wants doc=ID&page=N\n");
    struct folio_err err = {0};
    PGconn *c = NULL;
    uint8_t *data = NULL, *png = NULL;
    size_t n = 0, pn = 0;
    int rc = db_connect(S->cfg->conninfo, "folio-review", &c, &err);
    if (!rc)
        rc = queue_fetch_blob(c, doc, &data, &n, &err);
    if (c)
        PQfinish(c);
    if (!rc)
        rc = page_png(data, n, (int)page - 1, 240, &png, &pn, &err);
    free(data);
    if (rc) {
        free(png);
        return text(mc, rc == FOLIO_EINVAL ? MHD_HTTP_NOT_FOUND : MHD_HTTP_SERVICE_UNAVAILABLE, "no thumbnail: %s\n",
                    err.msg);
    }
    return reply(mc, MHD_HTTP_OK, "image/png", (char *)png, pn, NULL, NULL);
}

/* Same origin: when the browser names the page a POST came from, it must
 * be this server as the browser reached it (http, or https through a TLS
 * proxy that passes the Host on). */
static int origin_ok(struct MHD_Connection *mc)
{
    const char *o = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
    if (!o)
        return 1;
    const char *host = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Host");
    const char *rest = strncmp(o, "http://", 7) == 0 ? o + 7 : strncmp(o, "https://", 8) == 0 ? o + 8 : NULL;
    return host && rest && strcmp(rest, host) == 0;
}

/* POST /correct and /confirm: a confirm is a correction to the label the
 * person saw, so both are one learn_db_correct. */
/* Back to the list a form came from; only a path on this server: one
 * '/' first, then printable ASCII without '\' (browsers drop tabs and
 * newlines from URLs, so "/<TAB>/host" would be "//host", elsewhere). */
static const char *back_of(const struct rv_req *q)
{
    const char *b = q->back;
    if (b[0] != '/' || b[1] == '/')
        return "/";
    for (const char *c = b; *c; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f || *c == '\\')
            return "/";
    return b;
}

/* POST /split: the suggestion of the document's result, as folio split
 * --suggested does it. */
static enum MHD_Result post_split(const struct rv_server *S, struct MHD_Connection *mc, const struct rv_req *q,
                                  const char *sid)
{
    long long doc;
    if (folio_parse_int(q->doc, 1, INT64_MAX, &doc))
        return text(mc, MHD_HTTP_BAD_REQUEST, "the form wants doc\n");
    struct folio_err err = {0};
    PGconn *c = NULL;
    struct split_report rep;
    int rc = db_connect(S->cfg->conninfo, "folio-review", &c, &err);
    if (!rc)
        rc = split_apply(c, S->cfg->conninfo, doc,
                         S->cfg->model_key ? S->cfg->model_key : "default", NULL, &rep, &err);
    if (c)
        PQfinish(c);
    if (rc)
        return text(mc, rc == FOLIO_EINVAL ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_SERVICE_UNAVAILABLE,
                    "not split: %s %s\n", err.msg, err.hint);
    char q2[32];
    folio_log(FOLIO_LOG_INFO, "review_split", "document=%lld parts=%d session=%s", doc, rep.n,
              folio_lq(q2, sizeof q2, sid));
    return reply(mc, MHD_HTTP_SEE_OTHER, "text/plain; charset=utf-8", NULL, 0, NULL, back_of(q));
}

static enum MHD_Result post_action(const struct rv_server *S, struct MHD_Connection *mc, const struct rv_req *q,
                                   const char *sid, int split)
{
    char csrf[65];
    mac(S, "csrf", sid, csrf);
    if (!origin_ok(mc))
        return text(mc, MHD_HTTP_FORBIDDEN, "refused: the form was sent from another site (Origin)\n");
    if (!same(q->csrf, csrf))
        return text(mc, MHD_HTTP_FORBIDDEN, "refused: the form's CSRF token is missing or not this session's; "
                                            "reload the page and try again\n");
    if (split)
        return post_split(S, mc, q, sid);
    long long page = 0;
    if (!q->doc[0] || !q->label[0] || (q->page[0] && folio_parse_int(q->page, 1, 1000000, &page)))
        return text(mc, MHD_HTTP_BAD_REQUEST, "the form wants doc, label and optionally page >= 1\n");
    struct folio_err err = {0};
    PGconn *c = NULL;
    long long id = 0;
    int rc = db_connect(S->cfg->conninfo, "folio-review", &c, &err);
    if (!rc)
        rc = learn_db_correct(c, q->doc, q->label, (int)page, &err, &id);
    if (c)
        PQfinish(c);
    if (rc)
        return text(mc, rc == FOLIO_EINVAL ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_SERVICE_UNAVAILABLE,
                    "not recorded: %s %s\n", err.msg, err.hint);
    char q1[100], q2[32];
    folio_log(FOLIO_LOG_INFO, "review_correction", "document=%lld page=%lld label=%s session=%s", id, page,
              folio_lq(q1, sizeof q1, q->label), folio_lq(q2, sizeof q2, sid));
    return reply(mc, MHD_HTTP_SEE_OTHER, "text/plain; charset=utf-8", NULL, 0, NULL, back_of(q));
}

static enum MHD_Result post_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                  const char *ctype, const char *enc, const char *data, uint64_t off, size_t size)
{
    (void)kind;
    (void)filename;
    (void)ctype;
    (void)enc;
    struct rv_req *q = cls;
    char *dst = NULL;
    size_t cap = 0;
#define FIELD(name)                                                                                                    \
    if (strcmp(key, #name) == 0) {                                                                                     \
        dst = q->name;                                                                                                 \
        cap = sizeof q->name;                                                                                          \
    }
    FIELD(doc) else FIELD(label) else FIELD(page) else FIELD(csrf) else FIELD(back)
#undef FIELD
    if (!dst)
        return MHD_YES;
    /* A value too long for its field is cut to nothing: it matches no
     * document, label or token. */
    if (off + size >= cap) {
        dst[0] = '\0';
        return MHD_YES;
    }
    memcpy(dst + off, data, size);
    dst[off + size] = '\0';
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    const struct rv_server *S = cls;
    int post = strcmp(method, "POST") == 0;
    if (!*con_cls) {
        struct rv_req *q = calloc(1, sizeof *q);
        if (!q)
            return MHD_NO;
        *con_cls = q;
        if (post)
            q->pp = MHD_create_post_processor(mc, 4096, post_field, q);
        return MHD_YES;
    }
    struct rv_req *q = *con_cls;
    if (post && *upload_size) {
        q->body += *upload_size;
        if (q->body > RV_MAX_BODY)
            q->too_big = 1;
        else if (q->pp)
            MHD_post_process(q->pp, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (!post && strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return text(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and POST\n");
    char sid[33] = "", cookie[160] = "";
    int in = session_of(S, mc, sid);
    if (strcmp(url, "/login") == 0 && !post) {
        const char *t = arg(mc, "token");
        if (!S->cfg->token || !t || !same(t, S->cfg->token))
            return text(mc, MHD_HTTP_FORBIDDEN, "wrong or missing access token\n");
        if (session_new(S, sid, cookie, sizeof cookie))
            return text(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "no randomness for a session\n");
        return reply(mc, MHD_HTTP_SEE_OTHER, "text/plain; charset=utf-8", NULL, 0, cookie, "/");
    }
    if (!in && !post && S->cfg->token) {
        /* Scripts (curl) may read the pages with the token as a bearer
         * credential; actions still want a browser session. */
        const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
        if (h && strncmp(h, "Bearer ", 7) == 0 && same(h + 7, S->cfg->token)) {
            in = 1;
            snprintf(sid, sizeof sid, "bearer");
        }
    }
    if (!in) {
        /* Behind a Unix socket the proxy in front decides who comes in. */
        if (S->cfg->token || post)
            return text(mc, MHD_HTTP_UNAUTHORIZED,
                        post ? "refused: no session; open the review page first\n"
                             : "sign in with the login link folio report --listen printed (/login?token=...)\n");
        if (session_new(S, sid, cookie, sizeof cookie))
            return text(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "no randomness for a session\n");
    }
    if (post) {
        if (q->too_big || !q->pp)
            return text(mc, q->too_big ? MHD_HTTP_CONTENT_TOO_LARGE : MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                        "the form wants application/x-www-form-urlencoded, at most %d bytes\n", RV_MAX_BODY);
        if (strcmp(url, "/correct") == 0 || strcmp(url, "/confirm") == 0 || strcmp(url, "/split") == 0)
            return post_action(S, mc, q, sid, strcmp(url, "/split") == 0);
        return text(mc, MHD_HTTP_NOT_FOUND, "no such action\n");
    }
    if (strcmp(url, "/") == 0)
        return page_queue(S, mc, sid, cookie[0] ? cookie : NULL);
    if (strcmp(url, "/report") == 0)
        return page_report(S, mc);
    if (strcmp(url, "/thumb") == 0)
        return page_thumb(mc, S);
    return text(mc, MHD_HTTP_NOT_FOUND, "not found: the review page is at /, the report at /report\n");
}

static void done(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode why)
{
    (void)cls;
    (void)mc;
    (void)why;
    struct rv_req *q = *con_cls;
    if (q && q->pp)
        MHD_destroy_post_processor(q->pp);
    free(q);
    *con_cls = NULL;
}

/* A listening Unix socket at path, for a reverse proxy: group may connect
 * (0660), others not. A stale socket of an earlier run is replaced; any
 * other file there is an error. */
static int unix_listen(const char *path, int *fd, struct folio_err *err)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return folio_err_set(err, FOLIO_EINVAL, "--listen unix:%s: the path is too long", path);
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return folio_err_set(err, FOLIO_EINVAL, "--listen unix:%s: a file that is not a socket is there", path);
        unlink(path);
    }
    *fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    mode_t old = umask(0117);
    int ok = *fd >= 0 && bind(*fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(*fd, 64) == 0;
    int saved = errno;
    umask(old);
    if (!ok) {
        if (*fd >= 0)
            close(*fd);
        folio_err_set(err, FOLIO_EIO, "cannot listen on unix:%s", path);
        folio_err_detail(err, "%s", strerror(saved));
        return FOLIO_EIO;
    }
    return 0;
}

int review_serve(const char *listen, const struct review_cfg *cfg)
{
    struct rv_server S = {.cfg = cfg};
    struct folio_err err = {0};
    if (getrandom(S.key, sizeof S.key, 0) != (ssize_t)sizeof S.key) {
        fprintf(stderr, "folio: error: no randomness for the session key: %s\n", strerror(errno));
        return FOLIO_EXIT_FAIL;
    }
    int is_unix = strncmp(listen, "unix:", 5) == 0, lfd = -1;
    char host[256] = "", port[16] = "";
    struct addrinfo *ai = NULL;
    if (is_unix) {
        if (unix_listen(listen + 5, &lfd, &err))
            goto fail;
    } else {
        if (http_parse_listen("--listen", listen, &err))
            goto fail;
        const char *colon = strrchr(listen, ':');
        size_t hl = (size_t)(colon - listen);
        const char *h = listen;
        if (hl >= 2 && h[0] == '[') {
            h++;
            hl -= 2;
        }
        /* No address given: this machine only. Every address is 0.0.0.0 or [::]. */
        snprintf(host, sizeof host, "%.*s", (int)hl, h);
        if (!host[0])
            snprintf(host, sizeof host, "127.0.0.1");
        snprintf(port, sizeof port, "%s", colon + 1);
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        int gai = getaddrinfo(host, port, &hints, &ai);
        if (gai != 0 || !ai) {
            folio_err_set(&err, FOLIO_EINVAL, "--listen %s: cannot resolve '%s'", listen, host);
            folio_err_detail(&err, "%s", gai_strerror(gai));
            goto fail;
        }
    }
    sigset_t sigs, all, old;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    /* The server's threads block every signal (http.h says why). */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai && ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d =
        is_unix ? MHD_start_daemon(flags, 0, NULL, NULL, handle, &S, MHD_OPTION_LISTEN_SOCKET, lfd,
                                   MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 60u,
                                   MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_END)
                : MHD_start_daemon(flags, 0, NULL, NULL, handle, &S, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                   MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 60u,
                                   MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_END);
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ai)
        freeaddrinfo(ai);
    if (!d) {
        folio_err_set(&err, FOLIO_EIO, "cannot serve the review page on %s", listen);
        folio_err_detail(&err, "%s", strerror(saved));
        folio_err_hint(&err, "is the port in use by another process? pick another --listen");
        if (lfd >= 0)
            close(lfd);
        goto fail;
    }
    const union MHD_DaemonInfo *di = is_unix ? NULL : MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int bound = di ? (int)di->port : 0;
    char q[300];
    folio_log(FOLIO_LOG_INFO, "report_listening", "addr=%s port=%d access=%s",
              folio_lq(q, sizeof q, is_unix ? listen : host), bound, is_unix ? "unix-socket" : "token");
    if (!is_unix && cfg->print_url)
        fprintf(stderr, "folio: review page: http://%s%s%s:%d/login?token=%s\n", strchr(host, ':') ? "[" : "", host,
                strchr(host, ':') ? "]" : "", bound, cfg->token);
    int sig = 0;
    sigwait(&sigs, &sig);
    folio_log(FOLIO_LOG_INFO, "report_stopping", "signal=%d", sig);
    MHD_stop_daemon(d);
    if (is_unix)
        unlink(listen + 5);
    return FOLIO_EXIT_OK;
fail:
    folio_err_print(stderr, &err);
    return FOLIO_EXIT_FAIL;
}
