#version 450
// gemm_cm.glsl on GL_NV_cooperative_matrix (Debian 12's glslc compiles it).
#extension GL_NV_cooperative_matrix : require
#define CM_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define CM_B fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define CM_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define CM_LOAD_ROWS(m, buf, off, st) coopMatLoadNV(m, buf, off, st, false)
#define CM_LOAD_COLS(m, buf, off, st) coopMatLoadNV(m, buf, off, st, true)
#define CM_MAD(a, b, c) coopMatMulAddNV(a, b, c)
#define CM_STORE_ROWS(m, buf, off, st) coopMatStoreNV(m, buf, off, st, false)
#include "gemm_cm.glsl"
