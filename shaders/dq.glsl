// Weight decoding shared by the matmul and gather shaders.
//
// Weights are bound as raw uint words whatever their type, so one SPIR-V
// module serves every GGUF type (chosen by the DTYPE specialization
// constant, which the driver folds away) and no 8/16-bit storage feature is
// needed. Q8_0 (34-byte) and Q6_K (210-byte) blocks are only 2-byte
// aligned, hence the unaligned 32-bit read.
//
// dq4(row, k) returns elements k..k+3 of the weight row starting at byte
// address `row`; k is a multiple of 4 and the 4 elements always share one
// scale in every supported layout (GGUF / ggml block layouts, and folio's
// int8 rows, DT_I8R, whose row address is that of its header).
// dq1(row, k) returns element k alone: the path for float rows whose
// length is not a multiple of 4 (quantized rows are whole blocks, so
// there it only serves completeness).
#ifndef FOLIO_DQ_GLSL
#define FOLIO_DQ_GLSL

#define DT_F32 0
#define DT_F16 1
#define DT_Q8_0 8
#define DT_Q4_K 12
#define DT_Q5_K 13
#define DT_Q6_K 14
#define DT_BF16 30
#define DT_I8R 256 // folio's int8 rows: 16-byte header (f32 scale), then the bytes

uint rd32(uint a) { return W[a >> 2]; }
uint rd32u(uint a)
{
    uint s = (a & 3u) * 8u;
    uint lo = W[a >> 2] >> s;
    return s == 0u ? lo : (lo | (W[(a >> 2) + 1u] << (32u - s)));
}
uint rd16(uint a) { return (W[a >> 2] >> ((a & 2u) * 8u)) & 0xFFFFu; }
uint rd8(uint a) { return (W[a >> 2] >> ((a & 3u) * 8u)) & 0xFFu; }
float f16(uint h) { return unpackHalf2x16(h).x; }

vec4 i8x4(uint q)
{
    ivec4 v = ivec4(int(q << 24), int(q << 16), int(q << 8), int(q)) >> 24;
    return vec4(v);
}
vec4 u8x4(uint q) { return vec4(q & 0xFFu, (q >> 8) & 0xFFu, (q >> 16) & 0xFFu, q >> 24); }

// K-quant 6-bit scale/min pair j (0..7) from the 12 packed bytes at s.
void kscale(uint s, uint j, out float sc, out float mn)
{
    if (j < 4u) {
        sc = float(rd8(s + j) & 63u);
        mn = float(rd8(s + j + 4u) & 63u);
    } else {
        sc = float((rd8(s + j + 4u) & 0xFu) | ((rd8(s + j - 4u) >> 6) << 4));
        mn = float((rd8(s + j + 4u) >> 4) | ((rd8(s + j) >> 6) << 4));
    }
}

vec4 dq4(uint row, uint k)
{
    if (DTYPE == DT_F32) {
        uint a = (row >> 2) + k;
        return vec4(uintBitsToFloat(W[a]), uintBitsToFloat(W[a + 1u]),
                    uintBitsToFloat(W[a + 2u]), uintBitsToFloat(W[a + 3u]));
    } else if (DTYPE == DT_F16) {
        uint a = row + k * 2u;
        uint w0 = rd32u(a), w1 = rd32u(a + 4u);
        return vec4(unpackHalf2x16(w0), unpackHalf2x16(w1));
    } else if (DTYPE == DT_BF16) {
        uint a = row + k * 2u;
        uint w0 = rd32u(a), w1 = rd32u(a + 4u);
        return vec4(uintBitsToFloat(w0 << 16), uintBitsToFloat(w0 & 0xFFFF0000u),
                    uintBitsToFloat(w1 << 16), uintBitsToFloat(w1 & 0xFFFF0000u));
    } else if (DTYPE == DT_I8R) {
        return uintBitsToFloat(rd32(row)) * i8x4(rd32(row + 16u + k));
    } else if (DTYPE == DT_Q8_0) {
        uint b = row + (k >> 5) * 34u;
        float d = f16(rd16(b));
        return d * i8x4(rd32u(b + 2u + (k & 31u)));
    } else if (DTYPE == DT_Q4_K || DTYPE == DT_Q5_K) {
        uint bsz = DTYPE == DT_Q4_K ? 144u : 176u;
        uint b = row + (k >> 8) * bsz;
        uint e = k & 255u;
        uint c = e >> 6, w = e & 63u, l = w & 31u, hi = w >> 5;
        vec2 dm = unpackHalf2x16(rd32(b));
        float sc, mn;
        kscale(b + 4u, 2u * c + hi, sc, mn);
        uint qoff = DTYPE == DT_Q4_K ? 16u : 48u;
        uint q = rd32(b + qoff + c * 32u + l);
        q = hi == 1u ? (q >> 4) & 0x0F0F0F0Fu : q & 0x0F0F0F0Fu;
        vec4 v = u8x4(q);
        if (DTYPE == DT_Q5_K) {
            uint h = rd32(b + 16u + l) >> (2u * c + hi);
            v += 16.0 * u8x4(h & 0x01010101u);
        }
        return dm.x * sc * v - dm.y * mn;
    } else { // DT_Q6_K
        uint b = row + (k >> 8) * 210u;
        uint e = k & 255u;
        uint h = e >> 7, w = e & 127u, g = w >> 5, l = w & 31u;
        uint ql = rd32u(b + h * 64u + l + (g & 1u) * 32u);
        ql = g >= 2u ? (ql >> 4) & 0x0F0F0F0Fu : ql & 0x0F0F0F0Fu;
        uint qh = (rd32u(b + 128u + h * 32u + l) >> (2u * g)) & 0x03030303u;
        vec4 q = u8x4(ql | (qh << 4)) - 32.0;
        float sc = float(int(rd8(b + 192u + h * 8u + (l >> 4) + 2u * g) << 24) >> 24);
        float d = f16(rd16(b + 208u));
        return d * sc * q;
    }
}

float dq1(uint row, uint k)
{
    if (DTYPE == DT_F32)
        return uintBitsToFloat(W[(row >> 2) + k]);
    else if (DTYPE == DT_F16)
        return f16(rd16(row + k * 2u));
    else if (DTYPE == DT_BF16)
        return uintBitsToFloat(rd16(row + k * 2u) << 16);
    return dq4(row, k & ~3u)[k & 3u];
}

#endif
