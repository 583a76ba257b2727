#version 450
// Weight expansion at load (--gpu-weights f16): rows of any GGUF weight
// type dequantized to f16 on the device, so the tensor-core GEMM reads the
// form it wants and no kernel decodes blocks on the request path. One
// workgroup per row; each invocation writes 4 elements (one dq4 group,
// which always shares one scale) as two packed half pairs.
layout(constant_id = 0) const uint DTYPE = 0;
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer BW { uint W[]; };
layout(std430, binding = 1) buffer BY { uvec2 Y2[]; };
layout(push_constant) uniform P { uint rows, K, row_bytes, w_skip, y_skip; } p;
#include "dq.glsl"

void main()
{
    uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (r >= p.rows)
        return;
    uint row = p.w_skip + r * p.row_bytes;
    uint k4n = p.K >> 2;
    for (uint k4 = gl_LocalInvocationID.x; k4 < k4n; k4 += 128u) {
        vec4 v = dq4(row, k4 * 4u);
        Y2[(p.y_skip >> 2) + r * k4n + k4] = uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
    }
}
