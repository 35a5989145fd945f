/* hparams.h: what the architectures (llm/arch/<name>.c) share in reading their hyperparameters: the keys
 * every decoder-only file of llama.cpp's converter has (sizes, heads, the RMSNorm epsilon, RoPE's
 * base and scaling, the head size), the keys every architecture refuses unless it reads them
 * (softcaps, scales, experts, ALiBi, ...), the sliding-window layer pattern, and config.json's
 * value checks. Each architecture adds its own keys on top; a key neither known nor refused is
 * refused as unknown (nu_llm__meta_check). Messages name the key as the file spells it. */
#ifndef NU_LLM_ARCH_HPARAMS_H
#define NU_LLM_ARCH_HPARAMS_H

#include "arch.h"
#include "common.h" /* NU_LLM_TRY */

#define NU_LLM_KEY(g, h) ((nu_llm_key){(g), (h)})

/* Roster entries named alike by llama.cpp's converter and transformers in every architecture here
 * (norms take their flags: NU_LLM_T_NORM where the architecture offsets them). */
#define NU_LLM_R_EMBED                                                                                             \
    {NU_LLM_W_EMBED, "token_embd.weight", "model.embed_tokens.weight", NU_LLM_DIM_VOCAB, NU_LLM_DIM_MODEL,         \
     NU_LLM_T_MATRIX}
#define NU_LLM_R_OUT_NORM(flags) {NU_LLM_W_OUT_NORM, "output_norm.weight", "model.norm.weight", NU_LLM_DIM_MODEL, NU_LLM_DIM_NONE, (flags)}
#define NU_LLM_R_OUTPUT                                                                                            \
    {NU_LLM_W_OUTPUT, "output.weight", "lm_head.weight", NU_LLM_DIM_VOCAB, NU_LLM_DIM_MODEL,                       \
     NU_LLM_T_MATRIX | NU_LLM_T_OPTIONAL}
#define NU_LLM_R_ATTN_NORM(flags)                                                                                  \
    {NU_LLM_W_ATTN_NORM, "blk.%u.attn_norm.weight", "model.layers.%u.input_layernorm.weight", NU_LLM_DIM_MODEL,    \
     NU_LLM_DIM_NONE, (flags)}
#define NU_LLM_R_QKV_O                                                                                             \
    {NU_LLM_W_Q, "blk.%u.attn_q.weight", "model.layers.%u.self_attn.q_proj.weight", NU_LLM_DIM_Q, NU_LLM_DIM_MODEL,\
     NU_LLM_T_MATRIX},                                                                                             \
        {NU_LLM_W_K, "blk.%u.attn_k.weight", "model.layers.%u.self_attn.k_proj.weight", NU_LLM_DIM_KV,             \
         NU_LLM_DIM_MODEL, NU_LLM_T_MATRIX},                                                                       \
        {NU_LLM_W_V, "blk.%u.attn_v.weight", "model.layers.%u.self_attn.v_proj.weight", NU_LLM_DIM_KV,             \
         NU_LLM_DIM_MODEL, NU_LLM_T_MATRIX},                                                                       \
        {NU_LLM_W_O, "blk.%u.attn_output.weight", "model.layers.%u.self_attn.o_proj.weight", NU_LLM_DIM_MODEL,     \
         NU_LLM_DIM_Q, NU_LLM_T_MATRIX}
#define NU_LLM_R_GATE_UP_DOWN                                                                                      \
    {NU_LLM_W_GATE, "blk.%u.ffn_gate.weight", "model.layers.%u.mlp.gate_proj.weight", NU_LLM_DIM_FFN,              \
     NU_LLM_DIM_MODEL, NU_LLM_T_MATRIX},                                                                           \
        {NU_LLM_W_UP, "blk.%u.ffn_up.weight", "model.layers.%u.mlp.up_proj.weight", NU_LLM_DIM_FFN,                \
         NU_LLM_DIM_MODEL, NU_LLM_T_MATRIX},                                                                       \
        {NU_LLM_W_DOWN, "blk.%u.ffn_down.weight", "model.layers.%u.mlp.down_proj.weight", NU_LLM_DIM_MODEL,        \
         NU_LLM_DIM_FFN, NU_LLM_T_MATRIX}
/* The per-head q and k RMSNorms before RoPE (Qwen3, Gemma 3). */
#define NU_LLM_R_QK_NORMS(flags)                                                                                   \
    {NU_LLM_W_Q_NORM, "blk.%u.attn_q_norm.weight", "model.layers.%u.self_attn.q_norm.weight", NU_LLM_DIM_HEAD,     \
     NU_LLM_DIM_NONE, (flags)},                                                                                    \
        {NU_LLM_W_K_NORM, "blk.%u.attn_k_norm.weight", "model.layers.%u.self_attn.k_norm.weight", NU_LLM_DIM_HEAD, \
         NU_LLM_DIM_NONE, (flags)}
/* The FFN's norm where transformers names it the post-attention one (Llama's layer). */
#define NU_LLM_R_FFN_NORM                                                                                          \
    {NU_LLM_W_FFN_NORM, "blk.%u.ffn_norm.weight", "model.layers.%u.post_attention_layernorm.weight",               \
     NU_LLM_DIM_MODEL, NU_LLM_DIM_NONE, 0}
/* Gemma's sandwich after the attention: the attention's post-norm, the FFN's pre-norm, the FFN and
 * its post-norm, the norms offset (NU_LLM_T_NORM). */
#define NU_LLM_R_GEMMA_FFN                                                                                         \
    {NU_LLM_W_ATTN_POST_NORM, "blk.%u.post_attention_norm.weight", "model.layers.%u.post_attention_layernorm.weight",\
     NU_LLM_DIM_MODEL, NU_LLM_DIM_NONE, NU_LLM_T_NORM},                                                            \
        {NU_LLM_W_FFN_NORM, "blk.%u.ffn_norm.weight", "model.layers.%u.pre_feedforward_layernorm.weight",          \
         NU_LLM_DIM_MODEL, NU_LLM_DIM_NONE, NU_LLM_T_NORM},                                                        \
        NU_LLM_R_GATE_UP_DOWN,                                                                                     \
        {NU_LLM_W_FFN_POST_NORM, "blk.%u.post_ffw_norm.weight", "model.layers.%u.post_feedforward_layernorm.weight",\
         NU_LLM_DIM_MODEL, NU_LLM_DIM_NONE, NU_LLM_T_NORM}
/* transformers' non-persistent RoPE buffer, recomputed from rope_theta at load (it skips it too). */
#define NU_LLM_IGNORED_INV_FREQ "model.layers.%u.self_attn.rotary_emb.inv_freq"

/* An architecture's descriptor from its file's ROSTER, IGNORED, HF_NAMES and read_hparams, with
 * the shared layer (nu_llm__blk_layer, llm/blocks.h); `arch_name` its name and GGUF's. */
#define NU_LLM_ARCH_DEFINE(var, arch_name)                                                                         \
    const nu_llm_arch var = {.name = (arch_name),                                                                  \
                             .gguf_name = (arch_name),                                                             \
                             .hf_names = HF_NAMES,                                                                 \
                             .roster = ROSTER,                                                                     \
                             .roster_count = sizeof ROSTER / sizeof *ROSTER,                                       \
                             .ignored = IGNORED,                                                                   \
                             .read_hparams = read_hparams,                                                         \
                             .layer = nu_llm__blk_layer}

/* nu_llm__meta_check with the shared keys: the base keys nu_llm__read_base reads (and the RoPE
 * scaling ones) known, the shared refusals refused, plus the architecture's own lists (which take
 * precedence: a key an architecture reads is not refused). */
nu_status nu_llm__arch_meta_check(const nu_llm_source *s, const nu_llm_key *known, size_t known_count,
                                  const nu_llm_refused_key *refused, size_t refused_count);

/* The base hyperparameters (cfg: sizes, heads, context, epsilon, RoPE base, vocabulary, head_dim;
 * tied output), checked: sizes not 0, head_dim from attention.key_length / head_dim (else dim /
 * heads), values as long as keys, RoPE on whole heads, no experts, causal attention. `hf_eps` is
 * config.json's default epsilon (GGUF's: 1e-5, llama.cpp's). The RoPE layout is left to the
 * caller. */
nu_status nu_llm__read_base(const nu_llm_source *s, float hf_eps, nu_llm_hparams *hp);

/* RoPE scaling (hp->rope_linear, hp->rope_factors): GGUF's rope.scaling.type none or linear with
 * rope.scaling.factor (llama.cpp's default linear, factor 0 or 1 meaning none) and an attention
 * factor of 1; config.json's rope_scaling of rope_type (or type) default, linear or llama3 (its
 * frequency divisors made as transformers makes them). Other types are refused by name. */
nu_status nu_llm__read_rope_scaling(const nu_llm_source *s, nu_llm_hparams *hp);

/* GGUF's rope.scaling keys as llama.cpp reads them: the type (linear where absent; none, linear or
 * `also` where not NULL accepted, others refused by name; *is_also: it is `also`), the linear
 * factor into hp->rope_linear (rope.scaling.factor, else rope.scale_linear; 0 or 1: none) and the
 * attention factor (rope.scaling.attn_factor, 1 where absent; positive). */
nu_status nu_llm__gguf_rope_scaling(const nu_llm_source *s, const char *also, bool *is_also, float *attn_factor,
                                    nu_llm_hparams *hp);
/* config.json's rope_scaling object (a cJSON *; NULL where absent or null) and its rope_type (else
 * type; "(none given)" where it has neither). */
const void *nu_llm__hf_rope_scaling(const nu_llm_source *s, const char **type);

/* config.json's string `key` (fallback where absent) is one of `accepted` ('|'-separated):
 * NU_ERROR_UNSUPPORTED naming the value otherwise. GGUF sources pass. */
nu_status nu_llm__hf_string_in(const nu_llm_source *s, const char *key, const char *fallback, const char *accepted);
/* config.json's bool `key` is absent or false: NU_ERROR_UNSUPPORTED saying `what` otherwise. */
nu_status nu_llm__hf_false(const nu_llm_source *s, const char *key, const char *what);

/* Sliding-window layers: hp->swa[l] for each layer. GGUF: attention.sliding_window_pattern as a
 * number n (layer l slides where l % n < n - 1, n 0: all; llama.cpp's reading) or an array of one
 * bool (or integer) a layer; absent: `pattern`. config.json: layer_types ("sliding_attention" or
 * "full_attention" a layer), else sliding_window_pattern, else `pattern`. */
nu_status nu_llm__read_swa_layers(const nu_llm_source *s, uint32_t pattern, nu_llm_hparams *hp);

/* config.json's use_sliding_window is absent or false and its layer_types, where present, are
 * full attention only (Qwen's configs carry a window they do not use); GGUF sources pass. */
nu_status nu_llm__hf_full_attention(const nu_llm_source *s, nu_llm_hparams *hp);

/* What Qwen2 and Qwen3 share (checked keys `known`, config.json's model_type, silu, no attention
 * biases where `no_bias`, no sliding window, RoPE scaling, the NEOX layout). */
nu_status nu_llm__read_qwen(const nu_llm_source *s, const nu_llm_key *known, size_t known_count, const char *model_type,
                            bool no_bias, nu_llm_hparams *hp);

/* What Gemma 2 and Gemma 3 share: GeGLU (config.json's hidden_activation gelu_pytorch_tanh), the
 * embedding scaled by sqrt(dim), RoPE in the NEOX layout, the query scale (config.json's
 * query_pre_attn_scalar^-1/2; GGUF files have none: llama.cpp's rule, 1 / sqrt(dim / heads) for
 * the 27B model of `layers_27b` layers, else 1 / sqrt(head_dim)), norms stored as w for
 * x * (1 + w) in config.json's folders (hp.norm_offset 1), a tied output unless
 * tie_word_embeddings is false, no attention biases, and the sliding window (window_key; 0 where
 * absent) with the RoPE base of the sliding layers (GGUF's rope.freq_base_swa, else `swa_theta`;
 * config.json's `hf_swa_theta_key`, else `swa_theta`; 0: the global layers'). */
nu_status nu_llm__read_gemma(const nu_llm_source *s, uint32_t layers_27b, uint32_t window, float swa_theta,
                             const char *hf_swa_theta_key, nu_llm_hparams *hp);

/* A float config.json value of `key` inside the object `obj` (rope_scaling's factor, say): a
 * positive finite number, or NU_ERROR_FORMAT naming "rope_scaling's key". */
nu_status nu_llm__hf_positive(const void *obj, const char *obj_name, const char *key, double *out);

#endif
