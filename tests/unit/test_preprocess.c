/*
 * Image preprocessing against the parity kit (tests/fixtures/parity):
 *  - smart resize gives each test image's reference size (rounding only,
 *    downscale to max_pixels, upscale to min_pixels) and Python's
 *    half-to-even rounding on hand-made cases; an extreme aspect ratio and
 *    an empty image are refused with an error;
 *  - the bicubic resize equals Pillow's bytes (allowed: ±1 per value,
 *    the bound; the count of exact bytes is reported);
 *  - the patch matrix (merge-group order, 1176 columns) matches the
 *    reference within 1/255 per value before normalisation, and the
 *    folded 588-column layout equals either temporal half;
 *  - gray input equals the same pixels given as RGB.
 */
#include "tests/support/parity_root.h"
#include "tests/support/testutil.h"
#include "tests/engine/lm_json.h"
#include "common/common.h"
#include "engine/model/preprocess.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *load(const char *root, const char *rel, size_t want)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    uint8_t *b = NULL;
    size_t n = 0;
    struct folio_err e = {0};
    if (folio_read_file(path, 1u << 26, &b, &n, &e) != 0 || n != want) {
        CHECK(0, "fixture %s: %s (%zu bytes, want %zu)", path, e.msg, n, want);
        free(b);
        return NULL;
    }
    return b;
}

static void resize_cases(void)
{
    struct prep_config c = {0};
    struct folio_err e = {0};
    uint32_t oh = 0, ow = 0;
    /* 70 / 28 = 2.5 rounds to 2 (half to even) -> 56; 98 / 28 = 3.5 -> 4 -> 112 */
    CHECK(prep_smart_resize(70, 98, &c, &oh, &ow, &e) == 0 && oh == 56 && ow == 112,
          "70x98 -> %ux%u", oh, ow);
    /* 1024 x 1024 with the model's max_pixels: 37 * 28 = 1036 (reference §6.3) */
    CHECK(prep_smart_resize(1024, 1024, &c, &oh, &ow, &e) == 0 && oh == 1036 && ow == 1036,
          "1024 -> %ux%u", oh, ow);
    /* llama.cpp-like cap of 1600 merged tokens: 1024x1024 stays, 2000x2000 shrinks */
    c.max_pixels = 1600 * 28 * 28;
    CHECK(prep_smart_resize(2000, 2000, &c, &oh, &ow, &e) == 0 && (uint64_t)oh * ow <= c.max_pixels &&
              oh % 28 == 0 && ow % 28 == 0,
          "2000 capped -> %ux%u", oh, ow);
    c.max_pixels = 0;
    CHECK(prep_smart_resize(10, 3000, &c, &oh, &ow, &e) == FOLIO_EINVAL, "ratio 300 accepted");
    CHECK(strstr(e.msg, "aspect ratio") != NULL, "message: %s", e.msg);
    CHECK(prep_smart_resize(0, 30, &c, &oh, &ow, &e) == FOLIO_EINVAL, "empty accepted");
    uint8_t px[3] = {1, 2, 3}, o[3];
    CHECK(prep_resize_bicubic(px, 1, 1, 3, 4, o, 1, 1, &e) == FOLIO_EINVAL, "4 channels accepted");
    float pf[1176];
    CHECK(prep_patches(px, 1, 1, &c, 1, pf, &e) == FOLIO_EINVAL, "1x1 patches accepted");
}

int main(void)
{
    (void)jints;
    resize_cases();
    const char *src = getenv("FOLIO_SOURCE_DIR");
    char root[1024], mpath[1100];
    (void)src;
    tu_parity_root(root, sizeof root);
    snprintf(mpath, sizeof mpath, "%s/manifest.json", root);
    uint8_t *mb = NULL;
    size_t mn = 0;
    struct folio_err e = {0};
    int mrc = folio_read_file(mpath, 64u << 20, &mb, &mn, &e);
    REQUIRE(mrc == 0, "manifest: %s", e.msg);
    struct jv *man = jparse((const char *)mb, mn);
    free(mb);
    const struct jv *pp = jget(man, "preprocess"), *imgs = jget(man, "images");
    REQUIRE(pp && imgs && imgs->n >= 3, "manifest has no preprocess/images");
    struct prep_config c = {.min_pixels = (uint32_t)jget(pp, "min_pixels")->num,
                            .max_pixels = (uint32_t)jget(pp, "max_pixels")->num};
    for (int k = 0; k < 3; k++) {
        c.mean[k] = (float)jat(jget(pp, "image_mean"), k)->num;
        c.std[k] = (float)jat(jget(pp, "image_std"), k)->num;
    }
    for (int i = 0; i < imgs->n; i++) {
        const struct jv *im = jat(imgs, i);
        const char *name = jget(im, "name")->str;
        uint32_t w = (uint32_t)jget(im, "width")->num, h = (uint32_t)jget(im, "height")->num;
        uint32_t rw = (uint32_t)jget(im, "resized_width")->num;
        uint32_t rh = (uint32_t)jget(im, "resized_height")->num;
        uint32_t np = (uint32_t)jget(im, "n_patches")->num;
        uint8_t *rgb = load(root, jget(im, "rgb")->str, (size_t)w * h * 3);
        uint8_t *ref = load(root, jget(im, "resized_rgb")->str, (size_t)rw * rh * 3);
        float *pv = (float *)load(root, jget(im, "pixel_values")->str, (size_t)np * 1176 * 4);
        if (!rgb || !ref || !pv) {
            free(rgb);
            free(ref);
            free(pv);
            continue;
        }
        struct prep_image pi, p1;
        int rc = prep_image(rgb, w, h, (size_t)w * 3, 3, &c, 2, &pi, &e);
        CHECK(rc == 0, "%s: %s", name, e.msg);
        if (rc == 0) {
            CHECK(pi.width == rw && pi.height == rh && pi.n_patches == np &&
                      pi.grid_h * 14 == rh && pi.row_len == 1176,
                  "%s: %ux%u (%u patches) vs %ux%u (%u)", name, pi.width, pi.height,
                  pi.n_patches, rw, rh, np);
            size_t exact = 0, nb = (size_t)rw * rh * 3;
            int maxd = 0;
            for (size_t k = 0; k < nb && pi.width == rw && pi.height == rh; k++) {
                int d = abs((int)pi.resized[k] - (int)ref[k]);
                exact += d == 0;
                if (d > maxd)
                    maxd = d;
            }
            CHECK(maxd <= 1, "%s: resized bytes differ by up to %d", name, maxd);
            printf("%s: %ux%u -> %ux%u, %zu/%zu bytes exact, max diff %d\n", name, w, h, rw, rh,
                   exact, nb, maxd);
            double worst = 0;
            for (size_t r = 0; r < np && pi.n_patches == np; r++)
                for (int col = 0; col < 1176; col++) {
                    int ch = col / 392;
                    double d = fabs((double)pi.patches[r * 1176 + col] - pv[r * 1176 + col]) *
                               c.std[ch];
                    if (d > worst)
                        worst = d;
                }
            CHECK(worst <= 1.0 / 255 + 1e-6, "%s: patch values differ by %.3g (x std)", name,
                  worst);
            /* folded layout = either temporal half of the reference row */
            rc = prep_image(rgb, w, h, (size_t)w * 3, 3, &c, 1, &p1, &e);
            CHECK(rc == 0 && p1.row_len == 588, "%s folded: %s", name, e.msg);
            int same = 1;
            for (size_t r = 0; rc == 0 && r < np; r++)
                for (int col = 0; col < 588; col++) {
                    int ch = col / 196, q = col % 196;
                    float a = p1.patches[r * 588 + col];
                    same &= a == pi.patches[r * 1176 + ch * 392 + q] &&
                            a == pi.patches[r * 1176 + ch * 392 + 196 + q];
                }
            CHECK(same, "%s: folded rows differ from the temporal halves", name);
            if (rc == 0)
                prep_image_free(&p1);
            prep_image_free(&pi);
        }
        /* gray input = the same gray expanded to RGB */
        uint8_t *g = malloc((size_t)w * h), *g3 = malloc((size_t)w * h * 3);
        if (g && g3) {
            for (size_t k = 0; k < (size_t)w * h; k++)
                g[k] = g3[k * 3] = g3[k * 3 + 1] = g3[k * 3 + 2] = rgb[k * 3 + 1];
            struct prep_image a, b;
            int r1 = prep_image(g, w, h, w, 1, &c, 1, &a, &e);
            int r2 = prep_image(g3, w, h, (size_t)w * 3, 3, &c, 1, &b, &e);
            CHECK(r1 == 0 && r2 == 0 && memcmp(a.resized, b.resized, (size_t)a.width * a.height * 3) == 0,
                  "%s: gray and RGB-gray differ", name);
            if (!r1)
                prep_image_free(&a);
            if (!r2)
                prep_image_free(&b);
        }
        free(g);
        free(g3);
        free(rgb);
        free(ref);
        free(pv);
    }
    jfree(man);
    return tu_finish();
}
