/* source_int.h: what the two formats' files (source_gguf.c, source_hf.c) share with source.c, the
 * module's front: the source itself and each format's half of the calls. Not seen outside
 * llm/source/. */
#ifndef NU_LLM_SOURCE_INT_H
#define NU_LLM_SOURCE_INT_H

#include <cjson/cJSON.h>

#include "source.h"

#define NU_LLM_MAX_FILES 256

struct nu_llm_source {
    nu_llm_source_kind kind;
    nu_device *device;
    char *path;
    char arch[128];
    nu_llm_file_tensor *tensors;
    size_t tensor_count;
    /* GGUF */
    nu_gguf *gguf;
    /* Hugging Face */
    cJSON *config;
    nu_safetensors *files[NU_LLM_MAX_FILES];
    char *file_names[NU_LLM_MAX_FILES];
    size_t file_count;
};

/* Each format's open: fills s (kind, arch, tensors, its own fields); on failure the caller closes. */
nu_status nu_llm__gguf_open(nu_llm_source *s);
nu_status nu_llm__hf_open(nu_llm_source *s);
nu_status nu_llm__gguf_move(nu_llm_source *s, const nu_llm_file_tensor *const *t, size_t n, const char *name,
                            nu_buffer **buffers, size_t *count, uint32_t *where, uint64_t *offset);
nu_status nu_llm__hf_move(nu_llm_source *s, const nu_llm_file_tensor *const *t, size_t n, const char *name,
                          nu_buffer **buffers, size_t *count, uint32_t *where, uint64_t *offset);
void nu_llm__gguf_close(nu_llm_source *s);
void nu_llm__hf_close(nu_llm_source *s);

#endif
