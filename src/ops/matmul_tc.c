/* matmul_tc.c: nu_op_matmul on the matrix units (kernels/matmul/matmul_coopmat.glsl describes the
 * kernels): F16 activations against F16, Q8_0, Q4_0, Q4_0_SOA, Q4_K, Q6_K or Q6_K_SOA weights
 * (matmul_coopmat), on devices whose VK_KHR_cooperative_matrix offers 16x16x16 F16 x F16 + F32
 * products at subgroup scope; BF16 against BF16 (matmul_coopmat_bf16) where it offers BF16 x BF16 +
 * F32 and VK_KHR_shader_bfloat16 is on; split over k where the grid is small (matmul_splits.comp
 * adds the partials). */
#include "ops/matmul_tc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/commands.h"
#include "kernels_table.h"
#include "ops/op.h"

#define FN "nu_op_matmul"

/* The tile: WM x WN subgroups, each FM x FN fragments of 16 x 16 (kernel constants 5 to 8). */
typedef struct tc_tile {
    uint32_t wm, wn, fm, fn, bk, buffers, probe;
    uint32_t order; /* the kernel's ORDER: 0 (default) or 1, NUVEC_MATMUL_TC=order= only */
    bool off; /* NUVEC_MATMUL_TC=off */
    uint32_t splits; /* split-K: 0 by the grid (choose_splits), else as given */
    uint32_t vec; /* the kernel's VEC: 0 by dtype (below), else 1 + NUVEC_MATMUL_TC=vec='s value */
} tc_tile;

/* The tile by shape: 128 x 128 (4 subgroups of 64 x 64), k 64 a step, one buffer: the best of 12
 * settings on the H200 (bench/RESULTS.md, 2026-12-01: 248 TFLOP/s at 4096^3 F16, against 207-232
 * for 8 subgroups of 64 x 32 or 32 x 64, 148-151 for k 32 a step with 128 x 128 or 128 x 64 tiles);
 * fewer rows of a: 16 x 64 or 64 x 64 (4 subgroups); k split in two where that fills the waves
 * much better, else a grid of fewer than two tiles a compute unit: 8 subgroups of 64 x 32
 * (choose_tile). tune's tc_ fields override these, and
 * NUVEC_MATMUL_TC="wm=A wn=B fm=C fn=D bk=32|64|128|256 buffers=1|2 order=0|1 vec=0|1 probe=N off|on" overrides both for
 * sweeps (docs/knobs.md; a bad knob fails the op where this path applies); off keeps every product
 * on the tiled path. */
static bool apply_knob(void *ctx, const char *key, const char *value)
{
    tc_tile *t = ctx;
    uint32_t v;
    if ((!strcmp(key, "on") || !strcmp(key, "off")) && !*value)
        return t->off = key[1] == 'f', true;
    if (!strcmp(key, "bk") && nu__op_knob_u32(value, 32, 256, false, &v) && (v & (v - 1)) == 0)
        return t->bk = v, true;
    if (!strcmp(key, "buffers"))
        return nu__op_knob_u32(value, 1, 2, false, &t->buffers);
    if (!strcmp(key, "order"))
        return nu__op_knob_u32(value, 0, 1, false, &t->order);
    if (!strcmp(key, "probe"))
        return nu__op_knob_u32(value, 0, 3, false, &t->probe);
    if (!strcmp(key, "vec") && nu__op_knob_u32(value, 0, 1, false, &v))
        return t->vec = 1 + v, true;
    if (!strcmp(key, "wm"))
        return nu__op_knob_u32(value, 1, 8, false, &t->wm);
    if (!strcmp(key, "wn"))
        return nu__op_knob_u32(value, 1, 8, false, &t->wn);
    if (!strcmp(key, "fm"))
        return nu__op_knob_u32(value, 1, 8, false, &t->fm);
    if (!strcmp(key, "fn"))
        return nu__op_knob_u32(value, 1, 8, false, &t->fn);
    if (!strcmp(key, "splits"))
        return nu__op_knob_u32(value, 1, 64, false, &t->splits);
    return false;
}

/* The most bytes of F32 partials a many-row product splits k for (two splits): they live in the
 * recording's scratch, which a prefill pass holds beside its activations (a 7B model's 512-row
 * o and down products: 16 MiB; its 11008-column ones would take 43 MiB, more than a 7B Q4_0
 * model's peak at 4,096 positions has to spare within 1.05x of llama.cpp's: bench/RESULTS.md). */
#define PREFILL_SPLIT_BYTES (16ull << 20)

/* How full the waves are: `tiles` workgroups, `places` of them running at once. */
static double wave_use(uint64_t tiles, uint64_t places)
{
    uint64_t waves = (tiles + places - 1) / places;
    return waves ? (double)tiles / (double)(waves * places) : 1.0;
}

static nu_status choose_tile(nu_device *d, int64_t m, int64_t n, int64_t k, uint64_t batches,
                             const nu_matmul_tune *tune, tc_tile *t)
{
    /* 128 x 128 tiles fewer than two a compute unit leave one workgroup of 4 subgroups an SM, with
     * nothing to run while it waits on its loads: 8 subgroups a tile then (H200, 512-row prefill
     * products, 2026-12-01: N = 4096 143 -> 197 TFLOP/s; N = 11008 188 against 186, N = 32000
     * 240 against 205: the 4-subgroup tile stays where the grid is large). */
    uint64_t tiles = (uint64_t)((m + 127) / 128) * (uint64_t)((n + 127) / 128) * batches;
    uint32_t units = d->info.compute_units ? d->info.compute_units : 1;
    if (m <= 16) /* 16 x 64 tiles, 4 subgroups of one fragment: a 64-row tile computed 48 rows of
                  * nothing there (H200, 2026-12-02, nuvec bench ops "rows_mm" at 16 rows: 4096 x 4096
                  * Q4_0_SOA 36.2 -> 22.9 us, Q4_K 37.7 -> 27.8; 4096 x 11008 Q4_K 94.7 -> 65.7). k 64 a
                  * step: 128 and 256 were no faster (Q4_0_SOA 15.5 and 18.6 us against 16.0). */
        *t = (tc_tile){1, 4, 1, 1, 64, 1, 0, 0, false, 0, 0};
    else if (m <= 64) /* 64 x 64 tiles, 4 subgroups (H200, 2026-12-02, "rows_mm" at 64 rows, us, Q4_0_SOA
                       * 4096 x 4096 33.4 -> 25.0, 4096 x 11008 64.5 -> 60.8, 11008 x 4096 73.4 -> 60.4;
                       * k 128 a step 27.4, 65.1, 67.0; against the 64 x 32 tiles of 2 subgroups, which
                       * had beaten 64 x 128 before split-K) */
        *t = (tc_tile){1, 4, 4, 1, 64, 1, 0, 0, false, 0, 0};
    else if (k >= 1024 && (uint64_t)m * (uint64_t)n * batches * 8 <= PREFILL_SPLIT_BYTES &&
             wave_use(2 * tiles, 2ull * units) > wave_use(tiles, 2ull * units) + 0.15)
        /* The last wave of 128 x 128 tiles (two a compute unit: 255 registers a thread) mostly empty:
         * k split in two fills it (H100, 2026-12-06, `nuvec bench ops --filter "matmul F16"`, us:
         * 512 x 11008 > 4096, 128 tiles, 211.7 with the 8-subgroup tile -> 172.1; 512 x 4096 > 4096
         * 85.2 -> 82.3; 344 and 384 tiles (n 11008, 12288) 247.3 -> 232.2, 249.3 -> 241.0, but their
         * partials pass PREFILL_SPLIT_BYTES; where the split gains less use, as for 688 or 1000
         * tiles, it lost: 379.0 -> 456.1, 514.3 -> 636.6). */
        *t = (tc_tile){2, 2, 4, 4, 64, 1, 0, 0, false, 2, 0};
    else if (tiles < 2ull * units)
        *t = (tc_tile){2, 4, 4, 2, 64, 1, 0, 0, false, 0, 0};
    else
        *t = (tc_tile){2, 2, 4, 4, 64, 1, 0, 0, false, 0, 0};
    uint32_t *const to[8] = {&t->wm, &t->wn, &t->fm, &t->fn, &t->bk, &t->buffers, &t->probe, &t->splits};
    const uint32_t given[8] = {tune->tc_wm, tune->tc_wn, tune->tc_fm, tune->tc_fn, tune->tc_bk, tune->tc_buffers,
                               tune->tc_probe, tune->tc_splits};
    nu__op_tune_take(to, given, 8);
    return nu__op_env_knobs(d, FN, "NUVEC_MATMUL_TC", "off, on, wm=, wn=, fm=, fn= (1..8), bk=32|64|128|256, buffers=1|2, "
                            "order=0|1, vec=0|1, probe=0..3, splits=1..64", apply_knob, t);
}

/* Split-K by the grid: a product of few rows (m <= 64, the few-row tiles of four subgroups: a
 * batched decode step) over a few thousand columns fills the H200's 132 compute units with 2 to 8
 * subgroups each, each looping over all of k with two tiles' loads in flight: far from enough
 * bytes in flight for the memory. Splitting k (whole 256-element runs, so that every block format's
 * blocks stay whole) multiplies the workgroups up to 16 subgroups a compute unit; the partials
 * cost a write and a read of splits x m x n floats, small beside the weights at these m. */
static uint32_t choose_splits(const nu_device *d, const tc_tile *t, int64_t m, uint64_t tiles, int64_t k)
{
    if (t->splits)
        return t->splits;
    if (m > 64 || k < 512)
        return 1;
    uint64_t units = d->info.compute_units ? d->info.compute_units : 1;
    uint64_t have = tiles * t->wm * t->wn, want = 16 * units;
    if (have >= want)
        return 1;
    uint64_t s = (want + have - 1) / have, runs = (uint64_t)k / 256;
    return (uint32_t)(s < runs ? (s < 64 ? s : 64) : runs);
}

/* A's or an F16 weight's rows: last dimension contiguous, rows and batches 16-byte aligned. */
static bool rows16(const nu_tensor *t, uint32_t first)
{
    uint32_t r = t->rank;
    if (t->shape[r - 1] > 1 && t->strides[r - 1] != 1)
        return false;
    if (first % 8)
        return false;
    for (uint32_t i = 0; i + 1 < r; i++)
        if (t->shape[i] > 1 && t->strides[i] % 8)
            return false;
    return true;
}

typedef struct tc_push {
    uint32_t m, n, k, first_a, a_row, a_batch, first_w, w_row, w_batch, first_dst, dst_batch, first_bias;
    uint32_t tile_x, tile_y; /* the first tile of the dispatch */
    uint32_t k_per, batches; /* split-K: k a split (k: none); a's and w's batches (z = split * batches + batch) */
    uint32_t dst_row;        /* dst's row stride (elements) */
} tc_push;

static nu_status dispatch_tiles(nu_commands *c, nu_kernel *kern, const nu_binding bind[4], tc_push *push, uint32_t x,
                                uint32_t y, uint32_t nx, uint32_t ny, uint32_t batches)
{
    push->tile_x = x;
    push->tile_y = y;
    uint32_t groups[3] = {nx, ny, batches};
    return nu_commands_dispatch(c, kern, groups, bind, 4, push, sizeof *push);
}

/* The product's dispatches: whole tiles go straight to dst where coopMatStore may write it: F32
 * or F16, no bias, rows and the first element 16-byte aligned (Vulkan's rule for
 * cooperative-matrix stores); the edges, and everything else, through shared memory (the kernel's
 * EPILOGUE). z: the workgroups' third dimension (batches, times the splits). */
static nu_status tc_kernel(nu_device *d, bool bf16, const tc_push *push, const uint32_t constants[16], nu_kernel **out)
{
    return nu__op_kernel(d, bf16 ? NU__K_matmul_coopmat_bf16 : NU__K_matmul_coopmat, sizeof *push, constants, 16, out);
}

static nu_status dispatch_product(nu_commands *c, nu_device *d, bool bf16, uint32_t constants[16],
                                  const nu_binding bind[4], tc_push *push, nu_dtype ddt, const nu_tensor *bias,
                                  uint64_t gx, uint64_t gy, uint32_t bm, uint32_t bn, uint32_t z)
{
    uint32_t n = push->n, m = push->m, per16 = ddt == NU_DTYPE_F32 ? 4 : 8;
    /* The BF16 kernel stores F32 straight only (it has no F16 type: matmul_coopmat.glsl). */
    bool direct = (ddt == NU_DTYPE_F32 || (ddt == NU_DTYPE_F16 && !bf16)) && !bias && n % per16 == 0 &&
                  push->first_dst % per16 == 0 && push->dst_row % per16 == 0 && push->dst_batch % per16 == 0;
    uint32_t fx = direct ? n / bn : 0, fy = direct ? m / bm : 0;
    nu_kernel *kern;
    nu_status st;
    if (fx && fy) {
        constants[12] = 0;
        if ((st = tc_kernel(d, bf16, push, constants, &kern)) != NU_OK ||
            (st = dispatch_tiles(c, kern, bind, push, 0, 0, fx, fy, z)) != NU_OK)
            return st;
        constants[12] = 1;
    } else
        fx = fy = 0;
    if (fx == gx && fy == gy)
        return NU_OK;
    if ((st = tc_kernel(d, bf16, push, constants, &kern)) != NU_OK)
        return st;
    if (!fx) /* nothing went straight: every tile */
        return dispatch_tiles(c, kern, bind, push, 0, 0, (uint32_t)gx, (uint32_t)gy, z);
    if (fx < gx && (st = dispatch_tiles(c, kern, bind, push, fx, 0, (uint32_t)gx - fx, (uint32_t)gy, z)) != NU_OK)
        return st; /* the right column of tiles */
    if (fy < gy) /* the bottom row, but its corner */
        return dispatch_tiles(c, kern, bind, push, 0, fy, fx, (uint32_t)gy - fy, z);
    return NU_OK;
}

nu_status nu__matmul_sum(nu_commands *c, const nu_tensor *dst, nu_buffer *part, uint32_t splits, uint64_t part_split,
                         const nu_tensor *bias, uint32_t glu)
{
    nu_device *d = nu_buffer_device(dst->buffer);
    uint32_t rd = dst->rank;
    uint64_t m = (uint64_t)dst->shape[rd - 2], n = (uint64_t)dst->shape[rd - 1];
    uint64_t count = (rd == 3 ? (uint64_t)dst->shape[0] : 1) * m * n;
    nu_binding bind[3];
    uint32_t first[3] = {0, 0, 0};
    nu_status st;
    if ((st = nu__op_bind(FN, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (bias && (st = nu__op_bind(FN, bias, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK))
        return st;
    bind[1] = (nu_binding){.buffer = part, .access = NU_ACCESS_READ, .offset = 0, .size = (size_t)(part_split * splits * 4)};
    if (!bias)
        bind[2] = bind[1]; /* never read */
    /* Four elements a thread where every row, start and stride keeps them one 16-byte (F32) or
     * 8-byte vector. */
    uint32_t dst_row = m > 1 ? (uint32_t)dst->strides[rd - 2] : (uint32_t)n;
    uint32_t dst_batch = rd == 3 && dst->shape[0] > 1 ? (uint32_t)dst->strides[0] : 0;
    bool vec = n % 4 == 0 && first[0] % 4 == 0 && dst_row % 4 == 0 && dst_batch % 4 == 0 && part_split % 4 == 0;
    uint64_t wg = (count / (vec ? 4 : 1) + 255) / 256;
    if (count > UINT32_MAX || part_split > UINT32_MAX || wg > 65535ull * 65535ull)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": a product of %llu elements is past the sum pass's reach",
                        (unsigned long long)count);
    uint32_t sconst[6] = {nu__op_dtype_code(dst->dtype), bias ? 1u : 0u, bias ? nu__op_dtype_code(bias->dtype) : 0u, 256,
                          glu, vec ? 1u : 0u};
    struct {
        uint32_t count, n, splits, first_dst, first_bias, m, dst_row, dst_batch, part_split;
    } push = {(uint32_t)count, (uint32_t)n, splits, first[0], first[2], (uint32_t)m, dst_row, dst_batch,
              (uint32_t)part_split};
    uint32_t groups[3] = {(uint32_t)(wg < 65535 ? wg : 65535), (uint32_t)((wg + 65534) / 65535), 1};
    nu_kernel *sum;
    if ((st = nu__op_kernel(d, NU__K_matmul_splits, sizeof push, sconst, 6, &sum)) != NU_OK)
        return st;
    return nu_commands_dispatch(c, sum, groups, bind, 3, &push, sizeof push);
}

nu_status nu__matmul_tensor_cores(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b,
                                  const nu_tensor *bias, const nu_matmul_tune *tune, uint32_t glu)
{
    nu_device *d = nu_buffer_device(dst->buffer);
    const nu_device_info *in = &d->info;
    /* tune.no_tensor_cores (or NUVEC_MATMUL_TC=off, below): the tiled path everywhere (for tests and
     * sweeps of it). On the H200 this path's F16 products ran 7% faster at 4096^3 and 10-38% faster
     * at the 512-token prefill shapes than the tiled kernel's BF16 ones in the same run
     * (bench/RESULTS.md), far below what the matrix units can do. */
    bool bf16 = a->dtype == NU_DTYPE_BF16 && b->dtype == NU_DTYPE_BF16;
    if (tune->no_tensor_cores || !nu__op_tensor_cores(d, bf16 ? NU_DTYPE_BF16 : NU_DTYPE_F16, 16))
        return NU_ERROR_UNSUPPORTED;
    /* Block weights: Q8_0, Q4_0, Q4_0_SOA and Q6_K_SOA (the repacked layouts: batched decode's
     * products read the repacked matrices as they are), Q4_K and Q6_K (Q4_K_M's formats) only, which
     * the kernel decodes itself into F16 tiles (its own decoding, not kernels/quant.glsl's); the
     * other block dtypes take the tiled kernel (the matrix units cannot be tested on lavapipe: no
     * new format goes there untested; test_ops_matmul checks these where the device has them). */
    bool block = b->dtype == NU_DTYPE_Q8_0 || b->dtype == NU_DTYPE_Q4_0 || b->dtype == NU_DTYPE_Q4_0_SOA ||
                 b->dtype == NU_DTYPE_Q4_K || b->dtype == NU_DTYPE_Q6_K || b->dtype == NU_DTYPE_Q6_K_SOA;
    if (!bf16 && (a->dtype != NU_DTYPE_F16 || (b->dtype != NU_DTYPE_F16 && !block)))
        return NU_ERROR_UNSUPPORTED;
    uint32_t ra = a->rank, rb = b->rank, rd = dst->rank;
    int64_t m = a->shape[ra - 2], k = a->shape[ra - 1], n = b->shape[rb - 2];
    int64_t batches = rd == 3 ? dst->shape[0] : 1; /* a batch of 1 in a or b broadcasts */
    if (k % 8 || m > UINT32_MAX || n > UINT32_MAX || batches > 65535)
        return NU_ERROR_UNSUPPORTED;
    tc_tile t;
    nu_status st = choose_tile(d, m, n, k, batches, tune, &t);
    if (st != NU_OK)
        return st;
    if (t.off)
        return NU_ERROR_UNSUPPORTED;
    uint32_t local = t.wm * t.wn * in->subgroup_size;
    /* Shared memory: the buffers of the a and w tiles, rows of bk + 8 halves. */
    uint64_t shared = (uint64_t)t.buffers * (t.bk + 8) * 2 * (16ull * t.fm * t.wm + 16ull * t.fn * t.wn);
    shared += 1024ull * t.wm * t.wn; /* the output's scratch: 1 KiB a subgroup */
    if (t.fm * t.fn > 16) /* the kernel's MAX_FRAGS */
        return NU_ERROR_UNSUPPORTED;
    if (local > in->max_workgroup_size[0] || local > in->max_workgroup_invocations || shared > in->max_shared_memory)
        return NU_ERROR_UNSUPPORTED;

    nu_binding bind[4];
    uint32_t first[4];
    if ((st = nu__op_bind(FN, dst, NU_ACCESS_WRITE, &bind[0], &first[0])) != NU_OK ||
        (st = nu__op_bind(FN, a, NU_ACCESS_READ, &bind[1], &first[1])) != NU_OK ||
        (st = nu__op_bind(FN, b, NU_ACCESS_READ, &bind[2], &first[2])) != NU_OK ||
        (st = nu__op_bind(FN, bias ? bias : a, NU_ACCESS_READ, &bind[3], &first[3])) != NU_OK)
        return st;
    if (!rows16(a, first[1]) || (!block && !rows16(b, first[2])))
        return NU_ERROR_UNSUPPORTED;
    if (bias && bias->shape[bias->rank - 1] > 1 && bias->strides[bias->rank - 1] != 1)
        return NU_ERROR_UNSUPPORTED;

    uint32_t wdt = nu__op_dtype_code(b->dtype);
    uint32_t constants[16] = {wdt, nu__op_dtype_code(dst->dtype), bias ? 1u : 0u,
                              bias ? nu__op_dtype_code(bias->dtype) : 0u, local, t.wm, t.wn, t.fm, t.fn, t.bk,
                              t.buffers, t.probe, 1u, 0u, t.order, 0u};
    /* Strides: a's and w's rows and batches (w's in halves for block dtypes; 0 broadcasts one
     * weight over the batches). */
    uint64_t w_row = n > 1 ? (uint64_t)b->strides[rb - 2] : 0;
    uint64_t w_batch = rb == 3 && b->shape[0] > 1 ? (uint64_t)b->strides[0] : 0;
    if (block) {
        w_row = nu__op_block_halves(b, (int64_t)w_row);
        w_batch = nu__op_block_halves(b, (int64_t)w_batch);
    }
    /* Block runs 16-byte aligned (the kernel's VEC): Q4_0_SOA with every block's 16 quant bytes so (a
     * thread reads a whole block in one load; the quants start k / 32 halves into a row); Q4_K whose
     * super-blocks (72 halves) all start on a multiple of 8 halves: a unit's quant bytes and header
     * a load each (H100, 512 x 4096 > 4096: 113.1 -> 102.3 us). Not Q6_K_SOA by default, which the
     * kernel can read so too (NUVEC_MATMUL_TC=vec=1): its 512 x 4096 > 11008 product went from 462
     * to 532 us. */
    bool vec_fits = (b->dtype == NU_DTYPE_Q4_0_SOA && first[2] % 8 == 0 && w_row % 8 == 0 && w_batch % 8 == 0 &&
                     k % 256 == 0) ||
                    (b->dtype == NU_DTYPE_Q4_K && first[2] % 8 == 0 && w_row % 8 == 0 && w_batch % 8 == 0) ||
                    (b->dtype == NU_DTYPE_Q6_K_SOA && first[2] % 8 == 0);
    if (vec_fits && (t.vec ? t.vec == 2 : b->dtype != NU_DTYPE_Q6_K_SOA))
        constants[13] = 1;
    /* Q4_K whose super-blocks (72 halves) all start on an even half, and Q6_K_SOA (groups of 840
     * halves from the first, whatever the row: quant.glsl's nu_q6s_halves) that starts on one: read
     * as words, no shifts (the kernel's EVEN). */
    if ((b->dtype == NU_DTYPE_Q4_K && first[2] % 2 == 0 && w_row % 2 == 0 && w_batch % 2 == 0) ||
        (b->dtype == NU_DTYPE_Q6_K_SOA && first[2] % 2 == 0))
        constants[15] = 1;
    tc_push push = {(uint32_t)m, (uint32_t)n, (uint32_t)k, first[1], m > 1 ? (uint32_t)a->strides[ra - 2] : 0,
                    ra == 3 && a->shape[0] > 1 ? (uint32_t)a->strides[0] : 0, first[2], (uint32_t)w_row,
                    (uint32_t)w_batch, first[0], rd == 3 && dst->shape[0] > 1 ? (uint32_t)dst->strides[0] : 0, first[3],
                    0, 0, (uint32_t)k, (uint32_t)batches, m > 1 ? (uint32_t)dst->strides[rd - 2] : (uint32_t)n};
    uint32_t bm = 16 * t.fm * t.wm, bn = 16 * t.fn * t.wn;
    uint64_t gx = ((uint64_t)n + bn - 1) / bn, gy = ((uint64_t)m + bm - 1) / bm;
    if (gx > in->max_workgroup_count[0] || gy > in->max_workgroup_count[1])
        return NU_ERROR_UNSUPPORTED;

    /* Split-K (choose_splits): the product's partials go to the recording's scratch as F32 batches
     * (split s of batch b is batch s * batches + b there), then matmul_splits.comp adds them into
     * dst with the bias. A GLU takes that way with one split too (its pass applies it). */
    uint32_t splits = choose_splits(d, &t, m, gx * gy * (uint64_t)batches, k);
    uint64_t per = (uint64_t)k, count = (uint64_t)batches * (uint64_t)m * (uint64_t)n;
    if (splits > 1) {
        per = ((uint64_t)k / splits + 255) / 256 * 256;
        splits = (uint32_t)(((uint64_t)k + per - 1) / per);
    }
    uint64_t part_bytes = count * splits * 4;
    if (splits > 1 && (part_bytes > in->max_storage_buffer_range || (uint64_t)batches * splits > 65535 ||
                       (count + 255) / 256 > 65535ull * 65535ull || m * n > UINT32_MAX))
        splits = 1, per = (uint64_t)k, part_bytes = count * 4;
    bool summed = splits > 1 || glu;
    if (glu && (part_bytes > in->max_storage_buffer_range || count > UINT32_MAX))
        return NU_ERROR_UNSUPPORTED; /* the tiled path's own scratch and its refusal */
    nu_buffer *part = NULL;
    if (summed) {
        if ((st = nu__commands_scratch(c, (size_t)part_bytes, &part)) != NU_OK)
            return st;
        bind[0] = (nu_binding){.buffer = part, .access = NU_ACCESS_WRITE, .offset = 0, .size = (size_t)part_bytes};
        push.first_dst = 0;
        push.dst_batch = (uint32_t)(m * n);
        push.dst_row = (uint32_t)n;
        constants[1] = nu__op_dtype_code(NU_DTYPE_F32);
        constants[2] = constants[3] = 0; /* the bias: in the sum */
    }
    push.k_per = (uint32_t)per;
    st = dispatch_product(c, d, bf16, constants, bind, &push, summed ? NU_DTYPE_F32 : dst->dtype, summed ? NULL : bias, gx, gy,
                          bm, bn, (uint32_t)batches * splits);
    if (st == NU_OK && summed)
        st = nu__matmul_sum(c, dst, part, splits, count, bias, glu);
    return st;
}
