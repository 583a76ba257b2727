/* The blob-store seam (issue 18) through real PostgreSQL and real
 * `folio ingest` / `folio worker` processes:
 *  - the fs store's contract: content-addressed fan-out layout, atomic
 *    put (no temporary file left, private 0600/0700, idempotent), a get
 *    that verifies the hash (corrupt and missing blobs are distinct,
 *    clear errors), bad --blob-store values refused with the reason;
 *  - hostile stores (issue 32): a same-size corruption repaired by the
 *    next put of the original, a FIFO refused without blocking, symlinks
 *    (a fan-out folder or the blob itself) never followed;
 *  - ingest --blob-store fs:DIR writes the bytes there and only the
 *    location into PostgreSQL (no folio.blobs row);
 *  - a worker with the same store classifies those documents; a corrupt
 *    and a missing blob each fail their own job with the reason while the
 *    worker keeps running and exits 0 on SIGTERM;
 *  - documents ingested with the default (pg) store are unchanged: bytes
 *    in folio.blobs, read by the same worker (the location is per
 *    document);
 *  - a process with no fs store asked for an fs document says which
 *    option it needs. */
#include "pipeline/db/blobstore.h"
#include "pipeline/db/queue.h"
#include "tests/pg/worker_testlib.h"

#include <dirent.h>
#include <sys/stat.h>

/* Files under dir whose name contains needle (recursive). */
static int count_named(const char *dir, const char *needle)
{
    char out[64];
    tu_sh_out(out, sizeof out, "find '%s' -name '*%s*' | wc -l", dir, needle);
    return atoi(out);
}

static void store_contract(const char *scratch)
{
    struct folio_err err = {0};
    struct blobstore *b = NULL;
    char root[1100], spec[1200], path[1400];
    snprintf(root, sizeof root, "%s/unit-store", scratch);
    TU_NEED(folio_mkdirs(root, &err) == 0, "mkdir %s", root);

    CHECK(blobstore_open("s3://bucket", &b, &err) == FOLIO_EINVAL && strstr(err.msg, "pg or fs:/PATH"),
          "an unknown store is refused: %s", err.msg);
    CHECK(blobstore_open("fs:relative/dir", &b, &err) == FOLIO_EINVAL && strstr(err.msg, "absolute"),
          "a relative root is refused: %s", err.msg);
    snprintf(spec, sizeof spec, "fs:%s/absent", scratch);
    CHECK(blobstore_open(spec, &b, &err) == FOLIO_EINVAL && strstr(err.msg, "absent") &&
              strstr(err.hint, "mkdir -p"),
          "a root that does not exist is refused, not created: %s", err.msg);
    CHECK(blobstore_open("pg", &b, &err) == 0 && blobstore_in_pg(b) && strcmp(blobstore_kind(b), "pg") == 0,
          "pg is the bytea store");
    blobstore_close(b);

    snprintf(spec, sizeof spec, "fs:%s/", root); /* a trailing slash is the same root */
    TU_NEED(blobstore_open(spec, &b, &err) == 0, "open %s: %s", spec, err.msg);
    CHECK(!blobstore_in_pg(b) && strcmp(blobstore_kind(b), "fs") == 0, "fs kind");
    const char *data = "some document bytes";
    uint8_t sha[FOLIO_SHA256_LEN];
    char hex[65];
    folio_sha256(data, strlen(data), sha);
    folio_hex(sha, FOLIO_SHA256_LEN, hex);
    CHECK(blobstore_put(b, sha, data, strlen(data), &err) == 0, "put: %s", err.msg);
    CHECK(blobstore_put(b, sha, data, strlen(data), &err) == 0, "a second put of the same content: %s", err.msg);
    CHECK(blobstore_path(b, sha, path, sizeof path) == 0, "path");
    char want[1400];
    snprintf(want, sizeof want, "%s/sha256/%.2s/%.2s/%s", root, hex, hex + 2, hex);
    CHECK(strcmp(path, want) == 0, "fan-out layout: %s, want %s", path, want);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (size_t)st.st_size == strlen(data) && (st.st_mode & 0777) == 0600,
          "the blob is a whole, private file (mode %o)", (unsigned)(st.st_mode & 0777));
    char dir[1400];
    snprintf(dir, sizeof dir, "%s/sha256/%.2s", root, hex);
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700, "fan-out folders are private (mode %o)",
          (unsigned)(st.st_mode & 0777));
    CHECK(count_named(root, ".tmp-") == 0, "no temporary file is left behind");

    uint8_t *got = NULL;
    size_t n = 0;
    CHECK(blobstore_get(b, sha, 1 << 20, &got, &n, &err) == 0 && n == strlen(data) && memcmp(got, data, n) == 0,
          "get returns the bytes: %s", err.msg);
    free(got);

    /* one flipped byte */
    tu_sh("chmod u+w '%s' && printf X | dd of='%s' bs=1 seek=3 conv=notrunc status=none", path, path);
    CHECK(blobstore_get(b, sha, 1 << 20, &got, &n, &err) == FOLIO_EFORMAT && strstr(err.msg, "corrupt") &&
              strstr(err.msg, hex) && strstr(err.detail, path) && got == NULL,
          "a corrupt blob is detected: %s", err.msg);
    unlink(path);
    CHECK(blobstore_get(b, sha, 1 << 20, &got, &n, &err) == FOLIO_EIO && strstr(err.msg, "missing") &&
              strstr(err.msg, hex) && strstr(err.hint, "mounts"),
          "a missing blob is a distinct error: %s", err.msg);
    CHECK(blobstore_put(b, sha, data, strlen(data), &err) == 0 && blobstore_get(b, sha, 1 << 20, &got, &n, &err) == 0,
          "a re-put restores it: %s", err.msg);
    free(got);

    /* Corrupted in place, same size: the next put of the original (a
     * re-ingest) repairs it; it is not taken for a duplicate. */
    tu_sh("printf X | dd of='%s' bs=1 seek=3 conv=notrunc status=none", path);
    CHECK(blobstore_get(b, sha, 1 << 20, &got, &n, &err) == FOLIO_EFORMAT, "corrupt in place");
    CHECK(blobstore_put(b, sha, data, strlen(data), &err) == 0 && blobstore_get(b, sha, 1 << 20, &got, &n, &err) == 0 &&
              n == strlen(data) && memcmp(got, data, n) == 0,
          "re-putting the original repairs a same-size corruption: %s", err.msg);
    free(got);

    /* A named pipe at the blob path: refused at once (a blocking open
     * would wait for a writer for ever), then replaced by a put. */
    unlink(path);
    TU_NEED(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    double t0 = folio_mono_ms();
    CHECK(blobstore_get(b, sha, 1 << 20, &got, &n, &err) == FOLIO_EIO && strstr(err.msg, "not a regular file") &&
              strstr(err.msg, "named pipe"),
          "a FIFO is refused without blocking: %s", err.msg);
    fprintf(stderr, "blobstore: FIFO refused in %.0f ms\n", folio_mono_ms() - t0);
    CHECK(blobstore_put(b, sha, data, strlen(data), &err) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode),
          "a put replaces the FIFO with the blob: %s", err.msg);

    /* A symlink planted in the store (a fan-out folder pointing outside):
     * neither a put nor a get goes through it. */
    char outside[1200], aa[1400];
    snprintf(outside, sizeof outside, "%s/outside", scratch);
    TU_NEED(folio_mkdirs(outside, &err) == 0, "mkdir %s", outside);
    const char *other = "other document bytes";
    uint8_t osha[FOLIO_SHA256_LEN];
    char ohex[65];
    folio_sha256(other, strlen(other), osha);
    folio_hex(osha, FOLIO_SHA256_LEN, ohex);
    snprintf(aa, sizeof aa, "%s/sha256/%.2s", root, ohex);
    tu_sh("rm -rf '%s' && ln -s '%s' '%s'", aa, outside, aa);
    CHECK(blobstore_put(b, osha, other, strlen(other), &err) == FOLIO_EIO, "a put through a linked folder fails: %s",
          err.msg);
    CHECK(count_named(outside, ohex) == 0 && count_named(outside, ".tmp-") == 0,
          "nothing was written outside the store through the link");
    CHECK(blobstore_get(b, osha, 1 << 20, &got, &n, &err) == FOLIO_EIO && got == NULL,
          "a get does not follow the link: %s", err.msg);
    /* and a symlink as the blob itself, to a file with the right bytes */
    char target[1300];
    snprintf(target, sizeof target, "%s/good", outside);
    FILE *f = fopen(target, "w");
    TU_NEED(f, "create %s", target);
    fputs(data, f);
    fclose(f);
    unlink(path);
    TU_NEED(symlink(target, path) == 0, "symlink %s", path);
    CHECK(blobstore_get(b, sha, 1 << 20, &got, &n, &err) == FOLIO_EIO && strstr(err.msg, "symbolic link"),
          "a blob that is a symlink is refused: %s", err.msg);
    CHECK(blobstore_put(b, sha, data, strlen(data), &err) == 0 && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
              stat(target, &st) == 0 && (size_t)st.st_size == strlen(data),
          "a put replaces the link itself, never writes its target: %s", err.msg);
    blobstore_close(b);
}

static void drop(const char *inbox, const char *dir, const char *name, const char *text)
{
    uint8_t *page = NULL;
    size_t len = 0;
    TU_NEED(wt_render(dir, name, text, 1000, 500, &page, &len) == 0, "render %s", name);
    char p[1300];
    snprintf(p, sizeof p, "%s/%s.tif", inbox, name);
    FILE *f = fopen(p, "wb");
    TU_NEED(f, "create %s", p);
    fwrite(page, 1, len, f);
    fclose(f);
    free(page);
}

/* The store path of a document by the name it was ingested under. */
static int blob_path_of(PGconn *c, const struct blobstore *b, const char *name, char *path, size_t n)
{
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT encode(d.sha256, 'hex') FROM folio.documents d JOIN folio.document_sources s"
             " ON s.document_id = d.id WHERE s.name_display = '%s'", name);
    const char *hex = tu_pg_q1(c, sql);
    if (!hex || strlen(hex) != 64)
        return -1;
    uint8_t sha[32];
    for (int i = 0; i < 32; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        sha[i] = (uint8_t)v;
    }
    return blobstore_path(b, sha, path, n);
}

int main(void)
{
    char db[512];
    PGconn *c = wt_fresh_schema("folio_test_blobstore", db, sizeof db);
    REQUIRE(c, "fresh schema");
    const char *scratch = tu_scratch("blobstore");
    struct folio_err err = {0};
    store_contract(scratch);

    char store[1100], spec[1200], inbox[1100], inbox_pg[1100], log[1100], out[4096];
    snprintf(store, sizeof store, "%s/store", scratch);
    snprintf(spec, sizeof spec, "fs:%s", store);
    snprintf(inbox, sizeof inbox, "%s/inbox", scratch);
    snprintf(inbox_pg, sizeof inbox_pg, "%s/inbox-pg", scratch);
    snprintf(log, sizeof log, "%s/procs.log", scratch);
    REQUIRE_OK(folio_mkdirs(store, &err) == 0 && folio_mkdirs(inbox, &err) == 0 &&
                   folio_mkdirs(inbox_pg, &err) == 0, "mkdirs");

    /* bad values from the command line: usage errors naming the value */
    int rc = tu_sh_out(out, sizeof out, "'%s' ingest --db '%s' --blob-store fs:nope '%s' 2>&1", tu_folio_bin(), db,
                       inbox);
    CHECK(rc == 2 && strstr(out, "absolute path") && strstr(out, "nope"), "ingest refuses fs:nope: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "'%s' worker --db '%s' --blob-store ftp://x 2>&1", tu_folio_bin(), db);
    CHECK(rc == 2 && strstr(out, "pg or fs:/PATH"), "worker refuses ftp://x: rc=%d %s", rc, out);

    drop(inbox, scratch, "memo", "MEMORANDUM\nTo: all staff\nFrom: the board\nSubject: budget\n");
    drop(inbox, scratch, "broken", "INVOICE 1001\nAmount due: 12.50\nPayment terms: 30 days\n");
    drop(inbox, scratch, "gone", "INVOICE 1002\nAmount due: 99.00\nPayment terms: 14 days\n");
    drop(inbox_pg, scratch, "old", "MEMORANDUM\nTo: finance\nFrom: audit\nSubject: travel\n");

    rc = tu_sh_out(out, sizeof out, "'%s' ingest --db '%s' --blob-store '%s' '%s' 2>&1", tu_folio_bin(), db, spec,
                   inbox);
    CHECK(rc == 0, "ingest into the fs store: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "'%s' ingest --db '%s' '%s' 2>&1", tu_folio_bin(), db, inbox_pg);
    CHECK(rc == 0, "ingest with the default store: rc=%d %s", rc, out);

    CHECK(wt_q1(c, "SELECT count(*) FROM folio.documents WHERE blob_store = 'fs'") == 3, "3 documents in fs");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.documents d JOIN folio.blobs b USING (sha256)"
                   " WHERE d.blob_store = 'fs'") == 0,
          "no bytea for fs documents");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.documents d JOIN folio.blobs b USING (sha256)"
                   " WHERE d.blob_store = 'pg' AND length(b.data) = d.bytes") == 1,
          "the default store is unchanged: the bytes in folio.blobs");
    tu_sh_out(out, sizeof out, "find '%s' -type f | wc -l", store);
    CHECK(atoi(out) == 3, "one file per fs document in the store, got %s", out);
    CHECK(count_named(store, ".tmp-") == 0, "no temporary file left by ingest");

    struct blobstore *b = NULL;
    REQUIRE_OK(blobstore_open(spec, &b, &err) == 0, "open %s", spec);
    char p_memo[1400], p_broken[1400], p_gone[1400];
    REQUIRE_OK(blob_path_of(c, b, "memo.tif", p_memo, sizeof p_memo) == 0 &&
                   blob_path_of(c, b, "broken.tif", p_broken, sizeof p_broken) == 0 &&
                   blob_path_of(c, b, "gone.tif", p_gone, sizeof p_gone) == 0,
               "blob paths by document");
    struct stat st;
    CHECK(stat(p_memo, &st) == 0 && st.st_size == wt_q1(c, "SELECT bytes FROM folio.documents d JOIN "
                                                          "folio.document_sources s ON s.document_id = d.id"
                                                          " WHERE s.name_display = 'memo.tif'"),
          "the blob is the whole file");

    /* In-process reads through queue_fetch_document. */
    long long memo_id = wt_q1(c, "SELECT document_id FROM folio.document_sources WHERE name_display = 'memo.tif'");
    long long old_id = wt_q1(c, "SELECT document_id FROM folio.document_sources WHERE name_display = 'old.tif'");
    uint8_t *data = NULL;
    size_t len = 0;
    CHECK(queue_fetch_document(c, NULL, memo_id, &data, &len, &err) == FOLIO_EUNSUPPORTED &&
              strstr(err.hint, "--blob-store fs:PATH"),
          "no store configured: the error names the option: %s", err.msg);
    CHECK(queue_fetch_document(c, b, memo_id, &data, &len, &err) == 0 && (long long)len == st.st_size,
          "fs document read through the store: %s", err.msg);
    free(data);
    CHECK(queue_fetch_blob(c, old_id, &data, &len, &err) == 0 && len > 0, "pg document as before: %s", err.msg);
    free(data);

    /* A worker started without the store: it puts the fs job it claimed
     * back with its attempt, claims no more, and is not ready, saying why
     * (before: every fs document burnt its attempts and died). */
    char log0[1200];
    snprintf(log0, sizeof log0, "%s/nostore.log", scratch);
    const char *const nargs[] = {"--poll", "0.2", "--lease", "5", "--ocr-threads", "1", "--metrics-listen",
                                 "127.0.0.1:0", NULL};
    pid_t w0 = wt_spawn_worker(db, NULL, log0, nargs);
    char grep_cmd[1400];
    snprintf(grep_cmd, sizeof grep_cmd, "grep -q 'reason=blob_store_mismatch' '%s'", log0);
    int seen = 0;
    for (int i = 0; i < 600 && !seen; i++) {
        seen = tu_sh("%s", grep_cmd) == 0;
        if (!seen)
            folio_sleep_ms(100);
    }
    CHECK(seen, "the worker without a store says so; see %s", log0);
    tu_sh_out(out, sizeof out, "sed -n 's/.*event=metrics_listening .*port=\\([0-9]*\\).*/\\1/p' '%s' | head -1", log0);
    int mport = atoi(out);
    rc = tu_sh_out(out, sizeof out, "curl -s --max-time 20 http://127.0.0.1:%d/readyz", mport);
    CHECK(mport > 0 && strstr(out, "not ready") && strstr(out, "--blob-store fs:PATH"),
          "its /readyz says not ready and why: %s", out);
    folio_sleep_ms(1500); /* several poll intervals: a worker still claiming would have failed jobs by now */
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs j JOIN folio.documents d ON d.id = j.document_id"
                   " WHERE d.blob_store = 'fs' AND j.state = 'queued' AND j.attempts = 0") == 3,
          "the fs jobs are queued with no attempt spent; see %s", log0);
    tu_sh_out(out, sizeof out, "grep -c 'event=job_failed' '%s'", log0);
    CHECK(atoi(out) == 0, "no job failed for the missing store, got %s", out);
    kill(w0, SIGTERM);
    CHECK(wt_wait_exit(w0, 20000) == 0, "the worker without a store exits 0 on SIGTERM");

    /* Damage two blobs, then let a worker at them. */
    tu_sh("chmod u+w '%s' && printf X | dd of='%s' bs=1 seek=100 conv=notrunc status=none", p_broken, p_broken);
    unlink(p_gone);
    const char *const wargs[] = {"--blob-store", spec, "--poll", "0.5", "--lease", "5", "--ocr-threads", "1",
                                 "--max-attempts", "1", NULL};
    pid_t w = wt_spawn_worker(db, NULL, log, wargs);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state IN ('done', 'dead')", 4, 60000) == 0,
          "all four jobs settled; see %s", log);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results r JOIN folio.document_sources s USING (document_id)"
                   " WHERE s.name_display IN ('memo.tif', 'old.tif') AND r.label = 'memo'") == 2,
          "the fs document and the pg document are classified by the same worker");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs j JOIN folio.document_sources s USING (document_id)"
                   " WHERE s.name_display = 'broken.tif' AND j.state = 'dead' AND j.last_error LIKE '%corrupt%'"
                   " AND j.last_error LIKE '%hash to%'") == 1,
          "the corrupt blob failed its job with the reason");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs j JOIN folio.document_sources s USING (document_id)"
                   " WHERE s.name_display = 'gone.tif' AND j.state = 'dead' AND j.last_error LIKE '%missing%'") == 1,
          "the missing blob failed its job with the reason");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results") == 2, "no result for a damaged blob");
    CHECK(kill(w, 0) == 0, "the worker is still running after two bad blobs");
    kill(w, SIGTERM);
    CHECK(wt_wait_exit(w, 20000) == 0, "worker exits 0 on SIGTERM");
    tu_sh_out(out, sizeof out, "grep -c 'event=job_failed' '%s'", log);
    CHECK(atoi(out) == 2, "two job_failed lines in the log, got %s", out);

    /* Re-ingesting the original with --after delete (issue 32: the corrupt
     * blob was a "duplicate" and the good copy was deleted, the document
     * lost): the blob is rewritten from the file before the file goes, and
     * it is the same document. */
    rc = tu_sh("cp \"$(find '%s/.folio/done' -name broken.tif | head -1)\" '%s/broken.tif'", inbox, inbox);
    CHECK(rc == 0, "the original of the corrupt blob back in the inbox");
    rc = tu_sh_out(out, sizeof out, "'%s' ingest --db '%s' --blob-store '%s' --after delete '%s' 2>&1",
                   tu_folio_bin(), db, spec, inbox);
    CHECK(rc == 0, "re-ingest the original with --after delete: rc=%d %s", rc, out);
    tu_sh_out(out, sizeof out, "sha256sum '%s' | cut -c1-64; basename '%s'", p_broken, p_broken);
    CHECK(strlen(out) > 129 && memcmp(out, out + 65, 64) == 0, "the corrupt blob is repaired: %s", out);
    CHECK(access(p_broken, F_OK) == 0 && wt_q1(c, "SELECT count(*) FROM folio.documents WHERE blob_store = 'fs'") == 3,
          "the same document, its blob in place");
    snprintf(out, sizeof out, "%s/broken.tif", inbox);
    CHECK(access(out, F_OK) != 0, "the original is deleted only now that the store holds it");

    blobstore_close(b);
    PQfinish(c);
    return tu_finish();
}
