/* nuvec/buffer.h: GPU buffers.
 *
 * Storage:
 *   NU_STORAGE_SHARED   host-visible memory with a CPU pointer (nu_buffer_contents). On
 *                       unified-memory devices it is also device-local; on a discrete GPU with
 *                       device-local host-visible memory (resizable BAR) nuvec uses that where
 *                       measurement at open says CPU reads from it are not too slow (see
 *                       nu_device_memory_choice).
 *   NU_STORAGE_PRIVATE  device-local memory without a CPU pointer: the fastest for GPU work on
 *                       discrete GPUs. nu_buffer_read / nu_buffer_write go through the GPU.
 *
 * A new buffer's bytes are unspecified (reused memory holds stale bytes). Zero-length buffers
 * own no memory; binding one binds a per-device placeholder.
 *
 * CPU access rules: reading a buffer's bytes is refused with NU_ERROR_BUFFER_IN_USE while
 * submitted GPU work writes it; writing them is refused while any submitted GPU work uses it;
 * a read-only buffer (a mapped file) refuses CPU and GPU writes with NU_ERROR_READ_ONLY.
 * Submitted work is work committed (nu_commands_commit) that has not completed; work only
 * recorded into a command buffer not committed yet does not count: the program's order is the
 * order of commits, so a CPU access made before a commit is ordered before that commit's work
 * (it sees the bytes as they are before it, and that work sees what the access wrote).
 *
 * Handles: every buffer's small host structure lives in a slot of its device's pool until
 * nu_device_close, so a freed handle still points at a slot that knows it is dead: every call
 * on it fails with NU_ERROR_INVALID_HANDLE (getters return 0s), in every build, until the
 * slot is reused. Slots are reused oldest-freed first: only after every slot that was free
 * when it was freed has gone to a new buffer. From then on the old pointer names the new
 * buffer, which nuvec cannot tell apart.
 *
 * Getters (nu_buffer_size ... nu_buffer_is_read_only, and nu_buffer_is_zero_copy /
 * nu_buffer_is_mapped_file in nuvec/mapped.h) accept NULL and freed buffers, and return 0,
 * "", NULL or false (see nuvec/status.h).
 *
 * Thread safety: buffers may be created and freed from any thread at once. One buffer's
 * contents may be read from several threads at once; writing a buffer while another thread
 * reads or writes the same bytes is a data race, as with any memory. */
#ifndef NUVEC_BUFFER_H
#define NUVEC_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

NU_BEGIN_DECLS

typedef struct nu_buffer nu_buffer;

typedef enum nu_storage {
    NU_STORAGE_SHARED = 0,
    NU_STORAGE_PRIVATE = 1,
} nu_storage;

/* A buffer of `size` bytes from the caching allocator. Fails with NU_ERROR_OUT_OF_MEMORY
 * beyond the memory limit (after releasing the cache and retrying). */
nu_status nu_buffer_new(nu_device *device, size_t size, nu_storage storage, nu_buffer **out);

/* A buffer for GPU work to write: as nu_buffer_new, but it may be memory that committed GPU
 * work still uses (MLX does not do this; IREE does): GPU work using it is ordered after those
 * uses, and CPU access waits until they complete. Keeps peak memory low when pipelined steps
 * free their intermediates while earlier steps still run (see nuvec/command.h). */
nu_status nu_buffer_new_gpu(nu_device *device, size_t size, nu_storage storage, nu_buffer **out);

/* A buffer holding a copy of `size` bytes at `bytes`. */
nu_status nu_buffer_from(nu_device *device, const void *bytes, size_t size, nu_storage storage,
                         nu_buffer **out);

/* Returns the buffer's memory to the allocator's cache (when GPU work still uses it: once that
 * work completes). NULL is ignored (NU_OK). Freeing a buffer a second time fails with
 * NU_ERROR_INVALID_HANDLE, in every build, as long as its slot has not been reused (see
 * Handles above), also while GPU work still uses it. */
nu_status nu_buffer_free(nu_buffer *buffer);

/* Names the buffer (up to 31 characters kept): RenderDoc captures label each dispatch with its
 * kernel and the names of the buffers it binds. */
nu_status nu_buffer_set_name(nu_buffer *buffer, const char *name);
const char *nu_buffer_name(const nu_buffer *buffer); /* "" when unnamed */

size_t nu_buffer_size(const nu_buffer *buffer);
/* The device memory the caching allocator accounts to the buffer in nu_memory_stats' `active`:
 * its size rounded as nuvec/memory.h says. 0 for empty buffers and for those whose bytes are not
 * the allocator's (a mapped file's pages). */
uint64_t nu_buffer_accounted_bytes(const nu_buffer *buffer);
nu_storage nu_buffer_storage(const nu_buffer *buffer);
nu_device *nu_buffer_device(const nu_buffer *buffer);
/* Whether submitted GPU work (committed, not completed) still uses (reads or writes) the
 * buffer; work only recorded does not count (see the CPU access rules above). */
bool nu_buffer_in_use(const nu_buffer *buffer);
/* Whether the buffer refuses writes (a mapped file). */
bool nu_buffer_is_read_only(const nu_buffer *buffer);

/* Copies `size` bytes at `offset` out of / into any buffer (shared or private), ordered with
 * GPU work: refused by the CPU access rules above, NU_ERROR_OUT_OF_RANGE past the end. */
nu_status nu_buffer_read(nu_buffer *buffer, size_t offset, void *dst, size_t size);
nu_status nu_buffer_write(nu_buffer *buffer, size_t offset, const void *src, size_t size);

/* The CPU pointer of a shared buffer, for reading: refused while submitted GPU work writes
 * it. The bytes stay safe to read until GPU work that writes the buffer is committed.
 * Private buffers have no CPU pointer (NU_ERROR_INVALID_ARGUMENT). Empty buffers give NULL. */
nu_status nu_buffer_contents(nu_buffer *buffer, const void **out);
/* The CPU pointer of a shared buffer, for reading and writing: refused while any submitted
 * GPU work uses it, and for read-only buffers. Safe until GPU work using it is committed. */
nu_status nu_buffer_contents_mut(nu_buffer *buffer, void **out);

NU_END_DECLS
#endif
