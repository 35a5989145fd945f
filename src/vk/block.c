/* block.c: blocks of device memory (the allocator's Vulkan backend), the placeholder bound for
 * empty buffers, and debug names on Vulkan objects. */
#include "vk/block.h"

#include <pthread.h>

#include "core/error.h"
#include "core/host.h"
#include "vk/device.h"

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

void nu__device_name_object(nu_device *d, VkObjectType type, uint64_t handle, const char *name)
{
    if (!d->vkd.vkSetDebugUtilsObjectNameEXT || !handle)
        return;
    VkDebugUtilsObjectNameInfoEXT ni = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT,
                                        .objectType = type, .objectHandle = handle, .pObjectName = name};
    d->vkd.vkSetDebugUtilsObjectNameEXT(d->device, &ni);
}

/* The placeholder (created at the first empty binding), under its lock. */
struct nu__placeholder {
    pthread_mutex_t lock;
    nu__vk_block *block;
};

nu_status nu__placeholder_init(nu_device *d)
{
    struct nu__placeholder *p = nu__calloc(1, sizeof *p);
    if (!p)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    pthread_mutex_init(&p->lock, NULL);
    d->placeholder = p;
    return NU_OK;
}

void nu__placeholder_fini(nu_device *d)
{
    struct nu__placeholder *p = d->placeholder;
    if (!p)
        return;
    if (p->block)
        nu__backend_release(d, NU__KIND_PRIVATE, p->block, (uint64_t)NU__PLACEHOLDER_SLOT * NU__PLACEHOLDER_SLOTS);
    pthread_mutex_destroy(&p->lock);
    nu__free(p);
    d->placeholder = NULL;
}

nu_status nu__device_placeholder(nu_device *d, VkBuffer *out)
{
    struct nu__placeholder *p = d->placeholder;
    pthread_mutex_lock(&p->lock);
    nu_status st = NU_OK;
    if (!p->block) {
        void *memory, *mapped;
        st = nu__backend_allocate(d, NU__KIND_PRIVATE, (uint64_t)NU__PLACEHOLDER_SLOT * NU__PLACEHOLDER_SLOTS, &memory,
                                  &mapped);
        if (st == NU_OK) {
            p->block = memory;
            nu__device_name_object(d, VK_OBJECT_TYPE_BUFFER, (uint64_t)p->block->buffer,
                                   "nuvec placeholder (empty buffers)");
        } else {
            nu__fail(d, st, "allocating the placeholder for empty buffers failed");
        }
    }
    *out = p->block ? p->block->buffer : VK_NULL_HANDLE;
    pthread_mutex_unlock(&p->lock);
    return st;
}
