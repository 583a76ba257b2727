#version 450
// Fused flash-style attention: O = softmax(scale * Q K^T + mask) V without
// materialising the score matrix (vision attention reaches N = 5-20k
// tokens; a full N x N f32 matrix is gigabytes). Online softmax in f32.
//
// Layout: q[t][Hq][D], k/v[t][Hkv][D], o[t][Hq][D] with per-token strides;
// grouped-query heads map query head h to KV head h / (Hq / Hkv).
// Masks: causal (key j visible to query i when j <= i + kv_off) and/or
// per-query key ranges from a buffer: has_ranges 1 gives each query one
// range [lo, hi) (uint pairs), which is how block-diagonal window
// attention is expressed; has_ranges 2 gives it two, [lo0, hi0) and
// [lo1, hi1) (uint quadruples; a key is visible in either), which is how
// a label row sees the prompt's slots and its own label's slots of the KV
// cache without copying them together. A workgroup visits only the union
// of its queries' first ranges and, separately, the union of their
// second ones (a label block skips the other pages' prompts between its
// prompt and its label slots), so windowed layers cost O(N * w). Rows with
// no visible key produce zeros.
//
// Split K ("flash-decoding"): a pass of a few query blocks against many
// keys (a label pass: 3 blocks x 28 heads on a 132-multiprocessor GPU)
// leaves most of the device idle. With nsplit > 1 the workgroups along z
// each take a contiguous share of their block's key tiles and write a
// partial result instead of O: the output normalised by its own sum (f32,
// packed [z][q][h][d]) and that share's log-sum-exp (binding 5, [z][q][h];
// NEG for no visible key); attn_combine.comp merges the shares.
//
// Workgroup: BR = 16 queries of one head, K/V tiles of BC keys padded to
// D+1 floats per key (bank-conflict free), 256 threads. This is the path
// for devices without cooperative matrices (and lavapipe); the op picks BC
// (32, 16 or 8) from the head size so that the tiles fit the device's
// shared memory. Any even head size up to 256: each thread accumulates
// output pairs (d, d+1), at most 8 pairs (16 x 256 / 2 / 256).
//
// Element types (IO): 0 all f32, 1 q/k/v/o f16, 2 k/v f16 with q/o f32
// (the text model's f16 KV cache). f16 is read through a uint view and
// unpacked, so no 16-bit storage feature is needed; elements move in pairs
// (the op checks that offsets and strides are even). Math in f32.
#extension GL_EXT_control_flow_attributes : enable
layout(constant_id = 0) const uint D = 128;     // even, <= 256
layout(constant_id = 1) const uint BC = 32;     // keys per tile
layout(constant_id = 2) const uint IO = 0;      // 0 f32, 1 all f16, 2 k/v f16
layout(local_size_x = 256) in;
// One 32-bit view per binding (no aliased declarations: lavapipe leaks on
// those at pipeline creation).
layout(std430, binding = 0) readonly buffer BQ { uint Qw[]; };
layout(std430, binding = 1) readonly buffer BK { uint Kw[]; };
layout(std430, binding = 2) readonly buffer BV { uint Vw[]; };
layout(std430, binding = 3) writeonly buffer BO { uint Ow[]; };
layout(std430, binding = 4) readonly buffer BR_ { uint Rg[]; };
layout(std430, binding = 5) writeonly buffer BL { float Lp[]; }; // nsplit > 1 only
layout(push_constant) uniform P {
    uint Tq, Tk, Hq, Hkv, qs, ks, vs, os;
    float scale;
    uint causal, has_ranges;
    int kv_off;
    uint nsplit;
} p;

#define BR 16u
#define NPAIR 8u   // output pairs per thread: BR * 256 / 2 / 256
#define DP (D + 1u)
#define NEG (-3.402823466e38)
shared float sQ[BR * D];
shared float sKV[BC * DP];
#define SP (BC + 1u)
shared float sS[BR * SP];   // scores, then weights; row stride SP
shared float sM[BR], sL[BR], sAlpha[BR];
shared uint sLo[BR], sHi[BR], sLo1[BR], sHi1[BR];
shared uint sU[4]; // the block's two key unions [sU0, sU1) and [sU2, sU3)

#define QO_F16 (IO == 1u)
#define KV_F16 (IO != 0u)
// Element pairs (e even): one word of f16 or two words of f32.
#define LD2(H, W, e) (H ? unpackHalf2x16(W[(e) >> 1]) \
                        : vec2(uintBitsToFloat(W[e]), uintBitsToFloat(W[(e) + 1u])))
vec2 ld_q(uint e) { return LD2(QO_F16, Qw, e); }
vec2 ld_k(uint e) { return LD2(KV_F16, Kw, e); }
vec2 ld_v(uint e) { return LD2(KV_F16, Vw, e); }

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint q0 = gl_WorkGroupID.x * BR, h = gl_WorkGroupID.y;
    uint kvh = h / (p.Hq / p.Hkv);
    for (uint e = t; e < BR * (D / 2u); e += 256u) {
        uint r = e / (D / 2u), d = (e % (D / 2u)) * 2u, q = q0 + r;
        vec2 x = q < p.Tq ? ld_q(q * p.qs + h * D + d) * p.scale : vec2(0);
        sQ[r * D + d] = x.x;
        sQ[r * D + d + 1u] = x.y;
    }
    if (t < BR) {
        uint q = q0 + t, lo = 0u, hi = 0u, lo1 = 0u, hi1 = 0u;
        if (q < p.Tq) {
            hi = p.Tk;
            if (p.has_ranges == 1u) {
                lo = Rg[2u * q];
                hi = min(Rg[2u * q + 1u], p.Tk);
            } else if (p.has_ranges == 2u) {
                lo = Rg[4u * q];
                hi = min(Rg[4u * q + 1u], p.Tk);
                lo1 = Rg[4u * q + 2u];
                hi1 = min(Rg[4u * q + 3u], p.Tk);
            }
            if (p.causal != 0u) {
                uint lim = uint(max(int(q) + p.kv_off + 1, 0));
                hi = min(hi, lim);
                hi1 = min(hi1, lim);
            }
        }
        sLo[t] = lo;
        sHi[t] = hi;
        sLo1[t] = lo1;
        sHi1[t] = hi1;
        sM[t] = NEG;
        sL[t] = 0.0;
    }
    barrier();
    if (t == 0u) {
        uint a0 = p.Tk, a1 = 0u, b0 = p.Tk, b1 = 0u;
        for (uint r = 0u; r < BR; r++) {
            if (sHi[r] > sLo[r]) {
                a0 = min(a0, sLo[r]);
                a1 = max(a1, sHi[r]);
            }
            if (sHi1[r] > sLo1[r]) {
                b0 = min(b0, sLo1[r]);
                b1 = max(b1, sHi1[r]);
            }
        }
        // Unions that overlap or touch are one walk (no key visited twice);
        // an empty first union leaves the second alone.
        if (a1 <= a0) {
            a0 = b0;
            a1 = b1;
            b0 = b1 = 0u;
        } else if (b1 > b0 && b0 <= a1 && a0 <= b1) {
            a0 = min(a0, b0);
            a1 = max(a1, b1);
            b0 = b1 = 0u;
        }
        sU[0] = a0;
        sU[1] = max(a1, a0);
        sU[2] = b0;
        sU[3] = max(b1, b0);
    }
    barrier();
    // The block's key tiles: first union's, then the second's; split z
    // takes a contiguous share, the first nt % S shares one tile more.
    uint ua0 = sU[0], ua1 = sU[1], ub0 = sU[2], ub1 = sU[3];
    uint na = (ua1 - ua0 + BC - 1u) / BC, nb = (ub1 - ub0 + BC - 1u) / BC, nt = na + nb;
    uint z = gl_WorkGroupID.z, S = max(p.nsplit, 1u);
    uint tile0 = z * (nt / S) + min(z, nt % S);
    uint tile1 = tile0 + nt / S + (z < nt % S ? 1u : 0u);
    // Output pairs owned by this thread: pair e -> row e / (D/2), column 2 (e % (D/2)).
    vec2 o[NPAIR];
    [[unroll]] for (uint i = 0u; i < NPAIR; i++)
        o[i] = vec2(0);
    for (uint ti = tile0; ti < tile1; ti++) {
        // a tile stops at its union's end: keys past it belong to the other
        // union's tiles (or to nobody)
        uint k0 = ti < na ? ua0 + ti * BC : ub0 + (ti - na) * BC;
        uint kend = ti < na ? ua1 : ub1;
        for (uint e = t; e < BC * (D / 2u); e += 256u) {
            uint c = e / (D / 2u), d = (e % (D / 2u)) * 2u, kk = k0 + c;
            vec2 x = kk < kend ? ld_k(kk * p.ks + kvh * D + d) : vec2(0);
            sKV[c * DP + d] = x.x;
            sKV[c * DP + d + 1u] = x.y;
        }
        barrier();
        for (uint e = t; e < BR * BC; e += 256u) {
            uint r = e / BC, c = e % BC, kk = k0 + c;
            float s = NEG;
            if (kk < kend && ((kk >= sLo[r] && kk < sHi[r]) || (kk >= sLo1[r] && kk < sHi1[r]))) {
                s = 0.0;
                for (uint d = 0u; d < D; d++)
                    s += sQ[r * D + d] * sKV[c * DP + d];
            }
            sS[r * SP + c] = s;
        }
        barrier();
        if (t < BR) {
            float mold = sM[t], mx = mold;
            for (uint c = 0u; c < BC; c++)
                mx = max(mx, sS[t * SP + c]);
            float alpha = 1.0;
            if (mx == NEG) {
                for (uint c = 0u; c < BC; c++)
                    sS[t * SP + c] = 0.0;
            } else {
                alpha = exp(mold - mx);
                float sum = 0.0;
                for (uint c = 0u; c < BC; c++) {
                    float s = sS[t * SP + c];
                    float pv = s == NEG ? 0.0 : exp(s - mx);
                    sS[t * SP + c] = pv;
                    sum += pv;
                }
                sL[t] = sL[t] * alpha + sum;
                sM[t] = mx;
            }
            sAlpha[t] = alpha;
        }
        barrier();
        for (uint e = t; e < BC * (D / 2u); e += 256u) {
            uint c = e / (D / 2u), d = (e % (D / 2u)) * 2u, kk = k0 + c;
            vec2 x = kk < kend ? ld_v(kk * p.vs + kvh * D + d) : vec2(0);
            sKV[c * DP + d] = x.x;
            sKV[c * DP + d + 1u] = x.y;
        }
        barrier();
        [[unroll]] for (uint i = 0u; i < NPAIR; i++) {
            uint e = t + 256u * i;
            if (e < BR * (D / 2u)) {
                uint r = e / (D / 2u), d = (e % (D / 2u)) * 2u;
                vec2 acc = o[i] * sAlpha[r];
                for (uint c = 0u; c < BC; c++)
                    acc += sS[r * SP + c] * vec2(sKV[c * DP + d], sKV[c * DP + d + 1u]);
                o[i] = acc;
            }
        }
        barrier();
    }
    if (S > 1u && t < BR && q0 + t < p.Tq) // this share's log-sum-exp
        Lp[(z * p.Tq + q0 + t) * p.Hq + h] = sL[t] > 0.0 ? sM[t] + log(sL[t]) : NEG;
    [[unroll]] for (uint i = 0u; i < NPAIR; i++) {
        uint e = t + 256u * i;
        if (e < BR * (D / 2u)) {
            uint r = e / (D / 2u), d = (e % (D / 2u)) * 2u, q = q0 + r;
            if (q < p.Tq) {
                vec2 v = sL[r] > 0.0 ? o[i] / sL[r] : vec2(0);
                if (S > 1u) { // a partial: f32, packed
                    uint pe = ((z * p.Tq + q) * p.Hq + h) * D + d;
                    Ow[pe] = floatBitsToUint(v.x);
                    Ow[pe + 1u] = floatBitsToUint(v.y);
                    continue;
                }
                uint oe = q * p.os + h * D + d;
                if (QO_F16) {
                    Ow[oe >> 1] = packHalf2x16(v);
                } else {
                    Ow[oe] = floatBitsToUint(v.x);
                    Ow[oe + 1u] = floatBitsToUint(v.y);
                }
            }
        }
    }
}
