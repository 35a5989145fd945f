/* gguf.c: a GGUF file (llama.cpp's format, general.architecture "llama") as a weight source
 * (source.h), read with nuvec/gguf.h: the llama.* keys for the config, every tensor moved to the
 * device in one pass (nu_gguf_to_device), names blk.N.attn_q.weight and so on, q and k rows in
 * llama.cpp's interleaved RoPE order (NU_ROPE_INTERLEAVED), F32 / F16 / BF16 / Q8_0 / Q4_0
 * tensors; the tokenizer from tokenizer.ggml.* when its model is "llama" (SentencePiece). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "nuvec/gguf.h"
#include "source.h"

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

/* ---- what a llama file may say --------------------------------------------------------------
 * nuvec runs a file only when it knows everything in it that changes the model's arithmetic: each
 * llama.* key is one nuvec reads, one that leaves the arithmetic alone as nuvec runs it (checked
 * where a value matters), or refused by name; so is every tensor that is not part of the roster
 * (a bias, a norm, RoPE factors, experts). Keys of other prefixes (general.*, tokenizer.*,
 * quantize.*) say nothing about the arithmetic; split.count above 1 (a model split over files) is
 * refused. llama.cpp's defaults apply to the optional keys (src/llama-model.cpp, load_hparams). */

/* The llama.* keys read_config reads. */
static const char *const READ_KEYS[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "rope.freq_base", "vocab_size",
    "rope.dimension_count", "attention.key_length", "attention.value_length", "rope.scaling.type",
    "rope.scaling.factor", "rope.scale_linear", "rope.scaling.attn_factor", "expert_count", "expert_used_count",
    "attention.causal"};
/* Keys that change nothing as nuvec runs a file: the YaRN parameters and the original context only
 * matter to YaRN and LongRoPE scaling (refused by their type), `finetuned` is a note. */
static const char *const HARMLESS_KEYS[] = {
    "rope.scaling.original_context_length", "rope.scaling.finetuned", "rope.scaling.yarn_log_multiplier",
    "rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_beta_fast",
    "rope.scaling.yarn_beta_slow"};
/* Keys that change the arithmetic in ways nuvec does not implement, with what they do. */
static const struct {
    const char *key, *what;
} REFUSED_KEYS[] = {
    {"attention.sliding_window", "sliding-window attention"},
    {"attn_logit_softcapping", "attention logit softcapping"},
    {"final_logit_softcapping", "final logit softcapping"},
    {"attention.scale", "an attention scale other than 1/sqrt(head_dim)"},
    {"embedding_scale", "a scaled token embedding"},
    {"residual_scale", "scaled residual connections"},
    {"logit_scale", "scaled output logits"},
    {"attention.layer_norm_epsilon", "LayerNorm (llama has RMSNorm)"},
    {"attention.clamp_kqv", "clamped q, k and v"},
    {"attention.max_alibi_bias", "ALiBi attention biases"},
    {"pooling_type", "an embedding model's pooling"},
    {"rope.dimension_sections", "multi-section RoPE"},
    {"expert_shared_count", "shared experts"},
    {"expert_feed_forward_length", "mixture-of-experts layers"},
};

static bool in_list(const char *k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i]))
            return true;
    return false;
}

/* Every metadata key: llama.* keys known (read, harmless) or refused by name; split files refused. */
static nu_status check_keys(gguf_source *g)
{
    nu_gguf *f = g->file;
    uint64_t n = nu_gguf_kv_count(f);
    for (uint64_t i = 0; i < n; i++) {
        const char *key;
        nu_gguf_value v;
        nu_status st = gg(g->device, nu_gguf_kv(f, i, &key, &v));
        if (st != NU_OK)
            return st;
        if (!strcmp(key, "split.count")) {
            uint32_t count = 1;
            if ((st = gg(g->device, nu_gguf_get_u32(f, key, NULL, &count))) != NU_OK)
                return st;
            if (count > 1)
                return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": the model is split over %u files (split.count); "
                                    "nuvec opens single-file models (llama.cpp's gguf-split --merge joins them)", count);
            continue;
        }
        if (strncmp(key, "llama.", 6))
            continue;
        const char *k = key + 6;
        if (in_list(k, READ_KEYS, sizeof READ_KEYS / sizeof *READ_KEYS) ||
            in_list(k, HARMLESS_KEYS, sizeof HARMLESS_KEYS / sizeof *HARMLESS_KEYS))
            continue;
        for (size_t r = 0; r < sizeof REFUSED_KEYS / sizeof *REFUSED_KEYS; r++)
            if (!strcmp(k, REFUSED_KEYS[r].key))
                return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s (%s) is not supported", key, REFUSED_KEYS[r].what);
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s is not a key nuvec knows for llama; it may change the "
                            "model's arithmetic, so the file is refused", key);
    }
    return NU_OK;
}

/* The tensors a llama file of `layers` layers may hold: token_embd, output_norm, output (optional)
 * and each layer's nine; anything else is refused by name (the reason where it is a known kind). */
static const char *const LAYER_TENSORS[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                            "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};

static const char *tensor_kind(const char *name)
{
    static const struct {
        const char *part, *what;
    } kinds[] = {{"rope_freqs", "RoPE frequency factors (Llama 3.1-style RoPE scaling)"},
                 {"rope_factors", "LongRoPE frequency factors"},
                 {".bias", "a bias"},
                 {"_exps", "mixture-of-experts weights"},
                 {"ffn_gate_inp", "a mixture-of-experts router"},
                 {"attn_q_norm", "a per-head q norm"},
                 {"attn_k_norm", "a per-head k norm"},
                 {"post_norm", "a post-norm (sandwich norms)"},
                 {"attn_qkv", "a fused q/k/v matrix"}};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (strstr(name, kinds[i].part))
            return kinds[i].what;
    return NULL;
}

static nu_status check_tensors(gguf_source *g)
{
    uint32_t layers = g->base.config.layers;
    uint64_t n = nu_gguf_tensor_count(g->file);
    for (uint64_t i = 0; i < n; i++) {
        const char *name = nu_gguf_tensor(g->file, i)->name;
        unsigned layer;
        int used = 0;
        bool known = !strcmp(name, "token_embd.weight") || !strcmp(name, "output_norm.weight") ||
                     !strcmp(name, "output.weight");
        if (!known && sscanf(name, "blk.%u.%n", &layer, &used) == 1 && used && layer < layers)
            for (size_t t = 0; t < sizeof LAYER_TENSORS / sizeof *LAYER_TENSORS && !known; t++) {
                size_t len = strlen(LAYER_TENSORS[t]);
                known = !strncmp(name + used, LAYER_TENSORS[t], len) && !strcmp(name + used + len, ".weight");
            }
        if (known)
            continue;
        const char *kind = tensor_kind(name);
        if (kind)
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": tensor %s (%s) is not supported", name, kind);
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": tensor %s is not part of a llama model as nuvec runs it; it "
                            "may change the model's arithmetic, so the file is refused", name);
    }
    return NU_OK;
}

/* RoPE scaling as llama.cpp reads it: the type defaults to linear and the factor to 1 (0 means 1),
 * so that only a factor other than 1, a type other than none or linear, or an attention factor
 * other than 1 changes the arithmetic; nuvec runs none of those yet. */
static nu_status check_rope_scaling(gguf_source *g)
{
    nu_gguf *f = g->file;
    nu_device *d = g->device;
    const char *type;
    uint64_t tlen;
    float factor = 0, attn = 1, one = 1, zero = 0;
    nu_status st;
    if ((st = gg(d, nu_gguf_get_string(f, "llama.rope.scaling.type", "linear", &type, &tlen))) != NU_OK ||
        (st = gg(d, nu_gguf_get_f32(f, "llama.rope.scale_linear", &zero, &factor))) != NU_OK ||
        (st = gg(d, nu_gguf_get_f32(f, "llama.rope.scaling.factor", &factor, &factor))) != NU_OK ||
        (st = gg(d, nu_gguf_get_f32(f, "llama.rope.scaling.attn_factor", &one, &attn))) != NU_OK)
        return st;
    if (!string_is(type, tlen, "none") && !string_is(type, tlen, "linear"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": RoPE scaling of type %.*s (llama.rope.scaling.type) is not "
                            "supported", (int)(tlen > 64 ? 64 : tlen), type);
    if (string_is(type, tlen, "linear") && factor != 0 && factor != 1)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": linear RoPE scaling by %g (llama.rope.scaling.factor) is not "
                            "supported", (double)factor);
    if (attn != 1)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": a RoPE attention factor of %g (llama.rope.scaling.attn_factor) "
                            "is not supported", (double)attn);
    return NU_OK;
}

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
    if ((st = check_keys(g)) != NU_OK)
        return st;
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
    if (!c->dim || !c->ffn || !c->layers || !c->heads || !c->kv_heads || !c->max_positions || !c->vocab)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": llama.* sizes of 0 (embedding_length %u, feed_forward_length %u, "
                            "block_count %u, head_count %u, head_count_kv %u, context_length %u, vocab %u)", c->dim,
                            c->ffn, c->layers, c->heads, c->kv_heads, c->max_positions, c->vocab);
    /* head_dim: attention.key_length where present (Mistral Nemo and Small: 128 where dim / heads
     * is 160), else dim / heads; values the same length (llama.cpp's defaults for both). */
    bool has_key_length = nu_gguf_has(f, "llama.attention.key_length");
    if (!has_key_length && c->dim % c->heads)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": llama.embedding_length %u is not a multiple of %u heads and the "
                            "file has no llama.attention.key_length", c->dim, c->heads);
    uint32_t split = c->dim / c->heads, value_dim;
    if ((st = gg(d, nu_gguf_get_u32(f, "llama.attention.key_length", &split, &c->head_dim))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "llama.attention.value_length", &split, &value_dim))) != NU_OK)
        return st;
    if (!c->head_dim)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": llama.attention.key_length is 0");
    if (value_dim != c->head_dim)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": values of %u elements a head (llama.attention.value_length) "
                            "with keys of %u (key_length) are not supported", value_dim, c->head_dim);
    uint32_t rot;
    if ((st = gg(d, nu_gguf_get_u32(f, "llama.rope.dimension_count", &c->head_dim, &rot))) != NU_OK)
        return st;
    if (rot != c->head_dim)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": RoPE on %u of a head's %u dimensions (llama.rope.dimension_count) "
                            "is not supported (llama rotates whole heads)", rot, c->head_dim);
    uint32_t zero = 0, experts, experts_used;
    bool causal, yes = true;
    if ((st = gg(d, nu_gguf_get_u32(f, "llama.expert_count", &zero, &experts))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "llama.expert_used_count", &zero, &experts_used))) != NU_OK ||
        (st = gg(d, nu_gguf_get_bool(f, "llama.attention.causal", &yes, &causal))) != NU_OK)
        return st;
    if (experts || experts_used)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": mixture-of-experts layers (llama.expert_count %u) are not "
                            "supported", experts);
    if (!causal)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": non-causal attention (llama.attention.causal false) is not "
                            "supported");
    if ((st = check_rope_scaling(g)) != NU_OK || (st = check_tensors(g)) != NU_OK)
        return st;
    c->tied_embeddings = !nu_gguf_find_tensor(f, "output.weight");
    uint32_t none = UINT32_MAX, bos, eos;
    if ((st = gg(d, nu_gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &none, &bos))) != NU_OK ||
        (st = gg(d, nu_gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &none, &eos))) != NU_OK)
        return st;
    c->bos = bos < c->vocab ? (int32_t)bos : NU_LLM_NO_TOKEN;
    c->eos = eos < c->vocab ? (int32_t)eos : NU_LLM_NO_TOKEN;
    return NU_OK;
}

/* The SentencePiece tokenizer of tokenizer.ggml.* (model "llama"). */
static nu_status read_tokenizer(gguf_source *g)
{
    nu_gguf *f = g->file;
    nu_device *d = g->device;
    const char *model;
    uint64_t mlen;
    if (!nu_gguf_has(f, "tokenizer.ggml.model"))
        return nu_llm__fail(NU_ERROR_FORMAT, "the file has no tokenizer.ggml.model");
    nu_status st = gg(d, nu_gguf_get_string(f, "tokenizer.ggml.model", NULL, &model, &mlen));
    if (st != NU_OK)
        return st;
    if (!string_is(model, mlen, "llama"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "tokenizer.ggml.model %.*s is not supported (only llama)",
                            (int)(mlen > 64 ? 64 : mlen), model);
    nu_gguf_value tokens, scores, types;
    bool has_scores = nu_gguf_has(f, "tokenizer.ggml.scores"), has_types = nu_gguf_has(f, "tokenizer.ggml.token_type");
    if ((st = gg(d, nu_gguf_find(f, "tokenizer.ggml.tokens", &tokens))) != NU_OK ||
        (has_scores && (st = gg(d, nu_gguf_find(f, "tokenizer.ggml.scores", &scores))) != NU_OK) ||
        (has_types && (st = gg(d, nu_gguf_find(f, "tokenizer.ggml.token_type", &types))) != NU_OK))
        return st;
    uint64_t n = tokens.length;
    if (tokens.type != NU_GGUF_ARRAY || !n || n > INT32_MAX ||
        (has_scores && (scores.type != NU_GGUF_ARRAY || scores.element_type != NU_GGUF_FLOAT32 || scores.length != n)) ||
        (has_types && (types.type != NU_GGUF_ARRAY || types.element_type != NU_GGUF_INT32 || types.length != n)))
        return nu_llm__fail(NU_ERROR_FORMAT, "tokenizer.ggml.tokens, .scores and .token_type are not arrays of one "
                            "length (strings, FLOAT32, INT32)");
    nu_llm_piece *pieces = nu_llm__calloc(n, sizeof *pieces);
    float *sc = has_scores ? nu_llm__calloc(n, sizeof *sc) : NULL;
    int32_t *ty = has_types ? nu_llm__calloc(n, sizeof *ty) : NULL;
    if (!pieces || (has_scores && !sc) || (has_types && !ty)) {
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "no memory for the vocabulary");
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        if ((st = gg(d, nu_gguf_array_string(&tokens, i, &pieces[i].text, &len))) != NU_OK)
            goto done;
        pieces[i].length = (size_t)len;
    }
    if (has_scores)
        memcpy(sc, scores.data, n * sizeof *sc); /* packed little-endian, unaligned: copied */
    if (has_types)
        memcpy(ty, types.data, n * sizeof *ty);
    bool yes = true;
    uint32_t none = UINT32_MAX, unk;
    nu_llm_vocab v = {(uint32_t)n, pieces, sc, ty, NU_LLM_NO_TOKEN, NU_LLM_NO_TOKEN, NU_LLM_NO_TOKEN, true, true};
    if ((st = gg(d, nu_gguf_get_u32(f, "tokenizer.ggml.unknown_token_id", &none, &unk))) != NU_OK ||
        (st = gg(d, nu_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &yes, &v.add_bos))) != NU_OK ||
        (st = gg(d, nu_gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &yes, &v.add_space_prefix))) != NU_OK)
        goto done;
    v.bos = g->base.config.bos < (int32_t)n ? g->base.config.bos : NU_LLM_NO_TOKEN;
    v.eos = g->base.config.eos < (int32_t)n ? g->base.config.eos : NU_LLM_NO_TOKEN;
    v.unk = unk < n ? (int32_t)unk : NU_LLM_NO_TOKEN;
    v.add_bos = v.add_bos && v.bos >= 0;
    st = nu_llm_tokenizer_new(&v, &g->base.tokenizer);
done:
    nu_llm__free(pieces);
    nu_llm__free(sc);
    nu_llm__free(ty);
    return st;
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
    if (read_tokenizer(g) != NU_OK)
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
