#version 450
// bench/probes/coopmat_peak.comp: the matrix units' rate through VK_KHR_cooperative_matrix, and
// what each ingredient of a product kernel costs (bench/probes/coopmat_peak.c runs it). A workgroup
// of 8 subgroups; each subgroup keeps 4 x 2 accumulators of 16 x 16 F32 and, per step, does 2 x 8
// products 16x16x16 F16 x F16 + F32, as kernels/matmul/matmul_coopmat.comp's default tile does.
// MODE bits (specialisation constant 0), added one at a time to grow the probe toward the kernel:
//   1  load the A and B matrices from shared memory every step (rows STRIDE halves apart)
//   2  a workgroup barrier before and after the products of every step
//   4  every thread stores 8 halves into the shared rows the products read, every step
//   8  every thread loads 16 bytes from a storage buffer every step (what it stores with 4)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0u;
layout(constant_id = 1) const uint STRIDE = 40u;
layout(binding = 0) buffer Out { float o[]; };
layout(binding = 1) buffer In { uvec4 src[]; };
layout(push_constant) uniform Push { uint steps; } pc;
shared float16_t sh[256u * 40u];

void main()
{
    uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, wm = sg / 4u, wn = sg % 4u;
    for (uint i = tid; i < 256u * 40u; i += 256u)
        sh[i] = float16_t(float(i % 7u) * 0.01);
    barrier();
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[4];
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[2];
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[8];
    [[unroll]] for (uint i = 0u; i < 8u; i++)
        acc[i] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        coopMatLoad(fa[i], sh, (wm * 64u + 16u * i) * STRIDE, STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    [[unroll]] for (uint j = 0u; j < 2u; j++)
        coopMatLoad(fb[j], sh, (128u + wn * 32u + 16u * j) * STRIDE, STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
    for (uint s = 0u; s < pc.steps; s++) {
        uvec4 v = uvec4(s);
        if ((MODE & 8u) != 0u)
            v = src[(gl_WorkGroupID.x * 64u + s * 256u + tid) % 65536u];
        if ((MODE & 4u) != 0u) {
            uint at = (128u + tid / 4u) * STRIDE + (tid % 4u) * 8u;
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                f16vec2 h = unpackFloat2x16(v[j]);
                sh[at + 2u * j] = h.x;
                sh[at + 2u * j + 1u] = h.y;
            }
        }
        if ((MODE & 2u) != 0u)
            barrier();
        [[unroll]] for (uint kk = 0u; kk < 32u; kk += 16u) {
            if ((MODE & 1u) != 0u) {
                [[unroll]] for (uint i = 0u; i < 4u; i++)
                    coopMatLoad(fa[i], sh, (wm * 64u + 16u * i) * STRIDE + kk, STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint j = 0u; j < 2u; j++)
                    coopMatLoad(fb[j], sh, (128u + wn * 32u + 16u * j) * STRIDE + kk, STRIDE,
                                gl_CooperativeMatrixLayoutColumnMajor);
            }
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                [[unroll]] for (uint j = 0u; j < 2u; j++)
                    acc[i * 2u + j] = coopMatMulAdd(fa[i], fb[j], acc[i * 2u + j]);
        }
        if ((MODE & 2u) != 0u)
            barrier();
    }
    [[unroll]] for (uint i = 1u; i < 8u; i++)
        acc[0] = acc[0] + acc[i];
    coopMatStore(acc[0], o, (gl_WorkGroupID.x * 8u + sg) * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
}
