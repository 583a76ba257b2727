/*
 * Parity of the vision tower with the upstream reference (transformers,
 * f32, eager attention) on the parity kit's tiny Qwen2.5-VL (windows:
 * partial windows both ways in img0/img1) and Qwen2-VL towers, every
 * mmproj variant (F32, BF16 / F16; their references use the dequantised
 * weights, so the bound is the same):
 *  - the output embeddings of all three test images from the reference's
 *    own pixel_values (1176 columns, folded to the 588-column still-image
 *    layout after checking the two frames are equal):
 *    max|Δ| <= tol · max|ref| with tol 1e-4 (f32 kernels) or 3e-3 where
 *    the tensor-core matmul stages activations in f16;
 *  - the prompt image's intermediates (F32 variant): patch embedding,
 *    then the residual stream after every block (window order), same bound;
 *  - the prompt image from its raw RGB through folio's preprocessing:
 *    same bound (preprocessing is byte-exact, test_preprocess);
 *  - an image larger than planned is refused with FOLIO_ELIMIT; a grid not
 *    a multiple of 2 with FOLIO_EINVAL;
 *  - zero pipeline creations after seal, zero validation messages.
 */
#include "tests/support/parity_root.h"
#include "tests/support/testutil.h"
#include "tests/engine/lm_json.h"
#include "tests/engine/vision_parity_util.h"
#include "common/common.h"
#include "engine/arch/qwen2vl/qwen2vl.h"
#include "engine/model/gguf_model.h"
#include "engine/model/preprocess.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct VT {
    struct vkr *vk;
    double tol;
    const char *root;
    const struct jv *man;
    int ranged;
};

static void run_vvariant(struct VT *t, const struct jv *cfg, const char *var)
{
    char what[160], path[1200];
    const char *cname = jget(cfg, "name")->str;
    snprintf(path, sizeof path, "%s/%s", t->root, jget(jget(cfg, "mmproj_gguf"), var)->str);
    struct folio_err e = {0};
    /* the ranged run also takes the MLP in chunks of 8 rows (ffn_rows) */
    struct vis_config vc = {.max_patches = 160, .ffn_rows = t->ranged ? 8 : 0};
    struct vis *v = NULL;
    int rc = vis_open_file(t->vk, path, &vc, &v, &e);
    CHECK(rc == 0, "%s/%s: open: %s / %s / %s", cname, var, e.msg, e.detail, e.hint);
    if (rc)
        return;
    uint32_t O = vis_out_dim(v), D = vis_hparams(v)->n_embd;
    const struct jv *imgs = jget(t->man, "images");
    const struct jv *embs = jget(jget(cfg, "vision_embeddings"), var);
    for (int i = 0; i < imgs->n; i++) {
        const struct jv *im = jat(imgs, i);
        const char *iname = jget(im, "name")->str;
        uint32_t np = (uint32_t)jget(im, "n_patches")->num;
        uint32_t gh = (uint32_t)jat(jget(im, "grid_thw"), 1)->num;
        uint32_t gw = (uint32_t)jat(jget(im, "grid_thw"), 2)->num;
        uint32_t nm = (uint32_t)jget(im, "n_merged")->num;
        float *pv = vp_load(t->root, jget(im, "pixel_values")->str, (size_t)np * 1176 * 4);
        float *ref = vp_load(t->root, jget(embs, iname)->str, (size_t)nm * O * 4);
        float *p588 = pv ? vp_fold(pv, np, 14) : NULL;
        float *got = malloc((size_t)nm * O * 4);
        if (pv && ref && p588 && got) {
            rc = vis_encode(v, p588, gh, gw, got, &e);
            snprintf(what, sizeof what, "%s/%s %s%s", cname, var, iname,
                     t->ranged ? " (ranged)" : "");
            CHECK(rc == 0, "%s: encode: %s / %s", what, e.msg, e.detail);
            if (!rc) {
                double rel = vp_cmp(what, got, O, 0, ref, nm, O, t->tol);
                printf("%s: max|d|/max|ref| = %.3g\n", what, rel);
            }
        }
        free(pv);
        free(ref);
        free(p588);
        free(got);
    }

    /* the prompt image: intermediates (F32 only) and from raw pixels */
    const char *pimg = jget(jget(cfg, "prompt"), "image")->str;
    const struct jv *im = vp_image(t->man, pimg);
    const struct jv *pp = jget(t->man, "preprocess");
    uint32_t np = (uint32_t)jget(im, "n_patches")->num, nm = (uint32_t)jget(im, "n_merged")->num;
    uint32_t gh = (uint32_t)jat(jget(im, "grid_thw"), 1)->num;
    uint32_t gw = (uint32_t)jat(jget(im, "grid_thw"), 2)->num;
    if (!strcmp(var, "F32") && !t->ranged) {
        const struct jv *inter = jget(cfg, "intermediates");
        float *pv = vp_load(t->root, jget(im, "pixel_values")->str, (size_t)np * 1176 * 4);
        float *p588 = pv ? vp_fold(pv, np, 14) : NULL;
        float *x = malloc((size_t)np * D * 4), *rp = malloc((size_t)np * D * 4);
        int32_t *widx = malloc((size_t)nm * 4);
        uint32_t win = vis_hparams(v)->window_size / 28;
        int v25 = vis_hparams(v)->arch == &arch_qwen25vl_tower; /* windowed blocks */
        vis_window_index(gh / 2, gw / 2, v25 ? win : 0, widx, NULL, NULL);
        /* the manifest's window index is the same permutation */
        const struct jv *jw = jget(im, "window_index");
        int wsame = jw && jw->n == (int)nm;
        for (uint32_t k = 0; wsame && k < nm && v25; k++)
            wsame &= (int32_t)jat(jw, (int)k)->num == widx[k];
        CHECK(wsame, "%s: window index differs from the manifest's", pimg);
        float *pe = vp_load(t->root, jget(inter, "vision.patch_embed")->str, (size_t)np * D * 4);
        for (uint32_t b = 0; p588 && x && rp && widx && pe; b++) {
            char key[48];
            const float *cmp = NULL;
            float *blk = NULL;
            if (b == 0) {
                /* patch embedding is in merge-group order; the tower runs in window order */
                for (uint32_t r = 0; r < np; r++)
                    memcpy(rp + (size_t)r * D, pe + ((size_t)widx[r / 4] * 4 + r % 4) * D,
                           (size_t)D * 4);
                cmp = rp;
            } else {
                snprintf(key, sizeof key, "vision.block%u", b - 1);
                const struct jv *f = jget(inter, key);
                if (!f)
                    break;
                blk = vp_load(t->root, f->str, (size_t)np * D * 4);
                cmp = blk;
            }
            if (!cmp)
                break;
            rc = vis_encode_partial(v, p588, gh, gw, b, x, &e);
            CHECK(rc == 0, "partial %u: %s", b, e.msg);
            snprintf(what, sizeof what, "%s/F32 %s after %u blocks", cname, pimg, b);
            if (!rc)
                vp_cmp(what, x, D, 0, cmp, np, D, t->tol);
            free(blk);
        }
        free(pe);
        free(pv);
        free(p588);
        free(x);
        free(rp);
        free(widx);
    }
    {
        uint32_t w = (uint32_t)jget(im, "width")->num, h = (uint32_t)jget(im, "height")->num;
        uint8_t *rgb = vp_load(t->root, jget(im, "rgb")->str, (size_t)w * h * 3);
        float *ref = vp_load(t->root, jget(embs, pimg)->str, (size_t)nm * O * 4);
        struct prep_config pc = {.min_pixels = (uint32_t)jget(pp, "min_pixels")->num,
                                 .max_pixels = (uint32_t)jget(pp, "max_pixels")->num};
        memcpy(pc.mean, vis_hparams(v)->image_mean, sizeof pc.mean);
        memcpy(pc.std, vis_hparams(v)->image_std, sizeof pc.std);
        struct prep_image pi;
        float *got = malloc((size_t)nm * O * 4);
        if (rgb && ref && got && prep_image(rgb, w, h, (size_t)w * 3, 3, &pc, 1, &pi, &e) == 0) {
            rc = vis_encode(v, pi.patches, pi.grid_h, pi.grid_w, got, &e);
            snprintf(what, sizeof what, "%s/%s %s from pixels", cname, var, pimg);
            CHECK(rc == 0, "%s: %s", what, e.msg);
            if (!rc)
                vp_cmp(what, got, O, 0, ref, nm, O, t->tol);
            if (!rc) /* the engine's input */
                vp_bytes_same(v, &pi, got, O, what);
            /* bad input: too large for the plan, odd grid */
            float *big = calloc((size_t)16 * 12 * 588, 4);
            CHECK(big && vis_encode(v, big, 16, 12, got, &e) == FOLIO_ELIMIT,
                  "192 patches accepted by a 160-patch plan");
            CHECK(big && vis_encode(v, big, 3, 4, got, &e) == FOLIO_EINVAL, "odd grid accepted");
            free(big);
            prep_image_free(&pi);
        }
        free(rgb);
        free(ref);
        free(got);
    }
    vis_close(v);
}

static int run_vision_parity(int ranged)
{
    struct VT t = {.ranged = ranged};
    (void)jints;
    char root[1024], why[1300];
    tu_parity_root(root, sizeof root);
    t.root = root;
    struct jv *man = jload_manifest(root, why, sizeof why);
    REQUIRE(man && jget(man, "images"), "%s", man ? "parity manifest has no images" : why);
    t.man = man;
    struct folio_err e = {0};
    int rc = vp_open_device(&t.vk, &e);
    REQUIRE(rc == 0, "vkr_open: %s / %s / %s", e.msg, e.detail, e.hint);
    t.tol = ops_coopmat_available(t.vk) || ops_gemm_available(t.vk) ? 3e-3 : 1e-4;

    const struct jv *cfgs = jget(man, "configs");
    /* every model's keys, each once (the models share most of them) */
    static struct vkr_pipeline_key keys[4 * VIS_PIPELINE_KEYS_MAX], one_keys[VIS_PIPELINE_KEYS_MAX];
    const int cap = (int)(sizeof keys / sizeof keys[0]);
    int nk = 0;
    for (int c = 0; c < cfgs->n; c++) {
        const struct jv *mg = jget(cfgs->items[c], "mmproj_gguf");
        for (int k = 0; mg && k < mg->n; k++) {
            char path[1200];
            snprintf(path, sizeof path, "%s/%s", root, mg->items[k]->str);
            struct gguf_model *m;
            rc = gguf_model_open_vision(path, &m, &e);
            REQUIRE(rc == 0, "%s: %s / %s", path, e.msg, e.detail);
            int one = vis_pipeline_keys(t.vk, m, one_keys, VIS_PIPELINE_KEYS_MAX);
            /* each model's whole list fits what callers pass (a list at
             * the limit may have been cut: vis_pipeline_keys) */
            CHECK(one < VIS_PIPELINE_KEYS_MAX, "%s: %d tower keys, room for %d", path, one,
                  VIS_PIPELINE_KEYS_MAX);
            for (int i = 0; i < one; i++) {
                int seen = 0;
                for (int j = 0; j < nk && !seen; j++)
                    seen = vkr_pipeline_key_equal(&keys[j], &one_keys[i]);
                if (seen)
                    continue;
                CHECK(nk < cap, "%s: the test's key list (%d) is full", path, cap);
                if (nk < cap)
                    keys[nk++] = one_keys[i];
            }
            gguf_model_close(m);
        }
    }
    struct vkr_stats s0;
    rc = vp_seal(t.vk, keys, nk, &s0, &e);
    REQUIRE(rc == 0, "prewarm: %s", e.msg);
    int variants = 0;
    for (int c = 0; c < cfgs->n; c++) {
        const struct jv *mg = jget(cfgs->items[c], "mmproj_gguf");
        for (int k = 0; mg && k < mg->n; k++, variants++)
            run_vvariant(&t, cfgs->items[c], mg->keys[k]);
    }
    CHECK(variants >= 4, "only %d mmproj variants", variants);
    vp_check_sealed(t.vk, &s0);
    struct vkr_stats s;
    vkr_get_stats(t.vk, &s);
    if (ranged)
        CHECK(s.device_bytes_peak > 2 * vkr_limits(t.vk)->max_alloc,
              "ranged: peak %llu bytes, max_alloc %llu", (unsigned long long)s.device_bytes_peak,
              (unsigned long long)vkr_limits(t.vk)->max_alloc);
    vkr_close(t.vk);
    jfree(man);
    return tu_finish();
}
