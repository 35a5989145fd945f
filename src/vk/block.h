/* block.h: blocks of device memory (the allocator's Vulkan backend, block.c), the placeholder
 * bound for empty buffers, and debug names. */
#ifndef NU_VK_BLOCK_H
#define NU_VK_BLOCK_H

#include <stdint.h>

#include "core/memory_kind.h"
#include "vk/device.h"

/* A block of device memory as the Vulkan backend allocates it: one VkBuffer over all of it. */
typedef struct nu__vk_block {
    VkDeviceMemory memory;
    VkBuffer buffer;
    void *mapped;
} nu__vk_block;

/* The allocator's Vulkan backend (nu__memory_backend; ctx is the device): a VkDeviceMemory of
 * the kind's memory type with one VkBuffer over it, mapped for shared kinds. */
nu_status nu__backend_allocate(void *ctx, int kind, uint64_t size, void **memory, void **mapped);
void nu__backend_release(void *ctx, int kind, void *memory, uint64_t size);

/* The placeholder buffer bound for empty ranges: NU__PLACEHOLDER_SLOTS slots of
 * NU__PLACEHOLDER_SLOT bytes (a multiple of every storage buffer offset alignment), one per
 * empty binding of a command buffer in turn, so that unrelated empty bindings do not overlap
 * (commands.c). */
#define NU__PLACEHOLDER_SLOT 256u
#define NU__PLACEHOLDER_SLOTS 256u
nu_status nu__device_placeholder(nu_device *d, VkBuffer *out);
/* The placeholder's state (open), and its memory released (close, the device idle). */
nu_status nu__placeholder_init(nu_device *d);
void nu__placeholder_fini(nu_device *d);

/* Gives a Vulkan object a debug name (no-op without VK_EXT_debug_utils). */
void nu__device_name_object(nu_device *d, VkObjectType type, uint64_t handle, const char *name);

#endif
