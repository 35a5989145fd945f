/* kv_cache.c: writes into the KV cache (nuvec/ops.h): the per-row form nu_op_kv_write, and the
 * scalar form's nu_op_kv_append and nu_op_kv_append_rope; one kernel for all
 * (kernels/attention/kv_write.comp), with nu_op_rope's rotation on the way in where asked
 * (rope/rope.glsl, the same F32 angle bit for bit). A cache is [slots, positions, kv_heads,
 * head_dim] (rank 3: one slot), contiguous. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "exec/commands.h"
#include "exec/graph.h"
#include "ops/kv_cache.h"
#include "ops/op.h"
#include "ops/rope.h"

/* Threads a workgroup: 256 for the plain copy (an element a thread, as the elementwise ops); 64
 * with RoPE (a decode step's keys are a few thousand pairs: spread over more workgroups than 256
 * a workgroup would); not measured yet. nu_rope_tune.local and NUVEC_KV_APPEND_ROPE="local=N"
 * change the latter (docs/knobs.md). */
#define KV_LOCAL 256u
#define KV_ROPE_LOCAL 64u

static bool apply_knob(void *ctx, const char *key, const char *value)
{
    return !strcmp(key, "local") && nu__op_knob_u32(value, 32, 1024, true, ctx);
}

/* What a write is given: the scalar form's position, or the per-row form's I32 tensors. */
typedef struct kv_rows {
    bool per_row;
    uint32_t position;                   /* scalar */
    const nu_tensor *positions, *slots; /* per-row (slots may be NULL) */
} kv_rows;

nu_status nu__op_rows_tensor(const char *fn, const char *name, const nu_tensor *t, int64_t rows, const nu_tensor *out,
                             nu_binding *bind, uint32_t *first, uint32_t *stride)
{
    nu_status st = nu__op_check(fn, name, t, NU__OP_DTYPE(NU_DTYPE_I32));
    if (st != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(t->buffer);
    if (t->rank != 1 || t->shape[0] != rows)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %s must be I32 [%lld] (one a row)", fn, name, (long long)rows);
    if ((st = nu__op_no_alias(fn, out, name, t, false)) != NU_OK)
        return st;
    *stride = rows > 1 ? (uint32_t)t->strides[0] : 0;
    return nu__op_bind(fn, t, NU_ACCESS_READ, bind, first);
}

/* The three ops: cache's rows from src's (rope: NULL for a plain copy). */
static nu_status kv_record(nu_commands *c, const char *fn, const nu_tensor *cache, const nu_tensor *src,
                           const kv_rows *rows, const nu_rope_desc *rope)
{
    nu_status st;
    if ((st = nu__op_check(fn, "cache", cache, NU__OP_FLOAT)) != NU_OK || (st = nu__op_check(fn, "src", src, NU__OP_FLOAT)) != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(cache->buffer);
    uint32_t cr = cache->rank;
    bool rank_ok = rows->per_row ? cr == 3 || cr == 4 : cr == 3;
    if (!rank_ok || src->rank != 3)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: cache (rank %u) must be %s and src (rank %u) [tokens, kv_heads, head_dim]", fn, cr,
                        rows->per_row ? "[slots, positions, kv_heads, head_dim] or [positions, kv_heads, head_dim]"
                                      : "[positions, kv_heads, head_dim]", src->rank);
    int64_t slots = cr == 4 ? cache->shape[0] : 1, positions = cache->shape[cr - 3];
    int64_t heads = cache->shape[cr - 2], dim = cache->shape[cr - 1], tokens = src->shape[0];
    if (heads != src->shape[1] || dim != src->shape[2])
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: src has %lld heads of %lld but the cache %lld heads of %lld", fn,
                        (long long)src->shape[1], (long long)src->shape[2], (long long)heads, (long long)dim);
    if (!rows->per_row && (uint64_t)rows->position + (uint64_t)tokens > (uint64_t)positions)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %lld tokens at position %u overflow the cache's %lld positions", fn,
                        (long long)tokens, rows->position, (long long)positions);
    if ((st = nu__op_contiguous(fn, "cache", cache)) != NU_OK || (st = nu__op_no_alias(fn, cache, "src", src, false)) != NU_OK)
        return st;
    nu_binding bind[5];
    uint32_t first[2], first_pos = 0, pos_stride = 0, first_slot = 0, slot_stride = 0;
    bind[2] = bind[3] = nu__op_unbound(cache->buffer);
    if (rows->per_row &&
        ((st = nu__op_rows_tensor(fn, "positions", rows->positions, tokens, cache, &bind[2], &first_pos, &pos_stride)) != NU_OK ||
         (rows->slots &&
          (st = nu__op_rows_tensor(fn, "slots", rows->slots, tokens, cache, &bind[3], &first_slot, &slot_stride)) != NU_OK)))
        return st;
    nu__rope_plan plan = {0};
    plan.pscale = plan.mscale = 1.0f;
    plan.ff = nu__op_unbound(cache->buffer);
    uint32_t local = rope ? KV_ROPE_LOCAL : KV_LOCAL;
    if (rope) {
        /* The write's positions drive the rotation: one tensor (or one graph parameter) moves both. */
        if (rope->positions)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: rope->positions must be NULL (each row turns by its "
                            "write position)", fn);
        if (rope->position_offset)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: rope->position_offset is %d; it must be 0 (the "
                            "write's position is the rotation's)", fn, (int)rope->position_offset);
        if ((st = nu__rope_plan_make(d, fn, rope, dim, cache, cache, &plan)) != NU_OK)
            return st;
        uint32_t tl = rope->tune.local;
        if (tl && (tl < 32 || tl > 1024 || (tl & (tl - 1))))
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: rope->tune.local %u must be a power of two, 32..1024", fn, tl);
        local = tl ? tl : local;
        if ((st = nu__op_env_knobs(d, fn, "NUVEC_KV_APPEND_ROPE", "local=32..1024 (a power of two)", apply_knob, &local)) !=
            NU_OK)
            return st;
    }
    uint64_t units = rope ? plan.rotary / 2 + ((uint64_t)dim - plan.rotary) : (uint64_t)dim;
    uint64_t threads = (uint64_t)tokens * (uint64_t)heads * units;
    if (!threads)
        return NU_OK;
    if (threads > UINT32_MAX)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: %llu pairs and copied elements; at most 2^32 - 1", fn,
                        (unsigned long long)threads);
    if ((st = nu__op_bind(fn, cache, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, src, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK)
        return st;
    bind[4] = plan.ff;
    while (local > 32 && (local > d->info.max_workgroup_size[0] || local > d->info.max_workgroup_invocations))
        local /= 2;
    uint32_t layout = !rope ? 0u : rope->layout == NU_ROPE_HALF ? 2u : 1u;
    uint32_t constants[5] = {nu__op_dtype_code(cache->dtype), nu__op_dtype_code(src->dtype), layout, local, plan.has_ff};
    uint32_t flags = (rows->per_row ? 1u : 0u) | (rows->slots ? 2u : 0u);
    /* Strides of dimensions of size 1 are never used: 0 keeps them within 32 bits. */
    uint32_t s_tok = tokens > 1 ? (uint32_t)src->strides[0] : 0, s_head = heads > 1 ? (uint32_t)src->strides[1] : 0;
    uint32_t s_dim = dim > 1 ? (uint32_t)src->strides[2] : 0;
    struct kv_push {
        uint32_t count, heads, dim, position, positions, first_cache, first_src, s_tok, s_head, s_dim, rotary, units;
        float step;
        uint32_t flags, slots, first_pos, pos_stride, first_slot, slot_stride;
        float pscale, mscale;
        uint32_t first_ff, ff_stride;
    } push = {(uint32_t)threads, (uint32_t)heads, (uint32_t)dim, rows->position, (uint32_t)positions, first[0], first[1],
              s_tok, s_head, s_dim, rope ? plan.rotary : 0, (uint32_t)units, plan.step, flags, (uint32_t)slots, first_pos,
              pos_stride, first_slot, slot_stride, plan.pscale, plan.mscale, plan.ff_first, plan.ff_stride};
    nu_kernel *kern;
    if ((st = nu__op_kernel(d, NU__K_kv_write, sizeof push, constants, 5, &kern)) != NU_OK)
        return st;
    uint32_t groups[3];
    nu__op_groups(threads, local, groups);
    st = nu_commands_dispatch(c, kern, groups, bind, 5, &push, sizeof push);
    nu__op_value_at value = {NU_OP_VALUE_POSITION, 0, offsetof(struct kv_push, position)};
    if (st == NU_OK && !rows->per_row)
        nu__graph_note_values(c, fn, &value, 1);
    return st;
}

nu_status nu_op_kv_write(nu_commands *c, const nu_tensor *cache, const nu_tensor *src, const nu_kv_write_desc *desc)
{
    static const char fn[] = "nu_op_kv_write";
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    if (!desc || !desc->positions)
        return nu__fail(c->s.device, NU_ERROR_INVALID_ARGUMENT, "%s: %s", fn, desc ? "NULL positions" : "NULL desc");
    kv_rows rows = {true, 0, desc->positions, desc->slots};
    return kv_record(c, fn, cache, src, &rows, desc->rope);
}

nu_status nu_op_kv_append(nu_commands *c, const nu_tensor *cache, const nu_tensor *src, uint32_t position)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_op_kv_append: NULL command buffer");
    kv_rows rows = {false, position, NULL, NULL};
    return kv_record(c, "nu_op_kv_append", cache, src, &rows, NULL);
}

nu_status nu_op_kv_append_rope(nu_commands *c, const nu_tensor *cache, const nu_tensor *src, uint32_t position,
                               const nu_rope_desc *rope)
{
    static const char fn[] = "nu_op_kv_append_rope";
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    if (!rope)
        return nu__fail(c->s.device, NU_ERROR_INVALID_ARGUMENT, "%s: NULL rope desc", fn);
    kv_rows rows = {false, position, NULL, NULL};
    return kv_record(c, fn, cache, src, &rows, rope);
}
