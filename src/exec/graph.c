/* graph.c: building graphs (see nuvec/graph.h): the recording calls only graphs have (slots,
 * parameters, an op's values), and nu_graph_new, which takes the recording's list (exec/list.h),
 * decides per dispatch how its parameters and slots are realised (nu_graph_options, with the
 * developer overrides; exec/launch.h says what each choice means for launches), schedules it
 * (exec/schedule.h) and hands over a graph ready for launches. */
#include "exec/graph.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "exec/commands.h"
#include "exec/launch.h"
#include "exec/list.h"
#include "exec/submission.h"
#include "vk/block.h"

/* ---- the recording calls ---------------------------------------------------------------- */

nu_status nu_graph_record(nu_device *d, nu_commands **out)
{
    if (!out)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_graph_record: NULL out");
    *out = NULL;
    if (!d)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_graph_record: NULL device");
    if (nu__device_lost(d))
        return nu__fail(d, NU_ERROR_DEVICE_LOST, "nu_graph_record: the device was lost");
    nu__list *l = nu__list_new(d);
    if (!l)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    nu_status st = nu__commands_new_list(d, l, out);
    if (st != NU_OK)
        nu__list_free(l);
    return st;
}

/* The list of a graph recording (NULL, with the message, for anything else). */
static nu__list *list_of(nu_commands *c, const char *fn)
{
    if (!c) {
        nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL recording", fn);
        return NULL;
    }
    if (!c->list) {
        nu__fail(c->s.device, NU_ERROR_INVALID_ARGUMENT,
                 "%s: the command buffer was not made by nu_graph_record (or was consumed)", fn);
        return NULL;
    }
    return c->list;
}

nu_status nu_graph_slot(nu_commands *c, nu_buffer *b, uint32_t *slot)
{
    static const char fn[] = "nu_graph_slot";
    if (slot)
        *slot = 0;
    nu__list *l = list_of(c, fn);
    if (!l)
        return NU_ERROR_INVALID_ARGUMENT;
    if (!slot)
        return nu__fail(l->device, NU_ERROR_INVALID_ARGUMENT, "%s: NULL slot", fn);
    nu_status st = nu__buffer_check(b, fn);
    if (st != NU_OK)
        return st;
    if (b->device != l->device)
        return nu__fail(l->device, NU_ERROR_INVALID_ARGUMENT, "%s: the buffer belongs to another device", fn);
    return nu__list_slot(l, b, slot);
}

/* The list a parameter is declared in (*out cleared), or NULL with the error recorded. */
static nu__list *param_list(nu_commands *c, const char *fn, uint32_t *out)
{
    if (out)
        *out = 0;
    nu__list *l = list_of(c, fn);
    if (l && !out) {
        nu__fail(l->device, NU_ERROR_INVALID_ARGUMENT, "%s: NULL param", fn);
        return NULL;
    }
    return l;
}

/* Bytes [offset, offset + size) of command `index`'s push constants as a parameter (nu_graph_param). */
static nu_status param_at(nu__list *l, uint32_t index, uint32_t offset, uint32_t size, uint32_t *out, const char *fn)
{
    nu_device *d = l->device;
    const nu__cmd *c = &l->cmds[index];
    if (!size || offset % 4 || size % 4 || offset > c->push_size || size > c->push_size - offset)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: bytes %u..%u of kernel %s's %u bytes of push constants (multiples of 4, not empty)", fn,
                        offset, offset + size, c->kernel->name, c->push_size);
    unsigned layout = atomic_load_explicit(&c->kernel->count_layout, memory_order_relaxed);
    if (layout) {
        uint32_t at = layout >> 8;
        if (at < offset + size && offset < at + 4)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                            "%s: bytes %u..%u of builtin kernel %s hold its element count, which nuvec checks "
                            "against the bindings when recording: it cannot be a parameter", fn, at, at + 4,
                            c->kernel->name);
    }
    return nu__list_param(l, index, offset, size, out);
}

nu_status nu_graph_param(nu_commands *c, uint32_t offset, uint32_t size, uint32_t *out)
{
    static const char fn[] = "nu_graph_param";
    nu__list *l = param_list(c, fn, out);
    if (!l)
        return NU_ERROR_INVALID_ARGUMENT;
    if (l->last_user < 0)
        return nu__fail(l->device, NU_ERROR_INVALID_ARGUMENT,
                        "%s: the last command recorded is not a dispatch (nu_commands_dispatch or an op)", fn);
    return param_at(l, (uint32_t)l->last_user, offset, size, out, fn);
}

void nu__graph_note_values(nu_commands *c, const char *op, const nu__op_value_at *at, uint32_t count)
{
    if (!c || !c->list)
        return;
    nu__list *l = c->list;
    l->noted_cmds = l->cmd_count;
    l->noted_count = count < NU__MAX_OP_VALUES ? count : NU__MAX_OP_VALUES;
    l->noted_op = op;
    memcpy(l->noted, at, l->noted_count * sizeof *at);
}

nu_status nu__graph_value_param(nu_commands *c, const char *fn, uint32_t value, const char *name, uint32_t *out)
{
    nu__list *l = param_list(c, fn, out);
    if (!l)
        return NU_ERROR_INVALID_ARGUMENT;
    nu_device *d = l->device;
    if (!l->noted_count || l->noted_cmds != l->cmd_count)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: the last command recorded is not an op with values a launch may change (nu_op_rope, "
                        "nu_op_kv_append, nu_op_kv_append_rope, nu_op_attention)", fn);
    for (uint32_t i = 0; i < l->noted_count; i++) {
        const nu__op_value_at *a = &l->noted[i];
        if (a->value != value)
            continue;
        if (a->back >= l->cmd_count || l->cmds[l->cmd_count - 1 - a->back].work != NU__WORK_DISPATCH)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %s's %s is not in a dispatch", fn, l->noted_op, name);
        return param_at(l, l->cmd_count - 1 - a->back, a->offset, 4, out, fn);
    }
    return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the last op recorded (%s) has no %s", fn, l->noted_op, name);
}

/* ---- building --------------------------------------------------------------------------- */

static nu_status oom(nu_graph *g)
{
    return nu__fail(g->device, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory building a graph");
}

/* The dispatches with parameters read them from memory where their kernel has the variant (in
 * the order their first parameter was declared), with their areas in the parameter buffer. */
static nu_status plan_params(nu_graph *g, bool recorded, bool in_device)
{
    nu_device *d = g->device;
    nu__list *l = g->list;
    if (!l->param_count || recorded)
        return NU_OK;
    if (!(g->memory_cmds = nu__malloc(l->param_count * sizeof *g->memory_cmds)))
        return oom(g);
    VkDeviceSize align = d->info.min_storage_buffer_offset_alignment, area = 0;
    for (uint32_t i = 0; i < l->param_count; i++) {
        uint32_t index = l->params[i].cmd;
        const nu__cmd *c = &l->cmds[index];
        nu__graph_node *n = &g->nodes[index];
        if (n->memory_kernel || c->ref_count >= NU__MAX_BINDINGS)
            continue;
        nu_kernel *v;
        nu_status st = nu__kernel_from_memory(c->kernel, &v);
        if (st == NU_OK)
            st = nu__list_keep_kernel(l, v);
        if (st == NU_ERROR_HOST_OUT_OF_MEMORY)
            return oom(g);
        if (st != NU_OK)
            continue; /* no variant: its push constants stay recorded */
        n->memory_kernel = v;
        n->param_at = (uint32_t)area;
        area = (area + c->push_size + align - 1) / align * align;
        g->memory_cmds[g->memory_cmd_count++] = index;
    }
    if (!g->memory_cmd_count)
        return NU_OK;
    g->params_area = area;
    nu_status st = nu__buffer_create_staging(d, (size_t)(area * NU__GRAPH_COPIES), &g->param_buffer);
    if (st != NU_OK)
        return st;
    g->params_vk = ((nu__vk_block *)g->param_buffer->alloc.memory)->buffer;
    g->params_offset = g->param_buffer->alloc.offset;
    if (!in_device)
        return NU_OK;
    if ((st = nu__buffer_create_internal_private(d, (size_t)(area * NU__GRAPH_COPIES), &g->param_device)) != NU_OK)
        return st;
    g->params_dev_vk = ((nu__vk_block *)g->param_device->alloc.memory)->buffer;
    g->params_dev_offset = g->param_device->alloc.offset;
    return NU_OK;
}

/* Whether the command touches a slot. */
static bool slotted(const nu__list *l, const nu__cmd *c)
{
    for (uint32_t j = 0; j < c->ref_count; j++) {
        uint32_t r = l->refs[c->ref_first + j].resource;
        if (r != NU__NO_RESOURCE && l->resources[r].slot >= 0)
            return true;
    }
    return false;
}

/* Slots rebound through descriptor sets where every command touching a slot is a dispatch whose
 * kernel has a variant bound with sets (else a rebinding encodes the copies again). */
static nu_status plan_sets(nu_graph *g)
{
    nu__list *l = g->list;
    if (!l->slot_count || !g->device->has_update_after_bind)
        return NU_OK;
    uint32_t count = 0;
    for (uint32_t i = 0; i < l->cmd_count; i++) {
        const nu__cmd *c = &l->cmds[i];
        if (!slotted(l, c))
            continue;
        if (c->work != NU__WORK_DISPATCH)
            return NU_OK; /* copies and fills name their buffers in the command buffer */
        count++;
    }
    if (!count)
        return NU_OK;
    if (!(g->slotted = nu__malloc(count * sizeof *g->slotted)))
        return oom(g);
    uint32_t infos = 0;
    for (uint32_t i = 0; i < l->cmd_count; i++) {
        const nu__cmd *c = &l->cmds[i];
        nu__graph_node *n = &g->nodes[i];
        if (!slotted(l, c))
            continue;
        nu_kernel *v;
        nu_status st = nu__kernel_with_sets(n->memory_kernel ? n->memory_kernel : c->kernel, &v);
        if (st == NU_OK)
            st = nu__list_keep_kernel(l, v);
        if (st == NU_ERROR_HOST_OUT_OF_MEMORY)
            return oom(g);
        if (st != NU_OK) {
            /* No variant: slots are encoded again. */
            for (uint32_t k = 0; k < g->slotted_count; k++)
                g->nodes[g->slotted[k]].set_kernel = NULL;
            g->slotted_count = 0;
            return NU_OK;
        }
        n->set_kernel = v;
        n->set_index = g->slotted_count;
        g->slotted[g->slotted_count++] = i;
        infos += c->ref_count + (n->memory_kernel ? 1 : 0);
    }
    g->set_infos = nu__malloc(infos * sizeof *g->set_infos);
    g->set_writes = nu__malloc(g->slotted_count * sizeof *g->set_writes);
    if (!g->set_infos || !g->set_writes)
        return oom(g);
    g->set_info_count = infos;
    g->sets = true;
    return NU_OK;
}

nu_status nu_graph_new(nu_commands *c, nu_graph **out) { return nu_graph_new_with(c, NULL, out); }

nu_status nu_graph_new_with(nu_commands *c, const nu_graph_options *options, nu_graph **out)
{
    static const char fn[] = "nu_graph_new";
    if (out)
        *out = NULL;
    nu__list *l = list_of(c, fn);
    if (!l)
        return NU_ERROR_INVALID_ARGUMENT;
    nu_device *d = l->device;
    if (!out)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL out", fn);
    nu_graph_options o = options ? *options : (nu_graph_options){0};
    if ((unsigned)o.params > NU_GRAPH_PARAMS_IN_HOST_MEMORY || (unsigned)o.slots > NU_GRAPH_SLOTS_SETS ||
        (unsigned)o.schedule > NU_GRAPH_SCHEDULE_IN_ORDER)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: unknown options (params %d, slots %d, schedule %d)", fn,
                        (int)o.params, (int)o.slots, (int)o.schedule);
    /* The developer overrides (docs/knobs.md) win over the options. */
    if (nu__env_on("NUVEC_GRAPH_RERECORD")) {
        o.params = NU_GRAPH_PARAMS_RECORDED;
        o.slots = NU_GRAPH_SLOTS_RERECORD;
    } else if (nu__env_on("NUVEC_GRAPH_SETS")) {
        o.slots = NU_GRAPH_SLOTS_SETS;
    }
    const char *pd = getenv("NUVEC_GRAPH_PARAMS_DEVICE");
    if (o.params != NU_GRAPH_PARAMS_RECORDED && pd && (!strcmp(pd, "0") || !strcmp(pd, "1")))
        o.params = *pd == '1' ? NU_GRAPH_PARAMS_IN_DEVICE_MEMORY : NU_GRAPH_PARAMS_IN_HOST_MEMORY;
    if (nu__device_lost(d))
        return nu__fail(d, NU_ERROR_DEVICE_LOST, "%s: the device was lost", fn);
    const nu__resource *gone = nu__list_freed(l);
    if (gone)
        return nu__fail(d, NU_ERROR_INVALID_HANDLE, "%s: a buffer the recording uses (\"%s\") was freed", fn,
                        gone->buffer->name);
    nu_graph *g = nu__graph_alloc(d, l);
    if (!g)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    g->version = g->bind_version = 1;
    g->in_order = o.schedule == NU_GRAPH_SCHEDULE_IN_ORDER;
    /* Parameters from memory: in device memory where the memory the CPU writes them to is not
     * (shared buffers in host memory: a discrete GPU), unless asked otherwise. On the H200 this
     * took 7B decode from 410 to 443 tokens/s in Q4_0 and from 326 to 345 in Q4_K_M
     * (bench/RESULTS.md, fifteenth session). */
    bool in_device = o.params == NU_GRAPH_PARAMS_IN_DEVICE_MEMORY ||
                     ((o.params == NU_GRAPH_PARAMS_DEFAULT || o.params == NU_GRAPH_PARAMS_FROM_MEMORY) &&
                      !d->memory.shared_device_local);
    nu_status st = plan_params(g, o.params == NU_GRAPH_PARAMS_RECORDED, in_device);
    if (st == NU_OK && o.slots == NU_GRAPH_SLOTS_SETS)
        st = plan_sets(g);
    if (st == NU_OK)
        st = nu__graph_schedule(g);
    if (st != NU_OK) {
        g->list = NULL; /* the recording's still */
        nu__graph_destroy(g);
        return st;
    }
    nu__graph_ready(g);
    c->list = NULL; /* the graph's now */
    nu_commands_free(c);
    *out = g;
    return NU_OK;
}

uint32_t nu_graph_node_count(const nu_graph *g) { return g ? g->list->cmd_count : 0; }
uint32_t nu_graph_level_count(const nu_graph *g) { return g ? g->schedule.level_count : 0; }
