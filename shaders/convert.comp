#version 450
// F32 <-> F16 conversion. F16 data is packed two per uint (little-endian,
// element 2i in the low half), so no 16-bit storage feature is needed.
// DIR 0: f32 -> f16 (round to nearest even by packHalf2x16), DIR 1: back.
// One thread per pair of elements; n elements from word as of A to word ys
// of Y (a range of a longer vector: engine/ops/op_elem.c).
layout(constant_id = 0) const uint DIR = 0;
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer BA { uint A[]; };
layout(std430, binding = 1) buffer BY { uint Y[]; };
layout(push_constant) uniform P { uint n, as, ys; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (2u * i >= p.n)
        return;
    bool two = 2u * i + 1u < p.n;
    if (DIR == 0u) {
        uint a = p.as + 2u * i;
        vec2 v = vec2(uintBitsToFloat(A[a]), two ? uintBitsToFloat(A[a + 1u]) : 0.0);
        Y[p.ys + i] = packHalf2x16(v);
    } else {
        vec2 v = unpackHalf2x16(A[p.as + i]);
        uint y = p.ys + 2u * i;
        Y[y] = floatBitsToUint(v.x);
        if (two)
            Y[y + 1u] = floatBitsToUint(v.y);
    }
}
