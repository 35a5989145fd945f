/* special.c: special tokens. The ones llama.cpp recognises by their text (end of turn, end of
 * message, fill-in-the-middle, end of generation) and its fix-ups of their types, the
 * end-of-generation set, and splitting the special tokens written in a text out of it.
 *
 * Splitting follows llama.cpp's order (which Hugging Face's added-token splitting agrees with on
 * real vocabularies): the longest special token first, each taking its leftmost occurrences that
 * overlap no token taken before. All occurrences are found in one pass over the text with a trie
 * of the special tokens' texts (a hash of (node, byte) -> child), then taken in that order, so a
 * text costs O(length x the longest special token) however many special tokens there are. */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

/* ---- Recognition by text (llama.cpp's lists) --------------------------------------------- */

#define END_OF_SENTENCE "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>" /* DeepSeek's */

static const char *const EOT_TEXTS[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", END_OF_SENTENCE,
                                        "<end_of_utterance>", NULL};
static const char *const EOM_TEXTS[] = {"<|eom_id|>", NULL};
static const char *const FIM_PRE_TEXTS[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                                            "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const FIM_SUF_TEXTS[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
                                            "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const FIM_MID_TEXTS[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                                            "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const FIM_PAD_TEXTS[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const FIM_REP_TEXTS[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const FIM_SEP_TEXTS[] = {"<|file_sep|>", NULL};
static const char *const EOG_TEXTS[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                                        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                        "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                                        "<turn|>", "<|tool_response>", END_OF_SENTENCE, "[e~[", NULL};
/* gpt-oss's: always shown, so user-defined. */
static const char *const SHOWN_TEXTS[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};

static bool text_is(const nu_llm_tokenizer *t, int32_t id, const char *s)
{
    size_t n = strlen(s);
    return nu_llm__piece_len(t, id) == n && memcmp(nu_llm__piece(t, id), s, n) == 0;
}

/* The lowest id of the first text in `list` the vocabulary has, or NU_LLM_NO_TOKEN. */
static int32_t find_first(const nu_llm_tokenizer *t, const char *const *list)
{
    for (; *list; list++)
        for (uint32_t i = 0; i < t->count; i++)
            if (text_is(t, (int32_t)i, *list))
                return (int32_t)i;
    return NU_LLM_NO_TOKEN;
}

static bool in_list(const nu_llm_tokenizer *t, int32_t id, const char *const *list)
{
    for (; *list; list++)
        if (text_is(t, id, *list))
            return true;
    return false;
}

static void make_control(nu_llm_tokenizer *t, int32_t id)
{
    if (id >= 0)
        t->type[id] = NU_LLM_TOKEN_CONTROL;
}

/* The eot, eom and FIM tokens a vocabulary does not name, by text (they become control). */
static void recognise(nu_llm_tokenizer *t)
{
    static const struct {
        nu_llm_special which;
        const char *const *texts;
    } by_text[] = {{NU_LLM_SPECIAL_EOT, EOT_TEXTS},         {NU_LLM_SPECIAL_EOM, EOM_TEXTS},
                   {NU_LLM_SPECIAL_FIM_PRE, FIM_PRE_TEXTS}, {NU_LLM_SPECIAL_FIM_SUF, FIM_SUF_TEXTS},
                   {NU_LLM_SPECIAL_FIM_MID, FIM_MID_TEXTS}, {NU_LLM_SPECIAL_FIM_PAD, FIM_PAD_TEXTS},
                   {NU_LLM_SPECIAL_FIM_REP, FIM_REP_TEXTS}, {NU_LLM_SPECIAL_FIM_SEP, FIM_SEP_TEXTS}};
    for (size_t k = 0; k < sizeof by_text / sizeof by_text[0]; k++) {
        if (t->special[by_text[k].which] != NU_LLM_NO_TOKEN)
            continue;
        t->special[by_text[k].which] = find_first(t, by_text[k].texts);
        make_control(t, t->special[by_text[k].which]);
    }
}

static int by_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The end-of-generation set into t->flags and t->eog (llama.cpp's rules, fix-ups included). */
static nu_status end_of_generation(nu_llm_tokenizer *t, const nu_llm__desc *d)
{
    static const nu_llm_special named[] = {NU_LLM_SPECIAL_EOS,     NU_LLM_SPECIAL_EOT,     NU_LLM_SPECIAL_EOM,
                                           NU_LLM_SPECIAL_FIM_PAD, NU_LLM_SPECIAL_FIM_REP, NU_LLM_SPECIAL_FIM_SEP};
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
        if (t->special[named[k]] >= 0)
            t->flags[t->special[named[k]]] |= NU_LLM__EOG;
    for (size_t k = 0; k < d->eog_count; k++)
        t->flags[d->eog[k]] |= NU_LLM__EOG;
    int32_t end = NU_LLM_NO_TOKEN, slash_s = NU_LLM_NO_TOKEN;
    bool has_return = false, has_call = false, has_flush = false, has_tool_response = false;
    for (uint32_t i = 0; i < t->count; i++) {
        int32_t id = (int32_t)i;
        if (in_list(t, id, EOG_TEXTS)) {
            t->flags[i] |= NU_LLM__EOG;
            make_control(t, id);
        }
        if (in_list(t, id, SHOWN_TEXTS))
            t->type[i] = NU_LLM_TOKEN_USER_DEFINED;
    }
    for (uint32_t i = 0; i < t->count; i++) {
        int32_t id = (int32_t)i;
        if (!(t->flags[i] & NU_LLM__EOG))
            continue;
        has_return |= text_is(t, id, "<|return|>");
        has_call |= text_is(t, id, "<|call|>") || text_is(t, id, "<|calls|>");
        has_flush |= text_is(t, id, "<|flush|>");
        has_tool_response |= text_is(t, id, "<|tool_response>");
        if (text_is(t, id, "<|end|>"))
            end = id;
        if (text_is(t, id, "</s>"))
            slash_s = id;
    }
    /* gpt-oss (o200k_harmony) and solar-open: <|end|> ends a message, not the generation. */
    if (end >= 0 && has_call && (has_return || has_flush)) {
        t->flags[end] &= (uint8_t)~NU_LLM__EOG;
        t->type[end] = NU_LLM_TOKEN_USER_DEFINED;
    }
    /* Gemma 4 and PaddleOCR: </s> is text there. */
    if (slash_s >= 0 && has_tool_response) {
        t->flags[slash_s] &= (uint8_t)~NU_LLM__EOG;
        t->type[slash_s] = NU_LLM_TOKEN_NORMAL;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < t->count; i++)
        n += (t->flags[i] & NU_LLM__EOG) != 0;
    t->eog = nu_llm__malloc_array(n ? n : 1, sizeof *t->eog);
    if (!t->eog)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory");
    for (uint32_t i = 0; i < t->count; i++)
        if (t->flags[i] & NU_LLM__EOG)
            t->eog[t->eog_count++] = (int32_t)i;
    qsort(t->eog, t->eog_count, sizeof *t->eog, by_id);
    return NU_OK;
}

/* ---- The trie of special tokens ---------------------------------------------------------- */

typedef struct node {
    int32_t user; /* the user-defined token ending here (lowest id), or -1 */
    int32_t ctl;  /* the control or unknown one, or -1 */
} node;

struct nu_llm__specials {
    node *nodes;
    uint32_t count;
    uint64_t *keys; /* (parent << 8 | byte) + 1; 0: empty */
    uint32_t *child;
    size_t mask;
    bool first[256]; /* bytes a special token starts with */
    uint32_t max_len;
};

static bool is_special(uint8_t type)
{
    return type == NU_LLM_TOKEN_CONTROL || type == NU_LLM_TOKEN_USER_DEFINED || type == NU_LLM_TOKEN_UNKNOWN;
}

static size_t slot_of(const nu_llm__specials *s, uint64_t key)
{
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15u) >> 20) & s->mask;
    while (s->keys[i] && s->keys[i] != key)
        i = (i + 1) & s->mask;
    return i;
}

/* The child of node `at` by byte b, or -1. */
static int64_t child_of(const nu_llm__specials *s, uint32_t at, uint8_t b)
{
    size_t i = slot_of(s, ((uint64_t)at << 8 | b) + 1);
    return s->keys[i] ? (int64_t)s->child[i] : -1;
}

void nu_llm__specials_free(nu_llm__specials *s)
{
    if (!s)
        return;
    nu_llm__free(s->nodes);
    nu_llm__free(s->keys);
    nu_llm__free(s->child);
    nu_llm__free(s);
}

static nu_status build_trie(nu_llm_tokenizer *t)
{
    size_t bytes = 0;
    for (uint32_t i = 0; i < t->count; i++)
        if (is_special(t->type[i]))
            bytes += nu_llm__piece_len(t, (int32_t)i);
    nu_llm__specials *s = nu_llm__calloc(1, sizeof *s);
    size_t slots = 16;
    while (slots < 2 * (bytes + 1))
        slots *= 2;
    if (s) {
        s->nodes = nu_llm__malloc_array(bytes + 1, sizeof *s->nodes);
        s->keys = nu_llm__calloc(slots, sizeof *s->keys);
        s->child = nu_llm__malloc_array(slots, sizeof *s->child);
    }
    if (!s || !s->nodes || !s->keys || !s->child) {
        nu_llm__specials_free(s);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory for the special tokens");
    }
    s->mask = slots - 1;
    s->nodes[0] = (node){-1, -1};
    s->count = 1;
    for (uint32_t i = 0; i < t->count; i++) {
        size_t n = nu_llm__piece_len(t, (int32_t)i);
        if (!is_special(t->type[i]) || n == 0)
            continue;
        const uint8_t *p = (const uint8_t *)nu_llm__piece(t, (int32_t)i);
        uint32_t at = 0;
        for (size_t k = 0; k < n; k++) {
            uint64_t key = ((uint64_t)at << 8 | p[k]) + 1;
            size_t slot = slot_of(s, key);
            if (!s->keys[slot]) {
                s->keys[slot] = key;
                s->child[slot] = s->count;
                s->nodes[s->count++] = (node){-1, -1};
            }
            at = s->child[slot];
        }
        int32_t *end = t->type[i] == NU_LLM_TOKEN_USER_DEFINED ? &s->nodes[at].user : &s->nodes[at].ctl;
        if (*end < 0)
            *end = (int32_t)i;
        s->first[p[0]] = true;
        s->max_len = n > s->max_len ? (uint32_t)n : s->max_len;
    }
    t->specials = s;
    return NU_OK;
}

nu_status nu_llm__specials_init(nu_llm_tokenizer *t, const nu_llm__desc *d)
{
    recognise(t);
    nu_status st = end_of_generation(t, d);
    return st != NU_OK ? st : build_trie(t);
}

/* ---- Splitting a text -------------------------------------------------------------------- */

typedef struct occurrence {
    size_t start;
    uint32_t len;
    int32_t id;
} occurrence;

/* Longest first, then the lower id, then leftmost: the order tokens are taken in. */
static int by_priority(const void *a, const void *b)
{
    const occurrence *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

static int by_start(const void *a, const void *b)
{
    const occurrence *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static bool space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

nu_status nu_llm__partition(const nu_llm_tokenizer *t, const char *text, size_t len, bool parse_special,
                            nu_llm__frag **frags, size_t *n)
{
    *frags = NULL;
    *n = 0;
    const nu_llm__specials *s = t->specials;
    occurrence *occ = NULL;
    size_t occ_n = 0, occ_cap = 0;
    nu_status st = NU_OK;
    for (size_t i = 0; i < len && st == NU_OK; i++) {
        if (!s->first[(uint8_t)text[i]])
            continue;
        uint32_t at = 0;
        for (size_t j = i; j < len; j++) {
            int64_t c = child_of(s, at, (uint8_t)text[j]);
            if (c < 0)
                break;
            at = (uint32_t)c;
            int32_t id = s->nodes[at].user;
            if (parse_special && s->nodes[at].ctl >= 0 && (id < 0 || s->nodes[at].ctl < id))
                id = s->nodes[at].ctl;
            if (id < 0)
                continue;
            if (!nu_llm__grow((void **)&occ, &occ_cap, occ_n + 1, sizeof *occ)) {
                st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenize: out of host memory");
                break;
            }
            occ[occ_n++] = (occurrence){i, (uint32_t)(j - i + 1), id};
        }
    }
    uint8_t *taken = NULL;
    size_t kept = 0;
    if (st == NU_OK && occ_n) {
        if (!(taken = nu_llm__calloc(len, 1)))
            st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenize: out of host memory");
        qsort(occ, occ_n, sizeof *occ, by_priority);
        for (size_t k = 0; st == NU_OK && k < occ_n; k++) {
            const occurrence *o = &occ[k];
            bool free_run = true;
            for (uint32_t b = 0; b < o->len && free_run; b++)
                free_run = !taken[o->start + b];
            if (!free_run)
                continue; /* overlaps a longer token, or this one's previous occurrence */
            memset(taken + o->start, 1, o->len);
            occ[kept++] = *o;
        }
        qsort(occ, kept, sizeof *occ, by_start);
    }
    nu_llm__free(taken);
    nu_llm__frag *f = st == NU_OK ? nu_llm__malloc_array(2 * kept + 1, sizeof *f) : NULL;
    if (st == NU_OK && !f)
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenize: out of host memory");
    if (st != NU_OK) {
        nu_llm__free(occ);
        return st;
    }
    size_t at = 0, m = 0;
    for (size_t k = 0; k <= kept; k++) {
        size_t end = k < kept ? occ[k].start : len;
        size_t a = at, b = end;
        if (k > 0 && (t->flags[occ[k - 1].id] & NU_LLM__RSTRIP))
            while (a < b && space(text[a]))
                a++;
        if (k < kept && (t->flags[occ[k].id] & NU_LLM__LSTRIP))
            while (b > a && space(text[b - 1]))
                b--;
        if (b > a)
            f[m++] = (nu_llm__frag){a, b - a, NU_LLM_NO_TOKEN};
        if (k < kept) {
            f[m++] = (nu_llm__frag){occ[k].start, occ[k].len, occ[k].id};
            at = occ[k].start + occ[k].len;
        }
    }
    nu_llm__free(occ);
    *frags = f;
    *n = m;
    return NU_OK;
}
