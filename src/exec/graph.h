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

#endif
