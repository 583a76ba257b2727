/*
 * Pixel buffers of a decoded page (struct ingest_page): allocated with the
 * decode memory budget, fitted to a longest side by an area average, and
 * turned by an EXIF orientation. The decoders (jpeg.c, png.c, lept.c,
 * pdf.c) fill them and decode.c drives the decoders; keeping the buffers
 * here, below both, means neither calls back up into the other.
 */
#include "ingest/ingest_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ingest_page_free(struct ingest_page *p)
{
    if (!p)
        return;
    ingest_page_unbudget(p);
    free(p->pixels);
    memset(p, 0, sizeof *p);
}

void ingest_page_unbudget(struct ingest_page *p)
{
    ingest_membudget_release(p->budget, p->reserved);
    p->budget = NULL;
    p->reserved = 0;
}

int ingest_page_alloc(struct ingest_page *p, int w, int h, int channels, struct folio_err *err)
{
    memset(p, 0, sizeof *p);
    if (w <= 0 || h <= 0 || (uint64_t)w * (uint64_t)h > INGEST_HARD_MAX_PIXELS)
        return folio_err_set(err, FOLIO_ELIMIT, "page size %dx%d is outside what folio decodes", w, h);
    p->width = w;
    p->height = h;
    p->channels = channels;
    p->stride = (size_t)w * (size_t)channels;
    p->pixels = malloc(p->stride * (size_t)h);
    if (!p->pixels)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory for a %dx%dx%d page (%zu bytes)", w, h,
                             channels, p->stride * (size_t)h);
    return 0;
}

/* Per output coordinate: first source index, count and normalised weights
 * of the source cells its area covers. */
struct area_axis {
    int *start, *count;
    float *w;
    int maxc;
};

static void axis_free(struct area_axis *a)
{
    free(a->start);
    free(a->count);
    free(a->w);
}

static int axis_plan(struct area_axis *a, int src, int dst)
{
    double f = (double)src / dst;
    a->maxc = (int)ceil(f) + 1;
    a->start = malloc((size_t)dst * sizeof(int));
    a->count = malloc((size_t)dst * sizeof(int));
    a->w = malloc((size_t)dst * (size_t)a->maxc * sizeof(float));
    if (!a->start || !a->count || !a->w)
        return -1;
    for (int o = 0; o < dst; o++) {
        double lo = o * f, hi = (o + 1) * f;
        int i0 = (int)floor(lo), i1 = (int)ceil(hi);
        if (i1 > src)
            i1 = src;
        int c = 0;
        for (int i = i0; i < i1 && c < a->maxc; i++) {
            double l = i > lo ? i : lo, h = i + 1 < hi ? i + 1 : hi;
            a->w[(size_t)o * (size_t)a->maxc + (size_t)c++] = (float)((h - l) / f);
        }
        a->start[o] = i0;
        a->count[o] = c;
    }
    return 0;
}

int ingest_page_fit(struct ingest_page *p, int max_side, struct folio_err *err)
{
    int side = p->width > p->height ? p->width : p->height;
    if (max_side <= 0 || side <= max_side)
        return 0;
    double s = (double)max_side / side;
    int dw = (int)lround(p->width * s), dh = (int)lround(p->height * s);
    if (dw < 1)
        dw = 1;
    if (dh < 1)
        dh = 1;
    if (dw > max_side)
        dw = max_side;
    if (dh > max_side)
        dh = max_side;
    const int c = p->channels;
    struct area_axis ax = {0}, ay = {0};
    struct ingest_page o;
    float *acc = NULL, *row = NULL;
    int rc = ingest_page_alloc(&o, dw, dh, c, err);
    if (rc)
        return rc;
    acc = malloc((size_t)dw * (size_t)c * sizeof(float));
    row = malloc((size_t)dw * (size_t)c * sizeof(float));
    if (!acc || !row || axis_plan(&ax, p->width, dw) || axis_plan(&ay, p->height, dh)) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory scaling a page to %dx%d", dw, dh);
        ingest_page_free(&o);
        goto out;
    }
    for (int y = 0; y < dh; y++) {
        memset(acc, 0, (size_t)dw * (size_t)c * sizeof(float));
        for (int k = 0; k < ay.count[y]; k++) {
            float wy = ay.w[(size_t)y * (size_t)ay.maxc + (size_t)k];
            const uint8_t *src = p->pixels + (size_t)(ay.start[y] + k) * p->stride;
            for (int x = 0; x < dw; x++) {
                const float *wx = ax.w + (size_t)x * (size_t)ax.maxc;
                const uint8_t *s0 = src + (size_t)ax.start[x] * (size_t)c;
                for (int ch = 0; ch < c; ch++) {
                    float v = 0;
                    for (int j = 0; j < ax.count[x]; j++)
                        v += wx[j] * s0[(size_t)j * (size_t)c + (size_t)ch];
                    row[x * c + ch] = v;
                }
            }
            for (int i = 0; i < dw * c; i++)
                acc[i] += wy * row[i];
        }
        uint8_t *dst = o.pixels + (size_t)y * o.stride;
        for (int i = 0; i < dw * c; i++) {
            float v = acc[i] + 0.5f;
            dst[i] = (uint8_t)(v >= 255.f ? 255 : v <= 0.f ? 0 : (int)v);
        }
    }
    if (p->ppi > 0)
        o.ppi = (int)lround(p->ppi * s);
    ingest_page_free(p);
    *p = o;
out:
    free(acc);
    free(row);
    axis_free(&ax);
    axis_free(&ay);
    return rc;
}

int ingest_page_orient(struct ingest_page *p, int orientation, struct folio_err *err)
{
    if (orientation < 2 || orientation > 8)
        return 0;
    const int W = p->width, H = p->height, c = p->channels;
    const bool swap = orientation >= 5;
    struct ingest_page o;
    int rc = ingest_page_alloc(&o, swap ? H : W, swap ? W : H, c, err);
    if (rc)
        return rc;
    /* For each displayed pixel (x, y), the stored pixel it shows (EXIF
     * 2.32 §4.6.4 orientation values). */
    for (int y = 0; y < o.height; y++) {
        uint8_t *dst = o.pixels + (size_t)y * o.stride;
        for (int x = 0; x < o.width; x++) {
            int sx, sy;
            switch (orientation) {
            case 2: sx = W - 1 - x; sy = y; break;
            case 3: sx = W - 1 - x; sy = H - 1 - y; break;
            case 4: sx = x; sy = H - 1 - y; break;
            case 5: sx = y; sy = x; break;
            case 6: sx = y; sy = H - 1 - x; break;
            case 7: sx = W - 1 - y; sy = H - 1 - x; break;
            default: sx = W - 1 - y; sy = x; break; /* 8 */
            }
            memcpy(dst + (size_t)x * (size_t)c, p->pixels + (size_t)sy * p->stride + (size_t)sx * (size_t)c,
                   (size_t)c);
        }
    }
    o.ppi = p->ppi;
    ingest_page_free(p);
    *p = o;
    return 0;
}

