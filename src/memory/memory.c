/* memory.c: the public face of the caching allocator (see nuvec/memory.h). */
#include "memory/allocator.h"
#include "vk/device.h"
#include "core/error.h"
#include "nuvec/memory.h"

nu_status nu_memory_get_stats(nu_device *d, nu_memory_stats *out)
{
    if (!d || !out)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_memory_get_stats: NULL argument");
    nu__pool_stats(d->pool, out);
    return NU_OK;
}

/* Getters give 0 for NULL (nuvec/status.h). */
static nu_memory_stats stats_of(nu_device *d)
{
    nu_memory_stats s = {0};
    if (d)
        nu__pool_stats(d->pool, &s);
    return s;
}

uint64_t nu_memory_active(nu_device *d) { return stats_of(d).active; }
uint64_t nu_memory_peak(nu_device *d) { return stats_of(d).peak; }
uint64_t nu_memory_cache(nu_device *d) { return stats_of(d).cache; }

void nu_memory_reset_peak(nu_device *d)
{
    if (d)
        nu__pool_reset_peak(d->pool);
}
void nu_memory_clear_cache(nu_device *d)
{
    if (d)
        nu__pool_clear_cache(d->pool);
}

nu_status nu_memory_set_limit(nu_device *d, uint64_t bytes, uint64_t *previous)
{
    if (!d)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_memory_set_limit: NULL device");
    nu_status st = nu__pool_set_limit(d->pool, bytes, previous);
    if (st != NU_OK) {
        nu_memory_stats s;
        nu__pool_stats(d->pool, &s);
        char a[32], b[32], c[32];
        return nu__fail(d, st, "memory limit %s is below the %s in use; the limit stays %s",
                        nu__bytes(a, sizeof a, bytes), nu__bytes(b, sizeof b, s.active),
                        nu__bytes(c, sizeof c, s.memory_limit));
    }
    return NU_OK;
}

nu_status nu_memory_set_cache_limit(nu_device *d, uint64_t bytes, uint64_t *previous)
{
    if (!d)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_memory_set_cache_limit: NULL device");
    nu__pool_set_cache_limit(d->pool, bytes, previous);
    return NU_OK;
}
