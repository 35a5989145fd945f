/* llm_reference.c: see llm_reference.h. Plain loops in double; the cache grows as tokens come. */
#include "llm_reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h" /* gguf_f16_to_f32 */
#include "llm_files.h"  /* llm_read_file */
#include "nuvec.h"

typedef struct ref_matrix {
    double *w; /* [rows, cols] row-major; NULL: absent */
    uint32_t rows, cols;
} ref_matrix;

/* A layer's tensors, by their GGUF names after "blk.N." (absent ones NULL). */
enum {
    T_ATTN_NORM, T_Q, T_K, T_V, T_QKV, T_Q_BIAS, T_K_BIAS, T_V_BIAS, T_Q_NORM, T_K_NORM, T_O, T_ATTN_POST,
    T_FFN_NORM, T_GATE, T_UP, T_DOWN, T_FFN_POST, T_COUNT
};
static const char *const LAYER_NAMES[T_COUNT] = {
    "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_qkv.weight", "attn_q.bias",
    "attn_k.bias", "attn_v.bias", "attn_q_norm.weight", "attn_k_norm.weight", "attn_output.weight",
    "post_attention_norm.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
    "post_ffw_norm.weight"};

typedef struct ref_layer {
    ref_matrix t[T_COUNT];
    bool swa;
    double *k, *v; /* [cap, kv_heads * head_dim] */
} ref_layer;

struct llm_ref {
    char arch[32];
    uint32_t dim, ffn, layers, heads, kv_heads, head_dim, vocab, context, original_context, positions, window;
    double eps, theta, linear, swa_theta, swa_linear, attn_scale, attn_softcap, final_softcap, embed_scale;
    double attn_factor;
    bool neox, gelu;
    ref_matrix embed, out_norm, output, freqs, freqs_long, freqs_short;
    ref_layer *layer;
    uint32_t pos, cap;
};

/* Tensor `name` as doubles, [rows, cols] (cols 1 for a vector); false when absent or of a type
 * the reference does not read. */
static bool load(const nu_gguf *g, const uint8_t *bytes, const char *name, ref_matrix *m)
{
    const nu_gguf_tensor_info *t = nu_gguf_find_tensor(g, name);
    if (!t || (t->dtype != NU_DTYPE_F32 && t->dtype != NU_DTYPE_F16) || t->rank < 1 || t->rank > 2)
        return false;
    m->rows = (uint32_t)t->shape[0];
    m->cols = t->rank == 2 ? (uint32_t)t->shape[1] : 1;
    size_t n = (size_t)m->rows * m->cols;
    m->w = malloc(n * sizeof *m->w);
    const uint8_t *src = bytes + t->offset;
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == NU_DTYPE_F32) {
            float f;
            memcpy(&f, src + 4 * i, 4);
            m->w[i] = f;
        } else {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            m->w[i] = gguf_f16_to_f32(h);
        }
    }
    return true;
}

/* "<arch>.<suffix>" values. */
static uint32_t key_u32(const nu_gguf *g, const llm_ref *r, const char *suffix, uint32_t fallback)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", r->arch, suffix);
    uint32_t v = fallback;
    return nu_gguf_get_u32(g, key, &fallback, &v) == NU_OK ? v : fallback;
}

static double key_f32(const nu_gguf *g, const llm_ref *r, const char *suffix, float fallback)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", r->arch, suffix);
    float v = fallback;
    return nu_gguf_get_f32(g, key, &fallback, &v) == NU_OK ? v : fallback;
}

static bool is(const llm_ref *r, const char *arch) { return !strcmp(r->arch, arch); }

/* The hyperparameters, as each architecture's definition has them. */
static void read_hparams(const nu_gguf *g, llm_ref *r)
{
    r->dim = key_u32(g, r, "embedding_length", 0);
    r->ffn = key_u32(g, r, "feed_forward_length", 0);
    r->layers = key_u32(g, r, "block_count", 0);
    r->heads = key_u32(g, r, "attention.head_count", 1);
    r->kv_heads = key_u32(g, r, "attention.head_count_kv", r->heads);
    r->head_dim = key_u32(g, r, "attention.key_length", r->dim / r->heads);
    r->context = key_u32(g, r, "context_length", 0);
    r->original_context = key_u32(g, r, "rope.scaling.original_context_length", r->context);
    r->positions = r->context;
    r->eps = key_f32(g, r, "attention.layer_norm_rms_epsilon", 1e-5f);
    r->theta = key_f32(g, r, "rope.freq_base", 10000.0f);
    r->linear = key_f32(g, r, "rope.scaling.factor", 0);
    r->linear = r->linear ? r->linear : 1;
    r->attn_factor = key_f32(g, r, "rope.scaling.attn_factor", 1);
    r->neox = !is(r, "llama");
    bool gemma = is(r, "gemma2") || is(r, "gemma3");
    r->gelu = gemma;
    r->embed_scale = gemma ? sqrt((double)r->dim) : 1;
    r->attn_scale = 1 / sqrt((double)r->head_dim);
    if ((is(r, "gemma2") && r->layers == 46) || (is(r, "gemma3") && r->layers == 62))
        r->attn_scale = 1 / sqrt((double)(r->dim / r->heads)); /* the 27B models */
    r->attn_softcap = is(r, "gemma2") ? key_f32(g, r, "attn_logit_softcapping", 50) : 0;
    r->final_softcap = is(r, "gemma2") ? key_f32(g, r, "final_logit_softcapping", 30)
                       : is(r, "gemma3") ? key_f32(g, r, "final_logit_softcapping", 0)
                                         : 0;
    r->window = is(r, "gemma2")                     ? key_u32(g, r, "attention.sliding_window", 4096)
                : is(r, "gemma3") || is(r, "phi3") ? key_u32(g, r, "attention.sliding_window", 0)
                                                    : 0;
    r->swa_theta = is(r, "gemma3") ? key_f32(g, r, "rope.freq_base_swa", 10000) : r->theta;
    r->swa_linear = is(r, "gemma3") ? 1 : r->linear;
}

llm_ref *llm_ref_open(const char *path)
{
    size_t size = 0;
    uint8_t *bytes = llm_read_file(path, &size);
    nu_gguf *g = NULL;
    const char *arch;
    uint64_t alen;
    if (!bytes || nu_gguf_parse(bytes, size, &g) != NU_OK ||
        nu_gguf_get_string(g, "general.architecture", NULL, &arch, &alen) != NU_OK || alen >= 32) {
        fprintf(stderr, "llm_reference: cannot read %s\n", path);
        nu_gguf_close(g);
        free(bytes);
        return NULL;
    }
    llm_ref *r = calloc(1, sizeof *r);
    memcpy(r->arch, arch, (size_t)alen);
    read_hparams(g, r);
    load(g, bytes, "rope_freqs.weight", &r->freqs); /* optional, as the LongRoPE factors */
    load(g, bytes, "rope_factors_long.weight", &r->freqs_long);
    load(g, bytes, "rope_factors_short.weight", &r->freqs_short);
    bool ok = load(g, bytes, "token_embd.weight", &r->embed) && load(g, bytes, "output_norm.weight", &r->out_norm);
    r->vocab = r->embed.rows;
    load(g, bytes, "output.weight", &r->output); /* absent: tied */
    r->layer = calloc(r->layers ? r->layers : 1, sizeof *r->layer);
    for (uint32_t l = 0; ok && l < r->layers; l++) {
        ref_layer *y = &r->layer[l];
        for (int i = 0; i < T_COUNT; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s", l, LAYER_NAMES[i]);
            load(g, bytes, name, &y->t[i]);
        }
        bool fused = y->t[T_QKV].w != NULL;
        ok = y->t[T_ATTN_NORM].w && y->t[T_O].w && y->t[T_FFN_NORM].w && y->t[T_UP].w && y->t[T_DOWN].w &&
             (fused || (y->t[T_Q].w && y->t[T_K].w && y->t[T_V].w)) && (is(r, "phi3") || y->t[T_GATE].w);
        y->swa = r->window && (is(r, "gemma2") ? l % 2 == 0 : is(r, "gemma3") ? l % 6 < 5 : is(r, "phi3"));
    }
    nu_gguf_close(g);
    free(bytes);
    if (!ok) {
        fprintf(stderr, "llm_reference: %s lacks a tensor or has one of a type it does not read\n", path);
        llm_ref_free(r);
        return NULL;
    }
    return r;
}

void llm_ref_free(llm_ref *r)
{
    if (!r)
        return;
    free(r->embed.w);
    free(r->out_norm.w);
    free(r->output.w);
    free(r->freqs.w);
    free(r->freqs_long.w);
    free(r->freqs_short.w);
    for (uint32_t l = 0; l < r->layers; l++) {
        ref_layer *y = &r->layer[l];
        for (int i = 0; i < T_COUNT; i++)
            free(y->t[i].w);
        free(y->k);
        free(y->v);
    }
    free(r->layer);
    free(r);
}

uint32_t llm_ref_vocab(const llm_ref *r) { return r ? r->vocab : 0; }
void llm_ref_reset(llm_ref *r) { r->pos = 0; }
void llm_ref_set_positions(llm_ref *r, uint32_t positions) { r->positions = positions; }

/* y[rows] = W x[cols] (+ b) */
static void matvec(const ref_matrix *w, const double *x, double *y, const ref_matrix *b)
{
    for (uint32_t i = 0; i < w->rows; i++) {
        double s = b && b->w ? b->w[i] : 0;
        for (uint32_t j = 0; j < w->cols; j++)
            s += w->w[(size_t)i * w->cols + j] * x[j];
        y[i] = s;
    }
}

static void rms_norm(const double *x, const double *g, double eps, uint32_t n, double *y)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++)
        y[i] = x[i] * s * g[i];
}

/* Each of `heads` heads of v normalised by its own RMS, times g (Qwen3's and Gemma 3's q/k norms). */
static void head_norms(const llm_ref *r, double *v, uint32_t heads, const ref_matrix *g)
{
    for (uint32_t h = 0; g->w && h < heads; h++)
        rms_norm(v + (size_t)h * r->head_dim, g->w, r->eps, r->head_dim, v + (size_t)h * r->head_dim);
}

/* RoPE of each head at position pos: pairs (2i, 2i+1) (llama's GGUF order) or (i, i + head_dim/2)
 * (NEOX), angle pos / linear * theta^(-2i / head_dim) / factor_i, cos and sin times attn_factor. */
static void rope(const llm_ref *r, const ref_layer *y, double *v, uint32_t heads, uint32_t pos)
{
    uint32_t hd = r->head_dim;
    double theta = y->swa ? r->swa_theta : r->theta, linear = y->swa ? r->swa_linear : r->linear;
    const ref_matrix *f = r->freqs.w ? &r->freqs : NULL;
    if (r->freqs_long.w)
        f = r->positions > r->original_context ? &r->freqs_long : &r->freqs_short;
    for (uint32_t h = 0; h < heads; h++)
        for (uint32_t i = 0; i < hd / 2; i++) {
            double a = pos / linear * pow(theta, -2.0 * i / hd) / (f ? f->w[i] : 1.0);
            double c = cos(a) * r->attn_factor, s = sin(a) * r->attn_factor;
            double *p0 = v + (size_t)h * hd + (r->neox ? i : 2 * i), *p1 = r->neox ? p0 + hd / 2 : p0 + 1;
            double x0 = *p0, x1 = *p1;
            *p0 = x0 * c - x1 * s;
            *p1 = x0 * s + x1 * c;
        }
}

static void grow(llm_ref *r, uint32_t need)
{
    if (need <= r->cap)
        return;
    uint32_t cap = r->cap ? r->cap : 64;
    while (cap < need)
        cap *= 2;
    size_t kv = (size_t)r->kv_heads * r->head_dim;
    for (uint32_t l = 0; l < r->layers; l++) {
        r->layer[l].k = realloc(r->layer[l].k, cap * kv * sizeof(double));
        r->layer[l].v = realloc(r->layer[l].v, cap * kv * sizeof(double));
    }
    r->cap = cap;
}

/* x += (post-norm of) out. */
static void residual(const llm_ref *r, double *x, double *out, const ref_matrix *post)
{
    if (post->w)
        rms_norm(out, post->w, r->eps, r->dim, out);
    for (uint32_t i = 0; i < r->dim; i++)
        x[i] += out[i];
}

/* The attention of layer y for the token at position p, its q in q, into att. */
static void attend(const llm_ref *r, const ref_layer *y, const double *q, uint32_t p, double *sc, double *att)
{
    uint32_t HD = r->head_dim, H = r->heads, KVH = r->kv_heads, KV = KVH * HD;
    uint32_t first = y->swa && p >= r->window ? p - r->window + 1 : 0; /* keys j > p - window */
    for (uint32_t h = 0; h < H; h++) {
        uint32_t kh = h / (H / KVH);
        double mx = -INFINITY, sum = 0;
        for (uint32_t j = first; j <= p; j++) {
            double s = 0;
            for (uint32_t i = 0; i < HD; i++)
                s += q[h * HD + i] * y->k[(size_t)j * KV + kh * HD + i];
            s *= r->attn_scale;
            if (r->attn_softcap)
                s = r->attn_softcap * tanh(s / r->attn_softcap);
            sc[j] = s;
            mx = s > mx ? s : mx;
        }
        for (uint32_t j = first; j <= p; j++)
            sum += sc[j] = exp(sc[j] - mx);
        for (uint32_t i = 0; i < HD; i++) {
            double o = 0;
            for (uint32_t j = first; j <= p; j++)
                o += sc[j] * y->v[(size_t)j * KV + kh * HD + i];
            att[h * HD + i] = o / sum;
        }
    }
}

static double gelu_tanh(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

void llm_ref_forward(llm_ref *r, const int32_t *tokens, size_t n, double *logits)
{
    uint32_t D = r->dim, HD = r->head_dim, H = r->heads, KVH = r->kv_heads, Q = H * HD, KV = KVH * HD, F = r->ffn;
    double *x = malloc(D * sizeof *x), *xn = malloc(D * sizeof *xn), *qkv = malloc((Q + 2 * KV) * sizeof *qkv);
    double *att = malloc(Q * sizeof *att), *tmp = malloc(D * sizeof *tmp), *gu = malloc(2 * F * sizeof *gu);
    double *sc = NULL;
    for (size_t t = 0; t < n; t++) {
        uint32_t p = r->pos++;
        grow(r, p + 1);
        sc = realloc(sc, (p + 1) * sizeof *sc);
        for (uint32_t i = 0; i < D; i++)
            x[i] = r->embed.w[(size_t)tokens[t] * D + i] * r->embed_scale;
        for (uint32_t l = 0; l < r->layers; l++) {
            ref_layer *y = &r->layer[l];
            double *q = qkv, *k = qkv + Q, *v = qkv + Q + KV;
            rms_norm(x, y->t[T_ATTN_NORM].w, r->eps, D, xn);
            if (y->t[T_QKV].w) {
                matvec(&y->t[T_QKV], xn, qkv, NULL);
            } else {
                matvec(&y->t[T_Q], xn, q, &y->t[T_Q_BIAS]);
                matvec(&y->t[T_K], xn, k, &y->t[T_K_BIAS]);
                matvec(&y->t[T_V], xn, v, &y->t[T_V_BIAS]);
            }
            head_norms(r, q, H, &y->t[T_Q_NORM]);
            head_norms(r, k, KVH, &y->t[T_K_NORM]);
            rope(r, y, q, H, p);
            rope(r, y, k, KVH, p);
            memcpy(y->k + (size_t)p * KV, k, KV * sizeof *k);
            memcpy(y->v + (size_t)p * KV, v, KV * sizeof *v);
            attend(r, y, q, p, sc, att);
            matvec(&y->t[T_O], att, tmp, NULL);
            residual(r, x, tmp, &y->t[T_ATTN_POST]);
            rms_norm(x, y->t[T_FFN_NORM].w, r->eps, D, xn);
            if (y->t[T_GATE].w) {
                matvec(&y->t[T_GATE], xn, gu, NULL);
                matvec(&y->t[T_UP], xn, gu + F, NULL);
            } else {
                matvec(&y->t[T_UP], xn, gu, NULL); /* Phi-3's [gate | up] */
            }
            for (uint32_t i = 0; i < F; i++)
                gu[i] = (r->gelu ? gelu_tanh(gu[i]) : gu[i] / (1 + exp(-gu[i]))) * gu[F + i];
            matvec(&y->t[T_DOWN], gu, tmp, NULL);
            residual(r, x, tmp, &y->t[T_FFN_POST]);
        }
        if (logits) {
            double *out = logits + t * r->vocab;
            rms_norm(x, r->out_norm.w, r->eps, D, xn);
            matvec(r->output.w ? &r->output : &r->embed, xn, out, NULL);
            for (uint32_t i = 0; r->final_softcap && i < r->vocab; i++)
                out[i] = r->final_softcap * tanh(out[i] / r->final_softcap);
        }
    }
    free(x), free(xn), free(qkv), free(att), free(tmp), free(gu), free(sc);
}

double llm_ref_max_diff(const double *want, const float *got, uint32_t n, double *range)
{
    double lo = INFINITY, hi = -INFINITY, diff = 0;
    for (uint32_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs(got[i] - want[i]));
        lo = fmin(lo, want[i]), hi = fmax(hi, want[i]);
    }
    if (range)
        *range = hi - lo;
    return diff;
}
