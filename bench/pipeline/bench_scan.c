/*
 * The synthetic office scan the benches share (bench ingest writes it as
 * files, bench pdf and bench ocr wrap it in PDFs): below bench_ingest.c and
 * bench_pdf.c, so neither needs the other.
 */
#include "bench/pipeline/bench.h"
#include "common/rng.h"

#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

/* A 300-dpi Letter "scan": light paper with a little noise, rows of dark
 * word-like blocks, encoded as colour 4:2:0 quality 85, the way office
 * scanners write them (about 450 KB a page). */
uint8_t *bench_scan_page_jpeg(int w, int h, uint32_t seed, size_t *len)
{
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    if (!rgb)
        return NULL;
    uint32_t s = seed * 2654435761u + 1;
#define NEXT() folio_rng32_next(&s)
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) {
        uint8_t v = (uint8_t)(240 + (NEXT() & 3));
        rgb[3 * i] = rgb[3 * i + 1] = v;
        rgb[3 * i + 2] = (uint8_t)(v - 10);
    }
    int line_h = h / 40 > 4 ? h / 40 : 4;
    for (int y0 = line_h; y0 + line_h < h; y0 += line_h * 2) {
        int x = w / 12;
        while (x < w - w / 12) {
            int ww = 3 + (int)(NEXT() % (unsigned)(w / 20 + 4));
            uint8_t ink = (uint8_t)(20 + NEXT() % 40);
            for (int y = y0 + (int)(NEXT() % 3); y < y0 + line_h * 2 / 3; y++)
                for (int xx = x; xx < x + ww && xx < w; xx++)
                    memset(rgb + ((size_t)y * (size_t)w + (size_t)xx) * 3, ink, 3);
            x += ww + 2 + (int)(NEXT() % (unsigned)(w / 60 + 2));
        }
    }
#undef NEXT
    tjhandle tj = tjInitCompress();
    unsigned char *jb = NULL;
    unsigned long jl = 0;
    uint8_t *out = NULL;
    if (tj && tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jb, &jl, TJSAMP_420, 85, 0) == 0) {
        out = malloc(jl);
        if (out) {
            memcpy(out, jb, jl);
            *len = jl;
        }
    }
    tjFree(jb);
    if (tj)
        tjDestroy(tj);
    free(rgb);
    return out;
}
