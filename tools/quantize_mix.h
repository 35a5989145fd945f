/* quantize_mix.h: which type each tensor of a Llama model gets in `nuvec quantize` (tools/quantize.c):
 * llama-quantize's file types (its --type names) and its per-tensor mixes, as llama.cpp's
 * src/llama-quant.cpp (llama_tensor_get_type and llama_tensor_get_type_impl) chooses them for a
 * Llama-architecture file without an importance matrix.
 *
 * The rules, in the order they apply:
 *   - Only tensors whose name ends in "weight", that are not norms (_norm.weight) or expert
 *     routers (ffn_gate_inp) and that have 2 or more dims (ignoring outer dims of 1) change type;
 *     the others keep theirs (the 1-D norms: F32).
 *   - --token-embedding-type / --output-tensor-type set token_embd / output.weight outright.
 *   - F16, BF16 and F32 file types give every such tensor that type; the quantized ones start
 *     from their base type and, unless --pure:
 *       output.weight (and token_embd when there is no output.weight: the embeddings are tied):
 *         Q8_0 when its rows are not a multiple of the base type's block, else Q6_K (Q8_0 stays);
 *       attn_v (attn_qkv, attn_kv_b): Q6_K for Q4_K_M and Q5_K_M on "more bits" layers (the
 *         first and last eighth of them and every third in between), Q5_K on the first four for
 *         Q4_K_S, Q5_K for IQ4_NL and IQ4_XS when 4 or more query heads share a KV head; 70B
 *         models (80 layers, grouped KV heads) take Q5_K where the mix says Q4_K;
 *       ffn_down: Q6_K on "more bits" layers for Q4_K_M and Q5_K_M, Q5_K on the first eighth of
 *         the layers for Q4_K_S, IQ4_NL and IQ4_XS.
 *   - Then the fallback where rows are not a multiple of the type's block: Q4_K -> Q5_0,
 *     Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, and F16 where even that does not fit.
 * Layers are counted in llama-quantize's order (quant_compare_names): attn_v tensors by their
 * index among the file's attn_v tensors, ffn_down ones against llama.block_count. */
#ifndef TOOLS_QUANTIZE_MIX_H
#define TOOLS_QUANTIZE_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec.h"

typedef struct quant_preset {
    const char *name;      /* nuvec's spelling, "q4_k_m" (llama-quantize's is the same in capitals) */
    uint32_t file_type;    /* general.file_type: llama.cpp's LLAMA_FTYPE_* number */
    nu_dtype base;         /* the type most tensors get */
    const char *about;
} quant_preset;

/* The preset called `name` (any case; llama-quantize's aliases q4_k = q4_k_m, q5_k = q5_k_m), or NULL. */
const quant_preset *quant_find_preset(const char *name);
/* Preset i in the usage's order, NULL past the last. */
const quant_preset *quant_preset_at(size_t i);
/* A tensor type by its ggml name ("q4_k", "Q6_K", "f16", ...; the dtypes nu_quantize writes),
 * NU_DTYPE_COUNT when unknown. */
nu_dtype quant_find_type(const char *name);

typedef struct quant_model {
    uint32_t layers;       /* llama.block_count */
    uint32_t heads, kv_heads;
    uint32_t attn_v_count; /* attn_v-like tensors in the file */
    bool tied;             /* no output.weight */
} quant_model;

typedef struct quant_options {
    const quant_preset *preset;
    nu_dtype output_type;    /* --output-tensor-type; NU_DTYPE_COUNT: the mix's */
    nu_dtype embedding_type; /* --token-embedding-type; likewise */
    bool pure;               /* --pure: no mix (the fallback still applies) */
} quant_options;

/* The counters llama-quantize keeps while it walks the tensors (start zeroed). */
typedef struct quant_walk {
    uint32_t attn_v, ffn_down;
} quant_walk;

/* The type for tensor `name` of shape `shape` (nuvec order, rank 1..4) now of type `current`,
 * visited in llama-quantize's order (walk counts). *note receives why, when the type is not the
 * preset's base ("fallback: 172 columns", "Q6_K: output"...; "" otherwise). NU_ERROR_INVALID_ARGUMENT,
 * naming the tensor, when a type set outright does not fit its rows. */
nu_status quant_choose(const quant_options *o, const quant_model *m, quant_walk *walk, const char *name, uint32_t rank,
                       const uint64_t *shape, nu_dtype current, nu_dtype *out, char *note, size_t note_size);

/* Whether `name` is of the attn_v kind (attn_v, attn_qkv, attn_kv_b), for quant_model.attn_v_count. */
bool quant_is_attn_v(const char *name);
/* llama-quantize's order of tensors: by the N of "blk.N." (others first), then by name. */
int quant_compare_names(const char *a, const char *b);

#endif
