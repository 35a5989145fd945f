/* kv_cache.c: the KV cache of sequence slots (kv_cache.h). */
#include "kv_cache.h"

#include <string.h>

#include "common.h"

uint64_t nu_llm__kv_bytes(uint32_t layers, uint32_t slots, uint32_t positions, uint32_t kv_heads, uint32_t head_dim,
                          nu_dtype dtype)
{
    return 2ull * layers * slots * positions * kv_heads * head_dim * nu_dtype_size(dtype);
}

nu_status nu_llm__kv_new(nu_device *d, uint32_t layers, uint32_t first, uint32_t end, uint32_t slots,
                         uint32_t positions, uint32_t kv_heads, uint32_t head_dim, nu_dtype dtype, nu_llm_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    kv->device = d;
    kv->layers = layers, kv->first = first, kv->end = end, kv->slots = slots, kv->positions = positions;
    kv->kv_heads = kv_heads, kv->head_dim = head_dim, kv->dtype = dtype;
    kv->k = nu_llm__calloc(layers, sizeof *kv->k);
    kv->v = nu_llm__calloc(layers, sizeof *kv->v);
    kv->length = nu_llm__calloc(slots, sizeof *kv->length);
    kv->used = nu_llm__calloc(slots, sizeof *kv->used);
    kv->tokens = nu_llm__calloc((size_t)slots * positions, sizeof *kv->tokens);
    kv->released = nu_llm__calloc(slots, sizeof *kv->released);
    if (!kv->k || !kv->v || !kv->length || !kv->used || !kv->tokens || !kv->released) {
        nu_llm__kv_free(kv);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_model_open: no memory for the KV cache");
    }
    size_t bytes = (size_t)slots * positions * kv_heads * head_dim * nu_dtype_size(dtype);
    for (uint32_t l = first; l < end; l++) {
        nu_status st = nu_buffer_new(d, bytes, NU_STORAGE_PRIVATE, &kv->k[l]);
        if (st == NU_OK)
            st = nu_buffer_new(d, bytes, NU_STORAGE_PRIVATE, &kv->v[l]);
        if (st != NU_OK) {
            st = nu_llm__fail(st, "nu_llm_model_open: the KV cache (%u layers of 2 x %zu bytes): %s", end - first, bytes,
                              nu_error_message(d));
            nu_llm__kv_free(kv);
            return st;
        }
        nu_buffer_set_name(kv->k[l], "llm K cache");
        nu_buffer_set_name(kv->v[l], "llm V cache");
        kv->bytes += nu_buffer_accounted_bytes(kv->k[l]) + nu_buffer_accounted_bytes(kv->v[l]);
    }
    return NU_OK;
}

void nu_llm__kv_free(nu_llm_kv *kv)
{
    for (uint32_t l = 0; kv->k && l < kv->layers; l++) {
        nu_buffer_free(kv->k[l]);
        nu_buffer_free(kv->v[l]);
    }
    nu_llm__free(kv->k);
    nu_llm__free(kv->v);
    nu_llm__free(kv->length);
    nu_llm__free(kv->used);
    nu_llm__free(kv->tokens);
    nu_llm__free(kv->released);
    memset(kv, 0, sizeof *kv);
}

static nu_tensor all_slots(const nu_llm_kv *kv, nu_buffer *b)
{
    int64_t shape[4] = {kv->slots, kv->positions, kv->kv_heads, kv->head_dim};
    return nu_tensor_make(b, 0, kv->dtype, 4, shape);
}

nu_tensor nu_llm__kv_k(const nu_llm_kv *kv, uint32_t layer) { return all_slots(kv, kv->k[layer]); }
nu_tensor nu_llm__kv_v(const nu_llm_kv *kv, uint32_t layer) { return all_slots(kv, kv->v[layer]); }

nu_tensor nu_llm__kv_slot(const nu_llm_kv *kv, bool values, uint32_t layer, uint32_t slot)
{
    int64_t shape[3] = {kv->positions, kv->kv_heads, kv->head_dim};
    uint64_t row = (uint64_t)kv->positions * kv->kv_heads * kv->head_dim * nu_dtype_size(kv->dtype);
    return nu_tensor_make(values ? kv->v[layer] : kv->k[layer], slot * row, kv->dtype, 3, shape);
}

nu_status nu_llm__kv_acquire(nu_llm_kv *kv, uint32_t *slot)
{
    for (uint32_t s = 0; s < kv->slots; s++)
        if (!kv->used[s]) {
            kv->used[s] = true;
            kv->length[s] = 0;
            *slot = s;
            return NU_OK;
        }
    return nu_llm__fail(NU_ERROR_BUSY, "every one of the model's %u sequence slots is in use", kv->slots);
}

nu_status nu_llm__kv_acquire_prefix(nu_llm_kv *kv, const int32_t *tokens, uint32_t n, uint32_t *slot,
                                    uint32_t *reused)
{
    uint32_t best = UINT32_MAX, best_len = 0;
    for (uint32_t s = 0; s < kv->slots; s++) {
        if (kv->used[s])
            continue;
        const int32_t *have = kv->tokens + (size_t)s * kv->positions;
        uint32_t len = 0, limit = kv->length[s] < n ? kv->length[s] : n;
        while (len < limit && have[len] == tokens[len])
            len++;
        bool better = best == UINT32_MAX || len > best_len ||
                      (len == best_len && (kv->length[s] == 0) > (kv->length[best] == 0)) ||
                      (len == best_len && (kv->length[s] == 0) == (kv->length[best] == 0) &&
                       kv->released[s] < kv->released[best]);
        if (better)
            best = s, best_len = len;
    }
    if (best == UINT32_MAX)
        return nu_llm__fail(NU_ERROR_BUSY, "every one of the model's %u sequence slots is in use", kv->slots);
    kv->used[best] = true;
    kv->length[best] = best_len;
    *slot = best;
    *reused = best_len;
    return NU_OK;
}

void nu_llm__kv_release(nu_llm_kv *kv, uint32_t slot)
{
    if (slot < kv->slots) {
        kv->used[slot] = false;
        kv->released[slot] = ++kv->releases;
    }
}
