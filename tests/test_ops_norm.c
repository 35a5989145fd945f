/* test_ops_norm.c: RMSNorm and LayerNorm (src/ops/norm.c) against a CPU reference in double:
 * every dtype of src, dst and weight (and bias), bias NULL or not, rows of 1 to 20000 elements
 * on the vector and strided paths, strided and transposed inputs, strided weights, in place,
 * constant rows and rows far from 0 (where E[x^2] - E[x]^2 in F32 would lose everything), the
 * shared-memory path; and what they refuse (eps must be finite and >= 0).
 *
 * Tolerance: |got - want| <= 2e-5 + (2e-5 + 2 x dst's rounding) |want|, want rounded to dst's
 * dtype (F32 sums of squares, one inversesqrt); constant rows 1e-4 absolute; rows far from 0
 * (1e4 + U(-1, 1)): 2e-2 absolute (an F32 mean of values near 1e4 is within a few 1e-3, times
 * rstd ~ 1.7 and the weight; a variance from E[x^2] - E[x]^2 in F32 would be off by O(1)). */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/device.h"

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

typedef struct norm_case {
    bool layer;
    const nu_tensor *dst, *src, *weight, *bias;
    float eps;
} norm_case;

static nu_status record_norm(nu_commands *c, void *arg)
{
    norm_case *k = arg;
    if (k->layer)
        return nu_op_layer_norm(c, k->dst, k->src, k->weight, k->bias, k->eps);
    return nu_op_rms_norm(c, k->dst, k->src, k->weight, k->eps);
}

typedef struct norm_args {
    bool layer;
    nt_tensor *src;
    const nu_tensor *view;
    nt_tensor *weight, *bias; /* bias may be NULL */
    const nu_tensor *wview, *bview;
    nu_dtype dd;
    uint64_t pad;
    bool in_place;
    float eps, abs;
} norm_args;

static void check_norm(nu_device *d, const norm_args *a, const char *what)
{
    const nu_tensor *view = a->view;
    uint64_t numel = nu_tensor_numel(view), n = (uint64_t)view->shape[view->rank - 1], rows = numel / n;
    float *x = malloc(numel * sizeof *x), *w = malloc(n * sizeof *w), *b = calloc(n, sizeof *b);
    nt_tensor_values(a->src, view, x);
    nt_tensor_values(a->weight, a->wview, w);
    if (a->bias)
        nt_tensor_values(a->bias, a->bview, b);
    nt_tensor out = {0}, *dst = a->in_place ? a->src : &out;
    if (!a->in_place)
        out = nt_tensor_output(d, a->dd, view->rank, view->shape, a->pad);
    norm_case k = {a->layer, a->in_place ? view : &out.t, view, a->wview, a->bias ? a->bview : NULL, a->eps};
    nt_run(d, record_norm, &k);
    nt_tensor_download(dst);
    nu_dtype od = a->in_place ? view->dtype : a->dd;
    float *want = malloc(n * sizeof *want);
    char at[256];
    for (uint64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        double mean = 0, var = 0;
        for (uint64_t i = 0; i < n; i++)
            mean += xr[i];
        mean = a->layer ? mean / (double)n : 0;
        for (uint64_t i = 0; i < n; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        double rstd = 1 / sqrt(var / (double)n + a->eps);
        for (uint64_t i = 0; i < n; i++)
            want[i] = nt_round_to(od, (float)((xr[i] - mean) * rstd * w[i] + (a->layer ? b[i] : 0)));
        snprintf(at, sizeof at, "%s, row %llu of %llu (%llu elements)", what, (unsigned long long)r,
                 (unsigned long long)rows, (unsigned long long)n);
        nt_expect_close(at, dst->values + r * n, want, n, a->abs ? a->abs : 2e-5f, 2e-5f + 2 * nt_dtype_tolerance(od));
    }
    free(x);
    free(w);
    free(b);
    free(want);
    if (!a->in_place)
        nt_tensor_free(&out);
}

static int64_t rows_for(int64_t n) { return n >= 4000 ? 2 : n >= 1000 ? 3 : n >= 200 ? 9 : 37; }
static const int64_t lengths[] = {1, 7, 33, 256, 1000, 4099};

/* Every dtype of dst, src and weight (bias: the weight's), RMSNorm and LayerNorm with and
 * without bias, row lengths and alignments in turn. */
static void norms_match_the_reference_for_every_dtype(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 21;
    for (int mode = 0; mode < 3; mode++)
        for (int dd = 0; dd < 3; dd++)
            for (int ds = 0; ds < 3; ds++)
                for (int dw = 0; dw < 3; dw++) {
                    int64_t n = lengths[(mode + dd + 2 * ds + dw) % 6];
                    int64_t shape[2] = {rows_for(n), n}, wn[1] = {n};
                    uint64_t pad = (uint64_t)((dd + ds + dw + mode) % 3 == 2); /* 1: strided path */
                    nt_tensor src = nt_tensor_random(d, floats[ds], 2, shape, pad, -3, 3, &seed);
                    nt_tensor wt = nt_tensor_random(d, floats[dw], 1, wn, 0, -2, 2, &seed);
                    nt_tensor bs = nt_tensor_random(d, floats[(dw + 1) % 3], 1, wn, 0, -1, 1, &seed);
                    norm_args a = {mode > 0, &src, &src.t, &wt, mode == 2 ? &bs : NULL, &wt.t, &bs.t, floats[dd], 0,
                                   false, 1e-5f, 0};
                    char what[160];
                    snprintf(what, sizeof what, "%s %s <- %s, weight %s, pad %llu",
                             (const char *[]){"rms_norm", "layer_norm", "layer_norm+bias"}[mode], nu_dtype_name(floats[dd]),
                             nu_dtype_name(floats[ds]), nu_dtype_name(floats[dw]), (unsigned long long)pad);
                    check_norm(d, &a, what);
                    nt_tensor_free(&src);
                    nt_tensor_free(&wt);
                    nt_tensor_free(&bs);
                }
    nt_close(d);
}

/* Every row length on both paths, and a long row (workgroups of 1024 threads). */
static void every_row_length_on_both_paths(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 22;
    const int64_t more[] = {1, 7, 33, 256, 1000, 4099, 20001};
    for (int li = 0; li < 7; li++)
        for (uint64_t pad = 0; pad < 2; pad++) {
            int64_t n = more[li], shape[2] = {n > 10000 ? 1 : rows_for(n), n}, wn[1] = {n};
            nu_dtype dt = floats[(li + pad) % 3];
            nt_tensor src = nt_tensor_random(d, dt, 2, shape, pad, -2, 2, &seed);
            nt_tensor wt = nt_tensor_random(d, dt, 1, wn, 0, 0.5f, 1.5f, &seed);
            nt_tensor bs = nt_tensor_random(d, NU_DTYPE_F32, 1, wn, 0, -1, 1, &seed);
            for (int mode = 0; mode < 3; mode++) {
                norm_args a = {mode > 0, &src, &src.t, &wt, mode == 2 ? &bs : NULL, &wt.t, &bs.t, NU_DTYPE_F32, 0,
                               false, 1e-6f, 0};
                char what[160];
                snprintf(what, sizeof what, "mode %d of %s, pad %llu", mode, nu_dtype_name(dt), (unsigned long long)pad);
                check_norm(d, &a, what);
            }
            nt_tensor_free(&src);
            nt_tensor_free(&wt);
            nt_tensor_free(&bs);
        }
    nt_close(d);
}

/* A transposed src (the last dimension strided), a slice of wider rows, weights and bias read
 * every other element, in place. */
static void strided_views_strided_weights_and_in_place(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 23;
    int64_t ts[2] = {300, 5}, w2[1] = {600}, wn[1] = {300};
    nt_tensor t = nt_tensor_random(d, NU_DTYPE_BF16, 2, ts, 1, -2, 2, &seed);
    nu_tensor tv;
    NT_OK(nu_tensor_transpose(&t.t, 0, 1, &tv)); /* [5, 300], elements 5 apart */
    nt_tensor wt = nt_tensor_random(d, NU_DTYPE_F16, 1, w2, 0, -1, 1, &seed);
    nt_tensor bs = nt_tensor_random(d, NU_DTYPE_F32, 1, w2, 0, -1, 1, &seed);
    nu_tensor wv = wt.t, bv = bs.t; /* every other element: [300] with stride 2 */
    wv.shape[0] = 300;
    wv.strides[0] = 2;
    bv.shape[0] = 300;
    bv.strides[0] = 2;
    bv.offset += 4;
    for (int mode = 0; mode < 3; mode++) {
        norm_args a = {mode > 0, &t, &tv, &wt, mode == 2 ? &bs : NULL, &wv, &bv, NU_DTYPE_F32, 0, false, 1e-5f, 0};
        check_norm(d, &a, "transposed src, strided weight and bias");
    }
    int64_t ws[2] = {4, 320};
    nt_tensor s = nt_tensor_random(d, NU_DTYPE_F32, 2, ws, 0, -2, 2, &seed);
    nt_tensor w1 = nt_tensor_random(d, NU_DTYPE_BF16, 1, wn, 0, -1, 1, &seed);
    nu_tensor sv;
    NT_OK(nu_tensor_slice(&s.t, 1, 20, 300, &sv)); /* rows 320 apart, aligned: vector path */
    for (int mode = 0; mode < 3; mode++) {
        norm_args a = {mode > 0, &s, &sv, &w1, mode == 2 ? &w1 : NULL, &w1.t, &w1.t, NU_DTYPE_F32, 0, false, 1e-5f, 0};
        check_norm(d, &a, "slice of wider rows");
    }
    /* In place, vector and strided paths. */
    for (uint64_t pad = 0; pad < 2; pad++)
        for (int mode = 0; mode < 3; mode++) {
            int64_t is[2] = {3, 300};
            nt_tensor p = nt_tensor_random(d, floats[(mode + pad) % 3], 2, is, pad, -2, 2, &seed);
            norm_args a = {mode > 0, &p, &p.t, &w1, mode == 2 ? &w1 : NULL, &w1.t, &w1.t, NU_DTYPE_F32, 0, true, 1e-5f, 0};
            check_norm(d, &a, "in place");
            nt_tensor_free(&p);
        }
    nt_tensor_free(&t);
    nt_tensor_free(&wt);
    nt_tensor_free(&bs);
    nt_tensor_free(&s);
    nt_tensor_free(&w1);
    nt_close(d);
}

/* Rows of one value: LayerNorm gives the bias (a variance of 0 and eps), RMSNorm
 * x / sqrt(x^2 + eps) * w. Rows far from 0 (1e4 + U(-1, 1)): LayerNorm's variance stays right. */
static void constant_rows_and_rows_far_from_zero(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 24;
    int64_t shape[2] = {4, 1000}, wn[1] = {1000};
    nt_tensor c = nt_tensor_random(d, NU_DTYPE_F32, 2, shape, 0, 0, 1, &seed);
    for (uint64_t i = 0; i < c.numel; i++) {
        float v = (float)(i / 1000) * 0.7f - 1.1f;
        memcpy(c.bytes + i * 4, &v, 4);
        c.values[i] = v;
    }
    NT_OK(nu_buffer_write(c.t.buffer, 0, c.bytes, c.size));
    nt_tensor wt = nt_tensor_random(d, NU_DTYPE_F32, 1, wn, 0, 0.5f, 1.5f, &seed);
    nt_tensor bs = nt_tensor_random(d, NU_DTYPE_BF16, 1, wn, 0, -1, 1, &seed);
    for (int mode = 0; mode < 3; mode++) {
        norm_args a = {mode > 0, &c, &c.t, &wt, mode == 2 ? &bs : NULL, &wt.t, &bs.t, NU_DTYPE_F32, 0, false, 1e-5f, 1e-4f};
        check_norm(d, &a, "constant rows");
    }
    nt_tensor far = nt_tensor_random(d, NU_DTYPE_F32, 2, shape, 0, 1e4f - 1, 1e4f + 1, &seed);
    norm_args a = {true, &far, &far.t, &wt, &bs, &wt.t, &bs.t, NU_DTYPE_F32, 0, false, 1e-5f, 2e-2f};
    check_norm(d, &a, "rows far from 0");
    nt_tensor_free(&c);
    nt_tensor_free(&far);
    nt_tensor_free(&wt);
    nt_tensor_free(&bs);
    nt_close(d);
}

/* Devices without subgroup arithmetic reduce through shared memory: the same results. */
static void shared_memory_path_without_subgroup_arithmetic(void **state)
{
    nu_device *d = nt_open();
    d->info.subgroup_operations &= ~(uint32_t)NU_SUBGROUP_ARITHMETIC; /* as such a device reports */
    uint64_t seed = 25;
    const int64_t ns[] = {7, 256, 4099, 20000};
    for (int i = 0; i < 4; i++) {
        int64_t shape[2] = {ns[i] > 10000 ? 1 : rows_for(ns[i]), ns[i]}, wn[1] = {ns[i]};
        nt_tensor s = nt_tensor_random(d, floats[i % 3], 2, shape, (uint64_t)i % 2, -3, 3, &seed);
        nt_tensor wt = nt_tensor_random(d, floats[(i + 1) % 3], 1, wn, 0, -1, 1, &seed);
        for (int mode = 0; mode < 3; mode++) {
            norm_args a = {mode > 0, &s, &s.t, &wt, mode == 2 ? &wt : NULL, &wt.t, &wt.t, NU_DTYPE_F32, 0, false, 1e-5f, 0};
            check_norm(d, &a, "shared-memory path");
        }
        nt_tensor_free(&s);
        nt_tensor_free(&wt);
    }
    nt_close(d);
}

/* The tuning knobs (NUVEC_OPS_ROWS, src/ops/rows.c) do not change the results (see
 * test_ops_reduce.c). */
static void tuning_knobs_keep_the_results(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 27;
    const char *const configs[] = {"local=64,min_team=8,unroll=4", "local=1024,long_local=512,long=64,min_team=256,unroll=1"};
    const int64_t ns[] = {7, 300, 4099};
    for (int c = 0; c < 2; c++) {
        setenv("NUVEC_OPS_ROWS", configs[c], 1);
        for (int i = 0; i < 3; i++) {
            int64_t shape[2] = {rows_for(ns[i]), ns[i]}, wn[1] = {ns[i]};
            nt_tensor s = nt_tensor_random(d, floats[(i + c) % 3], 2, shape, (uint64_t)i % 2, -3, 3, &seed);
            nt_tensor wt = nt_tensor_random(d, floats[i % 3], 1, wn, 0, -1, 1, &seed);
            for (int mode = 0; mode < 3; mode++) {
                norm_args a = {mode > 0, &s, &s.t, &wt, mode == 2 ? &wt : NULL, &wt.t, &wt.t, NU_DTYPE_F32, 0, false, 1e-5f, 0};
                check_norm(d, &a, configs[c]);
            }
            nt_tensor_free(&s);
            nt_tensor_free(&wt);
        }
    }
    unsetenv("NUVEC_OPS_ROWS");
    nt_close(d);
}

static void norms_refuse_bad_tensors(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 26;
    int64_t s23[2] = {2, 3}, s22[2] = {2, 2}, s3[1] = {3}, s4[1] = {4};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 2, s23, 0, 0, 1, &seed);
    nt_tensor o = nt_tensor_output(d, NU_DTYPE_F32, 2, s23, 0);
    nt_tensor o2 = nt_tensor_output(d, NU_DTYPE_F32, 2, s22, 0);
    nt_tensor w = nt_tensor_random(d, NU_DTYPE_F32, 1, s3, 0, 0, 1, &seed);
    nt_tensor w4 = nt_tensor_random(d, NU_DTYPE_F32, 1, s4, 0, 0, 1, &seed);
    nt_tensor i = nt_tensor_random(d, NU_DTYPE_I32, 2, s23, 0, 0, 9, &seed);
    nt_tensor iw = nt_tensor_random(d, NU_DTYPE_I32, 1, s3, 0, 0, 9, &seed);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    /* The weight's length, its rank, its dtype; the bias's length. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(c, &o.t, &a.t, &w4.t, 1e-5f));
    assert_non_null(strstr(nu_error_message(NULL), "length 3"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(c, &o.t, &a.t, &a.t, 1e-5f));
    assert_non_null(strstr(nu_error_message(NULL), "1-D"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(c, &o.t, &a.t, &iw.t, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_layer_norm(c, &o.t, &a.t, &w.t, &w4.t, 1e-5f));
    assert_non_null(strstr(nu_error_message(NULL), "bias"));
    /* I32 src and dst; dst of another shape; a strided dst. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(c, &o.t, &i.t, &w.t, 1e-5f));
    assert_non_null(strstr(nu_error_message(NULL), "I32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_layer_norm(c, &i.t, &a.t, &w.t, NULL, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(c, &o2.t, &a.t, &w.t, 1e-5f));
    assert_non_null(strstr(nu_error_message(NULL), "src's shape"));
    nu_tensor ot;
    NT_OK(nu_tensor_transpose(&o.t, 0, 1, &ot));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_layer_norm(c, &ot, &ot, &w.t, NULL, 1e-5f));
    /* eps: negative, NaN, infinite refused; 0 taken. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(c, &o.t, &a.t, &w.t, -1e-5f));
    assert_non_null(strstr(nu_error_message(NULL), "eps"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_layer_norm(c, &o.t, &a.t, &w.t, NULL, NAN));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_layer_norm(c, &o.t, &a.t, &w.t, NULL, INFINITY));
    NT_OK(nu_op_rms_norm(c, &o.t, &a.t, &w.t, 0));
    /* dst over the weight, or over src but not the same view. */
    nu_tensor wrow = w4.t;
    wrow.shape[0] = 3;
    nu_tensor orow = o.t;
    orow.buffer = w4.t.buffer;
    orow.rank = 1;
    orow.shape[0] = 3;
    orow.strides[0] = 1;
    nu_tensor arow = a.t;
    arow.rank = 1;
    arow.shape[0] = 3;
    arow.strides[0] = 1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(c, &orow, &arow, &wrow, 1e-5f));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps weight"));
    nu_tensor shifted = arow;
    shifted.offset += 4;
    shifted.shape[0] = 2;
    nu_tensor head = arow;
    head.shape[0] = 2;
    nt_tensor w2 = nt_tensor_random(d, NU_DTYPE_F32, 1, (int64_t[1]){2}, 0, 0, 1, &seed);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(c, &shifted, &head, &w2.t, 1e-5f));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps src"));
    /* NULLs. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(NULL, &o.t, &a.t, &w.t, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rms_norm(c, &o.t, &a.t, NULL, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_layer_norm(c, NULL, &a.t, &w.t, NULL, 1e-5f));
    nu_commands_free(c);
    nt_tensor_free(&a);
    nt_tensor_free(&o);
    nt_tensor_free(&o2);
    nt_tensor_free(&w);
    nt_tensor_free(&w4);
    nt_tensor_free(&w2);
    nt_tensor_free(&i);
    nt_tensor_free(&iw);
    nt_close(d);
}

typedef struct add_norm_case {
    const nu_tensor *sum, *dst, *a, *b, *weight;
} add_norm_case;

static nu_status record_add_norm(nu_commands *c, void *arg)
{
    add_norm_case *k = arg;
    return nu_op_add_rms_norm(c, k->sum, k->dst, k->a, k->b, k->weight, 1e-5f);
}

/* nu_op_add_rms_norm against the reference (sum = a + b in F32, rounded to sum's dtype; dst =
 * RMSNorm of the F32 sum): every row length (the 16-byte path and the scalar one: 1, 7, 33 ..),
 * the sum in place of a, in place of b, and apart, F32/F16/BF16; and its refusals. */
static void add_rms_norm_matches_the_reference(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 21;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (int where = 0; where < 3; where++) { /* 0: sum is a, 1: sum is b, 2: sum apart */
            int64_t n = lengths[li], rows = rows_for(n), shape[2] = {rows, n}, ws[1] = {n};
            nu_dtype dt = floats[(li + (size_t)where) % 3];
            nt_tensor a = nt_tensor_random(d, dt, 2, shape, 0, -2, 2, &seed);
            nt_tensor b = nt_tensor_random(d, dt, 2, shape, 0, -2, 2, &seed);
            nt_tensor w = nt_tensor_random(d, floats[li % 3], 1, ws, 0, -1, 1, &seed);
            nu_dtype ddt = li % 2 ? dt : floats[(li + (size_t)where + 1) % 3]; /* dst of the sum's dtype or another */
            nt_tensor apart = nt_tensor_output(d, dt, 2, shape, 0), dst = nt_tensor_output(d, ddt, 2, shape, 0);
            nt_tensor *sum = where == 0 ? &a : where == 1 ? &b : &apart;
            uint64_t numel = (uint64_t)(rows * n);
            float *s = malloc(numel * sizeof *s), *want = malloc(numel * sizeof *want), *want_sum = malloc(numel * sizeof *s);
            for (uint64_t i = 0; i < numel; i++) {
                s[i] = a.values[i] + b.values[i];
                want_sum[i] = nt_round_to(dt, s[i]);
            }
            for (int64_t r = 0; r < rows; r++) {
                double sq = 0;
                for (int64_t i = 0; i < n; i++)
                    sq += (double)s[r * n + i] * s[r * n + i];
                double rstd = 1 / sqrt(sq / (double)n + 1e-5);
                for (int64_t i = 0; i < n; i++)
                    want[r * n + i] = nt_round_to(ddt, (float)(s[r * n + i] * rstd * w.values[i]));
            }
            add_norm_case k = {&sum->t, &dst.t, &a.t, &b.t, &w.t};
            nt_run(d, record_add_norm, &k);
            nt_tensor_download(sum);
            nt_tensor_download(&dst);
            char what[128];
            snprintf(what, sizeof what, "add_rms_norm %s into %s, %lld x %lld, sum %s", nu_dtype_name(dt),
                     nu_dtype_name(ddt), (long long)rows, (long long)n,
                     (const char *[]){"in place of a", "in place of b", "apart"}[where]);
            nt_expect_close(what, sum->values, want_sum, numel, 1e-6f, 1e-6f);
            nt_expect_close(what, dst.values, want, numel, 2e-5f, 2e-5f + 2 * nt_dtype_tolerance(ddt));
            free(s);
            free(want);
            free(want_sum);
            nt_tensor_free(&a);
            nt_tensor_free(&b);
            nt_tensor_free(&w);
            nt_tensor_free(&apart);
            nt_tensor_free(&dst);
        }
    /* Refusals: a sum overlapping dst, of another shape, in place of a as another dtype; NULLs. */
    int64_t shape[2] = {3, 64}, other[2] = {3, 32}, ws[1] = {64};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 2, shape, 0, -1, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F32, 2, shape, 0, -1, 1, &seed);
    nt_tensor w = nt_tensor_random(d, NU_DTYPE_F32, 1, ws, 0, -1, 1, &seed);
    nt_tensor o = nt_tensor_output(d, NU_DTYPE_F32, 2, shape, 0), h = nt_tensor_output(d, NU_DTYPE_F16, 2, shape, 0);
    nt_tensor small = nt_tensor_output(d, NU_DTYPE_F32, 2, other, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add_rms_norm(c, &o.t, &o.t, &a.t, &b.t, &w.t, 1e-5f));
    nu_tensor a16 = a.t; /* a's own bytes read as F16: not the same view, so not in place */
    a16.dtype = NU_DTYPE_F16;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add_rms_norm(c, &a16, &h.t, &a.t, &b.t, &w.t, 1e-5f));
    assert_non_null(strstr(nu_error_message(d), "overlaps"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add_rms_norm(c, &small.t, &o.t, &a.t, &b.t, &w.t, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add_rms_norm(c, &a.t, &a.t, &a.t, &b.t, &w.t, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add_rms_norm(c, NULL, &o.t, &a.t, &b.t, &w.t, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add_rms_norm(c, &a.t, &o.t, &a.t, NULL, &w.t, 1e-5f));
    NT_OK(nu_commands_free(c));
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&w);
    nt_tensor_free(&o);
    nt_tensor_free(&h);
    nt_tensor_free(&small);
    nt_close(d);
}

typedef struct sandwich_case {
    const nu_tensor *t, *sum1, *dst1, *a1, *sum2, *dst2, *a2, *b, *wb, *w;
} sandwich_case;

/* The separate ops (rms_norm of b into F32 t, then add_rms_norm into sum1, dst1), then the one op
 * into sum2, dst2. */
static nu_status record_sandwich(nu_commands *c, void *arg)
{
    sandwich_case *k = arg;
    nu_status st = nu_op_rms_norm(c, k->t, k->b, k->wb, 1e-6f);
    if (st == NU_OK)
        st = nu_op_add_rms_norm(c, k->sum1, k->dst1, k->a1, k->t, k->w, 1e-6f);
    return st != NU_OK ? st : nu_op_norm_add_rms_norm(c, k->sum2, k->dst2, k->a2, k->b, k->wb, k->w, 1e-6f);
}

/* nu_op_norm_add_rms_norm equals nu_op_rms_norm into F32 then nu_op_add_rms_norm bit for bit
 * (the sum and dst), at every row length (both paths), b, its weight and dst of every float dtype,
 * the sum in place of a or apart; within the tolerance of the reference with a strided b_weight
 * (the separate rms_norm then sums squares on its scalar path, element by element, the one op on
 * its rows' path); and its refusals. */
static void norm_add_rms_norm_equals_the_separate_ops(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 23;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (int where = 0; where < 2; where++) { /* 0: sum is a, 1: sum apart */
            int64_t n = lengths[li], rows = rows_for(n), shape[2] = {rows, n}, ws[1] = {n}, ws2[2] = {n, 2};
            nu_dtype bdt = floats[(li + (size_t)where) % 3], ddt = floats[li % 3];
            nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 2, shape, 0, -2, 2, &seed);
            nt_tensor b = nt_tensor_random(d, bdt, 2, shape, 0, -2, 2, &seed);
            nt_tensor w = nt_tensor_random(d, floats[(li + 1) % 3], 1, ws, 0, -1, 1, &seed);
            nt_tensor wb2 = nt_tensor_random(d, floats[(li + 2) % 3], 2, ws2, 0, -1, 1, &seed);
            nu_tensor wb = wb2.t; /* where li is odd, column 1 of [n, 2] (a stride of 2); else n contiguous */
            if (li % 2) {
                NT_OK(nu_tensor_slice(&wb2.t, 1, 1, 1, &wb));
                wb.rank = 1;
            } else {
                wb.rank = 1;
                wb.strides[0] = 1;
            }
            nt_tensor a2 = nt_tensor_output(d, NU_DTYPE_F32, 2, shape, 0), t = nt_tensor_output(d, NU_DTYPE_F32, 2, shape, 0);
            nt_tensor sum1 = nt_tensor_output(d, NU_DTYPE_F32, 2, shape, 0), apart = nt_tensor_output(d, NU_DTYPE_F32, 2, shape, 0);
            nt_tensor dst1 = nt_tensor_output(d, ddt, 2, shape, 0), dst2 = nt_tensor_output(d, ddt, 2, shape, 0);
            nt_run_copy(d, &a2.t, &a.t);
            nt_tensor *sum2 = where == 0 ? &a2 : &apart;
            sandwich_case k = {&t.t, &sum1.t, &dst1.t, &a.t, &sum2->t, &dst2.t, &a2.t, &b.t, &wb, &w.t};
            nt_run(d, record_sandwich, &k);
            nt_tensor_download(&sum1);
            nt_tensor_download(sum2);
            nt_tensor_download(&dst1);
            nt_tensor_download(&dst2);
            uint64_t numel = (uint64_t)(rows * n);
            char what[128];
            snprintf(what, sizeof what, "norm_add_rms_norm b %s, dst %s, %lld x %lld, sum %s", nu_dtype_name(bdt),
                     nu_dtype_name(ddt), (long long)rows, (long long)n, where ? "apart" : "in place of a");
            if (li % 2) { /* a strided weight takes nu_op_rms_norm to its scalar path, not the one op */
                nt_expect_close(what, sum2->values, sum1.values, numel, 1e-6f, 1e-6f);
                nt_expect_close(what, dst2.values, dst1.values, numel, 2e-5f, 2e-5f + 2 * nt_dtype_tolerance(ddt));
            }
            for (uint64_t i = 0; i < numel && li % 2 == 0; i++)
                if (memcmp(&sum1.values[i], &sum2->values[i], sizeof(float)) ||
                    memcmp(&dst1.values[i], &dst2.values[i], sizeof(float)))
                    fail_msg("%s: element %llu: sum %.9g / %.9g, dst %.9g / %.9g (separate / one op)", what,
                             (unsigned long long)i, (double)sum1.values[i], (double)sum2->values[i],
                             (double)dst1.values[i], (double)dst2.values[i]);
            nt_tensor_free(&a);
            nt_tensor_free(&b);
            nt_tensor_free(&w);
            nt_tensor_free(&wb2);
            nt_tensor_free(&a2);
            nt_tensor_free(&t);
            nt_tensor_free(&sum1);
            nt_tensor_free(&apart);
            nt_tensor_free(&dst1);
            nt_tensor_free(&dst2);
        }
    /* Refusals: NULLs, a b_weight of another length, dst over the sum, a negative eps. */
    int64_t shape[2] = {3, 64}, ws[1] = {64}, ws_short[1] = {32};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 2, shape, 0, -1, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F32, 2, shape, 0, -1, 1, &seed);
    nt_tensor w = nt_tensor_random(d, NU_DTYPE_F32, 1, ws, 0, -1, 1, &seed);
    nt_tensor short_w = nt_tensor_random(d, NU_DTYPE_F32, 1, ws_short, 0, -1, 1, &seed);
    nt_tensor o = nt_tensor_output(d, NU_DTYPE_F32, 2, shape, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_norm_add_rms_norm(c, &a.t, &o.t, &a.t, &b.t, NULL, &w.t, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_norm_add_rms_norm(c, NULL, &o.t, &a.t, &b.t, &w.t, &w.t, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_norm_add_rms_norm(c, &a.t, &o.t, &a.t, &b.t, &short_w.t, &w.t, 1e-5f));
    assert_non_null(strstr(nu_error_message(d), "b_weight"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_norm_add_rms_norm(c, &a.t, &a.t, &a.t, &b.t, &w.t, &w.t, 1e-5f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_norm_add_rms_norm(c, &a.t, &o.t, &a.t, &b.t, &w.t, &w.t, -1.0f));
    NT_OK(nu_commands_free(c));
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&w);
    nt_tensor_free(&short_w);
    nt_tensor_free(&o);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(norms_match_the_reference_for_every_dtype),
        cmocka_unit_test(every_row_length_on_both_paths),
        cmocka_unit_test(strided_views_strided_weights_and_in_place),
        cmocka_unit_test(constant_rows_and_rows_far_from_zero),
        cmocka_unit_test(shared_memory_path_without_subgroup_arithmetic),
        cmocka_unit_test(tuning_knobs_keep_the_results),
        cmocka_unit_test(norms_refuse_bad_tensors),
        cmocka_unit_test(add_rms_norm_matches_the_reference),
        cmocka_unit_test(norm_add_rms_norm_equals_the_separate_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
