/* blocks.c: the shared blocks of a decoder layer (blocks.h). */
#include "blocks.h"

#include <string.h>

#define TRY(call)                                                                                                  \
    do {                                                                                                           \
        nu_status st_ = (call);                                                                                    \
        if (st_ != NU_OK)                                                                                          \
            return st_;                                                                                            \
    } while (0)

void nu_llm__act_sizes(const nu_llm_hparams *hp, uint32_t rows, bool w16, size_t *sizes)
{
    const nu_llm_config *c = &hp->cfg;
    size_t R = rows, D = c->dim, Q = (size_t)c->heads * c->head_dim, KV = (size_t)c->kv_heads * c->head_dim, F = c->ffn;
    size_t widest = D > Q ? (D > F ? D : F) : (Q > F ? Q : F);
    size_t s[NU_LLM_A_COUNT] = {
        [NU_LLM_A_X] = R * D * 4, [NU_LLM_A_XN] = R * D * 4, [NU_LLM_A_Q] = R * Q * 4, [NU_LLM_A_K] = R * KV * 4,
        [NU_LLM_A_V] = R * KV * 4, [NU_LLM_A_ATT] = R * Q * 4, [NU_LLM_A_TMP] = R * D * 4,
        [NU_LLM_A_GATE] = R * F * 4, [NU_LLM_A_UP] = R * F * 4,
        [NU_LLM_A_QKV] = R * (Q + 2 * KV) * 4,
        [NU_LLM_A_GU] = 2 * F * 4, [NU_LLM_A_H16] = R * widest * 2, [NU_LLM_A_Q16] = R * Q * 2,
        /* a layer's largest matrix as F16 (prefill of block weights) */
        [NU_LLM_A_W16] = w16 ? D * (Q > F ? Q : F) * 2 : 4};
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
 * alike; the norm and the GLU are per row). */
static nu_status mv(nu_llm_pass *p, const nu_tensor *y, const nu_tensor *w, const nu_tensor *x,
                    const nu_matvec_desc *desc)
{
    int64_t m = x->shape[0], g = p->matvec_rows ? p->matvec_rows : NU_MATVEC_MAX_ROWS;
    if (m <= g)
        return nu_op_matvec_fused(p->c, y, w, x, desc);
    for (int64_t r = 0; r < m; r += g) {
        int64_t rows = m - r < g ? m - r : g;
        nu_tensor xs, ys, rs;
        nu_matvec_desc sub = *desc;
        TRY(nu_tensor_slice(x, 0, r, rows, &xs));
        TRY(nu_tensor_slice(y, 0, r, rows, &ys));
        if (desc->residual) {
            TRY(nu_tensor_slice(desc->residual, 0, r, rows, &rs));
            sub.residual = &rs;
        }
        TRY(nu_op_matvec_fused(p->c, &ys, w, &xs, &sub));
    }
    return NU_OK;
}

/* y = x w^T: matvec for decode's few rows, else the matrix product; in a prefill pass with F16
 * inputs, block (and Q4_0_SOA) weights are dequantized to F16 first (into A_W16, one matrix at a
 * time): on the H200 that was 10-28% faster at a 7B model's prefill shapes than the product that
 * dequantizes its tiles (bench/RESULTS.md, 2026-12-01: 143-183 against 101-149 TFLOP/s). */
static nu_status linear(nu_llm_pass *p, const nu_tensor *y, const nu_tensor *w, const nu_tensor *x)
{
    if (p->rows <= p->matvec_rows || (p->graph && p->rows < p->matmul_rows)) {
        static const nu_matvec_desc none;
        return mv(p, y, w, x, &none);
    }
    bool soa = w->dtype == NU_DTYPE_Q4_0_SOA;
    bool block = nu_dtype_block_elements(w->dtype) > 1;
    /* Q4_0_SOA as it is where the matrix units take it (F16 inputs, a device with them): a batched
     * decode step's few rows then read the weights once instead of a dequantized copy made and
     * read each step; prefill passes (command buffers) keep the copy, faster at their many rows. Elsewhere the
     * product refuses Q4_0_SOA (NU_ERROR_INVALID_ARGUMENT) before recording anything. */
    if (soa && p->graph && x->dtype == NU_DTYPE_F16 && nu_op_matmul(p->c, y, x, w, NULL) == NU_OK)
        return NU_OK;
    if (!soa && !(p->w16 && block))
        return nu_op_matmul(p->c, y, x, w, NULL);
    nu_tensor w16 = nu_tensor_make(p->act[NU_LLM_A_W16], 0, NU_DTYPE_F16, 2, w->shape);
    TRY(nu_op_copy(p->c, &w16, w));
    return nu_op_matmul(p->c, y, x, &w16, NULL);
}

/* x (F32) in F16 in buffer b where the pass takes F16 inputs; else x itself. */
static nu_status input(nu_llm_pass *p, int buffer, const nu_tensor *x, nu_tensor *out)
{
    if (!p->f16_inputs) {
        *out = *x;
        return NU_OK;
    }
    *out = nu_tensor_make(p->act[buffer], 0, NU_DTYPE_F16, x->rank, x->shape);
    return nu_op_copy(p->c, out, x);
}

/* xn = rms_norm(x) * weight, adding a pending block output into x first (one op). */
static nu_status norm(nu_llm_pass *p, const nu_tensor *weight)
{
    const nu_llm_config *c = &p->hp->cfg;
    nu_tensor x = view2(p->act[NU_LLM_A_X], p->rows, c->dim), xn = view2(p->act[NU_LLM_A_XN], p->rows, c->dim);
    if (!p->pending)
        return nu_op_rms_norm(p->c, &xn, &x, weight, c->rms_eps);
    nu_tensor tmp = view2(p->act[NU_LLM_A_TMP], p->rows, c->dim);
    p->pending = false;
    return nu_op_add_rms_norm(p->c, &x, &xn, &x, &tmp, weight, c->rms_eps);
}

/* RoPE on q (into q_out) and the cache writes of k (rotated) and v for the pass's rows, and the
 * attention that reads them, into att; graph parameters declared where the pass is a graph. */
static nu_status rope_and_attend(nu_llm_pass *p, uint32_t layer, const nu_tensor *q3, const nu_tensor *k3,
                                 const nu_tensor *v3, const nu_tensor *q_out, const nu_tensor *att3)
{
    const nu_llm_config *c = &p->hp->cfg;
    /* RoPE as the architecture reads it: its base, linear position scaling, frequency divisors. */
    nu_rope_desc rope = {.layout = p->hp->rope_layout, .theta = c->rope_theta, .linear_factor = p->hp->rope_linear,
                         .freq_factors = p->rope_freqs};
    if (p->per_row) {
        nu_tensor kc = nu_llm__kv_k(p->kv, layer), vc = nu_llm__kv_v(p->kv, layer);
        nu_rope_desc rope_q = rope, rope_k = rope;
        rope_q.positions = &p->positions;
        nu_kv_write_desc kw = {&p->positions, &p->slots, &rope_k}, vw = {&p->positions, &p->slots, NULL};
        TRY(nu_op_rope(p->c, q_out, q3, &rope_q));
        TRY(nu_op_kv_write(p->c, &kc, k3, &kw));
        TRY(nu_op_kv_write(p->c, &vc, v3, &vw));
        nu_tensor qa;
        TRY(input(p, NU_LLM_A_Q16, q_out, &qa));
        nu_attention_desc ad = {.positions = &p->positions, .slots = &p->slots, .max_length = p->max_kv};
        ad.tune.path = NU_ATTENTION_PATH_DECODE; /* rows of different sequences: each on its own */
        return nu_op_attention(p->c, att3, &qa, &kc, &vc, &ad);
    }
    nu_llm_layer_params *pp = p->graph ? &p->params[layer] : NULL;
    nu_tensor kc = nu_llm__kv_slot(p->kv, false, layer, p->slot), vc = nu_llm__kv_slot(p->kv, true, layer, p->slot);
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
    nu_tensor qa = *q_out;
    TRY(input(p, NU_LLM_A_Q16, q_out, &qa));
    /* A graph's one row needs no mask; its kv_length is a launch parameter (recorded with the most
     * keys, so that the split count suits the longest context). */
    nu_attention_desc ad = {0, !p->graph, p->start, p->graph ? p->max_kv : p->start + p->rows};
    TRY(nu_op_attention(p->c, att3, &qa, &kc, &vc, &ad));
    if (pp)
        TRY(nu_op_graph_param(p->c, NU_OP_VALUE_KV_LENGTH, &pp->kv_len));
    return NU_OK;
}

/* The fused decode layer's attention half (blocks.h). */
static nu_status attention_fused(nu_llm_pass *p, const nu_llm_layer_w *w, uint32_t layer)
{
    const nu_llm_config *c = &p->hp->cfg;
    int64_t R = p->rows, D = c->dim, H = c->heads, KVH = c->kv_heads, HD = c->head_dim;
    nu_buffer **a = p->act;
    nu_tensor x = view2(a[NU_LLM_A_X], R, D), q3, k3, v3;
    nu_matvec_desc in = {.norm_weight = &w->w[NU_LLM_W_ATTN_NORM], .norm_eps = c->rms_eps};
    if (w->qkv_stacked) { /* one product into [q | k | v] a row */
        int64_t all = (H + 2 * KVH) * HD, qs[3] = {R, H, HD}, ks[3] = {R, KVH, HD};
        nu_tensor qkv = view2(a[NU_LLM_A_QKV], R, all);
        TRY(mv(p, &qkv, &w->qkv, &x, &in));
        q3 = nu_tensor_make(a[NU_LLM_A_QKV], 0, NU_DTYPE_F32, 3, qs);
        k3 = nu_tensor_make(a[NU_LLM_A_QKV], (uint64_t)(H * HD) * 4, NU_DTYPE_F32, 3, ks);
        v3 = nu_tensor_make(a[NU_LLM_A_QKV], (uint64_t)((H + KVH) * HD) * 4, NU_DTYPE_F32, 3, ks);
        q3.strides[0] = k3.strides[0] = v3.strides[0] = all; /* rows of [q | k | v] */
    } else {
        /* q's product into A_ATT's rows (rotated into A_Q, before attention writes A_ATT) */
        nu_tensor q2 = view2(a[NU_LLM_A_ATT], R, H * HD), k2 = view2(a[NU_LLM_A_K], R, KVH * HD),
                  v2 = view2(a[NU_LLM_A_V], R, KVH * HD);
        q3 = view3(a[NU_LLM_A_ATT], R, H, HD), k3 = view3(a[NU_LLM_A_K], R, KVH, HD);
        v3 = view3(a[NU_LLM_A_V], R, KVH, HD);
        TRY(mv(p, &q2, &w->w[NU_LLM_W_Q], &x, &in));
        TRY(mv(p, &k2, &w->w[NU_LLM_W_K], &x, &in));
        TRY(mv(p, &v2, &w->w[NU_LLM_W_V], &x, &in));
    }
    nu_tensor qr = view3(a[NU_LLM_A_Q], R, H, HD), att3 = view3(a[NU_LLM_A_ATT], R, H, HD);
    TRY(rope_and_attend(p, layer, &q3, &k3, &v3, &qr, &att3));
    nu_tensor att2 = view2(a[NU_LLM_A_ATT], R, H * HD);
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
    TRY(norm(p, &w->w[NU_LLM_W_ATTN_NORM]));
    nu_tensor xn = view2(a[NU_LLM_A_XN], R, c->dim), in;
    nu_tensor q3 = view3(a[NU_LLM_A_Q], R, H, HD), k3 = view3(a[NU_LLM_A_K], R, KVH, HD),
              v3 = view3(a[NU_LLM_A_V], R, KVH, HD);
    if (p->graph && R == 1 && w->qkv_stacked) { /* one product into [q | k | v] of one row */
        int64_t qs[3] = {1, H, HD}, ks[3] = {1, KVH, HD};
        nu_tensor all = view2(a[NU_LLM_A_QKV], 1, (H + 2 * KVH) * HD);
        TRY(linear(p, &all, &w->qkv, &xn));
        q3 = nu_tensor_make(a[NU_LLM_A_QKV], 0, NU_DTYPE_F32, 3, qs);
        k3 = nu_tensor_make(a[NU_LLM_A_QKV], (uint64_t)(H * HD) * 4, NU_DTYPE_F32, 3, ks);
        v3 = nu_tensor_make(a[NU_LLM_A_QKV], (uint64_t)((H + KVH) * HD) * 4, NU_DTYPE_F32, 3, ks);
    } else {
        nu_tensor q2 = view2(a[NU_LLM_A_Q], R, H * HD), k2 = view2(a[NU_LLM_A_K], R, KVH * HD),
                  v2 = view2(a[NU_LLM_A_V], R, KVH * HD);
        TRY(input(p, NU_LLM_A_H16, &xn, &in));
        TRY(linear(p, &q2, &w->w[NU_LLM_W_Q], &in));
        TRY(linear(p, &k2, &w->w[NU_LLM_W_K], &in));
        TRY(linear(p, &v2, &w->w[NU_LLM_W_V], &in));
    }
    nu_tensor att3 = view3(a[NU_LLM_A_ATT], R, H, HD), att2 = view2(a[NU_LLM_A_ATT], R, H * HD);
    TRY(rope_and_attend(p, layer, &q3, &k3, &v3, &q3, &att3)); /* q rotated in place */
    nu_tensor tmp = view2(a[NU_LLM_A_TMP], R, c->dim);
    TRY(input(p, NU_LLM_A_H16, &att2, &in));
    TRY(linear(p, &tmp, &w->w[NU_LLM_W_O], &in));
    p->pending = true;
    return NU_OK;
}

nu_status nu_llm__blk_ffn_swiglu(nu_llm_pass *p, const nu_llm_layer_w *w)
{
    const nu_llm_config *c = &p->hp->cfg;
    int64_t R = p->rows, D = c->dim, F = c->ffn;
    nu_buffer **a = p->act;
    nu_tensor x = view2(a[NU_LLM_A_X], R, D), h = view2(a[NU_LLM_A_GATE], R, F);
    if (p->fused) {
        nu_matvec_desc in = {.norm_weight = &w->w[NU_LLM_W_FFN_NORM], .norm_eps = c->rms_eps,
                             .glu_up = &w->w[NU_LLM_W_UP]};
        TRY(mv(p, &h, &w->w[NU_LLM_W_GATE], &x, &in));
        nu_matvec_desc add = {.residual = &x};
        return mv(p, &x, &w->w[NU_LLM_W_DOWN], &h, &add); /* x += h Wd^T */
    }
    TRY(norm(p, &w->w[NU_LLM_W_FFN_NORM]));
    nu_tensor xn = view2(a[NU_LLM_A_XN], R, D), tmp = view2(a[NU_LLM_A_TMP], R, D), in, gin;
    if (p->graph && R == 1 && w->gate_up_stacked) { /* one product into [gate | up] of one row */
        nu_tensor all = view2(a[NU_LLM_A_GU], 1, 2 * F), g1, u1;
        TRY(linear(p, &all, &w->gate_up, &xn));
        TRY(nu_tensor_slice(&all, 1, 0, F, &g1));
        TRY(nu_tensor_slice(&all, 1, F, F, &u1));
        TRY(nu_op_swiglu(p->c, &g1, &g1, &u1));
        TRY(linear(p, &tmp, &w->w[NU_LLM_W_DOWN], &g1));
    } else {
        nu_tensor up = view2(a[NU_LLM_A_UP], R, F);
        TRY(input(p, NU_LLM_A_H16, &xn, &in));
        TRY(linear(p, &h, &w->w[NU_LLM_W_GATE], &in));
        TRY(linear(p, &up, &w->w[NU_LLM_W_UP], &in));
        TRY(nu_op_swiglu(p->c, &h, &h, &up));
        TRY(input(p, NU_LLM_A_H16, &h, &gin));
        TRY(linear(p, &tmp, &w->w[NU_LLM_W_DOWN], &gin));
    }
    p->pending = true;
    return NU_OK;
}

nu_status nu_llm__blk_embed(nu_llm_pass *p, const nu_tensor *embed, const nu_tensor *ids)
{
    nu_tensor x = view2(p->act[NU_LLM_A_X], p->rows, p->hp->cfg.dim);
    p->pending = false;
    return nu_op_gather(p->c, &x, embed, ids);
}

nu_status nu_llm__blk_logits(nu_llm_pass *p, const nu_tensor *out_norm, const nu_tensor *output,
                             const nu_tensor *logits, const nu_tensor *next)
{
    const nu_llm_config *c = &p->hp->cfg;
    int64_t R = p->rows, D = c->dim, out_rows = logits->shape[0], first = R - out_rows;
    nu_tensor x = view2(p->act[NU_LLM_A_X], R, D), last;
    if (p->pending) { /* the last block's output: only the rows with logits need it */
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
    } else {
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
    return next ? nu_op_argmax(p->c, next, logits) : NU_OK;
}
