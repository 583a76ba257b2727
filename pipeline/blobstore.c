/*
 * Blob stores: folio.blobs (pg) or a content-addressed directory tree (fs).
 * See blobstore.h for the contract and the layout.
 *
 * Durability of an fs put: the bytes are fsync'd before the rename, and the
 * directory after it, because ingest moves the source file away once the
 * database has committed: a blob that only sat in the page cache would be
 * the one copy of a document that a power cut can take. Two fan-out levels
 * (65,536 directories) keep each directory small at millions of documents.
 */
#include "pipeline/blobstore.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct blobstore {
    int fs;
    char root[PATH_MAX];
};

int blobstore_open(const char *spec, struct blobstore **out, struct folio_err *err)
{
    *out = NULL;
    struct blobstore *b = calloc(1, sizeof *b);
    if (!b)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    if (!spec || !*spec || strcmp(spec, "pg") == 0) {
        *out = b;
        return 0;
    }
    if (strncmp(spec, "fs:", 3) != 0) {
        free(b);
        folio_err_set(err, FOLIO_EINVAL, "--blob-store wants pg or fs:/PATH, got '%s'", spec);
        folio_err_hint(err, "pg keeps the bytes in folio.blobs (default); fs:/srv/folio-blobs keeps them in a "
                            "directory every worker mounts");
        return FOLIO_EINVAL;
    }
    const char *root = spec + 3;
    if (root[0] != '/') {
        free(b);
        folio_err_set(err, FOLIO_EINVAL, "--blob-store fs: wants an absolute path, got '%s'", root);
        folio_err_hint(err, "workers on other hosts resolve the same path: give it from /, e.g. fs:/srv/folio-blobs");
        return FOLIO_EINVAL;
    }
    struct stat st;
    const char *why = NULL;
    if (stat(root, &st) != 0)
        why = strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        why = "not a directory";
    if (why) {
        free(b);
        folio_err_set(err, FOLIO_EINVAL, "--blob-store: %s cannot be used as the blob store (%s)", root, why);
        folio_err_hint(err, "create it (mkdir -p %s) or mount the shared store there first", root);
        return FOLIO_EINVAL;
    }
    size_t rl = strlen(root);
    while (rl > 1 && root[rl - 1] == '/')
        rl--;
    /* room for "/sha256/aa/bb/" + 64 hex + a temporary suffix */
    if (rl + 100 >= sizeof b->root) {
        free(b);
        return folio_err_set(err, FOLIO_EINVAL, "--blob-store: path too long: %s", root);
    }
    memcpy(b->root, root, rl);
    b->root[rl] = '\0';
    b->fs = 1;
    *out = b;
    return 0;
}

void blobstore_close(struct blobstore *b)
{
    free(b);
}

const char *blobstore_kind(const struct blobstore *b)
{
    return blobstore_in_pg(b) ? "pg" : "fs";
}

int blobstore_in_pg(const struct blobstore *b)
{
    return !b || !b->fs;
}

int blobstore_path(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], char *buf, size_t n)
{
    if (blobstore_in_pg(b))
        return FOLIO_EINVAL;
    char hex[2 * FOLIO_SHA256_LEN + 1];
    folio_hex(sha, FOLIO_SHA256_LEN, hex);
    return folio_snprintf(buf, n, "%s/sha256/%.2s/%.2s/%s", b->root, hex, hex + 2, hex);
}

/* fsync of a directory: makes a rename or mkdir inside it durable. */
static int fsync_dir(const char *dir, struct folio_err *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return folio_err_set(err, FOLIO_EIO, "cannot open blob directory %s: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0)
        return folio_err_set(err, FOLIO_EIO, "cannot fsync blob directory %s: %s", dir, strerror(e));
    return 0;
}

/* mkdir of one fan-out level; a new directory is made durable in its parent. */
static int mkdir_durable(const char *dir, const char *parent, struct folio_err *err)
{
    if (mkdir(dir, 0755) == 0)
        return fsync_dir(parent, err);
    if (errno == EEXIST)
        return 0;
    return folio_err_set(err, FOLIO_EIO, "cannot create blob directory %s: %s", dir, strerror(errno));
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int blobstore_put(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], const void *data, size_t len,
                  struct folio_err *err)
{
    if (blobstore_in_pg(b))
        return 0;
    char path[PATH_MAX], d0[PATH_MAX], d1[PATH_MAX], d2[PATH_MAX], tmp[PATH_MAX];
    if (blobstore_path(b, sha, path, sizeof path) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "blob path too long under %s", b->root);
    size_t rl = strlen(b->root);
    /* d0 = ROOT/sha256, d1 = ROOT/sha256/aa, d2 = ROOT/sha256/aa/bb */
    snprintf(d0, sizeof d0, "%.*s", (int)(rl + 7), path);
    snprintf(d1, sizeof d1, "%.*s", (int)(rl + 10), path);
    snprintf(d2, sizeof d2, "%.*s", (int)(rl + 13), path);

    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len)
        return 0; /* same name, same size: the same content (a reader verifies) */

    int rc;
    if ((rc = mkdir_durable(d0, b->root, err)) || (rc = mkdir_durable(d1, d0, err)) ||
        (rc = mkdir_durable(d2, d1, err)))
        return rc;
    if (folio_snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "blob path too long under %s", b->root);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return folio_err_set(err, FOLIO_EIO, "cannot create a blob file in %s: %s", d2, strerror(errno));
    if (fchmod(fd, 0444) != 0 || write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        folio_err_set(err, FOLIO_EIO, "cannot write blob %s: %s", tmp, strerror(e));
        folio_err_hint(err, "check free space and permissions of the blob store %s", b->root);
        return FOLIO_EIO;
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return folio_err_set(err, FOLIO_EIO, "cannot write blob %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return folio_err_set(err, FOLIO_EIO, "cannot rename blob %s -> %s: %s", tmp, path, strerror(e));
    }
    return fsync_dir(d2, err);
}

int blobstore_get(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], size_t max_bytes,
                  uint8_t **data, size_t *len, struct folio_err *err)
{
    *data = NULL;
    *len = 0;
    char path[PATH_MAX], hex[2 * FOLIO_SHA256_LEN + 1];
    folio_hex(sha, FOLIO_SHA256_LEN, hex);
    if (blobstore_path(b, sha, path, sizeof path) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "blob %s: not an fs blob store", hex);
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        folio_err_set(err, FOLIO_EIO, "blob %s is missing from the fs blob store: %s: %s", hex, path,
                      strerror(e));
        folio_err_hint(err, "check that this host mounts the store ingest writes to (--blob-store) at %s; "
                            "re-ingest the file if the blob was deleted",
                       b->root);
        return FOLIO_EIO;
    }
    uint8_t *buf = NULL;
    size_t n = 0;
    struct folio_err rerr = {0};
    int rc = folio_read_file(path, max_bytes, &buf, &n, &rerr);
    if (rc) {
        folio_err_set(err, rc, "blob %s cannot be read: %s", hex, rerr.msg);
        folio_err_hint(err, "check the permissions and health of the blob store at %s", b->root);
        return rc;
    }
    uint8_t got[FOLIO_SHA256_LEN];
    if (folio_sha256(buf, n, got) != 0) {
        free(buf);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot hash blob %s", hex);
    }
    if (memcmp(got, sha, FOLIO_SHA256_LEN) != 0) {
        char gh[2 * FOLIO_SHA256_LEN + 1];
        folio_hex(got, FOLIO_SHA256_LEN, gh);
        free(buf);
        folio_err_set(err, FOLIO_EFORMAT, "blob %s is corrupt: its %zu bytes hash to %s", hex, n, gh);
        folio_err_detail(err, "file %s", path);
        folio_err_hint(err, "restore the file from a backup or re-ingest the document; the store is "
                            "content-addressed, so the name is the sha256 the bytes must have");
        return FOLIO_EFORMAT;
    }
    *data = buf;
    *len = n;
    return 0;
}
