/* decode.c: ids to text: one token (nu_llm_token_to_text), many (nu_llm_detokenize_ex), as a
 * stream that gives valid UTF-8 as it goes (nu_llm_detokenizer), and the UTF-8 helpers all of
 * them use (RFC 3629; invalid sequences replaced by U+FFFD one maximal subpart at a time, as
 * Unicode's "best practice" and the WHATWG decoder do). */
#include <string.h>

#include "tok.h"

static const char REPLACEMENT[3] = {'\xEF', '\xBF', '\xBD'}; /* U+FFFD */

/* ---- UTF-8 ------------------------------------------------------------------------------ */

/* The range of the byte after lead c (0 when c leads nothing), and the sequence's length. */
static size_t lead(uint8_t c, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80, *hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return 2;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0)
            *lo = 0xA0; /* no overlong forms */
        else if (c == 0xED)
            *hi = 0x9F; /* no surrogates */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0)
            *lo = 0x90;
        else if (c == 0xF4)
            *hi = 0x8F; /* at most U+10FFFF */
        return 4;
    }
    return 0;
}

/* How many bytes from s[0] are a prefix of a well-formed character (at least 1, at most its
 * length), and that length (0 for a byte that leads nothing). */
static size_t valid_prefix(const uint8_t *s, size_t n, size_t *need)
{
    uint8_t lo, hi;
    *need = lead(s[0], &lo, &hi);
    if (*need <= 1)
        return 1;
    size_t k = 1;
    while (k < *need && k < n && s[k] >= (k == 1 ? lo : 0x80) && s[k] <= (k == 1 ? hi : 0xBF))
        k++;
    return k;
}

size_t nu_llm__utf8_char(const uint8_t *s, size_t n)
{
    size_t need, k = valid_prefix(s, n, &need);
    return need && k == need ? k : 0;
}

size_t nu_llm__utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t nu_llm_utf8_complete(const char *str, size_t len)
{
    if (!str)
        return 0;
    const uint8_t *s = (const uint8_t *)str;
    /* A character that more bytes could complete starts at most 3 bytes before the end. */
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        size_t p = len - back, need;
        if ((s[p] & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back for its lead */
        size_t k = valid_prefix(s + p, back, &need);
        /* Held back only when all that is there can still become a valid character. */
        return need > back && k == back ? p : len;
    }
    return len;
}

bool nu_llm_utf8_valid(const char *str, size_t len)
{
    if (!str)
        return len == 0;
    for (size_t i = 0; i < len;) {
        size_t c = nu_llm__utf8_char((const uint8_t *)str + i, len - i);
        if (!c)
            return false;
        i += c;
    }
    return true;
}

/* s[0 .. len) sanitised into out (NULL: only the length); returns the length. */
static size_t sanitize(const char *str, size_t len, char *out)
{
    const uint8_t *s = (const uint8_t *)str;
    size_t w = 0;
    for (size_t i = 0; i < len;) {
        size_t need, k = valid_prefix(s + i, len - i, &need);
        if (need && k == need) {
            if (out)
                memcpy(out + w, s + i, k);
            w += k;
        } else {
            if (out)
                memcpy(out + w, REPLACEMENT, 3);
            w += 3;
        }
        i += k;
    }
    return w;
}

nu_status nu_llm_utf8_sanitize(const char *s, size_t len, char *out, size_t cap, size_t *out_len)
{
    if (out_len)
        *out_len = 0;
    if (!out_len || (!s && len) || (!out && cap))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_utf8_sanitize: %s is NULL",
                            !out_len ? "out_len" : !out && cap ? "out" : "s");
    size_t n = len ? sanitize(s, len, NULL) : 0;
    if (n >= cap) {
        *out_len = n;
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "nu_llm_utf8_sanitize: the text needs %zu bytes and a NUL, out has %zu",
                            n, cap);
    }
    if (len)
        sanitize(s, len, out);
    out[n] = 0;
    *out_len = n;
    return NU_OK;
}

/* ---- Tokens ------------------------------------------------------------------------------ */

static size_t decode_one(const nu_llm_tokenizer *t, int32_t id, int32_t prev, bool special, char *dst)
{
    return t->kind == NU_LLM__SPM ? nu_llm__spm_decode(t, id, nu_llm__spm_strips(t, prev), special, dst)
                                  : nu_llm__bpe_decode(t, id, special, dst);
}

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
    size_t n = decode_one(t, id, prev_id, false, NULL);
    *len = n;
    if (n > cap)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "nu_llm_token_to_text: token %d needs %zu bytes, buf has %zu",
                            (int)id, n, cap);
    decode_one(t, id, prev_id, false, buf);
    return NU_OK;
}

nu_status nu_llm_detokenize_ex(const nu_llm_tokenizer *t, const int32_t *ids, size_t n,
                               const nu_llm_decode_options *options, char *buf, size_t cap, size_t *len)
{
    static const nu_llm_decode_options defaults = {0};
    if (len)
        *len = 0;
    if (!t || !len || (!ids && n) || (!buf && cap))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_detokenize: %s is NULL",
                            !t ? "the tokenizer" : !len ? "len" : !ids && n ? "ids" : "buf");
    const nu_llm_decode_options *op = options ? options : &defaults;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        nu_status st = check_token(t, "nu_llm_detokenize", "token", ids[i], false);
        if (st != NU_OK)
            return st;
        total += decode_one(t, ids[i], i ? ids[i - 1] : NU_LLM_NO_TOKEN, op->special, NULL);
    }
    /* Raw bytes straight into buf; otherwise decoded first, then sanitised into it. */
    char *raw = buf;
    if (!op->raw_bytes && !(raw = nu_llm__malloc(total ? total : 1)))
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_detokenize: out of host memory for %zu bytes", total);
    size_t need = total;
    if (!op->raw_bytes || total < cap) {
        size_t at = 0;
        for (size_t i = 0; i < n; i++)
            at += decode_one(t, ids[i], i ? ids[i - 1] : NU_LLM_NO_TOKEN, op->special, raw + at);
        if (!op->raw_bytes)
            need = sanitize(raw, total, NULL);
    }
    if (need >= cap) {
        if (raw != buf)
            nu_llm__free(raw);
        *len = need;
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "nu_llm_detokenize: the text needs %zu bytes and a NUL, buf has %zu",
                            need, cap);
    }
    if (raw != buf) {
        sanitize(raw, total, buf);
        nu_llm__free(raw);
    }
    buf[need] = 0;
    *len = need;
    return NU_OK;
}

nu_status nu_llm_detokenize(const nu_llm_tokenizer *t, const int32_t *ids, size_t n, char *buf, size_t cap,
                            size_t *len)
{
    nu_llm_decode_options o = {false, true};
    return nu_llm_detokenize_ex(t, ids, n, &o, buf, cap, len);
}

/* ---- Streaming -------------------------------------------------------------------------- */

struct nu_llm_detokenizer {
    const nu_llm_tokenizer *t;
    bool special;
    int32_t prev;
    char held[4]; /* a character's first bytes, waiting for the rest */
    size_t n_held;
    char *raw; /* the held bytes and one token's */
    char *out; /* their sanitised text */
};

nu_status nu_llm_detokenizer_new(const nu_llm_tokenizer *t, const nu_llm_decode_options *options,
                                 nu_llm_detokenizer **out)
{
    if (out)
        *out = NULL;
    if (!t || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_detokenizer_new: %s is NULL", t ? "out" : "the tokenizer");
    nu_llm_detokenizer *d = nu_llm__calloc(1, sizeof *d);
    size_t room = t->max_raw + sizeof d->held; /* at most 3 bytes out for each byte in */
    if (d) {
        d->raw = nu_llm__malloc(room);
        d->out = nu_llm__malloc_array(room, 3);
    }
    if (!d || !d->raw || !d->out) {
        nu_llm_detokenizer_free(d);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_detokenizer_new: out of host memory");
    }
    d->t = t;
    d->special = options && options->special;
    d->prev = NU_LLM_NO_TOKEN;
    *out = d;
    return NU_OK;
}

void nu_llm_detokenizer_free(nu_llm_detokenizer *d)
{
    if (!d)
        return;
    nu_llm__free(d->raw);
    nu_llm__free(d->out);
    nu_llm__free(d);
}

nu_status nu_llm_detokenizer_push(nu_llm_detokenizer *d, int32_t id, const char **text, size_t *len)
{
    if (text)
        *text = "";
    if (len)
        *len = 0;
    if (!d || !text || !len)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_detokenizer_push: %s is NULL",
                            !d ? "the detokenizer" : !text ? "text" : "len");
    nu_status st = check_token(d->t, "nu_llm_detokenizer_push", "token", id, false);
    if (st != NU_OK)
        return st;
    memcpy(d->raw, d->held, d->n_held);
    size_t n = d->n_held + decode_one(d->t, id, d->prev, d->special, d->raw + d->n_held);
    d->prev = id;
    size_t ready = nu_llm_utf8_complete(d->raw, n);
    d->n_held = n - ready;
    memcpy(d->held, d->raw + ready, d->n_held);
    *text = d->out;
    *len = sanitize(d->raw, ready, d->out);
    return NU_OK;
}

nu_status nu_llm_detokenizer_flush(nu_llm_detokenizer *d, const char **text, size_t *len)
{
    if (text)
        *text = "";
    if (len)
        *len = 0;
    if (!d || !text || !len)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_detokenizer_flush: %s is NULL",
                            !d ? "the detokenizer" : !text ? "text" : "len");
    *text = d->out;
    *len = sanitize(d->held, d->n_held, d->out);
    d->n_held = 0;
    d->prev = NU_LLM_NO_TOKEN;
    return NU_OK;
}
