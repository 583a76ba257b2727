#version 450
// Tensor-core matmul through GL_NV_cooperative_matrix (the only
// cooperative-matrix route Debian 12's glslc compiles; docs/reference/vulkan.md
// §6). Built only when the configure-time probe passes and used only on
// devices exposing VK_NV_cooperative_matrix with f16 16x16x16 -> f32.
//
// Y[m][c0+n] = sum_k X[m][k] W[n][k] (+ bias[n]). A 128x128 output tile per
// workgroup of 8 subgroups (32 lanes), each owning 32x64 = 2x4 fragments.
// K advances by 32: X is converted to f16 and W dequantized (any GGUF
// type, dq.glsl) to f16 while staged in shared memory; accumulation is
// f32. Results go through a per-subgroup shared tile so that the edges
// are bounds-checked and the bias added. f16 staging of activations
// bounds the relative error of each product by ~2^-11.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
layout(constant_id = 0) const uint DTYPE = 0;
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer BW { uint W[]; };
layout(std430, binding = 1) readonly buffer BX { vec4 X4[]; };
layout(std430, binding = 2) buffer BY { float Y[]; };
layout(std430, binding = 3) readonly buffer BB { float B[]; };
layout(push_constant) uniform P {
    uint K, N, M, w_skip, row_bytes, x_skip, y_skip, ldy, y_col0, b_skip, has_bias;
} p;

#include "dq.glsl"

#define BM 128u
#define BN 128u
#define BK 32u
#define SK 40u   // padded row stride (f16 elements) of the staged tiles
shared float16_t sA[BM * SK];
shared float16_t sB[BN * SK];
shared float sC[8u * 256u];

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint warp = t / 32u, lane = t % 32u;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    uint wm = (warp >> 1) * 32u, wn = (warp & 1u) * 64u;
    uint k4n = p.K >> 2;
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][4];
    [[unroll]] for (uint i = 0; i < 2u; i++)
        [[unroll]] for (uint j = 0; j < 4u; j++)
            acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        // 128 rows x 8 groups of 4 = 1024 vec4 per operand, 4 per thread
        [[unroll]] for (uint q = 0; q < 4u; q++) {
            uint idx = t + 256u * q;
            uint r = idx >> 3, kq = (idx & 7u) * 4u, k = k0 + kq;
            vec4 x = vec4(0), w = vec4(0);
            if (m0 + r < p.M && k < p.K)
                x = X4[(p.x_skip >> 2) + (m0 + r) * k4n + (k >> 2)];
            if (n0 + r < p.N && k < p.K)
                w = dq4(p.w_skip + (n0 + r) * p.row_bytes, k);
            [[unroll]] for (uint i = 0; i < 4u; i++) {
                sA[r * SK + kq + i] = float16_t(x[i]);
                sB[r * SK + kq + i] = float16_t(w[i]);
            }
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; kk += 16u) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[2], b[4];
            [[unroll]] for (uint i = 0; i < 2u; i++)
                coopMatLoadNV(a[i], sA, (wm + 16u * i) * SK + kk, SK, false);
            [[unroll]] for (uint j = 0; j < 4u; j++)
                coopMatLoadNV(b[j], sB, (wn + 16u * j) * SK + kk, SK, true);
            [[unroll]] for (uint i = 0; i < 2u; i++)
                [[unroll]] for (uint j = 0; j < 4u; j++)
                    acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0; i < 2u; i++)
        [[unroll]] for (uint j = 0; j < 4u; j++) {
            coopMatStoreNV(acc[i][j], sC, warp * 256u, 16u, false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            [[unroll]] for (uint e = 0; e < 8u; e++) {
                uint idx = lane + 32u * e, r = idx >> 4, c = idx & 15u;
                uint m = m0 + wm + 16u * i + r, n = n0 + wn + 16u * j + c;
                if (m < p.M && n < p.N) {
                    float v = sC[warp * 256u + idx];
                    if (p.has_bias != 0u)
                        v += B[p.b_skip + n];
                    Y[p.y_skip + m * p.ldy + p.y_col0 + n] = v;
                }
            }
            subgroupBarrier();
        }
}
