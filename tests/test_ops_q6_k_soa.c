/* test_ops_q6_k_soa.c: Q6_K_SOA (nuvec/tensor.h), Q6_K's super-blocks regrouped by 8 with their d
 * apart so that every super-block's bytes start 16-byte aligned: nu_op_copy's repack (byte for
 * byte against the layout written here from tensor.h's definition) and dequantization (bit for bit
 * Q6_K's), nu_op_matvec / nu_op_matvec_fused on it (matvec_soa.glsl's WFMT 4: bit for bit what the
 * same kernel gives for the Q6_K tensor it was made from, fused forms, both paths, knobs, aligned
 * and unaligned tensors, row slices on groups), nu_op_matmul on the tiled kernel and on the matrix
 * units (bit for bit Q6_K's; the latter skipped, saying so, where the device has none), and what is
 * refused; and matvec_soa's CHAIN knob, which must not change a bit. */
#include "ops_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nuvec/trace.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

static uint64_t q6_bytes(int64_t rows, int64_t k) { return (uint64_t)(rows * (k / 256)) * 210; }

/* q (any Q6_K view) repacked by nu_op_copy, `offset` bytes into a buffer of its own. */
static nt_repacked repack(nu_device *d, const nu_tensor *q, uint64_t offset)
{
    return nt_repack(d, q, NU_DTYPE_Q6_K_SOA, offset);
}

/* nuvec/tensor.h's layout: super-block i (row-major through the Q6_K view v of `bytes`) has its
 * first 208 bytes at 1680 (i / 8) + 208 (i % 8) and its d at 1680 (i / 8) + 1664 + 2 (i % 8). */
static void cpu_repack(const uint8_t *bytes, const nu_tensor *v, uint8_t *out)
{
    int64_t rows = v->shape[0], bpr = v->shape[1] / 256;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < bpr; b++) {
            const uint8_t *sb = bytes + v->offset + (uint64_t)((r * v->strides[0]) / 256 + b) * 210;
            uint64_t i = (uint64_t)(r * bpr + b);
            memcpy(out + 1680 * (i / 8) + 208 * (i % 8), sb, 208);
            memcpy(out + 1680 * (i / 8) + 1664 + 2 * (i % 8), sb + 208, 2);
        }
}

static void repack_is_the_layout_and_dequantizes_as_q6_k(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 61;
    /* rows, K, extra columns of the Q6_K source (a column slice: strided rows), its pad
     * super-blocks, the SOA tensor's byte offset (2: not 16-byte aligned), the first row of a
     * slice that starts on a group (its rows x K / 256 a multiple of 8). */
    const struct {
        int64_t n, k, extra;
        uint64_t pad, offset;
        int64_t r0;
    } cases[6] = {{8, 256, 0, 0, 0, 0},    {4, 512, 0, 1, 16, 0},  {2, 1024, 256, 0, 2, 0},
                  {1, 2048, 0, 0, 32, 0},  {24, 768, 0, 3, 48, 8}, {8, 11008, 0, 0, 0, 0}};
    for (int c = 0; c < 6; c++) {
        int64_t n = cases[c].n, k = cases[c].k, qs[2] = {n, k + cases[c].extra};
        nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q6_K, 2, qs, cases[c].pad, -2, 2, &seed);
        nu_tensor qv;
        NT_OK(nu_tensor_slice(&q.t, 1, cases[c].extra, k, &qv)); /* the last k columns */
        nt_repacked s = repack(d, &qv, cases[c].offset);
        uint64_t bytes = q6_bytes(n, k);
        uint8_t *want = malloc((size_t)bytes);
        assert_non_null(want);
        cpu_repack(q.bytes, &qv, want);
        for (uint64_t i = 0; i < bytes; i++)
            if (s.bytes[cases[c].offset + i] != want[i])
                fail_msg("case %d (%lldx%lld): byte %llu of the repack is 0x%02x, expected 0x%02x", c, (long long)n,
                         (long long)k, (unsigned long long)i, s.bytes[cases[c].offset + i], want[i]);
        for (uint64_t i = 0; i < cases[c].offset; i++) /* nothing around the tensor is written */
            assert_int_equal(s.bytes[i], 0xff);
        assert_int_equal(s.bytes[cases[c].offset + bytes], 0xff);
        /* Dequantized: bit for bit Q6_K's, to each float dtype, of the whole tensor and of a
         * slice of its rows that starts on a group. */
        char label[32];
        snprintf(label, sizeof label, "case %d", c);
        nt_expect_same_dequantization(d, &s, &qv, 0, (uint64_t)(c % 2), label);
        nt_expect_same_dequantization(d, &s, &qv, cases[c].r0, (uint64_t)(c % 2), label);
        free(want);
        nt_repacked_free(&s);
        nt_tensor_free(&q);
    }
    nt_close(d);
}

/* ---- products ------------------------------------------------------------------------------ */

typedef struct mv_pair {
    const nu_tensor *dst, *w, *x;
    nu_matvec_desc desc;
} mv_pair;

static nu_status record_matvec(nu_commands *c, void *arg)
{
    mv_pair *k = arg;
    return nu_op_matvec_fused(c, k->dst, k->w, k->x, &k->desc);
}

typedef struct q6_case {
    int64_t m, n, k;
    nu_dtype xdt, ddt;
    bool norm, glu, resid, bias;
    uint64_t offset;  /* the SOA tensor's byte offset (2: its loads by halves) */
    bool float_path;
    nu_matvec_tune tune;
} q6_case;

/* One product against Q6_K and against the Q6_K_SOA made from it: the same bits. With glu the
 * matrix stacks gate and up (2n rows) and each takes its half, a slice of rows on a group. */
static void run_case(nu_device *d, const q6_case *c, uint64_t *seed, const char *label)
{
    int64_t m = c->m, n = c->n, k = c->k;
    int64_t qs[2] = {c->glu ? 2 * n : n, k}, xs[2] = {m, k}, ds[2] = {m, n}, gs[1] = {k}, bs[1] = {n};
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q6_K, 2, qs, 0, -1, 1, seed);
    nt_repacked s = repack(d, &q.t, c->offset);
    nt_tensor x = nt_tensor_random(d, c->xdt, 2, xs, 0, -3, 3, seed);
    nt_tensor g = nt_tensor_random(d, NU_DTYPE_F32, 1, gs, 0, 0.25f, 2, seed);
    nt_tensor r = nt_tensor_random(d, NU_DTYPE_F16, 2, ds, 0, -4, 4, seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F32, 1, bs, 0, -1, 1, seed);
    nt_tensor want = nt_tensor_output(d, c->ddt, 2, ds, 0), got = nt_tensor_output(d, c->ddt, 2, ds, 0);
    nu_tensor qw = q.t, qu = q.t, sw = s.t, su = s.t;
    if (c->glu) {
        NT_OK(nu_tensor_slice(&q.t, 0, 0, n, &qw));
        NT_OK(nu_tensor_slice(&q.t, 0, n, n, &qu));
        NT_OK(nu_tensor_slice(&s.t, 0, 0, n, &sw));
        NT_OK(nu_tensor_slice(&s.t, 0, n, n, &su));
    }
    nu_matvec_desc desc = {.norm_weight = c->norm ? &g.t : NULL, .norm_eps = 1e-5f, .residual = c->resid ? &r.t : NULL,
                           .bias = c->bias ? &b.t : NULL, .tune = c->tune};
    desc.tune.float_path = desc.tune.float_path || c->float_path;
    mv_pair pq = {&want.t, &qw, &x.t, desc}, ps = {&got.t, &sw, &x.t, desc};
    pq.desc.glu_up = c->glu ? &qu : NULL;
    ps.desc.glu_up = c->glu ? &su : NULL;
    nt_run(d, record_matvec, &pq);
    char path[512];
    snprintf(path, sizeof path, "%s/nuvec-q6ks-%d.json", nt_tmp_dir(), (int)getpid());
    NT_OK(nu_trace_start(d, path));
    nt_run(d, record_matvec, &ps);
    NT_OK(nu_trace_stop(d));
    if (!nt_trace_has(path, "matvec_soa"))
        fail_msg("%s: the product did not run on matvec_soa's kernel", label);
    nt_tensor_download(&want);
    nt_tensor_download(&got);
    size_t es = nu_dtype_size(c->ddt);
    for (int64_t i = 0; i < m * n; i++)
        if (memcmp(got.bytes + (size_t)i * es, want.bytes + (size_t)i * es, es))
            fail_msg("%s: element %lld is %.9g against Q6_K's %.9g", label, (long long)i, got.values[i],
                     want.values[i]);
    nt_repacked_free(&s);
    nt_tensor_free(&q);
    nt_tensor_free(&x);
    nt_tensor_free(&g);
    nt_tensor_free(&r);
    nt_tensor_free(&b);
    nt_tensor_free(&want);
    nt_tensor_free(&got);
}

/* Products on matvec_soa's kernel (the Q6_K tensor there too: WFMT 3 against WFMT 4, the same
 * arithmetic in the same order): M 1, 2, 5, K 256 to 11008, every x and dst dtype, the fused
 * norm, bias, glu and residual, both paths, aligned and unaligned tensors, and the knobs. */
static void products_equal_q6_k_bit_for_bit(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const nu_device_info *in = nu_device_get_info(d);
    if (!(in->subgroup_operations & NU_SUBGROUP_ARITHMETIC) || in->subgroup_size < 8) {
        nt_close(d);
        skip(); /* nu_op_matvec refuses Q6_K_SOA there (keep Q6_K: test_ops_matvec.c checks its products) */
    }
    uint64_t seed = 62;
    const struct {
        int64_t m, n, k;
        bool norm, glu, resid, bias;
        uint64_t offset;
    } cases[8] = {
        {1, 40, 256, false, false, false, false, 0},  {2, 8, 4352, false, false, false, false, 2},
        {5, 136, 512, false, false, false, false, 0}, {1, 24, 4352, true, false, false, true, 0},
        {2, 32, 256, false, true, false, false, 2},   {1, 16, 11008, true, true, true, false, 0},
        {5, 8, 1024, true, false, true, true, 2},     {1, 8, 11008, false, false, true, false, 2},
    };
    for (int fp = 0; fp < 2; fp++)
        for (int i = 0; i < 8; i++) {
            q6_case c = {cases[i].m, cases[i].n, cases[i].k, floats[i % 3], floats[(i + fp) % 2 ? 0 : 1 + i % 2],
                         cases[i].norm, cases[i].glu, cases[i].resid, cases[i].bias, cases[i].offset, fp == 1, {0}};
            char label[160];
            snprintf(label, sizeof label, "%s dst = %s x * Q6_K_SOA^T (m %lld n %lld k %lld%s%s%s%s, offset %llu, %s path)",
                     nu_dtype_name(c.ddt), nu_dtype_name(c.xdt), (long long)c.m, (long long)c.n, (long long)c.k,
                     c.norm ? ", norm" : "", c.bias ? ", bias" : "", c.glu ? ", glu" : "", c.resid ? ", residual" : "",
                     (unsigned long long)c.offset, fp ? "float" : "dot");
            run_case(d, &c, &seed, label);
        }
    /* The knobs: rows not dividing N, runs in flight, split row groups, prefetch, fewer
     * workgroups than row groups. */
    const nu_matvec_tune tunes[4] = {{.rows = 3, .unroll = 3}, {.split = 2, .local = 64},
                                     {.split = 4, .rows = 2, .unroll = 1, .prefetch = true}, {.groups = 2, .prefetch = true}};
    for (int t = 0; t < 4; t++) {
        q6_case c = {1 + t % 2, 304, t % 2 ? 11008 : 4352, NU_DTYPE_F32, NU_DTYPE_F32, t == 1, t == 2, t == 3, false,
                     t % 2 ? 2u : 0u, false, tunes[t]};
        char label[96];
        snprintf(label, sizeof label, "Q6_K_SOA with knobs %d (m %lld k %lld)", t, (long long)c.m, (long long)c.k);
        run_case(d, &c, &seed, label);
    }
    nt_close(d);
}

/* NUVEC_MATVEC_SOA=chain=1 (matvec_soa.glsl's CHAIN: each row group's first weight loads issued
 * before the row group before it is reduced) changes when loads are issued, and pair_n=1 (two rows
 * a subgroup for one-row products with k <= 4096 and more than 1024 rows) how rows are grouped,
 * not what is summed: the same bits as without them, on a device opened with each setting, for
 * Q6_K_SOA and Q4_K (by pairs) with many row groups a workgroup (tune.groups 2), split row groups,
 * glu, two rows given, and the rows the pair rule takes. */
static void chain_and_pair_n_give_the_same_bits(void **state)
{
    (void)state;
    const struct {
        nu_dtype w;
        int64_t m, n, k;
        bool glu;
        nu_matvec_tune tune;
    } cases[6] = {{NU_DTYPE_Q6_K_SOA, 1, 304, 4352, false, {.groups = 2}},
                  {NU_DTYPE_Q6_K_SOA, 2, 296, 1024, true, {.groups = 3, .split = 2, .local = 64}},
                  {NU_DTYPE_Q4_K, 1, 301, 4352, false, {.groups = 2, .rows = 2}},
                  {NU_DTYPE_Q4_K, 2, 77, 512, true, {.groups = 1, .prefetch = true}},
                  {NU_DTYPE_Q4_K, 1, 1101, 512, false, {.groups = 2}},
                  {NU_DTYPE_Q6_K_SOA, 1, 1032, 1024, false, {0}}};
    static const char *const settings[3] = {"chain=0", "chain=1", "pair_n=1"};
    float *out[3][6] = {{NULL}};
    for (int set = 0; set < 3; set++) {
        assert_int_equal(setenv("NUVEC_MATVEC_SOA", settings[set], 1), 0);
        nu_device *d = nt_open();
        const nu_device_info *in = nu_device_get_info(d);
        if (!(in->subgroup_operations & NU_SUBGROUP_ARITHMETIC) || in->subgroup_size < 8) {
            nt_close(d);
            unsetenv("NUVEC_MATVEC_SOA");
            skip(); /* matvec_soa's kernel does not run there */
        }
        uint64_t seed = 66;
        for (int i = 0; i < 6; i++) {
            int64_t n = cases[i].n, k = cases[i].k, m = cases[i].m;
            int64_t qs[2] = {cases[i].glu ? 2 * n : n, k}, xs[2] = {m, k}, ds[2] = {m, n};
            nu_dtype file = cases[i].w == NU_DTYPE_Q6_K_SOA ? NU_DTYPE_Q6_K : cases[i].w;
            nt_tensor q = nt_tensor_quantized(d, file, 2, qs, 0, -1, 1, &seed);
            nt_repacked s = {0};
            nu_tensor w = q.t, up = q.t;
            if (cases[i].w == NU_DTYPE_Q6_K_SOA) {
                s = repack(d, &q.t, 0);
                w = up = s.t;
            }
            nu_tensor whole = w;
            if (cases[i].glu) {
                NT_OK(nu_tensor_slice(&whole, 0, 0, n, &w));
                NT_OK(nu_tensor_slice(&whole, 0, n, n, &up));
            }
            nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -2, 2, &seed);
            nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
            mv_pair p = {&dst.t, &w, &x.t, {.glu_up = cases[i].glu ? &up : NULL, .tune = cases[i].tune}};
            nt_run(d, record_matvec, &p);
            nt_tensor_download(&dst);
            out[set][i] = malloc((size_t)(m * n) * sizeof(float));
            assert_non_null(out[set][i]);
            memcpy(out[set][i], dst.values, (size_t)(m * n) * sizeof(float));
            if (s.t.buffer)
                nt_repacked_free(&s);
            nt_tensor_free(&q);
            nt_tensor_free(&x);
            nt_tensor_free(&dst);
        }
        nt_close(d);
    }
    unsetenv("NUVEC_MATVEC_SOA");
    for (int i = 0; i < 6; i++) {
        size_t count = (size_t)(cases[i].m * cases[i].n);
        for (int set = 1; set < 3; set++) {
            for (size_t e = 0; e < count; e++)
                if (memcmp(&out[0][i][e], &out[set][i][e], sizeof(float)))
                    fail_msg("case %d (%s): element %zu is %.9g with %s, %.9g without", i, nu_dtype_name(cases[i].w), e,
                             out[set][i][e], settings[set], out[0][i][e]);
            free(out[set][i]);
        }
        free(out[0][i]);
    }
}

/* ---- the matrix units ---------------------------------------------------------------------- */

typedef struct two_products {
    const nu_tensor *want, *got, *a, *q, *s;
    nu_matmul_desc desc;
} two_products;

static nu_status record_two_products(nu_commands *c, void *arg)
{
    const two_products *t = arg;
    nu_status st = nu_op_matmul_ex(c, t->want, t->a, t->q, &t->desc);
    return st != NU_OK ? st : nu_op_matmul_ex(c, t->got, t->a, t->s, &t->desc);
}

/* nu_op_matmul against Q6_K_SOA gives exactly what the same product against the Q6_K tensor gives
 * (each kernel decodes both into the same values): for few rows and many, whole tiles and edges,
 * aligned and unaligned tensors; on the tiled kernel (F32 and F16 a) on every device, and on the
 * matrix units (matmul_coopmat.comp: batched decode's and short prefills' products) where the
 * device has them. */
static void products_of_many_rows(nu_device *d, bool units, uint64_t *seed)
{
    const int64_t shapes[5][3] = {{4, 64, 4096}, {16, 200, 512}, {64, 256, 1024}, {130, 72, 256}, {1, 40, 768}};
    for (int sh = 0; sh < 5; sh++) {
        int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2], as[2] = {m, k}, bs[2] = {n, k}, ds[2] = {m, n};
        if (!units && m * n * k > 16 * 1024 * 1024)
            m = 8; /* the tiled kernel on a CPU device: fewer rows */
        as[0] = ds[0] = m;
        nu_dtype adt = units || sh % 2 ? NU_DTYPE_F16 : NU_DTYPE_F32;
        nt_tensor a = nt_tensor_random(d, adt, 2, as, 0, -1, 1, seed);
        nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q6_K, 2, bs, 0, -1, 1, seed);
        nt_repacked s = repack(d, &q.t, sh % 2 ? 2 : 0);
        nt_tensor want = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0), got = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        two_products tp = {&want.t, &got.t, &a.t, &q.t, &s.t, {.tune = {.no_tensor_cores = !units}}};
        nt_run(d, record_two_products, &tp);
        nt_tensor_download(&want);
        nt_tensor_download(&got);
        for (int64_t i = 0; i < m * n; i++)
            if (memcmp(&want.values[i], &got.values[i], sizeof(float)))
                fail_msg("%s: [%lld, %lld] x [%lld, %lld]^T: element %lld is %.9g against Q6_K's %.9g",
                         units ? "matrix units" : "tiled", (long long)m, (long long)k, (long long)n, (long long)k,
                         (long long)i, got.values[i], want.values[i]);
        nt_repacked_free(&s);
        nt_tensor_free(&a);
        nt_tensor_free(&q);
        nt_tensor_free(&want);
        nt_tensor_free(&got);
    }
}

static void matmul_tiled_reads_it_as_q6_k(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 63;
    products_of_many_rows(d, false, &seed);
    nt_close(d);
}

static void matmul_on_the_matrix_units_reads_it_as_q6_k(void **state)
{
    (void)state;
    nu_device *d = nt_open_matrix_units("matmul_on_the_matrix_units_reads_it_as_q6_k");
    uint64_t seed = 65;
    products_of_many_rows(d, true, &seed);
    NT_OK(nu_device_close(d));
}

/* ---- refusals ------------------------------------------------------------------------------ */

static void refuses_what_it_cannot_do(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 64;
    int64_t qs[2] = {8, 512}, q3[2] = {3, 256}, xs[2] = {1, 512}, ds[2] = {1, 8};
    nt_tensor q = nt_tensor_quantized(d, NU_DTYPE_Q6_K, 2, qs, 0, -1, 1, &seed);
    nt_tensor q4 = nt_tensor_quantized(d, NU_DTYPE_Q4_0, 2, qs, 0, -1, 1, &seed);
    nt_tensor x = nt_tensor_random(d, NU_DTYPE_F32, 2, xs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    nt_repacked s = repack(d, &q.t, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    /* 3 super-blocks: not whole groups of 8 (named by the check). */
    nu_tensor s3 = nu_tensor_make(s.t.buffer, 0, NU_DTYPE_Q6_K_SOA, 2, q3);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_tensor_check(&s3, "t"));
    assert_non_null(strstr(nu_error_message(NULL), "whole groups of 8 super-blocks"));
    /* A slice of rows that ends inside a group (refused by the ops' check), and one that starts
     * inside one (refused by the slice). */
    nu_tensor rows3;
    NT_OK(nu_tensor_slice(&s.t, 0, 0, 3, &rows3));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &rows3, &x.t));
    assert_non_null(strstr(nu_error_message(NULL), "whole groups of 8 super-blocks"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_tensor_slice(&s.t, 0, 2, 4, &rows3));
    assert_non_null(strstr(nu_error_message(NULL), "sliced at whole groups of 8 super-blocks"));
    NT_OK(nu_tensor_slice(&s.t, 0, 4, 4, &rows3)); /* rows of 2 super-blocks: row 4 starts group 1 */
    /* Made from Q6_K only (not Q4_0, not itself). */
    nu_tensor s2 = nu_tensor_make(s.t.buffer, 0, NU_DTYPE_Q6_K_SOA, 2, qs);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_copy(c, &s2, &q4.t));
    assert_non_null(strstr(nu_error_message(NULL), "Q6_K_SOA is made from Q6_K only"));
    /* A column slice and rank 3. */
    nu_tensor cols;
    NT_OK(nu_tensor_slice(&s.t, 1, 256, 256, &cols));
    int64_t xs256[2] = {1, 256};
    nu_tensor x256 = nu_tensor_make(x.t.buffer, 0, NU_DTYPE_F32, 2, xs256);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec(c, &dst.t, &cols, &x256));
    assert_non_null(strstr(nu_error_message(NULL), "columns cannot be sliced"));
    int64_t r3[3] = {2, 4, 512};
    nu_tensor t3 = nu_tensor_make(s.t.buffer, 0, NU_DTYPE_Q6_K_SOA, 3, r3);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_tensor_check(&t3, "t"));
    assert_non_null(strstr(nu_error_message(NULL), "rank 2"));
    /* gather keeps Q6_K; a Q6_K up with a Q6_K_SOA gate. */
    int32_t ids[1] = {1};
    nt_tensor id = nt_tensor_i32(d, ids, 1, 0, 1);
    int64_t gd[2] = {1, 512};
    nt_tensor gdst = nt_tensor_output(d, NU_DTYPE_F32, 2, gd, 0);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &gdst.t, &s.t, &id.t));
    assert_non_null(strstr(nu_error_message(NULL), "nu_op_gather takes the Q6_K tensor"));
    nu_matvec_desc desc = {.glu_up = &q.t};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_matvec_fused(c, &dst.t, &s.t, &x.t, &desc));
    assert_non_null(strstr(nu_error_message(NULL), "glu_up"));
    nu_commands_free(c);
    nt_repacked_free(&s);
    nt_tensor_free(&q);
    nt_tensor_free(&q4);
    nt_tensor_free(&x);
    nt_tensor_free(&dst);
    nt_tensor_free(&id);
    nt_tensor_free(&gdst);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(repack_is_the_layout_and_dequantizes_as_q6_k),
        cmocka_unit_test(products_equal_q6_k_bit_for_bit),
        cmocka_unit_test(chain_and_pair_n_give_the_same_bits),
        cmocka_unit_test(refuses_what_it_cannot_do),
        cmocka_unit_test(matmul_tiled_reads_it_as_q6_k),
        cmocka_unit_test(matmul_on_the_matrix_units_reads_it_as_q6_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
