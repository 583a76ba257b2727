/*
 * folio ingest --watch as a real process: a slowly written file is taken
 * only once complete (even though the writer closes it between chunks), a
 * file moved in and a file in a new subdirectory are seen through inotify,
 * a rescan-only run (--no-inotify, as on NFS) picks up a file that appears
 * while it runs, a database that is not there yet leaves files in place
 * while ingest keeps running and says so, and SIGTERM ends it cleanly.
 */
#include "common/common.h"
#include "tests/support/corpus_gen.h"
#include "tests/support/testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_db[512];

static pid_t spawn(const char *log, char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static int log_has(const char *log, const char *needle)
{
    size_t n = 0;
    uint8_t *d = NULL;
    struct folio_err e;
    if (folio_read_file(log, 1 << 24, &d, &n, &e) != 0)
        return 0;
    char *s = realloc(d, n + 1);
    if (!s) {
        free(d);
        return 0;
    }
    s[n] = '\0';
    int found = strstr(s, needle) != NULL;
    free(s);
    return found;
}

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static long long sources_for(const char *conninfo, const char *path, const uint8_t *sha)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        PQfinish(c);
        return -1;
    }
    const char *v[2] = {path, (const char *)sha};
    int len[2] = {(int)strlen(path), 32}, fmt[2] = {1, 1};
    Oid types[2] = {17, 17};
    PGresult *r = PQexecParams(c,
                               "SELECT count(*) FROM folio.document_sources s JOIN folio.documents d"
                               " ON d.id = s.document_id WHERE s.path = $1 AND d.sha256 = $2",
                               2, types, v, len, fmt, 0);
    long long n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoll(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    PQfinish(c);
    return n;
}

static long long count(const char *conninfo, const char *sql)
{
    PGconn *c = PQconnectdb(conninfo);
    long long n = -1;
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK)
            n = atoll(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    PQfinish(c);
    return n;
}

/* Polls until the file is gone from the folder and recorded with its full
 * content, or timeout_ms passes. */
static int wait_ingested(const char *conninfo, const char *path, const uint8_t *sha, int timeout_ms)
{
    for (int t = 0; t < timeout_ms; t += 50) {
        if (!exists(path) && sources_for(conninfo, path, sha) == 1)
            return 1;
        folio_sleep_ms(50);
    }
    return 0;
}

static int wait_log(const char *log, const char *needle, int timeout_ms)
{
    for (int t = 0; t < timeout_ms; t += 50) {
        if (log_has(log, needle))
            return 1;
        folio_sleep_ms(50);
    }
    return 0;
}

static int stop(pid_t pid)
{
    kill(pid, SIGTERM);
    int status = 0;
    for (int t = 0; t < 10000; t += 50) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        folio_sleep_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

static void write_all(const char *path, const uint8_t *d, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return;
    if (write(fd, d, n) != (ssize_t)n)
        fprintf(stderr, "short write\n");
    close(fd);
}

static void test_watch(void)
{
    char dir[PATH_MAX], log[PATH_MAX + 8], path[PATH_MAX + 64], tmp[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", tu_scratch("ingest_watch"));
    snprintf(log, sizeof log, "%s.log", dir);
    char *argv[] = {(char *)tu_folio_bin(), "ingest", "--watch", "--recursive", "--stable-ms", "400",
                    "--db", g_db, dir, NULL};
    pid_t pid = spawn(log, argv);
    CHECK(wait_log(log, "event=ingest_started", 10000), "ingest --watch started");

    /* A scanner writing page by page, closing the file between chunks. */
    size_t len;
    uint8_t *j = cg_scan_jpeg(640, 480, 11, 1, 0, &len);
    uint8_t sha[32];
    folio_sha256(j, len, sha);
    snprintf(path, sizeof path, "%s/slow.jpg", dir);
    const int chunks = 6;
    for (int k = 0; k < chunks; k++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        size_t a = len * (size_t)k / chunks, b = len * (size_t)(k + 1) / chunks;
        if (fd >= 0) {
            if (write(fd, j + a, b - a) != (ssize_t)(b - a))
                fprintf(stderr, "short write\n");
            close(fd);
        }
        folio_sleep_ms(150);
        if (k == chunks - 2) {
            char rej[PATH_MAX + 64];
            snprintf(rej, sizeof rej, "%s/.folio/rejected/slow.jpg", dir);
            CHECK(exists(path) && !exists(rej), "half-written file was left alone");
            CHECK(count(g_db, "SELECT count(*) FROM folio.rejections") == 0 &&
                      count(g_db, "SELECT count(*) FROM folio.documents") == 0,
                  "nothing recorded while the file was being written");
        }
    }
    CHECK(wait_ingested(g_db, path, sha, 10000), "slow.jpg ingested whole once complete");

    /* Moved in from elsewhere (IN_MOVED_TO). */
    uint8_t *m = cg_scan_jpeg(320, 240, 12, 1, 0, &len);
    folio_sha256(m, len, sha);
    snprintf(tmp, sizeof tmp, "%s.moving.jpg", dir);
    write_all(tmp, m, len);
    snprintf(path, sizeof path, "%s/moved.jpg", dir);
    CHECK(rename(tmp, path) == 0, "rename into the folder");
    CHECK(wait_ingested(g_db, path, sha, 10000), "moved-in file ingested");

    /* A new subdirectory and a file in it, right away. */
    uint8_t *s = cg_scan_jpeg(320, 240, 13, 1, 0, &len);
    folio_sha256(s, len, sha);
    snprintf(path, sizeof path, "%s/newdir", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/newdir/inner.jpg", dir);
    write_all(path, s, len);
    CHECK(wait_ingested(g_db, path, sha, 10000), "file in a new subdirectory ingested");
    snprintf(path, sizeof path, "%s/.folio/done", dir);
    CHECK(tu_sh("test -f \"$(ls -d '%s'/*/ | head -1)newdir/inner.jpg\"", path) == 0,
          "kept its subdirectory under done/DATE/");

    /* A second ingester on the same folder is refused. */
    char out[8192];
    int rc2 = tu_sh_out(out, sizeof out, "%s ingest --db '%s' '%s' 2>&1", tu_folio_bin(), g_db, dir);
    CHECK(rc2 == 1 && strstr(out, "another folio ingest") != NULL, "second ingester refused (%d): %s", rc2, out);

    int rc = stop(pid);
    CHECK(rc == 0, "SIGTERM: exit %d", rc);
    CHECK(log_has(log, "event=ingest_summary files=3"), "summary names 3 files");
    free(j);
    free(m);
    free(s);
}

static void test_rescan_only(void)
{
    char dir[PATH_MAX], log[PATH_MAX + 8], path[PATH_MAX + 64], hidden[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", tu_scratch("ingest_rescan"));
    snprintf(log, sizeof log, "%s.log", dir);
    char *argv[] = {(char *)tu_folio_bin(), "ingest", "--watch", "--no-inotify", "--rescan", "1",
                    "--stable-ms", "200", "--db", g_db, dir, NULL};
    pid_t pid = spawn(log, argv);
    CHECK(wait_log(log, "mode=watch-rescan-only", 10000), "rescan-only mode started");
    folio_sleep_ms(300);
    size_t len;
    uint8_t *j = cg_scan_jpeg(320, 240, 21, 1, 0, &len);
    uint8_t sha[32];
    folio_sha256(j, len, sha);
    /* Written under a hidden name (ignored), then renamed: what rsync does. */
    snprintf(hidden, sizeof hidden, "%s/.late.jpg.XXXX", dir);
    snprintf(path, sizeof path, "%s/late.jpg", dir);
    write_all(hidden, j, len);
    CHECK(rename(hidden, path) == 0, "rename");
    CHECK(wait_ingested(g_db, path, sha, 10000), "file appearing during a rescan-only run was taken");
    CHECK(stop(pid) == 0, "clean exit");
    free(j);
}

static void test_database_late(void)
{
    char late_db[512], dir[PATH_MAX], log[PATH_MAX + 8], path[PATH_MAX + 64];
    /* A database that does not exist yet: connections fail like a server
     * that is down, then the schema is missing, then all is well. */
    snprintf(late_db, sizeof late_db, "%s", g_db);
    char *p = strstr(late_db, "dbname=folio_t_ingest_watch");
    CHECK(p != NULL, "conninfo names the test database: %s", late_db);
    if (!p)
        return;
    memcpy(p, "dbname=folio_t_ingest_wlate", strlen("dbname=folio_t_ingest_wlate"));
    PGconn *c = PQconnectdb(tu_pg_admin());
    PQclear(PQexec(c, "DROP DATABASE IF EXISTS folio_t_ingest_wlate WITH (FORCE)"));
    PQfinish(c);
    snprintf(dir, sizeof dir, "%s", tu_scratch("ingest_dblate"));
    snprintf(log, sizeof log, "%s.log", dir);
    size_t len;
    uint8_t *j = cg_scan_jpeg(320, 240, 31, 1, 0, &len);
    uint8_t sha[32];
    folio_sha256(j, len, sha);
    snprintf(path, sizeof path, "%s/waiting.jpg", dir);
    write_all(path, j, len);
    char *argv[] = {(char *)tu_folio_bin(), "ingest", "--watch", "--stable-ms", "0", "--db", late_db, dir, NULL};
    pid_t pid = spawn(log, argv);
    CHECK(wait_log(log, "event=database_unavailable", 10000), "says the database is unavailable");
    folio_sleep_ms(700);
    CHECK(exists(path), "file stays where it is while the database is down");
    char rej[PATH_MAX + 64];
    snprintf(rej, sizeof rej, "%s/.folio", dir);
    CHECK(!exists(rej), "nothing moved or rejected");
    int status;
    CHECK(waitpid(pid, &status, WNOHANG) == 0, "ingest keeps running");
    char made[512];
    CHECK(tu_pg_fresh_db("folio_t_ingest_wlate", made, sizeof made) == 0, "create the late database");
    folio_sleep_ms(300); /* connects now, finds no schema: still waiting */
    CHECK(exists(path), "still in place without a schema");
    CHECK(tu_sh("%s migrate --db '%s' >/dev/null 2>&1", tu_folio_bin(), late_db) == 0, "migrate late db");
    CHECK(wait_ingested(late_db, path, sha, 40000), "ingested once the database is back");
    CHECK(log_has(log, "event=database_available"), "says the database is back");
    CHECK(stop(pid) == 0, "clean exit");
    free(j);
}

static void test_oneshot_gives_up(void)
{
    /* One-shot with an unreachable server: exits 1 after --db-wait, files untouched. */
    char dir[PATH_MAX], path[PATH_MAX + 64], out[16384];
    snprintf(dir, sizeof dir, "%s", tu_scratch("ingest_nodb"));
    size_t len;
    uint8_t *j = cg_scan_jpeg(160, 120, 41, 1, 0, &len);
    snprintf(path, sizeof path, "%s/a.jpg", dir);
    write_all(path, j, len);
    int rc = tu_sh_out(out, sizeof out,
                       "%s ingest --stable-ms 0 --db-wait 1 --db 'host=/nonexistent port=1 dbname=x connect_timeout=1' '%s' 2>&1",
                       tu_folio_bin(), dir);
    CHECK(rc == 1, "exit %d: %s", rc, out);
    CHECK(strstr(out, "database unavailable") != NULL, "error names the database: %s", out);
    CHECK(exists(path), "file left in place");
    free(j);
}

static void test_oneshot_unmigrated(void)
{
    /* Reachable but never migrated: a one-shot says so at once, exit 1. */
    char ci[512], dir[PATH_MAX], path[PATH_MAX + 64], out[16384];
    if (tu_pg_fresh_db("folio_t_ingest_nomig", ci, sizeof ci) != 0)
        return;
    snprintf(dir, sizeof dir, "%s", tu_scratch("ingest_nomig"));
    size_t len;
    uint8_t *j = cg_scan_jpeg(160, 120, 42, 1, 0, &len);
    snprintf(path, sizeof path, "%s/a.jpg", dir);
    write_all(path, j, len);
    double t0 = folio_mono_ms();
    int rc = tu_sh_out(out, sizeof out, "%s ingest --stable-ms 0 --db '%s' '%s' 2>&1", tu_folio_bin(), ci, dir);
    CHECK(rc == 1 && strstr(out, "folio migrate") != NULL, "unmigrated database: exit %d: %s", rc, out);
    CHECK(folio_mono_ms() - t0 < 20000, "without waiting out --db-wait");
    CHECK(exists(path), "file left in place");
    free(j);
}

int main(void)
{
    if (tu_pg_fresh_db("folio_t_ingest_watch", g_db, sizeof g_db) != 0)
        return 1;
    int mig = tu_sh("%s migrate --db '%s' >/dev/null 2>&1", tu_folio_bin(), g_db);
    REQUIRE(mig == 0, "migrate exit %d", mig);
    test_watch();
    test_rescan_only();
    test_database_late();
    test_oneshot_gives_up();
    test_oneshot_unmigrated();
    return tu_finish();
}
