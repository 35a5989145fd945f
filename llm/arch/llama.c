/* llama.c: the Llama architecture (Llama 1, 2 and 3; Mistral 7B, Nemo and Small, TinyLlama and
 * the other files llama.cpp's converter writes as "llama"): RMSNorm, RoPE on whole heads,
 * grouped-query attention, SwiGLU, tied or separate output embedding.
 * GGUF: general.architecture "llama", keys llama.*, q and k rows in llama.cpp's interleaved RoPE
 * order. Hugging Face: LlamaForCausalLM and MistralForCausalLM, q_proj and k_proj rows in
 * rotate_half order.
 * Mistral: llama.cpp's converter writes it as "llama" and drops its sliding window (v0.1's 4096;
 * later versions declare none), and llama.cpp applies none. nuvec applies the window a
 * MistralForCausalLM folder declares (sliding_window, as transformers does: the logits differ
 * from llama.cpp's past 4096 positions) and refuses a GGUF file's llama.attention.sliding_window
 * (no converter writes it). Nemo and Small 3's tekken pre-tokenizer is the tokenizer's.
 * A file is run only when every key and tensor in it that changes the arithmetic is one nuvec
 * implements: the keys below (and the shared ones, hparams.c) are read or known to change
 * nothing as nuvec runs the file (checked where a value matters: RoPE scaling of type none or
 * linear by 1); the refused ones are named with what they do; any other key of the architecture
 * is refused as unknown (llm/source/source.c), as is any tensor outside the roster
 * (llm/arch/arch.c). Optional keys take llama.cpp's defaults (src/llama-model.cpp, load_hparams)
 * or transformers' (LlamaConfig). */
#include <string.h>

#include "blocks.h"
#include "common.h"
#include "hparams.h"

#define FN "nu_llm_model_open"
#define K NU_LLM_KEY
#define TRY NU_LLM_TRY

/* The keys as macros: a static array's initializers must be constant expressions. */
#define ACT K(NULL, "hidden_act")
#define ATTN_BIAS K(NULL, "attention_bias")
#define MLP_BIAS K(NULL, "mlp_bias")
#define WINDOW_HF K(NULL, "sliding_window")

/* Keys read here (beside the shared ones). */
static const nu_llm_key KNOWN[] = {ACT, ATTN_BIAS, MLP_BIAS, WINDOW_HF};

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
static const char *const IGNORED[] = {NU_LLM_IGNORED_INV_FREQ, NULL};

/* config.json's value-checked keys: what nuvec runs (silu, no biases, whole-head RoPE); Mistral's
 * sliding window applied (every layer). */
static nu_status check_hf_values(const nu_llm_source *s, nu_llm_hparams *hp)
{
    bool mistral = !strcmp(nu_llm__source_arch(s), "MistralForCausalLM");
    TRY(nu_llm__hf_string_in(s, "hidden_act", "silu", "silu"));
    TRY(nu_llm__hf_false(s, "attention_bias", "biases"));
    TRY(nu_llm__hf_false(s, "mlp_bias", "biases"));
    TRY(nu_llm__hf_string_in(s, "model_type", mistral ? "mistral" : "llama", mistral ? "mistral" : "llama"));
    if (!nu_llm__meta_has(s, WINDOW_HF))
        return NU_OK;
    if (!mistral)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": sliding_window (sliding-window attention) is not supported "
                            "in a LlamaForCausalLM model (MistralForCausalLM's is)");
    TRY(nu_llm__meta_u32(s, WINDOW_HF, NULL, &hp->window));
    if (!hp->window)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": sliding_window 0");
    return nu_llm__read_swa_layers(s, 0, hp); /* pattern 0: every layer */
}

static nu_status read_hparams(const nu_llm_source *s, nu_llm_hparams *hp)
{
    bool gguf = nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF;
    TRY(nu_llm__arch_meta_check(s, KNOWN, sizeof KNOWN / sizeof *KNOWN, NULL, 0));
    /* transformers' LlamaConfig defaults 1e-6, llama.cpp's 1e-5 */
    TRY(nu_llm__read_base(s, 1e-6f, hp));
    if (!gguf)
        TRY(check_hf_values(s, hp));
    TRY(nu_llm__read_rope_scaling(s, hp));
    hp->rope_layout = gguf ? NU_ROPE_INTERLEAVED : NU_ROPE_HALF;
    return NU_OK;
}

static const char *const HF_NAMES[] = {"LlamaForCausalLM", "MistralForCausalLM", NULL};

NU_LLM_ARCH_DEFINE(nu_llm__arch_llama, "llama");
