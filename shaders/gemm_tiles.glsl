// Which output tile a GEMM workgroup computes (gemm_cm.glsl, gemm_cm2.glsl).
//
// Workgroups start in about their linear order (x fastest), and the ones
// in flight together share operands through the L2 cache. Taken as
// dispatched (x: column tiles, y: row tiles), the tiles in flight are one
// row of tiles across the columns: each weight tile is fetched from memory
// by one workgroup, and the whole weight matrix streams from memory once
// per row of tiles (text gate/up at 1,400 rows: 11 times its 136 MB; a
// 48-row label pass on 32-row tiles: twice). Bands of G row tiles walked
// down first make the tiles in flight a block about G rows tall, so each
// weight tile serves up to G workgroups while the band's input rows stay
// in the cache.
//
// G is p.flags >> 8 (op_matmul.c's gemm_group); 0 takes the tiles as
// dispatched. Returns (column tile, row tile).
uvec2 gemm_tile()
{
    uint g = p.flags >> 8;
    if (g == 0u)
        return gl_WorkGroupID.xy;
    uint gx = gl_NumWorkGroups.x, gy = gl_NumWorkGroups.y;
    // A band is at most the grid's height: g * gx then stays below the
    // workgroup count, where a knob near its bound would wrap 32 bits.
    g = min(g, gy);
    uint id = gl_WorkGroupID.y * gx + gl_WorkGroupID.x;
    uint band = id / (g * gx), first = band * g;
    uint rows = min(gy - first, g); // the last band may be shorter
    uint r = id - band * g * gx;
    return uvec2(r / rows, first + r % rows);
}
