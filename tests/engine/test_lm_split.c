/*
 * One text model over two devices (issue 14): lavapipe opened twice (the
 * same physical device selected twice is two VkDevices, two struct vkr),
 * each with its own memory budget (FOLIO_VK_DEVICE_BYTES as a per-device
 * list) and 1 MiB blocks, so the model fits neither alone:
 *  - with the budget of either device, a one-device open fails for memory;
 *  - split over both (the planner's choice, then a configured split), the
 *    ragged prefill's logits at every position, the fused classify pass
 *    and a later lm_score give the same numbers as the one-device run
 *    without budgets (within 1e-5; the same driver, so in practice
 *    bit-identical) and the same best labels;
 *  - each device holds layers and many blocks, its blocks stay within its
 *    own budget, the last device has the head; no validation messages and
 *    no pipeline built after seal on either;
 *  - the second device lost, the next pass fails with FOLIO_EDEVICELOST
 *    naming that device and its layers;
 *  - two budgets too small together fail with FOLIO_ENOMEM naming both
 *    devices, what each needs and has; a split_layer outside the model
 *    fails naming the range.
 * Once for a Qwen2-VL model and once for a Qwen3-VL one (q/k norms on both
 * devices, two DeepStack layers fed from image rows: they stay on the
 * first device, the split starts at 2 at the earliest).
 */
#include "tests/support/testutil.h"
#include "common/common.h"
#include "bench/engine/synth.h"
#include "engine/model/gguf_model.h"
#include "engine/model/lm.h"
#include "engine/quant/quant.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NLAB 4
#define MB (1ull << 20)

static const int32_t SEQ_A[] = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41};
static const int32_t SEQ_B[] = {2, 4, 6, 8, 10, 12, 14};
/* B again with three image rows (embedding rows, DeepStack features) */
static const int32_t SEQ_BI[] = {2, 4, -1, -1, -1, 12, 14};
static float *g_embd; /* NB rows of the model's embedding width */
static const int32_t *g_seq_b = SEQ_B;
static const int32_t L0[] = {31, 32, 33}, L1[] = {31, 32, 34}, L2[] = {31}, L3[] = {40, 41};
static const struct lm_label LABELS[NLAB] = {{L0, 3}, {L1, 3}, {L2, 1}, {L3, 2}};
#define NA 11u
#define NB 7u

struct out {
    float *logits;        /* (NA + NB) x V, prefill */
    double fused[2 * NLAB];
    double scored[2 * NLAB];
    int best[2];
};

static struct vkr *open_dev(int ordinal, struct folio_err *e)
{
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config cfg = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                             .validate = -1, .cache_dir = "", .ordinal = ordinal};
    struct vkr *vk = NULL;
    return vkr_open(&cfg, &vk, e) == 0 ? vk : NULL;
}

static int warm(struct vkr *vk, const struct gguf_model *m, struct folio_err *e)
{
    struct vkr_pipeline_key keys[LM_PIPELINE_KEYS_MAX];
    int nk = lm_pipeline_keys(vk, m, 0, keys, LM_PIPELINE_KEYS_MAX), failed = 0;
    int rc = vkr_prewarm(vk, keys, nk, &failed, e);
    vkr_seal(vk);
    return rc ? rc : failed;
}

static const struct lm_config CFG = {.max_tokens = 16, .batch = 2, .max_labels = NLAB,
                                     .max_label_tokens = 3, .all_logits = 1};

/* Prefill with every logit, score, and the fused classify pass. */
static int passes(struct lm *lm, uint32_t V, struct out *o, struct folio_err *e)
{
    struct lm_seq seqs[2] = {{SEQ_A, NA, NULL, NULL, 0, NULL, 0}, {g_seq_b, NB, g_embd, NULL, 0, NULL, 0}};
    o->logits = malloc((size_t)(NA + NB) * V * sizeof *o->logits);
    if (!o->logits)
        return FOLIO_ENOMEM;
    int rc = lm_prefill(lm, seqs, 2, o->logits, e);
    if (!rc)
        rc = lm_score(lm, LABELS, NLAB, o->scored, e);
    if (!rc)
        rc = lm_classify(lm, seqs, 2, LABELS, NLAB, o->fused, NULL, o->best, e);
    return rc;
}

static void compare(const char *what, const struct out *ref, const struct out *got, uint32_t V)
{
    double dl = 0, dp = 0;
    for (size_t i = 0; i < (size_t)(NA + NB) * V; i++)
        dl = fmax(dl, fabs((double)ref->logits[i] - (double)got->logits[i]));
    for (int i = 0; i < 2 * NLAB; i++) {
        dp = fmax(dp, fabs(ref->fused[i] - got->fused[i]));
        dp = fmax(dp, fabs(ref->scored[i] - got->scored[i]));
    }
    CHECK(dl <= 1e-5, "%s: logits differ from one device by %g", what, dl);
    CHECK(dp <= 1e-5, "%s: label log-probabilities differ from one device by %g", what, dp);
    CHECK(ref->best[0] == got->best[0] && ref->best[1] == got->best[1],
          "%s: best labels %d %d, one device %d %d", what, got->best[0], got->best[1],
          ref->best[0], ref->best[1]);
    printf("%s: max |d logit| %g, max |d logprob| %g\n", what, dl, dp);
}

static void check_devices(const char *what, struct vkr *const *vk, const struct lm *lm,
                          const uint64_t *budget)
{
    struct lm_device_plan pl[LM_MAX_DEVICES];
    uint32_t n = lm_devices(lm, pl, LM_MAX_DEVICES);
    CHECK(n == 2, "%s: %u devices", what, n);
    if (n != 2)
        return;
    CHECK(pl[0].l0 == 0 && pl[0].l1 > 0 && pl[1].l0 == pl[0].l1 && pl[1].l1 > pl[1].l0 &&
              !pl[0].head && pl[1].head,
          "%s: layers %u..%u | %u..%u head %d %d", what, pl[0].l0, pl[0].l1, pl[1].l0, pl[1].l1,
          pl[0].head, pl[1].head);
    for (int d = 0; d < 2; d++) {
        struct vkr_stats s;
        vkr_get_stats(vk[d], &s);
        CHECK(pl[d].vk == vk[d], "%s: device %d plan names another runtime", what, d);
        CHECK(s.blocks >= 4, "%s: device %d holds %u blocks (want many)", what, d, s.blocks);
        CHECK(pl[d].weights > 0 && pl[d].activations > 0 && pl[d].need > 0 && pl[d].room > 0,
              "%s: device %d plan weights %llu act %llu need %llu room %llu", what, d,
              (unsigned long long)pl[d].weights, (unsigned long long)pl[d].activations,
              (unsigned long long)pl[d].need, (unsigned long long)pl[d].room);
        CHECK(pl[d].weights + pl[d].activations <= budget[d],
              "%s: device %d holds %llu, its budget is %llu", what, d,
              (unsigned long long)(pl[d].weights + pl[d].activations),
              (unsigned long long)budget[d]);
        CHECK(s.validation_messages == 0, "%s: device %d: %llu validation messages", what, d,
              (unsigned long long)s.validation_messages);
        CHECK(s.pipeline_requests_after_seal == 0, "%s: device %d: pipeline after seal", what,
              d);
    }
}

static void set_budget(uint64_t a, uint64_t b)
{
    char v[64];
    snprintf(v, sizeof v, "%llu,%llu", (unsigned long long)a, (unsigned long long)b);
    setenv("FOLIO_VK_DEVICE_BYTES", v, 1);
}

/* One model through every case; non-zero only when a REQUIRE stopped it. */
static int run_case(const char *name, const struct lm_synth *syp)
{
    const struct lm_synth sy = *syp;
    unsetenv("FOLIO_VK_DEVICE_BYTES");
    printf("== %s\n", name);
    struct folio_err e = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    struct gguf_file *f = NULL;
    struct gguf_model *m = NULL;
    int rc = lm_synth_gguf(&sy, &buf, &len, &e);
    if (!rc)
        rc = gguf_open_memory(buf, len, &f, &e);
    if (!rc)
        rc = gguf_model_check(f, 0, &m, &e);
    REQUIRE(rc == 0, "synthetic model: %s / %s", e.msg, e.detail);
    uint32_t V = m->text.n_vocab, Ein = m->text.n_embd * (1 + m->text.n_deepstack);
    uint32_t lo = m->text.n_deepstack > 1 ? m->text.n_deepstack : 1;
    g_seq_b = m->text.n_deepstack ? SEQ_BI : SEQ_B;
    g_embd = malloc((size_t)NB * Ein * sizeof *g_embd);
    REQUIRE(g_embd, "out of memory");
    for (uint32_t i = 0; i < NB * Ein; i++)
        g_embd[i] = 0.5f * sinf((float)i * 0.37f);

    /* the reference: one device, no budget */
    struct out ref = {0};
    uint64_t total = 0;
    {
        struct vkr *vk = open_dev(0, &e);
        REQUIRE(vk, "vkr_open: %s / %s", e.msg, e.detail);
        REQUIRE(warm(vk, m, &e) == 0, "prewarm: %s", e.msg);
        struct lm *lm = NULL;
        rc = lm_open(vk, m, &CFG, &lm, &e);
        REQUIRE(rc == 0, "lm_open: %s / %s", e.msg, e.hint);
        struct lm_device_plan pl;
        CHECK(lm_devices(lm, &pl, 1) == 1 && pl.l0 == 0 && pl.l1 == sy.n_layer && pl.head,
              "one device: layers %u..%u", pl.l0, pl.l1);
        total = pl.weights + pl.activations;
        rc = passes(lm, V, &ref, &e);
        REQUIRE(rc == 0, "one-device passes: %s / %s", e.msg, e.detail);
        lm_close(lm);
        vkr_close(vk);
    }
    printf("one device: %.1f MiB of weights and activations\n", (double)total / MB);

    /* each device gets 65 % of what the model needs: neither holds it */
    uint64_t budget[2] = {total / 100 * 65, total / 100 * 65 + MB};
    set_budget(budget[0], budget[1]);
    for (int d = 0; d < 2; d++) {
        struct vkr *vk = open_dev(d, &e);
        REQUIRE(vk, "vkr_open %d: %s", d, e.msg);
        CHECK(vkr_limits(vk)->budget == budget[d], "device %d budget %llu, set %llu", d,
              (unsigned long long)vkr_limits(vk)->budget, (unsigned long long)budget[d]);
        REQUIRE(warm(vk, m, &e) == 0, "prewarm: %s", e.msg);
        struct lm *lm = NULL;
        struct folio_err e1 = {0};
        rc = lm_open(vk, m, &CFG, &lm, &e1);
        CHECK(rc == FOLIO_ENOMEM && strstr(e1.msg, "out of device memory") &&
                  strstr(e1.detail, "FOLIO_VK_DEVICE_BYTES"),
              "device %d alone: rc %d: %s / %s", d, rc, e1.msg, e1.detail);
        lm_close(lm);
        vkr_close(vk);
    }

    /* split over both: the planner's choice under the budgets; layer 2 as
     * configured on two devices that could each hold the model (asked
     * for two, it is split); layer 2 under the budgets, which the second
     * device cannot hold */
    for (int run = 0; run < 3; run++) {
        char what[64];
        snprintf(what, sizeof what, run == 0 ? "planner's split" : run == 1 ? "split at layer 2"
                                                                           : "tight split at 2");
        uint64_t big[2] = {2 * total + 8 * MB, 2 * total + 8 * MB};
        const uint64_t *bud = run == 1 ? big : budget;
        set_budget(bud[0], bud[1]);
        struct vkr *vk[2] = {open_dev(0, &e), NULL};
        vk[1] = vk[0] ? open_dev(1, &e) : NULL;
        REQUIRE(vk[0] && vk[1], "%s: vkr_open: %s", what, e.msg);
        REQUIRE(warm(vk[0], m, &e) == 0 && warm(vk[1], m, &e) == 0, "prewarm: %s", e.msg);
        struct lm_config cfg = CFG;
        cfg.split_layer = run ? 2 : 0;
        struct lm *lm = NULL;
        struct folio_err e3 = {0};
        rc = lm_open_split(vk, 2, m, &cfg, &lm, &e3);
        if (run == 2) {
            CHECK(rc == FOLIO_ENOMEM && strstr(e3.context, "the second of 2 devices") &&
                      strstr(e3.context, "layers 2..5 and the LM head") &&
                      strstr(e3.msg, "out of device memory"),
                  "%s: rc %d: %s / %s", what, rc, e3.msg, e3.context);
            printf("refused: %s / %s\n", e3.msg, e3.context);
        } else {
            CHECK(rc == 0, "%s: lm_open_split: %s / %s / %s", what, e3.msg, e3.detail, e3.hint);
        }
        if (!rc) {
            struct out got = {0};
            rc = passes(lm, V, &got, &e);
            CHECK(rc == 0, "%s: passes: %s / %s", what, e.msg, e.detail);
            if (!rc)
                compare(what, &ref, &got, V);
            free(got.logits);
            check_devices(what, vk, lm, bud);
            struct lm_device_plan pl[2];
            lm_devices(lm, pl, 2);
            if (run)
                CHECK(pl[0].l1 == 2, "%s: first device has layers 0..%u", what, pl[0].l1);
            CHECK(pl[0].l1 >= lo, "%s: DeepStack layers 0..%u, the first device ends at %u",
                  what, lo - 1, pl[0].l1);
            printf("%s: layers 0..%u | %u..%u, needs %.1f / %.1f MiB, rooms %.1f / %.1f MiB\n",
                   what, pl[0].l1 - 1, pl[1].l0, pl[1].l1 - 1, (double)pl[0].need / MB,
                   (double)pl[1].need / MB, (double)pl[0].room / MB, (double)pl[1].room / MB);
            if (run == 0) { /* the second device lost: the pass fails naming it */
                vkr_mark_lost(vk[1]);
                struct lm_seq seqs[1] = {{SEQ_A, NA, NULL, NULL, 0, NULL, 0}};
                double lp[NLAB];
                struct folio_err e4 = {0};
                rc = lm_classify(lm, seqs, 1, LABELS, NLAB, lp, NULL, NULL, &e4);
                char ctx[64];
                snprintf(ctx, sizeof ctx, "layers %u..5 on device 2 of 2", pl[1].l0);
                CHECK(rc == FOLIO_EDEVICELOST && strstr(e4.context, ctx),
                      "%s: second device lost: rc %d: %s / %s", what, rc, e4.msg, e4.context);
            }
        }
        lm_close(lm);
        vkr_close(vk[0]);
        vkr_close(vk[1]);
    }

    /* too small together; a split outside the model */
    for (int run = 0; run < 2; run++) {
        if (run == 0)
            set_budget(total / 4, total / 4);
        else
            set_budget(budget[0], budget[1]);
        struct vkr *vk[2] = {open_dev(0, &e), NULL};
        vk[1] = vk[0] ? open_dev(1, &e) : NULL;
        REQUIRE(vk[0] && vk[1], "vkr_open: %s", e.msg);
        REQUIRE(warm(vk[0], m, &e) == 0 && warm(vk[1], m, &e) == 0, "prewarm: %s", e.msg);
        struct lm_config cfg = CFG;
        cfg.split_layer = run ? sy.n_layer : 0;
        struct lm *lm = NULL;
        struct folio_err e2 = {0};
        rc = lm_open_split(vk, 2, m, &cfg, &lm, &e2);
        if (run == 0) {
            char d0[16], d1[16];
            snprintf(d0, sizeof d0, "devices %d", vkr_device(vk[0])->index);
            snprintf(d1, sizeof d1, "and %d", vkr_device(vk[1])->index);
            CHECK(rc == FOLIO_ENOMEM && strstr(e2.msg, "does not fit") && strstr(e2.msg, d0) &&
                      strstr(e2.msg, d1) && strstr(e2.msg, "the first needs") &&
                      strstr(e2.msg, "the second needs") && strstr(e2.msg, "room for") &&
                      e2.hint[0],
                  "too small together: rc %d: %s / %s", rc, e2.msg, e2.hint);
        } else {
            char range[32];
            snprintf(range, sizeof range, "outside %u..5", lo);
            CHECK(rc == FOLIO_EINVAL && strstr(e2.msg, "split_layer 6") && strstr(e2.msg, range),
                  "bad split: rc %d: %s", rc, e2.msg);
        }
        printf("refused: %s\n", e2.msg);
        lm_close(lm);
        vkr_close(vk[0]);
        vkr_close(vk[1]);
    }
    free(ref.logits);
    free(g_embd);
    g_embd = NULL;
    gguf_model_close(m);
    free(buf);
    return 0;
}

int main(void)
{
    setenv("FOLIO_VK_BLOCK_SIZE", "1048576", 1); /* many blocks per device */
    struct lm_synth q2 = {.n_embd = 256, .n_layer = 6, .n_head = 4, .n_head_kv = 2,
                          .n_ff = 512, .n_vocab = 512, .mat_type = QUANT_F32, .seed = 7};
    int rc = run_case("qwen2vl", &q2);
    if (rc)
        return rc;
    /* Qwen3-VL: q/k norms on both devices; DeepStack layers 0..1 stay on
     * the first (the split starts at 2), fed from image rows */
    struct lm_synth q3 = q2;
    q3.qwen3 = 1;
    q3.n_deepstack = 2;
    q3.seed = 8;
    rc = run_case("qwen3vl", &q3);
    return rc ? rc : tu_finish();
}
