/*
 * Matrix-vector and tiled matmuls on every weight type, weight expansion to
 * f16 (--gpu-weights f16), and (ranged mode) bit-identity of ranged and
 * unranged dispatches. See ops_test.h for the harness.
 */
#include "tests/engine/ops/ops_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void matvec_rows(struct T *t);

/* One matmul case's host side: W quantized to ty (wq, rb bytes a row) and
 * read back (wd), X, a bias, the C reference yr (with the bias when asked)
 * and the error scale sc; yg is room for the device's result. */
struct mm_case {
    float *wf, *wd, *x, *bias, *yg, *yr, *sc;
    uint8_t *wq;
    uint64_t rb;
};

static void mm_case_make(struct T *t, int ty, uint32_t m, uint32_t n, uint32_t k, int use_bias,
                         struct mm_case *o)
{
    o->rb = quant_row_bytes(ty, k);
    o->wf = malloc(sizeof(float) * n * k), o->wd = malloc(sizeof(float) * n * k);
    o->x = malloc(sizeof(float) * m * k), o->bias = malloc(sizeof(float) * n);
    o->yg = malloc(sizeof(float) * m * n), o->yr = malloc(sizeof(float) * m * n);
    o->sc = malloc(sizeof(float) * m * n);
    o->wq = malloc(o->rb * n);
    fill(t, o->wf, (size_t)n * k, 1.0f);
    fill(t, o->x, (size_t)m * k, 1.0f);
    fill(t, o->bias, n, 1.0f);
    for (uint32_t r = 0; r < n; r++) {
        quant_quantize_row(ty, o->wf + (size_t)r * k, o->wq + o->rb * r, k);
        quant_dequantize_row(ty, o->wq + o->rb * r, o->wd + (size_t)r * k, k);
    }
    ops_ref_matmul(o->wd, o->x, use_bias ? o->bias : NULL, o->yr, m, n, k);
    abs_products(o->wd, o->x, o->sc, m, n, k);
}

static void mm_case_free(struct mm_case *o)
{
    free(o->wf), free(o->wd), free(o->x), free(o->bias), free(o->yg), free(o->yr), free(o->sc);
    free(o->wq);
}

void test_matmul(struct T *t)
{
    /* folio's int8 rows too: a weight type of these kernels everywhere (the
     * int8 GEMM, which also quantizes X, is int8.c's) */
    static const int types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0,
                                QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_I8R};
    /* (m, n, k): tiny, odd, non-multiple-of-tile, and decode shapes */
    static const uint32_t shapes[][3] = {{1, 1, 256}, {1, 37, 512}, {3, 70, 256}, {8, 33, 768},
                                         {9, 65, 256}, {70, 130, 512}, {64, 64, 256},
                                         {130, 300, 1536}, /* "large", q4_K/q6_K/f16 only */
                                         /* float rows not a multiple of 4 (a resized
                                          * vocabulary's LM head is n; an odd MLP width k) */
                                         {3, 101, 37}, {70, 67, 70}, {9, 45, 1}};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int ty = types[ti];
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
            /* The large shape would be thousands of 16 KiB-range dispatches
             * in ranged mode; the other shapes already span many ranges. */
            if (si == 7 && (t->ranged || (ty != QUANT_Q4_K && ty != QUANT_Q6_K && ty != QUANT_F16)))
                continue;
            if (k % (uint32_t)quant_block_elems(ty))
                continue; /* odd rows: float types only */
            for (int kern = 0; kern < 3; kern++) {
                enum op_mm_kernel kk = kern == 0 ? OP_MM_AUTO : kern == 1 ? OP_MM_TILED : OP_MM_COOPMAT;
                if (kk == OP_MM_COOPMAT && (!ops_coopmat_available(t->vk) || k % 4))
                    continue;
                if (kk != OP_MM_AUTO && m <= 8 && si != 0)
                    continue; /* forced tiled/coopmat on tiny m once is enough */
                if (kk == OP_MM_AUTO && ty == QUANT_I8R && op_matmul_pick(t->vk, ty, m) == OP_MM_GEMM)
                    continue; /* the int8 GEMM: int8.c */
                int use_bias = (si % 2) == 1;
                struct mm_case o;
                mm_case_make(t, ty, m, n, k, use_bias, &o);
                uint64_t rb = o.rb;
                float *x = o.x, *bias = o.bias, *yg = o.yg, *yr = o.yr, *sc = o.sc;
                uint8_t *wq = o.wq;
                vkr_arena_reset(t->act);
                struct op_matmul a = {.w = put(t, t->w, wq, rb * n), .wtype = ty, .n = n, .k = k,
                                      .x = put(t, t->act, x, sizeof(float) * m * k), .m = m,
                                      .kernel = kk};
                struct vkr_tensor bt = put(t, t->act, bias, sizeof(float) * n);
                a.y = put(t, t->act, NULL, sizeof(float) * m * n);
                a.bias = use_bias ? &bt : NULL;
                RUN(t, op_matmul(c, &a, e));
                get(t, a.y, yg, sizeof(float) * m * n);
                /* Bound: |gpu - ref| <= 1e-6 + 5e-5 * sum_k |w_k x_k| (f32 vs double
                 * accumulation over k <= 768; f16 operands for the coopmat kernel
                 * round x to 11 bits: 2e-3 there). */
                size_t at = 0;
                enum op_mm_kernel eff = kk == OP_MM_AUTO ? op_matmul_pick(t->vk, ty, m) : kk;
                double tol = eff == OP_MM_COOPMAT || eff == OP_MM_GEMM ? 2e-3 : 5e-5;
                double wv = worst(yg, yr, sc, (size_t)m * n, 1e-6, tol, &at);
                CHECK(wv <= 1.0, "matmul %s m=%u n=%u k=%u kernel=%d: worst %.3g at %zu (gpu %g ref %g)",
                      quant_type_name(ty), m, n, k, (int)kk, wv, at, (double)yg[at], (double)yr[at]);
                mm_case_free(&o);
            }
        }
    }
    matvec_rows(t);
}

/* matvec with NR weight rows per workgroup (FOLIO_MATVEC_NR=1|2|4|8): the
 * same results as the reference, for row counts N that NR does not divide
 * (the last workgroup's spare rows are never stored), every activation row
 * count up to 8, float rows of odd length and block types. The harness's
 * runtime is sealed with the default NR, so each NR gets a runtime of its
 * own whose pipelines are built on demand. */
static void matvec_rows(struct T *t)
{
    static const int types[] = {QUANT_F32, QUANT_F16, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q6_K};
    static const uint32_t shapes[][3] = {{1, 37, 512}, {8, 33, 768}, {5, 150, 256}, {3, 101, 37},
                                         {7, 9, 256}};
    static const char *const nrs[] = {"1", "2", "4", "8"};
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    for (size_t ni = 0; ni < sizeof nrs / sizeof nrs[0]; ni++) {
        setenv("FOLIO_MATVEC_NR", nrs[ni], 1);
        struct vkr_config cfg = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                                 .validate = -1, .cache_dir = ""};
        struct folio_err oe = {0};
        struct T u = {.rng = t->rng, .ranged = t->ranged};
        int rc = vkr_open(&cfg, &u.vk, &oe);
        CHECK(rc == 0, "matvec NR=%s: runtime: %s", nrs[ni], oe.msg);
        if (rc)
            break;
        if (vkr_arena_create(u.vk, "w", VKR_ARENA_WEIGHTS, &u.w, &oe) != 0 ||
            vkr_arena_create(u.vk, "a", VKR_ARENA_WEIGHTS, &u.act, &oe) != 0) {
            CHECK(0, "matvec NR=%s: arenas: %s", nrs[ni], oe.msg);
            vkr_close(u.vk);
            break;
        }
        CHECK(ops_mm_key(u.vk, OP_MM_MATVEC, QUANT_F32).spec[2] == (uint32_t)atoi(nrs[ni]),
              "FOLIO_MATVEC_NR=%s not taken by the key", nrs[ni]);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                int ty = types[ti];
                uint32_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
                if (k % (uint32_t)quant_block_elems(ty))
                    continue;
                int use_bias = si % 2 == 0;
                struct mm_case o;
                mm_case_make(&u, ty, m, n, k, use_bias, &o);
                uint64_t rb = o.rb;
                float *x = o.x, *bias = o.bias, *yg = o.yg, *yr = o.yr, *sc = o.sc;
                uint8_t *wq = o.wq;
                vkr_arena_reset(u.w);
                vkr_arena_reset(u.act);
                /* y pre-filled with NaN: a row the kernel failed to store shows */
                for (size_t i = 0; i < (size_t)m * n; i++)
                    yg[i] = NAN;
                struct op_matmul a = {.w = put(&u, u.w, wq, rb * n), .wtype = ty, .n = n, .k = k,
                                      .x = put(&u, u.act, x, sizeof(float) * m * k), .m = m,
                                      .kernel = OP_MM_MATVEC};
                struct vkr_tensor bt = put(&u, u.act, bias, sizeof(float) * n);
                a.y = put(&u, u.act, yg, sizeof(float) * m * n);
                a.bias = use_bias ? &bt : NULL;
                RUN(&u, op_matmul(c, &a, e));
                get(&u, a.y, yg, sizeof(float) * m * n);
                size_t at = 0;
                double wv = worst(yg, yr, sc, (size_t)m * n, 1e-6, 5e-5, &at);
                CHECK(wv <= 1.0, "matvec NR=%s %s m=%u n=%u k=%u: worst %.3g at %zu (gpu %g ref %g)",
                      nrs[ni], quant_type_name(ty), m, n, k, wv, at, (double)yg[at], (double)yr[at]);
                mm_case_free(&o);
            }
        struct vkr_stats s;
        vkr_get_stats(u.vk, &s);
        CHECK(s.validation_messages == 0, "matvec NR=%s: validation messages", nrs[ni]);
        vkr_arena_destroy(u.act);
        vkr_arena_destroy(u.w);
        vkr_close(u.vk);
    }
    unsetenv("FOLIO_MATVEC_NR");
}

/* Weight expansion (--gpu-weights f16): every type dequantized on the
 * device must equal the C dequantization rounded to f16 (exactly: both
 * round the same float to nearest-even), and an expanded weight must give
 * the same matmul as the native one within the f16 bound. Runs on every
 * device (the expansion kernel needs no tensor cores). */
void test_expand_f16(struct T *t)
{
    static const int types[] = {QUANT_F32, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K,
                                QUANT_Q6_K};
    const uint32_t n = 37, k = 512;
    struct folio_err e = {0};
    struct vkr_arena *stage = NULL;
    if (vkr_arena_create(t->vk, "stage", VKR_ARENA_WEIGHTS, &stage, &e) != 0) {
        CHECK(0, "staging arena: %s", e.msg);
        return;
    }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int ty = types[ti];
        uint64_t rb = quant_row_bytes(ty, k);
        float *wf = malloc(sizeof(float) * n * k), *wd = malloc(sizeof(float) * n * k);
        uint8_t *wq = malloc(rb * n), *h = malloc((size_t)n * k * 2), *hg = malloc((size_t)n * k * 2);
        fill(t, wf, (size_t)n * k, 1.0f);
        for (uint32_t r = 0; r < n; r++) {
            quant_quantize_row(ty, wf + (size_t)r * k, wq + rb * r, k);
            quant_dequantize_row(ty, wq + rb * r, wd + (size_t)r * k, k);
        }
        quant_quantize_row(QUANT_F16, wd, h, (int64_t)n * k);
        struct vkr_tensor wt;
        int wt_type = -1;
        int rc = ops_upload_weight(t->vk, t->w, stage, wq, ty, n, k, 2, &wt, &wt_type, &e);
        CHECK(rc == 0, "expand %s: %s", quant_type_name(ty), e.msg);
        if (rc == 0) {
            CHECK(wt_type == QUANT_F16, "expand %s: type %d after expansion", quant_type_name(ty),
                  wt_type);
            get(t, wt, hg, (uint64_t)n * k * 2);
            size_t bad = 0;
            for (size_t i = 0; i < (size_t)n * k * 2; i += 2)
                bad += memcmp(h + i, hg + i, 2) != 0;
            CHECK(bad == 0, "expand %s: %zu of %u elements differ from the C dequantization",
                  quant_type_name(ty), bad, n * k);
        }
        free(wf), free(wd), free(wq), free(h), free(hg);
    }
    /* auto keeps f32 matrices as they are (the user chose precision) */
    struct vkr_tensor wt;
    int wt_type = -1;
    float row[256] = {0};
    CHECK(ops_upload_weight(t->vk, t->w, stage, row, QUANT_F32, 1, 256, 1, &wt, &wt_type, &e) == 0 &&
          wt_type == QUANT_F32, "auto must keep an f32 matrix f32 (type %d)", wt_type);
    char why[200];
    CHECK(ops_weights_form(t->vk, OPS_WEIGHTS_NATIVE, 1, why, sizeof why) == 0, "native: %s", why);
    CHECK(ops_weights_form(t->vk, OPS_WEIGHTS_F16, 1, why, sizeof why) == 2, "f16: %s", why);
    CHECK(ops_weights_form(t->vk, OPS_WEIGHTS_AUTO, UINT64_MAX / 2, why, sizeof why) == 0,
          "auto must refuse weights larger than the device: %s", why);
    /* f16 inputs are a GEMM-only feature: other kernels refuse them clearly */
    vkr_arena_reset(t->act);
    struct op_matmul a = {.w = put(t, t->act, NULL, 64 * 64 * 2), .wtype = QUANT_F16, .n = 64,
                          .k = 64, .x = put(t, t->act, NULL, 64 * 64 * 2), .m = 64,
                          .y = put(t, t->act, NULL, 64 * 64 * 4), .kernel = OP_MM_TILED,
                          .xtype = QUANT_F16};
    struct vkr_cmd *c = NULL;
    if (vkr_cmd_begin(t->vk, &c, &e) != 0) {
        CHECK(0, "%s", e.msg);
        vkr_arena_destroy(stage);
        return;
    }
    int rc = op_matmul(c, &a, &e);
    CHECK(rc == FOLIO_EUNSUPPORTED && strstr(e.msg, "tensor-core GEMM"),
          "tiled matmul with f16 inputs: rc %d (%s)", rc, e.msg);
    vkr_cmd_abort(c);
    vkr_arena_destroy(stage);
}

/* Ranged mode only: the same matmuls and gather on a second runtime with
 * the device's own limits must give bit-identical results (ranges change
 * which dispatch computes a row, never how). */
void test_identical(struct T *t)
{
    const char *ma = getenv("FOLIO_VK_MAX_ALLOC"), *mr = getenv("FOLIO_VK_MAX_RANGE");
    char sa[32], sr[32];
    snprintf(sa, sizeof sa, "%s", ma ? ma : "");
    snprintf(sr, sizeof sr, "%s", mr ? mr : "");
    unsetenv("FOLIO_VK_MAX_ALLOC");
    unsetenv("FOLIO_VK_MAX_RANGE");
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config cfg = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                             .validate = -1, .cache_dir = ""};
    struct folio_err oe = {0};
    struct T u = {.rng = {1}, .ranged = 0};
    int rc = vkr_open(&cfg, &u.vk, &oe);
    setenv("FOLIO_VK_MAX_ALLOC", sa, 1);
    setenv("FOLIO_VK_MAX_RANGE", sr, 1);
    CHECK(rc == 0, "second runtime: %s", oe.msg);
    if (rc)
        return;
    if (vkr_arena_create(u.vk, "w", VKR_ARENA_WEIGHTS, &u.w, &oe) != 0 ||
        vkr_arena_create(u.vk, "a", VKR_ARENA_WEIGHTS, &u.act, &oe) != 0) {
        CHECK(0, "arenas: %s", oe.msg);
        vkr_close(u.vk);
        return;
    }
    const uint32_t m = 40, n = 150, k = 512; /* q6_K rows of 420 bytes: unaligned starts */
    int ty = QUANT_Q6_K;
    uint64_t rb = quant_row_bytes(ty, k);
    float *wf = malloc(sizeof(float) * n * k), *x = malloc(sizeof(float) * m * k);
    uint8_t *wq = malloc(rb * n);
    float *y1 = malloc(sizeof(float) * m * n), *y2 = malloc(sizeof(float) * m * n);
    fill(t, wf, (size_t)n * k, 1.0f);
    fill(t, x, (size_t)m * k, 1.0f);
    for (uint32_t r = 0; r < n; r++)
        quant_quantize_row(ty, wf + (size_t)r * k, wq + rb * r, k);
    for (int kern = 0; kern < 2; kern++) {
        struct T *both[2] = {t, &u};
        float *outs[2] = {y1, y2};
        for (int i = 0; i < 2; i++) {
            struct T *tt = both[i];
            vkr_arena_reset(tt->act);
            struct op_matmul a = {.w = put(tt, tt->w, wq, rb * n), .wtype = ty, .n = n, .k = k,
                                  .x = put(tt, tt->act, x, sizeof(float) * m * k),
                                  .m = kern == 0 ? 8 : m,
                                  .kernel = kern == 0 ? OP_MM_MATVEC : OP_MM_TILED};
            a.y = put(tt, tt->act, NULL, sizeof(float) * m * n);
            RUN(tt, op_matmul(c, &a, e));
            get(tt, a.y, outs[i], sizeof(float) * a.m * n);
        }
        uint32_t rows = kern == 0 ? 8 : m;
        CHECK(memcmp(y1, y2, sizeof(float) * rows * n) == 0,
              "kernel %d: ranged and unranged results differ", kern);
    }
    struct vkr_stats s;
    vkr_get_stats(u.vk, &s);
    CHECK(s.validation_messages == 0, "validation messages on the second runtime");
    free(wf), free(x), free(wq), free(y1), free(y2);
    vkr_arena_destroy(u.act);
    vkr_arena_destroy(u.w);
    vkr_close(u.vk);
}
