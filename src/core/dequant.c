/* dequant.c: nu_dequantize (nuvec/quant.h): GGUF's blocks back to floats, with ggml's roundings.
 *
 * Every expression below keeps ggml's order of operations, written so that C evaluates it the
 * same way: an integer level becomes a float, then products left to right, then the sum or
 * difference. nuvec builds as ISO C11, where GCC and Clang contract nothing into fused
 * multiply-adds (-ffp-contract=off), so each step rounds as ggml's (its CPU library is built
 * without FMA for these functions too). */
#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "core/quant.h"
#include "nuvec/quant.h"

const int8_t nu__iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void dq_q8_0(const uint8_t *b, float *y)
{
    const float d = nu__rdf16(b);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(int8_t)b[2 + j] * d;
}

static void dq_q4_0(const uint8_t *b, float *y)
{
    const float d = nu__rdf16(b);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 0xF) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

static void dq_q4_1(const uint8_t *b, float *y)
{
    const float d = nu__rdf16(b), m = nu__rdf16(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 0xF) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

/* Q5_0 and Q5_1: bit j of the 32-bit qh is element j's fifth bit. */
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void dq_q5_0(const uint8_t *b, float *y)
{
    const float d = nu__rdf16(b);
    const uint32_t qh = rd32(b + 2);
    for (int j = 0; j < 16; j++) {
        int lo = (int)((b[6 + j] & 0xF) | ((qh >> j) & 1) << 4), hi = (int)((b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
        y[j] = (float)(lo - 16) * d;
        y[j + 16] = (float)(hi - 16) * d;
    }
}

static void dq_q5_1(const uint8_t *b, float *y)
{
    const float d = nu__rdf16(b), m = nu__rdf16(b + 2);
    const uint32_t qh = rd32(b + 4);
    for (int j = 0; j < 16; j++) {
        int lo = (int)((b[8 + j] & 0xF) | ((qh >> j) & 1) << 4), hi = (int)((b[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
        y[j] = (float)lo * d + m;
        y[j + 16] = (float)hi * d + m;
    }
}

static void dq_iq4_nl(const uint8_t *b, float *y)
{
    const float d = nu__rdf16(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)nu__iq4_levels[b[2 + j] & 0xF];
        y[j + 16] = d * (float)nu__iq4_levels[b[2 + j] >> 4];
    }
}

/* Q4_K and Q5_K: 8 sub-blocks of 32; sub-blocks 2i and 2i+1 share the 32 bytes qs[32i ..], low
 * nibbles first; Q5_K adds a fifth bit, bit j (sub-block j) of qh[l]. x = d * sc * q - dmin * m. */
static void dq_k(const uint8_t *b, float *y, bool q5)
{
    const float d = nu__rdf16(b + NU__Q4K_D), dmin = nu__rdf16(b + NU__Q4K_DMIN);
    const uint8_t *ql = b + (q5 ? NU__Q5K_QS : NU__Q4K_QS), *qh = b + NU__Q5K_QH;
    for (int j = 0; j < 8; j += 2, ql += 32) {
        uint8_t sc, m;
        nu__k_scale_min(j, b + NU__Q4K_SCALES, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        nu__k_scale_min(j + 1, b + NU__Q4K_SCALES, &sc, &m);
        const float d2 = d * (float)sc, m2 = dmin * (float)m;
        const uint8_t u1 = (uint8_t)(1u << j), u2 = (uint8_t)(2u << j);
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)((ql[l] & 0xF) + (q5 && (qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)((ql[l] >> 4) + (q5 && (qh[l] & u2) ? 16 : 0)) - m2;
    }
}

static void dq_q4_k(const uint8_t *b, float *y) { dq_k(b, y, false); }
static void dq_q5_k(const uint8_t *b, float *y) { dq_k(b, y, true); }

/* Q6_K: two halves of 128; in each, element l + 32k (k = 0..3) takes a nibble of ql (low nibbles
 * of ql[l], ql[l + 32], then high ones) and bits 2k..2k+1 of qh[l]; 16 signed 8-bit scales, one
 * per 16 elements. x = d * sc * (q - 32). */
static void dq_q6_k(const uint8_t *b, float *y)
{
    const float d = nu__rdf16(b + NU__Q6K_D);
    const uint8_t *ql = b + NU__Q6K_QL, *qh = b + NU__Q6K_QH;
    const int8_t *sc = (const int8_t *)(b + NU__Q6K_SCALES);
    for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = (int)((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
            const int q2 = (int)((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
            const int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            const int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
}

/* IQ4_XS: 8 sub-blocks of 32, each a 6-bit scale (low 4 bits in scales_l, high 2 in scales_h)
 * less 32, over IQ4_NL's levels. */
static void dq_iq4_xs(const uint8_t *b, float *y)
{
    const float d = nu__rdf16(b + NU__IQ4XS_D);
    const uint16_t sh = nu__rd16(b + NU__IQ4XS_SCALES_H);
    const uint8_t *qs = b + NU__IQ4XS_QS;
    for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
        const int ls = ((b[NU__IQ4XS_SCALES_L + ib / 2] >> 4 * (ib % 2)) & 0xF) | ((sh >> 2 * ib) & 3) << 4;
        const float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * (float)nu__iq4_levels[qs[j] & 0xF];
            y[j + 16] = dl * (float)nu__iq4_levels[qs[j] >> 4];
        }
    }
}

typedef void (*block_decoder)(const uint8_t *block, float *out);

static block_decoder decoder(nu_dtype dtype)
{
    switch (dtype) {
    case NU_DTYPE_Q8_0: return dq_q8_0;
    case NU_DTYPE_Q4_0: return dq_q4_0;
    case NU_DTYPE_Q4_1: return dq_q4_1;
    case NU_DTYPE_Q5_0: return dq_q5_0;
    case NU_DTYPE_Q5_1: return dq_q5_1;
    case NU_DTYPE_Q4_K: return dq_q4_k;
    case NU_DTYPE_Q5_K: return dq_q5_k;
    case NU_DTYPE_Q6_K: return dq_q6_k;
    case NU_DTYPE_IQ4_NL: return dq_iq4_nl;
    case NU_DTYPE_IQ4_XS: return dq_iq4_xs;
    default: return NULL;
    }
}

nu_status nu_dequantize(nu_dtype dtype, const void *src, float *dst, uint64_t n)
{
    block_decoder f = decoder(dtype);
    bool plain = dtype == NU_DTYPE_F32 || dtype == NU_DTYPE_F16 || dtype == NU_DTYPE_BF16;
    if (!f && !plain)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT,
                        "nu_dequantize: dtype %s is not F32, F16, BF16 or a GGUF block format (Q8_0, Q4_0, Q4_1, Q5_0, "
                        "Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
                        nu_dtype_name(dtype));
    const uint64_t per = nu_dtype_block_elements(dtype), bytes = nu_dtype_block_bytes(dtype);
    if (n % per)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT,
                        "nu_dequantize: %llu elements are not a whole number of %s blocks (%llu elements each)",
                        (unsigned long long)n, nu_dtype_name(dtype), (unsigned long long)per);
    if (n && (!src || !dst))
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_dequantize: NULL %s with %llu elements",
                        src ? "dst" : "src", (unsigned long long)n);
    const uint8_t *b = src;
    if (dtype == NU_DTYPE_F32 && n)
        memcpy(dst, src, (size_t)n * 4);
    else if (dtype == NU_DTYPE_F16)
        for (uint64_t i = 0; i < n; i++)
            dst[i] = nu__rdf16(b + 2 * i);
    else if (dtype == NU_DTYPE_BF16)
        for (uint64_t i = 0; i < n; i++)
            dst[i] = nu__bf16_to_f32(nu__rd16(b + 2 * i));
    else
        for (uint64_t i = 0; i < n / per; i++)
            f(b + i * bytes, dst + i * per);
    return NU_OK;
}

void nu__dequantize_block(nu_dtype dtype, const uint8_t *block, float *out) { decoder(dtype)(block, out); }
