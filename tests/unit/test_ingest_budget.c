/* Memory per document (issue 21):
 *
 * 1. The decoded-memory budget holds: four threads decode large PNG pages
 *    at once through a budget with room for one decode beside the other
 *    three decoded pages; its peak stays within it (never two decodes at
 *    once), the waits are logged, and every decode succeeds (they wait,
 *    not fail).
 * 2. A page that needs more than the whole budget is refused with a
 *    reason naming the budget; a wait is ended by the cancel flag.
 * 3. Reduced-scale decode: a 600-dpi JPEG of an invoice (JFIF density 600)
 *    decoded for OCR at 300 dpi comes out at half size through DCT scaling
 *    (its stated resolution halved), is read by Tesseract and classified
 *    `invoice` by the keyword rules, as the full-size page is. */
#include "engine/engine.h"
#include "engine/ocr.h"
#include "ingest/ingest.h"
#include "pipeline/document/doctext.h"
#include "tests/support/testutil.h"

#include <leptonica/allheaders.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint8_t *png_blob(int w, int h, size_t *n)
{
    PIX *p = pixCreate(w, h, 32);
    if (!p)
        return NULL;
    pixSetAllArbitrary(p, 0xd0e0f000);
    uint8_t *d = NULL;
    int rc = pixWriteMemPng(&d, n, p, 0);
    pixDestroy(&p);
    return rc ? NULL : d;
}

struct job {
    const uint8_t *data;
    size_t len;
    struct ingest_membudget *b;
    _Atomic int *held, *max_held, *ok;
};

static void *decode_hold(void *arg)
{
    struct job *j = arg;
    struct ingest_decode_opts o = {.max_side = 0, .channels = 3, .budget = j->b};
    struct ingest_page pg;
    struct folio_err err = {0};
    if (ingest_decode_page_opts(j->data, j->len, 0, &o, &pg, &err) != 0) {
        fprintf(stderr, "decode: %s\n", err.msg);
        return NULL;
    }
    int now = atomic_fetch_add(j->held, 1) + 1;
    int m = atomic_load(j->max_held);
    while (now > m && !atomic_compare_exchange_weak(j->max_held, &m, now))
        ;
    folio_sleep_ms(300); /* the page is in use (OCR) */
    atomic_fetch_sub(j->held, 1);
    ingest_page_free(&pg);
    atomic_fetch_add(j->ok, 1);
    return NULL;
}

static const char INVOICE[] =
    "INVOICE\n"
    "Invoice number 4711\n"
    "Bill to: Harbour Supplies Ltd\n"
    "Amount due: 120.00 EUR including tax\n"
    "Please remit payment within thirty days.\n";

static const char LABELS[] =
    "invoice: invoice, amount due, bill to, remit\n"
    "letter: dear, sincerely, regards\n";

int main(void)
{
    /* 1. Four 2000x2000 RGB PNG pages; the budget fits one and a half. */
    size_t n = 0;
    uint8_t *png = png_blob(2000, 2000, &n);
    REQUIRE(png, "encode a PNG");
    /* decode.c's estimate for a PNG: the page and an interlace buffer, then
     * the fitted and turned copies; a decoded page keeps only its pixels */
    uint64_t px = (uint64_t)2000 * 2000, one = px * (4 + 3) + 2 * px * 3, kept = px * 3;
    struct ingest_membudget *b = NULL;
    struct folio_err err = {0};
    /* room for one decode while the three other pages are held: two
     * decodes never run at once (four at once would need 4 x one) */
    REQUIRE(ingest_membudget_create(one + 3 * kept, &b, &err) == 0, "budget: %s", err.msg);
    _Atomic int held = 0, max_held = 0, ok = 0;
    pthread_t th[4];
    struct job j = {png, n, b, &held, &max_held, &ok};
    /* the waits are logged: stderr goes to a file meanwhile */
    char logpath[1100];
    snprintf(logpath, sizeof logpath, "%s/stderr.txt", tu_scratch("ingest_budget"));
    int saved = tu_stderr_begin(logpath);
    REQUIRE(saved >= 0, "capture stderr");
    for (int i = 0; i < 4; i++)
        if (pthread_create(&th[i], NULL, decode_hold, &j) != 0)
            abort();
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    char logged[8192];
    tu_stderr_end(saved, logpath, logged, sizeof logged);
    CHECK(strstr(logged, "level=info event=decode_memory_wait need_mib=") &&
              strstr(logged, "budget_mib=") && strstr(logged, "event=decode_memory_granted"),
          "waits logged: %s", logged);
    CHECK(atomic_load(&ok) == 4, "%d of 4 decodes finished", atomic_load(&ok));
    CHECK(atomic_load(&max_held) >= 1, "pages held at once: %d", atomic_load(&max_held));
    CHECK(ingest_membudget_peak(b) <= ingest_membudget_total(b) && ingest_membudget_peak(b) >= one &&
              ingest_membudget_peak(b) < 2 * one,
          "peak %llu of %llu", (unsigned long long)ingest_membudget_peak(b),
          (unsigned long long)ingest_membudget_total(b));

    /* 2. Over the whole budget: refused, not waited for. */
    struct ingest_membudget *small = NULL;
    REQUIRE(ingest_membudget_create(16u << 20, &small, &err) == 0, "small budget: %s", err.msg);
    struct ingest_decode_opts o = {.channels = 3, .budget = small};
    struct ingest_page pg;
    int rc = ingest_decode_page_opts(png, n, 0, &o, &pg, &err);
    CHECK(rc == FOLIO_ELIMIT && strstr(err.msg, "decode memory budget of 16 MiB") && strstr(err.msg, "2000x2000"),
          "over budget: rc=%d %s", rc, err.msg);
    CHECK(strstr(err.hint, "--decode-memory") != NULL, "hint: %s", err.hint);
    if (rc == 0)
        ingest_page_free(&pg);
    /* a wait ends with the cancel flag: other pages hold all but 1 MiB */
    uint64_t others = ingest_membudget_total(b) - (1u << 20);
    REQUIRE(ingest_membudget_reserve(b, others, NULL, "other pages", &err) == 0, "reserve: %s", err.msg);
    _Atomic int cancel = 1;
    struct ingest_decode_opts o2 = {.channels = 3, .budget = b, .cancel = &cancel};
    rc = ingest_decode_page_opts(png, n, 0, &o2, &pg, &err);
    CHECK(rc == FOLIO_ETIMEOUT && strstr(err.msg, "waited"), "cancelled wait: rc=%d %s", rc, err.msg);
    if (rc == 0)
        ingest_page_free(&pg);
    ingest_membudget_release(b, others);
    /* everything was given back */
    rc = ingest_decode_page_opts(png, n, 0, &o2, &pg, &err);
    CHECK(rc == 0, "budget free again: %s", err.msg);
    ingest_page_free(&pg);
    free(png);
    ingest_membudget_free(small);

    /* 3. A 600-dpi JPEG read for OCR at 300 dpi. */
    const char *dir = tu_scratch("ingest_budget");
    char txt[1100], tif[1100];
    snprintf(txt, sizeof txt, "%s/invoice.txt", dir);
    snprintf(tif, sizeof tif, "%s/invoice.tif", dir);
    FILE *f = fopen(txt, "w");
    REQUIRE(f, "write %s", txt);
    fputs(INVOICE, f);
    fclose(f);
    REQUIRE(tu_sh("bash %s/tests/support/render_page.sh %s %s 12", getenv("FOLIO_SOURCE_DIR"), txt, tif) == 0,
            "render the invoice");
    PIX *p300 = pixRead(tif);
    PIX *g = p300 ? pixConvertTo8(p300, 0) : NULL;
    PIX *p600 = g ? pixScale(g, 2.0f, 2.0f) : NULL;
    REQUIRE(p600, "scale the page to 600 dpi");
    pixSetResolution(p600, 600, 600);
    uint8_t *jpg = NULL;
    size_t jn = 0;
    REQUIRE(pixWriteMemJpeg(&jpg, &jn, p600, 90, 0) == 0, "encode the JPEG");
    int W = pixGetWidth(p600), H = pixGetHeight(p600);
    pixDestroy(&p300);
    pixDestroy(&g);
    pixDestroy(&p600);

    struct ingest_decode_opts full = {.max_side = 14000, .channels = 1};
    struct ingest_decode_opts ocr = {.max_side = 14000, .channels = 1, .target_ppi = DOC_TEXT_OCR_PPI, .budget = b};
    struct ingest_page pf, pr;
    REQUIRE(ingest_decode_page_opts(jpg, jn, 0, &full, &pf, &err) == 0, "full decode: %s", err.msg);
    REQUIRE(ingest_decode_page_opts(jpg, jn, 0, &ocr, &pr, &err) == 0, "OCR decode: %s", err.msg);
    CHECK(pf.width == W && pf.height == H && pf.ppi == 600, "full: %dx%d at %d ppi", pf.width, pf.height, pf.ppi);
    CHECK(pr.width >= W / 2 - 1 && pr.width <= W / 2 + 1 && pr.height >= H / 2 - 1 && pr.height <= H / 2 + 1 &&
              pr.ppi == 300,
          "OCR decode of %dx%d at 600 ppi: %dx%d at %d ppi", W, H, pr.width, pr.height, pr.ppi);
    CHECK(pr.reserved == (uint64_t)pr.stride * (uint64_t)pr.height, "the page keeps its own size reserved: %llu",
          (unsigned long long)pr.reserved);
    ingest_page_free(&pf);
    ingest_page_free(&pr);
    CHECK(ingest_membudget_peak(b) <= ingest_membudget_total(b), "peak within the budget");

    /* ... and the half-size page is read and classified like the full one */
    struct ocr_opts oo;
    ocr_opts_default(&oo);
    oo.detect_orientation = 0;
    struct ocr_engine *e = NULL;
    REQUIRE(ocr_open(&oo, &e, &err) == 0, "ocr_open: %s", err.msg);
    struct doc_text_ctx c = {.ocr = e, .data = jpg, .len = jn, .pages = 1, .max_pages = 1, .decode_budget = b};
    struct engine_text t = {0};
    rc = worker_doc_text(&c, &t, &err);
    REQUIRE(rc == 0, "doc text: %s", err.msg);
    CHECK(strstr(t.text, "Invoice number 4711") != NULL, "OCR of the reduced page: %s", t.text);
    struct engine_labels *labels = engine_labels_new();
    REQUIRE(labels && engine_labels_parse(labels, LABELS, "test", &err) == 0, "labels: %s", err.msg);
    struct engine_result r;
    memset(&r, 0, sizeof r);
    REQUIRE(engine_rules_score(labels, t.text, &r, &err) == 0, "classify: %s", err.msg);
    CHECK(strcmp(r.label, "invoice") == 0, "the reduced page is classified %s", r.label);
    engine_result_free(&r);
    free(t.text);
    engine_labels_free(labels);
    ocr_close(e);
    free(jpg);
    ingest_membudget_free(b);
    return tu_finish();
}
