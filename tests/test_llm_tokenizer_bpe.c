/* test_llm_tokenizer_bpe.c: byte-level BPE (llm/tokenizer/bpe.c, pretok.c) on vocabularies built by
 * the test, no device needed: merges by rank with the leftmost of ties, merges that make better
 * pairs later, ignore_merges, GPT-2's byte alphabet both ways, the pre-tokenizers' splits by name
 * (GPT-2, Llama 3, Qwen2, StarCoder, DeepSeek, tekken, GPT-4o, SuperBPE, ...), invalid UTF-8 kept
 * byte for byte, a byte without a token (unk), the vocabulary's checks (unknown pre, malformed
 * merges), Hugging Face's add_prefix_space, every host allocation failed in turn, random texts
 * against a plain O(n^2) BPE, and a word of a million bytes. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm_tokenizer_util.h"
#include "tokenizer/tok.h"

/* A byte-level vocabulary: tokens 0 .. 255 the bytes in GPT-2's alphabet, then the test's; merges
 * "left right" in rank order. */
typedef struct bpe_vocab {
    nu_llm_vocab v;
    nu_llm_piece pieces[MAX_TOKENS], merges[MAX_TOKENS];
    int32_t types[MAX_TOKENS];
    char text[MAX_TOKENS][40], merge_text[MAX_TOKENS][80];
} bpe_vocab;

static void bpe_init(bpe_vocab *bv, const char *pre)
{
    memset(bv, 0, sizeof *bv);
    bv->v.pieces = bv->pieces;
    bv->v.types = bv->types;
    bv->v.merges = bv->merges;
    bv->v.bos = bv->v.eos = bv->v.unk = NU_LLM_NO_TOKEN;
    bv->v.model = "gpt2";
    bv->v.pre = pre;
    for (int b = 0; b < 256; b++) {
        alphabet(b, bv->text[b]);
        bv->pieces[b] = (nu_llm_piece){bv->text[b], strlen(bv->text[b])};
        bv->types[b] = NU_LLM_TOKEN_NORMAL;
    }
    bv->v.count = 256;
}

/* A token whose text is `text` written in the alphabet (' ' as Ġ), unless the type says raw. */
static int32_t bpe_add(bpe_vocab *bv, const char *text, int32_t type)
{
    uint32_t i = bv->v.count++;
    char *out = bv->text[i];
    size_t n = 0;
    for (const char *c = text; *c; c++) {
        char a[4] = {*c, 0};
        if (type == NU_LLM_TOKEN_NORMAL)
            alphabet((unsigned char)*c, a);
        memcpy(out + n, a, strlen(a));
        n += strlen(a);
    }
    out[n] = 0;
    bv->pieces[i] = (nu_llm_piece){out, n};
    bv->types[i] = type;
    return (int32_t)i;
}

/* The merge of the alphabet forms of `left` and `right`, ranked after the ones before. */
static void bpe_merge(bpe_vocab *bv, const char *left, const char *right)
{
    char *m = bv->merge_text[bv->v.merge_count];
    m[0] = 0;
    for (int side = 0; side < 2; side++) {
        for (const char *c = side ? right : left; *c; c++) {
            char a[4];
            alphabet((unsigned char)*c, a);
            strcat(m, a);
        }
        if (!side)
            strcat(m, " ");
    }
    bv->merges[bv->v.merge_count] = (nu_llm_piece){m, strlen(m)};
    bv->v.merge_count++;
}

/* The words the pre-tokenizer `name` splits text into, joined by '|'. */
static void expect_words(const char *name, const char *text, const char *want);

typedef struct words {
    char joined[1024];
} words;

static nu_status collect(void *user, const char *s, size_t n)
{
    words *w = user;
    if (w->joined[0])
        strcat(w->joined, "|");
    strncat(w->joined, s, n);
    return NU_OK;
}

static void expect_words(const char *name, const char *text, const char *want)
{
    nu_llm__pretok *p = NULL;
    LLM_OK(nu_llm__pretok_named(name, &p));
    nu_llm__work w = {0};
    words got = {{0}};
    LLM_OK(nu_llm__pretok_split(p, text, strlen(text), &w, collect, &got));
    if (strcmp(got.joined, want))
        fail_msg("%s: \"%s\" split as \"%s\", want \"%s\"", name, text, got.joined, want);
    nu_llm__work_free(&w);
    nu_llm__pretok_free(p);
}

static void expect_bpe(const nu_llm_tokenizer *t, const char *text, const int32_t *want, size_t n)
{
    int32_t ids[256];
    size_t got;
    nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, false};
    LLM_OK(nu_llm_tokenize_ex(t, text, strlen(text), &o, ids, 256, &got));
    if (got != n || memcmp(ids, want, n * sizeof *ids)) {
        char g[512] = "";
        for (size_t i = 0; i < got && i < 32; i++)
            snprintf(g + strlen(g), sizeof g - strlen(g), " %d", (int)ids[i]);
        fail_msg("\"%s\": got [%s ] (%zu ids, want %zu)", text, g, got, n);
    }
    char *back = detok(t, ids, got);
    assert_string_equal(back, text);
    free(back);
}
#define EXPECT_BPE(t, text, ...)                                                               \
    do {                                                                                       \
        const int32_t want_[] = {__VA_ARGS__};                                                 \
        expect_bpe(t, text, want_, sizeof want_ / sizeof want_[0]);                            \
    } while (0)

static nu_llm_tokenizer *bpe_make(bpe_vocab *bv)
{
    nu_llm_tokenizer *t = NULL;
    LLM_OK(nu_llm_tokenizer_new(&bv->v, &t));
    return t;
}

/* ---- Merges --------------------------------------------------------------------------------- */

static void merges_by_rank(void **state)
{
    (void)state;
    static bpe_vocab bv;
    bpe_init(&bv, "gpt-2");
    int32_t ab = bpe_add(&bv, "ab", 1), bc = bpe_add(&bv, "bc", 1), aa = bpe_add(&bv, "aa", 1);
    int32_t abc = bpe_add(&bv, "abc", 1), sa = bpe_add(&bv, " a", 1), sab = bpe_add(&bv, " ab", 1);
    bpe_merge(&bv, "b", "c"); /* rank 0 */
    bpe_merge(&bv, "a", "b");
    bpe_merge(&bv, "a", "a");
    bpe_merge(&bv, "a", "bc"); /* "abc" from "a" + "bc" only */
    bpe_merge(&bv, " ", "a");
    bpe_merge(&bv, " a", "b");
    nu_llm_tokenizer *t = bpe_make(&bv);
    EXPECT_BPE(t, "ab", ab);
    EXPECT_BPE(t, "abc", abc);     /* "bc" (rank 0) first, then "a" + "bc" */
    EXPECT_BPE(t, "abcbc", abc, bc);
    EXPECT_BPE(t, "aaa", aa, 'a'); /* the leftmost of ties */
    EXPECT_BPE(t, "aaaaa", aa, aa, 'a');
    EXPECT_BPE(t, "x", 'x');       /* bytes are tokens 0 .. 255 */
    EXPECT_BPE(t, " a", sa);
    EXPECT_BPE(t, " ab", ' ', ab); /* "a b" (rank 1) before " a" (4): " " + "ab" has no merge */
    (void)sab;
    nu_llm_tokenizer_free(t);
    assert_string_equal(nu_llm_tokenizer_model(t = bpe_make(&bv)), "gpt2");
    assert_string_equal(nu_llm_tokenizer_pre(t), "gpt-2");
    nu_llm_tokenizer_free(t);

    /* A merge makes a pair that ranks before pairs still waiting. */
    bpe_init(&bv, "gpt-2");
    int32_t xy = bpe_add(&bv, "xy", 1), xyz = bpe_add(&bv, "xyz", 1), yz = bpe_add(&bv, "yz", 1);
    bpe_merge(&bv, "x", "y");
    bpe_merge(&bv, "xy", "z");
    bpe_merge(&bv, "y", "z");
    t = bpe_make(&bv);
    EXPECT_BPE(t, "xyz", xyz);
    EXPECT_BPE(t, "yzxy", yz, xy);
    EXPECT_BPE(t, "xyzyz", xyz, yz);
    nu_llm_tokenizer_free(t);

    /* ignore_merges (Llama 3's pre-tokenizers): a word that is a token whole is that token, even
     * one no merge makes. */
    bpe_init(&bv, "llama-bpe");
    int32_t word = bpe_add(&bv, "abc", 1);
    bpe_add(&bv, "ab", 1);
    bpe_merge(&bv, "a", "b");
    t = bpe_make(&bv);
    EXPECT_BPE(t, "abc", word);
    EXPECT_BPE(t, "abcd", 256 + 1, 'c', 'd');
    nu_llm_tokenizer_free(t);
    bv.v.pre = "gpt-2"; /* without it: merges only */
    t = bpe_make(&bv);
    EXPECT_BPE(t, "abc", 256 + 1, 'c');
    nu_llm_tokenizer_free(t);

    /* Equal texts: the last one is produced (as llama.cpp's map); both decode. */
    bpe_init(&bv, "gpt-2");
    int32_t last = bpe_add(&bv, "q", 1);
    t = bpe_make(&bv);
    EXPECT_BPE(t, "q", last);
    assert_int_equal(nu_llm_tokenizer_find(t, bv.text['q'], 1), last);
    nu_llm_tokenizer_free(t);
}

/* ---- The byte alphabet, decoding ----------------------------------------------------------- */

static void byte_alphabet_and_decoding(void **state)
{
    (void)state;
    static bpe_vocab bv;
    bpe_init(&bv, "gpt-2");
    int32_t ctl = bpe_add(&bv, "<|endoftext|>", NU_LLM_TOKEN_CONTROL), ud = bpe_add(&bv, "<tool>", NU_LLM_TOKEN_USER_DEFINED);
    /* A normal token with a code point outside the alphabet (U+2603): decoded as its UTF-8. */
    uint32_t snow = bv.v.count++;
    strcpy(bv.text[snow], "a\xE2\x98\x83");
    bv.pieces[snow] = (nu_llm_piece){bv.text[snow], 4};
    bv.types[snow] = NU_LLM_TOKEN_NORMAL;
    nu_llm_tokenizer *t = bpe_make(&bv);
    char buf[64];
    size_t len;
    for (int b = 0; b < 256; b++) { /* each byte token decodes as its byte */
        LLM_OK(nu_llm_token_to_text(t, b, NU_LLM_NO_TOKEN, buf, sizeof buf, &len));
        assert_int_equal(len, 1);
        assert_int_equal((unsigned char)buf[0], b);
    }
    LLM_OK(nu_llm_token_to_text(t, ctl, NU_LLM_NO_TOKEN, buf, sizeof buf, &len));
    assert_int_equal(len, 0);
    LLM_OK(nu_llm_token_to_text(t, ud, NU_LLM_NO_TOKEN, buf, sizeof buf, &len));
    assert_true(len == 6 && !memcmp(buf, "<tool>", 6));
    LLM_OK(nu_llm_token_to_text(t, (int32_t)snow, NU_LLM_NO_TOKEN, buf, sizeof buf, &len));
    assert_true(len == 4 && !memcmp(buf, "a\xE2\x98\x83", 4));
    assert_int_equal(nu_llm_tokenizer_max_piece(t), 6);
    nu_llm_decode_options special = {true, false};
    int32_t ids[] = {ctl, 'h', 'i', ud};
    LLM_OK(nu_llm_detokenize_ex(t, ids, 4, &special, buf, sizeof buf, &len));
    assert_string_equal(buf, "<|endoftext|>hi<tool>");
    LLM_OK(nu_llm_detokenize_ex(t, ids, 4, NULL, buf, sizeof buf, &len));
    assert_string_equal(buf, "hi<tool>");
    /* User-defined tokens are split out of the text; control ones with parse_special. */
    EXPECT_BPE(t, "a<tool>b", 'a', ud, 'b');
    nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, true};
    size_t n;
    LLM_OK(nu_llm_tokenize_ex(t, "x<|endoftext|>", 14, &o, ids, 4, &n));
    assert_true(n == 2 && ids[0] == 'x' && ids[1] == ctl);
    assert_true(nu_llm_tokenizer_is_eog(t, ctl)); /* <|endoftext|> ends generation, by its text */
    nu_llm_tokenizer_free(t);
}

/* Bytes that are not UTF-8 are kept: each its byte token, the text back byte for byte. */
static void invalid_utf8_is_kept(void **state)
{
    (void)state;
    static bpe_vocab bv;
    bpe_init(&bv, "llama3");
    int32_t ab = bpe_add(&bv, "ab", 1);
    bpe_merge(&bv, "a", "b");
    nu_llm_tokenizer *t = bpe_make(&bv);
    EXPECT_BPE(t, "ab\xFF" "ab", ab, 0xFF, ab);
    EXPECT_BPE(t, "\xC3", 0xC3);
    EXPECT_BPE(t, "\xE2\x98" "ab", 0xE2, 0x98, ab);
    EXPECT_BPE(t, "\xED\xA0\x80", 0xED, 0xA0, 0x80);
    uint64_t rng = 17;
    for (int k = 0; k < 500; k++) {
        char text[64];
        size_t len = nt_rand(&rng) % 64;
        for (size_t i = 0; i < len; i++)
            text[i] = nt_rand(&rng) % 3 ? "ab \n1'\xC3\xA9"[nt_rand(&rng) % 9] : (char)nt_rand(&rng);
        int32_t ids[200];
        size_t n;
        nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, false};
        LLM_OK(nu_llm_tokenize_ex(t, text, len, &o, ids, 200, &n));
        assert_true(n <= len);
        char back[256];
        size_t blen;
        LLM_OK(nu_llm_detokenize(t, ids, n, back, sizeof back, &blen));
        assert_true(blen == len && !memcmp(back, text, len));
    }
    nu_llm_tokenizer_free(t);
}

/* ---- Pre-tokenizers ------------------------------------------------------------------------ */

static void pre_tokenizers(void **state)
{
    (void)state;
    expect_words("gpt-2", "Hello world's 123  \n x!!", "Hello| world|'s| 123|  \n| x|!!");
    /* \s is White_Space, as in Hugging Face and llama.cpp: U+0085 (NEL) and U+3000 are spaces,
     * U+180E (a format character) is not (PCRE2's own \s takes it). */
    expect_words("gpt-2", "a\xC2\x85\xC2\x85" "b", "a|\xC2\x85|\xC2\x85|b");
    expect_words("gpt-2", "a\xE3\x80\x80\xE3\x80\x80" "b", "a|\xE3\x80\x80|\xE3\x80\x80|b");
    expect_words("gpt-2", "a\xE1\xA0\x8E\xE1\xA0\x8E" "b", "a|\xE1\xA0\x8E\xE1\xA0\x8E|b");
    expect_words("gpt-2", "a\xFF" "b", "a|\xFF|b");           /* invalid UTF-8: a piece alone */
    expect_words("llama-bpe", "I'M 12345 ok\n\n  x", "I|'M| |123|45| ok|\n\n| | x");
    expect_words("llama-bpe", "(a)b", "(a|)b");
    expect_words("qwen2", "12345 x", "1|2|3|4|5| x");
    expect_words("starcoder", "ab 123", "ab| |1|2|3");
    expect_words("deepseek-llm", "ab\ncd  ", "ab|\n|cd|  ");
    expect_words("deepseek-llm", "\xE4\xBD\xA0\xE5\xA5\xBD world", "\xE4\xBD\xA0\xE5\xA5\xBD| world");
    expect_words("deepseek-coder", "a1b2", "a|1|b|2");
    expect_words("tekken", "HelloWorld x", "Hello|World| x");
    expect_words("gpt-4o", "HelloWorld's 12345", "Hello|World's| |123|45");
    expect_words("superbpe", "1234567", "1|234|567");
    expect_words("tiny_aya", "1234567", "1|234|567");
    expect_words("falcon", "a,b 1234", "a|,|b| |123|4");
    expect_words("default", "a,b 1234", "a|,|b| |123|4");
    expect_words("bloom", "a, b.", "a|,| b|.");
    expect_words("chameleon", "<sentinel:7>x", "<|sentinel|:|7|>|x");
    expect_words("bailingmoe", "it's 12", "it|'s| |1|2");
    nu_llm__pretok *p = (nu_llm__pretok *)&p;
    LLM_STATUS(NU_ERROR_UNSUPPORTED, nu_llm__pretok_named("kimi-k2", &p));
    assert_null(p);
    assert_non_null(strstr(nu_llm_error_message(), "\"kimi-k2\""));
    const char *bad[] = {"(unclosed"};
    LLM_STATUS(NU_ERROR_UNSUPPORTED, nu_llm__pretok_new(bad, 1, &p));
    assert_non_null(strstr(nu_llm_error_message(), "(unclosed"));
    bool ignore, bos;
    assert_true(nu_llm__pretok_info("llama3", &ignore, &bos) && ignore && bos);
    assert_true(nu_llm__pretok_info("qwen2", &ignore, &bos) && !ignore && !bos);
    assert_false(nu_llm__pretok_info("nope", &ignore, &bos) || ignore || bos);
}

/* ---- The vocabulary's checks --------------------------------------------------------------- */

static void vocabulary_checks(void **state)
{
    (void)state;
    static bpe_vocab bv;
    nu_llm_tokenizer *t;
#define BPE_REFUSED(status, change, words)                                                     \
    do {                                                                                       \
        bpe_init(&bv, "gpt-2");                                                                \
        bpe_add(&bv, "ab", 1);                                                                 \
        bpe_merge(&bv, "a", "b");                                                              \
        change;                                                                                \
        t = (nu_llm_tokenizer *)&bv;                                                           \
        LLM_STATUS(status, nu_llm_tokenizer_new(&bv.v, &t));                                   \
        assert_null(t);                                                                        \
        if (!strstr(nu_llm_error_message(), words))                                            \
            fail_msg("message \"%s\" lacks \"%s\"", nu_llm_error_message(), words);            \
    } while (0)
    BPE_REFUSED(NU_ERROR_UNSUPPORTED, bv.v.pre = "not-a-pre", "\"not-a-pre\"");
    BPE_REFUSED(NU_ERROR_UNSUPPORTED, bv.v.model = "bert", "bert");
    BPE_REFUSED(NU_ERROR_FORMAT, bv.merges[0].length = 2, "merge 0");                /* "a " */
    BPE_REFUSED(NU_ERROR_FORMAT, (bv.merge_text[0][1] = 'x', bv.merges[0].length = 3), "not two pieces");
    BPE_REFUSED(NU_ERROR_FORMAT, bpe_merge(&bv, "b", "c"), "merge 1 \"b c\": \"bc\" is not a token");
    BPE_REFUSED(NU_ERROR_FORMAT, bpe_merge(&bv, "qq", "c"), "\"qq\" is not a token");
    BPE_REFUSED(NU_ERROR_FORMAT, bv.text['A'][0] = '?', "no token for byte 0x41");
    BPE_REFUSED(NU_ERROR_INVALID_ARGUMENT, bv.v.merges = NULL, "no merges array");
#undef BPE_REFUSED
    /* A byte without a token, with an unknown token: that byte becomes unk. */
    bpe_init(&bv, "gpt-2");
    int32_t unk = bpe_add(&bv, "<unk>", NU_LLM_TOKEN_UNKNOWN);
    bv.v.unk = unk;
    bv.text['A'][0] = '?';
    t = bpe_make(&bv);
    int32_t ids[8];
    size_t n;
    LLM_OK(nu_llm_tokenize_ex(t, "xA", 2, NULL, ids, 8, &n));
    assert_true(n == 2 && ids[0] == 'x' && ids[1] == unk);
    nu_llm_tokenizer_free(t);
}

/* Hugging Face's ByteLevel add_prefix_space: a space in front of each piece of text. */
static void add_prefix_space(void **state)
{
    (void)state;
    static bpe_vocab bv;
    bpe_init(&bv, "gpt-2");
    int32_t sa = bpe_add(&bv, " a", 1), ud = bpe_add(&bv, "<x>", NU_LLM_TOKEN_USER_DEFINED);
    bpe_merge(&bv, " ", "a");
    bv.v.add_space_prefix = true;
    nu_llm_tokenizer *t = bpe_make(&bv);
    int32_t ids[8];
    size_t n;
    LLM_OK(nu_llm_tokenize_ex(t, "a<x>a a", 7, NULL, ids, 8, &n));
    const int32_t want[] = {sa, ud, sa, sa};
    assert_int_equal(n, 4);
    assert_memory_equal(ids, want, sizeof want);
    nu_llm_tokenizer_free(t);
}

/* ---- Against a plain BPE ------------------------------------------------------------------- */

/* GPT-2's rule written plainly: the text split as gpt-2's pre-tokenizer splits it (here on a
 * small alphabet: runs of letters with an optional space in front, runs of spaces), each word's
 * symbols merged by the lowest rank, leftmost first, O(n^2). */
static size_t plain_bpe(const bpe_vocab *bv, const char *text, size_t len, int32_t *ids)
{
    size_t out = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        bool letter_next = text[i] == ' ' && i + 1 < len && text[i + 1] != ' ';
        if (text[i] != ' ' || letter_next) {
            j = i + 1;
            while (j < len && text[j] != ' ')
                j++;
        } else {
            while (j < len && text[j] == ' ')
                j++;
            if (j < len && j - i > 1)
                j--; /* \s+(?!\S): the last space goes with the word after it */
        }
        char sym[64][64];
        size_t n = 0;
        for (size_t k = i; k < j; k++)
            alphabet((unsigned char)text[k], sym[n++]);
        for (;;) {
            size_t best = SIZE_MAX;
            uint32_t best_rank = UINT32_MAX;
            for (size_t k = 0; k + 1 < n; k++) {
                char m[130];
                snprintf(m, sizeof m, "%s %s", sym[k], sym[k + 1]);
                for (uint32_t r = 0; r < bv->v.merge_count && r < best_rank; r++)
                    if (bv->merges[r].length == strlen(m) && !memcmp(bv->merges[r].text, m, strlen(m)))
                        best_rank = r, best = k;
            }
            if (best == SIZE_MAX)
                break;
            memcpy(sym[best] + strlen(sym[best]), sym[best + 1], strlen(sym[best + 1]) + 1);
            memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof sym[0]);
            n--;
        }
        for (size_t k = 0; k < n; k++) {
            int32_t id = -1;
            for (uint32_t v = 0; v < bv->v.count; v++)
                if (bv->pieces[v].length == strlen(sym[k]) && !memcmp(bv->pieces[v].text, sym[k], strlen(sym[k])))
                    id = (int32_t)v;
            assert_true(id >= 0);
            ids[out++] = id;
        }
        i = j;
    }
    return out;
}

static void matches_a_plain_bpe(void **state)
{
    (void)state;
    static bpe_vocab bv;
    static const char letters[] = "abc ";
    uint64_t rng = 77;
    for (int round = 0; round < 30; round++) {
        bpe_init(&bv, "gpt-2");
        /* Random merges over the alphabet, each making a token of its two parts' texts. */
        char made[MAX_TOKENS][24];
        int nmade = 4;
        strcpy(made[0], "a"), strcpy(made[1], "b"), strcpy(made[2], "c"), strcpy(made[3], " ");
        for (int k = 0; k < 40 && nmade < 200; k++) {
            const char *l = made[nt_rand(&rng) % nmade], *r = made[nt_rand(&rng) % (nmade > 3 ? 3 : nmade)];
            if (strlen(l) + strlen(r) > 8)
                continue;
            char both[48];
            snprintf(both, sizeof both, "%s%s", l, r);
            bool known = false;
            for (int q = 0; q < nmade; q++)
                known |= !strcmp(made[q], both);
            if (!known) {
                memcpy(made[nmade++], both, strlen(both) + 1); /* at most 8 bytes and the NUL */
                bpe_add(&bv, both, 1);
            }
            bpe_merge(&bv, l, r);
        }
        nu_llm_tokenizer *t = bpe_make(&bv);
        for (int s = 0; s < 20; s++) {
            char text[48];
            size_t len = nt_rand(&rng) % 40;
            for (size_t i = 0; i < len; i++)
                text[i] = letters[nt_rand(&rng) % 4];
            int32_t got[64], want[64];
            size_t n;
            nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, false};
            LLM_OK(nu_llm_tokenize_ex(t, text, len, &o, got, 64, &n));
            size_t m = plain_bpe(&bv, text, len, want);
            if (n != m || memcmp(got, want, n * sizeof *got))
                fail_msg("round %d: \"%.*s\": %zu ids, the plain BPE %zu", round, (int)len, text, n, m);
        }
        nu_llm_tokenizer_free(t);
    }
}

/* ---- Failures and limits -------------------------------------------------------------------- */

static void every_allocation_fails_cleanly(void **state)
{
    (void)state;
    static bpe_vocab bv;
    bpe_init(&bv, "llama3");
    bpe_add(&bv, "ab", 1);
    bpe_add(&bv, "<|eot_id|>", NU_LLM_TOKEN_CONTROL);
    bpe_merge(&bv, "a", "b");
    nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, true};
    expect_failing_allocations(&bv.v, "ab ab 123 \xC3\xA9<|eot_id|>", &o, 400);
}

/* A word of a million bytes (no pre-tokenizer split: one run of letters), merged in O(n log n). */
static void a_million_byte_word(void **state)
{
    (void)state;
    static bpe_vocab bv;
    bpe_init(&bv, "gpt-2");
    int32_t aa = bpe_add(&bv, "aa", 1), a4 = bpe_add(&bv, "aaaa", 1);
    bpe_merge(&bv, "a", "a");
    bpe_merge(&bv, "aa", "aa");
    nu_llm_tokenizer *t = bpe_make(&bv);
    size_t len = (1 << 20) + 3;
    char *text = malloc(len);
    int32_t *ids = malloc(len * sizeof *ids);
    assert_true(text && ids);
    memset(text, 'a', len);
    size_t n;
    nu_llm_tokenize_options o = {NU_LLM_ADD_NO, NU_LLM_ADD_NO, false};
    clock_t c0 = clock();
    LLM_OK(nu_llm_tokenize_ex(t, text, len, &o, ids, len, &n));
    double s = (double)(clock() - c0) / CLOCKS_PER_SEC;
    assert_int_equal(n, (1 << 18) + 2);
    for (size_t i = 0; i + 2 < n; i++)
        assert_int_equal(ids[i], a4);
    assert_int_equal(ids[n - 2], aa);
    assert_int_equal(ids[n - 1], 'a');
    print_message("1 MiB of 'a', one word: %.2f s of CPU\n", s);
    assert_true(s < 20);
    free(text);
    free(ids);
    nu_llm_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(merges_by_rank),
        cmocka_unit_test(byte_alphabet_and_decoding),
        cmocka_unit_test(invalid_utf8_is_kept),
        cmocka_unit_test(pre_tokenizers),
        cmocka_unit_test(vocabulary_checks),
        cmocka_unit_test(add_prefix_space),
        cmocka_unit_test(matches_a_plain_bpe),
        cmocka_unit_test(every_allocation_fails_cleanly),
        cmocka_unit_test(a_million_byte_word),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
