#version 450
// gemm_cm2.glsl on folio's int8 rows (--gpu-weights int8): int8 x int8
// products accumulated in int32, scaled per row and column in the epilogue.
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_8bit_storage : require
#define GEMM_I8
#include "gemm_cm2.glsl"
