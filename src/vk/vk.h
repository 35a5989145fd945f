/* vk.h: the Vulkan function tables. The loader (libvulkan.so.1) is opened at run time, once
 * per process: its global entry points are the only process-wide state nuvec keeps, written
 * once and read-only afterwards. Instance and device tables live in each nu_device. */
#ifndef NU_VK_H
#define NU_VK_H

#define VK_NO_PROTOTYPES
#include <stdbool.h>
#include <vulkan/vulkan.h>

#include "nuvec/status.h"

typedef struct nu__vk_global {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define NU_VK_GLOBAL(name) PFN_##name name;
#include "vk/vkfuncs.h"
} nu__vk_global;

typedef struct nu__vk_instance {
#define NU_VK_INSTANCE(name) PFN_##name name;
#define NU_VK_INSTANCE_EXT(name) PFN_##name name;
#include "vk/vkfuncs.h"
} nu__vk_instance;

typedef struct nu__vk_device {
#define NU_VK_DEVICE(name) PFN_##name name;
#define NU_VK_DEVICE_EXT(name) PFN_##name name;
#include "vk/vkfuncs.h"
} nu__vk_device;

/* The loader's global table, loaded on first use; NULL (with the reason in `why`) when the
 * loader cannot be opened. */
const nu__vk_global *nu__vk_global_table(const char **why);
/* Called after every successful vkCreateInstance: the first time, keeps loaded every shared
 * object loaded since before the loader was opened (the drivers and layers; see vk.c). */
void nu__vk_keep_drivers_loaded(void);
/* Fills an instance table; NU_ERROR_VULKAN naming a missing required entry point. */
nu_status nu__vk_load_instance(VkInstance instance, nu__vk_instance *out, const char **missing);
/* Fills a device table; core names fall back to their KHR aliases. */
nu_status nu__vk_load_device(const nu__vk_instance *vki, VkDevice device, nu__vk_device *out,
                             const char **missing);
/* The extensions and the layer nuvec uses. */
#define NU__EXT_PUSH_DESCRIPTOR "VK_KHR_push_descriptor"
#define NU__EXT_EXTERNAL_HOST "VK_EXT_external_memory_host"
#define NU__EXT_EXTERNAL_MEMORY "VK_KHR_external_memory"
#define NU__EXT_MEMORY_BUDGET "VK_EXT_memory_budget"
#define NU__EXT_SYNC2 "VK_KHR_synchronization2"
#define NU__EXT_BFLOAT16 "VK_KHR_shader_bfloat16"
#define NU__EXT_COOPMAT "VK_KHR_cooperative_matrix"
#define NU__EXT_INTEGER_DOT "VK_KHR_shader_integer_dot_product"
#define NU__EXT_COOPMAT2 "VK_NV_cooperative_matrix2"
#define NU__EXT_SUBGROUP_SIZE "VK_EXT_subgroup_size_control"
#define NU__EXT_SM_BUILTINS "VK_NV_shader_sm_builtins"
#define NU__EXT_AMD_SHADER_CORE "VK_AMD_shader_core_properties"
#define NU__EXT_ARM_SHADER_CORE "VK_ARM_shader_core_builtins"
#define NU__LAYER_VALIDATION "VK_LAYER_KHRONOS_validation"
/* VK_KHR_shader_bfloat16's features structure (VkPhysicalDeviceShaderBfloat16FeaturesKHR), newer
 * than the 1.4.309 headers nuvec builds with: the same members, its sType's value. */
#define NU__STRUCTURE_TYPE_BFLOAT16_FEATURES ((VkStructureType)1000141000)
typedef struct nu__vk_bfloat16_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 shaderBFloat16Type;
    VkBool32 shaderBFloat16DotProduct;
    VkBool32 shaderBFloat16CooperativeMatrix;
} nu__vk_bfloat16_features;
/* Whether `name` is among the n extensions. */
bool nu__vk_has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name);
/* "VK_ERROR_DEVICE_LOST" and so on. */
const char *nu__vk_result_name(VkResult r);
/* The nuvec status for a Vulkan error. */
nu_status nu__vk_status(VkResult r);

#endif
