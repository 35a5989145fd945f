/* tensor.c: tensors as views of buffers (see nuvec/tensor.h). */
#include <string.h>

#include "core/error.h"
#include "memory/buffer.h"
#include "nuvec/tensor.h"

nu_tensor nu_tensor_make(nu_buffer *buffer, uint64_t offset, nu_dtype dtype, uint32_t rank, const int64_t *shape)
{
    nu_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = buffer;
    t.offset = offset;
    t.dtype = dtype;
    t.rank = rank;
    for (uint32_t i = 0; i < NU_TENSOR_DIMS; i++)
        t.shape[i] = 1;
    if (rank > NU_TENSOR_DIMS || !shape)
        return t; /* nu_tensor_check says why */
    int64_t stride = 1;
    for (uint32_t i = rank; i-- > 0;) {
        t.shape[i] = shape[i];
        t.strides[i] = stride;
        stride *= shape[i] > 0 ? shape[i] : 1;
    }
    return t;
}

uint64_t nu_tensor_numel(const nu_tensor *t)
{
    if (!t)
        return 0;
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->rank && i < NU_TENSOR_DIMS; i++)
        n *= t->shape[i] > 0 ? (uint64_t)t->shape[i] : 0;
    return n;
}

/* Elements from the first to the last one's position (the largest index's offset), +1. */
static uint64_t span_elements(const nu_tensor *t)
{
    if (nu_tensor_numel(t) == 0)
        return 0;
    uint64_t last = 0;
    for (uint32_t i = 0; i < t->rank; i++)
        last += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->strides[i];
    return last + 1;
}

uint64_t nu_tensor_span_bytes(const nu_tensor *t)
{
    if (!t)
        return 0;
    uint64_t n = span_elements(t);
    uint32_t per = nu_dtype_block_elements(t->dtype);
    if (!n || !per)
        return 0;
    /* Block dtypes: whole blocks (the last element ends its block). */
    return (n + per - 1) / per * nu_dtype_block_bytes(t->dtype);
}

bool nu_tensor_is_contiguous(const nu_tensor *t)
{
    if (!t)
        return false;
    if (nu_tensor_numel(t) == 0)
        return true; /* no element: nothing is out of place */
    int64_t stride = 1;
    for (uint32_t i = t->rank; i-- > 0;) {
        if (t->shape[i] != 1 && t->strides[i] != stride)
            return false;
        stride *= t->shape[i];
    }
    return true;
}

nu_status nu_tensor_check(const nu_tensor *t, const char *what)
{
    if (!what)
        what = "tensor";
    if (!t)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL tensor", what);
    nu_status st = nu__buffer_check(t->buffer, what);
    if (st != NU_OK)
        return st;
    nu_device *d = t->buffer->device;
    if ((unsigned)t->dtype >= NU_DTYPE_COUNT || !nu_dtype_block_bytes(t->dtype))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: unknown dtype %d", what, (int)t->dtype);
    if (t->rank < 1 || t->rank > NU_TENSOR_DIMS)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: rank %u (1 to %d)", what, t->rank, NU_TENSOR_DIMS);
    /* Sizes are bounded so that no sum below overflows: 2^40 elements a dimension. */
    const int64_t limit = (int64_t)1 << 40;
    for (uint32_t i = 0; i < t->rank; i++) {
        if (t->shape[i] < 0 || t->shape[i] > limit)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: dimension %u has size %lld", what, i,
                            (long long)t->shape[i]);
        if (t->strides[i] < 0 || t->strides[i] > limit)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: dimension %u has stride %lld", what, i,
                            (long long)t->strides[i]);
    }
    uint32_t per = nu_dtype_block_elements(t->dtype);
    if (per > 1) {
        int64_t last = t->shape[t->rank - 1];
        if (t->strides[t->rank - 1] != 1 || last % per)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                            "%s: a %s tensor's last dimension is contiguous and a multiple of %u (it is %lld, "
                            "stride %lld)", what, nu_dtype_name(t->dtype), per, (long long)last,
                            (long long)t->strides[t->rank - 1]);
        for (uint32_t i = 0; i + 1 < t->rank; i++)
            if (t->strides[i] % per)
                return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                                "%s: a %s tensor's strides are whole blocks, multiples of %u elements (dimension %u's "
                                "is %lld)", what, nu_dtype_name(t->dtype), per, i, (long long)t->strides[i]);
    }
    /* Q4_0_SOA's layout is per row of the matrix (scales, then quants): only whole rows of a
     * rank-2 matrix whose rows hold whole groups of 8 blocks (16-byte aligned runs) are views of it.
     * Q6_K_SOA's groups of 8 super-blocks run through the tensor's elements: whole rows again, and
     * whole groups. */
    if (t->dtype == NU_DTYPE_Q4_0_SOA || t->dtype == NU_DTYPE_Q6_K_SOA) {
        const char *name = nu_dtype_name(t->dtype);
        if (t->rank != 2)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: a %s tensor has rank 2 (it has %u)", what, name, t->rank);
        if (t->shape[1] % 256)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                            "%s: a %s tensor's rows are a multiple of 256 elements (K is %lld)", what, name,
                            (long long)t->shape[1]);
        if (t->strides[0] != t->shape[1] && t->shape[1] > 0)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                            "%s: a %s view has whole rows (row stride %lld elements, rows of %lld): columns "
                            "cannot be sliced", what, name, (long long)t->strides[0], (long long)t->shape[1]);
        if (t->dtype == NU_DTYPE_Q6_K_SOA && t->shape[0] * (t->shape[1] / 256) % 8)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                            "%s: a Q6_K_SOA tensor holds whole groups of 8 super-blocks (%lld rows of %lld have %lld)",
                            what, (long long)t->shape[0], (long long)t->shape[1],
                            (long long)(t->shape[0] * (t->shape[1] / 256)));
    }
    uint64_t span = nu_tensor_span_bytes(t);
    uint64_t size = t->buffer->size;
    if (span && (t->offset > size || span > size - t->offset))
        return nu__fail(d, NU_ERROR_OUT_OF_RANGE,
                        "%s: %llu bytes from offset %llu are past the end of its buffer (%llu bytes)", what,
                        (unsigned long long)span, (unsigned long long)t->offset, (unsigned long long)size);
    return NU_OK;
}

static nu_status bad_view(const nu_tensor *t, const char *fn, const char *why)
{
    return nu__fail(t && t->buffer ? nu_buffer_device(t->buffer) : NULL, NU_ERROR_INVALID_ARGUMENT, "%s: %s", fn, why);
}

nu_status nu_tensor_slice(const nu_tensor *t, uint32_t dim, int64_t start, int64_t length, nu_tensor *out)
{
    if (!t || !out)
        return bad_view(t, "nu_tensor_slice", "NULL tensor");
    if (dim >= t->rank || start < 0 || length < 0 || start > t->shape[dim] || length > t->shape[dim] - start)
        return bad_view(t, "nu_tensor_slice", "the range is outside the dimension");
    uint32_t per = nu_dtype_block_elements(t->dtype);
    int64_t skip = start * t->strides[dim];
    if (per > 1 && (skip % per || (dim == t->rank - 1 && length % per)))
        return bad_view(t, "nu_tensor_slice", "a block dtype is sliced at whole blocks (a view would split a block)");
    /* Q6_K_SOA's groups of 8 super-blocks run through the tensor: a slice of rows starts on one
     * (its end, and columns, are nu_tensor_check's). */
    if (t->dtype == NU_DTYPE_Q6_K_SOA && dim == 0 && skip / per % 8)
        return bad_view(t, "nu_tensor_slice", "a Q6_K_SOA tensor is sliced at whole groups of 8 super-blocks");
    nu_tensor r = *t;
    uint32_t bytes = nu_dtype_block_bytes(t->dtype);
    r.offset += (uint64_t)(skip / per) * bytes;
    r.shape[dim] = length;
    *out = r;
    return NU_OK;
}

nu_status nu_tensor_transpose(const nu_tensor *t, uint32_t a, uint32_t b, nu_tensor *out)
{
    if (!t || !out)
        return bad_view(t, "nu_tensor_transpose", "NULL tensor");
    if (a >= t->rank || b >= t->rank)
        return bad_view(t, "nu_tensor_transpose", "a dimension outside the tensor");
    if (nu_dtype_block_elements(t->dtype) > 1 && a != b && (a == t->rank - 1 || b == t->rank - 1))
        return bad_view(t, "nu_tensor_transpose", "a block dtype keeps its last dimension");
    nu_tensor r = *t;
    r.shape[a] = t->shape[b];
    r.shape[b] = t->shape[a];
    r.strides[a] = t->strides[b];
    r.strides[b] = t->strides[a];
    *out = r;
    return NU_OK;
}

nu_status nu_tensor_broadcast(const nu_tensor *t, uint32_t rank, const int64_t *shape, nu_tensor *out)
{
    if (!t || !out || !shape)
        return bad_view(t, "nu_tensor_broadcast", "NULL tensor or shape");
    if (rank < t->rank || rank > NU_TENSOR_DIMS)
        return bad_view(t, "nu_tensor_broadcast", "the rank is below the tensor's or above 4");
    nu_tensor r = *t;
    r.rank = rank;
    uint32_t lead = rank - t->rank;
    for (uint32_t i = 0; i < NU_TENSOR_DIMS; i++) {
        r.shape[i] = 1;
        r.strides[i] = 0;
    }
    for (uint32_t i = 0; i < rank; i++) {
        int64_t from = i < lead ? 1 : t->shape[i - lead];
        int64_t stride = i < lead ? 0 : t->strides[i - lead];
        if (from == shape[i]) {
            r.shape[i] = from;
            r.strides[i] = stride;
        } else if (from == 1) {
            r.shape[i] = shape[i];
            r.strides[i] = 0;
        } else {
            return bad_view(t, "nu_tensor_broadcast", "a dimension is neither 1 nor the target's size");
        }
    }
    if (nu_dtype_block_elements(t->dtype) > 1 && r.strides[rank - 1] != 1)
        return bad_view(t, "nu_tensor_broadcast", "a block dtype keeps its last dimension");
    *out = r;
    return NU_OK;
}

nu_status nu_tensor_reshape(const nu_tensor *t, uint32_t rank, const int64_t *shape, nu_tensor *out)
{
    if (!t || !out || !shape)
        return bad_view(t, "nu_tensor_reshape", "NULL tensor or shape");
    if (rank < 1 || rank > NU_TENSOR_DIMS)
        return bad_view(t, "nu_tensor_reshape", "rank 1 to 4");
    if (!nu_tensor_is_contiguous(t))
        return bad_view(t, "nu_tensor_reshape", "the tensor is not contiguous");
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return bad_view(t, "nu_tensor_reshape", "a negative size");
        n *= (uint64_t)shape[i];
    }
    if (n != nu_tensor_numel(t))
        return bad_view(t, "nu_tensor_reshape", "the number of elements differs");
    nu_tensor r = nu_tensor_make(t->buffer, t->offset, t->dtype, rank, shape);
    uint32_t per = nu_dtype_block_elements(t->dtype);
    if (per > 1 && shape[rank - 1] % per)
        return bad_view(t, "nu_tensor_reshape", "a block dtype's last dimension is a whole number of its blocks");
    *out = r;
    return NU_OK;
}
