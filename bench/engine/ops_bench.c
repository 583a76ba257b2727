/*
 * `bench ops`, shared by the folio CLI and the engine-only folio-engine
 * tool (GPU machines have no libpq or Tesseract).
 *
 * The bench measures its own roofline in the same run — peak f32 FMA rate
 * (shaders/peak_fma.comp) and device read bandwidth (peak_bw.comp) — and
 * reports every op as GFLOP/s, GB/s and the fraction of
 * min(peak FLOP/s, bandwidth x arithmetic intensity). Times come from GPU
 * timestamps around each dispatch when the queue has them (wall clock of
 * the whole pass otherwise), averaged over the repetitions after one
 * warm-up pass. Weights are random bytes: speed does not depend on values.
 */
#include "bench/engine/bench.h"
#include "common/cliopt.h"
#include "common/json.h"
#include "common/rng.h"
#include "engine/doctor_vk.h"
#include "engine/ops/ops_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct bench {
    struct vkr *vk;
    FILE *out;
    const struct ops_tool_opts *o;
    int reps;
    int inner; /* records of the work per timed submission (timed) */
    double peak_gflops, peak_gbps;
    char dev[300];
    struct folio_rng rng;
};

/* Uploads pseudo-random bytes in staging-sized chunks. */
static int upload_random(struct bench *b, struct vkr_tensor t, struct folio_err *err)
{
    const uint64_t chunk = 8u << 20;
    uint64_t *buf = malloc(chunk);
    if (!buf)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    int rc = 0;
    for (uint64_t off = 0; off < t.size && !rc; off += chunk) {
        uint64_t n = t.size - off < chunk ? t.size - off : chunk;
        for (uint64_t i = 0; i < (n + 7) / 8; i++) {
            /* keep f16/bf16/f32 exponents tame: clear the top exponent bits */
            buf[i] = folio_rng_next(&b->rng) & 0x3fff3fff3fff3fffull;
        }
        rc = vkr_upload(b->vk, t, off, buf, n, err);
    }
    free(buf);
    return rc;
}

typedef int (*record_fn)(struct vkr_cmd *c, void *arg, struct folio_err *err);

/* Runs one warm-up pass, then reps passes; returns ms per repetition.
 * Each pass records the work b->inner times back to back (GPU time summed,
 * divided by inner): a single sub-millisecond dispatch per submission left
 * the H200 idle between submissions, and the same kernel measured 25 %
 * apart depending on where in the sweep it ran. */
static int timed(struct bench *b, record_fn fn, void *arg, double *ms, struct folio_err *err)
{
    double best = INFINITY;
    int inner = b->inner > 0 ? b->inner : 1;
    for (int r = -1; r < b->reps; r++) {
        struct vkr_cmd *c = NULL;
        int rc = vkr_cmd_begin(b->vk, &c, err);
        if (rc)
            return rc;
        for (int i = 0; i < inner && !rc; i++)
            rc = fn(c, arg, err);
        if (rc) {
            vkr_cmd_abort(c);
            return rc;
        }
        double t0 = folio_mono_ms();
        rc = vkr_cmd_submit(c, err);
        double wall = folio_mono_ms() - t0;
        if (rc)
            return rc;
        struct vkr_timing tm[256];
        int n = vkr_last_timings(b->vk, tm, 256);
        double gpu = 0;
        for (int i = 0; i < n && i < 256; i++)
            gpu += tm[i].ms;
        double t = (n > 0 ? gpu : wall) / inner;
        if (r >= 0 && t < best)
            best = t;
    }
    *ms = best;
    return 0;
}

struct peak_arg {
    uint32_t pid, groups, iters;
    struct vkr_tensor in, out;
    uint32_t n4;
    int bw;
};

static int rec_peak(struct vkr_cmd *c, void *arg, struct folio_err *err)
{
    struct peak_arg *a = arg;
    struct vkr_bind bd[2] = {{.t = a->in, .range = a->in.size}, {.t = a->out, .range = a->out.size}};
    if (a->bw) {
        uint32_t pc = a->n4;
        return vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = a->pid, .b = bd, .nb = 2,
                                                          .push = &pc, .push_bytes = 4,
                                                          .groups = {a->groups, 1, 1},
                                                          .label = "peak_bw"}, err);
    }
    struct {
        uint32_t iters;
        float a;
    } pc = {a->iters, 0.999f};
    return vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = a->pid, .b = &bd[1], .nb = 1,
                                                      .push = &pc, .push_bytes = sizeof pc,
                                                      .groups = {a->groups, 1, 1},
                                                      .label = "peak_fma"}, err);
}

static int roofline(struct bench *b, struct vkr_arena *act, struct folio_err *err)
{
    struct peak_arg a = {0};
    uint32_t id;
    int rc = ops_pipe(b->vk, "peak_fma", 0, NULL, &id, err);
    if (rc)
        return rc;
    a.pid = id;
    a.groups = b->o->quick ? 64 : 8192;
    a.iters = b->o->quick ? 256 : 4096;
    rc = vkr_arena_alloc(act, (uint64_t)a.groups * 256 * 4, &a.out, err);
    if (rc)
        return rc;
    double ms;
    rc = timed(b, rec_peak, &a, &ms, err);
    if (rc)
        return rc;
    double flops = (double)a.groups * 256 * a.iters * 64;
    b->peak_gflops = flops / ms / 1e6;

    rc = ops_pipe(b->vk, "peak_bw", 0, NULL, &id, err);
    if (rc)
        return rc;
    a.pid = id;
    a.bw = 1;
    uint64_t bytes = b->o->quick ? (16u << 20) : (1u << 30);
    const struct vkr_limits *L = vkr_limits(b->vk);
    if (bytes > L->block_size)
        bytes = L->block_size;
    if (bytes > L->max_range)
        bytes = L->max_range & ~(uint64_t)15;
    rc = vkr_arena_alloc(act, bytes, &a.in, err);
    if (!rc)
        rc = vkr_fill(b->vk, a.in, 0x3c003c00u, err);
    if (rc)
        return rc;
    a.n4 = (uint32_t)(bytes / 16);
    a.groups = b->o->quick ? 64 : 4096;
    rc = vkr_arena_alloc(act, (uint64_t)a.groups * 256 * 4, &a.out, err);
    if (!rc)
        rc = timed(b, rec_peak, &a, &ms, err);
    if (rc)
        return rc;
    b->peak_gbps = (double)bytes / ms / 1e6;
    fprintf(b->out, "{\"bench\":\"ops\",\"op\":\"roofline\",\"device\":\"%s\",\"peak_gflops\":%.1f,"
                    "\"peak_gbps\":%.1f,\"fma_ms\":%.3f,\"read_bytes\":%" PRIu64 "}\n",
            b->dev, b->peak_gflops, b->peak_gbps, ms, bytes);
    fflush(b->out);
    return 0;
}

static double roof_frac(const struct bench *b, double flops, double bytes, double ms)
{
    double bound = fmin(b->peak_gflops * 1e9, b->peak_gbps * 1e9 * flops / bytes);
    return bound > 0 ? (flops / (ms / 1e3)) / bound : 0;
}

static int rec_matmul(struct vkr_cmd *c, void *arg, struct folio_err *err)
{
    return op_matmul(c, arg, err);
}

/* "cm2" of "cm2:128x128/...": the route a numbered configuration runs on. */
static const char *cname_route(char *name)
{
    char *colon = strchr(name, ':');
    static char route[16];
    snprintf(route, sizeof route, "%.*s", colon ? (int)(colon - name) : 0, name);
    return route;
}

static int bench_matmul(struct bench *b, struct folio_err *err)
{
    static const int types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0,
                                QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    uint32_t shapes_full[][2] = {{4096, 4096}, {18944, 3584}};
    uint32_t shapes_quick[][2] = {{512, 512}, {1024, 256}};
    uint32_t ms_full[] = {1, 8, 512, 2048}, ms_quick[] = {1, 8, 64, 128};
    uint32_t (*shapes)[2] = b->o->quick ? shapes_quick : shapes_full;
    uint32_t *mlist = b->o->quick ? ms_quick : ms_full;
    for (size_t ti = 0; ti < 7; ti++) {
        int ty = types[ti];
        if (b->o->dtype && strcmp(b->o->dtype, quant_type_name(ty)) != 0)
            continue;
        for (int si = 0; si < 2; si++) {
            uint32_t n = shapes[si][0], k = shapes[si][1];
            struct vkr_arena *w = NULL, *act = NULL;
            int rc = vkr_arena_create(b->vk, "bench-w", VKR_ARENA_WEIGHTS, &w, err);
            if (!rc)
                rc = vkr_arena_create(b->vk, "bench-act", VKR_ARENA_WEIGHTS, &act, err);
            struct op_matmul a = {.wtype = ty, .n = n, .k = k};
            uint64_t wbytes = quant_row_bytes(ty, k) * n;
            if (!rc)
                rc = vkr_arena_alloc(w, wbytes, &a.w, err);
            if (!rc)
                rc = upload_random(b, a.w, err);
            uint32_t mmax = mlist[3];
            if (!rc)
                rc = vkr_arena_alloc(act, (uint64_t)mmax * k * 4, &a.x, err);
            if (!rc)
                rc = vkr_arena_alloc(act, (uint64_t)mmax * n * 4, &a.y, err);
            if (!rc)
                rc = upload_random(b, a.x, err);
            for (int mi = 0; mi < 4 && !rc; mi++) {
                a.m = mlist[mi];
                for (int kern = 0; kern < 3 && !rc; kern++) {
                    a.kernel = kern == 0 ? OP_MM_MATVEC : kern == 1 ? OP_MM_TILED : OP_MM_COOPMAT;
                    if (a.kernel == OP_MM_MATVEC && a.m > 8)
                        continue;
                    if (a.kernel == OP_MM_COOPMAT && !ops_coopmat_available(b->vk))
                        continue;
                    if (a.kernel != OP_MM_MATVEC && a.m == 1)
                        continue;
                    double ms;
                    rc = timed(b, rec_matmul, &a, &ms, err);
                    if (rc == FOLIO_EUNSUPPORTED || rc == FOLIO_ELIMIT) {
                        /* One unavailable path is a result, not the end of the bench. */
                        char em[600];
                        json_escape(em, sizeof em, err->msg);
                        fprintf(b->out, "{\"bench\":\"ops\",\"op\":\"matmul\",\"dtype\":\"%s\","
                                        "\"kernel\":%d,\"m\":%u,\"n\":%u,\"k\":%u,\"error\":\"%s\"}\n",
                                quant_type_name(ty), (int)a.kernel, a.m, n, k, em);
                        rc = 0;
                        continue;
                    }
                    if (rc)
                        break;
                    double flops = 2.0 * a.m * n * k;
                    double bytes = (double)wbytes + 4.0 * a.m * k + 4.0 * a.m * n;
                    const char *kn = a.kernel == OP_MM_MATVEC ? "matvec" : a.kernel == OP_MM_TILED ? "tiled" : "coopmat";
                    fprintf(b->out,
                            "{\"bench\":\"ops\",\"op\":\"matmul\",\"dtype\":\"%s\",\"kernel\":\"%s\","
                            "\"m\":%u,\"n\":%u,\"k\":%u,\"ms\":%.4f,\"gflops\":%.1f,\"gbps\":%.1f,"
                            "\"roofline_frac\":%.3f,\"device\":\"%s\"}\n",
                            quant_type_name(ty), kn, a.m, n, k, ms, flops / ms / 1e6, bytes / ms / 1e6,
                            roof_frac(b, flops, bytes, ms), b->dev);
                    fflush(b->out);
                }
            }
            vkr_arena_destroy(act);
            vkr_arena_destroy(w);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The tensor-core GEMM and the in-shader dequantizing kernel at the
 * Qwen2.5-VL-7B prefill shapes (docs/bench/anchor-20261201/BASELINE.md's cuBLAS table): M = 1400 text
 * rows, 5476 vision patches, 1369 merged tokens; N x K of every weight. */
struct gemm_shape {
    const char *where;
    uint32_t m, n, k;
};
static const struct gemm_shape GEMM_FULL[] = {
    {"text_qo", 1400, 3584, 3584},      {"text_kv", 1400, 512, 3584},
    {"text_gate_up", 1400, 18944, 3584}, {"text_down", 1400, 3584, 18944},
    {"vision_qkv", 5476, 3840, 1280},    {"vision_proj", 5476, 1280, 1280},
    {"vision_gate_up", 5476, 3420, 1280}, {"vision_down", 5476, 1280, 3420},
    {"merger_fc1", 1369, 5120, 5120},    {"merger_fc2", 1369, 3584, 5120},
    {"labels_qo", 48, 3584, 3584},        {"labels_gate_up", 48, 18944, 3584},
    {"labels_down", 48, 3584, 18944},
    /* the label pass as the model runs it: 16 labels of 2 tokens */
    {"labels32_qo", 32, 3584, 3584},    {"labels32_gate_up", 32, 18944, 3584},
    {"labels32_down", 32, 3584, 18944},
    /* a batch of 8 pages' prompts in one prefill (bench engine --batch 8) */
    {"text8_qo", 11584, 3584, 3584},   {"text8_gate_up", 11584, 18944, 3584},
    {"text8_down", 11584, 3584, 18944},
    /* the text model's q/k/v as one product (lm.c), at one 1024^2 page and
     * at a batch of 8 */
    {"text_qkv", 1400, 4608, 3584},    {"text8_qkv", 11584, 4608, 3584},
    /* a batch of 16 512^2 pages' prompts (16 x 391 rows) */
    {"p512b16_qkv", 6256, 4608, 3584}, {"p512b16_qo", 6256, 3584, 3584},
    {"p512b16_gate_up", 6256, 18944, 3584}, {"p512b16_down", 6256, 3584, 18944},
    /* one 512^2 page's prompt (391 rows: three 128-row tiles and 7 rows) */
    {"text512_qo", 391, 3584, 3584},   {"text512_kv", 391, 512, 3584},
    {"text512_gate_up", 391, 18944, 3584}, {"text512_down", 391, 3584, 18944},
    /* the tower's MLP with its 3,420 columns padded (zero rows and columns
     * would keep the math): to 3,424, whose rows are 16-byte aligned (the
     * subgroup kernel's widest loads), and to 3,456, a whole number of K
     * steps; measured against vision_gate_up / vision_down before any
     * padding is built */
    {"vpad8_gate_up", 5476, 3424, 1280}, {"vpad8_down", 5476, 1280, 3424},
    {"vpad64_gate_up", 5476, 3456, 1280}, {"vpad64_down", 5476, 1280, 3456}};
#define GEMM_NFULL ((int)(sizeof GEMM_FULL / sizeof GEMM_FULL[0]))

/* --where: a shape is run when its name holds one of the listed words. */
static int where_wanted(const char *list, const char *name)
{
    if (!list || !*list)
        return 1;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        char w[64];
        if (n && n < sizeof w) {
            memcpy(w, p, n);
            w[n] = 0;
            if (strstr(name, w))
                return 1;
        }
        p += n + (p[n] == ',');
    }
    return 0;
}

static int bench_gemm(struct bench *b, struct folio_err *err)
{
    static const struct gemm_shape *const full = GEMM_FULL;
    static const struct gemm_shape quick[] = {{"quick_a", 130, 300, 512}, {"quick_b", 64, 96, 1280}};
    static const int qtypes[] = {QUANT_Q4_K, QUANT_Q6_K, QUANT_Q8_0};
    int nshape = b->o->quick ? 2 : GEMM_NFULL;
    for (int si = 0; si < nshape; si++) {
        const char *where = b->o->quick ? quick[si].where : full[si].where;
        uint32_t m = b->o->quick ? quick[si].m : full[si].m;
        uint32_t n = b->o->quick ? quick[si].n : full[si].n;
        uint32_t k = b->o->quick ? quick[si].k : full[si].k;
        if (!where_wanted(b->o->where, where))
            continue;
        int ncfg = ops_gemm_configs();
        int sweep = b->o->only && strcmp(b->o->only, "split") == 0;
        for (int v = 0; v < (sweep ? 7 : 5 + ncfg); v++) {
            /* --only split: AUTO's f16 GEMM with AUTO's slices, then 1..6
             * forced K slices (split_k) */
            uint32_t split_k = 0;
            if (sweep) {
                split_k = (uint32_t)v;
                if (v > 0 && k / (uint32_t)v < 64)
                    continue;
            }
            /* v: 0 GEMM f32 x, 1 GEMM f16 x (auto tiles), 2..4 in-shader
             * dequant of qtypes, then GEMM f16 x with each tile config */
            int cfg = v >= 5 ? v - 4 : 0;
            if (cfg && (!b->o->only || strcmp(b->o->only, "gemm") || !ops_gemm_config_fits(b->vk, cfg - 1)))
                continue;
            if (cfg) {
                int acc16, probe, k_mult;
                ops_gemm_config_info(cfg - 1, &acc16, &probe, &k_mult);
                if (k_mult > 0 ? k % (uint32_t)k_mult != 0 : k != (uint32_t)-k_mult)
                    continue;
                char cname[96];
                ops_gemm_config_name(cfg - 1, cname, sizeof cname);
                if (!where_wanted(b->o->tiles, cname))
                    continue;
            }
            int xf16 = v == 1 || cfg || sweep;
            int ty = v < 2 || cfg || sweep ? QUANT_F16 : qtypes[v - 2];
            enum op_mm_kernel kern = v < 2 || cfg || sweep ? OP_MM_GEMM : OP_MM_COOPMAT;
            if (kern == OP_MM_GEMM ? !ops_gemm_available(b->vk) : !ops_coopmat_available(b->vk))
                continue;
            if (k % (uint32_t)quant_block_elems(ty))
                continue;
            if (b->o->dtype && strcmp(b->o->dtype, quant_type_name(ty)) != 0)
                continue;
            struct vkr_arena *ar = NULL;
            int rc = vkr_arena_create(b->vk, "bench-gemm", VKR_ARENA_WEIGHTS, &ar, err);
            struct op_matmul a = {.wtype = ty, .n = n, .k = k, .m = m, .kernel = kern,
                                  .xtype = xf16 ? QUANT_F16 : QUANT_F32, .gemm_config = cfg,
                                  .split_k = split_k};
            /* split-K scratch as a model plans it (forced slices: as much as they take) */
            struct vkr_tensor sk;
            uint64_t skb = sweep && split_k > 1 ? (uint64_t)split_k * m * n * 4 : op_matmul_split_bytes(b->vk);
            uint64_t wbytes = quant_row_bytes(ty, k) * n;
            uint64_t xbytes = (uint64_t)m * k * (xf16 ? 2 : 4);
            if (!rc)
                rc = vkr_arena_alloc(ar, wbytes, &a.w, err);
            if (!rc)
                rc = upload_random(b, a.w, err);
            if (!rc)
                rc = vkr_arena_alloc(ar, xbytes, &a.x, err);
            if (!rc)
                rc = upload_random(b, a.x, err);
            if (!rc)
                rc = vkr_arena_alloc(ar, (uint64_t)m * n * 4, &a.y, err);
            if (!rc && skb && kern == OP_MM_GEMM) {
                rc = vkr_arena_alloc(ar, skb, &sk, err);
                a.split = &sk;
            }
            uint32_t slices = split_k ? split_k : a.split ? op_matmul_split_for(b->vk, m, n, k, skb) : 1;
            double ms = 0;
            if (!rc)
                rc = timed(b, rec_matmul, &a, &ms, err);
            vkr_arena_destroy(ar);
            if (rc)
                return rc;
            double flops = 2.0 * m * n * k;
            char cname[64];
            ops_gemm_config_name(cfg - 1, cname, sizeof cname);
            fprintf(b->out,
                    "{\"bench\":\"ops\",\"op\":\"gemm\",\"where\":\"%s\",\"kernel\":\"%s\","
                    "\"route\":\"%s\",\"config\":%d,\"tiles\":\"%s\",\"wtype\":\"%s\",\"xtype\":\"%s\","
                    "\"m\":%u,\"n\":%u,\"k\":%u,\"split\":%u,\"ms\":%.4f,\"tflops\":%.1f,\"device\":\"%s\"}\n",
                    where, kern == OP_MM_GEMM ? "gemm" : "coopmat",
                    kern != OP_MM_GEMM ? "-" : cfg ? cname_route(cname) : ops_gemm_route_name(b->vk), cfg,
                    kern == OP_MM_GEMM ? cname : "-",
                    quant_type_name(ty),
                    xf16 ? "f16" : "f32", m, n, k, slices, ms, flops / ms / 1e9, b->dev);
            fflush(b->out);
        }
    }
    return 0;
}

/* The int8 GEMM (--gpu-weights int8) at the same shapes: AUTO (its class's
 * tile, K-fixed, as a model pre-warms it) and, with --only gemm, every tile
 * configuration (FOLIO_GEMM_I8_TILE), K-fixed at the text model's K. The
 * times include the activations' quantization (quant_rows), which every
 * int8 product pays; TOP/s count the product's 2mnk alone. */
static int bench_gemm_i8(struct bench *b, struct folio_err *err)
{
    if (!ops_gemm_i8_available(b->vk) || (b->o->dtype && strcmp(b->o->dtype, "i8r") != 0))
        return 0;
    int nshape = b->o->quick ? 0 : GEMM_NFULL, rc = 0;
    for (int si = 0; si < nshape && !rc; si++) {
        const struct gemm_shape *g = &GEMM_FULL[si];
        if (!where_wanted(b->o->where, g->where) || g->k % QUANT_I8R_ALIGN)
            continue;
        for (int cfg = -1; cfg < ops_gemm_i8_configs() && !rc; cfg++) {
            if (cfg >= 0 && (!b->o->only || strcmp(b->o->only, "gemm") ||
                             !ops_gemm_i8_config_fits(b->vk, cfg)))
                continue; /* cfg -1: AUTO */
            char tname[64];
            ops_gemm_i8_config_name(cfg, tname, sizeof tname);
            if (cfg >= 0 && !where_wanted(b->o->tiles, tname))
                continue;
            char env[16];
            snprintf(env, sizeof env, "%d", cfg);
            if (cfg >= 0)
                setenv("FOLIO_GEMM_I8_TILE", env, 1);
            struct vkr_arena *ar = NULL;
            struct op_matmul a = {.wtype = QUANT_I8R, .n = g->n, .k = g->k, .m = g->m,
                                  .kernel = OP_MM_GEMM, .xtype = QUANT_F16};
            struct vkr_tensor sk;
            rc = vkr_arena_create(b->vk, "bench-gemm-i8", VKR_ARENA_WEIGHTS, &ar, err);
            if (!rc)
                rc = vkr_arena_alloc(ar, quant_row_bytes(QUANT_I8R, g->k) * g->n, &a.w, err);
            if (!rc)
                rc = upload_random(b, a.w, err);
            if (!rc)
                rc = vkr_arena_alloc(ar, (uint64_t)g->m * g->k * 2, &a.x, err);
            if (!rc)
                rc = upload_random(b, a.x, err);
            if (!rc)
                rc = vkr_arena_alloc(ar, (uint64_t)g->m * g->n * 4, &a.y, err);
            if (!rc)
                rc = vkr_arena_alloc(ar, op_matmul_split_bytes(b->vk), &sk, err);
            a.split = &sk;
            double ms = 0;
            if (!rc)
                rc = timed(b, rec_matmul, &a, &ms, err);
            vkr_arena_destroy(ar);
            unsetenv("FOLIO_GEMM_I8_TILE");
            if (rc)
                return rc;
            char cname[64];
            ops_gemm_i8_config_name(cfg, cname, sizeof cname);
            fprintf(b->out,
                    "{\"bench\":\"ops\",\"op\":\"gemm\",\"where\":\"%s\",\"kernel\":\"gemm\","
                    "\"route\":\"%s-i8\",\"config\":%d,\"tiles\":\"%s\",\"wtype\":\"i8r\","
                    "\"xtype\":\"f16\",\"m\":%u,\"n\":%u,\"k\":%u,\"split\":1,\"ms\":%.4f,"
                    "\"tflops\":%.1f,\"device\":\"%s\"}\n",
                    g->where,
                    cfg < 0 ? ops_gemm_i8_route_name(b->vk) : strncmp(cname, "i8k:", 4) ? "cm2" : "khr",
                    cfg, cfg < 0 ? "auto" : cname, g->m, g->n, g->k, ms,
                    2.0 * g->m * g->n * g->k / ms / 1e9, b->dev);
            fflush(b->out);
        }
    }
    return rc;
}

static int rec_attn(struct vkr_cmd *c, void *arg, struct folio_err *err)
{
    return op_attention(c, arg, err);
}

/* One line per (case, kernel, element type): the model's attention shapes
 * (Qwen2.5-VL-7B on a 1024x1024 page: 5,476 patches, 16 heads x 80, full
 * and 64-patch windows; text prefill of 1,400 tokens, 28 / 4 heads x 128,
 * causal; 16 labels x 3 tokens after a 1,429-token page, laid out as
 * lm_forward attends them: the page's cache slots, then the labels' rows,
 * each row seeing the page and its own label's earlier slots (two key
 * ranges), once unsplit and once with AUTO's split K;
 * one decode step).
 * FLOPs count the visible query-key pairs only (4 * pairs * d * heads). */
static int bench_attention(struct bench *b, struct folio_err *err)
{
    struct attn_case {
        const char *name;
        uint32_t tq, tk, hq, hkv, d;
        int causal, window, labels;
    } full[] = {
        {"vision_full", 5476, 5476, 16, 16, 80, 0, 0, 0},
        {"vision_window64", 5476, 5476, 16, 16, 80, 0, 64, 0},
        {"text_prefill", 1400, 1400, 28, 4, 128, 1, 0, 0},
        {"label_scoring", 16 * 3, 1429 + 16 * 3, 28, 4, 128, 0, 0, 16},
        {"text_decode", 1, 1429, 28, 4, 128, 1, 0, 0},
    }, quick[] = {
        {"vision_full", 96, 96, 2, 2, 80, 0, 0, 0},
        {"vision_window64", 128, 128, 2, 2, 80, 0, 64, 0},
        {"text_prefill", 64, 64, 2, 1, 128, 1, 0, 0},
        {"label_scoring", 4 * 3, 40 + 4 * 3, 2, 1, 128, 0, 0, 4},
        {"text_decode", 1, 128, 2, 1, 128, 1, 0, 0},
    };
    for (int ci = 0; ci < 5; ci++) {
        const struct attn_case *cs = b->o->quick ? &quick[ci] : &full[ci];
        if (!where_wanted(b->o->where, cs->name))
            continue;
        struct vkr_arena *act = NULL;
        int rc = vkr_arena_create(b->vk, "bench-attn", VKR_ARENA_WEIGHTS, &act, err);
        struct op_attention a = {.tq = cs->tq, .tk = cs->tk, .hq = cs->hq, .hkv = cs->hkv, .d = cs->d,
                                 .causal = cs->causal, .scale = 1.0f / sqrtf((float)cs->d)};
        uint64_t qb = (uint64_t)a.tq * a.hq * a.d * 4, kb = (uint64_t)a.tk * a.hkv * a.d * 4;
        struct vkr_tensor rg;
        /* split-K scratch for the label case: what AUTO can take here */
        uint64_t ksb[2] = {0, 0};
        if (cs->labels)
            op_attention_ksplit_bytes(b->vk, a.tq, a.hq, a.d, 0, ksb);
        struct op_attention_ksplit ks;
        if (!rc)
            rc = vkr_arena_alloc(act, ksb[0] ? ksb[0] : 16, &ks.o, err);
        if (!rc)
            rc = vkr_arena_alloc(act, ksb[1] ? ksb[1] : 16, &ks.lse, err);
        if (!rc)
            rc = vkr_arena_alloc(act, qb, &a.q, err);
        if (!rc)
            rc = vkr_arena_alloc(act, kb, &a.k, err);
        if (!rc)
            rc = vkr_arena_alloc(act, kb, &a.v, err);
        if (!rc)
            rc = vkr_arena_alloc(act, qb, &a.o, err);
        if (!rc)
            rc = vkr_arena_alloc(act, (uint64_t)a.tq * 16, &rg, err);
        /* 0x3c00 is 1.0 in f16 and a small normal number in f32: finite either way. */
        if (!rc)
            rc = vkr_fill(b->vk, a.q, 0x3c003c00u, err);
        if (!rc)
            rc = vkr_fill(b->vk, a.k, 0x3c003c00u, err);
        if (!rc)
            rc = vkr_fill(b->vk, a.v, 0x3c003c00u, err);
        double visible = 0;
        uint32_t *r = calloc((size_t)a.tq * 4, sizeof *r);
        if (!r)
            rc = rc ? rc : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
        uint32_t per = cs->labels ? a.tq / cs->labels : 1, page = a.tk - (cs->labels ? a.tq : 0);
        uint32_t rw = cs->labels ? 4 : 2; /* words of one query's ranges */
        for (uint32_t i = 0; r && i < a.tq; i++) {
            uint32_t lo = 0, hi = a.tk;
            if (cs->window) {
                lo = i / cs->window * cs->window;
                hi = lo + cs->window < a.tk ? lo + cs->window : a.tk;
            }
            if (a.causal && (uint64_t)i + a.tk - a.tq + 1 < hi)
                hi = i + a.tk - a.tq + 1;
            if (cs->labels) { /* the page, and the label's own slots up to this row */
                lo = 0;
                hi = page;
                r[4 * i + 2] = page + i / per * per;
                r[4 * i + 3] = page + i + 1;
                visible += r[4 * i + 3] - r[4 * i + 2];
            }
            r[rw * i] = lo, r[rw * i + 1] = hi;
            visible += hi > lo ? hi - lo : 0;
        }
        if (!rc && (cs->window || cs->labels)) {
            rc = vkr_upload(b->vk, rg, 0, r, (uint64_t)a.tq * rw * 4, err);
            a.ranges = &rg;
            a.two_ranges = cs->labels != 0;
        }
        free(r);
        /* element types (--dtype names them) and split K; f16 K/V (the
         * model's mode on the tensor cores) is not run on the scalar kernel */
        static const struct {
            int io, split;
            const char *name;
        } VARIANTS[] = {{OP_ATTN_IO_F32, 0, "f32"}, {OP_ATTN_IO_F32, 1, "f32"},
                        {OP_ATTN_IO_F16, 0, "f16"}, {OP_ATTN_IO_F16, 1, "f16"},
                        {OP_ATTN_IO_KV16, 0, "f16kv"}};
        for (int kern = OP_ATTN_SCALAR; !rc && kern <= OP_ATTN_CM2; kern++)
            for (size_t v = 0; !rc && v < sizeof VARIANTS / sizeof VARIANTS[0]; v++) {
                int io = VARIANTS[v].io, split = VARIANTS[v].split;
                int f16 = io == OP_ATTN_IO_F16, kv16 = io == OP_ATTN_IO_KV16;
                if (kern != OP_ATTN_SCALAR && !op_attention_available(b->vk, kern, a.d, io))
                    continue;
                if ((kv16 && kern == OP_ATTN_SCALAR) || (kern == OP_ATTN_CM2 && a.two_ranges))
                    continue;
                if (b->o->dtype && strcmp(b->o->dtype, VARIANTS[v].name) != 0)
                    continue;
                if (split && !cs->labels) /* only the label case is offered split K */
                    continue;
                a.kernel = (enum op_attn_kernel)kern;
                a.f16 = f16;
                a.kv_f16 = kv16;
                a.ksplit = split ? &ks : NULL;
                uint32_t shares = op_attention_splits_for(b->vk, &a);
                if (split && shares == 1) /* AUTO does not split here: the line above is it */
                    continue;
                double ms = 0;
                rc = timed(b, rec_attn, &a, &ms, err);
                if (rc)
                    break;
                double flops = 4.0 * visible * a.d * a.hq;
                double bytes = (2.0 * (double)qb / (f16 ? 2 : 1) + 2.0 * (double)kb / (f16 || kv16 ? 2 : 1));
                fprintf(b->out,
                        "{\"bench\":\"ops\",\"op\":\"attention\",\"case\":\"%s\",\"kernel\":\"%s\","
                        "\"dtype\":\"%s\",\"tq\":%u,\"tk\":%u,\"hq\":%u,\"hkv\":%u,\"d\":%u,"
                        "\"causal\":%d,\"window\":%d,\"labels\":%d,\"splits\":%u,\"ms\":%.4f,"
                        "\"tflops\":%.2f,\"gflops\":%.1f,\"gbps\":%.1f,\"roofline_frac\":%.3f,"
                        "\"device\":\"%s\"}\n",
                        cs->name,
                        kern == OP_ATTN_CM2 ? "cm2" : kern == OP_ATTN_COOPMAT ? "coopmat" : "scalar",
                        VARIANTS[v].name, a.tq, a.tk, a.hq, a.hkv, a.d, a.causal, cs->window,
                        cs->labels, shares, ms, flops / ms / 1e9, flops / ms / 1e6, bytes / ms / 1e6,
                        roof_frac(b, flops, bytes, ms), b->dev);
                fflush(b->out);
            }
        vkr_arena_destroy(act);
        if (rc)
            return rc;
    }
    return 0;
}

int ops_bench(const struct ops_tool_opts *o, FILE *out, struct folio_err *err)
{
    struct bench b = {.out = out, .o = o, .reps = o->reps > 0 ? o->reps : (o->quick ? 2 : 5),
                      .rng = {0x2545F4914F6CDD1Dull}};
    int rc = engine_tool_vkr_open(o->device, o->allow_cpu, o->serial, 1, &b.vk, err);
    if (rc)
        return rc;
    json_escape(b.dev, sizeof b.dev, vkr_device(b.vk)->name);
    int failed = 0;
    rc = ops_prewarm(b.vk, &failed, err);
    if (!rc && (o->only && strcmp(o->only, "gemm") == 0)) {
        /* the GEMM tile configurations --tiles and --dtype select (all by
         * default), compared at the model's shapes, beside AUTO's own
         * forms: a sweep of a few tiles pre-warms only those (all of them
         * took 100-160 s on the H100). The per-shape forms repeat across
         * shapes, so the list is made unique after each shape, and each
         * addition is made only with room for the most it writes. */
        static struct vkr_pipeline_key gk[1024];
        const int cap = (int)(sizeof gk / sizeof gk[0]) - OPS_GEMM_MAX_KEYS;
        int f16 = !o->dtype || strcmp(o->dtype, "f16") == 0, i8 = !o->dtype || strcmp(o->dtype, "i8r") == 0;
        int ng = ops_gemm_keys_all(b.vk, 0, gk);
        char cname[96];
        for (int c = 0; f16 && c < ops_gemm_configs() && ng < cap; c++) {
            ops_gemm_config_name(c, cname, sizeof cname);
            if (ops_gemm_config_fits(b.vk, c) && where_wanted(o->tiles, cname))
                ng += ops_gemm_config_keys(b.vk, c, &gk[ng]);
        }
        /* the int8 GEMM's tiles, each K-fixed at the text model's K (the
         * int8 route is the text model's) */
        const uint32_t i8k[] = {3584, 18944};
        for (int c = 0; i8 && ops_gemm_i8_available(b.vk) && c < ops_gemm_i8_configs() && ng < cap; c++) {
            ops_gemm_i8_config_name(c, cname, sizeof cname);
            if (ops_gemm_i8_config_fits(b.vk, c) && where_wanted(o->tiles, cname))
                ng += ops_gemm_i8_config_keys(b.vk, c, i8k, 2, &gk[ng]);
        }
        ng = ops_keys_unique(gk, ng);
        /* the K-specialized forms a model of these shapes pre-warms (AUTO's
         * lines use them), and AUTO's int8 forms at every K */
        for (int i = 0; i < GEMM_NFULL && ng < cap; i++) {
            if (!where_wanted(o->where, GEMM_FULL[i].where))
                continue;
            ng += ops_gemm_keys_for_k(b.vk, GEMM_FULL[i].k, GEMM_FULL[i].n, &gk[ng]);
            if (i8)
                ng += ops_gemm_i8_keys(b.vk, &GEMM_FULL[i].k, 1, NULL, 0, &gk[ng]);
            ng = ops_keys_unique(gk, ng);
        }
        if (ng >= cap)
            rc = folio_err_set(err, FOLIO_ELIMIT, "bench ops: more GEMM pipeline forms than the "
                               "benchmark's list holds (%d); raise its size", ng);
        if (!rc)
            rc = vkr_prewarm(b.vk, gk, ng, &failed, err);
    }
    if (!rc)
        vkr_seal_save(b.vk);
    struct vkr_arena *act = NULL;
    if (!rc)
        rc = vkr_arena_create(b.vk, "roofline", VKR_ARENA_WEIGHTS, &act, err);
    if (!rc)
        rc = roofline(&b, act, err);
    vkr_arena_destroy(act);
    if (!rc && (!o->only || strcmp(o->only, "matmul") == 0))
        rc = bench_matmul(&b, err);
    if (!rc && (!o->only || strcmp(o->only, "gemm") == 0 || strcmp(o->only, "split") == 0)) {
        b.inner = 8; /* the GEMM lines only: 8 products per submission (timed) */
        rc = bench_gemm(&b, err);
        if (!rc && !(o->only && strcmp(o->only, "split") == 0))
            rc = bench_gemm_i8(&b, err);
        b.inner = 1;
    }
    if (!rc && (!o->only || strcmp(o->only, "attention") == 0))
        rc = bench_attention(&b, err);
    struct vkr_stats s;
    vkr_get_stats(b.vk, &s);
    if (!rc)
        fprintf(out, "{\"bench\":\"ops\",\"op\":\"summary\",\"device\":\"%s\",\"pipelines\":%u,"
                     "\"requests_after_seal\":%" PRIu64 ",\"validation_messages\":%" PRIu64
                     ",\"timestamps\":%d}\n",
                b.dev, s.pipelines_built, s.pipeline_requests_after_seal, s.validation_messages,
                vkr_features(b.vk)->timestamps);
    vkr_close(b.vk);
    return rc;
}

static const char OPS_USAGE[] =
    "usage: bench ops [--quick] [--device SPEC] [--allow-cpu] [--reps N] [--serial-pipelines]\n"
    "                 [--only roofline|matmul|gemm|split|attention] [--dtype TYPE]\n"
    "                 [--where SHAPES]   (GEMM shapes or attention cases by name, e.g.\n"
    "                                     text,vision_qkv; vision_full)\n"
    "                 [--tiles WORDS]    (--only gemm: the configurations whose name holds\n"
    "                                     one of the words, e.g. cm2:,K=)\n"
    "\n"
    "Matmul per weight type at LLM shapes and attention at vision/text sizes:\n"
    "GFLOP/s, GB/s and the fraction of the roofline measured in the same run.\n";

#define AT(m, type) CLI_AT(struct ops_tool_opts, m, type)
static const struct cli_opt OPS_OPTS[] = {
    {.name = "quick", .kind = CLI_FLAG, .off = AT(quick, int)},
    {.name = "device", .kind = CLI_STR, .off = AT(device, const char *)},
    {.name = "allow-cpu", .kind = CLI_FLAG, .off = AT(allow_cpu, int)},
    {.name = "reps", .kind = CLI_INT, .off = AT(reps, int), .min = 1, .max = 1000},
    {.name = "only", .kind = CLI_STR, .off = AT(only, const char *)},
    {.name = "dtype", .kind = CLI_STR, .off = AT(dtype, const char *)},
    {.name = "where", .kind = CLI_STR, .off = AT(where, const char *)},
    {.name = "tiles", .kind = CLI_STR, .off = AT(tiles, const char *)},
    {.name = "serial-pipelines", .kind = CLI_FLAG, .off = AT(serial, int)},
};
#undef AT

int ops_bench_main(const char *prog, int argc, char **argv, FILE *out)
{
    const struct cli_cmd cmd = {.name = "bench ops", .prog = prog, .usage = OPS_USAGE, .opts = OPS_OPTS,
                                .nopts = sizeof OPS_OPTS / sizeof OPS_OPTS[0]};
    struct ops_tool_opts o = {0};
    int pos, prc = cli_parse(&cmd, &o, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    struct folio_err err = {0};
    if (ops_bench(&o, out, &err) != 0) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
