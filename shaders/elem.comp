#version 450
// Element-wise ops, OP selects (specialization constant):
//   0 add   y = a + b[i % nb]     (nb = n: elementwise; nb = row: bias / broadcast)
//   1 mul   y = a * b[i % nb]
//   2 silu  y = a * sigmoid(a)
//   3 gelu  erf form  0.5 a (1 + erf(a / sqrt 2))
//   4 gelu  tanh form 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
//   5 quick_gelu  a * sigmoid(1.702 a)
//   6 swiglu  y = silu(a) * b     (a = gate, b = up)
//   7 scale   y = a * s + c
// GLSL has no erf: Abramowitz-Stegun 7.1.26 (|error| <= 1.5e-7).
layout(constant_id = 0) const uint OP = 0;
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer BA { float A[]; };
layout(std430, binding = 1) readonly buffer BB { float Bv[]; };
layout(std430, binding = 2) writeonly buffer BY { float Y[]; };
layout(push_constant) uniform P { uint n, nb; float s, c; uint as_, bs, ys; } p;

float erf_as(float x)
{
    float ax = abs(x);
    float t = 1.0 / (1.0 + 0.3275911 * ax);
    float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                     0.254829592) * t * exp(-ax * ax);
    return sign(x) * y;
}
float sigm(float x) { return 1.0 / (1.0 + exp(-x)); }

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i >= p.n)
        return;
    float a = A[p.as_ + i], y;
    if (OP == 0u)
        y = a + Bv[p.bs + i % p.nb];
    else if (OP == 1u)
        y = a * Bv[p.bs + i % p.nb];
    else if (OP == 2u)
        y = a * sigm(a);
    else if (OP == 3u)
        y = 0.5 * a * (1.0 + erf_as(a * 0.70710678118654752));
    else if (OP == 4u) {
        float u = 0.7978845608028654 * (a + 0.044715 * a * a * a);
        y = 0.5 * a * (1.0 + tanh(clamp(u, -15.0, 15.0)));
    } else if (OP == 5u)
        y = a * sigm(1.702 * a);
    else if (OP == 6u)
        y = a * sigm(a) * Bv[p.bs + i];
    else
        y = a * p.s + p.c;
    Y[p.ys + i] = y;
}
