/* gguf_write.h: writing GGUF v3 files, streaming (for `nuvec make-gguf` and the tests; not part of
 * the library).
 *
 * Declare the metadata and the tensors first (held in memory: keys, values and infos, not tensor
 * data), then gguf_writer_begin writes the header, and gguf_writer_data takes the tensors' bytes
 * in declaration order, in pieces of any size, through a large buffer; the writer pads each
 * tensor to the alignment. gguf_writer_finish checks every declared byte came and closes the file.
 * A file of 13 GB costs the writer's 8 MiB buffer and the header, nothing more.
 *
 * Shapes are in nuvec order (outermost first, as nuvec/gguf.h reads them back): the writer lists
 * them reversed, as GGUF does. Every call returns an nu_status with a message
 * (tool_error_message(), tools/tool_error.h); after a failure the writer refuses further calls but must still be
 * freed.
 *
 * Thread safety: one writer, one thread at a time. */
#ifndef TOOLS_GGUF_WRITE_H
#define TOOLS_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec.h"

typedef struct gguf_writer gguf_writer;

/* A writer with `alignment` (0: GGUF's default 32, written without a general.alignment key;
 * otherwise a power of two, written as general.alignment). */
nu_status gguf_writer_new(uint32_t alignment, gguf_writer **out);
/* Closes the file (if open) without finishing it, and frees the writer. NULL is ignored. */
void gguf_writer_free(gguf_writer *w);

/* Metadata entries, in file order (keys are copied; duplicates are refused). */
nu_status gguf_writer_u32(gguf_writer *w, const char *key, uint32_t v);
nu_status gguf_writer_u64(gguf_writer *w, const char *key, uint64_t v);
nu_status gguf_writer_i32(gguf_writer *w, const char *key, int32_t v);
nu_status gguf_writer_f32(gguf_writer *w, const char *key, float v);
nu_status gguf_writer_bool(gguf_writer *w, const char *key, bool v);
nu_status gguf_writer_string(gguf_writer *w, const char *key, const char *v);
/* A string of `length` bytes (GGUF strings need no NUL: those of nuvec/gguf.h's reader copy as they are). */
nu_status gguf_writer_string_n(gguf_writer *w, const char *key, const char *v, uint64_t length);
/* A scalar of any type but STRING and ARRAY, its value in the host's layout (uint8_t, int16_t,
 * double, bool, ... as the type says). */
nu_status gguf_writer_scalar(gguf_writer *w, const char *key, nu_gguf_type type, const void *value);
/* An array of `count` scalars of `type` (not STRING or ARRAY), `elements` packed in the host's
 * (little-endian) layout: uint8_t, int32_t, float, ... as the type says. */
nu_status gguf_writer_array(gguf_writer *w, const char *key, nu_gguf_type type, const void *elements, uint64_t count);
/* An array of `count` strings, each strings[i] (NUL-terminated). */
nu_status gguf_writer_string_array(gguf_writer *w, const char *key, const char *const *strings, uint64_t count);
/* The same with each string's length in bytes. */
nu_status gguf_writer_string_array_n(gguf_writer *w, const char *key, const char *const *strings,
                                     const uint64_t *lengths, uint64_t count);

/* A tensor info: `dtype` one of F32, F16, BF16 or GGUF's block formats (Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, IQ4_NL: an inner dim that is a multiple of 32; Q4_K, Q5_K, Q6_K, IQ4_XS: of 256), 1 to 4
 * dims, nuvec order. Its data follows the previous tensor's, aligned. */
nu_status gguf_writer_tensor(gguf_writer *w, const char *name, nu_dtype dtype, uint32_t rank, const uint64_t *shape);
/* The ggml type number GGUF files give `dtype` (0 f32, 1 f16, 2 q4_0, ... 30 bf16); false for a
 * dtype GGUF files do not hold (Q4_0_SOA, the integer types). */
bool gguf_ggml_type(nu_dtype dtype, uint32_t *type);
/* Bytes of the tensors declared so far, padding included (what the data section will hold). */
uint64_t gguf_writer_data_size(const gguf_writer *w);

/* Creates (or replaces) `path` and writes the header. */
nu_status gguf_writer_begin(gguf_writer *w, const char *path);
/* The next `size` bytes of tensor data (tensors in declaration order; a piece may span tensors). */
nu_status gguf_writer_data(gguf_writer *w, const void *bytes, size_t size);
/* Checks every tensor's bytes were written, flushes and closes the file. */
nu_status gguf_writer_finish(gguf_writer *w);

/* Conversions the writer's users need: F32 to F16 and BF16 (round to nearest even), and one
 * block of 32 floats to Q8_0 (34 bytes) or Q4_0 (18 bytes), as ggml's reference quantizers do. */
uint16_t gguf_f32_to_f16(float x);
uint16_t gguf_f32_to_bf16(float x);
float gguf_f16_to_f32(uint16_t h);
/* n floats as F16 or BF16 (`dtype`) into out (2n bytes, little-endian), as the functions above. */
void gguf_f32_to_half_row(nu_dtype dtype, const float *x, uint8_t *out, size_t n);
void gguf_quantize_q8_0(const float *x, uint8_t *block);
void gguf_quantize_q4_0(const float *x, uint8_t *block);

#endif
