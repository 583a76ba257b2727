/* Helpers shared by the subcommands' argument handling. */
#include "pipeline/cli/cli.h"
#include "engine/engine.h"
#include "pipeline/db/blobstore.h"
#include "pipeline/db/db.h"
#include "pipeline/document/doctext.h"
#include "pipeline/service/http.h"
#include "pipeline/service/metrics.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ------------------------------------------------------------ shared option kinds */

int cli_take_gpu_weights(const struct cli_opt *o, void *args, const char *v, const char *cmd)
{
    int m = engine_gpu_weights_parse(v);
    if (m < 0)
        return cli_usage_error(cmd, "--%s takes auto, f16, native or int8, not '%s'", o->name, v);
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
