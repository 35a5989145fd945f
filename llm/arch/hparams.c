/* hparams.c: the hyperparameters every architecture reads alike (hparams.h). Optional keys take
 * llama.cpp's defaults (src/llama-model.cpp, load_hparams) in GGUF files and transformers' in
 * config.json. */
#include "hparams.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"

#define FN "nu_llm_model_open"
#define K NU_LLM_KEY
#define TRY NU_LLM_TRY

/* The keys as macros: a static array's initializers must be constant expressions. */
#define CONTEXT K("context_length", "max_position_embeddings")
#define DIM K("embedding_length", "hidden_size")
#define LAYERS K("block_count", "num_hidden_layers")
#define FFN K("feed_forward_length", "intermediate_size")
#define HEADS K("attention.head_count", "num_attention_heads")
#define KV_HEADS K("attention.head_count_kv", "num_key_value_heads")
#define EPS K("attention.layer_norm_rms_epsilon", "rms_norm_eps")
#define THETA K("rope.freq_base", "rope_theta")
#define VOCAB K("vocab_size", "vocab_size")
#define ROT K("rope.dimension_count", NULL)
#define KEY_LEN K("attention.key_length", "head_dim")
#define VALUE_LEN K("attention.value_length", NULL)
#define SCALING K("rope.scaling.type", NULL)
#define FACTOR K("rope.scaling.factor", NULL)
#define SCALE_LINEAR K("rope.scale_linear", NULL)
#define ATTN_FACTOR K("rope.scaling.attn_factor", NULL)
#define EXPERTS K("expert_count", NULL)
#define EXPERTS_USED K("expert_used_count", NULL)
#define CAUSAL K("attention.causal", NULL)
#define TIED K(NULL, "tie_word_embeddings")
#define ROPE_SCALING_HF K(NULL, "rope_scaling")
#define PARTIAL K(NULL, "partial_rotary_factor")

/* Keys read here, and keys that change nothing as nuvec runs a file: the YaRN parameters and the
 * original context matter only to YaRN and LongRoPE scaling (refused by their type, or read by
 * the architecture that runs them). */
static const nu_llm_key BASE_KNOWN[] = {
    CONTEXT, DIM, LAYERS, FFN, HEADS, KV_HEADS, EPS, THETA, VOCAB, ROT, KEY_LEN, VALUE_LEN, SCALING, FACTOR,
    SCALE_LINEAR, ATTN_FACTOR, EXPERTS, EXPERTS_USED, CAUSAL, TIED, ROPE_SCALING_HF, PARTIAL,
    K("rope.scaling.original_context_length", NULL), K("rope.scaling.finetuned", NULL),
    K("rope.scaling.yarn_log_multiplier", NULL), K("rope.scaling.yarn_ext_factor", NULL),
    K("rope.scaling.yarn_attn_factor", NULL), K("rope.scaling.yarn_beta_fast", NULL),
    K("rope.scaling.yarn_beta_slow", NULL)};

/* Keys that change the arithmetic in ways no architecture here implements unless it reads them. */
static const nu_llm_refused_key BASE_REFUSED[] = {
    {K("attention.sliding_window", NULL), "sliding-window attention"},
    {K("attention.sliding_window_pattern", NULL), "sliding-window attention"},
    {K("attn_logit_softcapping", "attn_logit_softcapping"), "attention logit softcapping"},
    {K("final_logit_softcapping", "final_logit_softcapping"), "final logit softcapping"},
    {K("attention.scale", NULL), "an attention scale other than 1/sqrt(head_dim)"},
    {K("embedding_scale", NULL), "a scaled token embedding"},
    {K("residual_scale", NULL), "scaled residual connections"},
    {K("logit_scale", NULL), "scaled output logits"},
    {K("attention.layer_norm_epsilon", NULL), "LayerNorm (this architecture has RMSNorm)"},
    {K("attention.clamp_kqv", NULL), "clamped q, k and v"},
    {K("attention.max_alibi_bias", NULL), "ALiBi attention biases"},
    {K("pooling_type", NULL), "an embedding model's pooling"},
    {K("rope.dimension_sections", NULL), "multi-section RoPE"},
    {K("rope.freq_base_swa", NULL), "a RoPE base of its own for sliding-window layers"},
    {K("expert_shared_count", NULL), "shared experts"},
    {K("expert_feed_forward_length", NULL), "mixture-of-experts layers"},
    {K(NULL, "quantization_config"), "weights quantized by another tool"},
    {K(NULL, "auto_map"), "custom modeling code"},
    {K(NULL, "num_local_experts"), "mixture-of-experts layers"},
    {K(NULL, "num_experts"), "mixture-of-experts layers"},
    {K(NULL, "vision_config"), "a vision tower"},
    {K(NULL, "text_config"), "a multimodal model (a vision or audio tower beside the text model)"},
    {K(NULL, "rope_parameters"), "RoPE parameters in transformers 5's form (rope_theta and rope_scaling are read)"},
};

#define BASE_KNOWN_COUNT (sizeof BASE_KNOWN / sizeof *BASE_KNOWN)
#define BASE_REFUSED_COUNT (sizeof BASE_REFUSED / sizeof *BASE_REFUSED)
#define MAX_KEYS 128

nu_status nu_llm__arch_meta_check(const nu_llm_source *s, const nu_llm_key *known, size_t known_count,
                                  const nu_llm_refused_key *refused, size_t refused_count)
{
    nu_llm_key k[MAX_KEYS];
    nu_llm_refused_key r[MAX_KEYS];
    if (known_count + BASE_KNOWN_COUNT > MAX_KEYS || refused_count + BASE_REFUSED_COUNT > MAX_KEYS)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN ": an architecture lists too many keys");
    if (known_count) /* known and refused may be NULL where their counts are 0 (memcpy may not take it) */
        memcpy(k, known, known_count * sizeof *k);
    memcpy(k + known_count, BASE_KNOWN, sizeof BASE_KNOWN);
    if (refused_count)
        memcpy(r, refused, refused_count * sizeof *r);
    memcpy(r + refused_count, BASE_REFUSED, sizeof BASE_REFUSED);
    return nu_llm__meta_check(s, k, known_count + BASE_KNOWN_COUNT, r, refused_count + BASE_REFUSED_COUNT);
}

/* "<arch>.<suffix>" in GGUF files, config.json's name otherwise, for messages. */
static const char *key_name(const nu_llm_source *s, nu_llm_key key, char *buf, size_t cap)
{
    if (nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF)
        snprintf(buf, cap, "%s.%s", nu_llm__source_arch(s), key.gguf);
    else
        snprintf(buf, cap, "%s", key.hf ? key.hf : "?");
    return buf;
}

nu_status nu_llm__read_base(const nu_llm_source *s, float hf_eps, nu_llm_hparams *hp)
{
    nu_llm_config *c = &hp->cfg;
    bool gguf = nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF;
    char name[160];
    /* The vocabulary's size: <arch>.vocab_size, else the embedding's rows (llama.cpp: the
     * tokenizer's; the embedding is what nuvec reads). */
    const nu_llm_file_tensor *embed = nu_llm__source_find(s, gguf ? "token_embd.weight" : "model.embed_tokens.weight");
    uint32_t vocab_default = embed && embed->rank == 2 ? (uint32_t)embed->shape[0] : 0;
    float theta = 10000.0f, eps = gguf ? 1e-5f : hf_eps;
    TRY(nu_llm__meta_u32(s, DIM, NULL, &c->dim));
    TRY(nu_llm__meta_u32(s, FFN, NULL, &c->ffn));
    TRY(nu_llm__meta_u32(s, LAYERS, NULL, &c->layers));
    TRY(nu_llm__meta_u32(s, HEADS, NULL, &c->heads));
    TRY(nu_llm__meta_u32(s, KV_HEADS, &c->heads, &c->kv_heads));
    TRY(nu_llm__meta_u32(s, CONTEXT, NULL, &c->max_positions));
    TRY(nu_llm__meta_f32(s, EPS, &eps, &c->rms_eps));
    TRY(nu_llm__meta_f32(s, THETA, &theta, &c->rope_theta));
    TRY(nu_llm__meta_u32(s, VOCAB, gguf && vocab_default ? &vocab_default : NULL, &c->vocab));
    if (!c->dim || !c->ffn || !c->layers || !c->heads || !c->kv_heads || !c->max_positions || !c->vocab)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": sizes of 0 (dim %u, ffn %u, layers %u, heads %u, kv heads %u, "
                            "context %u, vocab %u)", c->dim, c->ffn, c->layers, c->heads, c->kv_heads,
                            c->max_positions, c->vocab);
    if (!(c->rms_eps > 0) || !(c->rope_theta > 0))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": the RMSNorm epsilon %g and RoPE base %g must be positive",
                            (double)c->rms_eps, (double)c->rope_theta);
    /* head_dim: attention.key_length (head_dim in config.json) where present (Mistral Nemo and
     * Small, Qwen3, Gemma), else dim / heads; values the same length. */
    if (!nu_llm__meta_has(s, KEY_LEN) && c->dim % c->heads)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": the model width %u is not a multiple of its %u heads and it gives no "
                            "head size (%s)", c->dim, c->heads, key_name(s, KEY_LEN, name, sizeof name));
    uint32_t split = c->dim / c->heads, value_dim, rot;
    TRY(nu_llm__meta_u32(s, KEY_LEN, &split, &c->head_dim));
    TRY(nu_llm__meta_u32(s, VALUE_LEN, &c->head_dim, &value_dim));
    if (!c->head_dim)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": a head size of 0");
    if (gguf && value_dim != c->head_dim)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": values of %u elements a head (%s) with keys of %u are not "
                            "supported", value_dim, key_name(s, VALUE_LEN, name, sizeof name), c->head_dim);
    TRY(nu_llm__meta_u32(s, ROT, &c->head_dim, &rot));
    if (rot != c->head_dim)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": RoPE on %u of a head's %u dimensions (%s) is not supported "
                            "(nuvec rotates whole heads)", rot, c->head_dim, key_name(s, ROT, name, sizeof name));
    float one = 1, partial;
    TRY(nu_llm__meta_f32(s, PARTIAL, &one, &partial));
    if (partial != 1)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": partial_rotary_factor %g (RoPE on part of each head) is not "
                            "supported", (double)partial);
    uint32_t zero = 0, experts, experts_used;
    bool causal, yes = true;
    TRY(nu_llm__meta_u32(s, EXPERTS, &zero, &experts));
    TRY(nu_llm__meta_u32(s, EXPERTS_USED, &zero, &experts_used));
    TRY(nu_llm__meta_bool(s, CAUSAL, &yes, &causal));
    if (experts || experts_used)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": mixture-of-experts layers (%s %u) are not supported",
                            key_name(s, EXPERTS, name, sizeof name), experts);
    if (!causal)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": non-causal attention (%s false) is not supported",
                            key_name(s, CAUSAL, name, sizeof name));
    /* GGUF: no output.weight means tied (llama.cpp); config.json: tie_word_embeddings. */
    bool no = false;
    if (gguf)
        c->tied_embeddings = !nu_llm__source_find(s, "output.weight");
    else
        TRY(nu_llm__meta_bool(s, TIED, &no, &c->tied_embeddings));
    return NU_OK;
}

nu_status nu_llm__hf_positive(const void *obj, const char *obj_name, const char *key, double *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive((const cJSON *)obj, key);
    *out = 0;
    if (!cJSON_IsNumber(x) || !(x->valuedouble > 0) || !isfinite(x->valuedouble))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s's %s is not a positive number", obj_name, key);
    *out = x->valuedouble;
    return NU_OK;
}

/* Llama 3.1's frequency divisors from config.json's rope_scaling (rope_type "llama3": factor,
 * low_freq_factor, high_freq_factor, original_max_position_embeddings), as transformers and
 * llama.cpp's converter compute them: pairs whose wavelength is under the original context over
 * high_freq_factor keep their frequency, those over it over low_freq_factor are divided by
 * factor, and those between are blended. */
static nu_status llama3_factors(const cJSON *scaling, nu_llm_hparams *hp)
{
    const char *names[4] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
    double v[4];
    for (int i = 0; i < 4; i++)
        TRY(nu_llm__hf_positive(scaling, "rope_scaling", names[i], &v[i]));
    if (!(v[2] > v[1]))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": rope_scaling's high_freq_factor %g is not above low_freq_factor %g",
                            v[2], v[1]);
    uint32_t half = hp->cfg.head_dim / 2;
    if (half > 128)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": rope_scaling llama3 with head_dim %u (at most 256)",
                            hp->cfg.head_dim);
    double low_wavelen = v[3] / v[1], high_wavelen = v[3] / v[2];
    for (uint32_t i = 0; i < half; i++) {
        double freq = pow(hp->cfg.rope_theta, -2.0 * i / hp->cfg.head_dim), wavelen = 2 * M_PI / freq, f;
        if (wavelen < high_wavelen)
            f = 1;
        else if (wavelen > low_wavelen)
            f = v[0];
        else {
            double smooth = (v[3] / wavelen - v[1]) / (v[2] - v[1]);
            f = 1 / ((1 - smooth) / v[0] + smooth);
        }
        hp->rope_factors[i] = (float)f;
    }
    hp->rope_factors_made = true;
    return NU_OK;
}

const void *nu_llm__hf_rope_scaling(const nu_llm_source *s, const char **type)
{
    const cJSON *scaling = nu_llm__meta_hf_object(s, "rope_scaling");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(scaling, "rope_type");
    if (!t)
        t = cJSON_GetObjectItemCaseSensitive(scaling, "type");
    *type = cJSON_IsString(t) ? t->valuestring : "(none given)";
    return scaling;
}

nu_status nu_llm__gguf_rope_scaling(const nu_llm_source *s, const char *also, bool *is_also, float *attn_factor,
                                    nu_llm_hparams *hp)
{
    char type[64], name[160];
    float zero = 0, one = 1, factor;
    hp->rope_linear = 1;
    TRY(nu_llm__meta_string(s, SCALING, "linear", type, sizeof type));
    TRY(nu_llm__meta_f32(s, SCALE_LINEAR, &zero, &factor));
    TRY(nu_llm__meta_f32(s, FACTOR, &factor, &factor)); /* the newer key wins */
    TRY(nu_llm__meta_f32(s, ATTN_FACTOR, &one, attn_factor));
    *is_also = also && !strcmp(type, also);
    if (strcmp(type, "none") && strcmp(type, "linear") && !*is_also)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": RoPE scaling of type %s (%s) is not supported (none%s%s and "
                            "linear are%s)", type, key_name(s, SCALING, name, sizeof name), also ? ", " : "",
                            also ? also : "", also ? "" : "; Llama 3.1's is rope_freqs.weight");
    if (!(*attn_factor > 0) || !isfinite(*attn_factor))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": a RoPE attention factor of %g (%s)", (double)*attn_factor,
                            key_name(s, ATTN_FACTOR, name, sizeof name));
    if (!strcmp(type, "linear") && factor != 0) {
        if (!(factor >= 1))
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": linear RoPE scaling by %g (%s); at least 1 expected",
                                (double)factor, key_name(s, FACTOR, name, sizeof name));
        hp->rope_linear = factor;
    }
    return NU_OK;
}

nu_status nu_llm__read_rope_scaling(const nu_llm_source *s, nu_llm_hparams *hp)
{
    hp->rope_linear = 1;
    if (nu_llm__source_kind(s) == NU_LLM_SOURCE_HF) {
        const char *t;
        const cJSON *scaling = nu_llm__hf_rope_scaling(s, &t);
        if (!scaling || !strcmp(t, "default"))
            return NU_OK;
        if (!strcmp(t, "llama3"))
            return llama3_factors(scaling, hp);
        if (strcmp(t, "linear"))
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": rope_scaling of type %s is not supported (default, linear "
                                "and llama3 are)", t);
        const cJSON *factor = cJSON_GetObjectItemCaseSensitive(scaling, "factor");
        if (!cJSON_IsNumber(factor) || !(factor->valuedouble >= 1) || !isfinite(factor->valuedouble))
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": rope_scaling's factor is not a number of at least 1");
        hp->rope_linear = (float)factor->valuedouble;
        return NU_OK;
    }
    char name[160];
    bool longrope;
    float attn;
    TRY(nu_llm__gguf_rope_scaling(s, NULL, &longrope, &attn, hp));
    if (attn != 1)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": a RoPE attention factor of %g (%s) is not supported",
                            (double)attn, key_name(s, ATTN_FACTOR, name, sizeof name));
    return NU_OK;
}

nu_status nu_llm__hf_string_in(const nu_llm_source *s, const char *key, const char *fallback, const char *accepted)
{
    if (nu_llm__source_kind(s) != NU_LLM_SOURCE_HF)
        return NU_OK;
    char v[64];
    TRY(nu_llm__meta_string(s, K(NULL, key), fallback, v, sizeof v));
    size_t n = strlen(v);
    for (const char *a = accepted; *a;) {
        const char *bar = strchr(a, '|');
        size_t len = bar ? (size_t)(bar - a) : strlen(a);
        if (len == n && !strncmp(a, v, n))
            return NU_OK;
        a += len + (bar ? 1 : 0);
    }
    return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s %s is not supported (%s)", key, v, accepted);
}

nu_status nu_llm__hf_false(const nu_llm_source *s, const char *key, const char *what)
{
    bool no = false, v;
    TRY(nu_llm__meta_bool(s, K(NULL, key), &no, &v));
    if (v)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s (%s) is not supported", key, what);
    return NU_OK;
}

/* GGUF's attention.sliding_window_pattern: a number, or an array of a value a layer. */
static nu_status gguf_pattern(const nu_llm_source *s, uint32_t pattern, nu_llm_hparams *hp)
{
    const nu_gguf *g = nu_llm__source_gguf(s);
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", nu_llm__source_arch(s));
    nu_gguf_value v;
    uint32_t layers = hp->cfg.layers;
    if (nu_gguf_find(g, key, &v) == NU_OK && v.type == NU_GGUF_ARRAY) {
        if (v.length != layers)
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s has %llu entries for %u layers", key,
                                (unsigned long long)v.length, layers);
        for (uint32_t l = 0; l < layers; l++) {
            nu_gguf_value e;
            if (nu_gguf_array_get(&v, l, &e) != NU_OK ||
                !(e.type == NU_GGUF_BOOL || e.type == NU_GGUF_INT32 || e.type == NU_GGUF_UINT32 ||
                  e.type == NU_GGUF_UINT8 || e.type == NU_GGUF_INT8))
                return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s is not an array of booleans or integers", key);
            hp->swa[l] = e.type == NU_GGUF_BOOL    ? e.scalar.b
                         : e.type == NU_GGUF_INT32 ? e.scalar.i32 != 0
                         : e.type == NU_GGUF_UINT32 ? e.scalar.u32 != 0
                         : e.type == NU_GGUF_UINT8  ? e.scalar.u8 != 0
                                                    : e.scalar.i8 != 0;
        }
        return NU_OK;
    }
    TRY(nu_llm__meta_u32(s, K("attention.sliding_window_pattern", NULL), &pattern, &pattern));
    for (uint32_t l = 0; l < layers; l++)
        hp->swa[l] = pattern == 0 || l % pattern < pattern - 1;
    return NU_OK;
}

nu_status nu_llm__read_swa_layers(const nu_llm_source *s, uint32_t pattern, nu_llm_hparams *hp)
{
    uint32_t layers = hp->cfg.layers;
    if (layers > NU_LLM_MAX_LAYERS)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %u layers with sliding-window attention (at most %d)", layers,
                            NU_LLM_MAX_LAYERS);
    if (nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF)
        return gguf_pattern(s, pattern, hp);
    const cJSON *types = nu_llm__meta_hf_object(s, "layer_types");
    if (types) {
        if (!cJSON_IsArray(types) || (uint32_t)cJSON_GetArraySize(types) != layers)
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json's layer_types is not a list of %u layer kinds", layers);
        uint32_t l = 0;
        for (const cJSON *t = types->child; t; t = t->next, l++) {
            bool sliding = cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention");
            if (!sliding && !(cJSON_IsString(t) && !strcmp(t->valuestring, "full_attention")))
                return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": config.json's layer_types[%u] is not sliding_attention "
                                    "or full_attention", l);
            hp->swa[l] = sliding;
        }
        return NU_OK;
    }
    TRY(nu_llm__meta_u32(s, K(NULL, "sliding_window_pattern"), &pattern, &pattern));
    for (uint32_t l = 0; l < layers; l++)
        hp->swa[l] = pattern == 0 || l % pattern < pattern - 1;
    return NU_OK;
}

nu_status nu_llm__hf_full_attention(const nu_llm_source *s, nu_llm_hparams *hp)
{
    if (nu_llm__source_kind(s) != NU_LLM_SOURCE_HF)
        return NU_OK;
    TRY(nu_llm__hf_false(s, "use_sliding_window", "sliding-window attention"));
    TRY(nu_llm__read_swa_layers(s, 1, hp)); /* pattern 1: no sliding layer unless layer_types says so */
    for (uint32_t l = 0; l < hp->cfg.layers; l++)
        if (hp->swa[l])
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": config.json's layer_types has sliding-window attention at "
                                "layer %u (not supported for %s)", l, nu_llm__source_arch(s));
    return NU_OK;
}

nu_status nu_llm__read_qwen(const nu_llm_source *s, const nu_llm_key *known, size_t known_count, const char *model_type,
                            bool no_bias, nu_llm_hparams *hp)
{
    TRY(nu_llm__arch_meta_check(s, known, known_count, NULL, 0));
    TRY(nu_llm__read_base(s, 1e-6f, hp)); /* Qwen2Config's and Qwen3Config's rms_norm_eps */
    TRY(nu_llm__hf_string_in(s, "hidden_act", "silu", "silu"));
    TRY(nu_llm__hf_string_in(s, "model_type", model_type, model_type));
    if (no_bias)
        TRY(nu_llm__hf_false(s, "attention_bias", "biases"));
    TRY(nu_llm__hf_full_attention(s, hp));
    TRY(nu_llm__read_rope_scaling(s, hp));
    hp->rope_layout = NU_ROPE_HALF;
    return NU_OK;
}

nu_status nu_llm__read_gemma(const nu_llm_source *s, uint32_t layers_27b, uint32_t window, float swa_theta,
                             const char *hf_swa_theta_key, nu_llm_hparams *hp)
{
    nu_llm_config *c = &hp->cfg;
    bool gguf = nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF;
    TRY(nu_llm__hf_string_in(s, "hidden_activation", "gelu_pytorch_tanh", "gelu_pytorch_tanh"));
    TRY(nu_llm__hf_string_in(s, "hidden_act", "gelu_pytorch_tanh", "gelu_pytorch_tanh"));
    TRY(nu_llm__hf_false(s, "attention_bias", "biases"));
    hp->act = NU_GLU_GELU_TANH;
    hp->embed_scale = sqrtf((float)c->dim);
    hp->rope_layout = NU_ROPE_HALF;
    if (gguf) {
        hp->attn_scale = 1.0f / sqrtf(c->layers == layers_27b ? (float)(c->dim / c->heads) : (float)c->head_dim);
        TRY(nu_llm__meta_u32(s, K("attention.sliding_window", NULL), &window, &hp->window));
        TRY(nu_llm__meta_f32(s, K("rope.freq_base_swa", NULL), &swa_theta, &hp->swa_theta));
    } else {
        bool yes = true;
        float scalar = (float)c->head_dim;
        TRY(nu_llm__meta_bool(s, K(NULL, "tie_word_embeddings"), &yes, &c->tied_embeddings));
        TRY(nu_llm__meta_f32(s, K(NULL, "query_pre_attn_scalar"), &scalar, &scalar));
        if (!(scalar > 0))
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": query_pre_attn_scalar %g is not positive", (double)scalar);
        hp->attn_scale = 1.0f / sqrtf(scalar);
        hp->norm_offset = 1;
        TRY(nu_llm__meta_u32(s, K(NULL, "sliding_window"), &window, &hp->window));
        TRY(nu_llm__meta_f32(s, K(NULL, hf_swa_theta_key), &swa_theta, &hp->swa_theta));
    }
    if (hp->swa_theta < 0)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": a negative RoPE base %g for the sliding-window layers",
                            (double)hp->swa_theta);
    return NU_OK;
}
