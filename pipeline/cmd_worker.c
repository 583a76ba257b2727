/* folio worker: option parsing; the process itself is pipeline/worker.c. */
#include "pipeline/pipeline.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio worker [OPTIONS]\n"
    "\n"
    "Claims jobs from PostgreSQL and classifies each document, writing results back.\n"
    "Runs until SIGTERM/SIGINT: then stops claiming, finishes in-flight jobs within\n"
    "--grace, releases the rest and exits 0. A second signal exits at once.\n"
    "\n"
    "  --db CONNINFO        PostgreSQL connection (default $FOLIO_DB, then PG*)\n"
    "  --batch N            jobs claimed at once, at most one per free OCR thread (default 1)\n"
    "  --lease SECONDS      job lease, renewed every lease/3 (default 60)\n"
    "  --grace SECONDS      time to finish in-flight jobs on SIGTERM (default 30)\n"
    "  --retain DURATION    delete done jobs older than this: 90s, 30m, 12h, 7d (default 7d)\n"
    "  --max-attempts N     attempts before a job is dead (default: the job's own)\n"
    "  --retry-base SECONDS backoff after a failed attempt n: base*2^(n-1) +-50% (default 10)\n"
    "  --retry-max SECONDS  backoff cap (default 600)\n"
    "  --poll SECONDS       idle polling interval next to LISTEN, jittered (default 2)\n"
    "  --model-key KEY      model configuration served (default \"default\")\n"
    "  --model FILE         text model GGUF (enables the ocr+lm path)\n"
    "  --mmproj FILE        vision projector GGUF (enables the vision path)\n"
    "  --device SPEC        Vulkan device: index, UUID or name substring (naming a CPU\n"
    "                       device such as llvmpipe allows it)\n"
    "  --max-image-tokens N vision: plan for pages of N image tokens (default 1600)\n"
    "  --gate-file FILE     extra driver-gate rules\n"
    "  --on-device-loss M   fallback (default): the document goes to the OCR tiers;\n"
    "                       release: it goes back to the queue for a healthy GPU\n"
    "  --ocr-lang LANGS     Tesseract languages (default eng)\n"
    "  --ocr-threads N      documents OCR'd in parallel (default: cores)\n"
    "  --ocr-max-pages N    pages OCR'd per document (default 10)\n"
    "  --page-deadline MS   OCR time budget per page (default 60000)\n"
    "  --osd-min-conf C     turn a page only when Tesseract's orientation confidence\n"
    "                       is at least C (default 12; 0 turns on any answer)\n"
    "  --review-below P     needs_review under probability P (default: folio.review_policy\n"
    "                       of the model key, else 0.5)\n"
    "  --retrain-after N    retrain ocr+learned when N corrections arrived since the last\n"
    "                       model (default 20; 0 = only by folio train)\n";

/* "90", "90s", "30m", "12h", "7d" → seconds. */
static int parse_duration(const char *s, double *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    double mul = 1;
    if (*end == 's')
        end++;
    else if (*end == 'm')
        mul = 60, end++;
    else if (*end == 'h')
        mul = 3600, end++;
    else if (*end == 'd')
        mul = 86400, end++;
    if (*end)
        return -1;
    *out = v * mul;
    return 0;
}

static int parse_pos_double(const char *s, double min, double *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || *end || v < min || v > 1e9)
        return -1;
    *out = v;
    return 0;
}

int cmd_worker(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 1000},
        {"batch", required_argument, 0, 1001},
        {"lease", required_argument, 0, 1002},
        {"grace", required_argument, 0, 1003},
        {"retain", required_argument, 0, 1004},
        {"max-attempts", required_argument, 0, 1005},
        {"model-key", required_argument, 0, 1006},
        {"model", required_argument, 0, 1007},
        {"mmproj", required_argument, 0, 1008},
        {"device", required_argument, 0, 1009},
        {"ocr-lang", required_argument, 0, 1010},
        {"ocr-threads", required_argument, 0, 1011},
        {"ocr-max-pages", required_argument, 0, 1012},
        {"retry-base", required_argument, 0, 1013},
        {"retry-max", required_argument, 0, 1014},
        {"poll", required_argument, 0, 1015},
        {"page-deadline", required_argument, 0, 1016},
        {"max-image-tokens", required_argument, 0, 1017},
        {"gate-file", required_argument, 0, 1018},
        {"on-device-loss", required_argument, 0, 1019},
        {"osd-min-conf", required_argument, 0, 1020},
        {"review-below", required_argument, 0, 1021},
        {"retrain-after", required_argument, 0, 1022},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    struct worker_opts o;
    worker_opts_default(&o);
    const char *db = NULL;
    optind = 1;
    opterr = 0;
    int ch;
    long long v;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(USAGE, stdout);
            return FOLIO_EXIT_OK;
        case 1000: db = optarg; break;
        case 1001:
            if (folio_parse_int(optarg, 1, 64, &v))
                return cli_usage_error("worker", "--batch wants 1..64, got '%s'", optarg);
            o.batch = (int)v;
            break;
        case 1002:
            if (parse_pos_double(optarg, 0.5, &o.queue.lease_s))
                return cli_usage_error("worker", "--lease wants seconds >= 0.5, got '%s'", optarg);
            break;
        case 1003:
            if (parse_pos_double(optarg, 0, &o.grace_s))
                return cli_usage_error("worker", "--grace wants seconds >= 0, got '%s'", optarg);
            break;
        case 1004:
            if (parse_duration(optarg, &o.retain_s))
                return cli_usage_error("worker", "--retain wants a duration like 90s, 30m, 12h or 7d, got '%s'", optarg);
            break;
        case 1005:
            if (folio_parse_int(optarg, 1, 1000, &v))
                return cli_usage_error("worker", "--max-attempts wants 1..1000, got '%s'", optarg);
            o.queue.max_attempts = (int)v;
            break;
        case 1006: o.queue.model_key = optarg; break;
        case 1007: o.model_path = optarg; break;
        case 1008: o.mmproj_path = optarg; break;
        case 1009: o.device = optarg; break;
        case 1017:
            if (folio_parse_int(optarg, 4, 65536, &v))
                return cli_usage_error("worker", "--max-image-tokens wants 4..65536, got '%s'", optarg);
            o.max_image_tokens = (uint32_t)v;
            break;
        case 1018: o.gate_file = optarg; break;
        case 1019:
            if (strcmp(optarg, "fallback") == 0)
                o.release_on_device_loss = 0;
            else if (strcmp(optarg, "release") == 0)
                o.release_on_device_loss = 1;
            else
                return cli_usage_error("worker", "--on-device-loss takes fallback or release, not '%s'", optarg);
            break;
        case 1020:
            if (cli_parse_double(optarg, 0, 100, &o.osd_min_conf))
                return cli_usage_error("worker", "--osd-min-conf wants 0..100, got '%s'", optarg);
            break;
        case 1021:
            if (cli_parse_double(optarg, 0, 1, &o.review_below))
                return cli_usage_error("worker", "--review-below wants a probability 0..1, got '%s'", optarg);
            break;
        case 1022:
            if (folio_parse_int(optarg, 0, 1000000, &v))
                return cli_usage_error("worker", "--retrain-after wants 0..1000000, got '%s'", optarg);
            o.retrain_after = (int)v;
            break;
        case 1010: o.ocr_lang = optarg; break;
        case 1011:
            if (folio_parse_int(optarg, 1, 256, &v))
                return cli_usage_error("worker", "--ocr-threads wants 1..256, got '%s'", optarg);
            o.ocr_threads = (int)v;
            break;
        case 1012:
            if (folio_parse_int(optarg, 1, 100000, &v))
                return cli_usage_error("worker", "--ocr-max-pages wants 1..100000, got '%s'", optarg);
            o.ocr_max_pages = (int)v;
            break;
        case 1013:
            if (parse_pos_double(optarg, 0, &o.queue.retry_base_s))
                return cli_usage_error("worker", "--retry-base wants seconds >= 0, got '%s'", optarg);
            break;
        case 1014:
            if (parse_pos_double(optarg, 0, &o.queue.retry_max_s))
                return cli_usage_error("worker", "--retry-max wants seconds >= 0, got '%s'", optarg);
            break;
        case 1015:
            if (parse_pos_double(optarg, 0.01, &o.poll_s))
                return cli_usage_error("worker", "--poll wants seconds >= 0.01, got '%s'", optarg);
            break;
        case 1016:
            if (folio_parse_int(optarg, 0, 3600000, &v))
                return cli_usage_error("worker", "--page-deadline wants 0..3600000 ms, got '%s'", optarg);
            o.page_deadline_ms = (int)v;
            break;
        default:
            return cli_usage_error("worker", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("worker", "unexpected argument '%s'", argv[optind]);
    o.conninfo = db_conninfo(db);
    /* Expired leases are noticed within a lease plus a reaper period. */
    o.reap_s = o.queue.lease_s / 2 < 10 ? o.queue.lease_s / 2 : 10;
    struct folio_err err = {0};
    if ((o.model_path && cli_check_gguf("--model", o.model_path, &err)) ||
        (o.mmproj_path && cli_check_gguf("--mmproj", o.mmproj_path, &err)) || worker_run(&o, &err)) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
