#version 450
// bench/probes/coopmat2_matmul.comp: the F16 product dst[m, n] = sum_k a[m, k] w[n, k] (F32
// accumulation, F32 dst) with VK_NV_cooperative_matrix2's workgroup-scope matrices and tensor
// addressing: one BM x BN tile a workgroup, k BK a step, the driver choosing how the tiles reach
// the matrix units (the question the probe asks: how close that comes to the hardware, against
// nu_op_matmul's VK_KHR_cooperative_matrix kernel). A throwaway measurement driven by
// bench/probes/coopmat2_matmul.c; m, n multiples of the tile, k of 8 * BK.
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 0) const uint BM = 128u;
layout(constant_id = 1) const uint BN = 128u;
layout(constant_id = 2) const uint BK = 32u;
layout(local_size_x = 256, local_size_x_id = 3) in;

layout(set = 0, binding = 0) buffer Dst { float dst[]; };
layout(set = 0, binding = 1) readonly buffer A { float16_t a[]; };
layout(set = 0, binding = 2) readonly buffer W { float16_t w[]; };
layout(push_constant) uniform Push { uint m, n, k; } pc;

void main()
{
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    // Row strides rounded down to a multiple of 8 halves (they are: m, n, k are multiples of the
    // tile): the compiler may then assume 16-byte aligned rows.
    uint k8 = pc.k & ~7u, n8 = pc.n & ~7u;
    tensorLayoutNV<2> ta = createTensorLayoutNV(2);
    ta = setTensorLayoutDimensionNV(ta, pc.m, pc.k);
    ta = setTensorLayoutStrideNV(ta, k8, 1);
    tensorLayoutNV<2> tw = createTensorLayoutNV(2);
    tw = setTensorLayoutDimensionNV(tw, pc.n, pc.k);
    tw = setTensorLayoutStrideNV(tw, k8, 1);
    tensorLayoutNV<2> td = createTensorLayoutNV(2);
    td = setTensorLayoutDimensionNV(td, pc.m, pc.n);
    td = setTensorLayoutStrideNV(td, n8, 1);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0); // w's [n, k] as [k, n]
    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
    // k in steps of 8 * BK, unrolled (k a multiple of it)
    for (uint k0 = 0u; k0 < pc.k; k0 += 8u * BK) {
        [[unroll]] for (uint j = 0u; j < 8u; j++) {
            coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;
            coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
            coopMatLoadTensorNV(ma, a, 0, sliceTensorLayoutNV(ta, m0, BM, k0 + j * BK, BK));
            coopMatLoadTensorNV(mb, w, 0, sliceTensorLayoutNV(tw, n0, BN, k0 + j * BK, BK), transposed);
            acc = coopMatMulAdd(ma, mb, acc);
        }
    }
    coopMatStoreTensorNV(acc, dst, 0, sliceTensorLayoutNV(td, m0, BM, n0, BN));
}
