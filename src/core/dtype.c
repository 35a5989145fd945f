/* dtype.c: element types' sizes, names and shader codes, from the one table (core/dtype.h). */
#include "core/dtype.h"

#include <stddef.h>
#include <stdint.h>

#include "nuvec/tensor.h"

static const struct {
    const char *name;
    uint16_t block_bytes;   /* bytes per block (per element for the plain dtypes) */
    uint16_t block_elements;
    uint8_t code;
} dtypes[NU_DTYPE_COUNT] = {
#define NU__ROW(ID, NAME, ELEMENTS, BYTES, CODE) [NU_DTYPE_##ID] = {NAME, BYTES, ELEMENTS, CODE},
    NU__DTYPE_TABLE(NU__ROW)
#undef NU__ROW
};

/* Every enum value has a row (a row written twice is a -Woverride-init error). */
#define NU__ONE(ID, NAME, ELEMENTS, BYTES, CODE) +1
_Static_assert(0 NU__DTYPE_TABLE(NU__ONE) == NU_DTYPE_COUNT, "core/dtype.h's table must have a row per nu_dtype");
#undef NU__ONE
/* Block dtypes are whole 16-bit halves (the shaders index blocks in halves). */
#define NU__EVEN(ID, NAME, ELEMENTS, BYTES, CODE) _Static_assert((ELEMENTS) == 1 || (BYTES) % 2 == 0, #ID);
NU__DTYPE_TABLE(NU__EVEN)
#undef NU__EVEN

size_t nu_dtype_size(nu_dtype dtype)
{
    return (unsigned)dtype < NU_DTYPE_COUNT && dtypes[dtype].block_elements == 1 ? dtypes[dtype].block_bytes : 0;
}

uint32_t nu_dtype_block_elements(nu_dtype dtype) { return (unsigned)dtype < NU_DTYPE_COUNT ? dtypes[dtype].block_elements : 0; }

uint32_t nu_dtype_block_bytes(nu_dtype dtype) { return (unsigned)dtype < NU_DTYPE_COUNT ? dtypes[dtype].block_bytes : 0; }

const char *nu_dtype_name(nu_dtype dtype) { return (unsigned)dtype < NU_DTYPE_COUNT ? dtypes[dtype].name : "?"; }

uint32_t nu__dtype_code(nu_dtype dtype) { return (unsigned)dtype < NU_DTYPE_COUNT ? dtypes[dtype].code : NU__NO_CODE; }
