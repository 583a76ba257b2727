#version 450
// Fused flash-style attention: O = softmax(scale * Q K^T + mask) V without
// materialising the score matrix (vision attention reaches N = 5-20k
// tokens; a full N x N f32 matrix is gigabytes). Online softmax in f32.
//
// Layout: q[t][Hq][D], k/v[t][Hkv][D], o[t][Hq][D] with per-token strides;
// grouped-query heads map query head h to KV head h / (Hq / Hkv).
// Masks: causal (key j visible to query i when j <= i + kv_off) and/or a
// per-query key range [lo, hi) from a buffer of uint pairs, which is how
// block-diagonal window attention is expressed. A workgroup visits only
// the union of its queries' key ranges, so windowed layers cost O(N * w).
// Rows with no visible key produce zeros.
//
// Workgroup: BR = 16 queries of one head, K/V tiles of BC = 32 keys padded
// to D+1 floats per key (bank-conflict free), 256 threads.
#extension GL_EXT_control_flow_attributes : enable
layout(constant_id = 0) const uint D = 128;
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer BQ { float Qb[]; };
layout(std430, binding = 1) readonly buffer BK { float Kb[]; };
layout(std430, binding = 2) readonly buffer BV { float Vb[]; };
layout(std430, binding = 3) writeonly buffer BO { float Ob[]; };
layout(std430, binding = 4) readonly buffer BR_ { uint Rg[]; };
layout(push_constant) uniform P {
    uint Tq, Tk, Hq, Hkv, qs, ks, vs, os;
    float scale;
    uint causal, has_ranges;
    int kv_off;
} p;

#define BR 16u
#define BC 32u
#define DP (D + 1u)
#define NEG (-3.402823466e38)
shared float sQ[BR * D];
shared float sKV[BC * DP];
shared float sS[BR][BC + 1u];
shared float sM[BR], sL[BR], sAlpha[BR];
shared uint sLo[BR], sHi[BR];
shared uint sKmin, sKmax;

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint q0 = gl_WorkGroupID.x * BR, h = gl_WorkGroupID.y;
    uint kvh = h / (p.Hq / p.Hkv);
    for (uint e = t; e < BR * D; e += 256u) {
        uint r = e / D, d = e % D, q = q0 + r;
        sQ[e] = q < p.Tq ? Qb[q * p.qs + h * D + d] * p.scale : 0.0;
    }
    if (t < BR) {
        uint q = q0 + t, lo = 0u, hi = 0u;
        if (q < p.Tq) {
            hi = p.Tk;
            if (p.has_ranges != 0u) {
                lo = Rg[2u * q];
                hi = min(Rg[2u * q + 1u], p.Tk);
            }
            if (p.causal != 0u)
                hi = min(hi, uint(max(int(q) + p.kv_off + 1, 0)));
        }
        sLo[t] = lo;
        sHi[t] = hi;
        sM[t] = NEG;
        sL[t] = 0.0;
    }
    barrier();
    if (t == 0u) {
        uint kmin = p.Tk, kmax = 0u;
        for (uint r = 0u; r < BR; r++)
            if (sHi[r] > sLo[r]) {
                kmin = min(kmin, sLo[r]);
                kmax = max(kmax, sHi[r]);
            }
        sKmin = kmin;
        sKmax = kmax;
    }
    barrier();
    uint kmin = sKmin, kmax = sKmax;
    float o[8] = float[8](0, 0, 0, 0, 0, 0, 0, 0);
    for (uint k0 = kmin; k0 < kmax; k0 += BC) {
        for (uint e = t; e < BC * D; e += 256u) {
            uint c = e / D, d = e % D, kk = k0 + c;
            sKV[c * DP + d] = kk < p.Tk ? Kb[kk * p.ks + kvh * D + d] : 0.0;
        }
        barrier();
        for (uint e = t; e < BR * BC; e += 256u) {
            uint r = e / BC, c = e % BC, kk = k0 + c;
            float s = NEG;
            if (kk >= sLo[r] && kk < sHi[r]) {
                s = 0.0;
                for (uint d = 0u; d < D; d++)
                    s += sQ[r * D + d] * sKV[c * DP + d];
            }
            sS[r][c] = s;
        }
        barrier();
        if (t < BR) {
            float mold = sM[t], mx = mold;
            for (uint c = 0u; c < BC; c++)
                mx = max(mx, sS[t][c]);
            float alpha = 1.0;
            if (mx == NEG) {
                for (uint c = 0u; c < BC; c++)
                    sS[t][c] = 0.0;
            } else {
                alpha = exp(mold - mx);
                float sum = 0.0;
                for (uint c = 0u; c < BC; c++) {
                    float s = sS[t][c];
                    float pv = s == NEG ? 0.0 : exp(s - mx);
                    sS[t][c] = pv;
                    sum += pv;
                }
                sL[t] = sL[t] * alpha + sum;
                sM[t] = mx;
            }
            sAlpha[t] = alpha;
        }
        barrier();
        for (uint e = t; e < BC * D; e += 256u) {
            uint c = e / D, d = e % D, kk = k0 + c;
            sKV[c * DP + d] = kk < p.Tk ? Vb[kk * p.vs + kvh * D + d] : 0.0;
        }
        barrier();
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            uint e = t + 256u * i;
            if (e < BR * D) {
                uint r = e / D, d = e % D;
                float acc = o[i] * sAlpha[r];
                for (uint c = 0u; c < BC; c++)
                    acc += sS[r][c] * sKV[c * DP + d];
                o[i] = acc;
            }
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint e = t + 256u * i;
        if (e < BR * D) {
            uint r = e / D, d = e % D, q = q0 + r;
            if (q < p.Tq)
                Ob[q * p.os + h * D + d] = sL[r] > 0.0 ? o[i] / sL[r] : 0.0;
        }
    }
}
