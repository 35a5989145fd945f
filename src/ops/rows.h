/* rows.h: what the row ops share (reductions, argmax, softmax: reduce.c; norms: norm.c): how a
 * kernel of kernels/reduce/reduce.glsl is laid over a tensor's rows (rows.c). */
#ifndef NU_OPS_ROWS_H
#define NU_OPS_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/op.h"

/* How a row kernel runs over src's rows (the last dimension): its specialisation constants
 * LOCAL, ROWS, SUBGROUP and UNROLL, which module (the *_sg one when the device has subgroup
 * arithmetic), and the grid; with src's dimensions for the push constants. */
typedef struct nu__rows {
    uint32_t rows, n;                /* row count, row length */
    uint32_t shape[4], strides[4];   /* src's, 4 dimensions (nu__op_dims4) */
    uint32_t local, per_group, unroll;
    uint32_t subgroup;               /* SUBGROUP: 1 for subgroup arithmetic (sg module only) */
    bool sg_module;
    uint32_t groups[3];
} nu__rows;

/* The plan for src's rows on src's device (src checked, non-empty), with tune's layout (NULL or
 * zero fields: the defaults, nuvec/ops.h's nu_rows_tune), NUVEC_OPS_ROWS over it; a bad value of
 * either fails, with op's name. */
nu_status nu__rows_plan(const char *op, const nu_tensor *src, const nu_rows_tune *tune, nu__rows *p);
/* Whether t's rows can be read with 16-byte loads from a binding in which its first element is
 * `first`: the last dimension contiguous, and every row's first element 16-byte aligned. */
bool nu__rows_vec(const nu_tensor *t, uint32_t first);
/* NU_ERROR_INVALID_ARGUMENT unless dst has src's shape (keep_last: softmax, norms) or src's
 * shape with the last dimension 1 (reductions, argmax). */
nu_status nu__rows_shape(const char *op, const nu_tensor *dst, const nu_tensor *src, bool keep_last);

#endif
