/* vocab.c: a tokenizer's vocabulary: the checks, the copy of the arrays, the tables from a piece's
 * text to its id, the getters, and nu_llm__build, which the kinds' parts (spm.c, bpe.c) and the
 * special tokens (special.c) complete. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tok.h"

nu_status nu_llm__fail_in(nu_status status, const char *prefix)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", nu_llm_error_message());
    return nu_llm__fail(status, "%s: %s", prefix, why);
}

/* ---- Piece tables ----------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3u;
    }
    return h ^ (h >> 29);
}

int32_t nu_llm__lookup(const nu_llm_tokenizer *t, const nu_llm__table *tab, const char *s, size_t n)
{
    for (size_t i = hash_bytes(s, n) & tab->mask;; i = (i + 1) & tab->mask) {
        int32_t id = tab->slots[i];
        if (id < 0)
            return -1;
        if (nu_llm__piece_len(t, id) == n && memcmp(nu_llm__piece(t, id), s, n) == 0)
            return id;
    }
}

/* Enters `id` under its text; a text already there keeps its id unless `replace`. */
static void table_put(const nu_llm_tokenizer *t, nu_llm__table *tab, int32_t id, bool replace)
{
    const char *s = nu_llm__piece(t, id);
    size_t n = nu_llm__piece_len(t, id);
    size_t i = hash_bytes(s, n) & tab->mask;
    for (; tab->slots[i] >= 0; i = (i + 1) & tab->mask) {
        int32_t other = tab->slots[i];
        if (nu_llm__piece_len(t, other) == n && memcmp(nu_llm__piece(t, other), s, n) == 0) {
            if (replace)
                tab->slots[i] = id;
            return;
        }
    }
    tab->slots[i] = id;
}

/* A power-of-two table at most half full: short probe runs. */
static nu_status table_alloc(nu_llm__table *tab, uint32_t count)
{
    size_t slots = 16;
    while (slots < (size_t)count * 2)
        slots *= 2;
    tab->slots = nu_llm__malloc_array(slots, sizeof *tab->slots);
    if (!tab->slots)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory for the piece table of %u tokens",
                            count);
    memset(tab->slots, 0xff, slots * sizeof *tab->slots); /* -1: empty */
    tab->mask = slots - 1;
    return NU_OK;
}

static bool mergeable(uint8_t type)
{
    return type == NU_LLM_TOKEN_NORMAL || type == NU_LLM_TOKEN_UNDEFINED || type == NU_LLM_TOKEN_USER_DEFINED;
}

/* The two tables: SentencePiece encodes into mergeable pieces (the first of equal texts); byte-level
 * BPE looks any token up by text, the last of equal texts winning (as llama.cpp's map). */
static nu_status build_tables(nu_llm_tokenizer *t)
{
    nu_status st = table_alloc(&t->merge_pieces, t->count);
    if (st == NU_OK)
        st = table_alloc(&t->all_pieces, t->count);
    if (st != NU_OK)
        return st;
    bool bpe = t->kind == NU_LLM__BPE;
    for (uint32_t i = 0; i < t->count; i++) {
        int32_t id = (int32_t)i;
        if (nu_llm__piece_len(t, id) == 0)
            continue;
        table_put(t, &t->all_pieces, id, bpe);
        if (bpe || mergeable(t->type[i]))
            table_put(t, &t->merge_pieces, id, bpe);
    }
    return NU_OK;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int nu_llm__byte_of_piece(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

bool nu_llm__grow(void **buf, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n = n > SIZE_MAX / 2 ? need : n * 2;
    void *p = nu_llm__malloc_array(n, size);
    if (!p)
        return false;
    if (*cap)
        memcpy(p, *buf, *cap * size);
    nu_llm__free(*buf);
    *buf = p;
    *cap = n;
    return true;
}

/* ---- Checks and the copy --------------------------------------------------------------- */

static nu_status check_id(const char *what, int32_t id, uint32_t count)
{
    if (id != NU_LLM_NO_TOKEN && (id < 0 || (uint32_t)id >= count))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT,
                            "tokenizer: the %s id %d is outside the vocabulary of %u tokens (or %d for none)",
                            what, (int)id, count, NU_LLM_NO_TOKEN);
    return NU_OK;
}

static const char *const SPECIAL_NAMES[NU_LLM_SPECIAL_COUNT] = {
    "bos", "eos", "eot", "eom", "unk", "pad", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep"};

/* Everything about the vocabulary that can be checked before allocating. */
static nu_status check_vocab(const nu_llm__desc *d, size_t *total_bytes)
{
    const nu_llm_vocab *v = &d->v;
    *total_bytes = 0;
    if (v->count == 0 || v->count > INT32_MAX)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: the vocabulary has %u tokens (1 .. %d allowed)",
                            v->count, INT32_MAX);
    if (!v->pieces)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: the vocabulary has no pieces (NULL)");
    if (v->model && strcmp(v->model, "llama") && strcmp(v->model, "gpt2"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "tokenizer: model \"%.64s\" is not supported (llama or gpt2)", v->model);
    nu_status st;
    if ((st = check_id("bos", v->bos, v->count)) != NU_OK || (st = check_id("eos", v->eos, v->count)) != NU_OK ||
        (st = check_id("unk", v->unk, v->count)) != NU_OK)
        return st;
    for (int k = NU_LLM_SPECIAL_EOT; k < NU_LLM_SPECIAL_COUNT; k++)
        if (k != NU_LLM_SPECIAL_UNK && (st = check_id(SPECIAL_NAMES[k], d->special[k], v->count)) != NU_OK)
            return st;
    for (size_t i = 0; i < d->eog_count; i++)
        if ((st = check_id("end-of-generation", d->eog[i], v->count)) != NU_OK)
            return st;
    if (v->add_bos && v->bos == NU_LLM_NO_TOKEN)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: add_bos is set but the vocabulary has no bos token");
    if (v->add_eos && v->eos == NU_LLM_NO_TOKEN)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: add_eos is set but the vocabulary has no eos token");
    if (v->merge_count && !v->merges)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: %u merges but no merges array (NULL)", v->merge_count);
    size_t total = 0;
    for (uint32_t i = 0; i < v->count; i++) {
        const nu_llm_piece *p = &v->pieces[i];
        if (!p->text && p->length)
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: piece %u has length %zu but no text (NULL)", i,
                                p->length);
        if (p->length > SIZE_MAX / 4 - total)
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: the pieces' lengths overflow");
        total += p->length;
        int32_t type = v->types ? v->types[i] : NU_LLM_TOKEN_NORMAL;
        if (type < NU_LLM_TOKEN_UNDEFINED || type > NU_LLM_TOKEN_BYTE)
            return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: token %u has type %d (GGUF token types are 0 .. 6)", i,
                                (int)type);
        if (v->scores && isnan(v->scores[i]))
            return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: token %u has a NaN score", i);
        if (type == NU_LLM_TOKEN_BYTE && nu_llm__byte_of_piece(p->text, p->length) < 0)
            return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: token %u has type byte but its piece \"%.*s\" is not <0xXX>",
                                i, (int)(p->length > 32 ? 32 : p->length), p->text ? p->text : "");
    }
    *total_bytes = total;
    return NU_OK;
}

void nu_llm__desc_init(nu_llm__desc *d)
{
    memset(d, 0, sizeof *d);
    for (int k = 0; k < NU_LLM_SPECIAL_COUNT; k++)
        d->special[k] = NU_LLM_NO_TOKEN;
    d->v.bos = d->v.eos = d->v.unk = NU_LLM_NO_TOKEN;
}

void nu_llm_tokenizer_free(nu_llm_tokenizer *t)
{
    if (!t)
        return;
    nu_llm__free(t->text);
    nu_llm__free(t->offset);
    nu_llm__free(t->score);
    nu_llm__free(t->type);
    nu_llm__free(t->flags);
    nu_llm__free(t->merge_pieces.slots);
    nu_llm__free(t->all_pieces.slots);
    nu_llm__free(t->merge_key);
    nu_llm__free(t->merge_rank);
    nu_llm__free(t->merge_result);
    nu_llm__free(t->dec_text);
    nu_llm__free(t->dec_offset);
    nu_llm__pretok_free(t->pre);
    nu_llm__free(t->pre_name);
    nu_llm__free(t->chat_template);
    nu_llm__specials_free(t->specials);
    nu_llm__free(t->eog);
    nu_llm__free(t);
}

static char *copy_string(const char *s, size_t n)
{
    char *c = nu_llm__malloc(n + 1);
    if (c) {
        if (n)
            memcpy(c, s, n);
        c[n] = 0;
    }
    return c;
}

/* The arrays copied into t. */
static nu_status copy_arrays(nu_llm_tokenizer *t, const nu_llm__desc *d, size_t total)
{
    const nu_llm_vocab *v = &d->v;
    t->text = nu_llm__malloc(total ? total : 1);
    t->offset = nu_llm__malloc_array((size_t)v->count + 1, sizeof *t->offset);
    t->score = nu_llm__malloc_array(v->count, sizeof *t->score);
    t->type = nu_llm__malloc_array(v->count, sizeof *t->type);
    t->flags = nu_llm__calloc(v->count, sizeof *t->flags);
    if (d->chat_template)
        t->chat_template = copy_string(d->chat_template, d->chat_template_len);
    if (!t->text || !t->offset || !t->score || !t->type || !t->flags || (d->chat_template && !t->chat_template))
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory for %u tokens (%zu bytes of text)",
                            v->count, total);
    size_t at = 0;
    for (uint32_t i = 0; i < v->count; i++) {
        const nu_llm_piece *p = &v->pieces[i];
        t->offset[i] = at;
        if (p->length)
            memcpy(t->text + at, p->text, p->length);
        at += p->length;
        t->score[i] = v->scores ? v->scores[i] : 0.0f;
        t->type[i] = (uint8_t)(v->types ? v->types[i] : NU_LLM_TOKEN_NORMAL);
        if (d->flags)
            t->flags[i] = d->flags[i] & (NU_LLM__LSTRIP | NU_LLM__RSTRIP);
    }
    t->offset[v->count] = at;
    return NU_OK;
}

nu_status nu_llm__build(const nu_llm__desc *d, nu_llm_tokenizer **out)
{
    *out = NULL;
    size_t total;
    nu_status st = check_vocab(d, &total);
    if (st != NU_OK)
        return st;
    nu_llm_tokenizer *t = nu_llm__calloc(1, sizeof *t);
    if (!t)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory");
    const nu_llm_vocab *v = &d->v;
    t->kind = v->model && !strcmp(v->model, "gpt2") ? NU_LLM__BPE : NU_LLM__SPM;
    t->count = v->count;
    memcpy(t->special, d->special, sizeof t->special);
    t->special[NU_LLM_SPECIAL_BOS] = v->bos;
    t->special[NU_LLM_SPECIAL_EOS] = v->eos;
    t->special[NU_LLM_SPECIAL_UNK] = v->unk;
    t->add_bos = v->add_bos;
    t->add_eos = v->add_eos;
    t->add_space_prefix = v->add_space_prefix;
    if ((st = copy_arrays(t, d, total)) != NU_OK || (st = nu_llm__specials_init(t, d)) != NU_OK ||
        (st = build_tables(t)) != NU_OK ||
        (st = t->kind == NU_LLM__BPE ? nu_llm__bpe_init(t, d) : nu_llm__spm_init(t)) != NU_OK) {
        nu_llm_tokenizer_free(t);
        return st;
    }
    *out = t;
    return NU_OK;
}

nu_status nu_llm_tokenizer_new(const nu_llm_vocab *v, nu_llm_tokenizer **out)
{
    if (out)
        *out = NULL;
    if (!v || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenizer_new: %s is NULL", v ? "out" : "vocab");
    nu_llm__desc d;
    nu_llm__desc_init(&d);
    d.v = *v;
    return nu_llm__build(&d, out);
}

/* ---- Getters ----------------------------------------------------------------------------- */

uint32_t nu_llm_tokenizer_count(const nu_llm_tokenizer *t) { return t ? t->count : 0; }
int32_t nu_llm_tokenizer_bos(const nu_llm_tokenizer *t) { return t ? t->special[NU_LLM_SPECIAL_BOS] : NU_LLM_NO_TOKEN; }
int32_t nu_llm_tokenizer_eos(const nu_llm_tokenizer *t) { return t ? t->special[NU_LLM_SPECIAL_EOS] : NU_LLM_NO_TOKEN; }
bool nu_llm_tokenizer_add_bos(const nu_llm_tokenizer *t) { return t ? t->add_bos : false; }
bool nu_llm_tokenizer_add_eos(const nu_llm_tokenizer *t) { return t ? t->add_eos : false; }
size_t nu_llm_tokenizer_max_piece(const nu_llm_tokenizer *t) { return t ? t->max_piece : 0; }

const char *nu_llm_tokenizer_model(const nu_llm_tokenizer *t)
{
    return !t ? "" : t->kind == NU_LLM__BPE ? "gpt2" : "llama";
}

const char *nu_llm_tokenizer_pre(const nu_llm_tokenizer *t) { return t && t->pre_name ? t->pre_name : ""; }
const char *nu_llm_tokenizer_chat_template(const nu_llm_tokenizer *t) { return t ? t->chat_template : NULL; }

int32_t nu_llm_tokenizer_special(const nu_llm_tokenizer *t, nu_llm_special which)
{
    return t && (unsigned)which < NU_LLM_SPECIAL_COUNT ? t->special[which] : NU_LLM_NO_TOKEN;
}

bool nu_llm_tokenizer_is_eog(const nu_llm_tokenizer *t, int32_t id)
{
    return t && id >= 0 && (uint32_t)id < t->count && (t->flags[id] & NU_LLM__EOG);
}

size_t nu_llm_tokenizer_eog(const nu_llm_tokenizer *t, int32_t *ids, size_t cap)
{
    if (!t)
        return 0;
    for (size_t i = 0; ids && i < cap && i < t->eog_count; i++)
        ids[i] = t->eog[i];
    return t->eog_count;
}

nu_status nu_llm_tokenizer_piece(const nu_llm_tokenizer *t, int32_t id, nu_llm_piece *out)
{
    if (out)
        *out = (nu_llm_piece){NULL, 0};
    if (!t || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenizer_piece: %s is NULL", t ? "out" : "the tokenizer");
    if (id < 0 || (uint32_t)id >= t->count)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenizer_piece: token %d is outside the vocabulary of %u tokens",
                            (int)id, t->count);
    *out = (nu_llm_piece){nu_llm__piece(t, id), nu_llm__piece_len(t, id)};
    return NU_OK;
}

nu_llm_token_type nu_llm_tokenizer_type(const nu_llm_tokenizer *t, int32_t id)
{
    return t && id >= 0 && (uint32_t)id < t->count ? (nu_llm_token_type)t->type[id] : NU_LLM_TOKEN_UNDEFINED;
}

int32_t nu_llm_tokenizer_find(const nu_llm_tokenizer *t, const char *text, size_t len)
{
    if (!t || (!text && len) || len == 0)
        return NU_LLM_NO_TOKEN;
    int32_t id = nu_llm__lookup(t, &t->all_pieces, text, len);
    return id < 0 ? NU_LLM_NO_TOKEN : id;
}
