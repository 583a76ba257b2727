#version 450
// Row softmax of scale*x, in f32: max, sum of exp(x - max), normalise.
// One workgroup per row.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer BX { float X[]; };
layout(std430, binding = 1) writeonly buffer BY { float Y[]; };
layout(push_constant) uniform P { uint n, rows; float scale; uint xs, ys; } p;
shared float red[256];

void main()
{
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= p.rows)
        return;
    uint t = gl_LocalInvocationID.x, base = p.xs + row * p.n, ybase = p.ys + row * p.n;
    float m = -3.402823466e38;
    for (uint i = t; i < p.n; i += 256u)
        m = max(m, p.scale * X[base + i]);
    red[t] = m;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (t < s)
            red[t] = max(red[t], red[t + s]);
        barrier();
    }
    m = red[0];
    barrier();
    float sum = 0.0;
    for (uint i = t; i < p.n; i += 256u)
        sum += exp(p.scale * X[base + i] - m);
    red[t] = sum;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        barrier();
    }
    float inv = 1.0 / red[0];
    for (uint i = t; i < p.n; i += 256u)
        Y[ybase + i] = exp(p.scale * X[base + i] - m) * inv;
}
