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

/* Encodes the `n` floats `src` as `dtype` into `dst` (n / block elements blocks, back to back:
 * n / block elements x block bytes bytes; F32, F16 and BF16 too: copied, or rounded to nearest
 * even). The blocks are ggml's and decode as ggml decodes them (nu_dequantize, llama.cpp).
 *
 * Without importance (NULL), each block is chosen to be at least as close to src, in squared
 * error, as the block llama-quantize writes without an importance matrix: the same searches
 * (ggml's reference quantizers for Q8_0 .. Q5_1, Q4_K, Q5_K, Q6_K; its IQ4 searches), every
 * candidate judged as it will be stored. The RMS error each format gives on normal data is in
 * docs/quantize.md.
 *
 * importance, when given, has n entries: element i's weight, finite and >= 0 (llama.cpp's
 * importance matrix holds one per column: quantize a matrix row by row, n = the row's length,
 * passing the same array for each row). The searches then minimise the importance-weighted
 * squared error: the weights each format's search uses without importance (1 for the 32-element
 * formats, |x| + RMS for Q4_K and Q5_K, x^2 for Q6_K and IQ4) are multiplied by it. A block
 * whose importances are all 0 is quantized as without importance.
 *
 * Refusals, NU_ERROR_INVALID_ARGUMENT with a message naming the problem: n not a multiple of the
 * block, a dtype not above, src or dst NULL with n > 0, an element that is not finite or an
 * importance that is negative or not finite (the message names its index; dst is not written),
 * and a value too large for the format: a block whose scale would not fit an IEEE half (roughly
 * magnitudes above 5e5 for Q4_0, 1e6 for Q5_0, 8e6 for Q8_0 and IQ4_NL, an offset above 65504
 * for Q4_1 and Q5_1; docs/quantize.md lists them), or an element beyond F16's or BF16's range
 * (the message names the element; dst is then all zeros). src and dst must not overlap, except
 * for F32, which copies. Tiny magnitudes quantize to zeros where their scale falls below a
 * half's smallest subnormal (6e-8): not an error. n = 0 does nothing. */
nu_status nu_quantize(nu_dtype dtype, const float *src, void *dst, uint64_t n, const float *importance);

NU_END_DECLS
#endif
