/* vocab.h: the tokenizer from a model's files (vocab.c). bos and eos: the model's ids, or
 * NU_LLM_NO_TOKEN. */
#ifndef NU_LLM_VOCAB_H
#define NU_LLM_VOCAB_H

#include "nuvec.h"
#include "nuvec_llm.h"

/* tokenizer.ggml.* of model "llama"; NU_ERROR_FORMAT / NU_ERROR_UNSUPPORTED with a message. */
nu_status nu_llm__vocab_gguf(const nu_gguf *f, nu_device *d, int32_t bos, int32_t eos, nu_llm_tokenizer **out);
/* The tokenizer.json file at `file`; NU_ERROR_IO when there is none. */
nu_status nu_llm__vocab_hf(const char *file, int32_t bos, int32_t eos, nu_llm_tokenizer **out);

#endif
