#version 450
// Rows of any weight or activation type into folio's int8 rows (QUANT_I8R,
// engine/quant/quant.h): per row s = max|x| / 127 into the 16-byte header,
// then q = x * (127 / max|x|) rounded to nearest even, clamped to +-127.
// Symmetric per-row scales are what the int8 GEMM (gemm_i8_cm2.comp) needs
// on both sides: one per output channel for the weights (quantized once at
// load, --gpu-weights int8), one per token for the activations (quantized
// on the device before every product, so no scale is calibrated offline).
// One workgroup per row: a pass for the maximum, a pass for the bytes (the
// second read of the row comes from cache).
layout(constant_id = 0) const uint DTYPE = 1; // the input's type (dq.glsl)
layout(constant_id = 1) const uint WG = 128;
layout(local_size_x_id = 1) in;
layout(std430, binding = 0) readonly buffer BW { uint W[]; };
layout(std430, binding = 1) buffer BY { uint Y[]; };
layout(push_constant) uniform P {
    uint rows, K;   // K: a multiple of 16
    uint row_bytes; // input row stride
    uint w_skip;    // bytes before input row 0
    uint y_skip;    // bytes before output row 0 (a multiple of 4)
} p;
#include "dq.glsl"

shared float red[WG];

void main()
{
    uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (r >= p.rows)
        return;
    uint t = gl_LocalInvocationID.x;
    uint row = p.w_skip + r * p.row_bytes;
    uint k4n = p.K >> 2;
    float m = 0.0;
    for (uint k4 = t; k4 < k4n; k4 += WG) {
        vec4 v = abs(dq4(row, k4 * 4u));
        m = max(m, max(max(v.x, v.y), max(v.z, v.w)));
    }
    red[t] = m;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s)
            red[t] = max(red[t], red[t + s]);
        barrier();
    }
    float amax = red[0];
    float inv = amax > 0.0 ? 127.0 / amax : 0.0;
    uint y = (p.y_skip >> 2) + r * ((p.K + 16u) >> 2);
    if (t < 4u)
        Y[y + t] = t == 0u ? floatBitsToUint(amax / 127.0) : 0u;
    for (uint k4 = t; k4 < k4n; k4 += WG) {
        ivec4 q = clamp(ivec4(roundEven(dq4(row, k4 * 4u) * inv)), -127, 127);
        Y[y + 4u + k4] = uint(q.x & 0xFF) | (uint(q.y & 0xFF) << 8) | (uint(q.z & 0xFF) << 16) |
                         (uint(q.w & 0xFF) << 24);
    }
}
