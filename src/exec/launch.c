/* launch.c: a graph's launches (see launch.h and nuvec/graph.h): bindings, parameters, the
 * copies encoded from the schedule, submissions, waits and freeing. */
#include "exec/launch.h"

#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "core/host.h"
#include "exec/encode.h"
#include "vk/block.h"
#include "vk/queue.h"

static nu_status oom(nu_graph *g)
{
    return nu__fail(g->device, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for a graph");
}

/* ---- the object ------------------------------------------------------------------------- */

nu_graph *nu__graph_alloc(nu_device *d, nu__list *list)
{
    nu_graph *g = nu__calloc(1, sizeof *g);
    if (g && list->cmd_count && !(g->nodes = nu__calloc(list->cmd_count, sizeof *g->nodes))) {
        nu__free(g);
        g = NULL;
    }
    if (!g) {
        nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for a graph");
        return NULL;
    }
    g->device = d;
    g->list = list;
    nu__schedule_init(&g->schedule);
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

void nu__graph_destroy(nu_graph *g)
{
    nu_device *d = g->device;
    for (int i = 0; i < NU__GRAPH_COPIES; i++) {
        nu__graph_copy *cp = &g->copies[i];
        if (cp->pool)
            d->vkd.vkDestroyCommandPool(d->device, cp->pool, NULL);
        if (cp->set_pool)
            d->vkd.vkDestroyDescriptorPool(d->device, cp->set_pool, NULL);
        nu__free(cp->sets);
        nu__trace_command_free(cp->trace);
        nu__submission_fini(&cp->s);
    }
    nu__list_free(g->list); /* no launch is pending: its temporaries may go */
    nu__free(g->nodes);
    nu__schedule_fini(&g->schedule);
    nu__free(g->uses);
    nu__free(g->memory_cmds);
    nu__free(g->slotted);
    nu__free(g->set_infos);
    nu__free(g->set_writes);
    if (g->param_buffer)
        nu_buffer_free(g->param_buffer);
    if (g->param_device)
        nu_buffer_free(g->param_device);
    pthread_mutex_destroy(&g->lock);
    nu__free(g);
}

/* The device's placeholder where the graph has empty ranges (else VK_NULL_HANDLE, unused). */
static nu_status placeholder(nu_graph *g, VkBuffer *out)
{
    *out = VK_NULL_HANDLE;
    return g->list->empty_refs ? nu__device_placeholder(g->device, out) : NU_OK;
}

/* The distinct buffers a launch uses (two slots may be bound to one). */
static nu_status collect_uses(nu_graph *g)
{
    const nu__list *l = g->list;
    if (NU__GROW32(g->uses, g->use_capacity, l->resource_count, 8) != NU_OK)
        return oom(g);
    g->use_count = 0;
    for (uint32_t i = 0; i < l->resource_count; i++) {
        const nu__resource *res = &l->resources[i];
        if (!res->used)
            continue;
        uint32_t u = 0;
        while (u < g->use_count && g->uses[u].buffer != res->buffer)
            u++;
        if (u == g->use_count)
            g->uses[g->use_count++] = (nu__use){res->buffer, res->written};
        else
            g->uses[u].write |= res->written;
    }
    g->uses_version = g->bind_version;
    return NU_OK;
}

nu_status nu__graph_schedule(nu_graph *g)
{
    VkBuffer ph;
    nu_status st = placeholder(g, &ph);
    if (st == NU_OK)
        st = nu__list_resolve(g->list);
    if (st == NU_OK)
        st = nu__schedule_make(&g->schedule, g->list, ph, g->in_order);
    if (st != NU_OK)
        return st;
    g->rebound = false;
    return collect_uses(g);
}

static void copy_done(nu__submission *s);

void nu__graph_ready(nu_graph *g)
{
    for (int i = 0; i < NU__GRAPH_COPIES; i++) {
        nu__graph_copy *cp = &g->copies[i];
        cp->graph = g;
        cp->s.device = g->device;
        cp->s.queue = g->device->compute;
        cp->s.state = NU__DONE;
        cp->s.done = copy_done;
    }
}

/* ---- encoding a copy -------------------------------------------------------------------- */

/* A dispatch's buffers as descriptors (its ranges, then its parameter area in copy `cp`);
 * returns how many. */
static uint32_t cmd_infos(const nu_graph *g, const nu__graph_copy *cp, uint32_t index, VkBuffer ph,
                          VkDescriptorBufferInfo *info)
{
    const nu__list *l = g->list;
    const nu__cmd *c = &l->cmds[index];
    for (uint32_t j = 0; j < c->ref_count; j++) {
        nu__span sp = nu__list_span(l, &l->refs[c->ref_first + j], ph);
        info[j] = (VkDescriptorBufferInfo){sp.vk, sp.start, sp.end - sp.start};
    }
    const nu__graph_node *n = &g->nodes[index];
    if (!n->memory_kernel)
        return c->ref_count;
    VkDeviceSize at = (VkDeviceSize)(cp - g->copies) * g->params_area + n->param_at;
    info[c->ref_count] = g->param_device
                             ? (VkDescriptorBufferInfo){g->params_dev_vk, g->params_dev_offset + at, c->push_size}
                             : (VkDescriptorBufferInfo){g->params_vk, g->params_offset + at, c->push_size};
    return c->ref_count + 1;
}

/* The copy's descriptor sets, made on its first encoding (they live as long as the graph). */
static nu_status make_sets(nu_graph *g, nu__graph_copy *cp)
{
    nu_device *d = g->device;
    VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, g->set_info_count};
    VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .flags = VK_DESCRIPTOR_POOL_CREATE_UPDATE_AFTER_BIND_BIT,
                                     .maxSets = g->slotted_count, .poolSizeCount = 1, .pPoolSizes = &size};
    if (!(cp->sets = nu__calloc(g->slotted_count, sizeof *cp->sets)))
        return oom(g);
    VkResult r = d->vkd.vkCreateDescriptorPool(d->device, &pi, NULL, &cp->set_pool);
    for (uint32_t i = 0; i < g->slotted_count && r == VK_SUCCESS; i++) {
        VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                          .descriptorPool = cp->set_pool, .descriptorSetCount = 1,
                                          .pSetLayouts = &g->nodes[g->slotted[i]].set_kernel->set_layout};
        r = d->vkd.vkAllocateDescriptorSets(d->device, &ai, &cp->sets[i]);
    }
    if (r != VK_SUCCESS) {
        if (cp->set_pool)
            d->vkd.vkDestroyDescriptorPool(d->device, cp->set_pool, NULL);
        cp->set_pool = VK_NULL_HANDLE;
        nu__free(cp->sets);
        cp->sets = NULL;
        return nu__fail(d, nu__vk_status(r), "a graph's descriptor sets: %s", nu__vk_result_name(r));
    }
    cp->sets_version = 0;
    return NU_OK;
}

/* Writes the slotted dispatches' sets of a copy that is not in flight with the current bindings:
 * UPDATE_AFTER_BIND lets the encoded command buffer see them at its next submission. */
static nu_status write_sets(nu_graph *g, nu__graph_copy *cp)
{
    const nu__list *l = g->list;
    VkBuffer ph;
    nu_status st = placeholder(g, &ph);
    if (st != NU_OK)
        return st;
    uint32_t at = 0, writes = 0;
    for (uint32_t i = 0; i < g->slotted_count; i++) {
        const nu__cmd *c = &l->cmds[g->slotted[i]];
        /* Only the sets of dispatches using a slot bound since this copy's sets were written. */
        bool stale = cp->sets_version == 0;
        for (uint32_t j = 0; j < c->ref_count && !stale; j++) {
            uint32_t r = l->refs[c->ref_first + j].resource;
            stale = r != NU__NO_RESOURCE && l->resources[r].slot >= 0 && l->resources[r].bound_at > cp->sets_version;
        }
        if (!stale)
            continue;
        uint32_t count = cmd_infos(g, cp, g->slotted[i], ph, g->set_infos + at);
        g->set_writes[writes++] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                                         .dstSet = cp->sets[i], .dstBinding = 0,
                                                         .descriptorCount = count,
                                                         .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                         .pBufferInfo = g->set_infos + at};
        at += count;
    }
    if (writes)
        g->device->vkd.vkUpdateDescriptorSets(g->device->device, writes, g->set_writes, 0, NULL);
    cp->sets_version = g->bind_version;
    return NU_OK;
}

/* Encodes the copy from the schedule, level by level, with the barriers between levels. */
static nu_status encode_copy(nu_graph *g, nu__graph_copy *cp)
{
    nu_device *d = g->device;
    const nu__list *l = g->list;
    const nu__schedule *s = &g->schedule;
    nu_status st;
    if (!cp->pool && (st = nu__queue_command_pool(d, d->compute, 0, "a graph", &cp->pool, &cp->cmd)) != NU_OK)
        return st;
    if (g->sets && !cp->set_pool && (st = make_sets(g, cp)) != NU_OK)
        return st;
    VkBuffer ph;
    if ((st = placeholder(g, &ph)) != NU_OK)
        return st;
    cp->version = 0;
    d->vkd.vkResetCommandPool(d->device, cp->pool, 0);
    /* While a trace runs, each command between timestamps of the copy's own (kept across its
     * launches: each completion reads them into the trace). The copy is not pending here. */
    nu__trace_command_free(cp->trace);
    cp->trace = NULL;
    cp->traced = nu__trace_active(d);
    uint64_t record_start;
    if (cp->traced && (st = nu__trace_command_new(d, d->compute->index, cp->cmd, &cp->trace, &record_start)) != NU_OK)
        return st;
    if (cp->trace)
        cp->trace->keep = true;
    nu__encoder e;
    if ((st = nu__encoder_begin(&e, d, cp->cmd, 0, "recording a graph")) != NU_OK)
        return st;
    if (g->timestamps)
        nu__encode_timestamp(&e, g->timestamps, 0, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT);
    e.trace = cp->trace;
    if (g->param_device) { /* the launch's parameters into device memory, before any kernel reads them */
        VkDeviceSize at = (VkDeviceSize)(cp - g->copies) * g->params_area;
        nu__encode_copy(&e, g->params_dev_vk, g->params_dev_offset + at, g->params_vk, g->params_offset + at,
                        g->params_area, "parameters");
        VkMemoryBarrier2 mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2, .srcStageMask = VK_PIPELINE_STAGE_2_COPY_BIT,
                               .srcAccessMask = VK_ACCESS_2_TRANSFER_WRITE_BIT,
                               .dstStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
                               .dstAccessMask = VK_ACCESS_2_SHADER_STORAGE_READ_BIT};
        nu__encode_barrier(&e, &mb);
    }
    for (uint32_t lv = 0; lv < s->level_count; lv++) {
        if (lv)
            nu__encode_barrier(&e, &s->barriers[lv]);
        for (uint32_t o = s->level_first[lv]; o < s->level_first[lv + 1]; o++) {
            uint32_t i = s->order[o];
            const nu__cmd *c = &l->cmds[i];
            const nu__graph_node *n = &g->nodes[i];
            const nu__ref *r = &l->refs[c->ref_first];
            if (c->work == NU__WORK_COPY) {
                nu__span dst = nu__list_span(l, &r[0], ph), src = nu__list_span(l, &r[1], ph);
                nu__encode_copy(&e, dst.vk, dst.start, src.vk, src.start, dst.end - dst.start, "copy");
            } else if (c->work == NU__WORK_FILL) {
                nu__span dst = nu__list_span(l, &r[0], ph);
                nu__encode_fill(&e, dst.vk, dst.start, dst.end - dst.start, c->value);
            } else {
                bool by_set = g->sets && n->set_kernel;
                const nu_kernel *k = by_set ? n->set_kernel : n->memory_kernel ? n->memory_kernel : c->kernel;
                /* A set is written before each launch that needs it (write_sets); the memory
                 * kernel's last binding is the copy's own parameter area. */
                VkDescriptorBufferInfo info[NU__MAX_BINDINGS + 1];
                uint32_t count = by_set ? 0 : cmd_infos(g, cp, i, ph, info);
                nu__encode_dispatch(&e, k, c->groups, info, count, by_set ? cp->sets[n->set_index] : VK_NULL_HANDLE,
                                    n->memory_kernel ? NULL : l->push + c->push_first, c->push_size, NULL);
            }
        }
    }
    if (g->timestamps)
        nu__encode_timestamp(&e, g->timestamps, 1, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT);
    if ((st = nu__encoder_end(&e, false, "recording a graph")) != NU_OK)
        return st;
    cp->version = g->version;
    g->recordings++;
    return NU_OK;
}

/* ---- bindings and parameters ------------------------------------------------------------ */

/* Whether memory [start, start + size) of `vk`, bound to resource r, overlaps another resource
 * the graph uses where one of the two is written: a conflict the schedule may not have. */
static bool aliases(const nu__list *l, uint32_t r, VkBuffer vk, uint64_t start, uint64_t size, bool written)
{
    for (uint32_t i = 0; i < l->resource_count; i++) {
        const nu__resource *o = &l->resources[i];
        if (i == r || !o->used || o->vk != vk || !(written || o->written))
            continue;
        uint64_t o_size = o->slot >= 0 ? o->size : o->buffer->size;
        if (start < o->vk_offset + o_size && o->vk_offset < start + size)
            return true;
    }
    return false;
}

nu_status nu_graph_bind(nu_graph *g, uint32_t slot, nu_buffer *b, size_t offset)
{
    static const char fn[] = "nu_graph_bind";
    if (!g)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL graph", fn);
    nu_device *d = g->device;
    nu_status st = nu__buffer_check(b, fn);
    if (st != NU_OK)
        return st;
    if (b->device != d)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the buffer belongs to another device", fn);
    pthread_mutex_lock(&g->lock);
    nu__list *l = g->list;
    if (slot >= l->slot_count) {
        pthread_mutex_unlock(&g->lock);
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: slot %u of a graph with %u slots", fn, slot, l->slot_count);
    }
    nu__resource *res = &l->resources[l->slots[slot]];
    if (offset > b->size || b->size - offset < res->size)
        st = nu__fail(d, NU_ERROR_OUT_OF_RANGE,
                      "%s: slot %u takes %zu bytes, but the buffer holds %zu bytes from offset %zu", fn, slot,
                      res->size, b->size, offset);
    else if (offset & (d->info.min_storage_buffer_offset_alignment - 1))
        st = nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                      "%s: offset %zu is not a multiple of the device's storage buffer alignment (%llu)", fn, offset,
                      (unsigned long long)d->info.min_storage_buffer_offset_alignment);
    else if (res->written && b->read_only)
        st = nu__fail(d, NU_ERROR_READ_ONLY, "%s: the graph writes slot %u, and the buffer is read-only", fn, slot);
    else if (res->size && (st = nu__buffer_prepare(b)) != NU_OK)
        ; /* a mapped file's first GPU use failed (message set) */
    else if (res->buffer != b || res->offset != offset || res->generation != nu__buffer_generation(b)) {
        VkBuffer vk = VK_NULL_HANDLE;
        VkDeviceSize base = 0;
        bool fast = g->sets && nu__buffer_binding(b, &vk, &base) == NU_OK &&
                    !aliases(l, l->slots[slot], vk, base + offset, res->size, res->written);
        res->buffer = b;
        res->offset = offset;
        res->generation = nu__buffer_generation(b);
        res->bound_at = ++g->bind_version;
        if (fast) {
            /* The schedule holds (no new overlap): only the slot's descriptors change. */
            res->vk = vk;
            res->base = base;
            res->vk_offset = base + offset;
        } else {
            g->version++; /* scheduled and encoded again */
            g->rebound = true;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

nu_status nu_graph_set_param(nu_graph *g, uint32_t index, const void *value, size_t size)
{
    static const char fn[] = "nu_graph_set_param";
    if (!g)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL graph", fn);
    nu_device *d = g->device;
    if (!value)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL value", fn);
    nu_status st = NU_OK;
    pthread_mutex_lock(&g->lock);
    nu__list *l = g->list;
    if (index >= l->param_count) {
        st = nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: parameter %u of a graph with %u", fn, index, l->param_count);
    } else if (size != l->params[index].size) {
        st = nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: parameter %u has %u bytes, %zu given", fn, index,
                      l->params[index].size, size);
    } else {
        const nu__param *p = &l->params[index];
        uint8_t *at = l->push + l->cmds[p->cmd].push_first + p->offset;
        if (memcmp(at, value, size) != 0) {
            memcpy(at, value, size);
            if (!g->nodes[p->cmd].memory_kernel)
                g->version++; /* recorded push constants: the copies are encoded anew */
        }
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

/* ---- launching -------------------------------------------------------------------------- */

/* Under the lock: copy `cp` up to date (schedule, encoding, sets, parameter values) and its
 * submission made of the graph's buffer uses and its command buffer. */
static nu_status prepare(nu_graph *g, nu__graph_copy *cp, const char *fn)
{
    nu_device *d = g->device;
    const nu__list *l = g->list;
    nu_status st = NU_OK;
    if (cp->s.state == NU__COMMITTED) {
        /* Every copy is in flight: this one is the oldest. */
        if ((st = nu__submit_wait_value(d, d->compute, cp->s.value, NU_WAIT_FOREVER, fn)) != NU_OK)
            return st;
    }
    if (g->rebound)
        st = nu__graph_schedule(g);
    else if (g->uses_version != g->bind_version)
        st = collect_uses(g); /* slots rebound through their sets */
    /* Encoded again where the graph changed, or a trace started or stopped since. */
    if (st == NU_OK && (cp->version != g->version || cp->traced != nu__trace_active(d)))
        st = encode_copy(g, cp);
    if (st == NU_OK && g->sets && cp->sets_version != g->bind_version)
        st = write_sets(g, cp);
    if (st != NU_OK)
        return st;
    /* Parameters read from memory: the current values into this copy's area (not in flight). */
    if (g->param_buffer) {
        uint8_t *area = (uint8_t *)g->param_buffer->alloc.mapped + (size_t)(cp - g->copies) * g->params_area;
        for (uint32_t i = 0; i < g->memory_cmd_count; i++) {
            const nu__cmd *c = &l->cmds[g->memory_cmds[i]];
            memcpy(area + g->nodes[g->memory_cmds[i]].param_at, l->push + c->push_first, c->push_size);
        }
    }
    /* The launch's submission: the graph's buffer uses, its copy's command buffer; the kernels
     * are the graph's (held until it is destroyed), and there is no pool to hand back. */
    nu__submission *s = &cp->s;
    if (NU__GROW32(s->uses, s->use_capacity, g->use_count, 8) != NU_OK)
        return oom(g);
    s->use_count = 0;
    for (uint32_t i = 0; i < g->use_count; i++) {
        if (nu__use_begin(&s->uses[i], g->uses[i].buffer, g->uses[i].write) != NU_OK) {
            nu__uses_end(s->uses, i, false, (nu__fence){d->compute->index, 0});
            return oom(g);
        }
    }
    s->use_count = g->use_count;
    s->kernel_count = s->staging_count = s->download_count = 0;
    s->error = NU_OK;
    s->freed = false;
    s->pool = VK_NULL_HANDLE;
    s->cmd = cp->cmd;
    s->value = 0;
    s->next = NULL;
    s->trace = cp->trace; /* completion reads the launch's timestamps (and keeps the pools) */
    s->state = NU__RECORDING;
    return NU_OK;
}

nu_status nu_graph_launch(nu_graph *g)
{
    static const char fn[] = "nu_graph_launch";
    if (!g)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL graph", fn);
    nu_device *d = g->device;
    if (nu__device_lost(d))
        return nu__fail(d, NU_ERROR_DEVICE_LOST, "%s: the device was lost", fn);
    nu_status st;
    pthread_mutex_lock(&g->lock);
    const nu__resource *gone = nu__list_freed(g->list);
    if (gone) {
        if (gone->slot >= 0)
            st = nu__fail(d, NU_ERROR_INVALID_HANDLE, "%s: the buffer bound to slot %d was freed (bind another)", fn,
                          gone->slot);
        else
            st = nu__fail(d, NU_ERROR_INVALID_HANDLE,
                          "%s: a buffer the graph uses (\"%s\") was freed: build the graph again", fn,
                          gone->buffer->name);
        pthread_mutex_unlock(&g->lock);
        return st;
    }
    nu__graph_copy *cp = &g->copies[g->next_copy];
    st = prepare(g, cp, fn);
    if (st == NU_OK) {
        cp->launched = true;
        st = nu__submit(&cp->s);
    }
    if (st == NU_OK) {
        g->last_value = cp->s.value;
        g->next_copy = (g->next_copy + 1) % NU__GRAPH_COPIES;
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

nu_status nu_graph_wait(nu_graph *g, uint64_t timeout_ns)
{
    static const char fn[] = "nu_graph_wait";
    if (!g)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL graph", fn);
    pthread_mutex_lock(&g->lock);
    uint64_t value = g->last_value;
    pthread_mutex_unlock(&g->lock);
    if (!value)
        return NU_OK;
    return nu__submit_wait_value(g->device, g->device->compute, value, timeout_ns, fn);
}

static void release(nu_graph *g)
{
    if (atomic_fetch_sub(&g->pending, 1) == 1)
        nu__graph_destroy(g);
}

/* Completion hands back a copy's submission once the graph was freed. */
static void copy_done(nu__submission *s) { release(((nu__graph_copy *)s)->graph); }

nu_status nu_graph_free(nu_graph *g)
{
    if (!g)
        return NU_OK;
    atomic_store(&g->pending, NU__GRAPH_COPIES + 1);
    for (int i = 0; i < NU__GRAPH_COPIES; i++) {
        nu__graph_copy *cp = &g->copies[i];
        if (cp->launched)
            nu__submission_free_committed(&cp->s); /* hands it back now if done, else at completion */
        else
            release(g);
    }
    release(g);
    return NU_OK;
}

/* ---- hooks ------------------------------------------------------------------------------ */

void nu__graph_set_timestamps(nu_graph *g, VkQueryPool pool)
{
    pthread_mutex_lock(&g->lock);
    g->timestamps = pool;
    g->version++;
    pthread_mutex_unlock(&g->lock);
}

uint64_t nu__graph_recordings(nu_graph *g)
{
    pthread_mutex_lock(&g->lock);
    uint64_t n = g->recordings;
    pthread_mutex_unlock(&g->lock);
    return n;
}
