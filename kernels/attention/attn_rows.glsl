// attention/attn_rows.glsl: what nu_op_attention's kernels share (attn_decode.comp,
// attn_decode_sg.comp, attn_prefill.comp, attn_prefill_coopmat.comp): the push constants, which
// keys each query row sees (the scalar and the per-row form, sliding windows), and the logit
// softcap. Included after ops.glsl with ATTN_POS_BINDING and ATTN_SLOT_BINDING defined (the I32
// positions and slots; empty ranges the kernel never reads in the scalar form) and the uint
// specialisation constant SOFTCAP (1: softcap the scores).
//
// Push (src/ops/attention.c's attn_push; strides in elements, the cache's [slots, positions,
// kv_heads, head_dim] strides k_slot, k_pos, k_head, k_dim; dst contiguous [tokens, q_heads, D]):
//   flags: ATTN_CAUSAL (the scalar form's mask), ATTN_PER_ROW (positions from binding
//   ATTN_POS_BINDING), ATTN_SLOTS (slots from ATTN_SLOT_BINDING; else slot 0), ATTN_FRESH (each
//   row's own key and value fresh: attention/attn_fresh.glsl, which alone reads first_kn and
//   first_vn; alone, the scalar form's one row at position kv_length - 1; with ATTN_PER_ROW, the
//   per-row form's rows, each at its own position as below).
#include "elementwise/activation.glsl"

#define ATTN_CAUSAL 1u
#define ATTN_PER_ROW 2u
#define ATTN_SLOTS 4u
#define ATTN_FRESH 8u

layout(push_constant) uniform Push {
    uint tokens, q_heads, group;    // group = q_heads / kv_heads
    uint q_position, kv_length, positions, flags;
    float scale;
    uint first_q, q_tok, q_head, q_dim;
    uint first_k, k_pos, k_head, k_dim;
    uint first_v, v_pos, v_head, v_dim;
    uint first_dst;
    uint k_slot, v_slot, slots;     // the cache's slot strides and slots
    uint window;                    // 0: none
    float softcap;                  // used where SOFTCAP is 1
    uint first_pos, pos_stride, first_slot, slot_stride;
    uint first_kn, first_vn;        // the fresh keys and values (ATTN_FRESH)
} pc;

layout(std430, binding = ATTN_POS_BINDING) readonly buffer AttnPos { int attn_pos_w[]; };
layout(std430, binding = ATTN_SLOT_BINDING) readonly buffer AttnSlot { int attn_slot_w[]; };

// The keys query row t sees: [lo, hi) of slot `slot`. Per-row: position p = positions[t], keys
// 0 .. p (p + 1 of them; fresh or not); a row out of range (p < 0, p >= the cache's positions, a
// slot outside 0 .. slots - 1) sees none (lo = hi = 0). Scalar: position q_position + t, keys below
// kv_length (capped by the cache's positions) and, causal, up to the position; scalar fresh
// (ATTN_FRESH alone): position kv_length - 1, keys below kv_length, none where kv_length is 0 or
// past the cache's positions (a launch's value: the row's key would have no place). A window keeps
// keys j > p - window only. Every bound stays below the cache's positions, whatever the launch's
// values.
void attn_row(uint t, out uint slot, out uint lo, out uint hi)
{
    uint P = pc.positions, p;
    slot = 0u;
    lo = 0u;
    hi = 0u;
    if ((pc.flags & ATTN_PER_ROW) != 0u) {
        int ip = attn_pos_w[pc.first_pos + t * pc.pos_stride];
        int is = (pc.flags & ATTN_SLOTS) != 0u ? attn_slot_w[pc.first_slot + t * pc.slot_stride] : 0;
        if (ip < 0 || uint(ip) >= P || is < 0 || uint(is) >= pc.slots)
            return;
        slot = uint(is);
        p = uint(ip);
        hi = p + 1u;
    } else if ((pc.flags & ATTN_FRESH) != 0u) {
        if (pc.kv_length == 0u || pc.kv_length > P)
            return;
        p = pc.kv_length - 1u;
        hi = pc.kv_length;
    } else {
        p = pc.q_position + t;
        hi = min(pc.kv_length, P);
        if ((pc.flags & ATTN_CAUSAL) != 0u && p < hi)
            hi = p + 1u;
    }
    if (pc.window != 0u && p >= pc.window)
        lo = min(p - pc.window + 1u, hi);
}

// The score after the softcap: cap * tanh(s / cap) (SOFTCAP 1), else s.
float attn_cap(float s) { return SOFTCAP == 1u ? pc.softcap * act_tanh(s / pc.softcap) : s; }
