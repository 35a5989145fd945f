#version 450
// prefetch: nu_op_prefetch (nuvec/ops.h): reads a range of bytes so that the device's caches hold
// them for an op of a later dependency level, and produces nothing.
//
// Why: a decode step's matrix-vector products stream their weights from memory, but the ops
// between them (RoPE, the KV-cache writes, attention over a short context) leave the memory idle
// while they run and while the barriers after them drain. Loads issued beside those ops put the
// next product's weights into the last-level cache (the H200's is 50 MB), where that product
// then reads them sooner and faster.
//
// The loads must stay: a value loaded and never used is removed by the compiler, and so is one
// used only under a condition the loads do not decide. So each thread folds its loads into one
// word, and the word decides a store (to the sink, binding 1): `h == pc.salt` holds by chance
// only (one workgroup in 2^32), and then writes to a buffer nothing reads. Binding 2 is the `after`
// tensor, which hazard tracking orders the prefetch after: it is read only under the same chance.
//
// Work: 16 bytes a load, UNROLL loads of a thread in flight before any is folded, a grid-stride
// loop over the range's `vecs` 16-byte units (the binding starts 16-byte aligned), then its last
// `words - 4 vecs` 32-bit words. Push: vecs, words, salt.
#include "common.glsl"
layout(local_size_x = 256) in;
const uint UNROLL = 4u;
layout(std430, binding = 0) readonly buffer SrcV { uvec4 src_v[]; };
layout(std430, binding = 0) readonly buffer SrcW { uint src_w[]; };
layout(std430, binding = 1) writeonly buffer Sink { uint sink[]; };
layout(std430, binding = 2) readonly buffer After { uint after_w[]; };
layout(push_constant) uniform Push { uint vecs, words, salt; } pc;

void main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint i = gl_GlobalInvocationID.x;
    uvec4 acc = uvec4(0u);
    for (; i + (UNROLL - 1u) * stride < pc.vecs; i += UNROLL * stride) {
        uvec4 v[UNROLL];
        for (uint u = 0u; u < UNROLL; u++)
            v[u] = src_v[i + u * stride];
        for (uint u = 0u; u < UNROLL; u++)
            acc ^= v[u];
    }
    for (; i < pc.vecs; i += stride)
        acc ^= src_v[i];
    uint t = pc.vecs * 4u + gl_GlobalInvocationID.x;
    if (t < pc.words)
        acc.x ^= src_w[t];
    uint h = acc.x ^ acc.y ^ acc.z ^ acc.w;
    if (h == pc.salt)
        sink[0] = h ^ after_w[0];
}
