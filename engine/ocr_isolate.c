/*
 * Bounded, cancellable OCR: each engine's pages run in its own folio-ocr
 * helper process (engine/ocrhelper/folio_ocr.c), which the calling thread
 * kills when a page's deadline has passed or its cancel flag is set.
 *
 * Why a process: Tesseract polls its monitor (deadline, cancel callback)
 * only between words of the recognition pass. Layout analysis before it
 * and text extraction after it do not poll at all, and on hostile pages
 * (tiny text, noise) either can run for minutes: a page of 9-pixel text
 * held a worker for 7.5 minutes under a 60 s deadline and ignored SIGTERM,
 * while the heartbeat kept its lease alive. A thread cannot be stopped
 * safely in the middle of Tesseract; a process can.
 *
 * Why a separate executable started with posix_spawn, not a fork of the
 * worker: the worker is multithreaded, and a forked child of a threaded
 * process inherits every lock another thread held at that moment (malloc,
 * the sanitizer allocator, Tesseract's and Leptonica's globals) with no
 * thread left to release it. The forked design ran Tesseract in such a
 * child and hung one ASan run in five for 77 s. posix_spawn execs at once,
 * and the helper starts single-threaded from main.
 *
 * Cost: the helper initialises Tesseract once and serves every page of its
 * thread, so a page costs one copy of its pixels into a memfd the helper
 * maps, two small socket messages and the text back (`folio bench ocr`,
 * BENCHMARKS.md). After a kill or crash the helper is started again at
 * once, so its Init (0.2-0.35 s) overlaps the caller's next decode.
 *
 * What else it buys: a Tesseract crash on a hostile page ends the helper,
 * not the worker; the helper runs under an address-space limit and the
 * seccomp filter folio-pdf uses; Tesseract's stderr chatter ("Detected 12
 * diacritics") lands in a memfd and is logged as logfmt instead of raw
 * lines in the worker's log.
 */
#include "engine/ocr_internal.h"
#include "engine/ocr_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FOLIO_OCR_HELPER_BUILD
#define FOLIO_OCR_HELPER_BUILD "folio-ocr"
#endif

#define POLL_MS 50
#define MAX_LOGGED_LINES 20
#define STDERR_KEPT 65536
#define HELLO_MS 120000       /* Init of many languages from a slow disk */
#define PIX_KEEP (32u << 20)  /* pixel memfd kept between pages up to this size */

struct ocr_engine {
    struct ocr_opts opts;
    struct ocr_tess *tess; /* without isolation */
    /* with isolation: the helper */
    char helper[PATH_MAX];
    struct ocr_setup setup;
    pid_t pid;          /* 0 = none running */
    int sock;           /* our end of its socketpair */
    int errfd, pixfd;   /* its stderr, its page pixels (memfds, kept across restarts) */
    int hello_pending;  /* started, not yet known to be ready */
    size_t pix_size;
};

/* What the helper printed, last bytes first kept, as one line (details). */
static void helper_said(struct ocr_engine *e, char *buf, size_t n) { folio_fd_tail_line(e->errfd, buf, n); }

/* Logs what Tesseract printed about a page as logfmt and empties the
 * memfd. The helper is idle (it answered, or is dead), so nothing writes
 * meanwhile; it shares this descriptor's offset, which goes back to 0. */
static void log_helper_stderr(struct ocr_engine *e)
{
    off_t end = lseek(e->errfd, 0, SEEK_END);
    if (end > 0) {
        size_t n = end > STDERR_KEPT ? STDERR_KEPT : (size_t)end;
        char *buf = malloc(n);
        ssize_t r = buf ? pread(e->errfd, buf, n, 0) : -1;
        int logged = 0;
        for (ssize_t i = 0; i < r && logged < MAX_LOGGED_LINES;) {
            const char *line = buf + i;
            const char *eol = memchr(line, '\n', (size_t)(r - i));
            size_t len = eol ? (size_t)(eol - line) : (size_t)(r - i);
            i += (ssize_t)len + 1;
            if (!len)
                continue;
            char q[600];
            folio_log(FOLIO_LOG_DEBUG, "tesseract_message", "text=%s", folio_lq_bytes(q, sizeof q, line, len));
            logged++;
        }
        free(buf);
    }
    if (ftruncate(e->errfd, 0) == 0)
        lseek(e->errfd, 0, SEEK_SET);
}

/* Kills (if asked) and reaps the helper; describes how it ended. */
static void reap(struct ocr_engine *e, int kill_it, int *status, char *how, size_t n)
{
    *status = 0;
    how[0] = 0;
    if (e->sock >= 0) {
        close(e->sock);
        e->sock = -1;
    }
    if (e->pid <= 0)
        return;
    if (kill_it)
        kill(e->pid, SIGKILL);
    pid_t r;
    do
        r = waitpid(e->pid, status, 0);
    while (r < 0 && errno == EINTR);
    e->pid = 0;
    e->hello_pending = 0;
    if (r < 0)
        snprintf(how, n, "cannot be waited for (%s)", strerror(errno));
    else if (WIFSIGNALED(*status))
        snprintf(how, n, "was killed by signal %d (%s)", WTERMSIG(*status), strsignal(WTERMSIG(*status)));
    else
        snprintf(how, n, "exited with status %d", WEXITSTATUS(*status));
}

/* Starts the helper and sends its setup; its hello is read later
 * (await_hello), so its Tesseract Init overlaps the caller's work. */
static int spawn_helper(struct ocr_engine *e, struct folio_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return folio_err_set(err, FOLIO_EIO, "cannot create a socket for the OCR helper: %s", strerror(errno));
    if (ftruncate(e->errfd, 0) == 0)
        lseek(e->errfd, 0, SEEK_SET);
    /* Tesseract's OpenMP must see OMP_THREAD_LIMIT=1 when it loads (ocr.h):
     * the helper gets it in its environment unless the user chose one. The
     * rest of the worker's environment (FOLIO_DB) stays here. */
    static char omp[] = "OMP_THREAD_LIMIT=1";
    char *envp[48];
    folio_helper_environ(envp, sizeof envp / sizeof envp[0], omp);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, e->errfd, 2);
    posix_spawn_file_actions_adddup2(&fa, e->pixfd, 3);
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    char ppid[24];
    snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
    char *argv[] = {"folio-ocr", "serve", ppid, NULL};
    pid_t pid = 0;
    int se = posix_spawn(&pid, e->helper, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (se != 0) {
        close(sv[0]);
        folio_err_set(err, FOLIO_EIO, "cannot start the OCR helper %s: %s", e->helper, strerror(se));
        folio_err_hint(err, "the worker is out of processes or memory (ulimit -u, cgroup pids.max), or the helper is not a program");
        return FOLIO_EIO;
    }
    e->pid = pid;
    e->sock = sv[0];
    e->hello_pending = 1;
    /* Small enough for the socket buffer: never blocks. */
    if (send(e->sock, &e->setup, sizeof e->setup, MSG_NOSIGNAL) != (ssize_t)sizeof e->setup) {
        int status;
        char how[96];
        reap(e, 1, &status, how, sizeof how);
        /* the same words as an end seen while waiting for its hello: which
         * of the two notices a helper that exits at once is a race */
        folio_err_set(err, FOLIO_EIO, "the OCR helper %s ended during its start (it %s; it took no setup)",
                      e->helper, how);
        folio_err_hint(err, "check that %s is the folio-ocr built with this folio (FOLIO_OCR_HELPER)", e->helper);
        return FOLIO_EIO;
    }
    return 0;
}

enum wait_end { WAIT_DONE, WAIT_EOF, WAIT_DEADLINE, WAIT_CANCEL };

/* Reads exactly n bytes before deadline (monotonic ms; <= 0: none) unless
 * *cancel is raised. */
static enum wait_end recv_until(int fd, void *buf, size_t n, double deadline, const _Atomic int *cancel)
{
    uint8_t *b = buf;
    while (n) {
        if (cancel && atomic_load(cancel))
            return WAIT_CANCEL;
        if (deadline > 0 && folio_mono_ms() > deadline)
            return WAIT_DEADLINE;
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, POLL_MS);
        if (pr < 0 && errno != EINTR)
            return WAIT_EOF;
        if (pr <= 0)
            continue;
        ssize_t r = recv(fd, b, n, MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            return WAIT_EOF;
        b += r;
        n -= (size_t)r;
    }
    return WAIT_DONE;
}

/* The helper ended while we waited for `what`: name how, with what it said. */
static int helper_ended(struct ocr_engine *e, const char *what, const struct ocr_image *img, struct folio_err *err)
{
    int status;
    char how[96], said[400];
    reap(e, 1, &status, how, sizeof how);
    helper_said(e, said, sizeof said);
    /* std::bad_alloc under the address-space limit; ASan's wording */
    int oom = strstr(said, "bad_alloc") || strstr(said, "out of memory") || strstr(said, "allocation-size-too-big") ||
              strstr(said, "Cannot allocate");
    int rc;
    if (img && oom)
        rc = folio_err_set(err, FOLIO_ELIMIT, "Tesseract ran out of memory on a %dx%d page (the OCR helper %s)",
                           img->width, img->height, how);
    else if (img)
        rc = folio_err_set(err, FOLIO_EFORMAT, "Tesseract crashed on a %dx%d page (the OCR helper %s)", img->width,
                           img->height, how);
    else
        rc = folio_err_set(err, FOLIO_EIO, "the OCR helper %s ended during %s (it %s)", e->helper, what, how);
    if (said[0])
        folio_err_detail(err, "it said: %s", said);
    if (img && oom)
        folio_err_hint(err, "the helper's limit is %d MB of address space", e->opts.memory_mb);
    else if (!img)
        folio_err_hint(err, "check that %s is the folio-ocr built with this folio (FOLIO_OCR_HELPER)", e->helper);
    log_helper_stderr(e);
    return rc;
}

/* Waits for the helper's hello: 0 when it is ready, else why not (the
 * helper is then reaped). */
static int await_hello(struct ocr_engine *e, double deadline, const _Atomic int *cancel, struct folio_err *err)
{
    struct ocr_hello h;
    enum wait_end w = recv_until(e->sock, &h, sizeof h, deadline, cancel);
    if (w == WAIT_EOF)
        return helper_ended(e, "its start", NULL, err);
    int status;
    char how[96];
    if (w != WAIT_DONE) {
        reap(e, 1, &status, how, sizeof how);
        log_helper_stderr(e);
        if (w == WAIT_CANCEL)
            return folio_err_set(err, FOLIO_ETIMEOUT, "OCR cancelled while its helper was starting");
        return folio_err_set(err, FOLIO_ETIMEOUT, "the OCR helper %s was not ready in time and was stopped", e->helper);
    }
    if (h.magic != OCR_PROTO_MAGIC) {
        reap(e, 1, &status, how, sizeof how);
        folio_err_set(err, FOLIO_EIO, "%s is not folio's OCR helper (it answered with 0x%08x)", e->helper, h.magic);
        folio_err_hint(err, "install the folio-ocr built with this folio, or fix FOLIO_OCR_HELPER");
        return FOLIO_EIO;
    }
    if (h.rc) {
        reap(e, 1, &status, how, sizeof how);
        log_helper_stderr(e);
        *err = h.err;
        return h.rc;
    }
    e->hello_pending = 0;
    return 0;
}

int ocr_open(const struct ocr_opts *o, struct ocr_engine **out, struct folio_err *err)
{
    *out = NULL;
    struct ocr_engine *e = calloc(1, sizeof *e);
    if (!e)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate the OCR engine");
    e->opts = *o;
    e->sock = e->errfd = e->pixfd = -1;
    if (!o->isolate) {
        int rc = ocr_tess_open(o, &e->tess, err);
        if (rc) {
            free(e);
            return rc;
        }
        e->opts.lang = NULL; /* the caller's strings are not kept */
        e->opts.datapath = NULL;
        *out = e;
        return 0;
    }
    struct ocr_setup *s = &e->setup;
    s->magic = OCR_PROTO_MAGIC;
    s->page_deadline_ms = o->page_deadline_ms;
    s->detect_orientation = o->detect_orientation;
    s->osd_no_retry = o->osd_no_retry;
    s->force_ppi = o->force_ppi;
    s->no_deskew = o->no_deskew;
    s->no_upscale = o->no_upscale;
    s->osd_min_conf = o->osd_min_conf;
    s->memory_mb = o->memory_mb;
    const char *lang = o->lang && o->lang[0] ? o->lang : "eng";
    if (folio_snprintf(s->lang, sizeof s->lang, "%s", lang) ||
        folio_snprintf(s->datapath, sizeof s->datapath, "%s", o->datapath ? o->datapath : "")) {
        free(e);
        return folio_err_set(err, FOLIO_EINVAL, "OCR language list or tessdata path too long: '%s'", lang);
    }
    e->opts.lang = s->lang;
    e->opts.datapath = s->datapath[0] ? s->datapath : NULL;
    if (folio_helper_path("FOLIO_OCR_HELPER", "folio-ocr", FOLIO_OCR_HELPER_BUILD, e->helper, sizeof e->helper)) {
        folio_err_set(err, FOLIO_EIO, "OCR helper %s is missing or not executable", e->helper);
        folio_err_detail(err, "folio runs Tesseract in this helper program so that a page can be stopped at its deadline");
        folio_err_hint(err, "install folio-ocr next to folio or set FOLIO_OCR_HELPER to its path");
        free(e);
        return FOLIO_EIO;
    }
    e->errfd = memfd_create("folio-ocr-stderr", MFD_CLOEXEC);
    e->pixfd = memfd_create("folio-ocr-pixels", MFD_CLOEXEC);
    int rc = 0;
    if (e->errfd < 0 || e->pixfd < 0)
        rc = folio_err_set(err, FOLIO_EIO, "cannot set up the OCR helper: memfd_create: %s", strerror(errno));
    if (!rc)
        rc = spawn_helper(e, err);
    if (!rc)
        rc = await_hello(e, folio_mono_ms() + HELLO_MS, NULL, err);
    if (rc) {
        ocr_close(e);
        return rc;
    }
    *out = e;
    return 0;
}

void ocr_close(struct ocr_engine *e)
{
    if (!e)
        return;
    ocr_tess_close(e->tess);
    int status;
    char how[96];
    reap(e, 1, &status, how, sizeof how);
    if (e->errfd >= 0)
        close(e->errfd);
    if (e->pixfd >= 0)
        close(e->pixfd);
    free(e);
}

/* A helper that ended while idle (the thread that started it exited, so
 * PDEATHSIG fired; or it was killed from outside) is reaped, not blamed
 * on the next page. */
static void reap_if_idle_dead(struct ocr_engine *e)
{
    int status;
    if (e->pid <= 0 || waitpid(e->pid, &status, WNOHANG) != e->pid)
        return;
    e->pid = 0;
    e->hello_pending = 0;
    close(e->sock);
    e->sock = -1;
    log_helper_stderr(e);
    folio_log(FOLIO_LOG_INFO, "ocr_helper_gone", "while=idle exit_status=%d signal=%d",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The page's pixels into the memfd the helper maps; *bytes = what it holds. */
static int put_pixels(struct ocr_engine *e, const struct ocr_image *img, size_t *bytes, struct folio_err *err)
{
    size_t row = (size_t)img->width * (size_t)img->channels;
    size_t n = (size_t)(img->height - 1) * img->stride + row;
    if (n > e->pix_size) {
        if (ftruncate(e->pixfd, (off_t)n) != 0)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot hold a %dx%d page for the OCR helper (%zu bytes): %s",
                                 img->width, img->height, n, strerror(errno));
        e->pix_size = n;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = pwrite(e->pixfd, img->pixels + off, n - off, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot hand a %dx%d page to the OCR helper: %s", img->width,
                                 img->height, w < 0 ? strerror(errno) : "short write");
        off += (size_t)w;
    }
    *bytes = n;
    return 0;
}

/* After a kill: a new helper at once, so its Init runs while the caller
 * moves on. A failure here shows on the next page. */
static void restart_soon(struct ocr_engine *e, const char *why)
{
    struct folio_err ignored = {0};
    int rc = spawn_helper(e, &ignored);
    folio_log(rc ? FOLIO_LOG_WARN : FOLIO_LOG_INFO, "ocr_helper_restarted", "after=%s%s%s", why,
              rc ? " error=" : "", rc ? "spawn_failed" : "");
}

int ocr_page(struct ocr_engine *e, const struct ocr_image *img, const _Atomic int *cancel,
             struct ocr_page_result *out, struct folio_err *err)
{
    if (e->tess)
        return ocr_tess_page(e->tess, img, cancel, out, err);
    memset(out, 0, sizeof *out);
    out->confidence = -1;
    int crc = ocr_image_check(img, err); /* before any helper round trip */
    if (crc)
        return crc;
    if (cancel && atomic_load(cancel))
        return folio_err_set(err, FOLIO_ETIMEOUT, "OCR cancelled before it started");

    /* Hard limit: the helper's own monitor stops recognition at the
     * deadline and returns the text so far; the margin covers orientation
     * and the (linear) text extraction. Past it the page is stopped. */
    double t0 = folio_mono_ms();
    int dl = e->opts.page_deadline_ms;
    double hard_ms = dl > 0 ? dl + dl / 4.0 + 2000.0 : -1;
    double deadline = hard_ms > 0 ? t0 + hard_ms : 0;
    reap_if_idle_dead(e);
    int rc = e->pid > 0 ? 0 : spawn_helper(e, err);
    if (!rc && e->hello_pending)
        rc = await_hello(e, deadline, cancel, err);
    size_t bytes = 0;
    if (!rc)
        rc = put_pixels(e, img, &bytes, err);
    if (rc)
        return rc;

    struct ocr_request q = {.magic = OCR_PROTO_MAGIC, .width = img->width, .height = img->height,
                            .channels = img->channels, .ppi = img->ppi, .stride = img->stride, .bytes = bytes};
    struct ocr_reply h;
    enum wait_end w = send(e->sock, &q, sizeof q, MSG_NOSIGNAL) == (ssize_t)sizeof q
                          ? recv_until(e->sock, &h, sizeof h, deadline, cancel)
                          : WAIT_EOF;
    char *text = NULL;
    if (w == WAIT_DONE && h.magic != OCR_PROTO_MAGIC)
        w = WAIT_EOF;
    if (w == WAIT_DONE && h.rc == 0) {
        text = malloc(h.text_len + 1);
        if (!text) {
            int status;
            char how[96];
            reap(e, 1, &status, how, sizeof how);
            return folio_err_set(err, FOLIO_ENOMEM, "cannot hold %llu bytes of OCR text",
                                 (unsigned long long)h.text_len);
        }
        w = recv_until(e->sock, text, h.text_len, deadline, cancel);
        text[h.text_len] = 0;
    }
    if (bytes > PIX_KEEP && ftruncate(e->pixfd, 0) == 0)
        e->pix_size = 0; /* a huge page's copy is not kept for the next one */
    double el = folio_mono_ms() - t0;
    if (w != WAIT_DONE) {
        free(text);
        if (w == WAIT_EOF) {
            rc = helper_ended(e, "a page", img, err);
            restart_soon(e, "crash");
            return rc;
        }
        int status;
        char how[96];
        reap(e, 1, &status, how, sizeof how);
        log_helper_stderr(e);
        if (w == WAIT_CANCEL)
            return folio_err_set(err, FOLIO_ETIMEOUT, "OCR cancelled after %.0f ms", el);
        restart_soon(e, "deadline");
        folio_err_set(err, FOLIO_ETIMEOUT,
                      "OCR of a %dx%d page was still running after %.0f ms (page deadline %d ms) and was stopped",
                      img->width, img->height, el, dl);
        folio_err_detail(err, "Tesseract does not check the deadline during layout analysis; pages of tiny text or noise can take minutes there");
        folio_err_hint(err, "raise --page-deadline if such pages are real documents");
        return FOLIO_ETIMEOUT;
    }
    log_helper_stderr(e);
    if (h.rc) {
        *err = h.err;
        return h.rc;
    }
    *out = h.res;
    out->text = text;
    return 0;
}
