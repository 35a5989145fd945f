/* memory_kind.h: the kinds of device memory nuvec keeps apart: the allocator pools them
 * separately (memory/allocator.h), the Vulkan backend gives each its memory type (vk/block.h). */
#ifndef NU_CORE_MEMORY_KIND_H
#define NU_CORE_MEMORY_KIND_H

enum {
    NU__KIND_SHARED = 0,  /* host-visible: shared buffers (a CPU pointer) */
    NU__KIND_PRIVATE = 1, /* device-local: private buffers */
    NU__KIND_COUNT = 2
};

#endif
