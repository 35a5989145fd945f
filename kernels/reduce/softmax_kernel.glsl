// The kernel of softmax.comp and softmax_sg.comp: dst = softmax(scale * src) along each row
// (nu_op_softmax, nuvec/ops.h), one team of threads a row (reduce.glsl). Two reads of the row:
// the first keeps, per thread, the running maximum m and the sum s of e^(y - m) (rescaled when
// m grows, once per 8 elements), merged over the team as M = max m, S = sum s e^(m - M); the
// second writes e^(y - M) / S. Subtracting the row's maximum keeps every e^ in range; a row of
// +-80 scaled values is fine. In place (dst the same view as src): each element is read for
// the second time and written by the same thread, after every thread's first read (the team
// reductions' barriers).
//
// Specialisation constants (the host's defaults in src/ops/rows.c):
//   0 LOCAL    threads a workgroup, a power of two (256; 1024 for rows of 16384 or more)
//   1 ROWS     rows a workgroup (see reduce_kernel.glsl)
//   2 DT_SRC, 3 DT_DST   dtypes (ops.glsl codes)
//   4 VEC      1: 16-byte loads and stores (src's and dst's rows contiguous, 16-byte aligned)
//   5 SUBGROUP 1: team reductions with subgroup arithmetic (softmax_sg only)
//   6 UNROLL   8-element vector loads in flight per thread (2)
// Bindings 0 dst (contiguous), 1 src. Push: src's shape and strides (4 dimensions, outermost
// first; the last is the row), the row count, the row length, the first elements of src and
// dst in their bindings, the scale.
#extension GL_EXT_shader_16bit_storage : require
#include "ops.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LOCAL = 256u;
layout(constant_id = 1) const uint ROWS = 1u;
layout(constant_id = 2) const uint DT_SRC = NU_F32;
layout(constant_id = 3) const uint DT_DST = NU_F32;
layout(constant_id = 4) const uint VEC = 0u;
layout(constant_id = 5) const uint SUBGROUP = 0u;
layout(constant_id = 6) const uint UNROLL = 2u;
NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, src)
layout(push_constant) uniform Push {
    uvec4 shape, strides;
    uint rows, n, first_src, first_dst;
    float scale;
} pc;

void take8(uint pass, float x[8], uint i);
void take1(uint pass, float x, uint i);
#include "reduce/reduce.glsl"

const float NEG_INF = -1.0 / 0.0;
float g_m, g_s, g_max, g_inv;
uint g_dst; // the row's first element in dst's binding

// Adds e^(y - m) for the values y of a step whose largest is ymax, rescaling s to the new m.
float rescale(float ymax)
{
    float m = max(g_m, ymax);
    g_s = g_s == 0.0 ? 0.0 : g_s * exp(g_m - m);
    g_m = m;
    return m;
}

void take8(uint pass, float x[8], uint i)
{
    if (pass == 0u) {
        float y[8];
        for (uint k = 0u; k < 8u; k++)
            y[k] = pc.scale * x[k];
        float ymax = max(max(max(y[0], y[1]), max(y[2], y[3])), max(max(y[4], y[5]), max(y[6], y[7])));
        float m = rescale(ymax);
        float t = 0.0;
        for (uint k = 0u; k < 8u; k++)
            t += exp(y[k] - m);
        g_s += t;
    } else {
        float z[8];
        for (uint k = 0u; k < 8u; k++)
            z[k] = exp(pc.scale * x[k] - g_max) * g_inv;
        NU_STORE8(dst, DT_DST, nu_vbase(DT_DST, g_dst), i / 8u, z)
    }
}

void take1(uint pass, float x, uint i)
{
    float y = pc.scale * x;
    if (pass == 0u) {
        float m = rescale(y);
        g_s += exp(y - m);
    } else {
        float z = exp(y - g_max) * g_inv;
        NU_STORE(dst, DT_DST, g_dst + i, z)
    }
}

void main()
{
    uint groups = (pc.rows + ROWS - 1u) / ROWS;
    for (uint g = gl_WorkGroupID.x; g < groups; g += gl_NumWorkGroups.x) {
        uint row = g * ROWS + nu_team();
        bool live = row < pc.rows;
        uint first = live ? pc.first_src + nu_row_offset(row, pc.shape, pc.strides) : 0u;
        g_dst = pc.first_dst + row * pc.n;
        g_m = NEG_INF;
        g_s = 0.0;
        if (live)
            nu_row_read(0u, first, pc.strides.w, pc.n);
        // Every thread reduces (barriers), live or not.
        g_max = nu_team_maxf(g_m);
        g_inv = 1.0 / nu_team_sum(g_s == 0.0 ? 0.0 : g_s * exp(g_m - g_max));
        if (live)
            nu_row_read(1u, first, pc.strides.w, pc.n);
    }
}
