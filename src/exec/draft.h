/* draft.h: what recording hands a graph under construction (implemented by graph.c): for a
 * command buffer made by nu_graph_record, commands.c drafts each dispatch, copy and fill into
 * the graph with these calls instead of recording Vulkan commands. Its own header, so that
 * recording does not depend on the rest of the graph (which builds on recording). */
#ifndef NU_EXEC_DRAFT_H
#define NU_EXEC_DRAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/buffer.h"
#include "kernel/kernel.h"
#include "nuvec/graph.h"

/* The graph a recording builds: a nu_graph before nu_graph_new. */
typedef struct nu_graph nu__draft;

/* One buffer range a drafted command touches: `size` 0 is an empty range (the device's
 * placeholder is bound; no use of the buffer). offset is within the buffer. */
typedef struct nu__draft_ref {
    nu_buffer *buffer;
    size_t offset;
    size_t size;
    bool write;
} nu__draft_ref;

/* A graph under construction for the device (NULL: out of host memory, with the message set). */
nu__draft *nu__draft_new(nu_device *d);
void nu__draft_free(nu__draft *draft);
/* A dispatch of `k` (held until the graph is freed), checked by the recording already. */
nu_status nu__draft_dispatch(nu__draft *draft, nu_kernel *k, const uint32_t groups[3], const nu__draft_ref *refs,
                             uint32_t n, const void *push, uint32_t push_size);
/* vkCmdCopyBuffer (refs[0] dst, refs[1] src, of the same size) and vkCmdFillBuffer. */
nu_status nu__draft_copy(nu__draft *draft, const nu__draft_ref *dst, const nu__draft_ref *src);
nu_status nu__draft_fill(nu__draft *draft, const nu__draft_ref *dst, uint32_t value);
/* The graph owns `b` from now on (a temporary an op recorded into it): freed when the graph is
 * destroyed, after its last launch completed. On failure b is freed at once. */
nu_status nu__draft_adopt(nu__draft *draft, nu_buffer *b);
/* The last drafted command was a user dispatch: commands.c marks it after
 * nu_commands_dispatch drafted it (nu_graph_param may name it). */
void nu__draft_mark_user(nu__draft *draft);

#endif
