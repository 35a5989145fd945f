/* file_tensors.c: a file's tensors into one device buffer (file_tensors.h). */
#include "io/file_tensors.h"

#include "core/error.h"
#include "core/host.h"

nu_status nu__file_tensors_to_device(nu_device *d, const char *fn, nu_buffer *mapped, const void *file,
                                     nu__file_tensor_fn tensor, const char *const *names, size_t n,
                                     const nu_move_options *options, nu_buffer **out, uint64_t *offsets)
{
    *out = NULL;
    /* Each tensor where a storage buffer may be bound (and at least 16-byte aligned). */
    uint64_t align = nu_device_get_info(d)->min_storage_buffer_offset_alignment;
    if (align < 16)
        align = 16;
    if (n > SIZE_MAX / sizeof(nu_range_copy))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %zu tensors is too many", fn, n);
    nu_range_copy *r = nu__malloc((n ? n : 1) * sizeof *r);
    if (!r)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", fn);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t offset, size;
        if (!tensor(file, names, i, &offset, &size)) {
            nu__free(r);
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: no tensor named '%.80s'", fn,
                            names && names[i] ? names[i] : "(NULL)");
        }
        at = (at + align - 1) / align * align;
        if (size > SIZE_MAX - align - at) { /* the same tensor named very many times */
            nu__free(r);
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the tensors add up to more than a buffer can hold", fn);
        }
        r[i] = (nu_range_copy){.src_offset = offset, .dst_offset = at, .size = size};
        at += size;
    }
    nu_buffer *b;
    nu_status st = nu_buffer_new(d, (size_t)at, NU_STORAGE_PRIVATE, &b);
    if (st == NU_OK && (st = nu_buffer_move_ranges(b, mapped, r, n, options)) != NU_OK) {
        nu_buffer_free(b);
        b = NULL;
    }
    if (st == NU_OK) {
        for (size_t i = 0; offsets && i < n; i++)
            offsets[i] = r[i].dst_offset;
        *out = b;
    }
    nu__free(r);
    return st;
}
