#version 450
// Build-path smoke shader: y[i] = a * x[i] + b. It proves the chain
// glslc -> embedded SPIR-V -> pipeline -> dispatch works on every device
// folio runs on, before any real op is involved.
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { float a; float b; uint n; } p;
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n)
        y[i] = p.a * x[i] + p.b;
}
