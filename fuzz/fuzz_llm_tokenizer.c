/* fuzz_llm_tokenizer.c: libFuzzer target for the llm component's tokenizer (llm/tokenizer.c;
 * built with -DNUVEC_FUZZ=ON; `make fuzz-smoke`, `make fuzz`). The first byte picks the mode:
 *   even: the rest is text, tokenized against a small fixed vocabulary (byte tokens, U+2581,
 *         pieces with tied scores, a user-defined and an unused piece), with and without the
 *         space prefix; checks the promised bound on the count, ids in range, that decoding
 *         gives the text back (unless it holds a literal U+2581, which reads as a space), that
 *         token-by-token decoding agrees with the whole, and what nu_llm_utf8_complete says;
 *   odd:  the rest is a vocabulary (pieces separated by '\n'; each piece's first byte gives its
 *         type and score) followed, after a NUL, by a text: nu_llm_tokenizer_new must accept or
 *         refuse it cleanly, and a tokenizer it accepts must tokenize and decode any text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nuvec_llm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            abort();                                                                           \
    } while (0)

#define SP "\xE2\x96\x81"
#define MAX_PIECES 600

static char byte_text[256][7];
static nu_llm_piece pieces[MAX_PIECES];
static float scores[MAX_PIECES];
static int32_t types[MAX_PIECES];

/* <unk> <s> </s>, the 256 byte tokens: ids 0 .. 258. */
static uint32_t base_vocab(void)
{
    static const char *specials[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) {
        pieces[i] = (nu_llm_piece){specials[i], strlen(specials[i])};
        scores[i] = 0;
        types[i] = i ? NU_LLM_TOKEN_CONTROL : NU_LLM_TOKEN_UNKNOWN;
    }
    for (int b = 0; b < 256; b++) {
        static const char hex[] = "0123456789ABCDEF";
        char *t = byte_text[b];
        memcpy(t, "<0x", 3);
        t[3] = hex[b >> 4];
        t[4] = hex[b & 15];
        t[5] = '>';
        pieces[3 + b] = (nu_llm_piece){t, 6};
        scores[3 + b] = 0;
        types[3 + b] = NU_LLM_TOKEN_BYTE;
    }
    return 259;
}

/* Tokenizes and decodes `text`, checking what the header promises. */
static void exercise(const nu_llm_tokenizer *t, const char *text, size_t len, int add_bos, bool exact)
{
    size_t cap = 3 * len + 4, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    CHECK(ids);
    nu_status st = nu_llm_tokenize(t, text, len, add_bos, ids, cap, &n);
    CHECK(st == NU_OK && n <= cap);
    uint32_t count = nu_llm_tokenizer_count(t);
    for (size_t i = 0; i < n; i++)
        CHECK(ids[i] >= 0 && (uint32_t)ids[i] < count);
    size_t need = 0;
    st = nu_llm_detokenize(t, ids, n, NULL, 0, &need);
    CHECK(st == NU_ERROR_OUT_OF_RANGE);
    char *back = malloc(need + 1), *streamed = malloc(need + 1);
    CHECK(back && streamed);
    size_t got = 0;
    CHECK(nu_llm_detokenize(t, ids, n, back, need + 1, &got) == NU_OK && got == need && back[got] == 0);
    if (exact)
        CHECK(got == len && memcmp(back, text, len) == 0);
    size_t at = 0, max = nu_llm_tokenizer_max_piece(t);
    for (size_t i = 0; i < n; i++) {
        size_t one = 0;
        CHECK(nu_llm_token_to_text(t, ids[i], i ? ids[i - 1] : NU_LLM_NO_TOKEN, streamed + at, need - at, &one) ==
              NU_OK);
        CHECK(one <= max);
        at += one;
    }
    CHECK(at == got && memcmp(streamed, back, got) == 0);
    size_t ready = nu_llm_utf8_complete(back, got);
    CHECK(ready <= got && got - ready <= 3);
    free(ids);
    free(back);
    free(streamed);
}

static void fixed_vocabulary(const uint8_t *data, size_t size, bool prefix)
{
    static nu_llm_tokenizer *tok[2];
    if (!tok[prefix]) {
        uint32_t n = base_vocab();
        static const char *extra[] = {SP, "a", "b", "e", "ab", "ba", "aa", SP "a", SP "ab", "\xC3\xA9", "\xC3\xA9" "a",
                                      "e" SP, "abab", "\xE2\x98\x83", "<s>", "ee"};
        for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++, n++) {
            pieces[n] = (nu_llm_piece){extra[i], strlen(extra[i])};
            scores[n] = (float)(i % 4); /* ties */
            types[n] = i == 14 ? NU_LLM_TOKEN_USER_DEFINED : i == 15 ? NU_LLM_TOKEN_UNUSED : NU_LLM_TOKEN_NORMAL;
        }
        nu_llm_vocab v = {n, pieces, scores, types, 1, 2, 0, true, prefix};
        CHECK(nu_llm_tokenizer_new(&v, &tok[prefix]) == NU_OK); /* kept for the process */
    }
    bool literal_mark = size >= 3 && memmem(data, size, SP, 3) != NULL;
    exercise(tok[prefix], (const char *)data, size, -1, !literal_mark);
}

static void vocabulary_from_input(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t vocab_len = nul ? (size_t)(nul - data) : size;
    uint32_t n = (size && data[0] & 1) ? base_vocab() : 0; /* with or without the byte tokens */
    for (size_t i = 0; i < vocab_len && n < MAX_PIECES;) {
        const uint8_t *end = memchr(data + i, '\n', vocab_len - i);
        size_t len = end ? (size_t)(end - (data + i)) : vocab_len - i;
        uint8_t head = len ? data[i] : 0;
        pieces[n] = (nu_llm_piece){len ? (const char *)data + i + 1 : "", len ? len - 1 : 0};
        types[n] = head % 8;          /* 7 is out of range: refused */
        scores[n] = (float)(head >> 3) - 8;
        n++;
        i += len + 1;
    }
    nu_llm_vocab v = {n, pieces, scores, types, n > 1 ? 1 : NU_LLM_NO_TOKEN, NU_LLM_NO_TOKEN, n ? 0 : NU_LLM_NO_TOKEN,
                      n > 1, size > 1 && (data[1] & 1)};
    nu_llm_tokenizer *t = NULL;
    nu_status st = nu_llm_tokenizer_new(&v, &t);
    CHECK(st == NU_OK || st == NU_ERROR_FORMAT || st == NU_ERROR_INVALID_ARGUMENT);
    CHECK((st == NU_OK) == (t != NULL));
    CHECK(st == NU_OK || nu_llm_error_message()[0]);
    if (t) {
        size_t text = nul ? vocab_len + 1 : size;
        exercise(t, (const char *)data + text, size - text, -1, false);
        nu_llm_tokenizer_free(t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 1 << 16)
        return 0;
    if (data[0] & 1)
        vocabulary_from_input(data + 1, size - 1);
    else
        fixed_vocabulary(data + 1, size - 1, data[0] & 2);
    return 0;
}
