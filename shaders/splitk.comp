#version 450
// Split-K reduction: Y = epilogue(sum over s of P[s]), the slices the
// GEMM wrote when it split K (gemm_cm.glsl, op_matmul.c). The slices are
// added in order 0, 1, ... so a result does not depend on which workgroup
// finished first. One thread per pair of output columns of a row.
#extension GL_EXT_control_flow_attributes : enable

layout(constant_id = 0) const uint YTYPE = 0; // 0: Y f32, 1: Y f16 (N even)
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer BP { float P[]; };
layout(std430, binding = 2) buffer BY { float Y[]; };
layout(std430, binding = 2) buffer BYH { uint YH[]; };
layout(std430, binding = 3) readonly buffer BB { float B[]; };
layout(std430, binding = 4) readonly buffer BR { float R[]; };
layout(push_constant) uniform PC {
    uint M, N;    // rows and columns of this dispatch
    uint S;       // slices
    uint p_skip;  // floats before slice 0 in P; slice s row m at p_skip + s * M * N + m * N
    uint y_skip;  // elements before row 0 of Y
    uint ldy;     // Y (and R) row stride in elements
    uint y_col0;  // first Y column written by this dispatch
    uint b_skip;  // floats before bias[0] of this dispatch's columns
    uint r_skip;  // floats before R's row 0
    uint flags;   // as gemm_cm.glsl
} p;

#include "gemm_epi.glsl"

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    uint half_n = (p.N + 1u) / 2u;
    if (i >= p.M * half_n)
        return;
    uint m = i / half_n, n = (i % half_n) * 2u;
    bool two = n + 1u < p.N;
    uint at = p.p_skip + m * p.N + n, step = p.M * p.N;
    vec2 o = vec2(0.0);
    for (uint s = 0u; s < p.S; s++) {
        o.x += P[at + s * step];
        if (two)
            o.y += P[at + s * step + 1u];
    }
    o.x = gemm_epi(o.x, m, n);
    if (two)
        o.y = gemm_epi(o.y, m, n + 1u);
    uint yo = p.y_skip + m * p.ldy + p.y_col0 + n;
    if (YTYPE == 0u) {
        Y[yo] = o.x;
        if (two)
            Y[yo + 1u] = o.y;
    } else {
        YH[yo >> 1] = packHalf2x16(o);
    }
}
