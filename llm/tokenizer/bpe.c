/* bpe.c: byte-level BPE (GPT-2's scheme, as Llama 3, Qwen and the others use it): GPT-2's byte
 * alphabet, the merges by rank, encoding one pre-tokenized word, decoding a token.
 *
 * GPT-2's alphabet writes each byte as one code point so that every token is printable text: the
 * bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves (as Latin-1 code points) and the
 * other 68 bytes, in order, for U+0100 onwards. A word is encoded in that alphabet, one symbol a
 * byte, and the adjacent pair with the lowest merge rank (the leftmost on ties) is merged until
 * none is left. Symbols carry their token ids, so a pair's merge is one lookup of (left id, right
 * id) in a hash table of the merges (rank, result); the pairs wait in a heap (heap.h): O(n log n)
 * in the word's length. */
#include <string.h>

#include "heap.h"
#include "tok.h"

/* The code point GPT-2's alphabet writes byte b as. */
static uint32_t byte_cp(int b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    /* The others in order from U+0100: 0x00..0x20 (33), 0x7F..0xA0 (34), 0xAD. */
    if (b <= 0x20)
        return 0x100 + (uint32_t)b;
    if (b <= 0xA0)
        return 0x100 + 33 + (uint32_t)(b - 0x7F);
    return 0x100 + 33 + 34;
}

/* The byte code point cp stands for, or -1 (cp outside the alphabet). */
static int cp_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp > 0x100 + 33 + 34)
        return -1;
    uint32_t k = cp - 0x100;
    return k < 33 ? (int)k : k < 33 + 34 ? (int)(0x7F + k - 33) : 0xAD;
}

/* Byte b in the alphabet, into out (2 bytes at most); returns the length. */
static size_t put_byte(int b, char *out) { return nu_llm__utf8_put(byte_cp(b), out); }

/* ---- Merges ----------------------------------------------------------------------------- */

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdu;
    k ^= k >> 33;
    return k;
}

static uint64_t merge_key(int32_t left, int32_t right) { return ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1; }

/* The merge of (left, right): its rank, its result into *result; -1 when there is none. */
static int64_t find_merge(const nu_llm_tokenizer *t, int32_t left, int32_t right, int32_t *result)
{
    if (!t->merge_key)
        return -1;
    uint64_t key = merge_key(left, right);
    for (size_t i = mix(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        if (t->merge_key[i] == 0)
            return -1;
        if (t->merge_key[i] == key) {
            *result = t->merge_result[i];
            return t->merge_rank[i];
        }
    }
}

/* The merges "left right" (split at the first space after the first byte, as llama.cpp reads
 * them: the alphabet has no ' '), each part and their concatenation a token. The first of a pair
 * listed twice counts. */
static nu_status load_merges(nu_llm_tokenizer *t, const nu_llm_vocab *v)
{
    if (v->merge_count == 0)
        return NU_OK;
    size_t slots = 16;
    while (slots < (size_t)v->merge_count * 2)
        slots *= 2;
    t->merge_key = nu_llm__calloc(slots, sizeof *t->merge_key);
    t->merge_rank = nu_llm__malloc_array(slots, sizeof *t->merge_rank);
    t->merge_result = nu_llm__malloc_array(slots, sizeof *t->merge_result);
    char *both = NULL;
    size_t both_cap = 0;
    nu_status st = NU_OK;
    if (!t->merge_key || !t->merge_rank || !t->merge_result)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory for %u merges", v->merge_count);
    t->merge_mask = slots - 1;
    for (uint32_t r = 0; r < v->merge_count && st == NU_OK; r++) {
        const char *s = v->merges[r].text;
        size_t n = v->merges[r].length;
        const char *sp = n > 1 && s ? memchr(s + 1, ' ', n - 1) : NULL;
        if (!sp || sp + 1 == s + n) {
            st = nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: merge %u \"%.*s\" is not two pieces joined by a space", r,
                              (int)(n > 48 ? 48 : n), s ? s : "");
            break;
        }
        size_t ln = (size_t)(sp - s), rn = n - ln - 1;
        int32_t left = nu_llm__lookup(t, &t->merge_pieces, s, ln), right = nu_llm__lookup(t, &t->merge_pieces, sp + 1, rn);
        if (!nu_llm__grow((void **)&both, &both_cap, ln + rn, 1)) {
            st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory for the merges");
            break;
        }
        memcpy(both, s, ln);
        memcpy(both + ln, sp + 1, rn);
        int32_t result = nu_llm__lookup(t, &t->merge_pieces, both, ln + rn);
        if (left < 0 || right < 0 || result < 0) {
            const char *bad = left < 0 ? s : right < 0 ? sp + 1 : both;
            size_t bad_n = left < 0 ? ln : right < 0 ? rn : ln + rn;
            st = nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: merge %u \"%.*s\": \"%.*s\" is not a token", r,
                              (int)(n > 48 ? 48 : n), s, (int)(bad_n > 48 ? 48 : bad_n), bad);
            break;
        }
        uint64_t key = merge_key(left, right);
        size_t i = mix(key) & t->merge_mask;
        while (t->merge_key[i] != 0 && t->merge_key[i] != key)
            i = (i + 1) & t->merge_mask;
        if (t->merge_key[i] == 0) {
            t->merge_key[i] = key;
            t->merge_rank[i] = r;
            t->merge_result[i] = result;
        }
    }
    nu_llm__free(both);
    return st;
}

/* ---- Decoding --------------------------------------------------------------------------- */

/* What a token's text decodes to: each code point of the alphabet as its byte, any other (and
 * bytes that are not UTF-8) as they are; into dst when not NULL. */
static size_t decode_text(const char *s, size_t n, char *dst)
{
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        size_t c = nu_llm__utf8_char((const uint8_t *)s + i, n - i);
        int b = -1;
        if (c) {
            const uint8_t *u = (const uint8_t *)s + i;
            uint32_t cp = c == 1 ? u[0] : c == 2 ? (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F) : 0x110000;
            b = cp_byte(cp);
        } else {
            c = 1;
        }
        if (b >= 0) {
            if (dst)
                dst[out] = (char)b;
            out++;
        } else {
            if (dst)
                memcpy(dst + out, s + i, c);
            out += c;
        }
        i += c;
    }
    return out;
}

static bool decodes_raw(uint8_t type)
{
    return type == NU_LLM_TOKEN_CONTROL || type == NU_LLM_TOKEN_UNKNOWN || type == NU_LLM_TOKEN_USER_DEFINED;
}

size_t nu_llm__bpe_decode(const nu_llm_tokenizer *t, int32_t id, bool special, char *dst)
{
    uint8_t type = t->type[id];
    if (!special && (type == NU_LLM_TOKEN_CONTROL || type == NU_LLM_TOKEN_UNKNOWN))
        return 0;
    if (type == NU_LLM_TOKEN_BYTE) { /* "<0xXX>" byte fallback, as some BPE vocabularies have */
        if (dst)
            dst[0] = (char)nu_llm__byte_of_piece(nu_llm__piece(t, id), nu_llm__piece_len(t, id));
        return 1;
    }
    size_t n = t->dec_offset[id + 1] - t->dec_offset[id];
    if (dst && n)
        memcpy(dst, t->dec_text + t->dec_offset[id], n);
    return n;
}

/* Every token's decoded bytes, once: decoding is then a copy. */
static nu_status decode_all(nu_llm_tokenizer *t)
{
    size_t total = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        int32_t id = (int32_t)i;
        size_t n = nu_llm__piece_len(t, id);
        total += decodes_raw(t->type[i]) ? n : decode_text(nu_llm__piece(t, id), n, NULL);
    }
    t->dec_text = nu_llm__malloc(total ? total : 1);
    t->dec_offset = nu_llm__malloc_array((size_t)t->count + 1, sizeof *t->dec_offset);
    if (!t->dec_text || !t->dec_offset)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory for the decoded pieces");
    size_t at = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        int32_t id = (int32_t)i;
        const char *s = nu_llm__piece(t, id);
        size_t n = nu_llm__piece_len(t, id);
        t->dec_offset[i] = at;
        if (decodes_raw(t->type[i])) {
            if (n)
                memcpy(t->dec_text + at, s, n);
            at += n;
        } else {
            at += decode_text(s, n, t->dec_text + at);
        }
    }
    t->dec_offset[t->count] = at;
    for (uint32_t i = 0; i < t->count; i++) {
        size_t n = nu_llm__bpe_decode(t, (int32_t)i, false, NULL), raw = nu_llm__bpe_decode(t, (int32_t)i, true, NULL);
        t->max_piece = n > t->max_piece ? n : t->max_piece;
        t->max_raw = raw > t->max_raw ? raw : t->max_raw;
    }
    return NU_OK;
}

nu_status nu_llm__bpe_init(nu_llm_tokenizer *t, const nu_llm__desc *d)
{
    for (int b = 0; b < 256; b++) {
        char c[4];
        t->byte_token[b] = nu_llm__lookup(t, &t->merge_pieces, c, put_byte(b, c));
        if (t->byte_token[b] < 0 && t->special[NU_LLM_SPECIAL_UNK] == NU_LLM_NO_TOKEN)
            return nu_llm__fail(NU_ERROR_FORMAT,
                                "tokenizer: the vocabulary has no token for byte 0x%02X (\"%.*s\") and no unknown token "
                                "to fall back to",
                                b, (int)put_byte(b, c), c);
    }
    nu_status st = load_merges(t, &d->v);
    if (st != NU_OK)
        return st;
    const char *name = d->regex ? (d->pre_name ? d->pre_name : "tokenizer.json") : d->v.pre ? d->v.pre : "default";
    if (d->regex) {
        st = nu_llm__pretok_new(d->regex, d->regex_count, &t->pre);
        t->ignore_merges = d->ignore_merges;
    } else {
        st = nu_llm__pretok_named(name, &t->pre);
        nu_llm__pretok_info(name, &t->ignore_merges, NULL);
    }
    if (st != NU_OK)
        return st;
    size_t n = strlen(name);
    if (!(t->pre_name = nu_llm__malloc(n + 1)))
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory");
    memcpy(t->pre_name, name, n + 1);
    return decode_all(t);
}

/* ---- Encoding --------------------------------------------------------------------------- */

typedef struct symbol {
    int32_t id; /* the symbol's token, or -1 for a byte without one */
    uint32_t n; /* bytes; 0 once merged into its left neighbour */
    int32_t prev, next;
} symbol;

/* The pair (l, next of l) as a heap entry (key: rank, then l), when the two merge. */
static bool pair_of(const nu_llm_tokenizer *t, const symbol *sym, int32_t l, nu_llm__entry *out)
{
    if (l < 0 || sym[l].next < 0)
        return false;
    int32_t r = sym[l].next, result;
    if (sym[l].id < 0 || sym[r].id < 0)
        return false;
    int64_t rank = find_merge(t, sym[l].id, sym[r].id, &result);
    if (rank < 0)
        return false;
    *out = (nu_llm__entry){(uint64_t)rank << 32 | (uint32_t)l, sym[l].id, sym[r].id};
    return true;
}

static void offer(const nu_llm_tokenizer *t, const symbol *sym, nu_llm__heap *h, int32_t l)
{
    nu_llm__entry e;
    if (pair_of(t, sym, l, &e))
        nu_llm__heap_push(h, e);
}

nu_status nu_llm__bpe_word(const nu_llm_tokenizer *t, const char *word, size_t len, nu_llm__work *w, nu_llm__out *o)
{
    if (len == 0)
        return NU_OK;
    if (t->ignore_merges) { /* a word that is a token whole is that token */
        if (!nu_llm__grow((void **)&w->text, &w->text_cap, 2 * len, 1))
            return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenize: out of host memory");
        size_t n = 0;
        for (size_t i = 0; i < len; i++)
            n += put_byte((uint8_t)word[i], w->text + n);
        int32_t id = nu_llm__lookup(t, &t->merge_pieces, w->text, n);
        if (id >= 0) {
            nu_llm__emit(o, id);
            return NU_OK;
        }
    }
    /* Each merge adds at most two pairs to the len - 1 initial ones. */
    if (!nu_llm__grow(&w->sym, &w->sym_cap, len, sizeof(symbol)) ||
        !nu_llm__grow(&w->heap, &w->heap_cap, 3 * len, sizeof(nu_llm__entry)))
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenize: out of host memory for a word of %zu bytes",
                            len);
    symbol *sym = w->sym;
    nu_llm__heap h = {w->heap, 0};
    for (size_t i = 0; i < len; i++)
        sym[i] = (symbol){t->byte_token[(uint8_t)word[i]], 1, (int32_t)i - 1, i + 1 < len ? (int32_t)i + 1 : -1};
    for (size_t i = 0; i + 1 < len; i++)
        h.n += pair_of(t, sym, (int32_t)i, &h.e[h.n]);
    nu_llm__heap_make(&h);
    while (h.n) {
        nu_llm__entry e = nu_llm__heap_pop(&h);
        int32_t li = (int32_t)(uint32_t)e.key, ri = sym[li].next, result;
        symbol *l = &sym[li];
        /* Stale when either has changed since: a merge gives the left a new id and empties the
         * right, so the left's id and its neighbour's tell. */
        if (l->n == 0 || l->id != e.a || ri < 0 || sym[ri].id != e.b)
            continue;
        find_merge(t, l->id, sym[ri].id, &result);
        symbol *r = &sym[ri];
        l->id = result;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (l->next >= 0)
            sym[l->next].prev = li;
        offer(t, sym, &h, l->prev);
        offer(t, sym, &h, li);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next)
        nu_llm__emit(o, sym[i].id >= 0 ? sym[i].id : t->special[NU_LLM_SPECIAL_UNK]);
    return NU_OK;
}

typedef struct word_ctx {
    const nu_llm_tokenizer *t;
    nu_llm__work *w;
    nu_llm__out *o;
} word_ctx;

static nu_status on_word(void *user, const char *s, size_t n)
{
    word_ctx *c = user;
    return nu_llm__bpe_word(c->t, s, n, c->w, c->o);
}

nu_status nu_llm__bpe_encode(const nu_llm_tokenizer *t, const char *text, size_t len, nu_llm__work *w, nu_llm__out *o)
{
    word_ctx c = {t, w, o};
    return nu_llm__pretok_split(t->pre, text, len, w, on_word, &c);
}
