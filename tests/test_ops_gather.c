/* test_ops_gather.c: nu_op_gather (src/ops/gather.c) against a CPU reference: every table dtype
 * (F32, F16, BF16 and every block dtype) into every float dst, repeated, out-of-range and negative
 * ids, dims not a multiple of 8, unaligned rows, strided tables and ids, block tables sliced, a
 * grid that loops (desc->tune); and what it refuses. Tolerance: none. A gather moves values: each
 * element must be the table's value (for block dtypes, nu_dequantize's F32 value, bit for bit)
 * rounded to dst's dtype. */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};
/* The float table dtypes, then the block ones. */
#define TABLES (3 + NT_BLOCK_DTYPES)
static nu_dtype table_dtype(int i) { return i < 3 ? floats[i] : nt_block_dtypes[i - 3]; }

typedef struct gather_case {
    const nu_tensor *dst, *table, *ids;
    const nu_gather_tune *tune; /* NULL: nu_op_gather */
} gather_case;

static nu_status record_gather(nu_commands *c, void *arg)
{
    gather_case *k = arg;
    if (!k->tune)
        return nu_op_gather(c, k->dst, k->table, k->ids);
    nu_gather_desc desc = {*k->tune};
    return nu_op_gather_ex(c, k->dst, k->table, k->ids, &desc);
}

/* A table's values, row-major over its view [vocab, dim]: float views through their strides,
 * block views dequantized row by row from their bytes. */
static float *table_values(const nt_tensor *h, const nu_tensor *view)
{
    int64_t vocab = view->shape[0], dim = view->shape[1];
    float *v = malloc((size_t)(vocab * dim + 1) * sizeof *v);
    if (nu_dtype_block_elements(view->dtype) > 1) {
        uint32_t bb = nu_dtype_block_bytes(view->dtype);
        for (int64_t r = 0; r < vocab; r++)
            nt_dequantize(view->dtype,
                          h->bytes + view->offset + (uint64_t)(r * view->strides[0] / nu_dtype_block_elements(view->dtype)) * bb,
                          (uint64_t)dim, v + r * dim);
    } else {
        nt_tensor_values(h, view, v);
    }
    return v;
}

/* Gathers ids (host copy `id`) from table view `tv` of `table` into dst (with `tune`, or NULL),
 * and checks every element. */
static void check_tuned(nu_device *d, nt_tensor *dst, const nt_tensor *table, const nu_tensor *tv, const nt_tensor *ids,
                        const int32_t *id, const nu_gather_tune *tune, const char *what)
{
    gather_case k = {&dst->t, tv, &ids->t, tune};
    nt_run(d, record_gather, &k);
    nt_tensor_download(dst);
    int64_t n = ids->t.shape[0], vocab = tv->shape[0], dim = tv->shape[1];
    float *v = table_values(table, tv), *want = malloc((size_t)(n * dim + 1) * sizeof *want);
    for (int64_t t = 0; t < n; t++)
        for (int64_t e = 0; e < dim; e++)
            want[t * dim + e] = id[t] >= 0 && id[t] < vocab ? nt_round_to(dst->t.dtype, v[id[t] * dim + e]) : 0.0f;
    for (int64_t i = 0; i < n * dim; i++)
        if (memcmp(&dst->values[i], &want[i], 4) != 0)
            fail_msg("%s: element %lld (token %lld, id %d) is %.9g, expected %.9g exactly", what, (long long)i,
                     (long long)(i / dim), id[i / dim], (double)dst->values[i], (double)want[i]);
    free(v);
    free(want);
}

static void check_gather(nu_device *d, nt_tensor *dst, const nt_tensor *table, const nu_tensor *tv, const nt_tensor *ids,
                         const int32_t *id, const char *what)
{
    check_tuned(d, dst, table, tv, ids, id, NULL, what);
}

static nt_tensor make_table(nu_device *d, nu_dtype dt, int64_t vocab, int64_t dim, uint64_t pad, uint64_t *seed)
{
    int64_t s[2] = {vocab, dim};
    if (nu_dtype_block_elements(dt) > 1)
        return nt_tensor_quantized(d, dt, 2, s, pad, -2, 2, seed);
    return nt_tensor_random(d, dt, 2, s, pad, -2, 2, seed);
}

static void gather_matches_the_reference_for_every_dtype(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 1;
    /* Repeats, the first and last rows, out of range (vocab, far past, INT32_MAX), negative. */
    const int32_t id[12] = {3, 0, 36, 3, 37, 1000, -1, INT32_MIN, INT32_MAX, 17, 3, 36};
    nt_tensor ids = nt_tensor_i32(d, id, 12, 0, 1);
    for (int tt = 0; tt < TABLES; tt++)
        for (int dd = tt < 5 ? 0 : tt % 3; dd < 3; dd += tt < 5 ? 1 : 3) /* the later formats: one dst dtype each */
            for (int pad = 0; pad < 2; pad++) { /* pad: rows unaligned (float), blocks off 16 bytes */
                int64_t dim = nu_dtype_block_elements(table_dtype(tt)) == 256 ? 256 : 64;
                nt_tensor table = make_table(d, table_dtype(tt), 37, dim, (uint64_t)pad, &seed);
                int64_t ds[2] = {12, dim};
                nt_tensor dst = nt_tensor_output(d, floats[dd], 2, ds, (uint64_t)(pad && dd == 0 ? 0 : pad));
                char what[96];
                snprintf(what, sizeof what, "%s table -> %s, pad %d", nu_dtype_name(table_dtype(tt)), nu_dtype_name(floats[dd]), pad);
                check_gather(d, &dst, &table, &table.t, &ids, id, what);
                nt_tensor_free(&table);
                nt_tensor_free(&dst);
            }
    nt_tensor_free(&ids);
    nt_close(d);
}

static void gather_takes_odd_dims_and_strided_views(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 2;
    const int32_t id[7] = {4, 4, 0, 9, -3, 10, 2};
    nt_tensor ids = nt_tensor_i32(d, id, 7, 0, 1);
    /* dim not a multiple of 8 (the general path), from each float dtype into each. */
    const int64_t dims[3] = {13, 7, 1};
    for (int tt = 0; tt < 3; tt++)
        for (int dd = 0; dd < 3; dd++) {
            int64_t dim = dims[(tt + dd) % 3], ds[2] = {7, dim};
            nt_tensor table = make_table(d, floats[tt], 10, dim, (uint64_t)dd, &seed);
            nt_tensor dst = nt_tensor_output(d, floats[dd], 2, ds, 0);
            char what[96];
            snprintf(what, sizeof what, "%s table -> %s, dim %lld", nu_dtype_name(floats[tt]), nu_dtype_name(floats[dd]),
                     (long long)dim);
            check_gather(d, &dst, &table, &table.t, &ids, id, what);
            nt_tensor_free(&table);
            nt_tensor_free(&dst);
        }
    /* Float tables as column slices of wider ones (rows with a stride): aligned (columns 8..24 of
     * 40, the vector path) and not (columns 3..16). */
    for (int tt = 0; tt < 3; tt++)
        for (int c = 0; c < 2; c++) {
            nt_tensor wide = make_table(d, floats[tt], 10, 40, 0, &seed);
            nu_tensor view;
            NT_OK(nu_tensor_slice(&wide.t, 1, c ? 3 : 8, c ? 13 : 16, &view));
            int64_t ds[2] = {7, view.shape[1]};
            nt_tensor dst = nt_tensor_output(d, floats[(tt + 1) % 3], 2, ds, 0);
            char what[96];
            snprintf(what, sizeof what, "%s table, columns %d.. of 40", nu_dtype_name(floats[tt]), c ? 3 : 8);
            check_gather(d, &dst, &wide, &view, &ids, id, what);
            nt_tensor_free(&wide);
            nt_tensor_free(&dst);
        }
    /* A transposed float table (columns strided) on the general path. */
    nt_tensor tr = make_table(d, NU_DTYPE_F16, 16, 10, 0, &seed);
    nu_tensor trv;
    NT_OK(nu_tensor_transpose(&tr.t, 0, 1, &trv)); /* [10, 16] */
    int64_t ts[2] = {7, 16};
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ts, 0);
    check_gather(d, &dst, &tr, &trv, &ids, id, "a transposed F16 table");
    nt_tensor_free(&tr);
    nt_tensor_free(&dst);
    /* Block tables as slices of wider ones: blocks 1..3 of 3 a row; and with dst unaligned (the
     * element path). */
    for (int tt = 3; tt < TABLES; tt++)
        for (int pad = 0; pad < 2; pad++) {
            int64_t per = nu_dtype_block_elements(table_dtype(tt));
            nt_tensor wide = make_table(d, table_dtype(tt), 10, 3 * per, 1, &seed);
            nu_tensor view;
            NT_OK(nu_tensor_slice(&wide.t, 1, per, 2 * per, &view));
            int64_t ds[2] = {7, 2 * per};
            nt_tensor out = nt_tensor_output(d, floats[pad + 1], 2, ds, (uint64_t)pad);
            char what[96];
            snprintf(what, sizeof what, "%s table, blocks 1..3 of a row, dst pad %d", nu_dtype_name(table_dtype(tt)), pad);
            check_gather(d, &out, &wide, &view, &ids, id, what);
            nt_tensor_free(&wide);
            nt_tensor_free(&out);
        }
    nt_tensor_free(&ids);
    /* Strided ids: every other element. */
    nt_tensor sids = nt_tensor_i32(d, id, 7, 1, 2);
    nt_tensor table = make_table(d, NU_DTYPE_Q8_0, 10, 32, 0, &seed);
    int64_t ds[2] = {7, 32};
    nt_tensor out = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    check_gather(d, &out, &table, &table.t, &sids, id, "strided ids");
    nt_tensor_free(&sids);
    nt_tensor_free(&table);
    nt_tensor_free(&out);
    nt_close(d);
}

static void gather_loops_over_large_grids_with_any_tuning(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 3;
    enum { N = 2000 };
    int32_t *id = malloc(N * sizeof *id);
    for (int i = 0; i < N; i++)
        id[i] = (int32_t)(nt_rand(&seed) % 60) - 5; /* some negative, some past the 50 rows */
    nt_tensor ids = nt_tensor_i32(d, id, N, 0, 1);
    /* One thread a workgroup and 3 units a thread: 200000 units need the grid's loop (65535
     * workgroups at most). */
    const nu_gather_tune tunings[4] = {{1, 3}, {64, 4}, {1024, 1}, {32, 2}};
    const char *names[4] = {"local 1 units 3", "local 64 units 4", "local 1024 units 1", "local 32 units 2"};
    const nu_dtype tt[4] = {NU_DTYPE_F16, NU_DTYPE_Q4_0, NU_DTYPE_F32, NU_DTYPE_Q6_K};
    const int64_t dims[4] = {800, 64, 9, 256};
    for (int i = 0; i < 4; i++) {
        nt_tensor table = make_table(d, tt[i], 50, dims[i], 0, &seed);
        int64_t ds[2] = {N, dims[i]};
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_BF16, 2, ds, 0);
        check_tuned(d, &dst, &table, &table.t, &ids, id, &tunings[i], names[i]);
        nt_tensor_free(&table);
        nt_tensor_free(&dst);
    }
    /* A tune outside its range is refused, naming the field. */
    nt_tensor table = make_table(d, NU_DTYPE_F32, 50, 8, 0, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, (int64_t[2]){N, 8}, 0);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_gather_desc bad = {{0, 5}};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather_ex(c, &dst.t, &table.t, &ids.t, &bad));
    assert_non_null(strstr(nu_error_message(d), "tune.units is 5"));
    nu_commands_free(c);
    nt_tensor_free(&table);
    nt_tensor_free(&dst);
    free(id);
    nt_tensor_free(&ids);
    nt_close(d);
}

static void gather_handles_empty_tables_and_ids(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 5;
    const int32_t id[3] = {0, -1, 5};
    nt_tensor ids = nt_tensor_i32(d, id, 3, 0, 1);
    /* A table of no rows: every id is out of range, every row zeros. */
    for (int tt = 0; tt < 5; tt += 3) {
        nt_tensor table = make_table(d, table_dtype(tt), 0, 32, 0, &seed);
        int64_t ds[2] = {3, 32};
        nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
        check_gather(d, &dst, &table, &table.t, &ids, id, "an empty table");
        nt_tensor_free(&table);
        nt_tensor_free(&dst);
    }
    /* No ids: nothing recorded. */
    nt_tensor table = make_table(d, NU_DTYPE_F16, 4, 8, 0, &seed);
    int64_t d08[2] = {0, 8};
    nt_tensor none = nt_tensor_output(d, NU_DTYPE_F32, 2, d08, 0);
    nu_tensor no_ids;
    NT_OK(nu_tensor_slice(&ids.t, 0, 0, 0, &no_ids));
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_op_gather(c, &none.t, &table.t, &no_ids));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    nt_tensor_free(&table);
    nt_tensor_free(&none);
    nt_tensor_free(&ids);
    nt_close(d);
}

static void gather_refuses_bad_arguments(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 4;
    int64_t ts[2] = {5, 8}, ds[2] = {3, 8}, d9[2] = {3, 9}, t3[3] = {1, 5, 8}, n3[1] = {3}, i2[2] = {3, 1};
    nt_tensor table = make_table(d, NU_DTYPE_F32, 5, 8, 0, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 2, ds, 0);
    nt_tensor wrong = nt_tensor_output(d, NU_DTYPE_F32, 2, d9, 0);
    nt_tensor t3d = nt_tensor_random(d, NU_DTYPE_F32, 3, t3, 0, 0, 1, &seed);
    nt_tensor itab = nt_tensor_random(d, NU_DTYPE_I32, 2, ts, 0, 0, 9, &seed);
    nt_tensor idst = nt_tensor_output(d, NU_DTYPE_I32, 2, ds, 0);
    const int32_t id[3] = {0, 1, 2};
    nt_tensor ids = nt_tensor_i32(d, id, 3, 0, 1);
    nt_tensor fids = nt_tensor_random(d, NU_DTYPE_F32, 1, n3, 0, 0, 4, &seed);
    nt_tensor ids2 = nt_tensor_random(d, NU_DTYPE_I32, 2, i2, 0, 0, 4, &seed);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_op_gather(c, &dst.t, &table.t, &ids.t)); /* the baseline is fine */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &dst.t, &table.t, &fids.t));
    assert_non_null(strstr(nu_error_message(NULL), "ids is F32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &dst.t, &table.t, &ids2.t));
    assert_non_null(strstr(nu_error_message(NULL), "ids has rank 2"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &dst.t, &t3d.t, &ids.t));
    assert_non_null(strstr(nu_error_message(NULL), "table has rank 3"));
    nu_tensor row;
    NT_OK(nu_tensor_reshape(&table.t, 1, (int64_t[1]){40}, &row));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &dst.t, &row, &ids.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &wrong.t, &table.t, &ids.t));
    assert_non_null(strstr(nu_error_message(NULL), "[n, dim] = [3, 8]"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &dst.t, &itab.t, &ids.t));
    assert_non_null(strstr(nu_error_message(NULL), "table is I32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &idst.t, &table.t, &ids.t));
    nu_tensor dt; /* dst transposed: [8, 3] seen as [3, 8], strided */
    nt_tensor d83 = nt_tensor_output(d, NU_DTYPE_F32, 2, (int64_t[2]){8, 3}, 0);
    NT_OK(nu_tensor_transpose(&d83.t, 0, 1, &dt));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &dt, &table.t, &ids.t));
    assert_non_null(strstr(nu_error_message(NULL), "contiguous"));
    /* dst over the table, and over the ids. */
    nu_tensor over = nu_tensor_make(table.t.buffer, 0, NU_DTYPE_F32, 2, ds);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &over, &table.t, &ids.t));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps table"));
    nu_tensor over_ids = nu_tensor_make(ids.t.buffer, 0, NU_DTYPE_F32, 2, (int64_t[2]){3, 1}), col;
    NT_OK(nu_tensor_slice(&table.t, 1, 0, 1, &col));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &over_ids, &col, &ids.t));
    assert_non_null(strstr(nu_error_message(NULL), "overlaps ids"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(NULL, &dst.t, &table.t, &ids.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_gather(c, &dst.t, NULL, &ids.t));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    nt_tensor_free(&table);
    nt_tensor_free(&dst);
    nt_tensor_free(&wrong);
    nt_tensor_free(&t3d);
    nt_tensor_free(&itab);
    nt_tensor_free(&idst);
    nt_tensor_free(&ids);
    nt_tensor_free(&fids);
    nt_tensor_free(&ids2);
    nt_tensor_free(&d83);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gather_matches_the_reference_for_every_dtype),
        cmocka_unit_test(gather_takes_odd_dims_and_strided_views),
        cmocka_unit_test(gather_loops_over_large_grids_with_any_tuning),
        cmocka_unit_test(gather_handles_empty_tables_and_ids),
        cmocka_unit_test(gather_refuses_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
