// attention/attn_fresh.glsl: the decode kernels' fresh form (attn_decode.comp, attn_decode_sg.comp;
// nu_attention_desc.fresh_k and fresh_v): rows whose own keys and values come straight from their
// projections, so that a decode step needs no RoPE and no cache writes of its own before the
// attention (one dependency level fewer a layer). Included after attn_rows.glsl and the kernel's
// bindings 0..7, with the kernel's QDT, KDT, VDT and D declared.
//
// Row t is at position p: kv_length - 1 in the scalar form (attn_rows.glsl's ATTN_FRESH, one row),
// positions[t] of slot slots[t] in the per-row form (ATTN_FRESH with ATTN_PER_ROW: a batched decode
// step, each row its own slot). Each workgroup stages, in shared memory, its query heads of row t
// turned by RoPE at p (fq), and row t's key of its KV head turned at p and its value (fk, fv), the
// key and value rounded to the cache's dtype as the cache holds them; where FNORM asks, q's heads
// and the key are RMS-normalised (each head over its D elements, times its weight: nu_op_rms_norm's
// arithmetic, Qwen3's and Gemma 3's q and k norms) before they turn;
// the key loop takes key p from there, not from the cache. The workgroups of the split that holds
// key p, one for each KV head, write that key and value into the cache at p of the row's slot
// (bindings 11 and 12: the caches of bindings 2 and 3 again, writable); no workgroup of the row
// reads them from there. Another row of the launch reads that slot only where the caller broke
// the per-row form's rule (one row a slot): then it may read the position's old contents or the
// new ones (wrong values for that row, never an access outside the bindings).
// The rotation is rope/rope.glsl's (nu_op_rope's, nu_op_kv_append_rope's and nu_op_kv_write's F32
// angle and the same products), so the roped q, the key and the cache's contents are those of
// nu_op_rope, nu_op_kv_append_rope (nu_op_kv_write with rope) and nu_op_kv_append (nu_op_kv_write).
//
// Specialisation constants (12..28; FMODE 0 leaves the kernel as it was):
//   12 FMODE   0 not fresh; 1 fresh, no RoPE; 2 fresh, RoPE pairs (x[2i], x[2i+1]); 3 fresh, RoPE
//              pairs (x[i], x[i + rotary/2])
//   13 FROT    dimensions rotated (even, at most D)
//   14 FSTEP   2 log2(theta) / FROT; 15 FPSCALE 1 / linear_factor; 16 FMSCALE attn_factor (floats)
//   17 FHAS_FF 1: frequency factors (binding 10) at FF_FIRST (18), FF_STRIDE (19) apart
//   20 KNDT, 21 VNDT   the fresh key's and value's dtypes (ops.glsl codes)
//   22 FNORM   bit 0: q's heads RMS-normalised by the weight of binding 13, bit 1: the key by
//              binding 14's; 23 FEPS the norms' epsilon (float); 24 FQN_FIRST, 25 FKN_FIRST the
//              weights' first elements (contiguous F32, F16 or BF16 [D]); 26 FNDT their dtype
//   27 FKN_TOK, 28 FVN_TOK   the fresh keys' and values' row strides (elements; 0 for one row)
// Bindings: 8 the fresh keys, 9 the fresh values ([rows, kv_heads, D], each head's D elements
// contiguous, row t's from push first_kn and first_vn plus t FKN_TOK and t FVN_TOK), 10 the
// frequency factors, 11 and 12 the k and v caches (written), 13 and 14 the norms' weights; empty
// ranges where unused.
#define NU_ROPE_FF_BINDING 10
#include "rope/rope.glsl"

layout(constant_id = 12) const uint FMODE = 0u;
layout(constant_id = 13) const uint FROT = 0u;
layout(constant_id = 14) const float FSTEP = 0.0;
layout(constant_id = 15) const float FPSCALE = 1.0;
layout(constant_id = 16) const float FMSCALE = 1.0;
layout(constant_id = 17) const uint FHAS_FF = 0u;
layout(constant_id = 18) const uint FF_FIRST = 0u;
layout(constant_id = 19) const uint FF_STRIDE = 0u;
layout(constant_id = 20) const uint KNDT = NU_F32;
layout(constant_id = 21) const uint VNDT = NU_F32;
layout(constant_id = 22) const uint FNORM = 0u;
layout(constant_id = 23) const float FEPS = 0.0;
layout(constant_id = 24) const uint FQN_FIRST = 0u;
layout(constant_id = 25) const uint FKN_FIRST = 0u;
layout(constant_id = 26) const uint FNDT = NU_F32;
layout(constant_id = 27) const uint FKN_TOK = 0u;
layout(constant_id = 28) const uint FVN_TOK = 0u;
const bool FRESH = FMODE != 0u;
const uint FNH = ATTN_FRESH_HEADS;

NU_TENSOR(readonly, 8, kn)
NU_TENSOR(readonly, 9, vn)
NU_TENSOR(writeonly, 11, kw)
NU_TENSOR(writeonly, 12, vw)
NU_TENSOR(readonly, 13, qnw)
NU_TENSOR(readonly, 14, knw)

// fq: the workgroup's query heads (turned, not scaled); fk and fv: the row's key and value of the
// workgroup's KV head (as the cache holds them); fraw: the heads and the key as read (q's heads,
// then the key), fss and frs: the norms' partial sums and each head's 1 / rms.
shared float fq[FRESH ? FNH * D : 1u], fk[FRESH ? D : 1u], fv[FRESH ? D : 1u];
shared float fraw[FRESH ? (FNH + 1u) * D : 1u];
shared float fss[FNORM != 0u ? ATTN_LOCAL : 1u], frs[FNORM != 0u ? FNH + 1u : 1u];

// Element e of staged head h (fraw: q's heads 0 .. FNH - 1, the key FNH), normalised where FNORM
// asks for that head.
float fresh_normed(uint h, uint e)
{
    float x = fraw[h * D + e];
    bool key = h == FNH;
    if ((FNORM & (key ? 2u : 1u)) == 0u)
        return x;
    float w = key ? NU_LOAD(knw, FNDT, FKN_FIRST + e) : NU_LOAD(qnw, FNDT, FQN_FIRST + e);
    return x * frs[h] * w;
}

// Element e of staged head h, normalised, turned by RoPE at position p where FMODE rotates
// (rope/rope.glsl's rotation).
float fresh_turned(uint h, uint e, uint p)
{
    uint npairs = FROT / 2u;
    if (FMODE < 2u || e >= FROT)
        return fresh_normed(h, e);
    uint i = FMODE == 2u ? e / 2u : e % npairs;
    uint e0 = FMODE == 2u ? 2u * i : i, e1 = FMODE == 2u ? 2u * i + 1u : i + npairs;
    float c, s;
    nu_rope_rotation(float(p) * FPSCALE, i, FSTEP, FHAS_FF == 1u, FF_FIRST + i * FF_STRIDE, FMSCALE, c, s);
    float x0 = fresh_normed(h, e0), x1 = fresh_normed(h, e1);
    return e == e0 ? x0 * c - x1 * s : x0 * s + x1 * c;
}

// The F32 value of F16 bits h, by integer arithmetic: NVIDIA's compiler (H100, driver of
// 2026-12) folds unpackHalf2x16(packHalf2x16(x)) into x, dropping the rounding that the cache's
// own round trip through memory keeps.
float fresh_f16_value(uint h)
{
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0u) // zero and subnormals: m 2^-24, exact
        return uintBitsToFloat(sign | floatBitsToUint(float(m) * 5.9604644775390625e-8));
    return uintBitsToFloat(sign | (e == 31u ? 0x7f800000u : (e + 112u) << 23) | (m << 13));
}

// x as a cache of dtype dt holds it (rounded to nearest even).
float fresh_round(uint dt, float x)
{
    return dt == NU_F32 ? x : (dt == NU_F16 ? fresh_f16_value(nu_f32_to_f16(x)) : nu_bf16_to_f32(nu_f32_to_bf16(x)));
}

// Called by every invocation of the workgroup (uniform control flow; `seen`: the row sees keys,
// uniform too): stages fq (the FNH query heads from element qbase, qstride apart), fk and fv (row
// t's, KV head kvh) at position p, and where `write` (the workgroup writing them) stores the key
// and value into the caches at kbase + p k_pos and vbase + p v_pos (kbase and vbase: the head's
// first element in the row's slot). Ends with a workgroup barrier.
void fresh_stage(bool seen, uint t, uint qbase, uint qstride, uint kvh, uint p, uint kbase, uint vbase, bool write,
                 uint tid)
{
    if (seen) {
        for (uint i = tid; i < FNH * D; i += ATTN_LOCAL)
            fraw[i] = NU_LOAD(q, QDT, qbase + (i / D) * qstride + (i % D) * pc.q_dim);
        for (uint e = tid; e < D; e += ATTN_LOCAL) {
            fraw[FNH * D + e] = NU_LOAD(kn, KNDT, pc.first_kn + t * FKN_TOK + kvh * D + e);
            float vx = NU_LOAD(vn, VNDT, pc.first_vn + t * FVN_TOK + kvh * D + e);
            fv[e] = fresh_round(VDT, vx);
            if (write)
                NU_STORE(vw, VDT, vbase + p * pc.v_pos + e * pc.v_dim, vx)
        }
    }
    barrier();
    if (FNORM != 0u) // each normalised head's 1 / rms: its squares summed over the workgroup
        for (uint h = 0u; h <= FNH; h++) {
            if ((FNORM & (h == FNH ? 2u : 1u)) == 0u)
                continue;
            float part = 0.0;
            if (seen)
                for (uint e = tid; e < D; e += ATTN_LOCAL)
                    part += fraw[h * D + e] * fraw[h * D + e];
            fss[tid] = part;
            barrier();
            for (uint half_ = ATTN_LOCAL / 2u; half_ > 0u; half_ >>= 1u) {
                if (tid < half_)
                    fss[tid] += fss[tid + half_];
                barrier();
            }
            if (tid == 0u)
                frs[h] = inversesqrt(fss[0] / float(D) + FEPS);
            barrier();
        }
    if (seen) {
        for (uint i = tid; i < FNH * D; i += ATTN_LOCAL)
            fq[i] = fresh_turned(i / D, i % D, p);
        for (uint e = tid; e < D; e += ATTN_LOCAL) {
            float kx = fresh_turned(FNH, e, p);
            fk[e] = fresh_round(KDT, kx);
            if (write)
                NU_STORE(kw, KDT, kbase + p * pc.k_pos + e * pc.k_dim, kx)
        }
    }
    barrier();
}
