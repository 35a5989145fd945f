/* runner.h: running forward passes of a model over its weights and KV cache.
 * - Prefill: a slot's tokens in passes of at most `chunk` rows, each recorded into one command
 *   buffer and committed without waiting for the one before (the KV cache orders them); each
 *   pass's activations come from nu_buffer_new_gpu and are freed right after its commit, so that
 *   the next pass, recorded while it runs, reuses their memory in flight.
 * - Decode: one token a launch of a graph (nuvec/graph.h) recorded at open; the token id is data
 *   (a one-element I32 buffer the CPU writes), the position reaches the ops as graph parameters
 *   (rope's offset, the appends' position, attention's kv_length). Attention is recorded with the
 *   cache's length, so its split count suits the longest context. Where the graph cannot be built,
 *   decode records a command buffer per token (nu_llm__runner_note says why).
 * - Greedy decode: a ring of `depth` graphs of `unroll` passes each; each pass ends with the argmax
 *   of its logits into an id buffer the next pass's gather reads (the next graph's, for a graph's
 *   last pass), so no token needs the CPU. `depth` launches are in flight: the CPU waits for
 *   launch k, reads its ids (the CPU may read a buffer that queued work only reads) and queues
 *   launch k + depth on the graph launch k used. Built at the first greedy decode, not at open.
 *   Tokens past a stop run speculatively and are discarded; their keys go to rows past the slot's
 *   length (and past the cache's end the kernels write nothing), which later tokens overwrite.
 * A runner may run a share of the layers, [first, end) (a model split by layers over several
 * devices, model.c): the first share's passes start from the token embedding, the others' from the
 * hidden state the share before left; every share but the last ends its passes by leaving that
 * state (the residual stream x, and the last block's output where it is still to be added: blocks.h)
 * in a shared buffer of the kind of work (a prefill pass, the decode graph, a batched decode graph
 * of a bucket), which nu_llm__runner_hand_over copies into the next share's. Greedy decode and the
 * logits are the last share's; the model runs a split model's greedy decode token by token.
 * Thread safety: the model's (one thread at a time). */
#ifndef NU_LLM_RUNNER_H
#define NU_LLM_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "blocks.h"

#define NU_LLM_GREEDY_MAX_DEPTH 4
#define NU_LLM_GREEDY_MAX_UNROLL 8

typedef struct nu_llm_runner_options {
    uint32_t chunk;         /* prefill rows a pass */
    bool fusion;            /* the fused decode layer */
    bool prefill_f16;       /* prefill's product inputs and q in F16 (the matrix units' kernels) */
    bool by_commands;       /* decode records a command buffer a token instead of launching a graph */
    uint32_t greedy_depth;  /* 1 .. NU_LLM_GREEDY_MAX_DEPTH */
    uint32_t greedy_unroll; /* 1 .. NU_LLM_GREEDY_MAX_UNROLL */
    bool greedy_on_cpu;     /* greedy decode reads the logits back each token */
    uint32_t matvec_rows;   /* rows a matrix-vector product takes at a time; passes of no more: fused */
    uint32_t matmul_rows;   /* batched decode graphs of at least this many rows: the matrix products
                             * (0: chosen by the weights when the runner opens: runner.c) */
    uint32_t direct_rows;   /* prefill passes of at most this many rows read block weights on the
                             * matrix units as they are (0: NU_LLM_DIRECT_ROWS, and every pass for the
                             * dtypes nu_llm__weights_direct_dtype names; kept 0 in the runner) */
    bool fresh;             /* one-row passes: attention's fresh form (RoPE and the cache writes in
                             * its dispatch) */
    bool fresh_rows;        /* ... and batched decode steps (its per-row form) */
    bool copy_pair;         /* prefill's F16 weight copies: A_W16 of two matrices, each copy beside
                             * the product before it (else one matrix: only q, k, v and o) */
    bool post_fusion;       /* fused passes: post-norms in the block's last product */
    bool product_glu;       /* batched steps' stacked gate|up products apply the GLU themselves */
    bool ahead_on;          /* the one-row decode graphs read weights ahead as `ahead` says */
    nu_llm_prefetch ahead;
    uint32_t first, end;    /* the layers this runner runs: [first, end) (end 0: all) */
} nu_llm_runner_options;

/* The kinds of work whose hidden state one share of a split model hands to the next. */
typedef enum nu_llm_stage {
    NU_LLM_STAGE_PASS,   /* a prefill pass (and decode by command buffers) */
    NU_LLM_STAGE_DECODE, /* the one-sequence decode graph */
    NU_LLM_STAGE_BATCH,  /* a batched decode graph (the bucket of the rows) */
} nu_llm_stage;

typedef struct nu_llm_runner nu_llm_runner;

/* The runner over `w` and `kv` (which outlive it): the decode activations and, unless by_commands,
 * the decode graph. */
nu_status nu_llm__runner_new(nu_device *d, const nu_llm_arch *a, const nu_llm_hparams *hp, const nu_llm_weights *w,
                             nu_llm_kv *kv, const nu_llm_runner_options *o, nu_llm_runner **out);
/* Waits for the runner's GPU work and frees it. */
void nu_llm__runner_free(nu_llm_runner *r);

/* Why decode or greedy decode took a slower path ("" when neither did). */
const char *nu_llm__runner_note(const nu_llm_runner *r);
/* Whether the runner's products read block weights on the matrix units (prefill_f16 and a device
 * with VK_KHR_cooperative_matrix). */
bool nu_llm__runner_units(nu_device *d, const nu_llm_runner_options *o);
/* Whether a pass of `rows` rows whose products are matrix products copies block or repacked weights
 * to F16 first (A_W16), for weights with w's dtype flags (loaded, or nu_llm__weights_plan's): a
 * graph's never where the matrix units read them; a prefill pass's unless it has at most
 * direct_rows rows (0: NU_LLM_DIRECT_ROWS) or, direct_rows 0, every layer matrix of a block dtype
 * is one nu_llm__weights_direct_dtype names. */
bool nu_llm__runner_copies(const nu_llm_runner_options *o, const nu_llm_weights *w, bool units, uint32_t rows,
                           bool graph);
/* What a runner of these options would hold (*held: the decode activations, ids, logits) and what
 * a prefill pass takes at most (*pass), without device work; w16: the passes dequantize block or
 * repacked weights (an F16 copy of the largest matrix: nu_llm__runner_copies). */
void nu_llm__runner_sizes(const nu_llm_hparams *hp, const nu_llm_runner_options *o, bool w16, uint64_t *held,
                          uint64_t *pass);
/* The most rows a prefill pass takes (the options' chunk). */
uint32_t nu_llm__runner_chunk(const nu_llm_runner *r);
/* Device bytes the runner holds (activations, id and logits buffers; graphs' own memory aside). */
uint64_t nu_llm__runner_bytes(const nu_llm_runner *r);
/* Copies the hidden state of the last work of `kind` that `from` (the share before `to`) ran, of
 * `rows` rows, into `to`'s input for that kind (building to's batched decode graph for `rows` where
 * it has none yet), through the host. */
nu_status nu_llm__runner_hand_over(nu_llm_runner *from, nu_llm_runner *to, nu_llm_stage kind, uint32_t rows);
/* Device bytes a prefill pass's activations take at most (freed after each pass). */
uint64_t nu_llm__runner_pass_bytes(const nu_llm_runner *r);

/* Appends tokens[0 .. n) to slot `slot` and writes the logits of the last one (vocab floats) to
 * `logits` (may be NULL; NULL for a share other than the last). On failure the slot's length is as
 * before. Ids and room are the caller's to check; a share of a split model takes at most `chunk`
 * tokens a call (one pass, whose hidden state the next share takes). */
nu_status nu_llm__runner_prefill(nu_llm_runner *r, uint32_t slot, const int32_t *tokens, uint32_t n, float *logits);
/* A share of a split model's prefill, pipelined across the devices (model.c): commits one pass of
 * tokens[0 .. n) of slot `slot` (n <= chunk; its activations of `size` rows, size <= chunk) without
 * waiting for it, the slot's length advanced; at most one in flight. nu_llm__runner_pass_end waits
 * for it (NU_OK where none is in flight) and reads the logits of its last row (the last share;
 * `logits` may be NULL). After a failure of either, the caller sets the slot's length back. */
nu_status nu_llm__runner_pass_begin(nu_llm_runner *r, uint32_t slot, const int32_t *tokens, uint32_t n, uint32_t size);
nu_status nu_llm__runner_pass_end(nu_llm_runner *r, float *logits);
/* One token of slot 0 by the decode graph (or a one-row pass). */
nu_status nu_llm__runner_decode(nu_llm_runner *r, int32_t token, float *logits);
/* One token of slot 0 by the decode graph with the argmax of its logits (the lowest id of equal
 * largest ones) into *id, the logits left in device memory (a graph built at the first call; where
 * it cannot be, or greedy_on_cpu, the logits are read back and their argmax taken here): the last
 * share of a split model's greedy decode. */
nu_status nu_llm__runner_decode_argmax(nu_llm_runner *r, int32_t token, int32_t *id);
/* One decode row for each of n different slots (slots[i]; each at its length, with room), by the
 * batched decode graph of the smallest power of two >= n rows (built at first use; the rows past n
 * are padding that writes nothing): logits[i * vocab ..] (may be NULL) and the argmax ids[i] (may
 * be NULL) of each row. The slots' lengths grow by one. */
nu_status nu_llm__runner_batch_decode(nu_llm_runner *r, const int32_t *tokens, const uint32_t *slots, uint32_t n,
                                      float *logits, int32_t *ids);
/* Greedy decode of n different slots together for `steps` steps (nuvec_llm.h's
 * nu_llm_model_step_greedy; arguments checked, the slots with room for `steps` tokens): step 0
 * feeds tokens[i] to slots[i], each later step the ids of the step before; ids[s * n + i] is row
 * i's argmax after step s. The slots grow by `steps` tokens (the last step's ids are not
 * appended); on failure their lengths are as before. By a ring of batched decode graphs (the ids
 * stay on the GPU, a launch queued ahead; a runner that is not both the first and the last share
 * refuses: NU_ERROR_INVALID_ARGUMENT). */
nu_status nu_llm__runner_batch_greedy(nu_llm_runner *r, const int32_t *tokens, const uint32_t *slots, uint32_t n,
                                      uint32_t steps, int32_t *ids);
/* Greedy decode of slot 0 (nuvec_llm.h's nu_llm_model_decode_greedy; arguments checked). */
nu_status nu_llm__runner_greedy(nu_llm_runner *r, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                                int32_t stop_token, bool (*on_token)(void *user, int32_t id), void *user);

#endif
