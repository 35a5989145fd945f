// quant.glsl: GGUF's block formats as the shaders read them: one decoding function per format,
// the only place a shader learns a block's layout (nuvec/tensor.h documents the layouts; ggml's
// ggml-common.h defines them). Every kernel that reads blocks (copy, gather, the matrix-vector
// products' float and dot paths, the tiled matrix product) decodes them here.
//
// Include it once per binding that holds blocks, after ops.glsl and that binding's NU_TENSOR,
// with NU_QB defined as the binding's name:
//     #define NU_QB w
//     #include "quant.glsl"
// which defines w_group(dt, hb, g, q, dm), w_dequant8(dt, hb, g, v), w_half(h) and w_bytes4/8(h)
// on binding w (NU_QB is undefined again at the end). hb is the block's first 16-bit half in the
// binding (blocks are 2-byte aligned: nothing wider can be assumed of an 18-byte block), except
// where the caller knows better: w_group_even and the K formats' decoders with `even` true read
// super-blocks that start on whole 32-bit words as words.
//
// The unit of decoding is a group: 8 consecutive elements of a block (group g holds elements
// 8g..8g+7: 4 groups a 32-element block, 32 a 256-element super-block), which share their scales.
// A group decodes to
//   q:  its 8 quants as bytes (two words, element 8g + i in byte i % 4 of word i / 4): the raw
//       unsigned quant (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K: 0..31; Q6_K: 0..63), or a signed byte
//       (Q8_0's q, IQ4_NL's and IQ4_XS's codebook values). Read as signed bytes all are right
//       (the unsigned ones are below 128), so integer dot products take them as they are;
//   dm: (D, M) such that element i is D * (q_i + nu_q_offset(dt)) + M, M added only where
//       nu_q_has_min(dt) (Q4_1, Q5_1, Q4_K, Q5_K: elsewhere nothing is added, so -0 stays -0).
// D and M are ggml's own intermediate values (the K formats' d * scale and -(dmin * min), rounded
// once as ggml rounds them), so nu_q_value gives exactly the F32 ggml's dequantization gives.
// A kernel that keeps the scale out of its sums (the matrix-vector products) takes q, D and M
// instead.

#ifndef NU_QUANT_COMMON
#define NU_QUANT_COMMON

// An IEEE half's value (its low 16 bits), exact also for subnormal halves, which a device's
// conversion may flush to zero (Vulkan allows it without shaderDenormPreserveFloat16): those are
// m * 2^-24, a normal F32.
float nu_q_f16(uint h)
{
    if ((h & 0x7c00u) != 0u)
        return unpackHalf2x16(h).x;
    float v = float(h & 0x3ffu) * 5.9604644775390625e-8;
    return (h & 0x8000u) != 0u ? -v : v;
}

// The integer added to each quant (the formats' zero points).
int nu_q_offset(uint dt)
{
    return dt == NU_Q4_0 || dt == NU_Q4_0_SOA ? -8 : dt == NU_Q5_0 ? -16 : dt == NU_Q6_K || dt == NU_Q6_K_SOA ? -32 : 0;
}
// Whether the format adds a per-block minimum M.
bool nu_q_has_min(uint dt) { return dt == NU_Q4_1 || dt == NU_Q5_1 || dt == NU_Q4_K || dt == NU_Q5_K; }
// Whether q's bytes are signed (else unsigned, and below 64).
bool nu_q_signed(uint dt) { return dt == NU_Q8_0 || dt == NU_IQ4_NL || dt == NU_IQ4_XS; }

// Element i (0..7) of a decoded group, exactly as ggml computes it (precise: no fused
// multiply-add, which would round once where ggml rounds twice).
float nu_q_value(uint dt, uvec2 q, vec2 dm, uint i)
{
    int b = bitfieldExtract(int(i < 4u ? q.x : q.y), int(8u * (i & 3u)), 8) + nu_q_offset(dt);
    precise float v = dm.x * float(b);
    if (nu_q_has_min(dt))
        v = v + dm.y;
    return v;
}

// The 8 quants of a group plus the format's offset as floats (exact small integers), without a
// conversion instruction: a byte or'ed into the mantissa of 2^23 is the float 2^23 + byte, and
// subtracting 2^23 (+ 128 for a signed byte flipped into 0..255) less the offset is exact.
void nu_q_floats(uint dt, uvec2 q, out float f[8])
{
    uint flip = nu_q_signed(dt) ? 0x80808080u : 0u;
    float base = 8388608.0 + (nu_q_signed(dt) ? 128.0 : 0.0) - float(nu_q_offset(dt));
    uvec2 u = q ^ uvec2(flip);
    for (int i = 0; i < 4; i++) {
        f[i] = uintBitsToFloat(((u.x >> (8 * i)) & 0xffu) | 0x4b000000u) - base;
        f[4 + i] = uintBitsToFloat(((u.y >> (8 * i)) & 0xffu) | 0x4b000000u) - base;
    }
}

// The two groups of a block that the integer-dot path takes together (a 16-element unit u of a
// block: 0..1 for 32-element blocks, 0..15 for 256-element ones): groups whose bytes are the same
// loads (a nibble format's low and high nibbles), or consecutive ones (Q8_0).
uvec2 nu_q_dot_groups(uint dt, uint u)
{
    if (dt == NU_Q8_0)
        return uvec2(2u * u, 2u * u + 1u);
    if (dt == NU_IQ4_XS) // per 32-element sub-block, as IQ4_NL
        return uvec2(4u * (u >> 1u) + (u & 1u), 4u * (u >> 1u) + (u & 1u) + 2u);
    if (dt == NU_Q4_K || dt == NU_Q5_K) // 64-element chunks: low nibbles, then high ones
        return uvec2(8u * (u >> 2u) + (u & 3u), 8u * (u >> 2u) + (u & 3u) + 4u);
    if (dt == NU_Q6_K) // 128-element halves: quarters 0 and 2, 1 and 3 share ql's bytes
        return uvec2(16u * (u >> 3u) + (u & 7u), 16u * (u >> 3u) + (u & 7u) + 8u);
    return uvec2(u, u + 2u); // Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL
}

// Bit 0 of each byte of b4's low 4 bits: bit i to bit 8i (the products 7k + i never collide).
uint nu_q_spread4(uint b4) { return (b4 * 0x00204081u) & 0x01010101u; }

// IQ4_NL's and IQ4_XS's codebook (ggml's kvalues_iq4nl), and four nibbles (one a byte) mapped
// through it to signed bytes.
const int NU_IQ4_VALUES[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
uint nu_q_iq4_map(uint n)
{
    uint r = 0u;
    for (uint i = 0u; i < 4u; i++)
        r |= (uint(NU_IQ4_VALUES[(n >> (8u * i)) & 15u]) & 0xffu) << (8u * i);
    return r;
}

// The word at byte 2 * (2 i + s / 16) from words a = w[i], b = w[i + 1]: s is 0 or 16, and
// (b << 1) << (31 - s) is b << (32 - s) without the undefined shift by 32.
uint nu_q_funnel(uint a, uint b, uint s) { return (a >> s) | ((b << 1u) << (31u - s)); }

// A K format's 6-bit scale and min of sub-block j (0..7) from its 12 scale bytes s (ggml's
// get_scale_min_k4): (scale, min).
uvec2 nu_q_k4_scale_min(uvec3 s, uint j)
{
    if (j < 4u)
        return uvec2((s.x >> (8u * j)) & 63u, (s.y >> (8u * j)) & 63u);
    uint b = 8u * (j - 4u);
    return uvec2(((s.z >> b) & 15u) | (((s.x >> (b + 6u)) & 3u) << 4u),
                 ((s.z >> (b + 4u)) & 15u) | (((s.y >> (b + 6u)) & 3u) << 4u));
}

// Q6_K_SOA (nuvec/tensor.h): super-block i of a tensor whose first half is `first` has its ql, qh
// and scales (Q6_K's first 104 halves) at .x and its d at .y: groups of 8 super-blocks, 840 halves
// each, their 8 x 104 halves of bytes, then their 8 d.
uvec2 nu_q6s_halves(uint first, uint i)
{
    uint g = first + (i >> 3u) * 840u;
    return uvec2(g + (i & 7u) * 104u, g + 832u + (i & 7u));
}

#define NU_QCAT_(a, b) a##b
#define NU_QCAT(a, b) NU_QCAT_(a, b)
#endif // NU_QUANT_COMMON

#ifdef NU_QB
#define NU_QF(name) NU_QCAT(NU_QB, name)

uint NU_QF(_half)(uint h) { return uint(NU_QF(_h)[h]); }
// The word i of the binding where it may be the binding's last, half-covered one: its low half
// is what is wanted (a run starting at an odd half ends there), read as a half past the end.
uint NU_QF(_last)(uint i) { return i < uint(NU_QF(_w).length()) ? NU_QF(_w)[i] : uint(NU_QF(_h)[2u * i]); }
// 4, 8 and 16 bytes from half h: words, shifted into place where h is odd (no read past them).
uint NU_QF(_bytes4)(uint h)
{
    uint i = h >> 1u, s = (h & 1u) * 16u;
    return nu_q_funnel(NU_QF(_w)[i], s != 0u ? NU_QF(_last)(i + 1u) : 0u, s);
}
uvec2 NU_QF(_bytes8)(uint h)
{
    uint i = h >> 1u, s = (h & 1u) * 16u;
    uint a = NU_QF(_w)[i], b = NU_QF(_w)[i + 1u], c = s != 0u ? NU_QF(_last)(i + 2u) : 0u;
    return uvec2(nu_q_funnel(a, b, s), nu_q_funnel(b, c, s));
}
// The same where the caller knows whether h is even (`even`, a constant at every call: a kernel
// whose blocks start on whole 32-bit words, such as copy.comp's FAST 3, passes true): then the
// bytes are whole words, read with no funnel shift and no third load.
uint NU_QF(_word4)(uint h, bool even) { return even ? NU_QF(_w)[h >> 1u] : NU_QF(_bytes4)(h); }
uvec2 NU_QF(_word8)(uint h, bool even)
{
    return even ? uvec2(NU_QF(_w)[h >> 1u], NU_QF(_w)[(h >> 1u) + 1u]) : NU_QF(_bytes8)(h);
}

// The 8 quant bytes of a nibble format's group g of a 32-element block whose 16 quant bytes
// start at half hq: the low nibbles of bytes 0..15 are elements 0..15, the high ones 16..31.
uvec2 NU_QF(_nibbles)(uint hq, uint g)
{
    return (NU_QF(_bytes8)(hq + 4u * (g & 1u)) >> (4u * (g >> 1u))) & 0x0f0f0f0fu;
}
// A 5-bit format's group g: its nibbles with bit 4 from bits 8g..8g+7 of qh (one per element).
uvec2 NU_QF(_fifth)(uvec2 n, uint qh, uint g)
{
    uint b = (qh >> (8u * g)) & 0xffu;
    return n | (uvec2(nu_q_spread4(b & 15u), nu_q_spread4(b >> 4u)) << 4u);
}

// Q8_0 (34 bytes): f16 d, int8 q[32].  x = d * q.
void NU_QF(_q8_0)(uint hb, uint g, out uvec2 q, out vec2 dm)
{
    q = NU_QF(_bytes8)(hb + 1u + 4u * g);
    dm = vec2(nu_q_f16(NU_QF(_half)(hb)), 0.0);
}
// Q4_0 (18 bytes): f16 d, uint8 qs[16].  x = d * (nibble - 8).
void NU_QF(_q4_0)(uint hb, uint g, out uvec2 q, out vec2 dm)
{
    q = NU_QF(_nibbles)(hb + 1u, g);
    dm = vec2(nu_q_f16(NU_QF(_half)(hb)), 0.0);
}
// Q4_0_SOA: Q4_0's values with the block's d at half hd and its 16 quant bytes at half hq.
void NU_QF(_q4_0_soa)(uint hd, uint hq, uint g, out uvec2 q, out vec2 dm)
{
    q = NU_QF(_nibbles)(hq, g);
    dm = vec2(nu_q_f16(NU_QF(_half)(hd)), 0.0);
}
// Q4_1 (20 bytes): f16 d, f16 m, uint8 qs[16].  x = d * nibble + m.
void NU_QF(_q4_1)(uint hb, uint g, out uvec2 q, out vec2 dm)
{
    q = NU_QF(_nibbles)(hb + 2u, g);
    dm = vec2(nu_q_f16(NU_QF(_half)(hb)), nu_q_f16(NU_QF(_half)(hb + 1u)));
}
// Q5_0 (22 bytes): f16 d, uint32 qh (bit j: element j's fifth bit), uint8 qs[16].
// x = d * ((nibble | fifth bit << 4) - 16).
void NU_QF(_q5_0)(uint hb, uint g, out uvec2 q, out vec2 dm)
{
    q = NU_QF(_fifth)(NU_QF(_nibbles)(hb + 3u, g), NU_QF(_bytes4)(hb + 1u), g);
    dm = vec2(nu_q_f16(NU_QF(_half)(hb)), 0.0);
}
// Q5_1 (24 bytes): f16 d, f16 m, uint32 qh, uint8 qs[16].  x = d * (nibble | fifth bit << 4) + m.
void NU_QF(_q5_1)(uint hb, uint g, out uvec2 q, out vec2 dm)
{
    q = NU_QF(_fifth)(NU_QF(_nibbles)(hb + 4u, g), NU_QF(_bytes4)(hb + 2u), g);
    dm = vec2(nu_q_f16(NU_QF(_half)(hb)), nu_q_f16(NU_QF(_half)(hb + 1u)));
}
// IQ4_NL (18 bytes): f16 d, uint8 qs[16] (Q4_0's nibbles).  x = d * codebook[nibble].
void NU_QF(_iq4_nl)(uint hb, uint g, out uvec2 q, out vec2 dm)
{
    uvec2 n = NU_QF(_nibbles)(hb + 1u, g);
    q = uvec2(nu_q_iq4_map(n.x), nu_q_iq4_map(n.y));
    dm = vec2(nu_q_f16(NU_QF(_half)(hb)), 0.0);
}
// The K formats' super-block scales: (d, dmin) and their 12 bytes of 6-bit scales and mins, for
// sub-block j: (d * scale, -(dmin * min)).
vec2 NU_QF(_k4_dm)(uint hb, uint j, bool even)
{
    uint d2 = NU_QF(_word4)(hb, even);
    uvec3 s = uvec3(NU_QF(_word4)(hb + 2u, even), NU_QF(_word4)(hb + 4u, even), NU_QF(_word4)(hb + 6u, even));
    uvec2 sm = nu_q_k4_scale_min(s, j);
    vec2 d = vec2(nu_q_f16(d2 & 0xffffu), nu_q_f16(d2 >> 16u));
    precise float scale = d.x * float(sm.x);
    precise float mn = d.y * float(sm.y);
    return vec2(scale, -mn);
}
// Q4_K (144 bytes): f16 d, f16 dmin, scales[12] (eight 6-bit scales and mins: ggml's
// get_scale_min_k4), uint8 qs[128]. Chunk c (elements 64c..64c+63): qs[32c + l]'s low nibble is
// element 64c + l (sub-block 2c), its high nibble 64c + 32 + l (sub-block 2c + 1).
// x = d * scale * nibble - dmin * min.
void NU_QF(_q4_k)(uint hb, uint g, bool even, out uvec2 q, out vec2 dm)
{
    uint c = g >> 3u, t = g & 7u;
    q = (NU_QF(_word8)(hb + 8u + 16u * c + 4u * (t & 3u), even) >> (4u * (t >> 2u))) & 0x0f0f0f0fu;
    dm = NU_QF(_k4_dm)(hb, g >> 2u, even);
}
// Q5_K (176 bytes): Q4_K's d, dmin and scales, then uint8 qh[32], uint8 qs[128] (Q4_K's nibbles):
// element 64c + l's fifth bit is bit 2c of qh[l], element 64c + 32 + l's bit 2c + 1.
// x = d * scale * (nibble | fifth bit << 4) - dmin * min.
void NU_QF(_q5_k)(uint hb, uint g, bool even, out uvec2 q, out vec2 dm)
{
    uint c = g >> 3u, t = g & 7u;
    uvec2 n = (NU_QF(_word8)(hb + 24u + 16u * c + 4u * (t & 3u), even) >> (4u * (t >> 2u))) & 0x0f0f0f0fu;
    uvec2 h = (NU_QF(_word8)(hb + 8u + 4u * (t & 3u), even) >> (2u * c + (t >> 2u))) & 0x01010101u;
    q = n | (h << 4u);
    dm = NU_QF(_k4_dm)(hb, g >> 2u, even);
}
// Q6_K (210 bytes): uint8 ql[128], uint8 qh[64], int8 scales[16], f16 d (last). Half n
// (elements 128n..128n+127) has ql[64n..], qh[32n..] and scales[8n..]: element 128n + 32k + l
// (quarter k, l < 32) is the low (k < 2) or high nibble of ql[64n + 32 (k & 1) + l] with bits
// 2k..2k+1 of qh[32n + l] above it, scaled by scales[8n + 2k + l / 16].
// x = d * scale * (q - 32). Q6_K_SOA's super-blocks (d apart, at half hd) take the same code.
void NU_QF(_q6_k_at)(uint hb, uint hd, uint g, bool even, out uvec2 q, out vec2 dm)
{
    uint n = g >> 4u, k = (g >> 2u) & 3u, l = 8u * (g & 3u);
    uvec2 lo = (NU_QF(_word8)(hb + 32u * n + 16u * (k & 1u) + l / 2u, even) >> (4u * (k >> 1u))) & 0x0f0f0f0fu;
    uvec2 hi = (NU_QF(_word8)(hb + 64u + 16u * n + l / 2u, even) >> (2u * k)) & 0x03030303u;
    q = lo | (hi << 4u);
    uint s = 192u + 8u * n + 2u * k + l / 16u; // the scale's byte
    int sc = bitfieldExtract(int(NU_QF(_half)(hb + s / 2u)), int(8u * (s & 1u)), 8);
    precise float d = nu_q_f16(NU_QF(_half)(hd)) * float(sc);
    dm = vec2(d, 0.0);
}
void NU_QF(_q6_k)(uint hb, uint g, out uvec2 q, out vec2 dm) { NU_QF(_q6_k_at)(hb, hb + 104u, g, false, q, dm); }
// IQ4_XS (136 bytes): f16 d, uint16 scales_h, uint8 scales_l[4], uint8 qs[128]: sub-block j
// (32 elements) has IQ4_NL's nibbles in qs[16j..16j+15] and the 6-bit scale
// ls = (nibble j of scales_l) | (bits 2j..2j+1 of scales_h) << 4.  x = d * (ls - 32) * codebook[nibble].
void NU_QF(_iq4_xs)(uint hb, uint g, out uvec2 q, out vec2 dm)
{
    uint j = g >> 2u;
    uvec2 n = NU_QF(_nibbles)(hb + 4u + 8u * j, g & 3u);
    q = uvec2(nu_q_iq4_map(n.x), nu_q_iq4_map(n.y));
    uint ls = ((NU_QF(_bytes4)(hb + 2u) >> (4u * j)) & 15u) | (((NU_QF(_half)(hb + 1u) >> (2u * j)) & 3u) << 4u);
    precise float d = nu_q_f16(NU_QF(_half)(hb)) * float(int(ls) - 32);
    dm = vec2(d, 0.0);
}

// Group g of the block of dtype code dt (any but Q4_0_SOA and Q6_K_SOA, whose scales live apart)
// at half hb. _group_even: the same where hb is even and dt is Q4_K or Q5_K (whose 72 and 88
// halves keep every super-block of an even first half on whole words), read as words.
void NU_QF(_group)(uint dt, uint hb, uint g, out uvec2 q, out vec2 dm)
{
    if (dt == NU_Q8_0)
        NU_QF(_q8_0)(hb, g, q, dm);
    else if (dt == NU_Q4_1)
        NU_QF(_q4_1)(hb, g, q, dm);
    else if (dt == NU_Q5_0)
        NU_QF(_q5_0)(hb, g, q, dm);
    else if (dt == NU_Q5_1)
        NU_QF(_q5_1)(hb, g, q, dm);
    else if (dt == NU_Q4_K)
        NU_QF(_q4_k)(hb, g, false, q, dm);
    else if (dt == NU_Q5_K)
        NU_QF(_q5_k)(hb, g, false, q, dm);
    else if (dt == NU_Q6_K)
        NU_QF(_q6_k)(hb, g, q, dm);
    else if (dt == NU_IQ4_NL)
        NU_QF(_iq4_nl)(hb, g, q, dm);
    else if (dt == NU_IQ4_XS)
        NU_QF(_iq4_xs)(hb, g, q, dm);
    else
        NU_QF(_q4_0)(hb, g, q, dm);
}

void NU_QF(_group_even)(uint dt, uint hb, uint g, out uvec2 q, out vec2 dm)
{
    if (dt == NU_Q5_K)
        NU_QF(_q5_k)(hb, g, true, q, dm);
    else
        NU_QF(_q4_k)(hb, g, true, q, dm);
}

// Group g's 8 values as F32, exactly (nu_q_value).
void NU_QF(_dequant8)(uint dt, uint hb, uint g, out float v[8])
{
    uvec2 q;
    vec2 dm;
    NU_QF(_group)(dt, hb, g, q, dm);
    for (uint i = 0u; i < 8u; i++)
        v[i] = nu_q_value(dt, q, dm, i);
}

#undef NU_QF
#undef NU_QB
#endif // NU_QB
