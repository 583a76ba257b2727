/* Helpers shared by the worker process tests (test_worker.c, test_chaos.c):
 * rendering a page, planting documents with their bytes, starting and
 * stopping real `folio worker` processes. Header-only (static functions)
 * because the test CMake links one source per test. */
#ifndef FOLIO_WORKER_TESTLIB_H
#define FOLIO_WORKER_TESTLIB_H

#include "common/common.h"
#include "pipeline/db/migrate.h"
#include "tests/support/testutil.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* REQUIRE evaluates its condition twice; calls with side effects go
 * through this, which evaluates once. */
#define REQUIRE_OK(cond, ...)                                                                \
    do {                                                                                     \
        int rq_ = (cond);                                                                    \
        REQUIRE(rq_, __VA_ARGS__);                                                           \
    } while (0)

/* A fresh database `name` on the fixture cluster with the folio schema
 * migrated; its conninfo goes to db. Returns a connection to it, or NULL
 * (the reason printed). */
static inline PGconn *wt_fresh_schema(const char *name, char *db, size_t n)
{
    if (tu_pg_fresh_db(name, db, n) != 0)
        return NULL;
    PGconn *c = PQconnectdb(db);
    struct folio_err err = {0};
    int applied = 0;
    struct migrate_opts mo = {0};
    if (PQstatus(c) != CONNECTION_OK || migrate_run(c, &mo, &applied, &err) != 0) {
        fprintf(stderr, "%s: %s%s\n", name, PQerrorMessage(c), err.msg);
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* Runs one statement; 0 when it succeeded (the error printed otherwise). */
static inline int wt_sql_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok ? 0 : -1;
}

/* Renders text to a TIFF page and reads it back into memory. */
static inline int wt_render(const char *dir, const char *name, const char *text, int w, int h, uint8_t **data,
                     size_t *len)
{
    char txt[1100], out[1100];
    snprintf(txt, sizeof txt, "%s/%s.txt", dir, name);
    snprintf(out, sizeof out, "%s/%s.tif", dir, name);
    FILE *f = fopen(txt, "w");
    if (!f)
        return -1;
    fputs(text, f);
    fclose(f);
    if (tu_sh("bash %s/tests/support/render_page.sh %s %s 14 %d %d", getenv("FOLIO_SOURCE_DIR"), txt, out, w, h))
        return -1;
    struct folio_err err = {0};
    return folio_read_file(out, 64u << 20, data, len, &err);
}

/* Plants a document: bytes, their real sha256 (folio_sha256, what ingest
 * records; the worker checks the bytes against it on every read) and one
 * queued job. Many documents share one rendered page, so the bytes are
 * `data` followed by a short trailer naming `tag` (NULL: data as it is),
 * which TIFF and PDF readers ignore (both find their parts by offset).
 * A document whose hash happens to begin with WT_POISON gets one more
 * trailer byte, so only wt_add_poison's documents match the poison fault.
 * sha_out (NULL = not wanted) receives the hex. Returns the job id or -1. */
#define WT_POISON "dead" /* crash_on_document:dead picks wt_add_poison's documents */
static inline long long wt_plant(PGconn *c, const uint8_t *bytes, size_t len, int max_attempts, char sha_out[65])
{
    uint8_t h[FOLIO_SHA256_LEN];
    char hex[65], ma[16];
    if (folio_sha256(bytes, len, h) != 0)
        return -1;
    folio_hex(h, FOLIO_SHA256_LEN, hex);
    if (sha_out)
        memcpy(sha_out, hex, 65);
    snprintf(ma, sizeof ma, "%d", max_attempts);
    const char *vals[] = {hex, (const char *)bytes, ma};
    int lens[] = {0, (int)len, 0};
    int fmts[] = {0, 1, 0};
    PGresult *r = PQexecParams(c,
                               "WITH d AS (INSERT INTO folio.documents (sha256, media_type, bytes, pages)"
                               "  VALUES (decode($1, 'hex'), 'image/tiff', length($2::bytea), 1) RETURNING id, sha256),"
                               " b AS (INSERT INTO folio.blobs (sha256, data) SELECT sha256, $2::bytea FROM d)"
                               " INSERT INTO folio.jobs (document_id, max_attempts) SELECT id, $3::int FROM d RETURNING id",
                               3, NULL, vals, lens, fmts, 0);
    long long id = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    else
        fprintf(stderr, "add doc: %s", PQerrorMessage(c));
    PQclear(r);
    return id;
}

static inline long long wt_add_doc(PGconn *c, const char *tag, const uint8_t *data, size_t len, int max_attempts,
                                   char sha_out[65])
{
    size_t tl = tag ? strlen(tag) + 16 : 0;
    uint8_t *b = malloc(len + tl + 2 + 16);
    if (!b)
        return -1;
    memcpy(b, data, len);
    size_t n = len;
    if (tag)
        n += (size_t)snprintf((char *)b + len, tl + 2, "\nfolio-test:%s\n", tag);
    uint8_t h[FOLIO_SHA256_LEN];
    char hex[65];
    for (int more = 0;; more++) {
        if (more == 16 || folio_sha256(b, n, h) != 0) {
            free(b);
            return -1;
        }
        folio_hex(h, FOLIO_SHA256_LEN, hex);
        if (strncmp(hex, WT_POISON, strlen(WT_POISON)) != 0)
            break;
        b[n++] = '\n';
    }
    long long id = wt_plant(c, b, n, max_attempts, sha_out);
    free(b);
    return id;
}

/* A poison document: the worker's crash_on_document:WT_POISON fault
 * kills it on every attempt before the bytes are decoded, so they are a
 * short text whose real sha256 begins with WT_POISON (a counter tried
 * until it does: 16 bits, ~65,000 hashes of 40 bytes). */
static inline long long wt_add_poison(PGconn *c, const char *tag, int max_attempts, char sha_out[65])
{
    char b[128], hex[65];
    uint8_t h[FOLIO_SHA256_LEN];
    for (unsigned long i = 0; i < (1ul << 24); i++) {
        int n = snprintf(b, sizeof b, "folio-test poison %s %lu", tag, i);
        if (folio_sha256(b, (size_t)n, h) != 0)
            return -1;
        folio_hex(h, FOLIO_SHA256_LEN, hex);
        if (strncmp(hex, WT_POISON, strlen(WT_POISON)) == 0)
            return wt_plant(c, (const uint8_t *)b, (size_t)n, max_attempts, sha_out);
    }
    return -1;
}

static inline long long wt_q1(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
        v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    else if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return v;
}

/* Runs statements that return nothing or ignored rows; 1 when they ran. */
static inline int wt_exec(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "sql failed: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* Waits until `sql` returns `want` (polling), up to timeout_ms. */
static inline int wt_wait_for(PGconn *c, const char *sql, long long want, int timeout_ms)
{
    for (int t = 0; t < timeout_ms; t += 100) {
        if (wt_q1(c, sql) == want)
            return 0;
        folio_sleep_ms(100);
    }
    return -1;
}

/* Starts `folio SUBCMD --db conninfo ARGS...` with FOLIO_FAULT=fault (NULL:
 * unset), output appended to logpath. Returns the pid. */
static inline pid_t wt_spawn(const char *subcmd, const char *conninfo, const char *fault, const char *logpath,
                             const char *const *args)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    if (fault)
        setenv("FOLIO_FAULT", fault, 1);
    else
        unsetenv("FOLIO_FAULT");
    const char *argv[40];
    int n = 0;
    argv[n++] = "folio";
    argv[n++] = subcmd;
    argv[n++] = "--db";
    argv[n++] = conninfo;
    for (int i = 0; args && args[i] && n < 38; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    execv(tu_folio_bin(), (char *const *)argv);
    _exit(127);
}

static inline pid_t wt_spawn_worker(const char *conninfo, const char *fault, const char *logpath,
                                    const char *const *args)
{
    return wt_spawn("worker", conninfo, fault, logpath, args);
}

/* Waits for pid up to timeout_ms; returns its exit status, 128+signal, or
 * -1 on timeout. */
static inline int wt_wait_exit(pid_t pid, int timeout_ms)
{
    for (int t = 0; t <= timeout_ms; t += 20) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        folio_sleep_ms(20);
    }
    return -1;
}

/* Runs a worker (args as wt_spawn_worker) until `sql` returns `want`, then
 * stops it. */
static inline void wt_run_worker_until(PGconn *c, const char *ci, const char *log, const char *const *args,
                                       const char *sql, long long want)
{
    pid_t w = wt_spawn_worker(ci, NULL, log, args);
    CHECK(wt_wait_for(c, sql, want, 180000) == 0, "worker did not get to %s = %lld (log %s)", sql, want, log);
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 30000) == 0, "worker exit");
}

#endif
