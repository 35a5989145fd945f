/* test_ops_rope.c: nu_op_rope (src/ops/rope.c) against a float64 CPU reference: both layouts,
 * every src and dst dtype, head dims 8, 16, 64, 128 (and 10), odd numbers of heads, 3-D and 4-D,
 * rotary_dims < head_dim, positions tensors against offsets, positions up to 32767, in place,
 * strided views (a slice of a fused qkv, transposed heads, a strided last dimension, unaligned
 * starts); and what it refuses.
 *
 * Tolerance. The kernel computes the angle in F32 (p * exp2(-i * step), step = 2 log2(theta) /
 * rotary rounded once, exp2 and sin/cos by polynomials of about 1 ulp), so against the exact
 * angle it is off by a few F32 roundings of numbers as large as the angle: the step's and the
 * exponent's (|x| 2^-24 relative each, times ln 2), exp2's (an ulp) and the product's (half an
 * ulp), together under (|p| + 1) * 2^-22 radians (ANGLE_TOL). An output pair (y0, y1) is then off
 * by at most (|x0| + |x1|) times that, plus the rounding of the store: with inputs in [-1, 1],
 * |got - want| <= 2 ANGLE_TOL(max |p|) + 1e-6 + 2 nt_dtype_tolerance(dst) |want|. Measured
 * (rope_is_accurate_at_large_positions prints it): |got - want| / 2 at most 1.06e-3 at positions
 * to 32767 on lavapipe, against ANGLE_TOL(32767) = 7.8e-3; one F32 rounding of the angle alone
 * is up to 32767 * 2^-24 = 2e-3. */
#include "attn_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

static double angle_tol(double pmax) { return (fabs(pmax) + 1) * ldexp(1.0, -22); }

typedef struct rope_case {
    const nu_tensor *dst, *src;
    nu_rope_desc desc;
} rope_case;

static nu_status record_rope(nu_commands *c, void *arg)
{
    rope_case *k = arg;
    return nu_op_rope(c, k->dst, k->src, &k->desc);
}

/* Runs the op on src's view `sv` (of s's buffer) into dst and checks it against the reference
 * (inputs in [-1, 1]); pos: the positions the op sees, per (batch, token), offset included.
 * Returns the largest |got - want| / 2 (the angle error it shows; 0 for a row copied). */
static double check_rope_ff(nu_device *d, nt_tensor *dst, nt_tensor *s, const nu_tensor *sv, const nu_rope_desc *desc,
                            const int32_t *pos, const float *ff, const char *what)
{
    rope_case k = {&dst->t, sv, *desc};
    int64_t sh[4] = {1, 1, 1, 1};
    uint32_t lead = 4 - sv->rank;
    for (uint32_t i = 0; i < sv->rank; i++)
        sh[i + lead] = sv->shape[i];
    uint64_t n = nu_tensor_numel(sv);
    float *x = malloc(n * sizeof *x), *want = malloc(n * sizeof *want);
    double *w = malloc(n * sizeof *w);
    nt_tensor_values(s, sv, x); /* before the op: it may run in place */
    nt_run(d, record_rope, &k);
    nt_tensor_download(dst);
    double worst = 0;
    uint64_t row = (uint64_t)(sh[2] * sh[3]);
    for (int64_t r = 0; r < sh[0] * sh[1]; r++) { /* each row within its own angles' bound */
        double amax = nt_rope_ref(x + r * row, w + r * row, 1, sh[2], sh[3], pos + r, desc, ff);
        for (uint64_t i = r * row; i < (r + 1) * row; i++) {
            want[i] = nt_round_to(dst->t.dtype, (float)w[i]);
            if (dst->t.dtype == NU_DTYPE_F32)
                worst = fmax(worst, fabs(dst->values[i] - w[i]) / 2);
        }
        char each[240];
        snprintf(each, sizeof each, "%s, row %lld at position %d", what, (long long)r, pos[r]);
        nt_expect_close(each, dst->values + r * row, want + r * row, row, (float)nt_rope_tol(amax, desc),
                        2 * nt_dtype_tolerance(dst->t.dtype));
    }
    free(x);
    free(want);
    free(w);
    return worst;
}

/* check_rope_ff without frequency factors. */
static double check_rope(nu_device *d, nt_tensor *dst, nt_tensor *s, const nu_tensor *sv, const nu_rope_desc *desc,
                         const int32_t *pos, const char *what)
{
    return check_rope_ff(d, dst, s, sv, desc, pos, NULL, what);
}

/* Positions 0, 1, 2, ... plus offset, per (batch, token). */
static int32_t *iota_positions(int64_t B, int64_t T, int32_t offset)
{
    int32_t *p = malloc((size_t)(B * T) * sizeof *p);
    for (int64_t i = 0; i < B * T; i++)
        p[i] = (int32_t)(i % T) + offset;
    return p;
}

static void rope_matches_the_reference_for_every_layout_and_dtype(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 1;
    const int64_t dims[4] = {8, 16, 64, 128}, heads[3] = {3, 5, 1};
    int n = 0;
    for (int layout = 0; layout < 2; layout++)
        for (int ds = 0; ds < 3; ds++)
            for (int dd = 0; dd < 3; dd++, n++) {
                int64_t D = dims[n % 4], H = heads[n % 3], T = 1 + n % 6;
                uint32_t rank = n % 2 ? 4 : 3;
                int64_t shape4[4] = {2, T, H, D};
                const int64_t *shape = shape4 + (4 - rank);
                uint64_t pad = (uint64_t)(n % 3 == 2); /* unaligned: the general path */
                nt_tensor src = nt_tensor_random(d, floats[ds], rank, shape, pad, -1, 1, &seed);
                nt_tensor dst = nt_tensor_output(d, floats[dd], rank, shape, (uint64_t)(n % 2) * 8);
                nu_rope_desc desc = {.layout = (nu_rope_layout)layout, .theta = n % 4 ? 0 : 500000.0f,
                                     .position_offset = n * 7};
                int32_t *pos = iota_positions(rank == 4 ? 2 : 1, T, desc.position_offset);
                char what[160];
                snprintf(what, sizeof what, "%s %s -> %s, rank %u, heads %lld, head_dim %lld, tokens %lld, pad %llu",
                         layout ? "half" : "interleaved", nu_dtype_name(floats[ds]), nu_dtype_name(floats[dd]), rank,
                         (long long)H, (long long)D, (long long)T, (unsigned long long)pad);
                check_rope(d, &dst, &src, &src.t, &desc, pos, what);
                free(pos);
                nt_tensor_free(&src);
                nt_tensor_free(&dst);
            }
    nt_close(d);
}

static void rope_rotates_only_the_rotary_dims(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 2;
    /* {head_dim, rotary_dims}: the vector path (64/32, 128/64; 16/8 interleaved), the general one
     * (16/8 half, whose halves are 4 elements; 10/6). */
    const int64_t cases[5][2] = {{64, 32}, {16, 8}, {10, 6}, {128, 64}, {64, 2}};
    for (int layout = 0; layout < 2; layout++)
        for (int c = 0; c < 5; c++) {
            int64_t shape[3] = {3, 3, cases[c][0]};
            nu_dtype ds = floats[c % 3], dd = floats[(c + layout) % 3];
            nt_tensor src = nt_tensor_random(d, ds, 3, shape, 0, -1, 1, &seed);
            nt_tensor dst = nt_tensor_output(d, dd, 3, shape, 0);
            nu_rope_desc desc = {.layout = (nu_rope_layout)layout, .rotary_dims = (uint32_t)cases[c][1],
                                 .position_offset = 3};
            int32_t *pos = iota_positions(1, 3, 3);
            char what[128];
            snprintf(what, sizeof what, "%s head_dim %lld rotary_dims %lld %s -> %s", layout ? "half" : "interleaved",
                     (long long)cases[c][0], (long long)cases[c][1], nu_dtype_name(ds), nu_dtype_name(dd));
            check_rope(d, &dst, &src, &src.t, &desc, pos, what);
            /* The copied dimensions are the inputs exactly (rounded to dst). */
            for (int64_t r = 0; r < 9; r++)
                for (int64_t e = cases[c][1]; e < cases[c][0]; e++) {
                    uint64_t i = (uint64_t)(r * cases[c][0] + e);
                    assert_true(dst.values[i] == nt_round_to(dd, src.values[i]));
                }
            free(pos);
            nt_tensor_free(&src);
            nt_tensor_free(&dst);
        }
    nt_close(d);
}

static void rope_takes_positions_from_a_tensor(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 3;
    for (int layout = 0; layout < 2; layout++) {
        /* 3-D, [tokens] positions in any order, plus an offset (some go negative). */
        int64_t s3[3] = {6, 3, 64};
        int32_t p6[6] = {5, 0, 1999, 17, 4, 3}, want6[6];
        for (int i = 0; i < 6; i++)
            want6[i] = p6[i] - 5;
        nt_tensor pos = nt_tensor_i32(d, p6, 6, 1, 1);
        nt_tensor src = nt_tensor_random(d, NU_DTYPE_F16, 3, s3, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, s3, 0);
        nu_rope_desc desc = {.layout = (nu_rope_layout)layout, .position_offset = -5, .positions = &pos.t};
        check_rope(d, &dst, &src, &src.t, &desc, want6, "positions [tokens] plus an offset");
        nt_tensor_free(&pos);
        /* A strided positions view (every third element). */
        pos = nt_tensor_i32(d, p6, 6, 0, 3);
        desc.positions = &pos.t;
        check_rope(d, &dst, &src, &src.t, &desc, want6, "strided positions");
        nt_tensor_free(&pos);

        /* Positions 0..T-1 from a tensor give exactly what the offset alone gives. */
        int32_t seq[6] = {0, 1, 2, 3, 4, 5};
        pos = nt_tensor_i32(d, seq, 6, 0, 1);
        nu_rope_desc by_tensor = {.layout = (nu_rope_layout)layout, .position_offset = 1000, .positions = &pos.t};
        nu_rope_desc by_offset = {.layout = (nu_rope_layout)layout, .position_offset = 1000};
        nt_tensor other = nt_tensor_output(d, NU_DTYPE_F32, 3, s3, 0);
        rope_case a = {&dst.t, &src.t, by_tensor}, b = {&other.t, &src.t, by_offset};
        nt_run(d, record_rope, &a);
        nt_run(d, record_rope, &b);
        nt_tensor_download(&dst);
        nt_tensor_download(&other);
        assert_memory_equal(dst.values, other.values, dst.numel * sizeof(float));
        nt_tensor_free(&pos);
        nt_tensor_free(&other);
        nt_tensor_free(&src);
        nt_tensor_free(&dst);

        /* 4-D: [batch, tokens] positions, and [batch * tokens] as 1-D; [tokens] is shared. */
        int64_t s4[4] = {2, 3, 5, 16};
        int32_t p23[6] = {10, 11, 12, 400, 401, 402};
        src = nt_tensor_random(d, NU_DTYPE_BF16, 4, s4, 0, -1, 1, &seed);
        dst = nt_tensor_output(d, NU_DTYPE_BF16, 4, s4, 0);
        int64_t ps[2] = {2, 3};
        pos = nt_tensor_i32(d, p23, 6, 0, 1);
        nu_tensor pos2 = nu_tensor_make(pos.t.buffer, pos.t.offset, NU_DTYPE_I32, 2, ps);
        desc = (nu_rope_desc){.layout = (nu_rope_layout)layout, .positions = &pos2};
        check_rope(d, &dst, &src, &src.t, &desc, p23, "positions [batch, tokens]");
        desc.positions = &pos.t;
        check_rope(d, &dst, &src, &src.t, &desc, p23, "positions [batch * tokens]");
        nu_tensor first3;
        NT_OK(nu_tensor_slice(&pos.t, 0, 3, 3, &first3));
        int32_t shared[6] = {400, 401, 402, 400, 401, 402};
        desc.positions = &first3;
        check_rope(d, &dst, &src, &src.t, &desc, shared, "positions [tokens] shared by the batch");
        nt_tensor_free(&pos);
        nt_tensor_free(&src);
        nt_tensor_free(&dst);
    }
    nt_close(d);
}

static void rope_is_accurate_at_large_positions(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 4;
    int32_t p[8] = {30000, 32767, 16384, 12345, 1, 0, 31999, 29999};
    const float thetas[2] = {10000.0f, 500000.0f};
    double worst = 0;
    for (int layout = 0; layout < 2; layout++)
        for (int th = 0; th < 2; th++) {
            int64_t s[3] = {8, 3, 128};
            nt_tensor pos = nt_tensor_i32(d, p, 8, 0, 1);
            nt_tensor src = nt_tensor_random(d, NU_DTYPE_F32, 3, s, (uint64_t)th, -1, 1, &seed);
            nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, s, 0);
            nu_rope_desc desc = {.layout = (nu_rope_layout)layout, .theta = thetas[th], .positions = &pos.t};
            char what[96];
            snprintf(what, sizeof what, "%s theta %g, positions to 32767, %s path", layout ? "half" : "interleaved",
                     (double)thetas[th], th ? "general" : "vector");
            worst = fmax(worst, check_rope(d, &dst, &src, &src.t, &desc, p, what));
            nt_tensor_free(&pos);
            nt_tensor_free(&src);
            nt_tensor_free(&dst);
        }
    /* The measured error, in radians of angle (|got - want| / (|x0| + |x1|) bound): */
    print_message("rope: largest |got - want| / 2 at positions to 32767: %.3g (tolerance %.3g; 32767 * 2^-24 = %.3g)\n", worst,
                  angle_tol(32767), 32767 * ldexp(1.0, -24));
    assert_true(worst <= angle_tol(32767));
    nt_close(d);
}

static void rope_runs_in_place(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 5;
    for (int layout = 0; layout < 2; layout++)
        for (int pad = 0; pad < 2; pad++) {
            int64_t s[4] = {2, 4, 3, 64};
            nu_dtype dt = floats[layout + pad];
            nt_tensor x = nt_tensor_random(d, dt, 4, s, (uint64_t)pad, -1, 1, &seed);
            nu_rope_desc desc = {.layout = (nu_rope_layout)layout, .position_offset = 11};
            int32_t *pos = iota_positions(2, 4, 11);
            check_rope(d, &x, &x, &x.t, &desc, pos, pad ? "in place, unaligned" : "in place");
            free(pos);
            nt_tensor_free(&x);
        }
    nt_close(d);
}

static void rope_takes_strided_views(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 6;
    for (int layout = 0; layout < 2; layout++) {
        nu_rope_desc desc = {.layout = (nu_rope_layout)layout, .position_offset = 2};
        int32_t *pos = iota_positions(1, 5, 2);
        /* A fused qkv projection's output [tokens, 3 * heads, head_dim]; q, k: strided heads. */
        int64_t qkv_s[3] = {5, 9, 64}, q_s[3] = {5, 3, 64};
        for (int pad = 0; pad < 2; pad++) {
            nt_tensor qkv = nt_tensor_random(d, NU_DTYPE_F16, 3, qkv_s, (uint64_t)pad, -1, 1, &seed);
            for (int part = 0; part < 2; part++) {
                nu_tensor v;
                NT_OK(nu_tensor_slice(&qkv.t, 1, part * 3, 3, &v));
                nt_tensor dst = nt_tensor_output(d, floats[part], 3, q_s, 0);
                check_rope(d, &dst, &qkv, &v, &desc, pos, part ? "k of a fused qkv" : "q of a fused qkv");
                nt_tensor_free(&dst);
            }
            nt_tensor_free(&qkv);
        }
        /* Heads and tokens transposed: a [heads, tokens, head_dim] buffer read as [tokens, heads, ..]. */
        int64_t hts[3] = {3, 5, 16};
        nt_tensor ht = nt_tensor_random(d, NU_DTYPE_F32, 3, hts, 0, -1, 1, &seed);
        nu_tensor tv;
        NT_OK(nu_tensor_transpose(&ht.t, 0, 1, &tv));
        int64_t ts[3] = {5, 3, 16};
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F16, 3, ts, 0);
        check_rope(d, &dst, &ht, &tv, &desc, pos, "transposed heads and tokens");
        nt_tensor_free(&ht);
        nt_tensor_free(&dst);
        /* A strided last dimension: every other element of [tokens, heads, 2 * head_dim]. */
        int64_t ws[3] = {5, 3, 32};
        nt_tensor wide = nt_tensor_random(d, NU_DTYPE_BF16, 3, ws, 0, -1, 1, &seed);
        nu_tensor ev = wide.t;
        ev.shape[2] = 16;
        ev.strides[2] = 2;
        ev.offset += 2; /* the odd elements */
        nt_tensor dst2 = nt_tensor_output(d, NU_DTYPE_F32, 3, ts, 0);
        check_rope(d, &dst2, &wide, &ev, &desc, pos, "a strided last dimension");
        nt_tensor_free(&wide);
        nt_tensor_free(&dst2);
        free(pos);
    }
    nt_close(d);
}

/* The tuning (desc.tune: threads a workgroup, heads a thread) keeps the results within the
 * reference's bound; NUVEC_TUNE_ROPE, the developer override, read on a device opened after it is
 * set: a good value runs, a bad one is refused naming the variable. */
static void rope_tuning_keeps_results(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 7;
    const nu_rope_tune tunings[3] = {{32, 8}, {1, 3}, {1024, 1}};
    for (int i = 0; i < 3; i++)
        for (int layout = 0; layout < 2; layout++) {
            int64_t s[3] = {7, 5, 32};
            nt_tensor src = nt_tensor_random(d, NU_DTYPE_F32, 3, s, (uint64_t)layout, -1, 1, &seed);
            nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, s, 0);
            nu_rope_desc desc = {.layout = (nu_rope_layout)layout, .tune = tunings[i]};
            int32_t *pos = iota_positions(1, 7, 0);
            char what[64];
            snprintf(what, sizeof what, "tune local=%u heads=%u", tunings[i].local, tunings[i].heads);
            check_rope(d, &dst, &src, &src.t, &desc, pos, what);
            free(pos);
            nt_tensor_free(&src);
            nt_tensor_free(&dst);
        }
    nt_close(d);
    const char *env[2] = {"local=64 heads=4", "heads=9"};
    for (int i = 0; i < 2; i++) {
        setenv("NUVEC_TUNE_ROPE", env[i], 1);
        d = nt_open();
        int64_t s[3] = {3, 4, 16};
        nt_tensor src = nt_tensor_random(d, NU_DTYPE_F32, 3, s, 0, -1, 1, &seed);
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, s, 0);
        nu_rope_desc desc = {.layout = NU_ROPE_HALF};
        if (i == 0) {
            int32_t *pos = iota_positions(1, 3, 0);
            check_rope(d, &dst, &src, &src.t, &desc, pos, "NUVEC_TUNE_ROPE=local=64 heads=4");
            free(pos);
        } else {
            nu_commands *c;
            NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
            NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &dst.t, &src.t, &desc));
            assert_non_null(strstr(nu_error_message(d), "NUVEC_TUNE_ROPE"));
            nu_commands_free(c);
        }
        nt_tensor_free(&src);
        nt_tensor_free(&dst);
        nt_close(d);
        unsetenv("NUVEC_TUNE_ROPE");
    }
}

/* Frequency scaling against the reference: linear factors (8, a power of two: exact; 1.5), per-pair
 * frequency factors (Llama 3.1's rope_freqs shape: 1 for the high frequencies, up to 8 for the
 * low, smooth between; LongRoPE's: between 1 and 2), LongRoPE's attention factor (1.19), alone and
 * together, both layouts, the vector and the general path (rotary_dims below head_dim, an
 * unaligned src), a strided factors view, positions to 131071 (a 128K context). */
static void rope_scaling_matches_the_reference(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 9;
    const int64_t D = 64;
    float ffv[2 * 32]; /* every other element: the strided view */
    for (int i = 0; i < 32; i++) {
        double f = i < 8 ? 1.0 : i > 24 ? 8.0 : 1.0 + 7.0 * (i - 8) / 16.0;
        ffv[2 * i] = (float)f;
        ffv[2 * i + 1] = NAN; /* never read */
    }
    int32_t p[6] = {0, 1, 4095, 8191, 100000, 131071};
    nt_tensor pos = nt_tensor_i32(d, p, 6, 0, 1);
    struct {
        float linear, attn;
        int ff;           /* 0 none, 1 Llama 3 shaped (all pairs), 2 LongRoPE-like, 16 pairs (rotary 32) */
        uint32_t rotary;
        uint64_t pad;
    } cases[] = {
        {8, 0, 0, 0, 0},    {1.5f, 0, 0, 0, 1},  {0, 0, 1, 0, 0},     {0, 1.19f, 0, 0, 0},
        {4, 1.19f, 1, 0, 1}, {0, 1.19f, 2, 32, 0}, {2, 0.5f, 2, 32, 1},
    };
    float lr[16];
    for (int i = 0; i < 16; i++)
        lr[i] = (float)(1.0 + i / 15.0);
    nt_tensor ffl = nt_tensor_random(d, NU_DTYPE_F32, 1, (int64_t[1]){16}, 0, 1, 2, &seed);
    NT_OK(nu_buffer_write(ffl.t.buffer, ffl.t.offset, lr, sizeof lr));
    memcpy(ffl.values, lr, sizeof lr);
    int64_t fs[1] = {64};
    nt_tensor ffs = nt_tensor_random(d, NU_DTYPE_F32, 1, fs, 0, 1, 2, &seed);
    NT_OK(nu_buffer_write(ffs.t.buffer, ffs.t.offset, ffv, sizeof ffv));
    nu_tensor ff32 = ffs.t;
    ff32.shape[0] = 32;
    ff32.strides[0] = 2;
    float ffd[32];
    for (int i = 0; i < 32; i++)
        ffd[i] = ffv[2 * i];
    for (int layout = 0; layout < 2; layout++)
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            int64_t sh[3] = {6, 3, D};
            nu_dtype ds = floats[(ci + (size_t)layout) % 3], dd = floats[ci % 3];
            nt_tensor src = nt_tensor_random(d, ds, 3, sh, cases[ci].pad, -1, 1, &seed);
            nt_tensor dst = nt_tensor_output(d, dd, 3, sh, 0);
            nu_rope_desc desc = {.layout = (nu_rope_layout)layout, .rotary_dims = cases[ci].rotary, .positions = &pos.t,
                                 .linear_factor = cases[ci].linear, .attn_factor = cases[ci].attn,
                                 .freq_factors = cases[ci].ff == 1 ? &ff32 : cases[ci].ff == 2 ? &ffl.t : NULL};
            char what[160];
            snprintf(what, sizeof what, "%s, linear %g, attn %g, factors %d, rotary %u, %s -> %s",
                     layout ? "half" : "interleaved", (double)cases[ci].linear, (double)cases[ci].attn, cases[ci].ff,
                     cases[ci].rotary, nu_dtype_name(ds), nu_dtype_name(dd));
            check_rope_ff(d, &dst, &src, &src.t, &desc, p, cases[ci].ff == 1 ? ffd : cases[ci].ff == 2 ? lr : NULL, what);
            nt_tensor_free(&src);
            nt_tensor_free(&dst);
        }
    nt_tensor_free(&pos);
    nt_tensor_free(&ffl);
    nt_tensor_free(&ffs);
    nt_close(d);
}

/* Scaling that changes nothing (linear_factor 1, attn_factor 1, factors all 1) gives the unscaled
 * op's bits, on both paths. */
static void rope_neutral_scaling_is_bit_exact(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 10;
    float ones[32];
    for (int i = 0; i < 32; i++)
        ones[i] = 1.0f;
    nt_tensor ff = nt_tensor_random(d, NU_DTYPE_F32, 1, (int64_t[1]){32}, 0, 1, 2, &seed);
    NT_OK(nu_buffer_write(ff.t.buffer, ff.t.offset, ones, sizeof ones));
    for (int layout = 0; layout < 2; layout++)
        for (int pad = 0; pad < 2; pad++) {
            int64_t sh[3] = {5, 2, 64};
            nt_tensor src = nt_tensor_random(d, NU_DTYPE_F32, 3, sh, (uint64_t)pad, -1, 1, &seed);
            nt_tensor a = nt_tensor_output(d, NU_DTYPE_F32, 3, sh, 0), b = nt_tensor_output(d, NU_DTYPE_F32, 3, sh, 0);
            nu_rope_desc plain = {.layout = (nu_rope_layout)layout, .position_offset = 3000};
            nu_rope_desc neutral = plain;
            neutral.linear_factor = 1;
            neutral.attn_factor = 1;
            neutral.freq_factors = &ff.t;
            rope_case ra = {&a.t, &src.t, plain}, rb = {&b.t, &src.t, neutral};
            nt_run(d, record_rope, &ra);
            nt_run(d, record_rope, &rb);
            nt_tensor_download(&a);
            nt_tensor_download(&b);
            assert_memory_equal(a.bytes, b.bytes, a.size);
            nt_tensor_free(&src);
            nt_tensor_free(&a);
            nt_tensor_free(&b);
        }
    nt_tensor_free(&ff);
    nt_close(d);
}

static void rope_refuses_bad_arguments(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 8;
    int64_t s[3] = {2, 3, 8}, s7[3] = {2, 3, 7}, s2[2] = {6, 8}, s5[3] = {2, 3, 5 * 2};
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 3, s, 0, -1, 1, &seed);
    nt_tensor y = nt_tensor_output(d, NU_DTYPE_F32, 3, s, 0);
    nt_tensor odd = nt_tensor_random(d, NU_DTYPE_F32, 3, s7, 0, -1, 1, &seed);
    nt_tensor oddo = nt_tensor_output(d, NU_DTYPE_F32, 3, s7, 0);
    nt_tensor flat = nt_tensor_random(d, NU_DTYPE_F32, 2, s2, 0, -1, 1, &seed);
    nt_tensor flato = nt_tensor_output(d, NU_DTYPE_F32, 2, s2, 0);
    nt_tensor other = nt_tensor_output(d, NU_DTYPE_F32, 3, s5, 0);
    nt_tensor ints = nt_tensor_random(d, NU_DTYPE_I32, 3, s, 0, 0, 9, &seed);
    int32_t p3[3] = {0, 1, 2};
    nt_tensor pos3 = nt_tensor_i32(d, p3, 3, 0, 1), pos2 = nt_tensor_i32(d, p3, 2, 0, 1);
    int64_t two[1] = {2};
    nt_tensor posf = nt_tensor_random(d, NU_DTYPE_F32, 1, two, 0, 0, 3, &seed);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_rope_desc ok = {0};
    NT_OK(nu_op_rope(c, &y.t, &x.t, &ok)); /* the baseline is fine */
    nu_tensor none, none_out; /* no tokens: nothing recorded */
    NT_OK(nu_tensor_slice(&x.t, 0, 0, 0, &none));
    NT_OK(nu_tensor_slice(&y.t, 0, 0, 0, &none_out));
    NT_OK(nu_op_rope(c, &none_out, &none, &ok));
    nu_rope_desc r6 = {.rotary_dims = 6};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &oddo.t, &odd.t, &r6));
    assert_non_null(strstr(nu_error_message(NULL), "head_dim 7 is odd"));
    nu_rope_desc r5 = {.rotary_dims = 5}, r10 = {.rotary_dims = 10};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &y.t, &x.t, &r5));
    assert_non_null(strstr(nu_error_message(NULL), "rotary_dims 5"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &y.t, &x.t, &r10));
    assert_non_null(strstr(nu_error_message(NULL), "at most head_dim"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &flato.t, &flat.t, &ok)); /* rank 2 */
    assert_non_null(strstr(nu_error_message(NULL), "rank 2"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &other.t, &x.t, &ok)); /* shapes differ */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &y.t, &ints.t, &ok)); /* I32 src */
    assert_non_null(strstr(nu_error_message(NULL), "I32"));
    nu_rope_desc pf = {.positions = &posf.t};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &y.t, &x.t, &pf)); /* F32 positions */
    assert_non_null(strstr(nu_error_message(NULL), "positions"));
    nu_rope_desc p3d = {.positions = &pos3.t};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &y.t, &x.t, &p3d)); /* 3 positions for 2 tokens */
    assert_non_null(strstr(nu_error_message(NULL), "one I32 per token"));
    nu_rope_desc p2d = {.positions = &pos2.t};
    NT_OK(nu_op_rope(c, &y.t, &x.t, &p2d));
    nu_rope_desc bad_layout = {.layout = (nu_rope_layout)7}, bad_theta = {.theta = -1};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &y.t, &x.t, &bad_layout));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &y.t, &x.t, &bad_theta));
    assert_non_null(strstr(nu_error_message(NULL), "theta"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &y.t, &x.t, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(NULL, &y.t, &x.t, &ok));
    /* dst over src shifted by one head: overlapping, not the same view. */
    int64_t s1[3] = {1, 3, 8};
    nu_tensor a = nu_tensor_make(x.t.buffer, 0, NU_DTYPE_F32, 3, s1), b = a;
    b.offset = 8 * 4;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &b, &a, &ok));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps"));
    /* dst over the positions. */
    nu_tensor over = nu_tensor_make(pos2.t.buffer, 0, NU_DTYPE_F32, 3, (int64_t[3]){1, 1, 2});
    nu_tensor xs;
    NT_OK(nu_tensor_slice(&x.t, 2, 0, 2, &xs));
    NT_OK(nu_tensor_slice(&xs, 1, 0, 1, &xs));
    NT_OK(nu_tensor_slice(&xs, 0, 0, 1, &xs));
    nu_tensor p1;
    NT_OK(nu_tensor_slice(&pos2.t, 0, 0, 1, &p1));
    nu_rope_desc pd = {.positions = &p1};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &over, &xs, &pd));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps positions"));
    /* Scaling and tuning out of range, each named. */
    int64_t four[1] = {4}, three[1] = {3};
    nt_tensor ff4 = nt_tensor_random(d, NU_DTYPE_F32, 1, four, 0, 1, 2, &seed);
    nt_tensor ff3 = nt_tensor_random(d, NU_DTYPE_F32, 1, three, 0, 1, 2, &seed);
    nt_tensor ffh = nt_tensor_random(d, NU_DTYPE_F16, 1, four, 0, 1, 2, &seed);
    nu_rope_desc ffok = {.freq_factors = &ff4.t};
    NT_OK(nu_op_rope(c, &y.t, &x.t, &ffok)); /* head_dim 8: 4 pairs */
    struct {
        nu_rope_desc rd;
        const char *msg;
    } bad[] = {
        {{.linear_factor = -2}, "linear_factor"},   {{.linear_factor = INFINITY}, "linear_factor"},
        {{.linear_factor = NAN}, "linear_factor"},  {{.attn_factor = -1}, "attn_factor"},
        {{.attn_factor = NAN}, "attn_factor"},      {{.freq_factors = &ff3.t}, "freq_factors"},
        {{.freq_factors = &ffh.t}, "freq_factors"}, {{.rotary_dims = 6, .freq_factors = &ff4.t}, "freq_factors"},
        {{.tune = {.local = 1025}}, "tune.local"},  {{.tune = {.heads = 9}}, "tune.heads"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &y.t, &x.t, &bad[i].rd));
        if (!strstr(nu_error_message(d), bad[i].msg))
            fail_msg("refusal %zu: the message '%s' does not name %s", i, nu_error_message(d), bad[i].msg);
    }
    /* dst over the factors. */
    int64_t sixteen[1] = {16};
    nt_tensor ff16 = nt_tensor_random(d, NU_DTYPE_F32, 1, sixteen, 0, 1, 2, &seed);
    nu_tensor ffv, over_ff = nu_tensor_make(ff16.t.buffer, 0, NU_DTYPE_F32, 3, (int64_t[3]){1, 1, 8}), xs8;
    NT_OK(nu_tensor_slice(&ff16.t, 0, 8, 4, &ffv));
    NT_OK(nu_tensor_slice(&x.t, 0, 0, 1, &xs8));
    NT_OK(nu_tensor_slice(&xs8, 1, 0, 1, &xs8));
    nu_rope_desc ffover = {.freq_factors = &ffv};
    NT_OK(nu_op_rope(c, &y.t, &x.t, &ffover));
    over_ff.offset = 8 * 4;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_rope(c, &over_ff, &xs8, &ffover));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps freq_factors"));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    nt_tensor_free(&x);
    nt_tensor_free(&y);
    nt_tensor_free(&odd);
    nt_tensor_free(&oddo);
    nt_tensor_free(&flat);
    nt_tensor_free(&flato);
    nt_tensor_free(&other);
    nt_tensor_free(&ints);
    nt_tensor_free(&pos3);
    nt_tensor_free(&pos2);
    nt_tensor_free(&posf);
    nt_tensor_free(&ff4);
    nt_tensor_free(&ff3);
    nt_tensor_free(&ffh);
    nt_tensor_free(&ff16);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rope_matches_the_reference_for_every_layout_and_dtype),
        cmocka_unit_test(rope_rotates_only_the_rotary_dims),
        cmocka_unit_test(rope_takes_positions_from_a_tensor),
        cmocka_unit_test(rope_is_accurate_at_large_positions),
        cmocka_unit_test(rope_runs_in_place),
        cmocka_unit_test(rope_takes_strided_views),
        cmocka_unit_test(rope_tuning_keeps_results),
        cmocka_unit_test(rope_scaling_matches_the_reference),
        cmocka_unit_test(rope_neutral_scaling_is_bit_exact),
        cmocka_unit_test(rope_refuses_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
