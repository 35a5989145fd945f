/* gather.c: embedding lookup (nu_op_gather; kernels/gather/gather.comp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "ops/op.h"

/* Tuning knobs (gather.comp's specialisation constants 0 and 4); NUVEC_TUNE_GATHER="local=N,units=N"
 * overrides them for a sweep without a rebuild (read at each call). */
#define GATHER_LOCAL 256u
#define GATHER_UNITS 2u

static void gather_tuning(uint32_t *local, uint32_t *units)
{
    *local = GATHER_LOCAL;
    *units = GATHER_UNITS;
    const char *s = getenv("NUVEC_TUNE_GATHER");
    if (!s)
        return;
    unsigned v;
    const char *p;
    if ((p = strstr(s, "local=")) && sscanf(p + 6, "%u", &v) == 1 && v >= 1 && v <= 1024)
        *local = v;
    if ((p = strstr(s, "units=")) && sscanf(p + 6, "%u", &v) == 1 && v >= 1 && v <= 4)
        *units = v;
}

nu_status nu_op_gather(nu_commands *c, const nu_tensor *dst, const nu_tensor *table, const nu_tensor *ids)
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
    uint32_t local, units;
    gather_tuning(&local, &units);
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
