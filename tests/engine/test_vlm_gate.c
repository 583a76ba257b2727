/*
 * The vision engine's guards, on lavapipe with the parity kit's Qwen2.5-VL
 * pair:
 *  - gate rules: the built-in table's first rule is Mesa RADV < 26.0.5 on
 *    the vision path, matching a RADV 24.0.1 device and not 26.0.5 / not
 *    NVIDIA; the rule-file parser reads every key and refuses unknown keys
 *    and missing paths naming the line;
 *  - a rule matching lavapipe (path=vision) opens the engine with vision
 *    off, the reason logged and reported, FEWER pipelines built (the
 *    tower's were never created), classify refused with FOLIO_ESTATE, and
 *    the OCR-text tier still working on the same LM; path=gpu refuses the
 *    GPU with FOLIO_EUNSUPPORTED; a rule file with a bad line fails open;
 *  - no mmproj: vision off with a reason;
 *  - bad pages: an aspect ratio of 300 is FOLIO_EINVAL and leaves the
 *    engine usable; a page far larger than the plan is downscaled and
 *    classified (downscaled flag), never refused;
 *  - the self-test passes on this device (and again on demand);
 *  - fault injection FOLIO_FAULT=device_lost:2: the 2nd classify fails
 *    with FOLIO_EDEVICELOST, the engine is dead and stays dead, a re-open
 *    works; backoff doubles from 0.5 s and caps at 60 s.
 */
#include "tests/support/testutil.h"
#include "common/common.h"
#include "engine/model/lm.h"
#include "engine/vk/vkr.h"
#include "engine/vlm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE_V(cond, ...)                                                                 \
    do {                                                                                     \
        CHECK(cond, __VA_ARGS__);                                                            \
        if (!(cond))                                                                         \
            return;                                                                          \
    } while (0)

static char tpath[1200], vpath[1200];

static struct vlm_config base(void)
{
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vlm_config c = {.model_path = tpath, .mmproj_path = vpath,
                           .device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                           .validate = -1, .cache_dir = "", .max_image_tokens = 40,
                           .max_pixels = 28224, .max_labels = 8, .max_label_tokens = 8,
                           .max_text_tokens = 64, .skip_warmup = 1};
    return c;
}

static void rules(void)
{
    int n = 0;
    const struct vlm_gate_rule *b = vlm_gate_builtin(&n);
    REQUIRE_V(n >= 1, "no built-in rules");
    CHECK(!strcmp(b[0].driver, "radv") && !strcmp(b[0].max_version, "26.0.5") &&
              b[0].path == VLM_GATE_VISION,
          "first built-in rule is %s < %s", b[0].driver, b[0].max_version);
    struct vkr_device_info d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "AMD Radeon RX 7900 XTX (RADV NAVI31)");
    snprintf(d.driver_name, sizeof d.driver_name, "radv");
    snprintf(d.driver_info, sizeof d.driver_info, "Mesa 24.0.1");
    d.vendor_id = 0x1002;
    char why[256], ver[32];
    vlm_driver_version(&d, ver, sizeof ver);
    CHECK(!strcmp(ver, "24.0.1"), "version %s", ver);
    CHECK(vlm_gate_check(&d, NULL, 0, why, sizeof why) == VLM_GATE_VISION &&
              strstr(why, "26.0.5") && strstr(why, "24.0.1"),
          "RADV 24.0.1 not gated: %s", why);
    snprintf(d.driver_info, sizeof d.driver_info, "Mesa 26.0.5");
    CHECK(vlm_gate_check(&d, NULL, 0, why, sizeof why) == VLM_GATE_NONE, "26.0.5 gated: %s", why);
    snprintf(d.driver_info, sizeof d.driver_info, "Mesa 26.1.0-devel");
    CHECK(vlm_gate_check(&d, NULL, 0, why, sizeof why) == VLM_GATE_NONE, "26.1 gated");
    /* NVIDIA's packed version: 580.95.5 */
    struct vkr_device_info nv;
    memset(&nv, 0, sizeof nv);
    nv.vendor_id = 0x10de;
    nv.driver_version = (580u << 22) | (95u << 14) | (5u << 6);
    snprintf(nv.driver_name, sizeof nv.driver_name, "NVIDIA");
    vlm_driver_version(&nv, ver, sizeof ver);
    CHECK(!strcmp(ver, "580.95.5"), "nvidia version %s", ver);
    CHECK(vlm_gate_check(&nv, NULL, 0, why, sizeof why) == VLM_GATE_NONE, "nvidia gated");

    struct vlm_gate_rule r[4];
    struct folio_err e = {0};
    int rc = vlm_gate_parse("# comment\n\n  vendor=nvidia driver=NVIDIA min=570 max=580.95.6 "
                            "path=gpu reason=bad fences on this branch  \n",
                            r, 4, &n, &e);
    CHECK(rc == 0 && n == 1 && r[0].path == VLM_GATE_GPU && !strcmp(r[0].min_version, "570") &&
              !strcmp(r[0].reason, "bad fences on this branch"),
          "parse: rc %d n %d %s", rc, n, e.msg);
    CHECK(vlm_gate_check(&nv, r, n, why, sizeof why) == VLM_GATE_GPU && strstr(why, "config rule 1"),
          "config rule: %s", why);
    rc = vlm_gate_parse("driver=radv path=vision\ncolour=blue path=gpu\n", r, 4, &n, &e);
    CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "line 2") && strstr(e.msg, "colour"), "%s", e.msg);
    rc = vlm_gate_parse("driver=radv\n", r, 4, &n, &e);
    CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "path"), "%s", e.msg);
    rc = vlm_gate_parse("driver=radv path=cpu\n", r, 4, &n, &e);
    CHECK(rc == FOLIO_EINVAL, "path=cpu accepted");
}

static uint8_t *page(uint32_t w, uint32_t h)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    for (size_t i = 0; p && i < (size_t)w * h * 3; i++)
        p[i] = (uint8_t)(i * 2654435761u >> 24);
    return p;
}

static const char *const LABELS[] = {"invoice", "letter", "receipt"};

static void gated(void)
{
    struct folio_err e = {0};
    struct vlm *v = NULL;
    struct vlm_config c = base();
    c.max_pixels = 0; /* the model's 12.8 Mpx: the 40-token plan is what shrinks pages */
    int rc = vlm_open(&c, &v, &e);
    REQUIRE_V(rc == 0, "open: %s / %s", e.msg, e.detail);
    struct vkr_stats s;
    vkr_get_stats(vlm_vkr(v), &s);
    uint32_t full_pipes = s.pipelines_built;
    CHECK(vlm_vision_enabled(v) && vlm_report(v)->selftest_ms > 0, "vision off: %s",
          vlm_report(v)->vision_reason);
    CHECK(vlm_selftest(v, &e) == 0, "self-test: %s", e.msg);
    char js[2048];
    CHECK(vlm_report_json(v, js, sizeof js) == 0 && strstr(js, "\"vision\":true"), "%s", js);

    /* bad and oversized pages */
    uint8_t *tall = page(3, 900);
    struct vlm_result r;
    memset(&r, 0, sizeof r);
    struct vlm_page pg = {tall, 3, 900, 9, 3};
    rc = vlm_classify(v, &pg, LABELS, 3, &r, &e);
    CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "aspect") && !vlm_dead(v), "ratio 300: %d %s", rc,
          e.msg);
    free(tall);
    uint8_t *big = page(1200, 900);
    struct vlm_page bp = {big, 1200, 900, 3600, 3};
    rc = vlm_classify(v, &bp, LABELS, 3, &r, &e);
    CHECK(rc == 0 && r.downscaled && r.image_tokens <= 40 && r.best >= 0 && r.best < 3,
          "big page: rc %d %s, %u tokens, downscaled %d", rc, e.msg, r.image_tokens,
          r.downscaled);
    vlm_result_free(&r);
    free(big);
    /* The gate rules below name the driver of the device under test
     * ("llvmpipe" for lavapipe in CI, "NVIDIA" on the GPU machine). */
    char drv[64], rules[256];
    snprintf(drv, sizeof drv, "%s", vkr_device(vlm_vkr(v))->driver_name);
    for (char *q = drv; *q; q++)
        if (*q == ' ' || *q == '\n' || *q == '=')
            *q = '_';
    vlm_close(v);

    /* a rule matching this device: vision off before its pipelines exist */
    c = base();
    snprintf(rules, sizeof rules, "vendor=any driver=%s path=vision reason=test rule: vision on %s\n",
             drv, drv);
    c.gate_rules = rules;
    rc = vlm_open(&c, &v, &e);
    REQUIRE_V(rc == 0, "gated open: %s", e.msg);
    CHECK(!vlm_vision_enabled(v) && strstr(vlm_report(v)->vision_reason, "test rule"),
          "gated: vision %d reason %s", vlm_vision_enabled(v), vlm_report(v)->vision_reason);
    vkr_get_stats(vlm_vkr(v), &s);
    CHECK(s.pipelines_built < full_pipes, "gated engine built %u pipelines, full %u",
          s.pipelines_built, full_pipes);
    uint8_t *px = page(200, 140);
    struct vlm_page sp = {px, 200, 140, 600, 3};
    rc = vlm_classify(v, &sp, LABELS, 3, &r, &e);
    CHECK(rc == FOLIO_ESTATE && strstr(e.msg, "test rule"), "gated classify: %d %s", rc, e.msg);
    const char *txt = "INVOICE No. 42, total 540.00 EUR.";
    struct lm_text_result tr;
    memset(&tr, 0, sizeof tr);
    rc = vlm_classify_text(v, txt, LABELS, 3, 32, &tr, &e);
    CHECK(rc == 0 && tr.best >= 0 && tr.best < 3, "ocr+lm on the gated engine: %s", e.msg);
    CHECK(vlm_selftest(v, &e) == 0, "text-only self-test: %s", e.msg);
    vlm_close(v);

    snprintf(rules, sizeof rules, "driver=%s path=gpu reason=no gpu here\n", drv);
    c.gate_rules = rules;
    rc = vlm_open(&c, &v, &e);
    CHECK(rc == FOLIO_EUNSUPPORTED && strstr(e.msg, "no gpu here") && v == NULL, "gpu rule: %d %s",
          rc, e.msg);
    c.gate_rules = NULL;
    c.gate_file = "/nonexistent/folio-gate.conf";
    rc = vlm_open(&c, &v, &e);
    CHECK(rc != 0 && v == NULL, "missing gate file accepted");

    /* no mmproj */
    c = base();
    c.mmproj_path = NULL;
    rc = vlm_open(&c, &v, &e);
    CHECK(rc == 0 && !vlm_vision_enabled(v) && strstr(vlm_report(v)->vision_reason, "mmproj"),
          "no mmproj: %d %s", rc, rc ? e.msg : vlm_report(v)->vision_reason);
    if (rc == 0)
        vlm_close(v);
    free(px);
}

#ifdef FOLIO_FAULT_INJECTION
static void fault(void)
{
    setenv("FOLIO_FAULT", "device_lost:2", 1);
    struct folio_err e = {0};
    struct vlm *v = NULL;
    struct vlm_config c = base();
    c.skip_warmup = 0; /* the warm-up pass must not count towards N */
    int rc = vlm_open(&c, &v, &e);
    REQUIRE_V(rc == 0, "open: %s", e.msg);
    uint8_t *px = page(200, 140);
    struct vlm_page sp = {px, 200, 140, 600, 3};
    struct vlm_result r;
    memset(&r, 0, sizeof r);
    rc = vlm_classify(v, &sp, LABELS, 3, &r, &e);
    CHECK(rc == 0 && !vlm_dead(v), "1st classify: %d %s", rc, e.msg);
    vlm_result_free(&r);
    rc = vlm_classify(v, &sp, LABELS, 3, &r, &e);
    CHECK(rc == FOLIO_EDEVICELOST && vlm_dead(v) && strstr(e.msg, "injected"), "2nd: %d %s", rc,
          e.msg);
    rc = vlm_classify(v, &sp, LABELS, 3, &r, &e);
    CHECK(rc == FOLIO_EDEVICELOST, "dead engine answered: %d", rc);
    char js[2048];
    CHECK(vlm_report_json(v, js, sizeof js) == 0 && strstr(js, "\"dead\":true"), "%s", js);
    vlm_close(v);
    unsetenv("FOLIO_FAULT");
    rc = vlm_open(&c, &v, &e);
    CHECK(rc == 0, "re-open: %s", e.msg);
    if (rc == 0) {
        rc = vlm_classify(v, &sp, LABELS, 3, &r, &e);
        CHECK(rc == 0, "classify after re-open: %s", e.msg);
        vlm_result_free(&r);
        vlm_close(v);
    }
    /* a tower's pipeline (scatter: the tower's only) that the driver fails:
     * the tower, opened beside the pre-warm, is closed again at its end and
     * says why; the text path classifies */
    setenv("FOLIO_FAULT", "pipeline:scatter", 1);
    rc = vlm_open(&c, &v, &e);
    unsetenv("FOLIO_FAULT");
    CHECK(rc == 0 && !vlm_vision_enabled(v) && strstr(vlm_report(v)->vision_reason, "vision pipelines failed"),
          "a failed tower pipeline: rc %d %s", rc, rc ? e.msg : vlm_report(v)->vision_reason);
    if (rc == 0) {
        struct lm_text_result tr = {0};
        rc = vlm_classify_text(v, "Invoice number 42, amount due 100 EUR", LABELS, 3, 0, &tr, &e);
        CHECK(rc == 0 && tr.best >= 0 && tr.best < 3, "text path without the tower: %s", e.msg);
        vlm_close(v);
    }
    free(px);
    CHECK(vlm_backoff_ms(1) == 500 && vlm_backoff_ms(2) == 1000 && vlm_backoff_ms(4) == 4000 &&
              vlm_backoff_ms(30) == 60000,
          "backoff %u %u %u %u", vlm_backoff_ms(1), vlm_backoff_ms(2), vlm_backoff_ms(4),
          vlm_backoff_ms(30));
}
#endif

int main(void)
{
    const char *src = getenv("FOLIO_SOURCE_DIR");
    snprintf(tpath, sizeof tpath, "%s/tests/fixtures/parity/qwen25vl/text-F32.gguf",
             src && *src ? src : ".");
    snprintf(vpath, sizeof vpath, "%s/tests/fixtures/parity/qwen25vl/mmproj-F32.gguf",
             src && *src ? src : ".");
    rules();
    gated();
#ifdef FOLIO_FAULT_INJECTION
    fault();
#endif
    return tu_finish();
}
