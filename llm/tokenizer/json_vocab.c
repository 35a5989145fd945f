/* json_vocab.c: Hugging Face's tokenizer.json as a tokenizer description: a BPE model, read as
 * byte-level BPE when its pre-tokenizer has a ByteLevel step (GPT-2's alphabet, the merges by
 * rank, the Split / Digits / ByteLevel steps as expressions in order), or as the SentencePiece
 * kind when it has byte_fallback and no ByteLevel (Llama 1 and 2: a piece's score is minus the
 * rank of the first merge that makes it, as transformers' LlamaConverter wrote the merges sorted
 * by score; pieces no merge makes, single characters, get the lowest score). Added tokens are
 * control tokens when "special", user-defined otherwise, with their lstrip / rstrip. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_vocab.h"

/* GPT-2's expression, as Hugging Face's ByteLevel step (use_regex) has it. */
static const char GPT2_RX[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const cJSON *item(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static bool is_type(const cJSON *o, const char *type)
{
    const cJSON *t = item(o, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

static const char *type_of(const cJSON *o)
{
    const cJSON *t = item(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "(no type)";
}

/* ---- content -> id -------------------------------------------------------------------------- */

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static size_t slot(const nu_llm__json_vocab *jv, const char *s, size_t n)
{
    size_t i = (size_t)fnv(s, n) & jv->mask;
    for (;; i = (i + 1) & jv->mask) {
        int32_t id = jv->slots[i];
        if (id < 0 || (jv->pieces[id].length == n && !memcmp(jv->pieces[id].text, s, n)))
            return i;
    }
}

int32_t nu_llm__json_vocab_find(const nu_llm__json_vocab *jv, const char *s)
{
    if (!s || !jv->slots)
        return NU_LLM_NO_TOKEN;
    int32_t id = jv->slots[slot(jv, s, strlen(s))];
    return id < 0 ? NU_LLM_NO_TOKEN : id;
}

int32_t nu_llm__json_vocab_token(const nu_llm__json_vocab *jv, const cJSON *name)
{
    if (cJSON_IsObject(name))
        name = item(name, "content");
    return cJSON_IsString(name) ? nu_llm__json_vocab_find(jv, name->valuestring) : NU_LLM_NO_TOKEN;
}

void nu_llm__json_vocab_free(nu_llm__json_vocab *jv)
{
    nu_llm__free(jv->pieces);
    nu_llm__free(jv->scores);
    nu_llm__free(jv->types);
    nu_llm__free(jv->flags);
    nu_llm__free(jv->merges);
    nu_llm__free(jv->merge_text);
    nu_llm__free(jv->slots);
    memset(jv, 0, sizeof *jv);
}

/* ---- The vocabulary and the added tokens ---------------------------------------------------- */

static bool as_id(const cJSON *v, int limit, int *id)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble >= limit || v->valuedouble != floor(v->valuedouble))
        return false;
    *id = (int)v->valuedouble;
    return true;
}

/* Puts `text` at `id`; an id taken by another text is an error. */
static nu_status place(nu_llm__json_vocab *jv, int id, const char *text)
{
    size_t n = strlen(text);
    if (jv->pieces[id].text) {
        if (jv->pieces[id].length == n && !memcmp(jv->pieces[id].text, text, n))
            return NU_OK;
        return nu_llm__fail(NU_ERROR_FORMAT, "%s: id %d is both \"%.40s\" and \"%.40s\"", jv->file, id,
                            jv->pieces[id].text, text);
    }
    jv->pieces[id] = (nu_llm_piece){text, n};
    size_t i = slot(jv, text, n);
    if (jv->slots[i] < 0)
        jv->slots[i] = id; /* the first id of a text */
    return NU_OK;
}

static nu_status read_tokens(nu_llm__json_vocab *jv, const cJSON *vocab, const cJSON *added, bool bytes_as_fallback)
{
    int entries = cJSON_GetArraySize(vocab) + (cJSON_IsArray(added) ? cJSON_GetArraySize(added) : 0);
    int count = 0, id;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab)
    {
        if (!as_id(e, entries, &id))
            return nu_llm__fail(NU_ERROR_FORMAT, "%s: model.vocab's \"%.40s\" has no id from 0 to %d", jv->file,
                                e->string, entries - 1);
        count = id + 1 > count ? id + 1 : count;
    }
    cJSON_ArrayForEach(e, added)
    {
        if (!as_id(item(e, "id"), entries, &id) || !cJSON_IsString(item(e, "content")))
            return nu_llm__fail(NU_ERROR_FORMAT, "%s: an added token without an id from 0 to %d or a content", jv->file,
                                entries - 1);
        count = id + 1 > count ? id + 1 : count;
    }
    if (count == 0)
        return nu_llm__fail(NU_ERROR_FORMAT, "%s: the vocabulary is empty", jv->file);
    for (jv->mask = 15; jv->mask < 2 * (size_t)count; jv->mask = 2 * jv->mask + 1) {
    }
    jv->pieces = nu_llm__calloc((size_t)count, sizeof *jv->pieces);
    jv->scores = nu_llm__calloc((size_t)count, sizeof *jv->scores);
    jv->types = nu_llm__calloc((size_t)count, sizeof *jv->types);
    jv->flags = nu_llm__calloc((size_t)count, sizeof *jv->flags);
    jv->slots = nu_llm__malloc_array(jv->mask + 1, sizeof *jv->slots);
    if (!jv->pieces || !jv->scores || !jv->types || !jv->flags || !jv->slots)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "no memory for %s", jv->file);
    memset(jv->slots, 0xff, (jv->mask + 1) * sizeof *jv->slots);
    nu_status st = NU_OK;
    cJSON_ArrayForEach(e, vocab)
    {
        as_id(e, entries, &id);
        if ((st = place(jv, id, e->string)) != NU_OK)
            return st;
        bool byte = bytes_as_fallback && nu_llm__byte_of_piece(e->string, strlen(e->string)) >= 0;
        jv->types[id] = byte ? NU_LLM_TOKEN_BYTE : NU_LLM_TOKEN_NORMAL;
        jv->scores[id] = -1e30f;
    }
    cJSON_ArrayForEach(e, added)
    {
        as_id(item(e, "id"), entries, &id);
        if ((st = place(jv, id, item(e, "content")->valuestring)) != NU_OK)
            return st;
        jv->types[id] = cJSON_IsTrue(item(e, "special")) ? NU_LLM_TOKEN_CONTROL : NU_LLM_TOKEN_USER_DEFINED;
        jv->flags[id] = (cJSON_IsTrue(item(e, "lstrip")) ? NU_LLM__LSTRIP : 0) |
                        (cJSON_IsTrue(item(e, "rstrip")) ? NU_LLM__RSTRIP : 0);
    }
    for (int i = 0; i < count; i++)
        if (!jv->pieces[i].text)
            return nu_llm__fail(NU_ERROR_FORMAT, "%s: no token has id %d (the ids run to %d)", jv->file, i, count - 1);
    jv->d.v.count = (uint32_t)count;
    jv->d.v.pieces = jv->pieces;
    jv->d.v.types = jv->types;
    jv->d.flags = jv->flags;
    return NU_OK;
}

/* Merge `rank` as its two parts: "a b" (split at the first space after the first byte) or
 * ["a", "b"]. */
static bool merge_parts(const cJSON *m, const char **a, size_t *na, const char **b)
{
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
        cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
        *a = cJSON_GetArrayItem(m, 0)->valuestring;
        *na = strlen(*a);
        *b = cJSON_GetArrayItem(m, 1)->valuestring;
        return true;
    }
    const char *sp = cJSON_IsString(m) && m->valuestring[0] ? strchr(m->valuestring + 1, ' ') : NULL;
    if (!sp)
        return false;
    *a = m->valuestring;
    *na = (size_t)(sp - *a);
    *b = sp + 1;
    return true;
}

/* SentencePiece kind: a piece's score from the first merge that makes it. */
static nu_status merges_as_scores(nu_llm__json_vocab *jv, const cJSON *merges)
{
    int rank = 0;
    char both[1024];
    const cJSON *m;
    cJSON_ArrayForEach(m, merges)
    {
        const char *a, *b;
        size_t na;
        if (!merge_parts(m, &a, &na, &b) || na + strlen(b) >= sizeof both)
            return nu_llm__fail(NU_ERROR_FORMAT, "%s: merge %d is not a pair of pieces", jv->file, rank);
        memcpy(both, a, na);
        strcpy(both + na, b);
        int32_t id = nu_llm__json_vocab_find(jv, both);
        if (id >= 0 && jv->scores[id] == -1e30f)
            jv->scores[id] = (float)-rank;
        rank++;
    }
    jv->d.v.scores = jv->scores;
    return NU_OK;
}

/* Byte-level kind: the merges as "left right" strings (the alphabet has no ' ' of its own). */
static nu_status merges_as_pairs(nu_llm__json_vocab *jv, const cJSON *merges)
{
    int n = cJSON_GetArraySize(merges), rank = 0;
    size_t bytes = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges)
    {
        const char *a, *b;
        size_t na;
        if (!merge_parts(m, &a, &na, &b) || memchr(a, ' ', na) || strchr(b, ' '))
            return nu_llm__fail(NU_ERROR_FORMAT, "%s: merge %d is not a pair of pieces without spaces", jv->file, rank);
        bytes += na + strlen(b) + 1;
        rank++;
    }
    jv->merges = nu_llm__malloc_array(n ? (size_t)n : 1, sizeof *jv->merges);
    jv->merge_text = nu_llm__malloc(bytes ? bytes : 1);
    if (!jv->merges || !jv->merge_text)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "no memory for %s's merges", jv->file);
    size_t at = 0;
    rank = 0;
    cJSON_ArrayForEach(m, merges)
    {
        const char *a, *b;
        size_t na, nb;
        merge_parts(m, &a, &na, &b);
        nb = strlen(b);
        jv->merges[rank++] = (nu_llm_piece){jv->merge_text + at, na + 1 + nb};
        memcpy(jv->merge_text + at, a, na);
        jv->merge_text[at + na] = ' ';
        memcpy(jv->merge_text + at + na + 1, b, nb);
        at += na + 1 + nb;
    }
    jv->d.v.merges = jv->merges;
    jv->d.v.merge_count = (uint32_t)n;
    return NU_OK;
}

/* ---- Normalizer, pre-tokenizer, post-processor ---------------------------------------------- */

/* null or NFC (llama.cpp does not normalise either), or a Sequence of those. */
static nu_status check_normalizer(const nu_llm__json_vocab *jv, const cJSON *n)
{
    if (!n || cJSON_IsNull(n) || is_type(n, "NFC"))
        return NU_OK;
    if (is_type(n, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, item(n, "normalizers"))
        {
            nu_status st = check_normalizer(jv, e);
            if (st != NU_OK)
                return st;
        }
        return NU_OK;
    }
    return nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: normalizer %s is not supported with a ByteLevel pre-tokenizer",
                        jv->file, type_of(n));
}

static nu_status add_regex(nu_llm__json_vocab *jv, const char *rx)
{
    if (jv->d.regex_count == NU_LLM__JSON_MAX_RX)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: more than %d pre-tokenizer steps", jv->file, NU_LLM__JSON_MAX_RX);
    jv->regex[jv->d.regex_count++] = rx;
    return NU_OK;
}

/* The steps as expressions in order: Split (a Regex pattern, behavior Isolated), Digits,
 * ByteLevel (GPT-2's expression when use_regex; its add_prefix_space), Sequence; Metaspace for
 * the SentencePiece kind. *byte_level tells whether a ByteLevel step was there. */
static nu_status read_pre_tokenizer(nu_llm__json_vocab *jv, const cJSON *p, bool *byte_level)
{
    if (!p || cJSON_IsNull(p))
        return NU_OK;
    if (is_type(p, "Sequence")) {
        const cJSON *e;
        nu_status st = NU_OK;
        cJSON_ArrayForEach(e, item(p, "pretokenizers")) if (st == NU_OK) st = read_pre_tokenizer(jv, e, byte_level);
        return st;
    }
    if (is_type(p, "ByteLevel")) {
        *byte_level = true;
        jv->d.v.add_space_prefix = cJSON_IsTrue(item(p, "add_prefix_space"));
        const cJSON *use = item(p, "use_regex");
        return use && !cJSON_IsTrue(use) ? NU_OK : add_regex(jv, GPT2_RX);
    }
    if (is_type(p, "Metaspace")) /* SentencePiece's spaces: what its kind does anyway */
        return *byte_level ? nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: Metaspace with ByteLevel", jv->file) : NU_OK;
    if (is_type(p, "Digits"))
        return add_regex(jv, cJSON_IsTrue(item(p, "individual_digits")) ? "\\p{N}" : "\\p{N}+");
    if (is_type(p, "Split")) {
        const cJSON *rx = item(item(p, "pattern"), "Regex"), *behavior = item(p, "behavior");
        if (!cJSON_IsString(rx))
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: a Split pre-tokenizer without a Regex pattern", jv->file);
        if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") ||
            cJSON_IsTrue(item(p, "invert")))
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: Split behavior %s%s is not supported (Isolated)", jv->file,
                                cJSON_IsString(behavior) ? behavior->valuestring : "(none)",
                                cJSON_IsTrue(item(p, "invert")) ? " inverted" : "");
        return add_regex(jv, rx->valuestring);
    }
    return nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: pre-tokenizer %s is not supported", jv->file, type_of(p));
}

/* TemplateProcessing's single-text template: a special token first is bos, one last is eos. */
static void read_post_processor(nu_llm__json_vocab *jv, const cJSON *p)
{
    if (is_type(p, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, item(p, "processors")) read_post_processor(jv, e);
        return;
    }
    if (!is_type(p, "TemplateProcessing"))
        return;
    const cJSON *single = item(p, "single");
    int n = cJSON_GetArraySize(single);
    if (n < 2)
        return;
    int32_t first = nu_llm__json_vocab_token(jv, item(item(cJSON_GetArrayItem(single, 0), "SpecialToken"), "id"));
    int32_t last = nu_llm__json_vocab_token(jv, item(item(cJSON_GetArrayItem(single, n - 1), "SpecialToken"), "id"));
    if (first >= 0) {
        jv->d.v.bos = first;
        jv->d.v.add_bos = true;
    }
    if (last >= 0) {
        jv->d.v.eos = last;
        jv->d.v.add_eos = true;
    }
}

nu_status nu_llm__json_vocab_read(const cJSON *root, const char *file, nu_llm__json_vocab *jv)
{
    memset(jv, 0, sizeof *jv);
    nu_llm__desc_init(&jv->d);
    jv->file = file;
    const cJSON *model = item(root, "model"), *vocab = item(model, "vocab"), *merges = item(model, "merges");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(model))
        return nu_llm__fail(NU_ERROR_FORMAT, "%s has no \"model\" object", file);
    if (!is_type(model, "BPE"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: tokenizer model %s is not supported (BPE)", file, type_of(model));
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        return nu_llm__fail(NU_ERROR_FORMAT, "%s has no model.vocab object or model.merges list", file);
    static const char *const refused[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *x = item(model, refused[i]);
        if (cJSON_IsString(x) && x->valuestring[0])
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: model.%s is not supported", file, refused[i]);
    }
    bool byte_level = false;
    nu_status st = read_pre_tokenizer(jv, item(root, "pre_tokenizer"), &byte_level);
    if (st != NU_OK)
        return st;
    if (!byte_level && !cJSON_IsTrue(item(model, "byte_fallback")))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED,
                            "%s is neither byte-level BPE (a ByteLevel pre-tokenizer) nor SentencePiece-style BPE "
                            "(byte_fallback)", file);
    if ((st = read_tokens(jv, vocab, item(root, "added_tokens"), !byte_level)) != NU_OK)
        return st;
    const cJSON *unk = item(model, "unk_token");
    if ((jv->d.v.unk = nu_llm__json_vocab_token(jv, unk)) >= 0)
        jv->types[jv->d.v.unk] = NU_LLM_TOKEN_UNKNOWN;
    if (byte_level) {
        if ((st = check_normalizer(jv, item(root, "normalizer"))) != NU_OK || (st = merges_as_pairs(jv, merges)) != NU_OK)
            return st;
        jv->d.v.model = "gpt2";
        jv->d.regex = jv->regex;
        jv->d.ignore_merges = cJSON_IsTrue(item(model, "ignore_merges"));
        jv->d.pre_name = "tokenizer.json";
        if (jv->d.regex_count == 0)
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: a ByteLevel pre-tokenizer without expressions", file);
        read_post_processor(jv, item(root, "post_processor"));
        return NU_OK;
    }
    /* SentencePiece-style (Llama 2's file): its normalizer is the U+2581 prefix and spaces. */
    if (jv->d.regex_count)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s: Split or Digits pre-tokenizers with SentencePiece-style BPE",
                            file);
    if ((st = merges_as_scores(jv, merges)) != NU_OK)
        return st;
    jv->d.v.model = "llama";
    jv->d.v.add_space_prefix = true;
    jv->d.v.bos = nu_llm__json_vocab_find(jv, "<s>");
    jv->d.v.eos = nu_llm__json_vocab_find(jv, "</s>");
    jv->d.v.add_bos = jv->d.v.bos >= 0;
    read_post_processor(jv, item(root, "post_processor"));
    return NU_OK;
}
