/*
 * folio classify FILE...: the worker's classification code on local files,
 * no database, one JSON object per file on stdout. A file that cannot be
 * read or decoded gets a JSON object with "error" (and the exit status
 * becomes 1) while the other files are still classified.
 *
 * Labels: --labels FILE (one label per line, "name: keyword, keyword^3,
 * ..."; '#' starts a comment; engine_labels_parse), else the default
 * taxonomy that `folio migrate` seeds into folio.labels (schema/005; a pg
 * test checks the two agree).
 */
#include "common/json.h"
#include "engine/engine.h"
#include "engine/ocr.h"
#include "ingest/ingest.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/document/page_image.h"
#include "pipeline/document/classify_doc.h"
#include "pipeline/document/doctext.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: folio classify [OPTIONS] FILE...\n"
    "\n"
    "Classifies files directly, without a database; prints one JSON object per file.\n"
    "\n";


/* --labels FILE, else the default taxonomy (engine/labelset.c, which
 * schema/005 seeds into folio.labels), in the one label-file format. */
static int load_labels(const char *path, struct engine_labels *l, struct folio_err *err)
{
    if (!path)
        return engine_labels_parse(l, ENGINE_DEFAULT_LABELS, "default labels", err);
    if (engine_label_set(path) && access(path, F_OK) != 0) /* a built-in set by name */
        return engine_labels_parse(l, engine_label_set(path), path, err);
    char *text = NULL;
    int rc = folio_read_text(path, 16u << 20, &text, err);
    if (rc)
        return rc;
    rc = engine_labels_parse(l, text, path, err);
    free(text);
    return rc;
}

/* --learned FILE: a model blob written by `folio train --out FILE`. */
static int load_learned(const char *path, struct engine_learned **out, struct folio_err *err)
{
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = folio_read_file(path, 1u << 30, &data, &len, err);
    if (rc)
        return rc;
    rc = engine_learned_load(data, len, out, err);
    free(data);
    if (rc)
        folio_err_prefix(err, "%s: ", path);
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
                         const size_t caps[2], int max_classified, uint32_t max_image_tokens,
                         struct folio_err *err)
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
    /* the same per-page classification as the worker (classify_doc.h) */
    struct doc_pages_opts po = {.pages = info.pages, .max_classified = max_classified, .ocr_max_pages = max_pages,
                                .max_image_tokens = max_image_tokens, .ocr = ocr, .pdf_limits = &lim,
                                .max_page_bytes = caps[0], .max_doc_bytes = caps[1]};
    struct doc_classified dc;
    rc = worker_classify_document(eng, data, len, &po, &dc, err);
    free(data);
    if (rc)
        return rc;
    struct engine_result er = dc.doc;
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
    if (er.review_reason[0]) {
        json_key(&b, "review_reason");
        json_str(&b, er.review_reason);
        json_raw(&b, ",");
    }
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
    worker_pages_json(&dc, &b); /* per-page labels and split suggestions */
    if (full) {
        json_raw(&b, ",");
        json_key(&b, "scores");
        worker_scores_json(&er, &b);
        int model_tier = strcmp(er.engine_path, "ocr+rules") != 0;
        json_raw(&b, model_tier ? ",\"logprobs\":{" : ",\"keyword_hits\":{");
        /* ocr+learned: raw holds naive-Bayes log-likelihoods, logprob-like */
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
    worker_classified_free(&dc);
    if (b.oom) {
        json_free(&b);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot build the JSON output");
    }
    fputs(b.s, stdout);
    fflush(stdout);
    json_free(&b);
    return 0;
}

struct classify_args {
    int full, max_pages, max_classified, gpu_weights, gpu_batch;
    const char *labels_path, *lang, *model, *mmproj, *device, *gate_file, *learned_path;
    uint32_t max_image_tokens;
    size_t caps[2];
    double osd_min_conf, review_below, review_margin;
};
#define AT(m, type) CLI_AT(struct classify_args, m, type)

static const struct cli_opt OPTS[] = {
    {.name = "json", .kind = CLI_FLAG, .off = AT(full, int),
     .help = "full output (every label's score, OCR text, timings)"},
    {.name = "labels", .kind = CLI_STR, .off = AT(labels_path, const char *), .arg = "FILE",
     .help = "label set: lines of \"name: keyword, keyword\" (default: the\n"
             "16 labels `folio migrate` seeds into folio.labels)"},
    {.name = "model", .kind = CLI_STR, .off = AT(model, const char *), .arg = "FILE", .help = "text model GGUF"},
    {.name = "mmproj", .kind = CLI_STR, .off = AT(mmproj, const char *), .arg = "FILE",
     .help = "vision projector GGUF"},
    {.name = "device", .kind = CLI_STR, .off = AT(device, const char *), .arg = "SPEC",
     .help = "Vulkan device: index, UUID or name substring (naming a CPU\n"
             "device such as llvmpipe allows it)"},
    {.name = "max-image-tokens", .kind = CLI_U32, .off = AT(max_image_tokens, uint32_t), .min = 4, .max = 65536,
     .arg = "N",
     .help = "vision: plan for pages of N image tokens (default 1600);\n"
             "larger pages are downscaled"},
    {.name = "gpu-weights", .kind = CLI_FN, .fn = cli_take_gpu_weights, .off = AT(gpu_weights, int), .arg = "M",
     .help = "auto (default) | f16 | native | int8: matrices expanded to f16\n"
             "at load for the tensor-core GEMM, kept as stored, or int8 for\n"
             "the int8 GEMM (the text model; error in BENCHMARKS.md)"},
    {.name = "gpu-batch", .kind = CLI_INT, .off = AT(gpu_batch, int), .max = 256,
     .want = "0..256 pages per GPU pass (0 = the engine's choice)", .arg = "N",
     .help = "pages per GPU pass planned at open, 0 = the engine's choice\n"
             "(files are classified one at a time here: `folio worker`\n"
             "fills the batches)"},
    {.name = "gate-file", .kind = CLI_STR, .off = AT(gate_file, const char *), .arg = "FILE",
     .help = "extra driver-gate rules (vendor=, driver=, min=, max=,\n"
             "path=vision|gpu, reason=)"},
    {.name = "ocr-lang", .kind = CLI_STR, .off = AT(lang, const char *), .arg = "LANGS",
     .help = "Tesseract languages (default eng)"},
    {.name = "ocr-max-pages", .kind = CLI_INT, .off = AT(max_pages, int), .min = 1, .max = 100000, .arg = "N",
     .help = "pages OCR'd per file (default 10; PDF pages with a usable\n"
             "text layer are not OCR'd)"},
    {.name = "max-text-bytes", .kind = CLI_FN, .fn = cli_take_text_caps, .off = AT(caps[0], size_t),
     .want = "N or PAGE,DOC, sizes of 1..64MiB such as 64KiB,512KiB", .arg = "N|PAGE,DOC",
     .help = "text kept per page and per file for the text tiers\n"
             "(default 64KiB,512KiB); cuts show in pages.text_cut"},
    {.name = "osd-min-conf", .kind = CLI_DOUBLE, .off = AT(osd_min_conf, double), .hi = 100, .arg = "C",
     .help = "turn a page only when Tesseract's orientation confidence\n"
             "is at least C (default 12)"},
    {.name = "review-below", .kind = CLI_DOUBLE, .off = AT(review_below, double), .hi = 1,
     .want = "a probability 0..1", .arg = "P", .help = "needs_review under this probability (default 0.5)"},
    {.name = "review-margin", .kind = CLI_DOUBLE, .off = AT(review_margin, double), .hi = 1, .arg = "M",
     .help = "needs_review when the lead over the second label is under M\n"
             "(default 0.1)"},
    {.name = "learned", .kind = CLI_STR, .off = AT(learned_path, const char *), .arg = "FILE",
     .help = "ocr+learned model written by `folio train --out FILE`"},
    {.name = "max-pages-classified", .kind = CLI_INT, .off = AT(max_classified, int), .min = 1, .max = 10000,
     .arg = "N",
     .help = "pages classified one by one (default 20); the file's\n"
             "label is the first page's, \"pages\" lists every page and\n"
             "any split suggestion (\"segments\")"},
};

static const struct cli_cmd CMD = {
    .name = "classify", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .min_pos = 1,
    .max_pos = 1 << 30,
};

int cmd_classify(int argc, char **argv)
{
    struct classify_args a = {
        .max_pages = 10, .max_classified = DOC_MAX_PAGES_CLASSIFIED, .lang = "eng",
        .osd_min_conf = OCR_OSD_MIN_CONF_DEFAULT, .review_below = ENGINE_REVIEW_BELOW_DEFAULT,
        .review_margin = ENGINE_REVIEW_MARGIN_DEFAULT,
    };
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    int full = a.full, max_pages = a.max_pages, max_classified = a.max_classified;
    const char *labels_path = a.labels_path, *lang = a.lang, *model = a.model, *mmproj = a.mmproj;
    const char *device = a.device, *gate_file = a.gate_file, *learned_path = a.learned_path;
    uint32_t max_image_tokens = a.max_image_tokens;
    int gpu_weights = a.gpu_weights, gpu_batch = a.gpu_batch;
    const size_t *caps = a.caps;
    double osd_min_conf = a.osd_min_conf, review_below = a.review_below, review_margin = a.review_margin;

    struct folio_err err = {0};
    if ((model && cli_check_gguf("--model", model, &err)) || (mmproj && cli_check_gguf("--mmproj", mmproj, &err))) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    ocr_process_init();
    struct engine_labels *labels = engine_labels_new();
    if (!labels || load_labels(labels_path, labels, &err)) {
        if (!labels)
            folio_err_set(&err, FOLIO_ENOMEM, "cannot allocate the label set");
        folio_err_print(stderr, &err);
        engine_labels_free(labels);
        return FOLIO_EXIT_FAIL;
    }
    struct engine_learned *learned = NULL;
    if (learned_path && load_learned(learned_path, &learned, &err)) {
        folio_err_print(stderr, &err);
        engine_labels_free(labels);
        return FOLIO_EXIT_FAIL;
    }
    struct ocr_opts oo;
    ocr_opts_default(&oo);
    oo.lang = lang;
    oo.osd_min_conf = (float)osd_min_conf;
    struct ocr_engine *ocr = NULL;
    struct engine *eng = NULL;
    struct engine_models *models = NULL;
    struct engine_models_config mc = {.model_path = model, .mmproj_path = mmproj, .device = device,
                                      .allow_cpu = device != NULL, .max_image_tokens = max_image_tokens,
                                      .gate_file = gate_file, .gpu_weights = gpu_weights,
                                      .max_batch = (uint32_t)gpu_batch};
    struct engine_config cfg = {.model_path = model, .mmproj_path = mmproj, .review_below = review_below,
                                .review_margin = review_margin, .learned = learned};
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
        engine_learned_free(learned);
        return FOLIO_EXIT_FAIL;
    }
    int failed = 0;
    for (int i = pos; i < argc; i++) {
        folio_err_clear(&err);
        if (classify_file(argv[i], ocr, eng, full, max_pages, caps, max_classified, max_image_tokens, &err)) {
            print_error(argv[i], &err);
            failed++;
        }
    }
    engine_close(eng);
    engine_models_close(models);
    ocr_close(ocr);
    engine_labels_free(labels);
    engine_learned_free(learned);
    return failed ? FOLIO_EXIT_FAIL : FOLIO_EXIT_OK;
}
