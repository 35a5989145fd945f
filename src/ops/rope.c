/* rope.c: rotary position embeddings (nu_op_rope; kernels/rope/rope.comp). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "exec/graph.h"
#include "ops/op.h"
#include "ops/rope.h"

/* The kernel's tuning (rope.comp's specialisation constants 0 and 6; nu_rope_tune): threads a
 * workgroup, heads a thread. NUVEC_TUNE_ROPE="local=N heads=N" overrides them (docs/knobs.md). */
#define ROPE_LOCAL 256u
#define ROPE_HEADS 2u

static bool apply_knob(void *ctx, const char *key, const char *value)
{
    nu_rope_tune *t = ctx;
    if (!strcmp(key, "local"))
        return nu__op_knob_u32(value, 1, 1024, false, &t->local);
    if (!strcmp(key, "heads"))
        return nu__op_knob_u32(value, 1, 8, false, &t->heads);
    return false;
}

/* Whether element offsets `first` and `strides` (those of dimensions longer than 1) keep every
 * row 16-byte aligned for elements of `size` bytes. */
static bool rows_aligned(uint64_t first, const nu_tensor *t, uint32_t dims, size_t size)
{
    if (first * size % 16)
        return false;
    for (uint32_t i = 0; i < dims; i++)
        if (t->shape[i] > 1 && (uint64_t)t->strides[i] * size % 16)
            return false;
    return true;
}

nu_status nu__rope_plan_make(nu_device *d, const char *fn, const nu_rope_desc *desc, int64_t dim, const nu_tensor *dst,
                             const nu_tensor *fallback, nu__rope_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    if (desc->layout != NU_ROPE_INTERLEAVED && desc->layout != NU_ROPE_HALF)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: unknown layout %d", fn, (int)desc->layout);
    float theta = desc->theta == 0 ? 10000.0f : desc->theta;
    if (!(theta > 0) || !isfinite(theta))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: theta %g is not a positive number", fn,
                        (double)desc->theta);
    if (dim % 2)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: head_dim %lld is odd", fn, (long long)dim);
    int64_t rot = desc->rotary_dims ? (int64_t)desc->rotary_dims : dim;
    if (rot % 2 || rot > dim)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: rotary_dims %lld must be even and at most head_dim (%lld)", fn,
                        (long long)rot, (long long)dim);
    if (desc->linear_factor != 0 && (!(desc->linear_factor > 0) || !isfinite(desc->linear_factor)))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: linear_factor %g must be 0 (none) or positive and finite", fn,
                        (double)desc->linear_factor);
    if (desc->attn_factor != 0 && (!(desc->attn_factor > 0) || !isfinite(desc->attn_factor)))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: attn_factor %g must be 0 (none) or positive and finite", fn,
                        (double)desc->attn_factor);
    const nu_tensor *ff = desc->freq_factors;
    nu_binding none = nu__op_unbound(fallback->buffer);
    if (ff) {
        nu_status st = nu__op_check(fn, "freq_factors", ff, NU__OP_DTYPE(NU_DTYPE_F32));
        if (st != NU_OK)
            return st;
        if (ff->rank != 1 || ff->shape[0] != rot / 2)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: freq_factors must be F32 [rotary_dims / 2] ([%lld])", fn,
                            (long long)(rot / 2));
        if (dst && (st = nu__op_no_alias(fn, dst, "freq_factors", ff, false)) != NU_OK)
            return st;
        if (rot && (st = nu__op_bind(fn, ff, NU_ACCESS_READ, &none, &plan->ff_first)) != NU_OK)
            return st;
        plan->ff_stride = ff->shape[0] > 1 ? (uint32_t)ff->strides[0] : 0;
        plan->has_ff = rot > 0;
    }
    plan->ff = none;
    plan->rotary = (uint32_t)rot;
    plan->step = rot ? (float)(2.0 * log2((double)theta) / (double)rot) : 0.0f;
    /* 1 / factor rounded once: the kernels multiply the position by it (as ggml's freq_scale). */
    plan->pscale = desc->linear_factor != 0 ? (float)(1.0 / (double)desc->linear_factor) : 1.0f;
    plan->mscale = desc->attn_factor != 0 ? desc->attn_factor : 1.0f;
    return NU_OK;
}

nu_status nu_op_rope(nu_commands *c, const nu_tensor *dst, const nu_tensor *src, const nu_rope_desc *desc)
{
    const char *fn = "nu_op_rope";
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    if (!desc)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL desc", fn);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(fn, "src", src, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_contiguous(fn, "dst", dst)) != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(src->buffer);
    if (src->rank != 3 && src->rank != 4)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: src has rank %u; it takes [tokens, heads, head_dim] or [batch, tokens, heads, head_dim]", fn,
                        src->rank);
    if ((st = nu__op_same_shape(fn, "dst", dst, "src", src)) != NU_OK)
        return st;
    uint32_t r4 = src->rank == 4 ? 0 : 1; /* src's dimension i is the 4-D one i + r4 */
    int64_t shape4[4] = {1, 1, 1, 1}, stride4[4] = {0, 0, 0, 0};
    for (uint32_t i = 0; i < src->rank; i++) {
        shape4[i + r4] = src->shape[i];
        stride4[i + r4] = src->strides[i];
    }
    int64_t batch = shape4[0], tokens = shape4[1], heads = shape4[2], dim = shape4[3];
    nu__rope_plan plan;
    if ((st = nu__rope_plan_make(d, fn, desc, dim, dst, src, &plan)) != NU_OK)
        return st;
    int64_t rot = plan.rotary;
    nu_rope_tune tune = desc->tune;
    if (tune.local > 1024 || tune.heads > 8)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: tune.local %u or tune.heads %u out of range (1..1024, 1..8)", fn,
                        tune.local, tune.heads);
    if ((st = nu__op_env_knobs(d, fn, "NUVEC_TUNE_ROPE", "local=1..1024, heads=1..8", apply_knob, &tune)) != NU_OK)
        return st;
    const nu_tensor *pos = desc->positions;
    uint32_t pos_sb = 0, pos_st = 0;
    if (pos) {
        if ((st = nu__op_check(fn, "positions", pos, NU__OP_DTYPE(NU_DTYPE_I32))) != NU_OK)
            return st;
        if (pos->rank == 1 && pos->shape[0] == tokens) {
            pos_st = (uint32_t)pos->strides[0];
        } else if (pos->rank == 1 && pos->shape[0] == batch * tokens) {
            pos_st = (uint32_t)pos->strides[0];
            pos_sb = (uint32_t)(pos->strides[0] * tokens);
        } else if (pos->rank == 2 && pos->shape[0] == batch && pos->shape[1] == tokens) {
            pos_sb = (uint32_t)pos->strides[0];
            pos_st = (uint32_t)pos->strides[1];
        } else {
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                            "%s: positions must hold one I32 per token: [tokens] (%lld), [batch * tokens] or [batch, "
                            "tokens] (batch %lld)", fn, (long long)tokens, (long long)batch);
        }
        if ((st = nu__op_no_alias(fn, dst, "positions", pos, false)) != NU_OK)
            return st;
    }
    if ((st = nu__op_no_alias(fn, dst, "src", src, true)) != NU_OK)
        return st;
    if (!nu_tensor_numel(dst))
        return NU_OK;

    nu_binding bind[4];
    uint32_t first[3] = {0, 0, 0};
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, src, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK ||
        (st = nu__op_bind(fn, pos ? pos : src, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK)
        return st;
    size_t es = nu_dtype_size(src->dtype), ed = nu_dtype_size(dst->dtype);
    bool half = desc->layout == NU_ROPE_HALF;
    nu_tensor s4 = *src; /* src as 4-D, for the alignment of its rows */
    s4.rank = 4;
    memcpy(s4.shape, shape4, sizeof shape4);
    memcpy(s4.strides, stride4, sizeof stride4);
    bool fast = dim % 8 == 0 && rot % (half ? 16 : 8) == 0 && stride4[3] == 1 &&
                rows_aligned(first[1], &s4, 3, es) && (uint64_t)first[0] * ed % 16 == 0;
    uint32_t local = tune.local ? tune.local : ROPE_LOCAL, per = tune.heads ? tune.heads : ROPE_HEADS;
    uint32_t head_groups = (uint32_t)((heads + per - 1) / per);
    uint32_t slots = fast ? (uint32_t)((half ? rot / 16 : rot / 8) + (dim - rot) / 8) : (uint32_t)(rot / 2 + (dim - rot));
    uint32_t constants[8] = {local, nu__op_dtype_code(src->dtype), nu__op_dtype_code(dst->dtype), half, fast, pos != NULL, per,
                             plan.has_ff};
    struct rope_push {
        uint32_t shape[4], stride[4];
        uint32_t first_src, first_dst, first_pos, rotary;
        uint32_t pos_stride_b, pos_stride_t;
        int32_t offset;
        float step;
        uint32_t head_groups, slots;
        float pscale, mscale;
        uint32_t first_ff, ff_stride;
    } push = {{(uint32_t)batch, (uint32_t)tokens, (uint32_t)heads, (uint32_t)dim},
              {(uint32_t)stride4[0], (uint32_t)stride4[1], (uint32_t)stride4[2], (uint32_t)stride4[3]},
              first[1], first[0], first[2], (uint32_t)rot, pos_sb, pos_st, desc->position_offset, plan.step,
              head_groups, slots, plan.pscale, plan.mscale, plan.ff_first, plan.ff_stride};
    bind[3] = plan.ff;
    nu_kernel *k;
    if ((st = nu__op_kernel(d, NU__K_rope, sizeof push, constants, 8, &k)) != NU_OK)
        return st;
    uint32_t groups[3];
    nu__op_groups((uint64_t)batch * (uint64_t)tokens * head_groups * slots, local, groups);
    st = nu_commands_dispatch(c, k, groups, bind, 4, &push, sizeof push);
    nu__op_value_at value = {NU_OP_VALUE_POSITION, 0, (uint32_t)offsetof(struct rope_push, offset)};
    if (st == NU_OK)
        nu__graph_note_values(c, fn, &value, 1);
    return st;
}
