/* blocks.h: the pieces a decoder layer is built from, shared by every architecture (llm/arch/):
 * the attention half (norm, q/k/v products, RoPE and the KV cache writes, attention, the
 * output product and its residual add) and the feed-forward half (norm, gate/up products, the
 * GLU, the down product and its residual add), plus the embedding lookup and the logits. A pass
 * (nu_llm_pass) is one forward pass being recorded, of `rows` rows; the blocks choose its path:
 * - rows <= NU_MATVEC_MAX_ROWS (decode) with fusion on: the fused layer, each RMSNorm done by the
 *   product that reads it, the residual adds by the products that end each half, the SwiGLU by
 *   the gate-up product (nu_op_matvec_fused). One row of one sequence (the decode graph; `fresh`,
 *   on by default) is 5 dependency levels: attention's fresh form normalises q's and k's heads
 *   (Qwen3, Gemma 3), turns q and the new key and writes the cache in its own dispatch, and the
 *   last of its splits merges them:
 *     qkv = norm(x) Wqkv^T | att = attention(rope(q), K[pos] = rope(k), V[pos] = v) |
 *     x += att Wo^T | h = silu(norm(x) Wg^T) * (norm(x) Wu^T) | x += h Wd^T
 *   Gemma's post-norms ride on each block's last product (nu_matvec_desc.post_norm) where its
 *   kernel takes them (post_fusion), else the block's output is left pending (below).
 *   A batched decode step's rows (a slot each) may take the fresh per-row form (fresh_attention 1). Other
 *   passes of few rows (short prefill chunks; `fresh` off) rotate the keys on their way into the
 *   cache (nu_op_rope, nu_op_kv_append_rope or nu_op_kv_write: a level) and merge attention's
 *   splits in a second dispatch: 7 levels. On the H200 the fusion took 7B Q4_0 decode from 347 to
 *   418 tokens/s and F16 from 194 to 203; on an H100 the fresh form with the merge in the last
 *   split took 7B Q5_K_M from 298.2 to 308.5 (bench/RESULTS.md).
 * - more rows (prefill): matrix products (nu_op_matmul; inputs in F16 for the matrix units where
 *   f16_inputs), the residual add fused with the next RMSNorm (nu_op_add_rms_norm): a block leaves
 *   its output to add in `tmp` (pending) and the next norm adds it.
 * Where the rows go in the KV cache: one slot's consecutive positions from `start` (prefill chunks
 * and the single-sequence decode graph, through the ops' scalar forms and graph parameters), or
 * each row its own slot and position (per_row: I32 tensors the ops read, so a recorded graph
 * serves any mix of sequences: batched decode; attention then takes its decode path, each row on
 * its own, and with fresh_attention 1 its fresh per-row form: each row's RoPE and cache writes
 * in its dispatch, as the one-sequence graph's row has them). */
#ifndef NU_LLM_BLOCKS_H
#define NU_LLM_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "arch/arch.h"
#include "kv_cache.h"
#include "weights.h"

/* A pass's activation buffers. */
enum {
    NU_LLM_A_X,      /* [rows, dim] the residual stream */
    NU_LLM_A_XN,     /* [rows, dim] normalised */
    NU_LLM_A_Q,      /* [rows, heads * head_dim] */
    NU_LLM_A_K,      /* [rows, kv_heads * head_dim] */
    NU_LLM_A_V,
    NU_LLM_A_ATT,    /* [rows, heads * head_dim] */
    NU_LLM_A_TMP,    /* [rows, dim] a block's output to add */
    NU_LLM_A_GATE,   /* [rows, ffn] */
    NU_LLM_A_UP,
    NU_LLM_A_QKV,    /* [qkv_rows, (heads + 2 kv_heads) * head_dim]: stacked products' output */
    NU_LLM_A_GU,     /* [gu_rows, 2 ffn] */
    NU_LLM_A_H16,    /* [rows, max(dim, q, ffn)] F16 inputs of the products */
    NU_LLM_A_Q16,    /* [rows, q] F16 */
    NU_LLM_A_W16,    /* one or two of the largest matrix as F16 (block weights dequantized before a
                      * product; those that fit half of it into each half in turn) */
    NU_LLM_A_COUNT
};

/* The graph parameters of a layer (scalar forms), as nu_op_graph_param numbered them; q_pos only
 * where `windowed` (a sliding-window layer's attention needs its row's position). */
typedef struct nu_llm_layer_params {
    uint32_t q_rope, k_pos, v_pos, kv_len, q_pos;
    bool windowed;
    bool fresh;               /* attention's fresh form: kv_len is the layer's only parameter */
} nu_llm_layer_params;

/* Reading a decode step's weights ahead (nu_op_prefetch): the levels of the fused one-row layer
 * where the memory idles (RoPE and the cache writes, attention over a short context) can load the
 * next products' weights into the device's cache, which those products then read from. A plan
 * says, for each product read ahead, in which op's level (the level of the op named: a
 * nu_llm_at) and how many of its first bytes (0: all; gate and up take half each). */
typedef enum nu_llm_at {
    NU_LLM_AT_NONE,   /* not read ahead */
    NU_LLM_AT_ROPE,   /* beside RoPE and the KV-cache writes */
    NU_LLM_AT_ATTN,   /* beside attention */
    NU_LLM_AT_O,      /* beside the output product */
    NU_LLM_AT_GU,     /* beside the gate-up product */
    NU_LLM_AT_DOWN,   /* beside the down product */
    NU_LLM_AT_COUNT
} nu_llm_at;
typedef enum nu_llm_ahead {
    NU_LLM_AHEAD_O,        /* the layer's output product */
    NU_LLM_AHEAD_GU,       /* its gate and up */
    NU_LLM_AHEAD_DOWN,     /* its down */
    NU_LLM_AHEAD_QKV_NEXT, /* the next layer's q|k|v (the first layer's: not read ahead) */
    NU_LLM_AHEAD_COUNT
} nu_llm_ahead;
typedef struct nu_llm_prefetch {
    uint8_t at[NU_LLM_AHEAD_COUNT];     /* nu_llm_at */
    uint64_t bytes[NU_LLM_AHEAD_COUNT]; /* 0: all */
} nu_llm_prefetch;

struct nu_llm_pass {
    nu_commands *c;
    const nu_llm_hparams *hp;
    const nu_llm_kv *kv;
    nu_buffer *act[NU_LLM_A_COUNT];
    uint32_t rows;
    uint32_t slot, start;     /* the rows' slot and the first row's position */
    bool graph;               /* recording a graph: positions are launch parameters */
    uint32_t max_kv;          /* graph: the most keys a launch attends to (attention's split count) */
    nu_llm_layer_params *params; /* graph: one a layer, filled as the ops are recorded */
    uint32_t matvec_rows;     /* rows a matrix-vector product takes at a time */
    uint32_t matmul_rows;     /* decode graphs of at least this many rows take the matrix products */
    uint32_t direct_rows;     /* prefill passes of at most this many rows read block weights as they are */
    bool direct_by_dtype;     /* ...and every pass those of nu_llm__weights_direct_dtype (direct_rows
                               * left to the weights) */
    bool fused;               /* the fused layer (fusion on; rows <= matvec_rows, or a decode graph
                               * of fewer than matmul_rows rows) */
    bool f16_inputs;          /* products' inputs and attention's q in F16 (the matrix units' kernels) */
    bool w16;                 /* block and Q4_0_SOA weights dequantized to F16 before each product */
    uint32_t w16_turn;        /* copies into A_W16's halves so far (they alternate) */
    bool matrix_units;        /* the device has VK_KHR_cooperative_matrix and the products take F16
                               * inputs (prefill_f16): a decode graph's products read Q8_0, Q4_0,
                               * Q4_0_SOA, Q4_K and Q6_K weights as they are (linear_b) */
    bool fresh;               /* attention's fresh form for a one-row pass of the scalar form, and
                               * for a per-row pass of distinct_slots */
    bool post_fusion;         /* a fused pass's post-norms ride on the block's last product where
                               * its kernel takes them (nu_matvec_desc.post_norm) */
    bool product_glu;         /* a stacked gate|up matrix product gates its own output (glu_stacked) */
    bool pending;             /* tmp holds a block's output not yet added to x */
    const nu_tensor *pending_norm; /* ... and not yet normalised by this post-norm (Gemma's sandwich
                                    * norms: the next norm does both, nu_op_norm_add_rms_norm) */
    const nu_tensor *rope_freqs; /* RoPE's frequency divisors (NU_LLM_W_ROPE_FREQS, or LongRoPE's
                                  * long or short ones), or NULL */
    bool per_row;             /* rows' slots and positions from `slots` and `positions` (I32 [rows]) */
    bool distinct_slots;      /* per_row: no two rows in range share a slot (a batched decode step,
                               * one row a sequence), so attention may take its fresh per-row form
                               * (rows of one sequence in a pass must see each other's keys, which
                               * its rows do not) */
    nu_tensor positions, slots;
    const nu_llm_prefetch *ahead; /* a one-row fused graph's weights read ahead, or NULL */
    const nu_llm_layer_w *next_layer; /* the layer after the one being recorded (NULL after the last) */
};

/* The default of the runner's direct_rows: prefill passes of at most this many rows read block
 * weights (Q8_0, Q4_0, Q4_0_SOA, Q4_K, Q6_K) on the matrix units as they are, as a decode graph's
 * products do, instead of dequantizing each matrix to F16 first (A_W16): at these rows the copy
 * costs more than the product it feeds (H200, 7B Q4_0, 16-row passes: 33 us to copy a 4096 x 4096
 * matrix and 80 us an 11008 x 4096 one, beside 13-36 us for the products: bench/RESULTS.md, ninth
 * session). */
#define NU_LLM_DIRECT_ROWS 64u
/* ...except where direct_rows is left to the weights (0): then the dtypes nu_llm__weights_direct_dtype
 * names are read as they are in every pass (a model with no other block dtype in its layers has no
 * A_W16 at all). The 512-row products read Q4_0_SOA faster than copy + F16 (H100, `nuvec bench ops
 * --filter 512x4096`: 88.95 against 100.92 us at 4096 columns, 286.41 against 309.00 at 11008);
 * 7B Q4_0 prompts: 512 tokens 11,076 / 11,163 -> 13,274 / 13,200 tokens/s, 2048 tokens 10,388 ->
 * 12,196. Q4_K (16-byte loads: 102.3 against 103.5 us at 4096 columns, 322.9 against 308.6 at 11008)
 * gains on the copy it saves beside the products: qwen2.5-7b Q4_K_M 512 tokens 10,367 / 10,576 ->
 * 10,744 / 10,781, llama-7b Q4_K_M 11,175 / 11,101 -> 11,357 / 11,282; Q6_K_SOA read so lost 6%
 * (all read as they are: 10,055 / 10,107). bench/RESULTS.md, twenty-sixth session. */

/* The sizes of the activation buffers for passes of `rows` rows (sizes[NU_LLM_A_COUNT], bytes).
 * qkv_rows: the rows of A_QKV, which only a pass taking q, k and v as one product writes (the
 * fused layer, a graph's rows: stacked_products in blocks.c); 0 where no pass does (prefill passes
 * of more rows than a matrix-vector product takes): A_QKV is then a 4-byte placeholder. gu_rows:
 * the rows of A_GU, [gate | up] as one product (0: one row, a graph's one row). w16_matrices:
 * A_W16's size in a layer's largest matrices (0: a placeholder; 2: copy_pair). */
void nu_llm__act_sizes(const nu_llm_hparams *hp, uint32_t rows, uint32_t qkv_rows, uint32_t gu_rows,
                       uint32_t w16_matrices, size_t *sizes);

/* Whether a decode graph's separate-ops pass of `rows` rows takes q|k|v and gate|up each as one
 * product over the stacked matrices: one row, or any rows where the pass does not copy block
 * weights to F16 first (w16: A_W16 holds one unstacked matrix). Its A_QKV and A_GU then hold the
 * rows (runner.c sizes them by this). */
bool nu_llm__stacked_rows(uint32_t rows, bool w16);

/* x = embed[ids] (ids: I32 [rows]), times hp.embed_scale where it is set. */
nu_status nu_llm__blk_embed(nu_llm_pass *p, const nu_tensor *embed, const nu_tensor *ids);
/* The attention half: x += post_norm(attention(rope(qn(norm(x) Wq + bq)), K, V) Wo), with the
 * keys (k = rope(kn(norm(x) Wk + bk))) and values (norm(x) Wv + bv) of the rows appended to the
 * cache of layer `layer`; the parts the layer's weights have: the biases, the per-head q and k
 * RMSNorms (qn, kn), the post-norm. RoPE and attention as hp says for the layer (its base and
 * scaling, the LongRoPE or Llama 3 divisors, the window of a sliding-window layer, the scale, the
 * softcap). */
nu_status nu_llm__blk_attention(nu_llm_pass *p, const nu_llm_layer_w *w, uint32_t layer);
/* The feed-forward half: x += post_norm((act(norm(x) Wg) * (norm(x) Wu)) Wd), act hp.act (SiLU:
 * SwiGLU; GELU tanh: GeGLU), the post-norm where the layer has one. */
nu_status nu_llm__blk_ffn(nu_llm_pass *p, const nu_llm_layer_w *w);
/* The layer every architecture here is: the attention half, then the feed-forward half. */
nu_status nu_llm__blk_layer(nu_llm_pass *p, const nu_llm_layer_w *w, uint32_t layer);
/* A share of a model split by layers over devices (runner.h) hands the next the residual stream x
 * and, where the next needs it, the last block's output still to add: in a shared buffer `stage`
 * of [2, cap, dim] F32 (x's rows at row 0, the output's at row cap). After a layer the separate
 * ops leave that output pending (the next norm adds it: nu_op_add_rms_norm) and the fused layer
 * does after a feed-forward post-norm (Gemma's). The separate ops' next norm gives the same bits
 * from x with the output added by nu_op_add (the same F32 sum, normalised by the same kernel), so
 * those add it before handing x on; the fused layer's next products would normalise x themselves
 * instead of reading add_rms_norm's result, so it hands the output on. The next share judges by
 * its first layer, since an architecture's layers have the same roles. */
bool nu_llm__blk_hands_pending(const nu_llm_pass *p, const nu_llm_layer_w *w);
/* x (and the pending output, where nu_llm__blk_hands_pending says so for w, the share's first
 * layer) from `stage`: the pass then goes on as the share before left it. */
nu_status nu_llm__blk_stage_in(nu_llm_pass *p, nu_buffer *stage, uint32_t cap, const nu_llm_layer_w *w);
/* x (and the pending output, *handed: where it goes too) into `stage`, after the share's last
 * layer `w`. */
nu_status nu_llm__blk_stage_out(nu_llm_pass *p, nu_buffer *stage, uint32_t cap, const nu_llm_layer_w *w,
                                bool *handed);
/* logits = norm(x) W_out^T of the last row ([1, vocab]), or of every row where logits has `rows`
 * rows ([rows, vocab]), softcapped where hp.final_softcap is set; where next is not NULL, the
 * argmax of each (I32 [1 or rows, 1]). */
nu_status nu_llm__blk_logits(nu_llm_pass *p, const nu_tensor *out_norm, const nu_tensor *output,
                             const nu_tensor *logits, const nu_tensor *next);

#endif
