#version 450
// attn_prefill: scaled dot-product attention for many query rows (nu_op_attention, nuvec/ops.h,
// more than NU_ATTENTION_DECODE_ROWS tokens), flash-attention style: each workgroup keeps a block
// of BR query rows of one head in shared memory and walks the keys in blocks of BC with an online
// softmax, so the score matrix never leaves the workgroup.
//
// Layout of the work: workgroup (x, h) takes rows x * BR .. x * BR + BR - 1 of head h (KV head
// h / (q_heads / kv_heads)); its LOCAL threads are BR rows of TPR = LOCAL / BR threads, thread
// (r, lane) owning output dims lane, lane + TPR, .. of row r (D / TPR accumulators in registers).
// Each row's keys [lo, hi) of its slot come from attention/attn_rows.glsl (the scalar or the
// per-row form, a window). The block's rows are taken a slot at a time, in increasing order of
// slot (one pass in the common case of rows of one sequence; a block mixing sequences makes one
// pass per slot, each over the keys its rows of that slot see): per pass, the keys from the
// smallest lo to the largest hi of those rows, in blocks of BC: K's and V's BC x D tiles go to
// shared memory (converted to F32; consecutive threads, consecutive dims), the BR x BC scores
// scale * q . k (softcapped where SOFTCAP is 1; -inf for the rows of other slots and for keys
// outside a row's [lo, hi)), then each row's new maximum, p = exp(s - m_new) in place, and
// o = o * exp(m_old - m_new) + p V, l likewise. At the end dst = o / l (0 for a row that saw no
// key).
//
// Specialisation constants:
//   0 QDT, 1 KDT, 2 VDT, 3 DDT   dtypes (ops.glsl codes)
//   4 LOCAL  threads (a multiple of BR; D a multiple of LOCAL / BR); default 128
//   5 D      head_dim (a multiple of 8, 8 to 256)
//   6 BR     query rows a workgroup; 7 BC keys a block (src/ops/attention.c: 16 x 16 for D 128,
//            32 x 32 for D 64: 25.1 and 28.2 KiB of shared memory, within lavapipe's 32)
//   8 SOFTCAP  1: the scores softcapped
// Bindings: 0 dst, 1 q, 2 k, 3 v, 4 positions, 5 slots (I32; the per-row form, empty ranges
// otherwise). Push: attention/attn_rows.glsl.
#include "ops.glsl"
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(constant_id = 0) const uint QDT = NU_F32;
layout(constant_id = 1) const uint KDT = NU_F32;
layout(constant_id = 2) const uint VDT = NU_F32;
layout(constant_id = 3) const uint DDT = NU_F32;
layout(constant_id = 5) const uint D = 128u;
layout(constant_id = 6) const uint BR = 16u;
layout(constant_id = 7) const uint BC = 16u;
layout(constant_id = 8) const uint SOFTCAP = 0u;
layout(local_size_x = 128, local_size_x_id = 4) in;
const uint LOCAL = gl_WorkGroupSize.x;
const uint TPR = LOCAL / BR;
const uint DPT = D / TPR; // dims a thread
const uint KPAD = D + 1u;  // K's rows padded: consecutive keys in other banks
const uint SPAD = BC + 1u;
const uint NONE = 0xffffffffu;

shared float Qs[BR * D];
shared float Ks[BC * KPAD];
shared float Vs[BC * D];
shared float S[BR * SPAD];
shared uint rslot[BR], rlo[BR], rhi[BR]; // each row's slot and keys
shared uint pslot, plo, phi;             // the pass's slot (NONE: no more) and keys

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, q)
NU_TENSOR(readonly, 2, k)
NU_TENSOR(readonly, 3, v)
#define ATTN_POS_BINDING 4
#define ATTN_SLOT_BINDING 5
#include "attention/attn_rows.glsl"

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint h = gl_WorkGroupID.y, kvh = h / pc.group;
    uint r = tid / TPR, lane = tid % TPR;
    for (uint rb = gl_WorkGroupID.x; rb * BR < pc.tokens; rb += gl_NumWorkGroups.x) {
        uint row0 = rb * BR;
        barrier(); // the previous row block is done with Qs and the rows' keys
        for (uint i = tid; i < BR * D; i += LOCAL) {
            uint rr = i / D, dd = i % D;
            float x = 0.0;
            if (row0 + rr < pc.tokens)
                x = pc.scale * NU_LOAD(q, QDT, pc.first_q + (row0 + rr) * pc.q_tok + h * pc.q_head + dd * pc.q_dim);
            Qs[i] = x;
        }
        if (tid < BR) {
            uint sl = 0u, lo = 0u, hi = 0u;
            if (row0 + tid < pc.tokens)
                attn_row(row0 + tid, sl, lo, hi);
            rslot[tid] = sl;
            rlo[tid] = lo;
            rhi[tid] = hi;
        }
        uint row = row0 + r;
        float m = NEG_INF, l = 0.0;
        float o[DPT];
        for (uint i = 0u; i < DPT; i++)
            o[i] = 0.0;
        uint next = 0u; // passes take slots >= next
        for (;;) {
            barrier(); // the rows' keys written; the previous pass is done with pslot
            if (tid == 0u) {
                uint best = NONE, lo = NONE, hi = 0u;
                for (uint i = 0u; i < BR; i++)
                    if (rhi[i] > rlo[i] && rslot[i] >= next && rslot[i] < best)
                        best = rslot[i];
                for (uint i = 0u; i < BR; i++)
                    if (rhi[i] > rlo[i] && rslot[i] == best) {
                        lo = min(lo, rlo[i]);
                        hi = max(hi, rhi[i]);
                    }
                pslot = best;
                plo = lo;
                phi = hi;
            }
            barrier();
            uint slot = pslot, kstart = plo, kend = phi;
            if (slot == NONE)
                break;
            next = slot + 1u;
            uint kb = pc.first_k + slot * pc.k_slot + kvh * pc.k_head, vb = pc.first_v + slot * pc.v_slot + kvh * pc.v_head;
            for (uint j0 = kstart; j0 < kend; j0 += BC) {
                barrier(); // Qs written; Ks, Vs and S free again
                for (uint i = tid; i < BC * D; i += LOCAL) {
                    uint c = i / D, dd = i % D;
                    float kx = 0.0, vx = 0.0;
                    if (j0 + c < kend) {
                        kx = NU_LOAD(k, KDT, kb + (j0 + c) * pc.k_pos + dd * pc.k_dim);
                        vx = NU_LOAD(v, VDT, vb + (j0 + c) * pc.v_pos + dd * pc.v_dim);
                    }
                    Ks[c * KPAD + dd] = kx;
                    Vs[c * D + dd] = vx;
                }
                barrier();
                for (uint i = tid; i < BR * BC; i += LOCAL) {
                    uint rr = i / BC, c = i % BC;
                    float s = NEG_INF;
                    uint j = j0 + c;
                    if (rslot[rr] == slot && j >= rlo[rr] && j < rhi[rr]) {
                        s = 0.0;
                        for (uint dd = 0u; dd < D; dd++)
                            s = fma(Qs[rr * D + dd], Ks[c * KPAD + dd], s);
                        s = attn_cap(s);
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
        }
        if (row < pc.tokens)
            for (uint i = 0u; i < DPT; i++)
                NU_STORE(dst, DDT, pc.first_dst + (row * pc.q_heads + h) * D + lane + i * TPR, l > 0.0 ? o[i] / l : 0.0)
    }
}
