/* text.c: a generation's text, its stop strings and what may be released (text.h). */
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gen_text_init(gen_text *t, const nu_llm_tokenizer *tok, int32_t prev, char *const *stop, uint32_t n_stop)
{
    memset(t, 0, sizeof *t);
    t->tok = tok;
    t->prev = prev;
    t->stop = stop;
    t->n_stop = n_stop;
}

void gen_text_free(gen_text *t)
{
    free(t->raw);
    memset(t, 0, sizeof *t);
}

bool gen_text_push(gen_text *t, int32_t id, char *err, size_t cap)
{
    if (!t->tok || t->stopped)
        return true;
    size_t max = nu_llm_tokenizer_max_piece(t->tok), len = 0;
    if (t->n + max + 1 > t->cap) {
        size_t ncap = (t->n + max + 1) * 2;
        char *r = realloc(t->raw, ncap);
        if (!r) {
            snprintf(err, cap, "out of memory");
            return false;
        }
        t->raw = r, t->cap = ncap;
    }
    if (nu_llm_token_to_text(t->tok, id, t->prev, t->raw + t->n, max, &len) != NU_OK) {
        snprintf(err, cap, "token %d: %s", id, nu_llm_error_message());
        return false;
    }
    t->prev = id;
    t->n += len;
    t->raw[t->n] = 0;
    /* A stop string may start in what was scanned before: look back its length less one. */
    size_t best = t->n;
    for (uint32_t i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stop[i]), from = t->scanned >= sl - 1 ? t->scanned - (sl - 1) : 0;
        if (from < t->released)
            from = t->released;
        const char *hit = t->n > from ? memmem(t->raw + from, t->n - from, t->stop[i], sl) : NULL;
        if (hit && (size_t)(hit - t->raw) < best)
            best = (size_t)(hit - t->raw);
    }
    t->scanned = t->n;
    if (best < t->n) {
        t->n = t->scanned = best;
        t->raw[best] = 0;
        t->stopped = true;
    }
    return true;
}

size_t gen_text_ready(const gen_text *t, bool final)
{
    if (final || t->stopped || !t->raw)
        return t->n;
    size_t hold = 0; /* the longest end of raw that begins a stop string */
    for (uint32_t i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stop[i]);
        for (size_t k = sl - 1 < t->n ? sl - 1 : t->n; k > hold; k--)
            if (!memcmp(t->raw + t->n - k, t->stop[i], k)) {
                hold = k;
                break;
            }
    }
    size_t end = t->n - hold;
    end = nu_llm_utf8_complete(t->raw, end);
    return end > t->released ? end : t->released;
}

bool gen_text_is_eog(const nu_llm_tokenizer *tok, const nu_llm_config *cfg, int32_t id)
{
    return id == cfg->eos || (tok && id == nu_llm_tokenizer_eos(tok));
}
