// matvec: dst[m, n] = sum_k x[m, k] * weight[n, k] (nu_op_matvec, nuvec/ops.h): weight [N, K]
// row-major ([out, in], as weight files store it) of F32, F16, BF16 or a block dtype; x [M, K] float
// with 1 <= M <= 8; dst [M, N] float; F32 accumulation. The op of LLM decode: it must read the
// weights at the memory's speed, once for all M rows of x.
//
// Layout of the work: each workgroup computes ROWS consecutive rows n of the weight (all M
// outputs of each), looping over row groups with the grid's stride. Its LOCAL threads split K in
// "units" of 8 consecutive elements, consecutive threads taking consecutive units so
// that a subgroup's loads are contiguous; each thread issues the loads of UNROLL units of each of
// the ROWS rows before using any (UNROLL * ROWS independent loads in flight), dequantizes in
// registers and accumulates ROWS * M F32 sums, reading each unit of x once for all ROWS rows.
// The sums are reduced over the workgroup: subgroupAdd then shared memory across subgroups
// (FLAGS bit 0), or a shared-memory tree where subgroup arithmetic is missing.
//   F32 / F16 / BF16, FLAGS bit 1 set (rows 16-byte aligned, stride 1): a unit is 16-byte loads,
//     two uvec4 of F32 or one of 8 halves; K % 8 elements of tail by the general loop.
//   F32 / F16 / BF16, bit 1 clear (unaligned rows, any strides, e.g. a pad or a transposed view):
//     the general loop, an element a thread, consecutive threads consecutive k.
//   Block dtypes: a unit is a group of a block (8 consecutive elements sharing their scales: 4 a
//     32-element block, 32 a 256-element super-block), decoded by kernels/quant.glsl into 8 quant
//     bytes and (D, M): its bytes read as 32-bit words (a funnel shift where a block's parity puts
//     them at a 2-byte boundary), its scales by the few threads of the block alike (from L1); a
//     nibble format's low and high nibbles are different units reading the same bytes, so that a
//     subgroup's x loads stay contiguous. D * sum(x * (q + offset)) (+ M * sum(x) for the formats
//     with a minimum) a unit.
//   x: FLAGS bit 2 set (rows stride 1, 16-byte aligned, row stride a multiple of 16 bytes): 16-byte
//     loads of 8 elements (x is small and stays in L1/L2); clear: element loads through strides.
//
// Fused forms (nu_op_matvec_fused, FUSE below; FUSE 0 compiles to the plain product):
//   norm (RMSNorm of x): the loop that reads every element of x once per row group also sums
//     x^2 (M more sums in the reduction); x * norm_weight goes into the product and the epilogue
//     multiplies each sum by s_m = 1 / sqrt(sum_m / K + eps) (the product is linear in x).
//   glu: each row group computes its ROWS rows of the gate (weight) and the same rows of up
//     (binding 4): twice the loads in flight and the sums; the epilogue stores act(g) * u, act
//     SiLU or GELU (tanh approximation) by FUSE bit 3 (kernels/elementwise/activation.glsl's).
//   bias: the epilogue adds bias[n] (binding 6) to the gate's (the product's) sum, before the
//     GLU and the residual.
//   residual: the epilogue adds residual[m, n] (binding 5; it may be dst itself: the thread that
//     stores an element has read it first).
//
// Specialisation constants (the tuning knobs; src/ops/matvec.c picks the defaults, nu_matvec_desc's
// tune and NUVEC_MATVEC over it override them: docs/knobs.md):
//   0 WDT     weight dtype (ops.glsl code: a float or block dtype)
//   1 XDT     x dtype (ops.glsl code)
//   2 DDT     dst dtype (ops.glsl code)
//   3 M       rows of x (1..8; the compile-time bound of the m loops)
//   4 LOCAL   threads per workgroup (local_size_x), a power of two 32..1024; default 128
//   5 ROWS    weight rows per workgroup (1..8); default 2 (float weights, M <= 2), else 4:
//             each x load serves ROWS rows (x's bytes from L1 are M * 32 per unit of F32 x,
//             against 16 of F16 weights and 8.5 or 4.5 of Q8_0 / Q4_0: block weights and larger
//             M need the reuse), and more rows put more loads in flight; fewer rows give more
//             workgroups for short N
//   6 UNROLL  units per thread per row in flight (1..8); default 8 / ROWS (4 or 2), half that
//             for F32 weights (two uvec4 a unit)
//   7 FLAGS   bit 0: subgroup arithmetic (host: NU_SUBGROUP_ARITHMETIC and a subgroup of at least
//             8 threads); bit 1: float weights' vector path (weight's and glu_up's rows);
//             bit 2: x's vector path; bit 3: norm_weight's vector path (stride 1, 16-byte aligned)
//   8 FUSE    bit 0: norm, bit 1: glu, bit 2: residual, bit 3: GELU (tanh) as the GLU's
//             activation (else SiLU), bit 4: bias
//   9 NDT     norm_weight's dtype (ops.glsl code)
//  10 RDT     residual's dtype (ops.glsl code)
//  11 BDT     bias's dtype (ops.glsl code)
// Bindings: 0 dst, 1 weight, 2 x, 3 norm_weight, 4 glu_up, 5 residual, 6 bias (the host binds x
// again where a fused input is absent). Push: see Push below (first elements in their bindings:
// elements of float tensors, 16-bit halves of block ones; weight rows' strides likewise).
// Two modules are built from this body: matvec.comp without subgroup operations and matvec_sg.comp
// with them (NU_MATVEC_SUBGROUPS), because a module declaring the subgroup-arithmetic capability
// must not be created on a device without it; FLAGS bit 0 then chooses within matvec_sg.
#ifdef NU_MATVEC_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif
#include "ops.glsl"
#include "elementwise/activation.glsl"

layout(constant_id = 0) const uint WDT = NU_F16;
layout(constant_id = 1) const uint XDT = NU_F32;
layout(constant_id = 2) const uint DDT = NU_F32;
layout(constant_id = 3) const uint M = 1u;
layout(constant_id = 5) const uint ROWS = 2u;
layout(constant_id = 6) const uint UNROLL = 4u;
layout(constant_id = 7) const uint FLAGS = 0u;
layout(constant_id = 8) const uint FUSE = 0u;
layout(constant_id = 9) const uint NDT = NU_F32;
layout(constant_id = 10) const uint RDT = NU_F32;
layout(constant_id = 11) const uint BDT = NU_F32;
layout(local_size_x = 128, local_size_x_id = 4) in; // LOCAL, constant 4
const uint LOCAL = gl_WorkGroupSize.x;

#ifdef NU_MATVEC_SUBGROUPS
const bool SUBGROUP = (FLAGS & 1u) != 0u;
#else
const bool SUBGROUP = false;
#endif
const bool WVEC = (FLAGS & 2u) != 0u;
const bool XVEC = (FLAGS & 4u) != 0u;
const bool GVEC = (FLAGS & 8u) != 0u;
const bool NORM = (FUSE & 1u) != 0u;
const bool GLU = (FUSE & 2u) != 0u;
const bool RESID = (FUSE & 4u) != 0u;
const bool GELU = (FUSE & 8u) != 0u;
const bool BIAS = (FUSE & 16u) != 0u;
const bool QUANT = NU_IS_BLOCK(WDT);
const uint GPB = NU_BLOCK_ELEMENTS(WDT) / 8u; // groups (units) a block
const uint HPB = NU_BLOCK_HALVES(WDT);        // halves a block
const uint RM = ROWS * M;
const uint WR = GLU ? 2u * ROWS : ROWS; // rows loaded a row group: gate rows, then up rows
const uint AM = WR * M;                 // the product's sums: (gate, then up) row r, x row m at r * M + m
const uint NS = AM + (NORM ? M : 0u);   // sums reduced: the products', then x's sums of squares
// The reduction's shared memory: one float per thread and sum (tree), or per subgroup and sum
// (the host uses that path only with subgroups of at least 8 threads).
const uint RED = SUBGROUP ? NS * (LOCAL / 8u) : NS * LOCAL;
shared float red[RED];

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, w)
NU_TENSOR(readonly, 2, x)
NU_TENSOR(readonly, 3, g)
NU_TENSOR(readonly, 4, up)
NU_TENSOR(readonly, 5, res)
NU_TENSOR(readonly, 6, bias)
#define NU_QB w
#include "quant.glsl"
#define NU_QB up
#include "quant.glsl"
layout(push_constant) uniform Push {
    uint n, k;              // N and K
    uint first_w;           // weight's first element (halves for block dtypes)
    uint w_row, w_col;      // weight's strides (elements; w_row in halves for block dtypes)
    uint first_x;
    uint x_row, x_col;      // x's strides (elements)
    uint first_dst;         // dst is contiguous [M, N]
    uint first_up, up_row, up_col; // glu_up's, as weight's
    uint first_g, g_col;    // norm_weight's first element and stride
    uint first_res, res_row, res_col;
    float eps;              // norm_eps
    uint first_bias, bias_col;
} pc;

float x_load(uint m, uint kk) { return NU_LOAD(x, XDT, pc.first_x + m * pc.x_row + kk * pc.x_col); }

// Eight elements of x's row m from k0 (a multiple of 8).
void x_load8(uint m, uint k0, out float v[8])
{
    if (XVEC) {
        uint e = pc.first_x + m * pc.x_row + k0; // 16-byte aligned: see FLAGS bit 2
        if (XDT == NU_F32)
            nu_unpack8(XDT, x_v[e / 4u], x_v[e / 4u + 1u], v);
        else
            nu_unpack8(XDT, x_v[e / 8u], uvec4(0u), v);
    } else {
        for (uint i = 0u; i < 8u; i++)
            v[i] = x_load(m, k0 + i);
    }
}

// Eight elements of norm_weight from k0 (a multiple of 8).
void g_load8(uint k0, out float v[8])
{
    if (GVEC) {
        uint e = pc.first_g + k0; // 16-byte aligned: see FLAGS bit 3
        if (NDT == NU_F32)
            nu_unpack8(NDT, g_v[e / 4u], g_v[e / 4u + 1u], v);
        else
            nu_unpack8(NDT, g_v[e / 8u], uvec4(0u), v);
    } else {
        for (uint i = 0u; i < 8u; i++)
            v[i] = NU_LOAD(g, NDT, pc.first_g + (k0 + i) * pc.g_col);
    }
}

// A unit's raw weights: float: p (and q for F32); block: p.xy the group's 8 quant bytes, p.zw
// its (D, M) as bits.
struct Raw { uvec4 p, q; };

// The loads of a weight binding B (w: the weight, up: glu_up) whose first element and strides
// are FIRST, ROW, COL: one body for both, the binding being part of every access.
#define MV_WEIGHT_LOADS(B, FIRST, ROW, COL)                                                     \
    Raw B##_load_unit(uint row, uint u)                                                         \
    {                                                                                           \
        Raw r;                                                                                  \
        r.q = uvec4(0u);                                                                        \
        if (QUANT) {                                                                            \
            uvec2 q;                                                                            \
            vec2 dm;                                                                            \
            B##_group(WDT, FIRST + row * ROW + (u / GPB) * HPB, u % GPB, q, dm);               \
            r.p = uvec4(q, floatBitsToUint(dm));                                                \
        } else if (WDT == NU_F32) {                                                             \
            uint v = (FIRST + row * ROW) / 4u + 2u * u;                                         \
            r.p = B##_v[v];                                                                     \
            r.q = B##_v[v + 1u];                                                                \
        } else {                                                                                \
            r.p = B##_v[(FIRST + row * ROW) / 8u + u];                                          \
        }                                                                                       \
        return r;                                                                               \
    }                                                                                           \
    /* Element (row, kk) of a float dtype through its strides (the general path). */           \
    float B##_load(uint row, uint kk) { return NU_LOAD(B, WDT, FIRST + row * ROW + kk * COL); }
MV_WEIGHT_LOADS(w, pc.first_w, pc.w_row, pc.w_col)
MV_WEIGHT_LOADS(up, pc.first_up, pc.up_row, pc.up_col)

// Row group row j of the WR loaded: gate (weight) rows first, then up rows.
Raw load_row_unit(uint j, uint row, uint u) { return GLU && j >= ROWS ? up_load_unit(row, u) : w_load_unit(row, u); }
float load_row(uint j, uint row, uint kk) { return GLU && j >= ROWS ? up_load(row, kk) : w_load(row, kk); }

// Unit u's 8 weights as floats, and the (scale, minimum) they take: block dtypes' quants plus
// their offset (exact small integers: quant.glsl's nu_q_floats) and (D, M), the sum over the unit
// being scaled once; float dtypes' values and (1, 0).
vec2 unpack_unit(Raw r, out float v[8])
{
    if (QUANT) {
        nu_q_floats(WDT, r.p.xy, v);
        return uintBitsToFloat(r.p.zw);
    }
    nu_unpack8(WDT, r.p, r.q, v);
    return vec2(1.0, 0.0);
}

// The GLU's activation of the gate's sum.
float activate(float v) { return GELU ? act_gelu_tanh(v) : act_silu(v); }

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint groups = (pc.n + ROWS - 1u) / ROWS;
    // Units on the fast path (every k for block dtypes; K / 8 for float vector rows; none on the
    // general path) and the first k the general loop covers.
    uint units = QUANT || WVEC ? pc.k / 8u : 0u;
    uint tail = QUANT ? pc.k : units * 8u;
    for (uint grp = gl_WorkGroupID.x; grp < groups; grp += gl_NumWorkGroups.x) {
        uint n0 = grp * ROWS;
        uint rows[ROWS];
        for (uint r = 0u; r < ROWS; r++)
            rows[r] = min(n0 + r, pc.n - 1u); // rows past N repeat the last (not stored)
        float acc[NS]; // the products' sums, then (NORM) x's sums of squares
        for (uint i = 0u; i < NS; i++)
            acc[i] = 0.0;

        for (uint u0 = tid; u0 < units; u0 += LOCAL * UNROLL) {
            Raw raw[UNROLL * WR];
            for (uint j = 0u; j < UNROLL; j++) {
                uint u = u0 + j * LOCAL;
                for (uint r = 0u; r < WR; r++)
                    if (u < units)
                        raw[j * WR + r] = load_row_unit(r, rows[r % ROWS], u);
            }
            for (uint j = 0u; j < UNROLL; j++) {
                uint u = u0 + j * LOCAL;
                if (u >= units)
                    break;
                float wv[WR][8];
                vec2 scale[WR];
                for (uint r = 0u; r < WR; r++)
                    scale[r] = unpack_unit(raw[j * WR + r], wv[r]);
                uint k0 = u * 8u;
                float gv[8];
                if (NORM)
                    g_load8(k0, gv);
                for (uint m = 0u; m < M; m++) {
                    float xv[8];
                    x_load8(m, k0, xv);
                    if (NORM)
                        for (int i = 0; i < 8; i++) {
                            acc[AM + m] = fma(xv[i], xv[i], acc[AM + m]);
                            xv[i] *= gv[i];
                        }
                    float xsum = 0.0; // sum(x) of the unit, for the formats' minimum
                    if (QUANT && nu_q_has_min(WDT))
                        for (int i = 0; i < 8; i++)
                            xsum += xv[i];
                    for (uint r = 0u; r < WR; r++) {
                        float s = QUANT ? 0.0 : acc[r * M + m];
                        for (int i = 0; i < 8; i++)
                            s = fma(wv[r][i], xv[i], s);
                        if (QUANT) { // acc + D s (+ M sum(x))
                            s = fma(scale[r].x, s, acc[r * M + m]);
                            if (nu_q_has_min(WDT))
                                s = fma(scale[r].y, xsum, s);
                        }
                        acc[r * M + m] = s;
                    }
                }
            }
        }
        // The general path and the float vector path's tail: an element a thread.
        if (!QUANT) {
            for (uint kk = tail + tid; kk < pc.k; kk += LOCAL) {
                float wr[WR];
                for (uint r = 0u; r < WR; r++)
                    wr[r] = load_row(r, rows[r % ROWS], kk);
                float ge = NORM ? NU_LOAD(g, NDT, pc.first_g + kk * pc.g_col) : 1.0;
                for (uint m = 0u; m < M; m++) {
                    float xe = x_load(m, kk);
                    if (NORM) {
                        acc[AM + m] = fma(xe, xe, acc[AM + m]);
                        xe *= ge;
                    }
                    for (uint r = 0u; r < WR; r++)
                        acc[r * M + m] = fma(wr[r], xe, acc[r * M + m]);
                }
            }
        }

        // Reduce the NS sums over the workgroup; thread i < RM finishes output i (row i / M of
        // the group, x row i % M) from sums i, (GLU) RM + i and (NORM) AM + i % M.
        float total = 0.0, up_total = 0.0, ss = 0.0;
#ifdef NU_MATVEC_SUBGROUPS
        if (SUBGROUP) {
            uint nsg = gl_NumSubgroups;
            for (uint i = 0u; i < NS; i++) {
                float s = subgroupAdd(acc[i]);
                if (subgroupElect())
                    red[i * (LOCAL / 8u) + gl_SubgroupID] = s;
            }
            barrier();
            if (tid < RM)
                for (uint i = 0u; i < nsg; i++) {
                    total += red[tid * (LOCAL / 8u) + i];
                    if (GLU)
                        up_total += red[(RM + tid) * (LOCAL / 8u) + i];
                    if (NORM)
                        ss += red[(AM + tid % M) * (LOCAL / 8u) + i];
                }
        } else
#endif
        {
            for (uint i = 0u; i < NS; i++)
                red[i * LOCAL + tid] = acc[i];
            barrier();
            for (uint half_ = LOCAL / 2u; half_ > 0u; half_ >>= 1u) {
                if (tid < half_)
                    for (uint i = 0u; i < NS; i++)
                        red[i * LOCAL + tid] += red[i * LOCAL + tid + half_];
                barrier();
            }
            if (tid < RM) {
                total = red[tid * LOCAL];
                if (GLU)
                    up_total = red[(RM + tid) * LOCAL];
                if (NORM)
                    ss = red[(AM + tid % M) * LOCAL];
            }
        }
        if (tid < RM) {
            uint r = tid / M, m = tid % M;
            if (n0 + r < pc.n) {
                if (NORM) { // the product of the normalised x: linear in x
                    float s = inversesqrt(ss / float(pc.k) + pc.eps);
                    total *= s;
                    up_total *= s;
                }
                if (BIAS)
                    total += NU_LOAD(bias, BDT, pc.first_bias + (n0 + r) * pc.bias_col);
                if (GLU)
                    total = activate(total) * up_total;
                if (RESID)
                    total += NU_LOAD(res, RDT, pc.first_res + m * pc.res_row + (n0 + r) * pc.res_col);
                NU_STORE(dst, DDT, pc.first_dst + m * pc.n + n0 + r, total)
            }
        }
        barrier(); // red is reused by the next row group
    }
}
