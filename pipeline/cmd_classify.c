/*
 * folio classify FILE...: the worker's classification code on local files,
 * no database, one JSON object per file on stdout. A file that cannot be
 * read or decoded gets a JSON object with "error" (and the exit status
 * becomes 1) while the other files are still classified.
 *
 * Labels: --labels FILE (one label per line, "name: keyword, keyword, ...";
 * '#' starts a comment), else the default taxonomy that `folio migrate`
 * seeds into folio.labels (schema/001_init.sql; a unit test checks the two
 * lists agree).
 */
#include "engine/engine.h"
#include "engine/ocr.h"
#include "ingest/ingest.h"
#include "pipeline/docpage.h"
#include "pipeline/doctext.h"
#include "pipeline/pipeline.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio classify [OPTIONS] FILE...\n"
    "\n"
    "Classifies files directly, without a database; prints one JSON object per file.\n"
    "\n"
    "  --json               full output (every label's score, OCR text, timings)\n"
    "  --labels FILE        label set: lines of \"name: keyword, keyword\" (default: the\n"
    "                       16 labels `folio migrate` seeds into folio.labels)\n"
    "  --model FILE         text model GGUF\n"
    "  --mmproj FILE        vision projector GGUF\n"
    "  --device SPEC        Vulkan device: index, UUID or name substring (naming a CPU\n"
    "                       device such as llvmpipe allows it)\n"
    "  --max-image-tokens N vision: plan for pages of N image tokens (default 1600);\n"
    "                       larger pages are downscaled\n"
    "  --gpu-weights M      auto (default) | f16 | native: matrices expanded to f16 at\n"
    "                       load for the tensor-core GEMM, or kept as stored\n"
    "  --gate-file FILE     extra driver-gate rules (vendor=, driver=, min=, max=,\n"
    "                       path=vision|gpu, reason=)\n"
    "  --ocr-lang LANGS     Tesseract languages (default eng)\n"
    "  --ocr-max-pages N    pages OCR'd per file (default 10)\n"
    "  --max-text-bytes N|PAGE,DOC  text kept per page and per file for the text tiers\n"
    "                       (default 64KiB,512KiB); cuts show in pages.text_cut\n";

/* Mirrors the seed rows of schema/001_init.sql (test_classify_cli checks). */
static const struct {
    const char *name;
    const char *keywords; /* comma-separated */
} DEFAULT_LABELS[] = {
    {"letter", "dear, sincerely, regards, yours truly, enclosure, letterhead"},
    {"form", "please print, signature, date, checkbox, fill in, office use only, applicant"},
    {"email", "from, to, subject, sent, cc, original message, @"},
    {"handwritten", "handwritten, note, notes"},
    {"advertisement", "sale, offer, free, buy, discount, call now, limited, new"},
    {"scientific report", "report, study, results, methods, conclusion, data, analysis, test"},
    {"scientific publication", "abstract, introduction, references, journal, doi, et al, university, vol"},
    {"specification", "specification, specifications, tolerance, dimensions, requirements, standard, parameter, datasheet"},
    {"file folder", "file, folder, index, tab"},
    {"news article", "news, reported, said, according, press, times, daily, journal"},
    {"budget", "budget, total, costs, expenses, fiscal, forecast, allocation, revenue"},
    {"invoice", "invoice, invoice number, amount due, payment, bill to, total, tax, due, remit"},
    {"presentation", "presentation, slide, agenda, overview, objectives, summary"},
    {"questionnaire", "questionnaire, survey, question, questions, answer, respondent, agree, disagree"},
    {"resume", "resume, curriculum vitae, education, experience, employment, skills, references"},
    {"memo", "memo, memorandum, to, from, subject, date, re, cc"},
};

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Adds "name: kw, kw" (line is modified). */
static int add_label_line(struct engine_labels *l, char *line, struct folio_err *err)
{
    char *colon = strchr(line, ':');
    if (colon)
        *colon = '\0';
    const char *kw[128];
    int n = 0;
    char *save = NULL;
    for (char *t = colon ? strtok_r(colon + 1, ",", &save) : NULL; t && n < 128; t = strtok_r(NULL, ",", &save)) {
        t = trim(t);
        if (*t)
            kw[n++] = t;
    }
    return engine_labels_add(l, trim(line), kw, n, err);
}

static int load_labels(const char *path, struct engine_labels *l, struct folio_err *err)
{
    if (!path) {
        for (size_t i = 0; i < sizeof DEFAULT_LABELS / sizeof DEFAULT_LABELS[0]; i++) {
            char line[512];
            snprintf(line, sizeof line, "%s: %s", DEFAULT_LABELS[i].name, DEFAULT_LABELS[i].keywords);
            int rc = add_label_line(l, line, err);
            if (rc)
                return rc;
        }
        return 0;
    }
    FILE *f = fopen(path, "r");
    if (!f)
        return folio_err_set(err, FOLIO_EIO, "cannot open label file %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = 0;
    while (!rc && getline(&line, &cap, f) > 0) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *t = trim(line);
        if (!*t)
            continue;
        rc = add_label_line(l, t, err);
        if (rc)
            folio_err_prefix(err, "%s line %d: ", path, lineno);
    }
    free(line);
    fclose(f);
    if (!rc && engine_labels_count(l) == 0)
        rc = folio_err_set(err, FOLIO_EINVAL, "label file %s defines no labels", path);
    return rc;
}

static void print_error(const char *file, const struct folio_err *e)
{
    struct json_buf b;
    json_init(&b);
    json_raw(&b, "{");
    json_key(&b, "file");
    json_str(&b, file);
    json_raw(&b, ",");
    json_key(&b, "error");
    json_str(&b, e->msg);
    if (e->detail[0]) {
        json_raw(&b, ",");
        json_key(&b, "detail");
        json_str(&b, e->detail);
    }
    if (e->hint[0]) {
        json_raw(&b, ",");
        json_key(&b, "hint");
        json_str(&b, e->hint);
    }
    json_raw(&b, "}\n");
    if (!b.oom)
        fputs(b.s, stdout);
    json_free(&b);
}

static int classify_file(const char *file, struct ocr_engine *ocr, struct engine *eng, int full, int max_pages,
                         const size_t caps[2], struct folio_err *err)
{
    uint8_t *data = NULL;
    size_t len = 0;
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    int rc = folio_read_file(file, lim.max_bytes, &data, &len, err);
    if (rc)
        return rc;
    struct ingest_info info;
    double t0 = folio_mono_ms();
    rc = ingest_probe(data, len, &lim, &info, err);
    if (rc) {
        free(data);
        return rc;
    }
    struct doc_text_ctx tc = {.ocr = ocr, .data = data, .len = len, .pages = info.pages, .max_pages = max_pages,
                              .max_page_bytes = caps[0], .max_doc_bytes = caps[1]};
    struct doc_page_ctx pc = {.data = data, .len = len};
    struct engine_doc doc = {worker_doc_text, &tc, worker_doc_page, &pc};
    struct engine_result er;
    rc = engine_classify(eng, &doc, &er, err);
    free(data);
    if (rc) {
        engine_result_free(&er);
        return rc;
    }
    double total = folio_mono_ms() - t0;
    struct json_buf b;
    json_init(&b);
    json_raw(&b, "{");
    json_key(&b, "file");
    json_str(&b, file);
    json_raw(&b, ",");
    json_key(&b, "label");
    json_str(&b, er.label);
    json_raw(&b, ",");
    json_key(&b, "confidence");
    json_num(&b, er.confidence);
    json_raw(&b, er.needs_review ? ",\"needs_review\":true," : ",\"needs_review\":false,");
    json_key(&b, "engine_path");
    json_str(&b, er.engine_path);
    json_raw(&b, ",");
    json_key(&b, "fallback_reason");
    json_str(&b, er.fallback_reason);
    json_raw(&b, ",");
    json_key(&b, "ocr_confidence");
    json_num(&b, er.text.confidence >= 0 ? er.text.confidence : NAN);
    json_raw(&b, ",");
    json_key(&b, "orientation");
    json_num(&b, er.text.orientation);
    json_raw(&b, ",\"pages\":");
    worker_pages_json(&er.text, info.pages, &b);
    if (full) {
        json_raw(&b, ",");
        json_key(&b, "scores");
        worker_scores_json(&er, &b);
        int model_tier = strcmp(er.engine_path, "ocr+rules") != 0;
        json_raw(&b, model_tier ? ",\"logprobs\":{" : ",\"keyword_hits\":{");
        for (int i = 0; i < er.n_labels; i++) {
            if (i)
                json_raw(&b, ",");
            json_key(&b, er.names[i]);
            json_num(&b, er.raw[i]);
        }
        json_raw(&b, "},");
        if (er.n_prompt_ids) {
            json_raw(&b, "\"prompt_ids\":[");
            for (uint32_t i = 0; i < er.n_prompt_ids; i++) {
                char nb[16];
                snprintf(nb, sizeof nb, "%s%d", i ? "," : "", (int)er.prompt_ids[i]);
                json_raw(&b, nb);
            }
            json_raw(&b, "],");
        }
        json_key(&b, "ocr_text");
        json_str(&b, er.text.text);
        json_raw(&b, ",\"timings\":{\"decode_ms\":");
        json_num(&b, er.text.decode_ms);
        json_raw(&b, ",\"ocr_ms\":");
        json_num(&b, er.text.ocr_ms);
        json_raw(&b, ",\"rules_ms\":");
        json_num(&b, er.rules_ms);
        json_raw(&b, ",\"vision_ms\":");
        json_num(&b, er.vision_ms);
        json_raw(&b, ",\"lm_ms\":");
        json_num(&b, er.lm_ms);
        json_raw(&b, ",\"total_ms\":");
        json_num(&b, total);
        json_raw(&b, "}");
    }
    json_raw(&b, "}\n");
    engine_result_free(&er);
    if (b.oom) {
        json_free(&b);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot build the JSON output");
    }
    fputs(b.s, stdout);
    fflush(stdout);
    json_free(&b);
    return 0;
}

int cmd_classify(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 1000},
        {"model", required_argument, 0, 1001},
        {"mmproj", required_argument, 0, 1002},
        {"device", required_argument, 0, 1003},
        {"ocr-lang", required_argument, 0, 1004},
        {"labels", required_argument, 0, 1005},
        {"ocr-max-pages", required_argument, 0, 1006},
        {"max-image-tokens", required_argument, 0, 1007},
        {"gate-file", required_argument, 0, 1008},
        {"gpu-weights", required_argument, 0, 1040},
        {"max-text-bytes", required_argument, 0, 1009},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch, full = 0, max_pages = 10;
    const char *labels_path = NULL, *lang = "eng", *model = NULL, *mmproj = NULL;
    const char *device = NULL, *gate_file = NULL;
    uint32_t max_image_tokens = 0;
    int gpu_weights = 0;
    size_t caps[2] = {0, 0};
    long long v;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(USAGE, stdout);
            return FOLIO_EXIT_OK;
        case 1000: full = 1; break;
        case 1001: model = optarg; break;
        case 1002: mmproj = optarg; break;
        case 1003: device = optarg; break;
        case 1007:
            if (folio_parse_int(optarg, 4, 65536, &v))
                return cli_usage_error("classify", "--max-image-tokens wants 4..65536, got '%s'", optarg);
            max_image_tokens = (uint32_t)v;
            break;
        case 1008: gate_file = optarg; break;
        case 1040:
            if ((gpu_weights = engine_gpu_weights_parse(optarg)) < 0)
                return cli_usage_error("classify", "--gpu-weights takes auto, f16 or native, not '%s'", optarg);
            break;
        case 1004: lang = optarg; break;
        case 1005: labels_path = optarg; break;
        case 1006:
            if (folio_parse_int(optarg, 1, 100000, &v))
                return cli_usage_error("classify", "--ocr-max-pages wants 1..100000, got '%s'", optarg);
            max_pages = (int)v;
            break;
        case 1009:
            if (doc_text_parse_caps(optarg, &caps[0], &caps[1]))
                return cli_usage_error("classify", "--max-text-bytes wants N or PAGE,DOC, sizes of "
                                       "1..64MiB such as 64KiB,512KiB, got '%s'", optarg);
            break;
        default:
            return cli_usage_error("classify", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error("classify", "missing argument");

    struct folio_err err = {0};
    ocr_process_init();
    struct engine_labels *labels = engine_labels_new();
    if (!labels || load_labels(labels_path, labels, &err)) {
        if (!labels)
            folio_err_set(&err, FOLIO_ENOMEM, "cannot allocate the label set");
        folio_err_print(stderr, &err);
        engine_labels_free(labels);
        return FOLIO_EXIT_FAIL;
    }
    struct ocr_opts oo;
    ocr_opts_default(&oo);
    oo.lang = lang;
    struct ocr_engine *ocr = NULL;
    struct engine *eng = NULL;
    struct engine_models *models = NULL;
    struct engine_models_config mc = {.model_path = model, .mmproj_path = mmproj, .device = device,
                                      .allow_cpu = device != NULL, .max_image_tokens = max_image_tokens,
                                      .gate_file = gate_file, .gpu_weights = gpu_weights};
    struct engine_config cfg = {.model_path = model, .mmproj_path = mmproj};
    if (model || mmproj) {
        if (engine_models_open(&mc, &models, &err)) {
            folio_err_print(stderr, &err);
            engine_labels_free(labels);
            return FOLIO_EXIT_FAIL;
        }
        cfg.models = models;
    }
    if (ocr_open(&oo, &ocr, &err) || engine_open(&cfg, labels, &eng, &err)) {
        folio_err_print(stderr, &err);
        engine_models_close(models);
        ocr_close(ocr);
        engine_labels_free(labels);
        return FOLIO_EXIT_FAIL;
    }
    int failed = 0;
    for (int i = optind; i < argc; i++) {
        folio_err_clear(&err);
        if (classify_file(argv[i], ocr, eng, full, max_pages, caps, &err)) {
            print_error(argv[i], &err);
            failed++;
        }
    }
    engine_close(eng);
    engine_models_close(models);
    ocr_close(ocr);
    engine_labels_free(labels);
    return failed ? FOLIO_EXIT_FAIL : FOLIO_EXIT_OK;
}
