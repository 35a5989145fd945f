/* gemma3.c: Gemma 3's text model (llama.cpp's src/models/gemma3.cpp): Gemma 2's layer (scaled
 * embedding, sandwich norms, GeGLU, NEOX RoPE, head_dim 256, tied output) with an RMSNorm of each q
 * and k head before RoPE (attn_q_norm, attn_k_norm) and no attention softcap; sliding-window
 * attention on five layers of six (layers 0-4, 6-10, ...: llama.cpp's pattern 6 and transformers'
 * sliding_window_pattern; the window from the metadata: 512 for 1B, 1024 for the larger sizes);
 * RoPE base 10000 on the sliding layers and the file's (1M) on the global ones, linear RoPE
 * scaling (factor 8 on 4B and up) on the global ones only; an optional final softcap; a 262K
 * vocabulary (the SentencePiece tokenizer is the tokenizer's).
 * GGUF: general.architecture "gemma3", keys gemma3.* (norms with llama.cpp's converter's +1; a file
 * without gemma3.attention.sliding_window has no sliding layers, as llama.cpp reads it). Hugging
 * Face: Gemma3ForCausalLM (the text-only 1B and the converted text models; norms as w, the 1 added
 * at load); Gemma3ForConditionalGeneration, with its vision tower, is refused (arch.c).
 * The KV cache holds every position for every layer (see gemma2.c): at Gemma 3's 1024-position
 * window a ring per sliding layer would cut the cache by 5/6 at long contexts. */
#include "blocks.h"
#include "common.h"
#include "hparams.h"

#define K NU_LLM_KEY
#define TRY NU_LLM_TRY

/* The keys as macros: a static array's initializers must be constant expressions. */
#define FINAL K("final_logit_softcapping", "final_logit_softcapping")
#define ATTN_SOFTCAP_HF K(NULL, "attn_logit_softcapping")

static const nu_llm_key KNOWN[] = {
    FINAL, ATTN_SOFTCAP_HF, K("attention.sliding_window", "sliding_window"),
    K("attention.sliding_window_pattern", "sliding_window_pattern"), K("rope.freq_base_swa", "rope_local_base_freq"),
    K(NULL, "hidden_activation"), K(NULL, "hidden_act"), K(NULL, "attention_bias"), K(NULL, "query_pre_attn_scalar"),
    K(NULL, "layer_types"), K(NULL, "cache_implementation"), K(NULL, "use_bidirectional_attention")};

#define NORM NU_LLM_T_NORM
static const nu_llm_tensor_spec ROSTER[] = {
    NU_LLM_R_EMBED,
    NU_LLM_R_OUT_NORM(NORM),
    NU_LLM_R_OUTPUT,
    NU_LLM_R_ATTN_NORM(NORM),
    NU_LLM_R_QKV_O,
    NU_LLM_R_QK_NORMS(NORM),
    NU_LLM_R_GEMMA_FFN,
};

static const char *const IGNORED[] = {NU_LLM_IGNORED_INV_FREQ, NULL};

static nu_status read_hparams(const nu_llm_source *s, nu_llm_hparams *hp)
{
    TRY(nu_llm__arch_meta_check(s, KNOWN, sizeof KNOWN / sizeof *KNOWN, NULL, 0));
    TRY(nu_llm__read_base(s, 1e-6f, hp)); /* Gemma3TextConfig's rms_norm_eps */
    TRY(nu_llm__hf_string_in(s, "model_type", "gemma3_text", "gemma3_text"));
    TRY(nu_llm__hf_false(s, "use_bidirectional_attention", "bidirectional attention (EmbeddingGemma)"));
    if (nu_llm__meta_has(s, ATTN_SOFTCAP_HF))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "nu_llm_model_open: config.json's attn_logit_softcapping "
                            "(attention logit softcapping) is not supported for Gemma 3 (it has none)");
    TRY(nu_llm__read_rope_scaling(s, hp)); /* the global layers' scaling */
    /* transformers' Gemma3TextConfig: sliding_window 4096; GGUF: none without the key */
    bool gguf = nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF;
    TRY(nu_llm__read_gemma(s, 62, gguf ? 0 : 4096, 10000.0f, "rope_local_base_freq", hp));
    hp->swa_linear = 1; /* the sliding layers' RoPE is unscaled */
    float none = 0;
    TRY(nu_llm__meta_f32(s, FINAL, &none, &hp->final_softcap));
    if (hp->final_softcap < 0)
        return nu_llm__fail(NU_ERROR_FORMAT, "nu_llm_model_open: a negative final softcap %g", (double)hp->final_softcap);
    return hp->window ? nu_llm__read_swa_layers(s, 6, hp) : NU_OK;
}

static const char *const HF_NAMES[] = {"Gemma3ForCausalLM", NULL};

NU_LLM_ARCH_DEFINE(nu_llm__arch_gemma3, "gemma3");
