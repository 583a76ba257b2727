/*
 * The start-up known-answer self-test (docs/DESIGN.md §6.4): small instances of
 * the ops the loaded models run — with the same pipelines, so nothing new
 * is built after seal — computed on this device and compared with the C
 * references in engine/ops. It exists for drivers that build a pipeline
 * fine and then compute garbage; the op test suite proves the shaders on
 * known-good drivers, this proves the driver on this machine.
 *
 * One pass, one submit (and, with a tower, a second small one for its
 * input op, op_patchify), inputs from a fixed-seed generator. Bounds are
 * loose next to the op tests' (2e-3 of the largest reference value):
 * wrong results from a broken compiler are off by orders of magnitude.
 * A failure names the op and the numbers; vlm_open then disables the
 * vision path (or refuses the GPU when the text model's ops fail).
 */
#include "common/rng.h"
#include "engine/vlm_selftest.h"
#include "engine/arch/arch.h"
#include "engine/model/gguf_model.h"
#include "engine/model/lm.h"
#include "engine/model/preprocess.h"
#include "engine/quant/quant.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


#define T 16u   /* rows */
#define K 64u   /* row width */
#define NO 32u  /* matmul outputs */
#define QK 256u /* quantised row width (one K-quant block) */
#define QM 4u   /* matvec rows */
#define NE 256u /* element-wise count */

static void fill(struct folio_rng *s, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = folio_rng_signed(s) * scale;
}

static int compare(const char *op, const float *g, const float *r, size_t n,
                   struct folio_err *err)
{
    double mx = 0, md = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(r[i]) > mx)
            mx = fabs(r[i]);
        double d = fabs((double)g[i] - r[i]);
        if (!(d <= md))
            md = d;
    }
    if (!(md <= 2e-3 * (mx > 1e-3 ? mx : 1e-3)))
        return folio_err_set(err, FOLIO_EDEVICE, "self-test %s: max|gpu - reference| = %.3g "
                             "(max|reference| %.3g, bound %.3g)", op, md, mx, 2e-3 * mx);
    return 0;
}

enum { B_W, B_X, B_Y, B_QW, B_QX, B_QY, B_NX, B_NW, B_NB, B_NY, B_RX, B_RP, B_RY,
       B_AQ, B_AK, B_AV, B_AO, B_AR, B_EA, B_EB, B_EY, B_EY2, NB };

/* The tower's input op: a small page's bytes into patch rows (window order
 * where the tower has windows, with ragged edge windows: 3 x 5 merge
 * groups), against the C reference; its own small pass. */
static int selftest_patchify(struct vkr *vk, const struct gguf_vision_hparams *vh,
                             struct folio_err *err)
{
    const uint32_t P = vh->patch_size, S = vh->spatial_merge, f = P * S;
    const uint32_t win = vh->window_size ? vh->window_size / f : 0;
    struct op_patchify pa = {.width = 5 * f, .height = 3 * f, .patch = P, .merge = S,
                             .win = win > 2 ? 2 : win};
    const uint64_t nb = (uint64_t)pa.width * pa.height * 3, nrow = (uint64_t)pa.width * pa.height / (P * P);
    const uint64_t ny = nrow * 3 * P * P;
    struct prep_config pc = {.patch = P, .merge = S};
    memcpy(pc.mean, vh->image_mean, sizeof pc.mean);
    memcpy(pc.std, vh->image_std, sizeof pc.std);
    float lut[3 * 256];
    prep_norm_table(&pc, lut);
    uint8_t *rgb = malloc(nb);
    float *ref = malloc(ny * 4), *got = malloc(ny * 4);
    struct vkr_arena *a = NULL;
    int rc = rgb && ref && got ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    uint64_t sz[3] = {nb, sizeof lut, ny * 4};
    if (!rc)
        rc = vkr_arena_create(vk, "selftest-patchify", VKR_ARENA_ACTIVATIONS, &a, err);
    if (!rc)
        rc = vkr_arena_plan(a, sz, 3, err);
    if (!rc)
        rc = vkr_arena_alloc(a, nb, &pa.rgb, err);
    if (!rc)
        rc = vkr_arena_alloc(a, sizeof lut, &pa.lut, err);
    if (!rc)
        rc = vkr_arena_alloc(a, ny * 4, &pa.y, err);
    for (uint64_t i = 0; !rc && i < nb; i++)
        rgb[i] = (uint8_t)(i * 37 + i / 7);
    if (!rc)
        rc = vkr_upload(vk, pa.rgb, 0, rgb, nb, err);
    if (!rc)
        rc = vkr_upload(vk, pa.lut, 0, lut, sizeof lut, err);
    struct vkr_cmd *c = NULL;
    if (!rc)
        rc = vkr_cmd_begin(vk, &c, err);
    if (!rc) {
        rc = op_patchify(c, &pa, err);
        if (rc)
            vkr_cmd_abort(c);
        else
            rc = vkr_cmd_submit(c, err);
    }
    if (!rc)
        rc = vkr_download(vk, pa.y, 0, got, ny * 4, err);
    if (!rc) {
        ops_ref_patchify(&pa, rgb, lut, ref);
        rc = compare("patchify", got, ref, ny, err);
    }
    vkr_arena_destroy(a);
    free(rgb);
    free(ref);
    free(got);
    return rc;
}

int vlm_selftest_on(struct vkr *vk, const struct gguf_model *tm,
                    const struct gguf_vision_hparams *vh, struct folio_err *err)
{
    /* the tower's norm and MLP activation (its descriptor); the text
     * model's: RMSNorm, SwiGLU, its family's rotary layout */
    int layer = vh && vh->arch->norm_kind == 1; /* LayerNorm */
    uint32_t H = 2, Dh = vh ? vh->head_dim : tm->text.head_dim;
    enum op_rope_mode rmode = vh ? OP_ROPE_VISION : (enum op_rope_mode)tm->text.arch->rope_mode;
    /* the text model's weight type, quantised here, through matvec */
    int qt = QUANT_F32;
    for (uint64_t i = 0; i < tm->n_items; i++)
        if (!tm->items[i].on_host && tm->items[i].t->n_dims == 2) {
            qt = tm->items[i].t->type;
            break;
        }
    uint64_t qrow = quant_row_bytes(qt, QK);
    uint64_t HD = (uint64_t)T * H * Dh;
    uint64_t sz[NB] = {
        [B_W] = NO * K * 4, [B_X] = T * K * 4, [B_Y] = T * NO * 4,
        [B_QW] = qrow * NO, [B_QX] = QM * QK * 4, [B_QY] = QM * NO * 4,
        [B_NX] = T * K * 4, [B_NW] = K * 4, [B_NB] = K * 4, [B_NY] = T * K * 4,
        [B_RX] = HD * 4, [B_RP] = T * 3 * 4, [B_RY] = HD * 4,
        [B_AQ] = HD * 4, [B_AK] = HD * 4, [B_AV] = HD * 4, [B_AO] = HD * 4, [B_AR] = T * 8,
        [B_EA] = NE * 4, [B_EB] = NE * 4, [B_EY] = NE * 4, [B_EY2] = NE * 4};
    struct vkr_arena *a = NULL;
    struct vkr_tensor t[NB];
    int rc = vkr_arena_create(vk, "selftest", VKR_ARENA_ACTIVATIONS, &a, err);
    if (!rc)
        rc = vkr_arena_plan(a, sz, NB, err);
    for (int i = 0; !rc && i < NB; i++)
        rc = vkr_arena_alloc(a, sz[i], &t[i], err);
    float *h[NB] = {0};
    float *ref = malloc(HD * 4 > NE * 4 ? HD * 4 + 4096 : NE * 4 + 4096);
    float *got = malloc(HD * 4 > NE * 4 ? HD * 4 + 4096 : NE * 4 + 4096);
    float *wq = malloc(NO * QK * 4);
    uint8_t *qw = malloc(qrow * NO);
    for (int i = 0; !rc && i < NB; i++)
        if (!(h[i] = calloc(1, sz[i])))
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    if (!rc && (!ref || !got || !wq || !qw))
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    if (rc)
        goto out;
    struct folio_rng s = {0x9e3779b97f4a7c15ull};
    fill(&s, h[B_W], NO * K, 0.5f);
    fill(&s, h[B_X], T * K, 1.0f);
    fill(&s, wq, NO * QK, 0.2f);
    for (uint32_t r = 0; r < NO && !rc; r++)
        rc = quant_quantize_row(qt, wq + r * QK, qw + r * qrow, QK);
    for (uint32_t r = 0; r < NO && !rc; r++)
        rc = quant_dequantize_row(qt, qw + r * qrow, wq + r * QK, QK);
    if (rc) {
        rc = folio_err_set(err, FOLIO_EINVAL, "self-test: weight type %d", qt);
        goto out;
    }
    memcpy(h[B_QW], qw, qrow * NO);
    fill(&s, h[B_QX], QM * QK, 1.0f);
    fill(&s, h[B_NX], T * K, 2.0f);
    fill(&s, h[B_NW], K, 1.0f);
    fill(&s, h[B_NB], K, 0.5f);
    fill(&s, h[B_RX], HD, 1.0f);
    int32_t *pos = (int32_t *)h[B_RP];
    for (uint32_t i = 0; i < T * 3; i++)
        pos[i] = (int32_t)(i * 7 % 23);
    fill(&s, h[B_AQ], HD, 1.0f);
    fill(&s, h[B_AK], HD, 1.0f);
    fill(&s, h[B_AV], HD, 1.0f);
    uint32_t *rg = (uint32_t *)h[B_AR];
    for (uint32_t i = 0; i < T; i++) {
        rg[2 * i] = i < T / 2 ? 0 : T / 2;     /* two windows, as a window layer */
        rg[2 * i + 1] = i < T / 2 ? T / 2 : T;
    }
    fill(&s, h[B_EA], NE, 3.0f);
    fill(&s, h[B_EB], NE, 3.0f);
    for (int i = 0; !rc && i < NB; i++)
        rc = vkr_upload(vk, t[i], 0, h[i], sz[i], err);
    /* The text model attends over its f16 KV cache: K and V as f16 (the
     * reference reads the same rounded values). The f16 words go over the
     * f32 upload's first half. */
    for (int i = B_AK; !vh && !rc && i <= B_AV; i++) {
        uint16_t *kv = (uint16_t *)ref;
        for (uint64_t j = 0; j < HD; j++) {
            kv[j] = quant_f32_to_f16(h[i][j]);
            h[i][j] = quant_f16_to_f32(kv[j]);
        }
        rc = vkr_upload(vk, t[i], 0, kv, HD * 2, err);
    }
    if (rc)
        goto out;

    struct vkr_cmd *c;
    rc = vkr_cmd_begin(vk, &c, err);
    if (rc)
        goto out;
    struct op_matmul m1 = {.w = t[B_W], .wtype = QUANT_F32, .n = NO, .k = K, .x = t[B_X], .m = T,
                           .y = t[B_Y], .kernel = OP_MM_TILED};
    struct op_matmul m2 = {.w = t[B_QW], .wtype = qt, .n = NO, .k = QK, .x = t[B_QX], .m = QM,
                           .y = t[B_QY], .kernel = OP_MM_MATVEC};
    struct op_rope ro = {.x = t[B_RX], .y = t[B_RY], .pos = t[B_RP], .t = T, .h = H, .d = Dh,
                         .mode = rmode, .base = vh ? 10000.0f : tm->text.rope_theta};
    if (!vh) /* the M-RoPE sections (unused by a plain rotary layout) */
        for (int i = 0; i < 3; i++)
            ro.sections[i] = (uint32_t)tm->text.mrope_sections[i] * Dh / tm->text.head_dim;
    struct op_attention at = {.q = t[B_AQ], .k = t[B_AK], .v = t[B_AV], .o = t[B_AO], .tq = T,
                              .tk = T, .hq = H, .hkv = H, .d = Dh,
                              .scale = 1.0f / sqrtf((float)Dh), .causal = 0,
                              .ranges = &t[B_AR], .kv_f16 = !vh};
    enum op_elem_kind e1 = vh ? OP_GELU_ERF : OP_ADD;
    enum op_elem_kind e2 = vh ? (enum op_elem_kind)vh->arch->act : OP_SWIGLU;
    int fpv = !vh || !layer; /* norm without bias: RMSNorm */
    if (vh)
        rc = op_matmul(c, &m1, err);
    if (!rc)
        rc = op_matmul(c, &m2, err);
    if (!rc)
        rc = op_norm(c, &(struct op_norm){.x = t[B_NX], .y = t[B_NY], .w = &t[B_NW],
                                          .b = fpv ? NULL : &t[B_NB], .rows = T, .n = K,
                                          .eps = 1e-6f, .layer = layer}, err);
    if (!rc)
        rc = op_rope(c, &ro, err);
    if (!rc)
        rc = op_attention(c, &at, err);
    if (!rc)
        rc = op_elem(c, &(struct op_elem){.op = e1, .a = t[B_EA],
                                          .b = e1 == OP_ADD ? &t[B_EB] : NULL, .y = t[B_EY],
                                          .n = NE, .nb = e1 == OP_ADD ? NE : 0}, err);
    if (!rc)
        rc = op_elem(c, &(struct op_elem){.op = e2, .a = t[B_EA],
                                          .b = e2 == OP_SWIGLU ? &t[B_EB] : NULL, .y = t[B_EY2],
                                          .n = NE, .nb = e2 == OP_SWIGLU ? NE : 0}, err);
    if (rc) {
        vkr_cmd_abort(c);
        goto out;
    }
    rc = vkr_cmd_submit(c, err);
    if (rc)
        goto out;

    /* compare */
    if (vh) {
        ops_ref_matmul(h[B_W], h[B_X], NULL, ref, T, NO, K);
        rc = vkr_download(vk, t[B_Y], 0, got, T * NO * 4, err);
        if (!rc)
            rc = compare("matmul f32", got, ref, T * NO, err);
    }
    if (!rc) {
        ops_ref_matmul(wq, h[B_QX], NULL, ref, QM, NO, QK);
        rc = vkr_download(vk, t[B_QY], 0, got, QM * NO * 4, err);
        if (!rc)
            rc = compare(quant_type_name(qt), got, ref, QM * NO, err);
    }
    if (!rc) {
        ops_ref_norm(layer, h[B_NX], ref, h[B_NW], fpv ? NULL : h[B_NB], T, K, 1e-6f);
        rc = vkr_download(vk, t[B_NY], 0, got, T * K * 4, err);
        if (!rc)
            rc = compare(layer ? "layer norm" : "rms norm", got, ref, T * K, err);
    }
    if (!rc) {
        ops_ref_rope(&ro, h[B_RX], pos, ref);
        rc = vkr_download(vk, t[B_RY], 0, got, HD * 4, err);
        if (!rc)
            rc = compare(vh ? "vision rope" : "text rope", got, ref, HD, err);
    }
    if (!rc) {
        ops_ref_attention(&at, h[B_AQ], h[B_AK], h[B_AV], rg, ref);
        rc = vkr_download(vk, t[B_AO], 0, got, HD * 4, err);
        if (!rc)
            rc = compare("windowed attention", got, ref, HD, err);
    }
    if (!rc) {
        ops_ref_elem(e1, h[B_EA], e1 == OP_ADD ? h[B_EB] : NULL, ref, NE, e1 == OP_ADD ? NE : 0,
                     1.0f, 0.0f);
        rc = vkr_download(vk, t[B_EY], 0, got, NE * 4, err);
        if (!rc)
            rc = compare(e1 == OP_ADD ? "add" : "gelu", got, ref, NE, err);
    }
    if (!rc) {
        ops_ref_elem(e2, h[B_EA], e2 == OP_SWIGLU ? h[B_EB] : NULL, ref, NE,
                     e2 == OP_SWIGLU ? NE : 0, 1.0f, 0.0f);
        rc = vkr_download(vk, t[B_EY2], 0, got, NE * 4, err);
        if (!rc)
            rc = compare(e2 == OP_SWIGLU ? "swiglu" : "quick gelu", got, ref, NE, err);
    }
    if (!rc && vh)
        rc = selftest_patchify(vk, vh, err);
out:
    for (int i = 0; i < NB; i++)
        free(h[i]);
    free(ref);
    free(got);
    free(wq);
    free(qw);
    vkr_arena_destroy(a);
    return rc;
}
