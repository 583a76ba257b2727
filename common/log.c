/*
 * logfmt logging. One fprintf per line so that lines from several threads
 * never interleave mid-line (stdio locks the stream per call).
 */
#include "common/common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The level is process-wide configuration set once from main (or the
 * environment); atomic so that threads reading it race-free. */
static _Atomic int g_level = -1;

void folio_log_set_level(enum folio_loglevel lvl) { atomic_store(&g_level, (int)lvl); }

int folio_log_parse_level(const char *s, enum folio_loglevel *out)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (enum folio_loglevel)i;
            return 0;
        }
    return FOLIO_EINVAL;
}

static int current_level(void)
{
    int l = atomic_load(&g_level);
    if (l >= 0)
        return l;
    enum folio_loglevel parsed = FOLIO_LOG_INFO;
    const char *e = getenv("FOLIO_LOG_LEVEL");
    if (e)
        (void)folio_log_parse_level(e, &parsed);
    atomic_store(&g_level, (int)parsed);
    return (int)parsed;
}

void folio_log(enum folio_loglevel lvl, const char *event, const char *kvfmt, ...)
{
    if ((int)lvl < current_level())
        return;
    static const char *names[] = {"debug", "info", "warn", "error"};
    char kv[3072];
    kv[0] = '\0';
    if (kvfmt && kvfmt[0]) {
        va_list ap;
        va_start(ap, kvfmt);
        int r = vsnprintf(kv, sizeof kv, kvfmt, ap);
        va_end(ap);
        if (r < 0)
            kv[0] = '\0';
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char tbuf[32];
    strftime(tbuf, sizeof tbuf, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "ts=%s.%03ldZ level=%s event=%s%s%s\n", tbuf, ts.tv_nsec / 1000000L,
            names[lvl], event, kv[0] ? " " : "", kv);
}

size_t folio_utf8_prefix(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return n;
    size_t k = max; /* s[k] is the first byte dropped: back off while it continues a sequence */
    for (int back = 0; back < 3 && k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80; back++)
        k--;
    return k;
}

size_t folio_utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

const char *folio_lq_bytes(char *buf, size_t n, const void *src, size_t len)
{
    const unsigned char *s = src;
    int need_quote = (len == 0);
    for (size_t i = 0; i < len && !need_quote; i++)
        if (s[i] <= ' ' || s[i] == '"' || s[i] == '=' || s[i] == '\\' || s[i] >= 0x7f)
            need_quote = 1;
    size_t o = 0;
#define PUT(ch)                                                                              \
    do {                                                                                     \
        if (o + 1 < n)                                                                       \
            buf[o++] = (char)(ch);                                                           \
    } while (0)
    if (n == 0)
        return buf;
    if (need_quote)
        PUT('"');
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            PUT('\\'); PUT(c); i++;
        } else if (c == '\n') {
            PUT('\\'); PUT('n'); i++;
        } else if (c == '\t') {
            PUT('\\'); PUT('t'); i++;
        } else if (c < 0x20 || c == 0x7f) {
            char h[5];
            snprintf(h, sizeof h, "\\x%02x", c);
            for (int k = 0; k < 4; k++) PUT(h[k]);
            i++;
        } else if (c < 0x80) {
            PUT(c); i++;
        } else {
            size_t l = folio_utf8_seq_len(s + i, len - i);
            if (l == 0) {
                char h[5];
                snprintf(h, sizeof h, "\\x%02x", c);
                for (int k = 0; k < 4; k++) PUT(h[k]);
                i++;
            } else {
                if (o + l + 1 < n) {
                    memcpy(buf + o, s + i, l);
                    o += l;
                }
                i += l;
            }
        }
    }
    if (need_quote)
        PUT('"');
#undef PUT
    buf[o] = '\0';
    return buf;
}

const char *folio_lq(char *buf, size_t n, const char *s)
{
    if (!s)
        s = "";
    return folio_lq_bytes(buf, n, s, strlen(s));
}
