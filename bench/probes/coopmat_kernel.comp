#version 450
// bench/probes/coopmat_kernel.comp: kernels/matmul/matmul_coopmat.comp (F16 x F16 -> F32 only) with
// switches that each remove one suspect, compiled into several modules by bench/probes/coopmat_kernel.sh
// and timed by bench/probes/coopmat_kernel.c. A throwaway measurement; see bench/RESULTS.md.
//   FIXED       tile sizes and workgroup size as literals (no specialisation constants)
//   DIRECT_OUT  accumulators stored straight to dst (no shared scratch, no per-element loop)
//   NO_STORE    the tiles are not stored to shared memory inside the loop (barriers stay)
//   NO_BARRIER  no barriers inside the loop (results wrong: timing only)
//   VEC_STORE   tiles stored as uvec4 into a uvec4 view (GL_EXT_shared_memory_block)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require // [[unroll]]: arrays of matrices must not be indexed at run time
#extension GL_GOOGLE_include_directive : require // glslc enables it itself; glslang needs it asked
#include "ops.glsl"

layout(constant_id = 0) const uint WDT = NU_F16;
layout(constant_id = 1) const uint DDT = NU_F32;
layout(constant_id = 2) const uint BIAS = 0u;
layout(constant_id = 3) const uint BDT = NU_F32;
#ifdef FIXED
const uint WM = 2u, WN = 4u, FM = 4u, FN = 2u, BK = FIXED_BK, BUFFERS = 1u;
#else
layout(constant_id = 5) const uint WM = 2u;
layout(constant_id = 6) const uint WN = 4u;
layout(constant_id = 7) const uint FM = 4u;
layout(constant_id = 8) const uint FN = 2u;
layout(constant_id = 9) const uint BK = 32u;
layout(constant_id = 10) const uint BUFFERS = 2u;
#endif
layout(constant_id = 11) const uint PROBE = 0u;
#ifdef FIXED
layout(local_size_x = 256) in;
#else
layout(local_size_x = 256, local_size_x_id = 4) in;
#endif
const uint LOCAL = gl_WorkGroupSize.x;

#define Q8_0 4u
#define Q4_0 5u
#ifdef FIXED
#define MAX_FRAGS 8u
#define MAX_SIDE_A 4u
#define MAX_SIDE_B 2u
#else
#define MAX_FRAGS 16u
#define MAX_SIDE_A 8u
#define MAX_SIDE_B 8u
#endif
const uint BM = WM * FM * 16u, BN = WN * FN * 16u;
const uint ROW = (BK + 8u) / 8u;               // a tile row in shared memory: BK + 8 halves
const uint TILE_A = BM * ROW, TILE_B = BN * ROW; // uvec4 a tile
// [buffer][a tile, w tile] as halves (coopMatLoad from an array of the matrix's component type
// takes the drivers' fast path; from uvec4 arrays the H200 ran at 34 TFLOP/s whatever the tile),
// and the subgroups' 16 x 16 output blocks.
#ifdef VEC_STORE
#extension GL_EXT_shared_memory_block : require
shared Tiles { float16_t tiles[BUFFERS * (TILE_A + TILE_B) * 8u]; };
shared TilesV { uvec4 tiles_v[BUFFERS * (TILE_A + TILE_B)]; };
#else
shared float16_t tiles[BUFFERS * (TILE_A + TILE_B) * 8u];
#endif
#ifdef VEC_STORE
shared Scratch { float scratch[WM * WN * 256u]; }; // blocks alias: timing only
#else
shared float scratch[WM * WN * 256u];
#endif

void put8(uint at, uvec4 v) // 8 halves from uvec4 index `at` (in uvec4 units)
{
#ifdef VEC_STORE
    tiles_v[at] = v;
    return;
#endif
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        f16vec2 h = unpackFloat2x16(v[i]);
        tiles[8u * at + 2u * i] = h.x;
        tiles[8u * at + 2u * i + 1u] = h.y;
    }
}

#ifdef DIRECT_OUT
layout(std430, binding = 0) writeonly buffer dst_W { float dst_w[]; };
#else
NU_TENSOR(writeonly, 0, dst)
#endif
NU_TENSOR(readonly, 1, a)
NU_TENSOR(readonly, 2, w)
NU_TENSOR(readonly, 3, bias)
layout(push_constant) uniform Push {
    uint m, n, k;
    uint first_a, a_row, a_batch;    // elements
    uint first_w, w_row, w_batch;    // elements (F16) or halves (block dtypes)
    uint first_dst, dst_batch;       // dst is contiguous [.., m, n]
    uint first_bias;
} pc;

uvec4 zero4() { return uvec4(0u); }

uint w_word(uint i) { return w_w[i]; }
// The word at index i, read as its low half where the binding ends inside it (see matvec_dot.comp).
uint w_last_word(uint i) { return i < uint(w_w.length()) ? w_w[i] : uint(w_h[2u * i]); }
uint funnel(uint a, uint b, uint s) { return (a >> s) | ((b << 1u) << (31u - s)); }

// Elements 16 * part .. 16 * part + 15 of weight row `row`'s block `blk`, as F16 (two uvec4).
void block_to_f16(uint row, uint blk, uint part, out uvec4 lo, out uvec4 hi)
{
    uint hb = pc.first_w + row * pc.w_row + blk * (WDT == Q8_0 ? 17u : 9u);
    float d = nu_f16_to_f32(uint(w_h[hb]));
    uint h0 = hb + 1u + (WDT == Q8_0 ? 8u * part : 0u); // Q4_0: both parts read all 16 bytes
    uint i = h0 >> 1u, s = (h0 & 1u) * 16u;
    uint q0 = funnel(w_word(i), w_word(i + 1u), s), q1 = funnel(w_word(i + 1u), w_word(i + 2u), s);
    uint q2 = funnel(w_word(i + 2u), w_word(i + 3u), s);
    uint q3 = funnel(w_word(i + 3u), s != 0u ? w_last_word(i + 4u) : 0u, s);
    uint q[4] = uint[4](q0, q1, q2, q3);
    float v[16];
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        uint byte = (q[j / 4u] >> (8u * (j % 4u))) & 0xffu;
        if (WDT == Q8_0)
            v[j] = d * float(int(byte << 24) >> 24);
        else
            v[j] = d * float(int(part == 0u ? (byte & 15u) : (byte >> 4)) - 8);
    }
    lo = uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])), packHalf2x16(vec2(v[4], v[5])),
               packHalf2x16(vec2(v[6], v[7])));
    hi = uvec4(packHalf2x16(vec2(v[8], v[9])), packHalf2x16(vec2(v[10], v[11])),
               packHalf2x16(vec2(v[12], v[13])), packHalf2x16(vec2(v[14], v[15])));
}

// What one thread moves into shared memory per K step: A_PER uvec4 of a, W_PER of w.
const uint A_PER = (BM * BK / 8u + LOCAL - 1u) / LOCAL;
// Block weights: thread pairs take a block (of BK / 32 a row), two uvec4 each (an even count).
const uint W_UNITS = BN * (BK / 32u) * 2u;
const uint W_PER = WDT == NU_F16 ? (BN * BK / 8u + LOCAL - 1u) / LOCAL : 2u * ((W_UNITS + LOCAL - 1u) / LOCAL);
uvec4 ra[A_PER], rw[W_PER];

void load_tiles(uint batch, uint m0, uint n0, uint k0)
{
    uint tid = gl_LocalInvocationID.x;
    if ((PROBE & 1u) != 0u) {
        [[unroll]] for (uint p = 0u; p < A_PER; p++) ra[p] = uvec4(k0);
        [[unroll]] for (uint p = 0u; p < W_PER; p++) rw[p] = uvec4(k0);
        return;
    }
    [[unroll]] for (uint p = 0u; p < A_PER; p++) {
        uint e = tid + p * LOCAL, r = e / (BK / 8u), c = e % (BK / 8u);
        uint row = m0 + r, kk = k0 + 8u * c;
        ra[p] = e < BM * BK / 8u && row < pc.m && kk < pc.k
                    ? a_v[(pc.first_a + batch * pc.a_batch + row * pc.a_row + kk) / 8u] : zero4();
    }
    if (WDT == NU_F16) {
        [[unroll]] for (uint p = 0u; p < W_PER; p++) {
            uint e = tid + p * LOCAL, r = e / (BK / 8u), c = e % (BK / 8u);
            uint row = n0 + r, kk = k0 + 8u * c;
            rw[p] = e < BN * BK / 8u && row < pc.n && kk < pc.k
                        ? w_v[(pc.first_w + batch * pc.w_batch + row * pc.w_row + kk) / 8u] : zero4();
        }
    } else {
        // Thread pairs take a block, 16 elements each (two uvec4).
        [[unroll]] for (uint p = 0u; p < W_PER; p += 2u) {
            uint e = tid + (p / 2u) * LOCAL, r = e / (2u * (BK / 32u)), bi = (e / 2u) % (BK / 32u), part = e % 2u;
            uint row = n0 + r, kb = k0 + 32u * bi;
            if (e < W_UNITS && row < pc.n && kb < pc.k)
                block_to_f16(row, kb / 32u, part, rw[p], rw[p + 1u]);
            else {
                rw[p] = zero4();
                rw[p + 1u] = zero4();
            }
        }
    }
}

void store_tiles(uint buf)
{
    uint tid = gl_LocalInvocationID.x;
    uint base = buf * (TILE_A + TILE_B);
    [[unroll]] for (uint p = 0u; p < A_PER; p++) {
        uint e = tid + p * LOCAL;
        if (e < BM * BK / 8u)
            put8(base + (e / (BK / 8u)) * ROW + e % (BK / 8u), ra[p]);
    }
    if (WDT == NU_F16) {
        [[unroll]] for (uint p = 0u; p < W_PER; p++) {
            uint e = tid + p * LOCAL;
            if (e < BN * BK / 8u)
                put8(base + TILE_A + (e / (BK / 8u)) * ROW + e % (BK / 8u), rw[p]);
        }
    } else {
        [[unroll]] for (uint p = 0u; p < W_PER; p += 2u) {
            uint e = tid + (p / 2u) * LOCAL;
            if (e < W_UNITS) {
                uint at = base + TILE_A + (e / (2u * (BK / 32u))) * ROW + (e % (2u * (BK / 32u))) * 2u;
                put8(at, rw[p]);
                put8(at + 1u, rw[p + 1u]);
            }
        }
    }
}

void main()
{
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM, batch = gl_WorkGroupID.z;
    uint sg = gl_SubgroupID, wm = sg / WN, wn = sg % WN;
    // Arrays of matrices sized by compile-time constants, not by the specialisation constants: the
    // H200's compiler put spec-constant-sized ones in memory (34 TFLOP/s, against 400+ without the
    // products); the loops below touch the first FM * FN, FM and FN.
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[MAX_FRAGS];
    [[unroll]] for (uint i = 0u; i < FM * FN; i++)
        acc[i] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);

    uint steps = (pc.k + BK - 1u) / BK;
    load_tiles(batch, m0, n0, 0u);
    store_tiles(0u);
    barrier();
    for (uint s = 0u; s < steps; s++) {
        uint buf = BUFFERS == 2u ? s & 1u : 0u, base = buf * (TILE_A + TILE_B);
        if (s + 1u < steps)
            load_tiles(batch, m0, n0, (s + 1u) * BK); // in flight while the matrix units work
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[MAX_SIDE_A];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[MAX_SIDE_B];
            [[unroll]] for (uint i = 0u; i < FM; i++)
                coopMatLoad(fa[i], tiles, 8u * (base + (wm * FM * 16u + 16u * i) * ROW) + kk, 8u * ROW,
                            gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0u; j < FN; j++) // w's rows are the product's columns: column-major K x N
                coopMatLoad(fb[j], tiles, 8u * (base + TILE_A + (wn * FN * 16u + 16u * j) * ROW) + kk, 8u * ROW,
                            gl_CooperativeMatrixLayoutColumnMajor);
            [[unroll]] for (uint i = 0u; i < FM; i++)
                [[unroll]] for (uint j = 0u; j < FN; j++)
                    if ((PROBE & 2u) == 0u) acc[i * FN + j] = coopMatMulAdd(fa[i], fb[j], acc[i * FN + j]);
        }
        if (s + 1u < steps) {
#ifndef NO_BARRIER
            if (BUFFERS == 1u)
                barrier(); // every subgroup is done reading the buffer
#endif
#ifndef NO_STORE
            store_tiles(BUFFERS == 2u ? buf ^ 1u : 0u); // two buffers: nobody reads the other during this step
#endif
#ifndef NO_BARRIER
            barrier();
#endif
        }
    }

#ifdef DIRECT_OUT
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++) {
            uint row = m0 + wm * FM * 16u + 16u * i, col = n0 + wn * FN * 16u + 16u * j;
            coopMatStore(acc[i * FN + j], dst_w, pc.first_dst + row * pc.n + col, pc.n, gl_CooperativeMatrixLayoutRowMajor);
        }
#else
    // Out through shared memory: each subgroup its own 16 x 16 floats at a time.
    uint lane = gl_SubgroupInvocationID;
    uint out0 = sg * 256u;
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++) {
            coopMatStore(acc[i * FN + j], scratch, out0, 16u, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
                uint r = e / 16u, c = e % 16u;
                uint row = m0 + wm * FM * 16u + 16u * i + r, col = n0 + wn * FN * 16u + 16u * j + c;
                float v = scratch[out0 + e];
                if (BIAS != 0u && col < pc.n)
                    v += NU_LOAD(bias, BDT, pc.first_bias + col);
                if (row < pc.m && col < pc.n)
                    NU_STORE(dst, DDT, pc.first_dst + batch * pc.dst_batch + row * pc.n + col, v)
            }
            subgroupBarrier();
        }
#endif
}
