/* quant.c: nu_quantize (nuvec/quant.h): argument and input checks, then each block through its
 * family's encoder (core/quant.h). */
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "core/quant.h"
#include "nuvec/quant.h"

#define FN "nu_quantize"

typedef bool (*block_encoder)(const float *x, const float *imp, uint8_t *y);

static block_encoder encoder(nu_dtype dtype)
{
    switch (dtype) {
    case NU_DTYPE_Q8_0: return nu__encode_q8_0;
    case NU_DTYPE_Q4_0: return nu__encode_q4_0;
    case NU_DTYPE_Q4_1: return nu__encode_q4_1;
    case NU_DTYPE_Q5_0: return nu__encode_q5_0;
    case NU_DTYPE_Q5_1: return nu__encode_q5_1;
    case NU_DTYPE_Q4_K: return nu__encode_q4_k;
    case NU_DTYPE_Q5_K: return nu__encode_q5_k;
    case NU_DTYPE_Q6_K: return nu__encode_q6_k;
    case NU_DTYPE_IQ4_NL: return nu__encode_iq4_nl;
    case NU_DTYPE_IQ4_XS: return nu__encode_iq4_xs;
    default: return NULL;
    }
}

/* The first element of v[0 .. n) that is not finite (or, for importances, negative), or n. */
static uint64_t first_bad(const float *v, uint64_t n, bool nonnegative)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || (nonnegative && v[i] < 0))
            return i;
    return n;
}

/* The largest magnitude of a block, for the message of one that does not fit. */
static float block_amax(const float *x, uint32_t n)
{
    float a = 0;
    for (uint32_t i = 0; i < n; i++)
        a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
    return a;
}

static nu_status refuse_block(nu_dtype dtype, uint8_t *dst, uint64_t bytes, uint64_t at, float amax)
{
    memset(dst, 0, (size_t)bytes); /* no half-quantized output */
    return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT,
                    FN ": the %s block at element %llu (largest magnitude %g) needs a scale beyond a half's "
                    "range (65504): its values are too large for the format",
                    nu_dtype_name(dtype), (unsigned long long)at, (double)amax);
}

/* F16 and BF16: every element rounded; one that becomes an infinity is refused. */
static nu_status to_halves(nu_dtype dtype, const float *src, uint8_t *dst, uint64_t n)
{
    const bool bf = dtype == NU_DTYPE_BF16;
    for (uint64_t i = 0; i < n; i++) {
        const uint16_t h = bf ? nu__f32_to_bf16(src[i]) : nu__f32_to_f16(src[i]);
        if ((h & 0x7FFF) == (bf ? 0x7F80 : 0x7C00)) {
            memset(dst, 0, (size_t)n * 2);
            return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, FN ": element %llu (%g) is beyond %s's range",
                            (unsigned long long)i, (double)src[i], nu_dtype_name(dtype));
        }
        nu__wr16(dst + 2 * i, h);
    }
    return NU_OK;
}

nu_status nu_quantize(nu_dtype dtype, const float *src, void *dst, uint64_t n, const float *importance)
{
    block_encoder f = encoder(dtype);
    const bool plain = dtype == NU_DTYPE_F32 || dtype == NU_DTYPE_F16 || dtype == NU_DTYPE_BF16;
    if (!f && !plain)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT,
                        FN ": dtype %s is not F32, F16, BF16 or a GGUF block format (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
                        "Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
                        nu_dtype_name(dtype));
    const uint32_t per = nu_dtype_block_elements(dtype), bytes = nu_dtype_block_bytes(dtype);
    if (n % per)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT,
                        FN ": %llu elements are not a whole number of %s blocks (%u elements each)",
                        (unsigned long long)n, nu_dtype_name(dtype), per);
    if (n && (!src || !dst))
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, FN ": NULL %s with %llu elements", src ? "dst" : "src",
                        (unsigned long long)n);
    uint64_t bad = first_bad(src, n, false);
    if (bad < n)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, FN ": element %llu is %g: only finite values quantize",
                        (unsigned long long)bad, (double)src[bad]);
    if (importance && (bad = first_bad(importance, n, true)) < n)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT,
                        FN ": importance %llu is %g: importances are finite and not negative", (unsigned long long)bad,
                        (double)importance[bad]);
    uint8_t *y = dst;
    if (dtype == NU_DTYPE_F32) {
        if (n)
            memmove(y, src, (size_t)n * 4);
        return NU_OK;
    }
    if (plain)
        return to_halves(dtype, src, y, n);
    for (uint64_t b = 0; b < n / per; b++) {
        const float *x = src + b * per, *imp = importance ? importance + b * per : NULL;
        /* A block none of whose elements matters is quantized as if nothing were weighted. */
        bool any = false;
        for (uint32_t i = 0; imp && i < per && !any; i++)
            any = imp[i] > 0;
        if (!f(x, any ? imp : NULL, y + b * bytes))
            return refuse_block(dtype, y, n / per * bytes, b * per, block_amax(x, per));
    }
    return NU_OK;
}
