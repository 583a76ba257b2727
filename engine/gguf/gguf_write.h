/*
 * gguf_write — a small GGUF writer (gguf_write.c): tests and benches make
 * model files of any shape in memory or on disk without downloads, and
 * tests write malformed ones on purpose (gguf_w_raw). The reader is
 * gguf.h; what it writes reads back through gguf_open / gguf_open_memory.
 */
#ifndef FOLIO_GGUF_WRITE_H
#define FOLIO_GGUF_WRITE_H

#include "engine/gguf/gguf.h" /* enum gguf_vtype: the element types of arrays */

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

#endif
