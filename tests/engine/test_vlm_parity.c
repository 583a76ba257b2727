/*
 * The whole vision path end to end against the parity kit: the prompt
 * image's raw RGB -> folio's preprocessing -> vision tower -> chat prompt
 * with the image tokens expanded -> one fused LM pass scoring the six
 * labels (each followed by <|im_end|>), through the public vlm API:
 *  - the prompt's token ids equal the reference's (image pads expanded);
 *  - every label's summed log-probability equals the reference's
 *    sum_with_end within 1e-3 · max(1, |ref|) (2e-3 where the tensor-core
 *    matmul stages activations in f16), and the top label is the same, for
 *    the F32 tower with every text variant (F32 and quantised: their
 *    references use the dequantised weights);
 *  - the half-precision tower (BF16 / F16 mmproj; no reference for that
 *    pairing) gives the same top label and log-probs within 0.05;
 *  - the engine became ready with a warm-up pass and a passing self-test,
 *    and no pipeline was requested after seal; no validation messages.
 */
#include "tests/support/parity_root.h"
#include "tests/support/testutil.h"
#include "tests/engine/lm_json.h"
#include "common/common.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"
#include "engine/model/vision.h"
#include "engine/vlm.h"
#include "engine/vlm_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *root;
static const struct jv *man;

static void run(const struct jv *cfg, const char *tvar, const char *vvar, int exact, int warm)
{
    char tp[1200], vp[1200], what[160];
    const char *cname = jget(cfg, "name")->str;
    snprintf(what, sizeof what, "%s text %s + mmproj %s", cname, tvar, vvar);
    snprintf(tp, sizeof tp, "%s/%s", root, jget(jget(cfg, "text_gguf"), tvar)->str);
    snprintf(vp, sizeof vp, "%s/%s", root, jget(jget(cfg, "mmproj_gguf"), vvar)->str);
    const struct jv *pp = jget(man, "preprocess");
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vlm_config vc = {.model_path = tp, .mmproj_path = vp,
                            .device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                            .validate = -1, .cache_dir = "", .max_image_tokens = 40,
                            .min_pixels = (uint32_t)jget(pp, "min_pixels")->num,
                            .max_pixels = (uint32_t)jget(pp, "max_pixels")->num,
                            .max_labels = 8, .max_label_tokens = 8, .max_text_tokens = 64,
                            .skip_warmup = !warm};
    struct folio_err e = {0};
    struct vlm *v = NULL;
    int rc = vlm_open(&vc, &v, &e);
    CHECK(rc == 0, "%s: open: %s / %s / %s", what, e.msg, e.detail, e.hint);
    if (rc)
        return;
    const struct vlm_report *r = vlm_report(v);
    CHECK(r->vision_enabled, "%s: vision off: %s", what, r->vision_reason);
    CHECK(!warm || r->warmup_ms > 0, "%s: no warm-up pass", what);

    const struct jv *ip = jget(cfg, "prompt");
    const char *img = jget(ip, "image")->str;
    const struct jv *im = NULL, *imgs = jget(man, "images");
    for (int i = 0; i < imgs->n; i++)
        if (!strcmp(jget(jat(imgs, i), "name")->str, img))
            im = jat(imgs, i);
    uint32_t w = (uint32_t)jget(im, "width")->num, h = (uint32_t)jget(im, "height")->num;
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", root, jget(im, "rgb")->str);
    uint8_t *rgb = NULL;
    size_t n = 0;
    rc = folio_read_file(path, 1u << 24, &rgb, &n, &e);
    CHECK(rc == 0 && n == (size_t)w * h * 3, "%s: %s", path, e.msg);
    const struct jv *jl = jget(cfg, "labels");
    const char *labels[8];
    int nl = jl->n;
    for (int l = 0; l < nl && l < 8; l++)
        labels[l] = jget(jat(jl, l), "label")->str;
    double lp[8], pr[8];
    struct vlm_result res = {.logprob = lp, .prob = pr};
    struct vlm_page pg = {rgb, w, h, (size_t)w * 3, 3};
    if (rc == 0) {
        rc = vlm_classify(v, &pg, labels, (uint32_t)nl, &res, &e);
        CHECK(rc == 0, "%s: classify: %s / %s", what, e.msg, e.detail);
    }
    if (rc == 0) {
        uint32_t nt = 0;
        int32_t *want = jints(jget(ip, "token_ids"), &nt);
        CHECK(want && res.n_prompt == nt && !memcmp(want, res.prompt_ids, nt * 4),
              "%s: prompt ids differ (%u vs %u tokens)", what, res.n_prompt, nt);
        free(want);
        CHECK(res.image_tokens == (uint32_t)jget(im, "n_merged")->num && !res.downscaled,
              "%s: %u image tokens", what, res.image_tokens);
        const struct jv *refs = jget(jget(cfg, "label_logprobs"), exact ? tvar : "F32");
        double tol = ops_coopmat_available(vlm_vkr(v)) || ops_gemm_available(vlm_vkr(v)) ? 2e-3 : 1e-3;
        int rb = 0;
        for (int l = 0; l < nl; l++) {
            double ref = jget(jat(refs, l), "sum_with_end")->num;
            if (ref > jget(jat(refs, rb), "sum_with_end")->num)
                rb = l;
            double bound = exact ? tol * (fabs(ref) > 1 ? fabs(ref) : 1) : 0.05;
            CHECK(fabs(lp[l] - ref) <= bound, "%s: label %s: %.6f vs reference %.6f (bound %.2g)",
                  what, labels[l], lp[l], ref, bound);
        }
        CHECK(res.best == rb, "%s: top label %s, reference %s", what, labels[res.best],
              labels[rb]);
        printf("%s: top %s p=%.4f, preprocess %.1f ms, vision %.1f ms, lm %.1f ms\n", what,
               labels[res.best], res.confidence, res.preprocess_ms, res.vision_ms, res.lm_ms);
        /* The tower's rows reach the text model on the device (vis_rows);
         * the same page through the host must score the same. */
        struct vkr_tensor dev_rows;
        int on_dev = vis_rows(vlm_vis_handle(v), &dev_rows);
        double lph[8], prh[8];
        struct vlm_result rh = {.logprob = lph, .prob = prh};
        setenv("FOLIO_VIS_ROWS", "host", 1);
        rc = vlm_classify(v, &pg, labels, (uint32_t)nl, &rh, &e);
        unsetenv("FOLIO_VIS_ROWS");
        CHECK(rc == 0, "%s: classify through the host: %s / %s", what, e.msg, e.detail);
        double worst = 0;
        for (int l = 0; rc == 0 && l < nl; l++)
            worst = fmax(worst, fabs(lp[l] - lph[l]) / fmax(1.0, fabs(lph[l])));
        CHECK(rc || worst <= 1e-6, "%s: image rows on the device against through the host: max "
              "rel|d| %.3g", what, worst);
        printf("%s: image rows %s; against through the host max rel|d| %.3g\n", what,
               on_dev ? "on the device" : "through the host (both runs)", worst);
        vlm_result_free(&rh);
    }
    vlm_result_free(&res);
    free(rgb);
    struct vkr_stats s;
    vkr_get_stats(vlm_vkr(v), &s);
    CHECK(s.pipeline_requests_after_seal == 0 && s.sealed, "%s: %llu pipeline requests after seal",
          what, (unsigned long long)s.pipeline_requests_after_seal);
    CHECK(s.validation_messages == 0, "%s: %llu validation messages", what,
          (unsigned long long)s.validation_messages);
    vlm_close(v);
}

int main(void)
{
    const char *src = getenv("FOLIO_SOURCE_DIR");
    char rbuf[1024];
    (void)src;
    tu_parity_root(rbuf, sizeof rbuf);
    root = rbuf;
    char why[1300];
    struct jv *m = jload_manifest(root, why, sizeof why);
    REQUIRE(m != NULL, "%s", why);
    man = m;
    const struct jv *cfgs = jget(m, "configs");
    for (int c = 0; c < cfgs->n; c++) {
        const struct jv *cfg = jat(cfgs, c);
        const struct jv *tg = jget(cfg, "text_gguf"), *mg = jget(cfg, "mmproj_gguf");
        for (int t = 0; t < tg->n; t++)
            run(cfg, tg->keys[t], "F32", 1, t == 0);
        for (int k = 0; k < mg->n; k++)
            if (strcmp(mg->keys[k], "F32"))
                run(cfg, "F32", mg->keys[k], 0, 0);
    }
    jfree(m);
    return tu_finish();
}
