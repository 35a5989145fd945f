/* allocator.c: the caching allocator (see allocator.h for the policy).
 *
 * Layout. Per kind: a sorted array of size bins, each a LIFO list of cached pieces of one
 * rounded size, so that the smallest fitting size is a binary search away; and the lists of
 * shared blocks (searched first fit over their sorted, coalesced free ranges) and dedicated
 * blocks. One LRU list across kinds orders cached pieces for the cache limit.
 *
 * No host allocation on a cache hit or a free: cache entries come from an internal free list
 * that the slow path (carving, new blocks) tops up so that there are always at least as many
 * entries as pieces (allocated or cached); the bin of a size is created when a piece of that
 * size is first carved and is never removed; a block's range array is grown when a piece is
 * carved so that it always has room for one range more than it has pieces (ranges and
 * pieces alternate, so releasing a piece never needs more).
 *
 * Guards and backend calls are released outside the pool's mutex: a guard's destroy callback
 * (a buffer freeing itself) may call back into the pool, and the backend may take
 * milliseconds (vkAllocateMemory of a large block) that cache hits on other threads should
 * not wait for. */
#include "memory/allocator.h"

#include <assert.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "core/host.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)

typedef struct range {
    uint64_t offset, size;
} range;

struct nu__block {
    /* In the kind's shared or dedicated list; `next` also chains blocks waiting to be
     * returned to the backend once the mutex is released. */
    nu__block *prev, *next;
    void *memory;
    uint8_t *mapped;
    uint64_t size;
    int kind;
    bool dedicated;
    size_t pieces;    /* allocated or cached pieces in the block */
    uint64_t largest; /* the largest free range (shared blocks) */
    range *ranges;    /* free ranges, sorted by offset, never adjacent */
    size_t range_count, range_cap;
};

typedef struct bin bin;
typedef struct entry entry;

/* A cached piece. */
struct entry {
    entry *bin_prev, *bin_next; /* in its bin, most recently freed first */
    entry *lru_prev, *lru_next; /* in the LRU list; lru_next also links the free list */
    bin *bin;
    nu__block *block;
    uint64_t offset;
    nu__guard *guard; /* a reference to GPU work still using the piece, or NULL */
};

struct bin {
    uint64_t size;
    entry *head;
};

typedef struct chunk {
    struct chunk *next;
    entry entries[];
} chunk;

/* Sizes inline so that the binary search touches one array. */
typedef struct bin_slot {
    uint64_t size;
    bin *bin;
} bin_slot;

typedef struct kind_state {
    bin_slot *bins; /* sorted by size */
    size_t bin_count, bin_cap;
    nu__block *shared; /* blocks that are carved, oldest first */
    nu__block *shared_tail;
    nu__block *dedicated;
    uint64_t next_block; /* the size of the kind's next shared block (first_block, doubling to block_size) */
} kind_state;

struct nu__pool {
    atomic_int lock; /* a spin lock: see pool_lock */
    nu__memory_backend backend;
    uint64_t block_size, page_size;
    uint64_t memory_limit, cache_limit;
    uint64_t active, peak, cache, reserved;
    uint64_t internal; /* nuvec's own live pieces (NU__ALLOC_INTERNAL): not in active */
    uint64_t pending; /* bytes of blocks being allocated while the mutex is released */
    uint64_t inflight; /* rounded sizes of requests counted against the limit, not yet active */
    uint64_t blocks;
    atomic_int_fast64_t buffers;
    kind_state kinds[NU__KIND_COUNT];
    entry *lru_head, *lru_tail; /* most recently freed at the head */
    entry *free_entries;
    size_t entry_total; /* entries allocated (cached + free) */
    size_t pieces;      /* pieces allocated or cached, plus those of blocks being allocated */
    size_t guarded;     /* cached pieces that hold a guard (GPU work used them when freed) */
    chunk *chunks;
};

/* What a call must release after unlocking the mutex. Guards are bounded so that the hit
 * path needs no host allocation; a long release (clear_cache) unlocks and goes on. */
#define DROP_MAX 16
typedef struct drops {
    int count;
    nu__guard *guards[DROP_MAX];
    nu__block *blocks;
} drops;

/* The pool's lock. A spin lock rather than a mutex: a cache hit or a free holds it for tens
 * of nanoseconds, and a mutex's unlock costs a second atomic read-modify-write, a large part
 * of the 100 ns budget of an allocate+free. Slow work (backend calls) runs unlocked; a waiter
 * that spins long yields its processor. */
static void pool_lock(nu__pool *pool)
{
    unsigned spins = 0;
    while (atomic_exchange_explicit(&pool->lock, 1, memory_order_acquire)) {
        while (atomic_load_explicit(&pool->lock, memory_order_relaxed)) {
            if (++spins > 64)
                sched_yield();
        }
    }
}

static void pool_unlock(nu__pool *pool) { atomic_store_explicit(&pool->lock, 0, memory_order_release); }

uint64_t nu__round_size(uint64_t size)
{
    uint64_t granule = size <= 16 * KIB ? 256 : size <= MIB ? 4 * KIB : size <= 64 * MIB ? 64 * KIB : 2 * MIB;
    if (size > UINT64_MAX - (granule - 1))
        return 0;
    return (size + granule - 1) & ~(granule - 1);
}

static void say(char *why, size_t why_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t why_size, const char *fmt, ...)
{
    if (!why || !why_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
}

static const char *kind_name(int kind) { return kind == NU__KIND_SHARED ? "shared" : "private"; }

/* ---- releasing outside the mutex ----------------------------------------------------------- */

static void free_block_struct(nu__block *b)
{
    nu__free(b->ranges);
    nu__free(b);
}

static void release_drops(nu__pool *pool, drops *d)
{
    for (int i = 0; i < d->count; i++)
        nu__guard_release(d->guards[i]);
    d->count = 0;
    while (d->blocks) {
        nu__block *b = d->blocks;
        d->blocks = b->next;
        pool->backend.release(pool->backend.ctx, b->kind, b->memory, b->size);
        free_block_struct(b);
    }
}

/* Called with the mutex held; returns with it held. */
static void flush(nu__pool *pool, drops *d)
{
    if (!d->count && !d->blocks)
        return;
    pool_unlock(pool);
    release_drops(pool, d);
    pool_lock(pool);
}

static void unlock(nu__pool *pool, drops *d)
{
    pool_unlock(pool);
    if (d->count || d->blocks)
        release_drops(pool, d);
}

/* ---- bookkeeping ----------------------------------------------------------------------------- */

/* The first bin of size >= `size`. */
static size_t bin_lower(const kind_state *k, uint64_t size)
{
    size_t lo = 0, hi = k->bin_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->bins[mid].size < size)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bin *find_bin(const kind_state *k, uint64_t size)
{
    size_t i = bin_lower(k, size);
    return i < k->bin_count && k->bins[i].size == size ? k->bins[i].bin : NULL;
}

static nu_status ensure_bin(kind_state *k, uint64_t size)
{
    size_t i = bin_lower(k, size);
    if (i < k->bin_count && k->bins[i].size == size)
        return NU_OK;
    if (NU__GROW(k->bins, k->bin_cap, k->bin_count + 1, 16) != NU_OK)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    bin *b = nu__malloc(sizeof *b);
    if (!b)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    b->size = size;
    b->head = NULL;
    memmove(k->bins + i + 1, k->bins + i, (k->bin_count - i) * sizeof *k->bins);
    k->bins[i] = (bin_slot){size, b};
    k->bin_count++;
    return NU_OK;
}

/* Keeps an entry for every piece, so that a free never allocates. */
static nu_status ensure_entry(nu__pool *pool)
{
    if (pool->entry_total > pool->pieces)
        return NU_OK;
    size_t n = pool->entry_total < 32 ? 32 : pool->entry_total;
    chunk *c = nu__malloc(sizeof *c + n * sizeof(entry));
    if (!c)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    c->next = pool->chunks;
    pool->chunks = c;
    for (size_t i = 0; i < n; i++) {
        c->entries[i].lru_next = pool->free_entries;
        pool->free_entries = &c->entries[i];
    }
    pool->entry_total += n;
    return NU_OK;
}

static nu_status reserve_ranges(nu__block *b, size_t n)
{
    if (b->range_cap >= n)
        return NU_OK;
    return NU__GROW(b->ranges, b->range_cap, n, n);
}

static void recompute_largest(nu__block *b)
{
    uint64_t m = 0;
    for (size_t i = 0; i < b->range_count; i++)
        if (b->ranges[i].size > m)
            m = b->ranges[i].size;
    b->largest = m;
}

/* Returns [offset, offset + size) to the block's free ranges, coalescing with neighbours.
 * The range array has room (reserve_ranges when the piece was carved). */
static void add_range(nu__block *b, uint64_t offset, uint64_t size)
{
    range *r = b->ranges;
    size_t lo = 0, hi = b->range_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool prev = lo > 0 && r[lo - 1].offset + r[lo - 1].size == offset;
    bool next = lo < b->range_count && offset + size == r[lo].offset;
    uint64_t merged;
    if (prev && next) {
        r[lo - 1].size += size + r[lo].size;
        merged = r[lo - 1].size;
        memmove(r + lo, r + lo + 1, (b->range_count - lo - 1) * sizeof *r);
        b->range_count--;
    } else if (prev) {
        r[lo - 1].size += size;
        merged = r[lo - 1].size;
    } else if (next) {
        r[lo].offset = offset;
        r[lo].size += size;
        merged = r[lo].size;
    } else {
        assert(b->range_count < b->range_cap);
        memmove(r + lo + 1, r + lo, (b->range_count - lo) * sizeof *r);
        r[lo].offset = offset;
        r[lo].size = size;
        b->range_count++;
        merged = size;
    }
    if (merged > b->largest)
        b->largest = merged;
}

static void link_block(nu__block **head, nu__block **tail, nu__block *b)
{
    b->next = NULL;
    b->prev = tail ? *tail : NULL;
    if (tail) {
        if (*tail)
            (*tail)->next = b;
        else
            *head = b;
        *tail = b;
    } else {
        b->next = *head;
        if (*head)
            (*head)->prev = b;
        *head = b;
    }
}

static void unlink_block(nu__pool *pool, nu__block *b)
{
    kind_state *k = &pool->kinds[b->kind];
    if (b->prev)
        b->prev->next = b->next;
    else if (b->dedicated)
        k->dedicated = b->next;
    else
        k->shared = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else if (!b->dedicated)
        k->shared_tail = b->prev;
}

/* A piece leaves the block (released from the cache, or never cached): the block goes back
 * to the backend when nothing is left in it. */
static void release_piece(nu__pool *pool, nu__block *b, uint64_t offset, uint64_t size, drops *d)
{
    pool->pieces--;
    if (--b->pieces == 0) {
        unlink_block(pool, b);
        pool->reserved -= b->size;
        pool->blocks--;
        b->next = d->blocks;
        d->blocks = b;
    } else if (!b->dedicated) {
        add_range(b, offset, size);
    }
}

static void unlink_entry(nu__pool *pool, entry *e)
{
    if (e->bin_prev)
        e->bin_prev->bin_next = e->bin_next;
    else
        e->bin->head = e->bin_next;
    if (e->bin_next)
        e->bin_next->bin_prev = e->bin_prev;
    if (e->lru_prev)
        e->lru_prev->lru_next = e->lru_next;
    else
        pool->lru_head = e->lru_next;
    if (e->lru_next)
        e->lru_next->lru_prev = e->lru_prev;
    else
        pool->lru_tail = e->lru_prev;
    pool->cache -= e->bin->size;
    if (e->guard)
        pool->guarded--;
}

static void free_entry(nu__pool *pool, entry *e)
{
    e->lru_next = pool->free_entries;
    pool->free_entries = e;
}

/* Releases an idle cached piece to its block; its guard (if any) goes to `d`, which must
 * have room. */
static void release_entry(nu__pool *pool, entry *e, drops *d)
{
    unlink_entry(pool, e);
    if (e->guard)
        d->guards[d->count++] = e->guard;
    release_piece(pool, e->block, e->offset, e->bin->size, d);
    free_entry(pool, e);
}

/* Releases least recently freed idle pieces while *measure > target (pieces that GPU work
 * still uses stay). */
static void trim(nu__pool *pool, drops *d, const uint64_t *measure, uint64_t target)
{
    entry *e = pool->lru_tail;
    while (e && *measure > target) {
        entry *prev = e->lru_prev;
        if (e->guard) {
            if (!nu__guard_idle(e->guard)) {
                e = prev;
                continue;
            }
            if (d->count == DROP_MAX) {
                /* The list may change while unlocked: start again from the tail. */
                flush(pool, d);
                e = pool->lru_tail;
                continue;
            }
        }
        release_entry(pool, e, d);
        e = prev;
    }
}

static void release_cache(nu__pool *pool, drops *d) { trim(pool, d, &pool->cache, 0); }

/* The memory limit bounds active + cache (MLX's meaning): whether `bytes` more fit, after
 * releasing least recently freed idle cached pieces as far as needed. */
static bool make_room(nu__pool *pool, drops *d, uint64_t bytes)
{
    for (;;) {
        /* Recomputed after each trim: trim may unlock (flush), and other requests may count
         * themselves meanwhile. */
        uint64_t used = pool->active + pool->internal + pool->inflight;
        if (used > pool->memory_limit || bytes > pool->memory_limit - used)
            return false;
        uint64_t room = pool->memory_limit - used - bytes;
        if (pool->cache <= room)
            return true;
        uint64_t before = pool->cache;
        trim(pool, d, &pool->cache, room);
        if (pool->cache >= before)
            return false; /* nothing idle left to release */
    }
}

/* Bytes of cached pieces that GPU work still uses (freed buffers whose last use has not
 * completed). Only while some cached piece holds a guard are the pieces looked at. */
static uint64_t busy_bytes(const nu__pool *pool)
{
    uint64_t n = 0;
    for (const entry *e = pool->guarded ? pool->lru_head : NULL; e; e = e->lru_next)
        if (e->guard && !nu__guard_idle(e->guard))
            n += e->bin->size;
    return n;
}

static uint64_t reuse_max(const nu__pool *pool, uint64_t s)
{
    uint64_t twice = s > UINT64_MAX / 2 ? UINT64_MAX : 2 * s;
    uint64_t slack = pool->page_size > UINT64_MAX / 2 ? UINT64_MAX : 2 * pool->page_size;
    uint64_t paged = s > UINT64_MAX - slack ? UINT64_MAX : s + slack;
    return twice < paged ? twice : paged;
}

static void fill(nu__allocation *out, nu__block *b, uint64_t offset, uint64_t size)
{
    out->block = b;
    out->memory = b->memory;
    out->offset = offset;
    out->size = size;
    out->mapped = b->mapped ? b->mapped + offset : NULL;
    out->kind = b->kind;
}

/* ---- allocation -------------------------------------------------------------------------------- */

/* The smallest cached piece that serves `s`, most recently freed first. `d` has room for
 * one guard. */
static bool take_cached(nu__pool *pool, int kind, uint64_t s, bool gpu_reuse, nu__allocation *out, drops *d)
{
    const kind_state *k = &pool->kinds[kind];
    uint64_t max = reuse_max(pool, s);
    for (size_t i = bin_lower(k, s); i < k->bin_count && k->bins[i].size <= max; i++) {
        for (entry *e = k->bins[i].bin->head; e; e = e->bin_next) {
            nu__guard *g = e->guard;
            if (g) {
                if (!nu__guard_idle(g)) {
                    /* GPU work reusing the memory waits for the uses' queue positions, which
                     * exist only once their command buffers are committed. */
                    if (!gpu_reuse || !nu__guard_committed_uses(g))
                        continue;
                    out->busy = g; /* the pool's reference goes to the caller */
                } else {
                    d->guards[d->count++] = g;
                }
            }
            unlink_entry(pool, e);
            fill(out, e->block, e->offset, e->bin->size);
            free_entry(pool, e);
            return true;
        }
    }
    return false;
}

/* First fit over the kind's shared blocks. NU_ERROR_OUT_OF_MEMORY: nothing fits. */
static nu_status carve(nu__pool *pool, int kind, uint64_t s, nu__allocation *out)
{
    for (nu__block *b = pool->kinds[kind].shared; b; b = b->next) {
        if (b->largest < s)
            continue;
        size_t i = 0;
        while (b->ranges[i].size < s)
            i++;
        if (reserve_ranges(b, b->pieces + 2) != NU_OK)
            return NU_ERROR_HOST_OUT_OF_MEMORY;
        range *r = &b->ranges[i];
        uint64_t offset = r->offset, old = r->size;
        if (old == s) {
            memmove(r, r + 1, (b->range_count - i - 1) * sizeof *r);
            b->range_count--;
        } else {
            r->offset += s;
            r->size -= s;
        }
        if (old == b->largest)
            recompute_largest(b);
        b->pieces++;
        pool->pieces++;
        fill(out, b, offset, s);
        return NU_OK;
    }
    return NU_ERROR_OUT_OF_MEMORY;
}

/* A new block of `size` bytes, the first `s` of which are the piece. The mutex is released
 * around the backend call (its bytes are counted in `pending` meanwhile). `*backend_failed`
 * tells a backend failure from a host one. */
static nu_status new_block(nu__pool *pool, int kind, uint64_t size, bool dedicated, uint64_t s,
                           nu__allocation *out, drops *d, bool *backend_failed)
{
    *backend_failed = false;
    nu__block *b = nu__calloc(1, sizeof *b);
    if (!b)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    if (!dedicated) {
        b->range_cap = 8;
        b->ranges = nu__malloc(b->range_cap * sizeof *b->ranges);
        if (!b->ranges) {
            nu__free(b);
            return NU_ERROR_HOST_OUT_OF_MEMORY;
        }
    }
    pool->pending += size;
    pool->pieces++; /* its entry is reserved now: others may carve while we are unlocked */
    pool_unlock(pool);
    release_drops(pool, d); /* blocks released by the cache go back before asking for more */
    void *memory = NULL, *mapped = NULL;
    nu_status st = pool->backend.allocate(pool->backend.ctx, kind, size, &memory, &mapped);
    pool_lock(pool);
    pool->pending -= size;
    if (st != NU_OK) {
        pool->pieces--;
        free_block_struct(b);
        *backend_failed = true;
        return st;
    }
    b->memory = memory;
    b->mapped = mapped;
    b->size = size;
    b->kind = kind;
    b->dedicated = dedicated;
    b->pieces = 1;
    if (dedicated) {
        link_block(&pool->kinds[kind].dedicated, NULL, b);
    } else {
        b->ranges[0] = (range){s, size - s};
        b->range_count = 1;
        b->largest = size - s;
        link_block(&pool->kinds[kind].shared, &pool->kinds[kind].shared_tail, b);
        uint64_t *next = &pool->kinds[kind].next_block;
        if (*next <= size)
            *next = size < pool->block_size ? size << 1 : pool->block_size;
    }
    pool->reserved += size;
    pool->blocks++;
    fill(out, b, 0, s);
    return NU_OK;
}

/* A new shared block's size for a request of rounded size s: the kind's next size (first_block,
 * doubled after each new block up to block_size, as VMA grows its blocks), or the smallest power of
 * two that holds s if larger. Small first blocks keep a model that holds a few MiB of small buffers
 * from reserving a whole block_size for them. */
static uint64_t shared_block_size(kind_state *k, uint64_t s)
{
    uint64_t size = k->next_block;
    while (size < s)
        size <<= 1;
    return size;
}

nu_status nu__pool_alloc(nu__pool *pool, int kind, uint64_t size, unsigned flags, nu__allocation *out,
                         char *why, size_t why_size)
{
    bool gpu_reuse = flags & NU__ALLOC_GPU_REUSE;
    if (!out)
        return NU_ERROR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!pool || kind < 0 || kind >= NU__KIND_COUNT) {
        say(why, why_size, "allocator: invalid pool or memory kind %d", kind);
        return NU_ERROR_INVALID_ARGUMENT;
    }
    out->kind = kind;
    if (size == 0)
        return NU_OK;
    uint64_t s = nu__round_size(size);
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    if (s == 0) {
        out->kind = 0;
        say(why, why_size, "cannot allocate %" PRIu64 " bytes of %s memory: the size is too large", size,
            kind_name(kind));
        return NU_ERROR_OUT_OF_MEMORY;
    }
    drops d;
    d.count = 0; /* not an initializer: that would zero the whole array on the hot path */
    d.blocks = NULL;
    bool small = s <= pool->block_size / 4;
    bool released = false, fallback = false, counted = false;
    nu_status st;
    pool_lock(pool);
    for (;;) {
        if (d.count == DROP_MAX)
            flush(pool, &d);
        if (take_cached(pool, kind, s, gpu_reuse, out, &d)) {
            st = NU_OK;
            break;
        }
        /* A miss: now is the time for the slow work that keeps hits and frees cheap. */
        if (pool->cache > pool->cache_limit)
            trim(pool, &d, &pool->cache, pool->cache_limit);
        if ((st = ensure_entry(pool)) != NU_OK || (st = ensure_bin(&pool->kinds[kind], s)) != NU_OK) {
            say(why, why_size, "out of host memory for the allocator's bookkeeping (a request of %s)",
                nu__bytes(b1, sizeof b1, s));
            break;
        }
        /* Count the request against the limit before carving or allocating. */
        if (!counted) {
            if (!make_room(pool, &d, s)) {
                st = NU_ERROR_OUT_OF_MEMORY;
                /* As the statistics say: freed memory GPU work still uses is not "cached". Named
                 * only when it is why the request failed. */
                uint64_t busy = busy_bytes(pool);
                bool blocked = busy && pool->active + pool->internal + pool->inflight <= pool->memory_limit &&
                               s <= pool->memory_limit - pool->active - pool->internal - pool->inflight;
                char tail[96] = "";
                if (blocked)
                    snprintf(tail, sizeof tail, ", %s freed but still used by GPU work",
                             nu__bytes(b5, sizeof b5, busy));
                say(why, why_size,
                    "out of memory: %s of %s memory (%" PRIu64 " bytes requested, %" PRIu64
                    " rounded) would pass the memory limit of %s: %s in use, %s cached%s",
                    nu__bytes(b1, sizeof b1, s), kind_name(kind), size, s,
                    nu__bytes(b2, sizeof b2, pool->memory_limit), nu__bytes(b3, sizeof b3, pool->active),
                    nu__bytes(b4, sizeof b4, pool->cache - busy), tail);
                break;
            }
            pool->inflight += s;
            counted = true;
        }
        bool dedicated = !small || fallback;
        if (!dedicated) {
            st = carve(pool, kind, s, out);
            if (st == NU_ERROR_HOST_OUT_OF_MEMORY)
                say(why, why_size, "out of host memory for the allocator's bookkeeping (a request of %s)",
                    nu__bytes(b1, sizeof b1, s));
            if (st != NU_ERROR_OUT_OF_MEMORY)
                break;
        }
        uint64_t need = dedicated ? s : shared_block_size(&pool->kinds[kind], s);
        bool backend_failed;
        st = new_block(pool, kind, need, dedicated, s, out, &d, &backend_failed);
        if (st == NU_OK)
            break;
        if (!backend_failed || st == NU_ERROR_HOST_OUT_OF_MEMORY) {
            /* Host memory ran out (here or in the backend): retrying would hide it. */
            say(why, why_size, "out of host memory allocating %s of %s memory", nu__bytes(b1, sizeof b1, s),
                kind_name(kind));
            break;
        }
        /* The device itself is full (or failed): the cache may hold what it needs. */
        if (!released) {
            release_cache(pool, &d);
            released = true;
            continue;
        }
        if (!dedicated) {
            fallback = true;
            continue;
        }
        say(why, why_size,
            "the device could not allocate %s of %s memory (%s) for a request of %" PRIu64
            " bytes: %s in use, %s cached, %s held, memory limit %s",
            nu__bytes(b1, sizeof b1, need), kind_name(kind), nu_status_string(st), size,
            nu__bytes(b2, sizeof b2, pool->active), nu__bytes(b3, sizeof b3, pool->cache),
            nu__bytes(b4, sizeof b4, pool->reserved), nu__bytes(b5, sizeof b5, pool->memory_limit));
        break;
    }
    if (counted)
        pool->inflight -= s;
    if (st == NU_OK && (flags & NU__ALLOC_INTERNAL)) {
        out->internal = true;
        pool->internal += out->size;
    } else if (st == NU_OK) {
        pool->active += out->size;
        if (pool->active > pool->peak)
            pool->peak = pool->active;
    }
    unlock(pool, &d);
    if (st != NU_OK)
        memset(out, 0, sizeof *out);
    return st;
}

void nu__pool_free(nu__pool *pool, const nu__allocation *allocation, nu__guard *busy)
{
    if (!pool || !allocation || !allocation->block || !allocation->size)
        return;
    nu__block *b = allocation->block;
    uint64_t size = allocation->size;
    drops d;
    d.count = 0;
    d.blocks = NULL;
    pool_lock(pool);
    if (allocation->internal)
        pool->internal -= size;
    else
        pool->active -= size;
    entry *e = pool->free_entries;
    bin *bn = find_bin(&pool->kinds[b->kind], size);
    /* Both exist by construction (see the file comment). */
    assert(e && bn);
    if (!e || !bn) {
        release_piece(pool, b, allocation->offset, size, &d);
        unlock(pool, &d);
        return;
    }
    pool->free_entries = e->lru_next;
    e->bin = bn;
    e->block = b;
    e->offset = allocation->offset;
    e->guard = NULL;
    if (busy && !nu__guard_idle(busy)) {
        nu__guard_retain(busy);
        e->guard = busy;
        pool->guarded++;
    }
    e->bin_prev = NULL;
    e->bin_next = bn->head;
    if (bn->head)
        bn->head->bin_prev = e;
    bn->head = e;
    e->lru_prev = NULL;
    e->lru_next = pool->lru_head;
    if (pool->lru_head)
        pool->lru_head->lru_prev = e;
    else
        pool->lru_tail = e;
    pool->lru_head = e;
    pool->cache += size;
    if (pool->cache > pool->cache_limit)
        trim(pool, &d, &pool->cache, pool->cache_limit);
    unlock(pool, &d);
}

/* ---- the pool ------------------------------------------------------------------------------------ */

nu_status nu__pool_create(const nu__pool_config *config, const nu__memory_backend *backend, nu__pool **out)
{
    if (!out)
        return NU_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    if (!config || !backend || !backend->allocate || !backend->release || config->block_size == 0 ||
        (config->block_size & (config->block_size - 1)) != 0 || (config->first_block & (config->first_block - 1)) != 0)
        return NU_ERROR_INVALID_ARGUMENT;
    nu__pool *pool = nu__calloc(1, sizeof *pool);
    if (!pool)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    atomic_init(&pool->lock, 0);
    pool->backend = *backend;
    pool->block_size = config->block_size;
    uint64_t first = config->first_block && config->first_block < config->block_size ? config->first_block
                                                                                     : config->block_size;
    for (int k = 0; k < NU__KIND_COUNT; k++)
        pool->kinds[k].next_block = first;
    pool->page_size = config->page_size;
    pool->memory_limit = config->memory_limit;
    pool->cache_limit = config->memory_limit;
    atomic_init(&pool->buffers, 0);
    *out = pool;
    return NU_OK;
}

static void destroy_blocks(nu__pool *pool, nu__block *b)
{
    while (b) {
        nu__block *next = b->next;
        pool->backend.release(pool->backend.ctx, b->kind, b->memory, b->size);
        free_block_struct(b);
        b = next;
    }
}

void nu__pool_destroy(nu__pool *pool)
{
    if (!pool)
        return;
    for (entry *e = pool->lru_head; e; e = e->lru_next) {
        nu__guard *g = e->guard;
        e->guard = NULL;
        if (g)
            nu__guard_release(g);
    }
    for (int k = 0; k < NU__KIND_COUNT; k++) {
        kind_state *ks = &pool->kinds[k];
        destroy_blocks(pool, ks->shared);
        destroy_blocks(pool, ks->dedicated);
        for (size_t i = 0; i < ks->bin_count; i++)
            nu__free(ks->bins[i].bin);
        nu__free(ks->bins);
    }
    while (pool->chunks) {
        chunk *c = pool->chunks;
        pool->chunks = c->next;
        nu__free(c);
    }
    nu__free(pool);
}

void nu__pool_stats(nu__pool *pool, nu_memory_stats *out)
{
    pool_lock(pool);
    out->active = pool->active;
    out->peak = pool->peak;
    /* Memory of freed buffers returns to the cache when its last GPU use completes
     * (nuvec/command.h): pieces GPU work still uses are not reported yet. */
    uint64_t busy = busy_bytes(pool);
    out->cache = pool->cache - busy;
    out->pending = busy + pool->internal;
    out->reserved = pool->reserved;
    out->memory_limit = pool->memory_limit;
    out->cache_limit = pool->cache_limit;
    out->blocks = pool->blocks;
    pool_unlock(pool);
    int_fast64_t n = atomic_load_explicit(&pool->buffers, memory_order_relaxed);
    out->buffers = n > 0 ? (uint64_t)n : 0;
}

void nu__pool_reset_peak(nu__pool *pool)
{
    pool_lock(pool);
    pool->peak = pool->active;
    pool_unlock(pool);
}

void nu__pool_clear_cache(nu__pool *pool)
{
    drops d;
    d.count = 0;
    d.blocks = NULL;
    pool_lock(pool);
    release_cache(pool, &d);
    unlock(pool, &d);
}

nu_status nu__pool_set_limit(nu__pool *pool, uint64_t bytes, uint64_t *previous)
{
    drops d;
    d.count = 0;
    d.blocks = NULL;
    pool_lock(pool);
    if (bytes < pool->active) {
        pool_unlock(pool);
        if (previous)
            *previous = 0;
        return NU_ERROR_LIMIT;
    }
    if (previous)
        *previous = pool->memory_limit;
    pool->memory_limit = bytes;
    uint64_t room = bytes - pool->active;
    trim(pool, &d, &pool->cache, room > pool->internal ? room - pool->internal : 0);
    unlock(pool, &d);
    return NU_OK;
}

void nu__pool_set_cache_limit(nu__pool *pool, uint64_t bytes, uint64_t *previous)
{
    drops d;
    d.count = 0;
    d.blocks = NULL;
    pool_lock(pool);
    if (previous)
        *previous = pool->cache_limit;
    pool->cache_limit = bytes;
    trim(pool, &d, &pool->cache, bytes);
    unlock(pool, &d);
}

void nu__pool_count_buffer(nu__pool *pool, int delta)
{
    atomic_fetch_add_explicit(&pool->buffers, delta, memory_order_relaxed);
}

nu_status nu__pool_track(nu__pool *pool, uint64_t bytes, char *why, size_t why_size)
{
    if (bytes == 0)
        return NU_OK;
    drops d;
    d.count = 0;
    d.blocks = NULL;
    nu_status st = NU_OK;
    pool_lock(pool);
    if (make_room(pool, &d, bytes)) {
        pool->active += bytes;
        pool->reserved += bytes;
        if (pool->active > pool->peak)
            pool->peak = pool->active;
    } else {
        char b1[32], b2[32], b3[32], b4[32];
        st = NU_ERROR_OUT_OF_MEMORY;
        say(why, why_size,
            "out of memory: mapping %s (%" PRIu64 " bytes) would pass the memory limit of %s: %s in use, "
            "%s cached",
            nu__bytes(b1, sizeof b1, bytes), bytes, nu__bytes(b2, sizeof b2, pool->memory_limit),
            nu__bytes(b3, sizeof b3, pool->active), nu__bytes(b4, sizeof b4, pool->cache));
    }
    unlock(pool, &d);
    return st;
}

void nu__pool_untrack(nu__pool *pool, uint64_t bytes)
{
    pool_lock(pool);
    pool->active -= bytes < pool->active ? bytes : pool->active;
    pool->reserved -= bytes < pool->reserved ? bytes : pool->reserved;
    pool_unlock(pool);
}
