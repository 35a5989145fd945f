#version 450
// attn_decode: scaled dot-product attention for a few query rows against a KV cache (nu_op_attention,
// nuvec/ops.h, up to NU_ATTENTION_DECODE_ROWS tokens), the keys split over workgroups.
//
// Layout of the work: workgroup (h, s, t) takes query row t of head h (KV head h / (q_heads /
// kv_heads)) and split s of the keys [lo, hi) that row sees in its slot (attention/attn_rows.glsl:
// the scalar or the per-row form, a window): [lo + s * per, min(lo + (s + 1) * per, hi)), per =
// ceil((hi - lo) / splits) (splits = the grid's y, chosen by the host from the recorded
// max_length; a launch with other lengths keeps it). Heads are the grid's x, so the query heads
// sharing a KV head read the same keys at about the same time (from L2 after the first). It
// walks its keys in blocks of LOCAL, one key a thread: the score scale * q . k (q scaled once in
// shared memory; k's row read through its strides, or with FLAGS bit 0 eight elements a 16-byte
// load), softcapped where SOFTCAP is 1, the block's maximum by a shared-memory tree, then the
// online softmax: the running maximum m, sum l and output o rescaled by exp(m_old - m_new). The
// output: D <= LOCAL: G = LOCAL / D groups of D threads, thread d of group g summing p_j v[j, d]
// over the block's keys g, g + G, .. (consecutive threads read consecutive elements of v's rows;
// threads past G * D idle there), the groups' sums added at the end; D > LOCAL: one group, each
// thread DPT dims (tid, tid + LOCAL, ..). FINAL (one split): dst = o / l (0 where no key).
// Otherwise the split's partial (m, l, o[D]) goes to the partials buffer at ((t * q_heads + h) *
// splits + s) * (D + 2) floats, and attn_combine.comp (FINAL 0) or the last split (FINAL 2)
// merges the splits.
//
// Specialisation constants:
//   0 QDT, 1 KDT, 2 VDT, 3 DDT   dtypes of q, k, v and the output (ops.glsl codes; DDT unused
//                                unless FINAL: the partials are F32)
//   4 LOCAL  threads a workgroup, a power of two (the tree); default 128
//   5 D      head_dim (a multiple of 8, 8 to 256)
//   6 FINAL  1: one split, write dst; 0: write the partials; 2: write the partials, and the last
//            split of each (row, head) to finish merges them into dst (attention/attn_splits.glsl)
//   7 FLAGS  bit 0: k's rows contiguous and 16-byte aligned (vector loads)
//   8 SOFTCAP  1: the scores softcapped (attn_rows.glsl)
//   12..28   the fresh form (attention/attn_fresh.glsl; bindings 8..14)
// Bindings: 0 dst (FINAL 1 and 2; an empty range otherwise), 1 q, 2 k, 3 v, 4 the partials (F32;
// FINAL 0 and 2, empty otherwise), 5 the counters (FINAL 2, empty otherwise), 6 positions, 7
// slots (I32; the per-row form, empty otherwise), 8..14 the fresh form's. Push:
// attention/attn_rows.glsl.
#include "ops.glsl"
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(constant_id = 0) const uint QDT = NU_F32;
layout(constant_id = 1) const uint KDT = NU_F32;
layout(constant_id = 2) const uint VDT = NU_F32;
layout(constant_id = 3) const uint DDT = NU_F32;
layout(constant_id = 5) const uint D = 128u;
layout(constant_id = 6) const uint FINAL = 1u;
layout(constant_id = 7) const uint FLAGS = 0u;
layout(constant_id = 8) const uint SOFTCAP = 0u;
layout(local_size_x = 128, local_size_x_id = 4) in;
const uint LOCAL = gl_WorkGroupSize.x;
const uint G = D <= LOCAL ? LOCAL / D : 1u;  // groups of D threads
const uint DPT = (D + LOCAL - 1u) / LOCAL;   // dims a thread (more than 1 where D > LOCAL)
const bool KVEC = (FLAGS & 1u) != 0u;

shared float qs[D];
shared float sc[LOCAL];
shared float red[LOCAL];
shared float osum[LOCAL];

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, q)
NU_TENSOR(readonly, 2, k)
NU_TENSOR(readonly, 3, v)
#define ATTN_POS_BINDING 6
#define ATTN_SLOT_BINDING 7
#include "attention/attn_rows.glsl"
#define ATTN_HG 1u
#define ATTN_LOCAL LOCAL
#include "attention/attn_splits.glsl"
#define ATTN_FRESH_HEADS 1u
#include "attention/attn_fresh.glsl"

float score(uint kbase)
{
    float s = 0.0;
    if (KVEC) {
        for (uint u = 0u; u < D / 8u; u++) {
            float x[8];
            if (KDT == NU_F32)
                nu_unpack8(KDT, k_v[kbase / 4u + 2u * u], k_v[kbase / 4u + 2u * u + 1u], x);
            else
                nu_unpack8(KDT, k_v[kbase / 8u + u], uvec4(0u), x);
            for (uint i = 0u; i < 8u; i++)
                s = fma(qs[8u * u + i], x[i], s);
        }
    } else {
        for (uint i = 0u; i < D; i++)
            s = fma(qs[i], NU_LOAD(k, KDT, kbase + i * pc.k_dim), s);
    }
    return s;
}

// The fresh row's score against its own key (staged: fk), in score's order.
float fresh_score()
{
    float s = 0.0;
    for (uint i = 0u; i < D; i++)
        s = fma(qs[i], fk[i], s);
    return s;
}

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint h = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint splits = gl_NumWorkGroups.y;
    uint kvh = h / pc.group;
    uint slot, lo, hi;
    attn_row(t, slot, lo, hi);
    uint per = (hi - lo + splits - 1u) / splits;
    uint start = lo + min(s * per, hi - lo), end = min(start + per, hi);

    uint qbase = pc.first_q + t * pc.q_tok + h * pc.q_head;
    uint pnew = hi - 1u; // fresh: the row's position, its own key's
    uint kbase0 = pc.first_k + slot * pc.k_slot + kvh * pc.k_head;
    uint vbase0 = pc.first_v + slot * pc.v_slot + kvh * pc.v_head;
    if (FRESH) // q turned, the row's key and value staged (and written by the split holding them)
        fresh_stage(hi > lo, t, qbase, 0u, kvh, pnew, kbase0, vbase0, h % pc.group == 0u && pnew >= start && pnew < end,
                    tid);
    for (uint i = tid; i < D; i += LOCAL)
        qs[i] = pc.scale * (FRESH ? (hi > lo ? fq[i] : 0.0) : NU_LOAD(q, QDT, qbase + i * pc.q_dim));
    // This thread's output dims: tid % D of group tid / D (D <= LOCAL), or tid + i LOCAL.
    uint d = D <= LOCAL ? tid % D : tid, g = D <= LOCAL ? tid / D : 0u;
    bool owns = g < G;
    float m = NEG_INF, l = 0.0;
    float o[DPT];
    for (uint i = 0u; i < DPT; i++)
        o[i] = 0.0;
    for (uint j0 = start; j0 < end; j0 += LOCAL) {
        barrier(); // qs written; sc and red free again
        uint j = j0 + tid;
        float x = NEG_INF;
        if (j < end)
            x = attn_cap(FRESH && j == pnew ? fresh_score() : score(kbase0 + j * pc.k_pos));
        red[tid] = x;
        barrier();
        for (uint half_ = LOCAL / 2u; half_ > 0u; half_ >>= 1u) {
            if (tid < half_)
                red[tid] = max(red[tid], red[tid + half_]);
            barrier();
        }
        float mnew = max(m, red[0]); // finite: the block has a key
        float alpha = exp(m - mnew);  // 0 while m is -inf
        barrier(); // every thread read red[0]
        sc[tid] = x == NEG_INF ? 0.0 : exp(x - mnew);
        barrier();
        for (uint i = 0u; i < DPT; i++)
            o[i] *= alpha;
        l *= alpha;
        uint cnt = min(LOCAL, end - j0);
        if (owns) {
            uint vbase = vbase0 + j0 * pc.v_pos;
            for (uint jj = g; jj < cnt; jj += G) {
                float p = sc[jj];
                for (uint i = 0u; i < DPT; i++)
                    if (d + i * LOCAL < D)
                        o[i] = fma(p, FRESH && j0 + jj == pnew ? fv[d + i * LOCAL]
                                                                : NU_LOAD(v, VDT, vbase + jj * pc.v_pos + (d + i * LOCAL) * pc.v_dim),
                                   o[i]);
                l += p;
            }
        }
        m = mnew;
    }
    // Add the groups' sums (one running maximum for all; one group: each thread's own).
    if (G > 1u) {
        barrier();
        osum[tid] = o[0];
        red[tid] = l;
        barrier();
    }
    for (uint i = 0u; i < DPT; i++) {
        uint dd = G > 1u ? tid : tid + i * LOCAL;
        if (dd >= D || (G == 1u && !owns))
            continue;
        float ot = o[i], lt = l;
        if (G > 1u) {
            ot = 0.0;
            lt = 0.0;
            for (uint gi = 0u; gi < G; gi++) {
                ot += osum[gi * D + dd];
                lt += red[gi * D + dd];
            }
        }
        if (FINAL == 1u) {
            NU_STORE(dst, DDT, pc.first_dst + (t * pc.q_heads + h) * D + dd, lt > 0.0 ? ot / lt : 0.0)
        } else {
            attn_store_partial(((t * pc.q_heads + h) * splits + s) * (D + 2u), dd, m, lt, ot);
        }
    }
    if (FINAL == 2u && attn_last_split(t * gl_NumWorkGroups.x + h, splits))
        attn_merge_store(t, h, splits);
}
