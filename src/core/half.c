/* half.c: F16 and BF16 conversions (see half.h). */
#include "core/half.h"

#include <math.h>
#include <string.h>

static float from_bits(uint32_t f)
{
    float v;
    memcpy(&v, &f, 4);
    return v;
}

float nu__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1F) /* inf, or a NaN made quiet (its payload kept) */
        return from_bits(sign | 0x7F800000u | (m ? 0x400000u | (m << 13) : 0));
    if (e)
        return from_bits(sign | ((e + 112) << 23) | (m << 13));
    float v = ldexpf((float)m, -24); /* zero or a subnormal half: exact in F32 */
    return sign ? -v : v;
}

uint16_t nu__f32_to_f16(float x)
{
    uint32_t f;
    memcpy(&f, &x, 4);
    uint32_t sign = (f >> 16) & 0x8000u, e = (f >> 23) & 0xFFu, m = f & 0x7FFFFFu;
    if (e == 0xFF) /* inf, NaN (kept quiet) */
        return (uint16_t)(sign | 0x7C00u | (m ? 0x200u | (m >> 13) : 0));
    int exp = (int)e - 127 + 15;
    if (exp >= 31)
        return (uint16_t)(sign | 0x7C00u);
    if (exp <= 0) { /* a subnormal half, or zero */
        if (exp < -10)
            return (uint16_t)sign;
        m |= 0x800000u;
        unsigned shift = (unsigned)(14 - exp);
        uint32_t h = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    /* Round to nearest even without a branch (random weights make one mispredict half the
     * time); a carry out of the mantissa goes into the exponent, up to inf: right. */
    uint32_t h = ((uint32_t)exp << 10) + ((m + 0xFFFu + ((m >> 13) & 1u)) >> 13);
    return (uint16_t)(sign | h);
}

float nu__bf16_to_f32(uint16_t h) { return from_bits((uint32_t)h << 16); }

uint16_t nu__f32_to_bf16(float x)
{
    uint32_t f;
    memcpy(&f, &x, 4);
    if ((f & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((f >> 16) | 0x40u);
    f += 0x7FFFu + ((f >> 16) & 1u);
    return (uint16_t)(f >> 16);
}
