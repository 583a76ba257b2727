/*
 * The ingest run's validators (ingest_internal.h): each reads a stable file,
 * checks it is still the file that was judged stable, probes it (limits,
 * format, whole-data validation) and hashes it. Nothing here touches the
 * file system beyond reading: dispositions wait for the commit.
 */
#include "pipeline/ingest/ingest_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A damaged file must have been quiet this many stability windows
 * (--stable-ms) before it is rejected as corrupt (see validate). */
#define SLOW_WRITER_FACTOR 10

/* Links and special files are refused on what discovery saw, unopened.
 * Returns true when the item is judged. */
static bool judge_kind(struct ingest_item *it)
{
    if (it->cand.sig.kind == INGEST_CAND_SYMLINK) {
        folio_err_set(&it->err, FOLIO_EUNSUPPORTED, "symbolic links are refused");
        folio_err_hint(&it->err, "pass --follow-symlinks to ingest the files links point to");
        ingest_set_reject(it, "symlink");
        return true;
    }
    if (it->cand.sig.kind == INGEST_CAND_SPECIAL) {
        folio_err_set(&it->err, FOLIO_EUNSUPPORTED,
                      "not a regular file (a fifo, socket, device or a link to nothing)");
        ingest_set_reject(it, "not_regular_file");
        return true;
    }
    return false;
}

/* Opens the file for reading; -1 when it cannot be (the item is judged:
 * unreadable, gone, or to retry). */
static int open_item(const struct ingest_run_opts *o, struct ingest_item *it)
{
    int fd = open(it->cand.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (o->follow_symlinks ? 0 : O_NOFOLLOW));
    if (fd >= 0)
        return fd;
    if (errno == EACCES) {
        folio_err_set(&it->err, FOLIO_EIO, "file cannot be read: %s", strerror(errno));
        folio_err_hint(&it->err, "give the folio user read permission, then drop the file again");
        ingest_set_reject(it, "unreadable");
    } else {
        it->status = (errno == ENOENT || errno == ELOOP) ? ITEM_REOBSERVE : ITEM_RETRY;
        folio_err_set(&it->err, FOLIO_EIO, "cannot open: %s", strerror(errno));
    }
    return -1;
}

/* --follow-symlinks: a followed link must resolve inside the folder (or
 * an --allow-root). Judged on what was opened, before a byte is read: no
 * size, hash or content of a file outside the inbox is ever recorded.
 * Returns true (fd closed, item rejected) when it leads outside. */
static bool judge_outside(const struct ingest_run_opts *o, struct ingest_item *it, int fd)
{
    if (!o->follow_symlinks || ingest_fd_within(fd, o->dir, o->allow_roots))
        return false;
    close(fd);
    /* The record describes the link, not its target: discovery
     * stat()ed through it, and the target's size and mtime are
     * facts about a file outside the inbox. */
    struct stat ls;
    if (lstat(it->cand.path, &ls) == 0) {
        it->cand.sig.size = (uint64_t)ls.st_size;
        it->cand.sig.mtime_ns = (int64_t)ls.st_mtim.tv_sec * 1000000000LL + ls.st_mtim.tv_nsec;
    } else {
        it->cand.sig.size = 0;
    }
    folio_err_set(&it->err, FOLIO_EUNSUPPORTED, "symbolic link leads outside the ingest folder");
    folio_err_hint(&it->err, "followed links must resolve inside DIR or an --allow-root folder");
    ingest_set_reject(it, "symlink");
    return true;
}

/* Still the file that was judged stable, and within --max-bytes? Returns
 * true (fd closed, item judged) when it is not. */
static bool judge_stat(const struct ingest_run_opts *o, struct ingest_item *it, int fd, struct stat *st)
{
    const struct ingest_sig *sig = &it->cand.sig;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || (uint64_t)st->st_ino != sig->ino ||
        (uint64_t)st->st_size != sig->size ||
        (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec != sig->mtime_ns) {
        close(fd);
        it->status = ITEM_REOBSERVE; /* replaced or written since it was judged stable */
        return true;
    }
    if ((uint64_t)st->st_size > o->limits.max_bytes) {
        /* Refused on its size alone: never read, never allocated. */
        close(fd);
        folio_err_set(&it->err, FOLIO_ELIMIT, "file is %llu bytes, over the limit of %llu bytes",
                      (unsigned long long)st->st_size, (unsigned long long)o->limits.max_bytes);
        folio_err_hint(&it->err, "raise --max-bytes if files this large are expected");
        snprintf(it->info.limit_name, sizeof it->info.limit_name, "max_bytes");
        it->info.limit_value = o->limits.max_bytes;
        it->info.actual_value = (uint64_t)st->st_size;
        ingest_set_reject(it, "too_large");
        return true;
    }
    return false;
}

/* Reads the whole file into it->data and closes fd. Returns false (item
 * judged, no data) when memory ran out or the file changed meanwhile. */
static bool read_item(struct ingest_item *it, int fd, const struct stat *st)
{
    size_t size = (size_t)st->st_size, got = 0;
    it->data = malloc(size ? size : 1);
    if (!it->data) {
        close(fd);
        it->status = ITEM_RETRY;
        folio_err_set(&it->err, FOLIO_ENOMEM, "out of memory reading %zu bytes", size);
        return false;
    }
    while (got < size) {
        ssize_t r = read(fd, it->data + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    struct stat st2;
    bool same = fstat(fd, &st2) == 0 && st2.st_size == st->st_size &&
                st2.st_mtim.tv_sec == st->st_mtim.tv_sec && st2.st_mtim.tv_nsec == st->st_mtim.tv_nsec;
    close(fd);
    if (got != size || !same) {
        free(it->data);
        it->data = NULL;
        it->status = ITEM_REOBSERVE; /* written to while being read */
        return false;
    }
    it->len = size;
    return true;
}

/* A slow writer that paused longer than --stable-ms leaves a file that
 * looks truncated. A damaged file that was written to recently may still
 * be growing: look again (the stability window restarts) instead of
 * recording half a file as corrupt; once it has been quiet for
 * SLOW_WRITER_FACTOR stability windows it is judged as it is. */
static bool maybe_growing(const struct ingest_run_opts *o, const struct ingest_item *it, const struct stat *st)
{
    int64_t mtime_ms = (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t quiet_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 - mtime_ms;
    if (strcmp(it->info.reason, "corrupt") != 0 || quiet_ms >= (int64_t)o->stable_ms * SLOW_WRITER_FACTOR)
        return false;
    char lq[1100];
    folio_log(FOLIO_LOG_DEBUG, "file_maybe_growing", "path=%s quiet_ms=%lld action=reobserve",
              folio_lq(lq, sizeof lq, it->path_display), (long long)quiet_ms);
    return true;
}

/* The bytes are read: hash them and probe them (limits, format, whole-data
 * validation); accept, reject with the probe's reason, or look again. */
static void judge_content(const struct ingest_run_opts *o, struct ingest_item *it, const struct stat *st)
{
    if (folio_sha256(it->data, it->len, it->sha) == 0)
        it->have_sha = 1;
    int rc = ingest_probe(it->data, it->len, &o->limits, &it->info, &it->err);
    if (rc == 0 && it->have_sha) {
        it->status = ITEM_ACCEPT;
        return;
    }
    free(it->data);
    it->data = NULL;
    it->len = 0;
    if (rc == 0 || rc == FOLIO_ENOMEM || strcmp(it->info.reason, "internal") == 0) {
        it->status = ITEM_RETRY; /* our problem, not the file's */
        return;
    }
    if (maybe_growing(o, it, st)) {
        it->status = ITEM_REOBSERVE;
        return;
    }
    ingest_set_reject(it, it->info.reason[0] ? it->info.reason : "corrupt");
}

/* Reads and judges one stable file. Never touches the file system
 * otherwise: dispositions wait for the commit. */
static struct ingest_item *validate(const struct run *R, struct ingest_candidate c)
{
    struct ingest_item *it = calloc(1, sizeof *it);
    if (!it)
        return NULL; /* the caller still owns c */
    it->cand = c;
    it->info.failed_page = -1;
    ingest_display(it->path_display, sizeof it->path_display, c.path);
    ingest_display(it->name_display, sizeof it->name_display, c.path + c.name_off);
    const struct ingest_run_opts *o = R->o;
    if (judge_kind(it))
        return it;
    int fd = open_item(o, it);
    struct stat st;
    if (fd < 0 || judge_outside(o, it, fd) || judge_stat(o, it, fd, &st) || !read_item(it, fd, &st))
        return it;
    judge_content(o, it, &st);
    return it;
}

void *ingest_validator_main(void *arg)
{
    struct run *R = arg;
    pthread_mutex_lock(&R->mu);
    for (;;) {
        while (R->work_len == 0 && !R->stop_validators)
            pthread_cond_wait(&R->work_cv, &R->mu);
        if (R->work_len == 0)
            break;
        struct ingest_candidate c = R->work[R->work_head];
        R->work_head = (R->work_head + 1) % R->work_cap;
        bool was_full = R->work_len == R->work_cap;
        R->work_len--;
        R->busy++;
        pthread_mutex_unlock(&R->mu);
        if (was_full) {
            uint64_t one = 1;
            if (write(R->evfd, &one, sizeof one) < 0) {
                /* cannot fail short of EBADF; the main loop has a timeout */
            }
        }
        struct ingest_item *it = validate(R, c);
        if (!it) {
            /* Out of memory for the item itself: hand the path straight
             * back for a retry so the run never waits on it forever. */
            ingest_complete_path(R, c.path, INGEST_OUT_RETRY, &c.sig, RETRY_MS);
            c.path = NULL;
        }
        pthread_mutex_lock(&R->mu);
        while (it && R->res_head && R->res_bytes + it->len > RESULT_BYTES_CAP && !R->abort)
            pthread_cond_wait(&R->res_space_cv, &R->mu);
        R->busy--;
        if (it) {
            if (R->res_tail)
                R->res_tail->next = it;
            else
                R->res_head = it;
            R->res_tail = it;
            R->res_bytes += it->len;
        }
        pthread_cond_signal(&R->res_cv);
    }
    R->validators_done++;
    pthread_cond_broadcast(&R->res_cv);
    pthread_mutex_unlock(&R->mu);
    return NULL;
}
