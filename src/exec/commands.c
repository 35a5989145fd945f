/* commands.c: recording (see nuvec/command.h and commands.h): command buffers and graph
 * recordings alike; the barrier strategy is written down in hazard.c. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "core/host.h"
#include "exec/commands.h"
#include "debug/capture.h"
#include "debug/trace.h"
#include "vk/block.h"

#define RESERVE(c, field, want) NU__GROW32((c)->s.field##s, (c)->s.field##_capacity, (want), 8)

/* ---- command buffer objects ---------------------------------------------------------------
 * Freed command buffers are kept (up to SPARE_COMMANDS) with their arrays and the tracker's
 * tables: no malloc churn, no page faults when recording the next one. */

#define SPARE_COMMANDS 32

struct nu__recorder {
    pthread_mutex_t lock;
    nu_commands *spare;
    uint32_t spare_count;
};

nu_status nu__recorder_init(nu_device *d)
{
    struct nu__recorder *r = nu__calloc(1, sizeof *r);
    if (!r)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    pthread_mutex_init(&r->lock, NULL);
    d->recorder = r;
    return NU_OK;
}

static void free_commands(nu_commands *c)
{
    nu__hazards_fini(&c->hazards);
    nu__submission_fini(&c->s);
    nu__free(c);
}

void nu__commands_trim(nu_device *d)
{
    struct nu__recorder *r = d->recorder;
    pthread_mutex_lock(&r->lock);
    nu_commands *c = r->spare;
    r->spare = NULL;
    r->spare_count = 0;
    pthread_mutex_unlock(&r->lock);
    while (c) {
        nu_commands *next = c->spare_next;
        free_commands(c);
        c = next;
    }
}

void nu__recorder_fini(nu_device *d)
{
    if (!d->recorder)
        return;
    nu__commands_trim(d);
    pthread_mutex_destroy(&d->recorder->lock);
    nu__free(d->recorder);
    d->recorder = NULL;
}

/* The command buffer's own memory: kept as a spare, or freed (after nu__submission_release). */
static void destroy(nu_commands *c)
{
    struct nu__recorder *r = c->s.device->recorder;
    pthread_mutex_lock(&r->lock);
    if (r->spare_count < SPARE_COMMANDS) {
        c->spare_next = r->spare;
        r->spare = c;
        r->spare_count++;
        c = NULL;
    }
    pthread_mutex_unlock(&r->lock);
    if (c)
        free_commands(c);
}

/* Completion hands back a freed command buffer's submission (its first member). */
static void submission_done(nu__submission *s) { destroy((nu_commands *)s); }

/* A command buffer object in its initial state (recording, empty), recycled when one is spare,
 * or NULL when host memory runs out. */
static nu_commands *alloc_commands(nu_device *d)
{
    struct nu__recorder *r = d->recorder;
    pthread_mutex_lock(&r->lock);
    nu_commands *c = r->spare;
    if (c) {
        r->spare = c->spare_next;
        r->spare_count--;
    }
    pthread_mutex_unlock(&r->lock);
    if (!c) {
        c = nu__calloc(1, sizeof *c);
        if (c)
            nu__hazards_init(&c->hazards);
        return c;
    }
    /* Keep the arrays and the tracker's tables; forget what they held. */
    nu__hazards_reset(&c->hazards);
    c->s.use_count = c->s.kernel_count = c->s.staging_count = c->s.download_count = 0;
    c->s.state = NU__RECORDING;
    c->s.error = NU_OK;
    c->s.freed = c->ended = false;
    c->s.pool = VK_NULL_HANDLE;
    c->s.cmd = VK_NULL_HANDLE;
    c->enc = (nu__encoder){0};
    c->empty_bindings = 0;
    c->s.value = 0;
    c->s.next = NULL;
    c->s.trace = NULL;
    c->record_start_ns = 0;
    c->labels = false;
    c->spare_next = NULL;
    c->list = NULL;
    c->scratch = NULL;
    return c;
}

/* ---- creation ---------------------------------------------------------------------------- */

nu_status nu_commands_new(nu_device *d, nu_queue queue, nu_commands **out)
{
    if (!out)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_commands_new: NULL out");
    *out = NULL;
    if (!d)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_commands_new: NULL device");
    if (queue != NU_QUEUE_COMPUTE && queue != NU_QUEUE_TRANSFER)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_commands_new: unknown queue %d", (int)queue);
    if (nu__device_lost(d))
        return nu__fail(d, NU_ERROR_DEVICE_LOST, "nu_commands_new: the device was lost");
    nu_commands *c = alloc_commands(d);
    if (!c)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for a command buffer");
    c->s.device = d;
    c->s.done = submission_done;
    c->kind = queue;
    c->s.queue = queue == NU_QUEUE_TRANSFER ? d->transfer : d->compute;
    nu_status st = nu__submitter_take_pool(d, c->s.queue, &c->s.pool, &c->s.cmd);
    if (st == NU_OK &&
        ((st = nu__encoder_begin(&c->enc, d, c->s.cmd, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
                                 "nu_commands_new")) != NU_OK ||
         (st = nu__trace_command_new(d, c->s.queue->index, c->s.cmd, &c->s.trace, &c->record_start_ns)) != NU_OK)) {
        nu__submitter_give_pool(d, c->s.queue, c->s.pool, c->s.cmd);
        c->s.pool = VK_NULL_HANDLE;
    }
    if (st != NU_OK) {
        destroy(c);
        return st;
    }
    c->enc.trace = c->s.trace;
    c->s.state = NU__RECORDING;
    /* Labels cost recording time: only while a capture records them. */
    c->labels = nu__capture_running(d) && d->vkd.vkCmdBeginDebugUtilsLabelEXT && d->vkd.vkCmdEndDebugUtilsLabelEXT;
    *out = c;
    return NU_OK;
}

nu_status nu__commands_new_list(nu_device *d, nu__list *list, nu_commands **out)
{
    *out = NULL;
    nu_commands *c = alloc_commands(d);
    if (!c)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for a command buffer");
    c->s.device = d;
    c->s.done = submission_done;
    c->kind = NU_QUEUE_COMPUTE;
    c->s.queue = d->compute;
    c->s.state = NU__RECORDING;
    c->list = list;
    *out = c;
    return NU_OK;
}

nu_status nu_commands_set_name(nu_commands *c, const char *name)
{
    if (!c || !name)
        return nu__fail(c ? c->s.device : NULL, NU_ERROR_INVALID_ARGUMENT, "nu_commands_set_name: NULL argument");
    if (c->list)
        return NU_OK; /* no Vulkan command buffer to name */
    nu__device_name_object(c->s.device, VK_OBJECT_TYPE_COMMAND_BUFFER, (uint64_t)(uintptr_t)c->s.cmd, name);
    return NU_OK;
}

static nu_status recording(nu_commands *c, const char *fn)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    if (c->s.state != NU__RECORDING)
        return nu__fail(c->s.device, NU_ERROR_INVALID_ARGUMENT, "%s: the command buffer was already committed", fn);
    if (nu__device_lost(c->s.device))
        return nu__fail(c->s.device, NU_ERROR_DEVICE_LOST, "%s: the device was lost", fn);
    return NU_OK;
}

/* ---- accesses ----------------------------------------------------------------------------- */

/* One buffer range a command touches, resolved to memory. */
typedef struct target {
    nu_buffer *buffer;
    VkBuffer vk;          /* the block's VkBuffer, or the placeholder */
    VkDeviceSize offset;  /* absolute offset of the range in vk */
    VkDeviceSize size;    /* 0 for an empty range (bound as the placeholder) */
    size_t rel;           /* offset of the range in the buffer */
    bool write;
} target;

static nu_status check_buffer(nu_commands *c, const char *fn, nu_buffer *b, size_t offset, size_t *size,
                              bool write, target *t)
{
    nu_device *d = c->s.device;
    if (!b)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL buffer", fn);
    if (!nu__buffer_live(b))
        return nu__fail(d, NU_ERROR_INVALID_HANDLE, "%s: the buffer was freed", fn);
    if (b->device != d)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the buffer belongs to another device", fn);
    if (write && b->read_only)
        return nu__fail(d, NU_ERROR_READ_ONLY, "%s: the buffer is read-only (a mapped file)", fn);
    if (offset > b->size || *size > b->size - offset)
        return nu__fail(d, NU_ERROR_OUT_OF_RANGE,
                        "%s: bytes %zu..%zu are outside the buffer of %zu bytes", fn, offset, offset + *size, b->size);
    t->buffer = b;
    t->write = write;
    t->size = *size;
    t->rel = offset;
    VkDeviceSize base;
    nu_status st = nu__buffer_prepare(b); /* a mapped file's first GPU use (memory/backing.h) */
    if (st == NU_OK)
        st = nu__buffer_binding(b, &t->vk, &base);
    if (st != NU_OK)
        return st;
    t->offset = base + offset;
    return NU_OK;
}

/* The in-order plan of a command buffer's next command (exec/hazard.h): its accesses checked
 * against the epoch, the barrier encoded before it if any conflicts, and each buffer registered
 * as a use of the command buffer (exec/use.h). */
static nu_status plan(nu_commands *c, const target *t, uint32_t n, nu__work work)
{
    nu_device *d = c->s.device;
    nu__access a[NU__MAX_BINDINGS];
    int32_t use[NU__MAX_BINDINGS];
    VkPipelineStageFlags2 stage = nu__work_stage(work);
    VkAccessFlags2 read = nu__work_access(work, false), write = nu__work_access(work, true);
    for (uint32_t i = 0; i < n; i++) {
        /* Empty ranges touch no memory of their buffer and are no use of it. Each binds its
         * own slot of the placeholder (nu_commands_dispatch), tracked only so that the
         * validation layer, which assumes a kernel accesses all it binds, sees no unordered
         * accesses there: unrelated empty bindings do not overlap, so they order nothing
         * (until NU__PLACEHOLDER_SLOTS of them since the last barrier). */
        uint64_t start = t[i].offset, end = t[i].offset + (t[i].size ? t[i].size : NU__PLACEHOLDER_SLOT);
        a[i] = (nu__access){
            .piece = (uint64_t)t[i].vk,
            .base = t[i].size && t[i].buffer->alloc.block ? t[i].buffer->alloc.offset : 0,
            .start = start,
            .end = end,
            .write = t[i].write,
            .stage = stage,
            .access = t[i].write ? write : read,
        };
    }
    if (RESERVE(c, use, c->s.use_count + n) != NU_OK)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory recording a command");
    /* The barrier, when one is needed, is hazard.c's (nu__hazard_barrier says what it covers,
     * the strategy above it why). */
    bool compute = c->kind == NU_QUEUE_COMPUTE, barrier;
    VkPipelineStageFlags2 src_stage = 0;
    VkAccessFlags2 src_access = 0;
    if (nu__hazards_track(&c->hazards, a, n, use, &barrier, &src_stage, &src_access) != NU_OK)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory recording a command");
    if (barrier) {
        VkMemoryBarrier2 mb = nu__hazard_barrier(compute, src_stage, src_access);
        nu__encode_barrier(&c->enc, &mb);
    }
    for (uint32_t i = 0; i < n; i++) {
        nu_buffer *b = t[i].buffer;
        if (!t[i].size)
            continue; /* an empty range touches no memory of the buffer (a placeholder slot is bound) */
        int32_t u = use[i] >= 0 ? use[i] : nu__hazards_get_use(&c->hazards, a[i].piece, a[i].base);
        if (u < 0) {
            /* The first use of this buffer in the command buffer (exec/use.h). */
            if (nu__use_begin(&c->s.uses[c->s.use_count], b, t[i].write) != NU_OK)
                return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory recording a command");
            u = (int32_t)c->s.use_count++;
            nu__hazards_set_use(&c->hazards, a[i].piece, a[i].base, u);
        } else if (t[i].write) {
            nu__use_upgrade(&c->s.uses[u]);
        }
    }
    return NU_OK;
}

static nu_status keep_kernel(nu_commands *c, nu_kernel *k)
{
    if (c->s.kernel_count && c->s.kernels[c->s.kernel_count - 1] == k)
        return NU_OK;
    for (uint32_t i = 0; i < c->s.kernel_count; i++)
        if (c->s.kernels[i] == k)
            return NU_OK;
    if (RESERVE(c, kernel, c->s.kernel_count + 1) != NU_OK)
        return nu__fail(c->s.device, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory recording a dispatch");
    nu__kernel_retain(k);
    c->s.kernels[c->s.kernel_count++] = k;
    return NU_OK;
}

/* ---- the one way in --------------------------------------------------------------------- */

/* A dispatch, copy or fill as recording hands it on, its ranges resolved (targets). */
typedef struct command {
    nu__work work;
    nu_kernel *kernel; /* a dispatch's */
    const uint32_t *groups;
    const void *push;
    uint32_t push_size;
    uint32_t value;    /* a fill's */
} command;

/* Encodes a planned dispatch over its targets (bindings in order). */
static void encode_dispatch(nu_commands *c, const command *cmd, const target *t, uint32_t n)
{
    VkDescriptorBufferInfo info[NU__MAX_BINDINGS];
    for (uint32_t i = 0; i < n; i++)
        info[i] = (VkDescriptorBufferInfo){t[i].vk, t[i].offset, t[i].size ? t[i].size : NU__PLACEHOLDER_SLOT};
    char text[256];
    const char *label = NULL;
    if (c->labels) {
        /* "add_f32(z, x, y)": the kernel and its buffers' names, for captures. */
        size_t len = (size_t)snprintf(text, sizeof text, "%s(", cmd->kernel->name);
        for (uint32_t i = 0; i < n && len < sizeof text; i++)
            len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", i ? ", " : "",
                                    t[i].buffer->name[0] ? t[i].buffer->name : "?");
        if (len < sizeof text)
            snprintf(text + len, sizeof text - len, ")");
        label = text;
    }
    nu__encode_dispatch(&c->enc, cmd->kernel, cmd->groups, info, n, VK_NULL_HANDLE, cmd->push, cmd->push_size, label);
}

/* Dispatches, copies and fills all come through here, checked and resolved: a graph recording
 * keeps the command in its list (planned and encoded when the graph is built and launched, by
 * the same planner and encoder); a command buffer plans it in order and encodes it now. */
static nu_status record(nu_commands *c, const command *cmd, const target *t, uint32_t n)
{
    if (c->list) {
        nu__range r[NU__MAX_BINDINGS];
        for (uint32_t i = 0; i < n; i++)
            r[i] = (nu__range){t[i].buffer, t[i].rel, (size_t)t[i].size, t[i].write};
        return nu__list_add(c->list, cmd->work, cmd->kernel, cmd->groups, r, n, cmd->push, cmd->push_size,
                            cmd->value);
    }
    nu_status st = cmd->kernel ? keep_kernel(c, cmd->kernel) : NU_OK;
    if (st == NU_OK)
        st = plan(c, t, n, cmd->work);
    if (st != NU_OK)
        return st;
    if (cmd->work == NU__WORK_DISPATCH)
        encode_dispatch(c, cmd, t, n);
    else if (cmd->work == NU__WORK_COPY)
        nu__encode_copy(&c->enc, t[0].vk, t[0].offset, t[1].vk, t[1].offset, t[0].size, "copy");
    else
        nu__encode_fill(&c->enc, t[0].vk, t[0].offset, t[0].size, cmd->value);
    return NU_OK;
}

/* ---- dispatches --------------------------------------------------------------------------- */

nu_status nu_commands_dispatch(nu_commands *c, nu_kernel *k, const uint32_t groups[3], const nu_binding *bindings,
                               uint32_t binding_count, const void *push, uint32_t push_size)
{
    static const char fn[] = "nu_commands_dispatch";
    nu_status st = recording(c, fn);
    if (st != NU_OK)
        return st;
    nu_device *d = c->s.device;
    if (c->kind != NU_QUEUE_COMPUTE)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: dispatches need a compute-queue command buffer", fn);
    if (!k || !groups || (binding_count && !bindings) || (push_size && !push))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL kernel, groups, bindings or push constants", fn);
    if (k->device != d)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the kernel belongs to another device", fn);
    if (binding_count != k->bindings)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: kernel %s has %u bindings, %u given", fn, k->name,
                        k->bindings, binding_count);
    if (push_size != k->push_size)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: kernel %s takes %u bytes of push constants, %u given", fn,
                        k->name, k->push_size, push_size);
    for (int i = 0; i < 3; i++)
        if (groups[i] > d->info.max_workgroup_count[i])
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %u workgroups in dimension %d, the device allows %u",
                            fn, groups[i], i, d->info.max_workgroup_count[i]);
    if (binding_count > NU__MAX_BINDINGS)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %u bindings, at most %u", fn, binding_count,
                        NU__MAX_BINDINGS);
    target t[NU__MAX_BINDINGS];
    for (uint32_t i = 0; i < binding_count; i++) {
        const nu_binding *b = &bindings[i];
        if (b->access < NU_ACCESS_READ || b->access > NU_ACCESS_READ_WRITE)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: binding %u has no access (read, write)", fn, i);
        size_t size = b->size;
        if (b->buffer && !size && b->offset <= b->buffer->size)
            size = b->buffer->size - b->offset;
        st = check_buffer(c, fn, b->buffer, b->offset, &size, b->access & NU_ACCESS_WRITE, &t[i]);
        if (st != NU_OK)
            return st;
        /* Vulkan's alignment limits are powers of two: a mask, not a division. */
        if (size && (t[i].offset & (d->info.min_storage_buffer_offset_alignment - 1)))
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                            "%s: binding %u: offset %zu is not a multiple of the device's storage buffer "
                            "alignment (%llu)", fn, i, b->offset,
                            (unsigned long long)d->info.min_storage_buffer_offset_alignment);
        if (size > d->info.max_storage_buffer_range)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: binding %u: %zu bytes, the device binds at most %llu",
                            fn, i, size, (unsigned long long)d->info.max_storage_buffer_range);
        if (!size) {
            st = nu__device_placeholder(d, &t[i].vk);
            if (st != NU_OK)
                return st;
            t[i].offset = (VkDeviceSize)(c->empty_bindings++ % NU__PLACEHOLDER_SLOTS) * NU__PLACEHOLDER_SLOT;
        }
    }
    /* nuvec's own kernels touch `count` elements of each binding: a shorter range (an empty
     * one too, bound as a placeholder slot) would be read or written past its end. */
    unsigned layout = atomic_load_explicit(&k->count_layout, memory_order_relaxed);
    if (layout) {
        uint32_t count;
        memcpy(&count, (const uint8_t *)push + (layout >> 8), sizeof count);
        uint64_t need = (uint64_t)count * (layout & 0xffu);
        for (uint32_t i = 0; i < binding_count; i++)
            if (t[i].size < need)
                return nu__fail(d, NU_ERROR_OUT_OF_RANGE,
                                "%s: kernel %s touches %u elements (%llu bytes) of each binding, but binding %u's "
                                "range holds %llu bytes", fn, k->name, count, (unsigned long long)need, i,
                                (unsigned long long)t[i].size);
    }
    command cmd = {.work = NU__WORK_DISPATCH, .kernel = k, .groups = groups, .push = push, .push_size = push_size};
    st = record(c, &cmd, t, binding_count);
    if (st == NU_OK && c->list)
        nu__list_mark_user(c->list);
    return st;
}

/* ---- copies and fills --------------------------------------------------------------------- */

static bool aligned_for_shader(nu_device *d, VkDeviceSize offset)
{
    return (offset & (d->info.min_storage_buffer_offset_alignment - 1)) == 0;
}

nu_status nu_commands_copy(nu_commands *c, nu_buffer *dst, size_t dst_offset, nu_buffer *src, size_t src_offset,
                           size_t size)
{
    static const char fn[] = "nu_commands_copy";
    nu_status st = recording(c, fn);
    if (st != NU_OK)
        return st;
    nu_device *d = c->s.device;
    target t[2];
    size_t n = size;
    if ((st = check_buffer(c, fn, dst, dst_offset, &n, true, &t[0])) != NU_OK ||
        (st = check_buffer(c, fn, src, src_offset, &n, false, &t[1])) != NU_OK)
        return st;
    if (size == 0)
        return NU_OK;
    if (t[0].vk == t[1].vk && t[0].offset < t[1].offset + size && t[1].offset < t[0].offset + size)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the source and destination ranges overlap", fn);
    if (c->kind == NU_QUEUE_COMPUTE && size % 4 == 0 && size / 4 <= UINT32_MAX && aligned_for_shader(d, t[0].offset) &&
        aligned_for_shader(d, t[1].offset) && size <= d->info.max_storage_buffer_range) {
        nu_kernel *k;
        if ((st = nu__submitter_builtin(d, "copy_u32", &k)) != NU_OK)
            return st;
        uint32_t words = (uint32_t)(size / 4), groups[3];
        nu_groups_for((words + 3) / 4, 256, groups);
        command cmd = {.work = NU__WORK_DISPATCH, .kernel = k, .groups = groups, .push = &words, .push_size = 4};
        return record(c, &cmd, t, 2);
    }
    return record(c, &(command){.work = NU__WORK_COPY}, t, 2);
}

nu_status nu_commands_fill(nu_commands *c, nu_buffer *dst, size_t offset, size_t size, uint32_t value)
{
    static const char fn[] = "nu_commands_fill";
    nu_status st = recording(c, fn);
    if (st != NU_OK)
        return st;
    nu_device *d = c->s.device;
    if (offset % 4 || size % 4)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: offset %zu and size %zu must be multiples of 4", fn,
                        offset, size);
    target t;
    size_t n = size;
    if ((st = check_buffer(c, fn, dst, offset, &n, true, &t)) != NU_OK)
        return st;
    if (size == 0)
        return NU_OK;
    if (c->kind == NU_QUEUE_COMPUTE && size / 4 <= UINT32_MAX && aligned_for_shader(d, t.offset) &&
        size <= d->info.max_storage_buffer_range) {
        nu_kernel *k;
        if ((st = nu__submitter_builtin(d, "fill_u32", &k)) != NU_OK)
            return st;
        uint32_t push[2] = {value, (uint32_t)(size / 4)}, groups[3];
        nu_groups_for(push[1], 256, groups);
        command cmd = {.work = NU__WORK_DISPATCH, .kernel = k, .groups = groups, .push = push, .push_size = sizeof push};
        return record(c, &cmd, &t, 1);
    }
    return record(c, &(command){.work = NU__WORK_FILL, .value = value}, &t, 1);
}

/* A shared buffer holding host bytes on their way in or out, freed at completion. */
static nu_status staging(nu_commands *c, size_t size, nu_buffer **out)
{
    if (NU__GROW32(c->s.staging, c->s.staging_capacity, c->s.staging_count + 1, 8) != NU_OK)
        return nu__fail(c->s.device, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory recording a transfer");
    nu_status st = nu__buffer_create_staging(c->s.device, size, out);
    if (st == NU_OK)
        c->s.staging[c->s.staging_count++] = *out;
    return st;
}

nu_status nu_commands_upload(nu_commands *c, nu_buffer *dst, size_t offset, const void *data, size_t size)
{
    static const char fn[] = "nu_commands_upload";
    nu_status st = recording(c, fn);
    if (st != NU_OK)
        return st;
    nu_device *d = c->s.device;
    if (c->list)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: a graph recording takes dispatches, copies and fills only", fn);
    if (size && !data)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL data", fn);
    target t[2];
    size_t n = size;
    if ((st = check_buffer(c, fn, dst, offset, &n, true, &t[0])) != NU_OK)
        return st;
    if (size == 0)
        return NU_OK;
    nu_buffer *s;
    if ((st = staging(c, size, &s)) != NU_OK)
        return st;
    memcpy(s->alloc.mapped, data, size);
    if ((st = plan(c, t, 1, NU__WORK_COPY)) != NU_OK)
        return st;
    nu__encode_copy(&c->enc, t[0].vk, t[0].offset, ((nu__vk_block *)s->alloc.memory)->buffer, s->alloc.offset, size,
                    "upload");
    return NU_OK;
}

nu_status nu_commands_download(nu_commands *c, nu_buffer *src, size_t offset, void *dst, size_t size)
{
    static const char fn[] = "nu_commands_download";
    nu_status st = recording(c, fn);
    if (st != NU_OK)
        return st;
    nu_device *d = c->s.device;
    if (c->list)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: a graph recording takes dispatches, copies and fills only", fn);
    if (size && !dst)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL destination", fn);
    target t;
    size_t n = size;
    if ((st = check_buffer(c, fn, src, offset, &n, false, &t)) != NU_OK)
        return st;
    if (size == 0)
        return NU_OK;
    if (RESERVE(c, download, c->s.download_count + 1) != NU_OK)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory recording a download");
    nu_buffer *s;
    if ((st = staging(c, size, &s)) != NU_OK)
        return st;
    if ((st = plan(c, &t, 1, NU__WORK_COPY)) != NU_OK)
        return st;
    nu__encode_copy(&c->enc, ((nu__vk_block *)s->alloc.memory)->buffer, s->alloc.offset, t.vk, t.offset, size,
                    "download");
    c->s.downloads[c->s.download_count++] = (nu__download){s, dst, size};
    return NU_OK;
}

/* ---- commit and free ----------------------------------------------------------------------- */

nu_status nu_commands_commit(nu_commands *c)
{
    nu_status st = recording(c, "nu_commands_commit");
    if (st != NU_OK)
        return st;
    nu_device *d = c->s.device;
    if (c->list)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "nu_commands_commit: a graph recording is not committed: build it with nu_graph_new");
    if (!c->ended) {
        /* Downloads are read by the host at completion. */
        if ((st = nu__encoder_end(&c->enc, c->s.download_count != 0, "nu_commands_commit")) != NU_OK)
            return st;
        c->ended = true;
    }
    uint64_t t0 = c->record_start_ns ? nu__trace_now() : 0;
    nu_status st2 = nu__submit(&c->s);
    nu_buffer_free(c->scratch); /* its memory stays with the submitted work until it completes */
    c->scratch = NULL;
    if (t0) {
        nu__trace_cpu(d, "record", c->record_start_ns, t0);
        nu__trace_cpu(d, "commit", t0, nu__trace_now());
    }
    return st2;
}

nu_status nu__commands_adopt(nu_commands *c, nu_buffer *b)
{
    if (c->list)
        return nu__list_adopt(c->list, b);
    return nu_buffer_free(b);
}

nu_status nu__commands_scratch(nu_commands *c, size_t bytes, nu_buffer **out)
{
    nu__list *l = c->list;
    nu_buffer **held = l ? &l->scratch : &c->scratch;
    *out = NULL;
    if (*held && nu_buffer_size(*held) >= bytes) {
        *out = *held;
        return NU_OK;
    }
    nu_buffer *b;
    nu_status st = nu_buffer_new_gpu(c->s.device, bytes, NU_STORAGE_PRIVATE, &b);
    if (st != NU_OK)
        return st;
    nu_buffer_set_name(b, "nuvec op scratch");
    if (l) {
        if ((st = nu__list_adopt(l, b)) != NU_OK)
            return st;
    } else {
        nu_buffer_free(c->scratch); /* its memory stays with the work recorded on it */
    }
    *held = b;
    *out = b;
    return NU_OK;
}

nu_status nu_commands_free(nu_commands *c)
{
    if (!c)
        return NU_OK;
    if (c->list) {
        nu__list_free(c->list);
        c->list = NULL;
    }
    nu_buffer_free(c->scratch);
    c->scratch = NULL;
    if (c->s.state == NU__RECORDING) {
        nu__submission_release(&c->s, false);
        destroy(c);
        return NU_OK;
    }
    nu__submission_free_committed(&c->s);
    return NU_OK;
}

nu_status nu_commands_wait(nu_commands *c, uint64_t timeout_ns)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_commands_wait: NULL command buffer");
    return nu__submission_wait(&c->s, timeout_ns, "nu_commands_wait");
}
