/* nuvec/safetensors.h: reading (and writing) safetensors weight files.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of JSON, then the data
 * section. The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the data section) and may hold a "__metadata__" object of strings.
 *
 * nu_safetensors_open maps the file (nuvec/mapped.h) and parses the header with cJSON. Every
 * offset, size and shape is checked against the file and the dtype, overflow included: the
 * header must fit in the file, be a JSON object of well-formed entries with known dtypes, each
 * tensor's byte count must equal the product of its shape times its dtype's size, and the
 * tensors must tile the data section exactly (no overlap, no gap, nothing past the end), as
 * the safetensors format requires. Anything else is NU_ERROR_FORMAT with a message naming the
 * tensor and the problem; nothing is read outside the file.
 *
 * A tensor is a view of the mapped file: nu_safetensors_buffer() at the tensor's offset and
 * size (bind it with nu_binding; its offset must meet the device's storage-buffer offset
 * alignment to be bound directly). nu_safetensors_to_device moves chosen tensors into one
 * private buffer in one pass, each at an aligned offset.
 *
 * Getters accept NULL (and out-of-range indexes, NULL names and keys) and return 0 or NULL;
 * nu_safetensors_close returns NU_OK (NULL too): see nuvec/status.h.
 *
 * Thread safety: a parsed file may be read from several threads at once; close it once. */
#ifndef NUVEC_SAFETENSORS_H
#define NUVEC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "mapped.h"
#include "status.h"
#include "tensor.h"

NU_BEGIN_DECLS

#define NU_TENSOR_MAX_RANK 8

typedef struct nu_tensor_info {
    const char *name;     /* valid until nu_safetensors_close */
    nu_dtype dtype;
    uint32_t rank;        /* 0 for a scalar (one element) */
    uint64_t shape[NU_TENSOR_MAX_RANK];
    uint64_t offset;      /* of the first byte in the file (and in nu_safetensors_buffer) */
    uint64_t size;        /* bytes */
} nu_tensor_info;

typedef struct nu_safetensors nu_safetensors;

/* Maps the file at `path` and parses its header. NU_ERROR_IO for a missing path, a directory
 * or an unreadable file; NU_ERROR_FORMAT for a malformed one (see above). */
nu_status nu_safetensors_open(nu_device *device, const char *path, nu_safetensors **out);
/* Parses a whole file's bytes held in memory (`bytes` must outlive the result). No device is
 * needed: nu_safetensors_buffer gives NULL and nu_safetensors_to_device is refused. */
nu_status nu_safetensors_parse(const void *bytes, size_t size, nu_safetensors **out);
/* Unmaps the file (buffers made by nu_safetensors_to_device stay valid). NU_OK (NULL is
 * ignored). A second close is not detected: the file's structure is freed. */
nu_status nu_safetensors_close(nu_safetensors *file);

/* Tensors in file order (by offset). */
size_t nu_safetensors_count(const nu_safetensors *file);
const nu_tensor_info *nu_safetensors_tensor(const nu_safetensors *file, size_t index);
/* The tensor named `name`, or NULL. */
const nu_tensor_info *nu_safetensors_find(const nu_safetensors *file, const char *name);
/* The "__metadata__" value for `key`, or NULL. */
const char *nu_safetensors_metadata(const nu_safetensors *file, const char *key);
/* Bytes of the data section (the sum of the tensors' sizes). */
uint64_t nu_safetensors_data_size(const nu_safetensors *file);

/* The mapped file (read-only, shared): tensors are its byte ranges. NULL when parsed from
 * memory. Owned by `file`. */
nu_buffer *nu_safetensors_buffer(const nu_safetensors *file);

/* Moves the tensors named in `names` (all tensors when names is NULL: count is then ignored)
 * into one new private buffer in one pass over the file (nu_buffer_move_ranges), each at an
 * offset aligned for binding: offsets[i] receives that of names[i] (of tensor i for all
 * tensors; `offsets` may be NULL). NU_ERROR_INVALID_ARGUMENT names an unknown tensor. */
nu_status nu_safetensors_to_device(nu_safetensors *file, const char *const *names, size_t count,
                                   const nu_move_options *options, nu_buffer **out, uint64_t *offsets);

/* One tensor to write: `data` holds its bytes (product of shape x dtype size), or NULL for
 * zeros (written as a hole, so that large test files cost no disk). */
typedef struct nu_tensor_write {
    const char *name;
    nu_dtype dtype;
    uint32_t rank;
    uint64_t shape[NU_TENSOR_MAX_RANK];
    const void *data;
} nu_tensor_write;

/* Writes a safetensors file at `path` (created or replaced) holding the tensors in the given
 * order, with optional metadata (`metadata_count` key/value pairs: keys[i] -> values[i]).
 * NU_ERROR_INVALID_ARGUMENT for duplicate or empty names, unknown dtypes, sizes that overflow;
 * NU_ERROR_IO when the file cannot be written. */
nu_status nu_safetensors_write(const char *path, const nu_tensor_write *tensors, size_t count,
                               const char *const *metadata_keys, const char *const *metadata_values,
                               size_t metadata_count);

NU_END_DECLS
#endif
