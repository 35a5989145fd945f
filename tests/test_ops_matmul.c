/* test_ops_matmul.c: nu_op_matmul (src/ops/matmul.c, kernels/matmul/matmul.comp) against a
 * float64 CPU reference: every float dtype combination of a, b and dst, every block dtype's
 * weights with every a dtype, odd m, n and k (no multiple of any tile; k tails of the slices and
 * of the vector loads), bias (strided too), batched and broadcast operands, strided, sliced,
 * transposed and unaligned views, every tile variant and knob (desc->tune; NUVEC_MATMUL read once
 * per device), and what it refuses.
 *
 * Tolerance: the reference sums in double the products of the exact element values (block weights
 * dequantized by nu_dequantize: the values the kernel must see), so the kernel's only error
 * is F32 accumulation in its order (k FMAs, then + bias): at most about k * 2^-24 * (sum |a b| +
 * |bias|); we allow 2^-16 * (sum |a b| + |bias|) for k up to ~1000 (a margin of 4 or more), plus
 * the one rounding of dst's store (its dtype's tolerance, relative to the value). */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nuvec/trace.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

typedef struct mm_case {
    const nu_tensor *dst, *a, *b, *bias;
    const nu_matmul_tune *tune; /* NULL: nu_op_matmul; else nu_op_matmul_ex with it */
} mm_case;

static nu_status record_matmul(nu_commands *c, void *arg)
{
    mm_case *k = arg;
    if (!k->tune)
        return nu_op_matmul(c, k->dst, k->a, k->b, k->bias);
    nu_matmul_desc desc = {.bias = k->bias, .tune = *k->tune};
    return nu_op_matmul_ex(c, k->dst, k->a, k->b, &desc);
}

/* Batch, rows and columns of a rank-2 or rank-3 view. */
static void dims3(const nu_tensor *t, int64_t *batch, int64_t *rows, int64_t *cols)
{
    uint32_t o = t->rank == 3;
    *batch = o ? t->shape[0] : 1;
    *rows = t->shape[o];
    *cols = t->shape[o + 1];
}

/* Runs out = a * b^T (+ bias) with `tune` (NULL: nu_op_matmul) and checks it; out is a view of the
 * contiguous tensor dst (dst itself, or a column slice of it), av, bv, biasv the exact values
 * (row-major over each view's shape). */
static void check_view(nu_device *d, nt_tensor *dst, const nu_tensor *out, const nu_tensor *a, const float *av,
                       const nu_tensor *b, const float *bv, const nu_tensor *bias, const float *biasv,
                       const nu_matmul_tune *tune, const char *what)
{
    mm_case k = {out, a, b, bias, tune};
    nt_run(d, record_matmul, &k);
    nt_tensor_download(dst);
    int64_t ab, m, kk, bb, n, k2, db, dm, dn;
    dims3(a, &ab, &m, &kk);
    dims3(b, &bb, &n, &k2);
    dims3(out, &db, &dm, &dn);
    uint32_t o = out->rank == 3;
    int64_t first = (int64_t)((out->offset - dst->t.offset) / nu_dtype_size(out->dtype));
    int64_t s_batch = o ? out->strides[0] : 0, s_row = out->strides[o], s_col = out->strides[o + 1];
    float rel = nt_dtype_tolerance(dst->t.dtype);
    for (int64_t z = 0; z < db; z++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                const float *ar = av + ((ab > 1 ? z : 0) * m + i) * kk;
                const float *br = bv + ((bb > 1 ? z : 0) * n + j) * kk;
                double s = 0, sabs = 0;
                for (int64_t e = 0; e < kk; e++) {
                    double p = (double)ar[e] * (double)br[e];
                    s += p;
                    sabs += fabs(p);
                }
                if (biasv) {
                    s += biasv[j];
                    sabs += fabs((double)biasv[j]);
                }
                float want = nt_round_to(dst->t.dtype, (float)s);
                float got = dst->values[first + z * s_batch + i * s_row + j * s_col];
                double tol = sabs / 65536.0 + rel * fabs((double)want) + 1e-30;
                if (!(fabs((double)got - (double)want) <= tol))
                    fail_msg("%s: dst[%lld, %lld, %lld] is %.9g, expected %.9g (tolerance %.3g; m %lld n %lld k %lld)",
                             what, (long long)z, (long long)i, (long long)j, (double)got, (double)want, tol,
                             (long long)m, (long long)n, (long long)kk);
            }
}

static void check_tuned(nu_device *d, nt_tensor *dst, const nu_tensor *a, const float *av, const nu_tensor *b,
                        const float *bv, const nu_tensor *bias, const float *biasv, const nu_matmul_tune *tune,
                        const char *what)
{
    check_view(d, dst, &dst->t, a, av, b, bv, bias, biasv, tune, what);
}

static void check(nu_device *d, nt_tensor *dst, const nu_tensor *a, const float *av, const nu_tensor *b, const float *bv,
                  const nu_tensor *bias, const float *biasv, const char *what)
{
    check_tuned(d, dst, a, av, b, bv, bias, biasv, NULL, what);
}

/* All 27 (a, b, dst) float combinations, each at another odd shape; a third with a bias of
 * another dtype, some operands unaligned (the strided loads) and others aligned (the vector
 * loads, with k tails). */
static void every_float_dtype_combination(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 1;
    const int64_t ms[] = {1, 5, 17, 37, 70}, ns[] = {3, 45, 65, 130}, ks[] = {1, 7, 33, 67, 136, 250};
    int i = 0;
    for (int ad = 0; ad < 3; ad++)
        for (int bd = 0; bd < 3; bd++)
            for (int dd = 0; dd < 3; dd++, i++) {
                int64_t m = ms[i % 5], n = ns[i % 4], k = ks[i % 6];
                uint64_t apad = (uint64_t)(i % 4 == 1), bpad = (uint64_t)(i % 5 == 2);
                int64_t as[2] = {m, k}, bs[2] = {n, k}, ds[2] = {m, n}, bis[1] = {n};
                nt_tensor a = nt_tensor_random(d, floats[ad], 2, as, apad, -1, 1, &seed);
                nt_tensor b = nt_tensor_random(d, floats[bd], 2, bs, bpad, -1, 1, &seed);
                nt_tensor dst = nt_tensor_output(d, floats[dd], 2, ds, (uint64_t)(i % 2));
                bool with_bias = i % 3 == 0;
                nt_tensor bias = nt_tensor_random(d, floats[(ad + 1) % 3], 1, bis, 1, -1, 1, &seed);
                char what[160];
                snprintf(what, sizeof what, "%s dst = %s a * %s b^T%s, pads %llu %llu", nu_dtype_name(floats[dd]),
                         nu_dtype_name(floats[ad]), nu_dtype_name(floats[bd]), with_bias ? " + bias" : "",
                         (unsigned long long)apad, (unsigned long long)bpad);
                check(d, &dst, &a.t, a.values, &b.t, b.values, with_bias ? &bias.t : NULL,
                      with_bias ? bias.values : NULL, what);
                nt_tensor_free(&a);
                nt_tensor_free(&b);
                nt_tensor_free(&dst);
                nt_tensor_free(&bias);
            }
    nt_close(d);
}

/* Every block dtype's weights with each a dtype, at small m (the small_m tile) and larger m, k of
 * 1 to 8 blocks (tails of the 16- and 32-wide slices), blocks not starting at a 4-byte boundary;
 * the K formats also on the strided element loads (scalar_loads). */
static void block_weights_with_every_a_dtype(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 2;
    const int64_t kbs[] = {1, 3, 5, 8}, ms[] = {3, 29}, ns[] = {37, 70};
    const nu_matmul_tune scalar = {.scalar_loads = true};
    int i = 0;
    for (int bd = 0; bd < NT_BLOCK_DTYPES; bd++)
        for (int ad = 0; ad < 3; ad++)
            for (int s = 0; s < 2; s++, i++) {
                nu_dtype bt = nt_block_dtypes[bd];
                int64_t m = ms[s], n = ns[(i / 2) % 2], k = kbs[i % 4] * nu_dtype_block_elements(bt);
                int64_t as[2] = {m, k}, bs[2] = {n, k}, ds[2] = {m, n}, bis[1] = {n};
                nt_tensor a = nt_tensor_random(d, floats[ad], 2, as, (uint64_t)(i % 3 == 0), -1, 1, &seed);
                nt_tensor b = nt_tensor_quantized(d, bt, 2, bs, (uint64_t)(i % 3), -2, 2, &seed);
                nt_tensor dst = nt_tensor_output(d, floats[(ad + s) % 3], 2, ds, 0);
                nt_tensor bias = nt_tensor_random(d, NU_DTYPE_F32, 1, bis, 0, -1, 1, &seed);
                bool strided = nu_dtype_block_elements(bt) == 256 && ad == 1 && s == 0;
                char what[160];
                snprintf(what, sizeof what, "%s dst = %s a * %s b^T, pad blocks %d%s", nu_dtype_name(dst.t.dtype),
                         nu_dtype_name(floats[ad]), nu_dtype_name(bt), i % 3, strided ? ", scalar loads" : "");
                check_tuned(d, &dst, &a.t, a.values, &b.t, b.values, s ? &bias.t : NULL, s ? bias.values : NULL,
                            strided ? &scalar : NULL, what);
                nt_tensor_free(&a);
                nt_tensor_free(&b);
                nt_tensor_free(&dst);
                nt_tensor_free(&bias);
            }
    nt_close(d);
}

/* Batched: a and b both batched; a batched with one weight (rank 2, and rank 3 of batch 1); one
 * a with batched weights; block weights batched. */
static void batched_and_broadcast(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 3;
    const int64_t B = 3, m = 19, n = 21, k = 40;
    struct { int64_t ab; uint32_t ar; int64_t bb; uint32_t br; nu_dtype bd; } cases[] = {
        {B, 3, B, 3, NU_DTYPE_F16}, {B, 3, 1, 2, NU_DTYPE_BF16}, {B, 3, 1, 3, NU_DTYPE_F32},
        {1, 2, B, 3, NU_DTYPE_F16}, {1, 3, B, 3, NU_DTYPE_F32}, {B, 3, B, 3, NU_DTYPE_Q8_0},
        {B, 3, 1, 2, NU_DTYPE_Q4_0}, {B, 3, B, 3, NU_DTYPE_Q5_K}, {1, 2, B, 3, NU_DTYPE_IQ4_NL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        bool block = nt_is_block(cases[c].bd);
        int64_t kk = block ? 2 * nu_dtype_block_elements(cases[c].bd) : k;
        int64_t as3[3] = {cases[c].ab, m, kk}, bs3[3] = {cases[c].bb, n, kk}, ds[3] = {B, m, n};
        const int64_t *as = cases[c].ar == 3 ? as3 : as3 + 1, *bs = cases[c].br == 3 ? bs3 : bs3 + 1;
        nt_tensor a = nt_tensor_random(d, c % 2 ? NU_DTYPE_F16 : NU_DTYPE_F32, cases[c].ar, as, 0, -1, 1, &seed);
        nt_tensor b = block ? nt_tensor_quantized(d, cases[c].bd, cases[c].br, bs, 0, -1, 1, &seed)
                            : nt_tensor_random(d, cases[c].bd, cases[c].br, bs, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, ds, 0);
        char what[160];
        snprintf(what, sizeof what, "batch: a [%lld, ...] rank %u, %s b [%lld, ...] rank %u", (long long)cases[c].ab,
                 cases[c].ar, nu_dtype_name(cases[c].bd), (long long)cases[c].bb, cases[c].br);
        check(d, &dst, &a.t, a.values, &b.t, b.values, NULL, NULL, what);
        nt_tensor_free(&a);
        nt_tensor_free(&b);
        nt_tensor_free(&dst);
    }
    /* A rank-2 product into a rank-2 dst with rank-3 operands of batch 1. */
    int64_t as[3] = {1, 6, 24}, bs[3] = {1, 10, 24}, ds[2] = {6, 10};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 3, as, 0, -1, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F32, 3, bs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    check(d, &dst, &a.t, a.values, &b.t, b.values, NULL, NULL, "rank-3 operands of batch 1, rank-2 dst");
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&dst);
    nt_close(d);
}

/* Transposed a and b (stored [k, m] and [k, n]: the "transposes as stored" of weight files are
 * views), column slices of fused tensors (row stride > k, aligned: the vector loads with a row
 * stride; unaligned: the strided loads), a broadcast batch by stride 0, a strided bias, and block
 * weights sliced from a fused weight. */
static void strided_transposed_and_sliced_views(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 4;
    char what[160];
    const int64_t m = 23, n = 41, k = 57;
    for (int fd = 0; fd < 3; fd++) {
        /* a^T stored [k, m], b^T stored [k, n]. */
        int64_t ats[2] = {k, m}, bts[2] = {k, n}, ds[2] = {m, n};
        nt_tensor at = nt_tensor_random(d, floats[fd], 2, ats, 1, -1, 1, &seed);
        nt_tensor bt = nt_tensor_random(d, floats[(fd + 1) % 3], 2, bts, 0, -1, 1, &seed);
        nu_tensor a, b;
        NT_OK(nu_tensor_transpose(&at.t, 0, 1, &a));
        NT_OK(nu_tensor_transpose(&bt.t, 0, 1, &b));
        float *av = nt_tensor_values_new(&at, &a), *bv = nt_tensor_values_new(&bt, &b);
        /* bias: every other element of a [2n] tensor. */
        int64_t bis[1] = {2 * n};
        nt_tensor biasb = nt_tensor_random(d, floats[(fd + 2) % 3], 1, bis, 0, -1, 1, &seed);
        nu_tensor bias = biasb.t;
        bias.shape[0] = n;
        bias.strides[0] = 2;
        float *biasv = nt_tensor_values_new(&biasb, &bias);
        nt_tensor dst = nt_tensor_output(d, floats[fd], 2, ds, 0);
        snprintf(what, sizeof what, "transposed %s a, transposed %s b, strided bias", nu_dtype_name(floats[fd]),
                 nu_dtype_name(floats[(fd + 1) % 3]));
        check(d, &dst, &a, av, &b, bv, &bias, biasv, what);
        /* Column slices: a = fused [m, 200][:, 16:16+k] (16-byte aligned rows for every dtype:
         * the vector loads), b = fused [n, 150][:, 3:3+k] (unaligned: strided). */
        int64_t fas[2] = {m, 200}, fbs[2] = {n, 150};
        nt_tensor fa = nt_tensor_random(d, floats[fd], 2, fas, 0, -1, 1, &seed);
        nt_tensor fb = nt_tensor_random(d, floats[fd], 2, fbs, 0, -1, 1, &seed);
        nu_tensor sa, sb;
        NT_OK(nu_tensor_slice(&fa.t, 1, 16, k, &sa));
        NT_OK(nu_tensor_slice(&fb.t, 1, 3, k, &sb));
        float *sav = nt_tensor_values_new(&fa, &sa), *sbv = nt_tensor_values_new(&fb, &sb);
        snprintf(what, sizeof what, "%s column slices of fused a and b", nu_dtype_name(floats[fd]));
        check(d, &dst, &sa, sav, &sb, sbv, NULL, NULL, what);
        /* b sliced aligned too (columns 8.. of a [n, 152] F16/BF16 or 16.. of F32: 16-byte rows). */
        NT_OK(nu_tensor_slice(&fa.t, 1, 32, k, &sb));
        sb.shape[0] = m; /* b = a's other columns: [m, k] of a [m, 200] */
        float *sbv2 = nt_tensor_values_new(&fa, &sb);
        int64_t ds2[2] = {m, m};
        nt_tensor dst2 = nt_tensor_output(d, NU_DTYPE_F32, 2, ds2, 0);
        snprintf(what, sizeof what, "%s aligned column slices of one fused tensor", nu_dtype_name(floats[fd]));
        check(d, &dst2, &sa, sav, &sb, sbv2, NULL, NULL, what);
        free(av);
        free(bv);
        free(biasv);
        free(sav);
        free(sbv);
        free(sbv2);
        nt_tensor_free(&at);
        nt_tensor_free(&bt);
        nt_tensor_free(&biasb);
        nt_tensor_free(&fa);
        nt_tensor_free(&fb);
        nt_tensor_free(&dst);
        nt_tensor_free(&dst2);
    }
    /* A batch broadcast by stride 0 in a rank-3 view: a [1, m, k] seen as [3, m, k]. */
    {
        int64_t as[2] = {m, k}, bs[3] = {3, n, k}, ds[3] = {3, m, n};
        nt_tensor a1 = nt_tensor_random(d, NU_DTYPE_F16, 2, as, 0, -1, 1, &seed);
        nt_tensor b = nt_tensor_random(d, NU_DTYPE_F16, 3, bs, 0, -1, 1, &seed);
        nu_tensor a3;
        int64_t shape3[3] = {3, m, k};
        NT_OK(nu_tensor_broadcast(&a1.t, 3, shape3, &a3));
        float *av = nt_tensor_values_new(&a1, &a3);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_BF16, 3, ds, 0);
        check(d, &dst, &a3, av, &b.t, b.values, NULL, NULL, "a broadcast over the batch by stride 0");
        free(av);
        nt_tensor_free(&a1);
        nt_tensor_free(&b);
        nt_tensor_free(&dst);
    }
    /* Block weights: rows [2, 2 + 9) and columns [2 B, 6 B) of a fused [12, 8 B] weight (B a block's
     * elements), every block dtype. */
    for (int bd = 0; bd < NT_BLOCK_DTYPES; bd++) {
        nu_dtype bt = nt_block_dtypes[bd];
        int64_t per = nu_dtype_block_elements(bt), fs[2] = {12, 8 * per}, nb = 9, kb = 4 * per, mb = 18;
        nt_tensor fused = nt_tensor_quantized(d, bt, 2, fs, 1, -1, 1, &seed);
        nu_tensor w;
        NT_OK(nu_tensor_slice(&fused.t, 0, 2, nb, &w));
        NT_OK(nu_tensor_slice(&w, 1, 2 * per, kb, &w));
        float *wv = malloc((size_t)(nb * kb) * sizeof *wv);
        for (int64_t r = 0; r < nb; r++)
            for (int64_t e = 0; e < kb; e++)
                wv[r * kb + e] = fused.values[(2 + r) * fs[1] + 2 * per + e];
        int64_t as[2] = {mb, kb}, ds[2] = {mb, nb};
        nt_tensor a = nt_tensor_random(d, NU_DTYPE_BF16, 2, as, 3, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F16, 2, ds, 0);
        snprintf(what, sizeof what, "%s weight slice [2:11, %lld:%lld] of [12, %lld]", nu_dtype_name(bt),
                 (long long)(2 * per), (long long)(6 * per), (long long)fs[1]);
        check(d, &dst, &a.t, a.values, &w, wv, NULL, NULL, what);
        free(wv);
        nt_tensor_free(&fused);
        nt_tensor_free(&a);
        nt_tensor_free(&dst);
    }
    nt_close(d);
}

/* Each tile variant (tune.variant) at a shape that is a multiple of none of them, with and without
 * the vector loads (block weights: a group of 8 of a block a thread; scalar_loads: an element a
 * load), other tiles and thread blocks (a BK not a multiple of 8: no vector loads), and the default
 * choice at shapes that take the large variant (m, n >= 512) and small_m. */
static void every_variant_and_knob(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 5;
    const nu_matmul_tune tunes[9] = {{.variant = NU_MATMUL_SMALL_M}, {.variant = NU_MATMUL_SKINNY_N},
                                     {.variant = NU_MATMUL_SQUARE}, {.variant = NU_MATMUL_LARGE},
                                     {.variant = NU_MATMUL_SQUARE, .scalar_loads = true},
                                     {.bm = 32, .bn = 16, .bk = 8, .tm = 2, .tn = 1},
                                     {.bm = 8, .bn = 8, .bk = 5, .tm = 1, .tn = 1},
                                     {.variant = NU_MATMUL_LARGE, .bk = 24}, {.scalar_loads = true}};
    const char *names[9] = {"small_m", "skinny_n", "square", "large", "square, scalar loads", "32x16x8, 2x1",
                            "8x8x5, 1x1", "large, bk 24", "scalar loads"};
    for (int t = 0; t < 9; t++) {
        nu_dtype ad = floats[t % 3], bd = t % 4 == 3 ? NU_DTYPE_Q4_0 : t == 8 ? NU_DTYPE_Q8_0 : t == 6 ? NU_DTYPE_Q6_K
                                                                                                   : floats[(t + 1) % 3];
        bool block = nt_is_block(bd);
        int64_t m = 70 + t, n = 133, k = block ? nu_dtype_block_elements(bd) == 256 ? 512 : 224 : 211;
        int64_t as[2] = {m, k}, bs[2] = {n, k}, ds[2] = {m, n}, bis[1] = {n};
        nt_tensor a = nt_tensor_random(d, ad, 2, as, 0, -1, 1, &seed);
        nt_tensor b = block ? nt_tensor_quantized(d, bd, 2, bs, 0, -1, 1, &seed) : nt_tensor_random(d, bd, 2, bs, 0, -1, 1, &seed);
        nt_tensor bias = nt_tensor_random(d, NU_DTYPE_F16, 1, bis, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        char what[160];
        snprintf(what, sizeof what, "%s a, %s b, tune %s", nu_dtype_name(ad), nu_dtype_name(bd), names[t]);
        check_tuned(d, &dst, &a.t, a.values, &b.t, b.values, &bias.t, bias.values, &tunes[t], what);
        nt_tensor_free(&a);
        nt_tensor_free(&b);
        nt_tensor_free(&bias);
        nt_tensor_free(&dst);
    }
    /* The default choice: large tiles at 520 x 600 (k 40), small_m at m 1 with a wide n. */
    int64_t shapes[2][3] = {{520, 600, 40}, {1, 3000, 96}};
    for (int s = 0; s < 2; s++) {
        int64_t as[2] = {shapes[s][0], shapes[s][2]}, bs[2] = {shapes[s][1], shapes[s][2]}, ds[2] = {shapes[s][0], shapes[s][1]};
        nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 2, as, 0, -1, 1, &seed);
        nt_tensor b = s ? nt_tensor_quantized(d, NU_DTYPE_Q8_0, 2, bs, 0, -1, 1, &seed)
                        : nt_tensor_random(d, NU_DTYPE_BF16, 2, bs, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F16, 2, ds, 0);
        char what[96];
        snprintf(what, sizeof what, "default tile at %lldx%lldx%lld", (long long)shapes[s][0], (long long)shapes[s][1],
                 (long long)shapes[s][2]);
        check(d, &dst, &a.t, a.values, &b.t, b.values, NULL, NULL, what);
        nt_tensor_free(&a);
        nt_tensor_free(&b);
        nt_tensor_free(&dst);
    }
    nt_close(d);
}

static void refuses_bad_tensors(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 6;
    int64_t as[2] = {4, 64}, bs[2] = {5, 64}, ds[2] = {4, 5}, bad_ds[2] = {4, 6}, k63[2] = {5, 63};
    int64_t a3s[3] = {2, 4, 64}, b3s[3] = {3, 5, 64}, d3s[3] = {2, 4, 5}, r4[4] = {1, 1, 4, 64}, bi6[1] = {6};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 2, as, 0, -1, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F16, 2, bs, 0, -1, 1, &seed);
    nt_tensor bk = nt_tensor_random(d, NU_DTYPE_F16, 2, k63, 0, -1, 1, &seed);
    nt_tensor a3 = nt_tensor_random(d, NU_DTYPE_F32, 3, a3s, 0, -1, 1, &seed);
    nt_tensor b3 = nt_tensor_random(d, NU_DTYPE_F32, 3, b3s, 0, -1, 1, &seed);
    nt_tensor ai = nt_tensor_random(d, NU_DTYPE_I32, 2, as, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    nt_tensor d3 = nt_tensor_output(d, NU_DTYPE_F32, 3, d3s, 0);
    nt_tensor bad = nt_tensor_output(d, NU_DTYPE_F32, 2, bad_ds, 0);
    nt_tensor bias6 = nt_tensor_random(d, NU_DTYPE_F32, 1, bi6, 0, -1, 1, &seed);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, &a.t, &bk.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "k differs"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &bad.t, &a.t, &b.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "must be 4x5"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, &ai.t, &b.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "I32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, &a.t, &b.t, &bias6.t)); /* bias [6], n 5 */
    assert_non_null(strstr(nu_error_message(NULL), "bias"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &d3.t, &a3.t, &b3.t, NULL)); /* batches 2 and 3 */
    assert_non_null(strstr(nu_error_message(NULL), "batches"));
    nu_tensor a4 = nu_tensor_make(a.t.buffer, 0, NU_DTYPE_F16, 4, r4);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, &a4, &b.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "rank"));
    /* A block weight's k not a multiple of 32: a view of 48 columns. */
    int64_t q48[2] = {5, 48};
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q8_0, 2, bs, 0, -1, 1, &seed);
    nu_tensor q48v = nu_tensor_make(q.t.buffer, 0, NU_DTYPE_Q8_0, 2, q48);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, &a.t, &q48v, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "32"));
    /* A block a is refused (a is float). */
    int64_t qa[2] = {4, 64};
    nu_tensor qav = nu_tensor_make(q.t.buffer, 0, NU_DTYPE_Q8_0, 2, qa);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, &qav, &b.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "Q8_0"));
    /* dst overlapping a, b; a dst whose rows overlap (row stride below n) or whose columns are
     * strided. */
    nu_tensor over_a = nu_tensor_make(a.t.buffer, 0, NU_DTYPE_F32, 2, ds);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &over_a, &a.t, &b.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps a"));
    nu_tensor over_b = nu_tensor_make(b.t.buffer, 8, NU_DTYPE_F32, 2, ds);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &over_b, &a.t, &b.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps b"));
    nu_tensor dts = nu_tensor_make(bad.t.buffer, 0, NU_DTYPE_F32, 2, ds);
    dts.strides[0] = 3;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dts, &a.t, &b.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "row stride >= n"));
    nu_tensor dcs = nu_tensor_make(d3.t.buffer, 0, NU_DTYPE_F32, 2, ds); /* 40 floats: 4 rows of 10 */
    dcs.strides[0] = 10, dcs.strides[1] = 2;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dcs, &a.t, &b.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "columns must be contiguous"));
    /* Bad knobs: a variant outside the enum, a tile whose threads do not divide it, too much shared
     * memory, a field outside its range. */
    const nu_matmul_tune bad_tunes[5] = {{.variant = NU_MATMUL_VARIANT_COUNT}, {.bm = 30, .tm = 4},
                                         {.bm = 256, .bn = 256, .bk = 256, .tm = 16, .tn = 16}, {.tm = 17},
                                         {.tc_bk = 48}};
    const char *bad_text[5] = {"tune.variant", "30x", "shared memory", "tune.tm is 17", "tune.tc_bk is 48"};
    for (int t = 0; t < 5; t++) {
        nu_matmul_desc desc = {.tune = bad_tunes[t]};
        nu_status st = nu_op_matmul_ex(c, &dst.t, &a.t, &b.t, &desc);
        if ((st != NU_ERROR_INVALID_ARGUMENT && st != NU_ERROR_UNSUPPORTED) ||
            !strstr(nu_error_message(NULL), "nu_op_matmul") || !strstr(nu_error_message(NULL), bad_text[t]))
            fail_msg("bad tune %d: status %s, '%s'", t, nu_status_string(st), nu_error_message(NULL));
    }
    /* K formats' rows are whole super-blocks: a Q6_K view of 128 columns. */
    nt_tensor q6 = nt_tensor_quantized(d, NU_DTYPE_Q6_K, 2, (int64_t[2]){5, 256}, 0, -1, 1, &seed);
    nu_tensor q6v = nu_tensor_make(q6.t.buffer, 0, NU_DTYPE_Q6_K, 2, (int64_t[2]){5, 128});
    nt_tensor a128 = nt_tensor_random(d, NU_DTYPE_F32, 2, (int64_t[2]){4, 128}, 0, -1, 1, &seed);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, &a128.t, &q6v, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "multiple of 256"));
    nt_tensor_free(&q6);
    nt_tensor_free(&a128);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(NULL, &dst.t, &a.t, &b.t, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, NULL, &b.t, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, NULL, &a.t, &b.t, NULL));
    /* Empty: m = 0 records nothing; k = 0 with a dst to fill is refused. */
    int64_t a0[2] = {0, 64}, d0[2] = {0, 5}, ak0[2] = {4, 0}, bk0[2] = {5, 0};
    nu_tensor ae = nu_tensor_make(a.t.buffer, 0, NU_DTYPE_F16, 2, a0), de = nu_tensor_make(dst.t.buffer, 0, NU_DTYPE_F32, 2, d0);
    NT_OK(nu_op_matmul(c, &de, &ae, &b.t, NULL));
    nu_tensor az = nu_tensor_make(a.t.buffer, 0, NU_DTYPE_F16, 2, ak0), bz = nu_tensor_make(b.t.buffer, 0, NU_DTYPE_F16, 2, bk0);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, &az, &bz, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "k is 0"));
    nu_commands_free(c);
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&bk);
    nt_tensor_free(&a3);
    nt_tensor_free(&b3);
    nt_tensor_free(&ai);
    nt_tensor_free(&dst);
    nt_tensor_free(&d3);
    nt_tensor_free(&bad);
    nt_tensor_free(&bias6);
    nt_tensor_free(&q);
    nt_close(d);
}

/* The cooperative-matrix path (src/ops/matmul_tc.c, kernels/matmul/matmul_coopmat.comp) where the
 * device has matrix units: F16 a against F16, Q8_0, Q4_0, Q4_K and Q6_K weights (the K formats
 * with k rounded up to their 256-element super-blocks, Q6_K's 210-byte blocks at an odd half in
 * every other case), odd shapes (edges of the 128 x 128 and 64 x 128 tiles), k tails of the
 * 64-element steps, batches with a broadcast weight,
 * bias, every dst dtype. It runs without the validation layer: Debian 12's (1.3.239) predates
 * VK_KHR_cooperative_matrix, and nuvec leaves the extension off under it. That path rounds each
 * dequantized weight to F16 (its F32 value, then to nearest even), so the reference uses the weights
 * rounded so; its results must then differ from the tiled path's (tune.no_tensor_cores), which
 * multiplies the exact values: the matrix units really ran. Skipped, saying so, where the device
 * has no VK_KHR_cooperative_matrix (lavapipe). It sets NUVEC_MATMUL_TC itself, so that a run of
 * the suite with NUVEC_MATMUL_TC=off (the tiled path everywhere) still checks this path. */
static void tensor_cores_match_the_reference(void **state)
{
    (void)state;
    nu_device *d = nt_open_matrix_units("tensor_cores_match_the_reference");
    uint64_t seed = 11;
    /* Whatever the caller's environment says: the device reads it at its first product. */
    assert_int_equal(setenv("NUVEC_MATMUL_TC", "on", 1), 0);
    const nu_dtype wds[5] = {NU_DTYPE_F16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0, NU_DTYPE_Q4_K, NU_DTYPE_Q6_K};
    /* Edges only; edges, whole tiles and a bias; whole tiles of 64-row tiles; one row; whole
     * 128 x 128 tiles straight to dst beside edge tiles, batched (the kernel's two ways out). */
    const int64_t shapes[6][4] = {{37, 45, 160, 1},  {130, 200, 448, 1}, {64, 129, 96, 3},
                                  {1, 77, 64, 1},    {256, 264, 128, 2}, {300, 256, 64, 1}};
    for (int w = 0; w < 5; w++)
        for (int c = 0; c < 6; c++) {
            bool kfmt = wds[w] == NU_DTYPE_Q4_K || wds[w] == NU_DTYPE_Q6_K;
            int64_t m = shapes[c][0], n = shapes[c][1], k = shapes[c][2], batch = shapes[c][3];
            if (kfmt)
                k = (k + 255) / 256 * 256;
            int64_t as[3] = {batch, m, k}, bs[2] = {n, k}, ds[3] = {batch, m, n}, bis[1] = {n};
            nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 3, as, 0, -1, 1, &seed);
            nt_tensor b = wds[w] == NU_DTYPE_F16 ? nt_tensor_random(d, wds[w], 2, bs, 0, -1, 1, &seed)
                                                 : nt_tensor_quantized(d, wds[w], 2, bs, kfmt ? (uint64_t)(c % 2) : 0,
                                                                       -1, 1, &seed);
            nt_tensor dst = nt_tensor_output(d, floats[(w + c) % 3], 3, ds, 0);
            nt_tensor bias = nt_tensor_random(d, NU_DTYPE_F32, 1, bis, 0, -1, 1, &seed);
            float *bv = malloc((size_t)(n * k) * sizeof *bv);
            for (int64_t i = 0; i < n * k; i++)
                bv[i] = nt_round_to(NU_DTYPE_F16, b.values[i]);
            bool with_bias = c == 1 || c == 3;
            char what[160];
            snprintf(what, sizeof what, "tensor cores: %s dst = F16 a [%lld, %lld, %lld] * %s b^T%s",
                     nu_dtype_name(dst.t.dtype), (long long)batch, (long long)m, (long long)k, nu_dtype_name(wds[w]),
                     with_bias ? " + bias" : "");
            check(d, &dst, &a.t, a.values, &b.t, bv, with_bias ? &bias.t : NULL, with_bias ? bias.values : NULL, what);
            if (wds[w] != NU_DTYPE_F16) {
                float *tc = malloc((size_t)(batch * m * n) * sizeof *tc);
                memcpy(tc, dst.values, (size_t)(batch * m * n) * sizeof *tc);
                const nu_matmul_tune tiled = {.no_tensor_cores = true};
                check_tuned(d, &dst, &a.t, a.values, &b.t, b.values, with_bias ? &bias.t : NULL,
                            with_bias ? bias.values : NULL, &tiled, "the tiled path beside it");
                int64_t differ = 0;
                for (int64_t i = 0; i < batch * m * n; i++)
                    differ += tc[i] != dst.values[i];
                if (dst.t.dtype == NU_DTYPE_F32 && differ < batch * m * n / 2)
                    fail_msg("%s: only %lld of %lld results differ from the tiled path's: did the matrix units run?",
                             what, (long long)differ, (long long)(batch * m * n));
                free(tc);
            }
            free(bv);
            nt_tensor_free(&a);
            nt_tensor_free(&b);
            nt_tensor_free(&dst);
            nt_tensor_free(&bias);
        }
    /* BF16 a against BF16 w (matmul_coopmat_bf16) where the device has BF16 matrix units: the same
     * shapes, exact BF16 operands. */
    bool bf16 = nu_device_get_info(d)->features[NU_FEATURE_BFLOAT16];
    for (int c = 0; bf16 && c < 6; c++) {
        int64_t m = shapes[c][0], n = shapes[c][1], k = shapes[c][2], batch = shapes[c][3];
        int64_t as[3] = {batch, m, k}, bs[2] = {n, k}, ds[3] = {batch, m, n}, bis[1] = {n};
        nt_tensor a = nt_tensor_random(d, NU_DTYPE_BF16, 3, as, 0, -1, 1, &seed);
        nt_tensor b = nt_tensor_random(d, NU_DTYPE_BF16, 2, bs, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, floats[c % 3], 3, ds, 0);
        nt_tensor bias = nt_tensor_random(d, NU_DTYPE_F32, 1, bis, 0, -1, 1, &seed);
        bool with_bias = c == 1 || c == 3;
        char what[160];
        snprintf(what, sizeof what, "tensor cores: %s dst = BF16 a [%lld, %lld, %lld] * BF16 b^T%s",
                 nu_dtype_name(dst.t.dtype), (long long)batch, (long long)m, (long long)k, with_bias ? " + bias" : "");
        check(d, &dst, &a.t, a.values, &b.t, b.values, with_bias ? &bias.t : NULL, with_bias ? bias.values : NULL, what);
        nt_tensor_free(&a);
        nt_tensor_free(&b);
        nt_tensor_free(&dst);
        nt_tensor_free(&bias);
    }
    unsetenv("NUVEC_MATMUL_TC");
    NT_OK(nu_device_close(d));
    if (!bf16) {
        printf("tensor_cores_match_the_reference: BF16 products skipped: the device has no BF16 matrix units "
               "(VK_KHR_shader_bfloat16 with BF16 cooperative matrices)\n");
        return;
    }
    /* ...and they ran on the matrix units: with the products skipped there (NUVEC_MATMUL_TC=probe=2,
     * read once a device, so a device of its own) dst is all zeros, which the tiled path would not give. */
    assert_int_equal(setenv("NUVEC_MATMUL_TC", "probe=2", 1), 0);
    d = nt_open_matrix_units("tensor_cores_match_the_reference");
    int64_t as[2] = {256, 128}, bs[2] = {256, 128}, ds[2] = {256, 256};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_BF16, 2, as, 0, -1, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_BF16, 2, bs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    mm_case run = {&dst.t, &a.t, &b.t, NULL, NULL};
    nt_run(d, record_matmul, &run);
    nt_tensor_download(&dst);
    for (int64_t i = 0; i < 256 * 256; i++)
        if (dst.values[i] != 0.0f)
            fail_msg("BF16 product with the matrix units' products skipped: dst[%lld] = %g: the tiled path ran",
                     (long long)i, (double)dst.values[i]);
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&dst);
    unsetenv("NUVEC_MATMUL_TC");
    NT_OK(nu_device_close(d));
}

/* dst a column slice of a wider matrix (row stride above n): two products write the halves of one
 * output [batch, m, 2n + 8], and neither touches the other's columns nor the last 8 (NaN from
 * nt_tensor_output); on the tiled kernel and, where the device has matrix units, on them too
 * (whole tiles straight to dst, edge tiles, a bias, and split k: the partials' sum writes the
 * slice). A prefill pass's weight copies go by halves of a matrix this way (llm/blocks.c). */
static void writes_column_slices_of_a_wider_dst(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    bool units = nu_device_get_info(d)->features[NU_FEATURE_COOPERATIVE_MATRIX];
    assert_int_equal(setenv("NUVEC_MATMUL_TC", "on", 1), 0);
    uint64_t seed = 31;
    const struct {
        int64_t batch, m, n, k;
        nu_dtype w, dst;
        uint32_t splits;
        bool bias;
    } cases[4] = {{1, 256, 128, 256, NU_DTYPE_F16, NU_DTYPE_F32, 0, false},
                  {2, 37, 45, 256, NU_DTYPE_Q4_K, NU_DTYPE_F16, 0, true},
                  {1, 16, 200, 1024, NU_DTYPE_Q6_K, NU_DTYPE_F32, 3, false},
                  {3, 5, 64, 96, NU_DTYPE_Q8_0, NU_DTYPE_BF16, 0, true}};
    for (int path = 0; path < (units ? 2 : 1); path++)
        for (int c = 0; c < 4; c++) {
            int64_t batch = cases[c].batch, m = cases[c].m, n = cases[c].n, k = cases[c].k, wide = 2 * n + 8;
            int64_t as[3] = {batch, m, k}, bs[2] = {n, k}, ws[3] = {batch, m, wide}, bis[1] = {n};
            nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 3, as, 0, -1, 1, &seed);
            nt_tensor out = nt_tensor_output(d, cases[c].dst, 3, ws, 0);
            nt_tensor bias = nt_tensor_random(d, NU_DTYPE_F32, 1, bis, 0, -1, 1, &seed);
            nt_tensor b[2];
            float *bv[2];
            nu_tensor half[2];
            for (int h = 0; h < 2; h++) {
                b[h] = cases[c].w == NU_DTYPE_F16 ? nt_tensor_random(d, NU_DTYPE_F16, 2, bs, 0, -1, 1, &seed)
                                                  : nt_tensor_quantized(d, cases[c].w, 2, bs, 0, -1, 1, &seed);
                bv[h] = malloc((size_t)(n * k) * sizeof *bv[h]);
                for (int64_t i = 0; i < n * k; i++) /* the matrix units round block weights to F16 */
                    bv[h][i] = path ? nt_round_to(NU_DTYPE_F16, b[h].values[i]) : b[h].values[i];
                half[h] = out.t;
                half[h].shape[2] = n;
                half[h].offset += (uint64_t)(h * n) * nu_dtype_size(cases[c].dst);
            }
            nu_matmul_tune tune = {.no_tensor_cores = path == 0, .tc_splits = path ? cases[c].splits : 0};
            char what[192];
            float *first = malloc((size_t)(batch * m * wide) * sizeof *first);
            for (int h = 0; h < 2; h++) {
                snprintf(what, sizeof what, "%s: %s half %d of [%lld, %lld, %lld] = F16 a * %s b^T%s, splits %u",
                         path ? "matrix units" : "tiled", nu_dtype_name(cases[c].dst), h, (long long)batch,
                         (long long)m, (long long)wide, nu_dtype_name(cases[c].w), cases[c].bias ? " + bias" : "",
                         tune.tc_splits);
                check_view(d, &out, &half[h], &a.t, a.values, &b[h].t, bv[h], cases[c].bias ? &bias.t : NULL,
                           cases[c].bias ? bias.values : NULL, &tune, what);
                if (h == 0)
                    memcpy(first, out.values, (size_t)(batch * m * wide) * sizeof *first);
            }
            for (int64_t r = 0; r < batch * m; r++)
                for (int64_t j = 0; j < wide; j++) {
                    float v = out.values[r * wide + j];
                    if (j < n && memcmp(&v, &first[r * wide + j], sizeof v))
                        fail_msg("%s: the second half's product changed the first half's [%lld, %lld]", what,
                                 (long long)r, (long long)j);
                    if (j >= 2 * n && !isnan(v))
                        fail_msg("%s: column %lld of row %lld past both halves was written (%g)", what, (long long)j,
                                 (long long)r, (double)v);
                }
            free(first);
            for (int h = 0; h < 2; h++) {
                free(bv[h]);
                nt_tensor_free(&b[h]);
            }
            nt_tensor_free(&a);
            nt_tensor_free(&out);
            nt_tensor_free(&bias);
        }
    unsetenv("NUVEC_MATMUL_TC");
    nt_close(d);
}

/* A GLU on the product (nu_matmul_desc.glu_stacked): b's rows [gate; up] and dst half as wide. */
typedef struct glu_case {
    const nu_tensor *dst, *a, *b, *bias, *y, *gated;
    nu_glu_activation act;
    nu_matmul_tune tune;
} glu_case;

static nu_status record_glu(nu_commands *c, void *arg)
{
    const glu_case *k = arg;
    nu_matmul_desc desc = {.bias = k->bias, .glu_stacked = true, .glu = k->act, .tune = k->tune};
    return nu_op_matmul_ex(c, k->dst, k->a, k->b, &desc);
}

/* The same as separate ops: the product into F32 y, then nu_op_swiglu, or GELU and nu_op_mul. */
static nu_status record_glu_apart(nu_commands *c, void *arg)
{
    const glu_case *k = arg;
    nu_matmul_desc desc = {.bias = k->bias, .tune = k->tune};
    nu_status st = nu_op_matmul_ex(c, k->y, k->a, k->b, &desc);
    uint32_t o = k->y->rank - 2;
    int64_t half = k->y->shape[o + 1] / 2;
    nu_tensor g, u;
    if (st == NU_OK)
        st = nu_tensor_slice(k->y, o + 1, 0, half, &g);
    if (st == NU_OK)
        st = nu_tensor_slice(k->y, o + 1, half, half, &u);
    if (st != NU_OK)
        return st;
    if (k->act == NU_GLU_SILU)
        return nu_op_swiglu(c, k->dst, &g, &u);
    if ((st = nu_op_unary(c, NU_UNARY_GELU_TANH, k->gated, &g, 0)) != NU_OK)
        return st;
    return nu_op_mul(c, k->dst, k->gated, &u);
}

static double ref_act(nu_glu_activation act, double g)
{
    if (act == NU_GLU_SILU)
        return g / (1.0 + exp(-g));
    return 0.5 * g * (1.0 + tanh(0.79788456080286536 * (g + 0.044715 * g * g * g)));
}

/* dst = act(gate) * up of the product's halves, on the tiled kernel and (where the device has
 * them) the matrix units with and without split k: SiLU and GELU, F32 and F16 dst, bias, batches,
 * block weights; against the float64 reference (the product's tolerance carried through the
 * activation, whose slope is below 1.2, plus the F32 activation's own error) and against the same
 * product and activation as separate ops (F32 dst: within 2^-20 of the value). Then what it refuses. */
static void glu_stacked_gates_the_products_halves(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    bool units = nu_device_get_info(d)->features[NU_FEATURE_COOPERATIVE_MATRIX];
    assert_int_equal(setenv("NUVEC_MATMUL_TC", "on", 1), 0);
    uint64_t seed = 47;
    const struct {
        int64_t batch, m, n, k; /* n: the product's columns (gate and up) */
        nu_dtype w, dst;
        uint32_t splits;
        bool bias;
        nu_glu_activation act;
    } cases[4] = {{1, 16, 96, 256, NU_DTYPE_Q4_0, NU_DTYPE_F32, 0, false, NU_GLU_SILU},
                  {2, 5, 70, 64, NU_DTYPE_F16, NU_DTYPE_F16, 0, true, NU_GLU_GELU_TANH},
                  {1, 16, 128, 1024, NU_DTYPE_Q4_K, NU_DTYPE_F32, 3, true, NU_GLU_SILU},
                  {1, 37, 48, 96, NU_DTYPE_Q8_0, NU_DTYPE_BF16, 0, false, NU_GLU_GELU_TANH}};
    for (int path = 0; path < (units ? 2 : 1); path++)
        for (int c = 0; c < 4; c++) {
            int64_t batch = cases[c].batch, m = cases[c].m, n = cases[c].n, k = cases[c].k, h = n / 2;
            int64_t as[3] = {batch, m, k}, bs[2] = {n, k}, ds[3] = {batch, m, h}, ys[3] = {batch, m, n}, bis[1] = {n};
            nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 3, as, 0, -1, 1, &seed);
            nt_tensor b = cases[c].w == NU_DTYPE_F16 ? nt_tensor_random(d, NU_DTYPE_F16, 2, bs, 0, -1, 1, &seed)
                                                     : nt_tensor_quantized(d, cases[c].w, 2, bs, 0, -1, 1, &seed);
            nt_tensor bias = nt_tensor_random(d, NU_DTYPE_F32, 1, bis, 0, -1, 1, &seed);
            nt_tensor out = nt_tensor_output(d, cases[c].dst, 3, ds, 0), apart = nt_tensor_output(d, cases[c].dst, 3, ds, 0);
            nt_tensor y = nt_tensor_output(d, NU_DTYPE_F32, 3, ys, 0), gated = nt_tensor_output(d, NU_DTYPE_F32, 3, ds, 0);
            nu_matmul_tune tune = {.no_tensor_cores = path == 0, .tc_splits = path ? cases[c].splits : 0};
            glu_case gc = {&out.t, &a.t, &b.t, cases[c].bias ? &bias.t : NULL, &y.t, &gated.t, cases[c].act, tune};
            nt_run(d, record_glu, &gc);
            nt_tensor_download(&out);
            gc.dst = &apart.t;
            nt_run(d, record_glu_apart, &gc);
            nt_tensor_download(&apart);
            char what[160];
            snprintf(what, sizeof what, "%s: %s [%lld, %lld, %lld] = %s(F16 a * %s b^T%s), splits %u",
                     path ? "matrix units" : "tiled", nu_dtype_name(cases[c].dst), (long long)batch, (long long)m,
                     (long long)h, cases[c].act == NU_GLU_SILU ? "SiLU" : "GELU", nu_dtype_name(cases[c].w),
                     cases[c].bias ? " + bias" : "", tune.tc_splits);
            float rel = nt_dtype_tolerance(cases[c].dst);
            for (int64_t z = 0; z < batch; z++)
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < h; j++) {
                        double s[2], sabs[2];
                        for (int half = 0; half < 2; half++) {
                            int64_t col = j + half * h;
                            s[half] = sabs[half] = 0;
                            for (int64_t e = 0; e < k; e++) {
                                /* the matrix units round block weights to F16 */
                                float w = b.values[col * k + e];
                                double p = (double)a.values[(z * m + i) * k + e] *
                                           (double)(path && cases[c].w != NU_DTYPE_F16 ? nt_round_to(NU_DTYPE_F16, w) : w);
                                s[half] += p;
                                sabs[half] += fabs(p);
                            }
                            if (cases[c].bias) {
                                s[half] += bias.values[col];
                                sabs[half] += fabs((double)bias.values[col]);
                            }
                        }
                        double tg = sabs[0] / 65536.0, tu = sabs[1] / 65536.0, act = ref_act(cases[c].act, s[0]);
                        double want = act * s[1];
                        double tol = 1.2 * tg * (fabs(s[1]) + tu) + (fabs(act) + 1.2 * tg) * tu + 1e-5 * fabs(want) +
                                     rel * fabs(want) + 1e-30;
                        int64_t at = (z * m + i) * h + j;
                        float got = out.values[at], sep = apart.values[at];
                        if (!(fabs((double)got - want) <= tol))
                            fail_msg("%s: [%lld, %lld, %lld] is %.9g, expected %.9g (tolerance %.3g)", what, (long long)z,
                                     (long long)i, (long long)j, (double)got, want, tol);
                        double same = cases[c].dst == NU_DTYPE_F32 ? fabs((double)sep) / 1048576.0 : rel * fabs((double)sep);
                        if (!(fabs((double)got - (double)sep) <= same + 1e-30))
                            fail_msg("%s: [%lld, %lld, %lld] is %.9g; the product and the GLU as separate ops give %.9g",
                                     what, (long long)z, (long long)i, (long long)j, (double)got, (double)sep);
                    }
            nt_tensor_free(&a);
            nt_tensor_free(&b);
            nt_tensor_free(&bias);
            nt_tensor_free(&out);
            nt_tensor_free(&apart);
            nt_tensor_free(&y);
            nt_tensor_free(&gated);
        }
    unsetenv("NUVEC_MATMUL_TC");

    /* Refused, naming why: an odd count of b's rows, dst as wide as the product, an activation
     * outside the enum. */
    int64_t as[2] = {4, 32}, bs[2] = {9, 32}, b2s[2] = {8, 32}, ds[2] = {4, 4}, wide[2] = {4, 8};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 2, as, 0, -1, 1, &seed);
    nt_tensor odd = nt_tensor_random(d, NU_DTYPE_F32, 2, bs, 0, -1, 1, &seed);
    nt_tensor even = nt_tensor_random(d, NU_DTYPE_F32, 2, b2s, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0), full = nt_tensor_output(d, NU_DTYPE_F32, 2, wide, 0);
    const struct {
        const nu_tensor *dst, *b;
        int act;
        const char *says;
    } bad[3] = {{&dst.t, &odd.t, NU_GLU_SILU, "even"}, {&full.t, &even.t, NU_GLU_SILU, "glu_stacked"},
                {&dst.t, &even.t, NU_GLU_ACTIVATION_COUNT, "nu_glu_activation"}};
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    for (int i = 0; i < 3; i++) {
        nu_matmul_desc desc = {.glu_stacked = true, .glu = (nu_glu_activation)bad[i].act};
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul_ex(c, bad[i].dst, &a.t, bad[i].b, &desc));
        if (!strstr(nu_error_message(NULL), bad[i].says))
            fail_msg("refusal %d says '%s', not naming '%s'", i, nu_error_message(NULL), bad[i].says);
    }
    NT_OK(nu_commands_free(c));
    nt_tensor_free(&a);
    nt_tensor_free(&odd);
    nt_tensor_free(&even);
    nt_tensor_free(&dst);
    nt_tensor_free(&full);
    nt_close(d);
}

/* A chain of three products in one recording: h = a w1^T (F16), y = h w2^T + bias, z = a w3^T. */
typedef struct chain3 {
    const nu_tensor *h, *y, *z, *a, *w1, *w2, *w3, *bias;
    nu_matmul_tune tune;
} chain3;

static nu_status record_chain3(nu_commands *c, void *arg)
{
    const chain3 *k = arg;
    nu_matmul_desc plain = {.tune = k->tune}, biased = {.bias = k->bias, .tune = k->tune};
    nu_status st = nu_op_matmul_ex(c, k->h, k->a, k->w1, &plain);
    if (st == NU_OK)
        st = nu_op_matmul_ex(c, k->y, k->h, k->w2, &biased);
    return st == NU_OK ? nu_op_matmul_ex(c, k->z, k->a, k->w3, &plain) : st;
}

/* Split-K on the matrix units (src/ops/matmul_tc.c: k split over workgroups, the F32 partials
 * added by matmul_splits.comp): few rows against each weight kind the kernel reads, splits chosen
 * by the grid and given (tune.tc_splits, rounded to whole 256-element runs), a bias, batches, every
 * dst dtype, against the reference (traced: the sum kernel ran); then a graph of three split
 * products in sequence, which share one scratch buffer, against the same chain in a command buffer
 * without splits (the same partials' order within a split: equal to F32 summation's bound).
 * Skipped where the device has no VK_KHR_cooperative_matrix (lavapipe). */
static void tensor_cores_split_k(void **state)
{
    (void)state;
    nu_device *d = nt_open_matrix_units("tensor_cores_split_k");
    assert_int_equal(setenv("NUVEC_MATMUL_TC", "on", 1), 0);
    uint64_t seed = 23;
    struct {
        int64_t m, n, k, batch;
        nu_dtype w;
        uint32_t splits;
        bool bias;
    } cases[7] = {
        {16, 4096, 4096, 1, NU_DTYPE_F16, 0, false}, {16, 200, 1024, 2, NU_DTYPE_Q4_K, 3, true},
        {5, 77, 768, 1, NU_DTYPE_Q6_K, 0, false},    {64, 129, 512, 1, NU_DTYPE_Q8_0, 2, true},
        {1, 300, 2048, 1, NU_DTYPE_Q4_0, 0, true},   {33, 64, 1280, 3, NU_DTYPE_Q4_K, 64, false},
        {0, 1024, 1024, 1, NU_DTYPE_F16, 0, false},
    };
    /* Many rows (a prefill's product) in 128 x 128 tiles filling a third of a wave (two a compute
     * unit), their partials within 16 MiB up to 384 compute units: the grid's choice splits k in
     * two (choose_tile). */
    uint32_t units = nu_device_get_info(d)->compute_units, rows = units >= 24 ? 8 : 1;
    cases[6].m = 128 * rows;
    cases[6].n = 128 * ((units + 3 * rows - 1) / (3 * rows));
    char path[512];
    snprintf(path, sizeof path, "%s/nuvec-splitk-%d.json", nt_tmp_dir(), (int)getpid());
    for (int c = 0; c < 7; c++) {
        int64_t m = cases[c].m, n = cases[c].n, k = cases[c].k, batch = cases[c].batch;
        int64_t as[3] = {batch, m, k}, bs[2] = {n, k}, ds[3] = {batch, m, n}, bis[1] = {n};
        nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 3, as, 0, -1, 1, &seed);
        nt_tensor b = cases[c].w == NU_DTYPE_F16 ? nt_tensor_random(d, NU_DTYPE_F16, 2, bs, 0, -1, 1, &seed)
                                                 : nt_tensor_quantized(d, cases[c].w, 2, bs, (uint64_t)(c % 2), -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, floats[c % 3], 3, ds, 0);
        nt_tensor bias = nt_tensor_random(d, NU_DTYPE_F32, 1, bis, 0, -1, 1, &seed);
        float *bv = malloc((size_t)(n * k) * sizeof *bv);
        for (int64_t i = 0; i < n * k; i++)
            bv[i] = nt_round_to(NU_DTYPE_F16, b.values[i]);
        nu_matmul_tune tune = {.tc_splits = cases[c].splits};
        char what[160];
        snprintf(what, sizeof what, "split-K: %s dst = F16 a [%lld, %lld, %lld] * %s b^T%s, splits %u",
                 nu_dtype_name(dst.t.dtype), (long long)batch, (long long)m, (long long)k, nu_dtype_name(cases[c].w),
                 cases[c].bias ? " + bias" : "", cases[c].splits);
        NT_OK(nu_trace_start(d, path));
        check_tuned(d, &dst, &a.t, a.values, &b.t, bv, cases[c].bias ? &bias.t : NULL,
                    cases[c].bias ? bias.values : NULL, &tune, what);
        NT_OK(nu_trace_stop(d));
        if (!nt_trace_has(path, "matmul_splits"))
            fail_msg("%s: no matmul_splits in the trace (was k split?)", what);
        free(bv);
        nt_tensor_free(&a);
        nt_tensor_free(&b);
        nt_tensor_free(&dst);
        nt_tensor_free(&bias);
    }

    /* The graph: three split products sharing the recording's scratch. */
    int64_t m = 16, k = 4096, n1 = 1024, as[2] = {m, k}, w1s[2] = {n1, k}, w2s[2] = {4096, n1}, w3s[2] = {512, k};
    int64_t hs[2] = {m, n1}, ys[2] = {m, 4096}, zs[2] = {m, 512}, bis[1] = {4096};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 2, as, 0, -1, 1, &seed);
    nt_tensor w1 = nt_tensor_quantized(d, NU_DTYPE_Q4_K, 2, w1s, 0, -1, 1, &seed);
    nt_tensor w2 = nt_tensor_quantized(d, NU_DTYPE_Q6_K, 2, w2s, 1, -1, 1, &seed);
    nt_tensor w3 = nt_tensor_random(d, NU_DTYPE_F16, 2, w3s, 0, -1, 1, &seed);
    nt_tensor bias = nt_tensor_random(d, NU_DTYPE_F32, 1, bis, 0, -1, 1, &seed);
    nt_tensor outs[2][3];
    for (int r = 0; r < 2; r++) {
        outs[r][0] = nt_tensor_output(d, NU_DTYPE_F16, 2, hs, 0);
        outs[r][1] = nt_tensor_output(d, NU_DTYPE_F32, 2, ys, 0);
        outs[r][2] = nt_tensor_output(d, NU_DTYPE_F32, 2, zs, 0);
    }
    chain3 plain = {&outs[0][0].t, &outs[0][1].t, &outs[0][2].t, &a.t, &w1.t, &w2.t, &w3.t, &bias.t, {.tc_splits = 1}};
    nt_run(d, record_chain3, &plain);
    chain3 split = {&outs[1][0].t, &outs[1][1].t, &outs[1][2].t, &a.t, &w1.t, &w2.t, &w3.t, &bias.t, {0}};
    nu_commands *rec;
    NT_OK(nu_graph_record(d, &rec));
    NT_OK(record_chain3(rec, &split));
    nu_graph *g;
    NT_OK(nu_graph_new(rec, &g));
    for (int launch = 0; launch < 2; launch++) { /* launches reuse the scratch */
        NT_OK(nu_graph_launch(g));
        NT_OK(nu_graph_wait(g, UINT64_MAX));
    }
    for (int i = 0; i < 3; i++) {
        nt_tensor_download(&outs[0][i]);
        nt_tensor_download(&outs[1][i]);
        uint64_t count = (uint64_t)nu_tensor_numel(&outs[0][i].t), differ = 0;
        /* F32 sums of 4096 F16 x F16 products of values up to 1 (and 1024 of h's): their order
         * differs, so the F32 results differ in their last bits almost everywhere: this says the
         * split ran there. */
        char what[64];
        snprintf(what, sizeof what, "split-K graph, product %d against the unsplit chain", i + 1);
        nt_expect_close(what, outs[1][i].values, outs[0][i].values, count, i == 1 ? 0.5f : 2e-3f, 2e-3f);
        for (uint64_t e = 0; e < count; e++)
            differ += outs[1][i].values[e] != outs[0][i].values[e];
        if (i == 2 && differ < count / 2)
            fail_msg("%s: only %llu of %llu results differ from the unsplit ones: was k split?", what,
                     (unsigned long long)differ, (unsigned long long)count);
    }
    NT_OK(nu_graph_free(g));
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 3; i++)
            nt_tensor_free(&outs[r][i]);
    nt_tensor_free(&a);
    nt_tensor_free(&w1);
    nt_tensor_free(&w2);
    nt_tensor_free(&w3);
    nt_tensor_free(&bias);
    unsetenv("NUVEC_MATMUL_TC");
    NT_OK(nu_device_close(d));
}

/* The developer overrides of the ops' tunes (docs/knobs.md), each set before a device first
 * reads it: a bad value fails the op with a message naming the variable (NUVEC_MATMUL_TC only where
 * the matrix units would run: elsewhere it is never read), and a good one runs. */
static void one_override(const char *var, const char *value, int op, bool fails)
{
    assert_int_equal(setenv(var, value, 1), 0);
    nu_device *d = nt_open();
    uint64_t seed = 9;
    int64_t s2[2] = {4, 64};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 2, s2, 0, -1, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F16, 2, s2, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, (int64_t[2]){4, 4}, 0);
    nt_tensor rows = nt_tensor_output(d, NU_DTYPE_F32, 2, s2, 0);
    int32_t id[2] = {1, 3};
    nt_tensor ids = nt_tensor_i32(d, id, 2, 0, 1);
    nt_tensor gdst = nt_tensor_output(d, NU_DTYPE_F32, 2, (int64_t[2]){2, 64}, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_status st = op == 0   ? nu_op_matmul(c, &dst.t, &a.t, &b.t, NULL)
                   : op == 1 ? nu_op_gather(c, &gdst.t, &b.t, &ids.t)
                             : nu_op_softmax(c, &rows.t, &a.t, 1.0f);
    if (fails && (st != NU_ERROR_INVALID_ARGUMENT || !strstr(nu_error_message(d), var)))
        fail_msg("%s=\"%s\": status %s, '%s'", var, value, nu_status_string(st), nu_error_message(d));
    if (!fails && st != NU_OK)
        fail_msg("%s=\"%s\": %s", var, value, nu_error_message(d));
    nu_commands_free(c);
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&dst);
    nt_tensor_free(&rows);
    nt_tensor_free(&ids);
    nt_tensor_free(&gdst);
    nt_close(d);
    unsetenv(var);
}

static void bad_developer_overrides_fail_naming_the_variable(void **state)
{
    (void)state;
    one_override("NUVEC_MATMUL", "variant=huge", 0, true);
    one_override("NUVEC_MATMUL", "bm=32 bn=16 bk=8 tm=2 tn=1 vector=0", 0, false);
    one_override("NUVEC_TUNE_GATHER", "units=5", 1, true);
    one_override("NUVEC_TUNE_GATHER", "local=64,units=3", 1, false);
    one_override("NUVEC_OPS_ROWS", "unroll=9", 2, true);
    one_override("NUVEC_OPS_ROWS", "local=64 min_team=8 unroll=1", 2, false);
    nu_device *d = nt_open();
    bool tc = nu_device_get_info(d)->features[NU_FEATURE_COOPERATIVE_MATRIX];
    nt_close(d);
    one_override("NUVEC_MATMUL_TC", "wm=9", 0, tc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_float_dtype_combination),
        cmocka_unit_test(block_weights_with_every_a_dtype),
        cmocka_unit_test(batched_and_broadcast),
        cmocka_unit_test(strided_transposed_and_sliced_views),
        cmocka_unit_test(writes_column_slices_of_a_wider_dst),
        cmocka_unit_test(glu_stacked_gates_the_products_halves),
        cmocka_unit_test(every_variant_and_knob),
        cmocka_unit_test(tensor_cores_match_the_reference),
        cmocka_unit_test(tensor_cores_split_k),
        cmocka_unit_test(refuses_bad_tensors),
        cmocka_unit_test(bad_developer_overrides_fail_naming_the_variable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
