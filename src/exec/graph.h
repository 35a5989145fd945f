/* graph.h: graphs' internals (graph.c): hooks for tests and benchmarks. What recording hands a
 * graph under construction is exec/draft.h. */
#ifndef NU_EXEC_GRAPH_H
#define NU_EXEC_GRAPH_H

#include <stdint.h>

#include "vk/device.h"
#include "nuvec/graph.h"

/* For benchmarks: every copy recorded from now on writes timestamp 0 at its start and 1 at its
 * end into `pool` (VK_NULL_HANDLE: none); the copies are recorded again. */
void nu__graph_set_timestamps(nu_graph *g, VkQueryPool pool);
/* For tests: how many times a copy of the graph's command buffer was recorded. */
uint64_t nu__graph_recordings(nu_graph *g);

/* Values of an op that a launch may change (nuvec/ops.h's nu_op_value), noted by the op right
 * after it recorded: which value, the dispatch holding it (0: the op's last, 1: the one before)
 * and its 4 bytes' offset in that dispatch's push constants. Ignored unless c records for a
 * graph; a later command makes the note stale. */
typedef struct nu__op_value_at {
    uint32_t value, back, offset;
} nu__op_value_at;
#define NU__MAX_OP_VALUES 4
void nu__graph_note_values(nu_commands *c, const char *op, const nu__op_value_at *at, uint32_t count);
/* nu_op_graph_param: value `value` (named `name` in messages) of the last op recorded into c (a
 * graph recording) as a parameter (nu_graph_param's contract otherwise). */
nu_status nu__graph_value_param(nu_commands *c, const char *fn, uint32_t value, const char *name, uint32_t *param);

#endif
