/*
 * kill -9 and re-run: nothing lost, nothing doubled.
 *
 * 300 distinct scans. Run 1 is killed by the fault hook right after its
 * second batch commits and before any of that batch is moved (the worst
 * moment). Run 2 is killed with SIGKILL from outside while batches are in
 * flight. Run 3 completes. Then every input's bytes are in done/ exactly
 * once, and the database has exactly one document, blob, job and source
 * per input: the committed-but-unmoved files were recognised, not doubled.
 */
#include "common/common.h"
#include "tests/support/corpus_gen.h"
#include "tests/support/testutil.h"

#include <dirent.h>
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

#define N_FILES 300

static char g_db[512];

static long long count(const char *sql)
{
    PGconn *c = PQconnectdb(g_db);
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

/* Counts regular files under dir (recursively) whose sha256 is in shas,
 * tallying hits per input; returns the number of regular files seen. */
static int walk(const char *dir, uint8_t (*shas)[32], int *hits, int *unknown)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int files = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            files += walk(p, shas, hits, unknown);
            continue;
        }
        files++;
        uint8_t *data = NULL;
        size_t n = 0;
        struct folio_err e;
        uint8_t sha[32];
        if (folio_read_file(p, 1 << 26, &data, &n, &e) != 0 || folio_sha256(data, n, sha) != 0) {
            free(data);
            continue;
        }
        free(data);
        int found = 0;
        for (int i = 0; i < N_FILES && !found; i++)
            if (memcmp(sha, shas[i], 32) == 0) {
                hits[i]++;
                found = 1;
            }
        if (!found)
            (*unknown)++;
    }
    closedir(d);
    return files;
}

int main(void)
{
    if (tu_pg_fresh_db("folio_t_ingest_crash", g_db, sizeof g_db) != 0)
        return 1;
    int mig = tu_sh("%s migrate --db '%s' >/dev/null 2>&1", tu_folio_bin(), g_db);
    REQUIRE(mig == 0, "migrate exit %d", mig);
    char dir[PATH_MAX], log[PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s", tu_scratch("ingest_crash"));
    snprintf(log, sizeof log, "%s.log", dir);

    static uint8_t shas[N_FILES][32];
    for (int i = 0; i < N_FILES; i++) {
        size_t len;
        uint8_t *j = cg_scan_jpeg(96, 64, (uint32_t)(1000 + i), 1, 0, &len);
        REQUIRE(j, "jpeg");
        folio_sha256(j, len, shas[i]);
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/scan-%03d.jpg", dir, i);
        FILE *f = fopen(p, "wb");
        REQUIRE(f, "create %s", p);
        size_t wrote = fwrite(j, 1, len, f); /* REQUIRE evaluates its condition twice */
        fclose(f);
        REQUIRE(wrote == len, "write %s", p);
        free(j);
    }

    /* Run 1: dies right after committing its second batch. */
    int rc = tu_sh("FOLIO_FAULT=ingest_crash_after_commit:2 %s ingest --db '%s' --stable-ms 0 --jobs 2 '%s' >'%s' 2>&1",
                   tu_folio_bin(), g_db, dir, log);
    long long docs1 = count("SELECT count(*) FROM folio.documents");
    CHECK(rc != 0, "run 1 was killed (status %d)", rc);
    CHECK(docs1 >= 2 && docs1 <= 128, "run 1 committed two batches: %lld documents", docs1);
    int hits[N_FILES] = {0}, unknown = 0;
    int in_dir = walk(dir, shas, hits, &unknown);
    CHECK(in_dir == N_FILES && unknown == 0, "after the crash all %d files exist once (%d, %d unknown)", N_FILES,
          in_dir, unknown);

    /* Run 2: SIGKILL from outside while it works. */
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_APPEND);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(tu_folio_bin(), tu_folio_bin(), "ingest", "--db", g_db, "--stable-ms", "0", "--jobs", "2", dir,
              (char *)NULL);
        _exit(127);
    }
    for (int t = 0; t < 20000; t += 5) {
        if (count("SELECT count(*) FROM folio.documents") >= docs1 + 40)
            break;
        folio_sleep_ms(5);
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    long long docs2 = count("SELECT count(*) FROM folio.documents");
    fprintf(stderr, "run 1 committed %lld documents, run 2 (killed) reached %lld\n", docs1, docs2);

    /* Run 3: to the end. */
    rc = tu_sh("%s ingest --db '%s' --stable-ms 0 '%s' >>'%s' 2>&1", tu_folio_bin(), g_db, dir, log);
    CHECK(rc == 0, "run 3 exit %d", rc);

    memset(hits, 0, sizeof hits);
    unknown = 0;
    char done[PATH_MAX + 16];
    snprintf(done, sizeof done, "%s/.folio/done", dir);
    int n_done = walk(done, shas, hits, &unknown);
    int missing = 0, doubled = 0;
    for (int i = 0; i < N_FILES; i++) {
        missing += hits[i] == 0;
        doubled += hits[i] > 1;
    }
    CHECK(n_done == N_FILES && missing == 0 && doubled == 0 && unknown == 0,
          "done/ holds %d files: %d missing, %d doubled, %d unknown", n_done, missing, doubled, unknown);
    memset(hits, 0, sizeof hits);
    int left = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        left += de->d_name[0] != '.';
    if (d)
        closedir(d);
    CHECK(left == 0, "%d files left in the ingest folder", left);
    CHECK(count("SELECT count(*) FROM folio.documents") == N_FILES, "documents");
    CHECK(count("SELECT count(*) FROM folio.blobs") == N_FILES, "blobs");
    CHECK(count("SELECT count(*) FROM folio.jobs") == N_FILES, "jobs");
    CHECK(count("SELECT count(*) FROM folio.document_sources") == N_FILES, "one source per file, none doubled: %lld",
          count("SELECT count(*) FROM folio.document_sources"));
    CHECK(count("SELECT count(*) FROM folio.rejections") == 0, "no rejections");
    CHECK(count("SELECT count(*) FROM folio.documents d WHERE NOT EXISTS"
                " (SELECT 1 FROM folio.blobs b WHERE b.sha256 = d.sha256)") == 0,
          "every document has its blob");
    return tu_finish();
}
