/* array.c: growable arrays (see array.h). */
#include "core/array.h"

#include "core/host.h"

nu_status nu__grow(void **items, size_t *capacity, size_t want, size_t item_size, size_t first)
{
    if (want <= *capacity)
        return NU_OK;
    size_t cap = *capacity ? *capacity : first;
    while (cap < want) {
        if (cap > SIZE_MAX / 2 / item_size)
            return NU_ERROR_HOST_OUT_OF_MEMORY;
        cap *= 2;
    }
    void *p = nu__realloc(*items, cap * item_size);
    if (!p)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    *items = p;
    *capacity = cap;
    return NU_OK;
}

nu_status nu__grow32(void **items, uint32_t *capacity, uint32_t want, size_t item_size, uint32_t first)
{
    size_t cap = *capacity;
    if (want > UINT32_MAX / 2)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    nu_status st = nu__grow(items, &cap, want, item_size, first);
    if (st == NU_OK)
        *capacity = (uint32_t)cap;
    return st;
}
