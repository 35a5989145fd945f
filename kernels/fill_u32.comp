#version 450
// fill_u32: writes `value` into the first `count` 32-bit words of the bound buffer.
#include "common.glsl"
layout(local_size_x = NU_LOCAL_SIZE) in;
layout(std430, binding = 0) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Push { uint value; uint count; } pc;
void main()
{
    uint i = nu_index();
    if (i < pc.count)
        dst[i] = pc.value;
}
