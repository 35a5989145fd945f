/* allocator.h: the caching allocator's policy (the reference's Pool), independent of Vulkan.
 *
 * The pool sub-allocates buffers from large blocks of device memory that a backend provides
 * (Vulkan in the library, a fake in tests/test_allocator.c), keeps freed pieces in a cache for
 * reuse, and enforces the memory and cache limits of nuvec/memory.h.
 *
 * Policy:
 * - Sizes are rounded (nu__round_size): to 256 B up to 16 KiB, 4 KiB up to 1 MiB, 64 KiB up to
 *   64 MiB, 2 MiB beyond. The rounded size is what is accounted.
 * - Reuse: a cached piece of rounded size C serves a request of rounded size S (same kind) when
 *   S <= C <= min(2*S, S + 2*page_size): the smallest such piece, most recently freed first.
 *   Cached pieces still used by GPU work (a busy guard) serve only requests that allow it
 *   (nu__pool_alloc's NU__ALLOC_GPU_REUSE), and only once every use is committed (so that later work
 *   can wait for their queue positions); the others wait until the guard is idle.
 * - Otherwise requests up to block_size/4 are carved from blocks (first fit over each block's
 *   free ranges, which coalesce when pieces are released); a new block is allocated when none
 *   fits: a kind's first is first_block bytes, each next one twice the one before (or the power
 *   of two that holds the request), up to block_size, so that a few MiB of small buffers do not
 *   reserve a whole block_size. Larger requests get a block of their own ("dedicated").
 * - Memory limit: bounds active + cache (MLX's meaning; the unused parts of blocks are not
 *   counted, `reserved` reports them). A request of rounded size S with active + cache + S >
 *   limit first releases least recently freed cached pieces until it fits; if active + S >
 *   limit it then fails with NU_ERROR_OUT_OF_MEMORY. A backend allocation failure releases the
 *   whole cache (blocks left empty are freed) and retries once before failing.
 * - Cache limit: after each free, least recently freed pieces are released until cache <=
 *   cache_limit (0: nothing is cached). A released piece returns to its block's free ranges;
 *   a block with nothing allocated and nothing cached in it is returned to the backend.
 *
 * Thread safety: every function may be called from any thread (one mutex per pool). */
#ifndef NU_ALLOCATOR_H
#define NU_ALLOCATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/memory_kind.h"
#include "memory/guard.h"
#include "nuvec/memory.h"
#include "nuvec/status.h"


/* Device memory as the backend gives it. */
typedef struct nu__memory_backend {
    void *ctx;
    /* Allocates `size` bytes of `kind`: `*memory` is the backend's handle, `*mapped` the CPU
     * address of its first byte (NULL when not host-visible). Returns NU_ERROR_OUT_OF_MEMORY
     * when the device has no room, NU_ERROR_HOST_OUT_OF_MEMORY, or another failure status. */
    nu_status (*allocate)(void *ctx, int kind, uint64_t size, void **memory, void **mapped);
    /* Returns memory obtained from allocate. */
    void (*release)(void *ctx, int kind, void *memory, uint64_t size);
} nu__memory_backend;

typedef struct nu__pool_config {
    uint64_t block_size;   /* bytes per shared block (a power of two; requests <= 1/4 carved) */
    uint64_t first_block;  /* a kind's first shared block (a power of two; 0 or >= block_size:
                            * block_size): each new block of the kind doubles it up to block_size */
    uint64_t memory_limit; /* initial memory limit */
    uint64_t page_size;    /* reuse slack is 2 pages */
} nu__pool_config;

typedef struct nu__block nu__block; /* one backend allocation */
typedef struct nu__pool nu__pool;

/* What a buffer holds. An empty (zero-size) allocation has block NULL and size 0. */
typedef struct nu__allocation {
    nu__block *block;
    void *memory;     /* the block's backend handle */
    uint64_t offset;  /* of the piece within the block */
    uint64_t size;    /* rounded size */
    uint8_t *mapped;  /* CPU address of the piece (block mapping + offset), or NULL */
    int kind;
    /* When the piece is reused memory that committed GPU work still uses: a reference to that
     * work's guard (the caller releases it), else NULL. */
    nu__guard *busy;
    bool internal;    /* nuvec's own (NU__ALLOC_INTERNAL): not in active or peak */
} nu__allocation;

/* nu__pool_alloc's flags. */
enum {
    /* A cached piece still used by committed GPU work may be handed out. */
    NU__ALLOC_GPU_REUSE = 1,
    /* nuvec's own memory (staging for uploads and downloads): counted against the memory
     * limit and in reserved, but not in active or peak, which are the user's buffers. */
    NU__ALLOC_INTERNAL = 2,
};

/* The accounted size of a request: rounded as above. Sizes so large that rounding would
 * overflow return 0. */
uint64_t nu__round_size(uint64_t size);

nu_status nu__pool_create(const nu__pool_config *config, const nu__memory_backend *backend,
                          nu__pool **out);
/* Frees every block (the caller frees its buffers first, or they are abandoned). */
void nu__pool_destroy(nu__pool *pool);

/* A piece of at least `size` bytes of `kind`. size 0 gives an empty allocation (no memory).
 * With NU__ALLOC_GPU_REUSE in `flags`, a cached piece still used by GPU work may be handed out
 * (out->busy then holds a reference to its guard); see NU__ALLOC_INTERNAL above. Fails with
 * NU_ERROR_OUT_OF_MEMORY (and a message in `why`, if not NULL, of `why_size` bytes) past the
 * memory limit or when the device is full. */
nu_status nu__pool_alloc(nu__pool *pool, int kind, uint64_t size, unsigned flags,
                         nu__allocation *out, char *why, size_t why_size);

/* Returns a piece to the cache. `busy` (may be NULL; the pool takes a new reference) is the
 * guard of GPU work that still uses the memory: the piece is reused by the CPU only once it is
 * idle. Empty allocations are ignored. */
void nu__pool_free(nu__pool *pool, const nu__allocation *allocation, nu__guard *busy);

void nu__pool_stats(nu__pool *pool, nu_memory_stats *out);
void nu__pool_reset_peak(nu__pool *pool);
void nu__pool_clear_cache(nu__pool *pool);
/* NU_ERROR_LIMIT when bytes < active. */
nu_status nu__pool_set_limit(nu__pool *pool, uint64_t bytes, uint64_t *previous);
void nu__pool_set_cache_limit(nu__pool *pool, uint64_t bytes, uint64_t *previous);
/* Counts a buffer (empty ones too) in stats.buffers: +1 / -1. */
void nu__pool_count_buffer(nu__pool *pool, int delta);
/* Counts memory the pool does not allocate (mapped files) against the limit: NU_ERROR_OUT_OF_MEMORY
 * when it does not fit after releasing the cache. untrack gives it back. */
nu_status nu__pool_track(nu__pool *pool, uint64_t bytes, char *why, size_t why_size);
void nu__pool_untrack(nu__pool *pool, uint64_t bytes);

#endif
