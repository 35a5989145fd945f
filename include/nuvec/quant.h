/* nuvec/quant.h: GGUF's block formats on the CPU: dequantizing blocks to floats, and (below)
 * quantizing floats to blocks.
 *
 * The formats are ggml's, byte for byte (nuvec/dtype.h names them, nuvec/tensor.h gives the
 * layouts of Q8_0 and Q4_0; the others are ggml-common.h's block_q4_1 ... block_iq4_xs, all
 * little-endian, every scale an IEEE half):
 *   32-element blocks:  Q8_0 (34 bytes), Q4_0 (18), Q4_1 (20), Q5_0 (22), Q5_1 (24), IQ4_NL (18)
 *   256-element super-blocks:  Q4_K (144), Q5_K (176), Q6_K (210), IQ4_XS (136)
 * and the plain F32, F16 and BF16. Q4_0_SOA is a row layout, not a run of blocks: it is not taken
 * here (nu_op_copy turns it into floats on the device).
 *
 * Thread safety: plain functions with no state; any number of threads may call them at once. */
#ifndef NUVEC_QUANT_H
#define NUVEC_QUANT_H

#include <stdint.h>

#include "dtype.h"
#include "status.h"

NU_BEGIN_DECLS

/* Decodes `n` elements of `dtype` (n / block elements blocks, back to back from `src`) into the
 * floats `dst`, exactly as ggml does: bit for bit the floats ggml's dequantize_row_* functions
 * (and its F16 / BF16 converters) give for the same bytes, with the same roundings in the same
 * order (products and sums of single-precision floats, no fused multiply-add). Scales that are
 * infinities or NaNs in the input give what ggml gives (infinities, NaNs): the bytes are decoded,
 * not judged. n = 0 does nothing. NU_ERROR_INVALID_ARGUMENT, with a message naming the problem,
 * when n is not a multiple of the dtype's block, when `dtype` is not one of the formats above,
 * or when src or dst is NULL with n > 0; dst is then left as it was. */
nu_status nu_dequantize(nu_dtype dtype, const void *src, float *dst, uint64_t n);

NU_END_DECLS
#endif
