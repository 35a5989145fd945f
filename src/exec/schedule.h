/* schedule.h: a graph's schedule (schedule.c): the level pass over its list (exec/list.h).
 *
 * The planner (exec/hazard.h, by levels; or in order, as for a command buffer, when the level
 * pass is not wanted) gives each command its level over the resources' current memory; the pass
 * orders the commands by level (stable: conflicting commands keep
 * their recorded order) and makes the barrier before each level, its source half what the
 * level before it did, its destination half narrowed to what the levels from it on do. A
 * launch's copy is encoded in this order (exec/launch.c). Made when the graph is built, and
 * again when a slot's new binding may alias other memory of the graph. */
#ifndef NU_EXEC_SCHEDULE_H
#define NU_EXEC_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/hazard.h"
#include "exec/list.h"

typedef struct nu__schedule {
    nu__hazards plan;            /* by levels; kept, so that a new schedule reuses its tables */
    uint32_t *order;             /* the commands by level */
    uint32_t *level;             /* each command's */
    uint32_t *level_first;       /* level_count + 1 entries: where each level starts in order */
    VkMemoryBarrier2 *barriers;  /* barriers[l]: the barrier before level l (l >= 1) */
    uint32_t level_count, level_capacity, cmd_capacity;
} nu__schedule;

void nu__schedule_init(nu__schedule *s);
void nu__schedule_fini(nu__schedule *s);
/* Schedules the list over its resources' memory (nu__list_resolve first; `placeholder` is the
 * device's, for empty ranges): by levels, or, `in_order`, without the level pass: the planner in
 * order, as a command buffer's (each barrier starts a level; the order stays the recording's).
 * On failure (out of host memory, with the message) the schedule must be made again before it
 * is used. */
nu_status nu__schedule_make(nu__schedule *s, const nu__list *l, VkBuffer placeholder, bool in_order);

#endif
