/* test_ops_reduce.c: reductions over the last dimension, argmax and softmax (src/ops/reduce.c)
 * against a CPU reference in double: every op and dtype pair, rows of 1 to 40000 elements
 * (one and several rows a workgroup, vector and strided paths, a tail), strided, transposed,
 * broadcast and unaligned views, in place, constant rows, ties and NaN, large magnitudes, the
 * shared-memory path of devices without subgroup arithmetic; and what they refuse.
 *
 * Tolerances (|got - want| <= abs + rel |want|, want rounded to dst's dtype):
 *   sum, mean: abs 1e-6 sum|x| (mean: / n), rel 2 x dst's rounding (nt_dtype_tolerance);
 *   max, argmax: exact (max: dst's rounding when dst is narrower than src);
 *   softmax: abs 1e-6, rel 2e-5 + 2 x dst's rounding (GLSL's exp is within a few ulp). */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/device.h"

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

enum { K_SUM, K_MAX, K_MEAN, K_ARGMAX, K_SOFTMAX };
static const char *const kind_names[] = {"sum", "max", "mean", "argmax", "softmax"};

typedef struct rows_case {
    int kind;
    const nu_tensor *dst, *src;
    float scale;
} rows_case;

static nu_status record_rows(nu_commands *c, void *arg)
{
    rows_case *k = arg;
    switch (k->kind) {
    case K_ARGMAX: return nu_op_argmax(c, k->dst, k->src);
    case K_SOFTMAX: return nu_op_softmax(c, k->dst, k->src, k->scale);
    default: return nu_op_reduce(c, (nu_reduce_op)k->kind, k->dst, k->src);
    }
}

/* The reference over one row of n values: out[0] for reductions, out[0..n) for softmax. */
static void reference(int kind, const float *x, uint64_t n, float scale, double *out, double *abs_sum)
{
    double s = 0, a = 0;
    uint64_t best = 0;
    for (uint64_t i = 0; i < n; i++) {
        s += x[i];
        a += fabs(x[i]);
        /* First of equal ones, NaN largest (the first NaN). */
        if (!isnan(x[best]) && (isnan(x[i]) || x[i] > x[best]))
            best = i;
    }
    *abs_sum = a;
    if (kind == K_SUM)
        out[0] = s;
    else if (kind == K_MEAN)
        out[0] = s / (double)n;
    else if (kind == K_MAX)
        out[0] = x[best];
    else if (kind == K_ARGMAX)
        out[0] = (double)best;
    else {
        double m = -INFINITY, t = 0;
        for (uint64_t i = 0; i < n; i++)
            m = fmax(m, (double)scale * x[i]);
        for (uint64_t i = 0; i < n; i++)
            t += exp((double)scale * x[i] - m);
        for (uint64_t i = 0; i < n; i++)
            out[i] = exp((double)scale * x[i] - m) / t;
    }
}

/* Runs `kind` over the rows of `view` (a view of src's buffer) into a new dst of dtype `dd`
 * (`pad` elements into its buffer), or in place into src when in_place, and checks it. */
static void check_rows(nu_device *d, int kind, nt_tensor *src, const nu_tensor *view, nu_dtype dd, uint64_t pad,
                       float scale, bool in_place, const char *what)
{
    uint64_t numel = nu_tensor_numel(view), n = (uint64_t)view->shape[view->rank - 1], rows = numel / n;
    float *x = malloc(numel * sizeof *x);
    nt_tensor_values(src, view, x);
    int64_t shape[NU_TENSOR_DIMS];
    memcpy(shape, view->shape, sizeof shape);
    bool per_row = kind != K_SOFTMAX;
    if (per_row)
        shape[view->rank - 1] = 1;
    nt_tensor out = {0};
    nt_tensor *dst = &out;
    if (in_place)
        dst = src;
    else
        out = nt_tensor_output(d, dd, view->rank, shape, pad);
    rows_case k = {kind, in_place ? view : &out.t, view, scale};
    nt_run(d, record_rows, &k);
    nt_tensor_download(dst);
    uint64_t per = per_row ? 1 : n;
    double *want = malloc(per * sizeof *want);
    float *w = malloc(per * sizeof *w);
    nu_dtype od = in_place ? view->dtype : dd;
    char at[256];
    for (uint64_t r = 0; r < rows; r++) {
        double asum;
        reference(kind, x + r * n, n, scale, want, &asum);
        for (uint64_t i = 0; i < per; i++)
            w[i] = kind == K_ARGMAX ? (float)want[i] : nt_round_to(od, (float)want[i]);
        float abs = 0, rel = 0;
        if (kind == K_SUM || kind == K_MEAN) {
            abs = (float)(1e-6 * asum / (kind == K_MEAN ? (double)n : 1.0));
            rel = 2 * nt_dtype_tolerance(od);
        } else if (kind == K_MAX) {
            rel = od != NU_DTYPE_F32 && od != view->dtype ? nt_dtype_tolerance(od) : 0;
        } else if (kind == K_SOFTMAX) {
            abs = 1e-6f;
            rel = 2e-5f + 2 * nt_dtype_tolerance(od);
        }
        snprintf(at, sizeof at, "%s, row %llu of %llu (%llu elements)", what, (unsigned long long)r,
                 (unsigned long long)rows, (unsigned long long)n);
        nt_expect_close(at, dst->values + r * per, w, per, abs, rel);
    }
    free(want);
    free(w);
    free(x);
    if (!in_place)
        nt_tensor_free(&out);
}

/* Rows of a few thousand elements in all, whatever their length. */
static int64_t rows_for(int64_t n) { return n >= 4000 ? 2 : n >= 1000 ? 3 : n >= 200 ? 9 : 37; }

static const int64_t lengths[] = {1, 7, 33, 256, 1000, 4099};
#define LENGTHS (int)(sizeof lengths / sizeof lengths[0])

static void reductions_match_the_reference_for_every_dtype(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 11;
    for (int kind = K_SUM; kind <= K_SOFTMAX; kind++)
        for (int ds = 0; ds < 3; ds++)
            for (int dd = 0; dd < (kind == K_ARGMAX ? 1 : 3); dd++) {
                int64_t n = lengths[(kind + ds + 2 * dd) % LENGTHS];
                int64_t shape[2] = {rows_for(n), n};
                uint64_t pad = (uint64_t)((ds + dd + kind) % 3); /* 0: 16-byte loads; else one at a time */
                nt_tensor src = nt_tensor_random(d, floats[ds], 2, shape, pad, -3, 3, &seed);
                nu_dtype odt = kind == K_ARGMAX ? NU_DTYPE_I32 : floats[dd];
                char what[160];
                snprintf(what, sizeof what, "%s %s <- %s, pad %llu", kind_names[kind], nu_dtype_name(odt),
                         nu_dtype_name(floats[ds]), (unsigned long long)pad);
                check_rows(d, kind, &src, &src.t, odt, (uint64_t)dd * 3, kind == K_SOFTMAX ? 0.7f : 1, false, what);
                nt_tensor_free(&src);
            }
    nt_close(d);
}

/* Every row length, on both paths: aligned (16-byte loads) and one element past (strided
 * path), each op; rows long enough for the long-row workgroups (16384 and more). */
static void every_row_length_on_both_paths(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 12;
    const int64_t more[] = {1, 7, 33, 256, 1000, 4099, 40003};
    for (int li = 0; li < 7; li++)
        for (uint64_t pad = 0; pad < 2; pad++) {
            int64_t n = more[li], shape[2] = {more[li] > 10000 ? 1 : rows_for(n), n};
            nu_dtype dt = floats[(li + pad) % 3];
            nt_tensor src = nt_tensor_random(d, dt, 2, shape, pad, -2, 2, &seed);
            for (int kind = K_SUM; kind <= K_SOFTMAX; kind++) {
                char what[160];
                snprintf(what, sizeof what, "%s of %s, pad %llu", kind_names[kind], nu_dtype_name(dt),
                         (unsigned long long)pad);
                check_rows(d, kind, &src, &src.t, kind == K_ARGMAX ? NU_DTYPE_I32 : NU_DTYPE_F32, 0, 1.5f, false, what);
            }
            nt_tensor_free(&src);
        }
    nt_close(d);
}

/* Views: transposed (the last dimension strided), slices of wider rows (row stride > n),
 * broadcast rows (stride 0), rank 1 and 4. */
static void strided_transposed_and_broadcast_views(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 13;
    int64_t ts[2] = {257, 6}; /* read as [6, 257], elements 6 apart */
    nt_tensor t = nt_tensor_random(d, NU_DTYPE_F16, 2, ts, 1, -2, 2, &seed);
    nu_tensor tv;
    NT_OK(nu_tensor_transpose(&t.t, 0, 1, &tv));
    for (int kind = K_SUM; kind <= K_SOFTMAX; kind++)
        check_rows(d, kind, &t, &tv, kind == K_ARGMAX ? NU_DTYPE_I32 : NU_DTYPE_BF16, 1, 1, false, "transposed [257,6]^T");
    /* Columns 8..8+1000 of [5, 1040] F32 rows: contiguous rows 1040 apart, 16-byte aligned (vector
     * path), and columns 3..3+1000 (not aligned). */
    int64_t ws[2] = {5, 1040};
    nt_tensor w = nt_tensor_random(d, NU_DTYPE_F32, 2, ws, 0, -1, 1, &seed);
    for (int64_t start = 3; start <= 8; start += 5) {
        nu_tensor sv;
        NT_OK(nu_tensor_slice(&w.t, 1, start, 1000, &sv));
        for (int kind = K_SUM; kind <= K_SOFTMAX; kind++)
            check_rows(d, kind, &w, &sv, kind == K_ARGMAX ? NU_DTYPE_I32 : NU_DTYPE_F32, 0, 1, false,
                       start == 8 ? "slice of wider rows, aligned" : "slice of wider rows, unaligned");
    }
    /* One row broadcast to [4, 3, 33] (strides 0, 0, 1) and a rank-1 tensor. */
    int64_t one[1] = {33}, bs[3] = {4, 3, 33};
    nt_tensor r = nt_tensor_random(d, NU_DTYPE_BF16, 1, one, 0, -4, 4, &seed);
    nu_tensor bv;
    NT_OK(nu_tensor_broadcast(&r.t, 3, bs, &bv));
    for (int kind = K_SUM; kind <= K_SOFTMAX; kind++) {
        check_rows(d, kind, &r, &bv, kind == K_ARGMAX ? NU_DTYPE_I32 : NU_DTYPE_F16, 0, 2, false, "broadcast rows");
        check_rows(d, kind, &r, &r.t, kind == K_ARGMAX ? NU_DTYPE_I32 : NU_DTYPE_F32, 0, 2, false, "rank 1");
    }
    /* One element broadcast along the rows too: [3, 50] of strides 0, 0. */
    nu_tensor e, ev;
    NT_OK(nu_tensor_slice(&r.t, 0, 5, 1, &e));
    NT_OK(nu_tensor_broadcast(&e, 2, (int64_t[2]){3, 50}, &ev));
    for (int kind = K_SUM; kind <= K_SOFTMAX; kind++)
        check_rows(d, kind, &r, &ev, kind == K_ARGMAX ? NU_DTYPE_I32 : NU_DTYPE_F32, 0, 1, false, "broadcast along rows");
    /* Rank 4, with the middle dimensions transposed: [2, 3, 5, 40] from [2, 5, 3, 40]. */
    int64_t s4[4] = {2, 5, 3, 40};
    nt_tensor f = nt_tensor_random(d, NU_DTYPE_F32, 4, s4, 0, -1, 1, &seed);
    nu_tensor fv;
    NT_OK(nu_tensor_transpose(&f.t, 1, 2, &fv));
    for (int kind = K_SUM; kind <= K_SOFTMAX; kind++)
        check_rows(d, kind, &f, &fv, kind == K_ARGMAX ? NU_DTYPE_I32 : NU_DTYPE_F32, 0, 1, false, "rank 4 transposed");
    nt_tensor_free(&t);
    nt_tensor_free(&w);
    nt_tensor_free(&r);
    nt_tensor_free(&f);
    nt_close(d);
}

static void put_f32(nt_tensor *h, uint64_t i, float v)
{
    memcpy(h->bytes + h->t.offset + i * 4, &v, 4);
    h->values[i] = v;
}

/* Argmax's ties (the first), NaN (the first NaN is largest), -0 and +0 equal, -inf rows; max
 * propagates NaN; constant rows (sum exact, softmax uniform). */
static void ties_nan_and_constant_rows(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 14;
    int64_t shape[2] = {6, 1000};
    nt_tensor s = nt_tensor_random(d, NU_DTYPE_F32, 2, shape, 0, -1, 1, &seed);
    /* Row 0: 5 at 900 and at 17 (-> 17). Row 1: NaN at 700 and -NaN at 300 (-> 300). Row 2: all -0, but
     * +0 at 3 (-> 0). Row 3: all -inf (-> 0). Row 4: 2 at the last element only (-> 999). Row 5:
     * constant 0.75. */
    put_f32(&s, 900, 5);
    put_f32(&s, 17, 5);
    put_f32(&s, 1000 + 700, NAN);
    put_f32(&s, 1000 + 300, -NAN); /* a NaN whatever its sign bit */
    for (int i = 0; i < 1000; i++) {
        put_f32(&s, 2000 + (uint64_t)i, i == 3 ? 0.0f : -0.0f);
        put_f32(&s, 3000 + (uint64_t)i, -INFINITY);
        put_f32(&s, 4000 + (uint64_t)i, (float)i / 1000);
        put_f32(&s, 5000 + (uint64_t)i, 0.75f);
    }
    put_f32(&s, 4999, 2);
    NT_OK(nu_buffer_write(s.t.buffer, 0, s.bytes, s.size));
    check_rows(d, K_ARGMAX, &s, &s.t, NU_DTYPE_I32, 0, 1, false, "argmax ties and NaN");
    int64_t os[2] = {6, 1};
    nt_tensor m = nt_tensor_output(d, NU_DTYPE_F32, 2, os, 0);
    rows_case k = {K_MAX, &m.t, &s.t, 1};
    nt_run(d, record_rows, &k);
    nt_tensor_download(&m);
    assert_true(m.values[0] == 5 && isnan(m.values[1]) && m.values[2] == 0 && m.values[3] == -INFINITY &&
                m.values[4] == 2 && m.values[5] == 0.75f);
    k.kind = K_SUM;
    nt_run(d, record_rows, &k);
    nt_tensor_download(&m);
    assert_true(isnan(m.values[1]) && m.values[5] == 750); /* 0.75 * 1000, exact */
    nt_tensor_free(&m);
    /* Constant rows: softmax is uniform. Rows 5.. of the F16 copy: [1, 1000] of 0.75. */
    nu_tensor row5;
    NT_OK(nu_tensor_slice(&s.t, 0, 5, 1, &row5));
    check_rows(d, K_SOFTMAX, &s, &row5, NU_DTYPE_F32, 0, 3, false, "softmax of a constant row");
    nt_tensor_free(&s);
    nt_close(d);
}

/* softmax(scale * x) of values scaled to +-80 and beyond: no overflow (the row's max is
 * subtracted), rows sum to 1. */
static void softmax_of_large_magnitudes(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 15;
    for (int ds = 0; ds < 3; ds++) {
        int64_t shape[2] = {3, 515};
        nt_tensor s = nt_tensor_random(d, floats[ds], 2, shape, 0, -80, 80, &seed);
        check_rows(d, K_SOFTMAX, &s, &s.t, NU_DTYPE_F32, 0, 1, false, "softmax of +-80");
        check_rows(d, K_SOFTMAX, &s, &s.t, floats[ds], 0, 8, false, "softmax of +-80 scaled by 8");
        check_rows(d, K_SOFTMAX, &s, &s.t, NU_DTYPE_F32, 0, -1.5f, false, "softmax of +-80 scaled by -1.5");
        nt_tensor_free(&s);
    }
    nt_close(d);
}

/* Softmax in place: dst the same view as src (vector and strided paths, one and many rows a
 * workgroup). */
static void softmax_in_place(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 16;
    const int64_t ns[] = {7, 1000, 4099};
    for (int i = 0; i < 3; i++)
        for (uint64_t pad = 0; pad < 2; pad++) {
            int64_t shape[2] = {rows_for(ns[i]), ns[i]};
            nt_tensor s = nt_tensor_random(d, floats[(i + pad) % 3], 2, shape, pad, -5, 5, &seed);
            check_rows(d, K_SOFTMAX, &s, &s.t, s.t.dtype, 0, 1.25f, true, "softmax in place");
            nt_tensor_free(&s);
        }
    nt_close(d);
}

/* Devices without subgroup arithmetic reduce through shared memory: the same results. */
static void shared_memory_path_without_subgroup_arithmetic(void **state)
{
    nu_device *d = nt_open();
    assert_true(d->info.max_workgroup_invocations >= 256);
    d->info.subgroup_operations &= ~(uint32_t)NU_SUBGROUP_ARITHMETIC; /* as such a device reports */
    uint64_t seed = 17;
    const int64_t ns[] = {7, 256, 4099, 20000};
    for (int i = 0; i < 4; i++) {
        int64_t shape[2] = {ns[i] > 10000 ? 1 : rows_for(ns[i]), ns[i]};
        nt_tensor s = nt_tensor_random(d, floats[i % 3], 2, shape, (uint64_t)i % 2, -3, 3, &seed);
        for (int kind = K_SUM; kind <= K_SOFTMAX; kind++)
            check_rows(d, kind, &s, &s.t, kind == K_ARGMAX ? NU_DTYPE_I32 : NU_DTYPE_F32, 0, 1, false, "shared-memory path");
        nt_tensor_free(&s);
    }
    nt_close(d);
}

/* The tuning knobs (NUVEC_OPS_ROWS, src/ops/rows.c) change how rows are laid over threads, not
 * the results: teams of 8 (one lavapipe subgroup, eight rows a workgroup of 64) with 4 loads in
 * flight, and teams of 256 in workgroups of 1024 with one. */
static void tuning_knobs_keep_the_results(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 19;
    const char *const configs[] = {"local=64,min_team=8,unroll=4", "local=1024,long_local=512,long=64,min_team=256,unroll=1"};
    const int64_t ns[] = {7, 300, 4099};
    for (int c = 0; c < 2; c++) {
        setenv("NUVEC_OPS_ROWS", configs[c], 1);
        for (int i = 0; i < 3; i++) {
            int64_t shape[2] = {rows_for(ns[i]), ns[i]};
            nt_tensor s = nt_tensor_random(d, floats[(i + c) % 3], 2, shape, (uint64_t)i % 2, -3, 3, &seed);
            for (int kind = K_SUM; kind <= K_SOFTMAX; kind++)
                check_rows(d, kind, &s, &s.t, kind == K_ARGMAX ? NU_DTYPE_I32 : NU_DTYPE_F32, 0, 1, false, configs[c]);
            nt_tensor_free(&s);
        }
    }
    unsetenv("NUVEC_OPS_ROWS");
    nt_close(d);
}

static void reductions_refuse_bad_tensors(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 18;
    int64_t s23[2] = {2, 3}, s21[2] = {2, 1}, s22[2] = {2, 2}, s3[1] = {3};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 2, s23, 0, 0, 1, &seed);
    nt_tensor r = nt_tensor_output(d, NU_DTYPE_F32, 2, s21, 0);
    nt_tensor r2 = nt_tensor_output(d, NU_DTYPE_F32, 2, s22, 0);
    nt_tensor r1 = nt_tensor_output(d, NU_DTYPE_F32, 1, s3, 0);
    nt_tensor i = nt_tensor_random(d, NU_DTYPE_I32, 2, s23, 0, 0, 9, &seed);
    nt_tensor ir = nt_tensor_output(d, NU_DTYPE_I32, 2, s21, 0);
    nt_tensor o = nt_tensor_output(d, NU_DTYPE_F32, 2, s23, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    /* dst's last dimension not 1, dst of another rank, dst's leading dimension wrong. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_reduce(c, NU_REDUCE_SUM, &r2.t, &a.t));
    assert_non_null(strstr(nu_error_message(NULL), "last dimension 1"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_reduce(c, NU_REDUCE_MAX, &r1.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_argmax(c, &r2.t, &a.t));
    /* I32 src; argmax into a float dst; reduce into I32. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_reduce(c, NU_REDUCE_SUM, &r.t, &i.t));
    assert_non_null(strstr(nu_error_message(NULL), "I32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_argmax(c, &r.t, &a.t));
    assert_non_null(strstr(nu_error_message(NULL), "F32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_reduce(c, NU_REDUCE_MEAN, &ir.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_softmax(c, &o.t, &i.t, 1));
    /* Softmax: another shape; a strided dst; overlapping but not the same view; a NaN scale. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_softmax(c, &r2.t, &a.t, 1));
    nu_tensor at;
    NT_OK(nu_tensor_transpose(&o.t, 0, 1, &at));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_softmax(c, &at, &at, 1));
    assert_non_null(strstr(nu_error_message(NULL), "contiguous"));
    nu_tensor head = a.t, tail = a.t;
    head.shape[1] = 2;
    tail.shape[1] = 2;
    tail.strides[0] = 2;
    tail.offset += 4;
    head.strides[0] = 2;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_softmax(c, &tail, &head, 1));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_softmax(c, &o.t, &a.t, NAN));
    /* A reduction written over its own input (never in place). */
    nu_tensor col = a.t;
    col.shape[1] = 1;
    col.strides[0] = 1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_reduce(c, NU_REDUCE_SUM, &col, &a.t));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps"));
    /* Rows of length 0. */
    nu_tensor empty = a.t;
    empty.shape[1] = 0;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_reduce(c, NU_REDUCE_SUM, &r.t, &empty));
    assert_non_null(strstr(nu_error_message(NULL), "empty"));
    /* An empty tensor: nothing recorded. */
    nu_tensor none = a.t, none_dst = r.t;
    none.shape[0] = 0;
    none_dst.shape[0] = 0;
    NT_OK(nu_op_reduce(c, NU_REDUCE_SUM, &none_dst, &none));
    NT_OK(nu_op_softmax(c, &none, &none, 1));
    /* Unknown op, NULLs, past the buffer's end. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_reduce(c, NU_REDUCE_OP_COUNT, &r.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_reduce(NULL, NU_REDUCE_SUM, &r.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_argmax(c, NULL, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_softmax(c, &o.t, NULL, 1));
    nu_tensor past = a.t;
    past.offset = a.size;
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_op_reduce(c, NU_REDUCE_SUM, &r.t, &past));
    nu_commands_free(c);
    nt_tensor_free(&a);
    nt_tensor_free(&r);
    nt_tensor_free(&r2);
    nt_tensor_free(&r1);
    nt_tensor_free(&i);
    nt_tensor_free(&ir);
    nt_tensor_free(&o);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reductions_match_the_reference_for_every_dtype),
        cmocka_unit_test(every_row_length_on_both_paths),
        cmocka_unit_test(strided_transposed_and_broadcast_views),
        cmocka_unit_test(ties_nan_and_constant_rows),
        cmocka_unit_test(softmax_of_large_magnitudes),
        cmocka_unit_test(softmax_in_place),
        cmocka_unit_test(shared_memory_path_without_subgroup_arithmetic),
        cmocka_unit_test(tuning_knobs_keep_the_results),
        cmocka_unit_test(reductions_refuse_bad_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
