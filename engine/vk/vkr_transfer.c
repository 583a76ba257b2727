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

/* The staged copies recorded so far, one submission (waits): region i
 * to or from block blk[i], one copy command per run of regions in one
 * block. */
static int flush(struct vkr *vk, const uint32_t *blk, const VkBufferCopy *bc, uint32_t n, int up,
                 struct folio_err *err)
{
    VkCommandBuffer cb;
    int rc = vkr_oneoff_begin(vk, &cb, err);
    if (rc)
        return rc;
    for (uint32_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && blk[j] == blk[i];)
            j++;
        VkBuffer dev = vk->blocks[blk[i]].buf;
        vkCmdCopyBuffer(cb, up ? vk->staging.buf : dev, up ? dev : vk->staging.buf, j - i, bc + i);
    }
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = up ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT
                                              : VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         up ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &mb, 0, NULL, 0, NULL);
    return vkr_oneoff_end(vk, cb, err);
}

/* Copy regions per submission: a gathered upload whose destinations do not
 * run on from each other (a prompt's text rows between its image rows)
 * takes one region per run; past this many it submits early. */
#define MAX_REGIONS 64

int vkr_upload_pieces(struct vkr *vk, const struct vkr_piece *p, uint32_t n, struct folio_err *err)
{
    int rc = vkr_alive(vk, err);
    for (uint32_t i = 0; i < n && !rc; i++)
        rc = check_range(vk, p[i].t, p[i].dst, p[i].len, err);
    if (!rc)
        rc = staging_ready(vk, err);
    if (rc)
        return rc;
    const uint64_t cap = vk->staging.size;
    VkBufferCopy bc[MAX_REGIONS];
    uint32_t blk[MAX_REGIONS], nr = 0;
    uint64_t used = 0; /* staging bytes filled since the last submission */
    for (uint32_t i = 0; i < n && !rc; i++) {
        for (uint64_t done = 0; done < p[i].len && !rc;) {
            uint64_t k = p[i].len - done < cap - used ? p[i].len - done : cap - used;
            uint64_t dst = p[i].t.offset + p[i].dst + done;
            memcpy((unsigned char *)vk->staging_map + used, (const unsigned char *)p[i].src + done,
                   (size_t)k);
            if (nr && blk[nr - 1] == p[i].t.block && bc[nr - 1].dstOffset + bc[nr - 1].size == dst)
                bc[nr - 1].size += k; /* runs on from the previous piece: one region */
            else {
                blk[nr] = p[i].t.block;
                bc[nr++] = (VkBufferCopy){.srcOffset = used, .dstOffset = dst, .size = k};
            }
            used += k;
            done += k;
            if (used == cap || nr == MAX_REGIONS) {
                rc = flush(vk, blk, bc, nr, 1, err);
                nr = 0;
                used = 0;
            }
        }
    }
    if (!rc && nr)
        rc = flush(vk, blk, bc, nr, 1, err);
    return rc;
}

int vkr_upload(struct vkr *vk, struct vkr_tensor t, uint64_t offset, const void *src,
               uint64_t len, struct folio_err *err)
{
    struct vkr_piece one = {.t = t, .dst = offset, .src = src, .len = len};
    return vkr_upload_pieces(vk, &one, 1, err);
}

int vkr_download(struct vkr *vk, struct vkr_tensor t, uint64_t offset, void *dst, uint64_t len,
                 struct folio_err *err)
{
    int rc = vkr_alive(vk, err);
    if (!rc)
        rc = check_range(vk, t, offset, len, err);
    if (!rc)
        rc = staging_ready(vk, err);
    if (rc)
        return rc;
    const uint64_t chunk = vk->staging.size;
    for (uint64_t done = 0; done < len && !rc; done += chunk) {
        uint64_t n = len - done < chunk ? len - done : chunk;
        VkBufferCopy bc = {.srcOffset = t.offset + offset + done, .dstOffset = 0, .size = n};
        rc = flush(vk, &t.block, &bc, 1, 0, err);
        if (!rc)
            memcpy((unsigned char *)dst + done, vk->staging_map, (size_t)n);
    }
    return rc;
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
