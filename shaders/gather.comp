#version 450
// Row gather (embedding lookup): out[i] = dequant(table[ids[i]]) for the
// ids that fall in this dispatch's row range [r0, r1) of the table; a
// table larger than one binding is gathered in several ranged dispatches.
// One workgroup per id. Rows whose length is not a multiple of 4 (float
// tables only) are copied element by element.
layout(constant_id = 0) const uint DTYPE = 0;
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BW { uint W[]; };
layout(std430, binding = 1) readonly buffer BI { int Ids[]; };
layout(std430, binding = 2) buffer BY { vec4 Y4[]; };
layout(std430, binding = 2) buffer BY1 { float Y1[]; };
layout(push_constant) uniform P { uint n_ids, K, row_bytes, w_skip, r0, r1, is, ys; } p;
#include "dq.glsl"

void main()
{
    uint i = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (i >= p.n_ids)
        return;
    uint id = uint(Ids[p.is + i]);
    if (id < p.r0 || id >= p.r1)
        return;
    uint row = p.w_skip + (id - p.r0) * p.row_bytes;
    uint k4n = p.K >> 2;
    if ((p.K & 3u) == 0u) {
        for (uint k4 = gl_LocalInvocationID.x; k4 < k4n; k4 += 64u)
            Y4[(p.ys >> 2) + i * k4n + k4] = dq4(row, k4 * 4u);
    } else {
        for (uint k = gl_LocalInvocationID.x; k < p.K; k += 64u)
            Y1[p.ys + i * p.K + k] = dq1(row, k);
    }
}
