// The GEMM epilogue, one output element at a time: bias, residual,
// SwiGLU against a gate, GELU. Shared by gemm_cm.glsl (in the GEMM's own
// store) and splitk.comp (after the split-K slices are added), so both
// orders of work give the same arithmetic.
// The includer declares B[] (bias, f32), R[] (residual or gate, f32, Y's
// layout) and the push constants p.flags, p.b_skip, p.r_skip, p.ldy, p.y_col0.

float sigm(float x) { return 1.0 / (1.0 + exp(-x)); }
// Abramowitz-Stegun 7.1.26, as elem.comp
float erf_as(float x)
{
    float ax = abs(x);
    float t = 1.0 / (1.0 + 0.3275911 * ax);
    float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                     0.254829592) * t * exp(-ax * ax);
    return sign(x) * y;
}

// o: the sum for row m (of this dispatch), column n (of this dispatch).
float gemm_epi(float o, uint m, uint n)
{
    if ((p.flags & 1u) != 0u)
        o += B[p.b_skip + n];
    if ((p.flags & 2u) != 0u)
        o += R[p.r_skip + m * p.ldy + p.y_col0 + n];
    if ((p.flags & 4u) != 0u) {
        float g = R[p.r_skip + m * p.ldy + p.y_col0 + n];
        o *= g * sigm(g);
    }
    if ((p.flags & 8u) != 0u)
        o = 0.5 * o * (1.0 + erf_as(o * 0.70710678118654752));
    if ((p.flags & 16u) != 0u)
        o = o * sigm(1.702 * o);
    return o;
}
