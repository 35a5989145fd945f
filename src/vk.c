/* vk.c: loading the Vulkan loader and the function tables (see vk.h). */
#include "vk.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nu__vk_global global_table;
static const char *global_error;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static char global_error_text[512];

static void load_global(void)
{
    /* NUVEC_VULKAN_LIBRARY lets a user point at a loader outside the library path. */
    const char *name = getenv("NUVEC_VULKAN_LIBRARY");
    void *lib = dlopen(name && *name ? name : "libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(global_error_text, sizeof global_error_text,
                 "cannot load the Vulkan loader (%s): install libvulkan1", dlerror());
        global_error = global_error_text;
        return;
    }
    /* The loader stays loaded for the life of the process (the table points into it). */
    void *sym = dlsym(lib, "vkGetInstanceProcAddr");
    if (!sym) {
        global_error = "the Vulkan loader has no vkGetInstanceProcAddr";
        return;
    }
    memcpy(&global_table.vkGetInstanceProcAddr, &sym, sizeof sym);
#define NU_VK_GLOBAL(fn) \
    global_table.fn = (PFN_##fn)global_table.vkGetInstanceProcAddr(VK_NULL_HANDLE, #fn);
#include "vkfuncs.h"
    if (!global_table.vkCreateInstance || !global_table.vkEnumerateInstanceExtensionProperties) {
        global_error = "the Vulkan loader lacks vkCreateInstance";
        return;
    }
}

const nu__vk_global *nu__vk_global_table(const char **why)
{
    pthread_once(&global_once, load_global);
    if (global_error) {
        if (why)
            *why = global_error;
        return NULL;
    }
    return &global_table;
}

nu_status nu__vk_load_instance(VkInstance instance, nu__vk_instance *out, const char **missing)
{
    const nu__vk_global *g = nu__vk_global_table(NULL);
    memset(out, 0, sizeof *out);
#define NU_VK_INSTANCE(fn)                                                                     \
    out->fn = (PFN_##fn)g->vkGetInstanceProcAddr(instance, #fn);                               \
    if (!out->fn) {                                                                            \
        *missing = #fn;                                                                        \
        return NU_ERROR_VULKAN;                                                                \
    }
#define NU_VK_INSTANCE_EXT(fn) out->fn = (PFN_##fn)g->vkGetInstanceProcAddr(instance, #fn);
#include "vkfuncs.h"
    return NU_OK;
}

nu_status nu__vk_load_device(const nu__vk_instance *vki, VkDevice device, nu__vk_device *out,
                             const char **missing)
{
    memset(out, 0, sizeof *out);
#define NU_VK_DEVICE(fn)                                                                       \
    out->fn = (PFN_##fn)vki->vkGetDeviceProcAddr(device, #fn);                                 \
    if (!out->fn)                                                                              \
        out->fn = (PFN_##fn)vki->vkGetDeviceProcAddr(device, #fn "KHR");                       \
    if (!out->fn) {                                                                            \
        *missing = #fn;                                                                        \
        return NU_ERROR_VULKAN;                                                                \
    }
#define NU_VK_DEVICE_EXT(fn) out->fn = (PFN_##fn)vki->vkGetDeviceProcAddr(device, #fn);
#include "vkfuncs.h"
    return NU_OK;
}

const char *nu__vk_result_name(VkResult r)
{
    switch (r) {
#define R(x) case x: return #x;
    R(VK_SUCCESS) R(VK_NOT_READY) R(VK_TIMEOUT) R(VK_EVENT_SET) R(VK_EVENT_RESET) R(VK_INCOMPLETE)
    R(VK_ERROR_OUT_OF_HOST_MEMORY) R(VK_ERROR_OUT_OF_DEVICE_MEMORY) R(VK_ERROR_INITIALIZATION_FAILED)
    R(VK_ERROR_DEVICE_LOST) R(VK_ERROR_MEMORY_MAP_FAILED) R(VK_ERROR_LAYER_NOT_PRESENT)
    R(VK_ERROR_EXTENSION_NOT_PRESENT) R(VK_ERROR_FEATURE_NOT_PRESENT) R(VK_ERROR_INCOMPATIBLE_DRIVER)
    R(VK_ERROR_TOO_MANY_OBJECTS) R(VK_ERROR_FORMAT_NOT_SUPPORTED) R(VK_ERROR_FRAGMENTED_POOL)
    R(VK_ERROR_UNKNOWN) R(VK_ERROR_OUT_OF_POOL_MEMORY) R(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    R(VK_ERROR_FRAGMENTATION) R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef R
    default: return "VkResult (unknown)";
    }
}

nu_status nu__vk_status(VkResult r)
{
    switch (r) {
    case VK_SUCCESS: return NU_OK;
    case VK_ERROR_OUT_OF_HOST_MEMORY: return NU_ERROR_HOST_OUT_OF_MEMORY;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS: return NU_ERROR_OUT_OF_MEMORY;
    case VK_ERROR_DEVICE_LOST: return NU_ERROR_DEVICE_LOST;
    case VK_TIMEOUT: return NU_ERROR_TIMEOUT;
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_INCOMPATIBLE_DRIVER: return NU_ERROR_UNSUPPORTED;
    default: return NU_ERROR_VULKAN;
    }
}
