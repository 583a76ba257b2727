/*
 * One vision-language model over two devices (--device A,B, issue 14) on
 * the parity kit's Qwen2.5-VL pair (F32 text + F32 tower), lavapipe opened
 * twice ("llvmpipe,llvmpipe": two VkDevices of one physical device), 1 MiB
 * blocks and 256 KiB bindings, under validation:
 *  - over both devices with no budget: every page gets the best label and
 *    log-probabilities of the one-device engine (within 1e-5) and the
 *    same prompt; the report names both devices, the split layer, and each
 *    device's plan (layers, head, vision, room, planned and placed bytes);
 *  - then each device gets a budget (FOLIO_VK_DEVICE_BYTES as a list) just
 *    above the planner's need for its part: with either budget alone the
 *    one-device engine cannot hold the model (open fails or the vision
 *    path is off), over both it classifies as before, each device holds
 *    several blocks within its budget, nothing built after seal on either,
 *    no validation messages;
 *  - the second device lost: the next pass fails with FOLIO_EDEVICELOST
 *    and the whole engine is dead (the worker falls back and re-opens
 *    both);
 *  - budgets too small together fail the open naming both devices with
 *    what each needs; a bad device list is refused naming the problem.
 */
#include "tests/support/parity_root.h"
#include "tests/support/testutil.h"
#include "tests/engine/lm_json.h"
#include "common/common.h"
#include "engine/model/lm.h"
#include "engine/vk/vkr.h"
#include "engine/vlm.h"
#include "engine/vlm_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPAGE 3
#define NL 6
#define MB (1ull << 20)

static const char *root;
static const struct jv *man;

struct img {
    uint8_t *rgb;
    uint32_t w, h;
};

struct res {
    double lp[NPAGE][NL];
    int best[NPAGE];
    uint32_t n_prompt[NPAGE];
};

static char tp[1200], vp[1200];
static const char *labels[NL];
static int nl;
static struct vlm_page pg[NPAGE];

static struct vlm_config config(const char *device)
{
    const struct jv *cfg = jat(jget(man, "configs"), 0);
    snprintf(tp, sizeof tp, "%s/%s", root, jget(jget(cfg, "text_gguf"), "F32")->str);
    snprintf(vp, sizeof vp, "%s/%s", root, jget(jget(cfg, "mmproj_gguf"), "F32")->str);
    const struct jv *pp = jget(man, "preprocess");
    return (struct vlm_config){.model_path = tp, .mmproj_path = vp, .device = device,
                               .allow_cpu = 1, .validate = -1, .cache_dir = "",
                               .max_image_tokens = 40,
                               .min_pixels = (uint32_t)jget(pp, "min_pixels")->num,
                               .max_pixels = (uint32_t)jget(pp, "max_pixels")->num,
                               .max_labels = 8, .max_label_tokens = 8, .max_text_tokens = 64,
                               .max_batch = 1};
}

static const char *dev_one(void)
{
    const char *d = getenv("FOLIO_TEST_DEVICE");
    return d && *d ? d : "llvmpipe";
}

static int classify_all(struct vlm *v, struct res *r, const char *what)
{
    struct folio_err e = {0};
    for (int i = 0; i < NPAGE; i++) {
        struct vlm_result out;
        memset(&out, 0, sizeof out);
        out.logprob = r->lp[i];
        int rc = vlm_classify(v, &pg[i], labels, (uint32_t)nl, &out, &e);
        CHECK(rc == 0, "%s: page %d: %s / %s / %s", what, i, e.msg, e.detail, e.context);
        if (rc)
            return rc;
        r->best[i] = out.best;
        r->n_prompt[i] = out.n_prompt;
        vlm_result_free(&out);
    }
    return 0;
}

static void compare(const char *what, const struct res *ref, const struct res *got)
{
    double d = 0;
    for (int i = 0; i < NPAGE; i++) {
        CHECK(got->best[i] == ref->best[i], "%s: page %d best %d, one device %d", what, i,
              got->best[i], ref->best[i]);
        CHECK(got->n_prompt[i] == ref->n_prompt[i], "%s: page %d prompt of %u, one device %u",
              what, i, got->n_prompt[i], ref->n_prompt[i]);
        for (int l = 0; l < nl; l++)
            d = fmax(d, fabs(got->lp[i][l] - ref->lp[i][l]));
    }
    CHECK(d <= 1e-5, "%s: log-probabilities differ from one device by %g", what, d);
    printf("%s: max |d logprob| %g\n", what, d);
}

static void set_budget(uint64_t a, uint64_t b)
{
    char s[64];
    snprintf(s, sizeof s, "%llu,%llu", (unsigned long long)a, (unsigned long long)b);
    setenv("FOLIO_VK_DEVICE_BYTES", s, 1);
}

static void devices_clean(const char *what, struct vlm *v, const uint64_t *budget)
{
    for (uint32_t d = 0; d < 2; d++) {
        struct vkr *vk = vlm_vkr_at(v, d);
        CHECK(vk != NULL, "%s: no device %u", what, d);
        if (!vk)
            continue;
        struct vkr_stats s;
        vkr_get_stats(vk, &s);
        CHECK(s.validation_messages == 0, "%s: device %u: %llu validation messages", what, d,
              (unsigned long long)s.validation_messages);
        CHECK(s.sealed && s.pipeline_requests_after_seal == 0 && s.pipelines_built > 0,
              "%s: device %u: sealed %d, %u pipelines, %llu requests after seal", what, d,
              s.sealed, s.pipelines_built, (unsigned long long)s.pipeline_requests_after_seal);
        CHECK(s.blocks >= 3, "%s: device %u holds %u blocks (want several)", what, d, s.blocks);
        if (budget) {
            const struct vkr_limits *L = vkr_limits(vk);
            CHECK(L->budget == budget[d], "%s: device %u budget %llu, set %llu", what, d,
                  (unsigned long long)L->budget, (unsigned long long)budget[d]);
            CHECK(vkr_room(vk) < budget[d], "%s: device %u holds nothing", what, d);
        }
    }
    CHECK(vlm_vkr_at(v, 2) == NULL, "%s: a third device", what);
}

int main(void)
{
    char rbuf[1100];
    (void)jints;
    tu_parity_root(rbuf, sizeof rbuf);
    root = rbuf;
    char why[1300];
    struct jv *m = jload_manifest(root, why, sizeof why);
    REQUIRE(m != NULL, "%s", why);
    man = m;
    /* many blocks per device; bindings small enough that the label
     * scratch fits a block */
    setenv("FOLIO_VK_BLOCK_SIZE", "1048576", 1);
    setenv("FOLIO_VK_MAX_RANGE", "262144", 1);
    unsetenv("FOLIO_VK_DEVICE_BYTES");
    struct img im[NPAGE];
    memset(im, 0, sizeof im);
    const struct jv *imgs = jget(man, "images");
    for (int i = 0; i < NPAGE; i++) {
        const struct jv *j = jat(imgs, i % imgs->n);
        char path[1300];
        snprintf(path, sizeof path, "%s/%s", root, jget(j, "rgb")->str);
        struct folio_err e = {0};
        size_t len = 0;
        im[i].w = (uint32_t)jget(j, "width")->num;
        im[i].h = (uint32_t)jget(j, "height")->num;
        REQUIRE(folio_read_file(path, 1u << 24, &im[i].rgb, &len, &e) == 0 &&
                    len == (size_t)im[i].w * im[i].h * 3,
                "%s: %s", path, e.msg);
        pg[i] = (struct vlm_page){im[i].rgb, im[i].w, im[i].h, (size_t)im[i].w * 3, 3};
    }
    const struct jv *jl = jget(jat(jget(man, "configs"), 0), "labels");
    nl = jl->n < NL ? jl->n : NL;
    for (int l = 0; l < nl; l++)
        labels[l] = jget(jat(jl, l), "label")->str;

    struct folio_err e = {0};
    struct vlm *v = NULL;
    char two[300], js[4096];
    snprintf(two, sizeof two, "%s,%s", dev_one(), dev_one());

    /* 1. the reference: one device */
    struct vlm_config vc = config(dev_one());
    int rc = vlm_open(&vc, &v, &e);
    REQUIRE(rc == 0, "one device: open: %s / %s / %s", e.msg, e.detail, e.hint);
    struct res ref;
    REQUIRE(classify_all(v, &ref, "one device") == 0, "one device: classify");
    CHECK(vlm_report(v)->devices == 1 && vlm_report(v)->split_layer == 0,
          "one device: report devices %u split %u", vlm_report(v)->devices,
          vlm_report(v)->split_layer);
    vlm_close(v);

    /* 2. both devices, no budget: the planner's needs */
    uint64_t need[2] = {0, 0}, vision = 0;
    vc = config(two);
    rc = vlm_open(&vc, &v, &e);
    REQUIRE(rc == 0, "two devices: open: %s / %s / %s / %s", e.msg, e.detail, e.context, e.hint);
    {
        struct res got;
        if (classify_all(v, &got, "two devices") == 0)
            compare("two devices", &ref, &got);
        devices_clean("two devices", v, NULL);
        const struct vlm_report *r = vlm_report(v);
        CHECK(r->devices == 2 && r->split_layer >= 1 && vlm_vision_enabled(v),
              "two devices: report devices %u split %u vision %d", r->devices, r->split_layer,
              vlm_vision_enabled(v));
        CHECK(strstr(r->device, " + ") != NULL, "two devices: report device '%s'", r->device);
        rc = vlm_report_json(v, js, sizeof js);
        CHECK(rc == 0 && strstr(js, "\"devices\":[{") && strstr(js, "},{\"index\"") &&
                  strstr(js, "\"lm_head\":true") && strstr(js, "\"lm_head\":false") &&
                  strstr(js, "\"vision\":true") && strstr(js, "\"planned_bytes\""),
              "two devices: report %s", js);
        printf("two devices: %s\n", js);
        struct lm_device_plan pl[2];
        CHECK(lm_devices(vlm_lm(v), pl, 2) == 2 && pl[0].l1 == r->split_layer &&
                  pl[0].l0 == 0 && pl[1].l0 == pl[0].l1 && pl[1].l1 > pl[1].l0 && pl[1].head,
              "two devices: layers %u..%u | %u..%u", pl[0].l0, pl[0].l1, pl[1].l0, pl[1].l1);
        need[0] = pl[0].need;
        need[1] = pl[1].need;
        unsigned long long vb = 0;
        const char *vs = strstr(js, "\"vision_bytes\":");
        if (vs)
            sscanf(vs + 15, "%llu", &vb);
        vision = vb;
        vlm_close(v);
    }

    /* 3. budgets just above each part: neither device holds the model alone */
    uint64_t budget[2] = {vision + need[0] + 2 * MB, need[1] + MB};
    for (int d = 0; d < 2; d++) {
        set_budget(budget[d], budget[d]);
        vc = config(dev_one());
        struct folio_err e1 = {0};
        rc = vlm_open(&vc, &v, &e1);
        CHECK(rc != 0 || !vlm_vision_enabled(v), "budget %llu alone: the model fit one device",
              (unsigned long long)budget[d]);
        printf("budget %.1f MiB alone: %s\n", (double)budget[d] / MB,
               rc ? e1.msg : vlm_report(v)->vision_reason);
        vlm_close(v);
        v = NULL;
    }
    set_budget(budget[0], budget[1]);
    vc = config(two);
    rc = vlm_open(&vc, &v, &e);
    CHECK(rc == 0, "budgets: open: %s / %s / %s / %s", e.msg, e.detail, e.context, e.hint);
    if (rc == 0) {
        struct res got;
        if (classify_all(v, &got, "budgets") == 0)
            compare("budgets", &ref, &got);
        devices_clean("budgets", v, budget);
        /* 4. the second device lost: the whole engine goes down */
        vkr_mark_lost(vlm_vkr_at(v, 1));
        CHECK(vlm_dead(v), "device 1 lost: the engine is not dead");
        struct vlm_result out;
        memset(&out, 0, sizeof out);
        rc = vlm_classify(v, &pg[0], labels, (uint32_t)nl, &out, &e);
        CHECK(rc == FOLIO_EDEVICELOST, "device 1 lost: classify rc %d: %s", rc, e.msg);
        vlm_result_free(&out);
        CHECK(vlm_report_json(v, js, sizeof js) == 0 && strstr(js, "\"dead\":true"),
              "device 1 lost: report %s", js);
        vlm_close(v);
    }

    /* 5. too small together */
    set_budget(need[0] / 2 + vision, need[1] / 2);
    vc = config(two);
    struct folio_err e2 = {0};
    rc = vlm_open(&vc, &v, &e2);
    CHECK(rc == FOLIO_ENOMEM && strstr(e2.msg, "does not fit devices") &&
              strstr(e2.msg, "the first needs") && strstr(e2.msg, "the second needs"),
          "too small: rc %d: %s / %s", rc, e2.msg, e2.hint);
    printf("too small: %s\n", e2.msg);
    unsetenv("FOLIO_VK_DEVICE_BYTES");

    /* 6. bad lists */
    static const char *const bad[] = {"llvmpipe,", ",llvmpipe", "0,1,2"};
    static const char *const says[] = {"an empty device", "an empty device", "at most 2"};
    for (int i = 0; i < 3; i++) {
        vc = config(bad[i]);
        struct folio_err e3 = {0};
        rc = vlm_open(&vc, &v, &e3);
        CHECK(rc == FOLIO_EINVAL && strstr(e3.msg, says[i]) && strstr(e3.msg, bad[i]),
              "--device %s: rc %d: %s", bad[i], rc, e3.msg);
    }
    for (int i = 0; i < NPAGE; i++)
        free(im[i].rgb);
    jfree(m);
    return tu_finish();
}
