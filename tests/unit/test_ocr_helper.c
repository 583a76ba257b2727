/* The folio-ocr helper (engine/ocr_isolate.c, engine/ocrhelper/):
 *
 * 1. Many threads OCR at once, in a loop, while another thread churns the
 *    allocator. The earlier design forked this multithreaded process per
 *    page and ran Tesseract in the child without exec; a lock held by
 *    another thread at fork time (malloc, ASan's allocator) stayed locked
 *    in the child, which hung until the hard page limit (one ASan run in
 *    five). Here every page must be read, none may time out.
 * 2. A helper that is missing, not executable, or not folio's fails
 *    ocr_open with an error naming it and what to do.
 * 3. A crash inside Tesseract (fault hook, test builds) fails that page
 *    only: the next page on the same engine is read by a fresh helper
 *    (test_ocr_bounded shows the same after a page stopped at its
 *    deadline). */
#include "engine/ocr.h"
#include "tests/support/testutil.h"

#include <leptonica/allheaders.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define THREADS 4
#define PAGES_PER_THREAD 6

static const char TEXT[] =
    "INVOICE\n"
    "Invoice number 4711\n"
    "Bill to: Harbour Supplies Ltd\n"
    "Amount due: 120.00 EUR including tax\n";

struct page {
    uint8_t *px;
    int w, h;
};

static int load_page(const char *dir, struct page *pg)
{
    char txt[1200], tif[1200];
    snprintf(txt, sizeof txt, "%s/invoice.txt", dir);
    snprintf(tif, sizeof tif, "%s/invoice.tif", dir);
    FILE *f = fopen(txt, "w");
    if (!f)
        return -1;
    fputs(TEXT, f);
    fclose(f);
    if (tu_sh("bash %s/tests/support/render_page.sh %s %s 14 1700 1100", getenv("FOLIO_SOURCE_DIR"), txt, tif))
        return -1;
    PIX *p = pixRead(tif);
    PIX *g = p ? pixConvertTo8(p, 0) : NULL;
    pixDestroy(&p);
    if (!g)
        return -1;
    pg->w = pixGetWidth(g);
    pg->h = pixGetHeight(g);
    pg->px = malloc((size_t)pg->w * (size_t)pg->h);
    l_uint32 *data = pixGetData(g);
    int wpl = pixGetWpl(g);
    for (int y = 0; pg->px && y < pg->h; y++)
        for (int x = 0; x < pg->w; x++)
            pg->px[(size_t)y * (size_t)pg->w + (size_t)x] = (uint8_t)GET_DATA_BYTE(data + y * wpl, x);
    pixDestroy(&g);
    return pg->px ? 0 : -1;
}

struct shared {
    const struct page *pg;
    _Atomic int stop;
    _Atomic int read_ok, failed, timed_out;
    char first_error[512];
    pthread_mutex_t mu;
};

static struct ocr_image image_of(const struct page *pg)
{
    struct ocr_image img = {.width = pg->w, .height = pg->h, .channels = 1, .stride = (size_t)pg->w,
                            .pixels = pg->px, .ppi = 300};
    return img;
}

/* No OSD, a 20 s page deadline (hard stop 27 s): a page here takes < 2 s. */
static void test_opts(struct ocr_opts *oo)
{
    ocr_opts_default(oo);
    oo->detect_orientation = 0;
    oo->page_deadline_ms = 20000;
}

static void *ocr_loop(void *arg)
{
    struct shared *s = arg;
    struct ocr_opts oo;
    test_opts(&oo);
    struct ocr_engine *e = NULL;
    struct folio_err err = {0};
    int rc = ocr_open(&oo, &e, &err);
    for (int i = 0; i < PAGES_PER_THREAD; i++) {
        struct ocr_page_result r = {0};
        struct ocr_image img = image_of(s->pg);
        if (!rc)
            rc = ocr_page(e, &img, NULL, &r, &err);
        if (rc) {
            atomic_fetch_add(&s->failed, 1);
            if (rc == FOLIO_ETIMEOUT)
                atomic_fetch_add(&s->timed_out, 1);
            pthread_mutex_lock(&s->mu);
            if (!s->first_error[0])
                snprintf(s->first_error, sizeof s->first_error, "%s", err.msg);
            pthread_mutex_unlock(&s->mu);
            rc = 0;
            continue;
        }
        if (r.text && strstr(r.text, "Invoice number 4711") && !r.timed_out)
            atomic_fetch_add(&s->read_ok, 1);
        ocr_page_result_free(&r);
    }
    ocr_close(e);
    return NULL;
}

/* Keeps malloc's and the sanitizer allocator's locks busy, and
 * Leptonica's allocator with them, as the worker's other threads do. */
static void *churn(void *arg)
{
    struct shared *s = arg;
    void *keep[64] = {0};
    unsigned k = 1;
    while (!atomic_load(&s->stop)) {
        for (int i = 0; i < 64; i++) {
            k = k * 1103515245u + 12345u;
            free(keep[i]);
            keep[i] = malloc(16 + (k >> 16) % 70000);
        }
        PIX *p = pixCreate(64, 64, 8);
        pixDestroy(&p);
    }
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    return NULL;
}

static void expect_open_error(const char *helper, const char *want)
{
    setenv("FOLIO_OCR_HELPER", helper, 1);
    struct ocr_opts oo;
    test_opts(&oo);
    struct ocr_engine *e = NULL;
    struct folio_err err = {0};
    int rc = ocr_open(&oo, &e, &err);
    unsetenv("FOLIO_OCR_HELPER");
    CHECK(rc == FOLIO_EIO && e == NULL, "helper %s: ocr_open rc=%d", helper, rc);
    CHECK(strstr(err.msg, helper) && strstr(err.msg, want), "helper %s: message names it and '%s': %s", helper,
          want, err.msg);
    CHECK(strstr(err.hint, "FOLIO_OCR_HELPER") || strstr(err.hint, "folio-ocr"), "helper %s: hint: %s", helper,
          err.hint);
    ocr_close(e);
}

int main(void)
{
    ocr_process_init();
    struct page pg = {0};
    REQUIRE(load_page(tu_scratch("ocr_helper"), &pg) == 0, "render the invoice page (text2image)");

    /* 1. Concurrency. */
    struct shared s = {.pg = &pg};
    pthread_mutex_init(&s.mu, NULL);
    pthread_t th[THREADS], ch;
    REQUIRE(pthread_create(&ch, NULL, churn, &s) == 0, "start the churn thread");
    for (int i = 0; i < THREADS; i++)
        REQUIRE(pthread_create(&th[i], NULL, ocr_loop, &s) == 0, "start OCR thread %d", i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    atomic_store(&s.stop, 1);
    pthread_join(ch, NULL);
    CHECK(atomic_load(&s.read_ok) == THREADS * PAGES_PER_THREAD && atomic_load(&s.failed) == 0,
          "%d threads x %d pages: %d read, %d failed (%d timed out); first error: %s", THREADS, PAGES_PER_THREAD,
          atomic_load(&s.read_ok), atomic_load(&s.failed), atomic_load(&s.timed_out), s.first_error);

    /* 2. A helper that cannot serve. */
    expect_open_error("/nonexistent/folio-ocr", "missing or not executable");
    char plain[1100];
    snprintf(plain, sizeof plain, "%s/not-executable", tu_scratch("ocr_helper"));
    FILE *f = fopen(plain, "w");
    REQUIRE(f, "create %s", plain);
    fputs("#!/bin/sh\n", f);
    fclose(f);
    chmod(plain, 0644);
    expect_open_error(plain, "missing or not executable");
    expect_open_error("/bin/true", "ended during its start");

    struct ocr_opts oo;
    test_opts(&oo);
    struct ocr_engine *e = NULL;
    struct folio_err err = {0};
    REQUIRE(ocr_open(&oo, &e, &err) == 0, "ocr_open: %s", err.msg);
#ifdef FOLIO_FAULT_INJECTION
    struct ocr_page_result r;
    struct ocr_image img = image_of(&pg);
    int rc;
    /* 3. A crash on one page (a page 1201 pixels wide) fails it alone. */
    setenv("FOLIO_FAULT", "ocr_crash_width:1201", 1);
    ocr_close(e); /* the helper reads FOLIO_FAULT from the environment it starts with */
    REQUIRE(ocr_open(&oo, &e, &err) == 0, "ocr_open: %s", err.msg);
    struct ocr_image narrow = img;
    narrow.width = 1201;
    rc = ocr_page(e, &narrow, NULL, &r, &err);
    CHECK(rc == FOLIO_EFORMAT && strstr(err.msg, "Tesseract crashed") && strstr(err.msg, "1201x"),
          "crash: rc=%d %s (%s)", rc, err.msg, err.detail);
    if (rc == 0)
        ocr_page_result_free(&r);
    rc = ocr_page(e, &img, NULL, &r, &err);
    CHECK(rc == 0 && r.text && strstr(r.text, "Invoice number 4711"), "page after the crash: rc=%d %s", rc,
          rc ? err.msg : r.text);
    if (rc == 0)
        ocr_page_result_free(&r);
    unsetenv("FOLIO_FAULT");

    /* 4. Every known escape, tried inside the confined helper with a
     * secret in the worker's environment, is refused and the page is
     * still read; the control (an allowed call reported as an escape)
     * fails its page, so a working escape would be seen. */
    setenv("FOLIO_DB", "postgresql://folio:hunter2@db.example/folio", 1);
    setenv("PGPASSWORD", "hunter2", 1);
    static const char *const esc[] = {"sandbox_escape:all", "sandbox_escape:control"};
    for (int i = 0; i < 2; i++) {
        setenv("FOLIO_FAULT", esc[i], 1);
        ocr_close(e);
        e = NULL;
        rc = ocr_open(&oo, &e, &err);
        if (rc == 0)
            rc = ocr_page(e, &img, NULL, &r, &err);
        if (i == 0)
            CHECK(rc == 0 && r.text && strstr(r.text, "Invoice number 4711"),
                  "every escape refused inside folio-ocr, page read: rc=%d %s (%s)", rc, rc ? err.msg : r.text,
                  rc ? err.detail : "");
        else
            CHECK(rc != 0 && (strstr(err.msg, "escape=control") || strstr(err.detail, "escape=control")),
                  "control escape is seen: rc=%d %s (%s)", rc, err.msg, err.detail);
        if (rc == 0)
            ocr_page_result_free(&r);
    }
    unsetenv("FOLIO_FAULT");
    unsetenv("FOLIO_DB");
    unsetenv("PGPASSWORD");
    ocr_close(e);
    e = NULL;
    REQUIRE(ocr_open(&oo, &e, &err) == 0, "ocr_open: %s", err.msg);
#else
    fprintf(stderr, "ocr_helper: crash case needs the fault hooks (FOLIO_FAULT_INJECTION build); not run\n");
#endif

    ocr_close(e);

    free(pg.px);
    pthread_mutex_destroy(&s.mu);
    return tu_finish();
}
