/* runner_int.h: the runner's private state, shared only by runner.c (prefill, decode, greedy
 * decode, the shares of a split model) and runner_batch.c (batched decode's buckets): the runner
 * itself, its graph slots and the helpers both files call. Not seen outside the runner. */
#ifndef NU_LLM_RUNNER_INT_H
#define NU_LLM_RUNNER_INT_H

#include "runner.h"

#include "common.h" /* NU_LLM_TRY */

/* Greedy ring ids lie ID_STRIDE bytes apart (the largest storage buffer offset alignment Vulkan
 * allows), U of them in each of the depth ring buffers. */
#define ID_STRIDE 256
/* The graphs: decode's, decode's with the argmax of its logits (the last share of a split model's
 * greedy decode: built at its first use), then the greedy ring's. Parameter slots: decode's 0, the
 * argmax one's 1, pass u of greedy graph j 2 + j * NU_LLM_GREEDY_MAX_UNROLL + u. */
enum { G_DECODE, G_ARGMAX, G_GREEDY, G_COUNT = G_GREEDY + NU_LLM_GREEDY_MAX_DEPTH };
#define P_SLOTS (2 + NU_LLM_GREEDY_MAX_DEPTH * NU_LLM_GREEDY_MAX_UNROLL)

/* A batched decode graph of B rows (a power of two): each row its own slot and position, read from
 * shared I32 buffers the CPU writes before each launch; the logits of every row and their argmax
 * out. Rows past a step's count are padding: position -1 (out of range: they write nothing). */
#define MAX_BUCKETS 16
/* Batched greedy decode (nu_llm__runner_batch_greedy) runs a ring of BATCH_RING more graphs of the
 * bucket's rows, built at its first use: graph j reads its tokens from ring_ids[j - 1] (the ids the
 * ring's previous graph wrote) and its positions from ring_pos[j], writes the argmax ids into
 * ring_ids[j], and shares the bucket's activations, slots and logits; so that a launch is queued
 * while the one before it runs, and the CPU reads a step's ids while the next step runs. */
#define BATCH_RING 2
typedef struct nu_llm_bucket {
    uint32_t rows;
    nu_graph *graph;
    nu_buffer *act[NU_LLM_A_COUNT];
    nu_buffer *tokens, *positions, *slots, *logits, *ids;
    nu_buffer *stage_in, *stage_out; /* a share of a split model: the hidden state in and out */
    bool out_pending;                /* stage_out holds a pending output too (blocks.h) */
    nu_graph *ring[BATCH_RING];
    nu_buffer *ring_ids[BATCH_RING], *ring_pos[BATCH_RING];
} nu_llm_bucket;

struct nu_llm_runner {
    nu_device *dev;
    const nu_llm_arch *arch;
    const nu_llm_hparams *hp;
    const nu_llm_weights *w;
    nu_llm_kv *kv;
    nu_llm_runner_options o;
    uint32_t first, end;            /* the layers run: [first, end) */
    bool embeds, head;              /* the first share (from the token ids), the last (the logits) */
    /* A share of a split model: the hidden state in (all but the first) and out (all but the last)
     * of a prefill pass (chunk rows) and of the decode graph (one row): blocks.h's stage buffers. */
    nu_buffer *pass_in, *pass_out, *dec_in, *dec_out;
    bool pass_out_pending, dec_out_pending; /* those outs hold a pending output too (blocks.h) */
    nu_commands *in_flight;         /* a split model's prefill pass, between pass_begin and pass_end */
    bool units;                     /* the products read block weights on the matrix units: the device
                                     * has them and the products take F16 inputs (prefill_f16) */
    nu_buffer *act[NU_LLM_A_COUNT]; /* the decode graphs' activations */
    nu_buffer *ids, *logits, *gid;  /* a pass's ids (shared), the logits (shared), decode's id */
    nu_buffer *arg_id;              /* G_ARGMAX's argmax (shared) */
    bool argmax_by_cpu;             /* G_ARGMAX could not be built: its decode reads the logits */
    nu_buffer *glogits;             /* the greedy passes' logits (device memory: only their argmax
                                     * reads them; in host memory, on a discrete GPU, the output
                                     * product wrote vocab floats over the bus every token) */
    nu_buffer *ring[NU_LLM_GREEDY_MAX_DEPTH];
    nu_graph *graph[G_COUNT];
    nu_llm_layer_params *params;    /* [P_SLOTS][layers] */
    uint32_t depth;                 /* greedy ring graphs built (0: not yet) */
    bool greedy_by_cpu;
    uint64_t bytes;
    nu_llm_bucket buckets[MAX_BUCKETS]; /* [k]: 2^k rows, built at first use */
    char note[256];
};

#define TRY NU_LLM_TRY

/* NU_OK, or st with a failure message naming `what` and the device's last error. */
nu_status nu_llm__runner_nv(nu_llm_runner *r, nu_status st, const char *what);
/* The bytes of a stage buffer of `cap` rows (blocks.h: x and a pending output). */
uint64_t nu_llm__runner_stage_bytes(const nu_llm_hparams *hp, uint32_t cap);
/* Whether a pass of `rows` rows takes an F16 copy of block weights (A_W16), as linear_b decides:
 * only where it takes the matrix products (a decode graph of at least matmul_rows rows, a prefill
 * pass of more than a matrix-vector product's rows) and some product does not read its weights on
 * the matrix units as they are (a device without them, a format they do not read, a prefill pass
 * of more than direct_rows). */
bool nu_llm__runner_pass_w16(const nu_llm_runner *r, uint32_t rows, bool graph);
/* A_W16's size in a layer's largest matrices for a pass that copies block weights (w16): 1, or 2
 * with copy_pair; 0 for one that does not. */
uint32_t nu_llm__runner_w16_matrices(const nu_llm_runner_options *o, bool w16);
/* A pass over the runner's state; the caller sets the rows, slot, start and buffers. */
nu_llm_pass nu_llm__runner_make_pass(nu_llm_runner *r, nu_commands *c, uint32_t rows, uint32_t slot,
                                     uint32_t start);
/* Records the forward pass `p` over the runner's layers: from its token ids (the first share) or
 * the hidden state in stage_in (the others), to the logits out and, where next is not NULL, the
 * argmax of the logits into it (the last share) or to the hidden state in stage_out (the others);
 * the stage buffers hold `cap` rows. */
nu_status nu_llm__runner_record_forward(nu_llm_runner *r, nu_llm_pass *p, const nu_tensor *ids,
                                        const nu_tensor *logits, const nu_tensor *next, nu_buffer *stage_in,
                                        nu_buffer *stage_out, uint32_t cap, bool *out_pending);

/* runner_batch.c's. The bucket of n rows (2^k rows, the least such k) in *out, built where it is
 * not yet; NU_ERROR_INVALID_ARGUMENT past the largest. */
nu_status nu_llm__runner_bucket_of(nu_llm_runner *r, uint32_t n, nu_llm_bucket **out);
/* Waits for a bucket's graph, frees it and the bucket's buffers and zeroes the bucket (one never
 * built too). */
void nu_llm__runner_free_bucket(nu_llm_bucket *b);

#endif
