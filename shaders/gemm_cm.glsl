// f16 GEMM on the tensor cores through subgroup-scope cooperative matrices:
// GL_NV_cooperative_matrix (gemm_cm.comp, the route Debian 12's glslc
// compiles) or GL_KHR_cooperative_matrix (gemm_khr.comp: NVIDIA, AMD, Intel).
// The includer defines the CM_* macros below for its extension.
//
//   Y[m][c0+n] = act(sum_k X[m][k] W[n][k] (+ bias[n])) (+ R[m][c0+n])
//
// act: none, SwiGLU against a gate tensor R (silu(R) * y), GELU (erf) or
// quick-GELU, so the MLP's activation costs no pass of its own and its
// output can be written in f16 for the next GEMM.
//
// W is f16 (weights expanded at load, --gpu-weights f16); X is f16 or f32
// (XTYPE), Y is f32 or f16 (YTYPE); accumulation is f32 throughout.
//
// int8 (the includer defines GEMM_I8: gemm_i8_khr.comp, --gpu-weights
// int8): W and X are folio's int8 rows (QUANT_I8R: a 16-byte header with the
// row's f32 scale, then K bytes; row stride K + 16; skips in bytes, K and
// skips multiples of 16), fragments are 16x16x32 and accumulate exactly in
// int32, and the epilogue first multiplies each sum by its row's and its
// column's scales. A 16-byte vector holds 16 int8 where it holds 8 halves,
// and a fragment's K (32) is the same 32 bytes as an f16 fragment's (16), so
// the tiles, shared rows and fragment offsets are the f16 kernel's in bytes:
// an int8 K step of 64 is an f16 one of 32.
//
// Tiling (why it is shaped this way):
// - A workgroup owns a (16*FM*WM) x (16*FN*WN) output tile; each of its
//   WM*WN subgroups owns FM x FN fragments of 16x16 (e.g. 4x4: one K-step
//   of 16 loads 4 A and 4 B fragments from shared memory for 16 products).
// - Global -> shared copies are 16-byte vectors
//   (8 halves) where the row length and offsets allow it (ALIGN = 8),
//   else 8- or 4-byte pieces (ALIGN = 4 / 2), so any even K works.
// - The next K tile is fetched into registers before the current one is
//   multiplied and written to shared memory after (two stages: one barrier
//   per K-step; one stage: two), so global latency hides behind the math.
// - Tile shape, fragments per subgroup, K step and stages are
//   specialization constants; op_matmul.c holds the configurations and
//   `folio bench ops --only gemm` compares them on the device.
// - Shared rows are padded to 40 halves (80 bytes = 5 vectors): the 8 rows
//   a fragment load touches per phase fall on 8 distinct 16-byte bank
//   groups, so fragment loads are conflict-free.
// - The epilogue goes through a per-subgroup 16x16 f32 scratch so edges are
//   bounds-checked and bias / residual are added in the same pass as the
//   store (no separate elementwise pass over Y).
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable

layout(constant_id = 0) const uint XTYPE = 1; // 0: X f32, 1: X f16
layout(constant_id = 1) const uint YTYPE = 0; // 0: Y f32, 1: Y f16
layout(constant_id = 2) const uint ALIGN = 8; // halves per global vector load: 8, 4 or 2
layout(constant_id = 3) const uint WM = 2;    // subgroups along M
layout(constant_id = 4) const uint WN = 2;    // subgroups along N
layout(local_size_x_id = 5) in;               // SG * WM * WN
layout(constant_id = 6) const uint FM = 4;    // 16x16 fragments per subgroup along M
layout(constant_id = 7) const uint FN = 4;    // ... along N
layout(constant_id = 8) const uint BK = 32;   // K per step: 32 or 64
layout(constant_id = 9) const uint STAGES = 2; // shared stages: 2 (one barrier per step) or 1
// Measurement probes (bench ops --only gemm, never in a model): 1 = the
// tensor-core math alone (no global loads after the first tile), 2 = the
// global -> shared traffic alone (no products; results are garbage).
layout(constant_id = 10) const uint PROBE = 0;
// K steps fetched ahead into registers: 1 (the next step, loaded while
// the current one is multiplied) or 2 (two steps ahead: each load has two
// steps of math to arrive in; the H200 sweep showed the one-ahead kernel
// bound by its global loads, "loads-only" probe). 2 needs STAGES == 1.
layout(constant_id = 11) const uint PREF = 1;
// Lanes per subgroup: 32 on NVIDIA; elsewhere the device's fixed width
// (lavapipe 8, Intel 8-32, AMD 64). A workgroup is WM x WN subgroups of
// 16x16 fragments whatever their width; the host sizes it SG * WM * WN.
layout(constant_id = 12) const uint SG = 32;

// Aliased views of the same bindings (one per access width).
layout(std430, binding = 0) readonly buffer BW4 { uvec4 W4[]; };
layout(std430, binding = 0) readonly buffer BW2 { uvec2 W2[]; };
layout(std430, binding = 0) readonly buffer BW1 { uint W1[]; };
layout(std430, binding = 1) readonly buffer BX4 { uvec4 X4[]; };
layout(std430, binding = 1) readonly buffer BX2 { uvec2 X2[]; };
layout(std430, binding = 1) readonly buffer BX1 { uint X1[]; };
layout(std430, binding = 1) readonly buffer BXF { vec4 XF4[]; };
layout(std430, binding = 2) buffer BY { float Y[]; };
layout(std430, binding = 2) buffer BYH { uint YH[]; };
layout(std430, binding = 3) readonly buffer BB { float B[]; };
layout(std430, binding = 4) readonly buffer BR { float R[]; };
layout(push_constant) uniform P {
    uint K, N, M;
    uint w_skip;  // halves (int8: bytes) before row 0 of W in its binding
    uint x_skip;  // elements (halves, floats; int8: bytes) before row 0 of X
    uint y_skip;  // elements before row 0 of Y
    uint ldy;     // Y row stride in elements
    uint y_col0;  // first Y column written by this dispatch
    uint b_skip;  // floats before bias[0] of this dispatch's columns
    uint r_skip;  // floats before R's row 0 (R has Y's layout, f32)
    uint flags;   // 1: add bias, 2: add residual R, 4: y = silu(R) * y (SwiGLU, R = gate),
                  // 8 / 16: y = gelu_erf(y) / quick_gelu(y)
                  // bits 8 up: the tile order (gemm_tiles.glsl)
    // Split K (op_matmul.c: when the output tiles leave multiprocessors
    // idle): workgroup z sums K columns [z * kper, (z + 1) * kper) into its
    // own f32 slice of Y, zstride elements after the previous one, with no
    // epilogue (flags < 256); splitk.comp adds the slices and applies it.
    // kper 0: the whole K, one slice.
    uint kper;
    uint zstride;
} p;

#include "gemm_epi.glsl"
#include "gemm_tiles.glsl"

#ifdef GEMM_I8
const uint EV = 16u; // K elements per 16-byte vector
const uint FK = 32u; // K of one fragment
const uint RH = 16u; // row header bytes (the row's scale)
#else
const uint EV = 8u;
const uint FK = 16u;
const uint RH = 0u;
#endif
#ifndef CM_ZERO
#define CM_ZERO CM_C(0.0)
#endif
const uint BM = 16u * FM * WM, BN = 16u * FN * WN;
const uint NT = SG * WM * WN;
const uint KV = BK / EV;             // 16-byte vectors per tile row
const uint SKV = KV + 1u;            // padded shared row stride in vectors
const uint A_PER = BM * KV / NT;     // vectors per thread and step
const uint B_PER = BN * KV / NT;
const uint SA = BM * SKV, SB = BN * SKV; // one stage, in vectors

shared uvec4 sA[STAGES * SA];
shared uvec4 sB[STAGES * SB];
// Epilogue scratch: a 16x16 f32 fragment per subgroup (64 vectors), in the
// A stages once the main loop is done when they are large enough (which
// leaves shared memory for more subgroups), else an array of its own.
const bool EPI_IN_A = STAGES * SA >= WM * WN * 64u;
shared uvec4 sC[EPI_IN_A ? 1u : WM * WN * 64u];

// 8 halves of row `row` (first half at element index `base` of the
// operand's binding) starting at column k; zero past K (the end of this
// workgroup's K range).
// chk: this K step may run past K (uniform across the workgroup: only the
// last step of a K that is not a multiple of BK), so whole steps load
// without a compare per vector.
uvec4 ld_w(uint base, uint k, uint K, bool chk)
{
    uvec4 v = uvec4(0);
#ifdef GEMM_I8
    if (!chk || k < K) // bytes; K a multiple of 16
        v = W4[(base + k) >> 4];
    return v;
#endif
    if (ALIGN == 8u) {
        if (!chk || k < K)
            v = W4[(base + k) >> 3];
    } else if (ALIGN == 4u) {
        if (!chk || k < K)
            v.xy = W2[(base + k) >> 2];
        if (!chk || k + 4u < K)
            v.zw = W2[(base + k + 4u) >> 2];
    } else {
        [[unroll]] for (uint j = 0; j < 4u; j++)
            if (!chk || k + 2u * j < K)
                v[j] = W1[(base + k + 2u * j) >> 1];
    }
    return v;
}

uvec4 ld_x(uint base, uint k, uint K, bool chk)
{
    uvec4 v = uvec4(0);
#ifdef GEMM_I8
    if (!chk || k < K)
        v = X4[(base + k) >> 4];
    return v;
#endif
    if (XTYPE == 0u) {
        // f32 activations: K % 4 == 0 and base % 4 == 0 (host checks)
        if (!chk || k < K) {
            vec4 a = XF4[(base + k) >> 2];
            v.x = packHalf2x16(a.xy);
            v.y = packHalf2x16(a.zw);
        }
        if (!chk || k + 4u < K) {
            vec4 b = XF4[(base + k + 4u) >> 2];
            v.z = packHalf2x16(b.xy);
            v.w = packHalf2x16(b.zw);
        }
    } else if (ALIGN == 8u) {
        if (!chk || k < K)
            v = X4[(base + k) >> 3];
    } else if (ALIGN == 4u) {
        if (!chk || k < K)
            v.xy = X2[(base + k) >> 2];
        if (!chk || k + 4u < K)
            v.zw = X2[(base + k + 4u) >> 2];
    } else {
        [[unroll]] for (uint j = 0; j < 4u; j++)
            if (!chk || k + 2u * j < K)
                v[j] = X1[(base + k + 2u * j) >> 1];
    }
    return v;
}

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint warp = t / SG, lane = t % SG;
    uvec2 tile = gemm_tile();
    uint n0 = tile.x * BN, m0 = tile.y * BM;
    uint wm = (warp / WN) * (16u * FM), wn = (warp % WN) * (16u * FN);

    CM_C acc[FM][FN];
    [[unroll]] for (uint i = 0; i < FM; i++)
        [[unroll]] for (uint j = 0; j < FN; j++)
            acc[i][j] = CM_ZERO;

    // This workgroup's K range (split K: slice z), and where its outputs go.
    uint K = p.K;
    uint RS = K + RH; // row stride of W and X in their elements
    uint kb = p.kper != 0u ? gl_WorkGroupID.z * p.kper : 0u;
    uint ke = p.kper != 0u ? min(K, kb + p.kper) : K;
    uint nk = (ke - kb + BK - 1u) / BK;
    uint yz = gl_WorkGroupID.z * p.zstride;
    // One K step into registers: vector v of a tile is row v / KV, 8-half
    // group v % KV of the step. Rows past M (N) load row M-1 (N-1) instead
    // of branching: their products land in outputs the epilogue never
    // stores. Only a step that runs past K checks K, per vector.
#define FETCH(RA, RB, K0) {                                                   \
        uint k0_ = kb + (K0);                                                 \
        bool chk_ = k0_ + BK > ke;                                            \
        [[unroll]] for (uint q = 0; q < A_PER; q++) {                         \
            uint v = t + NT * q, r = min(m0 + v / KV, p.M - 1u);              \
            RA[q] = ld_x(p.x_skip + RH + r * RS, k0_ + (v % KV) * EV, ke, chk_); \
        }                                                                     \
        [[unroll]] for (uint q = 0; q < B_PER; q++) {                         \
            uint v = t + NT * q, r = min(n0 + v / KV, p.N - 1u);              \
            RB[q] = ld_w(p.w_skip + RH + r * RS, k0_ + (v % KV) * EV, ke, chk_); \
        }                                                                     \
    }
    // Registers into shared stage ST.
#define STASH(RA, RB, ST) {                                                   \
        [[unroll]] for (uint q = 0; q < A_PER; q++) {                         \
            uint v = t + NT * q;                                              \
            sA[(ST) * SA + (v / KV) * SKV + (v % KV)] = RA[q];                \
        }                                                                     \
        [[unroll]] for (uint q = 0; q < B_PER; q++) {                         \
            uint v = t + NT * q;                                              \
            sB[(ST) * SB + (v / KV) * SKV + (v % KV)] = RB[q];                \
        }                                                                     \
    }
    // The products of the step in shared stage ST.
#define MMA(ST) {                                                             \
        uint aoff = (ST) * SA, boff = (ST) * SB;                              \
        [[unroll]] for (uint kk = 0; kk < BK / FK; kk++) {                    \
            CM_A a[FM];                                                       \
            CM_B b[FN];                                                       \
            [[unroll]] for (uint i = 0; i < FM; i++)                          \
                CM_LOAD_ROWS(a[i], sA, aoff + (wm + 16u * i) * SKV + 2u * kk, SKV); \
            [[unroll]] for (uint j = 0; j < FN; j++)                          \
                CM_LOAD_COLS(b[j], sB, boff + (wn + 16u * j) * SKV + 2u * kk, SKV); \
            if (PROBE != 2u)                                                  \
                [[unroll]] for (uint i = 0; i < FM; i++)                      \
                    [[unroll]] for (uint j = 0; j < FN; j++)                  \
                        acc[i][j] = CM_MAD(a[i], b[j], acc[i][j]);            \
        }                                                                     \
    }

    uvec4 ra[A_PER], rb[B_PER];
    FETCH(ra, rb, 0u);
    STASH(ra, rb, 0u);
    barrier();
    bool loads = PROBE != 1u; // the math-only probe keeps the first tile

    if (PREF == 1u) {
        for (uint s = 0; s < nk; s++) {
            uint cur = STAGES == 2u ? (s & 1u) : 0u;
            bool more = s + 1u < nk && loads;
            if (more)
                FETCH(ra, rb, (s + 1u) * BK);
            MMA(cur);
            if (more) {
                if (STAGES == 1u)
                    barrier(); // everyone is done reading the only stage
                STASH(ra, rb, STAGES == 2u ? (cur ^ 1u) : 0u);
            }
            barrier();
        }
    } else {
        // Two steps in registers (ra: step s+1, ra2: step s+2), one shared
        // stage; the loop takes two steps per turn so both register sets
        // keep fixed names (no indexing into registers).
        uvec4 ra2[A_PER], rb2[B_PER];
        if (1u < nk && loads)
            FETCH(ra, rb, BK);
        for (uint s = 0; s < nk; s += 2u) {
            if (s + 2u < nk && loads)
                FETCH(ra2, rb2, (s + 2u) * BK);
            MMA(0u);
            barrier();
            if (s + 1u < nk) {
                if (loads)
                    STASH(ra, rb, 0u);
                barrier();
                if (s + 3u < nk && loads)
                    FETCH(ra, rb, (s + 3u) * BK);
                MMA(0u);
                barrier();
                if (s + 2u < nk && loads)
                    STASH(ra2, rb2, 0u);
                barrier();
            }
        }
    }
#undef FETCH
#undef STASH
#undef MMA

    // Epilogue: each 16x16 fragment through the subgroup's scratch (f32 or,
    // int8, int32 bits in 16-byte vectors, 4 per row); piece q (0..31) is
    // row q/2, columns (q%2)*8 .. +7, taken by lane q % SG.
    uint sc = warp * 64u;
    [[unroll]] for (uint i = 0; i < FM; i++)
        [[unroll]] for (uint j = 0; j < FN; j++) {
            if (EPI_IN_A)
                CM_STORE_ROWS(acc[i][j], sA, sc, 4u);
            else
                CM_STORE_ROWS(acc[i][j], sC, sc, 4u);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint q = lane; q < 32u; q += SG) {
                uint er = q >> 1, ec = (q & 1u) * 8u;
                uint m = m0 + wm + 16u * i + er;
                uint nb = n0 + wn + 16u * j + ec;
                if (m < p.M) {
                    uint ci = sc + er * 4u + (ec >> 2);
                    uvec4 c0 = EPI_IN_A ? sA[ci] : sC[ci], c1 = EPI_IN_A ? sA[ci + 1u] : sC[ci + 1u];
#ifdef GEMM_I8
                    // the int32 sums times the X row's and the W rows' scales
                    // (rows past N were read as row N-1: never scaled or stored)
                    float sx = XF4[(p.x_skip + m * RS) >> 4].x;
                    float o[8] = {float(int(c0.x)), float(int(c0.y)), float(int(c0.z)), float(int(c0.w)),
                                  float(int(c1.x)), float(int(c1.y)), float(int(c1.z)), float(int(c1.w))};
                    [[unroll]] for (uint e = 0; e < 8u; e++)
                        if (nb + e < p.N)
                            o[e] *= sx * uintBitsToFloat(W4[(p.w_skip + (nb + e) * RS) >> 4].x);
#else
                    float o[8] = {uintBitsToFloat(c0.x), uintBitsToFloat(c0.y), uintBitsToFloat(c0.z),
                                  uintBitsToFloat(c0.w), uintBitsToFloat(c1.x), uintBitsToFloat(c1.y),
                                  uintBitsToFloat(c1.z), uintBitsToFloat(c1.w)};
#endif
                    [[unroll]] for (uint e = 0; e < 8u; e++)
                        if (nb + e < p.N)
                            o[e] = gemm_epi(o[e], m, nb + e);
                    uint yo = p.y_skip + yz + m * p.ldy + p.y_col0 + nb;
                    if (YTYPE == 0u) {
                        [[unroll]] for (uint e = 0; e < 8u; e++)
                            if (nb + e < p.N)
                                Y[yo + e] = o[e];
                    } else {
                        // f16 out: pairs; ldy, y_skip, y_col0 and N even (host checks)
                        [[unroll]] for (uint e = 0; e < 8u; e += 2u)
                            if (nb + e < p.N)
                                YH[(yo + e) >> 1] = packHalf2x16(vec2(o[e], o[e + 1u]));
                    }
                }
            }
            subgroupBarrier();
        }
}
