/*
 * quant — GGUF tensor block layouts and their C reference (de)quantisers.
 *
 * Layouts are ggml's, byte for byte (ggml-common.h / ggml-quants.c are the
 * authority); every block is read and written through explicit byte offsets
 * rather than C structs so that no compiler padding or host endianness can
 * change them. On-disk GGUF is little-endian; folio only targets
 * little-endian hosts, but the f16 fields are still assembled byte by byte.
 *
 *   Q8_0  34 B / 32:  f16 d | i8 qs[32]                    x = d*q
 *   Q4_K 144 B / 256: f16 d | f16 dmin | u8 scales[12] | u8 qs[128]
 *   Q5_K 176 B / 256: f16 d | f16 dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]
 *   Q6_K 210 B / 256: u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d
 *
 * Q4_K/Q5_K: eight sub-blocks of 32 with a 6-bit scale and a 6-bit min each,
 * x = d*sc*q - dmin*m. The 12 scale bytes hold sub-blocks 0..3 in the low 6
 * bits of bytes 0..3 (scale) and 4..7 (min); sub-blocks 4..7 keep their low
 * nibbles in bytes 8..11 (scale low, min high) and their top two bits in the
 * spare top bits of bytes 0..3 (scale) and 4..7 (min). Quants are stored per
 * 64-value chunk: 32 bytes whose low nibbles are the chunk's first 32 values
 * and high nibbles the next 32. Q5_K's fifth bit lives in qh: bit 2c (first
 * half) and 2c+1 (second half) of byte l for chunk c.
 *
 * Q6_K: sixteen sub-blocks of 16 with an int8 scale, x = d*sc*(q-32). Per
 * 128-value half, ql holds 64 bytes (values 0..31 and 64..95 share bytes
 * 0..31 as low/high nibble; 32..63 and 96..127 share bytes 32..63) and qh
 * 32 bytes with the 2-bit tops of values l, l+32, l+64, l+96 at bit pairs
 * 0, 2, 4, 6.
 *
 * The quantisers are folio's own (least-squares fits per sub-block, then
 * super-block scales quantised and levels re-chosen against the *stored*
 * scales). They need not match ggml's quantiser value for value: any block
 * they produce is a valid ggml block, and the dequantisers are exact.
 */
#include "engine/quant/quant.h"

#include <math.h>
#include <string.h>

enum { QK8_0 = 32, QK_K = 256 };
enum { Q8_0_BYTES = 34, Q4_K_BYTES = 144, Q5_K_BYTES = 176, Q6_K_BYTES = 210 };

/* ---------------------------------------------------------------- f16/bf16 */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float quant_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf / NaN: keep the payload */
        return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return bits_f32(sign);
        /* Subnormal: value = man * 2^-24, exact in f32. */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t quant_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xff) /* inf stays inf; NaN stays a quiet NaN */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f) /* too large: round-to-nearest gives inf */
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        /* Result is subnormal (or zero): shift the full significand down and
         * round to nearest even on the bits that fall off. */
        if (e < -10)
            return sign;
        uint32_t m = man | 0x800000u;
        int shift = 14 - e; /* 13 for the f32→f16 width change + (1 - e) */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q); /* q may carry into the smallest normal: correct */
    }
    uint32_t q = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
        q++; /* may carry into the exponent, up to inf: correct */
    return (uint16_t)(sign | q);
}

float quant_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t quant_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate but force quiet */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ------------------------------------------------------------- type table */

struct type_info {
    int type;
    const char *name;
    int block_elems;
    int block_bytes;
};

static const struct type_info TYPES[] = {
    {QUANT_F32, "f32", 1, 4},          {QUANT_F16, "f16", 1, 2},
    {QUANT_Q8_0, "q8_0", QK8_0, Q8_0_BYTES}, {QUANT_Q4_K, "q4_K", QK_K, Q4_K_BYTES},
    {QUANT_Q5_K, "q5_K", QK_K, Q5_K_BYTES},  {QUANT_Q6_K, "q6_K", QK_K, Q6_K_BYTES},
    {QUANT_BF16, "bf16", 1, 2},
    /* per row, plus QUANT_I8R_HEADER bytes (quant_row_bytes) */
    {QUANT_I8R, "i8r", QUANT_I8R_ALIGN, QUANT_I8R_ALIGN},
};

static const struct type_info *find_type(int type)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].type == type)
            return &TYPES[i];
    return NULL;
}

const char *quant_type_name(int type)
{
    const struct type_info *t = find_type(type);
    return t ? t->name : NULL;
}

int quant_supported(int type)
{
    return find_type(type) != NULL;
}

int quant_in_gguf(int type)
{
    return quant_supported(type) && type != QUANT_I8R;
}

int quant_block_elems(int type)
{
    const struct type_info *t = find_type(type);
    return t ? t->block_elems : 0;
}

int quant_block_bytes(int type)
{
    const struct type_info *t = find_type(type);
    return t ? t->block_bytes : 0;
}

uint64_t quant_row_bytes(int type, uint64_t n)
{
    const struct type_info *t = find_type(type);
    if (!t || n % (uint64_t)t->block_elems != 0)
        return 0;
    uint64_t blocks = n / (uint64_t)t->block_elems;
    if (blocks > UINT64_MAX / (uint64_t)t->block_bytes - (type == QUANT_I8R))
        return 0;
    return blocks * (uint64_t)t->block_bytes + (type == QUANT_I8R ? QUANT_I8R_HEADER : 0);
}

/* ------------------------------------------------------------ byte helpers */

static float rd_f16(const uint8_t *p)
{
    return quant_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

static void wr_f16(uint8_t *p, float f)
{
    uint16_t h = quant_f32_to_f16(f);
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

/* Sub-block j's 6-bit scale and min from a Q4_K/Q5_K scales[12] array. */
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void k4_pack_scales(uint8_t *s, const uint8_t sc[8], const uint8_t m[8])
{
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = sc[j];
            s[j + 4] = m[j];
        } else {
            s[j + 4] = (uint8_t)((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
            s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            s[j] |= (uint8_t)((m[j] >> 4) << 6);
        }
    }
}

/* ----------------------------------------------------------- dequantisers */

static void deq_q8_0(const uint8_t *b, float *y)
{
    float d = rd_f16(b);
    for (int i = 0; i < QK8_0; i++)
        y[i] = d * (float)(int8_t)b[2 + i];
}

/* Q4_K and Q5_K share everything but the fifth bit; qh == NULL for Q4_K. */
static void deq_k4k5(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y)
{
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *scales = b + 4;
    for (int c = 0; c < 4; c++) { /* 64-value chunk = two sub-blocks */
        int sc0, m0, sc1, m1;
        k4_scale_min(scales, 2 * c, &sc0, &m0);
        k4_scale_min(scales, 2 * c + 1, &sc1, &m1);
        float d0 = d * (float)sc0, o0 = dmin * (float)m0;
        float d1 = d * (float)sc1, o1 = dmin * (float)m1;
        const uint8_t *q = qs + 32 * c;
        for (int l = 0; l < 32; l++) {
            int lo = q[l] & 0x0f, hi = q[l] >> 4;
            if (qh) {
                lo += ((qh[l] >> (2 * c)) & 1) << 4;
                hi += ((qh[l] >> (2 * c + 1)) & 1) << 4;
            }
            y[64 * c + l] = d0 * (float)lo - o0;
            y[64 * c + 32 + l] = d1 * (float)hi - o1;
        }
    }
}

static void deq_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = rd_f16(b + 208);
    for (int h = 0; h < 2; h++) { /* 128-value halves */
        const uint8_t *L = ql + 64 * h, *H = qh + 32 * h;
        const int8_t *S = sc + 8 * h;
        float *Y = y + 128 * h;
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q0 = ((L[l] & 0x0f) | (((H[l] >> 0) & 3) << 4)) - 32;
            int q1 = ((L[l + 32] & 0x0f) | (((H[l] >> 2) & 3) << 4)) - 32;
            int q2 = ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32;
            int q3 = ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32;
            Y[l] = d * (float)S[is] * (float)q0;
            Y[l + 32] = d * (float)S[is + 2] * (float)q1;
            Y[l + 64] = d * (float)S[is + 4] * (float)q2;
            Y[l + 96] = d * (float)S[is + 6] * (float)q3;
        }
    }
}

int quant_dequantize_row(int type, const void *src, float *dst, int64_t n)
{
    const struct type_info *t = find_type(type);
    if (!t || n < 0 || n % t->block_elems != 0 || (n > 0 && (!src || !dst)))
        return FOLIO_EINVAL;
    const uint8_t *s = src;
    if (type == QUANT_I8R) {
        float sc;
        memcpy(&sc, s, 4);
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)(int8_t)s[QUANT_I8R_HEADER + i] * sc;
        return 0;
    }
    int64_t nb = n / t->block_elems;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = s + i * t->block_bytes;
        float *y = dst + i * t->block_elems;
        switch (type) {
        case QUANT_F32:
            memcpy(y, b, 4);
            break;
        case QUANT_F16:
            y[0] = rd_f16(b);
            break;
        case QUANT_BF16:
            y[0] = quant_bf16_to_f32((uint16_t)(b[0] | (b[1] << 8)));
            break;
        case QUANT_Q8_0:
            deq_q8_0(b, y);
            break;
        case QUANT_Q4_K:
            deq_k4k5(b, NULL, b + 16, y);
            break;
        case QUANT_Q5_K:
            deq_k4k5(b, b + 16, b + 48, y);
            break;
        case QUANT_Q6_K:
            deq_q6_k(b, y);
            break;
        default:
            return FOLIO_EINVAL;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- quantisers */

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int round_int(float f)
{
    return (int)lrintf(f);
}

static void q_q8_0(const float *x, uint8_t *b)
{
    float amax = 0;
    for (int i = 0; i < QK8_0; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f;
    wr_f16(b, d);
    /* Levels from the unrounded d and roundf (half away from zero), as
     * ggml's reference does, so folio's Q8_0 blocks equal ggml's bit for bit. */
    float id = d > 0 ? 1.0f / d : 0.0f;
    for (int i = 0; i < QK8_0; i++)
        b[2 + i] = (uint8_t)(int8_t)clampi((int)roundf(x[i] * id), -127, 127);
}

/* Fits x ≈ s*q - m with q in [0, qmax] for one 32-value sub-block: start
 * from the min/max range, then alternate level assignment and a weighted
 * least-squares solve for (s, m). The min is kept ≤ 0 (m ≥ 0) because the
 * format stores it unsigned. */
static void fit_affine(const float *x, int n, int qmax, float *out_s, float *out_m)
{
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    if (lo > 0)
        lo = 0;
    if (hi <= lo) {
        *out_s = 0;
        *out_m = -lo;
        return;
    }
    float s = (hi - lo) / (float)qmax, m = -lo;
    float best_err = INFINITY, best_s = s, best_m = m;
    for (int it = 0; it < 6; it++) {
        /* error for the current (s, m) */
        double sq = 0, sqq = 0, sx = 0, sqx = 0, err = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi(round_int((x[i] + m) / s), 0, qmax);
            float e = s * (float)q - m - x[i];
            err += (double)e * e;
            sq += q;
            sqq += (double)q * q;
            sx += x[i];
            sqx += (double)q * x[i];
        }
        if (err < best_err) {
            best_err = (float)err;
            best_s = s;
            best_m = m;
        }
        /* least squares for x = s*q - m over these levels */
        double det = n * sqq - sq * sq;
        if (det <= 0)
            break;
        double ns = (n * sqx - sq * sx) / det;
        double nm = -(sx - ns * sq) / n;
        if (nm < 0) { /* clamp min to 0 and refit the scale alone */
            nm = 0;
            ns = sqq > 0 ? sqx / sqq : 0;
        }
        if (!(ns > 0))
            break;
        s = (float)ns;
        m = (float)nm;
    }
    *out_s = best_s;
    *out_m = best_m;
}

/* Q4_K (qmax 15) and Q5_K (qmax 31). */
static void q_k4k5(const float *x, uint8_t *b, int qmax)
{
    float sc[8], mn[8], max_s = 0, max_m = 0;
    for (int j = 0; j < 8; j++) {
        fit_affine(x + 32 * j, 32, qmax, &sc[j], &mn[j]);
        max_s = fmaxf(max_s, sc[j]);
        max_m = fmaxf(max_m, mn[j]);
    }
    /* Super-block scales: each sub-block scale/min becomes a 6-bit multiple of
     * d = max/63 (resp. dmin). Rounding the 6-bit codes up for the min keeps
     * the representable range covering the data. */
    float d = max_s / 63.0f, dmin = max_m / 63.0f;
    wr_f16(b, d);
    wr_f16(b + 2, dmin);
    float dq = rd_f16(b), dminq = rd_f16(b + 2);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)(dq > 0 ? clampi(round_int(sc[j] / dq), 0, 63) : 0);
        lm[j] = (uint8_t)(dminq > 0 ? clampi((int)ceilf(mn[j] / dminq - 1e-4f), 0, 63) : 0);
    }
    k4_pack_scales(b + 4, ls, lm);

    /* Levels against the stored (rounded) scales, so dequantisation sees the
     * best levels for what it will actually multiply by. */
    uint8_t L[QK_K];
    for (int j = 0; j < 8; j++) {
        float s = dq * (float)ls[j], m = dminq * (float)lm[j];
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)(s > 0 ? clampi(round_int((x[32 * j + i] + m) / s), 0, qmax) : 0);
    }
    uint8_t *qh = qmax == 31 ? b + 16 : NULL;
    uint8_t *qs = qmax == 31 ? b + 48 : b + 16;
    if (qh)
        memset(qh, 0, 32);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
            qs[32 * c + l] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
            if (qh)
                qh[l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
        }
    }
}

static void q_q6_k(const float *x, uint8_t *b)
{
    /* Per 16-value sub-block, a signed scale that maps the largest-magnitude
     * value onto level -32 (the asymmetric end of [-32, 31] gives one more
     * step of resolution), refined by least squares on the chosen levels. */
    float sc[16], max_abs = 0;
    for (int j = 0; j < 16; j++) {
        const float *v = x + 16 * j;
        float amax = 0, vmax = 0;
        for (int i = 0; i < 16; i++)
            if (fabsf(v[i]) > amax) {
                amax = fabsf(v[i]);
                vmax = v[i];
            }
        float s = amax > 0 ? vmax / -32.0f : 0.0f;
        if (s != 0) {
            double sqx = 0, sqq = 0;
            for (int i = 0; i < 16; i++) {
                int q = clampi(round_int(v[i] / s), -32, 31);
                sqx += (double)q * v[i];
                sqq += (double)q * q;
            }
            if (sqq > 0 && sqx / sqq * s > 0)
                s = (float)(sqx / sqq);
        }
        sc[j] = s;
        max_abs = fmaxf(max_abs, fabsf(s));
    }
    memset(b, 0, Q6_K_BYTES);
    float d = max_abs / 127.0f;
    wr_f16(b + 208, d);
    float dq = rd_f16(b + 208);
    int8_t *S = (int8_t *)(b + 192);
    uint8_t L[QK_K];
    for (int j = 0; j < 16; j++) {
        S[j] = (int8_t)(dq > 0 ? clampi(round_int(sc[j] / dq), -127, 127) : 0);
        float s = dq * (float)S[j];
        for (int i = 0; i < 16; i++)
            L[16 * j + i] = (uint8_t)(s != 0 ? clampi(round_int(x[16 * j + i] / s), -32, 31) + 32 : 32);
    }
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const uint8_t *V = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((V[l] & 0x0f) | ((V[l + 64] & 0x0f) << 4));
            ql[l + 32] = (uint8_t)((V[l + 32] & 0x0f) | ((V[l + 96] & 0x0f) << 4));
            qh[l] = (uint8_t)((V[l] >> 4) | ((V[l + 32] >> 4) << 2) | ((V[l + 64] >> 4) << 4) |
                              ((V[l + 96] >> 4) << 6));
        }
    }
}

/* QUANT_I8R: symmetric, s = max|x| / 127, q = x * (127 / max|x|) rounded to
 * nearest even (the shader's arithmetic, quant_rows.comp, so the two agree
 * but for ties the GPU's division places differently). */
static void q_i8r(const float *x, uint8_t *d, int64_t n)
{
    float amax = 0;
    for (int64_t i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float sc = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
    memset(d, 0, QUANT_I8R_HEADER);
    memcpy(d, &sc, 4);
    for (int64_t i = 0; i < n; i++)
        d[QUANT_I8R_HEADER + i] = (uint8_t)(int8_t)clampi((int)nearbyintf(x[i] * inv), -127, 127);
}

int quant_quantize_row(int type, const float *src, void *dst, int64_t n)
{
    const struct type_info *t = find_type(type);
    if (!t || n < 0 || n % t->block_elems != 0 || (n > 0 && (!src || !dst)))
        return FOLIO_EINVAL;
    uint8_t *d = dst;
    if (type == QUANT_I8R) {
        q_i8r(src, d, n);
        return 0;
    }
    int64_t nb = n / t->block_elems;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *b = d + i * t->block_bytes;
        const float *x = src + i * t->block_elems;
        uint16_t h;
        switch (type) {
        case QUANT_F32:
            memcpy(b, x, 4);
            break;
        case QUANT_F16:
            h = quant_f32_to_f16(x[0]);
            b[0] = (uint8_t)(h & 0xff);
            b[1] = (uint8_t)(h >> 8);
            break;
        case QUANT_BF16:
            h = quant_f32_to_bf16(x[0]);
            b[0] = (uint8_t)(h & 0xff);
            b[1] = (uint8_t)(h >> 8);
            break;
        case QUANT_Q8_0:
            q_q8_0(x, b);
            break;
        case QUANT_Q4_K:
            q_k4k5(x, b, 15);
            break;
        case QUANT_Q5_K:
            q_k4k5(x, b, 31);
            break;
        case QUANT_Q6_K:
            q_q6_k(x, b);
            break;
        default:
            return FOLIO_EINVAL;
        }
    }
    return 0;
}
