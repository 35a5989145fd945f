/* disk_cache.h: kernels' pipeline cache on disk (disk_cache.c): the file a device's
 * VkPipelineCache is created from at open and written back to at close. */
#ifndef NU_KERNEL_DISK_CACHE_H
#define NU_KERNEL_DISK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "vk/device.h"

/* nuvec's header before Vulkan's data in the file. */
#define NU__DISK_CACHE_HEADER 24

/* The file's path for d into *out ($NUVEC_CACHE_DIR, $XDG_CACHE_HOME/nuvec or ~/.cache/nuvec;
 * NULL when off or without a home); NU_ERROR_HOST_OUT_OF_MEMORY. */
nu_status nu__disk_cache_path(nu_device *d, char **out);
/* The file's bytes (nu__free them; Vulkan's data starts at NU__DISK_CACHE_HEADER, *size bytes
 * of it), or NULL when there is none or it does not fit this device: never an error. */
unsigned char *nu__disk_cache_load(nu_device *d, const char *path, size_t *size);
/* Writes `cache`'s data to `path` (a temporary file, then rename) unless it is what was loaded
 * (`loaded_bytes`, `loaded_hash`); NULL, or why it failed (in `err`). */
const char *nu__disk_cache_save(nu_device *d, VkPipelineCache cache, const char *path, size_t loaded_bytes,
                                uint64_t loaded_hash, char *err, size_t err_size);

#endif
