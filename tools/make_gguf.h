/* make_gguf.h: random-weight GGUF files of named shapes and architectures (`nuvec make-gguf`: llama,
 * qwen2, qwen3, gemma2, gemma3, phi3, with the keys and tensor names llama.cpp's converter writes;
 * the tests write the tiny shapes with it). */
#ifndef TOOLS_MAKE_GGUF_H
#define TOOLS_MAKE_GGUF_H

#include <stdint.h>

#include "nuvec.h"
#include "quantize_mix.h"

typedef struct make_gguf_shape {
    const char *name;       /* "tiny", "llama-7b", "llama-8b", "qwen2.5-7b", "gemma2-tiny", ... */
    uint32_t dim, layers, heads, kv_heads, ffn, vocab, context;
    float rope_theta;
    uint32_t head_dim;      /* 0: dim / heads; otherwise written as <arch>.attention.key_length and
                             * value_length (as Mistral Nemo's files have: head_dim 128, dim / heads 160) */
    const char *arch;       /* general.architecture: NULL is "llama"; qwen2, qwen3, gemma2, gemma3, phi3 */
    uint32_t window;        /* gemma2, gemma3, phi3: attention.sliding_window (0: none) */
    float rope_linear;      /* linear RoPE scaling (rope.scaling.type linear); 0: none */
    bool untied;            /* an output.weight of its own (else tied to the embedding); llama always has one */
} make_gguf_shape;

typedef struct make_gguf_options {
    const make_gguf_shape *shape;
    nu_dtype dtype;         /* of the matrices: F16, Q8_0, Q4_0 (also BF16, F32); norms are F32 */
    const quant_preset *mix; /* instead of dtype (NULL: dtype): each matrix of the type llama-quantize's
                              * preset gives it (quantize_mix.h), from values rounded to F16 first: the
                              * file `nuvec quantize --type <preset>` makes of this shape's F16 file */
    const char *path;
    uint64_t seed;
    uint32_t layers;        /* 0: the shape's */
    uint32_t threads;       /* generating; 0: one a CPU (at most 16). The file does not depend on it. */
    nu_progress_fn progress; /* after each tensor; may be NULL */
    void *user;
} make_gguf_options;

/* The shape named `name`, or NULL. */
const make_gguf_shape *make_gguf_find_shape(const char *name);
/* The shape named `name` of architecture `arch` ("llama" for the llama shapes): "<arch>-<name>"
 * where there is one (qwen2 and "tiny": "qwen2-tiny"), else `name` if it is of that architecture;
 * NULL otherwise. */
const make_gguf_shape *make_gguf_find_arch_shape(const char *arch, const char *name);
/* The architecture's name of a shape ("llama" for NULL). */
const char *make_gguf_arch(const make_gguf_shape *shape);
/* Writes the file (see make_gguf.c); *data_bytes receives the data section's size. */
nu_status make_gguf(const make_gguf_options *options, uint64_t *data_bytes);

#endif
