#version 450
// copy: dst = src, converting the dtype (nu_op_copy, nuvec/ops.h): float to float (F32, F16, BF16
// in any combination), a dtype to itself (bits moved unchanged: I32, U32, U8, and floats), every
// block dtype to float (dequantization by kernels/quant.glsl, exact in F32), Q4_0 to Q4_0_SOA
// (REPACK: a thread a block) and Q6_K to Q6_K_SOA (REPACK: a thread a 16-bit half of a
// super-block; nuvec/tensor.h gives the layouts). src is any view (its strides, 0 for
// a broadcast dimension); dst is contiguous.
//
// Conversions are done on the bits, in integer arithmetic (round to nearest even, subnormals kept,
// NaN stays NaN), so no device's float conversions or denormal flushing can change a value.
//
// Specialisation constants:
//   0 DT_DST, 1 DT_SRC: dtype codes (ops.glsl's: NU_F32, NU_F16, NU_BF16, NU_I32 for any 32-bit
//     integer, NU_U8, the block dtypes' codes). DT_SRC == DT_DST moves bits; DT_DST NU_Q4_0_SOA
//     or NU_Q6_K_SOA repacks.
//   2 FAST: 1 when dst and src are contiguous and their first elements 16-byte aligned in their
//     bindings: 16-byte loads and stores (8 elements a step for casts, one vector for moves), the
//     tail an element a thread. For block src, 1 when dst's first element is 16-byte aligned
//     (8 elements stored as one or two vectors); blocks are always read by groups (below).
//     2: Q4_0_SOA to F16 by groups of 8 without the index arithmetic (cp_soa_group), where dst is
//     16-byte aligned, the rows have a multiple of 64 elements and src's first half is even.
//     3: Q4_K, Q5_K or Q6_K_SOA to F16 by groups of 8 read as aligned 32-bit words (cp_k_group),
//     where src is contiguous and 4-byte aligned and dst 16-byte aligned: no index arithmetic
//     beyond a shift, no funnel shifts, one 16-byte store a group.
//     0: an element a thread (U8: a 32-bit word of dst a thread), src through its strides.
//   3 LOCAL: threads per workgroup (tuning; default 256).
//   4 UNROLL: steps a thread loads before it stores, in the vector and block paths (tuning;
//     default 2): more loads in flight per thread.
// Dequantization: a thread makes 8 consecutive elements of a row (a group of a block, decoded
// by quant.glsl from its scales and quant bytes). Consecutive threads take consecutive groups, so
// a workgroup reads whole blocks, coalesced.
// Bindings 0 dst, 1 src. Push: the element count; dst's and src's first elements in their bindings
// (in bytes for U8, halves for block dtypes, elements otherwise); dst's shape and src's strides (4
// dimensions, outermost first; for block dtypes the outer strides in blocks, the last one unused).
#include "ops.glsl"

layout(local_size_x_id = 3) in;
layout(constant_id = 0) const uint DT_DST = NU_F32;
layout(constant_id = 1) const uint DT_SRC = NU_F32;
layout(constant_id = 2) const uint FAST = 0u;
layout(constant_id = 4) const uint UNROLL = 2u;
// dst is read as well as written: a U8 dst's first and last 32-bit words may hold other bytes,
// merged atomically.
NU_TENSOR(, 0, dst)
NU_TENSOR(readonly, 1, src)
#define NU_QB src
#include "quant.glsl"
layout(push_constant) uniform Push {
    uint count;
    uint first_dst, first_src;
    uint pad_;
    uvec4 shape;
    uvec4 stride;
} pc;

const bool RAW = DT_SRC == DT_DST;
const bool BLOCK = NU_IS_BLOCK(DT_SRC);
const bool REPACK = DT_DST == NU_Q4_0_SOA || DT_DST == NU_Q6_K_SOA;
const uint BE = NU_BLOCK_ELEMENTS(DT_SRC);
const bool HALF = DT_SRC == NU_F16 || DT_SRC == NU_BF16;

// IEEE half bits to single bits, exact (subnormal halves are normal singles).
uint cp_f16_to_f32(uint h)
{
    uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31u)
        return s | 0x7f800000u | (m << 13);
    if (e != 0u)
        return s | (((h & 0x7fffu) << 13) + 0x38000000u);
    if (m == 0u)
        return s;
    int p = findMSB(m); // m = 1.f * 2^p, the value m * 2^-24
    return s | (uint(p + 103) << 23) | ((m << uint(23 - p)) & 0x7fffffu);
}

// The rest: NaN, infinity and overflow, subnormal halves, underflow to zero.
uint cp_f32_to_f16_rare(uint x)
{
    uint s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return s | 0x7e00u | ((a >> 13) & 0x3ffu);
    if (a >= 0x477ff000u) // 65520 and up round to infinity
        return s | 0x7c00u;
    uint h, rest, mid;
    if (a >= 0x38800000u) { // a normal half: rebias the exponent, round away 13 bits
        h = (a - 0x38000000u) >> 13;
        rest = a & 0x1fffu;
        mid = 0x1000u;
    } else if (a >= 0x33000000u) { // a subnormal half: the value in units of 2^-24
        uint m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
        h = m >> shift;
        rest = m & ((1u << shift) - 1u);
        mid = 1u << (shift - 1u);
    } else { // below 2^-25 (and 2^-25 itself, a tie to even): zero
        return s;
    }
    if (rest > mid || (rest == mid && (h & 1u) != 0u))
        h++; // may carry into the exponent: still the right half
    return s | h;
}

// Single bits to IEEE half bits, round to nearest even; NaN stays a (quiet) NaN.
uint cp_f32_to_f16(uint x)
{
    uint s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    // The common cases without branches: a normal half (2^-14 <= a < 65520: rebias the exponent,
    // round away 13 bits to nearest even, a carry into the exponent still the right half) and zero.
    if (a - 0x38800000u < 0x0efff000u)
        return s | ((a - 0x37fff001u + ((a >> 13) & 1u)) >> 13);
    if (a == 0u)
        return s;
    return cp_f32_to_f16_rare(x);
}

// Single bits to bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN.
uint cp_f32_to_bf16(uint u)
{
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// A float element's bits (of the source dtype) as single bits, and single bits as dst's dtype.
uint cp_to_f32(uint dt, uint bits) { return dt == NU_F32 ? bits : (dt == NU_F16 ? cp_f16_to_f32(bits) : bits << 16); }
uint cp_from_f32(uint dt, uint bits) { return dt == NU_F32 ? bits : (dt == NU_F16 ? cp_f32_to_f16(bits) : cp_f32_to_bf16(bits)); }

// Where dst element i's source is: its 4-dimensional index through src's strides.
uvec4 cp_index(uint i)
{
    uint i3 = i % pc.shape.w; i /= pc.shape.w;
    uint i2 = i % pc.shape.z; i /= pc.shape.z;
    uint i1 = i % pc.shape.y;
    return uvec4(i / pc.shape.y, i1, i2, i3);
}
uint cp_offset(uint i)
{
    uvec4 x = cp_index(i);
    return x.x * pc.stride.x + x.y * pc.stride.y + x.z * pc.stride.z + x.w * pc.stride.w;
}

void cp_store_bits(uint i, uint f32bits)
{
    if (DT_DST == NU_F32)
        dst_w[i] = f32bits;
    else
        dst_h[i] = uint16_t(cp_from_f32(DT_DST, f32bits));
}

// Q4_0_SOA source (rank 2, whole rows of bpr blocks; nuvec/tensor.h): block b of row `row` as
// halves of src, its scale at hb and its run of 16 quant bytes at hq (a row's bpr scales, then its
// runs of 8 halves).
void cp_soa_block(uint row, uint b, uint bpr, out uint hb, out uint hq)
{
    uint first = pc.first_src + row * pc.stride.z * 9u;
    hb = first + b;
    hq = first + bpr + b * 8u;
}

// Block dtypes: the block holding dst element i's source (its first half hb; for Q4_0_SOA its
// scale hb and its run of quants hq: cp_soa_block; for Q6_K_SOA its bytes hb and its d hq), and
// the element's position j in it.
void cp_block(uint i, out uint j, out uint hb, out uint hq)
{
    uvec4 x = cp_index(i);
    j = x.w % BE;
    if (DT_SRC == NU_Q4_0_SOA) {
        cp_soa_block(x.z, x.w / 32u, pc.shape.w / 32u, hb, hq);
        return;
    }
    uint block = x.x * pc.stride.x + x.y * pc.stride.y + x.z * pc.stride.z + x.w / BE;
    if (DT_SRC == NU_Q6_K_SOA) {
        uvec2 at = nu_q6s_halves(pc.first_src, block);
        hb = at.x;
        hq = at.y;
        return;
    }
    hb = pc.first_src + block * nu_block_halves(DT_SRC);
    hq = 0u;
}

// Element i (i < count) an element at a time.
void cp_element(uint i)
{
    uint o = pc.first_src + cp_offset(i);
    if (RAW && HALF)
        dst_h[pc.first_dst + i] = src_h[o];
    else if (RAW)
        dst_w[pc.first_dst + i] = src_w[o];
    else
        cp_store_bits(pc.first_dst + i, cp_to_f32(DT_SRC, DT_SRC == NU_F32 ? src_w[o] : uint(src_h[o])));
}

// U8: dst's 32-bit word w, of the bytes of elements [start, count). A word dst shares with other
// bytes (its first and last) is merged atomically, so neighbouring bytes are never written.
void cp_byte_word(uint w, uint start)
{
    uint value = 0u, mask = 0u;
    for (uint k = 0u; k < 4u; k++) {
        uint b = w * 4u + k;
        if (b < pc.first_dst)
            continue;
        uint e = b - pc.first_dst;
        if (e < start || e >= pc.count)
            continue;
        uint o = pc.first_src + cp_offset(e);
        value |= ((src_w[o / 4u] >> ((o % 4u) * 8u)) & 0xffu) << (k * 8u);
        mask |= 0xffu << (k * 8u);
    }
    if (mask == 0xffffffffu) {
        dst_w[w] = value;
    } else if (mask != 0u) {
        atomicAnd(dst_w[w], ~mask);
        atomicOr(dst_w[w], value);
    }
}

// Elements [start, count), one (or, U8, a word) a thread.
void cp_general(uint start, uint index, uint threads)
{
    if (start >= pc.count)
        return;
    if (DT_SRC == NU_U8) {
        uint w0 = (pc.first_dst + start) / 4u, w1 = (pc.first_dst + pc.count - 1u) / 4u;
        for (uint w = w0 + index; w <= w1; w += threads)
            cp_byte_word(w, start);
        return;
    }
    for (uint i = start + index; i < pc.count; i += threads)
        cp_element(i);
}

// Block dtypes: elements 8u .. 8u + 7 (in one row, in one block: a group) as single bits.
void cp_dequant8(uint u, out uint v[8])
{
    uint j, hb, hq;
    cp_block(u * 8u, j, hb, hq);
    uvec2 q;
    vec2 dm;
    if (DT_SRC == NU_Q4_0_SOA)
        src_q4_0_soa(hb, hq, j / 8u, q, dm);
    else if (DT_SRC == NU_Q6_K_SOA)
        src_q6_k_at(hb, hq, j / 8u, false, q, dm);
    else
        src_group(DT_SRC, hb, j / 8u, q, dm);
    for (uint k = 0u; k < 8u; k++)
        v[k] = floatBitsToUint(nu_q_value(DT_SRC, q, dm, k));
}

// FAST 2 (Q4_0_SOA rows of a multiple of 64 elements to F16, the scales and runs 4-byte aligned):
// elements 8 u .. 8 u + 7 (group u % 4 of block u / 4, row u / 4 / bpr) by one thread, from two
// 32-bit words of the block's run, its 8 halves in one 16-byte store at vector vd + u, so a
// subgroup's stores are one contiguous stretch. The values are nu_q_value's (the scale times
// nibble - 8, exact in F32) rounded as cp_f32_to_f16 rounds: the bits of the groups path below.
uint cp_q4_half(float d, uint n)
{
    precise float v = d * float(int(n) - 8);
    return cp_f32_to_f16(floatBitsToUint(v));
}
// The halves of the nibbles in bits 0..3 and 8..11 of w, packed.
uint cp_q4_pair(float d, uint w) { return cp_q4_half(d, w & 15u) | (cp_q4_half(d, (w >> 8) & 15u) << 16); }
void cp_soa_group(uint u, uint bpr, uint vd)
{
    uint i = u / 4u, g = u % 4u;
    uint row = i / bpr, hb, hq;
    cp_soa_block(row, i - row * bpr, bpr, hb, hq);
    float d = nu_q_f16(uint(src_h[hb]));
    // Group g: the low (g < 2) or high nibbles of bytes 8 (g % 2) .. + 7 of the run.
    uint w = hq / 2u + 2u * (g & 1u), sh = g >= 2u ? 4u : 0u;
    uint x = src_w[w] >> sh, y = src_w[w + 1u] >> sh;
    dst_v[vd + u] = uvec4(cp_q4_pair(d, x), cp_q4_pair(d, x >> 16), cp_q4_pair(d, y), cp_q4_pair(d, y >> 16));
}

// FAST 3 (Q4_K, Q5_K, Q6_K_SOA to F16; src contiguous from an even half, so every super-block's
// bytes are whole 32-bit words: Q4_K's 144 and Q5_K's 176 bytes, Q6_K_SOA's 208): group u % 32 of
// super-block u / 32, found by a shift and decoded by quant.glsl's word reads (the same q and dm
// as the groups path), its values nu_q_value's through nu_q_floats' exact small integers, rounded
// as cp_f32_to_f16 rounds, stored as one vector at vd + u.
void cp_k_group(uint u, uint vd)
{
    uint i = u >> 5u, g = u & 31u;
    uvec2 q;
    vec2 dm;
    uint w0 = pc.first_src >> 1u; // (even: the halves below are twice a word's index, which the
                                  // compiler then folds into each load's word index)
    if (DT_SRC == NU_Q6_K_SOA) {
        uvec2 at = nu_q6s_halves(2u * w0, i);
        src_q6_k_at(at.x, at.y, g, true, q, dm);
    } else {
        src_group_even(DT_SRC, 2u * (w0 + i * (DT_SRC == NU_Q4_K ? 36u : 44u)), g, q, dm);
    }
    float f[8];
    nu_q_floats(DT_SRC, q, f);
    uint p[4];
    for (int k = 0; k < 4; k++) {
        precise float a = dm.x * f[2 * k], b = dm.x * f[2 * k + 1];
        if (nu_q_has_min(DT_SRC)) {
            a = a + dm.y;
            b = b + dm.y;
        }
        p[k] = cp_f32_to_f16(floatBitsToUint(a)) | (cp_f32_to_f16(floatBitsToUint(b)) << 16);
    }
    dst_v[vd + u] = uvec4(p[0], p[1], p[2], p[3]);
}

// Eight elements as dst's dtype at vector vd + u (16-byte aligned) or element first_dst + 8u.
void cp_store8(uint vd, uint u, uint v[8])
{
    if (FAST == 1u) {
        if (DT_DST == NU_F32) {
            dst_v[vd + 2u * u] = uvec4(v[0], v[1], v[2], v[3]);
            dst_v[vd + 2u * u + 1u] = uvec4(v[4], v[5], v[6], v[7]);
        } else {
            uint p[4];
            for (int k = 0; k < 4; k++)
                p[k] = cp_from_f32(DT_DST, v[2 * k]) | (cp_from_f32(DT_DST, v[2 * k + 1]) << 16);
            dst_v[vd + u] = uvec4(p[0], p[1], p[2], p[3]);
        }
    } else {
        for (uint k = 0u; k < 8u; k++)
            cp_store_bits(pc.first_dst + 8u * u + k, v[k]);
    }
}

void main()
{
    uint index = gl_GlobalInvocationID.x, threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (REPACK && DT_DST == NU_Q6_K_SOA) { // half h of Q6_K super-block i (row i / bpr) to its group
        uint bpr = pc.shape.w / 256u, halves = pc.count / 256u * 105u;
        for (uint t = index; t < halves; t += threads) {
            uint i = t / 105u, h = t % 105u, row = i / bpr;
            uvec2 at = nu_q6s_halves(pc.first_dst, i);
            dst_h[h < 104u ? at.x + h : at.y] = src_h[pc.first_src + (row * pc.stride.z + i % bpr) * 105u + h];
        }
        return;
    }
    if (REPACK) { // Q4_0 block i (row i / bpr) to its row's scale and run
        uint bpr = pc.shape.w / 32u, blocks = pc.count / 32u;
        for (uint i = index; i < blocks; i += threads) {
            uint row = i / bpr, b = i % bpr;
            uint hs = pc.first_src + (row * pc.stride.z + b) * 9u, hd = pc.first_dst + row * bpr * 9u;
            dst_h[hd + b] = src_h[hs];
            for (uint k = 0u; k < 8u; k++)
                dst_h[hd + bpr + b * 8u + k] = src_h[hs + 1u + k];
        }
        return;
    }
    uint vd = nu_vbase(DT_DST == NU_F32 ? NU_F32 : NU_F16, pc.first_dst);
    if (FAST == 2u && DT_SRC == NU_Q4_0_SOA && DT_DST == NU_F16) {
        uint bpr = pc.shape.w / 32u, units = pc.count / 8u;
        for (uint u = index; u < units; u += threads)
            cp_soa_group(u, bpr, vd);
        return;
    }
    if (FAST == 3u && DT_DST == NU_F16) {
        uint units = pc.count / 8u;
        for (uint base = index; base < units; base += threads * UNROLL)
            for (uint r = 0u; r < UNROLL; r++)
                if (base + r * threads < units)
                    cp_k_group(base + r * threads, vd);
        return;
    }
    if (BLOCK) { // every row is a whole number of 8-element steps
        uint units = pc.count / 8u;
        for (uint base = index; base < units; base += threads * UNROLL) {
            uint v[UNROLL][8];
            for (uint r = 0u; r < UNROLL; r++)
                if (base + r * threads < units)
                    cp_dequant8(base + r * threads, v[r]);
            for (uint r = 0u; r < UNROLL; r++)
                if (base + r * threads < units)
                    cp_store8(vd, base + r * threads, v[r]);
        }
        return;
    }
    if (FAST == 1u && RAW) { // bits moved a vector at a time
        uint size = DT_SRC == NU_U8 ? 1u : (HALF ? 2u : 4u);
        uint units = pc.count / (16u / size);
        uint vs = pc.first_src * size / 16u, vdr = pc.first_dst * size / 16u;
        for (uint base = index; base < units; base += threads * UNROLL) {
            uvec4 x[UNROLL];
            for (uint r = 0u; r < UNROLL; r++)
                if (base + r * threads < units)
                    x[r] = src_v[vs + base + r * threads];
            for (uint r = 0u; r < UNROLL; r++)
                if (base + r * threads < units)
                    dst_v[vdr + base + r * threads] = x[r];
        }
        cp_general(units * (16u / size), index, threads);
        return;
    }
    if (FAST == 1u) { // a cast, 8 elements a step
        uint units = pc.count / 8u;
        uint vs = nu_vbase(DT_SRC, pc.first_src);
        for (uint base = index; base < units; base += threads * UNROLL) {
            uvec4 p[UNROLL], q[UNROLL];
            for (uint r = 0u; r < UNROLL; r++) {
                uint u = base + r * threads;
                if (u < units) {
                    if (DT_SRC == NU_F32) {
                        p[r] = src_v[vs + 2u * u];
                        q[r] = src_v[vs + 2u * u + 1u];
                    } else {
                        p[r] = src_v[vs + u];
                    }
                }
            }
            for (uint r = 0u; r < UNROLL; r++) {
                uint u = base + r * threads;
                if (u < units) {
                    uint v[8];
                    if (DT_SRC == NU_F32) {
                        v[0] = p[r].x; v[1] = p[r].y; v[2] = p[r].z; v[3] = p[r].w;
                        v[4] = q[r].x; v[5] = q[r].y; v[6] = q[r].z; v[7] = q[r].w;
                    } else {
                        for (int k = 0; k < 4; k++) {
                            v[2 * k] = cp_to_f32(DT_SRC, p[r][k] & 0xffffu);
                            v[2 * k + 1] = cp_to_f32(DT_SRC, p[r][k] >> 16);
                        }
                    }
                    cp_store8(vd, u, v);
                }
            }
        }
        cp_general(units * 8u, index, threads);
        return;
    }
    cp_general(0u, index, threads);
}
