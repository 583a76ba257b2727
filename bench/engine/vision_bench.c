/*
 * The vision tower's benchmark (`bench engine --vision`): a random tower of
 * the 7B shape (or Qwen3-VL-8B's, or a small one), one page of the given
 * size through it, ms per page and TFLOP/s.
 *
 * FLOPs for the benchmark's roofline follow docs/reference/qwen25vl.md §6.1 with
 * the folded patch kernel (588 inputs per patch) and the actual window
 * sizes of the page.
 */
#include "bench/engine/bench.h"
#include "bench/engine/bench_internal.h"
#include "bench/engine/synth.h"
#include "engine/model/preprocess.h"
#include "engine/quant/quant.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* FLOPs of one page (docs/reference/qwen25vl.md §6.1), folded patch kernel. */
static double page_flops(const struct gguf_vision_hparams *h, uint32_t gh, uint32_t gw)
{
    double N = (double)gh * gw, M = N / 4, D = h->n_embd, F = h->n_ff, MD = h->merger_dim;
    double lin = 2 * N * (4 * D * D + (h->use_silu ? 3 : 2) * D * F);
    uint32_t rows = gh / 2, cols = gw / 2, win = h->window_size ? h->window_size / 28 : 0;
    double win_sq = 0;
    if (win)
        for (uint32_t r = 0; r < rows; r += win)
            for (uint32_t c = 0; c < cols; c += win) {
                double n = 4.0 * ((r + win <= rows ? win : rows - r) * (c + win <= cols ? win : cols - c));
                win_sq += n * n;
            }
    double PC = 3.0 * h->patch_size * h->patch_size; /* folded kernel: 588 or 768 */
    double total = 2 * N * PC * D + 2 * M * (MD * MD + MD * h->proj_dim) * (1 + h->n_deepstack);
    for (uint32_t i = 0; i < h->n_layer; i++) {
        int full = !win || (i + 1) % h->n_wa_pattern == 0;
        total += lin + 4 * D * (full ? N * N : win_sq);
    }
    return total;
}

static void breakdown(struct vkr *vk, const char *dev, FILE *out)
{
    fprintf(out, "{\"bench\":\"engine_vision\",\"what\":\"breakdown\",%s", dev);
    vkr_print_timing_breakdown(vk, out);
    fputs("}\n", out);
}

int vis_bench(const struct vis_bench_opts *o, FILE *out, struct folio_err *err)
{
    uint32_t side = o->image ? o->image : (o->small ? 224 : 1024);
    uint32_t iters = o->iters ? o->iters : 3;
    struct vis_synth sy = {.qwen25 = 1, .n_embd = 1280, .n_layer = 32, .n_head = 16,
                           .n_ff = 3420, .proj_dim = 3584,
                           .mat_type = o->mat_type ? o->mat_type : QUANT_F16, .seed = 77};
    if (o->small)
        sy = (struct vis_synth){.qwen25 = 1, .n_embd = 128, .n_layer = 4, .n_head = 2,
                                .n_ff = 256, .proj_dim = 256, .mat_type = sy.mat_type, .seed = 77};
    if (o->qwen3) /* --family qwen3vl */
        q3_synth_shapes(o->small, NULL, &sy);
    struct vkr *vk = NULL;
    char dev[1200];
    int rc = bench_vkr_open(o->device, o->allow_cpu, "", &vk, dev, sizeof dev, err);
    if (rc)
        return rc;
    uint8_t *buf = NULL, *px = NULL;
    size_t len = 0;
    struct gguf_file *f = NULL;
    struct gguf_model *m = NULL;
    struct vis *v = NULL;
    float *emb = NULL;
    struct prep_image pi;
    memset(&pi, 0, sizeof pi);
    double t0 = folio_mono_ms();
    rc = vis_synth_gguf(&sy, &buf, &len, err);
    if (!rc)
        rc = gguf_open_memory(buf, len, &f, err);
    if (!rc) {
        rc = gguf_model_check(f, 1, &m, err);
        f = NULL;
    }
    double synth_ms = folio_mono_ms() - t0;
    struct vkr_pipeline_key keys[VIS_PIPELINE_KEYS_MAX];
    int nk = rc ? 0 : vis_pipeline_keys(vk, m, keys, VIS_PIPELINE_KEYS_MAX), failed = 0;
    t0 = folio_mono_ms();
    if (!rc)
        rc = vkr_prewarm(vk, keys, nk, &failed, err);
    double prewarm_ms = folio_mono_ms() - t0;
    if (!rc)
        vkr_seal(vk);
    /* a page with structure (bands and noise) of side x side */
    px = malloc((size_t)side * side * 3);
    if (!rc && !px)
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (size_t i = 0; !rc && i < (size_t)side * side * 3; i++)
        px[i] = (uint8_t)(((i / (side * 3)) % 40 < 4 ? 30 : 220) ^ (i * 2654435761u >> 29));
    struct prep_config pc = {.patch = o->qwen3 ? 16 : 0};
    if (o->qwen3) /* Qwen3-VL's processor: mean/std 0.5 (the tower's own file says so too) */
        for (int i = 0; i < 3; i++)
            pc.mean[i] = pc.std[i] = 0.5f;
    t0 = folio_mono_ms();
    if (!rc)
        rc = prep_image_resize(px, side, side, (size_t)side * 3, 3, &pc, &pi, err);
    double prep_ms = folio_mono_ms() - t0;
    struct vis_config cfg = {.max_patches = pi.n_patches, .gpu_weights = o->gpu_weights};
    t0 = folio_mono_ms();
    if (!rc)
        rc = vis_open(vk, m, &cfg, &v, err);
    double load_ms = folio_mono_ms() - t0;
    if (!rc && !(emb = malloc((size_t)pi.n_patches / 4 * vis_out_dim(v) * 4)))
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    uint64_t wb = 0, ab = 0;
    if (!rc)
        vis_memory(v, &wb, &ab);
    if (!rc)
        fprintf(out, "{\"bench\":\"engine_vision\",\"what\":\"setup\",%s,\"image\":%u,"
                "\"resized\":[%u,%u],\"patches\":%u,\"tokens\":%u,\"mat_type\":\"%s\","
                "\"synth_ms\":%.0f,\"prewarm_ms\":%.0f,\"load_ms\":%.0f,\"preprocess_ms\":%.1f,"
                "\"weights_bytes\":%" PRIu64 ",\"activation_bytes\":%" PRIu64 "}\n", dev, side,
                pi.width, pi.height, pi.n_patches, pi.n_patches / 4, quant_type_name(sy.mat_type),
                synth_ms, prewarm_ms, load_ms, prep_ms, wb, ab);
    double best = INFINITY, sum = 0, wall_best = INFINITY;
    for (uint32_t it = 0; it <= iters && !rc; it++) {
        double w0 = folio_mono_ms();
        /* the engine's input: the resized bytes (vlm_classify_batch) */
        struct vis_image im = {.grid_h = pi.grid_h, .grid_w = pi.grid_w, .out = emb,
                               .rgb = pi.resized};
        rc = vis_encode_batch(v, &im, 1, err);
        double wall = folio_mono_ms() - w0;
        if (rc || it == 0)
            continue; /* first pass: warm-up */
        struct vkr_timing *t = malloc(8192 * sizeof *t);
        double g = 0;
        int n = t ? vkr_last_timings(vk, t, 8192) : 0;
        for (int i = 0; i < n && i < 8192; i++)
            g += t[i].ms;
        free(t);
        if (g < best)
            best = g;
        if (wall < wall_best)
            wall_best = wall;
        sum += wall;
    }
    if (!rc) {
        double fl = page_flops(vis_hparams(v), pi.grid_h, pi.grid_w);
        int nan = 0;
        for (size_t i = 0; i < (size_t)pi.n_patches / 4 * vis_out_dim(v); i++)
            nan |= !isfinite(emb[i]);
        fprintf(out, "{\"bench\":\"engine_vision\",\"what\":\"tower\",%s,\"image\":%u,"
                "\"patches\":%u,\"tokens\":%u,\"iters\":%u,\"wall_ms_best\":%.2f,"
                "\"wall_ms_mean\":%.2f,\"gpu_ms_best\":%.2f,\"tflop\":%.3f,"
                "\"tflops_wall\":%.2f,\"pages_per_s\":%.2f,\"finite\":%s,\"coopmat\":%s}\n",
                dev, side, pi.n_patches, pi.n_patches / 4, iters, wall_best, sum / iters, best,
                fl / 1e12, fl / (wall_best * 1e-3) / 1e12, 1000.0 / wall_best,
                nan ? "false" : "true", ops_coopmat_available(vk) ? "true" : "false");
        breakdown(vk, dev, out);
    }
    free(emb);
    prep_image_free(&pi);
    free(px);
    vis_close(v);
    gguf_model_close(m);
    gguf_close(f);
    free(buf);
    vkr_close(vk);
    return rc;
}
