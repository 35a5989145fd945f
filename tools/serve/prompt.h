/* prompt.h: a conversation turned into the model's prompt, for `nuvec serve` and `nuvec chat`:
 * the model's chat template (nuvec_llm/chat.h), or a template file, or, for a model that has
 * none, ChatML (llama.cpp's server falls back to it too); then the prompt's token ids. */
#ifndef SERVE_PROMPT_H
#define SERVE_PROMPT_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "nuvec_llm.h"
#include "nuvec_llm/chat.h"

typedef struct chat_prompt {
    nu_llm_template *tpl;
    char *bos, *eos;              /* the texts the template gets as bos_token / eos_token */
    const nu_llm_tokenizer *tok;
    bool builtin;                 /* ChatML, because the model has no template */
    char origin[300];             /* where the template came from, for the log */
} chat_prompt;

/* The strings a reply ends at besides end-of-generation tokens, for the built-in ChatML (whose
 * markers a model without the template may write as text). */
extern char *const chat_prompt_builtin_stops[2];

/* template_path NULL: the model's template, else ChatML. 0, or -1 with msg set. */
int chat_prompt_open(chat_prompt *p, const char *model_path, const char *template_path, const nu_llm_tokenizer *tok,
                     char *msg, size_t cap);
void chat_prompt_close(chat_prompt *p);

/* The prompt of messages[0 .. len) (a JSON array), with the generation prompt; *text malloc'd.
 * 0, or an HTTP status with err set (400 for what the template refuses: its message). */
int chat_prompt_render(const chat_prompt *p, const char *messages, size_t len, char **text, api_error *err);

/* The ids of text (the template's bos text at its start becomes the bos token; with
 * add_special, bos as the vocabulary adds it); *ids malloc'd. 0, or a status with err set. */
int chat_prompt_tokenize(const nu_llm_tokenizer *tok, const char *bos, const char *text, size_t len, bool add_special,
                         int32_t **ids, uint32_t *n, api_error *err);

#endif
