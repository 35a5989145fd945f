#version 450
// binary: dst = a op b, elementwise with broadcasting (nu_op_binary, nuvec/ops.h), any float
// dtypes. Specialisation constants: 0 the op (nu_binary_op), 1-3 the dtypes of dst, a, b
// (ops.glsl codes), 4 the path: 1 when dst, a and b are 16-bit, contiguous with one shape and their
// first elements 16-byte aligned (eight elements a step, 16-byte loads and stores); 2 likewise
// where one is F32 (four elements a step: 16-byte F32 and 8-byte 16-bit loads, all coalesced; two
// steps in flight a thread); 0 otherwise (an element a step; a and b indexed through their
// strides, 0 for a broadcast dimension).
// Bindings 0 dst, 1 a, 2 b. Push: the element count, each tensor's first element in its binding,
// dst's shape and a's and b's strides (4 dimensions, outermost first, padded with 1s and 0s).
#include "ops.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0u;
layout(constant_id = 1) const uint DT_DST = NU_F32;
layout(constant_id = 2) const uint DT_A = NU_F32;
layout(constant_id = 3) const uint DT_B = NU_F32;
layout(constant_id = 4) const uint FAST = 0u;
NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, a)
NU_TENSOR(readonly, 2, b)
layout(push_constant) uniform Push {
    uint count;
    uint first_dst, first_a, first_b;
    uvec4 shape;
    uvec4 stride_a, stride_b;
} pc;

float apply(float x, float y)
{
    if (OP == 0u) return x + y;
    if (OP == 1u) return x - y;
    if (OP == 2u) return x * y;
    return x / y;
}

void main()
{
    uint threads = nu_ops_threads();
    if (FAST == 2u) {
        uint units = pc.count / 4u;
        uint va = pc.first_a / 4u, vb = pc.first_b / 4u, vd = pc.first_dst / 4u;
        for (uint base = nu_ops_index(); base < units; base += 2u * threads) {
            float x[2][4], y[2][4];
            for (uint r = 0u; r < 2u; r++) {
                if (base + r * threads < units) {
                    NU_LOAD4(a, DT_A, va, base + r * threads, x[r])
                    NU_LOAD4(b, DT_B, vb, base + r * threads, y[r])
                }
            }
            for (uint r = 0u; r < 2u; r++) {
                if (base + r * threads < units) {
                    float z[4];
                    for (int k = 0; k < 4; k++)
                        z[k] = apply(x[r][k], y[r][k]);
                    NU_STORE4(dst, DT_DST, vd, base + r * threads, z)
                }
            }
        }
        uint i = units * 4u + nu_ops_index();
        if (i < pc.count) {
            float z = apply(NU_LOAD(a, DT_A, pc.first_a + i), NU_LOAD(b, DT_B, pc.first_b + i));
            NU_STORE(dst, DT_DST, pc.first_dst + i, z)
        }
        return;
    }
    if (FAST == 1u) {
        uint units = pc.count / 8u;
        uint va = nu_vbase(DT_A, pc.first_a), vb = nu_vbase(DT_B, pc.first_b), vd = nu_vbase(DT_DST, pc.first_dst);
        for (uint u = nu_ops_index(); u < units; u += threads) {
            float x[8], y[8], z[8];
            NU_LOAD8(a, DT_A, va, u, x)
            NU_LOAD8(b, DT_B, vb, u, y)
            for (int k = 0; k < 8; k++)
                z[k] = apply(x[k], y[k]);
            NU_STORE8(dst, DT_DST, vd, u, z)
        }
        // The last count % 8 elements, one a thread.
        uint i = units * 8u + nu_ops_index();
        if (i < pc.count) {
            float z = apply(NU_LOAD(a, DT_A, pc.first_a + i), NU_LOAD(b, DT_B, pc.first_b + i));
            NU_STORE(dst, DT_DST, pc.first_dst + i, z)
        }
        return;
    }
    for (uint i = nu_ops_index(); i < pc.count; i += threads) {
        uint r = i;
        uint i3 = r % pc.shape.w; r /= pc.shape.w;
        uint i2 = r % pc.shape.z; r /= pc.shape.z;
        uint i1 = r % pc.shape.y; uint i0 = r / pc.shape.y;
        uint ia = pc.first_a + i0 * pc.stride_a.x + i1 * pc.stride_a.y + i2 * pc.stride_a.z + i3 * pc.stride_a.w;
        uint ib = pc.first_b + i0 * pc.stride_b.x + i1 * pc.stride_b.y + i2 * pc.stride_b.z + i3 * pc.stride_b.w;
        float z = apply(NU_LOAD(a, DT_A, ia), NU_LOAD(b, DT_B, ib));
        NU_STORE(dst, DT_DST, pc.first_dst + i, z)
    }
}
