/* encode.c: the encoder (see encode.h): recorded commands and planned barriers as vkCmd* calls. */
#include "exec/encode.h"

#include "core/error.h"
#include "exec/hazard.h"

nu_status nu__encoder_begin(nu__encoder *e, nu_device *d, VkCommandBuffer cmd, VkCommandBufferUsageFlags flags,
                            const char *what)
{
    *e = (nu__encoder){.device = d, .cmd = cmd};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = flags};
    VkResult r = d->vkd.vkBeginCommandBuffer(cmd, &bi);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "%s: vkBeginCommandBuffer: %s", what, nu__vk_result_name(r));
    return NU_OK;
}

nu_status nu__encoder_end(nu__encoder *e, bool host_reads, const char *what)
{
    nu_device *d = e->device;
    if (host_reads) {
        VkMemoryBarrier2 mb = nu__hazard_host_barrier();
        VkDependencyInfo dep = {.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO, .memoryBarrierCount = 1,
                                .pMemoryBarriers = &mb};
        d->vkd.vkCmdPipelineBarrier2(e->cmd, &dep);
    }
    VkResult r = d->vkd.vkEndCommandBuffer(e->cmd);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "%s: vkEndCommandBuffer: %s", what, nu__vk_result_name(r));
    return NU_OK;
}

void nu__encode_barrier(nu__encoder *e, const VkMemoryBarrier2 *mb)
{
    VkDependencyInfo dep = {.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO, .memoryBarrierCount = 1, .pMemoryBarriers = mb};
    uint32_t q = nu__trace_command_begin(e->trace);
    e->device->vkd.vkCmdPipelineBarrier2(e->cmd, &dep);
    nu__trace_command_end(e->trace, q, "barrier", true);
}

void nu__encode_dispatch(nu__encoder *e, const nu_kernel *k, const uint32_t groups[3], const VkDescriptorBufferInfo *info,
                         uint32_t n, VkDescriptorSet set, const void *push, uint32_t push_size, const char *label)
{
    const nu__vk_device *vk = &e->device->vkd;
    if (e->bound != k->pipeline) {
        vk->vkCmdBindPipeline(e->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
        e->bound = k->pipeline;
    }
    if (set) {
        vk->vkCmdBindDescriptorSets(e->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &set, 0, NULL);
    } else if (n) {
        /* One write covers consecutive bindings 0..n-1 (all single storage buffers). */
        VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = 0,
                                  .descriptorCount = n, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  .pBufferInfo = info};
        vk->vkCmdPushDescriptorSetKHR(e->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &w);
    }
    if (push_size && push)
        vk->vkCmdPushConstants(e->cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
    if (label) {
        VkDebugUtilsLabelEXT l = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, .pLabelName = label};
        vk->vkCmdBeginDebugUtilsLabelEXT(e->cmd, &l);
    }
    uint32_t q = nu__trace_command_begin(e->trace);
    vk->vkCmdDispatch(e->cmd, groups[0], groups[1], groups[2]);
    nu__trace_command_end(e->trace, q, k->name, false);
    if (label)
        vk->vkCmdEndDebugUtilsLabelEXT(e->cmd);
}

void nu__encode_copy(nu__encoder *e, VkBuffer dst, VkDeviceSize dst_offset, VkBuffer src, VkDeviceSize src_offset,
                     VkDeviceSize size, const char *name)
{
    VkBufferCopy region = {.srcOffset = src_offset, .dstOffset = dst_offset, .size = size};
    uint32_t q = nu__trace_command_begin(e->trace);
    e->device->vkd.vkCmdCopyBuffer(e->cmd, src, dst, 1, &region);
    nu__trace_command_end(e->trace, q, name, false);
}

void nu__encode_fill(nu__encoder *e, VkBuffer dst, VkDeviceSize offset, VkDeviceSize size, uint32_t value)
{
    uint32_t q = nu__trace_command_begin(e->trace);
    e->device->vkd.vkCmdFillBuffer(e->cmd, dst, offset, size, value);
    nu__trace_command_end(e->trace, q, "fill", false);
}

void nu__encode_timestamp(nu__encoder *e, VkQueryPool pool, uint32_t query, VkPipelineStageFlags stage)
{
    if (query % 2 == 0)
        e->device->vkd.vkCmdResetQueryPool(e->cmd, pool, query, 2);
    e->device->vkd.vkCmdWriteTimestamp(e->cmd, stage, pool, query);
}
