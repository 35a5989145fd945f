/* gather.c: embedding lookup (nu_op_gather; kernels/gather/gather.comp). */
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "ops/op.h"

/* Tuning knobs (gather.comp's specialisation constants 0 and 4): desc->tune, then
 * NUVEC_TUNE_GATHER="local=N units=N" over it (docs/knobs.md). */
#define GATHER_LOCAL 256u
#define GATHER_UNITS 2u

static bool apply_knob(void *ctx, const char *key, const char *value)
{
    nu_gather_tune *t = ctx;
    if (!strcmp(key, "local"))
        return nu__op_knob_u32(value, 1, 1024, false, &t->local);
    if (!strcmp(key, "units"))
        return nu__op_knob_u32(value, 1, 4, false, &t->units);
    return false;
}

static nu_status gather_tuning(nu_device *d, const char *fn, const nu_gather_desc *desc, nu_gather_tune *t)
{
    *t = desc ? desc->tune : (nu_gather_tune){0, 0};
    const nu__op_field fields[2] = {{"local", t->local, t->local <= 1024, "1..1024"},
                                    {"units", t->units, t->units <= 4, "1..4"}};
    nu_status st = nu__op_tune_check(d, fn, fields, 2);
    if (st == NU_OK)
        st = nu__op_env_knobs(d, fn, "NUVEC_TUNE_GATHER", "local=1..1024, units=1..4", apply_knob, t);
    if (st != NU_OK)
        return st;
    if (!t->local)
        t->local = GATHER_LOCAL;
    if (!t->units)
        t->units = GATHER_UNITS;
    if (t->local > d->info.max_workgroup_size[0])
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: local=%u threads a workgroup; %s takes at most %u", fn, t->local,
                        d->info.name, d->info.max_workgroup_size[0]);
    return NU_OK;
}

nu_status nu_op_gather(nu_commands *c, const nu_tensor *dst, const nu_tensor *table, const nu_tensor *ids)
{
    return nu_op_gather_ex(c, dst, table, ids, NULL);
}

nu_status nu_op_gather_ex(nu_commands *c, const nu_tensor *dst, const nu_tensor *table, const nu_tensor *ids,
                          const nu_gather_desc *desc)
{
    const char *fn = "nu_op_gather";
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_no_soa(fn, "table", table)) != NU_OK ||
        (st = nu__op_check(fn, "table", table, NU__OP_FLOAT | NU__OP_BLOCK)) != NU_OK ||
        (st = nu__op_check(fn, "ids", ids, NU__OP_DTYPE(NU_DTYPE_I32))) != NU_OK ||
        (st = nu__op_contiguous(fn, "dst", dst)) != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(dst->buffer);
    if (table->rank != 2)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: table has rank %u; it takes [vocab, dim]", fn, table->rank);
    if (ids->rank != 1)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: ids has rank %u; it takes [n]", fn, ids->rank);
    int64_t n = ids->shape[0], vocab = table->shape[0], dim = table->shape[1];
    if (dst->rank != 2 || dst->shape[0] != n || dst->shape[1] != dim)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: dst must be [n, dim] = [%lld, %lld]", fn, (long long)n,
                        (long long)dim);
    if ((st = nu__op_no_alias(fn, dst, "table", table, false)) != NU_OK ||
        (st = nu__op_no_alias(fn, dst, "ids", ids, false)) != NU_OK)
        return st;
    if (!n || !dim)
        return NU_OK;
    if (vocab > INT32_MAX) /* ids are I32: rows past 2^31 cannot be named (and the shader compares in 32 bits) */
        vocab = INT32_MAX;

    nu_binding bind[3];
    uint32_t first[3];
    /* An empty table (vocab 0): every id is out of range; bind dst's buffer in its place, unread. */
    bool empty = vocab == 0;
    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(fn, empty ? ids : table, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK ||
        (st = nu__op_bind(fn, ids, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK)
        return st;
    bool block = nu_dtype_block_elements(table->dtype) > 1;
    uint32_t code = nu__op_dtype_code(table->dtype);
    size_t et = block ? 0 : nu_dtype_size(table->dtype), ed = nu_dtype_size(dst->dtype);
    uint32_t row_stride = block ? nu__op_block_halves(table, table->strides[0]) : (uint32_t)table->strides[0];
    bool vec = dim % 8 == 0 && (uint64_t)first[0] * ed % 16 == 0 &&
               (block || (table->strides[1] == 1 && (uint64_t)first[1] * et % 16 == 0 &&
                          (vocab <= 1 || (uint64_t)table->strides[0] * et % 16 == 0)));
    nu_gather_tune tune;
    if ((st = gather_tuning(d, fn, desc, &tune)) != NU_OK)
        return st;
    uint32_t local = tune.local, units = tune.units;
    uint32_t constants[5] = {local, empty ? 0u : code, nu__op_dtype_code(dst->dtype), vec, units};
    struct {
        uint32_t n, dim, vocab;
        uint32_t first_dst, first_table, first_ids;
        uint32_t row_stride, col_stride, ids_stride;
    } push = {(uint32_t)n, (uint32_t)dim, (uint32_t)vocab, first[0], first[1], first[2], row_stride,
              (uint32_t)table->strides[1], (uint32_t)ids->strides[0]};
    nu_kernel *k;
    if ((st = nu__op_kernel(d, NU__K_gather, sizeof push, constants, 5, &k)) != NU_OK)
        return st;
    uint64_t work = (uint64_t)n * (uint64_t)(vec ? dim / 8 : dim);
    uint32_t groups[3];
    nu__op_groups((work + units - 1) / units, local, groups);
    return nu_commands_dispatch(c, k, groups, bind, 3, &push, sizeof push);
}
