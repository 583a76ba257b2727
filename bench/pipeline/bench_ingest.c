/*
 * folio bench ingest: files/s and MB/s of the whole ingest stage (scan,
 * read, validate, sha256, enqueue into PostgreSQL, move) against the floor
 * it cannot beat: the same files read, decoded by bare TurboJPEG at 1/8
 * scale and hashed, on the same number of threads, in the same run.
 *
 * The files are 300-dpi Letter scans (2550x3300, 4:2:0, quality 85) made
 * here: a few distinct pages, each copy made unique by a JPEG comment
 * segment, so every file is new content (no dedupe shortcut) yet all cost
 * the same to decode. The documents the run inserts are deleted afterwards
 * unless --keep is given. One JSON object per line on stdout.
 */
#include "bench/pipeline/bench.h"
#include "pipeline/cli/cli.h"
#include "pipeline/ingest/ingest_run.h"
#include "pipeline/db/migrate.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: folio bench ingest [--db CONNINFO] [--files N] [--rounds R] [--jobs N] [--pages K] [--dir DIR] [--keep]\n"
    "                          [--pdf scan|text] [--pdf-pages P]\n"
    "\n"
    "Generates N (default 300) distinct 2550x3300 JPEG scans, then measures\n"
    "  bare:   read + TurboJPEG 1/8-scale decode + sha256, on --jobs threads\n"
    "          (--pdf: PDFs of P pages, default 4, scanned images or text, K\n"
    "          variants, default 2; bare is read + pdftoppm -r 18 -gray + sha256)\n"
    "  ingest: folio ingest (one-shot, --stable-ms 0) into the database\n"
    "and prints one JSON line each (files/s, MB/s, CPU ms per file, ratio, the\n"
    "machine), R rounds (default 3) on fresh files, then a summary of medians.\n"
    "The database must be reachable (--db, $FOLIO_DB); the schema is migrated\n"
    "if needed and the bench's documents are deleted afterwards unless --keep.\n"
    "For a local server: ops/pg-local.sh start /tmp/folio-pg 5432 --fast\n";

struct bench_files {
    char **paths;
    uint8_t (*sha)[FOLIO_SHA256_LEN];
    int n;
    uint64_t bytes;
};

struct bare_ctx {
    struct bench_files *f;
    int pdf; /* the floor is pdftoppm at 18 dpi, not TurboJPEG */
    atomic_int next;
    atomic_int errors;
};

/* The PDF floor, one file: what ingest's probe draws, by poppler's own
 * tool (read and sha256 as for a JPEG). */
static int bare_pdf_file(const char *path)
{
    uint8_t *data = NULL;
    size_t len = 0;
    struct folio_err err;
    uint8_t sha[FOLIO_SHA256_LEN];
    char cmd[PATH_MAX + 64];
    int bad = folio_read_file(path, (size_t)1 << 30, &data, &len, &err) != 0 || folio_sha256(data, len, sha) != 0 ||
              folio_snprintf(cmd, sizeof cmd, "pdftoppm -r 18 -gray '%s' > /dev/null", path) != 0 || system(cmd) != 0;
    free(data);
    return bad;
}

static void *bare_worker(void *arg)
{
    struct bare_ctx *b = arg;
    tjhandle tj = b->pdf ? NULL : tjInitDecompress();
    if (!tj && !b->pdf) {
        atomic_fetch_add(&b->errors, 1);
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (;;) {
        int i = atomic_fetch_add(&b->next, 1);
        if (i >= b->f->n)
            break;
        if (b->pdf) {
            if (bare_pdf_file(b->f->paths[i]))
                atomic_fetch_add(&b->errors, 1);
            continue;
        }
        uint8_t *data = NULL;
        size_t len = 0;
        struct folio_err err;
        int w = 0, h = 0, ss = 0, cs = 0;
        uint8_t sha[FOLIO_SHA256_LEN];
        if (folio_read_file(b->f->paths[i], (size_t)1 << 30, &data, &len, &err) != 0 ||
            tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &ss, &cs) != 0) {
            atomic_fetch_add(&b->errors, 1);
            free(data);
            continue;
        }
        tjscalingfactor eighth = {1, 8};
        size_t need = (size_t)TJSCALED(w, eighth) * (size_t)TJSCALED(h, eighth);
        if (need > cap) {
            free(buf);
            buf = malloc(need);
            cap = buf ? need : 0;
        }
        if (!buf || tjDecompress2(tj, data, (unsigned long)len, buf, TJSCALED(w, eighth), 0,
                                  TJSCALED(h, eighth), TJPF_GRAY, 0) != 0 ||
            folio_sha256(data, len, sha) != 0)
            atomic_fetch_add(&b->errors, 1);
        free(data);
    }
    free(buf);
    if (tj)
        tjDestroy(tj);
    return NULL;
}

static void machine_json(char *buf, size_t n, int jobs)
{
    char host[128] = "unknown", model[160] = "unknown";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    c += 2;
                    c[strcspn(c, "\n")] = '\0';
                    snprintf(model, sizeof model, "%s", c);
                }
                break;
            }
        }
        fclose(f);
    }
    buf[0] = '\0';
    strncat(buf, "{\"host\": ", n - 1);
    ingest_json_str(buf, n, host);
    strncat(buf, ", \"cpu\": ", n - strlen(buf) - 1);
    ingest_json_str(buf, n, model);
    char tail[96];
    snprintf(tail, sizeof tail, ", \"online_cpus\": %ld, \"threads\": %d}", sysconf(_SC_NPROCESSORS_ONLN), jobs);
    strncat(buf, tail, n - strlen(buf) - 1);
}

/* CPU time of this process (all threads) and its reaped children (the PDF
 * helper, pdftoppm), ms: robust where wall time is not, on a machine
 * shared with other work. */
static double cpu_ms(void)
{
    double ms = 0;
    int who[2] = {RUSAGE_SELF, RUSAGE_CHILDREN};
    for (int i = 0; i < 2; i++) {
        struct rusage ru;
        if (getrusage(who[i], &ru) == 0)
            ms += (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                  (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    }
    return ms;
}

/* The database half alone: the same files as already-validated items,
 * 64 per transaction through the same writer code, no decoding. Their
 * sha256 is altered so they do not collide with the end-to-end run. */
static int db_only(const char *conninfo, const struct bench_files *f, uint8_t (*fake_sha)[FOLIO_SHA256_LEN],
                   int pdf_pages, double *secs, double *cpu_per_file, struct folio_err *err)
{
    struct ingest_db d = {.c = NULL, .model_key = "bench-db-only", .after = INGEST_AFTER_MOVE};
    struct ingest_item **items = calloc((size_t)f->n, sizeof *items);
    int rc = items ? ingest_db_open(&d, conninfo, err) : folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < f->n; i++) {
        struct ingest_item *it = calloc(1, sizeof *it);
        if (!it) {
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory");
            break;
        }
        items[i] = it;
        rc = folio_read_file(f->paths[i], (size_t)1 << 30, &it->data, &it->len, err);
        if (rc)
            break;
        it->status = ITEM_ACCEPT;
        memcpy(it->sha, f->sha[i], FOLIO_SHA256_LEN);
        it->sha[0] ^= 0x5a;
        memcpy(fake_sha[i], it->sha, FOLIO_SHA256_LEN);
        it->have_sha = 1;
        snprintf(it->info.media_type, sizeof it->info.media_type, pdf_pages ? "application/pdf" : "image/jpeg");
        it->info.pages = pdf_pages ? pdf_pages : 1;
        it->info.width = 2550;
        it->info.height = 3300;
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s.db-only", f->paths[i]);
        it->cand.path = strdup(path);
        it->cand.sig.size = it->len;
        it->cand.sig.mtime_ns = folio_mono_ns();
        snprintf(it->path_display, sizeof it->path_display, "%s", path);
        snprintf(it->name_display, sizeof it->name_display, "db-only");
        if (!it->cand.path)
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    }
    double c0 = cpu_ms(), t0 = folio_mono_ms();
    for (int i = 0; rc == 0 && i < f->n; i += 64) {
        int k = f->n - i < 64 ? f->n - i : 64;
        if (ingest_db_commit(&d, items + i, (size_t)k, err) != INGEST_DB_OK)
            rc = FOLIO_EDB;
    }
    *secs = (folio_mono_ms() - t0) / 1000.0;
    *cpu_per_file = (cpu_ms() - c0) / f->n;
    ingest_db_close(&d);
    for (int i = 0; items && i < f->n; i++)
        ingest_item_free(items[i]);
    free(items);
    return rc;
}

static int remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *de;
            while ((de = readdir(d)) != NULL) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                    continue;
                char p[PATH_MAX];
                if (folio_snprintf(p, sizeof p, "%s/%s", path, de->d_name) == 0)
                    remove_tree(p);
            }
            closedir(d);
        }
        return rmdir(path);
    }
    return unlink(path);
}

/* Writes tag into the PDF's fixed-width comment (BENCH_PDF_TAG_AT): same
 * length, so the cross-reference offsets stay right. */
static uint8_t *unique_pdf(const uint8_t *p, size_t n, const char *tag, size_t *out_len)
{
    uint8_t *o = malloc(n);
    if (!o)
        return NULL;
    memcpy(o, p, n);
    size_t room = BENCH_PDF_TAG_LEN - 2, tl = strlen(tag);
    memset(o + BENCH_PDF_TAG_AT + 1, ' ', room);
    memcpy(o + BENCH_PDF_TAG_AT + 1, tag, tl < room ? tl : room);
    *out_len = n;
    return o;
}

/* Inserts a COM segment after SOI so that copies of a page differ. */
static uint8_t *unique_copy(const uint8_t *j, size_t n, const char *tag, size_t *out_len)
{
    size_t tl = strlen(tag);
    uint8_t *o = malloc(n + 4 + tl);
    if (!o)
        return NULL;
    memcpy(o, j, 2);
    o[2] = 0xFF;
    o[3] = 0xFE;
    o[4] = (uint8_t)((tl + 2) >> 8);
    o[5] = (uint8_t)(tl + 2);
    memcpy(o + 6, tag, tl);
    memcpy(o + 6 + tl, j + 2, n - 2);
    *out_len = n + 4 + tl;
    return o;
}

static int delete_documents(const char *conninfo, const struct bench_files *f, struct folio_err *err)
{
    PGconn *c;
    int rc = db_connect(conninfo, "folio-bench", &c, err);
    if (rc)
        return rc;
    /* One bytea[] parameter in text form: {"\\x...","\\x..."}. */
    size_t cap = (size_t)f->n * (2 * FOLIO_SHA256_LEN + 8) + 4;
    char *arr = malloc(cap);
    if (!arr) {
        PQfinish(c);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    }
    size_t o = 0;
    arr[o++] = '{';
    for (int i = 0; i < f->n; i++) {
        char hex[2 * FOLIO_SHA256_LEN + 1];
        folio_hex(f->sha[i], FOLIO_SHA256_LEN, hex);
        o += (size_t)snprintf(arr + o, cap - o, "%s\"\\\\x%s\"", i ? "," : "", hex);
    }
    arr[o++] = '}';
    arr[o] = '\0';
    const char *v[1] = {arr};
    PGresult *r = PQexecParams(c, "DELETE FROM folio.documents WHERE sha256 = ANY($1::bytea[])", 1, NULL, v,
                               NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        rc = db_err_from_result(r, c, "deleting the bench documents", err);
    else
        PQclear(r);
    free(arr);
    PQfinish(c);
    return rc;
}

struct ingest_bench_args {
    const char *db, *dir;
    int files, jobs, pages, rounds, pdf_pages, keep, pdf, pages_set;
};
#define AT(m, type) CLI_AT(struct ingest_bench_args, m, type)

/* --pages also says it was given: the PDF inputs then take it as variants. */
static int take_pages(const struct cli_opt *o, void *args, const char *v, const char *cmd)
{
    (void)cmd;
    struct ingest_bench_args *a = args;
    long long n;
    if (folio_parse_int(v, o->min, o->max, &n))
        return -1;
    a->pages = (int)n;
    a->pages_set = 1;
    return 0;
}

/* --pdf scan|text: 1 scanned pages, 2 text. */
static int take_pdf(const struct cli_opt *o, void *args, const char *v, const char *cmd)
{
    (void)o, (void)cmd;
    int k = strcmp(v, "scan") == 0 ? 1 : strcmp(v, "text") == 0 ? 2 : 0;
    ((struct ingest_bench_args *)args)->pdf = k;
    return k ? 0 : -1;
}

static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *)},
    {.name = "files", .kind = CLI_INT, .off = AT(files, int), .min = 1, .max = 100000, .want = "1 to 100000"},
    {.name = "jobs", .kind = CLI_INT, .off = AT(jobs, int), .min = 1, .max = 256, .want = "1 to 256"},
    {.name = "pages", .kind = CLI_FN, .fn = take_pages, .min = 1, .max = 1000, .want = "1 to 1000"},
    {.name = "dir", .kind = CLI_STR, .off = AT(dir, const char *)},
    {.name = "keep", .kind = CLI_FLAG, .off = AT(keep, int)},
    {.name = "rounds", .kind = CLI_INT, .off = AT(rounds, int), .min = 1, .max = 100, .want = "1 to 100"},
    {.name = "pdf", .kind = CLI_FN, .fn = take_pdf, .want = "scan or text"},
    {.name = "pdf-pages", .kind = CLI_INT, .off = AT(pdf_pages, int), .min = 1, .max = 1000, .want = "1 to 1000"},
};
/* Extra arguments are ignored, as they always were. */
static const struct cli_cmd CMD = {.name = "bench ingest", .usage = USAGE, .opts = OPTS,
                                   .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 1 << 30};

int bench_ingest(int argc, char **argv)
{
    struct ingest_bench_args a = {.files = 300, .jobs = (int)sysconf(_SC_NPROCESSORS_ONLN), .pages = 8,
                                  .rounds = 3, .pdf_pages = 4};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = a.db, *dir_arg = a.dir;
    long long files = a.files, jobs = a.jobs, pages = a.pages, rounds = a.rounds, pdf_pages = a.pdf_pages;
    int keep = a.keep, pdf = a.pdf, pages_set = a.pages_set; /* pdf: 1 scan, 2 text */
    if (jobs < 1)
        jobs = 1;
    if (pdf && system("pdftoppm -v >/dev/null 2>&1") != 0) {
        fprintf(stderr, "folio bench ingest: --pdf needs pdftoppm (apt-get install poppler-utils)\n");
        return FOLIO_EXIT_FAIL;
    }
    const char *input = pdf == 1 ? "pdf-scan" : pdf == 2 ? "pdf-text" : "jpeg";
    const char *ext = pdf ? "pdf" : "jpg";
    const char *bare_what = pdf ? "bare_pdftoppm18_sha256" : "bare_decode_sha256";
    int per_file = pdf ? (int)pdf_pages : 1;
    const char *conninfo = db_conninfo(db);
    struct folio_err err = {0};

    /* Schema first: a bench against an empty database should just work. */
    PGconn *c;
    if (db_connect(conninfo, "folio-bench", &c, &err) != 0) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    struct migrate_opts mo = {0};
    int applied = 0;
    int rc = migrate_run(c, &mo, &applied, &err);
    PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }

    char dir[PATH_MAX];
    if (dir_arg)
        snprintf(dir, sizeof dir, "%s", dir_arg);
    else
        snprintf(dir, sizeof dir, "/tmp/folio-bench-ingest-%ld", (long)getpid());
    if (folio_mkdirs(dir, &err) != 0) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    struct bench_files f = {0};
    f.n = (int)files;
    f.paths = calloc((size_t)f.n, sizeof *f.paths);
    f.sha = calloc((size_t)f.n * (size_t)rounds * 2, sizeof *f.sha);
    uint8_t **base = calloc((size_t)pages, sizeof *base);
    size_t *base_len = calloc((size_t)pages, sizeof *base_len);
    double *r_bare = calloc((size_t)rounds, sizeof(double)), *r_ing = calloc((size_t)rounds, sizeof(double));
    double *r_ratio = calloc((size_t)rounds, sizeof(double));
    double *c_bare = calloc((size_t)rounds, sizeof(double)), *c_ing = calloc((size_t)rounds, sizeof(double));
    if (!f.paths || !f.sha || !base || !base_len || !r_bare || !r_ing || !r_ratio || !c_bare || !c_ing) {
        fprintf(stderr, "folio: error: out of memory\n");
        return FOLIO_EXIT_FAIL;
    }
    /* a PDF variant holds pdf_pages scans already: fewer variants do */
    if (pdf && !pages_set)
        pages = 2;
    for (int k = 0; k < pages; k++) {
        if (pdf) {
            struct bench_pdf_spec sp = {.pages = (int)pdf_pages, .scan = pdf == 1};
            if (bench_pdf_bytes(&sp, &base[k], &base_len[k], &err) != 0) {
                folio_err_print(stderr, &err);
                return FOLIO_EXIT_FAIL;
            }
        } else {
            base[k] = bench_scan_page_jpeg(2550, 3300, (uint32_t)(k + 1), &base_len[k]);
        }
        if (!base[k]) {
            fprintf(stderr, "folio: error: cannot encode the bench pages\n");
            return FOLIO_EXIT_FAIL;
        }
    }
    char machine[512];
    machine_json(machine, sizeof machine, (int)jobs);
    int done_rounds = 0;
    for (int round = 0; round < rounds && rc == 0; round++) {
        /* Fresh, never-seen files each round: the last one was moved away. */
        f.bytes = 0;
        for (int i = 0; i < f.n; i++) {
            char tag[96], path[PATH_MAX];
            snprintf(tag, sizeof tag, "folio bench %ld %lld %d %d", (long)getpid(), (long long)folio_mono_ns(),
                     round, i);
            size_t len = 0;
            uint8_t *d = pdf ? unique_pdf(base[i % pages], base_len[i % pages], tag, &len)
                             : unique_copy(base[i % pages], base_len[i % pages], tag, &len);
            snprintf(path, sizeof path, "%s/scan-%05d.%s", dir, i, ext);
            FILE *fp = fopen(path, "wb");
            size_t wrote = d && fp ? fwrite(d, 1, len, fp) : 0;
            if (fp)
                fclose(fp);
            if (wrote != len) {
                fprintf(stderr, "folio: error: cannot write %s: %s\n", path, strerror(errno));
                return FOLIO_EXIT_FAIL;
            }
            folio_sha256(d, len, f.sha[(size_t)round * (size_t)f.n + (size_t)i]);
            free(f.paths[i]);
            f.paths[i] = strdup(path);
            f.bytes += len;
            free(d);
        }

        /* Bare: the same files, same threads, nothing but read + decode + hash. */
        struct bare_ctx bc = {.f = &f};
        atomic_init(&bc.next, 0);
        atomic_init(&bc.errors, 0);
        pthread_t *th = calloc((size_t)jobs, sizeof *th);
        double c0 = cpu_ms(), t0 = folio_mono_ms();
        int started = 0;
        bc.pdf = pdf;
        for (; th && started < jobs; started++)
            if (pthread_create(&th[started], NULL, bare_worker, &bc) != 0)
                break;
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        double bare_s = (folio_mono_ms() - t0) / 1000.0;
        c_bare[round] = (cpu_ms() - c0) / f.n;
        free(th);
        r_bare[round] = f.n / bare_s;
        printf("{\"bench\": \"ingest\", \"what\": \"%s\", \"input\": \"%s\", \"pages_per_file\": %d, "
               "\"round\": %d, \"files\": %d, \"bytes\": %llu, "
               "\"width\": 2550, \"height\": 3300, \"scale\": \"%s\", \"errors\": %d, \"seconds\": %.3f, "
               "\"files_per_s\": %.1f, \"mb_per_s\": %.1f, \"cpu_ms_per_file\": %.2f, \"machine\": %s}\n",
               bare_what, input, per_file, round, f.n, (unsigned long long)f.bytes, pdf ? "18 dpi" : "1/8",
               atomic_load(&bc.errors), bare_s, r_bare[round], (double)f.bytes / 1e6 / bare_s, c_bare[round],
               machine);
        fflush(stdout);

        double db_s = 0, db_cpu = 0;
        rc = db_only(conninfo, &f, f.sha + (size_t)(rounds + round) * (size_t)f.n, pdf ? per_file : 0, &db_s,
                     &db_cpu, &err);
        if (rc) {
            folio_err_print(stderr, &err);
            break;
        }
        printf("{\"bench\": \"ingest\", \"what\": \"db_only\", \"input\": \"%s\", \"round\": %d, \"files\": %d, "
               "\"bytes\": %llu, "
               "\"batch\": 64, \"seconds\": %.3f, \"files_per_s\": %.1f, \"mb_per_s\": %.1f, "
               "\"client_cpu_ms_per_file\": %.2f, \"machine\": %s}\n",
               input, round, f.n, (unsigned long long)f.bytes, db_s, f.n / db_s, (double)f.bytes / 1e6 / db_s, db_cpu,
               machine);
        fflush(stdout);

        /* End to end: the real stage, one-shot, into the database. */
        struct ingest_run_opts o;
        ingest_run_opts_default(&o);
        o.dir = dir;
        o.conninfo = conninfo;
        o.stable_ms = 0;
        o.jobs = (int)jobs;
        o.progress = 0;
        o.db_wait_s = 10;
        struct ingest_run_stats st;
        c0 = cpu_ms();
        rc = ingest_run(&o, &st, &err);
        c_ing[round] = (cpu_ms() - c0) / f.n;
        if (rc) {
            folio_err_print(stderr, &err);
            break;
        }
        r_ing[round] = st.seconds > 0 ? (double)st.files / st.seconds : 0;
        r_ratio[round] = r_bare[round] > 0 ? r_ing[round] / r_bare[round] : 0;
        printf("{\"bench\": \"ingest\", \"what\": \"ingest_end_to_end\", \"input\": \"%s\", \"pages_per_file\": %d, "
               "\"round\": %d, \"files\": %llu, \"bytes\": %llu, "
               "\"new_documents\": %llu, \"rejected\": %llu, \"batches\": %llu, \"seconds\": %.3f, "
               "\"files_per_s\": %.1f, \"mb_per_s\": %.1f, \"cpu_ms_per_file\": %.2f, \"ratio_vs_bare\": %.3f, "
               "\"machine\": %s}\n",
               input, per_file, round, (unsigned long long)st.files, (unsigned long long)st.bytes,
               (unsigned long long)st.new_documents, (unsigned long long)st.rejected,
               (unsigned long long)st.batches, st.seconds, r_ing[round], (double)st.bytes / 1e6 / st.seconds,
               c_ing[round], r_ratio[round], machine);
        fflush(stdout);
        if (st.new_documents != (uint64_t)f.n)
            fprintf(stderr, "folio: warning: %llu of %d files became new documents\n",
                    (unsigned long long)st.new_documents, f.n);
        char sub[PATH_MAX];
        snprintf(sub, sizeof sub, "%s/.folio", dir);
        remove_tree(sub);
        done_rounds++;
    }
    if (done_rounds > 0) {
        folio_sort_doubles(r_bare, (size_t)done_rounds);
        folio_sort_doubles(r_ing, (size_t)done_rounds);
        folio_sort_doubles(r_ratio, (size_t)done_rounds);
        folio_sort_doubles(c_bare, (size_t)done_rounds);
        folio_sort_doubles(c_ing, (size_t)done_rounds);
        int m = done_rounds / 2;
        if (pdf) /* issue 15 sets no ingest targets for PDF: the figures alone */
            printf("{\"bench\": \"ingest\", \"what\": \"summary\", \"input\": \"%s\", \"pages_per_file\": %d, "
                   "\"rounds\": %d, \"files_per_round\": %d, \"bare_files_per_s\": %.1f, "
                   "\"ingest_files_per_s\": %.1f, \"ingest_pages_per_s\": %.1f, \"ratio_vs_bare\": %.3f, "
                   "\"bare_cpu_ms_per_file\": %.2f, \"ingest_cpu_ms_per_file\": %.2f, \"machine\": %s}\n",
                   input, per_file, done_rounds, f.n, r_bare[m], r_ing[m], r_ing[m] * per_file, r_ratio[m], c_bare[m],
                   c_ing[m], machine);
        else
        printf("{\"bench\": \"ingest\", \"what\": \"summary\", \"input\": \"jpeg\", \"rounds\": %d, \"files_per_round\": %d, "
               "\"bare_files_per_s\": %.1f, \"ingest_files_per_s\": %.1f, \"ratio_vs_bare\": %.3f, "
               "\"bare_cpu_ms_per_file\": %.2f, \"ingest_cpu_ms_per_file\": %.2f, \"target_ratio\": 0.8, "
               "\"target_files_per_s\": 150, \"meets_ratio\": %s, \"meets_rate\": %s, \"machine\": %s}\n",
               done_rounds, f.n, r_bare[m], r_ing[m], r_ratio[m], c_bare[m], c_ing[m],
               r_ratio[m] >= 0.8 ? "true" : "false", r_ing[m] >= 150 ? "true" : "false", machine);
        fflush(stdout);
    }
    if (!keep) {
        struct folio_err derr = {0};
        struct bench_files all = f;
        all.n = f.n * done_rounds;
        if (all.n > 0 && delete_documents(conninfo, &all, &derr) != 0)
            folio_err_print(stderr, &derr);
        all.sha = f.sha + (size_t)rounds * (size_t)f.n; /* the db-only documents */
        if (all.n > 0 && delete_documents(conninfo, &all, &derr) != 0)
            folio_err_print(stderr, &derr);
    }
    if (!dir_arg || !keep)
        remove_tree(dir);
    for (int i = 0; i < f.n; i++)
        free(f.paths[i]);
    for (int k = 0; k < pages; k++)
        free(base[k]);
    free(base);
    free(base_len);
    free(f.paths);
    free(f.sha);
    free(r_bare);
    free(r_ing);
    free(r_ratio);
    free(c_bare);
    free(c_ing);
    return rc ? FOLIO_EXIT_FAIL : FOLIO_EXIT_OK;
}
