/* instance.c: the Vulkan instance (with the validation layer and its messenger when asked). */
#include "vk/instance.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "nuvec.h" /* the version */

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
nu_status nu__instance_create(nu_device *d, bool validation, VkInstance *out, nu__vk_instance *vki,
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
    *debug_utils = nu__vk_has_extension(exts, n, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
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
            if (strcmp(lp[i].layerName, NU__LAYER_VALIDATION) == 0) {
                found = true;
                if (d)
                    d->validation_layer_version = lp[i].specVersion;
            }
        nu__free(lp);
        if (!found)
            return nu__fail(d, NU_ERROR_UNSUPPORTED,
                            "validation was asked for (NUVEC_VALIDATION or nu_device_desc.validation) "
                            "but the Khronos validation layer is not installed "
                            "(Debian: vulkan-validationlayers)");
        if (!*debug_utils)
            return nu__fail(d, NU_ERROR_UNSUPPORTED, "validation needs VK_EXT_debug_utils");
        layers[layer_count++] = NU__LAYER_VALIDATION;
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

nu_status nu__messenger_create(nu_device *d)
{
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
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "creating the validation messenger failed: %s", nu__vk_result_name(r));
    return NU_OK;
}
