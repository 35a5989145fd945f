/* rows.c: laying the row kernels (kernels/reduce/reduce.glsl) over a tensor's rows (rows.h).
 *
 * One team of threads a row, a power of two, giving each thread about one 8-element step of the
 * row (a row of 4096 gets a whole workgroup of 256, a row of 256 a team of 32 and a workgroup
 * of 256 eight rows); rows of NU__ROWS_LONG elements or more get workgroups of
 * NU__ROWS_LOCAL_LONG threads, for more loads in flight on the one multiprocessor a row runs
 * on. Teams have at least NU__ROWS_MIN_TEAM threads; they reduce with subgroup arithmetic when
 * the device has it and a team is a whole number of its largest subgroups, else through a
 * shared-memory tree.
 *
 * A caller's nu_rows_tune sets these (zero fields: the defaults), and NUVEC_OPS_ROWS="local=256
 * long_local=1024 long=16384 min_team=32 unroll=2" (any of them; the values shown are the
 * defaults) overrides it for sweeps without a rebuild (docs/knobs.md). */
#include "ops/rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "memory/buffer.h"

#define NU__ROWS_LOCAL 256u
#define NU__ROWS_LOCAL_LONG 1024u
#define NU__ROWS_LONG 16384u
#define NU__ROWS_MIN_TEAM 32u
#define NU__ROWS_UNROLL 2u

static uint32_t pow2_below(uint32_t v)
{
    uint32_t p = 1;
    while (p * 2 <= v && p < (1u << 30))
        p *= 2;
    return p;
}

/* NUVEC_OPS_ROWS's keys, each 1..4096 (unroll 1..8). */
static bool apply_knob(void *ctx, const char *key, const char *value)
{
    nu_rows_tune *t = ctx;
    struct { const char *name; uint32_t *v; uint32_t max; } keys[] = {{"local", &t->local, 4096},
        {"long_local", &t->long_local, 4096}, {"long", &t->long_row, 1u << 30}, {"min_team", &t->min_team, 4096},
        {"unroll", &t->unroll, 8}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(key, keys[i].name))
            return nu__op_knob_u32(value, 1, keys[i].max, false, keys[i].v);
    return false;
}

static nu_status tuning(nu_device *d, const char *op, const nu_rows_tune *given, nu_rows_tune *t)
{
    nu_rows_tune g = given ? *given : (nu_rows_tune){0, 0, 0, 0, 0};
    const nu__op_field fields[5] = {{"local", g.local, g.local <= 4096, "1..4096"},
                                    {"long_local", g.long_local, g.long_local <= 4096, "1..4096"},
                                    {"long_row", g.long_row, g.long_row <= (1u << 30), "1..2^30"},
                                    {"min_team", g.min_team, g.min_team <= 4096, "1..4096"},
                                    {"unroll", g.unroll, g.unroll <= 8, "1..8"}};
    nu_status st = nu__op_tune_check(d, op, fields, 5);
    if (st != NU_OK)
        return st;
    *t = (nu_rows_tune){NU__ROWS_LOCAL, NU__ROWS_LOCAL_LONG, NU__ROWS_LONG, NU__ROWS_MIN_TEAM, NU__ROWS_UNROLL};
    uint32_t *const to[5] = {&t->local, &t->long_local, &t->long_row, &t->min_team, &t->unroll};
    const uint32_t taken[5] = {g.local, g.long_local, g.long_row, g.min_team, g.unroll};
    nu__op_tune_take(to, taken, 5);
    return nu__op_env_knobs(d, op, "NUVEC_OPS_ROWS", "local=, long_local=, min_team= (1..4096), long=1..2^30, unroll=1..8",
                            apply_knob, t);
}

nu_status nu__rows_plan(const char *op, const nu_tensor *src, const nu_rows_tune *tune, nu__rows *p)
{
    nu_device *d = src->buffer->device;
    nu_rows_tune t;
    memset(p, 0, sizeof *p);
    nu_status st = tuning(d, op, tune, &t);
    if (st != NU_OK)
        return st;
    nu__op_dims4(src, p->shape, p->strides);
    p->n = p->shape[3];
    p->rows = (uint32_t)(nu_tensor_numel(src) / p->n);
    uint32_t max_local = d->info.max_workgroup_invocations ? d->info.max_workgroup_invocations : 128;
    if (d->info.max_workgroup_size[0] && d->info.max_workgroup_size[0] < max_local)
        max_local = d->info.max_workgroup_size[0];
    uint32_t local = pow2_below(p->n >= t.long_row ? t.long_local : t.local);
    local = local > max_local ? pow2_below(max_local) : local;
    /* A team of about n / 8 threads: one 8-element step each. */
    uint32_t want = (p->n + 7) / 8, team = 1;
    while (team < want && team < local)
        team *= 2;
    uint32_t min_team = pow2_below(t.min_team < 8 ? 8 : t.min_team);
    if (team < min_team)
        team = min_team;
    if (team > local)
        team = local;
    if (team < 8) /* a thread takes at most one of a vector row's last n % 8 (reduce.glsl) */
        local = team = 8;
    p->local = local;
    p->per_group = local / team;
    p->unroll = t.unroll > 8 ? 8 : t.unroll;
    uint32_t ops = d->info.subgroup_operations;
    p->sg_module = (ops & NU_SUBGROUP_BASIC) && (ops & NU_SUBGROUP_ARITHMETIC);
    uint32_t sg = d->info.max_subgroup_size ? d->info.max_subgroup_size : d->info.subgroup_size;
    p->subgroup = p->sg_module && sg && team % sg == 0;
    nu__op_groups(((uint64_t)p->rows + p->per_group - 1) / p->per_group, 1, p->groups);
    return NU_OK;
}

bool nu__rows_vec(const nu_tensor *t, uint32_t first)
{
    uint32_t es = (uint32_t)nu_dtype_size(t->dtype);
    if (es == 0 || 16 % es)
        return false;
    uint32_t per = 16 / es, shape[4], strides[4];
    nu__op_dims4(t, shape, strides);
    if (first % per || (shape[3] > 1 && strides[3] != 1))
        return false;
    for (int k = 0; k < 3; k++)
        if (shape[k] > 1 && strides[k] % per)
            return false;
    return true;
}

static void shape_text(const nu_tensor *t, char *s, size_t size)
{
    size_t n = 0;
    s[0] = 0;
    for (uint32_t i = 0; i < t->rank && i < NU_TENSOR_DIMS && n < size; i++)
        n += (size_t)snprintf(s + n, size - n, "%s%lld", i ? "x" : "", (long long)t->shape[i]);
}

nu_status nu__rows_shape(const char *op, const nu_tensor *dst, const nu_tensor *src, bool keep_last)
{
    bool ok = dst->rank == src->rank;
    for (uint32_t i = 0; ok && i < src->rank; i++)
        ok = dst->shape[i] == (i + 1 < src->rank || keep_last ? src->shape[i] : 1);
    if (ok)
        return NU_OK;
    char sd[96], ss[96];
    shape_text(dst, sd, sizeof sd);
    shape_text(src, ss, sizeof ss);
    return nu__fail(dst->buffer->device, NU_ERROR_INVALID_ARGUMENT, "%s: dst is %s but must be %s (src is %s)", op, sd,
                    keep_last ? "src's shape" : "src's shape with the last dimension 1", ss);
}
