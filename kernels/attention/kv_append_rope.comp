#version 450
// kv_append_rope: cache[position + t, h, :] = rope(src[t, h, :]) at sequence position position + t
// (nu_op_kv_append_rope, nuvec/ops.h): nu_op_rope's rotation (rope/rope.glsl, the same F32 angle
// bit for bit) and nu_op_kv_append's store (rounded to nearest even into the cache's dtype) in one
// dispatch. cache contiguous [positions, kv_heads, head_dim]; src any view [tokens, kv_heads,
// head_dim]. One thread a rotated pair (pairs (x[2i], x[2i+1]) INTERLEAVED, (x[i], x[i + rotary/2])
// HALF) or copied element (rotary .. head_dim) of a head, the grid's stride past 65535
// workgroups: a decode step's keys are a few thousand elements, so the strided path is enough.
// Rows at or past the cache's positions are never written (position is a push constant a graph
// launch may change; the host refuses an overflow when recording).
// Specialisation constants: 0 CDT cache's dtype, 1 SDT src's (ops.glsl codes), 2 LAYOUT 0
// INTERLEAVED, 1 HALF, 3 LOCAL threads a workgroup (default 64: a decode step's few thousand
// threads over more workgroups; NUVEC_KV_APPEND_ROPE="local=N" for sweeps, src/ops/attention.c).
// Bindings: 0 cache (all of it: the rows written depend on the push constant), 1 src.
#include "ops.glsl"
#include "rope/rope.glsl"

layout(constant_id = 0) const uint CDT = NU_F32;
layout(constant_id = 1) const uint SDT = NU_F32;
layout(constant_id = 2) const uint LAYOUT = 0u;
layout(local_size_x = 64, local_size_x_id = 3) in;

NU_TENSOR(writeonly, 0, cache)
NU_TENSOR(readonly, 1, src)
layout(push_constant) uniform Push {
    uint count; // tokens * heads * slots
    uint heads, dim;
    uint position, positions;
    uint first_cache, first_src, s_tok, s_head, s_dim;
    uint rotary; // even, at most dim
    uint slots;  // rotary / 2 pairs + (dim - rotary) copied elements a head
    float step;  // 2 log2(theta) / rotary
} pc;

void main()
{
    uint npairs = pc.rotary / 2u;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        uint slot = i % pc.slots, rest = i / pc.slots, h = rest % pc.heads, t = rest / pc.heads;
        if (pc.position >= pc.positions || t >= pc.positions - pc.position) // no wrap past 2^32
            continue;
        uint sbase = pc.first_src + t * pc.s_tok + h * pc.s_head;
        uint cbase = pc.first_cache + ((pc.position + t) * pc.heads + h) * pc.dim;
        if (slot >= npairs) { // a copied element
            uint e = pc.rotary + (slot - npairs);
            float x = NU_LOAD(src, SDT, sbase + e * pc.s_dim);
            NU_STORE(cache, CDT, cbase + e, x)
            continue;
        }
        float c, s;
        nu_rope_rotation(float(pc.position + t), slot, pc.step, c, s);
        uint e0 = LAYOUT == 0u ? 2u * slot : slot;
        uint e1 = LAYOUT == 0u ? 2u * slot + 1u : slot + npairs;
        float x0 = NU_LOAD(src, SDT, sbase + e0 * pc.s_dim);
        float x1 = NU_LOAD(src, SDT, sbase + e1 * pc.s_dim);
        NU_STORE(cache, CDT, cbase + e0, x0 * c - x1 * s)
        NU_STORE(cache, CDT, cbase + e1, x0 * s + x1 * c)
    }
}
