/* qwen3.c: Qwen3 (llama.cpp's src/models/qwen3.cpp): Qwen2's layer without the q, k and v biases,
 * with an RMSNorm of each q and k head (attn_q_norm, attn_k_norm: weights of head_dim) before
 * RoPE (NEOX layout); head_dim from qwen3.attention.key_length (config.json's head_dim: 128, where
 * dim / heads is 80 or 160 for some sizes); a tied or separate output.
 * GGUF: general.architecture "qwen3", keys qwen3.*. Hugging Face: Qwen3ForCausalLM.
 * Refused by name: attention biases (config.json's attention_bias true), sliding-window attention,
 * YaRN, the MoE variant (qwen3moe, arch.c), a reranker's classifier head (cls.output, a tensor
 * outside the roster). */
#include "blocks.h"
#include "common.h"
#include "hparams.h"

#define K NU_LLM_KEY
#define TRY NU_LLM_TRY

static const nu_llm_key KNOWN[] = {K(NULL, "hidden_act"),     K(NULL, "attention_bias"),
                                   K(NULL, "use_sliding_window"), K(NULL, "sliding_window"),
                                   K(NULL, "max_window_layers"),  K(NULL, "layer_types")};

static const nu_llm_tensor_spec ROSTER[] = {
    NU_LLM_R_EMBED,
    NU_LLM_R_OUT_NORM(0),
    NU_LLM_R_OUTPUT,
    NU_LLM_R_ATTN_NORM(0),
    NU_LLM_R_QKV_O,
    NU_LLM_R_QK_NORMS(0),
    NU_LLM_R_FFN_NORM,
    NU_LLM_R_GATE_UP_DOWN,
};

static const char *const IGNORED[] = {NU_LLM_IGNORED_INV_FREQ, NULL};

static nu_status read_hparams(const nu_llm_source *s, nu_llm_hparams *hp)
{
    return nu_llm__read_qwen(s, KNOWN, sizeof KNOWN / sizeof *KNOWN, "qwen3", true, hp);
}

static const char *const HF_NAMES[] = {"Qwen3ForCausalLM", NULL};

NU_LLM_ARCH_DEFINE(nu_llm__arch_qwen3, "qwen3");
