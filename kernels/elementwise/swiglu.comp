#version 450
// swiglu: dst = act(gate) * up, elementwise (nu_op_glu and nu_op_swiglu, nuvec/ops.h), act SiLU or
// GELU (tanh form), any float dtypes, F32 arithmetic; gate, up and dst of one shape (no broadcasting).
// Specialisation constants:
//   0 DT_DST, 1 DT_GATE, 2 DT_UP: dtype codes (ops.glsl).
//   3 FAST: 2 as 1 below, four elements a step, where one is F32 (src/ops/op.h:
//     nu__op_vector_path); 1 when dst, gate and up are contiguous and their first elements 16-byte aligned in
//     their bindings: 8 elements a step, 16-byte loads and stores, the tail an element a thread;
//     0: an element a thread, gate and up through their strides.
//   4 LOCAL: threads per workgroup (tuning; default 256).
//   5 UNROLL: 8-element steps a thread loads before it computes and stores, on the fast path
//     (tuning; default 2).
//   6 ACT: nu_glu_activation (0 SiLU, 1 GELU with tanh: activation.glsl's act_gelu_tanh).
// In place (dst the same view as gate or up) is allowed. Bindings 0 dst, 1 gate, 2 up. Push: the
// element count, each tensor's first element in its binding, dst's shape, gate's and up's strides
// (4 dimensions, outermost first, padded with 1s and 0s).
#include "ops.glsl"
#include "elementwise/activation.glsl"
layout(local_size_x_id = 4) in;
layout(constant_id = 0) const uint DT_DST = NU_F32;
layout(constant_id = 1) const uint DT_GATE = NU_F32;
layout(constant_id = 2) const uint DT_UP = NU_F32;
layout(constant_id = 3) const uint FAST = 0u;
layout(constant_id = 5) const uint UNROLL = 2u;
layout(constant_id = 6) const uint ACT = 0u;
NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, gate)
NU_TENSOR(readonly, 2, up)
layout(push_constant) uniform Push {
    uint count;
    uint first_dst, first_gate, first_up;
    uvec4 shape;
    uvec4 stride_gate, stride_up;
} pc;

float glu_act(float g) { return ACT == 0u ? act_silu(g) : act_gelu_tanh(g); }

void main()
{
    uint index = gl_GlobalInvocationID.x, threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (FAST == 2u) {
        uint units = pc.count / 4u;
        uint vg = nu_vbase4(pc.first_gate), vu = nu_vbase4(pc.first_up), vd = nu_vbase4(pc.first_dst);
        for (uint base = index; base < units; base += threads * UNROLL) {
            float g[UNROLL][4], v[UNROLL][4];
            for (uint r = 0u; r < UNROLL; r++) {
                if (base + r * threads < units) {
                    NU_LOAD4(gate, DT_GATE, vg, base + r * threads, g[r])
                    NU_LOAD4(up, DT_UP, vu, base + r * threads, v[r])
                }
            }
            for (uint r = 0u; r < UNROLL; r++) {
                if (base + r * threads < units) {
                    float z[4];
                    for (int k = 0; k < 4; k++)
                        z[k] = glu_act(g[r][k]) * v[r][k];
                    NU_STORE4(dst, DT_DST, vd, base + r * threads, z)
                }
            }
        }
        for (uint i = units * 4u + index; i < pc.count; i += threads) {
            float z = glu_act(NU_LOAD(gate, DT_GATE, pc.first_gate + i)) * NU_LOAD(up, DT_UP, pc.first_up + i);
            NU_STORE(dst, DT_DST, pc.first_dst + i, z)
        }
        return;
    }
    if (FAST == 1u) {
        uint units = pc.count / 8u;
        uint vg = nu_vbase(DT_GATE, pc.first_gate), vu = nu_vbase(DT_UP, pc.first_up), vd = nu_vbase(DT_DST, pc.first_dst);
        for (uint base = index; base < units; base += threads * UNROLL) {
            float g[UNROLL][8], v[UNROLL][8];
            for (uint r = 0u; r < UNROLL; r++) {
                if (base + r * threads < units) {
                    NU_LOAD8(gate, DT_GATE, vg, base + r * threads, g[r])
                    NU_LOAD8(up, DT_UP, vu, base + r * threads, v[r])
                }
            }
            for (uint r = 0u; r < UNROLL; r++) {
                if (base + r * threads < units) {
                    float z[8];
                    for (int k = 0; k < 8; k++)
                        z[k] = glu_act(g[r][k]) * v[r][k];
                    NU_STORE8(dst, DT_DST, vd, base + r * threads, z)
                }
            }
        }
        for (uint i = units * 8u + index; i < pc.count; i += threads) {
            float z = glu_act(NU_LOAD(gate, DT_GATE, pc.first_gate + i)) * NU_LOAD(up, DT_UP, pc.first_up + i);
            NU_STORE(dst, DT_DST, pc.first_dst + i, z)
        }
        return;
    }
    for (uint i = index; i < pc.count; i += threads) {
        uint r = i;
        uint i3 = r % pc.shape.w; r /= pc.shape.w;
        uint i2 = r % pc.shape.z; r /= pc.shape.z;
        uint i1 = r % pc.shape.y; uint i0 = r / pc.shape.y;
        uint ig = pc.first_gate + i0 * pc.stride_gate.x + i1 * pc.stride_gate.y + i2 * pc.stride_gate.z + i3 * pc.stride_gate.w;
        uint iu = pc.first_up + i0 * pc.stride_up.x + i1 * pc.stride_up.y + i2 * pc.stride_up.z + i3 * pc.stride_up.w;
        float z = glu_act(NU_LOAD(gate, DT_GATE, ig)) * NU_LOAD(up, DT_UP, iu);
        NU_STORE(dst, DT_DST, pc.first_dst + i, z)
    }
}
