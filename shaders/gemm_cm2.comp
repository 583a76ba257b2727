#version 450
// gemm_cm2.glsl with f16 inputs.
#include "gemm_cm2.glsl"
