/*
 * gguf — the model-file module: a hardened, mmap-based reader for GGUF v2/v3
 * containers, a small writer (tests and benches make models of any shape
 * without downloads), and the Qwen2-VL / Qwen2.5-VL file checks that turn a
 * container into hyper-parameters plus the list of tensors the engine uploads.
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

#include <stdint.h>
#include <stdio.h>

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

/* ---- writer ---- */
struct gguf_writer;
/* version 2 or 3; alignment a power of two (written as general.alignment
 * when not 32). */
int gguf_writer_new(uint32_t version, uint32_t alignment, struct gguf_writer **out,
                    struct folio_err *err);
void gguf_writer_free(struct gguf_writer *w);
int gguf_w_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_w_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_w_f32(struct gguf_writer *w, const char *key, float v);
int gguf_w_bool(struct gguf_writer *w, const char *key, int v);
int gguf_w_str(struct gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size elements (u8..f64, bool): count elements at data. */
int gguf_w_array(struct gguf_writer *w, const char *key, int elem_type, const void *data,
                 uint64_t count);
int gguf_w_array_str(struct gguf_writer *w, const char *key, const char *const *v, uint64_t count);
/* A key with an already-encoded value (type id + bytes), for nested arrays
 * and for tests that need malformed values. */
int gguf_w_raw(struct gguf_writer *w, const char *key, uint32_t type, const void *bytes, size_t n);
/* Adds a tensor; data (n_bytes of it, computed from type and shape) is
 * copied. ne has n_dims entries. */
int gguf_w_tensor(struct gguf_writer *w, const char *name, int type, uint32_t n_dims,
                  const uint64_t *ne, const void *data);
/* The whole file, malloc'd. */
int gguf_w_finish(struct gguf_writer *w, uint8_t **out, size_t *out_len, struct folio_err *err);
int gguf_w_write_file(struct gguf_writer *w, const char *path, struct folio_err *err);

/* ---- Qwen2-VL / Qwen2.5-VL model files ---- */
/* Text architectures (general.architecture): qwen2vl (Qwen2-VL, Qwen2.5-VL)
 * and qwen3vl (Qwen3-VL dense: per-head q/k RMSNorm, no q/k/v biases, a
 * head size of its own, interleaved M-RoPE, DeepStack inputs). */
enum gguf_text_family { GGUF_TEXT_QWEN2VL = 0, GGUF_TEXT_QWEN3VL = 3 };

struct gguf_text_hparams {
    enum gguf_text_family family;
    uint32_t n_deepstack;   /* Qwen3-VL: layers 0..n-1 add a DeepStack row at image tokens */
    uint32_t n_vocab;       /* token_embd rows */
    uint32_t n_tokens;      /* tokenizer.ggml.tokens length (<= n_vocab) */
    uint32_t n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim, n_ctx_train;
    float rope_theta, rms_eps;
    int32_t mrope_sections[4];
    int tied_output;        /* no output.weight: the LM head is token_embd */
    int32_t bos_id, eos_id, pad_id; /* -1 when absent */
};

enum gguf_vision_kind { GGUF_VISION_QWEN2VL = 2, GGUF_VISION_QWEN25VL = 25, GGUF_VISION_QWEN3VL = 3 };
#define GGUF_MAX_DEEPSTACK 8

struct gguf_vision_hparams {
    enum gguf_vision_kind kind;
    uint32_t n_embd, n_layer, n_head, head_dim, n_ff; /* n_ff from tensor shapes */
    uint32_t patch_size, spatial_merge, proj_dim, merger_dim;
    uint32_t n_wa_pattern, window_size; /* 0 / 0 for Qwen2-VL */
    int use_silu;                        /* SwiGLU (2.5) vs quick-GELU MLP (2) */
    int ffn_swapped;                     /* legacy file with ffn_up/down names swapped */
    float eps;
    float image_mean[3], image_std[3];
    /* Qwen3-VL: learned position table of n_pos = side^2 rows (interpolated
     * to the patch grid), DeepStack mergers after these blocks (ascending) */
    uint32_t n_pos, pos_side;
    uint32_t n_deepstack, deepstack_layers[GGUF_MAX_DEEPSTACK];
};

/* One tensor the engine must upload (or, for host tensors, keep mapped). */
struct gguf_load_item {
    const struct gguf_tensor_info *t;
    int on_host; /* token_embd: rows gathered on the CPU per request */
};

/* A key the file lacks whose value folio supplied: `folio doctor` lists
 * each as "assumed" so that no default is silent. */
#define GGUF_MAX_ASSUMED 12
struct gguf_assumed {
    const char *key;  /* static string */
    char value[32];   /* as printed */
    const char *why;  /* where the value comes from */
};

struct gguf_model {
    struct gguf_file *file;
    struct gguf_assumed assumed[GGUF_MAX_ASSUMED];
    uint32_t n_assumed;
    uint32_t n_ignored;    /* keys in the file folio does not read (debug-logged) */
    int is_vision;
    struct gguf_text_hparams text;
    struct gguf_vision_hparams vision;
    struct gguf_load_item *items;
    uint64_t n_items;
    uint64_t device_bytes; /* sum over device tensors, each rounded up to 256 B */
    uint64_t host_bytes;
};

/* Opens path and checks it is a Qwen2-VL / Qwen3-VL text model (architecture qwen2vl / qwen3vl)
 * with every expected tensor in the right dtype and shape. */
int gguf_model_open_text(const char *path, struct gguf_model **out, struct folio_err *err);
/* Same for an mmproj (clip, projector qwen2vl_merger / qwen2.5vl_merger /
 * qwen3vl_merger). */
int gguf_model_open_vision(const char *path, struct gguf_model **out, struct folio_err *err);
/* The distinct types of the model's 2-D device tensors (the matmul
 * pipelines pre-warm needs), appended to types[0..n) without repeats, at
 * most max in all; returns the new count. */
int gguf_model_matrix_types(const struct gguf_model *m, int *types, int n, int max);
/* The checks alone, on an already-open file (takes ownership of f on success
 * and on failure). */
int gguf_model_check(struct gguf_file *f, int vision, struct gguf_model **out,
                     struct folio_err *err);
void gguf_model_close(struct gguf_model *m);
/* Device bytes the model's matrices (2-D device tensors) take once
 * expanded to f16 (--gpu-weights). */
uint64_t gguf_model_matrix_f16_bytes(const struct gguf_model *m);
/* 1 when folio reads this key (or it is general.* metadata); the checks
 * debug-log and count every other key and otherwise ignore it. */
int gguf_key_used(const char *key);

/* What `folio doctor --model F` / `--mmproj F` prints: container summary,
 * architecture, hyper-parameters, dtypes per tensor group and the device
 * memory the weights need. The kind (text / mmproj) is taken from
 * general.architecture. json: one JSON object on one line. When the file
 * fails the checks, the error goes to err, and what could be read is still
 * printed (a "check" field says why it failed). */
int gguf_describe(const char *path, int json, FILE *out, struct folio_err *err);

#endif
