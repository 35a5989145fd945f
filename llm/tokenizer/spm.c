/* spm.c: the SentencePiece-style BPE tokenizer of Llama (scores, byte fallback): encoding one piece
 * of text, decoding one token (nuvec_llm/tokenizer.h says what it does and does not support).
 *
 * Encoding keeps the text's symbols (initially its UTF-8 characters) in a doubly linked list and
 * every adjacent pair whose concatenation is a mergeable piece in a heap (heap.h) ordered by the
 * piece's score, then the left symbol's position (leftmost wins a tie). Popping the best pair
 * merges it and offers the two new pairs it forms with its neighbours, so a text of n characters
 * costs O(n log n), not the O(n^2) of rescanning for the best pair after each merge. Entries made
 * stale by an earlier merge stay in the heap and are recognised when popped: a merge only ever
 * grows the left symbol and empties the right one, so a pair (a symbol and its right neighbour)
 * is current exactly when both are non-empty and their lengths still add up to the entry's. */
#include <string.h>

#include "heap.h"
#include "tok.h"

/* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space, in UTF-8. */
static const char SPACE_MARK[3] = {'\xE2', '\x96', '\x81'};
/* U+2047 DOUBLE QUESTION MARK: what an unknown token decodes to (SentencePiece's unk surface). */
static const char UNKNOWN_TEXT[3] = {'\xE2', '\x81', '\x87'};

nu_status nu_llm__spm_init(nu_llm_tokenizer *t)
{
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = NU_LLM_NO_TOKEN;
    for (uint32_t i = 0; i < t->count; i++)
        if (t->type[i] == NU_LLM_TOKEN_BYTE) {
            int b = nu_llm__byte_of_piece(nu_llm__piece(t, (int32_t)i), nu_llm__piece_len(t, (int32_t)i));
            if (t->byte_id[b] == NU_LLM_NO_TOKEN)
                t->byte_id[b] = (int32_t)i;
        }
    t->all_bytes = true;
    for (int b = 0; b < 256; b++) {
        if (t->byte_id[b] != NU_LLM_NO_TOKEN)
            continue;
        t->all_bytes = false;
        if (t->special[NU_LLM_SPECIAL_UNK] == NU_LLM_NO_TOKEN)
            return nu_llm__fail(NU_ERROR_FORMAT,
                                "tokenizer: the vocabulary has no byte token <0x%02X> and no unknown token to fall back to",
                                b);
    }
    for (uint32_t i = 0; i < t->count; i++) {
        size_t n = nu_llm__spm_decode(t, (int32_t)i, false, false, NULL);
        size_t raw = nu_llm__spm_decode(t, (int32_t)i, false, true, NULL);
        if (n > t->max_piece)
            t->max_piece = n;
        if (raw > t->max_raw)
            t->max_raw = raw;
    }
    return NU_OK;
}

/* ---- Decoding one token ----------------------------------------------------------------------- */

bool nu_llm__spm_strips(const nu_llm_tokenizer *t, int32_t prev)
{
    return t->add_space_prefix && (prev < 0 || prev == t->special[NU_LLM_SPECIAL_BOS]);
}

size_t nu_llm__spm_decode(const nu_llm_tokenizer *t, int32_t id, bool strip, bool special, char *dst)
{
    const char *s = nu_llm__piece(t, id);
    size_t n = nu_llm__piece_len(t, id), out = 0;
    uint8_t type = t->type[id];
    if (special && (type == NU_LLM_TOKEN_CONTROL || type == NU_LLM_TOKEN_UNKNOWN)) {
        if (dst && n)
            memcpy(dst, s, n);
        return n;
    }
    switch (type) {
    case NU_LLM_TOKEN_CONTROL:
        return 0;
    case NU_LLM_TOKEN_UNKNOWN:
        if (dst)
            memcpy(dst, UNKNOWN_TEXT, sizeof UNKNOWN_TEXT);
        return sizeof UNKNOWN_TEXT;
    case NU_LLM_TOKEN_BYTE:
        if (dst)
            dst[0] = (char)nu_llm__byte_of_piece(s, n); /* checked when the tokenizer was made */
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

/* ---- Encoding ------------------------------------------------------------------------------- */

typedef struct symbol {
    uint32_t start, n; /* its bytes in the normalised text; n = 0 once merged into its left */
    int32_t prev, next;
    bool raw; /* a byte that is no part of a valid UTF-8 character: never merged */
} symbol;

typedef struct encoder {
    const nu_llm_tokenizer *t;
    const char *text; /* normalised */
    symbol *sym;
    nu_llm__heap heap;
} encoder;

/* A heap key that puts the higher score first, then the leftmost (a float's bits made to sort as
 * unsigned numbers, reversed). */
static uint64_t key_of(float score, int32_t left)
{
    uint32_t u;
    if (score == 0)
        score = 0; /* -0 ties with 0, as the scores compare */
    memcpy(&u, &score, 4);
    uint32_t ascending = u & 0x80000000u ? ~u : u | 0x80000000u;
    return (uint64_t)~ascending << 32 | (uint32_t)left;
}

/* Offers the pair (l, next of l) if their concatenation is a mergeable piece. */
static void offer(encoder *e, int32_t l)
{
    if (l < 0)
        return;
    int32_t r = e->sym[l].next;
    if (r < 0 || e->sym[l].raw || e->sym[r].raw)
        return;
    uint32_t size = e->sym[l].n + e->sym[r].n;
    int32_t id = nu_llm__lookup(e->t, &e->t->merge_pieces, e->text + e->sym[l].start, size);
    if (id >= 0)
        nu_llm__heap_push(&e->heap, (nu_llm__entry){key_of(e->t->score[id], l), (int32_t)size, 0});
}

nu_status nu_llm__spm_encode(const nu_llm_tokenizer *t, const char *text, size_t len, bool prefix, nu_llm__work *w,
                             nu_llm__out *o)
{
    if (len == 0)
        return NU_OK;
    /* The normalised text: " " in front, every ' ' as U+2581 (3 * len + 3 bytes at most, which
     * the caller's limit on len keeps within 32-bit positions). */
    prefix = prefix && t->add_space_prefix;
    size_t spaces = prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    size_t norm_len = len + (prefix ? 1 : 0) + 2 * spaces;
    /* Each merge adds at most two pairs to the initial ones: fewer than 3 per symbol. */
    if (!nu_llm__grow((void **)&w->text, &w->text_cap, norm_len, 1) ||
        !nu_llm__grow(&w->sym, &w->sym_cap, norm_len, sizeof(symbol)) ||
        !nu_llm__grow(&w->heap, &w->heap_cap, 3 * norm_len, sizeof(nu_llm__entry)))
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenize: out of host memory for a text of %zu bytes",
                            len);
    char *norm = w->text;
    encoder e = {.t = t, .text = norm, .sym = w->sym, .heap = {w->heap, 0}};
    size_t at = 0;
    if (prefix) {
        memcpy(norm, SPACE_MARK, 3);
        at = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(norm + at, SPACE_MARK, 3);
            at += 3;
        } else {
            norm[at++] = text[i];
        }
    }

    int32_t nsym = 0;
    for (size_t i = 0; i < norm_len;) {
        size_t c = nu_llm__utf8_char((const uint8_t *)norm + i, norm_len - i);
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
        offer(&e, i);
    while (e.heap.n) {
        nu_llm__entry p = nu_llm__heap_pop(&e.heap);
        int32_t li = (int32_t)(uint32_t)p.key;
        symbol *l = &e.sym[li];
        /* Stale when one of them has merged since: a merge only grows the left symbol and empties
         * the right, so the lengths no longer add up. */
        if (l->n == 0 || l->next < 0 || l->n + e.sym[l->next].n != (uint32_t)p.a)
            continue;
        symbol *r = &e.sym[l->next];
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (l->next >= 0)
            e.sym[l->next].prev = li;
        offer(&e, l->prev);
        offer(&e, li);
    }

    for (int32_t i = 0; i >= 0; i = e.sym[i].next) {
        const symbol *s = &e.sym[i];
        int32_t id = s->raw ? -1 : nu_llm__lookup(t, &t->merge_pieces, norm + s->start, s->n);
        if (id >= 0) {
            nu_llm__emit(o, id);
            continue;
        }
        /* Not a piece (only single characters are not): its bytes' byte tokens, or unk when a
         * byte has none (as SentencePiece does). */
        bool bytes = true;
        for (uint32_t k = 0; k < s->n && !t->all_bytes; k++)
            bytes = bytes && t->byte_id[(uint8_t)norm[s->start + k]] != NU_LLM_NO_TOKEN;
        if (!bytes) {
            nu_llm__emit(o, t->special[NU_LLM_SPECIAL_UNK]);
            continue;
        }
        for (uint32_t k = 0; k < s->n; k++)
            nu_llm__emit(o, t->byte_id[(uint8_t)norm[s->start + k]]);
    }
    return NU_OK;
}
