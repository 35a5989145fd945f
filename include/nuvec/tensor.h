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
 * Block-quantized dtypes (GGUF's, ggml's layouts, little-endian; d, m, dmin are IEEE halves; the
 * elements of a block are consecutive along the last dimension; "nibble j" of a byte array qs is
 * qs[j] & 15 for j < 16 and qs[j - 16] >> 4 for j >= 16, per 32 elements):
 *   Q8_0, 32 elements, 34 bytes:  f16 d, int8 q[32].                 x[j] = d * q[j]
 *   Q4_0, 32 elements, 18 bytes:  f16 d, uint8 qs[16].               x[j] = d * (nibble j - 8)
 *   Q4_1, 32 elements, 20 bytes:  f16 d, f16 m, uint8 qs[16].        x[j] = d * nibble j + m
 *   Q5_0, 32 elements, 22 bytes:  f16 d, uint32 qh, uint8 qs[16].    x[j] = d * (q - 16),
 *                                 q = nibble j | (bit j of qh) << 4
 *   Q5_1, 32 elements, 24 bytes:  f16 d, f16 m, uint32 qh, qs[16].   x[j] = d * q + m, q as Q5_0's
 *   IQ4_NL, 32 elements, 18 bytes: f16 d, uint8 qs[16].              x[j] = d * V[nibble j], the
 *                                 codebook V = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13,
 *                                 25, 38, 53, 69, 89, 113} (ggml's kvalues_iq4nl)
 *   Super-blocks of 256 elements (the K quants), in sub-blocks:
 *   Q4_K, 144 bytes: f16 d, f16 dmin, uint8 scales[12], uint8 qs[128]. Eight sub-blocks of 32,
 *     each a 6-bit scale sc_s and min mn_s: for s < 4, sc = scales[s] & 63, mn = scales[s + 4] & 63;
 *     for s >= 4, sc = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4, mn = (scales[s + 4] >> 4)
 *     | (scales[s] >> 6) << 4. Element 64c + l (c < 4, l < 32) is the low nibble of qs[32c + l]
 *     (sub-block 2c), element 64c + 32 + l its high nibble (sub-block 2c + 1):
 *     x = (d * sc_s) * nibble - dmin * mn_s (each product rounded to F32, as ggml computes it)
 *   Q5_K, 176 bytes: Q4_K's d, dmin and scales, then uint8 qh[32], uint8 qs[128] (Q4_K's nibbles);
 *     element 64c + l's fifth bit is bit 2c of qh[l], element 64c + 32 + l's bit 2c + 1:
 *     x = (d * sc_s) * (nibble | fifth bit << 4) - dmin * mn_s
 *   Q6_K, 210 bytes: uint8 ql[128], uint8 qh[64], int8 scales[16], f16 d (last). Element
 *     128h + 32k + l (h < 2, k < 4, l < 32) has q = (low nibble of ql[64h + 32 (k & 1) + l] for k < 2,
 *     its high nibble for k >= 2) | (bits 2k..2k+1 of qh[32h + l]) << 4, and
 *     x = (d * scales[8h + 2k + l / 16]) * (q - 32)
 *   IQ4_XS, 136 bytes: f16 d, uint16 scales_h, uint8 scales_l[4], uint8 qs[128]. Sub-block s (32
 *     elements) holds IQ4_NL's nibbles in qs[16s..16s + 15] and the 6-bit scale ls = ((scales_l[s / 2]
 *     >> 4 (s % 2)) & 15) | ((scales_h >> 2s) & 3) << 4: x = (d * (ls - 32)) * V[nibble]
 *   Q4_0_SOA, 18 bytes a block as well, but not stored block by block: a rank-2 matrix of rows of
 *     K elements (K a multiple of 256), each row K / 32 * 18 bytes: first its K / 32 f16 scales d
 *     (block b's at byte 2b), then its K / 32 runs of 16 bytes (block b's qs[16], as in Q4_0, at
 *     byte K / 16 + 16b). Same values as Q4_0 (x[j] = d * ((qs[j] & 15) - 8), ...); rows and
 *     runs start 16-byte aligned when the tensor's offset is (K / 32 is a multiple of 8), so
 *     lanes reading consecutive runs load 16 bytes each, coalesced. Made from Q4_0 by
 *     nu_op_copy; read by nu_op_matvec(_fused) and nu_op_copy (to floats). Its views have rank 2,
 *     stride 1 and whole rows (strides[0] == shape[1]): slices of rows, never of columns.
 *   Q6_K_SOA, 210 bytes a super-block as well: Q6_K's super-blocks in groups of 8, in the order of
 *     the tensor's elements (row-major; a group may span rows), each group 1,680 bytes: first its 8
 *     super-blocks' first 208 bytes (ql[128], qh[64], scales[16], as in Q6_K), then their 8 f16 d.
 *     Super-block i of the tensor is at byte 1680 (i / 8) + 208 (i % 8), its d at 1680 (i / 8) +
 *     1664 + 2 (i % 8), so every super-block's bytes start 16-byte aligned when the tensor's offset
 *     is. Same values as Q6_K. Made from Q6_K by nu_op_copy; read by nu_op_matvec(_fused),
 *     nu_op_matmul and nu_op_copy (to floats). Its views have rank 2, stride
 *     1, whole rows of a multiple of 256 elements, and whole groups (rows x K / 256 a multiple of 8):
 *     slices of rows that start and end on a group.
 * The values are exactly what ggml's dequantization computes in F32 (products in the order
 * shown, each rounded). A tensor of a block dtype has its last dimension contiguous (stride 1)
 * and a whole number of blocks (a multiple of 32, or of 256 for Q4_K, Q5_K, Q6_K and IQ4_XS),
 * and every other stride a whole number of blocks too (no view splits a block); element (.., i)
 * is in block (offset_in_elements / B) at byte offset + (sum(i_k * strides[k]) / B) * block
 * bytes, B the block's elements (nu_dtype_block_elements). BF16 is the upper half of an IEEE
 * single (round to nearest even when written); F16 an IEEE half.
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
 * NU_ERROR_OUT_OF_RANGE past the buffer's end) with a message naming `what`. Q4_0_SOA and
 * Q6_K_SOA: also rank 2, whole rows, rows of a multiple of 256 elements; Q6_K_SOA whole groups of
 * 8 super-blocks (above). */
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
/* Elements [start, start + length) of dimension `dim` (a block dtype's at whole blocks; Q6_K_SOA's
 * at whole groups of 8 super-blocks). */
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
