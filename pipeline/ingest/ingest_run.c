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
 *
 * This file is the main thread; the validators are ingest_validate.c, the
 * writer and the dispositions ingest_write.c, the outcome queue between
 * them ingest_handoff.c, and the state they share ingest_internal.h.
 */
#include "pipeline/ingest/ingest_internal.h"
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
    double s = (double)(ingest_now_ms() - t0) / 1000.0;
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
        if (pthread_create(&R->threads[R->started], NULL, ingest_validator_main, R) != 0)
            break;
    if (R->started == 0 || pthread_create(&R->writer, NULL, ingest_writer_main, R) != 0) {
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
        int64_t to_rescan = L->next_rescan - ingest_now_ms();
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
    if (L->show && ingest_now_ms() - L->last_progress >= 250) {
        pthread_mutex_lock(&R->mu);
        progress_line(R, L->t0, false);
        pthread_mutex_unlock(&R->mu);
        L->last_progress = ingest_now_ms();
    }
    if (!R->o->watch || ingest_now_ms() - L->last_report < 60000)
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
    L->last_report = ingest_now_ms();
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
            if (o->watch && ingest_now_ms() >= L->next_rescan) {
                struct folio_err serr = {0};
                if (ingest_tracker_rescan(L->t, &serr) != 0)
                    folio_log(FOLIO_LOG_ERROR, "ingest_rescan_failed", "error=%s",
                              folio_lq(lq, sizeof lq, serr.msg));
                L->next_rescan = ingest_now_ms() + (int64_t)o->rescan_s * 1000;
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
    L.next_rescan = ingest_now_ms() + (int64_t)o->rescan_s * 1000;
    L.last_report = ingest_now_ms();
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
    int64_t t0 = ingest_now_ms();
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
    R.st.seconds = (double)(ingest_now_ms() - t0) / 1000.0;
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
