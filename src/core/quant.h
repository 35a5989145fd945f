/* quant.h: what the CPU block codecs share (nuvec/quant.h is their API): the byte layouts of
 * GGUF's blocks as offsets, little-endian field access, the K formats' packed 6-bit scales, the
 * IQ4 codebook, one block's decoder (dequant.c), the scale searches (quant_fit.c) and each
 * family's block encoder (quant_legacy.c: the 32-element formats, quant_k.c: Q4_K, Q5_K, Q6_K,
 * IQ4_NL and IQ4_XS); quant.c checks nu_quantize's arguments and runs the encoders.
 *
 * An encoder takes one block of finite floats x and, unless NULL, their importances imp (>= 0,
 * not all zero), and writes the block at y. It returns false when a scale the block needs does
 * not fit an IEEE half (the block's magnitudes are too large for the format): quant.c refuses
 * the input then. */
#ifndef NU_CORE_QUANT_H
#define NU_CORE_QUANT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "nuvec/dtype.h"

/* Byte offsets of the fields (ggml-common.h's structs). */
enum {
    NU__Q4K_D = 0, NU__Q4K_DMIN = 2, NU__Q4K_SCALES = 4, NU__Q4K_QS = 16,                     /* 144 bytes */
    NU__Q5K_QH = 16, NU__Q5K_QS = 48, /* 176 bytes: d, dmin and scales as Q4_K's */
    NU__Q6K_QL = 0, NU__Q6K_QH = 128, NU__Q6K_SCALES = 192, NU__Q6K_D = 208,                  /* 210 */
    NU__IQ4XS_D = 0, NU__IQ4XS_SCALES_H = 2, NU__IQ4XS_SCALES_L = 4, NU__IQ4XS_QS = 8,        /* 136 */
};

/* IQ4_NL's and IQ4_XS's 16 levels (ggml's kvalues_iq4nl). */
extern const int8_t nu__iq4_levels[16];

static inline uint16_t nu__rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline void nu__wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline float nu__rdf16(const uint8_t *p) { return nu__f16_to_f32(nu__rd16(p)); }

/* Q4_K's and Q5_K's scale and min of sub-block j (0..7), 6 bits each, from the 12 packed bytes. */
static inline void nu__k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Groups whose largest magnitude is below this are all zeros (ggml's GROUP_MAX_EPS). */
#define NU__QUANT_EPS 1e-15f

/* One block of `dtype` (a block format of nuvec/quant.h) decoded into out. */
void nu__dequantize_block(nu_dtype dtype, const uint8_t *block, float *out);

/* Whether the half h of a nonzero scale v is zero or subnormal: too coarse to be the only try. */
bool nu__half_coarse(uint16_t h, float v);
/* The half nearest v at or beyond it in magnitude (the smallest subnormal for a tiny v != 0). */
uint16_t nu__half_at_least(float v);

/* x rounded to the nearest integer, ties to even (|x| clamped below 2^22). In line: the searches
 * call it for every element at every step. */
static inline int nu__round_even(float x)
{
    /* Adding 1.5 * 2^23 leaves the integer part, rounded to nearest even by the FPU, in the low
     * mantissa bits; exact for |x| < 2^22, hence the clamp (levels are far smaller). */
    if (!(x < 4194303.0f))
        x = 4194303.0f;
    else if (!(x > -4194303.0f))
        x = -4194303.0f;
    const float v = x + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &v, 4);
    return (bits & 0x7FFFFF) - 0x400000;
}

/* Fits n values with d * (L - nmax), L in 0 .. 2 nmax - 1; returns d (0 for an all-zero group).
 * The least-squares error is weighted by w, or by x^2 when w is NULL. */
float nu__fit_symmetric(int n, int nmax, const float *x, const float *w, int8_t *L);

/* The inverse scales an affine fit tries: (nmax + first + delta * k) / range, k = 0 .. steps. */
typedef struct nu__affine_grid {
    float first, delta;
    int steps;
    int offset_nonpositive; /* the K formats store a non-negative min subtracted: offset <= 0 */
} nu__affine_grid;

/* Fits n (at most 256) values with d * L + *offset, L in 0 .. nmax; returns d. */
float nu__fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *offset,
                     const nu__affine_grid *grid);

/* The index of the IQ4 level nearest to v (the lower one on a tie, as ggml). */
static inline int nu__iq4_nearest(float v)
{
    const int8_t *lv = nu__iq4_levels;
    if (v <= lv[0])
        return 0;
    if (v >= lv[15])
        return 15;
    int lo = 0, hi = 15; /* lv[lo] <= v < lv[hi] */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < lv[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - lv[lo] < lv[hi] - v ? lo : hi;
}
/* The scale that fits n values best over the IQ4 levels (weighted by w; 0 for an all-zero group). */
float nu__fit_iq4(int n, const float *x, const float *w);

bool nu__encode_q8_0(const float *x, const float *imp, uint8_t *y);
bool nu__encode_q4_0(const float *x, const float *imp, uint8_t *y);
bool nu__encode_q5_0(const float *x, const float *imp, uint8_t *y);
bool nu__encode_q4_1(const float *x, const float *imp, uint8_t *y);
bool nu__encode_q5_1(const float *x, const float *imp, uint8_t *y);
bool nu__encode_q4_k(const float *x, const float *imp, uint8_t *y);
bool nu__encode_q5_k(const float *x, const float *imp, uint8_t *y);
bool nu__encode_q6_k(const float *x, const float *imp, uint8_t *y);
bool nu__encode_iq4_nl(const float *x, const float *imp, uint8_t *y);
bool nu__encode_iq4_xs(const float *x, const float *imp, uint8_t *y);

#endif
