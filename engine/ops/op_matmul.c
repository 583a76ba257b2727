/*
 * Matmul of quantized or float weights with f32 activations.
 *
 * Kernels: matvec (m <= 8, one workgroup per weight row: the decode path),
 * tiled (64x64 shared-memory tiles, weights dequantized while staged) and,
 * where built and supported, an f16 cooperative-matrix kernel
 * (GL_NV_cooperative_matrix) for the tensor cores.
 *
 * Ranges: a weight larger than maxStorageBufferRange is dispatched in
 * chunks of whole rows; activations and outputs likewise in chunks of
 * activation rows. Each chunk binds at an offset aligned down to
 * minStorageBufferOffsetAlignment and passes the remainder to the shader,
 * since a chunk of Q6_K rows (210-byte blocks) rarely starts aligned.
 */
#include "engine/ops/ops_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct mm_push {
    uint32_t K, N, M, w_skip, row_bytes, x_skip, y_skip, ldy, y_col0, b_skip, has_bias;
};

/* ---------------------------------------------------------------- GEMM
 * Three tensor-core routes, best first, the choice made from what the
 * device reports (and FOLIO_GEMM_ROUTE=cm2|khr|nv|none for tests and
 * benchmarks):
 *   cm2  gemm_cm2.comp, VK_NV_cooperative_matrix2: one workgroup-scope
 *        matrix per output tile, the driver stages A and B;
 *   khr  gemm_khr.comp, VK_KHR_cooperative_matrix (NVIDIA, AMD, Intel):
 *        subgroup-scope 16x16 fragments staged through shared memory by
 *        the kernel (gemm_cm.glsl);
 *   nv   gemm_cm.comp, the same kernel on VK_NV_cooperative_matrix (what
 *        Debian 12's glslc compiles).
 * Without any, matmul takes the cooperative-matrix (matmul_cm) or tiled
 * kernels. Configurations are numbered across the routes: the subgroup
 * table once for nv and once for khr, then the cm2 table. */
enum gemm_route { GEMM_NONE, GEMM_NV, GEMM_KHR, GEMM_CM2 };
static const char *const ROUTE_NAME[] = {"none", "nv", "khr", "cm2"};

/* Weight rows per matvec workgroup (shaders/matvec.comp NR): each
 * workgroup reads the activation rows once for NR weight rows. On lavapipe
 * 4 rows took the label pass's LM head from 96-97 to 47-64 ms
 * (BENCHMARKS.md, "matvec with several weight rows per workgroup"); a GPU
 * keeps 1 until measured there. FOLIO_MATVEC_NR=1|2|4|8 forces it. */
uint32_t ops_matvec_rows(const struct vkr *vk)
{
    const char *e = getenv("FOLIO_MATVEC_NR");
    if (e && (!strcmp(e, "1") || !strcmp(e, "2") || !strcmp(e, "4") || !strcmp(e, "8")))
        return (uint32_t)atoi(e);
    return ops_on_cpu(vk) ? 4 : 1;
}

/* The keys of the kernels this op dispatches besides the GEMM tables: the
 * dispatch and ops_keys.c's pre-warm list both ask here. */
struct vkr_pipeline_key ops_mm_key(const struct vkr *vk, enum op_mm_kernel kern, int wtype)
{
    /* matvec's workgroup: 128 threads reduce one row on a GPU; a CPU
     * device (lavapipe) runs a workgroup's invocations as SIMD lanes and
     * switches between them at every barrier, so there a workgroup of one
     * 8-lane vector with 3 reduction steps instead of 7 (the LM head's
     * matvec over the vocabulary was ~90 % of a label pass on lavapipe) */
    if (kern == OP_MM_MATVEC) {
        struct vkr_pipeline_key k = ops_key("matvec", 3, (uint32_t)wtype,
                                            ops_on_cpu(vk) ? 8 : 128);
        k.spec[2] = ops_matvec_rows(vk);
        return k;
    }
    return ops_key(kern == OP_MM_TILED ? "matmul" : "matmul_cm", 1, (uint32_t)wtype, 0);
}
struct vkr_pipeline_key ops_dequant_key(int wtype) { return ops_key("dequant_f16", 1, (uint32_t)wtype, 0); }
struct vkr_pipeline_key ops_splitk_key(int f16_out) { return ops_key("splitk", 1, f16_out != 0, 0); }

/* Subgroup-scope tile configurations (nv, khr): subgroups along M and N,
 * 16x16 fragments per subgroup along M and N, K per step, shared stages,
 * probe (measurement-only variants, results not valid: never picked),
 * K steps fetched ahead (0 or 1: one; 2: two, with one stage). */
static const uint32_t GEMM_CFG[][8] = {
    {2, 2, 4, 4, 32, 2, 0}, /* 128x128, 4 subgroups of 64x64 */
    {1, 2, 4, 4, 32, 2, 0}, /* 64x128: twice the workgroups for few output tiles */
    {2, 4, 4, 4, 32, 1, 0}, /* 128x256, 8 subgroups, one stage */
    {2, 2, 4, 4, 64, 1, 0}, /* 128x128, K step 64, one stage */
    {4, 2, 2, 4, 32, 2, 0}, /* 128x128, 8 subgroups of 32x64 */
    {2, 4, 4, 2, 32, 2, 0}, /* 128x128, 8 subgroups of 64x32 */
    {1, 4, 4, 4, 32, 1, 0}, /* 64x256, one stage */
    {1, 2, 2, 2, 32, 2, 0}, /* 32x64: label passes (a few dozen rows, weight-bound) */
    {1, 4, 2, 2, 64, 1, 0}, /* 32x128, K step 64 */
    {2, 4, 4, 2, 64, 1, 0}, /* AUTO's shape, K step 64, one stage: twice the bytes in flight */
    {4, 2, 2, 4, 64, 1, 0}, /* 8 subgroups of 32x64, K step 64, one stage */
    {4, 4, 2, 2, 64, 1, 0}, /* 16 subgroups of 32x32, K step 64, one stage */
    {2, 4, 4, 2, 32, 1, 0}, /* AUTO's shape, K step 32, one stage */
    {2, 4, 4, 2, 32, 2, 1}, /* probe: AUTO's shape, the tensor-core math alone */
    {2, 4, 4, 2, 32, 2, 2}, /* probe: AUTO's shape, the global -> shared traffic alone */
    /* two K steps fetched ahead (PREF 2), one stage */
    {4, 4, 2, 2, 64, 1, 0, 2}, /* 15: AUTO's wide shape */
    {2, 4, 4, 2, 64, 1, 0, 2},
    {4, 2, 2, 4, 64, 1, 0, 2},
    {2, 2, 4, 4, 64, 1, 0, 2},
    {1, 4, 2, 2, 64, 1, 0, 2}, /* AUTO's narrow shape */
    {2, 4, 2, 2, 64, 1, 0, 2}, /* 20: 64x128, 8 subgroups: two workgroups per multiprocessor */
    {4, 4, 2, 2, 32, 1, 0, 2},
    {2, 4, 2, 2, 64, 1, 0, 0}, /* 64x128 one ahead */
    {4, 4, 2, 2, 64, 1, 1, 0}, /* probes of AUTO's wide shape: the math alone, */
    {4, 4, 2, 2, 64, 1, 2, 0}, /* the loads alone, */
    {4, 4, 2, 2, 64, 1, 2, 2}, /* 25: the loads alone two ahead */
};
#define SG_NCFG ((int)(sizeof GEMM_CFG / sizeof GEMM_CFG[0]))
/* The subgroup configurations AUTO uses, measured on the H200 with the GPU
 * kept busy (BENCHMARKS.md "Engine speed III, continued": bench ops --only
 * gemm, 8 GEMMs per submission): 8 subgroups of 64x32 in a 128x128 tile,
 * K step 64, one stage, two steps fetched ahead for the prefill and merger
 * shapes (text q/o 151, down 201, merger 164-176 TFLOP/s, against 141 / 178 /
 * 151-161 for the earlier 16 x 32x32 one ahead); 8 subgroups of 32x32 in a
 * 64x128 tile, two ahead, for few output columns (k/v projections: n <= 512,
 * 96 against 87); 4 subgroups of 32x32 in a 32x128 tile for few rows (label
 * passes: m <= 64). */
#define SG_AUTO_WIDE 16
#define SG_AUTO_FEW_N 20
#define SG_AUTO_FEW_M 8
/* FOLIO_GEMM_TILE=WIDE[,NARROW]: subgroup-table rows AUTO takes instead
 * (NARROW for both narrow cases; benchmarks compare candidate AUTO tiles end
 * to end in one run; a probe row is refused). */
enum sg_use { SG_WIDE, SG_FEW_N, SG_FEW_M };
static int sg_auto_env(int narrow)
{
    const char *e = getenv("FOLIO_GEMM_TILE");
    if (!e || !*e)
        return -1;
    char *end;
    long w = strtol(e, &end, 10), n = *end == ',' ? strtol(end + 1, NULL, 10) : -1;
    long v = narrow ? n : w;
    if (v < 0 || v >= SG_NCFG || GEMM_CFG[v][6])
        return -1;
    return (int)v;
}
static enum sg_use sg_use_for(uint32_t m, uint32_t n)
{
    return m <= 64 ? SG_FEW_M : n <= 512 ? SG_FEW_N : SG_WIDE;
}

/* Workgroup-scope configurations (cm2): tile M, N, K step, invocations,
 * f16 accumulation (K per f16 chunk before promotion into f32; 0 = f32),
 * 16-byte views of A and B (needs skips and K in multiples of 8 halves),
 * K fixed at pipeline creation (0: any K). W is read as its N x K rows
 * through a transposing view: B row-major from a K x N copy made at load
 * ran at about half the rate on the H100 (the K-specialized kernel at text
 * gate/up, 109 against 196 TFLOP/s), so there is no such copy. */
#define CM2_NCOL 7
static const uint32_t CM2_CFG[][CM2_NCOL] = {
    {128, 128, 32, 128, 0},
    {128, 128, 64, 128, 0},
    {128, 256, 32, 256, 0},
    {256, 128, 32, 256, 0},
    {128, 128, 32, 256, 0},
    {128, 256, 64, 256, 0},
    {64, 128, 32, 128, 0},
    {128, 64, 32, 128, 0},
    {64, 256, 32, 128, 0},
    {256, 256, 32, 256, 0},
    {128, 128, 32, 128, 128}, /* f16 accumulation, promoted every 128 */
    {128, 128, 64, 128, 256},
    {128, 256, 32, 256, 128},
    {256, 128, 32, 256, 128},
    {128, 128, 32, 128, 0, 1},
    {128, 256, 32, 256, 0, 1},
    {128, 128, 32, 128, 128, 1},
    /* K fixed: does the driver stage better when it knows the stride and trip count? */
    {128, 128, 32, 128, 0, 0, 3584},
    {128, 128, 32, 128, 0, 1, 3584},
    {128, 256, 32, 256, 0, 0, 3584},
    {128, 128, 64, 128, 0, 0, 3584},
    {128, 128, 32, 256, 0, 0, 3584},
    {128, 128, 32, 128, 128, 0, 3584},
    {128, 128, 32, 128, 0, 0, 1280},
    {128, 256, 32, 256, 0, 0, 1280},
    /* K past CM2K_MAX_K, which AUTO never specializes: text down (18,944)
     * and the vision merger (5,120), for bench ops to compare */
    {128, 128, 32, 128, 0, 0, 18944},
    {128, 128, 32, 128, 0, 0, 5120},
    /* smaller K-fixed tiles for passes of a few hundred rows (one 512^2
     * page's 391-row prompt: four 128-row tiles, the last of 7 rows) */
    {64, 128, 32, 128, 0, 0, 3584},
    {128, 64, 32, 128, 0, 0, 3584},
    {64, 256, 32, 256, 0, 0, 3584},
    {64, 128, 64, 128, 0, 0, 3584},
    {64, 128, 32, 128, 0, 0, 18944},
    {128, 64, 32, 128, 0, 0, 18944},
    /* 112 columns: a 3,584-column product at one page's 1,400 rows is
     * 11 x 32 = 352 output tiles, 2.7 waves of 132 multiprocessors, where
     * 128 columns make 308 (2.3 waves: a third of the last wave busy). On
     * the H100 (run 21) 17-30 % faster than the same tile 128 columns
     * wide (down 145 against 112 TFLOP/s), still below AUTO's (205); the
     * 256-invocation form is AUTO's kind for q/k/v (not measured yet) */
    {128, 112, 32, 128, 0, 0, 3584},
    {128, 112, 32, 128, 0, 0, 18944},
    {128, 112, 32, 256, 0, 0, 3584},
    /* 160 rows: 1,400 rows in 9 row tiles, a 3,584-column product's 252
     * output tiles 1.9 waves (not measured yet) */
    {160, 128, 32, 256, 0, 0, 3584},
    {160, 128, 32, 256, 0, 0, 18944},
    /* 80 rows: one 512^2 page's 391-row prompt in 5 row tiles of which 2 %
     * is padding, where 128-row tiles make 4 and pad 24 % (the last holds 7
     * rows), 64-row ones 7 and 13 % (not measured yet) */
    {80, 128, 32, 128, 0, 0, 3584},
    {80, 128, 32, 128, 0, 0, 18944},
    {80, 256, 32, 256, 0, 0, 3584},
};
#define CM2_NCFG ((int)(sizeof CM2_CFG / sizeof CM2_CFG[0]))
#define CM2_AUTO 0
/* The cm2 configuration built per K for a model's own shapes
 * (ops_gemm_keys_for_k, K <= CM2K_MAX_K): with K fixed at pipeline creation
 * the driver stages the workgroup-scope loads 3-4x faster than with K from
 * push constants (BENCHMARKS.md, issue 29). Measured on the H200 with the
 * GPU kept busy it beats the subgroup kernel for the vision tower's K = 1280
 * (qkv 189 against 126, gate/up 167 against 121 TFLOP/s) and for the text
 * gate/up product (K = 3584, n = 18944: 198 against 186), and loses for
 * text q/o (116 against 151) and long K, so AUTO takes it for m >= CM2K_MIN_M
 * and either K <= CM2K_SHORT_K with n >= CM2K_MIN_N or n >= CM2K_WIDE_N. */
#define CM2_KAUTO 0
/* AUTO's K-fixed row: CM2_KAUTO, or FOLIO_GEMM_KAUTO=N, row N of the table
 * (its tile and accumulation at the model's K), for A/B runs of the model
 * against `bench ops` figures. */
static int cm2_kauto(void)
{
    const char *e = getenv("FOLIO_GEMM_KAUTO");
    char *end;
    long r = e ? strtol(e, &end, 10) : -1;
    return e && *e && !*end && r >= 0 && r < (long)(sizeof CM2_CFG / sizeof CM2_CFG[0]) ? (int)r : CM2_KAUTO;
}
#define CM2K_MIN_N 1024
#define CM2K_MIN_M 256
#define CM2K_SHORT_K 2048
#define CM2K_WIDE_N 8192
#define CM2K_MAX_K 4096
static int cm2k_wanted(uint32_t m, uint32_t n, uint32_t k)
{
    /* FOLIO_GEMM_CM2K=all: every product of m >= CM2K_MIN_M rows and
     * K <= CM2K_MAX_K (benchmarks comparing the rule with the kernel at
     * every shape it can take) */
    const char *e = getenv("FOLIO_GEMM_CM2K");
    if (e && strcmp(e, "all") == 0)
        return m >= CM2K_MIN_M && k <= CM2K_MAX_K;
    return m >= CM2K_MIN_M && k <= CM2K_MAX_K &&
           ((k <= CM2K_SHORT_K && n >= CM2K_MIN_N) || n >= CM2K_WIDE_N);
}
int ops_gemm_k_fixed_rule(uint32_t m, uint32_t n, uint32_t k) { return cm2k_wanted(m, n, k); }
#define GEMM_NCFG (2 * SG_NCFG + CM2_NCFG)

static int cm2_k_usable(const struct vkr *vk);
uint32_t ops_rows_all_variants(const struct vkr *vk)
{
    /* Where no GEMM, matrix-core matmul or tensor-core attention can be
     * taken (Debian 12's lavapipe; any device with FOLIO_GEMM_ROUTE=none
     * and no NV cooperative matrices) the one row class left is
     * matrix-vector's (m <= 8, op_matmul_pick): the warm-up's tall pass
     * needs 9 rows, not 128 (on lavapipe its two pages of 336 px were most
     * of a 9-20 s warm-up). What can be taken, not what the device has:
     * the attention's tensor-core kernels need NV's matrices (cm_ok,
     * cm2_ok). */
    if (!ops_gemm_available(vk) && !ops_gemm_i8_available(vk) && !ops_coopmat_available(vk) &&
        !vkr_features(vk)->coopmat2_nv)
        return 9;
    /* the subgroup GEMM's narrow tiles end at 64 rows (sg_use_for) */
    uint32_t r = OPS_ATTN_TC_MIN_TQ > 65 ? OPS_ATTN_TC_MIN_TQ : 65;
    return cm2_k_usable(vk) && CM2K_MIN_M > r ? CM2K_MIN_M : r;
}

static enum gemm_route cfg_route(int c) { return c < SG_NCFG ? GEMM_NV : c < 2 * SG_NCFG ? GEMM_KHR : GEMM_CM2; }
static const uint32_t *sg_cfg(int c) { return GEMM_CFG[c % SG_NCFG]; }
static const uint32_t *cm2_cfg(int c) { return CM2_CFG[c - 2 * SG_NCFG]; }

int ops_gemm_configs(void) { return GEMM_NCFG; }

static uint32_t cfg_bm(int c)
{
    return cfg_route(c) == GEMM_CM2 ? cm2_cfg(c)[0] : 16 * sg_cfg(c)[0] * sg_cfg(c)[2];
}
static uint32_t cfg_bn(int c)
{
    return cfg_route(c) == GEMM_CM2 ? cm2_cfg(c)[1] : 16 * sg_cfg(c)[1] * sg_cfg(c)[3];
}

void ops_gemm_config_name(int c, char *out, size_t n)
{
    static const char *const probe[] = {"", "+math-only", "+loads-only"};
    if (c < 0 || c >= GEMM_NCFG) {
        snprintf(out, n, "auto");
        return;
    }
    if (cfg_route(c) == GEMM_CM2) {
        const uint32_t *g = cm2_cfg(c);
        char acc[24] = "f32acc";
        if (g[4])
            snprintf(acc, sizeof acc, "f16acc%u", g[4]);
        char kc[24] = "";
        if (g[6])
            snprintf(kc, sizeof kc, "/K=%u", g[6]);
        snprintf(out, n, "cm2:%ux%u/bk%u/t%u/%s%s%s", g[0], g[1], g[2], g[3], acc, g[5] ? "/vec16" : "", kc);
        return;
    }
    const uint32_t *g = sg_cfg(c);
    snprintf(out, n, "%s:%ux%u/%uw-%ux%u/bk%u/s%u%s%s", ROUTE_NAME[cfg_route(c)], cfg_bm(c), cfg_bn(c),
             g[0] * g[1], 16 * g[2], 16 * g[3], g[4], g[5], g[7] == 2 ? "/ahead2" : "", probe[g[6]]);
}

/* Lanes per subgroup of the subgroup kernels' pipelines on this device. */
static uint32_t sg_lanes(const struct vkr *vk) { return vkr_limits(vk)->subgroup_size; }

/* 1 when a subgroup kernel's tile fits the device (gemm_cm.glsl, f16 or
 * int8 alike in bytes): its workgroup of `subgroups` subgroups within the
 * invocation limit and sharing each K step's 16-byte loads out evenly
 * (A_PER, B_PER: kvec vectors a tile row and step), and its shared memory:
 * the stages of A and B rows (each padded by one vector) and the epilogue's
 * scratch, which lives in the A stages where they are large enough. */
static int sg_tile_fits(const struct vkr *vk, uint32_t bm, uint32_t bn, uint32_t kvec, uint32_t stages,
                        uint32_t subgroups)
{
    uint32_t nt = sg_lanes(vk) * subgroups;
    if (nt == 0 || nt > vkr_limits(vk)->max_wg_invocations || (bm * kvec) % nt || (bn * kvec) % nt)
        return 0;
    uint64_t stages_a = (uint64_t)stages * bm * (kvec + 1), scratch = (uint64_t)subgroups * 64;
    uint64_t vec = stages_a + (uint64_t)stages * bn * (kvec + 1) + (stages_a >= scratch ? 1 : scratch);
    return vec * 16 <= vkr_limits(vk)->max_shared;
}

/* 1 when configuration c fits the device (a K step of g[4] halves: g[4] / 8
 * vectors). */
static int sg_fits(const struct vkr *vk, int c)
{
    const uint32_t *g = sg_cfg(c);
    return sg_tile_fits(vk, cfg_bm(c), cfg_bn(c), g[4] / 8, g[5], g[0] * g[1]);
}

/* On a CPU device (lavapipe 26's cooperative matrices) every use takes the
 * table's 32x64 row: LLVM compiles a variant at its first dispatch in time
 * that grows with the tile's unrolled fragments (one idle core: AUTO's
 * 64x128 and 32x128 rows 99 and 54 s a variant, this one 20 s; the op
 * tests' GEMM groups 750 -> 170 s, the text parity kit 378 -> 26 s on a cold
 * Mesa cache), and a CPU runs no faster on a larger tile. */
#define SG_CPU 7

/* AUTO's subgroup configuration for use u on this device: the measured one
 * (SG_AUTO_*, or FOLIO_GEMM_TILE's), SG_CPU on a CPU device, or where that
 * does not fit (shared memory, subgroup width) the first of a few smaller
 * tiles that does. */
static int sg_pick(const struct vkr *vk, enum sg_use u)
{
    static const int table[] = {SG_AUTO_WIDE, SG_AUTO_FEW_N, SG_AUTO_FEW_M};
    static const int smaller[] = {12, 1, 7}; /* 128x128 K32 one stage, 64x128, 32x64 */
    int v = sg_auto_env(u != SG_WIDE);
    if (v < 0)
        v = ops_on_cpu(vk) ? SG_CPU : table[u];
    for (size_t i = 0; !sg_fits(vk, v) && i < sizeof smaller / sizeof smaller[0]; i++)
        if (sg_fits(vk, smaller[i]))
            v = smaller[i];
    return v;
}

/* 1 when the subgroup kernels' lane arithmetic holds: a subgroup of 32
 * lanes, or of the device's one fixed width (gemm_cm.glsl's SG). */
static int sg_lanes_ok(const struct vkr *vk)
{
    const struct vkr_limits *L = vkr_limits(vk);
    return L->subgroup_size == 32 ||
           (L->subgroup_min == L->subgroup_size && L->subgroup_max == L->subgroup_size &&
            L->subgroup_size >= 8 && L->subgroup_size <= 64);
}

/* The device and build offer this route (its AUTO configuration included). */
static int route_has(const struct vkr *vk, enum gemm_route r)
{
    const struct vkr_features *f = vkr_features(vk);
    if (!f->storage_16bit)
        return 0;
    switch (r) {
    case GEMM_NV:
        return ops_coopmat_available(vk) && vkr_has_shader("gemm_cm") && sg_fits(vk, sg_pick(vk, SG_WIDE));
    case GEMM_KHR:
        return f->coopmat_khr && sg_lanes_ok(vk) && vkr_has_shader("gemm_khr") &&
               sg_fits(vk, sg_pick(vk, SG_WIDE));
    case GEMM_CM2: {
        /* f32 inputs are no workgroup matrix shape: they take a subgroup route */
        const uint32_t *g = CM2_CFG[CM2_AUTO];
        return f->coopmat2_nv && vkr_has_shader("gemm_cm2") &&
               vkr_coopmat2_shape_ok(vk, g[0], g[2], g[1], g[4] != 0, g[3]) &&
               (route_has(vk, GEMM_KHR) || route_has(vk, GEMM_NV));
    }
    default:
        return 0;
    }
}

int ops_gemm_config_fits(const struct vkr *vk, int c)
{
    if (c < 0 || c >= GEMM_NCFG || !route_has(vk, cfg_route(c)))
        return 0;
    if (cfg_route(c) != GEMM_CM2)
        return sg_fits(vk, c);
    const uint32_t *g = cm2_cfg(c);
    return g[3] <= vkr_limits(vk)->max_wg_invocations &&
           vkr_coopmat2_shape_ok(vk, g[0], g[2], g[1], g[4] != 0, g[3]);
}

void ops_gemm_config_info(int c, int *acc16, int *probe, int *k_mult)
{
    *acc16 = 0;
    *probe = 0;
    *k_mult = 2;
    if (c < 0 || c >= GEMM_NCFG)
        return;
    if (cfg_route(c) == GEMM_CM2) {
        const uint32_t *g = cm2_cfg(c);
        *acc16 = (int)g[4];
        *k_mult = g[5] ? 8 : 2;
        if (g[6]) /* only that K: a multiple of itself, and the caller checks k == it */
            *k_mult = -(int)g[6];
        return;
    }
    *probe = sg_cfg(c)[6] != 0;
}

/* FOLIO_GEMM_ROUTE: 0 when unset or "auto", else 1 with *r the route named
 * (GEMM_NONE for "none" or a name this build does not know: no GEMM). */
static int forced_route(enum gemm_route *r)
{
    const char *e = getenv("FOLIO_GEMM_ROUTE");
    if (!e || !*e || strcmp(e, "auto") == 0)
        return 0;
    *r = GEMM_NONE;
    for (int i = GEMM_NV; i <= GEMM_CM2; i++)
        if (strcmp(e, ROUTE_NAME[i]) == 0)
            *r = (enum gemm_route)i;
    return 1;
}

static enum gemm_route gemm_route(const struct vkr *vk)
{
    enum gemm_route f;
    if (forced_route(&f))
        return f != GEMM_NONE && route_has(vk, f) ? f : GEMM_NONE;
    /* Measured order on the H200 (BENCHMARKS.md): khr, then nv (the same
     * kernel, within noise), then cm2 (correct, but a third of khr's rate
     * with this kernel: AUTO takes it only where it is the one route). */
    static const enum gemm_route order[] = {GEMM_KHR, GEMM_NV, GEMM_CM2};
    for (int i = 0; i < 3; i++)
        if (route_has(vk, order[i]))
            return order[i];
    return GEMM_NONE;
}

const char *ops_gemm_route_name(const struct vkr *vk)
{
    enum gemm_route r = gemm_route(vk);
    if (r != GEMM_CM2 && r != GEMM_NONE && cm2_k_usable(vk))
        return r == GEMM_KHR ? "khr+cm2k" : "nv+cm2k";
    return ROUTE_NAME[r];
}

/* The configuration AUTO takes on a route (sg: one of the subgroup table's
 * AUTO entries). */
static int auto_cfg(enum gemm_route r, int sg)
{
    return r == GEMM_CM2 ? 2 * SG_NCFG + CM2_AUTO : r == GEMM_KHR ? SG_NCFG + sg : sg;
}

/* AUTO's configuration for an m x n product: f32 inputs on a cm2 device go
 * to the subgroup kernel (KHR first). */
static int auto_cfg_for(const struct vkr *vk, int f32_input, uint32_t m, uint32_t n)
{
    enum gemm_route r = gemm_route(vk);
    if (r == GEMM_CM2 && f32_input)
        r = route_has(vk, GEMM_KHR) ? GEMM_KHR : GEMM_NV;
    return auto_cfg(r, sg_pick(vk, sg_use_for(m, n)));
}

int ops_gemm_available(const struct vkr *vk) { return gemm_route(vk) != GEMM_NONE; }

enum op_mm_kernel op_matmul_pick(const struct vkr *vk, int wtype, uint32_t m)
{
    if (m <= 8)
        return OP_MM_MATVEC;
    if (m >= 64 && wtype == QUANT_F16 && ops_gemm_available(vk))
        return OP_MM_GEMM;
    if (m >= 64 && wtype == QUANT_I8R && ops_gemm_i8_available(vk))
        return OP_MM_GEMM;
    if (m >= 64 && ops_coopmat_available(vk))
        return OP_MM_COOPMAT;
    return OP_MM_TILED;
}

/* cm2 pipeline of table row g with K fixed at kc (0: the row's own). */
static struct vkr_pipeline_key cm2_key(uint32_t ytype, const uint32_t *g, uint32_t kc)
{
    struct vkr_pipeline_key k = ops_key("gemm_cm2", 2, 1, ytype);
    k.nspec = 2 + CM2_NCOL;
    for (int i = 0; i < CM2_NCOL; i++)
        k.spec[2 + i] = g[i];
    if (kc)
        k.spec[8] = kc;
    return k;
}

/* 1 when the device has the cm2 kernel at all (any forced route aside). */
static int cm2_k_usable(const struct vkr *vk)
{
    enum gemm_route f;
    return (!forced_route(&f) || f == GEMM_CM2) && route_has(vk, GEMM_CM2);
}

int ops_gemm_keys_for_k(const struct vkr *vk, uint32_t k, uint32_t n_max,
                        struct vkr_pipeline_key *out)
{
    /* the rule is widest for the tallest pass: no m makes it take more */
    if (!cm2_k_usable(vk) || k == 0 || k % 2 || !cm2k_wanted(UINT32_MAX, n_max, k))
        return 0;
    const uint32_t *g = CM2_CFG[cm2_kauto()];
    out[0] = cm2_key(0, g, k);
    out[1] = cm2_key(1, g, k);
    return 2;
}

/* gemm_cm.glsl's key (its 13 specialization constants) for a subgroup tile
 * t in GEMM_CFG's layout {WM, WN, FM, FN, BK, stages, probe, ahead}, with
 * shader the f16 routes' gemm_cm / gemm_khr or the int8 gemm_i8_khr. */
static struct vkr_pipeline_key sg_key(const struct vkr *vk, const char *shader, uint32_t xtype,
                                      uint32_t ytype, uint32_t align, const uint32_t *t)
{
    struct vkr_pipeline_key k = ops_key(shader, 2, xtype, ytype);
    k.nspec = 13;
    k.spec[2] = align;
    k.spec[3] = t[0];
    k.spec[4] = t[1];
    k.spec[5] = sg_lanes(vk) * t[0] * t[1];
    for (int i = 2; i < 7; i++) /* FM, FN, BK, stages, probe */
        k.spec[i + 4] = t[i];
    k.spec[11] = t[7] ? t[7] : 1;
    k.spec[12] = sg_lanes(vk);
    return k;
}

struct vkr_pipeline_key ops_gemm_key(const struct vkr *vk, uint32_t xtype, uint32_t ytype,
                                     uint32_t align, int c)
{
    if (cfg_route(c) == GEMM_CM2) {
        (void)xtype; /* f16 inputs only */
        return cm2_key(ytype, cm2_cfg(c), 0);
    }
    return sg_key(vk, cfg_route(c) == GEMM_KHR ? "gemm_khr" : "gemm_cm", xtype, ytype, align, sg_cfg(c));
}

/* Every form a model can ask for of configuration c: f16 and f32 inputs,
 * f32 and f16 outputs, and (subgroup routes) each load width. */
static int cfg_keys(const struct vkr *vk, int c, int all_forms, struct vkr_pipeline_key *out)
{
    static const uint32_t aligns[] = {8, 4, 2};
    int n = 0, na = cfg_route(c) == GEMM_CM2 ? 1 : 3;
    for (uint32_t xt = all_forms ? 0 : 1; xt < 2; xt++)
        for (uint32_t yt = 0; yt < (all_forms ? 2u : 1u); yt++)
            for (int a = 0; a < na; a++)
                out[n++] = ops_gemm_key(vk, xt, yt, aligns[a], c);
    return n;
}

int ops_gemm_config_keys(const struct vkr *vk, int c, struct vkr_pipeline_key *out)
{
    return c >= 0 && c < GEMM_NCFG ? cfg_keys(vk, c, 0, out) : 0;
}

int ops_gemm_keys_all(const struct vkr *vk, int all_configs, struct vkr_pipeline_key *out)
{
    enum gemm_route r = gemm_route(vk);
    if (r == GEMM_NONE)
        return 0;
    int n = 0, own[4], nown = 0;
    if (r == GEMM_CM2) { /* f16 inputs on cm2 (both outputs), f32 inputs on the subgroup route */
        own[nown++] = auto_cfg(r, sg_pick(vk, SG_WIDE));
        n += cfg_keys(vk, own[0], 0, out);
        out[n++] = ops_gemm_key(vk, 1, 1, 8, own[0]);
        r = route_has(vk, GEMM_KHR) ? GEMM_KHR : GEMM_NV;
    }
    own[nown++] = auto_cfg(r, sg_pick(vk, SG_WIDE));
    own[nown++] = auto_cfg(r, sg_pick(vk, SG_FEW_N));
    own[nown++] = auto_cfg(r, sg_pick(vk, SG_FEW_M));
    for (int i = nown - 3; i < nown; i++) {
        int dup = 0;
        for (int j = nown - 3; j < i; j++)
            dup |= own[j] == own[i];
        if (!dup)
            n += cfg_keys(vk, own[i], 1, &out[n]);
    }
    /* the split-K sum, for either output type */
    out[n++] = ops_splitk_key(0);
    out[n++] = ops_splitk_key(1);
    if (all_configs) /* the benchmark: every configuration of every route, f16 in, f32 out */
        for (int c = 0; c < GEMM_NCFG; c++) {
            int mine = 0;
            for (int i = 0; i < nown; i++)
                mine |= c == own[i];
            if (!mine && ops_gemm_config_fits(vk, c))
                n += cfg_keys(vk, c, 0, &out[n]);
        }
    return n;
}

int ops_gemm_keys(const struct vkr *vk, struct vkr_pipeline_key *out)
{
    return ops_gemm_keys_all(vk, 0, out);
}

struct gemm_push {
    uint32_t K, N, M, w_skip, x_skip, y_skip, ldy, y_col0, b_skip, r_skip, flags, kper, zstride;
};
struct splitk_push {
    uint32_t M, N, S, p_skip, y_skip, ldy, y_col0, b_skip, r_skip, flags;
};

/* ---- split K ----
 * A product with few output tiles leaves multiprocessors idle however long
 * its K: a label pass (48 rows) has 2 x 28 = 56 tiles of 32 x 128 for its
 * q/o and down products on the H200's 132 multiprocessors. Split in S
 * slices of K, each tile's sum is S shorter tiles whose f32 partials a
 * second pass (splitk.comp) adds in a fixed order and hands to the
 * epilogue. Measured on the H200 (BENCHMARKS.md "Split K", bench ops
 * --only split, GPU kept busy), TFLOP/s at 1 / 2 / 3 / 4 slices:
 *   labels down   48 x 3584 x 18944:  26 /  47 /  60 /  72
 *   labels q/o    48 x 3584 x 3584:   31 /  40 /  36 /  38
 *   labels gate/up (296 tiles):       56 /  57 /  55 /  53
 *   text down   1400 x 3584 x 18944: 201 / 218 / 215 / 192
 *   text q/o    1400 x 3584 x 3584:  151 / 127 / 108 /  89
 * and worse at every other prefill and vision shape. So the round-filling
 * argument (308 tiles = 2.33 rounds at q/o) does not hold: several wide
 * tiles are resident per multiprocessor and the partials' traffic costs
 * more than the part-filled round. The rule keeps what was measured to
 * win: fewer tiles than multiprocessors take enough slices for about two
 * rounds (the label pass: 40.4 -> 30.9 GPU ms). The 8 % at text down did
 * not carry over: with down split in 2 the prefill gained 1 % but the
 * fused page pass (1,448 rows) lost 3 ms in the same run, so long K alone
 * does not split. */
#define SPLIT_BYTES (64ull << 20)
#define SPLIT_MAX 8
#define SPLIT_MIN_K 512 /* K per slice below which the tile's prologue and epilogue dominate */

/* FOLIO_GEMM_SPLIT: unset or "auto" takes the rule below, a number forces
 * that many slices (1: never split). Explicit op_matmul.split_k (tests,
 * benchmarks) is honoured either way. */
static const char *split_env(void)
{
    const char *e = getenv("FOLIO_GEMM_SPLIT");
    return e && *e ? e : "auto";
}

uint64_t op_matmul_split_bytes(const struct vkr *vk)
{
    const char *e = split_env();
    int on = strcmp(e, "auto") == 0 || strtol(e, NULL, 10) > 1;
    return on && ops_gemm_available(vk) && vkr_limits(vk)->compute_units ? SPLIT_BYTES : 0;
}

/* Slices for a chunk of `tiles` output tiles of a K-long product whose
 * partials take `slice_bytes` each. */
static uint32_t split_pick(const struct vkr *vk, uint64_t tiles, uint32_t k, uint32_t bk,
                           uint64_t slice_bytes, uint64_t scratch)
{
    uint32_t cap = SPLIT_MAX;
    if (slice_bytes && scratch / slice_bytes < cap)
        cap = (uint32_t)(scratch / slice_bytes);
    if (k / SPLIT_MIN_K < cap)
        cap = k / SPLIT_MIN_K;
    if (k / bk < cap)
        cap = k / bk;
    const char *e = split_env();
    if (strcmp(e, "auto") != 0) {
        long f = strtol(e, NULL, 10);
        return f >= 1 && (uint32_t)f <= cap ? (uint32_t)f : 1;
    }
    uint64_t slots = vkr_limits(vk)->compute_units;
    if (!slots || cap < 2 || tiles == 0)
        return 1;
    if (tiles >= slots)
        return 1;
    uint64_t s = (2 * slots + tiles - 1) / tiles;
    return s < cap ? (uint32_t)s : cap;
}

/* K per slice: a whole number of K steps, and the slice count it gives. */
static uint32_t split_kper(uint32_t k, uint32_t bk, uint32_t *s)
{
    uint32_t kper = ((k + *s - 1) / *s + bk - 1) / bk * bk;
    *s = (k + kper - 1) / kper;
    return kper;
}

/* Slices for an mc x nc chunk on tile configuration `tile` (1: no split;
 * the workgroup-scope cm2 kernel never splits): `forced` (op_matmul.split_k)
 * when set, else the rule above; *kper gets the K per slice. gemm() and
 * op_matmul_split_for both ask here, so the benchmark reports what runs. */
static uint32_t split_slices(const struct vkr *vk, int tile, uint32_t mc, uint32_t nc, uint32_t k,
                             uint64_t scratch, uint32_t forced, uint32_t *kper)
{
    if (cfg_route(tile) == GEMM_CM2 || forced == 1)
        return 1;
    uint32_t bk = sg_cfg(tile)[4];
    uint64_t tiles = (uint64_t)((nc + cfg_bn(tile) - 1) / cfg_bn(tile)) *
                     ((mc + cfg_bm(tile) - 1) / cfg_bm(tile));
    uint32_t s = forced ? forced : split_pick(vk, tiles, k, bk, (uint64_t)mc * nc * 4, scratch);
    if (s > 1)
        *kper = split_kper(k, bk, &s);
    return s;
}

/* The tensor-core GEMMs' tile order (gemm_tiles.glsl): bands of G row
 * tiles walked down first, so the tiles in flight together share each
 * weight tile through the L2 cache instead of each fetching its own (as
 * dispatched, one row of tiles runs across the columns and the weights
 * stream from memory once per row of tiles). op_matmul.gemm_group - 1 when
 * set (tests), else FOLIO_GEMM_GROUP=G (benchmarks; 0: as dispatched),
 * else GEMM_GROUP_AUTO. Measured on the H200 (BENCHMARKS.md "The GEMM's
 * tile order"): bands of 8 (or 4) run text gate/up at 1,400 rows at 189
 * TFLOP/s against 169 as dispatched and the prefill at 10,912 tokens/s
 * against 10,556; products with more rows than columns (the vision tower)
 * and the label pass do not move. */
#define GEMM_GROUP_SHIFT 8
#define GEMM_GROUP_AUTO 8u
static uint32_t gemm_group(const struct op_matmul *a)
{
    if (a->gemm_group > 0)
        return (uint32_t)(a->gemm_group - 1);
    const char *s = getenv("FOLIO_GEMM_GROUP");
    char *end;
    long v = s && *s ? strtol(s, &end, 10) : -1;
    return v >= 0 && v < (1l << 20) && !*end ? (uint32_t)v : GEMM_GROUP_AUTO;
}

/* The GEMMs' epilogue flags (gemm_epi.glsl, gemm_cm2.glsl: 1 bias,
 * 2 residual, 4 SwiGLU, 8 GELU, 16 quick-GELU) for a, once its operands are
 * checked: SwiGLU needs a gate and no residual, a residual an f32 output;
 * the tile order above them. */
static int gemm_flags(const struct op_matmul *a, uint32_t *flags, struct folio_err *err)
{
    static const uint32_t act_flag[] = {0, 4, 8, 16};
    if ((a->act == OP_MM_ACT_SWIGLU) != (a->gate != NULL) || (a->res && a->gate) ||
        (a->ytype == QUANT_F16 && a->res))
        return folio_err_set(err, FOLIO_EINVAL, "matmul: SwiGLU needs a gate tensor (and no "
                             "residual); a residual needs an f32 output");
    *flags = (a->bias ? 1u : 0u) | (a->res ? 2u : 0u) | act_flag[a->act & 3] |
             gemm_group(a) << GEMM_GROUP_SHIFT;
    return 0;
}

/* The GEMMs' bindings for one chunk of rows [m0, m1): x's rows from x_r0
 * on (row bytes xrb; x may be another tensor than a->x: the int8 GEMM's
 * quantized rows) into b[1], y's into b[2], the residual's or gate's into
 * b[4] (y's binding again when there is none); their offsets in *xs, *ys,
 * *rs. */
static int bind_m(const struct vkr *vk, const struct op_matmul *a, struct vkr_tensor x,
                  uint64_t x_r0, uint64_t xrb, uint64_t m0, uint64_t m1, uint64_t yrb, uint64_t rrb,
                  struct vkr_bind *b, uint32_t *xs, uint32_t *ys, uint32_t *rs, struct folio_err *err)
{
    const struct vkr_tensor *rt = a->res ? a->res : a->gate;
    *rs = 0;
    int rc = vkr_bind_rows(vk, x, xrb, x_r0, x_r0 + (m1 - m0), &b[1], xs, err);
    if (!rc)
        rc = vkr_bind_rows(vk, a->y, yrb, m0, m1, &b[2], ys, err);
    if (!rc && rt)
        rc = vkr_bind_rows(vk, *rt, rrb, m0, m1, &b[4], rs, err);
    if (!rc && !rt)
        b[4] = b[2];
    return rc;
}

/* ... and for weight rows [n0, n1) (row bytes wrb) into b[0], the bias's
 * into b[3] (y's binding when there is none); offsets in *ws, *bs. */
static int bind_n(const struct vkr *vk, const struct op_matmul *a, uint64_t wrb, uint64_t n0,
                  uint64_t n1, struct vkr_bind *b, uint32_t *ws, uint32_t *bs, struct folio_err *err)
{
    *bs = 0;
    int rc = vkr_bind_rows(vk, a->w, wrb, n0, n1, &b[0], ws, err);
    if (!rc && a->bias)
        rc = vkr_bind_rows(vk, *a->bias, 4, n0, n1, &b[3], bs, err);
    if (!rc && !a->bias)
        b[3] = b[2];
    return rc;
}

/* Split K's two passes for one chunk: the partial products (pipeline ppid;
 * pc as the unsplit dispatch's, kper set) into S f32 slices at the start of
 * the scratch view sv, then their sum with pc's epilogue into b[2]'s Y
 * (splitk.comp, f16 outputs when yb is 2). b: the chunk's bindings as the
 * unsplit dispatch has them. */
static int split_passes(struct vkr_cmd *c, uint32_t ppid, const struct gemm_push *pc,
                        const struct vkr_bind *b, struct vkr_tensor sv, uint32_t S, uint32_t gx,
                        uint32_t gy, uint32_t yb, const char *label, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    uint32_t mc = pc->M, nc = pc->N, rpid;
    struct vkr_bind pb[5] = {b[0], b[1]};
    int rc = ops_pipe_key(vk, ops_splitk_key(yb == 2), &rpid, err);
    if (!rc)
        rc = ops_bind(vk, sv, (uint64_t)S * mc * nc * 4, &pb[2], "split scratch", err);
    if (rc)
        return rc;
    pb[3] = pb[4] = pb[2];
    struct gemm_push pp = *pc;
    pp.y_skip = 0, pp.ldy = nc, pp.y_col0 = 0, pp.b_skip = 0, pp.r_skip = 0;
    pp.flags &= ~((1u << GEMM_GROUP_SHIFT) - 1); /* no epilogue; the tile order stays */
    pp.zstride = mc * nc;
    rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = ppid, .b = pb, .nb = 5, .push = &pp,
                                                    .push_bytes = sizeof pp, .groups = {gx, gy, S},
                                                    .label = label}, err);
    if (rc)
        return rc;
    struct vkr_bind rb[5] = {pb[2], b[1], b[2], b[3], b[4]};
    struct splitk_push sp = {mc, nc, S, 0, pc->y_skip, pc->ldy, pc->y_col0, pc->b_skip, pc->r_skip,
                             pc->flags};
    uint32_t rx, ry;
    ops_grid(((uint64_t)mc * ((nc + 1) / 2) + 255) / 256, &rx, &ry);
    return vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = rpid, .b = rb, .nb = 5, .push = &sp,
                                                      .push_bytes = sizeof sp, .groups = {rx, ry, 1},
                                                      .label = "splitk"}, err);
}

/* f16 inputs, as the model's products are. */
uint32_t op_matmul_split_for(const struct vkr *vk, uint32_t m, uint32_t n, uint32_t k,
                             uint64_t scratch)
{
    if (!ops_gemm_available(vk) || (cm2k_wanted(m, n, k) && cm2_k_usable(vk)))
        return 1;
    uint32_t kper = 0;
    return split_slices(vk, auto_cfg_for(vk, 0, m, n), m, n, k, scratch, 0, &kper);
}

int ops_gemm_shape_ok(uint32_t n, uint32_t k, int xtype, int ytype)
{
    return k % (xtype == QUANT_F16 ? 2 : 4) == 0 && (ytype != QUANT_F16 || n % 2 == 0);
}

/* The tensor-core GEMM: f16 weights, f32 or f16 activations. */
static int gemm(struct vkr_cmd *c, const struct op_matmul *a, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    uint32_t xb = a->xtype == QUANT_F16 ? 2 : 4, yb = a->ytype == QUANT_F16 ? 2 : 4;
    if (a->wtype != QUANT_F16 || !ops_gemm_shape_ok(a->n, a->k, a->xtype, a->ytype))
        return folio_err_set(err, FOLIO_EINVAL, "matmul: the tensor-core GEMM needs f16 weights, "
                             "an even k (k %% 4 == 0 for f32 inputs) and an even n for f16 "
                             "outputs; got %s, n=%u, k=%u", quant_type_name(a->wtype), a->n, a->k);
    uint32_t flags = 0;
    int frc = gemm_flags(a, &flags, err);
    if (frc)
        return frc;
    uint64_t wrb = (uint64_t)a->k * 2, xrb = (uint64_t)a->k * xb, yrb = (uint64_t)a->n * yb;
    uint64_t rrb = (uint64_t)a->n * 4;
    uint64_t n_per = vkr_rows_per_range(vk, wrb);
    /* f16 outputs are stored as pairs of halves: a weight-row chunk that
     * starts on an odd column shares a pair with its neighbour, and one of
     * the two stores clobbers the other (found on the H200 with 16 KiB
     * ranges), so chunks keep an even width */
    if (yb == 2)
        n_per -= n_per % 2;
    uint64_t mrb[3] = {xrb, yrb, rrb};
    uint64_t m_per = ops_rows_per(vk, mrb, 3);
    if (n_per == 0 || m_per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "matmul: one row (%u inputs, %u outputs) exceeds "
                             "the binding range %" PRIu64, a->k, a->n, vkr_limits(vk)->max_range);
    /* Keep ranged chunks whole tiles so only the last one has edges. */
    if (n_per > 256)
        n_per -= n_per % 256;
    if (m_per > 256)
        m_per -= m_per % 256;
    int tile = a->gemm_config > 0 && a->gemm_config <= GEMM_NCFG ? a->gemm_config - 1
                                                                    : auto_cfg_for(vk, xb == 4, a->m, a->n);
    /* AUTO on a cm2 device: the K-specialized workgroup kernel for wide
     * products whose K the model pre-warmed */
    int kspec = 0;
    struct vkr_pipeline_key kk = {0};
    if (a->gemm_config == 0 && xb == 2 && cm2k_wanted(a->m, a->n, a->k) && cm2_k_usable(vk)) {
        int kr = cm2_kauto();
        kk = cm2_key(yb == 2, CM2_CFG[kr], a->k);
        if (vkr_pipeline_ready(vk, &kk)) {
            tile = 2 * SG_NCFG + kr;
            kspec = 1;
        }
    }
    if (cfg_route(tile) == GEMM_CM2 && xb == 4)
        return folio_err_set(err, FOLIO_EINVAL, "matmul: GEMM configuration %d (cm2) takes f16 "
                             "inputs only", tile);
    uint32_t bm = cfg_bm(tile), bn = cfg_bn(tile);
    for (uint64_t m0 = 0; m0 < a->m; m0 += m_per) {
        uint64_t m1 = m0 + m_per < a->m ? m0 + m_per : a->m;
        struct vkr_bind b[5];
        uint32_t xs, ys, rs;
        int rc = bind_m(vk, a, a->x, m0, xrb, m0, m1, yrb, rrb, b, &xs, &ys, &rs, err);
        if (rc)
            return rc;
        for (uint64_t n0 = 0; n0 < a->n; n0 += n_per) {
            uint64_t n1 = n0 + n_per < a->n ? n0 + n_per : a->n;
            uint32_t ws, bs;
            rc = bind_n(vk, a, wrb, n0, n1, b, &ws, &bs, err);
            if (rc)
                return rc;
            uint32_t mc = (uint32_t)(m1 - m0), nc = (uint32_t)(n1 - n0);
            /* Widest vector load every operand's row starts allow. */
            uint32_t wsh = ws / 2, xsh = xs / xb, align = 8;
            while (align > 2 && (a->k % align || wsh % align || (xb == 2 && xsh % align)))
                align /= 2;
            if (xb == 4 && xsh % 4)
                return folio_err_set(err, FOLIO_EINVAL, "matmul: f32 input rows not 16-byte aligned");
            if (!kspec && cfg_route(tile) == GEMM_CM2 && cm2_cfg(tile)[6] && cm2_cfg(tile)[6] != a->k)
                return folio_err_set(err, FOLIO_EINVAL, "matmul: GEMM configuration %d is built for "
                                     "k = %u, not %u", tile, cm2_cfg(tile)[6], a->k);
            if (cfg_route(tile) == GEMM_CM2 && cm2_cfg(tile)[5] && (wsh % 8 || xsh % 8 || a->k % 8))
                return folio_err_set(err, FOLIO_EINVAL, "matmul: GEMM configuration %d reads 16-byte "
                                     "vectors: k and the row offsets must be multiples of 8", tile);
            uint32_t pid;
            struct vkr_pipeline_key key = kspec ? kk
                                                : ops_gemm_key(vk, a->xtype == QUANT_F16,
                                                               a->ytype == QUANT_F16, align, tile);
            rc = vkr_pipeline(vk, &key, &pid, err);
            if (rc)
                return rc;
            struct gemm_push pc = {a->k, nc, mc, wsh, xsh, ys / yb, a->n, (uint32_t)n0, bs / 4,
                                   rs / 4, flags, 0, 0};
            uint32_t gx = (nc + bn - 1) / bn, gy = (mc + bm - 1) / bm;
            uint32_t S = a->split ? split_slices(vk, tile, mc, nc, a->k, a->split->size,
                                                 a->split_k, &pc.kper)
                                  : 1;
            uint64_t sb = (uint64_t)mc * nc * 4;
            if (S > 1 && (S * sb > a->split->size || S * sb > vkr_limits(vk)->max_range ||
                          (uint64_t)mc * nc > UINT32_MAX / S))
                return folio_err_set(err, FOLIO_ELIMIT, "matmul: %u K slices of %u x %u "
                                     "outputs exceed the split scratch (%" PRIu64 " bytes)",
                                     S, mc, nc, a->split->size);
            if (S > 1) {
                /* the partial products into the scratch, then their sum */
                struct vkr_pipeline_key pk = ops_gemm_key(vk, a->xtype == QUANT_F16, 0, align, tile);
                uint32_t ppid;
                rc = vkr_pipeline(vk, &pk, &ppid, err);
                if (!rc)
                    rc = split_passes(c, ppid, &pc, b, *a->split, S, gx, gy, yb, "gemm_split", err);
                if (rc)
                    return rc;
                continue;
            }
            rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 5,
                                                            .push = &pc, .push_bytes = sizeof pc,
                                                            .groups = {gx, gy, 1}, .label = "gemm"},
                                                            err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- int8
 * --gpu-weights int8: weights quantized once at load into folio's int8
 * rows (QUANT_I8R: one f32 scale per output channel), activations quantized
 * per token on the device before every product (op_quant_rows into the
 * GEMM scratch), and an int8 x int8 -> int32 workgroup-scope GEMM on
 * VK_NV_cooperative_matrix2 (gemm_i8_cm2.comp) whose epilogue applies both
 * scales, then the f16 GEMM's epilogues.
 *
 * Why: on the H100/H200 the tensor cores' int8 rate is twice the f16 one,
 * and NVIDIA's own Vulkan sample measures its f16 GEMM at 178-246 TFLOP/s
 * at folio's prefill shapes (BENCHMARKS.md): past that, only a narrower
 * number format is left. The price is the quantization error, which
 * test_lm_int8 states against the f16 path.
 *
 * Elsewhere (no int8 workgroup matrices: lavapipe) int8 rows are a weight
 * type of the matrix-vector, tiled and cooperative-matrix kernels (dq.glsl
 * decodes them), with f32 activations. */
/* Tiles: M, N, K step, invocations, route (0: workgroup scope,
 * gemm_i8_cm2; 1: subgroup scope through VK_KHR_cooperative_matrix,
 * gemm_i8_khr, whose invocations are the device's lanes x WM x WN), then
 * for route 1 subgroups along M and N and the K steps fetched ahead (1: the
 * next, two shared stages; 2: two, one stage; gemm_cm.glsl). AUTO takes one
 * per product class (I8_AUTO, I8K_AUTO below); `bench ops --only gemm`
 * compares them all (FOLIO_GEMM_I8_TILE=n). */
#define I8_WG 0
#define I8_SG 1
static const uint32_t I8_CFG[][8] = {
    {128, 128, 64, 128},
    {128, 128, 64, 256},
    {128, 256, 64, 256},
    {256, 128, 64, 256},
    {128, 128, 32, 128},
    {128, 128, 128, 128},
    {256, 256, 64, 256},
    {64, 128, 64, 128},
    {128, 256, 32, 256},
    {256, 128, 32, 256},
    {64, 128, 32, 128},
    {64, 256, 64, 256},
    {128, 128, 32, 256},
    {128, 64, 64, 128}, /* passes of a few hundred rows (bench ops --where text512) */
    {64, 64, 64, 128},
    {160, 128, 64, 256}, /* class 4: 1,400 rows x 3,584 columns in 1.9 waves */
    {80, 128, 64, 128},  /* 391 rows in 5 row tiles, 2 % padding (CM2_CFG's 80-row rows) */
    {80, 64, 64, 128},
    /* subgroup scope (18..): an int8 K step of 64 is the bytes of the f16
     * subgroup kernel's 32; 8 subgroups of 64x32 with two steps ahead is
     * that kernel's AUTO shape (gemm_cm.glsl) */
    {128, 128, 128, 0, I8_SG, 2, 4, 2},
    {128, 128, 64, 0, I8_SG, 2, 4, 2},
    {128, 128, 128, 0, I8_SG, 4, 4, 2},
    {128, 256, 64, 0, I8_SG, 2, 4, 2},
    {128, 128, 64, 0, I8_SG, 2, 2, 1},
    {64, 128, 128, 0, I8_SG, 2, 4, 2},
    {256, 128, 64, 0, I8_SG, 4, 2, 2},
    {128, 128, 64, 0, I8_SG, 2, 4, 1},
    {64, 64, 128, 0, I8_SG, 2, 2, 2},
};
#define I8_NCFG ((int)(sizeof I8_CFG / sizeof I8_CFG[0]))

int ops_gemm_i8_configs(void) { return I8_NCFG; }

static int i8_sg(int c) { return I8_CFG[c][4] == I8_SG; }
void ops_gemm_i8_config_name(int c, char *out, size_t n)
{
    if (c < 0 || c >= I8_NCFG) {
        snprintf(out, n, "i8:auto");
        return;
    }
    const uint32_t *g = I8_CFG[c];
    if (i8_sg(c))
        snprintf(out, n, "i8k:%ux%u/%uw-%ux%u/bk%u/%s", g[0], g[1], g[5] * g[6], g[0] / g[5],
                 g[1] / g[6], g[2], g[7] == 2 ? "ahead2" : "s2");
    else
        snprintf(out, n, "i8:%ux%u/bk%u/t%u", g[0], g[1], g[2], g[3]);
}

/* Subgroup row c as a GEMM_CFG tile {WM, WN, FM, FN, BK, stages, probe,
 * ahead} (its K step in bytes: gemm_cm.glsl's arithmetic is in bytes). */
static void i8_sg_tile(int c, uint32_t t[8])
{
    const uint32_t *g = I8_CFG[c];
    uint32_t tt[8] = {g[5], g[6], g[0] / (16 * g[5]), g[1] / (16 * g[6]), g[2], g[7] == 2 ? 1 : 2, 0, g[7]};
    memcpy(t, tt, sizeof tt);
}

int ops_gemm_i8_config_fits(const struct vkr *vk, int c)
{
    if (c < 0 || c >= I8_NCFG)
        return 0;
    const uint32_t *g = I8_CFG[c];
    if (!i8_sg(c))
        return g[3] <= vkr_limits(vk)->max_wg_invocations &&
               vkr_coopmat2_shape_ok(vk, g[0], g[1], g[2], VKR_CM2_S8_S32, g[3]);
    /* whole fragments per subgroup (16 x 16 x 32), and the f16 tiles' fit
     * with a K step of g[2] bytes */
    return vkr_features(vk)->coopmat_khr_i8 && sg_lanes_ok(vk) && vkr_has_shader("gemm_i8_khr") &&
           g[0] % (16 * g[5]) == 0 && g[1] % (16 * g[6]) == 0 && g[2] % 32 == 0 &&
           sg_tile_fits(vk, g[0], g[1], g[2] / 16, g[7] == 2 ? 1 : 2, g[5] * g[6]);
}

/* AUTO's configuration per product class, measured on the H100 with each
 * tile K-fixed at the 7B's K (bench ops --only gemm --dtype i8r, TOP/s
 * with the activations' quantization; BENCHMARKS.md "int8 prefill" and
 * "A 512^2 page's prompt"):
 *   0 wide: the subgroup kernel's 128x128, 8 subgroups of 64x32, K step
 *     128, two steps ahead (row 18; H100, 1,400 rows: q/k/v 245, o 195,
 *     down 326 against the workgroup kernel's 128x128 232, 191, 211;
 *     BENCHMARKS.md "int8 on subgroup matrices"), the workgroup kernel's
 *     128x128 K step 64 (row 1) without int8 subgroup matrices or with
 *     FOLIO_GEMM_I8_ROUTE=cm2;
 *   1 very wide, n >= 8192 (text gate/up 272 against 212 for class 0's),
 *     or many output tiles, whatever n (a batch of pages' prompt; H200,
 *     BENCHMARKS.md "A batch's int8 products": at 6,256 rows q/k/v 295, o
 *     267, down 317 against 252, 247, 268 for class 0's tile, at 11,584
 *     330, 319, 342 against 266, 263, 264; class 0's wins at one page's
 *     1,400 rows: q/k/v 235 and o 194 against 178 and 152): 128x256, K
 *     step 64;
 *   2 few rows or few columns (label passes, m <= 64: q/o 34, gate/up 62,
 *     down 58 with split K; the k/v projections, n <= 512: 47): 64x128;
 *   3 a few hundred rows (64 < m < I8_MID_M: one 512^2 page's 391-row
 *     prompt): 64x64 for n < 8192 (q/o 133, down 151 against 35 and 50 for
 *     class 0's tile split in 3 K slices: the split int8 partials run at a
 *     third of the unsplit kernel's rate), class 2's 64x128 for n >= 8192
 *     (gate/up 191 against 172); never split.
 *   4 class 0's products below K 8192 where 160-row tiles keep the
 *     multiprocessors busy for less (waves x tile area): 1,400 x 3,584 is 308 tiles of
 *     128 rows (3 waves on the H100's 132, the last 1/3 idle) or 252 of 160
 *     rows (2 waves): down 263 against 211 TOP/s, o 225 against 195; q/k/v
 *     (4,608 columns: 3 waves either way) stays on class 0's, 232 against
 *     212 (H100, BENCHMARKS.md "Tiles sized to the waves").
 * FOLIO_GEMM_I8_TILE=n takes row n for all (benchmarks). */
#define I8_NCLASS 5
#define I8_MID_M 512
#define I8_LONG_K 8192
static const int I8_AUTO[I8_NCLASS] = {18, 2, 7, 14, 15};
/* The subgroup route's rows per class, where a device has no int8
 * workgroup matrices (or FOLIO_GEMM_I8_ROUTE=khr): class 4 has no taller
 * tile of its own (not measured yet on a GPU). */
static const int I8K_AUTO[I8_NCLASS] = {18, 21, 23, 26, 18};

/* Row `cls` of a route's AUTO table, or where the device cannot run it
 * (lavapipe: 32 KiB of shared memory, 8-lane subgroups) the first of a few
 * smaller subgroup tiles that it can (128x128 K step 64, 64x128, 64x64);
 * -1 when none fits. */
static int i8_pick(const struct vkr *vk, int route, int cls)
{
    static const int smaller[] = {19, 23, 26};
    const int *t = route == I8_SG ? I8K_AUTO : I8_AUTO;
    const char *e = getenv("FOLIO_GEMM_I8_ROUTE"); /* cm2 named: the workgroup kernel alone */
    int wg_only = route == I8_WG && e && !strcmp(e, "cm2");
    if (ops_gemm_i8_config_fits(vk, t[cls]) && !(wg_only && i8_sg(t[cls])))
        return t[cls];
    /* the workgroup route's class 0 is a subgroup row: without int8
     * subgroup matrices, its own 128x128 tile */
    if (route == I8_WG)
        return i8_sg(t[cls]) && ops_gemm_i8_config_fits(vk, 1) ? 1 : -1;
    for (size_t i = 0; i < sizeof smaller / sizeof smaller[0]; i++)
        if (ops_gemm_i8_config_fits(vk, smaller[i]))
            return smaller[i];
    return -1;
}

/* Whether the device and build run a route's AUTO rows. */
static int i8_route_ok(const struct vkr *vk, int route)
{
    const struct vkr_features *f = vkr_features(vk);
    if (route == I8_WG && !(f->coopmat2_nv && f->int8 && vkr_has_shader("gemm_i8_cm2")))
        return 0;
    return i8_pick(vk, route, 0) >= 0 && i8_pick(vk, route, 1) >= 0 && i8_pick(vk, route, 2) >= 0;
}

/* The int8 route AUTO takes: the workgroup kernel where the device has it,
 * else the subgroup one; FOLIO_GEMM_I8_ROUTE=khr or cm2 names one (tests
 * run each in turn; a route the device lacks is not taken). -1: none. */
static int i8_route(const struct vkr *vk)
{
    const char *e = getenv("FOLIO_GEMM_ROUTE");
    if (e && !strcmp(e, "none")) /* every tensor-core GEMM off, int8 included */
        return -1;
    e = getenv("FOLIO_GEMM_I8_ROUTE");
    if (e && !strcmp(e, "khr"))
        return i8_route_ok(vk, I8_SG) ? I8_SG : -1;
    if (e && !strcmp(e, "cm2"))
        return i8_route_ok(vk, I8_WG) ? I8_WG : -1;
    if (i8_route_ok(vk, I8_WG))
        return I8_WG;
    /* not on a CPU device unless named: lavapipe 26's LLVM took minutes to
     * compile one int8 subgroup kernel at its first dispatch */
    return !ops_on_cpu(vk) && i8_route_ok(vk, I8_SG) ? I8_SG : -1;
}

static int i8_auto_class(const struct vkr *vk, int cls)
{
    const char *e = getenv("FOLIO_GEMM_I8_TILE");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (!*end && v >= 0 && v < I8_NCFG && ops_gemm_i8_config_fits(vk, (int)v))
            return (int)v;
    }
    int route = i8_route(vk) == I8_SG ? I8_SG : I8_WG;
    /* a device without class 3's 64x64 int8 shape takes class 2's tile,
     * one without class 4's 160x128 class 0's */
    if (cls == 3 && i8_pick(vk, route, 3) < 0)
        cls = 2;
    if (cls == 4 && i8_pick(vk, route, 4) < 0)
        cls = 0;
    int c = i8_pick(vk, route, cls);
    return c >= 0 ? c : I8_AUTO[cls]; /* (no route: never dispatched) */
}
/* Waves of class 1's 128x256 tiles from which a product narrower than 8,192
 * columns takes them too: at fewer, the last wave's idle multiprocessors
 * cost more than the wider tile saves (1,400 x 3,584: 154 tiles, 1.2 waves
 * of the H100's 132). */
#define I8_MANY_WAVES 4
/* Output tiles of table row c's tile over an m x n product. */
static uint64_t i8_ntiles(int c, uint32_t m, uint32_t n)
{
    return (uint64_t)((m + I8_CFG[c][0] - 1) / I8_CFG[c][0]) * ((n + I8_CFG[c][1] - 1) / I8_CFG[c][1]);
}

/* How long table row c's tiles keep units multiprocessors busy over an
 * m x n product, in tile elements: its waves (the last one's idle
 * multiprocessors counted) times its tile's area. */
static uint64_t i8_busy(int c, uint32_t m, uint32_t n, uint32_t units)
{
    return (i8_ntiles(c, m, n) + units - 1) / units * I8_CFG[c][0] * I8_CFG[c][1];
}

/* The class of an m x n product on a device of `units` multiprocessors (0:
 * not known), with the warm-up's override `tiles` (enum op_mm_tiles).
 * Class 2's tile at a few hundred rows and n >= 8192 has at least 296
 * output tiles: the split rule never splits it. */
int ops_gemm_i8_class(uint32_t m, uint32_t n, uint32_t k, uint32_t units, int tiles)
{
    if (m <= 64 || n <= 512)
        return 2;
    if (tiles == OP_MM_TILES_WIDE)
        return 1;
    if (tiles == OP_MM_TILES_TALL) /* (class 4's products only: below long K) */
        return k >= I8_LONG_K ? 0 : 4;
    if (m < I8_MID_M)
        return n >= 8192 ? 2 : 3;
    if (n >= 8192 || (units && i8_ntiles(I8_AUTO[1], m, n) >= (uint64_t)I8_MANY_WAVES * units))
        return 1;
    /* class 0 or its taller tile, whichever keeps the multiprocessors busy
     * for less (tie: class 0); class 0 (the subgroup kernel) at long K,
     * where it ran 24 % faster than the taller tile (H100, down at 1,400
     * rows: 326 against 263 TOP/s) */
    if (!units || k >= I8_LONG_K)
        return 0;
    return i8_busy(I8_AUTO[4], m, n, units) < i8_busy(I8_AUTO[0], m, n, units) ? 4 : 0;
}

static int i8_class(const struct vkr *vk, uint32_t m, uint32_t n, uint32_t k, int tiles)
{
    return ops_gemm_i8_class(m, n, k, vkr_limits(vk)->compute_units, tiles);
}

int ops_gemm_i8_available(const struct vkr *vk) { return i8_route(vk) >= 0; }

const char *ops_gemm_i8_route_name(const struct vkr *vk)
{
    int r = i8_route(vk);
    return r == I8_WG ? "cm2" : r == I8_SG ? "khr" : "none";
}

/* The subgroup kernel's key for row c (gemm_cm.glsl's specialization
 * constants; K from the push constants, and split K's partials are the f32
 * form with p.kper set, so no forms of their own). */
static struct vkr_pipeline_key i8_sg_key(const struct vkr *vk, uint32_t ytype, int c)
{
    uint32_t t[8];
    i8_sg_tile(c, t);
    return sg_key(vk, "gemm_i8_khr", 1, ytype, 16 /* (unused by int8 rows: 16-byte loads) */, t);
}

/* The int8 GEMM of table row c with K fixed at kc (0: from the push
 * constants), f32 or f16 output; split: the split-K partials' form (f32). */
static struct vkr_pipeline_key i8_key_s(const struct vkr *vk, uint32_t ytype, int c, uint32_t kc,
                                        int split)
{
    if (i8_sg(c))
        return i8_sg_key(vk, split ? 0 : ytype, c);
    struct vkr_pipeline_key k = ops_key("gemm_i8_cm2", 2, 1, split ? 0 : ytype);
    k.nspec = 10;
    k.spec[9] = split != 0;
    for (int i = 0; i < 4; i++)
        k.spec[2 + i] = I8_CFG[c][i];
    k.spec[6] = 0;  /* ACC16: int32 accumulation */
    k.spec[7] = 1;  /* 16-byte views (int8 rows are 16-byte aligned) */
    k.spec[8] = kc; /* K fixed at creation: 3-4x faster staging on cm2 (op_matmul.c) */
    return k;
}
static struct vkr_pipeline_key i8_key(const struct vkr *vk, uint32_t ytype, int c, uint32_t kc)
{
    return i8_key_s(vk, ytype, c, kc, 0);
}

/* Table row c's keys: with generic, its f32, f16 and (with split) split-K
 * partial forms with K from the push constants; at each of the nk K in ks
 * below kmax its f32 form (and the split one), at each of the nk16 in ks16
 * below kmax its f16 form. */
static int i8_cfg_keys(const struct vkr *vk, int c, const uint32_t *ks, int nk,
                       const uint32_t *ks16, int nk16, uint32_t kmax, int generic, int split,
                       struct vkr_pipeline_key *out)
{
    int n = 0;
    if (i8_sg(c)) { /* one form per output type, any K */
        out[n++] = i8_sg_key(vk, 0, c);
        out[n++] = i8_sg_key(vk, 1, c);
        return n;
    }
    for (uint32_t yt = 0; yt < (split ? 3u : 2u); yt++) { /* f32, f16, split-K partials */
        const uint32_t *kl = yt == 1 ? ks16 : ks;
        if (generic)
            out[n++] = i8_key_s(vk, yt & 1, c, 0, yt == 2);
        for (int i = 0; i < (yt == 1 ? nk16 : nk); i++)
            if (kl[i] && kl[i] % QUANT_I8R_ALIGN == 0 && kl[i] < kmax)
                out[n++] = i8_key_s(vk, yt & 1, c, kl[i], yt == 2);
    }
    return n;
}

int ops_gemm_i8_keys(const struct vkr *vk, const uint32_t *ks, int nk, const uint32_t *ks16,
                     int nk16, struct vkr_pipeline_key *out)
{
    int n = 0;
    if (!ops_gemm_i8_available(vk))
        return 0;
    out[n++] = ops_quant_rows_key(vk, QUANT_F16); /* the activations */
    out[n++] = ops_quant_rows_key(vk, QUANT_F32);
    out[n++] = ops_splitk_key(0); /* the split-K sum, either output */
    out[n++] = ops_splitk_key(1);
    for (int cls = 0; cls < I8_NCLASS; cls++) {
        int c = i8_auto_class(vk, cls), dup = 0;
        for (int j = 0; j < cls; j++)
            dup |= i8_auto_class(vk, j) == c;
        /* split-K partials only for a tile of the one class AUTO splits
         * (gemm_i8: class 2) */
        int split = i8_auto_class(vk, 2) == c;
        if (dup)
            continue;
        /* class 4 is never long K (ops_gemm_i8_class): its K-fixed forms
         * below it only (each costs the driver seconds cold) */
        n += i8_cfg_keys(vk, c, ks, nk, ks16, nk16, cls == 4 ? I8_LONG_K : UINT32_MAX, nk + nk16 == 0,
                         split, &out[n]);
    }
    return n;
}

int ops_gemm_i8_config_keys(const struct vkr *vk, int c, const uint32_t *ks, int nk,
                            struct vkr_pipeline_key *out)
{
    return c >= 0 && c < I8_NCFG ? i8_cfg_keys(vk, c, ks, nk, NULL, 0, UINT32_MAX, 1, 1, out) : 0;
}

int ops_gemm_i8_keys_all(const struct vkr *vk, const uint32_t *ks, int nk, struct vkr_pipeline_key *out)
{
    int n = 0;
    if (!ops_gemm_i8_available(vk))
        return 0;
    out[n++] = ops_quant_rows_key(vk, QUANT_F16);
    out[n++] = ops_quant_rows_key(vk, QUANT_F32);
    for (int c = 0; c < I8_NCFG; c++)
        if (ops_gemm_i8_config_fits(vk, c))
            n += i8_cfg_keys(vk, c, ks, nk, NULL, 0, UINT32_MAX, 1, 1, &out[n]);
    return n;
}

static int gemm_i8(struct vkr_cmd *c, const struct op_matmul *a, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (!ops_gemm_i8_available(vk))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "matmul: the int8 GEMM needs int8 "
                             "cooperative matrices (VK_NV_cooperative_matrix2's workgroup scope, "
                             "or VK_KHR_cooperative_matrix's 16x16x32 int8 shape), which this "
                             "device or build does not offer");
    uint32_t xb = a->xtype == QUANT_F16 ? 2 : 4, yb = a->ytype == QUANT_F16 ? 2 : 4;
    if (a->k % QUANT_I8R_ALIGN || (yb == 2 && a->n % 2))
        return folio_err_set(err, FOLIO_EINVAL, "matmul: the int8 GEMM needs k a multiple of %d "
                             "and an even n for f16 outputs; got n=%u, k=%u", QUANT_I8R_ALIGN,
                             a->n, a->k);
    uint32_t flags = 0;
    int frc = gemm_flags(a, &flags, err);
    if (frc)
        return frc;
    uint64_t qrb = quant_row_bytes(QUANT_I8R, a->k);
    if (!a->split || a->split->size < qrb)
        return folio_err_set(err, FOLIO_EINVAL, "matmul: the int8 GEMM quantizes its input into "
                             "the GEMM scratch (op_matmul.split), which holds %" PRIu64 " bytes; "
                             "one row needs %" PRIu64, a->split ? a->split->size : 0, qrb);
    uint64_t yrb = (uint64_t)a->n * yb, rrb = (uint64_t)a->n * 4;
    uint64_t n_per = vkr_rows_per_range(vk, qrb);
    if (yb == 2) /* f16 pairs: chunks keep an even width (op_matmul.c's gemm) */
        n_per -= n_per % 2;
    uint64_t mrb[4] = {(uint64_t)a->k * xb, yrb, rrb, qrb};
    uint64_t m_per = ops_rows_per(vk, mrb, 4);
    /* x's int8 rows all at once when the scratch holds them (then a second
     * product of the same x may find them there: x_in_scratch), else chunk
     * by chunk at the scratch's start */
    int whole = (uint64_t)a->m * qrb <= a->split->size;
    if (!whole && m_per > a->split->size / qrb)
        m_per = a->split->size / qrb;
    if (n_per == 0 || m_per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "matmul: one row (%u inputs, %u outputs) exceeds "
                             "the binding range %" PRIu64, a->k, a->n, vkr_limits(vk)->max_range);
    if (n_per > 256)
        n_per -= n_per % 256;
    if (m_per > 256)
        m_per -= m_per % 256;
    /* AUTO splits only the few-rows class (i8_class 2: label passes, k/v):
     * elsewhere the split int8 partials ran at a third of the unsplit
     * kernel's rate (a 391-row prompt's o/down), and a 512-row pass of
     * class 0 would have split */
    int cls = i8_class(vk, a->m, a->n, a->k, a->i8_tiles), cfg = i8_auto_class(vk, cls);
    int nosplit = a->split_k == 0 && cls != 2;
    struct vkr_pipeline_key kk = i8_key(vk, yb == 2, cfg, a->k), pkey = i8_key_s(vk, 0, cfg, a->k, 1);
    if (!vkr_pipeline_ready(vk, &kk))
        kk = i8_key(vk, yb == 2, cfg, 0);
    if (!vkr_pipeline_ready(vk, &pkey)) /* split K's partials */
        pkey = i8_key_s(vk, 0, cfg, 0, 1);
    uint32_t pid;
    int rc = vkr_pipeline(vk, &kk, &pid, err);
    if (rc)
        return rc;
    uint32_t bm = I8_CFG[cfg][0], bn = I8_CFG[cfg][1];
    if (whole && !a->x_in_scratch) /* (dispatches are ordered by vkr's barrier) */
        rc = op_quant_rows(c, a->x, a->xtype, a->m, a->k, *a->split, err);
    for (uint64_t m0 = 0; !rc && m0 < a->m; m0 += m_per) {
        uint64_t m1 = m0 + m_per < a->m ? m0 + m_per : a->m;
        uint32_t mc = (uint32_t)(m1 - m0);
        if (!whole)
            rc = op_quant_rows(c, vkr_view(a->x, m0 * a->k * xb, (uint64_t)mc * a->k * xb),
                               a->xtype, mc, a->k, *a->split, err);
        struct vkr_bind b[5];
        uint32_t xs = 0, ys = 0, rs = 0;
        if (!rc) /* the chunk's int8 rows: from row m0 of the scratch, or its first mc */
            rc = bind_m(vk, a, *a->split, whole ? m0 : 0, qrb, m0, m1, yrb, rrb, b, &xs, &ys, &rs,
                        err);
        if (rc)
            return rc;
        for (uint64_t n0 = 0; n0 < a->n; n0 += n_per) {
            uint64_t n1 = n0 + n_per < a->n ? n0 + n_per : a->n;
            uint32_t ws, bs;
            rc = bind_n(vk, a, qrb, n0, n1, b, &ws, &bs, err);
            if (rc)
                return rc;
            if (ws % 16 || xs % 16)
                return folio_err_set(err, FOLIO_EINVAL, "matmul: int8 rows must start on 16 "
                                     "bytes in their bindings (weights at +%u, inputs at +%u)",
                                     ws, xs);
            uint32_t nc = (uint32_t)(n1 - n0), gx = (nc + bn - 1) / bn, gy = (mc + bm - 1) / bm;
            struct gemm_push pc = {a->k, nc, mc, ws, xs, ys / yb, a->n, (uint32_t)n0, bs / 4,
                                   rs / 4, flags, 0, 0}; /* gemm_cm2.glsl's: skips in bytes */
            /* Split K (op_matmul.c "split K"'s rule): the partials go to the
             * scratch after the quantized rows */
            uint64_t poff = ((whole ? a->m : mc) * qrb + 255) / 256 * 256, sb = (uint64_t)mc * nc * 4;
            uint32_t S = 1;
            if (a->split_k != 1 && !nosplit && a->split->size > poff + 2 * sb) {
                S = split_pick(vk, (uint64_t)gx * gy, a->k, I8_CFG[cfg][2], sb, a->split->size - poff);
                if (a->split_k > 1)
                    S = a->split_k;
                if (S > 1)
                    pc.kper = split_kper(a->k, I8_CFG[cfg][2], &S);
                if (S > 1 && (S * sb > a->split->size - poff || S * sb > vkr_limits(vk)->max_range))
                    S = 1, pc.kper = 0;
            }
            if (S == 1) {
                rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 5,
                                                                .push = &pc, .push_bytes = sizeof pc,
                                                                .groups = {gx, gy, 1},
                                                                .label = "gemm_i8"},
                                                                err);
                if (rc)
                    return rc;
                continue;
            }
            uint32_t ppid;
            rc = vkr_pipeline(vk, &pkey, &ppid, err);
            if (!rc)
                rc = split_passes(c, ppid, &pc, b, vkr_view(*a->split, poff, S * sb), S, gx, gy, yb,
                                  "gemm_i8_split", err);
            if (rc)
                return rc;
        }
    }
    return rc; /* the whole input's quantization may have failed */
}

int op_matmul(struct vkr_cmd *c, const struct op_matmul *a, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    if (!quant_supported(a->wtype))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "matmul: weight type %d is not supported",
                             a->wtype);
    uint32_t be = (uint32_t)quant_block_elems(a->wtype);
    if (a->k == 0 || a->k % be != 0)
        return folio_err_set(err, FOLIO_EINVAL, "matmul: k=%u is not a multiple of %u for %s",
                             a->k, be, quant_type_name(a->wtype));
    if (a->m == 0 || a->n == 0)
        return 0;
    uint64_t row_bytes = quant_row_bytes(a->wtype, a->k);
    int rc = ops_need(a->w, row_bytes * a->n, "matmul weights", err);
    if (!rc)
        rc = ops_need(a->x, (uint64_t)a->m * a->k * (a->xtype == QUANT_F16 ? 2 : 4), "matmul input", err);
    if (!rc)
        rc = ops_need(a->y, (uint64_t)a->m * a->n * (a->ytype == QUANT_F16 ? 2 : 4), "matmul output", err);
    if (!rc && a->bias)
        rc = ops_need(*a->bias, (uint64_t)a->n * 4, "matmul bias", err);
    if (!rc && a->res)
        rc = ops_need(*a->res, (uint64_t)a->m * a->n * 4, "matmul residual", err);
    if (rc)
        return rc;
    enum op_mm_kernel kern = a->kernel == OP_MM_AUTO ? op_matmul_pick(vk, a->wtype, a->m) : a->kernel;
    /* AUTO: rows the GEMM cannot stage (f32 inputs need k % 4 == 0, f16
     * inputs an even k) take the tiled kernel */
    if (kern == OP_MM_GEMM && a->kernel == OP_MM_AUTO && a->wtype != QUANT_I8R &&
        !ops_gemm_shape_ok(a->n, a->k, a->xtype, a->ytype))
        kern = OP_MM_TILED;
    /* AUTO: int8 rows with no scratch to quantize x into take the kernels
     * that read them with f32 activations */
    if (kern == OP_MM_GEMM && a->kernel == OP_MM_AUTO && a->wtype == QUANT_I8R &&
        (!a->split || a->split->size < quant_row_bytes(QUANT_I8R, a->k)))
        kern = ops_coopmat_available(vk) && a->k % 4 == 0 ? OP_MM_COOPMAT : OP_MM_TILED;
    if (kern == OP_MM_GEMM && a->wtype == QUANT_I8R)
        return gemm_i8(c, a, err);
    if (kern == OP_MM_GEMM) {
        if (!ops_gemm_available(vk))
            return folio_err_set(err, FOLIO_EUNSUPPORTED, "matmul: tensor-core GEMM not available "
                                 "on this device or build");
        return gemm(c, a, err);
    }
    if (a->xtype == QUANT_F16 || a->ytype == QUANT_F16 || a->res || a->act || a->gate)
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "matmul: f16 inputs/outputs and fused "
                             "epilogues need the tensor-core GEMM (m >= 64, f16 weights)");
    /* the cooperative-matrix kernel stages 4 elements at a time; float rows
     * of other lengths take the tiled kernel's element-wise staging */
    if (kern == OP_MM_COOPMAT && a->k % 4) {
        if (a->kernel == OP_MM_COOPMAT)
            return folio_err_set(err, FOLIO_EUNSUPPORTED, "matmul: the cooperative-matrix kernel "
                                 "needs k (%u) to be a multiple of 4", a->k);
        kern = OP_MM_TILED;
    }
    if (kern == OP_MM_COOPMAT && !ops_coopmat_available(vk))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "matmul: cooperative-matrix kernel not "
                             "available on this device or build");
    uint32_t pid;
    const struct vkr_pipeline_key mk = ops_mm_key(vk, kern, a->wtype);
    rc = ops_pipe_key(vk, mk, &pid, err);
    if (rc)
        return rc;

    uint64_t n_per = vkr_rows_per_range(vk, row_bytes);
    uint64_t mrb[2] = {(uint64_t)a->k * 4, (uint64_t)a->n * 4};
    uint64_t m_per = ops_rows_per(vk, mrb, 2);
    if (n_per == 0 || m_per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "matmul: one row (%" PRIu64 " weight bytes, %u "
                             "inputs, %u outputs) exceeds the binding range %" PRIu64,
                             row_bytes, a->k, a->n, vkr_limits(vk)->max_range);
    if (kern == OP_MM_MATVEC && m_per > 8)
        m_per = 8;
    for (uint64_t m0 = 0; m0 < a->m; m0 += m_per) {
        uint64_t m1 = m0 + m_per < a->m ? m0 + m_per : a->m;
        struct vkr_bind b[4];
        uint32_t xs, ys, ws, bs = 0;
        rc = vkr_bind_rows(vk, a->x, (uint64_t)a->k * 4, m0, m1, &b[1], &xs, err);
        if (!rc)
            rc = vkr_bind_rows(vk, a->y, (uint64_t)a->n * 4, m0, m1, &b[2], &ys, err);
        if (rc)
            return rc;
        for (uint64_t n0 = 0; n0 < a->n; n0 += n_per) {
            uint64_t n1 = n0 + n_per < a->n ? n0 + n_per : a->n;
            rc = vkr_bind_rows(vk, a->w, row_bytes, n0, n1, &b[0], &ws, err);
            if (!rc && a->bias)
                rc = vkr_bind_rows(vk, *a->bias, 4, n0, n1, &b[3], &bs, err);
            if (rc)
                return rc;
            if (!a->bias)
                b[3] = b[1];
            struct mm_push pc = {a->k, (uint32_t)(n1 - n0), (uint32_t)(m1 - m0), ws,
                                 (uint32_t)row_bytes, xs / 4, ys / 4, a->n, (uint32_t)n0, bs / 4,
                                 a->bias != NULL};
            uint32_t gx, gy;
            if (kern == OP_MM_MATVEC) {
                uint32_t nr = mk.spec[2];
                ops_grid((n1 - n0 + nr - 1) / nr, &gx, &gy);
            } else {
                uint64_t tile = kern == OP_MM_TILED ? 64 : 128;
                gx = (uint32_t)((n1 - n0 + tile - 1) / tile);
                gy = (uint32_t)((m1 - m0 + tile - 1) / tile);
            }
            rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 4,
                                                            .push = &pc, .push_bytes = sizeof pc,
                                                            .groups = {gx, gy, 1},
                                                            .label = mk.shader},
                                                            err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* ------------------------------------------------- weights in f16 form */

int op_dequant_f16(struct vkr_cmd *c, struct vkr_tensor w, int wtype, uint32_t n, uint32_t k,
                   struct vkr_tensor y, struct folio_err *err)
{
    uint32_t be = quant_supported(wtype) ? (uint32_t)quant_block_elems(wtype) : 0;
    if (be < 4)
        be = 4;
    if (!quant_supported(wtype) || k % be)
        return folio_err_set(err, FOLIO_EINVAL, "dequant: %s rows of %u elements are not supported",
                             quant_supported(wtype) ? quant_type_name(wtype) : "unknown type", k);
    return ops_rows_convert(c, ops_dequant_key(wtype), w, quant_row_bytes(wtype, k), y,
                            (uint64_t)k * 2, 2, n, k, "dequant", err);
}

int ops_weights_form(const struct vkr *vk, enum ops_gpu_weights mode, uint64_t f16_bytes,
                    char *why, size_t why_n)
{
    const struct vkr_limits *L = vkr_limits(vk);
    if (mode == OPS_WEIGHTS_NATIVE) {
        snprintf(why, why_n, "native (--gpu-weights native)");
        return 0;
    }
    if (mode == OPS_WEIGHTS_F16) {
        snprintf(why, why_n, "f16 (--gpu-weights f16)");
        return OPS_FORM_F16_ALL;
    }
    if (mode == OPS_WEIGHTS_INT8) {
        snprintf(why, why_n, "int8 (--gpu-weights int8; %s)",
                 ops_gemm_i8_available(vk) ? "int8 GEMM"
                                           : "no int8 GEMM on this device: int8 weights, f32 products");
        return OPS_FORM_I8;
    }
    if (!ops_gemm_available(vk)) {
        snprintf(why, why_n, "native (auto: no tensor-core GEMM on this device)");
        return 0;
    }
    /* Leave room for the native copy being expanded, the activation plan
     * and other processes: f16 weights may use at most 60 % of the
     * device-local heap. */
    if (L->device_local_bytes && f16_bytes > L->device_local_bytes / 10 * 6) {
        snprintf(why, why_n, "native (auto: %" PRIu64 " MiB of f16 weights exceed 60 %% of the "
                 "device's %" PRIu64 " MiB)", f16_bytes >> 20, L->device_local_bytes >> 20);
        return 0;
    }
    snprintf(why, why_n, "f16 (auto: %" PRIu64 " MiB fit the device's %" PRIu64 " MiB; f32 "
             "matrices stay f32)", f16_bytes >> 20, L->device_local_bytes >> 20);
    return 1;
}

int ops_weight_type(const struct vkr *vk, int wtype, uint32_t n, uint32_t k, int form)
{
    uint64_t block = vkr_limits(vk)->tensor_max;
    if (form == OPS_FORM_I8 && wtype != QUANT_I8R) {
        if (k % QUANT_I8R_ALIGN == 0 && quant_row_bytes(QUANT_I8R, k) * n <= block)
            return QUANT_I8R;
        form = OPS_FORM_F16_ALL;
    }
    if (form == OPS_FORM_NATIVE || form == OPS_FORM_I8 || wtype == QUANT_F16 ||
        (wtype == QUANT_F32 && form == OPS_FORM_F16) || (uint64_t)n * k * 2 > block)
        return wtype;
    return QUANT_F16;
}

int ops_upload_weight(struct vkr *vk, struct vkr_arena *dst, struct vkr_arena *staging, const void *src,
                      int wtype, uint32_t n, uint32_t k, int form, struct vkr_tensor *out,
                      int *out_type, struct folio_err *err)
{
    /* A tensor never spans blocks (ops_weight_type keeps what would not fit). */
    int to = staging ? ops_weight_type(vk, wtype, n, k, form) : wtype;
    int rc = vkr_arena_alloc(dst, quant_row_bytes(to, k) * n, out, err);
    if (!rc)
        rc = ops_upload_weight_to(vk, staging, src, wtype, n, k, to, *out, err);
    if (!rc)
        *out_type = to;
    return rc;
}

int ops_upload_weight_to(struct vkr *vk, struct vkr_arena *staging, const void *src, int wtype,
                         uint32_t n, uint32_t k, int to, struct vkr_tensor dst,
                         struct folio_err *err)
{
    uint64_t native = quant_row_bytes(wtype, k) * n;
    if (to == wtype)
        return vkr_upload(vk, dst, 0, src, native, err);
    if (!staging || dst.size < quant_row_bytes(to, k) * n)
        return folio_err_set(err, FOLIO_EINVAL, "weight upload: converting %u x %u from type %d "
                             "to %d needs staging and a destination of its size", n, k, wtype, to);
    struct vkr_tensor raw;
    vkr_arena_reset(staging);
    int rc = vkr_arena_upload(staging, src, native, &raw, err);
    if (rc)
        return rc;
    struct vkr_cmd *c;
    rc = vkr_cmd_begin(vk, &c, err);
    if (rc)
        return rc;
    rc = to == QUANT_I8R ? op_quant_rows(c, raw, wtype, n, k, dst, err)
                         : op_dequant_f16(c, raw, wtype, n, k, dst, err);
    if (rc) {
        vkr_cmd_abort(c);
        return rc;
    }
    return vkr_cmd_submit(c, err);
}

/* Offset of part j in f's region (parts as declared, of type `to`). */
static uint64_t fused_offset(const struct ops_fused *f, uint32_t j, int to)
{
    uint64_t off = 0;
    for (uint32_t i = 0; i < j; i++)
        off += quant_row_bytes(to, f->part[i].k) * f->part[i].n;
    return off;
}

int ops_fused_upload(struct vkr *vk, struct vkr_arena *wa, struct vkr_arena *staging,
                     struct ops_fused *f, uint32_t j, const void *src, int wtype, uint32_t n,
                     uint32_t k, int to, struct vkr_tensor *out, struct folio_err *err)
{
    if (j >= f->nparts || f->nparts > OPS_FUSED_MAX)
        return folio_err_set(err, FOLIO_EINVAL, "fused weights: part %u of %u", j, f->nparts);
    uint64_t pb = quant_row_bytes(to, k) * n;
    int rc = 0;
    if (!f->t.size && !f->apart) {
        /* each part's view must be bindable where it starts */
        uint64_t a = vkr_limits(vk)->min_ssbo_align;
        for (uint32_t i = 1; i < f->nparts && !f->apart; i++)
            f->apart = fused_offset(f, i, to) % a != 0;
        if (!f->apart) {
            rc = vkr_arena_alloc(wa, fused_offset(f, f->nparts, to), &f->t, err);
            f->type = to;
        }
    }
    if (!rc && (f->apart || f->type != to || f->part[j].n != n || f->part[j].k != k ||
                (f->have >> j & 1u))) {
        f->apart = 1;
        rc = vkr_arena_alloc(wa, pb, out, err);
    } else if (!rc) {
        *out = vkr_view(f->t, fused_offset(f, j, to), pb);
    }
    if (!rc)
        rc = ops_upload_weight_to(vk, staging, src, wtype, n, k, to, *out, err);
    if (rc)
        return rc;
    if (!f->apart)
        f->have |= 1u << j;
    f->set = !f->apart && f->have == (1u << f->nparts) - 1u;
    return 0;
}
