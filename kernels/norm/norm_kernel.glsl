// The kernel of norm.comp and norm_sg.comp: RMSNorm and LayerNorm along each row
// (nu_op_rms_norm, nu_op_layer_norm; nuvec/ops.h), one team of threads a row
// (kernels/reduce/reduce.glsl). Two reads of the row: the first sums x^2 (RMSNorm), or gives
// each thread the count, mean and sum of squared deviations of its own elements (per 8-element
// step: the step's mean and deviations, merged as Chan et al.'s pairwise update); the team
// then sums those into the row's mean and M2 = sum(M2_t + n_t (mean_t - mean)^2), so the
// variance never comes from E[x^2] - E[x]^2 (which cancels catastrophically for rows far from
// 0). The second read writes x * rstd * weight (RMSNorm) or (x - mean) * rstd * weight + bias.
// In place as softmax (kernels/reduce/softmax_kernel.glsl). MODE 3 (nu_op_add_rms_norm) is
// RMSNorm of s = x + b, b a second input of x's shape (binding 3): both reads add b, and the
// second also writes s to binding 4 (each element read before it is written, by the same
// thread, so s may replace x or b in place). MODE 4 (nu_op_norm_add_rms_norm) is MODE 3 with b
// first normalised by its own RMS and times its weight (binding 5): three reads, the first for
// b's sum of squares (each b element then as a nu_op_rms_norm of b would store it, so the sum is
// the separate ops' bit for bit).
//
// Specialisation constants (the host's defaults in src/ops/rows.c):
//   0 LOCAL    threads a workgroup, a power of two (256; 1024 for rows of 16384 or more)
//   1 ROWS     rows a workgroup (see kernels/reduce/reduce_kernel.glsl)
//   2 MODE     0 RMSNorm, 1 LayerNorm, 2 LayerNorm with bias, 3 RMSNorm of x + b (writing x + b),
//              4 RMSNorm of x + RMSNorm(b) * wb (writing that sum)
//   3 DTYPES   dtypes (ops.glsl codes) packed: dst | src << 4 | weight << 8 | bias << 12 | the
//              sum << 16 (MODE 3, 4: its own dtype, F32 under an F16 dst, say) | wb << 20 (MODE 4)
//   4 VEC      1: 16-byte loads and stores (src's and dst's rows contiguous, weight and bias
//              contiguous, each 16-byte aligned)
//   5 SUBGROUP 1: team reductions with subgroup arithmetic (norm_sg only)
//   6 UNROLL   8-element vector loads in flight per thread (2)
//   7 WB_VEC   MODE 4: 1 wb's 8-element loads as vectors (contiguous, 16-byte aligned); else
//              element by element through its stride (the rows still read as VEC says, so that
//              the sums of squares add in the same order as the separate ops')
// Bindings 0 dst (contiguous), 1 src, 2 weight, 3 bias (weight again without one; MODE 3, 4: b,
// contiguous, src's shape), 4 the sum (MODE 3, 4, contiguous, src's shape; dst otherwise), 5 wb
// (MODE 4; weight otherwise). Push: src's shape and strides (4 dimensions, outermost first; the
// last is the row), the row count, the row length, the first elements of src, dst, weight and bias
// in their bindings, the strides of weight and bias, eps, the sum's first element, wb's first
// element and stride.
#extension GL_EXT_shader_16bit_storage : require
#include "ops.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LOCAL = 256u;
layout(constant_id = 1) const uint ROWS = 1u;
layout(constant_id = 2) const uint MODE = 0u;
layout(constant_id = 3) const uint DTYPES = 0u;
layout(constant_id = 4) const uint VEC = 0u;
layout(constant_id = 5) const uint SUBGROUP = 0u;
layout(constant_id = 6) const uint UNROLL = 2u;
layout(constant_id = 7) const uint WB_VEC = 0u;
const uint DT_DST = DTYPES & 15u;
const uint DT_SRC = (DTYPES >> 4u) & 15u;
const uint DT_W = (DTYPES >> 8u) & 15u;
const uint DT_B = (DTYPES >> 12u) & 15u;
const uint DT_SUM = (DTYPES >> 16u) & 15u;
const uint DT_WB = (DTYPES >> 20u) & 15u;
const bool ADDS = MODE == 3u || MODE == 4u; // an addend b (the sum written)
NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, src)
NU_TENSOR(readonly, 2, w)
NU_TENSOR(readonly, 3, b)
NU_TENSOR(writeonly, 4, sum)
NU_TENSOR(readonly, 5, wb)
layout(push_constant) uniform Push {
    uvec4 shape, strides;
    uint rows, n, first_src, first_dst;
    uint first_w, first_b, stride_w, stride_b;
    float eps;
    uint first_sum;
    uint first_wb, stride_wb;
} pc;

void take8(uint pass, float x[8], uint i);
void take1(uint pass, float x, uint i);
#include "reduce/reduce.glsl"

float g_cnt, g_mean, g_m2; // this thread's elements (g_m2: the sum of x^2 for RMSNorm)
float g_rmean, g_rstd;     // the row's
float g_rstd_b;            // MODE 4: b's row's
uint g_dst;                // the row's first element in dst's binding
uint g_row;                // the row's first element in a contiguous tensor of src's shape (MODE 3: b, sum)

// Merges a group of c elements with mean m and squared deviations m2 into this thread's.
void merge(float c, float m, float m2)
{
    float t = g_cnt + c, d = m - g_mean;
    g_mean += d * (c / t);
    g_m2 += m2 + d * d * (g_cnt * c / t);
    g_cnt = t;
}

// The reads of a row: MODE 4's 0 (b's sum of squares), then every mode's 1 (the row's sums) and
// P_LAST (the writes).
const uint P_LAST = 2u;

void take8(uint pass, float x[8], uint i)
{
    if (ADDS) { // s = x + b (MODE 4: x + b * rstd_b * wb, b's normalised row as its own op stores it)
        float bx[8];
        NU_LOAD8(b, DT_B, nu_vbase(DT_B, pc.first_b + g_row), i / 8u, bx)
        if (MODE == 4u && pass == 0u) {
            precise float s = 0.0; // no fused multiply-adds: every mode sums squares alike
            for (uint k = 0u; k < 8u; k++)
                s += bx[k] * bx[k];
            g_m2 += s;
            return;
        }
        if (MODE == 4u) {
            float wbx[8];
            if (WB_VEC == 1u) {
                NU_LOAD8(wb, DT_WB, nu_vbase(DT_WB, pc.first_wb), i / 8u, wbx)
            } else {
                for (uint k = 0u; k < 8u; k++)
                    wbx[k] = NU_LOAD(wb, DT_WB, pc.first_wb + (i + k) * pc.stride_wb);
            }
            for (uint k = 0u; k < 8u; k++) {
                precise float z = (bx[k] - 0.0) * g_rstd_b * wbx[k];
                bx[k] = z;
            }
        }
        for (uint k = 0u; k < 8u; k++) {
            precise float s = x[k] + bx[k];
            x[k] = s;
        }
        if (pass == P_LAST)
            NU_STORE8(sum, DT_SUM, nu_vbase(DT_SUM, pc.first_sum + g_row), i / 8u, x)
    }
    if (pass != P_LAST) {
        if (MODE == 0u || ADDS) {
            precise float s = 0.0; // no fused multiply-adds: every mode sums squares alike
            for (uint k = 0u; k < 8u; k++)
                s += x[k] * x[k];
            g_m2 += s;
        } else {
            float m = (((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]))) * 0.125;
            float m2 = 0.0;
            for (uint k = 0u; k < 8u; k++)
                m2 += (x[k] - m) * (x[k] - m);
            merge(8.0, m, m2);
        }
        return;
    }
    float wx[8], z[8];
    NU_LOAD8(w, DT_W, nu_vbase(DT_W, pc.first_w), i / 8u, wx)
    if (MODE == 2u) {
        float bx[8];
        NU_LOAD8(b, DT_B, nu_vbase(DT_B, pc.first_b), i / 8u, bx)
        for (uint k = 0u; k < 8u; k++)
            z[k] = (x[k] - g_rmean) * g_rstd * wx[k] + bx[k];
    } else {
        for (uint k = 0u; k < 8u; k++)
            z[k] = (x[k] - g_rmean) * g_rstd * wx[k];
    }
    NU_STORE8(dst, DT_DST, nu_vbase(DT_DST, g_dst), i / 8u, z)
}

void take1(uint pass, float x, uint i)
{
    if (ADDS) { // s = x + b (MODE 4: x + b * rstd_b * wb)
        float bv = NU_LOAD(b, DT_B, pc.first_b + g_row + i);
        if (MODE == 4u && pass == 0u) {
            { precise float sq = bv * bv; g_m2 += sq; }
            return;
        }
        if (MODE == 4u) {
            precise float z = (bv - 0.0) * g_rstd_b * NU_LOAD(wb, DT_WB, pc.first_wb + i * pc.stride_wb);
            bv = z;
        }
        precise float s = x + bv;
        x = s;
        if (pass == P_LAST)
            NU_STORE(sum, DT_SUM, pc.first_sum + g_row + i, x)
    }
    if (pass != P_LAST) {
        if (MODE == 0u || ADDS)
            { precise float sq = x * x; g_m2 += sq; }
        else
            merge(1.0, x, 0.0);
        return;
    }
    float z = (x - g_rmean) * g_rstd * NU_LOAD(w, DT_W, pc.first_w + i * pc.stride_w);
    if (MODE == 2u)
        z += NU_LOAD(b, DT_B, pc.first_b + i * pc.stride_b);
    NU_STORE(dst, DT_DST, g_dst + i, z)
}

void main()
{
    uint groups = (pc.rows + ROWS - 1u) / ROWS;
    float n = float(pc.n);
    for (uint g = gl_WorkGroupID.x; g < groups; g += gl_NumWorkGroups.x) {
        uint row = g * ROWS + nu_team();
        bool live = row < pc.rows;
        uint first = live ? pc.first_src + nu_row_offset(row, pc.shape, pc.strides) : 0u;
        g_dst = pc.first_dst + row * pc.n;
        g_row = row * pc.n;
        g_cnt = 0.0;
        g_mean = 0.0;
        g_m2 = 0.0;
        if (MODE == 4u) { // b's RMS first
            if (live)
                nu_row_read(0u, first, pc.strides.w, pc.n);
            g_rstd_b = inversesqrt(nu_team_sum(g_m2) / n + pc.eps);
            g_m2 = 0.0;
        }
        if (live)
            nu_row_read(1u, first, pc.strides.w, pc.n);
        // Every thread reduces (barriers), live or not.
        if (MODE == 0u || ADDS) {
            g_rmean = 0.0;
            g_rstd = inversesqrt(nu_team_sum(g_m2) / n + pc.eps);
        } else {
            g_rmean = nu_team_sum(g_cnt * g_mean) / n;
            float d = g_mean - g_rmean;
            float m2 = nu_team_sum(g_m2 + g_cnt * d * d);
            g_rstd = inversesqrt(m2 / n + pc.eps);
        }
        if (live)
            nu_row_read(P_LAST, first, pc.strides.w, pc.n);
    }
}
