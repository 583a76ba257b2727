/*
 * The text-model test body shared by test_lm_ref.c (device limits as they
 * are) and test_lm_ref_ranged.c (FOLIO_VK_MAX_ALLOC / FOLIO_VK_MAX_RANGE
 * lowered so weights span many blocks and exceed one binding).
 *
 * Truth: a plain C forward written from the op references (ops_ref_*) on
 * weights dequantized on the host, one sequence at a time, full causal
 * attention, every label scored by running prompt + label from scratch.
 * The GPU engine shares the prompt's KV cache across labels, batches
 * ragged sequences and attends label rows to the prompt's and their own
 * label's cache slots (two key ranges per row); none of that exists in the
 * reference, so agreement tests those mechanisms, not just the ops.
 *
 * Bounds: logits max|Δ| <= 1e-3 · max|logit| over every position (3e-3
 * where the f16 cooperative-matrix matmul runs); label
 * log-probabilities |Δ| <= 2e-3 · max(1, |ref|); same top label; the fused
 * classify pass equals prefill + score to 1e-4 (1e-3 with f16 matmuls). Zero pipeline creations
 * after seal and zero validation messages.
 */
#include "tests/support/testutil.h"
#include "bench/engine/synth.h"
#include "common/common.h"
#include "engine/model/gguf_model.h"
#include "engine/model/lm.h"
#include "engine/quant/quant.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- reference */

struct refm {
    struct gguf_text_hparams hp;
    uint32_t E, QW, KW, F, V, D;
    float *emb, *out, *onorm;
    struct {
        float *an, *wq, *bq, *wk, *bk, *wv, *bv, *wo, *fn, *wg, *wu, *wd;
    } *L;
};

static float *deq(const struct gguf_model *m, const char *name)
{
    const struct gguf_tensor_info *t = gguf_find_tensor(m->file, name);
    if (!t)
        return NULL;
    float *x = malloc(t->n_elems * sizeof *x);
    if (!x)
        return NULL;
    uint64_t k = t->ne[0], rows = t->n_elems / k, rb = quant_row_bytes(t->type, k);
    for (uint64_t r = 0; r < rows; r++)
        quant_dequantize_row(t->type, (const uint8_t *)t->data + r * rb, x + r * k, (int64_t)k);
    return x;
}

static int ref_load(struct refm *R, const struct gguf_model *m)
{
    memset(R, 0, sizeof *R);
    R->hp = m->text;
    R->E = R->hp.n_embd;
    R->D = R->hp.head_dim;
    R->QW = R->hp.n_head * R->D;
    R->KW = R->hp.n_head_kv * R->D;
    R->F = R->hp.n_ff;
    R->V = R->hp.n_vocab;
    R->emb = deq(m, "token_embd.weight");
    R->out = R->hp.tied_output ? deq(m, "token_embd.weight") : deq(m, "output.weight");
    R->onorm = deq(m, "output_norm.weight");
    R->L = calloc(R->hp.n_layer, sizeof *R->L);
    if (!R->emb || !R->out || !R->onorm || !R->L)
        return -1;
    char nm[96];
    for (uint32_t i = 0; i < R->hp.n_layer; i++) {
#define G(field, s)                                                                          \
    snprintf(nm, sizeof nm, "blk.%u." s, i);                                                 \
    R->L[i].field = deq(m, nm);                                                              \
    if (!R->L[i].field)                                                                      \
        return -1;
        G(an, "attn_norm.weight") G(wq, "attn_q.weight") G(bq, "attn_q.bias")
        G(wk, "attn_k.weight") G(bk, "attn_k.bias") G(wv, "attn_v.weight")
        G(bv, "attn_v.bias") G(wo, "attn_output.weight") G(fn, "ffn_norm.weight")
        G(wg, "ffn_gate.weight") G(wu, "ffn_up.weight") G(wd, "ffn_down.weight")
#undef G
    }
    return 0;
}

static void ref_free(struct refm *R)
{
    free(R->emb);
    free(R->out);
    free(R->onorm);
    for (uint32_t i = 0; R->L && i < R->hp.n_layer; i++) {
        float **f = &R->L[i].an;
        for (int j = 0; j < 12; j++)
            free(f[j]);
    }
    free(R->L);
}

/* logits: n x V, every position. tokens < 0 take rows from embd. */
static void ref_forward(const struct refm *R, const int32_t *tok, uint32_t n, const float *embd,
                        const int32_t *pos, float *logits)
{
    uint32_t E = R->E, QW = R->QW, KW = R->KW, F = R->F;
    float *x = calloc((size_t)n * E, 4), *h = calloc((size_t)n * E, 4);
    float *q = calloc((size_t)n * QW, 4), *k = calloc((size_t)n * KW, 4);
    float *v = calloc((size_t)n * KW, 4), *o = calloc((size_t)n * QW, 4);
    float *t2 = calloc((size_t)n * E, 4), *g = calloc((size_t)n * F, 4);
    float *u = calloc((size_t)n * F, 4);
    int32_t *p3 = calloc((size_t)n * 3, 4);
    for (uint32_t i = 0; i < n; i++) {
        memcpy(x + (size_t)i * E, tok[i] >= 0 ? R->emb + (size_t)tok[i] * E : embd + (size_t)i * E,
               E * 4);
        for (int c = 0; c < 3; c++)
            p3[i * 3 + c] = pos ? pos[i * 3 + c] : (int32_t)i;
    }
    for (uint32_t li = 0; li < R->hp.n_layer; li++) {
        ops_ref_norm(0, x, h, R->L[li].an, NULL, n, E, R->hp.rms_eps);
        ops_ref_matmul(R->L[li].wq, h, R->L[li].bq, q, n, QW, E);
        ops_ref_matmul(R->L[li].wk, h, R->L[li].bk, k, n, KW, E);
        ops_ref_matmul(R->L[li].wv, h, R->L[li].bv, v, n, KW, E);
        struct op_rope rp = {.t = n, .h = R->hp.n_head, .d = R->D, .mode = OP_ROPE_MROPE,
                             .base = R->hp.rope_theta,
                             .sections = {(uint32_t)R->hp.mrope_sections[0],
                                          (uint32_t)R->hp.mrope_sections[1],
                                          (uint32_t)R->hp.mrope_sections[2]}};
        ops_ref_rope(&rp, q, p3, q);
        rp.h = R->hp.n_head_kv;
        ops_ref_rope(&rp, k, p3, k);
        struct op_attention at = {.tq = n, .tk = n, .hq = R->hp.n_head, .hkv = R->hp.n_head_kv,
                                  .d = R->D, .scale = 1.0f / sqrtf((float)R->D), .causal = 1};
        ops_ref_attention(&at, q, k, v, NULL, o);
        ops_ref_matmul(R->L[li].wo, o, NULL, t2, n, E, QW);
        ops_ref_elem(OP_ADD, x, t2, x, (uint64_t)n * E, (uint64_t)n * E, 1, 0);
        ops_ref_norm(0, x, h, R->L[li].fn, NULL, n, E, R->hp.rms_eps);
        ops_ref_matmul(R->L[li].wg, h, NULL, g, n, F, E);
        ops_ref_matmul(R->L[li].wu, h, NULL, u, n, F, E);
        ops_ref_elem(OP_SWIGLU, g, u, g, (uint64_t)n * F, (uint64_t)n * F, 1, 0);
        ops_ref_matmul(R->L[li].wd, g, NULL, t2, n, E, F);
        ops_ref_elem(OP_ADD, x, t2, x, (uint64_t)n * E, (uint64_t)n * E, 1, 0);
    }
    ops_ref_norm(0, x, h, R->onorm, NULL, n, E, R->hp.rms_eps);
    ops_ref_matmul(R->out, h, NULL, logits, n, R->V, E);
    free(x), free(h), free(q), free(k), free(v), free(o), free(t2), free(g), free(u), free(p3);
}

/* Sum of log p(label token j | prompt, label[0..j)) from scratch. */
static double ref_label(const struct refm *R, const int32_t *tok, uint32_t n, const float *embd,
                        const int32_t *pos, int32_t next_pos, const int32_t *lab, uint32_t ln)
{
    uint32_t N = n + ln - 1;
    int32_t *t = malloc(N * 4), *p = malloc((size_t)N * 12);
    float *lg = malloc((size_t)N * R->V * 4);
    float *em = calloc((size_t)N * R->E, 4);
    memcpy(t, tok, n * 4);
    memcpy(t + n, lab, (ln - 1) * 4);
    for (uint32_t i = 0; i < N; i++)
        for (int c = 0; c < 3; c++)
            p[i * 3 + c] = i < n ? (pos ? pos[i * 3 + c] : (int32_t)i)
                                 : (pos ? next_pos : (int32_t)n) + (int32_t)(i - n);
    if (embd)
        memcpy(em, embd, (size_t)n * R->E * 4);
    ref_forward(R, t, N, em, p, lg);
    double s = 0.0;
    for (uint32_t j = 0; j < ln; j++) {
        const float *row = lg + (size_t)(n - 1 + j) * R->V;
        double mx = -INFINITY, z = 0.0;
        for (uint32_t i = 0; i < R->V; i++)
            mx = row[i] > mx ? row[i] : mx;
        for (uint32_t i = 0; i < R->V; i++)
            z += exp(row[i] - mx);
        s += row[lab[j]] - mx - log(z);
    }
    free(t), free(p), free(lg), free(em);
    return s;
}

/* ------------------------------------------------------------------- cases */

struct LT {
    struct vkr *vk;
    double tol; /* logits bound relative to max|logit| */
    int ranged;
};

static double max_abs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m))
            m = d;
    }
    return m;
}

/* Prompts: two text sequences of different lengths, and one with four
 * "image" rows (embeddings given, 2x2 grid M-RoPE positions). */
enum { NA = 13, NB = 7, NC = 9, NLAB = 6 };
static const int32_t SEQ_A[NA] = {5, 17, 3, 99, 42, 7, 7, 250, 11, 64, 1, 2, 300};
static const int32_t SEQ_B[NB] = {8, 130, 9, 21, 77, 400, 6};
static const int32_t SEQ_C[NC] = {12, 13, 14, -1, -1, -1, -1, 15, 16};
static const int32_t POS_C[NC * 3] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 4,
                                      3, 4, 3, 3, 4, 4, 5, 5, 5, 6, 6, 6};
/* Labels share leading tokens (the first three, and 4 vs 5). */
static const int32_t L0[] = {31, 32, 33}, L1[] = {31, 32, 34}, L2[] = {31}, L3[] = {40, 41},
                     L4[] = {31, 32}, L5[] = {50, 51, 52};
static const struct lm_label LABELS[NLAB] = {{L0, 3}, {L1, 3}, {L2, 1}, {L3, 2}, {L4, 2}, {L5, 3}};

static void run_model(struct LT *t, const char *what, const struct lm_synth *sy)
{
    struct folio_err e = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = lm_synth_gguf(sy, &buf, &len, &e);
    CHECK(rc == 0, "%s: synth: %s", what, e.msg);
    if (rc)
        return;
    struct gguf_file *f = NULL;
    struct gguf_model *m = NULL;
    rc = gguf_open_memory(buf, len, &f, &e);
    if (!rc)
        rc = gguf_model_check(f, 0, &m, &e);
    CHECK(rc == 0, "%s: model check: %s / %s", what, e.msg, e.detail);
    struct refm R;
    if (rc || ref_load(&R, m) != 0) {
        CHECK(0, "%s: reference load", what);
        gguf_model_close(m);
        free(buf);
        return;
    }
    struct lm_config cfg = {.max_tokens = 16, .batch = 2, .max_labels = NLAB,
                            .max_label_tokens = 3, .all_logits = 1,
                            /* ranged: the label rows' keys split over 3
                             * workgroups and merged (split K), within
                             * the key chunks of the lowered binding range */
                            .attn_splits = t->ranged ? 3 : 0};
    struct lm *lm = NULL;
    rc = lm_open(t->vk, m, &cfg, &lm, &e);
    CHECK(rc == 0, "%s: lm_open: %s / %s / %s", what, e.msg, e.detail, e.hint);
    if (rc)
        goto done;
    uint32_t V = R.V, E = R.E;
    float *embc = malloc((size_t)NC * E * 4);
    for (uint32_t i = 0; i < NC * E; i++)
        embc[i] = sinf((float)i * 0.37f);
    struct lm_seq seqs[3] = {{SEQ_A, NA, NULL, NULL, 0, NULL, 0},
                             {SEQ_B, NB, NULL, NULL, 0, NULL, 0},
                             {SEQ_C, NC, embc, POS_C, 7, NULL, 0}};
    float *lg = malloc((size_t)(NA + NB + NC) * V * 4);
    float *ref = malloc((size_t)(NA + NB + NC) * V * 4);

    /* 1. ragged batch of A and B, logits at every position */
    rc = lm_prefill(lm, seqs, 2, lg, &e);
    CHECK(rc == 0, "%s: prefill: %s / %s", what, e.msg, e.detail);
    ref_forward(&R, SEQ_A, NA, NULL, NULL, ref);
    ref_forward(&R, SEQ_B, NB, NULL, NULL, ref + (size_t)NA * V);
    double mx = max_abs(ref, (size_t)(NA + NB) * V), d = max_diff(lg, ref, (size_t)(NA + NB) * V);
    CHECK(rc == 0 && d <= t->tol * mx, "%s: batch logits max|d| %.3g > %.0e * %.3g", what, d,
          t->tol, mx);

    /* 2. labels against the cached prompts */
    double lp[2 * NLAB], lpf[2 * NLAB], pr[2 * NLAB], rl[2 * NLAB];
    int best[2];
    rc = lm_score(lm, LABELS, NLAB, lp, &e);
    CHECK(rc == 0, "%s: score: %s / %s", what, e.msg, e.detail);
    for (int b = 0; b < 2; b++) {
        int rb = 0, gb = 0;
        for (int l = 0; l < NLAB; l++) {
            rl[b * NLAB + l] = ref_label(&R, b ? SEQ_B : SEQ_A, b ? NB : NA, NULL, NULL, 0,
                                         LABELS[l].tokens, LABELS[l].n);
            double dd = fabs(lp[b * NLAB + l] - rl[b * NLAB + l]);
            CHECK(rc == 0 && dd <= 2e-3 * fmax(1.0, fabs(rl[b * NLAB + l])),
                  "%s: seq %d label %d logprob %.6f vs reference %.6f", what, b, l,
                  lp[b * NLAB + l], rl[b * NLAB + l]);
            if (rl[b * NLAB + l] > rl[b * NLAB + rb])
                rb = l;
            if (lp[b * NLAB + l] > lp[b * NLAB + gb])
                gb = l;
        }
        CHECK(rb == gb, "%s: seq %d top label %d, reference %d", what, b, gb, rb);
    }

    /* 3. fused prefill + labels in one submission equals the two passes */
    rc = lm_classify(lm, seqs, 2, LABELS, NLAB, lpf, pr, best, &e);
    CHECK(rc == 0, "%s: classify: %s / %s", what, e.msg, e.detail);
    for (int b = 0; b < 2 && rc == 0; b++) {
        double s = 0;
        int gb = 0;
        for (int l = 0; l < NLAB; l++) {
            CHECK(fabs(lpf[b * NLAB + l] - lp[b * NLAB + l]) <=
                      t->tol / 10 * fmax(1.0, fabs(lp[b * NLAB + l])),
                  "%s: fused %.6f vs two-pass %.6f", what, lpf[b * NLAB + l], lp[b * NLAB + l]);
            s += pr[b * NLAB + l];
            if (lpf[b * NLAB + l] > lpf[b * NLAB + gb])
                gb = l;
        }
        CHECK(fabs(s - 1.0) < 1e-9 && best[b] == gb, "%s: distribution sums to %.12f, best %d "
              "vs %d", what, s, best[b], gb);
    }

    /* 4. one sequence alone (batch of 1) with spliced embedding rows and
     * 2-D M-RoPE positions; labels start at next_pos */
    rc = lm_prefill(lm, &seqs[2], 1, lg, &e);
    CHECK(rc == 0, "%s: prefill C: %s / %s", what, e.msg, e.detail);
    ref_forward(&R, SEQ_C, NC, embc, POS_C, ref);
    mx = max_abs(ref, (size_t)NC * V);
    d = max_diff(lg, ref, (size_t)NC * V);
    CHECK(rc == 0 && d <= t->tol * mx, "%s: M-RoPE logits max|d| %.3g > %.0e * %.3g", what, d,
          t->tol, mx);
    rc = lm_score(lm, LABELS, NLAB, lp, &e);
    CHECK(rc == 0, "%s: score C: %s", what, e.msg);
    for (int l = 0; l < NLAB && rc == 0; l++) {
        double r = ref_label(&R, SEQ_C, NC, embc, POS_C, 7, LABELS[l].tokens, LABELS[l].n);
        CHECK(fabs(lp[l] - r) <= 2e-3 * fmax(1.0, fabs(r)), "%s: C label %d %.6f vs %.6f", what,
              l, lp[l], r);
    }
    free(embc);
    free(lg);
    free(ref);
    lm_close(lm);
done:
    ref_free(&R);
    gguf_model_close(m);
    free(buf);
}

static void bad_input(struct LT *t)
{
    struct lm_synth sy = {.n_embd = 128, .n_layer = 1, .n_head = 2, .n_head_kv = 1, .n_ff = 128,
                          .n_vocab = 64, .mat_type = QUANT_F16, .seed = 7};
    struct folio_err e = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    struct gguf_file *f = NULL;
    struct gguf_model *m = NULL;
    int rc = lm_synth_gguf(&sy, &buf, &len, &e);
    if (!rc)
        rc = gguf_open_memory(buf, len, &f, &e);
    if (!rc)
        rc = gguf_model_check(f, 0, &m, &e);
    CHECK(rc == 0, "bad-input model: %s", e.msg);
    if (rc) {
        free(buf);
        return;
    }
    struct lm_config cfg = {.max_tokens = 8, .batch = 1, .max_labels = 2, .max_label_tokens = 2};
    struct lm *lm = NULL;
    rc = lm_open(t->vk, m, &cfg, &lm, &e);
    CHECK(rc == 0, "lm_open: %s", e.msg);
    if (!rc) {
        double lp[4];
        rc = lm_score(lm, LABELS, 1, lp, &e);
        CHECK(rc == FOLIO_ESTATE, "score before prefill: rc %d", rc);
        int32_t toks[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, badt[2] = {1, 64};
        struct lm_seq s = {toks, 9, NULL, NULL, 0, NULL, 0};
        rc = lm_prefill(lm, &s, 1, NULL, &e);
        CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "--max-tokens"), "too long: rc %d %s", rc, e.msg);
        s.n = 2;
        s.tokens = badt;
        rc = lm_prefill(lm, &s, 1, NULL, &e);
        CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "vocabulary"), "bad token: rc %d %s", rc, e.msg);
        struct lm_seq two[2] = {{toks, 2, NULL, NULL, 0, NULL, 0}, {toks, 2, NULL, NULL, 0, NULL, 0}};
        rc = lm_prefill(lm, two, 2, NULL, &e);
        CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "--batch"), "batch: rc %d %s", rc, e.msg);
        float lg[64];
        s.tokens = toks;
        rc = lm_prefill(lm, &s, 1, lg, &e);
        CHECK(rc == FOLIO_EINVAL, "all logits not planned: rc %d", rc);
        rc = lm_prefill(lm, &s, 1, NULL, &e);
        CHECK(rc == 0, "good prefill after bad ones: %s", e.msg);
        rc = lm_score(lm, LABELS, 3, lp, &e);
        CHECK(rc == FOLIO_EINVAL, "too many labels: rc %d", rc);
        rc = lm_score(lm, LABELS, 1, lp, &e); /* L0 has 3 tokens > 2 */
        CHECK(rc == FOLIO_EINVAL, "label too long: rc %d", rc);
        rc = lm_score(lm, &LABELS[3], 1, lp, &e);
        CHECK(rc == 0 && lp[0] < 0, "good score after bad ones: %s (%f)", e.msg, lp[0]);
        lm_close(lm);
    }
    /* image rows taken on the device (lm_seq.dev): rows past the tensor's
     * end, and a second sequence whose rows do not follow on from the
     * first's, are refused before any work */
    cfg.batch = 2;
    rc = lm_open(t->vk, m, &cfg, &lm, &e);
    CHECK(rc == 0, "lm_open (batch 2): %s", e.msg);
    if (!rc) {
        struct vkr_arena *a = NULL;
        struct vkr_tensor rows = {0};
        uint64_t sz = 4 * 128 * 4; /* 4 rows of n_embd floats */
        int arc = vkr_arena_create(t->vk, "test-image-rows", VKR_ARENA_ACTIVATIONS, &a, &e);
        if (!arc)
            arc = vkr_arena_plan(a, &sz, 1, &e);
        if (!arc) {
            vkr_arena_reset(a);
            arc = vkr_arena_alloc(a, sz, &rows, &e);
        }
        CHECK(arc == 0, "image rows tensor: %s", e.msg);
        int32_t img[4] = {1, -1, -1, 2};
        struct lm_seq d[2] = {{img, 4, NULL, NULL, 0, &rows, 3}, {img, 4, NULL, NULL, 0, &rows, 1}};
        rc = arc ? -1 : lm_prefill(lm, d, 1, NULL, &e); /* rows 3 and 4 of 4 */
        CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "from a tensor of 4 rows"),
              "device rows past the end: rc %d %s", rc, e.msg);
        d[0].dev_row0 = 0; /* rows 0 and 1: the second sequence must start at 2 */
        rc = arc ? -1 : lm_prefill(lm, d, 2, NULL, &e);
        CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "consecutive") && strstr(e.msg, "next: 2"),
              "device rows that do not follow on: rc %d %s", rc, e.msg);
        vkr_arena_destroy(a);
        lm_close(lm);
    }
    /* a configuration whose activations cannot be placed is refused with the knob to turn */
    cfg.max_tokens = 1u << 24;
    rc = lm_open(t->vk, m, &cfg, &lm, &e);
    CHECK(rc == FOLIO_ELIMIT && strstr(e.hint, "--max-tokens"), "huge plan: rc %d %s", rc, e.msg);
    gguf_model_close(m);
    free(buf);
}

static int run_lm(int ranged)
{
    struct LT t = {.ranged = ranged};
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config cfg = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                             .validate = -1, .cache_dir = ""};
    struct folio_err e = {0};
    int rc = vkr_open(&cfg, &t.vk, &e);
    REQUIRE(rc == 0, "vkr_open: %s / %s / %s", e.msg, e.detail, e.hint);
    /* f16 cooperative-matrix matmuls (>= 64 rows, tensor-core devices)
     * round activations to f16: looser bound there (lm_parity_cases.h). */
    t.tol = ops_coopmat_available(t.vk) || ops_gemm_available(t.vk) ? 3e-3 : 1e-3;

    /* E = 256 so every K-quant applies; head 64, GQA 4:2. */
    struct lm_synth base = {.n_embd = 256, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
                            .n_ff = 512, .n_vocab = 512, .seed = 11};
    struct {
        const char *name;
        int type, q4km, tied;
    } cfgs[] = {
        /* Q5_K, Q6_K and untied Q8_0 run in the parity test (lm_parity_cases.h) */
        {"f32", QUANT_F32, 0, 0},       {"f16", QUANT_F16, 0, 0},
        {"bf16", QUANT_BF16, 0, 0},     {"q4_k_m", QUANT_Q4_K, 1, 0},
        {"q8_0-tied", QUANT_Q8_0, 0, 1},
    };
    int ncfg = (int)(sizeof cfgs / sizeof cfgs[0]);
    /* Pre-warm exactly what the models ask for (the union over configs), then seal. */
    struct vkr_pipeline_key keys[256];
    int nk = 0;
    for (int i = 0; i < ncfg; i++) {
        if (ranged && !(cfgs[i].type == QUANT_F32 || cfgs[i].q4km))
            continue;
        struct lm_synth s = base;
        s.mat_type = cfgs[i].type;
        s.q4km = cfgs[i].q4km;
        s.tied = cfgs[i].tied;
        s.n_layer = 1;
        uint8_t *buf;
        size_t len;
        struct gguf_file *f;
        struct gguf_model *m;
        if (lm_synth_gguf(&s, &buf, &len, &e) || gguf_open_memory(buf, len, &f, &e) ||
            gguf_model_check(f, 0, &m, &e))
            REQUIRE(0, "key model: %s", e.msg);
        nk += lm_pipeline_keys(t.vk, m, 0, keys + nk, 256 - nk);
        gguf_model_close(m);
        free(buf);
    }
    {
        struct lm_synth s = {.n_embd = 128, .n_layer = 1, .n_head = 2, .n_head_kv = 1,
                             .n_ff = 128, .n_vocab = 64, .mat_type = QUANT_F16};
        uint8_t *buf;
        size_t len;
        struct gguf_file *f;
        struct gguf_model *m;
        if (lm_synth_gguf(&s, &buf, &len, &e) || gguf_open_memory(buf, len, &f, &e) ||
            gguf_model_check(f, 0, &m, &e))
            REQUIRE(0, "key model: %s", e.msg);
        nk += lm_pipeline_keys(t.vk, m, 0, keys + nk, 256 - nk);
        gguf_model_close(m);
        free(buf);
    }
    int failed = -1;
    rc = vkr_prewarm(t.vk, keys, nk, &failed, &e);
    REQUIRE(rc == 0 && failed == 0, "prewarm: rc %d failed %d: %s", rc, failed, e.msg);
    vkr_seal(t.vk);
    struct vkr_stats s0;
    vkr_get_stats(t.vk, &s0);

    for (int i = 0; i < ncfg; i++) {
        if (ranged && !(cfgs[i].type == QUANT_F32 || cfgs[i].q4km))
            continue;
        struct lm_synth s = base;
        s.mat_type = cfgs[i].type;
        s.q4km = cfgs[i].q4km;
        s.tied = cfgs[i].tied;
        s.seed = base.seed + (uint64_t)i;
        run_model(&t, cfgs[i].name, &s);
    }
    {
        /* A vocabulary and an MLP width that are not multiples of 4 (a
         * fine-tune resized to its tokenizer, an odd intermediate size):
         * the LM head has 509 rows, ffn_down rows of 510 floats. */
        struct lm_synth s = base;
        s.mat_type = QUANT_F32;
        s.n_vocab = 509;
        s.n_ff = 510;
        s.tied = 1;
        s.seed = 99;
        run_model(&t, "f32-odd-vocab-and-ff", &s);
    }
    bad_input(&t);

    struct vkr_stats s;
    vkr_get_stats(t.vk, &s);
    CHECK(s.pipeline_requests_after_seal == 0, "%llu pipeline requests after seal",
          (unsigned long long)s.pipeline_requests_after_seal);
    CHECK(s.pipelines_built == s0.pipelines_built, "pipelines created after seal: %u -> %u",
          s0.pipelines_built, s.pipelines_built);
    CHECK(s.validation_messages == 0, "%llu validation messages",
          (unsigned long long)s.validation_messages);
    if (ranged)
        CHECK(s.device_bytes_peak > 4 * vkr_limits(t.vk)->max_alloc &&
                  vkr_limits(t.vk)->max_range <= (128u << 10),
              "ranged run: %llu peak device bytes over max_alloc %llu, range %llu",
              (unsigned long long)s.device_bytes_peak,
              (unsigned long long)vkr_limits(t.vk)->max_alloc,
              (unsigned long long)vkr_limits(t.vk)->max_range);
    vkr_close(t.vk);
    return tu_finish();
}
