#version 450
// A fuzzing seed (not a nuvec kernel): what reflection reads beyond the builtin kernels'
// layouts. A push constant block with matrices (column- and row-major), arrays and a nested
// struct; the workgroup size from specialisation constants (a WorkgroupSize built-in); a
// read-only, a write-only and a read-write buffer at spread bindings; shared memory.
layout(local_size_x_id = 0, local_size_y_id = 1) in;
struct Inner { vec3 v; float f[3]; };
layout(push_constant) uniform Push {
    mat4 m;
    layout(row_major) mat3x2 r;
    Inner inner[2];
    uvec2 count;
} pc;
layout(std430, binding = 0) readonly buffer A { vec4 a[]; };
layout(std430, binding = 3) writeonly buffer B { vec4 b[]; };
layout(std430, binding = 5) buffer C { uint hits; float c[]; };
shared vec4 tile[64];
void main()
{
    uint i = gl_GlobalInvocationID.x;
    uint l = gl_LocalInvocationIndex % 64u;
    tile[l] = i < pc.count.x ? pc.m * a[i] : vec4(pc.inner[1].f[2]);
    barrier();
    if (i < pc.count.x) {
        b[i] = tile[(l + 1u) % 64u] + vec4(pc.r * vec3(pc.inner[0].v), 0.0, 1.0);
        atomicAdd(hits, 1u);
        c[i] = float(gl_WorkGroupSize.x * gl_WorkGroupSize.y);
    }
}
