/*
 * Several pages per GPU pass (vlm_prepare + vlm_classify_batch) against
 * each page alone, on the parity kit's models and images (three sizes:
 * 35, 30 and 6 merged tokens): Qwen2.5-VL (windows + full layers) with the
 * F32 and the half-precision tower and a quantised text model, Qwen2-VL
 * (full attention only) with the F32 tower:
 *  - a batch of pages of different sizes gives every page the same best
 *    label and log-probabilities as vlm_classify of that page alone
 *    (within 1e-4 * max(1, |lp|) on f32 activations, the f16 KV cache's
 *    rounding; 2e-3 * max(1, |lp|) where the tensor-core GEMM stages
 *    activations in f16: lp_bound), and the same prompt;
 *  - a page with another label set in the same batch is scored against
 *    its own labels;
 *  - pages prepared on other threads while a batch runs on the GPU give
 *    the same results;
 *  - a batch larger than vlm_max_batch is refused with FOLIO_ELIMIT and a
 *    message naming the limit; n = 0 too;
 *  - nothing requested a pipeline after seal, and the warm-up (bounded by
 *    rows, not a full batch) exercised every pipeline that pages alone and
 *    full batches then use, planned for 1, 4 and 8 pages
 *    (first_use_after_warm 0); no validation messages;
 *  - max_batch 0 on a CPU device plans one page per pass; a re-plan that
 *    cannot fit (lm_replan / vis_replan) fails with its reason and leaves
 *    the engine on its old plan, still classifying; one that fits works;
 *    an explicit max_batch the device cannot hold fails the open, naming
 *    the batch.
 * Registered again with 64 KiB bindings and 1 MiB blocks (range64k), so
 * the batched attention and KV cache run split past one binding (batches
 * of 2, the Qwen2.5-VL f32 tower: window and full layers).
 */
#include "tests/support/parity_root.h"
#include "tests/support/testutil.h"
#include "tests/engine/lm_json.h"
#include "common/common.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"
#include "engine/model/lm.h"
#include "engine/model/vision.h"
#include "engine/vlm.h"
#include "engine/vlm_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPAGE 5
#define NL 6

static const char *root;
static const struct jv *man;

struct img {
    uint8_t *rgb;
    uint32_t w, h;
};

static int load_images(struct img *im, int *n)
{
    const struct jv *imgs = jget(man, "images");
    *n = 0;
    for (int i = 0; i < imgs->n && i < 3; i++) {
        const struct jv *j = jat(imgs, i);
        char path[1300];
        snprintf(path, sizeof path, "%s/%s", root, jget(j, "rgb")->str);
        struct folio_err e = {0};
        size_t len = 0;
        im[i].w = (uint32_t)jget(j, "width")->num;
        im[i].h = (uint32_t)jget(j, "height")->num;
        if (folio_read_file(path, 1u << 24, &im[i].rgb, &len, &e) ||
            len != (size_t)im[i].w * im[i].h * 3) {
            CHECK(0, "%s: %s", path, e.msg);
            return -1;
        }
        (*n)++;
    }
    return 0;
}

struct prep_job {
    struct vlm *v;
    const struct vlm_page *pg;
    const char *const *labels;
    uint32_t nl;
    struct vlm_prepared *out;
    int rc;
    struct folio_err e;
};

static void *prep_thread(void *arg)
{
    struct prep_job *j = arg;
    j->rc = vlm_prepare(j->v, j->pg, j->labels, j->nl, &j->out, &j->e);
    return NULL;
}

/* 4 pages per pass; 2 under 1 MiB device blocks (the range64k variant),
 * where the text model's rows of a batch of 4 exceed one block. */
/* How far a page's log-prob in a batch may be from the page alone. The
 * text model's KV cache is f16: a K or V element whose f32 value differs in
 * its last bit between the batch's products and the lone page's (another
 * kernel by row count, other sums) may round to the neighbouring f16, one
 * step of 2^-11 of it. Lavapipe measured up to 4.7e-6 * |lp| from that on
 * the Qwen3-VL fixtures (F32 and Q8_0 text, F32 and F16 towers; the bounds
 * with an f32 cache were 1e-5, and 1e-6 * |lp| for the F16 tower);
 * 1e-4 * |lp| leaves 20x room and stays far under what a page reading
 * another page's keys moves (whole units). Where the
 * tensor-core GEMM stages operands in f16 (f16), every matmul may round
 * differently by row count, F32 files included (4e-3 on a log-prob of -22
 * on the H200): the f16 policy's 2e-3. */
static double lp_bound(int f16, double alone)
{
    double mag = fabs(alone) > 1 ? fabs(alone) : 1;
    return (f16 ? 2e-3 : 1e-4) * mag;
}

static uint32_t max_batch(void)
{
    const char *b = getenv("FOLIO_VK_BLOCK_SIZE");
    return b && *b && strtoull(b, NULL, 10) < (4ull << 20) ? 2 : 4;
}

/* The engine of the parity kit's text tvar + mmproj vvar of cfg (paths
 * into tp / vp, 1200 bytes each): pages of up to 40 image tokens. */
static struct vlm_config test_config(const struct jv *cfg, const char *tvar, const char *vvar,
                                     char *tp, char *vp)
{
    snprintf(tp, 1200, "%s/%s", root, jget(jget(cfg, "text_gguf"), tvar)->str);
    snprintf(vp, 1200, "%s/%s", root, jget(jget(cfg, "mmproj_gguf"), vvar)->str);
    const struct jv *pp = jget(man, "preprocess");
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    return (struct vlm_config){.model_path = tp, .mmproj_path = vp,
                               .device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                               .validate = -1, .cache_dir = "", .max_image_tokens = 40,
                               .min_pixels = (uint32_t)jget(pp, "min_pixels")->num,
                               .max_pixels = (uint32_t)jget(pp, "max_pixels")->num,
                               .max_labels = 8, .max_label_tokens = 8, .max_text_tokens = 64};
}

static void run(const struct jv *cfg, const char *tvar, const char *vvar, const struct img *im,
                int nimg)
{
    char tp[1200], vp[1200], what[160];
    snprintf(what, sizeof what, "%s text %s + mmproj %s", jget(cfg, "name")->str, tvar, vvar);
    struct vlm_config vc = test_config(cfg, tvar, vvar, tp, vp);
    vc.max_batch = max_batch();
    struct folio_err e = {0};
    struct vlm *v = NULL;
    int rc = vlm_open(&vc, &v, &e);
    CHECK(rc == 0, "%s: open: %s / %s / %s", what, e.msg, e.detail, e.hint);
    if (rc)
        return;
    uint32_t B = max_batch();
    CHECK(vlm_max_batch(v) == B, "%s: max batch %u, asked for %u", what, vlm_max_batch(v), B);
    CHECK(vlm_report(v)->max_batch == B && vlm_report(v)->warmup_ms > 0,
          "%s: report max_batch %u warm-up %.1f ms", what, vlm_report(v)->max_batch,
          vlm_report(v)->warmup_ms);

    const struct jv *jl = jget(cfg, "labels");
    const char *labels[NL], *other[NL];
    int nl = jl->n < NL ? jl->n : NL;
    for (int l = 0; l < nl; l++)
        labels[l] = jget(jat(jl, l), "label")->str;
    for (int l = 0; l < nl; l++) /* another label set: reversed, one dropped */
        other[l] = labels[nl - 1 - l];
    /* pages: img0, img1, img2 (other labels), img0, img1 */
    static const int which[NPAGE] = {0, 1, 2, 0, 1};
    const char *const *lset[NPAGE] = {labels, labels, other, labels, labels};
    uint32_t lcount[NPAGE] = {(uint32_t)nl, (uint32_t)nl, (uint32_t)nl - 1, (uint32_t)nl,
                              (uint32_t)nl};
    struct vlm_page pg[NPAGE];
    for (int i = 0; i < NPAGE; i++) {
        const struct img *m = &im[which[i] % nimg];
        pg[i] = (struct vlm_page){m->rgb, m->w, m->h, (size_t)m->w * 3, 3};
    }
    double alone[NPAGE][NL], lp[NPAGE][NL], pr[NPAGE][NL];
    struct vlm_result ra[NPAGE];
    memset(ra, 0, sizeof ra);
    for (int i = 0; i < NPAGE && !rc; i++) {
        ra[i].logprob = alone[i];
        rc = vlm_classify(v, &pg[i], lset[i], lcount[i], &ra[i], &e);
        CHECK(rc == 0, "%s: page %d alone: %s / %s", what, i, e.msg, e.detail);
    }
    /* the batch: pages 0..3 in one pass, then page 4 with pages 1 and 2 */
    struct vlm_prepared *prep[NPAGE] = {0};
    for (int i = 0; i < NPAGE && !rc; i++) {
        rc = vlm_prepare(v, &pg[i], lset[i], lcount[i], &prep[i], &e);
        CHECK(rc == 0, "%s: prepare %d: %s", what, i, e.msg);
    }
    struct vlm_result rb[NPAGE];
    memset(rb, 0, sizeof rb);
    for (int i = 0; i < NPAGE; i++) {
        rb[i].logprob = lp[i];
        rb[i].prob = pr[i];
    }
    /* full batches of B over the pages, the last one filled up with the
     * first pages again (their second results are dropped) */
    for (uint32_t i0 = 0; !rc && i0 < NPAGE; i0 += B) {
        struct vlm_prepared *bp[8];
        struct vlm_result br[8];
        memset(br, 0, sizeof br);
        for (uint32_t k = 0; k < B; k++) {
            bp[k] = prep[(i0 + k) % NPAGE];
            if (i0 + k < NPAGE)
                br[k] = rb[i0 + k];
        }
        rc = vlm_classify_batch(v, bp, B, br, &e);
        CHECK(rc == 0, "%s: batch of %u from page %u: %s / %s", what, B, i0, e.msg, e.detail);
        for (uint32_t k = 0; k < B; k++) {
            if (i0 + k < NPAGE)
                rb[i0 + k] = br[k];
            else
                vlm_result_free(&br[k]);
        }
    }
    /* tensor cores: f16 staging by row count (lp_bound) */
    int f16 = ops_gemm_available(vlm_vkr(v)) || ops_coopmat_available(vlm_vkr(v));
    for (int i = 0; i < NPAGE && !rc; i++) {
        CHECK(rb[i].best == ra[i].best, "%s: page %d best %d in the batch, %d alone", what, i,
              rb[i].best, ra[i].best);
        CHECK(rb[i].n_prompt == ra[i].n_prompt && rb[i].prompt_ids &&
                  !memcmp(rb[i].prompt_ids, ra[i].prompt_ids, ra[i].n_prompt * 4),
              "%s: page %d prompt differs", what, i);
        CHECK(rb[i].image_tokens == ra[i].image_tokens, "%s: page %d %u image tokens vs %u",
              what, i, rb[i].image_tokens, ra[i].image_tokens);
        double sum = 0;
        for (uint32_t l = 0; l < lcount[i]; l++) {
            double bound = lp_bound(f16, alone[i][l]);
            CHECK(fabs(lp[i][l] - alone[i][l]) <= bound,
                  "%s: page %d label %s: %.8f in the batch, %.8f alone (bound %.1g)", what, i,
                  lset[i][l], lp[i][l], alone[i][l], bound);
            sum += pr[i][l];
        }
        CHECK(fabs(sum - 1.0) < 1e-9, "%s: page %d probabilities sum to %.12f", what, i, sum);
    }
    /* pages prepared on three threads while a batch runs here (not again
     * under lowered limits: nothing there depends on them) */
    if (!rc && B >= 4) {
        struct prep_job jobs[3];
        pthread_t th[3];
        int started[3] = {0};
        for (int i = 0; i < 3; i++) {
            jobs[i] = (struct prep_job){.v = v, .pg = &pg[i], .labels = lset[i], .nl = lcount[i]};
            started[i] = pthread_create(&th[i], NULL, prep_thread, &jobs[i]) == 0;
            CHECK(started[i], "%s: pthread_create", what);
        }
        struct vlm_result rt[8];
        memset(rt, 0, sizeof rt);
        int trc = vlm_classify_batch(v, prep, B, rt, &e);
        CHECK(trc == 0, "%s: batch beside the preparing threads: %s", what, e.msg);
        for (uint32_t i = 0; i < B; i++)
            vlm_result_free(&rt[i]);
        struct vlm_prepared *tpp[3] = {0};
        for (int i = 0; i < 3; i++) {
            if (started[i])
                pthread_join(th[i], NULL);
            CHECK(started[i] && jobs[i].rc == 0, "%s: thread %d prepare: %s", what, i,
                  jobs[i].e.msg);
            tpp[i] = jobs[i].out;
        }
        double tl[3][NL];
        struct vlm_result r3[3];
        memset(r3, 0, sizeof r3);
        for (int i = 0; i < 3; i++)
            r3[i].logprob = tl[i];
        trc = tpp[0] && tpp[1] && tpp[2] ? 0 : -1;
        for (uint32_t i0 = 0; trc == 0 && i0 < 3; i0 += B) {
            trc = vlm_classify_batch(v, tpp + i0, 3 - i0 < B ? 3 - i0 : B, r3 + i0, &e);
            CHECK(trc == 0, "%s: batch of thread-prepared pages: %s", what, e.msg);
        }
        for (int i = 0; i < 3 && trc == 0; i++) {
            CHECK(r3[i].best == ra[i].best, "%s: thread page %d best %d vs %d", what, i,
                  r3[i].best, ra[i].best);
            for (uint32_t l = 0; l < lcount[i]; l++) {
                CHECK(fabs(tl[i][l] - alone[i][l]) <= lp_bound(f16, alone[i][l]), "%s: thread page %d label %u: "
                      "%.8f vs %.8f", what, i, l, tl[i][l], alone[i][l]);
            }
        }
        for (int i = 0; i < 3; i++) {
            vlm_result_free(&r3[i]);
            vlm_prepared_free(tpp[i]);
        }
    }
    /* limits: too many pages, none */
    struct vlm_prepared *over[NPAGE] = {prep[0], prep[1], prep[2], prep[3], prep[4]};
    struct vlm_result ro[NPAGE];
    memset(ro, 0, sizeof ro);
    struct folio_err le = {0};
    int lrc = vlm_classify_batch(v, over, B + 1, ro, &le);
    char want[64];
    snprintf(want, sizeof want, "1..%u", B);
    CHECK(lrc == FOLIO_ELIMIT && strstr(le.msg, "pages") && strstr(le.msg, want),
          "%s: batch of %u: rc %d '%s'", what, B + 1, lrc, le.msg);
    lrc = vlm_classify_batch(v, over, 0, ro, &le);
    CHECK(lrc == FOLIO_ELIMIT, "%s: batch of 0: rc %d", what, lrc);
    CHECK(!vlm_dead(v), "%s: a refused batch marked the engine dead", what);

    for (int i = 0; i < NPAGE; i++) {
        vlm_prepared_free(prep[i]);
        vlm_result_free(&ra[i]);
        vlm_result_free(&rb[i]);
    }
    struct vkr_stats s;
    vkr_get_stats(vlm_vkr(v), &s);
    CHECK(s.pipeline_requests_after_seal == 0 && s.sealed, "%s: %llu pipeline requests after seal",
          what, (unsigned long long)s.pipeline_requests_after_seal);
    CHECK(s.first_use_after_warm == 0 && s.pipelines_exercised > 0,
          "%s: %llu pipelines first used after the warm-up (%u exercised)", what,
          (unsigned long long)s.first_use_after_warm, s.pipelines_exercised);
    CHECK(s.validation_messages == 0, "%s: %llu validation messages", what,
          (unsigned long long)s.validation_messages);
    printf("%s: batches of %u pages match each page alone\n", what, B);
    vlm_close(v);
}

/* An engine planned for B pages: its warm-up (which no longer runs a full
 * batch) exercised every pipeline that pages alone and full batches of B
 * then use: nothing is requested after seal, nothing is first recorded
 * after the warm-up, no validation message. */
static void warm_case(const struct jv *cfg, const struct img *im, int nimg, uint32_t B)
{
    char tp[1200], vp[1200];
    struct vlm_config vc = test_config(cfg, "F32", "F32", tp, vp);
    vc.max_batch = B;
    struct folio_err e = {0};
    struct vlm *v = NULL;
    int rc = vlm_open(&vc, &v, &e);
    CHECK(rc == 0, "warm batch %u: open: %s / %s", B, e.msg, e.detail);
    if (rc)
        return;
    struct vkr_stats s0;
    vkr_get_stats(vlm_vkr(v), &s0);
    static const char *const labels[] = {"invoice", "letter", "receipt"};
    struct vlm_prepared *pp[8] = {0};
    struct vlm_result r[8];
    memset(r, 0, sizeof r);
    for (uint32_t i = 0; i < B && !rc; i++) {
        const struct img *m = &im[i % (uint32_t)nimg];
        struct vlm_page pg = {m->rgb, m->w, m->h, (size_t)m->w * 3, 3};
        rc = vlm_prepare(v, &pg, labels, 3, &pp[i], &e);
        CHECK(rc == 0, "warm batch %u: prepare %u: %s", B, i, e.msg);
    }
    if (!rc) {
        rc = vlm_classify_batch(v, pp, 1, r, &e);
        CHECK(rc == 0, "warm batch %u: a page alone: %s", B, e.msg);
        vlm_result_free(&r[0]);
    }
    if (!rc) {
        rc = vlm_classify_batch(v, pp, B, r, &e);
        CHECK(rc == 0, "warm batch %u: a full batch: %s", B, e.msg);
    }
    for (uint32_t i = 0; i < B; i++) {
        vlm_result_free(&r[i]);
        vlm_prepared_free(pp[i]);
    }
    struct vkr_stats s;
    vkr_get_stats(vlm_vkr(v), &s);
    CHECK(s.pipeline_requests_after_seal == 0 && s.sealed,
          "warm batch %u: %llu pipeline requests after seal", B,
          (unsigned long long)s.pipeline_requests_after_seal);
    CHECK(s.first_use_after_warm == 0 && s.pipelines_exercised == s0.pipelines_exercised,
          "warm batch %u: %llu pipelines first used after the warm-up (%u exercised by it, %u now)",
          B, (unsigned long long)s.first_use_after_warm, s0.pipelines_exercised,
          s.pipelines_exercised);
    CHECK(s.validation_messages == 0, "warm batch %u: %llu validation messages", B,
          (unsigned long long)s.validation_messages);
    printf("planned for %u: warm-up %.0f ms exercised %u of %u pipelines, none first used later\n",
           B, vlm_report(v)->warmup_ms, s0.pipelines_exercised, s.pipelines_built);
    vlm_close(v);
}

static void replan_case(const struct jv *cfg, const struct img *im)
{
    char tp[1200], vp[1200];
    struct vlm_config vc = test_config(cfg, "F32", "F32", tp, vp);
    vc.skip_warmup = 1;
    struct folio_err e = {0};
    struct vlm *v = NULL;
    int rc = vlm_open(&vc, &v, &e);
    CHECK(rc == 0, "replan: open: %s", e.msg);
    if (rc)
        return;
    int cpu = !strcmp(vkr_device(vlm_vkr(v))->type, "cpu");
    CHECK(!cpu || vlm_max_batch(v) == 1, "max_batch 0 on a CPU device chose %u",
          vlm_max_batch(v));
    CHECK(vlm_max_batch(v) >= 1 && vlm_report(v)->max_batch == vlm_max_batch(v),
          "chosen max_batch %u", vlm_max_batch(v));
    static const char *const labels[] = {"invoice", "letter", "receipt"};
    struct vlm_page pg = {im->rgb, im->w, im->h, (size_t)im->w * 3, 3};
    double lp0[3], lp[3];
    struct vlm_result r = {.logprob = lp0};
    rc = vlm_classify(v, &pg, labels, 3, &r, &e);
    CHECK(rc == 0, "replan: classify: %s", e.msg);
    vlm_result_free(&r);
    /* too big for the plan's index space: refused, old plan kept */
    struct folio_err le = {0};
    int lrc = lm_replan(vlm_lm(v), 1u << 24, &le);
    CHECK(lrc == FOLIO_ELIMIT && le.msg[0], "lm_replan(2^24): rc %d '%s'", lrc, le.msg);
    struct folio_err ve = {0};
    int vrc = vis_replan(vlm_vis_handle(v), 0, 1, &ve);
    CHECK(vrc != 0 && strstr(ve.msg, "below one merged token"), "vis_replan(0): rc %d '%s'", vrc,
          ve.msg);
    r = (struct vlm_result){.logprob = lp};
    rc = vlm_classify(v, &pg, labels, 3, &r, &e);
    CHECK(rc == 0, "replan: classify after refused re-plans: %s", e.msg);
    for (int l = 0; l < 3 && !rc; l++)
        CHECK(fabs(lp[l] - lp0[l]) <= 1e-5, "after refused re-plans label %d: %.8f vs %.8f", l,
              lp[l], lp0[l]);
    vlm_result_free(&r);
    /* one that fits: the page still classifies the same */
    uint32_t B = max_batch();
    lrc = lm_replan(vlm_lm(v), B, &le);
    vrc = vis_replan(vlm_vis_handle(v), 160 * B, B, &ve);
    CHECK(lrc == 0 && vrc == 0, "re-plan for %u: %s / %s", B, le.msg, ve.msg);
    r = (struct vlm_result){.logprob = lp};
    rc = vlm_classify(v, &pg, labels, 3, &r, &e);
    CHECK(rc == 0, "replan: classify after a re-plan for %u: %s", B, e.msg);
    for (int l = 0; l < 3 && !rc; l++)
        CHECK(fabs(lp[l] - lp0[l]) <= 1e-5, "after a re-plan for %u label %d: %.8f vs %.8f", B, l,
              lp[l], lp0[l]);
    vlm_result_free(&r);
    vlm_close(v);
    /* an explicit batch the device cannot hold fails the open, naming it
     * in the context and keeping the loader's own message and detail */
    vc.max_batch = 4096;
    struct folio_err be = {0};
    rc = vlm_open(&vc, &v, &be);
    CHECK(rc == FOLIO_ELIMIT && strstr(be.context, "max_batch 4096") && !strstr(be.detail, "max_batch 4096"),
          "max_batch 4096: rc %d '%s' / detail '%s' / context '%s'", rc, be.msg, be.detail, be.context);
    if (rc == 0)
        vlm_close(v);
}

int main(void)
{
    char rbuf[1024];
    (void)jints; /* lm_json.h helper this test does not need */
    tu_parity_root(rbuf, sizeof rbuf);
    root = rbuf;
    char why[1300];
    struct jv *m = jload_manifest(root, why, sizeof why);
    REQUIRE(m != NULL, "%s", why);
    man = m;
    struct img im[3];
    memset(im, 0, sizeof im);
    int nimg = 0;
    if (load_images(im, &nimg) == 0 && nimg > 0) {
        const struct jv *cfgs = jget(m, "configs");
        replan_case(jat(cfgs, 0), &im[0]);
        if (max_batch() >= 4) { /* batch 1 and a large batch (the plan of 4 runs below) */
            warm_case(jat(cfgs, 0), im, nimg, 1);
            warm_case(jat(cfgs, 0), im, nimg, 8);
        }
        for (int c = 0; c < cfgs->n; c++) {
            const struct jv *cfg = jat(cfgs, c);
            const struct jv *tg = jget(cfg, "text_gguf"), *mg = jget(cfg, "mmproj_gguf");
            if (max_batch() < 4 && c > 0) /* lowered limits: one family (windows + full) */
                break;
            run(cfg, "F32", "F32", im, nimg);
            if (max_batch() < 4) /* lowered limits: the split paths, the f32 tower only */
                continue;
            if (c > 0) /* Qwen2-VL: full attention only, the f32 tower */
                continue;
            for (int k = 0; k < mg->n; k++) /* the half-precision tower */
                if (strcmp(mg->keys[k], "F32"))
                    run(cfg, "F32", mg->keys[k], im, nimg);
            if (tg->n > 1) /* one quantised text model */
                run(cfg, tg->keys[1], "F32", im, nimg);
        }
    }
    for (int i = 0; i < 3; i++)
        free(im[i].rgb);
    jfree(m);
    return tu_finish();
}
