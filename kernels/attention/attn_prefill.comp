#version 450
// attn_prefill: scaled dot-product attention for many query rows (nu_op_attention, nuvec/ops.h,
// more than NU_ATTENTION_DECODE_ROWS tokens), flash-attention style: each workgroup keeps a block
// of BR query rows of one head in shared memory and walks the keys in blocks of BC with an online
// softmax, so the score matrix never leaves the workgroup.
//
// Layout of the work: workgroup (x, h) takes rows x * BR .. x * BR + BR - 1 of head h (KV head
// h / (q_heads / kv_heads)); its LOCAL threads are BR rows of TPR = LOCAL / BR threads, thread
// (r, lane) owning output dims lane, lane + TPR, .. of row r (D / TPR accumulators in registers).
// Per key block: K's and V's BC x D tiles go to shared memory (converted to F32; consecutive
// threads, consecutive dims), the BR x BC scores scale * q . k (masked to -inf past kv_length
// and, causal, past q_position + row), then each row's new maximum, p = exp(s - m_new) in place,
// and o = o * exp(m_old - m_new) + p V, l likewise. Causal workgroups stop at the block holding
// their last row's last key. At the end dst = o / l.
//
// Specialisation constants:
//   0 QDT, 1 KDT, 2 VDT, 3 DDT   dtypes (ops.glsl codes)
//   4 LOCAL  threads (a multiple of BR; D a multiple of LOCAL / BR); default 128
//   5 D      head_dim (a power of two, 8 to 128)
//   6 BR     query rows a workgroup; 7 BC keys a block (src/ops/attention.c: 16 x 16 for D 128,
//            32 x 32 for D 64: 25.1 and 28.2 KiB of shared memory, within lavapipe's 32)
// Bindings: 0 dst, 1 q, 2 k, 3 v. Push: as attn_decode.comp's.
#include "ops.glsl"
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(constant_id = 0) const uint QDT = NU_F32;
layout(constant_id = 1) const uint KDT = NU_F32;
layout(constant_id = 2) const uint VDT = NU_F32;
layout(constant_id = 3) const uint DDT = NU_F32;
layout(constant_id = 5) const uint D = 128u;
layout(constant_id = 6) const uint BR = 16u;
layout(constant_id = 7) const uint BC = 16u;
layout(local_size_x = 128, local_size_x_id = 4) in;
const uint LOCAL = gl_WorkGroupSize.x;
const uint TPR = LOCAL / BR;
const uint DPT = D / TPR; // dims a thread
const uint KPAD = D + 1u;  // K's rows padded: consecutive keys in other banks
const uint SPAD = BC + 1u;

shared float Qs[BR * D];
shared float Ks[BC * KPAD];
shared float Vs[BC * D];
shared float S[BR * SPAD];

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, q)
NU_TENSOR(readonly, 2, k)
NU_TENSOR(readonly, 3, v)
layout(push_constant) uniform Push {
    uint tokens, q_heads, group;
    uint q_position, kv_length, positions, causal;
    float scale;
    uint first_q, q_tok, q_head, q_dim;
    uint first_k, k_pos, k_head, k_dim;
    uint first_v, v_pos, v_head, v_dim;
    uint first_dst;
} pc;

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint h = gl_WorkGroupID.y, kvh = h / pc.group;
    uint r = tid / TPR, lane = tid % TPR;
    uint kv = min(pc.kv_length, pc.positions);
    for (uint rb = gl_WorkGroupID.x; rb * BR < pc.tokens; rb += gl_NumWorkGroups.x) {
        uint row0 = rb * BR;
        uint last = min(row0 + BR, pc.tokens) - 1u;
        uint kend = pc.causal != 0u ? min(kv, pc.q_position + last + 1u) : kv;
        barrier(); // the previous row block is done with Qs
        for (uint i = tid; i < BR * D; i += LOCAL) {
            uint rr = i / D, dd = i % D;
            float x = 0.0;
            if (row0 + rr < pc.tokens)
                x = pc.scale * NU_LOAD(q, QDT, pc.first_q + (row0 + rr) * pc.q_tok + h * pc.q_head + dd * pc.q_dim);
            Qs[i] = x;
        }
        uint row = row0 + r;
        float m = NEG_INF, l = 0.0;
        float o[DPT];
        for (uint i = 0u; i < DPT; i++)
            o[i] = 0.0;
        for (uint j0 = 0u; j0 < kend; j0 += BC) {
            barrier(); // Qs written; Ks, Vs and S free again
            for (uint i = tid; i < BC * D; i += LOCAL) {
                uint c = i / D, dd = i % D;
                float kx = 0.0, vx = 0.0;
                if (j0 + c < kend) {
                    kx = NU_LOAD(k, KDT, pc.first_k + (j0 + c) * pc.k_pos + kvh * pc.k_head + dd * pc.k_dim);
                    vx = NU_LOAD(v, VDT, pc.first_v + (j0 + c) * pc.v_pos + kvh * pc.v_head + dd * pc.v_dim);
                }
                Ks[c * KPAD + dd] = kx;
                Vs[c * D + dd] = vx;
            }
            barrier();
            for (uint i = tid; i < BR * BC; i += LOCAL) {
                uint rr = i / BC, c = i % BC;
                float s = NEG_INF;
                uint j = j0 + c;
                if (row0 + rr < pc.tokens && j < kend && (pc.causal == 0u || j <= pc.q_position + row0 + rr)) {
                    s = 0.0;
                    for (uint dd = 0u; dd < D; dd++)
                        s = fma(Qs[rr * D + dd], Ks[c * KPAD + dd], s);
                }
                S[rr * SPAD + c] = s;
            }
            barrier();
            float mb = NEG_INF;
            for (uint c = 0u; c < BC; c++)
                mb = max(mb, S[r * SPAD + c]);
            float mnew = max(m, mb);
            barrier(); // every thread of the row has read its scores
            // The row's p in place; a row that has seen no key yet (mnew -inf) gets 0s.
            for (uint c = lane; c < BC; c += TPR) {
                float s = S[r * SPAD + c];
                S[r * SPAD + c] = s == NEG_INF ? 0.0 : exp(s - mnew);
            }
            barrier();
            float alpha = mnew == NEG_INF ? 1.0 : exp(m - mnew);
            float ps = 0.0;
            for (uint i = 0u; i < DPT; i++)
                o[i] *= alpha;
            for (uint c = 0u; c < BC; c++) {
                float p = S[r * SPAD + c];
                ps += p;
                for (uint i = 0u; i < DPT; i++)
                    o[i] = fma(p, Vs[c * D + lane + i * TPR], o[i]);
            }
            l = l * alpha + ps;
            m = mnew;
        }
        if (row < pc.tokens)
            for (uint i = 0u; i < DPT; i++)
                NU_STORE(dst, DDT, pc.first_dst + (row * pc.q_heads + h) * D + lane + i * TPR, l > 0.0 ? o[i] / l : 0.0)
    }
}
