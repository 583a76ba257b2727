/* Helpers shared by the subcommands' argument handling. */
#include "pipeline/pipeline.h"

#include <stdarg.h>
#include <stdio.h>

int cli_not_built(const char *what, const char *which_issue)
{
    fprintf(stderr,
            "folio: error: %s is not built yet\n"
            "  detail: this part of folio arrives with %s\n"
            "  hint: see README.md for what works today\n",
            what, which_issue);
    return FOLIO_EXIT_FAIL;
}

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
