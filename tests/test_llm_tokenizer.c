/* test_llm_tokenizer.c: the llm component's SentencePiece-style tokenizer (llm/tokenizer/spm.c)
 * and what both kinds share, no device needed. On hand-made vocabularies: merges by score, the
 * leftmost of ties, byte fallback, the unknown token, multi-byte characters, invalid UTF-8, empty
 * text, decoding (leading space, byte tokens put back together, the streaming detokenizer, U+FFFD
 * for invalid UTF-8), special tokens in the text (user-defined always, control with
 * parse_special, lstrip / rstrip), the end-of-generation set and llama.cpp's recognition by text,
 * the vocabulary's checks, every host allocation failed in turn, long texts; and against a plain
 * O(n^2) implementation of the rule on random texts and vocabularies. The real vocabularies are
 * test_llm_tokenizer_models.c's, byte-level BPE test_llm_tokenizer_bpe.c's. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "llm_tokenizer_util.h"
#include "tokenizer/tok.h"

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
    EXPECT(t, "zzz", ud, z);    /* user-defined ones are split out first; undefined ones merge */
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
    nu_llm_tokenizer_free(t);
    /* The longest piece counts its space (kept after any token but bos). */
    int32_t hello = add(&tv, SP "hello", 2, 1);
    t = make(&tv);
    assert_int_equal(nu_llm_tokenizer_max_piece(t), 6);
    LLM_OK(nu_llm_token_to_text(t, hello, sphi, buf, 6, &len));
    assert_true(len == 6 && !memcmp(buf, " hello", 6));
    LLM_OK(nu_llm_tokenize(t, "hi hi hi", 8, 1, ids, 4, &n));

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

/* Special tokens written in the text: user-defined ones always (before any merge), control and
 * unknown ones with parse_special; the longest first; a space in front of the text after each. */
static void special_tokens_in_text(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    int32_t a = add(&tv, "a", 0, 1), b = add(&tv, "b", 0, 1), spa = add(&tv, SP "a", 1, 1);
    int32_t ab = add(&tv, "ab", 5, 1), ud = add(&tv, "bc", 0, NU_LLM_TOKEN_USER_DEFINED);
    int32_t ctl = add(&tv, "<c>", 0, NU_LLM_TOKEN_CONTROL), ctl2 = add(&tv, "<c><c>", 0, NU_LLM_TOKEN_CONTROL);
    int32_t sp = add(&tv, SP, 0, 1);
    nu_llm_tokenizer *t = make(&tv);
    /* "ab" would merge first, but the user-defined "bc" is split out before merges run; the
     * text after a special token gets its space in front, as the text's start does. */
    EXPECT(t, "abc", spa, ud);
    EXPECT(t, "bca", ud, spa);
    EXPECT(t, "ab", sp, ab);
    /* Without parse_special control tokens are text (their bytes here). */
    EXPECT(t, "<c>", sp, BYTE('<'), BYTE('c'), BYTE('>'));
    nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, true};
    int32_t ids[32];
    size_t n;
    LLM_OK(nu_llm_tokenize_ex(t, "<c>a<c><c><c>bc<unk>", 20, &o, ids, 32, &n));
    const int32_t want[] = {ctl, spa, ctl2, ctl, ud, 0};
    assert_int_equal(n, sizeof want / sizeof want[0]);
    assert_memory_equal(ids, want, sizeof want);
    /* The special tokens decode as nothing (control) and U+2047 (unknown), or as their text; the
     * space put in front of "a" stays (only the text's first piece loses it, as llama.cpp). */
    char buf[64];
    size_t len;
    LLM_OK(nu_llm_detokenize_ex(t, ids, n, NULL, buf, sizeof buf, &len));
    assert_string_equal(buf, " abc\xE2\x81\x87");
    nu_llm_decode_options special = {true, false};
    LLM_OK(nu_llm_detokenize_ex(t, ids, n, &special, buf, sizeof buf, &len));
    assert_string_equal(buf, "<c> a<c><c><c>bc<unk>");
    (void)a, (void)b;
    nu_llm_tokenizer_free(t);

    /* lstrip / rstrip: the whitespace beside the token goes with it. */
    nu_llm__desc d;
    nu_llm__desc_init(&d);
    d.v = tv.v;
    uint8_t flags[MAX_TOKENS] = {0};
    flags[ud] = NU_LLM__LSTRIP | NU_LLM__RSTRIP;
    d.flags = flags;
    LLM_OK(nu_llm__build(&d, &t));
    EXPECT(t, "a  bc \ta", spa, ud, spa);
    EXPECT(t, "bc", ud);
    EXPECT(t, " bc ", ud);
    nu_llm_tokenizer_free(t);
}

/* llama.cpp's end-of-generation set and its recognition of special tokens by text. */
static void end_of_generation_and_recognition(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    int32_t eot = add(&tv, "<|eot_id|>", 0, NU_LLM_TOKEN_NORMAL), im_end = add(&tv, "<|im_end|>", 0, 3);
    int32_t eom = add(&tv, "<|eom_id|>", 0, 1), pad = add(&tv, "<|fim_pad|>", 0, 1), pre = add(&tv, "<PRE>", 0, 1);
    int32_t word = add(&tv, "word", 0, 1), shown = add(&tv, "<|channel|>", 0, 3);
    nu_llm_tokenizer *t = make(&tv);
    int32_t want[] = {2, eot, im_end, eom, pad};
    int32_t got[16];
    assert_int_equal(nu_llm_tokenizer_eog(t, got, 16), 5);
    assert_memory_equal(got, want, sizeof want);
    assert_int_equal(nu_llm_tokenizer_eog(t, NULL, 0), 5);
    assert_true(nu_llm_tokenizer_is_eog(t, 2) && nu_llm_tokenizer_is_eog(t, eot) && nu_llm_tokenizer_is_eog(t, eom));
    assert_false(nu_llm_tokenizer_is_eog(t, word) || nu_llm_tokenizer_is_eog(t, 1) || nu_llm_tokenizer_is_eog(t, -1) ||
                 nu_llm_tokenizer_is_eog(t, 99999) || nu_llm_tokenizer_is_eog(NULL, 2));
    /* The first text of llama.cpp's list the vocabulary has: <|eot_id|> before <|im_end|>. */
    assert_int_equal(nu_llm_tokenizer_special(t, NU_LLM_SPECIAL_EOT), eot);
    assert_int_equal(nu_llm_tokenizer_special(t, NU_LLM_SPECIAL_EOM), eom);
    assert_int_equal(nu_llm_tokenizer_special(t, NU_LLM_SPECIAL_FIM_PAD), pad);
    assert_int_equal(nu_llm_tokenizer_special(t, NU_LLM_SPECIAL_FIM_PRE), pre);
    assert_int_equal(nu_llm_tokenizer_special(t, NU_LLM_SPECIAL_FIM_SEP), NU_LLM_NO_TOKEN);
    assert_int_equal(nu_llm_tokenizer_special(t, NU_LLM_SPECIAL_COUNT), NU_LLM_NO_TOKEN);
    /* They become control tokens (never made from text, decoded as nothing); gpt-oss's shown
     * ones user-defined. */
    assert_int_equal(nu_llm_tokenizer_type(t, eot), NU_LLM_TOKEN_CONTROL);
    assert_int_equal(nu_llm_tokenizer_type(t, pre), NU_LLM_TOKEN_CONTROL);
    assert_int_equal(nu_llm_tokenizer_type(t, shown), NU_LLM_TOKEN_USER_DEFINED);
    assert_int_equal(nu_llm_tokenizer_type(t, word), NU_LLM_TOKEN_NORMAL);
    assert_int_equal(nu_llm_tokenizer_type(t, 5000), NU_LLM_TOKEN_UNDEFINED);
    nu_llm_piece p;
    LLM_OK(nu_llm_tokenizer_piece(t, eot, &p));
    assert_true(p.length == 10 && !memcmp(p.text, "<|eot_id|>", 10));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenizer_piece(t, -1, &p));
    assert_null(p.text);
    assert_int_equal(nu_llm_tokenizer_find(t, "<|eot_id|>", 10), eot);
    assert_int_equal(nu_llm_tokenizer_find(t, "<s>", 3), 1);
    assert_int_equal(nu_llm_tokenizer_find(t, "nope", 4), NU_LLM_NO_TOKEN);
    assert_string_equal(nu_llm_tokenizer_model(t), "llama");
    assert_string_equal(nu_llm_tokenizer_pre(t), "");
    assert_null(nu_llm_tokenizer_chat_template(t));
    nu_llm_tokenizer_free(t);

    /* gpt-oss: with <|return|> and <|call|>, <|end|> ends a message, not the generation; Gemma 4:
     * with <|tool_response>, </s> is text. */
    vocab_init(&tv, true);
    int32_t ret = add(&tv, "<|return|>", 0, 3), call = add(&tv, "<|call|>", 0, 3), end = add(&tv, "<|end|>", 0, 3);
    int32_t tool = add(&tv, "<|tool_response>", 0, 3);
    t = make(&tv);
    int32_t want2[] = {ret, call, tool};
    assert_int_equal(nu_llm_tokenizer_eog(t, got, 16), 3);
    assert_memory_equal(got, want2, sizeof want2);
    assert_int_equal(nu_llm_tokenizer_type(t, end), NU_LLM_TOKEN_USER_DEFINED);
    assert_int_equal(nu_llm_tokenizer_type(t, 2), NU_LLM_TOKEN_NORMAL);
    nu_llm_tokenizer_free(t);

    /* A reader's extra ids (config.json's eos lists) and named ids. */
    vocab_init(&tv, true);
    word = add(&tv, "word", 0, 1);
    nu_llm__desc d;
    nu_llm__desc_init(&d);
    d.v = tv.v;
    int32_t extra[] = {word};
    d.eog = extra;
    d.eog_count = 1;
    d.special[NU_LLM_SPECIAL_EOT] = 1;
    LLM_OK(nu_llm__build(&d, &t));
    int32_t want3[] = {1, 2, word};
    assert_int_equal(nu_llm_tokenizer_eog(t, got, 16), 3);
    assert_memory_equal(got, want3, sizeof want3);
    nu_llm_tokenizer_free(t);
    extra[0] = 9999;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm__build(&d, &t));
    assert_null(t);
}

/* The options: bos and eos as the vocabulary says or forced either way. */
static void tokenize_options(void **state)
{
    (void)state;
    test_vocab tv;
    vocab_init(&tv, true);
    int32_t spa = add(&tv, SP "a", 1, 1);
    tv.v.add_eos = true;
    nu_llm_tokenizer *t = make(&tv);
    assert_true(nu_llm_tokenizer_add_bos(t) && nu_llm_tokenizer_add_eos(t));
    int32_t ids[8];
    size_t n;
    LLM_OK(nu_llm_tokenize_ex(t, "a", 1, NULL, ids, 8, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(ids, ((int32_t[]){1, spa, 2}), 3 * sizeof *ids);
    nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_YES, false};
    LLM_OK(nu_llm_tokenize_ex(t, "a", 1, &o, ids, 8, &n));
    assert_memory_equal(ids, ((int32_t[]){spa, 2}), 2 * sizeof *ids);
    LLM_OK(nu_llm_tokenize(t, "a", 1, -1, ids, 8, &n)); /* never eos */
    assert_int_equal(n, 2);
    o.add_bos = (nu_llm_add)7;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenize_ex(t, "a", 1, &o, ids, 8, &n));
    nu_llm_tokenizer_free(t);
    tv.v.eos = NU_LLM_NO_TOKEN;
    t = (nu_llm_tokenizer *)&tv;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenizer_new(&tv.v, &t)); /* add_eos without eos */
    assert_null(t);
    tv.v.add_eos = false;
    t = make(&tv);
    o = (nu_llm_tokenize_options){NU_LLM_ADD_DEFAULT, NU_LLM_ADD_YES, false};
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenize_ex(t, "a", 1, &o, ids, 8, &n));
    assert_int_equal(n, 0);
    /* The longest text, and the bound on the ids. */
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_tokenize(t, "a", (size_t)NU_LLM_MAX_TEXT + 1, 0, ids, 8, &n));
    assert_non_null(strstr(nu_llm_error_message(), "too long"));
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

    /* nu_llm_detokenizer: every chunk valid UTF-8, the stray 0xFF as U+FFFD, all of them together
     * nu_llm_detokenize_ex's text; a character cut by the end of the text is U+FFFD at flush. */
    char valid[256];
    size_t vlen;
    LLM_OK(nu_llm_detokenize_ex(t, ids, n, NULL, valid, sizeof valid, &vlen));
    assert_string_equal(valid, "a \xC3\xA9\xE2\x98\x83 a\xF0\x9F\x98\x80\xEF\xBF\xBD a");
    nu_llm_detokenizer *d = NULL;
    LLM_OK(nu_llm_detokenizer_new(t, NULL, &d));
    for (int round = 0; round < 2; round++) {
        out = 0;
        for (size_t i = 0; i < n; i++) {
            const char *piece;
            size_t got;
            LLM_OK(nu_llm_detokenizer_push(d, ids[i], &piece, &got));
            assert_true(nu_llm_utf8_valid(piece, got));
            memcpy(printed + out, piece, got);
            out += got;
        }
        const char *rest;
        size_t got;
        LLM_OK(nu_llm_detokenizer_flush(d, &rest, &got)); /* also starts over */
        assert_int_equal(got, 0);
        assert_int_equal(out, vlen);
        assert_memory_equal(printed, valid, vlen);
    }
    const char *piece;
    size_t got;
    LLM_OK(nu_llm_detokenizer_push(d, BYTE(0xE2), &piece, &got));
    LLM_OK(nu_llm_detokenizer_push(d, BYTE(0x98), &piece, &got));
    assert_int_equal(got, 0); /* held: a character not complete yet */
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_detokenizer_push(d, 99999, &piece, &got));
    assert_string_equal(piece, "");
    LLM_OK(nu_llm_detokenizer_flush(d, &piece, &got));
    assert_true(got == 3 && !memcmp(piece, "\xEF\xBF\xBD", 3));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_detokenizer_push(NULL, 1, &piece, &got));
    nu_llm_detokenizer_free(d);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_detokenizer_new(NULL, NULL, &d));
    assert_null(d);
    nu_llm_detokenizer_free(NULL);
    nu_llm_tokenizer_free(t);
}

/* nu_llm_utf8_sanitize and nu_llm_utf8_valid: one U+FFFD per maximal invalid subpart. */
static void utf8_sanitize(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"\xC3\xA9\xE2\x98\x83\xF0\x9F\x98\x80", "\xC3\xA9\xE2\x98\x83\xF0\x9F\x98\x80"},
        {"\xFF", "\xEF\xBF\xBD"},
        {"a\xC3", "a\xEF\xBF\xBD"},                    /* truncated */
        {"\xE2\x98x", "\xEF\xBF\xBDx"},              /* one U+FFFD for the two bytes */
        {"\xF0\x9F\x98" "A", "\xEF\xBF\xBD" "A"},
        {"\xE0\x80\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* overlong: E0 leads A0..BF only */
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* a surrogate */
        {"\xC0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"}, /* U+10FFFF */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char out[64];
        size_t n = 99, len = strlen(cases[k].in);
        LLM_OK(nu_llm_utf8_sanitize(cases[k].in, len, out, sizeof out, &n));
        if (strcmp(out, cases[k].out) || n != strlen(cases[k].out))
            fail_msg("case %zu: got %zu bytes", k, n);
        assert_true(nu_llm_utf8_valid(out, n));
        assert_int_equal(nu_llm_utf8_valid(cases[k].in, len), !strcmp(cases[k].in, cases[k].out));
    }
    char out[4];
    size_t n;
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_utf8_sanitize("\xFF", 1, out, 3, &n));
    assert_int_equal(n, 3);
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_utf8_sanitize("\xFF", 1, NULL, 0, &n));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_utf8_sanitize(NULL, 1, out, 4, &n));
    LLM_OK(nu_llm_utf8_sanitize(NULL, 0, out, 1, &n));
    assert_int_equal(n, 0);
    assert_true(nu_llm_utf8_valid(NULL, 0) && !nu_llm_utf8_valid(NULL, 1));
    /* Random bytes: always valid out, never more than 3 bytes a byte, valid input unchanged. */
    uint64_t rng = 5;
    for (int k = 0; k < 2000; k++) {
        char in[32], res[100];
        size_t len = nt_rand(&rng) % 32;
        for (size_t i = 0; i < len; i++)
            in[i] = (char)(nt_rand(&rng) % 4 ? 0x80 + nt_rand(&rng) % 0x80 : nt_rand(&rng) % 0x80);
        LLM_OK(nu_llm_utf8_sanitize(in, len, res, sizeof res, &n));
        assert_true(n <= 3 * len && nu_llm_utf8_valid(res, n));
        if (nu_llm_utf8_valid(in, len))
            assert_true(n == len && !memcmp(in, res, len));
    }
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
    add(&tv, "zz", 0, NU_LLM_TOKEN_USER_DEFINED);
    nu_llm_tokenize_options o = {NU_LLM_ADD_YES, NU_LLM_ADD_NO, false};
    expect_failing_allocations(&tv.v, "a a azz a \xC3\xA9", &o, 100);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(merges_by_score_leftmost_on_ties),
        cmocka_unit_test(space_prefix_and_bos),
        cmocka_unit_test(byte_fallback_unknown_and_utf8),
        cmocka_unit_test(duplicates_and_types),
        cmocka_unit_test(vocabulary_checks),
        cmocka_unit_test(call_checks_and_short_buffers),
        cmocka_unit_test(special_tokens_in_text),
        cmocka_unit_test(end_of_generation_and_recognition),
        cmocka_unit_test(tokenize_options),
        cmocka_unit_test(streaming_decode_of_byte_sequences),
        cmocka_unit_test(utf8_sanitize),
        cmocka_unit_test(matches_the_plain_rule_on_random_input),
        cmocka_unit_test(every_allocation_fails_cleanly),
        cmocka_unit_test(long_texts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
