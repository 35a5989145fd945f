/* source.h: where a model's weights and numbers come from (llm/model.c's one view of a file
 * format). A source is opened on a device, fills in the config, and hands out each weight as a
 * nu_tensor on the device by its role (nu_llm_weight) and layer, so that model.c never sees a
 * format's tensor names or layout. llm/hf.c is the Hugging Face folder (config.json +
 * *.safetensors), llm/gguf.c a GGUF file (names blk.N.attn_q.weight ..., NU_ROPE_INTERLEAVED, block
 * dtypes). */
#ifndef NU_LLM_SOURCE_H
#define NU_LLM_SOURCE_H

#include "nuvec.h"
#include "nuvec_llm.h"

typedef enum nu_llm_weight {
    NU_LLM_W_EMBED,     /* [vocab, dim] */
    NU_LLM_W_ATTN_NORM, /* [dim], per layer */
    NU_LLM_W_Q,         /* [heads * head_dim, dim], per layer */
    NU_LLM_W_K,         /* [kv_heads * head_dim, dim], per layer */
    NU_LLM_W_V,         /* [kv_heads * head_dim, dim], per layer */
    NU_LLM_W_O,         /* [dim, heads * head_dim], per layer */
    NU_LLM_W_FFN_NORM,  /* [dim], per layer */
    NU_LLM_W_GATE,      /* [ffn, dim], per layer */
    NU_LLM_W_UP,        /* [ffn, dim], per layer */
    NU_LLM_W_DOWN,      /* [dim, ffn], per layer */
    NU_LLM_W_OUT_NORM,  /* [dim] */
    NU_LLM_W_OUTPUT,    /* [vocab, dim]; absent when the embeddings are tied */
    NU_LLM_W_COUNT
} nu_llm_weight;

typedef struct nu_llm_source nu_llm_source;
struct nu_llm_source {
    nu_llm_config config;
    nu_rope_layout rope_layout; /* how the file's q and k rows pair the rotated elements */
    /* The file's tokenizer (owned by the source), or NULL with the reason in tokenizer_note. */
    nu_llm_tokenizer *tokenizer;
    char tokenizer_note[256];
    /* The weight `w` of layer `layer` (ignored for the global ones) as a view of device memory
     * that stays valid until close; NU_ERROR_FORMAT (with nu_llm__fail's message) when the file
     * lacks it. Shapes are checked by the caller. */
    nu_status (*weight)(nu_llm_source *s, nu_llm_weight w, uint32_t layer, nu_tensor *out);
    /* Frees the source and the device memory of its weights (after their GPU work). */
    void (*close)(nu_llm_source *s);
};

/* A Hugging Face folder (llm/hf.c): NU_ERROR_IO, NU_ERROR_FORMAT, NU_ERROR_UNSUPPORTED as
 * nu_llm_model_open documents. */
nu_status nu_llm__hf_open(nu_device *device, const char *path, nu_llm_source **out);

/* A GGUF file (llm/gguf.c): general.architecture "llama"; errors likewise. */
nu_status nu_llm__gguf_open(nu_device *device, const char *path, nu_llm_source **out);

/* A short name of a weight's role ("q", "ffn_norm", ..) for messages. */
const char *nu_llm__weight_name(nu_llm_weight w);

#endif
