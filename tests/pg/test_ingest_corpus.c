/*
 * folio ingest, one-shot, on a folder holding every kind of input the issue
 * names (made here by the real encoders): each accepted format, CMYK and
 * progressive JPEG, a PNG named .jpg, a PDF, empty/truncated/bomb/random/broken PDF
 * files, a symlink, a directory named x.jpg, hostile names, duplicates and
 * ignored names. For every input it asserts where the file ended up, why,
 * and that the database says the same; then that a re-run changes nothing,
 * that a file committed but not moved (the crash window) is recognised, and
 * the --recursive, --after keep/delete and --max-bytes paths.
 */
#include "common/common.h"
#include "tests/support/corpus_gen.h"
#include "tests/support/testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum expect { EXP_DONE, EXP_REJECTED, EXP_LEFT };

struct input {
    const char *name; /* bytes; may hold anything but '/' and NUL */
    uint8_t *data;
    size_t len;
    enum expect expect;
    const char *reason;  /* EXP_REJECTED */
    const char *media;   /* EXP_DONE */
    int pages;           /* EXP_DONE */
    const char *display; /* expected name_display, NULL = same as name */
    int symlink, dir;
    struct timespec mtime;
};

static char g_db[512];
static char g_dir[PATH_MAX];

static void write_bytes(const char *path, const uint8_t *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
        return;
    }
    if (n && fwrite(d, 1, n, f) != n)
        fprintf(stderr, "short write %s\n", path);
    fclose(f);
}

static uint8_t *read_bytes(const char *path, size_t *n)
{
    uint8_t *d = NULL;
    struct folio_err e;
    if (folio_read_file(path, (size_t)1 << 30, &d, n, &e) != 0)
        return NULL;
    return d;
}

static PGconn *db(void)
{
    PGconn *c = PQconnectdb(g_db);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

static long long q_count(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        v = atoll(PQgetvalue(r, 0, 0));
    else
        fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return v;
}

/* Runs sql with one binary bytea parameter (a path). */
static PGresult *q_path(PGconn *c, const char *sql, const char *path)
{
    const char *v[1] = {path};
    int len[1] = {(int)strlen(path)}, fmt[1] = {1};
    Oid types[1] = {17};
    return PQexecParams(c, sql, 1, types, v, len, fmt, 0);
}

static int run_ingest(const char *extra, const char *dir, const char *log)
{
    return tu_sh("%s ingest --db '%s' --stable-ms 0 --no-progress %s '%s' >'%s' 2>&1", tu_folio_bin(), g_db,
                 extra, dir, log);
}

/* Finds dir/.folio/done/<any date>/rel; returns 1 and the path. */
static int find_done(const char *dir, const char *rel, char *out, size_t n)
{
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s/.folio/done", dir);
    DIR *d = opendir(base);
    if (!d)
        return 0;
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(out, n, "%s/%s/%s", base, de->d_name, rel);
        struct stat st;
        found = lstat(out, &st) == 0;
    }
    closedir(d);
    return found;
}

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static void add_done(struct input *in, size_t *n, const char *name, uint8_t *d, size_t len, const char *media,
                     int pages, const char *display)
{
    memset(&in[*n], 0, sizeof in[*n]);
    in[*n].name = name;
    in[*n].data = d;
    in[*n].len = len;
    in[*n].expect = EXP_DONE;
    in[*n].media = media;
    in[*n].pages = pages;
    in[*n].display = display;
    (*n)++;
}

static void add_other(struct input *in, size_t *n, const char *name, uint8_t *d, size_t len, enum expect e,
                      const char *reason, int symlink_, int dir)
{
    memset(&in[*n], 0, sizeof in[*n]);
    in[*n].name = name;
    in[*n].data = d;
    in[*n].len = len;
    in[*n].expect = e;
    in[*n].reason = reason;
    in[*n].symlink = symlink_;
    in[*n].dir = dir;
    (*n)++;
}

static uint8_t *jpeg_seed(uint32_t seed, size_t *len) { return cg_scan_jpeg(320, 240, seed, 1, 0, len); }

static size_t build_corpus(struct input *in)
{
    size_t n = 0, len = 0;
    uint8_t *d;
    d = cg_scan_jpeg(640, 480, 1, 1, 0, &len);
    add_done(in, &n, "baseline.jpg", d, len, "image/jpeg", 1, NULL);
    d = cg_scan_jpeg(640, 480, 2, 1, 1, &len);
    add_done(in, &n, "progressive.jpg", d, len, "image/jpeg", 1, NULL);
    d = cg_scan_jpeg(640, 480, 3, 0, 0, &len);
    add_done(in, &n, "gray.jpg", d, len, "image/jpeg", 1, NULL);
    d = cg_cmyk_jpeg(200, 100, 10, 200, 30, 5, &len);
    add_done(in, &n, "cmyk.jpg", d, len, "image/jpeg", 1, NULL);
    {
        size_t l0;
        uint8_t *j = jpeg_seed(4, &l0);
        d = cg_jpeg_with_exif(j, l0, 6, &len);
        free(j);
        add_done(in, &n, "rotated.jpg", d, len, "image/jpeg", 1, NULL);
    }
    static const struct { const char *name; int iff; const char *media; } lept[] = {
        {"page.png", IFF_PNG, "image/png"},      {"page.pnm", IFF_PNM, "image/x-portable-anymap"},
        {"page.bmp", IFF_BMP, "image/bmp"},      {"page.gif", IFF_GIF, "image/gif"},
        {"page.webp", IFF_WEBP, "image/webp"},   {"zip.tif", IFF_TIFF_ZIP, "image/tiff"},
    };
    for (size_t i = 0; i < sizeof lept / sizeof lept[0]; i++) {
        PIX *p = cg_pix(300, 200, (uint32_t)(10 + i), 0);
        d = cg_lept_write(p, lept[i].iff, &len);
        pixDestroy(&p);
        add_done(in, &n, lept[i].name, d, len, lept[i].media, 1, NULL);
    }
    d = cg_multipage_tiff(3, 400, 300, 1, &len);
    add_done(in, &n, "g4-3pages.tif", d, len, "image/tiff", 3, NULL);
    {
        PIX *p = cg_pix(120, 90, 99, 0);
        d = cg_lept_write(p, IFF_PNG, &len);
        pixDestroy(&p);
        add_done(in, &n, "png-named.jpg", d, len, "image/png", 1, NULL);
    }
    /* Rejected. */
    add_other(in, &n, "empty.jpg", cg_dup("", 0), 0, EXP_REJECTED, "empty", 0, 0);
    d = cg_scan_jpeg(800, 600, 5, 1, 0, &len);
    add_other(in, &n, "truncated.jpg", d, len * 6 / 10, EXP_REJECTED, "corrupt", 0, 0);
    d = jpeg_seed(6, &len);
    cg_jpeg_set_size(d, len, 65000, 65000);
    add_other(in, &n, "bomb.jpg", d, len, EXP_REJECTED, "too_many_pixels", 0, 0);
    {
        PIX *p = cg_pix(32, 32, 7, 0);
        d = cg_lept_write(p, IFF_PNG, &len);
        pixDestroy(&p);
        cg_png_set_size(d, len, 100000, 100000);
        add_other(in, &n, "bomb.png", d, len, EXP_REJECTED, "too_many_pixels", 0, 0);
    }
    add_other(in, &n, "random.jpg", cg_random_bytes(4096, 8), 4096, EXP_REJECTED, "unsupported_format", 0, 0);
    d = cg_pdf(&len);
    add_done(in, &n, "doc.pdf", d, len, "application/pdf", 1, NULL);
    d = cg_pdf(&len);
    add_other(in, &n, "broken.pdf", d, 40, EXP_REJECTED, "corrupt", 0, 0);
    d = cg_pdf(&len);
    add_other(in, &n, "truncated.pdf", d, len * 6 / 10, EXP_REJECTED, "corrupt", 0, 0);
    add_other(in, &n, "link.jpg", NULL, 0, EXP_REJECTED, "symlink", 1, 0);
    /* Hostile names: all valid JPEGs with distinct content. */
    static const struct { const char *name, *display; } hostile[] = {
        {"quote'\"name.jpg", "quote'\"name.jpg"},
        {"new\nline.jpg", "new\\nline.jpg"},
        {"\xff\xfe-latin1-\xe9.jpg", "\\xff\\xfe-latin1-\\xe9.jpg"},
        {"'); DROP TABLE folio.documents; --.jpg", "'); DROP TABLE folio.documents; --.jpg"},
        {"$(touch pwned) `id`.jpg", "$(touch pwned) `id`.jpg"},
        {" back\\slash tab\t.jpg", " back\\\\slash tab\\t.jpg"},
        {"ünïcødé 文字.jpg", "ünïcødé 文字.jpg"},
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        d = jpeg_seed((uint32_t)(100 + i), &len);
        add_done(in, &n, hostile[i].name, d, len, "image/jpeg", 1, hostile[i].display);
    }
    /* The same bytes under two names: one document, two sources. */
    d = jpeg_seed(200, &len);
    add_done(in, &n, "dupA.jpg", d, len, "image/jpeg", 1, NULL);
    add_done(in, &n, "dupB.jpg", cg_dup(d, len), len, "image/jpeg", 1, NULL);
    /* Left alone. */
    add_other(in, &n, "x.jpg", NULL, 0, EXP_LEFT, NULL, 0, 1);
    d = jpeg_seed(300, &len);
    add_other(in, &n, ".hidden.jpg", d, len, EXP_LEFT, NULL, 0, 0);
    d = jpeg_seed(301, &len);
    add_other(in, &n, "upload.jpg.part", d, len, EXP_LEFT, NULL, 0, 0);
    d = jpeg_seed(302, &len);
    add_other(in, &n, "scan.TMP", d, len, EXP_LEFT, NULL, 0, 0);
    d = jpeg_seed(303, &len);
    add_other(in, &n, "~$lock.jpg", d, len, EXP_LEFT, NULL, 0, 0);
    return n;
}

static void check_input(PGconn *c, const struct input *in)
{
    char orig[PATH_MAX], where[PATH_MAX];
    snprintf(orig, sizeof orig, "%s/%s", g_dir, in->name);
    char shown[600];
    folio_lq_bytes(shown, sizeof shown, in->name, strlen(in->name));
    PGresult *src = q_path(c,
                           "SELECT d.media_type, d.pages, s.name_display, s.path_display, s.disposition"
                           " FROM folio.document_sources s JOIN folio.documents d ON d.id = s.document_id"
                           " WHERE s.path = $1",
                           orig);
    PGresult *rej = q_path(c, "SELECT reason, detail->>'code' FROM folio.rejections WHERE path = $1", orig);
    int nsrc = PQresultStatus(src) == PGRES_TUPLES_OK ? PQntuples(src) : -1;
    int nrej = PQresultStatus(rej) == PGRES_TUPLES_OK ? PQntuples(rej) : -1;
    switch (in->expect) {
    case EXP_DONE: {
        CHECK(!exists(orig), "%s: still in the ingest folder", shown);
        CHECK(find_done(g_dir, in->name, where, sizeof where), "%s: not in .folio/done/DATE/", shown);
        size_t n = 0;
        uint8_t *got = read_bytes(where, &n);
        CHECK(got && n == in->len && memcmp(got, in->data, n) == 0, "%s: done copy differs", shown);
        free(got);
        CHECK(nsrc == 1 && nrej == 0, "%s: %d source rows, %d rejection rows", shown, nsrc, nrej);
        if (nsrc == 1) {
            CHECK(strcmp(PQgetvalue(src, 0, 0), in->media) == 0, "%s: media %s, want %s", shown,
                  PQgetvalue(src, 0, 0), in->media);
            CHECK(atoi(PQgetvalue(src, 0, 1)) == in->pages, "%s: %s pages", shown, PQgetvalue(src, 0, 1));
            const char *want = in->display ? in->display : in->name;
            CHECK(strcmp(PQgetvalue(src, 0, 2), want) == 0, "%s: name_display '%s', want '%s'", shown,
                  PQgetvalue(src, 0, 2), want);
            CHECK(strcmp(PQgetvalue(src, 0, 4), "moved") == 0, "%s: disposition %s", shown, PQgetvalue(src, 0, 4));
        }
        break;
    }
    case EXP_REJECTED: {
        CHECK(!exists(orig), "%s: still in the ingest folder", shown);
        snprintf(where, sizeof where, "%s/.folio/rejected/%s", g_dir, in->name);
        CHECK(exists(where), "%s: not in .folio/rejected/", shown);
        char rp[PATH_MAX + 16];
        snprintf(rp, sizeof rp, "%s.reason.json", where);
        size_t n = 0;
        char *json = (char *)read_bytes(rp, &n);
        char want[96];
        snprintf(want, sizeof want, "\"code\": \"%s\"", in->reason);
        CHECK(json && strstr(json, want), "%s: reason file lacks %s: %s", shown, want, json ? json : "(none)");
        free(json);
        if (in->symlink) {
            struct stat st;
            CHECK(lstat(where, &st) == 0 && S_ISLNK(st.st_mode), "%s: the link itself was moved", shown);
        }
        CHECK(nrej == 1 && nsrc == 0, "%s: %d rejection rows, %d source rows", shown, nrej, nsrc);
        if (nrej == 1)
            CHECK(strcmp(PQgetvalue(rej, 0, 0), in->reason) == 0 && strcmp(PQgetvalue(rej, 0, 1), in->reason) == 0,
                  "%s: reason %s/%s, want %s", shown, PQgetvalue(rej, 0, 0), PQgetvalue(rej, 0, 1), in->reason);
        break;
    }
    case EXP_LEFT:
        CHECK(exists(orig), "%s: was moved but should be left alone", shown);
        CHECK(nsrc == 0 && nrej == 0, "%s: %d source and %d rejection rows for an ignored file", shown, nsrc, nrej);
        break;
    }
    PQclear(src);
    PQclear(rej);
}

static void check_limits_detail(PGconn *c)
{
    char orig[PATH_MAX];
    snprintf(orig, sizeof orig, "%s/bomb.jpg", g_dir);
    PGresult *r = q_path(c, "SELECT detail->>'limit', detail->>'limit_value', detail->>'actual_value', message"
                            " FROM folio.rejections WHERE path = $1", orig);
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1, "bomb.jpg rejection row");
    if (PQntuples(r) == 1) {
        CHECK(strcmp(PQgetvalue(r, 0, 0), "max_pixels") == 0 && strcmp(PQgetvalue(r, 0, 1), "300000000") == 0 &&
                  strcmp(PQgetvalue(r, 0, 2), "4225000000") == 0,
              "bomb detail %s %s %s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
        CHECK(strstr(PQgetvalue(r, 0, 3), "65000x65000") != NULL, "message: %s", PQgetvalue(r, 0, 3));
    }
    PQclear(r);
}

struct totals {
    long long docs, jobs, sources, rejections, blobs;
};

static struct totals totals(PGconn *c)
{
    struct totals t;
    t.docs = q_count(c, "SELECT count(*) FROM folio.documents");
    t.jobs = q_count(c, "SELECT count(*) FROM folio.jobs");
    t.sources = q_count(c, "SELECT count(*) FROM folio.document_sources");
    t.rejections = q_count(c, "SELECT count(*) FROM folio.rejections");
    t.blobs = q_count(c, "SELECT count(*) FROM folio.blobs");
    return t;
}

static void test_after_modes(void)
{
    char dir[PATH_MAX], log[PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s", tu_scratch("ingest_after"));
    snprintf(log, sizeof log, "%s.log", dir);
    size_t len;
    uint8_t *a = jpeg_seed(500, &len);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/keep.jpg", dir);
    write_bytes(p, a, len);
    CHECK(run_ingest("--after keep", dir, log) == 0, "keep run");
    CHECK(exists(p), "--after keep leaves the file");
    PGconn *c = db();
    if (!c)
        return;
    PGresult *r = q_path(c, "SELECT disposition FROM folio.document_sources WHERE path = $1", p);
    CHECK(PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "kept") == 0, "kept source row");
    PQclear(r);
    /* A second run sees the kept file again and records nothing new. */
    struct totals before = totals(c);
    CHECK(run_ingest("--after keep", dir, log) == 0, "keep rerun");
    struct totals after = totals(c);
    CHECK(after.sources == before.sources && after.docs == before.docs, "kept file re-run adds nothing (%lld -> %lld sources)",
          before.sources, after.sources);
    /* Delete mode. */
    unlink(p);
    uint8_t *b = jpeg_seed(501, &len);
    snprintf(p, sizeof p, "%s/delete.jpg", dir);
    write_bytes(p, b, len);
    CHECK(run_ingest("--after delete --model-key other-model", dir, log) == 0, "delete run");
    CHECK(!exists(p), "--after delete removes the file");
    r = q_path(c, "SELECT s.disposition, j.model_key FROM folio.document_sources s"
                  " JOIN folio.jobs j ON j.document_id = s.document_id WHERE s.path = $1", p);
    CHECK(PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "deleted") == 0 &&
              strcmp(PQgetvalue(r, 0, 1), "other-model") == 0,
          "deleted source row with its job for --model-key");
    PQclear(r);
    /* --max-bytes: refused from its size, reason has the numbers. */
    snprintf(p, sizeof p, "%s/big.jpg", dir);
    write_bytes(p, b, len);
    CHECK(run_ingest("--max-bytes 1000", dir, log) == 0, "max-bytes run");
    r = q_path(c, "SELECT reason, detail->>'limit_value', detail->>'actual_value', sha256 IS NULL"
                  " FROM folio.rejections WHERE path = $1", p);
    char want_actual[32];
    snprintf(want_actual, sizeof want_actual, "%zu", len);
    CHECK(PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "too_large") == 0 &&
              strcmp(PQgetvalue(r, 0, 1), "1000") == 0 && strcmp(PQgetvalue(r, 0, 2), want_actual) == 0 &&
              strcmp(PQgetvalue(r, 0, 3), "t") == 0,
          "too_large row (never read, so no sha256)");
    PQclear(r);
    PQfinish(c);
    free(a);
    free(b);
}

/* One file the database refuses (a constraint added for the test) must
 * not fail its batch: the others are committed, it is rejected. */
static void test_bad_file_in_batch(void)
{
    char dir[PATH_MAX], log[PATH_MAX + 8], p[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", tu_scratch("ingest_badbatch"));
    snprintf(log, sizeof log, "%s.log", dir);
    static const char *names[] = {"a.jpg", "b.jpg", "evil.jpg", "d.jpg", "e.jpg"};
    for (int i = 0; i < 5; i++) {
        size_t len = 0;
        uint8_t *d = jpeg_seed((uint32_t)(700 + i), &len);
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        write_bytes(p, d, len);
        free(d);
    }
    PGconn *c = db();
    if (!c)
        return;
    PGresult *r = PQexec(c, "ALTER TABLE folio.document_sources ADD CONSTRAINT test_no_evil"
                            " CHECK (name_display <> 'evil.jpg')");
    CHECK(PQresultStatus(r) == PGRES_COMMAND_OK, "add constraint: %s", PQerrorMessage(c));
    PQclear(r);
    long long batches_before = q_count(c, "SELECT count(*) FROM folio.document_sources");
    int rc = run_ingest("", dir, log);
    CHECK(rc == 0, "run with a refused file exits 0");
    for (int i = 0; i < 5; i++) {
        char where[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        CHECK(!exists(p), "%s left the folder", names[i]);
        if (i == 2) {
            snprintf(where, sizeof where, "%s/.folio/rejected/evil.jpg", dir);
            CHECK(exists(where), "evil.jpg rejected");
            PGresult *q = q_path(c, "SELECT reason, detail->>'detail' FROM folio.rejections WHERE path = $1", p);
            CHECK(PQntuples(q) == 1 && strcmp(PQgetvalue(q, 0, 0), "enqueue_failed") == 0 &&
                      strstr(PQgetvalue(q, 0, 1), "test_no_evil") != NULL,
                  "evil.jpg: enqueue_failed naming the constraint");
            PQclear(q);
        } else {
            CHECK(find_done(dir, names[i], where, sizeof where), "%s committed despite its batch mate", names[i]);
        }
    }
    CHECK(q_count(c, "SELECT count(*) FROM folio.document_sources") == batches_before + 4, "four new sources");
    /* The refused file's document must not linger without a source. */
    CHECK(q_count(c, "SELECT count(*) FROM folio.documents d WHERE NOT EXISTS"
                     " (SELECT 1 FROM folio.document_sources s WHERE s.document_id = d.id)") == 0,
          "no document without a source");
    PQclear(PQexec(c, "ALTER TABLE folio.document_sources DROP CONSTRAINT test_no_evil"));
    PQfinish(c);
}

int main(void)
{
    if (tu_pg_fresh_db("folio_t_ingest_corpus", g_db, sizeof g_db) != 0)
        return 1;
    int mig = tu_sh("%s migrate --db '%s' >/dev/null 2>&1", tu_folio_bin(), g_db);
    REQUIRE(mig == 0, "migrate exit %d", mig);
    snprintf(g_dir, sizeof g_dir, "%s", tu_scratch("ingest_corpus"));
    char outside[PATH_MAX + 16], log[PATH_MAX + 16];
    snprintf(outside, sizeof outside, "%s.outside.jpg", g_dir);
    snprintf(log, sizeof log, "%s.log", g_dir);

    static struct input in[64];
    size_t n = build_corpus(in);
    size_t len;
    uint8_t *target = jpeg_seed(400, &len);
    write_bytes(outside, target, len);
    for (size_t i = 0; i < n; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", g_dir, in[i].name);
        if (in[i].symlink)
            CHECK(symlink(outside, p) == 0, "symlink: %s", strerror(errno));
        else if (in[i].dir)
            CHECK(mkdir(p, 0755) == 0, "mkdir x.jpg");
        else {
            CHECK(in[i].data != NULL, "generator for %zu", i);
            write_bytes(p, in[i].data, in[i].len);
        }
        struct stat st;
        if (lstat(p, &st) == 0)
            in[i].mtime = st.st_mtim;
    }
    char sub[PATH_MAX];
    snprintf(sub, sizeof sub, "%s/sub", g_dir);
    mkdir(sub, 0755);
    uint8_t *inner = jpeg_seed(600, &len);
    size_t inner_len = len;
    snprintf(sub, sizeof sub, "%s/sub/inner.jpg", g_dir);
    write_bytes(sub, inner, inner_len);

    int rc = run_ingest("", g_dir, log);
    char out[4096] = "";
    tu_sh_out(out, sizeof out, "tail -3 '%s'", log);
    CHECK(rc == 0, "folio ingest exit %d: %s", rc, out);
    CHECK(strstr(out, "rejected=") != NULL, "summary line printed: %s", out);

    PGconn *c = db();
    REQUIRE(c, "db");
    size_t n_done = 0, n_rej = 0;
    for (size_t i = 0; i < n; i++) {
        check_input(c, &in[i]);
        n_done += in[i].expect == EXP_DONE;
        n_rej += in[i].expect == EXP_REJECTED;
    }
    check_limits_detail(c);
    CHECK(exists(sub), "sub/inner.jpg left alone without --recursive");
    CHECK(exists(outside), "the symlink's target outside the folder is untouched");
    struct totals t = totals(c);
    /* dupA and dupB are one document. */
    CHECK(t.docs == (long long)n_done - 1 && t.blobs == t.docs && t.jobs == t.docs,
          "documents %lld blobs %lld jobs %lld, want %zu each", t.docs, t.blobs, t.jobs, n_done - 1);
    CHECK(t.sources == (long long)n_done, "sources %lld, want %zu", t.sources, n_done);
    CHECK(t.rejections == (long long)n_rej, "rejections %lld, want %zu", t.rejections, n_rej);
    /* a PDF cut short says so (issue 34), not only "no pages" */
    CHECK(q_count(c, "SELECT count(*) FROM folio.rejections WHERE name_display = 'truncated.pdf'"
                     " AND message LIKE 'PDF is truncated or damaged%%EOF'") == 1,
          "truncated.pdf: %s", tu_pg_q1(c, "SELECT message FROM folio.rejections WHERE name_display = 'truncated.pdf'"));
    CHECK(q_count(c, "SELECT count(DISTINCT document_id) FROM folio.document_sources"
                     " WHERE name_display IN ('dupA.jpg', 'dupB.jpg')") == 1,
          "dupA and dupB share a document");
    CHECK(q_count(c, "SELECT count(*) FROM folio.document_sources WHERE duplicate") == 1,
          "exactly one source is marked duplicate");
    CHECK(q_count(c, "SELECT count(*) FROM folio.documents WHERE exif_orientation = 6") == 1,
          "EXIF orientation recorded");
    CHECK(q_count(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued' AND model_key = 'default'") == t.docs,
          "one queued job per document");
    CHECK(!exists("pwned"), "a file name never reached a shell");

    /* Re-run: nothing left to do, nothing recorded. */
    rc = run_ingest("", g_dir, log);
    struct totals t2 = totals(c);
    CHECK(rc == 0 && t2.docs == t.docs && t2.sources == t.sources && t2.rejections == t.rejections,
          "re-run changed the database (%lld/%lld/%lld -> %lld/%lld/%lld)", t.docs, t.sources, t.rejections,
          t2.docs, t2.sources, t2.rejections);

    /* The crash window: a committed file put back with its original mtime
     * (as if the move had not happened). The re-run recognises the
     * sighting, records nothing and moves it, never overwriting. */
    char orig[PATH_MAX], moved[PATH_MAX];
    snprintf(orig, sizeof orig, "%s/baseline.jpg", g_dir);
    write_bytes(orig, in[0].data, in[0].len);
    struct timespec ts[2] = {in[0].mtime, in[0].mtime};
    utimensat(AT_FDCWD, orig, ts, 0);
    /* ... and the same content under a new name: a new sighting. */
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s/baseline-copy.jpg", g_dir);
    write_bytes(copy, in[0].data, in[0].len);
    /* ... and a second empty.jpg: rejected again, beside the first. */
    char empty2[PATH_MAX];
    snprintf(empty2, sizeof empty2, "%s/empty.jpg", g_dir);
    write_bytes(empty2, (const uint8_t *)"", 0);
    rc = run_ingest("", g_dir, log);
    struct totals t3 = totals(c);
    snprintf(empty2, sizeof empty2, "%s/.folio/rejected/empty.1.jpg.reason.json", g_dir);
    CHECK(exists(empty2), "second empty.jpg rejected as empty.1.jpg with its reason file");
    snprintf(empty2, sizeof empty2, "%s/.folio/rejected/empty.jpg.reason.json", g_dir);
    CHECK(exists(empty2), "first reason file kept");
    CHECK(t3.rejections == t.rejections + 1, "one new rejection row (%lld -> %lld)", t.rejections, t3.rejections);
    CHECK(rc == 0 && !exists(orig) && !exists(copy), "put-back and copy were taken");
    CHECK(find_done(g_dir, "baseline.1.jpg", moved, sizeof moved), "name collision got a new name");
    CHECK(find_done(g_dir, "baseline.jpg", moved, sizeof moved), "the first baseline.jpg is still there");
    CHECK(t3.docs == t.docs && t3.jobs == t.jobs, "no new document or job for known content");
    CHECK(t3.sources == t.sources + 1, "only the copy is a new source (%lld -> %lld)", t.sources, t3.sources);
    CHECK(q_count(c, "SELECT count(*) FROM folio.document_sources WHERE name_display = 'baseline-copy.jpg'"
                     " AND duplicate") == 1,
          "the copy is recorded as a duplicate");

    /* --recursive picks up sub/inner.jpg into done/DATE/sub/. */
    rc = run_ingest("--recursive", g_dir, log);
    CHECK(rc == 0 && !exists(sub) && find_done(g_dir, "sub/inner.jpg", moved, sizeof moved),
          "recursive run moved sub/inner.jpg to done/DATE/sub/");
    snprintf(orig, sizeof orig, "%s/x.jpg", g_dir);
    CHECK(exists(orig), "directory x.jpg still there");
    PQfinish(c);

    test_after_modes();
    test_bad_file_in_batch();
    for (size_t i = 0; i < n; i++)
        free(in[i].data);
    free(target);
    free(inner);
    return tu_finish();
}
