/* text.h: the text of one generation as tokens come: decoded token by token, searched for the
 * request's stop strings, and released only as far as no stop string can still begin and no
 * UTF-8 character is cut (what a stream may send now). Used by the engine's thread for each
 * request, and by `nuvec chat`. */
#ifndef SERVE_TEXT_H
#define SERVE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec_llm.h"

typedef struct gen_text {
    const nu_llm_tokenizer *tok; /* NULL: no text (token ids only) */
    int32_t prev;                /* the token before the next one (its leading space rule) */
    char *raw;                   /* the decoded bytes, NUL-terminated */
    size_t n, cap;
    size_t released;             /* raw[0 .. released) has been given out */
    size_t scanned;              /* raw[0 .. scanned) has been searched for stop strings */
    char *const *stop;           /* n_stop strings (not owned) */
    uint32_t n_stop;
    bool stopped;                /* a stop string was found: raw ends before it */
} gen_text;

/* prev: the last prompt token (NU_LLM_NO_TOKEN for none). */
void gen_text_init(gen_text *t, const nu_llm_tokenizer *tok, int32_t prev, char *const *stop, uint32_t n_stop);
void gen_text_free(gen_text *t);

/* Appends token id's text. false with a message in err when the tokenizer refuses the id or
 * memory runs out. After a stop string is found, raw is cut before it and t->stopped is set. */
bool gen_text_push(gen_text *t, int32_t id, char *err, size_t cap);

/* The bytes that may be given out now, raw[t->released .. returned): all of them when `final`
 * (the generation ended) or stopped, else those no stop string may still claim and that end on
 * a whole UTF-8 character. The caller sets t->released to what it took. */
size_t gen_text_ready(const gen_text *t, bool final);

/* Whether generation ends at token id: the tokenizer's end-of-generation tokens (eos) or the
 * config's eos. */
bool gen_text_is_eog(const nu_llm_tokenizer *tok, const nu_llm_config *cfg, int32_t id);

#endif
