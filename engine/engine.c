/* Engine-wide facts that do not belong to one submodule. */
#include "engine/engine.h"

#include <stdio.h>
#include <vulkan/vulkan.h>

const char *engine_vulkan_header_version(void)
{
    /* Computed from the header macro at compile time; static storage. */
    static const char v[] = {
        '0' + VK_API_VERSION_MAJOR(VK_HEADER_VERSION_COMPLETE), '.',
        '0' + VK_API_VERSION_MINOR(VK_HEADER_VERSION_COMPLETE), '.',
        '0' + (VK_HEADER_VERSION / 100) % 10, '0' + (VK_HEADER_VERSION / 10) % 10,
        '0' + VK_HEADER_VERSION % 10, '\0'};
    return v;
}
