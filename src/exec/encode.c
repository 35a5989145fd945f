/* encode.c: the encoder's calls made once per command buffer (see encode.h; the per-command calls
 * are in line there). */
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

void nu__encode_timestamp(nu__encoder *e, VkQueryPool pool, uint32_t query, VkPipelineStageFlags stage)
{
    if (query % 2 == 0)
        e->device->vkd.vkCmdResetQueryPool(e->cmd, pool, query, 2);
    e->device->vkd.vkCmdWriteTimestamp(e->cmd, stage, pool, query);
}
