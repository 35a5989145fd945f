/* reduce.c: reductions over the last dimension, argmax and softmax (nu_op_reduce, nu_op_argmax,
 * nu_op_softmax; kernels/reduce/), one team of threads a row (rows.c). */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "ops/op.h"
#include "ops/rows.h"

static const char *const reduce_names[NU_REDUCE_OP_COUNT] = {"nu_op_reduce (sum)", "nu_op_reduce (max)",
                                                             "nu_op_reduce (mean)"};

/* The push constants of reduce_kernel.glsl and softmax_kernel.glsl. */
typedef struct rows_push {
    uint32_t shape[4], strides[4];
    uint32_t rows, n, first_src, first_dst;
    float scale;
} rows_push;

/* reduce_kernel.glsl's OP: the nu_reduce_op, or 3 for argmax. */
#define ARGMAX 3u

static nu_status reduce_rows(nu_commands *c, const char *fn, uint32_t op, const nu_tensor *dst, const nu_tensor *src,
                             uint32_t dst_dtypes)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, dst_dtypes)) != NU_OK || (st = nu__op_check(fn, "src", src, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_contiguous(fn, "dst", dst)) != NU_OK || (st = nu__rows_shape(fn, dst, src, false)) != NU_OK ||
        (st = nu__op_no_alias(fn, dst, "src", src, false)) != NU_OK)
        return st;
    if (!nu_tensor_numel(dst))
        return NU_OK;
    if (!src->shape[src->rank - 1])
        return nu__fail(nu_buffer_device(dst->buffer), NU_ERROR_INVALID_ARGUMENT,
                        "%s: src's rows are empty (its last dimension is 0)", fn);
    nu_binding bind[2];
    uint32_t first[2];
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, src, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK)
        return st;
    nu__rows p;
    if ((st = nu__rows_plan(fn, src, NULL, &p)) != NU_OK)
        return st;
    uint32_t constants[8] = {p.local, p.per_group, op, nu__op_dtype_code(src->dtype), nu__op_dtype_code(dst->dtype),
                             nu__rows_vec(src, first[1]), p.subgroup, p.unroll};
    rows_push push = {{0}, {0}, p.rows, p.n, first[1], first[0], 0};
    memcpy(push.shape, p.shape, sizeof push.shape);
    memcpy(push.strides, p.strides, sizeof push.strides);
    nu_kernel *k;
    if ((st = nu__op_kernel(nu_buffer_device(dst->buffer), p.sg_module ? NU__K_reduce_sg : NU__K_reduce, sizeof push,
                            constants, 8, &k)) != NU_OK)
        return st;
    return nu_commands_dispatch(c, k, p.groups, bind, 2, &push, sizeof push);
}

nu_status nu_op_reduce(nu_commands *c, nu_reduce_op op, const nu_tensor *dst, const nu_tensor *src)
{
    if ((unsigned)op >= NU_REDUCE_OP_COUNT)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_op_reduce: unknown op %d", (int)op);
    return reduce_rows(c, reduce_names[op], (uint32_t)op, dst, src, NU__OP_FLOAT);
}

nu_status nu_op_argmax(nu_commands *c, const nu_tensor *dst, const nu_tensor *src)
{
    return reduce_rows(c, "nu_op_argmax", ARGMAX, dst, src, NU__OP_DTYPE(NU_DTYPE_I32));
}

nu_status nu_op_softmax(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, float scale)
{
    const char *fn = "nu_op_softmax";
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(fn, "src", src, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_contiguous(fn, "dst", dst)) != NU_OK || (st = nu__rows_shape(fn, dst, src, true)) != NU_OK ||
        (st = nu__op_no_alias(fn, dst, "src", src, true)) != NU_OK)
        return st;
    if (!isfinite(scale))
        return nu__fail(nu_buffer_device(dst->buffer), NU_ERROR_INVALID_ARGUMENT, "%s: scale %g is not finite", fn,
                        (double)scale);
    if (!nu_tensor_numel(dst))
        return NU_OK;
    nu_binding bind[2];
    uint32_t first[2];
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, src, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK)
        return st;
    nu__rows p;
    if ((st = nu__rows_plan(fn, src, NULL, &p)) != NU_OK)
        return st;
    uint32_t vec = nu__rows_vec(src, first[1]) && nu__rows_vec(dst, first[0]);
    uint32_t constants[7] = {p.local, p.per_group, nu__op_dtype_code(src->dtype), nu__op_dtype_code(dst->dtype), vec,
                             p.subgroup, p.unroll};
    rows_push push = {{0}, {0}, p.rows, p.n, first[1], first[0], scale};
    memcpy(push.shape, p.shape, sizeof push.shape);
    memcpy(push.strides, p.strides, sizeof push.strides);
    nu_kernel *k;
    if ((st = nu__op_kernel(nu_buffer_device(dst->buffer), p.sg_module ? NU__K_softmax_sg : NU__K_softmax, sizeof push,
                            constants, 7, &k)) != NU_OK)
        return st;
    return nu_commands_dispatch(c, k, p.groups, bind, 2, &push, sizeof push);
}
