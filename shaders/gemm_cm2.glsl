// GEMM on the tensor cores through GL_NV_cooperative_matrix2: the
// workgroup owns a BM x BN output tile as ONE workgroup-scope matrix, and
// the driver chooses how to stage A and B through shared memory and which
// tensor-core instructions to issue (coopMatLoadTensorNV). On the H200 this
// is the route NVIDIA's own sample measures fastest (docs/reference/vulkan.md).
//
//   Y[m][c0+n] = act(sum_k X[m][k] W[n][k] (+ bias[n])) (+ R[m][c0+n])
//
// Same bindings, push constants and epilogues as gemm_cm.glsl (op_matmul.c
// drives both): W f16 (N x K rows), X f16 (M x K), Y f32 or f16, bias
// and R f32; act is SwiGLU against a gate R (silu(R) * y), GELU (erf) or
// quick-GELU.
//
// Precision: accumulation is f32 (ACC16 = 0). With ACC16 = k (a multiple of
// BK, at most 256) the products accumulate in f16 for k columns of K at a
// time and are then added into the f32 accumulator: the tensor cores' f16
// rate with an error bounded by k-term f16 sums (the op tests state the
// bound at the 7B shapes).
//
// int8 (the includer defines GEMM_I8: gemm_i8_cm2.comp, --gpu-weights
// int8): W and X are folio's int8 rows (QUANT_I8R: a 16-byte header with
// the row's f32 scale, then K bytes; row stride K + 16), the products
// accumulate exactly in int32 (K * 127^2 < 2^31 for K < 133,000) and the
// epilogue first multiplies each sum by its row's and its column's scales.
// Skips are then in bytes and multiples of 16.
//
// Edges: the tensor layouts clamp (zeros are read past M, N and K, stores
// past M and N are dropped), so any M, N and K work; the interior tiles take
// unclamped layouts (no per-element bounds).
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_control_flow_attributes : enable

#ifdef GEMM_I8
#define ET int8_t
#define ACCI CM(int32_t, BM, BN, gl_MatrixUseAccumulator)
const uint EV = 16u; // elements per 16-byte vector
const uint RH = 16u; // row header bytes
#else
#define ET float16_t
const uint EV = 8u;
const uint RH = 0u;
#endif

layout(constant_id = 0) const uint XTYPE = 1; // X f16 only (f32 A matrices are no workgroup shape;
                                              // op_matmul sends f32 inputs to the subgroup kernel)
layout(constant_id = 1) const uint YTYPE = 0; // 0: Y f32, 1: Y f16
layout(constant_id = 2) const uint BM = 128;
layout(constant_id = 3) const uint BN = 128;
layout(constant_id = 4) const uint BK = 32;
layout(local_size_x_id = 5) in;
layout(constant_id = 6) const uint ACC16 = 0; // 0: f32 accumulation; else K per f16 chunk
// 1: A and B are read through 16-byte-element views of their bindings (the
// host checks that the skips and K are multiples of 8 halves), so the driver
// knows the rows' alignment; 0: through f16 views (any offset).
layout(constant_id = 7) const uint VEC = 0;
// Non-zero: K fixed at pipeline creation (the row stride of A and B and the
// loop's trip count known to the driver's compiler); 0: K from the push
// constants.
layout(constant_id = 8) const uint KC = 0;
// 1: this pipeline computes split-K partials (p.kper); its own pipeline,
// because a K range from the push constants in the loop bounds cost the
// K-fixed kernel 2-3x on the H100 (text gate/up 248 -> 88 TOP/s).
layout(constant_id = 9) const uint SPLITK = 0;

layout(std430, binding = 0) readonly buffer BW { ET W[]; };
layout(std430, binding = 1) readonly buffer BX { ET X[]; };
layout(std430, binding = 0) readonly buffer BW32 { float WS[]; }; // int8 rows' scales
layout(std430, binding = 1) readonly buffer BX32 { float XS[]; };
layout(std430, binding = 0) readonly buffer BW4 { uvec4 W4[]; };
layout(std430, binding = 1) readonly buffer BX4 { uvec4 X4[]; };
layout(std430, binding = 2) buffer BY { float Y[]; };
layout(std430, binding = 2) buffer BYH { float16_t YH[]; };
layout(std430, binding = 3) readonly buffer BB { float B[]; };
layout(std430, binding = 4) readonly buffer BR { float R[]; };
layout(push_constant) uniform P {
    uint K, N, M;
    uint w_skip, x_skip, y_skip; // elements before row 0 of W, X, Y in their bindings
    uint ldy;                    // Y (and R) row stride in elements
    uint y_col0;                 // first Y column written by this dispatch
    uint b_skip, r_skip;         // floats before bias[0] / R's row 0
    uint flags;                  // 1 bias, 2 residual, 4 SwiGLU, 8 GELU (erf), 16 quick-GELU;
                                 // bits 8 up: the tile order (gemm_tiles.glsl)
    // Split K (the int8 kernel's SPLITK pipelines, for products with fewer
    // output tiles than multiprocessors: a label pass): workgroup z sums K columns
    // [z * kper, (z + 1) * kper) (kper a multiple of BK) and stores its
    // scaled f32 partial with no epilogue (flags < 256, Y f32) zstride elements
    // after the previous one; splitk.comp adds them and applies it. 0: the
    // whole K.
    uint kper, zstride;
} p;

#define CM(T, R, C, U) coopmat<T, gl_ScopeWorkgroup, R, C, U>
#define ACC CM(float, BM, BN, gl_MatrixUseAccumulator)
#define ACCH CM(float16_t, BM, BN, gl_MatrixUseAccumulator)

// sigm, erf_as (and gemm_epi, which this kernel's whole-tile epilogue
// does not use): the subgroup kernel's arithmetic
#include "gemm_epi.glsl"
#include "gemm_tiles.glsl"
float silu_e(const in uint32_t r, const in uint32_t c, const in float g) { return g * sigm(g); }
float gelu_e(const in uint32_t r, const in uint32_t c, const in float y)
{
    return 0.5 * y * (1.0 + erf_as(y * 0.70710678118654752));
}
float qgelu_e(const in uint32_t r, const in uint32_t c, const in float y) { return y * sigm(1.702 * y); }
#ifdef GEMM_I8
// an int8 sum times its X row's and W row's scales (rows past M or N were
// read as zeros: their scale is never read)
float scale_e(const in uint32_t r, const in uint32_t c, const in float y, const in uint m0,
              const in uint n0)
{
    uint m = m0 + r, n = n0 + c;
    if (m >= p.M || n >= p.N)
        return 0.0;
    const uint KK = KC != 0u ? KC : p.K;
    return y * XS[(p.x_skip + m * (KK + RH)) >> 2] * WS[(p.w_skip + n * (KK + RH)) >> 2];
}
#endif

// One K step of BK: the A tile (X rows) and the B tile (W rows, transposed
// by the view) through the tensor layouts LX / LW, into accumulator C.
#define STEP(C, LX, LW, K0)                                                                      \
    {                                                                                            \
        CM(ET, BM, BK, gl_MatrixUseA) a_;                                                        \
        CM(ET, BK, BN, gl_MatrixUseB) b_;                                                        \
        if (VEC == 1u) {                                                                         \
            coopMatLoadTensorNV(a_, X4, (p.x_skip + RH) / EV, sliceTensorLayoutNV(LX, m0, BM, K0, BK)); \
            coopMatLoadTensorNV(b_, W4, (p.w_skip + RH) / EV, sliceTensorLayoutNV(LW, n0, BN, K0, BK), tr); \
        } else {                                                                                 \
            coopMatLoadTensorNV(a_, X, p.x_skip + RH, sliceTensorLayoutNV(LX, m0, BM, K0, BK)); \
            coopMatLoadTensorNV(b_, W, p.w_skip + RH, sliceTensorLayoutNV(LW, n0, BN, K0, BK), tr); \
        }                                                                                        \
        C = coopMatMulAdd(a_, b_, C);                                                            \
    }

void main()
{
    const uint KK = KC != 0u ? KC : p.K;
    uvec2 tile = gemm_tile();
    uint n0 = tile.x * BN, m0 = tile.y * BM;
    bool interior = m0 + BM <= p.M && n0 + BN <= p.N;

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tX =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tW =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tX = setTensorLayoutDimensionNV(tX, p.M, KK);
    tW = setTensorLayoutDimensionNV(tW, p.N, KK);
    tensorLayoutNV<2> uX = createTensorLayoutNV(2);
    tensorLayoutNV<2> uW = createTensorLayoutNV(2);
    uX = setTensorLayoutDimensionNV(uX, p.M, KK);
    uW = setTensorLayoutDimensionNV(uW, p.N, KK);
    if (RH != 0u) { // int8 rows: K bytes after each row's header
        tX = setTensorLayoutStrideNV(tX, KK + RH, 1);
        tW = setTensorLayoutStrideNV(tW, KK + RH, 1);
        uX = setTensorLayoutStrideNV(uX, KK + RH, 1);
        uW = setTensorLayoutStrideNV(uW, KK + RH, 1);
    }
    tensorViewNV<2, false, 1, 0> tr = createTensorViewNV(2, false, 1, 0); // W rows are B's columns

    // One loop per layout pair, with no branch inside: the driver software-
    // pipelines a clean loop of tensor loads and products (a branch per load
    // to pick the layout cost 4-5x). Interior tiles take the unclamped
    // layouts up to the last whole K step; the tail and the edge tiles clamp.
    uint kfull = interior ? KK / BK * BK : 0u;
#ifdef GEMM_I8
    // this workgroup's K range (split K): only the last slice has a partial
    // step, and the clamped layouts end it at K
    ACCI acci = ACCI(0);
    if (SPLITK == 0u) {
        for (uint k = 0; k < kfull; k += BK)
            STEP(acci, uX, uW, k);
        for (uint k = kfull; k < KK; k += BK)
            STEP(acci, tX, tW, k);
    } else {
        uint k0 = gl_WorkGroupID.z * p.kper, k1 = min(k0 + p.kper, KK);
        uint kf = interior ? k0 + (k1 - k0) / BK * BK : k0;
        for (uint k = k0; k < kf; k += BK)
            STEP(acci, uX, uW, k);
        for (uint k = kf; k < k1; k += BK)
            STEP(acci, tX, tW, k);
    }
    ACC acc = ACC(acci);
    coopMatPerElementNV(acc, acc, scale_e, m0, n0);
#else
    ACC acc = ACC(0.0);
    if (ACC16 == 0u) {
        for (uint k = 0; k < kfull; k += BK)
            STEP(acc, uX, uW, k);
        for (uint k = kfull; k < KK; k += BK)
            STEP(acc, tX, tW, k);
    } else {
        // f16 partial sums over ACC16 columns of K, each added into f32
        for (uint k0 = 0; k0 < KK; k0 += ACC16) {
            ACCH h = ACCH(0.0);
            uint k1 = min(k0 + ACC16, kfull);
            for (uint k = k0; k < k1; k += BK)
                STEP(h, uX, uW, k);
            for (uint k = max(k0, kfull); k < min(k0 + ACC16, KK); k += BK)
                STEP(h, tX, tW, k);
            acc = acc + ACC(h);
        }
    }
#endif

    // Epilogue on the whole tile: bias rows (a stride-0 view of the vector),
    // residual / gate tiles in Y's layout, activations per element.
    if ((p.flags & 1u) != 0u) {
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tB =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        tB = setTensorLayoutDimensionNV(tB, p.M, p.N);
        tB = setTensorLayoutStrideNV(tB, 0, 1);
        ACC bias;
        coopMatLoadTensorNV(bias, B, p.b_skip, sliceTensorLayoutNV(tB, m0, BM, n0, BN));
        acc = acc + bias;
    }
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tY =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tY = setTensorLayoutDimensionNV(tY, p.M, p.y_col0 + p.N);
    tY = setTensorLayoutStrideNV(tY, p.ldy, 1);
    if ((p.flags & 6u) != 0u) {
        ACC r;
        coopMatLoadTensorNV(r, R, p.r_skip, sliceTensorLayoutNV(tY, m0, BM, p.y_col0 + n0, BN));
        if ((p.flags & 2u) != 0u) {
            acc = acc + r;
        } else {
            coopMatPerElementNV(r, r, silu_e);
            acc = acc * r;
        }
    }
    if ((p.flags & 8u) != 0u)
        coopMatPerElementNV(acc, acc, gelu_e);
    if ((p.flags & 16u) != 0u)
        coopMatPerElementNV(acc, acc, qgelu_e);
    if (YTYPE == 0u)
        coopMatStoreTensorNV(acc, Y, p.y_skip + gl_WorkGroupID.z * p.zstride,
                             sliceTensorLayoutNV(tY, m0, BM, p.y_col0 + n0, BN));
    else
        coopMatStoreTensorNV(ACCH(acc), YH, p.y_skip, sliceTensorLayoutNV(tY, m0, BM, p.y_col0 + n0, BN));
}
