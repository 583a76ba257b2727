#version 450
// Roofline probe: peak f32 FMA throughput. Eight independent vec4 FMA
// chains per thread hide latency; the result is stored so nothing is
// eliminated. FLOPs = threads * iters * 8 chains * 4 lanes * 2.
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer BO { float O[]; };
layout(push_constant) uniform P { uint iters; float a; } p;
void main()
{
    vec4 x0 = vec4(gl_GlobalInvocationID.x) * 1e-9, x1 = x0 + 1.0, x2 = x0 + 2.0, x3 = x0 + 3.0;
    vec4 x4 = x0 + 4.0, x5 = x0 + 5.0, x6 = x0 + 6.0, x7 = x0 + 7.0;
    vec4 m = vec4(p.a), c = vec4(1e-7);
    for (uint i = 0; i < p.iters; i++) {
        x0 = fma(x0, m, c); x1 = fma(x1, m, c); x2 = fma(x2, m, c); x3 = fma(x3, m, c);
        x4 = fma(x4, m, c); x5 = fma(x5, m, c); x6 = fma(x6, m, c); x7 = fma(x7, m, c);
    }
    vec4 s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
    O[gl_GlobalInvocationID.x] = s.x + s.y + s.z + s.w;
}
