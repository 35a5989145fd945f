#version 450
// attn_decode_sg: attn_decode.comp's work (nu_op_attention's decode path: a few query rows against
// a KV cache, the keys split over workgroups, the same push constants, bindings and partials) on
// devices with subgroup arithmetic, built for memory bandwidth: a subgroup reads a key's row
// whole (lane i the PACK-element units i, i + SG, .. of it), so every load of a subgroup is one
// contiguous run; the dot product
// is a subgroupAdd; each subgroup keeps its own online softmax (running maximum m, sum l, output
// o, the output elements where its lanes read v) over KEYS keys at a time whose k and v rows are
// all loaded before any is used, so there is no workgroup barrier until the subgroups' (m, l, o)
// are merged at the end. attn_decode.comp's layout walked keys a thread each, with ten workgroup
// barriers per 128 keys (H200: 8% of the copy bandwidth at 4k keys; see bench/RESULTS.md).
//
// Workgroup (x, s, t): query row t of HG query heads that share a KV head (x / (group / HG) is
// the KV head; the heads are (x / (group / HG)) * group + (x % (group / HG)) * HG + 0 .. HG - 1),
// so each key's k and v rows are read once for all HG heads; split s of the keys that row sees
// (as attn_decode.comp); subgroup g of the workgroup takes the runs of KEYS keys g, g + NSG, .. of
// the split. Lane i holds the head elements PACK * (i + SG c) + 0 .. PACK - 1 (c = 0, 1, ..) of
// q, k, v and o: PACK contiguous elements per load (up to 16 bytes) where the rows allow it.
// A row has U = D / PACK units; where U is not a multiple of SG, the lanes past the last unit
// (PARTIAL) read and hold zeros. The host chooses this kernel where D >= SG (SG the device's
// subgroup size, assumed to be what compute dispatches get, as matvec_sg.comp does). Each row's
// keys (attention/attn_rows.glsl: the scalar or the per-row form, its slot, a window) are split
// as in attn_decode.comp; scores are softcapped where SOFTCAP is 1.
//
// Specialisation constants:
//   0 QDT, 1 KDT, 2 VDT, 3 DDT   dtypes (ops.glsl codes; DDT unused unless FINAL)
//   4 LOCAL  threads a workgroup, a multiple of SG; default 128
//   5 D      head_dim (a multiple of 8, 8 to 256)
//   6 FINAL  1: one split, write dst; 0: write the partials ((m, l, o[D]) for attn_combine.comp);
//            2: write the partials, and the last split of each (row, head group) to finish
//            merges them into dst (attention/attn_splits.glsl: no combine dispatch)
//   7 PACK   1, 2 or 4 elements a lane reads at once from k's and v's rows (2 and 4: both
//            contiguous, every row starting at a multiple of PACK elements)
//   8 SG     subgroup size
//   9 KEYS   keys a subgroup has in flight (default 8)
//   10 HG    query heads a workgroup (dividing group)
//   11 SOFTCAP  1: the scores softcapped
//   12..28     the fresh form (attention/attn_fresh.glsl)
// Bindings: 0 dst (FINAL 1 and 2; an empty range otherwise), 1 q, 2 k, 3 v, 4 the partials (FINAL
// 0 and 2; empty otherwise), 5 the counters (FINAL 2; empty otherwise), 6 positions, 7 slots (I32;
// the per-row form, empty otherwise), 8..14 the fresh form's (attention/attn_fresh.glsl). Push:
// attention/attn_rows.glsl.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "ops.glsl"
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(constant_id = 0) const uint QDT = NU_F32;
layout(constant_id = 1) const uint KDT = NU_F32;
layout(constant_id = 2) const uint VDT = NU_F32;
layout(constant_id = 3) const uint DDT = NU_F32;
layout(constant_id = 5) const uint D = 128u;
layout(constant_id = 6) const uint FINAL = 1u;
layout(constant_id = 7) const uint PACK = 1u;
layout(constant_id = 8) const uint SG = 32u;
layout(constant_id = 9) const uint KEYS = 8u;
layout(constant_id = 10) const uint HG = 1u;
layout(constant_id = 11) const uint SOFTCAP = 0u;
layout(local_size_x = 128, local_size_x_id = 4) in;
const uint LOCAL = gl_WorkGroupSize.x;
const uint NSG = LOCAL / SG;
const uint U = D / PACK;                // PACK-element units a row
const uint UL = (U + SG - 1u) / SG;     // units a lane
const uint E = UL * PACK;               // elements a lane
const bool PARTIAL = U % SG != 0u;      // the last units of a row leave lanes without one

shared float sm[NSG * HG], sl[NSG * HG];
shared float so[NSG * HG * D];

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, q)
NU_TENSOR(readonly, 2, k)
NU_TENSOR(readonly, 3, v)
#define ATTN_POS_BINDING 6
#define ATTN_SLOT_BINDING 7
#include "attention/attn_rows.glsl"
#define ATTN_HG HG
#define ATTN_LOCAL LOCAL
#include "attention/attn_splits.glsl"
#define ATTN_FRESH_HEADS HG
#include "attention/attn_fresh.glsl"

// The head element in a lane's slot u.
uint elem(uint u, uint lane) { return PACK * ((u / PACK) * SG + lane) + u % PACK; }
// Whether the lane's unit c is in the row.
bool unit_in(uint c, uint lane) { return !PARTIAL || c * SG + lane < U; }

// A lane's E elements of the k (is_k) or v row starting at element `base`; zeros where `skip`
// (uniform: the fresh form's own key, which is not read from the cache).
void load_row(uint dt, bool is_k, uint base, uint lane, bool skip, out float x[E])
{
    if (PACK == 1u) {
        uint stride = is_k ? pc.k_dim : pc.v_dim;
        [[unroll]] for (uint u = 0u; u < E; u++)
            x[u] = skip || !unit_in(u, lane) ? 0.0
                 : (is_k ? NU_LOAD(k, dt, base + elem(u, lane) * stride) : NU_LOAD(v, dt, base + elem(u, lane) * stride));
        return;
    }
    [[unroll]] for (uint c = 0u; c < UL; c++) {
        uint i = c * SG + lane; // the lane's PACK-element unit
        uvec4 w = uvec4(0u);
        if (skip || !unit_in(c, lane))
            w = uvec4(0u);
        else if (dt == NU_F32 && PACK == 4u)
            w = is_k ? k_v[base / 4u + i] : v_v[base / 4u + i];
        else if (dt == NU_F32 || PACK == 4u)
            w.xy = is_k ? k_v2[base / PACK + i] : v_v2[base / PACK + i];
        else
            w.x = is_k ? k_w[base / 2u + i] : v_w[base / 2u + i];
        [[unroll]] for (uint e = 0u; e < PACK; e++) {
            uint word = dt == NU_F32 ? w[e] : w[e / 2u] >> (16u * (e & 1u));
            x[c * PACK + e] = dt == NU_F32 ? uintBitsToFloat(word)
                                           : (dt == NU_F16 ? nu_f16_to_f32(word & 0xffffu) : nu_bf16_to_f32(word & 0xffffu));
        }
    }
}

void main()
{
    uint tid = gl_LocalInvocationID.x, lane = gl_SubgroupInvocationID, g = gl_SubgroupID;
    uint x = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint splits = gl_NumWorkGroups.y;
    uint per_kv = pc.group / HG, kvh = x / per_kv, h0 = kvh * pc.group + (x % per_kv) * HG;
    uint slot, lo, hi;
    attn_row(t, slot, lo, hi);
    uint per = (hi - lo + splits - 1u) / splits;
    uint start = lo + min(s * per, hi - lo), end = min(start + per, hi);

    uint kh = pc.first_k + slot * pc.k_slot + kvh * pc.k_head, vh = pc.first_v + slot * pc.v_slot + kvh * pc.v_head;
    uint pnew = hi - 1u; // fresh: the row's position, its own key's
    if (FRESH) // q turned, the row's key and value staged (and written by the split holding them)
        fresh_stage(hi > lo, t, pc.first_q + t * pc.q_tok + h0 * pc.q_head, pc.q_head, kvh, pnew, kh, vh,
                    x % per_kv == 0u && pnew >= start && pnew < end, tid);

    float qv[HG][E], o[HG][E], m[HG], l[HG];
    [[unroll]] for (uint hh = 0u; hh < HG; hh++) {
        [[unroll]] for (uint u = 0u; u < E; u++) {
            uint at = pc.first_q + t * pc.q_tok + (h0 + hh) * pc.q_head + elem(u, lane) * pc.q_dim;
            qv[hh][u] = !unit_in(u / PACK, lane) ? 0.0
                      : pc.scale * (FRESH ? fq[hh * D + elem(u, lane)] : NU_LOAD(q, QDT, at));
            o[hh][u] = 0.0;
        }
        m[hh] = NEG_INF;
        l[hh] = 0.0;
    }
    for (uint j0 = start + g * KEYS; j0 < end; j0 += NSG * KEYS) {
        float kx[KEYS][E], vx[KEYS][E];
        [[unroll]] for (uint c = 0u; c < KEYS; c++) { // every load first, then the arithmetic
            uint j = min(j0 + c, end - 1u);           // past the end: the last key again, masked below
            bool own = FRESH && j == pnew;            // the row's own key: staged (the cache's not yet written)
            load_row(KDT, true, kh + j * pc.k_pos, lane, own, kx[c]);
            load_row(VDT, false, vh + j * pc.v_pos, lane, own, vx[c]);
        }
        // The chunk holding the row's own key and value takes them from the staging, apart from the
        // loads above: with a branch around each key's loads instead, one-row 7B Q4_0 decode ran
        // 400.2 / 401.1 tokens/s against 409.3 / 409.3 now, and a 64-row batched step's fresh
        // attention 338 us a layer against 266 (H100, 2026-12-06).
        if (FRESH && pnew - j0 < KEYS)
            [[unroll]] for (uint c = 0u; c < KEYS; c++)
                if (j0 + c == pnew)
                    [[unroll]] for (uint u = 0u; u < E; u++) {
                        kx[c][u] = unit_in(u / PACK, lane) ? fk[elem(u, lane)] : 0.0;
                        vx[c][u] = unit_in(u / PACK, lane) ? fv[elem(u, lane)] : 0.0;
                    }
        [[unroll]] for (uint hh = 0u; hh < HG; hh++) {
            float sc[KEYS];
            float mx = NEG_INF;
            [[unroll]] for (uint c = 0u; c < KEYS; c++) {
                float part = 0.0;
                [[unroll]] for (uint u = 0u; u < E; u++)
                    part = fma(qv[hh][u], kx[c][u], part);
                sc[c] = j0 + c < end ? attn_cap(subgroupAdd(part)) : NEG_INF;
                mx = max(mx, sc[c]);
            }
            float mnew = max(m[hh], mx); // finite: key j0 is in the split
            float alpha = exp(m[hh] - mnew);
            l[hh] *= alpha;
            [[unroll]] for (uint u = 0u; u < E; u++)
                o[hh][u] *= alpha;
            [[unroll]] for (uint c = 0u; c < KEYS; c++) {
                float p = sc[c] == NEG_INF ? 0.0 : exp(sc[c] - mnew);
                l[hh] += p;
                [[unroll]] for (uint u = 0u; u < E; u++)
                    o[hh][u] = fma(p, vx[c][u], o[hh][u]);
            }
            m[hh] = mnew;
        }
    }
    // Merge the subgroups per head: weights exp(m_g - max m), 0 for a subgroup that saw no key.
    [[unroll]] for (uint hh = 0u; hh < HG; hh++) {
        if (lane == 0u) {
            sm[g * HG + hh] = m[hh];
            sl[g * HG + hh] = l[hh];
        }
        [[unroll]] for (uint u = 0u; u < E; u++)
            if (unit_in(u / PACK, lane))
                so[(g * HG + hh) * D + elem(u, lane)] = o[hh][u];
    }
    barrier();
    for (uint i = tid; i < HG * D; i += LOCAL) {
        uint hh = i / D, dd = i % D, h = h0 + hh;
        float mt = NEG_INF;
        for (uint j = 0u; j < NSG; j++)
            mt = max(mt, sm[j * HG + hh]);
        float ot = 0.0, lt = 0.0;
        if (mt != NEG_INF)
            for (uint j = 0u; j < NSG; j++) {
                float w = sm[j * HG + hh] == NEG_INF ? 0.0 : exp(sm[j * HG + hh] - mt);
                ot += w * so[(j * HG + hh) * D + dd];
                lt += w * sl[j * HG + hh];
            }
        if (FINAL == 1u) {
            NU_STORE(dst, DDT, pc.first_dst + (t * pc.q_heads + h) * D + dd, lt > 0.0 ? ot / lt : 0.0)
        } else {
            attn_store_partial(((t * pc.q_heads + h) * splits + s) * (D + 2u), dd, mt, lt, ot);
        }
    }
    if (FINAL == 2u && attn_last_split(t * gl_NumWorkGroups.x + x, splits))
        attn_merge_store(t, h0, splits);
}
