#version 450
// attn_decode_keys: attn_decode_sg.comp's work (nu_op_attention's decode path: a few query rows
// against a KV cache, the keys split over workgroups; the same push constants, bindings, partials,
// merges and fresh form) with a key a thread for the scores, where the host finds k's and v's rows
// contiguous and 16-byte aligned in F16 (src/ops/attention.c: by default for groups of 4 query
// heads or more a KV head and 4096 keys or more, tune.by_key / no_by_key). attn_decode_sg.comp
// reads a key's row across a subgroup, so each key costs each head a subgroupAdd (a chain of
// shuffles); here no reduction crosses lanes per key.
//
// Workgroup (x, s, t): query row t of HG query heads sharing a KV head (as attn_decode_sg.comp's),
// split s of the keys that row sees. The split's keys go in tiles of LOCAL keys:
//   scores: thread i takes key j0 + i, its k row in 16-byte loads, and its dot with each head's q
//     (scaled, in shared memory) into the tile's scores (shared);
//   softmax: subgroup g takes heads g, g + NSG, ..: the tile's maximum, the running maximum m and
//     sum l, p = exp(score - m) written over the score, and each head's factor alpha = exp(m_old -
//     m) for the output;
//   output: thread (kg, dc) (dc < D / 8, kg < LOCAL / (D / 8)) takes elements 8 dc .. 8 dc + 7 of
//     the keys kg, kg + KG, .. of the tile: their v rows in 16-byte loads, o[hh][e] = alpha o[hh][e]
//     + sum p v, for every head.
// Loads are asked for ahead of their use: the first tile's k rows and v units before q is staged,
// the next tile's k rows as soon as the scores are taken and its v units as soon as the output is
// (kw and vw, up to 16 units each a thread), so a workgroup's memory waits overlap its arithmetic
// and one another (H100, 8 KV heads, 8192 / 32768 keys: 43.4 / 118.6 us with each load just before
// its use, 34.8 / 91.4 with them ahead; bench/RESULTS.md, twenty-ninth session).
// At the end the KG key groups' o are added through shared memory (they share m and l), then
// written as attn_decode_sg.comp writes them (FINAL 1: dst; 0 and 2: the partials,
// attention/attn_splits.glsl, 2 with the merge in the last split).
// The fresh form (attention/attn_fresh.glsl) as attn_decode_sg.comp has it: q turned and the
// row's own key and value staged (and written into the caches by the split holding them); the own
// key's score and value are taken from the staging, and its cache row is not read.
// Specialisation constants: 0 QDT, 1 KDT (F16), 2 VDT (F16), 3 DDT, 4 LOCAL (a multiple of the
// subgroup size and of D / 8, at most 256), 5 D (a multiple of 8, 8 to 256), 6 FINAL, 10 HG,
// 11 SOFTCAP (as attn_decode_sg.comp's; 7 to 9 unused), 12..28 the fresh form's.
// Bindings: 0 dst, 1 q, 2 k, 3 v, 4 the partials, 5 the counters, 6 positions, 7 slots, 8..14 the
// fresh form's (as attn_decode_sg.comp's).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "ops.glsl"
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(constant_id = 0) const uint QDT = NU_F32;
layout(constant_id = 1) const uint KDT = NU_F16;
layout(constant_id = 2) const uint VDT = NU_F16;
layout(constant_id = 3) const uint DDT = NU_F32;
layout(constant_id = 5) const uint D = 128u;
layout(constant_id = 6) const uint FINAL = 1u;
layout(constant_id = 10) const uint HG = 1u;
layout(constant_id = 11) const uint SOFTCAP = 0u;
layout(local_size_x = 128, local_size_x_id = 4) in;
const uint LOCAL = gl_WorkGroupSize.x;
const uint U8 = D / 8u;          // 16-byte units of a row
const uint KG = LOCAL / U8;      // key groups of the output phase
const uint UB = U8 < 16u ? U8 : 16u; // units of a k row a thread loads at once
const uint VK = (LOCAL + KG - 1u) / KG; // keys of a tile a thread takes in the output phase (at most)
const uint VB = VK < 16u ? VK : 16u;    // v units a thread loads at once
const uint HGD = HG * D;

shared float qs[HGD];            // q of the HG heads, scaled
shared float ps[HG * LOCAL];     // the tile's scores, then p
shared float alpha_s[HG];        // each head's factor for o this tile
shared float ms[HG], ls[HG];     // each head's running maximum and sum
shared float os[KG * HGD];       // the key groups' o at the end

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, q)
NU_TENSOR(readonly, 2, k)
NU_TENSOR(readonly, 3, v)
layout(std430, binding = 2) readonly buffer K4 { uvec4 k4[]; };
layout(std430, binding = 3) readonly buffer V4 { uvec4 v4[]; };
#define ATTN_POS_BINDING 6
#define ATTN_SLOT_BINDING 7
#include "attention/attn_rows.glsl"
#define ATTN_HG HG
#define ATTN_LOCAL LOCAL
#include "attention/attn_splits.glsl"
#define ATTN_FRESH_HEADS HG
#include "attention/attn_fresh.glsl"

// The 8 halves of a 16-byte unit as floats.
void unpack8(uvec4 w, out float x[8])
{
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
        vec2 f = unpackHalf2x16(w[e]);
        x[2u * e] = f.x;
        x[2u * e + 1u] = f.y;
    }
}

// Whether key j is the fresh form's own key (staged in fk and fv, not read from the caches, which
// this launch writes there).
bool own_key(uint j, uint pnew) { return FRESH && j == pnew; }

// The first UB units of the k row of key j0 + tid (zeros past the split's end and for the own key).
void load_k(uint j0, uint end, uint pnew, uint kh, uint kpos, uint tid, out uvec4 kw[UB])
{
    uint j = j0 + tid;
    [[unroll]] for (uint u = 0u; u < UB; u++)
        kw[u] = j < end && u < U8 && !own_key(j, pnew) ? k4[kh + j * kpos + u] : uvec4(0u);
}

// Unit dc of the v rows of the keys kg + (i0 + i) KG of the tile at j0, i < VB (zeros past the
// split's end, past the thread's keys, for threads past the output phase's KG U8, and for the own
// key).
void load_v(uint j0, uint end, uint pnew, uint vh, uint vpos, uint kg, uint dc, uint i0, out uvec4 vw[VB])
{
    [[unroll]] for (uint i = 0u; i < VB; i++) {
        uint j = j0 + kg + (i0 + i) * KG;
        bool in_tile = kg < KG && i0 + i < VK && j < end && j < j0 + LOCAL;
        vw[i] = in_tile && !own_key(j, pnew) ? v4[vh + j * vpos + dc] : uvec4(0u);
    }
}

void main()
{
    uint tid = gl_LocalInvocationID.x, lane = gl_SubgroupInvocationID, g = gl_SubgroupID, nsg = gl_NumSubgroups;
    uint x = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint splits = gl_NumWorkGroups.y;
    uint per_kv = pc.group / HG, kvh = x / per_kv, h0 = kvh * pc.group + (x % per_kv) * HG;
    uint slot, lo, hi;
    attn_row(t, slot, lo, hi);
    uint per = (hi - lo + splits - 1u) / splits;
    uint start = lo + min(s * per, hi - lo), end = min(start + per, hi);
    // Rows in 16-byte units (the host checks that every offset and stride is a multiple of 8 halves).
    uint kh = (pc.first_k + slot * pc.k_slot + kvh * pc.k_head) / 8u, vh = (pc.first_v + slot * pc.v_slot + kvh * pc.v_head) / 8u;
    uint kpos = pc.k_pos / 8u, vpos = pc.v_pos / 8u;

    uint kg = tid / U8, dc = tid % U8;
    uint pnew = hi - 1u; // fresh: the row's position, its own key's
    // The first tile's k row (its first UB units) and v units (the first VB keys the thread takes)
    // are asked for before q is staged, so that their loads are in flight during it.
    uvec4 kw[UB], vw[VB];
    load_k(start, end, pnew, kh, kpos, tid, kw);
    load_v(start, end, pnew, vh, vpos, kg, dc, 0u, vw);

    if (FRESH) // q turned, the row's key and value staged (and written by the split holding them)
        fresh_stage(hi > lo, t, pc.first_q + t * pc.q_tok + h0 * pc.q_head, pc.q_head, kvh, pnew, 8u * kh, 8u * vh,
                    x % per_kv == 0u && pnew >= start && pnew < end, tid);
    for (uint i = tid; i < HGD; i += LOCAL) {
        uint hh = i / D, dd = i % D;
        qs[i] = pc.scale * (FRESH ? fq[i] : NU_LOAD(q, QDT, pc.first_q + t * pc.q_tok + (h0 + hh) * pc.q_head + dd * pc.q_dim));
    }
    if (tid < HG) {
        ms[tid] = NEG_INF;
        ls[tid] = 0.0;
    }
    float o[HG][8];
    [[unroll]] for (uint hh = 0u; hh < HG; hh++)
        [[unroll]] for (uint e = 0u; e < 8u; e++)
            o[hh][e] = 0.0;
    barrier();

    for (uint j0 = start; j0 < end; j0 += LOCAL) {
        // Scores: a key a thread (its first UB units in kw already; the rest, for D over 128,
        // UB at a time).
        uint j = j0 + tid;
        bool more = j0 + LOCAL < end;
        float sc[HG];
        [[unroll]] for (uint hh = 0u; hh < HG; hh++)
            sc[hh] = 0.0;
        if (own_key(j, pnew)) { // the own key, from the staging
            for (uint e = 0u; e < D; e++)
                [[unroll]] for (uint hh = 0u; hh < HG; hh++)
                    sc[hh] = fma(qs[hh * D + e], fk[e], sc[hh]);
        } else if (j < end) {
            [[unroll]] for (uint u0 = 0u; u0 < U8; u0 += UB) {
                if (u0 > 0u)
                    [[unroll]] for (uint u = 0u; u < UB; u++)
                        kw[u] = u0 + u < U8 ? k4[kh + j * kpos + u0 + u] : uvec4(0u);
                [[unroll]] for (uint u = 0u; u < UB; u++) {
                    float kx[8];
                    unpack8(kw[u], kx);
                    [[unroll]] for (uint hh = 0u; hh < HG; hh++)
                        [[unroll]] for (uint e = 0u; e < 8u; e++)
                            if (u0 + u < U8)
                                sc[hh] = fma(qs[hh * D + 8u * (u0 + u) + e], kx[e], sc[hh]);
                }
            }
        }
        if (more) // the next tile's k, in flight through the softmax and the output
            load_k(j0 + LOCAL, end, pnew, kh, kpos, tid, kw);
        [[unroll]] for (uint hh = 0u; hh < HG; hh++)
            ps[hh * LOCAL + tid] = j < end ? attn_cap(sc[hh]) : NEG_INF;
        barrier();
        // Softmax: a subgroup a head.
        for (uint hh = g; hh < HG; hh += nsg) {
            float mx = NEG_INF;
            for (uint c = lane; c < LOCAL; c += gl_SubgroupSize)
                mx = max(mx, ps[hh * LOCAL + c]);
            mx = subgroupMax(mx);
            float mold = ms[hh], mnew = max(mold, mx); // finite: key j0 is in the split
            float sum = 0.0;
            for (uint c = lane; c < LOCAL; c += gl_SubgroupSize) {
                float sv = ps[hh * LOCAL + c];
                float p = sv == NEG_INF ? 0.0 : exp(sv - mnew);
                ps[hh * LOCAL + c] = p;
                sum += p;
            }
            sum = subgroupAdd(sum);
            if (lane == 0u) {
                float a = exp(mold - mnew); // 0 for the first tile (mold -inf)
                alpha_s[hh] = a;
                ls[hh] = ls[hh] * a + sum;
                ms[hh] = mnew;
            }
        }
        barrier();
        // Output: elements 8 dc .. of the keys kg, kg + KG, .. (VB of them in vw; the rest, where a
        // thread takes more keys, VB at a time).
        if (kg < KG) {
            [[unroll]] for (uint hh = 0u; hh < HG; hh++) {
                float a = alpha_s[hh];
                [[unroll]] for (uint e = 0u; e < 8u; e++)
                    o[hh][e] *= a;
            }
            uint n = min(LOCAL, end - j0);
            [[unroll]] for (uint i0 = 0u; i0 < VK; i0 += VB) {
                if (i0 > 0u)
                    load_v(j0, end, pnew, vh, vpos, kg, dc, i0, vw);
                [[unroll]] for (uint i = 0u; i < VB; i++) {
                    uint c = kg + (i0 + i) * KG;
                    if (i0 + i < VK && c < n) {
                        float vx[8];
                        unpack8(vw[i], vx);
                        if (own_key(j0 + c, pnew))
                            [[unroll]] for (uint e = 0u; e < 8u; e++)
                                vx[e] = fv[8u * dc + e];
                        [[unroll]] for (uint hh = 0u; hh < HG; hh++) {
                            float p = ps[hh * LOCAL + c];
                            [[unroll]] for (uint e = 0u; e < 8u; e++)
                                o[hh][e] = fma(p, vx[e], o[hh][e]);
                        }
                    }
                }
            }
        }
        if (more) // the next tile's v, in flight through its scores and softmax
            load_v(j0 + LOCAL, end, pnew, vh, vpos, kg, dc, 0u, vw);
        barrier(); // the tile's p read before the next tile's scores overwrite them
    }

    // The key groups' sums, then out.
    if (kg < KG)
        [[unroll]] for (uint hh = 0u; hh < HG; hh++)
            [[unroll]] for (uint e = 0u; e < 8u; e++)
                os[(kg * HG + hh) * D + 8u * dc + e] = o[hh][e];
    barrier();
    for (uint i = tid; i < HGD; i += LOCAL) {
        uint hh = i / D, dd = i % D, h = h0 + hh;
        float ot = 0.0;
        for (uint c = 0u; c < KG; c++)
            ot += os[(c * HG + hh) * D + dd];
        float mt = ms[hh], lt = ls[hh];
        if (FINAL == 1u) {
            NU_STORE(dst, DDT, pc.first_dst + (t * pc.q_heads + h) * D + dd, lt > 0.0 ? ot / lt : 0.0)
        } else {
            attn_store_partial(((t * pc.q_heads + h) * splits + s) * (D + 2u), dd, mt, lt, ot);
        }
    }
    if (FINAL == 2u && attn_last_split(t * gl_NumWorkGroups.x + x, splits))
        attn_merge_store(t, h0, splits);
}
