#version 450
// Patch-merger 2x2 concatenation from a raster patch grid:
// y[R*(gw/2)+C] = [x[2R][2C], x[2R][2C+1], x[2R+1][2C], x[2R+1][2C+1]],
// each x row of width w. (In merge-group order this is a plain reshape and
// needs no kernel; docs/reference/qwen25vl.md §3.6.) A grid larger than one binding is
// done in bands of grid rows (gh here is the band's, even); xs/ys are the
// element skips of the band's bindings.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer BX { float X[]; };
layout(std430, binding = 1) writeonly buffer BY { float Y[]; };
layout(push_constant) uniform P { uint gh, gw, w, xs, ys; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    uint mw = p.gw / 2u, total = (p.gh / 2u) * mw * 4u * p.w;
    if (i >= total)
        return;
    uint c = i % p.w, q = (i / p.w) % 4u, o = i / (4u * p.w);
    uint R = o / mw, C = o % mw, dy = q >> 1, dx = q & 1u;
    Y[p.ys + i] = X[p.xs + ((2u * R + dy) * p.gw + 2u * C + dx) * p.w + c];
}
