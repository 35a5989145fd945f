/* kv_cache.h: the KV cache of sequence slots. Each layer has one K and one V buffer of
 * [slots, positions, kv_heads, head_dim] (the dtype the model was opened with): every layer, or on
 * one device of a model split by layers, the layers [first, end) that device runs (the others'
 * buffers are NULL; each device's cache keeps the same slots' lengths and tokens); slot s holds one
 * sequence's keys and values at rows 0 .. length(s) - 1. A slot is acquired for a sequence and
 * released when it ends; its length is what the runner has appended (the next position). The cache
 * is sized by positions and slots alone. Thread safety: the model's (one thread at a time). */
#ifndef NU_LLM_KV_CACHE_H
#define NU_LLM_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "nuvec.h"

typedef struct nu_llm_kv {
    nu_device *device;
    uint32_t layers, slots, positions, kv_heads, head_dim;
    uint32_t first, end;  /* the layers with buffers: [first, end) (all: 0, layers) */
    nu_dtype dtype;
    nu_buffer **k, **v;  /* per layer */
    uint32_t *length;    /* per slot */
    bool *used;          /* per slot */
    int32_t *tokens;     /* [slots, positions]: the ids whose keys and values a slot holds */
    uint64_t *released;  /* per slot: when it was last released (a count of releases) */
    uint64_t releases;
    uint64_t bytes;      /* device bytes of the cache */
} nu_llm_kv;

/* Allocates the cache of a model of `layers` layers (private buffers, a K and a V for each layer of
 * [first, end)). NU_ERROR_OUT_OF_MEMORY and the other nuvec errors of nu_buffer_new with
 * nu_llm_error_message set. */
nu_status nu_llm__kv_new(nu_device *d, uint32_t layers, uint32_t first, uint32_t end, uint32_t slots,
                         uint32_t positions, uint32_t kv_heads, uint32_t head_dim, nu_dtype dtype, nu_llm_kv *out);
void nu_llm__kv_free(nu_llm_kv *kv);
/* The bytes a cache of these sizes takes. */
uint64_t nu_llm__kv_bytes(uint32_t layers, uint32_t slots, uint32_t positions, uint32_t kv_heads, uint32_t head_dim,
                          nu_dtype dtype);

/* Layer `layer`'s K (or V) cache: all slots, [slots, positions, kv_heads, head_dim]. */
nu_tensor nu_llm__kv_k(const nu_llm_kv *kv, uint32_t layer);
nu_tensor nu_llm__kv_v(const nu_llm_kv *kv, uint32_t layer);
/* One slot's rows: [positions, kv_heads, head_dim]. */
nu_tensor nu_llm__kv_slot(const nu_llm_kv *kv, bool values, uint32_t layer, uint32_t slot);

/* A free slot (its length 0), or NU_ERROR_BUSY when every slot is in use. */
nu_status nu_llm__kv_acquire(nu_llm_kv *kv, uint32_t *slot);
/* The free slot whose cached tokens share the longest prefix with tokens[0 .. n), truncated to
 * that prefix: *reused of the tokens need no prefill. Ties go to the slot that caches least (an
 * empty one), then to the one released longest ago, so that recent prefixes stay for reuse. NU_ERROR_BUSY when every
 * slot is in use. */
nu_status nu_llm__kv_acquire_prefix(nu_llm_kv *kv, const int32_t *tokens, uint32_t n, uint32_t *slot,
                                    uint32_t *reused);
/* Frees a slot; its rows and tokens are kept until overwritten, for nu_llm__kv_acquire_prefix. */
void nu_llm__kv_release(nu_llm_kv *kv, uint32_t slot);

#endif
