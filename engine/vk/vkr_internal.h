/*
 * vkr internals shared by the runtime's files. Not for ops or callers: they
 * go through vkr.h only.
 */
#ifndef FOLIO_VKR_INTERNAL_H
#define FOLIO_VKR_INTERNAL_H

#include "engine/vk/vkr.h"

#include <pthread.h>
#include <stdatomic.h>
#include <vulkan/vulkan.h>

/* Host memory the driver takes through our callbacks. Atomics because
 * drivers allocate from pre-warm threads too. */
struct vkr_hostmem {
    atomic_uint_fast64_t allocs, frees, now, peak;
};

struct vkr_block {
    VkBuffer buf;
    VkDeviceMemory mem;
    uint64_t size;
    uint32_t heap;
    int host_visible;
    int in_use;
    int local;                /* a device block (counts against the budget), not staging */
};

struct vkr_pipe {
    struct vkr_pipeline_key key;
    char shader[64];          /* key.shader points here */
    VkPipeline pipe;
    VkResult result;          /* VK_SUCCESS or why it is unavailable */
    double create_ms;
    int dispatched;           /* recorded at least once (the warm-up exercised it) */
    atomic_int done;          /* created (or failed): result and pipe are final */
};

struct vkr_warm_job;

struct vkr {
    struct vkr_device_info info;
    struct vkr_limits lim;
    struct vkr_features feat;
    /* VK_NV_cooperative_matrix2's workgroup-scope shapes (granularities and
     * workgroup sizes), for vkr_coopmat2_shape_ok */
    struct vkr_cm2_shape {
        uint32_t mg, ng, kg, threads;
        int kind; /* enum vkr_cm2_kind */
    } cm2[32];
    int ncm2;
    struct vkr_config cfg;
    char cache_dir[512];

    struct vkr_hostmem hostmem;
    VkAllocationCallbacks ac;

    VkInstance inst;
    VkDebugUtilsMessengerEXT messenger;
    atomic_uint_fast64_t validation_messages;
    VkPhysicalDevice pd;
    VkPhysicalDeviceMemoryProperties memprops;
    VkDevice dev;
    uint32_t qfam;
    VkQueue queue;
    int dead;
    int fault_ext;

    PFN_vkCmdPushDescriptorSetKHR push_desc;
    PFN_vkGetDeviceFaultInfoEXT get_fault;

    /* memory */
    struct vkr_block *blocks;
    uint32_t nblocks, cap_blocks;
    uint64_t device_bytes, device_bytes_peak;
    uint64_t local_bytes;       /* device (not staging) blocks: what the budget counts */
    struct vkr_block staging;   /* host-visible ring for uploads/readbacks */
    void *staging_map;

    /* pipelines */
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipelineCache cache;
    struct vkr_pipe *pipes;
    uint32_t npipes, cap_pipes;
    int sealed;
    uint64_t after_seal;
    int warm;                    /* vkr_mark_warm: the warm-up is over */
    uint32_t exercised;          /* distinct pipelines recorded so far */
    uint64_t first_after_warm;   /* pipelines first recorded after the warm-up */
    uint32_t built, failed;
    int cache_hit;
    char cache_miss_reason[96];
    char cache_path[512];
    double prewarm_ms;
    struct vkr_warm_job *job;    /* a background pre-warm in flight (vkr_prewarm_start) */

    /* commands */
    VkCommandPool pool;
    VkFence fence;
    VkQueryPool tsq;
    uint32_t tsq_cap;
    struct vkr_timing *timings;
    int ntimings;
    uint64_t submits, dispatches;
    pthread_mutex_t pipe_mu;     /* registry during parallel pre-warm */
};

/* Checks a VkResult: VK_SUCCESS -> 0. A fatal result marks vk dead, logs
 * VK_EXT_device_fault details when present, and returns FOLIO_EDEVICELOST;
 * other failures return FOLIO_EDEVICE. what names the call. */
int vkr_check(struct vkr *vk, VkResult r, const char *what, struct folio_err *err); /* vkr_result.c */
const char *vkr_result_name(VkResult r);
int vkr_alive(struct vkr *vk, struct folio_err *err);

/* Creates a buffer + dedicated memory (one block). host=1 asks for
 * host-visible coherent memory. Errors carry needed/free/limit numbers. */
int vkr_block_create(struct vkr *vk, uint64_t size, int host, struct vkr_block *out,
                     struct folio_err *err);
void vkr_block_destroy(struct vkr *vk, struct vkr_block *b);
/* Registers a new device block in the runtime's table; returns its index. */
int vkr_block_add(struct vkr *vk, uint64_t size, uint32_t *index, struct folio_err *err);
void vkr_block_release(struct vkr *vk, uint32_t index);
/* The runtime an arena allocates from (vkr_transfer.c's arena upload). */
struct vkr *vkr_arena_runtime(const struct vkr_arena *a);

int vkr_pipelines_init(struct vkr *vk, struct folio_err *err);
void vkr_pipelines_destroy(struct vkr *vk);
VkPipeline vkr_pipeline_handle(struct vkr *vk, uint32_t id);
int vkr_cmd_init(struct vkr *vk, struct folio_err *err);
void vkr_cmd_destroy_all(struct vkr *vk);
/* One-off command buffer for copies: begin, then end+submit+wait. */
int vkr_oneoff_begin(struct vkr *vk, VkCommandBuffer *cb, struct folio_err *err);
int vkr_oneoff_end(struct vkr *vk, VkCommandBuffer cb, struct folio_err *err);

#define VKR_STAGING_BYTES (16u << 20)

#endif
