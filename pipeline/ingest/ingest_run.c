/*
 * The ingest stage's run loop: discovery -> validation -> one transaction
 * per batch -> disposition.
 *
 *   main thread      owns the tracker (scans, inotify, stability), hands
 *                    stable files to the work queue, applies outcomes,
 *                    handles signals (signalfd) and the progress line
 *   validators (N)   read a file, check it is still the file that was
 *                    judged stable, probe it (limits, format, whole-data
 *                    validation), sha256 it
 *   writer (1)       gathers results into batches (64 files or 100 ms),
 *                    commits each with one NOTIFY, then moves, deletes or
 *                    keeps the files, rejected ones with a reason file
 *
 * While the writer commits batch k the validators already work on batch
 * k+1, so decoding and the database overlap. Queues are bounded (work by
 * count, results by bytes) so memory stays flat whatever the folder holds.
 *
 * Nothing happens to a file before its batch is committed. If the database
 * is down the writer keeps its batch and retries with backoff (the
 * validators stop when the result queue is full); files stay where they
 * are. A batch that fails because of one file is retried file by file, and
 * the file that still fails alone is rejected as enqueue_failed.
 *
 * Threads share one mutex; at a few hundred files a second it is never
 * contended long enough to matter next to a JPEG decode.
 */
#include "common/fault.h"
#include "pipeline/ingest/ingest_run.h"
#include "pipeline/service/metrics.h"
#include "pipeline/service/service.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#define RESULT_BYTES_CAP (256u << 20) /* bytes of validated files waiting for the writer */
#define BATCH_BYTES_CAP (64u << 20)   /* a batch is flushed early past this many bytes */
#define RETRY_MS 10000                /* a file that could not be read is tried again after */

void ingest_run_opts_default(struct ingest_run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model_key = "default";
    o->use_inotify = 1;
    o->rescan_s = 60;
    o->stable_ms = 2000;
    ingest_limits_default(&o->limits);
    o->after = INGEST_AFTER_MOVE;
    o->db_wait_s = 60;
    o->progress = -1;
    o->batch_max = 64;
    o->batch_ms = 100;
}

struct completion {
    struct completion *next;
    char *path;
    int outcome;
    struct ingest_sig sig;
    int64_t retry_ms;
};

struct run {
    const struct ingest_run_opts *o;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, res_cv, res_space_cv;
    struct ingest_candidate *work;
    size_t work_cap, work_head, work_len;
    int busy;
    int stop_validators, validators_done, nthreads;
    struct ingest_item *res_head, *res_tail;
    size_t res_bytes;
    struct completion *done_head, *done_tail;
    int evfd;
    int abort;       /* shutdown: the writer gives up a batch it cannot commit */
    int fatal;       /* the writer gave up: the run fails */
    struct folio_err fatal_err;
    struct ingest_run_stats st;
    /* the main thread's own (start_threads / stop_threads) */
    pthread_t *threads; /* nthreads validators, started of them running */
    int started;
    pthread_t writer;
    bool writer_started;
};

static int64_t now_ms(void) { return folio_mono_ns() / 1000000; }
static void complete_path(struct run *R, char *path, int outcome, const struct ingest_sig *sig, int64_t retry_ms);

/* ---- validators ---- */

static void set_reject(struct ingest_item *it, const char *reason)
{
    it->status = ITEM_REJECT;
    snprintf(it->reason, sizeof it->reason, "%s", reason);
}

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
        set_reject(it, "symlink");
        return true;
    }
    if (it->cand.sig.kind == INGEST_CAND_SPECIAL) {
        folio_err_set(&it->err, FOLIO_EUNSUPPORTED,
                      "not a regular file (a fifo, socket, device or a link to nothing)");
        set_reject(it, "not_regular_file");
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
        set_reject(it, "unreadable");
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
    set_reject(it, "symlink");
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
        set_reject(it, "too_large");
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
    set_reject(it, it->info.reason[0] ? it->info.reason : "corrupt");
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

static void *validator_main(void *arg)
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
            complete_path(R, c.path, INGEST_OUT_RETRY, &c.sig, RETRY_MS);
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

/* ---- writer ---- */

/* Queues an outcome for the main thread; takes ownership of path. */
static void complete_path(struct run *R, char *path, int outcome, const struct ingest_sig *sig, int64_t retry_ms)
{
    struct completion *c = calloc(1, sizeof *c);
    if (c) {
        c->path = path;
        c->outcome = outcome;
        c->sig = *sig;
        c->retry_ms = retry_ms;
    } else {
        free(path);
    }
    pthread_mutex_lock(&R->mu);
    if (c) {
        if (R->done_tail)
            R->done_tail->next = c;
        else
            R->done_head = c;
        R->done_tail = c;
    }
    pthread_mutex_unlock(&R->mu);
    uint64_t one = 1;
    if (write(R->evfd, &one, sizeof one) < 0) {
        /* The counter cannot overflow at our rates; the main loop also
         * wakes on its own timeout. */
    }
}

static void complete(struct run *R, struct ingest_item *it, int outcome, int64_t retry_ms)
{
    complete_path(R, it->cand.path, outcome, &it->cand.sig, retry_ms);
    it->cand.path = NULL; /* ownership moved to the completion */
}

static void today(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d", &tm);
}

/* Rewritten since it was read? Then what was recorded is an earlier
 * version: the file goes back to the tracker to be taken again. */
static bool changed_since_read(const struct run *R, const struct ingest_item *it)
{
    struct stat st;
    char lq[1100];
    if (lstat(it->cand.path, &st) == 0 && it->cand.sig.kind == INGEST_CAND_FILE && !R->o->follow_symlinks &&
        ((uint64_t)st.st_size != it->cand.sig.size || (uint64_t)st.st_ino != it->cand.sig.ino ||
         (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec != it->cand.sig.mtime_ns)) {
        folio_log(FOLIO_LOG_WARN, "file_changed_after_commit", "path=%s action=reobserve",
                  folio_lq(lq, sizeof lq, it->path_display));
        return true;
    }
    return false;
}

/* An accepted file: into done/<date>/, deleted or kept (--after). Returns
 * the tracker outcome. */
static int dispose_accepted(const struct ingest_run_opts *o, struct ingest_item *it)
{
    const char *rel = it->cand.path + it->cand.rel_off;
    char lq[1100], lq2[700];
    struct folio_err err = {0};
    char *moved = NULL;
    int outcome = INGEST_OUT_GONE;
    if (o->after == INGEST_AFTER_MOVE) {
        char sub[32];
        today(sub + 5, sizeof sub - 5);
        memcpy(sub, "done/", 5);
        if (ingest_move_into(o->dir, sub, it->cand.path, rel, &moved, &err) != 0)
            outcome = INGEST_OUT_KEEP;
    } else if (o->after == INGEST_AFTER_DELETE) {
        if (unlink(it->cand.path) != 0) {
            folio_err_set(&err, FOLIO_EIO, "cannot delete: %s", strerror(errno));
            outcome = INGEST_OUT_KEEP;
        }
    } else {
        outcome = INGEST_OUT_KEEP;
    }
    if (err.code)
        folio_log(FOLIO_LOG_ERROR, "ingest_disposition_failed", "path=%s error=%s",
                  folio_lq(lq, sizeof lq, it->path_display), folio_lq(lq2, sizeof lq2, err.msg));
    else
        folio_log(FOLIO_LOG_DEBUG, "file_ingested", "path=%s document=%lld duplicate=%d",
                  folio_lq(lq, sizeof lq, it->path_display), it->document_id, !it->new_document);
    /* where the file is now, for folio.document_sources.stored_at */
    if (moved) {
        char d[sizeof it->path_display];
        ingest_display(d, sizeof d, moved);
        it->stored_display = strdup(d);
    } else if (outcome == INGEST_OUT_KEEP) {
        it->stored_display = strdup(it->path_display);
    }
    free(moved);
    return outcome;
}

/* A rejected file: into rejected/ with NAME.reason.json beside it. Returns
 * the tracker outcome. */
static int dispose_rejected(const struct ingest_run_opts *o, struct ingest_item *it, const char *host)
{
    const char *rel = it->cand.path + it->cand.rel_off;
    char lq[1100], lq2[700];
    struct folio_err err = {0};
    char *moved = NULL;
    int outcome = INGEST_OUT_GONE;
    folio_log(FOLIO_LOG_WARN, "file_rejected", "path=%s reason=%s message=%s",
              folio_lq(lq, sizeof lq, it->path_display), it->reason, folio_lq(lq2, sizeof lq2, it->err.msg));
    if (ingest_move_into(o->dir, "rejected", it->cand.path, rel, &moved, &err) == 0) {
        char *json = malloc(4096);
        if (json) {
            ingest_reject_json(it, host, json, 4096);
            if (ingest_write_reason(o->dir, moved, json, &err) != 0)
                folio_log(FOLIO_LOG_ERROR, "ingest_reason_file_failed", "path=%s error=%s",
                          folio_lq(lq, sizeof lq, it->path_display), folio_lq(lq2, sizeof lq2, err.msg));
            free(json);
        }
    } else {
        outcome = INGEST_OUT_KEEP;
        folio_log(FOLIO_LOG_ERROR, "ingest_disposition_failed", "path=%s error=%s",
                  folio_lq(lq, sizeof lq, it->path_display), folio_lq(lq2, sizeof lq2, err.msg));
    }
    free(moved);
    return outcome;
}

/* The run's counters and metrics for a file that reached its outcome. */
static void count_outcome(struct run *R, const struct ingest_item *it)
{
    pthread_mutex_lock(&R->mu);
    R->st.files++;
    if (it->status == ITEM_ACCEPT) {
        R->st.accepted++;
        R->st.bytes += it->len;
        if (it->new_document)
            R->st.new_documents++;
        else
            R->st.duplicates++;
    } else {
        R->st.rejected++;
    }
    pthread_mutex_unlock(&R->mu);
    if (it->status == ITEM_ACCEPT)
        metrics_add(R->o->metrics, M_FILES_INGESTED, it->new_document ? "new" : "duplicate", NULL, 1);
    else
        metrics_add(R->o->metrics, M_FILES_REJECTED, it->reason[0] ? it->reason : "unknown", NULL, 1);
}

/* The commit is done: move, delete or keep each file; record outcomes. */
static void dispose(struct run *R, struct ingest_item *it, const char *host)
{
    if (changed_since_read(R, it)) {
        complete(R, it, INGEST_OUT_REOBSERVE, 0);
        return;
    }
    int outcome = it->status == ITEM_ACCEPT ? dispose_accepted(R->o, it) : dispose_rejected(R->o, it, host);
    count_outcome(R, it);
    complete(R, it, outcome, 0);
}

/* Sleeps up to ms, waking early when the run is being aborted. */
static bool nap(struct run *R, int64_t ms)
{
    int64_t end = now_ms() + ms;
    for (;;) {
        pthread_mutex_lock(&R->mu);
        int ab = R->abort;
        pthread_mutex_unlock(&R->mu);
        if (ab)
            return false;
        int64_t left = end - now_ms();
        if (left <= 0)
            return true;
        folio_sleep_ms(left < 100 ? left : 100);
    }
}

/* The writer gives up: the run fails with err. */
static void fail_run(struct run *R, const struct folio_err *err)
{
    pthread_mutex_lock(&R->mu);
    R->fatal = 1;
    R->fatal_err = *err;
    pthread_mutex_unlock(&R->mu);
}

static int commit_batch(struct run *R, struct ingest_db *db, struct ingest_item **items, size_t n,
                        int64_t *outage_since);

enum { COMMIT_DONE = 0, COMMIT_GIVE_UP = -1, COMMIT_AGAIN = 1 };

/* The batch failed because of one of its files (INGEST_DB_ITEM): find it
 * by committing each on its own; the one that still fails alone is
 * rejected as enqueue_failed (COMMIT_AGAIN records that), or, when even
 * its rejection cannot be recorded, left for a later try. */
static int item_failed(struct run *R, struct ingest_db *db, struct ingest_item **items, size_t n,
                       int64_t *outage_since, const struct folio_err *err)
{
    char lq[600], lq2[800];
    if (n > 1) {
        folio_log(FOLIO_LOG_WARN, "ingest_batch_split", "files=%zu error=%s", n,
                  folio_lq(lq2, sizeof lq2, err->msg));
        for (size_t i = 0; i < n; i++)
            if (commit_batch(R, db, &items[i], 1, outage_since) != 0)
                return COMMIT_GIVE_UP;
        return COMMIT_DONE;
    }
    if (items[0]->status == ITEM_ACCEPT) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        free(items[0]->data);
        items[0]->data = NULL;
        items[0]->len = 0;
        folio_err_set(&items[0]->err, FOLIO_EDB, "the database refused this file");
        folio_err_detail(&items[0]->err, "%s", msg);
        set_reject(items[0], "enqueue_failed");
        return COMMIT_AGAIN;
    }
    items[0]->status = ITEM_RETRY;
    folio_log(FOLIO_LOG_ERROR, "ingest_record_failed", "path=%s error=%s",
              folio_lq(lq, sizeof lq, items[0]->path_display), folio_lq(lq2, sizeof lq2, err->msg));
    return COMMIT_DONE;
}

/* A transient failure: drop the connection and wait *backoff (doubling
 * to 30 s) before the same batch is tried again. False when the run
 * gives up instead: aborted, or a one-shot run past --db-wait. */
static bool outage_wait(struct run *R, struct ingest_db *db, size_t n, const struct folio_err *err,
                        int64_t *outage_since, int64_t *backoff)
{
    const struct ingest_run_opts *o = R->o;
    ingest_db_close(db);
    pthread_mutex_lock(&R->mu);
    R->st.db_retries++;
    pthread_mutex_unlock(&R->mu);
    if (!*outage_since)
        *outage_since = now_ms();
    double down_s = (double)(now_ms() - *outage_since) / 1000.0;
    char lq[600], lq2[800], lq3[800];
    folio_log(FOLIO_LOG_WARN, "database_unavailable",
              "error=%s detail=%s hint=%s waiting_files=%zu retry_in_ms=%lld down_s=%.1f",
              folio_lq(lq2, sizeof lq2, err->msg), folio_lq(lq3, sizeof lq3, err->detail),
              folio_lq(lq, sizeof lq, err->hint[0] ? err->hint : "files stay where they are until it is back"),
              n, (long long)*backoff, down_s);
    if (!o->watch && down_s >= o->db_wait_s) {
        struct folio_err fe = *err;
        folio_err_prefix(&fe, "database unavailable for %.0f s: ", down_s);
        folio_err_hint(&fe, "files were left where they are; run again once the database is reachable");
        fail_run(R, &fe);
        return false;
    }
    if (!nap(R, *backoff))
        return false;
    *backoff = *backoff * 2 > 30000 ? 30000 : *backoff * 2;
    return true;
}

/* Commits items[0..n): 0 when committed, -1 when given up (abort or the
 * one-shot database wait ran out; the items are then left untouched). */
static int commit_batch(struct run *R, struct ingest_db *db, struct ingest_item **items, size_t n,
                        int64_t *outage_since)
{
    const struct ingest_run_opts *o = R->o;
    int64_t backoff = 500;
    for (;;) {
        struct folio_err err = {0};
        int kind = INGEST_DB_TRANSIENT;
        if (!db->c) {
            int orc = ingest_db_open(db, o->conninfo, &err);
            if (orc == 0) {
                if (*outage_since) {
                    folio_log(FOLIO_LOG_INFO, "database_available", "after_s=%.1f",
                              (double)(now_ms() - *outage_since) / 1000.0);
                    *outage_since = 0;
                }
                continue;
            }
            if (orc == FOLIO_ESTATE && !o->watch) {
                /* Reachable but not migrated: waiting will not fix that. */
                fail_run(R, &err);
                return -1;
            }
        } else {
            int64_t t0 = now_ms();
            kind = ingest_db_commit(db, items, n, &err);
            if (kind == INGEST_DB_OK) {
                pthread_mutex_lock(&R->mu);
                R->st.batches++;
                pthread_mutex_unlock(&R->mu);
                metrics_add(o->metrics, M_INGEST_BATCHES, NULL, NULL, 1);
                folio_log(FOLIO_LOG_DEBUG, "ingest_batch", "files=%zu ms=%lld", n,
                          (long long)(now_ms() - t0));
                return 0;
            }
        }
        if (kind == INGEST_DB_ITEM) {
            int r = item_failed(R, db, items, n, outage_since, &err);
            if (r == COMMIT_AGAIN)
                continue;
            return r;
        }
        if (!outage_wait(R, db, n, &err, outage_since, &backoff))
            return -1;
    }
}

#ifdef FOLIO_FAULT_INJECTION
/* FOLIO_FAULT=ingest_crash_after_commit:N kills the process right after its
 * N-th committed batch, before any of that batch's files is moved: the
 * crash window that the sighting dedupe in ingest_db.c exists for. */
static long fault_crash_batch(void)
{
    return folio_fault_num(FOLIO_FAULT_ingest_crash_after_commit);
}
#endif

/* Under R->mu: takes validated files off the result queue into batch
 * until it is full (--batch-max files or BATCH_BYTES_CAP bytes), the
 * validators are idle, or --batch-ms passed since its first file. Files
 * with nothing to record (and every file once the writer gave up) go
 * straight back to the tracker. Returns false when the validators are
 * done and nothing is left: the writer ends. */
static bool gather_batch(struct run *R, struct ingest_item **batch, size_t cap, bool give_up, size_t *nbatch)
{
    const struct ingest_run_opts *o = R->o;
    size_t nb = 0, bytes = 0;
    int64_t first = 0;
    for (;;) {
        while (R->res_head && nb < cap && bytes < BATCH_BYTES_CAP) {
            struct ingest_item *it = R->res_head;
            R->res_head = it->next;
            if (!R->res_head)
                R->res_tail = NULL;
            it->next = NULL;
            R->res_bytes -= it->len;
            if (it->status == ITEM_REOBSERVE || it->status == ITEM_RETRY || give_up) {
                /* Nothing to record: straight back to the tracker. */
                pthread_mutex_unlock(&R->mu);
                complete(R, it, it->status == ITEM_REOBSERVE ? INGEST_OUT_REOBSERVE : INGEST_OUT_RETRY,
                         RETRY_MS);
                ingest_item_free(it);
                pthread_mutex_lock(&R->mu);
                continue;
            }
            batch[nb++] = it;
            bytes += it->len;
            if (nb == 1)
                first = now_ms();
        }
        pthread_cond_broadcast(&R->res_space_cv);
        bool all_done = R->validators_done == R->nthreads && !R->res_head;
        bool idle = R->work_len == 0 && R->busy == 0 && !R->res_head;
        if (nb == cap || bytes >= BATCH_BYTES_CAP)
            break;
        if (nb > 0 && (idle || now_ms() - first >= o->batch_ms))
            break;
        if (nb == 0 && all_done)
            return false;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wait = nb > 0 ? first + o->batch_ms - now_ms() : 200;
        if (wait < 1)
            wait = 1;
        ts.tv_sec += wait / 1000;
        ts.tv_nsec += (wait % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&R->res_cv, &R->mu, &ts);
    }
    *nbatch = nb;
    return true;
}

static void *writer_main(void *arg)
{
    struct run *R = arg;
    const struct ingest_run_opts *o = R->o;
    struct ingest_db db = {.c = NULL, .model_key = o->model_key, .after = (int)o->after, .pooler = o->pooler,
                           .blobs = o->blobs};
    size_t cap = (size_t)(o->batch_max > 0 ? o->batch_max : 64);
    struct ingest_item **batch = calloc(cap, sizeof *batch);
    int64_t outage_since = 0;
    bool give_up = false;
#ifdef FOLIO_FAULT_INJECTION
    long crash_at = fault_crash_batch();
    uint64_t committed = 0;
#endif
    if (!batch) {
        pthread_mutex_lock(&R->mu);
        R->fatal = 1;
        folio_err_set(&R->fatal_err, FOLIO_ENOMEM, "out of memory");
        pthread_mutex_unlock(&R->mu);
        give_up = true;
    }
    /* Connect up front so that "database down" shows at start, not at the
     * first file; failure here is fine, the first batch retries. */
    if (batch) {
        struct folio_err err = {0};
        if (ingest_db_open(&db, o->conninfo, &err) != 0) {
            char lq[800];
            char lq2[800];
            folio_log(FOLIO_LOG_WARN, "database_unavailable", "error=%s detail=%s note=%s",
                      folio_lq(lq, sizeof lq, err.msg), folio_lq(lq2, sizeof lq2, err.detail),
                      "\"files stay where they are; retrying with backoff\"");
        }
    }
    pthread_mutex_lock(&R->mu);
    for (;;) {
        size_t nb = 0;
        if (!gather_batch(R, batch, cap, give_up, &nb))
            break;
        pthread_mutex_unlock(&R->mu);
        int rc = give_up ? -1 : commit_batch(R, &db, batch, nb, &outage_since);
#ifdef FOLIO_FAULT_INJECTION
        if (rc == 0 && crash_at > 0 && ++committed == (uint64_t)crash_at)
            raise(SIGKILL);
#endif
        for (size_t i = 0; i < nb; i++) {
            if (rc != 0 || batch[i]->status == ITEM_RETRY)
                complete(R, batch[i], INGEST_OUT_RETRY, RETRY_MS);
            else
                dispose(R, batch[i], db.host);
        }
        if (rc == 0) {
            struct folio_err serr = {0};
            if (ingest_db_record_stored(&db, batch, nb, &serr) != 0) {
                char lq[800];
                folio_log(FOLIO_LOG_WARN, "ingest_stored_at_failed", "error=%s note=%s",
                          folio_lq(lq, sizeof lq, serr.msg),
                          "\"the files are in place; folio show/export give their inbox path\"");
            }
        }
        for (size_t i = 0; i < nb; i++)
            ingest_item_free(batch[i]);
        if (rc != 0)
            give_up = true; /* drain the rest without touching anything */
        pthread_mutex_lock(&R->mu);
    }
    pthread_mutex_unlock(&R->mu);
    ingest_db_close(&db);
    free(batch);
    return NULL;
}

/* ---- main thread ---- */

static bool is_network_fs(const char *dir)
{
    struct statfs sf;
    if (statfs(dir, &sf) != 0)
        return false;
    switch ((unsigned long)sf.f_type) {
    case 0x6969UL:     /* NFS */
    case 0xFF534D42UL: /* CIFS */
    case 0xFE534D42UL: /* SMB2 */
    case 0x517BUL:     /* SMB */
    case 0x65735546UL: /* FUSE */
    case 0x01021997UL: /* 9P */
        return true;
    default:
        return false;
    }
}

static void progress_line(const struct run *R, int64_t t0, bool final)
{
    double s = (double)(now_ms() - t0) / 1000.0;
    fprintf(stderr, "\r\033[Kfolio ingest: %llu files, %llu new, %llu duplicate, %llu rejected, %.1f files/s%s",
            (unsigned long long)R->st.files, (unsigned long long)R->st.new_documents,
            (unsigned long long)R->st.duplicates, (unsigned long long)R->st.rejected,
            s > 0 ? (double)R->st.files / s : 0.0, final ? "\n" : "");
    fflush(stderr);
}

static void drain_completions(struct run *R, struct ingest_tracker *t)
{
    uint64_t v;
    if (read(R->evfd, &v, sizeof v) < 0) {
        /* EAGAIN: nothing signalled; the list is checked anyway. */
    }
    pthread_mutex_lock(&R->mu);
    struct completion *c = R->done_head;
    R->done_head = R->done_tail = NULL;
    pthread_mutex_unlock(&R->mu);
    while (c) {
        struct completion *nx = c->next;
        if (c->path)
            ingest_tracker_done(t, c->path, (enum ingest_outcome)c->outcome, &c->sig, c->retry_ms);
        free(c->path);
        free(c);
        c = nx;
    }
}

/* Sources record absolute paths: the same name in two folders, or a run
 * from another working directory, must not look alike. One ingester per
 * folder: two would race for the same files. The lock is on the folder
 * itself, so nothing is created in it. */
static int open_folder(const char *dir, char **absdir, int *lockfd, struct folio_err *err)
{
    char d[300];
    *absdir = realpath(dir, NULL);
    if (!*absdir) {
        ingest_display(d, sizeof d, dir);
        folio_err_set(err, FOLIO_EINVAL, "ingest folder %s: %s", d, strerror(errno));
        return FOLIO_EINVAL;
    }
    *lockfd = open(*absdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*lockfd >= 0 && flock(*lockfd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    int e = errno;
    ingest_display(d, sizeof d, *absdir);
    if (*lockfd >= 0)
        close(*lockfd);
    *lockfd = -1;
    free(*absdir);
    *absdir = NULL;
    if (e == EWOULDBLOCK) {
        folio_err_set(err, FOLIO_ESTATE, "another folio ingest is already taking files from %s", d);
        folio_err_hint(err, "run one folio ingest per folder; stop the other one first");
        return FOLIO_ESTATE;
    }
    return folio_err_set(err, FOLIO_EIO, "cannot open the ingest folder %s: %s", d, strerror(e));
}

/* The scanner: the tracker (first scan done) with inotify in watch mode;
 * a network file system gets a warning that rescans carry the load. */
static int open_tracker(const struct ingest_run_opts *o, struct ingest_tracker **t, int *inotify,
                        struct folio_err *err)
{
    struct ingest_scan_opts so = {.dir = o->dir,
                                  .recursive = o->recursive,
                                  .follow_symlinks = o->follow_symlinks,
                                  .use_inotify = o->watch && o->use_inotify,
                                  .stable_ms = o->stable_ms};
    *inotify = so.use_inotify;
    int rc = ingest_tracker_open(&so, t, err);
    if (rc)
        return rc;
    char lq[600];
    if (o->watch && so.use_inotify && is_network_fs(o->dir))
        folio_log(FOLIO_LOG_WARN, "ingest_network_fs",
                  "dir=%s note=%s rescan_s=%d", folio_lq(lq, sizeof lq, o->dir),
                  folio_lq(lq + 300, 300, "network file system: inotify misses other machines' writes; "
                                          "relying on rescans"),
                  o->rescan_s);
    return ingest_tracker_rescan(*t, err);
}

/* Asks the validators and then the writer to finish, and joins them;
 * abort: the writer also gives up a batch it cannot commit. */
static void stop_threads(struct run *R, bool abort)
{
    pthread_mutex_lock(&R->mu);
    R->stop_validators = 1;
    if (abort)
        R->abort = 1;
    pthread_cond_broadcast(&R->work_cv);
    pthread_mutex_unlock(&R->mu);
    for (int i = 0; i < R->started; i++)
        pthread_join(R->threads[i], NULL);
    R->started = 0;
    if (R->writer_started)
        pthread_join(R->writer, NULL);
    R->writer_started = false;
}

/* The validators (--jobs, one per CPU by default) and the writer, with
 * the work queue they share. */
static int start_threads(struct run *R, struct folio_err *err)
{
    const struct ingest_run_opts *o = R->o;
    R->nthreads = o->jobs > 0 ? o->jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (R->nthreads < 1)
        R->nthreads = 1;
    R->work_cap = (size_t)R->nthreads * 4 + 8;
    R->work = calloc(R->work_cap, sizeof *R->work);
    R->threads = calloc((size_t)R->nthreads, sizeof *R->threads);
    if (!R->work || !R->threads)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    pthread_mutex_init(&R->mu, NULL);
    pthread_cond_init(&R->work_cv, NULL);
    pthread_cond_init(&R->res_cv, NULL);
    pthread_cond_init(&R->res_space_cv, NULL);
    for (; R->started < R->nthreads; R->started++)
        if (pthread_create(&R->threads[R->started], NULL, validator_main, R) != 0)
            break;
    if (R->started == 0 || pthread_create(&R->writer, NULL, writer_main, R) != 0) {
        int rc = folio_err_set(err, FOLIO_EIO, "cannot start threads: %s", strerror(errno));
        stop_threads(R, false);
        return rc;
    }
    R->writer_started = true;
    return 0;
}

/* The main thread's loop state. */
struct main_loop {
    struct run *R;
    struct ingest_tracker *t;
    int sfd;
    bool inotify;          /* watch mode with inotify (else rescans alone) */
    bool show;             /* the progress line on stderr */
    bool stopping;         /* a signal or a fatal writer error: drain, then stop */
    int64_t t0, next_rescan, last_progress, last_report;
    struct ingest_run_stats reported; /* as of the last ingest_progress line */
    struct ingest_candidate *ready;   /* work_cap entries */
    struct service_watchdog wd;
};

/* Ripe files into the work queue, as much as it has space for. Returns
 * how many were queued. */
static size_t feed_work(struct main_loop *L, size_t space)
{
    struct run *R = L->R;
    size_t n = space ? ingest_tracker_take_ready(L->t, L->ready, space) : 0;
    if (n) {
        pthread_mutex_lock(&R->mu);
        for (size_t i = 0; i < n; i++) {
            R->work[(R->work_head + R->work_len) % R->work_cap] = L->ready[i];
            R->work_len++;
        }
        pthread_cond_broadcast(&R->work_cv);
        pthread_mutex_unlock(&R->mu);
    }
    return n;
}

/* How long poll may sleep: until the tracker's next ripe file or the
 * next rescan, at most a second (a quarter with the progress line).
 * With the work queue full, ripe files must wait for a validator; the
 * validator that frees a slot wakes us through the eventfd. */
static int loop_timeout(const struct main_loop *L, bool queue_full)
{
    const struct ingest_run_opts *o = L->R->o;
    int64_t timeout = L->stopping ? 100 : queue_full ? -1 : ingest_tracker_next_ms(L->t);
    if (o->watch) {
        int64_t to_rescan = L->next_rescan - now_ms();
        if (to_rescan < 0)
            to_rescan = 0;
        if (timeout < 0 || to_rescan < timeout)
            timeout = to_rescan;
    }
    if (timeout < 0 || timeout > 1000)
        timeout = 1000;
    if (L->show && timeout > 250)
        timeout = 250;
    return (int)timeout;
}

/* SIGINT/SIGTERM: stop taking files. Files not yet picked up stay where
 * they are, and the writer does not wait out a database outage. */
static void on_signal(struct main_loop *L)
{
    struct run *R = L->R;
    struct signalfd_siginfo si;
    while (read(L->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (!L->stopping)
            service_stopping();
        if (!L->stopping)
            folio_log(FOLIO_LOG_INFO, "ingest_stopping", "signal=%u in_flight=%zu", si.ssi_signo,
                      ingest_tracker_in_flight(L->t));
        L->stopping = true;
    }
    if (!L->stopping)
        return;
    pthread_mutex_lock(&R->mu);
    while (R->work_len) {
        struct ingest_candidate *c = &R->work[R->work_head];
        ingest_tracker_done(L->t, c->path, INGEST_OUT_RETRY, NULL, RETRY_MS);
        ingest_candidate_free(c);
        R->work_head = (R->work_head + 1) % R->work_cap;
        R->work_len--;
    }
    R->abort = 1; /* do not wait out a database outage: files stay put */
    pthread_cond_broadcast(&R->res_space_cv);
    pthread_mutex_unlock(&R->mu);
}

/* inotify events; an overflowed queue costs a rescan. */
static void on_fs_events(struct main_loop *L)
{
    char lq[600];
    int need = 0;
    struct folio_err ierr = {0};
    if (ingest_tracker_handle_events(L->t, &need, &ierr) != 0)
        folio_log(FOLIO_LOG_ERROR, "ingest_events_failed", "error=%s", folio_lq(lq, sizeof lq, ierr.msg));
    if (need) {
        folio_log(FOLIO_LOG_WARN, "ingest_events_overflow", "action=rescan");
        if (ingest_tracker_rescan(L->t, &ierr) != 0)
            folio_log(FOLIO_LOG_ERROR, "ingest_rescan_failed", "error=%s", folio_lq(lq, sizeof lq, ierr.msg));
    }
}

/* The progress line (a TTY or --progress) every 250 ms, and in watch mode
 * once a minute, when it did anything, a log line of what it did, so a
 * log reader sees it working without per-file lines. */
static void report(struct main_loop *L)
{
    struct run *R = L->R;
    if (L->show && now_ms() - L->last_progress >= 250) {
        pthread_mutex_lock(&R->mu);
        progress_line(R, L->t0, false);
        pthread_mutex_unlock(&R->mu);
        L->last_progress = now_ms();
    }
    if (!R->o->watch || now_ms() - L->last_report < 60000)
        return;
    pthread_mutex_lock(&R->mu);
    struct ingest_run_stats cur = R->st;
    pthread_mutex_unlock(&R->mu);
    const struct ingest_run_stats *was = &L->reported;
    if (cur.files != was->files)
        folio_log(FOLIO_LOG_INFO, "ingest_progress",
                  "files=%llu new_documents=%llu duplicates=%llu rejected=%llu waiting=%zu in_flight=%zu",
                  (unsigned long long)(cur.files - was->files),
                  (unsigned long long)(cur.new_documents - was->new_documents),
                  (unsigned long long)(cur.duplicates - was->duplicates),
                  (unsigned long long)(cur.rejected - was->rejected), ingest_tracker_waiting(L->t),
                  ingest_tracker_in_flight(L->t));
    L->reported = cur;
    L->last_report = now_ms();
}

/* The main thread's loop: applies outcomes, rescans when due, feeds the
 * validators, sleeps in poll (signals, wake-ups, inotify) and reports,
 * until the folder is drained (one-shot) or a signal has been handled
 * and nothing is in flight. Returns the writer's fatal error, if any. */
static int main_loop(struct main_loop *L, struct folio_err *err)
{
    struct run *R = L->R;
    const struct ingest_run_opts *o = R->o;
    int rc = 0;
    char lq[600];
    for (;;) {
        size_t n = 0;
        service_watchdog_tick(&L->wd);
        drain_completions(R, L->t);
        pthread_mutex_lock(&R->mu);
        int fatal = R->fatal;
        size_t space = R->work_cap - R->work_len;
        pthread_mutex_unlock(&R->mu);
        if (fatal && !L->stopping) {
            L->stopping = true;
            rc = R->fatal_err.code ? R->fatal_err.code : FOLIO_EDB;
            if (err)
                *err = R->fatal_err;
        }
        if (L->stopping) {
            if (ingest_tracker_in_flight(L->t) == 0)
                break;
        } else {
            if (o->watch && now_ms() >= L->next_rescan) {
                struct folio_err serr = {0};
                if (ingest_tracker_rescan(L->t, &serr) != 0)
                    folio_log(FOLIO_LOG_ERROR, "ingest_rescan_failed", "error=%s",
                              folio_lq(lq, sizeof lq, serr.msg));
                L->next_rescan = now_ms() + (int64_t)o->rescan_s * 1000;
            }
            n = feed_work(L, space);
            if (!o->watch && ingest_tracker_waiting(L->t) == 0 && ingest_tracker_in_flight(L->t) == 0)
                break;
        }
        struct pollfd pf[3] = {{.fd = L->sfd, .events = POLLIN},
                               {.fd = R->evfd, .events = POLLIN},
                               {.fd = ingest_tracker_fd(L->t), .events = POLLIN}};
        int np = poll(pf, ingest_tracker_fd(L->t) >= 0 ? 3 : 2, loop_timeout(L, space == n));
        if (np > 0 && (pf[0].revents & POLLIN))
            on_signal(L);
        if (np > 0 && ingest_tracker_fd(L->t) >= 0 && (pf[2].revents & POLLIN))
            on_fs_events(L);
        report(L);
    }
    return rc;
}

/* Frees what the run still holds after its threads are gone: candidates
 * never handed out, outcomes never applied, the queues. */
static void free_run(struct run *R)
{
    if (R->threads) {
        pthread_mutex_destroy(&R->mu);
        pthread_cond_destroy(&R->work_cv);
        pthread_cond_destroy(&R->res_cv);
        pthread_cond_destroy(&R->res_space_cv);
    }
    if (R->work) {
        while (R->work_len) {
            ingest_candidate_free(&R->work[R->work_head]);
            R->work_head = (R->work_head + 1) % R->work_cap;
            R->work_len--;
        }
    }
    while (R->done_head) {
        struct completion *c = R->done_head;
        R->done_head = c->next;
        free(c->path);
        free(c);
    }
    free(R->work);
    free(R->threads);
}

static const char *after_name(enum ingest_after a)
{
    return a == INGEST_AFTER_MOVE ? "move" : a == INGEST_AFTER_DELETE ? "delete" : "keep";
}

/* Signals arrive through a signalfd, so no handler and no global flag:
 * block them here, before any thread exists, so every thread inherits
 * the mask (the caller's is kept in oldmask). The eventfd wakes the main
 * thread for outcomes and freed work slots. */
static int open_fds(struct run *R, int *sfd, sigset_t *oldmask, struct folio_err *err)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &mask, oldmask);
    *sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    R->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (*sfd < 0 || R->evfd < 0)
        return folio_err_set(err, FOLIO_EIO, "cannot create signal/event descriptors: %s", strerror(errno));
    return 0;
}

/* With the tracker open and the threads running: says so, runs the main
 * loop, then lets the validators and the writer finish and applies their
 * last outcomes. */
static int run_started(struct run *R, struct ingest_tracker *t, int sfd, bool inotify, int64_t t0,
                       struct folio_err *err)
{
    const struct ingest_run_opts *o = R->o;
    char lq[600];
    folio_log(FOLIO_LOG_INFO, "ingest_started", "dir=%s mode=%s threads=%d stable_ms=%d after=%s model_key=%s",
              folio_lq(lq, sizeof lq, o->dir), o->watch ? (inotify ? "watch" : "watch-rescan-only") : "one-shot",
              R->nthreads, o->stable_ms, after_name(o->after), folio_lq(lq + 400, 200, o->model_key));
    struct main_loop L = {.R = R, .t = t, .sfd = sfd, .inotify = inotify, .t0 = t0};
    service_watchdog_init(&L.wd);
    service_ready(o->watch ? "watching" : "one-shot");
    metrics_set_ready(o->metrics, 1, "");
    L.show = o->progress > 0 || (o->progress < 0 && isatty(STDERR_FILENO));
    L.next_rescan = now_ms() + (int64_t)o->rescan_s * 1000;
    L.last_report = now_ms();
    int rc = 0;
    L.ready = calloc(R->work_cap, sizeof *L.ready);
    if (!L.ready) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory");
        L.stopping = true;
    }
    int lrc = main_loop(&L, err);
    if (lrc)
        rc = lrc;
    free(L.ready);
    stop_threads(R, false);
    drain_completions(R, t);
    if (L.show)
        progress_line(R, t0, true);
    return rc;
}

int ingest_run(const struct ingest_run_opts *oin, struct ingest_run_stats *stats, struct folio_err *err)
{
    memset(stats, 0, sizeof *stats);
    char *absdir = NULL;
    int lockfd = -1;
    int rc = open_folder(oin->dir, &absdir, &lockfd, err);
    if (rc)
        return rc;
    struct ingest_run_opts oo = *oin;
    oo.dir = absdir;
    struct run R;
    memset(&R, 0, sizeof R);
    R.o = &oo;
    R.evfd = -1;
    int sfd = -1, inotify = 0;
    struct ingest_tracker *t = NULL;
    int64_t t0 = now_ms();
    sigset_t oldmask;
    rc = open_fds(&R, &sfd, &oldmask, err);
    if (!rc)
        rc = open_tracker(&oo, &t, &inotify, err);
    if (!rc)
        rc = start_threads(&R, err);
    if (!rc)
        rc = run_started(&R, t, sfd, inotify, t0, err);
    if (R.writer_started || R.started)
        stop_threads(&R, true);
    R.st.seconds = (double)(now_ms() - t0) / 1000.0;
    *stats = R.st;
    free_run(&R);
    ingest_tracker_close(t);
    if (R.evfd >= 0)
        close(R.evfd);
    if (sfd >= 0)
        close(sfd);
    /* Signals that arrived while blocked are discarded with the signalfd
     * read above; restore the caller's mask. */
    pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
    close(lockfd); /* releases the folder lock */
    free(absdir);
    return rc;
}
