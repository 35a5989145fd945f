/* use.h: the lifecycle of one buffer's use by one command buffer (use.c). A command buffer keeps
 * one use per buffer it touches, whatever the number of its commands; each use goes through these
 * steps, in order, and every step is here:
 *   begin      recording, the first command touching the buffer: room is reserved for the queue
 *              position commit will record (so that commit cannot fail half-way), the buffer is
 *              kept alive until the end (a guard reference), and the use counts as recorded;
 *              a later command writing the buffer upgrades a reading use (nu__use_upgrade)
 *   waits      commit: the queue positions the command buffer must wait for: the pending
 *              writer's for a read, every pending use's for a write, and, for memory handed out
 *              while its previous owner's work still runs (nu_buffer_new_gpu), all of that work
 *   commit     under the queue's lock, before the submission: the use takes the queue position
 *              its submission will signal, and counts as committed (CPU access now waits for it)
 *   submitted  after vkQueueSubmit
 *   end        completion, or abandonment (a command buffer freed uncommitted, a failed
 *              submission): the position is forgotten and the reference dropped
 * What each count means for CPU access and memory reuse is memory/guard.h's. */
#ifndef NU_EXEC_USE_H
#define NU_EXEC_USE_H

#include <stdbool.h>
#include <stdint.h>

#include "memory/buffer.h"
#include "memory/guard.h"

/* One buffer a command buffer uses. */
typedef struct nu__use {
    nu_buffer *buffer; /* holds a guard reference until the use ends */
    bool write;
} nu__use;

/* Begins a use of b (NU_ERROR_HOST_OUT_OF_MEMORY when no room can be reserved: nothing begun). */
nu_status nu__use_begin(nu__use *u, nu_buffer *b, bool write);
/* A reading use that a later command writes (in line: recording calls it for every write). */
static inline void nu__use_upgrade(nu__use *u)
{
    if (!u->write) {
        u->write = true;
        nu__guard_upgrade(&u->buffer->guard);
    }
}
/* Raises waits[queue] to the positions the uses must wait for (NU_ERROR_HOST_OUT_OF_MEMORY). */
nu_status nu__uses_waits(const nu__use *uses, uint32_t n, uint64_t waits[2]);
/* Under the queue's lock, before the submission that will signal `fence`. */
void nu__uses_commit(const nu__use *uses, uint32_t n, nu__fence fence);
void nu__uses_submitted(const nu__use *uses, uint32_t n);
/* Ends the uses: `committed` says whether they were committed (at `fence`), else they are
 * abandoned from the recorded state. */
void nu__uses_end(const nu__use *uses, uint32_t n, bool committed, nu__fence fence);

#endif
