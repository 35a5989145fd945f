#version 450
// attn_decode: scaled dot-product attention for a few query rows against a KV cache (nu_op_attention,
// nuvec/ops.h, up to NU_ATTENTION_DECODE_ROWS tokens), the keys split over workgroups.
//
// Layout of the work: workgroup (h, s, t) takes query row t of head h (KV head h / (q_heads /
// kv_heads)) and split s of the keys that row sees: [s * per, min((s + 1) * per, limit)), where
// limit = kv_length (clamped to the cache's positions), causal: min(limit, q_position + t + 1), and
// per = ceil(limit / splits) (splits = the grid's y, chosen by the host from kv_length at
// recording; a launch with another kv_length keeps it). Heads are the grid's x, so the query
// heads sharing a KV head read the same keys at about the same time (from L2 after the first). It walks its keys in blocks of LOCAL, one
// key a thread: the score scale * q . k (q scaled once in shared memory; k's row read through its
// strides, or with FLAGS bit 0 eight elements a 16-byte load), the block's maximum by a
// shared-memory tree, then the online softmax: the running maximum m, sum l and output o (LOCAL /
// D groups of D threads, thread d of group g summing p_j v[j, d] over the block's keys g, g + G,
// .., so that consecutive threads read consecutive elements of v's rows) rescaled by
// exp(m_old - m_new). At the end the groups' sums are added. FINAL (one split): dst = o / l.
// Otherwise the split's partial (m, l, o[D]) goes to the partials buffer at ((t * q_heads + h) *
// splits + s) * (D + 2) floats, and attn_combine.comp (FINAL 0) or the last split (FINAL 2)
// merges the splits.
//
// Specialisation constants:
//   0 QDT, 1 KDT, 2 VDT, 3 DDT   dtypes of q, k, v and the output (ops.glsl codes; DDT unused
//                                unless FINAL: the partials are F32)
//   4 LOCAL  threads a workgroup, a multiple of D (and a power of two: the tree); default 128
//   5 D      head_dim (a power of two, 8 to 128)
//   6 FINAL  1: one split, write dst; 0: write the partials; 2: write the partials, and the last
//            split of each (row, head) to finish merges them into dst (attention/attn_splits.glsl)
//   7 FLAGS  bit 0: k's rows contiguous and 16-byte aligned (vector loads)
// Bindings: 0 dst (FINAL 1 and 2; an empty range otherwise), 1 q, 2 k, 3 v, 4 the partials (F32;
// FINAL 0 and 2, empty otherwise), 5 the counters (FINAL 2, empty otherwise). Push: below
// (strides in elements; dst contiguous [tokens, q_heads, D]).
#include "ops.glsl"
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(constant_id = 0) const uint QDT = NU_F32;
layout(constant_id = 1) const uint KDT = NU_F32;
layout(constant_id = 2) const uint VDT = NU_F32;
layout(constant_id = 3) const uint DDT = NU_F32;
layout(constant_id = 5) const uint D = 128u;
layout(constant_id = 6) const uint FINAL = 1u;
layout(constant_id = 7) const uint FLAGS = 0u;
layout(local_size_x = 128, local_size_x_id = 4) in;
const uint LOCAL = gl_WorkGroupSize.x;
const uint G = LOCAL / D; // groups of D threads
const bool KVEC = (FLAGS & 1u) != 0u;

shared float qs[D];
shared float sc[LOCAL];
shared float red[LOCAL];
shared float osum[LOCAL];

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, q)
NU_TENSOR(readonly, 2, k)
NU_TENSOR(readonly, 3, v)
layout(push_constant) uniform Push {
    uint tokens, q_heads, group;    // group = q_heads / kv_heads
    uint q_position, kv_length, positions, causal;
    float scale;
    uint first_q, q_tok, q_head, q_dim;
    uint first_k, k_pos, k_head, k_dim;
    uint first_v, v_pos, v_head, v_dim;
    uint first_dst;
} pc;
#define ATTN_HG 1u
#define ATTN_LOCAL LOCAL
#include "attention/attn_splits.glsl"

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

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint h = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint splits = gl_NumWorkGroups.y;
    uint kvh = h / pc.group;
    uint limit = min(pc.kv_length, pc.positions);
    if (pc.causal != 0u)
        limit = min(limit, pc.q_position + t + 1u);
    uint per = (limit + splits - 1u) / splits;
    uint start = min(s * per, limit), end = min(start + per, limit);

    if (tid < D)
        qs[tid] = pc.scale * NU_LOAD(q, QDT, pc.first_q + t * pc.q_tok + h * pc.q_head + tid * pc.q_dim);
    uint d = tid % D, g = tid / D;
    float m = NEG_INF, l = 0.0, o = 0.0;
    for (uint j0 = start; j0 < end; j0 += LOCAL) {
        barrier(); // qs written; sc and red free again
        uint j = j0 + tid;
        float x = NEG_INF;
        if (j < end)
            x = score(pc.first_k + j * pc.k_pos + kvh * pc.k_head);
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
        o *= alpha;
        l *= alpha;
        uint cnt = min(LOCAL, end - j0);
        uint vbase = pc.first_v + j0 * pc.v_pos + kvh * pc.v_head + d * pc.v_dim;
        for (uint jj = g; jj < cnt; jj += G) {
            float p = sc[jj];
            o = fma(p, NU_LOAD(v, VDT, vbase + jj * pc.v_pos), o);
            l += p;
        }
        m = mnew;
    }
    // Add the groups' sums (one running maximum for all).
    barrier();
    osum[tid] = o;
    red[tid] = l;
    barrier();
    if (tid < D) {
        float ot = 0.0, lt = 0.0;
        for (uint i = 0u; i < G; i++) {
            ot += osum[i * D + tid];
            lt += red[i * D + tid];
        }
        if (FINAL == 1u) {
            NU_STORE(dst, DDT, pc.first_dst + (t * pc.q_heads + h) * D + tid, lt > 0.0 ? ot / lt : 0.0)
        } else {
            attn_store_partial(((t * pc.q_heads + h) * splits + s) * (D + 2u), tid, m, lt, ot);
        }
    }
    if (FINAL == 2u && attn_last_split(t * gl_NumWorkGroups.x + h, splits))
        attn_merge_store(t, h, splits);
}
