/* quant: f16/bf16 conversions against known bit patterns and exhaustively,
 * hand-packed blocks of every quantised type against values derived from the
 * ggml layout description (not from quant.c), and quantise→dequantise round
 * trips with error bounds on random, skewed and degenerate data. */
#include "common/rng.h"
#include "engine/quant/quant.h"
#include "tests/support/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* REQUIRE for void helpers; evaluates cond once (it often has effects). */
#define NEED(cond, ...)                                                                      \
    do {                                                                                     \
        int need_ok_ = (cond) ? 1 : 0;                                                       \
        CHECK(need_ok_, __VA_ARGS__);                                                        \
        if (!need_ok_)                                                                       \
            return;                                                                          \
    } while (0)

static struct folio_rng rng_state = {0x9e3779b97f4a7c15ull};

static double rnd_uniform(void) { return folio_rng_unit(&rng_state); }

static float rnd_gauss(void)
{
    double u = rnd_uniform() + 1e-12, v = rnd_uniform();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void test_f16(void)
{
    static const struct {
        float f;
        uint16_t h;
    } known[] = {
        {0.0f, 0x0000},           {-0.0f, 0x8000},      {1.0f, 0x3c00},     {-2.0f, 0xc000},
        {0.5f, 0x3800},           {65504.0f, 0x7bff},   {0.1f, 0x2e66},     {0x1p-24f, 0x0001},
        {0x1p-14f, 0x0400},       {0x1.ff8p-15f, 0x03ff}, {65520.0f, 0x7c00}, /* rounds to inf */
        {65519.0f, 0x7bff},       {1e10f, 0x7c00},      {0x1p-25f, 0x0000}, /* tie → even (0) */
        {0x1.8p-24f, 0x0002},     /* 1.5 ulp tie → even (2) */
        {1.0f + 0x1p-11f, 0x3c00}, /* tie → even */
        {1.0f + 0x3p-11f, 0x3c02}, /* tie → even (up) */
        {1.0f + 0x1.8p-11f, 0x3c01},
        {INFINITY, 0x7c00},       {-INFINITY, 0xfc00},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        uint16_t h = quant_f32_to_f16(known[i].f);
        CHECK(h == known[i].h, "f32 %a -> f16 0x%04x, want 0x%04x", (double)known[i].f, h, known[i].h);
    }
    uint16_t nan = quant_f32_to_f16(NAN);
    CHECK((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0, "NaN -> 0x%04x is not a NaN", nan);
    /* Every half converts to f32 and back unchanged (NaNs stay NaN). */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = quant_f16_to_f32((uint16_t)h);
        uint16_t back = quant_f32_to_f16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan ? !isnan(f) : back != h)
            bad++;
    }
    CHECK(bad == 0, "%d f16 values do not round-trip", bad);
    CHECK(quant_f16_to_f32(0x0001) == 0x1p-24f, "smallest subnormal");
    CHECK(quant_f16_to_f32(0x7bff) == 65504.0f, "largest normal");
}

static void test_bf16(void)
{
    CHECK(quant_f32_to_bf16(1.0f) == 0x3f80, "bf16(1)");
    CHECK(quant_f32_to_bf16(-2.0f) == 0xc000, "bf16(-2)");
    /* 1 + 2^-8 is halfway between 1 and 1+2^-7: ties to even → 1. */
    CHECK(quant_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "bf16 tie to even");
    CHECK(quant_f32_to_bf16(1.0f + 0x3p-8f) == 0x3f82, "bf16 tie to even up");
    CHECK(quant_f32_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81, "bf16 round up");
    uint16_t nan = quant_f32_to_bf16(NAN);
    CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f), "bf16 NaN -> 0x%04x", nan);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = quant_bf16_to_f32((uint16_t)h);
        int is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (is_nan ? !isnan(f) : quant_f32_to_bf16(f) != h)
            bad++;
    }
    CHECK(bad == 0, "%d bf16 values do not round-trip", bad);
}

static void test_table(void)
{
    CHECK(quant_block_bytes(QUANT_Q8_0) == 34 && quant_block_elems(QUANT_Q8_0) == 32, "q8_0 size");
    CHECK(quant_block_bytes(QUANT_Q4_K) == 144 && quant_block_elems(QUANT_Q4_K) == 256, "q4_K size");
    CHECK(quant_block_bytes(QUANT_Q5_K) == 176 && quant_block_elems(QUANT_Q5_K) == 256, "q5_K size");
    CHECK(quant_block_bytes(QUANT_Q6_K) == 210 && quant_block_elems(QUANT_Q6_K) == 256, "q6_K size");
    CHECK(quant_block_bytes(QUANT_F32) == 4 && quant_block_bytes(QUANT_F16) == 2 &&
              quant_block_bytes(QUANT_BF16) == 2, "float sizes");
    CHECK(strcmp(quant_type_name(QUANT_Q4_K), "q4_K") == 0, "name q4_K");
    CHECK(strcmp(quant_type_name(QUANT_BF16), "bf16") == 0, "name bf16");
    CHECK(quant_type_name(2) == NULL && !quant_supported(2), "Q4_0 unsupported");
    CHECK(quant_type_name(-1) == NULL && quant_block_bytes(99) == 0, "bogus type");
    CHECK(quant_row_bytes(QUANT_Q4_K, 3584) == 14 * 144, "row bytes q4_K");
    CHECK(quant_row_bytes(QUANT_Q4_K, 100) == 0, "row not a block multiple");
    CHECK(quant_row_bytes(QUANT_F32, UINT64_MAX / 2) == 0, "row bytes overflow");
    CHECK(quant_row_bytes(QUANT_Q8_0, 32ull << 40) == 34ull << 40, "large row");
    float y[256];
    uint8_t b[256];
    CHECK(quant_dequantize_row(QUANT_Q4_K, b, y, 255) == FOLIO_EINVAL, "partial block refused");
    CHECK(quant_dequantize_row(2, b, y, 32) == FOLIO_EINVAL, "unsupported type refused");
    CHECK(quant_quantize_row(QUANT_Q8_0, y, b, -32) == FOLIO_EINVAL, "negative n refused");
}

/* Q8_0 block: f16 d = 0.5 (0x3800), then qs. */
static void test_q8_0_known(void)
{
    uint8_t b[34] = {0x00, 0x38};
    for (int i = 0; i < 32; i++)
        b[2 + i] = (uint8_t)(int8_t)(i * 8 - 127);
    float y[32];
    NEED(quant_dequantize_row(QUANT_Q8_0, b, y, 32) == 0, "dequant");
    for (int i = 0; i < 32; i++)
        CHECK(y[i] == 0.5f * (float)(i * 8 - 127), "q8_0[%d] = %g", i, (double)y[i]);

    /* Quantising x = i - 16 gives d = 16/127 and q = round(127*x/16), half
     * away from zero as ggml does. */
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i - 16);
    uint8_t q[34];
    NEED(quant_quantize_row(QUANT_Q8_0, x, q, 32) == 0, "quant");
    uint16_t dh = (uint16_t)(q[0] | (q[1] << 8));
    CHECK(dh == quant_f32_to_f16(16.0f / 127.0f), "q8_0 d 0x%04x", dh);
    for (int i = 0; i < 32; i++) {
        int want = (int)roundf((float)(i - 16) * (127.0f / 16.0f));
        CHECK((int8_t)q[2 + i] == want, "q8_0 q[%d]=%d want %d", i, (int8_t)q[2 + i], want);
    }
}

/* Sub-block scales/mins chosen to exercise every packing path (top bits set
 * for sub-blocks 4..7, 6-bit maxima). Packed by hand from the layout:
 *   bytes 0..3  = sc[0..3]  | (sc[4..7] >> 4) << 6
 *   bytes 4..7  = m[0..3]   | (m[4..7]  >> 4) << 6
 *   bytes 8..11 = (sc[4..7] & 15) | (m[4..7] & 15) << 4 */
static const int KSC[8] = {1, 17, 33, 63, 5, 21, 47, 60};
static const int KMN[8] = {0, 2, 40, 63, 16, 31, 48, 9};
static const uint8_t KPACK[12] = {0x01, 0x51, 0xa1, 0xff, 0x40, 0x42, 0xe8, 0x3f, 0x05, 0xf5, 0x0f, 0x9c};

/* 4-bit quant of value v within a block: chunk c = v/64; low nibble of qs
 * byte 32c + w for w = v%64 < 32, high nibble of byte 32c + w - 32 otherwise. */
static int q4_at(const uint8_t *qs, int v)
{
    int c = v / 64, w = v % 64;
    return w < 32 ? qs[32 * c + w] & 15 : qs[32 * c + w - 32] >> 4;
}

static void test_q4_k_known(void)
{
    uint8_t b[144];
    b[0] = 0x00; b[1] = 0x3c; /* d = 1 */
    b[2] = 0x00; b[3] = 0x38; /* dmin = 0.5 */
    memcpy(b + 4, KPACK, 12);
    for (int i = 0; i < 128; i++)
        b[16 + i] = (uint8_t)(i * 37 + 11);
    float y[256];
    NEED(quant_dequantize_row(QUANT_Q4_K, b, y, 256) == 0, "dequant");
    int bad = 0;
    for (int v = 0; v < 256; v++) {
        int j = v / 32;
        float want = 1.0f * (float)KSC[j] * (float)q4_at(b + 16, v) - 0.5f * (float)KMN[j];
        if (y[v] != want) {
            if (bad++ < 5)
                CHECK(0, "q4_K[%d] = %g, want %g", v, (double)y[v], (double)want);
        }
    }
    CHECK(bad == 0, "%d q4_K values differ", bad);
}

static void test_q5_k_known(void)
{
    uint8_t b[176];
    b[0] = 0x00; b[1] = 0x40; /* d = 2 */
    b[2] = 0x00; b[3] = 0x3c; /* dmin = 1 */
    memcpy(b + 4, KPACK, 12);
    for (int i = 0; i < 32; i++)
        b[16 + i] = (uint8_t)(i * 73 + 5); /* qh */
    for (int i = 0; i < 128; i++)
        b[48 + i] = (uint8_t)(i * 29 + 3);
    float y[256];
    NEED(quant_dequantize_row(QUANT_Q5_K, b, y, 256) == 0, "dequant");
    int bad = 0;
    for (int v = 0; v < 256; v++) {
        int j = v / 32;
        /* fifth bit: sub-block j's bit j of qh[v % 32] */
        int q = q4_at(b + 48, v) | (((b[16 + v % 32] >> j) & 1) << 4);
        float want = 2.0f * (float)KSC[j] * (float)q - 1.0f * (float)KMN[j];
        if (y[v] != want && bad++ < 5)
            CHECK(0, "q5_K[%d] = %g, want %g", v, (double)y[v], (double)want);
    }
    CHECK(bad == 0, "%d q5_K values differ", bad);
}

static void test_q6_k_known(void)
{
    uint8_t b[210];
    for (int i = 0; i < 128; i++)
        b[i] = (uint8_t)(i * 53 + 7); /* ql */
    for (int i = 0; i < 64; i++)
        b[128 + i] = (uint8_t)(i * 91 + 1); /* qh */
    static const int8_t sc[16] = {1, -1, 2, -3, 127, -128, 5, 8, -13, 21, 34, -55, 89, 0, 7, -7};
    memcpy(b + 192, sc, 16);
    b[208] = 0x00; b[209] = 0x34; /* d = 0.25 */
    float y[256];
    NEED(quant_dequantize_row(QUANT_Q6_K, b, y, 256) == 0, "dequant");
    int bad = 0;
    for (int v = 0; v < 256; v++) {
        /* half h = v/128, w = v%128, quarter k = w/32, l = w%32:
         * low nibble from ql[64h + l + 32*(k&1)], nibble (k>>1);
         * top 2 bits from qh[32h + l] at bit 2k. Scale index v/16. */
        int h = v / 128, w = v % 128, k = w / 32, l = w % 32;
        int lo = (b[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 15;
        int hi = (b[128 + 32 * h + l] >> (2 * k)) & 3;
        float want = 0.25f * (float)sc[v / 16] * (float)((lo | (hi << 4)) - 32);
        if (y[v] != want && bad++ < 5)
            CHECK(0, "q6_K[%d] = %g, want %g", v, (double)y[v], (double)want);
    }
    CHECK(bad == 0, "%d q6_K values differ", bad);
}

/* Quantises n values and returns the RMS error relative to the RMS of x. */
static double roundtrip(int type, const float *x, int n, float *y)
{
    uint64_t bytes = quant_row_bytes(type, (uint64_t)n);
    uint8_t *q = malloc(bytes);
    if (!q)
        return INFINITY;
    memset(q, 0xa5, bytes); /* quantisers must write every byte they own */
    int rc = quant_quantize_row(type, x, q, n);
    if (rc == 0)
        rc = quant_dequantize_row(type, q, y, n);
    free(q);
    if (rc != 0)
        return INFINITY;
    double se = 0, sx = 0;
    for (int i = 0; i < n; i++) {
        se += (double)(y[i] - x[i]) * (y[i] - x[i]);
        sx += (double)x[i] * x[i];
    }
    return sx > 0 ? sqrt(se / sx) : sqrt(se / n);
}

static void test_roundtrips(void)
{
    enum { N = 256 * 64 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    NEED(x && y, "alloc");
    static const struct {
        int type;
        /* Relative RMS error bounds on N(0,1) data, ~1.25x what the
         * quantisers achieve (f16 2.1e-4, bf16 1.7e-3, q8_0 5.3e-3,
         * q6_K 1.8e-2, q5_K 3.8e-2, q4_K 7.4e-2): a regression fails. */
        double gauss_max;
    } T[] = {
        {QUANT_F32, 0.0}, {QUANT_F16, 2.7e-4}, {QUANT_BF16, 2.2e-3}, {QUANT_Q8_0, 0.0068},
        {QUANT_Q6_K, 0.023}, {QUANT_Q5_K, 0.047}, {QUANT_Q4_K, 0.093},
    };
    for (size_t t = 0; t < sizeof T / sizeof T[0]; t++) {
        int type = T[t].type;
        for (int i = 0; i < N; i++)
            x[i] = 0.02f * rnd_gauss();
        double e = roundtrip(type, x, N, y);
        CHECK(e <= T[t].gauss_max, "%s gaussian rel rms %.5f > %.5f", quant_type_name(type), e,
              T[t].gauss_max);

        /* Offset, one-signed data exercises the K-quant mins. */
        for (int i = 0; i < N; i++)
            x[i] = 3.0f + fabsf(rnd_gauss());
        e = roundtrip(type, x, N, y);
        CHECK(e <= T[t].gauss_max, "%s positive rel rms %.5f", quant_type_name(type), e);
        for (int i = 0; i < N; i++)
            x[i] = -1.0f - fabsf(rnd_gauss());
        e = roundtrip(type, x, N, y);
        CHECK(e <= T[t].gauss_max, "%s negative rel rms %.5f", quant_type_name(type), e);

        /* All zeros stay exactly zero. */
        memset(x, 0, N * sizeof *x);
        e = roundtrip(type, x, N, y);
        int nz = 0;
        for (int i = 0; i < N; i++)
            nz += y[i] != 0.0f;
        CHECK(e == 0 && nz == 0, "%s zeros -> %d non-zero", quant_type_name(type), nz);

        /* One outlier per block must survive; the rest may flush towards 0. */
        for (int i = 0; i < N; i++)
            x[i] = (i % 256 == 17) ? 50.0f : 0.001f * rnd_gauss();
        roundtrip(type, x, N, y);
        int lost = 0;
        for (int i = 17; i < N; i += 256)
            lost += fabsf(y[i] - 50.0f) > 50.0f * 0.02f;
        CHECK(lost == 0, "%s: %d outliers lost", quant_type_name(type), lost);
    }

    /* Quantising what was dequantised is (nearly) idempotent: the levels are
     * already representable, so a second pass must not drift far. */
    for (size_t t = 3; t < sizeof T / sizeof T[0]; t++) {
        int type = T[t].type;
        for (int i = 0; i < N; i++)
            x[i] = rnd_gauss();
        roundtrip(type, x, N, y);
        memcpy(x, y, N * sizeof *x);
        double e = roundtrip(type, x, N, y);
        CHECK(e <= T[t].gauss_max / 2, "%s requantise rel rms %.5f", quant_type_name(type), e);
    }
    free(x);
    free(y);
}

/* folio's int8 rows: the header (scale, then zeros), known bytes for a
 * known row, the round-trip bound (half a step: max|x| / 254), a zero row,
 * sizes, and that no GGUF file may claim the type. */
static void test_i8r(void)
{
    CHECK(quant_supported(QUANT_I8R) && !quant_in_gguf(QUANT_I8R) && quant_in_gguf(QUANT_Q4_K),
          "i8r: folio's own, not a GGUF type");
    CHECK(quant_row_bytes(QUANT_I8R, 3584) == 3584 + QUANT_I8R_HEADER, "i8r row bytes");
    CHECK(quant_row_bytes(QUANT_I8R, 40) == 0, "i8r rows are multiples of 16");
    float x[32], y[32];
    uint8_t b[32 + QUANT_I8R_HEADER];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i - 16) / 8.0f; /* -2 .. 1.875: max |x| = 2 */
    CHECK(quant_quantize_row(QUANT_I8R, x, b, 32) == 0, "i8r quantize");
    float sc;
    memcpy(&sc, b, 4);
    int zero = 1;
    for (int i = 4; i < QUANT_I8R_HEADER; i++)
        zero &= b[i] == 0;
    CHECK(sc == 2.0f / 127.0f && zero, "i8r header: scale %g", (double)sc);
    CHECK((int8_t)b[QUANT_I8R_HEADER] == -127 && (int8_t)b[QUANT_I8R_HEADER + 16] == 0 &&
              (int8_t)b[QUANT_I8R_HEADER + 24] == 64 /* 1.0 * 63.5 rounds to even */,
          "i8r bytes %d %d %d", (int8_t)b[QUANT_I8R_HEADER], (int8_t)b[QUANT_I8R_HEADER + 16],
          (int8_t)b[QUANT_I8R_HEADER + 24]);
    CHECK(quant_dequantize_row(QUANT_I8R, b, y, 32) == 0, "i8r dequantize");
    double worst = 0;
    for (int i = 0; i < 32; i++)
        worst = fabs((double)y[i] - x[i]) > worst ? fabs((double)y[i] - x[i]) : worst;
    CHECK(worst <= 2.0 / 254 * (1 + 1e-6), "i8r round trip: %g > half a step", worst);
    memset(x, 0, sizeof x);
    quant_quantize_row(QUANT_I8R, x, b, 32);
    quant_dequantize_row(QUANT_I8R, b, y, 32);
    int zeros = 1;
    for (int i = 0; i < 32; i++)
        zeros &= y[i] == 0.0f;
    CHECK(zeros, "i8r zero row stays zero");
    CHECK(quant_quantize_row(QUANT_I8R, x, b, 24) == FOLIO_EINVAL, "i8r partial row refused");
}

int main(void)
{
    test_f16();
    test_bf16();
    test_table();
    test_q8_0_known();
    test_q4_k_known();
    test_q5_k_known();
    test_q6_k_known();
    test_roundtrips();
    test_i8r();
    return tu_finish();
}
