/*
 * The vision-path benchmark (`folio bench engine`, vision part): random
 * weights of the real Qwen2.5-VL-7B shape (Q4_K_M-like text, F16 tower),
 * built in memory, run as the worker runs them:
 *
 *  - ready time, cold (empty pipeline cache directory) and warm (the
 *    cache the cold run saved): device open + pre-warm + weight upload and
 *    planning + one warm-up page;
 *  - pages/s for square pages with `labels` labels of `label_tokens`
 *    tokens: preprocess -> vision tower -> one fused prefill+scoring pass,
 *    with the time of each part, and once more with prefill and scoring in
 *    separate passes for their split;
 *  - the page's FLOPs (docs/reference/qwen25vl.md §6.1/§6.2) and the rate achieved.
 *
 * The synthetic text model has no byte-level vocabulary, so the prompt is
 * made of token ids directly, laid out as a real one (chat header, image
 * pads between vision markers, instruction, generation prompt) with the
 * same 3-D positions; the LM cannot tell the difference in cost.
 */
#include "bench/engine/bench.h"
#include "bench/engine/bench_internal.h"
#include "bench/engine/synth.h"
#include "engine/vlm.h"
#include "engine/vlm_internal.h"
#include "engine/arch/arch.h"
#include "engine/model/gguf_model.h"
#include "engine/model/lm.h"
#include "engine/model/preprocess.h"
#include "engine/quant/quant.h"
#include "engine/model/vision.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <inttypes.h>
#include <pthread.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct models {
    uint8_t *tbuf, *vbuf;
    struct gguf_model *tm, *vm;
};

static void models_free(struct models *m)
{
    gguf_model_close(m->tm);
    gguf_model_close(m->vm);
    free(m->tbuf);
    free(m->vbuf);
}

static int make_models(const struct vlm_bench_opts *o, struct models *m, struct folio_err *err)
{
    struct lm_synth ls = {.n_embd = 3584, .n_layer = 28, .n_head = 28, .n_head_kv = 4,
                          .n_ff = 18944, .n_vocab = 152064, .mat_type = QUANT_Q4_K, .q4km = 1,
                          .seed = 1234, .pool_rows = 64};
    struct vis_synth vs = {.qwen25 = 1, .n_embd = 1280, .n_layer = 32, .n_head = 16,
                           .n_ff = 3420, .proj_dim = 3584, .mat_type = QUANT_F16, .seed = 77};
    if (o->small) {
        ls = (struct lm_synth){.n_embd = 256, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
                               .n_ff = 512, .n_vocab = 1024, .mat_type = QUANT_Q4_K, .q4km = 1,
                               .seed = 1234, .pool_rows = 64};
        vs = (struct vis_synth){.qwen25 = 1, .n_embd = 128, .n_layer = 4, .n_head = 2,
                                .n_ff = 256, .proj_dim = 256, .mat_type = QUANT_F16, .seed = 77};
    }
    if (o->qwen3) { /* --family qwen3vl: the 8B shape, same weight types */
        q3_synth_shapes(o->small, &ls, &vs);
        ls.byte_vocab = 0;
    }
    size_t tl = 0, vl = 0;
    struct gguf_file *f = NULL;
    int rc = lm_synth_gguf(&ls, &m->tbuf, &tl, err);
    if (!rc)
        rc = gguf_open_memory(m->tbuf, tl, &f, err);
    if (!rc)
        rc = gguf_model_check(f, 0, &m->tm, err);
    if (!rc)
        rc = vis_synth_gguf(&vs, &m->vbuf, &vl, err);
    if (!rc)
        rc = gguf_open_memory(m->vbuf, vl, &f, err);
    if (!rc)
        rc = gguf_model_check(f, 1, &m->vm, err);
    return rc;
}

struct engine {
    struct vkr *vk;
    struct lm *lm;
    struct vis *vis;
    double vk_ms, prewarm_ms, load_ms, warmup_ms;
    int cache_hit;
};

static void engine_free(struct engine *e)
{
    vis_close(e->vis);
    lm_close(e->lm);
    vkr_close(e->vk);
    memset(e, 0, sizeof *e);
}

/* A page's prompt as ids + positions: 20 header tokens, vision start, M
 * image rows (-1), vision end, then `tail` tokens: the instruction and the
 * 5 closing tokens (--text-tokens sets header + markers + tail; 67 by
 * default, a short instruction; a real worker's prompt is longer when its
 * label list is, and gpu-e2e.sh benches at the worker's own length). */
#define PROMPT_HEAD 22u
struct page_prompt {
    int32_t *ids, *pos;
    float *emb;
    uint32_t n, first;
    int32_t next;
};

static int build_prompt(struct page_prompt *p, uint32_t rows, uint32_t cols, uint32_t E,
                        uint32_t V, uint32_t tail)
{
    uint32_t M = rows * cols, n = PROMPT_HEAD + M + tail;
    p->ids = malloc(n * sizeof *p->ids);
    p->pos = malloc((size_t)n * 3 * sizeof *p->pos);
    p->emb = calloc((size_t)n * E, sizeof *p->emb);
    if (!p->ids || !p->pos || !p->emb)
        return FOLIO_ENOMEM;
    int32_t q = 0;
    uint32_t i = 0;
    for (; i < 21; i++, q++) {
        p->ids[i] = (int32_t)((i * 7919u) % V);
        p->pos[i * 3] = p->pos[i * 3 + 1] = p->pos[i * 3 + 2] = q;
    }
    p->first = i;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++, i++) {
            p->ids[i] = -1;
            p->pos[i * 3] = q;
            p->pos[i * 3 + 1] = q + (int32_t)r;
            p->pos[i * 3 + 2] = q + (int32_t)c;
        }
    q += (int32_t)(rows > cols ? rows : cols);
    for (; i < n; i++, q++) {
        p->ids[i] = (int32_t)((i * 104729u) % V);
        p->pos[i * 3] = p->pos[i * 3 + 1] = p->pos[i * 3 + 2] = q;
    }
    p->n = n;
    p->next = q;
    return 0;
}

static int open_engine(const struct vlm_bench_opts *o, struct models *m, const char *cache,
                       uint32_t max_patches, uint32_t max_tokens, uint32_t batch,
                       struct engine *e, struct folio_err *err)
{
    memset(e, 0, sizeof *e);
    double t = folio_mono_ms();
    struct vkr_config vc = {.device = o->device, .allow_cpu = o->allow_cpu, .validate = 0,
                            .cache_dir = cache};
    int rc = vkr_open(&vc, &e->vk, err);
    e->vk_ms = folio_mono_ms() - t;
    if (rc)
        return rc;
    struct vkr_pipeline_key keys[LM_PIPELINE_KEYS_MAX + VIS_PIPELINE_KEYS_MAX];
    int nk = lm_pipeline_keys(e->vk, m->tm, o->gpu_weights, keys, LM_PIPELINE_KEYS_MAX);
    nk += vis_pipeline_keys(e->vk, m->vm, keys + nk, LM_PIPELINE_KEYS_MAX + VIS_PIPELINE_KEYS_MAX - nk);
    /* as vlm_open: the driver compiles while the weights upload */
    rc = ops_prewarm_begin(e->vk, keys, nk, err);
    if (rc)
        return rc;
    t = folio_mono_ms();
    struct lm_config lc = {.max_tokens = max_tokens, .batch = batch,
                           .max_labels = o->labels ? o->labels : 16,
                           .max_label_tokens = o->label_tokens ? o->label_tokens : 3};
    lc.gpu_weights = o->gpu_weights;
    rc = lm_open(e->vk, m->tm, &lc, &e->lm, err);
    struct vis_config visc = {.max_patches = max_patches * batch, .max_images = batch,
                              .gpu_weights = o->gpu_weights};
    if (!rc)
        rc = vis_open(e->vk, m->vm, &visc, &e->vis, err);
    e->load_ms = folio_mono_ms() - t;
    int failed = 0;
    if (!rc)
        rc = vkr_prewarm_finish(e->vk, &failed, err);
    struct vkr_stats st;
    vkr_get_stats(e->vk, &st);
    e->prewarm_ms = st.prewarm_ms; /* the compile's own length (overlapping load_ms) */
    if (!rc && failed)
        rc = folio_err_set(err, FOLIO_EDEVICE, "%d pipelines failed", failed);
    if (rc)
        return rc;
    e->cache_hit = st.cache_hit;
    vkr_seal_save(e->vk);
    return rc;
}

/* vision_sub, lm_sub: the passes' submit-and-wait alone (the rest of
 * vision and lm is host staging, uploads and readbacks) */
struct page_times {
    double prep, vision, lm, vision_sub, lm_sub;
};

/* The CPU part of a pass over n pages (decode is the caller's: px is
 * already pixels): each page resized and its prompt built, as
 * vlm_prepare (the tower makes the patch rows on the device). Touches no device state, so it may run on another thread
 * while the GPU runs the previous pass. */
struct batch_in {
    uint32_t n;
    struct prep_image *pi;
    struct page_prompt *p;
    struct vis_image *vi;
    struct lm_seq *s;
    double prep_ms;
};

static void batch_free(struct batch_in *bi)
{
    for (uint32_t i = 0; bi->pi && bi->p && i < bi->n; i++) {
        free(bi->p[i].ids);
        free(bi->p[i].pos);
        free(bi->p[i].emb);
        prep_image_free(&bi->pi[i]);
    }
    free(bi->pi);
    free(bi->p);
    free(bi->vi);
    free(bi->s);
    memset(bi, 0, sizeof *bi);
}

static int prep_batch(const struct vis *vis, uint32_t n_vocab, const uint8_t *px, uint32_t side,
                      uint32_t tail, uint32_t n, struct batch_in *bi, struct folio_err *err)
{
    double t0 = folio_mono_ms();
    memset(bi, 0, sizeof *bi);
    struct prep_config pc = {.patch = vis_hparams(vis)->patch_size};
    memcpy(pc.mean, vis_hparams(vis)->image_mean, sizeof pc.mean);
    memcpy(pc.std, vis_hparams(vis)->image_std, sizeof pc.std);
    bi->n = n;
    bi->pi = calloc(n, sizeof *bi->pi);
    bi->p = calloc(n, sizeof *bi->p);
    bi->vi = calloc(n, sizeof *bi->vi);
    bi->s = calloc(n, sizeof *bi->s);
    int rc = bi->pi && bi->p && bi->vi && bi->s
                 ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    uint32_t E = vis_out_dim(vis);
    for (uint32_t i = 0; !rc && i < n; i++) {
        struct prep_image *pi = &bi->pi[i];
        struct page_prompt *p = &bi->p[i];
        rc = prep_image_resize(px, side, side, (size_t)side * 3, 3, &pc, pi, err);
        if (rc)
            break;
        if (build_prompt(p, pi->grid_h / 2, pi->grid_w / 2, E, n_vocab, tail))
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
        bi->vi[i] = (struct vis_image){.grid_h = pi->grid_h, .grid_w = pi->grid_w,
                                       .out = p->emb ? p->emb + (size_t)p->first * E : NULL,
                                       .rgb = pi->resized};
        bi->s[i] = (struct lm_seq){p->ids, p->n, p->emb, p->pos, p->next, NULL, 0};
    }
    bi->prep_ms = folio_mono_ms() - t0;
    return rc;
}

/* The GPU part of a pass as vlm_classify_batch runs it: the vision tower
 * over all pages at once, one ragged LM pass scoring every page's labels.
 * lp: n x nl. */
static int gpu_batch(struct engine *e, struct batch_in *bi, const struct lm_label *lab,
                     uint32_t nl, double *lp, struct page_times *pt, struct folio_err *err)
{
    uint32_t n = bi->n;
    double *pr = calloc((size_t)n * nl, sizeof *pr);
    int *best = calloc(n, sizeof *best);
    int rc = pr && best ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    /* as vlm_classify_batch: the tower's rows stay on the device for the
     * text model where vis_rows says they can */
    struct vkr_tensor rows;
    uint32_t G = vis_hparams(e->vis)->spatial_merge * vis_hparams(e->vis)->spatial_merge;
    if (vis_rows(e->vis, &rows))
        for (uint32_t i = 0, r0 = 0; i < n; i++) {
            uint32_t M = bi->vi[i].grid_h * bi->vi[i].grid_w / G;
            bi->vi[i].out = NULL;
            bi->s[i].embd = NULL;
            bi->s[i].dev = &rows;
            bi->s[i].dev_row0 = r0;
            r0 += M;
        }
    double t1 = folio_mono_ms();
    if (!rc)
        rc = vis_encode_batch(e->vis, bi->vi, n, err);
    double t2 = folio_mono_ms();
    if (!rc)
        rc = lm_classify(e->lm, bi->s, n, lab, nl, lp, pr, best, err);
    pt->prep = bi->prep_ms;
    pt->vision = t2 - t1;
    pt->lm = folio_mono_ms() - t2;
    pt->vision_sub = vis_last_submit_ms(e->vis);
    pt->lm_sub = lm_last_submit_ms(e->lm);
    free(pr);
    free(best);
    return rc;
}

/* One pass over n pages with the CPU part in line: each page preprocessed
 * (timed apart: a worker does it on other threads), then the GPU part. */
static int run_batch(struct engine *e, const uint8_t *px, uint32_t side, uint32_t tail,
                     const struct lm_label *lab, uint32_t nl, uint32_t n, double *lp, struct page_times *pt,
                     struct folio_err *err)
{
    struct batch_in bi;
    int rc = prep_batch(e->vis, lm_hparams(e->lm)->n_vocab, px, side, tail, n, &bi, err);
    if (!rc)
        rc = gpu_batch(e, &bi, lab, nl, lp, pt, err);
    batch_free(&bi);
    return rc;
}

/* The next pass's CPU part on its own thread. */
struct prep_job {
    const struct vis *vis;
    uint32_t n_vocab, side, tail, n;
    const uint8_t *px;
    struct batch_in bi;
    int rc;
    struct folio_err err;
};

static void *prep_main(void *arg)
{
    struct prep_job *j = arg;
    j->rc = prep_batch(j->vis, j->n_vocab, j->px, j->side, j->tail, j->n, &j->bi, &j->err);
    return NULL;
}

/* npass passes of n pages pipelined: pass i+1's CPU part runs on a thread
 * while pass i runs on the GPU (the first pass is prepared before the
 * clock starts: the steady state of a fed stream). *ms gets the wall time;
 * lp gets the last pass's n x nl log-probs. */
static int run_pipelined(struct engine *e, const uint8_t *px, uint32_t side, uint32_t tail,
                         const struct lm_label *lab, uint32_t nl, uint32_t n, uint32_t npass,
                         double *lp, double *ms, struct folio_err *err)
{
    struct prep_job job[2];
    memset(job, 0, sizeof job);
    for (int i = 0; i < 2; i++)
        job[i] = (struct prep_job){.vis = e->vis, .n_vocab = lm_hparams(e->lm)->n_vocab,
                                   .side = side, .tail = tail, .n = n, .px = px};
    int rc = prep_batch(e->vis, job[0].n_vocab, px, side, tail, n, &job[0].bi, err);
    double t0 = folio_mono_ms();
    for (uint32_t i = 0; !rc && i < npass; i++) {
        struct prep_job *cur = &job[i & 1], *next = &job[(i + 1) & 1];
        pthread_t th;
        int started = 0;
        if (i + 1 < npass) {
            started = pthread_create(&th, NULL, prep_main, next) == 0;
            if (!started)
                rc = folio_err_set(err, FOLIO_ENOMEM, "cannot start the preprocessing thread");
        }
        struct page_times pt;
        if (!rc)
            rc = gpu_batch(e, &cur->bi, lab, nl, lp, &pt, err);
        if (started) {
            pthread_join(th, NULL);
            if (!rc && next->rc) {
                rc = next->rc;
                *err = next->err;
            }
        }
        batch_free(&cur->bi);
    }
    *ms = folio_mono_ms() - t0;
    batch_free(&job[0].bi);
    batch_free(&job[1].bi);
    return rc;
}

/* The warm-up as vlm_open runs it (vlm_warm_plan: independent of the
 * planned batch), with pages up to the bench page's size; then the runtime
 * is marked warm, so each pages line can show that the timed batches met no
 * variant the warm-up missed. *tall gets the last (tall) pass's page count. */
static int warm_up(struct engine *e, uint32_t P, uint32_t side, uint32_t tail,
                   const struct lm_label *lab, uint32_t nl, uint32_t maxb, double *lp,
                   uint32_t *tall, struct folio_err *err)
{
    struct vlm_warm_pass wp[VLM_WARM_MAX];
    int np = vlm_warm_plan(e->vk, 2 * P, side, maxb, nl < 16 ? nl : 16,
                           vlm_warm_split_rows(e->vk, lm_hparams(e->lm), vis_hparams(e->vis)), wp);
    uint32_t ts = 0;
    for (int i = 0; i < np; i++)
        ts = wp[i].side > ts ? wp[i].side : ts;
    /* every page: the top-left corner of one pattern, same stride rules */
    uint8_t *px = malloc((size_t)ts * ts * 3), *pg = malloc((size_t)ts * ts * 3);
    int rc = px && pg ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (size_t i = 0; !rc && i < (size_t)ts * ts * 3; i++)
        px[i] = (uint8_t)(((i / (ts * 3)) % 40 < 4 ? 30 : 220) ^ (i * 2654435761u >> 29));
    struct page_times pt;
    for (int i = 0; !rc && i < np; i++) {
        uint32_t s = wp[i].side;
        for (uint32_t y = 0; y < s; y++)
            memcpy(pg + (size_t)y * s * 3, px + (size_t)y * ts * 3, (size_t)s * 3);
        lm_set_gemm_split(e->lm, wp[i].unsplit ? 1 : 0, wp[i].unsplit);
        rc = run_batch(e, pg, s, tail, lab, wp[i].labels, wp[i].pages, lp, &pt, err);
        lm_set_gemm_split(e->lm, 0, 0);
    }
    free(pg);
    free(px);
    if (!rc)
        vkr_mark_warm(e->vk);
    *tall = np ? wp[np - 1].pages : 0;
    return rc;
}

static uint64_t warm_uses(const struct vkr *vk)
{
    struct vkr_stats st;
    vkr_get_stats(vk, &st);
    return st.first_use_after_warm;
}

static double lm_flops(const struct gguf_text_hparams *h, double T)
{
    double E = h->n_embd, QW = (double)h->n_head * h->head_dim, KW = (double)h->n_head_kv * h->head_dim;
    double per = 2 * E * QW * 2 + 2 * 2 * E * KW + 3 * 2 * E * h->n_ff;
    return h->n_layer * (per * T + 2.0 * QW * T * (T + 1));
}

int vlm_bench(const struct vlm_bench_opts *o, FILE *out, struct folio_err *err)
{
    uint32_t side = o->image ? o->image : (o->small ? 224 : 1024);
    uint32_t NLB = o->labels ? o->labels : 16, LTK = o->label_tokens ? o->label_tokens : 3;
    uint32_t iters = o->iters ? o->iters : 3;
    if (NLB > 64)
        NLB = 64;
    struct models m;
    memset(&m, 0, sizeof m);
    struct engine e;
    memset(&e, 0, sizeof e);
    double t0 = folio_mono_ms();
    int rc = make_models(o, &m, err);
    double synth_ms = folio_mono_ms() - t0;
    uint8_t *px = malloc((size_t)side * side * 3);
    int32_t *ltok = malloc((size_t)NLB * LTK * sizeof *ltok);
    struct lm_label lab[64];
    static const uint32_t one = 1;
    const uint32_t *bs = o->batches && o->nbatches ? o->batches : &one;
    uint32_t nb = o->batches && o->nbatches ? o->nbatches : 1, maxb = 1;
    for (uint32_t i = 0; i < nb; i++)
        maxb = bs[i] > maxb ? bs[i] : maxb;
    double *lp = malloc((size_t)maxb * 64 * sizeof *lp);
    double *lp2 = malloc((size_t)maxb * 64 * sizeof *lp2);
    if (!rc && (!px || !ltok || !lp || !lp2))
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (size_t i = 0; !rc && i < (size_t)side * side * 3; i++)
        px[i] = (uint8_t)(((i / (side * 3)) % 40 < 4 ? 30 : 220) ^ (i * 2654435761u >> 29));
    for (uint32_t l = 0; !rc && l < NLB; l++) {
        for (uint32_t j = 0; j < LTK; j++)
            ltok[l * LTK + j] = (int32_t)((l * 131u + j * 17u + 5u) % m.tm->text.n_vocab);
        lab[l] = (struct lm_label){ltok + l * LTK, LTK};
    }
    uint32_t gh = 0, gw = 0, P = o->qwen3 ? 16 : 14;
    struct prep_config pc = {.patch = P};
    if (!rc)
        rc = prep_smart_resize(side, side, &pc, &gh, &gw, err);
    gh /= P;
    gw /= P;
    uint32_t TT = o->text_tokens ? o->text_tokens : PROMPT_HEAD + 45;
    if (!rc && TT < PROMPT_HEAD + 6)
        rc = folio_err_set(err, FOLIO_EINVAL, "--text-tokens %u: a page's prompt has at least %u "
                           "text tokens (chat header, vision markers, closing)", TT, PROMPT_HEAD + 6);
    uint32_t tail = TT - PROMPT_HEAD;
    uint32_t N = gh * gw, T = N / 4 + TT;
    /* cold: a fresh, empty cache directory (unless the caller names one) */
    char cache[512];
    snprintf(cache, sizeof cache, "%s", o->cache_dir ? o->cache_dir : "/tmp/folio-vlm-bench-XXXXXX");
    if (!rc && !o->cache_dir && !mkdtemp(cache))
        rc = folio_err_set(err, FOLIO_EIO, "cannot create a cache directory under /tmp");
    struct page_times pt;
    double ready[2] = {0, 0};
    int hits[2] = {0, 0};
    double detail[2][3] = {{0}}, warm_ms[2] = {0, 0};
    uint32_t wpages = 0;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        t0 = folio_mono_ms();
        rc = open_engine(o, &m, cache, N, T + 8, maxb, &e, err);
        double w0 = folio_mono_ms();
        if (!rc)
            rc = warm_up(&e, P, side, tail, lab, NLB, maxb, lp, &wpages, err);
        warm_ms[pass] = folio_mono_ms() - w0;
        ready[pass] = folio_mono_ms() - t0;
        hits[pass] = e.cache_hit;
        detail[pass][0] = e.vk_ms;
        detail[pass][1] = e.prewarm_ms;
        detail[pass][2] = e.load_ms;
        if (pass == 0)
            engine_free(&e);
    }
    char dev[1200] = "";
    if (!rc) {
        bench_device_json(e.vk, dev, sizeof dev);
        for (int pass = 0; pass < 2; pass++)
            fprintf(out, "{\"bench\":\"engine_vlm\",\"what\":\"ready\",%s,\"cache\":\"%s\","
                    "\"cache_hit\":%d,\"ready_ms\":%.0f,\"vk_ms\":%.0f,\"prewarm_ms\":%.0f,"
                    "\"load_ms\":%.0f,\"warmup_ms\":%.0f,\"planned_batch\":%u,"
                    "\"warmup_tall_pages\":%u,\"synth_ms\":%.0f}\n", dev,
                    pass ? "warm" : "cold", hits[pass], ready[pass], detail[pass][0],
                    detail[pass][1], detail[pass][2], warm_ms[pass], maxb, wpages, synth_ms);
    }
    double vf = 0, lf = 0;
    if (!rc) {
        /* vision FLOPs as vis_bench counts them: linear + attention + merger */
        const struct gguf_vision_hparams *h = vis_hparams(e.vis);
        double n = N, D = h->n_embd;
        vf = 2 * n * 3.0 * h->patch_size * h->patch_size * D +
             2 * (n / 4) * ((double)h->merger_dim * h->merger_dim +
                            (double)h->merger_dim * h->proj_dim) * (1 + h->n_deepstack);
        int mlp = h->arch->act == OP_SWIGLU ? 3 : 2; /* SwiGLU or one up/down */
        for (uint32_t i = 0; i < h->n_layer; i++) /* no windows: every block full */
            vf += 2 * n * (4 * D * D + mlp * D * h->n_ff) +
                  (!h->n_wa_pattern || (i + 1) % h->n_wa_pattern == 0 ? 4 * D * n * n
                                                                      : 4 * D * n * 64);
        lf = lm_flops(lm_hparams(e.lm), T) + lm_flops(lm_hparams(e.lm), 1) * NLB * (LTK - 1);
    }
    /* per batch size: pages/s counting the CPU preprocess in line
     * (pages_per_s), without it (gpu_pages_per_s: vision + LM only, as if
     * other threads fed the GPU for free) and pipelined on one extra
     * thread (pipelined_pages_per_s: the next pass prepared while this one
     * runs); inline_vs_gpu and pipelined_vs_gpu are their ratios to the
     * GPU-only rate (1: the CPU part no longer sets the page rate); times
     * per page */
    for (uint32_t bi = 0; bi < nb && !rc; bi++) {
        uint32_t b = bs[bi];
        double sp = 0, sv = 0, sl = 0, svs = 0, sls = 0, best = INFINITY;
        for (uint32_t it = 0; it < iters && !rc; it++) {
            double w0 = folio_mono_ms();
            rc = run_batch(&e, px, side, tail, lab, NLB, b, lp, &pt, err);
            double w = folio_mono_ms() - w0;
            sp += pt.prep;
            sv += pt.vision;
            sl += pt.lm;
            svs += pt.vision_sub;
            sls += pt.lm_sub;
            if (w < best)
                best = w;
        }
        if (rc)
            break;
        /* the same pages pipelined: the next pass's CPU part on a thread
         * while this one runs on the GPU; the log-probs must not change */
        memcpy(lp2, lp, (size_t)b * NLB * sizeof *lp);
        uint32_t npass = iters < 3 ? 3 : iters;
        double pms = 0;
        rc = run_pipelined(&e, px, side, tail, lab, NLB, b, npass, lp, &pms, err);
        if (rc)
            break;
        int same = !memcmp(lp2, lp, (size_t)b * NLB * sizeof *lp);
        double mean = (sp + sv + sl) / iters, gpu = (sv + sl) / iters;
        double ppps = 1000.0 * b * npass / pms;
        fprintf(out, "{\"bench\":\"engine_vlm\",\"what\":\"pages\",%s,\"image\":%u,\"batch\":%u,"
                "\"image_tokens\":%u,\"prompt_tokens\":%u,\"labels\":%u,\"label_tokens\":%u,"
                "\"iters\":%u,\"page_ms_best\":%.1f,\"page_ms_mean\":%.1f,\"pages_per_s\":%.3f,"
                "\"gpu_pages_per_s\":%.3f,\"preprocess_ms\":%.1f,\"vision_ms\":%.1f,"
                "\"lm_ms\":%.1f,\"vision_submit_ms\":%.1f,\"lm_submit_ms\":%.1f,\"vision_tflop\":%.2f,\"lm_tflop\":%.2f,\"tflops\":%.1f,"
                "\"pipelined_pages_per_s\":%.3f,\"pipelined_vs_gpu\":%.3f,"
                "\"inline_vs_gpu\":%.3f,\"pipelined_same\":%s,"
                "\"first_use_after_warm\":%" PRIu64 "}\n",
                dev, side, b, N / 4, T, NLB, LTK, iters, best / b, mean / b, 1000.0 * b / mean,
                1000.0 * b / gpu, sp / iters / b, sv / iters / b, sl / iters / b, svs / iters / b, sls / iters / b, vf / 1e12,
                lf / 1e12, b * (vf + lf) / (mean * 1e-3) / 1e12, ppps, ppps / (1000.0 * b / gpu),
                gpu / mean, same ? "true" : "false", warm_uses(e.vk));
    }
    if (!rc) {
        /* the LM split: prefill and scoring as separate passes */
        struct page_prompt p;
        memset(&p, 0, sizeof p);
        if (build_prompt(&p, gh / 2, gw / 2, vis_out_dim(e.vis), lm_hparams(e.lm)->n_vocab, tail))
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
        struct lm_seq s = {p.ids, p.n, p.emb, p.pos, p.next, NULL, 0};
        double pf = 0, sc = 0;
        for (uint32_t it = 0; it < iters && !rc; it++) {
            double a = folio_mono_ms();
            rc = lm_prefill(e.lm, &s, 1, NULL, err);
            double b = folio_mono_ms();
            if (!rc)
                rc = lm_score(e.lm, lab, NLB, lp, err);
            pf += b - a;
            sc += folio_mono_ms() - b;
        }
        if (!rc)
            fprintf(out, "{\"bench\":\"engine_vlm\",\"what\":\"lm_split\",%s,\"prompt_tokens\":%u,"
                    "\"labels\":%u,\"prefill_ms\":%.1f,\"score_ms\":%.1f,\"prefill_tok_s\":%.0f}\n",
                    dev, T, NLB, pf / iters, sc / iters, T / (pf / iters * 1e-3));
        free(p.ids);
        free(p.pos);
        free(p.emb);
    }
    struct vkr_stats st;
    memset(&st, 0, sizeof st);
    if (e.vk)
        vkr_get_stats(e.vk, &st);
    engine_free(&e);
    models_free(&m);
    free(px);
    free(ltok);
    free(lp);
    free(lp2);
    if (!o->cache_dir && cache[0] && !strstr(cache, "XXXXXX")) {
        /* the fresh directory this run made: its one cache file, then itself */
        if (st.cache_path[0])
            remove(st.cache_path);
        rmdir(cache);
    }
    return rc;
}
