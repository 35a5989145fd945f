/* weights.h: a model's weights on the device, each once, in the layout the kernels read. The
 * architecture's roster names them; each tensor of the file is checked (shape, dtype) and then:
 * - kept as the file has it: moved to the device by DMA in one pass, in the roster's order so
 *   that a layer's q, k, v and its gate, up lie back to back (stacked: one product in decode);
 * - or converted: float matrices to F16 (weights_f16), a layer's Q4_0 matrices repacked to
 *   Q4_0_SOA (coalesced decode loads), Q6_K matrices to Q6_K_SOA (aligned loads). Their file bytes go to the device once, into staging that
 *   the conversion reads and that is freed after it, a layer at a time (so staging holds about one
 *   layer's matrices); the converted tensors of a layer share one buffer in roster order, stacked.
 * - or a norm's weight with the architecture's offset added (hp.norm_offset: Gemma's Hugging Face
 *   files), converted to F32 the same way.
 * A fused q|k|v matrix (NU_LLM_W_QKV) and a fused gate|up one (NU_LLM_W_GATE_UP) are kept whole and
 * their row slices serve as Q, K, V and GATE, UP. RoPE divisors the architecture made from the
 * metadata (Llama 3's, LongRoPE's) are uploaded as their roles' tensors.
 * After loading, the memory the staging used is released from nuvec's cache (unless asked to keep
 * it), so what stays is the weights' own bytes (`bytes`). */
#ifndef NU_LLM_WEIGHTS_H
#define NU_LLM_WEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "arch/arch.h"

/* One layer's tensors by role (roles below NU_LLM_W_GLOBAL_COUNT unused), and the stacked views. */
struct nu_llm_layer_w {
    nu_tensor w[NU_LLM_W_ROLE_COUNT];
    bool has[NU_LLM_W_ROLE_COUNT];
    nu_tensor qkv, gate_up; /* q|k|v and gate|up rows as one matrix where they lie back to back (or
                             * the file's fused matrix, whose row slices Q, K, V, GATE and UP are) */
    bool qkv_stacked, gate_up_stacked;
    nu_tensor qkv_bias;     /* q|k|v biases as one vector where they lie back to back */
    bool qkv_bias_stacked;
};

typedef struct nu_llm_weights_options {
    bool f16;          /* float matrices as F16 (norms stay as in the file) */
    bool repack_q4_0;  /* a layer's Q4_0 matrices (and a Q4_0 output) as Q4_0_SOA where every row is a
                        * multiple of 256 elements */
    bool repack_q6_k;  /* Q6_K matrices but the token embedding as Q6_K_SOA where every row is a
                        * multiple of 256 elements and the matrix whole groups of 8 super-blocks */
    bool stack;        /* q|k|v and gate|up views where they lie back to back */
    bool keep_cache;   /* leave the staging's memory in nuvec's cache */
    bool embed_shared; /* the token embedding, where it is moved as the file has it and the output is
                        * not tied to it, in a shared buffer the CPU copies it into (host memory on a
                        * discrete GPU: the model's embed_in_host) */
    uint32_t first, end; /* the layers loaded: [first, end) (a device's share of a model split by
                          * layers; end 0: all), with the embedding where first is 0 and the output
                          * norm and matrix where end is the last layer's (the embedding too where
                          * the output is tied to it) */
} nu_llm_weights_options;

typedef struct nu_llm_weights {
    nu_tensor global[NU_LLM_W_GLOBAL_COUNT];
    bool has_global[NU_LLM_W_GLOBAL_COUNT];
    nu_llm_layer_w *layers;
    uint32_t layer_count;
    nu_buffer **buffers;   /* owned */
    uint32_t buffer_count, buffer_cap;
    uint64_t bytes;        /* bytes of the weights (shared_bytes of them in a shared buffer) */
    uint64_t shared_bytes; /* the embedding's with embed_shared */
    bool repacked;         /* some matrices are Q4_0_SOA (which only the matrix units' product reads:
                            * elsewhere prefill takes an F16 copy; every product reads Q6_K_SOA) */
    bool blocks;           /* some matrices are of a block dtype (Q8_0, Q4_0, ...) */
    bool k_formats;        /* some matrices are Q4_K or Q6_K (the K formats the matrix units read) */
    bool blocks_copied;    /* some matrices are of a block dtype the matrix-unit product does not read
                            * itself (not Q8_0, Q4_0, Q4_0_SOA, Q4_K, Q6_K or Q6_K_SOA): products of many rows
                            * take an F16 copy of them (NU_LLM_A_W16) */
    bool layers_other_blocks; /* some layer matrices are of a block dtype (as loaded) that
                               * nu_llm__weights_direct_dtype does not name: without them prefill's
                               * passes need no F16 copies (runner.c) */
} nu_llm_weights;

/* The block dtypes that prefill's products read as they are in passes of any size, where the
 * runner's direct_rows is left to the weights: on the matrix units they are faster so than a copy
 * to F16 and an F16 product (Q4_0_SOA; Q4_K, its runs 16-byte loads: matmul_coopmat's VEC). The
 * others are copied in passes of more than NU_LLM_DIRECT_ROWS rows (blocks.h). */
bool nu_llm__weights_direct_dtype(nu_dtype dtype);

/* Loads the roster's tensors of `s` for `hp` onto the device. NU_ERROR_FORMAT (a missing tensor, a
 * wrong shape), NU_ERROR_UNSUPPORTED (a dtype the ops do not take), device errors; messages name
 * the tensor. On failure nothing is left allocated. */
nu_status nu_llm__weights_load(nu_device *d, nu_llm_source *s, const nu_llm_arch *a, const nu_llm_hparams *hp,
                               const nu_llm_weights_options *o, nu_llm_weights *out);
void nu_llm__weights_free(nu_llm_weights *w);

/* What loading would give, without device work (the memory cap checks it before anything moves):
 * the weights' bytes (*shared_bytes of them in a shared buffer), and in *dtypes the dtype flags
 * loading would set (repacked, blocks, k_formats, blocks_copied, layers_other_blocks; the rest
 * zero). Failures as nu_llm__weights_load's checks. */
nu_status nu_llm__weights_plan(const nu_llm_source *s, const nu_llm_arch *a, const nu_llm_hparams *hp,
                               const nu_llm_weights_options *o, uint64_t *bytes, uint64_t *shared_bytes,
                               nu_llm_weights *dtypes);

/* A short name of a role ("q", "ffn_norm", ...) for messages. */
const char *nu_llm__role_name(nu_llm_role r);

#endif
