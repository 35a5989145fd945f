/* nuvec_llm.h: the model runtime (Llama and the decoders below), a component on top of nuvec's public API (libnuvec_llm).
 *
 * Conventions are nuvec's (nuvec/status.h): calls that can fail return an nu_status and clear
 * their out-parameters on failure; the message of the last failure of an nu_llm_ call on the
 * calling thread is nu_llm_error_message(). Free calls accept NULL.
 *
 * Sections: errors; tokenizer (nuvec_llm/tokenizer.h); sampler; model. Chat templates:
 * nuvec_llm/chat.h (included here). */
#ifndef NUVEC_LLM_H
#define NUVEC_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec/device.h"
#include "nuvec/dtype.h"
#include "nuvec/status.h"
#include "nuvec_llm/tokenizer.h"
#include "nuvec_llm/chat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ------------------------------------------------------------------------------ */

/* The message of the last failed nu_llm_ call on this thread, or "" if none failed. Valid
 * until the next nu_llm_ call on this thread. */
const char *nu_llm_error_message(void);

/* ---- Tokenizer: nuvec_llm/tokenizer.h (included above) ---- */

/* ---- Sampler ------------------------------------------------------------------------------
 * Picks the next token from a step's logits. Order: temperature 0 is greedy (the largest logit,
 * the lowest id on ties); otherwise logits are divided by the temperature, top-k keeps the k
 * largest (ties at the k-th kept by lower id), softmax (in double, max subtracted), top-p keeps
 * the smallest prefix of those sorted by probability whose mass reaches top_p (at least one
 * token; the mass is that of the top-k survivors), and a token is drawn from what is left,
 * renormalised, with the sampler's own PRNG (xoshiro256**, seeded through splitmix64). The same
 * seed and logits give the same tokens; across platforms the PRNG's stream is the same, and the
 * tokens too wherever the C library's exp() rounds alike.
 * Thread safety: a sampler holds the PRNG state: one thread at a time. */

/* Zero means default except where noted. */
typedef struct nu_llm_sampler_params {
    float temperature; /* 0: greedy (default); > 0: sample; finite, at most 1e6 */
    uint32_t top_k;    /* 0: off (default), else keep the k most likely */
    float top_p;       /* 0 or 1: off (default); else in (0, 1): nucleus sampling */
    uint64_t seed;     /* the PRNG's seed (0 is a seed like any other) */
} nu_llm_sampler_params;

typedef struct nu_llm_sampler nu_llm_sampler;

/* A sampler; params NULL means all defaults (greedy). NU_ERROR_INVALID_ARGUMENT for a NULL out,
 * a negative, NaN, infinite or too large temperature, a top_p outside [0, 1] or NaN;
 * NU_ERROR_HOST_OUT_OF_MEMORY. */
nu_status nu_llm_sampler_new(const nu_llm_sampler_params *params, nu_llm_sampler **out);
void nu_llm_sampler_free(nu_llm_sampler *sampler);
/* Restarts the PRNG from `seed`. */
void nu_llm_sampler_reseed(nu_llm_sampler *sampler, uint64_t seed);

/* Picks a token id in [0, vocab) from logits[0 .. vocab). NU_ERROR_INVALID_ARGUMENT for NULL
 * pointers, vocab 0 or above INT32_MAX, a NaN logit (named by index), or no finite logit (all
 * -inf, or +inf: +inf logits are refused); NU_ERROR_HOST_OUT_OF_MEMORY. -inf logits (masked
 * tokens) are fine and never picked while a finite one exists. *token is -1 on failure. */
nu_status nu_llm_sample(nu_llm_sampler *sampler, const float *logits, uint32_t vocab,
                        int32_t *token);


/* ---- Model --------------------------------------------------------------------------------
 * A decoder-only transformer on a nuvec device, of one of the architectures in llm/arch/ (each
 * file says what it reads and refuses): llama (Llama 2 and 3, Mistral: RMSNorm, RoPE, SwiGLU,
 * grouped-query attention, tied or separate output embedding), qwen2 (q, k and v biases), qwen3
 * (per-head q and k norms), gemma2 (scaled embedding, sandwich norms, GeGLU, attention and final
 * logit softcaps, sliding-window attention on alternate layers), gemma3 (q and k norms, sliding
 * windows on five layers of six with their own RoPE base) and phi3 (fused q|k|v and gate|up,
 * LongRoPE). Opened from a Hugging Face folder (config.json with architectures
 * ["LlamaForCausalLM"], ["MistralForCausalLM"], ["Qwen2ForCausalLM"], ["Qwen3ForCausalLM"],
 * ["Gemma2ForCausalLM"], ["Gemma3ForCausalLM"] or ["Phi3ForCausalLM"], and *.safetensors; F32,
 * F16 or BF16 weights) or a GGUF file (a path ending in .gguf: general.architecture llama, qwen2,
 * qwen3, gemma2, gemma3 or phi3; F32, F16, BF16 or the block formats the products read; its
 * vocabulary as the tokenizer); variants of these families that they lack (mixture-of-experts,
 * vision towers, YaRN RoPE scaling) are refused by name. The weights go to the
 * device once (nu_safetensors_to_device, nu_gguf_to_device), the KV cache
 * ([max_positions, kv_heads, head_dim] a layer, K and V) and the activations are allocated once.
 * The model keeps a position: prefill and decode append tokens at it (their keys and values go
 * to the cache) and return the logits of the last token appended.
 * Prefill records the whole forward pass of up to `prefill_chunk` tokens into one command buffer
 * (matrix products, prefill attention); decode launches one graph (nuvec/graph.h), recorded at
 * open, per token, with the position and token id as launch inputs (see model.c for how); greedy
 * decode (nu_llm_model_decode_greedy) keeps the token ids on the GPU and queues tokens ahead.
 * Thread safety: a model is used by one thread at a time. */

/* The architecture's numbers, as read from the model's file. */
typedef struct nu_llm_config {
    uint32_t dim;            /* hidden_size */
    uint32_t ffn;            /* intermediate_size */
    uint32_t layers;         /* num_hidden_layers */
    uint32_t heads;          /* num_attention_heads */
    uint32_t kv_heads;       /* num_key_value_heads (heads when absent) */
    uint32_t head_dim;       /* dim / heads (or head_dim) */
    uint32_t vocab;          /* vocab_size */
    uint32_t max_positions;  /* max_position_embeddings */
    float rms_eps;           /* rms_norm_eps */
    float rope_theta;        /* rope_theta (10000 when absent) */
    bool tied_embeddings;    /* tie_word_embeddings: the output matrix is the token embedding */
    int32_t bos, eos;        /* bos_token_id, eos_token_id (NU_LLM_NO_TOKEN when absent) */
} nu_llm_config;

/* Zero means default. */
typedef struct nu_llm_model_options {
    uint32_t max_positions;  /* the KV cache's positions (0: the model's max_positions; at most it) */
    nu_dtype kv_dtype;       /* NU_DTYPE_F32 (0 is read as F32 too), NU_DTYPE_F16 or NU_DTYPE_BF16 */
    bool weights_f16;        /* store the float matrices as F16 on the device (converted once, at
                              * open); norms stay as in the file */
    uint32_t prefill_chunk;  /* tokens a prefill command buffer takes at most (0: 512: the matrix
                              * products of a 7B model fill an H200 from 512 rows) */
    bool decode_by_commands; /* decode records a command buffer each token instead of the graph
                              * (the prefill path with one token: tests compare the two) */
    int prefill_f16;         /* prefill's matrix-product inputs and attention's q rounded to F16:
                              * 0 on devices with cooperative matrices, whose kernels take F16 (the
                              * matrix units), 1 always, -1 never (F32 like decode) */
    int repack_q4_0;         /* a layer's Q4_0 matrices (and a Q4_0 output matrix) repacked once at
                              * open into NU_DTYPE_Q4_0_SOA, which the matrix-vector products read
                              * with coalesced loads (nuvec/dtype.h); prefill dequantizes them to
                              * F16 before each product. 0 (default) and 1: where every row's
                              * length is a multiple of 256; -1 never. The repacked matrices take
                              * the place of the file's: its bytes go through staging a layer at a
                              * time, freed after */
    int repack_q6_k;         /* Q6_K matrices (all but the token embedding) repacked once at open
                              * into NU_DTYPE_Q6_K_SOA, whose super-blocks the products read with
                              * 16-byte-aligned loads (nuvec/dtype.h), as repack_q4_0 does. 0
                              * (default) and 1: where every row's length is a multiple of 256 and
                              * the matrix holds whole groups of 8 super-blocks; -1 never */
    int fusion;              /* 0 (default) and 1: decode passes run the fused layer (norms, residual
                              * adds and SwiGLU inside the matrix-vector products: 5 dependency
                              * levels a layer of one-sequence decode with fresh_attention); -1: the
                              * separate ops (for comparisons) */
    int fresh_attention;     /* 0 (default): one sequence's decode row turns q and its new key and
                              * writes the KV cache inside attention's dispatch (nu_attention_desc's
                              * fresh form: one dependency level fewer a layer); 1: a batched
                              * decode step's rows too (its per-row form: slower on an H100 in
                              * 2026-12, bench/RESULTS.md); -1: RoPE and the cache writes as ops of
                              * their own before attention everywhere (for comparisons) */
    int copy_pair;           /* 0 (default) and -1: prefill's F16 copies of block weights (passes of more
                              * than direct_rows rows) in one of a layer's largest matrices, the
                              * FFN's copies each after the product before it; 1: in two, every
                              * copy beside the product before it (H100: qwen2.5-7b Q4_K_M's
                              * 512-token prompt 4.8% faster; a 7B pass 86 MiB larger) */
    int post_norm_fusion;    /* 0 (default) and 1: a fused pass's block ending in a post-norm (Gemma's
                              * sandwich norms) adds it into x in its last product's dispatch
                              * (nu_matvec_desc.post_norm, where that product's kernel takes it: one
                              * dependency level fewer a block); -1: left for the next norm */
    int product_glu;         /* 0 (default) and 1: a batched decode step's stacked gate|up product
                              * (matrix products: matmul_rows rows or more) applies the GLU in its
                              * own last dispatch (nu_matmul_desc.glu_stacked: one dispatch and one
                              * dependency level fewer a layer); -1: the GLU as an op of its own */
    int stack_weights;       /* 0 (default) and 1: q, k, v (and gate, up) that the file stores back to
                              * back run as one product where a path takes it; -1: never */
    uint32_t greedy_depth;   /* greedy decode's launches in flight (0: 2; 1 to 4) */
    uint32_t greedy_unroll;  /* greedy decode's tokens a launch (0: 4; 1 to 8) */
    bool greedy_on_cpu;      /* greedy decode token by token with the logits read back (comparisons) */
    uint64_t max_memory;     /* refuse to open (NU_ERROR_OUT_OF_MEMORY, before any weight moves, with
                              * what the model needs) a model whose weights, KV cache, activations
                              * and two prefill passes need more device bytes than this (0: no cap
                              * but the device's own budget where VK_EXT_memory_budget reports it) */
    bool measure_peaks;      /* prefill and decode reset the device's peak statistic
                              * (nu_memory_reset_peak) before they run and record it after, for
                              * nu_llm_model_memory (the device's peak is then the model's to set) */
    bool keep_load_cache;    /* leave the memory that converting weights used in nuvec's cache (by
                              * default open releases the device's cache after converting) */
    uint32_t matvec_rows;    /* rows (a step's sequences) a decode matrix-vector product takes at a
                              * time (0: 8, NU_MATVEC_MAX_ROWS; 1 to 8): a step of more rows runs
                              * the fused layer a group at a time, each group reading the weights */
    uint32_t matmul_rows;    /* batched decode steps of at least this many rows take the matrix
                              * products instead (0: by the weights: 16 where Q4_K or Q6_K matrices
                              * meet matrix units, which read them as they are, else 64; 2 to
                              * 32768; H200, 7B Q4_0, 64 rows: 2258 tokens/s against 1540 a group
                              * of rows at a time; 7B Q4_K_M, 16 rows: 855.7 against 631.7) */
    uint32_t direct_rows;    /* prefill passes (prefill_chunk tokens at most) of at most this many
                              * tokens read block weights on the matrix units as they are; longer ones
                              * dequantize each matrix to F16 first (0: 64, and every pass for
                              * repacked Q4_0 (Q4_0_SOA) and Q4_K, which the matrix units read faster
                              * as they are: a model with no other block dtype in its layers makes no
                              * F16 copies; H100, 512 tokens: 7B Q4_0 13,274 tokens/s against 11,163
                              * with the copies, qwen2.5-7b Q4_K_M 10,781 against 10,576, Q6_K still
                              * copied; 1 to 32768: that many rows for every block dtype) */
    int embed_in_host;       /* the token embedding's place: 0 (default) in host memory where shared
                              * buffers are host memory (a discrete GPU: nu_device_memory_choice's
                              * shared_device_local false), as llama.cpp keeps its input layer; a
                              * step's work reads its rows over the bus, and the device holds less by
                              * the embedding (7B: 70 MiB; Llama 3 8B: 282 MiB); 1: in a shared buffer
                              * wherever shared buffers live; -1: device memory. An embedding the
                              * output is tied to, or one converted at open (weights_f16), stays in
                              * device memory */
    int prefetch;            /* one-sequence decode reads the next products' weights into the device's
                              * cache beside the ops that leave the memory idle (nu_op_prefetch):
                              * 0 (default): off; 1: on; -1: off (on the H200 it lost 6-14% of 7B
                              * decode with every plan tried: bench/RESULTS.md) */
    uint32_t slots;          /* sequences the KV cache holds at once (0: 1; at most 32768): slot 0 is
                              * the model's own, the others are handed out by nu_llm_model_seq_acquire
                              * for nu_llm_model_step; each costs max_positions positions of cache */
} nu_llm_model_options;

typedef struct nu_llm_model nu_llm_model;

/* Opens the model at `path` (a Hugging Face folder, or a .gguf file) on `device`. NU_ERROR_IO (no such folder, no
 * config.json or safetensors), NU_ERROR_FORMAT (malformed JSON, a missing or bad key, a missing
 * tensor or one of the wrong shape or dtype), NU_ERROR_UNSUPPORTED (an architecture other than
 * those above, named; a key or tensor that changes the arithmetic in a way nuvec does not
 * implement, named; a head_dim the attention kernels do not take: not a multiple of 8 from 8 to
 * 256), NU_ERROR_INVALID_ARGUMENT
 * (NULL pointers, bad options), or a nuvec error (device memory); nu_llm_error_message() says
 * which. */
nu_status nu_llm_model_open(nu_device *device, const char *path, const nu_llm_model_options *options,
                            nu_llm_model **out);

/* The most devices a model may be split over. */
#define NU_LLM_MAX_DEVICES 16

/* Opens the model split by layers over devices[0 .. count) (1 to NU_LLM_MAX_DEVICES, any vendors,
 * the same physical device more than once too): each device holds a contiguous range of layers
 * with their weights and KV cache, in the order given; the first also holds the token embedding,
 * the last the output norm and matrix. Layers are shared in proportion to weights[0 .. count)
 * (positive and finite), or, where weights is NULL, to each device's free memory (what the
 * driver's budget leaves of the heap private buffers use; that heap's size where the driver does
 * not report a budget); every device gets at least one layer. Each step's hidden state goes from
 * one device to the next through the host (shared buffers: x and, in prefill, the last block's
 * output still to add), so a split model gives the logits and ids of the same model on one device
 * exactly. Every call below works on a split model; greedy decode then goes token by token (the
 * last device's argmax on the GPU, its id read back). max_memory caps each device. Errors as nu_llm_model_open's, and
 * NU_ERROR_INVALID_ARGUMENT for a bad count or weight, or more devices than the model has layers. */
nu_status nu_llm_model_open_split(nu_device *const *devices, uint32_t count, const double *weights, const char *path,
                                  const nu_llm_model_options *options, nu_llm_model **out);
/* The devices a model runs on (1 unless split). */
uint32_t nu_llm_model_devices(const nu_llm_model *model);
/* Device `index`'s share of the layers, [*first, *end), and the device (either out may be NULL).
 * NU_ERROR_INVALID_ARGUMENT for a NULL model or an index past nu_llm_model_devices. */
nu_status nu_llm_model_device_layers(const nu_llm_model *model, uint32_t index, nu_device **device, uint32_t *first,
                                     uint32_t *end);
/* Waits for the model's GPU work and frees it (NULL is ignored). */
void nu_llm_model_free(nu_llm_model *model);
const nu_llm_config *nu_llm_model_config(const nu_llm_model *model); /* NULL for NULL */
/* The model's tokenizer (a GGUF file's tokenizer.ggml.* vocabulary, a Hugging Face folder's
 * tokenizer.json: what nu_llm_tokenizer_open reads from the same path), owned by the model; NULL
 * when there is none, and then nu_llm_model_tokenizer_note says why. */
const nu_llm_tokenizer *nu_llm_model_tokenizer(const nu_llm_model *model);
const char *nu_llm_model_tokenizer_note(const nu_llm_model *model); /* "" with a tokenizer */
/* Why decode or greedy decode runs a slower path than asked ("" when neither does): the decode
 * graph or greedy decode's graphs could not be built (the message says why), so decode records a
 * command buffer a token, or greedy decode reads the logits back each token; or that greedy decode
 * goes token by token on a model split over devices. */
const char *nu_llm_model_note(const nu_llm_model *model);
/* What the model holds in device memory, and what its work took (bytes); a split model's, summed
 * over its devices. */
typedef struct nu_llm_memory {
    uint64_t weights;       /* the weights in device memory, each once, in the layout the kernels read */
    uint64_t weights_in_host; /* the weights in host memory (the token embedding: embed_in_host); not
                             * in weights, total or need */
    uint64_t kv_cache;      /* K and V of every layer (and sequence slot) */
    uint64_t activations;   /* the decode graphs' activations, the ids, the logits */
    uint64_t total;         /* weights + kv_cache + activations: what the open model holds */
    uint64_t prefill_pass;  /* a prefill pass's activations at most: taken for each pass and freed
                             * after it (two passes may overlap: the next is recorded while one runs) */
    uint64_t need;          /* what open checked against the cap: total + 2 prefill passes */
    uint64_t open_peak;     /* the device's active bytes at their highest while the model opened,
                             * above what was active before (weights' conversion staging included) */
    uint64_t prefill_peak;  /* with measure_peaks: the device's peak active bytes during the last
                             * prefill (0 before one, or without measure_peaks) */
    uint64_t decode_peak;   /* likewise for the last decode or greedy decode */
    uint64_t device_active; /* nu_memory_stats' active and reserved bytes of the device now */
    uint64_t device_reserved;
    uint64_t heap_budget;   /* nu_device_memory_budget of the heap private buffers use (0 where the
                             * driver does not report it) and the process's usage of it */
    uint64_t heap_usage;
} nu_llm_memory;
/* NU_ERROR_INVALID_ARGUMENT for NULL pointers (*out cleared). */
nu_status nu_llm_model_memory(const nu_llm_model *model, nu_llm_memory *out);

/* Tokens in the cache: the position the next token goes to. */
uint32_t nu_llm_model_position(const nu_llm_model *model);
/* Forgets the cached tokens (position 0); the cache's bytes are overwritten as tokens come. */
void nu_llm_model_reset(nu_llm_model *model);

/* Appends tokens[0 .. n) (n >= 1) at the position, in chunks of prefill_chunk, and writes the
 * logits of the last one (vocab floats) to `logits` (may be NULL). NU_ERROR_INVALID_ARGUMENT for
 * an id outside [0, vocab) or NULL pointers, NU_ERROR_OUT_OF_RANGE when the cache would overflow
 * (nothing is appended then). */
nu_status nu_llm_model_prefill(nu_llm_model *model, const int32_t *tokens, size_t n, float *logits);
/* Appends one token by the decode graph; logits as nu_llm_model_prefill's. */
nu_status nu_llm_model_decode(nu_llm_model *model, int32_t token, float *logits);

/* Greedy decode of up to n tokens: feeds `token` at the position, and each token produced (the
 * largest logit, the lowest id on ties, as nu_llm_sample at temperature 0, except that a NaN
 * logit is picked rather than refused) is the next one fed, into out[0 .. *produced). It stops
 * after n tokens, after producing stop_token (kept in out; NU_LLM_NO_TOKEN: none; e.g. the
 * config's eos), or after on_token (may be NULL; called with each token in order as it arrives,
 * stop_token included) returns false. Afterwards the position is as if `token` and every
 * produced token but the last had been appended by nu_llm_model_decode (position + *produced),
 * so nu_llm_model_decode(out[*produced - 1]) continues. No logits are given.
 * With the decode graph, the argmax runs on the GPU and feeds the next pass, and launches are
 * queued ahead: NUVEC_LLM_GREEDY_DEPTH launches in flight (1 to 4, default 2) of
 * NUVEC_LLM_GREEDY_UNROLL tokens each (1 to 8, default 4); up to depth * unroll tokens past a stop
 * run and are discarded (out[*produced .. n) may be written). Without it (decode_by_commands, or
 * where the greedy graphs cannot be built) it is decode and a CPU argmax token by token. n = 0
 * does nothing.
 * Errors: NU_ERROR_INVALID_ARGUMENT (NULL model or produced, NULL out with n > 0, token outside
 * [0, vocab)), NU_ERROR_OUT_OF_RANGE when n tokens from the position would overflow the cache
 * (nothing runs), nuvec errors from the GPU; *produced is 0 on failure, and the position then
 * counts the tokens on_token was given (those are in out). */
nu_status nu_llm_model_decode_greedy(nu_llm_model *model, int32_t token, uint32_t n, int32_t *out,
                                     uint32_t *produced, int32_t stop_token,
                                     bool (*on_token)(void *user, int32_t id), void *user);

/* ---- Sequences and batches -----------------------------------------------------------------
 * A batch of sequences as the unit of work: the KV cache has `slots` sequence slots (options);
 * slot 0 is the model's own sequence, held from open (nu_llm_model_prefill, decode, decode_greedy,
 * position and reset act on it), and nu_llm_model_seq_acquire hands out the others (slot 0 too
 * once released). A step appends one or more tokens to each of several slots in one go: slots with
 * several tokens in the step run as prefill passes, the slots with one token together as one
 * batched decode: one launch of a graph recorded for that many rows (the next power of two),
 * whose rows read their slot and position from buffers, so sequences join and leave between
 * steps with nothing recorded again. Each slot remembers the tokens it holds, so a new sequence
 * can take over the free slot whose tokens share the longest prefix with its own (prefix reuse). */

/* A free slot for a new sequence: with prefix (n tokens; may be NULL with n 0), the free slot
 * whose cached tokens share the longest prefix with it (ties: the lowest slot), kept to that
 * prefix: *reused (may be NULL) of the prefix's tokens are in the cache already (append the rest).
 * NU_ERROR_BUSY when every slot is in use; NU_ERROR_INVALID_ARGUMENT for NULL pointers. */
nu_status nu_llm_model_seq_acquire(nu_llm_model *model, const int32_t *prefix, uint32_t n, uint32_t *slot,
                                   uint32_t *reused);
/* Frees a slot (its tokens stay for prefix reuse). NU_ERROR_INVALID_ARGUMENT for a slot not held. */
nu_status nu_llm_model_seq_release(nu_llm_model *model, uint32_t slot);
/* Keeps the first `length` tokens of a held slot (a chat's earlier turns; 0 empties it).
 * NU_ERROR_INVALID_ARGUMENT for a slot not held or a length past its own. */
nu_status nu_llm_model_seq_truncate(nu_llm_model *model, uint32_t slot, uint32_t length);
/* A held slot's tokens: its length (0 for a slot not held), and where tokens is not NULL, a
 * pointer to them, valid until the next call on the model. */
uint32_t nu_llm_model_seq_length(const nu_llm_model *model, uint32_t slot, const int32_t **tokens);
/* The KV cache's slots (options.slots, or 1). */
uint32_t nu_llm_model_slots(const nu_llm_model *model);

/* What a step gives for a row. */
typedef enum nu_llm_output {
    NU_LLM_OUTPUT_NONE,   /* nothing (a prompt's tokens before its last) */
    NU_LLM_OUTPUT_LOGITS, /* the row's logits (vocab floats) */
    NU_LLM_OUTPUT_ARGMAX, /* the id of the row's largest logit (the lowest of equal ones) */
} nu_llm_output;

typedef struct nu_llm_row {
    int32_t token;
    uint32_t slot;        /* a held slot */
    nu_llm_output output; /* only the last row of its slot in a step may ask for one */
} nu_llm_row;

/* Appends rows[i].token to slot rows[i].slot for every row (a slot's rows in order, at its length
 * and on), and writes the outputs asked for in row order: the rows with LOGITS one after the
 * other into logits (vocab floats each), the rows with ARGMAX into ids. Rows of a slot with
 * several rows in the step run as prefill passes; the slots with one row run together as one
 * batched decode (a graph of the next power of two rows, built at its first use). NU_ERROR_
 * INVALID_ARGUMENT (n 0, NULL pointers where outputs are asked, a slot not held, an id outside
 * [0, vocab), an output on a row that is not its slot's last), NU_ERROR_OUT_OF_RANGE (a slot's
 * rows would overflow its positions; nothing runs), nuvec errors from the GPU (the slots then hold
 * what the work that completed appended: check their lengths). */
nu_status nu_llm_model_step(nu_llm_model *model, const nu_llm_row *rows, uint32_t n, float *logits, int32_t *ids);

/* Greedy decode of several sequences together, `steps` batched decode steps: step 0 appends
 * rows[i].token to slot rows[i].slot (one row a slot; rows[i].output is not read), and each later
 * step appends the ids of the step before; ids[s * n + i] is row i's argmax after step s (the
 * lowest id of equal largest logits, as ARGMAX in nu_llm_model_step). Afterwards each slot holds
 * its token and the ids of steps 0 .. steps - 2, as if nu_llm_model_step had been called `steps`
 * times with ARGMAX rows; the last step's ids are produced, not appended (feed them next). It does
 * not stop early: a caller that wants to stop at an end of generation truncates the slot
 * (nu_llm_model_seq_truncate). On a model on one device the ids stay on the GPU between steps and
 * the next step's launch is queued while a step runs (a ring of two batched decode graphs of the
 * rows' bucket, built at the first call: two more graphs, sharing the bucket's activations); a
 * split model goes step by step. Errors: NU_ERROR_INVALID_ARGUMENT (NULL pointers, n or steps 0, a
 * slot not held or given twice, an id outside [0, vocab)), NU_ERROR_OUT_OF_RANGE (`steps` tokens
 * would overflow a slot's positions; nothing runs), nuvec errors from the GPU (the slots' lengths
 * are then as before the call). */
nu_status nu_llm_model_step_greedy(nu_llm_model *model, const nu_llm_row *rows, uint32_t n, uint32_t steps,
                                   int32_t *ids);

#ifdef __cplusplus
}
#endif
#endif
