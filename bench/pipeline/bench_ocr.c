/*
 * folio bench ocr: OCR pages/s per core through folio's Tesseract wrapper
 * (engine/ocr.c, as the worker runs it) against the tesseract CLI on the
 * same pages in the same run, and scaling with the number of OCR threads.
 *
 * Pages: US Letter at 300 dpi rendered by Tesseract's text2image (package
 * tesseract-ocr) with DejaVu Sans (fonts-dejavu-core), a business letter
 * of ~30 lines, each page different. They are decoded once through the
 * ingest decoder (as the worker does); decoding is not timed here.
 *
 * Fair comparison: the CLI runs once over a list file of all pages (one
 * Init, like folio's per-thread instance; that Init, ~0.3 s, stays in the
 * CLI's time), with OMP_THREAD_LIMIT=1 and its default page segmentation
 * (no OSD); folio is measured on the same work (no OSD), its Init
 * excluded and reported apart. The two are run alternately --repeat times
 * and compared by medians, so bursts of load from other processes hit both
 * alike. "Per core" is pages per CPU-second (process CPU time for folio,
 * the child's for the CLI), steadier than wall time on a shared machine;
 * wall time is reported too. Thread scaling is measured on what the
 * worker runs by default (OSD on).
 *
 * --pdf: the same pages as PDFs, through the worker's text provider
 * (worker_doc_text: one sandboxed helper session per document, each page's
 * text layer tried, then the page rendered at the OCR resolution and
 * OCR'd). "scan" wraps the pages as gray JPEGs (quality 85, one image a
 * page, as img2pdf writes scans); "text" is born-digital with the same
 * wording in Helvetica. The reference in the same run: for the scan,
 * pdftoppm -r 300 -gray to PGM files plus the tesseract CLI over them
 * (one Init); for the text PDF, pdftotext. OSD off on both sides.
 */
#include "bench/pipeline/bench.h"
#include "common/json.h"
#include "engine/ocr.h"
#include "ingest/ingest.h"
#include "pipeline/cli/cli.h"
#include "pipeline/document/doctext.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: folio bench ocr [OPTIONS]\n"
    "\n"
    "OCR pages/s per core vs the tesseract CLI on the same generated 300-dpi pages,\n"
    "and scaling with OCR threads. Needs text2image (tesseract-ocr) and fonts-dejavu-core.\n"
    "\n";

static const char *const LINES[] = {
    "Harbour Supplies Ltd, 14 Quay Street, Portsmouth",
    "Dear Mr. Ellison,",
    "Thank you for your order of the 3rd of March for forty-two crates of",
    "galvanised fittings. We are pleased to confirm that the goods left our",
    "warehouse on Tuesday and should reach your depot by the end of the week.",
    "Please find enclosed the delivery note and our invoice number 20931.",
    "The amount due is payable within thirty days of the invoice date.",
    "Should any item arrive damaged, kindly let us know within five days so",
    "that we can arrange a replacement at no further cost to you.",
    "Our new catalogue, which lists the extended range of marine fittings,",
    "will be published in the spring; a copy will be sent to you as soon as",
    "it is available. We look forward to continuing our business together.",
    "Yours sincerely,",
    "Margaret Holloway, Sales Manager",
    "Reference: HS/2231/MH  Telephone 023 9281 7744  VAT GB 294 1182 07",
    "Terms: net 30 days. Bank transfer to account 41129988, sort code 20-18-44.",
};

static int gen_pages(const char *dir, int n)
{
    for (int p = 0; p < n; p++) {
        char txt[512];
        snprintf(txt, sizeof txt, "%s/page%d.txt", dir, p);
        FILE *f = fopen(txt, "w");
        if (!f)
            return -1;
        int nl = (int)(sizeof LINES / sizeof LINES[0]);
        for (int i = 0; i < 30; i++)
            fprintf(f, "%s\n", LINES[(i + p * 5) % nl]);
        fclose(f);
        char *cmd = NULL;
        if (asprintf(&cmd,
                     "cd '%s' && text2image --text=page%d.txt --outputbase=page%d --font='DejaVu Sans'"
                     " --fonts_dir=/usr/share/fonts/truetype/dejavu --resolution=300 --ptsize=11"
                     " --xsize=2550 --ysize=3300 --margin=200 --leading=16 --exposure=0 >gen.log 2>&1",
                     dir, p, p) < 0)
            return -1;
        int rc = system(cmd);
        free(cmd);
        if (rc != 0)
            return -1;
    }
    return 0;
}

struct page {
    struct ingest_page px;
};

struct run {
    struct page *pages;
    int npages, total, osd;
    _Atomic int next;
    _Atomic int errors;
    double init_ms_sum;
    int isolate; /* pages in each thread's folio-ocr helper (the worker's default) */
    pthread_mutex_t mu;
    pthread_barrier_t start;
};

static void *ocr_thread(void *arg)
{
    struct run *r = arg;
    struct ocr_opts oo;
    ocr_opts_default(&oo);
    oo.detect_orientation = r->osd;
    oo.page_deadline_ms = 0;
    oo.isolate = r->isolate;
    struct ocr_engine *e = NULL;
    struct folio_err err = {0};
    double t0 = folio_mono_ms();
    int rc = ocr_open(&oo, &e, &err);
    pthread_mutex_lock(&r->mu);
    r->init_ms_sum += folio_mono_ms() - t0;
    pthread_mutex_unlock(&r->mu);
    if (rc)
        atomic_fetch_add(&r->errors, 1);
    pthread_barrier_wait(&r->start);
    pthread_barrier_wait(&r->start); /* the timer starts between the two */
    for (;;) {
        int i = atomic_fetch_add(&r->next, 1);
        if (i >= r->total || rc)
            break;
        struct ingest_page *pg = &r->pages[i % r->npages].px;
        struct ocr_image img = {.width = pg->width, .height = pg->height, .channels = pg->channels,
                                .stride = pg->stride, .pixels = pg->pixels, .ppi = 300};
        struct ocr_page_result res;
        if (ocr_page(e, &img, NULL, &res, &err))
            atomic_fetch_add(&r->errors, 1);
        ocr_page_result_free(&res);
    }
    ocr_close(e);
    return NULL;
}

static double cpu_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU seconds of this process plus its reaped children: with isolation
 * the OCR itself runs in folio-ocr helpers (engine/ocr_isolate.c), reaped
 * at ocr_close, so their one Tesseract Init (~0.1-0.3 s) is counted too;
 * --rounds spreads it over more pages. */
static double cpu_with_children(void)
{
    struct rusage ru;
    double c = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
        c += ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    return c;
}

/* Median of the finite values (NaN when none). */
static double median(const double *v, int n)
{
    double t[16];
    int m = 0;
    for (int i = 0; i < n && i < 16; i++)
        if (isfinite(v[i]))
            t[m++] = v[i];
    return folio_median(t, m);
}

/* Measures folio with T threads; returns pages/s (wall), fills cpu rate. */
static double run_folio(struct page *pages, int npages, int rounds, int threads, int osd, int isolate,
                        double *per_cpu_s, double *init_ms, int *errors)
{
    struct run r = {.pages = pages, .npages = npages, .osd = osd, .isolate = isolate};
    r.total = npages * rounds;
    if (r.total < threads * 2)
        r.total = threads * 2;
    pthread_mutex_init(&r.mu, NULL);
    pthread_barrier_init(&r.start, NULL, (unsigned)threads + 1);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    if (!tid)
        return -1;
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, ocr_thread, &r);
    pthread_barrier_wait(&r.start);
    double c0 = cpu_with_children(), t0 = folio_mono_ms();
    pthread_barrier_wait(&r.start);
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    double wall = (folio_mono_ms() - t0) / 1000.0, cpu = cpu_with_children() - c0;
    free(tid);
    pthread_barrier_destroy(&r.start);
    pthread_mutex_destroy(&r.mu);
    *per_cpu_s = cpu > 0 ? r.total / cpu : NAN;
    *init_ms = r.init_ms_sum / threads;
    *errors = atomic_load(&r.errors);
    return r.total / wall;
}

static void line(const char *impl, int threads, int osd, int pages, double pps, double pcpu, double init_ms,
                 double speedup, int errors, const char *extra)
{
    struct json_buf b;
    json_init(&b);
    json_raw(&b, "{\"bench\":\"ocr\",\"impl\":");
    json_str(&b, impl);
    json_raw(&b, ",\"threads\":");
    json_num(&b, threads);
    json_raw(&b, osd ? ",\"osd\":true" : ",\"osd\":false");
    json_raw(&b, ",\"pages\":");
    json_num(&b, pages);
    json_raw(&b, ",\"pages_per_s\":");
    json_num(&b, pps);
    json_raw(&b, ",\"pages_per_cpu_s\":");
    json_num(&b, pcpu);
    json_raw(&b, ",\"ms_per_page_per_thread\":");
    json_num(&b, pps > 0 ? 1000.0 * threads / pps : NAN);
    if (init_ms >= 0) {
        json_raw(&b, ",\"init_ms\":");
        json_num(&b, init_ms);
    }
    if (speedup > 0) {
        json_raw(&b, ",\"speedup_vs_1_thread\":");
        json_num(&b, speedup);
    }
    json_raw(&b, ",\"errors\":");
    json_num(&b, errors);
    if (extra)
        json_raw(&b, extra);
    char cpu[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char l[512];
    while (f && fgets(l, sizeof l, f))
        if (strncmp(l, "model name", 10) == 0 && strchr(l, ':')) {
            snprintf(cpu, sizeof cpu, "%s", strchr(l, ':') + 2);
            cpu[strcspn(cpu, "\n")] = '\0';
            break;
        }
    if (f)
        fclose(f);
    json_raw(&b, ",\"machine\":{\"cpu\":");
    json_str(&b, cpu);
    json_raw(&b, ",\"cores\":");
    json_num(&b, (double)sysconf(_SC_NPROCESSORS_ONLN));
    json_raw(&b, ",\"tesseract\":");
    json_str(&b, ocr_tesseract_version());
    json_raw(&b, "}}");
    json_emit_line(&b);
}

static double cpu_children_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* The worker's text path over one PDF: pages read, and how. */
static int pdf_text_run(struct ocr_engine *e, const uint8_t *d, size_t n, int *pdf_pages, int *ocr_pages,
                        size_t *bytes, struct folio_err *err)
{
    struct ingest_pdf *pdf = NULL;
    int rc = ingest_pdf_open(d, n, NULL, &pdf, err);
    if (rc == 0) {
        struct doc_text_ctx tc = {.ocr = e, .data = d, .len = n, .pages = ingest_pdf_pages(pdf), .pdf = pdf};
        struct engine_text t;
        memset(&t, 0, sizeof t);
        rc = worker_doc_text(&tc, &t, err);
        *pdf_pages = tc.pdf_text_pages;
        *ocr_pages = tc.ocr_pages;
        *bytes = t.text ? strlen(t.text) : 0;
        free(t.text);
    }
    ingest_pdf_close(pdf);
    return rc;
}

static int write_all(const char *path, const uint8_t *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    size_t w = f ? fwrite(d, 1, n, f) : 0;
    if (!f || fclose(f) != 0 || w != n)
        return -1;
    return 0;
}

/* --pdf: see the top of the file. */
static int bench_ocr_pdf(const char *dir, struct page *pages, int npages, int repeat)
{
    struct folio_err err = {0};
    if (npages < 1 || npages > 100 || repeat < 1 || repeat > 16)
        return FOLIO_EXIT_FAIL; /* the option parser keeps to these */
    uint8_t **jpg = calloc((size_t)npages, sizeof *jpg);
    size_t *jlen = calloc((size_t)npages, sizeof *jlen);
    tjhandle tj = tjInitCompress();
    int rc = jpg && jlen && tj ? 0 : -1;
    for (int p = 0; rc == 0 && p < npages; p++) {
        struct ingest_page *pg = &pages[p].px;
        unsigned char *jb = NULL;
        unsigned long jl = 0;
        if (pg->channels != 1 || pg->width != 2550 || pg->height != 3300 ||
            tjCompress2(tj, pg->pixels, pg->width, pg->stride, pg->height, TJPF_GRAY, &jb, &jl, TJSAMP_GRAY, 85,
                        0) != 0) {
            rc = -1;
        } else if ((jpg[p] = malloc(jl)) != NULL) {
            memcpy(jpg[p], jb, jl);
            jlen[p] = jl;
        } else {
            rc = -1;
        }
        tjFree(jb);
    }
    if (tj)
        tjDestroy(tj);
    struct bench_pdf_spec spec[2] = {
        {.pages = npages, .scan = 1, .jpeg = jpg, .jpeg_len = jlen, .njpeg = npages, .jpeg_w = 2550,
         .jpeg_h = 3300, .jpeg_gray = 1},
        {.pages = npages, .scan = 0, .lines = LINES, .nlines = (int)(sizeof LINES / sizeof LINES[0])}};
    static const char *const KIND[2] = {"scan", "text"};
    uint8_t *pdf[2] = {NULL, NULL};
    size_t plen[2] = {0, 0};
    char path[2][700];
    for (int k = 0; rc == 0 && k < 2; k++) {
        snprintf(path[k], sizeof path[k], "%s/%s.pdf", dir, KIND[k]);
        if (bench_pdf_bytes(&spec[k], &pdf[k], &plen[k], &err) != 0 || write_all(path[k], pdf[k], plen[k]) != 0)
            rc = -1;
    }
    if (rc) {
        if (err.msg[0])
            folio_err_print(stderr, &err);
        fprintf(stderr, "folio bench ocr: cannot make the PDFs in %s\n", dir);
    }
    struct ocr_opts oo;
    ocr_opts_default(&oo);
    oo.detect_orientation = 0; /* as the CLI: no OSD */
    oo.page_deadline_ms = 0;
    struct ocr_engine *e = NULL;
    if (rc == 0 && ocr_open(&oo, &e, &err) != 0) {
        folio_err_print(stderr, &err);
        rc = -1;
    }
    char cpu[256];
    folio_cpu_model(cpu, sizeof cpu);
    for (int k = 0; rc == 0 && k < 2; k++) {
        double f_ms[16], f_cpu[16], r_ms[16], r_cpu[16];
        int pdf_pages = 0, ocr_pages = 0, ref_err = 0;
        size_t bytes = 0;
        for (int rep = 0; rep < repeat && rc == 0; rep++) {
            double c0 = cpu_with_children(), t0 = folio_mono_ms();
            if (pdf_text_run(e, pdf[k], plen[k], &pdf_pages, &ocr_pages, &bytes, &err) != 0) {
                folio_err_print(stderr, &err);
                rc = -1;
                break;
            }
            f_ms[rep] = (folio_mono_ms() - t0) / npages;
            f_cpu[rep] = (cpu_with_children() - c0) * 1000.0 / npages;
            char *cmd = NULL;
            int made = k == 0 ? asprintf(&cmd,
                                         "cd '%s' && rm -f ref-*.pgm && pdftoppm -r 300 -gray scan.pdf ref && "
                                         "ls ref-*.pgm > ref.txt && OMP_THREAD_LIMIT=1 tesseract ref.txt refout "
                                         ">ref.log 2>&1", dir)
                              : asprintf(&cmd, "pdftotext '%s' /dev/null", path[k]);
            double rc0 = cpu_children_s();
            t0 = folio_mono_ms();
            int st = made >= 0 ? system(cmd) : -1;
            free(cmd);
            r_ms[rep] = st == 0 ? (folio_mono_ms() - t0) / npages : NAN;
            r_cpu[rep] = st == 0 ? (cpu_children_s() - rc0) * 1000.0 / npages : NAN;
            ref_err += st != 0;
        }
        if (rc)
            break;
        double fm = folio_median(f_ms, repeat), fc = folio_median(f_cpu, repeat);
        double rm = folio_median(r_ms, repeat), rcpu = folio_median(r_cpu, repeat);
        struct json_buf b;
        json_init(&b);
        char s1[900];
        snprintf(s1, sizeof s1,
                 "{\"bench\":\"ocr\",\"input\":\"pdf-%s\",\"pages\":%d,\"bytes\":%zu,\"repeats\":%d,"
                 "\"statistic\":\"median\",\"osd\":false,\"pages_text_layer\":%d,\"pages_ocr\":%d,"
                 "\"text_bytes\":%zu,\"folio_ms_per_page\":%.1f,\"folio_cpu_ms_per_page\":%.1f,"
                 "\"reference\":\"%s\",\"reference_ms_per_page\":%.1f,\"reference_cpu_ms_per_page\":%.1f,"
                 "\"reference_errors\":%d,\"folio_speed_vs_reference\":%.3f,\"folio_cpu_vs_reference\":%.3f,"
                 "\"machine\":{\"cpu\":",
                 KIND[k], npages, plen[k], repeat, pdf_pages, ocr_pages, bytes, fm, fc,
                 k == 0 ? "pdftoppm -r 300 -gray + tesseract CLI" : "pdftotext", rm, rcpu, ref_err, rm / fm,
                 rcpu / fc);
        json_raw(&b, s1);
        json_str(&b, cpu);
        snprintf(s1, sizeof s1, ",\"cores\":%ld,\"tesseract\":", sysconf(_SC_NPROCESSORS_ONLN));
        json_raw(&b, s1);
        json_str(&b, ocr_tesseract_version());
        json_raw(&b, "}}");
        json_print_line(&b, stdout);
    }
    ocr_close(e);
    for (int p = 0; jpg && p < npages; p++)
        free(jpg[p]);
    free(jpg);
    free(jlen);
    free(pdf[0]);
    free(pdf[1]);
    return rc ? FOLIO_EXIT_FAIL : FOLIO_EXIT_OK;
}

struct ocr_args {
    int npages, rounds, no_cli, repeat, in_process, pdf;
    const char *threads, *keep;
};
#define AT(m, type) CLI_AT(struct ocr_args, m, type)
static const struct cli_opt OPTS[] = {
    {.name = "pages", .kind = CLI_INT, .off = AT(npages, int), .min = 1, .max = 100, .arg = "N",
     .help = "distinct pages generated (default 4)"},
    {.name = "threads", .kind = CLI_STR, .off = AT(threads, const char *), .arg = "LIST",
     .help = "OCR thread counts to measure (default 1,2,..cores)"},
    {.name = "rounds", .kind = CLI_INT, .off = AT(rounds, int), .min = 1, .max = 100, .arg = "N",
     .help = "passes over the pages per measurement (default 1)"},
    {.name = "repeat", .kind = CLI_INT, .off = AT(repeat, int), .min = 1, .max = 16, .arg = "N",
     .help = "folio-vs-CLI measurements, alternated; medians reported (default 3)"},
    {.name = "no-cli", .kind = CLI_FLAG, .off = AT(no_cli, int), .help = "skip the tesseract CLI comparison"},
    {.name = "keep", .kind = CLI_STR, .off = AT(keep, const char *), .arg = "DIR",
     .help = "generate pages into DIR and keep them"},
    {.name = "in-process", .kind = CLI_FLAG, .off = AT(in_process, int),
     .help = "OCR in the calling thread, not in a folio-ocr helper process\n"
             "(the worker's default; shows what isolation costs)"},
    {.name = "pdf", .kind = CLI_FLAG, .off = AT(pdf, int),
     .help = "instead: the pages as a scanned-image PDF and as a text PDF\n"
             "through the worker's text path (text layer, else render at\n"
             "300 dpi + OCR) vs pdftoppm + tesseract CLI and pdftotext;\n"
             "needs poppler-utils"},
};
/* Extra arguments are ignored, as they always were. */
static const struct cli_cmd CMD = {.name = "bench ocr", .usage = USAGE, .opts = OPTS,
                                   .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 1 << 30, .help_col = 19};

int bench_ocr(int argc, char **argv)
{
    struct ocr_args a = {.npages = 4, .rounds = 1, .repeat = 3};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    int npages = a.npages, rounds = a.rounds, cli = !a.no_cli, repeat = a.repeat, isolate = !a.in_process,
        pdf = a.pdf;
    const char *tl = a.threads, *keep = a.keep;
    long long v;
    int levels[16], nl = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (tl) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", tl);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t && nl < 16; t = strtok_r(NULL, ",", &save)) {
            if (folio_parse_int(t, 1, 256, &v))
                return cli_usage_error("bench ocr", "--threads wants numbers 1..256, got '%s'", t);
            levels[nl++] = (int)v;
        }
    } else {
        for (int t = 1; t < cores && nl < 15; t *= 2)
            levels[nl++] = t;
        levels[nl++] = (int)(cores > 0 ? cores : 1);
    }
    ocr_process_init();

    char tmp[] = "/tmp/folio-bench-ocr-XXXXXX";
    const char *dir = keep;
    if (!dir) {
        if (!mkdtemp(tmp)) {
            fprintf(stderr, "folio: error: cannot create a temporary folder for the pages\n");
            return FOLIO_EXIT_FAIL;
        }
        dir = tmp;
    } else {
        struct folio_err e = {0};
        if (folio_mkdirs(keep, &e)) {
            folio_err_print(stderr, &e);
            return FOLIO_EXIT_FAIL;
        }
    }
    if (gen_pages(dir, npages)) {
        fprintf(stderr, "folio: error: could not render the benchmark pages with text2image\n"
                        "  detail: see %s/gen.log\n"
                        "  hint: apt-get install tesseract-ocr fonts-dejavu-core (ops/deps.sh)\n",
                dir);
        return FOLIO_EXIT_FAIL;
    }
    struct page *pages = calloc(npages > 0 ? (size_t)npages : 1, sizeof *pages);
    if (!pages)
        return FOLIO_EXIT_FAIL;
    int rc = FOLIO_EXIT_OK;
    for (int p = 0; p < npages && rc == FOLIO_EXIT_OK; p++) {
        char path[600];
        snprintf(path, sizeof path, "%s/page%d.tif", dir, p);
        uint8_t *data = NULL;
        size_t len = 0;
        struct folio_err err = {0};
        if (folio_read_file(path, 64u << 20, &data, &len, &err) ||
            ingest_decode_page(data, len, 0, 0, 1, &pages[p].px, &err)) {
            folio_err_print(stderr, &err);
            rc = FOLIO_EXIT_FAIL;
        }
        free(data);
    }

    if (pdf) {
        if (rc == FOLIO_EXIT_OK)
            rc = bench_ocr_pdf(dir, pages, npages, repeat);
        goto done;
    }

    /* Folio (no OSD) and the CLI do the same work; they are measured
     * alternately, --repeat times, and compared by their medians, so a
     * burst of load from other processes hits both alike. */
    double f_pps[16], f_cpu[16], c_pps[16], c_cpu[16], f_init = 0;
    int reps = 0, f_err = 0, c_err = 0;
    char list[600];
    snprintf(list, sizeof list, "%s/list.txt", dir);
    FILE *lf = fopen(list, "w");
    for (int r = 0; lf && r < rounds; r++)
        for (int p = 0; p < npages; p++)
            fprintf(lf, "%s/page%d.tif\n", dir, p);
    if (lf)
        fclose(lf);
    for (int rep = 0; rep < repeat && rc == FOLIO_EXIT_OK; rep++) {
        int errors = 0;
        f_pps[rep] = run_folio(pages, npages, rounds, 1, 0, isolate, &f_cpu[rep], &f_init, &errors);
        f_err += errors;
        c_pps[rep] = c_cpu[rep] = NAN;
        if (cli) {
            struct rusage ru0, ru1;
            getrusage(RUSAGE_CHILDREN, &ru0);
            char *cmd = NULL;
            double t0 = folio_mono_ms();
            int st = -1;
            if (asprintf(&cmd, "OMP_THREAD_LIMIT=1 tesseract '%s' '%s/cli' >'%s/cli.log' 2>&1", list, dir, dir) >= 0) {
                st = system(cmd);
                free(cmd);
            }
            double wall = (folio_mono_ms() - t0) / 1000.0;
            getrusage(RUSAGE_CHILDREN, &ru1);
            double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                         (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6 +
                         (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                         (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
            int n = npages * rounds;
            if (st == 0 && cpu > 0) {
                c_pps[rep] = n / wall;
                c_cpu[rep] = n / cpu;
            } else {
                c_err++;
            }
        }
        reps++;
    }
    double fm_pps = median(f_pps, reps), fm_cpu = median(f_cpu, reps);
    char extra[300];
    snprintf(extra, sizeof extra, ",\"repeats\":%d,\"statistic\":\"median\"", reps);
    line(isolate ? "folio" : "folio-inprocess", 1, 0, npages * rounds, fm_pps, fm_cpu, f_init, 0, f_err, extra);
    if (cli) {
        double cm_pps = median(c_pps, reps), cm_cpu = median(c_cpu, reps);
        snprintf(extra, sizeof extra,
                 ",\"repeats\":%d,\"statistic\":\"median\",\"includes_one_init\":true,"
                 "\"folio_vs_cli_per_core\":%.3f",
                 reps, cm_cpu > 0 ? fm_cpu / cm_cpu : NAN);
        line("tesseract-cli", 1, 0, npages * rounds, cm_pps, cm_cpu, -1, 0, c_err, extra);
    }

    /* Scaling: the worker's default path (with OSD), 1..N threads. */
    double base_pps = 0;
    for (int li = 0; li < nl && rc == FOLIO_EXIT_OK; li++) {
        int T = levels[li];
        double pcpu = 0, init = 0;
        int errors = 0;
        double pps = run_folio(pages, npages, rounds, T, 1, isolate, &pcpu, &init, &errors);
        if (T == 1)
            base_pps = pps;
        line(isolate ? "folio" : "folio-inprocess", T, 1, npages * rounds < T * 2 ? T * 2 : npages * rounds, pps, pcpu, init,
             base_pps > 0 ? pps / base_pps : 0, errors, NULL);
    }
done:
    for (int p = 0; p < npages; p++)
        ingest_page_free(&pages[p].px);
    free(pages);
    if (!keep) {
        char *cmd = NULL;
        if (asprintf(&cmd, "rm -rf '%s'", tmp) >= 0) {
            int ignored = system(cmd);
            (void)ignored;
            free(cmd);
        }
    }
    return rc;
}
