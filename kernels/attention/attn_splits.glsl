// attention/attn_splits.glsl: the split partials of the decode kernels (attn_decode.comp,
// attn_decode_sg.comp) and the merge of the splits inside the split kernel (FINAL 2), included
// after their bindings 0..3 and push constants, with ATTN_HG (heads a workgroup) and ATTN_LOCAL
// (its invocations) defined.
//
// Binding 4, the partials (F32): split s of query row t, head h at ((t * q_heads + h) * splits +
// s) * (D + 2) floats: m (the split's maximum score, -inf for a split that saw no key), l (its sum
// of exp(score - m)) and o[D] (its sum of exp(score - m) v). attn_combine.comp merges them in a
// second dispatch (FINAL 0); with FINAL 2 the split kernel does.
// Binding 5 (FINAL 2), the counters: one 32-bit word per workgroup column (query row t, head
// group x: word t * gl_NumWorkGroups.x + x), zero before the first launch (the host writes zeros
// when it makes the buffer) and zero again after each launch: the last workgroup of a column
// puts it back. Every workgroup arrives, also one whose split has no key (a launch's kv_length
// may be below the one the split count was chosen for), so the count always reaches `splits`.
// The partials are Coherent, and the last split is found as last_arrival.glsl finds it (its
// memory ordering).

layout(std430, binding = 4) coherent buffer AttnPart { uint part_w[]; };
#define NU_ARRIVAL_BINDING 5
#include "last_arrival.glsl"

// Stores split s's partial element dd (with m and l when dd is 0) at `base` (its first float).
void attn_store_partial(uint base, uint dd, float m, float l, float o)
{
    if (dd == 0u) {
        part_w[base] = floatBitsToUint(m);
        part_w[base + 1u] = floatBitsToUint(l);
    }
    part_w[base + 2u + dd] = floatBitsToUint(o);
}

// Called by every invocation of the workgroup (uniform control flow) after its partial stores:
// whether this workgroup is the last of the `splits` of counter word `counter` to arrive (then the
// other splits' partials are visible to it, and the counter is zero again for the next launch).
bool attn_last_split(uint counter, uint splits) { return nu_last_arrival(counter, splits); }

// The merge, by the last split of a column: dst[t, h0 + hh, :] for hh < ATTN_HG (the including
// kernel defines ATTN_HG, the heads of its column) = sum_s e_s o_s / sum_s e_s l_s, e_s = exp(m_s -
// max m) (0 where no split saw a key), from the rows' partials. e_s is computed once per split and
// head, ATTN_LOCAL splits at a time, into shared memory with l_s, so each output element reads one
// float a split (o_s[dd]); the sums run over s in order with attn_combine.comp's fmas, so the two
// give the same bits. Called by every invocation of the workgroup (it has barriers).
shared float attn_mx[ATTN_HG];
shared float attn_e[ATTN_HG * ATTN_LOCAL], attn_l[ATTN_HG * ATTN_LOCAL];
const uint ATTN_R = (ATTN_HG * D + ATTN_LOCAL - 1u) / ATTN_LOCAL; // output elements an invocation
void attn_merge_store(uint t, uint h0, uint splits)
{
    const float neg_inf = uintBitsToFloat(0xff800000u);
    uint tid = gl_LocalInvocationIndex;
    uint base0 = (t * pc.q_heads + h0) * splits * (D + 2u), hstride = splits * (D + 2u);
    for (uint hh = 0u; hh < ATTN_HG; hh++) {
        float mx = neg_inf;
        for (uint s = tid; s < splits; s += ATTN_LOCAL)
            mx = max(mx, uintBitsToFloat(part_w[base0 + hh * hstride + s * (D + 2u)]));
        attn_e[hh * ATTN_LOCAL + tid] = mx;
    }
    barrier();
    if (tid < ATTN_HG) {
        float mx = neg_inf;
        for (uint j = 0u; j < ATTN_LOCAL; j++)
            mx = max(mx, attn_e[tid * ATTN_LOCAL + j]);
        attn_mx[tid] = mx;
    }
    barrier();
    float o[ATTN_R], l[ATTN_R];
    for (uint r = 0u; r < ATTN_R; r++) {
        o[r] = 0.0;
        l[r] = 0.0;
    }
    for (uint s0 = 0u; s0 < splits; s0 += ATTN_LOCAL) {
        uint s = s0 + tid;
        for (uint hh = 0u; hh < ATTN_HG; hh++) {
            float e = 0.0, ls = 0.0, mx = attn_mx[hh];
            if (s < splits && mx != neg_inf) {
                uint b = base0 + hh * hstride + s * (D + 2u);
                e = exp(uintBitsToFloat(part_w[b]) - mx);
                ls = uintBitsToFloat(part_w[b + 1u]);
            }
            attn_e[hh * ATTN_LOCAL + tid] = e;
            attn_l[hh * ATTN_LOCAL + tid] = ls;
        }
        barrier();
        uint n = min(ATTN_LOCAL, splits - s0);
        for (uint r = 0u; r < ATTN_R; r++) {
            uint i = tid + r * ATTN_LOCAL, hh = i / D, dd = i % D;
            if (i < ATTN_HG * D && attn_mx[min(hh, ATTN_HG - 1u)] != neg_inf) {
                uint b = base0 + hh * hstride + s0 * (D + 2u) + 2u + dd;
                for (uint j = 0u; j < n; j++) {
                    float e = attn_e[hh * ATTN_LOCAL + j];
                    l[r] = fma(e, attn_l[hh * ATTN_LOCAL + j], l[r]);
                    o[r] = fma(e, uintBitsToFloat(part_w[b + j * (D + 2u)]), o[r]);
                }
            }
        }
        barrier();
    }
    for (uint r = 0u; r < ATTN_R; r++) {
        uint i = tid + r * ATTN_LOCAL, hh = i / D, dd = i % D;
        if (i < ATTN_HG * D) {
            NU_STORE(dst, DDT, pc.first_dst + (t * pc.q_heads + h0 + hh) * D + dd, l[r] > 0.0 ? o[r] / l[r] : 0.0)
        }
    }
}
