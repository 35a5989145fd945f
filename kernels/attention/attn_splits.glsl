// attention/attn_splits.glsl: the split partials of the decode kernels (attn_decode.comp,
// attn_decode_sg.comp) and the merge of the splits inside the split kernel (FINAL 2), included
// after their bindings 0..3.
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
//
// Memory ordering (the GLSL450 model, valid on every device, as kernels/graph/grid_sync.glsl's
// default variant): the partials and counters are Coherent (device-scope availability and
// visibility on each access); every invocation fences its partial stores (memoryBarrierBuffer,
// device scope, acquire-release on buffer memory) before the workgroup barrier, the first
// invocation fences again and then increments the counter (a relaxed atomic); the workgroup that
// sees splits - 1 arrivals before its own knows every other split's stores were made available
// before their arrivals, and fences (acquire) before it reads them. No workgroup waits for
// another, so nothing depends on workgroups being co-resident.

layout(std430, binding = 4) coherent buffer AttnPart { uint part_w[]; };
layout(std430, binding = 5) coherent buffer AttnCount { uint count_w[]; };
shared bool attn_last;

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
bool attn_last_split(uint counter, uint splits)
{
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        memoryBarrierBuffer();
        uint before = atomicAdd(count_w[counter], 1u);
        attn_last = before + 1u == splits;
        if (attn_last)
            atomicExchange(count_w[counter], 0u); // every split of this launch has arrived
    }
    barrier();
    bool last = attn_last;
    if (last)
        memoryBarrierBuffer();
    return last;
}

// Element dd of a row's output merged from its splits' partials (the row's first partial at
// float `base`): sum_s e_s o_s[dd] / sum_s e_s l_s, e_s = exp(m_s - max m); 0 where no split saw
// a key. The same arithmetic as attn_combine.comp.
float attn_merged(uint base, uint splits, uint dd)
{
    float mx = uintBitsToFloat(0xff800000u);
    for (uint s = 0u; s < splits; s++)
        mx = max(mx, uintBitsToFloat(part_w[base + s * (D + 2u)]));
    float o = 0.0, l = 0.0;
    if (mx != uintBitsToFloat(0xff800000u)) {
        for (uint s = 0u; s < splits; s++) {
            uint b = base + s * (D + 2u);
            float e = exp(uintBitsToFloat(part_w[b]) - mx);
            l = fma(e, uintBitsToFloat(part_w[b + 1u]), l);
            o = fma(e, uintBitsToFloat(part_w[b + 2u + dd]), o);
        }
    }
    return l > 0.0 ? o / l : 0.0;
}
