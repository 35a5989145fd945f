/* test_ops_unary.c: nu_op_unary, nu_op_scale, nu_op_glu and nu_op_swiglu (src/ops/unary.c) against a CPU
 * reference in double precision: every op and dtype combination, odd sizes and tails, strided,
 * transposed, broadcast and unaligned views, in place, special values (infinities, NaN, large
 * arguments), erf's accuracy measured through GELU; and what they refuse.
 * Tolerances (F32 results; F16 and BF16 add twice their rounding, nt_dtype_tolerance): SCALE one
 * rounding (1.2e-7 relative); EXP, SILU and GELU_TANH 4e-6 relative plus 1.5e-6 relative per unit
 * of the magnitude of exp's argument a (Vulkan allows exp 3 + 2|a| ulps, and a's own rounding
 * error scales with |a|: a = x, -x, -2 sqrt(2/pi) (x + 0.044715 x^3)), plus 1e-30 absolute for
 * results that underflow; GELU 1e-6 absolute plus that relative error with a = x^2 / 2 (erf's
 * approximation: 1.5e-7; erf itself is checked to 1e-6 absolute); SOFTCAP 2e-6 relative (tanh's
 * polynomial a few ulps, its exp form a few ulps of 1 against a result >= 0.24, the division of x
 * by the cap 2.5 ulps); the GLUs as SILU's and GELU_TANH's, relative to |act(gate) * up|. */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};
static const char *const op_names[NU_UNARY_OP_COUNT] = {"scale", "exp", "silu", "gelu", "gelu_tanh", "softcap"};

static double ref_unary(nu_unary_op op, double x, double alpha)
{
    switch (op) {
    case NU_UNARY_SCALE: return (double)(float)(alpha * x); /* one F32 product */
    case NU_UNARY_EXP: return exp(x);
    case NU_UNARY_SILU: return x / (1 + exp(-x));
    /* x (1 + erf(x / sqrt 2)) / 2 and x (1 + tanh u) / 2, written without cancellation in
     * double below 0 (1 + erf(z) = erfc(-z), 1 + tanh u = 2 / (1 + e^-2u)). */
    case NU_UNARY_GELU: return 0.5 * x * erfc(-x / sqrt(2.0));
    case NU_UNARY_SOFTCAP: return alpha * tanh(x / alpha);
    default: return x / (1 + exp(-2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    }
}

/* The tolerance of op at x, stored as dst (see the top of this file). */
static void tolerance(nu_unary_op op, nu_dtype dst, double x, float *abs, float *rel)
{
    double a = 0;
    switch (op) {
    case NU_UNARY_EXP:
    case NU_UNARY_SILU: a = fabs(x); break;
    case NU_UNARY_GELU: a = x * x / 2; break;
    case NU_UNARY_GELU_TANH: a = fabs(2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)); break;
    default: break;
    }
    *abs = op == NU_UNARY_SCALE ? 0 : (op == NU_UNARY_GELU ? 1e-6f : 1e-30f);
    *rel = op == NU_UNARY_SCALE ? 1.2e-7f : (float)(4e-6 + 1.5e-6 * (a < 200 ? a : 200)); /* past 104, exp is 0 or inf */
    if (op == NU_UNARY_SOFTCAP)
        *rel = 2e-6f;
    if (dst != NU_DTYPE_F32)
        *rel += 2 * nt_dtype_tolerance(dst);
}

/* nt_expect_close with each element's own tolerance (of op at x[i]). */
static void expect_op(const char *what, nu_unary_op op, nu_dtype dst, const float *got, const float *want, const float *x,
                      uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        float abs, rel;
        tolerance(op, dst, x[i], &abs, &rel);
        char each[192];
        snprintf(each, sizeof each, "%s (x = %.9g)", what, (double)x[i]);
        nt_expect_close(each, got + i, want + i, 1, abs, rel);
    }
}

typedef struct unary_case {
    nu_unary_op op;
    const nu_tensor *dst, *src, *up;
    float alpha;
    bool swiglu;            /* a GLU of src (gate) and up: nu_op_swiglu for SiLU, else nu_op_glu */
    nu_glu_activation act;
} unary_case;

static nu_status record_unary(nu_commands *c, void *arg)
{
    unary_case *k = arg;
    if (k->swiglu)
        return k->act == NU_GLU_SILU ? nu_op_swiglu(c, k->dst, k->src, k->up) : nu_op_glu(c, k->act, k->dst, k->src, k->up);
    if (k->op == NU_UNARY_SCALE && k->alpha == 0.5f)
        return nu_op_scale(c, k->dst, k->src, k->alpha); /* the shorthand, too */
    return nu_op_unary(c, k->op, k->dst, k->src, k->alpha);
}

/* dst = op(view `sv` of s), checked; `x` (if not NULL) receives the inputs. */
static void check_unary(nu_device *d, nu_unary_op op, float alpha, nt_tensor *dst, const nt_tensor *s, const nu_tensor *sv,
                        const char *what)
{
    uint64_t n = dst->numel;
    float *x = malloc(n * sizeof *x), *want = malloc(n * sizeof *want);
    nt_tensor_values(s, sv, x); /* before the op: it may run in place */
    unary_case k = {op, &dst->t, sv, NULL, alpha, false, NU_GLU_SILU};
    nt_run(d, record_unary, &k);
    nt_tensor_download(dst);
    for (uint64_t i = 0; i < n; i++)
        want[i] = nt_round_to(dst->t.dtype, (float)ref_unary(op, x[i], alpha));
    expect_op(what, op, dst->t.dtype, dst->values, want, x, n);
    free(x);
    free(want);
}

static void unary_ops_match_the_reference_for_every_dtype(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 21;
    const int64_t shapes[][4] = {{1, 1, 1, 1}, {1, 1, 1, 7}, {1, 1, 3, 33}, {1, 2, 5, 64}, {2, 3, 4, 129}};
    const float lo[NU_UNARY_OP_COUNT] = {-100, -20, -30, -8, -8, -90}, hi[NU_UNARY_OP_COUNT] = {100, 20, 30, 8, 8, 90};
    for (int op = 0; op < NU_UNARY_OP_COUNT; op++)
        for (int dt = 0; dt < 3; dt++)
            for (int ds = 0; ds < 3; ds++) {
                int s = (op + dt + 2 * ds) % 5;
                uint32_t rank = 1 + (uint32_t)((op + ds) % 4);
                const int64_t *shape = shapes[s] + (4 - rank);
                uint64_t pad = (uint64_t)((op + dt + ds) % 3); /* 0: the vector path; else unaligned */
                nt_tensor src = nt_tensor_random(d, floats[ds], rank, shape, pad, lo[op], hi[op], &seed);
                nt_tensor dst = nt_tensor_output(d, floats[dt], rank, shape, (uint64_t)(dt % 2) * 8);
                char what[128];
                snprintf(what, sizeof what, "%s %s <- %s, %llu elements, pad %llu", op_names[op], nu_dtype_name(floats[dt]),
                         nu_dtype_name(floats[ds]), (unsigned long long)dst.numel, (unsigned long long)pad);
                float alpha = op == NU_UNARY_SOFTCAP ? (ds ? 30.0f : 1.0f) : op ? 1.0f : (dt ? 0.5f : -3.25f);
                check_unary(d, (nu_unary_op)op, alpha, &dst, &src, &src.t, what);
                nt_tensor_free(&src);
                nt_tensor_free(&dst);
            }
    nt_close(d);
}

/* Erf to 1e-6 absolute: recovered from F32 GELU as 2 gelu(x) / x - 1 = erf(x / sqrt 2). */
/* op over n F32 values evenly from lo to hi (src), into dst (downloaded). */
static void sweep(nu_device *d, nu_unary_op op, float alpha, float lo, float hi, int64_t n, nt_tensor *src, nt_tensor *dst)
{
    *src = nt_tensor_output(d, NU_DTYPE_F32, 1, &n, 0);
    for (int64_t i = 0; i < n; i++) {
        src->values[i] = lo + (hi - lo) * (float)i / (float)(n - 1);
        memcpy(src->bytes + i * 4, &src->values[i], 4);
    }
    NT_OK(nu_buffer_write(src->t.buffer, 0, src->bytes, src->size));
    *dst = nt_tensor_output(d, NU_DTYPE_F32, 1, &n, 0);
    unary_case k = {op, &dst->t, &src->t, NULL, alpha, false, NU_GLU_SILU};
    nt_run(d, record_unary, &k);
    nt_tensor_download(dst);
}

static void gelu_erf_is_accurate_to_1e_6(void **state)
{
    nu_device *d = nt_open();
    int64_t n[1] = {16001};
    nt_tensor src, dst;
    sweep(d, NU_UNARY_GELU, 0, -8.0f, 8.0f, n[0], &src, &dst); /* steps of 1/1000 */
    double worst = 0;
    for (int64_t i = 0; i < n[0]; i++) {
        double x = src.values[i];
        if (fabs(x) < 0.25)
            continue; /* 2 gelu / x amplifies gelu's rounding near 0 */
        double e = 2.0 * dst.values[i] / x - 1.0, err = fabs(e - erf(x / sqrt(2.0)));
        if (!(err <= 1e-6))
            fail_msg("gelu(%.9g) = %.9g: erf(x / sqrt 2) recovered as %.9g, off by %.3g", x, (double)dst.values[i], e, err);
        worst = err > worst ? err : worst;
    }
    print_message("erf's largest error through GELU: %.3g\n", worst);
    nt_tensor_free(&src);
    nt_tensor_free(&dst);
    nt_close(d);
}

/* SOFTCAP's tanh over [-12, 12] in steps of 1/1000 (both of its branches, and the switch at 1/4):
 * within 2e-6 relative of tanh in double; the largest error printed. */
static void softcap_tanh_is_accurate(void **state)
{
    nu_device *d = nt_open();
    int64_t n[1] = {24001};
    nt_tensor src, dst;
    sweep(d, NU_UNARY_SOFTCAP, 1.0f, -12.0f, 12.0f, n[0], &src, &dst);
    double worst = 0;
    for (int64_t i = 0; i < n[0]; i++) {
        double x = src.values[i], want = tanh(x), err = want ? fabs(dst.values[i] - want) / fabs(want) : fabs(dst.values[i]);
        if (!(err <= 2e-6))
            fail_msg("softcap 1 (tanh) of %.9g is %.9g, expected %.9g (relative error %.3g)", x, (double)dst.values[i], want,
                     err);
        worst = err > worst ? err : worst;
    }
    print_message("tanh's largest relative error through SOFTCAP: %.3g\n", worst);
    nt_tensor_free(&src);
    nt_tensor_free(&dst);
    nt_close(d);
}

static void unary_ops_handle_special_values(void **state)
{
    nu_device *d = nt_open();
    const float special[] = {0.0f, -0.0f, INFINITY, NAN, 1e-30f, -1e-30f, 88.0f, 89.0f, -87.0f, -104.0f,
                             100.0f, -100.0f, 1e30f, -1e30f, 3e38f, -3e38f, 0.5f, -0.5f};
    int64_t n[1] = {(int64_t)(sizeof special / sizeof special[0])};
    nt_tensor src = nt_tensor_output(d, NU_DTYPE_F32, 1, n, 0);
    for (int64_t i = 0; i < n[0]; i++) {
        src.values[i] = special[i];
        memcpy(src.bytes + i * 4, &special[i], 4);
    }
    NT_OK(nu_buffer_write(src.t.buffer, 0, src.bytes, src.size));
    for (int op = 0; op < NU_UNARY_OP_COUNT; op++) {
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 1, n, 0);
        char what[64];
        snprintf(what, sizeof what, "%s of special values", op_names[op]);
        check_unary(d, (nu_unary_op)op, 2.0f, &dst, &src, &src.t, what);
        /* The limits, exactly: no inf / inf. */
        if (op == NU_UNARY_SILU || op == NU_UNARY_GELU || op == NU_UNARY_GELU_TANH) {
            assert_true(dst.values[2] == INFINITY);
            assert_true(dst.values[12] == 1e30f && dst.values[14] == 3e38f);
            assert_true(dst.values[13] == 0.0f && dst.values[15] == 0.0f);
        }
        if (op == NU_UNARY_SOFTCAP) { /* the cap (2) at +-inf and far out; tanh odd, -0 kept */
            assert_true(dst.values[2] == 2.0f && dst.values[14] == 2.0f && dst.values[15] == -2.0f);
            assert_true(dst.values[1] == 0.0f && signbit(dst.values[1]));
        }
        assert_true(isnan(dst.values[3]));
        nt_tensor_free(&dst);
    }
    nt_tensor_free(&src);
    nt_close(d);
}

static void unary_ops_take_strided_views_and_run_in_place(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 22;
    int64_t ms[2] = {9, 21};
    nt_tensor m = nt_tensor_random(d, NU_DTYPE_F16, 2, ms, 3, -4, 4, &seed);
    nu_tensor mt, cols, one, wide;
    NT_OK(nu_tensor_transpose(&m.t, 0, 1, &mt));
    NT_OK(nu_tensor_slice(&m.t, 1, 4, 11, &cols));
    NT_OK(nu_tensor_slice(&m.t, 0, 5, 1, &one));
    int64_t bs[3] = {2, 9, 21};
    NT_OK(nu_tensor_broadcast(&one, 3, bs, &wide));
    int64_t ts[2] = {21, 9}, cs[2] = {9, 11};
    nt_tensor a = nt_tensor_output(d, NU_DTYPE_F32, 2, ts, 0), b = nt_tensor_output(d, NU_DTYPE_BF16, 2, cs, 1),
              c = nt_tensor_output(d, NU_DTYPE_F16, 3, bs, 0);
    check_unary(d, NU_UNARY_GELU, 0, &a, &m, &mt, "gelu of a transposed F16 view");
    check_unary(d, NU_UNARY_SILU, 0, &b, &m, &cols, "silu of a slice of F16 columns");
    check_unary(d, NU_UNARY_EXP, 0, &c, &m, &wide, "exp of an F16 row broadcast to 2x9x21");
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&c);
    /* In place, on the vector path (aligned) and the element path (unaligned), and a large
     * tensor. */
    int64_t s1[1] = {1029}, big[1] = {300001};
    for (int dt = 0; dt < 3; dt++)
        for (uint64_t pad = 0; pad < 2; pad++) {
            nt_tensor x = nt_tensor_random(d, floats[dt], 1, s1, pad, -5, 5, &seed);
            char what[64];
            snprintf(what, sizeof what, "gelu_tanh in place, %s, pad %llu", nu_dtype_name(floats[dt]), (unsigned long long)pad);
            check_unary(d, NU_UNARY_GELU_TANH, 0, &x, &x, &x.t, what);
            nt_tensor_free(&x);
        }
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_BF16, 1, big, 0, -5, 5, &seed);
    check_unary(d, NU_UNARY_SCALE, 0.5f, &x, &x, &x.t, "x *= 0.5 in place, 300001 BF16");
    nt_tensor_free(&x);
    nt_tensor_free(&m);
    nt_close(d);
}

/* dst = act(gate view) * (up view), checked. */
static void check_glu(nu_device *d, nu_glu_activation act, nt_tensor *dst, const nt_tensor *g, const nu_tensor *gv,
                      const nt_tensor *u, const nu_tensor *uv, const char *what)
{
    nu_unary_op op = act == NU_GLU_SILU ? NU_UNARY_SILU : NU_UNARY_GELU_TANH;
    uint64_t n = dst->numel;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *want = malloc(n * sizeof *want);
    nt_tensor_values(g, gv, x);
    nt_tensor_values(u, uv, y);
    unary_case k = {op, &dst->t, gv, uv, 0, true, act};
    nt_run(d, record_unary, &k);
    nt_tensor_download(dst);
    for (uint64_t i = 0; i < n; i++)
        want[i] = nt_round_to(dst->t.dtype, (float)(ref_unary(op, x[i], 0) * y[i]));
    expect_op(what, op, dst->t.dtype, dst->values, want, x, n);
    free(x);
    free(y);
    free(want);
}

/* Every dtype combination, SiLU (nu_op_swiglu) and GELU (nu_op_glu) in turn, ranks 1 to 3, padded
 * and unaligned; the halves of a fused projection; in place on gate and on up. */
static void glu_matches_the_reference(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 23;
    const int64_t shapes[][3] = {{1, 1, 1}, {1, 1, 9}, {1, 3, 40}, {2, 5, 64}, {3, 2, 131}};
    for (int dt = 0; dt < 3; dt++)
        for (int dg = 0; dg < 3; dg++)
            for (int du = 0; du < 3; du++) {
                int s = (dt + dg + 2 * du) % 5;
                uint32_t rank = 1 + (uint32_t)((dg + du) % 3);
                const int64_t *shape = shapes[s] + (3 - rank);
                uint64_t pad = (uint64_t)((dt + du) % 3);
                nt_tensor g = nt_tensor_random(d, floats[dg], rank, shape, pad, -12, 12, &seed);
                nt_tensor u = nt_tensor_random(d, floats[du], rank, shape, 0, -3, 3, &seed);
                nt_tensor dst = nt_tensor_output(d, floats[dt], rank, shape, (uint64_t)(dg % 2) * 8);
                nu_glu_activation act = (dt + dg + du) % 2 ? NU_GLU_GELU_TANH : NU_GLU_SILU;
                char what[128];
                snprintf(what, sizeof what, "%s %s <- %s, %s, %llu elements, pad %llu",
                         act == NU_GLU_SILU ? "swiglu" : "geglu", nu_dtype_name(floats[dt]), nu_dtype_name(floats[dg]),
                         nu_dtype_name(floats[du]), (unsigned long long)dst.numel, (unsigned long long)pad);
                check_glu(d, act, &dst, &g, &g.t, &u, &u.t, what);
                nt_tensor_free(&g);
                nt_tensor_free(&u);
                nt_tensor_free(&dst);
            }
    /* A fused gate/up projection [tokens, 2 * hidden]: gate and up are its two halves (slices of
     * columns); then in place on either. */
    int64_t fs[2] = {5, 2 * 37}, hs[2] = {5, 37};
    nt_tensor f = nt_tensor_random(d, NU_DTYPE_F32, 2, fs, 0, -6, 6, &seed);
    nu_tensor gate, up;
    NT_OK(nu_tensor_slice(&f.t, 1, 0, 37, &gate));
    NT_OK(nu_tensor_slice(&f.t, 1, 37, 37, &up));
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_BF16, 2, hs, 0);
    check_glu(d, NU_GLU_SILU, &dst, &f, &gate, &f, &up, "swiglu of the halves of a fused projection");
    check_glu(d, NU_GLU_GELU_TANH, &dst, &f, &gate, &f, &up, "geglu of the halves of a fused projection");
    nt_tensor_free(&dst);
    int64_t s1[1] = {1000};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 1, s1, 0, -6, 6, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F16, 1, s1, 1, -6, 6, &seed);
    check_glu(d, NU_GLU_SILU, &a, &a, &a.t, &b, &b.t, "swiglu in place on gate");
    check_glu(d, NU_GLU_GELU_TANH, &b, &a, &a.t, &b, &b.t, "geglu in place on up (unaligned)");
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&f);
    nt_close(d);
}

static void unary_ops_refuse_bad_tensors(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 24;
    int64_t s4[1] = {4}, s5[1] = {5}, s22[2] = {2, 2}, s14[2] = {1, 4};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 1, s4, 0, 0, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F32, 1, s5, 0, 0, 1, &seed);
    nt_tensor m = nt_tensor_random(d, NU_DTYPE_F32, 2, s22, 0, 0, 1, &seed);
    nt_tensor r = nt_tensor_random(d, NU_DTYPE_F32, 2, s14, 0, 0, 1, &seed);
    nt_tensor i = nt_tensor_random(d, NU_DTYPE_I32, 1, s4, 0, 0, 9, &seed);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(c, NU_UNARY_OP_COUNT, &a.t, &a.t, 1));
    assert_non_null(strstr(nu_error_message(NULL), "unknown op"));
    const float bad_caps[4] = {0.0f, -1.0f, NAN, INFINITY};
    for (int k = 0; k < 4; k++) {
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(c, NU_UNARY_SOFTCAP, &a.t, &a.t, bad_caps[k]));
        assert_non_null(strstr(nu_error_message(NULL), "SOFTCAP"));
        assert_non_null(strstr(nu_error_message(NULL), "alpha"));
    }
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(c, NU_UNARY_EXP, &a.t, &b.t, 1)); /* 4 vs 5 */
    assert_non_null(strstr(nu_error_message(NULL), "src is 5"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_scale(c, &a.t, &r.t, 1)); /* [1, 4] vs [4]: no broadcasting */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(c, NU_UNARY_SILU, &i.t, &a.t, 1)); /* an I32 dst */
    assert_non_null(strstr(nu_error_message(NULL), "I32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(c, NU_UNARY_SILU, &a.t, &i.t, 1)); /* an I32 src */
    nu_tensor mt;
    NT_OK(nu_tensor_transpose(&m.t, 0, 1, &mt));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(c, NU_UNARY_GELU, &mt, &m.t, 1)); /* a strided dst */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(c, NU_UNARY_GELU, &m.t, &mt, 1)); /* in place, another view */
    assert_non_null(strstr(nu_error_message(NULL), "only the same view"));
    nu_tensor head = a.t, tail = a.t;
    head.shape[0] = tail.shape[0] = 3;
    tail.offset += 4;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(c, NU_UNARY_EXP, &tail, &head, 1));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps"));
    nu_tensor past = a.t;
    past.offset = a.size;
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_op_unary(c, NU_UNARY_EXP, &past, &b.t, 1));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(NULL, NU_UNARY_EXP, &a.t, &a.t, 1));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_unary(c, NU_UNARY_EXP, NULL, &a.t, 1));
    /* SwiGLU: one shape for all three, floats, no partial overlap. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_swiglu(c, &a.t, &a.t, &b.t));
    assert_non_null(strstr(nu_error_message(NULL), "up is 5"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_swiglu(c, &a.t, &r.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_swiglu(c, &a.t, &i.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_swiglu(c, &tail, &head, &head));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_swiglu(c, &mt, &m.t, &m.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_swiglu(NULL, &a.t, &a.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_swiglu(c, &a.t, NULL, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_glu(c, NU_GLU_ACTIVATION_COUNT, &a.t, &a.t, &a.t));
    assert_non_null(strstr(nu_error_message(NULL), "not a nu_glu_activation"));
    /* Empty tensors record nothing and succeed. */
    nu_tensor empty = a.t;
    empty.shape[0] = 0;
    NT_OK(nu_op_unary(c, NU_UNARY_GELU, &empty, &empty, 1));
    NT_OK(nu_op_swiglu(c, &empty, &empty, &empty));
    nu_commands_free(c);
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&m);
    nt_tensor_free(&r);
    nt_tensor_free(&i);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unary_ops_match_the_reference_for_every_dtype),
        cmocka_unit_test(gelu_erf_is_accurate_to_1e_6),
        cmocka_unit_test(softcap_tanh_is_accurate),
        cmocka_unit_test(unary_ops_handle_special_values),
        cmocka_unit_test(unary_ops_take_strided_views_and_run_in_place),
        cmocka_unit_test(glu_matches_the_reference),
        cmocka_unit_test(unary_ops_refuse_bad_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
