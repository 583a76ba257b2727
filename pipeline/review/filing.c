/*
 * Filing by result (review.h): classified originals move from
 * DIR/.folio/done/ to DIR/.folio/filed/<PATTERN>, and again when a
 * correction changes the label; folio.filings records every move.
 *
 * The move itself is ingest's own (ingest_move_into): every folder opened
 * with O_NOFOLLOW beneath DIR/.folio, rename without replacing, a counter
 * before the extension when the name is taken (a.pdf, a.1.pdf). The
 * pattern's values are sanitised into single path components, so no label
 * or file name can climb out of the tree or hide a file. Where a file is
 * now: the newest filings row, else found in done/ by its name, size and
 * sha256 (ingest records where a file came from, not where it went), else
 * -- after a crash between a move and its row -- already at its target.
 */
#include "ingest/ingest.h"
#include "pipeline/db/db.h"
#include "pipeline/review/review.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* Appends v as one safe path component: '/', controls and backslash
 * become '_', a leading '.' too (no "..", no hidden files), at most 120
 * bytes (cut on a UTF-8 boundary), never empty. */
static int put_component(char *out, size_t n, size_t *o, const char *v)
{
    size_t start = *o, len = folio_utf8_prefix(v, strlen(v), 120);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)v[i];
        char put = ch < 0x20 || ch == 0x7f || ch == '/' || ch == '\\' || (ch == '.' && *o == start) ? '_' : (char)ch;
        if (*o + 2 > n)
            return -1;
        out[(*o)++] = put;
    }
    if (*o == start) {
        if (*o + 2 > n)
            return -1;
        out[(*o)++] = '_';
    }
    out[*o] = '\0';
    return 0;
}

int filing_expand(const char *pattern, const struct filing_vars *v, char *out, size_t n, struct folio_err *err)
{
    size_t o = 0;
    out[0] = '\0';
    if (!pattern[0] || pattern[0] == '/' || pattern[strlen(pattern) - 1] == '/') {
        folio_err_set(err, FOLIO_EINVAL, "--file-by '%s': a relative path that ends in a file name", pattern);
        folio_err_hint(err, "for example {label}/{yyyy}/{mm}/{name}");
        return FOLIO_EINVAL;
    }
    for (const char *c = pattern; *c;) {
        size_t cl = strcspn(c, "/");
        if (cl == 0 || (cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.')) {
            folio_err_set(err, FOLIO_EINVAL, "--file-by '%s': empty, '.' and '..' components are refused", pattern);
            folio_err_hint(err, "the tree is DIR/.folio/filed/; name folders below it, e.g. {label}/{yyyy}/{name}");
            return FOLIO_EINVAL;
        }
        c += cl + (c[cl] == '/');
    }
    char lit[NAME_MAX + 1];
    size_t ll = 0;
    for (const char *p = pattern;; p++) {
        /* literal text collects per component, then goes through the same
         * sanitising as the values */
        if (*p == '{') {
            const char *end = strchr(p, '}');
            char key[16];
            if (!end || (size_t)(end - p - 1) >= sizeof key)
                return folio_err_set(err, FOLIO_EINVAL, "--file-by '%s': an unclosed or long {", pattern);
            snprintf(key, sizeof key, "%.*s", (int)(end - p - 1), p + 1);
            const char *val = strcmp(key, "label") == 0  ? v->label
                              : strcmp(key, "yyyy") == 0 ? v->yyyy
                              : strcmp(key, "mm") == 0   ? v->mm
                              : strcmp(key, "dd") == 0   ? v->dd
                              : strcmp(key, "name") == 0 ? v->name
                              : strcmp(key, "id") == 0   ? v->id
                                                         : NULL;
            if (!val) {
                folio_err_set(err, FOLIO_EINVAL, "--file-by '%s': no field {%s}", pattern, key);
                folio_err_hint(err, "the fields are {label} {yyyy} {mm} {dd} {name} {id}");
                return FOLIO_EINVAL;
            }
            size_t vl = strlen(val);
            if (ll + vl >= sizeof lit)
                return folio_err_set(err, FOLIO_EINVAL, "--file-by: a path component is too long");
            memcpy(lit + ll, val, vl);
            ll += vl;
            p = end;
            continue;
        }
        if (*p == '/' || *p == '\0') {
            lit[ll] = '\0';
            if (o) {
                if (o + 2 > n)
                    return folio_err_set(err, FOLIO_EINVAL, "--file-by: the path is too long");
                out[o++] = '/';
            }
            if (put_component(out, n, &o, lit))
                return folio_err_set(err, FOLIO_EINVAL, "--file-by: the path is too long");
            ll = 0;
            if (!*p)
                break;
            continue;
        }
        if (ll + 1 >= sizeof lit)
            return folio_err_set(err, FOLIO_EINVAL, "--file-by: a path component is too long");
        lit[ll++] = *p;
    }
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Hex (from encode(bytea, 'hex')) into a C string; -1 on NUL or length. */
static int unhex(const char *h, char *out, size_t n)
{
    size_t l = strlen(h) / 2;
    if (l + 1 > n)
        return -1;
    for (size_t i = 0; i < l; i++) {
        int a = hexval(h[2 * i]), b = hexval(h[2 * i + 1]);
        if (a < 0 || b < 0 || (a | b) == 0)
            return -1;
        out[i] = (char)(a << 4 | b);
    }
    out[l] = '\0';
    return 0;
}

/* path holds the document (size and sha256)? */
static int holds(const char *path, long long bytes, const char *sha)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != bytes)
        return 0;
    char h[65];
    struct folio_err e = {0};
    return file_sha256_hex(path, h, &e) == 0 && strcmp(h, sha) == 0;
}

/* Tries NAME, then NAME with counters 1..99 before the extension, in
 * folder; the first that holds the document into found. */
static int find_in(const char *folder, const char *name, long long bytes, const char *sha, char *found, size_t n)
{
    const char *dot = strrchr(name, '.');
    int stem = dot && dot != name ? (int)(dot - name) : (int)strlen(name);
    for (int k = 0; k < 100; k++) {
        int r = k ? folio_snprintf(found, n, "%s/%.*s.%d%s", folder, stem, name, k, name + stem)
                  : folio_snprintf(found, n, "%s/%s", folder, name);
        if (r == 0 && holds(found, bytes, sha))
            return 1;
    }
    return 0;
}

static int record(PGconn *c, const char *const *p, struct folio_err *err)
{
    PGresult *r = PQexecParams(c,
                               "INSERT INTO folio.filings (document_id, source_id, label, from_path, to_path, "
                               "to_display, host, note, searchable_path, searchable_display) VALUES ($1::bigint, "
                               "$2::bigint, $3, decode(nullif($4, ''), 'hex'), decode(nullif($5, ''), 'hex'), $6, $7, "
                               "$8, decode(nullif($9, ''), 'hex'), $10)",
                               10, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        return db_err_from_result(r, c, "recording the filing", err);
    PQclear(r);
    return 0;
}

static void tohex(const char *s, char *out)
{
    folio_hex((const uint8_t *)s, strlen(s), out);
}

/* NAME.searchable.pdf beside a filed original (in DIR/.folio/<sub>): the
 * earlier copy moved along when there is one, else a new one from the
 * original's pages. NULL when there is none (every page had text, or it
 * failed: logged, the filing itself stands). */
static char *searchable_beside(const struct filing_opts *o, const char *sub, const char *fname, const char *moved,
                               const char *prev, int pages, const char *has_text, struct filing_stats *st)
{
    char sname[NAME_MAX + 1], lq[700];
    const char *dot = strrchr(fname, '.');
    int stem = dot && dot != fname ? (int)(dot - fname) : (int)strlen(fname);
    if (folio_snprintf(sname, sizeof sname, "%.*s.searchable.pdf", stem, fname) != 0)
        return NULL;
    struct folio_err err = {0};
    char *out = NULL;
    struct stat sb;
    if (prev[0] && lstat(prev, &sb) == 0 && S_ISREG(sb.st_mode)) {
        if (ingest_move_into(o->dir, sub, prev, sname, &out, &err) == 0)
            return out;
        folio_log(FOLIO_LOG_WARN, "searchable_move_failed", "error=%s", folio_lq(lq, sizeof lq, err.msg));
        return NULL;
    }
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[600], file[700];
    snprintf(dir, sizeof dir, "%s/folio-searchable-XXXXXX", tmp);
    if (!mkdtemp(dir))
        return NULL;
    snprintf(file, sizeof file, "%s/out.pdf", dir);
    uint8_t *data = NULL;
    size_t n = 0;
    struct searchable_stats ss = {0};
    double t0 = folio_mono_ms();
    int rc = folio_read_file(moved, (size_t)1 << 34, &data, &n, &err);
    if (!rc)
        rc = searchable_pdf(data, n, pages, has_text ? has_text : "", o->ocr_lang, dir, file, &ss, &err);
    free(data);
    if (rc == 0 && ingest_move_into(o->dir, sub, file, sname, &out, &err) == 0) {
        st->searchable++;
        st->searchable_pages += ss.pages_ocr;
        st->searchable_kept += ss.pages_kept;
        st->searchable_ms += folio_mono_ms() - t0;
        folio_log(FOLIO_LOG_INFO, "searchable_pdf", "pages_ocr=%d pages_kept=%d ms=%.0f", ss.pages_ocr,
                  ss.pages_kept, folio_mono_ms() - t0);
    } else if (rc != 1) {
        char lq2[400];
        folio_log(FOLIO_LOG_WARN, "searchable_pdf_failed", "file=%s error=%s", folio_lq(lq, sizeof lq, moved),
                  folio_lq(lq2, sizeof lq2, err.msg));
    }
    nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    return out;
}

/* One batch of up to FILING_BATCH originals; *rows = how many it looked at. */
#define FILING_BATCH 1000
#define FILING_XSTR(x) #x
#define FILING_STR(x) FILING_XSTR(x)
static int filing_batch(PGconn *c, const struct filing_opts *o, struct filing_stats *st, int *rows,
                        struct folio_err *err)
{
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    char prefix[PATH_MAX + 1], prefix_hex[2 * PATH_MAX + 3];
    if (folio_snprintf(prefix, sizeof prefix, "%s/", o->dir) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "the folder name is too long");
    tohex(prefix, prefix_hex);
    const char *p[] = {host, prefix_hex, o->model_key};
    /* The sightings of files that were moved to done/ by ingest of this
     * folder on this host, whose label (newest whole-document correction,
     * else the result) differs from the label they were last filed under. */
    PGresult *r = PQexecParams(
        c,
        "WITH w AS (SELECT s.id, s.document_id, s.path, s.seen_at, d.sha256, d.bytes, d.pages, "
        "  coalesce((SELECT k.label FROM folio.corrections k WHERE k.document_id = s.document_id "
        "             AND k.page IS NULL ORDER BY k.id DESC LIMIT 1), r.label) AS label, "
        "  (SELECT f.id FROM folio.filings f WHERE f.source_id = s.id ORDER BY f.id DESC LIMIT 1) AS last "
        "  FROM folio.document_sources s JOIN folio.documents d ON d.id = s.document_id "
        "  JOIN folio.results r ON r.document_id = s.document_id AND r.model_key = $3 "
        " WHERE s.host = $1 AND s.disposition = 'moved' "
        "   AND substring(s.path FROM 1 FOR length(decode($2, 'hex'))) = decode($2, 'hex')) "
        "SELECT w.id, w.document_id, encode(w.path, 'hex'), to_char(w.seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), "
        "       to_char(w.seen_at AT TIME ZONE 'UTC' + interval '1 day', 'YYYY-MM-DD'), encode(w.sha256, 'hex'), "
        "       w.bytes, w.label, coalesce(encode(f.to_path, 'hex'), ''), f.id IS NOT NULL, "
        "       coalesce(encode(f.searchable_path, 'hex'), ''), w.pages, "
        "       (SELECT string_agg(CASE WHEN p.text_source = 'pdf' THEN 't' ELSE 'f' END, '' ORDER BY g) "
        "          FROM generate_series(1, w.pages) g LEFT JOIN folio.page_results p "
        "            ON p.document_id = w.document_id AND p.model_key = $3 AND p.page = g) "
        "  FROM w LEFT JOIN folio.filings f ON f.id = w.last "
        " WHERE f.id IS NULL OR f.label IS DISTINCT FROM w.label ORDER BY w.id LIMIT " FILING_STR(FILING_BATCH),
        3, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        db_err_from_result(r, c, "listing what to file", err);
        if (strstr(err->msg, "42P01"))
            folio_err_hint(err, "the schema is missing folio.filings: run folio migrate");
        return FOLIO_EDB;
    }
    int rc = 0;
    *rows = PQntuples(r);
    for (int i = 0; !rc && i < PQntuples(r); i++) {
        const char *sid = PQgetvalue(r, i, 0), *doc = PQgetvalue(r, i, 1), *sha = PQgetvalue(r, i, 5);
        const char *label = PQgetvalue(r, i, 7);
        long long bytes = atoll(PQgetvalue(r, i, 6));
        char path[PATH_MAX], cur[PATH_MAX] = "", rel[PATH_MAX], folder[PATH_MAX * 2];
        if (unhex(PQgetvalue(r, i, 2), path, sizeof path) || strlen(path) <= strlen(prefix))
            continue;
        snprintf(rel, sizeof rel, "%s", path + strlen(prefix));
        const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
        /* where is it now? */
        int found = 0;
        if (PQgetvalue(r, i, 8)[0])
            found = unhex(PQgetvalue(r, i, 8), cur, sizeof cur) == 0 && holds(cur, bytes, sha);
        for (int day = 3; !found && day <= 4 && !PQgetvalue(r, i, 8)[0]; day++) {
            char relf[PATH_MAX];
            snprintf(relf, sizeof relf, "%s", rel);
            char *slash = strrchr(relf, '/');
            if (slash)
                *slash = '\0';
            if (folio_snprintf(folder, sizeof folder, "%s/.folio/done/%s%s%s", o->dir, PQgetvalue(r, i, day),
                               slash ? "/" : "", slash ? relf : "") == 0)
                found = find_in(folder, base, bytes, sha, cur, sizeof cur);
        }
        struct filing_vars v = {.label = label, .name = base, .id = doc};
        char y[8], m[4], d[4], target[PATH_MAX];
        snprintf(y, sizeof y, "%.4s", PQgetvalue(r, i, 3));
        snprintf(m, sizeof m, "%.2s", PQgetvalue(r, i, 3) + 5);
        snprintf(d, sizeof d, "%.2s", PQgetvalue(r, i, 3) + 8);
        v.yyyy = y;
        v.mm = m;
        v.dd = d;
        if ((rc = filing_expand(o->pattern, &v, target, sizeof target, err)))
            break;
        char sub[PATH_MAX + 8], *tname = strrchr(target, '/');
        snprintf(sub, sizeof sub, "filed%s%.*s", tname ? "/" : "", tname ? (int)(tname - target) : 0, target);
        const char *fname = tname ? tname + 1 : target;
        if (!found) {
            /* a crash between a move and its row: the file is at its target */
            if (folio_snprintf(folder, sizeof folder, "%s/.folio/%s", o->dir, sub) == 0 &&
                find_in(folder, fname, bytes, sha, cur, sizeof cur)) {
                char hx[2 * PATH_MAX + 1], disp[PATH_MAX];
                tohex(cur, hx);
                ingest_display(disp, sizeof disp, cur);
                const char *q[] = {doc, sid, label, "", hx, disp, host, "found at its target (recorded late)", "",
                                   NULL};
                if (!(rc = record(c, q, err)))
                    st->filed++;
                continue;
            }
            /* Not where ingest put it nor where it was filed: say so once
             * (a correction later tries again). */
            char disp[PATH_MAX];
            ingest_display(disp, sizeof disp, path);
            const char *q[] = {doc, sid, label, "", "", NULL, host, "original not found in done/ or where it was filed",
                               "", NULL};
            if (!(rc = record(c, q, err)))
                st->missing++;
            char lq[PATH_MAX];
            folio_log(FOLIO_LOG_WARN, "filing_missing", "document=%s path=%s", doc, folio_lq(lq, sizeof lq, disp));
            continue;
        }
        char *moved = NULL;
        struct folio_err merr = {0};
        if (ingest_move_into(o->dir, sub, cur, fname, &moved, &merr) != 0) {
            char lq[600];
            folio_log(FOLIO_LOG_ERROR, "filing_failed", "document=%s error=%s", doc,
                      folio_lq(lq, sizeof lq, merr.msg));
            st->failed++;
            continue;
        }
        char hf[2 * PATH_MAX + 1], ht[2 * PATH_MAX + 1], disp[PATH_MAX], hs[2 * PATH_MAX + 1] = "", sdisp[PATH_MAX];
        tohex(cur, hf);
        tohex(moved, ht);
        ingest_display(disp, sizeof disp, moved);
        char *spath = NULL;
        if (o->searchable) {
            char prev[PATH_MAX] = "";
            if (PQgetvalue(r, i, 10)[0])
                unhex(PQgetvalue(r, i, 10), prev, sizeof prev);
            spath = searchable_beside(o, sub, fname, moved, prev, atoi(PQgetvalue(r, i, 11)),
                                      PQgetvalue(r, i, 12), st);
            if (spath) {
                tohex(spath, hs);
                ingest_display(sdisp, sizeof sdisp, spath);
            }
        }
        const char *q[] = {doc, sid, label, hf, ht, disp, host,
                           PQgetvalue(r, i, 9)[0] == 't' ? "label changed" : NULL, hs, spath ? sdisp : NULL};
        rc = record(c, q, err);
        if (!rc) {
            st->filed++;
            char lq[PATH_MAX], lq2[200];
            folio_log(FOLIO_LOG_DEBUG, "document_filed", "document=%s label=%s to=%s", doc,
                      folio_lq(lq2, sizeof lq2, label), folio_lq(lq, sizeof lq, disp));
        }
        free(moved);
        free(spath);
    }
    PQclear(r);
    return rc;
}

int filing_pass(PGconn *c, const struct filing_opts *o, struct filing_stats *st, struct folio_err *err)
{
    /* Batches until one is not full; a batch that recorded nothing (every
     * move failed: logged) ends the pass too, so a stuck file cannot spin. */
    for (;;) {
        long long before = st->filed + st->missing;
        int rows = 0, rc = filing_batch(c, o, st, &rows, err);
        if (rc || rows < FILING_BATCH || st->filed + st->missing == before)
            return rc;
    }
}
