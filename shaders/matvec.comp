#version 450
// y[m][c0+n] = W[n] . x[m] (+ bias[n]) for few activation rows (M <= 8):
// the decode path, bound by weight bandwidth. One workgroup per weight
// row; threads stride over K four elements at a time and reduce through
// shared memory (portable: no subgroup features needed). Rows whose length
// is not a multiple of 4 (float weights only) take a scalar loop over the
// same buffer bound as floats.
#extension GL_EXT_control_flow_attributes : enable
layout(constant_id = 0) const uint DTYPE = 0;
layout(constant_id = 1) const uint WG = 128;
layout(local_size_x_id = 1) in;

layout(std430, binding = 0) readonly buffer BW { uint W[]; };
layout(std430, binding = 1) readonly buffer BX { vec4 X4[]; };
layout(std430, binding = 1) readonly buffer BX1 { float X1[]; };
layout(std430, binding = 2) buffer BY { float Y[]; };
layout(std430, binding = 3) readonly buffer BB { float B[]; };
layout(push_constant) uniform P {
    uint K, N, M, w_skip, row_bytes, x_skip, y_skip, ldy, y_col0, b_skip, has_bias;
} p;

#include "dq.glsl"

shared float red[8][WG];

void main()
{
    uint n = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (n >= p.N)
        return;
    uint t = gl_LocalInvocationID.x;
    uint row = p.w_skip + n * p.row_bytes;
    float acc[8] = float[8](0, 0, 0, 0, 0, 0, 0, 0);
    uint k4n = p.K >> 2;
    if ((p.K & 3u) == 0u) {
        for (uint k4 = t; k4 < k4n; k4 += WG) {
            vec4 w = dq4(row, k4 * 4u);
            [[unroll]] for (uint m = 0; m < 8u; m++)
                if (m < p.M)
                    acc[m] += dot(w, X4[(p.x_skip >> 2) + m * k4n + k4]);
        }
    } else {
        for (uint k = t; k < p.K; k += WG) {
            float w = dq1(row, k);
            [[unroll]] for (uint m = 0; m < 8u; m++)
                if (m < p.M)
                    acc[m] += w * X1[p.x_skip + m * p.K + k];
        }
    }
    [[unroll]] for (uint m = 0; m < 8u; m++)
        red[m][t] = acc[m];
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s)
            [[unroll]] for (uint m = 0; m < 8u; m++)
                red[m][t] += red[m][t + s];
        barrier();
    }
    if (t < p.M) {
        float v = red[t][0];
        if (p.has_bias != 0u)
            v += B[p.b_skip + n];
        Y[p.y_skip + t * p.ldy + p.y_col0 + n] = v;
    }
}
