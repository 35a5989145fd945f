/* quant.h: what the CPU block codecs share (nuvec/quant.h is their API; dequant.c decodes): the
 * byte layouts of GGUF's blocks as offsets, little-endian field access, the K formats' packed
 * 6-bit scales and the IQ4 codebook. */
#ifndef NU_CORE_QUANT_H
#define NU_CORE_QUANT_H

#include <stdint.h>
#include <string.h>

#include "core/half.h"

/* Byte offsets of the fields (ggml-common.h's structs). */
enum {
    NU__Q4K_D = 0, NU__Q4K_DMIN = 2, NU__Q4K_SCALES = 4, NU__Q4K_QS = 16,                     /* 144 bytes */
    NU__Q5K_D = 0, NU__Q5K_DMIN = 2, NU__Q5K_SCALES = 4, NU__Q5K_QH = 16, NU__Q5K_QS = 48,    /* 176 */
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

#endif
