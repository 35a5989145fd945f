/* vk.c: loading the Vulkan loader and the function tables (see vk.h). */
#include "vk/vk.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/host.h"

static nu__vk_global global_table;
static const char *global_error;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static char global_error_text[512];

/* ---- drivers stay loaded -------------------------------------------------------------------
 * The loader loads the drivers (ICDs) and layers with an instance and unloads them with it.
 * Some drivers (NVIDIA's) take static thread-local storage that the C library never gives
 * back, so a process could open only ~32 devices in turn; lavapipe keeps a block of its CPU
 * detection in a global, which leak checkers report once it is unloaded. So every shared
 * object the process's first instance brought in is kept loaded, like the loader itself.
 * Loader 1.3.239 already loads every driver at the first vkEnumerateInstance* call, so the
 * "before" snapshot is taken before nuvec's first loader call of the process (before the
 * loader is opened), and the pin after the first instance is created. Limit: objects an
 * application loaded through its own Vulkan calls before nuvec's first are in the snapshot
 * and are not pinned (nuvec/device.h says so). */
static struct {
    char **names; /* copies: an object in the snapshot may be unloaded before the pin */
    size_t count, capacity;
    bool failed; /* out of host memory: nothing is pinned (pinning the wrong set is worse) */
} before_loader;
static atomic_bool drivers_pinned;
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;

static bool in_snapshot(const char *name)
{
    for (size_t i = 0; i < before_loader.count; i++)
        if (strcmp(before_loader.names[i], name) == 0)
            return true;
    return false;
}

static int note_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size, (void)arg;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    if (NU__GROW(before_loader.names, before_loader.capacity, before_loader.count + 1, 64) != NU_OK) {
        before_loader.failed = true;
        return 1;
    }
    char *copy = nu__strdup(name);
    if (!copy) {
        before_loader.failed = true;
        return 1;
    }
    before_loader.names[before_loader.count++] = copy;
    return 0;
}

static int pin_new(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size, (void)arg;
    const char *name = info->dlpi_name;
    if (name && *name && !in_snapshot(name)) {
        void *h = dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        (void)h; /* the reference is kept on purpose */
    }
    return 0;
}

void nu__vk_keep_drivers_loaded(void)
{
    if (atomic_load_explicit(&drivers_pinned, memory_order_acquire))
        return;
    pthread_mutex_lock(&pin_lock);
    if (!atomic_load_explicit(&drivers_pinned, memory_order_relaxed)) {
        if (!before_loader.failed)
            dl_iterate_phdr(pin_new, NULL);
        for (size_t i = 0; i < before_loader.count; i++)
            nu__free(before_loader.names[i]);
        nu__free(before_loader.names);
        memset(&before_loader, 0, sizeof before_loader);
        atomic_store_explicit(&drivers_pinned, true, memory_order_release);
    }
    pthread_mutex_unlock(&pin_lock);
}

static void load_global(void)
{
    dl_iterate_phdr(note_loaded, NULL);
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
#include "vk/vkfuncs.h"
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
#include "vk/vkfuncs.h"
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
#include "vk/vkfuncs.h"
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

bool nu__vk_has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(exts[i].extensionName, name) == 0)
            return true;
    return false;
}
