/* array.h: growable arrays. An array is a pointer, a count kept by its owner and a capacity;
 * nu__grow makes room for `want` items, doubling from `first`, through nu__realloc (so host
 * allocation failures can be injected). On failure the array is unchanged. */
#ifndef NU_CORE_ARRAY_H
#define NU_CORE_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "nuvec/status.h"

/* Room for `want` items of `item_size` bytes in *items, whose capacity is *capacity (size_t or
 * uint32_t: the two forms); NU_ERROR_HOST_OUT_OF_MEMORY when it cannot be had. */
nu_status nu__grow(void **items, size_t *capacity, size_t want, size_t item_size, size_t first);
nu_status nu__grow32(void **items, uint32_t *capacity, uint32_t want, size_t item_size, uint32_t first);

/* The forms to use: they test the capacity in line (the common case on hot paths: room already). */
#define NU__GROW(items, capacity, want, first)                                                   \
    ((want) <= (capacity) ? NU_OK : nu__grow((void **)&(items), &(capacity), (want), sizeof *(items), (first)))
#define NU__GROW32(items, capacity, want, first)                                                 \
    ((want) <= (capacity) ? NU_OK : nu__grow32((void **)&(items), &(capacity), (want), sizeof *(items), (first)))

#endif
