/* folio worker: option parsing; the process itself is pipeline/worker.c. */
#include "engine/engine.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/document/doctext.h"
#include "pipeline/worker/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio worker [OPTIONS]\n"
    "\n"
    "Claims jobs from PostgreSQL and classifies each document, writing results back.\n"
    "Runs until SIGTERM/SIGINT: then stops claiming, finishes in-flight jobs within\n"
    "--grace, releases the rest and exits 0. A second signal exits at once.\n"
    "\n";
static const char USAGE_TAIL[] =
    "\n"
    "Options may also come from the configuration file ([worker], [worker.NAME]\n"
    "with --instance NAME; --config FILE) and FOLIO_<OPTION> variables: see\n"
    "'folio config --help'.\n";

/* What the options fill: the worker's own settings plus the values that
 * are resolved after parsing (conninfo, pooler, stores, metrics). */
struct worker_args {
    struct worker_opts o;
    struct cli_daemon_args d;
    size_t text_caps[2]; /* --max-text-bytes PAGE,DOC; 0 = doctext.h defaults */
};
#define AT(m, type) CLI_AT(struct worker_args, m, type)

/* Given: no longer raised automatically for the vision path. */
static int take_ocr_threads(const struct cli_opt *opt, void *args, const char *v, const char *cmd)
{
    (void)cmd;
    struct worker_args *a = args;
    long long n;
    if (folio_parse_int(v, opt->min, opt->max, &n))
        return -1;
    a->o.ocr_threads = (int)n;
    a->o.ocr_threads_auto = 0;
    return 0;
}

static const char *const DEVICE_LOSS[] = {"fallback", "release", NULL};

/* Also the keys of [worker] in the configuration file (pipeline/cli/config.c). */
static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(d.db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "pooler", .kind = CLI_STR, .off = AT(d.pooler, const char *), .arg = "MODE",
     .help = "transaction: --db is a transaction-mode pooler (PgBouncer\n"
             "pool_mode = transaction): no prepared statements, no LISTEN\n"
             "there (default $FOLIO_DB_POOLER, else none)"},
    {.name = "listen-db", .kind = CLI_STR, .off = AT(o.listen_conninfo, const char *), .min = 1,
     .want = "a conninfo", .arg = "CONNINFO",
     .help = "a direct connection used only to LISTEN for new jobs (wakes\n"
             "workers behind a transaction pooler; polling stays the fallback)"},
    {.name = "blob-store", .kind = CLI_STR, .off = AT(d.blob_store, const char *), .arg = "STORE",
     .help = "where document bytes live: pg (folio.blobs, default) or\n"
             "fs:/PATH, a content-addressed directory shared by ingest\n"
             "and the workers (docs/SCALING.md)"},
    {.name = "claim-batch", .kind = CLI_INT, .off = AT(o.batch, int), .min = 1, .max = 64, .arg = "N",
     .help = "jobs claimed in one statement, at most one per free OCR thread;\n"
             "N > 1 also writes results that finish together in one round\n"
             "trip (default 1; --batch is the old name)"},
    {.name = "batch", .kind = CLI_INT, .off = AT(o.batch, int), .min = 1, .max = 64},
    {.name = "lease", .kind = CLI_DOUBLE, .off = AT(o.queue.lease_s, double), .lo = 0.5, .hi = 1e9,
     .want = "seconds >= 0.5", .arg = "SECONDS", .help = "job lease, renewed every lease/3 (default 60)"},
    {.name = "grace", .kind = CLI_DOUBLE, .off = AT(o.grace_s, double), .hi = 1e9, .want = "seconds >= 0",
     .arg = "SECONDS", .help = "time to finish in-flight jobs on SIGTERM (default 30)"},
    {.name = "retain", .kind = CLI_DURATION, .off = AT(o.retain_s, double),
     .want = "a duration like 90s, 30m, 12h or 7d", .arg = "DURATION",
     .help = "delete done jobs older than this: 90s, 30m, 12h, 7d (default 7d)"},
    {.name = "max-attempts", .kind = CLI_INT, .off = AT(o.queue.max_attempts, int), .min = 1, .max = 1000,
     .arg = "N", .help = "attempts before a job is dead (default: the job's own)"},
    {.name = "retry-base", .kind = CLI_DOUBLE, .off = AT(o.queue.retry_base_s, double), .hi = 1e9,
     .want = "seconds >= 0", .arg = "SECONDS",
     .help = "backoff after a failed attempt n: base*2^(n-1) +-50% (default 10)"},
    {.name = "retry-max", .kind = CLI_DOUBLE, .off = AT(o.queue.retry_max_s, double), .hi = 1e9,
     .want = "seconds >= 0", .arg = "SECONDS", .help = "backoff cap (default 600)"},
    {.name = "poll", .kind = CLI_DOUBLE, .off = AT(o.poll_s, double), .lo = 0.01, .hi = 1e9,
     .want = "seconds >= 0.01", .arg = "SECONDS",
     .help = "idle polling interval next to LISTEN, jittered (default 2)"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(o.queue.model_key, const char *), .arg = "KEY",
     .help = "model configuration served (default \"default\")"},
    {.name = "model", .kind = CLI_STR, .off = AT(o.model_path, const char *), .arg = "FILE",
     .help = "text model GGUF (enables the ocr+lm path)"},
    {.name = "mmproj", .kind = CLI_STR, .off = AT(o.mmproj_path, const char *), .arg = "FILE",
     .help = "vision projector GGUF (enables the vision path)"},
    {.name = "device", .kind = CLI_STR, .off = AT(o.device, const char *), .arg = "SPEC",
     .help = "Vulkan device: index, UUID or name substring (naming a CPU\n"
             "device such as llvmpipe allows it)"},
    {.name = "max-image-tokens", .kind = CLI_U32, .off = AT(o.max_image_tokens, uint32_t), .min = 4,
     .max = 65536, .arg = "N", .help = "vision: plan for pages of N image tokens (default 1600)"},
    {.name = "gate-file", .kind = CLI_STR, .off = AT(o.gate_file, const char *), .arg = "FILE",
     .help = "extra driver-gate rules"},
    {.name = "gpu-weights", .kind = CLI_FN, .fn = cli_take_gpu_weights, .off = AT(o.gpu_weights, int), .arg = "M",
     .help = "auto (default) | f16 | native | int8: model matrices expanded\n"
             "to f16 at load for the tensor-core GEMM (auto: when it fits), kept\n"
             "as stored (less memory, slower prefill), or int8 rows for the\n"
             "int8 GEMM (text model; its error is in BENCHMARKS.md)"},
    {.name = "gpu-batch", .kind = CLI_INT, .off = AT(o.gpu_batch, int), .max = 256,
     .want = "0..256 pages per GPU pass (0 = the engine's choice)", .arg = "N",
     .help = "pages per GPU pass, 0 = chosen from the device's memory plan\n"
             "(default 0); one GPU thread takes up to N ready pages\n"
             "per pass, without waiting for more"},
    {.name = "max-label-tokens", .kind = CLI_U32, .off = AT(o.max_label_tokens, uint32_t), .min = 1, .max = 64,
     .want = "1..64 tokens", .arg = "N",
     .help = "the longest label the engine plans for (default 16); each\n"
             "page of a pass holds a vocabulary-wide logits row per label\n"
             "token, so a smaller plan fits larger --gpu-batch values"},
    {.name = "on-device-loss", .kind = CLI_ENUM, .off = AT(o.release_on_device_loss, int),
     .choices = DEVICE_LOSS, .arg = "M",
     .help = "fallback (default): the document goes to the OCR tiers;\n"
             "release: it goes back to the queue for a healthy GPU"},
    {.name = "ocr-lang", .kind = CLI_STR, .off = AT(o.ocr_lang, const char *), .arg = "LANGS",
     .help = "Tesseract languages (default eng)"},
    {.name = "ocr-threads", .kind = CLI_FN, .fn = take_ocr_threads, .min = 1, .max = 256, .arg = "N",
     .help = "documents in flight in parallel (default: cores; with the\n"
             "vision path on, at least 2 x gpu-batch + 2 to keep the GPU\n"
             "fed: one batch in the pass, the next one being prepared)"},
    {.name = "ocr-max-pages", .kind = CLI_INT, .off = AT(o.ocr_max_pages, int), .min = 1, .max = 100000,
     .arg = "N",
     .help = "pages OCR'd per document (default 10; PDF pages with a\n"
             "usable text layer are not OCR'd and do not count)"},
    {.name = "max-pages-classified", .kind = CLI_INT, .off = AT(o.max_pages_classified, int), .min = 1,
     .max = 10000, .arg = "N", .help = "pages classified one by one per document (default 20)"},
    {.name = "pdf-page-ms", .kind = CLI_INT, .off = AT(o.pdf_page_ms, int), .min = 10, .max = 3600000,
     .arg = "MS",
     .help = "PDF: wall-clock limit per page for the sandboxed parser\n"
             "(default 20000); a slower page fails the job"},
    {.name = "pdf-memory-mb", .kind = CLI_INT, .off = AT(o.pdf_memory_mb, int), .min = 64, .max = 1048576,
     .arg = "MB", .help = "PDF: the parser's address-space limit (default 1024)"},
    {.name = "max-text-bytes", .kind = CLI_FN, .fn = cli_take_text_caps, .off = AT(text_caps[0], size_t),
     .want = "N or PAGE,DOC, sizes of 1..64MiB such as 64KiB,512KiB", .arg = "N|PAGE,DOC",
     .help = "text kept per page and per document for the text\n"
             "tiers (default 64KiB,512KiB); cuts are recorded in the\n"
             "result's ocr_pages.text_cut"},
    {.name = "page-deadline", .kind = CLI_INT, .off = AT(o.page_deadline_ms, int), .max = 3600000,
     .want = "0..3600000 ms", .arg = "MS", .help = "OCR time budget per page (default 60000)"},
    {.name = "osd-min-conf", .kind = CLI_DOUBLE, .off = AT(o.osd_min_conf, double), .hi = 100, .arg = "C",
     .help = "turn a page only when Tesseract's orientation confidence\n"
             "is at least C (default 12; 0 turns on any answer)"},
    {.name = "review-below", .kind = CLI_DOUBLE, .off = AT(o.review_below, double), .hi = 1,
     .want = "a probability 0..1", .arg = "P",
     .help = "needs_review under probability P (default: folio.review_policy\n"
             "of the model key, else 0.5)"},
    {.name = "retrain-after", .kind = CLI_INT, .off = AT(o.retrain_after, int), .max = 1000000, .arg = "N",
     .help = "retrain ocr+learned when N corrections arrived since the last\n"
             "model (default 20; 0 = only by folio train)"},
    {.name = "job-deadline", .kind = CLI_DURATION, .off = AT(o.job_deadline_s, double), .lo = 1,
     .want = "a duration of at least 1 s", .arg = "SECS",
     .help = "a job's time budget: past it the job fails (one attempt)\n"
             "and its lease is no longer renewed (default: pages x\n"
             "page deadline + 2 min)"},
    {.name = "max-pixels", .kind = CLI_U64, .off = AT(o.max_pixels, uint64_t), .min = 1, .max = 1LL << 40,
     .want = "a positive number", .arg = "N",
     .help = "largest page decoded, refused from its header (default\n"
             "300000000, ingest's default: keep the two equal)"},
    {.name = "decode-memory", .kind = CLI_SIZE, .off = AT(o.decode_memory, uint64_t), .min = 16LL << 20,
     .want = "a size of at least 16M (e.g. 4G)", .arg = "SIZE",
     .help = "decoded pages held at once by all OCR threads; a page\n"
             "waits for room, one needing more is refused (default:\n"
             "one --max-pixels page in RGB + 512M)"},
    {.name = "metrics-listen", .kind = CLI_FN, .fn = cli_take_listen, .off = AT(d.metrics_listen, const char *), .arg = "ADDR:PORT",
     .help = "serve /metrics (Prometheus), /healthz, /readyz"},
};

const struct cli_cmd cmd_worker_cli = {
    .name = "worker", .usage = USAGE, .usage_tail = USAGE_TAIL, .opts = OPTS,
    .nopts = sizeof OPTS / sizeof OPTS[0],
};

int cmd_worker(int argc, char **argv)
{
    struct worker_args a = {0};
    worker_opts_default(&a.o);
    int pos, prc = cli_parse(&cmd_worker_cli, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    struct worker_opts o = a.o;
    o.max_page_text = a.text_caps[0];
    o.max_doc_text = a.text_caps[1];
    /* Expired leases are noticed within a lease plus a reaper period. */
    o.reap_s = o.queue.lease_s / 2 < 10 ? o.queue.lease_s / 2 : 10;
    struct cli_daemon d;
    int drc = cli_daemon_open("worker", &a.d, o.queue.model_key, o.device, &d);
    if (drc != FOLIO_EXIT_OK)
        return drc;
    o.conninfo = d.conninfo;
    o.pooler = d.pooler;
    o.blobs = d.blobs;
    o.metrics = d.metrics;
    struct folio_err err = {0};
    int rc = (o.model_path && cli_check_gguf("--model", o.model_path, &err)) ||
             (o.mmproj_path && cli_check_gguf("--mmproj", o.mmproj_path, &err)) || worker_run(&o, &err);
    cli_daemon_close(&d);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
