#version 450
// add_f32: dst[i] = a[i] + b[i] for the first `count` floats.
#include "common.glsl"
layout(local_size_x = NU_LOCAL_SIZE) in;
layout(std430, binding = 0) writeonly buffer Dst { float dst[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(push_constant) uniform Push { uint count; } pc;
void main()
{
    uint i = nu_index();
    if (i < pc.count)
        dst[i] = a[i] + b[i];
}
