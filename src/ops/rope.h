/* rope.h: what nu_op_rope (rope.c) shares with the cache writes that rotate on the way in
 * (kv_cache.c): the desc's checks and what its kernels take of it (rope/rope.glsl). */
#ifndef NU_OPS_ROPE_H
#define NU_OPS_ROPE_H

#include <stdbool.h>
#include <stdint.h>

#include "nuvec/command.h"
#include "nuvec/ops.h"

/* A desc resolved for heads of `dim` elements. */
typedef struct nu__rope_plan {
    uint32_t rotary;     /* dimensions rotated (even, at most dim) */
    float step;          /* 2 log2(theta) / rotary, rounded once to F32 (the angle's step) */
    float pscale;        /* 1 / linear_factor (1 without) */
    float mscale;        /* attn_factor (1 without) */
    bool has_ff;         /* freq_factors given */
    nu_binding ff;       /* their binding (has_ff), else an empty range of `fallback`'s buffer */
    uint32_t ff_first, ff_stride;
} nu__rope_plan;

/* Checks desc (messages under fn's name): the layout, theta, dim even, rotary_dims even and at
 * most dim, linear_factor and attn_factor 0 or positive and finite, freq_factors F32 [rotary / 2]
 * (any stride) not overlapping `dst` (the op's output; NULL: none). Binds the factors (their
 * binding, or an empty range of fallback's buffer). *plan is zeroed on failure. */
nu_status nu__rope_plan_make(nu_device *d, const char *fn, const nu_rope_desc *desc, int64_t dim, const nu_tensor *dst,
                             const nu_tensor *fallback, nu__rope_plan *plan);

#endif
