/* matmul.c: matrix products, dst = a * b^T (+ bias) (nu_op_matmul). The cooperative-matrix path
 * (matmul_tc.c) is tried first; everything it declines takes the tiled shared-memory kernel
 * (kernels/matmul/matmul.comp: its header describes the layout and the constants), with a tile
 * chosen per shape class from the table below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "exec/commands.h"
#include "kernels_table.h"
#include "ops/matmul_tc.h"
#include "ops/op.h"

#define FN "nu_op_matmul"

/* A tile: BM x BN of dst a workgroup, BK of K a slice, TM x TN a thread. */
typedef struct matmul_tile {
    const char *name;
    uint32_t bm, bn, bk, tm, tn;
} matmul_tile;

/* The variant table, by shape class (threads (BM / TM) * (BN / TN); the slices' shared memory is
 * 4 * BK * (BM + 1 + BN + 1) bytes: 9.1 KiB small_m, 12.3 skinny_n, 8.1 square, 16.1 large; Vulkan
 * guarantees 16 KiB, so large is taken only where the device has that much and 256 threads):
 *   small_m (m <= 16: a few tokens, e.g. speculative decoding or short prompts): 16 x 128 tiles,
 *     4 x 4 a thread, 128 threads: 64-row tiles would compute 75%+ padding. On lavapipe (16 x 4096
 *     by 4096, F16, NUVEC_MATMUL sweeps, two shared cores: noisy) 4 x 4 blocks ran 2.1 GFLOP/s
 *     against 1.0 for 1 x 4 (16 x 64) and 1.45 for 2 x 4 (16 x 128): the register block matters
 *     most there. On a GPU 128-column tiles give few workgroups for n = 4096 (32 a 16-row block):
 *     to be measured on the H200;
 *   skinny_n (n <= 64 with m > 16: a few outputs per token, e.g. a classifier head or the
 *     attention's per-head products): 64 x 32, 4 x 2, 256 threads;
 *   square (the rest): 64 x 64, 4 x 4, 256 threads;
 *   large (m, n >= 512: prefill and square products): 128 x 128, 8 x 8, 256 threads: each shared
 *     load feeds 8 FMAs (against 4 for square), half the shared-memory traffic per FMA.
 * BK is 32 for skinny_n, 16 for the others (the slices' shared memory).
 * Not yet measured on the H200: the lead's NUVEC_MATMUL sweeps there set the defaults. */
static const matmul_tile tiles[] = {
    {"small_m", 16, 128, 16, 4, 4},
    {"skinny_n", 64, 32, 32, 4, 2},
    {"square", 64, 64, 16, 4, 4},
    {"large", 128, 128, 16, 8, 8},
};

static uint64_t tile_shared(const matmul_tile *t) { return 4ull * t->bk * (t->bm + 1 + t->bn + 1); }

static matmul_tile choose_tile(nu_device *d, int64_t m, int64_t n)
{
    if (m <= 16)
        return tiles[0];
    if (n <= 64)
        return tiles[1];
    if (m >= 512 && n >= 512 && tile_shared(&tiles[3]) <= d->info.max_shared_memory &&
        d->info.max_workgroup_invocations >= 256)
        return tiles[3];
    return tiles[2];
}

/* desc->tune's tile fields, then NUVEC_MATMUL="variant=small_m|skinny_n|square|large bm=BM bn=BN
 * bk=BK tm=TM tn=TN vector=0|1" over them (docs/knobs.md): variant starts from a table entry, the
 * others change one value; vector=0 (tune.scalar_loads) keeps every load on the strided path. */
typedef struct tile_knobs {
    matmul_tile *tile;
    bool *vector;
} tile_knobs;

static bool apply_knob(void *ctx, const char *key, const char *value)
{
    tile_knobs *k = ctx;
    matmul_tile *t = k->tile;
    uint32_t v;
    if (!strcmp(key, "variant")) {
        for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++)
            if (!strcmp(value, tiles[i].name))
                return *t = tiles[i], true;
        return false;
    }
    if (!strcmp(key, "vector") && nu__op_knob_u32(value, 0, 1, false, &v))
        return *k->vector = v == 1, true;
    if (!strcmp(key, "bm"))
        return nu__op_knob_u32(value, 1, 256, false, &t->bm);
    if (!strcmp(key, "bn"))
        return nu__op_knob_u32(value, 1, 256, false, &t->bn);
    if (!strcmp(key, "bk"))
        return nu__op_knob_u32(value, 1, 256, false, &t->bk);
    if (!strcmp(key, "tm"))
        return nu__op_knob_u32(value, 1, 16, false, &t->tm);
    if (!strcmp(key, "tn"))
        return nu__op_knob_u32(value, 1, 16, false, &t->tn);
    return false;
}

/* tune's fields, checked against their ranges (a bad one fails, naming it). */
static nu_status check_tune(nu_device *d, const nu_matmul_tune *t)
{
    const nu__op_field fields[14] = {
        {"variant", (uint32_t)t->variant, (unsigned)t->variant < NU_MATMUL_VARIANT_COUNT, "a nu_matmul_variant"},
        {"bm", t->bm, t->bm <= 256, "1..256"},
        {"bn", t->bn, t->bn <= 256, "1..256"},
        {"bk", t->bk, t->bk <= 256, "1..256"},
        {"tm", t->tm, t->tm <= 16, "1..16"},
        {"tn", t->tn, t->tn <= 16, "1..16"},
        {"tc_wm", t->tc_wm, t->tc_wm <= 8, "1..8"},
        {"tc_wn", t->tc_wn, t->tc_wn <= 8, "1..8"},
        {"tc_fm", t->tc_fm, t->tc_fm <= 8, "1..8"},
        {"tc_fn", t->tc_fn, t->tc_fn <= 8, "1..8"},
        {"tc_bk", t->tc_bk, t->tc_bk == 32 || t->tc_bk == 64 || t->tc_bk == 128 || t->tc_bk == 256,
         "32, 64, 128 or 256"},
        {"tc_buffers", t->tc_buffers, t->tc_buffers <= 2, "1 or 2"},
        {"tc_probe", t->tc_probe, t->tc_probe <= 3, "0..3"},
        {"tc_splits", t->tc_splits, t->tc_splits <= 64, "1..64"},
    };
    return nu__op_tune_check(d, FN, fields, 14);
}

static nu_status tune_tile(nu_device *d, const nu_matmul_tune *tune, matmul_tile *t, bool *vector)
{
    if (tune->variant)
        *t = tiles[tune->variant - 1];
    uint32_t *const to[5] = {&t->bm, &t->bn, &t->bk, &t->tm, &t->tn};
    const uint32_t given[5] = {tune->bm, tune->bn, tune->bk, tune->tm, tune->tn};
    nu__op_tune_take(to, given, 5);
    *vector = !tune->scalar_loads;
    tile_knobs k = {t, vector};
    return nu__op_env_knobs(d, FN, "NUVEC_MATMUL", "variant=small_m|skinny_n|square|large, bm=, bn=, bk= (1..256), "
                            "tm=, tn= (1..16), vector=0|1", apply_knob, &k);
}

/* Whether the tile suits the device: BM % TM == BN % TN == 0, (BM / TM) * (BN / TN) threads
 * within its limits, the slices within its shared memory. */
static nu_status tile_fits(nu_device *d, const matmul_tile *t)
{
    uint32_t threads = t->bm % t->tm || t->bn % t->tn ? 0 : (t->bm / t->tm) * (t->bn / t->tn);
    if (!threads || threads > d->info.max_workgroup_invocations || threads > d->info.max_workgroup_size[0])
        return nu__fail(d, NU_ERROR_UNSUPPORTED,
                        FN ": a %ux%u tile with %ux%u a thread needs BM %% TM == BN %% TN == 0 and at most %u threads "
                        "on %s", t->bm, t->bn, t->tm, t->tn, d->info.max_workgroup_invocations, d->info.name);
    if (tile_shared(t) > d->info.max_shared_memory)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": a %ux%u tile with BK %u needs %llu bytes of shared memory; %s has %u",
                        t->bm, t->bn, t->bk, (unsigned long long)tile_shared(t), d->info.name, d->info.max_shared_memory);
    return NU_OK;
}

/* A tensor's batch, rows and columns (rank 2: batch 1) and their strides (0 for dimensions of
 * size 1: never used, and kept within 32 bits). */
typedef struct mat3 {
    int64_t batch, rows, cols;
    int64_t s_batch, s_row, s_col;
} mat3;

static mat3 mat3_of(const nu_tensor *t)
{
    uint32_t o = t->rank == 3 ? 1 : 0;
    mat3 r = {o ? t->shape[0] : 1, t->shape[o], t->shape[o + 1], 0, 0, 0};
    if (o && t->shape[0] > 1)
        r.s_batch = t->strides[0];
    if (r.rows > 1)
        r.s_row = t->strides[o];
    if (r.cols > 1)
        r.s_col = t->strides[o + 1];
    return r;
}

/* dst's layout: its columns contiguous, its rows and batches apart (rows at least n elements,
 * batches at least a batch's span): the matrix, or a column slice of a wider one (two products
 * writing the halves of one output). */
static nu_status dst_rows(nu_device *d, const mat3 *s)
{
    if ((s->cols <= 1 || s->s_col == 1) && (s->rows <= 1 || s->s_row >= s->cols) &&
        (s->batch <= 1 || s->s_batch >= (s->rows - 1) * s->s_row + s->cols))
        return NU_OK;
    return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                    FN ": dst's columns must be contiguous and its rows and batches apart (row stride >= n, batch "
                       "stride >= a batch's span): a row-major matrix or a column slice of one");
}

static nu_status rank_of(nu_device *d, const char *name, const nu_tensor *t, const char *dims)
{
    if (t->rank != 2 && t->rank != 3)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": %s has rank %u; it must be 2 ([%s]) or 3 ([batch, %s])", name,
                        t->rank, dims, dims);
    return NU_OK;
}

/* Whether a float operand's rows are contiguous and every row of every batch starts 16-byte
 * aligned in its binding: the kernel's 8-element vector loads. */
static bool vector_rows(const nu_tensor *t, const mat3 *s, uint32_t first)
{
    uint64_t es = nu_dtype_size(t->dtype);
    if (s->cols > 1 && s->s_col != 1)
        return false;
    return (uint64_t)first * es % 16 == 0 && (uint64_t)s->s_row * es % 16 == 0 && (uint64_t)s->s_batch * es % 16 == 0;
}

nu_status nu_op_matmul(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b,
                       const nu_tensor *bias)
{
    nu_matmul_desc desc = {.bias = bias};
    return nu_op_matmul_ex(c, dst, a, b, &desc);
}

nu_status nu_op_matmul_ex(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b,
                          const nu_matmul_desc *desc)
{
    static const nu_matmul_desc none;
    if (!desc)
        desc = &none;
    const nu_tensor *bias = desc->bias;
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, FN ": NULL command buffer");
    nu_status st;
    if ((st = nu__op_check(FN, "dst", dst, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_check(FN, "a", a, NU__OP_FLOAT)) != NU_OK ||
        (st = nu__op_check(FN, "b", b, NU__OP_FLOAT | NU__OP_BLOCK | NU__OP_REPACKED)) != NU_OK ||
        (bias && (st = nu__op_check(FN, "bias", bias, NU__OP_FLOAT)) != NU_OK))
        return st;
    nu_device *d = nu_buffer_device(dst->buffer);
    if ((st = rank_of(d, "a", a, "m, k")) != NU_OK || (st = rank_of(d, "b", b, "n, k")) != NU_OK ||
        (st = rank_of(d, "dst", dst, "m, n")) != NU_OK)
        return st;
    mat3 sa = mat3_of(a), sb = mat3_of(b), sd = mat3_of(dst);
    int64_t m = sa.rows, k = sa.cols, n = sb.rows, batch = sd.batch;
    if (sb.cols != k)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": a is %lldx%lld but b is %lldx%lld (k differs)", (long long)m,
                        (long long)k, (long long)n, (long long)sb.cols);
    bool glu = desc->glu_stacked;
    if (glu && (n % 2 || (unsigned)desc->glu >= NU_GLU_ACTIVATION_COUNT))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        n % 2 ? FN ": glu_stacked wants b's rows [gate; up], an even count; b has %lld"
                              : FN ": glu %lld is not a nu_glu_activation",
                        n % 2 ? (long long)n : (long long)desc->glu);
    int64_t dn = glu ? n / 2 : n;
    if (sd.rows != m || sd.cols != dn)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": dst is %lldx%lld; it must be %lldx%lld (a's rows, b's%s)",
                        (long long)sd.rows, (long long)sd.cols, (long long)m, (long long)dn, glu ? " / 2: glu_stacked" : "");
    int64_t want = sa.batch > sb.batch ? sa.batch : sb.batch;
    if ((sa.batch != 1 && sa.batch != batch) || (sb.batch != 1 && sb.batch != batch) || batch != want)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        FN ": batches a %lld, b %lld, dst %lld: a's and b's must be dst's or 1 (broadcast), and dst's "
                        "the larger", (long long)sa.batch, (long long)sb.batch, (long long)batch);
    if (bias && (bias->rank != 1 || bias->shape[0] != n))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": bias must be [n] = [%lld] (rank 1)", (long long)n);
    if ((st = dst_rows(d, &sd)) != NU_OK || (st = nu__op_no_alias(FN, dst, "a", a, false)) != NU_OK ||
        (st = nu__op_no_alias(FN, dst, "b", b, false)) != NU_OK ||
        (bias && (st = nu__op_no_alias(FN, dst, "bias", bias, false)) != NU_OK))
        return st;
    if (!m || !n || !batch)
        return NU_OK; /* an empty dst */
    if (!k)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": k is 0 (a and b are empty but dst is not)");
    if (batch > 1 && (uint64_t)m * (uint64_t)n * (uint64_t)batch >= (1ull << 32))
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": dst has 2^32 elements or more");

    matmul_tile tile = choose_tile(d, m, n);
    bool vector = true;
    if ((st = check_tune(d, &desc->tune)) != NU_OK || (st = tune_tile(d, &desc->tune, &tile, &vector)) != NU_OK ||
        (st = tile_fits(d, &tile)) != NU_OK)
        return st;

    /* The cooperative-matrix kernel first: it declines (NU_ERROR_UNSUPPORTED, no error set) what
     * it does not take. */
    uint32_t glu_code = glu ? (desc->glu == NU_GLU_SILU ? 1u : 2u) : 0u; /* matmul_splits.comp's GLU */
    st = nu__matmul_tensor_cores(c, dst, a, b, bias, &desc->tune, glu_code);
    if (st != NU_ERROR_UNSUPPORTED)
        return st;
    if (b->dtype == NU_DTYPE_Q4_0_SOA) /* only the matrix units' kernel reads it (Q6_K_SOA: both) */
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        FN ": b is Q4_0_SOA, which the products read only on the matrix units (F16 a, rank 2, "
                        "a device with cooperative matrices); elsewhere they take the Q4_0 tensor it was made from");

    /* A GLU: the product into the recording's scratch as F32 [batch, m, n], then the sum pass
     * (one split) gates it into dst. */
    const nu_tensor *out = dst;
    nu_tensor y;
    nu_buffer *part = NULL;
    if (glu) {
        uint64_t bytes = (uint64_t)batch * (uint64_t)m * (uint64_t)n * 4;
        if (bytes > d->info.max_storage_buffer_range)
            return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": glu_stacked's F32 product of %llu bytes is past a binding's reach",
                            (unsigned long long)bytes);
        if ((st = nu__commands_scratch(c, (size_t)bytes, &part)) != NU_OK)
            return st;
        int64_t shape[3] = {batch, m, n};
        y = nu_tensor_make(part, 0, NU_DTYPE_F32, 3, shape);
        out = &y;
        sd = mat3_of(out);
    }
    nu_binding bind[4];
    uint32_t first[4] = {0, 0, 0, 0};
    if ((st = nu__op_bind(FN, out, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(FN, a, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK ||
        (st = nu__op_bind(FN, b, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK)
        return st;
    if (bias) {
        if ((st = nu__op_bind(FN, bias, NU_ACCESS_READ, &bind[3], &first[3])) != NU_OK)
            return st;
    } else {
        bind[3] = bind[1]; /* never read: a's range again (read after read costs nothing) */
    }
    bool block = nu_dtype_block_elements(b->dtype) > 1;
    uint32_t bdt = nu__op_dtype_code(b->dtype);
    uint32_t flags = 0;
    if (vector && tile.bk % 8 == 0) {
        flags |= vector_rows(a, &sa, first[1]) ? 1u : 0u;
        flags |= block || vector_rows(b, &sb, first[2]) ? 2u : 0u;
    }
    uint32_t threads = (tile.bm / tile.tm) * (tile.bn / tile.tn);
    uint32_t constants[11] = {nu__op_dtype_code(a->dtype), bdt, nu__op_dtype_code(out->dtype),
                              bias ? nu__op_dtype_code(bias->dtype) : NU__NO_CODE, threads, tile.bm, tile.bn, tile.bk, tile.tm,
                              tile.tn, flags};
    /* Block b's strides in halves: rows of whole blocks, batches of whole rows. */
    uint32_t w_row = block ? nu__op_block_halves(b, sb.s_row) : (uint32_t)sb.s_row;
    uint32_t w_batch = block ? nu__op_block_halves(b, sb.s_batch) : (uint32_t)sb.s_batch;
    struct {
        uint32_t m, n, k, batch;
        uint32_t first_a, a_batch, a_row, a_col;
        uint32_t first_w, w_batch, w_row, w_col;
        uint32_t first_dst, first_bias, bias_stride;
        uint32_t dst_batch, dst_row;
    } push = {(uint32_t)m, (uint32_t)n, (uint32_t)k, (uint32_t)batch,
              first[1], (uint32_t)sa.s_batch, (uint32_t)sa.s_row, (uint32_t)sa.s_col,
              first[2], w_batch, w_row, (uint32_t)sb.s_col,
              first[0], first[3], bias && n > 1 ? (uint32_t)bias->strides[0] : 0,
              (uint32_t)sd.s_batch, (uint32_t)sd.s_row};
    nu_kernel *kern;
    if ((st = nu__op_kernel(d, NU__K_matmul, sizeof push, constants, 11, &kern)) != NU_OK)
        return st;
    uint64_t gx = ((uint64_t)n + tile.bn - 1) / tile.bn, gy = ((uint64_t)m + tile.bm - 1) / tile.bm;
    uint32_t groups[3] = {(uint32_t)(gx > 65535 ? 65535 : gx), (uint32_t)(gy > 65535 ? 65535 : gy),
                          (uint32_t)(batch > 65535 ? 65535 : batch)};
    if ((st = nu_commands_dispatch(c, kern, groups, bind, 4, &push, sizeof push)) != NU_OK || !glu)
        return st;
    return nu__matmul_sum(c, dst, part, 1, (uint64_t)batch * (uint64_t)m * (uint64_t)n, NULL, glu_code);
}
