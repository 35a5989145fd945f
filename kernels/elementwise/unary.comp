#version 450
// unary: dst = op(src), elementwise (nu_op_unary, nuvec/ops.h), any float dtypes, F32 arithmetic.
// Specialisation constants:
//   0 OP: nu_unary_op (SCALE 0, EXP 1, SILU 2, GELU 3, GELU_TANH 4, SOFTCAP 5; activation.glsl).
//   1 DT_DST, 2 DT_SRC: dtype codes (ops.glsl).
//   3 FAST: 1 when dst and src are 16-bit, contiguous and their first elements 16-byte aligned in
//     their bindings: 8 elements a step, 16-byte loads and stores, the tail an element a thread;
//     2 likewise where one is F32 (4 elements a step: coalesced 16-byte F32, 8-byte 16-bit loads;
//     src/ops/op.h: nu__op_vector_path);
//     0: an element a thread, src through its strides (0 for a broadcast dimension).
//   4 LOCAL: threads per workgroup (tuning; default 256).
//   5 UNROLL: 8-element steps a thread loads before it computes and stores, on the fast path
//     (tuning; default 2): more loads in flight per thread.
// In place (dst the same view as src) is allowed: a thread reads its elements before it writes
// them. Bindings 0 dst, 1 src. Push: the element count, dst's and src's first elements in their
// bindings, alpha (SCALE's factor, SOFTCAP's cap), dst's shape and src's strides (4 dimensions, outermost first,
// padded with 1s and 0s).
#include "ops.glsl"
#include "elementwise/activation.glsl"
layout(local_size_x_id = 4) in;
layout(constant_id = 0) const uint OP = 0u;
layout(constant_id = 1) const uint DT_DST = NU_F32;
layout(constant_id = 2) const uint DT_SRC = NU_F32;
layout(constant_id = 3) const uint FAST = 0u;
layout(constant_id = 5) const uint UNROLL = 2u;
NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, src)
layout(push_constant) uniform Push {
    uint count;
    uint first_dst, first_src;
    float alpha;
    uvec4 shape;
    uvec4 stride;
} pc;

float apply(float x)
{
    if (OP == 0u) return pc.alpha * x;
    if (OP == 1u) return exp(x);
    if (OP == 2u) return act_silu(x);
    if (OP == 3u) return act_gelu(x);
    if (OP == 5u) return pc.alpha * act_tanh(x / pc.alpha);
    return act_gelu_tanh(x);
}

void main()
{
    uint index = gl_GlobalInvocationID.x, threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint start = 0u;
    if (FAST == 2u) {
        uint units = pc.count / 4u;
        uint vs = nu_vbase4(pc.first_src), vd = nu_vbase4(pc.first_dst);
        for (uint base = index; base < units; base += threads * UNROLL) {
            float x[UNROLL][4];
            for (uint r = 0u; r < UNROLL; r++)
                if (base + r * threads < units)
                    NU_LOAD4(src, DT_SRC, vs, base + r * threads, x[r])
            for (uint r = 0u; r < UNROLL; r++) {
                if (base + r * threads < units) {
                    float z[4];
                    for (int k = 0; k < 4; k++)
                        z[k] = apply(x[r][k]);
                    NU_STORE4(dst, DT_DST, vd, base + r * threads, z)
                }
            }
        }
        start = units * 4u; // the last count % 4 elements, one a thread
        for (uint i = start + index; i < pc.count; i += threads) {
            float z = apply(NU_LOAD(src, DT_SRC, pc.first_src + i));
            NU_STORE(dst, DT_DST, pc.first_dst + i, z)
        }
        return;
    }
    if (FAST == 1u) {
        uint units = pc.count / 8u;
        uint vs = nu_vbase(DT_SRC, pc.first_src), vd = nu_vbase(DT_DST, pc.first_dst);
        for (uint base = index; base < units; base += threads * UNROLL) {
            float x[UNROLL][8];
            for (uint r = 0u; r < UNROLL; r++)
                if (base + r * threads < units)
                    NU_LOAD8(src, DT_SRC, vs, base + r * threads, x[r])
            for (uint r = 0u; r < UNROLL; r++) {
                if (base + r * threads < units) {
                    float z[8];
                    for (int k = 0; k < 8; k++)
                        z[k] = apply(x[r][k]);
                    NU_STORE8(dst, DT_DST, vd, base + r * threads, z)
                }
            }
        }
        start = units * 8u; // the last count % 8 elements, one a thread
        for (uint i = start + index; i < pc.count; i += threads) {
            float z = apply(NU_LOAD(src, DT_SRC, pc.first_src + i));
            NU_STORE(dst, DT_DST, pc.first_dst + i, z)
        }
        return;
    }
    for (uint i = index; i < pc.count; i += threads) {
        uint r = i;
        uint i3 = r % pc.shape.w; r /= pc.shape.w;
        uint i2 = r % pc.shape.z; r /= pc.shape.z;
        uint i1 = r % pc.shape.y; uint i0 = r / pc.shape.y;
        uint is = pc.first_src + i0 * pc.stride.x + i1 * pc.stride.y + i2 * pc.stride.z + i3 * pc.stride.w;
        float z = apply(NU_LOAD(src, DT_SRC, is));
        NU_STORE(dst, DT_DST, pc.first_dst + i, z)
    }
}
