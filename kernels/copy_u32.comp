#version 450
// copy_u32: dst[i] = src[i] for the first `count` 32-bit words. Each thread copies 4
// consecutive words with one 16-byte load and store (full bandwidth needs vector accesses),
// word by word only for the last, partial group of 4: dispatch ceil(count / 1024) workgroups
// (nu_groups_for(count, 1024, groups)). The buffers are declared as uvec4 arrays; a tail word
// is one component of an element, so no access touches bytes past `count` words.
#include "common.glsl"
layout(local_size_x = NU_LOCAL_SIZE) in;
layout(std430, binding = 0) writeonly buffer Dst { uvec4 dst[]; };
layout(std430, binding = 1) readonly buffer Src { uvec4 src[]; };
layout(push_constant) uniform Push { uint count; } pc;
void main()
{
    uint v = nu_index();           // the group of 4 words this thread copies
    uint full = pc.count >> 2;     // groups of 4 entirely in range
    uint tail = pc.count & 3u;     // words in the last, partial group
    if (v < full) {
        dst[v] = src[v];
    } else if (v == full && tail != 0u) {
        for (uint c = 0u; c < tail; c++)
            dst[v][c] = src[v][c];
    }
}
