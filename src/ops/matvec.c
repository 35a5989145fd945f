/* matvec.c: matrix-vector and skinny matrix products against float and block-quantized weights
 * (nu_op_matvec). Two kernels: the float path (kernels/matvec/matvec_kernel.glsl, built as
 * matvec.comp and matvec_sg.comp), and for Q8_0 / Q4_0 weights on devices with integer dot
 * products the dot path (kernels/matvec/matvec_dot.comp: x quantized to 8 bits per block). Each
 * kernel's header describes its layout and knobs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "ops/matvec_soa.h"
#include "ops/op.h"

#define FN "nu_op_matvec"

/* The kernel's tuning knobs (its specialisation constants 4 to 6, and bit 0 of 7). */
typedef struct matvec_tune {
    uint32_t local, rows, unroll;
    int subgroup; /* -1: use subgroup arithmetic where the device has it; 0: never */
    int dot;      /* -1: the dot path for block weights where it applies; 0: never */
    uint32_t groups; /* the dot path's most workgroups (each quantizes x once); 0: as many as the rows need */
    uint32_t split;  /* the dot path's subgroups a row group */
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
        return (matvec_tune){128, 2, 2, -1, -1, 0, 1};
    return (matvec_tune){256, m > 2 ? 4 : 2, 2, -1, -1, 0, 1};
}
/* The dot path's defaults (kernels/matvec/matvec_dot.comp): measured on the H200 (bench/RESULTS.md,
 * 2026-12-01, NUVEC_MATVEC sweeps of `nuvec bench ops --filter matvec`): 1024 threads, a row per
 * subgroup (or two: below), 4 units in flight, at most 264 workgroups (2 per SM there) was the best
 * of 30 settings for Q8_0 and Q4_0 at the four 7B decode shapes, or within 4% of it. */
static uint64_t dot_shared_bytes(int64_t m, int64_t k, uint32_t local, uint32_t rows, uint32_t split);
static matvec_tune default_dot_tune(void)
{
    return (matvec_tune){1024, 1, 4, -1, -1, 264, 0}; /* split 0: chosen by auto_split once the knobs are read */
}
/* Two subgroups a row where the rows are fewer than the grid's subgroups (4096 rows: 45% of the
 * copy bandwidth for Q8_0 against 41%, Q4_0 28% against 25%; 11008 rows and more: one), where the
 * workgroup (the default's or NUVEC_MATVEC's) holds whole pairs of subgroups. */
static uint32_t auto_split(nu_device *d, const matvec_tune *t, int64_t m, int64_t n, int64_t k)
{
    uint32_t sg = d->info.subgroup_size ? d->info.subgroup_size : 1;
    uint64_t grid = (uint64_t)t->groups * (t->local / sg); /* groups 0: a workgroup per row group, never short */
    if ((uint64_t)n < grid && t->local % (2 * sg) == 0 &&
        dot_shared_bytes(m, k, t->local, t->rows, 2) <= d->info.max_shared_memory)
        return 2;
    return 1;
}

/* NUVEC_MATVEC="local=L rows=R unroll=U subgroup=0|1 dot=0|1 groups=G split=S" overrides the defaults
 * (for sweeping the knobs on a device without rebuilding, and for testing the float path where the
 * dot path applies); any key may be left out. dot=0 keeps block weights on the float path; the
 * other knobs apply to the path taken. */
static bool env_wants_dot(void)
{
    const char *s = getenv("NUVEC_MATVEC");
    return !s || !strstr(s, "dot=0");
}

static bool apply_knob(void *ctx, const char *key, const char *value)
{
    matvec_tune *t = ctx;
    uint32_t v;
    if (!strcmp(key, "local"))
        return nu__op_knob_u32(value, 32, 1024, true, &t->local);
    if (!strcmp(key, "rows"))
        return nu__op_knob_u32(value, 1, 8, false, &t->rows);
    if (!strcmp(key, "unroll"))
        return nu__op_knob_u32(value, 1, 8, false, &t->unroll);
    if (!strcmp(key, "groups"))
        return nu__op_knob_u32(value, 0, 65535, false, &t->groups);
    if (!strcmp(key, "split"))
        return nu__op_knob_u32(value, 1, 32, true, &t->split);
    if (!strcmp(key, "subgroup") && nu__op_knob_u32(value, 0, 1, false, &v))
        return t->subgroup = v ? -1 : 0, true;
    if (!strcmp(key, "dot") && nu__op_knob_u32(value, 0, 1, false, &v))
        return t->dot = v ? -1 : 0, true;
    return false;
}

static nu_status env_tune(nu_device *d, matvec_tune *t)
{
    nu_status st = nu__op_env_knobs(d, FN, "NUVEC_MATVEC",
                                    "local=32..1024 (a power of two), rows=1..8, unroll=1..8, subgroup=0|1, dot=0|1, "
                                    "groups=0..65535, split=1..32 (a power of two)",
                                    apply_knob, t);
    if (st == NU_OK && t->local > d->info.max_workgroup_size[0])
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": NUVEC_MATVEC has local=%u; %s takes at most %u", t->local,
                        d->info.name, d->info.max_workgroup_size[0]);
    return st;
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
 * serve every K), 48 bytes a block and row (32 of 8-bit values, 16 of scales and sums). */
static uint32_t dot_capacity_blocks(int64_t k) { return (uint32_t)((k / 32 + 63) / 64 * 64); }

/* The dot path's shared memory: x's quantized rows, and the partial sums of split row groups (one
 * float where split is 1: the array cannot be empty). */
static uint64_t dot_shared_bytes(int64_t m, int64_t k, uint32_t local, uint32_t rows, uint32_t split)
{
    return 48ull * (uint64_t)m * dot_capacity_blocks(k) + 4ull * (split > 1 ? (local / 8) * rows * (uint64_t)m : 1);
}

/* Whether the dot path (kernels/matvec/matvec_dot.comp) takes block weights: a device with integer
 * dot products, subgroup arithmetic and shuffles, subgroups of a multiple of 8 threads, and x's
 * quantized rows in shared memory. */
static bool dot_path_applies(nu_device *d, int64_t m, int64_t k)
{
    const nu_device_info *in = &d->info;
    uint32_t ops = NU_SUBGROUP_ARITHMETIC | NU_SUBGROUP_SHUFFLE;
    if (!in->features[NU_FEATURE_INTEGER_DOT_PRODUCT] || (in->subgroup_operations & ops) != ops ||
        in->subgroup_size < 8 || in->subgroup_size % 8)
        return false;
    return dot_shared_bytes(m, k, 1, 1, 1) <= in->max_shared_memory;
}

static nu_status record_dot(nu_commands *c, nu_device *d, const nu_tensor *dst, const nu_tensor *weight,
                            const nu_tensor *x, const nu_binding *bind, const uint32_t *first, int64_t m, int64_t n,
                            int64_t k)
{
    matvec_tune tune = default_dot_tune();
    nu_status st;
    if ((st = env_tune(d, &tune)) != NU_OK)
        return st;
    if (!tune.split)
        tune.split = auto_split(d, &tune, m, n, k);
    uint32_t sg = d->info.subgroup_size;
    uint64_t shared = dot_shared_bytes(m, k, tune.local, tune.rows, tune.split);
    if (shared > d->info.max_shared_memory)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": split=%u with %u threads and %u rows needs %llu bytes of shared "
                        "memory; %s has %u", tune.split, tune.local, tune.rows, (unsigned long long)shared,
                        d->info.name, d->info.max_shared_memory);
    if (tune.local > d->info.max_workgroup_size[0] || tune.local > d->info.max_workgroup_invocations ||
        tune.local % (sg * tune.split))
        return nu__fail(d, NU_ERROR_UNSUPPORTED,
                        FN ": %u threads a workgroup in groups of %u subgroups do not suit %s (subgroups of %u)",
                        tune.local, tune.split, d->info.name, sg);
    uint32_t constants[10] = {weight->dtype == NU_DTYPE_Q8_0 ? 4u : 5u, nu__op_dtype_code(x->dtype),
                             nu__op_dtype_code(dst->dtype), (uint32_t)m, tune.local, tune.rows, tune.unroll,
                             rows_aligned(x, first[2]) ? 4u : 0u, dot_capacity_blocks(k), tune.split};
    uint32_t w_row = n > 1 ? (uint32_t)(weight->strides[0] / 32 * (nu_dtype_block_bytes(weight->dtype) / 2)) : 0;
    struct {
        uint32_t n, k, first_w, w_row, w_col, first_x, x_row, x_col, first_dst;
    } push = {(uint32_t)n, (uint32_t)k, first[1], w_row, 0, first[2],
              m > 1 ? (uint32_t)x->strides[0] : 0, k > 1 ? (uint32_t)x->strides[1] : 0, first[0]};
    nu_kernel *kern;
    if ((st = nu__op_kernel(d, NU__K_matvec_dot, sizeof push, constants, 10, &kern)) != NU_OK)
        return st;
    /* Row groups are spread over all the grid's subgroups. */
    uint64_t row_groups = ((uint64_t)n + tune.rows - 1) / tune.rows;
    uint64_t slots = tune.local / sg / tune.split; /* row groups a workgroup takes at a time */
    uint64_t wanted = (row_groups + slots - 1) / slots;
    if (tune.groups && wanted > tune.groups)
        wanted = tune.groups;
    uint32_t groups[3] = {(uint32_t)(wanted > 65535 ? 65535 : wanted), 1, 1};
    return nu_commands_dispatch(c, kern, groups, bind, 3, &push, sizeof push);
}

static nu_status shape_of(nu_device *d, const char *name, const nu_tensor *t)
{
    if (t->rank != 2)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": %s has rank %u; it must be 2 ([%s])", name, t->rank,
                        !strcmp(name, "weight") ? "n, k" : (!strcmp(name, "x") ? "m, k" : "m, n"));
    return NU_OK;
}

/* nu_op_matvec, and nu_op_matvec_fused where desc is not NULL. */
static nu_status matvec(nu_commands *c, const nu_tensor *dst, const nu_tensor *weight, const nu_tensor *x,
                        const nu_matvec_desc *desc)
{
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, FN ": NULL command buffer");
    nu_status st;
    if ((st = nu__op_check(FN, "dst", dst, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_check(FN, "weight", weight, NU__OP_FLOAT | NU__OP_BLOCK | NU__OP_DTYPE(NU_DTYPE_Q4_0_SOA))) != NU_OK ||
        (st = nu__op_check(FN, "x", x, NU__OP_FLOAT)) != NU_OK)
        return st;
    nu_device *d = nu_buffer_device(dst->buffer);
    if ((st = shape_of(d, "weight", weight)) != NU_OK || (st = shape_of(d, "x", x)) != NU_OK ||
        (st = shape_of(d, "dst", dst)) != NU_OK)
        return st;
    int64_t m = x->shape[0], k = x->shape[1], n = weight->shape[0];
    if (m > NU_MATVEC_MAX_ROWS)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": x has %lld rows; at most %d (NU_MATVEC_MAX_ROWS)",
                        (long long)m, NU_MATVEC_MAX_ROWS);
    if (weight->shape[1] != k)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": x is %lldx%lld but weight is %lldx%lld (k differs)",
                        (long long)m, (long long)k, (long long)n, (long long)weight->shape[1]);
    if (dst->shape[0] != m || dst->shape[1] != n)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": dst is %lldx%lld; it must be %lldx%lld (x's rows, weight's)",
                        (long long)dst->shape[0], (long long)dst->shape[1], (long long)m, (long long)n);
    if ((st = nu__op_contiguous(FN, "dst", dst)) != NU_OK || (st = nu__op_no_alias(FN, dst, "weight", weight, false)) != NU_OK ||
        (st = nu__op_no_alias(FN, dst, "x", x, false)) != NU_OK)
        return st;
    if (!m || !n)
        return NU_OK; /* an empty dst */
    if (!k)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": k is 0 (x and weight are empty but dst is not)");
    /* Q4_0_SOA weights have their own kernel, fused forms included (src/ops/matvec_soa.c). The
     * fused forms of the other dtypes: not here yet (branch mvfuse). */
    if (weight->dtype == NU_DTYPE_Q4_0_SOA)
        return nu__matvec_soa(c, d, dst, weight, x, desc);
    if (desc && (desc->norm_weight || desc->glu_up || desc->residual))
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "nu_op_matvec_fused: norm_weight, glu_up and residual take Q4_0_SOA "
                        "weights only for now (weight is %s)", nu_dtype_name(weight->dtype));

    nu_binding bind[3];
    uint32_t first[3];
    if ((st = nu__op_bind(FN, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(FN, weight, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK ||
        (st = nu__op_bind(FN, x, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK)
        return st;
    bool block = nu_dtype_block_elements(weight->dtype) > 1;
    if (block && env_wants_dot() && dot_path_applies(d, m, k))
        return record_dot(c, d, dst, weight, x, bind, first, m, n, k);

    matvec_tune tune = default_tune(weight->dtype, m);
    if ((st = env_tune(d, &tune)) != NU_OK)
        return st;
    bool subgroup = tune.subgroup && (d->info.subgroup_operations & NU_SUBGROUP_ARITHMETIC) && d->info.subgroup_size >= 8;
    uint32_t flags = (subgroup ? 1u : 0u) | (!block && rows_aligned(weight, first[1]) ? 2u : 0u) |
                     (rows_aligned(x, first[2]) ? 4u : 0u);
    uint32_t wdt = weight->dtype == NU_DTYPE_Q8_0 ? 4u : weight->dtype == NU_DTYPE_Q4_0 ? 5u : nu__op_dtype_code(weight->dtype);
    /* The reduction's shared memory (the shader's RED). */
    uint64_t shared = 4ull * tune.rows * (uint64_t)m * (subgroup ? tune.local / 8 : tune.local);
    if (shared > d->info.max_shared_memory || tune.local > d->info.max_workgroup_size[0] ||
        tune.local > d->info.max_workgroup_invocations)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": %u threads and %u rows a workgroup need more than %s offers",
                        tune.local, tune.rows, d->info.name);
    uint32_t constants[8] = {wdt, nu__op_dtype_code(x->dtype), nu__op_dtype_code(dst->dtype), (uint32_t)m,
                             tune.local, tune.rows, tune.unroll, flags};
    /* Strides of dimensions of size 1 are never used (0 keeps them within 32 bits). */
    uint32_t w_row = n > 1 ? (uint32_t)weight->strides[0] : 0, w_col = k > 1 ? (uint32_t)weight->strides[1] : 0;
    if (block)
        w_row = w_row / 32 * (nu_dtype_block_bytes(weight->dtype) / 2);
    struct {
        uint32_t n, k, first_w, w_row, w_col, first_x, x_row, x_col, first_dst;
    } push = {(uint32_t)n, (uint32_t)k, first[1], w_row, w_col, first[2],
              m > 1 ? (uint32_t)x->strides[0] : 0, k > 1 ? (uint32_t)x->strides[1] : 0, first[0]};
    nu_kernel *kern;
    /* A device without subgroup arithmetic must not see a module that declares it. */
    if ((st = nu__op_kernel(d, subgroup ? NU__K_matvec_sg : NU__K_matvec, sizeof push, constants, 8, &kern)) != NU_OK)
        return st;
    uint32_t groups[3];
    nu__op_groups(((uint64_t)n + tune.rows - 1) / tune.rows, 1, groups);
    return nu_commands_dispatch(c, kern, groups, bind, 3, &push, sizeof push);
}

nu_status nu_op_matvec(nu_commands *c, const nu_tensor *dst, const nu_tensor *weight, const nu_tensor *x)
{
    return matvec(c, dst, weight, x, NULL);
}

nu_status nu_op_matvec_fused(nu_commands *c, const nu_tensor *dst, const nu_tensor *weight, const nu_tensor *x,
                             const nu_matvec_desc *desc)
{
    return matvec(c, dst, weight, x, desc);
}
