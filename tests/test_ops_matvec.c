/* test_ops_matvec.c: nu_op_matvec (src/ops/matvec.c, kernels/matvec/matvec.comp) against a
 * float64 CPU reference: every weight dtype (F32, F16, BF16 and every block dtype) with float x
 * and dst of each dtype, 1 to 8 rows of x, odd N and K (tails), unaligned, sliced (strided rows)
 * and transposed views, more row groups than one grid holds, the kernel's knobs (desc->tune, and
 * NUVEC_MATVEC read once per device); and what it refuses. nu_op_matvec_fused is
 * test_ops_matvec_fused.c's.
 *
 * Tolerance: the reference sums in double the products of the exact element values (block
 * weights dequantized by nu_dequantize: the values the kernel must see), so the kernel's only
 * error is F32
 * summation in another order, at most about K * 2^-24 * sum |x w| (we allow 2^-16 * sum |x w|
 * for K up to 4096, a margin of about 16) plus the one rounding of dst's store (its dtype's
 * tolerance, relative).
 *
 * Block weights on a device with integer dot products (and subgroup arithmetic) take the dot
 * path (kernels/matvec/matvec_dot.comp), which rounds x to 8 bits per 32-element block: there
 * the reference rounds x as the kernel does (ops_util's nt_round_as_dot_path) and sums
 * w * dx * q; where x * (127 / max|x|) is within 1e-3 of a tie (the GPU's float arithmetic may
 * round it the other way) the tolerance adds |w| * dx. The float path (tune.float_path) keeps
 * the strict tolerance, and a test checks that the dot path really ran where it applies (its
 * results differ from the float path's). */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

typedef struct mv_case {
    const nu_tensor *dst, *w, *x;
    const nu_matvec_tune *tune; /* NULL: nu_op_matvec; else nu_op_matvec_fused with only the tune */
} mv_case;

static nu_status record_matvec(nu_commands *c, void *arg)
{
    mv_case *k = arg;
    if (!k->tune)
        return nu_op_matvec(c, k->dst, k->w, k->x);
    nu_matvec_desc desc = {.tune = *k->tune};
    return nu_op_matvec_fused(c, k->dst, k->w, k->x, &desc);
}

/* Runs dst = x * w^T (with `tune`, or NULL) and checks it: wv [n, k] and xv [m, k] the exact
 * values (row-major). */
static void check(nu_device *d, nt_tensor *dst, const nu_tensor *w, const float *wv, const nu_tensor *x, const float *xv,
                  const nu_matvec_tune *tune, const char *what)
{
    mv_case k = {&dst->t, w, x, tune};
    nt_run(d, record_matvec, &k);
    nt_tensor_download(dst);
    int64_t m = x->shape[0], kk = x->shape[1], n = w->shape[0];
    float rel = nt_dtype_tolerance(dst->t.dtype);
    bool dot = nt_matvec_dot_path(d, w, m, false, tune);
    /* x as the dot path rounds it, and each element's step where it is near a tie (else 0). */
    double *xhat = NULL, *tie = NULL;
    if (dot) {
        xhat = malloc((size_t)(m * kk) * sizeof *xhat);
        tie = malloc((size_t)(m * kk) * sizeof *tie);
        nt_round_as_dot_path(xv, m * kk, xhat, tie);
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, sabs = 0, xround = 0;
            for (int64_t e = 0; e < kk; e++) {
                double xe = dot ? xhat[i * kk + e] : (double)xv[i * kk + e];
                if (dot)
                    xround += fabs((double)wv[j * kk + e]) * tie[i * kk + e];
                double p = xe * (double)wv[j * kk + e];
                s += p;
                sabs += fabs(p);
            }
            float want = nt_round_to(dst->t.dtype, (float)s);
            float got = dst->values[i * n + j];
            double tol = sabs / 65536.0 + xround + rel * fabs((double)want) + 1e-30;
            if (!(fabs((double)got - (double)want) <= tol))
                fail_msg("%s: dst[%lld, %lld] is %.9g, expected %.9g (tolerance %.3g; m %lld n %lld k %lld)", what,
                         (long long)i, (long long)j, (double)got, (double)want, tol, (long long)m, (long long)n,
                         (long long)kk);
        }
    free(xhat);
    free(tie);
}

static void float_weights_match_the_reference_for_every_dtype(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 1;
    /* Each (weight, x) pair once, dst's dtype in turn; odd K (tails of the vector path and the
     * general path; the strided test takes the vector path with tails for every dtype). */
    const int64_t ks[9] = {1, 7, 129, 264, 1031, 4096, 8, 40, 136};
    const int64_t ns[] = {1, 3, 37};
    int i = 0;
    for (int wd = 0; wd < 3; wd++)
        for (int xd = 0; xd < 3; xd++, i++) {
            int dd = (wd + xd) % 3;
            int64_t m = 1 + i % 8, k = ks[i], n = ns[i % 3];
            uint64_t wpad = (uint64_t)(i % 4 == 3); /* 1: unaligned rows, the general path */
            uint64_t xpad = (uint64_t)(i % 5 == 4);
            int64_t ws[2] = {n, k}, xs[2] = {m, k}, ds[2] = {m, n};
            nt_tensor w = nt_tensor_random(d, floats[wd], 2, ws, wpad, -1, 1, &seed);
            nt_tensor x = nt_tensor_random(d, floats[xd], 2, xs, xpad, -1, 1, &seed);
            nt_tensor dst = nt_tensor_output(d, floats[dd], 2, ds, (uint64_t)(i % 2));
            char what[160];
            snprintf(what, sizeof what, "%s dst = %s x * %s w^T, pads %llu %llu", nu_dtype_name(floats[dd]),
                     nu_dtype_name(floats[xd]), nu_dtype_name(floats[wd]), (unsigned long long)xpad,
                     (unsigned long long)wpad);
            check(d, &dst, &w.t, w.values, &x.t, x.values, NULL, what);
            nt_tensor_free(&w);
            nt_tensor_free(&x);
            nt_tensor_free(&dst);
        }
    nt_close(d);
}

static void block_weights_match_the_reference_for_every_dtype(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 2;
    /* Every block dtype with each x dtype (one kernel: one M and path), K from one block to 4096,
     * dst's dtype in turn; whole blocks before the weight (rows at odd halves for the odd-sized
     * blocks). */
    const int64_t ks[] = {1, 3, 5, 16}; /* blocks a row (Q8_0 and Q4_0 take 128 too) */
    const int64_t ns[] = {1, 3, 37};
    int i = 0;
    for (int wd = 0; wd < NT_BLOCK_DTYPES; wd++)
        for (int xd = 0; xd < 3; xd++, i++) {
            nu_dtype bd = nt_block_dtypes[wd];
            int64_t per = nu_dtype_block_elements(bd), kb = ks[(wd + xd) % 4];
            for (int big = 0; big < (wd < 2 ? 2 : 1); big++) {
                int dd = (wd * 2 + xd + big) % 3;
                int64_t m = 1 + ((wd * 3 + xd) * 3 + big) % 8, k = big ? 4096 : per * kb, n = ns[(i + big) % 3];
                uint64_t wpad = (uint64_t)(i % 3); /* whole blocks before it: rows at 2 mod 4 bytes */
                uint64_t xpad = (uint64_t)(xd == 1);
                int64_t ws[2] = {n, k}, xs[2] = {m, k}, ds[2] = {m, n};
                nt_tensor w = nt_tensor_quantized(d, bd, 2, ws, wpad, -2, 2, &seed);
                nt_tensor x = nt_tensor_random(d, floats[xd], 2, xs, xpad, -1, 1, &seed);
                nt_tensor dst = nt_tensor_output(d, floats[dd], 2, ds, 0);
                char what[160];
                snprintf(what, sizeof what, "%s dst = %s x * %s w^T, pad blocks %llu, x pad %llu",
                         nu_dtype_name(floats[dd]), nu_dtype_name(floats[xd]), nu_dtype_name(bd),
                         (unsigned long long)wpad, (unsigned long long)xpad);
                check(d, &dst, &w.t, w.values, &x.t, x.values, NULL, what);
                nt_tensor_free(&w);
                nt_tensor_free(&x);
                nt_tensor_free(&dst);
            }
        }
    nt_close(d);
}

/* M = 1..8 (the m loops' bounds are compile-time constants), each with another weight dtype
 * (the other tests take every dtype with several M). */
static void every_row_count_from_1_to_8(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 3;
    const nu_dtype wds[8] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16, NU_DTYPE_Q8_0,
                             NU_DTYPE_Q4_0, NU_DTYPE_Q4_K, NU_DTYPE_Q5_1, NU_DTYPE_IQ4_XS};
    for (int64_t m = 1; m <= 8; m++) {
        nu_dtype wd = wds[(m + 2) % 8];
        bool block = nt_is_block(wd);
        int64_t n = 13, k = block ? 512 : 263;
        int64_t ws[2] = {n, k}, xs[2] = {m, k}, ds[2] = {m, n};
        nt_tensor w = block ? nt_tensor_quantized(d, wd, 2, ws, 0, -1, 1, &seed) : nt_tensor_random(d, wd, 2, ws, 0, -1, 1, &seed);
        nt_tensor x = nt_tensor_random(d, m % 2 ? NU_DTYPE_F32 : NU_DTYPE_F16, 2, xs, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        char what[96];
        snprintf(what, sizeof what, "%s weights, m %lld", nu_dtype_name(wd), (long long)m);
        check(d, &dst, &w.t, w.values, &x.t, x.values, NULL, what);
        nt_tensor_free(&w);
        nt_tensor_free(&x);
        nt_tensor_free(&dst);
    }
    nt_close(d);
}

/* Weights as a slice of a fused weight's columns (row stride larger than k) and of its rows,
 * transposed float weights, x strided (a column slice) and transposed, and unaligned. */
static void strided_and_unaligned_views(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 4;
    char what[128];
    /* Float weights: w [40, 200] sliced to columns [8, 8 + 133) of rows [3, 3 + 37): stride 200,
     * rows 16-byte aligned (the vector path) with a tail of 5. */
    for (int wd = 0; wd < 3; wd++) {
        int64_t fs[2] = {40, 200}, m = 3, k = 133, n = 37;
        nt_tensor fused = nt_tensor_random(d, floats[wd], 2, fs, 0, -1, 1, &seed);
        nu_tensor w;
        NT_OK(nu_tensor_slice(&fused.t, 0, 3, n, &w));
        NT_OK(nu_tensor_slice(&w, 1, 8, k, &w));
        float *wv = nt_tensor_values_new(&fused, &w);
        /* x [3, 150] sliced to columns [5, 5 + 133): rows unaligned (the general x path). */
        int64_t xs[2] = {m, 150}, ds[2] = {m, n};
        nt_tensor xb = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
        nu_tensor x;
        NT_OK(nu_tensor_slice(&xb.t, 1, 5, k, &x));
        float *xv = nt_tensor_values_new(&xb, &x);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        snprintf(what, sizeof what, "%s weight slice [3:40, 8:141] of [40, 200], x slice", nu_dtype_name(floats[wd]));
        check(d, &dst, &w, wv, &x, xv, NULL, what);
        /* x aligned and strided: columns [8, 141) of a [3, 152] F16 x (16-byte rows). */
        int64_t xs2[2] = {m, 152};
        nt_tensor xb2 = nt_tensor_random(d, NU_DTYPE_F16, 2, xs2, 0, -1, 1, &seed);
        nu_tensor x2;
        NT_OK(nu_tensor_slice(&xb2.t, 1, 8, k, &x2));
        float *xv2 = nt_tensor_values_new(&xb2, &x2);
        snprintf(what, sizeof what, "%s weight slice, aligned strided F16 x", nu_dtype_name(floats[wd]));
        check(d, &dst, &w, wv, &x2, xv2, NULL, what);
        /* A transposed weight: t [133, 37] seen as [37, 133] (column stride 37: the general path). */
        int64_t ts[2] = {k, n};
        nt_tensor tb = nt_tensor_random(d, floats[wd], 2, ts, 0, -1, 1, &seed);
        nu_tensor wt;
        NT_OK(nu_tensor_transpose(&tb.t, 0, 1, &wt));
        float *wtv = nt_tensor_values_new(&tb, &wt);
        /* x transposed too: [133, 3] seen as [3, 133]. */
        int64_t xts[2] = {k, m};
        nt_tensor xtb = nt_tensor_random(d, NU_DTYPE_BF16, 2, xts, 1, -1, 1, &seed);
        nu_tensor xt;
        NT_OK(nu_tensor_transpose(&xtb.t, 0, 1, &xt));
        float *xtv = nt_tensor_values_new(&xtb, &xt);
        snprintf(what, sizeof what, "transposed %s weight, transposed BF16 x", nu_dtype_name(floats[wd]));
        check(d, &dst, &wt, wtv, &xt, xtv, NULL, what);
        free(wv);
        free(xv);
        free(xv2);
        free(wtv);
        free(xtv);
        nt_tensor_free(&fused);
        nt_tensor_free(&xb);
        nt_tensor_free(&xb2);
        nt_tensor_free(&tb);
        nt_tensor_free(&xtb);
        nt_tensor_free(&dst);
    }
    /* Block weights: a fused [9, 10 B] weight's rows [3, 6) and columns [2 B, 8 B) (B a block's
     * elements: a row stride of 10 blocks), every block dtype. */
    for (int wd = 0; wd < NT_BLOCK_DTYPES; wd++) {
        nu_dtype bd = nt_block_dtypes[wd];
        int64_t per = nu_dtype_block_elements(bd), fs[2] = {9, 10 * per}, m = 2, k = 6 * per, n = 3;
        nt_tensor fused = nt_tensor_quantized(d, bd, 2, fs, 1, -1, 1, &seed);
        nu_tensor w;
        NT_OK(nu_tensor_slice(&fused.t, 0, 3, n, &w));
        NT_OK(nu_tensor_slice(&w, 1, 2 * per, k, &w));
        float *wv = malloc((size_t)(n * k) * sizeof *wv);
        for (int64_t r = 0; r < n; r++)
            for (int64_t e = 0; e < k; e++)
                wv[r * k + e] = fused.values[(3 + r) * fs[1] + 2 * per + e];
        int64_t xs[2] = {m, k}, ds[2] = {m, n};
        nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 3, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_BF16, 2, ds, 0);
        for (int path = 0; path < 2; path++) { /* the dot path where it applies, then the float path */
            nu_matvec_tune tune = {.float_path = path == 1};
            snprintf(what, sizeof what, "%s weight slice [3:6, %lld:%lld] of [9, %lld], %s path", nu_dtype_name(bd),
                     (long long)(2 * per), (long long)(8 * per), (long long)fs[1], path ? "float" : "default");
            check(d, &dst, &w, wv, &x.t, x.values, &tune, what);
        }
        free(wv);
        nt_tensor_free(&fused);
        nt_tensor_free(&x);
        nt_tensor_free(&dst);
    }
    nt_close(d);
}

/* More row groups than one grid's 65535 workgroups (the grid-stride loop), and the knobs: other
 * workgroup sizes, rows per workgroup (not dividing N), unrolls, and the shared-memory
 * reduction instead of subgroup arithmetic (NUVEC_MATVEC); for the dot path also fewer
 * workgroups than row groups and rows split over several subgroups. */
static void large_n_and_every_knob(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 5;
    int64_t ws[2] = {140001, 8}, xs[2] = {1, 8}, ds[2] = {1, 140001};
    nt_tensor w = nt_tensor_random(d, NU_DTYPE_F16, 2, ws, 0, -1, 1, &seed);
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    check(d, &dst, &w.t, w.values, &x.t, x.values, NULL, "n 140001 (more than 65535 row groups)");
    nt_tensor_free(&w);
    nt_tensor_free(&x);
    nt_tensor_free(&dst);

    const nu_matvec_tune tunes[7] = {{.no_subgroup = true},
                                     {.local = 32, .rows = 1, .unroll = 1},
                                     {.local = 64, .rows = 3, .unroll = 3, .no_subgroup = true},
                                     {.local = 256, .rows = 5, .unroll = 8},
                                     {.rows = 8, .unroll = 1},
                                     {.local = 256, .split = 4, .groups = 3},
                                     {.local = 128, .split = 2, .rows = 2, .unroll = 1, .groups = 65535}};
    const char *names[7] = {"no_subgroup", "local 32 rows 1 unroll 1", "local 64 rows 3 unroll 3 no_subgroup",
                            "local 256 rows 5 unroll 8", "rows 8 unroll 1", "local 256 split 4 groups 3",
                            "local 128 split 2 rows 2 unroll 1 groups 65535"};
    const nu_dtype wds[7] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0, NU_DTYPE_Q4_K,
                             NU_DTYPE_Q6_K};
    for (int t = 0; t < 7; t++) {
        for (int wd = t % 7; wd < 7; wd += 3) { /* a subset, to keep kernels few */
            bool block = nt_is_block(wds[wd]);
            int64_t m = 1 + (t + wd) % 8, n = 11, k = block ? 4096 : 1000 + t;
            int64_t w2s[2] = {n, k}, x2s[2] = {m, k}, d2s[2] = {m, n};
            nt_tensor w2 = block ? nt_tensor_quantized(d, wds[wd], 2, w2s, 0, -1, 1, &seed)
                                 : nt_tensor_random(d, wds[wd], 2, w2s, 0, -1, 1, &seed);
            nt_tensor x2 = nt_tensor_random(d, NU_DTYPE_F16, 2, x2s, 0, -1, 1, &seed);
            nt_tensor d2 = nt_tensor_output(d, NU_DTYPE_F32, 2, d2s, 0);
            char what[128];
            snprintf(what, sizeof what, "%s weights, m %lld, tune %s", nu_dtype_name(wds[wd]), (long long)m, names[t]);
            check(d, &d2, &w2.t, w2.values, &x2.t, x2.values, &tunes[t], what);
            nt_tensor_free(&w2);
            nt_tensor_free(&x2);
            nt_tensor_free(&d2);
        }
    }
    /* Split row groups with more sums (rows x M = 64) than a subgroup has lanes (8 on lavapipe, 32
     * on the H200, where lanes past 32 once left their outputs unwritten). */
    const nu_matvec_tune split = {.local = 64, .split = 2, .rows = 8, .unroll = 2};
    for (int wd = 3; wd < 6; wd++) {
        int64_t w2s[2] = {11, 512}, x2s[2] = {8, 512}, d2s[2] = {8, 11};
        nt_tensor w2 = nt_tensor_quantized(d, wds[wd], 2, w2s, 0, -1, 1, &seed);
        nt_tensor x2 = nt_tensor_random(d, NU_DTYPE_F16, 2, x2s, 0, -1, 1, &seed);
        nt_tensor d2 = nt_tensor_output(d, NU_DTYPE_F32, 2, d2s, 0);
        char what[96];
        snprintf(what, sizeof what, "%s, m 8, split 2 rows 8", nu_dtype_name(wds[wd]));
        check(d, &d2, &w2.t, w2.values, &x2.t, x2.values, &split, what);
        nt_tensor_free(&w2);
        nt_tensor_free(&x2);
        nt_tensor_free(&d2);
    }
    nt_close(d);
}

/* The dot path at decode-like shapes (K 4096 and 11008, every x dtype, M 1 to 3 and 8 with a
 * smaller K), against the reference within x's rounding bound; where the dot path applies (on
 * lavapipe's 32 KiB of shared memory not for K 11008 with 2 rows) its results must differ from the float path's (x really was rounded: the dot path ran)
 * and the float path's must meet the strict tolerance (NUVEC_MATVEC="dot=0"). */
static void dot_path_at_decode_shapes(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 7;
    const int64_t ks[4] = {4096, 11008, 1024, 256}, ms[4] = {1, 2, 8, 3}, ns[4] = {67, 29, 33, 200};
    const nu_matvec_tune float_path = {.float_path = true};
    for (int wd = 0; wd < NT_BLOCK_DTYPES; wd++)
        for (int c = wd < 2 ? 0 : wd % 2; c < 4; c += wd < 2 ? 1 : 2) { /* every case for Q8_0 and Q4_0, two for the others */
            nu_dtype bd = nt_block_dtypes[wd];
            int64_t m = ms[c], k = ks[c], n = ns[c];
            int64_t ws[2] = {n, k}, xs[2] = {m, k}, ds[2] = {m, n};
            nt_tensor w = nt_tensor_quantized(d, bd, 2, ws, (uint64_t)(c % 2) * 2, -1, 1, &seed);
            nt_tensor x = nt_tensor_random(d, floats[(wd + c) % 3], 2, xs, 0, -3, 3, &seed);
            nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
            char what[128];
            snprintf(what, sizeof what, "%s weights [%lld, %lld], %s x, m %lld (dot path)", nu_dtype_name(bd),
                     (long long)n, (long long)k, nu_dtype_name(x.t.dtype), (long long)m);
            bool dot = nt_matvec_dot_path(d, &w.t, m, false, NULL);
            check(d, &dst, &w.t, w.values, &x.t, x.values, NULL, what);
            float *dot_result = malloc((size_t)(m * n) * sizeof *dot_result);
            memcpy(dot_result, dst.values, (size_t)(m * n) * sizeof *dot_result);
            snprintf(what, sizeof what, "%s weights [%lld, %lld], m %lld, float path", nu_dtype_name(bd),
                     (long long)n, (long long)k, (long long)m);
            check(d, &dst, &w.t, w.values, &x.t, x.values, &float_path, what);
            int differ = 0;
            for (int64_t i = 0; i < m * n; i++)
                differ += dot_result[i] != dst.values[i];
            if (dot && differ < m * n / 2)
                fail_msg("%s: only %d of %lld results differ from the float path's: did the dot path run?", what,
                         differ, (long long)(m * n));
            free(dot_result);
            nt_tensor_free(&w);
            nt_tensor_free(&x);
            nt_tensor_free(&dst);
        }
    nt_close(d);
}

static void refuses_bad_tensors(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 6;
    int64_t ws[2] = {4, 64}, xs[2] = {2, 64}, x9s[2] = {9, 64}, ds[2] = {2, 4}, bad_ds[2] = {2, 5}, k7s[2] = {2, 63};
    int64_t q48[2] = {4, 48};
    nt_tensor w = nt_tensor_random(d, NU_DTYPE_F16, 2, ws, 0, -1, 1, &seed);
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q8_0, 2, ws, 0, -1, 1, &seed);
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
    nt_tensor x9 = nt_tensor_random(d, NU_DTYPE_F32, 2, x9s, 0, -1, 1, &seed);
    nt_tensor xk = nt_tensor_random(d, NU_DTYPE_F32, 2, k7s, 0, -1, 1, &seed);
    nt_tensor xi = nt_tensor_random(d, NU_DTYPE_I32, 2, xs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    nt_tensor bad = nt_tensor_output(d, NU_DTYPE_F32, 2, bad_ds, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &w.t, &x9.t)); /* m 9 > 8 */
    assert_non_null(strstr(nu_error_message(NULL), "at most 8"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &w.t, &xk.t)); /* k 63 vs 64 */
    assert_non_null(strstr(nu_error_message(NULL), "k differs"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &bad.t, &w.t, &x.t)); /* dst 2x5, not 2x4 */
    assert_non_null(strstr(nu_error_message(NULL), "must be 2x4"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &w.t, &xi.t)); /* an I32 x */
    assert_non_null(strstr(nu_error_message(NULL), "I32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &xi.t, &w.t, &x.t)); /* an I32 dst (2x64, also the wrong shape) */
    assert_non_null(strstr(nu_error_message(NULL), "I32"));
    /* A block weight whose k is not a multiple of 32: a view of q's bytes as [4, 48]. */
    nu_tensor q48v = nu_tensor_make(q.t.buffer, 0, NU_DTYPE_Q8_0, 2, q48);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &q48v, &xk.t));
    assert_non_null(strstr(nu_error_message(NULL), "32"));
    /* dst overlapping x, and overlapping the weight. */
    nu_tensor over_x = nu_tensor_make(x.t.buffer, 0, NU_DTYPE_F32, 2, ds);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &over_x, &w.t, &x.t));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps x"));
    nu_tensor over_w = nu_tensor_make(w.t.buffer, 16, NU_DTYPE_F32, 2, ds);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &over_w, &w.t, &x.t));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps weight"));
    /* A strided dst, a rank-1 x, a bad knob, NULLs. */
    nu_tensor dts = nu_tensor_make(bad.t.buffer, 0, NU_DTYPE_F32, 2, ds);
    dts.strides[0] = 5; /* rows of bad's 5 columns */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dts, &w.t, &x.t));
    assert_non_null(strstr(nu_error_message(NULL), "contiguous"));
    nu_tensor x1 = nu_tensor_make(x.t.buffer, 0, NU_DTYPE_F32, 1, xs + 1);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &w.t, &x1));
    assert_non_null(strstr(nu_error_message(NULL), "rank"));
    const nu_matvec_tune bad_tunes[5] = {{.rows = 9}, {.local = 48}, {.split = 3}, {.unroll = 9}, {.glu_rows = 9}};
    const char *bad_names[5] = {"tune.rows is 9", "tune.local is 48", "tune.split is 3", "tune.unroll is 9",
                                "tune.glu_rows is 9"};
    for (int i = 0; i < 5; i++) {
        nu_matvec_desc bad_desc = {.tune = bad_tunes[i]};
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &bad_desc));
        if (!strstr(nu_error_message(NULL), bad_names[i]))
            fail_msg("refused with '%s', expected it to name '%s'", nu_error_message(NULL), bad_names[i]);
    }
    /* A K format's rows are whole super-blocks: a view of Q4_K bytes as [4, 128], and a column slice
     * that would split a super-block. */
    int64_t k4s[2] = {4, 512}, k128[2] = {4, 128};
    nt_tensor q4k = nt_tensor_quantized(d, NU_DTYPE_Q4_K, 2, k4s, 0, -1, 1, &seed);
    nu_tensor k128v = nu_tensor_make(q4k.t.buffer, 0, NU_DTYPE_Q4_K, 2, k128);
    nt_tensor x128 = nt_tensor_random(d, NU_DTYPE_F32, 2, (int64_t[2]){2, 128}, 0, -1, 1, &seed);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &k128v, &x128.t));
    assert_non_null(strstr(nu_error_message(NULL), "multiple of 256"));
    nu_tensor split_view;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_tensor_slice(&q4k.t, 1, 128, 256, &split_view));
    assert_non_null(strstr(nu_error_message(NULL), "split a block"));
    nt_tensor_free(&q4k);
    nt_tensor_free(&x128);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(NULL, &dst.t, &w.t, &x.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, NULL, &x.t));
    /* Empty: m = 0 records nothing and succeeds; k = 0 with a dst to fill is refused. */
    int64_t e0[2] = {0, 64}, d0[2] = {0, 4}, wk0[2] = {4, 0}, xk0[2] = {2, 0};
    nu_tensor xe = nu_tensor_make(x.t.buffer, 0, NU_DTYPE_F32, 2, e0), de = nu_tensor_make(dst.t.buffer, 0, NU_DTYPE_F32, 2, d0);
    NT_OK(nu_op_matvec(c, &de, &w.t, &xe));
    nu_tensor wz = nu_tensor_make(w.t.buffer, 0, NU_DTYPE_F16, 2, wk0), xz = nu_tensor_make(x.t.buffer, 0, NU_DTYPE_F32, 2, xk0);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &wz, &xz));
    assert_non_null(strstr(nu_error_message(NULL), "k is 0"));
    nu_commands_free(c);
    nt_tensor_free(&w);
    nt_tensor_free(&q);
    nt_tensor_free(&x);
    nt_tensor_free(&x9);
    nt_tensor_free(&xk);
    nt_tensor_free(&xi);
    nt_tensor_free(&dst);
    nt_tensor_free(&bad);
    nt_close(d);
}


/* The results of one product (dst's values) with `tune` (or NULL), on dst's device. */
static float *run_values(nu_device *d, nt_tensor *dst, const nt_tensor *w, const nt_tensor *x, const nu_matvec_tune *tune)
{
    mv_case k = {&dst->t, &w->t, &x->t, tune};
    nt_run(d, record_matvec, &k);
    nt_tensor_download(dst);
    float *v = malloc(sizeof(float) * dst->numel);
    memcpy(v, dst->values, sizeof(float) * dst->numel);
    return v;
}

/* One product on a device of its own, opened now (with the environment as it is): its values. */
static float *run_on_new_device(const nt_tensor *w, const nt_tensor *x, const nu_matvec_tune *tune)
{
    nu_device *d = nt_open();
    nt_tensor w2 = *w, x2 = *x, dst = nt_tensor_output(d, NU_DTYPE_F32, 2, (int64_t[2]){x->t.shape[0], w->t.shape[0]}, 0);
    NT_OK(nu_buffer_new(d, w->size, NU_STORAGE_SHARED, &w2.t.buffer));
    NT_OK(nu_buffer_write(w2.t.buffer, 0, w->bytes, w->size));
    NT_OK(nu_buffer_new(d, x->size, NU_STORAGE_SHARED, &x2.t.buffer));
    NT_OK(nu_buffer_write(x2.t.buffer, 0, x->bytes, x->size));
    float *v = run_values(d, &dst, &w2, &x2, tune);
    nu_buffer_free(w2.t.buffer);
    nu_buffer_free(x2.t.buffer);
    nt_tensor_free(&dst);
    nt_close(d);
    return v;
}

/* NUVEC_MATVEC, the developer override of desc->tune: read once per device, at its first use
 * there (a bad value fails every product on that device, naming the variable; a later change
 * does not reach it), and over desc->tune on a device that first reads it set. */
static void the_environment_overrides_once_per_device(void **state)
{
    /* Q5_0: a block format that stays on the paths NUVEC_MATVEC tunes (the K formats take
     * matvec_soa's kernel, tuned by NUVEC_MATVEC_SOA, where the device has subgroups). */
    (void)state;
    uint64_t seed = 8;
    int64_t ws[2] = {7, 256}, xs[2] = {1, 256}, ds[2] = {1, 7};
    assert_int_equal(setenv("NUVEC_MATVEC", "rows=9", 1), 0);
    nu_device *d = nt_open();
    nt_tensor w = nt_tensor_quantized(d, NU_DTYPE_Q5_0, 2, ws, 0, -1, 1, &seed);
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &w.t, &x.t));
    assert_non_null(strstr(nu_error_message(d), "NUVEC_MATVEC has 'rows=9'"));
    unsetenv("NUVEC_MATVEC");
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &w.t, &x.t)); /* still the value first read */
    nu_commands_free(c);
    nt_tensor_free(&w);
    nt_tensor_free(&x);
    nt_tensor_free(&dst);
    nt_close(d);

    /* Unset at the first use: the defaults (the dot path on lavapipe) stay when it is set later. */
    d = nt_open();
    w = nt_tensor_quantized(d, NU_DTYPE_Q5_0, 2, ws, 0, -1, 1, &seed);
    x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
    dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    const nu_matvec_tune float_path = {.float_path = true};
    float *dflt = run_values(d, &dst, &w, &x, NULL), *flt = run_values(d, &dst, &w, &x, &float_path);
    if (nt_matvec_dot_path(d, &w.t, 1, false, NULL) && !memcmp(dflt, flt, sizeof(float) * 7))
        fail_msg("the dot path's results are the float path's: the test cannot tell them apart");
    assert_int_equal(setenv("NUVEC_MATVEC", "dot=0", 1), 0);
    float *later = run_values(d, &dst, &w, &x, NULL);
    assert_memory_equal(later, dflt, sizeof(float) * 7);
    /* Set when a device first reads it: dot=0 over the defaults, then dot=1 over tune.float_path. */
    float *env_float = run_on_new_device(&w, &x, NULL);
    assert_memory_equal(env_float, flt, sizeof(float) * 7);
    assert_int_equal(setenv("NUVEC_MATVEC", "dot=1", 1), 0);
    float *env_dot = run_on_new_device(&w, &x, &float_path);
    assert_memory_equal(env_dot, dflt, sizeof(float) * 7);
    unsetenv("NUVEC_MATVEC");
    free(dflt);
    free(flt);
    free(later);
    free(env_float);
    free(env_dot);
    nt_tensor_free(&w);
    nt_tensor_free(&x);
    nt_tensor_free(&dst);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(float_weights_match_the_reference_for_every_dtype),
        cmocka_unit_test(block_weights_match_the_reference_for_every_dtype),
        cmocka_unit_test(every_row_count_from_1_to_8),
        cmocka_unit_test(strided_and_unaligned_views),
        cmocka_unit_test(large_n_and_every_knob),
        cmocka_unit_test(dot_path_at_decode_shapes),
        cmocka_unit_test(refuses_bad_tensors),
        cmocka_unit_test(the_environment_overrides_once_per_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
