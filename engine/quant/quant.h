/*
 * quant — GGUF tensor types: block layouts, reference (de)quantisation.
 * The C references here are the truth that the Vulkan matmul shaders are
 * tested against, and the quantisers let tests and benches make models of
 * any shape without downloads. Layouts follow GGUF / ggml exactly.
 */
#ifndef FOLIO_QUANT_H
#define FOLIO_QUANT_H

#include "common/common.h"

#include <stdint.h>

/* Values are the GGUF on-disk type ids (ggml_type). */
enum quant_type {
    QUANT_F32 = 0,
    QUANT_F16 = 1,
    QUANT_Q8_0 = 8,
    QUANT_Q4_K = 12,
    QUANT_Q5_K = 13,
    QUANT_Q6_K = 14,
    QUANT_BF16 = 30,
    /* folio's own, never in a GGUF file (quant_in_gguf): int8 rows with one
     * f32 scale each (--gpu-weights int8 and the int8 GEMM's activations).
     * A row of n elements (n a multiple of QUANT_I8R_ALIGN) is a 16-byte
     * header, whose first 4 bytes are the scale s (the rest zero), then n
     * signed bytes q: element i = q[i] * s, with s = max|x| / 127 over the
     * row, so rows keep 16-byte alignment and a row's scale travels with
     * it through ranged bindings. */
    QUANT_I8R = 256,
};
#define QUANT_I8R_ALIGN 16
#define QUANT_I8R_HEADER 16

/* Name as llama.cpp prints it ("q4_K"), or NULL for an id folio does not support. */
const char *quant_type_name(int type);
int quant_supported(int type);
/* Supported and a type GGUF files carry (QUANT_I8R is folio's own). */
int quant_in_gguf(int type);
/* Elements per block (1 for F32/F16/BF16, 32 for Q8_0, 256 for K-quants)
 * and bytes per block; 0 for unsupported types. */
int quant_block_elems(int type);
int quant_block_bytes(int type);
/* Bytes for a row of n elements; n must be a multiple of the block size
 * (returns 0 otherwise or on overflow). QUANT_I8R: n + its row header. */
uint64_t quant_row_bytes(int type, uint64_t n);

/* n elements (multiple of the block size). Return 0 or FOLIO_EINVAL. */
int quant_dequantize_row(int type, const void *src, float *dst, int64_t n);
int quant_quantize_row(int type, const float *src, void *dst, int64_t n);

/* IEEE half and bfloat16 conversions (round to nearest even). */
float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);
float quant_bf16_to_f32(uint16_t h);
uint16_t quant_f32_to_bf16(float f);

#endif
