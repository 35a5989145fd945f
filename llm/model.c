/* model.c: the Llama decoder on nuvec's public API (nuvec_llm.h's Model section).
 *
 * Passes of at most NU_MATVEC_MAX_ROWS tokens (decode) run the fused layer, 7 dependency levels a
 * layer (record_layer_fused; NUVEC_LLM_NO_FUSION=1 keeps the separate ops below, for
 * comparisons). Longer passes (prefill), recorded into one command buffer:
 *   x = embed[ids]                                               nu_op_gather
 *   per layer: xn = rms_norm(x) * attn_norm                        nu_op_rms_norm
 *              q, k, v = xn Wq^T, xn Wk^T, xn Wv^T                 matvec (<= 8 rows) or matmul
 *              q, k = rope(q), rope(k)  (in place)                 nu_op_rope
 *              K[start ..], V[start ..] = k, v                     nu_op_kv_append
 *              att = attention(q, K, V), causal                    nu_op_attention
 *              x += att Wo^T; xn = rms_norm(x) * ffn_norm         nu_op_add_rms_norm (one op)
 *              x += (silu(xn Wg^T) * (xn Wu^T)) Wd^T               nu_op_swiglu; the add with
 *                                                                  the next layer's first norm
 *   logits = rms_norm(x[last]) * out_norm, times the output matrix (matvec of the last row only)
 *
 * Decode: the same pass for one token recorded once as a graph at open (nuvec/graph.h). The token
 * id is data (a one-element I32 buffer the CPU writes before each launch, the gather's ids); the
 * position reaches the ops as graph parameters declared by name with nu_op_graph_param: rope's
 * position offset (q and k), kv_append's position (k and v) and attention's kv_length (pos + 1;
 * one query row, so no causal mask). Attention is recorded with kv_length = the cache's
 * positions, so its split count suits the longest context (each split loops over its share of a
 * launch's kv_length). Where the graph cannot be built, decode falls back to recording a command
 * buffer per token, and says so once on stderr.
 *
 * Greedy decode (nu_llm_model_decode_greedy): a ring of `depth` more graphs (NUVEC_LLM_GREEDY_DEPTH,
 * default 2: a ping-pong pair) of `unroll` passes each (NUVEC_LLM_GREEDY_UNROLL, default 4); each
 * pass ends with nu_op_argmax of the logits into an id buffer the next pass's gather reads (the
 * next graph's, for a graph's last pass), so no token needs the CPU. `depth` launches are in
 * flight: the CPU waits for launch k, reads its ids (the CPU may read a buffer that queued work
 * only reads: launch k + 1 reads it) and queues launch k + depth on the graph launch k used,
 * while the others run. Built at the first greedy decode (on lavapipe, 4-5 layers: 0.2 ms for
 * two, plus the argmax kernel's first creation, ~11 ms), not at open. The KV cache has KV_SLACK
 * rows past max_positions for the speculative passes of a launch that runs past its end.
 *
 * Buffers: the weights (the source's, or F16 copies), the KV cache (a K and a V buffer a layer),
 * the decode graphs' activations, allocated at open; each prefill pass's activations from
 * nu_buffer_new_gpu, freed right after its commit so that the next pass, recorded while it runs,
 * reuses their memory in flight (pass_buffers); logits in a shared buffer read back after each
 * pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "source.h"

#define FN "nu_llm_model"
#define MAX_CONVERTED (NU_LLM_W_COUNT * 1024)

/* The graphs: decode's (logits out), and greedy decode's ring of `depth` (up to GREEDY_MAX_DEPTH)
 * graphs of `unroll` passes each (up to GREEDY_MAX_UNROLL): pass u of G_GREEDY + j writes its
 * argmax to id u of ring buffer j + 1 (mod depth), which pass u + 1 reads, and the next graph's
 * pass 0 reads the last id (unroll - 1). Ids lie ID_STRIDE bytes apart (the largest storage
 * buffer offset alignment Vulkan allows), in ring buffers B_GID0 + j. */
#define GREEDY_MAX_DEPTH 4
#define GREEDY_DEPTH 2 /* NUVEC_LLM_GREEDY_DEPTH's default: see greedy_knob */
#define GREEDY_MAX_UNROLL 8
#define GREEDY_UNROLL 4 /* NUVEC_LLM_GREEDY_UNROLL's default: see greedy_knob */
#define ID_STRIDE 256
enum { G_DECODE, G_GREEDY, G_COUNT = G_GREEDY + GREEDY_MAX_DEPTH };
/* The graphs' parameter slots: decode's 0, pass u of greedy graph j 1 + j * GREEDY_MAX_UNROLL + u. */
#define P_SLOTS (1 + GREEDY_MAX_DEPTH * GREEDY_MAX_UNROLL)
/* Cache rows past max_positions: an unrolled launch's last passes may run past the end of the
 * cache (speculative tokens, discarded), and write their keys and values there. */
#define KV_SLACK (GREEDY_MAX_UNROLL - 1)

typedef struct llm_layer {
    nu_tensor attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
    /* wq, wk, wv as one matrix, and gate, up, where the file stores them back to back (stacked):
     * the decode graph's one product for each instead of three and two. */
    nu_tensor wqkv, wgu;
    bool qkv_stacked, gu_stacked;
    nu_buffer *kbuf, *vbuf;
    nu_tensor kc, vc; /* [positions + KV_SLACK, kv_heads, head_dim] */
    /* The graphs' parameters, by slot (P_SLOTS). */
    uint32_t p_qrope[P_SLOTS], p_kpos[P_SLOTS], p_vpos[P_SLOTS], p_kvlen[P_SLOTS];
} llm_layer;

enum { B_IDS, B_X, B_XN, B_Q, B_K, B_V, B_ATT, B_TMP, B_GATE, B_UP, B_LOGITS, B_GIDS, B_QKV, B_GU, B_H16, B_Q16, B_W16, B_GID0, B_GID1, B_GID2, B_GID3, B_COUNT };

struct nu_llm_model {
    nu_device *dev;
    nu_llm_source *src;
    nu_llm_config cfg;
    nu_dtype kv_dtype;
    uint32_t positions, chunk, pos;
    bool by_commands;
    bool prefill_f16; /* prefill's product inputs and q in F16 (for the matrix units' kernels) */
    bool w16;         /* prefill: block weights dequantized to F16 before each product (B_W16) */
    bool repacked;    /* some matrices are Q4_0_SOA (repack_q4_0): prefill dequantizes them (B_W16) */
    bool fused;       /* passes of at most NU_MATVEC_MAX_ROWS rows run the fused layer (record_layer_fused) */
    nu_tensor embed, out_norm, output;
    llm_layer *layers;
    nu_buffer *converted[MAX_CONVERTED];
    uint32_t converted_count;
    nu_buffer *buf[B_COUNT];
    nu_buffer **act; /* the buffers the pass being recorded uses: buf, or a prefill pass's own (pass_buffers) */
    nu_graph *graph[G_COUNT]; /* [G_DECODE] at open; the greedy ring at the first greedy decode */
    uint32_t depth;           /* the greedy ring's graphs (launches in flight); 0: not built yet */
    uint32_t unroll;          /* tokens a greedy launch decodes */
    bool greedy_by_cpu;       /* greedy decode goes token by token (no graphs, or the ring failed) */
};

/* A failed nuvec call: its message with what the model was doing. */
static nu_status nv(nu_llm_model *m, nu_status st, const char *what)
{
    if (st != NU_OK)
        return nu_llm__fail(st, FN ": %s: %s", what, nu_error_message(m->dev));
    return NU_OK;
}

const nu_llm_config *nu_llm_model_config(const nu_llm_model *m) { return m ? &m->cfg : NULL; }
const nu_llm_tokenizer *nu_llm_model_tokenizer(const nu_llm_model *m) { return m ? m->src->tokenizer : NULL; }
const char *nu_llm_model_tokenizer_note(const nu_llm_model *m)
{
    return !m ? "" : m->src->tokenizer ? "" : m->src->tokenizer_note;
}
uint32_t nu_llm_model_position(const nu_llm_model *m) { return m ? m->pos : 0; }
void nu_llm_model_reset(nu_llm_model *m)
{
    if (m)
        m->pos = 0;
}

void nu_llm_model_free(nu_llm_model *m)
{
    if (!m)
        return;
    for (int g = 0; g < G_COUNT; g++) {
        nu_graph_wait(m->graph[g], NU_WAIT_FOREVER);
        nu_graph_free(m->graph[g]);
    }
    for (int i = 0; i < B_COUNT; i++)
        nu_buffer_free(m->buf[i]);
    if (m->layers)
        for (uint32_t l = 0; l < m->cfg.layers; l++) {
            nu_buffer_free(m->layers[l].kbuf);
            nu_buffer_free(m->layers[l].vbuf);
        }
    for (uint32_t i = 0; i < m->converted_count; i++)
        nu_buffer_free(m->converted[i]);
    if (m->src)
        m->src->close(m->src);
    nu_llm__free(m->layers);
    nu_llm__free(m);
}

static bool is_float(nu_dtype t) { return t == NU_DTYPE_F32 || t == NU_DTYPE_F16 || t == NU_DTYPE_BF16; }

/* Weight `w` of `layer` from the source, checked to be [rows, cols] (cols 0: 1-D [rows]) of a
 * dtype the ops take; float matrices converted to F16 when asked. */
static nu_status get_weight(nu_llm_model *m, nu_llm_weight w, uint32_t layer, int64_t rows, int64_t cols, bool f16,
                            nu_tensor *out)
{
    nu_status st = m->src->weight(m->src, w, layer, out);
    if (st != NU_OK)
        return st;
    uint32_t rank = cols ? 2 : 1;
    if (out->rank != rank || out->shape[0] != rows || (cols && out->shape[1] != cols))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": weight %s of layer %u has shape [%lld%s%lld]; [%lld%s%lld] expected",
                            nu_llm__weight_name(w), layer, (long long)out->shape[0], out->rank > 1 ? ", " : "",
                            out->rank > 1 ? (long long)out->shape[1] : 0LL, (long long)rows, cols ? ", " : "",
                            cols ? (long long)cols : 0LL);
    bool block = out->dtype == NU_DTYPE_Q8_0 || out->dtype == NU_DTYPE_Q4_0;
    if (!is_float(out->dtype) && !(block && cols))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": weight %s of layer %u is %s; F32, F16, BF16 (or Q8_0, Q4_0 "
                            "matrices) expected", nu_llm__weight_name(w), layer, nu_dtype_name(out->dtype));
    if ((st = nv(m, nu_tensor_check(out, nu_llm__weight_name(w)), "a weight")) != NU_OK)
        return st;
    if (!f16 || !cols || out->dtype == NU_DTYPE_F16 || block)
        return NU_OK;
    if (m->converted_count == MAX_CONVERTED)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": more than %d matrices", MAX_CONVERTED);
    nu_buffer *b = NULL;
    int64_t shape[2] = {rows, cols};
    if ((st = nv(m, nu_buffer_new(m->dev, (size_t)(rows * cols * 2), NU_STORAGE_PRIVATE, &b), "F16 weights")) != NU_OK)
        return st;
    m->converted[m->converted_count++] = b;
    nu_tensor t = nu_tensor_make(b, 0, NU_DTYPE_F16, 2, shape);
    nu_commands *c = NULL;
    if ((st = nv(m, nu_commands_new(m->dev, NU_QUEUE_COMPUTE, &c), "commands")) != NU_OK)
        return st;
    st = nu_op_copy(c, &t, out);
    if (st == NU_OK)
        st = nu_commands_commit(c);
    if (st == NU_OK)
        st = nu_commands_wait(c, NU_WAIT_FOREVER);
    st = nv(m, st, "converting a weight to F16");
    nu_commands_free(c);
    if (st == NU_OK)
        *out = t;
    return st;
}

static nu_status load_weights(nu_llm_model *m, bool f16)
{
    const nu_llm_config *c = &m->cfg;
    int64_t D = c->dim, F = c->ffn, Q = (int64_t)c->heads * c->head_dim, KV = (int64_t)c->kv_heads * c->head_dim;
    nu_status st;
    if ((st = get_weight(m, NU_LLM_W_EMBED, 0, c->vocab, D, f16, &m->embed)) != NU_OK ||
        (st = get_weight(m, NU_LLM_W_OUT_NORM, 0, D, 0, false, &m->out_norm)) != NU_OK)
        return st;
    if (c->tied_embeddings)
        m->output = m->embed;
    else if ((st = get_weight(m, NU_LLM_W_OUTPUT, 0, c->vocab, D, f16, &m->output)) != NU_OK)
        return st;
    for (uint32_t l = 0; l < c->layers; l++) {
        llm_layer *y = &m->layers[l];
        if ((st = get_weight(m, NU_LLM_W_ATTN_NORM, l, D, 0, false, &y->attn_norm)) != NU_OK ||
            (st = get_weight(m, NU_LLM_W_Q, l, Q, D, f16, &y->wq)) != NU_OK ||
            (st = get_weight(m, NU_LLM_W_K, l, KV, D, f16, &y->wk)) != NU_OK ||
            (st = get_weight(m, NU_LLM_W_V, l, KV, D, f16, &y->wv)) != NU_OK ||
            (st = get_weight(m, NU_LLM_W_O, l, D, Q, f16, &y->wo)) != NU_OK ||
            (st = get_weight(m, NU_LLM_W_FFN_NORM, l, D, 0, false, &y->ffn_norm)) != NU_OK ||
            (st = get_weight(m, NU_LLM_W_GATE, l, F, D, f16, &y->gate)) != NU_OK ||
            (st = get_weight(m, NU_LLM_W_UP, l, F, D, f16, &y->up)) != NU_OK ||
            (st = get_weight(m, NU_LLM_W_DOWN, l, D, F, f16, &y->down)) != NU_OK)
            return st;
    }
    return NU_OK;
}

static nu_status new_buffer(nu_llm_model *m, size_t bytes, nu_storage storage, const char *name, nu_buffer **out)
{
    nu_status st = nv(m, nu_buffer_new(m->dev, bytes, storage, out), name);
    if (st == NU_OK)
        nu_buffer_set_name(*out, name);
    return st;
}

/* The layers' Q4_0 matrices (and a Q4_0 output matrix not tied to the embedding) repacked into
 * NU_DTYPE_Q4_0_SOA, each layer's seven into one buffer in the file's order, so that q, k, v and
 * gate, up stay stacked (stack_layers); the layer's tensors then name the repacked ones. Layers
 * with any other dtype, or rows not a multiple of 256 long, keep the file's. */
static nu_status repack_q4_0(nu_llm_model *m)
{
    nu_status st = NU_OK;
    nu_commands *c = NULL;
    if ((st = nv(m, nu_commands_new(m->dev, NU_QUEUE_COMPUTE, &c), "commands")) != NU_OK)
        return st;
    for (uint32_t l = 0; l <= m->cfg.layers && st == NU_OK; l++) {
        llm_layer *y = l < m->cfg.layers ? &m->layers[l] : NULL;
        nu_tensor *w[7] = {&m->output};
        int count = 1;
        if (y) {
            nu_tensor *lw[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->gate, &y->up, &y->down};
            memcpy(w, lw, sizeof w);
            count = 7;
        } else if (m->cfg.tied_embeddings) {
            break; /* the output matrix is the embedding, which the gather reads as it is */
        }
        size_t bytes = 0;
        bool fits = true;
        for (int i = 0; i < count; i++) {
            fits = fits && w[i]->dtype == NU_DTYPE_Q4_0 && w[i]->rank == 2 && w[i]->shape[1] % 256 == 0;
            bytes += fits ? nu_tensor_span_bytes(w[i]) : 0;
        }
        if (!fits)
            continue;
        if (m->converted_count == MAX_CONVERTED)
            return nu_commands_free(c), nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": more than %d matrices", MAX_CONVERTED);
        nu_buffer *b = NULL;
        if ((st = new_buffer(m, bytes, NU_STORAGE_PRIVATE, "llm Q4_0_SOA weights", &b)) != NU_OK)
            break;
        m->converted[m->converted_count++] = b;
        uint64_t at = 0;
        for (int i = 0; i < count && st == NU_OK; i++) {
            nu_tensor t = nu_tensor_make(b, at, NU_DTYPE_Q4_0_SOA, 2, w[i]->shape);
            at += nu_tensor_span_bytes(w[i]);
            if ((st = nv(m, nu_op_copy(c, &t, w[i]), "repacking a Q4_0 matrix")) == NU_OK)
                *w[i] = t;
            m->repacked = true;
        }
    }
    if (st == NU_OK)
        st = nv(m, nu_commands_commit(c), "repacking the Q4_0 matrices");
    if (st == NU_OK)
        st = nv(m, nu_commands_wait(c, NU_WAIT_FOREVER), "repacking the Q4_0 matrices");
    nu_commands_free(c);
    return st;
}

/* a's and b's rows as one matrix where b follows a in the same buffer with the same dtype and
 * layout (as weight files store a layer's q, k, v and gate, up). */
static bool stacked(const nu_tensor *a, const nu_tensor *b, nu_tensor *out)
{
    if (a->buffer != b->buffer || a->dtype != b->dtype || a->rank != 2 || b->rank != 2 || a->shape[1] != b->shape[1] ||
        !nu_tensor_is_contiguous(a) || !nu_tensor_is_contiguous(b) || b->offset != a->offset + nu_tensor_span_bytes(a))
        return false;
    int64_t shape[2] = {a->shape[0] + b->shape[0], a->shape[1]};
    *out = nu_tensor_make(a->buffer, a->offset, a->dtype, 2, shape);
    return true;
}

static void stack_layers(nu_llm_model *m)
{
    if (getenv("NUVEC_LLM_NO_STACKING")) /* for comparisons */
        return;
    for (uint32_t l = 0; l < m->cfg.layers; l++) {
        llm_layer *y = &m->layers[l];
        nu_tensor qk;
        y->qkv_stacked = stacked(&y->wq, &y->wk, &qk) && stacked(&qk, &y->wv, &y->wqkv);
        y->gu_stacked = stacked(&y->gate, &y->up, &y->wgu);
    }
}


/* The buffers' sizes for passes of R rows. */
static void state_sizes(const nu_llm_model *m, size_t R, size_t sizes[B_COUNT])
{
    const nu_llm_config *c = &m->cfg;
    size_t D = c->dim, Q = (size_t)c->heads * c->head_dim, KV = (size_t)c->kv_heads * c->head_dim;
    size_t s[B_COUNT] = {[B_IDS] = R * 4, [B_X] = R * D * 4, [B_XN] = R * D * 4, [B_Q] = R * Q * 4,
                             [B_K] = R * KV * 4, [B_V] = R * KV * 4, [B_ATT] = R * Q * 4, [B_TMP] = R * D * 4,
                             [B_GATE] = R * c->ffn * 4, [B_UP] = R * c->ffn * 4, [B_LOGITS] = (size_t)c->vocab * 4,
                             [B_GIDS] = 4, [B_QKV] = (R < NU_MATVEC_MAX_ROWS ? R : NU_MATVEC_MAX_ROWS) * (Q + 2 * KV) * 4,
                             [B_GU] = 2 * (size_t)c->ffn * 4,
                             [B_H16] = R * (D > Q ? (D > c->ffn ? D : c->ffn) : (Q > c->ffn ? Q : c->ffn)) * 2,
                             [B_Q16] = R * Q * 2,
                             /* a layer's largest matrix as F16 (prefill of block weights: w16) */
                             [B_W16] = (m->w16 || m->repacked ? (size_t)D * (Q > c->ffn ? Q : c->ffn) * 2 : 4), [B_GID0] = ID_STRIDE * GREEDY_MAX_UNROLL,
                             [B_GID1] = ID_STRIDE * GREEDY_MAX_UNROLL, [B_GID2] = ID_STRIDE * GREEDY_MAX_UNROLL,
                             [B_GID3] = ID_STRIDE * GREEDY_MAX_UNROLL};
    memcpy(sizes, s, sizeof s);
}

static nu_status alloc_state(nu_llm_model *m)
{
    const nu_llm_config *c = &m->cfg;
    size_t sizes[B_COUNT], KV = (size_t)c->kv_heads * c->head_dim;
    state_sizes(m, m->chunk, sizes);
    static const char *const names[B_COUNT] = {"llm ids", "llm x", "llm xn", "llm q", "llm k", "llm v", "llm att",
                                               "llm tmp", "llm gate", "llm up", "llm logits", "llm graph id",
                                               "llm qkv row", "llm gate-up row", "llm f16 input", "llm f16 q", "llm f16 weight",
                                               "llm greedy ids 0", "llm greedy ids 1", "llm greedy ids 2",
                                               "llm greedy ids 3"};
    nu_status st;
    for (int i = 0; i < B_COUNT; i++) {
        bool shared = i == B_IDS || i == B_LOGITS || i == B_GIDS || i >= B_GID0; /* the CPU writes or reads them */
        if ((st = new_buffer(m, sizes[i], shared ? NU_STORAGE_SHARED : NU_STORAGE_PRIVATE, names[i], &m->buf[i])) != NU_OK)
            return st;
    }
    size_t es = nu_dtype_size(m->kv_dtype);
    int64_t shape[3] = {(int64_t)m->positions + KV_SLACK, c->kv_heads, c->head_dim};
    size_t rows = (size_t)m->positions + KV_SLACK;
    for (uint32_t l = 0; l < c->layers; l++) {
        llm_layer *y = &m->layers[l];
        if ((st = new_buffer(m, rows * KV * es, NU_STORAGE_PRIVATE, "llm K cache", &y->kbuf)) != NU_OK ||
            (st = new_buffer(m, rows * KV * es, NU_STORAGE_PRIVATE, "llm V cache", &y->vbuf)) != NU_OK)
            return st;
        y->kc = nu_tensor_make(y->kbuf, 0, m->kv_dtype, 3, shape);
        y->vc = nu_tensor_make(y->vbuf, 0, m->kv_dtype, 3, shape);
    }
    return NU_OK;
}

/* y = x w^T for `rows` rows. */
static nu_status linear(nu_commands *c, uint32_t rows, const nu_tensor *y, const nu_tensor *w, const nu_tensor *x)
{
    return rows <= NU_MATVEC_MAX_ROWS ? nu_op_matvec(c, y, w, x) : nu_op_matmul(c, y, x, w, NULL);
}

/* Prefill's y = x w^T: where w is a block dtype and the products take F16 inputs (w16: with
 * prefill_f16),
 * w is dequantized to F16 first (into B_W16, one matrix at a time) and the F16 product runs: on
 * the H200 that was 10-28% faster at a 7B model's prefill shapes than the product that
 * dequantizes its tiles (bench/RESULTS.md, 2026-12-01: 143-183 against 101-149 TFLOP/s). */
static nu_status prefill_linear(nu_llm_model *m, nu_commands *c, uint32_t rows, const nu_tensor *y, const nu_tensor *w,
                                const nu_tensor *x)
{
    bool soa = w->dtype == NU_DTYPE_Q4_0_SOA; /* the products take it only as F16 */
    if (rows <= NU_MATVEC_MAX_ROWS || (!soa && (!m->w16 || (w->dtype != NU_DTYPE_Q8_0 && w->dtype != NU_DTYPE_Q4_0))))
        return linear(c, rows, y, w, x);
    nu_tensor w16 = nu_tensor_make(m->act[B_W16], 0, NU_DTYPE_F16, 2, w->shape);
    nu_status st = nu_op_copy(c, &w16, w);
    return st != NU_OK ? st : nu_op_matmul(c, y, x, &w16, NULL);
}

/* x (F32) as F16 in buffer b, for kernels that take F16 (the matrix units'). */
static nu_status as_f16(nu_commands *c, nu_buffer *b, const nu_tensor *x, nu_tensor *out)
{
    *out = nu_tensor_make(b, 0, NU_DTYPE_F16, x->rank, x->shape);
    return nu_op_copy(c, out, x);
}

static nu_tensor view2(nu_buffer *b, int64_t rows, int64_t cols)
{
    int64_t s[2] = {rows, cols};
    return nu_tensor_make(b, 0, NU_DTYPE_F32, 2, s);
}

static nu_tensor view3(nu_buffer *b, int64_t rows, int64_t heads, int64_t dim)
{
    int64_t s[3] = {rows, heads, dim};
    return nu_tensor_make(b, 0, NU_DTYPE_F32, 3, s);
}

#define TRY(call)                                                                                                  \
    do {                                                                                                           \
        if ((st = (call)) != NU_OK)                                                                                \
            return st;                                                                                             \
    } while (0)

/* One layer of a pass of at most NU_MATVEC_MAX_ROWS rows (decode) in 7 dependency levels: x is
 * the residual stream, never normalised in place; each RMSNorm is done by the product that reads
 * it, the residual adds by the products that end each half, and the SwiGLU by the gate-up product
 * (nu_op_matvec_fused); the keys are rotated on their way into the cache (nu_op_kv_append_rope):
 *   qkv = norm(x) Wqkv^T | q = rope(q); K[pos] = rope(k); V[pos] = v | att = attention(q, K, V) |
 *   x += att Wo^T | h = silu(norm(x) Wg^T) * (norm(x) Wu^T) | x += h Wd^T
 * (attention is two levels, its splits then their merge; one with NUVEC_ATTENTION=combine=fused,
 * slower on the H200 at decode's lengths: bench/RESULTS.md). On the H200 the fusion took 7B Q4_0
 * decode from 347 to 418 tokens/s and F16 from 194 to 203 (NUVEC_LLM_NO_FUSION=1 against the
 * default, same run). */
static nu_status record_layer_fused(nu_llm_model *m, nu_commands *c, llm_layer *y, uint32_t rows, uint32_t start,
                                    bool graph, int gi)
{
    const nu_llm_config *cf = &m->cfg;
    int64_t R = rows, D = cf->dim, H = cf->heads, KVH = cf->kv_heads, HD = cf->head_dim, F = cf->ffn;
    nu_status st;
    nu_tensor x = view2(m->act[B_X], R, D);
    nu_tensor q3 = view3(m->act[B_Q], R, H, HD), k3 = view3(m->act[B_K], R, KVH, HD), v3 = view3(m->act[B_V], R, KVH, HD);
    nu_tensor att3 = view3(m->act[B_ATT], R, H, HD), att2 = view2(m->act[B_ATT], R, H * HD);
    nu_tensor h = view2(m->act[B_GATE], R, F);
    nu_matvec_desc attn_in = {.norm_weight = &y->attn_norm, .norm_eps = cf->rms_eps};
    if (y->qkv_stacked) { /* one product into [q | k | v] a row */
        int64_t all = (H + 2 * KVH) * HD;
        nu_tensor qkv = view2(m->act[B_QKV], R, all);
        TRY(nu_op_matvec_fused(c, &qkv, &y->wqkv, &x, &attn_in));
        int64_t qs[3] = {R, H, HD}, ks[3] = {R, KVH, HD}, row = all;
        q3 = nu_tensor_make(m->act[B_QKV], 0, NU_DTYPE_F32, 3, qs);
        k3 = nu_tensor_make(m->act[B_QKV], (uint64_t)(H * HD) * 4, NU_DTYPE_F32, 3, ks);
        v3 = nu_tensor_make(m->act[B_QKV], (uint64_t)((H + KVH) * HD) * 4, NU_DTYPE_F32, 3, ks);
        q3.strides[0] = k3.strides[0] = v3.strides[0] = row; /* rows of [q | k | v] */
    } else {
        /* q's product into B_ATT's rows (rotated into B_Q below, before attention writes B_ATT) */
        int64_t qs[3] = {R, H, HD};
        nu_tensor q2 = view2(m->act[B_ATT], R, H * HD), k2 = view2(m->act[B_K], R, KVH * HD),
                  v2 = view2(m->act[B_V], R, KVH * HD);
        q3 = nu_tensor_make(m->act[B_ATT], 0, NU_DTYPE_F32, 3, qs);
        TRY(nu_op_matvec_fused(c, &q2, &y->wq, &x, &attn_in));
        TRY(nu_op_matvec_fused(c, &k2, &y->wk, &x, &attn_in));
        TRY(nu_op_matvec_fused(c, &v2, &y->wv, &x, &attn_in));
    }
    nu_rope_desc rope_q = {m->src->rope_layout, cf->rope_theta, 0, (int32_t)start, NULL};
    nu_rope_desc rope_k = {m->src->rope_layout, cf->rope_theta, 0, 0, NULL}; /* the append's position drives it */
    nu_tensor qr = view3(m->act[B_Q], R, H, HD); /* q turned into its own rows (rope's dst is contiguous) */
    TRY(nu_op_rope(c, &qr, &q3, &rope_q));
    if (graph)
        TRY(nu_op_graph_param(c, NU_OP_VALUE_POSITION, &y->p_qrope[gi]));
    TRY(nu_op_kv_append_rope(c, &y->kc, &k3, start, &rope_k));
    if (graph)
        TRY(nu_op_graph_param(c, NU_OP_VALUE_POSITION, &y->p_kpos[gi]));
    TRY(nu_op_kv_append(c, &y->vc, &v3, start));
    if (graph)
        TRY(nu_op_graph_param(c, NU_OP_VALUE_POSITION, &y->p_vpos[gi]));
    nu_attention_desc ad = {0, !graph, start, graph ? m->positions : start + rows};
    TRY(nu_op_attention(c, &att3, &qr, &y->kc, &y->vc, &ad));
    if (graph)
        TRY(nu_op_graph_param(c, NU_OP_VALUE_KV_LENGTH, &y->p_kvlen[gi]));
    nu_matvec_desc add = {.residual = &x};
    TRY(nu_op_matvec_fused(c, &x, &y->wo, &att2, &add)); /* x += att Wo^T */
    nu_matvec_desc ffn_in = {.norm_weight = &y->ffn_norm, .norm_eps = cf->rms_eps, .glu_up = &y->up};
    TRY(nu_op_matvec_fused(c, &h, &y->gate, &x, &ffn_in));
    return nu_op_matvec_fused(c, &x, &y->down, &h, &add); /* x += h Wd^T */
}

/* Records the forward pass of `rows` tokens at `start` into c. slot: -1 for a command buffer,
 * else a pass of a graph: one row, its id from gid (I32 [1]), parameters declared for the
 * position into parameter slot `slot`, and where next is not NULL, the argmax of the logits
 * into it (I32 [1, 1]). */
static nu_status record_forward(nu_llm_model *m, nu_commands *c, uint32_t rows, uint32_t start, int slot,
                                const nu_tensor *gid, const nu_tensor *next)
{
    const bool graph = slot >= 0;
    const int gi = graph ? slot : 0; /* the parameters' slot (unused without a graph) */
    const nu_llm_config *cf = &m->cfg;
    int64_t R = rows, D = cf->dim, H = cf->heads, KVH = cf->kv_heads, HD = cf->head_dim, F = cf->ffn;
    nu_status st;
    int64_t one = R;
    nu_tensor ids = graph ? *gid : nu_tensor_make(m->act[B_IDS], 0, NU_DTYPE_I32, 1, &one);
    nu_tensor x = view2(m->act[B_X], R, D), xn = view2(m->act[B_XN], R, D), tmp = view2(m->act[B_TMP], R, D);
    nu_tensor q2 = view2(m->act[B_Q], R, H * HD), k2 = view2(m->act[B_K], R, KVH * HD), v2 = view2(m->act[B_V], R, KVH * HD);
    const nu_tensor q3s = view3(m->act[B_Q], R, H, HD), k3s = view3(m->act[B_K], R, KVH, HD),
                    v3s = view3(m->act[B_V], R, KVH, HD); /* separate products' outputs */
    nu_tensor att3 = view3(m->act[B_ATT], R, H, HD), att2 = view2(m->act[B_ATT], R, H * HD);
    nu_tensor gate = view2(m->act[B_GATE], R, F), up = view2(m->act[B_UP], R, F);
    nu_rope_desc rope = {m->src->rope_layout, cf->rope_theta, 0, (int32_t)start, NULL};
    nu_attention_desc ad = {0, !graph, start, graph ? m->positions : start + rows};

    TRY(nu_op_gather(c, &x, &m->embed, &ids));
    if (m->fused && rows <= NU_MATVEC_MAX_ROWS) {
        for (uint32_t l = 0; l < cf->layers; l++)
            TRY(record_layer_fused(m, c, &m->layers[l], rows, start, graph, gi));
        nu_tensor last, logits = view2(m->act[B_LOGITS], 1, cf->vocab);
        TRY(nu_tensor_slice(&x, 0, R - 1, 1, &last));
        nu_matvec_desc out_in = {.norm_weight = &m->out_norm, .norm_eps = cf->rms_eps};
        TRY(nu_op_matvec_fused(c, &logits, &m->output, &last, &out_in));
        return next ? nu_op_argmax(c, next, &logits) : NU_OK;
    }
    for (uint32_t l = 0; l < cf->layers; l++) {
        llm_layer *y = &m->layers[l];
        if (l == 0) /* later layers' come with the previous layer's last residual add */
            TRY(nu_op_rms_norm(c, &xn, &x, &y->attn_norm, cf->rms_eps));
        bool qkv = graph && y->qkv_stacked, gu = graph && y->gu_stacked; /* decode: one row */
        nu_tensor q3 = q3s, k3 = k3s, v3 = v3s;
        bool h = !graph && m->prefill_f16 && rows > NU_MATVEC_MAX_ROWS; /* prefill through the matrix units */
        if (qkv) { /* one product into [q | k | v] of one row */
            nu_tensor all = view2(m->act[B_QKV], 1, (H + 2 * KVH) * HD);
            TRY(linear(c, rows, &all, &y->wqkv, &xn));
            int64_t qs[3] = {1, H, HD}, ks[3] = {1, KVH, HD};
            q3 = nu_tensor_make(m->act[B_QKV], 0, NU_DTYPE_F32, 3, qs);
            k3 = nu_tensor_make(m->act[B_QKV], (uint64_t)(H * HD) * 4, NU_DTYPE_F32, 3, ks);
            v3 = nu_tensor_make(m->act[B_QKV], (uint64_t)((H + KVH) * HD) * 4, NU_DTYPE_F32, 3, ks);
        } else {
            nu_tensor in = xn;
            if (h)
                TRY(as_f16(c, m->act[B_H16], &xn, &in));
            TRY(prefill_linear(m, c, rows, &q2, &y->wq, &in));
            TRY(prefill_linear(m, c, rows, &k2, &y->wk, &in));
            TRY(prefill_linear(m, c, rows, &v2, &y->wv, &in));
        }
        TRY(nu_op_rope(c, &q3, &q3, &rope));
        if (graph)
            TRY(nu_op_graph_param(c, NU_OP_VALUE_POSITION, &y->p_qrope[gi]));
        /* k turned on its way into the cache (the same bits as nu_op_rope into F32, then the
         * append's rounding), its position the append's. */
        nu_rope_desc krope = rope;
        krope.position_offset = 0;
        TRY(nu_op_kv_append_rope(c, &y->kc, &k3, start, &krope));
        if (graph)
            TRY(nu_op_graph_param(c, NU_OP_VALUE_POSITION, &y->p_kpos[gi]));
        TRY(nu_op_kv_append(c, &y->vc, &v3, start));
        if (graph)
            TRY(nu_op_graph_param(c, NU_OP_VALUE_POSITION, &y->p_vpos[gi]));
        nu_tensor qa = q3;
        if (h)
            TRY(as_f16(c, m->act[B_Q16], &q3, &qa));
        TRY(nu_op_attention(c, &att3, &qa, &y->kc, &y->vc, &ad));
        if (graph)
            TRY(nu_op_graph_param(c, NU_OP_VALUE_KV_LENGTH, &y->p_kvlen[gi]));
        nu_tensor ain = att2;
        if (h)
            TRY(as_f16(c, m->act[B_H16], &att2, &ain));
        TRY(prefill_linear(m, c, rows, &tmp, &y->wo, &ain));
        TRY(nu_op_add_rms_norm(c, &x, &xn, &x, &tmp, &y->ffn_norm, cf->rms_eps)); /* x += tmp; xn = norm(x) */
        if (gu) { /* one product into [gate | up] of one row */
            nu_tensor all = view2(m->act[B_GU], 1, 2 * F), g1, u1;
            TRY(linear(c, rows, &all, &y->wgu, &xn));
            TRY(nu_tensor_slice(&all, 1, 0, F, &g1));
            TRY(nu_tensor_slice(&all, 1, F, F, &u1));
            TRY(nu_op_swiglu(c, &g1, &g1, &u1));
            TRY(linear(c, rows, &tmp, &y->down, &g1));
        } else {
            nu_tensor in = xn, gin = gate;
            if (h)
                TRY(as_f16(c, m->act[B_H16], &xn, &in));
            TRY(prefill_linear(m, c, rows, &gate, &y->gate, &in));
            TRY(prefill_linear(m, c, rows, &up, &y->up, &in));
            TRY(nu_op_swiglu(c, &gate, &gate, &up));
            if (h)
                TRY(as_f16(c, m->act[B_H16], &gate, &gin));
            TRY(prefill_linear(m, c, rows, &tmp, &y->down, &gin));
        }
        if (l + 1 < cf->layers) /* x += tmp, and the next layer's first norm */
            TRY(nu_op_add_rms_norm(c, &x, &xn, &x, &tmp, &m->layers[l + 1].attn_norm, cf->rms_eps));
        else
            TRY(nu_op_add(c, &x, &x, &tmp));
    }
    nu_tensor last, xl = view2(m->act[B_XN], 1, D), logits = view2(m->act[B_LOGITS], 1, cf->vocab);
    TRY(nu_tensor_slice(&x, 0, R - 1, 1, &last));
    TRY(nu_op_rms_norm(c, &xl, &last, &m->out_norm, cf->rms_eps));
    TRY(nu_op_matvec(c, &logits, &m->output, &xl));
    return next ? nu_op_argmax(c, next, &logits) : NU_OK;
}

/* Id u of greedy ring buffer j, as a gather's ids (rank 1) or an argmax's output (rank 2). */
static nu_tensor ring_id(nu_llm_model *m, uint32_t j, uint32_t u, uint32_t rank)
{
    int64_t shape[2] = {1, 1};
    return nu_tensor_make(m->buf[B_GID0 + j], (uint64_t)u * ID_STRIDE, NU_DTYPE_I32, rank, shape);
}

/* The parameter slot of pass u of greedy graph j. */
static int greedy_slot(uint32_t j, uint32_t u) { return 1 + (int)(j * GREEDY_MAX_UNROLL + u); }

/* Records and builds graph g (G_*) into m->graph[g]: decode's one pass, or greedy graph j's
 * `unroll` passes (pass 0 reads the ring's previous graph's last id, pass u > 0 the id pass
 * u - 1 wrote). */
static nu_status record_graph(nu_llm_model *m, int g)
{
    nu_commands *rec = NULL;
    nu_status st = nu_graph_record(m->dev, &rec);
    int64_t one = 1;
    if (st == NU_OK && g == G_DECODE) {
        nu_tensor gid = nu_tensor_make(m->buf[B_GIDS], 0, NU_DTYPE_I32, 1, &one);
        st = record_forward(m, rec, 1, 0, 0, &gid, NULL);
    }
    uint32_t j = (uint32_t)(g - G_GREEDY), to = (j + 1) % (m->depth ? m->depth : 1);
    for (uint32_t u = 0; st == NU_OK && g != G_DECODE && u < m->unroll; u++) {
        nu_tensor gid = u ? ring_id(m, to, u - 1, 1) : ring_id(m, j, m->unroll - 1, 1), next = ring_id(m, to, u, 2);
        st = record_forward(m, rec, 1, 0, greedy_slot(j, u), &gid, &next);
    }
    if (st == NU_OK)
        st = nu_graph_new(rec, &m->graph[g]);
    if (st != NU_OK)
        nu_commands_free(rec);
    return st;
}

static nu_status build_graph(nu_llm_model *m)
{
    nu_status st = record_graph(m, G_DECODE);
    if (st != NU_OK) {
        if (!getenv("NUVEC_LLM_QUIET"))
            fprintf(stderr, "nuvec llm: decode records a command buffer per token: the decode graph failed: %s\n",
                    nu_error_message(m->dev));
        m->by_commands = true;
    }
    return NU_OK;
}

nu_status nu_llm_model_open(nu_device *device, const char *path, const nu_llm_model_options *options, nu_llm_model **out)
{
    if (out)
        *out = NULL;
    if (!device || !path || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: NULL %s", !device ? "device" : !path ? "path" : "out");
    nu_llm_model_options opt = options ? *options : (nu_llm_model_options){0};
    if (opt.kv_dtype == 0)
        opt.kv_dtype = NU_DTYPE_F32;
    if (!is_float(opt.kv_dtype))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: kv_dtype %s; F32, F16 or BF16 expected",
                            nu_dtype_name(opt.kv_dtype));
    nu_llm_model *m = nu_llm__calloc(1, sizeof *m);
    if (!m)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_model_open: no memory");
    m->dev = device;
    m->kv_dtype = opt.kv_dtype;
    m->by_commands = opt.decode_by_commands;
    m->prefill_f16 = opt.prefill_f16 > 0 ||
                     (opt.prefill_f16 == 0 && nu_device_get_info(device)->features[NU_FEATURE_COOPERATIVE_MATRIX]);
    m->w16 = m->prefill_f16;
    m->fused = !getenv("NUVEC_LLM_NO_FUSION"); /* the separate ops, for comparisons */
    m->act = m->buf;
    size_t plen = strlen(path);
    nu_status st = plen > 5 && !strcmp(path + plen - 5, ".gguf") ? nu_llm__gguf_open(device, path, &m->src)
                                                                  : nu_llm__hf_open(device, path, &m->src);
    if (st != NU_OK)
        goto fail;
    m->cfg = m->src->config;
    const nu_llm_config *c = &m->cfg;
    uint32_t hd = c->head_dim;
    if (hd < 8 || hd > 128 || (hd & (hd - 1))) {
        st = nu_llm__fail(NU_ERROR_UNSUPPORTED, "nu_llm_model_open: head_dim %u; the attention kernels take 8, 16, 32, 64 or 128", hd);
        goto fail;
    }
    if (c->heads % c->kv_heads) {
        st = nu_llm__fail(NU_ERROR_FORMAT, "nu_llm_model_open: %u attention heads are not a multiple of %u KV heads", c->heads,
                          c->kv_heads);
        goto fail;
    }
    if (opt.max_positions > c->max_positions) {
        st = nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: max_positions %u is beyond the model's %u",
                          opt.max_positions, c->max_positions);
        goto fail;
    }
    m->positions = opt.max_positions ? opt.max_positions : c->max_positions;
    m->chunk = opt.prefill_chunk ? opt.prefill_chunk : 512;
    if (m->chunk > m->positions)
        m->chunk = m->positions;
    if (!(m->layers = nu_llm__calloc(c->layers, sizeof *m->layers))) {
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_model_open: no memory");
        goto fail;
    }
    if ((st = load_weights(m, opt.weights_f16)) != NU_OK ||
        (opt.repack_q4_0 >= 0 && (st = repack_q4_0(m)) != NU_OK) || (st = alloc_state(m)) != NU_OK)
        goto fail;
    stack_layers(m);
    if (!m->by_commands && (st = build_graph(m)) != NU_OK)
        goto fail;
    *out = m;
    return NU_OK;
fail:
    nu_llm_model_free(m);
    return st;
}

static nu_status check_ids(nu_llm_model *m, const int32_t *tokens, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= m->cfg.vocab)
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN ": token %zu is %d; ids are 0 to %u", i, tokens[i],
                                m->cfg.vocab - 1);
    if (n > m->positions - m->pos)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, FN ": %zu tokens at position %u overflow the cache's %u positions", n,
                            m->pos, m->positions);
    return NU_OK;
}

static nu_status read_logits(nu_llm_model *m, float *logits)
{
    if (!logits)
        return NU_OK;
    return nv(m, nu_buffer_read(m->buf[B_LOGITS], 0, logits, (size_t)m->cfg.vocab * 4), "reading the logits");
}

/* A prefill pass's buffers: the model's (the logits and the KV cache are every pass's), with the
 * pass's activations and ids (the ones a pass of `rows` rows writes) from nu_buffer_new_gpu. Each
 * pass frees its own right after its commit; the next pass's come from that memory while the GPU
 * still runs the previous pass, ordered after its uses (in-flight reuse: nuvec/buffer.h), so the
 * CPU records pass i + 1 while pass i runs and the activations hold about one pass's memory. */
static const int PASS_OWN[] = {B_IDS, B_X, B_XN, B_Q, B_K, B_V, B_ATT, B_TMP, B_GATE, B_UP, B_QKV, B_H16, B_Q16, B_W16};
#define PASS_OWN_COUNT (sizeof PASS_OWN / sizeof *PASS_OWN)

static void free_pass_buffers(nu_buffer *set[B_COUNT])
{
    for (size_t i = 0; i < PASS_OWN_COUNT; i++) {
        nu_buffer_free(set[PASS_OWN[i]]);
        set[PASS_OWN[i]] = NULL;
    }
}

static nu_status pass_buffers(nu_llm_model *m, uint32_t rows, nu_buffer *set[B_COUNT])
{
    size_t sizes[B_COUNT];
    state_sizes(m, rows, sizes);
    memcpy(set, m->buf, sizeof *set * B_COUNT);
    for (size_t i = 0; i < PASS_OWN_COUNT; i++)
        set[PASS_OWN[i]] = NULL;
    for (size_t i = 0; i < PASS_OWN_COUNT; i++) {
        nu_status st = nv(m, nu_buffer_new_gpu(m->dev, sizes[PASS_OWN[i]], NU_STORAGE_PRIVATE, &set[PASS_OWN[i]]),
                          "a prefill pass's activations");
        if (st != NU_OK) {
            free_pass_buffers(set);
            return st;
        }
    }
    return NU_OK;
}

/* Passes of at most `chunk` rows, each committed without waiting for the one before (which the
 * next commit waits for instead): the KV cache orders them (nuvec/command.h). On failure the
 * position is as before the call. */
nu_status nu_llm_model_prefill(nu_llm_model *m, const int32_t *tokens, size_t n, float *logits)
{
    if (!m || !tokens || !n)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_prefill: %s", !m ? "NULL model" : !tokens ? "NULL tokens" : "no tokens");
    nu_status st = check_ids(m, tokens, n);
    if (st != NU_OK)
        return st;
    uint32_t start = m->pos;
    nu_commands *prev = NULL;
    for (size_t done = 0; done < n && st == NU_OK;) {
        uint32_t rows = (uint32_t)(n - done < m->chunk ? n - done : m->chunk);
        nu_buffer *set[B_COUNT];
        if ((st = pass_buffers(m, rows, set)) != NU_OK)
            break;
        nu_commands *c = NULL;
        if ((st = nv(m, nu_commands_new(m->dev, NU_QUEUE_COMPUTE, &c), "commands")) == NU_OK &&
            (st = nv(m, nu_commands_upload(c, set[B_IDS], 0, tokens + done, (size_t)rows * 4), "the token ids")) == NU_OK) {
            m->act = set;
            st = nv(m, record_forward(m, c, rows, m->pos, -1, NULL, NULL), "recording the forward pass");
            m->act = m->buf;
        }
        if (st == NU_OK)
            st = nv(m, nu_commands_commit(c), "the forward pass");
        free_pass_buffers(set); /* the next pass may take their memory, after this one's uses */
        if (st != NU_OK) {
            nu_commands_free(c);
            break;
        }
        if (prev) {
            st = nv(m, nu_commands_wait(prev, NU_WAIT_FOREVER), "the forward pass");
            nu_commands_free(prev);
        }
        prev = c;
        m->pos += rows;
        done += rows;
    }
    if (prev) {
        nu_status w = nv(m, nu_commands_wait(prev, NU_WAIT_FOREVER), "the forward pass");
        st = st != NU_OK ? st : w;
        nu_commands_free(prev);
    }
    if (st != NU_OK) {
        m->pos = start;
        return st;
    }
    return read_logits(m, logits);
}

/* The parameters in slot g of graph gr for the token at `pos`. */
static nu_status set_params(nu_llm_model *m, nu_graph *gr, int g, uint32_t pos)
{
    uint32_t len = pos + 1;
    int32_t ipos = (int32_t)pos;
    nu_status st;
    for (uint32_t l = 0; l < m->cfg.layers; l++) {
        llm_layer *y = &m->layers[l];
        if ((st = nv(m, nu_graph_set_param(gr, y->p_qrope[g], &ipos, 4), "a graph parameter")) != NU_OK ||
            (st = nv(m, nu_graph_set_param(gr, y->p_kpos[g], &pos, 4), "a graph parameter")) != NU_OK ||
            (st = nv(m, nu_graph_set_param(gr, y->p_vpos[g], &pos, 4), "a graph parameter")) != NU_OK ||
            (st = nv(m, nu_graph_set_param(gr, y->p_kvlen[g], &len, 4), "a graph parameter")) != NU_OK)
            return st;
    }
    return NU_OK;
}

nu_status nu_llm_model_decode(nu_llm_model *m, int32_t token, float *logits)
{
    if (!m)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_decode: NULL model");
    if (m->by_commands)
        return nu_llm_model_prefill(m, &token, 1, logits);
    nu_status st = check_ids(m, &token, 1);
    if (st != NU_OK)
        return st;
    if ((st = nv(m, nu_buffer_write(m->buf[B_GIDS], 0, &token, 4), "writing the token id")) != NU_OK ||
        (st = set_params(m, m->graph[G_DECODE], 0, m->pos)) != NU_OK)
        return st;
    if ((st = nv(m, nu_graph_launch(m->graph[G_DECODE]), "launching the decode graph")) != NU_OK ||
        (st = nv(m, nu_graph_wait(m->graph[G_DECODE], NU_WAIT_FOREVER), "the decode graph")) != NU_OK)
        return st;
    m->pos++;
    return read_logits(m, logits);
}

/* A greedy decode knob from the environment: 1 .. max, else `def` (said on stderr when set badly).
 * NUVEC_LLM_GREEDY_DEPTH, launches in flight (1: the ids stay on the GPU but each launch waits
 * for the CPU to see the previous one's tokens; 2, the default, lets the CPU read a launch's
 * tokens and queue the next while one runs; more gives the CPU's wake-up and submission more
 * slack). NUVEC_LLM_GREEDY_UNROLL, tokens a launch decodes (passes recorded back to back in one
 * graph: a barrier between tokens instead of a submission; default 4: on the H200 aidreams260K
 * took 0.129 ms a token against 0.135 with 1, and 7B Q4_0 the same 2.32 ms). Past a stop, up to
 * depth * unroll tokens run and are discarded (7B on the H200: about 18 ms more before the call
 * returns). */
static uint32_t greedy_knob(const char *name, uint32_t def, uint32_t max)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return def;
    char *end;
    unsigned long v = strtoul(e, &end, 10);
    if (*end || v < 1 || v > max) {
        if (!getenv("NUVEC_LLM_QUIET"))
            fprintf(stderr, "nuvec llm: %s=%s is not 1 to %u; it is %u\n", name, e, max, def);
        return def;
    }
    return (uint32_t)v;
}

/* The greedy ring, built at the first greedy decode rather than at open: a model that is only
 * prefilled, or decoded for its logits, never pays for it (depth more graph builds: recording and
 * scheduling; their Vulkan command buffers are recorded at their first launches). Where they
 * cannot be built, greedy decode goes token by token (the logits read back), and says so once on
 * stderr; NUVEC_LLM_GREEDY_CPU=1 asks for that path (for comparisons). */
static void build_greedy_graphs(nu_llm_model *m)
{
    m->depth = greedy_knob("NUVEC_LLM_GREEDY_DEPTH", GREEDY_DEPTH, GREEDY_MAX_DEPTH);
    m->unroll = greedy_knob("NUVEC_LLM_GREEDY_UNROLL", GREEDY_UNROLL, GREEDY_MAX_UNROLL);
    if (getenv("NUVEC_LLM_GREEDY_CPU")) {
        m->greedy_by_cpu = true;
        return;
    }
    nu_status st = NU_OK;
    for (uint32_t j = 0; st == NU_OK && j < m->depth; j++)
        st = record_graph(m, G_GREEDY + (int)j);
    if (st == NU_OK)
        return;
    if (!getenv("NUVEC_LLM_QUIET"))
        fprintf(stderr, "nuvec llm: greedy decode reads the logits back each token: its graphs failed: %s\n",
                nu_error_message(m->dev));
    for (int g = G_GREEDY; g < G_COUNT; g++) {
        nu_graph_free(m->graph[g]);
        m->graph[g] = NULL;
    }
    m->greedy_by_cpu = true;
}

/* Greedy decode one token at a time: decode, logits back, the argmax on the CPU (the lowest id
 * of equal largest logits, as the GPU's argmax and nu_llm_sample at temperature 0). */
static nu_status greedy_by_logits(nu_llm_model *m, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                                  int32_t stop_token, bool (*on_token)(void *, int32_t), void *user)
{
    uint32_t V = m->cfg.vocab;
    float *logits = nu_llm__malloc_array(V, sizeof *logits);
    if (!logits)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN "_decode_greedy: no memory");
    nu_status st = NU_OK;
    for (uint32_t k = 0; k < n; k++) {
        if ((st = nu_llm_model_decode(m, k ? out[k - 1] : token, logits)) != NU_OK)
            break;
        uint32_t best = 0;
        for (uint32_t i = 1; i < V; i++)
            if (logits[i] > logits[best])
                best = i;
        out[k] = (int32_t)best;
        *produced = k + 1;
        if ((on_token && !on_token(user, out[k])) || out[k] == stop_token)
            break;
    }
    nu_llm__free(logits);
    return st;
}

/* Launch k of a greedy decode from position p: tokens at p + k * unroll + u (u < unroll), by the
 * ring's graph k % depth (its pass 0 reads the last id launch k - 1 wrote). */
static nu_status greedy_launch(nu_llm_model *m, uint32_t p, uint32_t k)
{
    uint32_t j = k % m->depth;
    nu_graph *g = m->graph[G_GREEDY + j];
    nu_status st = NU_OK;
    for (uint32_t u = 0; st == NU_OK && u < m->unroll; u++)
        st = set_params(m, g, greedy_slot(j, u), p + k * m->unroll + u);
    return st != NU_OK ? st : nv(m, nu_graph_launch(g), "launching a greedy decode graph");
}

/* `depth` launches in flight: while launches k + 1 .. k + depth - 1 run, the CPU waits for launch
 * k, reads its ids (ring buffer k + 1: the CPU may read a buffer that queued work only reads) and
 * queues launch k + depth on the graph launch k used. Tokens past a stop are speculative: their
 * keys and values went to rows beyond the position (KV_SLACK rows past the cache's end at most),
 * which later tokens overwrite (attention reads kv_length rows). */
static nu_status greedy_by_graphs(nu_llm_model *m, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                                  int32_t stop_token, bool (*on_token)(void *, int32_t), void *user)
{
    const uint32_t p = m->pos, D = m->depth, U = m->unroll, launches = (n + U - 1) / U;
    int32_t ids[GREEDY_MAX_UNROLL * ID_STRIDE / 4];
    nu_status st = nv(m, nu_buffer_write(m->buf[B_GID0], (size_t)(U - 1) * ID_STRIDE, &token, 4), "writing the token id");
    for (uint32_t k = 0; st == NU_OK && k < D && k < launches; k++)
        st = greedy_launch(m, p, k);
    bool done = false;
    for (uint32_t k = 0; st == NU_OK && !done && k < launches; k++) {
        uint32_t first = k * U, count = n - first < U ? n - first : U; /* tokens of this launch wanted */
        if ((st = nv(m, nu_graph_wait(m->graph[G_GREEDY + k % D], NU_WAIT_FOREVER), "a greedy decode graph")) != NU_OK ||
            (st = nv(m, nu_buffer_read(m->buf[B_GID0 + (k + 1) % D], 0, ids, (size_t)(count - 1) * ID_STRIDE + 4),
                     "reading token ids")) != NU_OK)
            break;
        uint32_t give = 0; /* tokens to give: up to and with a stop_token */
        bool stopped = false;
        while (give < count && !stopped) {
            out[first + give] = ids[give * (ID_STRIDE / 4)];
            stopped = out[first + give++] == stop_token;
        }
        done = stopped || first + count == n;
        if (!done && k + D < launches && (st = greedy_launch(m, p, k + D)) != NU_OK) /* before the callback: the GPU keeps busy */
            break;
        for (uint32_t u = 0; u < give; u++) {
            *produced = first + u + 1;
            if (on_token && !on_token(user, out[first + u])) {
                done = true;
                break;
            }
        }
    }
    /* Speculative launches finish before the model is used again (their buffers are the model's). */
    for (uint32_t j = 0; j < D; j++) {
        nu_status w = nv(m, nu_graph_wait(m->graph[G_GREEDY + j], NU_WAIT_FOREVER), "a greedy decode graph");
        if (st == NU_OK)
            st = w;
    }
    m->pos = p + *produced; /* on failure too: the tokens given to on_token are in the cache */
    return st;
}

nu_status nu_llm_model_decode_greedy(nu_llm_model *m, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                                     int32_t stop_token, bool (*on_token)(void *user, int32_t id), void *user)
{
    static const char fn[] = "nu_llm_model_decode_greedy";
    if (produced)
        *produced = 0;
    if (!m || !produced || (!out && n))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: NULL %s", fn, !m ? "model" : !produced ? "produced" : "out");
    if (token < 0 || (uint32_t)token >= m->cfg.vocab)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: token %d; ids are 0 to %u", fn, token, m->cfg.vocab - 1);
    if (n > m->positions - m->pos)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "%s: %u tokens from position %u overflow the cache's %u positions",
                            fn, n, m->pos, m->positions);
    if (n == 0)
        return NU_OK;
    if (!m->by_commands && !m->depth)
        build_greedy_graphs(m);
    uint32_t got = 0;
    nu_status st = m->by_commands || m->greedy_by_cpu ? greedy_by_logits(m, token, n, out, &got, stop_token, on_token, user)
                                                      : greedy_by_graphs(m, token, n, out, &got, stop_token, on_token, user);
    if (st == NU_OK)
        *produced = got;
    return st;
}
