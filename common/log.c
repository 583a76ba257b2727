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

uint32_t folio_utf8_unsafe_cp(const unsigned char *s, size_t l)
{
    uint32_t cp;
    if (l == 2)
        cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    else if (l == 3)
        cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    else
        return 0;
    /* C1 controls (U+009B is a CSI: terminal escape sequences); bidi
     * embeddings, overrides and isolates, which reorder what follows. */
    if ((cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069))
        return cp;
    return 0;
}

/* The escaped form of the character at s[i]: written to tmp, returns its
 * length; *adv gets how many input bytes it covers. */
static size_t lq_piece(const unsigned char *s, size_t len, size_t i, char tmp[16], size_t *adv)
{
    unsigned char c = s[i];
    *adv = 1;
    if (c == '"' || c == '\\') {
        tmp[0] = '\\';
        tmp[1] = (char)c;
        return 2;
    }
    if (c == '\n' || c == '\t') {
        tmp[0] = '\\';
        tmp[1] = c == '\n' ? 'n' : 't';
        return 2;
    }
    if (c < 0x20 || c == 0x7f)
        return (size_t)snprintf(tmp, 16, "\\x%02x", c);
    if (c < 0x80) {
        tmp[0] = (char)c;
        return 1;
    }
    size_t l = folio_utf8_seq_len(s + i, len - i);
    if (l == 0)
        return (size_t)snprintf(tmp, 16, "\\x%02x", c);
    *adv = l;
    uint32_t cp = folio_utf8_unsafe_cp(s + i, l);
    if (cp)
        return (size_t)snprintf(tmp, 16, "\\u%04x", (unsigned)cp);
    memcpy(tmp, s + i, l);
    return l;
}

const char *folio_lq_bytes(char *buf, size_t n, const void *src, size_t len)
{
    const unsigned char *s = src;
    if (n == 0)
        return buf;
    int need_quote = (len == 0);
    for (size_t i = 0; i < len && !need_quote; i++)
        if (s[i] <= ' ' || s[i] == '"' || s[i] == '=' || s[i] == '\\' || s[i] >= 0x7f)
            need_quote = 1;
    /* First the full length, so that a value that fits is never marked
     * cut; a cut one ends in "..." and its closing quote, always on a
     * character boundary, so the next key=value stays a key=value. */
    char tmp[16];
    size_t adv, total = 0;
    for (size_t i = 0; i < len; i += adv)
        total += lq_piece(s, len, i, tmp, &adv);
    size_t closing = need_quote ? 1 : 0;
    int cut = total + 2 * closing + 1 > n;
    size_t room = n - 1 - closing - (cut ? 3 : 0); /* bytes for the opening quote and pieces */
    if (n < 1 + 2 * closing + (cut ? 3 : 0)) {
        buf[0] = '\0';
        return buf;
    }
    size_t o = 0;
    if (need_quote)
        buf[o++] = '"';
    for (size_t i = 0; i < len; i += adv) {
        size_t tl = lq_piece(s, len, i, tmp, &adv);
        if (o + tl > room)
            break;
        memcpy(buf + o, tmp, tl);
        o += tl;
    }
    if (cut) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    if (need_quote)
        buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

int folio_term_write(FILE *f, const void *src, size_t len)
{
    /* Same pieces as a log value, but text for a person: line breaks, tabs,
     * quotes and backslashes stay as they are; every other control, C1
     * control, bidi override and invalid byte is shown escaped, so text
     * from a document or a label file cannot drive the terminal. */
    const unsigned char *s = src;
    char tmp[16];
    size_t adv;
    for (size_t i = 0; i < len; i += adv) {
        unsigned char c = s[i];
        if (c == '\n' || c == '\t' || c == '"' || c == '\\') {
            adv = 1;
            if (putc(c, f) == EOF)
                return -1;
            continue;
        }
        size_t tl = lq_piece(s, len, i, tmp, &adv);
        if (fwrite(tmp, 1, tl, f) != tl)
            return -1;
    }
    return 0;
}

int folio_term_puts(FILE *f, const char *s)
{
    return s ? folio_term_write(f, s, strlen(s)) : 0;
}

const char *folio_lq(char *buf, size_t n, const char *s)
{
    if (!s)
        s = "";
    return folio_lq_bytes(buf, n, s, strlen(s));
}
