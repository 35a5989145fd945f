/* quant_fit.c: the scale searches the block quantizers share (core/quant.h).
 *
 * Each fits a group of values x (weights w) with levels l of a small integer range and one scale
 * (x ~ d * l, "symmetric"), a scale and an offset (x ~ d * l + m, "affine") or a scale over the
 * IQ4 codebook (x ~ d * level[l]). Rounding to levels is not linear, so the fits try a grid of
 * inverse scales around the obvious one (largest magnitude onto the largest level), round at
 * each, solve the weighted least-squares scale (and offset) for those levels, and keep the grid
 * point whose fit has the least weighted squared error. That is what ggml's make_qx_quants,
 * make_qkx2_quants and the IQ4 search do; the grids are theirs, so that files made here are
 * at least as good as llama-quantize's (quant.c then judges whole blocks by their real error). */
#include <math.h>

#include "core/quant.h"

bool nu__half_coarse(uint16_t h, float v) { return v != 0 && (h & 0x7C00) == 0; }

uint16_t nu__half_at_least(float v)
{
    uint16_t h = nu__f32_to_f16(v);
    if ((h & 0x7FFF) < 0x7C00 && fabsf(nu__f16_to_f32(h)) < fabsf(v))
        h++; /* the next half away from zero (the sign bit is apart) */
    return h;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

float nu__fit_symmetric(int n, int nmax, const float *x, const float *w, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < NU__QUANT_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    /* The value of largest magnitude maps onto -nmax (the range is -nmax .. nmax - 1), then
     * 18 inverse scales around it, a tenth of a level apart. */
    float best = 0, scale = 0;
    for (int step = 0; step <= 18; step++) {
        const float iscale = -((float)nmax + 0.1f * (float)(step == 0 ? 0 : step <= 9 ? step - 10 : step - 9)) / max;
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nu__round_even(iscale * x[i]), -nmax, nmax - 1);
            const float wi = w ? w[i] : x[i] * x[i];
            sumlx += wi * x[i] * (float)l;
            suml2 += wi * (float)l * (float)l;
        }
        /* The least-squares scale sumlx / suml2 leaves an error of sum(w x^2) - sumlx^2 / suml2:
         * the largest sumlx^2 / suml2 wins. */
        if (suml2 > 0 && (step == 0 || sumlx * sumlx > best * suml2)) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(nu__round_even(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        } else if (step == 0) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(nu__round_even(iscale * x[i]), -nmax, nmax - 1));
        }
    }
    return scale;
}

float nu__fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *offset,
                     const nu__affine_grid *g)
{
    float min = x[0], max = x[0], sum_w = 0, sum_x = 0;
    for (int i = 0; i < n; i++) {
        min = x[i] < min ? x[i] : min;
        max = x[i] > max ? x[i] : max;
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (g->offset_nonpositive && min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *offset = min;
        return 0;
    }
    /* First the range onto the levels as it is, then the grid of inverse scales. */
    float iscale = (float)nmax / (max - min), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nu__round_even(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * (float)L[i] + min - x[i];
        best += w[i] * (diff * diff);
    }
    uint8_t aux[256];
    for (int step = 0; step <= g->steps; step++) {
        iscale = (g->first + g->delta * (float)step + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nu__round_even(iscale * (x[i] - min)), 0, nmax);
            aux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        /* Weighted least squares of x ~ s * l + m: the 2 x 2 normal equations. */
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0))
            continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / D, m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (g->offset_nonpositive && m > 0) {
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            const float diff = s * (float)aux[i] + m - x[i];
            err += w[i] * (diff * diff);
        }
        if (err < best) {
            memcpy(L, aux, (size_t)n);
            best = err;
            scale = s;
            min = m;
        }
    }
    *offset = min;
    return scale;
}

float nu__fit_iq4(int n, const float *x, const float *w)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < NU__QUANT_EPS)
        return 0;
    /* The value of largest magnitude onto the outermost level (-127), then 15 inverse scales a
     * level apart around it; each judged by its least-squares scale. */
    const float first = (float)nu__iq4_levels[0];
    float d = -max / first, best = 0, scale = 0;
    for (int step = -8; step <= 7; step++) {
        const float id = step < -7 ? 1 / d : ((float)step + first) / max;
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < n; i++) {
            const float q = (float)nu__iq4_levels[nu__iq4_nearest(id * x[i])];
            sumqx += w[i] * q * x[i];
            sumq2 += w[i] * q * q;
        }
        if (step < -7) {
            scale = sumq2 > 0 ? sumqx / sumq2 : 0;
            best = scale * sumqx;
        } else if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
        }
    }
    return scale;
}
