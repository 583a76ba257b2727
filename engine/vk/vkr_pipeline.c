/*
 * Pipeline registry, pre-warm, seal and the on-disk pipeline cache.
 *
 * Every compute pipeline is identified by (shader, specialization
 * constants). vkr_prewarm() creates a configuration's whole set up front —
 * on several threads, or on one with serial_pipelines for drivers that
 * misbehave under concurrency (RADV #22128) — and vkr_seal() freezes the
 * registry: from then on a request for a pipeline that was not pre-warmed
 * is a bug that fails cleanly and is counted (doctor shows the count),
 * instead of compiling on the request path. A creation failure marks only
 * that key unavailable, with the driver's result, so a bad driver degrades
 * one path rather than the process.
 *
 * All pipelines share one layout: VKR_MAX_BINDINGS storage buffers in set
 * 0 (push descriptors where available) and VKR_PUSH_BYTES of push
 * constants, so recording never switches layouts.
 *
 * The driver's VkPipelineCache blob is persisted behind folio's own header
 * (magic, format, device UUID, vendor/device id, driver version, pipeline
 * cache UUID, hash of the embedded SPIR-V set, size, checksum). The driver
 * only validates part of this (Impeller's note: driver_version is missing
 * from its checks), so anything that does not match exactly is a clean
 * miss with a logged reason. Writes go through temp file + rename.
 */
#include "common/fault.h"
#include "engine/vk/vkr_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern const struct folio_blob_entry folio_spirv[];
extern const size_t folio_spirv_count;

#define CACHE_MAGIC "FOLIOPC"
#define CACHE_FORMAT 1u
#define CACHE_MAX_BYTES (512u << 20)

struct cache_hdr {
    char magic[8];
    uint32_t format;
    uint32_t header_bytes;
    uint8_t device_uuid[16];
    uint32_t vendor_id, device_id, driver_version, reserved;
    uint8_t pipeline_cache_uuid[16];
    uint8_t spirv_hash[32];
    uint64_t blob_bytes;
    uint8_t blob_sha256[32];
};

static const struct folio_blob_entry *find_spirv(const char *shader)
{
    char want[96];
    if (snprintf(want, sizeof want, "%s.spv", shader) >= (int)sizeof want)
        return NULL;
    for (size_t i = 0; i < folio_spirv_count; i++)
        if (strcmp(folio_spirv[i].name, want) == 0)
            return &folio_spirv[i];
    return NULL;
}

int vkr_has_shader(const char *shader) { return find_spirv(shader) != NULL; }

static void spirv_set_hash(uint8_t out[32])
{
    /* Hash of (name, size, sha256(data)) over the set: cheap to combine. */
    size_t n = folio_spirv_count;
    uint8_t *buf = calloc(n ? n : 1, 96 + 8 + 32);
    if (!buf) {
        memset(out, 0, 32);
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char name[96] = {0};
        snprintf(name, sizeof name, "%s", folio_spirv[i].name);
        memcpy(buf + k, name, 96);
        k += 96;
        uint64_t sz = folio_spirv[i].size;
        memcpy(buf + k, &sz, 8);
        k += 8;
        folio_sha256(folio_spirv[i].data, folio_spirv[i].size, buf + k);
        k += 32;
    }
    folio_sha256(buf, k, out);
    free(buf);
}

static void device_cache_identity(struct vkr *vk, struct cache_hdr *h)
{
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(vk->pd, &p);
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CACHE_MAGIC, 8);
    h->format = CACHE_FORMAT;
    h->header_bytes = sizeof *h;
    memcpy(h->device_uuid, vk->info.uuid, 16);
    h->vendor_id = p.vendorID;
    h->device_id = p.deviceID;
    h->driver_version = p.driverVersion;
    memcpy(h->pipeline_cache_uuid, p.pipelineCacheUUID, 16);
    spirv_set_hash(h->spirv_hash);
}

/* Validates file bytes against this device; returns NULL (the driver blob)
 * with *reason set on any mismatch. */
static const uint8_t *cache_validate(struct vkr *vk, const uint8_t *d, size_t n, size_t *blob_n,
                                     const char **reason)
{
    struct cache_hdr want, got;
    device_cache_identity(vk, &want);
    if (n < sizeof got) {
        *reason = "truncated header";
        return NULL;
    }
    memcpy(&got, d, sizeof got);
    if (memcmp(got.magic, CACHE_MAGIC, 8) != 0) {
        *reason = "bad magic";
        return NULL;
    }
    if (got.format != CACHE_FORMAT || got.header_bytes != sizeof got) {
        *reason = "other format version";
        return NULL;
    }
    if (memcmp(got.device_uuid, want.device_uuid, 16) != 0 || got.vendor_id != want.vendor_id ||
        got.device_id != want.device_id) {
        *reason = "written for another device";
        return NULL;
    }
    if (got.driver_version != want.driver_version ||
        memcmp(got.pipeline_cache_uuid, want.pipeline_cache_uuid, 16) != 0) {
        *reason = "written by another driver version";
        return NULL;
    }
    if (memcmp(got.spirv_hash, want.spirv_hash, 32) != 0) {
        *reason = "stale: shaders changed";
        return NULL;
    }
    if (got.blob_bytes != n - sizeof got) {
        *reason = "size mismatch (truncated or extended)";
        return NULL;
    }
    uint8_t sum[32];
    folio_sha256(d + sizeof got, (size_t)got.blob_bytes, sum);
    if (memcmp(sum, got.blob_sha256, 32) != 0) {
        *reason = "checksum mismatch (corrupted)";
        return NULL;
    }
    /* The driver's own header (VkPipelineCacheHeaderVersionOne). */
    const uint8_t *b = d + sizeof got;
    if (got.blob_bytes < 32) {
        *reason = "driver blob too small";
        return NULL;
    }
    uint32_t hsize, hver, vid, did;
    memcpy(&hsize, b, 4);
    memcpy(&hver, b + 4, 4);
    memcpy(&vid, b + 8, 4);
    memcpy(&did, b + 12, 4);
    if (hsize < 32 || hver != VK_PIPELINE_CACHE_HEADER_VERSION_ONE || vid != want.vendor_id ||
        did != want.device_id || memcmp(b + 16, want.pipeline_cache_uuid, 16) != 0) {
        *reason = "driver blob header mismatch";
        return NULL;
    }
    *blob_n = (size_t)got.blob_bytes;
    return b;
}

static void cache_load(struct vkr *vk)
{
    vk->cache_hit = -1;
    const uint8_t *blob = NULL;
    size_t blob_n = 0;
    uint8_t *data = NULL;
    size_t n = 0;
    const char *reason = "disabled";
    if (vk->cache_dir[0]) {
        if (folio_snprintf(vk->cache_path, sizeof vk->cache_path, "%s/pipelines-%s.bin",
                           vk->cache_dir, vk->info.uuid_hex) != 0) {
            vk->cache_path[0] = 0;
        } else {
            vk->cache_hit = 0;
            struct folio_err e = {0};
            if (access(vk->cache_path, F_OK) != 0)
                reason = "no file";
            else if (folio_read_file(vk->cache_path, CACHE_MAX_BYTES, &data, &n, &e) != 0)
                reason = "unreadable";
            else
                blob = cache_validate(vk, data, n, &blob_n, &reason);
        }
    }
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                    .initialDataSize = blob ? blob_n : 0, .pInitialData = blob};
    VkResult r = vkCreatePipelineCache(vk->dev, &ci, &vk->ac, &vk->cache);
    if (r != VK_SUCCESS && blob) {
        reason = "driver rejected the blob";
        blob = NULL;
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vkCreatePipelineCache(vk->dev, &ci, &vk->ac, &vk->cache);
    }
    if (r != VK_SUCCESS)
        vk->cache = VK_NULL_HANDLE; /* pipelines are still created, uncached */
    if (blob) {
        vk->cache_hit = 1;
        vk->cache_miss_reason[0] = 0;
    } else {
        snprintf(vk->cache_miss_reason, sizeof vk->cache_miss_reason, "%s", reason);
    }
    char q[600];
    folio_log(FOLIO_LOG_INFO, "vk_pipeline_cache", "path=%s result=%s reason=%s bytes=%zu",
              folio_lq(q, sizeof q, vk->cache_path[0] ? vk->cache_path : "-"),
              vk->cache_hit > 0 ? "hit" : vk->cache_hit == 0 ? "miss" : "disabled",
              folio_lq(q + 500, 100, blob ? "-" : reason), n);
    free(data);
}

int vkr_cache_save(struct vkr *vk, struct folio_err *err)
{
    int rc0 = vkr_prewarm_finish(vk, NULL, err); /* the cache holds whatever was built */
    if (rc0)
        return rc0;
    if (!vk->cache || !vk->cache_path[0])
        return 0;
    size_t n = 0;
    VkResult r = vkGetPipelineCacheData(vk->dev, vk->cache, &n, NULL);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkGetPipelineCacheData", err);
    uint8_t *buf = malloc(sizeof(struct cache_hdr) + n);
    if (!buf)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory saving the pipeline cache");
    r = vkGetPipelineCacheData(vk->dev, vk->cache, &n, buf + sizeof(struct cache_hdr));
    if (r != VK_SUCCESS) {
        free(buf);
        return vkr_check(vk, r, "vkGetPipelineCacheData", err);
    }
    struct cache_hdr h;
    device_cache_identity(vk, &h);
    h.blob_bytes = n;
    folio_sha256(buf + sizeof h, n, h.blob_sha256);
    memcpy(buf, &h, sizeof h);
    int rc = folio_mkdirs(vk->cache_dir, err);
    if (!rc)
        rc = folio_write_file_atomic(vk->cache_path, buf, sizeof h + n, err);
    free(buf);
    if (rc && err)
        folio_err_prefix(err, "saving the pipeline cache: ");
    return rc;
}

void vkr_seal_save(struct vkr *vk)
{
    vkr_seal(vk);
    struct folio_err e = {0};
    if (vkr_cache_save(vk, &e) != 0) {
        char q[300];
        folio_log(FOLIO_LOG_WARN, "vk_cache_save_failed", "msg=%s", folio_lq(q, sizeof q, e.msg));
    }
}

int vkr_pipelines_init(struct vkr *vk, struct folio_err *err)
{
    VkDescriptorSetLayoutBinding b[VKR_MAX_BINDINGS];
    for (uint32_t i = 0; i < VKR_MAX_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = vk->feat.push_descriptor ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
        .bindingCount = VKR_MAX_BINDINGS, .pBindings = b};
    VkResult r = vkCreateDescriptorSetLayout(vk->dev, &dci, &vk->ac, &vk->dsl);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkCreateDescriptorSetLayout", err);
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0,
                               .size = VKR_PUSH_BYTES};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1, .pSetLayouts = &vk->dsl,
                                      .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
    r = vkCreatePipelineLayout(vk->dev, &lci, &vk->ac, &vk->layout);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkCreatePipelineLayout", err);
    cache_load(vk);
    return 0;
}

/* Threads that create pipelines at pre-warm: one per CPU up to this (the
 * H100 machine's 16 cores: 84 pipelines, 50 s of driver compile in all). */
#define PREWARM_THREADS 16

/* A pre-warm: its new pipelines in the order they are taken, and the
 * threads taking them. */
struct vkr_warm_job {
    struct vkr *vk;
    uint32_t *ids;
    uint32_t n;
    atomic_uint next;
    pthread_t th[PREWARM_THREADS];
    int started;
    double t0, end_ms[PREWARM_THREADS + 1]; /* when each thread ran out of work */
    atomic_int slot;
};

void vkr_pipelines_destroy(struct vkr *vk)
{
    /* a pre-warm in flight: its threads take nothing more and are joined
     * before anything they use goes away */
    if (vk->job) {
        atomic_store(&vk->job->next, vk->job->n);
        for (int t = 0; t < vk->job->started; t++)
            pthread_join(vk->job->th[t], NULL);
        free(vk->job->ids);
        free(vk->job);
        vk->job = NULL;
    }
    for (uint32_t i = 0; i < vk->npipes; i++)
        if (vk->pipes[i].pipe)
            vkDestroyPipeline(vk->dev, vk->pipes[i].pipe, &vk->ac);
    free(vk->pipes);
    vk->pipes = NULL;
    vk->npipes = 0;
    if (vk->cache)
        vkDestroyPipelineCache(vk->dev, vk->cache, &vk->ac);
    if (vk->layout)
        vkDestroyPipelineLayout(vk->dev, vk->layout, &vk->ac);
    if (vk->dsl)
        vkDestroyDescriptorSetLayout(vk->dev, vk->dsl, &vk->ac);
}

int vkr_pipeline_key_equal(const struct vkr_pipeline_key *a, const struct vkr_pipeline_key *b)
{
    if (a->nspec != b->nspec || strcmp(a->shader, b->shader) != 0)
        return 0;
    for (uint32_t i = 0; i < a->nspec; i++)
        if (a->spec[i] != b->spec[i])
            return 0;
    return 1;
}

static int find_pipe(const struct vkr *vk, const struct vkr_pipeline_key *k)
{
    for (uint32_t i = 0; i < vk->npipes; i++)
        if (vkr_pipeline_key_equal(&vk->pipes[i].key, k))
            return (int)i;
    return -1;
}

static void key_str(const struct vkr_pipeline_key *k, char *out, size_t n)
{
    size_t w = (size_t)snprintf(out, n, "%s", k->shader);
    for (uint32_t i = 0; i < k->nspec && w < n; i++)
        w += (size_t)snprintf(out + w, n - w, "%s%u", i ? "," : "[", k->spec[i]);
    if (k->nspec && w < n)
        snprintf(out + w, n - w, "]");
}

/* Adds an entry (not yet created). Single-threaded. */
static int add_pipe(struct vkr *vk, const struct vkr_pipeline_key *k, uint32_t *id,
                    struct folio_err *err)
{
    if (k->nspec > VKR_MAX_SPEC || !k->shader || strlen(k->shader) >= sizeof vk->pipes[0].shader)
        return folio_err_set(err, FOLIO_EINVAL, "bad pipeline key");
    if (vk->npipes == vk->cap_pipes) {
        uint32_t cap = vk->cap_pipes ? vk->cap_pipes * 2 : 64;
        struct vkr_pipe *np = realloc(vk->pipes, cap * sizeof *np);
        if (!np)
            return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
        vk->pipes = np;
        vk->cap_pipes = cap;
        /* key.shader points into each entry: re-point after the move. */
        for (uint32_t i = 0; i < vk->npipes; i++)
            vk->pipes[i].key.shader = vk->pipes[i].shader;
    }
    struct vkr_pipe *p = &vk->pipes[vk->npipes];
    memset(p, 0, sizeof *p);
    p->key = *k;
    snprintf(p->shader, sizeof p->shader, "%s", k->shader);
    p->key.shader = p->shader;
    p->result = VK_NOT_READY;
    atomic_init(&p->done, 0);
    *id = vk->npipes++;
    return 0;
}

/* Creates pipes[id]; thread-safe with respect to other ids. */
static void create_pipe_now(struct vkr *vk, uint32_t id)
{
    struct vkr_pipe *p = &vk->pipes[id];
    double t0 = folio_mono_ms();
    const struct folio_blob_entry *spv = find_spirv(p->shader);
    if (!spv) {
        p->result = VK_ERROR_INITIALIZATION_FAILED;
        return;
    }
    if (folio_fault(FOLIO_FAULT_pipeline, p->shader)) {
        p->result = VK_ERROR_INITIALIZATION_FAILED;
        return;
    }
    VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = spv->size,
                                     .pCode = (const uint32_t *)(const void *)spv->data};
    VkShaderModule sm;
    VkResult r = vkCreateShaderModule(vk->dev, &smci, &vk->ac, &sm);
    if (r != VK_SUCCESS) {
        p->result = r;
        return;
    }
    VkSpecializationMapEntry me[VKR_MAX_SPEC];
    for (uint32_t i = 0; i < p->key.nspec; i++)
        me[i] = (VkSpecializationMapEntry){.constantID = i, .offset = i * 4, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = p->key.nspec, .pMapEntries = me,
                               .dataSize = p->key.nspec * 4, .pData = p->key.spec};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = sm, .pName = "main",
                  .pSpecializationInfo = p->key.nspec ? &si : NULL},
        .layout = vk->layout};
    r = vkCreateComputePipelines(vk->dev, vk->cache, 1, &ci, &vk->ac, &p->pipe);
    vkDestroyShaderModule(vk->dev, sm, &vk->ac);
    if (r != VK_SUCCESS)
        p->pipe = VK_NULL_HANDLE;
    p->result = r;
    p->create_ms = folio_mono_ms() - t0;
}

/* create_pipe_now, then published: a thread that sees done sees the result
 * and the handle. */
static void create_pipe(struct vkr *vk, uint32_t id)
{
    create_pipe_now(vk, id);
    atomic_store_explicit(&vk->pipes[id].done, 1, memory_order_release);
}

/* Waits until pipes[i] is created (a background pre-warm builds it). The
 * array does not move while a pre-warm is in flight: nothing is added
 * before it is finished (vkr_pipeline). */
static void wait_pipe(const struct vkr *vk, int i)
{
    struct vkr_pipe *p = &vk->pipes[i];
    while (!atomic_load_explicit(&p->done, memory_order_acquire)) {
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void account(struct vkr *vk, uint32_t id)
{
    struct vkr_pipe *p = &vk->pipes[id];
    char ks[160];
    key_str(&p->key, ks, sizeof ks);
    if (p->result == VK_SUCCESS) {
        vk->built++;
        folio_log(FOLIO_LOG_DEBUG, "vk_pipeline_built", "key=%s ms=%.2f", ks, p->create_ms);
    } else {
        vk->failed++;
        folio_log(FOLIO_LOG_ERROR, "vk_pipeline_failed", "key=%s result=%s", ks,
                  vkr_result_name(p->result));
        if (p->result == VK_ERROR_DEVICE_LOST)
            vkr_check(vk, p->result, "vkCreateComputePipelines", NULL);
    }
}

/* 0: a workgroup-scope kernel, 1: a subgroup-matrix one, 2: the rest. */
static int compile_rank(const char *shader)
{
    size_t n = strlen(shader);
    if (n > 4 && strcmp(shader + n - 4, "_cm2") == 0)
        return 0;
    if ((n > 4 && strcmp(shader + n - 4, "_khr") == 0) || (n > 3 && strcmp(shader + n - 3, "_cm") == 0))
        return 1;
    return 2;
}

static void *warm_thread(void *arg)
{
    struct vkr_warm_job *j = arg;
    for (;;) {
        uint32_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n)
            break;
        create_pipe(j->vk, j->ids[i]);
    }
    int me = atomic_fetch_add(&j->slot, 1);
    if (me <= PREWARM_THREADS)
        j->end_ms[me] = folio_mono_ms();
    return NULL;
}

int vkr_prewarm_start(struct vkr *vk, const struct vkr_pipeline_key *keys, int n,
                      struct folio_err *err)
{
    int rc = vkr_alive(vk, err);
    if (rc)
        return rc;
    if (vk->sealed)
        return folio_err_set(err, FOLIO_ESTATE, "pre-warm after seal: the registry is frozen");
    if (vk->job && (rc = vkr_prewarm_finish(vk, NULL, err)) != 0) /* one at a time */
        return rc;
    struct vkr_warm_job *job = calloc(1, sizeof *job);
    uint32_t *ids = calloc((size_t)(n > 0 ? n : 1), sizeof *ids);
    if (!job || !ids) {
        free(job);
        free(ids);
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    }
    job->t0 = folio_mono_ms();
    uint32_t nnew = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (find_pipe(vk, &keys[i]) >= 0)
            continue;
        uint32_t id;
        if (!find_spirv(keys[i].shader))
            rc = folio_err_set(err, FOLIO_EINVAL, "shader '%s' is not embedded in this build",
                               keys[i].shader);
        else if ((rc = add_pipe(vk, &keys[i], &id, err)) == 0)
            ids[nnew++] = id;
    }
    if (rc) { /* the entries added so far stay, marked failed (never waited on) */
        for (uint32_t i = 0; i < nnew; i++) {
            vk->pipes[ids[i]].result = VK_ERROR_INITIALIZATION_FAILED;
            atomic_store(&vk->pipes[ids[i]].done, 1);
        }
        free(ids);
        free(job);
        return rc;
    }
    /* Longest first: the workgroup-scope kernels take the driver seconds
     * each (H100, cold: flash_attn_cm2 3.7-5.2 s, gemm_cm2 2.3-3.0 s, the
     * subgroup GEMMs up to 1 s, most others tens of ms), so started last they
     * would set the whole pre-warm's length. */
    uint32_t w = 0;
    for (int rank = 0; rank < 3; rank++)
        for (uint32_t i = w; i < nnew; i++)
            if (compile_rank(vk->pipes[ids[i]].shader) == rank) {
                uint32_t x = ids[w];
                ids[w++] = ids[i];
                ids[i] = x;
            }
    job->vk = vk;
    job->ids = ids;
    job->n = nnew;
    atomic_init(&job->next, 0);
    atomic_init(&job->slot, 0);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = vk->cfg.threads > 0 ? vk->cfg.threads
                                 : (int)(cpus > PREWARM_THREADS ? PREWARM_THREADS : cpus < 1 ? 1 : cpus);
    if (!vk->cfg.serial_pipelines && nt > 1 && nnew >= 2)
        for (int t = 0; t < nt && t < PREWARM_THREADS; t++) {
            if (pthread_create(&job->th[t], NULL, warm_thread, job) != 0)
                break;
            job->started++;
        }
    if (job->started == 0) /* serial: every pipeline here, now */
        warm_thread(job);
    vk->job = job;
    return 0;
}

int vkr_prewarm_finish(struct vkr *vk, int *failed, struct folio_err *err)
{
    struct vkr_warm_job *job = vk->job;
    if (failed)
        *failed = 0;
    if (!job)
        return vkr_alive(vk, err);
    double tw = folio_mono_ms();
    for (int t = 0; t < job->started; t++)
        pthread_join(job->th[t], NULL);
    vk->job = NULL;
    int nfail = 0;
    for (uint32_t i = 0; i < job->n; i++) {
        account(vk, job->ids[i]);
        if (vk->pipes[job->ids[i]].result != VK_SUCCESS)
            nfail++;
    }
    /* the compile's own length: until the last thread ran out of work */
    double end = job->t0;
    int ended = atomic_load(&job->slot);
    for (int t = 0; t < ended && t <= PREWARM_THREADS; t++)
        end = job->end_ms[t] > end ? job->end_ms[t] : end;
    vk->prewarm_ms += end - job->t0;
    folio_log(FOLIO_LOG_INFO, "vk_prewarm", "created=%u failed=%d total=%u ms=%.1f waited_ms=%.1f serial=%d",
              job->n, nfail, vk->npipes, end - job->t0, folio_mono_ms() - tw, job->started == 0);
    free(job->ids);
    free(job);
    if (failed)
        *failed = nfail;
    return vkr_alive(vk, err);
}

int vkr_prewarm(struct vkr *vk, const struct vkr_pipeline_key *keys, int n, int *failed,
                struct folio_err *err)
{
    int rc = vkr_prewarm_start(vk, keys, n, err);
    if (rc) {
        if (failed)
            *failed = 0;
        return rc;
    }
    return vkr_prewarm_finish(vk, failed, err);
}

void vkr_seal(struct vkr *vk)
{
    struct folio_err e = {0};
    (void)vkr_prewarm_finish(vk, NULL, &e); /* a pre-warm still in flight: its failures are logged */
    vk->sealed = 1;
    folio_log(FOLIO_LOG_INFO, "vk_sealed", "pipelines=%u failed=%u", vk->built, vk->failed);
}

void vkr_mark_warm(struct vkr *vk)
{
    vk->warm = 1;
    folio_log(FOLIO_LOG_INFO, "vk_warm", "pipelines=%u exercised=%u", vk->built, vk->exercised);
}

int vkr_pipeline_ready(const struct vkr *vk, const struct vkr_pipeline_key *key)
{
    int i = find_pipe(vk, key);
    if (i < 0)
        return 0;
    wait_pipe(vk, i); /* a background pre-warm may still be building it */
    return vk->pipes[i].result == VK_SUCCESS && vk->pipes[i].pipe != VK_NULL_HANDLE;
}

int vkr_pipeline(struct vkr *vk, const struct vkr_pipeline_key *key, uint32_t *id,
                 struct folio_err *err)
{
    int rc = vkr_alive(vk, err);
    if (rc)
        return rc;
    int i = find_pipe(vk, key);
    char ks[160];
    if (i < 0) {
        key_str(key, ks, sizeof ks);
        if (vk->sealed) {
            vk->after_seal++;
            folio_log(FOLIO_LOG_ERROR, "vk_pipeline_after_seal", "key=%s count=%" PRIu64, ks,
                      vk->after_seal);
            folio_err_set(err, FOLIO_ESTATE, "pipeline %s was not pre-warmed", ks);
            folio_err_hint(err, "the pre-warm list misses this pipeline: a bug; the request "
                                "fails instead of compiling on the request path");
            return FOLIO_ESTATE;
        }
        if (!find_spirv(key->shader))
            return folio_err_set(err, FOLIO_EINVAL, "shader '%s' is not embedded in this build",
                                 key->shader);
        /* adding moves the array: not while pre-warm threads use it */
        if ((rc = vkr_prewarm_finish(vk, NULL, err)) != 0)
            return rc;
        uint32_t nid;
        rc = add_pipe(vk, key, &nid, err);
        if (rc)
            return rc;
        create_pipe(vk, nid);
        account(vk, nid);
        i = (int)nid;
    }
    wait_pipe(vk, i);
    struct vkr_pipe *p = &vk->pipes[i];
    if (p->result != VK_SUCCESS) {
        key_str(key, ks, sizeof ks);
        folio_err_set(err, FOLIO_EUNSUPPORTED, "pipeline %s is unavailable: creation failed with %s",
                      ks, vkr_result_name(p->result));
        folio_err_hint(err, "the driver could not build this shader; paths that need it are off");
        return FOLIO_EUNSUPPORTED;
    }
    *id = (uint32_t)i;
    return 0;
}

VkPipeline vkr_pipeline_handle(struct vkr *vk, uint32_t id)
{
    return id < vk->npipes ? vk->pipes[id].pipe : VK_NULL_HANDLE;
}
