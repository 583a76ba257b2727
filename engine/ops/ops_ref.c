/*
 * C references for every op. Written for obviousness, not speed: double
 * accumulators where sums are long, libm transcendental functions, the
 * formulas of docs/reference/qwen25vl.md spelled out. Tests compare the GPU
 * against these; they are never used on the request path.
 */
#include "engine/ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ops_ref_matmul(const float *wd, const float *x, const float *bias, float *y, uint32_t m,
                    uint32_t n, uint32_t k)
{
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = 0; j < n; j++) {
            double s = bias ? bias[j] : 0.0;
            const float *w = wd + (size_t)j * k, *xr = x + (size_t)i * k;
            for (uint32_t e = 0; e < k; e++)
                s += (double)w[e] * xr[e];
            y[(size_t)i * n + j] = (float)s;
        }
}

void ops_ref_norm(int layer, const float *x, float *y, const float *w, const float *b,
                  uint32_t rows, uint32_t n, float eps)
{
    for (uint32_t r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        double mean = 0.0, var = 0.0;
        if (layer) {
            for (uint32_t i = 0; i < n; i++)
                mean += xr[i];
            mean /= n;
        }
        for (uint32_t i = 0; i < n; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        double inv = 1.0 / sqrt(var / n + eps);
        for (uint32_t i = 0; i < n; i++) {
            double v = (xr[i] - mean) * inv;
            if (w)
                v *= w[i];
            if (b)
                v += b[i];
            y[(size_t)r * n + i] = (float)v;
        }
    }
}

void ops_ref_softmax(const float *x, float *y, uint32_t rows, uint32_t n, float scale)
{
    for (uint32_t r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        double m = -INFINITY, s = 0.0;
        for (uint32_t i = 0; i < n; i++)
            if ((double)scale * xr[i] > m)
                m = (double)scale * xr[i];
        for (uint32_t i = 0; i < n; i++)
            s += exp((double)scale * xr[i] - m);
        for (uint32_t i = 0; i < n; i++)
            y[(size_t)r * n + i] = (float)(exp((double)scale * xr[i] - m) / s);
    }
}

void ops_ref_rope(const struct op_rope *a, const float *x, const int32_t *pos, float *y)
{
    uint32_t half = a->d / 2;
    if (a->copy) { /* no rotation */
        memcpy(y, x, sizeof(float) * a->t * a->h * a->d);
        return;
    }
    for (uint32_t t = 0; t < a->t; t++)
        for (uint32_t h = 0; h < a->h; h++)
            for (uint32_t j = 0; j < half; j++) {
                double p, expo;
                if (a->mode == OP_ROPE_NEOX) {
                    p = pos[t];
                    expo = 2.0 * j / a->d;
                } else if (a->mode == OP_ROPE_IMROPE) {
                    /* HF apply_interleaved_mrope: t everywhere, then h on
                     * pairs 1, 4, ... below 3*s1 and w on 2, 5, ... below 3*s2 */
                    uint32_t c = 0;
                    if (j % 3 == 1 && j < 3 * a->sections[1])
                        c = 1;
                    else if (j % 3 == 2 && j < 3 * a->sections[2])
                        c = 2;
                    p = pos[t * 3 + c];
                    expo = 2.0 * j / a->d;
                } else if (a->mode == OP_ROPE_MROPE) {
                    /* §4.2: component t for the first s0 pairs, h for the next
                     * s1, w for the rest; no exponent restart. */
                    uint32_t c = j < a->sections[0] ? 0 : j < a->sections[0] + a->sections[1] ? 1 : 2;
                    p = pos[t * 3 + c];
                    expo = 2.0 * j / a->d;
                } else {
                    /* §3.5: inv_freq_f = base^(-2f/(d/2)), f < d/4; row for the
                     * first d/4 pairs, column (restarted f) for the rest. */
                    uint32_t q = half / 2, c = j < q ? 0 : 1;
                    p = pos[t * 2 + c];
                    expo = 2.0 * (j - c * q) / half;
                }
                double th = p * pow(a->base, -expo);
                size_t b = ((size_t)t * a->h + h) * a->d;
                double x0 = x[b + j], x1 = x[b + j + half];
                y[b + j] = (float)(x0 * cos(th) - x1 * sin(th));
                y[b + j + half] = (float)(x1 * cos(th) + x0 * sin(th));
            }
}

static float r16(float x) { return quant_f16_to_f32(quant_f32_to_f16(x)); }

/* f16mm: the operands of the products rounded as flash_attn_cm.comp rounds
 * them (scores in the log2 domain, P rounded, the row sum not). */
static void ref_attention(const struct op_attention *a, const float *q, const float *k,
                          const float *v, const uint32_t *ranges, float *o, int f16mm)
{
    float qsc = a->scale * (float)1.4426950408889634;
    uint32_t group = a->hq / a->hkv, d = a->d;
    uint32_t qs = a->q_stride ? a->q_stride : a->hq * d, ks = a->k_stride ? a->k_stride : a->hkv * d;
    uint32_t vs = a->v_stride ? a->v_stride : a->hkv * d, os = a->o_stride ? a->o_stride : a->hq * d;
    double *sc = malloc(((size_t)a->tk + 1) * sizeof *sc);
    unsigned char *vis = malloc((size_t)a->tk + 1);
    if (!sc || !vis) {
        free(sc);
        free(vis);
        for (uint32_t i = 0; i < a->tq; i++) /* test-only path */
            memset(o + (size_t)i * os, 0, (size_t)a->hq * d * sizeof *o);
        return;
    }
    for (uint32_t i = 0; i < a->tq; i++)
        for (uint32_t h = 0; h < a->hq; h++) {
            /* visible keys: [lo[0], hi[0]) and, with two ranges, [lo[1], hi[1]) */
            uint32_t kh = h / group, lo[2] = {0, 0}, hi[2] = {a->tk, 0};
            for (int r = 0; ranges && r < (a->two_ranges ? 2 : 1); r++) {
                const uint32_t *rq = ranges + (size_t)i * (a->two_ranges ? 4 : 2) + 2 * r;
                lo[r] = rq[0];
                hi[r] = rq[1] < a->tk ? rq[1] : a->tk;
            }
            if (a->causal) {
                long lim = (long)i + (long)a->tk - (long)a->tq + 1;
                if (lim < 0)
                    lim = 0;
                for (int r = 0; r < 2; r++)
                    if ((long)hi[r] > lim)
                        hi[r] = (uint32_t)lim;
            }
            float *orow = o + (size_t)i * os + (size_t)h * d;
            memset(orow, 0, d * sizeof *orow);
            const float *qr = q + (size_t)i * qs + (size_t)h * d;
            double m = -INFINITY, s = 0.0;
            uint32_t nvis = 0;
            for (uint32_t j = 0; j < a->tk; j++) {
                vis[j] = (j >= lo[0] && j < hi[0]) || (j >= lo[1] && j < hi[1]);
                if (!vis[j])
                    continue;
                nvis++;
                const float *kr = k + (size_t)j * ks + (size_t)kh * d;
                double dot = 0.0;
                for (uint32_t e = 0; e < d; e++)
                    dot += f16mm ? (double)r16(qr[e] * qsc) * r16(kr[e]) : (double)qr[e] * kr[e];
                sc[j] = f16mm ? dot : dot * a->scale;
                if (sc[j] > m)
                    m = sc[j];
            }
            if (nvis == 0)
                continue;
            for (uint32_t j = 0; j < a->tk; j++) {
                if (!vis[j])
                    continue;
                sc[j] = f16mm ? exp2(sc[j] - m) : exp(sc[j] - m);
                s += sc[j];
                if (f16mm)
                    sc[j] = r16((float)sc[j]);
            }
            for (uint32_t e = 0; e < d; e++) {
                double acc = 0.0;
                for (uint32_t j = 0; j < a->tk; j++) {
                    if (!vis[j])
                        continue;
                    float ve = v[(size_t)j * vs + (size_t)kh * d + e];
                    acc += sc[j] * (f16mm ? r16(ve) : ve);
                }
                orow[e] = (float)(acc / s);
            }
        }
    free(sc);
    free(vis);
}

void ops_ref_attention(const struct op_attention *a, const float *q, const float *k,
                       const float *v, const uint32_t *ranges, float *o)
{
    ref_attention(a, q, k, v, ranges, o, 0);
}

void ops_ref_attention_f16mm(const struct op_attention *a, const float *q, const float *k,
                             const float *v, const uint32_t *ranges, float *o)
{
    ref_attention(a, q, k, v, ranges, o, 1);
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

void ops_ref_elem(enum op_elem_kind op, const float *a, const float *b, float *y, uint64_t n,
                  uint64_t nb, float s, float c0)
{
    for (uint64_t i = 0; i < n; i++) {
        double x = a[i], r;
        switch (op) {
        case OP_ADD: r = x + b[i % nb]; break;
        case OP_MUL: r = x * b[i % nb]; break;
        case OP_SILU: r = x * sigmoid(x); break;
        case OP_GELU_ERF: r = 0.5 * x * (1.0 + erf(x / sqrt(2.0))); break;
        case OP_GELU_TANH:
            r = 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
            break;
        case OP_QUICK_GELU: r = x * sigmoid(1.702 * x); break;
        case OP_SWIGLU: r = x * sigmoid(x) * b[i]; break;
        default: r = x * s + c0; break;
        }
        y[i] = (float)r;
    }
}

void ops_ref_scatter(const float *src, const int32_t *idx, uint32_t n, uint32_t width, float *dst,
                     uint32_t dst_rows)
{
    for (uint32_t i = 0; i < n; i++)
        if (idx[i] >= 0 && (uint32_t)idx[i] < dst_rows)
            memcpy(dst + (size_t)idx[i] * width, src + (size_t)i * width, width * sizeof *dst);
}

void ops_ref_concat2x2(const float *x, float *y, uint32_t gh, uint32_t gw, uint32_t w)
{
    uint32_t mw = gw / 2;
    for (uint32_t R = 0; R < gh / 2; R++)
        for (uint32_t C = 0; C < mw; C++)
            for (uint32_t q = 0; q < 4; q++) {
                uint32_t r = 2 * R + q / 2, c = 2 * C + q % 2;
                memcpy(y + ((size_t)(R * mw + C) * 4 + q) * w, x + ((size_t)r * gw + c) * w,
                       w * sizeof *y);
            }
}

void ops_ref_patchify(const struct op_patchify *a, const uint8_t *rgb, const float *lut, float *y)
{
    /* the groups visited window by window, raster inside each (win 0: the
     * whole grid is one window), as the tower's window order enumerates
     * them; each group's patches then in raster order */
    const uint32_t P = a->patch, S = a->merge, W = a->width;
    const uint32_t rows = a->height / (P * S), cols = W / (P * S);
    const uint32_t win = a->win ? a->win : (rows > cols ? rows : cols);
    const size_t PC = 3 * (size_t)P * P;
    size_t k = 0;
    for (uint32_t wr = 0; wr < rows; wr += win)
        for (uint32_t wc = 0; wc < cols; wc += win)
            for (uint32_t R = wr; R < wr + win && R < rows; R++)
                for (uint32_t C = wc; C < wc + win && C < cols; C++)
                    for (uint32_t s = 0; s < S * S; s++, k++)
                        for (size_t col = 0; col < PC; col++) {
                            size_t ch = col / ((size_t)P * P), q = col % ((size_t)P * P);
                            size_t py = (R * S + s / S) * (size_t)P + q / P;
                            size_t px = (C * S + s % S) * (size_t)P + q % P;
                            y[k * PC + col] = lut[ch * 256 + rgb[(py * W + px) * 3 + ch]];
                        }
}
