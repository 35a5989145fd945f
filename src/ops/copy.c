/* copy.c: copies and casts between dtypes, dequantization, the repacking of Q4_0 to Q4_0_SOA and of
 * Q6_K to Q6_K_SOA (nu_op_copy; kernels/copy/copy.comp). */
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "ops/op.h"

/* copy.comp's tuning knobs (specialisation constants 3 and 4): threads per workgroup, and steps
 * a thread loads before it stores. */
#define COPY_LOCAL 256u
#define COPY_UNROLL 2u

#define COPY_INTEGER (NU__OP_DTYPE(NU_DTYPE_I32) | NU__OP_DTYPE(NU_DTYPE_U32) | NU__OP_DTYPE(NU_DTYPE_U8))

/* The repacks made once at load (nuvec/tensor.h; copy.comp's REPACK): Q4_0 -> Q4_0_SOA, a thread a
 * block, its scale to the row's scales and its 16 quant bytes to the row's runs; Q6_K -> Q6_K_SOA,
 * a thread a 16-bit half of a super-block, to its group's bytes or d. dst's checks (rank 2, rows
 * of a multiple of 256 elements, whole rows, Q6_K_SOA's whole groups) were made by nu__op_check;
 * src is any view of the source dtype of dst's shape. */
static nu_status repack_soa(nu_commands *c, nu_device *d, const nu_tensor *dst, const nu_tensor *src)
{
    const char *fn = "nu_op_copy";
    nu_dtype from = dst->dtype == NU_DTYPE_Q6_K_SOA ? NU_DTYPE_Q6_K : NU_DTYPE_Q4_0;
    if (src->dtype != from)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %s is made from %s only (src is %s)", fn,
                        nu_dtype_name(dst->dtype), nu_dtype_name(from), nu_dtype_name(src->dtype));
    nu_status st;
    if ((st = nu__op_no_alias(fn, dst, "src", src, false)) != NU_OK)
        return st;
    uint64_t blocks = nu_tensor_numel(dst) / nu_dtype_block_elements(from);
    if (!blocks)
        return NU_OK;
    /* (fewer than 2^32 / 256 super-blocks, so their halves fit 32 bits) */
    uint64_t threads = from == NU_DTYPE_Q6_K ? blocks * (nu_dtype_block_bytes(from) / 2) : blocks;
    nu_binding bind[2];
    uint32_t first[2];
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, src, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK)
        return st;
    struct {
        uint32_t count, first_dst, first_src, pad;
        uint32_t shape[4], stride[4];
    } push = {(uint32_t)nu_tensor_numel(dst), first[0], first[1], 0, {0}, {0}};
    uint32_t unused[4];
    nu__op_dims4(dst, push.shape, unused);
    nu__op_dims4(src, unused, push.stride);
    for (int i = 0; i < 3; i++) /* in blocks, as for dequantization */
        push.stride[i] /= nu_dtype_block_elements(from);
    uint32_t constants[5] = {nu__op_dtype_code(dst->dtype), nu__op_dtype_code(from), 0, COPY_LOCAL, COPY_UNROLL};
    nu_kernel *k;
    if ((st = nu__op_kernel(d, NU__K_copy, sizeof push, constants, 5, &k)) != NU_OK)
        return st;
    uint32_t groups[3];
    nu__op_groups(threads, COPY_LOCAL, groups);
    return nu_commands_dispatch(c, k, groups, bind, 2, &push, sizeof push);
}

/* U8 tensors are read and written as whole 32-bit words (the kernels use no 8-bit storage): the
 * word holding the last byte must lie inside the buffer. */
static nu_status whole_words(const char *name, const nu_tensor *t)
{
    uint64_t end = t->offset + nu_tensor_span_bytes(t);
    if ((end + 3) / 4 * 4 <= nu_buffer_size(t->buffer))
        return NU_OK;
    return nu__fail(nu_buffer_device(t->buffer), NU_ERROR_UNSUPPORTED,
                    "nu_op_copy: U8 %s ends %llu bytes into a buffer of %zu bytes, not a multiple of 4: U8 copies access "
                    "whole 32-bit words (no 8-bit storage)",
                    name, (unsigned long long)end, nu_buffer_size(t->buffer));
}

nu_status nu_op_copy(nu_commands *c, const nu_tensor *dst, const nu_tensor *src)
{
    const char *fn = "nu_op_copy";
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, NU__OP_FLOAT | COPY_INTEGER | NU__OP_REPACKED)) != NU_OK ||
        (st = nu__op_check(fn, "src", src, NU__OP_FLOAT | COPY_INTEGER | NU__OP_BLOCK | NU__OP_REPACKED)) != NU_OK ||
        (st = nu__op_contiguous(fn, "dst", dst)) != NU_OK || (st = nu__op_same_shape(fn, "dst", dst, "src", src)) != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(dst->buffer);
    if (NU__OP_REPACKED & NU__OP_DTYPE(dst->dtype))
        return repack_soa(c, d, dst, src);
    bool src_float = (NU__OP_FLOAT | NU__OP_BLOCK | NU__OP_REPACKED) & NU__OP_DTYPE(src->dtype);
    bool dst_float = NU__OP_FLOAT & NU__OP_DTYPE(dst->dtype);
    if (src_float != dst_float || (!src_float && src->dtype != dst->dtype))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: no conversion from %s to %s (floats and the block dtypes go to floats; Q4_0 to Q4_0_SOA, Q6_K "
                        "to Q6_K_SOA; I32, U32 and U8 to themselves)",
                        fn, nu_dtype_name(src->dtype), nu_dtype_name(dst->dtype));
    if ((st = nu__op_no_alias(fn, dst, "src", src, true)) != NU_OK)
        return st;
    uint64_t count = nu_tensor_numel(dst);
    if (!count)
        return NU_OK;
    if (src->dtype == NU_DTYPE_U8 && ((st = whole_words("dst", dst)) != NU_OK || (st = whole_words("src", src)) != NU_OK))
        return st;
    nu_binding bind[2];
    uint32_t first[2];
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, src, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK)
        return st;
    bool block = nu_dtype_block_elements(src->dtype) > 1;
    size_t es = nu_dtype_size(dst->dtype);
    bool dst_aligned = (uint64_t)first[0] * es % 16 == 0;
    bool fast = block ? dst_aligned
                      : nu_tensor_is_contiguous(src) && dst_aligned &&
                            (uint64_t)first[1] * nu_dtype_size(src->dtype) % 16 == 0;
    struct {
        uint32_t count, first_dst, first_src, pad;
        uint32_t shape[4], stride[4];
    } push = {(uint32_t)count, first[0], first[1], 0, {0}, {0}};
    uint32_t unused[4];
    nu__op_dims4(dst, push.shape, unused);
    nu__op_dims4(src, unused, push.stride);
    if (block) /* outer strides in blocks (multiples of a block's elements), so offsets stay in 32 bits */
        for (int i = 0; i < 3; i++)
            push.stride[i] /= nu_dtype_block_elements(src->dtype);
    /* Q4_0_SOA to F16 by groups of 8 read as 32-bit words (copy.comp's FAST 2) where the runs of
     * quants are 4-byte aligned: rows of a multiple of 64 elements (an even count of 2-byte
     * scales), the view's first half even. The 7B prefill's weight copies (a prefill pass copies
     * each matrix to F16 before its product) took 34 us for 4096 x 4096 the general way. */
    bool soa_blocks = src->dtype == NU_DTYPE_Q4_0_SOA && dst->dtype == NU_DTYPE_F16 && dst_aligned &&
                      push.shape[3] % 64 == 0 && first[1] % 2 == 0 && push.stride[2] % 2 == 0;
    /* Q4_K, Q5_K and Q6_K_SOA to F16 by groups read as aligned 32-bit words (FAST 3) where src is
     * contiguous from an even half: a prefill pass's copy of each K matrix before its product. */
    bool k_words = (src->dtype == NU_DTYPE_Q4_K || src->dtype == NU_DTYPE_Q5_K || src->dtype == NU_DTYPE_Q6_K_SOA) &&
                   dst->dtype == NU_DTYPE_F16 && dst_aligned && first[1] % 2 == 0 && nu_tensor_is_contiguous(src);
    uint32_t constants[5] = {nu__op_dtype_code(dst->dtype), nu__op_dtype_code(src->dtype),
                             soa_blocks ? 2u : k_words ? 3u : fast, COPY_LOCAL, COPY_UNROLL};
    nu_kernel *k;
    if ((st = nu__op_kernel(d, NU__K_copy, sizeof push, constants, 5, &k)) != NU_OK)
        return st;
    /* Threads: a step (8 elements, or a vector of bits) per UNROLL steps, enough for the tail;
     * elements, or U8's words, one a thread on the general path. */
    uint64_t threads;
    if (soa_blocks)
        threads = count / 8;
    else if (block)
        threads = (count / 8 + COPY_UNROLL - 1) / COPY_UNROLL;
    else if (fast) {
        uint64_t per = src->dtype == dst->dtype ? 16 / es : 8;
        threads = (count / per + COPY_UNROLL - 1) / COPY_UNROLL;
        if (threads < per) /* fewer elements than a step: the tail still needs threads */
            threads = per;
    } else
        threads = src->dtype == NU_DTYPE_U8 ? count / 4 + 2 : count;
    uint32_t groups[3];
    nu__op_groups(threads, COPY_LOCAL, groups);
    return nu_commands_dispatch(c, k, groups, bind, 2, &push, sizeof push);
}
