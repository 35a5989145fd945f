/* launch.h: a graph's object and its launches (launch.c): what nu_graph_new built (exec/graph.c)
 * and everything that happens to it after: slots bound, parameters set, its copies of the Vulkan
 * command buffer encoded from the schedule, launches submitted like commits, waits, freeing.
 *
 * A graph holds:
 * - its list (exec/list.h): commands over resources (buffers, or slots a launch may rebind);
 * - what building decided per command (nu__graph_node): a dispatch with a parameter reads its
 *   push constants from memory (nu__kernel_from_memory's variant, its last binding the
 *   dispatch's region, at the storage buffer alignment, of a host-visible buffer with one area
 *   per copy: a launch writes the current values into the area of the copy it submits, which is
 *   not in flight, and vkQueueSubmit makes host writes made before it visible), or keeps them
 *   recorded (a change then re-encodes the copies); a dispatch touching a slot may be bound with
 *   descriptor sets (nu__kernel_with_sets), one per dispatch per copy, updated after bind;
 * - its schedule (exec/schedule.h): the commands by level, the barriers between levels;
 * - up to NU__GRAPH_COPIES encoded copies of the command buffer, each with the submission
 *   (exec/submission.h) its launches go through, like a command buffer's commit.
 *
 * Versions: `version` is bumped by every change that needs the copies encoded again (a recorded
 * parameter changed, a slot rebound without sets, the timestamps hook); `bind_version` by every
 * change of a slot's binding. A copy encoded at an older version is encoded again before its
 * launch, after the schedule is made again if a slot's new memory may alias the graph's other
 * memory (`rebound`). With sets, a rebinding that aliases nothing only rewrites, before each
 * copy's next launch, the sets of the dispatches using a slot bound since (UPDATE_AFTER_BIND is
 * what keeps the encoded command buffer valid when a set it binds is updated); copies and fills
 * name their buffers in the command buffer, so a graph with one touching a slot has no sets.
 *
 * Thread safety: the calls take the graph's lock (nuvec/graph.h). */
#ifndef NU_EXEC_LAUNCH_H
#define NU_EXEC_LAUNCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "exec/list.h"
#include "exec/schedule.h"
#include "exec/submission.h"
#include "exec/use.h"
#include "nuvec/graph.h"

#define NU__GRAPH_COPIES 3

/* What building decided for one command of the list. */
typedef struct nu__graph_node {
    nu_kernel *memory_kernel; /* a dispatch with parameters, its push constants from memory (or NULL) */
    uint32_t param_at;        /* its push constants' offset in each copy's parameter area */
    nu_kernel *set_kernel;    /* a dispatch touching a slot bound with descriptor sets (or NULL) */
    uint32_t set_index;       /* its set in each copy's */
} nu__graph_node;

/* An encoded copy of the command buffer and its launches' submission. */
typedef struct nu__graph_copy {
    nu__submission s;          /* first: completion hands it back */
    struct nu_graph *graph;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    uint64_t version;          /* the graph's version it was encoded at; 0: never */
    bool launched;             /* s was submitted at least once */
    VkDescriptorPool set_pool; /* the slotted dispatches' sets (UPDATE_AFTER_BIND) */
    VkDescriptorSet *sets;
    uint64_t sets_version;     /* the bind_version they were written at; 0: never */
    bool traced;               /* encoded while a trace ran: timestamps around each command */
    nu__trace_cmd *trace;      /* those timestamps' pools (kept across launches), or NULL */
} nu__graph_copy;

struct nu_graph {
    nu_device *device;
    pthread_mutex_t lock;
    nu__list *list;
    nu__graph_node *nodes;    /* one per command */
    nu__schedule schedule;
    nu__use *uses;            /* the distinct buffers a launch uses (with whether it writes them) */
    uint32_t use_count, use_capacity;
    uint64_t version;         /* bumped by every change that needs the copies encoded again */
    uint64_t bind_version;    /* bumped by every change of a slot's binding */
    uint64_t uses_version;    /* the bind_version `uses` were collected at */
    bool rebound;             /* a slot changed so that the schedule must be made again */
    bool in_order;            /* scheduled without the level pass (NU_GRAPH_SCHEDULE_IN_ORDER) */
    /* Parameters read from memory: the commands, and a host-visible buffer with an area per copy
     * (the CPU writes a launch's values there). Where param_device is set, each launch first
     * copies its area into the same place of that device-local buffer, which the kernels read:
     * one copy and one barrier a launch instead of every such kernel reading over the bus at its
     * start (host-visible memory is host memory on a discrete GPU). */
    uint32_t *memory_cmds;
    uint32_t memory_cmd_count;
    nu_buffer *param_buffer, *param_device;
    VkBuffer params_vk, params_dev_vk;
    VkDeviceSize params_offset, params_area, params_dev_offset;
    /* Slots rebound through descriptor sets: the dispatches touching a slot, and room for one
     * update of all their sets. */
    bool sets;
    uint32_t *slotted;
    uint32_t slotted_count;
    VkDescriptorBufferInfo *set_infos;
    VkWriteDescriptorSet *set_writes;
    uint32_t set_info_count;
    nu__graph_copy copies[NU__GRAPH_COPIES];
    uint32_t next_copy;
    uint64_t last_value;      /* the last launch's queue position */
    VkQueryPool timestamps;
    uint64_t recordings;
    atomic_uint pending;      /* at free: copies in flight + 1 */
};

/* A graph for the device around `list` (which it frees when destroyed), with nothing decided
 * yet (NULL: out of host memory, with the message). */
nu_graph *nu__graph_alloc(nu_device *d, nu__list *list);
/* Frees a graph none of whose copies is in flight (a failed build: give the list back first). */
void nu__graph_destroy(nu_graph *g);
/* Resolves the resources' memory, makes the schedule and collects the buffers a launch uses. */
nu_status nu__graph_schedule(nu_graph *g);
/* The last step of building: the copies ready for their first launch. */
void nu__graph_ready(nu_graph *g);

/* For benchmarks: every copy encoded from now on writes timestamp 0 at its start and 1 at its
 * end into `pool` (VK_NULL_HANDLE: none); the copies are encoded again. */
void nu__graph_set_timestamps(nu_graph *g, VkQueryPool pool);
/* For tests: how many times a copy of the graph's command buffer was encoded. */
uint64_t nu__graph_recordings(nu_graph *g);

#endif
