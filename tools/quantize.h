/* quantize.h: `nuvec quantize`'s inputs (tools/quantize_in.c: a GGUF file; tools/quantize_hf.c: a
 * Hugging Face folder), seen by tools/quantize.c, which plans each tensor's type
 * (tools/quantize_mix.h) and writes the output. Inputs are memory-mapped: a tensor is a pointer
 * into a mapping, read while the output is written, never copied whole. */
#ifndef TOOLS_QUANTIZE_H
#define TOOLS_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf_write.h"
#include "nuvec.h"
#include "quantize_mix.h"

#define QZ_MAX_THREADS 64

typedef struct qz_request {
    const char *in, *out;    /* a GGUF file or a Hugging Face folder; the GGUF file to write */
    quant_options mix;       /* the file type (required) and llama-quantize's switches */
    uint32_t threads;        /* 0: one a CPU (at most QZ_MAX_THREADS) */
    bool allow_requantize;   /* quantized inputs are refused without it */
    FILE *plan;              /* each tensor's line ("[  3/ 21] name [shape] f32 -> Q4_K"); NULL: none */
    FILE *notes;             /* the input's notes (a tokenizer left out); NULL: none */
} qz_request;

typedef struct qz_result {
    size_t tensors;
    uint64_t in_bytes, out_bytes, elements; /* tensor data read and written (padding included), weights */
} qz_result;

/* Writes r->out from r->in (docs/quantize.md): to r->out.partial-PID, renamed when whole, so that
 * a failure leaves no r->out behind and an existing one untouched. Every failure is an nu_status
 * with nu_error_message(NULL) naming the file, tensor or key: NU_ERROR_IO (a missing input, a
 * write that failed), NU_ERROR_FORMAT (malformed input), NU_ERROR_UNSUPPORTED (another
 * architecture, a quantized input without allow_requantize, a type nuvec does not read),
 * NU_ERROR_INVALID_ARGUMENT (OUT is IN, a type set outright that does not fit, a non-finite or
 * too large weight). Thread safety: one call at a time per output path. */
nu_status qz_quantize(const qz_request *r, qz_result *result);

typedef struct qz_tensor {
    char name[96];           /* GGUF's name */
    uint32_t rank;
    uint64_t shape[NU_GGUF_MAX_RANK]; /* nuvec order (outermost first) */
    const uint8_t *data;     /* in a mapping */
    uint64_t size;           /* bytes */
    nu_dtype dtype;          /* of the data; NU_DTYPE_COUNT for a ggml type nuvec cannot decode */
    const char *type_name;   /* ggml's name of the data's type */
    nu_dtype current;        /* its type in a GGUF file: the data's (a Hugging Face 1-D tensor: F32,
                                as llama.cpp's converter writes it) */
    uint32_t rope_heads;     /* > 0: rows in transformers' rotate_half order, this many heads, to be
                                written in GGUF's interleaved order */
    /* the plan (tools/quantize.c) */
    nu_dtype out;
    char note[96];
} qz_tensor;

typedef struct qz_input qz_input;
struct qz_input {
    qz_tensor *tensors;
    size_t count;
    quant_model model;       /* what the mix needs */
    uint32_t alignment;      /* of the output: the input's general.alignment, or 0 (GGUF's 32) */
    char note[256];          /* said on stderr when not empty (a Hugging Face tokenizer left out) */
    /* Writes the output's metadata: the input's (or the converter's) with general.file_type and
     * general.quantization_version set. */
    nu_status (*metadata)(qz_input *in, gguf_writer *w, uint32_t file_type);
    void (*close)(qz_input *in);
};

/* A GGUF file of general.architecture llama (tools/quantize_in.c). Every failure is an nu_status
 * with nu_error_message(NULL) naming the file and the problem: NU_ERROR_IO, NU_ERROR_FORMAT, and
 * NU_ERROR_UNSUPPORTED for another architecture, a split file or a mixture of experts. */
nu_status qz_open_gguf(const char *path, qz_input **out);
/* A Hugging Face folder of a LlamaForCausalLM (tools/quantize_hf.c); the same statuses. */
nu_status qz_open_hf(const char *path, qz_input **out);

/* The file at `path` mapped read-only (*size 0 and *bytes NULL for an empty file); NU_ERROR_IO with
 * a message when it cannot be opened or mapped. qz_unmap undoes it. */
nu_status qz_map(const char *path, const uint8_t **bytes, uint64_t *size);
void qz_unmap(const uint8_t *bytes, uint64_t size);
/* Lets the kernel drop the mapped pages of bytes [0, size) from this process (a tensor read
 * whole), so that the resident size stays that of the chunks in flight. */
void qz_release(const uint8_t *bytes, uint64_t size);
/* The nu_dtype of a ggml type number (NU_DTYPE_COUNT for one nuvec does not decode). */
nu_dtype qz_dtype_of_ggml(uint32_t ggml_type);

#endif
