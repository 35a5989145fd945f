/* guard.h: a buffer's submitted-but-unfinished GPU uses (the reference's Guard).
 *
 * A guard counts GPU uses of one buffer's memory, all of them, the writing ones, and those in
 * command buffers not committed / not submitted yet, and keeps the queue positions (timeline
 * semaphore values) later work must wait for: the last writer's, and every pending user's. A
 * use leaves when its command buffer completes, so a buffer that is never idle (weights read
 * by every pipelined step) keeps only the positions of work still in flight.
 *
 * While uses are pending the guard stays with the memory, also when the buffer is freed and
 * its memory cached and reused (the allocator holds a reference): reuse is ordered after them.
 *
 * The guard is reference-counted; when the last reference goes, `destroy` runs (the buffer
 * that embeds it frees itself). All functions are thread-safe. */
#ifndef NU_GUARD_H
#define NU_GUARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec/status.h"

/* A position on a queue's timeline: work that waits for it waits until the queue's timeline
 * semaphore reaches `value`. */
typedef struct nu__fence {
    uint32_t queue;
    uint64_t value;
} nu__fence;

typedef struct nu__guard nu__guard;
struct nu__guard {
    atomic_uint refs;
    void (*destroy)(nu__guard *guard);
    atomic_size_t users;
    atomic_size_t writers;
    atomic_size_t uncommitted;
    atomic_size_t unsubmitted;
    atomic_size_t unsubmitted_writers;
    /* Committed uses not completed yet (all, writing): what CPU access is judged by. Counted
     * when a use's queue position is recorded (at commit), until that use is released. */
    atomic_size_t committed_users;
    atomic_size_t committed_writers;
    pthread_mutex_t lock; /* guards the fences below */
    pthread_cond_t idle;  /* signalled under `lock` when the last pending use leaves */
    bool has_writer;
    nu__fence writer;
    nu__fence *fences; /* every pending use's position (nu__host memory) */
    size_t fence_count, fence_capacity;
};

/* Initialises a guard with one reference. */
nu_status nu__guard_init(nu__guard *g,
                         void (*destroy)(nu__guard *));
/* Releases what init took; only for a guard whose last reference went (called by destroy). */
void nu__guard_fini(nu__guard *g);
/* For guards embedded in recycled structures (buffer slots): nu__guard_retire frees what the
 * uses allocated (the fence list) but keeps the lock and condition variable, and
 * nu__guard_reinit makes such a guard new again (one reference) without making them anew;
 * nu__guard_fini still releases everything at the end. */
void nu__guard_retire(nu__guard *g);
void nu__guard_reinit(nu__guard *g, void (*destroy)(nu__guard *));
void nu__guard_retain(nu__guard *g);
void nu__guard_release(nu__guard *g);

/* A use begins (recorded into a command buffer). */
void nu__guard_acquire(nu__guard *g, bool write);
/* A use already acquired for reading becomes a writing one (same command buffer). */
void nu__guard_upgrade(nu__guard *g);
/* Makes room for one more queue position, so that the nu__guard_record of a use acquired
 * afterwards cannot fail (call once per use, when it is acquired). */
nu_status nu__guard_reserve(nu__guard *g);
/* Records the queue position of a command buffer that uses the buffer (at commit, before it
 * is submitted): the use now counts as committed (nu__guard_committed_idle). */
nu_status nu__guard_record(nu__guard *g, nu__fence fence, bool write);
/* A use's command buffer was committed (or abandoned). */
void nu__guard_committed(nu__guard *g);
/* A use's command buffer was submitted to the GPU (or abandoned). */
void nu__guard_submitted(nu__guard *g, bool write);
/* A use's command buffer completed (or was abandoned); `fence` (may be NULL) is its queue
 * position: nothing has to wait for it any more. */
void nu__guard_release_use(nu__guard *g, bool write, const nu__fence *fence);

/* Whether no GPU work uses the buffer: neither committed work nor work only recorded (what
 * the allocator's reuse of memory is judged by). */
bool nu__guard_idle(const nu__guard *g);
/* Whether GPU work (committed or only recorded) writes the buffer. */
bool nu__guard_has_writers(const nu__guard *g);
/* Whether no committed GPU work that has not completed uses the buffer (`write` false) or
 * writes it (`write` true): the CPU access rules of nuvec/buffer.h. Uses only recorded do not
 * count: a CPU access before a commit is ordered before that commit's work. */
bool nu__guard_committed_idle(const nu__guard *g, bool write);
/* Whether every pending use is committed. */
bool nu__guard_committed_uses(const nu__guard *g);
/* Uses in command buffers not submitted yet: all, and the writing ones. */
void nu__guard_unsubmitted(const nu__guard *g, size_t *all, size_t *writing);
/* Blocks until no submitted GPU work uses the buffer (only for committed uses, which their
 * command buffer's completion releases). With timeout_ns UINT64_MAX it waits for ever;
 * otherwise it fails with NU_ERROR_TIMEOUT. */
nu_status nu__guard_wait_idle(nu__guard *g, uint64_t timeout_ns);
/* The positions GPU work must wait for before using the buffer: the pending writer's for a
 * read, every pending user's for a write. Writes up to `capacity` into `out`, returns the
 * number there are. */
size_t nu__guard_pending_fences(nu__guard *g, bool write, nu__fence *out, size_t capacity);
/* For tests: the number of positions kept (users) and whether a writer's is kept. */
size_t nu__guard_kept_fences(nu__guard *g, bool *has_writer);

#endif
