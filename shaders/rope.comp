#version 450
// Rotary position embedding, rotate-half ("NeoX") pairing (j, j + D/2)
// over each head of x[T][H][D]. MODE selects the angle:
//   0 NeoX  : theta_j = pos[t] * base^(-2j/D)
//   1 M-RoPE: pos[t][c] with c = 0 (temporal) for j < s0, 1 (height) for
//             j < s0+s1, else 2 (width); same frequencies as NeoX
//             (docs/reference/qwen25vl.md §4.2: no per-section restart)
//   2 vision: half = D/2; j < half/2 uses the patch row, else the column,
//             with the exponent restarting: base^(-2 f / half), f = j mod
//             half/2 (docs/reference/qwen25vl.md §3.5)
//   3 interleaved M-RoPE (Qwen3-VL): c = 1 (height) when j % 3 == 1 and
//             j < 3*s0, 2 (width) when j % 3 == 2 and j < 3*s1, else 0;
//             s0, s1 carry sections[1], sections[2]; NeoX frequencies
// Out of place, or in place on f32 (y = x, one stride). Y is f32, or f16
// (FLAGS bit 0: K written straight into the text model's f16 KV cache,
// round to nearest even). X is f32, or f16 (bit 1: the tower's fused Q/K/V
// GEMM output). f32 out: one thread per (token, head, pair (j, j + D/2)).
// f16 out: one thread per (token, head, output word of elements 2w, 2w +
// 1), so no two threads write one word; each element then computes its own
// pair's angle (twice the trig of the f32 form, on K's few heads only). X
// and Y are uint views (no aliased declarations), so f16 needs no 16-bit
// storage feature. xr, yr: elements from one token's row to the next (a
// slice of fused [q | k | v] rows, or h * D packed).
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint FLAGS = 0;
const bool Y_F16 = (FLAGS & 1u) != 0u, X_F16 = (FLAGS & 2u) != 0u;
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BX { uint X[]; };
layout(std430, binding = 1) writeonly buffer BY { uint Y[]; };
layout(std430, binding = 2) readonly buffer BP { int Pos[]; };
// copy != 0: y = x, no rotation (converted where the types differ): out
// of the text model's fused [q | k | v] rows, V into its f16 KV cache in
// the pass shape that rotates K, and q and k into f32 rows for a family's
// q/k hook
layout(push_constant) uniform P { uint T, H, D, s0, s1; float base; uint xs, ys, ps, xr, yr, copy; } p;

float xin(uint i)
{
    return X_F16 ? unpackHalf2x16(X[i >> 1])[i & 1u] : uintBitsToFloat(X[i]);
}

// (cos, sin) of pair j of token t's angle.
vec2 cs_sn(uint t, uint j)
{
    uint half_d = p.D / 2u;
    float pos, expo;
    if (MODE == 0u) {
        pos = float(Pos[p.ps + t]);
        expo = 2.0 * float(j) / float(p.D);
    } else if (MODE == 1u) {
        uint c = j < p.s0 ? 0u : (j < p.s0 + p.s1 ? 1u : 2u);
        pos = float(Pos[p.ps + t * 3u + c]);
        expo = 2.0 * float(j) / float(p.D);
    } else if (MODE == 3u) {
        uint m = j % 3u;
        uint c = (m == 1u && j < 3u * p.s0) ? 1u : ((m == 2u && j < 3u * p.s1) ? 2u : 0u);
        pos = float(Pos[p.ps + t * 3u + c]);
        expo = 2.0 * float(j) / float(p.D);
    } else {
        uint q = half_d / 2u;
        uint c = j < q ? 0u : 1u;
        pos = float(Pos[p.ps + t * 2u + c]);
        expo = 2.0 * float(j - c * q) / float(half_d);
    }
    float theta = pos * pow(p.base, -expo);
    return vec2(cos(theta), sin(theta));
}

// Element e of the rotated head starting at X[b] (token t).
float rot(uint b, uint t, uint e)
{
    uint half_d = p.D / 2u;
    if (e < half_d) {
        vec2 r = cs_sn(t, e);
        return xin(b + e) * r.x - xin(b + e + half_d) * r.y;
    }
    vec2 r = cs_sn(t, e - half_d);
    return xin(b + e) * r.x + xin(b + e - half_d) * r.y;
}

void main()
{
    uint half_d = p.D / 2u;
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uint j = gid % half_d, th = gid / half_d;
    if (th >= p.T * p.H)
        return;
    uint t = th / p.H, hh = th - t * p.H;
    uint b = p.xs + t * p.xr + hh * p.D, yb = p.ys + t * p.yr + hh * p.D;
    if (Y_F16) { // j is the output word; ys counts f16 elements
        uint e = 2u * j;
        vec2 o = p.copy != 0u ? vec2(xin(b + e), xin(b + e + 1u)) : vec2(rot(b, t, e), rot(b, t, e + 1u));
        Y[(yb + e) >> 1] = packHalf2x16(o);
        return;
    }
    if (p.copy != 0u) {
        Y[yb + j] = floatBitsToUint(xin(b + j));
        Y[yb + j + half_d] = floatBitsToUint(xin(b + j + half_d));
        return;
    }
    vec2 r = cs_sn(t, j);
    float x0 = xin(b + j), x1 = xin(b + j + half_d);
    Y[yb + j] = floatBitsToUint(x0 * r.x - x1 * r.y);
    Y[yb + j + half_d] = floatBitsToUint(x1 * r.x + x0 * r.y);
}
