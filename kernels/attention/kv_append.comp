#version 450
// kv_append: cache[position + t, h, d] = src[t, h, d] (nu_op_kv_append, nuvec/ops.h), converting
// the dtype (rounded to nearest even). cache contiguous [positions, kv_heads, head_dim]; src any
// view [tokens, kv_heads, head_dim]. One element a thread, the grid's stride past 65535
// workgroups; rows at or past the cache's positions are never written (position is a push
// constant a graph launch may change; the host refuses an overflow when recording).
// Specialisation constants: 0 CDT cache's dtype, 1 SDT src's (ops.glsl codes).
// Bindings: 0 cache (all of it: the rows written depend on the push constant), 1 src.
#include "ops.glsl"

layout(constant_id = 0) const uint CDT = NU_F32;
layout(constant_id = 1) const uint SDT = NU_F32;
layout(local_size_x = NU_OPS_LOCAL) in;

NU_TENSOR(writeonly, 0, cache)
NU_TENSOR(readonly, 1, src)
layout(push_constant) uniform Push {
    uint count, heads, dim; // count = tokens * heads * dim
    uint position, positions;
    uint first_cache, first_src, s_tok, s_head, s_dim;
} pc;

void main()
{
    for (uint i = nu_ops_index(); i < pc.count; i += nu_ops_threads()) {
        uint dd = i % pc.dim, rest = i / pc.dim, h = rest % pc.heads, t = rest / pc.heads;
        if (pc.position >= pc.positions || t >= pc.positions - pc.position) // no wrap past 2^32
            continue;
        float x = NU_LOAD(src, SDT, pc.first_src + t * pc.s_tok + h * pc.s_head + dd * pc.s_dim);
        NU_STORE(cache, CDT, pc.first_cache + ((pc.position + t) * pc.heads + h) * pc.dim + dd, x)
    }
}
