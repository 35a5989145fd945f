/* nuvec_llm/tokenizer.h: text to token ids and back (libnuvec_llm; nuvec_llm.h includes it).
 *
 * One opaque nu_llm_tokenizer holds either of two kinds, named by nu_llm_tokenizer_model():
 *
 * "llama": the SentencePiece-style tokenizer (BPE with scores and byte fallback) of Llama 1 and 2,
 * Gemma, Phi-3 (GGUF tokenizer.ggml.model "llama", or a tokenizer.json whose BPE has
 * byte_fallback). Encoding: a space is put in front of each piece of text (add_space_prefix; not
 * for empty text), every ' ' becomes U+2581, the text is split into UTF-8 characters, and the
 * adjacent pair whose concatenation is a normal or user-defined piece of the highest score is
 * merged, leftmost first on ties, until no pair merges. A character left that is not a piece
 * becomes its UTF-8 bytes' byte tokens <0xXX> (or the unknown token when the vocabulary has no
 * byte token for a byte). Bytes that are not part of a well-formed UTF-8 character (RFC 3629: no
 * overlong forms, no surrogates, at most U+10FFFF) become byte tokens one by one and are never
 * merged. A literal U+2581 in the text reads as a space (as in llama.cpp and Hugging Face), so it
 * does not survive a round trip; nor does the space put in front of the text after a special token
 * (as llama.cpp: only the text's first piece loses it when decoded).
 *
 * "gpt2": byte-level BPE (Llama 3, Qwen, Mistral Nemo, SmolLM, DeepSeek, GPT-2, StarCoder: GGUF
 * tokenizer.ggml.model "gpt2", or a tokenizer.json with the ByteLevel pre-tokenizer). Each piece
 * of text is split by the pre-tokenizer's regular expressions (PCRE2 with Unicode properties;
 * chosen by GGUF's tokenizer.ggml.pre, or tokenizer.json's own), applied in order, each splitting
 * the pieces the one before made (a match and the text between two matches are both pieces).
 * A piece's bytes are written in GPT-2's byte alphabet (byte b as one code point), and adjacent
 * symbols are merged by the vocabulary's merges, the earliest merge first and the leftmost on
 * ties, until none applies: O(n log n) in the piece's length. With ignore_merges (Llama 3's
 * pre-tokenizers, tekken) a piece that is a token whole is that token. Bytes that are not valid
 * UTF-8 are kept: no pattern matches them, so they become pieces of their own and their byte
 * tokens (llama.cpp replaces each with U+FFFD instead). The text is not NFC-normalised (as in
 * llama.cpp). Pre-tokenizers by name: nu_llm_tokenizer_open's list; another name is refused.
 *
 * Special tokens written in the text (both kinds), as llama.cpp and Hugging Face split them before
 * the rest: user-defined tokens always; control and unknown tokens only with parse_special.
 * Longer tokens are found first; a token with lstrip/rstrip (tokenizer.json's flags; Phi-3's
 * GGUF files, as llama.cpp sets them) takes the whitespace before/after it along.
 *
 * End of generation: eos, eot, eom, FIM pad/repo/file-separator, the tokens whose text llama.cpp
 * treats as end of generation (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>,
 * </s>, <|eom_id|>, ...), and a folder's config.json / generation_config.json eos_token_id lists:
 * nu_llm_tokenizer_is_eog. Tokens llama.cpp recognises by text (eot, eom, FIM) become control
 * tokens, as there.
 *
 * Where nuvec differs from llama.cpp (0ad4a86; on llama.cpp's own test texts none does): invalid
 * UTF-8 is kept (above); pre-tokenizers use the models' own expressions where llama.cpp rewrites
 * them for std::regex (tekken, gpt-4o: \p{Lu} / \p{Ll} where llama.cpp counts every non-ASCII
 * letter as both cases; DeepSeek's classes that list U+3000, which llama.cpp's rewriting of
 * non-ASCII spaces hides from them); decoding does not "clean up" spaces (llama.cpp drops the
 * space of " ?", " ." and such for some vocabularies), so byte-level BPE decodes losslessly; and
 * SentencePiece decoding drops the leading space after bos too (as Hugging Face).
 *
 * Limits: a text of at most NU_LLM_MAX_TEXT bytes; at most NU_LLM_TOKENIZE_MAX_IDS(len) ids; a
 * pre-tokenizer's expressions match with PCRE2's default match limit and a JIT stack of up to
 * 8 MiB a call (beyond them the call fails, NU_ERROR_UNSUPPORTED; no expression here comes near
 * on texts of megabytes). Vocabularies of at most INT32_MAX tokens, pieces and merges as the
 * arrays give them; tokenizer.json files of at most 256 MiB.
 *
 * Thread safety: a tokenizer is immutable once made; any number of threads may use one at once.
 * A nu_llm_detokenizer (streaming) is used by one thread at a time. */
#ifndef NUVEC_LLM_TOKENIZER_H
#define NUVEC_LLM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GGUF's tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
typedef enum nu_llm_token_type {
    NU_LLM_TOKEN_UNDEFINED = 0,    /* treated as normal */
    NU_LLM_TOKEN_NORMAL = 1,       /* a piece of text that merges take part in */
    NU_LLM_TOKEN_UNKNOWN = 2,      /* <unk>: never produced by merges; decodes as U+2047 "⁇" */
    NU_LLM_TOKEN_CONTROL = 3,      /* <s>, </s>: never produced from text; decodes as "" */
    NU_LLM_TOKEN_USER_DEFINED = 4, /* split out of the text before the merges; decodes as its text */
    NU_LLM_TOKEN_UNUSED = 5,       /* never produced from text; decodes as its text */
    NU_LLM_TOKEN_BYTE = 6,         /* "<0xXX>": byte fallback; decodes as the byte 0xXX */
} nu_llm_token_type;

/* "No such token" for the bos, eos and unk ids. */
#define NU_LLM_NO_TOKEN (-1)

/* The longest text nu_llm_tokenize takes (bytes): positions after U+2581's expansion stay 32-bit. */
#define NU_LLM_MAX_TEXT 715827881u
/* The most ids a text of len bytes can give (bos and eos included): 3 * len + 4 without special
 * tokens in the text (a ' ' may become U+2581's 3 byte tokens), and no more than this with them
 * (SentencePiece puts a space in front of the text after each special token). */
#define NU_LLM_TOKENIZE_MAX_IDS(len) (4 * (size_t)(len) + 4)

/* One piece's text: UTF-8, not NUL-terminated (GGUF strings point into the file). */
typedef struct nu_llm_piece {
    const char *text;
    size_t length;
} nu_llm_piece;

/* A vocabulary as plain arrays (GGUF: tokenizer.ggml.tokens, .scores, .token_type, .bos_token_id,
 * .eos_token_id, .unknown_token_id, .add_bos_token, .add_space_prefix, .model, .pre, .merges,
 * .add_eos_token). nu_llm_tokenizer_new copies what it needs; the arrays may be freed after it
 * returns. Zero means SentencePiece ("llama") for the fields after add_space_prefix. */
typedef struct nu_llm_vocab {
    uint32_t count;              /* tokens, 1 .. INT32_MAX */
    const nu_llm_piece *pieces;  /* count pieces (gpt2: in GPT-2's byte alphabet, as GGUF has them) */
    const float *scores;         /* count scores (higher merges first; llama only); NULL: all 0 */
    const int32_t *types;        /* count nu_llm_token_type values; NULL: all normal */
    int32_t bos, eos, unk;       /* ids, or NU_LLM_NO_TOKEN */
    bool add_bos;                /* what tokenizing does by default */
    bool add_space_prefix;       /* llama: put a space in front of the text (Llama: true); gpt2:
                                  * each piece of text that does not start with ' ' gets one
                                  * (Hugging Face ByteLevel's add_prefix_space; GGUF: false) */
    const char *model;           /* NULL or "llama": SentencePiece; "gpt2": byte-level BPE */
    const char *pre;             /* gpt2: the pre-tokenizer's name (NULL: "default") */
    const nu_llm_piece *merges;  /* gpt2: merge_count "left right" pairs, the first merged first */
    uint32_t merge_count;
    bool add_eos;                /* what tokenizing does by default */
} nu_llm_vocab;

typedef struct nu_llm_tokenizer nu_llm_tokenizer;

/* Checks the vocabulary and builds a tokenizer. NU_ERROR_INVALID_ARGUMENT for NULL pointers, a
 * count of 0 or above INT32_MAX, ids out of range, add_bos without a bos (add_eos without an
 * eos); NU_ERROR_FORMAT for a type outside 0..6, a NaN score, a byte token whose piece is not
 * <0xXX> (hex digits, either case), a byte that has no token while unk is NU_LLM_NO_TOKEN, a
 * merge that is not two pieces joined by a space, or one whose parts or result are not tokens
 * (named by rank); NU_ERROR_UNSUPPORTED for another model or an unknown pre (named);
 * NU_ERROR_HOST_OUT_OF_MEMORY. Pieces that repeat another's text are kept for decoding;
 * encoding produces the lowest such id (llama) or the highest (gpt2, as llama.cpp). */
nu_status nu_llm_tokenizer_new(const nu_llm_vocab *vocab, nu_llm_tokenizer **out);

/* The tokenizer of a file or folder, with no device: a GGUF file (its tokenizer.ggml.* keys;
 * vocabulary-only files too; read through a private mapping), a Hugging Face folder or its
 * tokenizer.json (with tokenizer_config.json beside it for add_bos_token / add_eos_token,
 * bos_token / eos_token / unk_token and chat_template, and config.json / generation_config.json
 * for bos_token_id and eos_token_id). Pre-tokenizers (tokenizer.ggml.pre): default, llama3,
 * llama-v3, llama-bpe, falcon3, falcon-h1, pixtral, midm-2.0, lfm2, dbrx, smaug-bpe, qwen2,
 * deepseek-r1-qwen, stablelm2, hunyuan, megrez, qwen35, deepseek-llm, deepseek-coder,
 * deepseek-v3, falcon, starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b,
 * gpt-2, phi-2, jina-es, jina-de, jina-v2-es, jina-v2-de, jina-v1-en, jina-v2-code, roberta-bpe,
 * gigachat, mpt, olmo, jais, trillion, granite-docling, exaone4, mellum, modern-bert, poro-chat,
 * bloom, gpt3-finnish, viking, chatglm-bpe, glm4, tekken, chameleon, gpt-4o, llama4, minimax-m2,
 * seed-coder, bailingmoe, bailingmoe2, grok-2, superbpe, tiny_aya. From tokenizer.json: a BPE
 * model with a pre_tokenizer of Split (regex, "Isolated"), ByteLevel and Digits steps, normalizer
 * null or NFC (not applied), added_tokens with their lstrip / rstrip, bos / eos from the
 * TemplateProcessing post-processor. NU_ERROR_IO (no such file, no tokenizer.json in the folder),
 * NU_ERROR_FORMAT (malformed file, key or array, with the key), NU_ERROR_UNSUPPORTED (another
 * tokenizer model, pre-tokenizer, normalizer or step, named). */
nu_status nu_llm_tokenizer_open(const char *path, nu_llm_tokenizer **out);
void nu_llm_tokenizer_free(nu_llm_tokenizer *tok);

/* Getters (0 / NU_LLM_NO_TOKEN / false / "" for NULL). */
uint32_t nu_llm_tokenizer_count(const nu_llm_tokenizer *tok);
int32_t nu_llm_tokenizer_bos(const nu_llm_tokenizer *tok);
int32_t nu_llm_tokenizer_eos(const nu_llm_tokenizer *tok);
bool nu_llm_tokenizer_add_bos(const nu_llm_tokenizer *tok);
bool nu_llm_tokenizer_add_eos(const nu_llm_tokenizer *tok);
/* "llama" (SentencePiece) or "gpt2" (byte-level BPE). */
const char *nu_llm_tokenizer_model(const nu_llm_tokenizer *tok);
/* gpt2: the pre-tokenizer's name ("llama-bpe", "qwen2", ...; "tokenizer.json" for one read from
 * there); llama: "". */
const char *nu_llm_tokenizer_pre(const nu_llm_tokenizer *tok);
/* The chat template the file carries (GGUF tokenizer.chat_template, tokenizer_config.json's
 * chat_template: the "default" one of a list), NUL-terminated; NULL when there is none. */
const char *nu_llm_tokenizer_chat_template(const nu_llm_tokenizer *tok);

/* The special tokens a vocabulary names (NU_LLM_NO_TOKEN where it names none). */
typedef enum nu_llm_special {
    NU_LLM_SPECIAL_BOS,
    NU_LLM_SPECIAL_EOS,
    NU_LLM_SPECIAL_EOT,     /* end of turn: tokenizer.ggml.eot_token_id, or by text (<|eot_id|>, ...) */
    NU_LLM_SPECIAL_EOM,     /* end of message: <|eom_id|> */
    NU_LLM_SPECIAL_UNK,
    NU_LLM_SPECIAL_PAD,
    NU_LLM_SPECIAL_FIM_PRE, /* fill-in-the-middle: prefix, suffix, middle, pad, repo, file separator */
    NU_LLM_SPECIAL_FIM_SUF,
    NU_LLM_SPECIAL_FIM_MID,
    NU_LLM_SPECIAL_FIM_PAD,
    NU_LLM_SPECIAL_FIM_REP,
    NU_LLM_SPECIAL_FIM_SEP,
    NU_LLM_SPECIAL_COUNT
} nu_llm_special;
int32_t nu_llm_tokenizer_special(const nu_llm_tokenizer *tok, nu_llm_special which);

/* Whether generation ends at token `id` (see above; false for ids out of range). */
bool nu_llm_tokenizer_is_eog(const nu_llm_tokenizer *tok, int32_t id);
/* The end-of-generation ids in ascending order into ids[0 .. min(cap, n)); returns n, their
 * number (ids may be NULL when cap is 0). */
size_t nu_llm_tokenizer_eog(const nu_llm_tokenizer *tok, int32_t *ids, size_t cap);

/* Token `id`'s raw text as the vocabulary holds it (gpt2's normal tokens in GPT-2's byte
 * alphabet; "<|begin_of_text|>", "<s>" for bos: what a chat template writes), valid until the
 * tokenizer is freed, and its type (after the fix-ups above). NU_ERROR_INVALID_ARGUMENT for NULL
 * pointers or an id out of range (out is then {NULL, 0}). */
nu_status nu_llm_tokenizer_piece(const nu_llm_tokenizer *tok, int32_t id, nu_llm_piece *out);
nu_llm_token_type nu_llm_tokenizer_type(const nu_llm_tokenizer *tok, int32_t id); /* UNDEFINED out of range */
/* The id of the token whose raw text is text[0 .. len) (any type; the encoding's choice among
 * equal texts), or NU_LLM_NO_TOKEN. */
int32_t nu_llm_tokenizer_find(const nu_llm_tokenizer *tok, const char *text, size_t len);

/* ---- Encoding ---- */

/* Whether bos / eos are added. */
typedef enum nu_llm_add {
    NU_LLM_ADD_DEFAULT = 0, /* as the vocabulary says (nu_llm_tokenizer_add_bos / _add_eos) */
    NU_LLM_ADD_YES = 1,
    NU_LLM_ADD_NO = 2,
} nu_llm_add;

/* Zero means default. */
typedef struct nu_llm_tokenize_options {
    nu_llm_add add_bos;
    nu_llm_add add_eos;
    bool parse_special; /* control and unknown tokens written in the text are those tokens
                         * (default: they are text; user-defined tokens always are tokens) */
} nu_llm_tokenize_options;

/* Encodes `len` bytes of `text` (any bytes; NULL is fine when len is 0) into ids[0 .. *count).
 * options NULL means all defaults. When cap is too small: NU_ERROR_OUT_OF_RANGE with *count set
 * to the number needed (the one failure that leaves *count set; ids is then unspecified), so a
 * caller may retry with that (never more than NU_LLM_TOKENIZE_MAX_IDS(len)). Other failures:
 * NU_ERROR_INVALID_ARGUMENT (NULL pointers, bos or eos asked for that the vocabulary lacks, a
 * text over NU_LLM_MAX_TEXT bytes), NU_ERROR_HOST_OUT_OF_MEMORY, NU_ERROR_UNSUPPORTED when the
 * pre-tokenizer's regular expression engine gives up on the text (PCRE2's match or JIT stack
 * limit, named); *count is then 0. ids may be NULL when cap is 0 (to ask for the count). */
nu_status nu_llm_tokenize_ex(const nu_llm_tokenizer *tok, const char *text, size_t len,
                             const nu_llm_tokenize_options *options, int32_t *ids, size_t cap,
                             size_t *count);

/* nu_llm_tokenize_ex with add_bos: 1 puts bos first, 0 does not, negative follows the
 * vocabulary; never eos; no parse_special. */
nu_status nu_llm_tokenize(const nu_llm_tokenizer *tok, const char *text, size_t len, int add_bos,
                          int32_t *ids, size_t cap, size_t *count);

/* ---- Decoding ---- */

/* The bytes one token decodes to, after the token prev_id (NU_LLM_NO_TOKEN at the start), into
 * buf[0 .. *len) (not NUL-terminated). llama: normal pieces give their text with U+2581 as ' ',
 * and the first piece of the text (prev_id is NU_LLM_NO_TOKEN or bos) loses one leading space
 * when the vocabulary has add_space_prefix, as SentencePiece decodes; byte tokens give their one
 * byte. gpt2: normal tokens give the bytes their GPT-2 alphabet stands for (a code point outside
 * it as its own UTF-8), user-defined ones their text. Both: control tokens give nothing; see
 * nu_llm_token_type for the others. A byte token gives one byte of what may be a multi-byte
 * character: nu_llm_detokenizer puts them together for a caller that prints as it goes. Errors:
 * NU_ERROR_INVALID_ARGUMENT (NULL pointers, id or prev_id out of range), NU_ERROR_OUT_OF_RANGE
 * when cap is short, with *len set to the bytes needed (at most nu_llm_tokenizer_max_piece()). */
nu_status nu_llm_token_to_text(const nu_llm_tokenizer *tok, int32_t id, int32_t prev_id, char *buf,
                               size_t cap, size_t *len);

/* The most bytes nu_llm_token_to_text gives for any token (a buffer this long never fails). */
size_t nu_llm_tokenizer_max_piece(const nu_llm_tokenizer *tok);

/* Zero means default. */
typedef struct nu_llm_decode_options {
    bool special;   /* control and unknown tokens give their raw text ("<|eot_id|>") */
    bool raw_bytes; /* bytes that do not form valid UTF-8 are given as they are (default: each
                     * maximal invalid sequence becomes U+FFFD, so the text is valid UTF-8) */
} nu_llm_decode_options;

/* The text of ids[0 .. n), token by token as nu_llm_token_to_text gives it (control and unknown
 * tokens as options->special says), byte tokens put together, into buf[0 .. *len) followed by a
 * NUL (cap counts it); options NULL means defaults (valid UTF-8). NU_ERROR_OUT_OF_RANGE when cap
 * is short, with *len set to the length needed (without the NUL); other errors as
 * nu_llm_token_to_text's. */
nu_status nu_llm_detokenize_ex(const nu_llm_tokenizer *tok, const int32_t *ids, size_t n,
                               const nu_llm_decode_options *options, char *buf, size_t cap,
                               size_t *len);
/* nu_llm_detokenize_ex with raw_bytes: bytes that do not form valid UTF-8 are given as they are,
 * so that any text round-trips (llama: unless it holds U+2581). */
nu_status nu_llm_detokenize(const nu_llm_tokenizer *tok, const int32_t *ids, size_t n, char *buf,
                            size_t cap, size_t *len);

/* A streaming decoder: tokens in, valid UTF-8 out. It keeps the bytes of a character that later
 * tokens may complete (at most 3) and gives each maximal invalid sequence as U+FFFD, so that
 * everything it gives, put together, is nu_llm_detokenize_ex's text of the same tokens (with the
 * same options, raw_bytes ignored). One thread at a time. */
typedef struct nu_llm_detokenizer nu_llm_detokenizer;
/* options NULL means defaults. NU_ERROR_INVALID_ARGUMENT (NULL pointers), NU_ERROR_HOST_OUT_OF_MEMORY.
 * The tokenizer must outlive it. */
nu_status nu_llm_detokenizer_new(const nu_llm_tokenizer *tok, const nu_llm_decode_options *options,
                                 nu_llm_detokenizer **out);
void nu_llm_detokenizer_free(nu_llm_detokenizer *d);
/* Decodes token `id` after the ones pushed before: *text (NOT NUL-terminated, valid until the
 * next call on d) gets the *len bytes that are complete now, possibly none. NU_ERROR_INVALID_ARGUMENT
 * for NULL pointers or an id out of range (nothing is consumed; *text "" and *len 0). */
nu_status nu_llm_detokenizer_push(nu_llm_detokenizer *d, int32_t id, const char **text, size_t *len);
/* The end of the text: what is held back, as U+FFFD (a character that never completed); then
 * starts over as if new (the next token is the first of a text). */
nu_status nu_llm_detokenizer_flush(nu_llm_detokenizer *d, const char **text, size_t *len);

/* ---- UTF-8 ---- */

/* The length of the longest prefix of s[0 .. len) that does not end inside a UTF-8 character
 * that more bytes could still complete: what a streaming caller can print now. Bytes that can
 * never become valid UTF-8 count as complete (printed as they are). */
size_t nu_llm_utf8_complete(const char *s, size_t len);
/* s[0 .. len) with each maximal invalid UTF-8 sequence (Unicode's "maximal subpart": a lead byte
 * and the continuation bytes that could still follow it, or one stray byte) replaced by U+FFFD,
 * into out[0 .. *out_len) followed by a NUL (cap counts it): what a JSON writer may print. The
 * result is at most 3 * len bytes. NU_ERROR_OUT_OF_RANGE when cap is short (*out_len: the length
 * needed, without the NUL), NU_ERROR_INVALID_ARGUMENT for NULL pointers (s may be NULL when len
 * is 0, out when cap is 0). */
nu_status nu_llm_utf8_sanitize(const char *s, size_t len, char *out, size_t cap, size_t *out_len);
/* Whether s[0 .. len) is valid UTF-8 (RFC 3629). */
bool nu_llm_utf8_valid(const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif
