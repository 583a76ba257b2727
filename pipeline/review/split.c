/*
 * Splits applied (review.h): the parts of a multi-page PDF become new
 * documents. Each part is cut by qpdf (--deterministic-id, so the same
 * pages give the same bytes and a second split finds the same documents)
 * and taken in by the ingest stage itself (ingest_run on a private
 * temporary folder), so a part is validated, stored and queued exactly as
 * a scanned file would be. The original stays; folio.document_splits links
 * each part to it, and each new part's job reuses the original's page text
 * (a results_history row of those pages, named by jobs.reuse_text_from, as
 * `folio reclassify --reuse-ocr` does), so no page is OCR'd twice.
 */
#include "pipeline/ingest/ingest_run.h"
#include "pipeline/db/queue.h"
#include "pipeline/review/review.h"

#include <errno.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* The parts from "--at 3,5" (first pages of the parts after the first) or
 * the stored suggestion of the document's result. */
static int parts_of(PGconn *c, const char *id, int pages, const char *model_key, const char *at,
                    struct split_part *part, int *n, struct folio_err *err)
{
    *n = 0;
    if (at) {
        int first = 1;
        const char *s = at;
        while (*s) {
            char *end;
            long p = strtol(s, &end, 10);
            if (end == s || (*end && *end != ',') || p <= first || p > pages) {
                folio_err_set(err, FOLIO_EINVAL, "--at '%s': want ascending page numbers 2..%d, comma-separated", at,
                              pages);
                folio_err_hint(err, "each number starts a new part: --at 3,5 splits 1-2, 3-4, 5-%d", pages);
                return FOLIO_EINVAL;
            }
            if (*n >= SPLIT_MAX_PARTS - 1)
                return folio_err_set(err, FOLIO_EINVAL, "--at: at most %d parts", SPLIT_MAX_PARTS);
            part[*n].first = first;
            part[(*n)++].last = (int)p - 1;
            first = (int)p;
            s = *end ? end + 1 : end;
        }
        part[*n].first = first;
        part[(*n)++].last = pages;
        if (*n < 2)
            return folio_err_set(err, FOLIO_EINVAL, "--at names no page to split at");
        return 0;
    }
    const char *p[] = {id, model_key};
    PGresult *r = PQexecParams(c,
                               "SELECT s.first_page, s.last_page FROM folio.document_segments s "
                               "JOIN folio.results r ON r.id = s.result_id "
                               "WHERE r.document_id = $1::bigint AND r.model_key = $2 ORDER BY s.first_page",
                               2, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "reading the split suggestion", err);
    int rows = PQntuples(r);
    for (int i = 0; i < rows && i < SPLIT_MAX_PARTS; i++) {
        part[i].first = atoi(PQgetvalue(r, i, 0));
        part[i].last = atoi(PQgetvalue(r, i, 1));
    }
    PQclear(r);
    if (rows < 2) {
        folio_err_set(err, FOLIO_EINVAL, "document %s has no split suggestion (%d segment%s for model key %s)", id,
                      rows, rows == 1 ? "" : "s", model_key);
        folio_err_hint(err, "name the pages yourself: folio split %s --at PAGE[,PAGE...]", id);
        return FOLIO_EINVAL;
    }
    if (rows > SPLIT_MAX_PARTS)
        return folio_err_set(err, FOLIO_EINVAL, "document %s: more than %d suggested parts", id, SPLIT_MAX_PARTS);
    *n = rows;
    return 0;
}

int qpdf_run(char *const argv[], const char *what, struct folio_err *err)
{
    pid_t pid;
    int rc = posix_spawnp(&pid, "qpdf", NULL, NULL, argv, environ);
    if (rc != 0) {
        folio_err_set(err, FOLIO_EIO, "cannot run qpdf: %s", strerror(rc));
        folio_err_hint(err, "install it: apt-get install qpdf (ops/deps.sh)");
        return FOLIO_EIO;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    /* exit status 3 is "warnings": the output is written */
    if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3))
        return folio_err_set(err, FOLIO_EFORMAT, "qpdf could not %s (exit status %d)", what,
                             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
}

/* qpdf --deterministic-id --empty --pages IN a-b -- OUT */
static int cut(const char *in, int a, int b, const char *out, struct folio_err *err)
{
    char range[32], what[64];
    snprintf(range, sizeof range, "%d-%d", a, b);
    snprintf(what, sizeof what, "cut pages %s", range);
    char *argv[] = {"qpdf", "--deterministic-id", "--empty", "--pages", (char *)in, range, "--", (char *)out, NULL};
    return qpdf_run(argv, what, err);
}

int file_sha256_hex(const char *path, char hex[65], struct folio_err *err)
{
    uint8_t *d = NULL, h[FOLIO_SHA256_LEN];
    size_t n = 0;
    int rc = folio_read_file(path, (size_t)1 << 34, &d, &n, err);
    if (!rc && folio_sha256(d, n, h) != 0)
        rc = folio_err_set(err, FOLIO_EIO, "sha256 of %s failed", path);
    free(d);
    if (!rc)
        folio_hex(h, sizeof h, hex);
    return rc;
}

/* Links the parts to the original and gives each new part's queued job the
 * original's text of its pages; one transaction. */
static int record(PGconn *c, const char *id, const char *model_key, const struct split_report *rep,
                  struct folio_err *err)
{
    if (db_exec(c, "BEGIN", err))
        return FOLIO_EDB;
    for (int i = 0; i < rep->n; i++) {
        char a[16], b[16], child[24];
        snprintf(a, sizeof a, "%d", rep->part[i].first);
        snprintf(b, sizeof b, "%d", rep->part[i].last);
        snprintf(child, sizeof child, "%lld", rep->part[i].child);
        const char *p[] = {id, a, b, child, model_key};
        PGresult *r = PQexecParams(
            c,
            "WITH link AS (INSERT INTO folio.document_splits (parent_id, first_page, last_page, child_id) "
            "              VALUES ($1::bigint, $2::int, $3::int, $4::bigint) ON CONFLICT DO NOTHING), "
            "par AS (SELECT r.*, string_to_array(r.ocr_text, E'\\f') AS t FROM folio.results r "
            "         WHERE r.document_id = $1::bigint AND r.model_key = $5 AND r.ocr_text IS NOT NULL), "
            "job AS (SELECT j.id FROM folio.jobs j WHERE j.document_id = $4::bigint AND j.model_key = $5 "
            "         AND j.state = 'queued' AND j.reuse_text_from IS NULL FOR UPDATE), "
            "h AS (INSERT INTO folio.results_history (id, document_id, model_key, label, confidence, needs_review, "
            "        scores, engine_path, ocr_text, ocr_confidence, ocr_orientation, review_reason, timings, "
            "        created_at, ocr_pages) "
            "      SELECT nextval(pg_get_serial_sequence('folio.results', 'id')), $4::bigint, par.model_key, "
            "             par.label, par.confidence, true, '{}', par.engine_path, "
            "             array_to_string(par.t[$2::int:$3::int], E'\\f'), par.ocr_confidence, par.ocr_orientation, "
            "             format('pages %s-%s of document %s (split), text kept for the part', $2, $3, $1), "
            "             '{}', par.created_at, "
            "             jsonb_build_object('results', coalesce((SELECT jsonb_agg(e ORDER BY o) "
            "               FROM jsonb_array_elements(CASE WHEN jsonb_typeof(par.ocr_pages->'results') = 'array' "
            "                    THEN par.ocr_pages->'results' END) WITH ORDINALITY AS x(e, o) "
            "              WHERE o BETWEEN $2::int AND $3::int), '[]'::jsonb)) "
            "        FROM par WHERE EXISTS (SELECT 1 FROM job) RETURNING id) "
            "UPDATE folio.jobs j SET reuse_text_from = h.id FROM h, job WHERE j.id = job.id RETURNING j.id",
            5, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            db_err_from_result(r, c, "recording the split", err);
            PQclear(PQexec(c, "ROLLBACK"));
            return FOLIO_EDB;
        }
        ((struct split_report *)rep)->part[i].text_reused = PQntuples(r) > 0;
        PQclear(r);
    }
    return db_exec(c, "COMMIT", err);
}

int split_apply(PGconn *c, const char *conninfo, long long doc, const char *model_key, const char *at,
                struct split_report *rep, struct folio_err *err)
{
    memset(rep, 0, sizeof *rep);
    char id[24];
    snprintf(id, sizeof id, "%lld", doc);
    const char *p[] = {id};
    PGresult *r = PQexecParams(c,
                               "SELECT d.pages, d.media_type, coalesce((SELECT s.name_display FROM "
                               "folio.document_sources s WHERE s.document_id = d.id ORDER BY s.id LIMIT 1), 'document') "
                               "FROM folio.documents d WHERE d.id = $1::bigint",
                               1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "looking up the document", err);
    if (PQntuples(r) != 1) {
        PQclear(r);
        return folio_err_set(err, FOLIO_EINVAL, "no document %s", id);
    }
    int pages = atoi(PQgetvalue(r, 0, 0));
    char name[200];
    snprintf(name, sizeof name, "%s", PQgetvalue(r, 0, 2));
    int is_pdf = strcmp(PQgetvalue(r, 0, 1), "application/pdf") == 0;
    PQclear(r);
    if (!is_pdf || pages < 2) {
        folio_err_set(err, FOLIO_EINVAL, "document %s is %s; only PDFs of two or more pages are split", id,
                      pages < 2 ? "one page" : "not a PDF");
        return FOLIO_EINVAL;
    }
    int rc = parts_of(c, id, pages, model_key, at, rep->part, &rep->n, err);
    if (rc)
        return rc;
    /* The file name of a part says where it came from; only its bytes
     * matter to folio (a name is display, never a path here). */
    for (char *s = name; *s; s++)
        if (*s == '/' || (unsigned char)*s < 0x20)
            *s = '_';
    char *dot = strrchr(name, '.');
    if (dot && strcasecmp(dot, ".pdf") == 0)
        *dot = '\0';
    uint8_t *data = NULL;
    size_t len = 0;
    if ((rc = queue_fetch_document(c, NULL, doc, &data, &len, err)))
        return rc;
    const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[512], src[600], in[600], out[900];
    snprintf(dir, sizeof dir, "%s/folio-split-XXXXXX", tmpdir);
    if (!mkdtemp(dir)) {
        free(data);
        return folio_err_set(err, FOLIO_EIO, "cannot make a folder in %s: %s", tmpdir, strerror(errno));
    }
    snprintf(src, sizeof src, "%s/original.pdf", dir);
    snprintf(in, sizeof in, "%s/in", dir);
    rc = folio_write_file_atomic(src, data, len, err);
    free(data);
    if (!rc && mkdir(in, 0700) != 0)
        rc = folio_err_set(err, FOLIO_EIO, "cannot make %s: %s", in, strerror(errno));
    char sha[SPLIT_MAX_PARTS][65];
    for (int i = 0; !rc && i < rep->n; i++) {
        snprintf(out, sizeof out, "%s/%s.p%d-%d.pdf", in, name, rep->part[i].first, rep->part[i].last);
        rc = cut(src, rep->part[i].first, rep->part[i].last, out, err);
        if (!rc)
            rc = file_sha256_hex(out, sha[i], err);
    }
    if (!rc) {
        struct ingest_run_opts o;
        ingest_run_opts_default(&o);
        o.dir = in;
        o.conninfo = conninfo;
        o.model_key = model_key;
        o.after = INGEST_AFTER_DELETE;
        o.progress = 0;
        o.jobs = 1;
        o.stable_ms = 0;
        struct ingest_run_stats st;
        rc = ingest_run(&o, &st, err);
        if (!rc && st.rejected)
            rc = folio_err_set(err, FOLIO_EFORMAT, "ingest rejected %llu of the %d parts",
                               (unsigned long long)st.rejected, rep->n);
    }
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    for (int i = 0; !rc && i < rep->n; i++) {
        const char *q[] = {sha[i], id};
        r = PQexecParams(c,
                         "SELECT d.id, NOT EXISTS (SELECT 1 FROM folio.document_splits s "
                         "WHERE s.parent_id = $2::bigint AND s.child_id = d.id) "
                         "FROM folio.documents d WHERE d.sha256 = decode($1, 'hex')",
                         2, NULL, q, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            return db_err_from_result(r, c, "finding the parts", err);
        if (PQntuples(r) != 1) {
            PQclear(r);
            return folio_err_set(err, FOLIO_EIO, "part %d-%d was ingested but is not in folio.documents",
                                 rep->part[i].first, rep->part[i].last);
        }
        rep->part[i].child = atoll(PQgetvalue(r, 0, 0));
        rep->part[i].is_new = PQgetvalue(r, 0, 1)[0] == 't';
        PQclear(r);
    }
    if (!rc)
        rc = record(c, id, model_key, rep, err);
    return rc;
}
