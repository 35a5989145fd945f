/* dtype.c: element types' sizes and names (see nuvec/tensor.h). */
#include <stddef.h>
#include <stdint.h>

#include "nuvec/tensor.h"

static const struct {
    const char *name;
    uint16_t block_bytes;   /* bytes per block (per element for the plain dtypes) */
    uint16_t block_elements;
} dtypes[NU_DTYPE_COUNT] = {
    [NU_DTYPE_BOOL] = {"BOOL", 1, 1},       [NU_DTYPE_U8] = {"U8", 1, 1},   [NU_DTYPE_I8] = {"I8", 1, 1},
    [NU_DTYPE_F8_E5M2] = {"F8_E5M2", 1, 1}, [NU_DTYPE_F8_E4M3] = {"F8_E4M3", 1, 1},
    [NU_DTYPE_I16] = {"I16", 2, 1},         [NU_DTYPE_U16] = {"U16", 2, 1}, [NU_DTYPE_F16] = {"F16", 2, 1},
    [NU_DTYPE_BF16] = {"BF16", 2, 1},       [NU_DTYPE_I32] = {"I32", 4, 1}, [NU_DTYPE_U32] = {"U32", 4, 1},
    [NU_DTYPE_F32] = {"F32", 4, 1},         [NU_DTYPE_I64] = {"I64", 8, 1}, [NU_DTYPE_U64] = {"U64", 8, 1},
    [NU_DTYPE_F64] = {"F64", 8, 1},
    [NU_DTYPE_Q8_0] = {"Q8_0", 34, 32},     [NU_DTYPE_Q4_0] = {"Q4_0", 18, 32},
    [NU_DTYPE_Q4_0_SOA] = {"Q4_0_SOA", 18, 32},
    [NU_DTYPE_Q4_1] = {"Q4_1", 20, 32},     [NU_DTYPE_Q5_0] = {"Q5_0", 22, 32}, [NU_DTYPE_Q5_1] = {"Q5_1", 24, 32},
    [NU_DTYPE_Q4_K] = {"Q4_K", 144, 256},   [NU_DTYPE_Q5_K] = {"Q5_K", 176, 256},
    [NU_DTYPE_Q6_K] = {"Q6_K", 210, 256},   [NU_DTYPE_IQ4_NL] = {"IQ4_NL", 18, 32},
    [NU_DTYPE_IQ4_XS] = {"IQ4_XS", 136, 256},
};

size_t nu_dtype_size(nu_dtype dtype)
{
    return (unsigned)dtype < NU_DTYPE_COUNT && dtypes[dtype].block_elements == 1 ? dtypes[dtype].block_bytes : 0;
}

uint32_t nu_dtype_block_elements(nu_dtype dtype) { return (unsigned)dtype < NU_DTYPE_COUNT ? dtypes[dtype].block_elements : 0; }

uint32_t nu_dtype_block_bytes(nu_dtype dtype) { return (unsigned)dtype < NU_DTYPE_COUNT ? dtypes[dtype].block_bytes : 0; }

const char *nu_dtype_name(nu_dtype dtype) { return (unsigned)dtype < NU_DTYPE_COUNT ? dtypes[dtype].name : "?"; }
