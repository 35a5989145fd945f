/* attention.c: scaled dot-product attention with grouped-query heads (nu_op_attention), in the
 * scalar form (one sequence: q_position, kv_length) and the per-row form (a batch: each row's
 * position and slot from I32 tensors), with sliding windows and logit softcaps. Kernels under
 * kernels/attention/: attn_decode.comp, attn_decode_sg.comp and attn_decode_keys.comp (each row's
 * keys split over workgroups, the splits merged by attn_combine.comp, a second dispatch, or by the
 * last split to finish: attn_splits.glsl), attn_prefill.comp (flash-attention style tiles; a tile
 * mixing slots takes them one after the other), and on the matrix units attn_prefill_frag.comp
 * (the softmax in the fragments' registers, where their layout allows: nu__op_fragments_quad) and
 * attn_prefill_coopmat.comp (the softmax through shared memory), which share
 * attn_prefill_coopmat.glsl; which keys a row sees is attn_rows.glsl's, shared by all. Each
 * .comp's header describes its layout and constants. The cache writes are kv_cache.c's.
 *
 * The KV cache: one K and one V tensor per layer, [slots, positions, kv_heads, head_dim] (rank 3:
 * one slot), position p of slot s at [s, p] (F32, F16 or BF16). A batched decode step writes its
 * rows' k and v (nu_op_kv_write at their positions and slots, k with RoPE), then attends with the
 * same positions and slots; the scalar form appends at position p (nu_op_kv_append(_rope)) and
 * attends with q_position = p and kv_length = p + 1, or does all three in the decode dispatch
 * (the fresh form, desc.fresh_k: attention/attn_fresh.glsl; the row at kv_length - 1, so that a
 * graph's one launch parameter moves it); so can a batched decode step, one row a slot (the fresh
 * per-row form: row t at positions[t] of slots[t]); prefill writes its tokens at 0.. and runs
 * with q_position 0, kv_length = tokens, causal (or per-row positions 0..).
 *
 * The decode path's partials: the recording's scratch (nu__commands_scratch). Every op of a
 * recording gets the same buffer (the largest asked for), their uses ordered by the recording's
 * hazard tracking: a command buffer frees it at commit (nuvec keeps a freed buffer's memory until
 * the GPU work recorded on it completes: buffer.c's guard), a graph keeps it until it is freed
 * since every launch reuses it. So a decode graph's layers share one set of partials instead of
 * holding one each (a 7B model at 4,096 positions: 0.5 MiB instead of 17 MiB a graph), and
 * callers need no workspace argument. The fused merge's counters are a second, small buffer
 * (nu_buffer_from: fresh memory, zeros written when it is made, so no fill is recorded; each
 * launch leaves them zero again), handed over the same way. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "kernels_table.h"
#include "exec/commands.h"
#include "exec/graph.h"
#include "ops/kv_cache.h"
#include "ops/op.h"
#include "ops/rope.h"

#define FN "nu_op_attention"

/* Threads of the decode and prefill workgroups. */
#define ATTN_LOCAL 128u
/* The decode path's keys a split by default: 64 up to 1024 keys, 128 up to 8192, 256 beyond; and
 * (attn_decode_sg.comp) 4 keys in flight a subgroup, 2 query heads a workgroup. Measured on the
 * H200 (bench/RESULTS.md, 2026-12-01, `nuvec bench ops --filter attn_dec` with NUVEC_ATTENTION
 * settings; 32 query heads, head_dim 128, F16, 8 or 32 KV heads): chunk 128 at 4096 keys gave 54%
 * of the copy bandwidth with 32 KV heads (256: 36%, 512: 19%), 64 at 512 keys 15% (128: 9%), 256
 * at 32768 keys 79% (128: 77%); 2 heads and 4 keys lifted 8 KV heads at 4096 keys from 14% to 18%
 * and at 32768 from 25% to 30% (4 heads or 16 keys were slower). */
/* Then (third session, with the splits merged by attn_combine.comp; `nuvec bench ops --filter
 * attn_dec` with NUVEC_ATTENTION chunk=32..256): chunk 32 at 512 keys took 7.07 us with 8 KV
 * heads and 9.67 with 32, against 10.04 and 14.71 for 64: short contexts want more splits. */
static uint32_t default_chunk(uint32_t kv_length) { return kv_length <= 1024 ? 32u : kv_length <= 8192 ? 128u : 256u; }
/* attn_decode_keys.comp's splits by default: 256 keys a split, at most 32 splits (longer splits
 * past 8192 keys). H100, 8 KV heads, 4 heads a workgroup, us with 128 / 256 / 384 / 512 / 768 /
 * 1024 / 1536 keys a split: 4096 keys 20.4 / 20.1 / - / 27.0; 8192 keys 34.7 / 27.8 / 30.7 / 29.2;
 * 32768 keys - / - / - / 75.6 / 92.0 / 66.1 / 83.6. The best are where the splits times the 8
 * workgroup columns come nearest one wave of two workgroups an SM (264; the kernel's registers let
 * two run at once); 32 splits of 8 columns is that wave on the H100 (bench/RESULTS.md,
 * twenty-ninth session). */
static uint64_t keys_splits(uint32_t max_length)
{
    uint64_t splits = ((uint64_t)max_length + 255) / 256;
    return splits > 32 ? 32 : splits;
}

/* NUVEC_ATTENTION="path=decode|prefill split=S chunk=C br=BR bc=BC subgroup=0|1 keys=K heads=H
 * tc=0|1 tc_rows=64|128 tc_keys=32|64 frag=0|1 combine=fused|separate fused_max=N bykey=0|1"
 * (docs/knobs.md): developer overrides of the desc's nu_attention_tune, field by field. */
static bool apply_knob(void *ctx, const char *key, const char *value)
{
    nu_attention_tune *t = ctx;
    uint32_t on;
    if (!strcmp(key, "path") && (!strcmp(value, "decode") || !strcmp(value, "prefill")))
        return t->path = !strcmp(value, "prefill") ? NU_ATTENTION_PATH_PREFILL : NU_ATTENTION_PATH_DECODE, true;
    if (!strcmp(key, "split"))
        return nu__op_knob_u32(value, 1, 65535, false, &t->splits);
    if (!strcmp(key, "chunk"))
        return nu__op_knob_u32(value, 1, UINT32_MAX, false, &t->chunk);
    if (!strcmp(key, "br"))
        return nu__op_knob_u32(value, 4, 64, true, &t->br);
    if (!strcmp(key, "bc"))
        return nu__op_knob_u32(value, 1, 128, false, &t->bc);
    if (!strcmp(key, "subgroup") && nu__op_knob_u32(value, 0, 1, false, &on))
        return t->no_subgroup = !on, true;
    if (!strcmp(key, "keys"))
        return nu__op_knob_u32(value, 1, 16, false, &t->keys);
    if (!strcmp(key, "heads"))
        return nu__op_knob_u32(value, 1, 8, false, &t->heads);
    if (!strcmp(key, "tc") && nu__op_knob_u32(value, 0, 1, false, &on))
        return t->no_matrix_units = !on, true;
    if (!strcmp(key, "tc_rows"))
        return nu__op_knob_u32(value, 64, 128, true, &t->tc_rows);
    if (!strcmp(key, "tc_keys"))
        return nu__op_knob_u32(value, 32, 64, true, &t->tc_keys);
    if (!strcmp(key, "frag") && nu__op_knob_u32(value, 0, 1, false, &on))
        return t->no_fragments = !on, true;
    if (!strcmp(key, "combine") && (!strcmp(value, "fused") || !strcmp(value, "separate")))
        return t->combine = !strcmp(value, "fused") ? NU_ATTENTION_COMBINE_FUSED : NU_ATTENTION_COMBINE_SEPARATE, true;
    if (!strcmp(key, "fused_max"))
        return nu__op_knob_u32(value, 2, 65535, false, &t->fused_max);
    if (!strcmp(key, "bykey") && nu__op_knob_u32(value, 0, 1, false, &on))
        return t->by_key = on, t->no_by_key = !on, true;
    return false;
}

/* The desc's tuning checked (the field named where out of range), the environment's overrides
 * applied, and the defaults filled in. */
static nu_status resolve_tune(nu_device *d, const nu_attention_tune *in, nu_attention_tune *t)
{
    *t = *in;
    const char *bad = (unsigned)t->path > NU_ATTENTION_PATH_PREFILL ? "path"
                      : t->splits > 65535 ? "splits"
                      : t->br && (t->br < 4 || t->br > 64 || (t->br & (t->br - 1))) ? "br"
                      : t->bc > 128 ? "bc"
                      : t->keys > 16 ? "keys"
                      : t->heads > 8 ? "heads"
                      : t->tc_rows && t->tc_rows != 64 && t->tc_rows != 128 ? "tc_rows"
                      : t->tc_keys && t->tc_keys != 32 && t->tc_keys != 64 ? "tc_keys"
                      : (unsigned)t->combine > NU_ATTENTION_COMBINE_FUSED ? "combine"
                      : t->fused_max == 1 || t->fused_max > 65535 ? "fused_max" : NULL;
    if (bad)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": desc->tune.%s is out of range (nuvec/ops.h: nu_attention_tune)",
                        bad);
    nu_status st = nu__op_env_knobs(d, FN, "NUVEC_ATTENTION", "path=decode|prefill, split=1..65535, chunk=1.., "
                                    "br=4|8|16|32|64, bc=1..128, subgroup=0|1, keys=1..16, heads=1..8, tc=0|1, "
                                    "tc_rows=64|128, tc_keys=32|64, frag=0|1, combine=fused|separate, "
                                    "fused_max=2..65535, bykey=0|1", apply_knob, t);
    /* The defaults (nuvec/ops.h). The splits merged by attn_combine.comp by default: the merge in
     * the last split to finish (combine=fused) was slower on the H200 at 512 and 4096 keys (12.3 /
     * 41.1 us against 7.1 / 21.5 with 8 KV heads at chunk 32; 13.0 / 36.4 against 9.7 / 37.5 with
     * 32), faster only at 32768 keys with 32 KV heads (150 against 165 us): the merging
     * workgroup's work comes after every other's, where the second dispatch spreads it over the
     * device. */
    if (!t->keys)
        t->keys = 4;
    /* heads 0 stays: record_decode chooses (2 where the group allows). */
    /* The last split's merge grows with the splits, after every other split's work, so past some
     * count the second dispatch wins (H100: gemma2-9b Q4_K_M decode after 8,000 tokens, 64 splits,
     * one head a workgroup, 125.1 tokens/s merged in the last split against 175.8 with
     * attn_combine.comp; 7B Q4_0 after 512 tokens, 21 splits, 409.0 merged in the last split
     * against 401.9; bench/RESULTS.md). 32 lies between; counts near it were not measured. */
    if (!t->fused_max)
        t->fused_max = 32;
    return st;
}

/* Whether view t's rows (its last dimension) are contiguous and every row starts 16-byte aligned
 * in its binding (first element `first`). */
static bool rows_aligned(const nu_tensor *t, uint32_t first)
{
    uint64_t es = nu_dtype_size(t->dtype);
    if (t->strides[t->rank - 1] != 1 || (uint64_t)first * es % 16)
        return false;
    for (uint32_t i = 0; i + 1 < t->rank; i++)
        if (t->shape[i] > 1 && (uint64_t)t->strides[i] * es % 16)
            return false;
    return true;
}

/* The most elements (a power of two, at most `most`) that can be read from view t's rows at once:
 * contiguous rows of a multiple of them, starting at multiples of them (in the binding). 1, 2 or
 * 4 for attn_decode_sg.comp's lanes; 8 F16 elements, a 16-byte unit, for attn_decode_keys.comp. */
static uint32_t row_pack(const nu_tensor *t, uint32_t first, uint32_t most)
{
    uint32_t last = t->rank - 1;
    if (t->strides[last] != 1)
        return 1;
    for (uint32_t p = most; p > 1; p /= 2) {
        bool ok = t->shape[last] % p == 0 && first % p == 0;
        for (uint32_t i = 0; ok && i < last; i++)
            ok = t->shape[i] < 2 || t->strides[i] % p == 0;
        if (ok)
            return p;
    }
    return 1;
}

/* The fresh form's staging in shared memory for hg heads a workgroup (attn_fresh.glsl: the heads
 * turned and as read, the key and value, the norms' sums). */
static uint64_t fresh_shared(bool fresh, uint32_t hd, uint32_t hg)
{
    return fresh ? 4ull * ((2ull * hg + 3) * hd + ATTN_LOCAL + hg + 1) : 0;
}

/* attn_decode_keys.comp's shared memory for hg heads a workgroup: q, the tile's scores, the
 * heads' factors, maxima and sums, the key groups' outputs, attn_splits.glsl's merge, and the
 * fresh form's staging. */
static uint64_t keys_shared(bool fresh, uint32_t hd, uint32_t hg)
{
    uint64_t groups = ATTN_LOCAL / (hd / 8);
    return 4ull * hg * (hd + ATTN_LOCAL + 3 + groups * hd) + 4ull * hg * (1 + 2 * ATTN_LOCAL) + 16 +
           fresh_shared(fresh, hd, hg);
}

/* attn_prefill.comp's shared memory: Qs, Ks (padded), Vs, S (padded) and the rows' slots and keys. */
static uint64_t prefill_shared(uint32_t d, uint32_t br, uint32_t bc)
{
    return 4ull * ((uint64_t)br * d + (uint64_t)bc * (d + 1) + (uint64_t)bc * d + (uint64_t)br * (bc + 1) + 3ull * br + 3);
}

/* attention/attn_rows.glsl's push constants. */
typedef struct attn_push {
    uint32_t tokens, q_heads, group;
    uint32_t q_position, kv_length, positions, flags;
    float scale;
    uint32_t first_q, q_tok, q_head, q_dim;
    uint32_t first_k, k_pos, k_head, k_dim;
    uint32_t first_v, v_pos, v_head, v_dim;
    uint32_t first_dst;
    uint32_t k_slot, v_slot, slots;
    uint32_t window;
    float softcap;
    uint32_t first_pos, pos_stride, first_slot, slot_stride;
    uint32_t first_kn, first_vn;
} attn_push;
#define ATTN_CAUSAL 1u
#define ATTN_PER_ROW 2u
#define ATTN_SLOTS 4u
#define ATTN_FRESH 8u
/* The fresh form's specialisation constants (attention/attn_fresh.glsl: ids 12..28). */
#define ATTN_FRESH_CONST 12
#define ATTN_FRESH_CONSTS 17
#define ATTN_CONSTS (ATTN_FRESH_CONST + ATTN_FRESH_CONSTS)

/* Strides of dimensions of size 1 are never used: 0 keeps them within 32 bits. */
static uint32_t stride_of(const nu_tensor *t, uint32_t i) { return t->shape[i] > 1 ? (uint32_t)t->strides[i] : 0; }

/* What nu_op_attention resolved and bound, for the path that records it. */
typedef struct attn_op {
    nu_device *d;
    int64_t tokens, qh, hd, kvh;
    bool per_row, softcap;
    uint32_t max_length;   /* the keys a row sees at most (the decode split count from it) */
    nu_attention_tune tune;
    nu_binding bind[6];    /* dst, q, k, v, positions, slots */
    /* The fresh form (desc.fresh_k): the bindings 8..14 (fresh keys, values, frequency factors,
     * the caches written, the norms' weights; empty ranges otherwise) and constants 12..28 of
     * attn_fresh.glsl. */
    bool fresh;
    nu_binding fresh_bind[7];
    uint32_t fresh_const[ATTN_FRESH_CONSTS];
    uint32_t first[4];
    uint32_t qdt, kdt, vdt, ddt;
    attn_push push;
} attn_op;

/* A dispatch whose push constants are attn_push's, `back` dispatches before the op's last: the
 * scalar form's q_position and kv_length noted for nu_op_graph_param. */
static void note_values(nu_commands *c, const attn_op *a, uint32_t back)
{
    nu__op_value_at values[2] = {{NU_OP_VALUE_Q_POSITION, back, offsetof(attn_push, q_position)},
                                 {NU_OP_VALUE_KV_LENGTH, back, offsetof(attn_push, kv_length)}};
    nu__graph_note_values(c, FN, values, a->per_row ? 0 : 2);
}

/* The prefill path: the matrix units' kernel where it applies, else attn_prefill.comp. */
static nu_status record_prefill(nu_commands *c, attn_op *a, const nu_tensor *q, const nu_tensor *k, const nu_tensor *v)
{
    nu_device *d = a->d;
    nu_status st;
    nu_kernel *kern;
    uint32_t hd = (uint32_t)a->hd;
    nu_attention_tune *t = &a->tune;
    /* The matrix units (attn_prefill_frag.comp, attn_prefill_coopmat.comp): F16 q, k and v,
     * head_dim a multiple of 16 (their fragments), the scalar form (their masks are the scalar
     * form's: windows and softcaps too). */
    bool units = !t->no_matrix_units && !t->br && !t->bc && hd % 16 == 0 && !a->per_row &&
                 q->dtype == NU_DTYPE_F16 && k->dtype == NU_DTYPE_F16 && v->dtype == NU_DTYPE_F16 &&
                 nu__op_tensor_cores(d, NU_DTYPE_F16, 32) && d->info.subgroup_size == 32 &&
                 rows_aligned(q, a->first[1]) && rows_aligned(k, a->first[2]) && rows_aligned(v, a->first[3]);
    /* attn_prefill_frag.comp, the softmax in the fragments' registers, where their layout is the
     * one it reads (nu__op_fragments_quad) and head_dim is at most 128 (q's and O's fragments in
     * registers): tc_rows query rows a workgroup (default 64), blocks of tc_keys keys (default 64,
     * 32 where shared memory says), k's and v's rows of D + 8 halves its only shared memory (q
     * staged 64 rows at a time in the same space). */
    uint32_t tc_rows = 0, frag_keys = 0;
    if (units && !t->no_fragments && hd <= 128 && nu__op_fragments_quad(d)) {
        tc_rows = t->tc_rows ? t->tc_rows : 64;
        frag_keys = t->tc_keys ? t->tc_keys : 64;
        while (frag_keys > 32 && 4ull * frag_keys * (hd + 8) + 16 > d->info.max_shared_memory)
            frag_keys /= 2;
        if (4ull * frag_keys * (hd + 8) + 16 > d->info.max_shared_memory ||
            2 * tc_rows > d->info.max_workgroup_size[0])
            tc_rows = frag_keys = 0;
    }
    /* Else attn_prefill_coopmat.comp: tc_rows query rows a workgroup, 16 a subgroup, where its
     * shared memory fits: k's and v's 32 rows of D + 8 halves, and per subgroup 16 x 32 scores
     * (F32, 16 floats of padding), p (F16, rows of 40) and 16 row factors. */
    if (units && !frag_keys) {
        tc_rows = t->tc_rows ? t->tc_rows : 128;
        for (;;) {
            uint32_t tc_sg = tc_rows / 16;
            uint64_t tc_shared = 16ull * 64 * ((uint64_t)hd + 8) / 8 + tc_sg * ((16ull * 32 + 16) * 4 + 16ull * 40 * 2 + 64);
            if (tc_shared <= d->info.max_shared_memory && 32 * tc_sg <= d->info.max_workgroup_size[0])
                break;
            if (t->tc_rows || tc_rows == 64) {
                tc_rows = 0; /* does not fit */
                break;
            }
            tc_rows = 64;
        }
    }
    if (tc_rows && ((uint64_t)a->tokens + tc_rows - 1) / tc_rows <= d->info.max_workgroup_count[0]) {
        uint32_t constants[8] = {a->qdt, a->kdt, a->vdt, a->ddt, 2 * tc_rows, hd, a->softcap ? 1u : 0u, frag_keys};
        if ((st = nu__op_kernel(d, frag_keys ? NU__K_attn_prefill_frag : NU__K_attn_prefill_coopmat, sizeof a->push,
                                constants, frag_keys ? 8 : 7, &kern)) != NU_OK)
            return st;
        uint32_t groups[3] = {(uint32_t)(((uint64_t)a->tokens + tc_rows - 1) / tc_rows), (uint32_t)a->qh, 1};
        st = nu_commands_dispatch(c, kern, groups, a->bind, 6, &a->push, sizeof a->push);
        if (st == NU_OK)
            note_values(c, a, 0);
        return st;
    }
    /* The default tile: 16 x 16 for head_dim >= 128, 32 x 32 below; where the device's shared
     * memory is smaller than that needs, the keys halved (down to 8), then rows and keys. */
    uint32_t br = t->br ? t->br : (hd >= 128 ? 16u : 32u), bc = t->bc ? t->bc : br;
    if (!t->br && !t->bc)
        while (br > 4 && prefill_shared(hd, br, bc) > d->info.max_shared_memory) {
            if (bc > 8)
                bc /= 2;
            else
                br /= 2, bc = bc > br ? br : bc;
        }
    if (ATTN_LOCAL % br || hd % (ATTN_LOCAL / br))
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": br=%u does not suit %u threads and head_dim %u", br, ATTN_LOCAL, hd);
    if (prefill_shared(hd, br, bc) > d->info.max_shared_memory)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": a %ux%u prefill tile of head_dim %u needs %llu bytes of shared "
                        "memory; %s has %u", br, bc, hd, (unsigned long long)prefill_shared(hd, br, bc), d->info.name,
                        d->info.max_shared_memory);
    uint32_t constants[9] = {a->qdt, a->kdt, a->vdt, a->ddt, ATTN_LOCAL, hd, br, bc, a->softcap ? 1u : 0u};
    if ((st = nu__op_kernel(d, NU__K_attn_prefill, sizeof a->push, constants, 9, &kern)) != NU_OK)
        return st;
    uint64_t blocks = ((uint64_t)a->tokens + br - 1) / br;
    uint32_t groups[3] = {(uint32_t)(blocks > 65535 ? 65535 : blocks), (uint32_t)a->qh, 1};
    st = nu_commands_dispatch(c, kern, groups, a->bind, 6, &a->push, sizeof a->push);
    if (st == NU_OK)
        note_values(c, a, 0);
    return st;
}

/* The subgroup decode kernel's shared memory for hg query heads a workgroup of nsg subgroups: the
 * subgroups' (m, l, o) and the merge's weights and sums (attn_splits.glsl: 2 * LOCAL + 1 floats a
 * head), and the fresh form's staging (attn_fresh.glsl: the heads turned and as read, the key and
 * value, the norms' sums). */
static uint64_t decode_shared(const attn_op *a, uint32_t hg, uint32_t nsg)
{
    uint32_t hd = (uint32_t)a->hd;
    return 4ull * hg * (nsg * (2ull + hd) + 2 * ATTN_LOCAL + 1) + fresh_shared(a->fresh, hd, hg);
}

/* The decode path: the keys of each row split over workgroups (the count from max_length), then
 * merged. */
static nu_status record_decode(nu_commands *c, attn_op *a, const nu_tensor *k, const nu_tensor *v)
{
    nu_device *d = a->d;
    nu_status st;
    nu_kernel *kern;
    nu_attention_tune *t = &a->tune;
    uint32_t hd = (uint32_t)a->hd, qh = (uint32_t)a->qh, tokens = (uint32_t)a->tokens;
    /* The subgroup kernel where the device has subgroup arithmetic and head_dim fills a subgroup
     * at least (a device without it must not see a module that declares it). */
    uint32_t sg = d->info.subgroup_size;
    bool subgroup = !t->no_subgroup && (d->info.subgroup_operations & NU_SUBGROUP_ARITHMETIC) && sg >= 4 &&
                    sg <= ATTN_LOCAL && ATTN_LOCAL % sg == 0 && hd >= sg;
    /* Query heads a workgroup: those sharing a KV head read its keys once (tune.heads, dividing the
     * group) and whose shared memory fits (decode_shared). */
    /* The default: 2 heads a workgroup (with heads of 256 too: since af77821 gemma2-9b Q4_K_M decode
     * ran 217.4 tokens/s with two against 205.3 with one head a workgroup and the last-split merge,
     * which had won before it, 219.0 against 215.1; H100, bench/RESULTS.md). */
    uint32_t group = (uint32_t)(a->qh / a->kvh), hg = t->heads ? t->heads : 2u;
    uint32_t nsg = sg ? ATTN_LOCAL / sg : 1;
    while (hg > 1 && (group % hg || decode_shared(a, hg, nsg) > d->info.max_shared_memory))
        hg--;
    /* The merge in the last split by default in the fresh form where a workgroup holds one query
     * head (subgroup kernel with hg 1, or attn_decode.comp): its level saved outweighs the merge's
     * work there, not with two heads a workgroup (H100 decode, Q4_K_M files, tokens/s, fused against
     * attn_combine.comp: qwen2.5-7b 338.6 / 335.3 and 7B Q5_K_M 308.5 / 304.0 with one head a
     * workgroup; qwen3-8b 301.4 / 306.2 and gemma2-9b 196.2 / 212.5 with two; bench/RESULTS.md). */
    /* A key a thread (attn_decode_keys.comp) where it applies: F16 k and v rows, contiguous and
     * 16-byte aligned, head_dim up to 256. By default where it measured faster than the subgroup
     * kernel: groups of 4 query heads or more a KV head, 4096 keys or more (H100, `nuvec bench ops
     * --filter attn_de`, 32 query heads of 128, us, attn_decode_sg.comp against it: 8 KV heads
     * 4096 / 8192 / 32768 keys 27.2 / 48.0 / 131.2 against 20.5 / 34.8 / 91.4 at the same splits,
     * and 20.1 / 27.8 / 66.1 with keys_splits' splits; 512 keys 12.0 against 12.7; 32 KV heads, a
     * group of 1, 8192 / 32768 keys 59.8 / 206.9 against 68.8 / 217.0; bench/RESULTS.md,
     * twenty-ninth session). tune.by_key and no_by_key force it on and off. The whole group of a
     * KV head a workgroup unless `heads` says (fewer where shared memory says). */
    bool by_key = !t->no_by_key && (t->by_key || (group >= 4 && a->max_length >= 4096)) && subgroup && hd <= 256 &&
                  k->dtype == NU_DTYPE_F16 && v->dtype == NU_DTYPE_F16 && row_pack(k, a->first[2], 8) == 8 &&
                  row_pack(v, a->first[3], 8) == 8;
    if (by_key) {
        uint32_t kg = t->heads ? t->heads : group;
        while (kg > 1 && (group % kg || keys_shared(a->fresh, hd, kg) > d->info.max_shared_memory))
            kg--;
        by_key = keys_shared(a->fresh, hd, kg) <= d->info.max_shared_memory;
        if (by_key)
            hg = kg;
    }
    /* Keys a split: attn_decode_keys.comp takes tiles of 128 keys with the next tile's loads in
     * flight, and wants more keys a split than the subgroup kernel (keys_splits). */
    uint32_t chunk = t->chunk ? t->chunk : default_chunk(a->max_length);
    uint64_t splits = t->splits ? t->splits
                      : by_key && !t->chunk ? keys_splits(a->max_length)
                                            : ((uint64_t)a->max_length + chunk - 1) / chunk;
    if (splits > 65535)
        splits = 65535;
    if (splits < 1)
        splits = 1;
    /* FINAL: 1 one split straight to dst; 2 the splits' partials, merged by the last split to
     * finish (attn_splits.glsl: one dispatch, one dependency level in a graph); 0 the partials,
     * merged by attn_combine.comp (a second dispatch after a barrier): the default (see
     * resolve_tune and `fused` below), and for more than fused_max splits with combine=fused (the
     * merge's work in the last split grows with the splits). */
    uint32_t groups[3] = {qh, (uint32_t)splits, tokens};
    bool one_head = !subgroup || hg == 1;
    bool fused = t->combine == NU_ATTENTION_COMBINE_FUSED || (t->combine == NU_ATTENTION_COMBINE_AUTO && a->fresh && one_head);
    uint32_t final = splits == 1 ? 1u : fused && splits <= t->fused_max ? 2u : 0u;
    uint32_t cap = a->softcap ? 1u : 0u;
    if (by_key) {
        uint32_t constants[ATTN_CONSTS] = {a->qdt, a->kdt, a->vdt, a->ddt, ATTN_LOCAL, hd, final, 0, 0, 0, hg, cap};
        memcpy(constants + ATTN_FRESH_CONST, a->fresh_const, sizeof a->fresh_const);
        if ((st = nu__op_kernel(d, NU__K_attn_decode_keys, sizeof a->push, constants, ATTN_CONSTS, &kern)) != NU_OK)
            return st;
        groups[0] = qh / hg;
    } else if (subgroup) {
        uint32_t pk = row_pack(k, a->first[2], 4), pv = row_pack(v, a->first[3], 4);
        uint32_t constants[ATTN_CONSTS] = {a->qdt, a->kdt, a->vdt, a->ddt, ATTN_LOCAL, hd, final, pk < pv ? pk : pv,
                                           sg, t->keys, hg, cap};
        memcpy(constants + ATTN_FRESH_CONST, a->fresh_const, sizeof a->fresh_const);
        if ((st = nu__op_kernel(d, NU__K_attn_decode_sg, sizeof a->push, constants, ATTN_CONSTS, &kern)) != NU_OK)
            return st;
        groups[0] = qh / hg;
    } else {
        uint32_t flags = rows_aligned(k, a->first[2]) ? 1u : 0u;
        uint32_t constants[ATTN_CONSTS] = {a->qdt, a->kdt, a->vdt, a->ddt, ATTN_LOCAL, hd, final, flags, cap}; /* 9..11 unused */
        memcpy(constants + ATTN_FRESH_CONST, a->fresh_const, sizeof a->fresh_const);
        if ((st = nu__op_kernel(d, NU__K_attn_decode, sizeof a->push, constants, ATTN_CONSTS, &kern)) != NU_OK)
            return st;
    }
    /* Bindings the mode does not use are empty ranges (bound as placeholders, no use of a buffer). */
    nu_binding none = nu__op_unbound(a->bind[0].buffer);
    nu_binding b8[15] = {a->bind[0], a->bind[1], a->bind[2], a->bind[3], none, none, a->bind[4], a->bind[5]};
    memcpy(b8 + 8, a->fresh_bind, sizeof a->fresh_bind);
    if (final == 1) {
        st = nu_commands_dispatch(c, kern, groups, b8, 15, &a->push, sizeof a->push);
        if (st == NU_OK)
            note_values(c, a, 0);
        return st;
    }

    uint64_t bytes = (uint64_t)tokens * qh * splits * ((uint64_t)hd + 2) * 4;
    if (bytes > d->info.max_storage_buffer_range)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": the split partials need %llu bytes, more than one binding covers",
                        (unsigned long long)bytes);
    nu_buffer *part = NULL, *count = NULL;
    if ((st = nu__commands_scratch(c, (size_t)bytes, &part)) != NU_OK)
        return st;
    b8[4] = (nu_binding){.buffer = part, .access = final == 2 ? NU_ACCESS_READ_WRITE : NU_ACCESS_WRITE, .offset = 0,
                         .size = (size_t)bytes};
    if (final == 2) {
        /* The counters, one a workgroup column (row, head group), zero before the first launch:
         * written here (fresh memory, nu_buffer_new: no GPU work of a previous owner pending), and
         * put back to zero by each launch's last split, so a graph's launches need no fill. */
        if ((st = nu__op_counters(d, FN, (size_t)tokens * groups[0], "nu_op_attention counters", &count)) != NU_OK)
            return st;
        b8[5] = (nu_binding){.buffer = count, .access = NU_ACCESS_READ_WRITE, .offset = 0, .size = 0};
        st = nu_commands_dispatch(c, kern, groups, b8, 15, &a->push, sizeof a->push);
    } else {
        nu_kernel *combine;
        uint32_t cconst[2] = {a->ddt, hd};
        struct {
            uint32_t q_heads, splits, first_dst;
        } cpush = {qh, (uint32_t)splits, a->first[0]};
        st = nu__op_kernel(d, NU__K_attn_combine, sizeof cpush, cconst, 2, &combine);
        b8[0] = none;
        if (st == NU_OK)
            st = nu_commands_dispatch(c, kern, groups, b8, 15, &a->push, sizeof a->push);
        if (st == NU_OK) {
            nu_binding cbind[2] = {a->bind[0], {.buffer = part, .access = NU_ACCESS_READ, .offset = 0, .size = (size_t)bytes}};
            uint32_t cgroups[3] = {qh, tokens, 1};
            st = nu_commands_dispatch(c, combine, cgroups, cbind, 2, &cpush, sizeof cpush);
        }
    }
    /* The counters, handed to the recording: a command buffer frees them now (their memory stays
     * with the recorded work until that completes), a graph when the graph is freed (its launches
     * reuse them). The scalar form's values are in the dispatch that reads the keys (the op's only
     * dispatch, or the one before the combine). */
    nu_status st3 = count ? nu__commands_adopt(c, count) : NU_OK;
    if (st == NU_OK && st3 == NU_OK)
        note_values(c, a, final == 0 ? 1u : 0u);
    return st != NU_OK ? st : st3;
}

/* The fresh form writes the caches k and v: what else it binds (t, `name`) may not share their
 * bytes. */
static nu_status off_the_caches(nu_device *d, const nu_tensor *k, const nu_tensor *v, const char *name, const nu_tensor *t)
{
    if (!t || (!nu__op_overlap(k, t) && !nu__op_overlap(v, t)))
        return NU_OK;
    return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": the fresh form writes k and v; %s overlaps %s", name,
                    nu__op_overlap(k, t) ? "k" : "v");
}

/* The fresh form's checks, bindings and constants (desc.fresh_k; a->bind and a->first hold dst, q,
 * k, v and the per-row form's positions and slots already): the rows' keys and values, the
 * rotation of q and the keys, the caches written. */
static nu_status fresh_setup(attn_op *a, const nu_attention_desc *desc, const nu_tensor *dst, const nu_tensor *q,
                             const nu_tensor *k, const nu_tensor *v, uint32_t *first_kn, uint32_t *first_vn)
{
    nu_device *d = a->d;
    nu_status st;
    const nu_tensor *fresh[2] = {desc->fresh_k, desc->fresh_v};
    const char *names[2] = {"fresh_k", "fresh_v"};
    uint32_t *firsts[2] = {first_kn, first_vn}, row_stride[2] = {0, 0};
    if (!desc->fresh_k || !desc->fresh_v)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": desc->fresh_%s is NULL; the fresh form takes both the key "
                        "and the value", desc->fresh_k ? "v" : "k");
    if (!a->per_row && a->tokens != 1)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": the fresh form (desc->fresh_k) takes the scalar form's one "
                        "row (or the per-row form's rows: desc->positions); this is the scalar form with %lld rows",
                        (long long)a->tokens);
    if (a->tune.path == NU_ATTENTION_PATH_PREFILL)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": the fresh form runs on the decode path, not tune.path PREFILL");
    /* The caches are written: they may not share bytes with each other or with anything the
     * dispatch reads (q, the positions and the slots here; the rest below). */
    if (nu__op_overlap(k, v))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": the fresh form writes k and v; they may not overlap");
    if ((st = off_the_caches(d, k, v, "q", q)) != NU_OK ||
        (st = off_the_caches(d, k, v, "positions", desc->positions)) != NU_OK ||
        (st = off_the_caches(d, k, v, "slots", desc->slots)) != NU_OK)
        return st;
    for (int i = 0; i < 2; i++) {
        const nu_tensor *t = fresh[i];
        if ((st = nu__op_check(FN, names[i], t, NU__OP_FLOAT)) != NU_OK)
            return st;
        if (t->rank != 3 || t->shape[0] != a->tokens || t->shape[1] != a->kvh || t->shape[2] != a->hd)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": %s must be [tokens, kv_heads, head_dim] ([%lld, %lld, "
                            "%lld])", names[i], (long long)a->tokens, (long long)a->kvh, (long long)a->hd);
        if (t->strides[2] != 1 || (a->kvh > 1 && t->strides[1] != a->hd))
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": %s's heads must be contiguous and head_dim apart", names[i]);
        if ((st = nu__op_no_alias(FN, dst, names[i], t, false)) != NU_OK ||
            (st = off_the_caches(d, k, v, names[i], t)) != NU_OK)
            return st;
        if ((st = nu__op_bind(FN, t, NU_ACCESS_READ, &a->fresh_bind[i], firsts[i])) != NU_OK)
            return st;
        row_stride[i] = stride_of(t, 0); /* the per-row form's rows, any distance apart */
    }
    const nu_rope_desc *rope = desc->fresh_rope;
    nu__rope_plan plan = {0};
    plan.ff = nu__op_unbound(dst->buffer);
    if (rope) {
        if (rope->positions || rope->position_offset)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": fresh_rope's positions and position_offset must be NULL "
                            "and 0 (each row's position, kv_length - 1 or positions[t], turns q and the key)");
        if ((st = nu__rope_plan_make(d, FN, rope, a->hd, k, dst, &plan)) != NU_OK)
            return st;
    }
    uint32_t fstep, fpscale, fmscale;
    memcpy(&fstep, &plan.step, 4);
    memcpy(&fpscale, &plan.pscale, 4);
    memcpy(&fmscale, &plan.mscale, 4);
    uint32_t mode = !rope || !plan.rotary ? 1u : rope->layout == NU_ROPE_HALF ? 3u : 2u;
    /* The per-head norms: weights [head_dim], contiguous, of one dtype. */
    const nu_tensor *norms[2] = {desc->fresh_q_norm, desc->fresh_k_norm};
    const char *norm_names[2] = {"fresh_q_norm", "fresh_k_norm"};
    uint32_t norm_first[2] = {0, 0}, fnorm = 0, fndt = 0;
    for (int i = 0; i < 2; i++) {
        const nu_tensor *t = norms[i];
        if (!t)
            continue;
        if ((st = nu__op_check(FN, norm_names[i], t, NU__OP_FLOAT)) != NU_OK)
            return st;
        if (t->rank != 1 || t->shape[0] != a->hd || (a->hd > 1 && t->strides[0] != 1))
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": %s must be a contiguous [head_dim] ([%lld])", norm_names[i],
                            (long long)a->hd);
        if (fnorm && nu__op_dtype_code(t->dtype) != fndt)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": fresh_q_norm and fresh_k_norm must have one dtype");
        if ((st = off_the_caches(d, k, v, norm_names[i], t)) != NU_OK ||
            (st = nu__op_bind(FN, t, NU_ACCESS_READ, &a->fresh_bind[5 + i], &norm_first[i])) != NU_OK)
            return st;
        fnorm |= 1u << i, fndt = nu__op_dtype_code(t->dtype);
    }
    if (fnorm && (!(desc->fresh_norm_eps >= 0) || !isfinite(desc->fresh_norm_eps)))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": fresh_norm_eps %g must be 0 or positive and finite",
                        (double)desc->fresh_norm_eps);
    uint32_t feps;
    float eps = fnorm ? desc->fresh_norm_eps : 0.0f;
    memcpy(&feps, &eps, 4);
    uint32_t fc[ATTN_FRESH_CONSTS] = {mode, plan.rotary, fstep, fpscale, fmscale, plan.has_ff ? 1u : 0u,
                                      plan.ff_first, plan.ff_stride, nu__op_dtype_code(desc->fresh_k->dtype),
                                      nu__op_dtype_code(desc->fresh_v->dtype), fnorm, feps, norm_first[0],
                                      norm_first[1], fndt, row_stride[0], row_stride[1]};
    memcpy(a->fresh_const, fc, sizeof fc);
    a->fresh_bind[2] = plan.ff;
    a->fresh_bind[3] = a->bind[2], a->fresh_bind[4] = a->bind[3];
    a->fresh_bind[3].access = a->fresh_bind[4].access = NU_ACCESS_WRITE;
    return NU_OK;
}

/* q, dst: [tokens, heads, head_dim]; k, v: [positions, kv_heads, head_dim] or with slots in front. */
static nu_status check_rank(nu_device *d, const char *name, const nu_tensor *t, bool cache)
{
    if (t->rank == 3 || (cache && t->rank == 4))
        return NU_OK;
    return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": %s has rank %u; it must be %s", name, t->rank,
                    cache ? "[positions, kv_heads, head_dim] or [slots, positions, kv_heads, head_dim] (rank 3 or 4)"
                          : "[tokens, q_heads, head_dim] (rank 3)");
}

nu_status nu_op_attention(nu_commands *c, const nu_tensor *dst, const nu_tensor *q, const nu_tensor *k,
                          const nu_tensor *v, const nu_attention_desc *desc)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, FN ": NULL command buffer");
    if (!desc)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, FN ": NULL desc");
    nu_status st;
    if ((st = nu__op_check(FN, "dst", dst, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(FN, "q", q, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_check(FN, "k", k, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(FN, "v", v, NU__OP_FLOAT)) != NU_OK)
        return st;
    attn_op a = {.d = nu_buffer_device(dst->buffer)};
    nu_device *d = a.d;
    if ((st = check_rank(d, "q", q, false)) != NU_OK || (st = check_rank(d, "k", k, true)) != NU_OK ||
        (st = check_rank(d, "v", v, true)) != NU_OK || (st = check_rank(d, "dst", dst, false)) != NU_OK)
        return st;
    if ((st = nu__op_same_shape(FN, "dst", dst, "q", q)) != NU_OK || (st = nu__op_same_shape(FN, "v", v, "k", k)) != NU_OK)
        return st;
    uint32_t kr = k->rank;
    int64_t tokens = q->shape[0], qh = q->shape[1], hd = q->shape[2], slots = kr == 4 ? k->shape[0] : 1;
    int64_t positions = k->shape[kr - 3], kvh = k->shape[kr - 2];
    if (k->shape[kr - 1] != hd)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": k's head_dim is %lld but q's is %lld", (long long)k->shape[kr - 1],
                        (long long)hd);
    /* Multiples of 8: the vector loads' units (and the prefill tile's threads a row divide it). */
    if (hd < 8 || hd > 256 || hd % 8)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": head_dim %lld; the kernels take multiples of 8 from 8 to 256",
                        (long long)hd);
    if (kvh < 1 || qh % kvh)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": q_heads %lld is not a multiple of kv_heads %lld", (long long)qh,
                        (long long)kvh);
    bool per_row = desc->positions != NULL;
    if (per_row && (desc->q_position || desc->kv_length))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": q_position %u and kv_length %u belong to the scalar form; with "
                        "desc->positions they must be 0", desc->q_position, desc->kv_length);
    if (!per_row && desc->slots)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": desc->slots needs desc->positions (the per-row form)");
    if (!per_row && (desc->kv_length < 1 || desc->kv_length > positions))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": kv_length %u must be 1 to the cache's %lld positions",
                        desc->kv_length, (long long)positions);
    bool fresh = desc->fresh_k || desc->fresh_v || desc->fresh_rope || desc->fresh_q_norm || desc->fresh_k_norm;
    if (!per_row && desc->window && !desc->causal && !fresh)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": a window of %u needs causal masks (or the per-row or fresh form)",
                        desc->window);
    float scale = desc->scale == 0 ? 1.0f / sqrtf((float)hd) : desc->scale;
    if (!isfinite(scale))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": scale %g is not finite", (double)desc->scale);
    if (desc->softcap != 0 && (!(desc->softcap > 0) || !isfinite(desc->softcap)))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": softcap %g must be 0 (none) or positive and finite",
                        (double)desc->softcap);
    if ((st = nu__op_contiguous(FN, "dst", dst)) != NU_OK || (st = nu__op_no_alias(FN, dst, "q", q, false)) != NU_OK ||
        (st = nu__op_no_alias(FN, dst, "k", k, false)) != NU_OK || (st = nu__op_no_alias(FN, dst, "v", v, false)) != NU_OK)
        return st;
    a.bind[4] = a.bind[5] = nu__op_unbound(dst->buffer);
    uint32_t first_pos = 0, pos_stride = 0, first_slot = 0, slot_stride = 0;
    if (per_row &&
        ((st = nu__op_rows_tensor(FN, "positions", desc->positions, tokens, dst, &a.bind[4], &first_pos, &pos_stride)) != NU_OK ||
         (desc->slots &&
          (st = nu__op_rows_tensor(FN, "slots", desc->slots, tokens, dst, &a.bind[5], &first_slot, &slot_stride)) != NU_OK)))
        return st;
    if ((st = resolve_tune(d, &desc->tune, &a.tune)) != NU_OK)
        return st;
    if (!tokens || !qh)
        return NU_OK;
    if (qh > 65535)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": %lld query heads; at most 65535", (long long)qh);
    /* Auto: the decode path for a few rows, and for rows with slots no more than the cache's slots
     * (a batched decode step: each row its own sequence; the prefill path's tiles would mix slots:
     * H200, 16 and 64 such rows of 512 keys, 4.4 ms against 54 and 180 us, bench/RESULTS.md); the
     * prefill path for the rows of a prompt. */
    bool decode = a.tune.path == NU_ATTENTION_PATH_AUTO
                      ? tokens <= NU_ATTENTION_DECODE_ROWS || (desc->slots && tokens <= slots) || fresh
                      : a.tune.path == NU_ATTENTION_PATH_DECODE;
    if (decode && tokens > 65535)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": the decode path takes at most 65535 tokens (%lld)", (long long)tokens);
    if ((st = nu__op_bind(FN, dst, NU_ACCESS_WRITE, &a.bind[0], &a.first[0])) != NU_OK ||
        (st = nu__op_bind(FN, q, NU_ACCESS_READ, &a.bind[1], &a.first[1])) != NU_OK ||
        (st = nu__op_bind(FN, k, NU_ACCESS_READ, &a.bind[2], &a.first[2])) != NU_OK ||
        (st = nu__op_bind(FN, v, NU_ACCESS_READ, &a.bind[3], &a.first[3])) != NU_OK)
        return st;

    a.tokens = tokens, a.qh = qh, a.hd = hd, a.kvh = kvh, a.per_row = per_row, a.softcap = desc->softcap != 0;
    uint32_t first_kn = 0, first_vn = 0;
    for (int i = 0; i < 7; i++)
        a.fresh_bind[i] = nu__op_unbound(dst->buffer);
    a.fresh = fresh;
    if (fresh && (st = fresh_setup(&a, desc, dst, q, k, v, &first_kn, &first_vn)) != NU_OK)
        return st;
    /* The keys a row sees at most: the split count's basis. */
    uint64_t most = desc->max_length ? desc->max_length : per_row ? (uint64_t)positions : desc->kv_length;
    if (most > (uint64_t)positions)
        most = (uint64_t)positions;
    if (desc->window && most > desc->window)
        most = desc->window;
    a.max_length = (uint32_t)most;
    a.qdt = nu__op_dtype_code(q->dtype), a.kdt = nu__op_dtype_code(k->dtype), a.vdt = nu__op_dtype_code(v->dtype);
    a.ddt = nu__op_dtype_code(dst->dtype);
    uint32_t o = kr - 3; /* k's and v's first dimension past the slots */
    a.push = (attn_push){(uint32_t)tokens, (uint32_t)qh, (uint32_t)(qh / kvh), desc->q_position, desc->kv_length,
                         (uint32_t)positions,
                         (fresh ? ATTN_FRESH : desc->causal && !per_row ? ATTN_CAUSAL : 0u) |
                             (per_row ? ATTN_PER_ROW : 0u) | (desc->slots ? ATTN_SLOTS : 0u),
                         scale, a.first[1], stride_of(q, 0), stride_of(q, 1), stride_of(q, 2),
                         a.first[2], stride_of(k, o), stride_of(k, o + 1), stride_of(k, o + 2),
                         a.first[3], stride_of(v, o), stride_of(v, o + 1), stride_of(v, o + 2), a.first[0],
                         kr == 4 ? stride_of(k, 0) : 0, kr == 4 ? stride_of(v, 0) : 0, (uint32_t)slots, desc->window,
                         desc->softcap, first_pos, pos_stride, first_slot, slot_stride, first_kn, first_vn};
    return decode ? record_decode(c, &a, k, v) : record_prefill(c, &a, q, k, v);
}
