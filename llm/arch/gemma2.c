/* gemma2.c: Gemma 2 (llama.cpp's src/models/gemma2.cpp): the token embedding scaled by sqrt(dim);
 * sandwich norms (an RMSNorm after the attention and after the FFN, before each residual add:
 * post_attention_norm, post_ffw_norm); GeGLU (GELU's tanh form); attention logits softcapped at 50
 * and the output logits at 30; sliding-window attention (4096) on every other layer (the even
 * ones, as llama.cpp's pattern 2 and transformers' is_sliding); the query scale 1 / sqrt(head_dim)
 * (1 / sqrt(dim / heads) for the 27B model: config.json's query_pre_attn_scalar); head_dim 256;
 * NEOX RoPE; the output tied to the embedding. The SentencePiece tokenizer is the tokenizer's.
 * GGUF: general.architecture "gemma2", keys gemma2.* (llama.cpp's converter added 1 to every norm
 * weight: Gemma's RMSNorm is x * (1 + w)). Hugging Face: Gemma2ForCausalLM (norms as w: nuvec adds
 * the 1 at load; its post_attention_layernorm is the attention's post-norm and
 * pre_feedforward_layernorm the FFN's norm).
 * The KV cache holds every position for every layer, the sliding ones too (a ring of `window`
 * positions per sliding layer would halve Gemma 2's cache past 2 x 4096 positions). */
#include "blocks.h"
#include "common.h"
#include "hparams.h"

#define K NU_LLM_KEY
#define TRY NU_LLM_TRY

/* The keys as macros: a static array's initializers must be constant expressions. */
#define SOFTCAP K("attn_logit_softcapping", "attn_logit_softcapping")
#define FINAL K("final_logit_softcapping", "final_logit_softcapping")

static const nu_llm_key KNOWN[] = {
    SOFTCAP, FINAL, K("attention.sliding_window", "sliding_window"), K("attention.sliding_window_pattern", NULL),
    K("rope.freq_base_swa", NULL), K(NULL, "hidden_activation"), K(NULL, "hidden_act"), K(NULL, "attention_bias"),
    K(NULL, "query_pre_attn_scalar"), K(NULL, "layer_types"), K(NULL, "cache_implementation"),
    K(NULL, "sliding_window_size")};

#define NORM NU_LLM_T_NORM
static const nu_llm_tensor_spec ROSTER[] = {
    NU_LLM_R_EMBED,
    NU_LLM_R_OUT_NORM(NORM),
    NU_LLM_R_OUTPUT,
    NU_LLM_R_ATTN_NORM(NORM),
    NU_LLM_R_QKV_O,
    NU_LLM_R_GEMMA_FFN,
};

static const char *const IGNORED[] = {NU_LLM_IGNORED_INV_FREQ, NULL};

/* A softcap, llama.cpp's and transformers' default where the file has none (config.json's null
 * reads as absent: the released configs give numbers). */
static nu_status softcap(const nu_llm_source *s, nu_llm_key key, float fallback, float *out)
{
    TRY(nu_llm__meta_f32(s, key, &fallback, out));
    if (*out < 0)
        return nu_llm__fail(NU_ERROR_FORMAT, "nu_llm_model_open: a negative softcap %g (%s)", (double)*out,
                            key.hf);
    return NU_OK;
}

static nu_status read_hparams(const nu_llm_source *s, nu_llm_hparams *hp)
{
    TRY(nu_llm__arch_meta_check(s, KNOWN, sizeof KNOWN / sizeof *KNOWN, NULL, 0));
    TRY(nu_llm__read_base(s, 1e-6f, hp)); /* Gemma2Config's rms_norm_eps */
    TRY(nu_llm__hf_string_in(s, "model_type", "gemma2", "gemma2"));
    TRY(nu_llm__read_rope_scaling(s, hp));
    /* the sliding layers turn as the others (llama.cpp's rope_freq_base_train_swa default) */
    TRY(nu_llm__read_gemma(s, 46, 4096, 0, NULL, hp));
    hp->swa_linear = hp->rope_linear;
    TRY(softcap(s, SOFTCAP, 50, &hp->attn_softcap));
    TRY(softcap(s, FINAL, 30, &hp->final_softcap));
    return hp->window ? nu_llm__read_swa_layers(s, 2, hp) : NU_OK;
}

static const char *const HF_NAMES[] = {"Gemma2ForCausalLM", NULL};

NU_LLM_ARCH_DEFINE(nu_llm__arch_gemma2, "gemma2");
