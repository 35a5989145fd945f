/* tokenizer.c: the SentencePiece-style BPE tokenizer of Llama (scores, byte fallback) from a GGUF
 * vocabulary (nuvec_llm.h says what it does and does not support).
 *
 * Encoding keeps the text's symbols (initially its UTF-8 characters) in a doubly linked list and
 * every adjacent pair whose concatenation is a mergeable piece in a binary heap ordered by the
 * piece's score, then the left symbol's position (leftmost wins a tie). Popping the best pair
 * merges it and offers the two new pairs it forms with its neighbours, so a text of n characters
 * costs O(n log n), not the O(n^2) of rescanning for the best pair after each merge. Entries made
 * stale by an earlier merge stay in the heap and are recognised when popped: a merge only ever
 * grows the left symbol and empties the right one, so a pair is current exactly when both
 * symbols are non-empty and their lengths still add up to the entry's. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "nuvec_llm.h"

/* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space, in UTF-8. */
static const char SPACE_MARK[3] = {'\xE2', '\x96', '\x81'};
/* U+2047 DOUBLE QUESTION MARK: what an unknown token decodes to (SentencePiece's unk surface). */
static const char UNKNOWN_TEXT[3] = {'\xE2', '\x81', '\x87'};

struct nu_llm_tokenizer {
    uint32_t count;
    char *text;          /* every piece's bytes, one after the other */
    size_t *offset;      /* piece i is text[offset[i] .. offset[i + 1]) */
    float *score;
    uint8_t *type;
    int32_t bos, eos, unk;
    bool add_bos, add_space_prefix;
    int32_t byte_id[256]; /* the byte token of each byte, or NU_LLM_NO_TOKEN */
    bool all_bytes;       /* every byte has a byte token */
    /* Open addressing, linear probing: the mergeable pieces (normal, undefined, user-defined) by
     * text; an empty slot holds -1. */
    int32_t *slots;
    size_t mask;
    size_t max_piece; /* the longest decoded token */
};

/* ---- The piece table ---------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3u;
    }
    return h ^ (h >> 29);
}

static size_t piece_length(const nu_llm_tokenizer *t, int32_t id)
{
    return t->offset[id + 1] - t->offset[id];
}

/* The mergeable piece whose text is s[0 .. n), or -1. */
static int32_t lookup(const nu_llm_tokenizer *t, const char *s, size_t n)
{
    for (size_t i = hash_bytes(s, n) & t->mask;; i = (i + 1) & t->mask) {
        int32_t id = t->slots[i];
        if (id < 0)
            return -1;
        if (piece_length(t, id) == n && memcmp(t->text + t->offset[id], s, n) == 0)
            return id;
    }
}

static bool mergeable(uint8_t type)
{
    return type == NU_LLM_TOKEN_NORMAL || type == NU_LLM_TOKEN_UNDEFINED || type == NU_LLM_TOKEN_USER_DEFINED;
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

/* The byte a "<0xXX>" piece stands for, or -1. */
static int byte_of_piece(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* ---- Decoding one token ----------------------------------------------------------------------- */

/* Whether a token after `prev` starts the text, whose first piece loses its leading space. */
static bool first_piece(const nu_llm_tokenizer *t, int32_t prev)
{
    return t->add_space_prefix && (prev < 0 || prev == t->bos);
}

/* What token `id` decodes to (see nu_llm_token_to_text), without a leading space if `strip`,
 * into dst when it is not NULL; returns its length. */
static size_t decode(const nu_llm_tokenizer *t, int32_t id, bool strip, char *dst)
{
    const char *s = t->text + t->offset[id];
    size_t n = piece_length(t, id), out = 0;
    switch (t->type[id]) {
    case NU_LLM_TOKEN_CONTROL:
        return 0;
    case NU_LLM_TOKEN_UNKNOWN:
        if (dst)
            memcpy(dst, UNKNOWN_TEXT, sizeof UNKNOWN_TEXT);
        return sizeof UNKNOWN_TEXT;
    case NU_LLM_TOKEN_BYTE:
        if (dst)
            dst[0] = (char)byte_of_piece(s, n); /* checked when the tokenizer was made */
        return 1;
    default:
        break;
    }
    /* SentencePiece drops the space it put in front of the text when it decodes the first piece. */
    for (size_t i = 0; i < n;) {
        char c;
        if (n - i >= 3 && memcmp(s + i, SPACE_MARK, 3) == 0) {
            c = ' ';
            i += 3;
        } else {
            c = s[i++];
        }
        if (strip && out == 0 && c == ' ') {
            strip = false;
            continue;
        }
        strip = false;
        if (dst)
            dst[out] = c;
        out++;
    }
    return out;
}

/* ---- Creation ------------------------------------------------------------------------------- */

void nu_llm_tokenizer_free(nu_llm_tokenizer *t)
{
    if (!t)
        return;
    nu_llm__free(t->text);
    nu_llm__free(t->offset);
    nu_llm__free(t->score);
    nu_llm__free(t->type);
    nu_llm__free(t->slots);
    nu_llm__free(t);
}

static nu_status check_id(const char *what, int32_t id, uint32_t count)
{
    if (id != NU_LLM_NO_TOKEN && (id < 0 || (uint32_t)id >= count))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT,
                            "tokenizer: the %s id %d is outside the vocabulary of %u tokens (or %d for none)",
                            what, (int)id, count, NU_LLM_NO_TOKEN);
    return NU_OK;
}

/* Everything about the vocabulary that can be checked before allocating. */
static nu_status check_vocab(const nu_llm_vocab *v, size_t *total_bytes)
{
    *total_bytes = 0;
    if (v->count == 0 || v->count > INT32_MAX)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: the vocabulary has %u tokens (1 .. %d allowed)",
                            v->count, INT32_MAX);
    if (!v->pieces)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: the vocabulary has no pieces (NULL)");
    nu_status st;
    if ((st = check_id("bos", v->bos, v->count)) != NU_OK || (st = check_id("eos", v->eos, v->count)) != NU_OK ||
        (st = check_id("unk", v->unk, v->count)) != NU_OK)
        return st;
    if (v->add_bos && v->bos == NU_LLM_NO_TOKEN)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: add_bos is set but the vocabulary has no bos token");
    size_t total = 0;
    for (uint32_t i = 0; i < v->count; i++) {
        const nu_llm_piece *p = &v->pieces[i];
        if (!p->text && p->length)
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: piece %u has length %zu but no text (NULL)", i,
                                p->length);
        if (p->length > SIZE_MAX - total)
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "tokenizer: the pieces' lengths overflow");
        total += p->length;
        int32_t type = v->types ? v->types[i] : NU_LLM_TOKEN_NORMAL;
        if (type < NU_LLM_TOKEN_UNDEFINED || type > NU_LLM_TOKEN_BYTE)
            return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: token %u has type %d (GGUF token types are 0 .. 6)", i,
                                (int)type);
        if (v->scores && isnan(v->scores[i]))
            return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: token %u has a NaN score", i);
        if (type == NU_LLM_TOKEN_BYTE && byte_of_piece(p->text, p->length) < 0)
            return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer: token %u has type byte but its piece \"%.*s\" is not <0xXX>",
                                i, (int)(p->length > 32 ? 32 : p->length), p->text ? p->text : "");
    }
    *total_bytes = total;
    return NU_OK;
}

nu_status nu_llm_tokenizer_new(const nu_llm_vocab *v, nu_llm_tokenizer **out)
{
    if (out)
        *out = NULL;
    if (!v || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenizer_new: %s is NULL", v ? "out" : "vocab");
    size_t total;
    nu_status st = check_vocab(v, &total);
    if (st != NU_OK)
        return st;

    /* A power-of-two table at most half full: short probe runs. */
    size_t slots = 16;
    while (slots < (size_t)v->count * 2) {
        if (slots > SIZE_MAX / 2 / sizeof(int32_t))
            return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: the piece table for %u tokens is too large",
                                v->count);
        slots *= 2;
    }
    nu_llm_tokenizer *t = nu_llm__calloc(1, sizeof *t);
    if (!t)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory");
    t->count = v->count;
    t->text = nu_llm__malloc(total);
    t->offset = nu_llm__malloc_array((size_t)v->count + 1, sizeof *t->offset);
    t->score = nu_llm__malloc_array(v->count, sizeof *t->score);
    t->type = nu_llm__malloc_array(v->count, sizeof *t->type);
    t->slots = nu_llm__malloc_array(slots, sizeof *t->slots);
    if (!t->text || !t->offset || !t->score || !t->type || !t->slots) {
        nu_llm_tokenizer_free(t);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory for %u tokens (%zu bytes of text)",
                            v->count, total);
    }
    t->bos = v->bos;
    t->eos = v->eos;
    t->unk = v->unk;
    t->add_bos = v->add_bos;
    t->add_space_prefix = v->add_space_prefix;
    t->mask = slots - 1;
    memset(t->slots, 0xff, slots * sizeof *t->slots); /* -1: empty */
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = NU_LLM_NO_TOKEN;

    size_t at = 0;
    for (uint32_t i = 0; i < v->count; i++) {
        const nu_llm_piece *p = &v->pieces[i];
        t->offset[i] = at;
        if (p->length)
            memcpy(t->text + at, p->text, p->length);
        at += p->length;
        t->score[i] = v->scores ? v->scores[i] : 0.0f;
        t->type[i] = (uint8_t)(v->types ? v->types[i] : NU_LLM_TOKEN_NORMAL);
    }
    t->offset[v->count] = at;

    for (uint32_t i = 0; i < v->count; i++) {
        int32_t id = (int32_t)i;
        size_t n = piece_length(t, id);
        const char *s = t->text + t->offset[id];
        if (t->type[i] == NU_LLM_TOKEN_BYTE) {
            int b = byte_of_piece(s, n);
            if (t->byte_id[b] == NU_LLM_NO_TOKEN)
                t->byte_id[b] = id;
        } else if (mergeable(t->type[i]) && n > 0 && lookup(t, s, n) < 0) {
            /* The first of pieces with the same text is the one encoding produces. */
            size_t k = hash_bytes(s, n) & t->mask;
            while (t->slots[k] >= 0)
                k = (k + 1) & t->mask;
            t->slots[k] = id;
        }
    }
    t->all_bytes = true;
    for (int b = 0; b < 256; b++) {
        if (t->byte_id[b] != NU_LLM_NO_TOKEN)
            continue;
        t->all_bytes = false;
        if (t->unk == NU_LLM_NO_TOKEN) {
            nu_llm_tokenizer_free(t);
            return nu_llm__fail(NU_ERROR_FORMAT,
                                "tokenizer: the vocabulary has no byte token <0x%02X> and no unknown token to fall back to",
                                b);
        }
    }
    for (uint32_t i = 0; i < v->count; i++) {
        size_t n = decode(t, (int32_t)i, false, NULL);
        if (n > t->max_piece)
            t->max_piece = n;
    }
    *out = t;
    return NU_OK;
}

uint32_t nu_llm_tokenizer_count(const nu_llm_tokenizer *t)
{
    return t ? t->count : 0;
}

int32_t nu_llm_tokenizer_bos(const nu_llm_tokenizer *t)
{
    return t ? t->bos : NU_LLM_NO_TOKEN;
}

int32_t nu_llm_tokenizer_eos(const nu_llm_tokenizer *t)
{
    return t ? t->eos : NU_LLM_NO_TOKEN;
}

bool nu_llm_tokenizer_add_bos(const nu_llm_tokenizer *t)
{
    return t ? t->add_bos : false;
}

size_t nu_llm_tokenizer_max_piece(const nu_llm_tokenizer *t)
{
    return t ? t->max_piece : 0;
}

/* ---- Encoding ------------------------------------------------------------------------------- */

/* The length of the well-formed UTF-8 character at s[0 .. n) (RFC 3629), or 0 if there is none. */
static size_t utf8_char(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* no overlong forms */
        else if (c == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F; /* at most U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

size_t nu_llm_utf8_complete(const char *str, size_t len)
{
    if (!str)
        return 0;
    const uint8_t *s = (const uint8_t *)str;
    /* A character that more bytes could complete starts at most 3 bytes before the end. */
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        size_t p = len - back;
        uint8_t c = s[p];
        if ((c & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back for its lead */
        size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (need <= back)
            return len; /* ASCII, an invalid lead, or a character that is all there */
        /* Incomplete: hold it back only if what is there can still become a valid character. */
        uint8_t pad[4] = {c, 0, 0, 0};
        for (size_t i = 1; i < need; i++)
            pad[i] = i < back ? s[p + i] : (i == 1 && c == 0xE0 ? 0xA0 : i == 1 && c == 0xF0 ? 0x90 : 0x80);
        return utf8_char(pad, need) ? p : len;
    }
    return len;
}

typedef struct symbol {
    uint32_t start, n; /* its bytes in the normalised text; n = 0 once merged into its left */
    int32_t prev, next;
    bool raw; /* a byte that is no part of a valid UTF-8 character: never merged */
} symbol;

typedef struct pair {
    float score;
    int32_t left, right;
    uint32_t size; /* the merged symbol's bytes */
} pair;

/* Whether pair a comes out of the heap before b: the higher score, then the leftmost. */
static bool before(const pair *a, const pair *b)
{
    if (a->score != b->score)
        return a->score > b->score;
    if (a->left != b->left)
        return a->left < b->left;
    return a->size < b->size;
}

typedef struct encoder {
    const nu_llm_tokenizer *t;
    const char *text; /* normalised */
    symbol *sym;
    pair *heap;
    size_t heap_n;
} encoder;

static void heap_push(encoder *e, pair p)
{
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(&p, &e->heap[up]))
            break;
        e->heap[i] = e->heap[up];
        i = up;
    }
    e->heap[i] = p;
}

static pair heap_pop(encoder *e)
{
    pair top = e->heap[0], last = e->heap[--e->heap_n];
    size_t i = 0, n = e->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&e->heap[c + 1], &e->heap[c]))
            c++;
        if (!before(&e->heap[c], &last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n)
        e->heap[i] = last;
    return top;
}

/* Offers the pair (l, r) to the heap if their concatenation is a mergeable piece. */
static void offer(encoder *e, int32_t l, int32_t r)
{
    if (l < 0 || r < 0 || e->sym[l].raw || e->sym[r].raw)
        return;
    uint32_t size = e->sym[l].n + e->sym[r].n;
    int32_t id = lookup(e->t, e->text + e->sym[l].start, size);
    if (id >= 0)
        heap_push(e, (pair){e->t->score[id], l, r, size});
}

/* Puts id at ids[*n] if there is room; counts it either way. */
static void emit(int32_t *ids, size_t cap, size_t *n, int32_t id)
{
    if (*n < cap)
        ids[*n] = id;
    (*n)++;
}

nu_status nu_llm_tokenize(const nu_llm_tokenizer *t, const char *text, size_t len, int add_bos, int32_t *ids,
                          size_t cap, size_t *count)
{
    if (count)
        *count = 0;
    if (!t || !count || (!text && len) || (!ids && cap))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenize: %s is NULL",
                            !t ? "the tokenizer" : !count ? "count" : !ids && cap ? "ids" : "text");
    bool bos = add_bos < 0 ? t->add_bos : add_bos > 0;
    if (bos && t->bos == NU_LLM_NO_TOKEN)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenize: add_bos asked for, but the vocabulary has no bos");
    size_t n = 0;
    if (bos)
        emit(ids, cap, &n, t->bos);
    if (len == 0)
        goto done;

    /* The normalised text: " " in front, every ' ' as U+2581. Symbol positions are 32-bit. */
    if (len > (INT32_MAX - 3) / 3)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenize: the text of %zu bytes is too long (at most %d)",
                            len, (INT32_MAX - 3) / 3);
    size_t spaces = t->add_space_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    size_t norm_len = len + (t->add_space_prefix ? 1 : 0) + 2 * spaces;
    encoder e = {.t = t};
    char *norm = nu_llm__malloc(norm_len);
    e.sym = nu_llm__malloc_array(norm_len, sizeof *e.sym);
    /* Each merge adds at most two pairs to the initial ones: fewer than 3 per symbol. */
    e.heap = nu_llm__malloc_array(3 * norm_len, sizeof *e.heap);
    if (!norm || !e.sym || !e.heap) {
        nu_llm__free(norm);
        nu_llm__free(e.sym);
        nu_llm__free(e.heap);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenize: out of host memory for a text of %zu bytes",
                            len);
    }
    size_t w = 0;
    if (t->add_space_prefix) {
        memcpy(norm, SPACE_MARK, 3);
        w = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(norm + w, SPACE_MARK, 3);
            w += 3;
        } else {
            norm[w++] = text[i];
        }
    }
    e.text = norm;

    int32_t nsym = 0;
    for (size_t i = 0; i < norm_len;) {
        size_t c = utf8_char((const uint8_t *)norm + i, norm_len - i);
        symbol *s = &e.sym[nsym];
        s->start = (uint32_t)i;
        s->n = c ? (uint32_t)c : 1;
        s->raw = c == 0;
        s->prev = nsym - 1;
        s->next = nsym + 1;
        nsym++;
        i += s->n;
    }
    e.sym[nsym - 1].next = -1;
    for (int32_t i = 0; i + 1 < nsym; i++)
        offer(&e, i, i + 1);
    while (e.heap_n) {
        pair p = heap_pop(&e);
        symbol *l = &e.sym[p.left], *r = &e.sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size)
            continue; /* stale: one of them has merged since */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (l->next >= 0)
            e.sym[l->next].prev = p.left;
        offer(&e, l->prev, p.left);
        offer(&e, p.left, l->next);
    }

    for (int32_t i = 0; i >= 0; i = e.sym[i].next) {
        const symbol *s = &e.sym[i];
        int32_t id = s->raw ? -1 : lookup(t, norm + s->start, s->n);
        if (id >= 0) {
            emit(ids, cap, &n, id);
            continue;
        }
        /* Not a piece (only single characters are not): its bytes' byte tokens, or unk when a
         * byte has none (as SentencePiece does). */
        bool bytes = true;
        for (uint32_t k = 0; k < s->n && !t->all_bytes; k++)
            bytes = bytes && t->byte_id[(uint8_t)norm[s->start + k]] != NU_LLM_NO_TOKEN;
        if (!bytes) {
            emit(ids, cap, &n, t->unk);
            continue;
        }
        for (uint32_t k = 0; k < s->n; k++)
            emit(ids, cap, &n, t->byte_id[(uint8_t)norm[s->start + k]]);
    }
    nu_llm__free(norm);
    nu_llm__free(e.sym);
    nu_llm__free(e.heap);
done:
    *count = n;
    if (n > cap)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "nu_llm_tokenize: the text needs %zu ids, ids has room for %zu", n,
                            cap);
    return NU_OK;
}

/* ---- Decoding ------------------------------------------------------------------------------- */

static nu_status check_token(const nu_llm_tokenizer *t, const char *call, const char *what, int32_t id, bool none_ok)
{
    if ((id == NU_LLM_NO_TOKEN && none_ok) || (id >= 0 && (uint32_t)id < t->count))
        return NU_OK;
    return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: %s %d is outside the vocabulary of %u tokens", call, what,
                        (int)id, t->count);
}

nu_status nu_llm_token_to_text(const nu_llm_tokenizer *t, int32_t id, int32_t prev_id, char *buf, size_t cap,
                               size_t *len)
{
    if (len)
        *len = 0;
    if (!t || !len || (!buf && cap))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_token_to_text: %s is NULL",
                            !t ? "the tokenizer" : !len ? "len" : "buf");
    nu_status st = check_token(t, "nu_llm_token_to_text", "token", id, false);
    if (st == NU_OK)
        st = check_token(t, "nu_llm_token_to_text", "prev_id", prev_id, true);
    if (st != NU_OK)
        return st;
    size_t n = decode(t, id, first_piece(t, prev_id), NULL);
    *len = n;
    if (n > cap)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "nu_llm_token_to_text: token %d needs %zu bytes, buf has %zu",
                            (int)id, n, cap);
    decode(t, id, first_piece(t, prev_id), buf);
    return NU_OK;
}

nu_status nu_llm_detokenize(const nu_llm_tokenizer *t, const int32_t *ids, size_t n, char *buf, size_t cap,
                            size_t *len)
{
    if (len)
        *len = 0;
    if (!t || !len || (!ids && n) || (!buf && cap))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_detokenize: %s is NULL",
                            !t ? "the tokenizer" : !len ? "len" : !ids && n ? "ids" : "buf");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        nu_status st = check_token(t, "nu_llm_detokenize", "token", ids[i], false);
        if (st != NU_OK)
            return st;
        total += decode(t, ids[i], first_piece(t, i ? ids[i - 1] : NU_LLM_NO_TOKEN), NULL);
    }
    if (total >= cap) {
        *len = total;
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "nu_llm_detokenize: the text needs %zu bytes and a NUL, buf has %zu",
                            total, cap);
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        at += decode(t, ids[i], first_piece(t, i ? ids[i - 1] : NU_LLM_NO_TOKEN), buf + at);
    buf[at] = 0;
    *len = at;
    return NU_OK;
}
