/* graph.h: what the kernel library's ops tell a graph recording (graph.c): the values of an op a
 * launch may change. A graph's object, its launches and the hooks for tests and benchmarks are
 * exec/launch.h; the recording it is built from is exec/list.h. */
#ifndef NU_EXEC_GRAPH_H
#define NU_EXEC_GRAPH_H

#include <stdint.h>

#include "exec/list.h"
#include "nuvec/command.h"

/* The op `op` recorded into c its values a launch may change (nu__op_value_at: which value, the
 * dispatch holding it, its offset there). Ignored unless c records for a graph; a later command
 * makes the note stale. */
void nu__graph_note_values(nu_commands *c, const char *op, const nu__op_value_at *at, uint32_t count);
/* nu_op_graph_param: value `value` (named `name` in messages) of the last op recorded into c (a
 * graph recording) as a parameter (nu_graph_param's contract otherwise). */
nu_status nu__graph_value_param(nu_commands *c, const char *fn, uint32_t value, const char *name, uint32_t *param);

#endif
