/*
 * folio report: one self-contained HTML file (inline CSS and SVG, images
 * as data: URIs, no JavaScript) that a person opens in any browser or
 * mails around: results per label with confidence histograms, throughput
 * over time per engine path, the queue and the workers, the review queue
 * with page thumbnails, and rejections by reason. The page itself is
 * pipeline/review/report_page.c, which the review page serves at /report
 * too; this file is the command: its options, the file written atomically,
 * and `--listen` starting the review page.
 */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/service/http.h"
#include "pipeline/review/review.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: folio report --out FILE [--model-key K] [--review N] [--hours H]\n"
    "       folio report --listen ADDR:PORT|unix:PATH [--token-file FILE] [...]\n"
    "\n"
    "Writes a self-contained HTML report: results per label with confidence\n"
    "histograms, pages per minute per engine path, queue and workers, the\n"
    "review queue with thumbnails, and rejections by reason.\n"
    "\n"
    "With --listen, serves the review page: the review queue with page thumbnails,\n"
    "confirm and correct (as folio correct), filters and text search; the report\n"
    "is at /report. Over TCP a person signs in once at /login?token=TOKEN; over\n"
    "unix:PATH (mode 0660) the reverse proxy in front decides who may connect.\n"
    "\n";

/* ADDR:PORT as everywhere else, or unix:PATH for a reverse proxy. */
static int take_review_listen(const struct cli_opt *o, void *args, const char *v, const char *cmd)
{
    if (strncmp(v, "unix:", 5) == 0 && v[5] == '/') {
        *(const char **)((char *)args + o->off) = v;
        return 0;
    }
    return cli_take_listen(o, args, v, cmd);
}

struct report_args {
    const char *db, *out, *listen, *model_key, *token_file;
    int review, hours;
};
#define AT(m, type) CLI_AT(struct report_args, m, type)

/* Also the keys of [report] in the configuration file (pipeline/cli/config.c). */
static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "out", .kind = CLI_STR, .off = AT(out, const char *), .arg = "FILE",
     .help = "where to write the HTML (replaced atomically)"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(model_key, const char *), .arg = "K",
     .help = "results of one model configuration (default: all)"},
    {.name = "review", .kind = CLI_INT, .off = AT(review, int), .max = 1000, .arg = "N",
     .help = "documents shown in the review queue (default 24)"},
    {.name = "hours", .kind = CLI_INT, .off = AT(hours, int), .min = 1, .max = 24 * 366, .arg = "H",
     .help = "throughput window, hours back from now (default 24)"},
    {.name = "listen", .kind = CLI_FN, .fn = take_review_listen, .off = AT(listen, const char *),
     .arg = "ADDR:PORT", .help = "serve the review page (and the report at /report) until\n"
                                 "SIGTERM/SIGINT; :PORT is 127.0.0.1 only; or unix:PATH"},
    {.name = "token-file", .kind = CLI_STR, .off = AT(token_file, const char *), .arg = "FILE",
     .help = "the review page's access token (default: made up and\nprinted with the login URL)"},
};

const struct cli_cmd cmd_report_cli = {
    .name = "report", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0],
};

/* The access token of the review page: from FILE (first line, at least
 * 16 characters), else made up now and printed once with the login URL. */
static int review_token(const char *file, char *tok, size_t n, int *made)
{
    *made = 0;
    if (file) {
        char *s = NULL;
        struct folio_err err = {0};
        if (folio_read_text(file, 4096, &s, &err)) {
            folio_err_print(stderr, &err);
            return -1;
        }
        s[strcspn(s, "\r\n")] = '\0';
        int ok = strlen(s) >= 16 && strlen(s) < n && strspn(s, "0123456789abcdefghijklmnopqrstuvwxyz"
                                                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ-_.~") == strlen(s);
        if (ok)
            snprintf(tok, n, "%s", s);
        free(s);
        if (!ok)
            fprintf(stderr, "folio: error: --token-file %s: the first line must be 16 to %zu characters of "
                            "A-Z a-z 0-9 - _ . ~\nhint: for example: openssl rand -hex 24 > %s\n",
                    file, n - 1, file);
        return ok ? 0 : -1;
    }
    unsigned char r[24];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return -1;
    folio_hex(r, sizeof r, tok);
    *made = 1;
    return 0;
}

int cmd_report(int argc, char **argv)
{
    struct report_args a = {.review = 24, .hours = 24};
    int pos, prc = cli_parse(&cmd_report_cli, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = a.db, *out = a.out, *listen = a.listen;
    PGconn *c = NULL;
    FILE *f = NULL;
    struct folio_err rerr = {0};
    long long review = a.review, hours = a.hours;
    if (!out == !listen)
        return cli_usage_error("report", "give one of --out FILE or --listen ADDR:PORT");
    if (listen) {
        char tok[128];
        struct review_cfg rc = {.conninfo = db_conninfo(db), .model_key = a.model_key, .hours = (int)hours,
                                .review = (int)review};
        if (strncmp(listen, "unix:", 5) != 0) {
            if (review_token(a.token_file, tok, sizeof tok, &rc.print_url))
                return FOLIO_EXIT_FAIL;
            rc.token = tok;
        } else if (a.token_file) {
            return cli_usage_error("report", "--token-file is for TCP; a unix: socket's access is its permissions");
        }
        return review_serve(listen, &rc);
    }
    if (cli_connect(db, "folio-report", &c))
        return FOLIO_EXIT_FAIL;
    char tmp[4200];
    struct folio_err terr = {0};
    int tfd = folio_open_temp(out, tmp, sizeof tmp, &terr);
    if (tfd < 0 || !(f = fdopen(tfd, "w"))) {
        if (tfd >= 0) {
            close(tfd);
            unlink(tmp);
        }
        fprintf(stderr, "folio: error: cannot write %s: %s\n", out, tfd < 0 ? terr.msg : strerror(errno));
        PQfinish(c);
        return FOLIO_EXIT_FAIL;
    }
    int rc = report_write(c, f, a.model_key, (int)hours, (int)review, &rerr) ? FOLIO_EXIT_FAIL : FOLIO_EXIT_OK;
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) {
        fprintf(stderr, "folio: error: writing %s: %s\n", tmp, strerror(errno));
        rc = FOLIO_EXIT_FAIL;
    }
    fclose(f);
    if (rc == FOLIO_EXIT_OK && rename(tmp, out) != 0) {
        fprintf(stderr, "folio: error: cannot rename %s to %s: %s\n", tmp, out, strerror(errno));
        rc = FOLIO_EXIT_FAIL;
    }
    if (rc != FOLIO_EXIT_OK) {
        if (rerr.code)
            folio_err_print(stderr, &rerr);
        unlink(tmp);
    } else {
        folio_log(FOLIO_LOG_INFO, "report_written", "path=%s", out);
    }
    PQfinish(c);
    return rc;
}
