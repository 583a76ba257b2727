/*
 * What the vision-tower parity tests share (vision_parity_cases.h for
 * Qwen2-VL / Qwen2.5-VL, qwen3vl_parity.c for Qwen3-VL): fixture files of
 * a known size, the reference's two-frame pixel rows folded to folio's
 * still-image layout, a manifest image by name, the max-error bound
 * every comparison uses (max|d| <= tol * max|ref|), the engine's input
 * (a page's bytes) held to the f32 rows' outputs, and the session
 * around the cases: the test device, pre-warm and seal, and nothing built
 * after seal nor any validation message at the end.
 */
#ifndef FOLIO_TEST_VISION_PARITY_UTIL_H
#define FOLIO_TEST_VISION_PARITY_UTIL_H

#include "tests/engine/lm_json.h"
#include "tests/support/testutil.h"
#include "common/common.h"
#include "engine/model/preprocess.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* root/rel, which must be exactly want bytes (malloc'd; NULL and a failed
 * check otherwise). */
static inline void *vp_load(const char *root, const char *rel, size_t want)
{
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    uint8_t *b = NULL;
    size_t n = 0;
    struct folio_err e = {0};
    if (folio_read_file(path, 1u << 28, &b, &n, &e) != 0 || n != want) {
        CHECK(0, "fixture %s: %s (%zu bytes, want %zu)", path, e.msg, n, want);
        free(b);
        return NULL;
    }
    return b;
}

/* got: rows of stride gs, compared at column offset go over w columns with
 * ref (rows x w packed); checks max|d| <= tol * max|ref| and returns
 * max|d| / max|ref|. */
static inline double vp_cmp(const char *what, const float *got, size_t gs, size_t go,
                            const float *ref, size_t rows, size_t w, double tol)
{
    double mx = 0, md = 0;
    size_t at = 0, ga = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < w; j++) {
            double a = got[r * gs + go + j], b = ref[r * w + j];
            mx = fmax(mx, fabs(b));
            if (!(fabs(a - b) <= md)) {
                md = fabs(a - b);
                at = r * w + j;
                ga = r * gs + go + j;
            }
        }
    CHECK(md <= tol * mx, "%s: max|d| %.3g at %zu (got %g, ref %g), max|ref| %.3g, bound %.3g",
          what, md, at, rows && w ? got[ga] : 0.0, rows && w ? ref[at] : 0.0, mx, tol * mx);
    return mx > 0 ? md / mx : md;
}

/* The reference's rows (c, t, py, px) of two temporal frames -> folio's
 * 3 x patch x patch columns (frame 0), checking frame 1 equals it. */
static inline float *vp_fold(const float *pv, uint32_t np, uint32_t patch)
{
    const uint32_t pp = patch * patch, cols = 3 * pp;
    float *o = malloc((size_t)np * cols * 4);
    int same = 1;
    for (uint32_t r = 0; o && r < np; r++)
        for (uint32_t col = 0; col < cols; col++) {
            uint32_t ch = col / pp, q = col % pp;
            float a = pv[(size_t)r * 2 * cols + ch * 2 * pp + q];
            same &= a == pv[(size_t)r * 2 * cols + ch * 2 * pp + pp + q];
            o[(size_t)r * cols + col] = a;
        }
    CHECK(same, "reference pixel_values: the two frames differ");
    return o;
}

/* The page pi as the engine hands it over, its resized bytes (op_patchify
 * makes the rows on the device), must give got, what its f32 rows gave,
 * bit for bit: the rows are the same (width: floats a merged row). */
static inline void vp_bytes_same(struct vis *v, const struct prep_image *pi, const float *got,
                                 uint32_t width, const char *what)
{
    size_t n = (size_t)pi->grid_h * pi->grid_w / 4 * width;
    float *got8 = malloc(n * sizeof *got8);
    struct folio_err e = {0};
    struct vis_image im = {.grid_h = pi->grid_h, .grid_w = pi->grid_w, .out = got8,
                           .rgb = pi->resized};
    int rc = got8 ? vis_encode_batch(v, &im, 1, &e) : FOLIO_ENOMEM;
    CHECK(rc == 0, "%s as bytes: %s", what, e.msg);
    CHECK(rc || memcmp(got, got8, n * sizeof *got8) == 0,
          "%s: the page's bytes and its f32 rows give different outputs", what);
    free(got8);
}

static inline const struct jv *vp_image(const struct jv *man, const char *name)
{
    const struct jv *imgs = jget(man, "images");
    for (int i = 0; imgs && i < imgs->n; i++)
        if (!strcmp(jget(jat(imgs, i), "name")->str, name))
            return jat(imgs, i);
    return NULL;
}

/* The test device: $FOLIO_TEST_DEVICE, else lavapipe (a CPU device
 * allowed), validation as the environment asks, no pipeline cache. */
static inline int vp_open_device(struct vkr **vk, struct folio_err *e)
{
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config vc = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                            .validate = -1, .cache_dir = ""};
    return vkr_open(&vc, vk, e);
}

/* 1 when the test device runs the tower's f16 GEMM path but not its f16
 * K/V on its own (no workgroup-scope attention): lavapipe 26, where
 * FOLIO_VIS_KV16=1 runs the GPU's form. */
static inline int vp_gemm_device(void)
{
    struct folio_err e = {0};
    struct vkr *vk = NULL;
    if (vp_open_device(&vk, &e) != 0)
        return 0;
    int r = ops_gemm_available(vk) && !op_attention_available(vk, OP_ATTN_CM2, 16, OP_ATTN_IO_KV16);
    vkr_close(vk);
    return r;
}

/* Pre-warms keys and seals the device; *s0 gets the stats after seal. */
static inline int vp_seal(struct vkr *vk, const struct vkr_pipeline_key *keys, int nk,
                          struct vkr_stats *s0, struct folio_err *e)
{
    int failed = -1;
    int rc = vkr_prewarm(vk, keys, nk, &failed, e);
    if (!rc && failed)
        rc = folio_err_set(e, FOLIO_EDEVICE, "%d pipelines failed to build", failed);
    if (rc)
        return rc;
    vkr_seal(vk);
    vkr_get_stats(vk, s0);
    return 0;
}

/* After the cases: no pipeline requested or built after seal (s0), no
 * validation message. */
static inline void vp_check_sealed(struct vkr *vk, const struct vkr_stats *s0)
{
    struct vkr_stats s;
    vkr_get_stats(vk, &s);
    CHECK(s.pipeline_requests_after_seal == 0 && s.pipelines_built == s0->pipelines_built,
          "pipelines after seal: %llu requests, %u -> %u built",
          (unsigned long long)s.pipeline_requests_after_seal, s0->pipelines_built,
          s.pipelines_built);
    CHECK(s.validation_messages == 0, "%llu validation messages",
          (unsigned long long)s.validation_messages);
}

#endif
