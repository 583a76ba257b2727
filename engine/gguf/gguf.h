/*
 * gguf — the model-file reader: a hardened, mmap-based parser for GGUF
 * v2/v3 containers. The module's other faces have headers of their own:
 * gguf_model.h (the Qwen2-VL / Qwen3-VL file checks that turn a container
 * into hyper-parameters plus the list of tensors the engine uploads),
 * gguf_write.h (a small writer: tests and benches make models of any shape
 * without downloads) and gguf_describe.h (what `folio doctor` prints).
 *
 * Files are untrusted input: every count, length, offset and size is checked
 * against the file before use, and a malformed file is an FOLIO_EFORMAT error
 * naming the byte offset and the field, never a crash. A well-formed file
 * that is not the model folio expects is FOLIO_EMODEL naming the first
 * mismatch.
 *
 * Strings inside GGUF are length-prefixed, not NUL-terminated; they are
 * returned as struct gguf_str views into the mapping (valid until
 * gguf_close). Keys and tensor names are copied and NUL-terminated, since
 * callers look them up by C string.
 */
#ifndef FOLIO_GGUF_H
#define FOLIO_GGUF_H

#include "common/common.h"

#include <stddef.h>
#include <stdint.h>

/* Metadata value types: GGUF on-disk ids. */
enum gguf_vtype {
    GGUF_U8 = 0,
    GGUF_I8 = 1,
    GGUF_U16 = 2,
    GGUF_I16 = 3,
    GGUF_U32 = 4,
    GGUF_I32 = 5,
    GGUF_F32 = 6,
    GGUF_BOOL = 7,
    GGUF_STRING = 8,
    GGUF_ARRAY = 9,
    GGUF_U64 = 10,
    GGUF_I64 = 11,
    GGUF_F64 = 12,
};

/* Reader limits: far above any real model, low enough that a hostile header
 * cannot make the reader allocate or loop without bound before the
 * file-size checks catch it. */
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 63          /* tensor-name bytes, as ggml (GGML_MAX_NAME - 1) */
#define GGUF_MAX_KEY 65535        /* metadata-key bytes */
#define GGUF_MAX_ARRAY_DEPTH 4    /* arrays of arrays of ... */
#define GGUF_MAX_TENSORS (1u << 20) /* real models: a few thousand */
#define GGUF_MAX_KV (1u << 20)
#define GGUF_DEFAULT_ALIGNMENT 32

struct gguf_str {
    const char *p; /* not NUL-terminated */
    uint64_t n;
};

struct gguf_file;
struct gguf_value;

struct gguf_tensor_info {
    const char *name;     /* NUL-terminated copy */
    int type;             /* enum quant_type (only supported types get this far) */
    uint32_t n_dims;      /* 1..GGUF_MAX_DIMS */
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] fastest; unused dims are 1 */
    uint64_t n_elems;
    uint64_t offset;      /* relative to the data section, as stored */
    uint64_t file_offset; /* absolute byte offset in the file */
    uint64_t n_bytes;
    const void *data;     /* into the mapping */
};

/* ---- opening ---- */
/* Maps the file read-only and parses it completely; every later accessor is
 * then bounds-safe. */
int gguf_open(const char *path, struct gguf_file **out, struct folio_err *err);
/* Parses a caller-owned buffer (not copied; must outlive the handle). */
int gguf_open_memory(const void *data, size_t size, struct gguf_file **out,
                     struct folio_err *err);
void gguf_close(struct gguf_file *f);

const char *gguf_path(const struct gguf_file *f); /* "<memory>" for buffers */
uint32_t gguf_version(const struct gguf_file *f);
uint64_t gguf_file_size(const struct gguf_file *f);
uint32_t gguf_alignment(const struct gguf_file *f);
uint64_t gguf_data_offset(const struct gguf_file *f);

/* ---- metadata ---- */
uint64_t gguf_kv_count(const struct gguf_file *f);
const char *gguf_kv_key(const struct gguf_file *f, uint64_t i);
const struct gguf_value *gguf_kv_value(const struct gguf_file *f, uint64_t i);
const struct gguf_value *gguf_find(const struct gguf_file *f, const char *key);
const char *gguf_vtype_name(int type); /* "u32", "array", ... or NULL */

int gguf_value_type(const struct gguf_value *v);
/* Arrays: element type and count (0 / 0 for non-arrays). */
int gguf_array_type(const struct gguf_value *v);
uint64_t gguf_array_len(const struct gguf_value *v);
/* Element i of an array of arrays, or NULL when out of range / not nested. */
const struct gguf_value *gguf_array_elem(const struct gguf_value *v, uint64_t i);
/* Numeric element i converted to the asked-for representation; returns 0 or
 * FOLIO_EINVAL when i is out of range, the element type is not numeric, or
 * the value does not fit (negative into unsigned, > INT64_MAX into signed). */
int gguf_array_i64(const struct gguf_value *v, uint64_t i, int64_t *out);
int gguf_array_f64(const struct gguf_value *v, uint64_t i, double *out);
/* String element i (FOLIO_EINVAL when not an array of strings / out of range). */
int gguf_array_str(const struct gguf_value *v, uint64_t i, struct gguf_str *out);
/* Scalar value views (FOLIO_EINVAL on type mismatch). */
int gguf_value_i64(const struct gguf_value *v, int64_t *out); /* any integer or bool */
int gguf_value_f64(const struct gguf_value *v, double *out);  /* any number */
int gguf_value_str(const struct gguf_value *v, struct gguf_str *out);

/* Typed getters by key. Missing key or wrong type → FOLIO_EMODEL with a
 * message naming the key, the expected and the actual type. Integer getters
 * accept any integer type whose value fits (files in the wild write i32 where
 * u32 is meant); float getters accept f32 and f64. */
int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out, struct folio_err *err);
int gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out, struct folio_err *err);
int gguf_get_f32(const struct gguf_file *f, const char *key, float *out, struct folio_err *err);
int gguf_get_bool(const struct gguf_file *f, const char *key, int *out, struct folio_err *err);
int gguf_get_str(const struct gguf_file *f, const char *key, struct gguf_str *out,
                 struct folio_err *err);
/* An array whose element type is elem_type (or any integer type when
 * elem_type is GGUF_I64, any number for GGUF_F64); -1 accepts any. */
int gguf_get_array(const struct gguf_file *f, const char *key, int elem_type,
                   const struct gguf_value **out, struct folio_err *err);
/* Optional variants: absent key → *out = dflt and 0; wrong type still fails. */
int gguf_get_u32_or(const struct gguf_file *f, const char *key, uint32_t dflt, uint32_t *out,
                    struct folio_err *err);
int gguf_get_f32_or(const struct gguf_file *f, const char *key, float dflt, float *out,
                    struct folio_err *err);
int gguf_get_bool_or(const struct gguf_file *f, const char *key, int dflt, int *out,
                     struct folio_err *err);
/* True when s equals the C string z. */
int gguf_str_eq(struct gguf_str s, const char *z);

/* ---- tensors ---- */
uint64_t gguf_tensor_count(const struct gguf_file *f);
const struct gguf_tensor_info *gguf_tensor(const struct gguf_file *f, uint64_t i);
const struct gguf_tensor_info *gguf_find_tensor(const struct gguf_file *f, const char *name);
/* Name of a ggml type id as llama.cpp prints it, including types folio
 * does not support ("q4_0"), or NULL for ids ggml never had. */
const char *gguf_ggml_type_name(int type);

#endif
