/*
 * The Vulkan runtime's promises, on the test device (lavapipe in CI):
 *  - device selection by name, index and UUID; CPU devices only when
 *    allowed; unknown selectors fail with the device list;
 *  - FOLIO_VK_* overrides lower the limits; tensors never straddle blocks;
 *    over-size tensors, exhausted plans and (injected) device OOM give
 *    errors with the numbers;
 *  - chunked staging round-trips data larger than the staging buffer;
 *  - a pipeline first recorded after vkr_mark_warm is counted, one the
 *    warm-up recorded is not;
 *  - pre-warm (parallel and serial), seal, a request after seal fails and
 *    is counted; an injected pipeline-creation failure disables only that
 *    pipeline;
 *  - the on-disk pipeline cache hits when valid and is a clean miss when
 *    corrupted, truncated, foreign, stale or from another driver;
 *  - an (injected) lost device marks the runtime dead;
 *  - counting allocation callbacks see the driver's host allocations;
 *  - zero validation messages throughout.
 */
#include "tests/support/testutil.h"
#include "common/common.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *test_device(void)
{
    const char *d = getenv("FOLIO_TEST_DEVICE");
    return d && *d ? d : "llvmpipe";
}

static struct vkr *open_dev(const char *sel, const char *cache_dir, int serial, struct folio_err *e)
{
    struct vkr_config cfg = {.device = sel, .allow_cpu = 1, .validate = -1,
                             .cache_dir = cache_dir ? cache_dir : "", .serial_pipelines = serial};
    struct vkr *vk = NULL;
    if (vkr_open(&cfg, &vk, e) != 0)
        return NULL;
    return vk;
}

static uint64_t messages(struct vkr *vk)
{
    struct vkr_stats s;
    vkr_get_stats(vk, &s);
    return s.validation_messages;
}

static void test_selection(void)
{
    struct folio_err e = {0};
    struct vkr *vk = open_dev(test_device(), NULL, 0, &e);
    CHECK(vk != NULL, "open by name: %s", e.msg);
    if (!vk)
        return;
    struct vkr_device_info info = *vkr_device(vk);
    vkr_close(vk);

    char idx[16];
    snprintf(idx, sizeof idx, "%d", info.index);
    vk = open_dev(idx, NULL, 0, &e);
    CHECK(vk && strcmp(vkr_device(vk)->name, info.name) == 0, "open by index %s: %s", idx, e.msg);
    vkr_close(vk);
    vk = open_dev(info.uuid_hex, NULL, 0, &e);
    CHECK(vk && strcmp(vkr_device(vk)->name, info.name) == 0, "open by UUID: %s", e.msg);
    vkr_close(vk);

    vk = open_dev("no-such-device-xyz", NULL, 0, &e);
    CHECK(vk == NULL && e.code == FOLIO_EINVAL && strstr(e.detail, info.name),
          "unknown selector should list devices: %s / %s", e.msg, e.detail);
    vkr_close(vk);

    if (strcmp(info.type, "cpu") == 0) {
        struct vkr_config cfg = {.device = test_device(), .allow_cpu = 0, .validate = -1,
                                 .cache_dir = ""};
        vk = NULL;
        int rc = vkr_open(&cfg, &vk, &e);
        CHECK(rc == FOLIO_EINVAL && vk == NULL && strstr(e.msg, "CPU"),
              "CPU device must need allow_cpu: rc %d %s", rc, e.msg);
    }

    struct vkr_device_info list[8];
    int n = 0;
    CHECK(vkr_list_devices(list, 8, &n, &e) == 0 && n >= 1, "list devices: %s", e.msg);
}

/* A gathered upload into t (n words; a holds the source words, b is
 * scratch): pieces taken from the source back to front, of many lengths,
 * some running on from the previous destination (one copy region), some
 * after a gap the upload must leave alone, more than one submission's
 * regions, and one piece longer than the staging buffer. Then a batch with
 * one piece past the tensor's end: refused before any byte is copied. */
static void test_pieces(struct vkr *vk, struct vkr_tensor t, struct vkr_tensor t2,
                        const uint32_t *a, uint32_t *b, size_t n)
{
    struct folio_err e = {0};
    uint32_t *want = malloc(n * 4);
    struct vkr_piece *p = malloc(n / 8 * sizeof *p);
    uint32_t np = 0;
    for (size_t i = 0; i < n; i++)
        want[i] = 0x3f800000u; /* the fill before */
    for (size_t d = 0; np < n / 8;) {
        size_t len = np == 40 ? 600 * 1024 / 4 : 1 + (np * 37u) % 300; /* words */
        if (d + len > n)
            break;
        size_t src = n - d - len; /* back to front: no piece's source is its destination */
        p[np++] = (struct vkr_piece){.t = t, .dst = d * 4, .src = a + src, .len = len * 4};
        memcpy(want + d, a + src, len * 4);
        d += len + (np % 3 == 0 ? 16 : 0); /* every third piece leaves a gap */
    }
    CHECK(np > 130, "pieces: only %u", np); /* over 64 regions: more than one submission */
    CHECK(vkr_fill(vk, t, 0x3f800000u, &e) == 0, "fill: %s", e.msg);
    CHECK(vkr_upload_pieces(vk, p, np, &e) == 0, "gathered upload: %s", e.msg);
    CHECK(vkr_download(vk, t, 0, b, n * 4, &e) == 0, "download: %s", e.msg);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += b[i] != want[i];
    CHECK(bad == 0, "gathered upload: %zu of %zu words differ", bad, n);

    /* two tensors in two blocks, pieces alternating between them at
     * destinations that run on from each other if the blocks are ignored
     * (t's pieces at even multiples of w words, t2's at odd ones): regions
     * must not merge across blocks */
    CHECK(t.block != t2.block && t.offset == t2.offset, "the tensors: blocks %u %u, offsets %llu %llu",
          t.block, t2.block, (unsigned long long)t.offset, (unsigned long long)t2.offset);
    uint32_t nw = (uint32_t)(t2.size / 4) / 16 * 16, w = nw / 16;
    for (uint32_t i = 0; i < 16; i++)
        p[i] = (struct vkr_piece){.t = i % 2 ? t2 : t, .dst = (uint64_t)i * w * 4, .src = a + i * w,
                                  .len = (uint64_t)w * 4};
    CHECK(vkr_fill(vk, t, 0, &e) == 0 && vkr_fill(vk, t2, 0, &e) == 0, "fill: %s", e.msg);
    CHECK(vkr_upload_pieces(vk, p, 16, &e) == 0, "upload into two tensors: %s", e.msg);
    bad = 0;
    for (int k = 0; k < 2; k++) {
        CHECK(vkr_download(vk, k ? t2 : t, 0, b, (uint64_t)nw * 4, &e) == 0, "download: %s", e.msg);
        for (uint32_t i = 0; i < nw; i++)
            bad += b[i] != ((i / w) % 2 == (uint32_t)k ? a[i] : 0u);
    }
    CHECK(bad == 0, "two tensors: %zu words differ", bad);

    CHECK(vkr_fill(vk, t, 0x3f800000u, &e) == 0, "fill: %s", e.msg);
    struct vkr_piece two[2] = {{.t = t, .dst = 0, .src = a, .len = 64},
                               {.t = t, .dst = n * 4 - 8, .src = a, .len = 16}};
    int rc = vkr_upload_pieces(vk, two, 2, &e);
    CHECK(rc == FOLIO_EINVAL && strstr(e.msg, "outside"), "piece past the end: %d %s", rc, e.msg);
    CHECK(vkr_download(vk, t, 0, b, 64, &e) == 0 && b[0] == 0x3f800000u && b[15] == 0x3f800000u,
          "a refused batch copied its first piece");
    free(p);
    free(want);
}

static void test_memory(void)
{
    setenv("FOLIO_VK_MAX_ALLOC", "1M", 1);
    setenv("FOLIO_VK_MAX_RANGE", "64K", 1);
    struct folio_err e = {0};
    struct vkr *vk = open_dev(test_device(), NULL, 0, &e);
    unsetenv("FOLIO_VK_MAX_ALLOC");
    unsetenv("FOLIO_VK_MAX_RANGE");
    CHECK(vk != NULL, "open: %s", e.msg);
    if (!vk)
        return;
    const struct vkr_limits *L = vkr_limits(vk);
    CHECK(L->max_alloc == (1u << 20) && L->max_range == 65536 && L->block_size <= (1u << 20) &&
              L->overridden, "overrides not applied: alloc %llu range %llu block %llu",
          (unsigned long long)L->max_alloc, (unsigned long long)L->max_range,
          (unsigned long long)L->block_size);

    struct vkr_arena *w = NULL;
    int rc = vkr_arena_create(vk, "w", VKR_ARENA_WEIGHTS, &w, &e);
    if (rc) {
        CHECK(0, "arena: %s", e.msg);
        vkr_close(vk);
        return;
    }
    /* 7 tensors of 300 KiB: at most 3 per 1 MiB block, none straddling. */
    struct vkr_tensor t[7];
    int ok = 1;
    for (int i = 0; i < 7; i++) {
        rc = vkr_arena_alloc(w, 300 * 1024, &t[i], &e);
        if (rc || t[i].offset + t[i].size > L->block_size)
            ok = 0;
    }
    CHECK(ok, "weights placement: %s", e.msg);
    CHECK(vkr_arena_blocks(w) >= 3, "expected several blocks, got %u", vkr_arena_blocks(w));
    for (int i = 1; i < 7; i++)
        if (t[i].block == t[i - 1].block)
            CHECK(t[i].offset >= t[i - 1].offset + t[i - 1].size, "tensors %d and %d overlap", i - 1, i);

    struct vkr_tensor big;
    rc = vkr_arena_alloc(w, 3u << 20, &big, &e);
    CHECK(rc == FOLIO_ELIMIT && strstr(e.msg, "exceeds the device's largest allocation") &&
              strstr(e.detail, "1048576"),
          "over-size tensor: rc %d %s / %s", rc, e.msg, e.detail);

    /* Staging: 3 MiB in 1 MiB blocks would not fit one tensor, so round-trip
     * 900 KiB through a staging buffer capped at the block size by chunks. */
    struct vkr_tensor rt;
    rc = vkr_arena_alloc(w, 900 * 1024, &rt, &e);
    CHECK(rc == 0, "alloc: %s", e.msg);
    if (!rc) {
        size_t n = 900 * 1024 / 4;
        uint32_t *a = malloc(n * 4), *b = malloc(n * 4);
        for (size_t i = 0; i < n; i++)
            a[i] = (uint32_t)(i * 2654435761u);
        CHECK(vkr_upload(vk, rt, 0, a, n * 4, &e) == 0, "upload: %s", e.msg);
        CHECK(vkr_download(vk, rt, 0, b, n * 4, &e) == 0, "download: %s", e.msg);
        CHECK(memcmp(a, b, n * 4) == 0, "round trip differs");
        CHECK(vkr_fill(vk, rt, 0x3f800000u, &e) == 0, "fill: %s", e.msg);
        CHECK(vkr_download(vk, rt, 4096, b, 16, &e) == 0 && b[0] == 0x3f800000u && b[3] == 0x3f800000u,
              "fill result");
        rc = vkr_upload(vk, rt, 900 * 1024 - 8, a, 16, &e);
        CHECK(rc == FOLIO_EINVAL, "copy past the tensor end must fail: %d", rc);
        test_pieces(vk, rt, t[0], a, b, n);
        free(a);
        free(b);
    }

    struct vkr_arena *act = NULL;
    CHECK(vkr_arena_create(vk, "act", VKR_ARENA_ACTIVATIONS, &act, &e) == 0, "%s", e.msg);
    uint64_t plan[] = {400 * 1024, 400 * 1024, 400 * 1024};
    rc = vkr_arena_plan(act, plan, 3, &e);
    CHECK(rc == 0 && vkr_arena_blocks(act) == 2, "plan: rc %d blocks %u %s", rc, vkr_arena_blocks(act), e.msg);
    struct vkr_tensor a1, a2, a3, a4;
    int r1 = vkr_arena_alloc(act, 400 * 1024, &a1, &e), r2 = vkr_arena_alloc(act, 400 * 1024, &a2, &e);
    int r3 = vkr_arena_alloc(act, 400 * 1024, &a3, &e);
    CHECK(r1 == 0 && r2 == 0 && r3 == 0, "planned allocations: %s", e.msg);
    int r4 = vkr_arena_alloc(act, 400 * 1024, &a4, &e);
    CHECK(r4 == FOLIO_ELIMIT && strstr(e.msg, "exhausted"), "beyond the plan must fail: %d %s", r4, e.msg);
    vkr_arena_reset(act);
    CHECK(vkr_arena_alloc(act, 400 * 1024, &a4, &e) == 0 && a4.block == a1.block && a4.offset == a1.offset,
          "reset rewinds to the first slot");
    struct vkr_stats s;
    vkr_get_stats(vk, &s);
    uint32_t blocks_before = s.blocks;
    vkr_arena_reset(act);
    for (int i = 0; i < 10; i++) {
        vkr_arena_reset(act);
        vkr_arena_alloc(act, 300 * 1024, &a1, &e);
    }
    vkr_get_stats(vk, &s);
    CHECK(s.blocks == blocks_before, "activation passes must not allocate device memory");

#ifdef FOLIO_FAULT_INJECTION
    setenv("FOLIO_FAULT", "vk_oom", 1);
    struct vkr_arena *w2 = NULL;
    vkr_arena_create(vk, "oom", VKR_ARENA_WEIGHTS, &w2, &e);
    struct vkr_tensor o;
    rc = vkr_arena_alloc(w2, 1024, &o, &e);
    unsetenv("FOLIO_FAULT");
    CHECK(rc == FOLIO_ENOMEM && strstr(e.msg, "needed") && strstr(e.detail, "free of") && strstr(e.detail, "block limit"),
          "OOM message needs numbers: %s / %s", e.msg, e.detail);
    vkr_arena_destroy(w2);
#endif
    vkr_arena_destroy(act);
    vkr_arena_destroy(w);
    CHECK(messages(vk) == 0, "validation messages: %llu", (unsigned long long)messages(vk));
    vkr_close(vk);
}

/* A weight tensor larger than a block (a 7B model's f16 LM head is 1.02
 * GiB against 1 GiB blocks) gets a block of its own, up to the device's
 * largest allocation, and the bump goes on in the block it was in: the
 * tensors around it share a block, nothing overlaps, the data round-trips,
 * vkr_plan_bytes predicts the bytes, and an activation arena still refuses
 * a tensor over the block size. */
static void test_memory_own_block(void)
{
    setenv("FOLIO_VK_BLOCK_SIZE", "1M", 1);
    struct folio_err e = {0};
    struct vkr *vk = open_dev(test_device(), NULL, 0, &e);
    unsetenv("FOLIO_VK_BLOCK_SIZE");
    CHECK(vk != NULL, "open: %s", e.msg);
    if (!vk)
        return;
    const struct vkr_limits *L = vkr_limits(vk);
    CHECK(L->block_size == (1u << 20) && L->tensor_max >= (4u << 20),
          "block %llu, largest tensor %llu", (unsigned long long)L->block_size,
          (unsigned long long)L->tensor_max);
    struct vkr_arena *w = NULL;
    int rc = vkr_arena_create(vk, "w", VKR_ARENA_WEIGHTS, &w, &e);
    CHECK(rc == 0, "arena: %s", e.msg);
    struct vkr_tensor t[4];
    const uint64_t sz[4] = {300 * 1024, 3u << 20, 300 * 1024, (3u << 20) + 4096};
    for (int i = 0; !rc && i < 4; i++)
        rc = vkr_arena_alloc(w, sz[i], &t[i], &e);
    CHECK(rc == 0, "allocations: %s", e.msg);
    if (!rc) {
        CHECK(t[1].offset == 0 && t[3].offset == 0 && t[1].block != t[0].block &&
                  t[3].block != t[1].block && t[3].block != t[0].block,
              "the large tensors have blocks of their own");
        CHECK(t[2].block == t[0].block && t[2].offset >= t[0].offset + t[0].size,
              "the bump goes on in the first block: block %u/%u offset %llu", t[2].block, t[0].block,
              (unsigned long long)t[2].offset);
        CHECK(vkr_arena_blocks(w) == 3, "3 blocks, got %u", vkr_arena_blocks(w));
        CHECK(vkr_plan_bytes(vk, VKR_ARENA_WEIGHTS, sz, 4) == (1u << 20) + sz[1] + sz[3],
              "planned bytes %llu", (unsigned long long)vkr_plan_bytes(vk, VKR_ARENA_WEIGHTS, sz, 4));
        size_t n = sz[3] / 4;
        uint32_t *a = malloc(n * 4), *b = malloc(n * 4);
        for (size_t i = 0; a && b && i < n; i++)
            a[i] = (uint32_t)(i * 2654435761u);
        CHECK(a && b && vkr_upload(vk, t[3], 0, a, n * 4, &e) == 0, "upload: %s", e.msg);
        CHECK(a && b && vkr_download(vk, t[3], 0, b, n * 4, &e) == 0 && memcmp(a, b, n * 4) == 0,
              "round trip through a block of its own: %s", e.msg);
        free(a);
        free(b);
    }
    struct vkr_arena *act = NULL;
    struct vkr_tensor x;
    CHECK(vkr_arena_create(vk, "act", VKR_ARENA_ACTIVATIONS, &act, &e) == 0, "%s", e.msg);
    rc = act ? vkr_arena_alloc(act, 3u << 20, &x, &e) : 0;
    CHECK(rc == FOLIO_ELIMIT && strstr(e.msg, "block size"), "activation over a block: %d %s", rc,
          e.msg);
    rc = vkr_arena_alloc(w, L->tensor_max + 4096, &x, &e);
    CHECK(rc == FOLIO_ELIMIT && strstr(e.msg, "largest allocation"), "over the largest: %d %s", rc,
          e.msg);
    vkr_arena_destroy(act);
    vkr_arena_destroy(w);
    CHECK(messages(vk) == 0, "validation messages: %llu", (unsigned long long)messages(vk));
    vkr_close(vk);
}

static int count_keys(struct vkr *vk)
{
    return ops_pipeline_keys(vk, NULL, 1000);
}

static void test_pipelines(const char *scratch)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache", scratch);
    struct folio_err e = {0};
    struct vkr *vk = open_dev(test_device(), dir, 0, &e);
    CHECK(vk != NULL, "open: %s", e.msg);
    if (!vk)
        return;
    struct vkr_stats s;
    vkr_get_stats(vk, &s);
    CHECK(s.cache_hit == 0 && strstr(s.cache_miss_reason, "no file"), "fresh dir is a miss: %d %s",
          s.cache_hit, s.cache_miss_reason);
    int failed = -1;
    int rc = ops_prewarm(vk, &failed, &e);
    CHECK(rc == 0 && failed == 0, "prewarm: %d %d %s", rc, failed, e.msg);
    vkr_get_stats(vk, &s);
    CHECK((int)s.pipelines_built == count_keys(vk), "built %u of %d", s.pipelines_built, count_keys(vk));
    CHECK(vkr_cache_save(vk, &e) == 0, "cache save: %s", e.msg);
    vkr_seal(vk);
    struct vkr_pipeline_key k = {.shader = "softmax"};
    uint32_t id;
    CHECK(vkr_pipeline(vk, &k, &id, &e) == 0, "pre-warmed pipeline after seal: %s", e.msg);
    struct vkr_pipeline_key miss = {.shader = "norm", .nspec = 1, .spec = {7}};
    rc = vkr_pipeline(vk, &miss, &id, &e);
    vkr_get_stats(vk, &s);
    CHECK(rc == FOLIO_ESTATE && s.pipeline_requests_after_seal == 1, "after-seal miss: rc %d count %llu",
          rc, (unsigned long long)s.pipeline_requests_after_seal);
    char json[4096];
    CHECK(vkr_stats_json(vk, json, sizeof json) == 0 && strstr(json, "\"requests_after_seal\":1") &&
              strstr(json, "\"host_alloc_callbacks\"") && strstr(json, "\"sealed\":true"),
          "stats json: %s", json);
    CHECK(s.host_allocs > 0 && s.host_bytes_peak > 0, "allocation callbacks saw nothing");
    /* the warm-up's record: a pipeline recorded before vkr_mark_warm is
     * exercised; recorded again after it, nothing; another one recorded
     * for the first time after it is counted */
    struct vkr_arena *a = NULL;
    struct vkr_tensor x = {0}, y = {0};
    rc = vkr_arena_create(vk, "a", VKR_ARENA_WEIGHTS, &a, &e);
    if (!rc)
        rc = vkr_arena_alloc(a, 4096, &x, &e);
    if (!rc)
        rc = vkr_arena_alloc(a, 4096, &y, &e);
    CHECK(rc == 0, "arena: %s", e.msg);
    struct vkr_cmd *c = NULL;
    CHECK(!rc && vkr_cmd_begin(vk, &c, &e) == 0, "begin: %s", e.msg);
    if (c) {
        CHECK(op_elem(c, &(struct op_elem){.op = OP_SILU, .a = x, .y = y, .n = 64},
                                           &e) == 0, "silu: %s", e.msg);
        vkr_get_stats(vk, &s);
        CHECK(s.pipelines_exercised == 1 && s.first_use_after_warm == 0,
              "before the mark: %u exercised, %llu after warm", s.pipelines_exercised,
              (unsigned long long)s.first_use_after_warm);
        vkr_mark_warm(vk);
        CHECK(op_elem(c, &(struct op_elem){.op = OP_SILU, .a = x, .y = y, .n = 64},
                                           &e) == 0, "silu again: %s", e.msg);
        vkr_get_stats(vk, &s);
        CHECK(s.first_use_after_warm == 0, "a warmed pipeline counted: %llu",
              (unsigned long long)s.first_use_after_warm);
        CHECK(op_elem(c, &(struct op_elem){.op = OP_ADD, .a = x, .b = &y, .y = y, .n = 64, .nb = 64},
                                           &e) == 0, "add: %s", e.msg);
        vkr_get_stats(vk, &s);
        CHECK(s.pipelines_exercised == 2 && s.first_use_after_warm == 1,
              "a first use after the mark: %u exercised, %llu after warm", s.pipelines_exercised,
              (unsigned long long)s.first_use_after_warm);
        CHECK(vkr_stats_json(vk, json, sizeof json) == 0 &&
                  strstr(json, "\"exercised\":2,\"first_use_after_warm\":1"),
              "stats json: %s", json);
        CHECK(vkr_cmd_submit(c, &e) == 0, "submit: %s", e.msg);
    }
    vkr_arena_destroy(a);
    CHECK(messages(vk) == 0, "validation messages");
    vkr_close(vk);

    /* Valid cache -> hit. */
    vk = open_dev(test_device(), dir, 1, &e);
    CHECK(vk != NULL, "reopen: %s", e.msg);
    if (!vk)
        return;
    vkr_get_stats(vk, &s);
    CHECK(s.cache_hit == 1, "valid cache should hit: %s", s.cache_miss_reason);
    char path[600];
    snprintf(path, sizeof path, "%s", s.cache_path);
    rc = ops_prewarm(vk, &failed, &e); /* serial this time */
    CHECK(rc == 0 && failed == 0, "serial prewarm: %s", e.msg);
    vkr_close(vk);

    uint8_t *orig = NULL;
    size_t n = 0;
    if (folio_read_file(path, 1u << 28, &orig, &n, &e) != 0 || n < 168) {
        CHECK(0, "cache file %s: %s", path, e.msg);
        return;
    }
    struct {
        const char *what, *reason;
        size_t off; /* byte to flip; SIZE_MAX = truncate */
    } bad[] = {
        {"corrupted blob", "checksum", n - 5},
        {"truncated", "size mismatch", SIZE_MAX},
        {"foreign device", "another device", 16},
        {"other driver", "driver version", 40},
        {"stale shaders", "stale", 68},
        {"bad magic", "magic", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *d = malloc(n);
        memcpy(d, orig, n);
        size_t len = n;
        if (bad[i].off == SIZE_MAX)
            len = n - 10;
        else
            d[bad[i].off] ^= 0x5a;
        CHECK(folio_write_file_atomic(path, d, len, &e) == 0, "write: %s", e.msg);
        free(d);
        vk = open_dev(test_device(), dir, 0, &e);
        CHECK(vk != NULL, "open with %s cache: %s", bad[i].what, e.msg);
        if (!vk)
            continue;
        vkr_get_stats(vk, &s);
        CHECK(s.cache_hit == 0 && strstr(s.cache_miss_reason, bad[i].reason),
              "%s: hit %d reason '%s'", bad[i].what, s.cache_hit, s.cache_miss_reason);
        /* A miss still builds everything. */
        rc = ops_prewarm(vk, &failed, &e);
        CHECK(rc == 0 && failed == 0, "%s: prewarm after miss: %s", bad[i].what, e.msg);
        CHECK(messages(vk) == 0, "validation messages");
        vkr_close(vk);
    }
    free(orig);
}

/* The pre-warm in two halves (vkr_prewarm_start / finish): lookups of a
 * listed pipeline while it builds wait for it and give the answers a
 * finished pre-warm gives; a key not in the list finishes the pre-warm
 * first; an injected failure is counted at finish; close with a pre-warm
 * in flight joins its threads (ASan / the thread checks see the rest). */
static void test_prewarm_background(void)
{
    struct folio_err e = {0};
    struct vkr *vk = open_dev(test_device(), NULL, 0, &e);
    CHECK(vk != NULL, "open: %s", e.msg);
    if (!vk)
        return;
    /* a short list (each a driver compile): the first of the ops' keys,
     * then softmax (the injected failure) and the add kernel */
    struct vkr_pipeline_key keys[24];
    int n = ops_pipeline_keys(vk, keys, 20);
    keys[n++] = ops_softmax_key();
    keys[n++] = ops_elem_key(OP_ADD);
    n = ops_keys_unique(keys, n);
#ifdef FOLIO_FAULT_INJECTION
    setenv("FOLIO_FAULT", "pipeline:softmax", 1);
#endif
    int rc = vkr_prewarm_start(vk, keys, n, &e);
    CHECK(rc == 0, "start: %s", e.msg);
    /* the last listed key (the threads reach it about last): ready, after waiting */
    CHECK(vkr_pipeline_ready(vk, &keys[n - 1]), "last key ready during the pre-warm");
    uint32_t id = 0;
    struct vkr_pipeline_key elem = ops_elem_key(OP_ADD);
    CHECK(vkr_pipeline(vk, &elem, &id, &e) == 0,
          "listed pipeline during the pre-warm: %s", e.msg);
    /* not listed: the pre-warm finishes, then this one is built */
    struct vkr_pipeline_key extra = {.shader = "norm", .nspec = 1, .spec = {7}};
    CHECK(vkr_pipeline(vk, &extra, &id, &e) == 0, "unlisted key: %s", e.msg);
    struct vkr_stats s;
    vkr_get_stats(vk, &s);
    CHECK((int)s.pipelines_built + (int)s.pipelines_failed == n + 1, "built %u failed %u of %d + 1",
          s.pipelines_built, s.pipelines_failed, n);
    int failed = -1;
    CHECK(vkr_prewarm_finish(vk, &failed, &e) == 0 && failed == 0, "finish after it was finished: %d",
          failed);
#ifdef FOLIO_FAULT_INJECTION
    unsetenv("FOLIO_FAULT");
    CHECK(s.pipelines_failed == 1, "the injected failure: %u failed", s.pipelines_failed);
    struct vkr_pipeline_key sm = ops_softmax_key();
    CHECK(!vkr_pipeline_ready(vk, &sm), "the failed pipeline is not ready");
#endif
    vkr_close(vk);

    /* a pre-warm in flight at close */
    vk = open_dev(test_device(), NULL, 0, &e);
    CHECK(vk != NULL, "open: %s", e.msg);
    if (!vk)
        return;
    n = ops_pipeline_keys(vk, keys, 20);
    CHECK(vkr_prewarm_start(vk, keys, n, &e) == 0, "start: %s", e.msg);
    CHECK(vkr_prewarm_start(vk, keys, n, &e) == 0, "a second start finishes the first: %s", e.msg);
    vkr_close(vk);
}

static void test_faults(void)
{
#ifdef FOLIO_FAULT_INJECTION
    struct folio_err e = {0};
    setenv("FOLIO_FAULT", "pipeline:softmax", 1);
    struct vkr *vk = open_dev(test_device(), NULL, 0, &e);
    CHECK(vk != NULL, "open: %s", e.msg);
    if (!vk) {
        unsetenv("FOLIO_FAULT");
        return;
    }
    int failed = -1;
    int rc = ops_prewarm(vk, &failed, &e);
    unsetenv("FOLIO_FAULT");
    CHECK(rc == 0 && failed == 1, "one injected failure: rc %d failed %d", rc, failed);
    vkr_seal(vk);
    struct vkr_arena *a = NULL;
    vkr_arena_create(vk, "a", VKR_ARENA_WEIGHTS, &a, &e);
    struct vkr_tensor x, y;
    vkr_arena_alloc(a, 4096, &x, &e);
    vkr_arena_alloc(a, 4096, &y, &e);
    struct vkr_cmd *c = NULL;
    CHECK(vkr_cmd_begin(vk, &c, &e) == 0, "begin: %s", e.msg);
    rc = op_softmax(c, x, y, 4, 16, 1.0f, &e);
    CHECK(rc == FOLIO_EUNSUPPORTED && strstr(e.msg, "VK_ERROR_INITIALIZATION_FAILED"),
          "disabled pipeline reports the driver result: %d %s", rc, e.msg);
    rc = op_elem(c, &(struct op_elem){.op = OP_SILU, .a = x, .y = y, .n = 64}, &e);
    CHECK(rc == 0, "other ops still work: %s", e.msg);
    CHECK(vkr_cmd_submit(c, &e) == 0, "submit: %s", e.msg);

    setenv("FOLIO_FAULT", "vk_device_lost", 1);
    c = NULL;
    CHECK(vkr_cmd_begin(vk, &c, &e) == 0, "begin: %s", e.msg);
    op_elem(c, &(struct op_elem){.op = OP_SILU, .a = x, .y = y, .n = 64}, &e);
    rc = vkr_cmd_submit(c, &e);
    unsetenv("FOLIO_FAULT");
    CHECK(rc == FOLIO_EDEVICELOST && vkr_dead(vk), "device lost marks dead: rc %d", rc);
    rc = vkr_cmd_begin(vk, &c, &e);
    CHECK(rc == FOLIO_EDEVICELOST, "dead runtime refuses work: %d", rc);
    rc = vkr_upload(vk, x, 0, "abcd", 4, &e);
    CHECK(rc == FOLIO_EDEVICELOST, "dead runtime refuses uploads: %d", rc);
    vkr_arena_destroy(a);
    CHECK(messages(vk) == 0, "validation messages");
    vkr_close(vk);
#endif
}

/* vkr_seal_save where the cache cannot be written (its folder's parent is
 * a file): the save fails, which only warns; the registry is sealed all the
 * same, and the pre-warmed pipelines serve. */
static void test_seal_save_unwritable(const char *scratch)
{
    char file[512], dir[600];
    snprintf(file, sizeof file, "%s/not-a-folder", scratch);
    snprintf(dir, sizeof dir, "%s/cache", file);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL, "create %s", file);
    if (f)
        fclose(f);
    struct folio_err e = {0};
    struct vkr *vk = open_dev(test_device(), dir, 0, &e);
    CHECK(vk != NULL, "open with an unwritable cache folder: %s", e.msg);
    if (!vk)
        return;
    struct vkr_pipeline_key k = {.shader = "softmax"}, miss = {.shader = "norm", .nspec = 1, .spec = {7}};
    int failed = -1;
    CHECK(vkr_prewarm(vk, &k, 1, &failed, &e) == 0 && failed == 0, "prewarm: %s", e.msg);
    struct folio_err se = {0};
    CHECK(vkr_cache_save(vk, &se) != 0, "saving under a file should fail");
    vkr_seal_save(vk);
    uint32_t id;
    CHECK(vkr_pipeline(vk, &k, &id, &e) == 0, "pre-warmed pipeline after seal_save: %s", e.msg);
    CHECK(vkr_pipeline(vk, &miss, &id, &e) == FOLIO_ESTATE, "seal_save did not seal");
    vkr_close(vk);
}

int main(void)
{
    const char *scratch = tu_scratch("vkr");
    test_selection();
    test_memory();
    test_memory_own_block();
    test_pipelines(scratch);
    test_seal_save_unwritable(scratch);
    test_faults();
    test_prewarm_background();
    return tu_finish();
}
