/* host.c: the host allocation wrapper and wait deadlines (see host.h). */
#include "core/host.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Counters are the only writable process-wide state besides the Vulkan table: they exist
 * for tests, which turn them on before any other nuvec call (nu__host_count); otherwise an
 * allocation costs one relaxed load more than malloc. */
static atomic_int counting;
static atomic_uint_fast64_t allocations;
static atomic_int_fast64_t live;
static atomic_long fail_at = -1; /* allocation number (in `allocations`) to fail, or -1 */
static atomic_int fail_sticky;
static atomic_int failed;

void nu__host_count(int on) { atomic_store(&counting, on); }

static int counted(void) { return atomic_load_explicit(&counting, memory_order_relaxed); }

static int should_fail(void)
{
    if (!counted())
        return 0;
    uint64_t n = atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    long at = atomic_load_explicit(&fail_at, memory_order_relaxed);
    if (at < 0)
        return 0;
    if ((uint64_t)at == n || (atomic_load_explicit(&fail_sticky, memory_order_relaxed) && n > (uint64_t)at)) {
        atomic_store(&failed, 1);
        return 1;
    }
    return 0;
}

void *nu__malloc(size_t size)
{
    if (should_fail())
        return NULL;
    void *p = malloc(size ? size : 1);
    if (p && counted())
        atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
    return p;
}

void *nu__calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p && counted())
        atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
    return p;
}

void *nu__realloc(void *ptr, size_t size)
{
    if (!ptr)
        return nu__malloc(size);
    if (should_fail())
        return NULL;
    return realloc(ptr, size ? size : 1);
}

void nu__free(void *ptr)
{
    if (!ptr)
        return;
    if (counted())
        atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
    free(ptr);
}

char *nu__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = nu__malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

void nu__host_fail_after(long n, int sticky)
{
    atomic_store(&failed, 0);
    atomic_store(&fail_sticky, sticky);
    if (n < 0)
        atomic_store(&fail_at, -1);
    else
        atomic_store(&fail_at, (long)atomic_load(&allocations) + n);
}

uint64_t nu__host_allocations(void) { return atomic_load(&allocations); }
int64_t nu__host_live(void) { return atomic_load(&live); }
int nu__host_failed(void) { return atomic_load(&failed); }

struct timespec nu__deadline_after(clockid_t clock, uint64_t ns)
{
    struct timespec t;
    clock_gettime(clock, &t);
    uint64_t nsec = (uint64_t)t.tv_nsec + ns % 1000000000u;
    t.tv_sec += (time_t)(ns / 1000000000u + nsec / 1000000000u);
    t.tv_nsec = (long)(nsec % 1000000000u);
    return t;
}

uint64_t nu__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool nu__env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}
