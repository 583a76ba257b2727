/*
 * Instance and device: selection by index / UUID / name, feature discovery
 * and enabling, limits (read once, lowered by FOLIO_VK_* for tests), the
 * validation layer's debug messenger, counting VkAllocationCallbacks and
 * the stats/JSON view that `folio doctor` prints (result checking is
 * vkr_result.c, below everything else in engine/vk).
 *
 * Features are enabled when the device has them and the engine can use
 * them; nothing optional is required. The only hard requirements are
 * Vulkan 1.2 and a compute queue. CPU devices (lavapipe) are chosen only
 * when the caller allows them, so a misconfigured GPU box never silently
 * classifies on the CPU.
 */
#include "common/json.h"
#include "engine/vk/vkr_internal.h"

#include <ctype.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- counting host allocator ----
 * Every allocation carries a header holding its size and the offset back to
 * the malloc'd pointer, so free and realloc can account without a table. */
struct hdr {
    size_t size;
    size_t back;
};

static void count_add(struct vkr_hostmem *m, size_t n)
{
    atomic_fetch_add(&m->allocs, 1);
    uint64_t now = atomic_fetch_add(&m->now, n) + n;
    uint64_t peak = atomic_load(&m->peak);
    while (now > peak && !atomic_compare_exchange_weak(&m->peak, &peak, now))
        ;
}

static void *VKAPI_CALL ac_alloc(void *user, size_t size, size_t align, VkSystemAllocationScope s)
{
    (void)s;
    struct vkr_hostmem *m = user;
    if (align < sizeof(void *))
        align = sizeof(void *);
    size_t extra = sizeof(struct hdr) + align;
    if (size > SIZE_MAX - extra)
        return NULL;
    unsigned char *raw = malloc(size + extra);
    if (!raw)
        return NULL;
    uintptr_t p = ((uintptr_t)raw + sizeof(struct hdr) + align - 1) & ~(uintptr_t)(align - 1);
    struct hdr *h = (struct hdr *)(p - sizeof(struct hdr));
    h->size = size;
    h->back = p - (uintptr_t)raw;
    count_add(m, size);
    return (void *)p;
}

static void VKAPI_CALL ac_free(void *user, void *mem)
{
    if (!mem)
        return;
    struct vkr_hostmem *m = user;
    struct hdr *h = (struct hdr *)((uintptr_t)mem - sizeof(struct hdr));
    atomic_fetch_add(&m->frees, 1);
    atomic_fetch_sub(&m->now, h->size);
    free((unsigned char *)mem - h->back);
}

static void *VKAPI_CALL ac_realloc(void *user, void *old, size_t size, size_t align,
                                   VkSystemAllocationScope s)
{
    if (!old)
        return ac_alloc(user, size, align, s);
    if (size == 0) {
        ac_free(user, old);
        return NULL;
    }
    void *p = ac_alloc(user, size, align, s);
    if (!p)
        return NULL;
    struct hdr *h = (struct hdr *)((uintptr_t)old - sizeof(struct hdr));
    memcpy(p, old, h->size < size ? h->size : size);
    ac_free(user, old);
    return p;
}

/* ---- instance ---- */
static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                               VkDebugUtilsMessageTypeFlagsEXT type,
                                               const VkDebugUtilsMessengerCallbackDataEXT *d,
                                               void *user)
{
    (void)type;
    struct vkr *vk = user;
    if (sev < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
        return VK_FALSE;
    atomic_fetch_add(&vk->validation_messages, 1);
    char q[1024];
    folio_log(sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? FOLIO_LOG_ERROR
                                                                   : FOLIO_LOG_WARN,
              "vk_validation", "id=%s msg=%s",
              folio_lq(q, 128, d->pMessageIdName ? d->pMessageIdName : "-"),
              folio_lq(q + 128, sizeof q - 128, d->pMessage ? d->pMessage : ""));
    return VK_FALSE;
}

static int has_instance_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
        return 0;
    VkLayerProperties *p = calloc(n, sizeof *p);
    if (!p)
        return 0;
    int found = 0;
    if (vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            if (strcmp(p[i].layerName, name) == 0)
                found = 1;
    free(p);
    return found;
}

static int has_instance_ext(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return 0;
    VkExtensionProperties *p = calloc(n, sizeof *p);
    if (!p)
        return 0;
    int found = 0;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            if (strcmp(p[i].extensionName, name) == 0)
                found = 1;
    free(p);
    return found;
}

void vkr_pin_drivers_for_sanitizers(void)
{
#if defined(__SANITIZE_ADDRESS__)
    /* The loader unloads ICDs and layers when the instance goes, and
     * LeakSanitizer then sees their own leaks as "<unknown module>" frames
     * that no suppression (tests/lsan.supp) can name: keep them resident. */
    static const char *const libs[] = {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        if (!dlopen(libs[i], RTLD_LAZY | RTLD_NODELETE))
            (void)dlerror();
#endif
}

static int make_instance(struct vkr *vk, int validate, VkInstance *out, struct folio_err *err)
{
    const char *layer = "VK_LAYER_KHRONOS_validation";
    const char *exts[1];
    uint32_t nexts = 0;
    VkDebugUtilsMessengerCreateInfoEXT dbg = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_debug,
        .pUserData = vk};
    if (validate) {
        if (!has_instance_layer(layer)) {
            folio_err_set(err, FOLIO_EUNSUPPORTED, "Vulkan validation requested but %s is missing",
                          layer);
            folio_err_hint(err, "install vulkan-validationlayers (ops/deps.sh) or unset "
                                "FOLIO_VK_VALIDATE");
            return FOLIO_EUNSUPPORTED;
        }
        if (!has_instance_ext(VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
            folio_err_set(err, FOLIO_EUNSUPPORTED, "validation requested but %s is missing",
                          VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
            return FOLIO_EUNSUPPORTED;
        }
        exts[nexts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "folio", .pEngineName = "folio",
                             .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pNext = validate ? &dbg : NULL,
                                .pApplicationInfo = &app,
                                .enabledLayerCount = validate ? 1 : 0,
                                .ppEnabledLayerNames = &layer,
                                .enabledExtensionCount = nexts,
                                .ppEnabledExtensionNames = exts};
    vkr_pin_drivers_for_sanitizers();
    VkResult r = vkCreateInstance(&ici, vk ? &vk->ac : NULL, out);
    if (r != VK_SUCCESS) {
        folio_err_set(err, FOLIO_EDEVICE, "vkCreateInstance failed: %s", vkr_result_name(r));
        folio_err_hint(err, "is a Vulkan driver installed (mesa-vulkan-drivers for lavapipe, "
                            "the NVIDIA driver's ICD otherwise)? VK_DRIVER_FILES may point "
                            "at the wrong ICD");
        return FOLIO_EDEVICE;
    }
    if (validate && vk) {
        PFN_vkCreateDebugUtilsMessengerEXT mk = (PFN_vkCreateDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(*out, "vkCreateDebugUtilsMessengerEXT");
        if (!mk || mk(*out, &dbg, &vk->ac, &vk->messenger) != VK_SUCCESS) {
            vkDestroyInstance(*out, &vk->ac);
            *out = VK_NULL_HANDLE;
            return folio_err_set(err, FOLIO_EDEVICE, "could not create the debug messenger");
        }
    }
    return 0;
}

static const char *type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

static void fill_info(VkPhysicalDevice pd, int index, struct vkr_device_info *di)
{
    VkPhysicalDeviceIDProperties idp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
                                            .pNext = &idp};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &drv};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    memset(di, 0, sizeof *di);
    di->index = index;
    snprintf(di->name, sizeof di->name, "%s", p2.properties.deviceName);
    snprintf(di->type, sizeof di->type, "%s", type_name(p2.properties.deviceType));
    di->vendor_id = p2.properties.vendorID;
    di->device_id = p2.properties.deviceID;
    di->driver_version = p2.properties.driverVersion;
    di->api_version = p2.properties.apiVersion;
    memcpy(di->uuid, idp.deviceUUID, 16);
    folio_hex(di->uuid, 16, di->uuid_hex);
    snprintf(di->driver_name, sizeof di->driver_name, "%.63s", drv.driverName);
    snprintf(di->driver_info, sizeof di->driver_info, "%.127s", drv.driverInfo);
}

int vkr_list_devices(struct vkr_device_info *out, int max, int *n, struct folio_err *err)
{
    VkInstance inst;
    int rc = make_instance(NULL, 0, &inst, err);
    if (rc)
        return rc;
    uint32_t nd = 0;
    VkResult r = vkEnumeratePhysicalDevices(inst, &nd, NULL);
    VkPhysicalDevice *pds = nd ? calloc(nd, sizeof *pds) : NULL;
    if (r == VK_SUCCESS && nd && !pds)
        r = VK_ERROR_OUT_OF_HOST_MEMORY;
    if (r == VK_SUCCESS && nd)
        r = vkEnumeratePhysicalDevices(inst, &nd, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(pds);
        vkDestroyInstance(inst, NULL);
        return folio_err_set(err, FOLIO_EDEVICE, "vkEnumeratePhysicalDevices: %s",
                             vkr_result_name(r));
    }
    for (uint32_t i = 0; i < nd && (int)i < max; i++)
        fill_info(pds[i], (int)i, &out[i]);
    *n = (int)nd;
    free(pds);
    vkDestroyInstance(inst, NULL);
    return 0;
}

/* Parses "0123abcd-..." into 16 bytes; 0 when s is a UUID. */
static int parse_uuid(const char *s, uint8_t out[16])
{
    char hex[33];
    int k = 0;
    for (; *s; s++) {
        if (*s == '-')
            continue;
        if (!isxdigit((unsigned char)*s) || k >= 32)
            return -1;
        hex[k++] = (char)tolower((unsigned char)*s);
    }
    if (k != 32)
        return -1;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        char two[3] = {hex[2 * i], hex[2 * i + 1], 0};
        if (sscanf(two, "%x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    return 0;
}

static int ci_contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return 1;
    return n == 0;
}

static int pick_device(struct vkr *vk, struct folio_err *err)
{
    uint32_t nd = 0;
    VkResult r = vkEnumeratePhysicalDevices(vk->inst, &nd, NULL);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkEnumeratePhysicalDevices", err);
    if (nd == 0) {
        folio_err_set(err, FOLIO_EDEVICE, "no Vulkan devices found");
        folio_err_hint(err, "install a Vulkan driver; for CPU tests mesa-vulkan-drivers (lavapipe)");
        return FOLIO_EDEVICE;
    }
    VkPhysicalDevice *pds = calloc(nd, sizeof *pds);
    struct vkr_device_info *infos = calloc(nd, sizeof *infos);
    if (!pds || !infos) {
        free(pds);
        free(infos);
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory listing devices");
    }
    r = vkEnumeratePhysicalDevices(vk->inst, &nd, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(pds);
        free(infos);
        return vkr_check(vk, r, "vkEnumeratePhysicalDevices", err);
    }
    for (uint32_t i = 0; i < nd; i++)
        fill_info(pds[i], (int)i, &infos[i]);

    const char *sel = vk->cfg.device;
    int chosen = -1;
    char list[512] = "";
    for (uint32_t i = 0; i < nd; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%u=%s(%s)", i ? ", " : "", i, infos[i].name,
                 infos[i].type);
    }
    if (sel && *sel) {
        uint8_t uuid[16];
        long long idx;
        if (folio_parse_int(sel, 0, 1000, &idx) == 0) {
            if (idx < (long long)nd)
                chosen = (int)idx;
        } else if (parse_uuid(sel, uuid) == 0) {
            for (uint32_t i = 0; i < nd && chosen < 0; i++)
                if (memcmp(infos[i].uuid, uuid, 16) == 0)
                    chosen = (int)i;
        } else {
            for (uint32_t i = 0; i < nd && chosen < 0; i++)
                if (ci_contains(infos[i].name, sel))
                    chosen = (int)i;
        }
        if (chosen < 0) {
            folio_err_set(err, FOLIO_EINVAL, "no Vulkan device matches '%s'", sel);
            folio_err_detail(err, "devices: %s", list);
            folio_err_hint(err, "pass an index, a device UUID or a name substring");
        } else if (strcmp(infos[chosen].type, "cpu") == 0 && !vk->cfg.allow_cpu) {
            folio_err_set(err, FOLIO_EINVAL, "device '%s' is a CPU implementation",
                          infos[chosen].name);
            folio_err_hint(err, "allow CPU devices explicitly (tests do) or pick a GPU");
            chosen = -1;
        }
    } else {
        static const char *order[] = {"discrete", "integrated", "virtual", "other", "cpu"};
        for (int o = 0; o < 5 && chosen < 0; o++) {
            if (o == 4 && !vk->cfg.allow_cpu)
                break;
            for (uint32_t i = 0; i < nd && chosen < 0; i++)
                if (strcmp(infos[i].type, order[o]) == 0)
                    chosen = (int)i;
        }
        if (chosen < 0) {
            folio_err_set(err, FOLIO_EDEVICE, "no Vulkan GPU found");
            folio_err_detail(err, "devices: %s", list);
            folio_err_hint(err, "CPU devices (lavapipe) are used only when allowed explicitly");
        }
    }
    if (chosen >= 0) {
        vk->pd = pds[chosen];
        vk->info = infos[chosen];
    }
    free(pds);
    free(infos);
    if (chosen < 0)
        return err ? err->code : FOLIO_EDEVICE;
    if (VK_API_VERSION_MINOR(vk->info.api_version) < 2 &&
        VK_API_VERSION_MAJOR(vk->info.api_version) == 1) {
        folio_err_set(err, FOLIO_EUNSUPPORTED, "device %s supports Vulkan %u.%u; folio needs 1.2",
                      vk->info.name, VK_API_VERSION_MAJOR(vk->info.api_version),
                      VK_API_VERSION_MINOR(vk->info.api_version));
        return FOLIO_EUNSUPPORTED;
    }
    return 0;
}

/* ---- device ---- */
static int has_dev_ext(const VkExtensionProperties *e, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(e[i].extensionName, name) == 0)
            return 1;
    return 0;
}

/* Lowers a limit from the environment. Values above the device's are
 * ignored with a warning: tests may only make limits tighter. A comma
 * list gives each device of a multi-device engine its own value (the
 * ordinal-th; a device past the list's end keeps its limit). */
static void env_lower(const char *var, int ordinal, uint64_t *v, int *overridden)
{
    const char *s = getenv(var);
    if (!s || !*s)
        return;
    char item[64], q[64];
    const char *p = s;
    for (int i = 0; i < ordinal && p && strchr(s, ','); i++) {
        p = strchr(p, ',');
        if (p)
            p++;
    }
    if (!p)
        return;
    size_t n = strcspn(p, ",");
    if (n >= sizeof item)
        n = sizeof item - 1;
    memcpy(item, p, n);
    item[n] = 0;
    uint64_t x;
    if (folio_parse_size(item, &x) != 0 || x == 0) {
        folio_log(FOLIO_LOG_WARN, "vk_env_ignored", "var=%s value=%s device_ordinal=%d "
                  "reason=unparseable", var, folio_lq(q, sizeof q, s), ordinal);
        return;
    }
    if (x >= *v) {
        folio_log(FOLIO_LOG_WARN, "vk_env_ignored", "var=%s value=%" PRIu64 " device_ordinal=%d"
                  " reason=not_below_device_limit limit=%" PRIu64, var, x, ordinal, *v);
        return;
    }
    *v = x;
    *overridden = 1;
}

/* What the physical device offers, queried once; the feature and property
 * structs are chained through pNext, so they live together here. */
/* VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 need Vulkan
 * headers newer than Debian 12's (CMake takes Debian 13's from
 * ops/shaderc-trixie.sh); with older headers those routes are compiled out. */
#if defined(VK_KHR_cooperative_matrix) && defined(VK_NV_cooperative_matrix2)
#define VKR_HAVE_CM2_HEADERS 1
#else
#define VKR_HAVE_CM2_HEADERS 0
#endif

struct dev_caps {
    int api13, e_push, e_budget, e_fault, e_cm, e_khr_cm, e_cm2, e_smb;
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV smb;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cmf;
#if VKR_HAVE_CM2_HEADERS
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR khr_cmf;
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV cm2f;
#endif
    VkPhysicalDeviceFaultFeaturesEXT ff;
    VkPhysicalDeviceVulkan13Features f13;
    VkPhysicalDeviceVulkan12Features f12;
    VkPhysicalDeviceVulkan11Features f11;
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDeviceVulkan13Properties p13;
    VkPhysicalDeviceVulkan11Properties p11;
    VkPhysicalDeviceProperties2 p2;
};

/* The device extensions folio can use, by name. */
static int query_extensions(struct vkr *vk, struct dev_caps *dc, struct folio_err *err)
{
    uint32_t next = 0;
    VkResult r = vkEnumerateDeviceExtensionProperties(vk->pd, NULL, &next, NULL);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkEnumerateDeviceExtensionProperties", err);
    VkExtensionProperties *ext = calloc(next ? next : 1, sizeof *ext);
    if (!ext)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    r = vkEnumerateDeviceExtensionProperties(vk->pd, NULL, &next, ext);
    if (r != VK_SUCCESS) {
        free(ext);
        return vkr_check(vk, r, "vkEnumerateDeviceExtensionProperties", err);
    }
    dc->api13 = VK_API_VERSION_MINOR(vk->info.api_version) >= 3 ||
                VK_API_VERSION_MAJOR(vk->info.api_version) > 1;
    dc->e_push = has_dev_ext(ext, next, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    dc->e_budget = has_dev_ext(ext, next, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    dc->e_fault = has_dev_ext(ext, next, VK_EXT_DEVICE_FAULT_EXTENSION_NAME);
    dc->e_cm = has_dev_ext(ext, next, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    dc->e_smb = has_dev_ext(ext, next, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
#if VKR_HAVE_CM2_HEADERS
    dc->e_khr_cm = dc->api13 && has_dev_ext(ext, next, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    dc->e_cm2 = dc->e_khr_cm && has_dev_ext(ext, next, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
#endif
    free(ext);
    return 0;
}

/* Features and properties, for the extensions that exist. */
static void query_caps(struct vkr *vk, struct dev_caps *dc)
{
    dc->cmf = (VkPhysicalDeviceCooperativeMatrixFeaturesNV){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    dc->ff = (VkPhysicalDeviceFaultFeaturesEXT){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_FEATURES_EXT};
    dc->f13 = (VkPhysicalDeviceVulkan13Features){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    dc->f12 = (VkPhysicalDeviceVulkan12Features){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    dc->f11 = (VkPhysicalDeviceVulkan11Features){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    dc->f2 = (VkPhysicalDeviceFeatures2){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    void **tail = &dc->f2.pNext;
    *tail = &dc->f11, tail = &dc->f11.pNext;
    *tail = &dc->f12, tail = &dc->f12.pNext;
    if (dc->api13)
        *tail = &dc->f13, tail = &dc->f13.pNext;
    if (dc->e_cm)
        *tail = &dc->cmf, tail = &dc->cmf.pNext;
#if VKR_HAVE_CM2_HEADERS
    dc->khr_cmf = (VkPhysicalDeviceCooperativeMatrixFeaturesKHR){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
    dc->cm2f = (VkPhysicalDeviceCooperativeMatrix2FeaturesNV){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
    if (dc->e_khr_cm)
        *tail = &dc->khr_cmf, tail = &dc->khr_cmf.pNext;
    if (dc->e_cm2)
        *tail = &dc->cm2f, tail = &dc->cm2f.pNext;
#endif
    if (dc->e_fault)
        *tail = &dc->ff, tail = &dc->ff.pNext;
    vkGetPhysicalDeviceFeatures2(vk->pd, &dc->f2);

    dc->p13 = (VkPhysicalDeviceVulkan13Properties){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES};
    dc->p11 = (VkPhysicalDeviceVulkan11Properties){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES,
                                                   .pNext = dc->api13 ? &dc->p13 : NULL};
    /* the multiprocessor count, where the device says it (NVIDIA): the
     * GEMM splits K when its tiles leave multiprocessors idle (op_matmul.c) */
    dc->smb = (VkPhysicalDeviceShaderSMBuiltinsPropertiesNV){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    if (dc->e_smb)
        dc->p13.pNext = &dc->smb, dc->p11.pNext = dc->api13 ? (void *)&dc->p13 : (void *)&dc->smb;
    dc->p2 = (VkPhysicalDeviceProperties2){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                           .pNext = &dc->p11};
    vkGetPhysicalDeviceProperties2(vk->pd, &dc->p2);
}

/* A compute queue family, one with timestamps preferred; graphics+compute
 * is fine. */
static int pick_queue(struct vkr *vk, VkQueueFamilyProperties *qf, struct folio_err *err)
{
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(vk->pd, &nq, NULL);
    VkQueueFamilyProperties all[32];
    if (nq > 32)
        nq = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(vk->pd, &nq, all);
    vk->qfam = UINT32_MAX;
    for (uint32_t i = 0; i < nq; i++)
        if ((all[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
            (vk->qfam == UINT32_MAX || (all[i].timestampValidBits && !all[vk->qfam].timestampValidBits)))
            vk->qfam = i;
    if (vk->qfam == UINT32_MAX)
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "device %s has no compute queue", vk->info.name);
    *qf = all[vk->qfam];
    return 0;
}

/* The logical device with only what folio uses enabled, its queue and the
 * extension entry points. */
static int make_device(struct vkr *vk, const struct dev_caps *dc, struct folio_err *err)
{
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cme = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
        .cooperativeMatrix = dc->cmf.cooperativeMatrix};
    VkPhysicalDeviceFaultFeaturesEXT ffe = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_FEATURES_EXT,
                                            .deviceFault = dc->ff.deviceFault};
    VkPhysicalDeviceVulkan13Features e13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                            .maintenance4 = dc->f13.maintenance4,
                                            .subgroupSizeControl = dc->f13.subgroupSizeControl,
                                            .computeFullSubgroups = dc->f13.computeFullSubgroups};
    VkPhysicalDeviceVulkan12Features e12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .shaderFloat16 = dc->f12.shaderFloat16,
                                            .shaderInt8 = dc->f12.shaderInt8,
                                            .storageBuffer8BitAccess = dc->f12.storageBuffer8BitAccess,
                                            /* the KHR / NV2 cooperative-matrix shaders declare it */
                                            .vulkanMemoryModel = dc->f12.vulkanMemoryModel,
                                            .vulkanMemoryModelDeviceScope =
                                                dc->f12.vulkanMemoryModelDeviceScope};
    VkPhysicalDeviceVulkan11Features e11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .storageBuffer16BitAccess = dc->f11.storageBuffer16BitAccess};
    VkPhysicalDeviceFeatures2 e2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    e2.features.shaderInt16 = dc->f2.features.shaderInt16;
    e2.features.shaderInt64 = dc->f2.features.shaderInt64;
    void **tail = &e2.pNext;
    *tail = &e11, tail = &e11.pNext;
    *tail = &e12, tail = &e12.pNext;
    if (dc->api13)
        *tail = &e13, tail = &e13.pNext;

    const char *dext[12];
    uint32_t nd = 0;
    if (dc->e_push)
        dext[nd++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    if (dc->e_budget)
        dext[nd++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
    if (dc->e_fault && dc->ff.deviceFault) {
        dext[nd++] = VK_EXT_DEVICE_FAULT_EXTENSION_NAME;
        *tail = &ffe, tail = &ffe.pNext;
    }
    if (dc->e_cm && dc->cmf.cooperativeMatrix) {
        dext[nd++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
        *tail = &cme, tail = &cme.pNext;
    }
#if VKR_HAVE_CM2_HEADERS
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR khre = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        .cooperativeMatrix = dc->khr_cmf.cooperativeMatrix};
    /* only the NV2 parts the GEMM and the attention use */
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV cm2e = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV,
        .cooperativeMatrixWorkgroupScope = dc->cm2f.cooperativeMatrixWorkgroupScope,
        .cooperativeMatrixFlexibleDimensions = dc->cm2f.cooperativeMatrixFlexibleDimensions,
        .cooperativeMatrixTensorAddressing = dc->cm2f.cooperativeMatrixTensorAddressing,
        .cooperativeMatrixPerElementOperations = dc->cm2f.cooperativeMatrixPerElementOperations,
        .cooperativeMatrixReductions = dc->cm2f.cooperativeMatrixReductions,
        .cooperativeMatrixConversions = dc->cm2f.cooperativeMatrixConversions};
    if (dc->e_khr_cm && dc->khr_cmf.cooperativeMatrix) {
        dext[nd++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
        *tail = &khre, tail = &khre.pNext;
        if (dc->e_cm2) {
            dext[nd++] = VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME;
            *tail = &cm2e, tail = &cm2e.pNext;
        }
    }
#endif
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = vk->qfam, .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &e2,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = nd, .ppEnabledExtensionNames = dext};
    VkResult r = vkCreateDevice(vk->pd, &dci, &vk->ac, &vk->dev);
    if (r != VK_SUCCESS)
        return vkr_check(vk, r, "vkCreateDevice", err);
    vkGetDeviceQueue(vk->dev, vk->qfam, 0, &vk->queue);
    if (dc->e_push)
        vk->push_desc = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(vk->dev, "vkCmdPushDescriptorSetKHR");
    if (dc->e_fault && dc->ff.deviceFault)
        vk->get_fault = (PFN_vkGetDeviceFaultInfoEXT)vkGetDeviceProcAddr(vk->dev, "vkGetDeviceFaultInfoEXT");
    return 0;
}

/* The 16x16x16 f16 -> f32 subgroup shape the GEMM and attention kernels use. */
static int has_coopmat_16(struct vkr *vk)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV gp =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            vk->inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    uint32_t n = 0;
    if (!gp || gp(vk->pd, &n, NULL) != VK_SUCCESS || n == 0 || n >= 256)
        return 0;
    VkCooperativeMatrixPropertiesNV cp[256];
    for (uint32_t i = 0; i < n; i++)
        cp[i] = (VkCooperativeMatrixPropertiesNV){.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV};
    if (gp(vk->pd, &n, cp) != VK_SUCCESS)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (cp[i].MSize == 16 && cp[i].NSize == 16 && cp[i].KSize == 16 &&
            cp[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV && cp[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
            cp[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV && cp[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
            cp[i].scope == VK_SCOPE_SUBGROUP_NV)
            return 1;
    return 0;
}

#if VKR_HAVE_CM2_HEADERS
/* VK_NV_cooperative_matrix2's flexible-dimension shapes into cp (room for
 * 256); the count, 0 when the device lists none. */
static uint32_t flexible_shapes(struct vkr *vk, VkCooperativeMatrixFlexibleDimensionsPropertiesNV *cp)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV gp =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)vkGetInstanceProcAddr(
            vk->inst, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
    uint32_t n = 0;
    if (!gp || gp(vk->pd, &n, NULL) != VK_SUCCESS || n == 0 || n >= 256)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        cp[i] = (VkCooperativeMatrixFlexibleDimensionsPropertiesNV){
            .sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV};
    return gp(vk->pd, &n, cp) == VK_SUCCESS ? n : 0;
}

/* An m x n x k subgroup shape (A and B of type ab, C and the result of
 * type c) through VK_NV_cooperative_matrix2's flexible dimensions: a
 * granularity that divides it (Mesa 26's lavapipe lists 8x8x8 and takes
 * multiples of it). */
static int has_flexible(struct vkr *vk, uint32_t m, uint32_t n, uint32_t k, VkComponentTypeKHR ab,
                        VkComponentTypeKHR c)
{
    VkCooperativeMatrixFlexibleDimensionsPropertiesNV cp[256];
    uint32_t cnt = flexible_shapes(vk, cp);
    for (uint32_t i = 0; i < cnt; i++)
        if (cp[i].MGranularity && cp[i].NGranularity && cp[i].KGranularity &&
            m % cp[i].MGranularity == 0 && n % cp[i].NGranularity == 0 &&
            k % cp[i].KGranularity == 0 && cp[i].scope == VK_SCOPE_SUBGROUP_KHR &&
            cp[i].AType == ab && cp[i].BType == ab && cp[i].CType == c && cp[i].ResultType == c)
            return 1;
    return 0;
}

/* A subgroup shape through VK_KHR_cooperative_matrix: m x n x k with A and
 * B of type ab, C and the result of type c, listed by the device, or
 * (flexible: the device takes NV2's flexible dimensions) a multiple of a
 * listed granularity. */
static int has_khr_shape(struct vkr *vk, uint32_t m, uint32_t n, uint32_t k, VkComponentTypeKHR ab,
                         VkComponentTypeKHR c, int flexible)
{
    if (flexible && has_flexible(vk, m, n, k, ab, c))
        return 1;
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR gp =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
            vk->inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t cnt = 0;
    if (!gp || gp(vk->pd, &cnt, NULL) != VK_SUCCESS || cnt == 0 || cnt >= 256)
        return 0;
    VkCooperativeMatrixPropertiesKHR cp[256];
    for (uint32_t i = 0; i < cnt; i++)
        cp[i] = (VkCooperativeMatrixPropertiesKHR){.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
    if (gp(vk->pd, &cnt, cp) != VK_SUCCESS)
        return 0;
    for (uint32_t i = 0; i < cnt; i++)
        if (cp[i].MSize == m && cp[i].NSize == n && cp[i].KSize == k && cp[i].AType == ab &&
            cp[i].BType == ab && cp[i].CType == c && cp[i].ResultType == c &&
            cp[i].scope == VK_SCOPE_SUBGROUP_KHR)
            return 1;
    return 0;
}

/* The workgroup-scope shapes of VK_NV_cooperative_matrix2 folio has kernels
 * for (f16 x f16 into f32 or f16, int8 x int8 into int32), into vk->cm2. */
static int query_coopmat2_shapes(struct vkr *vk)
{
    VkCooperativeMatrixFlexibleDimensionsPropertiesNV cp[256];
    uint32_t n = flexible_shapes(vk, cp);
    vk->ncm2 = 0;
    for (uint32_t i = 0; i < n && vk->ncm2 < (int)(sizeof vk->cm2 / sizeof vk->cm2[0]); i++) {
        const VkCooperativeMatrixFlexibleDimensionsPropertiesNV *c = &cp[i];
        int ab16 = c->AType == VK_COMPONENT_TYPE_FLOAT16_KHR && c->BType == VK_COMPONENT_TYPE_FLOAT16_KHR;
        int ab8 = c->AType == VK_COMPONENT_TYPE_SINT8_KHR && c->BType == VK_COMPONENT_TYPE_SINT8_KHR;
        int kind = -1;
        if (ab16 && c->CType == VK_COMPONENT_TYPE_FLOAT32_KHR && c->ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR)
            kind = VKR_CM2_F16_F32;
        else if (ab16 && c->CType == VK_COMPONENT_TYPE_FLOAT16_KHR && c->ResultType == VK_COMPONENT_TYPE_FLOAT16_KHR)
            kind = VKR_CM2_F16_F16;
        else if (ab8 && c->CType == VK_COMPONENT_TYPE_SINT32_KHR && c->ResultType == VK_COMPONENT_TYPE_SINT32_KHR)
            kind = VKR_CM2_S8_S32;
        if (c->scope != VK_SCOPE_WORKGROUP_KHR || kind < 0)
            continue;
        vk->cm2[vk->ncm2++] = (struct vkr_cm2_shape){c->MGranularity, c->NGranularity, c->KGranularity,
                                                     c->workgroupInvocations, kind};
    }
    return vk->ncm2 > 0;
}
#endif

int vkr_coopmat2_shape_ok(const struct vkr *vk, uint32_t m, uint32_t n, uint32_t k,
                          enum vkr_cm2_kind kind, uint32_t threads)
{
    if (!vk->feat.coopmat2_nv)
        return 0;
    for (int i = 0; i < vk->ncm2; i++) {
        const struct vkr_cm2_shape *c = &vk->cm2[i];
        if (c->kind == (int)kind && c->threads == threads && c->mg && c->ng && c->kg &&
            m % c->mg == 0 && n % c->ng == 0 && k % c->kg == 0)
            return 1;
    }
    return 0;
}

/* What the kernels may rely on (vkr_features). */
static void record_features(struct vkr *vk, const struct dev_caps *dc, const VkQueueFamilyProperties *qf)
{
    struct vkr_features *F = &vk->feat;
    const VkPhysicalDeviceVulkan11Properties *p11 = &dc->p11;
    F->storage_16bit = (int)dc->f11.storageBuffer16BitAccess;
    F->float16 = (int)dc->f12.shaderFloat16;
    F->int8 = (int)dc->f12.shaderInt8;
    F->subgroup_basic = (p11->subgroupSupportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) != 0;
    F->subgroup_arith = (p11->subgroupSupportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;
    F->subgroup_shuffle = (p11->subgroupSupportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) != 0;
    F->maintenance4 = dc->api13 && dc->f13.maintenance4;
    F->size_control = dc->api13 && dc->f13.subgroupSizeControl;
    F->push_descriptor = vk->push_desc != NULL;
    F->memory_budget = dc->e_budget;
    F->device_fault = vk->get_fault != NULL;
    F->timestamps = qf->timestampValidBits != 0 && dc->p2.properties.limits.timestampPeriod > 0;
    F->validation = vk->messenger != VK_NULL_HANDLE;
    F->coopmat_nv = dc->e_cm && dc->cmf.cooperativeMatrix && has_coopmat_16(vk);
#if VKR_HAVE_CM2_HEADERS
    /* the subgroup GEMMs' 16x16x16 f16 -> f32 shape (gemm_khr) and 16x16x32
     * int8 -> int32 (gemm_i8_khr) */
    int flex = dc->e_cm2 && dc->cm2f.cooperativeMatrixFlexibleDimensions;
    F->coopmat_khr = dc->e_khr_cm && dc->khr_cmf.cooperativeMatrix &&
                     has_khr_shape(vk, 16, 16, 16, VK_COMPONENT_TYPE_FLOAT16_KHR,
                                   VK_COMPONENT_TYPE_FLOAT32_KHR, flex);
    F->coopmat_khr_i8 = F->coopmat_khr && F->int8 &&
                        has_khr_shape(vk, 16, 16, 32, VK_COMPONENT_TYPE_SINT8_KHR,
                                      VK_COMPONENT_TYPE_SINT32_KHR, flex);
    F->coopmat2_nv = F->coopmat_khr && dc->e_cm2 && dc->cm2f.cooperativeMatrixWorkgroupScope &&
                     dc->cm2f.cooperativeMatrixFlexibleDimensions &&
                     dc->cm2f.cooperativeMatrixTensorAddressing &&
                     dc->cm2f.cooperativeMatrixPerElementOperations && query_coopmat2_shapes(vk);
    F->coopmat2_attn = F->coopmat2_nv && dc->cm2f.cooperativeMatrixReductions &&
                       dc->cm2f.cooperativeMatrixConversions;
#endif
}

/* The device's limits, lowered by the FOLIO_VK_* test knobs (one value, or
 * one per device of a list); the block size derived from them. */
static int record_limits(struct vkr *vk, const struct dev_caps *dc, struct folio_err *err)
{
    const VkPhysicalDeviceLimits *L = &dc->p2.properties.limits;
    struct vkr_limits *lim = &vk->lim;
    vkGetPhysicalDeviceMemoryProperties(vk->pd, &vk->memprops);
    lim->max_alloc = dc->p11.maxMemoryAllocationSize;
    lim->max_buffer = dc->api13 ? dc->p13.maxBufferSize : dc->p11.maxMemoryAllocationSize;
    lim->max_range = L->maxStorageBufferRange;
    lim->min_ssbo_align = (uint32_t)L->minStorageBufferOffsetAlignment;
    if (lim->min_ssbo_align < 4)
        lim->min_ssbo_align = 4;
    for (int i = 0; i < 3; i++)
        lim->max_wg_count[i] = L->maxComputeWorkGroupCount[i];
    lim->max_wg_invocations = L->maxComputeWorkGroupInvocations;
    lim->max_shared = L->maxComputeSharedMemorySize;
    lim->max_push = L->maxPushConstantsSize;
    lim->subgroup_size = dc->p11.subgroupSize;
    lim->subgroup_min = dc->api13 ? dc->p13.minSubgroupSize : lim->subgroup_size;
    lim->subgroup_max = dc->api13 ? dc->p13.maxSubgroupSize : lim->subgroup_size;
    lim->compute_units = dc->e_smb ? dc->smb.shaderSMCount : 0;
    lim->timestamp_period_ns = L->timestampPeriod;
    for (uint32_t h = 0; h < vk->memprops.memoryHeapCount; h++)
        if ((vk->memprops.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            vk->memprops.memoryHeaps[h].size > lim->device_local_bytes)
            lim->device_local_bytes = vk->memprops.memoryHeaps[h].size;
    int ord = vk->cfg.ordinal;
    env_lower("FOLIO_VK_MAX_ALLOC", ord, &lim->max_alloc, &lim->overridden);
    env_lower("FOLIO_VK_MAX_RANGE", ord, &lim->max_range, &lim->overridden);
    uint64_t bs = 1ull << 30;
    env_lower("FOLIO_VK_BLOCK_SIZE", ord, &bs, &lim->overridden);
    uint64_t heap = lim->device_local_bytes ? lim->device_local_bytes : UINT64_MAX;
    int budgeted = 0;
    env_lower("FOLIO_VK_DEVICE_BYTES", ord, &heap, &budgeted);
    if (budgeted) { /* the heap size stays: the f16 and batch choices do not move */
        lim->budget = heap;
        lim->overridden = 1;
    }
    if (bs > lim->max_alloc)
        bs = lim->max_alloc;
    if (bs > lim->max_buffer)
        bs = lim->max_buffer;
    lim->block_size = bs & ~(uint64_t)(VKR_TENSOR_ALIGN - 1);
    uint64_t tm = lim->max_alloc < lim->max_buffer ? lim->max_alloc : lim->max_buffer;
    tm &= ~(uint64_t)(VKR_TENSOR_ALIGN - 1);
    lim->tensor_max = tm > lim->block_size ? tm : lim->block_size;
    lim->max_range &= ~(uint64_t)3; /* uint-indexed bindings */
    if (lim->max_range < 4096 || lim->block_size < 4096) {
        folio_err_set(err, FOLIO_EINVAL, "Vulkan limits too small: block %" PRIu64
                      " bytes, binding range %" PRIu64 " bytes", lim->block_size, lim->max_range);
        folio_err_hint(err, "FOLIO_VK_MAX_ALLOC / FOLIO_VK_MAX_RANGE / FOLIO_VK_BLOCK_SIZE must "
                            "be at least 4096");
        return FOLIO_EINVAL;
    }
    return 0;
}

/* The logical device and what folio records about it: extensions, features
 * and properties queried, a compute queue picked, the device created with
 * only what folio uses, then features and limits recorded. */
static int create_device(struct vkr *vk, struct folio_err *err)
{
    struct dev_caps dc;
    memset(&dc, 0, sizeof dc);
    VkQueueFamilyProperties qf = {0};
    int rc = query_extensions(vk, &dc, err);
    if (rc)
        return rc;
    query_caps(vk, &dc);
    rc = pick_queue(vk, &qf, err);
    if (!rc)
        rc = make_device(vk, &dc, err);
    if (rc)
        return rc;
    record_features(vk, &dc, &qf);
    return record_limits(vk, &dc, err);
}

int vkr_open(const struct vkr_config *cfg, struct vkr **out, struct folio_err *err)
{
    *out = NULL;
    struct vkr *vk = calloc(1, sizeof *vk);
    if (!vk)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    if (cfg)
        vk->cfg = *cfg;
    else
        vk->cfg.validate = -1;
    vk->ac = (VkAllocationCallbacks){.pUserData = &vk->hostmem, .pfnAllocation = ac_alloc,
                                     .pfnReallocation = ac_realloc, .pfnFree = ac_free};
    pthread_mutex_init(&vk->pipe_mu, NULL);
    int validate = vk->cfg.validate;
    if (validate < 0) {
        const char *v = getenv("FOLIO_VK_VALIDATE");
        validate = v && *v && strcmp(v, "0") != 0;
    }
    const char *cd = vk->cfg.cache_dir;
    if (cd)
        snprintf(vk->cache_dir, sizeof vk->cache_dir, "%s", cd);
    else if (getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME"))
        snprintf(vk->cache_dir, sizeof vk->cache_dir, "%s/folio", getenv("XDG_CACHE_HOME"));
    else if (getenv("HOME") && *getenv("HOME"))
        snprintf(vk->cache_dir, sizeof vk->cache_dir, "%s/.cache/folio", getenv("HOME"));
    vk->cfg.cache_dir = NULL; /* the copy above is what counts */
    vk->cfg.device = NULL;
    int rc = make_instance(vk, validate, &vk->inst, err);
    if (!rc) {
        vk->cfg.device = cfg ? cfg->device : NULL;
        rc = pick_device(vk, err);
        vk->cfg.device = NULL;
    }
    if (!rc)
        rc = create_device(vk, err);
    if (!rc)
        rc = vkr_cmd_init(vk, err);
    if (!rc)
        rc = vkr_pipelines_init(vk, err);
    if (rc) {
        if (err)
            folio_err_prefix(err, "opening Vulkan: ");
        vkr_close(vk);
        return rc;
    }
    char q1[300], q2[100];
    folio_log(FOLIO_LOG_INFO, "vk_open",
              "device=%d name=%s driver=%s block=%" PRIu64 " range=%" PRIu64
              " validation=%d push_descriptor=%d coopmat_nv=%d coopmat_khr=%d coopmat_khr_i8=%d coopmat2_nv=%d "
              "coopmat2_attn=%d",
              vk->info.index, folio_lq(q1, sizeof q1, vk->info.name),
              folio_lq(q2, sizeof q2, vk->info.driver_name), vk->lim.block_size,
              vk->lim.max_range, vk->feat.validation, vk->feat.push_descriptor,
              vk->feat.coopmat_nv, vk->feat.coopmat_khr, vk->feat.coopmat_khr_i8,
              vk->feat.coopmat2_nv, vk->feat.coopmat2_attn);
    *out = vk;
    return 0;
}

void vkr_close(struct vkr *vk)
{
    if (!vk)
        return;
    if (vk->dev)
        vkDeviceWaitIdle(vk->dev);
    if (vk->dev) {
        vkr_pipelines_destroy(vk);
        vkr_cmd_destroy_all(vk);
        for (uint32_t i = 0; i < vk->nblocks; i++)
            if (vk->blocks[i].in_use)
                vkr_block_destroy(vk, &vk->blocks[i]);
        if (vk->staging.buf)
            vkr_block_destroy(vk, &vk->staging);
        vkDestroyDevice(vk->dev, &vk->ac);
    }
    free(vk->blocks);
    if (vk->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT rm = (PFN_vkDestroyDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(vk->inst, "vkDestroyDebugUtilsMessengerEXT");
        if (rm)
            rm(vk->inst, vk->messenger, &vk->ac);
    }
    if (vk->inst)
        vkDestroyInstance(vk->inst, &vk->ac);
    uint64_t left = atomic_load(&vk->hostmem.now);
    if (left)
        folio_log(FOLIO_LOG_WARN, "vk_host_leak", "bytes=%" PRIu64, left);
    pthread_mutex_destroy(&vk->pipe_mu);
    free(vk);
}

const struct vkr_device_info *vkr_device(const struct vkr *vk) { return &vk->info; }
const struct vkr_limits *vkr_limits(const struct vkr *vk) { return &vk->lim; }
const struct vkr_features *vkr_features(const struct vkr *vk) { return &vk->feat; }
int vkr_dead(const struct vkr *vk) { return vk->dead; }
void vkr_mark_lost(struct vkr *vk)
{
    folio_log(FOLIO_LOG_WARN, "vk_marked_lost", "device=%d", vk->info.index);
    vk->dead = 1;
}

void vkr_get_stats(const struct vkr *vk, struct vkr_stats *s)
{
    memset(s, 0, sizeof *s);
    struct vkr *m = (struct vkr *)vk; /* atomics need a non-const object */
    s->validation_messages = atomic_load(&m->validation_messages);
    s->host_allocs = atomic_load(&m->hostmem.allocs);
    s->host_frees = atomic_load(&m->hostmem.frees);
    s->host_bytes_now = atomic_load(&m->hostmem.now);
    s->host_bytes_peak = atomic_load(&m->hostmem.peak);
    for (uint32_t i = 0; i < vk->nblocks; i++)
        s->blocks += vk->blocks[i].in_use ? 1 : 0;
    s->device_bytes = vk->device_bytes;
    s->device_bytes_peak = vk->device_bytes_peak;
    s->pipelines_built = vk->built;
    s->pipelines_failed = vk->failed;
    s->pipeline_requests_after_seal = vk->after_seal;
    s->sealed = vk->sealed;
    s->pipelines_exercised = vk->exercised;
    s->first_use_after_warm = vk->first_after_warm;
    s->cache_hit = vk->cache_hit;
    snprintf(s->cache_miss_reason, sizeof s->cache_miss_reason, "%s", vk->cache_miss_reason);
    snprintf(s->cache_path, sizeof s->cache_path, "%s", vk->cache_path);
    s->prewarm_ms = vk->prewarm_ms;
    s->submits = vk->submits;
    s->dispatches = vk->dispatches;
}

int vkr_stats_json(const struct vkr *vk, char *buf, size_t n)
{
    struct vkr_stats s;
    vkr_get_stats(vk, &s);
    const struct vkr_limits *L = &vk->lim;
    const struct vkr_features *F = &vk->feat;
    char name[300], drv[200], reason[200], path[1100];
    json_escape(name, sizeof name, vk->info.name);
    json_escape(drv, sizeof drv, vk->info.driver_info);
    json_escape(reason, sizeof reason, s.cache_miss_reason);
    json_escape(path, sizeof path, s.cache_path);
    return folio_snprintf(
        buf, n,
        "{\"device\":{\"index\":%d,\"name\":\"%s\",\"type\":\"%s\",\"uuid\":\"%s\","
        "\"vendor_id\":%u,\"device_id\":%u,\"driver_version\":%u,\"driver_info\":\"%s\","
        "\"api\":\"%u.%u.%u\"},"
        "\"limits\":{\"max_alloc\":%" PRIu64 ",\"max_buffer\":%" PRIu64 ",\"max_range\":%" PRIu64
        ",\"block_size\":%" PRIu64 ",\"device_local_bytes\":%" PRIu64 ",\"budget\":%" PRIu64
        ",\"min_ssbo_align\":%u,"
        "\"max_shared\":%u,\"subgroup_size\":%u,\"compute_units\":%u,\"max_push\":%u,\"overridden\":%s},"
        "\"features\":{\"storage_16bit\":%d,\"float16\":%d,\"int8\":%d,\"subgroup_arith\":%d,"
        "\"maintenance4\":%d,\"push_descriptor\":%d,\"memory_budget\":%d,\"device_fault\":%d,"
        "\"coopmat_nv\":%d,\"coopmat_khr\":%d,\"coopmat_khr_i8\":%d,\"coopmat2_nv\":%d,\"timestamps\":%d,"
        "\"validation\":%d},"
        "\"pipelines\":{\"built\":%u,\"failed\":%u,\"sealed\":%s,\"requests_after_seal\":%" PRIu64
        ",\"exercised\":%u,\"first_use_after_warm\":%" PRIu64 ",\"prewarm_ms\":%.1f,\"cache\":\"%s\",\"cache_miss_reason\":\"%s\",\"cache_path\":\"%s\"},"
        "\"memory\":{\"blocks\":%u,\"device_bytes\":%" PRIu64 ",\"device_bytes_peak\":%" PRIu64 "},"
        "\"host_alloc_callbacks\":{\"allocs\":%" PRIu64 ",\"frees\":%" PRIu64
        ",\"bytes_now\":%" PRIu64 ",\"bytes_peak\":%" PRIu64 "},"
        "\"validation_messages\":%" PRIu64 ",\"dead\":%s}",
        vk->info.index, name, vk->info.type, vk->info.uuid_hex, vk->info.vendor_id,
        vk->info.device_id, vk->info.driver_version, drv, VK_API_VERSION_MAJOR(vk->info.api_version),
        VK_API_VERSION_MINOR(vk->info.api_version), VK_API_VERSION_PATCH(vk->info.api_version),
        L->max_alloc, L->max_buffer, L->max_range, L->block_size, L->device_local_bytes, L->budget,
        L->min_ssbo_align, L->max_shared, L->subgroup_size, L->compute_units, L->max_push,
        L->overridden ? "true" : "false", F->storage_16bit, F->float16, F->int8,
        F->subgroup_arith, F->maintenance4, F->push_descriptor, F->memory_budget,
        F->device_fault, F->coopmat_nv, F->coopmat_khr, F->coopmat_khr_i8, F->coopmat2_nv, F->timestamps, F->validation,
        s.pipelines_built,
        s.pipelines_failed, s.sealed ? "true" : "false", s.pipeline_requests_after_seal,
        s.pipelines_exercised, s.first_use_after_warm, s.prewarm_ms, s.cache_hit > 0 ? "hit" : s.cache_hit == 0 ? "miss" : "disabled", reason,
        path, s.blocks, s.device_bytes, s.device_bytes_peak, s.host_allocs, s.host_frees,
        s.host_bytes_now, s.host_bytes_peak, s.validation_messages, vk->dead ? "true" : "false");
}
