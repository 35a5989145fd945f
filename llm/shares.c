/* shares.c: a model's devices in order (shares.h). */
#include "shares.h"

#include <string.h>

#include "common.h"

void nu_llm__shares_free(nu_llm_shares *s)
{
    for (uint32_t i = 0; i < s->count; i++) {
        nu_llm__runner_free(s->share[i].run);
        nu_llm__kv_free(&s->share[i].kv);
        nu_llm__weights_free(&s->share[i].w);
    }
}

/* Slot `slot`'s length in every share's cache. */
void nu_llm__shares_set_length(nu_llm_shares *s, uint32_t slot, uint32_t length)
{
    for (uint32_t i = 0; i < s->count; i++)
        s->share[i].kv.length[slot] = length;
}

/* The other shares' caches keep slot `slot` as the first share's does (its use, length, tokens and
 * release count). */
void nu_llm__shares_mirror_slot(nu_llm_shares *s, uint32_t slot)
{
    const nu_llm_kv *a = &s->share[0].kv;
    for (uint32_t i = 1; i < s->count; i++) {
        nu_llm_kv *b = &s->share[i].kv;
        b->used[slot] = a->used[slot], b->length[slot] = a->length[slot];
        b->released[slot] = a->released[slot], b->releases = a->releases;
        memcpy(b->tokens + (size_t)slot * b->positions, a->tokens + (size_t)slot * a->positions,
               (size_t)a->length[slot] * sizeof *a->tokens);
    }
}

/* Appends tokens[0 .. n) to slot `slot`: the runner's prefill on one device; on several, chunk i
 * of prefill_chunk rows runs on device k in tick i + k, so the devices work on different chunks at
 * once. In a tick the devices go last first: device k waits for device k - 1's pass of the chunk
 * (begun in the tick before) and for its own pass before (its input buffer is free then), takes
 * the hidden state and commits its pass; device k - 1 then commits its next chunk, whose output
 * overwrites what device k has taken. On failure the slot's length is as before, in every share. */
nu_status nu_llm__shares_prefill(nu_llm_shares *s, uint32_t slot, const int32_t *tokens, uint32_t n, float *logits)
{
    if (s->count == 1)
        return nu_llm__runner_prefill(s->share[0].run, slot, tokens, n, logits);
    uint32_t before = s->share[0].kv.length[slot], chunk = nu_llm__runner_chunk(s->share[0].run);
    uint32_t chunks = (n + chunk - 1) / chunk, size = n < chunk ? n : chunk, S = s->count;
    nu_status st = NU_OK;
    for (uint32_t t = 0; st == NU_OK && t < chunks + S - 1; t++)
        for (uint32_t k = S; st == NU_OK && k-- > 0;) {
            if (t < k || t - k >= chunks)
                continue;
            uint32_t i = t - k, rows = n - i * chunk < chunk ? n - i * chunk : chunk;
            nu_llm_runner *r = s->share[k].run;
            if (k > 0 && (st = nu_llm__runner_pass_end(s->share[k - 1].run, NULL)) == NU_OK &&
                (st = nu_llm__runner_pass_end(r, NULL)) == NU_OK)
                st = nu_llm__runner_hand_over(s->share[k - 1].run, r, NU_LLM_STAGE_PASS, rows);
            if (k == 0)
                st = nu_llm__runner_pass_end(r, NULL);
            if (st == NU_OK)
                st = nu_llm__runner_pass_begin(r, slot, tokens + (size_t)i * chunk, rows, size);
        }
    for (uint32_t k = 0; k < S; k++) { /* every pass in flight ends, on failure too */
        nu_status e = nu_llm__runner_pass_end(s->share[k].run, k + 1 == S ? logits : NULL);
        st = st != NU_OK ? st : e;
    }
    if (st != NU_OK)
        nu_llm__shares_set_length(s, slot, before);
    return st;
}

/* One token of slot 0 by the decode graphs, share by share. */
nu_status nu_llm__shares_decode(nu_llm_shares *s, int32_t token, float *logits)
{
    uint32_t before = s->share[0].kv.length[0];
    nu_status st = NU_OK;
    for (uint32_t i = 0; st == NU_OK && i < s->count; i++) {
        if (i > 0)
            st = nu_llm__runner_hand_over(s->share[i - 1].run, s->share[i].run, NU_LLM_STAGE_DECODE, 1);
        if (st == NU_OK)
            st = nu_llm__runner_decode(s->share[i].run, token, i + 1 == s->count ? logits : NULL);
    }
    if (st != NU_OK)
        nu_llm__shares_set_length(s, 0, before);
    return st;
}

/* A split model's `steps` batched decode steps of n slots, each share by share: step 0 feeds tokens,
 * step k > 0 step k - 1's ids (ids + k * n; the last step's logits into logits, may be NULL); on
 * failure the slots' lengths as before the first step. */
static nu_status split_steps(nu_llm_shares *s, const int32_t *tokens, const uint32_t *slots, uint32_t n,
                             uint32_t steps, float *logits, int32_t *ids, const char *fn)
{
    uint32_t *before = nu_llm__malloc_array(n, sizeof *before);
    if (!before)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "%s: no memory", fn);
    for (uint32_t r = 0; r < n; r++)
        before[r] = s->share[0].kv.length[slots[r]];
    nu_status st = NU_OK;
    for (uint32_t k = 0; st == NU_OK && k < steps; k++) {
        const int32_t *in = k ? ids + (size_t)(k - 1) * n : tokens;
        int32_t *out = ids ? ids + (size_t)k * n : NULL;
        for (uint32_t i = 0; st == NU_OK && i < s->count; i++) {
            bool last = i + 1 == s->count;
            if (i > 0)
                st = nu_llm__runner_hand_over(s->share[i - 1].run, s->share[i].run, NU_LLM_STAGE_BATCH, n);
            if (st == NU_OK)
                st = nu_llm__runner_batch_decode(s->share[i].run, in, slots, n, last && k + 1 == steps ? logits : NULL,
                                                 last ? out : NULL);
        }
    }
    for (uint32_t r = 0; st != NU_OK && r < n; r++)
        nu_llm__shares_set_length(s, slots[r], before[r]);
    nu_llm__free(before);
    return st;
}

/* One decode row each for n slots, share by share (runner.h's nu_llm__runner_batch_decode). */
nu_status nu_llm__shares_batch(nu_llm_shares *s, const int32_t *tokens, const uint32_t *slots, uint32_t n, float *logits,
                           int32_t *ids)
{
    if (s->count == 1)
        return nu_llm__runner_batch_decode(s->share[0].run, tokens, slots, n, logits, ids);
    return split_steps(s, tokens, slots, n, 1, logits, ids, "nu_llm_model_step");
}

/* Batched greedy decode (runner.h's nu_llm__runner_batch_greedy); a split model step by step, each
 * step's ids read back and fed to the next. */
nu_status nu_llm__shares_batch_greedy(nu_llm_shares *s, const int32_t *tokens, const uint32_t *slots, uint32_t n,
                                     uint32_t steps, int32_t *ids)
{
    if (s->count == 1)
        return nu_llm__runner_batch_greedy(s->share[0].run, tokens, slots, n, steps, ids);
    return split_steps(s, tokens, slots, n, steps, NULL, ids, "nu_llm_model_step_greedy");
}

/* Greedy decode of a split model: token by token, every device's decode graph in turn, the last
 * one's with the argmax of the logits, whose id comes back (runner.c's G_ARGMAX). */
nu_status nu_llm__shares_greedy(nu_llm_shares *s, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                            int32_t stop_token, bool (*on_token)(void *, int32_t), void *user)
{
    if (s->count == 1)
        return nu_llm__runner_greedy(s->share[0].run, token, n, out, produced, stop_token, on_token, user);
    nu_status st = NU_OK;
    for (uint32_t k = 0; k < n; k++) {
        int32_t in = k ? out[k - 1] : token;
        uint32_t before = s->share[0].kv.length[0];
        for (uint32_t i = 0; st == NU_OK && i + 1 < s->count; i++) {
            st = nu_llm__runner_decode(s->share[i].run, in, NULL);
            if (st == NU_OK)
                st = nu_llm__runner_hand_over(s->share[i].run, s->share[i + 1].run, NU_LLM_STAGE_DECODE, 1);
        }
        if (st == NU_OK)
            st = nu_llm__runner_decode_argmax(s->share[s->count - 1].run, in, &out[k]);
        if (st != NU_OK) {
            nu_llm__shares_set_length(s, 0, before);
            break;
        }
        *produced = k + 1;
        if ((on_token && !on_token(user, out[k])) || out[k] == stop_token)
            break;
    }
    return st;
}
