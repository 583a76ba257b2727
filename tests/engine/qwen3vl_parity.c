/*
 * Qwen3-VL parity with transformers (f32, eager attention) on the tiny
 * models of tests/fixtures/parity-qwen3vl (tests/parity/make_qwen3vl_fixtures.py:
 * GGUFs written by llama.cpp's converter), every text and mmproj variant
 * (quantised / half files' references use the same rounded weights):
 *  - the tower's output rows and each DeepStack merger's rows for all three
 *    images, from the reference's pixel_values (1536 columns folded to the
 *    768-column still-image layout after checking both frames are equal):
 *    max|d| <= tol * max|ref|, tol 1e-4 (3e-3 where the tensor-core matmul
 *    stages f16);
 *  - the prompt image (F32): the residual stream after the patch and
 *    interpolated position embedding and after every block; from its raw
 *    RGB through folio's preprocessing (patch 16, mean/std 0.5);
 *  - logits at every position of the text-only prompt and of the image
 *    prompt (tower rows with their DeepStack columns spliced in, the
 *    manifest's 3-D positions): 1e-3 * max|logit| (3e-3 on tensor cores);
 *    every label's summed log-probability, alone and with <|im_end|>:
 *    1e-3 * max(1, |ref|), same top label;
 *  - zero pipelines built after seal, zero validation messages.
 * The whole path through vlm_classify is test_vlm_parity.c on the same
 * fixtures (engine_vlm_parity_qwen3vl). Registered again with 16 KiB
 * bindings (engine_qwen3vl_parity_range16k): the tower's activations
 * exceed one binding and its attention runs split, same bounds.
 */
#include "tests/support/testutil.h"
#include "tests/engine/lm_json.h"
#include "tests/engine/vision_parity_util.h"
#include "common/common.h"
#include "engine/arch/qwen3vl/qwen3vl.h"
#include "engine/model/gguf_model.h"
#include "engine/model/lm.h"
#include "engine/model/preprocess.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char root[1024];
static const struct jv *man;
static struct vkr *vk;
static double tol_lm, tol_vis;

/* as vp_cmp, printing the ratio */
static void cmp(const char *what, const float *got, size_t gs, size_t go, const float *ref,
                size_t rows, size_t w, double tol)
{
    printf("%s: max|d|/max|ref| = %.3g\n", what, vp_cmp(what, got, gs, go, ref, rows, w, tol));
}

static void run_vision(const struct jv *cfg, const char *var)
{
    char what[200], path[1300];
    const char *cname = jget(cfg, "name")->str;
    snprintf(path, sizeof path, "%s/%s", root, jget(jget(cfg, "mmproj_gguf"), var)->str);
    struct folio_err e = {0};
    struct vis_config vc = {.max_patches = 160};
    struct vis *v = NULL;
    int rc = vis_open_file(vk, path, &vc, &v, &e);
    CHECK(rc == 0, "%s/%s: open: %s / %s", cname, var, e.msg, e.detail);
    if (rc)
        return;
    const struct gguf_vision_hparams *h = vis_hparams(v);
    const struct jv *jds = jget(jget(cfg, "vision"), "deepstack_visual_indexes");
    CHECK(h->arch == &arch_qwen3vl_tower && jds && h->n_deepstack == (uint32_t)jds->n,
          "%s: mmproj tower %s, %u DeepStack layers", cname, h->arch->json_name, h->n_deepstack);
    for (int j = 0; jds && j < jds->n && j < (int)h->n_deepstack; j++)
        CHECK(h->deepstack_layers[j] == (uint32_t)jat(jds, j)->num, "%s: DeepStack layer %d",
              cname, j);
    uint32_t O = h->proj_dim, W = vis_out_dim(v), D = h->n_embd;
    const struct jv *imgs = jget(man, "images");
    const struct jv *embs = jget(jget(cfg, "vision_embeddings"), var);
    const struct jv *extras = jget(jget(cfg, "vision_extras"), var);
    for (int i = 0; i < imgs->n; i++) {
        const struct jv *im = jat(imgs, i);
        const char *iname = jget(im, "name")->str;
        uint32_t np = (uint32_t)jget(im, "n_patches")->num, nm = (uint32_t)jget(im, "n_merged")->num;
        uint32_t gh = (uint32_t)jat(jget(im, "grid_thw"), 1)->num;
        uint32_t gw = (uint32_t)jat(jget(im, "grid_thw"), 2)->num;
        float *pv = vp_load(root, jget(im, "pixel_values")->str, (size_t)np * 1536 * 4);
        float *p768 = pv ? vp_fold(pv, np, 16) : NULL;
        float *got = malloc((size_t)nm * W * 4);
        if (p768 && got && (rc = vis_encode(v, p768, gh, gw, got, &e)) == 0) {
            for (uint32_t j = 0; j <= h->n_deepstack; j++) {
                char key[32];
                snprintf(key, sizeof key, "deepstack%u", j - 1);
                const struct jv *f = j ? jget(jget(extras, iname), key) : jget(embs, iname);
                float *ref = f ? vp_load(root, f->str, (size_t)nm * O * 4) : NULL;
                CHECK(f, "%s: no reference for %s", iname, j ? key : "the merger");
                snprintf(what, sizeof what, "%s/%s %s %s", cname, var, iname, j ? key : "merger");
                if (ref)
                    cmp(what, got, W, (size_t)j * O, ref, nm, O, tol_vis);
                free(ref);
            }
        } else {
            CHECK(0, "%s/%s %s: encode: %s", cname, var, iname, e.msg);
        }
        free(pv), free(p768), free(got);
    }
    /* the prompt image: intermediates (F32) and from raw pixels */
    const struct jv *im = vp_image(man, jget(jget(cfg, "prompt"), "image")->str);
    const char *iname = jget(im, "name")->str;
    uint32_t np = (uint32_t)jget(im, "n_patches")->num, nm = (uint32_t)jget(im, "n_merged")->num;
    uint32_t gh = (uint32_t)jat(jget(im, "grid_thw"), 1)->num;
    uint32_t gw = (uint32_t)jat(jget(im, "grid_thw"), 2)->num;
    if (!strcmp(var, "F32")) {
        const struct jv *inter = jget(cfg, "intermediates");
        float *pv = vp_load(root, jget(im, "pixel_values")->str, (size_t)np * 1536 * 4);
        float *p768 = pv ? vp_fold(pv, np, 16) : NULL, *x = malloc((size_t)np * D * 4);
        for (uint32_t b = 0; p768 && x; b++) {
            char key[48];
            if (b == 0)
                snprintf(key, sizeof key, "vision.block_input");
            else
                snprintf(key, sizeof key, "vision.block%u", b - 1);
            const struct jv *f = jget(inter, key);
            if (!f)
                break;
            float *ref = vp_load(root, f->str, (size_t)np * D * 4);
            rc = vis_encode_partial(v, p768, gh, gw, b, x, &e);
            CHECK(rc == 0, "partial %u: %s", b, e.msg);
            snprintf(what, sizeof what, "%s/F32 %s %s", cname, iname, key);
            if (!rc && ref)
                cmp(what, x, D, 0, ref, np, D, tol_vis);
            free(ref);
        }
        free(pv), free(p768), free(x);
    }
    const struct jv *pp = jget(man, "preprocess");
    uint32_t w = (uint32_t)jget(im, "width")->num, hh = (uint32_t)jget(im, "height")->num;
    uint8_t *rgb = vp_load(root, jget(im, "rgb")->str, (size_t)w * hh * 3);
    float *ref = vp_load(root, jget(embs, iname)->str, (size_t)nm * O * 4);
    struct prep_config pc = {.min_pixels = (uint32_t)jget(pp, "min_pixels")->num,
                             .max_pixels = (uint32_t)jget(pp, "max_pixels")->num,
                             .patch = h->patch_size};
    memcpy(pc.mean, h->image_mean, sizeof pc.mean);
    memcpy(pc.std, h->image_std, sizeof pc.std);
    struct prep_image pi;
    float *got = malloc((size_t)nm * W * 4);
    if (rgb && ref && got && prep_image(rgb, w, hh, (size_t)w * 3, 3, &pc, 1, &pi, &e) == 0) {
        CHECK(pi.grid_h == gh && pi.grid_w == gw && pi.row_len == 768, "%s: grid %ux%u, rows "
              "of %u", iname, pi.grid_h, pi.grid_w, pi.row_len);
        rc = vis_encode(v, pi.patches, pi.grid_h, pi.grid_w, got, &e);
        snprintf(what, sizeof what, "%s/%s %s from pixels", cname, var, iname);
        CHECK(rc == 0, "%s: %s", what, e.msg);
        if (!rc)
            cmp(what, got, W, 0, ref, nm, O, tol_vis);
        if (!rc) /* the engine's input: 16-px patches from the page's bytes */
            vp_bytes_same(v, &pi, got, W, what);
        prep_image_free(&pi);
    }
    free(rgb), free(ref), free(got);
    vis_close(v);
}

static void labels_cmp(const char *what, const struct jv *refs, const char *field,
                       const double *lp, int nl)
{
    int rb = 0, gb = 0;
    for (int l = 0; l < nl; l++) {
        double r = jget(jat(refs, l), field)->num;
        CHECK(fabs(lp[l] - r) <= 1e-3 * fmax(1.0, fabs(r)), "%s: label %d %s %.6f vs %.6f", what,
              l, field, lp[l], r);
        if (r > jget(jat(refs, rb), field)->num)
            rb = l;
        if (lp[l] > lp[gb])
            gb = l;
    }
    CHECK(rb == gb, "%s: top label %d, reference %d", what, gb, rb);
}

static void run_text(const struct jv *cfg, const char *var)
{
    char what[200], path[1300];
    const char *cname = jget(cfg, "name")->str;
    snprintf(path, sizeof path, "%s/%s", root, jget(jget(cfg, "text_gguf"), var)->str);
    struct folio_err e = {0};
    struct lm_config lc = {.max_tokens = 120, .batch = 1, .max_labels = 8,
                           .max_label_tokens = 8, .all_logits = 1};
    struct lm *lm = NULL;
    int rc = lm_open_file(vk, path, &lc, &lm, &e);
    CHECK(rc == 0, "%s/%s: open: %s / %s", cname, var, e.msg, e.detail);
    if (rc)
        return;
    const struct gguf_text_hparams *h = lm_hparams(lm);
    uint32_t V = h->n_vocab, E = h->n_embd, nds = h->n_deepstack, Ein = E * (1 + nds);
    CHECK(h->arch == &arch_qwen3vl_text && h->head_dim == (uint32_t)jget(cfg, "head_dim")->num,
          "%s: family %s head_dim %u", cname, h->arch->name, h->head_dim);
    /* Q/K/V as one product on the f16 path, its q and k unpacked for the
     * family's per-head norms (lm_forward.c), unless turned off */
    int f16p;
    uint32_t fz;
    lm_paths(lm, &f16p, &fz);
    const char *qe = getenv("FOLIO_LM_QKV");
    int apart = qe && strcmp(qe, "apart") == 0;
    CHECK(fz == (f16p && !apart ? h->n_layer : 0), "%s/%s: %u of %u layers run Q/K/V as one "
          "product (f16 path %d)", cname, var, fz, h->n_layer, f16p);
    int32_t img_id = (int32_t)jget(jget(cfg, "hf_config"), "image_token_id")->num;
    const struct jv *jl = jget(cfg, "labels");
    int nl = jl->n < 8 ? jl->n : 8;
    struct lm_label lab[8], labe[8];
    int32_t *lt[8] = {0}, *lte[8] = {0};
    for (int l = 0; l < nl; l++) {
        uint32_t n = 0, ne = 0;
        lt[l] = jints(jget(jat(jl, l), "token_ids"), &n);
        lte[l] = jints(jget(jat(jl, l), "token_ids_with_end"), &ne);
        lab[l] = (struct lm_label){lt[l], n};
        labe[l] = (struct lm_label){lte[l], ne};
    }
    double lp[8];
    /* text-only prompt */
    const struct jv *tp = jget(cfg, "text_prompt");
    uint32_t nt = 0;
    int32_t *tt = jints(jget(tp, "token_ids"), &nt);
    float *tref = vp_load(root, jget(jget(cfg, "text_logits"), var)->str, (size_t)nt * V * 4);
    float *lg = malloc((size_t)(nt > 200 ? nt : 200) * V * 4);
    struct lm_seq st = {tt, nt, NULL, NULL, 0, NULL, 0};
    if (tt && tref && lg && (rc = lm_prefill(lm, &st, 1, lg, &e)) == 0) {
        snprintf(what, sizeof what, "%s/%s text prompt", cname, var);
        cmp(what, lg, V, 0, tref, nt, V, tol_lm);
        if (lm_score(lm, lab, (uint32_t)nl, lp, &e) == 0)
            labels_cmp(what, jget(jget(cfg, "text_label_logprobs"), var), "sum", lp, nl);
        if (lm_score(lm, labe, (uint32_t)nl, lp, &e) == 0)
            labels_cmp(what, jget(jget(cfg, "text_label_logprobs"), var), "sum_with_end", lp, nl);
    } else {
        CHECK(0, "%s/%s: text prefill: %s", cname, var, e.msg);
    }
    /* image prompt: the tower's rows (F32) with their DeepStack columns */
    const struct jv *ip = jget(cfg, "prompt");
    const char *iname = jget(ip, "image")->str;
    uint32_t ni = 0, nm = (uint32_t)jget(vp_image(man, iname), "n_merged")->num;
    int32_t *it = jints(jget(ip, "token_ids"), &ni);
    float *iref = vp_load(root, jget(jget(cfg, "logits"), var)->str, (size_t)ni * V * 4);
    float *rows[1 + 8] = {0};
    rows[0] = vp_load(root, jget(jget(jget(cfg, "vision_embeddings"), "F32"), iname)->str,
                      (size_t)nm * E * 4);
    for (uint32_t j = 0; j < nds && j < 8; j++) {
        char key[32];
        snprintf(key, sizeof key, "deepstack%u", j);
        const struct jv *f = jget(jget(jget(jget(cfg, "vision_extras"), "F32"), iname), key);
        rows[1 + j] = f ? vp_load(root, f->str, (size_t)nm * E * 4) : NULL;
        CHECK(f, "%s: no %s reference", cname, key);
    }
    float *emb = calloc((size_t)ni * Ein, 4);
    int32_t *pos = malloc((size_t)ni * 12);
    const struct jv *pthw = jget(ip, "positions_thw");
    int ok = it && iref && emb && pos && rows[0];
    for (uint32_t j = 0; j < nds; j++)
        ok &= rows[1 + j] != NULL;
    for (uint32_t i = 0, k = 0; ok && i < ni; i++) {
        for (int c = 0; c < 3; c++)
            pos[i * 3 + c] = (int32_t)jat(jat(pthw, c), (int)i)->num;
        if (it[i] != img_id)
            continue;
        for (uint32_t j = 0; j <= nds; j++)
            memcpy(emb + (size_t)i * Ein + (size_t)j * E, rows[j] + (size_t)k * E, (size_t)E * 4);
        it[i] = -1;
        k++;
    }
    if (ok) {
        struct lm_seq si = {it, ni, emb, pos, (int32_t)jget(ip, "next_position")->num, NULL, 0};
        rc = lm_prefill(lm, &si, 1, lg, &e);
        CHECK(rc == 0, "%s/%s: image prefill: %s / %s", cname, var, e.msg, e.detail);
        snprintf(what, sizeof what, "%s/%s image prompt", cname, var);
        if (!rc)
            cmp(what, lg, V, 0, iref, ni, V, tol_lm);
        if (!rc && lm_score(lm, lab, (uint32_t)nl, lp, &e) == 0)
            labels_cmp(what, jget(jget(cfg, "label_logprobs"), var), "sum", lp, nl);
        if (!rc && lm_score(lm, labe, (uint32_t)nl, lp, &e) == 0)
            labels_cmp(what, jget(jget(cfg, "label_logprobs"), var), "sum_with_end", lp, nl);
    } else {
        CHECK(0, "%s/%s: image prompt fixture data incomplete", cname, var);
    }
    for (int l = 0; l < nl; l++)
        free(lt[l]), free(lte[l]);
    for (int j = 0; j < 9; j++)
        free(rows[j]);
    free(tt), free(tref), free(lg), free(it), free(iref), free(emb), free(pos);
    lm_close(lm);
}

int main(void)
{
    const char *src = getenv("FOLIO_SOURCE_DIR"), *rel = getenv("FOLIO_PARITY_FIXTURES");
    snprintf(root, sizeof root, "%s/%s", src && *src ? src : ".",
             rel && *rel ? rel : "tests/fixtures/parity-qwen3vl");
    char why[1300];
    struct jv *m = jload_manifest(root, why, sizeof why);
    REQUIRE(m && jget(m, "images"), "%s", m ? "manifest has no images" : why);
    man = m;
    struct folio_err e = {0};
    REQUIRE(vp_open_device(&vk, &e) == 0, "vkr_open: %s", e.msg);
    tol_lm = ops_coopmat_available(vk) || ops_gemm_available(vk) ? 3e-3 : 1e-3;
    tol_vis = ops_coopmat_available(vk) || ops_gemm_available(vk) ? 3e-3 : 1e-4;
    const struct jv *cfgs = jget(m, "configs");
    /* pre-warm every variant's pipelines, then seal */
    struct vkr_pipeline_key keys[512];
    int nk = 0, variants = 0;
    for (int c = 0; c < cfgs->n; c++) {
        const char *kinds[2] = {"text_gguf", "mmproj_gguf"};
        for (int kd = 0; kd < 2; kd++) {
            const struct jv *g = jget(jat(cfgs, c), kinds[kd]);
            for (int k = 0; g && k < g->n; k++) {
                char path[1300];
                snprintf(path, sizeof path, "%s/%s", root, g->items[k]->str);
                struct gguf_model *gm = NULL;
                int rc = kd ? gguf_model_open_vision(path, &gm, &e)
                            : gguf_model_open_text(path, &gm, &e);
                CHECK(rc == 0, "%s: %s / %s", path, e.msg, e.detail);
                if (rc)
                    continue;
                nk += kd ? vis_pipeline_keys(vk, gm, keys + nk, 512 - nk)
                         : lm_pipeline_keys(vk, gm, 0, keys + nk, 512 - nk);
                gguf_model_close(gm);
            }
        }
    }
    struct vkr_stats s0;
    CHECK(vp_seal(vk, keys, nk, &s0, &e) == 0, "prewarm: %s", e.msg);
    for (int c = 0; c < cfgs->n; c++) {
        const struct jv *cfg = jat(cfgs, c), *tg = jget(cfg, "text_gguf"), *mg = jget(cfg, "mmproj_gguf");
        for (int k = 0; mg && k < mg->n; k++, variants++)
            run_vision(cfg, mg->keys[k]);
        for (int k = 0; tg && k < tg->n; k++, variants++)
            run_text(cfg, tg->keys[k]);
    }
    CHECK(variants >= 4, "only %d variants in the manifest", variants);
    vp_check_sealed(vk, &s0);
    vkr_close(vk);
    jfree(m);
    return tu_finish();
}
