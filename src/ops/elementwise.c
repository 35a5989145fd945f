/* elementwise.c: binary ops with broadcasting (nu_op_binary; kernels/elementwise/binary.comp). */
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "ops/op.h"

static const char *const binary_names[NU_BINARY_OP_COUNT] = {"nu_op_add", "nu_op_sub", "nu_op_mul", "nu_op_div"};

nu_status nu_op_binary(nu_commands *c, nu_binary_op op, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b)
{
    if ((unsigned)op >= NU_BINARY_OP_COUNT)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_op_binary: unknown op %d", (int)op);
    const char *fn = binary_names[op];
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(fn, "a", a, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_check(fn, "b", b, NU__OP_FLOAT)) != NU_OK || (st = nu__op_contiguous(fn, "dst", dst)) != NU_OK)
        return st;
    nu_tensor ab, bb;
    if (nu_tensor_broadcast(a, dst->rank, dst->shape, &ab) != NU_OK || nu_tensor_broadcast(b, dst->rank, dst->shape, &bb) != NU_OK)
        return nu__fail(nu_buffer_device(dst->buffer), NU_ERROR_INVALID_ARGUMENT,
                        "%s: a's and b's shapes do not broadcast to dst's (numpy's rules)", fn);
    if ((st = nu__op_no_alias(fn, dst, "a", a, true)) != NU_OK || (st = nu__op_no_alias(fn, dst, "b", b, true)) != NU_OK)
        return st;
    uint64_t count = nu_tensor_numel(dst);
    if (!count)
        return NU_OK;
    nu_binding bind[3];
    uint32_t first[3];
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, &ab, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK ||
        (st = nu__op_bind(fn, &bb, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK)
        return st;
    const nu_tensor *all[3] = {dst, &ab, &bb};
    uint32_t fast = nu__op_vector_path(all, first, 3);
    uint32_t constants[5] = {(uint32_t)op, nu__op_dtype_code(dst->dtype), nu__op_dtype_code(a->dtype),
                             nu__op_dtype_code(b->dtype), fast};
    struct {
        uint32_t count, first_dst, first_a, first_b;
        uint32_t shape[4], stride_a[4], stride_b[4];
    } push = {(uint32_t)count, first[0], first[1], first[2], {0}, {0}, {0}};
    uint32_t unused[4];
    nu__op_dims4(dst, push.shape, unused);
    nu__op_dims4(&ab, unused, push.stride_a);
    nu__op_dims4(&bb, unused, push.stride_b);
    nu_kernel *k;
    if ((st = nu__op_kernel(nu_buffer_device(dst->buffer), NU__K_binary, sizeof push, constants, 5, &k)) != NU_OK)
        return st;
    uint32_t groups[3];
    nu__op_groups(fast ? (count + 7) / 8 : count, 256, groups);
    return nu_commands_dispatch(c, k, groups, bind, 3, &push, sizeof push);
}

nu_status nu_op_add(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b)
{
    return nu_op_binary(c, NU_BINARY_ADD, dst, a, b);
}
nu_status nu_op_sub(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b)
{
    return nu_op_binary(c, NU_BINARY_SUB, dst, a, b);
}
nu_status nu_op_mul(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b)
{
    return nu_op_binary(c, NU_BINARY_MUL, dst, a, b);
}
nu_status nu_op_div(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b)
{
    return nu_op_binary(c, NU_BINARY_DIV, dst, a, b);
}
