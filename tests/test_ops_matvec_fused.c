/* test_ops_matvec_fused.c: nu_op_matvec_fused (src/ops/matvec.c, the FUSE forms of
 * kernels/matvec/matvec_kernel.glsl and matvec_dot.comp) against a float64 CPU reference: the
 * desc's fields (norm_weight, bias, glu_up with SiLU or GELU, residual apart or in place) alone and
 * combined, for every weight dtype (float and block; Q4_0_SOA's are test_ops_matvec_soa.c's), on
 * both paths of block weights (the dot path where it applies, tune.float_path), at other shapes
 * and knobs; a zero desc is nu_op_matvec; and what the fields refuse. Block weights' exact values
 * are nu_dequantize's (ops_util). */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

/* The reference of the fused forms, in double from the exact element values: s_m = 1 /
 * sqrt(mean(x^2) + eps); x' = x * norm_weight (in float: the dot path quantizes that F32
 * product per block, as the reference then does); P = s_m * sum(w x') for the gate (weight) and
 * up; dst = act(P_gate + bias) * P_up + residual, act SiLU or GELU's tanh form. Tolerance: each
 * product's as test_ops_matvec.c's (F32 summation: sum |x w| / 2^16; x's rounding on the dot
 * path) scaled by s_m, plus 2^-16 |P| for s_m's F32 sum of squares; through the GLU |act'| <=
 * 1.13 (SiLU's at most 1.10, GELU's 1.13) times |P_up| times the gate's error plus |act(P_gate)|
 * times the up's; then dst's rounding. Much tighter than any wrong formula: dropping
 * norm_weight, s_m or eps (0.1 here, so that eps counts), the bias or adding it after the GLU,
 * act(up) * gate, SiLU for GELU, a lost residual each move the outputs by a good fraction of
 * their size. */

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
 * r [m, n] (the residual's values before the run: for an in-place residual, dst's), b [n]. NULL
 * where desc has no such field. */
typedef struct fused_ref {
    const float *w, *up, *x, *g, *r, *b;
} fused_ref;

static double act_d(nu_glu_activation glu, double v)
{
    if (glu == NU_GLU_GELU_TANH)
        return 0.5 * v * (1.0 + tanh(0.79788456080286536 * (v + 0.044715 * v * v * v)));
    return v / (1.0 + exp(-v));
}

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
    bool dot = nt_matvec_dot_path(d, w, m, desc->norm_weight != NULL, &desc->tune);
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
        if (dot) /* x' as the dot path rounds it */
            nt_round_as_dot_path(xn, k, xq, tie);
        for (int64_t j = 0; j < n; j++) {
            double eg, eu = 0;
            double pg = s * ref_dot(ref->w + j * k, xq, tie, k, &eg), pu = 0;
            eg = s * eg + fabs(pg) / 65536.0;
            if (desc->bias) {
                pg += ref->b[j];
                eg += fabs(pg) / (1 << 22);
            }
            double v = pg, err = eg;
            if (desc->glu_up) {
                pu = s * ref_dot(ref->up + j * k, xq, tie, k, &eu);
                eu = s * eu + fabs(pu) / 65536.0;
                v = act_d(desc->glu, pg) * pu;
                err = 1.13 * fabs(pu) * eg + fabs(act_d(desc->glu, pg)) * eu + fabs(v) / 65536.0;
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

/* The float dtypes, then the block ones (ops_util's nt_block_dtypes). */
#define WEIGHTS (3 + NT_BLOCK_DTYPES)
static nu_dtype every_weight(int i) { return i < 3 ? floats[i] : nt_block_dtypes[i - 3]; }

#define F_NORM 1
#define F_GLU 2
#define F_RES 4      /* a residual apart from dst */
#define F_IN_PLACE 8 /* the residual is dst */
#define F_BIAS 16
#define F_GELU 32    /* the GLU's activation GELU (tanh form), not SiLU */

/* One fused case: weight and glu_up the two stacked halves of one [2n, k] buffer (rows [0, n) and
 * [n, 2n): a fused gate-up weight), norm_weight of its own dtype (unaligned or strided in some
 * cases: the kernels' general loads), the bias of another (strided in some cases), the residual
 * apart (a transposed view in some cases) or dst itself. Block weights run on both paths: the dot
 * path where it applies (with `tune`), the float path with tune.float_path (and, for F32 dst, the dot path's
 * results must differ from the float path's: x was rounded). */
static void run_fused_case(nu_device *d, nu_dtype wd, int fields, int64_t m, int64_t n, int64_t k, int variant,
                           const nu_matvec_tune *tune, uint64_t *seed)
{
    nu_dtype xd = floats[variant % 3], gd = floats[(variant + 1) % 3], dd = floats[(variant / 3 + 2) % 3];
    int64_t fs[2] = {2 * n, k}, xs[2] = {m, k}, gs[1] = {k}, ds[2] = {m, n};
    nt_tensor fused = nt_is_block(wd) ? nt_tensor_quantized(d, wd, 2, fs, (uint64_t)(variant % 2), -1, 1, seed)
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
    /* The bias: contiguous, or every third element of a [3n] tensor. */
    bool strided_b = variant % 2 == 0;
    int64_t bs[1] = {strided_b ? 3 * n : n};
    nt_tensor bb = nt_tensor_random(d, floats[(variant + 2) % 3], 1, bs, (uint64_t)(variant % 3), -1, 1, seed);
    nu_tensor bias = bb.t;
    if (strided_b) {
        bias.shape[0] = n;
        bias.strides[0] = 3;
    }
    float *bv = nt_tensor_values_new(&bb, &bias);
    nu_matvec_desc desc = {0};
    if (tune)
        desc.tune = *tune;
    if (fields & F_NORM)
        desc.norm_weight = &g, desc.norm_eps = 0.1f;
    if (fields & F_GLU)
        desc.glu_up = &up;
    if (fields & F_GELU)
        desc.glu = NU_GLU_GELU_TANH;
    if (fields & F_BIAS)
        desc.bias = &bias;
    if (fields & (F_RES | F_IN_PLACE))
        desc.residual = &res;
    fused_ref ref = {fused.values, fused.values + n * k, x.values, gv, rv, bv};
    char what[200];
    snprintf(what, sizeof what, "%s weight, %s x, %s dst,%s%s%s%s%s%s (%s norm_weight%s)", nu_dtype_name(wd),
             nu_dtype_name(xd), nu_dtype_name(dd), fields & F_NORM ? " norm" : "", fields & F_BIAS ? " bias" : "",
             fields & F_GLU ? " glu" : "", fields & F_GELU ? " (gelu)" : "", fields & F_RES ? " residual" : "",
             fields & F_IN_PLACE ? " residual in place" : "", nu_dtype_name(gd), strided_g ? " strided" : "");
    check_fused(d, &dst, &w, &x.t, &desc, &ref, what);
    if (nt_is_block(wd)) {
        bool dot = nt_matvec_dot_path(d, &w, m, fields & F_NORM, &desc.tune);
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
        desc.tune = (nu_matvec_tune){.float_path = true};
        char what2[220];
        snprintf(what2, sizeof what2, "%s, float path", what);
        check_fused(d, &dst, &w, &x.t, &desc, &ref, what2);
        int differ = 0;
        for (int64_t i = 0; i < m * n; i++)
            differ += dot_result[i] != dst.values[i];
        if (dot && dst.t.dtype == NU_DTYPE_F32 && differ < m * n / 2) /* F16 and BF16 dst may round both alike */
            fail_msg("%s: only %d of %lld results differ from the float path's: did the dot path run?", what, differ,
                     (long long)(m * n));
        free(dot_result);
    }
    free(gv);
    free(rv);
    free(bv);
    free(res_bytes);
    nt_tensor_free(&fused);
    nt_tensor_free(&x);
    nt_tensor_free(&gb);
    nt_tensor_free(&bb);
    nt_tensor_free(&dst);
    if (rb.values)
        nt_tensor_free(&rb);
}

/* Each field alone and the combinations a decoder layer uses, every weight dtype, M 1, 2 and 5,
 * odd N (and for float weights odd K, the general path, or K 260, the vector path with a tail);
 * the formats added after Q8_0 and Q4_0 take the fields in four combinations that hold each. */
static void fused_fields_alone_and_combined_for_every_dtype(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 11;
    const int combos[10] = {F_NORM, F_GLU, F_RES, F_IN_PLACE, F_BIAS, F_GLU | F_GELU, F_NORM | F_GLU, F_GLU | F_RES,
                            F_NORM | F_BIAS | F_GLU | F_GELU | F_IN_PLACE, F_NORM | F_GLU | F_IN_PLACE};
    const int few[4] = {F_BIAS | F_RES, F_NORM | F_GLU | F_GELU, F_NORM | F_BIAS | F_GLU | F_IN_PLACE, F_GLU};
    const int64_t ms[3] = {1, 2, 5};
    int variant = 0;
    for (int wd = 0; wd < WEIGHTS; wd++) {
        nu_dtype wt = every_weight(wd);
        bool block = nt_is_block(wt), all = wd < 5;
        for (int f = 0; f < (all ? 10 : 4); f++, variant++) {
            int64_t m = ms[variant % 3], n = variant % 2 ? 37 : 13;
            int64_t k = nu_dtype_block_elements(wt) == 256 ? 512 : block ? 288 : variant % 4 < 2 ? 263 : 260;
            run_fused_case(d, wt, all ? combos[f] : few[(f + wd) % 4], m, n, k, variant, NULL, &seed);
        }
    }
    nt_close(d);
}

/* The fused forms at larger shapes and other knobs: K 4096 (the dot path's many blocks; the float
 * vector path without a tail), M 8, the shared-memory reduction (no_subgroup), split row groups
 * on the dot path and glu_rows (the rows of a GLU) below rows. */
static void fused_at_other_shapes_and_knobs(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 12;
    int variant = 0;
    const int some[6] = {0, 1, 3, 4, 8, 10}; /* F32, F16, Q8_0, Q4_0, Q4_K, Q6_K */
    for (int i = 0; i < 6; i++, variant++) {
        nu_dtype wt = every_weight(some[i]);
        run_fused_case(d, wt, F_NORM | F_GLU | F_BIAS | F_RES, 8, 19, nt_is_block(wt) ? 1024 : 1000, variant, NULL,
                       &seed);
    }
    for (int i = 0; i < 6; i++, variant++)
        run_fused_case(d, every_weight(some[i]), F_NORM | F_IN_PLACE, 1, 67, 4096, variant, NULL, &seed);
    const nu_matvec_tune tunes[3] = {{.no_subgroup = true}, {.local = 64, .split = 2, .rows = 3, .unroll = 1},
                                     {.rows = 4, .unroll = 3, .glu_rows = 1}};
    for (int t = 0; t < 3; t++)
        for (int i = t; i < 6; i += 2, variant++) {
            nu_dtype wt = every_weight(some[i]);
            run_fused_case(d, wt, F_NORM | F_GLU | (t == 1 ? F_GELU : F_BIAS) | F_IN_PLACE, 3, 11,
                           nt_is_block(wt) ? 512 : 520, variant, &tunes[t], &seed);
        }
    nt_close(d);
}

/* A zero desc (and NULL) is nu_op_matvec: the same kernel, the same bits. */
static void fused_with_a_zero_desc_is_the_plain_product(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 13;
    nu_commands *c;
    for (int wd = 0; wd < WEIGHTS; wd++) {
        int64_t ws[2] = {21, 256}, xs[2] = {2, 256}, ds[2] = {2, 21};
        nu_dtype wt = every_weight(wd);
        nt_tensor w = nt_is_block(wt) ? nt_tensor_quantized(d, wt, 2, ws, 0, -1, 1, &seed)
                                      : nt_tensor_random(d, wt, 2, ws, 0, -1, 1, &seed);
        nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
        nt_tensor plain = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0), fused = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
        NT_OK(nu_op_matvec(c, &plain.t, &w.t, &x.t));
        NT_OK(nu_commands_commit(c));
        NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
        nu_commands_free(c);
        nt_tensor_download(&plain);
        fused_case fc = {&fused.t, &w.t, &x.t, {0}};
        nt_run(d, record_fused, &fc);
        nt_tensor_download(&fused);
        assert_memory_equal(plain.values, fused.values, sizeof(float) * 42);
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
    desc = (nu_matvec_desc){.norm_weight = &g_long.t, .norm_eps = 1e-5f};
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
    desc = (nu_matvec_desc){.glu_up = &w32.t};
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "glu_up is F32 but weight is F16 (they must match)");
    desc.glu_up = &w5.t;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "glu_up is 5x64 but weight is 4x64 (they must match)");
    desc.glu_up = &g.t;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "glu_up has rank 1; it must be 2");
    /* residual: shape, dtype, overlap of dst other than the same view. */
    desc = (nu_matvec_desc){.residual = &r_bad.t};
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
    desc = (nu_matvec_desc){.norm_weight = &g_in, .norm_eps = 1e-5f};
    REFUSED(nu_op_matvec_fused(c, &d_in, &w.t, &x.t, &desc), "dst overlaps norm_weight");
    nu_tensor w_in = nu_tensor_make(shared.t.buffer, 0, NU_DTYPE_F32, 2, ws);
    desc = (nu_matvec_desc){.glu_up = &w_in};
    REFUSED(nu_op_matvec_fused(c, &d_in, &w32.t, &x.t, &desc), "dst overlaps glu_up");
    /* bias: [n] float, not overlapping dst; glu: a nu_glu_activation, and only with glu_up. */
    desc = (nu_matvec_desc){.bias = &g.t};
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "bias has rank 1 and 64 elements; it must be [4]");
    desc.bias = &r.t;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "bias has rank 2");
    nu_tensor bi = nu_tensor_make(ri.t.buffer, 0, NU_DTYPE_I32, 1, (int64_t[1]){4});
    desc.bias = &bi;
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "I32");
    nu_tensor b_in = nu_tensor_make(shared.t.buffer, 8, NU_DTYPE_F32, 1, (int64_t[1]){4});
    desc.bias = &b_in;
    REFUSED(nu_op_matvec_fused(c, &d_in, &w.t, &x.t, &desc), "dst overlaps bias");
    desc = (nu_matvec_desc){.glu = NU_GLU_GELU_TANH};
    REFUSED(nu_op_matvec_fused(c, &dst.t, &w.t, &x.t, &desc), "glu_up is NULL");
    desc = (nu_matvec_desc){.glu_up = &w.t, .glu = NU_GLU_ACTIVATION_COUNT};
    REFUSED(nu_op_matvec_fused(c, &d_in, &w.t, &x.t, &desc), "not a nu_glu_activation");
    /* A field's own checks come with the op's name. */
    desc = (nu_matvec_desc){.norm_weight = &g_long.t, .norm_eps = 1e-5f};
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
        cmocka_unit_test(fused_fields_alone_and_combined_for_every_dtype),
        cmocka_unit_test(fused_at_other_shapes_and_knobs),
        cmocka_unit_test(fused_with_a_zero_desc_is_the_plain_product),
        cmocka_unit_test(fused_refuses_bad_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
