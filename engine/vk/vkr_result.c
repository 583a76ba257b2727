/*
 * Result checking: every VkResult in engine/vk goes through vkr_check,
 * which turns it into a folio error and marks the runtime dead on a lost
 * device (logging the driver's fault report when VK_EXT_device_fault is
 * there); vkr_alive refuses work on a dead runtime. The bottom of the
 * engine/vk layer: device, memory, pipelines, commands and transfers all
 * call it and it calls none of them, so the files form a DAG
 * (docs/ARCHITECTURE.md):
 *     device -> {cmd, memory, pipeline}; transfer -> {cmd, memory};
 *     cmd -> pipeline; all -> result.
 */
#include "engine/vk/vkr_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *vkr_result_name(VkResult r)
{
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_UNKNOWN: return "VK_ERROR_UNKNOWN";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    case VK_PIPELINE_COMPILE_REQUIRED: return "VK_PIPELINE_COMPILE_REQUIRED";
    default: return "VkResult(other)";
    }
}

static void log_device_fault(struct vkr *vk)
{
    if (!vk->get_fault || !vk->dev)
        return;
    VkDeviceFaultCountsEXT counts = {.sType = VK_STRUCTURE_TYPE_DEVICE_FAULT_COUNTS_EXT};
    if (vk->get_fault(vk->dev, &counts, NULL) != VK_SUCCESS)
        return;
    VkDeviceFaultAddressInfoEXT addr[8];
    VkDeviceFaultVendorInfoEXT vend[8];
    if (counts.addressInfoCount > 8)
        counts.addressInfoCount = 8;
    if (counts.vendorInfoCount > 8)
        counts.vendorInfoCount = 8;
    counts.vendorBinarySize = 0;
    VkDeviceFaultInfoEXT info = {.sType = VK_STRUCTURE_TYPE_DEVICE_FAULT_INFO_EXT,
                                 .pAddressInfos = addr, .pVendorInfos = vend};
    VkResult r = vk->get_fault(vk->dev, &counts, &info);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return;
    char q[300];
    folio_log(FOLIO_LOG_ERROR, "vk_device_fault", "description=%s addresses=%u vendor_infos=%u",
              folio_lq(q, sizeof q, info.description), counts.addressInfoCount,
              counts.vendorInfoCount);
    for (uint32_t i = 0; i < counts.addressInfoCount; i++)
        folio_log(FOLIO_LOG_ERROR, "vk_device_fault_address", "type=%d address=0x%" PRIx64,
                  (int)addr[i].addressType, (uint64_t)addr[i].reportedAddress);
    for (uint32_t i = 0; i < counts.vendorInfoCount; i++)
        folio_log(FOLIO_LOG_ERROR, "vk_device_fault_vendor", "code=%" PRIu64 " description=%s",
                  (uint64_t)vend[i].vendorFaultCode, folio_lq(q, sizeof q, vend[i].description));
}

int vkr_check(struct vkr *vk, VkResult r, const char *what, struct folio_err *err)
{
    if (r == VK_SUCCESS)
        return 0;
    int fatal = r == VK_ERROR_DEVICE_LOST || r == VK_ERROR_UNKNOWN;
    if (fatal && vk && !vk->dead) {
        vk->dead = 1;
        folio_log(FOLIO_LOG_ERROR, "vk_device_dead", "call=%s result=%s device=%d", what,
                  vkr_result_name(r), vk->info.index);
        log_device_fault(vk);
    }
    folio_err_set(err, fatal ? FOLIO_EDEVICELOST : FOLIO_EDEVICE, "%s failed: %s (%d)", what,
                  vkr_result_name(r), (int)r);
    if (fatal)
        folio_err_hint(err, "the Vulkan device is lost; the engine must be re-opened "
                            "(the worker falls back for this batch)");
    return fatal ? FOLIO_EDEVICELOST : FOLIO_EDEVICE;
}

int vkr_alive(struct vkr *vk, struct folio_err *err)
{
    if (!vk->dead)
        return 0;
    folio_err_set(err, FOLIO_EDEVICELOST, "Vulkan device %d (%s) is lost", vk->info.index,
                  vk->info.name);
    folio_err_hint(err, "re-open the engine");
    return FOLIO_EDEVICELOST;
}
