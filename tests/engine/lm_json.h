/*
 * A minimal JSON reader for the parity manifest (tests only): parses the
 * whole document into a tree; lookups by key and index. Numbers are
 * doubles; strings are unescaped for \" \\ \/ \n \t and \uXXXX (BMP only
 * — the manifest keys and paths are ASCII). Fails (returns NULL) on
 * anything malformed rather than guessing.
 */
#ifndef FOLIO_TEST_LM_JSON_H
#define FOLIO_TEST_LM_JSON_H

#include "common/common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum jt { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
    enum jt t;
    double num;
    char *str;
    int n;
    char **keys;
    struct jv **items;
};

struct jp {
    const char *s, *e;
    int depth;
};

static void jws(struct jp *p)
{
    while (p->s < p->e && (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t'))
        p->s++;
}

static void jfree(struct jv *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->n; i++) {
        if (v->keys)
            free(v->keys[i]);
        jfree(v->items[i]);
    }
    free(v->keys);
    free(v->items);
    free(v->str);
    free(v);
}

static char *jstring(struct jp *p)
{
    if (p->s >= p->e || *p->s != '"')
        return NULL;
    p->s++;
    size_t cap = 16, n = 0;
    char *o = malloc(cap);
    while (o && p->s < p->e && *p->s != '"') {
        if (n + 4 >= cap) {
            char *q = realloc(o, cap *= 2);
            if (!q) {
                free(o);
                return NULL;
            }
            o = q;
        }
        char c = *p->s++;
        if (c == '\\') {
            if (p->s >= p->e)
                break;
            c = *p->s++;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'r')
                c = '\r';
            else if (c == 'b')
                c = '\b';
            else if (c == 'f')
                c = '\f';
            else if (c == 'u') {
                if (p->e - p->s < 4) {
                    free(o);
                    return NULL;
                }
                char hx[5] = {p->s[0], p->s[1], p->s[2], p->s[3], 0};
                unsigned cp = (unsigned)strtoul(hx, NULL, 16);
                p->s += 4;
                if (cp < 0x80) {
                    o[n++] = (char)cp;
                } else if (cp < 0x800) {
                    o[n++] = (char)(0xC0 | (cp >> 6));
                    o[n++] = (char)(0x80 | (cp & 0x3F));
                } else {
                    o[n++] = (char)(0xE0 | (cp >> 12));
                    o[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    o[n++] = (char)(0x80 | (cp & 0x3F));
                }
                continue;
            }
        }
        o[n++] = c;
    }
    if (!o || p->s >= p->e) {
        free(o);
        return NULL;
    }
    p->s++;
    o[n] = 0;
    return o;
}

static struct jv *jvalue(struct jp *p)
{
    jws(p);
    if (p->s >= p->e || ++p->depth > 64)
        return NULL;
    struct jv *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    char c = *p->s;
    if (c == '{' || c == '[') {
        v->t = c == '{' ? J_OBJ : J_ARR;
        p->s++;
        int cap = 0;
        jws(p);
        if (p->s < p->e && *p->s == (c == '{' ? '}' : ']')) {
            p->s++;
            p->depth--;
            return v;
        }
        for (;;) {
            char *k = NULL;
            jws(p);
            if (v->t == J_OBJ) {
                k = jstring(p);
                jws(p);
                if (!k || p->s >= p->e || *p->s != ':') {
                    free(k);
                    jfree(v);
                    return NULL;
                }
                p->s++;
            }
            struct jv *it = jvalue(p);
            if (!it) {
                free(k);
                jfree(v);
                return NULL;
            }
            if (v->n == cap) {
                cap = cap ? cap * 2 : 8;
                struct jv **ni = realloc(v->items, (size_t)cap * sizeof *ni);
                if (ni)
                    v->items = ni;
                char **nk = v->t == J_OBJ ? realloc(v->keys, (size_t)cap * sizeof *nk) : NULL;
                if (nk)
                    v->keys = nk;
                if (!ni || (v->t == J_OBJ && !nk)) {
                    free(k);
                    jfree(it);
                    jfree(v);
                    return NULL;
                }
            }
            if (v->keys)
                v->keys[v->n] = k;
            v->items[v->n++] = it;
            jws(p);
            if (p->s < p->e && *p->s == ',') {
                p->s++;
                continue;
            }
            if (p->s < p->e && *p->s == (v->t == J_OBJ ? '}' : ']')) {
                p->s++;
                break;
            }
            jfree(v);
            return NULL;
        }
    } else if (c == '"') {
        v->t = J_STR;
        v->str = jstring(p);
        if (!v->str) {
            jfree(v);
            return NULL;
        }
    } else if (!strncmp(p->s, "true", 4) || !strncmp(p->s, "false", 5)) {
        v->t = J_BOOL;
        v->num = c == 't';
        p->s += c == 't' ? 4 : 5;
    } else if (!strncmp(p->s, "null", 4)) {
        p->s += 4;
    } else {
        char *end;
        v->t = J_NUM;
        v->num = strtod(p->s, &end);
        if (end == p->s || end > p->e) {
            jfree(v);
            return NULL;
        }
        p->s = end;
    }
    p->depth--;
    return v;
}

static struct jv *jparse(const char *s, size_t n)
{
    struct jp p = {s, s + n, 0};
    return jvalue(&p);
}

static const struct jv *jget(const struct jv *v, const char *key)
{
    if (!v || v->t != J_OBJ)
        return NULL;
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], key))
            return v->items[i];
    return NULL;
}

static const struct jv *jat(const struct jv *v, int i)
{
    return v && v->t == J_ARR && i >= 0 && i < v->n ? v->items[i] : NULL;
}

/* int32 array from a JSON array of numbers (malloc'd, count in *n). */
static int32_t *jints(const struct jv *v, uint32_t *n)
{
    if (!v || v->t != J_ARR)
        return NULL;
    int32_t *o = malloc((size_t)(v->n ? v->n : 1) * sizeof *o);
    for (int i = 0; o && i < v->n; i++)
        o[i] = (int32_t)v->items[i]->num;
    *n = (uint32_t)v->n;
    return o;
}

/* The parity manifest of a fixture root (tests/support/parity_root.h),
 * parsed; NULL with the reason in why. */
static inline struct jv *jload_manifest(const char *root, char *why, size_t n)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/manifest.json", root);
    uint8_t *b = NULL;
    size_t len = 0;
    struct folio_err e = {0};
    if (folio_read_file(path, 64u << 20, &b, &len, &e) != 0) {
        snprintf(why, n, "%s: %s", path, e.msg);
        return NULL;
    }
    struct jv *m = jparse((const char *)b, len);
    free(b);
    if (!m || !jget(m, "configs")) {
        snprintf(why, n, "%s does not parse as a parity manifest", path);
        jfree(m);
        return NULL;
    }
    return m;
}

#endif
