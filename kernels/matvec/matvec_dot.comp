#version 450
// matvec_dot: nu_op_matvec (nuvec/ops.h) against block weights with 4x8-bit integer dot
// products (SPIR-V 1.6's OpSDot, GL_EXT_integer_dot_product): the path of devices that have them
// (shaderIntegerDotProduct), subgroup arithmetic and shuffles, subgroups of a multiple of 8 lanes; src/ops/matvec.c chooses it, the float path
// (matvec.comp / matvec_sg.comp) elsewhere. Compiled by glslang 15 (deps/deps.sh: Debian 12's
// glslc lacks the extension).
//
// Why: the float path dequantizes every weight to F32 and multiplies it (a shift, a mask, an or,
// a subtraction and an FMA per element), which keeps the H200 at a third of its memory bandwidth.
// Here x is quantized once per workgroup to 8 bits per 32-element block, as llama.cpp's quantized
// kernels do, and one OpSDot multiplies and sums four weight bytes against four x bytes. With a
// weight group (8 elements: kernels/quant.glsl) of quant bytes q, scale D, offset o and minimum M
// (w[i] = D (q[i] + o) + M) and x's block of row m
//   dx = max|x| / 127, xq[i] = roundEven(x[i] / dx) (in -127..127),
//   sum_i w[i] x[i] ~ D * (dx * sum_i q[i] xq[i]) + (D o + M) * (dx * sum_i xq[i])
// so the result differs from the exact product by at most sum_i |w[i]| * dx / 2 per block (x's
// rounding; the test states it), plus F32 summation.
//
// Layout of the work:
// - Phase 1: the workgroup quantizes the M rows of x (K elements) into shared memory: xq as
//   4 uvec2 a block (bytes of elements 8j..8j+7 in uvec2 j), dx a block and dx * the sum of each
//   8-element group's xq (xgs). Eight threads a block, four elements each (quantize_x); one
//   barrier.
// - Phase 2: SPLIT subgroups compute ROWS consecutive weight rows at a time, each a SPLIT-th of
//   every row (the workgroup takes LOCAL / subgroup / SPLIT row groups at a time, with the grid's
//   stride); with SPLIT 1 no further barrier. A unit is 16 elements of a block: the two groups
//   quant.glsl pairs (nu_q_dot_groups: a nibble format's low and high nibbles of the same 8
//   bytes, Q8_0's 16 consecutive bytes, a K format's 8 bytes of quants with its sub-blocks'
//   scales), consecutive lanes take consecutive units (a subgroup's loads cover 512 consecutive
//   elements of a row), each lane issues the loads of UNROLL units of each of its ROWS rows before
//   using any, and reads each unit of x from shared memory once for its ROWS rows. A unit's bytes
//   start at a 2-byte boundary: they are read as 32-bit words and shifted into place (a further
//   word only where the start is odd), so any row stride and first block work.
// - The lanes' F32 sums are added with subgroupAdd; the first lane stores them, or with SPLIT > 1
//   the SPLIT subgroups' sums are added through shared memory (two barriers a batch).
//
// Fused forms (nu_op_matvec_fused, FUSE below; FUSE 0 compiles to the plain product):
//   norm: phase 1 quantizes x * norm_weight (the block's rounding is scale-invariant, so the
//     RMS scale s_m can wait) and stores each block's sum of x^2 (xsq); after the barrier each
//     subgroup adds row m's blocks into s_m = 1 / sqrt(sum / K + eps), which multiplies the
//     sums at the end.
//   glu: each subgroup computes its ROWS gate rows and the same rows of up (binding 4); the
//     epilogue stores act(g) * u (SiLU, or GELU's tanh form by FUSE bit 3).  bias: the epilogue
//     adds bias[n] (binding 6) to the gate's sum first.  residual: the epilogue adds residual[m, n]
//     (binding 5; it may be dst itself: the lane that stores an element has read it first).
//
// Specialisation constants (src/ops/matvec.c picks them; desc->tune and NUVEC_MATVEC set the knobs):
//   0 WDT     weight dtype (ops.glsl code): a block dtype but Q4_0_SOA
//   1 XDT     x dtype (ops.glsl code: F32, F16, BF16)
//   2 DDT     dst dtype (ops.glsl code)
//   3 M       rows of x (1..8)
//   4 LOCAL   threads per workgroup (local_size_x), a multiple of the subgroup size
//   5 ROWS    weight rows a subgroup computes at a time (1..8)
//   6 UNROLL  units per lane per row in flight (1..8)
//   7 FLAGS   bit 2: x's vector path (rows 16-byte aligned, stride 1, row stride a multiple of 16 B);
//             bit 3: norm_weight's (stride 1, 8-byte aligned)
//   8 XB      blocks of x shared memory holds per row (>= K / 32): the host rounds K / 32 up to
//             a multiple of 64, so that few pipelines serve all shapes
//   9 SPLIT   subgroups sharing a row group (a power of two dividing LOCAL / subgroup size): more
//             threads a row where N is small against the device
//  10 FUSE    bit 0: norm, bit 1: glu, bit 2: residual, bit 3: GELU (tanh) as the GLU's
//             activation (else SiLU), bit 4: bias
//  11 NDT     norm_weight's dtype (ops.glsl code)
//  12 RDT     residual's dtype (ops.glsl code)
//  13 BDT     bias's dtype (ops.glsl code)
// Bindings: 0 dst, 1 weight, 2 x, 3 norm_weight, 4 glu_up, 5 residual, 6 bias (x again where
// absent).
// Push: as matvec.comp's (w_col, up_col unused: block rows are contiguous).
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_EXT_integer_dot_product : require
#extension GL_GOOGLE_include_directive : require // glslc enables it itself; glslang needs it asked
#include "ops.glsl"
#include "elementwise/activation.glsl"

layout(constant_id = 0) const uint WDT = NU_Q4_0;
layout(constant_id = 1) const uint XDT = NU_F32;
layout(constant_id = 2) const uint DDT = NU_F32;
layout(constant_id = 3) const uint M = 1u;
layout(constant_id = 5) const uint ROWS = 2u;
layout(constant_id = 6) const uint UNROLL = 2u;
layout(constant_id = 7) const uint FLAGS = 0u;
layout(constant_id = 8) const uint XB = 128u;
layout(constant_id = 9) const uint SPLIT = 1u;
layout(constant_id = 10) const uint FUSE = 0u;
layout(constant_id = 11) const uint NDT = NU_F32;
layout(constant_id = 12) const uint RDT = NU_F32;
layout(constant_id = 13) const uint BDT = NU_F32;
layout(local_size_x = 256, local_size_x_id = 4) in; // LOCAL, constant 4
const uint LOCAL = gl_WorkGroupSize.x;

const bool XVEC = (FLAGS & 4u) != 0u;
const bool GVEC = (FLAGS & 8u) != 0u;
const bool NORM = (FUSE & 1u) != 0u;
const bool GLU = (FUSE & 2u) != 0u;
const bool RESID = (FUSE & 4u) != 0u;
const bool GELU = (FUSE & 8u) != 0u;
const bool BIAS = (FUSE & 16u) != 0u;
const uint UPB = NU_BLOCK_ELEMENTS(WDT) / 16u; // units a weight block
const uint XPB = NU_BLOCK_ELEMENTS(WDT) / 32u; // x's blocks a weight block
const uint HPB = NU_BLOCK_HALVES(WDT);
const uint RM = ROWS * M;
const uint WR = GLU ? 2u * ROWS : ROWS; // rows a subgroup loads: gate rows, then up rows
const uint AM = WR * M;                 // its sums: (gate, then up) row r, x row m at r * M + m

shared uvec2 xq[M * XB * 4u];   // x's 8-bit values, uvec2 j of block b of row m at (m * XB + b) * 4 + j
shared float xdx[M * XB];       // dx of block b of row m at m * XB + b
shared float xgs[M * XB * 4u];  // dx * the sum of group j's xq (elements 8j..8j+7) at (m * XB + b) * 4 + j
shared float red[SPLIT > 1u ? (LOCAL / 8u) * AM : 1u]; // the SPLIT subgroups' partial sums of a row group
shared float xsq[NORM ? M * XB : 1u]; // the sum of x^2 of block b of row m at m * XB + b

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, w)
NU_TENSOR(readonly, 2, x)
NU_TENSOR(readonly, 3, g)
NU_TENSOR(readonly, 4, up)
NU_TENSOR(readonly, 5, res)
NU_TENSOR(readonly, 6, bias)
#define NU_QB w
#include "quant.glsl"
#define NU_QB up
#include "quant.glsl"
layout(push_constant) uniform Push {
    uint n, k;              // N and K
    uint first_w;           // weight's first half (16-bit unit) in its binding
    uint w_row, w_col;      // weight's row stride (halves); w_col unused
    uint first_x;
    uint x_row, x_col;      // x's strides (elements)
    uint first_dst;         // dst is contiguous [M, N]
    uint first_up, up_row, up_col; // glu_up's, as weight's
    uint first_g, g_col;    // norm_weight's first element and stride
    uint first_res, res_row, res_col;
    float eps;              // norm_eps
    uint first_bias, bias_col;
} pc;

// Four elements of x's row m from element e (a multiple of 4).
void x_load4(uint m, uint e, out float v[4])
{
    uint i = pc.first_x + m * pc.x_row + e;
    if (XVEC) { // 16-byte aligned rows: one 16-byte (F32) or 8-byte (F16, BF16) load
        if (XDT == NU_F32)
            nu_unpack4(XDT, x_v[i / 4u], v);
        else
            nu_unpack4(XDT, uvec4(x_v2[i / 4u], 0u, 0u), v);
    } else {
        for (uint j = 0u; j < 4u; j++)
            v[j] = NU_LOAD(x, XDT, pc.first_x + m * pc.x_row + (e + j) * pc.x_col);
    }
}

// Four elements of norm_weight from element e (a multiple of 4).
void g_load4(uint e, out float v[4])
{
    if (GVEC) {
        uint i = pc.first_g + e;
        if (NDT == NU_F32)
            nu_unpack4(NDT, g_v[i / 4u], v);
        else
            nu_unpack4(NDT, uvec4(g_v2[i / 4u], 0u, 0u), v);
    } else {
        for (uint j = 0u; j < 4u; j++)
            v[j] = NU_LOAD(g, NDT, pc.first_g + (e + j) * pc.g_col);
    }
}

// Phase 1: x's M rows into shared memory. Eight consecutive threads (lanes of one subgroup) take a
// block, four elements each (thread t elements 4t..4t+3: word t of the block's xq); its max and
// the half blocks' sums are combined with subgroupShuffleXor over the eight.
void quantize_x()
{
    uint blocks = pc.k / 32u, pieces = M * blocks * 8u;
    for (uint p0 = 0u; p0 < pieces; p0 += LOCAL) { // uniform bounds: a block's 8 threads are all live or not
        uint p = p0 + gl_LocalInvocationID.x;
        bool live = p < pieces;
        uint blk = p / 8u, t = p % 8u, m = blk / blocks, b = blk % blocks;
        float v[4] = float[4](0.0, 0.0, 0.0, 0.0);
        float sq = 0.0;
        if (live) {
            x_load4(m, b * 32u + 4u * t, v);
            if (NORM) {
                float gv[4];
                g_load4(b * 32u + 4u * t, gv);
                for (uint j = 0u; j < 4u; j++) {
                    sq = fma(v[j], v[j], sq);
                    v[j] *= gv[j];
                }
            }
        }
        if (NORM) {
            sq += subgroupShuffleXor(sq, 1u);
            sq += subgroupShuffleXor(sq, 2u);
            sq += subgroupShuffleXor(sq, 4u);
        }
        float amax = max(max(abs(v[0]), abs(v[1])), max(abs(v[2]), abs(v[3])));
        amax = max(amax, subgroupShuffleXor(amax, 1u));
        amax = max(amax, subgroupShuffleXor(amax, 2u));
        amax = max(amax, subgroupShuffleXor(amax, 4u));
        float dx = amax / 127.0, inv = amax > 0.0 ? 127.0 / amax : 0.0;
        uint word = 0u;
        int sum = 0;
        for (uint j = 0u; j < 4u; j++) {
            int q = clamp(int(roundEven(v[j] * inv)), -127, 127);
            word |= (uint(q) & 0xffu) << (8u * j);
            sum += q;
        }
        // Group j of a block: threads 2j and 2j + 1.
        sum += subgroupShuffleXor(sum, 1u);
        if (live) {
            uint i = (m * XB + b) * 4u + t / 2u;
            if ((t & 1u) == 0u) {
                xq[i].x = word;
                xgs[i] = dx * float(sum);
            } else {
                xq[i].y = word;
            }
            if (t == 0u) {
                xdx[m * XB + b] = dx;
                if (NORM)
                    xsq[m * XB + b] = sq;
            }
        }
    }
}

// The raw data of one unit: its two groups' quant bytes (q.xy, q.zw) and (D, M) (dm.xy, dm.zw).
struct Unit { uvec4 q; vec4 dm; };

// Unit u of a row whose first half is at `row0` of binding B (w: the weight, up: glu_up): one body
// for both, the binding being part of every access.
#define MV_DOT_LOADS(B, FIRST, ROW)                                                             \
    Unit B##_load_unit(uint row, uint u)                                                        \
    {                                                                                           \
        uint hb = FIRST + row * ROW + (u / UPB) * HPB; /* the block's first half */             \
        uvec2 g = nu_q_dot_groups(WDT, u % UPB), q0, q1;                                        \
        vec2 d0, d1;                                                                            \
        B##_group(WDT, hb, g.x, q0, d0);                                                        \
        B##_group(WDT, hb, g.y, q1, d1);                                                        \
        Unit r;                                                                                 \
        r.q = uvec4(q0, q1);                                                                    \
        r.dm = vec4(d0, d1);                                                                    \
        return r;                                                                               \
    }
MV_DOT_LOADS(w, pc.first_w, pc.w_row)
MV_DOT_LOADS(up, pc.first_up, pc.up_row)
// Row j of the WR a subgroup loads: gate (weight) rows first, then up rows.
Unit load_row_unit(uint j, uint row, uint u) { return GLU && j >= ROWS ? up_load_unit(row, u) : w_load_unit(row, u); }

// Group g (of weight block wb) with quants q and (D, M) dm against x's row m.
float group_dot(uvec2 q, vec2 dm, uint wb, uint g, uint m)
{
    uint xb = m * XB + wb * XPB + g / 4u, xi = xb * 4u + g % 4u;
    uvec2 xv = xq[xi];
    int dot = dotPacked4x8EXT(int(q.x), int(xv.x)) + dotPacked4x8EXT(int(q.y), int(xv.y));
    float v = dm.x * (xdx[xb] * float(dot));
    int off = nu_q_offset(WDT);
    if (nu_q_has_min(WDT))
        v = fma(off != 0 ? fma(dm.x, float(off), dm.y) : dm.y, xgs[xi], v);
    else if (off != 0)
        v = fma(dm.x * float(off), xgs[xi], v);
    return v;
}

// Unit u of weight row `row` against x's row m: its contribution to the sum (F32).
float unit_dot(Unit r, uint u, uint m)
{
    uint wb = u / UPB;
    uvec2 g = nu_q_dot_groups(WDT, u % UPB);
    return group_dot(r.q.xy, r.dm.xy, wb, g.x, m) + group_dot(r.q.zw, r.dm.zw, wb, g.y, m);
}

// Output i of a row group (row n0 + i / M, x row i % M) from its gate sum g and up sum u: the
// fused epilogue (s: x row's RMS scale, or 1).
void store_output(uint n0, uint i, float g, float u, float s)
{
    uint r = i / M, m = i % M;
    float v = g * s;
    if (BIAS)
        v += NU_LOAD(bias, BDT, pc.first_bias + (n0 + r) * pc.bias_col);
    if (GLU)
        v = (GELU ? act_gelu_tanh(v) : act_silu(v)) * (u * s);
    if (RESID)
        v += NU_LOAD(res, RDT, pc.first_res + m * pc.res_row + (n0 + r) * pc.res_col);
    NU_STORE(dst, DDT, pc.first_dst + m * pc.n + n0 + r, v)
}

void main()
{
    quantize_x();
    barrier();
    uint blocks = pc.k / 32u;

    uint units = blocks * 2u;
    uint lane = gl_SubgroupInvocationID, sg_size = gl_SubgroupSize;
    // x rows' RMS scales, each subgroup adding the blocks' sums of squares itself (no barrier).
    float scale[M];
    for (uint m = 0u; m < M; m++) {
        float q = 0.0;
        if (NORM)
            for (uint b = lane; b < blocks; b += sg_size)
                q += xsq[m * XB + b];
        scale[m] = NORM ? inversesqrt(subgroupAdd(q) / float(pc.k) + pc.eps) : 1.0;
    }
    uint slots = gl_NumSubgroups / SPLIT, slot = gl_SubgroupID / SPLIT, part = gl_SubgroupID % SPLIT;
    uint groups = (pc.n + ROWS - 1u) / ROWS;
    uint batches = (groups + slots - 1u) / slots; // row groups a workgroup takes at a time: slots
    uint step = SPLIT * sg_size;                   // units between a lane's consecutive ones
    for (uint bt = gl_WorkGroupID.x; bt < batches; bt += gl_NumWorkGroups.x) { // uniform in the workgroup
        uint g = bt * slots + slot;
        uint n0 = min(g, groups - 1u) * ROWS;
        uint rows[ROWS];
        for (uint r = 0u; r < ROWS; r++)
            rows[r] = min(n0 + r, pc.n - 1u); // rows past N repeat the last (not stored)
        float acc[AM];
        for (uint i = 0u; i < AM; i++)
            acc[i] = 0.0;
        for (uint u0 = part * sg_size + lane; u0 < units; u0 += step * UNROLL) {
            Unit raw[UNROLL * WR];
            for (uint t = 0u; t < UNROLL; t++) {
                uint u = u0 + t * step;
                for (uint r = 0u; r < WR; r++)
                    if (u < units)
                        raw[t * WR + r] = load_row_unit(r, rows[r % ROWS], u);
            }
            for (uint t = 0u; t < UNROLL; t++) {
                uint u = u0 + t * step;
                if (u >= units)
                    break;
                for (uint m = 0u; m < M; m++)
                    for (uint r = 0u; r < WR; r++)
                        acc[r * M + m] += unit_dot(raw[t * WR + r], u, m);
            }
        }
        bool store = g < groups;
        if (SPLIT == 1u) {
            for (uint i = 0u; i < RM; i++) {
                float total = subgroupAdd(acc[i]);
                float up_total = GLU ? subgroupAdd(acc[RM + i]) : 0.0;
                if (lane == 0u && store && n0 + i / M < pc.n)
                    store_output(n0, i, total, up_total, scale[i % M]);
            }
        } else {
            for (uint i = 0u; i < AM; i++) {
                float s = subgroupAdd(acc[i]);
                if (lane == 0u)
                    red[gl_SubgroupID * AM + i] = s;
            }
            barrier();
            // Lane i of the first subgroup adds sums i, i + subgroup size, .. (ROWS * M may pass 32).
            for (uint i = lane; part == 0u && store && i < RM; i += sg_size)
                if (n0 + i / M < pc.n) {
                    float total = 0.0, up_total = 0.0;
                    for (uint p = 0u; p < SPLIT; p++) {
                        total += red[(slot * SPLIT + p) * AM + i];
                        if (GLU)
                            up_total += red[(slot * SPLIT + p) * AM + RM + i];
                    }
                    store_output(n0, i, total, up_total, scale[i % M]);
                }
            barrier(); // red is reused by the next batch
        }
    }
}
