/*
 * Transfers: uploads, readbacks and fills of tensors. Every copy goes
 * through one host-visible staging block (made on first use, at most
 * VKR_STAGING_BYTES) in chunks, each a one-off command buffer submitted
 * and waited on: loading is not the hot path, and no host-visible
 * allocation grows with the model. Sits above memory (blocks) and cmd
 * (one-off submission); neither calls back into it.
 */
#include "engine/vk/vkr_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- staging ---- */
static int staging_ready(struct vkr *vk, struct folio_err *err)
{
    if (vk->staging.buf)
        return 0;
    uint64_t sz = VKR_STAGING_BYTES;
    if (sz > vk->lim.block_size)
        sz = vk->lim.block_size;
    int rc = vkr_block_create(vk, sz, 1, &vk->staging, err);
    if (rc)
        return rc;
    VkResult r = vkMapMemory(vk->dev, vk->staging.mem, 0, VK_WHOLE_SIZE, 0, &vk->staging_map);
    if (r != VK_SUCCESS) {
        vkr_block_destroy(vk, &vk->staging);
        return vkr_check(vk, r, "vkMapMemory(staging)", err);
    }
    return 0;
}

static int check_range(struct vkr *vk, struct vkr_tensor t, uint64_t off, uint64_t len,
                       struct folio_err *err)
{
    if (t.block >= vk->nblocks || !vk->blocks[t.block].in_use)
        return folio_err_set(err, FOLIO_EINVAL, "tensor refers to block %u, which does not exist",
                             t.block);
    if (off > t.size || len > t.size - off)
        return folio_err_set(err, FOLIO_EINVAL, "copy of %" PRIu64 " bytes at %" PRIu64
                             " is outside a tensor of %" PRIu64 " bytes", len, off, t.size);
    return 0;
}

static int copy(struct vkr *vk, struct vkr_tensor t, uint64_t off, void *host, uint64_t len,
                int up, struct folio_err *err)
{
    int rc = vkr_alive(vk, err);
    if (!rc)
        rc = check_range(vk, t, off, len, err);
    if (!rc)
        rc = staging_ready(vk, err);
    if (rc)
        return rc;
    uint64_t chunk = vk->staging.size;
    for (uint64_t done = 0; done < len;) {
        uint64_t n = len - done < chunk ? len - done : chunk;
        if (up)
            memcpy(vk->staging_map, (const unsigned char *)host + done, (size_t)n);
        VkCommandBuffer cb;
        rc = vkr_oneoff_begin(vk, &cb, err);
        if (rc)
            return rc;
        VkBufferCopy bc = {.srcOffset = up ? 0 : t.offset + off + done,
                           .dstOffset = up ? t.offset + off + done : 0, .size = n};
        VkBuffer dev = vk->blocks[t.block].buf;
        vkCmdCopyBuffer(cb, up ? vk->staging.buf : dev, up ? dev : vk->staging.buf, 1, &bc);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = up ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT
                                                  : VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             up ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : VK_PIPELINE_STAGE_HOST_BIT,
                             0, 1, &mb, 0, NULL, 0, NULL);
        rc = vkr_oneoff_end(vk, cb, err);
        if (rc)
            return rc;
        if (!up)
            memcpy((unsigned char *)host + done, vk->staging_map, (size_t)n);
        done += n;
    }
    return 0;
}

int vkr_upload(struct vkr *vk, struct vkr_tensor t, uint64_t offset, const void *src,
               uint64_t len, struct folio_err *err)
{
    return copy(vk, t, offset, (void *)(uintptr_t)src, len, 1, err);
}

int vkr_download(struct vkr *vk, struct vkr_tensor t, uint64_t offset, void *dst, uint64_t len,
                 struct folio_err *err)
{
    return copy(vk, t, offset, dst, len, 0, err);
}

int vkr_fill(struct vkr *vk, struct vkr_tensor t, uint32_t pattern, struct folio_err *err)
{
    int rc = vkr_alive(vk, err);
    if (!rc)
        rc = check_range(vk, t, 0, t.size, err);
    if (rc)
        return rc;
    VkCommandBuffer cb;
    rc = vkr_oneoff_begin(vk, &cb, err);
    if (rc)
        return rc;
    vkCmdFillBuffer(cb, vk->blocks[t.block].buf, t.offset, (t.size + 3) & ~(uint64_t)3, pattern);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         0, 1, &mb, 0, NULL, 0, NULL);
    return vkr_oneoff_end(vk, cb, err);
}

int vkr_arena_upload(struct vkr_arena *a, const void *src, uint64_t len, struct vkr_tensor *out,
                     struct folio_err *err)
{
    int rc = vkr_arena_alloc(a, len, out, err);
    return rc ? rc : vkr_upload(vkr_arena_runtime(a), *out, 0, src, len, err);
}
