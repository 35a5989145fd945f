#version 450
// rope: rotary position embeddings (nu_op_rope, nuvec/ops.h), src [batch, tokens, heads, head_dim]
// (batch 1 for a 3-D tensor) of any float dtype and any view, into a contiguous dst of any float
// dtype (it may be src itself: each thread reads its elements before it writes them).
//
// Pair i (0 <= i < rotary/2) of a head at position p turns by a = p pscale theta^(-2i / rotary)
// / ff[i], in F32 by rope/rope.glsl (shared with kv_write.comp, which turns a KV cache's keys the
// same way, bit for bit; its header says how the angle, sin and cos are computed). Pairs: (x[2i],
// x[2i+1]) (INTERLEAVED) or (x[i], x[i + rotary/2]) (HALF);
// y0 = m (x0 cos a - x1 sin a), y1 = m (x0 sin a + x1 cos a) (m: mscale). Dimensions
// rotary..head_dim are copied.
//
// Specialisation constants (the tuning knobs LOCAL and HEADS: nu_rope_tune, defaults in
// src/ops/rope.c):
//   0 LOCAL  threads per workgroup (local_size_x_id; default 256)
//   1 DT_SRC, 2 DT_DST  dtypes (ops.glsl codes)
//   3 LAYOUT  0 INTERLEAVED, 1 HALF
//   4 FAST    1: src's rows (each head) have stride 1 and start 16-byte aligned in the binding,
//             dst's too, head_dim % 8 == 0 and rotary % 8 (INTERLEAVED) or % 16 (HALF) == 0:
//             a thread takes a unit of 8 consecutive elements (INTERLEAVED: 4 pairs; HALF: 8
//             pairs, 8 elements from each half; the copied part: 8 elements) with 16-byte loads
//             and stores. 0: a thread takes one pair (or one copied element), through strides.
//   5 HAS_POS  1: positions from binding 2 (I32); 0: the token's index
//   6 HEADS   heads per thread (1..8; default 2): the sines and cosines of a unit are computed
//             once for HEADS heads of the same token, whose loads are all issued before the
//             stores (several loads in flight).
//   7 HAS_FF  1: pair i's frequency divided by its factor (binding 3)
// Bindings 0 dst, 1 src, 2 positions (src again when HAS_POS is 0; unread), 3 the frequency
// factors (F32; an empty range when HAS_FF is 0).
// Push: see Push below (shape, src strides, first elements, rotary, positions' strides, offset,
// step, head groups and slots a row, the position scale and magnitude, the factors' first element
// and stride).
#include "ops.glsl"
#define NU_ROPE_FF_BINDING 3
#include "rope/rope.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint DT_SRC = NU_F32;
layout(constant_id = 2) const uint DT_DST = NU_F32;
layout(constant_id = 3) const uint LAYOUT = 0u;
layout(constant_id = 4) const uint FAST = 0u;
layout(constant_id = 5) const uint HAS_POS = 0u;
layout(constant_id = 6) const uint HEADS = 2u;
layout(constant_id = 7) const uint HAS_FF = 0u;
NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, src)
layout(std430, binding = 2) readonly buffer POS { int pos_w[]; };
layout(push_constant) uniform Push {
    uvec4 shape;  // batch, tokens, heads, head_dim
    uvec4 stride; // src's strides (elements), same order
    uint first_src, first_dst, first_pos, rotary;
    uint pos_stride_b, pos_stride_t;
    int offset;
    float step;   // 2 log2(theta) / rotary
    uint head_groups; // ceil(heads / HEADS)
    uint slots;       // units (FAST) or pairs + copied elements a row
    float pscale;     // 1 / linear_factor
    float mscale;     // attn_factor
    uint first_ff, ff_stride;
} pc;

#define HMAX 8u

// mscale times the cos and sin of p * exp2(-i * step) / ff[i] (p scaled by the caller).
void rotation(float p, uint i, out float c, out float s)
{
    nu_rope_rotation(p, i, pc.step, HAS_FF == 1u, pc.first_ff + i * pc.ff_stride, pc.mscale, c, s);
}

// Eight elements from src element e / to dst element e (16-byte aligned in the binding).
void load8(uint e, out float x[8])
{
    if (DT_SRC == NU_F32)
        nu_unpack8(DT_SRC, src_v[e / 4u], src_v[e / 4u + 1u], x);
    else
        nu_unpack8(DT_SRC, src_v[e / 8u], uvec4(0u), x);
}
void store8(uint e, float y[8])
{
    if (DT_DST == NU_F32) {
        dst_v[e / 4u] = uvec4(floatBitsToUint(y[0]), floatBitsToUint(y[1]), floatBitsToUint(y[2]), floatBitsToUint(y[3]));
        dst_v[e / 4u + 1u] = uvec4(floatBitsToUint(y[4]), floatBitsToUint(y[5]), floatBitsToUint(y[6]), floatBitsToUint(y[7]));
    } else {
        dst_v[e / 8u] = uvec4(nu_pack2(DT_DST, y[0], y[1]), nu_pack2(DT_DST, y[2], y[3]), nu_pack2(DT_DST, y[4], y[5]),
                              nu_pack2(DT_DST, y[6], y[7]));
    }
}

void main()
{
    uint threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint tokens = pc.shape.y, heads = pc.shape.z, dim = pc.shape.w, rot = pc.rotary;
    uint total = pc.shape.x * tokens * pc.head_groups * pc.slots;
    for (uint idx = gl_GlobalInvocationID.x; idx < total; idx += threads) {
        uint slot = idx % pc.slots, rest = idx / pc.slots;
        uint hg = rest % pc.head_groups, bt = rest / pc.head_groups;
        uint b = bt / tokens, t = bt % tokens;
        int ip = HAS_POS == 1u ? pos_w[pc.first_pos + b * pc.pos_stride_b + t * pc.pos_stride_t] : int(t);
        float p = float(ip + pc.offset) * pc.pscale;
        uint h0 = hg * HEADS;
        uint nh = min(HEADS, heads - h0);
        uint sbase = pc.first_src + b * pc.stride.x + t * pc.stride.y + h0 * pc.stride.z;
        uint dbase = pc.first_dst + (bt * heads + h0) * dim;
        if (FAST == 1u) {
            uint nr = LAYOUT == 0u ? rot / 8u : rot / 16u;
            if (slot >= nr) { // a unit of the copied part
                uint e = rot + (slot - nr) * 8u;
                float x[HMAX][8];
                for (uint j = 0u; j < HEADS; j++)
                    if (j < nh)
                        load8(sbase + j * pc.stride.z + e, x[j]);
                for (uint j = 0u; j < HEADS; j++)
                    if (j < nh)
                        store8(dbase + j * dim + e, x[j]);
            } else if (LAYOUT == 0u) { // 4 pairs (x[2i], x[2i+1]), i = 4 slot + k
                float cs[4], sn[4];
                for (uint k = 0u; k < 4u; k++)
                    rotation(p, slot * 4u + k, cs[k], sn[k]);
                uint e = slot * 8u;
                float x[HMAX][8];
                for (uint j = 0u; j < HEADS; j++)
                    if (j < nh)
                        load8(sbase + j * pc.stride.z + e, x[j]);
                for (uint j = 0u; j < HEADS; j++)
                    if (j < nh) {
                        float y[8];
                        for (uint k = 0u; k < 4u; k++) {
                            float x0 = x[j][2u * k], x1 = x[j][2u * k + 1u];
                            y[2u * k] = x0 * cs[k] - x1 * sn[k];
                            y[2u * k + 1u] = x0 * sn[k] + x1 * cs[k];
                        }
                        store8(dbase + j * dim + e, y);
                    }
            } else { // 8 pairs (x[i], x[i + rotary/2]), i = 8 slot + k
                float cs[8], sn[8];
                for (uint k = 0u; k < 8u; k++)
                    rotation(p, slot * 8u + k, cs[k], sn[k]);
                uint e = slot * 8u, half_ = rot / 2u;
                float x[HMAX][8], w[HMAX][8];
                for (uint j = 0u; j < HEADS; j++)
                    if (j < nh) {
                        load8(sbase + j * pc.stride.z + e, x[j]);
                        load8(sbase + j * pc.stride.z + e + half_, w[j]);
                    }
                for (uint j = 0u; j < HEADS; j++)
                    if (j < nh) {
                        float y[8], z[8];
                        for (uint k = 0u; k < 8u; k++) {
                            y[k] = x[j][k] * cs[k] - w[j][k] * sn[k];
                            z[k] = x[j][k] * sn[k] + w[j][k] * cs[k];
                        }
                        store8(dbase + j * dim + e, y);
                        store8(dbase + j * dim + e + half_, z);
                    }
            }
            continue;
        }
        uint npairs = rot / 2u;
        if (slot >= npairs) { // a copied element
            uint e = rot + (slot - npairs);
            float x[HMAX];
            for (uint j = 0u; j < HEADS; j++)
                if (j < nh)
                    x[j] = NU_LOAD(src, DT_SRC, sbase + j * pc.stride.z + e * pc.stride.w);
            for (uint j = 0u; j < HEADS; j++)
                if (j < nh) {
                    NU_STORE(dst, DT_DST, dbase + j * dim + e, x[j])
                }
            continue;
        }
        float c, s;
        rotation(p, slot, c, s);
        uint e0 = LAYOUT == 0u ? 2u * slot : slot;
        uint e1 = LAYOUT == 0u ? 2u * slot + 1u : slot + npairs;
        float x0[HMAX], x1[HMAX];
        for (uint j = 0u; j < HEADS; j++)
            if (j < nh) {
                x0[j] = NU_LOAD(src, DT_SRC, sbase + j * pc.stride.z + e0 * pc.stride.w);
                x1[j] = NU_LOAD(src, DT_SRC, sbase + j * pc.stride.z + e1 * pc.stride.w);
            }
        for (uint j = 0u; j < HEADS; j++)
            if (j < nh) {
                NU_STORE(dst, DT_DST, dbase + j * dim + e0, x0[j] * c - x1[j] * s)
                NU_STORE(dst, DT_DST, dbase + j * dim + e1, x0[j] * s + x1[j] * c)
            }
    }
}
