/*
 * Parity of the text model with the upstream reference (transformers, f32,
 * eager attention) on the parity kit's tiny Qwen2.5-VL and Qwen2-VL models
 * (tests/fixtures/parity, manifest.json), every text variant (F32 and each
 * quantised file; their references use the dequantised weights, so the
 * bounds are the same):
 *  - logits at every position of the text-only prompt and of the image
 *    prompt (vision-tower rows spliced in at the pads, 3-D M-RoPE
 *    positions from the manifest): max|Δ| <= 1e-3 · max|logit| (3e-3 where
 *    the f16 cooperative-matrix matmul runs, see run_parity);
 *  - every label's summed log-probability (labels alone, and with
 *    <|im_end|> appended; "invoice"/"invoice copy" and "receipt"/"resume"
 *    share leading tokens): |Δ| <= 1e-3 · max(1, |ref|), same top label;
 *  - both prompts batched in one ragged pass, and the fused classify pass,
 *    give the same numbers (unranged run, F32 variants);
 *  - token rows gathered on the device from their raw token_embd rows
 *    against the host's dequantize (FOLIO_LM_EMBED=host): the same
 *    logits and label sums to rounding (unranged run, every variant);
 *  - zero pipeline creations after seal, zero validation messages.
 * test_lm_parity_ranged.c repeats it with lowered device limits.
 */
#include "tests/support/parity_root.h"
#include "tests/support/testutil.h"
#include "tests/engine/expect_route.h"
#include "tests/engine/lm_json.h"
#include "common/common.h"
#include "engine/model/gguf_model.h"
#include "engine/model/lm.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE_VOID(cond, ...)                                                              \
    do {                                                                                     \
        CHECK(cond, __VA_ARGS__);                                                            \
        if (!(cond))                                                                         \
            return;                                                                          \
    } while (0)

struct PT {
    struct vkr *vk;
    double tol; /* logits bound relative to max|logit| */
    const char *root;
    int ranged;
    int gpu_weights; /* lm_config.gpu_weights (test_lm_int8: int8) */
};

/* Label log-probabilities: |d| <= label_tol * max(1, |ref|) (test_lm_int8
 * states a wider one for the int8 route). */
static double label_tol = 1e-3;

static float *load_f32(const char *root, const char *rel, size_t want)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    uint8_t *b = NULL;
    size_t n = 0;
    struct folio_err e = {0};
    if (folio_read_file(path, 1u << 28, &b, &n, &e) != 0 || n != want * 4) {
        CHECK(0, "fixture %s: %s (%zu bytes, want %zu)", path, e.msg, n, want * 4);
        free(b);
        return NULL;
    }
    return (float *)b;
}

static void cmp_logits(const char *what, const float *g, const float *r, size_t n, double tol)
{
    double mx = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fabs(r[i]) > mx ? fabs(r[i]) : mx;
        double x = fabs((double)g[i] - r[i]);
        if (!(x <= d))
            d = x;
    }
    CHECK(d <= tol * mx, "%s: logits max|d| %.3g > %.0e * max|logit| %.3g", what, d, tol, mx);
    printf("%s: logits max|d| %.3g = %.2e of max|logit| %.3g\n", what, d, d / mx, mx);
}

/* refs: the manifest's list of {sum, sum_with_end}; lp: engine scores */
static void cmp_labels(const char *what, const struct jv *refs, const char *field,
                       const double *lp, int nl)
{
    int rb = 0, gb = 0;
    double worst = 0;
    for (int l = 0; l < nl; l++) {
        const struct jv *r = jget(jat(refs, l), field);
        REQUIRE_VOID(r, "%s: no %s for label %d", what, field, l);
        if (fabs(lp[l] - r->num) > worst)
            worst = fabs(lp[l] - r->num);
        CHECK(fabs(lp[l] - r->num) <= label_tol * fmax(1.0, fabs(r->num)),
              "%s: label %d %s %.6f vs reference %.6f", what, l, field, lp[l], r->num);
        if (r->num > jget(jat(refs, rb), field)->num)
            rb = l;
        if (lp[l] > lp[gb])
            gb = l;
    }
    CHECK(rb == gb, "%s: top label %d, reference %d", what, gb, rb);
    printf("%s: label %s max|d| %.3g, top label %d\n", what, field, worst, gb);
}

/* The device's gather of the token rows against the host path
 * (FOLIO_LM_EMBED=host: a second engine on the same file): one batch of
 * seqs, whose rows mix token rows, host-float rows (lm_seq.embd) and the
 * zero pads before the label rows, as a prefill (every prompt row's
 * logits) and as a fused classify (the label rows' tokens gathered too).
 * Both dequantize the same raw rows, so only rounding may differ; a row
 * gathered from the wrong raw row, or left unwritten, is off by the size
 * of the logits. */
static void cmp_embed_paths(struct PT *t, const char *what, const char *path,
                            const struct lm_config *lc, struct lm *lm, const struct lm_seq *seqs,
                            uint32_t nseq, const struct lm_label *lab, int nl)
{
    char w2[200];
    struct folio_err e = {0};
    uint32_t V = lm_hparams(lm)->n_vocab, ntok = 0;
    for (uint32_t b = 0; b < nseq; b++)
        ntok += seqs[b].n;
    CHECK(lm_embed_gpu(lm), "%s: token rows are not gathered on the device", what);
    setenv("FOLIO_LM_EMBED", "host", 1);
    struct lm *lh = NULL;
    int rc = lm_open_file(t->vk, path, lc, &lh, &e);
    unsetenv("FOLIO_LM_EMBED");
    REQUIRE_VOID(rc == 0, "%s: open with FOLIO_LM_EMBED=host: %s / %s", what, e.msg, e.detail);
    CHECK(!lm_embed_gpu(lh), "%s: FOLIO_LM_EMBED=host still gathers on the device", what);
    /* the f16 data path rounds activations to f16: a last-bit difference
     * of an embedding may move a rounding there */
    double tol = t->tol > 1e-3 ? 1e-3 : 1e-4;
    float *lg = malloc((size_t)ntok * V * 4), *lgh = malloc((size_t)ntok * V * 4);
    double lp[16], lph[16];
    int best[2], besth[2];
    if (!lg || !lgh || nl > 8 || nseq > 2) {
        CHECK(0, "%s: out of memory or too many labels", what);
        goto done;
    }
    rc = lm_prefill(lm, seqs, nseq, lg, &e);
    CHECK(rc == 0, "%s: prefill (gather): %s", what, e.msg);
    int rch = lm_prefill(lh, seqs, nseq, lgh, &e);
    CHECK(rch == 0, "%s: prefill (host rows): %s", what, e.msg);
    snprintf(w2, sizeof w2, "%s token rows gathered vs host", what);
    if (!rc && !rch)
        cmp_logits(w2, lg, lgh, (size_t)ntok * V, tol);
    rc = lm_classify(lm, seqs, nseq, lab, (uint32_t)nl, lp, NULL, best, &e);
    CHECK(rc == 0, "%s: classify (gather): %s", what, e.msg);
    rch = lm_classify(lh, seqs, nseq, lab, (uint32_t)nl, lph, NULL, besth, &e);
    CHECK(rch == 0, "%s: classify (host rows): %s", what, e.msg);
    if (!rc && !rch) {
        double worst = 0;
        for (uint32_t i = 0; i < nseq * (uint32_t)nl; i++) {
            double d = fabs(lp[i] - lph[i]) / fmax(1.0, fabs(lph[i]));
            worst = d > worst ? d : worst;
        }
        CHECK(worst <= tol, "%s: label sums max rel|d| %.3g > %.0e", w2, worst, tol);
        for (uint32_t b = 0; b < nseq; b++)
            CHECK(best[b] == besth[b], "%s: sequence %u top label %d vs %d", w2, b, best[b],
                  besth[b]);
        printf("%s: label sums max rel|d| %.3g\n", w2, worst);
    }
done:
    free(lg);
    free(lgh);
    lm_close(lh);
}

static void run_variant(struct PT *t, const struct jv *cfg, const char *var)
{
    char what[128], path[1024];
    const char *cname = jget(cfg, "name")->str;
    snprintf(what, sizeof what, "%s/%s%s", cname, var, t->ranged ? " (ranged)" : "");
    snprintf(path, sizeof path, "%s/%s", t->root, jget(jget(cfg, "text_gguf"), var)->str);
    struct folio_err e = {0};
    struct lm_config lc = {.max_tokens = 150, .batch = t->ranged ? 1 : 2, .max_labels = 6,
                           .max_label_tokens = 7, .all_logits = 1, .gpu_weights = t->gpu_weights};
    struct lm *lm = NULL;
    int rc = lm_open_file(t->vk, path, &lc, &lm, &e);
    CHECK(rc == 0, "%s: open: %s / %s / %s", what, e.msg, e.detail, e.hint);
    if (rc)
        return;
    uint32_t V = lm_hparams(lm)->n_vocab, E = lm_hparams(lm)->n_embd;
    /* Q/K/V as one product on every layer of the f16 path (the parity
     * models' families have no q/k hook), unless turned off */
    int f16p;
    uint32_t fz, nly = lm_hparams(lm)->n_layer;
    lm_paths(lm, &f16p, &fz);
    const char *qe = getenv("FOLIO_LM_QKV");
    int apart = qe && strcmp(qe, "apart") == 0;
    CHECK(fz == (f16p && !apart ? nly : 0), "%s: %u of %u layers run Q/K/V as one product "
          "(f16 path %d)", what, fz, nly, f16p);
    int32_t img_id = (int32_t)jget(jget(cfg, "hf_config"), "image_token_id")->num;

    /* labels, alone and with <|im_end|> */
    const struct jv *jl = jget(cfg, "labels");
    int nl = jl ? jl->n : 0;
    struct lm_label lab[8], labe[8];
    int32_t *lt[8] = {0}, *lte[8] = {0};
    for (int l = 0; l < nl && l < 8; l++) {
        uint32_t n = 0, ne = 0;
        lt[l] = jints(jget(jat(jl, l), "token_ids"), &n);
        lte[l] = jints(jget(jat(jl, l), "token_ids_with_end"), &ne);
        lab[l] = (struct lm_label){lt[l], n};
        labe[l] = (struct lm_label){lte[l], ne};
    }

    /* text-only prompt */
    const struct jv *tp = jget(cfg, "text_prompt");
    uint32_t nt = 0;
    int32_t *tt = jints(jget(tp, "token_ids"), &nt);
    float *tref = load_f32(t->root, jget(jget(cfg, "text_logits"), var)->str, (size_t)nt * V);
    /* image prompt: pads take the vision tower's rows, positions from the manifest */
    const struct jv *ip = jget(cfg, "prompt");
    uint32_t ni = 0;
    int32_t *it = jints(jget(ip, "token_ids"), &ni);
    float *iref = load_f32(t->root, jget(jget(cfg, "logits"), var)->str, (size_t)ni * V);
    uint32_t npad = 0;
    for (uint32_t i = 0; it && i < ni; i++)
        npad += it[i] == img_id;
    const char *img = jget(ip, "image")->str;
    float *vis = load_f32(t->root, jget(jget(jget(cfg, "vision_embeddings"), "F32"), img)->str,
                          (size_t)npad * E);
    float *iemb = calloc((size_t)ni * E, 4);
    int32_t *ipos = malloc((size_t)ni * 12);
    const struct jv *pthw = jget(ip, "positions_thw");
    int32_t next = 0;
    for (uint32_t i = 0, k = 0; it && vis && iemb && ipos && i < ni; i++) {
        for (int c = 0; c < 3; c++) {
            ipos[i * 3 + c] = (int32_t)jat(jat(pthw, c), (int)i)->num;
            if (ipos[i * 3 + c] + 1 > next)
                next = ipos[i * 3 + c] + 1;
        }
        if (it[i] == img_id) {
            memcpy(iemb + (size_t)i * E, vis + (size_t)k++ * E, (size_t)E * 4);
            it[i] = -1;
        }
    }
    const struct jv *nxp = jget(ip, "next_position");
    if (nxp && nxp->t == J_NUM)
        CHECK((int32_t)nxp->num == next, "%s: next position %d vs manifest %d", what, next,
              (int)nxp->num);
    if (!tt || !tref || !it || !iref || !vis || !iemb || !ipos) {
        CHECK(0, "%s: fixture data incomplete", what);
        goto done;
    }
    struct lm_seq st = {tt, nt, NULL, NULL, 0, NULL, 0}, si = {it, ni, iemb, ipos, next, NULL, 0};
    float *lg = malloc((size_t)(nt + ni) * V * 4);
    double lp[16], lp2[16], pr[16];
    char w2[160];

    rc = lm_prefill(lm, &st, 1, lg, &e);
    CHECK(rc == 0, "%s: text prefill: %s / %s", what, e.msg, e.detail);
    snprintf(w2, sizeof w2, "%s text prompt", what);
    if (!rc)
        cmp_logits(w2, lg, tref, (size_t)nt * V, t->tol);
    rc = lm_score(lm, lab, (uint32_t)nl, lp, &e);
    CHECK(rc == 0, "%s: text score: %s", what, e.msg);
    if (!rc)
        cmp_labels(w2, jget(jget(cfg, "text_label_logprobs"), var), "sum", lp, nl);
    rc = lm_score(lm, labe, (uint32_t)nl, lp, &e);
    CHECK(rc == 0, "%s: text score with end: %s", what, e.msg);
    if (!rc)
        cmp_labels(w2, jget(jget(cfg, "text_label_logprobs"), var), "sum_with_end", lp, nl);

    rc = lm_prefill(lm, &si, 1, lg, &e);
    CHECK(rc == 0, "%s: image prefill: %s / %s", what, e.msg, e.detail);
    snprintf(w2, sizeof w2, "%s image prompt", what);
    if (!rc)
        cmp_logits(w2, lg, iref, (size_t)ni * V, t->tol);
    rc = lm_score(lm, lab, (uint32_t)nl, lp, &e);
    CHECK(rc == 0, "%s: image score: %s", what, e.msg);
    if (!rc)
        cmp_labels(w2, jget(jget(cfg, "label_logprobs"), var), "sum", lp, nl);
    rc = lm_score(lm, labe, (uint32_t)nl, lp, &e);
    if (!rc)
        cmp_labels(w2, jget(jget(cfg, "label_logprobs"), var), "sum_with_end", lp, nl);

    if (!t->ranged && (strcmp(var, "F32") == 0 || strcmp(var, "Q8_0") == 0)) {
        /* both prompts in one ragged batch; then fused classify, whose
         * last layer runs on the head's rows alone (lm_forward.c's tail).
         * The F32 variant and Q8_0: where the tensor-core GEMM exists,
         * F32 matrices stay f32 and Q8_0 is expanded to f16, so both data
         * paths' tails run; other weight types add nothing the
         * single-prompt runs do not cover. */
        struct lm_seq both[2] = {st, si};
        rc = lm_prefill(lm, both, 2, lg, &e);
        CHECK(rc == 0, "%s: batch prefill: %s", what, e.msg);
        snprintf(w2, sizeof w2, "%s batched text", what);
        if (!rc)
            cmp_logits(w2, lg, tref, (size_t)nt * V, t->tol);
        snprintf(w2, sizeof w2, "%s batched image", what);
        if (!rc)
            cmp_logits(w2, lg + (size_t)nt * V, iref, (size_t)ni * V, t->tol);
        rc = lm_score(lm, labe, (uint32_t)nl, lp, &e);
        CHECK(rc == 0, "%s: batch score: %s", what, e.msg);
        int best[2];
        int rc2 = lm_classify(lm, both, 2, labe, (uint32_t)nl, lp2, pr, best, &e);
        CHECK(rc2 == 0, "%s: classify: %s", what, e.msg);
        snprintf(w2, sizeof w2, "%s batched text labels", what);
        if (!rc && !rc2) {
            cmp_labels(w2, jget(jget(cfg, "text_label_logprobs"), var), "sum_with_end", lp, nl);
            snprintf(w2, sizeof w2, "%s fused text labels", what);
            cmp_labels(w2, jget(jget(cfg, "text_label_logprobs"), var), "sum_with_end", lp2, nl);
            snprintf(w2, sizeof w2, "%s batched image labels", what);
            cmp_labels(w2, jget(jget(cfg, "label_logprobs"), var), "sum_with_end", lp + nl, nl);
            snprintf(w2, sizeof w2, "%s fused image labels", what);
            cmp_labels(w2, jget(jget(cfg, "label_logprobs"), var), "sum_with_end", lp2 + nl, nl);
            /* the tail against the two passes, which run the last layer
             * on every row: the same sums up to rounding */
            double worst = 0;
            for (int i = 0; i < 2 * nl; i++) {
                double d = fabs(lp2[i] - lp[i]) / fmax(1.0, fabs(lp[i]));
                worst = d > worst ? d : worst;
            }
            CHECK(worst <= label_tol, "%s: fused classify against prefill + score: max rel|d| "
                  "%.3g > %.0e", what, worst, label_tol);
            printf("%s fused against two passes: max rel|d| %.3g\n", what, worst);
        }
    }
    if (!t->ranged && t->gpu_weights == 0) {
        struct lm_seq both[2] = {st, si};
        cmp_embed_paths(t, what, path, &lc, lm, both, 2, labe, nl);
    }
    free(lg);
done:
    for (int l = 0; l < nl && l < 8; l++) {
        free(lt[l]);
        free(lte[l]);
    }
    free(tt);
    free(tref);
    free(it);
    free(iref);
    free(vis);
    free(iemb);
    free(ipos);
    lm_close(lm);
}

/* gpu_weights: enum ops_gpu_weights; tol < 0: the bound below for the
 * device (test_lm_int8 passes its own). */
static int run_parity_with(int ranged, int gpu_weights, double tol)
{
    struct PT t = {.ranged = ranged, .gpu_weights = gpu_weights};
    const char *src = getenv("FOLIO_SOURCE_DIR");
    char root[1024];
    (void)src;
    tu_parity_root(root, sizeof root);
    t.root = root;
    char mpath[1100];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", root);
    uint8_t *mb = NULL;
    size_t mn = 0;
    struct folio_err e = {0};
    int rc = folio_read_file(mpath, 64u << 20, &mb, &mn, &e);
    REQUIRE(rc == 0, "parity manifest %s: %s", mpath, e.msg);
    struct jv *man = jparse((const char *)mb, mn);
    free(mb);
    REQUIRE(man && jget(man, "configs"), "parity manifest does not parse");

    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config vc = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                            .validate = -1, .cache_dir = ""};
    rc = vkr_open(&vc, &t.vk, &e);
    REQUIRE(rc == 0, "vkr_open: %s / %s / %s", e.msg, e.detail, e.hint);
    expect_gemm_route(t.vk);
    /* The f16 cooperative-matrix matmul (prompts of >= 64 rows where the
     * device has tensor cores) rounds activations to f16: ~1.2e-3 of
     * max|logit| was seen on the H200, so the bound there is 3e-3. */
    t.tol = ops_coopmat_available(t.vk) || ops_gemm_available(t.vk) ? 3e-3 : 1e-3;
    if (tol >= 0)
        t.tol = tol;

    /* pre-warm the union of every variant's pipelines, then seal */
    const struct jv *cfgs = jget(man, "configs");
    struct vkr_pipeline_key keys[512];
    int nk = 0;
    for (int c = 0; c < cfgs->n; c++) {
        const struct jv *tg = jget(cfgs->items[c], "text_gguf");
        for (int v = 0; tg && v < tg->n; v++) {
            char path[1200];
            snprintf(path, sizeof path, "%s/%s", root, tg->items[v]->str);
            struct gguf_model *m;
            rc = gguf_model_open_text(path, &m, &e);
            REQUIRE(rc == 0, "%s: %s / %s", path, e.msg, e.detail);
            nk += lm_pipeline_keys(t.vk, m, gpu_weights, keys + nk, 512 - nk);
            gguf_model_close(m);
        }
    }
    int failed = -1;
    rc = vkr_prewarm(t.vk, keys, nk, &failed, &e);
    REQUIRE(rc == 0 && failed == 0, "prewarm: rc %d failed %d: %s", rc, failed, e.msg);
    vkr_seal(t.vk);
    struct vkr_stats s0;
    vkr_get_stats(t.vk, &s0);

    int variants = 0;
    for (int c = 0; c < cfgs->n; c++) {
        const struct jv *tg = jget(cfgs->items[c], "text_gguf");
        for (int v = 0; tg && v < tg->n; v++, variants++)
            /* ranged: only the F32 files have weights larger than a binding */
            if (!ranged || strcmp(tg->keys[v], "F32") == 0)
                run_variant(&t, cfgs->items[c], tg->keys[v]);
    }
    CHECK(variants >= 6, "only %d text variants in the manifest", variants);

    struct vkr_stats s;
    vkr_get_stats(t.vk, &s);
    CHECK(s.pipeline_requests_after_seal == 0 && s.pipelines_built == s0.pipelines_built,
          "pipelines after seal: %llu requests, %u -> %u built",
          (unsigned long long)s.pipeline_requests_after_seal, s0.pipelines_built,
          s.pipelines_built);
    CHECK(s.validation_messages == 0, "%llu validation messages",
          (unsigned long long)s.validation_messages);
    if (ranged)
        CHECK(s.device_bytes_peak > 2 * vkr_limits(t.vk)->max_alloc &&
                  vkr_limits(t.vk)->max_range <= (256u << 10),
              "ranged: peak %llu bytes, max_alloc %llu, range %llu",
              (unsigned long long)s.device_bytes_peak,
              (unsigned long long)vkr_limits(t.vk)->max_alloc,
              (unsigned long long)vkr_limits(t.vk)->max_range);
    vkr_close(t.vk);
    jfree(man);
    return tu_finish();
}

static inline int run_parity(int ranged)
{
    return run_parity_with(ranged, 0, -1);
}
