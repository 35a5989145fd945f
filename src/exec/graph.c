/* graph.c: graphs: a recording kept as nodes, scheduled once, recorded into Vulkan command
 * buffers once and launched many times (see nuvec/graph.h).
 *
 * What a graph holds:
 * - resources: each distinct buffer the recording touched, or a slot (a resource whose buffer
 *   and base offset a launch may change); nodes' ranges are relative to their resource.
 * - nodes: dispatches (kernel, groups, ranges, push bytes), copies and fills.
 * - a schedule: nodes ordered by dependency level, with the barrier before each level.
 * - up to COPIES recorded copies of the Vulkan command buffer, each with the submission
 *   (exec/submission.h) its launches go through, like a command buffer's commit.
 *
 * Scheduling and barriers: the planner's, by levels (exec/hazard.c's strategy says why): each
 * node's level from the nodes it conflicts with, the nodes ordered by level, and one global
 * VkMemoryBarrier2 between consecutive levels (its destination half narrowed to the later
 * levels' stages and accesses). Ordering against work outside the graph is the submission's
 * (timeline waits, exec/submit.c), as for a commit.
 *
 * Parameters: a dispatch with a parameter uses nu__kernel_from_memory's variant of its kernel,
 * whose push constants are a storage buffer one binding past the kernel's; each copy binds its
 * own area of one host-visible buffer (the dispatch's region in it, at the device's storage
 * buffer alignment), and a launch copies the current push bytes of those dispatches into the
 * area of the copy it submits, which is not in flight (vkQueueSubmit makes host writes made
 * before it visible). Where there is no such variant, a change bumps the graph's version and
 * the copies are recorded again.
 *
 * Slots, by default: a change bumps the version; a copy recorded at an older version is recorded
 * again before it is launched, with the schedule made again first (two slots, or a slot and a
 * fixed buffer, may now be the same memory).
 * Slots through descriptor sets (NUVEC_GRAPH_SETS=1, where the device has UPDATE_AFTER_BIND for
 * storage buffers; plan_sets): every dispatch touching a slot is bound with a descriptor set of
 * its own per copy (nu__kernel_with_sets: the same pipeline with a set layout), so a rebinding
 * records nothing: before a copy's launch, write_sets rewrites the sets of the dispatches using
 * a slot bound since that copy's sets were written (the copy is not in flight; UPDATE_AFTER_BIND
 * is what keeps a recorded command buffer valid when a set it bound is updated). A rebinding
 * whose memory overlaps another buffer of the graph, one of them written (aliases), may need
 * an order the schedule lacks: it takes the default path. Copies and fills name their buffers
 * in the command buffer: a graph with one touching a slot takes the default path. */
#include "exec/graph.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "core/host.h"
#include "exec/commands.h"
#include "exec/draft.h"
#include "exec/encode.h"
#include "exec/hazard.h"
#include "exec/submission.h"
#include "vk/block.h"
#include "vk/queue.h"

#define COPIES 3
#define NO_RESOURCE UINT32_MAX

typedef enum node_kind { NODE_DISPATCH, NODE_COPY, NODE_FILL } node_kind;

/* A buffer the graph touches, or a slot. */
typedef struct resource {
    nu_buffer *buffer;
    unsigned generation;  /* the buffer's when bound: a different one means it was freed */
    size_t offset;        /* where the graph's view of the buffer starts (a slot's binding offset) */
    size_t size;          /* a slot's size: what a binding must hold */
    int32_t slot;         /* -1: fixed */
    uint64_t bound_at;    /* a slot: the graph's bind_version when it was last bound */
    bool used;            /* some node touches it (a slot may be declared and never used) */
    bool written;         /* some node writes it */
    VkBuffer vk;          /* resolved at scheduling */
    VkDeviceSize base;    /* the buffer's offset in vk (its piece, for the planner) */
    VkDeviceSize vk_offset;
} resource;

typedef struct ref {
    uint32_t resource;    /* NO_RESOURCE: an empty range (placeholder slot `offset`) */
    size_t offset, size;  /* within the resource's view */
    bool write;
} ref;

typedef struct node {
    node_kind kind;
    nu_kernel *kernel;
    uint32_t groups[3];
    uint32_t ref_first, ref_count;
    uint32_t push_first, push_size; /* in g->push */
    uint32_t value;                 /* a fill's */
    uint32_t level;
    /* A dispatch with parameters: its kernel reading its push constants from the graph's
     * parameter buffer (nu__kernel_from_memory), at `param_at` in each copy's area; NULL when
     * its push constants are recorded (a change of a parameter then records the copies anew). */
    nu_kernel *memory_kernel;
    uint32_t param_at;
    /* A dispatch touching a slot, when the graph rebinds slots by descriptor sets: its kernel
     * (memory_kernel or kernel) bound with sets (nu__kernel_with_sets), and its set's index. */
    nu_kernel *set_kernel;
    uint32_t set_index;
} node;

typedef struct param {
    uint32_t node, offset, size;
} param;

/* A recorded copy of the command buffer and its launches' submission. */
typedef struct graph_copy {
    nu__submission s; /* first: completion hands it back */
    struct nu_graph *graph;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    uint64_t version; /* the graph's version it was recorded at; 0: never */
    bool launched;    /* s was submitted at least once */
    VkDescriptorPool set_pool; /* the slotted dispatches' sets (UPDATE_AFTER_BIND) */
    VkDescriptorSet *sets;
    uint64_t sets_version;     /* the bind_version they were written at; 0: never */
} graph_copy;

/* An access, resolved to memory, for scheduling. */
typedef struct span {
    uint64_t piece, start, end;
    bool write;
    uint32_t level;
} span;

struct nu_graph {
    nu_device *device;
    pthread_mutex_t lock;
    bool built;          /* nu_graph_new finished */
    resource *resources;
    uint32_t resource_count, resource_capacity;
    uint32_t *slots;     /* slot -> resource */
    uint32_t slot_count, slot_capacity;
    node *nodes;
    uint32_t node_count, node_capacity;
    ref *refs;
    uint32_t ref_count, ref_capacity;
    uint8_t *push;
    uint32_t push_count, push_capacity;
    param *params;
    uint32_t param_count, param_capacity;
    nu_kernel **kernels; /* held until the graph is destroyed */
    uint32_t kernel_count, kernel_capacity;
    nu_buffer **owned;   /* temporaries the recorded ops handed over (nu__draft_adopt): freed with the graph */
    uint32_t owned_count, owned_capacity;
    int32_t last_user;   /* the last node if it is a user dispatch, else -1 */
    /* The last op's values a launch may change (nu__graph_note_values), valid while node_count
     * is noted_nodes. */
    uint32_t noted_nodes, noted_count;
    const char *noted_op;
    nu__op_value_at noted[NU__MAX_OP_VALUES];
    uint32_t empty_refs; /* empty ranges so far (each takes the next placeholder slot) */

    /* The schedule: node indices by level, the first of each level, stages per level. */
    uint32_t *order;
    uint32_t *level_first; /* level_count + 1 entries */
    VkPipelineStageFlags2 *level_stages;    /* what each level's nodes do: a barrier's source half */
    VkAccessFlags2 *level_writes;
    VkPipelineStageFlags2 *later_stages;    /* what the levels from each one on do: its destination half */
    VkAccessFlags2 *later_access;
    uint32_t level_count, level_capacity;
    nu__hazards plan;        /* the planner, by levels (kept for rescheduling) */
    /* The distinct buffers a launch uses (with whether it writes them). */
    nu__use *uses;
    uint32_t use_count, use_capacity;

    uint64_t version;        /* bumped by every change that needs the copies recorded again */
    uint64_t bind_version;   /* bumped by every change of a slot's binding */
    uint64_t uses_version;   /* the bind_version g->uses were collected at */
    /* Slots rebound by updating descriptor sets (graph.c's comment): the dispatches touching a
     * slot, and room for one update of all their sets. */
    bool sets;
    uint32_t *slotted;
    uint32_t slotted_count, slotted_capacity;
    VkDescriptorBufferInfo *set_infos;
    VkWriteDescriptorSet *set_writes;
    uint32_t set_info_count;
    uint64_t schedule_version; /* the version the schedule was made at */
    bool rebound;            /* a slot changed since the schedule was made */
    graph_copy copies[COPIES];
    uint32_t next_copy;
    graph_copy *last;        /* the last launch's copy */
    uint64_t last_value;     /* its queue position */
    /* Parameters read from memory: the nodes, and a host-visible buffer with an area per copy. */
    uint32_t *memory_nodes;
    uint32_t memory_node_count, memory_node_capacity;
    nu_buffer *param_buffer;
    VkBuffer params_vk;
    VkDeviceSize params_offset, params_area;
    VkQueryPool timestamps;
    uint64_t recordings;
    atomic_uint pending;     /* at free: copies in flight + 1 */
};

/* ---- drafting (commands.c records into a graph under construction) ------------------------ */

nu__draft *nu__draft_new(nu_device *d)
{
    nu_graph *g = nu__calloc(1, sizeof *g);
    if (!g) {
        nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for a graph");
        return NULL;
    }
    g->device = d;
    g->last_user = -1;
    nu__hazards_init(&g->plan);
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

static void destroy(nu_graph *g)
{
    nu_device *d = g->device;
    for (int i = 0; i < COPIES; i++) {
        graph_copy *cp = &g->copies[i];
        if (cp->pool)
            d->vkd.vkDestroyCommandPool(d->device, cp->pool, NULL);
        if (cp->set_pool)
            d->vkd.vkDestroyDescriptorPool(d->device, cp->set_pool, NULL);
        nu__free(cp->sets);
        nu__submission_fini(&cp->s);
    }
    for (uint32_t i = 0; i < g->kernel_count; i++)
        nu__kernel_release(g->kernels[i]);
    for (uint32_t i = 0; i < g->owned_count; i++)
        nu_buffer_free(g->owned[i]); /* no launch is pending: destroy runs after the last completes */
    nu__free(g->owned);
    nu__free(g->resources);
    nu__free(g->slots);
    nu__free(g->nodes);
    nu__free(g->refs);
    nu__free(g->push);
    nu__free(g->params);
    nu__free(g->kernels);
    nu__free(g->order);
    nu__free(g->level_first);
    nu__free(g->level_stages);
    nu__free(g->level_writes);
    nu__free(g->later_stages);
    nu__free(g->later_access);
    nu__free(g->uses);
    nu__free(g->memory_nodes);
    nu__free(g->slotted);
    nu__free(g->set_infos);
    nu__free(g->set_writes);
    nu__hazards_fini(&g->plan);
    if (g->param_buffer)
        nu_buffer_free(g->param_buffer);
    pthread_mutex_destroy(&g->lock);
    nu__free(g);
}

void nu__draft_free(nu__draft *g)
{
    if (g)
        destroy(g);
}

static nu_status oom(nu_graph *g)
{
    return nu__fail(g->device, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory recording a graph");
}

nu_status nu__draft_adopt(nu__draft *g, nu_buffer *b)
{
    if (NU__GROW32(g->owned, g->owned_capacity, g->owned_count + 1, 4) != NU_OK) {
        nu_buffer_free(b);
        return oom(g);
    }
    g->owned[g->owned_count++] = b;
    return NU_OK;
}

/* The resource of buffer b (made when new): its index, or NO_RESOURCE for want of memory. */
static uint32_t resource_of(nu_graph *g, nu_buffer *b)
{
    unsigned gen = nu__buffer_generation(b);
    for (uint32_t i = g->resource_count; i-- > 0;)
        if (g->resources[i].buffer == b && g->resources[i].generation == gen)
            return i;
    if (NU__GROW32(g->resources, g->resource_capacity, g->resource_count + 1, 8) != NU_OK)
        return NO_RESOURCE;
    g->resources[g->resource_count] = (resource){.buffer = b, .generation = gen, .size = b->size, .slot = -1};
    return g->resource_count++;
}

static nu_status keep_kernel(nu_graph *g, nu_kernel *k)
{
    for (uint32_t i = g->kernel_count; i-- > 0;)
        if (g->kernels[i] == k)
            return NU_OK;
    if (NU__GROW32(g->kernels, g->kernel_capacity, g->kernel_count + 1, 8) != NU_OK)
        return oom(g);
    nu__kernel_retain(k);
    g->kernels[g->kernel_count++] = k;
    return NU_OK;
}

/* Appends a node with these ranges (and push bytes); *out its index. Leaves nothing on failure. */
static nu_status add_node(nu_graph *g, node n, const nu__draft_ref *refs, uint32_t count, const void *push)
{
    if (NU__GROW32(g->nodes, g->node_capacity, g->node_count + 1, 16) != NU_OK ||
        NU__GROW32(g->refs, g->ref_capacity, g->ref_count + count, 32) != NU_OK ||
        NU__GROW32(g->push, g->push_capacity, g->push_count + n.push_size, 256) != NU_OK)
        return oom(g);
    uint32_t resources = g->resource_count;
    for (uint32_t i = 0; i < count; i++) {
        ref r = {.resource = NO_RESOURCE, .offset = refs[i].offset, .size = refs[i].size, .write = refs[i].write};
        if (refs[i].size) {
            r.resource = resource_of(g, refs[i].buffer);
            if (r.resource == NO_RESOURCE) {
                g->resource_count = resources;
                return oom(g);
            }
        } else {
            r.offset = (size_t)(g->empty_refs++ % NU__PLACEHOLDER_SLOTS) * NU__PLACEHOLDER_SLOT;
        }
        g->refs[g->ref_count + i] = r;
    }
    for (uint32_t i = 0; i < count; i++) {
        uint32_t r = g->refs[g->ref_count + i].resource;
        if (r != NO_RESOURCE) {
            g->resources[r].used = true;
            g->resources[r].written |= refs[i].write;
        }
    }
    n.ref_first = g->ref_count;
    n.ref_count = count;
    n.push_first = g->push_count;
    if (push && n.push_size) /* copies and fills carry no push constants */
        memcpy(g->push + g->push_count, push, n.push_size);
    g->ref_count += count;
    g->push_count += n.push_size;
    g->nodes[g->node_count++] = n;
    g->last_user = -1;
    return NU_OK;
}

nu_status nu__draft_dispatch(nu__draft *g, nu_kernel *k, const uint32_t groups[3], const nu__draft_ref *refs,
                             uint32_t n, const void *push, uint32_t push_size)
{
    nu_status st = keep_kernel(g, k);
    if (st != NU_OK)
        return st;
    node nd = {.kind = NODE_DISPATCH, .kernel = k, .groups = {groups[0], groups[1], groups[2]},
               .push_size = push_size};
    return add_node(g, nd, refs, n, push);
}

nu_status nu__draft_copy(nu__draft *g, const nu__draft_ref *dst, const nu__draft_ref *src)
{
    nu__draft_ref r[2] = {*dst, *src};
    return add_node(g, (node){.kind = NODE_COPY}, r, 2, NULL);
}

nu_status nu__draft_fill(nu__draft *g, const nu__draft_ref *dst, uint32_t value)
{
    return add_node(g, (node){.kind = NODE_FILL, .value = value}, dst, 1, NULL);
}

void nu__draft_mark_user(nu__draft *g) { g->last_user = (int32_t)g->node_count - 1; }

/* ---- the public recording calls -------------------------------------------------------- */

nu_status nu_graph_record(nu_device *d, nu_commands **out)
{
    if (!out)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_graph_record: NULL out");
    *out = NULL;
    if (!d)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_graph_record: NULL device");
    if (nu__device_lost(d))
        return nu__fail(d, NU_ERROR_DEVICE_LOST, "nu_graph_record: the device was lost");
    nu_graph *g = nu__draft_new(d);
    if (!g)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    nu_status st = nu__commands_new_draft(d, g, out);
    if (st != NU_OK)
        destroy(g);
    return st;
}

/* The graph under construction of a recording (NULL, with the message, for anything else). */
static nu_graph *draft_of(nu_commands *c, const char *fn)
{
    if (!c) {
        nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL recording", fn);
        return NULL;
    }
    if (!c->draft) {
        nu__fail(c->s.device, NU_ERROR_INVALID_ARGUMENT,
                 "%s: the command buffer was not made by nu_graph_record (or was consumed)", fn);
        return NULL;
    }
    return c->draft;
}

nu_status nu_graph_slot(nu_commands *c, nu_buffer *b, uint32_t *slot)
{
    static const char fn[] = "nu_graph_slot";
    if (slot)
        *slot = 0;
    nu_graph *g = draft_of(c, fn);
    if (!g)
        return NU_ERROR_INVALID_ARGUMENT;
    if (!slot)
        return nu__fail(g->device, NU_ERROR_INVALID_ARGUMENT, "%s: NULL slot", fn);
    nu_status st = nu__buffer_check(b, fn);
    if (st != NU_OK)
        return st;
    if (b->device != g->device)
        return nu__fail(g->device, NU_ERROR_INVALID_ARGUMENT, "%s: the buffer belongs to another device", fn);
    uint32_t r = resource_of(g, b);
    if (r == NO_RESOURCE)
        return oom(g);
    if (g->resources[r].slot >= 0) {
        *slot = (uint32_t)g->resources[r].slot;
        return NU_OK;
    }
    if (NU__GROW32(g->slots, g->slot_capacity, g->slot_count + 1, 8) != NU_OK)
        return oom(g);
    g->resources[r].slot = (int32_t)g->slot_count;
    g->slots[g->slot_count] = r;
    *slot = g->slot_count++;
    return NU_OK;
}

static nu_status param_at(nu_graph *g, uint32_t index, uint32_t offset, uint32_t size, uint32_t *out, const char *fn);

/* The graph a parameter is declared in (*out cleared), or NULL with the error recorded. */
static nu_graph *param_draft(nu_commands *c, const char *fn, uint32_t *out)
{
    if (out)
        *out = 0;
    nu_graph *g = draft_of(c, fn);
    if (g && !out) {
        nu__fail(g->device, NU_ERROR_INVALID_ARGUMENT, "%s: NULL param", fn);
        return NULL;
    }
    return g;
}

nu_status nu_graph_param(nu_commands *c, uint32_t offset, uint32_t size, uint32_t *out)
{
    static const char fn[] = "nu_graph_param";
    nu_graph *g = param_draft(c, fn, out);
    if (!g)
        return NU_ERROR_INVALID_ARGUMENT;
    nu_device *d = g->device;
    if (g->last_user < 0)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: the last command recorded is not a dispatch (nu_commands_dispatch or an op)", fn);
    return param_at(g, (uint32_t)g->last_user, offset, size, out, fn);
}

void nu__graph_note_values(nu_commands *c, const char *op, const nu__op_value_at *at, uint32_t count)
{
    if (!c || !c->draft)
        return;
    nu_graph *g = c->draft;
    g->noted_nodes = g->node_count;
    g->noted_count = count < NU__MAX_OP_VALUES ? count : NU__MAX_OP_VALUES;
    g->noted_op = op;
    memcpy(g->noted, at, g->noted_count * sizeof *at);
}

nu_status nu__graph_value_param(nu_commands *c, const char *fn, uint32_t value, const char *name, uint32_t *out)
{
    nu_graph *g = param_draft(c, fn, out);
    if (!g)
        return NU_ERROR_INVALID_ARGUMENT;
    nu_device *d = g->device;
    if (!g->noted_count || g->noted_nodes != g->node_count)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: the last command recorded is not an op with values a launch may change (nu_op_rope, "
                        "nu_op_kv_append, nu_op_kv_append_rope, nu_op_attention)", fn);
    for (uint32_t i = 0; i < g->noted_count; i++) {
        const nu__op_value_at *a = &g->noted[i];
        if (a->value != value)
            continue;
        if (a->back >= g->node_count || g->nodes[g->node_count - 1 - a->back].kind != NODE_DISPATCH)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %s's %s is not in a dispatch", fn, g->noted_op, name);
        return param_at(g, g->node_count - 1 - a->back, a->offset, 4, out, fn);
    }
    return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the last op recorded (%s) has no %s", fn, g->noted_op, name);
}

/* Bytes [offset, offset + size) of node `index`'s push constants as a parameter (nu_graph_param). */
static nu_status param_at(nu_graph *g, uint32_t index, uint32_t offset, uint32_t size, uint32_t *out, const char *fn)
{
    nu_device *d = g->device;
    const node *n = &g->nodes[index];
    if (!size || offset % 4 || size % 4 || offset > n->push_size || size > n->push_size - offset)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: bytes %u..%u of kernel %s's %u bytes of push constants (multiples of 4, not empty)", fn,
                        offset, offset + size, n->kernel->name, n->push_size);
    unsigned layout = atomic_load_explicit(&n->kernel->count_layout, memory_order_relaxed);
    if (layout) {
        uint32_t at = layout >> 8;
        if (at < offset + size && offset < at + 4)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                            "%s: bytes %u..%u of builtin kernel %s hold its element count, which nuvec checks "
                            "against the bindings when recording: it cannot be a parameter", fn, at, at + 4,
                            n->kernel->name);
    }
    if (NU__GROW32(g->params, g->param_capacity, g->param_count + 1, 8) != NU_OK ||
        NU__GROW32(g->memory_nodes, g->memory_node_capacity, g->memory_node_count + 1, 8) != NU_OK)
        return oom(g);
    node *m = &g->nodes[index];
    if (!m->memory_kernel && m->ref_count < NU__MAX_BINDINGS && !nu__env_on("NUVEC_GRAPH_RERECORD")) {
        /* Its push constants from memory, so that a change records nothing: where the kernel
         * cannot be rewritten, the copies are recorded anew instead (nuvec/graph.h). */
        nu_kernel *v;
        nu_status st = nu__kernel_from_memory(m->kernel, &v);
        if (st == NU_OK)
            st = keep_kernel(g, v);
        if (st == NU_ERROR_HOST_OUT_OF_MEMORY)
            return oom(g);
        if (st == NU_OK) {
            m->memory_kernel = v;
            g->memory_nodes[g->memory_node_count++] = index;
        }
    }
    g->params[g->param_count] = (param){index, offset, size};
    *out = g->param_count++;
    return NU_OK;
}

/* ---- scheduling -------------------------------------------------------------------------- */

/* A node's ranges resolved to memory (the resources' current bindings). */
static span resolve(nu_graph *g, const ref *r, VkBuffer placeholder)
{
    if (r->resource == NO_RESOURCE)
        return (span){(uint64_t)placeholder, r->offset, r->offset + NU__PLACEHOLDER_SLOT, r->write, 0};
    const resource *res = &g->resources[r->resource];
    uint64_t start = res->vk_offset + r->offset;
    return (span){(uint64_t)res->vk, start, start + r->size, r->write, 0};
}

static nu__work node_work(const node *n)
{
    return n->kind == NODE_DISPATCH ? NU__WORK_DISPATCH : n->kind == NODE_COPY ? NU__WORK_COPY : NU__WORK_FILL;
}

static VkPipelineStageFlags2 node_stage(const node *n) { return nu__work_stage(node_work(n)); }

static VkAccessFlags2 ref_access(const node *n, bool write) { return nu__work_access(node_work(n), write); }

static nu_status collect_uses(nu_graph *g);

/* Resolves the resources' memory, levels the nodes, orders them by level and lists the buffers a
 * launch uses. On failure the previous schedule is kept only if nothing was changed yet: the
 * caller treats failure as fatal for the launch (the message is set). */
static nu_status schedule(nu_graph *g)
{
    nu_device *d = g->device;
    VkBuffer placeholder = VK_NULL_HANDLE;
    nu_status st = NU_OK;
    if (g->empty_refs && (st = nu__device_placeholder(d, &placeholder)) != NU_OK)
        return st;
    for (uint32_t i = 0; i < g->resource_count; i++) {
        resource *res = &g->resources[i];
        VkDeviceSize base;
        if ((st = nu__buffer_binding(res->buffer, &res->vk, &base)) != NU_OK)
            return st;
        res->base = base;
        res->vk_offset = base + res->offset;
    }
    /* The levels: the planner's, by levels (exec/hazard.c says why). */
    nu__hazards_reset(&g->plan);
    uint32_t levels = 0;
    for (uint32_t i = 0; i < g->node_count; i++) {
        node *n = &g->nodes[i];
        nu__access acc[NU__MAX_BINDINGS];
        VkPipelineStageFlags2 stage = node_stage(n);
        for (uint32_t j = 0; j < n->ref_count; j++) {
            const ref *r = &g->refs[n->ref_first + j];
            span sp = resolve(g, r, placeholder);
            uint64_t base = r->resource == NO_RESOURCE ? 0 : g->resources[r->resource].base;
            acc[j] = (nu__access){.piece = sp.piece, .base = base, .start = sp.start, .end = sp.end, .write = sp.write,
                                  .stage = stage, .access = ref_access(n, sp.write)};
        }
        if (nu__hazards_level(&g->plan, acc, n->ref_count, &n->level) != NU_OK)
            return oom(g);
        if (n->level + 1 > levels)
            levels = n->level + 1;
    }

    /* Order by level (stable), and each level's stages and accesses. */
    uint32_t cap = g->level_capacity;
    if (levels + 1 > cap) {
        uint32_t want = levels + 1;
        uint32_t *first = nu__realloc(g->level_first, want * sizeof *first);
        if (first)
            g->level_first = first;
        VkPipelineStageFlags2 *stages = first ? nu__realloc(g->level_stages, want * sizeof *stages) : NULL;
        if (stages)
            g->level_stages = stages;
        VkAccessFlags2 *writes = stages ? nu__realloc(g->level_writes, want * sizeof *writes) : NULL;
        if (writes)
            g->level_writes = writes;
        VkPipelineStageFlags2 *later = writes ? nu__realloc(g->later_stages, want * sizeof *later) : NULL;
        if (later)
            g->later_stages = later;
        VkAccessFlags2 *access = later ? nu__realloc(g->later_access, want * sizeof *access) : NULL;
        if (access)
            g->later_access = access;
        if (!access)
            return oom(g);
        g->level_capacity = want;
    }
    if (g->node_count && !g->order && !(g->order = nu__malloc(g->node_count * sizeof *g->order)))
        return oom(g);
    memset(g->level_first, 0, (levels + 1) * sizeof *g->level_first);
    memset(g->level_stages, 0, levels * sizeof *g->level_stages);
    memset(g->level_writes, 0, levels * sizeof *g->level_writes);
    memset(g->later_stages, 0, (levels + 1) * sizeof *g->later_stages);
    memset(g->later_access, 0, (levels + 1) * sizeof *g->later_access);
    for (uint32_t i = 0; i < g->node_count; i++) {
        const node *n = &g->nodes[i];
        g->level_first[n->level + 1]++;
        g->level_stages[n->level] |= node_stage(n);
        for (uint32_t j = 0; j < n->ref_count; j++) {
            bool w = g->refs[n->ref_first + j].write;
            g->later_access[n->level] |= ref_access(n, w);
            if (w)
                g->level_writes[n->level] |= ref_access(n, true);
        }
        /* A read-write binding is read too. */
        if (n->kind == NODE_DISPATCH)
            g->later_access[n->level] |= VK_ACCESS_2_SHADER_STORAGE_READ_BIT;
    }
    for (uint32_t l = levels; l-- > 0;) {
        g->later_stages[l] = g->level_stages[l] | g->later_stages[l + 1];
        g->later_access[l] |= g->later_access[l + 1];
    }
    for (uint32_t l = 0; l < levels; l++)
        g->level_first[l + 1] += g->level_first[l];
    uint32_t *fill = nu__malloc((levels + 1) * sizeof *fill);
    if (!fill)
        return oom(g);
    memcpy(fill, g->level_first, (levels + 1) * sizeof *fill);
    for (uint32_t i = 0; i < g->node_count; i++)
        g->order[fill[g->nodes[i].level]++] = i;
    nu__free(fill);
    g->level_count = levels;

    g->schedule_version = g->version;
    g->rebound = false;
    return collect_uses(g);
}

/* The distinct buffers a launch uses (two slots may be bound to one). */
static nu_status collect_uses(nu_graph *g)
{
    if (NU__GROW32(g->uses, g->use_capacity, g->resource_count, 8) != NU_OK)
        return oom(g);
    g->use_count = 0;
    for (uint32_t i = 0; i < g->resource_count; i++) {
        const resource *res = &g->resources[i];
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

/* ---- recording a copy ------------------------------------------------------------------- */

/* A dispatch's buffers as descriptors (its ranges, then its parameter area in copy `cp`);
 * returns how many. */
static uint32_t node_infos(const nu_graph *g, const graph_copy *cp, const node *n, VkBuffer placeholder,
                           VkDescriptorBufferInfo *info)
{
    for (uint32_t j = 0; j < n->ref_count; j++) {
        span a = resolve((nu_graph *)g, &g->refs[n->ref_first + j], placeholder);
        info[j] = (VkDescriptorBufferInfo){(VkBuffer)a.piece, a.start, a.end - a.start};
    }
    if (!n->memory_kernel)
        return n->ref_count;
    info[n->ref_count] = (VkDescriptorBufferInfo){
        g->params_vk, g->params_offset + (VkDeviceSize)(cp - g->copies) * g->params_area + n->param_at, n->push_size};
    return n->ref_count + 1;
}

/* The copy's descriptor sets, made on its first recording (they live as long as the graph). */
static nu_status make_sets(nu_graph *g, graph_copy *cp)
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
 * UPDATE_AFTER_BIND lets the recorded command buffer see them at its next submission. */
static nu_status write_sets(nu_graph *g, graph_copy *cp)
{
    nu_device *d = g->device;
    VkBuffer placeholder = VK_NULL_HANDLE;
    nu_status st;
    if (g->empty_refs && (st = nu__device_placeholder(d, &placeholder)) != NU_OK)
        return st;
    uint32_t at = 0, writes = 0;
    for (uint32_t i = 0; i < g->slotted_count; i++) {
        const node *n = &g->nodes[g->slotted[i]];
        /* Only the sets of dispatches using a slot bound since this copy's sets were written. */
        bool stale = cp->sets_version == 0;
        for (uint32_t j = 0; j < n->ref_count && !stale; j++) {
            uint32_t r = g->refs[n->ref_first + j].resource;
            stale = r != NO_RESOURCE && g->resources[r].slot >= 0 && g->resources[r].bound_at > cp->sets_version;
        }
        if (!stale)
            continue;
        uint32_t count = node_infos(g, cp, n, placeholder, g->set_infos + at);
        g->set_writes[writes++] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                                         .dstSet = cp->sets[i], .dstBinding = 0,
                                                         .descriptorCount = count,
                                                         .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                         .pBufferInfo = g->set_infos + at};
        at += count;
    }
    if (writes)
        d->vkd.vkUpdateDescriptorSets(d->device, writes, g->set_writes, 0, NULL);
    cp->sets_version = g->bind_version;
    return NU_OK;
}

static nu_status record_copy(nu_graph *g, graph_copy *cp)
{
    nu_device *d = g->device;
    nu_status st;
    if (!cp->pool &&
        (st = nu__queue_command_pool(d, d->compute, 0, "a graph", &cp->pool, &cp->cmd)) != NU_OK)
        return st;
    if (g->sets && !cp->set_pool && (st = make_sets(g, cp)) != NU_OK)
        return st;
    VkBuffer placeholder = VK_NULL_HANDLE;
    if (g->empty_refs && (st = nu__device_placeholder(d, &placeholder)) != NU_OK)
        return st;
    cp->version = 0;
    d->vkd.vkResetCommandPool(d->device, cp->pool, 0);
    nu__encoder e;
    if ((st = nu__encoder_begin(&e, d, cp->cmd, 0, "recording a graph")) != NU_OK)
        return st;
    if (g->timestamps)
        nu__encode_timestamp(&e, g->timestamps, 0, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT);
    for (uint32_t l = 0; l < g->level_count; l++) {
        if (l) {
            VkMemoryBarrier2 mb = nu__hazard_level_barrier(g->level_stages[l - 1], g->level_writes[l - 1],
                                                           g->later_stages[l], g->later_access[l]);
            nu__encode_barrier(&e, &mb);
        }
        for (uint32_t o = g->level_first[l]; o < g->level_first[l + 1]; o++) {
            const node *n = &g->nodes[g->order[o]];
            span s[NU__MAX_BINDINGS];
            for (uint32_t j = 0; j < n->ref_count; j++)
                s[j] = resolve(g, &g->refs[n->ref_first + j], placeholder);
            if (n->kind == NODE_COPY) {
                nu__encode_copy(&e, (VkBuffer)s[0].piece, s[0].start, (VkBuffer)s[1].piece, s[1].start,
                                s[0].end - s[0].start, "copy");
                continue;
            }
            if (n->kind == NODE_FILL) {
                nu__encode_fill(&e, (VkBuffer)s[0].piece, s[0].start, s[0].end - s[0].start, n->value);
                continue;
            }
            bool by_set = g->sets && n->set_kernel;
            nu_kernel *k = by_set ? n->set_kernel : n->memory_kernel ? n->memory_kernel : n->kernel;
            /* The sets are written before each launch that needs them (write_sets); the memory
             * kernel's last binding is the copy's own parameter area. */
            VkDescriptorBufferInfo info[NU__MAX_BINDINGS + 1];
            uint32_t bindings = by_set ? 0 : node_infos(g, cp, n, placeholder, info);
            nu__encode_dispatch(&e, k, n->groups, info, bindings, by_set ? cp->sets[n->set_index] : VK_NULL_HANDLE,
                                n->memory_kernel ? NULL : g->push + n->push_first, n->push_size, NULL);
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

/* ---- building ---------------------------------------------------------------------------- */

static void copy_done(nu__submission *s);

/* Whether the node touches a slot. */
static bool slotted(const nu_graph *g, const node *n)
{
    for (uint32_t j = 0; j < n->ref_count; j++) {
        uint32_t r = g->refs[n->ref_first + j].resource;
        if (r != NO_RESOURCE && g->resources[r].slot >= 0)
            return true;
    }
    return false;
}

/* Slots rebound through descriptor sets where every node touching a slot is a dispatch whose
 * kernel has a variant bound with sets (else a rebinding records the copies again). */
static nu_status plan_sets(nu_graph *g)
{
    nu_device *d = g->device;
    g->sets = false;
    g->slotted_count = 0;
    g->set_info_count = 0;
    /* Opt-in (NUVEC_GRAPH_SETS=1) until it has run on a device that has UPDATE_AFTER_BIND for
     * storage buffers: lavapipe, where the tests run, does not. */
    if (!g->slot_count || !d->has_update_after_bind || !nu__env_on("NUVEC_GRAPH_SETS") ||
        nu__env_on("NUVEC_GRAPH_RERECORD"))
        return NU_OK;
    for (uint32_t i = 0; i < g->node_count; i++) {
        node *n = &g->nodes[i];
        if (!slotted(g, n))
            continue;
        if (n->kind != NODE_DISPATCH)
            return NU_OK; /* copies and fills name their buffers in the command buffer */
        nu_kernel *v;
        nu_status st = nu__kernel_with_sets(n->memory_kernel ? n->memory_kernel : n->kernel, &v);
        if (st == NU_OK)
            st = keep_kernel(g, v);
        if (st == NU_ERROR_HOST_OUT_OF_MEMORY)
            return oom(g);
        if (st != NU_OK)
            return NU_OK;
        if (NU__GROW32(g->slotted, g->slotted_capacity, g->slotted_count + 1, 8) != NU_OK)
            return oom(g);
        n->set_kernel = v;
        n->set_index = g->slotted_count;
        g->slotted[g->slotted_count++] = i;
        g->set_info_count += n->ref_count + (n->memory_kernel ? 1 : 0);
    }
    if (!g->slotted_count)
        return NU_OK;
    nu__free(g->set_infos);
    nu__free(g->set_writes);
    g->set_infos = nu__malloc(g->set_info_count * sizeof *g->set_infos);
    g->set_writes = nu__malloc(g->slotted_count * sizeof *g->set_writes);
    if (!g->set_infos || !g->set_writes)
        return oom(g);
    g->sets = true;
    return NU_OK;
}

/* The first buffer of the graph that was freed (its resource), or NULL. */
static const resource *freed_resource(const nu_graph *g)
{
    for (uint32_t i = 0; i < g->resource_count; i++)
        if (g->resources[i].used && nu__buffer_generation(g->resources[i].buffer) != g->resources[i].generation)
            return &g->resources[i];
    return NULL;
}


nu_status nu_graph_new(nu_commands *c, nu_graph **out)
{
    static const char fn[] = "nu_graph_new";
    if (out)
        *out = NULL;
    nu_graph *g = draft_of(c, fn);
    if (!g)
        return NU_ERROR_INVALID_ARGUMENT;
    nu_device *d = g->device;
    if (!out)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL out", fn);
    if (nu__device_lost(d))
        return nu__fail(d, NU_ERROR_DEVICE_LOST, "%s: the device was lost", fn);
    const resource *gone = freed_resource(g);
    if (gone)
        return nu__fail(d, NU_ERROR_INVALID_HANDLE, "%s: a buffer the recording uses (\"%s\") was freed", fn,
                        gone->buffer->name);
    g->version = g->bind_version = 1;
    nu_status st = schedule(g);
    if (st != NU_OK)
        return st;
    if (g->memory_node_count && !g->param_buffer) {
        VkDeviceSize align = d->info.min_storage_buffer_offset_alignment, area = 0;
        for (uint32_t i = 0; i < g->memory_node_count; i++) {
            node *n = &g->nodes[g->memory_nodes[i]];
            n->param_at = (uint32_t)area;
            area = (area + n->push_size + align - 1) / align * align;
        }
        g->params_area = area;
        if ((st = nu__buffer_create_staging(d, (size_t)(area * COPIES), &g->param_buffer)) != NU_OK)
            return st;
        g->params_vk = ((nu__vk_block *)g->param_buffer->alloc.memory)->buffer;
        g->params_offset = g->param_buffer->alloc.offset;
    }
    if ((st = plan_sets(g)) != NU_OK)
        return st;
    for (int i = 0; i < COPIES; i++) {
        graph_copy *cp = &g->copies[i];
        cp->graph = g;
        cp->s.device = d;
        cp->s.queue = d->compute;
        cp->s.state = NU__DONE;
        cp->s.done = copy_done;
    }
    g->built = true;
    c->draft = NULL; /* the graph is no longer the recording's */
    nu_commands_free(c);
    *out = g;
    return NU_OK;
}

uint32_t nu_graph_node_count(const nu_graph *g) { return g ? g->node_count : 0; }
uint32_t nu_graph_level_count(const nu_graph *g) { return g ? g->level_count : 0; }

/* ---- parameters -------------------------------------------------------------------------- */

static nu_status built(const nu_graph *g, const char *fn)
{
    if (!g)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL graph", fn);
    return NU_OK;
}

/* Whether memory [start, start + size) of `piece`, bound to resource r, overlaps another resource
 * the graph uses where one of the two is written: a conflict the schedule may not have. */
static bool aliases(const nu_graph *g, uint32_t r, uint64_t piece, uint64_t start, uint64_t size, bool written)
{
    for (uint32_t i = 0; i < g->resource_count; i++) {
        const resource *o = &g->resources[i];
        if (i == r || !o->used || (uint64_t)o->vk != piece || !(written || o->written))
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
    nu_status st = built(g, fn);
    if (st != NU_OK)
        return st;
    nu_device *d = g->device;
    if ((st = nu__buffer_check(b, fn)) != NU_OK)
        return st;
    if (b->device != d)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the buffer belongs to another device", fn);
    pthread_mutex_lock(&g->lock);
    if (slot >= g->slot_count) {
        pthread_mutex_unlock(&g->lock);
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: slot %u of a graph with %u slots", fn, slot, g->slot_count);
    }
    resource *res = &g->resources[g->slots[slot]];
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
                    !aliases(g, g->slots[slot], (uint64_t)vk, base + offset, res->size, res->written);
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
            g->version++; /* scheduled and recorded again */
            g->rebound = true;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

nu_status nu_graph_set_param(nu_graph *g, uint32_t index, const void *value, size_t size)
{
    static const char fn[] = "nu_graph_set_param";
    nu_status st = built(g, fn);
    if (st != NU_OK)
        return st;
    nu_device *d = g->device;
    if (!value)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL value", fn);
    pthread_mutex_lock(&g->lock);
    if (index >= g->param_count) {
        st = nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: parameter %u of a graph with %u", fn, index, g->param_count);
    } else if (size != g->params[index].size) {
        st = nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: parameter %u has %u bytes, %zu given", fn, index,
                      g->params[index].size, size);
    } else {
        const param *p = &g->params[index];
        uint8_t *at = g->push + g->nodes[p->node].push_first + p->offset;
        if (memcmp(at, value, size) != 0) {
            memcpy(at, value, size);
            if (!g->nodes[p->node].memory_kernel)
                g->version++; /* recorded push constants: the copies are recorded anew */
        }
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

/* ---- launching --------------------------------------------------------------------------- */

nu_status nu_graph_launch(nu_graph *g)
{
    static const char fn[] = "nu_graph_launch";
    nu_status st = built(g, fn);
    if (st != NU_OK)
        return st;
    nu_device *d = g->device;
    if (nu__device_lost(d))
        return nu__fail(d, NU_ERROR_DEVICE_LOST, "%s: the device was lost", fn);
    pthread_mutex_lock(&g->lock);
    const resource *gone = freed_resource(g);
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
    graph_copy *cp = &g->copies[g->next_copy];
    if (cp->s.state == NU__COMMITTED) {
        /* Every copy is in flight: this one is the oldest. */
        st = nu__submit_wait_value(d, d->compute, cp->s.value, NU_WAIT_FOREVER, fn);
        if (st != NU_OK) {
            pthread_mutex_unlock(&g->lock);
            return st;
        }
    }
    if (g->rebound)
        st = schedule(g);
    else if (g->uses_version != g->bind_version)
        st = collect_uses(g); /* slots rebound through their sets */
    if (st == NU_OK && cp->version != g->version)
        st = record_copy(g, cp);
    if (st == NU_OK && g->sets && cp->sets_version != g->bind_version)
        st = write_sets(g, cp);
    if (st != NU_OK) {
        pthread_mutex_unlock(&g->lock);
        return st;
    }
    /* Parameters read from memory: the current values into this copy's area (not in flight). */
    if (g->param_buffer) {
        uint8_t *area = (uint8_t *)g->param_buffer->alloc.mapped + (size_t)(cp - g->copies) * g->params_area;
        for (uint32_t i = 0; i < g->memory_node_count; i++) {
            const node *n = &g->nodes[g->memory_nodes[i]];
            memcpy(area + n->param_at, g->push + n->push_first, n->push_size);
        }
    }
    /* The launch's submission: the graph's buffer uses, its copy's command buffer; the kernels
     * are the graph's (held until it is destroyed), and there is no pool to hand back. */
    nu__submission *s = &cp->s;
    if (NU__GROW32(s->uses, s->use_capacity, g->use_count, 8) != NU_OK) {
        pthread_mutex_unlock(&g->lock);
        return oom(g);
    }
    s->use_count = 0;
    for (uint32_t i = 0; i < g->use_count; i++) {
        if (nu__use_begin(&s->uses[i], g->uses[i].buffer, g->uses[i].write) != NU_OK) {
            nu__uses_end(s->uses, i, false, (nu__fence){d->compute->index, 0});
            pthread_mutex_unlock(&g->lock);
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
    s->trace = NULL;
    s->state = NU__RECORDING;
    cp->launched = true;
    st = nu__submit(s);
    if (st == NU_OK) {
        g->last = cp;
        g->last_value = s->value;
        g->next_copy = (g->next_copy + 1) % COPIES;
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

nu_status nu_graph_wait(nu_graph *g, uint64_t timeout_ns)
{
    static const char fn[] = "nu_graph_wait";
    nu_status st = built(g, fn);
    if (st != NU_OK)
        return st;
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
        destroy(g);
}

/* Completion hands back a copy's submission once the graph was freed. */
static void copy_done(nu__submission *s) { release(((graph_copy *)s)->graph); }

nu_status nu_graph_free(nu_graph *g)
{
    if (!g)
        return NU_OK;
    atomic_store(&g->pending, COPIES + 1);
    for (int i = 0; i < COPIES; i++) {
        graph_copy *cp = &g->copies[i];
        if (cp->launched)
            nu__submission_free_committed(&cp->s); /* hands it back now if done, else at completion */
        else
            release(g);
    }
    release(g);
    return NU_OK;
}

/* ---- hooks ------------------------------------------------------------------------------- */

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
