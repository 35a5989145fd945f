/* attn_ref.c: see attn_ref.h. */
#include "attn_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double nt_attn_v_tolerance = 1.0 / 8192.0;

nu_status nt_record_attention(nu_commands *c, void *arg)
{
    nt_attn_call *a = arg;
    return nu_op_attention(c, a->dst, a->q, a->k, a->v, a->desc);
}

void nt_attn_row(const nt_attn *a, int64_t t, int64_t *slot, int64_t *lo, int64_t *hi)
{
    const nu_attention_desc *d = a->desc;
    int64_t p;
    *slot = 0;
    *lo = *hi = 0;
    if (d->positions) {
        p = a->pos[t];
        int64_t s = a->slot ? a->slot[t] : 0;
        if (p < 0 || p >= a->positions || s < 0 || s >= a->slots)
            return;
        *slot = s;
        *hi = p + 1;
    } else {
        p = (int64_t)d->q_position + t;
        *hi = d->kv_length < a->positions ? d->kv_length : a->positions;
        if (d->causal && p + 1 < *hi)
            *hi = p + 1;
    }
    if (d->window && p + 1 > (int64_t)d->window)
        *lo = p + 1 - (int64_t)d->window < *hi ? p + 1 - (int64_t)d->window : *hi;
}

void nt_expect_attention(const nt_tensor *dst, const nt_attn *a, const char *what)
{
    const nu_attention_desc *desc = a->desc;
    int64_t T = a->tokens, hq = a->hq, hkv = a->hkv, D = a->D, g = hq / hkv;
    double scale = desc->scale == 0 ? 1.0 / sqrt((double)D) : (double)desc->scale;
    float rel = nt_dtype_tolerance(dst->t.dtype);
    double *s = malloc(sizeof *s * (size_t)(a->positions ? a->positions : 1));
    for (int64_t t = 0; t < T; t++) {
        int64_t slot, lo, hi;
        nt_attn_row(a, t, &slot, &lo, &hi);
        for (int64_t h = 0; h < hq; h++) {
            int64_t kh = h / g;
            const float *kb = a->k + slot * a->positions * hkv * D, *vb = a->v + slot * a->positions * hkv * D;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = lo; j < hi; j++) {
                double x = 0;
                for (int64_t e = 0; e < D; e++)
                    x += (double)a->q[(t * hq + h) * D + e] * (double)kb[(j * hkv + kh) * D + e];
                x *= scale;
                if (desc->softcap != 0)
                    x = desc->softcap * tanh(x / desc->softcap);
                s[j] = x;
                mx = fmax(mx, x);
            }
            for (int64_t j = lo; j < hi; j++) {
                s[j] = exp(s[j] - mx);
                sum += s[j];
            }
            for (int64_t e = 0; e < D; e++) {
                double o = 0, vmax = 0;
                for (int64_t j = lo; j < hi; j++) {
                    double ve = (double)vb[(j * hkv + kh) * D + e];
                    o += s[j] * ve;
                    vmax = fmax(vmax, fabs(ve));
                }
                float want = hi > lo ? nt_round_to(dst->t.dtype, (float)(o / sum)) : 0.0f;
                float got = dst->values[(t * hq + h) * D + e];
                double tol = hi > lo ? vmax * nt_attn_v_tolerance + rel * fabs((double)want) + 1e-30 : 0;
                if (!(fabs((double)got - (double)want) <= tol))
                    fail_msg("%s: dst[%lld, %lld, %lld] is %.9g, expected %.9g (tolerance %.3g; row %lld sees keys "
                             "%lld..%lld of slot %lld; tokens %lld, heads %lld/%lld, D %lld, %s form, window %u, "
                             "softcap %g)",
                             what, (long long)t, (long long)h, (long long)e, (double)got, (double)want, tol, (long long)t,
                             (long long)lo, (long long)hi - 1, (long long)slot, (long long)T, (long long)hq,
                             (long long)hkv, (long long)D, desc->positions ? "per-row" : "scalar", desc->window,
                             (double)desc->softcap);
            }
        }
    }
    free(s);
}

const char *nt_attn_tune_name(const nu_attention_tune *t, char *buf, size_t size)
{
    static const char *const paths[] = {"", "path=decode ", "path=prefill "}, *const combines[] = {"", "combine=separate ",
                                                                                                   "combine=fused "};
    snprintf(buf, size, "%s%s%s%s%s%s", (unsigned)t->path < 3 ? paths[t->path] : "path=? ",
             (unsigned)t->combine < 3 ? combines[t->combine] : "combine=? ", t->no_subgroup ? "no_subgroup " : "",
             t->no_matrix_units ? "no_matrix_units " : "", t->by_key ? "by_key " : "",
             t->no_fragments ? "no_fragments " : "");
    const char *names[] = {"splits", "chunk", "br", "bc", "keys", "heads", "tc_rows", "tc_keys", "fused_max"};
    uint32_t values[] = {t->splits, t->chunk, t->br, t->bc, t->keys, t->heads, t->tc_rows, t->tc_keys, t->fused_max};
    for (size_t i = 0, n = strlen(buf); i < sizeof values / sizeof values[0] && n < size; i++)
        if (values[i])
            n += (size_t)snprintf(buf + n, size - n, "%s=%u ", names[i], values[i]);
    return buf;
}

double nt_rope_ref(const float *x, double *y, int64_t rows, int64_t H, int64_t D, const int32_t *pos,
                   const nu_rope_desc *desc, const float *ff)
{
    int64_t rot = desc->rotary_dims ? desc->rotary_dims : D;
    double theta = desc->theta ? desc->theta : 10000.0, amax = 0;
    double lf = desc->linear_factor ? desc->linear_factor : 1.0, m = desc->attn_factor ? desc->attn_factor : 1.0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < H; h++) {
            const float *xr = x + (r * H + h) * D;
            double *yr = y + (r * H + h) * D;
            for (int64_t e = rot; e < D; e++)
                yr[e] = xr[e];
            for (int64_t i = 0; i < rot / 2; i++) {
                double a = (double)pos[r] / lf * pow(theta, -2.0 * (double)i / (double)rot) / (ff ? ff[i] : 1.0);
                amax = fmax(amax, fabs(a));
                int64_t e0 = desc->layout == NU_ROPE_INTERLEAVED ? 2 * i : i;
                int64_t e1 = desc->layout == NU_ROPE_INTERLEAVED ? 2 * i + 1 : i + rot / 2;
                double x0 = xr[e0], x1 = xr[e1];
                yr[e0] = m * (x0 * cos(a) - x1 * sin(a));
                yr[e1] = m * (x0 * sin(a) + x1 * cos(a));
            }
        }
    return amax;
}

double nt_rope_tol(double amax, const nu_rope_desc *desc)
{
    double m = desc->attn_factor ? desc->attn_factor : 1.0;
    return m * 2 * (fabs(amax) + 1) * ldexp(1.0, -22) + 1e-6;
}
