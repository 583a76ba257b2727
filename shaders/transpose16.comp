#version 450
// f16 weight transposed at load: W (N rows of K) -> WT (K rows of N), for
// the workgroup-scope GEMM (gemm_cm2.comp, WT = 1), which NVIDIA's driver
// stages fastest with B row-major (op_matmul.c, "B row-major"). 32 x 32
// tiles through shared memory so both the reads and the writes are whole
// rows of the workgroup.
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 32, local_size_y = 8) in;
layout(std430, binding = 0) readonly buffer BI { float16_t I[]; };
layout(std430, binding = 1) writeonly buffer BO { float16_t O[]; };
layout(push_constant) uniform P { uint N, K, i_skip, o_skip; } p;

shared float t[32][33]; // +1: no bank conflicts on the column reads

void main()
{
    uint k0 = gl_WorkGroupID.x * 32u, n0 = gl_WorkGroupID.y * 32u;
    uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    for (uint r = ly; r < 32u; r += 8u) {
        uint n = n0 + r, k = k0 + lx;
        if (n < p.N && k < p.K)
            t[r][lx] = float(I[p.i_skip + n * p.K + k]);
    }
    barrier();
    for (uint r = ly; r < 32u; r += 8u) {
        uint k = k0 + r, n = n0 + lx;
        if (n < p.N && k < p.K)
            O[p.o_skip + k * p.N + n] = float16_t(t[lx][r]);
    }
}
