/* fuzz_safetensors.c: libFuzzer target for the safetensors header parser (built with
 * -DNUVEC_FUZZ=ON; `make fuzz-smoke`, `make fuzz`). Parses the input as a whole file, then
 * reads back everything a parsed file offers, checking what the parser promises: tensors in
 * file order, tiling the data section inside the input, each found under its name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nuvec/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            abort();                                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nu_safetensors *st = NULL;
    nu_status s = nu_safetensors_parse(data, size, &st);
    CHECK(s == NU_OK || s == NU_ERROR_FORMAT);
    CHECK((s == NU_OK) == (st != NULL));
    if (!st)
        return 0;
    size_t count = nu_safetensors_count(st);
    uint64_t data_size = nu_safetensors_data_size(st);
    CHECK(data_size <= size - 8);
    uint64_t at = size - data_size; /* the data section's first byte */
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < count; i++) {
        const nu_tensor_info *t = nu_safetensors_tensor(st, i);
        CHECK(t && t->name && t->rank <= NU_TENSOR_MAX_RANK);
        CHECK(nu_dtype_size(t->dtype) != 0 && strcmp(nu_dtype_name(t->dtype), "?") != 0);
        CHECK(t->offset == at && t->size <= size - t->offset);
        uint64_t bytes = nu_dtype_size(t->dtype);
        for (uint32_t k = 0; k < t->rank; k++)
            bytes *= t->shape[k]; /* no overflow: the parser checked */
        CHECK(bytes == t->size);
        if (t->size) /* ASan: the first and last bytes are inside the input */
            sink ^= data[t->offset] ^ data[t->offset + t->size - 1];
        CHECK(nu_safetensors_find(st, t->name) == t);
        (void)nu_safetensors_metadata(st, t->name);
        at += t->size;
    }
    CHECK(at == size);
    CHECK(nu_safetensors_tensor(st, count) == NULL);
    (void)nu_safetensors_find(st, "__metadata__");
    (void)nu_safetensors_metadata(st, "format");
    (void)nu_safetensors_metadata(st, "");
    (void)sink;
    nu_safetensors_close(st);
    return 0;
}
