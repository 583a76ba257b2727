/*
 * The vision-language engine (vlm.h): open sequence, page classification,
 * device-loss bookkeeping. The driver gate is vlm_gate.c, the self-test
 * vlm_selftest.c.
 *
 * Ordering matters at open. The gate runs right after the device is
 * opened and BEFORE any model pipeline exists, because the bug it guards
 * against (Mesa RADV corrupting its heap while compiling the vision
 * tower's shaders) strikes at pipeline creation; a matching rule therefore
 * means the vision tower is never loaded and its pipelines never built.
 * The registry is sealed right after pre-warm, so the warm-up pass and
 * the self-test prove that nothing on the request path builds a pipeline
 * (vkr counts any attempt; tests assert the count stays 0).
 *
 * Memory is planned once for max_image_tokens merged tokens (4x patches)
 * plus the prompt and labels; the preprocessor's max_pixels is capped to
 * the plan, so an oversized page is downscaled by smart resize instead of
 * refused.
 */
#include "common/fault.h"
#include "common/json.h"
#include "engine/vlm_internal.h"
#include "engine/vlm_selftest.h"
#include "engine/arch/arch.h"
#include "engine/model/gguf_model.h"
#include "engine/model/lm.h"
#include "engine/model/preprocess.h"
#include "engine/text/prompt.h"
#include "engine/text/tokenizer.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RULES 64

struct vlm {
    struct vlm_config cfg;
    struct vlm_report rep;
    struct vkr *vk;       /* vks[0]: the vision tower's and the first text layers' */
    struct vkr *vks[VLM_MAX_DEVICES];
    uint32_t ndev;
    struct gguf_model *tm, *vm;
    struct tok *tok;
    struct lm *lm;
    struct vis *vis;
    struct prep_config prep;
    int dead;
    uint32_t classify_calls;
    uint32_t fault_after; /* FOLIO_FAULT=device_lost:N, 0 = none */
    uint32_t max_batch;   /* pages per GPU pass, planned at open */
};

int vlm_selftest(struct vlm *v, struct folio_err *err)
{
    return vlm_selftest_on(v->vk, v->tm, v->vis ? vis_hparams(v->vis) : NULL, err);
}

/* ------------------------------------------------------------------ open */

const struct vlm_report *vlm_report(const struct vlm *v) { return &v->rep; }
int vlm_vision_enabled(const struct vlm *v) { return v->vis != NULL; }
/* Whether any device of the engine is lost. */
static int any_dead(const struct vlm *v)
{
    for (uint32_t i = 0; i < v->ndev; i++)
        if (v->vks[i] && vkr_dead(v->vks[i]))
            return 1;
    return 0;
}

int vlm_dead(const struct vlm *v) { return v->dead || any_dead(v); }
struct lm *vlm_lm(struct vlm *v) { return v->lm; }
struct vkr *vlm_vkr(struct vlm *v) { return v->vk; }
struct vkr *vlm_vkr_at(struct vlm *v, uint32_t i) { return i < v->ndev ? v->vks[i] : NULL; }

int vlm_classify_text(struct vlm *v, const char *text, const char *const *names, uint32_t nl,
                      uint32_t token_budget, struct lm_text_result *out, struct folio_err *err)
{
    return lm_text_classify(v->lm, v->tok, &text, NULL, 1, names, nl, token_budget, out, err);
}

uint64_t vlm_requests_after_seal(const struct vlm *v)
{
    uint64_t n = 0;
    for (uint32_t d = 0; d < v->ndev; d++) {
        struct vkr_stats st;
        vkr_get_stats(v->vks[d], &st);
        n += st.pipeline_requests_after_seal;
    }
    return n;
}
struct vis *vlm_vis_handle(struct vlm *v) { return v->vis; }

uint32_t vlm_backoff_ms(int failures)
{
    uint64_t ms = 500;
    for (int i = 1; i < failures && ms < 60000; i++)
        ms *= 2;
    return (uint32_t)(ms > 60000 ? 60000 : ms);
}

static void disable_vision(struct vlm *v, const char *why)
{
    v->rep.vision_enabled = 0;
    snprintf(v->rep.vision_reason, sizeof v->rep.vision_reason, "%s", why);
    char q[300];
    folio_log(FOLIO_LOG_WARN, "vision_disabled", "reason=%s", folio_lq(q, sizeof q, why));
}

static int load_gate(const struct vlm_config *c, struct vlm_gate_rule *rules, int *n,
                     struct folio_err *err)
{
    *n = 0;
    int rc = 0;
    if (c->gate_file) {
        uint8_t *b = NULL;
        size_t len = 0;
        rc = folio_read_file(c->gate_file, 1u << 20, &b, &len, err);
        if (!rc) {
            char *s = malloc(len + 1);
            if (!s) {
                free(b);
                return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
            }
            memcpy(s, b, len);
            s[len] = 0;
            rc = vlm_gate_parse(s, rules, MAX_RULES, n, err);
            free(s);
        }
        free(b);
        if (rc)
            folio_err_context(err, "reading driver-gate file %s", c->gate_file);
    }
    if (!rc && c->gate_rules) {
        int m = 0;
        rc = vlm_gate_parse(c->gate_rules, rules + *n, MAX_RULES - *n, &m, err);
        *n += m;
    }
    return rc;
}

/* A synthetic page of side x side: mid-gray with darker bands (something
 * for the tower's windows to differ over). */
static uint8_t *warm_page(uint32_t side)
{
    uint8_t *px = malloc((size_t)side * side * 3);
    for (uint32_t i = 0; px && i < side * side * 3; i++)
        px[i] = (uint8_t)((i / (side * 3)) % 64 < 8 ? 40 : 200);
    return px;
}

/* One warm-up pass of n copies of a side x side page scored against nl of
 * the labels. */
static int warm_pass(struct vlm *v, const struct vlm_warm_pass *wp, const char *const *labels,
                     struct folio_err *err)
{
    uint32_t side = wp->side, n = wp->pages, nl = wp->labels;
    double t0 = folio_mono_ms();
    lm_set_gemm_split(v->lm, wp->unsplit ? 1 : 0, wp->unsplit);
    uint8_t *px = warm_page(side);
    struct vlm_prepared **pp = calloc(n, sizeof *pp);
    struct vlm_result *rs = calloc(n, sizeof *rs);
    int rc = px && pp && rs ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    struct vlm_page pg = {px, side, side, (size_t)side * 3, 3};
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = vlm_prepare(v, &pg, labels, nl, &pp[i], err);
    if (!rc)
        rc = vlm_classify_batch(v, pp, n, rs, err);
    lm_set_gemm_split(v->lm, 0, 0);
    for (uint32_t i = 0; pp && rs && i < n; i++) {
        vlm_prepared_free(pp[i]);
        vlm_result_free(&rs[i]);
    }
    free(pp);
    free(rs);
    free(px);
    folio_log(FOLIO_LOG_DEBUG, "vlm_warm_pass", "side=%u pages=%u labels=%u ms=%.1f", side, n, nl,
              folio_mono_ms() - t0);
    return rc;
}

static const char *const warm_labels[16] = {"invoice", "letter", "receipt", "contract",
                                            "form", "report", "memo", "order", "notice",
                                            "claim", "bill", "note", "card", "list", "plan",
                                            "other"};

static int warm_passes(struct vlm *v, struct folio_err *err);

/* The warm-up exercises every pipeline variant a pass can use, without
 * running a full batch (which made the ready time grow with --gpu-batch):
 * (0) a short text through the text tier; (1) one smallest page with one
 * label: the batch-1 path and every kernel's short-matrix variant; (1b)
 * pages between, for the row classes between (below), the last of them
 * again with the text model's GEMMs unsplit (vlm_warm_plan says why); (2) a
 * tall pass, whose every stage has at least ops_rows_all_variants() rows where the
 * plan allows (pages of up to 256 merged tokens, as many as that takes, at
 * least 2 for the multi-page path, at most max_batch) and the label rows
 * of up to 16 labels per page. Its cost is bounded by those rows, not
 * by the batch (a plan of small pages needs more of them: up to
 * max_batch). The open marks the runtime warm afterwards: a variant first
 * recorded later is counted (first_use_after_warm, tests keep it at 0). */
static int warmup(struct vlm *v, struct folio_err *err)
{
    /* an injected device loss counts the caller's passes, not these */
    uint32_t fault_after = v->fault_after;
    v->fault_after = 0;
    int rc = warm_passes(v, err);
    v->fault_after = fault_after;
    v->classify_calls = 0;
    return rc;
}

static int warm_passes(struct vlm *v, struct folio_err *err)
{
    /* the text tier (ocr+lm) runs on the same LM after vision: its short
     * prompt once too (the whole warm-up when there is no tower) */
    struct lm_text_result tr;
    memset(&tr, 0, sizeof tr);
    const char *txt = "warm-up";
    uint32_t nl = v->cfg.max_labels < 16 ? v->cfg.max_labels : 16;
    double t0 = folio_mono_ms();
    int rc = lm_text_classify(v->lm, v->tok, &txt, NULL, 1, warm_labels, nl < 2 ? nl : 2, 16,
                              &tr, err);
    folio_log(FOLIO_LOG_DEBUG, "vlm_warm_pass", "text=1 ms=%.1f", folio_mono_ms() - t0);
    if (rc || !v->vis)
        return rc;
    struct vlm_warm_pass wp[VLM_WARM_MAX];
    int np = vlm_warm_plan(v->vk, v->prep.patch * 2, (uint32_t)sqrt((double)v->prep.max_pixels),
                           v->max_batch, nl,
                           vlm_warm_split_rows(v->vk, &v->tm->text, &v->vm->vision), wp);
    for (int i = 0; !rc && i < np; i++)
        rc = warm_pass(v, &wp[i], warm_labels, err);
    folio_log(FOLIO_LOG_INFO, "vlm_warmup", "tall_pages=%u side=%u labels=%u max_batch=%u",
              wp[np - 1].pages, wp[np - 1].side, nl, v->max_batch);
    return rc;
}

uint32_t vlm_warm_split_rows(const struct vkr *vk, const struct gguf_text_hparams *th,
                             const struct gguf_vision_hparams *vh)
{
    /* the text model's attention from that many tokens, the tower's from
     * that many patches (merge^2 to a merged token) */
    uint64_t mm = (uint64_t)vh->spatial_merge * vh->spatial_merge;
    uint64_t t = ops_attention_split_rows(vk, th->n_head, th->head_dim);
    uint64_t p = ops_attention_split_rows(vk, vh->n_head, vh->head_dim);
    uint64_t v = mm ? (p + mm - 1) / mm : p;
    uint64_t r = t > v ? t : v;
    return r > UINT32_MAX ? UINT32_MAX : (uint32_t)r;
}

int vlm_warm_plan(const struct vkr *vk, uint32_t merge_px, uint32_t max_side, uint32_t max_batch,
                  uint32_t max_labels, uint32_t min_rows, struct vlm_warm_pass *out)
{
    int np = 0;
    uint32_t f = merge_px, nl = max_labels;
    /* one smallest page (56 px, upscaled to the smallest the tower takes),
     * one label: the batch-1 path and every kernel's short-matrix variant */
    out[np++] = (struct vlm_warm_pass){56, 1, 1, 0};
    uint32_t cap = max_side / f;
    uint32_t rows = ops_rows_all_variants(vk);
    /* the caller's rows only where a pass of the plan can have them (else
     * no pass meets what they stand for, and the tall pass would be the
     * plan's largest for nothing) */
    if (min_rows > rows && (uint64_t)min_rows <= (uint64_t)cap * cap * (max_batch ? max_batch : 1))
        rows = min_rows;
    uint32_t cells = (uint32_t)ceil(sqrt((double)rows)); /* merged tokens per side */
    if (cells > cap)
        cells = cap;
    if (cells < 1)
        cells = 1;
    uint32_t side = cells * f, per = cells * cells;
    uint32_t n = (rows + per - 1) / per;
    n = n < 2 ? 2 : n;
    n = n > max_batch ? max_batch : n;
    /* Pages between the smallest and the tall pass, so that every stage
     * meets every row class its kernels tell apart (matrix-vector up to 8
     * rows, 9..32, narrow GEMM tiles up to 64, the towers' GEMM path from
     * 64 patches) together with each class of the stages before it: one
     * page each of c = 2, 4, 8, ... merged tokens a side below the tall
     * side (patches and merged tokens step by 4x) and of half the tall
     * side, then two pages of that half size at once (a label pass's rows
     * between one page's and the tall pass's). Measured on the H200 with
     * the test fixtures before: a page of 140 patches (35 merged) took the
     * tower's GEMM path with a narrow merger tile, and a 52-row pass the
     * LM head's tiled matmul, that no warm-up page had reached
     * (first_use_after_warm, engine_test_vlm_batch). */
    for (uint32_t c = 2; c < cells && np < VLM_WARM_MAX - 5; c *= 2)
        out[np++] = (struct vlm_warm_pass){c * f, 1, nl, 0};
    uint32_t half = cells / 2 ? cells / 2 : 1;
    if (cells >= 4 && (half & (half - 1)))
        out[np++] = (struct vlm_warm_pass){half * f, 1, nl, 0};
    if (max_batch >= 2 && cells >= 2)
        out[np++] = (struct vlm_warm_pass){half * f, 2, nl, 0};
    /* The text model's GEMMs split K while a product's output tiles leave
     * multiprocessors idle, so a wide batch's long prompts run forms of the
     * same tiles unsplit that no warm-up pass of these sizes reaches (H100,
     * batch 8 of 1024² pages: the V projection's 64x128 tile with f16
     * output). One pass with splitting off covers each tile's unsplit form;
     * the passes above cover the split ones. The same pass takes the int8
     * GEMM's tiles for many output tiles (a batch's prompts of thousands
     * of rows, or one very large page's, take them; lm_set_gemm_split), and
     * a second one the int8 GEMM's 160-row tiles (some row counts of one
     * page's prompt, 1,400, take them; H100 run 26 met them first after a
     * warm-up without this pass). */
    if (cells >= 2 && vkr_limits(vk)->compute_units) {
        out[np++] = (struct vlm_warm_pass){half * f, max_batch >= 2 ? 2 : 1, nl, OP_MM_TILES_WIDE};
        out[np++] = (struct vlm_warm_pass){half * f, 1, nl, OP_MM_TILES_TALL};
    }
    out[np++] = (struct vlm_warm_pass){side, n, nl, 0};
    return np;
}

/* The default pages per GPU pass: from the batch-1 plan, the largest of
 * 16, 8, 4, 2 whose activations (batch-1 bytes times the batch: an upper
 * bound, the split buffers do not grow) fit 80 % of the
 * device-local heap next to the weights, then the real plan at that size
 * (halving while it does not fit). A CPU device (lavapipe) stays at 1: it
 * gains nothing from wider passes and its warm-up would only get longer. */
static int choose_batch(struct vlm *v, struct folio_err *err)
{
    uint64_t w1 = 0, a1 = 0, w2 = 0, a2 = 0;
    lm_memory(v->lm, &w1, &a1);
    vis_memory(v->vis, &w2, &a2);
    uint64_t heap = vkr_limits(v->vk)->device_local_bytes, room = heap / 10 * 8;
    uint32_t b = 16;
    if (!strcmp(vkr_device(v->vk)->type, "cpu") || room <= w1 + w2)
        b = 1;
    while (b > 1 && w1 + w2 + (a1 + a2) * b > room)
        b /= 2;
    for (; b > 1; b /= 2) {
        struct folio_err e = {0};
        int rc = lm_replan(v->lm, b, &e);
        if (!rc) {
            rc = vis_replan(v->vis, v->cfg.max_image_tokens * 4 * b, b, &e);
            if (rc) {
                struct folio_err e1 = {0};
                if (lm_replan(v->lm, 1, &e1) != 0) {
                    /* the callee's error whole (detail, hint), with where */
                    *err = e1;
                    folio_err_context(err, "re-planning the text model for one page");
                    return err->code;
                }
            }
        }
        if (!rc)
            break;
        if (rc == FOLIO_EDEVICELOST || any_dead(v)) {
            *err = e;
            err->code = FOLIO_EDEVICELOST;
            folio_err_context(err, "planning a batch of %u pages", b);
            return err->code;
        }
        char q[300];
        folio_log(FOLIO_LOG_INFO, "vlm_batch_smaller", "batch=%u why=%s", b,
                  folio_lq(q, sizeof q, e.msg));
    }
    v->max_batch = b ? b : 1;
    folio_log(FOLIO_LOG_INFO, "vlm_batch", "max_batch=%u heap_bytes=%" PRIu64
              " weights_bytes=%" PRIu64 " act_bytes_batch1=%" PRIu64, v->max_batch, heap,
              w1 + w2, a1 + a2);
    return 0;
}

static void fault_setup(struct vlm *v)
{
    v->fault_after = (uint32_t)folio_fault_num(FOLIO_FAULT_device_lost);
}

/* --device A,B: the selectors of the engine's devices (one when NULL or
 * empty: the first GPU). Commas separate devices; a name substring needs
 * none (llvmpipe's full name has one, "llvmpipe" selects it). */
static int parse_devices(const char *spec, char sel[][128], uint32_t *n, struct folio_err *err)
{
    *n = 0;
    if (!spec || !*spec) {
        sel[0][0] = 0;
        *n = 1;
        return 0;
    }
    for (const char *p = spec;;) {
        size_t k = strcspn(p, ",");
        if (k == 0 || k >= 128) {
            folio_err_set(err, FOLIO_EINVAL, "--device '%s': %s", spec,
                          k ? "a device selector longer than 127 characters"
                            : "an empty device in the list");
            folio_err_hint(err, "give one device, or two separated by a comma: index, UUID or "
                           "name substring each (\"0,1\", \"llvmpipe,llvmpipe\")");
            return FOLIO_EINVAL;
        }
        if (*n == VLM_MAX_DEVICES) {
            folio_err_set(err, FOLIO_EINVAL, "--device '%s': one model runs on at most %d "
                          "devices", spec, VLM_MAX_DEVICES);
            folio_err_hint(err, "name one or two devices");
            return FOLIO_EINVAL;
        }
        memcpy(sel[*n], p, k);
        sel[(*n)++][k] = 0;
        if (!p[k])
            return 0;
        p += k + 1;
    }
}

/* The defaults of the configuration and the preprocessing plan. */
static void open_defaults(struct vlm *v, const struct vlm_config *cfg)
{
    v->cfg = *cfg;
    struct vlm_config *c = &v->cfg;
    if (!c->max_image_tokens)
        c->max_image_tokens = 1600;
    if (!c->max_labels)
        c->max_labels = 32;
    if (!c->max_label_tokens)
        c->max_label_tokens = 16;
    if (!c->max_text_tokens)
        c->max_text_tokens = 1024;
    v->rep.max_image_tokens = c->max_image_tokens;
    v->prep.min_pixels = c->min_pixels;
    v->prep.max_pixels = c->max_pixels;
    prep_config_defaults(&v->prep);
    uint64_t plan_px = (uint64_t)c->max_image_tokens * 28 * 28;
    if (v->prep.max_pixels > plan_px)
        v->prep.max_pixels = (uint32_t)plan_px;
    if (v->prep.min_pixels > v->prep.max_pixels)
        v->prep.min_pixels = v->prep.max_pixels;
    fault_setup(v);
}

/* Every device of --device opened (each its own struct vkr; the same
 * physical device named twice is two logical devices) and gated before
 * any model pipeline exists. The vision tower runs on the first. */
static int open_devices(struct vlm *v, struct folio_err *err)
{
    const struct vlm_config *c = &v->cfg;
    struct vlm_gate_rule rules[MAX_RULES];
    int nrules = 0;
    char sel[VLM_MAX_DEVICES][128];
    int rc = load_gate(c, rules, &nrules, err);
    if (!rc)
        rc = parse_devices(c->device, sel, &v->ndev, err);
    double t = folio_mono_ms();
    for (uint32_t i = 0; !rc && i < v->ndev; i++) {
        struct vkr_config vc = {.device = sel[i][0] ? sel[i] : NULL, .allow_cpu = c->allow_cpu,
                                .validate = c->validate, .cache_dir = c->cache_dir,
                                .ordinal = (int)i};
        rc = vkr_open(&vc, &v->vks[i], err);
        if (rc && v->ndev > 1)
            folio_err_context(err, "device %u of %u ('%s' in --device %s)", i + 1, v->ndev,
                              sel[i], c->device);
    }
    v->vk = v->vks[0];
    v->rep.vk_ms = folio_mono_ms() - t;
    if (rc)
        return rc;
    v->rep.devices = v->ndev;
    const struct vkr_device_info *di = vkr_device(v->vk);
    if (v->ndev > 1)
        snprintf(v->rep.device, sizeof v->rep.device, "%.120s + %.120s", di->name,
                 vkr_device(v->vks[1])->name);
    else
        snprintf(v->rep.device, sizeof v->rep.device, "%s", di->name);
    char ver[32];
    vlm_driver_version(di, ver, sizeof ver);
    snprintf(v->rep.driver, sizeof v->rep.driver, "%s %s", di->driver_name, ver);
    v->rep.vision_enabled = c->mmproj_path != NULL;
    if (!c->mmproj_path)
        snprintf(v->rep.vision_reason, sizeof v->rep.vision_reason, "no vision projector "
                 "configured (--mmproj)");
    for (uint32_t i = 0; i < v->ndev; i++) {
        char why[256];
        enum vlm_gate_path gp = vlm_gate_check(vkr_device(v->vks[i]), rules, nrules, why,
                                               sizeof why);
        if (gp == VLM_GATE_GPU) {
            folio_err_set(err, FOLIO_EUNSUPPORTED, "GPU disabled by the %s", why);
            folio_err_hint(err, "the OCR tiers still run; remove the rule or update the driver");
            return FOLIO_EUNSUPPORTED;
        }
        if (gp == VLM_GATE_VISION && i == 0 && c->mmproj_path) /* the tower's device */
            disable_vision(v, why);
    }
    return 0;
}

/* The text model, its tokenizer and (when the path is on) the projector. */
static int load_models(struct vlm *v, struct folio_err *err)
{
    const struct vlm_config *c = &v->cfg;
    int rc = gguf_model_open_text(c->model_path, &v->tm, err);
    if (!rc)
        rc = tok_load(v->tm->file, &v->tok, err);
    if (rc || !v->rep.vision_enabled)
        return rc;
    struct folio_err ve = {0};
    if (gguf_model_open_vision(c->mmproj_path, &v->vm, &ve) != 0) {
        char m[256];
        snprintf(m, sizeof m, "vision projector: %s", ve.msg);
        disable_vision(v, m);
    } else if (v->vm->vision.proj_dim != v->tm->text.n_embd) {
        char m[256];
        snprintf(m, sizeof m, "vision projector outputs %u-wide rows; the text model is %u "
                 "wide (they are not a pair)", v->vm->vision.proj_dim, v->tm->text.n_embd);
        disable_vision(v, m);
    } else if (v->vm->vision.n_deepstack != v->tm->text.n_deepstack) { /* Qwen3-VL */
        char m[256];
        snprintf(m, sizeof m, "vision projector has %u DeepStack layers; the text model "
                 "takes %u (they are not a pair)", v->vm->vision.n_deepstack,
                 v->tm->text.n_deepstack);
        disable_vision(v, m);
    } else if (v->vm->vision.arch->pixels) { /* the tower's own preprocessing */
        v->vm->vision.arch->pixels(&v->vm->vision, c->min_pixels, c->max_pixels,
                                   c->max_image_tokens, &v->prep);
    }
    if (!v->rep.vision_enabled) {
        gguf_model_close(v->vm);
        v->vm = NULL;
    }
    return 0;
}

/* Every pipeline the loaded models can ask for on device d (the tower's on
 * the first only). */
static int model_keys(struct vlm *v, uint32_t d, struct vkr_pipeline_key *keys, int max)
{
    struct vkr *vk = v->vks[d];
    int nk = lm_pipeline_keys(vk, v->tm, v->cfg.gpu_weights, keys, max);
    if (v->vm && d == 0)
        nk += vis_pipeline_keys(vk, v->vm, keys + nk, max - nk);
    return nk;
}
#define VLM_KEYS_MAX (LM_PIPELINE_KEYS_MAX + VIS_PIPELINE_KEYS_MAX)

/* Pre-warm, first half (ops_prewarm_begin): the kernels that expand weights
 * as they upload now, everything else on the pre-warm threads while the
 * models load (open_models): the driver's compile and the upload overlap
 * instead of adding up (cold start). */
static int prewarm_start_all(struct vlm *v, struct folio_err *err)
{
    int rc = 0;
    for (uint32_t d = 0; d < v->ndev && !rc; d++) {
        struct vkr_pipeline_key keys[VLM_KEYS_MAX];
        int nk = model_keys(v, d, keys, VLM_KEYS_MAX);
        rc = ops_prewarm_begin(v->vks[d], keys, nk, err); /* failures: prewarm_finish_all */
    }
    return rc;
}

/* Pre-warm, second half: waits for the pipelines, decides what their
 * failures cost (an optional kernel: speed; the tower's: the vision path;
 * the text model's: the open), then seals every registry. */
static int prewarm_finish_all(struct vlm *v, struct folio_err *err)
{
    int rc = 0;
    v->rep.prewarm_ms = 0;
    for (uint32_t d = 0; d < v->ndev && !rc; d++) {
        struct vkr *vk = v->vks[d];
        int failed = 0;
        rc = vkr_prewarm_finish(vk, &failed, err);
        if (rc)
            break;
        struct vkr_stats st;
        vkr_get_stats(vk, &st);
        if (st.prewarm_ms > v->rep.prewarm_ms) /* the compile's own length */
            v->rep.prewarm_ms = st.prewarm_ms;
        struct vkr_pipeline_key keys[VLM_KEYS_MAX];
        int nk = model_keys(v, d, keys, VLM_KEYS_MAX);
        /* a kernel the ops take only where it was built failing costs speed,
         * not a path (ops_key_optional): count the others */
        failed = 0;
        for (int i = 0; i < nk; i++)
            failed += !ops_key_optional(&keys[i]) && !vkr_pipeline_ready(vk, &keys[i]);
        if (failed && v->vm && d == 0) {
            /* which ones? if only vision keys failed the LM can still run */
            int nl = lm_pipeline_keys(vk, v->tm, v->cfg.gpu_weights, keys, LM_PIPELINE_KEYS_MAX), lm_bad = 0;
            for (int i = 0; i < nl; i++)
                lm_bad |= !ops_key_optional(&keys[i]) && !vkr_pipeline_ready(vk, &keys[i]);
            if (lm_bad) {
                rc = folio_err_set(err, FOLIO_EDEVICE, "%d pipelines failed to build, some of "
                                   "the text model's among them", failed);
                break;
            }
            char m[128];
            snprintf(m, sizeof m, "%d vision pipelines failed to build on this driver", failed);
            disable_vision(v, m);
            vis_close(v->vis);
            v->vis = NULL;
            gguf_model_close(v->vm);
            v->vm = NULL;
        } else if (failed) {
            rc = folio_err_set(err, FOLIO_EDEVICE, "%d text-model pipelines failed to build on "
                               "device %d (%s)", failed, vkr_device(vk)->index,
                               vkr_device(vk)->name);
            break;
        }
        vkr_seal_save(vk);
    }
    return rc;
}

/* The vision tower on the first device. A problem of the tower only
 * disables the path, but a batch the device cannot hold fails the open. */
static int open_vision(struct vlm *v, struct folio_err *err)
{
    const struct vlm_config *c = &v->cfg;
    if (!v->vm)
        return 0;
    struct vis_config visc = {.max_patches = c->max_image_tokens * 4 * v->max_batch,
                              .max_images = v->max_batch,
                              .f32_matmul = c->f32_matmul, .gpu_weights = c->gpu_weights};
    struct folio_err ve = {0};
    if (vis_open(v->vk, v->vm, &visc, &v->vis, &ve) == 0)
        return 0;
    if (ve.code == FOLIO_EDEVICELOST) {
        *err = ve;
        folio_err_context(err, "opening the vision tower");
        return err->code;
    }
    if (v->max_batch > 1 && (ve.code == FOLIO_ELIMIT || ve.code == FOLIO_ENOMEM)) {
        /* asked for a batch the device cannot hold: say so, rather
         * than run without vision */
        /* the tower's own error (its detail: the numbers that prove it),
         * with where it happened added */
        if (err)
            *err = ve;
        folio_err_prefix(err, "vision tower: ");
        folio_err_context(err, "planning max_batch %u pages per GPU pass of up to %u "
                          "image tokens", v->max_batch, c->max_image_tokens);
        folio_err_hint(err, "lower the batch (--gpu-batch) or the page plan "
                       "(--max-image-tokens), or leave the batch to the memory plan");
        return ve.code;
    }
    char m[256];
    snprintf(m, sizeof m, "vision tower: %s", ve.msg);
    disable_vision(v, m);
    gguf_model_close(v->vm);
    v->vm = NULL;
    return 0;
}

/* The text model, over every device of the engine. */
static int open_text(struct vlm *v, struct folio_err *err)
{
    const struct vlm_config *c = &v->cfg;
    /* rows per prompt: the image, the chat frame (~35 tokens) and the
     * instruction naming every label (each at most max_label_tokens with
     * its end marker; +2 for how it tokenizes inside the sentence). A
     * tight bound matters for batches: every activation is this times
     * max_batch rows. */
    struct lm_config lc = {.max_tokens = c->max_image_tokens + 64 +
                                         c->max_labels * (c->max_label_tokens + 2),
                           .batch = v->max_batch,
                           .max_labels = c->max_labels, .max_label_tokens = c->max_label_tokens,
                           .gpu_weights = c->gpu_weights};
    if (lc.max_tokens < c->max_text_tokens + 256)
        lc.max_tokens = c->max_text_tokens + 256;
    int rc = lm_open_split(v->vks, v->ndev, v->tm, &lc, &v->lm, err);
    if (rc && v->max_batch > 1) /* context: the loader's detail stays */
        folio_err_context(err, "planning the text model for max_batch %u pages per GPU pass "
                          "of up to %u image tokens", v->max_batch, c->max_image_tokens);
    return rc;
}

/* Both models placed: one device, the text model then the tower (the
 * batch chosen from the memory plan after); several, the tower first on
 * the first device so that the text model's split is planned against
 * what it left (the batch stays as configured, 1 by default). */
static int open_models(struct vlm *v, struct folio_err *err)
{
    const struct vlm_config *c = &v->cfg;
    v->max_batch = c->max_batch ? c->max_batch : 1; /* 0: batch 1, then choose_batch */
    double t = folio_mono_ms();
    int rc;
    if (v->ndev > 1) {
        rc = open_vision(v, err);
        if (!rc)
            rc = open_text(v, err);
    } else {
        rc = open_text(v, err);
        if (!rc)
            rc = open_vision(v, err);
        if (!rc && !c->max_batch && v->vis)
            rc = choose_batch(v, err);
    }
    if (rc)
        return rc;
    v->rep.max_batch = v->max_batch;
    v->rep.load_ms += folio_mono_ms() - t;
    uint64_t w1 = 0, a1 = 0, w2 = 0, a2 = 0;
    lm_memory(v->lm, &w1, &a1);
    if (v->vis)
        vis_memory(v->vis, &w2, &a2);
    v->rep.weights_bytes = w1 + w2;
    v->rep.activation_bytes = a1 + a2;
    struct lm_device_plan pl[LM_MAX_DEVICES];
    lm_devices(v->lm, pl, LM_MAX_DEVICES);
    v->rep.split_layer = v->ndev > 1 ? pl[0].l1 : 0;
    return 0;
}

/* Warm-up pass, self-test and the ready report. */
static int open_check(struct vlm *v, double t0, struct folio_err *err)
{
    double t;
    int rc;
    if (!v->cfg.skip_warmup) {
        t = folio_mono_ms();
        rc = warmup(v, err);
        v->rep.warmup_ms = folio_mono_ms() - t;
        if (rc) {
            folio_err_context(err, "the warm-up pass");
            return rc;
        }
    }
    t = folio_mono_ms();
    struct folio_err se = {0};
    rc = vlm_selftest(v, &se);
    v->rep.selftest_ms = folio_mono_ms() - t;
    if (rc == FOLIO_EDEVICELOST || any_dead(v)) {
        *err = se;
        err->code = FOLIO_EDEVICELOST;
        folio_err_context(err, "the self-test");
        return err->code;
    }
    if (rc) {
        char m[256];
        snprintf(m, sizeof m, "self-test failed: %s", se.msg);
        if (se.code == FOLIO_EDEVICE && !v->vis) { /* the self-test's detail stays */
            *err = se;
            folio_err_prefix(err, "self-test failed: ");
            return err->code;
        }
        disable_vision(v, m);
        vis_close(v->vis);
        v->vis = NULL;
        gguf_model_close(v->vm);
        v->vm = NULL;
    }
    v->rep.pipelines = 0;
    for (uint32_t d = 0; d < v->ndev; d++) {
        struct vkr_stats st;
        vkr_get_stats(v->vks[d], &st);
        v->rep.pipelines += st.pipelines_built;
        if (d == 0)
            v->rep.cache_hit = st.cache_hit;
    }
    if (!v->cfg.skip_warmup) /* from here a variant seen for the first time is counted */
        for (uint32_t d = 0; d < v->ndev; d++)
            vkr_mark_warm(v->vks[d]);
    v->rep.total_ms = folio_mono_ms() - t0;
    char q1[300], q2[120], q3[300];
    folio_log(FOLIO_LOG_INFO, "vlm_ready",
              "device=%s driver=%s devices=%u split_layer=%u vision=%d reason=%s vk_ms=%.0f "
              "load_ms=%.0f prewarm_ms=%.0f warmup_ms=%.0f selftest_ms=%.0f total_ms=%.0f "
              "pipelines=%u cache_hit=%d weights_bytes=%" PRIu64 " act_bytes=%" PRIu64,
              folio_lq(q1, sizeof q1, v->rep.device), folio_lq(q2, sizeof q2, v->rep.driver),
              v->rep.devices, v->rep.split_layer, v->rep.vision_enabled,
              folio_lq(q3, sizeof q3, v->rep.vision_reason), v->rep.vk_ms, v->rep.load_ms,
              v->rep.prewarm_ms, v->rep.warmup_ms, v->rep.selftest_ms, v->rep.total_ms,
              v->rep.pipelines, v->rep.cache_hit, v->rep.weights_bytes,
              v->rep.activation_bytes);
    return 0;
}

int vlm_open(const struct vlm_config *cfg, struct vlm **out, struct folio_err *err)
{
    *out = NULL;
    if (!cfg || !cfg->model_path)
        return folio_err_set(err, FOLIO_EINVAL, "vlm: a text model (--model) is required");
    struct vlm *v = calloc(1, sizeof *v);
    if (!v)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    double t0 = folio_mono_ms();
    open_defaults(v, cfg);
    int rc = open_devices(v, err);
    double t = folio_mono_ms();
    if (!rc)
        rc = load_models(v, err);
    v->rep.load_ms = folio_mono_ms() - t;
    if (!rc)
        rc = prewarm_start_all(v, err);
    if (!rc)
        rc = open_models(v, err);
    /* (after a failure vlm_close's vkr_close stops and joins the pre-warm) */
    if (!rc)
        rc = prewarm_finish_all(v, err);
    if (!rc)
        rc = open_check(v, t0, err);
    if (rc) {
        vlm_close(v);
        return rc;
    }
    *out = v;
    return 0;
}

void vlm_close(struct vlm *v)
{
    if (!v)
        return;
    if (v->vk) {
        /* the promise of the design: nothing built on the request path */
        uint64_t after = 0;
        uint32_t built = 0;
        for (uint32_t d = 0; d < v->ndev && v->vks[d]; d++) {
            struct vkr_stats st;
            vkr_get_stats(v->vks[d], &st);
            after += st.pipeline_requests_after_seal;
            built += st.pipelines_built;
        }
        folio_log(after ? FOLIO_LOG_ERROR : FOLIO_LOG_INFO, "vlm_closed",
                  "pipelines=%u pipeline_requests_after_seal=%llu dead=%d devices=%u", built,
                  (unsigned long long)after, vlm_dead(v), v->ndev);
    }
    vis_close(v->vis);
    lm_close(v->lm);
    tok_free(v->tok);
    gguf_model_close(v->vm);
    gguf_model_close(v->tm);
    for (uint32_t d = 0; d < VLM_MAX_DEVICES; d++)
        vkr_close(v->vks[d]);
    free(v);
}

/* -------------------------------------------------------------- classify */

void vlm_result_free(struct vlm_result *r)
{
    free(r->prompt_ids);
    r->prompt_ids = NULL;
}

/* A lost device (any of them) takes the whole engine down: the caller
 * falls back and re-opens every device. */
static int lost(struct vlm *v, int rc, struct folio_err *err)
{
    if (rc == FOLIO_EDEVICELOST || any_dead(v)) {
        if (!v->dead)
        {
            char q[300];
            folio_log(FOLIO_LOG_ERROR, "vlm_dead", "reason=%s", folio_lq(q, sizeof q, err->msg));
        }
        v->dead = 1;
        if (rc != FOLIO_EDEVICELOST) { /* the callee's detail and context stay */
            err->code = rc = FOLIO_EDEVICELOST;
            folio_err_prefix(err, "the device was lost: ");
        }
    }
    return rc;
}

static int build_instruction(const char *const *labels, uint32_t nl, char **out, size_t *len)
{
    *out = prompt_instruction(labels, nl, 0, len);
    return *out ? 0 : FOLIO_ENOMEM;
}

int vlm_check_labels(const struct vlm *v, const char *const *labels, uint32_t nl,
                     struct folio_err *err)
{
    if (nl > v->cfg.max_labels) {
        folio_err_set(err, FOLIO_ELIMIT, "the label set has %u labels; the model tiers score at "
                      "most %u", nl, v->cfg.max_labels);
        folio_err_hint(err, "deactivate labels (folio.labels.active) until at most %u remain",
                       v->cfg.max_labels);
        return FOLIO_ELIMIT;
    }
    /* the continuation a label is scored as: its tokens and <|im_end|>
     * (positions do not change the count) */
    struct prompt at = {0};
    for (uint32_t l = 0; l < nl; l++) {
        struct prompt cont = {0};
        int rc = prompt_continuation(v->tok, &at, labels[l], strlen(labels[l]), 1, &cont, err);
        size_t n = cont.ids.n;
        prompt_free(&cont);
        if (rc) {
            folio_err_context(err, "tokenizing label \"%s\"", labels[l]);
            return rc;
        }
        if (n > v->cfg.max_label_tokens) {
            folio_err_set(err, FOLIO_ELIMIT, "label \"%s\" is %zu tokens with its end marker; the "
                          "model tiers score labels of at most %u", labels[l], n,
                          v->cfg.max_label_tokens);
            folio_err_hint(err, "shorten the label's name (folio.labels or the --labels file) or "
                           "deactivate it; its keywords still serve the rules tier");
            return FOLIO_ELIMIT;
        }
    }
    return 0;
}

/* A page ready for the GPU: everything vlm_classify did on the CPU. */
struct vlm_prepared {
    struct prep_image pi;
    struct prompt p;           /* image then the instruction listing the labels */
    struct prompt *cont;       /* nl label continuations */
    struct lm_label *lab;
    uint32_t nl, M;
    int downscaled;
    double preprocess_ms;
};

void vlm_prepared_free(struct vlm_prepared *pp)
{
    if (!pp)
        return;
    for (uint32_t l = 0; pp->cont && l < pp->nl; l++)
        prompt_free(&pp->cont[l]);
    free(pp->cont);
    free(pp->lab);
    prompt_free(&pp->p);
    prep_image_free(&pp->pi);
    free(pp);
}

uint32_t vlm_max_batch(const struct vlm *v) { return v->max_batch; }

int vlm_prepare(struct vlm *v, const struct vlm_page *page, const char *const *labels,
                uint32_t nl, struct vlm_prepared **out, struct folio_err *err)
{
    double t0 = folio_mono_ms();
    *out = NULL;
    /* no vlm_dead() here: the GPU thread writes that state; a dead engine
     * refuses the batch instead */
    if (!v->vis)
        return folio_err_set(err, FOLIO_ESTATE, "vision path disabled: %s",
                             v->rep.vision_reason);
    if (nl == 0 || nl > v->cfg.max_labels)
        return folio_err_set(err, FOLIO_EINVAL, "vlm: %u labels; the engine takes 1..%u", nl,
                             v->cfg.max_labels);
    struct vlm_prepared *pp = calloc(1, sizeof *pp);
    if (!pp)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    pp->nl = nl;
    struct prep_config pc = v->prep;
    memcpy(pc.mean, vis_hparams(v->vis)->image_mean, sizeof pc.mean);
    memcpy(pc.std, vis_hparams(v->vis)->image_std, sizeof pc.std);
    /* resized bytes only: the tower makes the patch rows on the device
     * (vis_image.rgb), normalised with the same mean and std */
    int rc = prep_image_resize(page->pixels, page->width, page->height, page->stride,
                               page->channels, &pc, &pp->pi, err);
    if (rc) {
        free(pp);
        return rc;
    }
    uint32_t s0, s1;
    struct prep_config full = pc;
    full.max_pixels = v->cfg.max_pixels ? v->cfg.max_pixels : PREP_MAX_PIXELS;
    pp->downscaled = prep_smart_resize(page->height, page->width, &full, &s0, &s1, err) == 0 &&
                     (uint64_t)s0 * s1 > (uint64_t)pp->pi.width * pp->pi.height;
    pp->M = pp->pi.n_patches / 4;

    char *instr = NULL;
    size_t ilen = 0;
    pp->cont = calloc(nl, sizeof *pp->cont);
    pp->lab = calloc(nl, sizeof *pp->lab);
    if (!pp->cont || !pp->lab || build_instruction(labels, nl, &instr, &ilen)) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
        goto done;
    }
    struct prompt_item items[2] = {
        {.kind = PROMPT_IMAGE, .grid_h = pp->pi.grid_h, .grid_w = pp->pi.grid_w},
        {.kind = PROMPT_TEXT, .text = instr, .len = ilen}};
    /* the family's chat template may have no default system turn (Qwen3-VL) */
    struct prompt_opts po = {.no_system = vis_hparams(v->vis)->arch->prompt_no_system,
                             .merge = 2, .generation_prompt = 1};
    rc = prompt_chat_ex(v->tok, &po, items, 2, &pp->p, err);
    for (uint32_t l = 0; !rc && l < nl; l++) {
        rc = prompt_continuation(v->tok, &pp->p, labels[l], strlen(labels[l]), 1, &pp->cont[l],
                                 err);
        if (!rc && pp->cont[l].ids.n > v->cfg.max_label_tokens)
            rc = folio_err_set(err, FOLIO_ELIMIT, "label \"%s\" is %zu tokens; the engine takes "
                               "at most %u", labels[l], pp->cont[l].ids.n,
                               v->cfg.max_label_tokens);
        if (!rc)
            pp->lab[l] = (struct lm_label){pp->cont[l].ids.v, (uint32_t)pp->cont[l].ids.n};
    }
    if (!rc && (pp->p.n_images != 1 || pp->p.images[0].count != pp->M))
        rc = folio_err_set(err, FOLIO_EINVAL, "vlm: the prompt's image span does not match the "
                           "page's %u image tokens", pp->M);
done:
    free(instr);
    pp->preprocess_ms = folio_mono_ms() - t0;
    if (rc) {
        vlm_prepared_free(pp);
        return rc;
    }
    *out = pp;
    return 0;
}

/* Whether two pages are scored against the same label token sequences
 * (then their label rows share one LM pass). */
static int same_labels(const struct vlm_prepared *a, const struct vlm_prepared *b)
{
    if (a->nl != b->nl)
        return 0;
    for (uint32_t l = 0; l < a->nl; l++)
        if (a->lab[l].n != b->lab[l].n ||
            memcmp(a->lab[l].tokens, b->lab[l].tokens, a->lab[l].n * sizeof(int32_t)))
            return 0;
    return 1;
}

static void result_reset(struct vlm_result *r)
{
    r->prompt_ids = NULL;
    r->n_prompt = 0;
}

/* The LM part of a pass: pages [i0, i1) share one label set; their
 * prompts are one ragged prefill with the labels scored in the same
 * submission. Image rows from emb, or where emb is NULL from the tower's
 * rows on the device (rows; page i's from row row0[i]). */
static int lm_group(struct vlm *v, struct vlm_prepared *const *pages, uint32_t i0, uint32_t i1,
                    float *const *emb, const struct vkr_tensor *rows, const uint32_t *row0,
                    int32_t *const *ids, struct vlm_result *out, struct folio_err *err)
{
    uint32_t ns = i1 - i0, nl = pages[i0]->nl;
    struct lm_seq *seq = calloc(ns, sizeof *seq);
    double *lp = calloc((size_t)ns * nl, sizeof *lp);
    double *pr = calloc((size_t)ns * nl, sizeof *pr);
    int *best = calloc(ns, sizeof *best);
    int rc = 0;
    if (!seq || !lp || !pr || !best)
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t i = 0; !rc && i < ns; i++) {
        const struct vlm_prepared *pp = pages[i0 + i];
        seq[i] = (struct lm_seq){ids[i0 + i], (uint32_t)pp->p.ids.n, emb ? emb[i0 + i] : NULL,
                                 pp->p.pos, pp->p.next_pos, emb ? NULL : rows,
                                 emb ? 0 : row0[i0 + i]};
    }
    if (!rc)
        rc = lm_classify(v->lm, seq, ns, pages[i0]->lab, nl, lp, pr, best, err);
    for (uint32_t i = 0; !rc && i < ns; i++) {
        struct vlm_result *r = &out[i0 + i];
        r->best = best[i];
        r->confidence = pr[(size_t)i * nl + best[i]];
        if (r->logprob)
            memcpy(r->logprob, lp + (size_t)i * nl, nl * sizeof *lp);
        if (r->prob)
            memcpy(r->prob, pr + (size_t)i * nl, nl * sizeof *pr);
    }
    free(seq);
    free(lp);
    free(pr);
    free(best);
    return rc;
}

int vlm_classify_batch(struct vlm *v, struct vlm_prepared *const *pages, uint32_t n,
                       struct vlm_result *out, struct folio_err *err)
{
    double t0 = folio_mono_ms();
    for (uint32_t i = 0; i < n; i++)
        result_reset(&out[i]);
    if (vlm_dead(v))
        return folio_err_set(err, FOLIO_EDEVICELOST, "vlm: the device was lost; re-open the "
                             "engine");
    if (!v->vis)
        return folio_err_set(err, FOLIO_ESTATE, "vision path disabled: %s",
                             v->rep.vision_reason);
    if (n == 0 || n > v->max_batch) {
        folio_err_set(err, FOLIO_ELIMIT, "vlm: a batch of %u pages; this engine was opened for "
                      "1..%u pages per GPU pass", n, v->max_batch);
        folio_err_hint(err, "split the batch, or open the engine with a larger max_batch "
                       "(--gpu-batch) if the device memory allows it");
        return FOLIO_ELIMIT;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!pages[i])
            return folio_err_set(err, FOLIO_EINVAL, "vlm: batch page %u is NULL", i);
#ifdef FOLIO_FAULT_INJECTION
    if (v->fault_after && ++v->classify_calls == v->fault_after) {
        folio_err_set(err, FOLIO_EDEVICELOST, "injected device loss (FOLIO_FAULT=device_lost:%u)",
                      v->fault_after);
        return lost(v, FOLIO_EDEVICELOST, err);
    }
#endif
    uint32_t E = vis_out_dim(v->vis);
    /* The tower's rows stay on the device for the text model where both
     * are on one device and the rows have no DeepStack columns; else they
     * come back to the host (emb) and go up again with the prompt. */
    struct vkr_tensor rows = {0};
    int on_dev = v->ndev == 1 && vis_rows(v->vis, &rows);
    float **emb = on_dev ? NULL : calloc(n, sizeof *emb);
    int32_t **ids = calloc(n, sizeof *ids);
    uint32_t *row0 = calloc(n, sizeof *row0);
    int rc = (emb || on_dev) && ids && row0 ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t i = 0; !rc && i < n; i++) {
        const struct vlm_prepared *pp = pages[i];
        size_t np = pp->p.ids.n, first = pp->p.images[0].first;
        row0[i] = i ? row0[i - 1] + (uint32_t)pages[i - 1]->M : 0;
        if (emb)
            emb[i] = malloc(np * E * sizeof **emb);
        ids[i] = malloc(np * sizeof **ids);
        out[i].prompt_ids = malloc(np * sizeof *out[i].prompt_ids);
        if ((emb && !emb[i]) || !ids[i] || !out[i].prompt_ids) {
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
            break;
        }
        memcpy(ids[i], pp->p.ids.v, np * sizeof **ids);
        memcpy(out[i].prompt_ids, pp->p.ids.v, np * sizeof **ids);
        for (size_t j = first; j < first + pp->M; j++)
            ids[i][j] = -1;
    }
    /* vision tower over all pages in one pass */
    struct vis_image *vi = rc ? NULL : calloc(n, sizeof *vi);
    if (!rc && !vi)
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t i = 0; !rc && i < n; i++) {
        const struct vlm_prepared *pp = pages[i];
        vi[i] = (struct vis_image){.grid_h = pp->pi.grid_h, .grid_w = pp->pi.grid_w,
                                   .out = emb ? emb[i] + pp->p.images[0].first * E : NULL,
                                   .rgb = pp->pi.resized};
    }
    if (!rc)
        rc = vis_encode_batch(v->vis, vi, n, err);
    free(vi);
    double t1 = folio_mono_ms();
    /* LM: runs of pages sharing a label set go in one pass each */
    for (uint32_t i0 = 0; !rc && i0 < n;) {
        uint32_t i1 = i0 + 1;
        while (i1 < n && same_labels(pages[i0], pages[i1]))
            i1++;
        rc = lm_group(v, pages, i0, i1, emb, &rows, row0, ids, out, err);
        i0 = i1;
    }
    double t2 = folio_mono_ms();
    for (uint32_t i = 0; i < n; i++) {
        const struct vlm_prepared *pp = pages[i];
        struct vlm_result *r = &out[i];
        r->n_prompt = rc ? 0 : (uint32_t)pp->p.ids.n;
        r->image_tokens = pp->M;
        r->grid_h = pp->pi.grid_h;
        r->grid_w = pp->pi.grid_w;
        r->width = pp->pi.width;
        r->height = pp->pi.height;
        r->downscaled = pp->downscaled;
        r->preprocess_ms = pp->preprocess_ms;
        r->vision_ms = (t1 - t0) / n;
        r->lm_ms = (t2 - t1) / n;
        r->total_ms = r->preprocess_ms + (t2 - t0) / n;
        if (rc)
            vlm_result_free(r);
        if (emb)
            free(emb[i]);
        if (ids)
            free(ids[i]);
    }
    free(emb);
    free(ids);
    free(row0);
    return lost(v, rc, err);
}

int vlm_classify(struct vlm *v, const struct vlm_page *page, const char *const *labels,
                 uint32_t nl, struct vlm_result *r, struct folio_err *err)
{
    struct vlm_prepared *pp;
    result_reset(r);
    if (vlm_dead(v))
        return folio_err_set(err, FOLIO_EDEVICELOST, "vlm: the device was lost; re-open the "
                             "engine");
    int rc = vlm_prepare(v, page, labels, nl, &pp, err);
    if (rc)
        return rc;
    rc = vlm_classify_batch(v, &pp, 1, r, err);
    vlm_prepared_free(pp);
    return rc;
}

int vlm_report_json(const struct vlm *v, char *buf, size_t n)
{
    const struct vlm_report *r = &v->rep;
    char dev[300], drv[120], why[300];
    json_escape(dev, sizeof dev, r->device);
    json_escape(drv, sizeof drv, r->driver);
    json_escape(why, sizeof why, r->vision_reason);
    int k = snprintf(buf, n,
                     "{\"device\":\"%s\",\"driver\":\"%s\",\"vision\":%s,\"vision_reason\":\"%s\","
                     "\"dead\":%s,\"vk_ms\":%.1f,\"load_ms\":%.1f,\"prewarm_ms\":%.1f,"
                     "\"warmup_ms\":%.1f,\"selftest_ms\":%.1f,\"ready_ms\":%.1f,"
                     "\"pipelines\":%u,\"cache_hit\":%d,\"weights_bytes\":%" PRIu64
                     ",\"activation_bytes\":%" PRIu64 ",\"max_image_tokens\":%u,\"max_batch\":%u,"
                     "\"split_layer\":%u,\"devices\":[",
                     dev, drv, r->vision_enabled ? "true" : "false", why,
                     vlm_dead(v) ? "true" : "false", r->vk_ms, r->load_ms, r->prewarm_ms,
                     r->warmup_ms, r->selftest_ms, r->total_ms, r->pipelines, r->cache_hit,
                     r->weights_bytes, r->activation_bytes, r->max_image_tokens, r->max_batch,
                     r->split_layer);
    if (k < 0 || (size_t)k >= n)
        return FOLIO_ELIMIT;
    /* each device's plan: its text layers, the planner's need against its
     * room (two devices), and what was placed */
    struct lm_device_plan pl[LM_MAX_DEVICES];
    uint32_t nd = v->lm ? lm_devices(v->lm, pl, LM_MAX_DEVICES) : 0;
    for (uint32_t d = 0; d < nd && d < LM_MAX_DEVICES; d++) {
        uint64_t vw = 0, va = 0;
        if (d == 0 && v->vis)
            vis_memory(v->vis, &vw, &va);
        char name[300];
        json_escape(name, sizeof name, vkr_device(pl[d].vk)->name);
        int w = snprintf(buf + k, n - (size_t)k,
                         "%s{\"index\":%d,\"name\":\"%s\",\"text_layers\":[%u,%u],\"lm_head\":%s,"
                         "\"vision\":%s,\"room_bytes\":%" PRIu64 ",\"planned_bytes\":%" PRIu64
                         ",\"text_weights_bytes\":%" PRIu64 ",\"text_activation_bytes\":%" PRIu64
                         ",\"vision_bytes\":%" PRIu64 ",\"dead\":%s}",
                         d ? "," : "", vkr_device(pl[d].vk)->index, name, pl[d].l0, pl[d].l1,
                         pl[d].head ? "true" : "false", d == 0 && v->vis ? "true" : "false",
                         pl[d].room, pl[d].need, pl[d].weights, pl[d].activations, vw + va,
                         vkr_dead(pl[d].vk) ? "true" : "false");
        if (w < 0 || (size_t)w >= n - (size_t)k)
            return FOLIO_ELIMIT;
        k += w;
    }
    int w = snprintf(buf + k, n - (size_t)k, "]}");
    return w < 0 || (size_t)w >= n - (size_t)k ? FOLIO_ELIMIT : 0;
}
