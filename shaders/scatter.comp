#version 450
// Scatter rows into a sequence: dst[idx[i]] = src[i] (vision embeddings
// into the prompt's image-token positions). One workgroup per row. A
// destination larger than one binding is written in ranged dispatches:
// each binds destination rows [r0, r1) and writes only the rows that fall
// inside; src and idx rows are chunked the same way (ss/is/ds: element
// skips of the chunk's binding).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BS { float S[]; };
layout(std430, binding = 1) readonly buffer BI { int Idx[]; };
layout(std430, binding = 2) buffer BD { float Dst[]; };
layout(push_constant) uniform P { uint n, width, dst_rows, r0, r1, ss, is, ds; } p;

void main()
{
    uint i = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (i >= p.n)
        return;
    uint r = uint(Idx[p.is + i]);
    if (r >= p.dst_rows || r < p.r0 || r >= p.r1)
        return;
    for (uint c = gl_LocalInvocationID.x; c < p.width; c += 64u)
        Dst[p.ds + (r - p.r0) * p.width + c] = S[p.ss + i * p.width + c];
}
