/* unary.c: elementwise unary ops and gated linear units (nu_op_unary, nu_op_scale, nu_op_glu, nu_op_swiglu;
 * kernels/elementwise/unary.comp, swiglu.comp). */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "ops/op.h"

/* The shaders' tuning knobs (specialisation constants 4 and 5): threads per workgroup, and
 * 8-element steps a thread loads before it computes and stores. */
#define UNARY_LOCAL 256u
#define UNARY_UNROLL 2u

static const char *const unary_names[NU_UNARY_OP_COUNT] = {"nu_op_scale",          "nu_op_unary (EXP)",
                                                           "nu_op_unary (SILU)",   "nu_op_unary (GELU)",
                                                           "nu_op_unary (GELU_TANH)", "nu_op_unary (SOFTCAP)"};

/* Threads for `count` elements: a thread per UNROLL steps of 8 or 4 elements (at least the
 * tail's), or an element a thread. */
static void grid(uint64_t count, uint32_t fast, uint32_t groups[3])
{
    uint64_t threads = count;
    if (fast) {
        uint64_t step = fast == 1 ? 8 : 4; /* elements a step (nu__op_vector_path) */
        threads = (count / step + UNARY_UNROLL - 1) / UNARY_UNROLL;
        if (threads < step)
            threads = step; /* the tail: an element a thread */
    }
    nu__op_groups(threads, UNARY_LOCAL, groups);
}

nu_status nu_op_unary(nu_commands *c, nu_unary_op op, const nu_tensor *dst, const nu_tensor *src, float alpha)
{
    if ((unsigned)op >= NU_UNARY_OP_COUNT)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_op_unary: unknown op %d", (int)op);
    const char *fn = unary_names[op];
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(fn, "src", src, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_contiguous(fn, "dst", dst)) != NU_OK || (st = nu__op_same_shape(fn, "dst", dst, "src", src)) != NU_OK ||
        (st = nu__op_no_alias(fn, dst, "src", src, true)) != NU_OK)
        return st;
    if (op == NU_UNARY_SOFTCAP && (!(alpha > 0) || !isfinite(alpha)))
        return nu__fail(nu_buffer_device(dst->buffer), NU_ERROR_INVALID_ARGUMENT,
                        "%s: alpha (the cap) is %g; it must be positive and finite", fn, (double)alpha);
    uint64_t count = nu_tensor_numel(dst);
    if (!count)
        return NU_OK;
    nu_binding bind[2];
    uint32_t first[2];
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, src, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK)
        return st;
    const nu_tensor *all[2] = {dst, src};
    uint32_t fast = nu__op_vector_path(all, first, 2);
    uint32_t constants[6] = {(uint32_t)op, nu__op_dtype_code(dst->dtype), nu__op_dtype_code(src->dtype), fast,
                             UNARY_LOCAL, UNARY_UNROLL};
    struct {
        uint32_t count, first_dst, first_src;
        float alpha;
        uint32_t shape[4], stride[4];
    } push = {(uint32_t)count, first[0], first[1], alpha, {0}, {0}};
    uint32_t unused[4];
    nu__op_dims4(dst, push.shape, unused);
    nu__op_dims4(src, unused, push.stride);
    nu_kernel *k;
    if ((st = nu__op_kernel(nu_buffer_device(dst->buffer), NU__K_unary, sizeof push, constants, 6, &k)) != NU_OK)
        return st;
    uint32_t groups[3];
    grid(count, fast, groups);
    return nu_commands_dispatch(c, k, groups, bind, 2, &push, sizeof push);
}

nu_status nu_op_scale(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, float alpha)
{
    return nu_op_unary(c, NU_UNARY_SCALE, dst, src, alpha);
}

nu_status nu_op_swiglu(nu_commands *c, const nu_tensor *dst, const nu_tensor *gate, const nu_tensor *up)
{
    return nu_op_glu(c, NU_GLU_SILU, dst, gate, up);
}

nu_status nu_op_glu(nu_commands *c, nu_glu_activation act, const nu_tensor *dst, const nu_tensor *gate,
                    const nu_tensor *up)
{
    const char *fn = act == NU_GLU_SILU ? "nu_op_swiglu" : "nu_op_glu";
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    if ((unsigned)act >= NU_GLU_ACTIVATION_COUNT)
        return nu__fail(dst && dst->buffer ? nu_buffer_device(dst->buffer) : NULL, NU_ERROR_INVALID_ARGUMENT,
                        "%s: activation %d is not a nu_glu_activation", fn, (int)act);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(fn, "gate", gate, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_check(fn, "up", up, NU__OP_FLOAT)) != NU_OK || (st = nu__op_contiguous(fn, "dst", dst)) != NU_OK ||
        (st = nu__op_same_shape(fn, "dst", dst, "gate", gate)) != NU_OK ||
        (st = nu__op_same_shape(fn, "dst", dst, "up", up)) != NU_OK ||
        (st = nu__op_no_alias(fn, dst, "gate", gate, true)) != NU_OK || (st = nu__op_no_alias(fn, dst, "up", up, true)) != NU_OK)
        return st;
    uint64_t count = nu_tensor_numel(dst);
    if (!count)
        return NU_OK;
    nu_binding bind[3];
    uint32_t first[3];
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, gate, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK ||
        (st = nu__op_bind(fn, up, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK)
        return st;
    const nu_tensor *all[3] = {dst, gate, up};
    uint32_t fast = nu__op_vector_path(all, first, 3);
    uint32_t constants[7] = {nu__op_dtype_code(dst->dtype), nu__op_dtype_code(gate->dtype), nu__op_dtype_code(up->dtype),
                             fast, UNARY_LOCAL, UNARY_UNROLL, (uint32_t)act};
    struct {
        uint32_t count, first_dst, first_gate, first_up;
        uint32_t shape[4], stride_gate[4], stride_up[4];
    } push = {(uint32_t)count, first[0], first[1], first[2], {0}, {0}, {0}};
    uint32_t unused[4];
    nu__op_dims4(dst, push.shape, unused);
    nu__op_dims4(gate, unused, push.stride_gate);
    nu__op_dims4(up, unused, push.stride_up);
    nu_kernel *k;
    if ((st = nu__op_kernel(nu_buffer_device(dst->buffer), NU__K_swiglu, sizeof push, constants, 7, &k)) != NU_OK)
        return st;
    uint32_t groups[3];
    grid(count, fast, groups);
    return nu_commands_dispatch(c, k, groups, bind, 3, &push, sizeof push);
}
