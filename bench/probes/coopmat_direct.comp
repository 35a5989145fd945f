#version 450
// bench/probes/coopmat_direct.comp: a matrix product whose subgroups load their cooperative-matrix
// fragments straight from the storage buffers (no shared memory, no barriers), the next 16-deep
// slice of k in flight while the current one multiplies. A throwaway probe of one question: does
// the route through shared memory (register staging, stores, two barriers a step) cost
// nu_op_matmul's kernel more than loads through L1 would? bench/probes/coopmat_direct.c times it.
//   dst[i, j] = sum_k a[i, k] * w[j, k]; a M x K, w N x K, F16 rows; dst F32; whole tiles only.
// Compile-time switches (-D): FM, FN fragments a subgroup (rows, columns), WM, WN subgroups a
// workgroup; AS 1: a's rows of the workgroup's tile staged in shared memory 64 k at a time (w's
// still straight from the buffer), 0: both straight.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#ifndef FM
#define FM 4
#endif
#ifndef FN
#define FN 4
#endif
#ifndef WM
#define WM 2
#endif
#ifndef WN
#define WN 2
#endif
#ifndef AS
#define AS 0
#endif
layout(local_size_x = WM * WN * 32) in;
layout(binding = 0) writeonly buffer Dst { float dst[]; };
layout(binding = 1) readonly buffer A { uvec4 a[]; };
layout(binding = 2) readonly buffer W { uvec4 w[]; };
layout(push_constant) uniform Push { uint m, n, k; } pc;
#define FA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
const uint BM = WM * FM * 16, BN = WN * FN * 16;
#if AS
const uint SK = 64, SROW = (SK + 8) / 8; // a's staged rows: 64 halves + 8 of padding, as uvec4
shared uvec4 sa[2][BM * SROW];
#endif

void main()
{
    uint sg = gl_SubgroupID, wm = sg / WN, wn = sg % WN;
    uint m0 = gl_WorkGroupID.y * BM + wm * FM * 16, n0 = gl_WorkGroupID.x * BN + wn * FN * 16;
    uint kr = pc.k / 8; // a row in uvec4
    ACC acc[FM][FN];
    [[unroll]] for (uint i = 0; i < FM; i++)
        [[unroll]] for (uint j = 0; j < FN; j++)
            acc[i][j] = ACC(0.0);
    FA fa0[FM], fa1[FM];
    FB fb0[FN], fb1[FN];
#if AS
    uint mw = gl_WorkGroupID.y * BM, arow = wm * FM * 16;
    const uint UNITS = BM * SK / 8; // uvec4 a stage
    uvec4 stage[(UNITS + WM * WN * 32 - 1) / (WM * WN * 32)];
#define STAGE_LOAD(k0) \
    [[unroll]] for (uint u = 0; u < stage.length(); u++) { \
        uint e = gl_LocalInvocationID.x + u * WM * WN * 32; \
        if (e < UNITS) stage[u] = a[(mw + e / (SK / 8)) * kr + (k0) / 8 + e % (SK / 8)]; \
    }
#define STAGE_STORE(b) \
    [[unroll]] for (uint u = 0; u < stage.length(); u++) { \
        uint e = gl_LocalInvocationID.x + u * WM * WN * 32; \
        if (e < UNITS) sa[b][(e / (SK / 8)) * SROW + e % (SK / 8)] = stage[u]; \
    }
#define LOADA(f, kk) \
    [[unroll]] for (uint i = 0; i < FM; i++) \
        coopMatLoad(f[i], sa[buf], (arow + 16 * i) * SROW + ((kk) % SK) / 8, SROW, gl_CooperativeMatrixLayoutRowMajor);
#else
#define LOADA(f, kk) \
    [[unroll]] for (uint i = 0; i < FM; i++) \
        coopMatLoad(f[i], a, (m0 + 16 * i) * kr + (kk) / 8, kr, gl_CooperativeMatrixLayoutRowMajor);
#endif
#define LOADB(f, kk) \
    [[unroll]] for (uint j = 0; j < FN; j++) \
        coopMatLoad(f[j], w, (n0 + 16 * j) * kr + (kk) / 8, kr, gl_CooperativeMatrixLayoutColumnMajor);
#define MMA(fa, fb) \
    [[unroll]] for (uint i = 0; i < FM; i++) \
        [[unroll]] for (uint j = 0; j < FN; j++) \
            acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
#if AS
    uint buf = 0;
    STAGE_LOAD(0)
    STAGE_STORE(0)
    barrier();
    for (uint k0 = 0; k0 < pc.k; k0 += SK) {
        buf = (k0 / SK) & 1;
        if (k0 + SK < pc.k) { STAGE_LOAD(k0 + SK) }
        LOADB(fb0, k0)
        [[unroll]] for (uint kk = 0; kk < SK; kk += 32) {
            LOADA(fa0, kk)
            LOADB(fb1, k0 + kk + 16)
            MMA(fa0, fb0)
            LOADA(fa1, kk + 16)
            if (kk + 32 < SK) { LOADB(fb0, k0 + kk + 32) }
            MMA(fa1, fb1)
        }
        if (k0 + SK < pc.k) { STAGE_STORE(buf ^ 1) }
        barrier();
    }
#else
    LOADA(fa0, 0)
    LOADB(fb0, 0)
    for (uint k0 = 0; k0 < pc.k; k0 += 32) {
        LOADA(fa1, k0 + 16)
        LOADB(fb1, k0 + 16)
        MMA(fa0, fb0)
        if (k0 + 32 < pc.k) {
            LOADA(fa0, k0 + 32)
            LOADB(fb0, k0 + 32)
        }
        MMA(fa1, fb1)
    }
#endif
    [[unroll]] for (uint i = 0; i < FM; i++)
        [[unroll]] for (uint j = 0; j < FN; j++)
            coopMatStore(acc[i][j], dst, (m0 + 16 * i) * pc.n + n0 + 16 * j, pc.n, gl_CooperativeMatrixLayoutRowMajor);
}
