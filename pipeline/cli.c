/* Helpers shared by the subcommands' argument handling. */
#include "pipeline/pipeline.h"

#include <errno.h>
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
    return 0;
}
