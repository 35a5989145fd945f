/* staged.c: blocking staged copies for reading and writing private buffers (see staged.h).
 *
 * One staging block of shared memory and one command buffer per device, under a lock; each
 * chunk is copied by its own submission on the transfer queue, which signals the queue's
 * timeline, and waited for before the next chunk. */
#include "memory/staged.h"

#include <string.h>



#include "core/error.h"
#include "core/host.h"
#include "vk/block.h"
#include "vk/queue.h"

/* The device's staging: one block of shared memory and one command buffer, under `lock`
 * (created at the first copy). */
struct nu__staged {
    pthread_mutex_t lock;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    nu__vk_block *block;
    uint64_t size;
};

nu_status nu__staged_init(nu_device *d)
{
    struct nu__staged *s = nu__calloc(1, sizeof *s);
    if (!s)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    pthread_mutex_init(&s->lock, NULL);
    d->staged = s;
    return NU_OK;
}

#define STAGING_BYTES (4u << 20)

static nu_status prepare(nu_device *d)
{
    if (d->staged->cmd)
        return NU_OK;
    VkCommandBuffer cmd;
    nu_status st0 = nu__queue_command_pool(d, d->transfer, VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                           "the staged copies", &d->staged->pool, &cmd);
    if (st0 != NU_OK)
        return st0;
    void *memory, *mapped;
    nu_status st = nu__backend_allocate(d, NU__KIND_SHARED, STAGING_BYTES, &memory, &mapped);
    if (st != NU_OK) {
        d->vkd.vkFreeCommandBuffers(d->device, d->staged->pool, 1, &cmd);
        return nu__fail(d, st, "allocating the %u MiB staging buffer failed", STAGING_BYTES >> 20);
    }
    d->staged->block = memory;
    d->staged->size = STAGING_BYTES;
    d->staged->cmd = cmd;
    nu__device_name_object(d, VK_OBJECT_TYPE_BUFFER, (uint64_t)d->staged->block->buffer, "nuvec staging");
    nu__device_name_object(d, VK_OBJECT_TYPE_COMMAND_BUFFER, (uint64_t)cmd, "nuvec read/write of private buffers");
    return NU_OK;
}

/* Records and submits one copy, then waits for it. */
static nu_status copy_chunk(nu_device *d, VkBuffer buffer, VkDeviceSize offset, VkDeviceSize size, bool upload)
{
    VkCommandBuffer cmd = d->staged->cmd;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult r = d->vkd.vkBeginCommandBuffer(cmd, &bi);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "vkBeginCommandBuffer: %s", nu__vk_result_name(r));
    VkBufferCopy region = {.srcOffset = upload ? 0 : offset, .dstOffset = upload ? offset : 0, .size = size};
    if (upload)
        d->vkd.vkCmdCopyBuffer(cmd, d->staged->block->buffer, buffer, 1, &region);
    else
        d->vkd.vkCmdCopyBuffer(cmd, buffer, d->staged->block->buffer, 1, &region);
    /* Make the copy's writes visible to the host (download) or to any later GPU work. */
    VkMemoryBarrier2 mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2,
                           .srcStageMask = VK_PIPELINE_STAGE_2_COPY_BIT,
                           .srcAccessMask = VK_ACCESS_2_TRANSFER_WRITE_BIT,
                           .dstStageMask = upload ? VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT : VK_PIPELINE_STAGE_2_HOST_BIT,
                           .dstAccessMask = upload ? VK_ACCESS_2_MEMORY_READ_BIT | VK_ACCESS_2_MEMORY_WRITE_BIT
                                                   : VK_ACCESS_2_HOST_READ_BIT};
    VkDependencyInfo dep = {.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO, .memoryBarrierCount = 1,
                            .pMemoryBarriers = &mb};
    d->vkd.vkCmdPipelineBarrier2(cmd, &dep);
    r = d->vkd.vkEndCommandBuffer(cmd);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "vkEndCommandBuffer: %s", nu__vk_result_name(r));

    nu__queue *q = d->transfer;
    uint64_t value;
    r = nu__queue_submit(d, q, &cmd, 1, NULL, 0, NULL, NULL, &value);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "submitting a copy %s a private buffer: %s", upload ? "into" : "out of",
                        nu__vk_result_name(r));
    /* Bounded: a copy of 4 MiB that takes a minute means the device hangs. */
    return nu__queue_wait(d, q, value, 60ull * 1000000000u, NULL);
}

nu_status nu__staged_copy(nu_device *d, VkBuffer buffer, VkDeviceSize offset, void *host, size_t size,
                          bool upload)
{
    pthread_mutex_lock(&d->staged->lock);
    nu_status st = prepare(d);
    uint8_t *h = host;
    for (size_t done = 0; st == NU_OK && done < size;) {
        size_t n = size - done < d->staged->size ? size - done : (size_t)d->staged->size;
        if (upload)
            memcpy(d->staged->block->mapped, h + done, n);
        st = copy_chunk(d, buffer, offset + done, n, upload);
        if (st == NU_OK && !upload)
            memcpy(h + done, d->staged->block->mapped, n);
        done += n;
    }
    pthread_mutex_unlock(&d->staged->lock);
    return st;
}

void nu__staged_fini(nu_device *d)
{
    if (!d->staged)
        return;
    if (d->staged->cmd)
        d->vkd.vkFreeCommandBuffers(d->device, d->staged->pool, 1, &d->staged->cmd);
    if (d->staged->pool)
        d->vkd.vkDestroyCommandPool(d->device, d->staged->pool, NULL);
    if (d->staged->block)
        nu__backend_release(d, NU__KIND_SHARED, d->staged->block, d->staged->size);
    pthread_mutex_destroy(&d->staged->lock);
    nu__free(d->staged);
    d->staged = NULL;
}
