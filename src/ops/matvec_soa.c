/* matvec_soa.c: products against Q4_0_SOA and Q6_K_SOA weights and Q4_K's, Q5_K's and Q6_K's (see matvec_soa.h): the dot path
 * (kernels/matvec/matvec_soa.comp: x rounded to 8 bits a block, integer dot products) where the
 * device has integer dot products, subgroup arithmetic and shuffles and x's rows fit in shared
 * memory; the float path (matvec_soa_float.comp) elsewhere. matvec_soa.glsl describes both. */
#include "ops/matvec_soa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/commands.h"
#include "kernels_table.h"

#define FN "nu_op_matvec"

typedef struct soa_tune {
    uint32_t local, rows, unroll;
    uint32_t groups; /* most workgroups (each reads x once; the grid loops over the rows); 0: as many as the rows need */
    uint32_t split;  /* subgroups a row group; 0: chosen by auto_split */
    int dot;         /* -1: the dot path where it applies; 0: the float path */
    uint32_t prefetch; /* 1: the first weight loads before x is read (matvec_soa.glsl's PREFETCH) */
    uint32_t chain;    /* 1: each row group's first weight loads before the one before is reduced (CHAIN) */
    uint32_t pairs;    /* Q4_K, Q5_K: 1 a lane's unit is two runs sharing their scales (PAIRS) */
    uint32_t x_block;  /* shared-memory bytes of x a block and row on the dot path: 40 (Q4_0_SOA),
                        * 48 (the K formats: dx of both sub-blocks and the sums of their halves, by run) */
    uint32_t xpiece;   /* phase 1's elements of x a thread: 4 or 8 (matvec_soa.glsl's XP) */
    uint32_t probe;    /* diagnostics (NUVEC_MATVEC_SOA only; wrong results): bit 0 skips reading x,
                        * bit 1 reads every row's weights from row 0 (from the caches, not memory),
                        * bit 2 reads Q6_K's runs as aligned 16-byte loads (the wrong bytes) */
    bool unroll_given; /* unroll set by desc->tune or NUVEC_MATVEC_SOA */
} soa_tune;

/* Defaults: 1024 threads, at most 132 workgroups (one a streaming multiprocessor of the H200),
 * a row per subgroup, 2 runs (16 bytes each) in flight a lane (Q4_K and Q5_K: one pair, below),
 * x read before the first weight loads: the best of 15 settings on the H200 (bench/RESULTS.md,
 * 2026-12-01, `nuvec bench ops --filter Q4_0_SOA` with NUVEC_MATVEC_SOA): 6.38 / 10.81 / 11.95 /
 * 22.85 us at 4096x4096, 11008x4096, 4096x11008, 32000x4096 and 17.68 for the fused gate-up,
 * against 7.03 / 11.86 / 12.99 / 23.55 / 19.30 for the first guess (512 threads, 264 workgroups,
 * 4 runs, prefetch). */
static bool k_format(nu_dtype w)
{
    return w == NU_DTYPE_Q4_K || w == NU_DTYPE_Q5_K || w == NU_DTYPE_Q6_K || w == NU_DTYPE_Q6_K_SOA;
}
/* Phase 1 (x read and rounded to 8 bits by every workgroup) takes 8 elements a thread (xpiece 8):
 * H100, `nuvec bench ops --filter qwen` (bench/RESULTS.md, 2026-12-06): Q4_K 3584x18944 21.54 ->
 * 20.00 us, Q6_K 30.53 -> 29.07, Q4_K 4096x14336 17.86 -> 16.60 against 4 a thread (the old
 * split, 21.04 / 30.13 / 17.52 without its divisions); qwen2.5-7b Q4_K_M decode 340.8 -> 344.3
 * tokens/s.
 * For one row of x, the K formats' fused gate-up products and products of at most SMALL_ROWS rows
 * take workgroups of 512 threads, at most 264: two a compute unit, each half the rows a batch.
 * H100, the same benchmark: Q4_K 2 x 18944 x 3584 with the SwiGLU 36.7 -> 32.9 us, Q4_K 512 x 3584
 * 4.85 -> 4.25, Q6_K 512 x 3584 5.81 -> 4.90; but Q4_K 3584 x 18944 20.05 -> 21.05 and 3584 x 3584
 * 6.98 -> 7.06, so those keep 1024 threads. In models (H100, the twentieth session's h39 / h36,
 * decode tokens/s against 1024 / 132 everywhere): qwen2.5-7b Q4_K_M 344.6 -> 355.7 (512 / 264 on
 * every product: 353.8), 7B Q5_K_M 309.3 -> 322.6, gemma2-9b Q4_K_M 220.0 -> 224.7 (every
 * product: 217.9), 7B Q4_K_M 369.1 -> 366.3 (one round each). */
#define SMALL_ROWS 1024
/* Two rows a subgroup for the K formats' one-row products with short rows (k <= PAIR_ROWS_K: at
 * most 16 super-blocks, two rounds of loads a lane) and at least pair_n rows (NUVEC_MATVEC_SOA's
 * pair_n; PAIR_ROWS_N by default, 0: never): each row's sums and store then follow twice the loads.
 * Off by default: H100 (bench/RESULTS.md, 2026-12-07), with pair_n 8448 (two rows for every
 * subgroup of the grid) the 14336 x 4096 products went from 66% / 71% / 75% of copy to 82% / 85% /
 * 84% (Q4_K / Q5_K / Q6_K_SOA), but 7B Q4_K_M decode from 370.6 / 370.5 to 362.4 / 362.2 tokens/s
 * (its q|k|v and logits products take the rule). */
#define PAIR_ROWS_N 0u
#define PAIR_ROWS_K 4096
static soa_tune default_tune(nu_dtype w, int64_t m, bool glu, int64_t n)
{
    bool halves = k_format(w) && m == 1 && (glu || n <= SMALL_ROWS);
    return (soa_tune){.local = halves ? 512 : 1024, .rows = 1, .unroll = 2, .groups = halves ? 264 : 132, .dot = -1,
                      .pairs = 1, .xpiece = 8, .x_block = k_format(w) ? 48 : 40};
}
/* The two-rows rule where pair_n (the least n it takes; 0: never) says. */
static void pair_rows(soa_tune *t, nu_dtype w, int64_t m, bool glu, int64_t n, int64_t k, uint32_t pair_n)
{
    if (pair_n && k_format(w) && m == 1 && !glu && t->local == 1024 && k <= PAIR_ROWS_K && n >= pair_n)
        t->rows = 2;
}

/* Runs a lane's unit: 2 for Q4_K and Q5_K by pairs (matvec_soa.glsl's PAIRS), else 1. */
static uint32_t unit_runs(nu_dtype w, const soa_tune *t)
{
    return t->pairs && (w == NU_DTYPE_Q4_K || w == NU_DTYPE_Q5_K) ? 2 : 1;
}

/* NUVEC_MATVEC_SOA's keys: the shared ones, prefetch=0|1, pairs=0|1, probe=0..7, xpiece=4|8,
 * chain=0|1 and pair_n=0..2^30 (chain and pair_n kept plus one: 0 is not given). */
typedef struct soa_knobs_in {
    nu__mv_knobs k;
    uint32_t probe, xpiece, chain, pair_n;
} soa_knobs_in;
static bool apply_knob(void *ctx, const char *key, const char *value)
{
    nu__mv_knobs *k = &((soa_knobs_in *)ctx)->k;
    uint32_t v;
    if (!strcmp(key, "probe"))
        return nu__op_knob_u32(value, 0, 7, false, &((soa_knobs_in *)ctx)->probe);
    if (!strcmp(key, "xpiece") && nu__op_knob_u32(value, 4, 8, false, &v) && v % 4 == 0)
        return ((soa_knobs_in *)ctx)->xpiece = v, true;
    if (!strcmp(key, "chain") && nu__op_knob_u32(value, 0, 1, false, &v))
        return ((soa_knobs_in *)ctx)->chain = v + 1, true;
    if (!strcmp(key, "pair_n") && nu__op_knob_u32(value, 0, 1u << 30, false, &v))
        return ((soa_knobs_in *)ctx)->pair_n = v + 1, true;
    int common = nu__matvec_knob(key, value, k);
    if (common >= 0)
        return common == 1;
    if (!strcmp(key, "prefetch") && nu__op_knob_u32(value, 0, 1, false, &v))
        return k->prefetch = v ? 1 : -1, true;
    if (!strcmp(key, "pairs") && nu__op_knob_u32(value, 0, 1, false, &v))
        return k->pairs = v ? 1 : -1, true;
    return false;
}

/* desc->tune, then NUVEC_MATVEC_SOA, over the defaults. */
static nu_status soa_knobs(nu_device *d, const nu_matvec_tune *given, soa_tune *t, uint32_t *pair_n)
{
    soa_knobs_in in = {.probe = 0};
    nu_status st = nu__matvec_tune_knobs(d, FN, given, &in.k);
    if (st != NU_OK || (st = nu__op_env_knobs(d, FN, "NUVEC_MATVEC_SOA",
                                             "local=32..1024 (a power of two), rows=1..8, unroll=1..8, groups=0..65535, "
                                             "split=1..32 (a power of two), prefetch=0|1, pairs=0|1, dot=0|1, "
                                             "probe=0..7, xpiece=4|8, chain=0|1, pair_n=0..2^30",
                                             apply_knob, &in)) != NU_OK)
        return st;
    const nu__mv_knobs k = in.k;
    t->probe = in.probe;
    if (in.xpiece)
        t->xpiece = in.xpiece;
    if (in.chain)
        t->chain = in.chain - 1;
    if (in.pair_n)
        *pair_n = in.pair_n - 1;
    if (k.rows) /* rows given: no rule */
        *pair_n = 0;
    uint32_t *const to[4] = {&t->local, &t->rows, &t->unroll, &t->split};
    const uint32_t knobs[4] = {k.local, k.rows, k.unroll, k.split};
    nu__op_tune_take(to, knobs, 4);
    t->unroll_given = k.unroll != 0;
    if (k.groups)
        t->groups = k.groups == MV_GROUPS_ALL ? 0 : k.groups;
    if (k.dot)
        t->dot = k.dot > 0 ? -1 : 0;
    if (k.prefetch)
        t->prefetch = k.prefetch > 0;
    if (k.pairs)
        t->pairs = k.pairs > 0;
    return NU_OK;
}

/* x's blocks a row in shared memory, rounded up to a multiple of 64 (few pipelines serve every K). */
static uint32_t capacity_blocks(int64_t k) { return (uint32_t)((k / 32 + 63) / 64 * 64); }

/* The kernel's shared memory (matvec_soa.glsl): x's rows on the dot path (x_block bytes a block
 * and row), the split partial sums, the norm's sums and each row's 1 / RMS. */
static uint64_t shared_bytes(bool dot, int64_t m, int64_t k, const soa_tune *t, uint32_t split, uint32_t nw, bool norm)
{
    uint64_t x = dot ? (uint64_t)t->x_block * (uint64_t)m * capacity_blocks(k) : 0;
    uint64_t red = split > 1 ? (t->local / 8ull) * t->rows * (uint64_t)m * nw : 1;
    uint64_t ns = norm ? (t->local / 8ull) * (uint64_t)m : 1;
    return x + 4 * (red + ns + (uint64_t)m);
}

static double fraction(uint64_t used, uint64_t slots) { return slots ? (double)used / (double)slots : 0.0; }

/* Subgroups a row group: the power of two (1 to 8, dividing the workgroup's subgroups) that keeps
 * most lanes busy: the last batch of row groups over the grid's slots fills them unevenly (11008
 * rows over 4224 slots: 3 batches, 87% full) and a row's runs over split x lanes leave lanes idle
 * (4096 / 32 = 128 runs over 8 x 32 lanes: half). Each doubling must gain 2% (it costs barriers),
 * and must leave each lane UNROLL runs a row where split 1 does (fewer runs a lane are fewer bytes
 * in flight: what the bandwidth needs most). */
static uint32_t auto_split(nu_device *d, const soa_tune *t, int64_t m, int64_t n, int64_t k, uint32_t nw, bool norm,
                           bool dot, uint32_t runs)
{
    uint32_t sg = d->info.subgroup_size ? d->info.subgroup_size : 1, best = 1;
    uint64_t row_groups = ((uint64_t)n + t->rows - 1) / t->rows, blocks = (uint64_t)k / 32 / runs; /* units */
    double best_eff = 0;
    for (uint32_t s = 1; s <= 8 && t->local % (sg * s) == 0; s *= 2) {
        if (shared_bytes(dot, m, k, t, s, nw, norm) > d->info.max_shared_memory)
            break;
        uint64_t slots = (uint64_t)(t->groups ? t->groups : 65535) * (t->local / sg / s);
        uint64_t batches = (row_groups + slots - 1) / slots, lanes = (uint64_t)s * sg;
        uint64_t per_lane = (blocks + lanes - 1) / lanes, per_lane1 = (blocks + sg - 1) / sg;
        if (s > 1 && per_lane < (t->unroll < per_lane1 ? t->unroll : per_lane1))
            break;
        if (!t->groups) /* a workgroup per row group's share: the hardware balances them */
            slots = batches * slots > row_groups ? row_groups : slots;
        double eff = fraction(row_groups, batches * slots) * fraction(blocks, per_lane * lanes);
        if (eff > best_eff * 1.02) {
            best_eff = eff;
            best = s;
        }
    }
    return best;
}

/* desc's tensors (matvec_soa.h): norm_weight [k] float and a positive finite eps, glu_up of
 * weight's dtype and shape, residual [m, n] float; none of them overlapping dst but residual as dst itself
 * (bias and glu: matvec.c's checks). */
static nu_status check_desc(nu_device *d, const nu_tensor *dst, const nu_tensor *weight, const nu_tensor *x,
                            const nu_matvec_desc *desc)
{
    nu_status st;
    int64_t m = x->shape[0], k = x->shape[1];
    if (desc->norm_weight) {
        const nu_tensor *g = desc->norm_weight;
        if ((st = nu__op_check(FN, "norm_weight", g, NU__OP_FLOAT)) != NU_OK)
            return st;
        if (g->rank != 1 || g->shape[0] != k)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": norm_weight must be [k] = [%lld] (rank 1)", (long long)k);
        if (!(desc->norm_eps > 0.0f) || !isfinite(desc->norm_eps))
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": norm_eps is %g; it must be positive and finite",
                            (double)desc->norm_eps);
        if ((st = nu__op_no_alias(FN, dst, "norm_weight", g, false)) != NU_OK)
            return st;
    }
    if (desc->glu_up) {
        const nu_tensor *u = desc->glu_up;
        if ((st = nu__op_check(FN, "glu_up", u, NU__OP_DTYPE(weight->dtype))) != NU_OK)
            return st;
        if (u->rank != 2 || u->shape[0] != weight->shape[0] || u->shape[1] != weight->shape[1])
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": glu_up must have weight's shape %lldx%lld",
                            (long long)weight->shape[0], (long long)weight->shape[1]);
        if ((st = nu__op_no_alias(FN, dst, "glu_up", u, false)) != NU_OK)
            return st;
    }
    if (desc->residual) {
        const nu_tensor *r = desc->residual;
        if ((st = nu__op_check(FN, "residual", r, NU__OP_FLOAT)) != NU_OK)
            return st;
        if (r->rank != 2 || r->shape[0] != m || r->shape[1] != dst->shape[1])
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, FN ": residual must be [m, n] = [%lld, %lld] (rank 2)",
                            (long long)m, (long long)dst->shape[1]);
        if ((st = nu__op_no_alias(FN, dst, "residual", r, true)) != NU_OK)
            return st;
    }
    return NU_OK;
}

/* x's quantized rows do not all fit in shared memory but one does: the dot path over groups of
 * as many rows as fit, a dispatch each (each reads the weights again). The float path, which
 * reads x from its binding, was 3.2x slower a step than the dot path: H200, 7B Q4_0 batched decode,
 * 4 rows (FFN down's k = 11008 fits 3 rows in 48 KiB) against 2, 2026-12-02. */
static nu_status by_row_groups(nu_commands *c, nu_device *d, const nu_tensor *dst, const nu_tensor *weight,
                               const nu_tensor *x, const nu_matvec_desc *desc, const soa_tune *tune, uint32_t nw)
{
    int64_t m = x->shape[0], k = x->shape[1], g = m;
    while (g > 1 && shared_bytes(true, g, k, tune, 1, nw, desc->norm_weight) > d->info.max_shared_memory)
        g--;
    for (int64_t r = 0; r < m; r += g) {
        int64_t rows = m - r < g ? m - r : g;
        nu_tensor xs, ds, rs, ss;
        nu_matvec_desc sub = *desc;
        nu_status st;
        if ((st = nu_tensor_slice(x, 0, r, rows, &xs)) != NU_OK || (st = nu_tensor_slice(dst, 0, r, rows, &ds)) != NU_OK ||
            (desc->residual && (st = nu_tensor_slice(desc->residual, 0, r, rows, &rs)) != NU_OK) ||
            (desc->post_norm && (st = nu_tensor_slice(desc->stream, 0, r, rows, &ss)) != NU_OK))
            return st;
        if (desc->residual)
            sub.residual = &rs;
        if (desc->post_norm)
            sub.stream = &ss;
        if ((st = nu__matvec_soa(c, d, &ds, weight, &xs, &sub)) != NU_OK)
            return st;
    }
    return NU_OK;
}

/* The device's side of both formats: subgroup arithmetic, subgroups of 8 or more. */
static bool device_takes(const nu_device *d)
{
    return (d->info.subgroup_operations & NU_SUBGROUP_ARITHMETIC) && d->info.subgroup_size >= 8;
}

/* One row stride serves both weights (the push constants' w_row): a glu_up with another (a view
 * of a wider matrix) stays on the generic paths. */
static int64_t row_stride(const nu_tensor *w) { return w->shape[0] > 1 ? w->strides[0] : w->shape[1]; }

bool nu__matvec_soa_takes_k(nu_device *d, const nu_tensor *weight, const nu_matvec_desc *desc)
{
    const nu_tensor *u = desc ? desc->glu_up : NULL;
    return k_format(weight->dtype) && device_takes(d) && (weight->shape[1] <= 1 || weight->strides[1] == 1) &&
           (!u || (u->dtype == weight->dtype && row_stride(u) == row_stride(weight)));
}

nu_status nu__matvec_soa(nu_commands *c, nu_device *d, const nu_tensor *dst, const nu_tensor *weight,
                         const nu_tensor *x, const nu_matvec_desc *desc)
{
    static const nu_matvec_desc none = {0};
    if (!desc)
        desc = &none;
    nu_status st;
    if (weight->dtype != NU_DTYPE_Q4_0_SOA && !k_format(weight->dtype))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        FN ": weight is %s; this path takes Q4_0_SOA, Q6_K_SOA, Q4_K, Q5_K and Q6_K",
                        nu_dtype_name(weight->dtype));
    if ((st = check_desc(d, dst, weight, x, desc)) != NU_OK)
        return st;
    const nu_device_info *in = &d->info;
    if (!device_takes(d))
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": %s weights need subgroup arithmetic and subgroups of at "
                        "least 8 threads, which %s lacks (keep %s weights there)", nu_dtype_name(weight->dtype), in->name,
                        weight->dtype == NU_DTYPE_Q6_K_SOA ? "Q6_K" : "Q4_0");
    int64_t m = x->shape[0], k = x->shape[1], n = weight->shape[0];
    bool norm = desc->norm_weight, glu = desc->glu_up, resid = desc->residual, bias = desc->bias;
    uint32_t nw = glu ? 2 : 1;

    soa_tune tune = default_tune(weight->dtype, m, glu, n);
    uint32_t pair_n = PAIR_ROWS_N;
    if ((st = soa_knobs(d, &desc->tune, &tune, &pair_n)) != NU_OK)
        return st;
    pair_rows(&tune, weight->dtype, m, glu, n, k, pair_n);
    /* Pairs: one unit (two runs) in flight a lane, the bytes of two single runs. H100, 7B decode
     * tokens/s (bench/RESULTS.md, 2026-12-06): Q4_K_M 348.5 against 323.6 one run at a time
     * (unroll 2), 341.8 with unroll 1 only where glu_up doubles the registers, 297.9 with 2 units
     * everywhere (registers spilled); Q5_K_M 294.9 against 276.7, 286.1, 211.1. Q6_K (one run a
     * unit) keeps two in flight: one was 1% faster on qwen2.5-7b Q4_K_M decode (Q6_K output and half
     * the v and down matrices; 341.0 against 337.5 tokens/s) but 5% slower on a 7B Q6_K file (275.4
     * / 276.6 against 290.4; H100, 2026-12-06, bench/RESULTS.md). */
    if (!tune.unroll_given && unit_runs(weight->dtype, &tune) == 2)
        tune.unroll = 1;
    uint32_t sg = in->subgroup_size;
    uint32_t ops = NU_SUBGROUP_ARITHMETIC | NU_SUBGROUP_SHUFFLE;
    tune.dot = tune.dot && in->features[NU_FEATURE_INTEGER_DOT_PRODUCT] && (in->subgroup_operations & ops) == ops &&
               sg % 8 == 0;
    if (tune.dot && m > 1 && shared_bytes(true, m, k, &tune, 1, nw, norm) > in->max_shared_memory &&
        shared_bytes(true, 1, k, &tune, 1, nw, norm) <= in->max_shared_memory)
        return by_row_groups(c, d, dst, weight, x, desc, &tune, nw);
    if (tune.dot && shared_bytes(true, m, k, &tune, 1, nw, norm) > in->max_shared_memory)
        tune.dot = 0; /* x's quantized rows do not fit: the float path reads x from its binding */
    if (tune.local > in->max_workgroup_size[0] || tune.local > in->max_workgroup_invocations || tune.local % sg)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": local=%u threads a workgroup do not suit %s (at most %u, "
                        "subgroups of %u)", tune.local, in->name, in->max_workgroup_size[0], sg);
    if (!tune.split)
        tune.split = auto_split(d, &tune, m, n, k, nw, norm, tune.dot, unit_runs(weight->dtype, &tune));
    if (tune.local % (sg * tune.split))
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": split=%u does not divide the %u subgroups of %u threads",
                        tune.split, tune.local / sg, tune.local);
    uint64_t shared = shared_bytes(tune.dot, m, k, &tune, tune.split, nw, norm);
    if (shared > in->max_shared_memory)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, FN ": Q4_0_SOA with %u threads, %u rows and split=%u needs %llu bytes of "
                        "shared memory; %s has %u", tune.local, tune.rows, tune.split, (unsigned long long)shared,
                        in->name, in->max_shared_memory);

    /* Bindings: dst, weight, x, up, norm weight, residual, bias; x stands in for the absent ones.
     * With the post-norm: its counter, weight, the stream and dst again (coherent); empty ranges
     * otherwise. */
    bool post = desc->post_norm;
    const nu_tensor *ts[7] = {dst, weight, x, glu ? desc->glu_up : x, norm ? desc->norm_weight : x,
                              resid ? desc->residual : x, bias ? desc->bias : x};
    nu_binding bind[11];
    uint32_t first[11] = {0};
    for (int i = 0; i < 7; i++)
        if ((st = nu__op_bind(FN, ts[i], i ? NU_ACCESS_READ : NU_ACCESS_WRITE, &bind[i], &first[i])) != NU_OK)
            return st;
    for (int i = 7; i < 11; i++)
        bind[i] = nu__op_unbound(dst->buffer);
    if (post && ((st = nu__op_bind(FN, desc->post_norm, NU_ACCESS_READ, &bind[8], &first[8])) != NU_OK ||
                 (st = nu__op_bind(FN, desc->stream, NU_ACCESS_READ_WRITE, &bind[9], &first[9])) != NU_OK))
        return st;
    if (post) {
        bind[10] = bind[0], bind[10].access = NU_ACCESS_READ_WRITE; /* the last workgroup reads dst back */
        bind[0] = nu__op_unbound(dst->buffer);
    }
    /* uvec4 runs where both weights' first halves are 16-byte aligned (each row then is too: a
     * multiple of 16 bytes, Q4_0_SOA's K / 32 * 18, Q4_K's K / 256 * 144, Q5_K's K / 256 * 176;
     * Q6_K_SOA's super-blocks are every 208 bytes of a group of 1,680); never for Q6_K, whose
     * 210-byte super-blocks put runs at any even byte (the kernel's own loads, whatever the flag:
     * clear, not to make two pipelines of one). */
    bool wvec = first[1] % 8 == 0 && (!glu || first[3] % 8 == 0) && weight->dtype != NU_DTYPE_Q6_K;
    bool xvec = (k == 1 || x->strides[1] == 1) && (uint64_t)first[2] * nu_dtype_size(x->dtype) % 16 == 0 &&
                (m == 1 || (uint64_t)x->strides[0] * nu_dtype_size(x->dtype) % 16 == 0);
    uint32_t flags = (wvec ? 1u : 0u) | (norm ? 2u : 0u) | (glu ? 4u : 0u) | (resid ? 8u : 0u) | (xvec ? 16u : 0u) |
                     (tune.prefetch ? 32u : 0u) | (desc->glu == NU_GLU_GELU_TANH ? 64u : 0u) | (bias ? 128u : 0u) |
                     (unit_runs(weight->dtype, &tune) == 2 ? 256u : 0u) | (post ? 512u : 0u) |
                     (tune.chain ? 1024u : 0u);
    uint32_t constants[16] = {nu__op_dtype_code(x->dtype), nu__op_dtype_code(dst->dtype), (uint32_t)m, tune.local,
                              tune.rows, tune.unroll, flags, tune.dot ? capacity_blocks(k) : 64u, tune.split,
                              resid ? nu__op_dtype_code(desc->residual->dtype) : 0u,
                              norm ? nu__op_dtype_code(desc->norm_weight->dtype) : 0u,
                              bias ? nu__op_dtype_code(desc->bias->dtype) : 0u,
                              weight->dtype == NU_DTYPE_Q4_K   ? 1u
                              : weight->dtype == NU_DTYPE_Q5_K ? 2u
                              : weight->dtype == NU_DTYPE_Q6_K ? 3u
                              : weight->dtype == NU_DTYPE_Q6_K_SOA ? 4u
                                                               : 0u,
                              post ? nu__op_dtype_code(desc->post_norm->dtype) : 0u, tune.probe, tune.xpiece};
    struct {
        uint32_t n, k, first_w, w_row, first_up, first_x, x_row, x_col, first_dst, first_g, g_col, first_r, r_row,
            r_col;
        float eps;
        uint32_t first_bias, bias_col, first_pw, pw_col, first_s;
        float post_eps;
    } push = {(uint32_t)n, (uint32_t)k, first[1], nu__op_block_halves(weight, row_stride(weight)), first[3], first[2],
              m > 1 ? (uint32_t)x->strides[0] : 0, (uint32_t)x->strides[1], first[0], first[4],
              norm ? (uint32_t)desc->norm_weight->strides[0] : 0, first[5],
              resid && m > 1 ? (uint32_t)desc->residual->strides[0] : 0,
              resid ? (uint32_t)desc->residual->strides[1] : 0, norm ? desc->norm_eps : 0.0f, first[6],
              bias && n > 1 ? (uint32_t)desc->bias->strides[0] : 0, first[8],
              post && n > 1 ? (uint32_t)desc->post_norm->strides[0] : 0, first[9], post ? desc->post_norm_eps : 0.0f};
    nu_kernel *kern;
    if ((st = nu__op_kernel(d, tune.dot ? NU__K_matvec_soa : NU__K_matvec_soa_float, sizeof push, constants, 16,
                            &kern)) != NU_OK)
        return st;
    uint64_t row_groups = ((uint64_t)n + tune.rows - 1) / tune.rows;
    uint64_t slots = tune.local / sg / tune.split;
    uint64_t wanted = (row_groups + slots - 1) / slots;
    if (tune.groups && wanted > tune.groups)
        wanted = tune.groups;
    uint32_t groups[3] = {(uint32_t)(wanted > 65535 ? 65535 : wanted), 1, 1};
    if (!post)
        return nu_commands_dispatch(c, kern, groups, bind, 11, &push, sizeof push);
    /* The post-norm's counter: a private zeroed word (fresh memory: nu_buffer_from writes it), put
     * back to zero by each launch's last workgroup, so a graph's launches need no fill; handed to
     * the recording (a command buffer frees it with the recorded work, a graph with itself). */
    nu_buffer *count;
    if ((st = nu__op_counters(d, FN, 1, "nu_op_matvec_fused post-norm counter", &count)) != NU_OK)
        return st;
    bind[7] = (nu_binding){.buffer = count, .access = NU_ACCESS_READ_WRITE, .offset = 0, .size = 0};
    st = nu_commands_dispatch(c, kern, groups, bind, 11, &push, sizeof push);
    nu_status st2 = nu__commands_adopt(c, count);
    return st != NU_OK ? st : st2;
}
