#version 450
// kv_write: rows into a KV cache (nu_op_kv_write, and the scalar form's nu_op_kv_append and
// nu_op_kv_append_rope, nuvec/ops.h): cache[slot_r, pos_r, h, :] = src[r, h, :], or with RoPE
// rope(src[r, h, :]) at position pos_r (rope/rope.glsl: nu_op_rope's F32 angle, bit for bit),
// rounded to nearest even into the cache's dtype. cache contiguous [slots, positions, kv_heads,
// head_dim] (one slot for a rank-3 cache); src any view [rows, kv_heads, head_dim]. Row r's
// position: the scalar form's position + r, or positions[r] (flag 1); its slot: slots[r] (flag
// 2) or 0. A row out of range (position negative or at least the cache's positions, slot outside
// 0 .. slots - 1) writes nothing: the positions and slots are push constants or buffer contents
// a graph launch may change, checked here, not when recording.
// One thread a rotated pair (pairs (x[2i], x[2i+1]) INTERLEAVED, (x[i], x[i + rotary/2]) HALF)
// or copied element (rotary .. head_dim; all of them without RoPE) of a row's head, the grid's
// stride past 65535 workgroups: a step's keys are a few thousand elements, so the strided path
// is enough.
// Specialisation constants: 0 CDT cache's dtype, 1 SDT src's (ops.glsl codes), 2 ROPE 0 none, 1
// INTERLEAVED, 2 HALF, 3 LOCAL threads a workgroup (src/ops/kv_cache.c: 256 without RoPE, 64
// with), 4 HAS_FF 1: the frequency factors (binding 4).
// Bindings: 0 cache (all of it: the rows written depend on the positions), 1 src, 2 positions, 3
// slots (I32), 4 the frequency factors (F32); those unused are empty ranges, never read.
#include "ops.glsl"
#define NU_ROPE_FF_BINDING 4
#include "rope/rope.glsl"

layout(constant_id = 0) const uint CDT = NU_F32;
layout(constant_id = 1) const uint SDT = NU_F32;
layout(constant_id = 2) const uint ROPE = 0u;
layout(local_size_x = 64, local_size_x_id = 3) in;
layout(constant_id = 4) const uint HAS_FF = 0u;

NU_TENSOR(writeonly, 0, cache)
NU_TENSOR(readonly, 1, src)
layout(std430, binding = 2) readonly buffer POS { int pos_w[]; };
layout(std430, binding = 3) readonly buffer SLOT { int slot_w[]; };
layout(push_constant) uniform Push {
    uint count; // rows * heads * units
    uint heads, dim;
    uint position;  // the scalar form's first row's position
    uint positions; // the cache's
    uint first_cache, first_src, s_tok, s_head, s_dim;
    uint rotary;    // even, at most dim (0 without RoPE)
    uint units;     // rotary / 2 pairs + (dim - rotary) copied elements a head
    float step;     // 2 log2(theta) / rotary
    uint flags;     // 1: positions from binding 2; 2: slots from binding 3
    uint slots;     // the cache's
    uint first_pos, pos_stride, first_slot, slot_stride;
    float pscale, mscale; // 1 / linear_factor, attn_factor
    uint first_ff, ff_stride;
} pc;

void main()
{
    uint npairs = pc.rotary / 2u;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint unit = i % pc.units, rest = i / pc.units, h = rest % pc.heads, t = rest / pc.heads;
        uint p, slot = 0u;
        if ((pc.flags & 1u) != 0u) {
            int ip = pos_w[pc.first_pos + t * pc.pos_stride];
            int is = (pc.flags & 2u) != 0u ? slot_w[pc.first_slot + t * pc.slot_stride] : 0;
            if (ip < 0 || uint(ip) >= pc.positions || is < 0 || uint(is) >= pc.slots)
                continue;
            p = uint(ip);
            slot = uint(is);
        } else {
            if (pc.position >= pc.positions || t >= pc.positions - pc.position) // no wrap past 2^32
                continue;
            p = pc.position + t;
        }
        uint sbase = pc.first_src + t * pc.s_tok + h * pc.s_head;
        uint cbase = pc.first_cache + ((slot * pc.positions + p) * pc.heads + h) * pc.dim;
        if (ROPE == 0u || unit >= npairs) { // a copied element
            uint e = pc.rotary + (unit - npairs);
            float x = NU_LOAD(src, SDT, sbase + e * pc.s_dim);
            NU_STORE(cache, CDT, cbase + e, x)
            continue;
        }
        float c, s;
        nu_rope_rotation(float(p) * pc.pscale, unit, pc.step, HAS_FF == 1u, pc.first_ff + unit * pc.ff_stride, pc.mscale,
                         c, s);
        uint e0 = ROPE == 1u ? 2u * unit : unit;
        uint e1 = ROPE == 1u ? 2u * unit + 1u : unit + npairs;
        float x0 = NU_LOAD(src, SDT, sbase + e0 * pc.s_dim);
        float x1 = NU_LOAD(src, SDT, sbase + e1 * pc.s_dim);
        NU_STORE(cache, CDT, cbase + e0, x0 * c - x1 * s)
        NU_STORE(cache, CDT, cbase + e1, x0 * s + x1 * c)
    }
}
