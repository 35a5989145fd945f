/* json_vocab.h: a Hugging Face tokenizer.json read into a tokenizer description (json_vocab.c),
 * which hf_vocab.c completes from the folder's other files before building it. */
#ifndef NU_LLM_JSON_VOCAB_H
#define NU_LLM_JSON_VOCAB_H

#include <cjson/cJSON.h>

#include "tok.h"

#define NU_LLM__JSON_MAX_RX 12

typedef struct nu_llm__json_vocab {
    nu_llm__desc d;        /* its arrays point into the members below and into the cJSON tree */
    nu_llm_piece *pieces;
    float *scores;
    int32_t *types;
    uint8_t *flags;
    nu_llm_piece *merges;
    char *merge_text;      /* the merges' "left right" strings */
    const char *regex[NU_LLM__JSON_MAX_RX];
    int32_t *slots;        /* content -> id, open addressing (-1: empty) */
    size_t mask;
    const char *file;      /* for messages */
} nu_llm__json_vocab;

/* tokenizer.json's tree into jv (nu_llm__json_vocab_free it, also on failure; the tree must
 * outlive it). NU_ERROR_FORMAT, NU_ERROR_UNSUPPORTED with messages naming `file`. */
nu_status nu_llm__json_vocab_read(const cJSON *root, const char *file, nu_llm__json_vocab *jv);
void nu_llm__json_vocab_free(nu_llm__json_vocab *jv);
/* The id of the token whose text is s, or NU_LLM_NO_TOKEN. */
int32_t nu_llm__json_vocab_find(const nu_llm__json_vocab *jv, const char *s);
/* A token named by a JSON value: a string, or an object with "content" (tokenizer_config.json's
 * form); NU_LLM_NO_TOKEN when there is none or the vocabulary lacks it. */
int32_t nu_llm__json_vocab_token(const nu_llm__json_vocab *jv, const cJSON *name);

#endif
