#version 450
// Split-K attention, the merge (engine/ops/op_attention.c): attention.comp
// with nsplit = S > 1 left S partial results per (query, head), each share
// of the key tiles normalised by its own sum, with its log-sum-exp Ls
// (NEG: that share saw no key). Here
//   O = sum_s e^(Ls - M) Os / sum_s e^(Ls - M),   M = max_s Ls,
// zeros where no share saw a key (the fused kernel's contract). Shares are
// added in z order, so a result does not depend on scheduling. O is f32
// with its own row stride (a slice of the pass's output); partials are
// packed [s][q][h][d], log-sum-exps [s][q][h].
// One workgroup per (query, head); 64 threads over the head's elements.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer BP { float Op[]; };
layout(std430, binding = 1) readonly buffer BL { float Lp[]; };
layout(std430, binding = 2) writeonly buffer BO { float O[]; };
layout(push_constant) uniform P { uint Tq, Hq, D, S, os; } p;

#define NEG (-3.402823466e38)

void main()
{
    uint q = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, h = gl_WorkGroupID.z;
    if (q >= p.Tq)
        return;
    uint t = gl_LocalInvocationID.x, qh = q * p.Hq + h, plane = p.Tq * p.Hq;
    float mx = NEG;
    for (uint s = 0u; s < p.S; s++)
        mx = max(mx, Lp[s * plane + qh]);
    float sum = 0.0;
    for (uint s = 0u; s < p.S; s++) {
        float l = Lp[s * plane + qh];
        sum += l > NEG ? exp(l - mx) : 0.0;
    }
    float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    for (uint d = t; d < p.D; d += 64u) {
        float acc = 0.0;
        for (uint s = 0u; s < p.S; s++) {
            float l = Lp[s * plane + qh];
            if (l > NEG)
                acc += exp(l - mx) * Op[(s * plane + qh) * p.D + d];
        }
        O[q * p.os + h * p.D + d] = acc * inv;
    }
}
