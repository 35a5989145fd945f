/* test_llm_tokenizer.c: the llm component's SentencePiece-style tokenizer (llm/tokenizer.c), no
 * device needed. On hand-made vocabularies: merges by score, the leftmost of ties, byte
 * fallback, the unknown token, multi-byte characters, invalid UTF-8, empty text, decoding
 * (leading space, byte tokens put back together, streaming), the vocabulary's checks, every
 * host allocation failed in turn, long texts; and against a plain O(n^2) implementation of the
 * rule on random texts and vocabularies. On the real aidreams260K vocabulary (read from its GGUF
 * file): the README's ids, round trips, the same reference, and its tokenizer.json's vocabulary. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common.h"
#include "llm_util.h"
#include "nuvec_llm.h"

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

static int32_t add(test_vocab *tv, const char *text, float score, int32_t type)
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
static void vocab_init(test_vocab *tv, bool bytes)
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

static nu_llm_tokenizer *make(test_vocab *tv)
{
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(&tv->v, &t));
    assert_non_null(t);
    return t;
}

/* Tokenizes `text` without bos, and compares with the `n` ids expected. */
static void expect_ids(const nu_llm_tokenizer *t, const char *text, const int32_t *want, size_t n)
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
static char *detok(const nu_llm_tokenizer *t, const int32_t *ids, size_t n)
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
static int32_t ref_lookup(const nu_llm_vocab *v, const char *s, size_t n)
{
    for (uint32_t i = 0; i < v->count; i++) {
        int32_t ty = v->types ? v->types[i] : 1;
        if ((ty == 0 || ty == 1 || ty == 4) && v->pieces[i].length == n && n && memcmp(v->pieces[i].text, s, n) == 0)
            return (int32_t)i;
    }
    return -1;
}

static size_t ref_char(const unsigned char *s, size_t n)
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

/* The ids of `text` (no bos) by the rule, into ids; returns the count. */
static size_t ref_tokenize(const nu_llm_vocab *v, const char *text, size_t len, int32_t *ids)
{
    char *norm = malloc(3 * len + 4);
    size_t (*sym)[3] = malloc((3 * len + 4) * sizeof *sym); /* start, length, raw */
    assert_true(norm && sym);
    size_t w = 0, n = 0, out = 0;
    if (len && v->add_space_prefix) {
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
    for (size_t i = 0; i < n; i++) {
        int32_t id = sym[i][2] ? -1 : ref_lookup(v, norm + sym[i][0], sym[i][1]);
        if (id >= 0) {
            ids[out++] = id;
            continue;
        }
        for (size_t k = 0; k < sym[i][1]; k++) {
            char piece[8];
            snprintf(piece, sizeof piece, "<0x%02X>", (unsigned char)norm[sym[i][0] + k]);
            int32_t b = -1;
            for (uint32_t j = 0; j < v->count && b < 0; j++)
                if (v->types[j] == NU_LLM_TOKEN_BYTE && v->pieces[j].length == 6 &&
                    memcmp(v->pieces[j].text, piece, 6) == 0)
                    b = (int32_t)j;
            assert_true(b >= 0); /* the reference handles vocabularies with every byte token */
            ids[out++] = b;
        }
    }
    free(norm);
    free(sym);
    return out;
}

/* Tokenizes text both ways (no bos) and fails on a difference. */
static void check_against_reference(const nu_llm_tokenizer *t, const nu_llm_vocab *v, const char *text, size_t len)
{
    size_t cap = 3 * len + 4, count = 0;
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

/* ---- Hand-made vocabularies ------------------------------------------------------------------- */

static void merges_by_score_leftmost_on_ties(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    tv.v.add_space_prefix = false;
    int32_t a = add(&tv, "a", -1, 1), b = add(&tv, "b", -1, 1), c = add(&tv, "c", -1, 1);
    int32_t ab = add(&tv, "ab", 1, 1), bc = add(&tv, "bc", 2, 1), aa = add(&tv, "aa", 1, 1);
    nu_llm_tokenizer *t = make(&tv);
    EXPECT(t, "ab", ab);
    EXPECT(t, "abx", ab, BYTE('x')); /* x is no piece: its byte token */
    /* "bc" scores higher than "ab", and "a"+"bc" is no piece: the higher-scored pair wins. */
    EXPECT(t, "abc", a, bc);
    EXPECT(t, "cab", c, ab);
    /* Ties go to the leftmost pair. */
    EXPECT(t, "aaa", aa, a);
    EXPECT(t, "aaaa", aa, aa);
    EXPECT(t, "aaaaa", aa, aa, a);
    EXPECT(t, "b", b);
    nu_llm_tokenizer_free(t);

    /* With "ab" above "bc", "abc" forms from "ab" + "c"; "a" + "bc" would make it too, but "bc"
     * no longer merges first. */
    int32_t abc = add(&tv, "abc", 0, 1);
    t = make(&tv);
    EXPECT(t, "abc", abc);
    EXPECT(t, "abcbc", abc, bc);
    nu_llm_tokenizer_free(t);
    tv.scores[ab] = 3;
    tv.scores[abc] = -5; /* a merge's score does not matter once its pair is the best one */
    t = make(&tv);
    EXPECT(t, "abc", abc);
    EXPECT(t, "abcbc", abc, bc);
    nu_llm_tokenizer_free(t);

    /* A merge's pair can beat an older one: "bb" (5) forms late, after "ab" (1) could have. */
    vocab_init(&tv, true);
    tv.v.add_space_prefix = false;
    a = add(&tv, "a", 0, 1);
    b = add(&tv, "b", 0, 1);
    ab = add(&tv, "ab", 1, 1);
    int32_t bb = add(&tv, "bb", 5, 1), abb = add(&tv, "abb", 0.5f, 1);
    t = make(&tv);
    EXPECT(t, "abb", abb);
    EXPECT(t, "abbb", abb, b);   /* bb at 1..2 (leftmost) first, then "a" + "bb" */
    EXPECT(t, "bbab", bb, ab);
    EXPECT(t, "bbb", bb, b);
    nu_llm_tokenizer_free(t);
}

static void space_prefix_and_bos(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    int32_t sp = add(&tv, SP, -1, 1), h = add(&tv, "h", -1, 1), i = add(&tv, "i", -1, 1);
    int32_t sph = add(&tv, SP "h", 2, 1), hi = add(&tv, "hi", 1, 1), sphi = add(&tv, SP "hi", 3, 1);
    nu_llm_tokenizer *t = make(&tv);
    EXPECT(t, "hi", sphi);
    EXPECT(t, "hi hi", sphi, sphi);
    EXPECT(t, " h", sp, sph);
    EXPECT(t, "hi  ", sphi, sp, sp);
    EXPECT(t, "ih", sp, i, h);
    (void)hi;

    int32_t ids[8];
    size_t n = 0;
    LLM_OK(nu_llm_tokenize(t, "hi", 2, 1, ids, 8, &n));
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], sphi);
    LLM_OK(nu_llm_tokenize(t, "hi", 2, -1, ids, 8, &n)); /* the vocabulary's add_bos: true */
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 1);
    /* Empty text: bos alone, or nothing (no space is put in front of nothing). */
    LLM_OK(nu_llm_tokenize(t, NULL, 0, 1, ids, 8, &n));
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
    ids[0] = 77;
    LLM_OK(nu_llm_tokenize(t, "", 0, 0, ids, 8, &n));
    assert_int_equal(n, 0);
    assert_int_equal(ids[0], 77);
    nu_llm_tokenizer_free(t);

    /* Without add_space_prefix nothing goes in front, and decoding keeps the first space. */
    tv.v.add_space_prefix = false;
    t = make(&tv);
    EXPECT(t, "hi", hi);
    EXPECT(t, " hi", sphi);
    char *s = detok(t, (int32_t[]){1, sphi}, 2);
    assert_string_equal(s, " hi");
    free(s);
    nu_llm_tokenizer_free(t);
}

static void byte_fallback_unknown_and_utf8(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    tv.v.add_space_prefix = false;
    int32_t e_acute = add(&tv, "\xC3\xA9", 0, 1), a = add(&tv, "a", 0, 1);
    int32_t ea = add(&tv, "\xC3\xA9" "a", 1, 1), snow = add(&tv, "\xE2\x98\x83", 0, 1);
    int32_t ctl = add(&tv, "<ctl>", 0, NU_LLM_TOKEN_CONTROL);
    add(&tv, "\xFF", 5, 1); /* a piece that is invalid UTF-8: never matched */
    nu_llm_tokenizer *t = make(&tv);
    EXPECT(t, "\xC3\xA9", e_acute);
    EXPECT(t, "\xC3\xA9" "a", ea);
    EXPECT(t, "a\xE2\x98\x83", a, snow);
    /* Characters not in the vocabulary: their UTF-8 bytes' byte tokens. */
    EXPECT(t, "\xC3\xA8", BYTE(0xC3), BYTE(0xA8));
    EXPECT(t, "\xF0\x9F\x98\x80", BYTE(0xF0), BYTE(0x9F), BYTE(0x98), BYTE(0x80)); /* U+1F600 */
    /* Invalid UTF-8: each byte that is no part of a valid character is a byte token, unmerged. */
    EXPECT(t, "\xFF", BYTE(0xFF));
    EXPECT(t, "a\xC3", a, BYTE(0xC3));                        /* truncated at the end */
    EXPECT(t, "\xC3" "a", BYTE(0xC3), a);                     /* a lead byte without its continuation */
    EXPECT(t, "\xA9\xC3\xA9", BYTE(0xA9), e_acute);           /* a stray continuation */
    EXPECT(t, "\xC0\x80", BYTE(0xC0), BYTE(0x80));            /* overlong NUL */
    EXPECT(t, "\xE0\x80\xAF", BYTE(0xE0), BYTE(0x80), BYTE(0xAF)); /* overlong '/' */
    EXPECT(t, "\xED\xA0\x80", BYTE(0xED), BYTE(0xA0), BYTE(0x80)); /* a surrogate */
    EXPECT(t, "\xF4\x90\x80\x80", BYTE(0xF4), BYTE(0x90), BYTE(0x80), BYTE(0x80)); /* above U+10FFFF */
    EXPECT(t, "\xE2\x98", BYTE(0xE2), BYTE(0x98));
    /* A NUL byte is a character like another. */
    int32_t ids[4];
    size_t n;
    LLM_OK(nu_llm_tokenize(t, "a\0a", 3, 0, ids, 4, &n));
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], BYTE(0));
    /* Control tokens are never made from text, even when the text spells them. */
    EXPECT(t, "<ctl>", BYTE('<'), BYTE('c'), BYTE('t'), BYTE('l'), BYTE('>'));
    (void)ctl;
    nu_llm_tokenizer_free(t);

    /* No byte tokens: characters not in the vocabulary become unk, one per character. */
    vocab_init(&tv, false);
    tv.v.add_space_prefix = false;
    a = add(&tv, "a", 0, 1);
    t = make(&tv);
    EXPECT(t, "a\xC3\xA8" "a", a, 0, a);
    EXPECT(t, "\xFF\xFE", 0, 0);
    nu_llm_tokenizer_free(t);

    /* Some byte tokens: a character uses them only if all of its bytes have one. */
    vocab_init(&tv, false);
    tv.v.add_space_prefix = false;
    int32_t b41 = add(&tv, "<0x41>", 0, NU_LLM_TOKEN_BYTE), bc3 = add(&tv, "<0xc3>", 0, NU_LLM_TOKEN_BYTE);
    t = make(&tv);
    EXPECT(t, "A", b41);
    EXPECT(t, "\xC3\xA8", 0);
    EXPECT(t, "\xC3", bc3);
    nu_llm_tokenizer_free(t);
}

static void duplicates_and_types(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    tv.v.add_space_prefix = false;
    int32_t x1 = add(&tv, "x", 0, 1), x2 = add(&tv, "x", 0, 1);
    int32_t u = add(&tv, "y", 0, NU_LLM_TOKEN_UNUSED), ud = add(&tv, "zz", 0, NU_LLM_TOKEN_USER_DEFINED);
    int32_t z = add(&tv, "z", 0, NU_LLM_TOKEN_UNDEFINED);
    int32_t dup_byte = add(&tv, "<0x41>", 0, NU_LLM_TOKEN_BYTE);
    nu_llm_tokenizer *t = make(&tv);
    EXPECT(t, "x", x1);         /* the first of equal pieces */
    EXPECT(t, "y", BYTE('y'));  /* unused pieces are not produced */
    EXPECT(t, "zzz", ud, z);    /* user-defined and undefined merge like normal pieces */
    EXPECT(t, "A", BYTE('A'));  /* the first byte token of a byte */
    char *s = detok(t, (int32_t[]){x2, u, 0, 1, 2, dup_byte}, 6);
    assert_string_equal(s, "xy\xE2\x81\x87" "A"); /* unknown decodes as U+2047, control as nothing */
    free(s);
    nu_llm_tokenizer_free(t);

    /* No scores, no types: all normal with score 0 (leftmost merges first). */
    vocab_init(&tv, true);
    tv.v.add_space_prefix = false;
    int32_t ab = add(&tv, "ab", 0, 1), bc = add(&tv, "bc", 0, 1);
    tv.v.scores = NULL;
    t = make(&tv);
    EXPECT(t, "abc", ab, BYTE('c'));
    EXPECT(t, "xbc", BYTE('x'), bc);
    nu_llm_tokenizer_free(t);
}

static void vocabulary_checks(void **state)
{
    (void)state;
    test_vocab tv;
    nu_llm_tokenizer *t = (nu_llm_tokenizer *)&tv;
    vocab_init(&tv, true);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenizer_new(NULL, &t));
    assert_null(t);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenizer_new(&tv.v, NULL));

#define REFUSED(status, change, words)                                                         \
    do {                                                                                       \
        vocab_init(&tv, true);                                                                 \
        add(&tv, "a", 0, 1);                                                                   \
        change;                                                                                \
        t = (nu_llm_tokenizer *)&tv;                                                           \
        LLM_STATUS(status, nu_llm_tokenizer_new(&tv.v, &t));                                   \
        assert_null(t);                                                                        \
        if (!strstr(nu_llm_error_message(), words))                                            \
            fail_msg("message \"%s\" lacks \"%s\"", nu_llm_error_message(), words);            \
    } while (0)
    REFUSED(NU_ERROR_INVALID_ARGUMENT, tv.v.count = 0, "0 tokens");
    REFUSED(NU_ERROR_INVALID_ARGUMENT, tv.v.count = 0x80000000u, "2147483648 tokens");
    REFUSED(NU_ERROR_INVALID_ARGUMENT, tv.v.pieces = NULL, "no pieces");
    REFUSED(NU_ERROR_INVALID_ARGUMENT, tv.v.bos = 260, "bos id 260");
    REFUSED(NU_ERROR_INVALID_ARGUMENT, tv.v.eos = -2, "eos id -2");
    REFUSED(NU_ERROR_INVALID_ARGUMENT, tv.v.unk = 1000, "unk id 1000");
    REFUSED(NU_ERROR_INVALID_ARGUMENT, tv.v.bos = NU_LLM_NO_TOKEN, "add_bos");
    REFUSED(NU_ERROR_INVALID_ARGUMENT, tv.pieces[259].text = NULL, "piece 259");
    REFUSED(NU_ERROR_FORMAT, tv.types[259] = 7, "token 259 has type 7");
    REFUSED(NU_ERROR_FORMAT, tv.types[259] = -1, "type -1");
    REFUSED(NU_ERROR_FORMAT, tv.scores[259] = NAN, "NaN score");
    REFUSED(NU_ERROR_FORMAT, tv.types[259] = NU_LLM_TOKEN_BYTE, "token 259 has type byte");
    REFUSED(NU_ERROR_FORMAT, strcpy(tv.text[3], "<0xG0>"), "<0xG0>");
    REFUSED(NU_ERROR_FORMAT, (tv.types[3 + 0x7F] = 1, tv.v.unk = NU_LLM_NO_TOKEN), "<0x7F>");
#undef REFUSED
    /* Without bos, add_bos off: fine, but asking for bos is refused. */
    vocab_init(&tv, true);
    tv.v.bos = NU_LLM_NO_TOKEN;
    tv.v.add_bos = false;
    t = make(&tv);
    int32_t ids[4];
    size_t n = 5;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenize(t, "a", 1, 1, ids, 4, &n));
    assert_int_equal(n, 0);
    LLM_OK(nu_llm_tokenize(t, "a", 1, -1, ids, 4, &n));
    assert_int_equal(n, 4); /* "▁a": 3 + 1 byte tokens */
    assert_int_equal(nu_llm_tokenizer_bos(t), NU_LLM_NO_TOKEN);
    assert_int_equal(nu_llm_tokenizer_eos(t), 2);
    assert_int_equal(nu_llm_tokenizer_count(t), 259);
    assert_false(nu_llm_tokenizer_add_bos(t));
    nu_llm_tokenizer_free(t);
    assert_int_equal(nu_llm_tokenizer_count(NULL), 0);
    assert_int_equal(nu_llm_tokenizer_bos(NULL), NU_LLM_NO_TOKEN);
    assert_int_equal(nu_llm_tokenizer_max_piece(NULL), 0);
    nu_llm_tokenizer_free(NULL);
}

static void call_checks_and_short_buffers(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    int32_t sphi = add(&tv, SP "hi", 1, 1);
    add(&tv, SP "h", 0, 1);
    add(&tv, "i", 0, 1);
    nu_llm_tokenizer *t = make(&tv);
    int32_t ids[8];
    size_t n = 9;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenize(NULL, "a", 1, 0, ids, 8, &n));
    assert_int_equal(n, 0);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenize(t, NULL, 1, 0, ids, 8, &n));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenize(t, "a", 1, 0, NULL, 8, &n));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenize(t, "a", 1, 0, ids, 8, NULL));
    /* Short: the count needed comes back, and a retry with that much succeeds. */
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_tokenize(t, "hi hi hi", 8, 1, NULL, 0, &n));
    assert_int_equal(n, 4);
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_tokenize(t, "hi hi hi", 8, 1, ids, 3, &n));
    assert_int_equal(n, 4);
    LLM_OK(nu_llm_tokenize(t, "hi hi hi", 8, 1, ids, 4, &n));
    assert_int_equal(n, 4);
    assert_int_equal(ids[3], sphi);

    char buf[16];
    size_t len = 9;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_token_to_text(t, 400, -1, buf, 16, &len));
    assert_int_equal(len, 0);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_token_to_text(t, -1, -1, buf, 16, &len));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_token_to_text(t, 1, -5, buf, 16, &len));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_token_to_text(t, 1, 400, buf, 16, &len));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_token_to_text(t, 1, -1, NULL, 16, &len));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_token_to_text(t, 1, -1, buf, 16, NULL));
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_token_to_text(t, sphi, 5, buf, 2, &len));
    assert_int_equal(len, 3); /* " hi" */
    LLM_OK(nu_llm_token_to_text(t, sphi, 5, buf, 3, &len));
    assert_memory_equal(buf, " hi", 3);
    LLM_OK(nu_llm_token_to_text(t, sphi, 1, buf, 3, &len)); /* after bos: the space goes */
    assert_int_equal(len, 2);
    assert_memory_equal(buf, "hi", 2);
    LLM_OK(nu_llm_token_to_text(t, sphi, NU_LLM_NO_TOKEN, buf, 3, &len));
    assert_int_equal(len, 2);
    assert_int_equal(nu_llm_tokenizer_max_piece(t), 3); /* " hi", and "<unk>" as U+2047 */

    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_detokenize(t, (int32_t[]){1, 999}, 2, buf, 16, &len));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_detokenize(t, NULL, 2, buf, 16, &len));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_detokenize(t, ids, 4, NULL, 16, &len));
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_detokenize(t, ids, 4, buf, 8, &len)); /* 8 bytes + NUL */
    assert_int_equal(len, 8);
    LLM_OK(nu_llm_detokenize(t, ids, 4, buf, 9, &len));
    assert_string_equal(buf, "hi hi hi");
    LLM_OK(nu_llm_detokenize(t, NULL, 0, buf, 1, &len));
    assert_string_equal(buf, "");
    nu_llm_tokenizer_free(t);
}

static void streaming_decode_of_byte_sequences(void **state)
{
    (void)state;
    /* nu_llm_utf8_complete: what can be printed now. */
    assert_int_equal(nu_llm_utf8_complete("abc", 3), 3);
    assert_int_equal(nu_llm_utf8_complete("a\xC3", 2), 1);
    assert_int_equal(nu_llm_utf8_complete("a\xC3\xA9", 3), 3);
    assert_int_equal(nu_llm_utf8_complete("\xE2\x98", 2), 0);
    assert_int_equal(nu_llm_utf8_complete("\xF0\x9F\x98", 3), 0);
    assert_int_equal(nu_llm_utf8_complete("\xF0\x9F\x98\x80", 4), 4);
    assert_int_equal(nu_llm_utf8_complete("a\xF0", 2), 1);
    assert_int_equal(nu_llm_utf8_complete("\xFF", 1), 1);         /* never valid: print it */
    assert_int_equal(nu_llm_utf8_complete("a\xC0", 2), 2);        /* an overlong lead */
    assert_int_equal(nu_llm_utf8_complete("\xE0\x80", 2), 2);     /* overlong: cannot complete */
    assert_int_equal(nu_llm_utf8_complete("\xED\xA0", 2), 2);     /* a surrogate */
    assert_int_equal(nu_llm_utf8_complete("\xF4\x90", 2), 2);     /* above U+10FFFF */
    assert_int_equal(nu_llm_utf8_complete("\xE0\xA0", 2), 0);
    assert_int_equal(nu_llm_utf8_complete("\x80\x80\x80", 3), 3); /* no lead */
    assert_int_equal(nu_llm_utf8_complete("\xC3" "a", 2), 2);
    assert_int_equal(nu_llm_utf8_complete("", 0), 0);
    assert_int_equal(nu_llm_utf8_complete(NULL, 5), 0);

    test_vocab tv;
    vocab_init(&tv, true);
    add(&tv, SP, 0, 1);
    add(&tv, "a", 0, 1);
    add(&tv, SP "a", 1, 1);
    nu_llm_tokenizer *t = make(&tv);
    const char *text = "a \xC3\xA9\xE2\x98\x83 a\xF0\x9F\x98\x80\xFF a";
    size_t len = strlen(text), n;
    int32_t ids[64];
    LLM_OK(nu_llm_tokenize(t, text, len, 1, ids, 64, &n));
    char *whole = detok(t, ids, n);
    assert_string_equal(whole, text);
    free(whole);

    /* A streaming caller as nuvec_llm.h describes it: every chunk printed is valid UTF-8 up to
     * the stray 0xFF, which goes out as soon as it is known not to start a character. */
    char pending[64], printed[256];
    size_t np = 0, out = 0;
    int chunks = 0;
    for (size_t i = 0; i < n; i++) {
        size_t got;
        LLM_OK(nu_llm_token_to_text(t, ids[i], i ? ids[i - 1] : NU_LLM_NO_TOKEN, pending + np,
                                    sizeof pending - np, &got));
        np += got;
        size_t ready = nu_llm_utf8_complete(pending, np);
        for (size_t k = 0; k < ready;) {
            /* Nothing printed ends inside a character. */
            size_t c = ref_char((const unsigned char *)pending + k, ready - k);
            assert_true(c || (unsigned char)pending[k] == 0xFF);
            k += c ? c : 1;
        }
        memcpy(printed + out, pending, ready);
        out += ready;
        memmove(pending, pending + ready, np - ready);
        np -= ready;
        chunks += ready > 0;
    }
    assert_int_equal(np, 0);
    assert_int_equal(out, len);
    assert_memory_equal(printed, text, len);
    assert_true(chunks > 3);
    nu_llm_tokenizer_free(t);
}

/* Random vocabularies over a small alphabet (with ties in the scores) and random texts, against
 * the plain implementation. */
static void matches_the_plain_rule_on_random_input(void **state)
{
    (void)state;
    static const char *alphabet[] = {"a", "b", "c", " ", "\xC3\xA9", "\xE2\x98\x83", "\xFF", "d"};
    uint64_t rng = 12345;
    for (int round = 0; round < 60; round++) {
        test_vocab tv;
        vocab_init(&tv, true);
        tv.v.add_space_prefix = round % 3 != 0;
        int pieces = 10 + (int)(nt_rand(&rng) % 200);
        for (int p = 0; p < pieces; p++) {
            char text[16] = "";
            int chars = 1 + (int)(nt_rand(&rng) % 4);
            for (int k = 0; k < chars; k++) {
                const char *c = alphabet[nt_rand(&rng) % 7]; /* not "d": never a piece */
                if (strlen(text) + strlen(c) >= 12)
                    break;
                strcat(text, strcmp(c, " ") ? c : SP);
            }
            int32_t type = nt_rand(&rng) % 10 == 0 ? NU_LLM_TOKEN_UNUSED : nt_rand(&rng) % 10 == 0 ? 4 : 1;
            add(&tv, text, (float)(nt_rand(&rng) % 8) - 4, type); /* few distinct scores: ties */
        }
        nu_llm_tokenizer *t = make(&tv);
        for (int s = 0; s < 20; s++) {
            char text[200];
            size_t len = 0, want = nt_rand(&rng) % 60;
            while (len < want) {
                const char *c = alphabet[nt_rand(&rng) % 8];
                size_t cl = strlen(c);
                if (nt_rand(&rng) % 17 == 0)
                    cl = 1; /* a piece of a character: invalid UTF-8 */
                memcpy(text + len, c, cl);
                len += cl;
            }
            check_against_reference(t, &tv.v, text, len);
        }
        nu_llm_tokenizer_free(t);
    }
}

static void every_allocation_fails_cleanly(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    add(&tv, SP "a", 1, 1);
    add(&tv, "a", 0, 1);
    const char *text = "a a a \xC3\xA9";
    int32_t want[32], ids[32];
    size_t want_n, n;
    nu_llm_tokenizer *t = make(&tv);
    LLM_OK(nu_llm_tokenize(t, text, strlen(text), 1, want, 32, &want_n));
    nu_llm_tokenizer_free(t);
    bool finished = false;
    for (long k = 0; k < 100 && !finished; k++) {
        nu_llm__fail_after(k);
        nu_status st = nu_llm_tokenizer_new(&tv.v, &t);
        if (st == NU_OK) {
            st = nu_llm_tokenize(t, text, strlen(text), 1, ids, 32, &n);
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
        t = NULL;
    }
    assert_true(finished);
}

/* Long texts: linear-ish time, and the same ids as in pieces where no merge crosses a boundary. */
static void long_texts(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    tv.v.add_space_prefix = false;
    int32_t a = add(&tv, "a", 0, 1), aa = add(&tv, "aa", 1, 1), a4 = add(&tv, "aaaa", 2, 1);
    add(&tv, "aaaaaaaa", 3, 1);
    int32_t a16 = add(&tv, "aaaaaaaaaaaaaaaa", 4, 1);
    nu_llm_tokenizer *t = make(&tv);
    size_t len = 1 << 20; /* O(n^2) would take hours here */
    char *text = malloc(len + 3);
    int32_t *ids = malloc((len + 3) * sizeof *ids);
    assert_true(text && ids);
    memset(text, 'a', len + 3);
    size_t n;
    clock_t c0 = clock();
    LLM_OK(nu_llm_tokenize(t, text, len + 3, 0, ids, len + 3, &n));
    double seconds = (double)(clock() - c0) / CLOCKS_PER_SEC;
    assert_int_equal(n, len / 16 + 2);
    for (size_t i = 0; i < len / 16; i++)
        assert_int_equal(ids[i], a16);
    assert_int_equal(ids[n - 2], aa);
    assert_int_equal(ids[n - 1], a);
    (void)a4;
    print_message("1 MiB of 'a': %.2f s\n", seconds);
    nu_llm_tokenizer_free(t);
    free(text);
    free(ids);
}

/* ---- The real vocabulary: aidreams260K ----------------------------------------------------- */

static const char *models_dir(void)
{
    const char *env = getenv("NUVEC_MODELS_DIR");
    return env && env[0] ? env : NUVEC_MODELS_DIR;
}

/* A test-only walk over a GGUF file's metadata, just far enough to read the tokenizer's arrays.
 * The lead replaces it with nuvec's GGUF reader (nu_gguf, include/nuvec/gguf.h) once that lands. */
typedef struct gguf_vocab {
    uint8_t *file;
    size_t size;
    test_vocab *tv; /* pieces point into file */
    nu_llm_piece *pieces;
    float *scores;
    int32_t *types;
} gguf_vocab;

typedef struct reader {
    const uint8_t *p;
    size_t at, size;
} reader;

static uint64_t rd(reader *r, size_t n)
{
    if (n > r->size - r->at)
        fail_msg("GGUF: %zu bytes wanted at offset %zu of %zu", n, r->at, r->size);
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[r->at + i] << (8 * i);
    r->at += n;
    return v;
}

static const char *rd_string(reader *r, size_t *len)
{
    uint64_t n = rd(r, 8);
    if (n > r->size - r->at)
        fail_msg("GGUF: a string of %llu bytes at offset %zu", (unsigned long long)n, r->at);
    const char *s = (const char *)r->p + r->at;
    r->at += n;
    *len = n;
    return s;
}

/* Bytes of one value of a scalar GGUF type, or 0 for string and array. */
static size_t scalar_size(uint32_t type)
{
    static const size_t sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type > 12)
        fail_msg("GGUF: value type %u", type);
    return sizes[type];
}

static void skip_value(reader *r, uint32_t type)
{
    size_t len;
    if (type == 8) {
        rd_string(r, &len);
    } else if (type == 9) {
        uint32_t et = (uint32_t)rd(r, 4);
        uint64_t count = rd(r, 8);
        for (uint64_t i = 0; i < count; i++)
            skip_value(r, et);
    } else {
        rd(r, scalar_size(type));
    }
}

static void load_gguf_vocab(gguf_vocab *g, const char *model)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.gguf", models_dir(), model);
    struct stat st;
    if (stat(path, &st) != 0)
        fail_msg("%s is missing (set NUVEC_MODELS_DIR to the folder of the test models)", path);
    g->size = (size_t)st.st_size;
    g->file = (uint8_t *)nt_read_file(path);
    g->tv = calloc(1, sizeof *g->tv);
    assert_non_null(g->tv);
    nu_llm_vocab *v = &g->tv->v;
    v->bos = v->eos = v->unk = NU_LLM_NO_TOKEN;
    reader r = {g->file, 0, g->size};
    assert_int_equal(rd(&r, 4), 0x46554747); /* "GGUF" */
    assert_int_equal(rd(&r, 4), 3);
    rd(&r, 8); /* tensors */
    uint64_t kvs = rd(&r, 8);
    for (uint64_t k = 0; k < kvs; k++) {
        size_t klen;
        const char *key = rd_string(&r, &klen);
        uint32_t type = (uint32_t)rd(&r, 4);
#define KEY(name) (klen == strlen(name) && memcmp(key, name, klen) == 0)
        if (type == 9 && (KEY("tokenizer.ggml.tokens") || KEY("tokenizer.ggml.scores") ||
                          KEY("tokenizer.ggml.token_type"))) {
            uint32_t et = (uint32_t)rd(&r, 4);
            uint64_t count = rd(&r, 8);
            assert_true(count > 0 && count < (1u << 24));
            assert_true(v->count == 0 || v->count == count);
            v->count = (uint32_t)count;
            if (KEY("tokenizer.ggml.tokens")) {
                assert_int_equal(et, 8);
                g->pieces = calloc(count, sizeof *g->pieces);
                assert_non_null(g->pieces);
                for (uint64_t i = 0; i < count; i++)
                    g->pieces[i].text = rd_string(&r, &g->pieces[i].length);
            } else if (KEY("tokenizer.ggml.scores")) {
                assert_int_equal(et, 6);
                g->scores = calloc(count, sizeof *g->scores);
                assert_non_null(g->scores);
                for (uint64_t i = 0; i < count; i++) {
                    uint32_t bits = (uint32_t)rd(&r, 4);
                    memcpy(&g->scores[i], &bits, 4);
                }
            } else {
                assert_int_equal(et, 5);
                g->types = calloc(count, sizeof *g->types);
                assert_non_null(g->types);
                for (uint64_t i = 0; i < count; i++)
                    g->types[i] = (int32_t)(uint32_t)rd(&r, 4);
            }
        } else if (type == 4 && KEY("tokenizer.ggml.bos_token_id")) {
            v->bos = (int32_t)rd(&r, 4);
        } else if (type == 4 && KEY("tokenizer.ggml.eos_token_id")) {
            v->eos = (int32_t)rd(&r, 4);
        } else if (type == 4 && KEY("tokenizer.ggml.unknown_token_id")) {
            v->unk = (int32_t)rd(&r, 4);
        } else if (type == 7 && KEY("tokenizer.ggml.add_bos_token")) {
            v->add_bos = rd(&r, 1) != 0;
        } else if (type == 7 && KEY("tokenizer.ggml.add_space_prefix")) {
            v->add_space_prefix = rd(&r, 1) != 0;
        } else {
            skip_value(&r, type);
        }
#undef KEY
    }
    assert_true(g->pieces && g->scores && g->types);
    v->pieces = g->pieces;
    v->scores = g->scores;
    v->types = g->types;
}

static void free_gguf_vocab(gguf_vocab *g)
{
    free(g->file);
    free(g->tv);
    free(g->pieces);
    free(g->scores);
    free(g->types);
}

static const char *ROUND_TRIPS[] = {
    "I dream of",
    "My thoughts drift",
    "I remember",
    "Hello, world!",
    "  two leading spaces and a trailing one ",
    "tabs\tand\nnew lines\r\n",
    "Numbers 0.000000 and 3.14159, 42%",
    "caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9",
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE6\x96\x87",          /* Japanese */
    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80", /* Russian */
    "emoji \xF0\x9F\x98\x80\xF0\x9F\x8C\x8C!",
    "<s> literal specials </s> and <unk>",
    "Dimensions unfold, as I softly refine, as I softly refine.",
    "a",
    " ",
    "\x01\x02\x7F",
};

static void aidreams_vocabulary(void **state)
{
    (void)state;
    gguf_vocab g = {0};
    load_gguf_vocab(&g, "aidreams260K");
    nu_llm_vocab *v = &g.tv->v;
    assert_int_equal(v->count, 512);
    assert_int_equal(v->bos, 1);
    assert_int_equal(v->eos, 2);
    assert_int_equal(v->unk, 0);
    assert_true(v->add_bos && v->add_space_prefix);
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(v, &t));

    /* The README's ids (bos included), from llama.cpp. */
    static const struct {
        const char *text;
        int32_t ids[16];
        size_t n;
    } known[] = {
        {"I dream of", {1, 303, 281, 269, 435, 447, 275}, 7},
        {"My thoughts drift", {1, 429, 478, 451, 277, 437, 444, 305, 293, 281, 322, 443, 434}, 13},
        {"I remember", {1, 303, 306, 447, 430, 371, 261}, 7},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        int32_t ids[64];
        size_t n;
        LLM_OK(nu_llm_tokenize(t, known[k].text, strlen(known[k].text), -1, ids, 64, &n));
        assert_int_equal(n, known[k].n);
        assert_memory_equal(ids, known[k].ids, n * sizeof *ids);
        char *back = detok(t, ids, n);
        assert_string_equal(back, known[k].text);
        free(back);
    }
    /* The README's greedy continuation decodes to its text. */
    static const int32_t cont[] = {1,   303, 281, 269, 435, 447, 275, 429, 464, 448, 464, 464, 464, 464, 464,
                                   464, 448, 429, 468, 342, 358, 402, 327, 446, 299, 303, 266, 437, 443, 434,
                                   438, 451, 306, 443, 259, 430, 446, 299, 303, 266, 437, 443, 434, 438, 451,
                                   306, 443};
    char *s = detok(t, cont, sizeof cont / sizeof cont[0]);
    assert_string_equal(s, "I dream of 0.000000. Dimensions unfold, as I softly refine, as I softly ref");
    free(s);

    /* Round trips, and the plain rule, on fixed and random strings. */
    for (size_t k = 0; k < sizeof ROUND_TRIPS / sizeof ROUND_TRIPS[0]; k++) {
        const char *text = ROUND_TRIPS[k];
        size_t len = strlen(text), n;
        int32_t ids[512];
        LLM_OK(nu_llm_tokenize(t, text, len, 1, ids, 512, &n));
        char *back = detok(t, ids, n);
        if (strcmp(back, text) != 0)
            fail_msg("round trip of \"%s\" gave \"%s\"", text, back);
        free(back);
        check_against_reference(t, v, text, len);
    }
    uint64_t rng = 99;
    static const char *parts[] = {"the ", "dream", " of", "\xC3\xA9", " ", "ing", "x", "\n", "\xE2\x98\x83", "Q",
                                  "0.", "whisper", "s", ",", "  "};
    for (int k = 0; k < 300; k++) {
        char text[400];
        size_t len = 0;
        int n_parts = (int)(nt_rand(&rng) % 30);
        for (int p = 0; p < n_parts; p++) {
            const char *part = parts[nt_rand(&rng) % (sizeof parts / sizeof parts[0])];
            memcpy(text + len, part, strlen(part));
            len += strlen(part);
        }
        text[len] = 0;
        check_against_reference(t, v, text, len);
        int32_t ids[1300];
        size_t n;
        LLM_OK(nu_llm_tokenize(t, text, len, 1, ids, 1300, &n));
        char *back = detok(t, ids, n);
        assert_string_equal(back, text);
        free(back);
    }
    nu_llm_tokenizer_free(t);
    free_gguf_vocab(&g);
}

/* Hugging Face's BPE over tokenizer.json, written plainly: the text normalised as its normalizer
 * says (U+2581 in front, spaces as U+2581), split into characters (ids from its vocab, else byte
 * fallback), then the adjacent pair of the lowest merge rank merged, leftmost first, until none
 * is left. Its merges were derived from the scores, so it must agree with the tokenizer. */
typedef struct hf_bpe {
    cJSON *root, *vocab;
    char **merge_left, **merge_right;
    int merges;
} hf_bpe;

static int hf_id(const hf_bpe *h, const char *s, size_t n)
{
    char key[64];
    if (n >= sizeof key)
        return -1;
    memcpy(key, s, n);
    key[n] = 0;
    cJSON *e = cJSON_GetObjectItemCaseSensitive(h->vocab, key);
    return cJSON_IsNumber(e) ? e->valueint : -1;
}

static int hf_rank(const hf_bpe *h, const char *a, size_t an, const char *b, size_t bn)
{
    for (int r = 0; r < h->merges; r++)
        if (strlen(h->merge_left[r]) == an && strlen(h->merge_right[r]) == bn && memcmp(h->merge_left[r], a, an) == 0 &&
            memcmp(h->merge_right[r], b, bn) == 0)
            return r;
    return -1;
}

static size_t hf_tokenize(const hf_bpe *h, const char *text, size_t len, int32_t *ids)
{
    char *norm = malloc(3 * len + 4);
    size_t (*sym)[2] = malloc((3 * len + 4) * sizeof *sym);
    assert_true(norm && sym);
    size_t w = 3, n = 0, out = 0;
    memcpy(norm, SP, 3);
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(norm + w, SP, 3);
            w += 3;
        } else {
            norm[w++] = text[i];
        }
    }
    for (size_t i = 0; i < w; n++) {
        size_t c = ref_char((const unsigned char *)norm + i, w - i);
        sym[n][0] = i;
        sym[n][1] = c ? c : 1;
        i += sym[n][1];
    }
    for (;;) {
        int best_rank = -1;
        size_t best = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            int r = hf_rank(h, norm + sym[i][0], sym[i][1], norm + sym[i + 1][0], sym[i + 1][1]);
            if (r >= 0 && (best_rank < 0 || r < best_rank)) {
                best_rank = r;
                best = i;
            }
        }
        if (best_rank < 0)
            break;
        sym[best][1] += sym[best + 1][1];
        memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof *sym);
        n--;
    }
    for (size_t i = 0; i < n; i++) {
        int id = hf_id(h, norm + sym[i][0], sym[i][1]);
        if (id >= 0) {
            ids[out++] = id;
            continue;
        }
        for (size_t k = 0; k < sym[i][1]; k++) {
            char piece[8];
            snprintf(piece, sizeof piece, "<0x%02X>", (unsigned char)norm[sym[i][0] + k]);
            id = hf_id(h, piece, 6);
            assert_true(id >= 0);
            ids[out++] = id;
        }
    }
    free(norm);
    free(sym);
    return out;
}

/* tokenizer.json (Hugging Face) holds the same vocabulary: the same piece for every id, and its
 * BPE merges give the same ids. */
static void aidreams_tokenizer_json_agrees(void **state)
{
    (void)state;
    gguf_vocab g = {0};
    load_gguf_vocab(&g, "aidreams260K");
    char path[4096];
    snprintf(path, sizeof path, "%s/aidreams260K/hf/tokenizer.json", models_dir());
    char *json = nt_read_file(path);
    hf_bpe h = {0};
    h.root = cJSON_Parse(json);
    assert_non_null(h.root);
    cJSON *model = cJSON_GetObjectItemCaseSensitive(h.root, "model");
    h.vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    assert_true(cJSON_IsObject(h.vocab));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")));
    int seen = 0;
    for (cJSON *e = h.vocab->child; e; e = e->next) {
        assert_true(cJSON_IsNumber(e));
        int id = e->valueint;
        assert_true(id >= 0 && id < (int)g.tv->v.count);
        const nu_llm_piece *p = &g.pieces[id];
        if (p->length != strlen(e->string) || memcmp(p->text, e->string, p->length) != 0)
            fail_msg("id %d: GGUF \"%.*s\", tokenizer.json \"%s\"", id, (int)p->length, p->text, e->string);
        seen++;
    }
    assert_int_equal(seen, (int)g.tv->v.count);

    /* Merges: ["a", "b"] pairs (or "a b" strings, the older form). */
    cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    h.merges = cJSON_GetArraySize(merges);
    assert_true(h.merges > 0);
    h.merge_left = calloc((size_t)h.merges, sizeof *h.merge_left);
    h.merge_right = calloc((size_t)h.merges, sizeof *h.merge_right);
    assert_true(h.merge_left && h.merge_right);
    int r = 0;
    for (cJSON *m = merges->child; m; m = m->next, r++) {
        if (cJSON_IsArray(m)) {
            h.merge_left[r] = strdup(cJSON_GetArrayItem(m, 0)->valuestring);
            h.merge_right[r] = strdup(cJSON_GetArrayItem(m, 1)->valuestring);
        } else {
            assert_true(cJSON_IsString(m));
            const char *sp = strchr(m->valuestring, ' ');
            assert_non_null(sp);
            h.merge_left[r] = strndup(m->valuestring, (size_t)(sp - m->valuestring));
            h.merge_right[r] = strdup(sp + 1);
        }
    }
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(&g.tv->v, &t));
    uint64_t rng = 7;
    static const char *parts[] = {"the ", "dream", " of", "\xC3\xA9", " ", "ing", "x", "\n", "\xE2\x98\x83", "Q",
                                  "0.", "whisper", "s", ",", "  ", "I ", "softly", "refine", "vector", "es"};
    for (int k = 0; k < 300 + (int)(sizeof ROUND_TRIPS / sizeof ROUND_TRIPS[0]); k++) {
        char text[400];
        size_t len = 0;
        if (k < (int)(sizeof ROUND_TRIPS / sizeof ROUND_TRIPS[0])) {
            if (strstr(ROUND_TRIPS[k], "<s>"))
                continue; /* Hugging Face reads <s> in text as the special token */
            len = strlen(ROUND_TRIPS[k]);
            memcpy(text, ROUND_TRIPS[k], len);
        } else {
            int n_parts = (int)(nt_rand(&rng) % 30);
            for (int p = 0; p < n_parts; p++) {
                const char *part = parts[nt_rand(&rng) % (sizeof parts / sizeof parts[0])];
                memcpy(text + len, part, strlen(part));
                len += strlen(part);
            }
        }
        if (len == 0)
            continue; /* Hugging Face prepends U+2581 to empty text too; SentencePiece does not */
        int32_t got[1300], want[1300];
        size_t n;
        LLM_OK(nu_llm_tokenize(t, text, len, 0, got, 1300, &n));
        size_t m = hf_tokenize(&h, text, len, want);
        size_t i = 0;
        while (i < n && i < m && got[i] == want[i])
            i++;
        if (n != m || i != n)
            fail_msg("\"%.*s\": %zu ids, Hugging Face's BPE %zu; first difference at %zu", (int)len, text, n, m, i);
    }
    nu_llm_tokenizer_free(t);
    for (int i = 0; i < h.merges; i++) {
        free(h.merge_left[i]);
        free(h.merge_right[i]);
    }
    free(h.merge_left);
    free(h.merge_right);
    cJSON_Delete(h.root);
    free(json);
    free_gguf_vocab(&g);
}

/* stories260K's placeholder vocabulary: text becomes byte tokens only (README). */
static void stories_placeholder_vocabulary(void **state)
{
    (void)state;
    gguf_vocab g = {0};
    load_gguf_vocab(&g, "stories260K");
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(&g.tv->v, &t));
    int32_t ids[32];
    size_t n;
    LLM_OK(nu_llm_tokenize(t, "Hi", 2, -1, ids, 32, &n));
    assert_int_equal(n, 6); /* bos, then U+2581's three bytes, 'H', 'i' */
    const int32_t want[] = {1, 3 + 0xE2, 3 + 0x96, 3 + 0x81, 3 + 'H', 3 + 'i'};
    assert_memory_equal(ids, want, sizeof want);
    nu_llm_tokenizer_free(t);
    free_gguf_vocab(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(merges_by_score_leftmost_on_ties),
        cmocka_unit_test(space_prefix_and_bos),
        cmocka_unit_test(byte_fallback_unknown_and_utf8),
        cmocka_unit_test(duplicates_and_types),
        cmocka_unit_test(vocabulary_checks),
        cmocka_unit_test(call_checks_and_short_buffers),
        cmocka_unit_test(streaming_decode_of_byte_sequences),
        cmocka_unit_test(matches_the_plain_rule_on_random_input),
        cmocka_unit_test(every_allocation_fails_cleanly),
        cmocka_unit_test(long_texts),
        cmocka_unit_test(aidreams_vocabulary),
        cmocka_unit_test(aidreams_tokenizer_json_agrees),
        cmocka_unit_test(stories_placeholder_vocabulary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
