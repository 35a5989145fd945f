/* test_ops_matvec_soa.c: Q4_0_SOA (nuvec/tensor.h), Q4_0 repacked per row for decode: nu_op_copy's
 * repack (byte for byte against a CPU repack) and dequantization (bit for bit Q4_0's), and
 * nu_op_matvec / nu_op_matvec_fused on it (src/ops/matvec_soa.c, kernels/matvec/matvec_soa.glsl)
 * against a float64 CPU reference: M 1, 2, 5, K 256 and 4352, odd N, every x and dst dtype, the
 * fused norm, bias, glu (a stacked gate-up matrix's halves; SiLU or GELU) and residual (in place
 * too), unaligned and row-sliced weights, the knobs (desc->tune); and what is refused (K % 256,
 * column slices, matmul, gather).
 *
 * Tolerance (as test_ops_matvec.c's): the reference sums in double the products of the exact
 * weights with x as the kernel sees it. On the dot path (integer dot products; lavapipe has them)
 * x (times the norm weight) is rounded to 8 bits a 32-element block with matvec_dot.comp's rule,
 * which the reference repeats (ties within 1e-3 add |w| dx); the float path (tune.float_path, or
 * where x's rows do not fit in shared memory: lavapipe's 32 KiB with M 5 and K 4352) keeps the
 * strict bound, F32 summation: sum |x w| / 2^16. The norm's scale s (F32 sums of x^2) adds 1e-4
 * relative; glu propagates the bounds of both dots through act(g) u (|act'| <= 1.13). */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nuvec/trace.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

/* q (any Q4_0 view) repacked by nu_op_copy, `offset` bytes into a buffer of its own. */
static nt_repacked repack(nu_device *d, const nu_tensor *q, uint64_t offset)
{
    return nt_repack(d, q, NU_DTYPE_Q4_0_SOA, offset);
}

/* The layout of nuvec/tensor.h, written from its definition: Q4_0 view v of `bytes` (its
 * buffer's) as Q4_0_SOA rows into out. */
static void cpu_repack(const uint8_t *bytes, const nu_tensor *v, uint8_t *out)
{
    int64_t rows = v->shape[0], bpr = v->shape[1] / 32;
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = out + r * bpr * 18;
        for (int64_t b = 0; b < bpr; b++) {
            const uint8_t *blk = bytes + v->offset + (uint64_t)((r * v->strides[0]) / 32 + b) * 18;
            memcpy(row + 2 * b, blk, 2);
            memcpy(row + 2 * bpr + 16 * b, blk + 2, 16);
        }
    }
}

static void repack_is_exact_and_dequantizes_as_q4_0(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 11;
    /* rows, K, extra columns of the Q4_0 source (a column slice: strided rows), its pad blocks,
     * the SOA tensor's byte offset (2: not 16-byte aligned). F16 outputs of the even cases are
     * 16-byte aligned: cases 0 and 4 (and their row slices) take copy.comp's FAST 2 path (rows of
     * a multiple of 64, runs 4-byte aligned), the others its general groups of 8. */
    const struct {
        int64_t n, k, extra;
        uint64_t pad, offset;
    } cases[5] = {{3, 256, 0, 0, 0}, {5, 4352, 0, 1, 16}, {2, 512, 256, 3, 2}, {1, 256, 64, 0, 32}, {7, 4352, 0, 0, 48}};
    for (int c = 0; c < 5; c++) {
        int64_t n = cases[c].n, k = cases[c].k, qs[2] = {n, k + cases[c].extra};
        nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q4_0, 2, qs, cases[c].pad, -2, 2, &seed);
        nu_tensor qv;
        NT_OK(nu_tensor_slice(&q.t, 1, cases[c].extra, k, &qv)); /* the last k columns */
        nt_repacked s = repack(d, &qv, cases[c].offset);
        uint8_t *want = malloc((size_t)(n * k / 32 * 18));
        cpu_repack(q.bytes, &qv, want);
        for (int64_t i = 0; i < n * k / 32 * 18; i++)
            if (s.bytes[cases[c].offset + i] != want[i])
                fail_msg("case %d (%lldx%lld): byte %lld of the repack is 0x%02x, expected 0x%02x", c, (long long)n,
                         (long long)k, (long long)i, s.bytes[cases[c].offset + i], want[i]);
        for (uint64_t i = 0; i < cases[c].offset; i++) /* nothing before the tensor is written */
            assert_int_equal(s.bytes[i], 0xff);
        assert_int_equal(s.bytes[cases[c].offset + n * k / 32 * 18], 0xff);
        /* Dequantized: bit for bit Q4_0's, to each float dtype, of the whole tensor and of a slice
         * of its rows (the scales' and runs' offsets of a row). */
        char label[32];
        snprintf(label, sizeof label, "case %d", c);
        nt_expect_same_dequantization(d, &s, &qv, 0, (uint64_t)(c % 2), label);
        nt_expect_same_dequantization(d, &s, &qv, n > 1 ? 1 : 0, (uint64_t)(c % 2), label);
        free(want);
        nt_repacked_free(&s);
        nt_tensor_free(&q);
    }
    nt_close(d);
}

/* ---- products ------------------------------------------------------------------------------ */

typedef struct mv_case {
    const nu_tensor *dst, *w, *x;
    nu_matvec_desc desc;
    bool fused;
} mv_case;

static nu_status record_matvec(nu_commands *c, void *arg)
{
    mv_case *k = arg;
    return k->fused ? nu_op_matvec_fused(c, k->dst, k->w, k->x, &k->desc) : nu_op_matvec(c, k->dst, k->w, k->x);
}

/* Whether the SOA kernel takes its dot path (src/ops/matvec_soa.c: the device's integer dot products,
 * subgroup arithmetic and shuffles, subgroups of a multiple of 8, and x's rows in shared memory: 40
 * bytes a block and row, K / 32 rounded up to 64, plus the norm's sums (local / 8 * m floats) and a
 * few more: where all m rows do not fit but one does, the product runs over groups of rows that do,
 * each on the dot path). */
static bool soa_dot(nu_device *d, int64_t m, int64_t k, bool norm, const nu_matvec_tune *tune)
{
    m = 1;
    const nu_device_info *in = nu_device_get_info(d);
    uint64_t cap = (uint64_t)((k / 32 + 63) / 64 * 64), local = tune->local ? tune->local : 1024;
    uint64_t shared = 40ull * (uint64_t)m * cap + 4ull * (1 + (norm ? local / 8 * (uint64_t)m : 1) + (uint64_t)m);
    return in->features[NU_FEATURE_INTEGER_DOT_PRODUCT] && (in->subgroup_operations & NU_SUBGROUP_ARITHMETIC) &&
           (in->subgroup_operations & NU_SUBGROUP_SHUFFLE) && in->subgroup_size % 8 == 0 &&
           shared <= in->max_shared_memory && !tune->float_path;
}

/* sum_e w[j, e] v[i, e] for rows i < m of v and j < n of w (exact values, row-major, k columns),
 * with v rounded as the dot path rounds it where `dot`; *tol the bound on the kernel's error. */
static void reference(const float *w, const float *v, int64_t m, int64_t n, int64_t k, bool dot, double *out,
                      double *tol)
{
    double *vh = malloc((size_t)(m * k) * sizeof *vh), *tie = calloc((size_t)(m * k), sizeof *tie);
    assert_true(vh && tie);
    for (int64_t b = 0; b < m * k / 32; b++) {
        float amax = 0;
        for (int64_t e = 32 * b; e < 32 * b + 32; e++)
            amax = fmaxf(amax, fabsf(v[e]));
        float inv = amax > 0 ? 127.0f / amax : 0.0f, dx = amax / 127.0f;
        for (int64_t e = 32 * b; e < 32 * b + 32; e++) {
            if (!dot) {
                vh[e] = v[e];
                continue;
            }
            float t = v[e] * inv;
            vh[e] = (double)dx * (double)nearbyintf(t);
            tie[e] = fabsf(fabsf(t - truncf(t)) - 0.5f) < 1e-3f ? dx : 0.0;
        }
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, sabs = 0, round = 0;
            for (int64_t e = 0; e < k; e++) {
                double p = vh[i * k + e] * (double)w[j * k + e];
                s += p;
                sabs += fabs(p);
                round += fabs((double)w[j * k + e]) * tie[i * k + e];
            }
            out[i * n + j] = s;
            tol[i * n + j] = sabs / 65536.0 + round;
        }
    free(vh);
    free(tie);
}

typedef struct soa_case {
    int64_t m, n, k;
    nu_dtype xdt, ddt;
    bool norm, glu, resid, in_place;
    uint64_t offset; /* the SOA tensor's byte offset in its buffer (2: the unaligned loads) */
    int64_t row0;    /* the weight a slice of rows from row0 of the repacked matrix */
    bool bias, gelu; /* a bias (a strided BF16 view); GELU as the GLU's activation */
    nu_matvec_tune tune;
} soa_case;

static double act(bool gelu, double v)
{
    return gelu ? 0.5 * v * (1.0 + tanh(0.79788456080286536 * (v + 0.044715 * v * v * v))) : v / (1.0 + exp(-v));
}

/* x (times g where norm, in F32 as the kernel multiplies them) into v, and each row's 1 / RMS(x)
 * (double; 1 without the norm) into s. */
static void normed_rows(const float *x, const float *g, bool norm, float eps, int64_t m, int64_t k, float *v, double *s)
{
    for (int64_t i = 0; i < m; i++) {
        double ss = 0;
        for (int64_t e = 0; e < k; e++) {
            float xe = x[i * k + e];
            ss += (double)xe * xe;
            v[i * k + e] = norm ? xe * g[e] : xe;
        }
        s[i] = norm ? 1.0 / sqrt(ss / (double)k + (double)eps) : 1.0;
    }
}

/* What the fused product adds around its dots (NULL/false: absent). */
typedef struct fused_parts {
    bool norm, glu, gelu;
    const float *bias;  /* [n] */
    const float *resid; /* [m, n] */
} fused_parts;

/* dst (got, m x n, stored as ddt) against act(s gate + bias) * (s up) + residual, from the
 * reference's gate dots and bounds (gv, gt) and up ones (uv, ut; with glu), s the rows' norm scales;
 * fails naming label, the shape and the path. */
static void expect_fused(const char *label, const float *got, nu_dtype ddt, int64_t m, int64_t n, int64_t k, bool dot,
                         const double *s, const double *gv, const double *gt, const double *uv, const double *ut,
                         const fused_parts *f)
{
    float rel = nt_dtype_tolerance(ddt);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t o = i * n + j;
            double sn = f->norm ? 1e-4 : 0;
            double a = gv[o] * s[i], at = gt[o] * s[i] + fabs(a) * sn;
            if (f->bias) {
                a += f->bias[j];
                at += fabs(a) * 2.4e-7;
            }
            double want = a, tol = at;
            if (f->glu) {
                double u = uv[o] * s[i], utol = ut[o] * s[i] + fabs(u) * sn;
                want = act(f->gelu, a) * u;
                tol = 1.13 * at * (fabs(u) + utol) + fabs(act(f->gelu, a)) * utol + 1e-6 * fabs(want);
            }
            if (f->resid) {
                want += f->resid[o];
                tol += fabs(want) * 2.4e-7;
            }
            float wr = nt_round_to(ddt, (float)want), g = got[o];
            tol += rel * fabs((double)wr) + 1e-30;
            if (!(fabs((double)g - (double)wr) <= tol))
                fail_msg("%s: dst[%lld, %lld] is %.9g, expected %.9g (tolerance %.3g; m %lld n %lld k %lld, %s path)",
                         label, (long long)i, (long long)j, (double)g, (double)wr, tol, (long long)m, (long long)n,
                         (long long)k, dot ? "dot" : "float");
        }
}

/* Runs one product (fused where the case says) and checks it against the reference; returns the
 * results (malloc) for the caller's comparisons when `keep`. */
static float *run_case(nu_device *d, const soa_case *sc, uint64_t *seed, const char *label, bool keep)
{
    int64_t m = sc->m, n = sc->n, k = sc->k, rows = sc->row0 + (sc->glu ? 2 * n : n);
    int64_t qs[2] = {rows, k}, xs[2] = {m, k}, ds[2] = {m, n}, gs[1] = {k};
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q4_0, 2, qs, 1, -1, 1, seed);
    nt_repacked s = repack(d, &q.t, sc->offset);
    nu_tensor w, up;
    NT_OK(nu_tensor_slice(&s.t, 0, sc->row0, n, &w));
    up = w;
    if (sc->glu)
        NT_OK(nu_tensor_slice(&s.t, 0, sc->row0 + n, n, &up));
    nt_tensor x = nt_tensor_random(d, sc->xdt, 2, xs, (uint64_t)(sc->m % 2), -3, 3, seed);
    nt_tensor g = nt_tensor_random(d, sc->xdt == NU_DTYPE_F32 ? NU_DTYPE_F16 : NU_DTYPE_F32, 1, gs, 1, 0.25f, 2, seed);
    /* Residual: dst itself (its values before), or a column slice of a wider F16 tensor. */
    int64_t rs[2] = {m, n + 3};
    nt_tensor dst = sc->in_place ? nt_tensor_random(d, sc->ddt, 2, ds, 0, -4, 4, seed) : nt_tensor_output(d, sc->ddt, 2, ds, 0);
    nt_tensor rw = nt_tensor_random(d, NU_DTYPE_F16, 2, rs, 0, -4, 4, seed);
    nu_tensor rv;
    NT_OK(nu_tensor_slice(&rw.t, 1, 2, n, &rv));
    float *resid = sc->in_place ? malloc((size_t)(m * n) * sizeof *resid) : nt_tensor_values_new(&rw, &rv);
    if (sc->in_place)
        memcpy(resid, dst.values, (size_t)(m * n) * sizeof *resid);
    /* The bias: every other element of a BF16 [2n]. */
    int64_t bs[1] = {2 * n};
    nt_tensor bb = nt_tensor_random(d, NU_DTYPE_BF16, 1, bs, 1, -1, 1, seed);
    nu_tensor bias = bb.t;
    bias.shape[0] = n;
    bias.strides[0] = 2;
    float *bv = nt_tensor_values_new(&bb, &bias);
    const float eps = 1e-5f;
    mv_case mc = {&dst.t, &w, &x.t,
                  {.norm_weight = sc->norm ? &g.t : NULL, .norm_eps = eps, .glu_up = sc->glu ? &up : NULL,
                   .residual = sc->resid ? (sc->in_place ? &dst.t : &rv) : NULL, .bias = sc->bias ? &bias : NULL,
                   .glu = sc->gelu ? NU_GLU_GELU_TANH : NU_GLU_SILU, .tune = sc->tune},
                  true};
    nt_run(d, record_matvec, &mc);
    nt_tensor_download(&dst);

    /* The reference: v = x * g (F32, as the kernel), s = 1 / RMS(x) in double. */
    float *v = malloc((size_t)(m * k) * sizeof *v);
    double *smul = malloc((size_t)m * sizeof *smul);
    normed_rows(x.values, g.values, sc->norm, eps, m, k, v, smul);
    bool dot = soa_dot(d, m, k, sc->norm, &sc->tune);
    double *gv = malloc((size_t)(m * n) * sizeof *gv), *gt = malloc((size_t)(m * n) * sizeof *gt);
    double *uv = malloc((size_t)(m * n) * sizeof *uv), *ut = malloc((size_t)(m * n) * sizeof *ut);
    reference(q.values + sc->row0 * k, v, m, n, k, dot, gv, gt);
    if (sc->glu)
        reference(q.values + (sc->row0 + n) * k, v, m, n, k, dot, uv, ut);
    fused_parts parts = {sc->norm, sc->glu, sc->gelu, sc->bias ? bv : NULL, sc->resid ? resid : NULL};
    expect_fused(label, dst.values, sc->ddt, m, n, k, dot, smul, gv, gt, uv, ut, &parts);
    float *kept = NULL;
    if (keep) {
        kept = malloc((size_t)(m * n) * sizeof *kept);
        memcpy(kept, dst.values, (size_t)(m * n) * sizeof *kept);
    }
    /* The plain product: Q4_0's (nu_op_matvec on the tensor SOA was made from) within its bound. */
    float rel = nt_dtype_tolerance(sc->ddt);
    if (!sc->norm && !sc->glu && !sc->resid && !sc->bias) {
        nu_tensor qw;
        NT_OK(nu_tensor_slice(&q.t, 0, sc->row0, n, &qw));
        nt_tensor d4 = nt_tensor_output(d, sc->ddt, 2, ds, 0);
        mv_case m4 = {&d4.t, &qw, &x.t, {0}, false};
        nt_run(d, record_matvec, &m4);
        nt_tensor_download(&d4);
        reference(q.values + sc->row0 * k, v, m, n, k, nt_matvec_dot_path(d, &qw, m, false, NULL), gv, gt);
        for (int64_t o = 0; o < m * n; o++) {
            float wr = nt_round_to(sc->ddt, (float)gv[o]);
            if (!(fabs((double)d4.values[o] - wr) <= gt[o] + rel * fabs((double)wr) + 1e-30))
                fail_msg("%s: the Q4_0 product's element %lld is %.9g, expected %.9g", label, (long long)o,
                         (double)d4.values[o], (double)wr);
        }
        nt_tensor_free(&d4);
    }
    free(v);
    free(smul);
    free(gv);
    free(gt);
    free(uv);
    free(ut);
    free(resid);
    free(bv);
    nt_tensor_free(&bb);
    nt_tensor_free(&q);
    nt_repacked_free(&s);
    nt_tensor_free(&x);
    nt_tensor_free(&g);
    nt_tensor_free(&dst);
    nt_tensor_free(&rw);
    return kept;
}

/* Plain products at M 1, 2, 5, K 256 and 4352, odd N, each x and dst dtype, aligned and unaligned
 * weights, a slice of rows; on the dot path where it applies (lavapipe: all but M 5 with K
 * 4352), checked (F32 dst) to differ from the float path's results (the dot path really ran),
 * whose results meet the strict bound. */
static void products_match_the_reference_and_q4_0(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 12;
    const int64_t ms[3] = {1, 2, 5}, ks[2] = {256, 4352}, ns[3] = {37, 5, 129};
    int i = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++, i++) {
            nu_dtype ddt = i % 2 == 0 ? NU_DTYPE_F32 : floats[1 + (i / 2) % 2];
            soa_case sc = {ms[a], ns[(a + b) % 3], ks[b], floats[i % 3], ddt, false, false, false,
                           false, i % 3 == 1 ? 2 : 16 * (uint64_t)(i % 2), i % 4 == 3 ? 3 : 0, false, false,
                           {0}};
            char label[160];
            snprintf(label, sizeof label, "%s dst = %s x * Q4_0_SOA^T, offset %llu, row0 %lld", nu_dtype_name(sc.ddt),
                     nu_dtype_name(sc.xdt), (unsigned long long)sc.offset, (long long)sc.row0);
            bool dot = soa_dot(d, sc.m, sc.k, false, &sc.tune);
            uint64_t s0 = seed;
            float *dot_res = run_case(d, &sc, &seed, label, true);
            sc.tune.float_path = true;
            seed = s0; /* the same tensors */
            float *flt = run_case(d, &sc, &seed, label, true);
            int64_t differ = 0;
            for (int64_t o = 0; o < sc.m * sc.n; o++)
                differ += dot_res[o] != flt[o];
            if (dot && sc.ddt == NU_DTYPE_F32 && differ < sc.m * sc.n / 2)
                fail_msg("%s: only %lld of %lld results differ from the float path's: did the dot path run?", label,
                         (long long)differ, (long long)(sc.m * sc.n));
            free(dot_res);
            free(flt);
        }
    nt_close(d);
}

/* The fused forms against the CPU: norm, glu (gate and up the halves of one repacked matrix),
 * residual (a strided view, or dst itself in place), all three; both paths. */
static void fused_forms_match_the_reference(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 13;
    const struct {
        int64_t m, n, k;
        bool norm, glu, resid, in_place, bias, gelu;
    } cases[10] = {
        {1, 37, 4352, true, false, false, false, false, false}, {2, 5, 256, true, false, false, false, false, false},
        {1, 29, 256, false, true, false, false, false, false},  {5, 7, 4352, false, true, false, false, false, true},
        {2, 33, 256, false, false, true, true, false, false},   {1, 9, 4352, false, false, true, false, false, false},
        {1, 31, 4352, true, true, true, true, false, false},    {5, 3, 256, true, true, true, false, false, false},
        {2, 19, 512, false, false, false, false, true, false},  {1, 13, 512, true, true, true, false, true, true},
    };
    for (int dotp = 0; dotp < 2; dotp++)
        for (int c = 0; c < 10; c++) {
            soa_case sc = {cases[c].m, cases[c].n, cases[c].k, floats[c % 3], floats[(c + dotp) % 2],
                           cases[c].norm, cases[c].glu, cases[c].resid, cases[c].in_place, c % 3 == 2 ? 2 : 0,
                           c % 2, cases[c].bias, cases[c].gelu, {.float_path = !dotp}};
            char label[160];
            snprintf(label, sizeof label, "fused%s%s%s%s%s%s, %s x, %s dst", sc.norm ? " norm" : "",
                     sc.bias ? " bias" : "", sc.glu ? " glu" : "", sc.gelu ? " (gelu)" : "", sc.resid ? " residual" : "",
                     sc.in_place ? " (in place)" : "", nu_dtype_name(sc.xdt), nu_dtype_name(sc.ddt));
            run_case(d, &sc, &seed, label, false);
        }
    nt_close(d);
}

/* More row groups than the grid holds (groups=2), and the knobs: threads, rows a subgroup (3: not
 * dividing N), runs in flight, subgroups a row group (split 2 and 4), no prefetch, on both paths. */
static void knobs_and_large_n(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 14;
    const nu_matvec_tune tunes[7] = {{.groups = 2, .split = 1}, {.rows = 3, .unroll = 1}, {.split = 2, .local = 64},
                                     {.split = 4, .unroll = 3, .rows = 2}, {.local = 1024, .groups = 65535},
                                     {.float_path = true, .rows = 2, .split = 2, .local = 128},
                                     {.prefetch = true, .groups = 3}};
    const char *names[7] = {"groups 2 split 1", "rows 3 unroll 1", "split 2 local 64", "split 4 unroll 3 rows 2",
                            "local 1024 groups 65535", "float path rows 2 split 2 local 128", "prefetch groups 3"};
    for (int i = 0; i < 7; i++) {
        soa_case sc = {1 + i % 2, 301, i % 2 ? 4352 : 512, NU_DTYPE_F32, NU_DTYPE_F32, i % 3 == 0, i == 4, i == 2,
                       false, 0, 0, i == 6, false, tunes[i]};
        char label[96];
        snprintf(label, sizeof label, "tune %s", names[i]);
        run_case(d, &sc, &seed, label, false);
    }
    nt_close(d);
}

static void refuses_what_it_cannot_do(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 15;
    int64_t qs[2] = {4, 512}, q288[2] = {2, 288}, xs[2] = {1, 512}, ds[2] = {1, 4}, ds2[2] = {1, 2}, gs[1] = {512};
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q4_0, 2, qs, 0, -1, 1, &seed);
    nt_tensor q2 = nt_tensor_quantized(d, NU_DTYPE_Q4_0, 2, q288, 0, -1, 1, &seed);
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
    nt_tensor g = nt_tensor_random(d, NU_DTYPE_F32, 1, gs, 0, -1, 1, &seed);
    nt_tensor f = nt_tensor_random(d, NU_DTYPE_F32, 2, qs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    nt_tensor dst2 = nt_tensor_output(d, NU_DTYPE_F32, 2, ds2, 0);
    nt_repacked s = repack(d, &q.t, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    /* K = 288: not a multiple of 256 (the copy names K). */
    nu_tensor s288 = nu_tensor_make(s.t.buffer, 0, NU_DTYPE_Q4_0_SOA, 2, q288);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &s288, &q2.t));
    assert_non_null(strstr(nu_error_message(NULL), "K is 288"));
    /* Made from Q4_0 only; not to integers; a rank other than 2. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &s.t, &f.t));
    assert_non_null(strstr(nu_error_message(NULL), "from Q4_0 only"));
    int64_t r3[3] = {2, 2, 512};
    nu_tensor s3 = nu_tensor_make(s.t.buffer, 0, NU_DTYPE_Q4_0_SOA, 3, r3);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &f.t, &s3));
    assert_non_null(strstr(nu_error_message(NULL), "rank 2"));
    /* A column slice: refused by every op (the view is not whole rows). */
    nu_tensor cols;
    NT_OK(nu_tensor_slice(&s.t, 1, 256, 256, &cols));
    int64_t xs256[2] = {1, 256};
    nu_tensor x256 = nu_tensor_make(x.t.buffer, 0, NU_DTYPE_F32, 2, xs256);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &cols, &x256));
    assert_non_null(strstr(nu_error_message(NULL), "columns cannot be sliced"));
    /* matmul and gather keep Q4_0. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matmul(c, &dst.t, &x.t, &s.t, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "Q4_0_SOA, which the products read only on the matrix units"));
    int32_t ids[1] = {1};
    nt_tensor id = nt_tensor_i32(d, ids, 1, 0, 1);
    int64_t gd[2] = {1, 512};
    nt_tensor gdst = nt_tensor_output(d, NU_DTYPE_F32, 2, gd, 0);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &gdst.t, &s.t, &id.t));
    assert_non_null(strstr(nu_error_message(NULL), "nu_op_gather takes the Q4_0 tensor"));
    /* The fused forms' arguments. */
    nu_matvec_desc desc = {.norm_weight = &g.t, .norm_eps = 0.0f};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &dst.t, &s.t, &x.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "norm_eps"));
    nu_tensor half;
    NT_OK(nu_tensor_slice(&s.t, 0, 0, 2, &half));
    desc = (nu_matvec_desc){.glu_up = &half};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &dst.t, &s.t, &x.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "(they must match)"));
    desc = (nu_matvec_desc){.glu_up = &q.t}; /* a Q4_0 up with a Q4_0_SOA gate */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &dst.t, &s.t, &x.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "glu_up"));
    nu_tensor over = nu_tensor_make(dst.t.buffer, 4, NU_DTYPE_F32, 2, ds2); /* overlaps dst, not its view */
    desc = (nu_matvec_desc){.residual = &dst.t};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &dst2.t, &half, &x.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "residual is"));
    nu_tensor d2 = nu_tensor_make(dst.t.buffer, 0, NU_DTYPE_F32, 2, ds2);
    desc = (nu_matvec_desc){.residual = &over};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &d2, &half, &x.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "dst overlaps residual"));
    desc = (nu_matvec_desc){.bias = &g.t}; /* [512], not [4] */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &dst.t, &s.t, &x.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "bias has rank 1 and 512 elements; it must be [4]"));
    desc = (nu_matvec_desc){.glu = NU_GLU_GELU_TANH};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &dst.t, &s.t, &x.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "glu_up is NULL"));
    /* A bad knob. */
    desc = (nu_matvec_desc){.tune = {.unroll = 9}};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &dst.t, &s.t, &x.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "tune.unroll is 9"));
    nu_commands_free(c);
    nt_repacked_free(&s);
    nt_tensor_free(&q);
    nt_tensor_free(&q2);
    nt_tensor_free(&x);
    nt_tensor_free(&g);
    nt_tensor_free(&f);
    nt_tensor_free(&dst);
    nt_tensor_free(&dst2);
    nt_tensor_free(&id);
    nt_tensor_free(&gdst);
    nt_close(d);
}

/* nu_op_matmul reads Q4_0_SOA on the matrix units (kernels/matmul/matmul_coopmat.comp: a batched
 * decode step's products against the repacked matrices): F16 a times the SOA tensor gives exactly
 * what the same product against the Q4_0 tensor it was made from gives (the kernel decodes both
 * into the same F16 tiles), for batched decode's few rows and a prefill's many, whole tiles and
 * edges, aligned and unaligned tensors. Skipped, saying so, without matrix units (lavapipe),
 * where the refusal is checked instead (refuses_what_it_cannot_do). */
/* Q4_K, Q5_K and Q6_K weights as GGUF stores them, on the same kernel (matvec_soa.glsl's WFMT 1 to
 * 3: each super-block's header, Q5_K's fifth bits, and eight 16-byte runs; Q6_K's ql runs, qh
 * chunks and scales, at 2-byte boundaries: 210-byte super-blocks). */
typedef struct q4k_case {
    nu_dtype w;      /* Q4_K, Q5_K or Q6_K */
    int64_t m, n, k;
    nu_dtype xdt, ddt;
    bool norm, glu, resid, bias, gelu;
    bool unaligned;  /* the matrix 2 bytes into its buffer (the kernel's half loads) */
    bool columns;    /* the weights a column view: k of 2k + 256 columns, from column 256 */
    int64_t row0;    /* ... and a slice of rows from row0 (gate, then up, with glu) */
    bool float_path;
    const nu_matvec_tune *tune; /* knobs (NULL: the defaults; float_path as above either way) */
} q4k_case;

/* Whether a K format's product takes the dot path: one row of x in shared memory at 48 bytes a block. */
static bool q4k_dot(nu_device *d, int64_t k, bool norm, bool float_path)
{
    const nu_device_info *in = nu_device_get_info(d);
    uint64_t cap = (uint64_t)((k / 32 + 63) / 64 * 64);
    uint64_t shared = 48ull * cap + 4ull * (1 + (norm ? 1024 / 8 : 1) + 1);
    return in->features[NU_FEATURE_INTEGER_DOT_PRODUCT] && (in->subgroup_operations & NU_SUBGROUP_SHUFFLE) &&
           in->subgroup_size % 8 == 0 && shared <= in->max_shared_memory && !float_path;
}

static void run_q4k(nu_device *d, const q4k_case *c, uint64_t *seed, const char *label)
{
    int64_t m = c->m, n = c->n, k = c->k, width = c->columns ? 2 * k + 256 : k, col0 = c->columns ? 256 : 0;
    int64_t rows = c->row0 + (c->glu ? 2 * n : n);
    int64_t qs[2] = {rows, width}, xs[2] = {m, k}, ds[2] = {m, n}, gs[1] = {k}, bs[1] = {n};
    nt_tensor q = nt_tensor_quantized(d, c->w, 2, qs, 0, -1, 1, seed);
    nu_tensor whole = q.t, cols, w, up;
    nu_buffer *moved = NULL;
    if (c->unaligned) {
        NT_OK(nu_buffer_new(d, q.size + 2, NU_STORAGE_SHARED, &moved));
        NT_OK(nu_buffer_write(moved, 2, q.bytes, q.size));
        whole.buffer = moved;
        whole.offset += 2;
    }
    NT_OK(nu_tensor_slice(&whole, 1, col0, k, &cols));
    NT_OK(nu_tensor_slice(&cols, 0, c->row0, n, &w));
    up = w;
    if (c->glu)
        NT_OK(nu_tensor_slice(&cols, 0, c->row0 + n, n, &up));
    nt_tensor x = nt_tensor_random(d, c->xdt, 2, xs, 0, -3, 3, seed);
    nt_tensor g = nt_tensor_random(d, NU_DTYPE_F32, 1, gs, 0, 0.25f, 2, seed);
    nt_tensor r = nt_tensor_random(d, NU_DTYPE_F16, 2, ds, 0, -4, 4, seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F32, 1, bs, 0, -1, 1, seed);
    nt_tensor dst = nt_tensor_output(d, c->ddt, 2, ds, 0);
    const float eps = 1e-5f;
    mv_case mc = {&dst.t, &w, &x.t,
                  {.norm_weight = c->norm ? &g.t : NULL, .norm_eps = eps, .glu_up = c->glu ? &up : NULL,
                   .residual = c->resid ? &r.t : NULL, .bias = c->bias ? &b.t : NULL,
                   .glu = c->gelu ? NU_GLU_GELU_TANH : NU_GLU_SILU,
                   .tune = c->tune ? *c->tune : (nu_matvec_tune){.float_path = c->float_path}},
                  true};
    mc.desc.tune.float_path = mc.desc.tune.float_path || c->float_path;
    char path[512];
    snprintf(path, sizeof path, "%s/nuvec-q4k-%d.json", nt_tmp_dir(), (int)getpid());
    NT_OK(nu_trace_start(d, path));
    nt_run(d, record_matvec, &mc);
    NT_OK(nu_trace_stop(d));
    if (!nt_trace_has(path, "matvec_soa"))
        fail_msg("%s: the product did not run on matvec_soa's kernel", label);
    nt_tensor_download(&dst);

    /* The reference, as run_case's: the weights' exact values, x (times g) as the kernel rounds it. */
    float *wv = malloc((size_t)(2 * n * k) * sizeof *wv), *v = malloc((size_t)(m * k) * sizeof *v);
    double *smul = malloc((size_t)m * sizeof *smul), *out = malloc((size_t)(2 * m * n) * sizeof *out),
           *tol = malloc((size_t)(2 * m * n) * sizeof *tol);
    assert_true(wv && v && smul && out && tol);
    for (int64_t j = 0; j < (c->glu ? 2 : 1) * n; j++)
        memcpy(wv + j * k, q.values + (c->row0 + j) * width + col0, (size_t)k * sizeof *wv);
    normed_rows(x.values, g.values, c->norm, eps, m, k, v, smul);
    bool dot = q4k_dot(d, k, c->norm, c->float_path);
    reference(wv, v, m, n, k, dot, out, tol);
    if (c->glu)
        reference(wv + n * k, v, m, n, k, dot, out + m * n, tol + m * n);
    fused_parts parts = {c->norm, c->glu, c->gelu, c->bias ? b.values : NULL, c->resid ? r.values : NULL};
    expect_fused(label, dst.values, c->ddt, m, n, k, dot, smul, out, tol, out + m * n, tol + m * n, &parts);
    free(wv);
    free(v);
    free(smul);
    free(out);
    free(tol);
    if (moved)
        NT_OK(nu_buffer_free(moved));
    nt_tensor_free(&q);
    nt_tensor_free(&x);
    nt_tensor_free(&g);
    nt_tensor_free(&r);
    nt_tensor_free(&b);
    nt_tensor_free(&dst);
}

/* Q4_K, Q5_K and Q6_K products on Q4_0_SOA's kernel against the reference: M 1, 2, 5, K 256, 512,
 * 4352 and 11008 (43 super-blocks: Q6_K's rows then start at 2 mod 4 bytes, and 2 mod 16 in a
 * column view), odd N, every x and dst dtype, aligned and unaligned matrices, row and column
 * views, the fused norm, bias, glu (SiLU, GELU) and residual; on both paths; each traced to that
 * kernel; Q4_K and Q5_K by pairs of runs and one at a time, under the knobs. With tune.generic_k_formats the product takes the generic paths again (traced too). */
static void k_super_blocks_as_runs(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const nu_device_info *in = nu_device_get_info(d);
    if (!(in->subgroup_operations & NU_SUBGROUP_ARITHMETIC) || in->subgroup_size < 8) {
        nt_close(d);
        skip(); /* the generic paths take the K formats there (test_ops_matvec.c checks them) */
    }
    uint64_t seed = 41;
    const struct {
        int64_t m, n, k;
        bool norm, glu, resid, bias, gelu, unaligned, columns;
        int64_t row0;
    } cases[15] = {
        {1, 37, 256, false, false, false, false, false, false, false, 0},
        {2, 5, 4352, false, false, false, false, false, true, false, 3},
        {5, 129, 512, false, false, false, false, false, false, true, 0},
        {1, 33, 4352, false, false, false, false, false, false, true, 2},
        {1, 37, 4352, true, false, false, false, false, false, false, 0},
        {2, 29, 256, false, true, false, false, false, true, false, 0},
        {5, 7, 4352, false, true, false, false, true, false, false, 1},
        {2, 33, 512, false, false, true, false, false, false, true, 0},
        {1, 31, 4352, true, true, true, false, false, false, false, 0},
        {5, 3, 256, true, true, true, true, true, true, true, 1},
        {2, 19, 512, false, false, false, true, false, false, false, 0},
        {1, 13, 512, true, true, true, true, true, false, false, 0},
        {1, 21, 11008, false, false, false, false, false, false, true, 1},
        {2, 9, 11008, true, false, true, false, false, true, false, 0},
        {1, 7, 11008, false, true, false, true, true, false, true, 2},
    };
    const nu_dtype ws[3] = {NU_DTYPE_Q4_K, NU_DTYPE_Q5_K, NU_DTYPE_Q6_K};
    for (int wi = 0; wi < 3; wi++)
    for (int fp = 0; fp < 2; fp++)
        for (int i = 0; i < 15; i++) {
            q4k_case c = {ws[wi], cases[i].m, cases[i].n, cases[i].k, floats[i % 3], floats[(i + fp) % 2 ? 0 : 1 + i % 2],
                          cases[i].norm, cases[i].glu, cases[i].resid, cases[i].bias, cases[i].gelu,
                          cases[i].unaligned, cases[i].columns, cases[i].row0, fp == 1, NULL};
            char label[192];
            snprintf(label, sizeof label, "%s dst = %s x * %s^T (m %lld n %lld k %lld%s%s%s%s%s%s%s, %s path)",
                     nu_dtype_name(c.ddt), nu_dtype_name(c.xdt), nu_dtype_name(c.w), (long long)c.m, (long long)c.n, (long long)c.k,
                     c.norm ? ", norm" : "", c.bias ? ", bias" : "", c.glu ? (c.gelu ? ", glu gelu" : ", glu") : "",
                     c.resid ? ", residual" : "", c.unaligned ? ", unaligned" : "", c.columns ? ", columns" : "",
                     c.row0 ? ", rows from row0" : "", fp ? "float" : "dot");
            run_q4k(d, &c, &seed, label);
        }
    /* The knobs (rows not dividing N, runs in flight, split row groups, prefetch, fewer
     * workgroups than row groups) on Q6_K's loads, at K 11008 (rows at 2 mod 4 bytes). */
    const nu_matvec_tune tunes[4] = {{.rows = 3, .unroll = 3}, {.split = 2, .local = 64},
                                     {.split = 4, .rows = 2, .unroll = 1, .prefetch = true}, {.groups = 2, .prefetch = true}};
    for (int t = 0; t < 4; t++) {
        q4k_case c = {NU_DTYPE_Q6_K, 1 + t % 2, 301, t % 2 ? 11008 : 4352, NU_DTYPE_F32, NU_DTYPE_F32, t == 1, t == 2,
                      t == 3, false, false, t == 0, t == 3, t, false, &tunes[t]};
        char label[96];
        snprintf(label, sizeof label, "Q6_K with knobs %d (m %lld k %lld)", t, (long long)c.m, (long long)c.k);
        run_q4k(d, &c, &seed, label);
    }
    /* Q4_K and Q5_K by pairs of runs (the default) and one run at a time (tune.k_single_runs),
     * under the knobs, on both paths, at K 11008 (43 super-blocks: a row's last pair alone in its
     * lane) and 4352. */
    const nu_matvec_tune ktunes[5] = {{.rows = 3, .unroll = 3}, {.split = 4, .rows = 2, .unroll = 1, .prefetch = true},
                                      {.groups = 2, .glu_rows = 2}, {.k_single_runs = true, .rows = 2, .unroll = 3},
                                      {.k_single_runs = true, .split = 2, .local = 64, .prefetch = true}};
    for (int wi = 0; wi < 2; wi++)
        for (int t = 0; t < 5; t++)
            for (int fp = 0; fp < 2; fp++) {
                q4k_case c = {ws[wi], 1 + (t + fp) % 3, 67, (t + fp) % 2 ? 11008 : 4352, NU_DTYPE_F32, NU_DTYPE_F32,
                              t % 2 == 0, t >= 2, t == 1, t == 4, false, t == 3, t == 2, t % 3, fp == 1, &ktunes[t]};
                char label[96];
                snprintf(label, sizeof label, "%s with knobs %d (m %lld k %lld, %s path)", nu_dtype_name(c.w), t,
                         (long long)c.m, (long long)c.k, fp ? "float" : "dot");
                run_q4k(d, &c, &seed, label);
            }
    /* The generic paths on request: not matvec_soa's kernel. */
    for (int wi = 0; wi < 3; wi++) {
        int64_t qs[2] = {9, 512}, xs[2] = {1, 512}, ds[2] = {1, 9};
        nt_tensor q = nt_tensor_quantized(d, ws[wi], 2, qs, 0, -1, 1, &seed);
        nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        mv_case mc = {&dst.t, &q.t, &x.t, {.tune = {.generic_k_formats = true}}, true};
        char path[512];
        snprintf(path, sizeof path, "%s/nuvec-kfmt-generic-%d.json", nt_tmp_dir(), (int)getpid());
        NT_OK(nu_trace_start(d, path));
        nt_run(d, record_matvec, &mc);
        NT_OK(nu_trace_stop(d));
        assert_false(nt_trace_has(path, "matvec_soa"));
        nt_tensor_free(&q);
        nt_tensor_free(&x);
        nt_tensor_free(&dst);
    }
    nt_close(d);
}

static nu_status record_two_products(nu_commands *c, void *arg)
{
    const nu_tensor **t = arg; /* want, got, a, Q4_0, SOA */
    nu_status st = nu_op_matmul(c, t[0], t[2], t[3], NULL);
    return st != NU_OK ? st : nu_op_matmul(c, t[1], t[2], t[4], NULL);
}

static void matmul_on_the_matrix_units_reads_it_as_q4_0(void **state)
{
    (void)state;
    nu_device *d = nt_open_matrix_units("matmul_on_the_matrix_units_reads_it_as_q4_0");
    uint64_t seed = 21;
    const int64_t shapes[5][3] = {{4, 4096, 256}, {16, 200, 512}, {64, 256, 1024}, {130, 77, 256}, {1, 33, 768}};
    /* The default tiles, then k 256 and 128 a step in the few-row tiles, for every shape (even
     * cases: Q4_0_SOA 16-byte aligned, its blocks a load a thread; odd: 2 halves in, in words). */
    const char *knobs[3] = {"on", "wm=1 wn=4 fm=1 fn=1 bk=256", "wm=1 wn=2 fm=4 fn=1 bk=128"};
    for (int c = 0; c < 15; c++) {
        assert_int_equal(setenv("NUVEC_MATMUL_TC", knobs[c / 5], 1), 0);
        int sh = c % 5;
        int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2], as[2] = {m, k}, bs[2] = {n, k}, ds[2] = {m, n};
        nt_tensor a = nt_tensor_random(d, NU_DTYPE_F16, 2, as, 0, -1, 1, &seed);
        nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q4_0, 2, bs, 0, -1, 1, &seed);
        nt_repacked s = repack(d, &q.t, sh % 2 ? 2 : 0);
        nt_tensor want = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0), got = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        const nu_tensor *ts[5] = {&want.t, &got.t, &a.t, &q.t, &s.t};
        nt_run(d, record_two_products, ts);
        nt_tensor_download(&want);
        nt_tensor_download(&got);
        for (int64_t i = 0; i < m * n; i++)
            if (memcmp(&want.values[i], &got.values[i], sizeof(float)))
                fail_msg("%s: [%lld, %lld] x [%lld, %lld]^T: element %lld is %.9g against Q4_0's %.9g", knobs[c / 5],
                         (long long)m, (long long)k, (long long)n, (long long)k, (long long)i, got.values[i],
                         want.values[i]);
        nt_repacked_free(&s);
        nt_tensor_free(&a);
        nt_tensor_free(&q);
        nt_tensor_free(&want);
        nt_tensor_free(&got);
    }
    unsetenv("NUVEC_MATMUL_TC");
    NT_OK(nu_device_close(d));
}

/* x's quantized rows too many for shared memory (40 bytes a block a row), one row fitting: the
 * product runs the dot path over groups of rows (src/ops/matvec_soa.c, by_row_groups), so its
 * results are those of one product a row (to the order of the partial sums), the fused norm and
 * residual included. */
static nu_status record_rows(nu_commands *c, void *arg)
{
    const nu_tensor **t = arg; /* dst, weight, x, norm weight, residual, then rows one by one */
    nu_matvec_desc desc = {.norm_weight = t[3], .norm_eps = 1e-5f, .residual = t[4]};
    return nu_op_matvec_fused(c, t[0], t[1], t[2], &desc);
}

static void rows_beyond_shared_memory_in_groups(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const nu_device_info *in = nu_device_get_info(d);
    uint64_t seed = 31;
    int64_t m = 8, n = 24;
    int64_t k = (int64_t)(in->max_shared_memory / (40u * 7u) * 32u + 255) / 256 * 256; /* 7 rows overflow */
    int64_t xs[2] = {m, k}, ws[2] = {n, k}, ds[2] = {m, n}, gs[1] = {k};
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q4_0, 2, ws, 0, -1, 1, &seed);
    nt_tensor g = nt_tensor_random(d, NU_DTYPE_F32, 1, gs, 0, 0.5, 1.5, &seed);
    nt_tensor all = nt_tensor_random(d, NU_DTYPE_F32, 2, ds, 0, -1, 1, &seed);
    nt_tensor one = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    NT_OK(nu_buffer_write(one.t.buffer, one.t.offset, all.values, (size_t)(m * n) * 4)); /* the same residual */
    nt_repacked s = repack(d, &q.t, 0);
    const nu_tensor *ts[5] = {&all.t, &s.t, &x.t, &g.t, &all.t};
    nt_run(d, record_rows, ts);
    for (int64_t r = 0; r < m; r++) {
        nu_tensor xr, dr;
        NT_OK(nu_tensor_slice(&x.t, 0, r, 1, &xr));
        NT_OK(nu_tensor_slice(&one.t, 0, r, 1, &dr));
        const nu_tensor *tr[5] = {&dr, &s.t, &xr, &g.t, &dr};
        nt_run(d, record_rows, tr);
    }
    nt_tensor_download(&all);
    nt_tensor_download(&one);
    /* The same arithmetic but for the order of the partial sums (the split of a row group's lanes
     * depends on the rows a dispatch takes). */
    for (int64_t i = 0; i < m * n; i++)
        if (fabsf(all.values[i] - one.values[i]) > 1e-5f * (1.0f + fabsf(one.values[i])))
            fail_msg("k %lld: element %lld of 8 rows at once is %.9g, row by row %.9g", (long long)k, (long long)i,
                     all.values[i], one.values[i]);
    nt_repacked_free(&s);
    nt_tensor_free(&x);
    nt_tensor_free(&q);
    nt_tensor_free(&g);
    nt_tensor_free(&all);
    nt_tensor_free(&one);
    nt_close(d);
}

/* ---- the post-norm into the stream (nu_matvec_desc.post_norm) ------------------------------- */

/* nu_op_matvec_fused with post_norm, recorded once as a graph and launched three times, each
 * launch adding rms_norm(dst) * post_norm into the stream again: after each launch dst equals the
 * plain product bit for bit (the same kernel) and the stream equals the float64 sum of the
 * launches' post-norms of that product within 1e-5 relative (the kernel's F32 sums). Weights
 * Q4_K (rows of 1 to 3 x rows, M 1 and 3), Q6_K and Q4_0_SOA on matvec_soa's kernel (the last
 * workgroup to arrive adds: nu_op_matvec_fuses_post_norm true; the counter back at zero for each
 * launch), and Q8_0 and Q4_K with tune.generic_k_formats on the separate ops (rms_norm, add).
 * Also what it refuses. */
typedef struct post_case {
    nu_dtype w;
    int64_t m, n, k;
    bool generic;
} post_case;

static void run_post(nu_device *d, const post_case *pc, uint64_t *seed)
{
    int64_t m = pc->m, n = pc->n, k = pc->k;
    int64_t qs[2] = {n, k}, xs[2] = {m, k}, ds[2] = {m, n}, ps[1] = {n};
    nu_dtype qdt = pc->w == NU_DTYPE_Q4_0_SOA ? NU_DTYPE_Q4_0 : pc->w;
    nt_tensor q = nt_tensor_quantized(d, qdt, 2, qs, 0, -1, 1, seed);
    nt_repacked soa = {0};
    const nu_tensor *w = &q.t;
    if (pc->w == NU_DTYPE_Q4_0_SOA) {
        soa = repack(d, &q.t, 0);
        w = &soa.t;
    }
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -2, 2, seed);
    nt_tensor pw = nt_tensor_random(d, NU_DTYPE_F32, 1, ps, 0, 0.5f, 1.5f, seed);
    nt_tensor stream = nt_tensor_random(d, NU_DTYPE_F32, 2, ds, 0, -1, 1, seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0), plain = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    const float eps = 1e-6f;
    nu_matvec_desc desc = {.post_norm = &pw.t, .stream = &stream.t, .post_norm_eps = eps,
                           .tune = {.generic_k_formats = pc->generic}};
    bool fused = nu_op_matvec_fuses_post_norm(d, w, &desc);
    assert_int_equal(fused, pc->w == NU_DTYPE_Q4_0_SOA || ((pc->w == NU_DTYPE_Q4_K || pc->w == NU_DTYPE_Q6_K) && !pc->generic));
    mv_case mc = {&plain.t, w, &x.t, {.tune = desc.tune}, true};
    nt_run(d, record_matvec, &mc);
    nt_tensor_download(&plain);

    double *want = malloc((size_t)(m * n) * sizeof *want);
    assert_non_null(want);
    for (int64_t i = 0; i < m * n; i++)
        want[i] = stream.values[i];
    nu_commands *rec;
    NT_OK(nu_graph_record(d, &rec));
    NT_OK(nu_op_matvec_fused(rec, &dst.t, w, &x.t, &desc));
    nu_graph *g;
    NT_OK(nu_graph_new(rec, &g));
    for (int launch = 0; launch < 3; launch++) {
        NT_OK(nu_graph_launch(g));
        NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
        nt_tensor_download(&dst);
        nt_tensor_download(&stream);
        if (memcmp(dst.values, plain.values, (size_t)(m * n) * sizeof(float)))
            fail_msg("%s %lldx%lldx%lld, launch %d: dst differs from the plain product", nu_dtype_name(pc->w),
                     (long long)m, (long long)n, (long long)k, launch);
        for (int64_t r = 0; r < m; r++) {
            double ss = 0;
            for (int64_t i = 0; i < n; i++)
                ss += (double)plain.values[r * n + i] * plain.values[r * n + i];
            double rs = 1.0 / sqrt(ss / (double)n + eps);
            for (int64_t i = 0; i < n; i++) {
                double *e = &want[r * n + i];
                *e += plain.values[r * n + i] * rs * pw.values[i];
                double got = stream.values[r * n + i];
                if (!(fabs(got - *e) <= 1e-5 * (1 + fabs(*e))))
                    fail_msg("%s %lldx%lldx%lld%s, launch %d: stream[%lld, %lld] is %.9g, want %.9g", nu_dtype_name(pc->w),
                             (long long)m, (long long)n, (long long)k, pc->generic ? " (generic)" : "", launch,
                             (long long)r, (long long)i, got, *e);
            }
        }
    }
    NT_OK(nu_graph_free(g));
    free(want);
    if (pc->w == NU_DTYPE_Q4_0_SOA)
        nt_repacked_free(&soa);
    nt_tensor_free(&q);
    nt_tensor_free(&x);
    nt_tensor_free(&pw);
    nt_tensor_free(&stream);
    nt_tensor_free(&dst);
    nt_tensor_free(&plain);
}

static void post_norm_into_the_stream(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const nu_device_info *in = nu_device_get_info(d);
    if (!(in->subgroup_operations & NU_SUBGROUP_ARITHMETIC) || in->subgroup_size < 8) {
        nt_close(d);
        printf("post_norm_into_the_stream: skipped: %s lacks subgroup arithmetic or subgroups of 8\n", in->name);
        skip();
    }
    uint64_t seed = 77;
    const post_case cases[] = {
        {NU_DTYPE_Q4_K, 1, 3584, 512, false}, {NU_DTYPE_Q4_K, 3, 301, 256, false}, {NU_DTYPE_Q6_K, 1, 1000, 768, false},
        {NU_DTYPE_Q4_0_SOA, 2, 512, 512, false}, {NU_DTYPE_Q8_0, 1, 300, 256, false}, {NU_DTYPE_Q4_K, 2, 257, 256, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_post(d, &cases[i], &seed);

    /* Refusals: stream without post_norm, residual beside it, an F16 dst, stream overlapping dst. */
    int64_t qs[2] = {64, 256}, xs[2] = {1, 256}, ds[2] = {1, 64}, ps[1] = {64};
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q4_K, 2, qs, 0, -1, 1, &seed);
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
    nt_tensor pw = nt_tensor_random(d, NU_DTYPE_F32, 1, ps, 0, 1, 1, &seed);
    nt_tensor st = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0), dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    nt_tensor d16 = nt_tensor_output(d, NU_DTYPE_F16, 2, ds, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_matvec_desc bad = {.stream = &st.t, .post_norm_eps = 1e-6f};
    assert_int_equal(nu_op_matvec_fused(c, &dst.t, &q.t, &x.t, &bad), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_error_message(d), "post_norm"));
    bad = (nu_matvec_desc){.post_norm = &pw.t, .stream = &st.t, .post_norm_eps = 1e-6f, .residual = &dst.t};
    assert_int_equal(nu_op_matvec_fused(c, &dst.t, &q.t, &x.t, &bad), NU_ERROR_INVALID_ARGUMENT);
    bad = (nu_matvec_desc){.post_norm = &pw.t, .stream = &st.t, .post_norm_eps = 1e-6f};
    assert_int_equal(nu_op_matvec_fused(c, &d16.t, &q.t, &x.t, &bad), NU_ERROR_INVALID_ARGUMENT);
    bad.stream = &dst.t;
    assert_int_equal(nu_op_matvec_fused(c, &dst.t, &q.t, &x.t, &bad), NU_ERROR_INVALID_ARGUMENT);
    bad.stream = &st.t;
    bad.post_norm_eps = 0;
    assert_int_equal(nu_op_matvec_fused(c, &dst.t, &q.t, &x.t, &bad), NU_ERROR_INVALID_ARGUMENT);
    NT_OK(nu_commands_free(c));
    nt_tensor_free(&q);
    nt_tensor_free(&x);
    nt_tensor_free(&pw);
    nt_tensor_free(&st);
    nt_tensor_free(&dst);
    nt_tensor_free(&d16);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(repack_is_exact_and_dequantizes_as_q4_0),
        cmocka_unit_test(products_match_the_reference_and_q4_0),
        cmocka_unit_test(fused_forms_match_the_reference),
        cmocka_unit_test(knobs_and_large_n),
        cmocka_unit_test(refuses_what_it_cannot_do),
        cmocka_unit_test(rows_beyond_shared_memory_in_groups),
        cmocka_unit_test(k_super_blocks_as_runs),
        cmocka_unit_test(post_norm_into_the_stream),
        cmocka_unit_test(matmul_on_the_matrix_units_reads_it_as_q4_0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
