/* qwen2.c: Qwen2 and Qwen2.5 (llama.cpp's src/models/qwen2.cpp): Llama's layer with biases on the
 * q, k and v products, RoPE in the NEOX layout (rotate half: llama.cpp's converter keeps the Hugging
 * Face rows as they are), a tied or separate output, vocabularies near 152K (the byte-level BPE
 * tokenizer with the qwen2 pre-tokenizer is the tokenizer's).
 * GGUF: general.architecture "qwen2", keys qwen2.*. Hugging Face: Qwen2ForCausalLM.
 * Refused by name: sliding-window attention (config.json's use_sliding_window true; the released
 * models leave it off), YaRN RoPE scaling (Qwen2.5's long-context setting), the MoE and vision
 * variants (arch.c). The keys read are the shared ones (hparams.c) and those below. */
#include "blocks.h"
#include "common.h"
#include "hparams.h"

#define K NU_LLM_KEY
#define TRY NU_LLM_TRY

/* config.json: the activation, and the sliding window's settings, which change nothing while
 * use_sliding_window is false (checked). */
static const nu_llm_key KNOWN[] = {K(NULL, "hidden_act"), K(NULL, "use_sliding_window"), K(NULL, "sliding_window"),
                                   K(NULL, "max_window_layers"), K(NULL, "layer_types")};

#define NA NU_LLM_DIM_NONE
#define OPT NU_LLM_T_OPTIONAL
static const nu_llm_tensor_spec ROSTER[] = {
    NU_LLM_R_EMBED,
    NU_LLM_R_OUT_NORM(0),
    NU_LLM_R_OUTPUT,
    NU_LLM_R_ATTN_NORM(0),
    NU_LLM_R_QKV_O,
    /* llama.cpp takes the biases as optional; every Qwen2 file has them */
    {NU_LLM_W_Q_BIAS, "blk.%u.attn_q.bias", "model.layers.%u.self_attn.q_proj.bias", NU_LLM_DIM_Q, NA, OPT},
    {NU_LLM_W_K_BIAS, "blk.%u.attn_k.bias", "model.layers.%u.self_attn.k_proj.bias", NU_LLM_DIM_KV, NA, OPT},
    {NU_LLM_W_V_BIAS, "blk.%u.attn_v.bias", "model.layers.%u.self_attn.v_proj.bias", NU_LLM_DIM_KV, NA, OPT},
    NU_LLM_R_FFN_NORM,
    NU_LLM_R_GATE_UP_DOWN,
};

static const char *const IGNORED[] = {NU_LLM_IGNORED_INV_FREQ, NULL};

static nu_status read_hparams(const nu_llm_source *s, nu_llm_hparams *hp)
{
    return nu_llm__read_qwen(s, KNOWN, sizeof KNOWN / sizeof *KNOWN, "qwen2", false, hp);
}

static const char *const HF_NAMES[] = {"Qwen2ForCausalLM", NULL};

NU_LLM_ARCH_DEFINE(nu_llm__arch_qwen2, "qwen2");
