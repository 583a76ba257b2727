/*
 * Command recording and submission.
 *
 * A pass (a forward graph, a test, a bench iteration) is one command
 * buffer: each op records dispatches with push descriptors (or, on devices
 * without VK_KHR_push_descriptor, sets from a per-pass pool) and push
 * constants, and a compute->compute memory barrier separates a dispatch
 * from the work before it. The pass is submitted once and waited on with
 * one fence; there is no per-op vkQueueWaitIdle. Optional timestamps
 * bracket every dispatch and are read back after the fence.
 *
 * The barrier is deliberately global and unconditional: ops are chained
 * through shared arenas, and tracking hazards per range costs more
 * (in bugs) than a barrier costs in time at these dispatch sizes.
 */
#include "common/fault.h"
#include "engine/vk/vkr_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TS_MAX 4096
#define FALLBACK_SETS 2048

struct vkr_cmd {
    struct vkr *vk;
    VkCommandBuffer cb;
    VkDescriptorPool dpool;   /* fallback without push descriptors */
    uint32_t ndisp;
    uint32_t nts;
    struct vkr_timing *labels;
};

int vkr_cmd_init(struct vkr *vk, struct folio_err *err)
{
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT |
                                            VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = vk->qfam};
    VkResult r = vkCreateCommandPool(vk->dev, &pci, &vk->ac, &vk->pool);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkCreateCommandPool", err);
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    r = vkCreateFence(vk->dev, &fci, &vk->ac, &vk->fence);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkCreateFence", err);
    if (vk->cfg.timestamps && vk->feat.timestamps) {
        VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2 * TS_MAX};
        r = vkCreateQueryPool(vk->dev, &qci, &vk->ac, &vk->tsq);
        if (r != VK_SUCCESS)
            return vkr_check(vk, r, "vkCreateQueryPool", err);
        vk->tsq_cap = TS_MAX;
        vk->timings = calloc(TS_MAX, sizeof *vk->timings);
        if (!vk->timings)
            return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    }
    return 0;
}

void vkr_cmd_destroy_all(struct vkr *vk)
{
    if (vk->tsq)
        vkDestroyQueryPool(vk->dev, vk->tsq, &vk->ac);
    if (vk->fence)
        vkDestroyFence(vk->dev, vk->fence, &vk->ac);
    if (vk->pool)
        vkDestroyCommandPool(vk->dev, vk->pool, &vk->ac);
    free(vk->timings);
    vk->timings = NULL;
}

static int alloc_cb(struct vkr *vk, VkCommandBuffer *cb, struct folio_err *err)
{
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = vk->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult r = vkAllocateCommandBuffers(vk->dev, &ai, cb);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkAllocateCommandBuffers", err);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    r = vkBeginCommandBuffer(*cb, &bi);
    if (r != VK_SUCCESS) {
        vkFreeCommandBuffers(vk->dev, vk->pool, 1, cb);
        return vkr_check(vk, r, "vkBeginCommandBuffer", err);
    }
    return 0;
}

/* Ends, submits and waits; frees cb in every case. */
static int submit_wait(struct vkr *vk, VkCommandBuffer cb, struct folio_err *err)
{
    VkResult r = vkEndCommandBuffer(cb);
    int rc = 0;
    if (r != VK_SUCCESS) {
        rc = vkr_check(vk, r, "vkEndCommandBuffer", err);
    } else {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                           .pCommandBuffers = &cb};
        r = folio_fault(FOLIO_FAULT_vk_device_lost, NULL) ? VK_ERROR_DEVICE_LOST
                                        : vkQueueSubmit(vk->queue, 1, &si, vk->fence);
        if (r != VK_SUCCESS) {
            rc = vkr_check(vk, r, "vkQueueSubmit", err);
        } else {
            vk->submits++;
            /* A minute (five on CPU devices, which share cores with
             * everything else) is far beyond any pass folio records; a
             * hang is treated like a lost device. The wait is sliced and
             * the fence polled between slices, which also survives a
             * driver that misses a wake-up. */
            int64_t limit_s = strcmp(vk->info.type, "cpu") == 0 ? 300 : 60;
            int64_t deadline = folio_mono_ns() + limit_s * 1000000000ll;
            for (;;) {
                r = vkWaitForFences(vk->dev, 1, &vk->fence, VK_TRUE, 100000000ull);
                if (r != VK_TIMEOUT)
                    break;
                r = vkGetFenceStatus(vk->dev, vk->fence);
                if (r != VK_NOT_READY)
                    break;
                if (folio_mono_ns() > deadline) {
                    r = VK_TIMEOUT;
                    break;
                }
            }
            if (r == VK_TIMEOUT) {
                vk->dead = 1;
                folio_log(FOLIO_LOG_ERROR, "vk_device_dead", "call=vkWaitForFences result=timeout "
                          "seconds=%lld device=%d", (long long)limit_s, vk->info.index);
                folio_err_set(err, FOLIO_EDEVICELOST, "GPU pass did not finish within %lld s",
                              (long long)limit_s);
                folio_err_hint(err, "the device is hung; the engine must be re-opened");
                rc = FOLIO_EDEVICELOST;
            } else if (r != VK_SUCCESS) {
                rc = vkr_check(vk, r, "vkWaitForFences", err);
            }
            if (rc == 0) {
                r = vkResetFences(vk->dev, 1, &vk->fence);
                if (r != VK_SUCCESS)
                    rc = vkr_check(vk, r, "vkResetFences", err);
            }
        }
    }
    if (rc != FOLIO_EDEVICELOST)
        vkFreeCommandBuffers(vk->dev, vk->pool, 1, &cb);
    return rc;
}

int vkr_oneoff_begin(struct vkr *vk, VkCommandBuffer *cb, struct folio_err *err)
{
    int rc = vkr_alive(vk, err);
    return rc ? rc : alloc_cb(vk, cb, err);
}

int vkr_oneoff_end(struct vkr *vk, VkCommandBuffer cb, struct folio_err *err)
{
    return submit_wait(vk, cb, err);
}

int vkr_cmd_begin(struct vkr *vk, struct vkr_cmd **out, struct folio_err *err)
{
    *out = NULL;
    int rc = vkr_alive(vk, err);
    if (rc)
        return rc;
    struct vkr_cmd *c = calloc(1, sizeof *c);
    if (!c)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    c->vk = vk;
    if (!vk->feat.push_descriptor) {
        VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   .descriptorCount = FALLBACK_SETS * VKR_MAX_BINDINGS};
        VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                          .maxSets = FALLBACK_SETS, .poolSizeCount = 1,
                                          .pPoolSizes = &ps};
        VkResult r = vkCreateDescriptorPool(vk->dev, &dpi, &vk->ac, &c->dpool);
        if (r != VK_SUCCESS) {
            free(c);
            return vkr_check(vk, r, "vkCreateDescriptorPool", err);
        }
    }
    rc = alloc_cb(vk, &c->cb, err);
    if (rc) {
        if (c->dpool)
            vkDestroyDescriptorPool(vk->dev, c->dpool, &vk->ac);
        free(c);
        return rc;
    }
    if (vk->tsq)
        vkCmdResetQueryPool(c->cb, vk->tsq, 0, 2 * vk->tsq_cap);
    *out = c;
    return 0;
}

struct vkr *vkr_cmd_vkr(struct vkr_cmd *c) { return c->vk; }

int vkr_cmd_dispatch(struct vkr_cmd *c, const struct vkr_dispatch *d, struct folio_err *err)
{
    uint32_t pipeline = d->pipeline, push_bytes = d->push_bytes;
    const struct vkr_bind *b = d->b;
    int nb = d->nb;
    const void *push = d->push;
    uint32_t gx = d->groups[0], gy = d->groups[1], gz = d->groups[2];
    const char *label = d->label;
    struct vkr *vk = c->vk;
    int rc = vkr_alive(vk, err);
    if (rc)
        return rc;
    VkPipeline p = vkr_pipeline_handle(vk, pipeline);
    if (!p)
        return folio_err_set(err, FOLIO_EINVAL, "dispatch of unknown pipeline %u", pipeline);
    if (nb < 0 || nb > VKR_MAX_BINDINGS || push_bytes > VKR_PUSH_BYTES || (push_bytes & 3))
        return folio_err_set(err, FOLIO_EINVAL, "dispatch %s: %d bindings, %u push bytes",
                             label, nb, push_bytes);
    if (gx == 0 || gy == 0 || gz == 0)
        return 0;
    if (gx > vk->lim.max_wg_count[0] || gy > vk->lim.max_wg_count[1] || gz > vk->lim.max_wg_count[2])
        return folio_err_set(err, FOLIO_ELIMIT, "dispatch %s of %ux%ux%u groups exceeds the device "
                             "limit %ux%ux%u", label, gx, gy, gz, vk->lim.max_wg_count[0],
                             vk->lim.max_wg_count[1], vk->lim.max_wg_count[2]);
    VkDescriptorBufferInfo bi[VKR_MAX_BINDINGS];
    VkWriteDescriptorSet w[VKR_MAX_BINDINGS];
    for (int i = 0; i < nb; i++) {
        const struct vkr_bind *x = &b[i];
        if (x->t.block >= vk->nblocks || !vk->blocks[x->t.block].in_use)
            return folio_err_set(err, FOLIO_EINVAL, "dispatch %s: binding %d names no block", label, i);
        uint64_t range = x->range ? x->range : x->t.size - x->offset;
        uint64_t start = x->t.offset + x->offset;
        if (x->offset > x->t.size || start % vk->lim.min_ssbo_align != 0 || range == 0 ||
            start + range > vk->blocks[x->t.block].size)
            return folio_err_set(err, FOLIO_EINVAL, "dispatch %s: binding %d at %" PRIu64
                                 " + %" PRIu64 " is misaligned or outside its block", label, i,
                                 start, range);
        if (range > vk->lim.max_range)
            return folio_err_set(err, FOLIO_ELIMIT, "dispatch %s: binding %d spans %" PRIu64
                                 " bytes, over maxStorageBufferRange %" PRIu64
                                 " (ops must dispatch in ranges)", label, i, range, vk->lim.max_range);
        bi[i] = (VkDescriptorBufferInfo){.buffer = vk->blocks[x->t.block].buf, .offset = start,
                                         .range = range};
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstBinding = (uint32_t)i, .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &bi[i]};
    }
    if (c->ndisp > 0) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
        vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    }
    vkCmdBindPipeline(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    if (nb > 0) {
        if (vk->push_desc) {
            vk->push_desc(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, vk->layout, 0, (uint32_t)nb, w);
        } else {
            VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                              .descriptorPool = c->dpool, .descriptorSetCount = 1,
                                              .pSetLayouts = &vk->dsl};
            VkDescriptorSet set;
            VkResult r = vkAllocateDescriptorSets(vk->dev, &ai, &set);
            if (r != VK_SUCCESS)
                return vkr_check(vk, r, "vkAllocateDescriptorSets (pass too long?)", err);
            for (int i = 0; i < nb; i++)
                w[i].dstSet = set;
            vkUpdateDescriptorSets(vk->dev, (uint32_t)nb, w, 0, NULL);
            vkCmdBindDescriptorSets(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, vk->layout, 0, 1, &set,
                                    0, NULL);
        }
    }
    if (push_bytes)
        vkCmdPushConstants(c->cb, vk->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    int ts = vk->tsq && c->nts < vk->tsq_cap;
    if (ts)
        vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, vk->tsq, 2 * c->nts);
    vkCmdDispatch(c->cb, gx, gy, gz);
    if (ts) {
        vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, vk->tsq, 2 * c->nts + 1);
        snprintf(vk->timings[c->nts].label, sizeof vk->timings[0].label, "%s", label ? label : "");
        memcpy(vk->timings[c->nts].groups, d->groups, sizeof d->groups);
        c->nts++;
    }
    c->ndisp++;
    vk->dispatches++;
    struct vkr_pipe *pp = &vk->pipes[pipeline];
    if (!pp->dispatched) {
        pp->dispatched = 1;
        vk->exercised++;
        if (vk->warm) {
            /* the warm-up did not reach this variant: its first use pays
             * the driver's lazy costs here, on the request path */
            vk->first_after_warm++;
            char q[160], sp[8 * VKR_MAX_SPEC + 1] = "";
            for (uint32_t i = 0, o = 0; i < pp->key.nspec && i < VKR_MAX_SPEC && o < sizeof sp - 12; i++)
                o += (uint32_t)snprintf(sp + o, sizeof sp - o, "%s%u", i ? "," : "", pp->key.spec[i]);
            folio_log(FOLIO_LOG_WARN, "vk_pipeline_first_use_after_warm",
                      "shader=%s spec=%s label=%s count=%" PRIu64, pp->key.shader, sp,
                      folio_lq(q, sizeof q, label ? label : ""), vk->first_after_warm);
        }
    }
    return 0;
}

void vkr_cmd_abort(struct vkr_cmd *c)
{
    if (!c)
        return;
    struct vkr *vk = c->vk;
    vkEndCommandBuffer(c->cb);
    vkFreeCommandBuffers(vk->dev, vk->pool, 1, &c->cb);
    if (c->dpool)
        vkDestroyDescriptorPool(vk->dev, c->dpool, &vk->ac);
    free(c);
}

int vkr_cmd_submit(struct vkr_cmd *c, struct folio_err *err)
{
    struct vkr *vk = c->vk;
    if (c->ndisp > 0) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT |
                                               VK_ACCESS_SHADER_READ_BIT};
        vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT |
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             0, 1, &mb, 0, NULL, 0, NULL);
    }
    int rc = submit_wait(vk, c->cb, err);
    vk->ntimings = 0;
    if (rc == 0 && vk->tsq && c->nts > 0) {
        uint64_t *q = malloc(sizeof(uint64_t) * 2 * c->nts);
        if (q && vkGetQueryPoolResults(vk->dev, vk->tsq, 0, 2 * c->nts, sizeof(uint64_t) * 2 * c->nts,
                                       q, sizeof(uint64_t),
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS) {
            for (uint32_t i = 0; i < c->nts; i++)
                vk->timings[i].ms = (double)(q[2 * i + 1] - q[2 * i]) *
                                    (double)vk->lim.timestamp_period_ns / 1e6;
            vk->ntimings = (int)c->nts;
        }
        free(q);
    }
    if (c->dpool)
        vkDestroyDescriptorPool(vk->dev, c->dpool, &vk->ac);
    free(c);
    return rc;
}

int vkr_last_timings(const struct vkr *vk, struct vkr_timing *out, int max)
{
    for (int i = 0; i < vk->ntimings && i < max; i++)
        out[i] = vk->timings[i];
    return vk->ntimings;
}

void vkr_print_timing_breakdown(const struct vkr *vk, FILE *out)
{
    char names[16][48];
    double ms[16] = {0}, total = 0;
    int cnt[16] = {0}, nn = 0;
    for (int i = 0; i < vk->ntimings; i++) {
        const struct vkr_timing *t = &vk->timings[i];
        int j = 0;
        while (j < nn && strcmp(names[j], t->label) != 0)
            j++;
        if (j == nn && nn < 16)
            snprintf(names[nn++], sizeof names[0], "%s", t->label);
        if (j < nn) {
            ms[j] += t->ms;
            cnt[j]++;
        }
        total += t->ms;
    }
    fprintf(out, ",\"dispatches\":%d,\"gpu_ms\":%.3f", vk->ntimings, total);
    for (int j = 0; j < nn; j++)
        fprintf(out, ",\"%s_ms\":%.3f,\"%s_n\":%d", names[j], ms[j], names[j], cnt[j]);
    const char *each = getenv("FOLIO_TIMINGS_EACH");
    if (!each || strcmp(each, "1") != 0)
        return;
    fputs(",\"each\":[", out);
    for (int i = 0; i < vk->ntimings; i++) {
        const struct vkr_timing *t = &vk->timings[i];
        fprintf(out, "%s[\"%s\",%.4f,%u,%u,%u]", i ? "," : "", t->label, t->ms, t->groups[0],
                t->groups[1], t->groups[2]);
    }
    fputc(']', out);
}

int vkr_bind_rows(const struct vkr *vk, struct vkr_tensor t, uint64_t row_bytes, uint64_t r0,
                  uint64_t r1, struct vkr_bind *b, uint32_t *skip, struct folio_err *err)
{
    /* t comes from an arena of this runtime (ops never build tensors by
     * hand): a block index outside the table is a bug in folio, not input */
    assert(t.block < vk->nblocks && vk->blocks[t.block].in_use);
    assert(vk->lim.min_ssbo_align > 0); /* Vulkan guarantees a power of two */
    uint64_t a = vk->lim.min_ssbo_align;
    uint64_t off = r0 * row_bytes;
    uint64_t aligned = off / a * a;
    uint64_t range = ((off - aligned) + (r1 - r0) * row_bytes + 3) & ~(uint64_t)3;
    uint64_t block = vk->blocks[t.block].size;
    if (t.offset + aligned + range > block)
        range = block - t.offset - aligned;
    if (r1 < r0 || r1 * row_bytes > t.size)
        return folio_err_set(err, FOLIO_EINVAL, "rows %" PRIu64 "..%" PRIu64 " outside tensor of %"
                             PRIu64 " bytes", r0, r1, t.size);
    if (range > vk->lim.max_range)
        return folio_err_set(err, FOLIO_ELIMIT, "rows %" PRIu64 "..%" PRIu64 " of %" PRIu64
                             " bytes span %" PRIu64 " bytes, over the binding range %" PRIu64,
                             r0, r1, row_bytes, range, vk->lim.max_range);
    b->t = t;
    b->offset = aligned;
    b->range = range;
    *skip = (uint32_t)(off - aligned);
    return 0;
}

uint64_t vkr_rows_per_range(const struct vkr *vk, uint64_t row_bytes)
{
    uint64_t usable = vk->lim.max_range - vk->lim.min_ssbo_align - 4;
    uint64_t n = row_bytes ? usable / row_bytes : 0;
    return n;
}
