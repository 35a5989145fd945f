/* file_tensors.h: moving a file's tensors into one device buffer, what every weight-file format
 * (safetensors.c, gguf.c) offers as its _to_device call. */
#ifndef NU_IO_FILE_TENSORS_H
#define NU_IO_FILE_TENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec/buffer.h"
#include "nuvec/device.h"
#include "nuvec/mapped.h"

/* Tensor i of a file's list (names[i] when names is given, else the file's i-th): where its bytes
 * are in the file. false when there is no such tensor. */
typedef bool (*nu__file_tensor_fn)(const void *file, const char *const *names, size_t i, uint64_t *offset,
                                   uint64_t *size);

/* Moves n tensors of `file` (mapped as `mapped`) into one new private buffer, each at an offset
 * the device may bind a storage buffer at (and 16-byte aligned), in file order of the list, in one
 * pass (nu_buffer_move_ranges): *out gets the buffer, offsets[i] (when not NULL) tensor i's offset.
 * The errors name `fn`: NU_ERROR_INVALID_ARGUMENT for a name that is not a tensor or sizes past a
 * buffer's, NU_ERROR_HOST_OUT_OF_MEMORY, and the allocation's and the move's. */
nu_status nu__file_tensors_to_device(nu_device *d, const char *fn, nu_buffer *mapped, const void *file,
                                     nu__file_tensor_fn tensor, const char *const *names, size_t n,
                                     const nu_move_options *options, nu_buffer **out, uint64_t *offsets);

#endif
