/* quant_k.c: the super-block encoders (core/quant.h): Q4_K, Q5_K (8 sub-blocks of 32, each a
 * 6-bit scale and min under two half super-scales), Q6_K (16 sub-blocks of 16 under 8-bit scales
 * and one half), and the IQ4 codebook formats IQ4_NL (one half per 32) and IQ4_XS (8 sub-blocks
 * of 32, 6-bit scales under one half).
 *
 * What llama-quantize does for them without an importance matrix, done the same way here: each
 * sub-block fitted on its own (weights |x| + its RMS for Q4_K and Q5_K, x^2 for Q6_K and IQ4, as
 * ggml weighs them), its scale (and min) then quantized against the largest one, and finally
 * every element's level chosen again for the scales as they are stored (halves and 6- or 8-bit
 * sub-scales). An importance multiplies those weights. */
#include <math.h>

#include "core/quant.h"

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static bool half_finite(uint16_t h) { return (h & 0x7C00) != 0x7C00; }

/* The 12 bytes of eight 6-bit scales and mins (nu__k_scale_min reads them back). */
static void pack_k_scales(const uint8_t *ls, const uint8_t *lm, uint8_t *q)
{
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)(ls[j] | (ls[j + 4] >> 4) << 6);
        q[j + 4] = (uint8_t)(lm[j] | (lm[j + 4] >> 4) << 6);
        q[j + 8] = (uint8_t)((ls[j + 4] & 15) | (lm[j + 4] & 15) << 4);
    }
}

static float weight(const float *imp, int i) { return imp ? imp[i] : 1.0f; }

/* A Q4_K / Q5_K sub-block of 32 under d = scale x sc and dm = dmin x m as stored: the nearest
 * levels L (0 .. nmax; any when d is 0: the sub-block is then -dm) and the weighted squared
 * error, computed as the decoder computes the values. `divide`: levels by (x + dm) / d, as ggml
 * rounds them (the first candidate); else by a product with 1 / d (the neighbours: cheaper). */
static double k_sub_block(const float *x, const float *imp, float d, float dm, int nmax, bool divide, uint8_t *L)
{
    double err = 0;
    const float id = d != 0 ? 1 / d : 0;
    for (int l = 0; l < 32; l++) {
        const float v = divide && d != 0 ? (x[l] + dm) / d : (x[l] + dm) * id;
        L[l] = (uint8_t)clampi(nu__round_even(v), 0, nmax);
        const float e = d * (float)L[l] - dm - x[l];
        err += weight(imp, l) * (double)(e * e);
    }
    return err;
}

/* The super-block's sub-scales and mins as 6-bit multiples of the stored halves dh and mh: each
 * rounded (against max / 63 as ggml rounds them when `ggml`, else against the stored value) and
 * then that pair or a neighbour, whichever leaves its sub-block closest. Levels into L; returns
 * the super-block's weighted squared error. */
static double k_sub_scales(const float *x, const float *imp, const float *scales, const float *mins, float max_scale,
                           float max_min, uint16_t dh, uint16_t mh, bool ggml, int nmax, uint8_t *ls, uint8_t *lm,
                           uint8_t *L)
{
    const float ds = nu__f16_to_f32(dh), ms = nu__f16_to_f32(mh);
    const float inv_scale = ggml ? (max_scale > 0 ? 63 / max_scale : 0) : ds > 0 ? 1 / ds : 0;
    const float inv_min = ggml ? (max_min > 0 ? 63 / max_min : 0) : ms > 0 ? 1 / ms : 0;
    double total = 0;
    for (int j = 0; j < 8; j++) {
        const int s0 = clampi(nu__round_even(inv_scale * scales[j]), 0, 63);
        const int m0 = clampi(nu__round_even(inv_min * mins[j]), 0, 63);
        const float *xs = x + 32 * j, *is = imp ? imp + 32 * j : NULL;
        double best = k_sub_block(xs, is, ds * (float)s0, ms * (float)m0, nmax, true, L + 32 * j);
        ls[j] = (uint8_t)s0, lm[j] = (uint8_t)m0;
        uint8_t c[32];
        for (int a = s0 > 0 ? s0 - 1 : 0; a <= s0 + 1 && a <= 63; a++)
            for (int b = m0 > 0 ? m0 - 1 : 0; b <= m0 + 1 && b <= 63; b++) {
                if (a == s0 && b == m0)
                    continue;
                const double e = k_sub_block(xs, is, ds * (float)a, ms * (float)b, nmax, false, c);
                if (e < best) {
                    best = e;
                    ls[j] = (uint8_t)a, lm[j] = (uint8_t)b;
                    memcpy(L + 32 * j, c, 32);
                }
            }
        total += best;
    }
    return total;
}

/* Q4_K (nmax 15) and Q5_K (31): x ~ d * sc * l - dmin * m. */
static bool encode_k(const float *x, const float *imp, uint8_t *y, int nmax)
{
    const nu__affine_grid grid = nmax == 15 ? (nu__affine_grid){-1.0f, 0.1f, 20, 1} : (nu__affine_grid){-0.5f, 0.1f, 15, 1};
    uint8_t L[256], ls[8], lm[8];
    float scales[8], mins[8], w[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0, offset;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        const float av = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = (av + fabsf(xs[l])) * (imp ? imp[32 * j + l] : 1.0f);
        scales[j] = nu__fit_affine(32, nmax, xs, w, L + 32 * j, &offset, &grid);
        mins[j] = -offset;
        max_scale = scales[j] > max_scale ? scales[j] : max_scale;
        max_min = mins[j] > max_min ? mins[j] : max_min;
    }
    /* The super-scales: the nearest halves of max / 63 (ggml's), and, where one of those is not
     * a normal half (tiny values), the halves at or above them with sub-scales against those. */
    uint16_t dh = nu__f32_to_f16(max_scale / 63), mh = nu__f32_to_f16(max_min / 63);
    double err = k_sub_scales(x, imp, scales, mins, max_scale, max_min, dh, mh, true, nmax, ls, lm, L);
    if (nu__half_coarse(dh, max_scale) || nu__half_coarse(mh, max_min)) {
        uint8_t ls2[8], lm2[8], L2[256];
        const uint16_t dh2 = nu__half_at_least(max_scale / 63), mh2 = nu__half_at_least(max_min / 63);
        if (k_sub_scales(x, imp, scales, mins, max_scale, max_min, dh2, mh2, false, nmax, ls2, lm2, L2) < err) {
            dh = dh2, mh = mh2;
            memcpy(ls, ls2, 8), memcpy(lm, lm2, 8), memcpy(L, L2, 256);
        }
    }
    const bool q5 = nmax == 31;
    nu__wr16(y, dh);
    nu__wr16(y + 2, mh);
    pack_k_scales(ls, lm, y + 4);
    uint8_t *qs = y + (q5 ? NU__Q5K_QS : NU__Q4K_QS), *qh = y + NU__Q5K_QH;
    if (q5)
        memset(qh, 0, 32);
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++) {
            const uint8_t q = L[32 * j + l];
            if (j % 2 == 0)
                qs[32 * (j / 2) + l] = q & 15;
            else
                qs[32 * (j / 2) + l] |= (uint8_t)((q & 15) << 4);
            if (q5)
                qh[l] |= (uint8_t)((q >> 4) << j);
        }
    return half_finite(dh) && half_finite(mh);
}

bool nu__encode_q4_k(const float *x, const float *imp, uint8_t *y) { return encode_k(x, imp, y, 15); }
bool nu__encode_q5_k(const float *x, const float *imp, uint8_t *y) { return encode_k(x, imp, y, 31); }

/* The error of a sub-block under scale d as stored; its levels (`bytes` of them) into `levels`. */
typedef double (*sub_fit)(const float *x, const float *imp, float d, void *levels);

/* A sub-block's integer scale s0 or a neighbour (within lo .. hi), whichever leaves it closest
 * under the stored super-scale ds; adds its error to *total and returns the scale. */
static int best_neighbour(int s0, int lo, int hi, float ds, const float *x, const float *imp, sub_fit fit, void *levels,
                          size_t bytes, double *total)
{
    uint8_t c[32];
    int s = s0;
    double best = fit(x, imp, ds * (float)s0, levels);
    for (int a = s0 - 1; a <= s0 + 1; a += 2) {
        if (a < lo || a > hi)
            continue;
        const double e = fit(x, imp, ds * (float)a, c);
        if (e < best) {
            best = e;
            s = a;
            memcpy(levels, c, bytes);
        }
    }
    *total += best;
    return s;
}

/* A Q6_K sub-block of 16 under d = scale x sc as stored: levels (0 .. 63, offset by 32; any when
 * d is 0) and the weighted squared error, computed as the decoder does. */
static double q6_sub_block(const float *x, const float *imp, float d, void *levels)
{
    int8_t *L = levels;
    double err = 0;
    for (int l = 0; l < 16; l++) {
        const int q = d != 0 ? clampi(nu__round_even(x[l] / d), -32, 31) : 0;
        L[l] = (int8_t)(q + 32);
        const double e = (double)(d * (float)q) - x[l];
        err += weight(imp, l) * e * e;
    }
    return err;
}

/* Q6_K's 16 sub-scales under the stored half dh, each rounded (scale x iscale) and then it or a
 * neighbour, whichever leaves its 16 values closest. Levels into L; returns the weighted squared
 * error. */
static double q6_sub_scales(const float *x, const float *imp, const float *scales, float iscale, uint16_t dh, int8_t *sc,
                            int8_t *L)
{
    const float ds = nu__f16_to_f32(dh);
    double total = 0;
    for (int ib = 0; ib < 16; ib++) {
        const int s0 = clampi(nu__round_even(iscale * scales[ib]), -128, 127);
        sc[ib] = (int8_t)best_neighbour(s0, -128, 127, ds, x + 16 * ib, imp ? imp + 16 * ib : NULL, q6_sub_block,
                                        L + 16 * ib, 16, &total);
    }
    return total;
}

/* Q6_K: x ~ d * sc * (l - 32), l in 0 .. 63, sc a signed byte per 16 elements. */
bool nu__encode_q6_k(const float *x, const float *imp, uint8_t *y)
{
    int8_t L[256];
    float scales[16], w[16], max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 16; ib++) {
        const float *xs = x + 16 * ib;
        if (imp)
            for (int l = 0; l < 16; l++)
                w[l] = xs[l] * xs[l] * imp[16 * ib + l];
        scales[ib] = nu__fit_symmetric(16, 32, xs, imp ? w : NULL, L + 16 * ib);
        if (fabsf(scales[ib]) > amax_scale) {
            amax_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    memset(y, 0, 210);
    if (amax_scale < NU__QUANT_EPS)
        return true; /* all zeros */
    /* The largest sub-scale onto -128 (ggml's), and for tiny values, whose half would not be a
     * normal one, the half at or beyond it with sub-scales against that. */
    int8_t *sc = (int8_t *)(y + NU__Q6K_SCALES), sc2[16], L2[256];
    const float iscale = -128 / max_scale;
    uint16_t dh = nu__f32_to_f16(1 / iscale);
    const double err = q6_sub_scales(x, imp, scales, iscale, dh, sc, L);
    if (nu__half_coarse(dh, max_scale)) {
        const uint16_t dh2 = nu__half_at_least(1 / iscale);
        if (q6_sub_scales(x, imp, scales, 1 / nu__f16_to_f32(dh2), dh2, sc2, L2) < err) {
            dh = dh2;
            memcpy(sc, sc2, 16), memcpy(L, L2, 256);
        }
    }
    nu__wr16(y + NU__Q6K_D, dh);
    uint8_t *ql = y + NU__Q6K_QL, *qh = y + NU__Q6K_QH;
    for (int h = 0; h < 2; h++, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            const int q1 = L[128 * h + l], q2 = L[128 * h + l + 32], q3 = L[128 * h + l + 64], q4 = L[128 * h + l + 96];
            ql[l] = (uint8_t)((q1 & 15) | (q3 & 15) << 4);
            ql[l + 32] = (uint8_t)((q2 & 15) | (q4 & 15) << 4);
            qh[l] = (uint8_t)(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
        }
    return half_finite(dh);
}

/* ---- IQ4 ---- */

/* 32 values' nearest IQ4 levels for the stored scale ds, packed as IQ4_NL's qs; returns their
 * weighted squared error, computed as the decoder does. */
static double iq4_levels(const float *x, const float *imp, float ds, void *levels)
{
    uint8_t *qs = levels;
    const float id = ds != 0 ? 1 / ds : 0;
    double err = 0;
    int q[32];
    for (int j = 0; j < 32; j++) {
        q[j] = nu__iq4_nearest(id * x[j]);
        const double e = (double)(ds * (float)nu__iq4_levels[q[j]]) - x[j];
        err += weight(imp, j) * e * e;
    }
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
    return err;
}

static void iq4_weights(const float *x, const float *imp, float *w)
{
    for (int j = 0; j < 32; j++)
        w[j] = x[j] * x[j] * (imp ? imp[j] : 1.0f);
}

bool nu__encode_iq4_nl(const float *x, const float *imp, uint8_t *y)
{
    float w[32];
    iq4_weights(x, imp, w);
    /* The nearest half of the scale, or for a tiny one the half beyond it where that is closer
     * (IQ4 has no zero level: a zero scale is what makes tiny values zeros). */
    const float d = nu__fit_iq4(32, x, w);
    uint16_t dh = nu__f32_to_f16(d);
    const double err = iq4_levels(x, imp, nu__f16_to_f32(dh), y + 2);
    uint8_t qs[16];
    if (nu__half_coarse(dh, d) && iq4_levels(x, imp, nu__f16_to_f32(nu__half_at_least(d)), qs) < err) {
        dh = nu__half_at_least(d);
        memcpy(y + 2, qs, 16);
    }
    nu__wr16(y, dh);
    return half_finite(dh);
}

/* IQ4_XS's sub-scales (6-bit, -32 .. 31) under the stored half dh, each the rounded one or a
 * neighbour, whichever is closest as stored; writes every field but d, returns the error. */
static double iq4xs_sub_scales(const float *x, const float *imp, const float *scales, uint16_t dh, uint8_t *y)
{
    const float ds = nu__f16_to_f32(dh), id = ds != 0 ? 1 / ds : 0;
    uint16_t sh = 0;
    double total = 0;
    memset(y + NU__IQ4XS_SCALES_L, 0, 4);
    for (int ib = 0; ib < 8; ib++) {
        const int l0 = clampi(nu__round_even(id * scales[ib]), -32, 31);
        const int l = best_neighbour(l0, -32, 31, ds, x + 32 * ib, imp ? imp + 32 * ib : NULL, iq4_levels,
                                     y + NU__IQ4XS_QS + 16 * ib, 16, &total);
        y[NU__IQ4XS_SCALES_L + ib / 2] |= (uint8_t)(((l + 32) & 15) << 4 * (ib % 2));
        sh |= (uint16_t)(((l + 32) >> 4) << 2 * ib);
    }
    nu__wr16(y + NU__IQ4XS_SCALES_H, sh);
    return total;
}

bool nu__encode_iq4_xs(const float *x, const float *imp, uint8_t *y)
{
    float w[32], scales[8], max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 8; ib++) {
        iq4_weights(x + 32 * ib, imp ? imp + 32 * ib : NULL, w);
        scales[ib] = nu__fit_iq4(32, x + 32 * ib, w);
        if (fabsf(scales[ib]) > amax_scale) {
            amax_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    /* The largest sub-scale onto -32, its half the nearest or, for tiny values, the one beyond. */
    const float d = -max_scale / 32;
    uint16_t dh = nu__f32_to_f16(d);
    const double err = iq4xs_sub_scales(x, imp, scales, dh, y);
    uint8_t other[136];
    if (nu__half_coarse(dh, d) && iq4xs_sub_scales(x, imp, scales, nu__half_at_least(d), other) < err) {
        dh = nu__half_at_least(d);
        memcpy(y, other, 136);
    }
    nu__wr16(y + NU__IQ4XS_D, dh);
    return half_finite(dh);
}
