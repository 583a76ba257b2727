/*
 * Attention: every kernel and element type per shape class, the ranged
 * (split) path, fused-QKV strides, and the shapes that are refused. See
 * ops_test.h for the harness.
 */
#include "tests/engine/ops/ops_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Runs one attention shape through every kernel the device has for its
 * head size (scalar everywhere; the tensor-core kernel where available, so
 * on an NVIDIA GPU both run) and every element-type mode (all f32, all
 * f16, f16 K/V with f32 Q/O as from the text model's f16 KV cache),
 * against the C reference. f holds every input; q, k and v start at
 * element offsets qo, ko and vo (slices of one tensor, as from a fused QKV
 * matmul) and use the strides in a. Bounds:
 *  - scalar f32: 2e-5 absolute + 1e-4 relative (outputs are convex
 *    combinations of v in [-1, 1]; online vs two-pass softmax);
 *  - scalar f16: the reference runs on the f16-rounded inputs; 1e-3
 *    relative for the f16 output (2^-11);
 *  - scalar f16 K/V: the reference runs on the same f16-rounded K and V
 *    (what the cache holds), which the kernel widens to f32 exactly; the
 *    rest is f32 arithmetic, so the f32 bound holds;
 *  - tensor cores: against ops_ref_attention_f16mm (the same f16 rounding
 *    of Q * scale * log2 e, K, V and P): 1.5e-3 absolute + 1e-3 relative,
 *    because the kernel rounds P after a running rather than the final row
 *    max (each weight within 2^-11 relative of the reference's, so the
 *    output within 2 * 2^-11 * max|v|) and may write f16. A wrong mask,
 *    rescale or tile edge moves outputs by ~1/(visible keys) >= 5e-3. */
static void attn_all(struct T *t, struct op_attention a, const float *f, size_t nf, size_t qo,
                     size_t ko, size_t vo, const uint32_t *rg, const char *what)
{
    size_t no = (size_t)a.tq * a.hq * a.d;
    float *fr = malloc(sizeof(float) * nf), *g = malloc(sizeof(float) * no);
    float *r = malloc(sizeof(float) * no);
    uint16_t *h = malloc(sizeof(uint16_t) * (nf > no ? nf : no));
    for (int kern = OP_ATTN_SCALAR; kern <= OP_ATTN_CM2; kern++) {
        if (kern == OP_ATTN_COOPMAT && op_attention_pick(t->vk, a.d) != OP_ATTN_COOPMAT)
            continue;
        /* the tensor-core kernels round Q, K, V and P to f16 alike */
        int tc = kern != OP_ATTN_SCALAR;
        for (int io = OP_ATTN_IO_F32; io <= OP_ATTN_IO_KV16; io++) {
            int f16 = io == OP_ATTN_IO_F16, kv16 = io == OP_ATTN_IO_KV16;
            if (kern == OP_ATTN_CM2 && !op_attention_available(t->vk, OP_ATTN_CM2, a.d, io))
                continue;
            /* lavapipe compiles each specialisation with LLVM on first use
             * (minutes under ASan on a cold Mesa cache), so the scalar f16
             * variants run for the text head size only; the tensor-core
             * kernel runs every case in every mode. */
            if (io != OP_ATTN_IO_F32 && kern == OP_ATTN_SCALAR && a.d != 128)
                continue;
            uint64_t es = f16 ? 2 : 4, kes = f16 || kv16 ? 2 : 4;
            for (size_t i = 0; i < nf; i++) {
                h[i] = quant_f32_to_f16(f[i]);
                fr[i] = quant_f16_to_f32(h[i]);
            }
            vkr_arena_reset(t->act);
            /* every input in both types: q from one, k and v from the other */
            struct vkr_tensor f32t = put(t, t->act, f, nf * 4), f16t = put(t, t->act, h, nf * 2);
            struct vkr_tensor qt = f16 ? f16t : f32t, kt = kes == 2 ? f16t : f32t;
            a.q = (struct vkr_tensor){.block = qt.block, .offset = qt.offset + qo * es,
                                      .size = qt.size - qo * es};
            a.k = (struct vkr_tensor){.block = kt.block, .offset = kt.offset + ko * kes,
                                      .size = kt.size - ko * kes};
            a.v = (struct vkr_tensor){.block = kt.block, .offset = kt.offset + vo * kes,
                                      .size = kt.size - vo * kes};
            a.o = put(t, t->act, NULL, no * es);
            struct vkr_tensor rt = put(t, t->act, rg ? (const void *)rg : (const void *)f, rg ? 8ull * a.tq : 4);
            a.ranges = rg ? &rt : NULL;
            a.f16 = f16;
            a.kv_f16 = kv16;
            a.kernel = (enum op_attn_kernel)kern;
            RUN(t, op_attention(c, &a, e));
            if (f16) {
                get(t, a.o, h, no * 2);
                for (size_t i = 0; i < no; i++)
                    g[i] = quant_f16_to_f32(h[i]);
            } else {
                get(t, a.o, g, no * 4);
            }
            /* the reference reads what the kernel reads: rounded where f16 */
            const float *qr = f16 ? fr : f, *kr = kes == 2 ? fr : f;
            if (tc)
                ops_ref_attention_f16mm(&a, qr + qo, kr + ko, kr + vo, rg, r);
            else
                ops_ref_attention(&a, qr + qo, kr + ko, kr + vo, rg, r);
            size_t at = 0;
            double tabs = tc ? 1.5e-3 : 2e-5;
            double trel = tc || f16 ? 1e-3 : 1e-4;
            double wv = worst(g, r, NULL, no, tabs, trel, &at);
            CHECK(wv <= 1.0, "attention %s (tq %u tk %u heads %u/%u d %u causal %d) %s %s: worst "
                  "%.3g at %zu (gpu %g ref %g)", what, a.tq, a.tk, a.hq, a.hkv, a.d, a.causal,
                  kern == OP_ATTN_CM2 ? "cm2" : kern == OP_ATTN_COOPMAT ? "coopmat" : "scalar",
                  f16 ? "f16" : kv16 ? "f16 k/v" : "f32", wv, at, (double)g[at], (double)r[at]);
        }
    }
    free(fr), free(g), free(r), free(h);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

enum { R_NONE, R_WIN, R_WIN64, R_LABEL };

void test_attention(struct T *t)
{
    struct {
        uint32_t tq, tk, hq, hkv, d;
        int causal, ranges;
        const char *what;
    } cases[] = {
        {37, 37, 2, 2, 64, 0, R_NONE, "plain, odd length"},
        {45, 45, 4, 2, 128, 1, R_NONE, "causal + GQA, text head"},
        {3, 40, 4, 1, 128, 1, R_NONE, "decode against a KV cache"},
        {50, 50, 2, 2, 80, 0, R_WIN, "block-diagonal windows, vision head"},
        {20, 20, 1, 1, 16, 1, R_WIN, "causal within windows, an empty row"},
        {200, 200, 2, 1, 128, 1, R_NONE, "many key tiles, GQA 2:1"},
        {150, 150, 2, 2, 80, 0, R_WIN64, "64-patch windows, a partial one, 3 query blocks"},
        {70, 70, 3, 3, 16, 0, R_NONE, "head 16"},
        {33, 33, 2, 2, 72, 1, R_NONE, "head 72 (no tensor-core kernel)"},
        {21, 21, 2, 1, 256, 1, R_NONE, "head 256 (scalar only)"},
        {65, 130, 2, 2, 64, 1, R_NONE, "causal with a KV offset, 2 query blocks"},
        {1, 1, 1, 1, 64, 0, R_NONE, "one token"},
        {12, 99, 4, 2, 128, 0, R_LABEL, "label scoring: 3 labels x 4 tokens after a 29-key prefix"},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct op_attention a = {.tq = cases[ci].tq, .tk = cases[ci].tk, .hq = cases[ci].hq,
                                 .hkv = cases[ci].hkv, .d = cases[ci].d, .causal = cases[ci].causal};
        a.scale = 1.0f / sqrtf((float)a.d);
        size_t nq = (size_t)a.tq * a.hq * a.d, nk = (size_t)a.tk * a.hkv * a.d;
        if (t->ranged && (nq * 4 > vkr_limits(t->vk)->max_range || nk * 4 > vkr_limits(t->vk)->max_range))
            continue; /* attention binds q/k/v whole by design */
        size_t ko = align64(nq), vo = ko + align64(nk), nf = vo + nk;
        float *f = calloc(nf, sizeof(float));
        uint32_t *rg = malloc(sizeof(uint32_t) * 2 * a.tq);
        fill(t, f, nq, 2.0f);
        fill(t, f + ko, nk, 2.0f);
        fill(t, f + vo, nk, 1.0f);
        for (uint32_t i = 0; i < a.tq; i++) {
            uint32_t lo = 0, hi = a.tk;
            if (cases[ci].ranges == R_WIN) { /* [0,16) [16,40) [40,..) */
                lo = i < 16 ? 0 : i < 40 ? 16 : 40;
                hi = i < 16 ? 16 : i < 40 ? 40 : a.tk;
            } else if (cases[ci].ranges == R_WIN64) {
                lo = i / 64 * 64;
                hi = lo + 64;
            } else if (cases[ci].ranges == R_LABEL) {
                /* K/V: per label the 29 prefix keys then its 4 tokens;
                 * a label token sees the prefix and its label's earlier
                 * tokens, never another label's. */
                uint32_t lab = i / 4, tok = i % 4, blk = 29 + 4;
                lo = lab * blk;
                hi = lo + 29 + tok + 1;
            }
            rg[2 * i] = lo;
            rg[2 * i + 1] = hi < a.tk ? hi : a.tk;
        }
        if (cases[ci].ranges == R_WIN && a.tq > 5)
            rg[2 * 5] = rg[2 * 5 + 1] = 3; /* a query that sees nothing -> zeros */
        attn_all(t, a, f, nf, 0, ko, vo, cases[ci].ranges != R_NONE ? rg : NULL, cases[ci].what);
        free(f), free(rg);
    }
}

/* op_attention_ranged: the same cases plus strided (fused QKV) operands and
 * a head size outside the fused kernel's own test list, through the split
 * path. In ranged mode (16 KiB bindings) every case but the smallest
 * exceeds one binding, so queries and keys are cut into chunks whose
 * partial outputs are merged by log-sum-exp; the result must meet the
 * fused kernel's bound against the same reference. The text-head cases run
 * again with f16 K and V (the text model's KV cache), against the
 * reference on the same rounded K and V with the same f32 bound: attn_lse
 * and the chunks' kernel widen them exactly. */
void test_attention_split(struct T *t)
{
    struct {
        uint32_t tq, tk, hq, hkv, d;
        int causal, windows, fused;
    } cases[] = {
        {37, 37, 2, 2, 64, 0, 0, 0},    {45, 45, 4, 2, 128, 1, 0, 0}, {3, 90, 4, 1, 128, 1, 0, 0},
        {50, 50, 2, 2, 80, 0, 1, 0},    {20, 20, 1, 1, 32, 1, 1, 0},  {200, 200, 2, 1, 128, 1, 0, 0},
        {70, 70, 4, 2, 64, 1, 0, 1},    {130, 130, 2, 2, 64, 0, 1, 0},
    };
    int split = 0;
    for (size_t cj = 0; cj < 2 * (sizeof cases / sizeof cases[0]); cj++) {
        size_t ci = cj % (sizeof cases / sizeof cases[0]);
        int kv16 = cj >= sizeof cases / sizeof cases[0];
        /* one tensor holds a fused case's q, k and v: a single element
         * type; and only the text head size, as in attn_all (lavapipe's
         * compile per specialisation) */
        if (kv16 && (cases[ci].fused || cases[ci].d != 128))
            continue;
        struct op_attention a = {.tq = cases[ci].tq, .tk = cases[ci].tk, .hq = cases[ci].hq,
                                 .hkv = cases[ci].hkv, .d = cases[ci].d, .causal = cases[ci].causal,
                                 .kv_f16 = kv16};
        a.scale = 1.0f / sqrtf((float)a.d);
        uint32_t w = cases[ci].fused ? (a.hq + 2 * a.hkv) * a.d : 0;
        size_t nq = (size_t)a.tq * a.hq * a.d, nk = (size_t)a.tk * a.hkv * a.d;
        size_t nf = cases[ci].fused ? (size_t)a.tq * w : nq + 2 * nk;
        float *f = malloc(sizeof(float) * nf), *g = malloc(sizeof(float) * nq);
        float *r = malloc(sizeof(float) * nq);
        uint32_t *rg = malloc(sizeof(uint32_t) * 2 * a.tq);
        uint16_t *h = malloc(sizeof(uint16_t) * nf);
        fill(t, f, nf, 2.0f);
        for (size_t i = nq; kv16 && i < nf; i++) { /* K and V as the cache holds them */
            h[i] = quant_f32_to_f16(f[i]);
            f[i] = quant_f16_to_f32(h[i]);
        }
        for (uint32_t i = 0; i < a.tq; i++) { /* windows of 16, 24, then the rest */
            uint32_t lo = i < 16 ? 0 : i < 40 ? 16 : 40, hi = i < 16 ? 16 : i < 40 ? 40 : a.tk;
            rg[2 * i] = lo;
            rg[2 * i + 1] = hi < a.tk ? hi : a.tk;
        }
        if (cases[ci].windows && a.tq > 5)
            rg[2 * 5] = rg[2 * 5 + 1] = 3;
        vkr_arena_reset(t->act);
        struct vkr_tensor ft = put(t, t->act, f, sizeof(float) * nf);
        uint64_t ko = cases[ci].fused ? (uint64_t)a.hq * a.d * 4 : nq * 4;
        uint64_t vo = cases[ci].fused ? ko + (uint64_t)a.hkv * a.d * 4 : (nq + nk) * 4;
        a.q = ft;
        a.k = (struct vkr_tensor){.block = ft.block, .offset = ft.offset + ko, .size = ft.size - ko};
        a.v = (struct vkr_tensor){.block = ft.block, .offset = ft.offset + vo, .size = ft.size - vo};
        if (kv16) { /* the same elements as f16, at half the byte offsets */
            struct vkr_tensor ht = put(t, t->act, h, sizeof(uint16_t) * nf);
            a.k = (struct vkr_tensor){.block = ht.block, .offset = ht.offset + ko / 2,
                                      .size = ht.size - ko / 2};
            a.v = (struct vkr_tensor){.block = ht.block, .offset = ht.offset + vo / 2,
                                      .size = ht.size - vo / 2};
        }
        if (cases[ci].fused)
            a.q_stride = a.k_stride = a.v_stride = w;
        a.o = put(t, t->act, NULL, sizeof(float) * nq);
        struct vkr_tensor rt = put(t, t->act, rg, sizeof(uint32_t) * 2 * a.tq);
        a.ranges = cases[ci].windows ? &rt : NULL;
        uint64_t sb[4];
        op_attention_scratch_bytes(t->vk, a.tq, a.hq, a.d, sb);
        struct op_attention_scratch sc = {put(t, t->act, NULL, sb[0]), put(t, t->act, NULL, sb[1]),
                                          put(t, t->act, NULL, sb[2]), put(t, t->act, NULL, sb[3])};
        split += !kv16 && nf * 4 > vkr_limits(t->vk)->max_range;
        /* the split machinery is under test here, the kernels in attn_all:
         * the f32 kernel whose bound this is (chunks always run it) */
        a.kernel = OP_ATTN_SCALAR;
        RUN(t, op_attention_ranged(c, &a, &sc, e));
        get(t, a.o, g, sizeof(float) * nq);
        ops_ref_attention(&a, f, f + ko / 4, f + vo / 4, cases[ci].windows ? rg : NULL, r);
        size_t at = 0;
        double wv = worst(g, r, NULL, nq, 2e-5, 1e-4, &at); /* the fused kernel's bound */
        CHECK(wv <= 1.0, "split attention case %zu%s: worst %.3g at %zu (gpu %g ref %g)", ci,
              kv16 ? " (f16 k/v)" : "", wv, at, (double)g[at], (double)r[at]);
        free(f), free(g), free(r), free(rg), free(h);
    }
    if (t->ranged)
        CHECK(split >= 6, "only %d split-attention cases exceeded the binding range", split);
}

/* q, k and v as slices of one fused QKV output (row strides). */
void test_attention_fused(struct T *t)
{
    struct op_attention a = {.tq = 30, .tk = 30, .hq = 4, .hkv = 2, .d = 64, .causal = 1};
    a.scale = 0.125f;
    uint32_t w = (a.hq + 2 * a.hkv) * a.d;
    size_t nf = (size_t)a.tq * w;
    if (t->ranged && nf * 4 > vkr_limits(t->vk)->max_range)
        return; /* attention binds q/k/v whole by design */
    float *f = malloc(sizeof(float) * nf);
    fill(t, f, nf, 2.0f);
    a.q_stride = a.k_stride = a.v_stride = w;
    size_t ko = (size_t)a.hq * a.d, vo = ko + (size_t)a.hkv * a.d;
    attn_all(t, a, f, nf, 0, ko, vo, NULL, "fused QKV strides");
    free(f);
}

static void attn_refused(struct T *t, const struct op_attention *a, int want, const char *says)
{
    struct folio_err e = {0};
    struct vkr_cmd *c = NULL;
    int rc = vkr_cmd_begin(t->vk, &c, &e);
    CHECK(rc == 0, "cmd_begin: %s", e.msg);
    if (rc)
        return;
    rc = op_attention(c, a, &e);
    vkr_cmd_abort(c);
    CHECK(rc == want && strstr(e.msg, says), "bad attention (d %u heads %u/%u): rc %d, \"%s\" "
          "(wanted %d, \"%s\")", a->d, a->hq, a->hkv, rc, e.msg, want, says);
}

/* Shapes the kernels cannot run are refused with a message naming them. */
void test_attention_errors(struct T *t)
{
    vkr_arena_reset(t->act);
    struct vkr_tensor x = put(t, t->act, NULL, 1u << 16);
    struct {
        struct op_attention a;
        int rc;
        const char *says;
    } bad[] = {
        {{.tq = 4, .tk = 4, .hq = 1, .hkv = 1, .d = 65}, FOLIO_EUNSUPPORTED, "head size 65"},
        {{.tq = 4, .tk = 4, .hq = 1, .hkv = 1, .d = 258}, FOLIO_EUNSUPPORTED, "head size 258"},
        {{.tq = 4, .tk = 4, .hq = 3, .hkv = 2, .d = 64}, FOLIO_EINVAL, "not a multiple of 2 KV"},
        {{.tq = 4, .tk = 4, .hq = 1, .hkv = 1, .d = 72, .kernel = OP_ATTN_COOPMAT},
         FOLIO_EUNSUPPORTED, "cooperative-matrix kernel is not available for head size 72"},
        {{.tq = 4, .tk = 4, .hq = 2, .hkv = 2, .d = 64, .q_stride = 129}, FOLIO_EINVAL,
         "must be even"},
        {{.tq = 4, .tk = 4, .hq = 2, .hkv = 2, .d = 64, .k_stride = 100}, FOLIO_EINVAL,
         "shorter than its heads"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct op_attention a = bad[i].a;
        a.q = a.k = a.v = a.o = x;
        a.scale = 1.0f;
        attn_refused(t, &a, bad[i].rc, bad[i].says);
    }
    struct op_attention a = {.tq = 4, .tk = 4, .hq = 1, .hkv = 1, .d = 64, .scale = 1.0f};
    a.q = a.k = a.v = a.o = x;
    a.k.offset += 4, a.k.size -= 4;
    attn_refused(t, &a, FOLIO_EINVAL, "8-byte aligned");
    if (t->ranged) { /* past one binding: the split path is f32 only */
        struct op_attention big = {.tq = 200, .tk = 200, .hq = 2, .hkv = 1, .d = 64, .f16 = 1,
                                   .scale = 1.0f};
        big.q = big.k = big.v = big.o = x;
        struct folio_err e = {0};
        struct vkr_cmd *c = NULL;
        int rc = vkr_cmd_begin(t->vk, &c, &e);
        if (!rc) {
            rc = op_attention_ranged(c, &big, NULL, &e);
            vkr_cmd_abort(c);
        }
        CHECK(rc == FOLIO_EUNSUPPORTED && strstr(e.msg, "f16 tensors past one binding"),
              "f16 split: rc %d \"%s\"", rc, e.msg);
    }
    struct vkr_pipeline_key k[3];
    CHECK(ops_attention_keys(t->vk, 65, 0, k) == 0, "odd head sizes have no kernel");
    int n = ops_attention_keys(t->vk, 80, 1, k);
    CHECK(n >= 1 && strcmp(k[0].shader, "attention") == 0 && k[0].spec[0] == 80 &&
          k[0].spec[2] == 1, "head 80 f16 keys: %d, %s", n, n ? k[0].shader : "-");
    CHECK(n == 1 + (op_attention_pick(t->vk, 80) == OP_ATTN_COOPMAT) +
                   op_attention_available(t->vk, OP_ATTN_CM2, 80, 1),
          "the tensor-core keys are declared exactly where the kernels run");
    n = ops_attention_keys(t->vk, 128, OP_ATTN_IO_KV16, k);
    CHECK(n >= 1 && strcmp(k[0].shader, "attention") == 0 && k[0].spec[2] == OP_ATTN_IO_KV16 &&
          (n == 1 || k[1].spec[2] == OP_ATTN_IO_KV16), "head 128 f16 K/V keys: %d", n);
    /* which kernels a failed build only slows: the workgroup-scope one, not
     * the subgroup or scalar ones every device needs */
    for (int i = 0; i < n; i++)
        CHECK(ops_key_optional(&k[i]) == (strcmp(k[i].shader, "flash_attn_cm2") == 0),
              "key %s optional %d", k[i].shader, ops_key_optional(&k[i]));
    /* AUTO's kernel for a prompt pass: the workgroup-scope one where its
     * pipeline was built (the harness pre-warmed every op key, as a model
     * pre-warms its own) */
    struct op_attention pa = {.tq = 200, .tk = 200, .hq = 4, .hkv = 2, .d = 128,
                              .kv_f16 = 1, .scale = 1.0f};
    if (op_attention_available(t->vk, OP_ATTN_CM2, 128, OP_ATTN_IO_KV16)) {
        CHECK(vkr_pipeline_ready(t->vk, &k[n - 1]) && strcmp(k[n - 1].shader, "flash_attn_cm2") == 0,
              "the workgroup-scope kernel was pre-warmed and built");
        CHECK(op_attention_kernel(t->vk, &pa) == OP_ATTN_CM2,
              "AUTO takes the workgroup-scope kernel for a 200-row pass");
        pa.f16 = 0, pa.kv_f16 = 0; /* f32 K/V: not that kernel */
        CHECK(op_attention_kernel(t->vk, &pa) != OP_ATTN_CM2, "f32 K/V stay off it");
    } else {
        CHECK(op_attention_kernel(t->vk, &pa) != OP_ATTN_CM2,
              "no workgroup-scope kernel where the device lacks it");
    }
    CHECK(ops_attention_keys(t->vk, 128, OP_ATTN_IO_KV16 + 1, k) == 0, "an unknown io mode has no key");
}

/* Two key ranges per query (a label row: its page's prompt slots and its
 * own label's slots of the KV cache) and split K, on each kernel the
 * device has, against the C reference with the kernel's bound (scalar:
 * 2e-5 absolute + 1e-4 relative; for f16 K/V the reference runs on the
 * same rounded K and V; tensor cores: attn_all's f16-product bound, 1.5e-3
 * + 1e-3, against outputs of ~0.1-1). A key leaking in
 * from a neighbouring page, the gap or another label, a key counted twice
 * where the ranges overlap, or a share merged with the wrong weight moves
 * an output by ~1/(visible keys) >= 1e-3, far outside it. Every case runs
 * unsplit and split in several ways, including more shares than a block
 * has key tiles (empty shares must weigh nothing); with the device's
 * binding range they go through op_attention and must split as asked
 * (op_attention_splits_for), in ranged mode (16 KiB bindings) through the
 * key and query chunks of op_attention_ranged, whose attn_lse clips both
 * ranges to each chunk. */
enum { TR_LABELS, TR_EDGES, TR_CAUSAL, TR_DECODE };

static void two_range_rows(int kind, uint32_t tq, uint32_t tk, uint32_t *rg)
{
    if (kind == TR_LABELS) {
        /* three pages' prompts in slots [0, 37) [37, 87) [87, 108), 12
         * unused slots, then the label rows from slot 120: page 0 has 7
         * labels of 2 rows, page 1 one of 5 rows and 5 of 2, page 2 the
         * rest in 3-row labels; 16-row blocks straddle the pages */
        static const uint32_t start[] = {0, 37, 87}, len[] = {37, 50, 21};
        uint32_t r = 0;
        for (uint32_t b = 0; b < 3 && r < tq; b++) {
            uint32_t nlab = b == 0 ? 7 : b == 1 ? 6 : tq;
            for (uint32_t l = 0; l < nlab && r < tq; l++) {
                uint32_t k = b == 0 ? 2 : b == 1 ? (l == 0 ? 5 : 2) : 3, r0 = r;
                for (uint32_t j = 0; j < k && r < tq; j++, r++) {
                    uint32_t *q = rg + 4 * r;
                    q[0] = start[b];
                    q[1] = start[b] + len[b];
                    q[2] = 120 + r0;
                    q[3] = 120 + r + 1;
                }
            }
        }
        return;
    }
    for (uint32_t i = 0; i < tq; i++) {
        uint32_t *q = rg + 4 * i;
        if (kind == TR_CAUSAL) { /* kv_off 40: query i sees keys <= i + 40 */
            q[0] = i % 7, q[1] = 45 + i % 5, q[2] = 50, q[3] = 60;
            continue;
        }
        switch (kind == TR_EDGES ? i % 8 : 7) {
        case 0: q[0] = 0, q[1] = 0, q[2] = 200 + i, q[3] = 230 + i; break;  /* first empty */
        case 1: q[0] = 10 + i, q[1] = 70, q[2] = 5, q[3] = 5; break;         /* second empty */
        case 2: q[0] = q[1] = q[2] = q[3] = 0; break;                        /* nothing: zeros */
        case 3: q[0] = 40, q[1] = 120, q[2] = 100, q[3] = 180; break;        /* overlapping */
        case 4: q[0] = 150, q[1] = 160, q[2] = 30, q[3] = 31; break;         /* second first */
        case 5: q[0] = 60, q[1] = 64, q[2] = 64, q[3] = tk + 50; break;      /* touching, past tk */
        case 6: q[0] = 299, q[1] = 300, q[2] = 0, q[3] = 1; break;           /* the two ends */
        default: /* disjoint: a prefix and a window near the end */
            q[0] = 3, q[1] = tk / 3, q[2] = tk - 40 + i % 13, q[3] = tk - 20 + i % 17;
            if (q[3] > tk)
                q[3] = tk;
            break;
        }
    }
}

void test_attention_two_ranges(struct T *t)
{
    struct {
        uint32_t tq, tk, hq, hkv, d;
        int kind;
        uint32_t max_split; /* the shares' scratch within the 1 MiB test arena */
        const char *what;
    } cases[] = {
        {40, 160, 2, 1, 128, TR_LABELS, 5, "label rows of 3 pages, blocks straddling pages, GQA 2:1"},
        {33, 300, 2, 2, 64, TR_EDGES, 16, "empty, overlapping, swapped, touching and clipped ranges"},
        {20, 60, 2, 1, 32, TR_CAUSAL, 16, "causal clipping both ranges, GQA 2:1"},
        {3, 500, 4, 1, 128, TR_DECODE, 16, "3 rows against 500 keys, GQA 4:1"},
    };
    static const uint32_t splits[] = {1, 2, 3, 5, 16};
    for (size_t cx = 0; cx < 2 * (sizeof cases / sizeof cases[0]); cx++) {
        size_t ci = cx / 2;
        int cm = cx % 2; /* the tensor-core kernel, where the device has it */
        if (cm && (op_attention_pick(t->vk, cases[ci].d) != OP_ATTN_COOPMAT || t->ranged))
            continue;
        struct op_attention a = {.tq = cases[ci].tq, .tk = cases[ci].tk, .hq = cases[ci].hq,
                                 .hkv = cases[ci].hkv, .d = cases[ci].d,
                                 .causal = cases[ci].kind == TR_CAUSAL, .two_ranges = 1,
                                 .kernel = cm ? OP_ATTN_COOPMAT : OP_ATTN_SCALAR};
        a.scale = 1.0f / sqrtf((float)a.d);
        size_t nq = (size_t)a.tq * a.hq * a.d, nk = (size_t)a.tk * a.hkv * a.d;
        float *f = malloc(sizeof(float) * (nq + 2 * nk)), *g = malloc(sizeof(float) * nq);
        float *r = malloc(sizeof(float) * nq);
        uint16_t *h = malloc(sizeof(uint16_t) * 2 * nk);
        uint32_t *rg = calloc(4 * (size_t)a.tq, sizeof *rg);
        fill(t, f, nq + 2 * nk, 2.0f);
        two_range_rows(cases[ci].kind, a.tq, a.tk, rg);
        for (int kv16 = 0; kv16 < 2; kv16++) {
            if (kv16 && a.d != 128) /* lavapipe's compile per specialisation, as in attn_all */
                continue;
            if (kv16) /* K and V as an f16 cache holds them; the reference reads the same */
                for (size_t i = 0; i < 2 * nk; i++) {
                    h[i] = quant_f32_to_f16(f[nq + i]);
                    f[nq + i] = quant_f16_to_f32(h[i]);
                }
            ops_ref_attention(&a, f, f + nq, f + nq + nk, rg, r);
            for (size_t si = 0; si < sizeof splits / sizeof splits[0]; si++) {
                if (splits[si] > cases[ci].max_split)
                    continue;
                vkr_arena_reset(t->act);
                a.kv_f16 = kv16;
                a.q = put(t, t->act, f, sizeof(float) * nq);
                a.k = kv16 ? put(t, t->act, h, 2 * nk) : put(t, t->act, f + nq, sizeof(float) * nk);
                a.v = kv16 ? put(t, t->act, h + nk, 2 * nk)
                           : put(t, t->act, f + nq + nk, sizeof(float) * nk);
                a.o = put(t, t->act, NULL, sizeof(float) * nq);
                struct vkr_tensor rt = put(t, t->act, rg, 16ull * a.tq);
                a.ranges = &rt;
                uint64_t kb[2], sb[4];
                op_attention_ksplit_bytes(t->vk, a.tq, a.hq, a.d, splits[si], kb);
                op_attention_scratch_bytes(t->vk, a.tq, a.hq, a.d, sb);
                struct op_attention_ksplit ks = {put(t, t->act, NULL, kb[0] ? kb[0] : 16),
                                                 put(t, t->act, NULL, kb[1] ? kb[1] : 16)};
                struct op_attention_scratch sc = {put(t, t->act, NULL, sb[0]),
                                                  put(t, t->act, NULL, sb[1]),
                                                  put(t, t->act, NULL, sb[2]),
                                                  put(t, t->act, NULL, sb[3])};
                a.ksplit = &ks;
                a.splits = splits[si];
                if (!t->ranged)
                    CHECK(op_attention_splits_for(t->vk, &a) == splits[si],
                          "two ranges %s: %u shares asked, %u taken", cases[ci].what, splits[si],
                          op_attention_splits_for(t->vk, &a));
                RUN(t, op_attention_ranged(c, &a, &sc, e));
                get(t, a.o, g, sizeof(float) * nq);
                size_t at = 0;
                double wv = worst(g, r, NULL, nq, cm ? 1.5e-3 : 2e-5, cm ? 1e-3 : 1e-4, &at);
                CHECK(wv <= 1.0, "two ranges %s%s, %s, %u shares: worst %.3g at %zu (gpu %g ref %g)",
                      cases[ci].what, kv16 ? " (f16 k/v)" : "", cm ? "coopmat" : "scalar",
                      splits[si], wv, at, (double)g[at], (double)r[at]);
            }
        }
        free(f), free(g), free(r), free(h), free(rg);
    }
    /* what the op refuses, and what AUTO plans on this device */
    vkr_arena_reset(t->act);
    struct vkr_tensor x = put(t, t->act, NULL, 1u << 16);
    struct op_attention a = {.tq = 4, .tk = 4, .hq = 1, .hkv = 1, .d = 64, .scale = 1.0f,
                             .two_ranges = 1};
    a.q = a.k = a.v = a.o = x;
    attn_refused(t, &a, FOLIO_EINVAL, "without a ranges buffer");
    a.ranges = &x;
    a.kernel = OP_ATTN_COOPMAT;
    if (op_attention_pick(t->vk, a.d) != OP_ATTN_COOPMAT) {
        attn_refused(t, &a, FOLIO_EUNSUPPORTED, "cooperative-matrix kernel is not available");
        /* asking how a pass on that missing kernel would split (its tile
         * size is 0 here) answers without dividing by it */
        struct op_attention_ksplit ks = {x, x};
        a.ksplit = &ks;
        CHECK(op_attention_splits_for(t->vk, &a) >= 1, "shares of a pass on a missing kernel");
        a.ksplit = NULL;
    }
    /* the workgroup-scope kernel: never f32 K/V, never two ranges */
    a.kernel = OP_ATTN_CM2;
    attn_refused(t, &a, FOLIO_EUNSUPPORTED, "workgroup-scope kernel is not available");
    a.kv_f16 = 1;
    attn_refused(t, &a, FOLIO_EUNSUPPORTED,
                 op_attention_available(t->vk, OP_ATTN_CM2, a.d, OP_ATTN_IO_KV16)
                     ? "one key range per query" : "workgroup-scope kernel is not available");
    a.kv_f16 = 0;
    uint64_t kb[2];
    op_attention_ksplit_bytes(t->vk, 48, 28, 128, 4, kb);
    CHECK(kb[0] == 4ull * 48 * 28 * 128 * 4 && kb[1] == 4ull * 48 * 28 * 4,
          "4 forced shares of 48 x 28 x 128: %llu / %llu bytes", (unsigned long long)kb[0],
          (unsigned long long)kb[1]);
    if (!vkr_limits(t->vk)->compute_units && !getenv("FOLIO_ATTN_SPLIT")) {
        /* a device that does not say its multiprocessors (lavapipe) never splits */
        op_attention_ksplit_bytes(t->vk, 48, 28, 128, 0, kb);
        CHECK(kb[0] == 0 && kb[1] == 0, "AUTO plans split-K scratch without multiprocessors");
    }
}
