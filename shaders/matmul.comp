#version 450
// Y[m][c0+n] = sum_k X[m][k] W[n][k] (+ bias[n]): the tiled shared-memory
// kernel for many activation rows (prefill, vision). A 64x64 output tile
// per workgroup, K in steps of 32 (one Q8_0 block, one K-quant sub-block),
// 256 threads each owning a 4x4 micro-tile strided by 16 so that shared
// memory reads are conflict-free. Weights are dequantized to f32 as they
// are staged; accumulation is f32 throughout. Rows whose length is not a
// multiple of 4 (float weights only) are staged element by element.
#extension GL_EXT_control_flow_attributes : enable
layout(constant_id = 0) const uint DTYPE = 0;
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer BW { uint W[]; };
layout(std430, binding = 1) readonly buffer BX { vec4 X4[]; };
layout(std430, binding = 1) readonly buffer BX1 { float X1[]; };
layout(std430, binding = 2) buffer BY { float Y[]; };
layout(std430, binding = 3) readonly buffer BB { float B[]; };
layout(push_constant) uniform P {
    uint K, N, M, w_skip, row_bytes, x_skip, y_skip, ldy, y_col0, b_skip, has_bias;
} p;

#include "dq.glsl"

#define BM 64
#define BN 64
#define BK 32
shared float sA[BK][BM + 1];
shared float sB[BK][BN + 1];

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint tx = t & 15u, ty = t >> 4;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    uint k4n = p.K >> 2;
    float acc[4][4];
    [[unroll]] for (uint i = 0; i < 4u; i++)
        [[unroll]] for (uint j = 0; j < 4u; j++)
            acc[i][j] = 0.0;
    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        [[unroll]] for (uint q = 0; q < 2u; q++) {
            uint idx = t + 256u * q;
            uint r = idx >> 3, kq = (idx & 7u) * 4u;
            uint k = k0 + kq;
            vec4 w = vec4(0), x = vec4(0);
            if ((p.K & 3u) == 0u) {
                if (n0 + r < p.N && k < p.K)
                    w = dq4(p.w_skip + (n0 + r) * p.row_bytes, k);
                if (m0 + r < p.M && k < p.K)
                    x = X4[(p.x_skip >> 2) + (m0 + r) * k4n + (k >> 2)];
            } else {
                [[unroll]] for (uint i = 0; i < 4u; i++) {
                    if (n0 + r < p.N && k + i < p.K)
                        w[i] = dq1(p.w_skip + (n0 + r) * p.row_bytes, k + i);
                    if (m0 + r < p.M && k + i < p.K)
                        x[i] = X1[p.x_skip + (m0 + r) * p.K + k + i];
                }
            }
            [[unroll]] for (uint i = 0; i < 4u; i++) {
                sB[kq + i][r] = w[i];
                sA[kq + i][r] = x[i];
            }
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; kk++) {
            float a[4], b[4];
            [[unroll]] for (uint i = 0; i < 4u; i++) {
                a[i] = sA[kk][ty + 16u * i];
                b[i] = sB[kk][tx + 16u * i];
            }
            [[unroll]] for (uint i = 0; i < 4u; i++)
                [[unroll]] for (uint j = 0; j < 4u; j++)
                    acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
    [[unroll]] for (uint i = 0; i < 4u; i++) {
        uint m = m0 + ty + 16u * i;
        if (m >= p.M)
            continue;
        [[unroll]] for (uint j = 0; j < 4u; j++) {
            uint n = n0 + tx + 16u * j;
            if (n < p.N) {
                float v = acc[i][j];
                if (p.has_bias != 0u)
                    v += B[p.b_skip + n];
                Y[p.y_skip + m * p.ldy + p.y_col0 + n] = v;
            }
        }
    }
}
