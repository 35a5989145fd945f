#version 450
// gather: dst[t, :] = table[ids[t], :] (nu_op_gather, nuvec/ops.h): an embedding lookup from a
// table [vocab, dim] of F32, F16, BF16 (any row stride; columns strided on the general path),
// Q8_0 or Q4_0 (contiguous rows of blocks, any row stride in blocks), into a contiguous dst
// [n, dim] of any float dtype. An id outside [0, vocab) gives a row of zeros. Dequantization is
// d * q in F32, exactly the format's value (nuvec/tensor.h).
//
// Specialisation constants (the tuning knobs LOCAL and UNITS: defaults in src/ops/gather.c, which
// reads NUVEC_TUNE_GATHER="local=N,units=N" at each call, for a sweep without a rebuild):
//   0 LOCAL  threads per workgroup (local_size_x_id; default 256)
//   1 DT_TABLE  ops.glsl's float codes, or 4 Q8_0, 5 Q4_0
//   2 DT_DST  ops.glsl codes
//   3 VEC    1: dim % 8 == 0, dst's first element 16-byte aligned, and for a float table rows
//            with stride 1 whose starts are 16-byte aligned: a thread takes units of 8 elements
//            of a row (float tables: 16-byte loads; Q8_0 / Q4_0: the block's scale and 8 bytes
//            of quants as 16-bit loads, since a block of 34 or 18 bytes is 2-byte aligned) and
//            stores them with 16-byte stores. 0: a thread takes one element a step.
//   4 UNITS  units (or elements) a thread loads before it stores (1..4; default 2): several
//            loads in flight, UNITS grid strides apart.
// Bindings 0 dst, 1 table, 2 ids. Push: see Push below. Elements a row are consecutive threads
// (coalesced); the grid loops with its stride.
#include "ops.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint DT_TABLE = NU_F32;
layout(constant_id = 2) const uint DT_DST = NU_F32;
layout(constant_id = 3) const uint VEC = 0u;
layout(constant_id = 4) const uint UNITS = 2u;
#define NU_Q8_0 4u
#define NU_Q4_0 5u
#define UMAX 4u
NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, table)
layout(std430, binding = 2) readonly buffer IDS { int ids_w[]; };
layout(push_constant) uniform Push {
    uint n, dim, vocab;
    uint first_dst, first_table, first_ids;
    uint row_stride; // table's row stride: elements (float), 16-bit halves (Q8_0, Q4_0)
    uint col_stride; // float tables: elements
    uint ids_stride;
} pc;

// The signed byte `which` (0 low, 1 high) of a 16-bit word.
float q8(uint h, uint which) { return float(bitfieldExtract(int(h), int(which * 8u), 8)); }

// Eight elements of row `id` from element e (a multiple of 8).
void load8(uint id, uint e, out float x[8])
{
    if (DT_TABLE == NU_Q8_0 || DT_TABLE == NU_Q4_0) {
        uint words = DT_TABLE == NU_Q8_0 ? 17u : 9u; // halves a block
        uint hb = pc.first_table + id * pc.row_stride + (e / 32u) * words;
        float d = nu_f16_to_f32(uint(table_h[hb]));
        uint part = (e % 32u) / 8u;
        if (DT_TABLE == NU_Q8_0) {
            for (uint k = 0u; k < 4u; k++) {
                uint h = uint(table_h[hb + 1u + part * 4u + k]);
                x[2u * k] = d * q8(h, 0u);
                x[2u * k + 1u] = d * q8(h, 1u);
            }
        } else { // parts 0, 1: low nibbles of qs[0..7], qs[8..15]; parts 2, 3: their high nibbles
            uint shift = part >= 2u ? 4u : 0u;
            for (uint k = 0u; k < 4u; k++) {
                uint h = uint(table_h[hb + 1u + (part & 1u) * 4u + k]);
                x[2u * k] = d * float(int((h >> shift) & 15u) - 8);
                x[2u * k + 1u] = d * float(int((h >> (8u + shift)) & 15u) - 8);
            }
        }
    } else {
        uint at = pc.first_table + id * pc.row_stride + e;
        if (DT_TABLE == NU_F32)
            nu_unpack8(DT_TABLE, table_v[at / 4u], table_v[at / 4u + 1u], x);
        else
            nu_unpack8(DT_TABLE, table_v[at / 8u], uvec4(0u), x);
    }
}

void store8(uint e, float y[8])
{
    if (DT_DST == NU_F32) {
        dst_v[e / 4u] = uvec4(floatBitsToUint(y[0]), floatBitsToUint(y[1]), floatBitsToUint(y[2]), floatBitsToUint(y[3]));
        dst_v[e / 4u + 1u] = uvec4(floatBitsToUint(y[4]), floatBitsToUint(y[5]), floatBitsToUint(y[6]), floatBitsToUint(y[7]));
    } else {
        dst_v[e / 8u] = uvec4(nu_pack2(DT_DST, y[0], y[1]), nu_pack2(DT_DST, y[2], y[3]), nu_pack2(DT_DST, y[4], y[5]),
                              nu_pack2(DT_DST, y[6], y[7]));
    }
}

// Element e of row `id`.
float load1(uint id, uint e)
{
    if (DT_TABLE == NU_Q8_0) {
        uint hb = pc.first_table + id * pc.row_stride + (e / 32u) * 17u;
        uint j = e % 32u;
        return nu_f16_to_f32(uint(table_h[hb])) * q8(uint(table_h[hb + 1u + j / 2u]), j & 1u);
    }
    if (DT_TABLE == NU_Q4_0) {
        uint hb = pc.first_table + id * pc.row_stride + (e / 32u) * 9u;
        uint j = e % 32u, k = j % 16u;
        uint byte_ = (uint(table_h[hb + 1u + k / 2u]) >> ((k & 1u) * 8u)) & 255u;
        return nu_f16_to_f32(uint(table_h[hb])) * float(int(j < 16u ? byte_ & 15u : byte_ >> 4u) - 8);
    }
    return NU_LOAD(table, DT_TABLE, pc.first_table + id * pc.row_stride + e * pc.col_stride);
}

void main()
{
    uint threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint per = VEC == 1u ? pc.dim / 8u : pc.dim; // units a row
    uint total = pc.n * per;
    for (uint base = gl_GlobalInvocationID.x; base < total; base += threads * UNITS) {
        if (VEC == 1u) {
            float x[UMAX][8];
            for (uint k = 0u; k < UNITS; k++) {
                uint idx = base + k * threads;
                if (idx < total) {
                    uint t = idx / per, u = idx % per;
                    int id = ids_w[pc.first_ids + t * pc.ids_stride];
                    if (id >= 0 && uint(id) < pc.vocab)
                        load8(uint(id), u * 8u, x[k]);
                    else
                        for (uint j = 0u; j < 8u; j++)
                            x[k][j] = 0.0f;
                }
            }
            for (uint k = 0u; k < UNITS; k++) {
                uint idx = base + k * threads;
                if (idx < total)
                    store8(pc.first_dst + idx * 8u, x[k]);
            }
        } else {
            float x[UMAX];
            for (uint k = 0u; k < UNITS; k++) {
                uint idx = base + k * threads;
                if (idx < total) {
                    uint t = idx / per, e = idx % per;
                    int id = ids_w[pc.first_ids + t * pc.ids_stride];
                    x[k] = id >= 0 && uint(id) < pc.vocab ? load1(uint(id), e) : 0.0f;
                }
            }
            for (uint k = 0u; k < UNITS; k++) {
                uint idx = base + k * threads;
                if (idx < total) {
                    NU_STORE(dst, DT_DST, pc.first_dst + idx, x[k])
                }
            }
        }
    }
}
