#version 450
// attn_prefill_coopmat: nu_op_attention's prefill on the matrix units with the softmax through
// shared memory (attention/attn_prefill_coopmat.glsl has what it shares with attn_prefill_frag.comp,
// the form src/ops/attention.c prefers where the device's fragment layout allows it). Per block of
// BC = 32 keys:
//   S = Q K^T     (2 accumulators of 16 x 16),
//   S to shared memory (column-major: SAREA below), where two lanes a row take its 32 scores: the
//   softcap (SOFTCAP), the mask (attn_row's keys: past kv_length, causal past q_position + row,
//   before a window), the row maximum m_new (a shuffle
//   between the two), p = exp(s - m_new) written as F16, l = l alpha + sum p with alpha = exp(m -
//   m_new);
//   O = alpha O + P V (D / 16 accumulators): O's rows are scaled through shared memory, a fragment at
//   a time, only where some row's maximum moved (the subgroup's alpha all 1 skips it: the common
//   case once the maxima settle); P's A fragments from shared memory.
// At the end dst = O / l, through shared memory a fragment at a time (bounds, dtype). O's
// fragments go through the subgroup's score area (free by then).
#extension GL_KHR_cooperative_matrix : require // (CMakeLists.txt: compiled by glslang 15)
#extension GL_GOOGLE_include_directive : require
#define ATTN_BC 32u
#include "attention/attn_prefill_coopmat.glsl"

const uint PROW = BC + 8u; // a row of P in shared memory (halves)
// Each subgroup's area of ssc: its scores S (16 x BC) column-major, the second 16 columns 16
// floats further on, so that the lane pairs reading their rows (lane 2 r + half: row r, columns
// 16 half ..) fall in 32 different banks (row-major rows of 32 floats put all 16 rows in the same
// banks: a 16-way conflict for each score read); or the O fragment being scaled or written.
const uint SAREA = 16u * BC + 16u, SFRAG = 16u * 16u + 16u;
shared float ssc[NSG * SAREA];
shared float16_t psh[NSG * 16u * PROW]; // each subgroup's p
shared float rsc[NSG * 16u];         // each subgroup's row factors (alpha, then 1 / l)

// The 16 x 16 fragment stored row-major in the subgroup's score area: its rows times rsc.
void scale_rows(uint sg, uint lane)
{
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint e = i * 32u + lane; // consecutive lanes, consecutive banks
        ssc[sg * SAREA + e] *= rsc[sg * 16u + e / 16u];
    }
}

void main()
{
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint h = gl_WorkGroupID.y, kvh = h / pc.group;
    uint row0 = gl_WorkGroupID.x * BR;
    uint kvl = min(pc.kv_length, pc.positions);
    uint last = min(row0 + BR, pc.tokens) - 1u;
    uint kend = (pc.flags & ATTN_CAUSAL) != 0u ? min(kvl, pc.q_position + last + 1u) : kvl;

    // q's rows, scaled, as F16 through kv's space 64 rows at a time (rows past tokens 0), into the
    // subgroups' A fragments.
    MA qf[FD];
    for (uint pass = 0u; pass < BR / 64u; pass++) {
        stage_q(pass, row0, h, pc.scale);
        if (sg / 4u == pass)
            [[unroll]] for (uint f = 0u; f < FD; f++)
                coopMatLoad(qf[f], kv, ((sg % 4u) * 16u) * ROW + 2u * f, ROW, gl_CooperativeMatrixLayoutRowMajor);
    }
    ACC o[FD];
    [[unroll]] for (uint f = 0u; f < FD; f++)
        o[f] = ACC(0.0);

    // Lane pairs take a row of the subgroup's 16: row lane / 2, scores 16 (lane % 2) .. + 15.
    uint my_row = lane / 2u, half_ = lane % 2u;
    uint qrow = row0 + sg * 16u + my_row; // its query row
    uint slot_, row_lo, row_end, lo0, hi0; // its keys [row_lo, row_end); the first row's lo0
    attn_row(qrow, slot_, row_lo, row_end);
    attn_row(row0, slot_, lo0, hi0);
    float m = NEG_INF, l = 0.0;

    for (uint j0 = lo0 / BC * BC; j0 < kend; j0 += BC) {
        load_block(j0, kend, kvh);
        // S = Q K^T: k's rows are the product's columns (column-major D x BC).
        ACC s[2];
        [[unroll]] for (uint b = 0u; b < 2u; b++) {
            s[b] = ACC(0.0);
            [[unroll]] for (uint f = 0u; f < FD; f++) {
                MB kf;
                coopMatLoad(kf, kv, (16u * b) * ROW + 2u * f, ROW, gl_CooperativeMatrixLayoutColumnMajor);
                s[b] = coopMatMulAdd(qf[f], kf, s[b]);
            }
            coopMatStore(s[b], ssc, sg * SAREA + SFRAG * b, 16u, gl_CooperativeMatrixLayoutColumnMajor);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        // The softmax of the lane pair's row.
        float x[16];
        float mx = NEG_INF;
        [[unroll]] for (uint c = 0u; c < 16u; c++) {
            uint col = 16u * half_ + c;
            uint j = j0 + col;
            x[c] = j < row_end && j >= row_lo ? attn_cap(ssc[sg * SAREA + SFRAG * half_ + 16u * c + my_row]) : NEG_INF;
            mx = max(mx, x[c]);
        }
        mx = max(mx, subgroupShuffleXor(mx, 1u));
        float mnew = max(m, mx);
        float alpha = mnew == NEG_INF ? 1.0 : exp(m - mnew);
        float ps = 0.0;
        [[unroll]] for (uint c = 0u; c < 16u; c++) {
            float p = x[c] == NEG_INF ? 0.0 : exp(x[c] - mnew);
            ps += p;
            psh[(sg * 16u + my_row) * PROW + 16u * half_ + c] = float16_t(p);
        }
        ps += subgroupShuffleXor(ps, 1u);
        l = l * alpha + ps;
        m = mnew;
        subgroupMemoryBarrierShared();
        subgroupBarrier(); // every lane has read its scores: the area may hold O's fragments
        // O's rows times alpha, where some row's maximum moved.
        if (!subgroupAll(alpha == 1.0)) {
            if (half_ == 0u)
                rsc[sg * 16u + my_row] = alpha;
            [[unroll]] for (uint f = 0u; f < FD; f++) {
                coopMatStore(o[f], ssc, sg * SAREA, 16u, gl_CooperativeMatrixLayoutRowMajor);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                scale_rows(sg, lane);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                coopMatLoad(o[f], ssc, sg * SAREA, 16u, gl_CooperativeMatrixLayoutRowMajor);
                subgroupBarrier();
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        // O += P V: v's rows are the product's K rows (row-major BC x D).
        [[unroll]] for (uint b = 0u; b < 2u; b++) {
            MA pf;
            coopMatLoad(pf, psh, sg * 16u * PROW + 16u * b, PROW, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint f = 0u; f < FD; f++) {
                MB vf;
                coopMatLoad(vf, kv, (BC + 16u * b) * ROW + 2u * f, ROW, gl_CooperativeMatrixLayoutRowMajor);
                o[f] = coopMatMulAdd(pf, vf, o[f]);
            }
        }
    }
    // dst = O / l (a row that saw no key: 0).
    if (half_ == 0u)
        rsc[sg * 16u + my_row] = l > 0.0 ? 1.0 / l : 0.0;
    [[unroll]] for (uint f = 0u; f < FD; f++) {
        coopMatStore(o[f], ssc, sg * SAREA, 16u, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            uint e = i * 32u + lane, r = e / 16u, c = e % 16u, row = row0 + sg * 16u + r;
            if (row < pc.tokens)
                NU_STORE(dst, DDT, pc.first_dst + (row * pc.q_heads + h) * D + 16u * f + c, ssc[sg * SAREA + e] * rsc[sg * 16u + r])
        }
        subgroupBarrier();
    }
}
