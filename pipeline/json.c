/*
 * A growable buffer for writing JSON (results' scores and timings, the
 * `folio classify` output, bench lines). Writing only: folio never parses
 * JSON. OCR text can hold any bytes Tesseract produced, so strings are
 * checked as UTF-8 and bad sequences become U+FFFD rather than invalid JSON
 * that PostgreSQL would refuse. An allocation failure is sticky (oom) and
 * checked once by the caller at the end.
 */
#include "pipeline/pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void json_init(struct json_buf *b) { memset(b, 0, sizeof *b); }

void json_free(struct json_buf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

static void put(struct json_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void json_raw(struct json_buf *b, const char *s) { put(b, s, strlen(s)); }

void json_str(struct json_buf *b, const char *s)
{
    put(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    const unsigned char *end = p + strlen((const char *)p);
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(b, e, 2);
            p++;
        } else if (c < 0x20) {
            char e[8];
            if (c == '\n')
                put(b, "\\n", 2);
            else if (c == '\t')
                put(b, "\\t", 2);
            else if (c == '\r')
                put(b, "\\r", 2);
            else {
                snprintf(e, sizeof e, "\\u%04x", c);
                put(b, e, 6);
            }
            p++;
        } else {
            size_t n = folio_utf8_seq_len(p, (size_t)(end - p));
            if (n) {
                put(b, (const char *)p, n);
                p += n;
            } else {
                put(b, "\\ufffd", 6);
                p++;
            }
        }
    }
    put(b, "\"", 1);
}

void json_num(struct json_buf *b, double v)
{
    if (!isfinite(v)) {
        put(b, "null", 4);
        return;
    }
    char t[40];
    int n = snprintf(t, sizeof t, "%.6g", v);
    put(b, t, (size_t)n);
}

void json_key(struct json_buf *b, const char *k)
{
    json_str(b, k);
    put(b, ":", 1);
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
