/* folio ingest: options -> struct ingest_run_opts -> ingest_run (ingest_run.c). */
#include "pipeline/blobstore.h"
#include "pipeline/cli.h"
#include "pipeline/commands.h"
#include "pipeline/ingest_run.h"
#include "pipeline/metrics.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio ingest [OPTIONS] DIR\n"
    "\n"
    "Takes every scan dropped into DIR into the queue (one document + one job per\n"
    "file), or rejects it with a reason under DIR/.folio/rejected/.\n"
    "\n"
    "  --db CONNINFO        PostgreSQL connection (default $FOLIO_DB, then PG*)\n"
    "  --pooler MODE        transaction: --db is a transaction-mode pooler such as\n"
    "                       PgBouncer (default $FOLIO_DB_POOLER, else none)\n"
    "  --blob-store STORE   where document bytes live: pg (folio.blobs, default) or\n"
    "                       fs:/PATH, a content-addressed directory shared by ingest\n"
    "                       and the workers (docs/SCALING.md)\n"
    "  --watch              keep running: inotify plus periodic rescans\n"
    "  --recursive          descend into subdirectories\n"
    "  --rescan SECONDS     full rescan period in --watch mode (default 60)\n"
    "  --no-inotify         --watch with rescans only (network file systems)\n"
    "  --stable-ms MS       size+mtime must hold still this long (default 2000)\n"
    "  --follow-symlinks    accept symbolic links (refused by default) that resolve\n"
    "                       inside DIR or an --allow-root folder\n"
    "  --allow-root DIR     followed links may also lead here (repeatable)\n"
    "  --max-bytes SIZE     largest file accepted (default 512MiB)\n"
    "  --max-pixels N       largest page in pixels (default 300000000)\n"
    "  --max-pages N        most pages per document (default 2000)\n"
    "  --pdf-page-ms MS     PDF: wall-clock limit per page for the sandboxed parser\n"
    "                       (default 20000); slower pages are rejected (pdf_timeout)\n"
    "  --pdf-memory-mb MB   PDF: the parser's address-space limit (default 1024)\n"
    "  --after MODE         move (default) | delete | keep\n"
    "  --model-key KEY      model configuration the jobs are queued for (default \"default\")\n"
    "  --jobs N             validating threads (default: one per CPU)\n"
    "  --db-wait SECONDS    one-shot: give up after the database was unreachable this\n"
    "                       long (default 60; --watch retries for ever)\n"
    "  --progress / --no-progress   progress line on stderr (default: when a TTY)\n"
    "  --metrics-listen ADDR:PORT   serve /metrics (Prometheus), /healthz, /readyz\n"
    "  --instance NAME      settings from [ingest.NAME] of the configuration file,\n"
    "                       where 'dir' may name DIR (see 'folio config --help')\n"
    "\n"
    "Formats are recognised by content: PDF, JPEG, PNG, TIFF (all pages), PNM,\n"
    "WebP, GIF, BMP. PDF pages are sized at 300 dpi for --max-pixels. Hidden files, *.part, *.tmp and ~$* are ignored. After the database\n"
    "commit, files move to DIR/.folio/done/YYYY-MM-DD/ (UTC date); rejected files\n"
    "go to DIR/.folio/rejected/ beside NAME.reason.json. Nothing is overwritten.\n"
    "Exit status: 0 when the run completed (rejections included), 1 when it could\n"
    "not (database unreachable past --db-wait, unreadable DIR), 2 usage.\n";

/* File scope: the config layer reads the keys [ingest] accepts from it. */
static const struct option opts[] = {
        {"db", required_argument, 0, 1000},
        {"watch", no_argument, 0, 1001},
        {"recursive", no_argument, 0, 1002},
        {"rescan", required_argument, 0, 1003},
        {"stable-ms", required_argument, 0, 1004},
        {"follow-symlinks", no_argument, 0, 1005},
        {"max-bytes", required_argument, 0, 1006},
        {"max-pixels", required_argument, 0, 1007},
        {"max-pages", required_argument, 0, 1008},
        {"after", required_argument, 0, 1009},
        {"model-key", required_argument, 0, 1010},
        {"no-inotify", no_argument, 0, 1011},
        {"jobs", required_argument, 0, 1012},
        {"db-wait", required_argument, 0, 1013},
        {"progress", no_argument, 0, 1014},
        {"no-progress", no_argument, 0, 1015},
        {"metrics-listen", required_argument, 0, 1016},
        {"pooler", required_argument, 0, 1030},
        {"pdf-page-ms", required_argument, 0, 1150},
        {"pdf-memory-mb", required_argument, 0, 1151},
        {"allow-root", required_argument, 0, 1031},
        {"blob-store", required_argument, 0, 1180},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};

const struct option *cmd_ingest_options(void) { return opts; }

int cmd_ingest(int argc, char **argv)
{
    struct ingest_run_opts o;
    ingest_run_opts_default(&o);
    const char *db = NULL, *pooler = NULL, *blob_store = NULL;
    const char *metrics_listen = NULL;
    const char *roots[17] = {0}; /* NULL-terminated --allow-root list */
    size_t n_roots = 0;
    long long v;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(USAGE, stdout);
            return FOLIO_EXIT_OK;
        case 1000: db = optarg; break;
        case 1030: pooler = optarg; break;
        case 1180: blob_store = optarg; break;
        case 1001: o.watch = 1; break;
        case 1002: o.recursive = 1; break;
        case 1003:
            if (folio_parse_int(optarg, 1, 86400, &v) != 0)
                return cli_usage_error("ingest", "--rescan wants seconds from 1 to 86400, got '%s'", optarg);
            o.rescan_s = (int)v;
            break;
        case 1004:
            if (folio_parse_int(optarg, 0, 3600000, &v) != 0)
                return cli_usage_error("ingest", "--stable-ms wants milliseconds from 0 to 3600000, got '%s'", optarg);
            o.stable_ms = (int)v;
            break;
        case 1005: o.follow_symlinks = 1; break;
        case 1031:
            if (n_roots + 1 >= sizeof roots / sizeof *roots)
                return cli_usage_error("ingest", "--allow-root given more than %zu times", sizeof roots / sizeof *roots - 1);
            roots[n_roots++] = optarg;
            o.allow_roots = roots;
            break;
        case 1006:
            /* A blob is one bytea value, which PostgreSQL caps at 1 GiB. */
            if (folio_parse_size(optarg, &o.limits.max_bytes) != 0 || o.limits.max_bytes == 0 ||
                o.limits.max_bytes > (UINT64_C(1) << 30) - (UINT64_C(1) << 20))
                return cli_usage_error("ingest", "--max-bytes wants a size from 1 byte to 1023MiB, got '%s'", optarg);
            break;
        case 1007:
            if (folio_parse_int(optarg, 1, (long long)1 << 40, &v) != 0)
                return cli_usage_error("ingest", "--max-pixels wants a positive number, got '%s'", optarg);
            o.limits.max_pixels = (uint64_t)v;
            break;
        case 1008:
            if (folio_parse_int(optarg, 1, 1000000, &v) != 0)
                return cli_usage_error("ingest", "--max-pages wants 1 to 1000000, got '%s'", optarg);
            o.limits.max_pages = (int)v;
            break;
        case 1009:
            if (strcmp(optarg, "move") == 0)
                o.after = INGEST_AFTER_MOVE;
            else if (strcmp(optarg, "delete") == 0)
                o.after = INGEST_AFTER_DELETE;
            else if (strcmp(optarg, "keep") == 0)
                o.after = INGEST_AFTER_KEEP;
            else
                return cli_usage_error("ingest", "--after wants move, delete or keep, got '%s'", optarg);
            break;
        case 1010: {
            /* Printable ASCII only: the key is compared byte for byte by
             * workers and must never make an INSERT fail. */
            size_t kl = strlen(optarg);
            bool ok = kl > 0 && kl <= 200;
            for (size_t i = 0; ok && i < kl; i++)
                ok = optarg[i] > 0x20 && optarg[i] < 0x7f;
            if (!ok)
                return cli_usage_error("ingest", "--model-key wants 1 to 200 printable ASCII characters, no spaces");
            o.model_key = optarg;
            break;
        }
        case 1150:
            if (folio_parse_int(optarg, 10, 3600000, &v) != 0)
                return cli_usage_error("ingest", "--pdf-page-ms wants 10 to 3600000, got '%s'", optarg);
            o.limits.pdf_page_ms = (int)v;
            break;
        case 1151:
            if (folio_parse_int(optarg, 64, 1048576, &v) != 0)
                return cli_usage_error("ingest", "--pdf-memory-mb wants 64 to 1048576, got '%s'", optarg);
            o.limits.pdf_memory_mb = (int)v;
            break;
        case 1011: o.use_inotify = 0; break;
        case 1012:
            if (folio_parse_int(optarg, 1, 256, &v) != 0)
                return cli_usage_error("ingest", "--jobs wants 1 to 256, got '%s'", optarg);
            o.jobs = (int)v;
            break;
        case 1013:
            if (folio_parse_int(optarg, 0, 86400, &v) != 0)
                return cli_usage_error("ingest", "--db-wait wants seconds from 0 to 86400, got '%s'", optarg);
            o.db_wait_s = (int)v;
            break;
        case 1014: o.progress = 1; break;
        case 1015: o.progress = 0; break;
        case 1016: {
            struct folio_err merr = {0};
            if (metrics_parse_listen(optarg, &merr))
                return cli_usage_error("ingest", "%s (%s)", merr.msg, merr.hint);
            metrics_listen = optarg;
            break;
        }
        default:
            return cli_usage_error("ingest", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error("ingest", "missing argument");
    if (optind + 1 < argc)
        return cli_usage_error("ingest", "unexpected argument '%s'", argv[optind + 1]);
    o.dir = argv[optind];
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

    struct ingest_run_stats st;
    struct folio_err err = {0};
    if (metrics_listen) {
        struct metrics_cfg mc = {.listen = metrics_listen, .component = "ingest", .conninfo = o.conninfo,
                                 .model_key = o.model_key, .device = NULL};
        if (metrics_start(&mc, &o.metrics, NULL, &err)) {
            folio_err_print(stderr, &err);
            blobstore_close(blobs);
            return FOLIO_EXIT_FAIL;
        }
    }
    int rc = ingest_run(&o, &st, &err);
    metrics_stop(o.metrics);
    blobstore_close(blobs);
    folio_log(FOLIO_LOG_INFO, "ingest_summary",
              "files=%llu accepted=%llu new_documents=%llu duplicates=%llu rejected=%llu bytes=%llu "
              "batches=%llu db_retries=%llu seconds=%.2f files_per_s=%.1f",
              (unsigned long long)st.files, (unsigned long long)st.accepted,
              (unsigned long long)st.new_documents, (unsigned long long)st.duplicates,
              (unsigned long long)st.rejected, (unsigned long long)st.bytes,
              (unsigned long long)st.batches, (unsigned long long)st.db_retries, st.seconds,
              st.seconds > 0 ? (double)st.files / st.seconds : 0.0);
    printf("folio ingest: %llu files in %.1f s: %llu new documents, %llu duplicates, %llu rejected%s\n",
           (unsigned long long)st.files, st.seconds, (unsigned long long)st.new_documents,
           (unsigned long long)st.duplicates, (unsigned long long)st.rejected,
           st.rejected ? " (see DIR/.folio/rejected/)" : "");
    fflush(stdout);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
