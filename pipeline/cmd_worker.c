/* folio worker: option parsing; the process itself is pipeline/worker.c. */
#include "engine/engine.h"
#include "pipeline/blobstore.h"
#include "pipeline/cli.h"
#include "pipeline/commands.h"
#include "pipeline/db.h"
#include "pipeline/doctext.h"
#include "pipeline/metrics.h"
#include "pipeline/worker.h"

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
    "  --pooler MODE        transaction: --db is a transaction-mode pooler (PgBouncer\n"
    "                       pool_mode = transaction): no prepared statements, no LISTEN\n"
    "                       there (default $FOLIO_DB_POOLER, else none)\n"
    "  --listen-db CONNINFO a direct connection used only to LISTEN for new jobs (wakes\n"
    "                       workers behind a transaction pooler; polling stays the fallback)\n"
    "  --blob-store STORE   where document bytes live: pg (folio.blobs, default) or\n"
    "                       fs:/PATH, a content-addressed directory shared by ingest\n"
    "                       and the workers (docs/SCALING.md)\n"
    "  --claim-batch N      jobs claimed in one statement, at most one per free OCR thread;\n"
    "                       N > 1 also writes results that finish together in one round\n"
    "                       trip (default 1; --batch is the old name)\n"
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
    "  --gpu-weights M      auto (default) | f16 | native: model matrices expanded to f16\n"
    "                       at load for the tensor-core GEMM (auto: when it fits), or kept\n"
    "                       as stored (less memory, slower prefill)\n"
    "  --gpu-batch N        pages per GPU pass, 0 = chosen from the device's memory plan\n"
    "                       (default 0); one GPU thread takes up to N ready pages\n"
    "                       per pass, without waiting for more\n"
    "  --max-label-tokens N the longest label the engine plans for (default 16); each\n"
    "                       page of a pass holds a vocabulary-wide logits row per label\n"
    "                       token, so a smaller plan fits larger --gpu-batch values\n"
    "  --on-device-loss M   fallback (default): the document goes to the OCR tiers;\n"
    "                       release: it goes back to the queue for a healthy GPU\n"
    ;
/* The options of the OCR and text tiers (a second string: C17 compilers
 * need only take 4095 characters in one literal). */
static const char USAGE_OCR[] =
    "  --ocr-lang LANGS     Tesseract languages (default eng)\n"
    "  --ocr-threads N      documents in flight in parallel (default: cores; with the\n"
    "                       vision path on, at least 2 x gpu-batch + 2 to keep the GPU\n"
    "                       fed: one batch in the pass, the next one being prepared)\n"
    "  --ocr-max-pages N    pages OCR'd per document (default 10; PDF pages with a\n"
    "                       usable text layer are not OCR'd and do not count)\n"
    "  --max-pages-classified N\n"
    "                       pages classified one by one per document (default 20)\n"
    "  --pdf-page-ms MS     PDF: wall-clock limit per page for the sandboxed parser\n"
    "                       (default 20000); a slower page fails the job\n"
    "  --pdf-memory-mb MB   PDF: the parser's address-space limit (default 1024)\n"
    "  --max-text-bytes N|PAGE,DOC  text kept per page and per document for the text\n"
    "                       tiers (default 64KiB,512KiB); cuts are recorded in the\n"
    "                       result's ocr_pages.text_cut\n"
    "  --page-deadline MS   OCR time budget per page (default 60000)\n"
    "  --osd-min-conf C     turn a page only when Tesseract's orientation confidence\n"
    "                       is at least C (default 12; 0 turns on any answer)\n"
    "  --review-below P     needs_review under probability P (default: folio.review_policy\n"
    "                       of the model key, else 0.5)\n"
    "  --retrain-after N    retrain ocr+learned when N corrections arrived since the last\n"
    "                       model (default 20; 0 = only by folio train)\n"
    "  --job-deadline SECS  a job's time budget: past it the job fails (one attempt)\n"
    "                       and its lease is no longer renewed (default: pages x\n"
    "                       page deadline + 2 min)\n"
    "  --max-pixels N       largest page decoded, refused from its header (default\n"
    "                       300000000, ingest's default: keep the two equal)\n"
    "  --decode-memory SIZE decoded pages held at once by all OCR threads; a page\n"
    "                       waits for room, one needing more is refused (default:\n"
    "                       one --max-pixels page in RGB + 512M)\n"
    "  --metrics-listen ADDR:PORT  serve /metrics (Prometheus), /healthz, /readyz\n"
    "\n"
    "Options may also come from the configuration file ([worker], [worker.NAME]\n"
    "with --instance NAME; --config FILE) and FOLIO_<OPTION> variables: see\n"
    "'folio config --help'.\n";

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

/* File scope: the config layer reads the keys [worker] accepts from it. */
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
        {"max-pixels", required_argument, 0, 1090},
        {"job-deadline", required_argument, 0, 1091},
        {"max-image-tokens", required_argument, 0, 1017},
        {"gate-file", required_argument, 0, 1018},
        {"on-device-loss", required_argument, 0, 1019},
        {"gpu-weights", required_argument, 0, 1040},
        {"gpu-batch", required_argument, 0, 1170},
        {"max-label-tokens", required_argument, 0, 1171},
        {"max-text-bytes", required_argument, 0, 1020},
        {"metrics-listen", required_argument, 0, 1041},
        {"claim-batch", required_argument, 0, 1001},
        {"pooler", required_argument, 0, 1042},
        {"listen-db", required_argument, 0, 1043},
        {"max-pages-classified", required_argument, 0, 1150},
        {"pdf-page-ms", required_argument, 0, 1151},
        {"pdf-memory-mb", required_argument, 0, 1152},
        {"decode-memory", required_argument, 0, 1153},
        {"osd-min-conf", required_argument, 0, 1160},
        {"review-below", required_argument, 0, 1161},
        {"retrain-after", required_argument, 0, 1162},
        {"blob-store", required_argument, 0, 1180},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};

const struct option *cmd_worker_options(void) { return opts; }

int cmd_worker(int argc, char **argv)
{
    struct worker_opts o;
    worker_opts_default(&o);
    const char *db = NULL, *pooler = NULL, *blob_store = NULL;
    const char *metrics_listen = NULL;
    optind = 1;
    opterr = 0;
    int ch;
    long long v;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(USAGE, stdout);
            fputs(USAGE_OCR, stdout);
            return FOLIO_EXIT_OK;
        case 1000: db = optarg; break;
        case 1001:
            if (folio_parse_int(optarg, 1, 64, &v))
                return cli_usage_error("worker", "--claim-batch wants 1..64, got '%s'", optarg);
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
        case 1170:
            if (folio_parse_int(optarg, 0, 256, &v))
                return cli_usage_error("worker", "--gpu-batch wants 0..256 pages per GPU pass (0 = the engine's "
                                       "choice), got '%s'", optarg);
            o.gpu_batch = (int)v;
            break;
        case 1171:
            if (folio_parse_int(optarg, 1, 64, &v))
                return cli_usage_error("worker", "--max-label-tokens wants 1..64 tokens, got '%s'", optarg);
            o.max_label_tokens = (uint32_t)v;
            break;
        case 1040:
            if ((o.gpu_weights = engine_gpu_weights_parse(optarg)) < 0)
                return cli_usage_error("worker", "--gpu-weights takes auto, f16 or native, not '%s'", optarg);
            break;
        case 1041: {
            struct folio_err merr = {0};
            if (metrics_parse_listen(optarg, &merr))
                return cli_usage_error("worker", "%s (%s)", merr.msg, merr.hint);
            metrics_listen = optarg;
            break;
        }
        case 1019:
            if (strcmp(optarg, "fallback") == 0)
                o.release_on_device_loss = 0;
            else if (strcmp(optarg, "release") == 0)
                o.release_on_device_loss = 1;
            else
                return cli_usage_error("worker", "--on-device-loss takes fallback or release, not '%s'", optarg);
            break;
        case 1042: pooler = optarg; break;
        case 1180: blob_store = optarg; break;
        case 1043:
            if (!optarg[0])
                return cli_usage_error("worker", "--listen-db wants a conninfo, got an empty string");
            o.listen_conninfo = optarg;
            break;
        case 1150:
            if (folio_parse_int(optarg, 1, 10000, &v))
                return cli_usage_error("worker", "--max-pages-classified wants 1..10000, got '%s'", optarg);
            o.max_pages_classified = (int)v;
            break;
        case 1151:
            if (folio_parse_int(optarg, 10, 3600000, &v))
                return cli_usage_error("worker", "--pdf-page-ms wants 10..3600000, got '%s'", optarg);
            o.pdf_page_ms = (int)v;
            break;
        case 1152:
            if (folio_parse_int(optarg, 64, 1048576, &v))
                return cli_usage_error("worker", "--pdf-memory-mb wants 64..1048576, got '%s'", optarg);
            o.pdf_memory_mb = (int)v;
            break;
        case 1153:
            if (folio_parse_size(optarg, &o.decode_memory) || o.decode_memory < ((uint64_t)16 << 20))
                return cli_usage_error("worker", "--decode-memory wants a size of at least 16M (e.g. 4G), got '%s'", optarg);
            break;
        case 1160:
            if (cli_parse_double(optarg, 0, 100, &o.osd_min_conf))
                return cli_usage_error("worker", "--osd-min-conf wants 0..100, got '%s'", optarg);
            break;
        case 1161:
            if (cli_parse_double(optarg, 0, 1, &o.review_below))
                return cli_usage_error("worker", "--review-below wants a probability 0..1, got '%s'", optarg);
            break;
        case 1162:
            if (folio_parse_int(optarg, 0, 1000000, &v))
                return cli_usage_error("worker", "--retrain-after wants 0..1000000, got '%s'", optarg);
            o.retrain_after = (int)v;
            break;
        case 1010: o.ocr_lang = optarg; break;
        case 1011:
            if (folio_parse_int(optarg, 1, 256, &v))
                return cli_usage_error("worker", "--ocr-threads wants 1..256, got '%s'", optarg);
            o.ocr_threads = (int)v;
            o.ocr_threads_auto = 0;
            break;
        case 1012:
            if (folio_parse_int(optarg, 1, 100000, &v))
                return cli_usage_error("worker", "--ocr-max-pages wants 1..100000, got '%s'", optarg);
            o.ocr_max_pages = (int)v;
            break;
        case 1020:
            if (doc_text_parse_caps(optarg, &o.max_page_text, &o.max_doc_text))
                return cli_usage_error("worker", "--max-text-bytes wants N or PAGE,DOC, sizes of "
                                       "1..64MiB such as 64KiB,512KiB, got '%s'", optarg);
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
        case 1091:
            if (parse_duration(optarg, &o.job_deadline_s) != 0 || o.job_deadline_s < 1)
                return cli_usage_error("worker", "--job-deadline wants a duration of at least 1 s, got '%s'", optarg);
            break;
        case 1090:
            if (folio_parse_int(optarg, 1, (long long)1 << 40, &v) != 0)
                return cli_usage_error("worker", "--max-pixels wants a positive number, got '%s'", optarg);
            o.max_pixels = (uint64_t)v;
            break;
        default:
            return cli_usage_error("worker", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("worker", "unexpected argument '%s'", argv[optind]);
    o.conninfo = db_conninfo(db);
    struct folio_err perr = {0};
    if (db_pooler_resolve(pooler, &o.pooler, &perr)) {
        folio_err_print(stderr, &perr);
        return FOLIO_EXIT_USAGE;
    }
    struct blobstore *blobs = NULL;
    if (blobstore_open(blob_store, &blobs, &perr)) {
        folio_err_print(stderr, &perr);
        return FOLIO_EXIT_USAGE;
    }
    o.blobs = blobs;
    /* Expired leases are noticed within a lease plus a reaper period. */
    o.reap_s = o.queue.lease_s / 2 < 10 ? o.queue.lease_s / 2 : 10;
    struct folio_err err = {0};
    if (metrics_listen) {
        struct metrics_cfg mc = {.listen = metrics_listen, .component = "worker", .conninfo = o.conninfo,
                                 .model_key = o.queue.model_key, .device = o.device};
        if (metrics_start(&mc, &o.metrics, NULL, &err)) {
            folio_err_print(stderr, &err);
            blobstore_close(blobs);
            return FOLIO_EXIT_FAIL;
        }
    }
    int rc = (o.model_path && cli_check_gguf("--model", o.model_path, &err)) ||
             (o.mmproj_path && cli_check_gguf("--mmproj", o.mmproj_path, &err)) || worker_run(&o, &err);
    metrics_stop(o.metrics);
    blobstore_close(blobs);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
