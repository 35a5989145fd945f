#version 450
// add_f16: dst[i] = a[i] + b[i] for the first `count` float16 values (needs the device's
// shaderFloat16 and storageBuffer16BitAccess).
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#include "common.glsl"
layout(local_size_x = NU_LOCAL_SIZE) in;
layout(std430, binding = 0) writeonly buffer Dst { float16_t dst[]; };
layout(std430, binding = 1) readonly buffer A { float16_t a[]; };
layout(std430, binding = 2) readonly buffer B { float16_t b[]; };
layout(push_constant) uniform Push { uint count; } pc;
void main()
{
    uint i = nu_index();
    if (i < pc.count)
        dst[i] = a[i] + b[i];
}
