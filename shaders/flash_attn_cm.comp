#version 450
// Flash attention on the tensor cores through GL_NV_cooperative_matrix
// (f16 16x16x16 -> f32; the only cooperative-matrix route Debian 12's
// glslc compiles). Same contract as attention.comp: O = softmax(scale *
// Q K^T + mask) V with causal and/or per-query key ranges, grouped-query
// heads, per-token strides into fused buffers, zeros for rows that see no
// key. The score matrix is never materialised: a workgroup keeps 16 * NW
// query rows and walks K/V tiles of BC keys with an f32 online softmax.
//
// Workgroup: NW subgroups of 32 lanes (4 or 8, the workgroup size is
// specialised), each owning 16 query rows. Per tile:
//   S = Q K^T       Q fragments stay in registers for the whole walk (f16,
//                   pre-scaled by scale * log2(e) so the softmax uses exp2)
//   softmax         on a shared f32 copy of S: the element layout of a
//                   fragment is implementation-defined, so row max / sum
//                   are done by lanes on shared memory (lane = row & half)
//   O = a O + P V   P written as f16 to shared and reloaded as an A matrix;
//                   the per-row rescale a uses a "row map" fragment (each
//                   element holds its own row index, loaded once): element-
//                   wise ops between fragments of one type are defined on
//                   matching matrix elements, so component i of the row map
//                   names the row of component i of every accumulator.
// A subgroup skips the math of tiles outside its own rows' key ranges, so
// windowed and causal layers cost about what they see.
//
// Element types (IO): 0 all f32, 1 q/k/v/o f16, 2 k/v f16 with q/o f32
// (the text model's f16 KV cache); read and written in pairs (every offset
// and stride even; the op checks). Accumulation is f32;
// Q, K, V and P are rounded to f16 for the products (the f16 policy).
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
layout(constant_id = 0) const uint D = 128;     // head size: multiple of 16, <= 128
layout(constant_id = 1) const uint BC = 32;     // keys per tile: 32 or 64
layout(constant_id = 2) const uint IO = 0;      // 0 f32, 1 all f16, 2 k/v f16
layout(local_size_x = 128, local_size_x_id = 3) in; // 32 * NW threads

layout(std430, binding = 0) readonly buffer BQ { vec2 Q2[]; };
layout(std430, binding = 0) readonly buffer BQh { uint Qh[]; };
layout(std430, binding = 1) readonly buffer BK { vec2 K2[]; };
layout(std430, binding = 1) readonly buffer BKh { uint Kh[]; };
layout(std430, binding = 2) readonly buffer BV { vec2 V2[]; };
layout(std430, binding = 2) readonly buffer BVh { uint Vh[]; };
layout(std430, binding = 3) writeonly buffer BO { vec2 O2[]; };
layout(std430, binding = 3) writeonly buffer BOh { uint Oh[]; };
layout(std430, binding = 4) readonly buffer BR_ { uint Rg[]; };
layout(push_constant) uniform P {
    uint Tq, Tk, Hq, Hkv, qs, ks, vs, os;
    float scale;
    uint causal, has_ranges;
    int kv_off;
} p;

#define NW (gl_WorkGroupSize.x / 32u) // subgroups per workgroup
#define BR (NW * 16u)     // query rows per workgroup
#define DS (D + 8u)       // f16 row stride of the K/V tiles (16-byte steps, no bank conflicts)
#define SS (BC + 4u)      // f32 row stride of a subgroup's S tile
#define PS (BC + 8u)      // f16 row stride of a subgroup's P tile (also Q staging)
#define NEG (-3.402823466e38)
#define LOG2E 1.4426950408889634
#define F16M fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define F32M fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

shared float16_t sK[BC * DS];
shared float16_t sV[BC * DS];
shared float sS[NW * 16u * SS];
shared float16_t sP[NW * 16u * PS];
shared float sRow[BR];          // per-row rescale factor, at the end 1 / row sum
shared uint sLo[NW], sHi[NW];   // each subgroup's union of visible keys

#define QO_F16 (IO == 1u)
#define KV_F16 (IO != 0u)
vec2 ld_q(uint e) { return QO_F16 ? unpackHalf2x16(Qh[e >> 1]) : Q2[e >> 1]; }
vec2 ld_k(uint e) { return KV_F16 ? unpackHalf2x16(Kh[e >> 1]) : K2[e >> 1]; }
vec2 ld_v(uint e) { return KV_F16 ? unpackHalf2x16(Vh[e >> 1]) : V2[e >> 1]; }

void main()
{
    uint t = gl_LocalInvocationID.x, sg = t >> 5, lane = t & 31u;
    uint q0 = gl_WorkGroupID.x * BR, h = gl_WorkGroupID.y;
    uint kvh = h / (p.Hq / p.Hkv);
    uint rb = sg * 16u;                  // this subgroup's first row in the block
    uint myr = lane & 15u, hf = lane >> 4; // softmax: lane's row and half of the tile
    uint sbase = sg * 16u * SS, pbase = sg * 16u * PS;

    // The visible keys [lo, hi) of the lane's row.
    uint qi = q0 + rb + myr, lo = 0u, hi = 0u;
    if (qi < p.Tq) {
        hi = p.Tk;
        if (p.has_ranges != 0u) {
            lo = Rg[2u * qi];
            hi = min(Rg[2u * qi + 1u], p.Tk);
        }
        if (p.causal != 0u)
            hi = min(hi, uint(max(int(qi) + p.kv_off + 1, 0)));
    }
    bool sees = hi > lo;
    uint slo = subgroupMin(sees ? lo : 0xffffffffu), shi = subgroupMax(sees ? hi : 0u);
    if (lane == 0u) {
        sLo[sg] = slo;
        sHi[sg] = shi;
    }

    // Q fragments: staged 16 columns at a time through this subgroup's P
    // tile, scaled so that S is already in the log2 domain.
    float qscale = p.scale * float(LOG2E);
    F16M qf[8];
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
        if (j < D / 16u) {
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                uint pi = lane + 32u * i, r = pi >> 3, c = (pi & 7u) * 2u, q = q0 + rb + r;
                vec2 x = q < p.Tq ? ld_q(q * p.qs + h * D + j * 16u + c) * qscale : vec2(0);
                sP[pbase + r * PS + c] = float16_t(x.x);
                sP[pbase + r * PS + c + 1u] = float16_t(x.y);
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            coopMatLoadNV(qf[j], sP, pbase, PS, false);
            subgroupBarrier();
        }
    }
    // Row map: element (r, c) = r, loaded as an accumulator-type fragment.
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint e = lane + 32u * i;
        sS[sbase + e] = float(e >> 4);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    F32M rowm;
    coopMatLoadNV(rowm, sS, sbase, 16u, false);
    subgroupBarrier();

    F32M oacc[8];
    [[unroll]] for (uint j = 0u; j < 8u; j++)
        if (j < D / 16u)
            oacc[j] = F32M(0.0);
    float m = NEG, l = 0.0;
    barrier();
    uint kmin = p.Tk, kmax = 0u;
    [[unroll]] for (uint w = 0u; w < 8u; w++)
        if (w < NW && sHi[w] > sLo[w]) {
            kmin = min(kmin, sLo[w]);
            kmax = max(kmax, sHi[w]);
        }
    uint mylo = slo, myhi = shi;

    for (uint k0 = kmin; k0 < kmax; k0 += BC) {
        for (uint e = t; e < BC * (D / 2u); e += gl_WorkGroupSize.x) {
            uint c = e / (D / 2u), d = (e % (D / 2u)) * 2u, kk = k0 + c;
            vec2 kv = vec2(0), vv = vec2(0);
            if (kk < p.Tk) {
                kv = ld_k(kk * p.ks + kvh * D + d);
                vv = ld_v(kk * p.vs + kvh * D + d);
            }
            sK[c * DS + d] = float16_t(kv.x);
            sK[c * DS + d + 1u] = float16_t(kv.y);
            sV[c * DS + d] = float16_t(vv.x);
            sV[c * DS + d + 1u] = float16_t(vv.y);
        }
        barrier();
        // Subgroup-uniform: skip the math when none of its rows sees the tile.
        if (k0 < myhi && k0 + BC > mylo) {
            [[unroll]] for (uint n = 0u; n < 4u; n++) {
                if (n < BC / 16u) {
                    F32M s = F32M(0.0);
                    [[unroll]] for (uint j = 0u; j < 8u; j++) {
                        if (j < D / 16u) {
                            F16M kb;
                            coopMatLoadNV(kb, sK, n * 16u * DS + j * 16u, DS, true);
                            s = coopMatMulAddNV(qf[j], kb, s);
                        }
                    }
                    coopMatStoreNV(s, sS, sbase + n * 16u, SS, false);
                }
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();

            // Online softmax of row myr over columns [hf * BC/2, (hf+1) * BC/2).
            float sv[32];
            float mx = NEG;
            uint c0 = hf * (BC / 2u);
            [[unroll]] for (uint i = 0u; i < 32u; i++) {
                if (i < BC / 2u) {
                    uint kk = k0 + c0 + i;
                    float s = sS[sbase + myr * SS + c0 + i];
                    s = kk >= lo && kk < hi ? s : NEG;
                    sv[i] = s;
                    mx = max(mx, s);
                }
            }
            mx = max(mx, subgroupShuffleXor(mx, 16u));
            float mnew = max(m, mx);
            float alpha = 1.0, sum = 0.0;
            bool live = mnew != NEG;
            if (live)
                alpha = exp2(m - mnew);
            [[unroll]] for (uint i = 0u; i < 32u; i++) {
                if (i < BC / 2u) {
                    float pv = live && sv[i] != NEG ? exp2(sv[i] - mnew) : 0.0;
                    sum += pv;
                    sP[pbase + myr * PS + c0 + i] = float16_t(pv);
                }
            }
            sum += subgroupShuffleXor(sum, 16u);
            l = l * alpha + sum;
            m = mnew;
            if (hf == 0u)
                sRow[rb + myr] = alpha;
            subgroupMemoryBarrierShared();
            subgroupBarrier();

            F32M am = rowm;
            for (int i = 0; i < am.length(); i++)
                am[i] = sRow[rb + uint(rowm[i])];
            F16M pa[4];
            [[unroll]] for (uint kc = 0u; kc < 4u; kc++)
                if (kc < BC / 16u)
                    coopMatLoadNV(pa[kc], sP, pbase + kc * 16u, PS, false);
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                if (j < D / 16u) {
                    for (int i = 0; i < am.length(); i++)
                        oacc[j][i] *= am[i];
                    [[unroll]] for (uint kc = 0u; kc < 4u; kc++) {
                        if (kc < BC / 16u) {
                            F16M vb;
                            coopMatLoadNV(vb, sV, kc * 16u * DS + j * 16u, DS, false);
                            oacc[j] = coopMatMulAddNV(pa[kc], vb, oacc[j]);
                        }
                    }
                }
            }
        }
        barrier();
    }

    // Normalise by the row sums and write through shared (bounds checks,
    // strides, f16 packing).
    if (hf == 0u)
        sRow[rb + myr] = l > 0.0 ? 1.0 / l : 0.0;
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    F32M inv = rowm;
    for (int i = 0; i < inv.length(); i++)
        inv[i] = sRow[rb + uint(rowm[i])];
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
        if (j < D / 16u) {
            for (int i = 0; i < inv.length(); i++)
                oacc[j][i] *= inv[i];
            coopMatStoreNV(oacc[j], sS, sbase, SS, false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                uint pi = lane + 32u * i, r = pi >> 3, c = (pi & 7u) * 2u, q = q0 + rb + r;
                if (q < p.Tq) {
                    vec2 v = vec2(sS[sbase + r * SS + c], sS[sbase + r * SS + c + 1u]);
                    uint e = q * p.os + h * D + j * 16u + c;
                    if (QO_F16)
                        Oh[e >> 1] = packHalf2x16(v);
                    else
                        O2[e >> 1] = v;
                }
            }
            subgroupBarrier();
        }
    }
}
