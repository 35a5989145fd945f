/* fuzz_llm_tokenizer.c: libFuzzer target for the llm component's tokenizers (llm/tokenizer/; built
 * with -DNUVEC_FUZZ=ON; `make fuzz-smoke`, `make fuzz`). The first byte's low three bits pick the
 * mode, its high bits (and the next byte) options:
 *   0, 2: the rest is text, tokenized against a small fixed SentencePiece vocabulary (byte tokens,
 *         U+2581, pieces with tied scores, a user-defined and an unused piece), with and without the
 *         space prefix (bit 1); checks the promised bound on the count, ids in range, that decoding
 *         gives the text back (unless it holds a literal U+2581, which reads as a space, or, with
 *         the prefix, the user-defined piece, after which the text gets a space too), that
 *         token-by-token decoding agrees with the whole, and what nu_llm_utf8_complete says;
 *   1, 3: the rest is a SentencePiece vocabulary (pieces separated by '\n'; each piece's first byte
 *         gives its type and score) followed, after a NUL, by a text: nu_llm_tokenizer_new must
 *         accept or refuse it cleanly, and a tokenizer it accepts must tokenize and decode any text;
 *   4:    the rest is text for a fixed byte-level BPE vocabulary (the 256 bytes, merges, a control
 *         and a user-defined token) with the next byte's pre-tokenizer (of the names nuvec knows):
 *         with and without parse_special; the count at most the text's length (+ bos, eos), and
 *         decoding (special tokens as text) gives the text back byte for byte;
 *   5:    the rest is a byte-level vocabulary: pieces, then after a NUL merges ("a b" lines),
 *         then after a NUL a text: accepted or refused cleanly, and used on the text if accepted;
 *   6:    the rest is a GGUF file: its tokenizer read (nu_llm__tokenizer_from_gguf), accepted or
 *         refused cleanly, and used on a fixed text if accepted;
 *   7:    the rest is bytes: nu_llm_utf8_sanitize, _valid, _complete, and the streaming detokenizer
 *         on ids made of them (fixed BPE vocabulary): every chunk valid UTF-8, all of them together
 *         nu_llm_detokenize_ex's text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nuvec/gguf.h"
#include "nuvec_llm.h"
#include "tokenizer/readers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            abort();                                                                           \
    } while (0)

#define SP "\xE2\x96\x81"
#define MAX_PIECES 600

static char byte_text[256][7];
static nu_llm_piece pieces[MAX_PIECES], merges[MAX_PIECES];
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

/* The text of ids as nu_llm_detokenize_ex gives it (malloc'ed), and its length. */
static char *decoded(const nu_llm_tokenizer *t, const int32_t *ids, size_t n, const nu_llm_decode_options *o,
                     size_t *len)
{
    size_t need = 0;
    CHECK(nu_llm_detokenize_ex(t, ids, n, o, NULL, 0, &need) == NU_ERROR_OUT_OF_RANGE);
    char *buf = malloc(need + 1);
    CHECK(buf);
    CHECK(nu_llm_detokenize_ex(t, ids, n, o, buf, need + 1, len) == NU_OK && *len == need && buf[need] == 0);
    return buf;
}

/* Streams ids through a detokenizer: each chunk valid UTF-8, all of them the sanitised text. */
static void stream(const nu_llm_tokenizer *t, const int32_t *ids, size_t n, bool special)
{
    nu_llm_decode_options o = {special, false};
    size_t want_len;
    char *want = decoded(t, ids, n, &o, &want_len);
    char *got = malloc(want_len + 1);
    CHECK(got);
    nu_llm_detokenizer *d;
    CHECK(nu_llm_detokenizer_new(t, &o, &d) == NU_OK);
    size_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *piece;
        size_t len;
        CHECK((i < n ? nu_llm_detokenizer_push(d, ids[i], &piece, &len) : nu_llm_detokenizer_flush(d, &piece, &len)) ==
              NU_OK);
        CHECK(nu_llm_utf8_valid(piece, len) && at + len <= want_len);
        memcpy(got + at, piece, len);
        at += len;
    }
    CHECK(at == want_len && memcmp(got, want, at) == 0 && nu_llm_utf8_valid(want, want_len));
    nu_llm_detokenizer_free(d);
    free(want);
    free(got);
}

/* Tokenizes and decodes `text`, checking what the header promises. */
static void exercise(const nu_llm_tokenizer *t, const char *text, size_t len, int add_bos, bool exact)
{
    size_t cap = NU_LLM_TOKENIZE_MAX_IDS(len), n = 0;
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
    stream(t, ids, n, false);
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
        nu_llm_vocab v = {.count = n, .pieces = pieces, .scores = scores, .types = types, .bos = 1, .eos = 2,
                          .unk = 0, .add_bos = true, .add_space_prefix = prefix};
        CHECK(nu_llm_tokenizer_new(&v, &tok[prefix]) == NU_OK); /* kept for the process */
    }
    /* A literal U+2581 reads as a space; the space put in front of the text after a special token
     * (the user-defined "<s>") decodes as one. */
    bool literal_mark = size >= 3 && memmem(data, size, SP, 3) != NULL;
    bool special = prefix && size >= 3 && memmem(data, size, "<s>", 3) != NULL;
    exercise(tok[prefix], (const char *)data, size, -1, !literal_mark && !special);
}

/* A vocabulary accepted or refused cleanly. */
static nu_llm_tokenizer *accept_or_refuse(const nu_llm_vocab *v)
{
    nu_llm_tokenizer *t = NULL;
    nu_status st = nu_llm_tokenizer_new(v, &t);
    CHECK(st == NU_OK || st == NU_ERROR_FORMAT || st == NU_ERROR_INVALID_ARGUMENT || st == NU_ERROR_UNSUPPORTED);
    CHECK((st == NU_OK) == (t != NULL));
    CHECK(st == NU_OK || nu_llm_error_message()[0]);
    return t;
}

/* Splits data[0 .. size) at '\n' into pieces (at most cap); returns their number. */
static uint32_t lines(const uint8_t *data, size_t size, nu_llm_piece *out, uint32_t cap)
{
    uint32_t n = 0;
    for (size_t i = 0; i < size && n < cap;) {
        const uint8_t *end = memchr(data + i, '\n', size - i);
        size_t len = end ? (size_t)(end - (data + i)) : size - i;
        out[n++] = (nu_llm_piece){(const char *)data + i, len};
        i += len + 1;
    }
    return n;
}

static void vocabulary_from_input(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t vocab_len = nul ? (size_t)(nul - data) : size;
    uint32_t n = (size && data[0] & 1) ? base_vocab() : 0; /* with or without the byte tokens */
    nu_llm_piece raw[MAX_PIECES];
    uint32_t k = lines(data, vocab_len, raw, MAX_PIECES - n);
    for (uint32_t i = 0; i < k; i++, n++) {
        uint8_t head = raw[i].length ? (uint8_t)raw[i].text[0] : 0;
        pieces[n] = (nu_llm_piece){raw[i].length ? raw[i].text + 1 : "", raw[i].length ? raw[i].length - 1 : 0};
        types[n] = head % 8; /* 7 is out of range: refused */
        scores[n] = (float)(head >> 3) - 8;
    }
    nu_llm_vocab v = {.count = n, .pieces = pieces, .scores = scores, .types = types,
                      .bos = n > 1 ? 1 : NU_LLM_NO_TOKEN, .eos = NU_LLM_NO_TOKEN, .unk = n ? 0 : NU_LLM_NO_TOKEN,
                      .add_bos = n > 1, .add_space_prefix = size > 1 && (data[1] & 1)};
    nu_llm_tokenizer *t = accept_or_refuse(&v);
    if (t) {
        size_t text = nul ? vocab_len + 1 : size;
        exercise(t, (const char *)data + text, size - text, -1, false);
        nu_llm_tokenizer_free(t);
    }
}

/* ---- Byte-level BPE ------------------------------------------------------------------------- */

static const char *const PRES[] = {"default", "llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder",
                                   "deepseek-v3", "falcon", "starcoder", "gpt-2", "bloom", "viking", "tekken",
                                   "chameleon", "gpt-4o", "seed-coder", "bailingmoe", "superbpe", "tiny_aya", "dbrx"};
#define N_PRES (sizeof PRES / sizeof PRES[0])

static char alpha[256][3];

/* The 256 bytes in GPT-2's alphabet as tokens 0 .. 255. */
static uint32_t byte_level_base(void)
{
    for (int b = 0, extra = 0; b < 256; b++) {
        bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int cp = keep ? b : 256 + extra++;
        char *t = alpha[b];
        if (cp < 0x80)
            t[0] = (char)cp, t[1] = 0;
        else
            t[0] = (char)(0xC0 | cp >> 6), t[1] = (char)(0x80 | (cp & 0x3F)), t[2] = 0;
        pieces[b] = (nu_llm_piece){t, strlen(t)};
        types[b] = NU_LLM_TOKEN_NORMAL;
    }
    return 256;
}

static nu_llm_tokenizer *fixed_bpe(size_t pre)
{
    static nu_llm_tokenizer *tok[N_PRES];
    if (!tok[pre]) {
        uint32_t n = byte_level_base();
        static const char *const extra[] = {"ab", "\xC4\xA0" "a", "\xC4\xA0" "ab", "aa", "\xC4\xA0\xC4\xA0", "12",
                                            "<|eot_id|>", "<tool>"};
        static const char *const pairs[] = {"a b", "\xC4\xA0 a", "\xC4\xA0\x61 b", "a a", "\xC4\xA0 \xC4\xA0", "1 2"};
        for (size_t i = 0; i < 8; i++, n++) {
            pieces[n] = (nu_llm_piece){extra[i], strlen(extra[i])};
            types[n] = i == 6 ? NU_LLM_TOKEN_CONTROL : i == 7 ? NU_LLM_TOKEN_USER_DEFINED : NU_LLM_TOKEN_NORMAL;
        }
        for (size_t i = 0; i < 6; i++)
            merges[i] = (nu_llm_piece){pairs[i], strlen(pairs[i])};
        nu_llm_vocab v = {.count = n, .pieces = pieces, .types = types, .bos = 256 + 6, .eos = 256 + 6,
                          .unk = NU_LLM_NO_TOKEN, .model = "gpt2", .pre = PRES[pre], .merges = merges,
                          .merge_count = 6};
        CHECK(nu_llm_tokenizer_new(&v, &tok[pre]) == NU_OK); /* kept for the process */
    }
    return tok[pre];
}

/* Tokenizes and decodes text; with a vocabulary that has a token for every byte, byte-level BPE is
 * lossless: the ids decode (special tokens as text) to the text byte for byte. */
static void bpe_text(const nu_llm_tokenizer *t, const uint8_t *text, size_t len, bool parse_special, bool lossless)
{
    size_t cap = len + 2, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    CHECK(ids);
    nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, parse_special};
    nu_status st = nu_llm_tokenize_ex(t, (const char *)text, len, &o, ids, cap, &n);
    CHECK((st == NU_OK && n <= len) || st == NU_ERROR_UNSUPPORTED); /* PCRE2 may give up on a piece */
    if (st == NU_OK) {
        for (size_t i = 0; i < n; i++)
            CHECK(ids[i] >= 0 && (uint32_t)ids[i] < nu_llm_tokenizer_count(t));
        nu_llm_decode_options raw = {true, true};
        size_t got;
        char *back = decoded(t, ids, n, &raw, &got);
        if (lossless)
            CHECK(got == len && memcmp(back, text, len) == 0);
        free(back);
        stream(t, ids, n, true);
    }
    free(ids);
}

static void bpe_vocabulary_from_input(const uint8_t *data, size_t size, uint8_t options)
{
    const uint8_t *nul = memchr(data, 0, size), *nul2 = nul ? memchr(nul + 1, 0, size - (size_t)(nul + 1 - data)) : NULL;
    size_t vocab_len = nul ? (size_t)(nul - data) : size;
    uint32_t n = options & 1 ? byte_level_base() : 0;
    n += lines(data, vocab_len, pieces + n, MAX_PIECES - n);
    for (uint32_t i = 0; i < n; i++)
        types[i] = i >= 256 && pieces[i].length && pieces[i].text[0] == '<' ? NU_LLM_TOKEN_CONTROL : NU_LLM_TOKEN_NORMAL;
    uint32_t m = 0;
    if (nul)
        m = lines(nul + 1, (size_t)((nul2 ? nul2 : data + size) - (nul + 1)), merges, MAX_PIECES);
    nu_llm_vocab v = {.count = n, .pieces = pieces, .types = types, .bos = NU_LLM_NO_TOKEN, .eos = NU_LLM_NO_TOKEN,
                      .unk = n && (options & 2) ? 0 : NU_LLM_NO_TOKEN, .model = "gpt2",
                      .pre = PRES[(options >> 2) % N_PRES], .merges = merges, .merge_count = m};
    nu_llm_tokenizer *t = accept_or_refuse(&v);
    if (t) {
        const uint8_t *text = nul2 ? nul2 + 1 : data + size;
        bpe_text(t, text, (size_t)(data + size - text), options & 4, false);
        nu_llm_tokenizer_free(t);
    }
}

static void gguf_vocabulary(const uint8_t *data, size_t size)
{
    nu_gguf *g = NULL;
    if (nu_gguf_parse(data, size, &g) != NU_OK)
        return;
    nu_llm_tokenizer *t = NULL;
    nu_status st = nu_llm__tokenizer_from_gguf(g, &t);
    CHECK(st == NU_OK || st == NU_ERROR_FORMAT || st == NU_ERROR_UNSUPPORTED || st == NU_ERROR_INVALID_ARGUMENT);
    CHECK((st == NU_OK) == (t != NULL) && (st == NU_OK || nu_llm_error_message()[0]));
    if (t) {
        static const char text[] = "Hello, world! 123 \xC3\xA9\xF0\x9F\xA6\x99 <s>\xFF";
        exercise(t, text, sizeof text - 1, -1, false);
        nu_llm_tokenizer_free(t);
    }
    nu_gguf_close(g);
}

static void utf8_and_streaming(const uint8_t *data, size_t size)
{
    size_t n;
    char *out = malloc(3 * size + 1);
    CHECK(out && nu_llm_utf8_sanitize((const char *)data, size, out, 3 * size + 1, &n) == NU_OK);
    CHECK(n <= 3 * size && nu_llm_utf8_valid(out, n));
    if (nu_llm_utf8_valid((const char *)data, size))
        CHECK(n == size && memcmp(out, data, size) == 0);
    size_t ready = nu_llm_utf8_complete((const char *)data, size);
    CHECK(ready <= size && size - ready <= 3);
    free(out);
    const nu_llm_tokenizer *t = fixed_bpe(1);
    int32_t ids[1 << 12];
    size_t k = 0;
    for (size_t i = 0; i + 1 < size && k < sizeof ids / sizeof ids[0]; i += 2)
        ids[k++] = (int32_t)(((unsigned)data[i] << 8 | data[i + 1]) % nu_llm_tokenizer_count(t));
    stream(t, ids, k, size && (data[0] & 1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 1 << 16)
        return 0;
    uint8_t mode = data[0] & 7, options = data[0] >> 3;
    switch (mode) {
    case 0:
    case 2:
        fixed_vocabulary(data + 1, size - 1, mode == 2);
        break;
    case 1:
    case 3:
        vocabulary_from_input(data + 1, size - 1);
        break;
    case 4:
        if (size >= 2)
            bpe_text(fixed_bpe(data[1] % N_PRES), data + 2, size - 2, options & 1, true);
        break;
    case 5:
        bpe_vocabulary_from_input(data + 1, size - 1, options);
        break;
    case 6:
        gguf_vocabulary(data + 1, size - 1);
        break;
    default:
        utf8_and_streaming(data + 1, size - 1);
        break;
    }
    return 0;
}
