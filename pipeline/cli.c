/* Helpers shared by the subcommands' argument handling. */
#include "pipeline/cli.h"
#include "engine/engine.h"
#include "pipeline/blobstore.h"
#include "pipeline/db.h"
#include "pipeline/doctext.h"
#include "pipeline/http.h"
#include "pipeline/metrics.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "folio %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\ntry 'folio %s --help'\n", cmd);
    va_end(ap);
    return FOLIO_EXIT_USAGE;
}

int cli_connect(const char *db_flag, const char *app_name, PGconn **out)
{
    struct folio_err err = {0};
    if (db_connect(db_conninfo(db_flag), app_name, out, &err) == 0)
        return FOLIO_EXIT_OK;
    folio_err_print(stderr, &err);
    return FOLIO_EXIT_FAIL;
}

int cli_daemon_open(const char *component, const struct cli_daemon_args *a, const char *model_key,
                    const char *device, struct cli_daemon *d)
{
    memset(d, 0, sizeof *d);
    d->conninfo = db_conninfo(a->db);
    struct folio_err err = {0};
    if (db_pooler_resolve(a->pooler, &d->pooler, &err) || blobstore_open(a->blob_store, &d->blobs, &err)) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_USAGE;
    }
    if (a->metrics_listen) {
        struct metrics_cfg mc = {.listen = a->metrics_listen, .component = component, .conninfo = d->conninfo,
                                 .model_key = model_key, .device = device};
        if (metrics_start(&mc, &d->metrics, NULL, &err)) {
            folio_err_print(stderr, &err);
            cli_daemon_close(d);
            return FOLIO_EXIT_FAIL;
        }
    }
    return FOLIO_EXIT_OK;
}

void cli_daemon_close(struct cli_daemon *d)
{
    metrics_stop(d->metrics);
    blobstore_close(d->blobs);
    d->metrics = NULL;
    d->blobs = NULL;
}

int cli_parse_double(const char *s, double min, double max, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= min && v <= max))
        return -1;
    *out = v;
    return 0;
}

int cli_check_gguf(const char *flag, const char *path, struct folio_err *err)
{
    /* A wrong path is a configuration error, unlike a missing GPU (which
     * degrades to the OCR tiers): say so before anything starts. */
    FILE *f = fopen(path, "rb");
    if (!f) {
        folio_err_set(err, FOLIO_EINVAL, "%s %s: %s", flag, path, strerror(errno));
        folio_err_hint(err, "pass the path of a GGUF file (folio doctor --model M --mmproj P checks them)");
        return FOLIO_EINVAL;
    }
    char magic[4] = {0};
    size_t n = fread(magic, 1, 4, f);
    fclose(f);
    if (n != 4 || memcmp(magic, "GGUF", 4) != 0) {
        folio_err_set(err, FOLIO_EINVAL, "%s %s is not a GGUF file (it does not start with \"GGUF\")", flag, path);
        folio_err_hint(err, "folio reads llama.cpp GGUF files: a text model and its mmproj");
        return FOLIO_EINVAL;
    }
    /* The magic is not enough: a truncated copy or a file with a corrupt
     * tensor table would otherwise only fail at engine open, which a
     * machine without a GPU never reaches, and the service would run on
     * OCR alone with exit 0. The header and tensor table are read here. */
    if (engine_check_model_file(path, strcmp(flag, "--mmproj") == 0, err)) {
        folio_err_prefix(err, "%s: ", flag);
        if (!err->hint[0])
            folio_err_hint(err, "copy the model file again (folio doctor %s %s shows what it holds)", flag, path);
        err->code = FOLIO_EINVAL;
        return FOLIO_EINVAL;
    }
    return 0;
}

int cli_parse_duration(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0))
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

/* ------------------------------------------------------------ option tables */

int cli_opt_is_flag(const struct cli_opt *o) { return o->kind == CLI_FLAG || o->kind == CLI_NOFLAG; }

const struct cli_opt *cli_find(const struct cli_cmd *c, const char *name)
{
    for (size_t i = 0; i < c->nopts; i++)
        if (c->opts[i].kind != CLI_TEXT && strcmp(c->opts[i].name, name) == 0)
            return &c->opts[i];
    return NULL;
}

/* "--NAME wants WANT, got 'VALUE'" with WANT from the table or the range. */
static int refuse(const struct cli_cmd *c, const struct cli_opt *o, const char *v)
{
    if (o->want)
        return cli_usage_error(c->name, "--%s wants %s, got '%s'", o->name, o->want, v);
    switch (o->kind) {
    case CLI_ENUM: {
        char list[512] = "";
        size_t n = 0, k = 0;
        while (o->choices[n])
            n++;
        for (size_t i = 0; i < n; i++)
            k += (size_t)snprintf(list + k, k < sizeof list ? sizeof list - k : 0, "%s%s",
                                  i == 0 ? "" : i + 1 == n ? " or " : ", ", o->choices[i]);
        return cli_usage_error(c->name, "--%s takes %s, not '%s'", o->name, list, v);
    }
    case CLI_DOUBLE:
    case CLI_DURATION:
        if (o->hi > 0)
            return cli_usage_error(c->name, "--%s wants %g..%g, got '%s'", o->name, o->lo, o->hi, v);
        return cli_usage_error(c->name, "--%s wants at least %g, got '%s'", o->name, o->lo, v);
    default:
        return cli_usage_error(c->name, "--%s wants %lld..%lld, got '%s'", o->name, o->min, o->max, v);
    }
}

/* Stores one value; returns 0 or the exit code after a message. */
static int take(const struct cli_cmd *c, const struct cli_opt *o, char *args, const char *v)
{
    /* Table mistakes are the programmer's: an enum without its names, a
     * function kind without the function. */
    assert(o->kind != CLI_ENUM || o->choices);
    assert(o->kind != CLI_FN || o->fn);
    void *at = args + o->off;
    long long n;
    uint64_t u;
    double d;
    switch (o->kind) {
    case CLI_FLAG:
    case CLI_NOFLAG:
        *(int *)at = o->kind == CLI_FLAG;
        return 0;
    case CLI_STR:
        if (o->min > 0 && !v[0])
            return cli_usage_error(c->name, "--%s wants %s, got an empty string", o->name,
                                   o->want ? o->want : "a value");
        *(const char **)at = v;
        return 0;
    case CLI_INT:
    case CLI_U32:
    case CLI_U64:
        if (folio_parse_int(v, o->min, o->max, &n) != 0)
            return refuse(c, o, v);
        if (o->kind == CLI_INT)
            *(int *)at = (int)n;
        else if (o->kind == CLI_U32)
            *(uint32_t *)at = (uint32_t)n;
        else
            *(uint64_t *)at = (uint64_t)n;
        return 0;
    case CLI_SIZE:
        if (folio_parse_size(v, &u) != 0 || u < (uint64_t)o->min || (o->max > 0 && u > (uint64_t)o->max))
            return refuse(c, o, v);
        *(uint64_t *)at = u;
        return 0;
    case CLI_DOUBLE:
    case CLI_DURATION:
        if ((o->kind == CLI_DOUBLE ? cli_parse_double(v, o->lo, o->hi > 0 ? o->hi : 1e308, &d)
                                   : cli_parse_duration(v, &d)) != 0 ||
            d < o->lo || (o->hi > 0 && d > o->hi))
            return refuse(c, o, v);
        *(double *)at = d;
        return 0;
    case CLI_ENUM:
        for (int i = 0; o->choices[i]; i++) {
            if (strcmp(o->choices[i], v) == 0) {
                *(int *)at = i;
                return 0;
            }
        }
        return refuse(c, o, v);
    case CLI_FN: {
        int rc = o->fn(o, args, v, c->name);
        return rc == -1 ? refuse(c, o, v) : rc;
    }
    case CLI_TEXT:
        break;
    }
    return refuse(c, o, v);
}

void cli_print_options(const struct cli_cmd *c, FILE *f)
{
    const int COL = c->help_col ? c->help_col : 23; /* where the help texts start */
    for (size_t i = 0; i < c->nopts; i++) {
        const struct cli_opt *o = &c->opts[i];
        if (o->kind == CLI_TEXT)
            fputs(o->help, f);
        if (!o->help || o->kind == CLI_TEXT)
            continue;
        int w = fprintf(f, "  --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        if (w >= COL) /* a long head gets the text on the next line */
            fprintf(f, "\n%*s", COL, "");
        else
            fprintf(f, "%*s", COL - w, "");
        for (const char *s = o->help; *s;) {
            size_t n = strcspn(s, "\n");
            fprintf(f, "%.*s\n", (int)n, s);
            s += n;
            if (*s == '\n' && *++s)
                fprintf(f, "%*s", COL, "");
        }
    }
}

int cli_parse(const struct cli_cmd *c, void *args, int argc, char **argv, int *pos)
{
    enum { VAL0 = 1000 };
    struct option *lo = calloc(c->nopts + 2, sizeof *lo);
    if (!lo) {
        fprintf(stderr, "folio %s: out of memory\n", c->name);
        return FOLIO_EXIT_FAIL;
    }
    size_t n = 0;
    for (size_t i = 0; i < c->nopts; i++)
        if (c->opts[i].kind != CLI_TEXT)
            lo[n++] = (struct option){c->opts[i].name,
                                      cli_opt_is_flag(&c->opts[i]) ? no_argument : required_argument, NULL,
                                      VAL0 + (int)i};
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    optind = 1;
    opterr = 0;
    int ch, rc = CLI_GO;
    while (rc == CLI_GO && (ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (ch == 'h') {
            fputs(c->usage, stdout);
            cli_print_options(c, stdout);
            if (c->usage_tail)
                fputs(c->usage_tail, stdout);
            rc = FOLIO_EXIT_OK;
        } else if (ch >= VAL0 && (size_t)(ch - VAL0) < c->nopts) {
            int r = take(c, &c->opts[ch - VAL0], args, optarg);
            if (r)
                rc = r;
        } else {
            rc = cli_usage_error(c->name, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    free(lo);
    if (rc != CLI_GO)
        return rc;
    int npos = argc - optind;
    if (npos < c->min_pos)
        return cli_usage_error(c->name, "missing argument");
    if (npos > c->max_pos)
        return cli_usage_error(c->name, "unexpected argument '%s'", argv[optind + c->max_pos]);
    *pos = optind;
    return CLI_GO;
}

/* ------------------------------------------------------------ shared option kinds */

int cli_take_gpu_weights(const struct cli_opt *o, void *args, const char *v, const char *cmd)
{
    int m = engine_gpu_weights_parse(v);
    if (m < 0)
        return cli_usage_error(cmd, "--%s takes auto, f16 or native, not '%s'", o->name, v);
    *(int *)((char *)args + o->off) = m;
    return 0;
}

int cli_take_text_caps(const struct cli_opt *o, void *args, const char *v, const char *cmd)
{
    (void)cmd;
    size_t *caps = (size_t *)((char *)args + o->off);
    return doc_text_parse_caps(v, &caps[0], &caps[1]) ? -1 : 0;
}

int cli_take_listen(const struct cli_opt *o, void *args, const char *v, const char *cmd)
{
    struct folio_err lerr = {0};
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", o->name);
    if (http_parse_listen(flag, v, &lerr))
        return cli_usage_error(cmd, "%s (%s)", lerr.msg, lerr.hint);
    *(const char **)((char *)args + o->off) = v;
    return 0;
}
