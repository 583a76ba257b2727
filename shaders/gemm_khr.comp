#version 450
// gemm_cm.glsl on GL_KHR_cooperative_matrix: the same kernel for every
// vendor that offers 16x16x16 f16 -> f32 subgroup matrices.
#extension GL_KHR_cooperative_matrix : require
#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define CM_LOAD_ROWS(m, buf, off, st) coopMatLoad(m, buf, off, st, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOAD_COLS(m, buf, off, st) coopMatLoad(m, buf, off, st, gl_CooperativeMatrixLayoutColumnMajor)
#define CM_MAD(a, b, c) coopMatMulAdd(a, b, c)
#define CM_STORE_ROWS(m, buf, off, st) coopMatStore(m, buf, off, st, gl_CooperativeMatrixLayoutRowMajor)
#include "gemm_cm.glsl"
