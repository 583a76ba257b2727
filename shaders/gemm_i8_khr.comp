#version 450
// gemm_cm.glsl on folio's int8 rows (--gpu-weights int8) through
// GL_KHR_cooperative_matrix's 16x16x32 int8 -> int32 subgroup matrices:
// the int8 GEMM where a device has no workgroup-scope ones (AMD, Intel,
// lavapipe 26), and beside gemm_i8_cm2.comp where it has both (op_matmul.c
// takes the faster per product class).
#extension GL_KHR_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#define GEMM_I8
#define CM_A coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA>
#define CM_B coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB>
#define CM_C coopmat<int32_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define CM_ZERO CM_C(0)
#define CM_LOAD_ROWS(m, buf, off, st) coopMatLoad(m, buf, off, st, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOAD_COLS(m, buf, off, st) coopMatLoad(m, buf, off, st, gl_CooperativeMatrixLayoutColumnMajor)
#define CM_MAD(a, b, c) coopMatMulAdd(a, b, c)
#define CM_STORE_ROWS(m, buf, off, st) coopMatStore(m, buf, off, st, gl_CooperativeMatrixLayoutRowMajor)
#include "gemm_cm.glsl"
