/* trace.h: the timeline recorder's hooks for command recording and completion (trace.c). */
#ifndef NU_TRACE_H
#define NU_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "vk/device.h"
#include "nuvec/trace.h"

/* A command buffer's timestamps: query pools of NU__TRACE_POOL queries, and what each pair of
 * queries measured. */
typedef struct nu__trace_span {
    char name[48];
    uint32_t query;    /* its begin; end is query + 1 */
} nu__trace_span;

typedef struct nu__trace_cmd {
    nu_device *device;
    VkCommandBuffer cmd;
    uint32_t queue;    /* its queue's index: 0 compute, 1 transfer */
    bool after_barrier; /* the last command recorded was a barrier */
    VkQueryPool *pools;
    uint32_t pool_count, pool_capacity;
    uint32_t queries;  /* used so far */
    nu__trace_span *spans;
    uint32_t span_count, span_capacity;
    bool keep;         /* a graph copy's: completion reads the timestamps and resets the pools for
                        * its next launch instead of freeing them (nu__trace_command_free does) */
} nu__trace_cmd;

/* Per device (called by nu_device_open / nu_device_close; open starts a trace when NUVEC_TRACE
 * is set, close writes it). */
nu_status nu__trace_init(nu_device *d);
void nu__trace_fini(nu_device *d);

/* CLOCK_MONOTONIC in nanoseconds (the trace's clock). */
uint64_t nu__trace_now(void);
/* Whether a trace runs. */
bool nu__trace_active(nu_device *d);
/* A CPU span on the CPU track. */
void nu__trace_cpu(nu_device *d, const char *name, uint64_t start_ns, uint64_t end_ns);

/* Recording a command buffer of queue `queue` into `cmd` (nu_commands_new): *out is its timestamp
 * state (NULL when no trace runs or the queue has no timestamps), *record_start when recording
 * began while a trace runs (else 0). */
nu_status nu__trace_command_new(nu_device *d, uint32_t queue, VkCommandBuffer cmd, nu__trace_cmd **out,
                                uint64_t *record_start);
/* Begins a traced command (a timestamp before it); returns the query to hand to
 * nu__trace_command_end, or UINT32_MAX when tc is NULL (or the query could not be had: the
 * command then goes untimed). */
uint32_t nu__trace_command_begin(nu__trace_cmd *tc);
/* Ends it (a timestamp after it) named `name`; `barrier` says it was a barrier. */
void nu__trace_command_end(nu__trace_cmd *tc, uint32_t query, const char *name, bool barrier);
/* Completion: reads the timestamps into the device's trace (when `completed`) and frees tc, or,
 * where tc->keep, resets its queries for the command buffer's next submission (NULL is ignored). */
void nu__trace_command_done(nu__trace_cmd *tc, bool completed);
/* Frees a kept tc (NULL is ignored): its command buffer is not pending. */
void nu__trace_command_free(nu__trace_cmd *tc);

#endif
