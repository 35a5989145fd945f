/* llm_tokenizer_util.h: what the tokenizer tests share (test_llm_tokenizer*.c): vocabularies
 * built by a test (SentencePiece-style: <unk>, <s>, </s>, the byte tokens, then the test's
 * pieces), EXPECT (the ids a text gives), detok, the folder of the real models, and the
 * SentencePiece rule written plainly (O(n^2)), the reference the tokenizer is checked against. */
#ifndef NUVEC_TEST_LLM_TOKENIZER_UTIL_H
#define NUVEC_TEST_LLM_TOKENIZER_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "llm_util.h"

#define SP "\xE2\x96\x81" /* U+2581 */

/* ---- A vocabulary built by the test ------------------------------------------------------- */

#define MAX_TOKENS 1024

typedef struct test_vocab {
    nu_llm_vocab v;
    nu_llm_piece pieces[MAX_TOKENS];
    float scores[MAX_TOKENS];
    int32_t types[MAX_TOKENS];
    char text[MAX_TOKENS][24];
} test_vocab;

static inline int32_t add(test_vocab *tv, const char *text, float score, int32_t type)
{
    uint32_t i = tv->v.count++;
    assert_true(i < MAX_TOKENS && strlen(text) < sizeof tv->text[i]);
    strcpy(tv->text[i], text);
    tv->pieces[i] = (nu_llm_piece){tv->text[i], strlen(text)};
    tv->scores[i] = score;
    tv->types[i] = type;
    return (int32_t)i;
}

/* <unk> 0, <s> 1, </s> 2, then the 256 byte tokens 3 .. 258 (as Llama's), if `bytes`. */
static inline void vocab_init(test_vocab *tv, bool bytes)
{
    memset(tv, 0, sizeof *tv);
    tv->v.pieces = tv->pieces;
    tv->v.scores = tv->scores;
    tv->v.types = tv->types;
    tv->v.bos = 1;
    tv->v.eos = 2;
    tv->v.unk = 0;
    tv->v.add_bos = true;
    tv->v.add_space_prefix = true;
    add(tv, "<unk>", 0, NU_LLM_TOKEN_UNKNOWN);
    add(tv, "<s>", 0, NU_LLM_TOKEN_CONTROL);
    add(tv, "</s>", 0, NU_LLM_TOKEN_CONTROL);
    for (int b = 0; bytes && b < 256; b++) {
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", b);
        add(tv, piece, 0, NU_LLM_TOKEN_BYTE);
    }
}

#define BYTE(b) (3 + (b))

static inline nu_llm_tokenizer *make(test_vocab *tv)
{
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(&tv->v, &t));
    assert_non_null(t);
    return t;
}

/* Tokenizes `text` without bos, and compares with the `n` ids expected. */
static inline void expect_ids(const nu_llm_tokenizer *t, const char *text, const int32_t *want, size_t n)
{
    int32_t ids[256];
    size_t count = 99;
    LLM_OK(nu_llm_tokenize(t, text, strlen(text), 0, ids, 256, &count));
    bool same = count == n;
    for (size_t i = 0; same && i < n; i++)
        same = ids[i] == want[i];
    if (!same) {
        char got[1024] = "", exp[1024] = "";
        for (size_t i = 0; i < count && i < 64; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), " %d", (int)ids[i]);
        for (size_t i = 0; i < n; i++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), " %d", (int)want[i]);
        fail_msg("\"%s\": got [%s ], want [%s ]", text, got, exp);
    }
}
#define EXPECT(t, text, ...)                                                                   \
    do {                                                                                       \
        const int32_t want_[] = {__VA_ARGS__};                                                 \
        expect_ids(t, text, want_, sizeof want_ / sizeof want_[0]);                            \
    } while (0)

/* The text ids decode to, NUL-terminated (free() it). */
static inline char *detok(const nu_llm_tokenizer *t, const int32_t *ids, size_t n)
{
    size_t len = 0;
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_detokenize(t, ids, n, NULL, 0, &len));
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    size_t got = 99;
    LLM_OK(nu_llm_detokenize(t, ids, n, buf, len + 1, &got));
    assert_int_equal(got, len);
    assert_int_equal(buf[len], 0);
    return buf;
}

/* ---- The rule, written plainly (O(n^2)): the reference the tokenizer is checked against ---- */

/* The lowest mergeable id whose piece is s[0 .. n), or -1 (a linear scan). */
static inline int32_t ref_lookup(const nu_llm_vocab *v, const char *s, size_t n)
{
    for (uint32_t i = 0; i < v->count; i++) {
        int32_t ty = v->types ? v->types[i] : 1;
        if ((ty == 0 || ty == 1 || ty == 4) && v->pieces[i].length == n && n && memcmp(v->pieces[i].text, s, n) == 0)
            return (int32_t)i;
    }
    return -1;
}

static inline size_t ref_char(const unsigned char *s, size_t n)
{
    /* Decode and re-check the code point: an independent reading of RFC 3629. */
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || len > n)
        return 0;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* SentencePiece's normalised text of text[0 .. len) (U+2581 in front if `prefix`, every ' ' as
 * U+2581) into *norm, split into UTF-8 characters {start, length, raw: no part of a valid
 * character} in *sym (free() both); returns their number. */
static inline size_t ref_symbols(const char *text, size_t len, bool prefix, char **norm_out, size_t (**sym_out)[3])
{
    char *norm = malloc(3 * len + 4);
    size_t (*sym)[3] = malloc((3 * len + 4) * sizeof *sym);
    assert_true(norm && sym);
    size_t w = 0, n = 0;
    if (prefix) {
        memcpy(norm, SP, 3);
        w = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(norm + w, SP, 3);
            w += 3;
        } else {
            norm[w++] = text[i];
        }
    }
    for (size_t i = 0; i < w;) {
        size_t c = ref_char((const unsigned char *)norm + i, w - i);
        sym[n][0] = i;
        sym[n][1] = c ? c : 1;
        sym[n][2] = c == 0;
        i += sym[n++][1];
    }
    *norm_out = norm;
    *sym_out = sym;
    return n;
}

/* The ids of the n final symbols: piece(ctx, s, n) for one that is a piece (-1: none), else its
 * bytes' byte tokens byte(ctx, b); returns their number. */
static inline size_t ref_emit(int32_t (*piece)(const void *ctx, const char *s, size_t n), int32_t (*byte)(const void *ctx, int b),
                              const void *ctx, const char *norm, size_t (*sym)[3], size_t n, int32_t *ids)
{
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = sym[i][2] ? -1 : piece(ctx, norm + sym[i][0], sym[i][1]);
        if (id >= 0) {
            ids[out++] = id;
            continue;
        }
        for (size_t k = 0; k < sym[i][1]; k++) {
            int32_t b = byte(ctx, (unsigned char)norm[sym[i][0] + k]);
            assert_true(b >= 0); /* the references handle vocabularies with every byte token */
            ids[out++] = b;
        }
    }
    return out;
}

static inline int32_t ref_piece(const void *v, const char *s, size_t n) { return ref_lookup(v, s, n); }

static inline int32_t ref_byte(const void *ctx, int b)
{
    const nu_llm_vocab *v = ctx;
    char piece[8];
    snprintf(piece, sizeof piece, "<0x%02X>", b);
    for (uint32_t j = 0; j < v->count; j++)
        if (v->types[j] == NU_LLM_TOKEN_BYTE && v->pieces[j].length == 6 && memcmp(v->pieces[j].text, piece, 6) == 0)
            return (int32_t)j;
    return -1;
}

/* The ids of a piece of text without special tokens (no bos) by the rule, into ids; returns the
 * count. */
static inline size_t ref_tokenize_piece(const nu_llm_vocab *v, const char *text, size_t len, int32_t *ids)
{
    char *norm;
    size_t (*sym)[3];
    size_t n = ref_symbols(text, len, len && v->add_space_prefix, &norm, &sym);
    for (;;) {
        size_t best = SIZE_MAX;
        float best_score = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            if (sym[i][2] || sym[i + 1][2])
                continue;
            int32_t id = ref_lookup(v, norm + sym[i][0], sym[i][1] + sym[i + 1][1]);
            float s = id < 0 ? 0 : v->scores ? v->scores[id] : 0;
            if (id >= 0 && (best == SIZE_MAX || s > best_score)) {
                best = i;
                best_score = s;
            }
        }
        if (best == SIZE_MAX)
            break;
        sym[best][1] += sym[best + 1][1];
        memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof *sym);
        n--;
    }
    size_t out = ref_emit(ref_piece, ref_byte, v, norm, sym, n, ids);
    free(norm);
    free(sym);
    return out;
}

/* The ids of `text` (no bos): user-defined tokens split out first, as llama.cpp does it (the
 * longest token first, the lowest id among equally long ones, each at its leftmost occurrences
 * in the pieces of text left), then each piece of text by the rule, a space in front of each. */
static inline size_t ref_tokenize(const nu_llm_vocab *v, const char *text, size_t len, int32_t *ids)
{
    int32_t *owner = malloc((len + 1) * sizeof *owner); /* the special token covering each byte, or -1 */
    bool *used = calloc(v->count, 1);
    assert_true(owner && used);
    for (size_t i = 0; i < len; i++)
        owner[i] = -1;
    for (;;) {
        int32_t best = -1;
        for (uint32_t k = 0; k < v->count; k++)
            if (!used[k] && v->types && v->types[k] == NU_LLM_TOKEN_USER_DEFINED && v->pieces[k].length &&
                (best < 0 || v->pieces[k].length > v->pieces[best].length))
                best = (int32_t)k;
        if (best < 0)
            break;
        used[best] = true;
        size_t n = v->pieces[best].length;
        for (size_t i = 0; i + n <= len;) {
            bool free_run = memcmp(text + i, v->pieces[best].text, n) == 0;
            for (size_t b = 0; free_run && b < n; b++)
                free_run = owner[i + b] < 0;
            if (!free_run) {
                i++;
                continue;
            }
            for (size_t b = 0; b < n; b++)
                owner[i + b] = best;
            i += n;
        }
    }
    size_t out = 0;
    for (size_t i = 0; i < len;) {
        if (owner[i] >= 0) {
            ids[out++] = owner[i];
            i += v->pieces[owner[i]].length;
            continue;
        }
        size_t j = i;
        while (j < len && owner[j] < 0)
            j++;
        out += ref_tokenize_piece(v, text + i, j - i, ids + out);
        i = j;
    }
    free(owner);
    free(used);
    return out;
}

/* Tokenizes text both ways (no bos) and fails on a difference. */
static inline void check_against_reference(const nu_llm_tokenizer *t, const nu_llm_vocab *v, const char *text, size_t len)
{
    size_t cap = NU_LLM_TOKENIZE_MAX_IDS(len), count = 0;
    int32_t *got = malloc(cap * sizeof *got), *want = malloc(cap * sizeof *want);
    assert_true(got && want);
    LLM_OK(nu_llm_tokenize(t, text, len, 0, got, cap, &count));
    size_t n = ref_tokenize(v, text, len, want);
    size_t i = 0;
    while (i < n && i < count && got[i] == want[i])
        i++;
    if (count != n || i != n)
        fail_msg("text of %zu bytes (\"%.*s\"): %zu ids, the reference %zu; first difference at %zu: %d vs %d", len,
                 (int)(len > 60 ? 60 : len), text, count, n, i, i < count ? (int)got[i] : -1,
                 i < n ? (int)want[i] : -1);
    free(got);
    free(want);
}

/* Fails the k-th host allocation for k = 0, 1, ... until building the tokenizer of `v` and
 * tokenizing `text` (with options `o`) succeed: each failure must be a clean
 * NU_ERROR_HOST_OUT_OF_MEMORY (a message, no tokenizer, no ids), and the run that succeeds must
 * give the ids an unfailed run gives. */
static inline void expect_failing_allocations(const nu_llm_vocab *v, const char *text, const nu_llm_tokenize_options *o,
                                              long tries)
{
    int32_t want[64], ids[64];
    size_t want_n, n;
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(v, &t));
    LLM_OK(nu_llm_tokenize_ex(t, text, strlen(text), o, want, 64, &want_n));
    nu_llm_tokenizer_free(t);
    bool finished = false;
    for (long k = 0; k < tries && !finished; k++) {
        nu_llm__fail_after(k);
        t = NULL;
        nu_status st = nu_llm_tokenizer_new(v, &t);
        if (st == NU_OK) {
            st = nu_llm_tokenize_ex(t, text, strlen(text), o, ids, 64, &n);
            if (st == NU_OK) {
                assert_int_equal(n, want_n);
                assert_memory_equal(ids, want, n * sizeof *ids);
                finished = true;
            } else {
                assert_int_equal(n, 0);
            }
        } else {
            assert_null(t);
        }
        long failed = nu_llm__fail_after(-1);
        if (st != NU_OK) {
            assert_int_equal(st, NU_ERROR_HOST_OUT_OF_MEMORY);
            assert_true(failed > 0);
            assert_non_null(strstr(nu_llm_error_message(), "memory"));
        }
        nu_llm_tokenizer_free(t);
    }
    assert_true(finished);
}

/* Byte b in GPT-2's alphabet (as the tokenizer's bpe.c maps it, written here independently). */
static inline void alphabet(int b, char *out)
{
    int cp = b, extra = 0;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
        for (int k = 0; k < b; k++)
            extra += !((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE);
        cp = 256 + extra;
    }
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
    }
}

/* The folder of the test models: NUVEC_MODELS_DIR from the environment, else the build's. */
static inline const char *models_dir(void)
{
    const char *env = getenv("NUVEC_MODELS_DIR");
    return env && env[0] ? env : NUVEC_MODELS_DIR;
}

#endif
