/*
 * The vision-language engine (vlm.h): open sequence, driver gate, page
 * classification, device-loss bookkeeping. The self-test is vlm_selftest.c.
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
#include "engine/model/gguf_model.h"
#include "engine/model/lm.h"
#include "engine/model/preprocess.h"
#include "engine/model/prompt.h"
#include "engine/model/tokenizer.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INSTRUCTION "Classify this document. Answer with one label: "
#define MAX_RULES 64

struct vlm {
    struct vlm_config cfg;
    struct vlm_report rep;
    struct vkr *vk;
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

/* ------------------------------------------------------------------ gate */

static const struct vlm_gate_rule BUILTIN[] = {
    {"amd", "radv", "", "26.0.5", VLM_GATE_VISION,
     "Mesa RADV before 26.0.5 corrupts its heap while creating the vision tower's compute "
     "pipelines"},
};

const struct vlm_gate_rule *vlm_gate_builtin(int *n)
{
    *n = (int)(sizeof BUILTIN / sizeof BUILTIN[0]);
    return BUILTIN;
}

static void parse_version(const char *s, uint32_t v[3])
{
    v[0] = v[1] = v[2] = 0;
    for (int i = 0; i < 3 && s && *s; i++) {
        v[i] = (uint32_t)strtoul(s, (char **)&s, 10);
        if (*s != '.')
            break;
        s++;
    }
}

static int vcmp3(const uint32_t a[3], const uint32_t b[3])
{
    for (int i = 0; i < 3; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

void vlm_driver_version(const struct vkr_device_info *d, char *out, size_t n)
{
    const char *m = strstr(d->driver_info, "Mesa ");
    if (m && isdigit((unsigned char)m[5])) {
        uint32_t v[3];
        parse_version(m + 5, v);
        snprintf(out, n, "%u.%u.%u", v[0], v[1], v[2]);
        return;
    }
    uint32_t x = d->driver_version;
    if (d->vendor_id == 0x10de)
        snprintf(out, n, "%u.%u.%u", x >> 22, (x >> 14) & 0xff, (x >> 6) & 0xff);
    else
        snprintf(out, n, "%u.%u.%u", x >> 22, (x >> 12) & 0x3ff, x & 0xfff);
}

static int vendor_matches(const char *rule, uint32_t id)
{
    if (!rule[0] || !strcasecmp(rule, "any"))
        return 1;
    static const struct {
        const char *name;
        uint32_t id;
    } names[] = {{"amd", 0x1002}, {"nvidia", 0x10de}, {"intel", 0x8086}, {"mesa", 0x10005},
                 {"arm", 0x13b5}, {"qualcomm", 0x5143}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(rule, names[i].name))
            return id == names[i].id;
    char *end;
    unsigned long v = strtoul(rule, &end, 16);
    return *end == 0 && v == id;
}

static int icontains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (!n)
        return 1;
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n))
            return 1;
    return 0;
}

static int rule_matches(const struct vlm_gate_rule *r, const struct vkr_device_info *d,
                        const char *ver)
{
    if (!vendor_matches(r->vendor, d->vendor_id) || !icontains(d->driver_name, r->driver))
        return 0;
    uint32_t v[3], lo[3], hi[3];
    parse_version(ver, v);
    if (r->min_version[0]) {
        parse_version(r->min_version, lo);
        if (vcmp3(v, lo) < 0)
            return 0;
    }
    if (r->max_version[0]) {
        parse_version(r->max_version, hi);
        if (vcmp3(v, hi) >= 0)
            return 0;
    }
    return 1;
}

enum vlm_gate_path vlm_gate_check(const struct vkr_device_info *d,
                                  const struct vlm_gate_rule *extra, int n_extra, char *why,
                                  size_t n)
{
    char ver[32];
    vlm_driver_version(d, ver, sizeof ver);
    int nb;
    const struct vlm_gate_rule *b = vlm_gate_builtin(&nb);
    for (int pass = 0; pass < 2; pass++) {
        const struct vlm_gate_rule *rs = pass ? extra : b;
        int nr = pass ? n_extra : nb;
        for (int i = 0; i < nr; i++)
            if (rule_matches(&rs[i], d, ver)) {
                if (why)
                    snprintf(why, n, "driver gate (%s rule %d): %s [device %s, driver %s %s]",
                             pass ? "config" : "built-in", i + 1, rs[i].reason, d->name,
                             d->driver_name, ver);
                return rs[i].path;
            }
    }
    if (why && n)
        why[0] = 0;
    return VLM_GATE_NONE;
}

static int set_field(char *dst, size_t cap, const char *v, size_t len)
{
    if (len >= cap)
        return -1;
    memcpy(dst, v, len);
    dst[len] = 0;
    return 0;
}

int vlm_gate_parse(const char *text, struct vlm_gate_rule *out, int max, int *n,
                   struct folio_err *err)
{
    *n = 0;
    int line = 0;
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        line++;
        const char *s = p, *e = p + len;
        p = eol ? eol + 1 : p + len;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (s == e || *s == '#')
            continue;
        if (*n >= max)
            return folio_err_set(err, FOLIO_ELIMIT, "driver gate: more than %d rules", max);
        struct vlm_gate_rule r;
        memset(&r, 0, sizeof r);
        r.path = VLM_GATE_NONE;
        while (s < e) {
            while (s < e && isspace((unsigned char)*s))
                s++;
            const char *eq = memchr(s, '=', (size_t)(e - s));
            if (!eq)
                return folio_err_set(err, FOLIO_EINVAL, "driver gate line %d: expected key=value "
                                     "at '%.*s'", line, (int)(e - s), s);
            size_t kl = (size_t)(eq - s);
            const char *v = eq + 1, *ve = v;
            if (kl == 6 && !strncmp(s, "reason", 6))
                ve = e;
            else
                while (ve < e && !isspace((unsigned char)*ve))
                    ve++;
            size_t vl = (size_t)(ve - v);
            int bad = 0;
            if (kl == 6 && !strncmp(s, "vendor", 6))
                bad = set_field(r.vendor, sizeof r.vendor, v, vl);
            else if (kl == 6 && !strncmp(s, "driver", 6))
                bad = set_field(r.driver, sizeof r.driver, v, vl);
            else if (kl == 3 && !strncmp(s, "min", 3))
                bad = set_field(r.min_version, sizeof r.min_version, v, vl);
            else if (kl == 3 && !strncmp(s, "max", 3))
                bad = set_field(r.max_version, sizeof r.max_version, v, vl);
            else if (kl == 6 && !strncmp(s, "reason", 6))
                bad = set_field(r.reason, sizeof r.reason, v, vl);
            else if (kl == 4 && !strncmp(s, "path", 4)) {
                if (vl == 6 && !strncmp(v, "vision", 6))
                    r.path = VLM_GATE_VISION;
                else if (vl == 3 && !strncmp(v, "gpu", 3))
                    r.path = VLM_GATE_GPU;
                else
                    bad = 1;
            } else
                return folio_err_set(err, FOLIO_EINVAL, "driver gate line %d: unknown key "
                                     "'%.*s' (vendor, driver, min, max, path, reason)", line,
                                     (int)kl, s);
            if (bad)
                return folio_err_set(err, FOLIO_EINVAL, "driver gate line %d: bad value for "
                                     "'%.*s'", line, (int)kl, s);
            s = ve;
        }
        if (r.path == VLM_GATE_NONE)
            return folio_err_set(err, FOLIO_EINVAL, "driver gate line %d: path=vision or "
                                 "path=gpu is required", line);
        if (!r.reason[0])
            snprintf(r.reason, sizeof r.reason, "configured driver rule");
        out[(*n)++] = r;
    }
    return 0;
}

/* ------------------------------------------------------------------ open */

const struct vlm_report *vlm_report(const struct vlm *v) { return &v->rep; }
int vlm_vision_enabled(const struct vlm *v) { return v->vis != NULL; }
int vlm_dead(const struct vlm *v) { return v->dead || (v->vk && vkr_dead(v->vk)); }
struct lm *vlm_lm(struct vlm *v) { return v->lm; }
const struct tok *vlm_tok(const struct vlm *v) { return v->tok; }
struct vkr *vlm_vkr(struct vlm *v) { return v->vk; }
struct vis *vlm_vis_handle(struct vlm *v) { return v->vis; }
const struct gguf_model *vlm_text_model(struct vlm *v) { return v->tm; }

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

/* Qwen3-VL hook: its preprocessing (16-px patches, so 32-px resize steps;
 * preprocessor_config min 65536 / max 16777216 pixels) and the pixel cap of
 * the plan in its own patches. */
static void qwen3vl_pixels(struct vlm *v)
{
    const struct vlm_config *c = &v->cfg;
    uint32_t f = v->vm->vision.patch_size * 2;
    v->prep.patch = v->vm->vision.patch_size;
    v->prep.min_pixels = c->min_pixels ? c->min_pixels : 65536u;
    v->prep.max_pixels = c->max_pixels ? c->max_pixels : 16777216u;
    uint64_t plan_px = (uint64_t)c->max_image_tokens * f * f;
    if (v->prep.max_pixels > plan_px)
        v->prep.max_pixels = (uint32_t)plan_px;
    /* an upscale rounds each side up to 32 px: with the default min at most a
     * quarter of the plan that stays inside it (a min near the plan would
     * ask for more patches than planned and the page would be refused) */
    uint32_t min_cap = c->min_pixels ? v->prep.max_pixels : v->prep.max_pixels / 4;
    if (v->prep.min_pixels > min_cap)
        v->prep.min_pixels = min_cap;
}

static int warmup(struct vlm *v, struct folio_err *err)
{
    /* a mid-gray page with a darker band: big enough for several windows */
    uint32_t w = 336, h = 224;
    uint8_t *px = malloc((size_t)w * h * 3);
    if (!px)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t i = 0; i < w * h * 3; i++)
        px[i] = (uint8_t)((i / (w * 3)) % 64 < 8 ? 40 : 200);
    static const char *const labels[] = {"invoice", "letter"};
    struct vlm_page pg = {px, w, h, (size_t)w * 3, 3};
    struct vlm_result r;
    memset(&r, 0, sizeof r);
    int rc;
    if (v->vis) {
        /* a full batch: the largest pass the plan allows runs once here */
        struct vlm_prepared **pp = calloc(v->max_batch, sizeof *pp);
        struct vlm_result *rs = calloc(v->max_batch, sizeof *rs);
        rc = pp && rs ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
        for (uint32_t i = 0; !rc && i < v->max_batch; i++)
            rc = vlm_prepare(v, &pg, labels, 2, &pp[i], err);
        if (!rc)
            rc = vlm_classify_batch(v, pp, v->max_batch, rs, err);
        for (uint32_t i = 0; pp && rs && i < v->max_batch; i++) {
            vlm_prepared_free(pp[i]);
            vlm_result_free(&rs[i]);
        }
        free(pp);
        free(rs);
        v->classify_calls = 0;
    } else {
        struct lm_text_result tr;
        memset(&tr, 0, sizeof tr);
        const char *txt = "warm-up";
        rc = lm_text_classify(v->lm, v->tok, &txt, NULL, 1, labels, 2, 16, &tr, err);
    }
    vlm_result_free(&r);
    free(px);
    return rc;
}

/* The default pages per GPU pass: from the batch-1 plan, the largest of
 * 16, 8, 4, 2 whose activations (batch-1 bytes times the batch: an upper
 * bound, the label scratch and split buffers do not grow) fit 80 % of the
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
                if (lm_replan(v->lm, 1, &e1) != 0)
                    return folio_err_set(err, e1.code, "text model: %s", e1.msg);
            }
        }
        if (!rc)
            break;
        if (rc == FOLIO_EDEVICELOST || vkr_dead(v->vk))
            return folio_err_set(err, FOLIO_EDEVICELOST, "while planning a batch of %u: %s", b,
                                 e.msg);
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

int vlm_open(const struct vlm_config *cfg, struct vlm **out, struct folio_err *err)
{
    *out = NULL;
    if (!cfg || !cfg->model_path)
        return folio_err_set(err, FOLIO_EINVAL, "vlm: a text model (--model) is required");
    struct vlm *v = calloc(1, sizeof *v);
    if (!v)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    double t0 = folio_mono_ms(), t;
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

    struct vlm_gate_rule rules[MAX_RULES];
    int nrules = 0;
    int rc = load_gate(c, rules, &nrules, err);
    struct vkr_config vc = {.device = c->device, .allow_cpu = c->allow_cpu,
                            .validate = c->validate, .cache_dir = c->cache_dir};
    t = folio_mono_ms();
    if (!rc)
        rc = vkr_open(&vc, &v->vk, err);
    v->rep.vk_ms = folio_mono_ms() - t;
    if (rc)
        goto fail;
    const struct vkr_device_info *di = vkr_device(v->vk);
    snprintf(v->rep.device, sizeof v->rep.device, "%s", di->name);
    char ver[32];
    vlm_driver_version(di, ver, sizeof ver);
    snprintf(v->rep.driver, sizeof v->rep.driver, "%s %s", di->driver_name, ver);
    char why[256];
    enum vlm_gate_path gp = vlm_gate_check(di, rules, nrules, why, sizeof why);
    if (gp == VLM_GATE_GPU) {
        rc = folio_err_set(err, FOLIO_EUNSUPPORTED, "GPU disabled by the %s", why);
        folio_err_hint(err, "the OCR tiers still run; remove the rule or update the driver");
        goto fail;
    }
    v->rep.vision_enabled = c->mmproj_path != NULL;
    if (!c->mmproj_path)
        snprintf(v->rep.vision_reason, sizeof v->rep.vision_reason, "no vision projector "
                 "configured (--mmproj)");
    else if (gp == VLM_GATE_VISION)
        disable_vision(v, why);

    /* models */
    t = folio_mono_ms();
    rc = gguf_model_open_text(c->model_path, &v->tm, err);
    if (!rc)
        rc = tok_load(v->tm->file, &v->tok, err);
    if (rc)
        goto fail;
    if (v->rep.vision_enabled) {
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
        } else if (v->vm->vision.kind == GGUF_VISION_QWEN3VL) {
            qwen3vl_pixels(v);
        }
        if (!v->rep.vision_enabled) {
            gguf_model_close(v->vm);
            v->vm = NULL;
        }
    }
    /* pipelines: everything the loaded models can ask for, then seal */
    struct vkr_pipeline_key keys[160];
    int nk = lm_pipeline_keys(v->vk, v->tm, keys, 80);
    if (v->vm)
        nk += vis_pipeline_keys(v->vk, v->vm, keys + nk, 160 - nk);
    t = folio_mono_ms();
    int failed = 0;
    rc = vkr_prewarm(v->vk, keys, nk, &failed, err);
    v->rep.prewarm_ms = folio_mono_ms() - t;
    if (rc)
        goto fail;
    if (failed && v->vm) {
        /* which ones? if only vision keys failed the LM can still run */
        int nl = lm_pipeline_keys(v->vk, v->tm, keys, 80), lm_bad = 0;
        for (int i = 0; i < nl; i++) {
            uint32_t id;
            struct folio_err pe = {0};
            lm_bad |= vkr_pipeline(v->vk, &keys[i], &id, &pe) != 0;
        }
        if (lm_bad) {
            rc = folio_err_set(err, FOLIO_EDEVICE, "%d pipelines failed to build, some of the "
                               "text model's among them", failed);
            goto fail;
        }
        char m[128];
        snprintf(m, sizeof m, "%d vision pipelines failed to build on this driver", failed);
        disable_vision(v, m);
        gguf_model_close(v->vm);
        v->vm = NULL;
    } else if (failed) {
        rc = folio_err_set(err, FOLIO_EDEVICE, "%d text-model pipelines failed to build", failed);
        goto fail;
    }
    vkr_seal(v->vk);
    if (vkr_cache_save(v->vk, err) != 0)
    {
        char q[300];
        folio_log(FOLIO_LOG_WARN, "vk_cache_save_failed", "msg=%s", folio_lq(q, sizeof q, err->msg));
    }

    v->max_batch = c->max_batch ? c->max_batch : 1; /* 0: batch 1, then choose_batch */
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
    rc = lm_open(v->vk, v->tm, &lc, &v->lm, err);
    if (rc) {
        if (v->max_batch > 1)
            folio_err_detail(err, "planning the text model for max_batch %u pages per GPU pass "
                             "of up to %u image tokens", v->max_batch, c->max_image_tokens);
        goto fail;
    }
    if (v->vm) {
        struct vis_config visc = {.max_patches = c->max_image_tokens * 4 * v->max_batch,
                                  .max_images = v->max_batch,
                                  .f32_matmul = c->f32_matmul, .gpu_weights = c->gpu_weights};
        struct folio_err ve = {0};
        if (vis_open(v->vk, v->vm, &visc, &v->vis, &ve) != 0) {
            if (ve.code == FOLIO_EDEVICELOST) {
                rc = folio_err_set(err, FOLIO_EDEVICELOST, "%s", ve.msg);
                goto fail;
            }
            if (v->max_batch > 1 && (ve.code == FOLIO_ELIMIT || ve.code == FOLIO_ENOMEM)) {
                /* asked for a batch the device cannot hold: say so, rather
                 * than run without vision */
                rc = folio_err_set(err, ve.code, "vision tower: %s", ve.msg);
                folio_err_detail(err, "planning max_batch %u pages per GPU pass of up to %u "
                                 "image tokens", v->max_batch, c->max_image_tokens);
                folio_err_hint(err, "lower the batch (--gpu-batch) or the page plan "
                               "(--max-image-tokens), or leave the batch to the memory plan");
                goto fail;
            }
            char m[256];
            snprintf(m, sizeof m, "vision tower: %s", ve.msg);
            disable_vision(v, m);
            gguf_model_close(v->vm);
            v->vm = NULL;
        }
    }
    if (!c->max_batch && v->vis) {
        rc = choose_batch(v, err);
        if (rc)
            goto fail;
    }
    v->rep.max_batch = v->max_batch;
    v->rep.load_ms = folio_mono_ms() - t - v->rep.prewarm_ms;
    uint64_t w1 = 0, a1 = 0, w2 = 0, a2 = 0;
    lm_memory(v->lm, &w1, &a1);
    if (v->vis)
        vis_memory(v->vis, &w2, &a2);
    v->rep.weights_bytes = w1 + w2;
    v->rep.activation_bytes = a1 + a2;

    if (!c->skip_warmup) {
        t = folio_mono_ms();
        rc = warmup(v, err);
        v->rep.warmup_ms = folio_mono_ms() - t;
        if (rc) {
            folio_err_context(err, "the warm-up pass");
            goto fail;
        }
    }
    t = folio_mono_ms();
    struct folio_err se = {0};
    rc = vlm_selftest(v, &se);
    v->rep.selftest_ms = folio_mono_ms() - t;
    if (rc == FOLIO_EDEVICELOST || vkr_dead(v->vk)) {
        rc = folio_err_set(err, FOLIO_EDEVICELOST, "self-test: %s", se.msg);
        goto fail;
    }
    if (rc) {
        char m[256];
        snprintf(m, sizeof m, "self-test failed: %s", se.msg);
        if (se.code == FOLIO_EDEVICE && !v->vis) {
            rc = folio_err_set(err, FOLIO_EDEVICE, "%s", m);
            goto fail;
        }
        disable_vision(v, m);
        vis_close(v->vis);
        v->vis = NULL;
        gguf_model_close(v->vm);
        v->vm = NULL;
        rc = 0;
    }
    struct vkr_stats st;
    vkr_get_stats(v->vk, &st);
    char q1[300], q2[120], q3[300];
    v->rep.pipelines = st.pipelines_built;
    v->rep.cache_hit = st.cache_hit;
    v->rep.total_ms = folio_mono_ms() - t0;
    folio_log(FOLIO_LOG_INFO, "vlm_ready",
              "device=%s driver=%s vision=%d reason=%s vk_ms=%.0f load_ms=%.0f prewarm_ms=%.0f "
              "warmup_ms=%.0f selftest_ms=%.0f total_ms=%.0f pipelines=%u cache_hit=%d "
              "weights_bytes=%" PRIu64 " act_bytes=%" PRIu64,
              folio_lq(q1, sizeof q1, v->rep.device), folio_lq(q2, sizeof q2, v->rep.driver),
              v->rep.vision_enabled, folio_lq(q3, sizeof q3, v->rep.vision_reason), v->rep.vk_ms, v->rep.load_ms, v->rep.prewarm_ms,
              v->rep.warmup_ms, v->rep.selftest_ms, v->rep.total_ms, v->rep.pipelines,
              v->rep.cache_hit, v->rep.weights_bytes, v->rep.activation_bytes);
    *out = v;
    return 0;
fail:
    vlm_close(v);
    return rc;
}

void vlm_close(struct vlm *v)
{
    if (!v)
        return;
    if (v->vk) {
        /* the promise of the design: nothing built on the request path */
        struct vkr_stats st;
        vkr_get_stats(v->vk, &st);
        folio_log(st.pipeline_requests_after_seal ? FOLIO_LOG_ERROR : FOLIO_LOG_INFO, "vlm_closed",
                  "pipelines=%u pipeline_requests_after_seal=%llu dead=%d", st.pipelines_built,
                  (unsigned long long)st.pipeline_requests_after_seal, vlm_dead(v));
    }
    vis_close(v->vis);
    lm_close(v->lm);
    tok_free(v->tok);
    gguf_model_close(v->vm);
    gguf_model_close(v->tm);
    vkr_close(v->vk);
    free(v);
}

/* -------------------------------------------------------------- classify */

void vlm_result_free(struct vlm_result *r)
{
    free(r->prompt_ids);
    r->prompt_ids = NULL;
}

static int lost(struct vlm *v, int rc, struct folio_err *err)
{
    if (rc == FOLIO_EDEVICELOST || vkr_dead(v->vk)) {
        if (!v->dead)
        {
            char q[300];
            folio_log(FOLIO_LOG_ERROR, "vlm_dead", "reason=%s", folio_lq(q, sizeof q, err->msg));
        }
        v->dead = 1;
        if (rc != FOLIO_EDEVICELOST)
            rc = folio_err_set(err, FOLIO_EDEVICELOST, "the device was lost: %s", err->msg);
    }
    return rc;
}

static int build_instruction(const char *const *labels, uint32_t nl, char **out, size_t *len)
{
    size_t cap = sizeof INSTRUCTION + 8;
    for (uint32_t l = 0; l < nl; l++)
        cap += strlen(labels[l]) + 2;
    char *u = malloc(cap);
    if (!u)
        return FOLIO_ENOMEM;
    size_t n = sizeof INSTRUCTION - 1;
    memcpy(u, INSTRUCTION, n);
    for (uint32_t l = 0; l < nl; l++) {
        size_t k = strlen(labels[l]);
        memcpy(u + n, labels[l], k);
        n += k;
        if (l + 1 < nl) {
            memcpy(u + n, ", ", 2);
            n += 2;
        }
    }
    u[n++] = '.';
    u[n] = 0;
    *out = u;
    *len = n;
    return 0;
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
    int rc = prep_image(page->pixels, page->width, page->height, page->stride, page->channels,
                        &pc, 1, &pp->pi, err);
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
    /* Qwen3-VL's chat template has no default system turn (Qwen2's has) */
    struct prompt_opts po = {.no_system = vis_hparams(v->vis)->kind == GGUF_VISION_QWEN3VL,
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
 * prompts (image rows from emb) are one ragged prefill with the labels
 * scored in the same submission. */
static int lm_group(struct vlm *v, struct vlm_prepared *const *pages, uint32_t i0, uint32_t i1,
                    float *const *emb, int32_t *const *ids, struct vlm_result *out,
                    struct folio_err *err)
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
        seq[i] = (struct lm_seq){ids[i0 + i], (uint32_t)pp->p.ids.n, emb[i0 + i], pp->p.pos,
                                 pp->p.next_pos};
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
    float **emb = calloc(n, sizeof *emb);
    int32_t **ids = calloc(n, sizeof *ids);
    int rc = emb && ids ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t i = 0; !rc && i < n; i++) {
        const struct vlm_prepared *pp = pages[i];
        size_t np = pp->p.ids.n, first = pp->p.images[0].first;
        emb[i] = malloc(np * E * sizeof **emb);
        ids[i] = malloc(np * sizeof **ids);
        out[i].prompt_ids = malloc(np * sizeof *out[i].prompt_ids);
        if (!emb[i] || !ids[i] || !out[i].prompt_ids) {
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
        vi[i] = (struct vis_image){pp->pi.patches, pp->pi.grid_h, pp->pi.grid_w,
                                   emb[i] + pp->p.images[0].first * E};
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
        rc = lm_group(v, pages, i0, i1, emb, ids, out, err);
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
                     ",\"activation_bytes\":%" PRIu64 ",\"max_image_tokens\":%u,\"max_batch\":%u}",
                     dev, drv, r->vision_enabled ? "true" : "false", why,
                     vlm_dead(v) ? "true" : "false", r->vk_ms, r->load_ms, r->prewarm_ms,
                     r->warmup_ms, r->selftest_ms, r->total_ms, r->pipelines, r->cache_hit,
                     r->weights_bytes, r->activation_bytes, r->max_image_tokens, r->max_batch);
    return k < 0 || (size_t)k >= n ? FOLIO_ELIMIT : 0;
}
