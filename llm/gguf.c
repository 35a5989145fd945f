/* gguf.c: a GGUF file (llama.cpp's format, general.architecture "llama") as a weight source
 * (source.h), read with nuvec/gguf.h: the llama.* keys for the config, every tensor moved to the
 * device in one pass (nu_gguf_to_device), names blk.N.attn_q.weight and so on, q and k rows in
 * llama.cpp's interleaved RoPE order (NU_ROPE_INTERLEAVED), F32 / F16 / BF16 / Q8_0 / Q4_0
 * tensors; the tokenizer from tokenizer.ggml.* (llm/tokenizer/gguf_vocab.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "nuvec/gguf.h"
#include "source.h"
#include "tokenizer/readers.h"

#define FN "nu_llm_model_open"

typedef struct gguf_source {
    nu_llm_source base;
    nu_device *device;
    nu_gguf *file;
    nu_buffer *weights;
    uint64_t *offsets; /* of tensor i (file order) in weights */
} gguf_source;

static void gguf_name(nu_llm_weight w, uint32_t layer, char *out, size_t n)
{
    static const char *const per_layer[NU_LLM_W_COUNT] = {
        [NU_LLM_W_ATTN_NORM] = "attn_norm", [NU_LLM_W_Q] = "attn_q",      [NU_LLM_W_K] = "attn_k",
        [NU_LLM_W_V] = "attn_v",            [NU_LLM_W_O] = "attn_output", [NU_LLM_W_FFN_NORM] = "ffn_norm",
        [NU_LLM_W_GATE] = "ffn_gate",       [NU_LLM_W_UP] = "ffn_up",     [NU_LLM_W_DOWN] = "ffn_down"};
    if (w == NU_LLM_W_EMBED)
        snprintf(out, n, "token_embd.weight");
    else if (w == NU_LLM_W_OUT_NORM)
        snprintf(out, n, "output_norm.weight");
    else if (w == NU_LLM_W_OUTPUT)
        snprintf(out, n, "output.weight");
    else
        snprintf(out, n, "blk.%u.%s.weight", layer, per_layer[w]);
}

static nu_status gguf_weight(nu_llm_source *s, nu_llm_weight w, uint32_t layer, nu_tensor *out)
{
    gguf_source *g = (gguf_source *)s;
    char name[128];
    gguf_name(w, layer, name, sizeof name);
    uint64_t count = nu_gguf_tensor_count(g->file);
    for (uint64_t i = 0; i < count; i++)
        if (!strcmp(nu_gguf_tensor(g->file, i)->name, name)) {
            nu_status st = nu_gguf_tensor_view_in(g->file, name, g->weights, g->offsets[i], out);
            if (st != NU_OK)
                return nu_llm__fail(st, FN ": %s", nu_error_message(g->device));
            return NU_OK;
        }
    return nu_llm__fail(NU_ERROR_FORMAT, FN ": the model has no tensor %s", name);
}

static void gguf_close(nu_llm_source *s)
{
    gguf_source *g = (gguf_source *)s;
    if (!g)
        return;
    nu_buffer_free(g->weights);
    nu_gguf_close(g->file);
    nu_llm_tokenizer_free(g->base.tokenizer);
    nu_llm__free(g->offsets);
    nu_llm__free(g);
}

/* A nuvec call's failure with its message. */
static nu_status gg(nu_device *d, nu_status st)
{
    return st == NU_OK ? st : nu_llm__fail(st, FN ": %s", nu_error_message(d));
}

static bool string_is(const char *s, uint64_t n, const char *want) { return n == strlen(want) && !memcmp(s, want, n); }

static nu_status read_config(gguf_source *g)
{
    nu_gguf *f = g->file;
    nu_device *d = g->device;
    nu_llm_config *c = &g->base.config;
    const char *arch;
    uint64_t alen;
    nu_status st = gg(d, nu_gguf_get_string(f, "general.architecture", NULL, &arch, &alen));
    if (st != NU_OK)
        return st;
    if (!string_is(arch, alen, "llama"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": architecture %.*s is not supported (only llama)",
                            (int)(alen > 64 ? 64 : alen), arch);
    float theta = 10000.0f, eps_default = 1e-5f;
    const nu_gguf_tensor_info *embed = nu_gguf_find_tensor(f, "token_embd.weight");
    uint32_t vocab_default = embed && embed->rank == 2 ? (uint32_t)embed->shape[0] : 0;
    if ((st = gg(d, nu_gguf_get_u32(f, "llama.embedding_length", NULL, &c->dim))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "llama.feed_forward_length", NULL, &c->ffn))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "llama.block_count", NULL, &c->layers))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "llama.attention.head_count", NULL, &c->heads))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "llama.attention.head_count_kv", &c->heads, &c->kv_heads))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "llama.context_length", NULL, &c->max_positions))) != NU_OK ||
        (st = gg(d, nu_gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps_default, &c->rms_eps))) != NU_OK ||
        (st = gg(d, nu_gguf_get_f32(f, "llama.rope.freq_base", &theta, &c->rope_theta))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "llama.vocab_size", vocab_default ? &vocab_default : NULL, &c->vocab))) != NU_OK)
        return st;
    if (!c->dim || !c->ffn || !c->layers || !c->heads || !c->kv_heads || !c->max_positions || !c->vocab ||
        c->dim % c->heads)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": llama.* sizes of 0, or embedding_length %u not a multiple of %u heads",
                            c->dim, c->heads);
    c->head_dim = c->dim / c->heads;
    uint32_t rot = c->head_dim;
    if ((st = gg(d, nu_gguf_get_u32(f, "llama.rope.dimension_count", &rot, &rot))) != NU_OK)
        return st;
    if (rot != c->head_dim)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": llama.rope.dimension_count %u is not head_dim %u (partial "
                            "rotary dims)", rot, c->head_dim);
    if (nu_gguf_has(f, "llama.rope.scaling.type") || nu_gguf_has(f, "rope_freqs.weight"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": RoPE scaling is not supported");
    c->tied_embeddings = !nu_gguf_find_tensor(f, "output.weight");
    uint32_t none = UINT32_MAX, bos, eos;
    if ((st = gg(d, nu_gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &none, &bos))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &none, &eos))) != NU_OK)
        return st;
    c->bos = bos < c->vocab ? (int32_t)bos : NU_LLM_NO_TOKEN;
    c->eos = eos < c->vocab ? (int32_t)eos : NU_LLM_NO_TOKEN;
    return NU_OK;
}

/* Where tensor `name` goes in the device buffer: the global ones first, then each layer's in the
 * order of a forward pass, so that a layer's q, k, v and its gate, up lie back to back (the model
 * runs each group as one product in decode). */
static uint64_t device_rank(const char *name)
{
    static const char *const order[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                        "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    unsigned layer;
    int used = 0;
    if (sscanf(name, "blk.%u.%n", &layer, &used) != 1 || !used)
        return 0;
    for (unsigned i = 0; i < sizeof order / sizeof order[0]; i++) {
        size_t n = strlen(order[i]);
        if (!strncmp(name + used, order[i], n) && !strcmp(name + used + n, ".weight"))
            return 1 + (uint64_t)layer * 16 + i;
    }
    return 1 + (uint64_t)layer * 16 + 15; /* another tensor of the layer: after its own */
}

typedef struct ranked {
    uint64_t rank, index;
} ranked;

static int ranked_cmp(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    return x->rank != y->rank ? (x->rank < y->rank ? -1 : 1) : (x->index < y->index ? -1 : x->index > y->index);
}

/* Every tensor into one device buffer (nu_gguf_to_device) in device_rank's order; g->offsets[i]
 * is then file tensor i's offset there. */
static nu_status move_weights(gguf_source *g)
{
    uint64_t count = nu_gguf_tensor_count(g->file);
    ranked *r = nu_llm__malloc_array(count, sizeof *r);
    const char **names = nu_llm__malloc_array(count, sizeof *names);
    uint64_t *at = nu_llm__malloc_array(count, sizeof *at);
    nu_status st = NU_ERROR_HOST_OUT_OF_MEMORY;
    if (r && names && at) {
        for (uint64_t i = 0; i < count; i++)
            r[i] = (ranked){device_rank(nu_gguf_tensor(g->file, i)->name), i};
        qsort(r, (size_t)count, sizeof *r, ranked_cmp);
        for (uint64_t j = 0; j < count; j++)
            names[j] = nu_gguf_tensor(g->file, r[j].index)->name;
        st = nu_gguf_to_device(g->file, names, (size_t)count, NULL, &g->weights, at);
        for (uint64_t j = 0; st == NU_OK && j < count; j++)
            g->offsets[r[j].index] = at[j];
    }
    nu_llm__free(r);
    nu_llm__free(names);
    nu_llm__free(at);
    return st;
}

nu_status nu_llm__gguf_open(nu_device *device, const char *path, nu_llm_source **out)
{
    *out = NULL;
    gguf_source *g = nu_llm__calloc(1, sizeof *g);
    if (!g)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    g->device = device;
    g->base.weight = gguf_weight;
    g->base.close = gguf_close;
    g->base.rope_layout = NU_ROPE_INTERLEAVED;
    nu_status st = gg(device, nu_gguf_open(device, path, &g->file));
    if (st == NU_OK)
        st = read_config(g);
    if (st != NU_OK)
        goto fail;
    /* Optional, as in a Hugging Face folder: without it the model runs on ids. */
    if (nu_llm__tokenizer_from_gguf(g->file, &g->base.tokenizer) != NU_OK)
        snprintf(g->base.tokenizer_note, sizeof g->base.tokenizer_note, "%s", nu_llm_error_message());
    nu_llm__fail(NU_OK, "%s", "");
    uint64_t count = nu_gguf_tensor_count(g->file);
    if (!(g->offsets = nu_llm__calloc(count ? count : 1, sizeof *g->offsets))) {
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
        goto fail;
    }
    if (count && (st = move_weights(g)) != NU_OK) {
        st = nu_llm__fail(st, FN ": moving %s to the device: %s", path,
                          st == NU_ERROR_HOST_OUT_OF_MEMORY ? "no host memory" : nu_error_message(device));
        goto fail;
    }
    nu_buffer_set_name(g->weights, "llm gguf weights");
    *out = &g->base;
    return NU_OK;
fail:
    gguf_close(&g->base);
    return st;
}
