#version 450
// attn_decode_keys: attn_decode_sg.comp's work (nu_op_attention's decode path: a few query rows
// against a KV cache, the keys split over workgroups; the same push constants, bindings, partials
// and merges) with a key a thread for the scores: NUVEC_ATTENTION=bykey=1 (tune.by_key), where
// the host finds k's and v's rows contiguous and 16-byte aligned in F16 and the form is not the
// fresh one. attn_decode_sg.comp reads a key's row across a subgroup, so each key costs each head
// a subgroupAdd (a chain of shuffles); with 8 KV heads it read the cache at 23-34% of the copy at
// 8K and 32K keys (H100, bench/RESULTS.md, twenty-eighth session). Here no reduction crosses
// lanes per key.
//
// Workgroup (x, s, t): query row t of HG query heads sharing a KV head (as attn_decode_sg.comp's),
// split s of the keys that row sees. The split's keys go in tiles of LOCAL keys:
//   scores: thread i takes key j0 + i, reads its k row in 16-byte loads (every load of the row
//     issued before any is used) and takes its dot with each head's q (scaled, in shared memory)
//     into the tile's scores (shared);
//   softmax: subgroup g takes heads g, g + NSG, ..: the tile's maximum, the running maximum m and
//     sum l, p = exp(score - m) written over the score, and each head's factor alpha = exp(m_old -
//     m) for the output;
//   output: thread (kg, dc) (dc < D / 8, kg < LOCAL / (D / 8)) takes elements 8 dc .. 8 dc + 7 of
//     the keys kg, kg + KG, .. of the tile: their v rows in 16-byte loads, o[hh][e] = alpha o[hh][e]
//     + sum p v, for every head.
// At the end the KG key groups' o are added through shared memory (they share m and l), then
// written as attn_decode_sg.comp writes them (FINAL 1: dst; 0 and 2: the partials,
// attention/attn_splits.glsl, 2 with the merge in the last split).
// Specialisation constants: 0 QDT, 1 KDT (F16), 2 VDT (F16), 3 DDT, 4 LOCAL (a multiple of the
// subgroup size and of D / 8, at most 256), 5 D (a multiple of 8, 8 to 256), 6 FINAL, 10 HG,
// 11 SOFTCAP (as attn_decode_sg.comp's; 7 to 9 unused).
// Bindings: 0 dst, 1 q, 2 k, 3 v, 4 the partials, 5 the counters, 6 positions, 7 slots (as
// attn_decode_sg.comp's; 8 .. 14, the fresh form's, unused).
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

// The 8 halves of a 16-byte unit as floats.
void unpack8(uvec4 w, out float x[8])
{
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
        vec2 f = unpackHalf2x16(w[e]);
        x[2u * e] = f.x;
        x[2u * e + 1u] = f.y;
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

    for (uint i = tid; i < HGD; i += LOCAL) {
        uint hh = i / D, dd = i % D;
        qs[i] = pc.scale * NU_LOAD(q, QDT, pc.first_q + t * pc.q_tok + (h0 + hh) * pc.q_head + dd * pc.q_dim);
    }
    if (tid < HG) {
        ms[tid] = NEG_INF;
        ls[tid] = 0.0;
    }
    uint kg = tid / U8, dc = tid % U8;
    float o[HG][8];
    [[unroll]] for (uint hh = 0u; hh < HG; hh++)
        [[unroll]] for (uint e = 0u; e < 8u; e++)
            o[hh][e] = 0.0;
    barrier();

    for (uint j0 = start; j0 < end; j0 += LOCAL) {
        // Scores: a key a thread.
        uint j = j0 + tid;
        float sc[HG];
        [[unroll]] for (uint hh = 0u; hh < HG; hh++)
            sc[hh] = 0.0;
        if (j < end) {
            [[unroll]] for (uint u0 = 0u; u0 < U8; u0 += UB) { // UB units in flight (16: 256 bytes)
                uvec4 w[UB];
                [[unroll]] for (uint u = 0u; u < UB; u++)
                    w[u] = u0 + u < U8 ? k4[kh + j * kpos + u0 + u] : uvec4(0u);
                [[unroll]] for (uint u = 0u; u < UB; u++) {
                    float kx[8];
                    unpack8(w[u], kx);
                    [[unroll]] for (uint hh = 0u; hh < HG; hh++)
                        [[unroll]] for (uint e = 0u; e < 8u; e++)
                            if (u0 + u < U8)
                                sc[hh] = fma(qs[hh * D + 8u * (u0 + u) + e], kx[e], sc[hh]);
                }
            }
        }
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
        // Output: elements 8 dc .. of the keys kg, kg + KG, ..
        if (kg < KG) {
            [[unroll]] for (uint hh = 0u; hh < HG; hh++) {
                float a = alpha_s[hh];
                [[unroll]] for (uint e = 0u; e < 8u; e++)
                    o[hh][e] *= a;
            }
            uint n = min(LOCAL, end - j0);
            for (uint c = kg; c < n; c += KG) {
                float vx[8];
                unpack8(v4[vh + (j0 + c) * vpos + dc], vx);
                [[unroll]] for (uint hh = 0u; hh < HG; hh++) {
                    float p = ps[hh * LOCAL + c];
                    [[unroll]] for (uint e = 0u; e < 8u; e++)
                        o[hh][e] = fma(p, vx[e], o[hh][e]);
                }
            }
        }
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
