#version 450
// Split attention, part 2 of 2: folds one key chunk's normalised output Oc
// (log-sum-exp Lc) into the running output O (log-sum-exp L):
//   O = (e^(L - M) O + e^(Lc - M) Oc) / (e^(L - M) + e^(Lc - M)),
//   L = M + log(e^(L - M) + e^(Lc - M)),  M = max(L, Lc).
// NEG marks "no visible key yet" on either side. O and Oc rows have their
// own strides (O may be a strided slice; Oc is packed).
// One workgroup per (query, head); 64 threads over the head's elements.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer BO { float O[]; };
layout(std430, binding = 1) readonly buffer BOC { float Oc[]; };
layout(std430, binding = 2) buffer BL { float L[]; };
layout(std430, binding = 3) readonly buffer BLC { float Lc[]; };
layout(push_constant) uniform P { uint Tq, Hq, D, os, ocs; } p;

#define NEG (-3.402823466e38)

void main()
{
    uint q = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, h = gl_WorkGroupID.z;
    if (q >= p.Tq)
        return;
    uint t = gl_LocalInvocationID.x, li = q * p.Hq + h;
    float la = L[li], lb = Lc[li];
    if (lb <= NEG)
        return; // this chunk adds nothing for this query
    float mx = max(la, lb);
    float wa = la > NEG ? exp(la - mx) : 0.0, wb = exp(lb - mx);
    float inv = 1.0 / (wa + wb);
    barrier(); // every thread has read L before thread 0 rewrites it
    for (uint d = t; d < p.D; d += 64u) {
        uint o = q * p.os + h * p.D + d;
        O[o] = (wa * O[o] + wb * Oc[q * p.ocs + h * p.D + d]) * inv;
    }
    if (t == 0u)
        L[li] = mx + log(wa + wb);
}
