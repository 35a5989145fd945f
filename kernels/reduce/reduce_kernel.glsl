// The kernel of reduce.comp and reduce_sg.comp: dst[row] = sum, max or mean of src's row, or
// the index of its largest element (nu_op_reduce, nu_op_argmax; nuvec/ops.h), one team of
// threads a row (reduce.glsl).
//
// Specialisation constants (the host's defaults in src/ops/rows.c):
//   0 LOCAL    threads a workgroup, a power of two (256; 1024 for rows of 16384 or more)
//   1 ROWS     rows a workgroup (LOCAL / ROWS threads a row, at least 8; the host gives a row
//              about one 8-element step a thread: ROWS = LOCAL / next_pow2(n / 8), teams >= 32)
//   2 OP       0 sum, 1 max (NaN propagates), 2 mean, 3 argmax (I32, the first of equal ones,
//              NaN largest)
//   3 DT_SRC, 4 DT_DST   dtypes (ops.glsl codes; DT_DST NU_I32 for argmax)
//   5 VEC      1: 16-byte loads (src's rows contiguous, each starting 16-byte aligned)
//   6 SUBGROUP 1: team reductions with subgroup arithmetic (reduce_sg only)
//   7 UNROLL   8-element vector loads in flight per thread (2)
// Bindings 0 dst (contiguous, one element a row), 1 src. Push: src's shape and strides
// (4 dimensions, outermost first, padded with 1s and 0s; the last is the row), the row count,
// the row length, the first elements of src and dst in their bindings.
#extension GL_EXT_shader_16bit_storage : require
#include "ops.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LOCAL = 256u;
layout(constant_id = 1) const uint ROWS = 1u;
layout(constant_id = 2) const uint OP = 0u;
layout(constant_id = 3) const uint DT_SRC = NU_F32;
layout(constant_id = 4) const uint DT_DST = NU_F32;
layout(constant_id = 5) const uint VEC = 0u;
layout(constant_id = 6) const uint SUBGROUP = 0u;
layout(constant_id = 7) const uint UNROLL = 2u;
NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, src)
layout(push_constant) uniform Push {
    uvec4 shape, strides;
    uint rows, n, first_src, first_dst;
} pc;

void take8(uint pass, float x[8], uint i);
void take1(uint pass, float x, uint i);
#include "reduce/reduce.glsl"

float g_sum;
uint g_key, g_idx;

void take8(uint pass, float x[8], uint i)
{
    if (OP == 0u || OP == 2u) {
        g_sum += ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
    } else if (OP == 1u) {
        for (uint k = 0u; k < 8u; k++)
            g_key = max(g_key, nu_key(x[k]));
    } else {
        for (uint k = 0u; k < 8u; k++) {
            uint key = nu_key(x[k]);
            if (key > g_key) { // strictly: a thread's elements come in increasing order
                g_key = key;
                g_idx = i + k;
            }
        }
    }
}

void take1(uint pass, float x, uint i)
{
    if (OP == 0u || OP == 2u) {
        g_sum += x;
    } else {
        uint key = nu_key(x);
        if (key > g_key) {
            g_key = key;
            g_idx = i;
        }
    }
}

void main()
{
    uint groups = (pc.rows + ROWS - 1u) / ROWS;
    for (uint g = gl_WorkGroupID.x; g < groups; g += gl_NumWorkGroups.x) {
        uint row = g * ROWS + nu_team();
        bool live = row < pc.rows;
        g_sum = 0.0;
        g_key = NU_KEY_NONE;
        g_idx = 0xffffffffu;
        if (live)
            nu_row_read(0u, pc.first_src + nu_row_offset(row, pc.shape, pc.strides), pc.strides.w, pc.n);
        // Every thread reduces (barriers), live or not.
        if (OP == 0u || OP == 2u) {
            float s = nu_team_sum(g_sum);
            if (OP == 2u)
                s /= float(pc.n);
            if (live && nu_lane() == 0u) {
                NU_STORE(dst, DT_DST, pc.first_dst + row, s)
            }
        } else if (OP == 1u) {
            float m = nu_unkey(nu_team_max(g_key));
            if (live && nu_lane() == 0u) {
                NU_STORE(dst, DT_DST, pc.first_dst + row, m)
            }
        } else {
            nu_team_argmax(g_key, g_idx);
            if (live && nu_lane() == 0u)
                dst_w[pc.first_dst + row] = g_idx;
        }
    }
}
