// graph/chain_body.glsl: the body of chain.comp and chain_vmm.comp (the same kernel on the
// GLSL450 and the Vulkan memory models; see graph/grid_sync.glsl).
//
// `steps` dependent steps of an add over `count` floats in ONE dispatch (a persistent dispatch,
// the "megakernel" mechanism's measure and test): step s computes
//     x_s[i] = x_{s-1}[(i + shift) % count] + b[i],  x_{-1} = in,
// into half s % 2 of x (2 * count floats), so every step reads what the previous one wrote, and
// with shift != 0 what other workgroups wrote. Each workgroup owns a contiguous slice of the
// elements (the dispatch's workgroups split them evenly, 256 threads a workgroup); the steps are
// separated by nu_grid_sync over `groups` workgroups (gl_NumWorkGroups.x, or more to test the
// timeout). After a timeout the workgroups stop: the host's error check says so.
// Bindings 0 in, 1 b (count floats each, read), 2 x (2 * count floats, read-write), 3 the sync
// words (src/ops/grid.h). Push: count, steps, shift, groups, spin_limit. Specialisation constant 0:
// grid_sync.glsl's CPU polling (GLSL450 variant).
#define NU_GRID_BINDING 3
#define NU_GRID_CPU_ID 0
#include "graph/grid_sync.glsl"

#define CHAIN_LOCAL 256u
layout(local_size_x = CHAIN_LOCAL) in;
layout(std430, binding = 0) readonly buffer In { float src[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) NU_GRID_SHARED buffer X { float x[]; };
layout(push_constant) uniform Push {
    uint count;
    uint steps;
    uint shift;
    uint groups;
    uint spin_limit;
} pc;

void main()
{
    uint slice = (pc.count + gl_NumWorkGroups.x - 1u) / gl_NumWorkGroups.x;
    uint lo = gl_WorkGroupID.x * slice;
    uint hi = min(lo + slice, pc.count);
    for (uint s = 0u; s < pc.steps; s++) {
        uint dst = (s & 1u) * pc.count, prev = ((s + 1u) & 1u) * pc.count;
        for (uint i = lo + gl_LocalInvocationID.x; i < hi; i += CHAIN_LOCAL) {
            uint j = (i + pc.shift) % pc.count;
            x[dst + i] = (s == 0u ? src[j] : x[prev + j]) + b[i];
        }
        if (s + 1u < pc.steps && !nu_grid_sync(pc.groups, pc.spin_limit))
            return;
    }
}
