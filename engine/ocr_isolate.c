/*
 * Bounded, cancellable OCR: each page runs in a forked child process that
 * the calling thread kills when the page's deadline has passed or its
 * cancel flag is set.
 *
 * Why a process: Tesseract polls its monitor (deadline, cancel callback)
 * only between words of the recognition pass. Layout analysis before it
 * and text extraction after it do not poll at all, and on hostile pages
 * (tiny text, noise) either can run for minutes: a page of 9-pixel text
 * held a worker for 7.5 minutes under a 60 s deadline and ignored SIGTERM,
 * while the heartbeat kept its lease alive. A thread cannot be stopped
 * safely in the middle of Tesseract; a process can.
 *
 * Why fork and not a helper process: the child inherits this thread's
 * initialised TessBaseAPI copy-on-write, so a page costs one fork (a few
 * milliseconds, `folio bench ocr`) instead of a Tesseract Init (0.2-0.35 s)
 * or a pixel copy over a pipe. The child touches nothing but Tesseract,
 * Leptonica and its two pipes, writes its answer and _exit()s: no stdio
 * flush, no atexit handlers, no libpq, no Vulkan. It also closes every other
 * inherited descriptor at once, so another thread's pipes see EOF in time.
 *
 * What else it buys: a Tesseract crash on a hostile page kills the child,
 * not the worker, and Tesseract's stderr chatter ("Detected 12 diacritics",
 * "Estimating resolution as 97") comes back through a pipe and is logged
 * as logfmt instead of raw lines in the worker's log.
 */
#include "engine/ocr_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* The child's answer, then text_len bytes of text. */
struct wire_head {
    int32_t rc;
    struct ocr_page_result res; /* every field but text (a pointer in the child) */
    uint64_t text_len;
    struct folio_err err;
};

#define POLL_MS 50
#define MAX_LOGGED_LINES 20

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static void close_other_fds(void)
{
    if (close_range(4, ~0U, 0) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = 4; fd < (max > 0 ? max : 1024); fd++)
        close((int)fd);
}

static _Noreturn void child_main(struct ocr_engine *e, const struct ocr_image *img, int res_w, int err_w,
                                 pid_t parent)
{
    /* Die with the worker (a SIGKILLed worker must not leave OCR running). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    if (dup2(err_w, 2) < 0 || (res_w != 3 && dup2(res_w, 3) < 0))
        _exit(126);
    close_other_fds();
    struct wire_head h;
    memset(&h, 0, sizeof h);
    struct ocr_page_result r;
    h.rc = ocr_page_inproc(e, img, NULL, &r, &h.err);
    if (h.rc == 0) {
        h.res = r;
        h.res.text = NULL;
        h.text_len = r.text ? strlen(r.text) : 0;
    }
    if (write_all(3, &h, sizeof h) || (h.text_len && write_all(3, r.text, h.text_len)))
        _exit(125);
    _exit(0);
}

struct sink {
    char *buf;
    size_t len, cap;
    int eof;
};

/* Reads what is there; returns -1 when out of memory. A sink with a
 * limit keeps only its first `limit` bytes (stderr chatter is logged, not
 * hoarded); the answer sink has none (0). */
static int sink_read(int fd, struct sink *s, size_t limit)
{
    for (;;) {
        if (limit && s->len >= limit) {
            char junk[4096];
            ssize_t r = read(fd, junk, sizeof junk);
            if (r > 0)
                continue;
            if (r == 0)
                s->eof = 1;
            else if (errno == EINTR)
                continue;
            else if (errno != EAGAIN)
                s->eof = 1;
            return 0;
        }
        if (s->cap - s->len < 65536) {
            size_t nc = s->cap ? s->cap * 2 : 131072;
            char *nb = realloc(s->buf, nc);
            if (!nb)
                return -1;
            s->buf = nb;
            s->cap = nc;
        }
        ssize_t r = read(fd, s->buf + s->len, s->cap - s->len - 1);
        if (r > 0) {
            s->len += (size_t)r;
            continue;
        }
        if (r == 0)
            s->eof = 1;
        else if (errno == EINTR)
            continue;
        else if (errno != EAGAIN)
            s->eof = 1;
        return 0;
    }
}

/* Logs Tesseract's stderr lines (what it prints about a page) as logfmt. */
static void log_child_stderr(const struct sink *s)
{
    int logged = 0;
    for (size_t i = 0; i < s->len && logged < MAX_LOGGED_LINES;) {
        const char *line = s->buf + i;
        const char *eol = memchr(line, '\n', s->len - i);
        size_t n = eol ? (size_t)(eol - line) : s->len - i;
        i += n + 1;
        if (!n)
            continue;
        char q[600];
        folio_log(FOLIO_LOG_DEBUG, "tesseract_message", "text=%s", folio_lq_bytes(q, sizeof q, line, n));
        logged++;
    }
}

static void kill_and_reap(pid_t pid, int *status)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
}

int ocr_page(struct ocr_engine *e, const struct ocr_image *img, const _Atomic int *cancel,
             struct ocr_page_result *out, struct folio_err *err)
{
    const struct ocr_opts *o = ocr_engine_opts(e);
    if (!o->isolate)
        return ocr_page_inproc(e, img, cancel, out, err);
    memset(out, 0, sizeof *out);
    out->confidence = -1;
    if (cancel && atomic_load(cancel))
        return folio_err_set(err, FOLIO_ETIMEOUT, "OCR cancelled before it started");

    int res[2], ers[2];
    if (pipe2(res, O_CLOEXEC | O_NONBLOCK) != 0)
        return folio_err_set(err, FOLIO_EIO, "cannot create a pipe for the OCR child: %s", strerror(errno));
    if (pipe2(ers, O_CLOEXEC | O_NONBLOCK) != 0) {
        int e2 = errno;
        close(res[0]);
        close(res[1]);
        return folio_err_set(err, FOLIO_EIO, "cannot create a pipe for the OCR child: %s", strerror(e2));
    }
    double t0 = folio_mono_ms();
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* the child writes blocking: its pipes are its only job */
        fcntl(res[1], F_SETFL, 0);
        fcntl(ers[1], F_SETFL, 0);
        child_main(e, img, res[1], ers[1], parent);
    }
    int fork_errno = errno;
    close(res[1]);
    close(ers[1]);
    if (pid < 0) {
        close(res[0]);
        close(ers[0]);
        folio_err_set(err, FOLIO_EIO, "cannot start the OCR child process: %s", strerror(fork_errno));
        folio_err_hint(err, "the worker is out of processes or memory (ulimit -u, cgroup pids.max)");
        return FOLIO_EIO;
    }

    /* Hard limit: the child's own monitor stops recognition at the
     * deadline and returns the text so far; the margin covers orientation
     * and the (linear) text extraction. Past it the page is stopped. */
    int dl = o->page_deadline_ms;
    double hard_ms = dl > 0 ? dl + dl / 4.0 + 2000.0 : -1;
    struct sink rs = {0}, es = {0};
    int rc = 0, killed = 0, status = 0;
    while (!rs.eof || !es.eof) {
        struct pollfd pf[2] = {{rs.eof ? -1 : res[0], POLLIN, 0}, {es.eof ? -1 : ers[0], POLLIN, 0}};
        int pr = poll(pf, 2, POLL_MS);
        if (pr < 0 && errno != EINTR) {
            rc = folio_err_set(err, FOLIO_EIO, "poll on the OCR child: %s", strerror(errno));
            break;
        }
        if ((!rs.eof && sink_read(res[0], &rs, 0)) || (!es.eof && sink_read(ers[0], &es, 65536))) {
            rc = folio_err_set(err, FOLIO_ENOMEM, "cannot hold the OCR child's output");
            break;
        }
        double el = folio_mono_ms() - t0;
        if (cancel && atomic_load(cancel)) {
            rc = folio_err_set(err, FOLIO_ETIMEOUT, "OCR cancelled after %.0f ms", el);
            break;
        }
        if (hard_ms > 0 && el > hard_ms && (!rs.eof || !es.eof)) {
            rc = folio_err_set(err, FOLIO_ETIMEOUT,
                               "OCR of a %dx%d page was still running after %.0f ms (page deadline %d ms) and was stopped",
                               img->width, img->height, el, dl);
            folio_err_detail(err, "Tesseract does not check the deadline during layout analysis; pages of tiny text or noise can take minutes there");
            folio_err_hint(err, "raise --page-deadline if such pages are real documents");
            break;
        }
    }
    close(res[0]);
    close(ers[0]);
    if (rc) {
        kill_and_reap(pid, &status);
        killed = 1;
    } else {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    log_child_stderr(&es);
    free(es.buf);

    struct wire_head h;
    if (!killed && WIFSIGNALED(status)) {
        rc = folio_err_set(err, FOLIO_EFORMAT, "Tesseract crashed (signal %d) on a %dx%d page", WTERMSIG(status),
                           img->width, img->height);
    } else if (!killed && (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || rs.len < sizeof h)) {
        rc = folio_err_set(err, FOLIO_EIO, "the OCR child ended without an answer (exit status %d, %zu bytes)",
                           WIFEXITED(status) ? WEXITSTATUS(status) : -1, rs.len);
    } else if (!killed) {
        memcpy(&h, rs.buf, sizeof h);
        if (h.rc) {
            *err = h.err;
            rc = h.rc;
        } else if (h.text_len != rs.len - sizeof h) {
            rc = folio_err_set(err, FOLIO_EIO, "the OCR child's answer is cut (%zu of %llu text bytes)",
                               rs.len - sizeof h, (unsigned long long)h.text_len);
        } else {
            /* the text moves down over the header; the buffer has room for the NUL */
            memmove(rs.buf, rs.buf + sizeof h, (size_t)h.text_len);
            rs.buf[h.text_len] = 0;
            *out = h.res;
            out->text = rs.buf;
            rs.buf = NULL;
        }
    }
    free(rs.buf);
    return rc;
}
