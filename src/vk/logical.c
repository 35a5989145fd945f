/* logical.c: the logical device, with the extensions and features nuvec uses enabled. */
#include "vk/physical.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"

nu_status nu__logical_create(nu_device *d)
{
    const nu_device_info *info = &d->info;
    uint32_t n = 0;
    d->vki.vkEnumerateDeviceExtensionProperties(d->physical, NULL, &n, NULL);
    VkExtensionProperties *exts = nu__calloc(n ? n : 1, sizeof *exts);
    if (!exts)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory creating the device");
    d->vki.vkEnumerateDeviceExtensionProperties(d->physical, NULL, &n, exts);
    const char *enable[12];
    uint32_t count = 0;
    bool v13 = info->api_version >= VK_API_VERSION_1_3;
    if (info->features[NU_FEATURE_PUSH_DESCRIPTOR])
        enable[count++] = NU__EXT_PUSH_DESCRIPTOR;
    if (info->features[NU_FEATURE_EXTERNAL_HOST_MEMORY]) {
        enable[count++] = NU__EXT_EXTERNAL_HOST;
        if (info->api_version < VK_API_VERSION_1_1 && nu__vk_has_extension(exts, n, NU__EXT_EXTERNAL_MEMORY))
            enable[count++] = NU__EXT_EXTERNAL_MEMORY;
    }
    if (info->features[NU_FEATURE_MEMORY_BUDGET])
        enable[count++] = NU__EXT_MEMORY_BUDGET;
    /* Cooperative-matrix shaders also declare the Vulkan memory model. Under a validation layer
     * older than the extension (1.3.255; Debian 12 ships 1.3.239) every call would be reported
     * as an error, so the extension stays off there and the device reports no matrix units. */
    bool coop = info->features[NU_FEATURE_COOPERATIVE_MATRIX] && info->features[NU_FEATURE_VULKAN_MEMORY_MODEL] &&
                (!d->validation || d->validation_layer_version >= VK_MAKE_API_VERSION(0, 1, 3, 255));
    if (coop)
        enable[count++] = NU__EXT_COOPMAT;
    else {
        d->info.features[NU_FEATURE_COOPERATIVE_MATRIX] = false;
        d->info.cooperative_matrix_count = 0;
    }
    /* VK_NV_cooperative_matrix2 (workgroup-scope matrices, tensor addressing) only where asked
     * (NUVEC_COOPMAT2=1) with the KHR extension on: bench/probes/coopmat2_matmul measures it; no
     * nuvec kernel uses it yet. Its features are enabled as the device reports them. */
    bool coop2 = coop && info->features[NU_FEATURE_NV_COOPERATIVE_MATRIX2] && nu__env_on("NUVEC_COOPMAT2");
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV coop2f = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
    if (coop2) {
        VkPhysicalDeviceFeatures2 q2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &coop2f};
        d->vki.vkGetPhysicalDeviceFeatures2(d->physical, &q2);
        coop2f.pNext = NULL;
        enable[count++] = NU__EXT_COOPMAT2;
    }
    /* VK_KHR_shader_bfloat16 where the device lists BF16 products (physical.c lists them only with
     * shaderBFloat16CooperativeMatrix), for matmul_coopmat_bf16. Not under a validation layer older
     * than the extension (1.4.313 is the first nuvec trusts to know it): it would report the
     * features structure and the kernels' capabilities as errors. */
    bool bf16_shape = false;
    for (uint32_t i = 0; coop && i < info->cooperative_matrix_count && i < NU_MAX_COOPERATIVE_MATRIX_SHAPES; i++)
        bf16_shape |= info->cooperative_matrix[i].a == NU_DTYPE_BF16;
    bool bf16 = coop && bf16_shape && info->features[NU_FEATURE_BFLOAT16] &&
                (!d->validation || d->validation_layer_version >= VK_MAKE_API_VERSION(0, 1, 4, 313));
    if (bf16) {
        enable[count++] = NU__EXT_BFLOAT16;
    } else { /* the open device reports neither the feature nor BF16 shapes */
        d->info.features[NU_FEATURE_BFLOAT16] = false;
        uint32_t kept = 0;
        for (uint32_t i = 0; i < d->info.cooperative_matrix_count && i < NU_MAX_COOPERATIVE_MATRIX_SHAPES; i++)
            if (d->info.cooperative_matrix[i].a != NU_DTYPE_BF16 && d->info.cooperative_matrix[i].b != NU_DTYPE_BF16)
                d->info.cooperative_matrix[kept++] = d->info.cooperative_matrix[i];
        d->info.cooperative_matrix_count = kept;
    }
    d->has_bf16_coopmat = bf16;
    if (!v13) {
        enable[count++] = NU__EXT_SYNC2;
        if (info->features[NU_FEATURE_INTEGER_DOT_PRODUCT])
            enable[count++] = NU__EXT_INTEGER_DOT;
        if (info->features[NU_FEATURE_SUBGROUP_SIZE_CONTROL])
            enable[count++] = NU__EXT_SUBGROUP_SIZE;
    }
    nu__free(exts);
    d->has_push_descriptor = info->features[NU_FEATURE_PUSH_DESCRIPTOR];
    /* NUVEC_NO_HOST_IMPORT=1 turns zero-copy file mapping off (copies instead), to rule a
     * driver's import out when looking for a problem. */
    d->has_external_host_memory = info->features[NU_FEATURE_EXTERNAL_HOST_MEMORY] &&
                                  !nu__env_on("NUVEC_NO_HOST_IMPORT");

    /* Graphs' slots (exec/graph.c): storage buffers updated after bind, where the device has it. */
    VkPhysicalDeviceVulkan12Features has12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan12Properties props12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
    if (info->api_version >= VK_API_VERSION_1_2) {
        VkPhysicalDeviceFeatures2 qf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &has12};
        d->vki.vkGetPhysicalDeviceFeatures2(d->physical, &qf);
        VkPhysicalDeviceProperties2 qp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &props12};
        d->vki.vkGetPhysicalDeviceProperties2(d->physical, &qp);
    }
    d->has_update_after_bind = has12.descriptorBindingStorageBufferUpdateAfterBind &&
                               props12.maxPerStageDescriptorUpdateAfterBindStorageBuffers >= 8;
    d->max_update_after_bind_buffers = props12.maxPerStageDescriptorUpdateAfterBindStorageBuffers;

    VkPhysicalDeviceSubgroupSizeControlFeatures sgc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
        .subgroupSizeControl = info->features[NU_FEATURE_SUBGROUP_SIZE_CONTROL]};
    VkPhysicalDeviceSynchronization2Features sync2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SYNCHRONIZATION_2_FEATURES,
        .pNext = info->features[NU_FEATURE_SUBGROUP_SIZE_CONTROL] ? &sgc : NULL, .synchronization2 = VK_TRUE};
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES, .pNext = &sync2,
        .shaderIntegerDotProduct = VK_TRUE};
    coop2f.pNext = info->features[NU_FEATURE_INTEGER_DOT_PRODUCT] ? (void *)&dot : (void *)&sync2;
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR coopf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        .pNext = coop2 ? (void *)&coop2f : coop2f.pNext,
        .cooperativeMatrix = VK_TRUE};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = coop ? (void *)&coopf : coopf.pNext,
                                            /* only for cooperative matrices: a layer flags the
                                             * other kernels' device-scope barriers under it
                                             * without device scope */
                                            .vulkanMemoryModel = coop,
                                            .vulkanMemoryModelDeviceScope = coop,
                                            .timelineSemaphore = VK_TRUE,
                                            /* required by Vulkan 1.2: timestamp queries are reset
                                             * on the host (a transfer-only queue cannot) */
                                            .hostQueryReset = VK_TRUE,
                                            .shaderFloat16 = info->features[NU_FEATURE_FLOAT16],
                                            .shaderInt8 = info->features[NU_FEATURE_INT8],
                                            .storageBuffer8BitAccess = VK_FALSE,
                                            .descriptorBindingStorageBufferUpdateAfterBind =
                                                d->has_update_after_bind};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12,
                                            .storageBuffer16BitAccess = info->features[NU_FEATURE_STORAGE_16BIT]};
    nu__vk_bfloat16_features bf16f = {.sType = NU__STRUCTURE_TYPE_BFLOAT16_FEATURES, .pNext = &f11,
                                      .shaderBFloat16Type = VK_TRUE, .shaderBFloat16CooperativeMatrix = VK_TRUE};
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                       .pNext = bf16 ? (void *)&bf16f : (void *)&f11};

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
