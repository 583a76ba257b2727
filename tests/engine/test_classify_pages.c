/*
 * The pages of one document through the GPU stage together
 * (engine_classify_pages, issue 15), on the parity kit's tiny Qwen2.5-VL
 * pair (F32 text + F32 tower) on lavapipe, through the real engine_models
 * (GPU thread, bounded queue), --gpu-batch 4, 64 image tokens:
 *  1. four pages, each with engine_classify alone: four passes (the
 *     baseline labels, confidences and prompts);
 *  2. the same four pages as one document: one pass of four pages
 *     (engine_models_gpu_stats), every page the same label, engine path
 *     and prompt as alone, confidence within 1e-4;
 *  3. six pages: windows of the batch, two passes (4 + 2);
 *  4. a page that cannot be decoded: it alone falls back to the text
 *     tiers with its reason, the three others share one pass and keep
 *     their vision result; a page whose text provider then fails fails
 *     the call, naming that page;
 * with fault injection (test builds), a second engine_models:
 *  5. gpu_page_fail on page 2's height and gpu_nan on page 3's, with
 *     gpu_gather_ms so the four pages are certain to share a pass: the
 *     pass is split, page 2 falls back with "injected page failure",
 *     page 3 with "not finite", pages 1 and 4 keep their vision result;
 *  6. cancel while the document's pages are queued (the GPU thread holds
 *     off): FOLIO_ETIMEOUT "cancelled while queued", no page of it reaches
 *     a pass, and the same document classified again right after gives the
 *     baseline: nothing lost, the queue is empty;
 *  7. windows overlap: six pages (batch 4) while the GPU thread holds off
 *     each pass; the second window's first page is decoded before the
 *     first window's pass answered any page (each decode records how many
 *     pages the GPU had answered), still two passes of 4 + 2 and the
 *     baseline results.
 */
#include "tests/support/parity_root.h"
#include "tests/support/testutil.h"
#include "common/common.h"
#include "engine/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NP 6

static const char *const TEXTS[NP] = {
    "RECEIPT\nTotal 12.00\nThank you\n", "RESUME\nExperience: ten years\n", "DATASHEET\nVoltage 3.3 V\n",
    "RECEIPT\nTotal 99.00\n", "RESUME\nExperience: two years\n", "DATASHEET\nCurrent 20 mA\n"};

/* One synthetic page: a pattern of its own, and a height of its own (the
 * fault sites pick a page by its height). */
struct page {
    int index;
    int width, height;
    int bad_decode, bad_text;
};

/* Case 7's record: for each decode in call order, the pages the GPU had
 * answered by then (engine_models_gpu_stats), while g_watch is set. */
static struct engine_models *_Atomic g_watch;
static unsigned long long g_answered_at[16];
static _Atomic int g_decodes;

static void stats_of(struct engine_models *m, struct engine_gpu_stats *s);

static int page_fn(void *ctx, struct engine_page *out, struct folio_err *err)
{
    const struct page *p = ctx;
    struct engine_models *w = atomic_load(&g_watch);
    if (w) {
        struct engine_gpu_stats s;
        stats_of(w, &s);
        int i = atomic_fetch_add(&g_decodes, 1);
        if (i < 16)
            g_answered_at[i] = s.pages;
    }
    memset(out, 0, sizeof *out);
    if (p->bad_decode)
        return folio_err_set(err, FOLIO_EFORMAT, "synthetic page %d is corrupt", p->index + 1);
    size_t stride = (size_t)p->width * 3;
    out->pixels = malloc(stride * (size_t)p->height);
    if (!out->pixels)
        return folio_err_set(err, FOLIO_ENOMEM, "page pixels");
    for (int y = 0; y < p->height; y++)
        for (int x = 0; x < p->width; x++) {
            uint8_t *px = out->pixels + (size_t)y * stride + (size_t)x * 3;
            px[0] = (uint8_t)((x * (p->index + 3)) ^ y);
            px[1] = (uint8_t)(y * (p->index + 1) + x / 4);
            px[2] = (uint8_t)(((x / 16 + y / 16 + p->index) & 1) ? 230 : 20);
        }
    out->width = p->width;
    out->height = p->height;
    out->channels = 3;
    out->stride = stride;
    return 0;
}

static int text_fn(void *ctx, struct engine_text *out, struct folio_err *err)
{
    const struct page *p = ctx;
    memset(out, 0, sizeof *out);
    out->confidence = -1;
    if (p->bad_text)
        return folio_err_set(err, FOLIO_EIO, "synthetic text of page %d unreadable", p->index + 1);
    out->text = strdup(TEXTS[p->index]);
    out->pages_read = 1;
    return out->text ? 0 : folio_err_set(err, FOLIO_ENOMEM, "text");
}

static struct page g_pages[NP];
static struct engine_doc g_docs[NP];
static _Atomic int g_cancel;

static void make_pages(void)
{
    for (int i = 0; i < NP; i++) {
        g_pages[i] = (struct page){.index = i, .width = 200, .height = 150 + 10 * i};
        g_docs[i] = (struct engine_doc){text_fn, &g_pages[i], page_fn, &g_pages[i], &g_cancel};
    }
}

static int open_models(const char *fault, struct engine_models **m)
{
    char root[1100], tp[1300], vp[1300];
    tu_parity_root(root, sizeof root);
    snprintf(tp, sizeof tp, "%s/qwen25vl/text-F32.gguf", root);
    snprintf(vp, sizeof vp, "%s/qwen25vl/mmproj-F32.gguf", root);
    if (fault)
        setenv("FOLIO_FAULT", fault, 1);
    else
        unsetenv("FOLIO_FAULT");
    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct engine_models_config mc = {.model_path = tp, .mmproj_path = vp, .device = dev ? dev : "llvmpipe",
                                      .allow_cpu = 1, .max_image_tokens = 64, .max_batch = 4};
    struct folio_err err = {0};
    int rc = engine_models_open(&mc, m, &err);
    unsetenv("FOLIO_FAULT");
    if (rc) {
        CHECK(0, "engine_models_open: %s", err.msg);
        return rc;
    }
    CHECK(strcmp(engine_models_paths(*m), "vision,ocr+lm,ocr+rules") == 0, "tiers on: %s",
          engine_models_paths(*m));
    CHECK(engine_models_max_batch(*m) == 4, "max batch %u, want 4", engine_models_max_batch(*m));
    return 0;
}

static struct engine_labels *make_labels(void)
{
    struct engine_labels *l = engine_labels_new();
    static const char *const kw[3][2] = {{"receipt", "total"}, {"resume", "experience"}, {"datasheet", "voltage"}};
    static const char *const names[3] = {"receipt", "resume", "datasheet"};
    struct folio_err err = {0};
    for (int i = 0; l && i < 3; i++)
        if (engine_labels_add(l, names[i], kw[i], 2, &err)) {
            CHECK(0, "label %s: %s", names[i], err.msg);
            engine_labels_free(l);
            return NULL;
        }
    return l;
}

static struct engine_gpu_stats stats(struct engine_models *m)
{
    struct engine_gpu_stats s;
    engine_models_gpu_stats(m, &s);
    return s;
}

static void stats_of(struct engine_models *m, struct engine_gpu_stats *s)
{
    *s = stats(m);
}

static void free_results(struct engine_result *r, int n)
{
    for (int i = 0; i < n; i++)
        engine_result_free(&r[i]);
}

/* Page i of got is the baseline page i: label, path, confidence, prompt. */
static void same_as_alone(const struct engine_result *got, const struct engine_result *base, int i,
                          const char *what)
{
    CHECK(strcmp(got->label, base->label) == 0 && strcmp(got->engine_path, base->engine_path) == 0 &&
              fabs(got->confidence - base->confidence) < 1e-4,
          "%s: page %d gave %s %.6f (%s), alone %s %.6f (%s)", what, i + 1, got->label, got->confidence,
          got->engine_path, base->label, base->confidence, base->engine_path);
    CHECK(got->n_prompt_ids == base->n_prompt_ids && got->prompt_ids && base->prompt_ids &&
              memcmp(got->prompt_ids, base->prompt_ids, base->n_prompt_ids * sizeof *base->prompt_ids) == 0,
          "%s: page %d's prompt differs from alone (%u vs %u ids)", what, i + 1, got->n_prompt_ids,
          base->n_prompt_ids);
    for (int k = 0; k < got->n_labels && k < base->n_labels && got->scores && base->scores; k++)
        CHECK(fabs(got->scores[k] - base->scores[k]) < 1e-4, "%s: page %d, label %d: %.6f vs %.6f alone", what,
              i + 1, k, got->scores[k], base->scores[k]);
}

#ifdef FOLIO_FAULT_INJECTION
static void *cancel_later(void *arg)
{
    (void)arg;
    folio_sleep_ms(1500); /* the pages are prepared and queued; the GPU thread holds off 4 s */
    atomic_store(&g_cancel, 1);
    return NULL;
}

static void fault_cases(struct engine_labels *labels, const struct engine_result *base)
{
    /* heights 160 (page 2) and 170 (page 3): see make_pages */
    struct engine_models *m = NULL;
    if (open_models("gpu_page_fail:160,gpu_nan:170,gpu_gather_ms:4000", &m))
        return;
    struct engine *e = NULL;
    struct folio_err err = {0};
    struct engine_config cfg = {.models = m};
    TU_NEED(engine_open(&cfg, labels, &e, &err) == 0, "engine_open: %s", err.msg);

    /* 5. a failing page and a NaN page in one full pass */
    struct engine_result r[4];
    struct engine_gpu_stats s0 = stats(m);
    int rc = engine_classify_pages(e, g_docs, 4, r, NULL, &err);
    struct engine_gpu_stats s1 = stats(m);
    CHECK(rc == 0, "faulty pages: %s", err.msg);
    CHECK(s1.splits - s0.splits == 1, "the failed pass of 4 was not split (%llu splits)", s1.splits - s0.splits);
    CHECK(s1.pages - s0.pages == 4, "%llu pages submitted, want 4 (each once)", s1.pages - s0.pages);
    if (rc == 0) {
        same_as_alone(&r[0], &base[0], 0, "split pass");
        same_as_alone(&r[3], &base[3], 3, "split pass");
        CHECK(strcmp(r[1].engine_path, "vision") != 0 && strstr(r[1].fallback_reason, "injected page failure"),
              "page 2: path %s, reason '%s'", r[1].engine_path, r[1].fallback_reason);
        CHECK(strcmp(r[2].engine_path, "vision") != 0 && strstr(r[2].fallback_reason, "not finite") &&
                  isfinite(r[2].confidence),
              "page 3: path %s, confidence %g, reason '%s'", r[2].engine_path, r[2].confidence,
              r[2].fallback_reason);
        CHECK(strcmp(r[1].engine_path, "ocr+lm") == 0 && strcmp(r[2].engine_path, "ocr+lm") == 0,
              "the bad pages were not answered by the text tiers (%s, %s)", r[1].engine_path, r[2].engine_path);
    }
    free_results(r, 4);

    /* 6. cancel while queued: pages 1, 4, 5, 6 (no faulty height) */
    struct engine_doc d[4] = {g_docs[0], g_docs[3], g_docs[4], g_docs[5]};
    pthread_t t;
    s0 = stats(m);
    TU_NEED(pthread_create(&t, NULL, cancel_later, NULL) == 0, "thread");
    memset(&err, 0, sizeof err);
    int failed = -1;
    rc = engine_classify_pages(e, d, 4, r, &failed, &err);
    pthread_join(t, NULL);
    free_results(r, 4);
    CHECK(rc == FOLIO_ETIMEOUT && strstr(err.msg, "cancelled while queued"), "cancel: rc %d '%s'", rc, err.msg);
    CHECK(failed == 0, "cancel: failed page %d, want the window's first (0)", failed);
    folio_sleep_ms(4000); /* the GPU thread's held-off pass comes and finds nothing */
    s1 = stats(m);
    CHECK(s1.passes == s0.passes && s1.pages == s0.pages, "cancel: %llu pages of the cancelled document ran",
          s1.pages - s0.pages);
    atomic_store(&g_cancel, 0);
    memset(&err, 0, sizeof err);
    rc = engine_classify_pages(e, d, 4, r, NULL, &err);
    s1 = stats(m);
    CHECK(rc == 0, "after cancel: %s", err.msg);
    CHECK(s1.passes - s0.passes == 1 && s1.pages - s0.pages == 4,
          "after cancel: %llu passes, %llu pages; want 1 pass of 4", s1.passes - s0.passes, s1.pages - s0.pages);
    if (rc == 0)
        for (int i = 0; i < 4; i++)
            same_as_alone(&r[i], &base[i == 0 ? 0 : i + 2], i == 0 ? 0 : i + 2, "after cancel");
    free_results(r, 4);

    /* 7. windows overlap: pages 1, 4, 5, 6, 1, 4 (no faulty height), each
     * pass held off 4 s, so window 0 cannot be answered while this thread
     * prepares window 1 unless it waited for it first */
    struct engine_doc d6[6] = {g_docs[0], g_docs[3], g_docs[4], g_docs[5], g_docs[0], g_docs[3]};
    const int b6[6] = {0, 3, 4, 5, 0, 3};
    struct engine_result r6[6];
    s0 = stats(m);
    atomic_store(&g_decodes, 0);
    atomic_store(&g_watch, m);
    memset(&err, 0, sizeof err);
    rc = engine_classify_pages(e, d6, 6, r6, NULL, &err);
    atomic_store(&g_watch, NULL);
    s1 = stats(m);
    CHECK(rc == 0, "overlap: %s", err.msg);
    CHECK(atomic_load(&g_decodes) == 6, "overlap: %d decodes, want 6", atomic_load(&g_decodes));
    CHECK(g_answered_at[4] == s0.pages,
          "overlap: the second window was decoded after %llu pages of the first were answered "
          "(want 0: it is prepared while the first is on the GPU)", g_answered_at[4] - s0.pages);
    CHECK(s1.passes - s0.passes == 2 && s1.pages - s0.pages == 6,
          "overlap: %llu passes, %llu pages; want 2 passes (4 + 2)", s1.passes - s0.passes, s1.pages - s0.pages);
    if (rc == 0)
        for (int i = 0; i < 6; i++)
            same_as_alone(&r6[i], &base[b6[i]], b6[i], "overlap");
    free_results(r6, 6);
    engine_close(e);
    engine_models_close(m);
}
#endif

int main(void)
{
    make_pages();
    struct engine_labels *labels = make_labels();
    REQUIRE(labels, "labels");
    struct engine_models *m = NULL;
    REQUIRE(open_models(NULL, &m) == 0, "models");
    struct engine *e = NULL;
    struct folio_err err = {0};
    struct engine_config cfg = {.models = m};
    REQUIRE(engine_open(&cfg, labels, &e, &err) == 0, "engine_open: %s", err.msg);

    /* 1. each page alone */
    static struct engine_result base[NP], r[NP];
    struct engine_gpu_stats s0 = stats(m);
    for (int i = 0; i < NP; i++) {
        REQUIRE(engine_classify(e, &g_docs[i], &base[i], &err) == 0, "page %d alone: %s", i + 1, err.msg);
        CHECK(strcmp(base[i].engine_path, "vision") == 0, "page %d alone: %s (%s)", i + 1, base[i].engine_path,
              base[i].fallback_reason);
    }
    struct engine_gpu_stats s1 = stats(m);
    CHECK(s1.passes - s0.passes == NP && s1.pages - s0.pages == NP, "alone: %llu passes, %llu pages",
          s1.passes - s0.passes, s1.pages - s0.pages);

    /* 2. four pages as one document: one pass */
    s0 = s1;
    REQUIRE(engine_classify_pages(e, g_docs, 4, r, NULL, &err) == 0, "4 pages: %s", err.msg);
    s1 = stats(m);
    CHECK(s1.passes - s0.passes == 1 && s1.pages - s0.pages == 4,
          "4 pages: %llu passes, %llu pages; want one pass of 4", s1.passes - s0.passes, s1.pages - s0.pages);
    for (int i = 0; i < 4; i++)
        same_as_alone(&r[i], &base[i], i, "4 pages");
    free_results(r, 4);

    /* 3. six pages: windows of the batch */
    s0 = s1;
    REQUIRE(engine_classify_pages(e, g_docs, NP, r, NULL, &err) == 0, "6 pages: %s", err.msg);
    s1 = stats(m);
    CHECK(s1.passes - s0.passes == 2 && s1.pages - s0.pages == NP,
          "6 pages: %llu passes, %llu pages; want 2 passes (4 + 2)", s1.passes - s0.passes, s1.pages - s0.pages);
    for (int i = 0; i < NP; i++)
        same_as_alone(&r[i], &base[i], i, "6 pages");
    free_results(r, NP);

    /* 4. a page that cannot be decoded falls back alone */
    g_pages[1].bad_decode = 1;
    s0 = s1;
    REQUIRE(engine_classify_pages(e, g_docs, 4, r, NULL, &err) == 0, "bad page: %s", err.msg);
    s1 = stats(m);
    CHECK(s1.passes - s0.passes == 1 && s1.pages - s0.pages == 3,
          "bad page: %llu passes, %llu pages; want its 3 neighbours in one pass", s1.passes - s0.passes,
          s1.pages - s0.pages);
    CHECK(strcmp(r[1].engine_path, "ocr+lm") == 0 && strstr(r[1].fallback_reason, "page not decoded") &&
              strstr(r[1].fallback_reason, "synthetic page 2 is corrupt"),
          "bad page: path %s, reason '%s'", r[1].engine_path, r[1].fallback_reason);
    CHECK(r[1].text.text && strcmp(r[1].text.text, TEXTS[1]) == 0, "bad page: its own text was not read");
    for (int i = 0; i < 4; i++)
        if (i != 1)
            same_as_alone(&r[i], &base[i], i, "bad page's neighbours");
    free_results(r, 4);
    /* ... and when its text cannot be read either, the call fails there */
    g_pages[1].bad_text = 1;
    int failed = -1;
    memset(&err, 0, sizeof err);
    int rc = engine_classify_pages(e, g_docs, 4, r, &failed, &err);
    free_results(r, 4);
    CHECK(rc == FOLIO_EIO && failed == 1 && strstr(err.msg, "page 2 unreadable"),
          "unreadable page: rc %d, failed %d, '%s'", rc, failed, err.msg);
    g_pages[1].bad_decode = g_pages[1].bad_text = 0;
    CHECK(engine_models_pipelines_after_seal(m) == 0, "%llu pipelines requested after seal",
          engine_models_pipelines_after_seal(m));
    engine_close(e);
    engine_models_close(m);

#ifdef FOLIO_FAULT_INJECTION
    fault_cases(labels, base);
#endif
    free_results(base, NP);
    engine_labels_free(labels);
    return tu_finish();
}
