/* folio ingest: options -> struct ingest_run_opts -> ingest_run (ingest_run.c). */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/ingest/ingest_run.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio ingest [OPTIONS] DIR\n"
    "\n"
    "Takes every scan dropped into DIR into the queue (one document + one job per\n"
    "file), or rejects it with a reason under DIR/.folio/rejected/.\n"
    "\n";
/* --instance is taken out by config_apply (pipeline/cli/config.c) before the
 * parser runs, so it is no table entry; its help line is written here. */
static const char USAGE_TAIL[] =
    "  --instance NAME      settings from [ingest.NAME] of the configuration file,\n"
    "                       where 'dir' may name DIR (see 'folio config --help')\n"
    "\n"
    "Formats are recognised by content: PDF, JPEG, PNG, TIFF (all pages), PNM,\n"
    "WebP, GIF, BMP. PDF pages are sized at 300 dpi for --max-pixels. Hidden files, *.part, *.tmp and ~$* are ignored. After the database\n"
    "commit, files move to DIR/.folio/done/YYYY-MM-DD/ (UTC date); rejected files\n"
    "go to DIR/.folio/rejected/ beside NAME.reason.json. Nothing is overwritten.\n"
    "Exit status: 0 when the run completed (rejections included), 1 when it could\n"
    "not (database unreachable past --db-wait, unreadable DIR), 2 usage.\n";

/* What the options fill: ingest's settings plus what is resolved after
 * parsing (conninfo, pooler, stores, metrics, the --allow-root list). */
struct ingest_args {
    struct ingest_run_opts o;
    struct cli_daemon_args d;
    const char *roots[17]; /* NULL-terminated --allow-root list */
    size_t n_roots;
};
#define AT(m, type) CLI_AT(struct ingest_args, m, type)

static int take_allow_root(const struct cli_opt *opt, void *args, const char *v, const char *cmd)
{
    struct ingest_args *a = args;
    size_t cap = sizeof a->roots / sizeof *a->roots - 1;
    if (a->n_roots >= cap)
        return cli_usage_error(cmd, "--%s given more than %zu times", opt->name, cap);
    a->roots[a->n_roots++] = v;
    a->o.allow_roots = a->roots;
    return 0;
}

/* Printable ASCII only: the key is compared byte for byte by workers and
 * must never make an INSERT fail. */
static int take_model_key(const struct cli_opt *opt, void *args, const char *v, const char *cmd)
{
    size_t kl = strlen(v);
    bool ok = kl > 0 && kl <= 200;
    for (size_t i = 0; ok && i < kl; i++)
        ok = v[i] > 0x20 && v[i] < 0x7f;
    if (!ok)
        return cli_usage_error(cmd, "--%s wants 1 to 200 printable ASCII characters, no spaces", opt->name);
    ((struct ingest_args *)args)->o.model_key = v;
    return 0;
}

static int take_after(const struct cli_opt *opt, void *args, const char *v, const char *cmd)
{
    (void)opt, (void)cmd;
    static const struct {
        const char *name;
        enum ingest_after after;
    } AFTER[] = {{"move", INGEST_AFTER_MOVE}, {"delete", INGEST_AFTER_DELETE}, {"keep", INGEST_AFTER_KEEP}};
    for (size_t i = 0; i < sizeof AFTER / sizeof AFTER[0]; i++) {
        if (strcmp(v, AFTER[i].name) == 0) {
            ((struct ingest_args *)args)->o.after = AFTER[i].after;
            return 0;
        }
    }
    return -1;
}

/* Also the keys of [ingest] in the configuration file (pipeline/cli/config.c). */
static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(d.db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "pooler", .kind = CLI_STR, .off = AT(d.pooler, const char *), .arg = "MODE",
     .help = "transaction: --db is a transaction-mode pooler such as\n"
             "PgBouncer (default $FOLIO_DB_POOLER, else none)"},
    {.name = "blob-store", .kind = CLI_STR, .off = AT(d.blob_store, const char *), .arg = "STORE",
     .help = "where document bytes live: pg (folio.blobs, default) or\n"
             "fs:/PATH, a content-addressed directory shared by ingest\n"
             "and the workers (docs/SCALING.md)"},
    {.name = "watch", .kind = CLI_FLAG, .off = AT(o.watch, int), .help = "keep running: inotify plus periodic rescans"},
    {.name = "recursive", .kind = CLI_FLAG, .off = AT(o.recursive, int), .help = "descend into subdirectories"},
    {.name = "rescan", .kind = CLI_INT, .off = AT(o.rescan_s, int), .min = 1, .max = 86400,
     .want = "seconds from 1 to 86400", .arg = "SECONDS",
     .help = "full rescan period in --watch mode (default 60)"},
    {.name = "no-inotify", .kind = CLI_NOFLAG, .off = AT(o.use_inotify, int),
     .help = "--watch with rescans only (network file systems)"},
    {.name = "stable-ms", .kind = CLI_INT, .off = AT(o.stable_ms, int), .max = 3600000,
     .want = "milliseconds from 0 to 3600000", .arg = "MS",
     .help = "size+mtime must hold still this long (default 2000)"},
    {.name = "follow-symlinks", .kind = CLI_FLAG, .off = AT(o.follow_symlinks, int),
     .help = "accept symbolic links (refused by default) that resolve\n"
             "inside DIR or an --allow-root folder"},
    {.name = "allow-root", .kind = CLI_FN, .repeats = 1, .fn = take_allow_root, .arg = "DIR",
     .help = "followed links may also lead here (repeatable)"},
    /* A blob is one bytea value, which PostgreSQL caps at 1 GiB. */
    {.name = "max-bytes", .kind = CLI_SIZE, .off = AT(o.limits.max_bytes, uint64_t), .min = 1,
     .max = (1LL << 30) - (1LL << 20), .want = "a size from 1 byte to 1023MiB", .arg = "SIZE",
     .help = "largest file accepted (default 512MiB)"},
    {.name = "max-pixels", .kind = CLI_U64, .off = AT(o.limits.max_pixels, uint64_t), .min = 1,
     .max = 1LL << 40, .want = "a positive number", .arg = "N",
     .help = "largest page in pixels (default 300000000)"},
    {.name = "max-pages", .kind = CLI_INT, .off = AT(o.limits.max_pages, int), .min = 1, .max = 1000000,
     .want = "1 to 1000000", .arg = "N", .help = "most pages per document (default 2000)"},
    {.name = "pdf-page-ms", .kind = CLI_INT, .off = AT(o.limits.pdf_page_ms, int), .min = 10, .max = 3600000,
     .want = "10 to 3600000", .arg = "MS",
     .help = "PDF: wall-clock limit per page for the sandboxed parser\n"
             "(default 20000); slower pages are rejected (pdf_timeout)"},
    {.name = "pdf-doc-ms", .kind = CLI_INT, .off = AT(o.limits.pdf_doc_ms, int), .min = 10, .max = 36000000,
     .want = "10 to 36000000", .arg = "MS",
     .help = "PDF: wall-clock limit for validating a whole document\n"
             "(default 3 x --pdf-page-ms); slower ones are rejected (pdf_timeout)"},
    {.name = "pdf-memory-mb", .kind = CLI_INT, .off = AT(o.limits.pdf_memory_mb, int), .min = 64,
     .max = 1048576, .want = "64 to 1048576", .arg = "MB",
     .help = "PDF: the parser's address-space limit (default 1024)"},
    {.name = "after", .kind = CLI_FN, .fn = take_after, .want = "move, delete or keep", .arg = "MODE",
     .help = "move (default) | delete | keep"},
    {.name = "model-key", .kind = CLI_FN, .fn = take_model_key, .arg = "KEY",
     .help = "model configuration the jobs are queued for (default \"default\")"},
    {.name = "jobs", .kind = CLI_INT, .off = AT(o.jobs, int), .min = 1, .max = 256, .want = "1 to 256",
     .arg = "N", .help = "validating threads (default: one per CPU)"},
    {.name = "db-wait", .kind = CLI_INT, .off = AT(o.db_wait_s, int), .max = 86400,
     .want = "seconds from 0 to 86400", .arg = "SECONDS",
     .help = "one-shot: give up after the database was unreachable this\n"
             "long (default 60; --watch retries for ever)"},
    {.name = "progress", .kind = CLI_FLAG, .off = AT(o.progress, int), .arg = "/ --no-progress",
     .help = "progress line on stderr (default: when a TTY)"},
    {.name = "no-progress", .kind = CLI_NOFLAG, .off = AT(o.progress, int)},
    {.name = "metrics-listen", .kind = CLI_FN, .fn = cli_take_listen, .off = AT(d.metrics_listen, const char *), .arg = "ADDR:PORT",
     .help = "serve /metrics (Prometheus), /healthz, /readyz"},
};

const struct cli_cmd cmd_ingest_cli = {
    .name = "ingest", .usage = USAGE, .usage_tail = USAGE_TAIL, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0],
    .min_pos = 1, .max_pos = 1,
};

int cmd_ingest(int argc, char **argv)
{
    struct ingest_args a = {0};
    ingest_run_opts_default(&a.o);
    int pos, prc = cli_parse(&cmd_ingest_cli, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    struct ingest_run_opts o = a.o;
    o.dir = argv[pos];
    struct cli_daemon d;
    int drc = cli_daemon_open("ingest", &a.d, o.model_key, NULL, &d);
    if (drc != FOLIO_EXIT_OK)
        return drc;
    o.conninfo = d.conninfo;
    o.pooler = d.pooler;
    o.blobs = d.blobs;
    o.metrics = d.metrics;
    struct ingest_run_stats st;
    struct folio_err err = {0};
    int rc = ingest_run(&o, &st, &err);
    cli_daemon_close(&d);
    folio_log(FOLIO_LOG_INFO, "ingest_summary",
              "files=%llu accepted=%llu new_documents=%llu duplicates=%llu rejected=%llu bytes=%llu "
              "batches=%llu db_retries=%llu seconds=%.2f files_per_s=%.1f",
              (unsigned long long)st.files, (unsigned long long)st.accepted,
              (unsigned long long)st.new_documents, (unsigned long long)st.duplicates,
              (unsigned long long)st.rejected, (unsigned long long)st.bytes,
              (unsigned long long)st.batches, (unsigned long long)st.db_retries, st.seconds,
              st.seconds > 0 ? (double)st.files / st.seconds : 0.0);
    printf("folio ingest: %llu files in %.1f s: %llu new documents, %llu duplicates, %llu rejected",
           (unsigned long long)st.files, st.seconds, (unsigned long long)st.new_documents,
           (unsigned long long)st.duplicates, (unsigned long long)st.rejected);
    if (st.rejected) {
        /* the folder as given, so the line can be pasted into ls */
        printf(" (see ");
        folio_term_puts(stdout, o.dir);
        printf("%s.folio/rejected/)", o.dir[0] && o.dir[strlen(o.dir) - 1] == '/' ? "" : "/");
    }
    printf("\n");
    fflush(stdout);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
