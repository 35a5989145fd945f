/* llama.c: the Llama architecture (Llama 1, 2 and 3 without RoPE scaling; Mistral 7B, TinyLlama and
 * the other files llama.cpp's converter writes as "llama"): RMSNorm, RoPE on whole heads,
 * grouped-query attention, SwiGLU, tied or separate output embedding.
 * GGUF: general.architecture "llama", keys llama.*, q and k rows in llama.cpp's interleaved RoPE
 * order. Hugging Face: LlamaForCausalLM, q_proj and k_proj rows in rotate_half order.
 * A file is run only when every key and tensor in it that changes the arithmetic is one nuvec
 * implements: the keys below are read or known to change nothing as nuvec runs the file (checked
 * where a value matters: RoPE scaling of type none or linear by 1); the refused ones are named with
 * what they do; any other key of the architecture is refused as unknown (llm/source/source.c), as
 * is any tensor outside the roster (llm/arch/arch.c). Optional keys take llama.cpp's defaults
 * (src/llama-model.cpp, load_hparams) or transformers' (LlamaConfig). */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch.h"
#include "blocks.h"
#include "common.h"

#define FN "nu_llm_model_open"

#define K(g, h) ((nu_llm_key){(g), (h)})
static const nu_llm_key CONTEXT = K("context_length", "max_position_embeddings"),
                        DIM = K("embedding_length", "hidden_size"), LAYERS = K("block_count", "num_hidden_layers"),
                        FFN = K("feed_forward_length", "intermediate_size"),
                        HEADS = K("attention.head_count", "num_attention_heads"),
                        KV_HEADS = K("attention.head_count_kv", "num_key_value_heads"),
                        EPS = K("attention.layer_norm_rms_epsilon", "rms_norm_eps"),
                        THETA = K("rope.freq_base", "rope_theta"), VOCAB = K("vocab_size", "vocab_size"),
                        ROT = K("rope.dimension_count", NULL), KEY_LEN = K("attention.key_length", "head_dim"),
                        VALUE_LEN = K("attention.value_length", NULL),
                        SCALING = K("rope.scaling.type", NULL), FACTOR = K("rope.scaling.factor", NULL),
                        SCALE_LINEAR = K("rope.scale_linear", NULL), ATTN_FACTOR = K("rope.scaling.attn_factor", NULL),
                        EXPERTS = K("expert_count", NULL), EXPERTS_USED = K("expert_used_count", NULL),
                        CAUSAL = K("attention.causal", NULL), TIED = K(NULL, "tie_word_embeddings"),
                        ACT = K(NULL, "hidden_act"), ROPE_SCALING_HF = K(NULL, "rope_scaling"),
                        ATTN_BIAS = K(NULL, "attention_bias"), MLP_BIAS = K(NULL, "mlp_bias"),
                        WINDOW_HF = K(NULL, "sliding_window"), PARTIAL = K(NULL, "partial_rotary_factor");

/* Keys read, and keys that change nothing as nuvec runs the file: the YaRN parameters and the
 * original context matter only to YaRN and LongRoPE scaling (refused by their type). */
static const nu_llm_key KNOWN[] = {
    CONTEXT, DIM, LAYERS, FFN, HEADS, KV_HEADS, EPS, THETA, VOCAB, ROT, KEY_LEN, VALUE_LEN, SCALING, FACTOR,
    SCALE_LINEAR, ATTN_FACTOR, EXPERTS, EXPERTS_USED, CAUSAL, TIED, ACT, ROPE_SCALING_HF, ATTN_BIAS, MLP_BIAS,
    WINDOW_HF, PARTIAL, K("rope.scaling.original_context_length", NULL), K("rope.scaling.finetuned", NULL),
    K("rope.scaling.yarn_log_multiplier", NULL), K("rope.scaling.yarn_ext_factor", NULL),
    K("rope.scaling.yarn_attn_factor", NULL), K("rope.scaling.yarn_beta_fast", NULL),
    K("rope.scaling.yarn_beta_slow", NULL)};

/* Keys that change the arithmetic in ways nuvec does not implement, with what they do. */
static const nu_llm_refused_key REFUSED[] = {
    {K("attention.sliding_window", NULL), "sliding-window attention"},
    {K("attn_logit_softcapping", "attn_logit_softcapping"), "attention logit softcapping"},
    {K("final_logit_softcapping", "final_logit_softcapping"), "final logit softcapping"},
    {K("attention.scale", NULL), "an attention scale other than 1/sqrt(head_dim)"},
    {K("embedding_scale", NULL), "a scaled token embedding"},
    {K("residual_scale", NULL), "scaled residual connections"},
    {K("logit_scale", NULL), "scaled output logits"},
    {K("attention.layer_norm_epsilon", NULL), "LayerNorm (llama has RMSNorm)"},
    {K("attention.clamp_kqv", NULL), "clamped q, k and v"},
    {K("attention.max_alibi_bias", NULL), "ALiBi attention biases"},
    {K("pooling_type", NULL), "an embedding model's pooling"},
    {K("rope.dimension_sections", NULL), "multi-section RoPE"},
    {K("expert_shared_count", NULL), "shared experts"},
    {K("expert_feed_forward_length", NULL), "mixture-of-experts layers"},
    {K(NULL, "quantization_config"), "weights quantized by another tool"},
    {K(NULL, "auto_map"), "custom modeling code"},
    {K(NULL, "num_local_experts"), "mixture-of-experts layers"},
};

#define NA NU_LLM_DIM_NONE
#define MX NU_LLM_T_MATRIX
static const nu_llm_tensor_spec ROSTER[] = {
    {NU_LLM_W_EMBED, "token_embd.weight", "model.embed_tokens.weight", NU_LLM_DIM_VOCAB, NU_LLM_DIM_MODEL, MX},
    {NU_LLM_W_OUT_NORM, "output_norm.weight", "model.norm.weight", NU_LLM_DIM_MODEL, NA, 0},
    {NU_LLM_W_OUTPUT, "output.weight", "lm_head.weight", NU_LLM_DIM_VOCAB, NU_LLM_DIM_MODEL, MX | NU_LLM_T_OPTIONAL},
    {NU_LLM_W_ROPE_FREQS, "rope_freqs.weight", NULL, NU_LLM_DIM_HALF_HEAD, NA, NU_LLM_T_OPTIONAL},
    {NU_LLM_W_ATTN_NORM, "blk.%u.attn_norm.weight", "model.layers.%u.input_layernorm.weight", NU_LLM_DIM_MODEL, NA, 0},
    {NU_LLM_W_Q, "blk.%u.attn_q.weight", "model.layers.%u.self_attn.q_proj.weight", NU_LLM_DIM_Q, NU_LLM_DIM_MODEL, MX},
    {NU_LLM_W_K, "blk.%u.attn_k.weight", "model.layers.%u.self_attn.k_proj.weight", NU_LLM_DIM_KV, NU_LLM_DIM_MODEL, MX},
    {NU_LLM_W_V, "blk.%u.attn_v.weight", "model.layers.%u.self_attn.v_proj.weight", NU_LLM_DIM_KV, NU_LLM_DIM_MODEL, MX},
    {NU_LLM_W_O, "blk.%u.attn_output.weight", "model.layers.%u.self_attn.o_proj.weight", NU_LLM_DIM_MODEL,
     NU_LLM_DIM_Q, MX},
    {NU_LLM_W_FFN_NORM, "blk.%u.ffn_norm.weight", "model.layers.%u.post_attention_layernorm.weight", NU_LLM_DIM_MODEL,
     NA, 0},
    {NU_LLM_W_GATE, "blk.%u.ffn_gate.weight", "model.layers.%u.mlp.gate_proj.weight", NU_LLM_DIM_FFN, NU_LLM_DIM_MODEL,
     MX},
    {NU_LLM_W_UP, "blk.%u.ffn_up.weight", "model.layers.%u.mlp.up_proj.weight", NU_LLM_DIM_FFN, NU_LLM_DIM_MODEL, MX},
    {NU_LLM_W_DOWN, "blk.%u.ffn_down.weight", "model.layers.%u.mlp.down_proj.weight", NU_LLM_DIM_MODEL, NU_LLM_DIM_FFN,
     MX},
};

/* transformers' non-persistent buffer, recomputed from rope_theta at load (it skips it too). */
static const char *const IGNORED[] = {"model.layers.%u.self_attn.rotary_emb.inv_freq", NULL};

#define TRY(call)                                                                                                  \
    do {                                                                                                           \
        nu_status st_ = (call);                                                                                    \
        if (st_ != NU_OK)                                                                                          \
            return st_;                                                                                            \
    } while (0)

/* Llama 3.1's frequency divisors from config.json's rope_scaling (rope_type "llama3": factor,
 * low_freq_factor, high_freq_factor, original_max_position_embeddings), as transformers and
 * llama.cpp's converter compute them: pairs whose wavelength is under the original context over
 * high_freq_factor keep their frequency, those over it over low_freq_factor are divided by
 * factor, and those between are blended. */
static nu_status llama3_factors(const cJSON *scaling, nu_llm_hparams *hp)
{
    const char *names[4] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
    double v[4];
    for (int i = 0; i < 4; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(scaling, names[i]);
        if (!cJSON_IsNumber(x) || !(x->valuedouble > 0) || !isfinite(x->valuedouble))
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": rope_scaling's %s is not a positive number", names[i]);
        v[i] = x->valuedouble;
    }
    if (!(v[2] > v[1]))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": rope_scaling's high_freq_factor %g is not above low_freq_factor %g",
                            v[2], v[1]);
    uint32_t half = hp->cfg.head_dim / 2;
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

/* RoPE scaling. GGUF, as llama.cpp reads it: the type defaults to linear and the factor to 1 (0
 * means 1); types none and linear run (positions divided by the factor); Llama 3.1's scaling is
 * the file's rope_freqs.weight tensor (read by the roster); an attention factor other than 1 and
 * other types (yarn, longrope) are refused by name. config.json: rope_scaling's rope_type (or
 * type) "default", "linear" (factor) or "llama3" (its frequency divisors made here). */
static nu_status read_rope_scaling(const nu_llm_source *s, nu_llm_hparams *hp)
{
    hp->rope_linear = 1;
    if (nu_llm__source_kind(s) == NU_LLM_SOURCE_HF) {
        const cJSON *scaling = nu_llm__meta_hf_object(s, "rope_scaling");
        if (!scaling)
            return NU_OK;
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(scaling, "rope_type");
        if (!type)
            type = cJSON_GetObjectItemCaseSensitive(scaling, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : "(none given)";
        if (!strcmp(t, "default"))
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
    char type[64];
    float zero = 0, one = 1, factor, attn;
    TRY(nu_llm__meta_string(s, SCALING, "linear", type, sizeof type));
    TRY(nu_llm__meta_f32(s, SCALE_LINEAR, &zero, &factor));
    TRY(nu_llm__meta_f32(s, FACTOR, &factor, &factor)); /* the newer key wins */
    TRY(nu_llm__meta_f32(s, ATTN_FACTOR, &one, &attn));
    if (strcmp(type, "none") && strcmp(type, "linear"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": RoPE scaling of type %s (llama.rope.scaling.type) is not "
                            "supported (none and linear are; Llama 3.1's is rope_freqs.weight)", type);
    if (attn != 1)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": a RoPE attention factor of %g (llama.rope.scaling.attn_factor) "
                            "is not supported", (double)attn);
    if (!strcmp(type, "linear") && factor != 0) {
        if (!(factor >= 1))
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": linear RoPE scaling by %g (llama.rope.scaling.factor); at "
                                "least 1 expected", (double)factor);
        hp->rope_linear = factor;
    }
    return NU_OK;
}

/* config.json's value-checked keys: what nuvec runs (silu, no biases, no window, whole-head RoPE). */
static nu_status check_hf_values(const nu_llm_source *s)
{
    char act[64];
    bool no = false, bias;
    TRY(nu_llm__meta_string(s, ACT, "silu", act, sizeof act));
    if (strcmp(act, "silu"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": hidden_act %s is not supported (only silu)", act);
    TRY(nu_llm__meta_bool(s, ATTN_BIAS, &no, &bias));
    if (bias)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": attention_bias (biases) is not supported");
    TRY(nu_llm__meta_bool(s, MLP_BIAS, &no, &bias));
    if (bias)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": mlp_bias (biases) is not supported");
    if (nu_llm__meta_has(s, WINDOW_HF))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": sliding_window (sliding-window attention) is not supported");
    float one = 1, partial;
    TRY(nu_llm__meta_f32(s, PARTIAL, &one, &partial));
    if (partial != 1)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": partial_rotary_factor %g (RoPE on part of each head) is not "
                            "supported", (double)partial);
    char type[64];
    TRY(nu_llm__meta_string(s, K(NULL, "model_type"), "llama", type, sizeof type));
    if (strcmp(type, "llama"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": model_type %s is not supported (only llama)", type);
    return NU_OK;
}

static nu_status read_hparams(const nu_llm_source *s, nu_llm_hparams *hp)
{
    nu_llm_config *c = &hp->cfg;
    bool gguf = nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF;
    TRY(nu_llm__meta_check(s, KNOWN, sizeof KNOWN / sizeof *KNOWN, REFUSED, sizeof REFUSED / sizeof *REFUSED));
    if (!gguf)
        TRY(check_hf_values(s));
    /* The vocabulary's size: llama.vocab_size, else the embedding's rows (llama.cpp: the
     * tokenizer's; the embedding is what nuvec reads). */
    const nu_llm_file_tensor *embed = nu_llm__source_find(s, gguf ? "token_embd.weight" : "model.embed_tokens.weight");
    uint32_t vocab_default = embed && embed->rank == 2 ? (uint32_t)embed->shape[0] : 0;
    /* transformers' LlamaConfig defaults 1e-6, llama.cpp's 1e-5 */
    float theta = 10000.0f, eps = gguf ? 1e-5f : 1e-6f;
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
     * Small: 128 where dim / heads is 160), else dim / heads; values the same length. */
    if (!nu_llm__meta_has(s, KEY_LEN) && c->dim % c->heads)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": the model width %u is not a multiple of its %u heads and it gives no "
                            "head size (%s)", c->dim, c->heads, gguf ? "llama.attention.key_length" : "head_dim");
    uint32_t split = c->dim / c->heads, value_dim, rot;
    TRY(nu_llm__meta_u32(s, KEY_LEN, &split, &c->head_dim));
    TRY(nu_llm__meta_u32(s, VALUE_LEN, &split, &value_dim));
    if (!c->head_dim)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": a head size of 0");
    if (gguf && value_dim != c->head_dim)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": values of %u elements a head (llama.attention.value_length) "
                            "with keys of %u (key_length) are not supported", value_dim, c->head_dim);
    TRY(nu_llm__meta_u32(s, ROT, &c->head_dim, &rot));
    if (rot != c->head_dim)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": RoPE on %u of a head's %u dimensions (llama.rope.dimension_count) "
                            "is not supported (llama rotates whole heads)", rot, c->head_dim);
    uint32_t zero = 0, experts, experts_used;
    bool causal, yes = true;
    TRY(nu_llm__meta_u32(s, EXPERTS, &zero, &experts));
    TRY(nu_llm__meta_u32(s, EXPERTS_USED, &zero, &experts_used));
    TRY(nu_llm__meta_bool(s, CAUSAL, &yes, &causal));
    if (experts || experts_used)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": mixture-of-experts layers (llama.expert_count %u) are not "
                            "supported", experts);
    if (!causal)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": non-causal attention (llama.attention.causal false) is not "
                            "supported");
    TRY(read_rope_scaling(s, hp));
    /* GGUF: no output.weight means tied (llama.cpp); config.json: tie_word_embeddings. */
    bool no = false;
    if (gguf)
        c->tied_embeddings = !nu_llm__source_find(s, "output.weight");
    else
        TRY(nu_llm__meta_bool(s, TIED, &no, &c->tied_embeddings));
    hp->rope_layout = gguf ? NU_ROPE_INTERLEAVED : NU_ROPE_HALF;
    return NU_OK;
}

static nu_status layer(nu_llm_pass *p, const nu_llm_layer_w *w, uint32_t l)
{
    TRY(nu_llm__blk_attention(p, w, l));
    return nu_llm__blk_ffn_swiglu(p, w);
}

static const char *const HF_NAMES[] = {"LlamaForCausalLM", NULL};

const nu_llm_arch nu_llm__arch_llama = {
    .name = "llama",
    .gguf_name = "llama",
    .hf_names = HF_NAMES,
    .roster = ROSTER,
    .roster_count = sizeof ROSTER / sizeof *ROSTER,
    .ignored = IGNORED,
    .read_hparams = read_hparams,
    .layer = layer,
};
