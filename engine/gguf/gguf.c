/*
 * gguf reader — parses a whole GGUF v2/v3 file up front, then serves views.
 *
 * The file is mapped read-only and walked once by a cursor that can never
 * read past the end: every read asks the cursor for n bytes and the cursor
 * checks n against what is left. Counts read from the file are checked
 * against the bytes that remain *before* anything is allocated for them
 * (each element needs at least k bytes, so count <= remaining / k), which
 * bounds every allocation by a small multiple of the file size no matter
 * what the header claims. Tensor extents are validated after the walk:
 * shape products and byte sizes with overflow checks, offsets aligned,
 * every tensor inside the data section, no two tensors overlapping.
 *
 * Lookups by key or tensor name go through small open-addressing hash
 * tables built at open; duplicate keys or names are refused, since a
 * reader that silently takes the first or last one would disagree with
 * other tools about what the file means.
 */
#include "engine/gguf/gguf.h"
#include "engine/quant/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct gguf_value {
    uint32_t type;
    uint32_t elem_type;         /* arrays */
    uint64_t count;             /* arrays */
    const uint8_t *raw;         /* scalars, fixed-size array elements */
    struct gguf_str s;          /* GGUF_STRING */
    struct gguf_str *strs;      /* array of strings */
    struct gguf_value *elems;   /* array of arrays */
};

struct kv {
    char *key;
    struct gguf_value v;
};

struct gguf_file {
    char *path;
    const uint8_t *base;
    uint64_t size;
    int mapped;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    struct kv *kvs;
    uint64_t n_kv;
    struct gguf_tensor_info *tensors;
    uint64_t n_tensors;
    uint32_t *kv_hash; /* index+1, 0 = empty; size kv_hash_n (power of two) */
    uint64_t kv_hash_n;
    uint32_t *t_hash;
    uint64_t t_hash_n;
};

/* ------------------------------------------------------------------ names */

static const char *const VTYPE_NAMES[] = {"u8",   "i8",     "u16",   "i16", "u32",
                                          "i32",  "f32",    "bool",  "string", "array",
                                          "u64",  "i64",    "f64"};

const char *gguf_vtype_name(int type)
{
    if (type < 0 || type > GGUF_F64)
        return NULL;
    return VTYPE_NAMES[type];
}

/* ggml_type ids; NULL for ids that were removed or never existed. */
static const char *const GGML_TYPE_NAMES[] = {
    "f32",   "f16",    "q4_0",    "q4_1",   NULL,     NULL,     "q5_0",  "q5_1",
    "q8_0",  "q8_1",   "q2_K",    "q3_K",   "q4_K",   "q5_K",   "q6_K",  "q8_K",
    "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs",
    "i8",    "i16",    "i32",     "i64",    "f64",    "iq1_m",  "bf16",  NULL,
    NULL,    NULL,     "tq1_0",   "tq2_0",  NULL,     NULL,     NULL,    "mxfp4",
};

const char *gguf_ggml_type_name(int type)
{
    if (type < 0 || (size_t)type >= sizeof GGML_TYPE_NAMES / sizeof GGML_TYPE_NAMES[0])
        return NULL;
    return GGML_TYPE_NAMES[type];
}

/* Fixed byte size of a scalar value type; 0 for string/array/unknown. */
static uint64_t vtype_size(uint32_t t)
{
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL:
        return 1;
    case GGUF_U16: case GGUF_I16:
        return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32:
        return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

/* ----------------------------------------------------------------- cursor */

struct cur {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    const char *path;
    struct folio_err *err;
};

static int malformed(struct cur *c, uint64_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int malformed(struct cur *c, uint64_t at, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    folio_err_set(c->err, FOLIO_EFORMAT, "GGUF file '%s' is malformed: %s", c->path, what);
    folio_err_detail(c->err, "at byte %llu of %llu", (unsigned long long)at,
                     (unsigned long long)c->size);
    folio_err_hint(c->err, "the file is truncated, corrupt or not a GGUF model; "
                           "download or convert it again");
    return FOLIO_EFORMAT;
}

static uint64_t remaining(const struct cur *c)
{
    return c->size - c->pos;
}

static int take(struct cur *c, uint64_t n, const uint8_t **out, const char *what)
{
    *out = NULL;
    if (n > remaining(c))
        return malformed(c, c->pos, "%s needs %llu bytes but only %llu remain", what,
                         (unsigned long long)n, (unsigned long long)remaining(c));
    *out = c->base + c->pos;
    c->pos += n;
    return 0;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int rd_u32(struct cur *c, uint32_t *v, const char *what)
{
    const uint8_t *p;
    int rc = take(c, 4, &p, what);
    if (rc == 0)
        *v = le32(p);
    return rc;
}

static int rd_u64(struct cur *c, uint64_t *v, const char *what)
{
    const uint8_t *p;
    int rc = take(c, 8, &p, what);
    if (rc == 0)
        *v = le64(p);
    return rc;
}

static int rd_str(struct cur *c, struct gguf_str *s, const char *what)
{
    uint64_t n;
    const uint8_t *p;
    uint64_t at = c->pos;
    int rc = rd_u64(c, &n, what);
    if (rc)
        return rc;
    if (n > remaining(c))
        return malformed(c, at, "%s has length %llu but only %llu bytes remain", what,
                         (unsigned long long)n, (unsigned long long)remaining(c));
    rc = take(c, n, &p, what);
    if (rc)
        return rc;
    s->p = (const char *)p;
    s->n = n;
    return 0;
}

/* ---------------------------------------------------------------- values */

static void value_free(struct gguf_value *v)
{
    if (v->elems) {
        for (uint64_t i = 0; i < v->count; i++)
            value_free(&v->elems[i]);
        free(v->elems);
    }
    free(v->strs);
    memset(v, 0, sizeof *v);
}

static int parse_value(struct cur *c, uint32_t type, struct gguf_value *v, int depth,
                       const char *key);

static int parse_array(struct cur *c, struct gguf_value *v, int depth, const char *key)
{
    uint64_t at = c->pos;
    uint32_t et;
    uint64_t n;
    int rc = rd_u32(c, &et, "array element type");
    if (rc == 0)
        rc = rd_u64(c, &n, "array length");
    if (rc)
        return rc;
    v->elem_type = et;
    if (et == GGUF_ARRAY && depth + 1 >= GGUF_MAX_ARRAY_DEPTH)
        return malformed(c, at, "key '%s': arrays nested deeper than %d levels", key,
                         GGUF_MAX_ARRAY_DEPTH);
    uint64_t esz = vtype_size(et);
    if (esz) {
        if (n > remaining(c) / esz)
            return malformed(c, at, "key '%s': array of %llu %s needs more bytes than the %llu "
                             "that remain", key, (unsigned long long)n, VTYPE_NAMES[et],
                             (unsigned long long)remaining(c));
        const uint8_t *p;
        rc = take(c, n * esz, &p, "array data");
        if (rc)
            return rc;
        v->raw = p;
        v->count = n;
        return 0;
    }
    if (et == GGUF_STRING) {
        /* each string needs at least its 8-byte length */
        if (n > remaining(c) / 8)
            return malformed(c, at, "key '%s': array of %llu strings cannot fit in the %llu "
                             "bytes that remain", key, (unsigned long long)n,
                             (unsigned long long)remaining(c));
        v->strs = calloc(n ? n : 1, sizeof *v->strs);
        if (!v->strs)
            return folio_err_set(c->err, FOLIO_ENOMEM, "out of memory reading key '%s'", key);
        v->count = n;
        for (uint64_t i = 0; i < n; i++) {
            rc = rd_str(c, &v->strs[i], "array string");
            if (rc)
                return rc;
        }
        return 0;
    }
    if (et == GGUF_ARRAY) {
        /* each nested array needs at least its type and length */
        if (n > remaining(c) / 12)
            return malformed(c, at, "key '%s': array of %llu arrays cannot fit in the %llu "
                             "bytes that remain", key, (unsigned long long)n,
                             (unsigned long long)remaining(c));
        v->elems = calloc(n ? n : 1, sizeof *v->elems);
        if (!v->elems)
            return folio_err_set(c->err, FOLIO_ENOMEM, "out of memory reading key '%s'", key);
        v->count = n;
        for (uint64_t i = 0; i < n; i++) {
            rc = parse_value(c, GGUF_ARRAY, &v->elems[i], depth + 1, key);
            if (rc)
                return rc;
        }
        return 0;
    }
    return malformed(c, at, "key '%s': array element type %u is not a GGUF value type", key, et);
}

static int parse_value(struct cur *c, uint32_t type, struct gguf_value *v, int depth,
                       const char *key)
{
    v->type = type;
    uint64_t sz = vtype_size(type);
    if (sz) {
        int rc = take(c, sz, &v->raw, "value");
        if (rc)
            return rc;
        if (type == GGUF_BOOL && v->raw[0] > 1)
            return malformed(c, c->pos - 1, "key '%s': bool value %u is neither 0 nor 1", key,
                             v->raw[0]);
        return 0;
    }
    if (type == GGUF_STRING)
        return rd_str(c, &v->s, "string value");
    if (type == GGUF_ARRAY)
        return parse_array(c, v, depth, key);
    return malformed(c, c->pos - 4, "key '%s' has value type %u, which is not a GGUF value type "
                     "(0..12)", key, type);
}

/* ---------------------------------------------------------------- hashing */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t hash_size(uint64_t n)
{
    uint64_t m = 8;
    while (m < 2 * n)
        m <<= 1;
    return m;
}

/* Inserts index i under name; returns the existing index+1 on a duplicate. */
static uint32_t hash_insert(uint32_t *tab, uint64_t m, const char *name, uint32_t i,
                            const char *(*name_of)(const struct gguf_file *, uint64_t),
                            const struct gguf_file *f)
{
    uint64_t h = fnv1a(name) & (m - 1);
    while (tab[h]) {
        if (strcmp(name_of(f, tab[h] - 1), name) == 0)
            return tab[h];
        h = (h + 1) & (m - 1);
    }
    tab[h] = i + 1;
    return 0;
}

static int64_t hash_find(const uint32_t *tab, uint64_t m, const char *name,
                         const char *(*name_of)(const struct gguf_file *, uint64_t),
                         const struct gguf_file *f)
{
    if (!tab)
        return -1;
    uint64_t h = fnv1a(name) & (m - 1);
    while (tab[h]) {
        if (strcmp(name_of(f, tab[h] - 1), name) == 0)
            return (int64_t)tab[h] - 1;
        h = (h + 1) & (m - 1);
    }
    return -1;
}

static const char *kv_name(const struct gguf_file *f, uint64_t i)
{
    return f->kvs[i].key;
}

static const char *tensor_name(const struct gguf_file *f, uint64_t i)
{
    return f->tensors[i].name;
}

/* ------------------------------------------------------------------ parse */

/* Copies a length-prefixed name into a NUL-terminated string, refusing
 * embedded NULs (they would make two different names compare equal). */
static int dup_name(struct cur *c, struct gguf_str s, uint64_t at, const char *what, char **out)
{
    if (memchr(s.p, 0, s.n))
        return malformed(c, at, "%s contains a NUL byte", what);
    char *n = malloc(s.n + 1);
    if (!n)
        return folio_err_set(c->err, FOLIO_ENOMEM, "out of memory reading %s", what);
    memcpy(n, s.p, s.n);
    n[s.n] = 0;
    *out = n;
    return 0;
}

static int parse_kvs(struct gguf_file *f, struct cur *c)
{
    for (uint64_t i = 0; i < f->n_kv; i++) {
        struct gguf_str ks;
        uint64_t at = c->pos;
        int rc = rd_str(c, &ks, "metadata key");
        if (rc)
            return rc;
        if (ks.n == 0 || ks.n > GGUF_MAX_KEY)
            return malformed(c, at, "metadata key %llu has length %llu (must be 1..%d)",
                             (unsigned long long)i, (unsigned long long)ks.n, GGUF_MAX_KEY);
        rc = dup_name(c, ks, at, "a metadata key", &f->kvs[i].key);
        if (rc)
            return rc;
        uint32_t type;
        rc = rd_u32(c, &type, "metadata value type");
        if (rc)
            return rc;
        rc = parse_value(c, type, &f->kvs[i].v, 0, f->kvs[i].key);
        if (rc)
            return rc;
        if (hash_insert(f->kv_hash, f->kv_hash_n, f->kvs[i].key, (uint32_t)i, kv_name, f)) {
            char q[160];
            return malformed(c, at, "metadata key %s appears twice",
                             folio_lq(q, sizeof q, f->kvs[i].key));
        }
    }
    return 0;
}

static int parse_tensor_infos(struct gguf_file *f, struct cur *c)
{
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        struct gguf_tensor_info *t = &f->tensors[i];
        struct gguf_str ns;
        uint64_t at = c->pos;
        int rc = rd_str(c, &ns, "tensor name");
        if (rc)
            return rc;
        if (ns.n == 0 || ns.n > GGUF_MAX_NAME)
            return malformed(c, at, "tensor %llu's name has length %llu (must be 1..%d)",
                             (unsigned long long)i, (unsigned long long)ns.n, GGUF_MAX_NAME);
        char *name = NULL;
        rc = dup_name(c, ns, at, "a tensor name", &name);
        if (rc)
            return rc;
        t->name = name;
        char q[160];
        folio_lq(q, sizeof q, name);
        rc = rd_u32(c, &t->n_dims, "tensor dimension count");
        if (rc)
            return rc;
        if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
            return malformed(c, c->pos - 4, "tensor %s has %u dimensions (must be 1..%d)", q,
                             t->n_dims, GGUF_MAX_DIMS);
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
            t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            rc = rd_u64(c, &t->ne[d], "tensor dimension");
            if (rc)
                return rc;
            /* ggml stores ne as int64: anything above INT64_MAX is negative there. */
            if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX)
                return malformed(c, c->pos - 8, "tensor %s dimension %u is %llu", q, d,
                                 (unsigned long long)t->ne[d]);
        }
        uint32_t type;
        rc = rd_u32(c, &type, "tensor type");
        if (rc)
            return rc;
        if (!quant_in_gguf((int)type)) {
            const char *tn = gguf_ggml_type_name((int)type);
            if (!tn)
                return malformed(c, c->pos - 4, "tensor %s has type id %u, which is no ggml type",
                                 q, type);
            folio_err_set(c->err, FOLIO_EUNSUPPORTED,
                          "tensor %s in '%s' has type %s (ggml type %u), which folio does not "
                          "support", q, c->path, tn, type);
            folio_err_detail(c->err, "folio reads f32, f16, bf16, q8_0, q4_K, q5_K and q6_K");
            folio_err_hint(c->err, "use a Q4_K_M, Q5_K_M, Q6_K, Q8_0, F16 or BF16 release of "
                                   "the model");
            return FOLIO_EUNSUPPORTED;
        }
        t->type = (int)type;
        rc = rd_u64(c, &t->offset, "tensor data offset");
        if (rc)
            return rc;
        if (hash_insert(f->t_hash, f->t_hash_n, name, (uint32_t)i, tensor_name, f))
            return malformed(c, at, "tensor name %s appears twice", q);
    }
    return 0;
}

struct extent {
    uint64_t off, end;
    uint64_t idx;
};

static int cmp_extent(const void *a, const void *b)
{
    const struct extent *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Shapes, sizes and placement of every tensor against the data section. */
static int check_tensors(struct gguf_file *f, struct cur *c)
{
    if (f->n_tensors == 0)
        return 0;
    if (f->data_offset > f->size)
        return malformed(c, f->size, "the data section would start at byte %llu, past the end",
                         (unsigned long long)f->data_offset);
    uint64_t data_size = f->size - f->data_offset;
    struct extent *ex = malloc(f->n_tensors * sizeof *ex);
    if (!ex)
        return folio_err_set(c->err, FOLIO_ENOMEM, "out of memory checking tensors");
    int rc = 0;
    for (uint64_t i = 0; i < f->n_tensors && rc == 0; i++) {
        struct gguf_tensor_info *t = &f->tensors[i];
        char q[160];
        folio_lq(q, sizeof q, t->name);
        uint64_t n = 1;
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
            if (t->ne[d] > (uint64_t)INT64_MAX / n) {
                rc = malformed(c, c->pos, "tensor %s has more than 2^63 elements", q);
                break;
            }
            n *= t->ne[d];
        }
        if (rc)
            break;
        t->n_elems = n;
        int be = quant_block_elems(t->type);
        if (t->ne[0] % (uint64_t)be != 0) {
            rc = malformed(c, c->pos, "tensor %s: first dimension %llu is not a multiple of the "
                           "%s block size %d", q, (unsigned long long)t->ne[0],
                           quant_type_name(t->type), be);
            break;
        }
        uint64_t row = quant_row_bytes(t->type, t->ne[0]);
        uint64_t rows = n / t->ne[0];
        if (row == 0 || rows > UINT64_MAX / row) {
            rc = malformed(c, c->pos, "tensor %s: byte size overflows", q);
            break;
        }
        t->n_bytes = row * rows;
        if (t->offset % f->alignment != 0) {
            rc = malformed(c, c->pos, "tensor %s: data offset %llu is not a multiple of the "
                           "alignment %u", q, (unsigned long long)t->offset, f->alignment);
            break;
        }
        if (t->offset > data_size || t->n_bytes > data_size - t->offset) {
            rc = malformed(c, c->pos, "tensor %s: %llu bytes at offset %llu do not fit in the "
                           "%llu-byte data section", q, (unsigned long long)t->n_bytes,
                           (unsigned long long)t->offset, (unsigned long long)data_size);
            break;
        }
        t->file_offset = f->data_offset + t->offset;
        t->data = f->base + t->file_offset;
        ex[i] = (struct extent){t->offset, t->offset + t->n_bytes, i};
    }
    if (rc == 0) {
        qsort(ex, f->n_tensors, sizeof *ex, cmp_extent);
        for (uint64_t i = 1; i < f->n_tensors; i++) {
            if (ex[i].off < ex[i - 1].end) {
                char a[160], b[160];
                rc = malformed(c, c->pos, "tensors %s and %s overlap in the data section "
                               "(%llu < %llu)",
                               folio_lq(a, sizeof a, f->tensors[ex[i - 1].idx].name),
                               folio_lq(b, sizeof b, f->tensors[ex[i].idx].name),
                               (unsigned long long)ex[i].off, (unsigned long long)ex[i - 1].end);
                break;
            }
        }
    }
    free(ex);
    return rc;
}

static int parse(struct gguf_file *f, struct folio_err *err)
{
    struct cur c = {f->base, f->size, 0, f->path, err};
    const uint8_t *p;
    int rc = take(&c, 4, &p, "magic");
    if (rc)
        return rc;
    if (memcmp(p, "GGUF", 4) != 0) {
        folio_err_set(err, FOLIO_EFORMAT, "'%s' is not a GGUF file", f->path);
        folio_err_detail(err, "the first bytes are %02x %02x %02x %02x, not \"GGUF\"", p[0], p[1],
                         p[2], p[3]);
        folio_err_hint(err, "pass a .gguf model file (llama.cpp format)");
        return FOLIO_EFORMAT;
    }
    rc = rd_u32(&c, &f->version, "version");
    if (rc)
        return rc;
    if (f->version != 2 && f->version != 3) {
        folio_err_set(err, FOLIO_EUNSUPPORTED, "'%s' is GGUF version %u; folio reads versions 2 "
                      "and 3", f->path, f->version);
        if (f->version == 1)
            folio_err_hint(err, "GGUF v1 predates 64-bit counts; convert the model again with "
                                "a current llama.cpp");
        else if ((f->version & 0xffff) == 0)
            folio_err_hint(err, "this looks like a big-endian GGUF; folio reads little-endian "
                                "files only");
        return FOLIO_EUNSUPPORTED;
    }
    uint64_t at = c.pos;
    rc = rd_u64(&c, &f->n_tensors, "tensor count");
    if (rc == 0)
        rc = rd_u64(&c, &f->n_kv, "metadata count");
    if (rc)
        return rc;
    /* Minimum encoded sizes: a tensor info is >= 8+1 name + 4 + 8 + 4 + 8
     * bytes, a key/value >= 8+1 key + 4 type + 1 value. */
    if (f->n_tensors > remaining(&c) / 33 || f->n_tensors > GGUF_MAX_TENSORS)
        return malformed(&c, at, "header claims %llu tensors, more than the file can hold "
                         "(or than the reader's limit of %u)", (unsigned long long)f->n_tensors,
                         GGUF_MAX_TENSORS);
    if (f->n_kv > remaining(&c) / 14 || f->n_kv > GGUF_MAX_KV)
        return malformed(&c, at + 8, "header claims %llu metadata keys, more than the file can "
                         "hold", (unsigned long long)f->n_kv);
    f->kvs = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kvs);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    f->kv_hash_n = hash_size(f->n_kv);
    f->t_hash_n = hash_size(f->n_tensors);
    f->kv_hash = calloc(f->kv_hash_n, sizeof *f->kv_hash);
    f->t_hash = calloc(f->t_hash_n, sizeof *f->t_hash);
    if (!f->kvs || !f->tensors || !f->kv_hash || !f->t_hash)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory opening '%s'", f->path);
    rc = parse_kvs(f, &c);
    if (rc)
        return rc;

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_value *av = gguf_find(f, "general.alignment");
    if (av) {
        int64_t a;
        if (gguf_value_i64(av, &a) != 0 || av->type == GGUF_BOOL || a <= 0 || a > (1 << 30) ||
            (a & (a - 1)) != 0)
            return malformed(&c, c.pos, "general.alignment must be a power of two up to 2^30");
        f->alignment = (uint32_t)a;
    }
    rc = parse_tensor_infos(f, &c);
    if (rc)
        return rc;
    uint64_t pad = (f->alignment - c.pos % f->alignment) % f->alignment;
    f->data_offset = c.pos + pad; /* no overflow: c.pos <= size < 2^63 */
    return check_tensors(f, &c);
}

/* ------------------------------------------------------------ open/close */

static int open_common(struct gguf_file *f, struct gguf_file **out, struct folio_err *err)
{
    int rc = parse(f, err);
    if (rc) {
        gguf_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

int gguf_open_memory(const void *data, size_t size, struct gguf_file **out,
                     struct folio_err *err)
{
    *out = NULL;
    struct gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup("<memory>"))) {
        free(f);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory opening a GGUF buffer");
    }
    f->base = data;
    f->size = size;
    if (size > (uint64_t)INT64_MAX) {
        gguf_close(f);
        return folio_err_set(err, FOLIO_ELIMIT, "GGUF buffer too large");
    }
    return open_common(f, out, err);
}

int gguf_open(const char *path, struct gguf_file **out, struct folio_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        folio_err_set(err, FOLIO_EIO, "cannot open model file '%s': %s", path, strerror(e));
        if (e == ENOENT)
            folio_err_hint(err, "check the path (relative paths are resolved from the current "
                                "directory)");
        return FOLIO_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return folio_err_set(err, FOLIO_EIO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return folio_err_set(err, FOLIO_EINVAL, "'%s' is not a regular file", path);
    }
    if (st.st_size < 24) {
        close(fd);
        folio_err_set(err, FOLIO_EFORMAT, "'%s' is too short to be a GGUF file", path);
        folio_err_detail(err, "%lld bytes; a GGUF header alone is 24", (long long)st.st_size);
        return FOLIO_EFORMAT;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED)
        return folio_err_set(err, FOLIO_EIO, "cannot map '%s' (%lld bytes): %s", path,
                             (long long)st.st_size, strerror(e));
    struct gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        munmap(m, (size_t)st.st_size);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory opening '%s'", path);
    }
    f->base = m;
    f->size = (uint64_t)st.st_size;
    f->mapped = 1;
    return open_common(f, out, err);
}

void gguf_close(struct gguf_file *f)
{
    if (!f)
        return;
    if (f->kvs) {
        for (uint64_t i = 0; i < f->n_kv; i++) {
            free(f->kvs[i].key);
            value_free(&f->kvs[i].v);
        }
    }
    if (f->tensors)
        for (uint64_t i = 0; i < f->n_tensors; i++)
            free((char *)f->tensors[i].name);
    free(f->kvs);
    free(f->tensors);
    free(f->kv_hash);
    free(f->t_hash);
    if (f->mapped)
        munmap((void *)f->base, (size_t)f->size);
    free(f->path);
    free(f);
}

const char *gguf_path(const struct gguf_file *f) { return f->path; }
uint32_t gguf_version(const struct gguf_file *f) { return f->version; }
uint64_t gguf_file_size(const struct gguf_file *f) { return f->size; }
uint32_t gguf_alignment(const struct gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const struct gguf_file *f) { return f->data_offset; }

/* ------------------------------------------------------------- accessors */

uint64_t gguf_kv_count(const struct gguf_file *f) { return f->n_kv; }

const char *gguf_kv_key(const struct gguf_file *f, uint64_t i)
{
    return i < f->n_kv ? f->kvs[i].key : NULL;
}

const struct gguf_value *gguf_kv_value(const struct gguf_file *f, uint64_t i)
{
    return i < f->n_kv ? &f->kvs[i].v : NULL;
}

const struct gguf_value *gguf_find(const struct gguf_file *f, const char *key)
{
    int64_t i = hash_find(f->kv_hash, f->kv_hash_n, key, kv_name, f);
    /* During parsing the table holds only keys read so far: still correct. */
    return i < 0 ? NULL : &f->kvs[i].v;
}

int gguf_value_type(const struct gguf_value *v) { return (int)v->type; }

int gguf_array_type(const struct gguf_value *v)
{
    return v->type == GGUF_ARRAY ? (int)v->elem_type : 0;
}

uint64_t gguf_array_len(const struct gguf_value *v)
{
    return v->type == GGUF_ARRAY ? v->count : 0;
}

const struct gguf_value *gguf_array_elem(const struct gguf_value *v, uint64_t i)
{
    if (v->type != GGUF_ARRAY || v->elem_type != GGUF_ARRAY || i >= v->count)
        return NULL;
    return &v->elems[i];
}

/* Reads one fixed-size number of type t at p as int64 (ok = 0) or double. */
static int num_i64(uint32_t t, const uint8_t *p, int64_t *out)
{
    switch (t) {
    case GGUF_U8: case GGUF_BOOL: *out = p[0]; return 0;
    case GGUF_I8: *out = (int8_t)p[0]; return 0;
    case GGUF_U16: *out = (uint16_t)(p[0] | p[1] << 8); return 0;
    case GGUF_I16: *out = (int16_t)(uint16_t)(p[0] | p[1] << 8); return 0;
    case GGUF_U32: *out = le32(p); return 0;
    case GGUF_I32: *out = (int32_t)le32(p); return 0;
    case GGUF_U64: {
        uint64_t u = le64(p);
        if (u > (uint64_t)INT64_MAX)
            return FOLIO_EINVAL;
        *out = (int64_t)u;
        return 0;
    }
    case GGUF_I64: *out = (int64_t)le64(p); return 0;
    default: return FOLIO_EINVAL;
    }
}

static int num_f64(uint32_t t, const uint8_t *p, double *out)
{
    if (t == GGUF_F32) {
        uint32_t u = le32(p);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
        return 0;
    }
    if (t == GGUF_F64) {
        uint64_t u = le64(p);
        memcpy(out, &u, 8);
        return 0;
    }
    if (t == GGUF_U64) {
        *out = (double)le64(p);
        return 0;
    }
    int64_t i;
    if (num_i64(t, p, &i) != 0)
        return FOLIO_EINVAL;
    *out = (double)i;
    return 0;
}

int gguf_value_i64(const struct gguf_value *v, int64_t *out)
{
    return v->raw && v->type != GGUF_ARRAY ? num_i64(v->type, v->raw, out) : FOLIO_EINVAL;
}

int gguf_value_f64(const struct gguf_value *v, double *out)
{
    return v->raw && v->type != GGUF_ARRAY && v->type != GGUF_BOOL
               ? num_f64(v->type, v->raw, out)
               : FOLIO_EINVAL;
}

int gguf_value_str(const struct gguf_value *v, struct gguf_str *out)
{
    if (v->type != GGUF_STRING)
        return FOLIO_EINVAL;
    *out = v->s;
    return 0;
}

int gguf_array_i64(const struct gguf_value *v, uint64_t i, int64_t *out)
{
    if (v->type != GGUF_ARRAY || i >= v->count || !vtype_size(v->elem_type))
        return FOLIO_EINVAL;
    return num_i64(v->elem_type, v->raw + i * vtype_size(v->elem_type), out);
}

int gguf_array_f64(const struct gguf_value *v, uint64_t i, double *out)
{
    if (v->type != GGUF_ARRAY || i >= v->count || !vtype_size(v->elem_type) ||
        v->elem_type == GGUF_BOOL)
        return FOLIO_EINVAL;
    return num_f64(v->elem_type, v->raw + i * vtype_size(v->elem_type), out);
}

int gguf_array_str(const struct gguf_value *v, uint64_t i, struct gguf_str *out)
{
    if (v->type != GGUF_ARRAY || v->elem_type != GGUF_STRING || i >= v->count)
        return FOLIO_EINVAL;
    *out = v->strs[i];
    return 0;
}

int gguf_str_eq(struct gguf_str s, const char *z)
{
    size_t n = strlen(z);
    return s.n == n && memcmp(s.p, z, n) == 0;
}

/* ------------------------------------------------------- typed getters */

static const char *type_desc(const struct gguf_value *v, char *buf, size_t n)
{
    if (v->type == GGUF_ARRAY) {
        const char *e = gguf_vtype_name((int)v->elem_type);
        snprintf(buf, n, "array of %s", e ? e : "?");
        return buf;
    }
    const char *t = gguf_vtype_name((int)v->type);
    return t ? t : "?";
}

static int missing(const struct gguf_file *f, const char *key, const char *want,
                   struct folio_err *err)
{
    folio_err_set(err, FOLIO_EMODEL, "model file '%s' lacks metadata key '%s' (%s)", f->path,
                  key, want);
    folio_err_hint(err, "the file was not converted for this model by llama.cpp's converter, "
                        "or is from an incompatible version");
    return FOLIO_EMODEL;
}

static int wrong_type(const struct gguf_file *f, const char *key, const char *want,
                      const struct gguf_value *v, struct folio_err *err)
{
    char b[48];
    folio_err_set(err, FOLIO_EMODEL, "metadata key '%s' in '%s' is %s, expected %s", key, f->path,
                  type_desc(v, b, sizeof b), want);
    return FOLIO_EMODEL;
}

int gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out, struct folio_err *err)
{
    const struct gguf_value *v = gguf_find(f, key);
    if (!v)
        return missing(f, key, "integer", err);
    if (v->type == GGUF_BOOL || gguf_value_i64(v, out) != 0)
        return wrong_type(f, key, "an integer", v, err);
    return 0;
}

int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out, struct folio_err *err)
{
    int64_t x;
    int rc = gguf_get_i64(f, key, &x, err);
    if (rc)
        return rc;
    if (x < 0 || x > (int64_t)UINT32_MAX) {
        folio_err_set(err, FOLIO_EMODEL, "metadata key '%s' in '%s' is %lld, outside 0..%u", key,
                      f->path, (long long)x, UINT32_MAX);
        return FOLIO_EMODEL;
    }
    *out = (uint32_t)x;
    return 0;
}

int gguf_get_f32(const struct gguf_file *f, const char *key, float *out, struct folio_err *err)
{
    const struct gguf_value *v = gguf_find(f, key);
    if (!v)
        return missing(f, key, "float", err);
    double d;
    if ((v->type != GGUF_F32 && v->type != GGUF_F64) || gguf_value_f64(v, &d) != 0)
        return wrong_type(f, key, "f32", v, err);
    *out = (float)d;
    return 0;
}

int gguf_get_bool(const struct gguf_file *f, const char *key, int *out, struct folio_err *err)
{
    const struct gguf_value *v = gguf_find(f, key);
    if (!v)
        return missing(f, key, "bool", err);
    if (v->type != GGUF_BOOL)
        return wrong_type(f, key, "bool", v, err);
    *out = v->raw[0] != 0;
    return 0;
}

int gguf_get_str(const struct gguf_file *f, const char *key, struct gguf_str *out,
                 struct folio_err *err)
{
    const struct gguf_value *v = gguf_find(f, key);
    if (!v)
        return missing(f, key, "string", err);
    if (v->type != GGUF_STRING)
        return wrong_type(f, key, "string", v, err);
    *out = v->s;
    return 0;
}

static int elem_ok(uint32_t have, int want)
{
    if (want < 0 || (uint32_t)want == have)
        return 1;
    if (want == GGUF_I64)
        return have != GGUF_BOOL && have != GGUF_F32 && have != GGUF_F64 && vtype_size(have);
    if (want == GGUF_F64)
        return have != GGUF_BOOL && vtype_size(have);
    return 0;
}

int gguf_get_array(const struct gguf_file *f, const char *key, int elem_type,
                   const struct gguf_value **out, struct folio_err *err)
{
    const struct gguf_value *v = gguf_find(f, key);
    char want[48];
    snprintf(want, sizeof want, "array of %s",
             elem_type < 0 ? "anything" : elem_type == GGUF_I64 ? "integers"
                                      : elem_type == GGUF_F64 ? "numbers"
                                                              : VTYPE_NAMES[elem_type]);
    if (!v)
        return missing(f, key, want, err);
    if (v->type != GGUF_ARRAY || !elem_ok(v->elem_type, elem_type))
        return wrong_type(f, key, want, v, err);
    *out = v;
    return 0;
}

int gguf_get_u32_or(const struct gguf_file *f, const char *key, uint32_t dflt, uint32_t *out,
                    struct folio_err *err)
{
    if (!gguf_find(f, key)) {
        *out = dflt;
        return 0;
    }
    return gguf_get_u32(f, key, out, err);
}

int gguf_get_f32_or(const struct gguf_file *f, const char *key, float dflt, float *out,
                    struct folio_err *err)
{
    if (!gguf_find(f, key)) {
        *out = dflt;
        return 0;
    }
    return gguf_get_f32(f, key, out, err);
}

int gguf_get_bool_or(const struct gguf_file *f, const char *key, int dflt, int *out,
                     struct folio_err *err)
{
    if (!gguf_find(f, key)) {
        *out = dflt;
        return 0;
    }
    return gguf_get_bool(f, key, out, err);
}

/* --------------------------------------------------------------- tensors */

uint64_t gguf_tensor_count(const struct gguf_file *f) { return f->n_tensors; }

const struct gguf_tensor_info *gguf_tensor(const struct gguf_file *f, uint64_t i)
{
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const struct gguf_tensor_info *gguf_find_tensor(const struct gguf_file *f, const char *name)
{
    int64_t i = hash_find(f->t_hash, f->t_hash_n, name, tensor_name, f);
    return i < 0 ? NULL : &f->tensors[i];
}
