/* gguf_vocab.c: the tokenizer of a GGUF file's tokenizer.ggml.* keys (llama.cpp's names), read
 * through nuvec/gguf.h, and nu_llm_tokenizer_open, which maps a file privately (no device) and
 * parses it from memory, or hands a folder or a .json file to json_vocab.c. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "readers.h"
#include "tok.h"

/* A nuvec call's failure with its message. */
static nu_status gg(nu_status st)
{
    return st == NU_OK ? st : nu_llm__fail(st, "tokenizer: %s", nu_error_message(NULL));
}

static bool string_is(const char *s, uint64_t n, const char *want) { return n == strlen(want) && !memcmp(s, want, n); }

/* An id key: absent leaves *id; out of the vocabulary is NU_ERROR_FORMAT (negative means none, as
 * some converters write -1). */
static nu_status get_id(const nu_gguf *f, const char *key, uint32_t count, int32_t *id)
{
    nu_gguf_value v;
    if (!nu_gguf_has(f, key))
        return NU_OK;
    nu_status st = gg(nu_gguf_find(f, key, &v));
    if (st != NU_OK)
        return st;
    int64_t x;
    switch (v.type) {
    case NU_GGUF_UINT8: x = v.scalar.u8; break;
    case NU_GGUF_INT8: x = v.scalar.i8; break;
    case NU_GGUF_UINT16: x = v.scalar.u16; break;
    case NU_GGUF_INT16: x = v.scalar.i16; break;
    case NU_GGUF_UINT32: x = v.scalar.u32; break;
    case NU_GGUF_INT32: x = v.scalar.i32; break;
    case NU_GGUF_UINT64: x = v.scalar.u64 > INT64_MAX ? INT64_MAX : (int64_t)v.scalar.u64; break;
    case NU_GGUF_INT64: x = v.scalar.i64; break;
    default:
        return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: %s is a %s, not an integer", key, nu_gguf_type_name(v.type));
    }
    if (x >= (int64_t)count)
        return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: %s is %lld, outside the vocabulary of %u tokens", key,
                            (long long)x, count);
    *id = x < 0 ? NU_LLM_NO_TOKEN : (int32_t)x;
    return NU_OK;
}

/* An array key of `n` elements of `type` (INT32 may stand for FLOAT32: llama.cpp takes both). */
static nu_status get_array(const nu_gguf *f, const char *key, nu_gguf_type type, uint64_t n, nu_gguf_value *out)
{
    nu_status st = gg(nu_gguf_find(f, key, out));
    if (st != NU_OK)
        return st;
    bool ok_type = out->element_type == type || (type == NU_GGUF_FLOAT32 && out->element_type == NU_GGUF_INT32);
    if (out->type != NU_GGUF_ARRAY || !ok_type)
        return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: %s is not an array of %s", key, nu_gguf_type_name(type));
    if (n && out->length != n)
        return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: %s has %llu elements, tokenizer.ggml.tokens %llu", key,
                            (unsigned long long)out->length, (unsigned long long)n);
    return NU_OK;
}

/* The strings of an array into pieces (pointing into the file). */
static nu_status get_strings(const nu_gguf_value *a, nu_llm_piece *pieces)
{
    for (uint64_t i = 0; i < a->length; i++) {
        uint64_t len;
        nu_status st = gg(nu_gguf_array_string(a, i, &pieces[i].text, &len));
        if (st != NU_OK)
            return st;
        pieces[i].length = (size_t)len;
    }
    return NU_OK;
}

/* Phi-3's special tokens take the whitespace after them along, as llama.cpp sets them by the
 * model's name (its GGUF files do not carry tokenizer.json's rstrip). */
static void phi3_flags(const nu_gguf *f, const nu_llm_vocab *v, uint8_t *flags)
{
    const char *name;
    uint64_t n;
    if (!nu_gguf_has(f, "general.name") || nu_gguf_get_string(f, "general.name", NULL, &name, &n) != NU_OK)
        return;
    char low[256];
    size_t k = n < sizeof low - 1 ? (size_t)n : sizeof low - 1;
    for (size_t i = 0; i < k; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    low[k] = 0;
    if (!strstr(low, "phi-3") && !strstr(low, "phi3"))
        return;
    for (uint32_t i = 0; i < v->count; i++) {
        const nu_llm_piece *p = &v->pieces[i];
        int32_t type = v->types ? v->types[i] : NU_LLM_TOKEN_NORMAL;
        bool special = type == NU_LLM_TOKEN_CONTROL || type == NU_LLM_TOKEN_USER_DEFINED || type == NU_LLM_TOKEN_UNKNOWN;
        if (special || string_is(p->text, p->length, "</s>"))
            flags[i] |= NU_LLM__RSTRIP;
        if (string_is(p->text, p->length, "<unk>") || string_is(p->text, p->length, "<s>") ||
            string_is(p->text, p->length, "<|endoftext|>"))
            flags[i] &= (uint8_t)~NU_LLM__RSTRIP;
    }
}

static const struct {
    nu_llm_special which;
    const char *key;
} ID_KEYS[] = {
    {NU_LLM_SPECIAL_EOT, "tokenizer.ggml.eot_token_id"},        {NU_LLM_SPECIAL_EOM, "tokenizer.ggml.eom_token_id"},
    {NU_LLM_SPECIAL_PAD, "tokenizer.ggml.padding_token_id"},    {NU_LLM_SPECIAL_FIM_PRE, "tokenizer.ggml.prefix_token_id"},
    {NU_LLM_SPECIAL_FIM_SUF, "tokenizer.ggml.suffix_token_id"}, {NU_LLM_SPECIAL_FIM_MID, "tokenizer.ggml.middle_token_id"},
    {NU_LLM_SPECIAL_FIM_PRE, "tokenizer.ggml.fim_pre_token_id"}, {NU_LLM_SPECIAL_FIM_SUF, "tokenizer.ggml.fim_suf_token_id"},
    {NU_LLM_SPECIAL_FIM_MID, "tokenizer.ggml.fim_mid_token_id"}, {NU_LLM_SPECIAL_FIM_PAD, "tokenizer.ggml.fim_pad_token_id"},
    {NU_LLM_SPECIAL_FIM_REP, "tokenizer.ggml.fim_rep_token_id"}, {NU_LLM_SPECIAL_FIM_SEP, "tokenizer.ggml.fim_sep_token_id"},
};

/* tokenizer.ggml.pre ("default" when absent) into name, which must be one nuvec knows; its
 * default for add_bos into *add_bos. */
static nu_status read_pre(const nu_gguf *f, char name[65], bool *add_bos)
{
    uint64_t n;
    const char *pre;
    nu_status st = gg(nu_gguf_get_string(f, "tokenizer.ggml.pre", "default", &pre, &n));
    if (st != NU_OK)
        return st;
    snprintf(name, 65, "%.*s", (int)(n > 64 ? 64 : n), pre);
    if (n > 64 || memchr(pre, 0, (size_t)n) || !nu_llm__pretok_info(name, NULL, add_bos))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "tokenizer: tokenizer.ggml.pre \"%.*s\" is not a pre-tokenizer nuvec "
                            "knows", (int)(n > 64 ? 64 : n), pre);
    return NU_OK;
}

/* Everything but the arrays' contents; add_bos is the default for tokenizer.ggml.add_bos_token. */
static nu_status read_keys(const nu_gguf *f, nu_llm__desc *d, bool bpe, bool add_bos)
{
    nu_llm_vocab *v = &d->v;
    nu_status st;
    if ((st = get_id(f, "tokenizer.ggml.bos_token_id", v->count, &v->bos)) != NU_OK ||
        (st = get_id(f, "tokenizer.ggml.eos_token_id", v->count, &v->eos)) != NU_OK ||
        (st = get_id(f, "tokenizer.ggml.unknown_token_id", v->count, &v->unk)) != NU_OK)
        return st;
    for (size_t k = 0; k < sizeof ID_KEYS / sizeof ID_KEYS[0]; k++)
        if ((st = get_id(f, ID_KEYS[k].key, v->count, &d->special[ID_KEYS[k].which])) != NU_OK)
            return st;
    bool no = false, yes = true;
    if ((st = gg(nu_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos, &v->add_bos))) != NU_OK ||
        (st = gg(nu_gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &no, &v->add_eos))) != NU_OK)
        return st;
    if (!bpe && (st = gg(nu_gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &yes, &v->add_space_prefix))) != NU_OK)
        return st;
    v->add_bos = v->add_bos && v->bos >= 0; /* as llama.cpp: a file may ask for a bos it lacks */
    v->add_eos = v->add_eos && v->eos >= 0;
    if (nu_gguf_has(f, "tokenizer.chat_template")) {
        uint64_t n;
        if ((st = gg(nu_gguf_get_string(f, "tokenizer.chat_template", NULL, &d->chat_template, &n))) != NU_OK)
            return st;
        d->chat_template_len = (size_t)n;
    }
    return NU_OK;
}

nu_status nu_llm__tokenizer_from_gguf(const nu_gguf *f, nu_llm_tokenizer **out)
{
    *out = NULL;
    const char *model;
    uint64_t mlen;
    if (!nu_gguf_has(f, "tokenizer.ggml.model"))
        return nu_llm__fail(NU_ERROR_FORMAT, "the file has no tokenizer.ggml.model");
    nu_status st = gg(nu_gguf_get_string(f, "tokenizer.ggml.model", NULL, &model, &mlen));
    if (st != NU_OK)
        return st;
    bool bpe = string_is(model, mlen, "gpt2");
    if (!bpe && !string_is(model, mlen, "llama"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "tokenizer.ggml.model %.*s is not supported (llama or gpt2)",
                            (int)(mlen > 64 ? 64 : mlen), model);
    nu_gguf_value tokens, scores, types, merges;
    bool has_scores = nu_gguf_has(f, "tokenizer.ggml.scores"), has_types = nu_gguf_has(f, "tokenizer.ggml.token_type");
    if (bpe && !nu_gguf_has(f, "tokenizer.ggml.merges"))
        return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: a gpt2 vocabulary without tokenizer.ggml.merges");
    if ((st = get_array(f, "tokenizer.ggml.tokens", NU_GGUF_STRING, 0, &tokens)) != NU_OK)
        return st;
    uint64_t n = tokens.length;
    if (n == 0 || n > INT32_MAX)
        return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: tokenizer.ggml.tokens has %llu tokens (1 .. %d allowed)",
                            (unsigned long long)n, INT32_MAX);
    if ((has_scores && (st = get_array(f, "tokenizer.ggml.scores", NU_GGUF_FLOAT32, n, &scores)) != NU_OK) ||
        (has_types && (st = get_array(f, "tokenizer.ggml.token_type", NU_GGUF_INT32, n, &types)) != NU_OK) ||
        (bpe && (st = get_array(f, "tokenizer.ggml.merges", NU_GGUF_STRING, 0, &merges)) != NU_OK))
        return st;
    if (bpe && merges.length > UINT32_MAX)
        return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: tokenizer.ggml.merges has %llu merges",
                            (unsigned long long)merges.length);
    nu_llm__desc d;
    nu_llm__desc_init(&d);
    nu_llm_vocab *v = &d.v;
    v->count = (uint32_t)n;
    v->model = bpe ? "gpt2" : "llama";
    nu_llm_piece *pieces = nu_llm__calloc(n, sizeof *pieces), *mp = NULL;
    float *sc = has_scores ? nu_llm__calloc(n, sizeof *sc) : NULL;
    int32_t *ty = has_types ? nu_llm__calloc(n, sizeof *ty) : NULL;
    uint8_t *flags = nu_llm__calloc(n, 1);
    if (bpe)
        mp = nu_llm__calloc(merges.length ? merges.length : 1, sizeof *mp);
    if (!pieces || (has_scores && !sc) || (has_types && !ty) || !flags || (bpe && !mp)) {
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: no memory for the vocabulary");
        goto done;
    }
    if ((st = get_strings(&tokens, pieces)) != NU_OK || (bpe && (st = get_strings(&merges, mp)) != NU_OK))
        goto done;
    /* Packed little-endian, unaligned: copied. */
    if (has_scores && scores.element_type == NU_GGUF_INT32) {
        for (uint64_t i = 0; i < n; i++) {
            int32_t x;
            memcpy(&x, (const char *)scores.data + 4 * i, 4);
            sc[i] = (float)x;
        }
    } else if (has_scores) {
        memcpy(sc, scores.data, n * sizeof *sc);
    }
    if (has_types)
        memcpy(ty, types.data, n * sizeof *ty);
    v->pieces = pieces;
    v->scores = sc;
    v->types = ty;
    v->merges = mp;
    v->merge_count = bpe ? (uint32_t)merges.length : 0;
    char pre[65] = "default";
    bool add_bos = !bpe; /* SentencePiece's default; byte-level BPE's is the pre-tokenizer's */
    if ((bpe && (st = read_pre(f, pre, &add_bos)) != NU_OK) || (st = read_keys(f, &d, bpe, add_bos)) != NU_OK)
        goto done;
    v->pre = bpe ? pre : NULL;
    phi3_flags(f, v, flags);
    d.flags = flags;
    st = nu_llm__build(&d, out);
done:
    nu_llm__free(pieces);
    nu_llm__free(sc);
    nu_llm__free(ty);
    nu_llm__free(flags);
    nu_llm__free(mp);
    return st;
}

/* ---- nu_llm_tokenizer_open ---------------------------------------------------------------- */

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

/* A GGUF file mapped privately (read-only pages of the page cache; a 4 GB model costs only the
 * metadata's pages) and parsed from memory: no device needed. */
static nu_status open_gguf(const char *path, nu_llm_tokenizer **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nu_llm__fail(NU_ERROR_IO, "nu_llm_tokenizer_open: cannot open %s: %s", path, strerror(errno));
    struct stat s;
    if (fstat(fd, &s) != 0) {
        int e = errno;
        close(fd);
        return nu_llm__fail(NU_ERROR_IO, "nu_llm_tokenizer_open: cannot stat %s: %s", path, strerror(e));
    }
    size_t size = (size_t)s.st_size;
    static const char empty[1];
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : (void *)empty;
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return nu_llm__fail(NU_ERROR_IO, "nu_llm_tokenizer_open: cannot map %s: %s", path, strerror(e));
    nu_gguf *g = NULL;
    char where[4200];
    snprintf(where, sizeof where, "nu_llm_tokenizer_open: %s", path);
    nu_status st = nu_gguf_parse(map, size, &g);
    if (st != NU_OK)
        st = nu_llm__fail(st, "%s: %s", where, nu_error_message(NULL));
    else if ((st = nu_llm__tokenizer_from_gguf(g, out)) != NU_OK)
        st = nu_llm__fail_in(st, where);
    nu_gguf_close(g);
    if (size)
        munmap(map, size);
    return st;
}

nu_status nu_llm_tokenizer_open(const char *path, nu_llm_tokenizer **out)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenizer_open: %s is NULL", path ? "out" : "path");
    struct stat s;
    if (stat(path, &s) != 0)
        return nu_llm__fail(NU_ERROR_IO, "nu_llm_tokenizer_open: %s: %s", path, strerror(errno));
    if (S_ISDIR(s.st_mode))
        return nu_llm__tokenizer_from_folder(path, out);
    if (ends_with(path, ".json")) {
        /* tokenizer.json's folder holds tokenizer_config.json and the rest. */
        size_t n = strlen(path);
        while (n && path[n - 1] != '/')
            n--;
        char *folder = nu_llm__malloc(n + 2);
        if (!folder)
            return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenizer_open: out of host memory");
        if (n)
            memcpy(folder, path, n);
        else
            folder[n++] = '.';
        folder[n] = 0;
        nu_status st = nu_llm__tokenizer_from_json(path, folder, out);
        nu_llm__free(folder);
        return st;
    }
    return open_gguf(path, out);
}
