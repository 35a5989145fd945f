#version 450
// A fuzzing seed (not a nuvec kernel): control flow (loops, branches, a function call) and
// subgroup operations, for the validator's structured control flow and capability checks.
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Data { uint n; float x[]; };
layout(push_constant) uniform Push { uint steps; } pc;
float step_once(float v, uint k)
{
    return (k & 1u) == 0u ? v * 0.5 : v + 1.0;
}
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= n)
        return;
    float v = x[i];
    for (uint k = 0u; k < pc.steps; k++) {
        if (v > 1000.0)
            break;
        v = step_once(v, k);
    }
    x[i] = subgroupAdd(v);
}
