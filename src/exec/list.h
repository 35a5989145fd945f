/* list.h: a recording kept as data (list.c): what a graph is built from.
 *
 * A command buffer made by nu_graph_record checks and resolves every command as any command
 * buffer does (exec/commands.c), then hands it to its list instead of the planner and encoder:
 * commands over resources (each distinct buffer the recording touches, or a slot: a resource
 * whose buffer a launch may change), their byte ranges relative to their resource, their push
 * constants, the kernels they hold, the temporaries recorded ops handed over, and the slots and
 * parameters declared on the recording. nu_graph_new takes the list whole (exec/graph.c); the
 * graph's schedule plans it (exec/schedule.c) and its launches encode it (exec/launch.c), with
 * the planner and encoder command buffers use.
 *
 * Thread safety: a list is its recording's, then its graph's (under the graph's lock). */
#ifndef NU_EXEC_LIST_H
#define NU_EXEC_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/buffer.h"
#include "vk/block.h"
#include "kernel/kernel.h"
#include "exec/hazard.h"

#define NU__NO_RESOURCE UINT32_MAX

/* A buffer the recording touches, or a slot. */
typedef struct nu__resource {
    nu_buffer *buffer;
    unsigned generation;   /* the buffer's when bound: a different one means it was freed */
    size_t offset;         /* where the recording's view of the buffer starts (a slot's binding offset) */
    size_t size;           /* a slot's size: what a binding must hold */
    int32_t slot;          /* -1: fixed */
    uint64_t bound_at;     /* a slot: the graph's bind_version when it was last bound */
    bool used;             /* some command touches it (a slot may be declared and never used) */
    bool written;          /* some command writes it */
    VkBuffer vk;           /* its memory, resolved by nu__list_resolve (or a rebinding) */
    VkDeviceSize base;     /* the buffer's offset in vk: with vk, its piece for the planner */
    VkDeviceSize vk_offset; /* base + offset */
} nu__resource;

/* One range a command touches, relative to its resource's view; NU__NO_RESOURCE is an empty
 * range, bound as placeholder slot `offset`. */
typedef struct nu__ref {
    uint32_t resource;
    size_t offset, size;
    bool write;
} nu__ref;

typedef struct nu__cmd {
    nu__work work;                  /* dispatch, copy (refs: dst, src) or fill (ref: dst) */
    nu_kernel *kernel;              /* a dispatch's (held by the list) */
    uint32_t groups[3];
    uint32_t ref_first, ref_count;  /* in refs */
    uint32_t push_first, push_size; /* in push */
    uint32_t value;                 /* a fill's */
} nu__cmd;

/* Bytes [offset, offset + size) of command `cmd`'s push constants, a launch may change. */
typedef struct nu__param {
    uint32_t cmd, offset, size;
} nu__param;

/* Values of an op that a launch may change (nuvec/ops.h's nu_op_value), noted by the op right
 * after it recorded: which value, the dispatch holding it (0: the op's last, 1: the one before)
 * and its 4 bytes' offset in that dispatch's push constants. */
typedef struct nu__op_value_at {
    uint32_t value, back, offset;
} nu__op_value_at;
#define NU__MAX_OP_VALUES 4

/* A range as recording resolved it: the buffer, the range's offset in it and its size (0: an
 * empty range), and whether the command writes it. */
typedef struct nu__range {
    nu_buffer *buffer;
    size_t offset, size;
    bool write;
} nu__range;

typedef struct nu__list {
    nu_device *device;
    nu__resource *resources;
    uint32_t resource_count, resource_capacity;
    uint32_t *slots;       /* slot -> resource */
    uint32_t slot_count, slot_capacity;
    nu__cmd *cmds;
    uint32_t cmd_count, cmd_capacity;
    nu__ref *refs;
    uint32_t ref_count, ref_capacity;
    uint8_t *push;
    uint32_t push_count, push_capacity;
    nu__param *params;
    uint32_t param_count, param_capacity;
    nu_kernel **kernels;   /* held until the list is freed */
    uint32_t kernel_count, kernel_capacity;
    nu_buffer **owned;     /* temporaries recorded ops handed over (nu__list_adopt): freed with the list */
    uint32_t owned_count, owned_capacity;
    nu_buffer *scratch;    /* the ops' shared scratch (nu__commands_scratch): one of `owned` */
    uint32_t empty_refs;   /* empty ranges so far (each takes the next placeholder slot) */
    int32_t last_user;     /* the last command if it is a user dispatch (nu_graph_param), else -1 */
    /* The last op's values a launch may change (nu__graph_note_values), valid while cmd_count
     * is noted_cmds. */
    uint32_t noted_cmds, noted_count;
    const char *noted_op;
    nu__op_value_at noted[NU__MAX_OP_VALUES];
} nu__list;

/* An empty list for the device (NULL: out of host memory, with the message set). */
nu__list *nu__list_new(nu_device *d);
/* Releases its kernels and frees its temporaries: no work may use them any more. NULL is ignored. */
void nu__list_free(nu__list *l);

/* Appends a command (a dispatch holds `kernel` from now on) over `n` ranges, with `push_size`
 * bytes of push constants (a dispatch's). Leaves nothing on failure (out of host memory, with
 * the message). */
nu_status nu__list_add(nu__list *l, nu__work work, nu_kernel *kernel, const uint32_t groups[3], const nu__range *r,
                       uint32_t n, const void *push, uint32_t push_size, uint32_t value);
/* The last command was a user dispatch (nu_commands_dispatch): nu_graph_param may name it. */
static inline void nu__list_mark_user(nu__list *l) { l->last_user = (int32_t)l->cmd_count - 1; }
/* The list owns `b` from now on (freed with it); on failure b is freed at once. */
nu_status nu__list_adopt(nu__list *l, nu_buffer *b);
/* The list holds `k` until it is freed (once however often it is named). */
nu_status nu__list_keep_kernel(nu__list *l, nu_kernel *k);
/* The slot of `b` (made a resource and a slot when new): *slot its index. */
nu_status nu__list_slot(nu__list *l, nu_buffer *b, uint32_t *slot);
/* Room for one more parameter, then the parameter itself. */
nu_status nu__list_param(nu__list *l, uint32_t cmd, uint32_t offset, uint32_t size, uint32_t *param);

/* Resolves every resource's memory from its buffer's current binding. */
nu_status nu__list_resolve(nu__list *l);
/* The first resource in use whose buffer was freed, or NULL. */
const nu__resource *nu__list_freed(const nu__list *l);

/* A ref's memory: its VkBuffer (the placeholder's for an empty range), its piece base, and its
 * absolute byte range in the VkBuffer. */
typedef struct nu__span {
    VkBuffer vk;
    uint64_t base, start, end;
} nu__span;

static inline nu__span nu__list_span(const nu__list *l, const nu__ref *r, VkBuffer placeholder)
{
    if (r->resource == NU__NO_RESOURCE)
        return (nu__span){placeholder, 0, r->offset, r->offset + NU__PLACEHOLDER_SLOT};
    const nu__resource *res = &l->resources[r->resource];
    uint64_t start = res->vk_offset + r->offset;
    return (nu__span){res->vk, res->base, start, start + r->size};
}

#endif
