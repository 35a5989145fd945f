#version 450
// fma_f32: dst[i] = a[i] * b[i] + c[i] for the first `count` floats (four bindings).
#include "common.glsl"
layout(local_size_x = NU_LOCAL_SIZE) in;
layout(std430, binding = 0) writeonly buffer Dst { float dst[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) readonly buffer C { float c[]; };
layout(push_constant) uniform Push { uint count; } pc;
void main()
{
    uint i = nu_index();
    if (i < pc.count)
        dst[i] = fma(a[i], b[i], c[i]);
}
