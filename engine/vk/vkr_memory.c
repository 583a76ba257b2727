/*
 * Device memory: blocks, arenas and the staging ring.
 *
 * A block is one VkBuffer on one dedicated VkDeviceMemory of at most
 * limits.block_size bytes (a weight tensor larger than that: a block of
 * its own, up to limits.tensor_max). Tensors are byte ranges inside one block, so
 * code that binds a tensor binds exactly one buffer; the multi-buffer
 * wrapper that broke llama.cpp (#22197) cannot exist here.
 *
 * Arenas place tensors in blocks:
 *  - weights: bump allocation; when a tensor does not fit in the current
 *    block a new block is opened (the tail of the old one is wasted, which
 *    is bounded by the largest tensor and keeps placement O(1)); a tensor
 *    larger than a block (up to limits.tensor_max) gets a block of its own,
 *    placed before the current block so that the bump goes on there;
 *  - activations: vkr_arena_plan() sizes and allocates the blocks once for
 *    the graph's peak; afterwards alloc only bumps inside them and reset
 *    rewinds, so the request path never allocates device memory.
 * Uploads and readbacks (vkr_transfer.c) go through one host-visible
 * staging buffer in chunks, so no host-visible allocation scales with the
 * model.
 */
#include "common/fault.h"
#include "engine/vk/vkr_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *human(uint64_t b, char *buf, size_t n)
{
    if (b >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)b / (double)(1ull << 30));
    else
        snprintf(buf, n, "%.1f MiB", (double)b / (double)(1ull << 20));
    return buf;
}

/* Free bytes per heap (VK_EXT_memory_budget when present, else heap size
 * minus what folio allocated) for out-of-memory messages. */
static void heap_report(struct vkr *vk, char *out, size_t n)
{
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                            .pNext = vk->feat.memory_budget ? &b : NULL};
    vkGetPhysicalDeviceMemoryProperties2(vk->pd, &p2);
    size_t k = 0;
    out[0] = 0;
    for (uint32_t h = 0; h < p2.memoryProperties.memoryHeapCount && k < n; h++) {
        uint64_t size = p2.memoryProperties.memoryHeaps[h].size;
        uint64_t free_b = vk->feat.memory_budget
                              ? (b.heapBudget[h] > b.heapUsage[h] ? b.heapBudget[h] - b.heapUsage[h] : 0)
                              : (size > vk->device_bytes ? size - vk->device_bytes : 0);
        char s1[32], s2[32];
        int w = snprintf(out + k, n - k, "%sheap %u: %s free of %s%s", h ? "; " : "", h,
                         human(free_b, s1, sizeof s1), human(size, s2, sizeof s2),
                         vk->feat.memory_budget ? "" : " (estimate)");
        if (w < 0)
            break;
        k += (size_t)w;
    }
}

static int find_type(struct vkr *vk, uint32_t bits, VkMemoryPropertyFlags want,
                     VkMemoryPropertyFlags avoid)
{
    for (uint32_t i = 0; i < vk->memprops.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = vk->memprops.memoryTypes[i].propertyFlags;
        if ((bits & (1u << i)) && (f & want) == want && !(f & avoid))
            return (int)i;
    }
    return -1;
}

int vkr_block_create(struct vkr *vk, uint64_t size, int host, struct vkr_block *out,
                     struct folio_err *err)
{
    memset(out, 0, sizeof *out);
    char s1[32], s2[32], heaps[400];
    if (size > vk->lim.tensor_max) {
        folio_err_set(err, FOLIO_ELIMIT, "device memory block of %s exceeds the block limit %s",
                      human(size, s1, sizeof s1), human(vk->lim.tensor_max, s2, sizeof s2));
        folio_err_detail(err, "device %d (%s): maxMemoryAllocationSize %" PRIu64
                         ", maxBufferSize %" PRIu64 ", block size %" PRIu64,
                         vk->info.index, vk->info.name, vk->lim.max_alloc, vk->lim.max_buffer,
                         vk->lim.block_size);
        return FOLIO_ELIMIT;
    }
    if (!host && vk->lim.budget && vk->local_bytes + size > vk->lim.budget) {
        folio_err_set(err, FOLIO_ENOMEM, "out of device memory: needed %s more on device %d (%s)",
                      human(size, s1, sizeof s1), vk->info.index, vk->info.name);
        folio_err_detail(err, "its budget FOLIO_VK_DEVICE_BYTES is %" PRIu64 " bytes; folio "
                         "holds %" PRIu64 " in device blocks", vk->lim.budget, vk->local_bytes);
        folio_err_hint(err, "raise the budget, or give the model more devices (--device A,B)");
        return FOLIO_ENOMEM;
    }
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkResult r = vkCreateBuffer(vk->dev, &bci, &vk->ac, &out->buf);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkCreateBuffer", err);
    VkMemoryRequirements mr;
    vkGetBufferMemoryRequirements(vk->dev, out->buf, &mr);
    int ti;
    if (host) {
        VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        ti = find_type(vk, mr.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
        if (ti < 0)
            ti = find_type(vk, mr.memoryTypeBits, hv, 0);
    } else {
        /* Prefer device-local memory the host cannot see (real VRAM on
         * discrete GPUs), then any device-local type (UMA, lavapipe). */
        ti = find_type(vk, mr.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
        if (ti < 0)
            ti = find_type(vk, mr.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
        if (ti < 0)
            ti = find_type(vk, mr.memoryTypeBits, 0, 0);
    }
    if (ti < 0) {
        vkDestroyBuffer(vk->dev, out->buf, &vk->ac);
        out->buf = VK_NULL_HANDLE;
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "no suitable %s memory type on %s",
                             host ? "host-visible" : "device", vk->info.name);
    }
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = mr.size, .memoryTypeIndex = (uint32_t)ti};
    r = folio_fault(FOLIO_FAULT_vk_oom, NULL) ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                            : vkAllocateMemory(vk->dev, &mai, &vk->ac, &out->mem);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(vk->dev, out->buf, &vk->ac);
        out->buf = VK_NULL_HANDLE;
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
            heap_report(vk, heaps, sizeof heaps);
            folio_err_set(err, FOLIO_ENOMEM, "out of %s memory: needed %s more on device %d (%s)",
                          host ? "host-visible" : "device", human(mr.size, s1, sizeof s1),
                          vk->info.index, vk->info.name);
            folio_err_detail(err, "%s; folio holds %s in %u blocks; block limit %" PRIu64, heaps,
                             human(vk->device_bytes, s2, sizeof s2), vk->nblocks, vk->lim.block_size);
            folio_err_hint(err, "use a smaller model or quantisation, lower the image/prompt "
                                "limits, or free the GPU");
            return FOLIO_ENOMEM;
        }
        return vkr_check(vk, r, "vkAllocateMemory", err);
    }
    r = vkBindBufferMemory(vk->dev, out->buf, out->mem, 0);
    if (r != VK_SUCCESS) {
        vkr_block_destroy(vk, out);
        return vkr_check(vk, r, "vkBindBufferMemory", err);
    }
    out->size = size;
    out->heap = vk->memprops.memoryTypes[ti].heapIndex;
    out->host_visible = (vk->memprops.memoryTypes[ti].propertyFlags &
                         VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) != 0;
    out->in_use = 1;
    out->local = !host;
    vk->local_bytes += host ? 0 : size;
    vk->device_bytes += size;
    if (vk->device_bytes > vk->device_bytes_peak)
        vk->device_bytes_peak = vk->device_bytes;
    return 0;
}

void vkr_block_destroy(struct vkr *vk, struct vkr_block *b)
{
    if (b->buf)
        vkDestroyBuffer(vk->dev, b->buf, &vk->ac);
    if (b->mem) {
        vkFreeMemory(vk->dev, b->mem, &vk->ac);
        if (b->local)
            vk->local_bytes -= vk->local_bytes >= b->size ? b->size : vk->local_bytes;
        vk->device_bytes -= vk->device_bytes >= b->size ? b->size : vk->device_bytes;
    }
    memset(b, 0, sizeof *b);
}

int vkr_block_add(struct vkr *vk, uint64_t size, uint32_t *index, struct folio_err *err)
{
    int rc = vkr_alive(vk, err);
    if (rc)
        return rc;
    uint32_t slot = UINT32_MAX;
    for (uint32_t i = 0; i < vk->nblocks; i++)
        if (!vk->blocks[i].in_use) {
            slot = i;
            break;
        }
    if (slot == UINT32_MAX) {
        if (vk->nblocks == vk->cap_blocks) {
            uint32_t cap = vk->cap_blocks ? vk->cap_blocks * 2 : 16;
            struct vkr_block *nb = realloc(vk->blocks, cap * sizeof *nb);
            if (!nb)
                return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
            vk->blocks = nb;
            vk->cap_blocks = cap;
        }
        slot = vk->nblocks++;
        memset(&vk->blocks[slot], 0, sizeof vk->blocks[slot]);
    }
    rc = vkr_block_create(vk, size, 0, &vk->blocks[slot], err);
    if (rc)
        return rc;
    *index = slot;
    return 0;
}

void vkr_block_release(struct vkr *vk, uint32_t index)
{
    /* After a hang or loss, work may still reference the block: wait for
     * the device (a lost one returns at once) before freeing memory. */
    if (vk->dead)
        vkDeviceWaitIdle(vk->dev);
    if (index < vk->nblocks && vk->blocks[index].in_use)
        vkr_block_destroy(vk, &vk->blocks[index]);
}

/* ---- arenas ---- */
struct vkr_arena {
    struct vkr *vk;
    char name[32];
    enum vkr_arena_kind kind;
    int planned;
    uint32_t *blocks;      /* indices into vk->blocks */
    uint64_t *sizes;
    uint32_t nblocks, cap;
    uint32_t cur;          /* block being bumped */
    uint64_t top;          /* bump offset in blocks[cur] */
    uint64_t used;
    uint64_t expect;       /* weights still to come (vkr_arena_expect); 0 = grow */
};

int vkr_arena_create(struct vkr *vk, const char *name, enum vkr_arena_kind kind,
                     struct vkr_arena **out, struct folio_err *err)
{
    struct vkr_arena *a = calloc(1, sizeof *a);
    if (!a)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    a->vk = vk;
    snprintf(a->name, sizeof a->name, "%s", name ? name : "arena");
    a->kind = kind;
    *out = a;
    return 0;
}

void vkr_arena_destroy(struct vkr_arena *a)
{
    if (!a)
        return;
    for (uint32_t i = 0; i < a->nblocks; i++)
        vkr_block_release(a->vk, a->blocks[i]);
    free(a->blocks);
    free(a->sizes);
    free(a);
}

static int arena_new_block(struct vkr_arena *a, uint64_t size, struct folio_err *err)
{
    if (a->nblocks == a->cap) {
        uint32_t cap = a->cap ? a->cap * 2 : 8;
        uint32_t *nb = realloc(a->blocks, cap * sizeof *nb);
        if (!nb)
            return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
        a->blocks = nb;
        uint64_t *ns = realloc(a->sizes, cap * sizeof *ns);
        if (!ns)
            return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
        a->sizes = ns;
        a->cap = cap;
    }
    uint32_t idx;
    int rc = vkr_block_add(a->vk, size, &idx, err);
    if (rc)
        return rc;
    assert(idx < a->vk->nblocks && a->vk->blocks[idx].in_use);
    a->blocks[a->nblocks] = idx;
    a->sizes[a->nblocks] = size;
    a->nblocks++;
    return 0;
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* Records a tensor of `size` bytes (`need` aligned) at `offset` of arena
 * block index `bi`, and counts it against the arena's use and expectation. */
static void arena_place(struct vkr_arena *a, uint32_t bi, uint64_t offset, uint64_t size,
                        uint64_t need, struct vkr_tensor *out)
{
    out->block = bi;
    out->flags = 0;
    out->offset = offset;
    out->size = size;
    a->used += need;
    if (a->expect)
        a->expect = a->expect > need ? a->expect - need : VKR_TENSOR_ALIGN;
}

/* A weight tensor larger than a block: a block of its own, inserted before
 * the block being bumped (blocks before `cur` count as full, so the bump
 * goes on where it was; after a reset every block is bumped again, this one
 * too). */
static int alloc_own_block(struct vkr_arena *a, uint64_t need, uint64_t size,
                           struct vkr_tensor *out, struct folio_err *err)
{
    int rc = arena_new_block(a, need, err);
    if (rc) {
        if (err)
            folio_err_prefix(err, "arena %s: ", a->name);
        return rc;
    }
    uint32_t last = a->nblocks - 1, at = a->cur < last ? a->cur : last;
    uint32_t bi = a->blocks[last];
    uint64_t bsz = a->sizes[last];
    memmove(&a->blocks[at + 1], &a->blocks[at], (size_t)(last - at) * sizeof *a->blocks);
    memmove(&a->sizes[at + 1], &a->sizes[at], (size_t)(last - at) * sizeof *a->sizes);
    a->blocks[at] = bi;
    a->sizes[at] = bsz;
    if (at == last) { /* no block with room was being bumped: this one is full */
        a->cur = last;
        a->top = need;
    } else {
        a->cur = at + 1;
    }
    arena_place(a, bi, 0, size, need, out);
    return 0;
}

int vkr_arena_alloc(struct vkr_arena *a, uint64_t size, struct vkr_tensor *out,
                    struct folio_err *err)
{
    struct vkr *vk = a->vk;
    int rc = vkr_alive(vk, err);
    if (rc)
        return rc;
    char s1[32], s2[32];
    uint64_t need = align_up(size ? size : 4, VKR_TENSOR_ALIGN);
    uint64_t lim = a->kind == VKR_ARENA_WEIGHTS ? vk->lim.tensor_max : vk->lim.block_size;
    if (need > lim) {
        folio_err_set(err, FOLIO_ELIMIT, "tensor of %s in arena %s exceeds the device's %s %s",
                      human(size, s1, sizeof s1), a->name,
                      a->kind == VKR_ARENA_WEIGHTS ? "largest allocation" : "block size",
                      human(lim, s2, sizeof s2));
        folio_err_detail(err, "device %d (%s): maxMemoryAllocationSize %" PRIu64
                         ", maxBufferSize %" PRIu64 "; a tensor never spans blocks",
                         vk->info.index, vk->info.name, vk->lim.max_alloc, vk->lim.max_buffer);
        folio_err_hint(err, "use a smaller quantisation or a device with larger allocations");
        return FOLIO_ELIMIT;
    }
    if (need > vk->lim.block_size)
        return alloc_own_block(a, need, size, out, err);
    /* Advance to a block with room (planned arenas search their blocks;
     * weights open a new one). */
    while (a->cur < a->nblocks && a->top + need > a->sizes[a->cur]) {
        a->cur++;
        a->top = 0;
    }
    if (a->cur >= a->nblocks) {
        if (a->kind == VKR_ARENA_ACTIVATIONS && a->planned) {
            folio_err_set(err, FOLIO_ELIMIT, "activation arena %s exhausted: %s more needed",
                          a->name, human(need, s1, sizeof s1));
            folio_err_detail(err, "planned capacity %s in %u blocks, used %s",
                             human(vkr_arena_capacity(a), s2, sizeof s2), a->nblocks,
                             human(a->used, s1, sizeof s1));
            folio_err_hint(err, "the plan did not cover this graph; this is a bug in the planner");
            return FOLIO_ELIMIT;
        }
        /* Weights grow geometrically from 16 MiB up to the block size, so
         * a tiny test model does not reserve a 1 GiB block and a large one
         * ends up in full-size blocks. */
        uint64_t grow = a->nblocks ? a->sizes[a->nblocks - 1] * 2 : (16u << 20);
        if (a->expect)
            grow = a->expect;
        if (grow > vk->lim.block_size)
            grow = vk->lim.block_size;
        rc = arena_new_block(a, need > grow ? need : grow, err);
        if (rc) {
            if (err)
                folio_err_prefix(err, "arena %s: ", a->name);
            return rc;
        }
        a->cur = a->nblocks - 1;
        a->top = 0;
    }
    /* the block bumped is the arena's, live, and has the room */
    assert(a->cur < a->nblocks && a->blocks[a->cur] < vk->nblocks &&
           vk->blocks[a->blocks[a->cur]].in_use && a->top + need <= a->sizes[a->cur]);
    arena_place(a, a->blocks[a->cur], a->top, size, need, out);
    a->top += need;
    return 0;
}

int vkr_arena_plan(struct vkr_arena *a, const uint64_t *sizes, int n, struct folio_err *err)
{
    if (a->kind != VKR_ARENA_ACTIVATIONS || a->planned)
        return folio_err_set(err, FOLIO_ESTATE, "arena %s: plan only once, on an activation arena",
                             a->name);
    /* Simulate the bump placement to learn each block's size, then
     * allocate exactly those blocks. */
    uint64_t bs = a->vk->lim.block_size, top = 0;
    uint64_t *plan = calloc((size_t)n + 1, sizeof *plan);
    if (!plan)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    int np = 0;
    char s1[32], s2[32];
    for (int i = 0; i < n; i++) {
        uint64_t need = align_up(sizes[i] ? sizes[i] : 4, VKR_TENSOR_ALIGN);
        if (need > bs) {
            free(plan);
            folio_err_set(err, FOLIO_ELIMIT, "activation %d of %s exceeds the device block size %s",
                          i, human(sizes[i], s1, sizeof s1), human(bs, s2, sizeof s2));
            folio_err_hint(err, "lower the image or prompt size limits");
            return FOLIO_ELIMIT;
        }
        if (top + need > bs) {
            plan[np++] = top;
            top = 0;
        }
        top += need;
    }
    if (top || np == 0)
        plan[np++] = top ? top : VKR_TENSOR_ALIGN;
    int rc = 0;
    for (int i = 0; i < np && !rc; i++)
        rc = arena_new_block(a, plan[i], err);
    free(plan);
    if (rc) {
        if (err)
            folio_err_prefix(err, "planning arena %s: ", a->name);
        return rc;
    }
    a->planned = 1;
    a->cur = 0;
    a->top = 0;
    a->used = 0;
    return 0;
}

void vkr_arena_reset(struct vkr_arena *a)
{
    a->cur = 0;
    a->top = 0;
    a->used = 0;
}

uint64_t vkr_arena_used(const struct vkr_arena *a) { return a->used; }
struct vkr *vkr_arena_runtime(const struct vkr_arena *a) { return a->vk; }
uint32_t vkr_arena_blocks(const struct vkr_arena *a) { return a->nblocks; }
uint64_t vkr_arena_capacity(const struct vkr_arena *a)
{
    uint64_t c = 0;
    for (uint32_t i = 0; i < a->nblocks; i++)
        c += a->sizes[i];
    return c;
}

void vkr_arena_expect(struct vkr_arena *a, uint64_t bytes)
{
    a->expect = bytes ? align_up(bytes, VKR_TENSOR_ALIGN) : 0;
}

uint64_t vkr_room(const struct vkr *vk)
{
    uint64_t cap = vk->lim.budget ? vk->lim.budget : vk->lim.device_local_bytes / 20 * 19;
    return cap > vk->local_bytes ? cap - vk->local_bytes : 0;
}

uint64_t vkr_plan_bytes(const struct vkr *vk, enum vkr_arena_kind kind, const uint64_t *sizes,
                        int n)
{
    uint64_t bs = vk->lim.block_size, rem = 0, top = 0, cur = 0, total = 0;
    for (int i = 0; i < n; i++)
        rem += align_up(sizes[i] ? sizes[i] : 4, VKR_TENSOR_ALIGN);
    for (int i = 0; i < n; i++) {
        uint64_t need = align_up(sizes[i] ? sizes[i] : 4, VKR_TENSOR_ALIGN);
        if (kind == VKR_ARENA_ACTIVATIONS) { /* vkr_arena_plan: blocks sized to their content */
            total += need;
            continue;
        }
        if (need > bs) { /* a block of its own; the bump goes on where it was */
            total += need;
            rem -= need;
            continue;
        }
        if (top + need > cur) { /* vkr_arena_alloc with an expectation: a new block */
            uint64_t size = rem < bs ? rem : bs;
            cur = need > size ? need : size;
            total += cur;
            top = 0;
        }
        top += need;
        rem -= need;
    }
    return total;
}
