/* attention.c: scaled dot-product attention with grouped-query heads (nu_op_attention) and the KV
 * cache's append (nu_op_kv_append; nu_op_kv_append_rope, with nu_op_rope's rotation on the way in).
 * Kernels under kernels/attention/: attn_decode.comp and attn_decode_sg.comp (a few query rows,
 * the keys split over workgroups, the splits merged by attn_combine.comp, a second dispatch; or
 * with NUVEC_ATTENTION="combine=fused" by the last split to finish: attn_splits.glsl),
 * attn_prefill.comp (flash-attention style tiles), kv_append.comp, kv_append_rope.comp. Each
 * .comp's header describes its layout and constants.
 *
 * The KV cache: one K and one V tensor per layer, [max_positions, kv_heads, head_dim], position p
 * at row p (F32, F16 or BF16). Decode appends the new token's k and v (nu_op_kv_append at
 * position p, or nu_op_kv_append_rope for k), then runs attention with q_position = p and
 * kv_length = p + 1; prefill appends its tokens at 0.. and runs with q_position 0, kv_length =
 * tokens, causal.
 *
 * The decode path's partials: a temporary device buffer (nu_buffer_new_gpu: it may reuse memory
 * of freed buffers whose GPU work has not finished, ordered after it) made by the op and handed
 * to the recording (nu__commands_adopt): a command buffer frees it as soon as the dispatches are
 * recorded, since nuvec keeps a freed buffer's memory until the GPU work recorded on it completes
 * (buffer.c's guard; tests/test_ops_attention.c checks it by freeing before commit); a graph
 * recording keeps it until the graph is freed, since every launch reuses it (tested too). So
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
#include "ops/op.h"

#define FN "nu_op_attention"
#define FN_APPEND "nu_op_kv_append"
#define FN_ROPE "nu_op_kv_append_rope"

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

typedef struct attn_tune {
    int path;        /* -1: by tokens; 0 decode; 1 prefill */
    uint32_t split;  /* decode: splits (0: by chunk) */
    uint32_t chunk;  /* decode: keys a split */
    uint32_t br, bc; /* prefill: rows and keys of a tile (0: by head_dim) */
    uint32_t subgroup; /* decode: 1 attn_decode_sg.comp where the device allows it, 0 attn_decode.comp */
    uint32_t keys;     /* decode, subgroup kernel: keys a subgroup has in flight */
    uint32_t heads;    /* decode, subgroup kernel: query heads a workgroup (at most; dividing the group) */
    uint32_t tc;       /* prefill: 1 attn_prefill_coopmat.comp where the device allows it, 0 attn_prefill.comp */
    uint32_t tc_rows;  /* prefill, matrix units: query rows a workgroup (64 or 128) */
    uint32_t fused;    /* decode with splits: 1 the last split merges them (FINAL 2), 0 attn_combine.comp */
    uint32_t fused_max; /* decode: the most splits the last split merges (more: attn_combine.comp) */
} attn_tune;

/* NUVEC_ATTENTION="path=decode|prefill split=S chunk=C br=BR bc=BC subgroup=0|1 keys=K heads=H
 * tc=0|1 tc_rows=64|128 combine=fused|separate fused_max=N" (read at each call). */
static bool apply_knob(void *ctx, const char *key, const char *value)
{
    attn_tune *t = ctx;
    if (!strcmp(key, "path") && (!strcmp(value, "decode") || !strcmp(value, "prefill")))
        return t->path = !strcmp(value, "prefill"), true;
    if (!strcmp(key, "split"))
        return nu__op_knob_u32(value, 1, 65535, false, &t->split);
    if (!strcmp(key, "chunk"))
        return nu__op_knob_u32(value, 1, UINT32_MAX, false, &t->chunk);
    if (!strcmp(key, "br"))
        return nu__op_knob_u32(value, 4, 64, true, &t->br);
    if (!strcmp(key, "bc"))
        return nu__op_knob_u32(value, 1, 128, false, &t->bc);
    if (!strcmp(key, "subgroup"))
        return nu__op_knob_u32(value, 0, 1, false, &t->subgroup);
    if (!strcmp(key, "keys"))
        return nu__op_knob_u32(value, 1, 16, false, &t->keys);
    if (!strcmp(key, "heads"))
        return nu__op_knob_u32(value, 1, 8, false, &t->heads);
    if (!strcmp(key, "tc"))
        return nu__op_knob_u32(value, 0, 1, false, &t->tc);
    if (!strcmp(key, "tc_rows") && nu__op_knob_u32(value, 64, 128, true, &t->tc_rows))
        return true;
    if (!strcmp(key, "combine") && (!strcmp(value, "fused") || !strcmp(value, "separate")))
        return t->fused = !strcmp(value, "fused"), true;
    if (!strcmp(key, "fused_max"))
        return nu__op_knob_u32(value, 2, 65535, false, &t->fused_max);
    return false;
}

static nu_status env_tune(nu_device *d, attn_tune *t)
{
    return nu__op_env_knobs(d, FN, "NUVEC_ATTENTION", "path=decode|prefill, split=1..65535, chunk=1.., br=4|8|16|32|64, "
                            "bc=1..128, subgroup=0|1, keys=1..16, heads=1..8, tc=0|1, tc_rows=64|128, "
                            "combine=fused|separate, fused_max=2..65535", apply_knob, t);
}

/* Whether view t's [.., .., D] rows are contiguous and every row starts 16-byte aligned in its
 * binding (first element `first`). */
static bool rows_aligned(const nu_tensor *t, uint32_t first)
{
    uint64_t es = nu_dtype_size(t->dtype);
    if (t->strides[2] != 1)
        return false;
    return (uint64_t)first * es % 16 == 0 && (t->shape[0] < 2 || (uint64_t)t->strides[0] * es % 16 == 0) &&
           (t->shape[1] < 2 || (uint64_t)t->strides[1] * es % 16 == 0);
}

/* The elements (1, 2 or 4) attn_decode_sg.comp's lanes may read from view t's rows at once:
 * contiguous rows starting at multiples of them (in the binding), and head_dim a multiple of
 * subgroup size times them. */
static uint32_t row_pack(const nu_tensor *t, uint32_t first, uint32_t sg)
{
    if (t->strides[2] != 1)
        return 1;
    for (uint32_t p = 4; p > 1; p /= 2)
        if (t->shape[2] % ((int64_t)sg * p) == 0 && first % p == 0 && (t->shape[0] < 2 || t->strides[0] % p == 0) &&
            (t->shape[1] < 2 || t->strides[1] % p == 0))
            return p;
    return 1;
}

static uint64_t prefill_shared(uint32_t d, uint32_t br, uint32_t bc)
{
    return 4ull * ((uint64_t)br * d + (uint64_t)bc * (d + 1) + (uint64_t)bc * d + (uint64_t)br * (bc + 1));
}

typedef struct attn_push {
    uint32_t tokens, q_heads, group;
    uint32_t q_position, kv_length, positions, causal;
    float scale;
    uint32_t first_q, q_tok, q_head, q_dim;
    uint32_t first_k, k_pos, k_head, k_dim;
    uint32_t first_v, v_pos, v_head, v_dim;
    uint32_t first_dst;
} attn_push;

/* Strides of dimensions of size 1 are never used: 0 keeps them within 32 bits. */
static uint32_t stride_of(const nu_tensor *t, uint32_t i) { return t->shape[i] > 1 ? (uint32_t)t->strides[i] : 0; }

static nu_status check_heads(nu_device *d, const char *name, const nu_tensor *t, const char *dims)
{
    if (t->rank != 3)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": %s has rank %u; it must be 3 ([%s, head_dim])", name, t->rank,
                        dims);
    return NU_OK;
}

/* A prefill dispatch, its q_position and kv_length noted for nu_op_graph_param. */
static nu_status prefill_dispatch(nu_commands *c, nu_kernel *kern, const uint32_t groups[3], const nu_binding bind[4],
                                  const attn_push *push)
{
    nu_status st = nu_commands_dispatch(c, kern, groups, bind, 4, push, sizeof *push);
    nu__op_value_at values[2] = {{NU_OP_VALUE_Q_POSITION, 0, offsetof(attn_push, q_position)},
                                 {NU_OP_VALUE_KV_LENGTH, 0, offsetof(attn_push, kv_length)}};
    if (st == NU_OK)
        nu__graph_note_values(c, FN, values, 2);
    return st;
}

/* A private buffer of n zeroed 32-bit counters (the fused merge's, attn_splits.glsl). */
static nu_status new_counters(nu_device *d, size_t n, nu_buffer **out)
{
    *out = NULL;
    uint32_t *zero = nu__calloc(n, sizeof *zero);
    if (!zero)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, FN ": out of host memory");
    nu_status st = nu_buffer_from(d, zero, n * sizeof *zero, NU_STORAGE_PRIVATE, out);
    nu__free(zero);
    if (st == NU_OK)
        nu_buffer_set_name(*out, "nu_op_attention counters");
    return st;
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
    nu_device *d = nu_buffer_device(dst->buffer);
    if ((st = check_heads(d, "q", q, "tokens, q_heads")) != NU_OK || (st = check_heads(d, "k", k, "positions, kv_heads")) != NU_OK ||
        (st = check_heads(d, "v", v, "positions, kv_heads")) != NU_OK || (st = check_heads(d, "dst", dst, "tokens, q_heads")) != NU_OK)
        return st;
    if ((st = nu__op_same_shape(FN, "dst", dst, "q", q)) != NU_OK || (st = nu__op_same_shape(FN, "v", v, "k", k)) != NU_OK)
        return st;
    int64_t tokens = q->shape[0], qh = q->shape[1], hd = q->shape[2], positions = k->shape[0], kvh = k->shape[1];
    if (k->shape[2] != hd)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": k's head_dim is %lld but q's is %lld", (long long)k->shape[2],
                        (long long)hd);
    /* Powers of two: the decode kernels' thread groups and tree reductions divide 128 threads by it. */
    if (hd < 8 || hd > 128 || (hd & (hd - 1)))
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": head_dim %lld; the kernels take 8, 16, 32, 64 or 128",
                        (long long)hd);
    if (kvh < 1 || qh % kvh)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": q_heads %lld is not a multiple of kv_heads %lld", (long long)qh,
                        (long long)kvh);
    if (desc->kv_length < 1 || desc->kv_length > positions)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": kv_length %u must be 1 to the cache's %lld positions",
                        desc->kv_length, (long long)positions);
    float scale = desc->scale == 0 ? 1.0f / sqrtf((float)hd) : desc->scale;
    if (!isfinite(scale))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": scale %g is not finite", (double)desc->scale);
    if ((st = nu__op_contiguous(FN, "dst", dst)) != NU_OK || (st = nu__op_no_alias(FN, dst, "q", q, false)) != NU_OK ||
        (st = nu__op_no_alias(FN, dst, "k", k, false)) != NU_OK || (st = nu__op_no_alias(FN, dst, "v", v, false)) != NU_OK)
        return st;
    if (!tokens || !qh)
        return NU_OK;
    if (qh > 65535)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": %lld query heads; at most 65535", (long long)qh);

    /* The splits merged by attn_combine.comp by default: the merge in the last split to finish
     * (combine=fused) was slower on the H200 at 512 and 4096 keys (12.3 / 41.1 us against 7.1 /
     * 21.5 with 8 KV heads at chunk 32; 13.0 / 36.4 against 9.7 / 37.5 with 32), faster only at
     * 32768 keys with 32 KV heads (150 against 165 us): the merging workgroup's work comes after
     * every other's, where the second dispatch spreads it over the device. */
    attn_tune tune = {-1, 0, 0, 0, 0, 1, 4, 2, 1, 128, 0, 65535};
    if ((st = env_tune(d, &tune)) != NU_OK)
        return st;
    bool decode = tune.path < 0 ? tokens <= NU_ATTENTION_DECODE_ROWS : tune.path == 0;
    if (decode && tokens > 65535)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": the decode path takes at most 65535 tokens (%lld)", (long long)tokens);

    nu_binding bind[4];
    uint32_t first[4];
    if ((st = nu__op_bind(FN, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(FN, q, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK ||
        (st = nu__op_bind(FN, k, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK ||
        (st = nu__op_bind(FN, v, NU_ACCESS_READ, &bind[3], &first[3])) != NU_OK)
        return st;
    attn_push push = {(uint32_t)tokens, (uint32_t)qh, (uint32_t)(qh / kvh), desc->q_position, desc->kv_length,
                      (uint32_t)positions, desc->causal ? 1u : 0u, scale,
                      first[1], stride_of(q, 0), stride_of(q, 1), stride_of(q, 2),
                      first[2], stride_of(k, 0), stride_of(k, 1), stride_of(k, 2),
                      first[3], stride_of(v, 0), stride_of(v, 1), stride_of(v, 2), first[0]};
    uint32_t qdt = nu__op_dtype_code(q->dtype), kdt = nu__op_dtype_code(k->dtype), vdt = nu__op_dtype_code(v->dtype),
             ddt = nu__op_dtype_code(dst->dtype);
    nu_kernel *kern;

    /* The matrix units: tc_rows query rows a workgroup, 16 a subgroup (attn_prefill_coopmat.comp),
     * where its shared memory fits: k's and v's 32 rows of D + 8 halves, and per subgroup 16 x 32
     * scores (F32), p (F16, rows of 40) and 16 row factors; head_dim 64 or 128 only (the kernel's
     * fragments; smaller heads take attn_prefill.comp). */
    uint32_t tc_sg = tune.tc_rows / 16;
    uint64_t tc_shared = 16ull * 64 * ((uint64_t)hd + 8) / 8 + tc_sg * (16ull * 32 * 4 + 16ull * 40 * 2 + 64);
    if (!decode && tune.tc && !tune.br && !tune.bc && (hd == 64 || hd == 128) && q->dtype == NU_DTYPE_F16 &&
        k->dtype == NU_DTYPE_F16 && v->dtype == NU_DTYPE_F16 && nu__op_tensor_cores_f16(d, 32) && d->info.subgroup_size == 32 &&
        rows_aligned(q, first[1]) && rows_aligned(k, first[2]) && rows_aligned(v, first[3]) &&
        tc_shared <= d->info.max_shared_memory && 32 * tc_sg <= d->info.max_workgroup_size[0] &&
        ((uint64_t)tokens + tune.tc_rows - 1) / tune.tc_rows <= d->info.max_workgroup_count[0]) {
        uint32_t constants[6] = {qdt, kdt, vdt, ddt, 32 * tc_sg, (uint32_t)hd};
        if ((st = nu__op_kernel(d, NU__K_attn_prefill_coopmat, sizeof push, constants, 6, &kern)) != NU_OK)
            return st;
        uint32_t groups[3] = {(uint32_t)(((uint64_t)tokens + tune.tc_rows - 1) / tune.tc_rows), (uint32_t)qh, 1};
        return prefill_dispatch(c, kern, groups, bind, &push);
    }
    if (!decode) {
        uint32_t br = tune.br ? tune.br : (hd == 128 ? 16u : 32u), bc = tune.bc ? tune.bc : br;
        /* Devices with less shared memory than the default tile's: halve the tile. */
        if (!tune.br && !tune.bc)
            while (br > 4 && prefill_shared((uint32_t)hd, br, bc) > d->info.max_shared_memory)
                br /= 2, bc /= 2;
        if (ATTN_LOCAL % br || hd % (ATTN_LOCAL / br))
            return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": br=%u does not suit %u threads and head_dim %lld", br, ATTN_LOCAL,
                            (long long)hd);
        if (prefill_shared((uint32_t)hd, br, bc) > d->info.max_shared_memory)
            return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": a %ux%u prefill tile of head_dim %lld needs %llu bytes of shared "
                            "memory; %s has %u", br, bc, (long long)hd,
                            (unsigned long long)prefill_shared((uint32_t)hd, br, bc), d->info.name,
                            d->info.max_shared_memory);
        uint32_t constants[8] = {qdt, kdt, vdt, ddt, ATTN_LOCAL, (uint32_t)hd, br, bc};
        if ((st = nu__op_kernel(d, NU__K_attn_prefill, sizeof push, constants, 8, &kern)) != NU_OK)
            return st;
        uint64_t blocks = ((uint64_t)tokens + br - 1) / br;
        uint32_t groups[3] = {(uint32_t)(blocks > 65535 ? 65535 : blocks), (uint32_t)qh, 1};
        return prefill_dispatch(c, kern, groups, bind, &push);
    }

    /* Decode: splits from the recorded kv_length (the keys a row sees at most). */
    uint32_t chunk = tune.chunk ? tune.chunk : default_chunk(desc->kv_length);
    uint64_t splits = tune.split ? tune.split : ((uint64_t)desc->kv_length + chunk - 1) / chunk;
    if (splits > 65535)
        splits = 65535;
    if (splits < 1)
        splits = 1;
    /* FINAL: 1 one split straight to dst; 2 the splits' partials, merged by the last split to
     * finish (attn_splits.glsl: one dispatch, one dependency level in a graph); 0 the partials,
     * merged by attn_combine.comp (a second dispatch after a barrier): the default (see tune
     * above), and for more than fused_max splits with combine=fused (the merge's work in the last
     * split grows with the splits). */
    uint32_t final = splits == 1 ? 1u : tune.fused && splits <= tune.fused_max ? 2u : 0u;
    uint32_t groups[3] = {(uint32_t)qh, (uint32_t)splits, (uint32_t)tokens};
    /* The subgroup kernel where the device has subgroup arithmetic and head_dim is a multiple of its
     * subgroups (a device without it must not see a module that declares it). */
    uint32_t sg = d->info.subgroup_size;
    bool subgroup = tune.subgroup && (d->info.subgroup_operations & NU_SUBGROUP_ARITHMETIC) && sg >= 4 &&
                    sg <= ATTN_LOCAL && ATTN_LOCAL % sg == 0 && hd % sg == 0;
    /* Query heads a workgroup: those sharing a KV head read its keys once (tune.heads, dividing the
     * group) ... */
    uint32_t group = (uint32_t)(qh / kvh), hg = tune.heads, nsg = sg ? ATTN_LOCAL / sg : 1;
    /* ... and whose subgroups' (m, l, o) fit the shared memory (sm, sl, so), with the merge's
     * weights and sums (attn_splits.glsl: 2 * LOCAL + 1 floats a head). */
    while (hg > 1 &&
           (group % hg || 4ull * hg * (nsg * (2 + (uint64_t)hd) + 2 * ATTN_LOCAL + 1) > d->info.max_shared_memory))
        hg--;
    if (subgroup) {
        uint32_t pk = row_pack(k, first[2], sg), pv = row_pack(v, first[3], sg);
        uint32_t constants[11] = {qdt, kdt, vdt, ddt, ATTN_LOCAL, (uint32_t)hd, final,
                                  pk < pv ? pk : pv, sg, tune.keys, hg};
        if ((st = nu__op_kernel(d, NU__K_attn_decode_sg, sizeof push, constants, 11, &kern)) != NU_OK)
            return st;
        groups[0] = (uint32_t)qh / hg;
    } else {
        uint32_t flags = rows_aligned(k, first[2]) ? 1u : 0u;
        uint32_t constants[8] = {qdt, kdt, vdt, ddt, ATTN_LOCAL, (uint32_t)hd, final, flags};
        if ((st = nu__op_kernel(d, NU__K_attn_decode, sizeof push, constants, 8, &kern)) != NU_OK)
            return st;
    }
    /* q_position and kv_length are in the dispatch that reads the keys (the op's only dispatch,
     * or the one before the combine). */
    nu__op_value_at values[2] = {{NU_OP_VALUE_Q_POSITION, final == 0 ? 1u : 0u, offsetof(attn_push, q_position)},
                                 {NU_OP_VALUE_KV_LENGTH, final == 0 ? 1u : 0u, offsetof(attn_push, kv_length)}};
    /* Bindings the mode does not use are empty ranges (bound as placeholders, no use of a buffer). */
    nu_binding none = {.buffer = bind[0].buffer, .access = NU_ACCESS_READ, .offset = nu_buffer_size(bind[0].buffer),
                       .size = 0};
    if (final == 1) {
        nu_binding b6[6] = {bind[0], bind[1], bind[2], bind[3], none, none};
        st = nu_commands_dispatch(c, kern, groups, b6, 6, &push, sizeof push);
        if (st == NU_OK)
            nu__graph_note_values(c, FN, values, 2);
        return st;
    }

    uint64_t bytes = (uint64_t)tokens * (uint64_t)qh * splits * ((uint64_t)hd + 2) * 4;
    if (bytes > d->info.max_storage_buffer_range)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": the split partials need %llu bytes, more than one binding covers",
                        (unsigned long long)bytes);
    nu_buffer *part = NULL, *count = NULL;
    if ((st = nu_buffer_new_gpu(d, (size_t)bytes, NU_STORAGE_PRIVATE, &part)) != NU_OK)
        return st;
    nu_buffer_set_name(part, "nu_op_attention partials");
    nu_binding pb = {.buffer = part, .access = final == 2 ? NU_ACCESS_READ_WRITE : NU_ACCESS_WRITE, .offset = 0,
                     .size = (size_t)bytes};
    if (final == 2) {
        /* The counters, one a workgroup column (row, head group), zero before the first launch:
         * written here (fresh memory, nu_buffer_new: no GPU work of a previous owner pending), and
         * put back to zero by each launch's last split, so a graph's launches need no fill. */
        if ((st = new_counters(d, (size_t)tokens * groups[0], &count)) != NU_OK) {
            nu_buffer_free(part);
            return st;
        }
        nu_binding b6[6] = {bind[0], bind[1], bind[2], bind[3], pb,
                            {.buffer = count, .access = NU_ACCESS_READ_WRITE, .offset = 0, .size = 0}};
        st = nu_commands_dispatch(c, kern, groups, b6, 6, &push, sizeof push);
    } else {
        nu_kernel *combine;
        uint32_t cconst[2] = {ddt, (uint32_t)hd};
        struct {
            uint32_t q_heads, splits, first_dst;
        } cpush = {(uint32_t)qh, (uint32_t)splits, first[0]};
        st = nu__op_kernel(d, NU__K_attn_combine, sizeof cpush, cconst, 2, &combine);
        nu_binding b6[6] = {none, bind[1], bind[2], bind[3], pb, none};
        if (st == NU_OK)
            st = nu_commands_dispatch(c, kern, groups, b6, 6, &push, sizeof push);
        if (st == NU_OK) {
            nu_binding cbind[2] = {bind[0], {.buffer = part, .access = NU_ACCESS_READ, .offset = 0, .size = (size_t)bytes}};
            uint32_t cgroups[3] = {(uint32_t)qh, (uint32_t)tokens, 1};
            st = nu_commands_dispatch(c, combine, cgroups, cbind, 2, &cpush, sizeof cpush);
        }
    }
    /* Handed to the recording: a command buffer frees them now (their memory stays with the
     * recorded work until that completes), a graph when the graph is freed (its launches reuse
     * them). */
    nu_status st2 = nu__commands_adopt(c, part);
    nu_status st3 = count ? nu__commands_adopt(c, count) : NU_OK;
    if (st == NU_OK && st2 == NU_OK && st3 == NU_OK)
        nu__graph_note_values(c, FN, values, 2);
    return st != NU_OK ? st : st2 != NU_OK ? st2 : st3;
}

/* What nu_op_kv_append and nu_op_kv_append_rope check (messages under fn's name); binds cache and
 * src into bind[0..1] with their first elements. *count: src's elements (0: nothing to record). */
static nu_status append_check(const char *fn, const nu_tensor *cache, const nu_tensor *src,
                              uint32_t position, nu_binding bind[2], uint32_t first[2], uint64_t *count)
{
    *count = 0;
    nu_status st;
    if ((st = nu__op_check(fn, "cache", cache, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(fn, "src", src, NU__OP_FLOAT)) != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(cache->buffer);
    if (cache->rank != 3 || src->rank != 3)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: cache (rank %u) must be [positions, kv_heads, head_dim] and src (rank %u) "
                        "[tokens, kv_heads, head_dim]", fn, cache->rank, src->rank);
    if (cache->shape[1] != src->shape[1] || cache->shape[2] != src->shape[2])
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: src has %lld heads of %lld but the cache %lld heads of %lld", fn,
                        (long long)src->shape[1], (long long)src->shape[2], (long long)cache->shape[1],
                        (long long)cache->shape[2]);
    if ((uint64_t)position + (uint64_t)src->shape[0] > (uint64_t)cache->shape[0])
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %lld tokens at position %u overflow the cache's %lld positions", fn,
                        (long long)src->shape[0], position, (long long)cache->shape[0]);
    if ((st = nu__op_contiguous(fn, "cache", cache)) != NU_OK || (st = nu__op_no_alias(fn, cache, "src", src, false)) != NU_OK)
        return st;
    uint64_t n = nu_tensor_numel(src);
    if (!n)
        return NU_OK;
    if ((st = nu__op_bind(fn, cache, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, src, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK)
        return st;
    *count = n;
    return NU_OK;
}

nu_status nu_op_kv_append(nu_commands *c, const nu_tensor *cache, const nu_tensor *src, uint32_t position)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, FN_APPEND ": NULL command buffer");
    nu_binding bind[2];
    uint32_t first[2];
    uint64_t count;
    nu_status st = append_check(FN_APPEND, cache, src, position, bind, first, &count);
    if (st != NU_OK || !count)
        return st;
    nu_device *d = nu_buffer_device(cache->buffer);
    uint32_t constants[2] = {nu__op_dtype_code(cache->dtype), nu__op_dtype_code(src->dtype)};
    struct append_push {
        uint32_t count, heads, dim, position, positions, first_cache, first_src, s_tok, s_head, s_dim;
    } push = {(uint32_t)count, (uint32_t)src->shape[1], (uint32_t)src->shape[2], position, (uint32_t)cache->shape[0],
              first[0], first[1], stride_of(src, 0), stride_of(src, 1), stride_of(src, 2)};
    nu_kernel *kern;
    if ((st = nu__op_kernel(d, NU__K_kv_append, sizeof push, constants, 2, &kern)) != NU_OK)
        return st;
    uint32_t groups[3];
    nu__op_groups(count, 256, groups);
    st = nu_commands_dispatch(c, kern, groups, bind, 2, &push, sizeof push);
    nu__op_value_at value = {NU_OP_VALUE_POSITION, 0, offsetof(struct append_push, position)};
    if (st == NU_OK)
        nu__graph_note_values(c, FN_APPEND, &value, 1);
    return st;
}

/* kv_append_rope.comp's threads a workgroup: 64 by default (a decode step's keys are a few
 * thousand pairs: spread over more workgroups than 256 a workgroup would); not measured yet.
 * NUVEC_KV_APPEND_ROPE="local=N" (32..1024, a power of two) overrides it (read at each call). */
static bool apply_append_knob(void *ctx, const char *key, const char *value)
{
    return !strcmp(key, "local") && nu__op_knob_u32(value, 32, 1024, true, ctx);
}

nu_status nu_op_kv_append_rope(nu_commands *c, const nu_tensor *cache, const nu_tensor *src, uint32_t position,
                               const nu_rope_desc *rope)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, FN_ROPE ": NULL command buffer");
    if (!rope)
        return nu__fail(c->s.device, NU_ERROR_INVALID_ARGUMENT, FN_ROPE ": NULL rope desc");
    nu_binding bind[2];
    uint32_t first[2];
    uint64_t count;
    nu_status st = append_check(FN_ROPE, cache, src, position, bind, first, &count);
    if (st != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(cache->buffer);
    /* The append's position drives the rotation: one graph parameter moves both. */
    if (rope->positions)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN_ROPE ": rope->positions must be NULL (token t turns by position "
                        "+ t)");
    if (rope->position_offset)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN_ROPE ": rope->position_offset is %d; it must be 0 (the "
                        "append's position is the rotation's)", (int)rope->position_offset);
    uint32_t rot;
    float step;
    if ((st = nu__rope_angles(d, FN_ROPE, rope, src->shape[2], &rot, &step)) != NU_OK || !count)
        return st;
    uint64_t slots = rot / 2 + ((uint64_t)src->shape[2] - rot);
    uint64_t threads = (uint64_t)src->shape[0] * (uint64_t)src->shape[1] * slots;
    if (threads > UINT32_MAX)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN_ROPE ": %llu pairs and copied elements; at most 2^32 - 1",
                        (unsigned long long)threads);
    uint32_t local = 64;
    if ((st = nu__op_env_knobs(d, FN_ROPE, "NUVEC_KV_APPEND_ROPE", "local=32..1024 (a power of two)", apply_append_knob,
                               &local)) != NU_OK)
        return st;
    while (local > 32 && (local > d->info.max_workgroup_size[0] || local > d->info.max_workgroup_invocations))
        local /= 2;
    uint32_t constants[4] = {nu__op_dtype_code(cache->dtype), nu__op_dtype_code(src->dtype),
                             rope->layout == NU_ROPE_HALF ? 1u : 0u, local};
    struct append_rope_push {
        uint32_t count, heads, dim, position, positions, first_cache, first_src, s_tok, s_head, s_dim, rotary, slots;
        float step;
    } push = {(uint32_t)threads, (uint32_t)src->shape[1], (uint32_t)src->shape[2], position, (uint32_t)cache->shape[0],
              first[0], first[1], stride_of(src, 0), stride_of(src, 1), stride_of(src, 2), rot, (uint32_t)slots, step};
    nu_kernel *kern;
    if ((st = nu__op_kernel(d, NU__K_kv_append_rope, sizeof push, constants, 4, &kern)) != NU_OK)
        return st;
    uint32_t groups[3];
    nu__op_groups(threads, local, groups);
    st = nu_commands_dispatch(c, kern, groups, bind, 2, &push, sizeof push);
    nu__op_value_at value = {NU_OP_VALUE_POSITION, 0, offsetof(struct append_rope_push, position)};
    if (st == NU_OK)
        nu__graph_note_values(c, FN_ROPE, &value, 1);
    return st;
}
