#version 450
// gather: dst[t, :] = table[ids[t], :] (nu_op_gather, nuvec/ops.h): an embedding lookup from a
// table [vocab, dim] of F32, F16, BF16 (any row stride; columns strided on the general path) or
// a block dtype (contiguous rows of blocks, any row stride in blocks), into a contiguous dst
// [n, dim] of any float dtype. An id outside [0, vocab) gives a row of zeros. Dequantization is
// kernels/quant.glsl's, in F32, exactly the format's value (nuvec/tensor.h).
//
// Specialisation constants (the tuning knobs LOCAL and UNITS: defaults in src/ops/gather.c, from
// nu_gather_desc's tune, NUVEC_TUNE_GATHER over it: docs/knobs.md):
//   0 LOCAL  threads per workgroup (local_size_x_id; default 256)
//   1 DT_TABLE  ops.glsl's codes: a float or block dtype
//   2 DT_DST  ops.glsl codes
//   3 VEC    1: dim % 8 == 0, dst's first element 16-byte aligned, and for a float table rows
//            with stride 1 whose starts are 16-byte aligned: a thread takes units of 8 elements
//            of a row (float tables: 16-byte loads; block tables: a group of a block, decoded
//            by quant.glsl) and stores them with 16-byte stores. 0: a thread takes one element
//            a step (block tables: the group's element).
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
#define UMAX 4u
NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, table)
#define NU_QB table
#include "quant.glsl"
const bool BLOCK = NU_IS_BLOCK(DT_TABLE);
layout(std430, binding = 2) readonly buffer IDS { int ids_w[]; };
layout(push_constant) uniform Push {
    uint n, dim, vocab;
    uint first_dst, first_table, first_ids;
    uint row_stride; // table's row stride: elements (float), 16-bit halves (block dtypes)
    uint col_stride; // float tables: elements
    uint ids_stride;
} pc;

// Eight elements of row `id` from element e (a multiple of 8).
void load8(uint id, uint e, out float x[8])
{
    if (BLOCK) {
        uint be = nu_block_elements(DT_TABLE);
        uint hb = pc.first_table + id * pc.row_stride + (e / be) * nu_block_halves(DT_TABLE);
        table_dequant8(DT_TABLE, hb, (e % be) / 8u, x);
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
    if (BLOCK) {
        float x[8];
        load8(id, e & ~7u, x);
        return x[e & 7u];
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
