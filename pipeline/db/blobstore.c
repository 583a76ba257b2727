/*
 * Blob stores: folio.blobs (pg) or a content-addressed directory tree (fs).
 * See blobstore.h for the contract and the layout.
 *
 * Durability of an fs put: the bytes are fsync'd before the rename, and the
 * directory after it, because ingest moves the source file away once the
 * database has committed: a blob that only sat in the page cache would be
 * the one copy of a document that a power cut can take. Two fan-out levels
 * (65,536 directories) keep each directory small at millions of documents.
 *
 * Hostile stores (issue 32): everything is opened beneath the root with no
 * symlink followed (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or a
 * walk with O_NOFOLLOW per component where the kernel has no openat2), so
 * a link planted in the store never makes ingest write, or a worker read,
 * outside it. A blob is opened O_NONBLOCK and must be a regular file: a
 * FIFO planted at a blob path is refused at once instead of hanging a
 * worker thread for good. A put over an existing blob keeps it only when
 * its bytes hash to the name, and otherwise replaces it with the good
 * bytes: re-ingesting the original repairs a blob corrupted in place
 * (before, "same size" counted as same content, and --after delete then
 * removed the only good copy). Files are 0600 and folders 0700: the store
 * holds every document.
 */
#include "pipeline/db/blobstore.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct blobstore {
    int fs;
    int rootfd; /* the root, O_PATH: every open is relative to it */
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
    b->rootfd = open(b->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (b->rootfd < 0) {
        int e = errno;
        free(b);
        return folio_err_set(err, FOLIO_EINVAL, "--blob-store: cannot open %s: %s", root, strerror(e));
    }
    b->fs = 1;
    *out = b;
    return 0;
}

void blobstore_close(struct blobstore *b)
{
    if (b && b->fs)
        close(b->rootfd);
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

/* The path of a blob below the root: sha256/aa/bb/<hex>. */
static void rel_path(const uint8_t sha[FOLIO_SHA256_LEN], char rel[96])
{
    char hex[2 * FOLIO_SHA256_LEN + 1];
    folio_hex(sha, FOLIO_SHA256_LEN, hex);
    snprintf(rel, 96, "sha256/%.2s/%.2s/%s", hex, hex + 2, hex);
}

/* openat(dirfd, rel) that never leaves dirfd's tree and follows no
 * symlink, whatever rel's components are on disk: ELOOP (or EXDEV) for a
 * link. openat2 where the kernel has it (5.6+); otherwise each directory
 * component is opened O_NOFOLLOW | O_DIRECTORY and the last O_NOFOLLOW. */
static int open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC), .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
        return (int)fd;
    /* no openat2 (or a seccomp profile refusing it): walk */
    int cur = dirfd;
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash)
            break;
        char comp[NAME_MAX + 1];
        size_t n = (size_t)(slash - p);
        if (n == 0 || n > NAME_MAX || (n == 2 && p[0] == '.' && p[1] == '.')) {
            if (cur != dirfd)
                close(cur);
            errno = EXDEV;
            return -1;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        int next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        if (cur != dirfd)
            close(cur);
        if (next < 0) {
            errno = e;
            return -1;
        }
        cur = next;
        p = slash + 1;
    }
    int r = openat(cur, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    int e = errno;
    if (cur != dirfd)
        close(cur);
    errno = e;
    return r;
}

/* mkdir of one fan-out level below the root (no link followed on the way),
 * made durable in its parent. */
static int mkdir_durable(const struct blobstore *b, const char *rel, size_t len, struct folio_err *err)
{
    char dir[96], parent[96];
    snprintf(dir, sizeof dir, "%.*s", (int)len, rel);
    const char *slash = strrchr(dir, '/');
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - dir) : 1, slash ? dir : ".");
    int pfd = strcmp(parent, ".") == 0 ? dup(b->rootfd) : open_beneath(b->rootfd, parent, O_PATH | O_DIRECTORY, 0);
    if (pfd < 0)
        return folio_err_set(err, FOLIO_EIO, "cannot open blob directory %s/%s: %s", b->root, parent, strerror(errno));
    const char *name = slash ? slash + 1 : dir;
    int rc = 0;
    if (mkdirat(pfd, name, 0700) == 0) {
        /* fsync needs a real descriptor, not O_PATH */
        int sfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0 || fsync(sfd) != 0)
            rc = folio_err_set(err, FOLIO_EIO, "cannot fsync blob directory %s/%s: %s", b->root, parent, strerror(errno));
        if (sfd >= 0)
            close(sfd);
    } else if (errno != EEXIST) {
        rc = folio_err_set(err, FOLIO_EIO, "cannot create blob directory %s/%s: %s", b->root, dir, strerror(errno));
    }
    close(pfd);
    return rc;
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

/* Opens the blob of sha for reading: beneath the root, no link, never
 * blocking, a regular file of at most max_bytes. 0 with *fd and *size, or
 * an error naming what is there. */
static int open_blob(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], size_t max_bytes, int *fdp,
                     size_t *size, struct folio_err *err)
{
    char rel[96], hex[2 * FOLIO_SHA256_LEN + 1];
    rel_path(sha, rel);
    folio_hex(sha, FOLIO_SHA256_LEN, hex);
    *fdp = -1;
    int fd = open_beneath(b->rootfd, rel, O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) {
            folio_err_set(err, FOLIO_EIO, "blob %s is missing from the fs blob store: %s/%s: %s", hex, b->root, rel,
                          strerror(e));
            folio_err_hint(err, "check that this host mounts the store ingest writes to (--blob-store) at %s; "
                                "re-ingest the file if the blob was deleted",
                           b->root);
            return FOLIO_EIO;
        }
        folio_err_set(err, FOLIO_EIO, "blob %s cannot be opened in the fs blob store: %s/%s: %s", hex, b->root, rel,
                      e == ELOOP || e == EXDEV ? "a symbolic link is in the way (the store follows none)"
                                               : strerror(e));
        folio_err_hint(err, "remove what is at that path and re-ingest the file; only folio should write below %s",
                       b->root);
        return FOLIO_EIO;
    }
    struct stat st;
    int isfifo = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        isfifo = S_ISFIFO(st.st_mode);
        close(fd);
        folio_err_set(err, FOLIO_EIO, "blob %s in the fs blob store is not a regular file: %s/%s%s", hex, b->root,
                      rel, isfifo ? " (a named pipe)" : "");
        folio_err_hint(err, "remove what is at that path and re-ingest the file; only folio should write below %s",
                       b->root);
        return FOLIO_EIO;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return folio_err_set(err, FOLIO_ELIMIT, "blob %s is %lld bytes, over the %zu this reader takes", hex,
                             (long long)st.st_size, max_bytes);
    }
    /* reads block normally from here (a regular file never would anyway) */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fdp = fd;
    *size = (size_t)st.st_size;
    return 0;
}

/* Reads size bytes of fd and checks them against sha: 0 with the bytes,
 * FOLIO_EFORMAT (corrupt) or FOLIO_EIO. */
static int read_verified(const struct blobstore *b, int fd, size_t size, const uint8_t sha[FOLIO_SHA256_LEN],
                         uint8_t **data, size_t *len, struct folio_err *err)
{
    char rel[96], hex[2 * FOLIO_SHA256_LEN + 1];
    rel_path(sha, rel);
    folio_hex(sha, FOLIO_SHA256_LEN, hex);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate %zu bytes for blob %s", size, hex);
    size_t n = 0;
    while (n < size) {
        ssize_t r = read(fd, buf + n, size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            free(buf);
            folio_err_set(err, FOLIO_EIO, "blob %s cannot be read: %s/%s: %s", hex, b->root, rel,
                          e ? strerror(e) : "it shrank while being read");
            folio_err_hint(err, "check the permissions and health of the blob store at %s", b->root);
            return FOLIO_EIO;
        }
        n += (size_t)r;
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
        /* what is wrong and the repair first: a job records msg: detail */
        folio_err_set(err, FOLIO_EFORMAT, "blob %s in the fs blob store is corrupt; re-ingest the original file to "
                      "repair it", hex);
        folio_err_detail(err, "its %zu bytes hash to %s; file %s/%s", n, gh, b->root, rel);
        folio_err_hint(err, "re-ingest the original (the store repairs the blob from it) or restore the file from a "
                            "backup; the store is content-addressed, so the name is the sha256 the bytes must have");
        return FOLIO_EFORMAT;
    }
    *data = buf;
    *len = n;
    return 0;
}

/* A good copy is already stored under sha. */
static int have_good_copy(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], size_t len)
{
    int fd;
    size_t size;
    struct folio_err e = {0};
    if (open_blob(b, sha, len, &fd, &size, &e) != 0)
        return 0;
    uint8_t *got = NULL;
    size_t n = 0;
    int ok = size == len && read_verified(b, fd, size, sha, &got, &n, &e) == 0;
    close(fd);
    free(got);
    return ok;
}

int blobstore_put(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], const void *data, size_t len,
                  struct folio_err *err)
{
    if (blobstore_in_pg(b))
        return 0;
    char rel[96];
    rel_path(sha, rel);
    /* same name and bytes that hash to it: nothing to do. Anything else
     * at the path (a corrupt copy, a FIFO, a link) is replaced below. */
    if (have_good_copy(b, sha, len))
        return 0;

    int rc;
    /* sha256, sha256/aa, sha256/aa/bb */
    if ((rc = mkdir_durable(b, rel, 6, err)) || (rc = mkdir_durable(b, rel, 9, err)) ||
        (rc = mkdir_durable(b, rel, 12, err)))
        return rc;
    char d2[16];
    snprintf(d2, sizeof d2, "%.12s", rel);
    int dfd = open_beneath(b->rootfd, d2, O_RDONLY | O_DIRECTORY, 0);
    if (dfd < 0)
        return folio_err_set(err, FOLIO_EIO, "cannot open blob directory %s/%s: %s", b->root, d2, strerror(errno));
    const char *name = rel + 13;
    char tmp[128];
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        uint8_t rnd[8];
        char rh[17];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            break;
        folio_hex(rnd, sizeof rnd, rh);
        snprintf(tmp, sizeof tmp, "%s.tmp-%s", name, rh);
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int e = errno;
        close(dfd);
        return folio_err_set(err, FOLIO_EIO, "cannot create a blob file in %s/%s: %s", b->root, d2, strerror(e));
    }
    if (write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlinkat(dfd, tmp, 0);
        close(dfd);
        folio_err_set(err, FOLIO_EIO, "cannot write blob %s/%s/%s: %s", b->root, d2, tmp, strerror(e));
        folio_err_hint(err, "check free space and permissions of the blob store %s", b->root);
        return FOLIO_EIO;
    }
    if (close(fd) != 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return folio_err_set(err, FOLIO_EIO, "cannot write blob %s/%s/%s: %s", b->root, d2, tmp, strerror(e));
    }
    /* rename replaces whatever is at the name (a corrupt file, a FIFO, a
     * symlink itself, never its target) */
    if (renameat(dfd, tmp, dfd, name) != 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return folio_err_set(err, FOLIO_EIO, "cannot rename blob %s/%s/%s into place: %s", b->root, d2, tmp,
                             strerror(e));
    }
    rc = fsync(dfd) == 0 ? 0 : folio_err_set(err, FOLIO_EIO, "cannot fsync blob directory %s/%s: %s", b->root, d2,
                                             strerror(errno));
    close(dfd);
    return rc;
}

int blobstore_get(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], size_t max_bytes,
                  uint8_t **data, size_t *len, struct folio_err *err)
{
    *data = NULL;
    *len = 0;
    char hex[2 * FOLIO_SHA256_LEN + 1];
    folio_hex(sha, FOLIO_SHA256_LEN, hex);
    if (blobstore_in_pg(b))
        return folio_err_set(err, FOLIO_EINVAL, "blob %s: not an fs blob store", hex);
    int fd;
    size_t size;
    int rc = open_blob(b, sha, max_bytes, &fd, &size, err);
    if (rc)
        return rc;
    rc = read_verified(b, fd, size, sha, data, len, err);
    close(fd);
    return rc;
}
