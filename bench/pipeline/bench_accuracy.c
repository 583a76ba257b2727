/*
 * folio bench accuracy: how often the CPU tiers are right, on a generated
 * corpus of realistic pages (tests/support/make_corpus.sh), with the
 * worker's own code: each page is encoded in its row's file format (fax =
 * G4 TIFF, photo = JPEG, copy = PNG without a resolution, clean = TIFF),
 * turned by its row's rotation, decoded by ingest and OCR'd by
 * worker_doc_text exactly as a worker does, then classified by the rules
 * tier and by the learned tier trained on the "train" split.
 *
 * Reported (JSON lines): orientation (upright pages turned, turned pages
 * found, per rotation), rules accuracy / per-label precision and recall /
 * precision above the review threshold / mean confidence right and wrong /
 * reliability bins, and the same for ocr+learned trained on
 * --train-per-label examples of each label, on the held-out split the
 * keywords and thresholds were never tuned on.
 *
 * OCR is the slow part (seconds a page); its text is cached per OCR
 * setting (--cache DIR) so classification experiments re-run in seconds.
 */
#include "bench/pipeline/bench.h"
#include "common/json.h"
#include "engine/engine.h"
#include "engine/ocr.h"
#include "ingest/ingest.h"
#include "pipeline/cli/cli.h"
#include "pipeline/document/doctext.h"

#include <errno.h>
#include <leptonica/allheaders.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char USAGE[] =
    "usage: folio bench accuracy --corpus DIR [OPTIONS]\n"
    "\n"
    "Accuracy of OCR orientation, ocr+rules and ocr+learned on a corpus made by\n"
    "tests/support/make_corpus.sh DIR (corpus.tsv + NNNN.tif).\n"
    "\n";

struct row {
    char file[16], label[ENGINE_LABEL_MAX + 1], style[16], split[16];
    int dpi, rotation;
    double skew;   /* degrees, optional 11th column (the held-out corpus) */
    char *text;
    int orientation, ok;
    int nth;       /* index among the train rows of its label */
};

struct job {
    struct row *rows;
    int n;
    _Atomic int next, failed;
    const char *dir, *cache;
    int truth;     /* --truth-text: the generator's text instead of OCR */
    int train_truth; /* --train-truth-text: the same, for the train rows only */
    struct ocr_opts oo;
};

/* The page as the row's file format, skewed by the row's skew (a page laid
 * crooked on the glass) and turned by the row's rotation. */
static int encode_page(const struct job *j, const struct row *r, uint8_t **data, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.tif", j->dir, r->file);
    PIX *p = pixRead(path);
    if (!p)
        return -1;
    if (r->skew != 0) {
        PIX *s = pixRotate(p, (float)(r->skew * 3.14159265358979 / 180), L_ROTATE_AREA_MAP, L_BRING_IN_WHITE, 0, 0);
        pixDestroy(&p);
        if (!s)
            return -1;
        p = s;
    }
    PIX *q = r->rotation ? pixRotateOrth(p, r->rotation / 90) : pixClone(p);
    pixDestroy(&p);
    if (!q)
        return -1;
    int fmt = IFF_TIFF_G4, res = r->dpi;
    PIX *out = NULL;
    if (strcmp(r->style, "photo") == 0) {
        /* a phone/camera capture: grey, uneven light, JPEG */
        PIX *g = pixConvertTo8(q, 0);
        out = g ? pixCopy(NULL, g) : NULL;
        if (out) {
            int w = pixGetWidth(out), h = pixGetHeight(out);
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    l_uint32 v;
                    pixGetPixel(out, x, y, &v);
                    int shade = 40 * (x + y) / (w + h);
                    pixSetPixel(out, x, y, (l_uint32)(v > (l_uint32)shade ? v - (l_uint32)shade : 0));
                }
        }
        pixDestroy(&g);
        fmt = IFF_JFIF_JPEG;
    } else if (strcmp(r->style, "copy") == 0) {
        out = pixConvertTo8(q, 0);
        fmt = IFF_PNG;
        res = 0; /* a PNG that states no resolution: folio must estimate one */
    } else {
        out = pixConvertTo1(q, 128);
    }
    pixDestroy(&q);
    if (!out)
        return -1;
    pixSetResolution(out, res, res);
    int rc = pixWriteMem(data, len, out, fmt);
    pixDestroy(&out);
    return rc ? -1 : 0;
}

static char *slurp(const char *path)
{
    char *s = NULL;
    struct folio_err e = {0};
    return folio_read_text(path, 64u << 20, &s, &e) ? NULL : s;
}

static void *ocr_worker(void *arg)
{
    struct job *j = arg;
    struct ocr_engine *e = NULL;
    struct folio_err err = {0};
    if (ocr_open(&j->oo, &e, &err)) {
        folio_err_print(stderr, &err);
        atomic_fetch_add(&j->failed, 1);
        return NULL;
    }
    for (;;) {
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n)
            break;
        struct row *r = &j->rows[i];
        char cpath[1200];
        if (j->truth || (j->train_truth && strcmp(r->split, "train") == 0)) {
            /* the text the page was rendered from: what the rules would
             * see with perfect OCR (for choosing keywords in seconds) */
            snprintf(cpath, sizeof cpath, "%s/%s.txt", j->dir, r->file);
            r->text = slurp(cpath);
            r->orientation = r->rotation;
            r->ok = r->text != NULL;
            if (!r->ok)
                atomic_fetch_add(&j->failed, 1);
            continue;
        }
        snprintf(cpath, sizeof cpath, "%s/%s.txt", j->cache, r->file);
        char *cached = slurp(cpath);
        if (cached) {
            /* first line: the orientation that OCR applied */
            char *nl = strchr(cached, '\n');
            r->orientation = atoi(cached);
            r->text = strdup(nl ? nl + 1 : "");
            r->ok = r->text != NULL;
            free(cached);
            continue;
        }
        uint8_t *data = NULL;
        size_t len = 0;
        if (encode_page(j, r, &data, &len)) {
            fprintf(stderr, "bench accuracy: cannot prepare %s\n", r->file);
            atomic_fetch_add(&j->failed, 1);
            continue;
        }
        struct doc_text_ctx tc = {.ocr = e, .data = data, .len = len, .pages = 1, .max_pages = 1};
        struct engine_text t;
        memset(&t, 0, sizeof t);
        folio_err_clear(&err);
        int rc = worker_doc_text(&tc, &t, &err);
        free(data);
        if (rc) {
            fprintf(stderr, "bench accuracy: %s: %s\n", r->file, err.msg);
            atomic_fetch_add(&j->failed, 1);
            free(t.text);
            continue;
        }
        r->text = t.text;
        r->orientation = t.orientation;
        r->ok = 1;
        FILE *f = fopen(cpath, "w");
        if (f) {
            fprintf(f, "%d\n%s", r->orientation, r->text);
            fclose(f);
        }
    }
    ocr_close(e);
    return NULL;
}

static int read_corpus(const char *dir, struct row **rows, int *n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "folio bench accuracy: cannot open %s: %s\n  hint: make one with "
                        "tests/support/make_corpus.sh %s\n", path, strerror(errno), dir);
        return -1;
    }
    char line[512];
    int cap = 0;
    *n = 0;
    *rows = NULL;
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        if (lineno++ == 0)
            continue;
        struct row r;
        memset(&r, 0, sizeof r);
        char font[64];
        int pt, exp, distort;
        /* file label font ptsize dpi exposure distort rotation style split [skew] */
        char *fld[11];
        int k = 0;
        for (char *s = strtok(line, "\t\n"); s && k < 11; s = strtok(NULL, "\t\n"))
            fld[k++] = s;
        if (k != 10 && k != 11) {
            fprintf(stderr, "folio bench accuracy: %s line %d has %d fields, want 10 or 11\n", path, lineno, k);
            fclose(f);
            return -1;
        }
        snprintf(r.file, sizeof r.file, "%s", fld[0]);
        snprintf(r.label, sizeof r.label, "%s", fld[1]);
        snprintf(font, sizeof font, "%s", fld[2]);
        pt = atoi(fld[3]);
        r.dpi = atoi(fld[4]);
        exp = atoi(fld[5]);
        distort = atoi(fld[6]);
        (void)pt, (void)exp, (void)distort;
        r.rotation = atoi(fld[7]);
        snprintf(r.style, sizeof r.style, "%s", fld[8]);
        snprintf(r.split, sizeof r.split, "%s", fld[9]);
        r.skew = k == 11 ? atof(fld[10]) : 0;
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            struct row *v = realloc(*rows, (size_t)cap * sizeof *v);
            if (!v) {
                fclose(f);
                return -1;
            }
            *rows = v;
        }
        (*rows)[(*n)++] = r;
    }
    fclose(f);
    return 0;
}

static int label_index(const struct engine_labels *l, const char *name)
{
    for (int i = 0; i < engine_labels_count(l); i++)
        if (strcmp(engine_labels_name(l, i), name) == 0)
            return i;
    return -1;
}

static int text_of_row(void *ctx, struct engine_text *out, struct folio_err *err)
{
    out->text = strdup(ctx ? ctx : "");
    return out->text ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of memory for a page's text");
}

/* Scores one tier on the rows in split; prints one JSON line. learned NULL
 * = rules tier; otherwise the chain learned -> rules, by engine_classify. */
static void score_tier(const char *tier, struct row *rows, int n, const char *split, int tune_from,
                       const struct engine_labels *labels, const struct engine_learned *learned,
                       double review_below, double review_margin, int dump)
{
    int nl = engine_labels_count(labels);
    int *tp = calloc((size_t)nl + 1, sizeof *tp), *pred = calloc((size_t)nl + 1, sizeof *pred),
        *truth = calloc((size_t)nl + 1, sizeof *truth);
    int scored = 0, right = 0, accepted = 0, accepted_right = 0, unknown = 0, fell_back = 0;
    double conf_right = 0, conf_wrong = 0;
    int bins_n[10] = {0}, bins_right[10] = {0};
    struct engine_config cfg = {.review_below = review_below, .review_margin = review_margin, .learned = learned};
    struct engine *e = NULL;
    struct folio_err oerr = {0};
    if (engine_open(&cfg, labels, &e, &oerr)) {
        folio_err_print(stderr, &oerr);
        free(tp);
        free(pred);
        free(truth);
        return;
    }
    for (int i = 0; i < n; i++) {
        struct row *r = &rows[i];
        if (!r->ok)
            continue;
        if (strcmp(split, "tune") == 0) {
            if (strcmp(r->split, "train") != 0 || r->nth < tune_from)
                continue;
        } else if (strcmp(split, "all") != 0 && strcmp(r->split, split) != 0) {
            continue;
        }
        /* the chain a worker runs (engine_classify: learned, with its
         * abstentions, then the rules; the review policy) */
        struct engine_result er;
        struct folio_err err = {0};
        struct engine_doc doc = {.text = text_of_row, .text_ctx = r->text};
        if (engine_classify(e, &doc, &er, &err)) {
            engine_result_free(&er);
            continue;
        }
        fell_back += learned && strcmp(er.engine_path, "ocr+learned") != 0;
        int ok = strcmp(er.label, r->label) == 0;
        scored++;
        right += ok;
        unknown += strcmp(er.label, ENGINE_UNKNOWN_LABEL) == 0;
        if (ok)
            conf_right += er.confidence;
        else
            conf_wrong += er.confidence;
        if (!er.needs_review) {
            accepted++;
            accepted_right += ok;
        }
        int bin = (int)(er.confidence * 10);
        bin = bin > 9 ? 9 : bin < 0 ? 0 : bin;
        bins_n[bin]++;
        bins_right[bin] += ok;
        int pi = label_index(labels, er.label), ti = label_index(labels, r->label);
        pred[pi < 0 ? nl : pi]++;
        truth[ti < 0 ? nl : ti]++;
        if (ok && ti >= 0)
            tp[ti]++;
        if (dump) {
            /* with why a tier did not answer (the learned tier's abstentions) */
            struct json_buf d;
            json_init(&d);
            char head[512];
            snprintf(head, sizeof head,
                     "{\"tier\":\"%s\",\"file\":\"%s\",\"truth\":\"%s\",\"label\":\"%s\",\"confidence\":%.3f,"
                     "\"needs_review\":%s,\"path\":\"%s\",\"reason\":",
                     tier, r->file, r->label, er.label, er.confidence, er.needs_review ? "true" : "false",
                     er.engine_path);
            json_raw(&d, head);
            json_str(&d, er.fallback_reason);
            json_raw(&d, "}");
            json_emit_line(&d);
        }
        engine_result_free(&er);
    }
    engine_close(e);
    struct json_buf b;
    json_init(&b);
    char s[512];
    snprintf(s, sizeof s,
             "{\"bench\":\"accuracy\",\"tier\":\"%s\",\"split\":\"%s\",\"pages\":%d,\"right\":%d,"
             "\"accuracy\":%.4f,\"unknown\":%d,\"fell_back_to_rules\":%d,\"mean_conf_right\":%.3f,"
             "\"mean_conf_wrong\":%.3f,\"review_below\":%.2f,\"review_margin\":%.2f,\"accepted\":%d,"
             "\"precision_accepted\":%.4f,\"per_label\":{",
             tier, split, scored, right, scored ? (double)right / scored : 0, unknown, fell_back,
             right ? conf_right / right : 0, scored - right ? conf_wrong / (scored - right) : 0, review_below,
             review_margin, accepted, accepted ? (double)accepted_right / accepted : 0);
    json_raw(&b, s);
    int first = 1;
    for (int i = 0; i < nl; i++) {
        if (!truth[i] && !pred[i])
            continue;
        json_raw(&b, first ? "" : ",");
        first = 0;
        json_key(&b, engine_labels_name(labels, i));
        snprintf(s, sizeof s, "{\"n\":%d,\"predicted\":%d,\"precision\":%.3f,\"recall\":%.3f}", truth[i], pred[i],
                 pred[i] ? (double)tp[i] / pred[i] : 0, truth[i] ? (double)tp[i] / truth[i] : 0);
        json_raw(&b, s);
    }
    json_raw(&b, "},\"reliability\":[");
    for (int k = 0; k < 10; k++) {
        snprintf(s, sizeof s, "%s{\"conf\":\"%.1f-%.1f\",\"n\":%d,\"accuracy\":%.3f}", k ? "," : "", k / 10.0,
                 (k + 1) / 10.0, bins_n[k], bins_n[k] ? (double)bins_right[k] / bins_n[k] : 0);
        json_raw(&b, s);
    }
    json_raw(&b, "]}");
    json_emit_line(&b);
    free(tp);
    free(pred);
    free(truth);
}

struct accuracy_args {
    const char *dir, *labels_path, *cache;
    int split, per_label, legacy, threads, dump, truth, train_truth, no_deskew, no_upscale;
    double evidence, osd, rb, rm;
};
#define AT(m, type) CLI_AT(struct accuracy_args, m, type)
static const char *const SPLITS[] = {"heldout", "tune", "train", "all", NULL};
static const struct cli_opt OPTS[] = {
    {.name = "corpus", .kind = CLI_STR, .off = AT(dir, const char *), .arg = "DIR", .help = "the corpus"},
    {.name = "labels", .kind = CLI_STR, .off = AT(labels_path, const char *), .arg = "FILE",
     .help = "label set for the rules tier (default: the default taxonomy)"},
    {.name = "split", .kind = CLI_ENUM, .off = AT(split, int), .choices = SPLITS, .arg = "S",
     .help = "rows scored: heldout (default), train, all, or tune: the train\n"
             "rows beyond the first --train-per-label of each label (for\n"
             "choosing constants without looking at heldout)"},
    {.name = "learned-evidence", .kind = CLI_DOUBLE, .off = AT(evidence, double), .lo = 0.01, .hi = 1000,
     .arg = "E", .help = "ocr+learned calibration constant (default: the built-in)"},
    {.name = "train-per-label", .kind = CLI_INT, .off = AT(per_label, int), .min = 1, .max = 100000, .arg = "N",
     .help = "ocr+learned: train on the first N train rows per label (default 20)"},
    {.name = "osd-min-conf", .kind = CLI_DOUBLE, .off = AT(osd, double), .hi = 100, .arg = "C",
     .help = "OSD floor (default 12)"},
    {.name = "legacy-osd", .kind = CLI_FLAG, .off = AT(legacy, int),
     .help = "OCR as before issue 16: ppi 300 whatever the file, OSD floor 2,\n"
             "no full-size retry"},
    {.name = "no-deskew", .kind = CLI_FLAG, .off = AT(no_deskew, int),
     .help = "OCR without the skew correction after orientation (to compare;\n"
             "give each variant its own --cache)"},
    {.name = "no-upscale", .kind = CLI_FLAG, .off = AT(no_upscale, int),
     .help = "OCR pages under 250 ppi at their own resolution (to compare)"},
    {.name = "review-below", .kind = CLI_DOUBLE, .off = AT(rb, double), .hi = 1, .arg = "P",
     .help = "review threshold reported on (default 0.5)"},
    {.name = "review-margin", .kind = CLI_DOUBLE, .off = AT(rm, double), .hi = 1, .arg = "M",
     .help = "review margin (default 0.1)"},
    {.name = "threads", .kind = CLI_INT, .off = AT(threads, int), .min = 1, .max = 256, .arg = "N",
     .help = "OCR threads (default 2)"},
    {.name = "cache", .kind = CLI_STR, .off = AT(cache, const char *), .arg = "DIR",
     .help = "OCR text cache (default CORPUS/ocr-cache-<setting>)"},
    {.name = "dump", .kind = CLI_FLAG, .off = AT(dump, int), .help = "one JSON line per scored page"},
    {.name = "truth-text", .kind = CLI_FLAG, .off = AT(truth, int),
     .help = "classify the generator's text (NNNN.txt), no OCR: keywords\n"
             "and the learned tier without OCR noise, in seconds"},
    {.name = "train-truth-text", .kind = CLI_FLAG, .off = AT(train_truth, int),
     .help = "the same for the train rows only: the learned tier trains on\n"
             "clean text, the scored rows are OCR'd (OCR time for the\n"
             "scored rows only)"},
};
/* Extra arguments are ignored, as they always were. */
static const struct cli_cmd CMD = {.name = "bench accuracy", .usage = USAGE, .opts = OPTS,
                                   .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 1 << 30, .help_col = 24};

int bench_accuracy(int argc, char **argv)
{
    struct accuracy_args a = {.per_label = 20, .threads = 2, .osd = OCR_OSD_MIN_CONF_DEFAULT,
                              .rb = ENGINE_REVIEW_BELOW_DEFAULT, .rm = ENGINE_REVIEW_MARGIN_DEFAULT};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *dir = a.dir, *labels_path = a.labels_path, *split = SPLITS[a.split], *cache = a.cache;
    int per_label = a.per_label, legacy = a.legacy, threads = a.threads, dump = a.dump;
    double evidence = a.evidence, osd = a.osd, rb = a.rb, rm = a.rm;
    if (!dir)
        return cli_usage_error("bench accuracy", "--corpus DIR is required");
    struct row *rows = NULL;
    int n = 0;
    if (read_corpus(dir, &rows, &n))
        return FOLIO_EXIT_FAIL;
    ocr_process_init();
    struct job j = {.rows = rows, .n = n, .dir = dir, .truth = a.truth, .train_truth = a.train_truth};
    ocr_opts_default(&j.oo);
    j.oo.page_deadline_ms = 0;
    j.oo.osd_min_conf = (float)(legacy ? 2.0 : osd);
    j.oo.osd_no_retry = legacy;
    j.oo.force_ppi = legacy ? 300 : 0;
    j.oo.no_deskew = legacy || a.no_deskew;
    j.oo.no_upscale = legacy || a.no_upscale;
    char cdir[1024];
    if (!cache) {
        /* one cache per OCR variant: a cached text is what that variant read */
        snprintf(cdir, sizeof cdir, "%s/ocr-cache-%s%g%s%s", dir, legacy ? "legacy" : "osd", legacy ? 2.0 : osd,
                 !legacy && a.no_deskew ? "-nodeskew" : "", !legacy && a.no_upscale ? "-noupscale" : "");
        cache = cdir;
    }
    mkdir(cache, 0755);
    j.cache = cache;
    double t0 = folio_mono_ms();
    pthread_t tid[256];
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, ocr_worker, &j);
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    double ocr_s = (folio_mono_ms() - t0) / 1000;

    /* orientation, over every page (no tuning happens on it) */
    int up = 0, up_turned = 0, rot = 0, rot_found = 0, rot_wrong = 0, per[4] = {0}, per_found[4] = {0};
    for (int i = 0; i < n; i++) {
        if (!rows[i].ok)
            continue;
        int q = rows[i].rotation / 90 & 3;
        if (q == 0) {
            up++;
            up_turned += rows[i].orientation != 0;
        } else {
            rot++;
            per[q]++;
            rot_found += rows[i].orientation == rows[i].rotation;
            per_found[q] += rows[i].orientation == rows[i].rotation;
            rot_wrong += rows[i].orientation != 0 && rows[i].orientation != rows[i].rotation;
        }
    }
    printf("{\"bench\":\"accuracy\",\"what\":\"orientation\",\"ocr\":\"%s\",\"osd_min_conf\":%g,\"pages\":%d,"
           "\"failed\":%d,\"ocr_wall_s\":%.1f,\"upright\":%d,\"upright_turned\":%d,\"turned\":%d,"
           "\"turned_found\":%d,\"turned_wrongly\":%d,\"found_90\":\"%d/%d\",\"found_180\":\"%d/%d\","
           "\"found_270\":\"%d/%d\"}\n",
           a.truth ? "none (--truth-text)" : legacy ? "legacy (ppi 300, floor 2, half-size only)"
           : j.oo.no_deskew && j.oo.no_upscale ? "issue 16"
           : j.oo.no_deskew ? "issue 16 + upscale" : j.oo.no_upscale ? "issue 16 + deskew" : "issue 16 + deskew + upscale",
           legacy ? 2.0 : osd, n,
           atomic_load(&j.failed), ocr_s, up, up_turned, rot, rot_found, rot_wrong, per_found[1], per[1],
           per_found[2], per[2], per_found[3], per[3]);

    struct engine_labels *labels = engine_labels_new();
    struct folio_err err = {0};
    int rc = 0;
    /* the corpus is drawn from RVL-CDIP's types (doc_corpus.py), so that
     * set is the bench's default; --labels takes a file or a set name */
    const char *set = engine_label_set(labels_path ? labels_path : "rvl-cdip");
    char *ltext = labels_path && !set ? slurp(labels_path) : NULL;
    if (!labels || (labels_path && !set && !ltext) ||
        engine_labels_parse(labels, ltext ? ltext : set, labels_path ? labels_path : "rvl-cdip", &err)) {
        if (labels_path && !ltext)
            fprintf(stderr, "folio bench accuracy: cannot read %s\n", labels_path);
        else
            folio_err_print(stderr, &err);
        rc = FOLIO_EXIT_FAIL;
        goto out;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < i; k++)
            rows[i].nth += strcmp(rows[k].label, rows[i].label) == 0 && strcmp(rows[k].split, "train") == 0;
    score_tier("ocr+rules", rows, n, split, per_label, labels, NULL, rb, rm, dump);

    /* ocr+learned: the first per_label train rows of each label */
    struct engine_trainer *t = engine_trainer_new();
    for (int i = 0; t && i < n; i++)
        if (rows[i].ok && strcmp(rows[i].split, "train") == 0 && engine_trainer_docs(t, rows[i].label) < per_label &&
            engine_trainer_add(t, rows[i].label, rows[i].text, &err))
            break;
    uint8_t *blob = NULL;
    size_t blen = 0;
    struct engine_learned *m = NULL;
    if (t && engine_trainer_build(t, 1, &blob, &blen, &err) == 0 && engine_learned_load(blob, blen, &m, &err) == 0) {
        printf("{\"bench\":\"accuracy\",\"what\":\"learned_model\",\"labels\":%d,\"per_label\":%d,\"bytes\":%zu}\n",
               engine_learned_count(m), per_label, blen);
        if (evidence > 0)
            engine_learned_set_evidence(m, evidence);
        score_tier("ocr+learned", rows, n, split, per_label, labels, m, rb, rm, dump);
    } else {
        folio_err_print(stderr, &err);
    }
    engine_learned_free(m);
    free(blob);
    engine_trainer_free(t);
out:
    free(ltext);
    engine_labels_free(labels);
    for (int i = 0; i < n; i++)
        free(rows[i].text);
    free(rows);
    return rc;
}
