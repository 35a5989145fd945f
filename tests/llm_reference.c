/* llm_reference.c: see llm_reference.h. Plain loops in double; the cache grows as tokens come. */
#include "llm_reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h" /* gguf_f16_to_f32 */
#include "nuvec.h"

typedef struct ref_matrix {
    double *w; /* [rows, cols] row-major */
    uint32_t rows, cols;
} ref_matrix;

typedef struct ref_layer {
    ref_matrix attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
    double *k, *v; /* [cap, kv_heads * head_dim] */
} ref_layer;

struct llm_ref {
    uint32_t dim, ffn, layers, heads, kv_heads, head_dim, vocab;
    double eps, theta, linear;
    ref_matrix embed, out_norm, output, freqs;
    ref_layer *layer;
    uint32_t pos, cap;
};

static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

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

static uint32_t key_u32(const nu_gguf *g, const char *key, uint32_t fallback)
{
    uint32_t v = fallback;
    return nu_gguf_get_u32(g, key, &fallback, &v) == NU_OK ? v : fallback;
}

static double key_f32(const nu_gguf *g, const char *key, float fallback)
{
    float v = fallback;
    return nu_gguf_get_f32(g, key, &fallback, &v) == NU_OK ? v : fallback;
}

llm_ref *llm_ref_open(const char *path)
{
    size_t size = 0;
    uint8_t *bytes = read_all(path, &size);
    nu_gguf *g = NULL;
    if (!bytes || nu_gguf_parse(bytes, size, &g) != NU_OK) {
        fprintf(stderr, "llm_reference: cannot read %s\n", path);
        free(bytes);
        return NULL;
    }
    llm_ref *r = calloc(1, sizeof *r);
    r->dim = key_u32(g, "llama.embedding_length", 0);
    r->ffn = key_u32(g, "llama.feed_forward_length", 0);
    r->layers = key_u32(g, "llama.block_count", 0);
    r->heads = key_u32(g, "llama.attention.head_count", 1);
    r->kv_heads = key_u32(g, "llama.attention.head_count_kv", r->heads);
    r->head_dim = key_u32(g, "llama.attention.key_length", r->dim / r->heads);
    r->eps = key_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    r->theta = key_f32(g, "llama.rope.freq_base", 10000.0f);
    r->linear = key_f32(g, "llama.rope.scaling.factor", 0);
    r->linear = r->linear ? r->linear : 1;
    load(g, bytes, "rope_freqs.weight", &r->freqs); /* optional */
    bool ok = load(g, bytes, "token_embd.weight", &r->embed) && load(g, bytes, "output_norm.weight", &r->out_norm);
    r->vocab = r->embed.rows;
    if (ok && !load(g, bytes, "output.weight", &r->output))
        r->output = r->embed, r->output.w = NULL; /* tied: see matrix_of */
    r->layer = calloc(r->layers ? r->layers : 1, sizeof *r->layer);
    static const char *const names[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                         "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    for (uint32_t l = 0; ok && l < r->layers; l++) {
        ref_matrix *m[9] = {&r->layer[l].attn_norm, &r->layer[l].wq, &r->layer[l].wk, &r->layer[l].wv, &r->layer[l].wo,
                            &r->layer[l].ffn_norm, &r->layer[l].gate, &r->layer[l].up, &r->layer[l].down};
        for (int i = 0; i < 9 && ok; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s.weight", l, names[i]);
            ok = load(g, bytes, name, m[i]);
        }
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
    for (uint32_t l = 0; l < r->layers; l++) {
        ref_layer *y = &r->layer[l];
        ref_matrix *m[9] = {&y->attn_norm, &y->wq, &y->wk, &y->wv, &y->wo, &y->ffn_norm, &y->gate, &y->up, &y->down};
        for (int i = 0; i < 9; i++)
            free(m[i]->w);
        free(y->k);
        free(y->v);
    }
    free(r->layer);
    free(r);
}

uint32_t llm_ref_vocab(const llm_ref *r) { return r ? r->vocab : 0; }
void llm_ref_reset(llm_ref *r) { r->pos = 0; }

/* y[rows] = W x[cols] */
static void matvec(const ref_matrix *w, const double *x, double *y)
{
    for (uint32_t i = 0; i < w->rows; i++) {
        double s = 0;
        for (uint32_t j = 0; j < w->cols; j++)
            s += w->w[(size_t)i * w->cols + j] * x[j];
        y[i] = s;
    }
}

static void rms_norm(const double *x, const ref_matrix *g, double eps, uint32_t n, double *y)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++)
        y[i] = x[i] * s * g->w[i];
}

/* Interleaved RoPE (pairs 2i, 2i+1 of each head), as GGUF's llama stores q and k. */
static void rope(const llm_ref *r, double *v, uint32_t heads, uint32_t pos)
{
    uint32_t hd = r->head_dim;
    for (uint32_t h = 0; h < heads; h++)
        for (uint32_t i = 0; i < hd / 2; i++) {
            double a = pos / r->linear * pow(r->theta, -2.0 * i / hd) / (r->freqs.w ? r->freqs.w[i] : 1.0);
            double c = cos(a), s = sin(a);
            double *p = v + (size_t)h * hd + 2 * i, x0 = p[0], x1 = p[1];
            p[0] = x0 * c - x1 * s;
            p[1] = x0 * s + x1 * c;
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

void llm_ref_forward(llm_ref *r, const int32_t *tokens, size_t n, double *logits)
{
    uint32_t D = r->dim, HD = r->head_dim, H = r->heads, KVH = r->kv_heads, Q = H * HD, KV = KVH * HD;
    double *x = malloc(D * sizeof *x), *xn = malloc(D * sizeof *xn), *q = malloc(Q * sizeof *q);
    double *att = malloc(Q * sizeof *att), *tmp = malloc(D * sizeof *tmp), *g = malloc(r->ffn * sizeof *g);
    double *u = malloc(r->ffn * sizeof *u), *sc = NULL;
    for (size_t t = 0; t < n; t++) {
        uint32_t p = r->pos++;
        grow(r, p + 1);
        sc = realloc(sc, (p + 1) * sizeof *sc);
        for (uint32_t i = 0; i < D; i++)
            x[i] = r->embed.w[(size_t)tokens[t] * D + i];
        for (uint32_t l = 0; l < r->layers; l++) {
            ref_layer *y = &r->layer[l];
            double *k = y->k + (size_t)p * KV, *v = y->v + (size_t)p * KV;
            rms_norm(x, &y->attn_norm, r->eps, D, xn);
            matvec(&y->wq, xn, q);
            matvec(&y->wk, xn, k);
            matvec(&y->wv, xn, v);
            rope(r, q, H, p);
            rope(r, k, KVH, p);
            for (uint32_t h = 0; h < H; h++) {
                uint32_t kh = h / (H / KVH);
                double mx = -INFINITY, sum = 0;
                for (uint32_t j = 0; j <= p; j++) {
                    double s = 0;
                    for (uint32_t i = 0; i < HD; i++)
                        s += q[h * HD + i] * y->k[(size_t)j * KV + kh * HD + i];
                    sc[j] = s / sqrt((double)HD);
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (uint32_t j = 0; j <= p; j++)
                    sum += sc[j] = exp(sc[j] - mx);
                for (uint32_t i = 0; i < HD; i++) {
                    double o = 0;
                    for (uint32_t j = 0; j <= p; j++)
                        o += sc[j] * y->v[(size_t)j * KV + kh * HD + i];
                    att[h * HD + i] = o / sum;
                }
            }
            matvec(&y->wo, att, tmp);
            for (uint32_t i = 0; i < D; i++)
                x[i] += tmp[i];
            rms_norm(x, &y->ffn_norm, r->eps, D, xn);
            matvec(&y->gate, xn, g);
            matvec(&y->up, xn, u);
            for (uint32_t i = 0; i < r->ffn; i++)
                g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(&y->down, g, tmp);
            for (uint32_t i = 0; i < D; i++)
                x[i] += tmp[i];
        }
        if (logits) {
            rms_norm(x, &r->out_norm, r->eps, D, xn);
            ref_matrix out = r->output.w ? r->output : r->embed;
            matvec(&out, xn, logits + t * r->vocab);
        }
    }
    free(x), free(xn), free(q), free(att), free(tmp), free(g), free(u), free(sc);
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
