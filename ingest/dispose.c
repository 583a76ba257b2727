/*
 * Dispositions: where a file goes once the database has its record, and
 * how file names are shown.
 *
 * Moves never overwrite. renameat2(RENAME_NOREPLACE) makes "is the name
 * free?" and "take it" one atomic step; on file systems without it the
 * fallback is link() + unlink(), which is just as exclusive. A taken name
 * gets a counter before its extension (scan.jpg -> scan.1.jpg), and a
 * rejected file's name is only used when NAME.reason.json is free too, so
 * a file and its reason always sit side by side.
 *
 * File names are bytes. Display forms escape what is not printable UTF-8
 * so they can go into text columns, JSON and log lines unambiguously.
 */
#include "ingest/ingest_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ingest_display(char *out, size_t n, const char *bytes)
{
    if (n == 0)
        return;
    const unsigned char *s = (const unsigned char *)bytes;
    size_t len = strlen(bytes), o = 0;
    for (size_t i = 0; i < len;) {
        char tmp[8];
        size_t tl;
        unsigned char c = s[i];
        size_t ul = c >= 0x80 ? folio_utf8_seq_len(s + i, len - i) : 1;
        if (c == '\\') {
            memcpy(tmp, "\\\\", 2); tl = 2; i++;
        } else if (c == '\n') {
            memcpy(tmp, "\\n", 2); tl = 2; i++;
        } else if (c == '\t') {
            memcpy(tmp, "\\t", 2); tl = 2; i++;
        } else if (c < 0x20 || c == 0x7f || ul == 0) {
            snprintf(tmp, sizeof tmp, "\\x%02x", c); tl = 4; i++;
        } else {
            memcpy(tmp, s + i, ul); tl = ul; i += ul;
        }
        if (o + tl + 1 > n)
            break; /* never cut a sequence in half */
        memcpy(out + o, tmp, tl);
        o += tl;
    }
    out[o] = '\0';
}

void ingest_json_str(char *buf, size_t n, const char *str)
{
    size_t o = strlen(buf);
    const unsigned char *s = (const unsigned char *)str;
    size_t len = strlen(str);
#define PUTS(p, l)                                                                           \
    do {                                                                                     \
        if (o + (l) + 2 > n)                                                                 \
            goto full;                                                                       \
        memcpy(buf + o, (p), (l));                                                           \
        o += (l);                                                                            \
    } while (0)
    if (o + 3 > n)
        return;
    buf[o++] = '"';
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        char tmp[8];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            PUTS(tmp, 2);
            i++;
        } else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            PUTS(tmp, 6);
            i++;
        } else if (c < 0x80) {
            PUTS(s + i, 1);
            i++;
        } else {
            size_t ul = folio_utf8_seq_len(s + i, len - i);
            if (ul == 0) {
                PUTS("\\ufffd", 6);
                i++;
            } else {
                PUTS(s + i, ul);
                i += ul;
            }
        }
    }
full:
    buf[o++] = '"';
    buf[o] = '\0';
#undef PUTS
}

/* Splits name into stem and extension (".jpg"; none for ".hidden"). */
static void split_ext(const char *name, size_t *stem_len)
{
    const char *dot = strrchr(name, '.');
    *stem_len = (dot && dot != name) ? (size_t)(dot - name) : strlen(name);
}

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

/* Moves src to dst unless dst exists. 0, or errno (EEXIST when taken). */
static int move_noreplace(const char *src, const char *dst)
{
    if (renameat2(AT_FDCWD, src, AT_FDCWD, dst, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return errno;
    /* No RENAME_NOREPLACE here (some network file systems): link is
     * exclusive too, and the link is made before the old name goes. */
    if (link(src, dst) != 0)
        return errno;
    if (unlink(src) != 0) {
        int e = errno;
        unlink(dst);
        return e;
    }
    return 0;
}

int ingest_move_into(const char *dir, const char *sub, const char *path, const char *rel,
                     char **out, struct folio_err *err)
{
    *out = NULL;
    char target_dir[PATH_MAX], target[PATH_MAX], reason[PATH_MAX + 16];
    const char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    int relsub = slash ? (int)(slash - rel) : 0;
    if (folio_snprintf(target_dir, sizeof target_dir, "%s/.folio/%s%s%.*s", dir, sub,
                       relsub ? "/" : "", relsub, rel) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "destination path too long");
    int rc = folio_mkdirs(target_dir, err);
    if (rc)
        return rc;
    bool want_reason_free = strncmp(sub, "rejected", 8) == 0;
    size_t stem;
    split_ext(name, &stem);
    for (int k = 0; k < 100000; k++) {
        int r = k == 0 ? folio_snprintf(target, sizeof target, "%s/%s", target_dir, name)
                       : folio_snprintf(target, sizeof target, "%s/%.*s.%d%s", target_dir,
                                        (int)stem, name, k, name + stem);
        if (r != 0)
            return folio_err_set(err, FOLIO_EINVAL, "destination path too long");
        if (want_reason_free) {
            snprintf(reason, sizeof reason, "%s.reason.json", target);
            if (exists(reason))
                continue;
        }
        int e = move_noreplace(path, target);
        if (e == 0) {
            *out = strdup(target);
            if (!*out)
                return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
            return 0;
        }
        if (e == EEXIST || e == ENOTEMPTY)
            continue;
        char d1[300], d2[300];
        ingest_display(d1, sizeof d1, path);
        ingest_display(d2, sizeof d2, target);
        folio_err_set(err, FOLIO_EIO, "cannot move %s to %s: %s", d1, d2, strerror(e));
        if (e == EXDEV)
            folio_err_hint(err, "%s/.folio must be on the same file system as the files", dir);
        else if (e == EACCES || e == EPERM)
            folio_err_hint(err, "folio needs write permission on the folder the file is in");
        return FOLIO_EIO;
    }
    return folio_err_set(err, FOLIO_EIO, "no free name for %s in %s", name, target_dir);
}

int ingest_write_reason(const char *moved_path, const char *json, struct folio_err *err)
{
    char p[PATH_MAX + 16];
    if (folio_snprintf(p, sizeof p, "%s.reason.json", moved_path) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "reason path too long");
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return folio_err_set(err, FOLIO_EIO, "cannot create the reason file: %s", strerror(errno));
    size_t len = strlen(json), done = 0;
    while (done < len) {
        ssize_t w = write(fd, json + done, len - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            return folio_err_set(err, FOLIO_EIO, "writing the reason file: %s", strerror(e));
        }
        done += (size_t)w;
    }
    if (close(fd) != 0)
        return folio_err_set(err, FOLIO_EIO, "writing the reason file: %s", strerror(errno));
    return 0;
}
