// ops.glsl: what the kernel library's shaders (nuvec/ops.h) share: dtype codes, loading and
// storing elements of any float dtype from raw words, and the thread index of large grids.
//
// Tensors are bound as raw storage (set 0): each binding is declared three times, as 32-bit words,
// as 16-bit halves and as 16-byte vectors (aliases of one buffer), so one shader serves every
// dtype, chosen by a specialisation constant (the driver compiles out the other branches).
// Element indices count from the start of the binding; the op passes each tensor's first element.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

// Dtype codes of the specialisation constants (NU_F32, NU_F16, NU_BF16, NU_I32, NU_Q8_0, ...; src/ops/op.h:
// nu__op_dtype_code): generated from the C table (src/core/dtype.h) at build time, with each block
// dtype's elements and halves a block (nu_block_elements, nu_block_halves).
#include "dtypes.glsl"

// Threads per workgroup of the ops' elementwise shaders.
#define NU_OPS_LOCAL 256u

// A binding of raw storage, named NAME: NAME_w (words), NAME_h (halves), NAME_v (16-byte vectors),
// NAME_v2 (8-byte vectors).
#define NU_TENSOR(QUALIFIER, BINDING, NAME)                                                     \
    layout(std430, binding = BINDING) QUALIFIER buffer NAME##_W { uint NAME##_w[]; };           \
    layout(std430, binding = BINDING) QUALIFIER buffer NAME##_H { uint16_t NAME##_h[]; };       \
    layout(std430, binding = BINDING) QUALIFIER buffer NAME##_V { uvec4 NAME##_v[]; };          \
    layout(std430, binding = BINDING) QUALIFIER buffer NAME##_V2 { uvec2 NAME##_v2[]; };

float nu_bf16_to_f32(uint h) { return uintBitsToFloat(h << 16); }
// Round to nearest even (NaN stays NaN).
uint nu_f32_to_bf16(float f)
{
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
float nu_f16_to_f32(uint h) { return unpackHalf2x16(h).x; }
uint nu_f32_to_f16(float f) { return packHalf2x16(vec2(f, 0.0)) & 0xffffu; }

// Element i of a float tensor of dtype DT.
#define NU_LOAD(NAME, DT, i)                                                                    \
    ((DT) == NU_F32 ? uintBitsToFloat(NAME##_w[i])                                              \
                    : ((DT) == NU_F16 ? nu_f16_to_f32(uint(NAME##_h[i])) : nu_bf16_to_f32(uint(NAME##_h[i]))))
#define NU_STORE(NAME, DT, i, value)                                                            \
    if ((DT) == NU_F32)                                                                         \
        NAME##_w[i] = floatBitsToUint(value);                                                   \
    else                                                                                        \
        NAME##_h[i] = uint16_t((DT) == NU_F16 ? nu_f32_to_f16(value) : nu_f32_to_bf16(value));

// Eight consecutive elements, the u-th eight from the 16-byte vector VBASE (the vector holding the
// tensor's first element, which is 16-byte aligned: nu_vbase): two vectors of F32, one of F16 or
// BF16.
void nu_unpack8(uint dt, uvec4 p, uvec4 q, out float x[8])
{
    if (dt == NU_F32) {
        x[0] = uintBitsToFloat(p.x); x[1] = uintBitsToFloat(p.y); x[2] = uintBitsToFloat(p.z); x[3] = uintBitsToFloat(p.w);
        x[4] = uintBitsToFloat(q.x); x[5] = uintBitsToFloat(q.y); x[6] = uintBitsToFloat(q.z); x[7] = uintBitsToFloat(q.w);
    } else if (dt == NU_F16) {
        vec2 a = unpackHalf2x16(p.x), b = unpackHalf2x16(p.y), c = unpackHalf2x16(p.z), d = unpackHalf2x16(p.w);
        x[0] = a.x; x[1] = a.y; x[2] = b.x; x[3] = b.y; x[4] = c.x; x[5] = c.y; x[6] = d.x; x[7] = d.y;
    } else {
        x[0] = uintBitsToFloat(p.x << 16); x[1] = uintBitsToFloat(p.x & 0xffff0000u);
        x[2] = uintBitsToFloat(p.y << 16); x[3] = uintBitsToFloat(p.y & 0xffff0000u);
        x[4] = uintBitsToFloat(p.z << 16); x[5] = uintBitsToFloat(p.z & 0xffff0000u);
        x[6] = uintBitsToFloat(p.w << 16); x[7] = uintBitsToFloat(p.w & 0xffff0000u);
    }
}
uint nu_vbase(uint dt, uint first) { return dt == NU_F32 ? first / 4u : first / 8u; }
#define NU_LOAD8(NAME, DT, VBASE, u, x)                                                         \
    if ((DT) == NU_F32)                                                                         \
        nu_unpack8(DT, NAME##_v[(VBASE) + 2u * (u)], NAME##_v[(VBASE) + 2u * (u) + 1u], x);     \
    else                                                                                        \
        nu_unpack8(DT, NAME##_v[(VBASE) + (u)], uvec4(0u), x);

uint nu_pack2(uint dt, float a, float b)
{
    return dt == NU_F16 ? packHalf2x16(vec2(a, b)) : (nu_f32_to_bf16(a) | (nu_f32_to_bf16(b) << 16));
}
#define NU_STORE8(NAME, DT, VBASE, u, x)                                                        \
    if ((DT) == NU_F32) {                                                                       \
        NAME##_v[(VBASE) + 2u * (u)] = uvec4(floatBitsToUint(x[0]), floatBitsToUint(x[1]), floatBitsToUint(x[2]), floatBitsToUint(x[3])); \
        NAME##_v[(VBASE) + 2u * (u) + 1u] = uvec4(floatBitsToUint(x[4]), floatBitsToUint(x[5]), floatBitsToUint(x[6]), floatBitsToUint(x[7])); \
    } else {                                                                                    \
        NAME##_v[(VBASE) + (u)] = uvec4(nu_pack2(DT, x[0], x[1]), nu_pack2(DT, x[2], x[3]), nu_pack2(DT, x[4], x[5]), nu_pack2(DT, x[6], x[7])); \
    }

// Four consecutive elements, the u-th four from the tensor's first element (16-byte aligned for
// F32, 8-byte for F16 and BF16): one 16-byte vector of F32, one 8-byte vector of F16 or BF16. Where
// a shader mixes F32 with 16-bit dtypes, four-element steps keep every load coalesced (eight F32
// elements a thread would be two 16-byte loads 32 bytes apart across the subgroup).
uint nu_vbase4(uint first) { return first / 4u; }
void nu_unpack4(uint dt, uvec4 p, out float x[4])
{
    if (dt == NU_F32) {
        x[0] = uintBitsToFloat(p.x); x[1] = uintBitsToFloat(p.y); x[2] = uintBitsToFloat(p.z); x[3] = uintBitsToFloat(p.w);
    } else if (dt == NU_F16) {
        vec2 a = unpackHalf2x16(p.x), b = unpackHalf2x16(p.y);
        x[0] = a.x; x[1] = a.y; x[2] = b.x; x[3] = b.y;
    } else {
        x[0] = uintBitsToFloat(p.x << 16); x[1] = uintBitsToFloat(p.x & 0xffff0000u);
        x[2] = uintBitsToFloat(p.y << 16); x[3] = uintBitsToFloat(p.y & 0xffff0000u);
    }
}
#define NU_LOAD4(NAME, DT, VBASE, u, x)                                                         \
    if ((DT) == NU_F32)                                                                         \
        nu_unpack4(DT, NAME##_v[(VBASE) + (u)], x);                                             \
    else                                                                                        \
        nu_unpack4(DT, uvec4(NAME##_v2[(VBASE) + (u)], 0u, 0u), x);
#define NU_STORE4(NAME, DT, VBASE, u, x)                                                        \
    if ((DT) == NU_F32)                                                                         \
        NAME##_v[(VBASE) + (u)] = uvec4(floatBitsToUint(x[0]), floatBitsToUint(x[1]), floatBitsToUint(x[2]), floatBitsToUint(x[3])); \
    else                                                                                        \
        NAME##_v2[(VBASE) + (u)] = uvec2(nu_pack2(DT, x[0], x[1]), nu_pack2(DT, x[2], x[3]));

// Elementwise shaders run one-dimensional grids of at most 65535 workgroups and loop with a
// stride of the whole grid (src/ops/op.c: nu__op_groups).
uint nu_ops_index() { return gl_GlobalInvocationID.x; }
uint nu_ops_threads() { return gl_NumWorkGroups.x * NU_OPS_LOCAL; }
