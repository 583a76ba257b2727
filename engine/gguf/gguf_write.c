/*
 * gguf writer — builds GGUF v2/v3 files in memory.
 *
 * It exists so that tests, fuzz seeds and benches can make model files of
 * any shape without downloads. Metadata and tensor infos are encoded into
 * one growing buffer as they are added; tensor data goes into a second
 * buffer, each tensor placed at the next multiple of the alignment; finish
 * joins them with the padding GGUF requires. Errors while adding are sticky
 * (recorded once, reported by finish) so callers can add many keys without
 * checking each call.
 */
#include "engine/gguf/gguf_write.h"
#include "engine/quant/quant.h"

#include <stdlib.h>
#include <string.h>

struct buf {
    uint8_t *p;
    size_t n, cap;
};

struct gguf_writer {
    uint32_t version, alignment;
    struct buf kv, ti, data;
    uint64_t n_kv, n_tensors;
    int failed; /* sticky: first error code */
    char why[200];
};

static int buf_put(struct buf *b, const void *p, size_t n)
{
    if (n > SIZE_MAX - b->n)
        return FOLIO_ENOMEM;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap = cap > SIZE_MAX / 2 ? b->n + n : cap * 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q)
            return FOLIO_ENOMEM;
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

static int put32(struct buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return buf_put(b, x, 4);
}

static int put64(struct buf *b, uint64_t v)
{
    int rc = put32(b, (uint32_t)v);
    return rc ? rc : put32(b, (uint32_t)(v >> 32));
}

static int put_str(struct buf *b, const char *s, size_t n)
{
    int rc = put64(b, n);
    return rc ? rc : buf_put(b, s, n);
}

static int fail(struct gguf_writer *w, int code, const char *why)
{
    if (!w->failed) {
        w->failed = code;
        snprintf(w->why, sizeof w->why, "%s", why);
    }
    return code;
}

int gguf_writer_new(uint32_t version, uint32_t alignment, struct gguf_writer **out,
                    struct folio_err *err)
{
    *out = NULL;
    if ((version != 2 && version != 3) || alignment == 0 || (alignment & (alignment - 1)))
        return folio_err_set(err, FOLIO_EINVAL, "GGUF writer: version %u / alignment %u invalid",
                             version, alignment);
    struct gguf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    w->version = version;
    w->alignment = alignment;
    *out = w;
    if (alignment != GGUF_DEFAULT_ALIGNMENT)
        gguf_w_u32(w, "general.alignment", alignment);
    return 0;
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w)
        return;
    free(w->kv.p);
    free(w->ti.p);
    free(w->data.p);
    free(w);
}

static int key_head(struct gguf_writer *w, const char *key, uint32_t type)
{
    if (w->failed)
        return w->failed;
    int rc = put_str(&w->kv, key, strlen(key));
    if (!rc)
        rc = put32(&w->kv, type);
    if (rc)
        return fail(w, rc, "out of memory");
    w->n_kv++;
    return 0;
}

static int scalar(struct gguf_writer *w, const char *key, uint32_t type, const void *v, size_t n)
{
    int rc = key_head(w, key, type);
    if (!rc && (rc = buf_put(&w->kv, v, n)) != 0)
        return fail(w, rc, "out of memory");
    return rc;
}

int gguf_w_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return scalar(w, key, GGUF_U32, x, 4);
}

int gguf_w_i32(struct gguf_writer *w, const char *key, int32_t v)
{
    uint32_t u = (uint32_t)v;
    uint8_t x[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    return scalar(w, key, GGUF_I32, x, 4);
}

int gguf_w_f32(struct gguf_writer *w, const char *key, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    uint8_t x[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    return scalar(w, key, GGUF_F32, x, 4);
}

int gguf_w_bool(struct gguf_writer *w, const char *key, int v)
{
    uint8_t x = v ? 1 : 0;
    return scalar(w, key, GGUF_BOOL, &x, 1);
}

int gguf_w_str(struct gguf_writer *w, const char *key, const char *v)
{
    int rc = key_head(w, key, GGUF_STRING);
    if (!rc && (rc = put_str(&w->kv, v, strlen(v))) != 0)
        return fail(w, rc, "out of memory");
    return rc;
}

static size_t elem_size(int t)
{
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

int gguf_w_array(struct gguf_writer *w, const char *key, int elem_type, const void *data,
                 uint64_t count)
{
    size_t es = elem_size(elem_type);
    if (!es)
        return fail(w, FOLIO_EINVAL, "gguf_w_array: element type not fixed-size");
    if (count > SIZE_MAX / es)
        return fail(w, FOLIO_EINVAL, "gguf_w_array: too many elements");
    int rc = key_head(w, key, GGUF_ARRAY);
    if (!rc)
        rc = put32(&w->kv, (uint32_t)elem_type);
    if (!rc)
        rc = put64(&w->kv, count);
    /* host is little-endian (see quant.c), so the caller's array is the encoding */
    if (!rc)
        rc = buf_put(&w->kv, data, (size_t)count * es);
    return rc ? fail(w, rc, "out of memory") : 0;
}

int gguf_w_array_str(struct gguf_writer *w, const char *key, const char *const *v, uint64_t count)
{
    int rc = key_head(w, key, GGUF_ARRAY);
    if (!rc)
        rc = put32(&w->kv, GGUF_STRING);
    if (!rc)
        rc = put64(&w->kv, count);
    for (uint64_t i = 0; i < count && !rc; i++)
        rc = put_str(&w->kv, v[i], strlen(v[i]));
    return rc ? fail(w, rc, "out of memory") : 0;
}

int gguf_w_raw(struct gguf_writer *w, const char *key, uint32_t type, const void *bytes, size_t n)
{
    return scalar(w, key, type, bytes, n);
}

int gguf_w_tensor(struct gguf_writer *w, const char *name, int type, uint32_t n_dims,
                  const uint64_t *ne, const void *data)
{
    if (w->failed)
        return w->failed;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS || !quant_in_gguf(type))
        return fail(w, FOLIO_EINVAL, "gguf_w_tensor: bad dims or type");
    uint64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++) {
        if (ne[d] && rows > UINT64_MAX / ne[d])
            return fail(w, FOLIO_EINVAL, "gguf_w_tensor: shape overflows");
        rows *= ne[d];
    }
    uint64_t row = quant_row_bytes(type, ne[0]);
    if (!row || rows > SIZE_MAX / row)
        return fail(w, FOLIO_EINVAL, "gguf_w_tensor: first dimension not a block multiple");
    size_t nbytes = (size_t)(row * rows);
    size_t pad = (w->alignment - w->data.n % w->alignment) % w->alignment;
    static const uint8_t zeros[64];
    int rc = 0;
    while (pad && !rc) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        rc = buf_put(&w->data, zeros, k);
        pad -= k;
    }
    uint64_t off = w->data.n;
    if (!rc)
        rc = buf_put(&w->data, data, nbytes);
    if (!rc)
        rc = put_str(&w->ti, name, strlen(name));
    if (!rc)
        rc = put32(&w->ti, n_dims);
    for (uint32_t d = 0; d < n_dims && !rc; d++)
        rc = put64(&w->ti, ne[d]);
    if (!rc)
        rc = put32(&w->ti, (uint32_t)type);
    if (!rc)
        rc = put64(&w->ti, off);
    if (rc)
        return fail(w, rc, "out of memory");
    w->n_tensors++;
    return 0;
}

int gguf_w_finish(struct gguf_writer *w, uint8_t **out, size_t *out_len, struct folio_err *err)
{
    *out = NULL;
    *out_len = 0;
    if (w->failed)
        return folio_err_set(err, w->failed, "GGUF writer: %s", w->why);
    struct buf b = {0};
    int rc = buf_put(&b, "GGUF", 4);
    if (!rc)
        rc = put32(&b, w->version);
    if (!rc)
        rc = put64(&b, w->n_tensors);
    if (!rc)
        rc = put64(&b, w->n_kv);
    if (!rc)
        rc = buf_put(&b, w->kv.p, w->kv.n);
    if (!rc)
        rc = buf_put(&b, w->ti.p, w->ti.n);
    if (!rc && w->n_tensors) {
        static const uint8_t zeros[64];
        size_t pad = (w->alignment - b.n % w->alignment) % w->alignment;
        while (pad && !rc) {
            size_t k = pad < sizeof zeros ? pad : sizeof zeros;
            rc = buf_put(&b, zeros, k);
            pad -= k;
        }
        if (!rc)
            rc = buf_put(&b, w->data.p, w->data.n);
    }
    if (rc) {
        free(b.p);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory finishing a GGUF file");
    }
    *out = b.p;
    *out_len = b.n;
    return 0;
}

int gguf_w_write_file(struct gguf_writer *w, const char *path, struct folio_err *err)
{
    uint8_t *p;
    size_t n;
    int rc = gguf_w_finish(w, &p, &n, err);
    if (rc)
        return rc;
    rc = folio_write_file_atomic(path, p, n, err);
    free(p);
    return rc;
}
