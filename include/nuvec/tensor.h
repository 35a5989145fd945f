/* nuvec/tensor.h: tensors as views of buffers (their element types: nuvec/dtype.h).
 *
 * A tensor is a value, not an object: a buffer, the byte offset of its first element, a dtype,
 * up to NU_TENSOR_DIMS dimensions and their strides. Nothing is allocated; the buffer must
 * outlive the GPU work that uses the view. Views are made by nu_tensor_make (row-major) and
 * changed by the view functions below (slices, transposes, broadcasts, reshapes); ops
 * (nuvec/ops.h) check them when they record.
 *
 * Shapes and strides are listed outermost first: shape[rank - 1] is the innermost (last)
 * dimension, the one reductions, norms and softmax run over. Strides count elements, and may
 * be 0 (a broadcast: every index reads the same element). Element (i0, .., i{r-1}) is at byte
 * offset + sum(i_k * strides[k]) * element size.
 *
 * Block-quantized dtypes (GGUF's, 32 elements a block, little-endian):
 *   Q8_0, 34 bytes a block:  f16 d, then int8 q[32];              x[j] = d * q[j]
 *   Q4_0, 18 bytes a block:  f16 d, then uint8 qs[16];            x[j] = d * ((qs[j] & 15) - 8),
 *                                                                 x[j + 16] = d * ((qs[j] >> 4) - 8)
 *                                                                 for j in 0..15
 *   Q4_0_SOA, 18 bytes a block as well, but not stored block by block: a rank-2 matrix of rows of
 *     K elements (K a multiple of 256), each row K / 32 * 18 bytes: first its K / 32 f16 scales d
 *     (block b's at byte 2b), then its K / 32 runs of 16 bytes (block b's qs[16], as in Q4_0, at
 *     byte K / 16 + 16b). Same values as Q4_0 (x[j] = d * ((qs[j] & 15) - 8), ...); rows and
 *     runs start 16-byte aligned when the tensor's offset is (K / 32 is a multiple of 8), so
 *     lanes reading consecutive runs load 16 bytes each, coalesced. Made from Q4_0 by
 *     nu_op_copy; read by nu_op_matvec(_fused) and nu_op_copy (to floats). Its views have rank 2,
 *     stride 1 and whole rows (strides[0] == shape[1]): slices of rows, never of columns.
 * (d is an IEEE half; the elements of a block are consecutive along the last dimension). A
 * tensor of a block dtype has its last dimension contiguous (stride 1) and a multiple of 32,
 * and every other stride a multiple of 32; element (.., i) is in block (offset_in_elements / 32)
 * at byte offset + (sum(i_k * strides[k]) / 32) * block bytes. BF16 is the upper half of an
 * IEEE single (round to nearest even when written); F16 an IEEE half.
 *
 * Thread safety: these are plain functions on values. */
#ifndef NUVEC_TENSOR_H
#define NUVEC_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "dtype.h"
#include "status.h"

NU_BEGIN_DECLS

#define NU_TENSOR_DIMS 4

typedef struct nu_tensor {
    nu_buffer *buffer;
    uint64_t offset;                 /* bytes, to element (0, .., 0) */
    nu_dtype dtype;
    uint32_t rank;                   /* 1 to NU_TENSOR_DIMS */
    int64_t shape[NU_TENSOR_DIMS];   /* outermost first; entries past rank are 1 */
    int64_t strides[NU_TENSOR_DIMS]; /* in elements; entries past rank are 0 */
} nu_tensor;

/* A row-major view of `buffer` from byte `offset`: shape (outermost first), strides of a
 * contiguous array. No checks (nu_tensor_check and every op do them). */
nu_tensor nu_tensor_make(nu_buffer *buffer, uint64_t offset, nu_dtype dtype, uint32_t rank, const int64_t *shape);
/* NU_OK when the view is well formed and inside its buffer: a live buffer, a known dtype, rank
 * 1..4, shapes >= 0 (0: an empty tensor), strides >= 0, the block-dtype rules above,
 * every element's bytes within the buffer. Otherwise NU_ERROR_INVALID_ARGUMENT (or
 * NU_ERROR_OUT_OF_RANGE past the buffer's end) with a message naming `what`. Q4_0_SOA: also
 * rank 2, whole rows, rows of a multiple of 256 elements (above). */
nu_status nu_tensor_check(const nu_tensor *t, const char *what);

/* Elements (the shape's product). */
uint64_t nu_tensor_numel(const nu_tensor *t);
/* Bytes from the first to one past the last element's byte (0 for an empty tensor). */
uint64_t nu_tensor_span_bytes(const nu_tensor *t);
/* Whether the elements are row-major and dense (no gaps, no broadcast); an empty tensor is.
 * These three accept NULL (0, false). */
bool nu_tensor_is_contiguous(const nu_tensor *t);

/* Views. Each returns NU_ERROR_INVALID_ARGUMENT (out left unchanged) for a dimension or range
 * outside the tensor. `out` may be `t`. */
/* Elements [start, start + length) of dimension `dim`. */
nu_status nu_tensor_slice(const nu_tensor *t, uint32_t dim, int64_t start, int64_t length, nu_tensor *out);
/* Dimensions a and b exchanged. */
nu_status nu_tensor_transpose(const nu_tensor *t, uint32_t a, uint32_t b, nu_tensor *out);
/* The tensor seen with shape `shape` (rank `rank` >= t's): dimensions of size 1 (and new
 * leading ones) repeat with stride 0; other sizes must match. */
nu_status nu_tensor_broadcast(const nu_tensor *t, uint32_t rank, const int64_t *shape, nu_tensor *out);
/* A contiguous tensor with another shape of the same number of elements. */
nu_status nu_tensor_reshape(const nu_tensor *t, uint32_t rank, const int64_t *shape, nu_tensor *out);

NU_END_DECLS
#endif
