#version 450
// Split attention, part 1 of 2 (engine/ops/op_attention_split.c): for one
// key chunk of an attention whose keys exceed one binding, the
// log-sum-exp of every query's visible scores, and the query's key range
// made relative to the chunk (what attention.comp reads next).
//
// The absolute per-query range (or [0, inf) when there is none; or, with
// has_ranges 2, each of the query's two ranges) is clipped to the chunk
// [k0, k0 + Tk) and the causal limit applied, so the fused kernel then
// sees exactly this chunk's share of each query's keys. A
// query with no key in the chunk gets the empty range and NEG, which the
// merge (attn_merge.comp) weighs as zero. Head size is a push constant:
// this path serves every head size the fused kernel does. K is f32 or,
// for the text model's f16 KV cache, f16 (KV_F16; read through a uint view,
// so no 16-bit storage feature is needed); Q is f32.
// One workgroup per (query, head); 64 threads stride over the keys.
layout(constant_id = 0) const uint KV_F16 = 0;
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BQ { float Qb[]; };
layout(std430, binding = 1) readonly buffer BK { uint Kw[]; };
layout(std430, binding = 2) readonly buffer BRI { uint Ri[]; };
layout(std430, binding = 3) writeonly buffer BRO { uint Ro[]; };
layout(std430, binding = 4) writeonly buffer BL { float L[]; };
layout(push_constant) uniform P {
    uint Tq, Tk, Hq, Hkv, D, qs, ks, causal, has_ranges, k0;
    int kv_off; // causal: key j (chunk-relative) visible to query q when j <= q + kv_off
    float scale;
} p;

#define NEG (-3.402823466e38)
shared float sM[64], sS[64];

float ld_k(uint e)
{
    return KV_F16 != 0u ? unpackHalf2x16(Kw[e >> 1])[e & 1u] : uintBitsToFloat(Kw[e]);
}

void main()
{
    uint q = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, h = gl_WorkGroupID.z;
    if (q >= p.Tq)
        return;
    uint t = gl_LocalInvocationID.x;
    uint nr = p.has_ranges == 2u ? 2u : 1u, rw = 2u * nr; // ranges per query, words
    uint lo[2], hi[2];
    for (uint r = 0u; r < 2u; r++) {
        uint lo_a = 0u, hi_a = r == 0u ? 0xFFFFFFFFu : 0u;
        if (p.has_ranges != 0u && r < nr) {
            lo_a = Ri[rw * q + 2u * r];
            hi_a = Ri[rw * q + 2u * r + 1u];
        }
        lo[r] = lo_a > p.k0 ? lo_a - p.k0 : 0u;
        hi[r] = hi_a > p.k0 ? min(hi_a - p.k0, p.Tk) : 0u;
        if (p.causal != 0u)
            hi[r] = min(hi[r], uint(max(int(q) + p.kv_off + 1, 0)));
        if (lo[r] >= hi[r])
            lo[r] = hi[r] = 0u;
        if (h == 0u && t == 0u && r < nr) {
            Ro[rw * q + 2u * r] = lo[r];
            Ro[rw * q + 2u * r + 1u] = hi[r];
        }
    }
    // a key in both ranges counts once, as in the fused kernel
    if (lo[1] < hi[0] && lo[0] < hi[1]) {
        lo[0] = min(lo[0], lo[1]);
        hi[0] = max(hi[0], hi[1]);
        lo[1] = hi[1] = 0u;
    }
    uint kvh = h / (p.Hq / p.Hkv), qb = q * p.qs + h * p.D;
    float m = NEG, s = 0.0;
    for (uint r = 0u; r < 2u; r++)
        for (uint j = lo[r] + t; j < hi[r]; j += 64u) {
            uint kb = j * p.ks + kvh * p.D;
            float x = 0.0;
            for (uint d = 0u; d < p.D; d++)
                x += Qb[qb + d] * p.scale * ld_k(kb + d);
            if (x > m) {
                s = s * exp(m - x) + 1.0;
                m = x;
            } else {
                s += exp(x - m);
            }
        }
    sM[t] = m;
    sS[t] = s;
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1) {
        if (t < w) {
            float m1 = sM[t], m2 = sM[t + w];
            float mx = max(m1, m2);
            if (mx > NEG) {
                float a = m1 > NEG ? sS[t] * exp(m1 - mx) : 0.0;
                float b = m2 > NEG ? sS[t + w] * exp(m2 - mx) : 0.0;
                sM[t] = mx;
                sS[t] = a + b;
            }
        }
        barrier();
    }
    if (t == 0u)
        L[q * p.Hq + h] = sM[0] > NEG ? sM[0] + log(sS[0]) : NEG;
}
