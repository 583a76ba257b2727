/* Row ops: gather from every weight type, scatter, concat2x2, patchify. See ops_test.h. */
#include "tests/engine/ops/ops_test.h"
#include "engine/model/preprocess.h"
#include "engine/model/vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void test_rows(struct T *t)
{
    static const int types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0,
                                QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    const uint32_t rows = 150, nid = 23;
    for (size_t ti = 0; ti < 10; ti++) {
        /* then the float types again with rows of 37 (not a multiple of 4) */
        int ty = types[ti < 7 ? ti : ti - 7];
        const uint32_t k = ti < 7 ? 256 : 37;
        uint64_t rb = quant_row_bytes(ty, k);
        float *wf = malloc(sizeof(float) * rows * k), *wd = malloc(sizeof(float) * rows * k);
        uint8_t *wq = malloc(rb * rows);
        float *g = malloc(sizeof(float) * nid * k);
        int32_t ids[23];
        fill(t, wf, (size_t)rows * k, 1.0f);
        for (uint32_t r = 0; r < rows; r++) {
            quant_quantize_row(ty, wf + (size_t)r * k, wq + rb * r, k);
            quant_dequantize_row(ty, wq + rb * r, wd + (size_t)r * k, k);
        }
        for (uint32_t i = 0; i < nid; i++)
            ids[i] = (int32_t)((frand(t) + 1.0f) * 0.5f * (rows - 1));
        ids[0] = 0, ids[1] = (int32_t)rows - 1, ids[2] = ids[3];
        vkr_arena_reset(t->act);
        struct vkr_tensor tab = put(t, t->w, wq, rb * rows);
        struct vkr_tensor it = put(t, t->act, ids, sizeof ids);
        struct vkr_tensor yt = put(t, t->act, NULL, sizeof(float) * nid * k);
        RUN(t, op_gather(c, &(struct op_gather){.table = tab, .wtype = ty, .rows = rows, .k = k,
                                                .ids = it, .n_ids = nid, .y = yt}, e));
        get(t, yt, g, sizeof(float) * nid * k);
        int bad = 0;
        /* Bound: 1e-6 relative (same bytes, same formula; only the order of
         * the scale products may differ from the C dequantiser). */
        for (uint32_t i = 0; i < nid; i++)
            for (uint32_t j = 0; j < k; j++) {
                float r = wd[(size_t)ids[i] * k + j], x = g[(size_t)i * k + j];
                if (!(fabsf(x - r) <= 1e-6f * fabsf(r) + 1e-7f))
                    bad++;
            }
        CHECK(bad == 0, "gather %s: %d of %u values wrong", quant_type_name(ty), bad, nid * k);
        free(wf), free(wd), free(wq), free(g);
    }
    /* scatter: 5 rows into a sequence of 12, one index out of range
     * (skipped); then 70 rows of 256 into 90 (70 KiB of destination: many
     * ranges with 16 KiB bindings) */
    static const uint32_t sc_shapes[][3] = {{48, 5, 12}, {256, 70, 90}};
    for (int si = 0; si < 2; si++) {
        const uint32_t width = sc_shapes[si][0], n = sc_shapes[si][1], dst_rows = sc_shapes[si][2];
        float *src = malloc(sizeof(float) * n * width), *dst = malloc(sizeof(float) * dst_rows * width);
        float *ref = malloc(sizeof(float) * dst_rows * width), *got = malloc(sizeof(float) * dst_rows * width);
        int32_t *idx = malloc(sizeof(int32_t) * n);
        for (uint32_t i = 0; i < n; i++)
            idx[i] = (int32_t)((i * 37 + 3) % (dst_rows + 4)); /* a few out of range */
        if (si == 0)
            memcpy(idx, (int32_t[5]){3, 4, 5, 11, 40}, sizeof(int32_t) * 5);
        fill(t, src, (size_t)n * width, 1.0f);
        fill(t, dst, (size_t)dst_rows * width, 1.0f);
        memcpy(ref, dst, sizeof(float) * dst_rows * width);
        ops_ref_scatter(src, idx, n, width, ref, dst_rows);
        vkr_arena_reset(t->act);
        struct vkr_tensor st = put(t, t->act, src, sizeof(float) * n * width);
        struct vkr_tensor xt = put(t, t->act, idx, sizeof(int32_t) * n);
        struct vkr_tensor dt = put(t, t->act, dst, sizeof(float) * dst_rows * width);
        RUN(t, op_scatter(c, st, xt, n, width, dt, dst_rows, e));
        get(t, dt, got, sizeof(float) * dst_rows * width);
        CHECK(memcmp(got, ref, sizeof(float) * dst_rows * width) == 0,
              "scatter %ux%u into %u differs from the reference", n, width, dst_rows);
        free(src), free(dst), free(ref), free(got), free(idx);
    }
    /* concat2x2 over a 4 x 6 grid of width 5, then 12 x 10 of width 64
     * (30 KiB: bands of grid rows with 16 KiB bindings) */
    static const uint32_t cc_shapes[][3] = {{4, 6, 5}, {12, 10, 64}};
    for (int si = 0; si < 2; si++) {
        const uint32_t gh = cc_shapes[si][0], gw = cc_shapes[si][1], w = cc_shapes[si][2];
        size_t nc = (size_t)gh * gw * w;
        float *cx = malloc(sizeof(float) * nc), *cy = malloc(sizeof(float) * nc);
        float *cr = malloc(sizeof(float) * nc);
        fill(t, cx, nc, 1.0f);
        ops_ref_concat2x2(cx, cr, gh, gw, w);
        vkr_arena_reset(t->act);
        struct vkr_tensor cxt = put(t, t->act, cx, sizeof(float) * nc);
        struct vkr_tensor cyt = put(t, t->act, NULL, sizeof(float) * nc);
        RUN(t, op_concat2x2(c, cxt, cyt, gh, gw, w, e));
        get(t, cyt, cy, sizeof(float) * nc);
        CHECK(memcmp(cy, cr, sizeof(float) * nc) == 0, "concat2x2 %ux%ux%u differs from the "
              "reference", gh, gw, w);
        free(cx), free(cy), free(cr);
    }
}

/* Host memory the group cannot run without: as put(), the test stops. */
static void must(const void *p)
{
    if (!p) {
        fprintf(stderr, "FAIL: out of host memory\n");
        exit(1);
    }
}

/* One page's rows as the tower's input expects them: prep_patches' rows
 * (the host's truth) with their merge groups in window order
 * (vis_window_index), or raster order for win 0. */
static void host_rows(const uint8_t *rgb, uint32_t w, uint32_t h, const struct prep_config *pc,
                      uint32_t win, float *rows, float *out)
{
    const uint32_t P = pc->patch, G = 4, PC = 3 * P * P, mr = h / (2 * P), mc = w / (2 * P);
    struct folio_err e = {0};
    CHECK(prep_patches(rgb, w, h, pc, 1, rows, &e) == 0, "prep_patches %ux%u: %s", w, h, e.msg);
    int32_t *idx = malloc(sizeof *idx * mr * mc);
    must(idx);
    vis_window_index(mr, mc, win, idx, NULL, NULL);
    for (uint32_t i = 0; i < mr * mc; i++)
        memcpy(out + (size_t)i * G * PC, rows + (size_t)idx[i] * G * PC, sizeof *out * G * PC);
    free(idx);
}

void test_patchify(struct T *t)
{
    /* Pages of odd merged grids (neither side a multiple of the window,
     * one side a single merged row or column) for each family's patch:
     * Qwen2.5-VL (14 px, windows of 4 merged groups), Qwen2-VL (14 px, no
     * windows), Qwen3-VL (16 px, mean/std 0.5). Two pages share each
     * pass, the second after the first's bytes and rows as a batch lays
     * them out (bytes from a 256-byte boundary, rows right after), so the
     * offsets are exercised; the ranged run (16 KiB bindings) splits each
     * page into many dispatches. Bound: equal bytes, since the values are
     * the host's own table. */
    static const struct { uint32_t patch, win, w[2], h[2]; } cases[] = {
        {14, 4, {196, 28}, {140, 252}}, {14, 0, {84, 140}, {56, 28}}, {16, 0, {160, 32}, {96, 224}},
        {14, 4, {252, 112}, {196, 56}}};
    struct folio_rng rng = {0x5eedfacecafe1234ull}; /* its own: other groups keep their inputs */
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const uint32_t P = cases[ci].patch, PC = 3 * P * P;
        struct prep_config pc = {.patch = P, .merge = 2};
        if (P == 16)
            for (int ch = 0; ch < 3; ch++)
                pc.mean[ch] = pc.std[ch] = 0.5f;
        float lut[3 * 256];
        prep_norm_table(&pc, lut);
        uint32_t np[2], nb[2];
        uint64_t off[2] = {0, 0};
        uint8_t *img[2];
        for (int j = 0; j < 2; j++) {
            np[j] = (cases[ci].w[j] / P) * (cases[ci].h[j] / P);
            nb[j] = cases[ci].w[j] * cases[ci].h[j] * 3;
            img[j] = malloc(nb[j]);
            must(img[j]);
            for (uint32_t b = 0; b < nb[j]; b++)
                img[j][b] = (uint8_t)(folio_rng_next(&rng) >> 56);
        }
        img[0][0] = 0, img[0][1] = 255; /* the table's ends */
        off[1] = (nb[0] + 255) / 256 * 256;
        size_t n = (size_t)(np[0] + np[1]) * PC;
        float *got = malloc(sizeof *got * n), *want = malloc(sizeof *want * n);
        float *ref = malloc(sizeof *ref * n), *tmp = malloc(sizeof *tmp * n);
        must(got), must(want), must(ref), must(tmp);
        vkr_arena_reset(t->act);
        struct vkr_tensor rt = put(t, t->act, NULL, off[1] + nb[1]);
        struct vkr_tensor lt = put(t, t->act, lut, sizeof lut);
        struct vkr_tensor yt = put(t, t->act, NULL, sizeof *got * n);
        struct folio_err ue = {0};
        for (int j = 0; j < 2; j++)
            CHECK(vkr_upload(t->vk, rt, off[j], img[j], nb[j], &ue) == 0, "upload: %s", ue.msg);
        struct op_patchify a[2];
        for (int j = 0; j < 2; j++) {
            a[j] = (struct op_patchify){.rgb = rt, .lut = lt, .y = yt, .rgb_off = off[j],
                                        .row0 = j ? np[0] : 0, .width = cases[ci].w[j],
                                        .height = cases[ci].h[j], .patch = P, .merge = 2,
                                        .win = cases[ci].win};
            size_t r0 = j ? (size_t)np[0] * PC : 0;
            host_rows(img[j], a[j].width, a[j].height, &pc, a[j].win, tmp, want + r0);
            ops_ref_patchify(&a[j], img[j], lut, ref + r0);
        }
        RUN(t, op_patchify(c, &a[0], e) || op_patchify(c, &a[1], e));
        get(t, yt, got, sizeof *got * n);
        CHECK(memcmp(ref, want, sizeof *ref * n) == 0, "patchify reference (patch %u, win %u) "
              "differs from prep_patches' rows in window order", P, cases[ci].win);
        size_t bad = 0, at = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&got[i], &want[i], sizeof got[i]) != 0 && bad++ == 0)
                at = i;
        CHECK(bad == 0, "patchify %ux%u + %ux%u (patch %u, win %u): %zu of %zu values differ "
              "from prep_patches', first row %zu column %zu (%g, want %g)", a[0].width,
              a[0].height, a[1].width, a[1].height, P, cases[ci].win, bad, n, at / PC, at % PC,
              (double)got[at], (double)want[at]);
        free(got), free(want), free(ref), free(tmp), free(img[0]), free(img[1]);
    }
    /* an image that is not whole merged groups is refused, and with small
     * bindings so is one whose patch row's pixels exceed one */
    vkr_arena_reset(t->act);
    struct vkr_tensor rt = put(t, t->act, NULL, 420 * 56 * 3), lt = put(t, t->act, NULL, 3072);
    struct vkr_tensor yt = put(t, t->act, NULL, 30 * 4 * 588 * 4);
    struct op_patchify bad = {.rgb = rt, .lut = lt, .y = yt, .width = 42, .height = 28,
                              .patch = 14, .merge = 2};
    struct vkr_cmd *c = NULL;
    struct folio_err e = {0};
    if (vkr_cmd_begin(t->vk, &c, &e) != 0) {
        CHECK(0, "begin: %s", e.msg);
        return;
    }
    CHECK(op_patchify(c, &bad, &e) == FOLIO_EINVAL, "a 42x28 image was accepted");
    bad.width = 420; /* 14 pixel rows of 420 px: 17,640 bytes */
    int rc = op_patchify(c, &bad, &e);
    if (vkr_limits(t->vk)->max_range < 17640 + 512)
        CHECK(rc == FOLIO_ELIMIT, "a patch row over the binding range: rc %d", rc);
    else
        CHECK(rc == 0, "patchify 420x28: %s", e.msg);
    vkr_cmd_abort(c);
}
