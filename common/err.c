/* Error type: see common.h for the message/detail/hint contract. */
#include "common/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vset(char *dst, size_t n, const char *fmt, va_list ap)
{
    int r = vsnprintf(dst, n, fmt, ap);
    if (r < 0)
        dst[0] = '\0';
}

int folio_err_set(struct folio_err *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    err->detail[0] = '\0';
    err->hint[0] = '\0';
    err->context[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    vset(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

void folio_err_detail(struct folio_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vset(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
}

void folio_err_hint(struct folio_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vset(err->hint, sizeof err->hint, fmt, ap);
    va_end(ap);
}

void folio_err_context(struct folio_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    char line[sizeof err->context];
    va_list ap;
    va_start(ap, fmt);
    vset(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t used = strlen(err->context);
    if (used + 3 >= sizeof err->context)
        return; /* full: the inner lines, nearest the failure, are the ones to keep */
    snprintf(err->context + used, sizeof err->context - used, "%s%s", used ? "; " : "", line);
}

void folio_err_prefix(struct folio_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    char pre[256];
    va_list ap;
    va_start(ap, fmt);
    vset(pre, sizeof pre, fmt, ap);
    va_end(ap);
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s%s", pre, old);
}

void folio_err_clear(struct folio_err *err)
{
    if (!err)
        return;
    err->code = 0;
    err->msg[0] = err->detail[0] = err->hint[0] = err->context[0] = '\0';
}

const char *folio_errcode_name(int code)
{
    switch (code) {
    case FOLIO_OK: return "ok";
    case FOLIO_EINVAL: return "invalid_argument";
    case FOLIO_EIO: return "io_error";
    case FOLIO_ENOMEM: return "out_of_memory";
    case FOLIO_EDB: return "database_error";
    case FOLIO_EFORMAT: return "bad_format";
    case FOLIO_ELIMIT: return "over_limit";
    case FOLIO_EUNSUPPORTED: return "unsupported";
    case FOLIO_EDEVICE: return "device_error";
    case FOLIO_EDEVICELOST: return "device_lost";
    case FOLIO_ESTATE: return "bad_state";
    case FOLIO_ETIMEOUT: return "timeout";
    case FOLIO_EMODEL: return "model_mismatch";
    default: return "unknown_error";
    }
}

/* One line of an error: the text may quote a file's or a database's
 * content (a label line, a file name), so it is written through the
 * terminal escaper. */
static void err_line(FILE *f, const char *head, const char *text)
{
    fputs(head, f);
    folio_term_puts(f, text);
    fputc('\n', f);
}

void folio_err_print(FILE *f, const struct folio_err *err)
{
    err_line(f, "folio: error: ", err->msg[0] ? err->msg : folio_errcode_name(err->code));
    if (err->detail[0])
        err_line(f, "  detail: ", err->detail);
    if (err->context[0])
        err_line(f, "  context: ", err->context);
    if (err->hint[0])
        err_line(f, "  hint: ", err->hint);
}
