#version 450
// attn_prefill_frag: nu_op_attention's prefill on the matrix units with S, P and O's rescaling in
// the fragments' registers, read and written by element (attention/attn_prefill_coopmat.glsl has
// what it shares with attn_prefill_coopmat.comp, the softmax through shared memory).
// The element-to-(row, column) mapping is the driver's; src/ops/attention.c takes this kernel only
// where nu__op_fragments_quad found it to be NVIDIA's mma.m16n8k16 one for A and the accumulator:
// lane t, element i (of 8) holds row t / 4 + 8 ((i >> 2) & 1), column 2 (t % 4) + (i & 1) +
// 8 ((i >> 1) & 1). So a row's elements are in the four lanes of a quad (maxima and sums by two
// shuffles), an accumulator's element i is the A fragment's element i (P from S by element, no
// shared memory), and O's rows scale by element. The scores are in base 2 (q times log2(e) as it is
// staged, or after the softcap), so that exp2 serves. Per block of BC keys (constant 7: 32 or 64):
//   S = Q K^T (BC / 16 accumulators), the softcap and mask (attn_row's keys) by element, skipped
//   where every row of the subgroup sees the whole block; the rows' maxima, alpha = 2^(m - m_new),
//   P = 2^(S - m_new) as F16 A fragments;
//   O = alpha O + P V (O scaled only where some row's maximum moved).
// Each lane keeps its share of its two rows' sums (l = l alpha + its p), added across the quad at
// the end; dst = O / l from the registers. Its only shared memory is k's and v's rows (q staged 64
// rows at a time in the same space); head_dim at most 128 (q's and O's fragments in registers).
#extension GL_KHR_cooperative_matrix : require // (CMakeLists.txt: compiled by glslang 15)
#extension GL_GOOGLE_include_directive : require
layout(constant_id = 7) const uint FRAG_BC = 64u;
#define ATTN_BC FRAG_BC
#include "attention/attn_prefill_coopmat.glsl"

const uint NB = BC / 16u;
const float LOG2E = 1.4426950408889634;

// Element i of a lane's accumulator (and A fragment): its row's half (0: rows t / 4, 1: + 8) and
// its column in the fragment.
uint elem_half(uint i) { return (i >> 2u) & 1u; }
uint elem_col(uint lane, uint i) { return 2u * (lane % 4u) + (i & 1u) + 8u * ((i >> 1u) & 1u); }
// The maximum and the sum over a row's quad of lanes.
float quad_max(float x) { x = max(x, subgroupShuffleXor(x, 1u)); return max(x, subgroupShuffleXor(x, 2u)); }
float quad_sum(float x) { x += subgroupShuffleXor(x, 1u); return x + subgroupShuffleXor(x, 2u); }

void main()
{
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint h = gl_WorkGroupID.y, kvh = h / pc.group;
    uint row0 = gl_WorkGroupID.x * BR;
    uint kvl = min(pc.kv_length, pc.positions);
    uint last = min(row0 + BR, pc.tokens) - 1u;
    uint kend = (pc.flags & ATTN_CAUSAL) != 0u ? min(kvl, pc.q_position + last + 1u) : kvl;

    // q scaled by log2(e) too where no softcap comes between: the scores in base 2 (exp2).
    MA qf[FD];
    for (uint pass = 0u; pass < BR / 64u; pass++) {
        stage_q(pass, row0, h, SOFTCAP == 1u ? pc.scale : pc.scale * LOG2E);
        if (sg / 4u == pass)
            [[unroll]] for (uint f = 0u; f < FD; f++)
                coopMatLoad(qf[f], kv, ((sg % 4u) * 16u) * ROW + 2u * f, ROW, gl_CooperativeMatrixLayoutRowMajor);
    }
    ACC o[FD];
    [[unroll]] for (uint f = 0u; f < FD; f++)
        o[f] = ACC(0.0);

    // The lane's rows: q0 (half 0) and q0 + 8 (half 1), their keys [lo, end).
    uint q0 = row0 + sg * 16u + lane / 4u;
    uint slot_, lo[2], end[2], lo0, hi0;
    attn_row(q0, slot_, lo[0], end[0]);
    attn_row(q0 + 8u, slot_, lo[1], end[1]);
    attn_row(row0, slot_, lo0, hi0);
    uint inner_lo = max(lo[0], lo[1]), inner_end = min(end[0], end[1]);
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0, 0.0}; // l: this lane's share of the row's sum

    for (uint j0 = lo0 / BC * BC; j0 < kend; j0 += BC) {
        load_block(j0, kend, kvh);
        ACC s[NB];
        [[unroll]] for (uint b = 0u; b < NB; b++) {
            s[b] = ACC(0.0);
            [[unroll]] for (uint f = 0u; f < FD; f++) {
                MB kf;
                coopMatLoad(kf, kv, (16u * b) * ROW + 2u * f, ROW, gl_CooperativeMatrixLayoutColumnMajor);
                s[b] = coopMatMulAdd(qf[f], kf, s[b]);
            }
        }
        // The softcap (then times log2(e)) and the masks: elementwise only where some row of the
        // subgroup does not see the whole block.
        float mx[2] = {NEG_INF, NEG_INF};
        if (SOFTCAP == 1u || !subgroupAll(j0 >= inner_lo && j0 + BC <= inner_end)) {
            [[unroll]] for (uint b = 0u; b < NB; b++)
                [[unroll]] for (uint i = 0u; i < 8u; i++) {
                    uint hf = elem_half(i), j = j0 + 16u * b + elem_col(lane, i);
                    s[b][i] = j >= lo[hf] && j < end[hf] ? (SOFTCAP == 1u ? attn_cap(s[b][i]) * LOG2E : s[b][i]) : NEG_INF;
                }
        }
        [[unroll]] for (uint b = 0u; b < NB; b++)
            [[unroll]] for (uint i = 0u; i < 8u; i++)
                mx[elem_half(i)] = max(mx[elem_half(i)], s[b][i]);
        float al[2];
        [[unroll]] for (uint hf = 0u; hf < 2u; hf++) {
            float mn = max(m[hf], quad_max(mx[hf]));
            al[hf] = mn == NEG_INF ? 1.0 : exp2(m[hf] - mn);
            m[hf] = mn;
        }
        // P = 2^(S - m) as F16 A fragments (element i of S's accumulator is element i of P's A).
        MA pf[NB];
        float ps[2] = {0.0, 0.0};
        [[unroll]] for (uint b = 0u; b < NB; b++)
            [[unroll]] for (uint i = 0u; i < 8u; i++) {
                uint hf = elem_half(i);
                float p = s[b][i] == NEG_INF ? 0.0 : exp2(s[b][i] - m[hf]);
                ps[hf] += p;
                pf[b][i] = float16_t(p);
            }
        // O = alpha O + P V (O's rows scaled only where some row's maximum moved).
        l[0] = l[0] * al[0] + ps[0];
        l[1] = l[1] * al[1] + ps[1];
        if (!subgroupAll(al[0] == 1.0 && al[1] == 1.0))
            [[unroll]] for (uint f = 0u; f < FD; f++)
                [[unroll]] for (uint i = 0u; i < 8u; i++)
                    o[f][i] *= al[elem_half(i)];
        [[unroll]] for (uint b = 0u; b < NB; b++)
            [[unroll]] for (uint f = 0u; f < FD; f++) {
                MB vf;
                coopMatLoad(vf, kv, (BC + 16u * b) * ROW + 2u * f, ROW, gl_CooperativeMatrixLayoutRowMajor);
                o[f] = coopMatMulAdd(pf[b], vf, o[f]);
            }
    }
    // dst = O / l (a row that saw no key: 0), each element from its register.
    float inv[2];
    [[unroll]] for (uint hf = 0u; hf < 2u; hf++) {
        float sum = quad_sum(l[hf]);
        inv[hf] = sum > 0.0 ? 1.0 / sum : 0.0;
    }
    [[unroll]] for (uint f = 0u; f < FD; f++)
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            uint row = q0 + 8u * elem_half(i);
            if (row < pc.tokens)
                NU_STORE(dst, DDT, pc.first_dst + (row * pc.q_heads + h) * D + 16u * f + elem_col(lane, i),
                         o[f][i] * inv[elem_half(i)])
        }
}
