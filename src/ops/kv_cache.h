/* kv_cache.h: what the KV cache's writes (kv_cache.c) share with attention (attention.c): the
 * per-row form's I32 tensors. */
#ifndef NU_OPS_KV_CACHE_H
#define NU_OPS_KV_CACHE_H

#include <stdint.h>

#include "ops/op.h"

/* An I32 [rows] tensor of the per-row form (a batch's positions or slots: any view), named `name`
 * in fn's messages, not overlapping `out` (the op's output): its binding (read), its first
 * element there and its stride in elements (0 for one row). */
nu_status nu__op_rows_tensor(const char *fn, const char *name, const nu_tensor *t, int64_t rows, const nu_tensor *out,
                             nu_binding *bind, uint32_t *first, uint32_t *stride);

#endif
