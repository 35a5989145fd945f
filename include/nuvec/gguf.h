/* nuvec/gguf.h: reading GGUF files (llama.cpp's model format), versions 2 and 3.
 *
 * A GGUF file is, little-endian: the magic "GGUF", a uint32 version, uint64 tensor and metadata
 * counts, the metadata (key/value pairs: a string key, a uint32 value type, the value), the
 * tensor infos (name, uint32 rank, rank uint64 dims innermost first, uint32 ggml type, uint64
 * offset into the data section), padding to the alignment (metadata key general.alignment,
 * default 32), and the data section. Strings are a uint64 byte length and that many bytes.
 *
 * nu_gguf_open maps the file (nuvec/mapped.h) and checks all of it before returning: the magic,
 * version 2 or 3 (1, an early format with 32-bit counts, and big-endian files are refused by
 * name), every count, string length and array length against the bytes left in the file,
 * value types, bools 0 or 1, arrays nested at most NU_GGUF_MAX_DEPTH deep, general.alignment a
 * UINT32 power of two, no duplicate key and no duplicate or empty tensor name (and no NUL byte in
 * a key or name), and for each tensor: a known ggml type, rank at most 4, each dim > 0 with the
 * element count below 2^63, the innermost dim a multiple of the type's block (32 for q8_0 and
 * q4_0), every size computation overflow-checked, an offset that is a multiple of the alignment,
 * its bytes inside the file and overlapping no other tensor. Anything else is NU_ERROR_FORMAT
 * with a message naming the path, the byte offset, the key or tensor and the problem; nothing is
 * read outside the file. NU_ERROR_IO when the file cannot be opened or mapped.
 *
 * Tensor types: nuvec reads f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K,
 * iq4_nl and iq4_xs (nu_dtype's layouts are GGUF's: nuvec/tensor.h), each tensor as it is (a
 * file mixing them per tensor gives views of each). A file with other known ggml types (q8_1,
 * q2_K, q3_K, q8_K, the other iq*, tq*, mxfp4, i8..i64, f64) still opens, so that tools can list
 * it: their infos have dtype NU_DTYPE_COUNT, and views of them are refused with
 * NU_ERROR_UNSUPPORTED naming the type.
 * Type numbers ggml never had or has removed from GGUF (4, 5, 31-33, 36-38, 40 and up) are
 * NU_ERROR_FORMAT at open: their sizes are unknown, so the file cannot be checked.
 *
 * Shapes are in nuvec order, outermost first: GGUF lists ne0 (the innermost, contiguous dim)
 * first, and the reader reverses it, so that a matrix GGUF lists as [in, out] is [out, in]
 * here, row-major, as nuvec tensors and nu_op_matvec's weights are.
 *
 * Metadata values are read in place: a string value is a pointer into the mapped file and a byte
 * length, NOT NUL-terminated (GGUF strings are not; they are meant to be UTF-8, which the reader
 * does not check). Keys and tensor names are NUL-terminated copies. Everything stays valid until
 * nu_gguf_close.
 *
 * Getters (nu_gguf_version, the counts, nu_gguf_tensor, nu_gguf_find_tensor, nu_gguf_has, ...)
 * accept NULL (and out-of-range indexes, NULL names and keys) and return 0, false or NULL;
 * nu_gguf_close returns NU_OK (NULL too): see nuvec/status.h.
 *
 * Thread safety: an opened file may be read from several threads at once; close it once. */
#ifndef NUVEC_GGUF_H
#define NUVEC_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "mapped.h"
#include "status.h"
#include "tensor.h"

NU_BEGIN_DECLS

/* Nesting of arrays of arrays: a top-level array is depth 1. */
#define NU_GGUF_MAX_DEPTH 8
/* GGUF (ggml) tensors have at most 4 dims, as nu_tensor. */
#define NU_GGUF_MAX_RANK 4

/* The metadata value types, numbered as in the file. */
typedef enum nu_gguf_type {
    NU_GGUF_UINT8 = 0,
    NU_GGUF_INT8 = 1,
    NU_GGUF_UINT16 = 2,
    NU_GGUF_INT16 = 3,
    NU_GGUF_UINT32 = 4,
    NU_GGUF_INT32 = 5,
    NU_GGUF_FLOAT32 = 6,
    NU_GGUF_BOOL = 7,
    NU_GGUF_STRING = 8,
    NU_GGUF_ARRAY = 9,
    NU_GGUF_UINT64 = 10,
    NU_GGUF_INT64 = 11,
    NU_GGUF_FLOAT64 = 12,
    NU_GGUF_TYPE_COUNT
} nu_gguf_type;

/* A metadata value (or an array's element). Fill one with nu_gguf_find, nu_gguf_kv or
 * nu_gguf_array_get; it stays valid until the file is closed. */
typedef struct nu_gguf_value {
    nu_gguf_type type;
    union {                   /* the scalar types */
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        bool b;
    } scalar;
    const char *string;       /* STRING: the bytes in the file, NOT NUL-terminated */
    uint64_t length;          /* STRING: bytes; ARRAY: elements */
    nu_gguf_type element_type; /* ARRAY: the elements' type (ARRAY for arrays of arrays) */
    const void *data;         /* ARRAY of a scalar type: the packed little-endian elements in the
                                 file (length x the type's size; not aligned); else NULL */
    const void *nu__index;    /* internal: element positions of string and array arrays */
    const void *nu__file;     /* internal */
} nu_gguf_value;

/* One tensor. */
typedef struct nu_gguf_tensor_info {
    const char *name;         /* NUL-terminated, valid until nu_gguf_close */
    uint32_t ggml_type;       /* the type number in the file: 0 f32, 1 f16, 2 q4_0, 8 q8_0, 30 bf16, ... */
    const char *type_name;    /* ggml's name of it: "f32", "q4_1", "q6_K", "iq2_xxs", ... */
    nu_dtype dtype;           /* the dtype of its layout (the types above); NU_DTYPE_COUNT for the
                                 types nuvec does not read (views of them are refused) */
    uint32_t rank;            /* 0 (one element) to 4 */
    uint64_t shape[NU_GGUF_MAX_RANK]; /* nuvec order: outermost first (GGUF's dims reversed);
                                         entries past rank are 1 */
    uint64_t offset;          /* of the first byte in the file (and in nu_gguf_buffer) */
    uint64_t size;            /* bytes */
} nu_gguf_tensor_info;

typedef struct nu_gguf nu_gguf;

/* Maps the file at `path` and checks it (see above). NU_ERROR_IO for a missing path, a
 * directory or an unreadable file; NU_ERROR_FORMAT for a malformed one. */
nu_status nu_gguf_open(nu_device *device, const char *path, nu_gguf **out);
/* Parses a whole file's bytes held in memory. `bytes` must outlive the result (values point
 * into it). No device is needed: views and nu_gguf_to_device are then refused. */
nu_status nu_gguf_parse(const void *bytes, size_t size, nu_gguf **out);
/* Unmaps the file (buffers made by nu_gguf_to_device stay valid). NU_OK (NULL is ignored). */
nu_status nu_gguf_close(nu_gguf *file);

/* 2 or 3. */
uint32_t nu_gguf_version(const nu_gguf *file);
/* general.alignment (32 when absent). */
uint32_t nu_gguf_alignment(const nu_gguf *file);
/* The data section's first byte in the file (the tensor infos' end, padded to the alignment). */
uint64_t nu_gguf_data_offset(const nu_gguf *file);

/* ---- metadata ---- */

uint64_t nu_gguf_kv_count(const nu_gguf *file);
/* Entry `index` in file order: its key (NUL-terminated; `key` may be NULL) and value.
 * NU_ERROR_OUT_OF_RANGE past the end. */
nu_status nu_gguf_kv(const nu_gguf *file, uint64_t index, const char **key, nu_gguf_value *out);
/* Whether the file has the metadata key `key` (tensors: nu_gguf_find_tensor). */
bool nu_gguf_has(const nu_gguf *file, const char *key);
/* The value of `key`. A missing key is NU_ERROR_FORMAT naming it (for a model loader, a
 * required key that is missing makes a malformed file); probe optional keys with nu_gguf_has. */
nu_status nu_gguf_find(const nu_gguf *file, const char *key, nu_gguf_value *out);

/* Typed getters. `fallback` NULL makes the key required (missing: NU_ERROR_FORMAT); otherwise a
 * missing key gives *fallback (which may be `out` itself: a default kept in place). A value of another type is NU_ERROR_FORMAT naming the key and
 * both types. Integers convert when the value fits exactly: get_u32 and get_u64 take any
 * integer type that holds a value in their range (negative or too large values are refused with
 * the value); get_f32 takes FLOAT32 and FLOAT64 (rounded); get_bool BOOL only. */
nu_status nu_gguf_get_u32(const nu_gguf *file, const char *key, const uint32_t *fallback, uint32_t *out);
nu_status nu_gguf_get_u64(const nu_gguf *file, const char *key, const uint64_t *fallback, uint64_t *out);
nu_status nu_gguf_get_f32(const nu_gguf *file, const char *key, const float *fallback, float *out);
nu_status nu_gguf_get_bool(const nu_gguf *file, const char *key, const bool *fallback, bool *out);
/* A STRING value: its bytes (in the file, NOT NUL-terminated) and length. A missing key with
 * a `fallback` (NUL-terminated) gives fallback and strlen(fallback). */
nu_status nu_gguf_get_string(const nu_gguf *file, const char *key, const char *fallback, const char **out,
                             uint64_t *length);

/* Element `index` of an ARRAY value, as a value (of any element type: scalars, strings, and
 * arrays for arrays of arrays). NU_ERROR_INVALID_ARGUMENT when `array` is not an array,
 * NU_ERROR_OUT_OF_RANGE past its end. */
nu_status nu_gguf_array_get(const nu_gguf_value *array, uint64_t index, nu_gguf_value *out);
/* String `index` of an array of strings (bytes in the file, NOT NUL-terminated): O(1), for
 * tokenizer vocabularies. NU_ERROR_FORMAT when the array's elements are not strings,
 * NU_ERROR_OUT_OF_RANGE past its end, NU_ERROR_INVALID_ARGUMENT when `array` is not an array. */
nu_status nu_gguf_array_string(const nu_gguf_value *array, uint64_t index, const char **out, uint64_t *length);

/* "UINT32", "STRING", "ARRAY", ... ("?" outside the enum). */
const char *nu_gguf_type_name(nu_gguf_type type);
/* ggml's name of a tensor type number ("f32", "q4_K", "iq2_xxs", ...; "?" when unknown). */
const char *nu_gguf_ggml_type_name(uint32_t ggml_type);

/* ---- tensors ---- */

uint64_t nu_gguf_tensor_count(const nu_gguf *file);
/* Tensor `index` in the order of the file's tensor infos. */
const nu_gguf_tensor_info *nu_gguf_tensor(const nu_gguf *file, uint64_t index);
/* The tensor named `name`, or NULL. */
const nu_gguf_tensor_info *nu_gguf_find_tensor(const nu_gguf *file, const char *name);

/* The mapped file (read-only, shared): tensors are its byte ranges. NULL when parsed from
 * memory. Owned by `file`. */
nu_buffer *nu_gguf_buffer(const nu_gguf *file);

/* The tensor named `name` as a row-major view of the mapped file (shape as in its info; a
 * rank-0 tensor is [1]). NU_ERROR_INVALID_ARGUMENT for an unknown name or a file parsed from
 * memory; NU_ERROR_UNSUPPORTED for a type nuvec does not read, naming it. */
nu_status nu_gguf_tensor_view(const nu_gguf *file, const char *name, nu_tensor *out);
/* The same view in another buffer at byte `offset` (a tensor moved by nu_gguf_to_device). Same
 * refusals, less the one for parsed files; the buffer's size is checked when ops record. */
nu_status nu_gguf_tensor_view_in(const nu_gguf *file, const char *name, nu_buffer *buffer, uint64_t offset,
                                 nu_tensor *out);

/* Moves the tensors named in `names` (all tensors, in file order, when names is NULL: count is
 * then ignored) into one new private buffer in one pass over the file (nu_buffer_move_ranges),
 * each at an offset aligned for binding: offsets[i] receives that of names[i] (of tensor i for
 * all; `offsets` may be NULL). NU_ERROR_INVALID_ARGUMENT names an unknown tensor. Tensors of
 * types nuvec does not read are moved too (they are bytes). */
nu_status nu_gguf_to_device(nu_gguf *file, const char *const *names, size_t count, const nu_move_options *options,
                            nu_buffer **out, uint64_t *offsets);

NU_END_DECLS
#endif
