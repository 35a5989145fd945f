#version 450
// coopmat_layout: which element of a 16 x 16 matrix each lane's fragment element holds, for the
// F16 A operand and the F32 accumulator of VK_KHR_cooperative_matrix at subgroup scope (the
// extension leaves that mapping to the driver). One subgroup of 32 loads two index-valued matrices
// (element (r, c) = 16 r + c, exact in F16) from shared memory, row-major, and writes what each
// lane's element i holds. src/ops/op.c (nu__op_fragment_layout) runs it once a device and compares
// the result with the layout that kernels reading fragment elements by index assume (NVIDIA's
// mma.m16n8k16: lane t, element i holds row t / 4 + 8 ((i >> 2) & 1), column 2 (t % 4) + (i & 1) +
// 8 ((i >> 1) & 1)).
// Binding 0: out, floats: [0] A's length a lane, [1] the accumulator's, then 32 x 16 of A's
// elements (lane major; elements past the length unwritten), then 32 x 16 of the accumulator's.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x = 32) in;
layout(std430, binding = 0) writeonly buffer Out { float o[]; };

shared float16_t index_a[256];
shared float index_c[256];

void main()
{
    uint lane = gl_LocalInvocationID.x;
    for (uint e = lane; e < 256u; e += 32u) {
        index_a[e] = float16_t(e);
        index_c[e] = float(e);
    }
    barrier();
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c;
    coopMatLoad(a, index_a, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(c, index_c, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    if (lane == 0u) {
        o[0] = float(a.length());
        o[1] = float(c.length());
    }
    for (int i = 0; i < a.length() && i < 16; i++)
        o[2u + lane * 16u + uint(i)] = float(a[i]);
    for (int i = 0; i < c.length() && i < 16; i++)
        o[2u + 512u + lane * 16u + uint(i)] = c[i];
}
