// matmul_coopmat.glsl: the body of matmul_coopmat.comp and matmul_coopmat_bf16.comp: nu_op_matmul
// (nuvec/ops.h) on the matrix units, through VK_KHR_cooperative_matrix (GL_KHR_cooperative_matrix;
// compiled by glslang 15: see deps/deps.sh). src/ops/matmul_tc.c takes it where the device offers
// 16x16x16 F16 x F16 + F32 products (BF16 x BF16 + F32 for the BF16 kernel) at subgroup scope,
// subgroups of 32, and the operands suit it (below); the tiled kernel (matmul.comp) everywhere else.
//
//   dst[b, i, j] = sum_k a[b, i, k] * w[b, j, k] (+ bias[j])
//   matmul_coopmat:      a F16; w F16, Q8_0, Q4_0, Q4_0_SOA, Q4_K, Q6_K or Q6_K_SOA
//   matmul_coopmat_bf16: a BF16; w BF16 (TILES_BF16, below)
//
// TILES_BF16 (defined by matmul_coopmat_bf16.comp): the tiles hold BF16 and the a and w fragments
// are BF16 cooperative matrices (VK_KHR_shader_bfloat16). No glslang Debian carries knows
// GL_EXT_bfloat16, so this variant is written with float16_t as the fragments' component type and
// nothing else of that type (no F16 arithmetic, no F16 store, no block weights: their code is left
// out), and src/kernel/spirv_rewrite.c (nu__spirv_f16_as_bf16) turns that one type into bfloat16
// when the kernel is made on a device with BF16 matrix units; the tiles move raw 16-bit values, so
// the loads and stores are the F16 kernel's.
//
// F32 accumulation; dst F32, F16 or BF16 (rounded once). Block weights are dequantized to F16
// while they are copied into shared memory (each weight's F32 value as ggml computes it, then
// rounded to F16: the F16 rounding of each weight, at most 2^-11 relative, is the only
// difference from the exact product besides F32 summation). Q4_0 / Q8_0 / Q4_0_SOA do it in F16
// arithmetic (exactly that rounding: below); Q4_K, Q6_K and Q6_K_SOA in F32 (their scales are products of
// two scales: D * q - M and (d * scale) * (q - 32), each rounded as ggml rounds it).
// Q4_0 and Q4_0_SOA tiles hold k in a permuted order within each group of four, a's as w's (PERM,
// below: two tile elements a shift and a LOP3).
//
// Layout of the work: a workgroup computes a BM x BN tile of dst (BM = 16 * FM * WM, BN = 16 * FN *
// WN) with WM x WN subgroups, each a (BM / WM) x (BN / WN) part as (BM / WM / 16) x
// (BN / WN / 16) accumulators of 16 x 16. K advances BK (32 or 64) at a time: the next step's tiles of a
// and w are loaded from memory into registers (16-byte loads: a's rows and F16 w's rows 16-byte
// aligned with k a multiple of 8, which the host requires) while the current step's are multiplied
// from shared memory (BUFFERS buffers), rows padded by 8 halves against bank conflicts.
//
// Two ways out (EPILOGUE): 0 stores the accumulators straight to dst (coopMatStore, F32 or F16 dst,
// no bias, whole tiles only: the host dispatches the whole tiles this way and the edges with 1);
// 1 goes through shared memory a 16 x 16 block at a time, so that edges, the bias and any dst
// dtype cost a bounds check and a conversion. The second way in the same module as the products
// made the H200's compiler keep the accumulators out of registers (bench/probes/coopmat_kernel:
// 35 TFLOP/s at 4096^3 with it, 150 without), so each way is its own pipeline.
//
// Specialisation constants:
//   0 WDT   weight dtype (ops.glsl code): NU_F16 (NU_BF16 in the BF16 kernel), NU_Q8_0, NU_Q4_0,
//           NU_Q4_0_SOA (Q4_0's blocks with each row's scales first, then its quants:
//           nuvec/tensor.h; whole rows, k the row),
//           NU_Q4_K or NU_Q6_K (GGUF's super-blocks: kernels/quant.glsl describes them), NU_Q6_K_SOA
//           (Q6_K's super-blocks by groups of 8 with their d apart: nuvec/tensor.h; whole rows)
//   1 DDT   dst dtype (ops.glsl code)
//   2 BIAS  1: add bias[j] (binding 3, dtype BDT)
//   3 BDT   bias dtype (ops.glsl code)
//   4 LOCAL threads per workgroup: WM * WN * 32
//   5 WM    subgroups along M (each 16 * FM rows)
//   6 WN    subgroups along N (each 16 * FN columns)
//   7 FM    16-row fragments a subgroup covers
//   8 FN    16-column fragments a subgroup covers (FM * FN <= 16, FM and FN <= 8)
//   9 BK    k a step: 32, 64, 128 or 256 (few rows of a: more of each weight row in flight a step)
//   10 BUFFERS  shared-memory tile buffers: 2 (the next step's tiles stored during this one) or 1
//   12 EPILOGUE 0: straight to dst, 1: through shared memory (above)
//   11 PROBE    diagnostics, 0 in use: bit 0 skips the global loads (tiles of values made from the
//               step's k, which the compiler cannot fold into the decoding: block weights are still
//               decoded; before 2026-12-07 their units were zeros, which it could fold away), bit 1
//               the products (NUVEC_MATMUL_TC="probe=N"; see bench/RESULTS.md for what they showed)
//   13 VEC      1: block weights whose runs are 16-byte aligned (the host checks): Q4_0_SOA (first,
//               row stride and k / 32 in halves multiples of 8): a thread takes a whole block, its
//               16 bytes in one load (else thread pairs take a block in 4-byte words, as for Q4_0);
//               Q4_K (first, row and batch strides multiples of 8 halves: super-blocks of 72) and
//               Q6_K_SOA (first a multiple of 8: super-blocks of 104 in groups of 840): a unit's 16
//               quant bytes and its 16 header (Q4_K) or qh (Q6_K_SOA) bytes in one load each,
//               where 4-byte words took eight. H100 (Q4_K with no loads at all, PROBE 1, ran as
//               fast as F16: 63 against 63 us at 512 x 4096 > 4096, 113 against 81 with them):
//               with K4PAIR, Q4_K 113.1 -> 102.3 us there, 330.4 -> 322.9 at > 11008; Q6_K_SOA 150
//               -> 147 and 462 -> 532, so the host sets it for Q4_K only (bench/RESULTS.md;
//               NUVEC_MATMUL_TC=vec=1 asks for it on Q6_K_SOA too)
//   14 ORDER    the fragments of a 16-deep slice of k: 0 loads every a and w fragment, then
//               multiplies; 1 loads w's, then each a fragment just before its row of products
//               (fewer fragments live at once: FN + 1 against FM + FN; NUVEC_MATMUL_TC="order=1":
//               on an H100 5-6% faster for 512 x 4096 > 11008 and > 12288, 3-6% slower for the other
//               F16 prefill shapes: bench/RESULTS.md, twenty-sixth session)
//   15 EVEN     1: Q4_K or Q6_K_SOA weights whose super-blocks all start on whole 32-bit words
//               (Q4_K: first, row and batch strides in halves even; Q6_K_SOA: first even; the
//               host checks): their runs are read as words, with no shifts and no word after
// Bindings: 0 dst, 1 a, 2 w, 3 bias (the placeholder when BIAS is 0). Push: see Push; the
// workgroup (x, y) computes tile (tile_x + x, tile_y + y).
#extension GL_KHR_cooperative_matrix : require // (repeated from the .comp, which CMake reads)
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require // [[unroll]]
#extension GL_GOOGLE_include_directive : require // glslc enables it itself; glslang needs it asked
#include "ops.glsl"
#include "quant.glsl" // nu_q_f16, nu_q_k4_scale_min (NU_QB undefined: the common part only)

layout(constant_id = 0) const uint WDT = NU_F16;
layout(constant_id = 1) const uint DDT = NU_F32;
layout(constant_id = 2) const uint BIAS = 0u;
layout(constant_id = 3) const uint BDT = NU_F32;
layout(constant_id = 5) const uint WM = 2u;
layout(constant_id = 6) const uint WN = 4u;
layout(constant_id = 7) const uint FM = 4u;
layout(constant_id = 8) const uint FN = 2u;
layout(constant_id = 9) const uint BK = 32u;
layout(constant_id = 10) const uint BUFFERS = 2u;
layout(constant_id = 11) const uint PROBE = 0u;
layout(constant_id = 12) const uint EPILOGUE = 1u;
layout(constant_id = 13) const uint VEC = 0u;
layout(constant_id = 14) const uint ORDER = 0u;
layout(constant_id = 15) const uint EVEN = 0u;
layout(local_size_x = 256, local_size_x_id = 4) in;
const uint LOCAL = gl_WorkGroupSize.x;

#define Q8_0 NU_Q8_0 // the only block dtypes this kernel takes (src/ops/matmul_tc.c routes the others away)
#define Q4_0 NU_Q4_0
#define Q4_0_SOA NU_Q4_0_SOA
#define Q4_K NU_Q4_K
#define Q6_K NU_Q6_K
#define Q6_K_SOA NU_Q6_K_SOA
const bool RAW_W = WDT == NU_F16 || WDT == NU_BF16; // w's 16-bit values go to the tiles as they are
const bool KFMT = WDT == Q4_K || WDT == Q6_K || WDT == Q6_K_SOA; // 256-element super-blocks, dequantized in F32
// K formats with k 64 or more a step take a unit's quant bytes for two sub-blocks at once: a thread
// loads them (and the header or qh bytes) once and writes 32 elements, where taking a sub-block a
// unit loaded them twice.
// K4PAIR: Q4_K's 16 quant bytes hold 16 elements of an even sub-block in their low nibbles and the
// same 16 of the next one in their high nibbles (H100, with word loads: 512 x 4096 > 11008 331 ->
// 325 us, > 4096 unchanged).
// K6PAIR: Q6_K's 16 ql bytes hold sub-block j's (j % 4 < 2) in their low nibbles and sub-block
// j + 2's in their high ones, 64 k apart, and the 16 qh bytes both's high bits (all four sub-blocks
// of a super-block's half share them). A step takes k in the order that puts each such pair side
// by side (kpos): 0-31 and 64-95 of each 128, then 32-63 and 96-127, a's tiles as w's (H100,
// Q6_K_SOA 512 x 4096 > 4096 151 -> 126 us, > 11008 460 -> 370; copy + F16 102 and 310 there, so
// prefill passes still copy Q6_K_SOA first: bench/RESULTS.md, 2026-12-07).
const bool K4PAIR = WDT == Q4_K && BK >= 64u;
const bool K6PAIR = (WDT == Q6_K || WDT == Q6_K_SOA) && BK >= 64u;
const bool KPAIR = K4PAIR || K6PAIR;
const uint UNIT_K = KPAIR ? 64u : 32u; // k a pair of units (part 0 and 1) covers
// The k that a step's k stands for: bits 5 and 6 swapped (K6PAIR); a 32-k run stays whole, so a's
// 8-half loads never cross one, and k (a multiple of 256 for K formats) maps onto itself.
uint kpos(uint k) { return K6PAIR ? (k & ~96u) | ((k & 64u) >> 1u) | ((k & 32u) << 1u) : k; }
// The subgroup's fragments by name (main() says why): M(i) for each row fragment i < 8 (or column
// fragment), M(i, j) for each accumulator; each M guards itself with i < FM, j < FN (FM and FN at
// most 8, FM * FN at most 16: the host checks). Fragment (i, j) covers rows 16 i .. of the
// subgroup's part and columns 16 j ..
#define EACH_SIDE(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#define EACH_J(M, i) M(i, 0) M(i, 1) M(i, 2) M(i, 3) M(i, 4) M(i, 5) M(i, 6) M(i, 7)
#define EACH_FRAG(M) EACH_J(M, 0) EACH_J(M, 1) EACH_J(M, 2) EACH_J(M, 3) EACH_J(M, 4) EACH_J(M, 5) EACH_J(M, 6) EACH_J(M, 7)
#define ACC_F32 coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#ifndef TILES_BF16
#define ACC_F16 coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#endif
// The a and w fragments' component type: F16, or BF16 written as float16_t (TILES_BF16, above).
#define TILE_T float16_t
#define DECLARE_ACC(i, j) ACC_F32 acc_##i##_##j = ACC_F32(0.0);
#define LOAD_A(i) \
    coopmat<TILE_T, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa_##i; \
    if (uint(i) < FM) \
        coopMatLoad(fa_##i, tiles, base + (wm * FM * 16u + 16u * uint(i)) * ROW + kk / 8u, ROW, \
                    gl_CooperativeMatrixLayoutRowMajor);
#define LOAD_B(j) \
    coopmat<TILE_T, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb_##j; \
    if (uint(j) < FN) \
        coopMatLoad(fb_##j, tiles, base + TILE_A + (wn * FN * 16u + 16u * uint(j)) * ROW + kk / 8u, ROW, \
                    gl_CooperativeMatrixLayoutColumnMajor);
#define MULTIPLY_ADD(i, j) \
    if (uint(i) < FM && uint(j) < FN && (PROBE & 2u) == 0u) \
        acc_##i##_##j = coopMatMulAdd(fa_##i, fb_##j, acc_##i##_##j);
#define STREAM_A(i) { LOAD_A(i) EACH_J(MULTIPLY_ADD, i) } // ORDER 1: a fragment, then its row of products
#define STORE_DIRECT(i, j) \
    if (uint(i) < FM && uint(j) < FN) { \
        uint at = first + 16u * uint(i) * pc.dst_row + 16u * uint(j); \
        STORE_DIRECT_TO(i, j, at) \
    }
#ifdef TILES_BF16 // F32 only (the host sends F16 and BF16 dst through shared memory)
#define STORE_DIRECT_TO(i, j, at) \
    coopMatStore(acc_##i##_##j, dst_f, at, pc.dst_row, gl_CooperativeMatrixLayoutRowMajor);
#else
#define STORE_DIRECT_TO(i, j, at) \
    if (DDT == NU_F32) \
        coopMatStore(acc_##i##_##j, dst_f, at, pc.dst_row, gl_CooperativeMatrixLayoutRowMajor); \
    else \
        coopMatStore(ACC_F16(acc_##i##_##j), dst_f16, at, pc.dst_row, gl_CooperativeMatrixLayoutRowMajor);
#endif
#define STORE_THROUGH_SHARED(i, j) \
    if (uint(i) < FM && uint(j) < FN) { \
        coopMatStore(acc_##i##_##j, scratch, out0, 16u, gl_CooperativeMatrixLayoutRowMajor); \
        subgroupMemoryBarrierShared(); \
        subgroupBarrier(); \
        for (uint e = lane; e < 256u; e += gl_SubgroupSize) { \
            uint r = e / 16u, c = e % 16u; \
            uint row = m0 + wm * FM * 16u + 16u * uint(i) + r, col = n0 + wn * FN * 16u + 16u * uint(j) + c; \
            float v = scratch[out0 + e]; \
            if (BIAS != 0u && col < pc.n) \
                v += NU_LOAD(bias, BDT, pc.first_bias + col); \
            if (row < pc.m && col < pc.n) \
                NU_STORE(dst, DDT, pc.first_dst + zb * pc.dst_batch + row * pc.dst_row + col, v) \
        } \
        subgroupBarrier(); \
    }
const uint BM = WM * FM * 16u, BN = WN * FN * 16u;
const uint ROW = (BK + 8u) / 8u;               // a tile row in shared memory: BK + 8 halves
const uint TILE_A = BM * ROW, TILE_B = BN * ROW; // uvec4 a tile
// [buffer][a tile, w tile] as uvec4 of 8 halves: 16-byte stores, and coopMatLoad counts offsets
// and strides in uvec4. The subgroups' 16 x 16 output blocks for EPILOGUE 1.
shared uvec4 tiles[BUFFERS * (TILE_A + TILE_B)];
shared float scratch[EPILOGUE == 1u ? WM * WN * 256u : 1u];

void put8(uint at, uvec4 v) { tiles[at] = v; } // 8 halves at uvec4 index `at`

NU_TENSOR(writeonly, 0, dst)
layout(std430, binding = 0) writeonly buffer dst_F { float dst_f[]; };          // EPILOGUE 0, F32
#ifndef TILES_BF16
layout(std430, binding = 0) writeonly buffer dst_F16 { float16_t dst_f16[]; };  // EPILOGUE 0, F16
#endif
NU_TENSOR(readonly, 1, a)
NU_TENSOR(readonly, 2, w)
NU_TENSOR(readonly, 3, bias)
layout(push_constant) uniform Push {
    uint m, n, k;
    uint first_a, a_row, a_batch;    // elements
    uint first_w, w_row, w_batch;    // elements (F16) or halves (block dtypes)
    uint first_dst, dst_batch;       // dst [.., m, n]: its columns contiguous, rows dst_row apart
    uint first_bias;
    uint tile_x, tile_y;             // the first tile's column and row (in tiles)
    uint k_per;                      // split-K: the k of a split (a multiple of BK and 256); k: none
    uint batches;                    // a's and w's batches: workgroup z is split * batches + batch
    uint dst_row;                    // elements
} pc;

uvec4 zero4() { return uvec4(0u); }

uint w_word(uint i) { return w_w[i]; }
// The word at index i, read as its low half where the binding ends inside it (see matvec_dot.comp).
uint w_last_word(uint i) { return i < uint(w_w.length()) ? w_w[i] : uint(w_h[2u * i]); }
uint funnel(uint a, uint b, uint s) { return (a >> s) | ((b << 1u) << (31u - s)); }

// A block weight's unit (16 elements: half a Q8_0 block, a Q4_0 block's low or high nibbles, half
// of a K format's 32-element sub-block) as loaded: the 16 bytes' words (and the word after, where
// they start at an odd half) and the scale. Loaded before the products of a step, converted to F16
// after them (block_to_f16), so that the loads are in flight while the matrix units work.
// K formats: w holds Q4_K's 16 quant bytes or Q6_K's 16 ql bytes; x (and x4) Q4_K's 16-byte
// header (d, dmin, scales) or Q6_K's 16 qh bytes (the same half's parity: shift serves both); d
// Q6_K's d and e the half holding its unit's int8 scale; j the sub-block in its super-block.
struct Raw { uvec4 w; uint w4; uint d; uint shift; uvec4 x; uint x4; uint e; uint j; };

uvec4 words4(uint i) { return uvec4(w_word(i), w_word(i + 1u), w_word(i + 2u), w_word(i + 3u)); }

// Unit `part` of block blk (32 elements) of row `row`, whose first half is hr.
Raw load_kblock(uint hr, uint row, uint blk, uint part)
{
    Raw r;
    uint sb = blk / 8u, j = blk % 8u, h0, hx;
    r.j = j;
    if (WDT == Q4_K) { // 72 halves: d, dmin, scales[12] (8 halves), qs[128]
        hx = hr + sb * 72u;
        h0 = hx + 8u + 16u * (j / 2u) + 8u * part; // qs[32 (j / 2) + 16 part ..]: nibble j % 2
        r.d = 0u;
        r.e = 0u;
    } else { // Q6_K, 105 halves: ql[128], qh[64], scales[16], d; Q6_K_SOA the same 104, d apart
        uvec2 at = WDT == Q6_K_SOA ? nu_q6s_halves(pc.first_w, row * (pc.k / 256u) + sb)
                                   : uvec2(hr + sb * 105u, hr + sb * 105u + 104u);
        uint hb = at.x, n = j / 4u, q = j % 4u;
        h0 = hb + 32u * n + 16u * (q & 1u) + 8u * part; // ql[64 n + 32 (q & 1) + 16 part ..]
        hx = hb + 64u + 16u * n + 8u * part;            // qh[32 n + 16 part ..]
        r.e = uint(w_h[hb + 96u + 4u * n + q]);         // scales[8 n + 2 q + part]: byte `part`
        if (K6PAIR) // and sub-block j + 2's in the high half (q < 2 here)
            r.e |= uint(w_h[hb + 98u + 4u * n + q]) << 16u;
        r.d = uint(w_h[at.y]);
    }
    if (VEC != 0u) { // both runs 16-byte aligned: a load each
        r.shift = 0u;
        r.w = w_v[h0 / 8u];
        r.x = w_v[hx / 8u];
        r.w4 = r.x4 = 0u;
        return r;
    }
    r.shift = EVEN != 0u ? 0u : (h0 & 1u) * 16u;
    r.w = words4(h0 >> 1u);
    r.w4 = r.shift != 0u ? w_last_word((h0 >> 1u) + 4u) : 0u;
    r.x = words4(hx >> 1u);
    r.x4 = r.shift != 0u ? w_last_word((hx >> 1u) + 4u) : 0u;
    return r;
}

// Q4_0_SOA's block blk of the row whose first half is hr: its scale's half and its first quant
// half (the row's k / 32 scales, then its runs of 16 quant bytes).
uvec2 soa_block(uint hr, uint blk) { return uvec2(hr + blk, hr + pc.k / 32u + 8u * blk); }

Raw load_block(uint row, uint blk, uint part)
{
    uint hr = pc.first_w + row * pc.w_row, hb, h0; // the row's first half; the block's scale and quants
    if (KFMT)
        return load_kblock(hr, row, blk, part);
    if (WDT == Q4_0_SOA) {
        uvec2 at = soa_block(hr, blk);
        hb = at.x;
        h0 = at.y;
    } else {
        hb = hr + blk * (WDT == Q8_0 ? 17u : 9u);
        h0 = hb + 1u + (WDT == Q8_0 ? 8u * part : 0u); // Q4_0: both parts read all 16 bytes
    }
    uint i = h0 >> 1u;
    Raw r;
    r.shift = (h0 & 1u) * 16u;
    r.d = uint(w_h[hb]);
    r.w = uvec4(w_word(i), w_word(i + 1u), w_word(i + 2u), w_word(i + 3u));
    r.w4 = r.shift != 0u ? w_last_word(i + 4u) : 0u;
    return r;
}

Raw zero_raw()
{
    Raw r;
    r.w = uvec4(0u); r.w4 = 0u; r.d = 0u; r.shift = 0u; r.x = uvec4(0u); r.x4 = 0u; r.e = 0u; r.j = 0u;
    return r;
}

// A K format's unit as F16: byte i of q (16 bytes) with x's byte i gives element i.
void kblock_to_f16(Raw r, uint part, out uvec4 lo, out uvec4 hi)
{
    uint s = r.shift;
    uint q[4] = uint[4](funnel(r.w.x, r.w.y, s), funnel(r.w.y, r.w.z, s), funnel(r.w.z, r.w.w, s), funnel(r.w.w, r.w4, s));
    uint x[4] = uint[4](funnel(r.x.x, r.x.y, s), funnel(r.x.y, r.x.z, s), funnel(r.x.z, r.x.w, s), funnel(r.x.w, r.x4, s));
    float scale, mn = 0.0;
    uint nib, hbit = 0u;
    if (WDT == Q4_K) { // x is the header: w = (d * sc) * q - dmin * m
        uint j = r.j;
        uvec2 sm = nu_q_k4_scale_min(uvec3(x[1], x[2], x[3]), j);
        precise float sc = nu_q_f16(x[0] & 0xffffu) * float(sm.x);
        precise float m = nu_q_f16(x[0] >> 16u) * float(sm.y);
        scale = sc;
        mn = m;
        nib = 4u * (j % 2u); // zero_raw(): d and dmin 0, so every value is 0
    } else { // Q6_K: w = (d * sc) * (q - 32), q = ql's nibble | qh's two bits << 4
        uint q4 = r.j % 4u;
        int sc = bitfieldExtract(int(r.e), int(8u * part), 8);
        precise float ds = nu_q_f16(r.d) * float(sc);
        scale = ds;
        nib = 4u * (q4 / 2u);
        hbit = 2u * q4;
    }
    float v[16];
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        uint b = (q[i / 4u] >> (8u * (i % 4u))) & 0xffu, c = (x[i / 4u] >> (8u * (i % 4u))) & 0xffu;
        uint u = (b >> nib) & 15u;
        precise float val;
        if (WDT == Q4_K) {
            val = scale * float(u) - mn;
        } else {
            val = scale * float(int(u | (((c >> hbit) & 3u) << 4u)) - 32);
        }
        v[i] = val;
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        lo[i] = packHalf2x16(vec2(v[2u * i], v[2u * i + 1u]));
        hi[i] = packHalf2x16(vec2(v[8u + 2u * i], v[8u + 2u * i + 1u]));
    }
}

// Elements 16 * part .. 16 * part + 15 of a unit, as F16 (two uvec4), two at a time in F16 vector
// arithmetic: a byte or nibble b or'ed into the mantissa of 1024.0 (0x6400) is 1024 + b exactly, so
// (1024 + b - bias) * d is the weight rounded once to F16 (the product of two F16 values, as
// rounding the exact F32 product would give).
#ifndef TILES_BF16
uvec4 dequant8(uvec4 pairs, f16vec2 bias, f16vec2 d) // 4 words of two biased values each (b | 0x6400 form)
{
    uvec4 r;
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        r[i] = packFloat2x16((unpackFloat2x16(pairs[i]) - bias) * d);
    return r;
}
#endif

// Q4_0's (and Q4_0_SOA's) k order in the tiles: within each aligned group of four k, the middle
// two swap places (k 4g, 4g + 2, 4g + 1, 4g + 3), in a's tile and w's alike, so the products and
// their sums over k are unchanged. Why: quant word i of a block holds elements 4i..4i+3 in its low
// nibbles (16 + 4i.. in its high ones), and (word >> s) & 0x000f000f puts two of them, 4i + s / 8
// and 4i + 2 + s / 8 (s = 0 or 8; 4 or 12 for the high nibbles), in the low bits of two halves at
// once: a pair of tile elements for a shift and two logic operations (one LOP3), where taking
// elements in k order costs a byte extraction and a pack for each. a's tile takes the same order
// by swapping halves between its words (perm4, store_tiles). H200 (bench/RESULTS.md, thirteenth
// session): 16 x 4096 > 11008 Q4_0_SOA 31.7 -> 29.6 us, 64 x 11008 > 4096 60.3 -> 55.0.
const bool PERM = WDT == Q4_0 || WDT == Q4_0_SOA;

// Two words of halves (x0, x1), (y0, y1), k 4g..4g+3, in PERM's order: (x0, y0), (x1, y1).
uvec2 perm4(uint x, uint y) { return uvec2((x & 0xffffu) | (y << 16u), (x >> 16u) | (y & 0xffff0000u)); }

void block_to_f16(Raw r, uint part, out uvec4 lo, out uvec4 hi)
{
    if (KFMT) {
        kblock_to_f16(r, part, lo, hi);
        return;
    }
#ifdef TILES_BF16 // never called: this variant's w is BF16
    lo = hi = uvec4(0u);
#else
    f16vec2 d = f16vec2(unpackFloat2x16(r.d * 0x10001u).x);
    uint s = r.shift;
    uint q[4] = uint[4](funnel(r.w.x, r.w.y, s), funnel(r.w.y, r.w.z, s), funnel(r.w.z, r.w.w, s), funnel(r.w.w, r.w4, s));
    if (PERM) {
        // The unit's elements (low nibbles for part 0, high for 1) in PERM's order: word i gives
        // tile elements 4i..4i+3 as two pairs, its nibbles at shift b and b + 8.
        uint b = 4u * part;
        uvec4 p[2];
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            p[i / 2u][2u * (i % 2u)] = ((q[i] >> b) & 0x000f000fu) | 0x64006400u;
            p[i / 2u][2u * (i % 2u) + 1u] = ((q[i] >> (b + 8u)) & 0x000f000fu) | 0x64006400u;
        }
        f16vec2 bias = f16vec2(1032.0hf);
        lo = dequant8(p[0], bias, d);
        hi = dequant8(p[1], bias, d);
        return;
    }
    uvec4 p[2];
    [[unroll]] for (uint h = 0u; h < 2u; h++) {
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            // Elements 8h + 2i, 8h + 2i + 1: byte 2i % 4 and 2i % 4 + 1 of word (8h + 2i) / 4.
            uint w = q[(8u * h + 2u * i) / 4u] >> (16u * (i % 2u)); // two bytes, low 16 bits
            uint b0 = w & 0xffu, b1 = (w >> 8u) & 0xffu;
            if (WDT == Q8_0) {
                b0 ^= 0x80u; // -128..127 as 0..255: 1024 + 128 + q
                b1 ^= 0x80u;
            } else {
                b0 = part == 0u ? b0 & 15u : b0 >> 4u;
                b1 = part == 0u ? b1 & 15u : b1 >> 4u;
            }
            p[h][i] = (b0 | 0x6400u) | ((b1 | 0x6400u) << 16u);
        }
    }
    f16vec2 bias = f16vec2(WDT == Q8_0 ? 1152.0hf : 1032.0hf);
    lo = dequant8(p[0], bias, d);
    hi = dequant8(p[1], bias, d);
#endif
}

// What one thread moves into shared memory per K step: A_PER uvec4 of a, W_PER of F16 w,
// B_PER units of block w, or Q_PER whole Q4_0_SOA blocks (VEC).
const bool WHOLE = WDT == Q4_0_SOA && VEC != 0u;
const uint A_PER = (BM * BK / 8u + LOCAL - 1u) / LOCAL;
// Block weights: thread pairs take a block (of BK / 32 a row), a unit (16 elements) each; with
// VEC a Q4_0_SOA thread takes a block.
// K4PAIR and K6PAIR (above): a thread takes a unit of two sub-blocks.
const uint W_UNITS = BN * (BK / UNIT_K) * 2u, W_BLOCKS = BN * (BK / 32u);
const uint W_PER = RAW_W ? (BN * BK / 8u + LOCAL - 1u) / LOCAL : 1u;
const uint B_PER = RAW_W || WHOLE ? 1u : (W_UNITS + LOCAL - 1u) / LOCAL;
const uint Q_PER = WHOLE ? (W_BLOCKS + LOCAL - 1u) / LOCAL : 1u;
uvec4 ra[A_PER], rw[W_PER], rq[Q_PER];
uint rs[Q_PER]; // the blocks' F16 scales (VEC)
Raw rb[B_PER];

void load_tiles(uint batch, uint m0, uint n0, uint k0)
{
    uint tid = gl_LocalInvocationID.x;
    if ((PROBE & 1u) != 0u) {
        [[unroll]] for (uint p = 0u; p < A_PER; p++) ra[p] = uvec4(k0);
        [[unroll]] for (uint p = 0u; p < W_PER; p++) rw[p] = uvec4(k0);
        [[unroll]] for (uint p = 0u; p < B_PER; p++) {
            rb[p] = zero_raw();
            rb[p].w = uvec4(k0 * 0x9e3779b9u + p);
            rb[p].x = rb[p].w.yxwz;
            rb[p].d = rb[p].e = (k0 + tid) & 0x3bffu; // a finite F16
            rb[p].j = (k0 / 32u) & (K4PAIR ? 6u : K6PAIR ? 5u : 7u); // a pair's first: j even (Q4_K), j % 4 < 2 (Q6_K)
        }
        [[unroll]] for (uint p = 0u; p < Q_PER; p++) rq[p] = uvec4(k0 * 0x9e3779b9u + p), rs[p] = (k0 + tid) & 0x3bffu;
        return;
    }
    [[unroll]] for (uint p = 0u; p < A_PER; p++) {
        uint e = tid + p * LOCAL, r = e / (BK / 8u), c = e % (BK / 8u);
        uint row = m0 + r, kk = kpos(k0 + 8u * c);
        ra[p] = e < BM * BK / 8u && row < pc.m && kk < pc.k
                    ? a_v[(pc.first_a + batch * pc.a_batch + row * pc.a_row + kk) / 8u] : zero4();
    }
    if (RAW_W) {
        [[unroll]] for (uint p = 0u; p < W_PER; p++) {
            uint e = tid + p * LOCAL, r = e / (BK / 8u), c = e % (BK / 8u);
            uint row = n0 + r, kk = k0 + 8u * c;
            rw[p] = e < BN * BK / 8u && row < pc.n && kk < pc.k
                        ? w_v[(pc.first_w + batch * pc.w_batch + row * pc.w_row + kk) / 8u] : zero4();
        }
    } else if (WHOLE) {
        // A thread a block: a row's BK / 32 blocks to consecutive threads (one contiguous run of
        // the row's quants, and of its scales).
        [[unroll]] for (uint p = 0u; p < Q_PER; p++) {
            uint e = tid + p * LOCAL, r = e / (BK / 32u), blk = (k0 + 32u * (e % (BK / 32u))) / 32u;
            uint row = n0 + r;
            uvec2 at = soa_block(pc.first_w + row * pc.w_row, blk);
            bool inside = e < W_BLOCKS && row < pc.n && 32u * blk < pc.k;
            rq[p] = inside ? w_v[at.y / 8u] : zero4();
            rs[p] = inside ? uint(w_h[at.x]) : 0u;
        }
    } else {
        // Thread pairs take a block, a unit each.
        [[unroll]] for (uint p = 0u; p < B_PER; p++) {
            uint e = tid + p * LOCAL, r = e / (2u * (BK / UNIT_K)), bi = (e / 2u) % (BK / UNIT_K), part = e % 2u;
            uint row = n0 + r, kb = kpos(k0 + UNIT_K * bi); // KPAIR: the pair's first sub-block's first k
            rb[p] = e < W_UNITS && row < pc.n && kb < pc.k ? load_block(row, kb / 32u, part) : zero_raw();
        }
    }
}

void store_tiles(uint buf)
{
    uint tid = gl_LocalInvocationID.x;
    uint base = buf * (TILE_A + TILE_B);
    [[unroll]] for (uint p = 0u; p < A_PER; p++) {
        uint e = tid + p * LOCAL;
        uvec4 v = ra[p];
        if (PERM) // w's k order (PERM): 8 halves, two groups of four k
            v = uvec4(perm4(v.x, v.y), perm4(v.z, v.w));
        if (e < BM * BK / 8u)
            put8(base + (e / (BK / 8u)) * ROW + e % (BK / 8u), v);
    }
    if (RAW_W) {
        [[unroll]] for (uint p = 0u; p < W_PER; p++) {
            uint e = tid + p * LOCAL;
            if (e < BN * BK / 8u)
                put8(base + TILE_A + (e / (BK / 8u)) * ROW + e % (BK / 8u), rw[p]);
        }
    } else if (WHOLE) {
        [[unroll]] for (uint p = 0u; p < Q_PER; p++) {
            uint e = tid + p * LOCAL;
            if (e < W_BLOCKS) {
                uint at = base + TILE_A + (e / (BK / 32u)) * ROW + (e % (BK / 32u)) * 4u;
                Raw r = zero_raw();
                r.w = rq[p];
                r.d = rs[p];
                uvec4 lo, hi;
                block_to_f16(r, 0u, lo, hi); // elements 0..15: the low nibbles
                put8(at, lo);
                put8(at + 1u, hi);
                block_to_f16(r, 1u, lo, hi); // 16..31: the high nibbles
                put8(at + 2u, lo);
                put8(at + 3u, hi);
            }
        }
    } else {
        [[unroll]] for (uint p = 0u; p < B_PER; p++) {
            uint e = tid + p * LOCAL;
            if (e < W_UNITS && KPAIR) {
                // Elements 16 part.. of the pair's first sub-block at (the step's) k 64 bi + 16 part,
                // of its second 32 on.
                uint at = base + TILE_A + (e / (2u * (BK / 64u))) * ROW + ((e / 2u) % (BK / 64u)) * 8u + (e % 2u) * 2u;
                uvec4 lo, hi;
                Raw r = rb[p];
                kblock_to_f16(r, e % 2u, lo, hi); // zero_raw() gives zeros (scale 0)
                put8(at, lo);
                put8(at + 1u, hi);
                r.j += K4PAIR ? 1u : 2u; // the high nibbles: the next sub-block (Q4_K) or j + 2 (Q6_K)
                r.e >>= 16u; // K6PAIR: j + 2's scales
                kblock_to_f16(r, e % 2u, lo, hi);
                put8(at + 4u, lo);
                put8(at + 5u, hi);
            } else if (e < W_UNITS) {
                uint at = base + TILE_A + (e / (2u * (BK / 32u))) * ROW + (e % (2u * (BK / 32u))) * 2u;
                uvec4 lo, hi;
                block_to_f16(rb[p], e % 2u, lo, hi); // zero_raw() gives zeros (scale 0)
                put8(at, lo);
                put8(at + 1u, hi);
            }
        }
    }
}

void main()
{
    // Split-K (src/ops/matmul_tc.c: a grid too small for the device): workgroup z takes k0..k1 of
    // batch z % batches and writes its partial sums as batch z of dst (F32 partials, summed by
    // matmul_splits.comp); without a split z is the batch and k0..k1 all of k.
    uint zb = gl_WorkGroupID.z, batch = zb % pc.batches, k0 = (zb / pc.batches) * pc.k_per;
    uint k1 = min(pc.k, k0 + pc.k_per);
    uint n0 = (pc.tile_x + gl_WorkGroupID.x) * BN, m0 = (pc.tile_y + gl_WorkGroupID.y) * BM;
    uint sg = gl_SubgroupID, wm = sg / WN, wn = sg % WN;
    // The accumulators and fragments are named variables, one per (i, j) < (8, 8), not arrays:
    // those the tile does not use (i >= FM or j >= FN, specialisation constants) are never touched
    // and vanish. Arrays sized by specialisation constants ran from memory (34 TFLOP/s against
    // 400+); arrays of compile-time size ran from registers but made the H200's driver reserve
    // local memory for them, 138 MiB of device memory a context once the kernel ran (512 bytes a
    // thread; bench/RESULTS.md, ninth session).
    EACH_FRAG(DECLARE_ACC)

    uint steps = (k1 - k0 + BK - 1u) / BK;
    load_tiles(batch, m0, n0, k0);
    store_tiles(0u);
    barrier();
    for (uint s = 0u; s < steps; s++) {
        uint buf = BUFFERS == 2u ? s & 1u : 0u, base = buf * (TILE_A + TILE_B);
        if (s + 1u < steps)
            load_tiles(batch, m0, n0, k0 + (s + 1u) * BK); // in flight while the matrix units work
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            if (ORDER == 0u) {
                EACH_SIDE(LOAD_A)
                EACH_SIDE(LOAD_B) // w's rows are the product's columns: column-major K x N
                EACH_FRAG(MULTIPLY_ADD)
            } else {
                EACH_SIDE(LOAD_B)
                EACH_SIDE(STREAM_A)
            }
        }
        if (s + 1u < steps) {
            if (BUFFERS == 1u)
                barrier(); // every subgroup is done reading the buffer
            store_tiles(BUFFERS == 2u ? buf ^ 1u : 0u); // two buffers: nobody reads the other during this step
            barrier();
        }
    }

    if (EPILOGUE == 0u) { // whole tiles, F32 or F16, no bias
        uint first = pc.first_dst + zb * pc.dst_batch + (m0 + wm * FM * 16u) * pc.dst_row + n0 + wn * FN * 16u;
        EACH_FRAG(STORE_DIRECT)
        return;
    }
    // Out through shared memory: each subgroup its own 16 x 16 floats at a time.
    uint lane = gl_SubgroupInvocationID;
    uint out0 = sg * 256u;
    EACH_FRAG(STORE_THROUGH_SHARED)
}
