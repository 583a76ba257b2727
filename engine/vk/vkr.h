/*
 * vkr — folio's Vulkan runtime (docs/DESIGN.md §6.1). One struct vkr owns one
 * logical device and everything made from it: memory blocks and arenas, the
 * pipeline registry (pre-warmed, then sealed), command recording and
 * submission. Only the engine, its ops and its tests include this header.
 *
 * The shape follows ncnn: device, allocators, pipelines and commands are
 * separate concerns in separate files (vkr_device.c, vkr_memory.c,
 * vkr_pipeline.c, vkr_cmd.c); this header is their one public face.
 *
 * Invariants the rest of the engine relies on:
 *  - a tensor is (block, offset, size) inside ONE VkBuffer; nothing ever
 *    straddles two blocks, and no wrapper over several blocks exists;
 *  - no descriptor range exceeds limits.max_range; ops that need more are
 *    dispatched in ranges (vkr_bind_rows helps);
 *  - after vkr_seal() no pipeline is ever created; a request for one that
 *    was not pre-warmed fails and is counted;
 *  - any fatal VkResult (device lost, ...) marks the runtime dead and every
 *    later call fails with FOLIO_EDEVICELOST.
 * A struct vkr is used by one thread at a time (pre-warm's own worker
 * threads excepted).
 */
#ifndef FOLIO_VKR_H
#define FOLIO_VKR_H

#include "common/common.h"

#include <stdint.h>
#include <stdio.h>

struct vkr;

/* ---- devices ---- */
struct vkr_device_info {
    int index;
    char name[256];
    char type[16];          /* "discrete", "integrated", "virtual", "cpu", "other" */
    uint32_t vendor_id, device_id, driver_version, api_version;
    uint8_t uuid[16];
    char uuid_hex[33];
    char driver_name[64];
    char driver_info[128];
};

/* Lists the physical devices the loader sees (at most max). *n gets the
 * total count. Creates and destroys its own instance. */
int vkr_list_devices(struct vkr_device_info *out, int max, int *n, struct folio_err *err);

struct vkr_config {
    /* Device: decimal index, 32-hex-digit UUID (dashes allowed) or a name
     * substring (case-insensitive). NULL/"" = the first discrete or
     * integrated GPU. */
    const char *device;
    int allow_cpu;          /* permit CPU devices (lavapipe); tests set this */
    int validate;           /* 1 on, 0 off, -1 = $FOLIO_VK_VALIDATE */
    int timestamps;         /* record GPU timestamps around every dispatch */
    /* Pipeline cache directory; NULL = $XDG_CACHE_HOME/folio (or
     * ~/.cache/folio); "" = no on-disk cache. */
    const char *cache_dir;
    int serial_pipelines;   /* create pipelines on one thread */
    int threads;            /* pre-warm threads, 0 = online CPUs (max 16) */
    /* Position of this device in a multi-device list (--device A,B): a
     * FOLIO_VK_* limit given as a comma list ("1M,2M") applies its
     * ordinal-th value here; a single value applies to every device. */
    int ordinal;
};

int vkr_open(const struct vkr_config *cfg, struct vkr **out, struct folio_err *err);
/* Sanitized builds: keeps the CPU driver and the validation layer loaded
 * for the whole process so leak reports name them (no-op otherwise). */
void vkr_pin_drivers_for_sanitizers(void);
/* Waits for the device to go idle, saves nothing (see vkr_cache_save). */
void vkr_close(struct vkr *vk);

/* Limits read once at open, after the FOLIO_VK_* environment overrides. */
struct vkr_limits {
    uint64_t max_alloc;       /* maxMemoryAllocationSize (maintenance3) */
    uint64_t max_buffer;      /* maxBufferSize (maintenance4) or max_alloc */
    uint64_t max_range;       /* maxStorageBufferRange */
    uint64_t block_size;      /* min(max_alloc, max_buffer, FOLIO_VK_BLOCK_SIZE or 1 GiB) */
    /* The largest weight tensor: min(max_alloc, max_buffer). One over
     * block_size gets a block of its own (a 7B model's f16 LM head is
     * 1.02 GiB); activation tensors stay within block_size. */
    uint64_t tensor_max;
    uint64_t device_local_bytes; /* size of the largest device-local heap */
    uint64_t budget;          /* FOLIO_VK_DEVICE_BYTES: device blocks beyond it fail as
                               * out of memory (tests of the multi-device planner; the
                               * heap size above and what depends on it stay); 0 = none */
    uint32_t min_ssbo_align;  /* minStorageBufferOffsetAlignment */
    uint32_t max_wg_count[3];
    uint32_t max_wg_invocations;
    uint32_t max_shared;      /* maxComputeSharedMemorySize */
    uint32_t max_push;        /* maxPushConstantsSize */
    uint32_t subgroup_size;
    /* the widths a pipeline's subgroups may take (minSubgroupSize and
     * maxSubgroupSize; both subgroup_size before Vulkan 1.3) */
    uint32_t subgroup_min, subgroup_max;
    uint32_t compute_units;   /* multiprocessors (VK_NV_shader_sm_builtins); 0 = not known */
    float timestamp_period_ns;
    int overridden;           /* 1 when an FOLIO_VK_* variable lowered something */
};

/* Device features the runtime found and enabled. */
struct vkr_features {
    int storage_16bit, float16, int8, subgroup_basic, subgroup_arith, subgroup_shuffle;
    int maintenance4, push_descriptor, memory_budget, device_fault, size_control;
    int coopmat_nv;           /* VK_NV_cooperative_matrix with f16 16x16x16 -> f32 */
    int coopmat_khr;          /* VK_KHR_cooperative_matrix with f16 16x16x16 -> f32, subgroup scope */
    int coopmat_khr_i8;       /* ... and int8 16x16x32 -> int32, subgroup scope */
    int coopmat2_nv;          /* VK_NV_cooperative_matrix2: workgroup scope, flexible dimensions,
                                 tensor addressing and per-element operations */
    int coopmat2_attn;        /* ... and its row reductions and matrix-use conversions, which
                                 flash_attn_cm2's softmax needs */
    int timestamps;           /* the compute queue supports timestamps */
    int validation;           /* validation layer active */
};

const struct vkr_device_info *vkr_device(const struct vkr *vk);
const struct vkr_limits *vkr_limits(const struct vkr *vk);
const struct vkr_features *vkr_features(const struct vkr *vk);
/* Operand kinds of a workgroup-scope product (vkr_coopmat2_shape_ok). */
enum vkr_cm2_kind {
    VKR_CM2_F16_F32 = 0, /* f16 A, B into an f32 accumulator */
    VKR_CM2_F16_F16 = 1, /* f16 A, B into an f16 accumulator */
    VKR_CM2_S8_S32 = 2,  /* int8 A, B into an int32 accumulator */
};
/* 1 when the device runs a workgroup-scope cooperative-matrix product of an
 * m x k A and a k x n B of that kind with `threads` invocations per
 * workgroup (VK_NV_cooperative_matrix2's flexible dimensions: each size a
 * multiple of the driver's granularity, the workgroup exactly its size). */
int vkr_coopmat2_shape_ok(const struct vkr *vk, uint32_t m, uint32_t n, uint32_t k,
                          enum vkr_cm2_kind kind, uint32_t threads);
/* Dead after a fatal device error: every call then fails with FOLIO_EDEVICELOST. */
int vkr_dead(const struct vkr *vk);
/* Marks the runtime lost as a fatal VkResult does (fault-injection tests
 * of engines over several devices: one of them lost). */
void vkr_mark_lost(struct vkr *vk);

struct vkr_stats {
    /* validation messages seen by the debug messenger (warnings + errors) */
    uint64_t validation_messages;
    /* host memory the driver allocated through our VkAllocationCallbacks */
    uint64_t host_allocs, host_frees, host_bytes_now, host_bytes_peak;
    /* device memory */
    uint32_t blocks;
    uint64_t device_bytes, device_bytes_peak;
    /* pipelines */
    uint32_t pipelines_built, pipelines_failed;
    uint64_t pipeline_requests_after_seal; /* must stay 0 */
    /* distinct pipelines recorded into a pass so far, and those recorded for
     * the first time after vkr_mark_warm (a variant the warm-up missed: its
     * first use pays the driver's lazy costs on the request path; must stay 0) */
    uint32_t pipelines_exercised;
    uint64_t first_use_after_warm;
    int sealed;
    int cache_hit;            /* 1 loaded, 0 miss, -1 disabled */
    char cache_miss_reason[96];
    char cache_path[512];
    double prewarm_ms;
    uint64_t submits, dispatches;
};
void vkr_get_stats(const struct vkr *vk, struct vkr_stats *out);

/* Writes limits, features and stats as one JSON object (no newline). */
int vkr_stats_json(const struct vkr *vk, char *buf, size_t n);

/* ---- memory ---- */
/* A tensor: a byte range inside one block. Plain value, copy freely. */
struct vkr_tensor {
    uint32_t block;
    uint32_t flags;
    uint64_t offset;
    uint64_t size;
};

/* The part of t that starts off bytes in and is size bytes long (no
 * bounds check: the caller's plan sized t). */
static inline struct vkr_tensor vkr_view(struct vkr_tensor t, uint64_t off, uint64_t size)
{
    t.offset += off;
    t.size = size;
    return t;
}

/* Arenas place every tensor at a multiple of this (planners count with it). */
#define VKR_TENSOR_ALIGN 256u

enum vkr_arena_kind {
    VKR_ARENA_WEIGHTS,     /* bump, grows block by block, lives with the model */
    VKR_ARENA_ACTIVATIONS, /* planned once (vkr_arena_plan), then reset per pass */
};
struct vkr_arena;

int vkr_arena_create(struct vkr *vk, const char *name, enum vkr_arena_kind kind,
                     struct vkr_arena **out, struct folio_err *err);
/* Frees the arena's blocks. The caller guarantees no work in flight. */
void vkr_arena_destroy(struct vkr_arena *a);
/* Places size bytes (aligned for binding) in the arena. Weights grow by a
 * new block when the current one is full; a planned activation arena never
 * allocates device memory here and fails with FOLIO_ELIMIT instead. */
int vkr_arena_alloc(struct vkr_arena *a, uint64_t size, struct vkr_tensor *out,
                    struct folio_err *err);
/* Activation arenas: allocates blocks once so that a sequence of tensors
 * of these sizes (the graph's peak, in allocation order) fits; afterwards
 * alloc only bumps inside them. */
int vkr_arena_plan(struct vkr_arena *a, const uint64_t *sizes, int n, struct folio_err *err);
/* Rewinds an arena to empty (activations between passes). */
void vkr_arena_reset(struct vkr_arena *a);
uint64_t vkr_arena_used(const struct vkr_arena *a);
uint64_t vkr_arena_capacity(const struct vkr_arena *a);
uint32_t vkr_arena_blocks(const struct vkr_arena *a);
/* Weights arenas: about `bytes` more will be placed; new blocks are sized
 * to that (within the block size) instead of growing geometrically, so a
 * planned split does not strand a half-empty block on a small device. */
void vkr_arena_expect(struct vkr_arena *a, uint64_t bytes);
/* Device bytes of the blocks an arena of this kind would allocate for
 * tensors of these sizes in this order: a planned activation arena, or a
 * weights arena told vkr_arena_expect(the sum) first. Exact, so planners
 * can decide placements before allocating anything. */
uint64_t vkr_plan_bytes(const struct vkr *vk, enum vkr_arena_kind kind, const uint64_t *sizes,
                        int n);
/* Device bytes a planner may still place on this device: the budget
 * (FOLIO_VK_DEVICE_BYTES) or 95 % of the device-local heap, less the
 * device blocks folio holds. */
uint64_t vkr_room(const struct vkr *vk);

/* Host <-> device copies through the staging ring (chunked; waits). */
int vkr_upload(struct vkr *vk, struct vkr_tensor t, uint64_t offset, const void *src,
               uint64_t len, struct folio_err *err);
int vkr_download(struct vkr *vk, struct vkr_tensor t, uint64_t offset, void *dst,
                 uint64_t len, struct folio_err *err);
/* One piece of a gathered upload: len bytes from src to byte dst of
 * tensor t. */
struct vkr_piece {
    struct vkr_tensor t;
    uint64_t dst;
    const void *src;
    uint64_t len;
};
/* Uploads pieces of scattered host memory into tensors: each byte is
 * copied once on the host, straight into staging, and each staging fill is
 * one submission however many pieces and tensors it holds (pieces whose
 * destinations run on from each other share one copy region). For rows
 * gathered in an order of the device's choosing (a tower's patches in
 * window order), rows between rows already on the device (a prompt's text
 * rows), and a pass's inputs together (one submission, not one each). Every
 * piece is checked against its tensor before anything is copied. Waits. */
int vkr_upload_pieces(struct vkr *vk, const struct vkr_piece *p, uint32_t n,
                      struct folio_err *err);
/* Places len bytes in the arena and uploads src there (a weight's whole
 * life at load: vkr_arena_alloc + vkr_upload). */
int vkr_arena_upload(struct vkr_arena *a, const void *src, uint64_t len, struct vkr_tensor *out,
                     struct folio_err *err);
/* Fills a tensor range with a 32-bit pattern (vkCmdFillBuffer; waits). */
int vkr_fill(struct vkr *vk, struct vkr_tensor t, uint32_t pattern, struct folio_err *err);

/* ---- pipelines ---- */
#define VKR_MAX_SPEC 16
#define VKR_MAX_BINDINGS 8
#define VKR_PUSH_BYTES 128

struct vkr_pipeline_key {
    const char *shader;     /* embedded SPIR-V name without ".spv", e.g. "matmul" */
    uint32_t nspec;
    uint32_t spec[VKR_MAX_SPEC]; /* constant_id i = spec[i] */
};

/* Creates every pipeline in keys (deduplicated; parallel unless
 * cfg.serial_pipelines). A creation failure marks that key unavailable with
 * the driver's result and is logged; it does not fail the call.
 * *failed (may be NULL) gets the count of unavailable pipelines. */
int vkr_prewarm(struct vkr *vk, const struct vkr_pipeline_key *keys, int n, int *failed,
                struct folio_err *err);
/* vkr_prewarm in two halves, so that the driver compiles while the caller
 * does other work (a model's weights uploading): start registers the keys
 * and returns with the pipelines building on pre-warm threads; finish
 * waits for them and reports as vkr_prewarm does. Meanwhile every lookup
 * of one of these pipelines (vkr_pipeline, vkr_pipeline_ready) waits for
 * that one pipeline, so callers see the same answers as after a
 * vkr_prewarm; a lookup of a key not in the list, another pre-warm, seal,
 * cache save and close finish the pre-warm first. */
int vkr_prewarm_start(struct vkr *vk, const struct vkr_pipeline_key *keys, int n,
                      struct folio_err *err);
int vkr_prewarm_finish(struct vkr *vk, int *failed, struct folio_err *err);
/* 1 when two keys name the same pipeline (shader and every constant). */
int vkr_pipeline_key_equal(const struct vkr_pipeline_key *a, const struct vkr_pipeline_key *b);
/* After this no pipeline is ever created. */
void vkr_seal(struct vkr *vk);
/* Marks the end of the warm-up: from here a pipeline recorded for the first
 * time is counted (first_use_after_warm) and logged as a warning. */
void vkr_mark_warm(struct vkr *vk);
/* Returns the pipeline's id. Before seal a missing pipeline is created;
 * after seal it fails (FOLIO_ESTATE) and increments the after-seal counter.
 * A key whose creation failed returns FOLIO_EUNSUPPORTED with the result. */
int vkr_pipeline(struct vkr *vk, const struct vkr_pipeline_key *key, uint32_t *id,
                 struct folio_err *err);
/* 1 when this pipeline was created successfully (pre-warmed); no side
 * effects, never creates one: for kernels that exist only for the shapes a
 * model declared. */
int vkr_pipeline_ready(const struct vkr *vk, const struct vkr_pipeline_key *key);
/* 1 when the embedded SPIR-V set holds this shader. */
int vkr_has_shader(const char *shader);
/* Loads/saves the on-disk VkPipelineCache. Open loads it; call save after
 * pre-warm. A bad file of any kind is a clean miss (see stats). */
int vkr_cache_save(struct vkr *vk, struct folio_err *err);
/* The end of a pre-warm: seals the registry, then saves the cache. A save
 * that fails is logged as a warning (vk_cache_save_failed) and costs only
 * the next start's compile, so it is no error of the caller's. */
void vkr_seal_save(struct vkr *vk);

/* ---- commands ---- */
struct vkr_bind {
    struct vkr_tensor t;
    uint64_t offset;        /* from t.offset; multiple of limits.min_ssbo_align */
    uint64_t range;         /* bytes; 0 = to the end of the tensor; <= max_range */
};

struct vkr_cmd;

/* Starts recording a pass (a fresh command buffer). */
int vkr_cmd_begin(struct vkr *vk, struct vkr_cmd **out, struct folio_err *err);
/* Records one dispatch: binds the pipeline, pushes descriptors and push
 * constants, and a compute->compute barrier before it when earlier work
 * in this pass may be writing what it reads. label names it in timings. */
struct vkr_dispatch {
    uint32_t pipeline;         /* vkr_pipeline's id */
    const struct vkr_bind *b;  /* bindings 0 .. nb-1 */
    int nb;
    const void *push;          /* push constants (multiple of 4 bytes) */
    uint32_t push_bytes;
    uint32_t groups[3];        /* workgroups in x, y, z; any 0: nothing is recorded */
    const char *label;         /* the name in timings and errors */
};
int vkr_cmd_dispatch(struct vkr_cmd *c, const struct vkr_dispatch *d, struct folio_err *err);
/* Submits once and waits on a fence. The command buffer is freed; c is
 * invalid afterwards whatever the result. */
int vkr_cmd_submit(struct vkr_cmd *c, struct folio_err *err);
/* Drops a pass without submitting it. */
void vkr_cmd_abort(struct vkr_cmd *c);
struct vkr *vkr_cmd_vkr(struct vkr_cmd *c);

/* GPU time of each dispatch of the last submitted pass (timestamps on). */
struct vkr_timing {
    char label[48];
    double ms;
    uint32_t groups[3]; /* the dispatch's workgroups: tells one GEMM of a layer from the next */
};
/* Copies at most max timings; returns how many the last pass had. */
int vkr_last_timings(const struct vkr *vk, struct vkr_timing *out, int max);
/* Prints the last pass's GPU time summed by dispatch label as JSON object
 * members: `,"dispatches":N,"gpu_ms":T,"<label>_ms":x,"<label>_n":k...`
 * (first 16 labels), for benchmark lines. With FOLIO_TIMINGS_EACH=1 also
 * `,"each":[["label",ms,gx,gy,gz],...]`: every dispatch in recording order
 * with its workgroup counts, so a profile can tell which product of a
 * layer took the time. */
void vkr_print_timing_breakdown(const struct vkr *vk, FILE *out);

/* The offset and range for binding rows [r0, r1) of a tensor of rows of
 * row_bytes: offset aligned down to min_ssbo_align, *skip = bytes to skip
 * in the binding. Fails if that exceeds max_range. */
int vkr_bind_rows(const struct vkr *vk, struct vkr_tensor t, uint64_t row_bytes, uint64_t r0,
                  uint64_t r1, struct vkr_bind *b, uint32_t *skip, struct folio_err *err);
/* Rows per range such that every vkr_bind_rows over that many rows fits. */
uint64_t vkr_rows_per_range(const struct vkr *vk, uint64_t row_bytes);

#endif
