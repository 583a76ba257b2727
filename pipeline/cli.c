/* Helpers shared by the subcommands' argument handling. */
#include "pipeline/pipeline.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
