/* norm.c: RMSNorm and LayerNorm along the last dimension (nu_op_rms_norm, nu_op_layer_norm;
 * kernels/norm/), one team of threads a row (rows.c). */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "ops/op.h"
#include "ops/rows.h"

/* norm_kernel.glsl's push constants. */
typedef struct norm_push {
    uint32_t shape[4], strides[4];
    uint32_t rows, n, first_src, first_dst;
    uint32_t first_w, first_b, stride_w, stride_b;
    float eps;
    uint32_t first_sum;
    uint32_t first_wb, stride_wb;
} norm_push;

/* A weight or bias: 1-D, the rows' length, not written by dst. */
static nu_status check_vector(const char *fn, const char *name, const nu_tensor *v, const nu_tensor *dst,
                              const nu_tensor *src)
{
    nu_status st = nu__op_check(fn, name, v, NU__OP_FLOAT);
    if (st != NU_OK)
        return st;
    int64_t n = src->shape[src->rank - 1];
    if (v->rank != 1 || v->shape[0] != n)
        return nu__fail(nu_buffer_device(v->buffer), NU_ERROR_INVALID_ARGUMENT,
                        "%s: %s must be 1-D of the rows' length %lld (rank %u, %lld elements)", fn, name, (long long)n,
                        v->rank, (long long)nu_tensor_numel(v));
    return nu__op_no_alias(fn, dst, name, v, false);
}

/* mode 0 RMSNorm, 1 LayerNorm (2 with bias), 3 RMSNorm of src + addend, writing the sum to `sum`;
 * 4 the same with the addend normalised by its RMS and times addend_weight first. */
static nu_status norm(nu_commands *c, const char *fn, uint32_t mode, const nu_tensor *dst, const nu_tensor *src,
                      const nu_tensor *weight, const nu_tensor *bias, float eps, const nu_tensor *addend,
                      const nu_tensor *sum, const nu_tensor *addend_weight)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    if (!weight)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL weight", fn);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(fn, "src", src, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_contiguous(fn, "dst", dst)) != NU_OK || (st = nu__rows_shape(fn, dst, src, true)) != NU_OK ||
        (st = nu__op_no_alias(fn, dst, "src", src, true)) != NU_OK ||
        (st = check_vector(fn, "weight", weight, dst, src)) != NU_OK ||
        (bias && (st = check_vector(fn, "bias", bias, dst, src)) != NU_OK))
        return st;
    if (mode == 4 && ((st = check_vector(fn, "b_weight", addend_weight, dst, src)) != NU_OK ||
                      (st = nu__op_no_alias(fn, sum, "b_weight", addend_weight, false)) != NU_OK))
        return st;
    if (mode >= 3) {
        /* b and the sum: contiguous, src's shape; the sum of any float dtype (F32 beside an F16
         * dst: the residual stream kept, the next product's input rounded), replacing src or b
         * exactly (the same view) or apart from every other tensor. */
        if ((st = nu__op_check(fn, "b", addend, NU__OP_FLOAT)) != NU_OK ||
            (st = nu__op_check(fn, "sum", sum, NU__OP_FLOAT)) != NU_OK ||
            (st = nu__op_contiguous(fn, "src", src)) != NU_OK || (st = nu__op_contiguous(fn, "b", addend)) != NU_OK ||
            (st = nu__op_contiguous(fn, "sum", sum)) != NU_OK ||
            (st = nu__op_same_shape(fn, "b", addend, "src", src)) != NU_OK ||
            (st = nu__op_same_shape(fn, "sum", sum, "src", src)) != NU_OK ||
            (st = nu__op_no_alias(fn, dst, "b", addend, false)) != NU_OK ||
            (st = nu__op_no_alias(fn, dst, "sum", sum, false)) != NU_OK ||
            (st = nu__op_no_alias(fn, sum, "src", src, true)) != NU_OK ||
            (st = nu__op_no_alias(fn, sum, "b", addend, true)) != NU_OK ||
            (st = nu__op_no_alias(fn, sum, "weight", weight, false)) != NU_OK)
            return st;
    }
    /* eps >= 0: a negative one can make var + eps negative (a NaN row) for some rows only. */
    if (!(eps >= 0) || !isfinite(eps))
        return nu__fail(nu_buffer_device(dst->buffer), NU_ERROR_INVALID_ARGUMENT,
                        "%s: eps %g must be finite and >= 0", fn, (double)eps);
    if (!nu_tensor_numel(dst))
        return NU_OK;
    const nu_tensor *b = mode >= 3 ? addend : bias ? bias : weight, *wb = mode == 4 ? addend_weight : weight;
    nu_binding bind[6];
    uint32_t first[6];
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, src, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK ||
        (st = nu__op_bind(fn, weight, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK ||
        (st = nu__op_bind(fn, b, NU_ACCESS_READ, &bind[3], &first[3])) != NU_OK ||
        (st = nu__op_bind(fn, mode >= 3 ? sum : dst, NU_ACCESS_WRITE, &bind[4], &first[4])) != NU_OK ||
        (st = nu__op_bind(fn, wb, NU_ACCESS_READ, &bind[5], &first[5])) != NU_OK)
        return st;
    nu__rows p;
    if ((st = nu__rows_plan(fn, src, NULL, &p)) != NU_OK)
        return st;
    uint32_t vec = nu__rows_vec(src, first[1]) && nu__rows_vec(dst, first[0]) && nu__rows_vec(weight, first[2]) &&
                   nu__rows_vec(b, first[3]) && (mode < 3 || nu__rows_vec(sum, first[4]));
    uint32_t wb_vec = nu__rows_vec(wb, first[5]); /* apart: the rows read alike either way */
    if (mode == 1 && bias)
        mode = 2;
    uint32_t dtypes = nu__op_dtype_code(dst->dtype) | nu__op_dtype_code(src->dtype) << 4 |
                      nu__op_dtype_code(weight->dtype) << 8 | nu__op_dtype_code(b->dtype) << 12 |
                      (mode >= 3 ? nu__op_dtype_code(sum->dtype) << 16 : 0u) | nu__op_dtype_code(wb->dtype) << 20;
    uint32_t constants[8] = {p.local, p.per_group, mode, dtypes, vec, p.subgroup, p.unroll, wb_vec};
    norm_push push = {{0}, {0}, p.rows, p.n, first[1], first[0], first[2], first[3],
                      (uint32_t)weight->strides[0], mode >= 3 ? 1u : (uint32_t)b->strides[0], eps, first[4], first[5],
                      (uint32_t)wb->strides[0]};
    memcpy(push.shape, p.shape, sizeof push.shape);
    memcpy(push.strides, p.strides, sizeof push.strides);
    nu_kernel *k;
    if ((st = nu__op_kernel(nu_buffer_device(dst->buffer), p.sg_module ? NU__K_norm_sg : NU__K_norm, sizeof push,
                            constants, 8, &k)) != NU_OK)
        return st;
    return nu_commands_dispatch(c, k, p.groups, bind, 6, &push, sizeof push);
}

nu_status nu_op_rms_norm(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, const nu_tensor *weight, float eps)
{
    return norm(c, "nu_op_rms_norm", 0, dst, src, weight, NULL, eps, NULL, NULL, NULL);
}

nu_status nu_op_add_rms_norm(nu_commands *c, const nu_tensor *sum, const nu_tensor *dst, const nu_tensor *a,
                             const nu_tensor *b, const nu_tensor *weight, float eps)
{
    if (!a || !b || !sum)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_op_add_rms_norm: NULL %s", !a ? "a" : !b ? "b" : "sum");
    return norm(c, "nu_op_add_rms_norm", 3, dst, a, weight, NULL, eps, b, sum, NULL);
}

nu_status nu_op_norm_add_rms_norm(nu_commands *c, const nu_tensor *sum, const nu_tensor *dst, const nu_tensor *a,
                                  const nu_tensor *b, const nu_tensor *b_weight, const nu_tensor *weight, float eps)
{
    const char *fn = "nu_op_norm_add_rms_norm";
    if (!a || !b || !sum || !b_weight)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL %s", fn,
                        !a ? "a" : !b ? "b" : !sum ? "sum" : "b_weight");
    return norm(c, fn, 4, dst, a, weight, NULL, eps, b, sum, b_weight);
}

nu_status nu_op_layer_norm(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, const nu_tensor *weight,
                           const nu_tensor *bias, float eps)
{
    return norm(c, "nu_op_layer_norm", 1, dst, src, weight, bias, eps, NULL, NULL, NULL);
}
