/*
 * The JSON writer (see json.h for the escaping rules). One put() is the
 * unit of writing: a piece either goes in whole or, once the buffer has
 * failed, nothing more does, so a fixed buffer that fills up holds a
 * prefix that ends between two characters, never inside an escape.
 */
#include "common/json.h"

#include "common/common.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void json_init(struct json_buf *b) { memset(b, 0, sizeof *b); }

void json_init_fixed(struct json_buf *b, char *buf, size_t n)
{
    memset(b, 0, sizeof *b);
    b->fixed = 1;
    b->s = buf;
    b->cap = n;
    if (n)
        buf[0] = '\0';
    else
        b->oom = 1, b->err = FOLIO_ELIMIT;
}

void json_free(struct json_buf *b)
{
    if (!b->fixed)
        free(b->s);
    memset(b, 0, sizeof *b);
}

int json_status(const struct json_buf *b) { return b->oom ? (b->err ? b->err : FOLIO_ENOMEM) : 0; }

static void fail(struct json_buf *b, int code)
{
    b->oom = 1;
    if (!b->err)
        b->err = code;
}

static void put(struct json_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        if (b->fixed) {
            fail(b, FOLIO_ELIMIT);
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            fail(b, FOLIO_ENOMEM);
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* Before a value or a key: the comma that separates members of an open
 * container. Outside containers nothing (hand-assembled text). */
static void sep(struct json_buf *b)
{
    if (b->after_key) {
        b->after_key = 0;
        return;
    }
    if (b->depth == 0)
        return;
    uint32_t bit = 1u << b->depth;
    if (!(b->first & bit))
        put(b, ",", 1);
    b->first &= ~bit;
}

void json_raw(struct json_buf *b, const char *s) { put(b, s, strlen(s)); }

void json_value_raw(struct json_buf *b, const char *json)
{
    sep(b);
    json_raw(b, json);
}

/* The escaped form of the character at p (avail bytes left) into e;
 * returns its length and sets *adv to the input bytes it covers. */
static size_t esc_piece(const unsigned char *p, size_t avail, char e[8], size_t *adv)
{
    unsigned char c = *p;
    *adv = 1;
    if (c == '"' || c == '\\') {
        e[0] = '\\';
        e[1] = (char)c;
        return 2;
    }
    if (c == '\n' || c == '\r' || c == '\t') {
        e[0] = '\\';
        e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        return 2;
    }
    if (c < 0x20 || c == 0x7f)
        return (size_t)snprintf(e, 8, "\\u%04x", c);
    if (c < 0x80) {
        e[0] = (char)c;
        return 1;
    }
    size_t l = folio_utf8_seq_len(p, avail);
    if (l == 0) {
        memcpy(e, "\\ufffd", 6);
        return 6;
    }
    *adv = l;
    uint32_t cp = folio_utf8_unsafe_cp(p, l);
    if (cp)
        return (size_t)snprintf(e, 8, "\\u%04x", (unsigned)cp);
    memcpy(e, p, l);
    return l;
}

void json_str_body(struct json_buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n && !b->oom) {
        /* runs of plain ASCII go in one piece */
        size_t j = i;
        while (j < n && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '"' && p[j] != '\\')
            j++;
        if (j > i) {
            put(b, s + i, j - i);
            i = j;
            continue;
        }
        char e[8];
        size_t adv;
        size_t el = esc_piece(p + i, n - i, e, &adv);
        put(b, e, el);
        i += adv;
    }
}

void json_strn(struct json_buf *b, const char *s, size_t n)
{
    sep(b);
    put(b, "\"", 1);
    json_str_body(b, s ? s : "", s ? n : 0);
    put(b, "\"", 1);
}

void json_str(struct json_buf *b, const char *s) { json_strn(b, s, s ? strlen(s) : 0); }

void json_num(struct json_buf *b, double v)
{
    sep(b);
    if (!isfinite(v)) {
        put(b, "null", 4);
        return;
    }
    char t[40];
    int n = snprintf(t, sizeof t, "%.6g", v);
    put(b, t, (size_t)n);
}

void json_int(struct json_buf *b, int64_t v)
{
    sep(b);
    char t[24];
    int n = snprintf(t, sizeof t, "%" PRId64, v);
    put(b, t, (size_t)n);
}

void json_uint(struct json_buf *b, uint64_t v)
{
    sep(b);
    char t[24];
    int n = snprintf(t, sizeof t, "%" PRIu64, v);
    put(b, t, (size_t)n);
}

void json_bool(struct json_buf *b, int v)
{
    sep(b);
    json_raw(b, v ? "true" : "false");
}

void json_null(struct json_buf *b)
{
    sep(b);
    put(b, "null", 4);
}

void json_key(struct json_buf *b, const char *k)
{
    sep(b);
    put(b, "\"", 1);
    json_str_body(b, k ? k : "", k ? strlen(k) : 0);
    put(b, "\":", 2);
    b->after_key = 1;
}

static void open_c(struct json_buf *b, const char *c)
{
    sep(b);
    if (b->depth >= JSON_MAX_DEPTH) {
        fail(b, FOLIO_ELIMIT);
        return;
    }
    put(b, c, 1);
    b->depth++;
    b->first |= 1u << b->depth;
}

static void close_c(struct json_buf *b, const char *c)
{
    if (b->depth == 0) {
        /* a close without its open is the caller's bug; the text says so */
        fail(b, FOLIO_EINVAL);
        return;
    }
    b->first &= ~(1u << b->depth);
    b->depth--;
    b->after_key = 0;
    put(b, c, 1);
}

void json_obj(struct json_buf *b) { open_c(b, "{"); }
void json_obj_end(struct json_buf *b) { close_c(b, "}"); }
void json_arr(struct json_buf *b) { open_c(b, "["); }
void json_arr_end(struct json_buf *b) { close_c(b, "]"); }

const char *json_escape(char *out, size_t n, const char *s)
{
    struct json_buf b;
    json_init_fixed(&b, out, n);
    json_str_body(&b, s ? s : "", s ? strlen(s) : 0);
    return out;
}

void json_print_line(struct json_buf *b, FILE *f)
{
    if (!b->oom) {
        fputs(b->s ? b->s : "", f);
        fputc('\n', f);
        fflush(f);
    }
    json_free(b);
}

void json_emit_line(struct json_buf *b) { json_print_line(b, stdout); }
