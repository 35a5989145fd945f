/* quant_legacy.c: the 32-element block encoders (core/quant.h): Q8_0, Q4_0, Q5_0 (a scale),
 * Q4_1, Q5_1 (a scale and an offset).
 *
 * llama-quantize (without an importance matrix) writes these with ggml's reference quantizers:
 * the largest magnitude (or the range) onto the outermost level, levels rounded against the
 * unrounded scale. Here that scale is one candidate among several: the least-squares scales of
 * a grid of inverse scales around it (x ~ d * l). Every candidate is realised as it will be
 * stored (the scale rounded to a half, then each level the nearest one for that half, which can
 * only lower each element's error), and the block keeps the candidate of least (importance-
 * weighted) squared error. So each block is at least as close as ggml's reference block. */
#include <math.h>

#include "core/quant.h"

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static bool half_finite(uint16_t h) { return (h & 0x7C00) != 0x7C00; }

static float weight(const float *imp, int i) { return imp ? imp[i] : 1.0f; }

/* ---- one scale: x ~ d * l, l in -nmax .. nmax - 1 ---- */

/* The levels lo .. hi nearest x for the half dh, and their weighted squared error. */
static double levels_symmetric(const float *x, const float *imp, int lo, int hi, uint16_t dh, int8_t *l)
{
    const float ds = nu__f16_to_f32(dh), id = ds != 0 ? 1 / ds : 0;
    double err = 0;
    for (int i = 0; i < 32; i++) {
        l[i] = (int8_t)clampi(nu__round_even(x[i] * id), lo, hi);
        const double e = (double)((float)l[i] * ds) - x[i];
        err += weight(imp, i) * e * e;
    }
    return err;
}

/* The scale d as stored: its nearest half, or for a tiny d, whose nearest half is zero or
 * subnormal, the half at or beyond it where that is closer; *dh and the levels l. */
static double realise_symmetric(const float *x, const float *imp, int lo, int hi, float d, uint16_t *dh, int8_t *l)
{
    *dh = nu__f32_to_f16(d);
    double err = levels_symmetric(x, imp, lo, hi, *dh, l);
    if (nu__half_coarse(*dh, d)) {
        int8_t c[32];
        const uint16_t up = nu__half_at_least(d);
        const double e = levels_symmetric(x, imp, lo, hi, up, c);
        if (e < err) {
            err = e, *dh = up;
            memcpy(l, c, 32);
        }
    }
    return err;
}

/* The best scale of the candidates for 32 values, levels lo .. hi: ggml's (the value of largest
 * magnitude onto lo, or for Q8_0 the largest magnitude onto hi) and the best least-squares scale
 * of 19 inverse scales around it, a tenth of a level apart (each rounded, its scale solved, the
 * least error sum(w x^2) - sumlx^2 / suml2 kept). Both realised; *dh and l get the closer. */
static void search_symmetric(const float *x, const float *imp, int lo, int hi, uint16_t *dh, int8_t *l)
{
    float max = 0, amax = 0;
    for (int i = 0; i < 32; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    const double first = realise_symmetric(x, imp, lo, hi, -lo == hi ? amax / (float)hi : max / (float)lo, dh, l);
    if (amax < NU__QUANT_EPS)
        return;
    float best = 0, scale = 0;
    for (int step = -9; step <= 9; step++) {
        const float iscale = ((float)lo - 0.1f * (float)step) / max;
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < 32; i++) {
            const int q = clampi(nu__round_even(iscale * x[i]), lo, hi);
            sumlx += weight(imp, i) * x[i] * (float)q;
            suml2 += weight(imp, i) * (float)q * (float)q;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    uint16_t h;
    int8_t c[32];
    if (best > 0 && realise_symmetric(x, imp, lo, hi, scale, &h, c) < first) {
        *dh = h;
        memcpy(l, c, 32);
    }
}

bool nu__encode_q8_0(const float *x, const float *imp, uint8_t *y)
{
    uint16_t dh;
    int8_t l[32];
    search_symmetric(x, imp, -127, 127, &dh, l);
    nu__wr16(y, dh);
    memcpy(y + 2, l, 32);
    return half_finite(dh);
}

/* Q4_0 and Q5_0: levels offset by nmax; low nibbles hold elements 0..15, high ones 16..31;
 * Q5_0's fifth bits go to the 32-bit qh (bit j: element j). */
static bool encode_low_bits(const float *x, const float *imp, uint8_t *y, int nmax)
{
    uint16_t dh;
    int8_t l[32];
    search_symmetric(x, imp, -nmax, nmax - 1, &dh, l);
    nu__wr16(y, dh);
    uint8_t *qs = y + (nmax == 8 ? 2 : 6);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const int a = l[j] + nmax, b = l[j + 16] + nmax;
        qs[j] = (uint8_t)((a & 15) | (b & 15) << 4);
        qh |= (uint32_t)(a >> 4) << j | (uint32_t)(b >> 4) << (j + 16);
    }
    if (nmax == 16)
        for (int k = 0; k < 4; k++)
            y[2 + k] = (uint8_t)(qh >> 8 * k);
    return half_finite(dh);
}

bool nu__encode_q4_0(const float *x, const float *imp, uint8_t *y) { return encode_low_bits(x, imp, y, 8); }
bool nu__encode_q5_0(const float *x, const float *imp, uint8_t *y) { return encode_low_bits(x, imp, y, 16); }

/* ---- a scale and an offset: x ~ d * l + m, l in 0 .. nmax ---- */

static double levels_affine(const float *x, const float *imp, int nmax, const uint16_t h[2], uint8_t *l)
{
    const float ds = nu__f16_to_f32(h[0]), ms = nu__f16_to_f32(h[1]), id = ds != 0 ? 1 / ds : 0;
    double err = 0;
    for (int i = 0; i < 32; i++) {
        l[i] = (uint8_t)clampi(nu__round_even((x[i] - ms) * id), 0, nmax);
        const double e = (double)((float)l[i] * ds + ms) - x[i];
        err += weight(imp, i) * e * e;
    }
    return err;
}

/* The scale and offset as stored (the scale as realise_symmetric stores it); h, l and the error. */
static double realise_affine(const float *x, const float *imp, int nmax, float d, float m, uint16_t h[2], uint8_t *l)
{
    h[0] = nu__f32_to_f16(d);
    h[1] = nu__f32_to_f16(m);
    double err = levels_affine(x, imp, nmax, h, l);
    if (nu__half_coarse(h[0], d)) {
        uint8_t c[32];
        const uint16_t up[2] = {nu__half_at_least(d), h[1]};
        const double e = levels_affine(x, imp, nmax, up, c);
        if (e < err) {
            err = e, h[0] = up[0];
            memcpy(l, c, 32);
        }
    }
    return err;
}

static bool encode_affine(const float *x, const float *imp, uint8_t *y, int nmax)
{
    float min = x[0], max = x[0];
    for (int i = 1; i < 32; i++) {
        min = x[i] < min ? x[i] : min;
        max = x[i] > max ? x[i] : max;
    }
    uint16_t h[2], hc[2];
    uint8_t l[32], c[32];
    /* ggml's reference: the range onto the levels, the min as the offset. */
    double best = realise_affine(x, imp, nmax, (max - min) / (float)nmax, min, h, l);
    float w[32], offset;
    for (int i = 0; i < 32; i++)
        w[i] = weight(imp, i);
    const nu__affine_grid grid = {nmax == 15 ? -1.0f : -0.5f, 0.1f, nmax == 15 ? 20 : 15, 0};
    const float d = nu__fit_affine(32, nmax, x, w, c, &offset, &grid);
    if (d > 0 && realise_affine(x, imp, nmax, d, offset, hc, c) < best) {
        memcpy(h, hc, sizeof h);
        memcpy(l, c, 32);
    }
    nu__wr16(y, h[0]);
    nu__wr16(y + 2, h[1]);
    uint8_t *qs = y + (nmax == 15 ? 4 : 8);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((l[j] & 15) | (l[j + 16] & 15) << 4);
        qh |= (uint32_t)(l[j] >> 4) << j | (uint32_t)(l[j + 16] >> 4) << (j + 16);
    }
    if (nmax == 31)
        for (int k = 0; k < 4; k++)
            y[4 + k] = (uint8_t)(qh >> 8 * k);
    return half_finite(h[0]) && half_finite(h[1]);
}

bool nu__encode_q4_1(const float *x, const float *imp, uint8_t *y) { return encode_affine(x, imp, y, 15); }
bool nu__encode_q5_1(const float *x, const float *imp, uint8_t *y) { return encode_affine(x, imp, y, 31); }
