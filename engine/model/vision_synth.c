/*
 * Synthetic vision towers (a complete mmproj GGUF in memory, written with
 * folio's own GGUF writer) and the vision benchmark.
 *
 * Weights: rows ~ U(-1,1)·sqrt(3/k) keep unit variance through every
 * projection; norm weights 1, biases small. As in lm_synth.c, each tensor
 * repeats a pool of 64 random rows so the 7B shape (677 M parameters) is
 * made in seconds; the GPU still reads every byte, which is what the
 * benchmark measures.
 *
 * FLOPs for the benchmark's roofline follow reference/qwen25vl.md §6.1 with
 * the folded patch kernel (588 inputs per patch) and the actual window
 * sizes of the page.
 */
#include "common/rng.h"
#include "engine/model/gguf_write.h"
#include "engine/model/preprocess.h"
#include "engine/model/quant.h"
#include "engine/model/qwen3vl.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"

#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum fill { F_MAT, F_ONE, F_BIAS };

static int add(struct gguf_writer *w, struct folio_rng *r, int type, enum fill how, uint32_t nd,
               const uint64_t *ne, struct folio_err *err, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));

static int add(struct gguf_writer *w, struct folio_rng *r, int type, enum fill how, uint32_t nd,
               const uint64_t *ne, struct folio_err *err, const char *fmt, ...)
{
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    uint64_t k = ne[0], rows = 1;
    for (uint32_t i = 1; i < nd; i++)
        rows *= ne[i];
    if (nd == 4) { /* patch kernel: rows of 588 */
        k = ne[0] * ne[1] * ne[2];
        rows = ne[3];
    }
    uint64_t rb = quant_row_bytes(type, k), pool = rows < 64 ? rows : 64;
    uint8_t *data = malloc(rb * rows);
    float *row = malloc(k * sizeof *row);
    int rc = data && row ? 0 : folio_err_set(err, FOLIO_ENOMEM, "synthetic tower: out of host "
                                             "memory for %s", name);
    float sc = sqrtf(3.0f / (float)k);
    for (uint64_t i = 0; i < pool && !rc; i++) {
        for (uint64_t j = 0; j < k; j++)
            row[j] = how == F_MAT ? folio_rng_signed(r) * sc : how == F_ONE ? 1.0f + 0.05f * folio_rng_signed(r)
                                                                 : 0.02f * folio_rng_signed(r);
        rc = quant_quantize_row(type, row, data + i * rb, (int64_t)k);
    }
    for (uint64_t i = pool; i < rows && !rc; i++)
        memcpy(data + i * rb, data + (i % pool) * rb, rb);
    if (!rc && gguf_w_tensor(w, name, type, nd, ne, data))
        rc = folio_err_set(err, FOLIO_ENOMEM, "synthetic tower: cannot add %s", name);
    free(data);
    free(row);
    return rc;
}

/* The Qwen3-VL tower as llama.cpp's converter lays it out (gguf_model.c
 * check_vision_q3). */
static int synth_q3(struct gguf_writer *w, const struct vis_synth *s, struct folio_err *err)
{
    uint32_t E = s->n_embd, F = s->n_ff, O = s->proj_dim, M = E * 4, P = 16;
    int mt = s->mat_type ? s->mat_type : QUANT_F16, rc = 0;
    if (!s->pos_side || s->n_deepstack > 8)
        return folio_err_set(err, FOLIO_EINVAL, "synthetic tower: Qwen3-VL shape");
    gguf_w_str(w, "clip.projector_type", "qwen3vl_merger");
    gguf_w_bool(w, "clip.use_gelu", 1);
    gguf_w_u32(w, "clip.vision.image_size", s->pos_side * P);
    gguf_w_u32(w, "clip.vision.patch_size", P);
    gguf_w_u32(w, "clip.vision.spatial_merge_size", 2);
    gguf_w_u32(w, "clip.vision.embedding_length", E);
    gguf_w_u32(w, "clip.vision.feed_forward_length", F);
    gguf_w_u32(w, "clip.vision.block_count", s->n_layer);
    gguf_w_u32(w, "clip.vision.attention.head_count", s->n_head);
    gguf_w_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    gguf_w_u32(w, "clip.vision.projection_dim", O);
    static const float half[3] = {0.5f, 0.5f, 0.5f};
    gguf_w_array(w, "clip.vision.image_mean", GGUF_F32, half, 3);
    gguf_w_array(w, "clip.vision.image_std", GGUF_F32, half, 3);
    uint8_t *flags = calloc(s->n_layer ? s->n_layer : 1, 1);
    if (!flags)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t j = 0; j < s->n_deepstack; j++)
        if (s->deepstack[j] < s->n_layer)
            flags[s->deepstack[j]] = 1;
    if (s->n_deepstack)
        gguf_w_array(w, "clip.vision.is_deepstack_layers", GGUF_BOOL, flags, s->n_layer);
    struct folio_rng r = {s->seed ? s->seed : 0x5eed};
    uint64_t pk[4] = {P, P, 3, E}, vE[1] = {E}, vF[1] = {F}, vM[1] = {M}, vO[1] = {O}, v3[1] = {3 * (uint64_t)E};
    uint64_t mE3[2] = {E, 3 * (uint64_t)E}, mEE[2] = {E, E}, mEF[2] = {E, F}, mFE[2] = {F, E},
             mMM[2] = {M, M}, mMO[2] = {M, O}, pt[2] = {E, (uint64_t)s->pos_side * s->pos_side};
    int kt = mt == QUANT_BF16 ? QUANT_F32 : mt;
    rc = add(w, &r, kt, F_MAT, 4, pk, err, "v.patch_embd.weight");
    if (!rc)
        rc = add(w, &r, kt, F_MAT, 4, pk, err, "v.patch_embd.weight.1");
    if (!rc)
        rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.patch_embd.bias");
    if (!rc) /* the table's rows ~ U(-1,1) like an embedding, not a projection */
        rc = add(w, &r, mt, F_ONE, 2, pt, err, "v.position_embd.weight");
    for (uint32_t i = 0; i < s->n_layer && !rc; i++) {
        rc = add(w, &r, QUANT_F32, F_ONE, 1, vE, err, "v.blk.%u.ln1.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.ln1.bias", i);
        if (!rc)
            rc = add(w, &r, mt, F_MAT, 2, mE3, err, "v.blk.%u.attn_qkv.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, v3, err, "v.blk.%u.attn_qkv.bias", i);
        if (!rc)
            rc = add(w, &r, mt, F_MAT, 2, mEE, err, "v.blk.%u.attn_out.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.attn_out.bias", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_ONE, 1, vE, err, "v.blk.%u.ln2.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.ln2.bias", i);
        if (!rc)
            rc = add(w, &r, mt, F_MAT, 2, mEF, err, "v.blk.%u.ffn_up.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vF, err, "v.blk.%u.ffn_up.bias", i);
        if (!rc)
            rc = add(w, &r, mt, F_MAT, 2, mFE, err, "v.blk.%u.ffn_down.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.ffn_down.bias", i);
    }
    if (!rc)
        rc = add(w, &r, QUANT_F32, F_ONE, 1, vE, err, "v.post_ln.weight");
    if (!rc)
        rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.post_ln.bias");
    if (!rc)
        rc = add(w, &r, mt, F_MAT, 2, mMM, err, "mm.0.weight");
    if (!rc)
        rc = add(w, &r, QUANT_F32, F_BIAS, 1, vM, err, "mm.0.bias");
    if (!rc)
        rc = add(w, &r, mt, F_MAT, 2, mMO, err, "mm.2.weight");
    if (!rc)
        rc = add(w, &r, QUANT_F32, F_BIAS, 1, vO, err, "mm.2.bias");
    for (uint32_t i = 0; i < s->n_layer && !rc; i++) {
        if (!flags[i])
            continue;
        rc = add(w, &r, QUANT_F32, F_ONE, 1, vM, err, "v.deepstack.%u.norm.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vM, err, "v.deepstack.%u.norm.bias", i);
        if (!rc)
            rc = add(w, &r, mt, F_MAT, 2, mMM, err, "v.deepstack.%u.fc1.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vM, err, "v.deepstack.%u.fc1.bias", i);
        if (!rc)
            rc = add(w, &r, mt, F_MAT, 2, mMO, err, "v.deepstack.%u.fc2.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vO, err, "v.deepstack.%u.fc2.bias", i);
    }
    free(flags);
    return rc;
}

int vis_synth_gguf(const struct vis_synth *s, uint8_t **out, size_t *len, struct folio_err *err)
{
    struct gguf_writer *w = NULL;
    int rc = gguf_writer_new(3, 32, &w, err);
    if (rc)
        return rc;
    if (s->qwen3) {
        gguf_w_str(w, "general.architecture", "clip");
        gguf_w_str(w, "general.type", "mmproj");
        gguf_w_bool(w, "clip.has_vision_encoder", 1);
        rc = synth_q3(w, s, err);
        if (!rc)
            rc = gguf_w_finish(w, out, len, err);
        gguf_writer_free(w);
        return rc;
    }
    uint32_t E = s->n_embd, F = s->n_ff, O = s->proj_dim, M = E * 4;
    int v25 = s->qwen25, mt = s->mat_type ? s->mat_type : QUANT_F16;
    gguf_w_str(w, "general.architecture", "clip");
    gguf_w_str(w, "general.type", "mmproj");
    gguf_w_bool(w, "clip.has_vision_encoder", 1);
    gguf_w_str(w, "clip.projector_type", v25 ? "qwen2.5vl_merger" : "qwen2vl_merger");
    if (v25)
        gguf_w_bool(w, "clip.use_silu", 1);
    gguf_w_u32(w, "clip.vision.image_size", 560);
    gguf_w_u32(w, "clip.vision.patch_size", 14);
    gguf_w_u32(w, "clip.vision.embedding_length", E);
    gguf_w_u32(w, "clip.vision.feed_forward_length", F);
    gguf_w_u32(w, "clip.vision.block_count", s->n_layer);
    gguf_w_u32(w, "clip.vision.attention.head_count", s->n_head);
    gguf_w_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    gguf_w_u32(w, "clip.vision.projection_dim", O);
    static const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    static const float stdv[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    gguf_w_array(w, "clip.vision.image_mean", GGUF_F32, mean, 3);
    gguf_w_array(w, "clip.vision.image_std", GGUF_F32, stdv, 3);
    if (v25)
        gguf_w_u32(w, "clip.vision.n_wa_pattern", s->n_layer >= 8 ? 8 : 2);
    struct folio_rng r = {s->seed ? s->seed : 0x5eed};
    uint64_t pk[4] = {14, 14, 3, E}, vE[1] = {E}, vF[1] = {F}, vM[1] = {M}, vO[1] = {O};
    uint64_t mEE[2] = {E, E}, mEF[2] = {E, F}, mFE[2] = {F, E}, mMM[2] = {M, M}, mMO[2] = {M, O};
    int pt = mt == QUANT_BF16 ? QUANT_F32 : mt; /* the converter's patch-kernel rule */
    rc = add(w, &r, pt, F_MAT, 4, pk, err, "v.patch_embd.weight");
    if (!rc)
        rc = add(w, &r, pt, F_MAT, 4, pk, err, "v.patch_embd.weight.1");
    static const char *const qkvo[4] = {"attn_q", "attn_k", "attn_v", "attn_out"};
    for (uint32_t i = 0; i < s->n_layer && !rc; i++) {
        rc = add(w, &r, QUANT_F32, F_ONE, 1, vE, err, "v.blk.%u.ln1.weight", i);
        if (!rc && !v25)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.ln1.bias", i);
        for (int k = 0; k < 4 && !rc; k++) {
            rc = add(w, &r, mt, F_MAT, 2, mEE, err, "v.blk.%u.%s.weight", i, qkvo[k]);
            if (!rc)
                rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.%s.bias", i, qkvo[k]);
        }
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_ONE, 1, vE, err, "v.blk.%u.ln2.weight", i);
        if (!rc && !v25)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.ln2.bias", i);
        if (!rc && v25)
            rc = add(w, &r, mt, F_MAT, 2, mEF, err, "v.blk.%u.ffn_gate.weight", i);
        if (!rc && v25)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vF, err, "v.blk.%u.ffn_gate.bias", i);
        if (!rc)
            rc = add(w, &r, mt, F_MAT, 2, mEF, err, "v.blk.%u.ffn_up.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vF, err, "v.blk.%u.ffn_up.bias", i);
        if (!rc)
            rc = add(w, &r, mt, F_MAT, 2, mFE, err, "v.blk.%u.ffn_down.weight", i);
        if (!rc)
            rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.blk.%u.ffn_down.bias", i);
    }
    if (!rc)
        rc = add(w, &r, QUANT_F32, F_ONE, 1, vE, err, "v.post_ln.weight");
    if (!rc && !v25)
        rc = add(w, &r, QUANT_F32, F_BIAS, 1, vE, err, "v.post_ln.bias");
    if (!rc)
        rc = add(w, &r, mt, F_MAT, 2, mMM, err, "mm.0.weight");
    if (!rc)
        rc = add(w, &r, QUANT_F32, F_BIAS, 1, vM, err, "mm.0.bias");
    if (!rc)
        rc = add(w, &r, mt, F_MAT, 2, mMO, err, "mm.2.weight");
    if (!rc)
        rc = add(w, &r, QUANT_F32, F_BIAS, 1, vO, err, "mm.2.bias");
    if (!rc)
        rc = gguf_w_finish(w, out, len, err);
    gguf_writer_free(w);
    return rc;
}

/* ------------------------------------------------------------- benchmark */

/* FLOPs of one page (qwen25vl.md §6.1), folded patch kernel. */
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
    struct vkr_config vc = {.device = o->device, .allow_cpu = o->allow_cpu, .validate = 0,
                            .timestamps = 1, .cache_dir = ""};
    struct vkr *vk = NULL;
    int rc = vkr_open(&vc, &vk, err);
    if (rc)
        return rc;
    const struct vkr_device_info *di = vkr_device(vk);
    char dev[400];
    snprintf(dev, sizeof dev, "\"device\":\"%s\",\"driver\":\"%s %s\"", di->name, di->driver_name,
             di->driver_info);
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
    struct vkr_pipeline_key keys[64];
    int nk = rc ? 0 : vis_pipeline_keys(vk, m, keys, 64), failed = 0;
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
        rc = prep_image(px, side, side, (size_t)side * 3, 3, &pc, 1, &pi, err);
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
        rc = vis_encode(v, pi.patches, pi.grid_h, pi.grid_w, emb, err);
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
