#version 450
// Flash attention on the tensor cores through GL_NV_cooperative_matrix
// (f16 16x16x16 -> f32; the only cooperative-matrix route Debian 12's
// glslc compiles). Same contract as attention.comp: O = softmax(scale *
// Q K^T + mask) V with causal and/or per-query key ranges (one or two per
// query: a label row sees its page's prompt slots and its own label's
// slots), grouped-query heads, per-token strides into fused buffers, zeros
// for rows that see no key, and split K into partials that attn_combine.comp
// merges. The score matrix is never materialised: a workgroup keeps 16 * NW
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
// windowed and causal layers cost about what they see. With two ranges the
// workgroup walks the union of its rows' first ranges and, separately, the
// union of their second ones, as attention.comp does (a label block skips
// the other pages' prompts between its page and its label slots).
//
// Split K (a label pass: one block of rows per head against a whole page
// leaves most multiprocessors idle): with nsplit > 1 the workgroups along z
// each take a contiguous share of the block's key tiles and write what
// attention.comp's split writes: the output normalised by the share's own
// sum (f32, packed [z][q][h][d]) and the share's natural log-sum-exp
// (binding 5, [z][q][h]; NEG for no visible key).
//
// Packed heads (pack = 1, a label pass): the G = Hq / Hkv query heads that
// share a KV head are rows of one pass: workgroup y is the KV head and row
// R of its pass is query R / G of head kvh * G + R % G, so each K/V tile is
// loaded once for all of them and a few dozen queries fill the blocks.
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
layout(std430, binding = 5) writeonly buffer BL { float Lp[]; }; // nsplit > 1 only
layout(push_constant) uniform P {
    uint Tq, Tk, Hq, Hkv, qs, ks, vs, os;
    float scale;
    uint causal, has_ranges;
    int kv_off;
    uint nsplit;
    uint pack; // 1: grouped-query heads packed into the rows (below)
} p;

#define NW (gl_WorkGroupSize.x / 32u) // subgroups per workgroup
#define BR (NW * 16u)     // query rows per workgroup
#define DS (D + 8u)       // f16 row stride of the K/V tiles (16-byte steps, no bank conflicts)
#define SS (BC + 4u)      // f32 row stride of a subgroup's S tile
#define PS (BC + 8u)      // f16 row stride of a subgroup's P tile (also Q staging)
#define NEG (-3.402823466e38)
#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453
#define F16M fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define F32M fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

shared float16_t sK[BC * DS];
shared float16_t sV[BC * DS];
shared float sS[NW * 16u * SS];
shared float16_t sP[NW * 16u * PS];
shared float sRow[BR];          // per-row rescale factor, at the end 1 / row sum
shared uint sU[NW * 4u];        // each subgroup's unions of first and second ranges

#define QO_F16 (IO == 1u)
#define KV_F16 (IO != 0u)
vec2 ld_q(uint e) { return QO_F16 ? unpackHalf2x16(Qh[e >> 1]) : Q2[e >> 1]; }
vec2 ld_k(uint e) { return KV_F16 ? unpackHalf2x16(Kh[e >> 1]) : K2[e >> 1]; }
vec2 ld_v(uint e) { return KV_F16 ? unpackHalf2x16(Vh[e >> 1]) : V2[e >> 1]; }

void main()
{
    uint t = gl_LocalInvocationID.x, sg = t >> 5, lane = t & 31u;
    uint G = p.Hq / p.Hkv, q0 = gl_WorkGroupID.x * BR;
    bool pk = p.pack != 0u;
    uint kvh = pk ? gl_WorkGroupID.y : gl_WorkGroupID.y / G;
    uint Tr = pk ? p.Tq * G : p.Tq; // rows of the pass
// the query and the head of row R of this workgroup's pass
#define ROW_Q(R) (pk ? (R) / G : (R))
#define ROW_H(R) (pk ? kvh * G + (R) % G : gl_WorkGroupID.y)
    uint rb = sg * 16u;                  // this subgroup's first row in the block
    uint myr = lane & 15u, hf = lane >> 4; // softmax: lane's row and half of the tile
    uint sbase = sg * 16u * SS, pbase = sg * 16u * PS;

    // The visible keys of the lane's row: [lo, hi) and [lo1, hi1).
    uint ri = q0 + rb + myr, qi = ROW_Q(ri), hrow = ROW_H(ri);
    uint lo = 0u, hi = 0u, lo1 = 0u, hi1 = 0u;
    if (ri < Tr) {
        hi = p.Tk;
        if (p.has_ranges == 1u) {
            lo = Rg[2u * qi];
            hi = min(Rg[2u * qi + 1u], p.Tk);
        } else if (p.has_ranges == 2u) {
            lo = Rg[4u * qi];
            hi = min(Rg[4u * qi + 1u], p.Tk);
            lo1 = Rg[4u * qi + 2u];
            hi1 = min(Rg[4u * qi + 3u], p.Tk);
        }
        if (p.causal != 0u) {
            uint lim = uint(max(int(qi) + p.kv_off + 1, 0));
            hi = min(hi, lim);
            hi1 = min(hi1, lim);
        }
    }
    bool s0 = hi > lo, s1 = hi1 > lo1;
    uint a0 = subgroupMin(s0 ? lo : 0xffffffffu), a1 = subgroupMax(s0 ? hi : 0u);
    uint b0 = subgroupMin(s1 ? lo1 : 0xffffffffu), b1 = subgroupMax(s1 ? hi1 : 0u);
    // the subgroup's span: every key one of its rows sees lies in it
    uint slo = min(a0, b0), shi = max(a1, b1);
    if (lane == 0u) {
        sU[4u * sg] = a0;
        sU[4u * sg + 1u] = a1;
        sU[4u * sg + 2u] = b0;
        sU[4u * sg + 3u] = b1;
    }

    // Q fragments: staged 16 columns at a time through this subgroup's P
    // tile, scaled so that S is already in the log2 domain.
    float qscale = p.scale * float(LOG2E);
    F16M qf[8];
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
        if (j < D / 16u) {
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                uint pi = lane + 32u * i, r = pi >> 3, c = (pi & 7u) * 2u, R = q0 + rb + r;
                vec2 x = R < Tr ? ld_q(ROW_Q(R) * p.qs + ROW_H(R) * D + j * 16u + c) * qscale
                                : vec2(0);
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
    // The block's unions of first and of second ranges (every invocation
    // computes the same); unions that overlap or touch are one walk, and an
    // empty first union leaves the second alone.
    uint ua0 = p.Tk, ua1 = 0u, ub0 = p.Tk, ub1 = 0u;
    [[unroll]] for (uint w = 0u; w < 8u; w++) {
        if (w < NW && sU[4u * w + 1u] > sU[4u * w]) {
            ua0 = min(ua0, sU[4u * w]);
            ua1 = max(ua1, sU[4u * w + 1u]);
        }
        if (w < NW && sU[4u * w + 3u] > sU[4u * w + 2u]) {
            ub0 = min(ub0, sU[4u * w + 2u]);
            ub1 = max(ub1, sU[4u * w + 3u]);
        }
    }
    if (ua1 <= ua0) {
        ua0 = ub0;
        ua1 = ub1;
        ub0 = ub1 = 0u;
    } else if (ub1 > ub0 && ub0 <= ua1 && ua0 <= ub1) {
        ua0 = min(ua0, ub0);
        ua1 = max(ua1, ub1);
        ub0 = ub1 = 0u;
    }
    ua1 = max(ua1, ua0);
    ub1 = max(ub1, ub0);
    // The block's key tiles: first union's, then the second's; split z takes
    // a contiguous share, the first nt % S shares one tile more.
    uint na = (ua1 - ua0 + BC - 1u) / BC, nb = (ub1 - ub0 + BC - 1u) / BC, nt = na + nb;
    uint z = gl_WorkGroupID.z, S = max(p.nsplit, 1u);
    uint tile0 = z * (nt / S) + min(z, nt % S);
    uint tile1 = tile0 + nt / S + (z < nt % S ? 1u : 0u);
    uint mylo = slo, myhi = shi;

    for (uint ti = tile0; ti < tile1; ti++) {
        // a tile stops at its union's end: keys past it belong to the other
        // union's tiles (or to nobody), so they count here as not visible
        uint k0 = ti < na ? ua0 + ti * BC : ub0 + (ti - na) * BC;
        uint kend = ti < na ? ua1 : ub1;
        for (uint e = t; e < BC * (D / 2u); e += gl_WorkGroupSize.x) {
            uint c = e / (D / 2u), d = (e % (D / 2u)) * 2u, kk = k0 + c;
            vec2 kv = vec2(0), vv = vec2(0);
            if (kk < kend) {
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
                    bool vis = kk < kend && ((kk >= lo && kk < hi) || (kk >= lo1 && kk < hi1));
                    s = vis ? s : NEG;
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
    // strides, f16 packing); a share also writes its log-sum-exp (m and l
    // are in the log2 domain).
    if (hf == 0u)
        sRow[rb + myr] = l > 0.0 ? 1.0 / l : 0.0;
    if (S > 1u && hf == 0u && ri < Tr)
        Lp[(z * p.Tq + qi) * p.Hq + hrow] = l > 0.0 ? (m + log2(l)) * float(LN2) : NEG;
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
                uint pi = lane + 32u * i, r = pi >> 3, c = (pi & 7u) * 2u, R = q0 + rb + r;
                if (R < Tr) {
                    uint q = ROW_Q(R), h = ROW_H(R);
                    vec2 v = vec2(sS[sbase + r * SS + c], sS[sbase + r * SS + c + 1u]);
                    uint e = q * p.os + h * D + j * 16u + c;
                    if (S > 1u) // a partial: f32, packed
                        O2[(((z * p.Tq + q) * p.Hq + h) * D + j * 16u + c) >> 1] = v;
                    else if (QO_F16)
                        Oh[e >> 1] = packHalf2x16(v);
                    else
                        O2[e >> 1] = v;
                }
            }
            subgroupBarrier();
        }
    }
}
