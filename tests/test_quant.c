/* test_quant.c: the CPU block codecs (nuvec/quant.h). Known-answer blocks (made here from the
 * formats' definitions, field by field) decoded by nu_dequantize; round trips of nu_quantize on
 * several kinds of data against the error bounds docs/quantize.md gives; importances;
 * refusals; threads. */
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

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
            assert_true(y[32 * k + j] == (float)((j - 16) << k));
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
