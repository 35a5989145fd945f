/* encode.h: the encoder (encode.c): the one place where recorded work becomes Vulkan commands.
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

/* One global memory barrier (exec/hazard.h builds them). */
void nu__encode_barrier(nu__encoder *e, const VkMemoryBarrier2 *mb);
/* A dispatch of `k`: its pipeline (bound when it changes), its `n` storage buffers pushed (or,
 * when `set` is not VK_NULL_HANDLE, that descriptor set bound instead), `push_size` bytes of
 * push constants (none when 0 or `push` is NULL), and, when `label` is not NULL, a debug label
 * around it (captures show it). */
void nu__encode_dispatch(nu__encoder *e, const nu_kernel *k, const uint32_t groups[3], const VkDescriptorBufferInfo *info,
                         uint32_t n, VkDescriptorSet set, const void *push, uint32_t push_size, const char *label);
/* vkCmdCopyBuffer of one region, traced as `name` (a copy, an upload, a download). */
void nu__encode_copy(nu__encoder *e, VkBuffer dst, VkDeviceSize dst_offset, VkBuffer src, VkDeviceSize src_offset,
                     VkDeviceSize size, const char *name);
/* vkCmdFillBuffer. */
void nu__encode_fill(nu__encoder *e, VkBuffer dst, VkDeviceSize offset, VkDeviceSize size, uint32_t value);
/* For benchmarks: timestamp `query` of `pool` at `stage` (the first one of a pair resets both). */
void nu__encode_timestamp(nu__encoder *e, VkQueryPool pool, uint32_t query, VkPipelineStageFlags stage);

#endif
