/* phi3.c: Phi-3 (llama.cpp's src/models/phi3.cpp; Phi-3-mini, -small's dense siblings, -medium,
 * Phi-3.5-mini, Phi-4): Llama's layer with q, k and v fused in one matrix (attn_qkv: q rows, then
 * k, then v) and gate and up fused in one (ffn_up of 2 x ffn rows: gate first, as transformers'
 * chunk(2)); NEOX RoPE; head_dim 96 for mini; LongRoPE for the 128K models: per-pair frequency
 * divisors for a context past the original one (rope_factors_long) and within it
 * (rope_factors_short), chosen by the cache's positions as llama.cpp chooses them by its context
 * (transformers switches by the sequence's length instead), and cos and sin multiplied by the
 * attention factor (rope.scaling.attn_factor; config.json: sqrt(1 + ln(s) / ln(original)) for
 * s = max positions / original, or rope_scaling's attention_factor).
 * The sliding window a file declares (Phi-3-mini-4k's 2047; attention.sliding_window, config.json's
 * sliding_window) applies to every layer, as transformers applies it; llama.cpp ignores it ("Phi
 * SWA is currently disabled"), so past the window the two differ.
 * GGUF: general.architecture "phi3". Hugging Face: Phi3ForCausalLM (auto_map, from the models'
 * days of custom code, changes nothing: transformers runs its own Phi3). */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "blocks.h"
#include "common.h"
#include "hparams.h"

#define FN "nu_llm_model_open"
#define K NU_LLM_KEY
#define TRY NU_LLM_TRY

/* The keys as macros: a static array's initializers must be constant expressions. */
#define WINDOW K("attention.sliding_window", "sliding_window")
#define ORIGINAL K("rope.scaling.original_context_length", "original_max_position_embeddings")

static const nu_llm_key KNOWN[] = {WINDOW, ORIGINAL, K(NULL, "hidden_act"), K(NULL, "attention_bias"),
                                   K(NULL, "auto_map"), K(NULL, "embd_pdrop"), K(NULL, "resid_pdrop")};

#define NA NU_LLM_DIM_NONE
#define MX NU_LLM_T_MATRIX
#define OPT NU_LLM_T_OPTIONAL
static const nu_llm_tensor_spec ROSTER[] = {
    NU_LLM_R_EMBED,
    NU_LLM_R_OUT_NORM(0),
    NU_LLM_R_OUTPUT,
    {NU_LLM_W_ROPE_LONG, "rope_factors_long.weight", NULL, NU_LLM_DIM_HALF_HEAD, NA, OPT},
    {NU_LLM_W_ROPE_SHORT, "rope_factors_short.weight", NULL, NU_LLM_DIM_HALF_HEAD, NA, OPT},
    NU_LLM_R_ATTN_NORM(0),
    {NU_LLM_W_QKV, "blk.%u.attn_qkv.weight", "model.layers.%u.self_attn.qkv_proj.weight", NU_LLM_DIM_QKV,
     NU_LLM_DIM_MODEL, MX},
    {NU_LLM_W_O, "blk.%u.attn_output.weight", "model.layers.%u.self_attn.o_proj.weight", NU_LLM_DIM_MODEL,
     NU_LLM_DIM_Q, MX},
    NU_LLM_R_FFN_NORM,
    {NU_LLM_W_GATE_UP, "blk.%u.ffn_up.weight", "model.layers.%u.mlp.gate_up_proj.weight", NU_LLM_DIM_FFN2,
     NU_LLM_DIM_MODEL, MX},
    {NU_LLM_W_DOWN, "blk.%u.ffn_down.weight", "model.layers.%u.mlp.down_proj.weight", NU_LLM_DIM_MODEL,
     NU_LLM_DIM_FFN, MX},
};

static const char *const IGNORED[] = {NU_LLM_IGNORED_INV_FREQ, NULL};

/* config.json's LongRoPE factors: rope_scaling's `key`, head_dim / 2 positive numbers. */
static nu_status hf_factors(const cJSON *scaling, const char *key, uint32_t half, float *out)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(scaling, key);
    if (!cJSON_IsArray(list) || (uint32_t)cJSON_GetArraySize(list) != half)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": rope_scaling's %s is not a list of %u numbers", key, half);
    uint32_t i = 0;
    for (const cJSON *x = list->child; x; x = x->next, i++) {
        if (!cJSON_IsNumber(x) || !(x->valuedouble > 0) || !isfinite(x->valuedouble))
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": rope_scaling's %s[%u] is not a positive number", key, i);
        out[i] = (float)x->valuedouble;
    }
    return NU_OK;
}

/* config.json's rope_scaling: none, or longrope ("su" in older files) with its two lists of
 * factors; the attention factor as transformers computes it. */
static nu_status hf_longrope(const nu_llm_source *s, nu_llm_hparams *hp)
{
    const char *t;
    const cJSON *scaling = nu_llm__hf_rope_scaling(s, &t);
    if (!scaling || !strcmp(t, "default"))
        return NU_OK;
    if (strcmp(t, "longrope") && strcmp(t, "su"))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": rope_scaling of type %s is not supported for Phi-3 (longrope "
                            "is)", t);
    uint32_t half = hp->cfg.head_dim / 2;
    if (half > 128)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": LongRoPE with head_dim %u (at most 256)", hp->cfg.head_dim);
    TRY(hf_factors(scaling, "long_factor", half, hp->rope_long));
    TRY(hf_factors(scaling, "short_factor", half, hp->rope_short));
    hp->longrope = hp->longrope_made = true;
    double orig = hp->rope_original_context, scale = (double)hp->cfg.max_positions / orig, attn;
    if (cJSON_GetObjectItemCaseSensitive(scaling, "attention_factor"))
        TRY(nu_llm__hf_positive(scaling, "rope_scaling", "attention_factor", &attn));
    else
        attn = scale > 1 ? sqrt(1 + log(scale) / log(orig)) : 1;
    hp->rope_attn_factor = (float)attn;
    return NU_OK;
}

/* GGUF's RoPE: llama.cpp's generic reading (type none, linear or longrope; a linear factor; the
 * attention factor, which llama.cpp applies whatever the type), LongRoPE where the file has its
 * factor tensors. */
static nu_status gguf_rope(const nu_llm_source *s, nu_llm_hparams *hp)
{
    bool longrope;
    TRY(nu_llm__gguf_rope_scaling(s, "longrope", &longrope, &hp->rope_attn_factor, hp));
    bool has_long = nu_llm__source_find(s, "rope_factors_long.weight") != NULL,
         has_short = nu_llm__source_find(s, "rope_factors_short.weight") != NULL;
    if (has_long != has_short)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": the file has rope_factors_%s.weight without rope_factors_%s.weight",
                            has_long ? "long" : "short", has_long ? "short" : "long");
    hp->longrope = has_long;
    return NU_OK;
}

static nu_status read_hparams(const nu_llm_source *s, nu_llm_hparams *hp)
{
    bool gguf = nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF;
    TRY(nu_llm__arch_meta_check(s, KNOWN, sizeof KNOWN / sizeof *KNOWN, NULL, 0));
    TRY(nu_llm__read_base(s, 1e-5f, hp)); /* Phi3Config's rms_norm_eps */
    TRY(nu_llm__hf_string_in(s, "hidden_act", "silu", "silu"));
    TRY(nu_llm__hf_string_in(s, "model_type", "phi3", "phi3"));
    TRY(nu_llm__hf_false(s, "attention_bias", "biases"));
    TRY(nu_llm__meta_u32(s, ORIGINAL, &hp->cfg.max_positions, &hp->rope_original_context));
    if (!hp->rope_original_context)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": an original context of 0 positions");
    TRY(gguf ? gguf_rope(s, hp) : hf_longrope(s, hp));
    if (!gguf)
        hp->rope_linear = 1;
    uint32_t none = 0;
    TRY(nu_llm__meta_u32(s, WINDOW, &none, &hp->window));
    hp->rope_layout = NU_ROPE_HALF;
    return hp->window ? nu_llm__read_swa_layers(s, 0, hp) : NU_OK; /* pattern 0: every layer */
}

static const char *const HF_NAMES[] = {"Phi3ForCausalLM", NULL};

NU_LLM_ARCH_DEFINE(nu_llm__arch_phi3, "phi3");
