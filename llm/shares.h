/* shares.h: a model's devices and the layers each runs. A model on one device has one share; one
 * split by layers over several (nu_llm_model_open_split) has a share on each: its layers' weights,
 * a KV cache of those layers, a runner over them (runner.h), the first share's runner from the
 * token ids, the last one's to the logits. A step runs the shares in order, each handing its
 * hidden state to the next (nu_llm__runner_hand_over). Every share's cache keeps the same slots,
 * lengths and tokens: each runner appends to its own; a step that fails on any device sets the
 * lengths back in every share; what the model changes itself it mirrors here. Thread safety: the
 * model's (one thread at a time). */
#ifndef NU_LLM_SHARES_H
#define NU_LLM_SHARES_H

#include <stdbool.h>
#include <stdint.h>

#include "kv_cache.h"
#include "nuvec_llm.h"
#include "runner.h"
#include "weights.h"

/* One device's share of the model: layers [first, end). */
typedef struct nu_llm_share {
    nu_device *dev;
    uint32_t first, end;
    nu_llm_weights w;
    nu_llm_kv kv;
    nu_llm_runner *run;
} nu_llm_share;

typedef struct nu_llm_shares {
    uint32_t count;
    nu_llm_share share[NU_LLM_MAX_DEVICES];
} nu_llm_shares;

/* Frees every share's runner, cache and weights (after waiting for their GPU work). */
void nu_llm__shares_free(nu_llm_shares *s);
/* Slot `slot`'s length in every share's cache. */
void nu_llm__shares_set_length(nu_llm_shares *s, uint32_t slot, uint32_t length);
/* The other shares' caches keep slot `slot` as the first share's does (its use, length, tokens and
 * release count): after the model acquired or released it there. */
void nu_llm__shares_mirror_slot(nu_llm_shares *s, uint32_t slot);

/* runner.h's prefill, decode, batched decode, batched greedy decode and greedy decode over the
 * shares in order (arguments checked by the caller; a split model's batched greedy decode goes step
 * by step); on failure the slots' lengths are as before, in every share. */
nu_status nu_llm__shares_prefill(nu_llm_shares *s, uint32_t slot, const int32_t *tokens, uint32_t n, float *logits);
nu_status nu_llm__shares_decode(nu_llm_shares *s, int32_t token, float *logits);
nu_status nu_llm__shares_batch(nu_llm_shares *s, const int32_t *tokens, const uint32_t *slots, uint32_t n,
                               float *logits, int32_t *ids);
nu_status nu_llm__shares_batch_greedy(nu_llm_shares *s, const int32_t *tokens, const uint32_t *slots, uint32_t n,
                                     uint32_t steps, int32_t *ids);
nu_status nu_llm__shares_greedy(nu_llm_shares *s, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                                int32_t stop_token, bool (*on_token)(void *user, int32_t id), void *user);

#endif
