/*
 * folio bench pdf: what PDF costs, against the reference in the same run.
 *
 * Two PDFs of --pages pages are written here: "scan" wraps the office-scan
 * JPEGs bench ingest uses (2550x3300, one image per page, as scanners and
 * img2pdf write them) and "text" is born-digital (Helvetica text lines, no
 * image). For each, per round:
 *   render    folio's sandboxed helper: open + every page at --dpi, gray,
 *             pixels back over the socket (ingest_pdf_render)
 *   pdftoppm  poppler's own tool on the same file at the same resolution,
 *             gray (-gray), its PGM stream sent to /dev/null
 *   probe     ingest validation of the file (ingest_probe: count, sizes,
 *             every page drawn at 18 dpi)
 * and once per file: the text layer of every page (ingest_pdf_text) versus
 * Tesseract on the page rendered at 300 dpi, which is the OCR a usable text
 * layer saves. One JSON object per line; the summary has medians and
 * render_speed_vs_pdftoppm (> 1: folio is faster).
 */
#include "bench/pipeline/bench.h"
#include "common/json.h"
#include "engine/ocr.h"
#include "ingest/ingest.h"
#include "pipeline/cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: folio bench pdf [--pages N] [--dpi D] [--rounds R] [--dir DIR]\n"
    "\n"
    "Writes a scanned-image PDF and a text PDF of N pages (default 10) and\n"
    "measures, R rounds (default 3): folio's sandboxed render at D dpi\n"
    "(default 300, gray) against pdftoppm -r D -gray on the same file, and\n"
    "ingest's probe; then the text layer against OCR per page. Needs\n"
    "pdftoppm (poppler-utils). One JSON line each, then a summary.\n";

struct pdfw {
    FILE *f;
    long off[4096];
    int n;
};

static void obj_begin(struct pdfw *w)
{
    w->off[++w->n] = ftell(w->f);
    fprintf(w->f, "%d 0 obj\n", w->n);
}

static void write_xref(struct pdfw *w)
{
    long x = ftell(w->f);
    fprintf(w->f, "xref\n0 %d\n0000000000 65535 f \n", w->n + 1);
    for (int i = 1; i <= w->n; i++)
        fprintf(w->f, "%010ld 00000 n \n", w->off[i]);
    fprintf(w->f, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%ld\n%%%%EOF\n", w->n + 1, x);
}

static const char *const TEXT_LINES[] = {"Line %d of page %d: invoice number %d, amount due %d EUR, payment terms."};

/* Pages are objects 3 + 3k (page), 4 + 3k (contents), 5 + 3k (image or
 * font); 1 catalog, 2 page tree. The comment after the header is
 * BENCH_PDF_TAG_LEN bytes at BENCH_PDF_TAG_AT: copies made unique there
 * keep every offset (bench ingest). */
int bench_pdf_bytes(const struct bench_pdf_spec *sp, uint8_t **out, size_t *out_len, struct folio_err *err)
{
    char *buf = NULL;
    size_t blen = 0;
    struct pdfw *w = calloc(1, sizeof *w);
    if (!w || sp->pages < 1 || sp->pages > 1300) {
        free(w);
        return folio_err_set(err, FOLIO_EINVAL, "bench PDF: 1..1300 pages, got %d", sp->pages);
    }
    w->f = open_memstream(&buf, &blen);
    if (!w->f) {
        free(w);
        return folio_err_set(err, FOLIO_ENOMEM, "bench PDF: no memory stream");
    }
    int pages = sp->pages, scan = sp->scan, rc = 0;
    fprintf(w->f, "%%PDF-1.4\n%%%-*s\n", BENCH_PDF_TAG_LEN - 2, "folio-bench");
    obj_begin(w);
    fprintf(w->f, "<< /Type /Catalog /Pages 2 0 R >>\nendobj\n");
    obj_begin(w);
    fprintf(w->f, "<< /Type /Pages /Count %d /Kids [", pages);
    for (int p = 0; p < pages; p++)
        fprintf(w->f, "%d 0 R ", 3 + 3 * p);
    fprintf(w->f, "] >>\nendobj\n");
    for (int p = 0; p < pages && rc == 0; p++) {
        char content[8192];
        int cl;
        if (scan) {
            cl = snprintf(content, sizeof content, "q 612 0 0 792 0 0 cm /Im0 Do Q\n");
        } else {
            cl = snprintf(content, sizeof content, "BT /F1 11 Tf 72 740 Td 14 TL\n");
            for (int l = 0; l < 45 && cl < (int)sizeof content - 200; l++) {
                char line[256];
                if (sp->lines)
                    snprintf(line, sizeof line, "%s", sp->lines[(l + p * 5) % sp->nlines]);
                else
                    snprintf(line, sizeof line, TEXT_LINES[0], l + 1, p + 1, 1000 + p, 10 * l + p);
                /* a PDF string: (, ) and \ escaped */
                cl += snprintf(content + cl, sizeof content - (size_t)cl, "(");
                for (const char *c = line; *c && cl < (int)sizeof content - 8; c++) {
                    if (*c == '(' || *c == ')' || *c == '\\')
                        content[cl++] = '\\';
                    content[cl++] = *c;
                }
                cl += snprintf(content + cl, sizeof content - (size_t)cl, ") '\n");
            }
            cl += snprintf(content + cl, sizeof content - (size_t)cl, "ET\n");
        }
        obj_begin(w);
        fprintf(w->f, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << %s %d 0 R >> >>"
                      " /Contents %d 0 R >>\nendobj\n",
                scan ? "/XObject << /Im0" : "/Font << /F1", 5 + 3 * p, 4 + 3 * p);
        obj_begin(w);
        fprintf(w->f, "<< /Length %d >>\nstream\n%s\nendstream\nendobj\n", cl, content);
        obj_begin(w);
        if (scan) {
            size_t jl = 0;
            uint8_t *own = NULL;
            const uint8_t *j;
            int jw = 2550, jh = 3300, gray = 0;
            if (sp->njpeg > 0) {
                j = sp->jpeg[p % sp->njpeg];
                jl = sp->jpeg_len[p % sp->njpeg];
                jw = sp->jpeg_w;
                jh = sp->jpeg_h;
                gray = sp->jpeg_gray;
            } else {
                j = own = bench_scan_page_jpeg(jw, jh, (uint32_t)(p % 4 + 1), &jl);
            }
            if (!j) {
                rc = folio_err_set(err, FOLIO_ENOMEM, "cannot make a scan page");
                break;
            }
            fprintf(w->f,
                    "<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /%s"
                    " /BitsPerComponent 8 /Filter /DCTDecode /Length %zu >>\nstream\n",
                    jw, jh, gray ? "DeviceGray" : "DeviceRGB", jl);
            fwrite(j, 1, jl, w->f);
            fprintf(w->f, "\nendstream\nendobj\n");
            free(own);
        } else {
            fprintf(w->f, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>\nendobj\n");
        }
    }
    if (rc == 0)
        write_xref(w);
    int bad = ferror(w->f);
    if (fclose(w->f) || bad)
        rc = rc ? rc : folio_err_set(err, FOLIO_ENOMEM, "bench PDF: memory stream failed");
    free(w);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = (uint8_t *)buf;
    *out_len = blen;
    return 0;
}

static int write_pdf(const char *path, int pages, int scan, struct folio_err *err)
{
    struct bench_pdf_spec sp = {.pages = pages, .scan = scan};
    uint8_t *d = NULL;
    size_t n = 0;
    int rc = bench_pdf_bytes(&sp, &d, &n, err);
    if (rc)
        return rc;
    FILE *f = fopen(path, "wb");
    size_t wrote = f ? fwrite(d, 1, n, f) : 0;
    free(d);
    if (!f || wrote != n || fclose(f) != 0)
        return folio_err_set(err, FOLIO_EIO, "cannot write %s", path);
    return 0;
}

/* folio: open + render every page; ms per page, or NaN on error. */
static double run_render(const uint8_t *d, size_t n, int pages, int dpi, struct folio_err *err)
{
    double t0 = folio_mono_ms();
    struct ingest_pdf *p = NULL;
    int rc = ingest_pdf_open(d, n, NULL, &p, err);
    for (int i = 0; rc == 0 && i < pages; i++) {
        struct ingest_page pg;
        rc = ingest_pdf_render(p, i, dpi, 1, &pg, err);
        if (rc == 0)
            ingest_page_free(&pg);
    }
    ingest_pdf_close(p);
    return rc ? NAN : (folio_mono_ms() - t0) / pages;
}

static double run_pdftoppm(const char *file, const char *dir, int pages, int dpi)
{
    char cmd[4096];
    /* to stdout, thrown away: neither side pays for a disk */
    (void)dir;
    snprintf(cmd, sizeof cmd, "pdftoppm -r %d -gray '%s' > /dev/null", dpi, file);
    double t0 = folio_mono_ms();
    int rc = system(cmd);
    return rc == 0 ? (folio_mono_ms() - t0) / pages : NAN;
}

struct pdf_args {
    int pages, dpi, rounds;
    const char *dir;
};
#define AT(m, type) CLI_AT(struct pdf_args, m, type)
static const struct cli_opt OPTS[] = {
    {.name = "pages", .kind = CLI_INT, .off = AT(pages, int), .min = 1, .max = 1000},
    {.name = "dpi", .kind = CLI_INT, .off = AT(dpi, int), .min = 36, .max = 600},
    {.name = "rounds", .kind = CLI_INT, .off = AT(rounds, int), .min = 1, .max = 15},
    {.name = "dir", .kind = CLI_STR, .off = AT(dir, const char *)},
};
/* Extra arguments are ignored, as they always were. */
static const struct cli_cmd CMD = {.name = "bench pdf", .usage = USAGE, .opts = OPTS,
                                   .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 1 << 30};

int bench_pdf(int argc, char **argv)
{
    struct pdf_args a = {.pages = 10, .dpi = 300, .rounds = 3};
    int pos, parsed = cli_parse(&CMD, &a, argc, argv, &pos);
    if (parsed != CLI_GO)
        return parsed;
    int pages = a.pages, dpi = a.dpi, rounds = a.rounds;
    const char *dir_opt = a.dir;
    if (system("pdftoppm -v >/dev/null 2>&1") != 0) {
        fprintf(stderr, "folio bench pdf: pdftoppm not found (apt-get install poppler-utils)\n");
        return FOLIO_EXIT_FAIL;
    }
    char dir[4096];
    if (dir_opt)
        snprintf(dir, sizeof dir, "%s", dir_opt);
    else
        snprintf(dir, sizeof dir, "/tmp/folio-bench-pdf-%d", (int)getpid());
    struct folio_err err = {0};
    if (folio_mkdirs(dir, &err)) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    char cpu[256];
    folio_cpu_model(cpu, sizeof cpu);
    static const char *const KINDS[2] = {"scan", "text"};
    double text_ms = NAN, ocr_ms = NAN;
    int failed = 0;
    for (int k = 0; k < 2; k++) {
        char file[4200];
        snprintf(file, sizeof file, "%s/%s.pdf", dir, KINDS[k]);
        uint8_t *d = NULL;
        size_t n = 0;
        if (write_pdf(file, pages, k == 0, &err) || folio_read_file(file, 1u << 30, &d, &n, &err)) {
            folio_err_print(stderr, &err);
            return FOLIO_EXIT_FAIL;
        }
        double r_ms[15], p_ms[15], probe_ms[15];
        for (int r = 0; r < rounds; r++) {
            /* alternate who goes first so neither always gets the warm cache */
            if (r % 2) {
                p_ms[r] = run_pdftoppm(file, dir, pages, dpi);
                r_ms[r] = run_render(d, n, pages, dpi, &err);
            } else {
                r_ms[r] = run_render(d, n, pages, dpi, &err);
                p_ms[r] = run_pdftoppm(file, dir, pages, dpi);
            }
            struct ingest_info info;
            double t0 = folio_mono_ms();
            int prc = ingest_probe(d, n, NULL, &info, &err);
            probe_ms[r] = prc ? NAN : folio_mono_ms() - t0;
            failed += !isfinite(r_ms[r]) || !isfinite(p_ms[r]) || prc;
            char b[768];
            snprintf(b, sizeof b,
                     "{\"bench\":\"pdf\",\"pdf\":\"%s\",\"round\":%d,\"pages\":%d,\"bytes\":%zu,\"dpi\":%d,"
                     "\"render_ms_per_page\":%.1f,\"pdftoppm_ms_per_page\":%.1f,\"probe_ms\":%.1f}",
                     KINDS[k], r + 1, pages, n, dpi, r_ms[r], p_ms[r], probe_ms[r]);
            puts(b);
            fflush(stdout);
        }
        double rm = folio_median(r_ms, rounds), pm = folio_median(p_ms, rounds), prm = folio_median(probe_ms, rounds);
        struct json_buf b;
        json_init(&b);
        char s[512];
        snprintf(s, sizeof s,
                 "{\"bench\":\"pdf\",\"summary\":true,\"pdf\":\"%s\",\"pages\":%d,\"dpi\":%d,\"rounds\":%d,"
                 "\"render_ms_per_page\":%.1f,\"pdftoppm_ms_per_page\":%.1f,\"render_speed_vs_pdftoppm\":%.3f,"
                 "\"probe_ms_per_page\":%.1f,\"machine\":{\"cpu\":",
                 KINDS[k], pages, dpi, rounds, rm, pm, pm / rm, prm / pages);
        json_raw(&b, s);
        json_str(&b, cpu);
        snprintf(s, sizeof s, ",\"cores\":%ld}}", sysconf(_SC_NPROCESSORS_ONLN));
        json_raw(&b, s);
        json_print_line(&b, stdout);

        /* text layer (text PDF) and OCR (scan PDF) per page */
        struct ingest_pdf *p = NULL;
        if (ingest_pdf_open(d, n, NULL, &p, &err) == 0) {
            double t0 = folio_mono_ms();
            int ok = 1;
            if (k == 1) {
                for (int i = 0; i < pages && ok; i++) {
                    struct ingest_pdf_text t;
                    ok = ingest_pdf_text(p, i, &t, &err) == 0 && ingest_pdf_text_usable(&t, NULL);
                    ingest_pdf_text_free(&t);
                }
                text_ms = ok ? (folio_mono_ms() - t0) / pages : NAN;
            } else {
                struct ocr_opts oo;
                ocr_opts_default(&oo);
                struct ocr_engine *oe = NULL;
                int m = pages < 3 ? pages : 3; /* OCR is slow: three pages tell */
                ocr_process_init();
                if (ocr_open(&oo, &oe, &err) == 0) {
                    t0 = folio_mono_ms();
                    for (int i = 0; i < m && ok; i++) {
                        struct ingest_page pg;
                        ok = ingest_pdf_render(p, i, 300, 1, &pg, &err) == 0;
                        if (ok) {
                            struct ocr_image img = {.width = pg.width, .height = pg.height, .channels = 1,
                                                    .stride = pg.stride, .pixels = pg.pixels};
                            struct ocr_page_result res;
                            ok = ocr_page(oe, &img, NULL, &res, &err) == 0;
                            if (ok)
                                ocr_page_result_free(&res);
                            ingest_page_free(&pg);
                        }
                    }
                    ocr_ms = ok ? (folio_mono_ms() - t0) / m : NAN;
                    ocr_close(oe);
                }
            }
        }
        ingest_pdf_close(p);
        free(d);
    }
    char s[256];
    snprintf(s, sizeof s,
             "{\"bench\":\"pdf\",\"summary\":true,\"text_layer_ms_per_page\":%.2f,\"ocr_ms_per_page\":%.1f,"
             "\"ocr_saved_x\":%.0f}",
             text_ms, ocr_ms, ocr_ms / text_ms);
    puts(s);
    if (!dir_opt) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "folio bench pdf: could not remove %s\n", dir);
    }
    return failed ? FOLIO_EXIT_FAIL : FOLIO_EXIT_OK;
}
