#version 450
// matmul: dst[b, m, n] = sum_k a[b, m, k] * w[b, n, k] (+ bias[n]) (nu_op_matmul, nuvec/ops.h),
// the tiled shared-memory path (every device; src/ops/matmul.c chooses the tile variant and, where
// the device has cooperative matrices, tries src/ops/matmul_tc.c first). w is weight-shaped [N, K]
// (row-major [out, in], as weight files store it) of F32, F16, BF16 or a block dtype; a [M, K] float;
// dst [M, N] float, contiguous; F32 accumulation. Rank 3 adds a batch dimension first: a batch
// stride of 0 broadcasts one a or w to every batch.
//
// Layout of the work: workgroup (x, y, z) computes the BM x BN tile of dst at rows y * BM, columns
// x * BN of batch z (looping with the grid's stride in each dimension past 65535 workgroups). Its
// LOCAL = (BM / TM) * (BN / TN) threads step over K in slices of BK: all threads load the BM x BK
// slice of a and the BN x BK slice of w into shared memory (as F32, converted and dequantized on
// load; consecutive threads take consecutive k, so contiguous rows are read contiguously),
// then each thread accumulates a TM x TN block of dst in registers from shared memory (register
// blocking: TM + TN shared loads per TM * TN FMAs). Thread (tx, ty) owns rows ty + i * (BM / TM)
// and columns tx + j * (BN / TN), so a subgroup reads consecutive columns of w's slice (no bank
// conflicts) and broadcasts one row of a's. Elements past M, N or K load as 0; stores are masked.
// Element loads go through the strides (any view: transposed, sliced, broadcast), one element a
// load; when the rows of a tensor are contiguous and 16-byte aligned (FLAGS bits 0 and 1) its
// slices load 8 elements a thread from one 16-byte vector instead.
//   Block dtypes (nuvec/tensor.h): each element is its exact F32 value, decoded by quant.glsl from
//   its group of 8 (the values nu_op_copy's dequantization gives); Q6_K_SOA's super-blocks found
//   by their index in the tensor (rank 2, whole rows: row x K / 256 + kk / 256).
//
// Specialisation constants (src/ops/matmul.c's variant table picks them by shape; nu_matmul_desc's
// tune, and NUVEC_MATMUL over it, override them: docs/knobs.md):
//   0 ADT    a's dtype (ops.glsl codes: 0 F32, 1 F16, 2 BF16)
//   1 BDT    w's dtype (ops.glsl code: a float or block dtype)
//   2 DDT    dst's dtype (ops.glsl code)
//   3 BIASDT bias's dtype (ops.glsl code), or NU_NO_DTYPE: no bias
//   4 LOCAL  threads a workgroup (local_size_x): (BM / TM) * (BN / TN), checked by the host
//   5 BM, 6 BN, 7 BK   the tile: rows of a, rows of w, and the K slice loaded at a time
//   8 TM, 9 TN         each thread's register block (BM % TM == 0, BN % TN == 0)
//   10 FLAGS  bit 0: a's vector path; bit 1: w's (float w: 16-byte loads; block w: a group of 8
//             elements of one block a thread); both need BK % 8 == 0
// Bindings: 0 dst, 1 a, 2 w, 3 bias (any binding where there is none: never read).
// Push: below (first elements in their bindings: elements of float tensors, 16-bit halves of block
// ones; w's strides likewise in halves for block dtypes, per row and per batch).
#include "ops.glsl"

layout(constant_id = 0) const uint ADT = NU_F32;
layout(constant_id = 1) const uint BDT = NU_F32;
layout(constant_id = 2) const uint DDT = NU_F32;
layout(constant_id = 3) const uint BIASDT = NU_NO_DTYPE;
layout(constant_id = 5) const uint BM = 64u;
layout(constant_id = 6) const uint BN = 64u;
layout(constant_id = 7) const uint BK = 16u;
layout(constant_id = 8) const uint TM = 4u;
layout(constant_id = 9) const uint TN = 4u;
layout(constant_id = 10) const uint FLAGS = 0u;
layout(local_size_x = 256, local_size_x_id = 4) in; // LOCAL, constant 4
const uint LOCAL = gl_WorkGroupSize.x;

const bool QUANT = NU_IS_BLOCK(BDT);
const bool HAS_BIAS = BIASDT != NU_NO_DTYPE;
const bool AVEC = (FLAGS & 1u) != 0u;
const bool BVEC = (FLAGS & 2u) != 0u;
const uint RS = BM / TM; // rows between a thread's rows
const uint CS = BN / TN; // columns between a thread's columns
// Slices in shared memory, k-major: element (k, row) at k * (rows + 1) + row (the padding spreads
// the stores of consecutive k over the banks).
const uint APAD = BM + 1u;
const uint BPAD = BN + 1u;
shared float As[BK * APAD];
shared float Bs[BK * BPAD];

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, a)
NU_TENSOR(readonly, 2, w)
#define NU_QB w
#include "quant.glsl"
NU_TENSOR(readonly, 3, bias)
layout(push_constant) uniform Push {
    uint m, n, k, batch;
    uint first_a, a_batch, a_row, a_col; // a's strides (elements; 0 for dimensions of size 1)
    uint first_w, w_batch, w_row, w_col; // w's (halves per batch and row for block dtypes)
    uint first_dst;                      // dst [batch, M, N]: its columns contiguous
    uint first_bias, bias_stride;
    uint dst_batch, dst_row;             // dst's strides (elements)
} pc;

float a_load(uint base, uint row, uint kk) { return NU_LOAD(a, ADT, base + row * pc.a_row + kk * pc.a_col); }

// Eight elements kk .. kk + 7 (kk a multiple of 8: a group of one block) of a block weight's row.
void w_load8_block(uint base, uint row, uint kk, out float v[8])
{
    uint be = nu_block_elements(BDT);
    if (BDT == NU_Q6_K_SOA) {
        uvec2 at = nu_q6s_halves(base, row * (pc.k / 256u) + kk / 256u), q;
        vec2 dm;
        w_q6_k_at(at.x, at.y, (kk % 256u) / 8u, false, q, dm);
        for (uint i = 0u; i < 8u; i++)
            v[i] = nu_q_value(BDT, q, dm, i);
        return;
    }
    w_dequant8(BDT, base + row * pc.w_row + (kk / be) * nu_block_halves(BDT), (kk % be) / 8u, v);
}

// Element (row, kk) of w from its batch's first element (or half): float through the strides,
// block dtypes as their group's element.
float w_load(uint base, uint row, uint kk)
{
    if (QUANT) {
        float v[8];
        w_load8_block(base, row, kk & ~7u, v);
        return v[kk & 7u];
    }
    return NU_LOAD(w, BDT, base + row * pc.w_row + kk * pc.w_col);
}

// Eight elements from element e (16-byte aligned: the vector paths' condition), one uvec4 of
// halves or two of F32.
void a_load8(uint e, out float v[8])
{
    if (ADT == NU_F32)
        nu_unpack8(ADT, a_v[e / 4u], a_v[e / 4u + 1u], v);
    else
        nu_unpack8(ADT, a_v[e / 8u], uvec4(0u), v);
}
void w_load8(uint e, out float v[8])
{
    if (BDT == NU_F32)
        nu_unpack8(BDT, w_v[e / 4u], w_v[e / 4u + 1u], v);
    else
        nu_unpack8(BDT, w_v[e / 8u], uvec4(0u), v);
}

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint tx = tid % CS, ty = tid / CS;
    uint mtiles = (pc.m + BM - 1u) / BM, ntiles = (pc.n + BN - 1u) / BN;
    for (uint bz = gl_WorkGroupID.z; bz < pc.batch; bz += gl_NumWorkGroups.z) {
        uint abase = pc.first_a + bz * pc.a_batch, wbase = pc.first_w + bz * pc.w_batch;
        for (uint ty0 = gl_WorkGroupID.y; ty0 < mtiles; ty0 += gl_NumWorkGroups.y) {
            for (uint tx0 = gl_WorkGroupID.x; tx0 < ntiles; tx0 += gl_NumWorkGroups.x) {
                uint m0 = ty0 * BM, n0 = tx0 * BN;
                float acc[TM * TN];
                for (uint i = 0u; i < TM * TN; i++)
                    acc[i] = 0.0;
                for (uint k0 = 0u; k0 < pc.k; k0 += BK) {
                    // The slices of a and w: consecutive threads, consecutive k.
                    if (AVEC && k0 + BK <= pc.k) {
                        for (uint i = tid; i < BM * (BK / 8u); i += LOCAL) {
                            uint r = i / (BK / 8u), kk = (i % (BK / 8u)) * 8u;
                            float v[8];
                            if (m0 + r < pc.m)
                                a_load8(abase + (m0 + r) * pc.a_row + k0 + kk, v);
                            else
                                for (uint e = 0u; e < 8u; e++)
                                    v[e] = 0.0;
                            for (uint e = 0u; e < 8u; e++)
                                As[(kk + e) * APAD + r] = v[e];
                        }
                    } else {
                        for (uint i = tid; i < BM * BK; i += LOCAL) {
                            uint r = i / BK, kk = i % BK;
                            float v = 0.0;
                            if (m0 + r < pc.m && k0 + kk < pc.k)
                                v = a_load(abase, m0 + r, k0 + kk);
                            As[kk * APAD + r] = v;
                        }
                    }
                    if (BVEC && k0 + BK <= pc.k) {
                        for (uint i = tid; i < BN * (BK / 8u); i += LOCAL) {
                            uint r = i / (BK / 8u), kk = (i % (BK / 8u)) * 8u;
                            float v[8];
                            if (n0 + r < pc.n && QUANT)
                                w_load8_block(wbase, n0 + r, k0 + kk, v);
                            else if (n0 + r < pc.n)
                                w_load8(wbase + (n0 + r) * pc.w_row + k0 + kk, v);
                            else
                                for (uint e = 0u; e < 8u; e++)
                                    v[e] = 0.0;
                            for (uint e = 0u; e < 8u; e++)
                                Bs[(kk + e) * BPAD + r] = v[e];
                        }
                    } else {
                        for (uint i = tid; i < BN * BK; i += LOCAL) {
                            uint r = i / BK, kk = i % BK;
                            float v = 0.0;
                            if (n0 + r < pc.n && k0 + kk < pc.k)
                                v = w_load(wbase, n0 + r, k0 + kk);
                            Bs[kk * BPAD + r] = v;
                        }
                    }
                    barrier();
                    uint kend = min(BK, pc.k - k0);
                    for (uint kk = 0u; kk < kend; kk++) {
                        float av[TM], bv[TN];
                        for (uint i = 0u; i < TM; i++)
                            av[i] = As[kk * APAD + ty + i * RS];
                        for (uint j = 0u; j < TN; j++)
                            bv[j] = Bs[kk * BPAD + tx + j * CS];
                        for (uint i = 0u; i < TM; i++)
                            for (uint j = 0u; j < TN; j++)
                                acc[i * TN + j] = fma(av[i], bv[j], acc[i * TN + j]);
                    }
                    barrier(); // the slices are overwritten next
                }
                for (uint j = 0u; j < TN; j++) {
                    uint col = n0 + tx + j * CS;
                    if (col >= pc.n)
                        continue;
                    float b = 0.0;
                    if (HAS_BIAS)
                        b = NU_LOAD(bias, BIASDT, pc.first_bias + col * pc.bias_stride);
                    for (uint i = 0u; i < TM; i++) {
                        uint row = m0 + ty + i * RS;
                        if (row < pc.m)
                            NU_STORE(dst, DDT, pc.first_dst + bz * pc.dst_batch + row * pc.dst_row + col, acc[i * TN + j] + b)
                    }
                }
            }
        }
    }
}
