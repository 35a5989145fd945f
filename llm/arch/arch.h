/* arch.h: an architecture, as the model runtime sees it. Each architecture is one file under
 * llm/arch/ (llama.c first) that says, once for GGUF files and Hugging Face folders:
 * - which files it is (GGUF general.architecture, config.json "architectures"),
 * - its hyperparameters (read_hparams: the keys it reads, those it knows change nothing, and those
 *   it refuses by name, through nu_llm__meta_check),
 * - its tensor roster (each weight's role, both names, its shape in hyperparameters, whether it is
 *   per layer or optional), and
 * - its layer, written once from the shared blocks (llm/blocks.h), which choose the fused paths.
 * Nothing here knows a file format or a device buffer. */
#ifndef NU_LLM_ARCH_H
#define NU_LLM_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "nuvec.h"
#include "nuvec_llm.h"
#include "source/source.h"

/* A weight's role: what the blocks take. Global roles first, then per-layer ones. */
typedef enum nu_llm_role {
    NU_LLM_W_EMBED,     /* [vocab, dim] */
    NU_LLM_W_OUT_NORM,  /* [dim] */
    NU_LLM_W_OUTPUT,    /* [vocab, dim]; absent: tied to the embedding */
    NU_LLM_W_ROPE_FREQS, /* [head_dim / 2] F32: each RoPE pair's frequency divisor (Llama 3.1's
                          * rope_freqs.weight; or made from config.json's rope_scaling) */
    NU_LLM_W_ROPE_LONG,  /* [head_dim / 2] F32: LongRoPE's divisors past the original context (Phi-3) */
    NU_LLM_W_ROPE_SHORT, /* [head_dim / 2] F32: LongRoPE's divisors within it */
    NU_LLM_W_GLOBAL_COUNT,
    NU_LLM_W_ATTN_NORM = NU_LLM_W_GLOBAL_COUNT, /* [dim] */
    NU_LLM_W_Q,         /* [heads * head_dim, dim] */
    NU_LLM_W_K,         /* [kv_heads * head_dim, dim] */
    NU_LLM_W_V,         /* [kv_heads * head_dim, dim] */
    NU_LLM_W_Q_BIAS,    /* [heads * head_dim] (Qwen2) */
    NU_LLM_W_K_BIAS,    /* [kv_heads * head_dim] */
    NU_LLM_W_V_BIAS,    /* [kv_heads * head_dim] */
    NU_LLM_W_QKV,       /* [(heads + 2 kv_heads) * head_dim, dim]: q, k and v fused (Phi-3); the
                         * weights make Q, K and V its row slices */
    NU_LLM_W_Q_NORM,    /* [head_dim]: RMSNorm of each q head before RoPE (Qwen3, Gemma 3) */
    NU_LLM_W_K_NORM,    /* [head_dim] */
    NU_LLM_W_O,         /* [dim, heads * head_dim] */
    NU_LLM_W_ATTN_POST_NORM, /* [dim]: RMSNorm of the attention's output before its residual add (Gemma 2, 3) */
    NU_LLM_W_FFN_NORM,  /* [dim] */
    NU_LLM_W_GATE,      /* [ffn, dim] */
    NU_LLM_W_UP,        /* [ffn, dim] */
    NU_LLM_W_GATE_UP,   /* [2 ffn, dim]: gate then up fused (Phi-3); the weights make GATE and UP
                         * its row halves */
    NU_LLM_W_DOWN,      /* [dim, ffn] */
    NU_LLM_W_FFN_POST_NORM, /* [dim]: RMSNorm of the FFN's output before its residual add */
    NU_LLM_W_ROLE_COUNT
} nu_llm_role;

/* A shape's dimension, in hyperparameters. */
typedef enum nu_llm_dim {
    NU_LLM_DIM_NONE,  /* a vector: the shape is [rows] */
    NU_LLM_DIM_MODEL, /* dim */
    NU_LLM_DIM_Q,     /* heads * head_dim */
    NU_LLM_DIM_KV,    /* kv_heads * head_dim */
    NU_LLM_DIM_QKV,   /* (heads + 2 kv_heads) * head_dim */
    NU_LLM_DIM_FFN,   /* ffn */
    NU_LLM_DIM_FFN2,  /* 2 ffn */
    NU_LLM_DIM_VOCAB, /* vocab */
    NU_LLM_DIM_HEAD,  /* head_dim */
    NU_LLM_DIM_HALF_HEAD, /* head_dim / 2 */
} nu_llm_dim;

#define NU_LLM_T_OPTIONAL 1u /* the file may lack it */
#define NU_LLM_T_MATRIX 2u   /* a matrix the products read: block dtypes allowed, converted or repacked */
#define NU_LLM_T_NORM 4u     /* a norm's weight: hp.norm_offset is added to it at load */

/* A roster entry: names with %u for the layer where it is per layer. */
typedef struct nu_llm_tensor_spec {
    nu_llm_role role;
    const char *gguf, *hf;
    nu_llm_dim rows, cols;
    uint32_t flags;
} nu_llm_tensor_spec;

/* The most layers an architecture with per-layer attention kinds (sliding-window layers) takes. */
#define NU_LLM_MAX_LAYERS 512

/* The hyperparameters the blocks and the runtime need; cfg is what nuvec_llm.h shows. Zero fields
 * are the plain Llama arithmetic, so an architecture sets only what it changes. */
typedef struct nu_llm_hparams {
    nu_llm_config cfg;
    nu_rope_layout rope_layout; /* how the file's q and k rows pair the rotated elements */
    float rope_linear;          /* positions divided by it (linear RoPE scaling); 0 or 1: none */
    float rope_attn_factor;     /* RoPE's cos and sin multiplied by it (LongRoPE's); 0: 1 */
    /* Frequency divisors made from the metadata (config.json's llama3 rope_scaling), for the
     * weights to put on the device as NU_LLM_W_ROPE_FREQS where the file has no such tensor. */
    bool rope_factors_made;
    float rope_factors[128];
    /* LongRoPE (Phi-3): the long divisors (NU_LLM_W_ROPE_LONG) serve a cache of more positions
     * than the original context, the short ones (NU_LLM_W_ROPE_SHORT) the others, as llama.cpp
     * chooses them; from config.json they are made here (longrope_made). */
    bool longrope;
    uint32_t rope_original_context;
    bool longrope_made;
    float rope_long[128], rope_short[128];
    float attn_scale;           /* q . k multiplied by it; 0: 1 / sqrt(head_dim) */
    float attn_softcap;         /* attention logit softcap (Gemma 2's 50); 0: none */
    float final_softcap;        /* output logit softcap (Gemma 2's 30); 0: none */
    float embed_scale;          /* the token embedding multiplied by it (Gemma's sqrt(dim)); 0: none */
    nu_glu_activation act;      /* the FFN's GLU: SiLU (SwiGLU) or GELU tanh (GeGLU) */
    float norm_offset;          /* added to every norm weight at load (Gemma's Hugging Face files
                                 * store w for x * (1 + w); GGUF's converter added the 1) */
    /* Sliding-window layers: swa[l] marks layer l; they attend to the last `window` positions and
     * turn by their own RoPE base and linear factor (Gemma 3's local layers: 10000, unscaled). */
    uint32_t window;
    float swa_theta, swa_linear;
    bool swa[NU_LLM_MAX_LAYERS];
} nu_llm_hparams;

typedef struct nu_llm_pass nu_llm_pass;       /* llm/blocks.h */
typedef struct nu_llm_layer_w nu_llm_layer_w; /* llm/weights.h */

typedef struct nu_llm_arch {
    const char *name;             /* "llama" */
    const char *gguf_name;        /* GGUF's general.architecture */
    const char *const *hf_names;  /* config.json's architectures it takes, NULL-terminated */
    const nu_llm_tensor_spec *roster;
    uint32_t roster_count;
    /* Tensors a file may hold that change nothing (transformers' non-persistent buffers), as name
     * suffixes after the layer prefix; NULL-terminated. */
    const char *const *ignored;
    /* Reads and checks the hyperparameters; NU_ERROR_FORMAT / NU_ERROR_UNSUPPORTED naming a key. */
    nu_status (*read_hparams)(const nu_llm_source *s, nu_llm_hparams *out);
    /* Records layer `layer` of a pass from the blocks. */
    nu_status (*layer)(nu_llm_pass *p, const nu_llm_layer_w *w, uint32_t layer);
} nu_llm_arch;

/* The architecture of the source (by its format's name), or NULL with the message of the refusal
 * (the architecture named, and the ones nuvec runs). */
const nu_llm_arch *nu_llm__arch_find(const nu_llm_source *s);

/* Every tensor of the source is in the architecture's roster (for layers below `layers`) or
 * ignored by it; any other is refused by name (with its kind where it is a known one: a bias, a
 * norm, RoPE factors, experts), before any weight moves. */
nu_status nu_llm__arch_check_tensors(const nu_llm_arch *a, const nu_llm_source *s, uint32_t layers);

/* The architectures. */
extern const nu_llm_arch nu_llm__arch_llama, nu_llm__arch_qwen2, nu_llm__arch_qwen3, nu_llm__arch_gemma2,
    nu_llm__arch_gemma3, nu_llm__arch_phi3;

#endif
