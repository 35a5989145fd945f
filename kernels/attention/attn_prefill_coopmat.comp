#version 450
// attn_prefill_coopmat: attn_prefill.comp's work (nu_op_attention's prefill path: flash attention,
// online softmax, causal or not, GQA; same push constants and bindings) on the matrix units through
// VK_KHR_cooperative_matrix, for F16 q, k and v (F32 accumulation, any dst dtype). src/ops/attention.c
// takes it where the device offers 16x16x16 F16 x F16 + F32 products at subgroup scope, subgroups
// of 32, head_dim a multiple of 16 whose tiles fit shared memory, k's and v's rows 16-byte
// aligned, and the scalar form (slot 0, q_position and kv_length; with or without a sliding
// window and a logit softcap: attn_rows.glsl's rules) (else attn_prefill.comp).
//
// Layout of the work: workgroup (x, h) takes query rows BR x .. BR x + BR - 1 of head h (KV head
// h / group), a 16-row fragment row per subgroup (NSG = BR / 16 subgroups: 4 or 8). q is staged once through shared
// memory (scaled, then F16) into each subgroup's D / 16 A fragments, kept in registers. Per block of
// BC = 32 keys: k's and v's rows go to shared memory (16-byte loads, rows padded by 8 halves);
//   S = Q K^T     (2 accumulators of 16 x 16: the B fragments are k's rows read column-major),
//   S to shared memory (column-major: SAREA below), where two lanes a row take its 32 scores: the
//   softcap (SOFTCAP), the mask (attn_row's keys: past kv_length, causal past q_position + row,
//   before a window), the row maximum m_new (a shuffle
//   between the two), p = exp(s - m_new) written as F16, l = l alpha + sum p with alpha = exp(m -
//   m_new);
//   O = alpha O + P V (D / 16 accumulators): O's rows are scaled through shared memory, a fragment at
//   a time, only where some row's maximum moved (the subgroup's alpha all 1 skips it: the common
//   case once the maxima settle); P's A fragments from shared memory, v's B fragments row-major.
// At the end dst = O / l, through shared memory a fragment at a time (bounds, dtype). O's
// fragments go through the subgroup's score area (free by then).
// Specialisation constants: 0 QDT (F16), 1 KDT (F16), 2 VDT (F16), 3 DDT (ops.glsl code),
// 4 LOCAL (threads: 32 NSG, 128 or 256), 5 D (a multiple of 16), 6 SOFTCAP (1: the scores
// softcapped). Blocks of keys before the workgroup's first row's window are skipped.
// Bindings: 0 dst, 1 q, 2 k, 3 v, 4 and 5 (the per-row form's positions and slots: empty ranges,
// unread). Push: attention/attn_rows.glsl.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "ops.glsl"
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(constant_id = 0) const uint QDT = NU_F16;
layout(constant_id = 1) const uint KDT = NU_F16;
layout(constant_id = 2) const uint VDT = NU_F16;
layout(constant_id = 3) const uint DDT = NU_F32;
layout(constant_id = 5) const uint D = 128u;
layout(local_size_x = 128, local_size_x_id = 4) in;
const uint NSG = gl_WorkGroupSize.x / 32u, BR = 16u * NSG, BC = 32u;
const uint ROW = (D + 8u) / 8u; // a k or v row in shared memory, in uvec4 (D + 8 halves)
const uint FD = D / 16u;        // fragments along the head dims
const uint PROW = BC + 8u;      // a row of P in shared memory (halves)

#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define MA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>

shared uvec4 kv[2u * BC * ROW]; // k's rows then v's; at the start q's rows, 64 at a time
// Each subgroup's area of ssc: its scores S (16 x BC) column-major, the second 16 columns 16
// floats further on, so that the lane pairs reading their rows (lane 2 r + half: row r, columns
// 16 half ..) fall in 32 different banks (row-major rows of 32 floats put all 16 rows in the same
// banks: a 16-way conflict for each score read); or the O fragment being scaled or written.
const uint SAREA = 16u * BC + 16u, SFRAG = 16u * 16u + 16u;
shared float ssc[NSG * SAREA];
shared float16_t psh[NSG * 16u * PROW]; // each subgroup's p
shared float rsc[NSG * 16u];         // each subgroup's row factors (alpha, then 1 / l)

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, q)
NU_TENSOR(readonly, 2, k)
NU_TENSOR(readonly, 3, v)
layout(constant_id = 6) const uint SOFTCAP = 0u; // (the host takes the per-row form to attn_prefill.comp)
#define ATTN_POS_BINDING 4
#define ATTN_SLOT_BINDING 5
#include "attention/attn_rows.glsl"

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
    uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint h = gl_WorkGroupID.y, kvh = h / pc.group;
    uint row0 = gl_WorkGroupID.x * BR;
    uint kvl = min(pc.kv_length, pc.positions);
    uint last = min(row0 + BR, pc.tokens) - 1u;
    uint kend = (pc.flags & ATTN_CAUSAL) != 0u ? min(kvl, pc.q_position + last + 1u) : kvl;

    // q's rows, scaled, as F16 through kv's space 64 rows at a time (rows past tokens 0), into the
    // subgroups' A fragments.
    MA qf[FD];
    for (uint pass = 0u; pass < BR / 64u; pass++) {
        if (pass > 0u)
            barrier(); // the previous pass's fragments are loaded
        for (uint i = tid; i < 64u * (D / 8u); i += gl_WorkGroupSize.x) {
            uint r = i / (D / 8u), c = i % (D / 8u), row = row0 + 64u * pass + r;
            uvec4 w = uvec4(0u);
            if (row < pc.tokens) {
                uint at = pc.first_q + row * pc.q_tok + h * pc.q_head + 8u * c;
                float x[8];
                nu_unpack8(QDT, q_v[at / 8u], uvec4(0u), x);
                [[unroll]] for (uint j = 0u; j < 4u; j++)
                    w[j] = packHalf2x16(vec2(pc.scale * x[2u * j], pc.scale * x[2u * j + 1u]));
            }
            kv[r * ROW + c] = w;
        }
        barrier();
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
        barrier(); // every subgroup is done with the previous block (and with q's staging)
        for (uint i = tid; i < 2u * BC * (D / 8u); i += gl_WorkGroupSize.x) {
            uint which = i / (BC * (D / 8u)), r = (i / (D / 8u)) % BC, c = i % (D / 8u);
            uint j = j0 + r;
            uvec4 w = uvec4(0u);
            if (j < kend)
                w = which == 0u ? k_v[(pc.first_k + j * pc.k_pos + kvh * pc.k_head) / 8u + c]
                                : v_v[(pc.first_v + j * pc.v_pos + kvh * pc.v_head) / 8u + c];
            kv[(which * BC + r) * ROW + c] = w;
        }
        barrier();
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
