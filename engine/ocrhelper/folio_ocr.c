/*
 * folio-ocr: Tesseract in a process of its own, one per OCR thread of a
 * worker (engine/ocr_isolate.c starts it and speaks engine/ocr_proto.h).
 *
 * Why a process: Tesseract polls its monitor (deadline, cancel) only
 * between words of recognition; layout analysis and text extraction can
 * run for minutes on hostile pages, and a thread cannot be stopped safely
 * inside Tesseract. A process can be killed. Why an executable and not a
 * fork of the worker: a forked child of a multithreaded process may only
 * call async-signal-safe functions until it execs, and Tesseract,
 * Leptonica and malloc are not; a lock another thread held at fork time
 * stays locked in the child forever (seen as a 77 s hang under ASan). This
 * program starts from exec with one thread, so it is correct by
 * construction.
 *
 * It initialises Tesseract once (0.2-0.35 s) and then serves pages until
 * its socket closes. Before the first page it confines itself: address
 * space (--ocr memory), no core dumps, a small written-file limit (its
 * stderr memfd), few descriptors, then common/sandbox (shared with
 * folio-pdf): nobody when started as root, no capabilities, a Landlock
 * read-only view, a default-deny seccomp allow list. Tesseract's chatter goes to fd 2, a memfd
 * the parent logs as logfmt.
 */
#include "common/fault.h"
#include "common/sandbox/sandbox.h"
#include "engine/ocr_internal.h"
#include "engine/ocr_proto.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define SOCK_FD 0
#define PIX_FD 3
#define EXIT_SETUP 3

/* FOLIO_FAULT=ocr_crash_width:N (common/fault.h; test builds): a real
 * SIGSEGV on a page N pixels wide, standing in for a Tesseract bug, so
 * tests can prove a crash fails that page only. */
static void fault_point(int width)
{
    if (width > 0 && folio_fault_num(FOLIO_FAULT_ocr_crash_width) == width)
        raise(SIGSEGV);
}

static int serve_page(struct ocr_tess *t, const struct ocr_request *q)
{
    struct ocr_reply r;
    memset(&r, 0, sizeof r);
    r.magic = OCR_PROTO_MAGIC;
    struct stat st;
    size_t need = q->height > 0 ? (size_t)(q->height - 1) * q->stride + (size_t)q->width * (size_t)q->channels : 0;
    void *px = MAP_FAILED;
    if (q->width <= 0 || q->height <= 0 || q->bytes < need || fstat(PIX_FD, &st) != 0 ||
        (uint64_t)st.st_size < q->bytes) {
        r.rc = folio_err_set(&r.err, FOLIO_EINVAL, "OCR helper: bad page request (%dx%d, %llu bytes)", q->width,
                             q->height, (unsigned long long)q->bytes);
    } else if ((px = mmap(NULL, q->bytes, PROT_READ, MAP_SHARED, PIX_FD, 0)) == MAP_FAILED) {
        r.rc = folio_err_set(&r.err, FOLIO_ENOMEM, "OCR helper cannot map a %dx%d page: %s", q->width, q->height,
                             strerror(errno));
    }
    struct ocr_page_result res;
    memset(&res, 0, sizeof res);
    if (!r.rc) {
        fault_point(q->width);
        struct ocr_image img = {.width = q->width, .height = q->height, .channels = q->channels,
                                .stride = q->stride, .pixels = px, .ppi = q->ppi};
        r.rc = ocr_tess_page(t, &img, NULL, &res, &r.err);
        munmap(px, q->bytes);
    }
    if (!r.rc) {
        r.res = res;
        r.res.text = NULL;
        r.text_len = res.text ? strlen(res.text) : 0;
    }
    int rc = folio_sandbox_write_all(SOCK_FD, &r, sizeof r);
    if (!rc && r.text_len)
        rc = folio_sandbox_write_all(SOCK_FD, res.text, r.text_len);
    ocr_page_result_free(&res);
    return rc;
}

int main(int argc, char **argv)
{
    /* argv: serve PARENT_PID */
    if (argc != 3 || strcmp(argv[1], "serve") != 0) {
        fprintf(stderr, "usage: folio-ocr serve PARENT_PID (started by folio, not by hand)\n");
        return 2;
    }
    /* Die with the thread that started us: a SIGKILLed worker must not
     * leave OCR running (and a parent gone before this line is seen here). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != (pid_t)strtol(argv[2], NULL, 10))
        return EXIT_SETUP;
    signal(SIGXFSZ, SIG_IGN); /* an over-long stderr fails the write instead */
    struct ocr_setup s;
    if (folio_sandbox_read_all(SOCK_FD, &s, sizeof s) != 0 || s.magic != OCR_PROTO_MAGIC) {
        fprintf(stderr, "folio-ocr: no setup record on fd %d\n", SOCK_FD);
        return EXIT_SETUP;
    }
    s.lang[sizeof s.lang - 1] = 0;
    s.datapath[sizeof s.datapath - 1] = 0;
#if !defined(__SANITIZE_ADDRESS__)
    /* ASan reserves terabytes of shadow address space up front, so an
     * address-space limit cannot apply to sanitizer builds. */
    if (s.memory_mb > 0)
        folio_sandbox_limit("folio-ocr", RLIMIT_AS, (rlim_t)s.memory_mb << 20, (rlim_t)s.memory_mb << 20);
#endif
    folio_sandbox_limit("folio-ocr", RLIMIT_CORE, 0, 0);
    folio_sandbox_limit("folio-ocr", RLIMIT_FSIZE, 1 << 20, 1 << 20);
    folio_sandbox_limit("folio-ocr", RLIMIT_NOFILE, 64, 64);

    struct ocr_opts o;
    ocr_opts_default(&o);
    o.lang = s.lang;
    o.datapath = s.datapath[0] ? s.datapath : NULL;
    o.page_deadline_ms = s.page_deadline_ms;
    o.detect_orientation = s.detect_orientation;
    o.osd_no_retry = s.osd_no_retry;
    o.force_ppi = s.force_ppi;
    o.no_deskew = s.no_deskew;
    o.no_upscale = s.no_upscale;
    o.osd_min_conf = s.osd_min_conf;
    o.isolate = 0;
    struct ocr_hello h;
    memset(&h, 0, sizeof h);
    h.magic = OCR_PROTO_MAGIC;
    struct ocr_tess *t = NULL;
    h.rc = ocr_tess_open(&o, &t, &h.err);
    /* The traineddata is loaded: nothing is opened from here on that a
     * page could need, so the filter goes on before the first page. */
    const char *tp = getenv("TESSDATA_PREFIX");
    const char *const read_paths[] = {o.datapath ? o.datapath : "", tp ? tp : "", NULL};
    if (!h.rc && folio_sandbox_confine("folio-ocr", read_paths) != 0)
        h.rc = folio_err_set(&h.err, FOLIO_EIO, "folio-ocr cannot confine itself (its stderr says why)");
    if (!h.rc)
        folio_sandbox_fault_escape("folio-ocr");
    if (folio_sandbox_write_all(SOCK_FD, &h, sizeof h) != 0 || h.rc) {
        ocr_tess_close(t);
        return h.rc ? EXIT_SETUP : 0;
    }
    for (;;) {
        struct ocr_request q;
        if (folio_sandbox_read_all(SOCK_FD, &q, sizeof q) != 0 || q.magic != OCR_PROTO_MAGIC)
            break; /* the parent closed the socket (or is not one) */
        if (serve_page(t, &q) != 0)
            break;
    }
    ocr_tess_close(t);
    return 0;
}
