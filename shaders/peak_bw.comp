#version 450
// Roofline probe: device memory read bandwidth. A grid-stride loop reads
// the buffer once as vec4 and writes one float per thread.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer BI { vec4 I[]; };
layout(std430, binding = 1) writeonly buffer BO { float O[]; };
layout(push_constant) uniform P { uint n4; } p;
void main()
{
    uint stride = gl_NumWorkGroups.x * 256u;
    vec4 s = vec4(0);
    for (uint i = gl_GlobalInvocationID.x; i < p.n4; i += stride)
        s += I[i];
    O[gl_GlobalInvocationID.x] = s.x + s.y + s.z + s.w;
}
