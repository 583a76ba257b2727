#version 450
// y[m][c0+n] = W[n] . x[m] (+ bias[n]) for few activation rows (M <= 8):
// the decode path and the LM head of a label pass, bound by memory. A
// workgroup takes NR consecutive weight rows; threads stride over K four
// elements at a time and reduce through shared memory (portable: no
// subgroup features needed). Every workgroup reads all M activation rows
// once, so with NR = 1 a 152k-row LM head re-reads them 152k times (L1/L2
// traffic of M x K x 4 bytes per weight row, ~60x the weights' own bytes
// at K = 3584, M = 8); NR > 1 shares each activation load among NR weight
// rows. Rows whose length is not a multiple of 4 (float weights only) take
// a scalar loop over the same buffer bound as floats.
#extension GL_EXT_control_flow_attributes : enable
layout(constant_id = 0) const uint DTYPE = 0;
layout(constant_id = 1) const uint WG = 128;
layout(constant_id = 2) const uint NR = 1; // weight rows per workgroup (<= 8)
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

shared float red[8 * NR][WG];

void main()
{
    uint n0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * NR;
    if (n0 >= p.N)
        return;
    uint t = gl_LocalInvocationID.x;
    float acc[NR][8];
    [[unroll]] for (uint r = 0; r < NR; r++)
        [[unroll]] for (uint m = 0; m < 8u; m++)
            acc[r][m] = 0.0;
    // rows past N (the last workgroup) re-read row n0: in bounds, never stored
    uint rowb[NR];
    [[unroll]] for (uint r = 0; r < NR; r++)
        rowb[r] = p.w_skip + (n0 + r < p.N ? n0 + r : n0) * p.row_bytes;
    uint k4n = p.K >> 2;
    if ((p.K & 3u) == 0u) {
        for (uint k4 = t; k4 < k4n; k4 += WG) {
            vec4 w[NR];
            [[unroll]] for (uint r = 0; r < NR; r++)
                w[r] = dq4(rowb[r], k4 * 4u);
            [[unroll]] for (uint m = 0; m < 8u; m++)
                if (m < p.M) {
                    vec4 x = X4[(p.x_skip >> 2) + m * k4n + k4];
                    [[unroll]] for (uint r = 0; r < NR; r++)
                        acc[r][m] += dot(w[r], x);
                }
        }
    } else {
        for (uint k = t; k < p.K; k += WG) {
            float w[NR];
            [[unroll]] for (uint r = 0; r < NR; r++)
                w[r] = dq1(rowb[r], k);
            [[unroll]] for (uint m = 0; m < 8u; m++)
                if (m < p.M) {
                    float x = X1[p.x_skip + m * p.K + k];
                    [[unroll]] for (uint r = 0; r < NR; r++)
                        acc[r][m] += w[r] * x;
                }
        }
    }
    [[unroll]] for (uint r = 0; r < NR; r++)
        [[unroll]] for (uint m = 0; m < 8u; m++)
            red[r * 8u + m][t] = acc[r][m];
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s)
            [[unroll]] for (uint i = 0; i < 8u * NR; i++)
                red[i][t] += red[i][t + s];
        barrier();
    }
    // thread i < 8 NR stores (weight row i / 8, activation row i % 8)
    for (uint i = t; i < 8u * NR; i += WG) {
        uint r = i / 8u, m = i % 8u, n = n0 + r;
        if (m < p.M && n < p.N) {
            float v = red[i][0];
            if (p.has_bias != 0u)
                v += B[p.b_skip + n];
            Y[p.y_skip + m * p.ldy + p.y_col0 + n] = v;
        }
    }
}
