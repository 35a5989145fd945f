/* blocks.c: the shared blocks of a decoder layer (blocks.h). */
#include "blocks.h"

#include <string.h>

#include "common.h"

#define TRY NU_LLM_TRY

void nu_llm__act_sizes(const nu_llm_hparams *hp, uint32_t rows, uint32_t qkv_rows, uint32_t gu_rows,
                       uint32_t w16_matrices, size_t *sizes)
{
    const nu_llm_config *c = &hp->cfg;
    size_t R = rows, D = c->dim, Q = (size_t)c->heads * c->head_dim, KV = (size_t)c->kv_heads * c->head_dim, F = c->ffn;
    size_t widest = D > Q ? (D > F ? D : F) : (Q > F ? Q : F);
    size_t s[NU_LLM_A_COUNT] = {
        [NU_LLM_A_X] = R * D * 4, [NU_LLM_A_XN] = R * D * 4, [NU_LLM_A_Q] = R * Q * 4, [NU_LLM_A_K] = R * KV * 4,
        [NU_LLM_A_V] = R * KV * 4, [NU_LLM_A_ATT] = R * Q * 4, [NU_LLM_A_TMP] = R * D * 4,
        [NU_LLM_A_GATE] = R * F * 4, [NU_LLM_A_UP] = R * F * 4,
        [NU_LLM_A_QKV] = qkv_rows ? (size_t)qkv_rows * (Q + 2 * KV) * 4 : 4,
        [NU_LLM_A_GU] = (size_t)(gu_rows ? gu_rows : 1) * 2 * F * 4, [NU_LLM_A_H16] = R * widest * 2,
        [NU_LLM_A_Q16] = R * Q * 2,
        /* one or two of a layer's largest matrix as F16 (prefill of block weights: linear_b) */
        [NU_LLM_A_W16] = w16_matrices ? w16_matrices * D * (Q > F ? Q : F) * 2 : 4};
    memcpy(sizes, s, sizeof s);
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

/* nu_op_matvec_fused over the pass's rows, p->matvec_rows at a time: a batched decode step of more
 * rows than one product takes reads the weights once a group (dst, x and the residual sliced
 * alike; the norm, the bias and the GLU are per row). */
static nu_status mv(nu_llm_pass *p, const nu_tensor *y, const nu_tensor *w, const nu_tensor *x,
                    const nu_matvec_desc *desc)
{
    int64_t m = x->shape[0], g = p->matvec_rows ? p->matvec_rows : NU_MATVEC_MAX_ROWS;
    if (m <= g)
        return nu_op_matvec_fused(p->c, y, w, x, desc);
    for (int64_t r = 0; r < m; r += g) {
        int64_t rows = m - r < g ? m - r : g;
        nu_tensor xs, ys, rs, ss;
        nu_matvec_desc sub = *desc;
        TRY(nu_tensor_slice(x, 0, r, rows, &xs));
        TRY(nu_tensor_slice(y, 0, r, rows, &ys));
        if (desc->residual) {
            TRY(nu_tensor_slice(desc->residual, 0, r, rows, &rs));
            sub.residual = &rs;
        }
        if (desc->stream) {
            TRY(nu_tensor_slice(desc->stream, 0, r, rows, &ss));
            sub.stream = &ss;
        }
        TRY(nu_op_matvec_fused(p->c, &ys, w, &xs, &sub));
    }
    return NU_OK;
}

/* Whether a block's post-norm and residual add ride on its last product, weight w
 * (nu_matvec_desc.post_norm: the last workgroup of the product's dispatch adds, one dependency
 * level fewer than leaving the output pending for the next norm): a fused pass, where the
 * product's kernel takes it. */
static bool post_on_product(const nu_llm_pass *p, const nu_tensor *w)
{
    return p->fused && p->post_fusion && nu_op_matvec_fuses_post_norm(nu_buffer_device(w->buffer), w, NULL);
}

/* The block dtypes the matrix units read as they are (F16 inputs, a device with them). */
static bool units_read(nu_dtype dtype)
{
    return dtype == NU_DTYPE_Q4_0_SOA || dtype == NU_DTYPE_Q6_K_SOA || dtype == NU_DTYPE_Q4_K || dtype == NU_DTYPE_Q6_K ||
           dtype == NU_DTYPE_Q8_0 || dtype == NU_DTYPE_Q4_0;
}

/* Whether a pass's products are matrix-vector products (decode's few rows, and a batched decode
 * step of fewer than matmul_rows rows). */
static bool takes_matvec(const nu_llm_pass *p)
{
    return p->rows <= p->matvec_rows || (p->graph && p->rows < p->matmul_rows);
}

/* y = x w^T (+ bias, and the GLU md asks for: the matrix product only): the matrix-vector products
 * for decode's few rows (and a batched decode step of fewer than matmul_rows rows, a group at a
 * time), else the matrix product (nu_op_matmul_ex with md); in a prefill pass
 * with F16 inputs, block (and Q4_0_SOA) weights are dequantized to F16 first (into A_W16, one
 * matrix at a time): on the H200 that was 10-28% faster at a 7B model's prefill shapes than the
 * product that dequantizes its tiles (bench/RESULTS.md, 2026-12-01: 143-183 against 101-149
 * TFLOP/s). */
static nu_status linear_d(nu_llm_pass *p, const nu_tensor *y, const nu_tensor *w, const nu_tensor *x,
                          const nu_matmul_desc *md)
{
    const nu_tensor *bias = md->bias;
    if (takes_matvec(p)) {
        nu_matvec_desc d = {.bias = bias};
        return mv(p, y, w, x, &d);
    }
    bool soa = w->dtype == NU_DTYPE_Q4_0_SOA;
    bool block = nu_dtype_block_elements(w->dtype) > 1;
    /* The block dtypes the matrix units read as they are (Q8_0, Q4_0, Q4_0_SOA, Q4_K, Q6_K, Q6_K_SOA: F16
     * inputs, a device with them): a batched decode step's rows, and a prefill pass of at most
     * direct_rows (NU_LLM_DIRECT_ROWS), then read the weights once instead of a dequantized copy made and read
     * each pass; longer prefill passes keep the copy, faster at their many rows (measured for
     * Q4_0), but for the dtypes nu_llm__weights_direct_dtype names where direct_rows is left to the
     * weights (direct_by_dtype). Elsewhere the product refuses Q4_0_SOA (NU_ERROR_INVALID_ARGUMENT) before recording,
     * and the others stay on the copy. */
    if (units_read(w->dtype) &&
        (p->graph || p->rows <= p->direct_rows || (p->direct_by_dtype && nu_llm__weights_direct_dtype(w->dtype))) &&
        x->dtype == NU_DTYPE_F16 &&
        p->matrix_units && nu_op_matmul_ex(p->c, y, x, w, md) == NU_OK)
        return NU_OK;
    if (!soa && !(p->w16 && block))
        return nu_op_matmul_ex(p->c, y, x, w, md);
    /* Matrices that fit half of A_W16 take its halves in turn: the next one's copy then waits on
     * no product but the one two before it and runs beside the product before it (a product of
     * 128 x 128 tiles holds all of a compute unit's registers only while its waves are full: the
     * copy fills the rest). A_W16 of one matrix (the default): q, k, v and o alternate, the FFN's
     * copies wait as before; of two (copy_pair): every copy, which took qwen2.5-7b Q4_K_M's
     * 512-token prompt from 9,797 / 9,677 tokens/s to 10,245 / 10,187 (H100, bench/RESULTS.md)
     * for 86 MiB more a 7B pass. */
    size_t half = nu_buffer_size(p->act[NU_LLM_A_W16]) / 2 / 16 * 16;
    bool fits = (uint64_t)nu_tensor_numel(w) * 2 <= half;
    nu_tensor w16 = nu_tensor_make(p->act[NU_LLM_A_W16], fits ? (p->w16_turn++ & 1u) * half : 0, NU_DTYPE_F16, 2,
                                   w->shape);
    TRY(nu_op_copy(p->c, &w16, w));
    return nu_op_matmul_ex(p->c, y, x, &w16, md);
}

/* linear_d with a bias only (md's GLU: only passes that take the matrix product, !takes_matvec). */
static nu_status linear_b(nu_llm_pass *p, const nu_tensor *y, const nu_tensor *w, const nu_tensor *x,
                          const nu_tensor *bias)
{
    return linear_d(p, y, w, x, &(nu_matmul_desc){.bias = bias});
}

static nu_status linear(nu_llm_pass *p, const nu_tensor *y, const nu_tensor *w, const nu_tensor *x)
{
    return linear_b(p, y, w, x, NULL);
}

/* A layer's weight of `role`, or NULL where the layer has none. */
static const nu_tensor *opt(const nu_llm_layer_w *w, nu_llm_role role)
{
    return w->has[role] ? &w->w[role] : NULL;
}

/* x (F32) in F16 in buffer b where the pass takes F16 inputs; else (or x F16 already: written so
 * by the op before) x itself. */
static nu_status input(nu_llm_pass *p, int buffer, const nu_tensor *x, nu_tensor *out)
{
    if (!p->f16_inputs || x->dtype == NU_DTYPE_F16) {
        *out = *x;
        return NU_OK;
    }
    *out = nu_tensor_make(p->act[buffer], 0, NU_DTYPE_F16, x->rank, x->shape);
    return nu_op_copy(p->c, out, x);
}

/* The pending output's post-norm, where it has one still to apply, on `rows` of tmp from `first`
 * (for a consumer other than the next norm). */
static nu_status settle_post_norm(nu_llm_pass *p, int64_t first, int64_t rows)
{
    if (!p->pending_norm)
        return NU_OK;
    nu_tensor tmp = view2(p->act[NU_LLM_A_TMP], p->rows, p->hp->cfg.dim), t;
    TRY(nu_tensor_slice(&tmp, 0, first, rows, &t));
    TRY(nu_op_rms_norm(p->c, &t, &t, p->pending_norm, p->hp->cfg.rms_eps));
    p->pending_norm = NULL;
    return NU_OK;
}

/* xn = rms_norm(x) * weight, adding a pending block output (normalised by its post-norm where it
 * has one) into x first: one op. */
static nu_status norm_to(nu_llm_pass *p, const nu_tensor *weight, const nu_tensor *xn)
{
    const nu_llm_config *c = &p->hp->cfg;
    nu_tensor x = view2(p->act[NU_LLM_A_X], p->rows, c->dim);
    if (!p->pending)
        return nu_op_rms_norm(p->c, xn, &x, weight, c->rms_eps);
    nu_tensor tmp = view2(p->act[NU_LLM_A_TMP], p->rows, c->dim);
    const nu_tensor *post = p->pending_norm;
    p->pending = false;
    p->pending_norm = NULL;
    if (post)
        return nu_op_norm_add_rms_norm(p->c, &x, xn, &x, &tmp, post, weight, c->rms_eps);
    return nu_op_add_rms_norm(p->c, &x, xn, &x, &tmp, weight, c->rms_eps);
}

static nu_status norm(nu_llm_pass *p, const nu_tensor *weight)
{
    nu_tensor xn = view2(p->act[NU_LLM_A_XN], p->rows, p->hp->cfg.dim);
    return norm_to(p, weight, &xn);
}

/* The normalised x as the products take it (*out): where the pass takes F16 inputs, the norm
 * writes it in F16 into A_H16 itself (no copy after it; x, the residual stream, stays F32);
 * else xn in A_XN. */
static nu_status norm_input(nu_llm_pass *p, const nu_tensor *weight, nu_tensor *out)
{
    int64_t shape[2] = {p->rows, p->hp->cfg.dim};
    *out = p->f16_inputs ? nu_tensor_make(p->act[NU_LLM_A_H16], 0, NU_DTYPE_F16, 2, shape)
                         : view2(p->act[NU_LLM_A_XN], shape[0], shape[1]);
    return norm_to(p, weight, out);
}

/* Whether a separate-ops pass takes q|k|v and gate|up each as one product over the stacked
 * matrices (where the layer has them): a graph's (a decode step's) rows, as nu_llm__stacked_rows
 * says (blocks.h). */
bool nu_llm__stacked_rows(uint32_t rows, bool w16) { return rows == 1 || !w16; }

static bool stacked_products(const nu_llm_pass *p)
{
    return p->graph && nu_llm__stacked_rows(p->rows, p->w16);
}

/* The fused products' input: x, normalised by the product itself (norm_weight), unless a block's
 * output is pending: then it is added and x normalised into xn first (nu_op_add_rms_norm), and the
 * products read xn as it is. */
static nu_status fused_input(nu_llm_pass *p, const nu_tensor *weight, nu_matvec_desc *in, nu_tensor *src)
{
    const nu_llm_config *c = &p->hp->cfg;
    if (!p->pending) {
        *src = view2(p->act[NU_LLM_A_X], p->rows, c->dim);
        in->norm_weight = weight, in->norm_eps = c->rms_eps;
        return NU_OK;
    }
    *src = view2(p->act[NU_LLM_A_XN], p->rows, c->dim);
    return norm(p, weight);
}

/* A block's output ([rows, dim] in A_TMP) left pending with the layer's post-norm where it has one
 * (Gemma's sandwich norms): the next norm normalises it, adds it to x and normalises x, one op
 * (nu_op_norm_add_rms_norm, the same bits as the post-norm's own op, then nu_op_add_rms_norm). */
static nu_status leave_pending(nu_llm_pass *p, const nu_tensor *post_norm)
{
    p->pending = true;
    p->pending_norm = post_norm;
    return NU_OK;
}

/* Whether the pass's attention takes the fresh form (nu_attention_desc.fresh_k: the per-head norms,
 * RoPE on q and the new keys, and both cache writes, inside attention's dispatch): one row of the
 * scalar form, or the per-row form's rows where each has a slot of its own (a batched decode
 * step: the fresh rows do not see each other's keys). */
static bool fresh_form(const nu_llm_pass *p) { return p->fresh && (p->per_row ? p->distinct_slots : p->rows == 1); }

/* The per-head RMSNorms of q and k (Qwen3, Gemma 3) where the layer has them: into A_Q and A_K
 * (contiguous; in place where q3 and k3 are those already), which q3 and k3 then view; in the
 * fresh form attention applies them. */
static nu_status qk_norms(nu_llm_pass *p, const nu_llm_layer_w *w, nu_tensor *q3, nu_tensor *k3)
{
    const nu_llm_config *c = &p->hp->cfg;
    if (fresh_form(p))
        return NU_OK;
    if (w->has[NU_LLM_W_Q_NORM]) {
        nu_tensor qn = view3(p->act[NU_LLM_A_Q], p->rows, c->heads, c->head_dim);
        TRY(nu_op_rms_norm(p->c, &qn, q3, &w->w[NU_LLM_W_Q_NORM], c->rms_eps));
        *q3 = qn;
    }
    if (w->has[NU_LLM_W_K_NORM]) {
        nu_tensor kn = view3(p->act[NU_LLM_A_K], p->rows, c->kv_heads, c->head_dim);
        TRY(nu_op_rms_norm(p->c, &kn, k3, &w->w[NU_LLM_W_K_NORM], c->rms_eps));
        *k3 = kn;
    }
    return NU_OK;
}

/* Prefetches of `bytes` (0: all) of w, split evenly over n tensors of it (each its first part),
 * ordered after the op writing `anchor`. */
static nu_status prefetch_parts(nu_llm_pass *p, const nu_tensor *const *w, int n, uint64_t bytes, const nu_tensor *anchor)
{
    for (int i = 0; i < n; i++) {
        uint64_t span = nu_tensor_span_bytes(w[i]), want = bytes ? bytes / (uint64_t)n : 0;
        nu_prefetch_desc d = {.bytes = want < span ? want : 0, .after = anchor};
        TRY(nu_op_prefetch(p->c, w[i], &d));
    }
    return NU_OK;
}

/* The weights the pass's plan reads ahead in the level of the op at `at` (which reads `anchor`,
 * written by the op before it): a one-row fused graph's only. */
static nu_status read_ahead(nu_llm_pass *p, const nu_llm_layer_w *w, nu_llm_at at, const nu_tensor *anchor)
{
    const nu_llm_prefetch *plan = p->ahead;
    if (!plan || !p->graph || !p->fused || p->per_row || p->rows != 1)
        return NU_OK;
    for (int t = 0; t < NU_LLM_AHEAD_COUNT; t++) {
        if (plan->at[t] != at)
            continue;
        const nu_tensor *m[3];
        int n = 0;
        const nu_llm_layer_w *nx = p->next_layer;
        switch ((nu_llm_ahead)t) {
        case NU_LLM_AHEAD_O: m[n++] = &w->w[NU_LLM_W_O]; break;
        case NU_LLM_AHEAD_GU:
            m[n++] = &w->w[NU_LLM_W_GATE];
            if (w->has[NU_LLM_W_UP])
                m[n++] = &w->w[NU_LLM_W_UP];
            break;
        case NU_LLM_AHEAD_DOWN: m[n++] = &w->w[NU_LLM_W_DOWN]; break;
        case NU_LLM_AHEAD_QKV_NEXT:
            if (!nx)
                break;
            if (nx->qkv_stacked) {
                m[n++] = &nx->qkv;
            } else {
                m[n++] = &nx->w[NU_LLM_W_Q];
                m[n++] = &nx->w[NU_LLM_W_K];
                m[n++] = &nx->w[NU_LLM_W_V];
            }
            break;
        default: break;
        }
        TRY(prefetch_parts(p, m, n, plan->bytes[t], anchor));
    }
    return NU_OK;
}

/* Whether layer `layer` is a sliding-window one, and its window (0: none). */
static uint32_t layer_window(const nu_llm_hparams *hp, uint32_t layer)
{
    return hp->window && layer < NU_LLM_MAX_LAYERS && hp->swa[layer] ? hp->window : 0;
}

/* RoPE as the architecture reads it for the layer: its base and linear position scaling (a
 * sliding-window layer's own, where set), the frequency divisors, the attention factor. */
static nu_rope_desc layer_rope(const nu_llm_pass *p, uint32_t layer)
{
    const nu_llm_hparams *hp = p->hp;
    bool swa = layer_window(hp, layer) != 0;
    float theta = swa && hp->swa_theta ? hp->swa_theta : hp->cfg.rope_theta;
    float linear = swa && hp->swa_linear ? hp->swa_linear : hp->rope_linear;
    return (nu_rope_desc){.layout = hp->rope_layout, .theta = theta, .linear_factor = linear,
                          .freq_factors = p->rope_freqs, .attn_factor = hp->rope_attn_factor};
}

/* The q [rows, heads, head_dim], k and v [rows, kv_heads, head_dim] views of a stacked q|k|v
 * product's output `all` (in A_QKV). */
static void split_qkv(nu_llm_pass *p, nu_tensor *q3, nu_tensor *k3, nu_tensor *v3)
{
    const nu_llm_config *c = &p->hp->cfg;
    int64_t R = p->rows, H = c->heads, KVH = c->kv_heads, HD = c->head_dim, all = (H + 2 * KVH) * HD;
    int64_t qs[3] = {R, H, HD}, ks[3] = {R, KVH, HD};
    *q3 = nu_tensor_make(p->act[NU_LLM_A_QKV], 0, NU_DTYPE_F32, 3, qs);
    *k3 = nu_tensor_make(p->act[NU_LLM_A_QKV], (uint64_t)(H * HD) * 4, NU_DTYPE_F32, 3, ks);
    *v3 = nu_tensor_make(p->act[NU_LLM_A_QKV], (uint64_t)((H + KVH) * HD) * 4, NU_DTYPE_F32, 3, ks);
    q3->strides[0] = k3->strides[0] = v3->strides[0] = all; /* rows of [q | k | v] */
}

/* Whether q, k and v take one product: their matrices stacked, and their biases too if any. */
static bool one_qkv(const nu_llm_layer_w *w)
{
    return w->qkv_stacked && (!w->has[NU_LLM_W_Q_BIAS] || w->qkv_bias_stacked);
}

/* RoPE on q (into q_out) and the cache writes of k (rotated) and v for the pass's rows, and the
 * attention that reads them, into att; graph parameters declared where the pass is a graph. The
 * fresh form reads q3 as it is (q_out unused) and does all of it in one dispatch. */
static nu_status rope_and_attend(nu_llm_pass *p, const nu_llm_layer_w *w, uint32_t layer, const nu_tensor *q3,
                                 const nu_tensor *k3, const nu_tensor *v3, const nu_tensor *q_out,
                                 const nu_tensor *att3)
{
    const nu_llm_hparams *hp = p->hp;
    nu_rope_desc rope = layer_rope(p, layer);
    uint32_t window = layer_window(hp, layer);
    if (p->per_row) {
        nu_tensor kc = nu_llm__kv_k(p->kv, layer), vc = nu_llm__kv_v(p->kv, layer);
        nu_attention_desc ad = {.scale = hp->attn_scale, .positions = &p->positions, .slots = &p->slots,
                                .max_length = p->max_kv, .window = window, .softcap = hp->attn_softcap};
        ad.tune.path = NU_ATTENTION_PATH_DECODE; /* rows of different sequences: each on its own */
        if (fresh_form(p)) { /* q3 read as it is (in F32 also where the pass takes F16 inputs) */
            ad.fresh_k = k3, ad.fresh_v = v3, ad.fresh_rope = &rope;
            ad.fresh_q_norm = opt(w, NU_LLM_W_Q_NORM), ad.fresh_k_norm = opt(w, NU_LLM_W_K_NORM);
            ad.fresh_norm_eps = hp->cfg.rms_eps;
            return nu_op_attention(p->c, att3, q3, &kc, &vc, &ad);
        }
        nu_rope_desc rope_q = rope, rope_k = rope;
        rope_q.positions = &p->positions;
        nu_kv_write_desc kw = {&p->positions, &p->slots, &rope_k}, vw = {&p->positions, &p->slots, NULL};
        TRY(nu_op_rope(p->c, q_out, q3, &rope_q));
        TRY(nu_op_kv_write(p->c, &kc, k3, &kw));
        TRY(nu_op_kv_write(p->c, &vc, v3, &vw));
        nu_tensor qa;
        TRY(input(p, NU_LLM_A_Q16, q_out, &qa));
        return nu_op_attention(p->c, att3, &qa, &kc, &vc, &ad);
    }
    nu_llm_layer_params *pp = p->graph ? &p->params[layer] : NULL;
    nu_tensor kc = nu_llm__kv_slot(p->kv, false, layer, p->slot), vc = nu_llm__kv_slot(p->kv, true, layer, p->slot);
    if (fresh_form(p)) {
        /* the row at kv_length - 1: a graph's kv_length is a launch parameter (recorded with the
         * most keys, so that the split count suits the longest context) */
        nu_attention_desc ad = {.scale = hp->attn_scale, .kv_length = p->graph ? p->max_kv : p->start + 1,
                                .window = window, .softcap = hp->attn_softcap, .fresh_k = k3, .fresh_v = v3,
                                .fresh_rope = &rope, .fresh_q_norm = opt(w, NU_LLM_W_Q_NORM),
                                .fresh_k_norm = opt(w, NU_LLM_W_K_NORM), .fresh_norm_eps = hp->cfg.rms_eps};
        TRY(read_ahead(p, w, NU_LLM_AT_ATTN, q3));
        TRY(nu_op_attention(p->c, att3, q3, &kc, &vc, &ad));
        if (pp) {
            TRY(nu_op_graph_param(p->c, NU_OP_VALUE_KV_LENGTH, &pp->kv_len));
            pp->fresh = true, pp->windowed = false;
        }
        return NU_OK;
    }
    nu_rope_desc rope_q = rope, rope_k = rope; /* k: the append's position drives it */
    rope_q.position_offset = (int32_t)p->start;
    TRY(nu_op_rope(p->c, q_out, q3, &rope_q));
    if (pp)
        TRY(nu_op_graph_param(p->c, NU_OP_VALUE_POSITION, &pp->q_rope));
    TRY(nu_op_kv_append_rope(p->c, &kc, k3, p->start, &rope_k));
    if (pp)
        TRY(nu_op_graph_param(p->c, NU_OP_VALUE_POSITION, &pp->k_pos));
    TRY(nu_op_kv_append(p->c, &vc, v3, p->start));
    if (pp)
        TRY(nu_op_graph_param(p->c, NU_OP_VALUE_POSITION, &pp->v_pos));
    nu_tensor qa;
    TRY(input(p, NU_LLM_A_Q16, q_out, &qa));
    TRY(read_ahead(p, w, NU_LLM_AT_ATTN, &qa));
    /* A graph's one row needs no mask unless it has a window (its position is then a launch
     * parameter too); its kv_length is a launch parameter (recorded with the most keys, so that
     * the split count suits the longest context). */
    nu_attention_desc ad = {hp->attn_scale, !p->graph || window, p->start, p->graph ? p->max_kv : p->start + p->rows};
    ad.window = window, ad.softcap = hp->attn_softcap;
    TRY(nu_op_attention(p->c, att3, &qa, &kc, &vc, &ad));
    if (pp)
        TRY(nu_op_graph_param(p->c, NU_OP_VALUE_KV_LENGTH, &pp->kv_len));
    if (pp && window)
        TRY(nu_op_graph_param(p->c, NU_OP_VALUE_Q_POSITION, &pp->q_pos));
    if (pp)
        pp->windowed = window != 0;
    return NU_OK;
}

/* The fused decode layer's attention half (blocks.h). */
static nu_status attention_fused(nu_llm_pass *p, const nu_llm_layer_w *w, uint32_t layer)
{
    const nu_llm_config *c = &p->hp->cfg;
    int64_t R = p->rows, D = c->dim, H = c->heads, KVH = c->kv_heads, HD = c->head_dim;
    nu_buffer **a = p->act;
    nu_tensor x = view2(a[NU_LLM_A_X], R, D), src, q3, k3, v3;
    nu_matvec_desc in = {0};
    TRY(fused_input(p, &w->w[NU_LLM_W_ATTN_NORM], &in, &src));
    if (one_qkv(w)) { /* one product into [q | k | v] a row */
        nu_tensor qkv = view2(a[NU_LLM_A_QKV], R, (H + 2 * KVH) * HD);
        in.bias = w->has[NU_LLM_W_Q_BIAS] ? &w->qkv_bias : NULL;
        TRY(mv(p, &qkv, &w->qkv, &src, &in));
        split_qkv(p, &q3, &k3, &v3);
    } else {
        /* q's product into A_ATT's rows (rotated into A_Q, before attention writes A_ATT), or into
         * A_Q in the fresh form (which attention reads as it is) */
        int qa = fresh_form(p) ? NU_LLM_A_Q : NU_LLM_A_ATT;
        nu_tensor q2 = view2(a[qa], R, H * HD), k2 = view2(a[NU_LLM_A_K], R, KVH * HD),
                  v2 = view2(a[NU_LLM_A_V], R, KVH * HD);
        q3 = view3(a[qa], R, H, HD), k3 = view3(a[NU_LLM_A_K], R, KVH, HD);
        v3 = view3(a[NU_LLM_A_V], R, KVH, HD);
        in.bias = opt(w, NU_LLM_W_Q_BIAS);
        TRY(mv(p, &q2, &w->w[NU_LLM_W_Q], &src, &in));
        in.bias = opt(w, NU_LLM_W_K_BIAS);
        TRY(mv(p, &k2, &w->w[NU_LLM_W_K], &src, &in));
        in.bias = opt(w, NU_LLM_W_V_BIAS);
        TRY(mv(p, &v2, &w->w[NU_LLM_W_V], &src, &in));
    }
    TRY(qk_norms(p, w, &q3, &k3));
    TRY(read_ahead(p, w, NU_LLM_AT_ROPE, &q3));
    nu_tensor qr = view3(a[NU_LLM_A_Q], R, H, HD), att3 = view3(a[NU_LLM_A_ATT], R, H, HD);
    TRY(rope_and_attend(p, w, layer, &q3, &k3, &v3, &qr, &att3));
    nu_tensor att2 = view2(a[NU_LLM_A_ATT], R, H * HD);
    TRY(read_ahead(p, w, NU_LLM_AT_O, &att2));
    if (w->has[NU_LLM_W_ATTN_POST_NORM]) { /* the post-norm comes between the product and the add */
        nu_tensor tmp = view2(a[NU_LLM_A_TMP], R, D);
        const nu_tensor *post = &w->w[NU_LLM_W_ATTN_POST_NORM];
        if (post_on_product(p, &w->w[NU_LLM_W_O])) { /* x += post_norm(att Wo^T), one dispatch */
            nu_matvec_desc pd = {.post_norm = post, .stream = &x, .post_norm_eps = c->rms_eps};
            return mv(p, &tmp, &w->w[NU_LLM_W_O], &att2, &pd);
        }
        TRY(mv(p, &tmp, &w->w[NU_LLM_W_O], &att2, &(nu_matvec_desc){0}));
        return leave_pending(p, post);
    }
    nu_matvec_desc add = {.residual = &x};
    return mv(p, &x, &w->w[NU_LLM_W_O], &att2, &add); /* x += att Wo^T */
}

nu_status nu_llm__blk_attention(nu_llm_pass *p, const nu_llm_layer_w *w, uint32_t layer)
{
    if (p->fused)
        return attention_fused(p, w, layer);
    const nu_llm_config *c = &p->hp->cfg;
    int64_t R = p->rows, H = c->heads, KVH = c->kv_heads, HD = c->head_dim;
    nu_buffer **a = p->act;
    nu_tensor in;
    TRY(norm_input(p, &w->w[NU_LLM_W_ATTN_NORM], &in));
    nu_tensor q3 = view3(a[NU_LLM_A_Q], R, H, HD), k3 = view3(a[NU_LLM_A_K], R, KVH, HD),
              v3 = view3(a[NU_LLM_A_V], R, KVH, HD);
    if (stacked_products(p) && one_qkv(w)) { /* one product into [q | k | v] a row */
        nu_tensor all = view2(a[NU_LLM_A_QKV], R, (H + 2 * KVH) * HD);
        TRY(linear_b(p, &all, &w->qkv, &in, w->has[NU_LLM_W_Q_BIAS] ? &w->qkv_bias : NULL));
        split_qkv(p, &q3, &k3, &v3);
    } else {
        nu_tensor q2 = view2(a[NU_LLM_A_Q], R, H * HD), k2 = view2(a[NU_LLM_A_K], R, KVH * HD),
                  v2 = view2(a[NU_LLM_A_V], R, KVH * HD);
        TRY(linear_b(p, &q2, &w->w[NU_LLM_W_Q], &in, opt(w, NU_LLM_W_Q_BIAS)));
        TRY(linear_b(p, &k2, &w->w[NU_LLM_W_K], &in, opt(w, NU_LLM_W_K_BIAS)));
        TRY(linear_b(p, &v2, &w->w[NU_LLM_W_V], &in, opt(w, NU_LLM_W_V_BIAS)));
    }
    TRY(qk_norms(p, w, &q3, &k3));
    /* F16 inputs: RoPE writes q in F16 into A_Q16 and attention its output in F16 into A_H16,
     * as the next ops take them (no copies); else q is rotated into A_Q (in place where q3 is
     * that view already) and the output is F32. */
    bool f16 = p->f16_inputs;
    int64_t qs[3] = {R, H, HD}, os[2] = {R, H * HD};
    nu_dtype odt = f16 ? NU_DTYPE_F16 : NU_DTYPE_F32;
    nu_buffer *ob = a[f16 ? NU_LLM_A_H16 : NU_LLM_A_ATT];
    nu_tensor qr = f16 ? nu_tensor_make(a[NU_LLM_A_Q16], 0, NU_DTYPE_F16, 3, qs) : view3(a[NU_LLM_A_Q], R, H, HD);
    nu_tensor att3 = nu_tensor_make(ob, 0, odt, 3, qs), att2 = nu_tensor_make(ob, 0, odt, 2, os);
    TRY(rope_and_attend(p, w, layer, &q3, &k3, &v3, &qr, &att3));
    nu_tensor tmp = view2(a[NU_LLM_A_TMP], R, c->dim);
    TRY(linear(p, &tmp, &w->w[NU_LLM_W_O], &att2));
    return leave_pending(p, opt(w, NU_LLM_W_ATTN_POST_NORM));
}

/* *out = act(gate) * up, act the architecture's GLU activation (one nu_op_glu), as the down
 * product takes it: in F16 into A_H16 where the pass takes F16 inputs (the GLU's own output: no
 * copy), else F32 into A_GATE (gate may be that view itself). */
static nu_status glu_input(nu_llm_pass *p, const nu_tensor *gate, const nu_tensor *up, nu_tensor *out)
{
    int64_t shape[2] = {p->rows, p->hp->cfg.ffn};
    *out = p->f16_inputs ? nu_tensor_make(p->act[NU_LLM_A_H16], 0, NU_DTYPE_F16, 2, shape)
                         : view2(p->act[NU_LLM_A_GATE], shape[0], shape[1]);
    return nu_op_glu(p->c, p->hp->act, out, gate, up);
}

nu_status nu_llm__blk_ffn(nu_llm_pass *p, const nu_llm_layer_w *w)
{
    const nu_llm_config *c = &p->hp->cfg;
    int64_t R = p->rows, D = c->dim, F = c->ffn;
    nu_buffer **a = p->act;
    nu_tensor x = view2(a[NU_LLM_A_X], R, D), h = view2(a[NU_LLM_A_GATE], R, F), tmp = view2(a[NU_LLM_A_TMP], R, D);
    const nu_tensor *post = opt(w, NU_LLM_W_FFN_POST_NORM);
    if (p->fused) {
        nu_matvec_desc in = {.glu_up = &w->w[NU_LLM_W_UP], .glu = p->hp->act};
        nu_tensor src;
        TRY(fused_input(p, &w->w[NU_LLM_W_FFN_NORM], &in, &src));
        TRY(read_ahead(p, w, NU_LLM_AT_GU, &src));
        TRY(mv(p, &h, &w->w[NU_LLM_W_GATE], &src, &in));
        TRY(read_ahead(p, w, NU_LLM_AT_DOWN, &h));
        if (post && post_on_product(p, &w->w[NU_LLM_W_DOWN])) { /* x += post_norm(h Wd^T), one dispatch */
            nu_matvec_desc pd = {.post_norm = post, .stream = &x, .post_norm_eps = c->rms_eps};
            return mv(p, &tmp, &w->w[NU_LLM_W_DOWN], &h, &pd);
        }
        if (post) {
            TRY(mv(p, &tmp, &w->w[NU_LLM_W_DOWN], &h, &(nu_matvec_desc){0}));
            return leave_pending(p, post);
        }
        nu_matvec_desc add = {.residual = &x};
        return mv(p, &x, &w->w[NU_LLM_W_DOWN], &h, &add); /* x += h Wd^T */
    }
    nu_tensor in, hin;
    TRY(norm_input(p, &w->w[NU_LLM_W_FFN_NORM], &in));
    if (stacked_products(p) && w->gate_up_stacked && p->product_glu && !takes_matvec(p)) {
        /* one product of [gate; up] gated by its own last dispatch (nu_matmul_desc.glu_stacked: the
         * sum of split k's partials, which a batched decode step's few rows take anyway) */
        int64_t shape[2] = {R, F}; /* (A_H16 holds the product's input: F16 goes into A_GATE) */
        hin = p->f16_inputs ? nu_tensor_make(a[NU_LLM_A_GATE], 0, NU_DTYPE_F16, 2, shape) : h;
        nu_matmul_desc glu = {.glu_stacked = true, .glu = p->hp->act};
        TRY(linear_d(p, &hin, &w->gate_up, &in, &glu));
    } else if (stacked_products(p) && w->gate_up_stacked) { /* one product into [gate | up] a row */
        nu_tensor all = view2(a[NU_LLM_A_GU], R, 2 * F), g, u;
        TRY(linear(p, &all, &w->gate_up, &in));
        TRY(nu_tensor_slice(&all, 1, 0, F, &g));
        TRY(nu_tensor_slice(&all, 1, F, F, &u));
        TRY(glu_input(p, &g, &u, &hin));
    } else {
        nu_tensor up = view2(a[NU_LLM_A_UP], R, F);
        TRY(linear(p, &h, &w->w[NU_LLM_W_GATE], &in));
        TRY(linear(p, &up, &w->w[NU_LLM_W_UP], &in));
        TRY(glu_input(p, &h, &up, &hin));
    }
    TRY(linear(p, &tmp, &w->w[NU_LLM_W_DOWN], &hin));
    return leave_pending(p, post);
}

nu_status nu_llm__blk_layer(nu_llm_pass *p, const nu_llm_layer_w *w, uint32_t layer)
{
    TRY(nu_llm__blk_attention(p, w, layer));
    return nu_llm__blk_ffn(p, w);
}

bool nu_llm__blk_hands_pending(const nu_llm_pass *p, const nu_llm_layer_w *w)
{
    return p->fused && w->has[NU_LLM_W_FFN_POST_NORM] && !post_on_product(p, &w->w[NU_LLM_W_DOWN]);
}

/* Row `row` on of `stage` as [rows, dim] F32. */
static nu_tensor stage_rows(const nu_llm_pass *p, nu_buffer *stage, uint32_t row)
{
    int64_t shape[2] = {p->rows, p->hp->cfg.dim};
    return nu_tensor_make(stage, (uint64_t)row * (uint64_t)shape[1] * 4, NU_DTYPE_F32, 2, shape);
}

nu_status nu_llm__blk_stage_in(nu_llm_pass *p, nu_buffer *stage, uint32_t cap, const nu_llm_layer_w *w)
{
    nu_tensor x = view2(p->act[NU_LLM_A_X], p->rows, p->hp->cfg.dim), in = stage_rows(p, stage, 0);
    TRY(nu_op_copy(p->c, &x, &in));
    p->pending = nu_llm__blk_hands_pending(p, w);
    p->pending_norm = NULL; /* (the last device normalised what it handed on) */
    if (!p->pending)
        return NU_OK;
    nu_tensor tmp = view2(p->act[NU_LLM_A_TMP], p->rows, p->hp->cfg.dim), pending = stage_rows(p, stage, cap);
    return nu_op_copy(p->c, &tmp, &pending);
}

nu_status nu_llm__blk_stage_out(nu_llm_pass *p, nu_buffer *stage, uint32_t cap, const nu_llm_layer_w *w,
                                bool *handed)
{
    nu_tensor x = view2(p->act[NU_LLM_A_X], p->rows, p->hp->cfg.dim), out = stage_rows(p, stage, 0);
    nu_tensor tmp = view2(p->act[NU_LLM_A_TMP], p->rows, p->hp->cfg.dim);
    *handed = nu_llm__blk_hands_pending(p, w);
    if (p->pending)
        TRY(settle_post_norm(p, 0, p->rows));
    if (p->pending && !*handed) { /* the separate ops: added here as their next norm would */
        TRY(nu_op_add(p->c, &x, &x, &tmp));
        p->pending = false;
    }
    if (p->pending != *handed)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "nu_llm_model: a layer split here leaves a block's output %s to "
                            "add, which the next device would not expect", p->pending ? "pending" : "not pending");
    TRY(nu_op_copy(p->c, &out, &x));
    if (!p->pending)
        return NU_OK;
    nu_tensor pending = stage_rows(p, stage, cap);
    return nu_op_copy(p->c, &pending, &tmp);
}

nu_status nu_llm__blk_embed(nu_llm_pass *p, const nu_tensor *embed, const nu_tensor *ids)
{
    nu_tensor x = view2(p->act[NU_LLM_A_X], p->rows, p->hp->cfg.dim);
    p->pending = false;
    p->pending_norm = NULL;
    TRY(nu_op_gather(p->c, &x, embed, ids));
    return p->hp->embed_scale ? nu_op_scale(p->c, &x, &x, p->hp->embed_scale) : NU_OK;
}

/* A decode step's logits (more rows than a matrix-vector product takes, F16 inputs) from a block
 * output matrix the matrix units read as it is: its rows normalised into A_H16 in F16, then one
 * product, which reads the matrix once instead of once every NU_MATVEC_MAX_ROWS rows. False where
 * that does not apply (or the product refuses the shape): the caller takes the other path. */
static bool logits_on_units(nu_llm_pass *p, const nu_tensor *logits, const nu_tensor *last, const nu_tensor *out_norm,
                            const nu_tensor *output)
{
    int64_t shape[2] = {logits->shape[0], p->hp->cfg.dim};
    if (shape[0] <= NU_MATVEC_MAX_ROWS || !p->f16_inputs || !p->matrix_units || !units_read(output->dtype))
        return false;
    nu_tensor x16 = nu_tensor_make(p->act[NU_LLM_A_H16], 0, NU_DTYPE_F16, 2, shape);
    return nu_op_rms_norm(p->c, &x16, last, out_norm, p->hp->cfg.rms_eps) == NU_OK &&
           nu_op_matmul(p->c, logits, &x16, output, NULL) == NU_OK;
}

nu_status nu_llm__blk_logits(nu_llm_pass *p, const nu_tensor *out_norm, const nu_tensor *output,
                             const nu_tensor *logits, const nu_tensor *next)
{
    const nu_llm_config *c = &p->hp->cfg;
    int64_t R = p->rows, D = c->dim, out_rows = logits->shape[0], first = R - out_rows;
    nu_tensor x = view2(p->act[NU_LLM_A_X], R, D), last;
    if (p->pending) { /* the last block's output: only the rows with logits need it */
        TRY(settle_post_norm(p, first, out_rows));
        nu_tensor tmp = view2(p->act[NU_LLM_A_TMP], R, D), xl, tl;
        TRY(nu_tensor_slice(&x, 0, first, out_rows, &xl));
        TRY(nu_tensor_slice(&tmp, 0, first, out_rows, &tl));
        TRY(nu_op_add(p->c, &xl, &xl, &tl));
        p->pending = false;
    }
    TRY(nu_tensor_slice(&x, 0, first, out_rows, &last));
    if (p->fused) {
        nu_matvec_desc in = {.norm_weight = out_norm, .norm_eps = c->rms_eps};
        TRY(mv(p, logits, output, &last, &in));
    } else if (!logits_on_units(p, logits, &last, out_norm, output)) {
        nu_tensor xl = view2(p->act[NU_LLM_A_XN], out_rows, D);
        TRY(nu_op_rms_norm(p->c, &xl, &last, out_norm, c->rms_eps));
        bool is_float = output->dtype == NU_DTYPE_F32 || output->dtype == NU_DTYPE_F16 || output->dtype == NU_DTYPE_BF16;
        /* Block or repacked output matrices (too large for the F16 scratch of a layer's matrices):
         * matrix-vector products of up to NU_MATVEC_MAX_ROWS rows at a time. */
        if (out_rows > NU_MATVEC_MAX_ROWS && is_float)
            TRY(nu_op_matmul(p->c, logits, &xl, output, NULL));
        for (int64_t r = 0; !(out_rows > NU_MATVEC_MAX_ROWS && is_float) && r < out_rows; r += NU_MATVEC_MAX_ROWS) {
            int64_t k = out_rows - r < NU_MATVEC_MAX_ROWS ? out_rows - r : NU_MATVEC_MAX_ROWS;
            nu_tensor xr, lr;
            TRY(nu_tensor_slice(&xl, 0, r, k, &xr));
            TRY(nu_tensor_slice(logits, 0, r, k, &lr));
            TRY(nu_op_matvec(p->c, &lr, output, &xr));
        }
    }
    if (p->hp->final_softcap)
        TRY(nu_op_unary(p->c, NU_UNARY_SOFTCAP, logits, logits, p->hp->final_softcap));
    return next ? nu_op_argmax(p->c, next, logits) : NU_OK;
}
