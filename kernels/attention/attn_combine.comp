#version 450
// attn_combine: merges attn_decode.comp's split partials into dst (nu_op_attention's decode path
// with more than one split). Workgroup (h, t) takes query row t of head h; thread d < D of its D
// threads computes dst[t, h, d] = sum_s e_s o_s[d] / sum_s e_s l_s with e_s = exp(m_s - max_s m_s)
// over the splits' partials (m, l, o[D]) at ((t * q_heads + h) * splits + s) * (D + 2) floats.
// Splits that saw no key (m = -inf, l = 0) weigh 0; a row that saw none is 0.
// Specialisation constants: 0 DDT dst's dtype (ops.glsl code), 1 D head_dim (the threads).
// Bindings: 0 dst, 1 the partials (F32). Push: below.
#include "ops.glsl"
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(constant_id = 0) const uint DDT = NU_F32;
layout(local_size_x = 128, local_size_x_id = 1) in; // D, constant 1
const uint D = gl_WorkGroupSize.x;

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, part)
layout(push_constant) uniform Push {
    uint q_heads, splits, first_dst;
} pc;

void main()
{
    uint d = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    uint base = (t * pc.q_heads + h) * pc.splits * (D + 2u);
    float mx = NEG_INF;
    for (uint s = 0u; s < pc.splits; s++)
        mx = max(mx, uintBitsToFloat(part_w[base + s * (D + 2u)]));
    float o = 0.0, l = 0.0;
    if (mx != NEG_INF) {
        for (uint s = 0u; s < pc.splits; s++) {
            uint b = base + s * (D + 2u);
            float e = exp(uintBitsToFloat(part_w[b]) - mx);
            l = fma(e, uintBitsToFloat(part_w[b + 1u]), l);
            o = fma(e, uintBitsToFloat(part_w[b + 2u + d]), o);
        }
    }
    NU_STORE(dst, DDT, pc.first_dst + (t * pc.q_heads + h) * D + d, l > 0.0 ? o / l : 0.0)
}
