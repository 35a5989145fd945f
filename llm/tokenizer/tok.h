/* tok.h: what the tokenizer's parts (llm/tokenizer/) share: the tokenizer's representation, the
 * description its readers fill, and each part's entry points. The public contract is
 * nuvec_llm/tokenizer.h; readers.h is what the model's sources call.
 *
 * Parts: vocab.c (building, checks, piece tables, getters), special.c (special tokens in text,
 * end of generation, llama.cpp's recognition by text), spm.c (SentencePiece encoding and
 * decoding), bpe.c (byte-level BPE: GPT-2's byte alphabet, merges), pretok.c (pre-tokenizers:
 * regular expressions by name, PCRE2), encode.c (nu_llm_tokenize*), decode.c (decoding, the
 * streaming detokenizer, UTF-8), gguf_vocab.c and json_vocab.c / hf_vocab.c (the readers). */
#ifndef NU_LLM_TOK_H
#define NU_LLM_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "nuvec_llm.h"

typedef enum nu_llm__kind { NU_LLM__SPM, NU_LLM__BPE } nu_llm__kind;

/* Per-token flags. */
#define NU_LLM__LSTRIP 1u /* as a special token in text, takes the whitespace before it */
#define NU_LLM__RSTRIP 2u /* ... and after it */
#define NU_LLM__EOG 4u    /* ends generation */

/* Text -> id, open addressing with linear probing (an empty slot holds -1). */
typedef struct nu_llm__table {
    int32_t *slots;
    size_t mask;
} nu_llm__table;

typedef struct nu_llm__pretok nu_llm__pretok; /* pretok.c */
typedef struct nu_llm__specials nu_llm__specials; /* special.c */

struct nu_llm_tokenizer {
    nu_llm__kind kind;
    uint32_t count;
    char *text;     /* every piece's bytes, one after the other */
    size_t *offset; /* piece i is text[offset[i] .. offset[i + 1]) */
    float *score;   /* SentencePiece */
    uint8_t *type;  /* nu_llm_token_type */
    uint8_t *flags; /* NU_LLM__* */
    int32_t special[NU_LLM_SPECIAL_COUNT];
    bool add_bos, add_eos, add_space_prefix;
    nu_llm__table merge_pieces; /* the pieces encoding produces (SPM: mergeable, first of equal
                                 * texts; BPE: every token, last of equal texts) */
    nu_llm__table all_pieces;   /* every token, the encoding's choice among equal texts */
    /* SentencePiece */
    int32_t byte_id[256]; /* the byte token <0xXX> of each byte, or NU_LLM_NO_TOKEN */
    bool all_bytes;       /* every byte has a byte token */
    /* Byte-level BPE */
    int32_t byte_token[256]; /* the token of each byte's GPT-2 code point, or NU_LLM_NO_TOKEN */
    uint64_t *merge_key;     /* (left << 32 | right) + 1, 0 for an empty slot */
    uint32_t *merge_rank;
    int32_t *merge_result;
    size_t merge_mask;
    bool ignore_merges;
    char *dec_text;     /* BPE: each token's decoded bytes (control ones: their raw text) */
    size_t *dec_offset;
    nu_llm__pretok *pre;
    char *pre_name;
    char *chat_template;
    nu_llm__specials *specials;
    int32_t *eog; /* ascending */
    size_t eog_count;
    size_t max_piece; /* the longest nu_llm_token_to_text */
    size_t max_raw;   /* the longest decoded text with special tokens as text */
};

/* What a reader knows about a vocabulary beyond nu_llm_vocab; nu_llm__desc_init sets the
 * defaults (no extra ids, no flags). */
typedef struct nu_llm__desc {
    nu_llm_vocab v;
    const uint8_t *flags;                 /* count NU_LLM__LSTRIP / RSTRIP values, or NULL */
    int32_t special[NU_LLM_SPECIAL_COUNT]; /* EOT .. FIM_SEP, PAD (bos, eos, unk come from v) */
    const int32_t *eog;                   /* more end-of-generation ids (config.json's lists) */
    size_t eog_count;
    const char *const *regex; /* BPE from tokenizer.json: its pre-tokenizer's expressions */
    size_t regex_count;
    bool ignore_merges;           /* with regex */
    const char *pre_name;         /* with regex: what nu_llm_tokenizer_pre says */
    const char *chat_template;    /* not NUL-terminated */
    size_t chat_template_len;
} nu_llm__desc;

void nu_llm__desc_init(nu_llm__desc *d);
/* Builds a tokenizer from a description (vocab.c): nu_llm_tokenizer_new's checks and errors. */
nu_status nu_llm__build(const nu_llm__desc *d, nu_llm_tokenizer **out);

/* ---- vocab.c ---- */
/* The last failure's message with `prefix` and ": " in front (nu_llm__fail cannot take its own
 * message as an argument: it formats into that buffer). */
nu_status nu_llm__fail_in(nu_status status, const char *prefix);
static inline size_t nu_llm__piece_len(const nu_llm_tokenizer *t, int32_t id)
{
    return t->offset[id + 1] - t->offset[id];
}
static inline const char *nu_llm__piece(const nu_llm_tokenizer *t, int32_t id) { return t->text + t->offset[id]; }
int32_t nu_llm__lookup(const nu_llm_tokenizer *t, const nu_llm__table *tab, const char *s, size_t n);
/* The byte a "<0xXX>" piece stands for, or -1. */
int nu_llm__byte_of_piece(const char *s, size_t n);
/* Grows *buf (of *cap elements of `size` bytes) to at least `need` elements, keeping its
 * contents; false when out of memory (the buffer is then unchanged). */
bool nu_llm__grow(void **buf, size_t *cap, size_t need, size_t size);

/* ---- UTF-8 (decode.c) ---- */
/* The length of the well-formed UTF-8 character at s[0 .. n) (RFC 3629), or 0 if there is none. */
size_t nu_llm__utf8_char(const uint8_t *s, size_t n);
/* Appends code point cp's UTF-8 (cp <= 0x10FFFF) to out; returns its length (1 .. 4). */
size_t nu_llm__utf8_put(uint32_t cp, char *out);

/* ---- Emitting ids (encode.c) ---- */
typedef struct nu_llm__out {
    int32_t *ids;
    size_t cap, n; /* n counts every id, also those past cap */
} nu_llm__out;
static inline void nu_llm__emit(nu_llm__out *o, int32_t id)
{
    if (o->n < o->cap)
        o->ids[o->n] = id;
    o->n++;
}

/* Scratch memory of one nu_llm_tokenize call, grown as pieces need it. */
typedef struct nu_llm__work {
    char *text;
    size_t text_cap;
    void *sym;
    size_t sym_cap;
    void *heap;
    size_t heap_cap;
    char *prefixed; /* a piece of text with the space in front (BPE's add_space_prefix) */
    size_t prefixed_cap;
    void *match; /* pretok.c's per-call state */
} nu_llm__work;
void nu_llm__work_free(nu_llm__work *w);

/* ---- spm.c ---- */
/* Encodes one piece of text (no special tokens in it), with the space in front if `prefix`. */
nu_status nu_llm__spm_encode(const nu_llm_tokenizer *t, const char *text, size_t len, bool prefix, nu_llm__work *w,
                             nu_llm__out *o);
/* Whether a token after `prev` starts the text, whose first piece loses its leading space. */
bool nu_llm__spm_strips(const nu_llm_tokenizer *t, int32_t prev);
/* What token `id` decodes to (without a leading space if `strip`) into dst (NULL: only the
 * length); returns the length. */
size_t nu_llm__spm_decode(const nu_llm_tokenizer *t, int32_t id, bool strip, bool special, char *dst);
nu_status nu_llm__spm_init(nu_llm_tokenizer *t);

/* ---- bpe.c ---- */
nu_status nu_llm__bpe_init(nu_llm_tokenizer *t, const nu_llm__desc *d);
/* Encodes one pre-tokenized word. */
nu_status nu_llm__bpe_word(const nu_llm_tokenizer *t, const char *word, size_t len, nu_llm__work *w, nu_llm__out *o);
/* Encodes one piece of text: pre-tokenizer, then each word. */
nu_status nu_llm__bpe_encode(const nu_llm_tokenizer *t, const char *text, size_t len, nu_llm__work *w,
                             nu_llm__out *o);
size_t nu_llm__bpe_decode(const nu_llm_tokenizer *t, int32_t id, bool special, char *dst);

/* ---- pretok.c ---- */
/* Whether `name` is a known pre-tokenizer, and its defaults: merges ignored for a word that is a
 * token (llama.cpp's ignore_merges), bos added (either may be NULL). */
bool nu_llm__pretok_info(const char *name, bool *ignore_merges, bool *add_bos);
/* The named pre-tokenizer (NU_ERROR_UNSUPPORTED, named, for an unknown one), or one from
 * expressions (tokenizer.json's). */
nu_status nu_llm__pretok_named(const char *name, nu_llm__pretok **out);
nu_status nu_llm__pretok_new(const char *const *regex, size_t count, nu_llm__pretok **out);
void nu_llm__pretok_free(nu_llm__pretok *p);
/* Calls word(user, start, len) for each pre-tokenized word of text[0 .. len), in order; stops at
 * the first failure it returns. */
nu_status nu_llm__pretok_split(const nu_llm__pretok *p, const char *text, size_t len, nu_llm__work *w,
                               nu_status (*word)(void *user, const char *s, size_t n), void *user);
void nu_llm__pretok_work_free(void *match);

/* ---- special.c ---- */
/* The end-of-generation set, llama.cpp's recognition by text and its fix-ups (types change). */
nu_status nu_llm__specials_init(nu_llm_tokenizer *t, const nu_llm__desc *d);
void nu_llm__specials_free(nu_llm__specials *s);
/* One piece of the text: a special token, or text (token NU_LLM_NO_TOKEN). */
typedef struct nu_llm__frag {
    size_t start, len;
    int32_t token;
} nu_llm__frag;
/* Splits text[0 .. len) at the special tokens written in it (user-defined always, control and
 * unknown with parse_special) into *frags (nu_llm__free it), *n of them. */
nu_status nu_llm__partition(const nu_llm_tokenizer *t, const char *text, size_t len, bool parse_special,
                            nu_llm__frag **frags, size_t *n);

#endif
