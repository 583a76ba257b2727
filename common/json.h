/*
 * json — the one JSON writer (common/json.c). folio writes JSON and never
 * parses it: results' scores and timings, the workers row's jsonb, reason
 * files, reports (`folio classify`, `gguf describe`, `vk info`) and bench
 * lines. Every string goes through the same escaping, so what one module
 * writes PostgreSQL's jsonb and `jq` accept from all of them:
 *   - `"` and `\` escaped; \n, \r, \t as short escapes; every other control
 *     byte (U+0000..U+001F, U+007F) as \u00XX;
 *   - C1 controls and bidi overrides (folio_utf8_unsafe_cp) as \uXXXX:
 *     valid JSON either way, escaped a reason file or a log of the JSON
 *     is safe to cat;
 *   - bytes that are not valid UTF-8 (stray, overlong, surrogate, cut) as
 *     \ufffd, one per byte: PostgreSQL refuses invalid UTF-8 in any text,
 *     and a device string, an OCR text or a file name can hold anything.
 *
 * Two kinds of buffer: growable (json_init, heap, json_free) and fixed
 * (json_init_fixed, the caller's array, never grown). Failure is sticky
 * and checked once at the end: `oom` is set and json_status() says why
 * (FOLIO_ENOMEM, or FOLIO_ELIMIT when a fixed buffer is full). The text
 * is always NUL-terminated and never ends inside an escape or a UTF-8
 * sequence.
 *
 * Members: inside json_obj()/json_arr() containers the typed writers
 * (json_key, json_str, json_num, json_int, json_bool, json_null, nested
 * containers) place the commas themselves. Outside any container they
 * write exactly what they are given, so hand-assembled text (json_raw
 * "{", json_key, value, json_raw ",") keeps working; json_raw never
 * counts as a member.
 */
#ifndef FOLIO_JSON_H
#define FOLIO_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 31

struct json_buf {
    char *s;          /* the text so far, NUL-terminated (NULL before the first write) */
    size_t len, cap;
    int oom;          /* sticky: the text is incomplete (see json_status) */
    int err;          /* 0, FOLIO_ENOMEM or FOLIO_ELIMIT */
    int fixed;        /* s is the caller's array of cap bytes */
    int depth;        /* open json_obj/json_arr containers */
    int after_key;    /* the next value is a member's value: no comma */
    uint32_t first;   /* bit d: the container at depth d has no member yet */
};

void json_init(struct json_buf *b);
/* Writes into buf[0..n) (n >= 1), which is "" at once. */
void json_init_fixed(struct json_buf *b, char *buf, size_t n);
void json_free(struct json_buf *b); /* a fixed buffer is only reset */
/* 0, or why the text is incomplete: FOLIO_ENOMEM, FOLIO_ELIMIT. */
int json_status(const struct json_buf *b);

void json_raw(struct json_buf *b, const char *s);
void json_str(struct json_buf *b, const char *s); /* quoted, escaped; NULL as "" */
void json_strn(struct json_buf *b, const char *s, size_t n); /* n bytes, NULs included */
/* The inside of a string, no quotes: for callers that frame it themselves. */
void json_str_body(struct json_buf *b, const char *s, size_t n);
void json_num(struct json_buf *b, double v);      /* %.6g; NaN/inf → null */
void json_int(struct json_buf *b, int64_t v);
void json_uint(struct json_buf *b, uint64_t v);
void json_bool(struct json_buf *b, int v);
void json_null(struct json_buf *b);
void json_key(struct json_buf *b, const char *k); /* "k": */
void json_obj(struct json_buf *b);     /* { */
void json_obj_end(struct json_buf *b); /* } */
void json_arr(struct json_buf *b);     /* [ */
void json_arr_end(struct json_buf *b); /* ] */
/* Already-encoded JSON (another writer's output) as one member value. */
void json_value_raw(struct json_buf *b, const char *json);

/* s escaped as the inside of a JSON string into out[0..n) (no quotes),
 * for format strings that frame it ("\"name\":\"%s\""); returns out.
 * What does not fit is cut on a character boundary (json_init_fixed is
 * the writer that reports an overflow). */
const char *json_escape(char *out, size_t n, const char *s);

/* Writes b as one line to f (nothing when it is incomplete), frees it. */
void json_print_line(struct json_buf *b, FILE *f);
/* The bench output line: prints b and a newline to stdout (nothing when it
 * is incomplete), flushes, frees b. */
void json_emit_line(struct json_buf *b);

#endif
