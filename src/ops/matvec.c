/* matvec.c: matrix-vector and skinny matrix products against float and block-quantized weights
 * (nu_op_matvec), alone or fused with the RMSNorm of x, a bias, a gated linear unit and a
 * residual add (nu_op_matvec_fused: nu_op_matvec is its NULL desc, one code path). Two kernels:
 * the float path (kernels/matvec/matvec_kernel.glsl, built as matvec.comp and matvec_sg.comp),
 * and for block weights on devices with integer dot products the dot path
 * (kernels/matvec/matvec_dot.comp: x quantized to 8 bits per block); both decode the blocks with
 * kernels/quant.glsl. Each kernel's header describes its layout and knobs; the fused forms are
 * specialisation constants (FUSE 0 compiles to the plain product). Q4_0_SOA weights go to their
 * own kernel (src/ops/matvec_soa.c). The knobs: desc->tune, then NUVEC_MATVEC over it
 * (docs/knobs.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/commands.h"
#include "kernels_table.h"
#include "ops/matvec_soa.h"
#include "ops/op.h"

/* One call's validated arguments, knobs and bindings (0 dst, 1 weight, 2 x, 3 norm_weight, 4
 * glu_up, 5 residual, 6 bias: the kernels' bindings; x's binding again where a fused input is
 * absent). */
typedef struct mv_call {
    nu_device *d;
    const char *fn;
    const nu_tensor *dst, *weight, *x, *norm, *up, *res, *bias;
    float eps;
    int64_t m, n, k;
    uint32_t fuse; /* the kernels' FUSE: bit 0 norm, 1 glu, 2 residual, 3 GELU (the GLU's), 4 bias */
    nu__mv_knobs knobs;
    nu_binding bind[7];
    uint32_t first[7];
} mv_call;
#define MV_NORM 1u
#define MV_GLU 2u
#define MV_RESID 4u
#define MV_GELU 8u
#define MV_BIAS 16u
/* The weight rows a row group loads per row it computes: gate and up with a GLU. */
#define MV_WEIGHTS(fuse) ((fuse) & MV_GLU ? 2u : 1u)

/* Both kernels' push constants (kernels/matvec/matvec_kernel.glsl's Push). */
typedef struct mv_push {
    uint32_t n, k, first_w, w_row, w_col, first_x, x_row, x_col, first_dst;
    uint32_t first_up, up_row, up_col, first_g, g_col, first_res, res_row, res_col;
    float eps;
    uint32_t first_bias, bias_col;
} mv_push;

/* The kernel's tuning knobs (its specialisation constants 4 to 6, and bit 0 of 7). */
typedef struct matvec_tune {
    uint32_t local, rows, unroll;
    int subgroup; /* -1: use subgroup arithmetic where the device has it; 0: never */
    int dot;      /* -1: the dot path for block weights where it applies; 0: never */
    uint32_t groups; /* the dot path's most workgroups (each quantizes x once); 0: as many as the rows need */
    uint32_t split;  /* the dot path's subgroups a row group */
    uint32_t glu_rows; /* rows with a GLU (gate and up rows each: twice the loads); 0: as rows */
} matvec_tune;

/* The defaults: see below (the .comp's header describes each knob). */
/* Measured on the H200 (bench/RESULTS.md, 2026-12-01, `bash bench/h200.sh matvec`: nine settings,
 * one token): 256 threads, 2 rows, unroll 2 was the best or within 3% of it for F16, BF16, Q8_0 and
 * Q4_0 weights at the four 7B decode shapes (F16 4096x11008: 86% of the copy bandwidth against 79%
 * for 128/2/4); F32 weights keep 128 threads, 2 rows, unroll 2 (82-107%). More rows of x share
 * their weight loads over 4 rows (not measured yet). */
static matvec_tune default_tune(nu_dtype w, int64_t m)
{
    if (w == NU_DTYPE_F32)
        return (matvec_tune){128, 2, 2, -1, -1, 0, 1, 0};
    return (matvec_tune){256, m > 2 ? 4 : 2, 2, -1, -1, 0, 1, 0};
}
/* The dot path's defaults (kernels/matvec/matvec_dot.comp): measured on the H200 (bench/RESULTS.md,
 * 2026-12-01, NUVEC_MATVEC sweeps of `nuvec bench ops --filter matvec`): 1024 threads, a row per
 * subgroup (or two: below), 4 units in flight, at most 264 workgroups (2 per SM there) was the best
 * of 30 settings for Q8_0 and Q4_0 at the four 7B decode shapes, or within 4% of it. */
static uint64_t dot_shared_bytes(int64_t m, int64_t k, uint32_t local, uint32_t rows, uint32_t split, uint32_t fuse);
static matvec_tune default_dot_tune(void)
{
    return (matvec_tune){1024, 1, 4, -1, -1, 264, 0, 0}; /* split 0: chosen by auto_split once the knobs are read */
}
/* Two subgroups a row where the rows are fewer than the grid's subgroups (4096 rows: 45% of the
 * copy bandwidth for Q8_0 against 41%, Q4_0 28% against 25%; 11008 rows and more: one), where the
 * workgroup (the default's or NUVEC_MATVEC's) holds whole pairs of subgroups. */
static uint32_t auto_split(nu_device *d, const matvec_tune *t, int64_t m, int64_t n, int64_t k, uint32_t fuse)
{
    uint32_t sg = d->info.subgroup_size ? d->info.subgroup_size : 1;
    uint64_t grid = (uint64_t)t->groups * (t->local / sg); /* groups 0: a workgroup per row group, never short */
    if ((uint64_t)n < grid && t->local % (2 * sg) == 0 &&
        dot_shared_bytes(m, k, t->local, t->rows, 2, fuse) <= d->info.max_shared_memory)
        return 2;
    return 1;
}

int nu__matvec_knob(const char *key, const char *value, nu__mv_knobs *k)
{
    uint32_t v;
    if (!strcmp(key, "local"))
        return nu__op_knob_u32(value, 32, 1024, true, &k->local);
    if (!strcmp(key, "rows"))
        return nu__op_knob_u32(value, 1, 8, false, &k->rows);
    if (!strcmp(key, "unroll"))
        return nu__op_knob_u32(value, 1, 8, false, &k->unroll);
    if (!strcmp(key, "groups")) { /* 0: as many as the rows need */
        if (!nu__op_knob_u32(value, 0, 65535, false, &v))
            return 0;
        k->groups = v ? v : MV_GROUPS_ALL;
        return 1;
    }
    if (!strcmp(key, "split"))
        return nu__op_knob_u32(value, 1, 32, true, &k->split);
    if (!strcmp(key, "dot")) {
        if (!nu__op_knob_u32(value, 0, 1, false, &v))
            return 0;
        k->dot = v ? 1 : -1;
        return 1;
    }
    return -1;
}

/* NUVEC_MATVEC's keys beyond the shared ones. */
static bool apply_knob(void *ctx, const char *key, const char *value)
{
    nu__mv_knobs *k = ctx;
    uint32_t v;
    int common = nu__matvec_knob(key, value, k);
    if (common >= 0)
        return common == 1;
    if (!strcmp(key, "glurows")) /* 0: as rows */
        return nu__op_knob_u32(value, 0, 8, false, &k->glu_rows);
    if (!strcmp(key, "subgroup") && nu__op_knob_u32(value, 0, 1, false, &v))
        return k->subgroup = v ? 1 : -1, true;
    if (!strcmp(key, "kruns") && nu__op_knob_u32(value, 0, 1, false, &v))
        return k->k_runs = v ? 1 : -1, true;
    return false;
}

nu_status nu__matvec_tune_knobs(nu_device *d, const char *fn, const nu_matvec_tune *t, nu__mv_knobs *k)
{
    static const nu_matvec_tune none;
    if (!t)
        t = &none;
    memset(k, 0, sizeof *k);
    bool pow2_local = !(t->local & (t->local - 1)), pow2_split = !(t->split & (t->split - 1));
    const nu__op_field fields[6] = {
        {"local", t->local, t->local >= 32 && t->local <= 1024 && pow2_local, "a power of two 32..1024"},
        {"rows", t->rows, t->rows <= 8, "1..8"},
        {"unroll", t->unroll, t->unroll <= 8, "1..8"},
        {"groups", t->groups, t->groups <= 65535, "1..65535"},
        {"split", t->split, t->split <= 32 && pow2_split, "a power of two 1..32"},
        {"glu_rows", t->glu_rows, t->glu_rows <= 8, "1..8"},
    };
    nu_status st = nu__op_tune_check(d, fn, fields, 6);
    if (st != NU_OK)
        return st;
    *k = (nu__mv_knobs){t->local, t->rows, t->unroll, t->groups, t->split, t->glu_rows,
                        t->float_path ? -1 : 0, t->no_subgroup ? -1 : 0, t->prefetch ? 1 : 0,
                        t->generic_k_formats ? -1 : 0, t->k_single_runs ? -1 : 0};
    return NU_OK;
}

/* desc->tune, then NUVEC_MATVEC over it. */
static nu_status matvec_knobs(nu_device *d, const char *fn, const nu_matvec_tune *t, nu__mv_knobs *k)
{
    nu_status st = nu__matvec_tune_knobs(d, fn, t, k);
    if (st != NU_OK)
        return st;
    return nu__op_env_knobs(d, fn, "NUVEC_MATVEC",
                            "local=32..1024 (a power of two), rows=1..8, unroll=1..8, subgroup=0|1, dot=0|1, "
                            "groups=0..65535, split=1..32 (a power of two), glurows=0..8 (0: as rows), "
                            "kruns=0|1",
                            apply_knob, k);
}

/* The knobs given (desc->tune, NUVEC_MATVEC) over a kernel's defaults, and the workgroup checked
 * against the device. */
static nu_status take_knobs(const mv_call *a, matvec_tune *t)
{
    const nu__mv_knobs *k = &a->knobs;
    uint32_t *const to[5] = {&t->local, &t->rows, &t->unroll, &t->split, &t->glu_rows};
    const uint32_t given[5] = {k->local, k->rows, k->unroll, k->split, k->glu_rows};
    nu__op_tune_take(to, given, 5);
    if (k->groups)
        t->groups = k->groups == MV_GROUPS_ALL ? 0 : k->groups;
    if (k->subgroup)
        t->subgroup = k->subgroup > 0 ? -1 : 0;
    if (t->local > a->d->info.max_workgroup_size[0])
        return nu__fail(a->d, NU_ERROR_INVALID_ARGUMENT, "%s: local=%u threads a workgroup; %s takes at most %u", a->fn,
                        t->local, a->d->info.name, a->d->info.max_workgroup_size[0]);
    return NU_OK;
}

/* Whether view t's rows (dimension 0) all start 16-byte aligned in its binding and its last
 * dimension is contiguous: the 16-byte vector paths. */
static bool rows_aligned(const nu_tensor *t, uint32_t first)
{
    uint64_t es = nu_dtype_size(t->dtype);
    if (t->shape[1] > 1 && t->strides[1] != 1)
        return false;
    if (first * es % 16)
        return false;
    return t->shape[0] == 1 || (uint64_t)t->strides[0] * es % 16 == 0;
}

/* The dot path's shared memory: x's blocks per row rounded up to a multiple of 64 (few pipelines
 * serve every K), 52 bytes a block and row (32 of 8-bit values, 4 of its step, 16 of its groups'
 * sums). */
static uint32_t dot_capacity_blocks(int64_t k) { return (uint32_t)((k / 32 + 63) / 64 * 64); }

/* The dot path's shared memory: x's quantized rows, the partial sums of split row groups (one
 * float where split is 1: the array cannot be empty), and with the norm each block's sum of
 * squares (one float without). */
static uint64_t dot_shared_bytes(int64_t m, int64_t k, uint32_t local, uint32_t rows, uint32_t split, uint32_t fuse)
{
    uint64_t sums = split > 1 ? (local / 8) * rows * MV_WEIGHTS(fuse) * (uint64_t)m : 1;
    uint64_t squares = fuse & MV_NORM ? (uint64_t)m * dot_capacity_blocks(k) : 1;
    return 52ull * (uint64_t)m * dot_capacity_blocks(k) + 4ull * (sums + squares);
}

/* Whether the dot path (kernels/matvec/matvec_dot.comp) takes block weights: a device with integer
 * dot products, subgroup arithmetic and shuffles, subgroups of a multiple of 8 threads, and x's
 * quantized rows in shared memory. */
static bool dot_path_applies(nu_device *d, int64_t m, int64_t k, uint32_t fuse)
{
    const nu_device_info *in = &d->info;
    uint32_t ops = NU_SUBGROUP_ARITHMETIC | NU_SUBGROUP_SHUFFLE;
    if (!in->features[NU_FEATURE_INTEGER_DOT_PRODUCT] || (in->subgroup_operations & ops) != ops ||
        in->subgroup_size < 8 || in->subgroup_size % 8)
        return false;
    return dot_shared_bytes(m, k, 1, 1, 1, fuse) <= in->max_shared_memory;
}

/* Whether norm_weight (1-D) takes the kernels' vector loads: stride 1, 16-byte aligned. */
static bool vector_aligned(const nu_tensor *t, uint32_t first)
{
    return (t->shape[0] == 1 || t->strides[0] == 1) && first * nu_dtype_size(t->dtype) % 16 == 0;
}

/* A weight's row stride as the kernels take it: elements, or 16-bit halves for block dtypes
 * (rows of whole blocks); 0 for a single row (its stride is never used). */
static uint32_t weight_row(const nu_tensor *w)
{
    if (w->shape[0] <= 1)
        return 0;
    if (nu_dtype_block_elements(w->dtype) > 1)
        return nu__op_block_halves(w, w->strides[0]);
    return (uint32_t)w->strides[0];
}

/* The push constants both kernels take (strides of dimensions of size 1 are never used: 0 keeps
 * them within 32 bits). */
static mv_push make_push(const mv_call *a)
{
    const nu_tensor *w = a->weight, *x = a->x;
    bool block = nu_dtype_block_elements(w->dtype) > 1;
    mv_push p = {(uint32_t)a->n, (uint32_t)a->k, a->first[1], weight_row(w),
                 !block && a->k > 1 ? (uint32_t)w->strides[1] : 0, a->first[2],
                 a->m > 1 ? (uint32_t)x->strides[0] : 0, a->k > 1 ? (uint32_t)x->strides[1] : 0, a->first[0],
                 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0};
    if (a->up) {
        p.first_up = a->first[4];
        p.up_row = weight_row(a->up);
        p.up_col = !block && a->k > 1 ? (uint32_t)a->up->strides[1] : 0;
    }
    if (a->norm) {
        p.first_g = a->first[3];
        p.g_col = a->k > 1 ? (uint32_t)a->norm->strides[0] : 0;
        p.eps = a->eps;
    }
    if (a->res) {
        p.first_res = a->first[5];
        p.res_row = a->m > 1 ? (uint32_t)a->res->strides[0] : 0;
        p.res_col = a->n > 1 ? (uint32_t)a->res->strides[1] : 0;
    }
    if (a->bias) {
        p.first_bias = a->first[6];
        p.bias_col = a->n > 1 ? (uint32_t)a->bias->strides[0] : 0;
    }
    return p;
}

static uint32_t code_or_f32(const nu_tensor *t) { return t ? nu__op_dtype_code(t->dtype) : 0u; }

static nu_status record_dot(nu_commands *c, const mv_call *a)
{
    nu_device *d = a->d;
    const char *fn = a->fn;
    int64_t m = a->m, n = a->n, k = a->k;
    matvec_tune tune = default_dot_tune();
    nu_status st;
    if ((st = take_knobs(a, &tune)) != NU_OK)
        return st;
    if ((a->fuse & MV_GLU) && tune.glu_rows)
        tune.rows = tune.glu_rows;
    if (!tune.split)
        tune.split = auto_split(d, &tune, m, n, k, a->fuse);
    uint32_t sg = d->info.subgroup_size;
    uint64_t shared = dot_shared_bytes(m, k, tune.local, tune.rows, tune.split, a->fuse);
    if (shared > d->info.max_shared_memory)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: split=%u with %u threads and %u rows needs %llu bytes of shared "
                        "memory; %s has %u", fn, tune.split, tune.local, tune.rows, (unsigned long long)shared,
                        d->info.name, d->info.max_shared_memory);
    if (tune.local > d->info.max_workgroup_size[0] || tune.local > d->info.max_workgroup_invocations ||
        tune.local % (sg * tune.split))
        return nu__fail(d, NU_ERROR_UNSUPPORTED,
                        "%s: %u threads a workgroup in groups of %u subgroups do not suit %s (subgroups of %u)", fn,
                        tune.local, tune.split, d->info.name, sg);
    uint32_t flags = (rows_aligned(a->x, a->first[2]) ? 4u : 0u) |
                     (a->norm && vector_aligned(a->norm, a->first[3]) ? 8u : 0u);
    uint32_t constants[14] = {nu__op_dtype_code(a->weight->dtype), nu__op_dtype_code(a->x->dtype),
                              nu__op_dtype_code(a->dst->dtype), (uint32_t)m, tune.local, tune.rows, tune.unroll,
                              flags, dot_capacity_blocks(k), tune.split, a->fuse, code_or_f32(a->norm),
                              code_or_f32(a->res), code_or_f32(a->bias)};
    mv_push push = make_push(a);
    nu_kernel *kern;
    if ((st = nu__op_kernel(d, NU__K_matvec_dot, sizeof push, constants, 14, &kern)) != NU_OK)
        return st;
    /* Row groups are spread over all the grid's subgroups. */
    uint64_t row_groups = ((uint64_t)n + tune.rows - 1) / tune.rows;
    uint64_t slots = tune.local / sg / tune.split; /* row groups a workgroup takes at a time */
    uint64_t wanted = (row_groups + slots - 1) / slots;
    if (tune.groups && wanted > tune.groups)
        wanted = tune.groups;
    uint32_t groups[3] = {(uint32_t)(wanted > 65535 ? 65535 : wanted), 1, 1};
    return nu_commands_dispatch(c, kern, groups, a->bind, 7, &push, sizeof push);
}

/* The float path's reduction memory (the shader's RED): a float per sum (ROWS x M products, twice
 * with a GLU, and M sums of squares with the norm) and per subgroup, or per thread for the tree. */
static uint64_t float_shared_bytes(const matvec_tune *t, int64_t m, uint32_t fuse, bool subgroup)
{
    uint64_t sums = (uint64_t)t->rows * MV_WEIGHTS(fuse) * (uint64_t)m + (fuse & MV_NORM ? (uint64_t)m : 0);
    return 4ull * sums * (subgroup ? t->local / 8 : t->local);
}

static nu_status record_float(nu_commands *c, const mv_call *a)
{
    nu_device *d = a->d;
    nu_status st;
    bool block = nu_dtype_block_elements(a->weight->dtype) > 1;
    bool can_subgroup = (d->info.subgroup_operations & NU_SUBGROUP_ARITHMETIC) && d->info.subgroup_size >= 8;
    matvec_tune tune = default_tune(a->weight->dtype, a->m);
    /* The fused sums may not fit the default's rows in a small shared memory: fewer rows (the
     * environment's knobs are taken as they are, and refused below where they do not fit). */
    while (tune.rows > 1 && float_shared_bytes(&tune, a->m, a->fuse, can_subgroup) > d->info.max_shared_memory)
        tune.rows /= 2;
    if ((st = take_knobs(a, &tune)) != NU_OK)
        return st;
    if ((a->fuse & MV_GLU) && tune.glu_rows)
        tune.rows = tune.glu_rows;
    bool subgroup = tune.subgroup && can_subgroup;
    bool wvec = !block && rows_aligned(a->weight, a->first[1]) && (!a->up || rows_aligned(a->up, a->first[4]));
    uint32_t flags = (subgroup ? 1u : 0u) | (wvec ? 2u : 0u) | (rows_aligned(a->x, a->first[2]) ? 4u : 0u) |
                     (a->norm && vector_aligned(a->norm, a->first[3]) ? 8u : 0u);
    uint32_t wdt = nu__op_dtype_code(a->weight->dtype);
    uint64_t shared = float_shared_bytes(&tune, a->m, a->fuse, subgroup);
    if (shared > d->info.max_shared_memory || tune.local > d->info.max_workgroup_size[0] ||
        tune.local > d->info.max_workgroup_invocations)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: %u threads and %u rows a workgroup need more than %s offers",
                        a->fn, tune.local, tune.rows, d->info.name);
    uint32_t constants[12] = {wdt, nu__op_dtype_code(a->x->dtype), nu__op_dtype_code(a->dst->dtype), (uint32_t)a->m,
                              tune.local, tune.rows, tune.unroll, flags, a->fuse, code_or_f32(a->norm),
                              code_or_f32(a->res), code_or_f32(a->bias)};
    mv_push push = make_push(a);
    nu_kernel *kern;
    /* A device without subgroup arithmetic must not see a module that declares it. */
    if ((st = nu__op_kernel(d, subgroup ? NU__K_matvec_sg : NU__K_matvec, sizeof push, constants, 12, &kern)) != NU_OK)
        return st;
    uint32_t groups[3];
    nu__op_groups(((uint64_t)a->n + tune.rows - 1) / tune.rows, 1, groups);
    return nu_commands_dispatch(c, kern, groups, a->bind, 7, &push, sizeof push);
}

static nu_status shape_of(nu_device *d, const char *fn, const char *name, const nu_tensor *t)
{
    if (t->rank != 2)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %s has rank %u; it must be 2 ([%s])", fn, name, t->rank,
                        !strcmp(name, "x") ? "m, k" : (!strcmp(name, "dst") || !strcmp(name, "residual")) ? "m, n" : "n, k");
    return NU_OK;
}

/* A 1-D float field (norm_weight [k], bias [n]) of `len` elements (`of`: whose length), not
 * overlapping dst. */
static nu_status check_vector(const mv_call *a, const char *name, const nu_tensor *t, int64_t len, const char *of)
{
    nu_status st = nu__op_check(a->fn, name, t, NU__OP_FLOAT);
    if (st != NU_OK)
        return st;
    if (t->rank != 1 || t->shape[0] != len)
        return nu__fail(a->d, NU_ERROR_INVALID_ARGUMENT, "%s: %s has rank %u and %lld elements; it must be [%lld] (%s)",
                        a->fn, name, t->rank, (long long)(t->rank ? t->shape[0] : 1), (long long)len, of);
    return nu__op_no_alias(a->fn, a->dst, name, t, false);
}

/* The desc's fields against the product's shapes (a->m, n, k set): what the contract requires of
 * each, and no overlap of dst with any input but residual's exact view. */
static nu_status check_desc(mv_call *a, const nu_matvec_desc *desc)
{
    nu_device *d = a->d;
    const char *fn = a->fn;
    nu_status st;
    if (desc->norm_weight) {
        if ((st = check_vector(a, "norm_weight", desc->norm_weight, a->k, "x's k")) != NU_OK)
            return st;
        /* eps > 0: with eps 0 an all-zero row of x would divide by zero (a NaN or Inf row). */
        if (!(desc->norm_eps > 0) || !isfinite(desc->norm_eps))
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: norm_eps %g must be finite and > 0", fn,
                            (double)desc->norm_eps);
        a->norm = desc->norm_weight;
        a->eps = desc->norm_eps;
        a->fuse |= MV_NORM;
    }
    if (desc->bias) {
        if ((st = check_vector(a, "bias", desc->bias, a->n, "weight's n")) != NU_OK)
            return st;
        a->bias = desc->bias;
        a->fuse |= MV_BIAS;
    }
    if ((unsigned)desc->glu >= NU_GLU_ACTIVATION_COUNT)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: glu %d is not a nu_glu_activation", fn, (int)desc->glu);
    if (desc->glu && !desc->glu_up)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: glu (the activation) is set but glu_up is NULL (no GLU)", fn);
    if (desc->glu == NU_GLU_GELU_TANH)
        a->fuse |= MV_GELU;
    if (desc->glu_up) {
        const nu_tensor *u = a->up = desc->glu_up, *w = a->weight;
        if ((st = nu__op_check(fn, "glu_up", u, NU__OP_FLOAT | NU__OP_BLOCK | NU__OP_REPACKED)) != NU_OK ||
            (st = shape_of(d, fn, "glu_up", u)) != NU_OK)
            return st;
        if (u->dtype != w->dtype)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: glu_up is %s but weight is %s (they must match)", fn,
                            nu_dtype_name(u->dtype), nu_dtype_name(w->dtype));
        if (u->shape[0] != w->shape[0] || u->shape[1] != w->shape[1])
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: glu_up is %lldx%lld but weight is %lldx%lld (they must "
                            "match)", fn, (long long)u->shape[0], (long long)u->shape[1], (long long)w->shape[0],
                            (long long)w->shape[1]);
        if ((st = nu__op_no_alias(fn, a->dst, "glu_up", u, false)) != NU_OK)
            return st;
        a->fuse |= MV_GLU;
    }
    if (desc->residual) {
        const nu_tensor *r = a->res = desc->residual;
        if ((st = nu__op_check(fn, "residual", r, NU__OP_FLOAT)) != NU_OK ||
            (st = shape_of(d, fn, "residual", r)) != NU_OK)
            return st;
        if (r->shape[0] != a->m || r->shape[1] != a->n)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: residual is %lldx%lld; it must be %lldx%lld (dst's shape)",
                            fn, (long long)r->shape[0], (long long)r->shape[1], (long long)a->m, (long long)a->n);
        /* In place only as the same view: each element is then read by the invocation that writes it. */
        if ((st = nu__op_no_alias(fn, a->dst, "residual", r, true)) != NU_OK)
            return st;
        a->fuse |= MV_RESID;
    }
    if (desc->post_norm || desc->stream) {
        const nu_tensor *t = desc->stream;
        if (!desc->post_norm || !t)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: post_norm and stream go together (%s is NULL)", fn,
                            desc->post_norm ? "stream" : "post_norm");
        if (desc->residual)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: post_norm does not combine with residual", fn);
        if (a->dst->dtype != NU_DTYPE_F32)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: with post_norm dst must be F32 (it is %s)", fn,
                            nu_dtype_name(a->dst->dtype));
        if ((st = check_vector(a, "post_norm", desc->post_norm, a->n, "weight's n")) != NU_OK)
            return st;
        if (!(desc->post_norm_eps > 0) || !isfinite(desc->post_norm_eps))
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: post_norm_eps %g must be finite and > 0", fn,
                            (double)desc->post_norm_eps);
        if ((st = nu__op_check(fn, "stream", t, NU__OP_DTYPE(NU_DTYPE_F32))) != NU_OK || (st = shape_of(d, fn, "stream", t)) != NU_OK)
            return st;
        if (t->shape[0] != a->m || t->shape[1] != a->n)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: stream is %lldx%lld; it must be %lldx%lld (dst's shape)", fn,
                            (long long)t->shape[0], (long long)t->shape[1], (long long)a->m, (long long)a->n);
        if ((st = nu__op_contiguous(fn, "stream", t)) != NU_OK || (st = nu__op_no_alias(fn, a->dst, "stream", t, false)) != NU_OK ||
            (st = nu__op_no_alias(fn, t, "weight", a->weight, false)) != NU_OK ||
            (st = nu__op_no_alias(fn, t, "x", a->x, false)) != NU_OK ||
            (st = nu__op_no_alias(fn, t, "post_norm", desc->post_norm, false)) != NU_OK)
            return st;
    }
    return NU_OK;
}

/* post_norm where the product's kernel does not take it: the product, then stream += rms_norm(dst) *
 * post_norm (nu_op_rms_norm into a private F32 [m, n] buffer, then nu_op_add), three dispatches. */
static nu_status post_norm_apart(nu_commands *c, const char *fn, const nu_tensor *dst, const nu_tensor *weight,
                                 const nu_tensor *x, const nu_matvec_desc *desc);

static nu_status matvec(nu_commands *c, const char *fn, const nu_tensor *dst, const nu_tensor *weight,
                        const nu_tensor *x, const nu_matvec_desc *desc)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    nu_status st;
    if ((st = nu__op_check(fn, "dst", dst, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_check(fn, "weight", weight, NU__OP_FLOAT | NU__OP_BLOCK | NU__OP_REPACKED)) != NU_OK ||
        (st = nu__op_check(fn, "x", x, NU__OP_FLOAT)) != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(dst->buffer);
    if ((st = shape_of(d, fn, "weight", weight)) != NU_OK || (st = shape_of(d, fn, "x", x)) != NU_OK ||
        (st = shape_of(d, fn, "dst", dst)) != NU_OK)
        return st;
    int64_t m = x->shape[0], k = x->shape[1], n = weight->shape[0];
    if (m > NU_MATVEC_MAX_ROWS)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: x has %lld rows; at most %d (NU_MATVEC_MAX_ROWS)", fn,
                        (long long)m, NU_MATVEC_MAX_ROWS);
    if (weight->shape[1] != k)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: x is %lldx%lld but weight is %lldx%lld (k differs)", fn,
                        (long long)m, (long long)k, (long long)n, (long long)weight->shape[1]);
    if (dst->shape[0] != m || dst->shape[1] != n)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: dst is %lldx%lld; it must be %lldx%lld (x's rows, weight's)",
                        fn, (long long)dst->shape[0], (long long)dst->shape[1], (long long)m, (long long)n);
    if ((st = nu__op_contiguous(fn, "dst", dst)) != NU_OK || (st = nu__op_no_alias(fn, dst, "weight", weight, false)) != NU_OK ||
        (st = nu__op_no_alias(fn, dst, "x", x, false)) != NU_OK)
        return st;
    mv_call a = {.d = d, .fn = fn, .dst = dst, .weight = weight, .x = x, .m = m, .n = n, .k = k};
    if (desc && (st = check_desc(&a, desc)) != NU_OK)
        return st;
    if (!m || !n)
        return NU_OK; /* an empty dst */
    if (!k)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: k is 0 (x and weight are empty but dst is not)", fn);

    /* Q4_0_SOA and Q6_K_SOA weights have their own kernel, fused forms included
     * (src/ops/matvec_soa.c), and so have Q4_K's, Q5_K's and Q6_K's where it applies (unless
     * desc->tune.generic_k_formats or NUVEC_MATVEC's kruns=0 say otherwise): its loads of their
     * super-blocks are Q4_0_SOA's 16-byte runs. */
    if (NU__OP_REPACKED & NU__OP_DTYPE(weight->dtype))
        return nu__matvec_soa(c, d, dst, weight, x, desc);
    if ((st = matvec_knobs(d, fn, desc ? &desc->tune : NULL, &a.knobs)) != NU_OK)
        return st;
    if (a.knobs.k_runs >= 0 && nu__matvec_soa_takes_k(d, weight, desc))
        return nu__matvec_soa(c, d, dst, weight, x, desc);
    if (desc && desc->post_norm)
        return post_norm_apart(c, fn, dst, weight, x, desc);

    if ((st = nu__op_bind(fn, dst, NU_ACCESS_WRITE, &a.bind[0], &a.first[0])) != NU_OK ||
        (st = nu__op_bind(fn, weight, NU_ACCESS_READ, &a.bind[1], &a.first[1])) != NU_OK ||
        (st = nu__op_bind(fn, x, NU_ACCESS_READ, &a.bind[2], &a.first[2])) != NU_OK)
        return st;
    const nu_tensor *fused[4] = {a.norm, a.up, a.res, a.bias};
    for (int i = 0; i < 4; i++) {
        a.bind[3 + i] = a.bind[2], a.first[3 + i] = 0; /* absent: x's binding, never read */
        if (fused[i] && (st = nu__op_bind(fn, fused[i], NU_ACCESS_READ, &a.bind[3 + i], &a.first[3 + i])) != NU_OK)
            return st;
    }

    /* The kernel for the weight's dtype: repacked dtypes' own kernels take over here, with the
     * call validated and bound; below, the two kernels of the float and block dtypes. */
    bool block = nu_dtype_block_elements(weight->dtype) > 1;
    if (block && a.knobs.dot >= 0 && dot_path_applies(d, m, k, a.fuse))
        return record_dot(c, &a);
    return record_float(c, &a);
}

static nu_status post_norm_apart(nu_commands *c, const char *fn, const nu_tensor *dst, const nu_tensor *weight,
                                 const nu_tensor *x, const nu_matvec_desc *desc)
{
    nu_matvec_desc plain = *desc;
    plain.post_norm = plain.stream = NULL;
    plain.post_norm_eps = 0;
    nu_status st = matvec(c, fn, dst, weight, x, &plain);
    if (st != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(dst->buffer);
    nu_buffer *b;
    int64_t shape[2] = {dst->shape[0], dst->shape[1]};
    if ((st = nu_buffer_new(d, (size_t)(shape[0] * shape[1]) * 4, NU_STORAGE_PRIVATE, &b)) != NU_OK)
        return st;
    nu_tensor normed = nu_tensor_make(b, 0, NU_DTYPE_F32, 2, shape);
    st = nu_op_rms_norm(c, &normed, dst, desc->post_norm, desc->post_norm_eps);
    if (st == NU_OK)
        st = nu_op_add(c, desc->stream, desc->stream, &normed);
    nu_status st2 = nu__commands_adopt(c, b); /* freed with the recorded work */
    return st != NU_OK ? st : st2;
}

bool nu_op_matvec_fuses_post_norm(nu_device *d, const nu_tensor *weight, const nu_matvec_desc *desc)
{
    if (!d || !weight)
        return false;
    if (NU__OP_REPACKED & NU__OP_DTYPE(weight->dtype))
        return true;
    nu__mv_knobs k;
    return matvec_knobs(d, "nu_op_matvec_fuses_post_norm", desc ? &desc->tune : NULL, &k) == NU_OK && k.k_runs >= 0 &&
           nu__matvec_soa_takes_k(d, weight, desc);
}

nu_status nu_op_matvec(nu_commands *c, const nu_tensor *dst, const nu_tensor *weight, const nu_tensor *x)
{
    return matvec(c, "nu_op_matvec", dst, weight, x, NULL);
}

nu_status nu_op_matvec_fused(nu_commands *c, const nu_tensor *dst, const nu_tensor *weight, const nu_tensor *x,
                             const nu_matvec_desc *desc)
{
    return matvec(c, "nu_op_matvec_fused", dst, weight, x, desc);
}

