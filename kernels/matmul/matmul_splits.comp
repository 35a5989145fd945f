#version 450
// matmul_splits: dst = the sum of a product's F32 partials (+ bias[j]), through a GLU where asked
// (src/ops/matmul_tc.c: matmul_coopmat.comp with k split over workgroups writes `splits` F32
// partial products, one after another in binding 1; a product with a GLU writes its one partial
// there too, from either kernel). The partials are added in split order, so a result does not
// depend on the order the workgroups ran in.
//
// GLU (nu_matmul_desc.glu_stacked): the product's n columns are [gate | up], dst's n / 2; dst's
// element j of a row is act(gate_j) * up_j with gate_j the sum at column j and up_j at column
// j + n / 2 (each with its bias), computed in F32 as nu_op_swiglu (SiLU) and nu_op_unary + nu_op_mul
// (GELU, tanh form) compute it.
//
// Specialisation constants: 0 DDT dst's dtype, 1 BIAS (1: add bias[j], binding 2), 2 BDT its
// dtype (ops.glsl codes); 3 LOCAL threads a workgroup; 4 GLU 0: none, 1: SiLU, 2: GELU (tanh);
// 5 VEC 1: four consecutive elements a thread, 16-byte loads of the partials and one vector store
// (dst's row a multiple of 4 elements, its first element, row and batch strides too: the host
// checks), else one.
// Bindings: 0 dst ([.., m, n], its columns contiguous, its rows and batches at their strides),
// 1 the partials (F32), 2 bias (the placeholder without one). Push: below; a thread an element of
// dst, the grid's rows of 65535 workgroups at most (workgroup (x, y) takes x + y * 65535).
#include "ops.glsl"
#include "elementwise/activation.glsl"

layout(constant_id = 0) const uint DDT = NU_F32;
layout(constant_id = 1) const uint BIAS = 0u;
layout(constant_id = 2) const uint BDT = NU_F32;
layout(constant_id = 4) const uint GLU = 0u;
layout(constant_id = 5) const uint VEC = 0u;
layout(local_size_x = 256, local_size_x_id = 3) in;

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, part)
NU_TENSOR(readonly, 2, bias)
layout(push_constant) uniform Push {
    uint count;      // dst's elements (batches * m * n)
    uint n;          // dst's row (the product's is 2n with a GLU)
    uint splits;
    uint first_dst;  // elements
    uint first_bias;
    uint m;          // a batch's rows
    uint dst_row, dst_batch; // dst's strides (elements)
    uint part_split; // a partial's elements (the product's: batches * m * n, or 2n a row)
} pc;

// The product's element at column j of row `row` (all batches' rows counted; rows of pn): its
// partials summed in split order, its bias added.
float sum_at(uint row, uint j, uint pn)
{
    uint at = row * pn + j;
    float v = 0.0;
    for (uint s = 0u; s < pc.splits; s++)
        v += uintBitsToFloat(part_w[s * pc.part_split + at]);
    if (BIAS != 0u)
        v += NU_LOAD(bias, BDT, pc.first_bias + j);
    return v;
}

// The same for columns j .. j + 3 (j a multiple of 4, as the row and the split).
vec4 sum4_at(uint row, uint j, uint pn)
{
    uint at = (row * pn + j) / 4u;
    vec4 v = vec4(0.0);
    for (uint s = 0u; s < pc.splits; s++)
        v += uintBitsToFloat(part_v[s * (pc.part_split / 4u) + at]);
    if (BIAS != 0u)
        for (uint e = 0u; e < 4u; e++)
            v[e] += NU_LOAD(bias, BDT, pc.first_bias + j + e);
    return v;
}

float glu(float g, float u) { return (GLU == 1u ? act_silu(g) : act_gelu_tanh(g)) * u; }

void main()
{
    uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (VEC == 1u) {
        if (4u * i >= pc.count)
            return;
        uint row = 4u * i / pc.n, j = 4u * i - row * pc.n, b = row / pc.m;
        float x[4];
        if (GLU == 0u) {
            vec4 v = sum4_at(row, j, pc.n);
            x = float[4](v.x, v.y, v.z, v.w);
        } else {
            vec4 g = sum4_at(row, j, 2u * pc.n), u = sum4_at(row, j + pc.n, 2u * pc.n);
            x = float[4](glu(g.x, u.x), glu(g.y, u.y), glu(g.z, u.z), glu(g.w, u.w));
        }
        NU_STORE4(dst, DDT, 0u, (pc.first_dst + b * pc.dst_batch + (row - b * pc.m) * pc.dst_row + j) / 4u, x)
        return;
    }
    if (i >= pc.count)
        return;
    uint row = i / pc.n, j = i - row * pc.n, b = row / pc.m;
    float v;
    if (GLU == 0u) {
        v = sum_at(row, j, pc.n);
    } else {
        v = glu(sum_at(row, j, 2u * pc.n), sum_at(row, j + pc.n, 2u * pc.n));
    }
    NU_STORE(dst, DDT, pc.first_dst + b * pc.dst_batch + (row - b * pc.m) * pc.dst_row + j, v)
}
