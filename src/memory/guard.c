/* guard.c: a buffer's pending GPU uses (see guard.h). */
#include "memory/guard.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "core/array.h"
#include "core/host.h"

void nu__guard_reinit(nu__guard *g, void (*destroy)(nu__guard *))
{
    atomic_init(&g->refs, 1);
    g->destroy = destroy;
    atomic_init(&g->users, 0);
    atomic_init(&g->writers, 0);
    atomic_init(&g->uncommitted, 0);
    atomic_init(&g->unsubmitted, 0);
    atomic_init(&g->unsubmitted_writers, 0);
    atomic_init(&g->committed_users, 0);
    atomic_init(&g->committed_writers, 0);
    g->has_writer = false;
    g->fences = NULL;
    g->fence_count = g->fence_capacity = 0;
}

nu_status nu__guard_init(nu__guard *g,
                         void (*destroy)(nu__guard *))
{
    nu__guard_reinit(g, destroy);
    if (pthread_mutex_init(&g->lock, NULL) != 0)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    if (pthread_cond_init(&g->idle, NULL) != 0) {
        pthread_mutex_destroy(&g->lock);
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    }
    return NU_OK;
}

void nu__guard_retire(nu__guard *g)
{
    nu__free(g->fences);
    g->fences = NULL;
    g->fence_count = g->fence_capacity = 0;
}

void nu__guard_fini(nu__guard *g)
{
    nu__guard_retire(g);
    pthread_cond_destroy(&g->idle);
    pthread_mutex_destroy(&g->lock);
}

void nu__guard_retain(nu__guard *g)
{
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

void nu__guard_release(nu__guard *g)
{
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1 && g->destroy)
        g->destroy(g);
}

void nu__guard_acquire(nu__guard *g, bool write)
{
    atomic_fetch_add(&g->uncommitted, 1);
    atomic_fetch_add(&g->unsubmitted, 1);
    atomic_fetch_add(&g->users, 1);
    if (write) {
        atomic_fetch_add(&g->unsubmitted_writers, 1);
        atomic_fetch_add(&g->writers, 1);
    }
}

void nu__guard_upgrade(nu__guard *g)
{
    atomic_fetch_add(&g->unsubmitted_writers, 1);
    atomic_fetch_add(&g->writers, 1);
}

nu_status nu__guard_reserve(nu__guard *g)
{
    pthread_mutex_lock(&g->lock);
    size_t want = g->fence_count + atomic_load(&g->uncommitted) + 1;
    nu_status st = NU_OK;
    if (want > g->fence_capacity)
        st = NU__GROW(g->fences, g->fence_capacity, want, 4);
    pthread_mutex_unlock(&g->lock);
    return st;
}

nu_status nu__guard_record(nu__guard *g, nu__fence fence, bool write)
{
    pthread_mutex_lock(&g->lock);
    if (NU__GROW(g->fences, g->fence_capacity, g->fence_count + 1, 4) != NU_OK) {
        pthread_mutex_unlock(&g->lock);
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    }
    if (write) {
        g->writer = fence;
        g->has_writer = true;
    }
    g->fences[g->fence_count++] = fence;
    atomic_fetch_add(&g->committed_users, 1);
    if (write)
        atomic_fetch_add(&g->committed_writers, 1);
    pthread_mutex_unlock(&g->lock);
    return NU_OK;
}

void nu__guard_committed(nu__guard *g) { atomic_fetch_sub(&g->uncommitted, 1); }

void nu__guard_submitted(nu__guard *g, bool write)
{
    if (write)
        atomic_fetch_sub(&g->unsubmitted_writers, 1);
    atomic_fetch_sub(&g->unsubmitted, 1);
}

static bool same(nu__fence a, nu__fence b) { return a.queue == b.queue && a.value == b.value; }

/* Takes one from a count of committed uses (never below 0). */
static void uncount(atomic_size_t *n)
{
    size_t v = atomic_load(n);
    while (v > 0 && !atomic_compare_exchange_weak(n, &v, v - 1)) {
    }
}

void nu__guard_release_use(nu__guard *g, bool write, const nu__fence *fence)
{
    if (fence) {
        pthread_mutex_lock(&g->lock);
        for (size_t i = 0; i < g->fence_count; i++) {
            if (same(g->fences[i], *fence)) {
                g->fences[i] = g->fences[--g->fence_count];
                break;
            }
        }
        if (g->has_writer && same(g->writer, *fence))
            g->has_writer = false;
        /* A use with a queue position was committed (nu__guard_record counted it). */
        uncount(&g->committed_users);
        if (write)
            uncount(&g->committed_writers);
        pthread_mutex_unlock(&g->lock);
    }
    if (write)
        atomic_fetch_sub(&g->writers, 1);
    if (atomic_fetch_sub(&g->users, 1) == 1) {
        /* Idle: forget the positions, unless a new use began meanwhile (checked under the
         * lock that record takes, so a new user's position is never dropped). */
        pthread_mutex_lock(&g->lock);
        if (atomic_load(&g->users) == 0) {
            g->fence_count = 0;
            g->has_writer = false;
            pthread_cond_broadcast(&g->idle);
        }
        pthread_mutex_unlock(&g->lock);
    }
}

bool nu__guard_idle(const nu__guard *g) { return atomic_load(&g->users) == 0; }
bool nu__guard_has_writers(const nu__guard *g) { return atomic_load(&g->writers) != 0; }

bool nu__guard_committed_idle(const nu__guard *g, bool write)
{
    return atomic_load(write ? &g->committed_writers : &g->committed_users) == 0;
}

bool nu__guard_committed_uses(const nu__guard *g) { return atomic_load(&g->uncommitted) == 0; }

void nu__guard_unsubmitted(const nu__guard *g, size_t *all, size_t *writing)
{
    *all = atomic_load(&g->unsubmitted);
    *writing = atomic_load(&g->unsubmitted_writers);
}

nu_status nu__guard_wait_idle(nu__guard *g, uint64_t timeout_ns)
{
    if (nu__guard_idle(g))
        return NU_OK;
    struct timespec deadline;
    if (timeout_ns != UINT64_MAX)
        deadline = nu__deadline_after(CLOCK_REALTIME, timeout_ns);
    nu_status st = NU_OK;
    pthread_mutex_lock(&g->lock);
    /* release_use takes this lock after the last use leaves, before notifying: no lost wake-up. */
    while (!nu__guard_idle(g)) {
        if (timeout_ns == UINT64_MAX) {
            pthread_cond_wait(&g->idle, &g->lock);
        } else if (pthread_cond_timedwait(&g->idle, &g->lock, &deadline) == ETIMEDOUT) {
            st = nu__guard_idle(g) ? NU_OK : NU_ERROR_TIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

size_t nu__guard_pending_fences(nu__guard *g, bool write, nu__fence *out, size_t capacity)
{
    if (atomic_load(&g->users) == 0)
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&g->lock);
    if (write) {
        n = g->fence_count;
        memcpy(out, g->fences, (n < capacity ? n : capacity) * sizeof *out);
    } else if (atomic_load(&g->writers) != 0 && g->has_writer) {
        n = 1;
        if (capacity)
            out[0] = g->writer;
    }
    pthread_mutex_unlock(&g->lock);
    return n;
}

size_t nu__guard_kept_fences(nu__guard *g, bool *has_writer)
{
    pthread_mutex_lock(&g->lock);
    size_t n = g->fence_count;
    *has_writer = g->has_writer;
    pthread_mutex_unlock(&g->lock);
    return n;
}
