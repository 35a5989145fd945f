/* nuvec/command.h: command buffers with automatic hazard tracking.
 *
 * Record dispatches, copies, fills, uploads and downloads into a command buffer, saying for
 * each buffer whether the work reads it, writes it or both (optionally for a byte range),
 * then commit it. nuvec inserts every barrier and semaphore wait these accesses need, and no
 * others: read-after-write, write-after-read and write-after-write, inside a command buffer
 * and across command buffers and queues; reads after reads cost nothing, and dispatches that
 * touch disjoint bytes are not ordered. The order of the program is the order of commits:
 * work is ordered after the work committed before it that conflicts with it.
 *
 * Commit returns at once; completion is processed in the background (a device thread), so
 * memory of freed buffers returns to the cache when its last GPU use completes without the
 * user polling. Waits spin briefly, then block, and can be bounded.
 *
 * Errors of GPU work (a lost device, out of memory at submit) are reported by the next call
 * on that command buffer (commit or wait); buffers and the allocator stay consistent.
 *
 * nu_commands_free returns an nu_status like every free and close call (nuvec/status.h):
 * NU_OK, also for NULL. A second free of a command buffer is not detected (their objects are
 * recycled), so do not free one twice.
 * nu_buffer_new_gpu is declared in nuvec/buffer.h, nu_device_wait_idle in nuvec/device.h
 * (both included here).
 *
 * Thread safety: one command buffer is recorded by one thread at a time; different command
 * buffers may be recorded and committed on different threads at once. Waiting on a command
 * buffer from several threads at once is allowed. */
#ifndef NUVEC_COMMAND_H
#define NUVEC_COMMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "device.h"
#include "kernel.h"
#include "status.h"

NU_BEGIN_DECLS

typedef struct nu_commands nu_commands;

typedef enum nu_queue {
    NU_QUEUE_COMPUTE = 0,  /* dispatches, copies, fills, uploads, downloads */
    NU_QUEUE_TRANSFER = 1, /* copies, fills, uploads, downloads on the copy engines (the compute
                              queue where the device has no separate transfer queue) */
} nu_queue;

typedef enum nu_access {
    NU_ACCESS_READ = 1,
    NU_ACCESS_WRITE = 2,
    NU_ACCESS_READ_WRITE = 3,
} nu_access;

/* A buffer bound to a dispatch: binding i of the kernel gets bindings[i]. size 0 means "to
 * the end of the buffer". The kernel sees the range as its whole buffer (offset must be a
 * multiple of the device's min_storage_buffer_offset_alignment). An empty range (an empty
 * buffer, or offset at its end) is no access to the buffer: it is not tracked, orders nothing,
 * and binds the device's placeholder, which the kernel must not read or write. */
typedef struct nu_binding {
    nu_buffer *buffer;
    nu_access access;
    size_t offset;
    size_t size;
} nu_binding;

nu_status nu_commands_new(nu_device *device, nu_queue queue, nu_commands **out);
/* Names the command buffer (VK_EXT_debug_utils): captures and validation messages show it. */
nu_status nu_commands_set_name(nu_commands *c, const char *name);

/* Records a dispatch of groups[0] x groups[1] x groups[2] workgroups. binding_count must be the
 * kernel's binding count; push_size its push constant size. For nuvec's own kernels
 * (nu_kernel_builtin) each binding's range must hold the `count` elements the push constants
 * say (NU_ERROR_OUT_OF_RANGE otherwise, an empty range included); other kernels must keep
 * their accesses inside the ranges, which nuvec cannot check. */
nu_status nu_commands_dispatch(nu_commands *c, nu_kernel *kernel, const uint32_t groups[3],
                               const nu_binding *bindings, uint32_t binding_count, const void *push,
                               uint32_t push_size);
/* Copies `size` bytes between two buffers (or two disjoint ranges of one). On the compute
 * queue a compute shader copies when offsets and size are multiples of 4 (several times
 * faster than vkCmdCopyBuffer on some GPUs), the copy engine otherwise. */
nu_status nu_commands_copy(nu_commands *c, nu_buffer *dst, size_t dst_offset, nu_buffer *src,
                           size_t src_offset, size_t size);
/* Fills `size` bytes at `offset` (multiples of 4) with a 32-bit value. */
nu_status nu_commands_fill(nu_commands *c, nu_buffer *dst, size_t offset, size_t size, uint32_t value);
/* Copies `size` bytes from host memory into the buffer when the work runs; the bytes are
 * taken now (the caller may reuse `data` at once). */
nu_status nu_commands_upload(nu_commands *c, nu_buffer *dst, size_t offset, const void *data, size_t size);
/* Copies `size` bytes of the buffer into host memory at `dst` when the work completes: `dst`
 * must stay valid until then (nu_commands_wait returns). */
nu_status nu_commands_download(nu_commands *c, nu_buffer *src, size_t offset, void *dst, size_t size);

/* Submits the recorded work (returns at once). A command buffer is committed once. */
nu_status nu_commands_commit(nu_commands *c);
/* Waits until the committed work completed: NU_OK, NU_ERROR_TIMEOUT after timeout_ns (0
 * polls), NU_ERROR_DEVICE_LOST, or the error its submission met. */
nu_status nu_commands_wait(nu_commands *c, uint64_t timeout_ns);
/* Frees the command buffer. Committed work goes on and releases what it uses when it
 * completes; uncommitted work is abandoned. NU_OK (NULL is ignored). */
nu_status nu_commands_free(nu_commands *c);

NU_END_DECLS
#endif
