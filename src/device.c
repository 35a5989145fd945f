/* device.c: enumerating, choosing and opening Vulkan devices (see nuvec/device.h). */
#include "device.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "buffer.h"
#include "capture.h"
#include "nuvec.h"
#include "error.h"
#include "host.h"
#include "kernel.h"
#include "submit.h"
#include "trace.h"
#include "transfer.h"

#define EXT_PUSH_DESCRIPTOR "VK_KHR_push_descriptor"
#define EXT_EXTERNAL_HOST "VK_EXT_external_memory_host"
#define EXT_EXTERNAL_MEMORY "VK_KHR_external_memory"
#define EXT_MEMORY_BUDGET "VK_EXT_memory_budget"
#define EXT_SYNC2 "VK_KHR_synchronization2"
#define EXT_BFLOAT16 "VK_KHR_shader_bfloat16"
#define EXT_COOPMAT "VK_KHR_cooperative_matrix"
#define EXT_SUBGROUP_SIZE "VK_EXT_subgroup_size_control"
#define LAYER_VALIDATION "VK_LAYER_KHRONOS_validation"

/* ---- names ---------------------------------------------------------------------------- */

const char *nu_device_type_name(nu_device_type type)
{
    switch (type) {
    case NU_DEVICE_INTEGRATED_GPU: return "integrated GPU";
    case NU_DEVICE_DISCRETE_GPU: return "discrete GPU";
    case NU_DEVICE_VIRTUAL_GPU: return "virtual GPU";
    case NU_DEVICE_CPU: return "CPU";
    default: return "other";
    }
}

const char *nu_feature_name(nu_feature f)
{
    static const char *names[NU_FEATURE_COUNT] = {
        [NU_FEATURE_TIMELINE_SEMAPHORE] = "timelineSemaphore",
        [NU_FEATURE_SYNCHRONIZATION2] = "synchronization2",
        [NU_FEATURE_PUSH_DESCRIPTOR] = EXT_PUSH_DESCRIPTOR,
        [NU_FEATURE_EXTERNAL_HOST_MEMORY] = EXT_EXTERNAL_HOST,
        [NU_FEATURE_STORAGE_16BIT] = "storageBuffer16BitAccess",
        [NU_FEATURE_FLOAT16] = "shaderFloat16",
        [NU_FEATURE_INT8] = "shaderInt8",
        [NU_FEATURE_BFLOAT16] = EXT_BFLOAT16,
        [NU_FEATURE_COOPERATIVE_MATRIX] = EXT_COOPMAT,
        [NU_FEATURE_SUBGROUP_SIZE_CONTROL] = "subgroupSizeControl",
        [NU_FEATURE_BUFFER_DEVICE_ADDRESS] = "bufferDeviceAddress",
        [NU_FEATURE_MEMORY_BUDGET] = EXT_MEMORY_BUDGET,
        [NU_FEATURE_DEBUG_UTILS] = "VK_EXT_debug_utils",
    };
    return (unsigned)f < NU_FEATURE_COUNT ? names[f] : "unknown";
}

/* ---- instances ------------------------------------------------------------------------ */

static bool has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(exts[i].extensionName, name) == 0)
            return true;
    return false;
}

static bool env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                    void *user)
{
    nu_device *d = user;
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        atomic_fetch_add(&d->validation_errors, 1);
        fprintf(stderr, "nuvec: validation error: %s\n", data->pMessage);
        nu__fail(d, NU_ERROR_VULKAN, "validation error: %s", data->pMessage);
    } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        fprintf(stderr, "nuvec: validation warning: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

/* Creates an instance; with `d` and validation, also the layer, synchronisation validation
 * and a messenger reporting to d. */
static nu_status create_instance(nu_device *d, bool validation, VkInstance *out, nu__vk_instance *vki,
                                 bool *debug_utils)
{
    const char *why = NULL;
    const nu__vk_global *g = nu__vk_global_table(&why);
    *out = VK_NULL_HANDLE;
    if (!g)
        return nu__fail(d, NU_ERROR_NO_VULKAN, "%s", why);

    uint32_t n = 0;
    g->vkEnumerateInstanceExtensionProperties(NULL, &n, NULL);
    VkExtensionProperties *exts = nu__calloc(n ? n : 1, sizeof *exts);
    if (!exts)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory creating an instance");
    g->vkEnumerateInstanceExtensionProperties(NULL, &n, exts);
    *debug_utils = has_extension(exts, n, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    nu__free(exts);

    const char *layers[1];
    uint32_t layer_count = 0;
    const char *extensions[4];
    uint32_t ext_count = 0;
    if (*debug_utils)
        extensions[ext_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;

    VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT features = {
        .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        .enabledValidationFeatureCount = 1,
        .pEnabledValidationFeatures = enables,
    };
    const void *next = NULL;
    if (validation) {
        uint32_t ln = 0;
        g->vkEnumerateInstanceLayerProperties(&ln, NULL);
        VkLayerProperties *lp = nu__calloc(ln ? ln : 1, sizeof *lp);
        if (!lp)
            return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory creating an instance");
        g->vkEnumerateInstanceLayerProperties(&ln, lp);
        bool found = false;
        for (uint32_t i = 0; i < ln; i++)
            found |= strcmp(lp[i].layerName, LAYER_VALIDATION) == 0;
        nu__free(lp);
        if (!found)
            return nu__fail(d, NU_ERROR_UNSUPPORTED,
                            "validation was asked for (NUVEC_VALIDATION or nu_device_desc.validation) "
                            "but the Khronos validation layer is not installed "
                            "(Debian: vulkan-validationlayers)");
        if (!*debug_utils)
            return nu__fail(d, NU_ERROR_UNSUPPORTED, "validation needs VK_EXT_debug_utils");
        layers[layer_count++] = LAYER_VALIDATION;
        extensions[ext_count++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
        next = &features;
    }

    uint32_t api = VK_API_VERSION_1_2;
    if (g->vkEnumerateInstanceVersion) {
        uint32_t v = 0;
        if (g->vkEnumerateInstanceVersion(&v) == VK_SUCCESS && v >= VK_API_VERSION_1_3)
            api = VK_API_VERSION_1_3;
    }
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "nuvec",
        .pEngineName = "nuvec",
        .engineVersion = VK_MAKE_API_VERSION(0, NUVEC_VERSION_MAJOR, NUVEC_VERSION_MINOR, 0),
        .apiVersion = api,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = next,
        .pApplicationInfo = &app,
        .enabledLayerCount = layer_count,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = ext_count,
        .ppEnabledExtensionNames = extensions,
    };
    VkInstance instance;
    VkResult r = g->vkCreateInstance(&ci, NULL, &instance);
    if (r == VK_SUCCESS)
        nu__vk_keep_drivers_loaded();
    if (r != VK_SUCCESS)
        return nu__fail(d, r == VK_ERROR_INCOMPATIBLE_DRIVER ? NU_ERROR_NO_DEVICE : nu__vk_status(r),
                        "vkCreateInstance failed: %s%s", nu__vk_result_name(r),
                        r == VK_ERROR_INCOMPATIBLE_DRIVER
                            ? " (no Vulkan driver: install mesa-vulkan-drivers for lavapipe)"
                            : "");
    if (validation) {
        /* Keep the layer mapped after the instance goes: it leaks a few objects at exit, and
         * leak checkers can attribute (and suppress) them only while its symbols exist. */
        void *layer = dlopen("libVkLayer_khronos_validation.so", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        (void)layer;
    }
    const char *missing = NULL;
    nu_status st = nu__vk_load_instance(instance, vki, &missing);
    if (st != NU_OK) {
        PFN_vkDestroyInstance destroy =
            (PFN_vkDestroyInstance)g->vkGetInstanceProcAddr(instance, "vkDestroyInstance");
        if (destroy)
            destroy(instance, NULL);
        return nu__fail(d, st, "the Vulkan instance lacks %s", missing);
    }
    *out = instance;
    return NU_OK;
}

/* ---- what a physical device offers ----------------------------------------------------- */

static nu_device_type device_type(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return NU_DEVICE_INTEGRATED_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return NU_DEVICE_DISCRETE_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return NU_DEVICE_VIRTUAL_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return NU_DEVICE_CPU;
    default: return NU_DEVICE_OTHER;
    }
}

/* Fills `info` for `pd`. Returns false only when host memory runs out. */
static bool describe(const nu__vk_instance *vki, VkPhysicalDevice pd, uint32_t index, nu_device_info *info)
{
    memset(info, 0, sizeof *info);
    info->index = index;

    uint32_t n = 0;
    vki->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL);
    VkExtensionProperties *exts = nu__calloc(n ? n : 1, sizeof *exts);
    if (!exts)
        return false;
    vki->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, exts);
    bool ext_host = has_extension(exts, n, EXT_EXTERNAL_HOST);

    VkPhysicalDeviceProperties base;
    vki->vkGetPhysicalDeviceProperties(pd, &base);
    bool v13 = base.apiVersion >= VK_API_VERSION_1_3;

    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host_props = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
    VkPhysicalDeviceSubgroupSizeControlProperties sgc_props = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES,
        .pNext = ext_host ? &host_props : NULL};
    bool sgc_ext = v13 || has_extension(exts, n, EXT_SUBGROUP_SIZE);
    VkPhysicalDeviceSubgroupProperties sg_props = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
        .pNext = sgc_ext ? (void *)&sgc_props : (ext_host ? (void *)&host_props : NULL)};
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &sg_props};
    VkPhysicalDeviceDriverProperties driver = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &m3};
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = &driver};
    vki->vkGetPhysicalDeviceProperties2(pd, &props);

    bool sync2_ext = v13 || has_extension(exts, n, EXT_SYNC2);
    VkPhysicalDeviceSubgroupSizeControlFeatures sgc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
    VkPhysicalDeviceSynchronization2Features sync2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SYNCHRONIZATION_2_FEATURES,
        .pNext = sgc_ext ? &sgc : NULL};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = sync2_ext ? (void *)&sync2 : (sgc_ext ? (void *)&sgc : NULL)};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    if (base.apiVersion >= VK_API_VERSION_1_2)
        vki->vkGetPhysicalDeviceFeatures2(pd, &feats);

    snprintf(info->name, sizeof info->name, "%s", base.deviceName);
    snprintf(info->driver_name, sizeof info->driver_name, "%s", driver.driverName);
    snprintf(info->driver_info, sizeof info->driver_info, "%s", driver.driverInfo);
    info->vendor_id = base.vendorID;
    info->device_id = base.deviceID;
    info->api_version = base.apiVersion;
    info->driver_version = base.driverVersion;
    info->type = device_type(base.deviceType);
    info->unified_memory = info->type == NU_DEVICE_INTEGRATED_GPU || info->type == NU_DEVICE_CPU;

    VkPhysicalDeviceMemoryProperties mem;
    vki->vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    info->heap_count = mem.memoryHeapCount;
    for (uint32_t i = 0; i < mem.memoryHeapCount && i < NU_MAX_MEMORY_HEAPS; i++) {
        info->heaps[i].size = mem.memoryHeaps[i].size;
        info->heaps[i].device_local = mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    }
    info->memory_type_count = mem.memoryTypeCount;
    for (uint32_t i = 0; i < mem.memoryTypeCount && i < NU_MAX_MEMORY_TYPES; i++) {
        VkMemoryPropertyFlags f = mem.memoryTypes[i].propertyFlags;
        info->memory_types[i].heap = mem.memoryTypes[i].heapIndex;
        info->memory_types[i].flags = ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? NU_MEMORY_DEVICE_LOCAL : 0) |
                                      ((f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) ? NU_MEMORY_HOST_VISIBLE : 0) |
                                      ((f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) ? NU_MEMORY_HOST_COHERENT : 0) |
                                      ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? NU_MEMORY_HOST_CACHED : 0) |
                                      ((f & VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT) ? NU_MEMORY_LAZILY_ALLOCATED : 0) |
                                      ((f & VK_MEMORY_PROPERTY_PROTECTED_BIT) ? NU_MEMORY_PROTECTED : 0);
    }

    bool *ft = info->features;
    ft[NU_FEATURE_TIMELINE_SEMAPHORE] = f12.timelineSemaphore;
    ft[NU_FEATURE_SYNCHRONIZATION2] = sync2_ext && sync2.synchronization2;
    ft[NU_FEATURE_PUSH_DESCRIPTOR] = has_extension(exts, n, EXT_PUSH_DESCRIPTOR);
    ft[NU_FEATURE_EXTERNAL_HOST_MEMORY] = ext_host;
    ft[NU_FEATURE_STORAGE_16BIT] = f11.storageBuffer16BitAccess;
    ft[NU_FEATURE_FLOAT16] = f12.shaderFloat16;
    ft[NU_FEATURE_INT8] = f12.shaderInt8;
    ft[NU_FEATURE_BFLOAT16] = has_extension(exts, n, EXT_BFLOAT16);
    ft[NU_FEATURE_COOPERATIVE_MATRIX] = has_extension(exts, n, EXT_COOPMAT);
    ft[NU_FEATURE_SUBGROUP_SIZE_CONTROL] = sgc_ext && sgc.subgroupSizeControl;
    ft[NU_FEATURE_BUFFER_DEVICE_ADDRESS] = f12.bufferDeviceAddress;
    ft[NU_FEATURE_MEMORY_BUDGET] = has_extension(exts, n, EXT_MEMORY_BUDGET);
    /* Debug utils is an instance extension: the caller sets it. */
    nu__free(exts);

    const VkPhysicalDeviceLimits *l = &base.limits;
    info->subgroup_size = sg_props.subgroupSize;
    info->min_subgroup_size = sgc_ext ? sgc_props.minSubgroupSize : sg_props.subgroupSize;
    info->max_subgroup_size = sgc_ext ? sgc_props.maxSubgroupSize : sg_props.subgroupSize;
    for (int i = 0; i < 3; i++) {
        info->max_workgroup_count[i] = l->maxComputeWorkGroupCount[i];
        info->max_workgroup_size[i] = l->maxComputeWorkGroupSize[i];
    }
    info->max_workgroup_invocations = l->maxComputeWorkGroupInvocations;
    info->max_shared_memory = l->maxComputeSharedMemorySize;
    info->max_push_constants = l->maxPushConstantsSize;
    info->max_storage_buffer_range = l->maxStorageBufferRange;
    info->max_allocation_size = m3.maxMemoryAllocationSize;
    info->max_allocation_count = l->maxMemoryAllocationCount;
    info->min_storage_buffer_offset_alignment = l->minStorageBufferOffsetAlignment;
    info->min_imported_host_pointer_alignment = ext_host ? host_props.minImportedHostPointerAlignment : 0;
    info->non_coherent_atom_size = l->nonCoherentAtomSize;
    info->timestamp_period = l->timestampPeriod;

    uint32_t qn = 0;
    vki->vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, NULL);
    VkQueueFamilyProperties *qf = nu__calloc(qn ? qn : 1, sizeof *qf);
    if (!qf)
        return false;
    vki->vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, qf);
    info->compute_queue_family = UINT32_MAX;
    info->transfer_queue_family = UINT32_MAX;
    /* Compute: prefer a compute-only family (async compute), else any with compute. */
    for (uint32_t i = 0; i < qn; i++) {
        VkQueueFlags f = qf[i].queueFlags;
        if ((f & VK_QUEUE_COMPUTE_BIT) && !(f & VK_QUEUE_GRAPHICS_BIT) && info->compute_queue_family == UINT32_MAX)
            info->compute_queue_family = i;
    }
    for (uint32_t i = 0; i < qn && info->compute_queue_family == UINT32_MAX; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            info->compute_queue_family = i;
    /* Transfer: a family with transfer but neither compute nor graphics (the copy engines). */
    for (uint32_t i = 0; i < qn; i++) {
        VkQueueFlags f = qf[i].queueFlags;
        if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT))) {
            info->transfer_queue_family = i;
            info->separate_transfer_queue = true;
            break;
        }
    }
    if (!info->separate_transfer_queue)
        info->transfer_queue_family = info->compute_queue_family;
    nu__free(qf);
    return true;
}

/* Why nuvec cannot use a device, or NULL if it can. */
static const char *unusable(const nu_device_info *info)
{
    if (info->api_version < VK_API_VERSION_1_2)
        return "it supports Vulkan 1.1 at most (nuvec needs 1.2)";
    if (info->compute_queue_family == UINT32_MAX)
        return "it has no compute queue";
    if (!info->features[NU_FEATURE_TIMELINE_SEMAPHORE])
        return "it lacks timeline semaphores";
    if (!info->features[NU_FEATURE_SYNCHRONIZATION2])
        return "it lacks synchronization2";
    return NULL;
}

static nu_status list_devices(nu_device *d, const nu__vk_instance *vki, VkInstance instance,
                              VkPhysicalDevice **pds, nu_device_info **infos, uint32_t *count)
{
    *pds = NULL;
    *infos = NULL;
    *count = 0;
    uint32_t n = 0;
    VkResult r = vki->vkEnumeratePhysicalDevices(instance, &n, NULL);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "vkEnumeratePhysicalDevices failed: %s", nu__vk_result_name(r));
    VkPhysicalDevice *p = nu__calloc(n ? n : 1, sizeof *p);
    nu_device_info *in = nu__calloc(n ? n : 1, sizeof *in);
    if (!p || !in) {
        nu__free(p);
        nu__free(in);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory listing devices");
    }
    vki->vkEnumeratePhysicalDevices(instance, &n, p);
    for (uint32_t i = 0; i < n; i++) {
        if (!describe(vki, p[i], i, &in[i])) {
            nu__free(p);
            nu__free(in);
            return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory describing devices");
        }
    }
    *pds = p;
    *infos = in;
    *count = n;
    return NU_OK;
}

nu_status nu_device_enumerate(nu_device_info *infos, uint32_t capacity, uint32_t *count)
{
    if (!count || (capacity && !infos))
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_device_enumerate: NULL count or infos");
    *count = 0;
    VkInstance instance;
    nu__vk_instance vki;
    bool debug_utils;
    nu_status st = create_instance(NULL, false, &instance, &vki, &debug_utils);
    if (st != NU_OK)
        return st;
    VkPhysicalDevice *pds;
    nu_device_info *all;
    uint32_t n;
    st = list_devices(NULL, &vki, instance, &pds, &all, &n);
    if (st == NU_OK) {
        for (uint32_t i = 0; i < n && i < capacity; i++) {
            infos[i] = all[i];
            infos[i].features[NU_FEATURE_DEBUG_UTILS] = debug_utils;
        }
        *count = n;
        nu__free(pds);
        nu__free(all);
    }
    vki.vkDestroyInstance(instance, NULL);
    return st;
}

static int type_rank(nu_device_type t)
{
    switch (t) {
    case NU_DEVICE_DISCRETE_GPU: return 0;
    case NU_DEVICE_INTEGRATED_GPU: return 1;
    case NU_DEVICE_VIRTUAL_GPU: return 2;
    case NU_DEVICE_CPU: return 3;
    default: return 4;
    }
}

static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return true;
    return false;
}

/* Picks a device per `select` (or the default order); fills *chosen or fails naming the
 * devices there are. */
static nu_status choose(nu_device *d, const char *select, const char *origin, const nu_device_info *infos,
                        uint32_t n, uint32_t *chosen)
{
    char list[768] = "";
    size_t len = 0;
    for (uint32_t i = 0; i < n && len < sizeof list - 1; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%u: %s", i ? ", " : "", i, infos[i].name);
    if (n == 0)
        return nu__fail(d, NU_ERROR_NO_DEVICE,
                        "no Vulkan device found (install a driver; mesa-vulkan-drivers gives lavapipe on the CPU)");

    if (select && *select) {
        bool digits = true;
        for (const char *c = select; *c; c++)
            digits &= isdigit((unsigned char)*c) != 0;
        uint32_t match = UINT32_MAX;
        if (digits) {
            unsigned long idx = strtoul(select, NULL, 10);
            if (idx < n)
                match = (uint32_t)idx;
        } else {
            for (uint32_t i = 0; i < n && match == UINT32_MAX; i++)
                if (contains_nocase(infos[i].name, select))
                    match = i;
        }
        if (match == UINT32_MAX)
            return nu__fail(d, NU_ERROR_NO_DEVICE, "%s \"%s\" matches none of the %u Vulkan device(s): %s",
                            origin, select, n, list);
        const char *why = unusable(&infos[match]);
        if (why)
            return nu__fail(d, NU_ERROR_UNSUPPORTED, "device %u (%s) chosen by %s cannot be used: %s", match,
                            infos[match].name, origin, why);
        *chosen = match;
        return NU_OK;
    }
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        if (unusable(&infos[i]))
            continue;
        if (best == UINT32_MAX || type_rank(infos[i].type) < type_rank(infos[best].type))
            best = i;
    }
    if (best == UINT32_MAX)
        return nu__fail(d, NU_ERROR_NO_DEVICE, "none of the %u Vulkan device(s) can be used (%s): device 0 %s", n,
                        list, unusable(&infos[0]));
    *chosen = best;
    return NU_OK;
}

/* ---- memory types ----------------------------------------------------------------------- */

static int find_type(const nu_device_info *info, uint32_t want, uint32_t avoid, uint32_t prefer)
{
    int best = -1;
    uint64_t best_heap = 0;
    bool best_pref = false;
    for (uint32_t i = 0; i < info->memory_type_count; i++) {
        uint32_t f = info->memory_types[i].flags;
        if ((f & want) != want || (f & avoid) || (f & NU_MEMORY_PROTECTED))
            continue;
        bool pref = (f & prefer) == prefer;
        uint64_t heap = info->heaps[info->memory_types[i].heap].size;
        if (best < 0 || (pref && !best_pref) || (pref == best_pref && heap > best_heap)) {
            best = (int)i;
            best_heap = heap;
            best_pref = pref;
        }
    }
    return best;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU write and read bandwidth (GB/s, best of 3) of 4 MiB of memory type `type`; false if it
 * could not be allocated. */
static bool measure_type(nu_device *d, uint32_t type, double *write_gbps, double *read_gbps)
{
    enum { BYTES = 4 << 20 };
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = BYTES,
                               .memoryTypeIndex = type};
    VkDeviceMemory mem;
    if (d->vkd.vkAllocateMemory(d->device, &ai, NULL, &mem) != VK_SUCCESS)
        return false;
    void *p = NULL;
    uint8_t *host = nu__malloc(BYTES);
    if (!host || d->vkd.vkMapMemory(d->device, mem, 0, VK_WHOLE_SIZE, 0, &p) != VK_SUCCESS) {
        nu__free(host);
        d->vkd.vkFreeMemory(d->device, mem, NULL);
        return false;
    }
    double bw = 0, br = 0;
    memset(host, 1, BYTES);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        memcpy(p, host, BYTES);
        double t1 = now_s();
        memcpy(host, p, BYTES);
        double t2 = now_s();
        if (t1 > t0 && BYTES / (t1 - t0) > bw)
            bw = BYTES / (t1 - t0);
        if (t2 > t1 && BYTES / (t2 - t1) > br)
            br = BYTES / (t2 - t1);
    }
    d->vkd.vkUnmapMemory(d->device, mem);
    d->vkd.vkFreeMemory(d->device, mem, NULL);
    nu__free(host);
    *write_gbps = bw / 1e9;
    *read_gbps = br / 1e9;
    return true;
}

/* Chooses the memory types of shared and private buffers (see nu_memory_choice). */
static nu_status choose_memory(nu_device *d, nu_shared_memory want)
{
    const nu_device_info *info = &d->info;
    nu_memory_choice *m = &d->memory;
    const uint32_t HV = NU_MEMORY_HOST_VISIBLE | NU_MEMORY_HOST_COHERENT;
    int priv = find_type(info, NU_MEMORY_DEVICE_LOCAL, NU_MEMORY_HOST_VISIBLE, 0);
    if (priv < 0)
        priv = find_type(info, NU_MEMORY_DEVICE_LOCAL, 0, 0);
    if (priv < 0)
        priv = find_type(info, 0, 0, 0);
    int host = find_type(info, HV, NU_MEMORY_DEVICE_LOCAL, NU_MEMORY_HOST_CACHED);
    int dev = find_type(info, HV | NU_MEMORY_DEVICE_LOCAL, 0, NU_MEMORY_HOST_CACHED);
    if (priv < 0 || (host < 0 && dev < 0))
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "device %s has no host-visible coherent memory type", info->name);
    m->private_type = (uint32_t)priv;

    if (info->unified_memory || host < 0) {
        m->shared_type = (uint32_t)(dev >= 0 ? dev : host);
        m->shared_device_local = dev >= 0;
        snprintf(m->reason, sizeof m->reason, "%s: shared buffers use memory type %u (%s)",
                 info->unified_memory ? "unified memory" : "no host-only memory type", m->shared_type,
                 dev >= 0 ? "device-local, host-visible" : "host-visible");
        return NU_OK;
    }
    if (dev < 0) {
        m->shared_type = (uint32_t)host;
        snprintf(m->reason, sizeof m->reason,
                 "no device-local host-visible memory: shared buffers use host memory type %u", host);
        return NU_OK;
    }
    uint64_t bar = info->heaps[info->memory_types[dev].heap].size;
    char b[32];
    if (want == NU_SHARED_MEMORY_HOST || want == NU_SHARED_MEMORY_DEVICE) {
        m->shared_type = (uint32_t)(want == NU_SHARED_MEMORY_DEVICE ? dev : host);
        m->shared_device_local = want == NU_SHARED_MEMORY_DEVICE;
        snprintf(m->reason, sizeof m->reason, "as asked: shared buffers use %s memory type %u",
                 m->shared_device_local ? "device-local host-visible" : "host", m->shared_type);
        return NU_OK;
    }
    if (bar <= (256ull << 20)) {
        m->shared_type = (uint32_t)host;
        snprintf(m->reason, sizeof m->reason,
                 "device-local host-visible memory is a %s BAR window only: shared buffers use host memory type %d",
                 nu__bytes(b, sizeof b, bar), host);
        return NU_OK;
    }
    /* Resizable BAR: GPU access is fast; CPU reads may be very slow (uncached reads over the
     * bus). Measure both, and use it unless CPU access is more than 2x slower. */
    bool ok = measure_type(d, (uint32_t)host, &m->measured_write_gbps[0], &m->measured_read_gbps[0]) &&
              measure_type(d, (uint32_t)dev, &m->measured_write_gbps[1], &m->measured_read_gbps[1]);
    bool use = ok && m->measured_read_gbps[1] * 2 >= m->measured_read_gbps[0] &&
               m->measured_write_gbps[1] * 2 >= m->measured_write_gbps[0];
    m->shared_type = (uint32_t)(use ? dev : host);
    m->shared_device_local = use;
    snprintf(m->reason, sizeof m->reason,
             "resizable BAR (%s device-local host-visible): CPU read %.2f GB/s, write %.2f GB/s there "
             "against %.2f / %.2f GB/s in host memory: shared buffers use %s memory type %u",
             nu__bytes(b, sizeof b, bar), m->measured_read_gbps[1], m->measured_write_gbps[1],
             m->measured_read_gbps[0], m->measured_write_gbps[0], use ? "device-local" : "host", m->shared_type);
    return NU_OK;
}

/* ---- the Vulkan memory backend of the allocator ----------------------------------------- */

nu_status nu__backend_allocate(void *ctx, int kind, uint64_t size, void **memory, void **mapped)
{
    nu_device *d = ctx;
    *memory = NULL;
    *mapped = NULL;
    nu__vk_block *b = nu__calloc(1, sizeof *b);
    if (!b)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = size,
                               .memoryTypeIndex = d->memory_type[kind]};
    VkResult r = d->vkd.vkAllocateMemory(d->device, &ai, NULL, &b->memory);
    if (r == VK_SUCCESS) {
        /* Shared by the compute and transfer queues without ownership transfers. */
        uint32_t families[2] = {d->info.compute_queue_family, d->info.transfer_queue_family};
        VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                                 .usage = d->buffer_usage,
                                 .sharingMode = d->info.separate_transfer_queue ? VK_SHARING_MODE_CONCURRENT
                                                                                : VK_SHARING_MODE_EXCLUSIVE,
                                 .queueFamilyIndexCount = d->info.separate_transfer_queue ? 2 : 0,
                                 .pQueueFamilyIndices = families};
        r = d->vkd.vkCreateBuffer(d->device, &bi, NULL, &b->buffer);
        if (r == VK_SUCCESS) {
            r = d->vkd.vkBindBufferMemory(d->device, b->buffer, b->memory, 0);
            if (r == VK_SUCCESS && d->kind_mapped[kind])
                r = d->vkd.vkMapMemory(d->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped);
            if (r != VK_SUCCESS)
                d->vkd.vkDestroyBuffer(d->device, b->buffer, NULL);
        }
        if (r != VK_SUCCESS)
            d->vkd.vkFreeMemory(d->device, b->memory, NULL);
    }
    if (r != VK_SUCCESS) {
        nu__free(b);
        return nu__vk_status(r);
    }
    *memory = b;
    *mapped = b->mapped;
    return NU_OK;
}

void nu__backend_release(void *ctx, int kind, void *memory, uint64_t size)
{
    nu_device *d = ctx;
    nu__vk_block *b = memory;
    d->vkd.vkDestroyBuffer(d->device, b->buffer, NULL);
    d->vkd.vkFreeMemory(d->device, b->memory, NULL); /* also unmaps */
    nu__free(b);
}

/* ---- opening and closing ---------------------------------------------------------------- */

void nu__device_name_object(nu_device *d, VkObjectType type, uint64_t handle, const char *name)
{
    if (!d->vkd.vkSetDebugUtilsObjectNameEXT || !handle)
        return;
    VkDebugUtilsObjectNameInfoEXT ni = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT,
                                        .objectType = type, .objectHandle = handle, .pObjectName = name};
    d->vkd.vkSetDebugUtilsObjectNameEXT(d->device, &ni);
}

static nu_status create_queue(nu_device *d, nu__queue *q, uint32_t family, uint32_t index, const char *name)
{
    q->family = family;
    q->index = index;
    q->submitted = 0;
    d->vkd.vkGetDeviceQueue(d->device, family, 0, &q->queue);
    VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                    .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE, .initialValue = 0};
    VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
    VkResult r = d->vkd.vkCreateSemaphore(d->device, &si, NULL, &q->timeline);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "creating a timeline semaphore failed: %s", nu__vk_result_name(r));
    if (pthread_mutex_init(&q->lock, NULL) != 0) {
        d->vkd.vkDestroySemaphore(d->device, q->timeline, NULL);
        q->timeline = VK_NULL_HANDLE;
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory creating a queue lock");
    }
    nu__device_name_object(d, VK_OBJECT_TYPE_SEMAPHORE, (uint64_t)q->timeline, name);
    return NU_OK;
}

static nu_status create_device(nu_device *d)
{
    const nu_device_info *info = &d->info;
    uint32_t n = 0;
    d->vki.vkEnumerateDeviceExtensionProperties(d->physical, NULL, &n, NULL);
    VkExtensionProperties *exts = nu__calloc(n ? n : 1, sizeof *exts);
    if (!exts)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory creating the device");
    d->vki.vkEnumerateDeviceExtensionProperties(d->physical, NULL, &n, exts);
    const char *enable[8];
    uint32_t count = 0;
    bool v13 = info->api_version >= VK_API_VERSION_1_3;
    if (info->features[NU_FEATURE_PUSH_DESCRIPTOR])
        enable[count++] = EXT_PUSH_DESCRIPTOR;
    if (info->features[NU_FEATURE_EXTERNAL_HOST_MEMORY]) {
        enable[count++] = EXT_EXTERNAL_HOST;
        if (info->api_version < VK_API_VERSION_1_1 && has_extension(exts, n, EXT_EXTERNAL_MEMORY))
            enable[count++] = EXT_EXTERNAL_MEMORY;
    }
    if (info->features[NU_FEATURE_MEMORY_BUDGET])
        enable[count++] = EXT_MEMORY_BUDGET;
    if (!v13) {
        enable[count++] = EXT_SYNC2;
        if (info->features[NU_FEATURE_SUBGROUP_SIZE_CONTROL])
            enable[count++] = EXT_SUBGROUP_SIZE;
    }
    nu__free(exts);
    d->has_push_descriptor = info->features[NU_FEATURE_PUSH_DESCRIPTOR];
    /* NUVEC_NO_HOST_IMPORT=1 turns zero-copy file mapping off (copies instead), to rule a
     * driver's import out when looking for a problem. */
    const char *no_import = getenv("NUVEC_NO_HOST_IMPORT");
    d->has_external_host_memory = info->features[NU_FEATURE_EXTERNAL_HOST_MEMORY] &&
                                  !(no_import && *no_import && strcmp(no_import, "0") != 0);
    nu__mapping_device_init(d);

    VkPhysicalDeviceSubgroupSizeControlFeatures sgc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
        .subgroupSizeControl = info->features[NU_FEATURE_SUBGROUP_SIZE_CONTROL]};
    VkPhysicalDeviceSynchronization2Features sync2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SYNCHRONIZATION_2_FEATURES,
        .pNext = info->features[NU_FEATURE_SUBGROUP_SIZE_CONTROL] ? &sgc : NULL, .synchronization2 = VK_TRUE};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = &sync2,
                                            .timelineSemaphore = VK_TRUE,
                                            /* required by Vulkan 1.2: timestamp queries are reset
                                             * on the host (a transfer-only queue cannot) */
                                            .hostQueryReset = VK_TRUE,
                                            .shaderFloat16 = info->features[NU_FEATURE_FLOAT16],
                                            .shaderInt8 = info->features[NU_FEATURE_INT8],
                                            .storageBuffer8BitAccess = VK_FALSE};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12,
                                            .storageBuffer16BitAccess = info->features[NU_FEATURE_STORAGE_16BIT]};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};

    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci[2] = {
        {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = info->compute_queue_family,
         .queueCount = 1, .pQueuePriorities = &priority},
        {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = info->transfer_queue_family,
         .queueCount = 1, .pQueuePriorities = &priority},
    };
    VkDeviceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &feats,
        .queueCreateInfoCount = info->separate_transfer_queue ? 2 : 1,
        .pQueueCreateInfos = qci,
        .enabledExtensionCount = count,
        .ppEnabledExtensionNames = enable,
    };
    VkResult r = d->vki.vkCreateDevice(d->physical, &ci, NULL, &d->device);
    if (r != VK_SUCCESS) {
        d->device = VK_NULL_HANDLE;
        return nu__fail(d, nu__vk_status(r), "vkCreateDevice on %s failed: %s", info->name, nu__vk_result_name(r));
    }
    const char *missing = NULL;
    nu_status st = nu__vk_load_device(&d->vki, d->device, &d->vkd, &missing);
    if (st != NU_OK)
        return nu__fail(d, st, "the Vulkan device %s lacks %s", info->name, missing);
    return NU_OK;
}

static void destroy(nu_device *d)
{
    if (d->device) {
        nu__capture_fini(d); /* ends a running capture: needs the submitter */
        nu__trace_fini(d);   /* writes a running trace: needs the submitter */
        d->vkd.vkDeviceWaitIdle(d->device);
        nu__submitter_fini(d);
        nu__kernels_fini(d);
        nu__transfer_fini(d);
        /* The pool first: releasing cached pieces can free buffer handles (quarantined in debug
         * builds). */
        if (d->pool)
            nu__pool_destroy(d->pool);
        nu__buffer_quarantine_fini(d);
        if (d->placeholder)
            nu__backend_release(d, NU__KIND_PRIVATE, d->placeholder,
                                (uint64_t)NU__PLACEHOLDER_SLOT * NU__PLACEHOLDER_SLOTS);
        for (int i = 0; i < 2; i++) {
            if (d->queues[i].timeline) {
                d->vkd.vkDestroySemaphore(d->device, d->queues[i].timeline, NULL);
                pthread_mutex_destroy(&d->queues[i].lock);
            }
        }
        d->vkd.vkDestroyDevice(d->device, NULL);
    }
    if (d->messenger)
        d->vki.vkDestroyDebugUtilsMessengerEXT(d->instance, d->messenger, NULL);
    if (d->instance)
        d->vki.vkDestroyInstance(d->instance, NULL);
    pthread_mutex_destroy(&d->placeholder_lock);
    pthread_mutex_destroy(&d->staging_lock);
    pthread_mutex_destroy(&d->handles_lock);
    pthread_mutex_destroy(&d->error_lock);
    nu__free(d);
}

static uint64_t default_block_size(const nu_device *d, uint64_t asked)
{
    uint64_t heap = UINT64_MAX;
    for (int k = 0; k < NU__KIND_COUNT; k++) {
        uint64_t h = d->info.heaps[d->info.memory_types[d->memory_type[k]].heap].size;
        if (h < heap)
            heap = h;
    }
    uint64_t b = asked ? asked : 64ull << 20;
    while (b > (1ull << 20) && (b > heap / 8 || b > d->info.max_allocation_size))
        b >>= 1;
    /* A power of two, at least 1 MiB. */
    uint64_t p = 1ull << 20;
    while (p < b)
        p <<= 1;
    return p;
}

nu_status nu_device_open(const nu_device_desc *desc, nu_device **out)
{
    static const nu_device_desc defaults = {0};
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_device_open: NULL out");
    *out = NULL;
    if (!desc)
        desc = &defaults;
    if ((unsigned)desc->shared_memory > NU_SHARED_MEMORY_DEVICE)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_device_open: unknown shared_memory %d",
                        (int)desc->shared_memory);
    nu_device *d = nu__calloc(1, sizeof *d);
    if (!d)
        return nu__fail(NULL, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    pthread_mutex_init(&d->error_lock, NULL);
    pthread_mutex_init(&d->placeholder_lock, NULL);
    pthread_mutex_init(&d->staging_lock, NULL);
    pthread_mutex_init(&d->handles_lock, NULL);
    atomic_init(&d->validation_errors, 0);
    atomic_init(&d->commits, 0);
    d->validation = desc->validation || env_on("NUVEC_VALIDATION");

    nu__capture_prepare();
    nu_status st = create_instance(d, d->validation, &d->instance, &d->vki, &d->has_debug_utils);
    if (st != NU_OK)
        goto fail;
    nu__capture_attach(d);
    if (d->validation) {
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            .pfnUserCallback = on_validation,
            .pUserData = d,
        };
        VkResult r = d->vki.vkCreateDebugUtilsMessengerEXT(d->instance, &mi, NULL, &d->messenger);
        if (r != VK_SUCCESS) {
            st = nu__fail(d, nu__vk_status(r), "creating the validation messenger failed: %s", nu__vk_result_name(r));
            goto fail;
        }
    }

    VkPhysicalDevice *pds;
    nu_device_info *infos;
    uint32_t n;
    st = list_devices(d, &d->vki, d->instance, &pds, &infos, &n);
    if (st != NU_OK)
        goto fail;
    const char *select = desc->select;
    const char *origin = "nu_device_desc.select";
    if (!select || !*select) {
        select = getenv("NUVEC_DEVICE");
        origin = "NUVEC_DEVICE";
    }
    uint32_t chosen = 0;
    st = choose(d, select, origin, infos, n, &chosen);
    if (st == NU_OK) {
        d->physical = pds[chosen];
        d->info = infos[chosen];
        d->info.features[NU_FEATURE_DEBUG_UTILS] = d->has_debug_utils;
    }
    nu__free(pds);
    nu__free(infos);
    if (st != NU_OK)
        goto fail;

    if ((st = create_device(d)) != NU_OK)
        goto fail;
    if ((st = create_queue(d, &d->queues[0], d->info.compute_queue_family, 0, "nuvec compute timeline")) != NU_OK)
        goto fail;
    d->compute = &d->queues[0];
    d->transfer = d->compute;
    if (d->info.separate_transfer_queue) {
        if ((st = create_queue(d, &d->queues[1], d->info.transfer_queue_family, 1, "nuvec transfer timeline")) !=
            NU_OK)
            goto fail;
        d->transfer = &d->queues[1];
    }
    if ((st = choose_memory(d, desc->shared_memory)) != NU_OK)
        goto fail;
    d->memory_type[NU__KIND_SHARED] = d->memory.shared_type;
    d->memory_type[NU__KIND_PRIVATE] = d->memory.private_type;
    d->kind_mapped[NU__KIND_SHARED] = true;
    d->kind_mapped[NU__KIND_PRIVATE] = false; /* private buffers have no CPU pointer */
    d->buffer_usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                      VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT;

    /* The default memory limit: the device-local heap private buffers use. */
    uint64_t heap = d->info.heaps[d->info.memory_types[d->memory.private_type].heap].size;
    long page = sysconf(_SC_PAGESIZE);
    nu__pool_config pc = {
        .block_size = default_block_size(d, desc->block_size),
        .memory_limit = heap,
        .page_size = page > 0 ? (uint64_t)page : 4096,
    };
    nu__memory_backend backend = {.ctx = d, .allocate = nu__backend_allocate, .release = nu__backend_release};
    if ((st = nu__pool_create(&pc, &backend, &d->pool)) != NU_OK) {
        st = nu__fail(d, st, "out of host memory creating the allocator");
        goto fail;
    }
    if ((st = nu__buffer_quarantine_init(d)) != NU_OK)
        goto fail;
    if ((st = nu__kernels_init(d)) != NU_OK)
        goto fail;
    if ((st = nu__submitter_init(d)) != NU_OK)
        goto fail;
    if ((st = nu__trace_init(d)) != NU_OK)
        goto fail;
    *out = d;
    return NU_OK;

fail:;
    /* Keep the message: destroy() must not lose it (the thread's copy survives). */
    destroy(d);
    return st;
}

void nu_device_close(nu_device *device)
{
    if (device)
        destroy(device);
}

const nu_device_info *nu_device_get_info(const nu_device *device) { return &device->info; }
const nu_memory_choice *nu_device_memory_choice(const nu_device *device) { return &device->memory; }
uint32_t nu_device_validation_errors(const nu_device *device)
{
    return device ? atomic_load(&((nu_device *)device)->validation_errors) : 0;
}

/* ---- queues ----------------------------------------------------------------------------- */

nu_status nu__queue_wait(nu_device *d, nu__queue *q, uint64_t value, uint64_t timeout_ns)
{
    /* Spin briefly first: a blocking wait costs hundreds of microseconds on some drivers
     * (590 us on the H200) where the work itself finishes in a few. */
    uint64_t v = 0;
    VkResult r;
    for (int i = 0; i < 2000; i++) {
        r = d->vkd.vkGetSemaphoreCounterValue(d->device, q->timeline, &v);
        if (r != VK_SUCCESS)
            return nu__fail(d, nu__vk_status(r), "waiting for the %s queue: %s",
                            q->index ? "transfer" : "compute", nu__vk_result_name(r));
        if (v >= value)
            return NU_OK;
    }
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                              .pSemaphores = &q->timeline, .pValues = &value};
    r = d->vkd.vkWaitSemaphores(d->device, &wi, timeout_ns);
    if (r == VK_SUCCESS)
        return NU_OK;
    if (r == VK_TIMEOUT)
        return nu__fail(d, NU_ERROR_TIMEOUT, "the %s queue did not reach %llu within %llu ns",
                        q->index ? "transfer" : "compute", (unsigned long long)value, (unsigned long long)timeout_ns);
    return nu__fail(d, nu__vk_status(r), "waiting for the %s queue: %s", q->index ? "transfer" : "compute",
                    nu__vk_result_name(r));
}

nu_status nu__device_placeholder(nu_device *d, VkBuffer *out)
{
    pthread_mutex_lock(&d->placeholder_lock);
    nu_status st = NU_OK;
    if (!d->placeholder) {
        void *memory, *mapped;
        st = nu__backend_allocate(d, NU__KIND_PRIVATE, (uint64_t)NU__PLACEHOLDER_SLOT * NU__PLACEHOLDER_SLOTS, &memory,
                                  &mapped);
        if (st == NU_OK) {
            d->placeholder = memory;
            nu__device_name_object(d, VK_OBJECT_TYPE_BUFFER, (uint64_t)d->placeholder->buffer,
                                   "nuvec placeholder (empty buffers)");
        } else {
            nu__fail(d, st, "allocating the placeholder for empty buffers failed");
        }
    }
    *out = d->placeholder ? d->placeholder->buffer : VK_NULL_HANDLE;
    pthread_mutex_unlock(&d->placeholder_lock);
    return st;
}
