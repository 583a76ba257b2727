#version 450
// A resized 8-bit RGB page (rows packed, 3 bytes a pixel, read four to a
// word: no 8-bit storage feature needed) into the vision tower's patch
// rows, as engine/model/preprocess.c prep_patches writes them at temporal
// 1: row k = patch s of merged group i, columns (channel, pixel row, pixel
// column), each value lut[channel][byte] -- the host's own table of
// (v/255 - mean)/std, so the rows equal prep_patches' bit for bit (a
// division here would round differently).
//
// Group order: window order when win > 0 (windows of win x win merged
// groups in raster order, raster inside a window: vis_window_index), else
// raster order. Workgroup j writes the image's row k0 + j; the bound rows
// start at pixel row y0 (the dispatch binds the pixel rows its output rows
// need: engine/ops/op_rows.c). One workgroup a row of 3 P P floats.
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer BR { uint Rgb[]; };
layout(std430, binding = 1) readonly buffer BL { float Lut[]; };
layout(std430, binding = 2) buffer BY { float Y[]; };
layout(push_constant) uniform P {
    uint n, k0, width, cols, rows, win, side, merge, y0, rs, ys;
} p;

uint byte_at(uint b)
{
    return (Rgb[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu;
}

void main()
{
    uint j = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (j >= p.n)
        return;
    uint G = p.merge * p.merge, k = p.k0 + j, i = k / G, s = k % G;
    // merged group i of the order -> (R, C) on the merged grid
    uint R, C;
    if (p.win == 0u) {
        R = i / p.cols;
        C = i % p.cols;
    } else {
        // every window row before i's is win merged rows tall; the windows
        // before i's in its window row are win wide
        uint wr = i / (p.win * p.cols), rem = i - wr * p.win * p.cols;
        uint hh = min(p.win, p.rows - wr * p.win);
        uint wc = rem / (hh * p.win), rem2 = rem - wc * hh * p.win;
        uint ww = min(p.win, p.cols - wc * p.win);
        R = wr * p.win + rem2 / ww;
        C = wc * p.win + rem2 % ww;
    }
    uint px0 = (C * p.merge + s % p.merge) * p.side;
    uint py0 = (R * p.merge + s / p.merge) * p.side - p.y0;
    uint plane = p.side * p.side, PC = 3u * plane;
    for (uint c = gl_LocalInvocationID.x; c < PC; c += 128u) {
        uint ch = c / plane, q = c - ch * plane, py = q / p.side, px = q - py * p.side;
        uint b = p.rs + ((py0 + py) * p.width + px0 + px) * 3u + ch;
        Y[p.ys + j * PC + c] = Lut[ch * 256u + byte_at(b)];
    }
}
