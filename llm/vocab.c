/* vocab.c: the tokenizer's vocabulary from a model's files: a GGUF file's tokenizer.ggml.* (model
 * "llama": SentencePiece) and a Hugging Face folder's tokenizer.json (a SentencePiece-style BPE
 * with byte fallback, as Llama 1 and 2 have). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "vocab.h"

/* A nuvec call's failure with its message. */
static nu_status gg(nu_device *d, nu_status st)
{
    return st == NU_OK ? st : nu_llm__fail(st, "nu_llm_model_open: %s", nu_error_message(d));
}

static bool string_is(const char *s, uint64_t n, const char *want) { return n == strlen(want) && !memcmp(s, want, n); }

/* The SentencePiece tokenizer of tokenizer.ggml.* (model "llama"). */
nu_status nu_llm__vocab_gguf(const nu_gguf *f, nu_device *d, int32_t bos, int32_t eos, nu_llm_tokenizer **out)
{
    *out = NULL;
    const char *model;
    uint64_t mlen;
    if (!nu_gguf_has(f, "tokenizer.ggml.model"))
        return nu_llm__fail(NU_ERROR_FORMAT, "the file has no tokenizer.ggml.model");
    nu_status st = gg(d, nu_gguf_get_string(f, "tokenizer.ggml.model", NULL, &model, &mlen));
    if (st != NU_OK)
        return st;
    if (!string_is(model, mlen, "llama"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "tokenizer.ggml.model %.*s is not supported (only llama)",
                            (int)(mlen > 64 ? 64 : mlen), model);
    nu_gguf_value tokens, scores, types;
    bool has_scores = nu_gguf_has(f, "tokenizer.ggml.scores"), has_types = nu_gguf_has(f, "tokenizer.ggml.token_type");
    if ((st = gg(d, nu_gguf_find(f, "tokenizer.ggml.tokens", &tokens))) != NU_OK ||
        (has_scores && (st = gg(d, nu_gguf_find(f, "tokenizer.ggml.scores", &scores))) != NU_OK) ||
        (has_types && (st = gg(d, nu_gguf_find(f, "tokenizer.ggml.token_type", &types))) != NU_OK))
        return st;
    uint64_t n = tokens.length;
    if (tokens.type != NU_GGUF_ARRAY || !n || n > INT32_MAX ||
        (has_scores && (scores.type != NU_GGUF_ARRAY || scores.element_type != NU_GGUF_FLOAT32 || scores.length != n)) ||
        (has_types && (types.type != NU_GGUF_ARRAY || types.element_type != NU_GGUF_INT32 || types.length != n)))
        return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer.ggml.tokens, .scores and .token_type are not arrays of one "
                            "length (strings, FLOAT32, INT32)");
    nu_llm_piece *pieces = nu_llm__calloc(n, sizeof *pieces);
    float *sc = has_scores ? nu_llm__calloc(n, sizeof *sc) : NULL;
    int32_t *ty = has_types ? nu_llm__calloc(n, sizeof *ty) : NULL;
    if (!pieces || (has_scores && !sc) || (has_types && !ty)) {
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "no memory for the vocabulary");
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        if ((st = gg(d, nu_gguf_array_string(&tokens, i, &pieces[i].text, &len))) != NU_OK)
            goto done;
        pieces[i].length = (size_t)len;
    }
    if (has_scores)
        memcpy(sc, scores.data, n * sizeof *sc); /* packed little-endian, unaligned: copied */
    if (has_types)
        memcpy(ty, types.data, n * sizeof *ty);
    bool yes = true;
    uint32_t none = UINT32_MAX, unk;
    nu_llm_vocab v = {(uint32_t)n, pieces, sc, ty, NU_LLM_NO_TOKEN, NU_LLM_NO_TOKEN, NU_LLM_NO_TOKEN, true, true};
    if ((st = gg(d, nu_gguf_get_u32(f, "tokenizer.ggml.unknown_token_id", &none, &unk))) != NU_OK ||
        (st = gg(d, nu_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &yes, &v.add_bos))) != NU_OK ||
        (st = gg(d, nu_gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &yes, &v.add_space_prefix))) != NU_OK)
        goto done;
    v.bos = bos >= 0 && bos < (int32_t)n ? bos : NU_LLM_NO_TOKEN;
    v.eos = eos >= 0 && eos < (int32_t)n ? eos : NU_LLM_NO_TOKEN;
    v.unk = unk < n ? (int32_t)unk : NU_LLM_NO_TOKEN;
    v.add_bos = v.add_bos && v.bos >= 0;
    st = nu_llm_tokenizer_new(&v, out);
done:
    nu_llm__free(pieces);
    nu_llm__free(sc);
    nu_llm__free(ty);
    return st;
}

/* ---- tokenizer.json ------------------------------------------------------------------------
 * Hugging Face's file of a Llama (SentencePiece) tokenizer: a BPE model with byte_fallback, its
 * vocabulary (piece -> id) and merges ranked first to last. nu_llm_tokenizer merges by piece
 * scores instead; transformers' LlamaConverter writes the merges sorted by the merged piece's
 * score, so a piece's score here is minus the rank of the first merge that makes it (pieces no
 * merge makes, single characters, get the lowest score: they are never a merge's result). */

typedef struct piece_map {
    const char **keys;
    size_t *lens;
    int32_t *ids;
    size_t cap; /* a power of two */
} piece_map;

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static size_t map_slot(const piece_map *m, const char *s, size_t n)
{
    size_t i = (size_t)fnv(s, n) & (m->cap - 1);
    while (m->keys[i] && (m->lens[i] != n || memcmp(m->keys[i], s, n)))
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int32_t map_find(const piece_map *m, const char *s, size_t n)
{
    size_t i = map_slot(m, s, n);
    return m->keys[i] ? m->ids[i] : -1;
}

/* The tokenizer of the folder's tokenizer.json; NU_ERROR_IO when there is none, NU_ERROR_FORMAT
 * or NU_ERROR_UNSUPPORTED (a tokenizer other than SentencePiece-style BPE) with a message. */
nu_status nu_llm__vocab_hf(const char *file, int32_t bos, int32_t eos, nu_llm_tokenizer **out)
{
    *out = NULL;
    char *text = NULL;
    nu_status st = nu_llm__read_text(file, &text, NULL);
    if (st != NU_OK)
        return st;
    cJSON *root = cJSON_Parse(text);
    nu_llm__free(text);
    if (!root)
        return nu_llm__fail(NU_ERROR_FORMAT, "%s is not valid JSON", file);
    nu_llm_piece *pieces = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    piece_map map = {0};
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE") ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"))) {
        st = nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s is not a SentencePiece-style BPE tokenizer with byte fallback", file);
        goto done;
    }
    int count = cJSON_GetArraySize(vocab);
    if (!cJSON_IsObject(vocab) || count < 1 || !cJSON_IsArray(merges)) {
        st = nu_llm__fail(NU_ERROR_FORMAT, "%s has no model.vocab object or model.merges list", file);
        goto done;
    }
    pieces = nu_llm__calloc((size_t)count, sizeof *pieces);
    scores = nu_llm__calloc((size_t)count, sizeof *scores);
    types = nu_llm__calloc((size_t)count, sizeof *types);
    for (map.cap = 16; map.cap < 2 * (size_t)count; map.cap *= 2) {
    }
    map.keys = nu_llm__calloc(map.cap, sizeof *map.keys);
    map.lens = nu_llm__calloc(map.cap, sizeof *map.lens);
    map.ids = nu_llm__calloc(map.cap, sizeof *map.ids);
    if (!pieces || !scores || !types || !map.keys || !map.lens || !map.ids) {
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "no memory for %s", file);
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= count || pieces[(int)e->valuedouble].text) {
            st = nu_llm__fail(NU_ERROR_FORMAT, "%s: the vocabulary's ids are not 0 to %d, each once", file, count - 1);
            goto done;
        }
        int id = (int)e->valuedouble;
        size_t n = strlen(e->string), slot = map_slot(&map, e->string, n);
        pieces[id] = (nu_llm_piece){e->string, n};
        map.keys[slot] = e->string, map.lens[slot] = n, map.ids[slot] = id;
        types[id] = n == 6 && !strncmp(e->string, "<0x", 3) && e->string[5] == '>' ? NU_LLM_TOKEN_BYTE : NU_LLM_TOKEN_NORMAL;
        scores[id] = -1e30f;
    }
    int rank = 0;
    cJSON_ArrayForEach(e, merges)
    {
        char both[1024];
        const char *a = NULL, *b = NULL;
        size_t na = 0;
        if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
            cJSON_IsString(cJSON_GetArrayItem(e, 1)))
            a = cJSON_GetArrayItem(e, 0)->valuestring, b = cJSON_GetArrayItem(e, 1)->valuestring, na = strlen(a);
        else if (cJSON_IsString(e) && strchr(e->valuestring, ' ')) /* the older "a b" form */
            a = e->valuestring, na = (size_t)(strchr(a, ' ') - a), b = a + na + 1;
        if (!a || na + strlen(b) >= sizeof both) {
            st = nu_llm__fail(NU_ERROR_FORMAT, "%s: merge %d is not a pair of pieces", file, rank);
            goto done;
        }
        memcpy(both, a, na);
        strcpy(both + na, b);
        int32_t id = map_find(&map, both, strlen(both));
        if (id >= 0 && scores[id] == -1e30f)
            scores[id] = (float)-rank;
        rank++;
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    const cJSON *unk_name = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    int32_t unk = cJSON_IsString(unk_name) ? map_find(&map, unk_name->valuestring, strlen(unk_name->valuestring)) : -1;
    cJSON_ArrayForEach(e, added)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) && cJSON_IsNumber(id) && id->valuedouble >= 0 &&
            id->valuedouble < count)
            types[(int)id->valuedouble] = NU_LLM_TOKEN_CONTROL;
    }
    if (unk >= 0)
        types[unk] = NU_LLM_TOKEN_UNKNOWN;
    for (int i = 0; i < count; i++)
        if (!pieces[i].text) {
            st = nu_llm__fail(NU_ERROR_FORMAT, "%s: the vocabulary has no id %d", file, i);
            goto done;
        }
    nu_llm_vocab v = {(uint32_t)count, pieces, scores, types,
                      bos >= 0 && bos < count ? bos : map_find(&map, "<s>", 3),
                      eos >= 0 && eos < count ? eos : map_find(&map, "</s>", 4), unk, true, true};
    v.add_bos = v.bos >= 0;
    st = nu_llm_tokenizer_new(&v, out);
    if (st != NU_OK)
        st = nu_llm__fail(st, "%s: %s", file, nu_llm_error_message());
done:
    nu_llm__free(pieces);
    nu_llm__free(scores);
    nu_llm__free(types);
    nu_llm__free(map.keys);
    nu_llm__free(map.lens);
    nu_llm__free(map.ids);
    cJSON_Delete(root);
    return st;
}
