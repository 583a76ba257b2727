/*
 * PDF through the sandboxed helper, with files made by real tools:
 * scanned-image PDFs (img2pdf over a text2image page), searchable PDFs
 * (tesseract ... pdf), born-digital text PDFs (cairo), encrypted ones
 * (qpdf), truncated and junk ones, and hostile ones (tests/support/
 * hostile_pdf.py: a page that renders for ever, a decompression bomb, a
 * page-count bomb, a 200-inch page) plus a real SIGSEGV inside the helper
 * (fault injection). Each must come back as an answer with a reason code;
 * this process must live through all of them.
 */
#include "ingest/ingest.h"
#include "tests/support/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *S;   /* scratch folder */
static const char *SRC; /* source tree */

static const char INVOICE[] = "INVOICE\nInvoice number 4711 from ACME Corporation\n"
                              "Amount due: 1200 EUR, payment terms 30 days.\n"
                              "Please pay the total amount by the due date.\n";
static const char LETTER[] = "Dear Mr Smith,\nthank you for your letter of last week about the\n"
                             "meeting in Berlin. Yours sincerely, Jane Doe\n";

static int write_text(const char *name, const char *text)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", S, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

static uint8_t *load(const char *name, size_t *n)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", S, name);
    uint8_t *d = NULL;
    struct folio_err err = {0};
    if (folio_read_file(p, 1 << 26, &d, n, &err) != 0) {
        fprintf(stderr, "cannot read %s: %s\n", p, err.msg);
        return NULL;
    }
    return d;
}

/* A 300-dpi scan of text (text2image), its image-only PDF and Tesseract's
 * searchable PDF of it. */
static int make_scans(void)
{
    if (write_text("invoice.txt", INVOICE))
        return -1;
    return tu_sh("bash '%s/tests/support/render_page.sh' '%s/invoice.txt' '%s/invoice.tif' && "
                 "img2pdf '%s/invoice.tif' -o '%s/scan.pdf' && "
                 "OMP_THREAD_LIMIT=1 tesseract '%s/invoice.tif' '%s/searchable' -l eng pdf >/dev/null 2>&1",
                 SRC, S, S, S, S, S, S);
}

static int text_pdf(const char *out, const char *txt_name, const char *text)
{
    if (write_text(txt_name, text))
        return -1;
    const char *tool = getenv("FOLIO_TEST_TEXT_PDF");
    if (!tool)
        return -1;
    return tu_sh("'%s' '%s/%s' '%s/%s'", tool, S, out, S, txt_name);
}

static int hostile(const char *kind, const char *out, const char *arg)
{
    return tu_sh("python3 '%s/tests/support/hostile_pdf.py' %s '%s/%s' %s", SRC, kind, S, out, arg ? arg : "");
}

static void test_scanned_pdf(void)
{
    size_t n = 0;
    uint8_t *d = load("scan.pdf", &n);
    TU_NEED(d, "scan.pdf");
    struct ingest_info info;
    struct folio_err err = {0};
    int rc = ingest_probe(d, n, NULL, &info, &err);
    CHECK(rc == 0, "scanned PDF probes: %d %s %s", rc, err.msg, err.detail);
    CHECK(strcmp(info.media_type, "application/pdf") == 0 && info.pages == 1, "media %s pages %d",
          info.media_type, info.pages);
    /* img2pdf keeps the scan's 300 dpi: the page is Letter, 2550x3300 at 300 dpi */
    CHECK(info.width == 2550 && info.height == 3300 && info.pdf_dpi == 300, "sized %dx%d at %d dpi",
          info.width, info.height, info.pdf_dpi);

    /* Rendered at 300 dpi, the page is the scan again. */
    struct ingest_page pg, ref;
    rc = ingest_decode_page(d, n, 0, 0, 1, &pg, &err);
    TU_NEED(rc == 0, "render at 300 dpi: %s", err.msg);
    size_t tn = 0;
    uint8_t *tif = load("invoice.tif", &tn);
    TU_NEED(tif && ingest_decode_page(tif, tn, 0, 0, 1, &ref, &err) == 0, "decode the tiff: %s", err.msg);
    CHECK(pg.width == ref.width && pg.height == ref.height && pg.channels == 1, "render %dx%d vs scan %dx%d",
          pg.width, pg.height, ref.width, ref.height);
    if (pg.width == ref.width && pg.height == ref.height) {
        long diff = 0, ink = 0;
        for (size_t i = 0; i < (size_t)pg.width * (size_t)pg.height; i++) {
            diff += abs((int)pg.pixels[i] - (int)ref.pixels[i]) > 128;
            ink += ref.pixels[i] < 128;
        }
        CHECK(ink > 1000 && diff * 50 < ink, "render matches the scan: %ld of %ld ink pixels differ", diff, ink);
    }
    ingest_page_free(&ref);
    ingest_page_free(&pg);
    free(tif);

    /* A consumer with a smaller need gets a smaller render, not a shrunk 300-dpi one. */
    rc = ingest_decode_page(d, n, 0, 1000, 3, &pg, &err);
    CHECK(rc == 0 && pg.height == 1000 && pg.width == 773 && pg.channels == 3, "fit 1000: rc %d %dx%dx%d", rc,
          pg.width, pg.height, pg.channels);
    ingest_page_free(&pg);

    struct ingest_pdf *p = NULL;
    TU_NEED(ingest_pdf_open(d, n, NULL, &p, &err) == 0, "open: %s", err.msg);
    /* vision: a 1600-token budget of 28x28-pixel tokens */
    double dpi = ingest_pdf_fit_dpi(p, 0, 4096, 1600u * 784u);
    uint32_t w, h;
    ingest_pdf_page_pixels(p, 0, dpi, &w, &h);
    CHECK(dpi > 100 && dpi < 120 && (uint64_t)w * h <= 1600u * 784u + w + h, "budget dpi %.1f gives %ux%u", dpi, w, h);
    CHECK(ingest_pdf_fit_dpi(p, 0, 0, 0) == 300, "OCR renders at 300 dpi");
    struct ingest_pdf_text t;
    TU_NEED(ingest_pdf_text(p, 0, &t, &err) == 0, "text: %s", err.msg);
    const char *why = "";
    CHECK(!ingest_pdf_text_usable(&t, &why) && strcmp(why, "too few letters and digits") == 0,
          "an image-only page has no usable text layer (%s, %d alnum)", why, t.alnum);
    ingest_pdf_text_free(&t);
    ingest_pdf_close(p);
    free(d);
}

static void test_text_layers(void)
{
    char both[1024];
    snprintf(both, sizeof both, "%s\f%s", INVOICE, LETTER);
    TU_NEED(text_pdf("text.pdf", "text.txt", both) == 0, "cairo text PDF");
    size_t n = 0;
    uint8_t *d = load("text.pdf", &n);
    TU_NEED(d, "text.pdf");
    struct ingest_info info;
    struct folio_err err = {0};
    CHECK(ingest_probe(d, n, NULL, &info, &err) == 0 && info.pages == 2, "text PDF probes: %s, %d pages", err.msg,
          info.pages);
    struct ingest_pdf *p = NULL;
    TU_NEED(ingest_pdf_open(d, n, NULL, &p, &err) == 0, "open: %s", err.msg);
    struct ingest_pdf_text t;
    const char *why = "";
    TU_NEED(ingest_pdf_text(p, 0, &t, &err) == 0, "page 1 text: %s", err.msg);
    CHECK(strstr(t.text, "Invoice number 4711") && strstr(t.text, "Amount due"), "page 1 text: %s", t.text);
    CHECK(ingest_pdf_text_usable(&t, &why), "page 1 layer is usable: %s", why);
    ingest_pdf_text_free(&t);
    TU_NEED(ingest_pdf_text(p, 1, &t, &err) == 0, "page 2 text: %s", err.msg);
    CHECK(strstr(t.text, "Dear Mr Smith") && !strstr(t.text, "Invoice"), "page 2 is its own text: %s", t.text);
    CHECK(ingest_pdf_text_usable(&t, &why), "page 2 layer is usable: %s", why);
    ingest_pdf_text_free(&t);
    CHECK(ingest_pdf_text(p, 2, &t, &err) == FOLIO_EINVAL, "page 3 of 2 is refused");
    /* The helper reuses its page surface: page 2 after page 1 must be
     * exactly page 2 alone, with nothing of page 1 left on it. */
    struct ingest_page a, b;
    TU_NEED(ingest_pdf_render(p, 0, 100, 1, &a, &err) == 0, "render page 1: %s", err.msg);
    ingest_page_free(&a);
    TU_NEED(ingest_pdf_render(p, 1, 100, 1, &a, &err) == 0, "render page 2: %s", err.msg);
    ingest_pdf_close(p);
    TU_NEED(ingest_pdf_open(d, n, NULL, &p, &err) == 0, "reopen: %s", err.msg);
    TU_NEED(ingest_pdf_render(p, 1, 100, 1, &b, &err) == 0, "render page 2 alone: %s", err.msg);
    CHECK(a.width == b.width && a.height == b.height &&
              memcmp(a.pixels, b.pixels, a.stride * (size_t)a.height) == 0,
          "page 2 after page 1 equals page 2 alone");
    ingest_page_free(&a);
    ingest_page_free(&b);
    ingest_pdf_close(p);
    free(d);

    /* Tesseract's searchable PDF: the invisible layer is real OCR text. */
    d = load("searchable.pdf", &n);
    TU_NEED(d, "searchable.pdf");
    TU_NEED(ingest_pdf_open(d, n, NULL, &p, &err) == 0, "open searchable: %s", err.msg);
    TU_NEED(ingest_pdf_text(p, 0, &t, &err) == 0, "searchable text: %s", err.msg);
    CHECK(strstr(t.text, "Invoice") && ingest_pdf_text_usable(&t, &why), "searchable layer used: %s (%s)", why, t.text);
    ingest_pdf_text_free(&t);
    ingest_pdf_close(p);
    free(d);

    /* Garbage layers: glyphs a font maps to private-use code points, and
     * symbol soup. Both have plenty of characters; neither is language. */
    char pua[2048] = "", soup[2048] = "";
    for (int line = 0; line < 6; line++) {
        /* a font mapped for some glyphs only */
        strcat(pua, "Invoice total due ");
        for (int i = 0; i < 12; i++)
            strcat(pua, i % 4 == 3 ? " " : "\xee\x80\x81"); /* U+E001 */
        strcat(pua, "\n");
        strcat(soup, "ab12 #$%& cd34 *+=< ef56 >|~^\n");
    }
    TU_NEED(text_pdf("pua.pdf", "pua.txt", pua) == 0 && text_pdf("soup.pdf", "soup.txt", soup) == 0, "garbage PDFs");
    static const char *const garbage[][2] = {
        {"pua.pdf", "unmapped glyphs (private-use, replacement or control characters)"},
        {"soup.pdf", "mostly symbols"}};
    for (int k = 0; k < 2; k++) {
        d = load(garbage[k][0], &n);
        TU_NEED(d, "%s", garbage[k][0]);
        TU_NEED(ingest_pdf_open(d, n, NULL, &p, &err) == 0, "open %s: %s", garbage[k][0], err.msg);
        TU_NEED(ingest_pdf_text(p, 0, &t, &err) == 0, "text: %s", err.msg);
        int usable = ingest_pdf_text_usable(&t, &why);
        CHECK(!usable && strcmp(why, garbage[k][1]) == 0,
              "%s layer refused as '%s': got '%s' (%d chars, %d alnum, %d bad)", garbage[k][0], garbage[k][1], why,
              t.chars, t.alnum, t.bad);
        ingest_pdf_text_free(&t);
        ingest_pdf_close(p);
        free(d);
    }
}

/* The rule on its own, clause by clause. */
static void test_text_rule(void)
{
    const char *why = "";
    struct ingest_pdf_text t = {.chars = 300, .nonspace = 250, .alnum = 230, .bad = 0, .words = 40};
    CHECK(ingest_pdf_text_usable(&t, &why), "prose is used: %s", why);
    t.alnum = INGEST_PDF_TEXT_MIN_ALNUM - 1;
    t.nonspace = 45;
    CHECK(!ingest_pdf_text_usable(&t, &why) && strstr(why, "too few"), "a page number and a stamp: %s", why);
    t = (struct ingest_pdf_text){.chars = 300, .nonspace = 250, .alnum = 230, .bad = 6, .words = 40};
    CHECK(!ingest_pdf_text_usable(&t, &why) && strstr(why, "unmapped"), "2.4%% unmapped glyphs: %s", why);
    t = (struct ingest_pdf_text){.chars = 300, .nonspace = 250, .alnum = 140, .words = 20};
    CHECK(!ingest_pdf_text_usable(&t, &why) && strstr(why, "symbols"), "56%% letters: %s", why);
    t = (struct ingest_pdf_text){.chars = 300, .nonspace = 290, .alnum = 285, .words = 4};
    CHECK(!ingest_pdf_text_usable(&t, &why) && strstr(why, "no words"), "4 words: %s", why);
    t = (struct ingest_pdf_text){.chars = 300, .nonspace = 290, .alnum = 285, .words = 8, .long_words = 2};
    CHECK(!ingest_pdf_text_usable(&t, &why) && strstr(why, "no words"), "glyph runs: %s", why);
}

static void expect_reject(const char *file, const struct ingest_limits *lim, int want_rc, const char *want_reason,
                          const char *want_msg)
{
    size_t n = 0;
    uint8_t *d = load(file, &n);
    TU_NEED(d, "%s", file);
    struct ingest_info info;
    struct folio_err err = {0};
    double t0 = folio_mono_ms();
    int rc = ingest_probe(d, n, lim, &info, &err);
    CHECK(rc == want_rc && strcmp(info.reason, want_reason) == 0 && strstr(err.msg, want_msg),
          "%s: rc %d reason %s (want %d %s) msg '%s' detail '%s' after %.0f ms", file, rc, info.reason, want_rc,
          want_reason, err.msg, err.detail, folio_mono_ms() - t0);
    free(d);
}

static void test_rejections(void)
{
    TU_NEED(tu_sh("qpdf --encrypt secret owner 256 -- '%s/text.pdf' '%s/enc.pdf' && "
               "qpdf --encrypt '' owner 256 -- '%s/text.pdf' '%s/enc-owner.pdf'",
               S, S, S, S) == 0,
         "qpdf encrypts");
    /* Repeated: a helper that answered before it was asked raced the
     * request (seen as a spurious pdf_crashed under load). */
    for (int i = 0; i < 12; i++)
        expect_reject("enc.pdf", NULL, FOLIO_EUNSUPPORTED, "encrypted", "needs a password");
    /* Encrypted with only an owner password: anyone may open it. */
    size_t n = 0;
    uint8_t *d = load("enc-owner.pdf", &n);
    TU_NEED(d, "enc-owner.pdf");
    struct ingest_info info;
    struct folio_err err = {0};
    CHECK(ingest_probe(d, n, NULL, &info, &err) == 0 && info.pages == 2, "owner-password PDF opens: %s", err.msg);
    free(d);

    TU_NEED(tu_sh("head -c 2000 '%s/text.pdf' > '%s/trunc.pdf' && "
               "{ printf '%%%%PDF-1.7\\n'; head -c 20000 /dev/urandom; } > '%s/junk.pdf'", S, S, S) == 0, "broken");
    /* both lack the closing %%EOF: cut short, and the message says so */
    expect_reject("trunc.pdf", NULL, FOLIO_EFORMAT, "corrupt", "PDF is truncated or damaged");
    expect_reject("junk.pdf", NULL, FOLIO_EFORMAT, "corrupt", "PDF is truncated or damaged");
    /* damaged but complete (ends in %%EOF): "damaged" only */
    TU_NEED(tu_sh("{ head -c 20000 '%s/junk.pdf'; printf '\\n%%%%%%%%EOF\\n'; } > '%s/junk-eof.pdf'", S, S) == 0,
            "junk-eof");
    expect_reject("junk-eof.pdf", NULL, FOLIO_EFORMAT, "corrupt", "PDF is damaged: ");

    TU_NEED(hostile("pages", "pages.pdf", "40") == 0 && hostile("huge", "huge.pdf", NULL) == 0, "hostile_pdf.py");
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_pages = 30;
    expect_reject("pages.pdf", &lim, FOLIO_ELIMIT, "too_many_pages", "40 pages, over the limit of 30");
    expect_reject("huge.pdf", NULL, FOLIO_ELIMIT, "too_many_pixels", "60000x60000");
}

static void test_hostile_contained(void)
{
    TU_NEED(hostile("slow", "slow.pdf", "1500000") == 0, "slow PDF");
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.pdf_page_ms = 300;
    expect_reject("slow.pdf", &lim, FOLIO_ETIMEOUT, "pdf_timeout", "took longer than 300 ms");
    /* the document's clock: a page limit far above, the document's below */
    lim.pdf_page_ms = 600000;
    lim.pdf_doc_ms = 300;
    expect_reject("slow.pdf", &lim, FOLIO_ETIMEOUT, "pdf_timeout", "took longer than 300 ms for the whole document");
    lim.pdf_doc_ms = 0;

    /* The decompression bomb: a 30000x30000 image (900 MB of gray, 3.6 GB
     * as cairo's surface) behind 0.9 MB. Under a small address-space
     * limit cairo's allocation fails and poppler leaves the image out;
     * with room to grow it is the per-request clock that stops it. */
    TU_NEED(hostile("bomb", "bomb.pdf", "30000") == 0, "bomb PDF");
    lim.pdf_page_ms = 300;
    lim.pdf_memory_mb = 16384;
    expect_reject("bomb.pdf", &lim, FOLIO_ETIMEOUT, "pdf_timeout", "took longer than 300 ms");
    size_t n = 0;
    uint8_t *d;
    struct ingest_info info;
    struct folio_err err = {0};
    int rc;

    d = load("text.pdf", &n);
    TU_NEED(d, "text.pdf");
#ifdef FOLIO_FAULT_INJECTION
    /* A real SIGSEGV in the helper on page 2 of 2. */
    setenv("FOLIO_PDF_FAULT", "crash_page:2", 1);
    rc = ingest_probe(d, n, NULL, &info, &err);
    unsetenv("FOLIO_PDF_FAULT");
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's own SEGV handler reports the crash and exits 1 */
    const char *sig = strstr(err.detail, "SEGV");
#else
    const char *sig = strstr(err.msg, "signal 11");
#endif
    CHECK(rc == FOLIO_EFORMAT && strcmp(info.reason, "pdf_crashed") == 0 && sig &&
              strstr(err.msg, "page 2 of 2") && info.failed_page == 1,
          "crash contained: rc %d reason %s: %s (%s)", rc, info.reason, err.msg, err.detail);
#else
    fprintf(stderr, "pdf: crash case needs the fault hooks (FOLIO_FAULT_INJECTION build); not run\n");
#endif

#if !defined(__SANITIZE_ADDRESS__)
    /* Address-space limit (not in sanitizer builds: ASan's shadow memory
     * cannot live under one): a 300-dpi RGB surface is 33 MB. */
    struct ingest_pdf *p = NULL;
    lim.pdf_memory_mb = 40;
    lim.pdf_page_ms = 20000;
    rc = ingest_pdf_open(d, n, &lim, &p, &err);
    if (rc == 0) {
        struct ingest_page pg;
        rc = ingest_pdf_render(p, 0, 300, 3, &pg, &err);
        CHECK(rc == FOLIO_ELIMIT && strcmp(ingest_pdf_reason(p), "pdf_memory") == 0,
              "render over the memory limit: rc %d reason %s: %s", rc, ingest_pdf_reason(p), err.msg);
        if (rc == 0)
            ingest_page_free(&pg);
    } else {
        CHECK(strcmp(ingest_pdf_reason(p), "pdf_memory") == 0, "open under 40 MB: %s %s", ingest_pdf_reason(p),
              err.msg);
    }
    ingest_pdf_close(p);
#endif

    /* After all that, the next document works. */
    CHECK(ingest_probe(d, n, NULL, &info, &err) == 0 && info.pages == 2, "still working: %s", err.msg);
    free(d);

    setenv("FOLIO_PDF_HELPER", "/nonexistent/folio-pdf", 1);
    d = load("scan.pdf", &n);
    rc = d ? ingest_probe(d, n, NULL, &info, &err) : -1;
    unsetenv("FOLIO_PDF_HELPER");
    CHECK(rc == FOLIO_EIO && strcmp(info.reason, "internal") == 0 && strstr(err.msg, "/nonexistent/folio-pdf") &&
              strstr(err.hint, "FOLIO_PDF_HELPER"),
          "missing helper: rc %d %s: %s", rc, info.reason, err.msg);
    free(d);
}

/* The helper's seccomp filter refuses what an exploit needs and keeps
 * reading (fonts, fontconfig) working. */
static void test_sandbox(void)
{
    const char *helper = getenv("FOLIO_TEST_PDF_HELPER");
    TU_NEED(helper, "FOLIO_TEST_PDF_HELPER comes from ctest");
    char out[512] = "";
    int rc = tu_sh_out(out, sizeof out, "'%s' sandbox-check", helper);
    CHECK(rc == 0 && strstr(out, "socket=denied open_write=denied open_read=allowed fork=denied exec=denied "
                                 "kill_other=denied"),
          "sandbox: rc %d: %s", rc, out);
}

/* The known escapes, each tried inside the real helper once it is
 * confined (FOLIO_FAULT=sandbox_escape:NAME, common/sandbox), with a
 * secret in this process's environment: every one must be refused and
 * the PDF still parsed and drawn (fonts read through the read-only view).
 * `control` is an allowed call reported as an escape: it must fail the
 * document, which shows a working escape would be seen. */
static void test_escapes(void)
{
#ifdef FOLIO_FAULT_INJECTION
    static const char *const names[] = {
        "io_uring_setup", "mknodat", "fchmod", "fchown", "fsetxattr", "utimensat", "pidfd_open", "pidfd_getfd",
        "rt_sigqueueinfo", "kill_parent", "ptrace", "unshare", "socket", "open_write", "execve", "fork",
        "setrlimit", "parent_environ", "inherited_secret", "root", "capabilities", "read_outside", "control",
    };
    size_t n = 0;
    uint8_t *d = load("text.pdf", &n);
    TU_NEED(d, "text.pdf (test_text_layers makes it)");
    setenv("FOLIO_DB", "postgresql://folio:hunter2@db.example/folio", 1);
    setenv("PGPASSWORD", "hunter2", 1);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char f[64];
        snprintf(f, sizeof f, "sandbox_escape:%s", names[i]);
        setenv("FOLIO_FAULT", f, 1);
        struct folio_err err = {0};
        struct ingest_pdf *p = NULL;
        struct ingest_page pg = {0};
        int rc = ingest_pdf_open(d, n, NULL, &p, &err);
        if (rc == 0)
            rc = ingest_pdf_render(p, 0, 50, 1, &pg, &err);
        if (strcmp(names[i], "control") == 0)
            CHECK(rc != 0 && strcmp(ingest_pdf_reason(p), "pdf_crashed") == 0 &&
                      strstr(err.detail, "escape=control result=escaped"),
                  "control escape is seen: rc %d reason %s: %s (%s)", rc, ingest_pdf_reason(p), err.msg, err.detail);
        else
            CHECK(rc == 0 && pg.width > 0, "escape %s inside folio-pdf is refused: rc %d %s (%s)", names[i], rc,
                  err.msg, err.detail);
        ingest_page_free(&pg);
        ingest_pdf_close(p);
    }
    unsetenv("FOLIO_FAULT");
    unsetenv("FOLIO_DB");
    unsetenv("PGPASSWORD");
    free(d);
#else
    fprintf(stderr, "ingest_pdf: escape attempts need the fault hooks (FOLIO_FAULT_INJECTION build); not run\n");
#endif
}

int main(void)
{
    S = tu_scratch("ingest_pdf");
    SRC = getenv("FOLIO_SOURCE_DIR");
    REQUIRE(SRC && S, "FOLIO_SOURCE_DIR and scratch");
    REQUIRE(make_scans() == 0, "text2image, img2pdf and tesseract make the scans");
    test_text_rule();
    test_sandbox();
    test_scanned_pdf();
    test_text_layers();
    test_escapes();
    test_rejections();
    test_hostile_contained();
    return tu_finish();
}
