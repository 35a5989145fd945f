/* llm_reference.h: a float64 CPU forward pass of a GGUF file of the architectures nuvec runs
 * (llama, qwen2, qwen3, gemma2, gemma3, phi3), written independently of libnuvec_llm from each
 * architecture's definition (llama.cpp's src/models/<arch>.cpp, transformers' modeling files), for
 * tests that check the runtime's logits. It reads the file's bytes itself (nu_gguf_parse: no
 * device) and takes F32 and F16 tensors.
 * All: RMSNorm, RoPE, grouped-query causal attention, a gated FFN, tied or separate output; head_dim
 * <arch>.attention.key_length where present, else dim / heads; RoPE theta <arch>.rope.freq_base
 * (10000 when absent), positions divided by <arch>.rope.scaling.factor (type linear), pair i's
 * frequency divided by rope_freqs.weight[i] where the file has it.
 * llama: interleaved RoPE, SwiGLU. The others: NEOX RoPE (pairs i, i + head_dim / 2).
 * qwen2: q, k and v biases. qwen3: per-head RMSNorms of q and k before RoPE.
 * gemma2: the embedding times sqrt(dim); RMSNorms after the attention and after the FFN (before
 *   the residual adds); GeGLU (GELU tanh); scores scaled by 1 / sqrt(head_dim) and softcapped
 *   (attn_logit_softcapping, 50), logits softcapped (final_logit_softcapping, 30); even layers see
 *   the last attention.sliding_window positions (4096).
 * gemma3: gemma2's layer with q and k norms, no attention softcap, a final softcap only where the
 *   file has one; layers l with l % 6 < 5 slide (where the file has a window) and turn by base
 *   rope.freq_base_swa (10000), unscaled; the others by rope.freq_base and its linear scaling.
 * phi3: q|k|v and gate|up fused matrices; LongRoPE: rope_factors_long.weight where the context
 *   (llm_ref_set_positions) exceeds rope.scaling.original_context_length, else
 *   rope_factors_short.weight, and cos and sin times rope.scaling.attn_factor; every layer slides
 *   where attention.sliding_window is set. */
#ifndef TESTS_LLM_REFERENCE_H
#define TESTS_LLM_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct llm_ref llm_ref;

/* The model at `path`, or NULL (with the reason on stderr). */
llm_ref *llm_ref_open(const char *path);
void llm_ref_free(llm_ref *r);
uint32_t llm_ref_vocab(const llm_ref *r);
/* The context the model runs with (the runtime's KV cache positions; default the file's
 * context_length): LongRoPE chooses its factors by it. */
void llm_ref_set_positions(llm_ref *r, uint32_t positions);

/* Appends tokens[0 .. n) at the model's position (its own KV cache), and writes the logits after
 * each token into logits[i * vocab ..] (logits may be NULL). */
void llm_ref_forward(llm_ref *r, const int32_t *tokens, size_t n, double *logits);
/* Forgets the cached tokens. */
void llm_ref_reset(llm_ref *r);

/* The largest |got[i] - want[i]| over n logits, and into *range (may be NULL) want's max - min. */
double llm_ref_max_diff(const double *want, const float *got, uint32_t n, double *range);

#endif
