/* llm_reference.h: a float64 CPU forward pass of a llama-architecture GGUF file, written
 * independently of libnuvec_llm from the architecture's definition (RMSNorm, interleaved RoPE,
 * grouped-query causal attention, SwiGLU, tied or separate output), for tests that check the
 * runtime's logits. It reads the file's bytes itself (nu_gguf_parse: no device) and takes F32
 * and F16 tensors. head_dim is llama.attention.key_length where present, else dim / heads; RoPE
 * theta llama.rope.freq_base (10000 when absent), positions divided by llama.rope.scaling.factor
 * (type linear), pair i's frequency divided by rope_freqs.weight[i] where the file has it. */
#ifndef TESTS_LLM_REFERENCE_H
#define TESTS_LLM_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct llm_ref llm_ref;

/* The model at `path`, or NULL (with the reason on stderr). */
llm_ref *llm_ref_open(const char *path);
void llm_ref_free(llm_ref *r);
uint32_t llm_ref_vocab(const llm_ref *r);

/* Appends tokens[0 .. n) at the model's position (its own KV cache), and writes the logits after
 * each token into logits[i * vocab ..] (logits may be NULL). */
void llm_ref_forward(llm_ref *r, const int32_t *tokens, size_t n, double *logits);
/* Forgets the cached tokens. */
void llm_ref_reset(llm_ref *r);

/* The largest |got[i] - want[i]| over n logits, and into *range (may be NULL) want's max - min. */
double llm_ref_max_diff(const double *want, const float *got, uint32_t n, double *range);

#endif
