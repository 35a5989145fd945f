/* test_ops_matvec.c: nu_op_matvec (src/ops/matvec.c, kernels/matvec/matvec.comp) against a
 * float64 CPU reference: every weight dtype (F32, F16, BF16, Q8_0, Q4_0) with float x and dst
 * of each dtype, 1 to 8 rows of x, odd N and K (tails), unaligned, sliced (strided rows) and
 * transposed views, more row groups than one grid holds, the kernel's knobs; and what it
 * refuses. Then nu_op_matvec_fused (norm_weight, glu_up, residual, alone and combined) the same
 * way, with its own reference and tolerance (stated above fused_case).
 *
 * Tolerance: the reference sums in double the products of the exact element values (block
 * weights dequantized: the values the kernel must see), so the kernel's only error is F32
 * summation in another order, at most about K * 2^-24 * sum |x w| (we allow 2^-16 * sum |x w|
 * for K up to 4096, a margin of about 16) plus the one rounding of dst's store (its dtype's
 * tolerance, relative).
 *
 * Q8_0 and Q4_0 weights on a device with integer dot products (and subgroup arithmetic) take the dot
 * path (kernels/matvec/matvec_dot.comp), which rounds x to 8 bits per 32-element block: there
 * the reference rounds x as the kernel does (in float: dx = max|x| / 127, q = roundEven(x *
 * (127 / max|x|))) and sums w * dx * q; where x * (127 / max|x|) is within 1e-3 of a tie (the
 * GPU's float arithmetic may round it the other way) the tolerance adds |w| * dx. The float
 * path (NUVEC_MATVEC="dot=0") keeps the strict tolerance, and a test checks that the dot
 * path really ran where it applies (its results differ from the float path's). */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

typedef struct mv_case {
    const nu_tensor *dst, *w, *x;
} mv_case;

static nu_status record_matvec(nu_commands *c, void *arg)
{
    mv_case *k = arg;
    return nu_op_matvec(c, k->dst, k->w, k->x);
}

/* Whether nu_op_matvec may take the dot path for these weights and m rows of x (see above; x's
 * rows must fit in shared memory: 48 bytes a block and row, K / 32 rounded up to 64 blocks, and
 * 8 bytes more: one float each of the unused split sums and sums of squares). */
static bool dot_path_possible(nu_device *d, const nu_tensor *w, int64_t m)
{
    const char *env = getenv("NUVEC_MATVEC");
    const nu_device_info *info = nu_device_get_info(d);
    uint64_t shared = 48ull * (uint64_t)m * (uint64_t)((w->shape[1] / 32 + 63) / 64 * 64) + 8;
    return (w->dtype == NU_DTYPE_Q8_0 || w->dtype == NU_DTYPE_Q4_0) && info->features[NU_FEATURE_INTEGER_DOT_PRODUCT] &&
           (info->subgroup_operations & NU_SUBGROUP_ARITHMETIC) && (info->subgroup_operations & NU_SUBGROUP_SHUFFLE) &&
           info->subgroup_size % 8 == 0 && shared <= info->max_shared_memory &&
           !(env && strstr(env, "dot=0"));
}

/* Runs dst = x * w^T and checks it: wv [n, k] and xv [m, k] the exact values (row-major). */
static void check(nu_device *d, nt_tensor *dst, const nu_tensor *w, const float *wv, const nu_tensor *x, const float *xv,
                  const char *what)
{
    mv_case k = {&dst->t, w, x};
    nt_run(d, record_matvec, &k);
    nt_tensor_download(dst);
    int64_t m = x->shape[0], kk = x->shape[1], n = w->shape[0];
    float rel = nt_dtype_tolerance(dst->t.dtype);
    bool dot = dot_path_possible(d, w, m);
    /* x as the dot path rounds it, and each element's step where it is near a tie (else 0). */
    double *xhat = NULL, *tie = NULL;
    if (dot) {
        xhat = malloc((size_t)(m * kk) * sizeof *xhat);
        tie = malloc((size_t)(m * kk) * sizeof *tie);
        for (int64_t b = 0; b < m * kk / 32; b++) {
            float amax = 0;
            for (int64_t e = 32 * b; e < 32 * b + 32; e++)
                amax = fmaxf(amax, fabsf(xv[e]));
            float inv = amax > 0 ? 127.0f / amax : 0.0f, dx = amax / 127.0f;
            for (int64_t e = 32 * b; e < 32 * b + 32; e++) {
                float t = xv[e] * inv;
                xhat[e] = (double)dx * (double)nearbyintf(t); /* round half to even (the default mode) */
                tie[e] = fabsf(fabsf(t - truncf(t)) - 0.5f) < 1e-3f ? dx : 0.0;
            }
        }
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
            check(d, &dst, &w.t, w.values, &x.t, x.values, what);
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
    const nu_dtype blocks[2] = {NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};
    /* Each (weight, x) pair with every K (one kernel: one M and path), dst's dtype in turn. */
    const int64_t ks[] = {32, 96, 160, 4096};
    const int64_t ns[] = {1, 3, 37};
    int i = 0;
    for (int wd = 0; wd < 2; wd++)
        for (int xd = 0; xd < 3; xd++)
            for (int kk = 0; kk < 4; kk++, i++) {
                int dd = (wd * 2 + xd) % 3;
                int64_t m = 1 + ((wd * 3 + xd) * 3) % 8, k = ks[kk], n = ns[i % 3];
                uint64_t wpad = (uint64_t)(i % 3); /* whole blocks before it: rows at 2 mod 4 bytes */
                uint64_t xpad = (uint64_t)(xd == 1);
                int64_t ws[2] = {n, k}, xs[2] = {m, k}, ds[2] = {m, n};
                nt_tensor w = nt_tensor_quantized(d, blocks[wd], 2, ws, wpad, -2, 2, &seed);
                nt_tensor x = nt_tensor_random(d, floats[xd], 2, xs, xpad, -1, 1, &seed);
                nt_tensor dst = nt_tensor_output(d, floats[dd], 2, ds, 0);
                char what[160];
                snprintf(what, sizeof what, "%s dst = %s x * %s w^T, pad blocks %llu, x pad %llu",
                         nu_dtype_name(floats[dd]), nu_dtype_name(floats[xd]), nu_dtype_name(blocks[wd]),
                         (unsigned long long)wpad, (unsigned long long)xpad);
                check(d, &dst, &w.t, w.values, &x.t, x.values, what);
                nt_tensor_free(&w);
                nt_tensor_free(&x);
                nt_tensor_free(&dst);
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
    const nu_dtype wds[5] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};
    for (int64_t m = 1; m <= 8; m++) {
        nu_dtype wd = wds[m % 5];
        bool block = wd == NU_DTYPE_Q8_0 || wd == NU_DTYPE_Q4_0;
        int64_t n = 13, k = block ? 288 : 263;
        int64_t ws[2] = {n, k}, xs[2] = {m, k}, ds[2] = {m, n};
        nt_tensor w = block ? nt_tensor_quantized(d, wd, 2, ws, 0, -1, 1, &seed) : nt_tensor_random(d, wd, 2, ws, 0, -1, 1, &seed);
        nt_tensor x = nt_tensor_random(d, m % 2 ? NU_DTYPE_F32 : NU_DTYPE_F16, 2, xs, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        char what[96];
        snprintf(what, sizeof what, "%s weights, m %lld", nu_dtype_name(wd), (long long)m);
        check(d, &dst, &w.t, w.values, &x.t, x.values, what);
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
        check(d, &dst, &w, wv, &x, xv, what);
        /* x aligned and strided: columns [8, 141) of a [3, 152] F16 x (16-byte rows). */
        int64_t xs2[2] = {m, 152};
        nt_tensor xb2 = nt_tensor_random(d, NU_DTYPE_F16, 2, xs2, 0, -1, 1, &seed);
        nu_tensor x2;
        NT_OK(nu_tensor_slice(&xb2.t, 1, 8, k, &x2));
        float *xv2 = nt_tensor_values_new(&xb2, &x2);
        snprintf(what, sizeof what, "%s weight slice, aligned strided F16 x", nu_dtype_name(floats[wd]));
        check(d, &dst, &w, wv, &x2, xv2, what);
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
        check(d, &dst, &wt, wtv, &xt, xtv, what);
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
    /* Block weights: a fused [9, 320] weight's rows [3, 6) and columns [64, 64 + 192) (row stride 320). */
    const nu_dtype blocks[2] = {NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};
    for (int wd = 0; wd < 2; wd++) {
        int64_t fs[2] = {9, 320}, m = 2, k = 192, n = 3;
        nt_tensor fused = nt_tensor_quantized(d, blocks[wd], 2, fs, 1, -1, 1, &seed);
        nu_tensor w;
        NT_OK(nu_tensor_slice(&fused.t, 0, 3, n, &w));
        NT_OK(nu_tensor_slice(&w, 1, 64, k, &w));
        float *wv = malloc((size_t)(n * k) * sizeof *wv);
        for (int64_t r = 0; r < n; r++)
            for (int64_t e = 0; e < k; e++)
                wv[r * k + e] = fused.values[(3 + r) * 320 + 64 + e];
        int64_t xs[2] = {m, k}, ds[2] = {m, n};
        nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 3, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_BF16, 2, ds, 0);
        snprintf(what, sizeof what, "%s weight slice [3:6, 64:256] of [9, 320]", nu_dtype_name(blocks[wd]));
        check(d, &dst, &w, wv, &x.t, x.values, what);
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
    check(d, &dst, &w.t, w.values, &x.t, x.values, "n 140001 (more than 65535 row groups)");
    nt_tensor_free(&w);
    nt_tensor_free(&x);
    nt_tensor_free(&dst);

    const char *knobs[] = {"subgroup=0", "local=32 rows=1 unroll=1", "local=64 rows=3 unroll=3 subgroup=0",
                           "local=256 rows=5 unroll=8", "rows=8 unroll=1", "local=256 split=4 groups=3",
                           "local=128 split=2 rows=2 unroll=1 groups=0"};
    const nu_dtype wds[5] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};
    for (int t = 0; t < 7; t++) {
        assert_int_equal(setenv("NUVEC_MATVEC", knobs[t], 1), 0);
        for (int wd = t % 5; wd < 5; wd += 2) { /* a subset, to keep kernels few */
            bool block = wds[wd] == NU_DTYPE_Q8_0 || wds[wd] == NU_DTYPE_Q4_0;
            int64_t m = 1 + (t + wd) % 8, n = 11, k = block ? 4096 : 1000 + t;
            int64_t w2s[2] = {n, k}, x2s[2] = {m, k}, d2s[2] = {m, n};
            nt_tensor w2 = block ? nt_tensor_quantized(d, wds[wd], 2, w2s, 0, -1, 1, &seed)
                                 : nt_tensor_random(d, wds[wd], 2, w2s, 0, -1, 1, &seed);
            nt_tensor x2 = nt_tensor_random(d, NU_DTYPE_F16, 2, x2s, 0, -1, 1, &seed);
            nt_tensor d2 = nt_tensor_output(d, NU_DTYPE_F32, 2, d2s, 0);
            char what[128];
            snprintf(what, sizeof what, "%s weights, m %lld, NUVEC_MATVEC=\"%s\"", nu_dtype_name(wds[wd]), (long long)m,
                     knobs[t]);
            check(d, &d2, &w2.t, w2.values, &x2.t, x2.values, what);
            nt_tensor_free(&w2);
            nt_tensor_free(&x2);
            nt_tensor_free(&d2);
        }
    }
    /* Split row groups with more sums (rows x M = 64) than a subgroup has lanes (8 on lavapipe, 32
     * on the H200, where lanes past 32 once left their outputs unwritten). */
    assert_int_equal(setenv("NUVEC_MATVEC", "local=64 split=2 rows=8 unroll=2", 1), 0);
    for (int wd = 3; wd < 5; wd++) {
        int64_t w2s[2] = {11, 512}, x2s[2] = {8, 512}, d2s[2] = {8, 11};
        nt_tensor w2 = nt_tensor_quantized(d, wds[wd], 2, w2s, 0, -1, 1, &seed);
        nt_tensor x2 = nt_tensor_random(d, NU_DTYPE_F16, 2, x2s, 0, -1, 1, &seed);
        nt_tensor d2 = nt_tensor_output(d, NU_DTYPE_F32, 2, d2s, 0);
        check(d, &d2, &w2.t, w2.values, &x2.t, x2.values,
              wds[wd] == NU_DTYPE_Q8_0 ? "Q8_0, m 8, split=2 rows=8" : "Q4_0, m 8, split=2 rows=8");
        nt_tensor_free(&w2);
        nt_tensor_free(&x2);
        nt_tensor_free(&d2);
    }
    unsetenv("NUVEC_MATVEC");
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
    const nu_dtype blocks[2] = {NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};
    const int64_t ks[4] = {4096, 11008, 1024, 128}, ms[4] = {1, 2, 8, 3}, ns[4] = {67, 29, 33, 200};
    for (int wd = 0; wd < 2; wd++)
        for (int c = 0; c < 4; c++) {
            int64_t m = ms[c], k = ks[c], n = ns[c];
            int64_t ws[2] = {n, k}, xs[2] = {m, k}, ds[2] = {m, n};
            nt_tensor w = nt_tensor_quantized(d, blocks[wd], 2, ws, (uint64_t)(c % 2) * 2, -1, 1, &seed);
            nt_tensor x = nt_tensor_random(d, floats[(wd + c) % 3], 2, xs, 0, -3, 3, &seed);
            nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
            char what[128];
            snprintf(what, sizeof what, "%s weights [%lld, %lld], %s x, m %lld (dot path)", nu_dtype_name(blocks[wd]),
                     (long long)n, (long long)k, nu_dtype_name(x.t.dtype), (long long)m);
            bool dot = dot_path_possible(d, &w.t, m);
            check(d, &dst, &w.t, w.values, &x.t, x.values, what);
            float *dot_result = malloc((size_t)(m * n) * sizeof *dot_result);
            memcpy(dot_result, dst.values, (size_t)(m * n) * sizeof *dot_result);
            assert_int_equal(setenv("NUVEC_MATVEC", "dot=0", 1), 0);
            snprintf(what, sizeof what, "%s weights [%lld, %lld], m %lld, float path", nu_dtype_name(blocks[wd]),
                     (long long)n, (long long)k, (long long)m);
            check(d, &dst, &w.t, w.values, &x.t, x.values, what);
            unsetenv("NUVEC_MATVEC");
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
    assert_int_equal(setenv("NUVEC_MATVEC", "rows=9", 1), 0);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &w.t, &x.t));
    assert_non_null(strstr(nu_error_message(NULL), "NUVEC_MATVEC"));
    unsetenv("NUVEC_MATVEC");
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

/* ---- nu_op_matvec_fused ------------------------------------------------------------------
 * The reference of the fused forms, in double from the exact element values: s_m = 1 /
 * sqrt(mean(x^2) + eps); x' = x * norm_weight (in float: the dot path quantizes that F32
 * product per block, as the reference then does); P = s_m * sum(w x') for the gate (weight) and
 * up; dst = silu(P_gate) * P_up + residual. Tolerance: each product's as above (F32 summation,
 * x's rounding on the dot path) scaled by s_m, plus 2^-16 |P| for s_m's F32 sum of squares;
 * through the GLU |silu'| <= 1.1 times |P_up| times the gate's error plus |silu(P_gate)| times
 * the up's; then dst's rounding. Much tighter than any wrong formula: dropping norm_weight, s_m
 * or eps (0.1 here, so that eps counts), silu(up) * gate, a lost residual each move the outputs
 * by a good fraction of their size. */

typedef struct fused_case {
    const nu_tensor *dst, *w, *x;
    nu_matvec_desc desc;
} fused_case;

static nu_status record_fused(nu_commands *c, void *arg)
{
    fused_case *k = arg;
    return nu_op_matvec_fused(c, k->dst, k->w, k->x, &k->desc);
}

/* The exact values of the inputs (row-major over each view): w and up [n, k], x [m, k], g [k],
 * r [m, n] (the residual's values before the run: for an in-place residual, dst's). NULL where
 * desc has no such field. */
typedef struct fused_ref {
    const float *w, *up, *x, *g, *r;
} fused_ref;

/* Whether the dot path takes this call (dot_path_possible, with the norm's sums of squares: 4
 * bytes a block and row). */
static bool fused_dot_possible(nu_device *d, const nu_tensor *w, int64_t m, bool norm)
{
    const nu_device_info *info = nu_device_get_info(d);
    uint64_t cap = (uint64_t)((w->shape[1] / 32 + 63) / 64 * 64);
    uint64_t shared = 48ull * (uint64_t)m * cap + 4 + (norm ? 4ull * (uint64_t)m * cap : 4);
    return dot_path_possible(d, w, m) && shared <= info->max_shared_memory;
}

static double silu_d(double v) { return v / (1.0 + exp(-v)); }

/* One product of the reference: sum_e w[e] xq[e] and its error bound (before s). */
static double ref_dot(const float *w, const double *xq, const double *tie, int64_t k, double *err)
{
    double s = 0, sabs = 0, round = 0;
    for (int64_t e = 0; e < k; e++) {
        s += (double)w[e] * xq[e];
        sabs += fabs((double)w[e] * xq[e]);
        round += fabs((double)w[e]) * tie[e];
    }
    *err = sabs / 65536.0 + round;
    return s;
}

/* Runs the fused product and checks dst against the reference (dst->values afterwards: the
 * result). */
static void check_fused(nu_device *d, nt_tensor *dst, const nu_tensor *w, const nu_tensor *x, const nu_matvec_desc *desc,
                        const fused_ref *ref, const char *what)
{
    fused_case fc = {&dst->t, w, x, *desc};
    nt_run(d, record_fused, &fc);
    nt_tensor_download(dst);
    int64_t m = x->shape[0], k = x->shape[1], n = w->shape[0];
    bool dot = fused_dot_possible(d, w, m, desc->norm_weight != NULL);
    float rel = nt_dtype_tolerance(dst->t.dtype);
    double *xq = malloc((size_t)k * sizeof *xq), *tie = malloc((size_t)k * sizeof *tie);
    float *xn = malloc((size_t)k * sizeof *xn);
    for (int64_t i = 0; i < m; i++) {
        const float *xr = ref->x + i * k;
        double ss = 0;
        for (int64_t e = 0; e < k; e++) {
            ss += (double)xr[e] * xr[e];
            xn[e] = desc->norm_weight ? xr[e] * ref->g[e] : xr[e]; /* a float product, as the kernels' */
            xq[e] = desc->norm_weight ? (double)xr[e] * ref->g[e] : xr[e];
            tie[e] = 0;
        }
        double s = desc->norm_weight ? 1.0 / sqrt(ss / (double)k + (double)desc->norm_eps) : 1.0;
        if (dot) /* x' as the dot path rounds it (see check) */
            for (int64_t b = 0; b < k / 32; b++) {
                float amax = 0;
                for (int64_t e = 32 * b; e < 32 * b + 32; e++)
                    amax = fmaxf(amax, fabsf(xn[e]));
                float inv = amax > 0 ? 127.0f / amax : 0.0f, dx = amax / 127.0f;
                for (int64_t e = 32 * b; e < 32 * b + 32; e++) {
                    float t = xn[e] * inv;
                    xq[e] = (double)dx * (double)nearbyintf(t);
                    tie[e] = fabsf(fabsf(t - truncf(t)) - 0.5f) < 1e-3f ? dx : 0.0;
                }
            }
        for (int64_t j = 0; j < n; j++) {
            double eg, eu = 0;
            double pg = s * ref_dot(ref->w + j * k, xq, tie, k, &eg), pu = 0;
            eg = s * eg + fabs(pg) / 65536.0;
            double v = pg, err = eg;
            if (desc->glu_up) {
                pu = s * ref_dot(ref->up + j * k, xq, tie, k, &eu);
                eu = s * eu + fabs(pu) / 65536.0;
                v = silu_d(pg) * pu;
                err = 1.1 * fabs(pu) * eg + fabs(silu_d(pg)) * eu + fabs(v) / 65536.0;
            }
            if (desc->residual) {
                double r = ref->r[i * n + j];
                err += (fabs(v) + fabs(r)) / (1 << 22);
                v += r;
            }
            float want = nt_round_to(dst->t.dtype, (float)v);
            float got = dst->values[i * n + j];
            double tol = err + rel * fabs((double)want) + 1e-30;
            if (!(fabs((double)got - (double)want) <= tol))
                fail_msg("%s: dst[%lld, %lld] is %.9g, expected %.9g (tolerance %.3g; m %lld n %lld k %lld%s)", what,
                         (long long)i, (long long)j, (double)got, (double)want, tol, (long long)m, (long long)n,
                         (long long)k, dot ? ", dot path" : "");
        }
    }
    free(xq);
    free(tie);
    free(xn);
}

static const nu_dtype every_weight[5] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};

static bool is_block(nu_dtype t) { return t == NU_DTYPE_Q8_0 || t == NU_DTYPE_Q4_0; }

#define F_NORM 1
#define F_GLU 2
#define F_RES 4      /* a residual apart from dst */
#define F_IN_PLACE 8 /* the residual is dst */

/* One fused case: weight and glu_up the two stacked halves of one [2n, k] buffer (rows [0, n) and
 * [n, 2n): a fused gate-up weight), norm_weight of its own dtype (unaligned or strided in some
 * cases: the kernels' general loads), the residual apart (a transposed view in some cases) or dst
 * itself. Block weights run on both paths: the dot path where it applies, the float path with
 * NUVEC_MATVEC="dot=0" (and the dot path's results must differ from the float path's: x was
 * rounded). */
static void run_fused_case(nu_device *d, nu_dtype wd, int fields, int64_t m, int64_t n, int64_t k, int variant,
                           uint64_t *seed)
{
    nu_dtype xd = floats[variant % 3], gd = floats[(variant + 1) % 3], dd = floats[(variant / 3 + 2) % 3];
    int64_t fs[2] = {2 * n, k}, xs[2] = {m, k}, gs[1] = {k}, ds[2] = {m, n};
    nt_tensor fused = is_block(wd) ? nt_tensor_quantized(d, wd, 2, fs, (uint64_t)(variant % 2), -1, 1, seed)
                                   : nt_tensor_random(d, wd, 2, fs, (uint64_t)(variant % 4 == 3), -1, 1, seed);
    nu_tensor w, up;
    NT_OK(nu_tensor_slice(&fused.t, 0, 0, n, &w));
    NT_OK(nu_tensor_slice(&fused.t, 0, n, n, &up));
    nt_tensor x = nt_tensor_random(d, xd, 2, xs, (uint64_t)(variant % 5 == 4), -1, 1, seed);
    /* norm_weight: contiguous (aligned or not) or every other element of a [2k] tensor. */
    bool strided_g = variant % 3 == 2;
    int64_t g2s[1] = {2 * k};
    nt_tensor gb = nt_tensor_random(d, gd, 1, strided_g ? g2s : gs, (uint64_t)(variant % 2), 0.5f, 1.5f, seed);
    nu_tensor g = gb.t;
    if (strided_g) {
        g.shape[0] = k;
        g.strides[0] = 2;
    }
    float *gv = nt_tensor_values_new(&gb, &g);
    nt_tensor dst, rb = {0};
    nu_tensor res = {0};
    float *rv = NULL;
    uint8_t *res_bytes = NULL; /* in place: dst's bytes before the run (the residual) */
    if (fields & F_IN_PLACE) {
        dst = nt_tensor_random(d, dd, 2, ds, 0, -2, 2, seed);
        res = dst.t;
        rv = malloc((size_t)(m * n) * sizeof *rv);
        memcpy(rv, dst.values, (size_t)(m * n) * sizeof *rv);
        res_bytes = malloc(dst.size);
        memcpy(res_bytes, dst.bytes, dst.size);
    } else {
        dst = nt_tensor_output(d, dd, 2, ds, (uint64_t)(variant % 2));
        if (fields & F_RES) {
            bool transposed = variant % 2 == 1;
            int64_t rs[2] = {transposed ? n : m, transposed ? m : n};
            rb = nt_tensor_random(d, floats[(variant + 2) % 3], 2, rs, 1, -2, 2, seed);
            res = rb.t;
            if (transposed)
                NT_OK(nu_tensor_transpose(&rb.t, 0, 1, &res));
            rv = nt_tensor_values_new(&rb, &res);
        }
    }
    nu_matvec_desc desc = {0};
    if (fields & F_NORM)
        desc.norm_weight = &g, desc.norm_eps = 0.1f;
    if (fields & F_GLU)
        desc.glu_up = &up;
    if (fields & (F_RES | F_IN_PLACE))
        desc.residual = &res;
    fused_ref ref = {fused.values, fused.values + n * k, x.values, gv, rv};
    char what[200];
    snprintf(what, sizeof what, "%s weight, %s x, %s dst,%s%s%s%s (%s norm_weight%s)", nu_dtype_name(wd),
             nu_dtype_name(xd), nu_dtype_name(dd), fields & F_NORM ? " norm" : "", fields & F_GLU ? " glu" : "",
             fields & F_RES ? " residual" : "", fields & F_IN_PLACE ? " residual in place" : "", nu_dtype_name(gd),
             strided_g ? " strided" : "");
    check_fused(d, &dst, &w, &x.t, &desc, &ref, what);
    if (is_block(wd)) {
        bool dot = fused_dot_possible(d, &w, m, fields & F_NORM);
        float *dot_result = malloc((size_t)(m * n) * sizeof *dot_result);
        memcpy(dot_result, dst.values, (size_t)(m * n) * sizeof *dot_result);
        if (fields & F_IN_PLACE) { /* dst again holds the residual */
            nu_commands *c;
            NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
            NT_OK(nu_commands_upload(c, dst.t.buffer, 0, res_bytes, dst.size));
            NT_OK(nu_commands_commit(c));
            NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
            nu_commands_free(c);
        }
        assert_int_equal(setenv("NUVEC_MATVEC", "dot=0", 1), 0);
        char what2[220];
        snprintf(what2, sizeof what2, "%s, float path", what);
        check_fused(d, &dst, &w, &x.t, &desc, &ref, what2);
        unsetenv("NUVEC_MATVEC");
        int differ = 0;
        for (int64_t i = 0; i < m * n; i++)
            differ += dot_result[i] != dst.values[i];
        if (dot && differ < m * n / 2)
            fail_msg("%s: only %d of %lld results differ from the float path's: did the dot path run?", what, differ,
                     (long long)(m * n));
        free(dot_result);
    }
    free(gv);
    free(rv);
    free(res_bytes);
    nt_tensor_free(&fused);
    nt_tensor_free(&x);
    nt_tensor_free(&gb);
    nt_tensor_free(&dst);
    if (rb.values)
        nt_tensor_free(&rb);
}

/* Each field alone and the combinations a decoder layer uses, every weight dtype, M 1, 2 and 5,
 * odd N (and for float weights odd K, the general path, or K 260, the vector path with a tail). */
static void fused_fields_alone_and_combined_for_every_dtype(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 11;
    const int combos[7] = {F_NORM, F_GLU, F_RES, F_IN_PLACE, F_NORM | F_GLU, F_GLU | F_RES,
                           F_NORM | F_GLU | F_IN_PLACE};
    const int64_t ms[3] = {1, 2, 5};
    int variant = 0;
    for (int wd = 0; wd < 5; wd++)
        for (int f = 0; f < 7; f++, variant++) {
            bool block = is_block(every_weight[wd]);
            int64_t m = ms[variant % 3], n = variant % 2 ? 37 : 13, k = block ? 288 : variant % 4 < 2 ? 263 : 260;
            run_fused_case(d, every_weight[wd], combos[f], m, n, k, variant, &seed);
        }
    nt_close(d);
}

/* The fused forms at larger shapes and other knobs: K 4096 (the dot path's many blocks; the float
 * vector path without a tail), M 8, the shared-memory reduction (subgroup=0), split row groups
 * on the dot path and glurows (the rows of a GLU) below rows. */
static void fused_at_other_shapes_and_knobs(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 12;
    int variant = 0;
    for (int wd = 0; wd < 5; wd++, variant++)
        run_fused_case(d, every_weight[wd], F_NORM | F_GLU | F_RES, 8, 19, is_block(every_weight[wd]) ? 1024 : 1000,
                       variant, &seed);
    for (int wd = 0; wd < 5; wd++, variant++)
        run_fused_case(d, every_weight[wd], F_NORM | F_IN_PLACE, 1, 67, 4096, variant, &seed);
    const char *knobs[3] = {"subgroup=0", "local=64 split=2 rows=3 unroll=1", "rows=4 unroll=3 glurows=1"};
    for (int t = 0; t < 3; t++) {
        assert_int_equal(setenv("NUVEC_MATVEC", knobs[t], 1), 0);
        for (int wd = t; wd < 5; wd += 2, variant++) { /* run_fused_case's float path run of block
                                                        * weights replaces the knobs with dot=0 */
            bool block = is_block(every_weight[wd]);
            if (!block)
                run_fused_case(d, every_weight[wd], F_NORM | F_GLU | F_IN_PLACE, 3, 11, 520, variant, &seed);
            else {
                /* The knobs on the dot path only (the float path's run is unset below). */
                int64_t fs[2] = {22, 512}, xs[2] = {3, 512}, gs[1] = {512}, ds[2] = {3, 11};
                nt_tensor fused = nt_tensor_quantized(d, every_weight[wd], 2, fs, 0, -1, 1, &seed);
                nu_tensor w, up;
                NT_OK(nu_tensor_slice(&fused.t, 0, 0, 11, &w));
                NT_OK(nu_tensor_slice(&fused.t, 0, 11, 11, &up));
                nt_tensor x = nt_tensor_random(d, NU_DTYPE_F16, 2, xs, 0, -1, 1, &seed);
                nt_tensor g = nt_tensor_random(d, NU_DTYPE_F32, 1, gs, 0, 0.5f, 1.5f, &seed);
                nt_tensor r = nt_tensor_random(d, NU_DTYPE_F32, 2, ds, 0, -2, 2, &seed);
                nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
                nu_matvec_desc desc = {&g.t, 0.1f, &up, &r.t};
                fused_ref ref = {fused.values, fused.values + 11 * 512, x.values, g.values, r.values};
                char what[128];
                snprintf(what, sizeof what, "%s norm glu residual, NUVEC_MATVEC=\"%s\"", nu_dtype_name(every_weight[wd]),
                         knobs[t]);
                check_fused(d, &dst, &w, &x.t, &desc, &ref, what);
                nt_tensor_free(&fused);
                nt_tensor_free(&x);
                nt_tensor_free(&g);
                nt_tensor_free(&r);
                nt_tensor_free(&dst);
            }
        }
    }
    unsetenv("NUVEC_MATVEC");
    nt_close(d);
}

/* A zero desc (and NULL) is nu_op_matvec: the same kernel, the same bits. */
static void fused_with_a_zero_desc_is_the_plain_product(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 13;
    for (int wd = 0; wd < 5; wd++) {
        int64_t ws[2] = {21, 256}, xs[2] = {2, 256}, ds[2] = {2, 21};
        nt_tensor w = is_block(every_weight[wd]) ? nt_tensor_quantized(d, every_weight[wd], 2, ws, 0, -1, 1, &seed)
                                                 : nt_tensor_random(d, every_weight[wd], 2, ws, 0, -1, 1, &seed);
        nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
        nt_tensor plain = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0), fused = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        check(d, &plain, &w.t, w.values, &x.t, x.values, "plain");
        fused_case fc = {&fused.t, &w.t, &x.t, {0}};
        nt_run(d, record_fused, &fc);
        nt_tensor_download(&fused);
        assert_memory_equal(plain.values, fused.values, sizeof(float) * 42);
        nu_commands *c;
        NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
        NT_OK(nu_op_matvec_fused(c, &fused.t, &w.t, &x.t, NULL));
        NT_OK(nu_commands_commit(c));
        NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
        nu_commands_free(c);
        nt_tensor_download(&fused);
        assert_memory_equal(plain.values, fused.values, sizeof(float) * 42);
        nt_tensor_free(&w);
        nt_tensor_free(&x);
        nt_tensor_free(&plain);
        nt_tensor_free(&fused);
    }
    nt_close(d);
}

/* What nu_op_matvec_fused refuses of the desc's fields, each with its message. */
static void fused_refuses_bad_fields(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 14;
    int64_t ws[2] = {4, 64}, w5s[2] = {5, 64}, xs[2] = {2, 64}, gs[1] = {64}, g65[1] = {65}, g2s[2] = {1, 64},
            ds[2] = {2, 4}, bad_ds[2] = {2, 5}, big[1] = {512};
    nt_tensor w = nt_tensor_random(d, NU_DTYPE_F16, 2, ws, 0, -1, 1, &seed);
    nt_tensor w32 = nt_tensor_random(d, NU_DTYPE_F32, 2, ws, 0, -1, 1, &seed);
    nt_tensor w5 = nt_tensor_random(d, NU_DTYPE_F16, 2, w5s, 0, -1, 1, &seed);
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
    nt_tensor g = nt_tensor_random(d, NU_DTYPE_F32, 1, gs, 0, -1, 1, &seed);
    nt_tensor g_long = nt_tensor_random(d, NU_DTYPE_F32, 1, g65, 0, -1, 1, &seed);
    nt_tensor g_2d = nt_tensor_random(d, NU_DTYPE_F32, 2, g2s, 0, -1, 1, &seed);
    nt_tensor gi = nt_tensor_random(d, NU_DTYPE_I32, 1, gs, 0, -1, 1, &seed);
    nt_tensor r = nt_tensor_random(d, NU_DTYPE_F32, 2, ds, 0, -1, 1, &seed);
    nt_tensor r_bad = nt_tensor_random(d, NU_DTYPE_F32, 2, bad_ds, 0, -1, 1, &seed);
    nt_tensor ri = nt_tensor_random(d, NU_DTYPE_I32, 2, ds, 0, -1, 1, &seed);
    nt_tensor shared = nt_tensor_output(d, NU_DTYPE_F32, 1, big, 0); /* dst and another input in one buffer */
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_matvec_desc desc;
#define REFUSED(expr, text)                                                                                            \
    do {                                                                                                               \
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, (expr));                                                                  \
        const char *msg_ = nu_error_message(NULL);                                                                     \
        if (!strstr(msg_, (text)))                                                                                     \
            fail_msg("refused with \"%s\", expected it to say \"%s\"", msg_, (text));                               \
    } while (0)
    /* norm_weight: its shape, rank and dtype; eps. */
    desc = (nu_matvec_desc){&g_long.t, 1e-5f, NULL, NULL};
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "norm_weight has rank 1 and 65 elements; it must be [64]");
    desc.norm_weight = &g_2d.t;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "norm_weight has rank 2");
    desc.norm_weight = &gi.t;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "I32");
    desc.norm_weight = &g.t;
    const float bad_eps[4] = {0.0f, -1e-5f, INFINITY, NAN};
    for (int i = 0; i < 4; i++) {
        desc.norm_eps = bad_eps[i];
        REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "norm_eps");
        assert_non_null(strstr(nu_error_message(NULL), "must be finite and > 0"));
    }
    /* glu_up: dtype and shape as weight's, rank 2. */
    desc = (nu_matvec_desc){NULL, 0, &w32.t, NULL};
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "glu_up is F32 but weight is F16 (they must match)");
    desc.glu_up = &w5.t;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "glu_up is 5x64 but weight is 4x64 (they must match)");
    desc.glu_up = &g.t;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "glu_up has rank 1; it must be 2");
    /* residual: shape, dtype, overlap of dst other than the same view. */
    desc = (nu_matvec_desc){NULL, 0, NULL, &r_bad.t};
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "residual is 2x5; it must be 2x4 (dst's shape)");
    desc.residual = &ri.t;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "I32");
    desc.residual = &x.t;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "residual is 2x64; it must be 2x4");
    nu_tensor d_in = nu_tensor_make(shared.t.buffer, 0, NU_DTYPE_F32, 2, ds);
    nu_tensor r_shift = nu_tensor_make(shared.t.buffer, 4, NU_DTYPE_F32, 2, ds); /* one element on */
    desc.residual = &r_shift;
    REFUSED(nu_op_matvec_fused(c, &d_in, &w.t, &x.t, &desc),
            "dst overlaps residual (only the same view may be written in place)");
    nu_tensor r_t; /* dst's elements as a transposed view: the same bytes, another view */
    int64_t sq[2] = {2, 2};
    nu_tensor d_sq = nu_tensor_make(shared.t.buffer, 0, NU_DTYPE_F32, 2, sq);
    NT_OK(nu_tensor_transpose(&d_sq, 0, 1, &r_t));
    int64_t w2s[2] = {2, 64};
    nu_tensor w2 = nu_tensor_make(w.t.buffer, 0, NU_DTYPE_F16, 2, w2s);
    desc.residual = &r_t;
    REFUSED(nu_op_matvec_fused(c, &d_sq, &w2, &x.t, &desc), "dst overlaps residual");
    desc.residual = &d_in; /* the same view: in place, accepted */
    NT_OK(nu_op_matvec_fused(c, &d_in, &w.t, &x.t, &desc));
    /* dst overlapping norm_weight and glu_up. */
    nu_tensor g_in = nu_tensor_make(shared.t.buffer, 16, NU_DTYPE_F32, 1, gs);
    desc = (nu_matvec_desc){&g_in, 1e-5f, NULL, NULL};
    REFUSED(nu_op_matvec_fused(c, &d_in, &w.t, &x.t, &desc), "dst overlaps norm_weight");
    nu_tensor w_in = nu_tensor_make(shared.t.buffer, 0, NU_DTYPE_F32, 2, ws);
    desc = (nu_matvec_desc){NULL, 0, &w_in, NULL};
    REFUSED(nu_op_matvec_fused(c, &d_in, &w32.t, &x.t, &desc), "dst overlaps glu_up");
    /* A field's own checks come with the op's name. */
    desc = (nu_matvec_desc){&g_long.t, 1e-5f, NULL, NULL};
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "nu_op_matvec_fused: ");
#undef REFUSED
    nu_commands_free(c);
    nt_tensor_free(&w);
    nt_tensor_free(&w32);
    nt_tensor_free(&w5);
    nt_tensor_free(&x);
    nt_tensor_free(&g);
    nt_tensor_free(&g_long);
    nt_tensor_free(&g_2d);
    nt_tensor_free(&gi);
    nt_tensor_free(&r);
    nt_tensor_free(&r_bad);
    nt_tensor_free(&ri);
    nt_tensor_free(&shared);
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
        cmocka_unit_test(fused_fields_alone_and_combined_for_every_dtype),
        cmocka_unit_test(fused_at_other_shapes_and_knobs),
        cmocka_unit_test(fused_with_a_zero_desc_is_the_plain_product),
        cmocka_unit_test(fused_refuses_bad_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
