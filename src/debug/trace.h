/* trace.h: the timeline recorder's hooks for command recording and completion (trace.c). */
#ifndef NU_TRACE_H
#define NU_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "vk/device.h"
#include "nuvec/trace.h"

struct nu_commands;

/* A command buffer's timestamps: query pools of NU__TRACE_POOL queries, and what each pair of
 * queries measured. */
typedef struct nu__trace_span {
    char name[48];
    uint32_t query;    /* its begin; end is query + 1 */
} nu__trace_span;

typedef struct nu__trace_cmd {
    VkQueryPool *pools;
    uint32_t pool_count, pool_capacity;
    uint32_t queries;  /* used so far */
    nu__trace_span *spans;
    uint32_t span_count, span_capacity;
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

/* nu_commands_new: gives a traced command buffer its timestamp state (none when no trace runs
 * or its queue has no timestamps) and notes when recording began. */
nu_status nu__trace_command_new(struct nu_commands *c);
/* Recording: begins a traced command (a timestamp before it); returns the query to hand to
 * nu__trace_command_end, or UINT32_MAX when the command buffer is not traced (or the query
 * could not be had: the command then goes untimed). */
uint32_t nu__trace_command_begin(struct nu_commands *c);
void nu__trace_command_end(struct nu_commands *c, uint32_t query, const char *name);
/* Completion: reads the timestamps into the device's trace (when `completed`) and frees the
 * command buffer's trace resources. */
void nu__trace_command_done(struct nu_commands *c, bool completed);

#endif
