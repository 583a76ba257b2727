/* Issue 21's hostile-inbox findings against the real `folio ingest`:
 *  1. --follow-symlinks: a link to a file outside DIR (a stand-in for
 *     /etc/shadow) is rejected as `symlink` before a byte is read: no
 *     size, sha256 or content of it lands in folio.rejections or
 *     reason.json; a link inside DIR, or inside an --allow-root folder, is
 *     a document;
 *  2. DIR/.folio planted as a symlink: ingest writes nothing at the
 *     link's target and says why; the files stay in the inbox;
 *  3. a slow writer pausing longer than --stable-ms (but less than ten
 *     stability windows) mid-file: the half-written JPEG is not recorded
 *     as corrupt; the whole file becomes a document. */
#include "pipeline/db/db.h"
#include "tests/pg/worker_testlib.h"
#include "tests/support/corpus_gen.h"

#include <sys/stat.h>

static char g_db[512];

static void put_pgm(const char *path, int shade)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fprintf(f, "P5 4 4 255\n");
    for (int i = 0; i < 16; i++)
        fputc((shade + i * 7) & 0xff, f);
    fclose(f);
}

static int ingest(const char *inbox, const char *extra, const char *log)
{
    return tu_sh("%s ingest --db '%s' --stable-ms 0 --no-progress %s '%s' >>'%s' 2>&1", tu_folio_bin(), g_db, extra,
                 inbox, log);
}

int main(void)
{
    PGconn *c = wt_fresh_schema("folio_test_ingest_hostile", g_db, sizeof g_db);
    REQUIRE(c, "fresh migrated database");
    const char *dir = tu_scratch("ingest_hostile");
    char inbox[1100], secret[1100], allowed[1100], p[1300], log[1100];
    snprintf(inbox, sizeof inbox, "%s/inbox", dir);
    snprintf(secret, sizeof secret, "%s/secret", dir);
    snprintf(allowed, sizeof allowed, "%s/allowed", dir);
    snprintf(log, sizeof log, "%s/ingest.log", dir);
    REQUIRE_OK(tu_sh("mkdir -p '%s/sub' '%s' '%s'", inbox, secret, allowed) == 0, "folders");

    /* 1. Followed links. */
    snprintf(p, sizeof p, "%s/shadow", secret);
    FILE *f = fopen(p, "w");
    REQUIRE(f, "write the secret");
    fputs("root:SECRETHASH:19000:0:99999:7:::\n", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/outside.pgm", secret);
    put_pgm(p, 10);
    snprintf(p, sizeof p, "%s/sub/real.pgm", inbox);
    put_pgm(p, 40);
    snprintf(p, sizeof p, "%s/ok.pgm", allowed);
    put_pgm(p, 90);
    REQUIRE_OK(tu_sh("cd '%s' && ln -s '%s/shadow' shadow.pgm && ln -s '%s/outside.pgm' outside.pgm &&"
                     " ln -s sub/real.pgm inside.pgm && ln -s '%s/ok.pgm' allowed.pgm",
                     inbox, secret, secret, allowed) == 0, "plant links");
    REQUIRE_OK(ingest(inbox, "--follow-symlinks --after keep", log) == 0, "ingest --follow-symlinks; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.rejections WHERE reason = 'symlink'"
                   " AND message LIKE '%outside the ingest folder%' AND sha256 IS NULL"
                   " AND coalesce(bytes, 0) < 200") == 3,
          "3 links outside DIR rejected without the target's size or hash (allowed.pgm too, no --allow-root);"
          " see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.rejections WHERE bytes = 35") == 0,
          "the size of the secret (35 bytes) is recorded");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.rejections WHERE message || coalesce(detail::text, '')"
                   " LIKE '%SECRET%' OR message LIKE '%root:%'") == 0, "secret bytes in folio.rejections");
    CHECK(tu_sh("! grep -r SECRET '%s/.folio' 2>/dev/null", inbox) == 0, "secret bytes in a reason file");
    CHECK(tu_sh("[ -f '%s/shadow' ] && [ -f '%s/outside.pgm' ]", secret, secret) == 0, "link targets untouched");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.document_sources WHERE path_display LIKE '%inside.pgm'") == 1,
          "a link inside DIR is a document; see %s", log);
    CHECK(tu_sh("for f in '%s'/.folio/rejected/*.reason.json; do"
                " [ $(( $(stat -c %%a \"$f\") %% 10 )) -eq 0 ] || exit 1; done", inbox) == 0,
          "reason files are not world-readable");

    /* --allow-root admits links into that folder. */
    PQclear(PQexec(c, "TRUNCATE folio.rejections, folio.results, folio.jobs, folio.document_sources, folio.blobs,"
                      " folio.documents CASCADE"));
    REQUIRE_OK(tu_sh("rm -rf '%s/.folio' && cd '%s' && rm -f inside.pgm && ln -s '%s/ok.pgm' allowed.pgm", inbox,
                     inbox, allowed) == 0, "reset");
    char extra[1300];
    snprintf(extra, sizeof extra, "--follow-symlinks --after keep --allow-root '%s'", allowed);
    REQUIRE_OK(ingest(inbox, extra, log) == 0, "ingest --allow-root; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.document_sources WHERE path_display LIKE '%allowed.pgm'") == 1,
          "a link into an --allow-root folder is a document; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.rejections") == 0, "nothing rejected with --allow-root; see %s", log);

    /* 2. DIR/.folio is a symlink out of DIR. */
    char inbox2[1100], target[1100];
    snprintf(inbox2, sizeof inbox2, "%s/inbox2", dir);
    snprintf(target, sizeof target, "%s/elsewhere", dir);
    REQUIRE_OK(tu_sh("mkdir -p '%s' '%s' && ln -s '%s' '%s/.folio'", inbox2, target, target, inbox2) == 0, "plant");
    snprintf(p, sizeof p, "%s/good.pgm", inbox2);
    put_pgm(p, 130);
    snprintf(p, sizeof p, "%s/bad.jpg", inbox2);
    f = fopen(p, "w");
    REQUIRE(f, "bad file");
    fputs("not an image", f);
    fclose(f);
    ingest(inbox2, "", log);
    CHECK(tu_sh("[ -z \"$(ls -A '%s')\" ]", target) == 0, "ingest wrote at the target of DIR/.folio");
    CHECK(tu_sh("[ -f '%s/good.pgm' ] && [ -f '%s/bad.jpg' ]", inbox2, inbox2) == 0, "files stay in the inbox");
    CHECK(tu_sh("grep -q 'is a symbolic link or not a folder' '%s'", log) == 0, "the log says why; see %s", log);

    /* 3. Slow writer. */
    char inbox3[1100], slow[1200], wlog[1100];
    snprintf(inbox3, sizeof inbox3, "%s/inbox3", dir);
    snprintf(slow, sizeof slow, "%s/slow.jpg", inbox3);
    snprintf(wlog, sizeof wlog, "%s/watch.log", dir);
    REQUIRE_OK(tu_sh("mkdir -p '%s'", inbox3) == 0, "inbox3");
    size_t jn = 0;
    uint8_t *jpg = cg_scan_jpeg(800, 600, 5, 1, 0, &jn);
    REQUIRE(jpg && jn > 1000, "encode");
    const char *const wargs[] = {"--watch", "--stable-ms", "300", "--no-progress", inbox3, NULL};
    pid_t ing_pid = wt_spawn("ingest", g_db, NULL, wlog, wargs);
    folio_sleep_ms(1000);
    int fd = open(slow, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0, "open the slow file");
    CHECK(write(fd, jpg, jn / 2) == (ssize_t)(jn / 2), "first half");
    folio_sleep_ms(1500); /* five stability windows of silence */
    CHECK(write(fd, jpg + jn / 2, jn - jn / 2) == (ssize_t)(jn - jn / 2), "second half");
    close(fd);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.document_sources WHERE path_display LIKE '%slow.jpg'", 1,
                      15000) == 0, "the slow writer's file is not a document; see %s", wlog);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.rejections WHERE path_display LIKE '%slow.jpg'") == 0,
          "the slow writer's half file was recorded as a rejection; see %s", wlog);
    kill(ing_pid, SIGTERM);
    CHECK(wt_wait_exit(ing_pid, 15000) == 0, "ingest --watch exit; see %s", wlog);
    free(jpg);

    PQfinish(c);
    return tu_finish();
}
