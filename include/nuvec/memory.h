/* nuvec/memory.h: the caching allocator's limits and statistics (MLX's meaning).
 *
 * Buffers are sub-allocated from large device-memory blocks. A freed buffer's memory goes to
 * a cache and is reused for a later request of a fitting size: a cached piece of C bytes
 * serves a request rounded to S bytes when S <= C <= min(2*S, S + 2 pages). The cache is
 * reported on its own, never inside active or peak.
 *
 *   active    bytes in live buffers (rounded sizes); not the staging memory nuvec itself
 *             holds for uploads and downloads until their command buffer completes
 *   peak      the largest active since the device opened or the last nu_memory_reset_peak
 *   cache     bytes of freed buffers kept for reuse. A freed buffer's memory joins the cache
 *             when its last GPU use completes (nuvec/command.h); until then it is in neither
 *             active nor cache (nu_buffer_new_gpu may reuse it earlier)
 *   pending   bytes held for GPU work, in neither active nor cache: memory of freed buffers
 *             whose last GPU use has not completed, and nuvec's staging in flight
 *   reserved  device memory the allocator holds: active + cache + pending + unused parts of
 *             blocks
 *
 * The memory limit bounds active + cache + pending: a request that would pass it first
 * releases cached memory (least recently freed first) and retries, then fails with
 * NU_ERROR_OUT_OF_MEMORY when it is still over it. A device allocation failure likewise
 * releases the cache and retries once. The cache limit bounds `cache`; 0 disables the cache
 * (freed memory is released at once, or when its last GPU use completes). `reserved` can
 * exceed the limit by the unused parts of blocks.
 *
 * Getters (nu_memory_active, nu_memory_peak, nu_memory_cache) return 0 for a NULL device;
 * nu_memory_reset_peak and nu_memory_clear_cache ignore NULL; the calls that return a status
 * refuse NULL with NU_ERROR_INVALID_ARGUMENT (see nuvec/status.h).
 *
 * Thread safety: every function may be called from any thread. */
#ifndef NUVEC_MEMORY_H
#define NUVEC_MEMORY_H

#include <stdint.h>

#include "status.h"

NU_BEGIN_DECLS

typedef struct nu_memory_stats {
    uint64_t active;
    uint64_t peak;
    uint64_t cache;
    uint64_t reserved;
    uint64_t memory_limit;
    uint64_t cache_limit;
    uint64_t buffers;     /* live buffers (empty ones included; not nuvec's own staging) */
    uint64_t blocks;      /* device-memory allocations held */
    uint64_t pending;     /* freed memory GPU work still uses, and nuvec's staging in flight */
} nu_memory_stats;

nu_status nu_memory_get_stats(nu_device *device, nu_memory_stats *out);

uint64_t nu_memory_active(nu_device *device);
uint64_t nu_memory_peak(nu_device *device);
uint64_t nu_memory_cache(nu_device *device);
/* Sets peak to the current active bytes. */
void nu_memory_reset_peak(nu_device *device);
/* Releases every cached piece of memory (memory still used by GPU work stays until that
 * work completes) and every block left empty. */
void nu_memory_clear_cache(nu_device *device);

/* Sets the memory limit in bytes (default: the size of the device-local heap buffers use).
 * Fails with NU_ERROR_LIMIT, keeping the old limit, when `bytes` is below the active bytes.
 * The cache is trimmed to fit. `previous` (may be NULL) receives the old limit. */
nu_status nu_memory_set_limit(nu_device *device, uint64_t bytes, uint64_t *previous);
/* Sets the cache limit in bytes (default: the memory limit; 0 disables the cache) and trims
 * the cache to it. `previous` (may be NULL) receives the old limit. */
nu_status nu_memory_set_cache_limit(nu_device *device, uint64_t bytes, uint64_t *previous);

NU_END_DECLS
#endif
