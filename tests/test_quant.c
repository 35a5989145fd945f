/* test_quant.c: the CPU block codecs (nuvec/quant.h). Known-answer blocks (made here from the
 * formats' definitions, field by field) decoded by nu_dequantize; refusals. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_answer_blocks),
        cmocka_unit_test(runs_of_blocks),
        cmocka_unit_test(dequantize_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
