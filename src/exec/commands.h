/* commands.h: command buffers' internals (commands.c): a recording, with the submission it builds
 * (exec/submission.h) and the recording's own state. Every dispatch, copy and fill is checked
 * and resolved here, then either planned in order (exec/hazard.h) and encoded at once
 * (exec/encode.h), or, for a graph recording, kept in its list (exec/list.h) for the graph to
 * plan and encode. */
#ifndef NU_EXEC_COMMANDS_H
#define NU_EXEC_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/encode.h"
#include "exec/hazard.h"
#include "exec/list.h"
#include "exec/submission.h"
#include "nuvec/command.h"

struct nu_commands {
    nu__submission s;         /* first: completion hands it back, and it is the command buffer */
    nu_queue kind;
    bool ended;               /* vkEndCommandBuffer done */
    nu__hazards hazards;
    nu__encoder enc;          /* its Vulkan command buffer, encoded as commands are recorded */
    uint32_t empty_bindings;  /* empty ranges bound so far (each takes the next placeholder slot) */
    uint64_t record_start_ns; /* when recording began, when a trace runs (else 0) */
    bool labels;              /* a capture runs: label each dispatch (kernel and buffers) */
    nu_commands *spare_next;  /* in the device's list of spare command buffer objects */
    /* A recording for a graph (nu_graph_record): commands go to its list, not into a Vulkan
     * command buffer (there is none); NULL otherwise. */
    nu__list *list;
    /* A command buffer's ops' shared scratch (nu__commands_scratch), freed at commit or free: its
     * memory stays with the recorded work until that completes. NULL for a graph recording. */
    nu_buffer *scratch;
};

/* A command buffer recording into `list` for a graph (nu_graph_record), which it owns from now
 * on (freed with it, or taken by nu_graph_new). */
nu_status nu__commands_new_list(nu_device *d, nu__list *list, nu_commands **out);

/* The recording owns `b` from now on, a temporary its recorded work uses (an op's scratch): a
 * command buffer frees it at once (its memory stays with the recorded work until that completes),
 * a graph recording keeps it until the graph is freed (launches reuse it). b is freed on failure
 * too. */
nu_status nu__commands_adopt(nu_commands *c, nu_buffer *b);
/* Device memory of at least `bytes` for an op's intermediate results within its own recorded work
 * (written and read back by its dispatches: split-K partial sums). Every op of a recording that
 * asks gets the same buffer (replaced by a larger one when one asks for more): ops in sequence share
 * it, their uses ordered by the recording's hazard tracking, so a recording of many such ops holds
 * the largest of them, not their sum (a 7B prefill pass of 52 rows: 1.6 GiB when each product had
 * its own). A graph recording keeps each buffer until the graph is freed (launches reuse them); a
 * command buffer frees the one it replaces at once and its last at commit (nuvec keeps a freed
 * buffer's memory until the work recorded on it completes). The recording owns it: the op does
 * not free it. */
nu_status nu__commands_scratch(nu_commands *c, size_t bytes, nu_buffer **out);

/* Per device: the spare command buffer objects (runtime/device.c calls these). */
nu_status nu__recorder_init(nu_device *d);
void nu__recorder_fini(nu_device *d);
/* Frees the spare command buffer objects (how many are kept depends on how many were alive at
 * once: tests that count host allocations trim them first). */
void nu__commands_trim(nu_device *d);

#endif
