/*
 * Build-path smoke test: the embedded smoke_axpb SPIR-V becomes a compute
 * pipeline and dispatches correctly on the test device (lavapipe in CI)
 * under the Khronos validation layer, with zero validation messages.
 * Deliberately raw Vulkan: it checks the toolchain (glslc -> embed ->
 * driver), independent of folio's runtime.
 */
#include "tests/support/testutil.h"
#include "common/common.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

extern const struct folio_blob_entry folio_spirv[];
extern const size_t folio_spirv_count;

static int g_messages = 0;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                               VkDebugUtilsMessageTypeFlagsEXT type,
                                               const VkDebugUtilsMessengerCallbackDataEXT *d,
                                               void *user)
{
    (void)type;
    (void)user;
    if (sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        g_messages++;
        fprintf(stderr, "validation: %s\n", d->pMessage);
    }
    return VK_FALSE;
}

#define VKCHECK(call)                                                                        \
    do {                                                                                     \
        VkResult r_ = (call);                                                                \
        REQUIRE(r_ == VK_SUCCESS, "%s -> %d", #call, r_);                                    \
    } while (0)

static int has_layer(const char *name)
{
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, NULL);
    VkLayerProperties *p = calloc(n ? n : 1, sizeof *p);
    vkEnumerateInstanceLayerProperties(&n, p);
    int found = 0;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(p[i].layerName, name) == 0)
            found = 1;
    free(p);
    return found;
}

int main(void)
{
    const struct folio_blob_entry *spv = NULL;
    for (size_t i = 0; i < folio_spirv_count; i++)
        if (strcmp(folio_spirv[i].name, "smoke_axpb.spv") == 0)
            spv = &folio_spirv[i];
    REQUIRE(spv != NULL, "smoke_axpb.spv not embedded");
    REQUIRE(spv->size % 4 == 0 && ((const uint32_t *)(const void *)spv->data)[0] == 0x07230203u,
            "embedded SPIR-V has a bad magic or size %zu", spv->size);

    const char *layer = "VK_LAYER_KHRONOS_validation";
    REQUIRE(has_layer(layer), "validation layer missing: install vulkan-validationlayers (ops/deps.sh)");
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkDebugUtilsMessengerCreateInfoEXT dbg = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_debug};
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "folio-test", .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pNext = &dbg,
                                .pApplicationInfo = &app, .enabledLayerCount = 1,
                                .ppEnabledLayerNames = &layer, .enabledExtensionCount = 1,
                                .ppEnabledExtensionNames = exts};
    VkInstance inst;
    vkr_pin_drivers_for_sanitizers();
    VKCHECK(vkCreateInstance(&ici, NULL, &inst));
    PFN_vkCreateDebugUtilsMessengerEXT mk =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(inst, "vkCreateDebugUtilsMessengerEXT");
    PFN_vkDestroyDebugUtilsMessengerEXT rm =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(inst, "vkDestroyDebugUtilsMessengerEXT");
    REQUIRE(mk && rm, "debug utils entry points missing");
    VkDebugUtilsMessengerEXT msgr;
    VKCHECK(mk(inst, &dbg, NULL, &msgr));

    const char *want = getenv("FOLIO_TEST_DEVICE");
    if (!want)
        want = "llvmpipe";
    uint32_t nd = 0;
    VKCHECK(vkEnumeratePhysicalDevices(inst, &nd, NULL));
    REQUIRE(nd > 0, "no Vulkan devices (is mesa-vulkan-drivers installed?)");
    VkPhysicalDevice devs[16];
    if (nd > 16)
        nd = 16;
    VKCHECK(vkEnumeratePhysicalDevices(inst, &nd, devs));
    VkPhysicalDevice pd = VK_NULL_HANDLE;
    VkPhysicalDeviceProperties props;
    for (uint32_t i = 0; i < nd; i++) {
        vkGetPhysicalDeviceProperties(devs[i], &props);
        if (strstr(props.deviceName, want)) {
            pd = devs[i];
            break;
        }
    }
    REQUIRE(pd != VK_NULL_HANDLE, "no device whose name contains '%s'", want);
    fprintf(stderr, "device: %s\n", props.deviceName);

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16)
        nq = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
    uint32_t qfi = UINT32_MAX;
    for (uint32_t i = 0; i < nq; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            qfi = i;
            break;
        }
    REQUIRE(qfi != UINT32_MAX, "no compute queue");
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = qfi, .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci};
    VkDevice dev;
    VKCHECK(vkCreateDevice(pd, &dci, NULL, &dev));
    VkQueue q;
    vkGetDeviceQueue(dev, qfi, 0, &q);

    enum { N = 1000 };
    const VkDeviceSize bytes = N * sizeof(float);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    VkBuffer buf[2];
    VkDeviceMemory mem[2];
    float *map[2];
    for (int b = 0; b < 2; b++) {
        VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                                  .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
        VKCHECK(vkCreateBuffer(dev, &bci, NULL, &buf[b]));
        VkMemoryRequirements mr;
        vkGetBufferMemoryRequirements(dev, buf[b], &mr);
        uint32_t ti = UINT32_MAX;
        const VkMemoryPropertyFlags need =
            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
            if ((mr.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & need) == need) {
                ti = i;
                break;
            }
        REQUIRE(ti != UINT32_MAX, "no host-visible coherent memory type");
        VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                    .allocationSize = mr.size, .memoryTypeIndex = ti};
        VKCHECK(vkAllocateMemory(dev, &mai, NULL, &mem[b]));
        VKCHECK(vkBindBufferMemory(dev, buf[b], mem[b], 0));
        void *p;
        VKCHECK(vkMapMemory(dev, mem[b], 0, bytes, 0, &p));
        map[b] = p;
    }
    for (int i = 0; i < N; i++) {
        map[0][i] = (float)i * 0.5f - 7.0f;
        map[1][i] = NAN;
    }

    VkDescriptorSetLayoutBinding binds[2] = {
        {.binding = 0, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1,
         .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT},
        {.binding = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1,
         .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT}};
    VkDescriptorSetLayoutCreateInfo dslci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                             .bindingCount = 2, .pBindings = binds};
    VkDescriptorSetLayout dsl;
    VKCHECK(vkCreateDescriptorSetLayout(dev, &dslci, NULL, &dsl));
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = 12};
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = 1, .pSetLayouts = &dsl,
                                       .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
    VkPipelineLayout pl;
    VKCHECK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));
    VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = spv->size, .pCode = (const uint32_t *)(const void *)spv->data};
    VkShaderModule sm;
    VKCHECK(vkCreateShaderModule(dev, &smci, NULL, &sm));
    const uint32_t wg = 64;
    VkSpecializationMapEntry sme = {.constantID = 0, .offset = 0, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = 1, .pMapEntries = &sme, .dataSize = 4, .pData = &wg};
    VkComputePipelineCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = sm, .pName = "main",
                  .pSpecializationInfo = &si},
        .layout = pl};
    VkPipeline pipe;
    VKCHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, NULL, &pipe));

    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 2};
    VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &ps};
    VkDescriptorPool dp;
    VKCHECK(vkCreateDescriptorPool(dev, &dpci, NULL, &dp));
    VkDescriptorSetAllocateInfo dsai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                        .descriptorPool = dp, .descriptorSetCount = 1, .pSetLayouts = &dsl};
    VkDescriptorSet ds;
    VKCHECK(vkAllocateDescriptorSets(dev, &dsai, &ds));
    VkDescriptorBufferInfo dbi[2] = {{buf[0], 0, bytes}, {buf[1], 0, bytes}};
    VkWriteDescriptorSet w[2];
    for (int i = 0; i < 2; i++)
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = ds,
                                      .dstBinding = (uint32_t)i, .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &dbi[i]};
    vkUpdateDescriptorSets(dev, 2, w, 0, NULL);

    VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .queueFamilyIndex = qfi};
    VkCommandPool cp;
    VKCHECK(vkCreateCommandPool(dev, &cpi, NULL, &cp));
    VkCommandBufferAllocateInfo cbai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                        .commandPool = cp, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                        .commandBufferCount = 1};
    VkCommandBuffer cb;
    VKCHECK(vkAllocateCommandBuffers(dev, &cbai, &cb));
    VkCommandBufferBeginInfo cbbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                     .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VKCHECK(vkBeginCommandBuffer(cb, &cbbi));
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
    struct { float a, b; uint32_t n; } pc = {3.0f, 0.25f, N};
    vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
    vkCmdDispatch(cb, (N + wg - 1) / wg, 1, 1);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                         &mb, 0, NULL, 0, NULL);
    VKCHECK(vkEndCommandBuffer(cb));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    VKCHECK(vkCreateFence(dev, &fci, NULL, &fence));
    VkSubmitInfo sub = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                        .pCommandBuffers = &cb};
    VKCHECK(vkQueueSubmit(q, 1, &sub, fence));
    VKCHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, 10ull * 1000000000ull));

    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want_v = 3.0f * map[0][i] + 0.25f;
        if (!(fabsf(map[1][i] - want_v) <= 1e-5f * fabsf(want_v) + 1e-6f))
            bad++;
    }
    CHECK(bad == 0, "%d of %d outputs wrong (y[1]=%g)", bad, N, (double)map[1][1]);

    vkDestroyFence(dev, fence, NULL);
    vkDestroyCommandPool(dev, cp, NULL);
    vkDestroyDescriptorPool(dev, dp, NULL);
    vkDestroyPipeline(dev, pipe, NULL);
    vkDestroyShaderModule(dev, sm, NULL);
    vkDestroyPipelineLayout(dev, pl, NULL);
    vkDestroyDescriptorSetLayout(dev, dsl, NULL);
    for (int b = 0; b < 2; b++) {
        vkUnmapMemory(dev, mem[b]);
        vkDestroyBuffer(dev, buf[b], NULL);
        vkFreeMemory(dev, mem[b], NULL);
    }
    vkDestroyDevice(dev, NULL);
    rm(inst, msgr, NULL);
    vkDestroyInstance(inst, NULL);
    CHECK(g_messages == 0, "%d validation messages", g_messages);
    return tu_finish();
}
