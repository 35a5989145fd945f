#version 450
// matmul_splits: dst = the sum of a split-K product's partials (+ bias[j]) (src/ops/matmul_tc.c:
// matmul_coopmat.comp with k split over workgroups writes `splits` F32 partial products of dst's
// count elements, one after another in binding 1). The partials are added in split order, so a
// result does not depend on the order the workgroups ran in.
//
// Specialisation constants: 0 DDT dst's dtype, 1 BIAS (1: add bias[j], binding 2), 2 BDT its
// dtype (ops.glsl codes); 3 LOCAL threads a workgroup. Bindings: 0 dst ([.., m, n], its columns
// contiguous, its rows and batches at their strides),
// 1 the partials (F32), 2 bias (the placeholder without one). Push: below; a thread an element,
// the grid's rows of 65535 workgroups at most (workgroup (x, y) takes x + y * 65535).
#include "ops.glsl"

layout(constant_id = 0) const uint DDT = NU_F32;
layout(constant_id = 1) const uint BIAS = 0u;
layout(constant_id = 2) const uint BDT = NU_F32;
layout(local_size_x = 256, local_size_x_id = 3) in;

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, part)
NU_TENSOR(readonly, 2, bias)
layout(push_constant) uniform Push {
    uint count;      // dst's elements (batches * m * n)
    uint n;          // a row's (bias[i % n])
    uint splits;
    uint first_dst;  // elements
    uint first_bias;
    uint m;          // a batch's rows
    uint dst_row, dst_batch; // dst's strides (elements)
} pc;

void main()
{
    uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= pc.count)
        return;
    float v = 0.0;
    for (uint s = 0u; s < pc.splits; s++)
        v += uintBitsToFloat(part_w[s * pc.count + i]);
    if (BIAS != 0u)
        v += NU_LOAD(bias, BDT, pc.first_bias + i % pc.n);
    uint row = i / pc.n, b = row / pc.m;
    NU_STORE(dst, DDT, pc.first_dst + b * pc.dst_batch + (row - b * pc.m) * pc.dst_row + (i - row * pc.n), v)
}
