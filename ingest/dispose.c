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
#include "common/json.h"
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
        } else if (ul > 1 && folio_utf8_unsafe_cp(s + i, ul)) {
            /* C1 controls and bidi overrides: escaped like ESC */
            tl = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)folio_utf8_unsafe_cp(s + i, ul));
            i += ul;
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
    if (o + 3 > n)
        return;
    /* the closing quote's byte is held back, so a cut string still closes */
    struct json_buf b;
    json_init_fixed(&b, buf + o, n - o - 1);
    json_raw(&b, "\"");
    json_str_body(&b, str, strlen(str));
    o += b.len;
    buf[o++] = '"';
    buf[o] = '\0';
}

/* Splits name into stem and extension (".jpg"; none for ".hidden"). */
static void split_ext(const char *name, size_t *stem_len)
{
    const char *dot = strrchr(name, '.');
    *stem_len = (dot && dot != name) ? (size_t)(dot - name) : strlen(name);
}

/* Mode for what folio creates under DIR/.folio: the inbox's own group
 * access, never world access (a reason file names the rejected file and
 * why; the inbox's owner decides who else sees that, not folio). */
static mode_t folio_mode(int inbox_fd, mode_t want)
{
    struct stat st;
    if (fstat(inbox_fd, &st) != 0)
        return want & 0700;
    return want & (0700 | (st.st_mode & 0070));
}

/* Opens DIR/.folio/<sub> (sub: "a/b/c"), creating missing folders, one
 * component at a time relative to the folder above it with O_NOFOLLOW:
 * whoever can write to the inbox can plant a symlink at DIR/.folio or
 * anywhere below it, and a path-based mkdir/rename would follow it and
 * write outside DIR. A symlink (or a non-folder) on the way is refused
 * with the path named. *inbox_out (optional) gets a descriptor of DIR. */
static int open_folio_dir(const char *dir, const char *sub, int *inbox_out, struct folio_err *err)
{
    if (inbox_out)
        *inbox_out = -1;
    int inbox = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (inbox < 0) {
        char d[300];
        ingest_display(d, sizeof d, dir);
        return folio_err_set(err, FOLIO_EIO, "cannot open the inbox %s: %s", d, strerror(errno));
    }
    char path[PATH_MAX];
    if (folio_snprintf(path, sizeof path, ".folio%s%s", sub[0] ? "/" : "", sub) != 0) {
        close(inbox);
        return folio_err_set(err, FOLIO_EINVAL, "destination path too long");
    }
    mode_t mode = folio_mode(inbox, 0750);
    int fd = dup(inbox);
    size_t done = 0;
    for (char *comp = path, *next; fd >= 0 && comp && *comp; comp = next) {
        next = strchr(comp, '/');
        if (next)
            *next++ = '\0';
        if (!*comp || strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
            close(fd);
            close(inbox);
            return folio_err_set(err, FOLIO_EINVAL, "bad folder name '%s' under %s/.folio", comp, dir);
        }
        if (mkdirat(fd, comp, mode) != 0 && errno != EEXIST) {
            int e = errno;
            close(fd);
            close(inbox);
            char d[300];
            ingest_display(d, sizeof d, dir);
            folio_err_set(err, FOLIO_EIO, "cannot create %s/%.*s%s%s: %s", d, (int)done, path, done ? "/" : "", comp,
                          strerror(e));
            if (e == EACCES || e == EPERM)
                folio_err_hint(err, "folio needs write permission on %s", d);
            return FOLIO_EIO;
        }
        int nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        fd = nfd;
        if (fd < 0) {
            close(inbox);
            char d[300];
            ingest_display(d, sizeof d, dir);
            if (e == ELOOP || e == ENOTDIR) {
                folio_err_set(err, FOLIO_EIO, "%s/%.*s%s%s is a symbolic link or not a folder; refusing to write there",
                              d, (int)done, path, done ? "/" : "", comp);
                folio_err_detail(err, "folio keeps moved and rejected files only inside the inbox");
                folio_err_hint(err, "remove it (folio re-creates the folder) and check who can write to %s", d);
                return FOLIO_EIO;
            }
            return folio_err_set(err, FOLIO_EIO, "cannot open %s/%.*s%s%s: %s", d, (int)done, path, done ? "/" : "",
                                 comp, strerror(e));
        }
        /* keep the components walked so far for messages */
        done = (size_t)(comp - path) + strlen(comp);
        if (next)
            next[-1] = '/';
    }
    if (fd < 0) {
        close(inbox);
        return folio_err_set(err, FOLIO_EIO, "cannot open the inbox: %s", strerror(errno));
    }
    if (inbox_out)
        *inbox_out = inbox;
    else
        close(inbox);
    return fd;
}

/* Moves src into folder dfd as name unless the name is taken. 0, or
 * errno (EEXIST when taken). */
static int move_noreplace(const char *src, int dfd, const char *name)
{
    if (renameat2(AT_FDCWD, src, dfd, name, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return errno;
    /* No RENAME_NOREPLACE here (some network file systems): link is
     * exclusive too, and the link is made before the old name goes. */
    if (linkat(AT_FDCWD, src, dfd, name, 0) != 0)
        return errno;
    if (unlink(src) != 0) {
        int e = errno;
        unlinkat(dfd, name, 0);
        return e;
    }
    return 0;
}

int ingest_move_into(const char *dir, const char *sub, const char *path, const char *rel,
                     char **out, struct folio_err *err)
{
    *out = NULL;
    char target_sub[PATH_MAX], name_k[NAME_MAX + 1], reason[NAME_MAX + 16], target[PATH_MAX];
    const char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    int relsub = slash ? (int)(slash - rel) : 0;
    if (folio_snprintf(target_sub, sizeof target_sub, "%s%s%.*s", sub, relsub ? "/" : "", relsub, rel) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "destination path too long");
    int dfd = open_folio_dir(dir, target_sub, NULL, err);
    if (dfd < 0)
        return dfd;
    bool want_reason_free = strncmp(sub, "rejected", 8) == 0;
    size_t stem;
    split_ext(name, &stem);
    for (int k = 0; k < 100000; k++) {
        int r = k == 0 ? folio_snprintf(name_k, sizeof name_k, "%s", name)
                       : folio_snprintf(name_k, sizeof name_k, "%.*s.%d%s", (int)stem, name, k, name + stem);
        if (r != 0 || folio_snprintf(target, sizeof target, "%s/.folio/%s/%s", dir, target_sub, name_k) != 0) {
            close(dfd);
            return folio_err_set(err, FOLIO_EINVAL, "destination path too long");
        }
        if (want_reason_free) {
            struct stat st;
            snprintf(reason, sizeof reason, "%s.reason.json", name_k);
            if (fstatat(dfd, reason, &st, AT_SYMLINK_NOFOLLOW) == 0)
                continue;
        }
        int e = move_noreplace(path, dfd, name_k);
        if (e == 0) {
            close(dfd);
            *out = strdup(target);
            if (!*out)
                return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
            return 0;
        }
        if (e == EEXIST || e == ENOTEMPTY)
            continue;
        close(dfd);
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
    close(dfd);
    return folio_err_set(err, FOLIO_EIO, "no free name for %s in %s/.folio/%s", name, dir, target_sub);
}

int ingest_write_reason(const char *dir, const char *moved_path, const char *json, struct folio_err *err)
{
    /* moved_path is what ingest_move_into returned: DIR/.folio/SUB/NAME */
    size_t dl = strlen(dir);
    if (strncmp(moved_path, dir, dl) != 0 || strncmp(moved_path + dl, "/.folio/", 8) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "reason file outside %s/.folio refused", dir);
    char sub[PATH_MAX], base[NAME_MAX + 16];
    const char *rest = moved_path + dl + 8, *slash = strrchr(rest, '/');
    if (!slash || folio_snprintf(sub, sizeof sub, "%.*s", (int)(slash - rest), rest) != 0 ||
        folio_snprintf(base, sizeof base, "%s.reason.json", slash + 1) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "reason path too long");
    int inbox = -1;
    int dfd = open_folio_dir(dir, sub, &inbox, err);
    if (dfd < 0)
        return dfd;
    int fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, folio_mode(inbox, 0640));
    int oe = errno;
    close(dfd);
    close(inbox);
    if (fd < 0)
        return folio_err_set(err, FOLIO_EIO, "cannot create the reason file: %s", strerror(oe));
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
