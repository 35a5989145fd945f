// attention/attn_prefill_coopmat.glsl: what the two matrix-unit prefill kernels share
// (attn_prefill_coopmat.comp, the softmax through shared memory; attn_prefill_frag.comp, the softmax
// in the fragments' registers): nu_op_attention's prefill path (flash attention, online softmax,
// causal or not, GQA; attn_prefill.comp's push constants and bindings) through
// VK_KHR_cooperative_matrix, for F16 q, k and v (F32 accumulation, any dst dtype). src/ops/attention.c
// takes them where the device offers 16x16x16 F16 x F16 + F32 products at subgroup scope, subgroups
// of 32, head_dim a multiple of 16 whose tiles fit shared memory, k's and v's rows 16-byte
// aligned, and the scalar form (slot 0, q_position and kv_length; with or without a sliding
// window and a logit softcap: attn_rows.glsl's rules) (else attn_prefill.comp).
//
// Layout of the work: workgroup (x, h) takes query rows BR x .. BR x + BR - 1 of head h (KV head
// h / group), a 16-row fragment row per subgroup (NSG = BR / 16 subgroups). q is staged once
// through shared memory (scaled, then F16: stage_q) into each subgroup's D / 16 A fragments, kept in
// registers. Per block of BC keys (the includer's ATTN_BC), k's and v's rows go to shared memory
// (load_block: 16-byte loads, rows padded by 8 halves), where S = Q K^T reads k's rows as B
// fragments column-major and O += P V reads v's row-major. Blocks of keys before the workgroup's
// first row's window are skipped.
// Specialisation constants: 0 QDT (F16), 1 KDT (F16), 2 VDT (F16), 3 DDT (ops.glsl code),
// 4 LOCAL (threads: 32 NSG), 5 D (a multiple of 16), 6 SOFTCAP (1: the scores softcapped); the
// includer's from 7 on. Bindings: 0 dst, 1 q, 2 k, 3 v, 4 and 5 (the per-row form's positions and
// slots: empty ranges, unread). Push: attention/attn_rows.glsl.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "ops.glsl"
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(constant_id = 0) const uint QDT = NU_F16;
layout(constant_id = 1) const uint KDT = NU_F16;
layout(constant_id = 2) const uint VDT = NU_F16;
layout(constant_id = 3) const uint DDT = NU_F32;
layout(constant_id = 5) const uint D = 128u;
layout(local_size_x = 128, local_size_x_id = 4) in;
const uint NSG = gl_WorkGroupSize.x / 32u, BR = 16u * NSG, BC = ATTN_BC;
const uint ROW = (D + 8u) / 8u; // a k or v row in shared memory, in uvec4 (D + 8 halves)
const uint FD = D / 16u;        // fragments along the head dims

#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define MA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>

shared uvec4 kv[2u * BC * ROW]; // k's rows then v's; at the start q's rows, 64 at a time

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, q)
NU_TENSOR(readonly, 2, k)
NU_TENSOR(readonly, 3, v)
layout(constant_id = 6) const uint SOFTCAP = 0u; // (the host takes the per-row form to attn_prefill.comp)
#define ATTN_POS_BINDING 4
#define ATTN_SLOT_BINDING 5
#include "attention/attn_rows.glsl"

// q's rows row0 + 64 pass .. + 63 of head h, times qscale, as F16 in kv's space (rows past tokens
// 0), for the subgroups 4 pass .. 4 pass + 3 to load their A fragments from (after the barrier here).
void stage_q(uint pass, uint row0, uint h, float qscale)
{
    if (pass > 0u)
        barrier(); // the previous pass's fragments are loaded
    for (uint i = gl_LocalInvocationID.x; i < 64u * (D / 8u); i += gl_WorkGroupSize.x) {
        uint r = i / (D / 8u), c = i % (D / 8u), row = row0 + 64u * pass + r;
        uvec4 w = uvec4(0u);
        if (row < pc.tokens) {
            uint at = pc.first_q + row * pc.q_tok + h * pc.q_head + 8u * c;
            float x[8];
            nu_unpack8(QDT, q_v[at / 8u], uvec4(0u), x);
            [[unroll]] for (uint j = 0u; j < 4u; j++)
                w[j] = packHalf2x16(vec2(qscale * x[2u * j], qscale * x[2u * j + 1u]));
        }
        kv[r * ROW + c] = w;
    }
    barrier();
}

// The block of keys j0 .. j0 + BC - 1 of KV head kvh (past kend: 0): k's rows, then v's, in kv,
// between two barriers (the first: every subgroup is done with the previous block and with q's
// staging). Each thread's 16-byte loads are all asked for before the first barrier, so that they
// are in flight together (a load then a store each, as before 2026-12-08, left one in flight at a
// time: attn_prefill_coopmat.comp took 1.6x as long; bench/RESULTS.md).
void load_block(uint j0, uint kend, uint kvh)
{
    const uint UNITS = 2u * BC * (D / 8u), EACH = (UNITS + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x;
    uvec4 w[EACH];
    [[unroll]] for (uint u = 0u; u < EACH; u++) {
        uint i = u * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
        uint which = i / (BC * (D / 8u)), r = (i / (D / 8u)) % BC, c = i % (D / 8u), j = j0 + r;
        w[u] = uvec4(0u);
        if (i < UNITS && j < kend)
            w[u] = which == 0u ? k_v[(pc.first_k + j * pc.k_pos + kvh * pc.k_head) / 8u + c]
                               : v_v[(pc.first_v + j * pc.v_pos + kvh * pc.v_head) / 8u + c];
    }
    barrier();
    [[unroll]] for (uint u = 0u; u < EACH; u++) {
        uint i = u * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
        if (i < UNITS)
            kv[(i / (BC * (D / 8u)) * BC + (i / (D / 8u)) % BC) * ROW + i % (D / 8u)] = w[u];
    }
    barrier();
}
