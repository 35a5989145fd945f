/* nuvec/graph.h: graphs: record once, launch many times.
 *
 * A graph is a recording of dispatches, copies and fills (and the kernel library's ops, which
 * record dispatches) whose hazards are resolved once, when it is built, and whose Vulkan
 * command buffers are recorded once; each launch is then one vkQueueSubmit.
 *
 *   nu_commands *rec;
 *   nu_graph_record(dev, &rec);                  a recording for a graph
 *   nu_graph_slot(rec, kv, &slot);               kv's uses go through a slot
 *   nu_commands_dispatch(rec, ...); nu_op_rope(rec, ...);
 *   nu_graph_param(rec, 0, 4, &param);           bytes 0..3 of the last dispatch's push constants
 *   nu_graph_new(rec, &g);                       consumes rec
 *   for each step: nu_graph_bind(g, slot, buf, 0); nu_graph_set_param(g, param, &pos, 4);
 *                  nu_graph_launch(g);
 *   nu_graph_wait(g, NU_WAIT_FOREVER); nu_graph_free(g);
 *
 * Ordering: a launch is a commit of the graph's buffer uses. It is ordered against earlier
 * commits and launches (of this graph and others) by the rules of nuvec/command.h, and the CPU
 * access rules of nuvec/buffer.h hold while it is in flight; memory from nu_buffer_new_gpu is
 * ordered after its previous owner's work. Inside the graph, nodes are scheduled by dependency
 * levels (a node's level is one more than the deepest node it conflicts with): the nodes of a
 * level run together, with one memory barrier between levels (its stages narrowed to what the
 * graph's work uses), and conflicting nodes keep their recorded order. Hazards are judged as in
 * a command buffer (nuvec/command.h); NU_GRAPH_SCHEDULE_IN_ORDER keeps the recording's order
 * and puts the barriers where a command buffer's commit would.
 *
 * Buffers: a graph does not keep its buffers alive. A launch after one of them was freed is
 * NU_ERROR_INVALID_HANDLE naming it (bind a slot anew, or build the graph again).
 *
 * Slots and parameters: a launch uses the slots' current bindings and the parameters' current
 * values. A graph keeps up to 3 encoded copies of its Vulkan command buffer, so that a launch
 * prepares a copy while earlier launches run (it waits only when all 3 are in flight). How a
 * change reaches the copies is the build options' choice (nu_graph_options):
 *   Parameters, by default, are read from memory: a dispatch with a parameter runs a variant of
 *   its kernel whose push constant block is a storage buffer (the SPIR-V rewritten once per
 *   kernel, validated and cached like any kernel) bound to the dispatch's region of a
 *   host-visible buffer with one area per copy; a launch writes the current values into its
 *   copy's area, and nothing is encoded again. Where a kernel cannot be rewritten (or with
 *   NU_GRAPH_PARAMS_RECORDED), its push constants stay recorded and a change encodes the copies
 *   again before their next launches (the slow path: the cost of recording the graph).
 *   Slots, by default, are realised by encoding again: a copy encoded before a slot's binding
 *   changed is encoded anew (and the graph rescheduled, since a new binding may alias another)
 *   before its next launch. With NU_GRAPH_SLOTS_SETS, on devices whose storage buffer
 *   descriptors may be updated after bind (UPDATE_AFTER_BIND; lavapipe has not), the dispatches
 *   using a slot are bound with descriptor sets instead, one per dispatch per copy: a rebinding
 *   that creates no new overlap with the graph's other buffers only rewrites those sets before
 *   the copy's next launch (one that does is scheduled and encoded again). `nuvec bench graph`
 *   measures them. Developer overrides (docs/knobs.md): NUVEC_GRAPH_RERECORD=1 takes the slow
 *   paths for both, NUVEC_GRAPH_SETS=1 asks for descriptor sets, whatever the options say.
 * Binding a slot to the buffer and offset it has, or setting a parameter to the value it has,
 * changes nothing.
 *
 * Graph recordings take dispatches, copies and fills on the compute queue; uploads, downloads,
 * commit and the transfer queue are refused (NU_ERROR_INVALID_ARGUMENT).
 *
 * Graphs must be freed before their device is closed.
 *
 * Thread safety: a recording is used by one thread at a time (as any nu_commands). A graph may
 * be launched, waited for, bound and have its parameters set from several threads at once
 * (these calls take the graph's lock; a launch uses the bindings and values set before it).
 * nu_graph_free must not race with other calls on the graph. */
#ifndef NUVEC_GRAPH_H
#define NUVEC_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "command.h"
#include "device.h"
#include "status.h"

NU_BEGIN_DECLS

typedef struct nu_graph nu_graph;

/* A command buffer that records for a graph (compute queue): record into it as into any
 * nu_commands, then build the graph with nu_graph_new (or free it with nu_commands_free).
 * Nothing runs until the graph is launched. */
nu_status nu_graph_record(nu_device *device, nu_commands **out);

/* Makes `buffer` (used in the recording, or to be used) a slot: a launch may bind another buffer
 * in its place (nu_graph_bind). *slot gets its index: 0, 1, ... in the order slots are declared;
 * declaring a buffer twice gives the same slot. The buffer is the slot's first binding (offset
 * 0) and its size is the slot's size. */
nu_status nu_graph_slot(nu_commands *recording, nu_buffer *buffer, uint32_t *slot);

/* Declares bytes [offset, offset + size) of the push constants of the last dispatch recorded
 * (nu_commands_dispatch or an op's) as a parameter a launch may change (nu_graph_set_param);
 * multiples of 4, inside the kernel's push constants. *param gets its index (0, 1, ...). Refused
 * when the last command is not a dispatch with push constants (copies and fills), and for the
 * element count of nuvec's builtin kernels (which nuvec checks against the bindings). */
nu_status nu_graph_param(nu_commands *recording, uint32_t offset, uint32_t size, uint32_t *param);

/* How launches realise changed parameters (nu_graph_options.params). */
typedef enum nu_graph_params {
    NU_GRAPH_PARAMS_DEFAULT = 0,     /* NU_GRAPH_PARAMS_FROM_MEMORY */
    NU_GRAPH_PARAMS_FROM_MEMORY = 1, /* read from memory where the kernel can be rewritten (else
                                        recorded): the CPU writes a launch's values to host-visible
                                        memory; where that is not device-local (shared buffers in
                                        host memory: a discrete GPU), each launch first copies them
                                        into device memory, which the kernels read (one copy and one
                                        barrier a launch, instead of each such kernel reading over
                                        the bus as it starts) */
    NU_GRAPH_PARAMS_RECORDED = 2,    /* recorded push constants: a change encodes the copies again */
    NU_GRAPH_PARAMS_IN_DEVICE_MEMORY = 3, /* FROM_MEMORY, always copied into device memory first */
    NU_GRAPH_PARAMS_IN_HOST_MEMORY = 4,   /* FROM_MEMORY, always read where the CPU wrote them */
} nu_graph_params;

/* How launches realise rebound slots (nu_graph_options.slots). */
typedef enum nu_graph_slots {
    NU_GRAPH_SLOTS_DEFAULT = 0,  /* NU_GRAPH_SLOTS_RERECORD */
    NU_GRAPH_SLOTS_RERECORD = 1, /* a rebinding encodes the copies again (and schedules them again) */
    NU_GRAPH_SLOTS_SETS = 2,     /* descriptor sets updated after bind, where the device has
                                    UPDATE_AFTER_BIND storage buffers and every command touching a
                                    slot is a dispatch whose kernel takes sets (else RERECORD) */
} nu_graph_slots;

/* How a graph's commands are ordered (nu_graph_options.schedule). */
typedef enum nu_graph_schedule {
    NU_GRAPH_SCHEDULE_DEFAULT = 0,  /* NU_GRAPH_SCHEDULE_LEVELS */
    NU_GRAPH_SCHEDULE_LEVELS = 1,   /* by dependency levels (above): the fewest barriers */
    NU_GRAPH_SCHEDULE_IN_ORDER = 2, /* in recording order, with a barrier where a command conflicts
                                       with one since the last barrier: as a command buffer's
                                       commit orders them (for comparison and debugging) */
} nu_graph_schedule;

/* Build options: zero (or NULL) means every default. */
typedef struct nu_graph_options {
    nu_graph_params params;     /* default NU_GRAPH_PARAMS_FROM_MEMORY */
    nu_graph_slots slots;       /* default NU_GRAPH_SLOTS_RERECORD (sets are opt-in until measured
                                   on a device that has them) */
    nu_graph_schedule schedule; /* default NU_GRAPH_SCHEDULE_LEVELS */
} nu_graph_options;

/* Builds the graph: resolves its hazards and schedules it. On success the recording is consumed
 * (freed: do not use or free it again); on failure it is left as it was. An empty recording
 * makes a graph whose launches do nothing. nu_graph_new is nu_graph_new_with(recording, NULL,
 * out); an unknown option value is NU_ERROR_INVALID_ARGUMENT. */
nu_status nu_graph_new(nu_commands *recording, nu_graph **out);
nu_status nu_graph_new_with(nu_commands *recording, const nu_graph_options *options, nu_graph **out);

/* Binds `buffer` from byte `offset` to slot `slot` for the launches that follow. The slot's
 * size must fit (buffer size - offset >= the slot's size: NU_ERROR_OUT_OF_RANGE otherwise),
 * offset must be a multiple of the device's storage buffer alignment, a slot the graph writes
 * refuses a read-only buffer, and the buffer must be of the graph's device. */
nu_status nu_graph_bind(nu_graph *g, uint32_t slot, nu_buffer *buffer, size_t offset);

/* Sets parameter `param` (nu_graph_param) to the `size` bytes at `value` (size must be the
 * parameter's) for the launches that follow. */
nu_status nu_graph_set_param(nu_graph *g, uint32_t param, const void *value, size_t size);

/* Launches the graph: one submission (returns at once, like nu_commands_commit). Waits only
 * when all of the graph's recorded copies are in flight (for the oldest). NU_ERROR_INVALID_HANDLE
 * when a buffer it uses was freed; NU_ERROR_DEVICE_LOST on a lost device. */
nu_status nu_graph_launch(nu_graph *g);

/* Waits until every launch of the graph so far completed: NU_OK (also without launches),
 * NU_ERROR_TIMEOUT after timeout_ns (0 polls), NU_ERROR_DEVICE_LOST. */
nu_status nu_graph_wait(nu_graph *g, uint64_t timeout_ns);

/* Frees the graph. Launches in flight go on and release what they use when they complete.
 * NU_OK (NULL is ignored). */
nu_status nu_graph_free(nu_graph *g);

/* What building made of the graph (getters: 0 for NULL): its nodes (dispatches, copies and
 * fills), its dependency levels, and the barriers a launch runs (levels - 1). */
uint32_t nu_graph_node_count(const nu_graph *g);
uint32_t nu_graph_level_count(const nu_graph *g);

NU_END_DECLS
#endif
