#version 450
// axpy_f32: y[i] += alpha * x[i] for the first `count` floats.
#include "common.glsl"
layout(local_size_x = NU_LOCAL_SIZE) in;
layout(std430, binding = 0) buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform Push { float alpha; uint count; } pc;
void main()
{
    uint i = nu_index();
    if (i < pc.count)
        y[i] += pc.alpha * x[i];
}
