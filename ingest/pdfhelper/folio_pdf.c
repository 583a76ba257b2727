/*
 * folio-pdf: the sandboxed PDF parser and rasteriser (poppler-glib + cairo).
 *
 * PDF is the largest attack surface folio has, so poppler never runs inside
 * ingest or a worker: ingest/pdf.c starts this program per document and
 * talks to it over a socket (protocol: ingest/pdf_proto.h). Whatever a
 * hostile file does to poppler here — crash, hang, allocate without end —
 * ends this process only, and the parent turns it into a reason code.
 *
 * Before it looks at a single byte of the PDF, the helper confines itself:
 *  - resource limits from argv: address space (memory), CPU seconds, open
 *    files, written file size, no core dumps;
 *  - common/sandbox (shared with folio-ocr): started as root it becomes
 *    nobody; no capabilities, no-new-privs; a Landlock read-only view
 *    (fonts, fontconfig's cache) where the kernel offers it; a default-deny
 *    seccomp allow list. Its environment is clean (the parent passes no
 *    FOLIO_DB, common/helper.c).
 * The parent adds the wall-clock limit per request (it kills the helper).
 *
 * It is a separate executable (not a fork of ingest) so that the folio
 * binary never links poppler, whose GPL-2.0-or-later terms then cover this
 * program alone (see README "PDF").
 */
#include "common/sandbox/sandbox.h"
#include "ingest/pdf_proto.h"

#include <cairo.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <math.h>
#include <poppler.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SOCK_FD 0
#define PDF_FD 3

static int reply(struct pdf_reply *r, const void *payload, size_t n)
{
    r->magic = PDF_PROTO_MAGIC;
    r->payload = n;
    if (folio_sandbox_write_all(SOCK_FD, r, sizeof *r))
        return -1;
    return n ? folio_sandbox_write_all(SOCK_FD, payload, n) : 0;
}

static int fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int status, const char *fmt, ...)
{
    struct pdf_reply r;
    memset(&r, 0, sizeof r);
    r.status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r.msg, sizeof r.msg, fmt, ap);
    va_end(ap);
    return reply(&r, NULL, 0);
}

static void limit(int res, rlim_t v, rlim_t hard) { folio_sandbox_limit("folio-pdf", res, v, hard); }

static int sandbox(void) { return folio_sandbox_confine("folio-pdf", NULL); }

/* Counts a page's text by Unicode class for the text-layer rule. */
static void text_stats(const char *s, struct pdf_text_stats *st)
{
    memset(st, 0, sizeof *st);
    int run = 0;
    for (const char *p = s; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char_validated(p, -1);
        if (c == (gunichar)-1 || c == (gunichar)-2) {
            st->bad++;
            st->chars++;
            st->nonspace++;
            if (!p[1])
                break;
            continue;
        }
        st->chars++;
        int letter = g_unichar_isalpha(c);
        if (letter) {
            run++;
        } else {
            if (run >= 2)
                st->words++;
            if (run > 24)
                st->long_words++;
            run = 0;
        }
        if (g_unichar_isspace(c))
            continue;
        st->nonspace++;
        GUnicodeType t = g_unichar_type(c);
        if (c == 0xFFFD || t == G_UNICODE_PRIVATE_USE || t == G_UNICODE_UNASSIGNED ||
            t == G_UNICODE_CONTROL || t == G_UNICODE_SURROGATE)
            st->bad++;
        else if (letter || g_unichar_isdigit(c))
            st->alnum++;
    }
    if (run >= 2)
        st->words++;
    if (run > 24)
        st->long_words++;
}

static int do_info(PopplerDocument *doc, const struct pdf_request *q)
{
    int n = poppler_document_get_n_pages(doc);
    struct pdf_reply r;
    memset(&r, 0, sizeof r);
    r.pages = n;
    /* Sizes only when the count is within what the caller will accept: a
     * million-page file is refused from its count alone. */
    int want = q->page >= 0 && n <= q->page ? n : 0;
    struct pdf_page_size *sz = want ? calloc((size_t)want, sizeof *sz) : NULL;
    if (want && !sz)
        return fail(PDF_ST_NOMEM, "out of memory for %d page sizes", want);
    for (int i = 0; i < want; i++) {
        PopplerPage *pg = poppler_document_get_page(doc, i);
        if (!pg) {
            free(sz);
            return fail(PDF_ST_CORRUPT, "page %d of %d cannot be read", i + 1, n);
        }
        poppler_page_get_size(pg, &sz[i].w_pt, &sz[i].h_pt);
        g_object_unref(pg);
    }
    int rc = reply(&r, sz, (size_t)want * sizeof *sz);
    free(sz);
    return rc;
}

#ifdef FOLIO_FAULT_INJECTION
/* FOLIO_PDF_FAULT=crash_page:N (test builds): a real SIGSEGV while
 * rendering page N, standing in for a poppler bug, so tests can prove the
 * crash stays in this process. */
static void fault_point(int page)
{
    const char *f = getenv("FOLIO_PDF_FAULT");
    if (f && strncmp(f, "crash_page:", 11) == 0 && atoi(f + 11) == page + 1)
        raise(SIGSEGV);
}
#else
static void fault_point(int page) { (void)page; }
#endif

/* One page surface kept between renders of the same size: a fresh 33 MB
 * surface per 300-dpi page costs more in page faults than the drawing of
 * a text page (measured with bench pdf). */
struct surface_cache {
    cairo_surface_t *s;
    int w, h;
};

static int do_render(PopplerDocument *doc, const struct pdf_request *q, struct surface_cache *sc)
{
    int n = poppler_document_get_n_pages(doc);
    fault_point(q->page);
    if (q->page < 0 || q->page >= n || (q->channels != 1 && q->channels != 3) || !(q->dpi > 0) ||
        q->dpi > 2400)
        return fail(PDF_ST_BADREQ, "bad render request: page %d of %d, %d channels, %.1f dpi",
                    q->page + 1, n, q->channels, q->dpi);
    PopplerPage *pg = poppler_document_get_page(doc, q->page);
    if (!pg)
        return fail(PDF_ST_CORRUPT, "page %d of %d cannot be read", q->page + 1, n);
    double wpt, hpt;
    poppler_page_get_size(pg, &wpt, &hpt);
    double s = q->dpi / 72.0;
    double wd = ceil(wpt * s - 0.01), hd = ceil(hpt * s - 0.01);
    /* The parent checked the size against its limits; this keeps a lying
     * request from overflowing cairo's int sizes. */
    if (!(wd >= 1 && hd >= 1 && wd <= 32767 && hd <= 32767)) {
        g_object_unref(pg);
        return fail(PDF_ST_BADREQ, "page %d renders to %.0fx%.0f pixels", q->page + 1, wd, hd);
    }
    int w = (int)wd, h = (int)hd;
    if (!sc->s || sc->w != w || sc->h != h) {
        if (sc->s)
            cairo_surface_destroy(sc->s);
        sc->s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
        sc->w = w;
        sc->h = h;
        if (cairo_surface_status(sc->s) != CAIRO_STATUS_SUCCESS) {
            cairo_surface_destroy(sc->s);
            sc->s = NULL;
            g_object_unref(pg);
            return fail(PDF_ST_NOMEM, "cannot allocate a %dx%d page surface", w, h);
        }
    }
    cairo_surface_t *surf = sc->s;
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 1, 1, 1); /* paper */
    cairo_paint(cr);
    cairo_scale(cr, s, s);
    poppler_page_render_for_printing(pg, cr);
    cairo_status_t cst = cairo_status(cr);
    cairo_destroy(cr);
    g_object_unref(pg);
    if (cst != CAIRO_STATUS_SUCCESS) {
        return fail(cst == CAIRO_STATUS_NO_MEMORY ? PDF_ST_NOMEM : PDF_ST_CORRUPT,
                    "page %d cannot be rendered: %s", q->page + 1, cairo_status_to_string(cst));
    }
    cairo_surface_flush(surf);
    const uint8_t *src = cairo_image_surface_get_data(surf);
    int sstride = cairo_image_surface_get_stride(surf);
    size_t stride = (size_t)w * (size_t)q->channels;
    uint8_t *row = malloc(stride * 64);
    if (!row) {
        return fail(PDF_ST_NOMEM, "out of memory converting page %d", q->page + 1);
    }
    struct pdf_reply r;
    memset(&r, 0, sizeof r);
    r.width = w;
    r.height = h;
    r.channels = q->channels;
    r.stride = stride;
    r.magic = PDF_PROTO_MAGIC;
    r.payload = stride * (size_t)h;
    int rc = folio_sandbox_write_all(SOCK_FD, &r, sizeof r);
    /* Rows go out 64 at a time, so the reply never needs a second copy of
     * the page. CAIRO_FORMAT_RGB24 is a native-endian 0xXXRRGGBB word. */
    for (int y0 = 0; rc == 0 && y0 < h; y0 += 64) {
        int ny = h - y0 < 64 ? h - y0 : 64;
        for (int y = 0; y < ny; y++) {
            const uint32_t *in = (const uint32_t *)(const void *)(src + (size_t)(y0 + y) * (size_t)sstride);
            uint8_t *out = row + (size_t)y * stride;
            if (q->channels == 3) {
                for (int x = 0; x < w; x++) {
                    uint32_t v = in[x];
                    out[3 * x] = (uint8_t)(v >> 16);
                    out[3 * x + 1] = (uint8_t)(v >> 8);
                    out[3 * x + 2] = (uint8_t)v;
                }
            } else {
                for (int x = 0; x < w; x++) {
                    uint32_t v = in[x];
                    /* ITU-R BT.601 luma, as Leptonica's RGB-to-gray */
                    out[x] = (uint8_t)((77 * ((v >> 16) & 255) + 150 * ((v >> 8) & 255) + 29 * (v & 255) + 128) >> 8);
                }
            }
        }
        rc = folio_sandbox_write_all(SOCK_FD, row, stride * (size_t)ny);
    }
    free(row);
    return rc;
}

static int do_text(PopplerDocument *doc, const struct pdf_request *q)
{
    int n = poppler_document_get_n_pages(doc);
    if (q->page < 0 || q->page >= n)
        return fail(PDF_ST_BADREQ, "text of page %d requested, the PDF has %d", q->page + 1, n);
    PopplerPage *pg = poppler_document_get_page(doc, q->page);
    if (!pg)
        return fail(PDF_ST_CORRUPT, "page %d of %d cannot be read", q->page + 1, n);
    char *t = poppler_page_get_text(pg);
    g_object_unref(pg);
    struct pdf_reply r;
    memset(&r, 0, sizeof r);
    const char *s = t ? t : "";
    text_stats(s, &r.text);
    int rc = reply(&r, s, strlen(s));
    g_free(t);
    return rc;
}

/* `folio-pdf sandbox-check`: installs the filter and tries what it must
 * refuse (and one thing it must allow), one word each, for the tests. */
static int sandbox_check(void)
{
    if (sandbox() != 0)
        return PDF_EXIT_SETUP;
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    int wfd = open("/tmp/folio-pdf-sandbox-check", O_WRONLY | O_CREAT, 0600);
    int rfd = open("/proc/self/status", O_RDONLY);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    char *const args[] = {"/bin/true", NULL};
    int ex = execv("/bin/true", args);
    int kl = kill(getppid(), 0);
    printf("socket=%s open_write=%s open_read=%s fork=%s exec=%s kill_other=%s\n", sock < 0 ? "denied" : "allowed",
           wfd < 0 ? "denied" : "allowed", rfd < 0 ? "denied" : "allowed", child < 0 ? "denied" : "allowed",
           ex < 0 ? "denied" : "allowed", kl < 0 ? "denied" : "allowed");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "sandbox-check") == 0)
        return sandbox_check();
    /* argv: serve MEMORY_MB CPU_S */
    if (argc != 4 || strcmp(argv[1], "serve") != 0) {
        fprintf(stderr, "usage: folio-pdf serve MEMORY_MB CPU_S (started by folio, not by hand)\n");
        return 2;
    }
    long mem_mb = strtol(argv[2], NULL, 10), cpu_s = strtol(argv[3], NULL, 10);
    signal(SIGXFSZ, SIG_IGN); /* an over-long stderr fails the write instead */
    signal(SIGPIPE, SIG_DFL);
#if !defined(__SANITIZE_ADDRESS__)
    /* ASan reserves terabytes of shadow address space up front, so an
     * address-space limit cannot apply to sanitizer builds. */
    if (mem_mb > 0)
        limit(RLIMIT_AS, (rlim_t)mem_mb << 20, (rlim_t)mem_mb << 20);
#else
    (void)mem_mb;
#endif
    if (cpu_s > 0)
        limit(RLIMIT_CPU, (rlim_t)cpu_s, (rlim_t)cpu_s + 5); /* SIGXCPU first, then SIGKILL */
    limit(RLIMIT_CORE, 0, 0);
    limit(RLIMIT_FSIZE, 1 << 20, 1 << 20);
    limit(RLIMIT_NOFILE, 64, 64);

    struct stat st;
    if (fstat(PDF_FD, &st) != 0 || st.st_size <= 0) {
        fprintf(stderr, "folio-pdf: no PDF on fd %d\n", PDF_FD);
        return PDF_EXIT_SETUP;
    }
    size_t len = (size_t)st.st_size;
    void *data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, PDF_FD, 0);
    if (data == MAP_FAILED) {
        fprintf(stderr, "folio-pdf: cannot map %zu bytes of PDF: %s\n", len, strerror(errno));
        return PDF_EXIT_SETUP;
    }
    close(PDF_FD);
    if (sandbox() != 0)
        return PDF_EXIT_SETUP; /* it said why on stderr */
    folio_sandbox_fault_escape("folio-pdf");

    GBytes *bytes = g_bytes_new_static(data, len);
    PopplerDocument *doc = NULL;
    struct surface_cache cache = {NULL, 0, 0};
    for (;;) {
        struct pdf_request q;
        if (folio_sandbox_read_all(SOCK_FD, &q, sizeof q) != 0)
            break; /* the parent went away */
        if (q.magic != PDF_PROTO_MAGIC) {
            fail(PDF_ST_BADREQ, "bad request magic 0x%08x", q.magic);
            break;
        }
        /* Parsed on the first request, not before: an answer must never
         * reach the parent before its question, or a helper that exits
         * after a refusal races the parent's send. */
        if (!doc) {
            GError *gerr = NULL;
            doc = poppler_document_new_from_bytes(bytes, NULL, &gerr);
            if (!doc) {
                int enc = gerr && gerr->domain == POPPLER_ERROR && gerr->code == POPPLER_ERROR_ENCRYPTED;
                fail(enc ? PDF_ST_ENCRYPTED : PDF_ST_CORRUPT, "%s", gerr ? gerr->message : "poppler gave no reason");
                if (gerr)
                    g_error_free(gerr);
                break;
            }
        }
        int rc;
        switch (q.op) {
        case PDF_OP_INFO: rc = do_info(doc, &q); break;
        case PDF_OP_RENDER: rc = do_render(doc, &q, &cache); break;
        case PDF_OP_TEXT: rc = do_text(doc, &q); break;
        case PDF_OP_QUIT: rc = -1; break;
        default: rc = fail(PDF_ST_BADREQ, "unknown request %u", q.op); break;
        }
        if (rc)
            break;
    }
    if (cache.s)
        cairo_surface_destroy(cache.s);
    if (doc)
        g_object_unref(doc);
    g_bytes_unref(bytes);
    return 0;
}
