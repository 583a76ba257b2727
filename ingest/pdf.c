/*
 * PDF documents through the sandboxed helper (pdfhelper/folio_pdf.c).
 *
 * A session is one helper process for one blob: ingest_pdf_open copies the
 * bytes into a sealed memfd, starts `folio-pdf serve` with posix_spawn
 * (safe from a threaded worker; the helper applies its own resource limits
 * and seccomp filter before it parses anything) and asks for the page
 * count and sizes. Renders and text layers are then requests on the same
 * process, so a 20-page document is parsed once, not 40 times.
 *
 * Containment: every request has a wall-clock deadline (the per-page time
 * limit). A helper that misses it is killed; one that dies (signal, abort
 * on a failed allocation, address-space limit, CPU limit) is reaped and its
 * end is named in the error and in a stable reason code, never propagated:
 * the caller sees a failed call, not a dead process. The session is dead
 * after such a failure; every later call returns the same error.
 *
 * Finding the helper: $FOLIO_PDF_HELPER, else `folio-pdf` next to the
 * running program, else the build tree's copy (tests).
 */
#include "ingest/ingest_internal.h"
#include "ingest/pdf_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FOLIO_PDF_HELPER_BUILD
#define FOLIO_PDF_HELPER_BUILD "folio-pdf"
#endif

struct ingest_pdf {
    pid_t pid;
    int sock;          /* our end of the socketpair */
    int errfd;         /* the helper's stderr (memfd) */
    int dead;          /* a failure ended the session; err/reason say why */
    int page_ms;
    double doc_deadline; /* 0: none (ingest_pdf_set_deadline) */
    int doc_ms, doc_bound; /* doc_bound: the last request's deadline was the document's */
    int cut;           /* no "%%EOF" near the end: probably cut short in transfer */
    int pages;
    struct pdf_page_size *sizes; /* pages entries, or NULL when over the page limit */
    char reason[32];
    struct folio_err err;
};

void ingest_pdf_limits(const struct ingest_limits *lim, int *dpi, int *page_ms, int *mem_mb, int *cpu_s)
{
    *dpi = lim && lim->pdf_dpi > 0 ? lim->pdf_dpi : INGEST_PDF_DPI;
    *page_ms = lim && lim->pdf_page_ms > 0 ? lim->pdf_page_ms : 20000;
    *mem_mb = lim && lim->pdf_memory_mb > 0 ? lim->pdf_memory_mb : 1024;
    *cpu_s = lim && lim->pdf_cpu_s > 0 ? lim->pdf_cpu_s : 600;
}

static int helper_path(char *out, size_t n)
{
    return folio_helper_path("FOLIO_PDF_HELPER", "folio-pdf", FOLIO_PDF_HELPER_BUILD, out, n);
}

/* The last line(s) poppler printed, for error details. */
static void helper_stderr(struct ingest_pdf *p, char *buf, size_t n) { folio_fd_tail_line(p->errfd, buf, n); }

static void session_fail(struct ingest_pdf *p, const char *reason, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void session_fail(struct ingest_pdf *p, const char *reason, int code, const char *fmt, ...)
{
    p->dead = 1;
    snprintf(p->reason, sizeof p->reason, "%s", reason);
    char msg[sizeof p->err.msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    folio_err_set(&p->err, code, "%s", msg);
}

/* Kills (if asked) and reaps the helper; describes how it ended. */
static void reap(struct ingest_pdf *p, int kill_it, char *how, size_t n)
{
    how[0] = 0;
    if (p->pid <= 0)
        return;
    if (kill_it)
        kill(p->pid, SIGKILL);
    int status = 0;
    pid_t r;
    do
        r = waitpid(p->pid, &status, 0);
    while (r < 0 && errno == EINTR);
    p->pid = 0;
    if (r < 0)
        snprintf(how, n, "cannot be waited for (%s)", strerror(errno));
    else if (WIFSIGNALED(status))
        snprintf(how, n, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(how, n, "exited with status %d", WEXITSTATUS(status));
}

/* The helper stopped answering `what`: name the end it came to. */
static void helper_died(struct ingest_pdf *p, const char *what, int timed_out)
{
    char how[96], said[400];
    reap(p, 1, how, sizeof how);
    helper_stderr(p, said, sizeof said);
    if (timed_out && p->doc_bound) {
        session_fail(p, "pdf_timeout", FOLIO_ETIMEOUT,
                     "PDF validation took longer than %d ms for the whole document (during %s); the parser was stopped",
                     p->doc_ms, what);
        folio_err_hint(&p->err, "a document this slow is hostile or broken; raise --pdf-doc-ms if it is not");
        return;
    }
    if (timed_out) {
        session_fail(p, "pdf_timeout", FOLIO_ETIMEOUT, "PDF %s took longer than %d ms; the parser was stopped",
                     what, p->page_ms);
        folio_err_hint(&p->err, "a page this slow is hostile or broken; raise --pdf-page-ms if it is not");
        return;
    }
    if (strcmp(how, "exited with status 3") == 0) { /* PDF_EXIT_SETUP */
        session_fail(p, "internal", FOLIO_EIO, "PDF helper could not set up its sandbox: %s", said);
        return;
    }
    int oom = strstr(said, "alloc") != NULL || strstr(said, "memory") != NULL ||
              strstr(how, "signal 6") != NULL;
    int cpu = strstr(how, "signal 24") != NULL || strstr(how, "signal 9") != NULL;
    if (cpu)
        session_fail(p, "pdf_timeout", FOLIO_ETIMEOUT, "PDF parser ran out of CPU time during %s (it %s)", what, how);
    else if (oom)
        session_fail(p, "pdf_memory", FOLIO_ELIMIT, "PDF parser ran out of memory during %s (it %s)", what, how);
    else
        session_fail(p, "pdf_crashed", FOLIO_EFORMAT, "PDF parser crashed during %s (it %s)", what, how);
    if (said[0])
        folio_err_detail(&p->err, "the parser said: %s", said);
    if (oom)
        folio_err_hint(&p->err, "raise --pdf-memory-mb if documents this heavy are expected");
}

/* Reads exactly n bytes before the deadline (monotonic ms). 0, or -1
 * with *timed_out set when the deadline passed. */
static int read_until(int fd, void *buf, size_t n, double deadline, int *timed_out)
{
    uint8_t *b = buf;
    *timed_out = 0;
    while (n) {
        double left = deadline - folio_mono_ms();
        if (left <= 0) {
            *timed_out = 1;
            return -1;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, left > 1000 ? 1000 : (int)left + 1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -1;
        if (pr == 0)
            continue;
        ssize_t r = recv(fd, b, n, 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* One request and its reply header. The payload is left to the caller.
 * Failures kill the session and return its error. */
static int request(struct ingest_pdf *p, const struct pdf_request *q, const char *what,
                   struct pdf_reply *r, double *deadline, struct folio_err *err)
{
    if (p->dead) {
        *err = p->err;
        return err->code;
    }
    if (send(p->sock, q, sizeof *q, MSG_NOSIGNAL) != (ssize_t)sizeof *q) {
        helper_died(p, what, 0);
        *err = p->err;
        return err->code;
    }
    *deadline = folio_mono_ms() + p->page_ms;
    p->doc_bound = p->doc_deadline > 0 && p->doc_deadline < *deadline;
    if (p->doc_bound)
        *deadline = p->doc_deadline;
    int to = 0;
    if (read_until(p->sock, r, sizeof *r, *deadline, &to) != 0 || r->magic != PDF_PROTO_MAGIC) {
        helper_died(p, what, to);
        *err = p->err;
        return err->code;
    }
    if (r->status != PDF_ST_OK) {
        switch (r->status) {
        case PDF_ST_ENCRYPTED:
            session_fail(p, "encrypted", FOLIO_EUNSUPPORTED, "PDF is encrypted and needs a password");
            folio_err_detail(&p->err, "poppler: %s", r->msg);
            folio_err_hint(&p->err, "save an unencrypted copy (e.g. qpdf --decrypt) and drop that in");
            break;
        case PDF_ST_NOMEM:
            session_fail(p, "pdf_memory", FOLIO_ELIMIT, "PDF %s: %s", what, r->msg);
            break;
        case PDF_ST_CORRUPT:
            if (p->cut) {
                session_fail(p, "corrupt", FOLIO_EFORMAT,
                             "PDF is truncated or damaged: %s, and the file does not end with %%%%EOF", r->msg);
                folio_err_hint(&p->err, "the file was probably cut short in transfer: copy it again");
            } else {
                session_fail(p, "corrupt", FOLIO_EFORMAT, "PDF is damaged: %s", r->msg);
            }
            break;
        default:
            session_fail(p, "internal", FOLIO_EINVAL, "PDF helper refused %s: %s", what, r->msg);
            break;
        }
        char said[200];
        helper_stderr(p, said, sizeof said);
        if (said[0] && !p->err.detail[0])
            folio_err_detail(&p->err, "poppler said: %s", said);
        *err = p->err;
        return err->code;
    }
    return 0;
}

static int recv_payload(struct ingest_pdf *p, void *buf, size_t n, double deadline, const char *what,
                        struct folio_err *err)
{
    int to = 0;
    if (read_until(p->sock, buf, n, deadline, &to) != 0) {
        helper_died(p, what, to);
        *err = p->err;
        return err->code;
    }
    return 0;
}

int ingest_pdf_open(const uint8_t *data, size_t len, const struct ingest_limits *lim,
                    struct ingest_pdf **out, struct folio_err *err)
{
    *out = NULL;
    int dpi, mem_mb, cpu_s;
    struct ingest_pdf *p = calloc(1, sizeof *p);
    if (!p)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory for a PDF session");
    p->sock = p->errfd = -1;
    /* A complete PDF ends with "%%EOF" (after startxref); without one the
     * likeliest story is a copy cut short, and saying so tells the sender
     * what to do (send it again) better than "damaged" or "no pages". */
    size_t tail = len < 1024 ? len : 1024;
    p->cut = memmem(data + len - tail, tail, "%%EOF", 5) == NULL;
    ingest_pdf_limits(lim, &dpi, &p->page_ms, &mem_mb, &cpu_s);
    int max_pages = lim && lim->max_pages > 0 ? lim->max_pages : 2000;
    char path[PATH_MAX];
    if (helper_path(path, sizeof path) != 0) {
        folio_err_set(err, FOLIO_EIO, "PDF helper %s is missing or not executable", path);
        folio_err_hint(err, "install folio-pdf next to folio or set FOLIO_PDF_HELPER");
        snprintf(p->reason, sizeof p->reason, "internal");
        free(p);
        return FOLIO_EIO;
    }
    int sv[2] = {-1, -1};
    int pdffd = memfd_create("folio-pdf-data", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    p->errfd = memfd_create("folio-pdf-stderr", MFD_CLOEXEC);
    int rc = 0;
    if (pdffd < 0 || p->errfd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        rc = folio_err_set(err, FOLIO_EIO, "cannot set up the PDF helper: %s", strerror(errno));
        goto fail;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(pdffd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = folio_err_set(err, FOLIO_EIO, "cannot hand %zu bytes to the PDF helper: %s", len,
                               strerror(errno));
            goto fail;
        }
        off += (size_t)w;
    }
    /* The helper gets the document read-only and unchangeable. */
    fcntl(pdffd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, p->errfd, 2);
    posix_spawn_file_actions_adddup2(&fa, pdffd, 3);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    char mem[24], cpu[24];
    snprintf(mem, sizeof mem, "%d", mem_mb);
    snprintf(cpu, sizeof cpu, "%d", cpu_s);
    char *argv[] = {"folio-pdf", "serve", mem, cpu, NULL};
    char *envp[48];
    folio_helper_environ(envp, sizeof envp / sizeof envp[0], NULL);
    int se = posix_spawn(&p->pid, path, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    sv[1] = -1;
    close(pdffd);
    pdffd = -1;
    if (se != 0) {
        p->pid = 0;
        rc = folio_err_set(err, FOLIO_EIO, "cannot start the PDF helper %s: %s", path, strerror(se));
        goto fail;
    }
    p->sock = sv[0];

    struct pdf_request q = {.magic = PDF_PROTO_MAGIC, .op = PDF_OP_INFO, .page = max_pages};
    struct pdf_reply r;
    double deadline;
    rc = request(p, &q, "opening the document", &r, &deadline, err);
    if (rc == 0) {
        p->pages = r.pages;
        size_t want = r.payload / sizeof *p->sizes;
        if (r.payload % sizeof *p->sizes || (want && want != (size_t)r.pages)) {
            session_fail(p, "internal", FOLIO_EINVAL, "PDF helper sent %llu bytes of page sizes for %d pages",
                         (unsigned long long)r.payload, r.pages);
            *err = p->err;
            rc = err->code;
        } else if (want) {
            p->sizes = malloc(r.payload);
            if (!p->sizes)
                rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory for %zu page sizes", want);
            else
                rc = recv_payload(p, p->sizes, r.payload, deadline, "reading page sizes", err);
        }
    }
    if (rc == 0 && p->pages < 1) {
        session_fail(p, "corrupt", FOLIO_EFORMAT,
                     p->cut ? "PDF is truncated or damaged: no page could be read and the file does not end with "
                              "%%%%EOF"
                            : "PDF has no pages");
        if (p->cut)
            folio_err_hint(&p->err, "the file (%zu bytes) was probably cut short in transfer: copy it again", len);
        *err = p->err;
        rc = err->code;
    }
    if (rc) {
        /* the caller wants the reason code too: keep the dead session */
        *out = p;
        return rc;
    }
    *out = p;
    return 0;
fail:
    if (pdffd >= 0)
        close(pdffd);
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    if (p->errfd >= 0)
        close(p->errfd);
    free(p);
    return rc;
}

void ingest_pdf_set_deadline(struct ingest_pdf *p, double mono_ms, int limit_ms)
{
    if (!p)
        return;
    p->doc_deadline = mono_ms;
    p->doc_ms = limit_ms;
}

void ingest_pdf_close(struct ingest_pdf *p)
{
    if (!p)
        return;
    if (p->pid > 0 && !p->dead) {
        struct pdf_request q = {.magic = PDF_PROTO_MAGIC, .op = PDF_OP_QUIT};
        (void)send(p->sock, &q, sizeof q, MSG_NOSIGNAL);
    }
    if (p->sock >= 0)
        close(p->sock); /* EOF ends a helper that missed QUIT */
    char how[96];
    /* Give a well-behaved helper its exit; a stuck one is killed. */
    for (int i = 0; p->pid > 0 && i < 50; i++) {
        int st;
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid || (r < 0 && errno != EINTR)) {
            p->pid = 0;
            break;
        }
        folio_sleep_ms(2);
    }
    reap(p, 1, how, sizeof how);
    if (p->errfd >= 0)
        close(p->errfd);
    free(p->sizes);
    free(p);
}

int ingest_pdf_pages(const struct ingest_pdf *p) { return p ? p->pages : 0; }

const char *ingest_pdf_reason(const struct ingest_pdf *p) { return p && p->reason[0] ? p->reason : "internal"; }

int ingest_pdf_page_size(const struct ingest_pdf *p, int page, double *w_pt, double *h_pt)
{
    if (!p || !p->sizes || page < 0 || page >= p->pages)
        return FOLIO_EINVAL;
    *w_pt = p->sizes[page].w_pt;
    *h_pt = p->sizes[page].h_pt;
    return 0;
}

/* Pixels of a page at dpi, as the helper will size its surface. */
static uint64_t px_at(double pt, double dpi)
{
    double v = pt * dpi / 72.0 - 0.01;
    /* a hostile MediaBox can be any double: saturate (the pixel limit then
     * refuses the page) instead of an undefined conversion (found by
     * fuzz_ingest_probe under UBSan) */
    if (!(v > 0))
        return 0;
    return v >= 1e15 ? (uint64_t)1e15 : (uint64_t)v + 1;
}

int ingest_pdf_page_pixels(const struct ingest_pdf *p, int page, double dpi, uint32_t *w, uint32_t *h)
{
    double wp, hp;
    if (ingest_pdf_page_size(p, page, &wp, &hp) != 0)
        return FOLIO_EINVAL;
    uint64_t a = px_at(wp, dpi), b = px_at(hp, dpi);
    *w = a > UINT32_MAX ? UINT32_MAX : (uint32_t)a;
    *h = b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
    return 0;
}

int ingest_pdf_render(struct ingest_pdf *p, int page, double dpi, int channels, struct ingest_page *out,
                      struct folio_err *err)
{
    memset(out, 0, sizeof *out);
    uint32_t w, h;
    if ((channels != 1 && channels != 3) || !(dpi > 0) || ingest_pdf_page_pixels(p, page, dpi, &w, &h) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "PDF render: bad arguments (page %d of %d, %.1f dpi, %d channels)",
                             page + 1, ingest_pdf_pages(p), dpi, channels);
    if (w == 0 || h == 0 || w > 32767 || h > 32767 || (uint64_t)w * h > INGEST_HARD_MAX_PIXELS)
        return folio_err_set(err, FOLIO_ELIMIT, "PDF page %d at %.0f dpi is %ux%u, outside what folio renders",
                             page + 1, dpi, w, h);
    struct pdf_request q = {.magic = PDF_PROTO_MAGIC, .op = PDF_OP_RENDER, .page = page, .channels = channels,
                            .dpi = dpi};
    struct pdf_reply r;
    double deadline;
    char what[48];
    snprintf(what, sizeof what, "rendering page %d", page + 1);
    int rc = request(p, &q, what, &r, &deadline, err);
    if (rc)
        return rc;
    if (r.width < 1 || r.height < 1 || r.channels != channels || (uint32_t)r.width > w + 1 ||
        (uint32_t)r.height > h + 1 || r.stride != (uint64_t)r.width * (uint64_t)channels ||
        r.payload != r.stride * (uint64_t)r.height) {
        session_fail(p, "internal", FOLIO_EINVAL, "PDF helper sent a %dx%dx%d page for a %ux%u request",
                     r.width, r.height, r.channels, w, h);
        *err = p->err;
        return err->code;
    }
    rc = ingest_page_alloc(out, r.width, r.height, channels, err);
    if (rc) {
        helper_died(p, what, 0); /* the reply cannot be drained: end the session */
        return rc;
    }
    rc = recv_payload(p, out->pixels, r.payload, deadline, what, err);
    if (rc)
        ingest_page_free(out);
    return rc;
}

int ingest_pdf_text(struct ingest_pdf *p, int page, struct ingest_pdf_text *out, struct folio_err *err)
{
    memset(out, 0, sizeof *out);
    if (!p || page < 0 || page >= p->pages)
        return folio_err_set(err, FOLIO_EINVAL, "PDF text: page %d of %d requested", page + 1, ingest_pdf_pages(p));
    struct pdf_request q = {.magic = PDF_PROTO_MAGIC, .op = PDF_OP_TEXT, .page = page};
    struct pdf_reply r;
    double deadline;
    char what[48];
    snprintf(what, sizeof what, "reading the text of page %d", page + 1);
    int rc = request(p, &q, what, &r, &deadline, err);
    if (rc)
        return rc;
    /* A text layer larger than this is not a page of prose. */
    if (r.payload > (64u << 20)) {
        session_fail(p, "pdf_memory", FOLIO_ELIMIT, "PDF page %d has %llu bytes of text", page + 1,
                     (unsigned long long)r.payload);
        reap(p, 1, what, sizeof what);
        *err = p->err;
        return err->code;
    }
    out->text = malloc(r.payload + 1);
    if (!out->text) {
        helper_died(p, what, 0);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory for %llu bytes of PDF text",
                             (unsigned long long)r.payload);
    }
    rc = recv_payload(p, out->text, r.payload, deadline, what, err);
    if (rc) {
        free(out->text);
        out->text = NULL;
        return rc;
    }
    out->text[r.payload] = 0;
    out->chars = r.text.chars;
    out->nonspace = r.text.nonspace;
    out->alnum = r.text.alnum;
    out->bad = r.text.bad;
    out->words = r.text.words;
    out->long_words = r.text.long_words;
    return 0;
}

void ingest_pdf_text_free(struct ingest_pdf_text *t)
{
    if (t) {
        free(t->text);
        t->text = NULL;
    }
}

/* The text-layer rule (README "PDF"): a page's own text is used instead of
 * OCR when it reads like language. Each clause rejects one kind of layer
 * seen in the wild: a few stray characters (page numbers, a stamp) on a
 * scanned page; a font without a Unicode map, whose glyph codes come out
 * as private-use or replacement characters; and symbol or glyph soup,
 * where letters make no words. */
int ingest_pdf_text_usable(const struct ingest_pdf_text *t, const char **why)
{
    const char *w = NULL;
    if (t->alnum < INGEST_PDF_TEXT_MIN_ALNUM)
        w = "too few letters and digits";
    else if ((double)t->bad > 0.02 * t->nonspace)
        w = "unmapped glyphs (private-use, replacement or control characters)";
    else if ((double)t->alnum < 0.6 * t->nonspace)
        w = "mostly symbols";
    else if (t->words < 5 || t->long_words * 5 > t->words)
        w = "letters that form no words";
    if (why)
        *why = w ? w : "ok";
    return w == NULL;
}

double ingest_pdf_fit_dpi(const struct ingest_pdf *p, int page, int max_side, uint64_t max_pixels)
{
    double dpi = INGEST_PDF_DPI, wp, hp;
    if (ingest_pdf_page_size(p, page, &wp, &hp) != 0 || !(wp > 0) || !(hp > 0))
        return dpi;
    double longest = wp > hp ? wp : hp;
    if (max_side > 0 && max_side * 72.0 / longest < dpi)
        dpi = max_side * 72.0 / longest;
    if (max_pixels > 0) {
        double d = 72.0 * sqrt((double)max_pixels / (wp * hp));
        if (d < dpi)
            dpi = d;
    }
    return dpi;
}
