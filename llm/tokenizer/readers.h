/* readers.h: the tokenizer's readers, for the model's sources (llm/gguf.c, llm/hf.c) and for
 * nu_llm_tokenizer_open. Errors as nu_llm_tokenizer_open documents, with nu_llm__fail's message. */
#ifndef NU_LLM_TOKENIZER_READERS_H
#define NU_LLM_TOKENIZER_READERS_H

#include "nuvec/gguf.h"
#include "nuvec_llm.h"

/* The tokenizer of an open GGUF file's tokenizer.ggml.* keys (gguf_vocab.c). */
nu_status nu_llm__tokenizer_from_gguf(const nu_gguf *file, nu_llm_tokenizer **out);

/* The tokenizer of a Hugging Face folder: its tokenizer.json (NU_ERROR_IO naming it when there
 * is none), tokenizer_config.json, config.json and generation_config.json (json_vocab.c). */
nu_status nu_llm__tokenizer_from_folder(const char *folder, nu_llm_tokenizer **out);

/* A tokenizer.json at `path`, with the other files looked for in `folder` (json_vocab.c). */
nu_status nu_llm__tokenizer_from_json(const char *path, const char *folder, nu_llm_tokenizer **out);

#endif
