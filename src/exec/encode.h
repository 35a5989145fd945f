/* encode.h: the encoder (here, and encode.c): the one place where recorded work becomes Vulkan
 * commands.
 * A command buffer's commands are encoded as they are recorded, in recording order, with the
 * barriers the in-order plan asks for; a graph's copies are encoded from its schedule, level by
 * level, with the level barriers (exec/hazard.h plans both). The encoder knows no buffers, uses
 * or plans: it is handed resolved memory (VkBuffer, offset, size) and the barriers to record.
 *
 * Each command is timed when the encoder has a trace (debug/trace.h): a timestamp before and
 * after it, named. */
#ifndef NU_EXEC_ENCODE_H
#define NU_EXEC_ENCODE_H

#include <stdbool.h>
#include <stdint.h>

#include "vk/device.h"
#include "debug/trace.h"
#include "kernel/kernel.h"

typedef struct nu__encoder {
    nu_device *device;
    VkCommandBuffer cmd;
    VkPipeline bound;     /* the pipeline bound last (not bound again) */
    nu__trace_cmd *trace; /* GPU timestamps around each command, when a trace runs; else NULL */
} nu__encoder;

/* Begins recording `cmd` (vkBeginCommandBuffer with `flags`): the encoder starts empty, without
 * a trace (set e->trace once the trace's own commands are in). Failures carry the message. */
nu_status nu__encoder_begin(nu__encoder *e, nu_device *d, VkCommandBuffer cmd, VkCommandBufferUsageFlags flags,
                            const char *what);
/* Ends it; `host_reads` first makes copies' writes available to the host (downloads). */
nu_status nu__encoder_end(nu__encoder *e, bool host_reads, const char *what);

/* Trace spans around a command (no call when no trace runs: this is the recording's hot path). */
static inline uint32_t nu__encode_span_begin(const nu__encoder *e)
{
    return e->trace ? nu__trace_command_begin(e->trace) : UINT32_MAX;
}

static inline void nu__encode_span_end(const nu__encoder *e, uint32_t query, const char *name, bool barrier)
{
    if (e->trace)
        nu__trace_command_end(e->trace, query, name, barrier);
}

/* The per-command calls are in line: a command buffer encodes each command as it is recorded. */

/* One global memory barrier (exec/hazard.h builds them). */
static inline void nu__encode_barrier(nu__encoder *e, const VkMemoryBarrier2 *mb)
{
    VkDependencyInfo dep = {.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO, .memoryBarrierCount = 1, .pMemoryBarriers = mb};
    uint32_t q = nu__encode_span_begin(e);
    e->device->vkd.vkCmdPipelineBarrier2(e->cmd, &dep);
    nu__encode_span_end(e, q, "barrier", true);
}

/* A dispatch of `k`: its pipeline (bound when it changes), its `n` storage buffers pushed (or,
 * when `set` is not VK_NULL_HANDLE, that descriptor set bound instead), `push_size` bytes of
 * push constants (none when 0 or `push` is NULL), and, when `label` is not NULL, a debug label
 * around it (captures show it). */
static inline void nu__encode_dispatch(nu__encoder *e, const nu_kernel *k, const uint32_t groups[3],
                                       const VkDescriptorBufferInfo *info, uint32_t n, VkDescriptorSet set,
                                       const void *push, uint32_t push_size, const char *label)
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
    uint32_t q = nu__encode_span_begin(e);
    vk->vkCmdDispatch(e->cmd, groups[0], groups[1], groups[2]);
    nu__encode_span_end(e, q, k->name, false);
    if (label)
        vk->vkCmdEndDebugUtilsLabelEXT(e->cmd);
}

/* vkCmdCopyBuffer of one region, traced as `name` (a copy, an upload, a download). */
static inline void nu__encode_copy(nu__encoder *e, VkBuffer dst, VkDeviceSize dst_offset, VkBuffer src,
                                   VkDeviceSize src_offset, VkDeviceSize size, const char *name)
{
    VkBufferCopy region = {.srcOffset = src_offset, .dstOffset = dst_offset, .size = size};
    uint32_t q = nu__encode_span_begin(e);
    e->device->vkd.vkCmdCopyBuffer(e->cmd, src, dst, 1, &region);
    nu__encode_span_end(e, q, name, false);
}

/* vkCmdFillBuffer. */
static inline void nu__encode_fill(nu__encoder *e, VkBuffer dst, VkDeviceSize offset, VkDeviceSize size, uint32_t value)
{
    uint32_t q = nu__encode_span_begin(e);
    e->device->vkd.vkCmdFillBuffer(e->cmd, dst, offset, size, value);
    nu__encode_span_end(e, q, "fill", false);
}

/* For benchmarks: timestamp `query` of `pool` at `stage` (the first one of a pair resets both). */
void nu__encode_timestamp(nu__encoder *e, VkQueryPool pool, uint32_t query, VkPipelineStageFlags stage);

#endif
