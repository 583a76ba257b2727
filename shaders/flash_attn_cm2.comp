#version 450
// Flash attention on GL_NV_cooperative_matrix2 (workgroup scope): the
// workgroup owns BR query rows of one head as ONE matrix, and the driver
// stages Q, K and V through shared memory and picks the tensor-core
// instructions (coopMatLoadTensorNV), as for gemm_cm2. flash_attn_cm.comp
// (subgroup scope, 16 rows a subgroup) does the softmax by hand on a shared
// copy of every score tile and reloads P and each K/V fragment from shared
// memory: it is bound by those shared-memory trips (46 TFLOP/s on the vision
// tower's full layers, H100). Here the row max and the row sums are matrix
// operations (coopMatReduceNV, and a product with a matrix of ones), and
// every element-wise step runs on the accumulators where they sit.
//
// Same contract and push constants as flash_attn_cm.comp, for the passes
// op_attention sends here: O = softmax(scale * Q K^T + mask) V with causal
// clipping and/or ONE key range per query, grouped-query heads, per-token
// strides, zeros for rows that see no key, no split K, no packed heads
// (label passes stay on flash_attn_cm), K and V in f16 (IO 1: Q and O f16
// too; IO 2: Q and O f32, the text model's KV cache). Accumulation and the
// softmax are f32; Q (pre-scaled by scale * log2 e, so the softmax uses
// exp2), K, V and P are rounded to f16 for the products (the f16 policy,
// the same roundings as flash_attn_cm, so the op tests hold both to one
// reference).
//
// Masking: the workgroup walks the union of its rows' ranges in tiles of
// BC keys; a tile that lies inside every row's range takes no mask, the
// others get one per element (keys outside the row's range score -FLT_MAX/2,
// which exp2 turns into 0 once the row has seen a real key; a row that never
// sees one keeps m = -FLT_MAX/2 and is written as zeros).
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : enable

layout(constant_id = 0) const uint D = 128; // head size: a multiple of 16, <= 128
layout(constant_id = 1) const uint BR = 64; // query rows per workgroup
layout(constant_id = 2) const uint BC = 64; // keys per tile
layout(constant_id = 3) const uint IO = 2;  // 1: q/k/v/o f16; 2: k/v f16, q/o f32
layout(local_size_x_id = 4) in;             // a workgroup size the device lists for these shapes

layout(std430, binding = 0) readonly buffer BQ { float QF[]; };
layout(std430, binding = 0) readonly buffer BQh { float16_t QH[]; };
layout(std430, binding = 1) readonly buffer BK { float16_t KH[]; };
layout(std430, binding = 2) readonly buffer BV { float16_t VH[]; };
layout(std430, binding = 3) buffer BO { float OF[]; };
layout(std430, binding = 3) buffer BOh { float16_t OH[]; };
layout(std430, binding = 4) readonly buffer BR_ { uint Rg[]; };
layout(push_constant) uniform P {
    uint Tq, Tk, Hq, Hkv, qs, ks, vs, os;
    float scale;
    uint causal, has_ranges;
    int kv_off;
    uint nsplit; // 1 here (op_attention never splits this kernel)
    uint pack;   // 0 here
} p;

#define NEGH (-1.70141173e38) // -FLT_MAX / 2: masked scores, and m before any key
#define LOG2E 1.4426950408889634
#define CM(T, R, C, U) coopmat<T, gl_ScopeWorkgroup, R, C, U>
#define SM CM(float, BR, BC, gl_MatrixUseAccumulator) // scores and per-row state
#define OM CM(float, BR, D, gl_MatrixUseAccumulator)  // the output rows

shared uint sLo, sHi, sLoMax, sHiMin;

// The visible keys [lo, hi) of query q (q < Tq).
uvec2 vis(uint q)
{
    uint lo = 0u, hi = p.Tk;
    if (p.has_ranges != 0u) {
        lo = Rg[2u * q];
        hi = min(Rg[2u * q + 1u], p.Tk);
    }
    if (p.causal != 0u)
        hi = min(hi, uint(max(int(q) + p.kv_off + 1, 0)));
    return uvec2(lo, hi);
}

float mask_e(const in uint32_t r, const in uint32_t c, const in float s, const in uint q0,
             const in uint k0)
{
    uint q = q0 + r, k = k0 + c;
    if (q >= p.Tq)
        return NEGH;
    uvec2 lh = vis(q);
    return k >= lh.x && k < lh.y ? s : NEGH;
}
float max_r(const in float a, const in float b) { return max(a, b); }
float smear_r(const in float a, const in float b) { return a; }
float max_e(const in uint32_t r, const in uint32_t c, const in float a, const in float b)
{
    return max(a, b);
}
float exp2_e(const in uint32_t r, const in uint32_t c, const in float x) { return exp2(x); }
// 1 / row sum, or 0 for a row that saw no key (its m never left NEGH)
float inv_e(const in uint32_t r, const in uint32_t c, const in float l, const in float m)
{
    return m > 0.5 * NEGH && l > 0.0 ? 1.0 / l : 0.0;
}

void main()
{
    uint q0 = gl_WorkGroupID.x * BR, h = gl_WorkGroupID.y, kvh = h / (p.Hq / p.Hkv);
    uint t = gl_LocalInvocationID.x;

    // The union of the block's ranges, and the keys every row sees.
    if (t == 0u) {
        sLo = 0xffffffffu;
        sHi = 0u;
        sLoMax = 0u;
        sHiMin = 0xffffffffu;
    }
    barrier();
    for (uint r = t; r < BR; r += gl_WorkGroupSize.x) {
        uint q = q0 + r;
        if (q < p.Tq) {
            uvec2 lh = vis(q);
            if (lh.y > lh.x) {
                atomicMin(sLo, lh.x);
                atomicMax(sHi, lh.y);
            }
            atomicMax(sLoMax, lh.x);
            atomicMin(sHiMin, lh.y);
        }
    }
    barrier();
    uint klo = sLo, khi = sHi, allLo = sLoMax, allHi = sHiMin;

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tQ =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tK =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tV =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> tO =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tQ = setTensorLayoutDimensionNV(tQ, p.Tq, D);
    tQ = setTensorLayoutStrideNV(tQ, p.qs, 1);
    tK = setTensorLayoutDimensionNV(tK, p.Tk, D);
    tK = setTensorLayoutStrideNV(tK, p.ks, 1);
    tV = setTensorLayoutDimensionNV(tV, p.Tk, D);
    tV = setTensorLayoutStrideNV(tV, p.vs, 1);
    tO = setTensorLayoutDimensionNV(tO, p.Tq, D);
    tO = setTensorLayoutStrideNV(tO, p.os, 1);
    tensorViewNV<2, false, 1, 0> tr = createTensorViewNV(2, false, 1, 0); // K rows are B's columns

    // Q, scaled into the log2 domain in f32, then rounded once to f16.
    OM qf;
    if (IO == 1u) {
        CM(float16_t, BR, D, gl_MatrixUseAccumulator) qh;
        coopMatLoadTensorNV(qh, QH, h * D, sliceTensorLayoutNV(tQ, q0, BR, 0, D));
        qf = OM(qh);
    } else {
        coopMatLoadTensorNV(qf, QF, h * D, sliceTensorLayoutNV(tQ, q0, BR, 0, D));
    }
    qf *= float(p.scale * LOG2E);
    CM(float16_t, BR, D, gl_MatrixUseA) qa = CM(float16_t, BR, D, gl_MatrixUseA)(qf);

    const CM(float16_t, BC, BC, gl_MatrixUseB) ones = CM(float16_t, BC, BC, gl_MatrixUseB)(1.0);
    OM o = OM(0.0);
    SM m = SM(NEGH), l = SM(0.0);

    for (uint k0 = klo; k0 < khi; k0 += BC) {
        CM(float16_t, D, BC, gl_MatrixUseB) kt;
        coopMatLoadTensorNV(kt, KH, kvh * D, sliceTensorLayoutNV(tK, k0, BC, 0, D), tr);
        SM s = coopMatMulAdd(qa, kt, SM(0.0));
        if (k0 < allLo || k0 + BC > allHi) // some row does not see the whole tile
            coopMatPerElementNV(s, s, mask_e, q0, k0);

        SM rmax, mold = m, pm, em;
        coopMatReduceNV(rmax, s, gl_CooperativeMatrixReduceRowNV, max_r);
        coopMatPerElementNV(m, rmax, max_e, mold);
        coopMatPerElementNV(pm, s - m, exp2_e);
        coopMatPerElementNV(em, mold - m, exp2_e);
        CM(float16_t, BR, BC, gl_MatrixUseA) pa = CM(float16_t, BR, BC, gl_MatrixUseA)(pm);
        // row sums of the rounded weights, on the tensor cores
        l = em * l + coopMatMulAdd(pa, ones, SM(0.0));

        OM emd; // each row's rescale, spread over the output's columns
        coopMatReduceNV(emd, em, gl_CooperativeMatrixReduceRowNV, smear_r);
        CM(float16_t, BC, D, gl_MatrixUseB) vb;
        coopMatLoadTensorNV(vb, VH, kvh * D, sliceTensorLayoutNV(tV, k0, BC, 0, D));
        o = coopMatMulAdd(pa, vb, o * emd);
    }

    OM ld, md;
    coopMatReduceNV(ld, l, gl_CooperativeMatrixReduceRowNV, smear_r);
    coopMatReduceNV(md, m, gl_CooperativeMatrixReduceRowNV, smear_r);
    coopMatPerElementNV(ld, ld, inv_e, md);
    o = o * ld;
    if (IO == 1u) {
        CM(float16_t, BR, D, gl_MatrixUseAccumulator) oh = CM(float16_t, BR, D, gl_MatrixUseAccumulator)(o);
        coopMatStoreTensorNV(oh, OH, h * D, sliceTensorLayoutNV(tO, q0, BR, 0, D));
    } else {
        coopMatStoreTensorNV(o, OF, h * D, sliceTensorLayoutNV(tO, q0, BR, 0, D));
    }
}
