/* test_quant.c: the CPU block codecs (nuvec/quant.h). Known-answer blocks (made here from the
 * formats' definitions, field by field) decoded by nu_dequantize; round trips of nu_quantize on
 * several kinds of data against the error bounds docs/quantize.md gives; importances;
 * refusals; threads; the writer's tensors of every block dtype; `nuvec quantize`'s type chooser
 * (tools/quantize_mix.c), tensor by tensor, against llama-quantize's rules worked out by hand. */
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "harness.h"
#include "make_gguf.h"
#include "quantize.h"
#include "tool_error.h"

/* ---- blocks made by hand ---- */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* The 5-bit formats' 32 levels into qs[16] and the 32-bit qh (bit j: element j's fifth bit). */
static void pack5(const int *level, uint8_t *qh, uint8_t *qs)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((level[j] & 15) | (level[j + 16] & 15) << 4);
        h |= (uint32_t)(level[j] >> 4) << j | (uint32_t)(level[j + 16] >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++)
        qh[k] = (uint8_t)(h >> 8 * k);
}

/* Q4_K's and Q5_K's 12 bytes of eight 6-bit scales and mins. */
static void pack_k_scales(const int *sc, const int *m, uint8_t *out)
{
    memset(out, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            out[j] = (uint8_t)sc[j];
            out[j + 4] = (uint8_t)m[j];
        } else {
            out[j + 4] = (uint8_t)((sc[j] & 15) | (m[j] & 15) << 4);
            out[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            out[j] |= (uint8_t)((m[j] >> 4) << 6);
        }
    }
}

static const int IQ4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void expect_floats(const char *what, const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], 4) && !(isnan(got[i]) && isnan(want[i])))
            fail_msg("%s: element %d is %.9g, expected %.9g", what, i, got[i], want[i]);
}

static void known_answer_blocks(void **state)
{
    (void)state;
    uint8_t b[256];
    float got[256], want[256];
    int level[256];

    /* Q8_0: d = 0.5, q = -128, -120, ..., 120. */
    put16(b, 0x3800);
    for (int j = 0; j < 32; j++) {
        b[2 + j] = (uint8_t)(int8_t)(j * 8 - 128);
        want[j] = (float)(j * 8 - 128) * 0.5f;
    }
    NT_OK(nu_dequantize(NU_DTYPE_Q8_0, b, got, 32));
    expect_floats("Q8_0", got, want, 32);

    /* Q4_0: d = 2, x = d * (q - 8), element j in the low nibble of byte j, j + 16 in its high one. */
    put16(b, 0x4000);
    for (int j = 0; j < 16; j++) {
        b[2 + j] = (uint8_t)(j | (15 - j) << 4);
        want[j] = (float)(j - 8) * 2, want[j + 16] = (float)(7 - j) * 2;
    }
    NT_OK(nu_dequantize(NU_DTYPE_Q4_0, b, got, 32));
    expect_floats("Q4_0", got, want, 32);

    /* Q4_1: d = 0.25, m = -1, x = d * q + m. */
    put16(b, 0x3400), put16(b + 2, 0xBC00);
    for (int j = 0; j < 16; j++) {
        b[4 + j] = (uint8_t)(j | (15 - j) << 4);
        want[j] = (float)j * 0.25f - 1, want[j + 16] = (float)(15 - j) * 0.25f - 1;
    }
    NT_OK(nu_dequantize(NU_DTYPE_Q4_1, b, got, 32));
    expect_floats("Q4_1", got, want, 32);

    /* Q5_0: d = 1, x = q - 16, levels a permutation of 0..31 (fifth bits in both halves). */
    for (int j = 0; j < 32; j++)
        level[j] = j * 7 % 32, want[j] = (float)(level[j] - 16);
    put16(b, 0x3C00);
    pack5(level, b + 2, b + 6);
    NT_OK(nu_dequantize(NU_DTYPE_Q5_0, b, got, 32));
    expect_floats("Q5_0", got, want, 32);

    /* Q5_1: d = 0.5, m = 3, x = d * q + m. */
    for (int j = 0; j < 32; j++)
        want[j] = (float)level[j] * 0.5f + 3;
    put16(b, 0x3800), put16(b + 2, 0x4200);
    pack5(level, b + 4, b + 8);
    NT_OK(nu_dequantize(NU_DTYPE_Q5_1, b, got, 32));
    expect_floats("Q5_1", got, want, 32);

    /* IQ4_NL: d = 1: the levels themselves. */
    put16(b, 0x3C00);
    for (int j = 0; j < 16; j++) {
        b[2 + j] = (uint8_t)(j | (15 - j) << 4);
        want[j] = (float)IQ4[j], want[j + 16] = (float)IQ4[15 - j];
    }
    NT_OK(nu_dequantize(NU_DTYPE_IQ4_NL, b, got, 32));
    expect_floats("IQ4_NL", got, want, 32);

    /* Q4_K: d = 1, dmin = 0.5; sub-block j has scale 9j and min 63 - 9j; x = sc * q - 0.5 * m.
     * Sub-blocks 2i, 2i+1 share qs[32i .. 32i + 31], low nibbles then high ones. */
    int sc[16], mn[8];
    for (int j = 0; j < 8; j++)
        sc[j] = 9 * j, mn[j] = 63 - 9 * j;
    memset(b, 0, sizeof b);
    put16(b, 0x3C00), put16(b + 2, 0x3800);
    pack_k_scales(sc, mn, b + 4);
    for (int e = 0; e < 256; e++) {
        int j = e / 32, l = e % 32, q = (e * 5 + j) % 16;
        b[16 + 32 * (j / 2) + l] |= (uint8_t)(q << 4 * (j % 2));
        want[e] = (float)(sc[j] * q) - 0.5f * (float)mn[j];
    }
    NT_OK(nu_dequantize(NU_DTYPE_Q4_K, b, got, 256));
    expect_floats("Q4_K", got, want, 256);

    /* Q5_K: the same with 5-bit levels; the fifth bit of element l of sub-block j is bit j of qh[l]. */
    memset(b, 0, sizeof b);
    put16(b, 0x3C00), put16(b + 2, 0x3800);
    pack_k_scales(sc, mn, b + 4);
    for (int e = 0; e < 256; e++) {
        int j = e / 32, l = e % 32, q = (e * 5 + j) % 32;
        b[48 + 32 * (j / 2) + l] |= (uint8_t)((q & 15) << 4 * (j % 2));
        b[16 + l] |= (uint8_t)((q >> 4) << j);
        want[e] = (float)(sc[j] * q) - 0.5f * (float)mn[j];
    }
    NT_OK(nu_dequantize(NU_DTYPE_Q5_K, b, got, 256));
    expect_floats("Q5_K", got, want, 256);

    /* Q6_K: d = 0.5 at byte 208, 16 int8 scales 17i - 128 at 192; in each half of 128, element
     * l + 32k takes a nibble of ql (ql[l] low, ql[l + 32] low, ql[l] high, ql[l + 32] high for
     * k = 0..3) and bits 2k, 2k+1 of qh[l]; x = d * sc[e / 16] * (q - 32). */
    memset(b, 0, sizeof b);
    for (int i = 0; i < 16; i++)
        sc[i] = 17 * i - 128, b[192 + i] = (uint8_t)(int8_t)sc[i];
    put16(b + 208, 0x3800);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, k = e % 128 / 32, l = e % 32, q = e * 11 % 64;
        b[64 * h + l + 32 * (k & 1)] |= (uint8_t)((q & 15) << 4 * (k / 2));
        b[128 + 32 * h + l] |= (uint8_t)((q >> 4) << 2 * k);
        want[e] = 0.5f * (float)sc[e / 16] * (float)(q - 32);
    }
    NT_OK(nu_dequantize(NU_DTYPE_Q6_K, b, got, 256));
    expect_floats("Q6_K", got, want, 256);

    /* IQ4_XS: d = 0.25; sub-block ib's 6-bit scale 9 ib (low nibble in scales_l[ib / 2], high
     * two bits at 2 ib of scales_h) less 32, over the IQ4 levels. */
    memset(b, 0, sizeof b);
    put16(b, 0x3400);
    uint16_t sh = 0;
    for (int ib = 0; ib < 8; ib++) {
        b[4 + ib / 2] |= (uint8_t)(((9 * ib) & 15) << 4 * (ib % 2));
        sh |= (uint16_t)(((9 * ib) >> 4) << 2 * ib);
    }
    put16(b + 2, sh);
    for (int e = 0; e < 256; e++) {
        int ib = e / 32, l = e % 32, q = (e * 3 + ib) % 16;
        b[8 + 16 * ib + l % 16] |= (uint8_t)(q << 4 * (l / 16));
        want[e] = 0.25f * (float)(9 * ib - 32) * (float)IQ4[q];
    }
    NT_OK(nu_dequantize(NU_DTYPE_IQ4_XS, b, got, 256));
    expect_floats("IQ4_XS", got, want, 256);

    /* F16, BF16, F32. */
    const uint16_t halves[8] = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x7C00, 0xFC00, 0x8000, 0x3555};
    const float hv[8] = {1, -2, 0x1p-24f, 65504, INFINITY, -INFINITY, -0.0f, 0x1.554p-2f};
    for (int i = 0; i < 8; i++)
        put16(b + 2 * i, halves[i]);
    NT_OK(nu_dequantize(NU_DTYPE_F16, b, got, 8));
    expect_floats("F16", got, hv, 8);
    put16(b, 0x7E01); /* a NaN half stays a NaN */
    NT_OK(nu_dequantize(NU_DTYPE_F16, b, got, 1));
    assert_true(isnan(got[0]));
    put16(b, 0x3F80), put16(b + 2, 0xC0A0), put16(b + 4, 0x0001);
    const float bv[3] = {1, -5, 0x1p-133f};
    NT_OK(nu_dequantize(NU_DTYPE_BF16, b, got, 3));
    expect_floats("BF16", got, bv, 3);
    NT_OK(nu_dequantize(NU_DTYPE_F32, hv, got, 8));
    expect_floats("F32", got, hv, 8);
}

/* Several blocks in a row decode each at its own place. */
static void runs_of_blocks(void **state)
{
    (void)state;
    uint8_t b[3 * 34];
    for (int k = 0; k < 3; k++) {
        put16(b + 34 * k, (uint16_t)(0x3C00 + 0x400 * k)); /* 1, 2, 4 */
        for (int j = 0; j < 32; j++)
            b[34 * k + 2 + j] = (uint8_t)(j - 16);
    }
    float y[96];
    NT_OK(nu_dequantize(NU_DTYPE_Q8_0, b, y, 96));
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 32; j++)
            assert_true(y[32 * k + j] == (float)((j - 16) * (1 << k)));
}

static void dequantize_refusals(void **state)
{
    (void)state;
    uint8_t b[210] = {0};
    float y[256];
    y[0] = 7;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_dequantize(NU_DTYPE_Q6_K, b, y, 128));
    assert_non_null(strstr(nu_error_message(NULL), "Q6_K"));
    assert_non_null(strstr(nu_error_message(NULL), "128"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_dequantize(NU_DTYPE_Q4_0, b, y, 33));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_dequantize(NU_DTYPE_Q4_0_SOA, b, y, 32));
    assert_non_null(strstr(nu_error_message(NULL), "Q4_0_SOA"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_dequantize(NU_DTYPE_I32, b, y, 1));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_dequantize(NU_DTYPE_COUNT, b, y, 1));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_dequantize(NU_DTYPE_Q8_0, NULL, y, 32));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_dequantize(NU_DTYPE_Q8_0, b, NULL, 32));
    assert_true(y[0] == 7); /* untouched */
    NT_OK(nu_dequantize(NU_DTYPE_Q8_0, NULL, NULL, 0));
}

/* ---- nu_quantize ---- */

typedef struct format_bound {
    nu_dtype dtype;
    double rms;     /* relative RMS error on normal data at most (docs/quantize.md's table, with room) */
    double element; /* each element's error at most this times its 256-element group's largest magnitude */
} format_bound;

static const format_bound FORMATS[] = {
    {NU_DTYPE_Q8_0, 0.0056, 0.010}, {NU_DTYPE_Q4_0, 0.090, 0.15}, {NU_DTYPE_Q4_1, 0.078, 0.14},
    {NU_DTYPE_Q5_0, 0.045, 0.08},   {NU_DTYPE_Q5_1, 0.038, 0.07}, {NU_DTYPE_Q4_K, 0.078, 0.13},
    {NU_DTYPE_Q5_K, 0.039, 0.07},   {NU_DTYPE_Q6_K, 0.020, 0.03}, {NU_DTYPE_IQ4_NL, 0.085, 0.17},
    {NU_DTYPE_IQ4_XS, 0.085, 0.17}, {NU_DTYPE_F16, 0.0003, 0.0005}, {NU_DTYPE_BF16, 0.0025, 0.004},
    {NU_DTYPE_F32, 0, 0},
};
#define FORMAT_COUNT (sizeof FORMATS / sizeof *FORMATS)

static double normal(uint64_t *st)
{
    double u = ((double)(nt_rand(st) >> 11) + 0.5) / 9007199254740992.0, v = (double)(nt_rand(st) >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static uint64_t bytes_of(nu_dtype t, uint64_t n) { return n / nu_dtype_block_elements(t) * nu_dtype_block_bytes(t); }

/* Quantizes x, decodes it, and checks the relative RMS error (against rms_bound) and each
 * element's error against `element` x its 256-group's largest magnitude + `floor`. */
static void round_trip(const format_bound *f, const char *what, const float *x, uint64_t n, double rms_bound,
                       double floor)
{
    uint8_t *q = malloc(n * 4);
    float *y = malloc(n * 4);
    NT_OK(nu_quantize(f->dtype, x, q, n, NULL));
    NT_OK(nu_dequantize(f->dtype, q, y, n));
    double se = 0, sx = 0;
    for (uint64_t g = 0; g < n / 256; g++) {
        float amax = 0;
        for (int i = 0; i < 256; i++)
            amax = fmaxf(amax, fabsf(x[256 * g + i]));
        for (int i = 0; i < 256; i++) {
            const uint64_t k = 256 * g + i;
            const double e = fabs((double)y[k] - x[k]);
            if (e > f->element * amax + floor)
                fail_msg("%s, %s data: element %llu is %.9g for %.9g (error %.3g > %.3g x %.3g)", nu_dtype_name(f->dtype),
                         what, (unsigned long long)k, y[k], x[k], e, f->element, amax);
            se += e * e, sx += (double)x[k] * x[k];
        }
    }
    if (sx > 0 && sqrt(se / sx) > rms_bound)
        fail_msg("%s, %s data: relative RMS error %.5f above %.5f", nu_dtype_name(f->dtype), what, sqrt(se / sx), rms_bound);
    if (sx == 0 && se != 0)
        fail_msg("%s, %s data: zeros do not come back as zeros", nu_dtype_name(f->dtype), what);
    free(q);
    free(y);
}

static void round_trips(void **state)
{
    (void)state;
    enum { N = 256 * 64 };
    float *x = malloc(N * 4);
    uint64_t st = 7;
    for (size_t k = 0; k < FORMAT_COUNT; k++) {
        const format_bound *f = &FORMATS[k];
        for (int i = 0; i < N; i++)
            x[i] = (float)(0.02 * normal(&st));
        round_trip(f, "normal", x, N, f->rms, 0);
        /* Magnitudes far from 1 quantize alike (the scales are halves: 1e4 still fits every format). */
        for (int i = 0; i < N; i++)
            x[i] = (float)(1e4 * normal(&st));
        round_trip(f, "huge (1e4)", x, N, f->rms, 0);
        for (int i = 0; i < N; i++)
            x[i] = (float)(1e-5 * normal(&st));
        /* Subnormal halves are coarser: twice the error, and BF16 / F16's own floor. */
        round_trip(f, "tiny (1e-5)", x, N, 2 * f->rms + (f->dtype == NU_DTYPE_F16 ? 0.002 : 0), f->dtype == NU_DTYPE_F16 ? 3e-8 : 0);
        /* One outlier a group, 300 times the rest: the rest lose resolution, the bound holds. */
        for (int i = 0; i < N; i++)
            x[i] = (float)(i % 256 == 77 ? 3.0 : 0.01 * normal(&st));
        round_trip(f, "single-outlier", x, N, 1, 0);
        memset(x, 0, N * 4);
        round_trip(f, "all-zero", x, N, 0, 0);
        for (int i = 0; i < N; i++)
            x[i] = 0.37f;
        round_trip(f, "constant", x, N, fmax(1e-3, f->element), 0);
        for (int i = 0; i < N; i++)
            x[i] = -0.37f + (float)(i % 3) * 1e-3f; /* nearly constant, negative */
        round_trip(f, "near-constant", x, N, 1e-2, 0);
        /* Below a half's subnormals every scale is zero or the smallest: the error is the data. */
        for (int i = 0; i < N; i++)
            x[i] = (float)(1e-10 * normal(&st));
        round_trip(f, "negligible (1e-10)", x, N, 1.01, f->dtype == NU_DTYPE_F32 ? 0 : 1e-10 * 6);
    }
    free(x);
}

/* Heavy importances on every eighth element: those come out closer, and the weighted error drops. */
static void importance_weights(void **state)
{
    (void)state;
    enum { N = 256 * 32 };
    float *x = malloc(N * 4), *w = malloc(N * 4), *y = malloc(N * 4);
    uint8_t *q = malloc(N * 2);
    uint64_t st = 11;
    for (int i = 0; i < N; i++)
        x[i] = (float)normal(&st), w[i] = i % 8 == 3 ? 100.0f : 1.0f;
    for (size_t k = 0; k + 3 < FORMAT_COUNT; k++) { /* the block formats */
        const nu_dtype t = FORMATS[k].dtype;
        double e[2][2] = {{0}};
        for (int p = 0; p < 2; p++) {
            NT_OK(nu_quantize(t, x, q, N, p ? w : NULL));
            NT_OK(nu_dequantize(t, q, y, N));
            for (int i = 0; i < N; i++)
                e[p][i % 8 == 3] += (double)(y[i] - x[i]) * (y[i] - x[i]);
        }
        const double heavy = sqrt(e[1][1] / e[0][1]), weighted = (100 * e[1][1] + e[1][0]) / (100 * e[0][1] + e[0][0]);
        if (heavy > 0.85 || weighted > 0.8)
            fail_msg("%s: importance moved the weighted elements' RMS error by x%.3f and the weighted error by x%.3f",
                     nu_dtype_name(t), heavy, weighted);
    }
    /* All-zero importances are no importances; uniform ones change nothing for the 32-element
     * formats (whose searches weigh every element alike). */
    uint8_t *q2 = malloc(N * 2);
    for (int i = 0; i < N; i++)
        w[i] = 0;
    NT_OK(nu_quantize(NU_DTYPE_Q4_K, x, q, N, w));
    NT_OK(nu_quantize(NU_DTYPE_Q4_K, x, q2, N, NULL));
    assert_memory_equal(q, q2, bytes_of(NU_DTYPE_Q4_K, N));
    for (int i = 0; i < N; i++)
        w[i] = 1;
    NT_OK(nu_quantize(NU_DTYPE_Q5_0, x, q, N, w));
    NT_OK(nu_quantize(NU_DTYPE_Q5_0, x, q2, N, NULL));
    assert_memory_equal(q, q2, bytes_of(NU_DTYPE_Q5_0, N));
    free(x), free(w), free(y), free(q), free(q2);
}

static void quantize_refusals(void **state)
{
    (void)state;
    float x[256], w[256];
    uint8_t q[1024];
    for (int i = 0; i < 256; i++)
        x[i] = (float)i / 256, w[i] = 1;
    x[37] = NAN;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_Q4_K, x, q, 256, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "element 37"));
    x[37] = -INFINITY;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_F16, x, q, 256, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "element 37"));
    x[37] = 0;
    w[200] = -1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_Q6_K, x, q, 256, w));
    assert_non_null(strstr(nu_error_message(NULL), "importance 200"));
    w[200] = NAN;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_Q6_K, x, q, 256, w));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_Q4_K, x, q, 128, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "Q4_K"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_Q4_0_SOA, x, q, 32, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_I8, x, q, 32, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_Q8_0, NULL, q, 32, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_Q8_0, x, NULL, 32, NULL));
    NT_OK(nu_quantize(NU_DTYPE_Q8_0, NULL, NULL, 0, NULL));
    /* Values too large for a format's half scales: refused, naming the block; dst is all zeros. */
    static const struct { nu_dtype t; float v; } big[] = {
        {NU_DTYPE_Q4_0, 1e6f}, {NU_DTYPE_Q5_0, 2e6f}, {NU_DTYPE_Q8_0, 1e7f}, {NU_DTYPE_Q4_1, 7e4f},
        {NU_DTYPE_Q5_1, 7e4f}, {NU_DTYPE_IQ4_NL, 1e7f}, {NU_DTYPE_Q4_K, 1e7f}, {NU_DTYPE_Q5_K, 1e7f}, {NU_DTYPE_Q6_K, 1e9f},
        {NU_DTYPE_IQ4_XS, 1e9f}, {NU_DTYPE_F16, 7e4f}};
    for (size_t k = 0; k < sizeof big / sizeof *big; k++) {
        for (int i = 0; i < 256; i++)
            x[i] = (float)(i % 7) / 7;
        x[200] = -big[k].v; /* in the last 32-element block and the first super-block */
        memset(q, 0xAB, sizeof q);
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(big[k].t, x, q, 256, NULL));
        char want[32];
        snprintf(want, sizeof want, "element %d", nu_dtype_block_elements(big[k].t) == 256 ? 0 : big[k].t == NU_DTYPE_F16 ? 200 : 192);
        if (!strstr(nu_error_message(NULL), want))
            fail_msg("%s: the message '%s' does not name %s", nu_dtype_name(big[k].t), nu_error_message(NULL), want);
        for (uint64_t i = 0; i < bytes_of(big[k].t, 256); i++)
            assert_int_equal(q[i], 0);
        /* A tenth of it fits. */
        x[200] = -big[k].v / 10;
        NT_OK(nu_quantize(big[k].t, x, q, 256, NULL));
    }
    x[200] = 3e38f; /* BF16 keeps F32's range: only values that round past it are refused */
    NT_OK(nu_quantize(NU_DTYPE_BF16, x, q, 256, NULL));
    x[200] = 3.4e38f;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_quantize(NU_DTYPE_BF16, x, q, 256, NULL));
}

/* Plain functions: threads quantizing at once get what one thread gets. */
typedef struct job {
    const float *x;
    uint8_t *q;
    uint64_t n;
    nu_status st;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    j->st = nu_quantize(NU_DTYPE_Q4_K, j->x, j->q, j->n, NULL);
    return NULL;
}

static void threads_agree(void **state)
{
    (void)state;
    enum { N = 256 * 64, T = 4 };
    float *x = malloc(N * 4);
    uint64_t st = 5;
    for (int i = 0; i < N; i++)
        x[i] = (float)normal(&st);
    uint8_t *one = malloc(bytes_of(NU_DTYPE_Q4_K, N)), *many = malloc(bytes_of(NU_DTYPE_Q4_K, N));
    NT_OK(nu_quantize(NU_DTYPE_Q4_K, x, one, N, NULL));
    pthread_t tid[T];
    job jobs[T];
    for (int t = 0; t < T; t++) {
        jobs[t] = (job){x + t * (N / T), many + bytes_of(NU_DTYPE_Q4_K, t * (N / T)), N / T, NU_ERROR_IO};
        assert_int_equal(pthread_create(&tid[t], NULL, run_job, &jobs[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(tid[t], NULL);
        NT_OK(jobs[t].st);
    }
    assert_memory_equal(one, many, bytes_of(NU_DTYPE_Q4_K, N));
    free(x), free(one), free(many);
}

/* ---- the GGUF writer's block dtypes ---- */

static void writer_block_dtypes(void **state)
{
    (void)state;
    static const nu_dtype types[] = {NU_DTYPE_Q8_0, NU_DTYPE_Q4_0, NU_DTYPE_Q4_1, NU_DTYPE_Q5_0, NU_DTYPE_Q5_1,
                                     NU_DTYPE_Q4_K, NU_DTYPE_Q5_K, NU_DTYPE_Q6_K, NU_DTYPE_IQ4_NL, NU_DTYPE_IQ4_XS};
    static const char *const names[] = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"};
    enum { T = sizeof types / sizeof *types, N = 2 * 256 };
    float x[N];
    uint64_t st = 3;
    for (int i = 0; i < N; i++)
        x[i] = (float)normal(&st);
    static uint8_t q[T][N * 2];
    char path[512];
    snprintf(path, sizeof path, "%s/quant_blocks.gguf", nt_tmp_dir());
    gguf_writer *w;
    NT_OK(gguf_writer_new(0, &w));
    const uint64_t shape[2] = {2, 256};
    for (int t = 0; t < T; t++) {
        NT_OK(nu_quantize(types[t], x, q[t], N, NULL));
        NT_OK(gguf_writer_tensor(w, names[t], types[t], 2, shape));
    }
    /* Rows of 32 are too short for the 256-element formats. */
    const uint64_t narrow[2] = {2, 32};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, gguf_writer_tensor(w, "narrow", NU_DTYPE_Q4_K, 2, narrow));
    gguf_writer_free(w);
    NT_OK(gguf_writer_new(0, &w));
    for (int t = 0; t < T; t++)
        NT_OK(gguf_writer_tensor(w, names[t], types[t], 2, shape));
    NT_OK(gguf_writer_begin(w, path));
    for (int t = 0; t < T; t++)
        NT_OK(gguf_writer_data(w, q[t], bytes_of(types[t], N)));
    NT_OK(gguf_writer_finish(w));
    gguf_writer_free(w);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t file[64 << 10];
    const size_t size = fread(file, 1, sizeof file, f);
    fclose(f);
    nu_gguf *g;
    NT_OK(nu_gguf_parse(file, size, &g));
    for (int t = 0; t < T; t++) {
        const nu_gguf_tensor_info *info = nu_gguf_find_tensor(g, names[t]);
        assert_non_null(info);
        assert_string_equal(info->type_name, names[t]);
        assert_int_equal(info->size, bytes_of(types[t], N));
        assert_memory_equal(file + info->offset, q[t], info->size);
    }
    nu_gguf_close(g);
}

/* ---- the type chooser ---- */

typedef struct mix_case {
    const char *name;
    uint64_t rows, cols; /* rows 0: a vector of cols */
    nu_dtype want;
} mix_case;

/* Chooses the types of `cases` in order (the order matters: the mix counts layers). */
static void expect_mix(const char *preset, const quant_model *m, const mix_case *cases, size_t n, const char *what)
{
    quant_options o = {quant_find_preset(preset), NU_DTYPE_COUNT, NU_DTYPE_COUNT, false};
    assert_non_null(o.preset);
    quant_walk walk = {0};
    for (size_t i = 0; i < n; i++) {
        const uint64_t shape[2] = {cases[i].rows, cases[i].cols};
        nu_dtype got;
        char note[96];
        NT_OK(quant_choose(&o, m, &walk, cases[i].name, cases[i].rows ? 2 : 1, cases[i].rows ? shape : shape + 1,
                           NU_DTYPE_F16, &got, note, sizeof note));
        if (got != cases[i].want)
            fail_msg("%s, %s: %s is %s, expected %s (%s)", preset, what, cases[i].name, nu_dtype_name(got),
                     nu_dtype_name(cases[i].want), note);
    }
}

/* A 32-layer model's "more bits" layers, written out: the first and last 4, and 6, 9, .., 27. */
static bool more_bits32(int l) { return l < 4 || l >= 28 || (l >= 6 && l <= 27 && l % 3 == 0); }

static void mix_per_tensor(void **state)
{
    (void)state;
    const quant_model m7b = {32, 32, 32, 32, false};
    enum { L = 32 };
    mix_case c[2 + 4 * L];
    char names[4 * L][48];
    const char *presets[] = {"q4_k_m", "q5_k_m", "q4_k_s", "q5_k_s", "q6_k", "iq4_xs", "q4_0", "q8_0"};
    for (size_t p = 0; p < sizeof presets / sizeof *presets; p++) {
        const quant_preset *pr = quant_find_preset(presets[p]);
        const bool km = !strcmp(presets[p], "q4_k_m") || !strcmp(presets[p], "q5_k_m"), ks = !strcmp(presets[p], "q4_k_s");
        const bool iq = !strcmp(presets[p], "iq4_xs");
        size_t n = 0;
        c[n++] = (mix_case){"token_embd.weight", 32000, 4096, pr->base}; /* not tied: the base type */
        for (int l = 0; l < L; l++) {
            snprintf(names[4 * l], 48, "blk.%d.attn_norm.weight", l);
            snprintf(names[4 * l + 1], 48, "blk.%d.attn_q.weight", l);
            snprintf(names[4 * l + 2], 48, "blk.%d.attn_v.weight", l);
            snprintf(names[4 * l + 3], 48, "blk.%d.ffn_down.weight", l);
            const nu_dtype six = more_bits32(l) ? NU_DTYPE_Q6_K : pr->base;
            c[n++] = (mix_case){names[4 * l], 0, 4096, NU_DTYPE_F16}; /* vectors keep their type */
            c[n++] = (mix_case){names[4 * l + 1], 4096, 4096, pr->base};
            c[n++] = (mix_case){names[4 * l + 2], 4096, 4096, km ? six : ks && l < 4 ? NU_DTYPE_Q5_K : pr->base};
            c[n++] = (mix_case){names[4 * l + 3], 4096, 11008,
                                km ? six : (ks || iq) && l < 4 ? NU_DTYPE_Q5_K : pr->base};
        }
        c[n++] = (mix_case){"output.weight", 32000, 4096, pr->base == NU_DTYPE_Q8_0 ? NU_DTYPE_Q8_0 : NU_DTYPE_Q6_K};
        /* 11008 = 43 x 256: ffn_down's rows fit every format. */
        expect_mix(presets[p], &m7b, c, n, "7B");
    }
    /* Tied embeddings (no output.weight): token_embd is the output. */
    const quant_model tied = {4, 4, 4, 4, true};
    const mix_case t1[] = {{"token_embd.weight", 512, 256, NU_DTYPE_Q6_K}};
    expect_mix("q4_k_m", &tied, t1, 1, "tied");
    expect_mix("q4_0", &tied, t1, 1, "tied");
    /* Rows that are not a multiple of 256: the output becomes Q8_0, the rest fall back. */
    const mix_case small[] = {{"token_embd.weight", 512, 64, NU_DTYPE_Q8_0}, {"blk.0.attn_q.weight", 64, 64, NU_DTYPE_Q5_0},
                              {"blk.0.ffn_down.weight", 64, 172, NU_DTYPE_F16}, {"blk.0.ffn_up.weight", 172, 64, NU_DTYPE_Q5_0}};
    expect_mix("q4_k_m", &tied, small, 4, "rows of 64 and 172");
    const mix_case q5[] = {{"blk.0.attn_q.weight", 64, 96, NU_DTYPE_Q5_1}};
    expect_mix("q5_k_s", &tied, q5, 1, "rows of 96");
    const mix_case q6[] = {{"blk.0.attn_q.weight", 64, 96, NU_DTYPE_Q8_0}};
    expect_mix("q6_k", &tied, q6, 1, "rows of 96");
    const mix_case xs[] = {{"blk.0.attn_q.weight", 64, 96, NU_DTYPE_IQ4_NL}, {"blk.0.attn_k.weight", 64, 40, NU_DTYPE_F16}};
    expect_mix("iq4_xs", &tied, xs, 2, "rows of 96 and 40");
    const mix_case q40[] = {{"token_embd.weight", 512, 64, NU_DTYPE_Q8_0}, {"blk.0.attn_q.weight", 64, 64, NU_DTYPE_Q4_0}};
    expect_mix("q4_0", &tied, q40, 2, "Q4_0 with rows of 64");
    /* IQ4 with 4 query heads a KV head: attn_v Q5_K. */
    const quant_model gqa = {32, 32, 8, 32, false};
    const mix_case g1[] = {{"blk.0.attn_v.weight", 1024, 4096, NU_DTYPE_Q5_K}, {"blk.0.attn_k.weight", 1024, 4096, NU_DTYPE_IQ4_NL}};
    expect_mix("iq4_nl", &gqa, g1, 2, "grouped KV heads");
    /* A 70B (80 layers, grouped KV heads): attn_v's Q4_K become Q5_K. */
    const quant_model m70 = {80, 64, 8, 80, false};
    mix_case v70[11];
    for (int l = 0; l < 11; l++) /* layers 0..9 are the first eighth; 10 is not a "more bits" one */
        v70[l] = (mix_case){names[l], 1024, 8192, l < 10 ? NU_DTYPE_Q6_K : NU_DTYPE_Q5_K},
        snprintf(names[l], 48, "blk.%d.attn_v.weight", l);
    expect_mix("q4_k_m", &m70, v70, 11, "70B");
    const mix_case v70s[] = {{"blk.0.attn_v.weight", 1024, 8192, NU_DTYPE_Q5_K}};
    expect_mix("q4_k_s", &m70, v70s, 1, "70B");
    /* F16 / BF16 / F32 file types: matrices take them, vectors keep theirs; odd names keep theirs. */
    const mix_case f[] = {{"blk.0.attn_q.weight", 64, 64, NU_DTYPE_BF16}, {"blk.0.attn_norm.weight", 0, 64, NU_DTYPE_F16},
                          {"rope_freqs", 8, 32, NU_DTYPE_F16}, {"blk.0.ffn_gate_inp.weight", 8, 64, NU_DTYPE_F16},
                          {"blk.0.ffn_down.weight", 64, 172, NU_DTYPE_BF16}};
    expect_mix("bf16", &tied, f, 5, "bf16");

    /* Types set outright, and --pure. */
    quant_options o = {quant_find_preset("q4_k_m"), NU_DTYPE_Q8_0, NU_DTYPE_Q4_K, false};
    quant_walk walk = {0};
    nu_dtype got;
    char note[96];
    const uint64_t wide[2] = {512, 256}, narrow[2] = {512, 64};
    NT_OK(quant_choose(&o, &m7b, &walk, "output.weight", 2, wide, NU_DTYPE_F32, &got, note, sizeof note));
    assert_int_equal(got, NU_DTYPE_Q8_0);
    NT_OK(quant_choose(&o, &m7b, &walk, "token_embd.weight", 2, wide, NU_DTYPE_F32, &got, note, sizeof note));
    assert_int_equal(got, NU_DTYPE_Q4_K);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, quant_choose(&o, &m7b, &walk, "token_embd.weight", 2, narrow, NU_DTYPE_F32, &got,
                                                      note, sizeof note));
    assert_non_null(strstr(tool_error_message(), "token_embd.weight"));
    o = (quant_options){quant_find_preset("q4_k_m"), NU_DTYPE_COUNT, NU_DTYPE_COUNT, true};
    NT_OK(quant_choose(&o, &m7b, &walk, "output.weight", 2, wide, NU_DTYPE_F32, &got, note, sizeof note));
    assert_int_equal(got, NU_DTYPE_Q4_K);
    NT_OK(quant_choose(&o, &m7b, &walk, "blk.0.attn_q.weight", 2, narrow, NU_DTYPE_F32, &got, note, sizeof note));
    assert_int_equal(got, NU_DTYPE_Q5_0); /* the fallback still applies */

    /* Names: llama-quantize's spellings and aliases; its order of tensors. */
    assert_string_equal(quant_find_preset("Q4_K_M")->name, "q4_k_m");
    assert_string_equal(quant_find_preset("q4_k")->name, "q4_k_m");
    assert_string_equal(quant_find_preset("Q5_K")->name, "q5_k_m");
    assert_int_equal(quant_find_preset("IQ4_XS")->file_type, 30);
    assert_int_equal(quant_find_preset("q4_k_m")->file_type, 15);
    assert_null(quant_find_preset("q3_k_m"));
    assert_int_equal(quant_find_type("Q6_K"), NU_DTYPE_Q6_K);
    assert_int_equal(quant_find_type("q4_0_soa"), NU_DTYPE_COUNT);
    assert_true(quant_compare_names("blk.2.attn_v.weight", "blk.10.attn_k.weight") < 0);
    assert_true(quant_compare_names("output.weight", "blk.0.attn_k.weight") < 0);
    assert_true(quant_compare_names("blk.3.attn_k.weight", "blk.3.attn_v.weight") < 0);
    assert_true(quant_is_attn_v("blk.3.attn_v.weight") && quant_is_attn_v("blk.3.attn_qkv.weight") &&
                !quant_is_attn_v("blk.3.attn_k.weight"));
}

/* ---- qz_quantize: a make-gguf file to Q4_K_M, read back by nuvec's GGUF reader ---- */

static uint8_t *read_whole(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*size);
    assert_int_equal(fread(b, 1, *size, f), *size);
    fclose(f);
    return b;
}

static void quantize_a_file(void **state)
{
    (void)state;
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/quant_small.gguf", nt_tmp_dir());
    snprintf(out, sizeof out, "%s/quant_small_q4_k_m.gguf", nt_tmp_dir());
    const make_gguf_options mo = {.shape = make_gguf_find_shape("small"), .dtype = NU_DTYPE_F32, .path = in, .seed = 3,
                                  .layers = 2, .threads = 2};
    NT_OK(make_gguf(&mo, NULL));
    qz_request r = {in, out, {quant_find_preset("q4_k_m"), NU_DTYPE_COUNT, NU_DTYPE_COUNT, false}, 2, false, NULL, NULL};
    qz_result res;
    NT_OK(qz_quantize(&r, &res));
    assert_int_equal(res.tensors, 2 + 9 * 2 + 1);
    size_t in_size, out_size;
    uint8_t *a = read_whole(in, &in_size), *b = read_whole(out, &out_size);
    nu_gguf *ga, *gb;
    NT_OK(nu_gguf_parse(a, in_size, &ga));
    NT_OK(nu_gguf_parse(b, out_size, &gb));
    uint32_t ft;
    NT_OK(nu_gguf_get_u32(gb, "general.file_type", NULL, &ft));
    assert_int_equal(ft, 15);
    /* The mix for 2 layers (layer 1 is a "more bits" one): Q6_K output, attn_v and ffn_down of
     * layer 1, Q4_K the other matrices, F32 the norms; values within the formats' bounds. */
    for (uint64_t i = 0; i < nu_gguf_tensor_count(ga); i++) {
        const nu_gguf_tensor_info *ti = nu_gguf_tensor(ga, i), *to = nu_gguf_find_tensor(gb, ti->name);
        assert_non_null(to);
        const bool six = !strcmp(ti->name, "output.weight") || !strcmp(ti->name, "blk.1.attn_v.weight") ||
                         !strcmp(ti->name, "blk.1.ffn_down.weight");
        const char *want = strstr(ti->name, "norm") ? "f32" : six ? "q6_K" : "q4_K";
        if (strcmp(to->type_name, want))
            fail_msg("%s is %s, expected %s", ti->name, to->type_name, want);
        const uint64_t n = ti->size / 4;
        float *y = malloc(n * 4);
        const nu_dtype t = !strcmp(want, "f32") ? NU_DTYPE_F32 : six ? NU_DTYPE_Q6_K : NU_DTYPE_Q4_K;
        NT_OK(nu_dequantize(t, b + to->offset, y, n));
        const float *x = (const float *)(a + ti->offset);
        double se = 0, sx = 0;
        for (uint64_t k = 0; k < n; k++)
            se += ((double)y[k] - x[k]) * ((double)y[k] - x[k]), sx += (double)x[k] * x[k];
        const double bound = t == NU_DTYPE_F32 ? 0 : t == NU_DTYPE_Q6_K ? 0.020 : 0.078;
        if (sqrt(se / sx) > bound)
            fail_msg("%s: relative RMS error %.4f > %.3f", ti->name, sqrt(se / sx), bound);
        free(y);
    }
    nu_gguf_close(ga);
    nu_gguf_close(gb);
    free(a), free(b);
    /* Refusals leave no file: a Q4_K token_embd set outright on rows of 64 (the tiny shape). */
    const make_gguf_options tiny = {.shape = make_gguf_find_shape("tiny"), .dtype = NU_DTYPE_F16, .path = in, .seed = 3,
                                    .layers = 1, .threads = 1};
    NT_OK(make_gguf(&tiny, NULL));
    remove(out);
    r.mix.embedding_type = NU_DTYPE_Q4_K;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, qz_quantize(&r, &res));
    assert_non_null(strstr(tool_error_message(), "token_embd.weight"));
    FILE *f = fopen(out, "rb");
    assert_null(f);
    r.mix.embedding_type = NU_DTYPE_COUNT;
    r.out = in;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, qz_quantize(&r, &res)); /* OUT is IN */
    remove(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_answer_blocks),
        cmocka_unit_test(runs_of_blocks),
        cmocka_unit_test(dequantize_refusals),
        cmocka_unit_test(round_trips),
        cmocka_unit_test(importance_weights),
        cmocka_unit_test(quantize_refusals),
        cmocka_unit_test(threads_agree),
        cmocka_unit_test(writer_block_dtypes),
        cmocka_unit_test(mix_per_tensor),
        cmocka_unit_test(quantize_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
