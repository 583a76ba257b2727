/*
 * lm_bench: the text model's speed on this device, next to what the device
 * can do in the same run (docs/DESIGN.md §7: numbers, not assertions).
 *
 * Roofline first: FLOP/s of folio's best matmul kernel on a large f16 GEMM
 * (the cooperative-matrix kernel where the device has it) and of the
 * Q4_K kernel at the prefill's FFN shape; memory bandwidth from a large
 * element-wise pass (bytes read + written). Then a model of the real
 * Qwen2.5-VL-7B text shape with Q4_K_M-like dtypes, made in memory by
 * lm_synth_gguf (no file, no download), is pre-warmed, sealed, opened, and
 * timed: prefill tokens/s at the prompt length, label scoring (a separate
 * pass on the prompt's KV cache) and the fused prefill+labels pass.
 * Prefill is compute-bound (fraction of peak FLOP/s); label scoring reads
 * every weight once for a few dozen rows (fraction of bandwidth).
 *
 * Each result is one JSON object per line on out.
 */
#include "bench/engine/bench.h"
#include "bench/engine/bench_internal.h"
#include "bench/engine/synth.h"
#include "common/rng.h"
#include "engine/model/lm_internal.h"
#include "engine/quant/quant.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double best_of(double a, double b)
{
    return a < b ? a : b;
}

/* Times reps matmuls in one pass; returns ms per matmul (best of 3). */
static int time_matmul(struct vkr *vk, struct vkr_arena *wa, struct vkr_arena *aa, int wtype,
                       uint32_t m, uint32_t n, uint32_t k, int reps, double *ms,
                       const char **kernel, struct folio_err *err)
{
    struct vkr_tensor w, x, y;
    uint64_t rb = quant_row_bytes(wtype, k);
    int rc = vkr_arena_alloc(wa, rb * n, &w, err);
    if (!rc)
        rc = vkr_arena_alloc(aa, (uint64_t)m * k * 4, &x, err);
    if (!rc)
        rc = vkr_arena_alloc(aa, (uint64_t)m * n * 4, &y, err);
    if (rc)
        return rc;
    /* Weights: one random quantised row repeated (the timing does not
     * depend on values); activations: a constant. */
    float *row = malloc((size_t)k * sizeof *row);
    uint8_t *q = malloc(rb * 64);
    if (!row || !q) {
        free(row);
        free(q);
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    }
    struct folio_rng s = {88172645463325252ull};
    for (uint32_t i = 0; i < k; i++)
        row[i] = (float)folio_rng_unit(&s) - 0.5f;
    for (int i = 0; i < 64 && !rc; i++)
        rc = quant_quantize_row(wtype, row, q + (uint64_t)i * rb, k);
    for (uint64_t r0 = 0; r0 < n && !rc; r0 += 64)
        rc = vkr_upload(vk, w, r0 * rb, q, (n - r0 < 64 ? n - r0 : 64) * rb, err);
    free(row);
    free(q);
    if (!rc)
        rc = vkr_fill(vk, x, 0x3c23d70a /* 0.01f */, err);
    if (rc)
        return rc;
    struct op_matmul a = {.w = w, .wtype = wtype, .n = n, .k = k, .x = x, .m = m, .y = y,
                          .kernel = OP_MM_AUTO};
    enum op_mm_kernel kk = op_matmul_pick(vk, wtype, m);
    *kernel = kk == OP_MM_MATVEC ? "matvec" : kk == OP_MM_COOPMAT ? "coopmat" : "tiled";
    *ms = INFINITY;
    for (int it = 0; it < 4 && !rc; it++) {
        struct vkr_cmd *c;
        rc = vkr_cmd_begin(vk, &c, err);
        for (int r = 0; r < reps && !rc; r++)
            rc = op_matmul(c, &a, err);
        if (rc) {
            vkr_cmd_abort(c);
            break;
        }
        double t0 = folio_mono_ms();
        rc = vkr_cmd_submit(c, err);
        if (it > 0) /* the first pass warms caches and clocks */
            *ms = best_of(*ms, (folio_mono_ms() - t0) / reps);
    }
    return rc;
}

static int time_bandwidth(struct vkr *vk, struct vkr_arena *aa, uint64_t n, double *gbs,
                          struct folio_err *err)
{
    struct vkr_tensor a, y;
    int rc = vkr_arena_alloc(aa, n * 4, &a, err);
    if (!rc)
        rc = vkr_arena_alloc(aa, n * 4, &y, err);
    if (!rc)
        rc = vkr_fill(vk, a, 0x3f800000, err);
    double best = INFINITY;
    for (int it = 0; it < 4 && !rc; it++) {
        struct vkr_cmd *c;
        rc = vkr_cmd_begin(vk, &c, err);
        for (int r = 0; r < 4 && !rc; r++)
            rc = op_elem(c, &(struct op_elem){.op = OP_SCALE, .a = a, .y = y, .n = n, .s = 1.0f},
                                              err);
        if (rc) {
            vkr_cmd_abort(c);
            break;
        }
        double t0 = folio_mono_ms();
        rc = vkr_cmd_submit(c, err);
        if (it > 0)
            best = best_of(best, (folio_mono_ms() - t0) / 4);
    }
    *gbs = (double)n * 8 / (best * 1e-3) / 1e9;
    return rc;
}

/* One JSON line: GPU ms of the last pass summed by dispatch label. */
static void breakdown(struct vkr *vk, const char *dev, const char *pass, FILE *out)
{
    fprintf(out, "{\"bench\":\"engine_text\",\"what\":\"breakdown\",%s,\"pass\":\"%s\"", dev,
            pass);
    vkr_print_timing_breakdown(vk, out);
    fputs("}\n", out);
}

static void synth_shape(const struct lm_bench_opts *o, struct lm_synth *s)
{
    memset(s, 0, sizeof *s);
    if (o->small) {
        *s = (struct lm_synth){.n_embd = 256, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
                               .n_ff = 512, .n_vocab = 1024};
    } else {
        /* Qwen2.5-VL-7B text (docs/reference/qwen25vl.md §0.3) */
        *s = (struct lm_synth){.n_embd = 3584, .n_layer = 28, .n_head = 28, .n_head_kv = 4,
                               .n_ff = 18944, .n_vocab = 152064};
    }
    if (o->qwen3) /* --family qwen3vl */
        q3_synth_shapes(o->small, s, NULL);
    s->mat_type = QUANT_Q4_K;
    s->q4km = 1;
    s->seed = 1234;
    s->pool_rows = 64;
}

int lm_bench(const struct lm_bench_opts *o, FILE *out, struct folio_err *err)
{
    uint32_t T = o->prompt_tokens ? o->prompt_tokens : (o->small ? 64 : 1400);
    uint32_t NLB = o->labels ? o->labels : 16, LTK = o->label_tokens ? o->label_tokens : 3;
    uint32_t iters = o->iters ? o->iters : 3;
    struct vkr *vk = NULL;
    char dev[1200];
    int rc = bench_vkr_open(o->device, o->allow_cpu, NULL, &vk, dev, sizeof dev, err);
    if (rc)
        return rc;

    /* ---- model in memory ---- */
    struct lm_synth sy;
    synth_shape(o, &sy);
    double t0 = folio_mono_ms();
    uint8_t *buf = NULL;
    size_t len = 0;
    struct gguf_file *f = NULL;
    struct gguf_model *m = NULL;
    struct lm *lm = NULL;
    struct vkr_arena *bw = NULL, *ba = NULL;
    int32_t *toks = NULL, *ltok = NULL;
    struct lm_label *labels = NULL;
    double *lp = NULL, *pr = NULL;
    rc = lm_synth_gguf(&sy, &buf, &len, err);
    if (!rc)
        rc = gguf_open_memory(buf, len, &f, err);
    if (!rc)
        rc = gguf_model_check(f, 0, &m, err);
    if (rc)
        goto out;
    double synth_ms = folio_mono_ms() - t0;

    /* ---- pipelines: the model's and the roofline's, then seal ---- */
    /* the roofline's f16 products and its scale, asked of the ops (the
     * model's list has them already where its weights expand to f16;
     * vkr_prewarm drops repeats) */
    struct vkr_pipeline_key keys[LM_PIPELINE_KEYS_MAX + 1 + OPS_MATMUL_MAX_KEYS];
    int nk = lm_pipeline_keys(vk, m, o->gpu_weights, keys, LM_PIPELINE_KEYS_MAX);
    keys[nk++] = ops_elem_key(OP_SCALE);
    nk += ops_matmul_keys(vk, QUANT_F16, &keys[nk]);
    int failed = 0;
    t0 = folio_mono_ms();
    rc = vkr_prewarm(vk, keys, nk, &failed, err);
    if (rc)
        goto out;
    double prewarm_ms = folio_mono_ms() - t0;
    vkr_seal(vk);

    /* ---- roofline ---- */
    rc = vkr_arena_create(vk, "bench-w", VKR_ARENA_WEIGHTS, &bw, err);
    if (!rc)
        rc = vkr_arena_create(vk, "bench-act", VKR_ARENA_ACTIVATIONS, &ba, err);
    if (rc)
        goto out;
    uint32_t G = o->small ? 128 : 4096;
    uint64_t BWN = o->small ? (1u << 20) : (192ull << 20);
    uint64_t plan[6] = {(uint64_t)G * G * 4, (uint64_t)G * G * 4,
                        (uint64_t)T * sy.n_embd * 4, (uint64_t)T * sy.n_ff * 4, BWN * 4, BWN * 4};
    rc = vkr_arena_plan(ba, plan, 6, err);
    double g_ms, q_ms, gbs;
    const char *gk, *qk;
    if (!rc)
        rc = time_matmul(vk, bw, ba, QUANT_F16, G, G, G, 5, &g_ms, &gk, err);
    if (!rc)
        rc = time_matmul(vk, bw, ba, QUANT_Q4_K, T, sy.n_ff, sy.n_embd, 3, &q_ms, &qk, err);
    if (!rc)
        rc = time_bandwidth(vk, ba, BWN, &gbs, err);
    if (rc)
        goto out;
    double f16_tf = 2.0 * G * G * G / (g_ms * 1e-3) / 1e12;
    double q4_tf = 2.0 * T * sy.n_ff * (double)sy.n_embd / (q_ms * 1e-3) / 1e12;
    /* The roofline's compute ceiling: the fastest matmul folio has here. */
    double peak_tf = f16_tf > q4_tf ? f16_tf : q4_tf;
    fprintf(out, "{\"bench\":\"engine_text\",\"what\":\"roofline\",%s,\"f16_gemm\":[%u,%u,%u],"
            "\"f16_kernel\":\"%s\",\"f16_tflops\":%.4g,\"q4k_gemm\":[%u,%u,%u],\"q4k_kernel\":"
            "\"%s\",\"q4k_tflops\":%.4g,\"matmul_peak_tflops\":%.4g,\"bandwidth_gbs\":%.1f,"
            "\"prewarm_ms\":%.1f,\"pipelines\":%d}\n",
            dev, G, G, G, gk, f16_tf, T, sy.n_ff, sy.n_embd, qk, q4_tf, peak_tf, gbs, prewarm_ms,
            nk);
    fflush(out);
    vkr_arena_destroy(ba);
    vkr_arena_destroy(bw);
    ba = bw = NULL;

    /* ---- the model ---- */
    struct lm_config cfg = {.max_tokens = T, .batch = 1, .max_labels = NLB,
                            .max_label_tokens = LTK};
    cfg.gpu_weights = o->gpu_weights;
    t0 = folio_mono_ms();
    rc = lm_open(vk, m, &cfg, &lm, err);
    if (rc)
        goto out;
    double open_ms = folio_mono_ms() - t0;
    uint64_t wbytes, abytes;
    lm_memory(lm, &wbytes, &abytes);
    toks = malloc((size_t)T * sizeof *toks);
    ltok = malloc((size_t)NLB * LTK * sizeof *ltok);
    labels = malloc((size_t)NLB * sizeof *labels);
    lp = malloc((size_t)NLB * sizeof *lp);
    pr = malloc((size_t)NLB * sizeof *pr);
    if (!toks || !ltok || !labels || !lp || !pr) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
        goto out;
    }
    for (uint32_t i = 0; i < T; i++)
        toks[i] = (int32_t)((i * 2654435761u) % sy.n_vocab);
    for (uint32_t l = 0; l < NLB; l++) {
        for (uint32_t j = 0; j < LTK; j++) /* labels share their first token pairwise */
            ltok[l * LTK + j] = (int32_t)(((j == 0 ? l / 2 : l) * 40503u + j * 977u) % sy.n_vocab);
        labels[l] = (struct lm_label){ltok + l * LTK, LTK};
    }
    struct lm_seq seq = {toks, T, NULL, NULL, 0, NULL, 0};
    double pre_ms = INFINITY, pre_gpu = INFINITY, sc_ms = INFINITY, sc_gpu = INFINITY;
    double cl_ms = INFINITY, cl_gpu = INFINITY;
    for (uint32_t it = 0; it <= iters && !rc; it++) {
        double a = folio_mono_ms();
        rc = lm_prefill(lm, &seq, 1, NULL, err);
        double b = folio_mono_ms(), g1 = lm_last_submit_ms(lm);
        if (!rc)
            rc = lm_score(lm, labels, NLB, lp, err);
        double c = folio_mono_ms(), g2 = lm_last_submit_ms(lm);
        if (!rc)
            rc = lm_classify(lm, &seq, 1, labels, NLB, lp, pr, NULL, err);
        double d = folio_mono_ms(), g3 = lm_last_submit_ms(lm);
        if (it == 0)
            continue; /* warm-up */
        pre_ms = best_of(pre_ms, b - a);
        pre_gpu = best_of(pre_gpu, g1);
        sc_ms = best_of(sc_ms, c - b);
        sc_gpu = best_of(sc_gpu, g2);
        cl_ms = best_of(cl_ms, d - c);
        cl_gpu = best_of(cl_gpu, g3);
    }
    /* one more of each for the per-dispatch breakdown */
    if (!rc)
        rc = lm_prefill(lm, &seq, 1, NULL, err);
    if (!rc)
        breakdown(vk, dev, "prefill", out);
    if (!rc)
        rc = lm_score(lm, labels, NLB, lp, err);
    if (!rc)
        breakdown(vk, dev, "labels", out);
    if (rc)
        goto out;
    const struct gguf_text_hparams *h = lm_hparams(lm);
    double QW = (double)h->n_head * h->head_dim, KW = (double)h->n_head_kv * h->head_dim;
    double E = h->n_embd, F = h->n_ff, V = h->n_vocab, L = h->n_layer;
    double lin = 2.0 * L * (E * QW + 2 * E * KW + QW * E + 3 * E * F);
    double flops = lin * T + 2.0 * QW * L * T * (T + 1.0) + 2.0 * E * V;
    double tf = flops / (pre_gpu * 1e-3) / 1e12;
    fprintf(out, "{\"bench\":\"engine_text\",\"what\":\"prefill\",%s,\"model\":\"%s\","
            "\"layers\":%u,\"embd\":%u,\"ff\":%u,\"vocab\":%u,\"weights_bytes\":%" PRIu64
            ",\"activation_bytes\":%" PRIu64 ",\"tokens\":%u,\"ms\":%.2f,\"gpu_ms\":%.2f,"
            "\"tokens_per_s\":%.0f,\"tflops\":%.4g,\"fraction_of_matmul_peak\":%.3f,"
            "\"synth_ms\":%.0f,\"open_ms\":%.0f}\n",
            dev, o->qwen3 ? (o->small ? "small-qwen3vl-q4_k_m" : "qwen3-vl-8b-shape-q4_k_m")
                 : o->small ? "small-q4_k_m" : "qwen2.5-vl-7b-shape-q4_k_m", h->n_layer, h->n_embd,
            h->n_ff, h->n_vocab, wbytes, abytes, T, pre_ms, pre_gpu, T / (pre_ms * 1e-3), tf,
            tf / peak_tf, synth_ms, open_ms);
    /* Label scoring reads every weight once for its rows: bandwidth-bound. */
    double rows = (double)NLB * (LTK - 1);
    double lflops = lin * rows + 2.0 * QW * L * rows * (T + LTK) + 2.0 * E * V * rows;
    double floor_ms = (double)wbytes / (gbs * 1e9) * 1e3;
    fprintf(out, "{\"bench\":\"engine_text\",\"what\":\"labels\",%s,\"labels\":%u,"
            "\"tokens_per_label\":%u,\"prompt_tokens\":%u,\"score_ms\":%.2f,\"score_gpu_ms\":%.2f,"
            "\"weight_read_floor_ms\":%.2f,\"fraction_of_bandwidth\":%.3f,\"score_tflops\":%.4g,"
            "\"fused_classify_ms\":%.2f,\"fused_classify_gpu_ms\":%.2f,"
            "\"fused_extra_over_prefill_ms\":%.2f}\n",
            dev, NLB, LTK, T, sc_ms, sc_gpu, floor_ms, floor_ms / sc_gpu,
            lflops / (sc_gpu * 1e-3) / 1e12, cl_ms, cl_gpu, cl_gpu - pre_gpu);
    fflush(out);

    /* The same label pass with the op library's own kernel pick (tiled
     * f32 below 64 rows), to show what lm's tensor-core choice buys. */
    if (ops_coopmat_available(vk)) {
        lm_close(lm);
        lm = NULL;
        cfg.op_auto_kernels = 1;
        rc = lm_open(vk, m, &cfg, &lm, err);
        double alt = INFINITY;
        for (int it = 0; it < 3 && !rc; it++) {
            rc = lm_prefill(lm, &seq, 1, NULL, err);
            if (!rc)
                rc = lm_score(lm, labels, NLB, lp, err);
            if (!rc && it > 0)
                alt = best_of(alt, lm_last_submit_ms(lm));
        }
        if (!rc) {
            breakdown(vk, dev, "labels_op_auto_kernels", out);
            fprintf(out, "{\"bench\":\"engine_text\",\"what\":\"labels_op_auto_kernels\",%s,"
                    "\"labels\":%u,\"score_gpu_ms\":%.2f}\n", dev, NLB, alt);
        }
    }
out:
    free(toks);
    free(ltok);
    free(labels);
    free(lp);
    free(pr);
    lm_close(lm);
    if (ba)
        vkr_arena_destroy(ba);
    if (bw)
        vkr_arena_destroy(bw);
    gguf_model_close(m);
    free(buf);
    vkr_close(vk);
    return rc;
}
