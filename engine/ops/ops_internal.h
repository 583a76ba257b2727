/* Helpers shared by the op files; not part of the ops API. */
#ifndef FOLIO_OPS_INTERNAL_H
#define FOLIO_OPS_INTERNAL_H

#include "engine/ops/ops.h"

/* Pipeline id for (shader, spec...) — fails cleanly after seal. */
int ops_pipe(struct vkr *vk, const char *shader, uint32_t nspec, const uint32_t *spec,
             uint32_t *id, struct folio_err *err);
/* ops_pipe for a key an op's ops_*_key function made. */
int ops_pipe_key(struct vkr *vk, struct vkr_pipeline_key k, uint32_t *id, struct folio_err *err);
/* 1 on a CPU device (lavapipe): its workgroups run as SIMD lanes, and LLVM
 * compiles each pipeline variant at its first dispatch, so several ops pick
 * smaller workgroups or tiles there. */
int ops_on_cpu(const struct vkr *vk);
/* Splits a workgroup count over x and y (x <= 65535, the guaranteed limit). */
void ops_grid(uint64_t groups, uint32_t *gx, uint32_t *gy);
/* Binds the first bytes of a tensor whole; fails if over the binding range. */
int ops_bind(const struct vkr *vk, struct vkr_tensor t, uint64_t bytes, struct vkr_bind *b,
             const char *what, struct folio_err *err);
/* Fails unless the tensor holds at least bytes. */
int ops_need(struct vkr_tensor t, uint64_t bytes, const char *what, struct folio_err *err);
/* Rows per dispatch so that every binding of rows of these widths fits. */
uint64_t ops_rows_per(const struct vkr *vk, const uint64_t *row_bytes, int n);
/* A row-wise conversion (dequant_f16.comp, quant_rows.comp): rows of xrb
 * bytes of x into rows of yrb bytes of y with key's pipeline, one workgroup
 * per row, in as many dispatches as the binding range takes. Push
 * constants {rows, k, xrb, x's byte offset, y's offset in y_unit-byte
 * units}; what names the op in errors and as the dispatch label. */
int ops_rows_convert(struct vkr_cmd *c, struct vkr_pipeline_key key, struct vkr_tensor x,
                     uint64_t xrb, struct vkr_tensor y, uint64_t yrb, uint32_t y_unit, uint32_t rows,
                     uint32_t k, const char *what, struct folio_err *err);

/* Query rows from which AUTO attention takes the tensor-core kernel (a label
 * pass's few dozen rows run faster on the scalar one: op_attention.c). */
#define OPS_ATTN_TC_MIN_TQ 128u
/* An attention's element types (enum op_attn_io) from its f16 / kv_f16. */
int op_attention_io(const struct op_attention *a);

/* ---- the GEMM's tile configurations, for `bench ops` (bench/engine) ----
 * Every configuration that fits the device's shared memory (all_configs),
 * at most 12 keys per configuration; op_matmul.gemm_config picks one. */
int ops_gemm_keys_all(const struct vkr *vk, int all_configs, struct vkr_pipeline_key *out);
/* Configuration c's keys as ops_gemm_keys_all(all_configs) lists them (f16
 * inputs, f32 outputs, each load width): a benchmark that measures a few
 * configurations pre-warms only those. At most 3 keys. */
int ops_gemm_config_keys(const struct vkr *vk, int config, struct vkr_pipeline_key *out);
int ops_gemm_configs(void);
/* AUTO's rule for the K-fixed workgroup-scope GEMM: 1 when a product of m
 * rows, n outputs and K = k takes it (where the device has it and the model
 * pre-warmed that K). Monotone in m and n, so pre-warm asks it with the
 * tallest pass and a K's widest product (ops_gemm_keys_for_k). */
int ops_gemm_k_fixed_rule(uint32_t m, uint32_t n, uint32_t k);
/* "128x128/8w-64x32/bk32/s2" (tile / subgroups-subgroup tile / K step /
 * stages, "+math-only" for probes); "auto" for -1. */
void ops_gemm_config_name(int config, char *out, size_t n);
int ops_gemm_config_fits(const struct vkr *vk, int config);
/* What a configuration's results are: *acc16 = K columns per f16-accumulated
 * chunk (0: f32 accumulation), *probe = 1 for measurement-only variants
 * whose results are not valid, *k_mult = the multiple of K (and of the row
 * offsets, in elements) it needs, or -K for a configuration built for that
 * one K. */
void ops_gemm_config_info(int config, int *acc16, int *probe, int *k_mult);
/* op_matmul's own kernels' keys (matvec / tiled / cooperative-matrix
 * matmul, the f16 expansion, the split-K sum), for its dispatch and the
 * pre-warm list alike. */
uint32_t ops_matvec_rows(const struct vkr *vk);
struct vkr_pipeline_key ops_mm_key(const struct vkr *vk, enum op_mm_kernel kern, int wtype);
struct vkr_pipeline_key ops_dequant_key(int wtype);
struct vkr_pipeline_key ops_splitk_key(int f16_out);
/* ---- the int8 route ---- */
/* op_quant_rows's key for inputs of xtype (op_quant.c). */
struct vkr_pipeline_key ops_quant_rows_key(const struct vkr *vk, int xtype);
/* The int8 GEMM's keys (op_matmul.c): the activations' quantization, the
 * split-K sum, and each class's AUTO tile K-fixed at each of the nk K in ks
 * with f32 outputs and the nk16 in ks16 with f16 outputs (the split-K
 * partials' f32 form at ks for the class AUTO splits); with no K given, its
 * forms with K from the push constants instead (a model lists every K its
 * products read, so those would only cost compiles: 30 of the 80 s the
 * int8 GEMM's pipelines took on the H200); none where
 * ops_gemm_i8_available is 0. Writes at most 4 + 8 * (nk + nk16 + 3). */
int ops_gemm_i8_keys(const struct vkr *vk, const uint32_t *ks, int nk, const uint32_t *ks16,
                     int nk16, struct vkr_pipeline_key *out);
/* bench ops: the int8 GEMM's tile configurations (FOLIO_GEMM_I8_TILE picks
 * one for AUTO) and every one's keys, with K from the push constants and
 * (f32 outputs and split K) fixed at each of the nk K in ks (at most 2 + (3 + 2 * nk) *
 * configurations). */
int ops_gemm_i8_configs(void);
/* AUTO's int8 product class (op_matmul.c: 0 wide, 1 very wide or many
 * tiles, 2 few rows or columns, 3 a few hundred rows, 4 class 0's where
 * 160-row tiles take fewer waves, below K 8192) of an m x n x k product on a device of units
 * multiprocessors (0: not known), the warm-up's override tiles
 * (enum op_mm_tiles). Pure: the op tests hold the rule without a device. */
int ops_gemm_i8_class(uint32_t m, uint32_t n, uint32_t k, uint32_t units, int tiles);
void ops_gemm_i8_config_name(int config, char *out, size_t n);
int ops_gemm_i8_config_fits(const struct vkr *vk, int config);
int ops_gemm_i8_keys_all(const struct vkr *vk, const uint32_t *ks, int nk, struct vkr_pipeline_key *out);
/* Configuration c's keys as ops_gemm_i8_keys_all lists them: at most
 * 3 * (nk + 1). */
int ops_gemm_i8_config_keys(const struct vkr *vk, int config, const uint32_t *ks, int nk,
                            struct vkr_pipeline_key *out);

#endif
