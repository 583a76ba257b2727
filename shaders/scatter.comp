#version 450
// Scatter rows into a sequence: dst[idx[i]] = src[i] (vision embeddings
// into the prompt's image-token positions). One workgroup per row.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BS { float S[]; };
layout(std430, binding = 1) readonly buffer BI { int Idx[]; };
layout(std430, binding = 2) buffer BD { float Dst[]; };
layout(push_constant) uniform P { uint n, width, dst_rows; } p;

void main()
{
    uint i = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (i >= p.n)
        return;
    uint r = uint(Idx[i]);
    if (r >= p.dst_rows)
        return;
    for (uint c = gl_LocalInvocationID.x; c < p.width; c += 64u)
        Dst[r * p.width + c] = S[i * p.width + c];
}
