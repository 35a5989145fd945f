/* nuvec/dtype.h: element types (dtypes) of tensors (nuvec/tensor.h, whose header gives the byte
 * layout of each, the block-quantized ones included) and of the device's matrix units
 * (nuvec/device.h).
 *
 * Thread safety: plain functions on values. */
#ifndef NUVEC_DTYPE_H
#define NUVEC_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

NU_BEGIN_DECLS

typedef enum nu_dtype {
    NU_DTYPE_BOOL,
    NU_DTYPE_U8,
    NU_DTYPE_I8,
    NU_DTYPE_F8_E5M2,
    NU_DTYPE_F8_E4M3,
    NU_DTYPE_I16,
    NU_DTYPE_U16,
    NU_DTYPE_F16,
    NU_DTYPE_BF16,
    NU_DTYPE_I32,
    NU_DTYPE_U32,
    NU_DTYPE_F32,
    NU_DTYPE_I64,
    NU_DTYPE_U64,
    NU_DTYPE_F64,
    NU_DTYPE_Q8_0, /* GGUF block quantization: see above (not a safetensors dtype) */
    NU_DTYPE_Q4_0,
    NU_DTYPE_Q4_0_SOA, /* Q4_0's values with each row's scales first, then its quants (nuvec/tensor.h):
                        * made from Q4_0 by nu_op_copy, read by nu_op_matvec (coalesced loads) */
    /* More of GGUF's block formats (ggml's layouts, nuvec/tensor.h; every op that reads blocks
     * takes them): 32-element blocks */
    NU_DTYPE_Q4_1,
    NU_DTYPE_Q5_0,
    NU_DTYPE_Q5_1,
    /* 256-element super-blocks (the K quants) */
    NU_DTYPE_Q4_K,
    NU_DTYPE_Q5_K,
    NU_DTYPE_Q6_K,
    /* non-linear 4-bit codebooks: 32-element blocks, 256-element super-blocks */
    NU_DTYPE_IQ4_NL,
    NU_DTYPE_IQ4_XS,
    NU_DTYPE_Q6_K_SOA, /* Q6_K's super-blocks regrouped so that each one's quant bytes are 16-byte
                        * aligned (nuvec/tensor.h): made from Q6_K by nu_op_copy, read by
                        * nu_op_matvec, nu_op_matmul and nu_op_copy */
    NU_DTYPE_COUNT
} nu_dtype;

/* Bytes per element (1 for BOOL and the F8 types); 0 for the block dtypes and values outside
 * the enum. */
size_t nu_dtype_size(nu_dtype dtype);
/* Elements per block: 32 for Q8_0, Q4_0, Q4_0_SOA, Q4_1, Q5_0, Q5_1 and IQ4_NL, 256 for Q4_K, Q5_K,
 * Q6_K, Q6_K_SOA and IQ4_XS (super-blocks), 1 for the others (0 outside the enum). These, the names and the
 * shaders' codes come from one table (src/core/dtype.h). */
uint32_t nu_dtype_block_elements(nu_dtype dtype);
/* Bytes per block: 34 for Q8_0, 18 for Q4_0, Q4_0_SOA and IQ4_NL, 20 for Q4_1, 22 for Q5_0, 24 for
 * Q5_1, 144 for Q4_K, 176 for Q5_K, 210 for Q6_K and Q6_K_SOA, 136 for IQ4_XS, nu_dtype_size for the others. */
uint32_t nu_dtype_block_bytes(nu_dtype dtype);
/* "F32", "BF16", "Q4_0", "Q4_0_SOA", ... (the safetensors spelling where there is one; "?" outside the enum). */
const char *nu_dtype_name(nu_dtype dtype);

NU_END_DECLS
#endif
