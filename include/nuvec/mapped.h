/* nuvec/mapped.h: files as buffers without a copy, and moving them into device memory.
 *
 * nu_buffer_map_file maps a file read-only and shared (MAP_SHARED: a private mapping costs
 * about 4x more to fault in): the CPU reads the page cache's pages without a copy
 * (nu_buffer_contents), and so does the GPU where the device imports them
 * (VK_EXT_external_memory_host; imported, i.e. pinned, when GPU work first binds the buffer, so
 * mapping stays cheap). The buffer is read-only: CPU writes and GPU writes are refused with
 * NU_ERROR_READ_ONLY. Its size (rounded to whole pages) counts against the memory limit
 * (nuvec/memory.h); the mapping is released when the buffer is freed and its last GPU use has
 * completed. An empty file gives an empty buffer.
 *
 * Where the device cannot import the file's pages (no VK_EXT_external_memory_host; NVIDIA's
 * driver, which imports only writable anonymous memory: nuvec does not ask it, since a refused
 * import there breaks the device's later allocations), the CPU still reads the mapping, GPU work
 * reads a copy in pinned host memory made at its first use, and nu_buffer_is_zero_copy is false;
 * nu_error_message(device) says why after nu_buffer_map_file.
 *
 * On a discrete GPU, weights read at every step belong in device memory: nu_buffer_move_ranges
 * copies byte ranges of a mapped file into a buffer on the transfer queue, chunk by chunk, several
 * threads preparing the next chunks while earlier ones are copied: straight from the page-cache
 * pages by DMA where the device imports them (no CPU copy), else through a pinned staging ring
 * (128 MiB) the threads copy the mapping into (on the H200: 38.1 GB/s from the page cache into an
 * allocated buffer, 0.93x a copy from pinned memory, against 8.0 GB/s for PyTorch's safetensors
 * loader; bench/RESULTS.md).
 *
 * The hazard, as the reference documents it: the file must not be modified (written or
 * truncated, by this or another process) while it is mapped. The bytes nu_buffer_contents
 * returns would change underneath the reader, and reading past a truncated end raises SIGBUS.
 * nuvec checks the file's size before each import and refuses with NU_ERROR_IO when it
 * changed, but cannot guard CPU reads made through the pointer afterwards. Map only files
 * nothing writes while they are in use, such as model weights.
 *
 * Getters (nu_buffer_is_zero_copy, nu_buffer_is_mapped_file) accept NULL and freed buffers
 * and return false (see nuvec/status.h).
 *
 * Thread safety: as buffers (nuvec/buffer.h). */
#ifndef NUVEC_MAPPED_H
#define NUVEC_MAPPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "status.h"

NU_BEGIN_DECLS

/* The file at `path` as a read-only shared buffer of the file's size. NU_ERROR_IO for a
 * missing path, a directory or an unreadable file (the message names the path and the
 * reason); NU_ERROR_OUT_OF_MEMORY beyond the memory limit. */
nu_status nu_buffer_map_file(nu_device *device, const char *path, nu_buffer **out);

/* Whether the buffer is a file's pages, wrapped without a copy (false for the copy fallback
 * and for buffers that are not mapped files). */
bool nu_buffer_is_zero_copy(const nu_buffer *buffer);
/* Whether the buffer comes from nu_buffer_map_file (zero-copy or not). */
bool nu_buffer_is_mapped_file(const nu_buffer *buffer);

/* One piece of a move: `size` bytes at `src_offset` of the source to `dst_offset` of the
 * destination. */
typedef struct nu_range_copy {
    uint64_t src_offset;
    uint64_t dst_offset;
    uint64_t size;
} nu_range_copy;

/* Called from the moving thread as bytes arrive: `done` of `total` bytes are in place. */
typedef void (*nu_progress_fn)(void *user, uint64_t done, uint64_t total);

typedef struct nu_move_options {
    uint64_t chunk_size;  /* bytes imported (or staged) and copied at a time; 0: 4 MiB (256 MiB a
                             commit when the source is already on the GPU) */
    uint32_t threads;     /* threads importing (or staging) chunks at once, at most 16; 0: 8, no
                             more than the CPUs */
    nu_progress_fn progress; /* may be NULL */
    void *user;
} nu_move_options;

/* Copies ranges of a mapped file `src` into `dst` (any buffer that is not read-only) by DMA on
 * the transfer queue and waits until they are in place. The ranges are checked first (each
 * inside both buffers; destination ranges must not overlap); the copies are ordered after
 * committed GPU work that uses `dst`, as a committed nu_commands_copy would be. NULL options
 * take the defaults. NU_ERROR_IO when the file changed size since it was mapped. `src` may
 * also be any other buffer (intended: a file already moved, or bytes on the GPU): its ranges
 * are then copied GPU to GPU, in commits of up to 256 MiB (chunk_size when given), likewise
 * ordered after committed GPU work that writes `src`. */
nu_status nu_buffer_move_ranges(nu_buffer *dst, nu_buffer *src, const nu_range_copy *ranges, size_t count,
                                const nu_move_options *options);

/* A new private buffer holding `size` bytes at `offset` of the mapped file `src`
 * (nu_buffer_move_ranges with one range). */
nu_status nu_buffer_move_to_device(nu_buffer *src, size_t offset, size_t size, const nu_move_options *options,
                                   nu_buffer **out);

NU_END_DECLS
#endif
