/* source.h: a model's file or files, as the rest of the llm component sees them: metadata looked up
 * by name and tensors listed and moved to the device, with nothing of any architecture in it. Two
 * formats: a GGUF file (source_gguf.c: llama.cpp's keys "<arch>.<name>", tensors
 * "blk.N.attn_q.weight"), and a Hugging Face folder (source_hf.c: config.json and *.safetensors).
 * An architecture (llm/arch/) names each hyperparameter and tensor once for both formats
 * (nu_llm_key); the weights (llm/weights.c) move what the roster asks for. */
#ifndef NU_LLM_SOURCE_H
#define NU_LLM_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec.h"

typedef enum nu_llm_source_kind { NU_LLM_SOURCE_GGUF, NU_LLM_SOURCE_HF } nu_llm_source_kind;

/* One tensor of the file(s). */
typedef struct nu_llm_file_tensor {
    const char *name;
    nu_dtype dtype;    /* NU_DTYPE_COUNT for a type nuvec does not read (named by type_name) */
    const char *type_name;
    uint32_t rank;
    int64_t shape[NU_TENSOR_DIMS]; /* nuvec order, outermost first */
    uint32_t file;     /* which file (a folder's shards; 0 for GGUF) */
    uint64_t index;    /* in that file */
} nu_llm_file_tensor;

/* A hyperparameter's names: GGUF's after "<arch>." (NULL: GGUF files do not have it) and
 * config.json's (NULL: folders do not have it). */
typedef struct nu_llm_key {
    const char *gguf;
    const char *hf;
} nu_llm_key;

typedef struct nu_llm_source nu_llm_source;

/* Opens `path`: a file ending in .gguf, else a Hugging Face folder. Reads the metadata and the
 * tensor list only (no weight moves). NU_ERROR_IO, NU_ERROR_FORMAT with messages. */
nu_status nu_llm__source_open(nu_device *device, const char *path, nu_llm_source **out);
void nu_llm__source_close(nu_llm_source *s);

nu_llm_source_kind nu_llm__source_kind(const nu_llm_source *s);
const char *nu_llm__source_path(const nu_llm_source *s);
/* The architecture's name in the file: GGUF's general.architecture, or the first of config.json's
 * "architectures" ("LlamaForCausalLM"). */
const char *nu_llm__source_arch(const nu_llm_source *s);
/* The open GGUF file (NULL for a folder), for the tokenizer's and the chat template's readers. */
const nu_gguf *nu_llm__source_gguf(const nu_llm_source *s);

size_t nu_llm__source_tensor_count(const nu_llm_source *s);
const nu_llm_file_tensor *nu_llm__source_tensor(const nu_llm_source *s, size_t i);
const nu_llm_file_tensor *nu_llm__source_find(const nu_llm_source *s, const char *name);

/* Moves tensors[0 .. n) (from this source) to the device: into one new private buffer for a GGUF
 * file, one a shard for a folder; buffers[0 .. *buffer_count) receive them (the caller frees them;
 * buffers has room for one a file), where[i] the buffer index and offset[i] the byte offset of
 * tensors[i]. The buffers are named `name`. */
nu_status nu_llm__source_move(nu_llm_source *s, const nu_llm_file_tensor *const *tensors, size_t n, const char *name,
                              nu_buffer **buffers, size_t *buffer_count, uint32_t *where, uint64_t *offset);
/* Copies tensor t's bytes (as the file has them, `size` of them) into host memory at dst: for a
 * tensor kept in a host-visible buffer (the token embedding in host memory, weights.c). NU_ERROR_IO
 * where the file's mapping cannot be read, NU_ERROR_FORMAT where its byte count is not `size`. */
nu_status nu_llm__source_read(nu_llm_source *s, const nu_llm_file_tensor *t, void *dst, uint64_t size);
/* The most buffers nu_llm__source_move makes (the files). */
size_t nu_llm__source_files(const nu_llm_source *s);

/* Whether the metadata has the key (in this source's format). */
bool nu_llm__meta_has(const nu_llm_source *s, nu_llm_key key);
/* Typed values: `fallback` NULL makes the key required (NU_ERROR_FORMAT naming it); a key that this
 * format does not have (its name NULL) gives the fallback. Integers must be whole and in range,
 * numbers finite; messages name the key as the file spells it. fallback may be out. */
nu_status nu_llm__meta_u32(const nu_llm_source *s, nu_llm_key key, const uint32_t *fallback, uint32_t *out);
nu_status nu_llm__meta_f32(const nu_llm_source *s, nu_llm_key key, const float *fallback, float *out);
nu_status nu_llm__meta_bool(const nu_llm_source *s, nu_llm_key key, const bool *fallback, bool *out);
/* A string value into buf (NUL-terminated, cap bytes; a longer value is NU_ERROR_FORMAT). */
nu_status nu_llm__meta_string(const nu_llm_source *s, nu_llm_key key, const char *fallback, char *buf, size_t cap);
/* config.json's object value of `key` (NULL when absent, null or not a folder): for structured
 * values such as rope_scaling. */
const void *nu_llm__meta_hf_object(const nu_llm_source *s, const char *key);

/* What an architecture says of the metadata keys it does not read: every key of this source's
 * architecture prefix ("<arch>." in GGUF) or of config.json must be in `known` (read or harmless);
 * a key in `refused` is refused with its reason; any other is refused as unknown. A GGUF file split
 * over several files (split.count > 1) is refused too. NU_ERROR_UNSUPPORTED with the key named. */
typedef struct nu_llm_refused_key {
    nu_llm_key key;
    const char *what; /* "sliding-window attention" */
} nu_llm_refused_key;
nu_status nu_llm__meta_check(const nu_llm_source *s, const nu_llm_key *known, size_t known_count,
                             const nu_llm_refused_key *refused, size_t refused_count);

#endif
