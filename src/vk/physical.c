/* physical.c: what each physical device offers, and which one is opened (see nuvec/device.h). */
#include "vk/physical.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/host.h"
#include "vk/instance.h"

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
        [NU_FEATURE_PUSH_DESCRIPTOR] = NU__EXT_PUSH_DESCRIPTOR,
        [NU_FEATURE_EXTERNAL_HOST_MEMORY] = NU__EXT_EXTERNAL_HOST,
        [NU_FEATURE_STORAGE_16BIT] = "storageBuffer16BitAccess",
        [NU_FEATURE_FLOAT16] = "shaderFloat16",
        [NU_FEATURE_INT8] = "shaderInt8",
        [NU_FEATURE_BFLOAT16] = NU__EXT_BFLOAT16,
        [NU_FEATURE_COOPERATIVE_MATRIX] = NU__EXT_COOPMAT,
        [NU_FEATURE_SUBGROUP_SIZE_CONTROL] = "subgroupSizeControl",
        [NU_FEATURE_BUFFER_DEVICE_ADDRESS] = "bufferDeviceAddress",
        [NU_FEATURE_MEMORY_BUDGET] = NU__EXT_MEMORY_BUDGET,
        [NU_FEATURE_DEBUG_UTILS] = "VK_EXT_debug_utils",
        [NU_FEATURE_INTEGER_DOT_PRODUCT] = "shaderIntegerDotProduct",
        [NU_FEATURE_VULKAN_MEMORY_MODEL] = "vulkanMemoryModel",
        [NU_FEATURE_NV_COOPERATIVE_MATRIX2] = NU__EXT_COOPMAT2,
    };
    return (unsigned)f < NU_FEATURE_COUNT ? names[f] : "unknown";
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

#define NU__COMPONENT_TYPE_BFLOAT16 1000141000
static nu_dtype component_dtype(VkComponentTypeKHR t)
{
    switch (t) {
    case VK_COMPONENT_TYPE_FLOAT16_KHR: return NU_DTYPE_F16;
    case VK_COMPONENT_TYPE_FLOAT32_KHR: return NU_DTYPE_F32;
    case VK_COMPONENT_TYPE_FLOAT64_KHR: return NU_DTYPE_F64;
    case VK_COMPONENT_TYPE_SINT8_KHR: return NU_DTYPE_I8;
    case VK_COMPONENT_TYPE_UINT8_KHR: return NU_DTYPE_U8;
    case VK_COMPONENT_TYPE_SINT16_KHR: return NU_DTYPE_I16;
    case VK_COMPONENT_TYPE_UINT16_KHR: return NU_DTYPE_U16;
    case VK_COMPONENT_TYPE_SINT32_KHR: return NU_DTYPE_I32;
    case VK_COMPONENT_TYPE_UINT32_KHR: return NU_DTYPE_U32;
    case VK_COMPONENT_TYPE_SINT64_KHR: return NU_DTYPE_I64;
    case VK_COMPONENT_TYPE_UINT64_KHR: return NU_DTYPE_U64;
    case VK_COMPONENT_TYPE_FLOAT_E4M3_NV: return NU_DTYPE_F8_E4M3;
    case VK_COMPONENT_TYPE_FLOAT_E5M2_NV: return NU_DTYPE_F8_E5M2;
    default:
        /* VK_COMPONENT_TYPE_BFLOAT16_KHR (VK_KHR_shader_bfloat16), newer than the 1.4.309 headers. */
        return (int)t == NU__COMPONENT_TYPE_BFLOAT16 ? NU_DTYPE_BF16 : NU_DTYPE_COUNT;
    }
}

/* The subgroup-scope products of VK_KHR_cooperative_matrix into info (at most
 * NU_MAX_COOPERATIVE_MATRIX_SHAPES; BF16 ones only with `bf16`: VK_KHR_shader_bfloat16's
 * shaderBFloat16CooperativeMatrix). Returns false only when host memory runs out. */
static bool cooperative_matrix_shapes(const nu__vk_instance *vki, VkPhysicalDevice pd, bool bf16,
                                      nu_device_info *info)
{
    uint32_t n = 0;
    if (vki->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &n, NULL) != VK_SUCCESS || !n)
        return true;
    VkCooperativeMatrixPropertiesKHR *p = nu__calloc(n, sizeof *p);
    if (!p)
        return false;
    for (uint32_t i = 0; i < n; i++)
        p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
    VkResult r = vki->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &n, p);
    for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n; i++) {
        if (p[i].scope != VK_SCOPE_SUBGROUP_KHR || info->cooperative_matrix_count == NU_MAX_COOPERATIVE_MATRIX_SHAPES)
            continue;
        /* BF16 products only where a shader may declare them (shaderBFloat16CooperativeMatrix). */
        if (!bf16 && (component_dtype(p[i].AType) == NU_DTYPE_BF16 || component_dtype(p[i].BType) == NU_DTYPE_BF16))
            continue;
        info->cooperative_matrix[info->cooperative_matrix_count++] = (nu_cooperative_matrix_shape){
            .m = p[i].MSize, .n = p[i].NSize, .k = p[i].KSize, .a = component_dtype(p[i].AType),
            .b = component_dtype(p[i].BType), .c = component_dtype(p[i].CType),
            .result = component_dtype(p[i].ResultType), .saturating = p[i].saturatingAccumulation};
    }
    nu__free(p);
    return true;
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
    bool ext_host = nu__vk_has_extension(exts, n, NU__EXT_EXTERNAL_HOST);

    VkPhysicalDeviceProperties base;
    vki->vkGetPhysicalDeviceProperties(pd, &base);
    bool v13 = base.apiVersion >= VK_API_VERSION_1_3;

    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host_props = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
    VkPhysicalDeviceSubgroupSizeControlProperties sgc_props = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES,
        .pNext = ext_host ? &host_props : NULL};
    bool sgc_ext = v13 || nu__vk_has_extension(exts, n, NU__EXT_SUBGROUP_SIZE);
    VkPhysicalDeviceSubgroupProperties sg_props = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
        .pNext = sgc_ext ? (void *)&sgc_props : (ext_host ? (void *)&host_props : NULL)};
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &sg_props};
    VkPhysicalDeviceDriverProperties driver = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &m3};
    /* Compute units (persistent dispatches size themselves by them: kernel/resident.c), where a
     * vendor extension reports them; chained only when the extension is there. */
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV, .pNext = &driver};
    bool sm_ext = nu__vk_has_extension(exts, n, NU__EXT_SM_BUILTINS);
    VkPhysicalDeviceShaderCorePropertiesAMD amd = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD,
        .pNext = sm_ext ? (void *)&sm : (void *)&driver};
    bool amd_ext = nu__vk_has_extension(exts, n, NU__EXT_AMD_SHADER_CORE);
    VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM arm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_PROPERTIES_ARM,
        .pNext = amd_ext ? (void *)&amd : amd.pNext};
    bool arm_ext = nu__vk_has_extension(exts, n, NU__EXT_ARM_SHADER_CORE);
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                         .pNext = arm_ext ? (void *)&arm : arm.pNext};
    vki->vkGetPhysicalDeviceProperties2(pd, &props);
    if (sm_ext)
        info->compute_units = sm.shaderSMCount;
    else if (amd_ext)
        info->compute_units = amd.shaderEngineCount * amd.shaderArraysPerEngineCount * amd.computeUnitsPerShaderArray;
    else if (arm_ext)
        info->compute_units = arm.shaderCoreCount;

    bool sync2_ext = v13 || nu__vk_has_extension(exts, n, NU__EXT_SYNC2);
    VkPhysicalDeviceSubgroupSizeControlFeatures sgc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
    VkPhysicalDeviceSynchronization2Features sync2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SYNCHRONIZATION_2_FEATURES,
        .pNext = sgc_ext ? &sgc : NULL};
    /* Integer dot products: core in Vulkan 1.3, else the KHR extension (same structure). */
    bool dot_ext = v13 || nu__vk_has_extension(exts, n, NU__EXT_INTEGER_DOT);
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
        .pNext = sync2_ext ? (void *)&sync2 : (sgc_ext ? (void *)&sgc : NULL)};
    bool coop_ext = nu__vk_has_extension(exts, n, NU__EXT_COOPMAT);
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        .pNext = dot_ext ? (void *)&dot : dot.pNext};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = coop_ext ? (void *)&coop : coop.pNext};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12};
    bool bf16_ext = nu__vk_has_extension(exts, n, NU__EXT_BFLOAT16);
    nu__vk_bfloat16_features bf16 = {.sType = NU__STRUCTURE_TYPE_BFLOAT16_FEATURES, .pNext = &f11};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = bf16_ext ? (void *)&bf16 : (void *)&f11};
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
    ft[NU_FEATURE_PUSH_DESCRIPTOR] = nu__vk_has_extension(exts, n, NU__EXT_PUSH_DESCRIPTOR);
    ft[NU_FEATURE_EXTERNAL_HOST_MEMORY] = ext_host;
    ft[NU_FEATURE_STORAGE_16BIT] = f11.storageBuffer16BitAccess;
    ft[NU_FEATURE_FLOAT16] = f12.shaderFloat16;
    ft[NU_FEATURE_INT8] = f12.shaderInt8;
    ft[NU_FEATURE_BFLOAT16] = bf16_ext && bf16.shaderBFloat16Type;
    ft[NU_FEATURE_COOPERATIVE_MATRIX] = coop_ext && coop.cooperativeMatrix &&
                                        vki->vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR;
    ft[NU_FEATURE_SUBGROUP_SIZE_CONTROL] = sgc_ext && sgc.subgroupSizeControl;
    ft[NU_FEATURE_BUFFER_DEVICE_ADDRESS] = f12.bufferDeviceAddress;
    ft[NU_FEATURE_MEMORY_BUDGET] = nu__vk_has_extension(exts, n, NU__EXT_MEMORY_BUDGET);
    ft[NU_FEATURE_INTEGER_DOT_PRODUCT] = dot_ext && dot.shaderIntegerDotProduct;
    ft[NU_FEATURE_VULKAN_MEMORY_MODEL] = f12.vulkanMemoryModel && f12.vulkanMemoryModelDeviceScope;
    ft[NU_FEATURE_NV_COOPERATIVE_MATRIX2] = nu__vk_has_extension(exts, n, NU__EXT_COOPMAT2);
    /* Debug utils is an instance extension: the caller sets it. */
    nu__free(exts);
    if (ft[NU_FEATURE_COOPERATIVE_MATRIX] &&
        !cooperative_matrix_shapes(vki, pd, ft[NU_FEATURE_BFLOAT16] && bf16.shaderBFloat16CooperativeMatrix, info))
        return false;

    const VkPhysicalDeviceLimits *l = &base.limits;
    info->subgroup_size = sg_props.subgroupSize;
    info->subgroup_operations =
        (sg_props.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ? (uint32_t)sg_props.supportedOperations & 0xffu : 0;
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

nu_status nu__physical_list(nu_device *d, const nu__vk_instance *vki, VkInstance instance,
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
    nu_status st = nu__instance_create(NULL, false, &instance, &vki, &debug_utils);
    if (st != NU_OK)
        return st;
    VkPhysicalDevice *pds;
    nu_device_info *all;
    uint32_t n;
    st = nu__physical_list(NULL, &vki, instance, &pds, &all, &n);
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
nu_status nu__physical_choose(nu_device *d, const char *select, const char *origin, const nu_device_info *infos,
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
