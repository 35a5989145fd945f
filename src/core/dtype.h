/* dtype.h: the one table of nuvec's dtypes (nuvec/dtype.h; layouts in nuvec/tensor.h), for C and
 * GLSL. dtype.c builds nu_dtype_name, nu_dtype_size and the block sizes from it, and
 * cmake/dtype_glsl.c writes the shaders' header of dtype codes from it at build time
 * (dtypes.glsl, included by kernels/ops.glsl), so every shader and every op host take one set of
 * codes. Adding a block format is a row here (and nu_dtype's entry), a decoding function in
 * kernels/quant.glsl, and the ops' dtype sets (src/ops/op.h). */
#ifndef NU_CORE_DTYPE_H
#define NU_CORE_DTYPE_H

#include <stdint.h>

#include "nuvec/dtype.h"

/* The code of a dtype no shader reads. */
#define NU__NO_CODE 255

/* NU__DTYPE_TABLE(X) is X(ID, NAME, BLOCK_ELEMENTS, BLOCK_BYTES, CODE) for each dtype: ID its
 * enum's suffix (NU_DTYPE_<ID>; GLSL's NU_<ID>), NAME its spelling (safetensors' where it has
 * one), elements and bytes a block (1 and the element size for the plain dtypes), and the code
 * shaders take for it as a specialisation constant (U32 shares I32's: shaders move a 32-bit
 * integer's bits alike). The float dtypes' codes stay below 16: norm.c packs the codes of its
 * operands, all float, four bits each. */
#define NU__DTYPE_TABLE(X)                                                                      \
    X(BOOL, "BOOL", 1, 1, NU__NO_CODE)                                                          \
    X(U8, "U8", 1, 1, 4)                                                                        \
    X(I8, "I8", 1, 1, NU__NO_CODE)                                                              \
    X(F8_E5M2, "F8_E5M2", 1, 1, NU__NO_CODE)                                                    \
    X(F8_E4M3, "F8_E4M3", 1, 1, NU__NO_CODE)                                                    \
    X(I16, "I16", 1, 2, NU__NO_CODE)                                                            \
    X(U16, "U16", 1, 2, NU__NO_CODE)                                                            \
    X(F16, "F16", 1, 2, 1)                                                                      \
    X(BF16, "BF16", 1, 2, 2)                                                                    \
    X(I32, "I32", 1, 4, 3)                                                                      \
    X(U32, "U32", 1, 4, 3)                                                                      \
    X(F32, "F32", 1, 4, 0)                                                                      \
    X(I64, "I64", 1, 8, NU__NO_CODE)                                                            \
    X(U64, "U64", 1, 8, NU__NO_CODE)                                                            \
    X(F64, "F64", 1, 8, NU__NO_CODE)                                                            \
    X(Q8_0, "Q8_0", 32, 34, 5)                                                                  \
    X(Q4_0, "Q4_0", 32, 18, 6)                                                                  \
    X(Q4_0_SOA, "Q4_0_SOA", 32, 18, 7)                                                          \
    X(Q4_1, "Q4_1", 32, 20, 8)                                                                  \
    X(Q5_0, "Q5_0", 32, 22, 9)                                                                  \
    X(Q5_1, "Q5_1", 32, 24, 10)                                                                 \
    X(Q4_K, "Q4_K", 256, 144, 11)                                                               \
    X(Q5_K, "Q5_K", 256, 176, 12)                                                               \
    X(Q6_K, "Q6_K", 256, 210, 13)                                                               \
    X(IQ4_NL, "IQ4_NL", 32, 18, 14)                                                             \
    X(IQ4_XS, "IQ4_XS", 256, 136, 15)                                                           \
    X(Q6_K_SOA, "Q6_K_SOA", 256, 210, 16)

/* The shaders' code of `dtype` (the table's CODE; NU__NO_CODE for dtypes no shader reads and
 * values outside the enum). */
uint32_t nu__dtype_code(nu_dtype dtype);

#endif
