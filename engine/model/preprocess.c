/*
 * Image preprocessing (preprocess.h; docs/reference/qwen25vl.md §2).
 *
 * The resampler reproduces Pillow's ImagingResample for 8-bit data because
 * the parity reference resizes with Pillow: the kernel weights of each
 * output pixel are computed in double, normalised to sum 1, then rounded
 * to 22-bit fixed point; each pass accumulates integers from a 0.5 bias
 * and clamps (acc >> 22) to 0..255. The horizontal pass only produces the
 * source rows the vertical pass will read. Matching that arithmetic step by
 * step is what makes the resized bytes identical, not merely close.
 *
 * Rounding in smart resize follows Python: round() is half-to-even (a
 * 70-pixel side becomes 56, not 84).
 */
#include "engine/model/preprocess.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PREC_BITS 22 /* Pillow: 32 - 8 - 2 */

static const float CLIP_MEAN[3] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float CLIP_STD[3] = {0.26862954f, 0.26130258f, 0.27577711f};

void prep_config_defaults(struct prep_config *c)
{
    if (!c->min_pixels)
        c->min_pixels = PREP_MIN_PIXELS;
    if (!c->max_pixels)
        c->max_pixels = PREP_MAX_PIXELS;
    if (!c->patch)
        c->patch = 14;
    if (!c->merge)
        c->merge = 2;
    if (c->std[0] == 0.0f && c->std[1] == 0.0f && c->std[2] == 0.0f) {
        memcpy(c->mean, CLIP_MEAN, sizeof c->mean);
        memcpy(c->std, CLIP_STD, sizeof c->std);
    }
}

/* Python's round(): halves go to the even neighbour. */
static double round_half_even(double x)
{
    double r = floor(x), d = x - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0))
        r += 1.0;
    return r;
}

int prep_smart_resize(uint32_t h, uint32_t w, const struct prep_config *cin, uint32_t *oh,
                      uint32_t *ow, struct folio_err *err)
{
    struct prep_config c = *cin;
    prep_config_defaults(&c);
    if (h == 0 || w == 0)
        return folio_err_set(err, FOLIO_EINVAL, "image is empty (%ux%u)", w, h);
    double mx = h > w ? h : w, mn = h > w ? w : h;
    if (mx / mn > PREP_MAX_RATIO)
        return folio_err_set(err, FOLIO_EINVAL, "image %ux%u has an aspect ratio of %.0f; the "
                             "vision model takes at most %.0f", w, h, mx / mn, PREP_MAX_RATIO);
    double f = (double)c.patch * c.merge;
    double hb = round_half_even(h / f) * f, wb = round_half_even(w / f) * f;
    if (hb * wb > c.max_pixels) {
        double beta = sqrt((double)h * w / c.max_pixels);
        hb = floor(h / beta / f) * f;
        wb = floor(w / beta / f) * f;
        if (hb < f)
            hb = f;
        if (wb < f)
            wb = f;
    } else if (hb * wb < c.min_pixels) {
        double beta = sqrt((double)c.min_pixels / ((double)h * w));
        hb = ceil(h * beta / f) * f;
        wb = ceil(w * beta / f) * f;
    }
    if (hb < f)
        hb = f;
    if (wb < f)
        wb = f;
    if (hb > 1e6 || wb > 1e6)
        return folio_err_set(err, FOLIO_ELIMIT, "image %ux%u resizes to %.0fx%.0f", w, h, wb, hb);
    *oh = (uint32_t)hb;
    *ow = (uint32_t)wb;
    return 0;
}

static double bicubic(double x)
{
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0)
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc for one axis:
 * bounds[2i] = first source index, bounds[2i+1] = count; kk = ksize ints
 * per output index. Returns ksize, 0 on allocation failure. */
static int coeffs(uint32_t in, uint32_t out, int **boundsp, int **kkp)
{
    double scale = (double)in / out, fscale = scale < 1.0 ? 1.0 : scale;
    double support = 2.0 * fscale;
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = malloc((size_t)out * 2 * sizeof *bounds);
    int *kk = malloc((size_t)out * ksize * sizeof *kk);
    double *k = malloc((size_t)ksize * sizeof *k);
    if (!bounds || !kk || !k) {
        free(bounds);
        free(kk);
        free(k);
        return 0;
    }
    for (uint32_t xx = 0; xx < out; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / fscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > (int)in)
            xmax = (int)in;
        xmax -= xmin;
        int x = 0;
        for (; x < xmax; x++) {
            k[x] = bicubic((x + xmin - center + 0.5) * ss);
            ww += k[x];
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0)
                k[x] /= ww;
        for (; x < ksize; x++)
            k[x] = 0.0;
        for (x = 0; x < ksize; x++)
            kk[(size_t)xx * ksize + x] = k[x] < 0 ? (int)(-0.5 + k[x] * (1 << PREC_BITS))
                                                  : (int)(0.5 + k[x] * (1 << PREC_BITS));
        bounds[xx * 2] = xmin;
        bounds[xx * 2 + 1] = xmax;
    }
    free(k);
    *boundsp = bounds;
    *kkp = kk;
    return ksize;
}

static uint8_t clip8(int v)
{
    v >>= PREC_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

int prep_resize_bicubic(const uint8_t *src, uint32_t w, uint32_t h, size_t stride, int channels,
                        uint8_t *dst, uint32_t ow, uint32_t oh, struct folio_err *err)
{
    if (channels != 1 && channels != 3)
        return folio_err_set(err, FOLIO_EINVAL, "resize: %d channels (1 or 3 supported)",
                             channels);
    if (!w || !h || !ow || !oh)
        return folio_err_set(err, FOLIO_EINVAL, "resize: empty image %ux%u -> %ux%u", w, h, ow,
                             oh);
    int *bh = NULL, *kh = NULL, *bv = NULL, *kv = NULL;
    int ksh = coeffs(w, ow, &bh, &kh), ksv = coeffs(h, oh, &bv, &kv);
    /* source rows the vertical pass reads */
    uint32_t y0 = ksv ? (uint32_t)bv[0] : 0;
    uint32_t y1 = ksv ? (uint32_t)(bv[oh * 2 - 2] + bv[oh * 2 - 1]) : 0;
    uint8_t *tmp = ksv ? malloc((size_t)(y1 - y0) * ow * 3) : NULL;
    if (!ksh || !ksv || !tmp) {
        free(bh);
        free(kh);
        free(bv);
        free(kv);
        free(tmp);
        return folio_err_set(err, FOLIO_ENOMEM, "resize %ux%u -> %ux%u: out of host memory", w, h,
                             ow, oh);
    }
    int need_h = ow != w, need_v = oh != h;
    /* horizontal pass (or a plain copy of the rows) into tmp */
    for (uint32_t y = y0; y < y1; y++) {
        const uint8_t *row = src + (size_t)y * stride;
        uint8_t *o = tmp + (size_t)(y - y0) * ow * 3;
        for (uint32_t xx = 0; xx < ow; xx++) {
            if (!need_h) {
                for (int ch = 0; ch < 3; ch++)
                    o[xx * 3 + ch] = row[(size_t)xx * channels + (channels == 3 ? ch : 0)];
                continue;
            }
            int xmin = bh[xx * 2], xmax = bh[xx * 2 + 1];
            const int *k = kh + (size_t)xx * ksh;
            for (int ch = 0; ch < 3; ch++) {
                int ss = 1 << (PREC_BITS - 1);
                int cc = channels == 3 ? ch : 0;
                for (int x = 0; x < xmax; x++)
                    ss += row[(size_t)(x + xmin) * channels + cc] * k[x];
                o[xx * 3 + ch] = clip8(ss);
            }
        }
    }
    /* vertical pass (or copy) into dst */
    for (uint32_t yy = 0; yy < oh; yy++) {
        uint8_t *o = dst + (size_t)yy * ow * 3;
        if (!need_v) {
            memcpy(o, tmp + (size_t)(yy - y0) * ow * 3, (size_t)ow * 3);
            continue;
        }
        int ymin = bv[yy * 2] - (int)y0, ymax = bv[yy * 2 + 1];
        const int *k = kv + (size_t)yy * ksv;
        for (uint32_t xx = 0; xx < ow * 3; xx++) {
            int ss = 1 << (PREC_BITS - 1);
            for (int y = 0; y < ymax; y++)
                ss += tmp[(size_t)(y + ymin) * ow * 3 + xx] * k[y];
            o[xx] = clip8(ss);
        }
    }
    free(bh);
    free(kh);
    free(bv);
    free(kv);
    free(tmp);
    return 0;
}

void prep_norm_table(const struct prep_config *cin, float lut[3 * 256])
{
    struct prep_config c = *cin;
    prep_config_defaults(&c);
    for (int ch = 0; ch < 3; ch++)
        for (int v = 0; v < 256; v++)
            lut[ch * 256 + v] = ((float)v * (1.0f / 255.0f) - c.mean[ch]) / c.std[ch];
}

int prep_patches(const uint8_t *rgb, uint32_t w, uint32_t h, const struct prep_config *cin,
                 int temporal, float *out, struct folio_err *err)
{
    struct prep_config c = *cin;
    prep_config_defaults(&c);
    uint32_t P = c.patch, S = c.merge, f = P * S;
    if (temporal != 1 && temporal != 2)
        return folio_err_set(err, FOLIO_EINVAL, "patches: temporal %d (1 or 2)", temporal);
    if (!w || !h || w % f || h % f)
        return folio_err_set(err, FOLIO_EINVAL, "patches: image %ux%u is not a multiple of %u",
                             w, h, f);
    float lut[3 * 256];
    prep_norm_table(&c, lut);
    uint32_t gh = h / P, gw = w / P, mw = gw / S;
    size_t plane = (size_t)P * P, row_len = 3 * (size_t)temporal * plane;
    for (uint32_t r = 0; r < gh; r++)
        for (uint32_t cc = 0; cc < gw; cc++) {
            uint32_t R = r / S, C = cc / S, dy = r % S, dx = cc % S;
            size_t k = (((size_t)R * mw + C) * S + dy) * S + dx;
            float *o = out + k * row_len;
            for (int ch = 0; ch < 3; ch++)
                for (uint32_t py = 0; py < P; py++)
                    for (uint32_t px = 0; px < P; px++) {
                        uint8_t v = rgb[((size_t)(r * P + py) * w + cc * P + px) * 3 + ch];
                        for (int t = 0; t < temporal; t++)
                            o[((size_t)ch * temporal + t) * plane + py * P + px] = lut[ch * 256 + v];
                    }
        }
    return 0;
}

/* The sizes and the resized bytes; patches, when asked for, as temporal. */
static int prep_run(const uint8_t *pixels, uint32_t w, uint32_t h, size_t stride, int channels,
                    const struct prep_config *cin, int temporal, int patches,
                    struct prep_image *out, struct folio_err *err)
{
    memset(out, 0, sizeof *out);
    struct prep_config c = *cin;
    prep_config_defaults(&c);
    uint32_t oh, ow;
    int rc = prep_smart_resize(h, w, &c, &oh, &ow, err);
    if (rc)
        return rc;
    out->height = oh;
    out->width = ow;
    out->grid_h = oh / c.patch;
    out->grid_w = ow / c.patch;
    out->n_patches = out->grid_h * out->grid_w;
    out->row_len = 3u * (uint32_t)temporal * c.patch * c.patch;
    out->resized = malloc((size_t)oh * ow * 3);
    if (patches)
        out->patches = malloc((size_t)out->n_patches * out->row_len * sizeof(float));
    if (!out->resized || (patches && !out->patches)) {
        prep_image_free(out);
        return folio_err_set(err, FOLIO_ENOMEM, "preprocess: out of host memory for %ux%u", ow,
                             oh);
    }
    rc = prep_resize_bicubic(pixels, w, h, stride, channels, out->resized, ow, oh, err);
    if (!rc && patches)
        rc = prep_patches(out->resized, ow, oh, &c, temporal, out->patches, err);
    if (rc)
        prep_image_free(out);
    return rc;
}

int prep_image(const uint8_t *pixels, uint32_t w, uint32_t h, size_t stride, int channels,
               const struct prep_config *c, int temporal, struct prep_image *out,
               struct folio_err *err)
{
    return prep_run(pixels, w, h, stride, channels, c, temporal, 1, out, err);
}

int prep_image_resize(const uint8_t *pixels, uint32_t w, uint32_t h, size_t stride, int channels,
                      const struct prep_config *c, struct prep_image *out, struct folio_err *err)
{
    return prep_run(pixels, w, h, stride, channels, c, 1, 0, out, err);
}

void prep_image_free(struct prep_image *im)
{
    free(im->resized);
    free(im->patches);
    im->resized = NULL;
    im->patches = NULL;
}
