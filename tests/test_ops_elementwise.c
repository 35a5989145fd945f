/* test_ops_elementwise.c: elementwise ops (src/ops/elementwise.c) against a CPU reference: every
 * dtype combination, odd sizes and tails, broadcasting, strided and unaligned views, in place;
 * and what they refuse. */
#include "ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

static float ref_binary(nu_binary_op op, float x, float y)
{
    switch (op) {
    case NU_BINARY_ADD: return x + y;
    case NU_BINARY_SUB: return x - y;
    case NU_BINARY_MUL: return x * y;
    default: return x / y;
    }
}

typedef struct binary_case {
    nu_binary_op op;
    const nu_tensor *dst, *a, *b;
} binary_case;

static nu_status record_binary(nu_commands *c, void *arg)
{
    binary_case *k = arg;
    return nu_op_binary(c, k->op, k->dst, k->a, k->b);
}

/* dst = a op b for a's view `av` and b's view `bv` (broadcast to dst's shape), checked. */
static void check_binary(nu_device *d, nu_binary_op op, nt_tensor *dst, nt_tensor *a, const nu_tensor *av, nt_tensor *b,
                         const nu_tensor *bv, const char *what)
{
    binary_case k = {op, &dst->t, av, bv};
    nt_run(d, record_binary, &k);
    nt_tensor_download(dst);
    uint64_t n = dst->numel;
    nu_tensor ab, bb;
    NT_OK(nu_tensor_broadcast(av, dst->t.rank, dst->t.shape, &ab));
    NT_OK(nu_tensor_broadcast(bv, dst->t.rank, dst->t.shape, &bb));
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *want = malloc(n * sizeof *want);
    nt_tensor_values(a, &ab, x);
    nt_tensor_values(b, &bb, y);
    for (uint64_t i = 0; i < n; i++)
        want[i] = nt_round_to(dst->t.dtype, ref_binary(op, x[i], y[i]));
    /* F32 arithmetic on both sides; the store's rounding and division may differ by an ulp. */
    nt_expect_close(what, dst->values, want, n, 1e-30f, 2 * nt_dtype_tolerance(dst->t.dtype));
    free(x);
    free(y);
    free(want);
}

static void binary_ops_match_the_reference_for_every_dtype(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 1;
    const int64_t shapes[][4] = {{1, 1, 1, 1}, {1, 1, 1, 7}, {1, 1, 3, 33}, {1, 2, 5, 64}, {2, 3, 4, 129}};
    for (int op = 0; op < NU_BINARY_OP_COUNT; op++)
        for (int dt = 0; dt < 3; dt++)
            for (int da = 0; da < 3; da++)
                for (int db = 0; db < 3; db++) {
                    int s = (op + dt + da + db) % 5;
                    uint32_t rank = 1 + (uint32_t)((dt + da) % 4);
                    const int64_t *shape = shapes[s] + (4 - rank);
                    uint64_t pad = (uint64_t)((da + db) % 3); /* 0: aligned (the vector path); else not */
                    nt_tensor a = nt_tensor_random(d, floats[da], rank, shape, pad, -2, 2, &seed);
                    nt_tensor b = nt_tensor_random(d, floats[db], rank, shape, 0, 0.5f, 3, &seed);
                    nt_tensor dst = nt_tensor_output(d, floats[dt], rank, shape, (uint64_t)(dt % 2) * 8);
                    char what[128];
                    snprintf(what, sizeof what, "%s %s = %s op %s, %llu elements, pad %llu",
                             (const char *[]){"add", "sub", "mul", "div"}[op], nu_dtype_name(floats[dt]),
                             nu_dtype_name(floats[da]), nu_dtype_name(floats[db]), (unsigned long long)dst.numel,
                             (unsigned long long)pad);
                    check_binary(d, (nu_binary_op)op, &dst, &a, &a.t, &b, &b.t, what);
                    nt_tensor_free(&a);
                    nt_tensor_free(&b);
                    nt_tensor_free(&dst);
                }
    nt_close(d);
}

static void binary_ops_broadcast_and_take_strided_views(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 2;
    /* dst [3, 5, 37]; a [5, 37] (a missing leading dimension), b [3, 1, 37] (a dimension of 1). */
    int64_t ds[3] = {3, 5, 37}, as[2] = {5, 37}, bs[3] = {3, 1, 37};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 2, as, 0, -1, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_BF16, 3, bs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F16, 3, ds, 0);
    check_binary(d, NU_BINARY_MUL, &dst, &a, &a.t, &b, &b.t, "broadcast [5,37] * [3,1,37]");
    /* A scalar-like [1] operand. */
    int64_t one[1] = {1};
    nt_tensor s = nt_tensor_random(d, NU_DTYPE_F32, 1, one, 0, 2, 3, &seed);
    check_binary(d, NU_BINARY_DIV, &dst, &a, &a.t, &s, &s.t, "broadcast [5,37] / [1]");
    nt_tensor_free(&dst);
    /* A transposed input: a2 [37, 5] read as [5, 37]. */
    int64_t ts[2] = {37, 5};
    nt_tensor a2 = nt_tensor_random(d, NU_DTYPE_F16, 2, ts, 3, -1, 1, &seed);
    nu_tensor at;
    NT_OK(nu_tensor_transpose(&a2.t, 0, 1, &at));
    nt_tensor dst2 = nt_tensor_output(d, NU_DTYPE_F32, 2, as, 0);
    check_binary(d, NU_BINARY_SUB, &dst2, &a2, &at, &a, &a.t, "transposed [37,5]^T - [5,37]");
    /* A slice: rows 1..3 of a. */
    nu_tensor rows;
    NT_OK(nu_tensor_slice(&a.t, 0, 1, 3, &rows));
    int64_t rs[2] = {3, 37};
    nt_tensor dst3 = nt_tensor_output(d, NU_DTYPE_BF16, 2, rs, 0);
    check_binary(d, NU_BINARY_ADD, &dst3, &a, &rows, &a, &rows, "a slice + itself");
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&s);
    nt_tensor_free(&a2);
    nt_tensor_free(&dst2);
    nt_tensor_free(&dst3);
    nt_close(d);
}

static void binary_ops_run_in_place_and_at_large_sizes(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 3;
    int64_t n[1] = {300001}; /* several grid strides' worth of 8-element steps, and a tail */
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 1, n, 0, -1, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F32, 1, n, 0, -1, 1, &seed);
    float *before = malloc(a.numel * sizeof *before);
    memcpy(before, a.values, a.numel * sizeof *before);
    binary_case k = {NU_BINARY_ADD, &a.t, &a.t, &b.t}; /* a += b */
    nt_run(d, record_binary, &k);
    nt_tensor_download(&a);
    float *want = malloc(a.numel * sizeof *want);
    for (uint64_t i = 0; i < a.numel; i++)
        want[i] = before[i] + b.values[i];
    nt_expect_close("a += b in place", a.values, want, a.numel, 0, 1e-6f);
    free(before);
    free(want);
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_close(d);
}

static void binary_ops_refuse_bad_tensors(void **state)
{
    nu_device *d = nt_open();
    uint64_t seed = 4;
    int64_t s4[1] = {4}, s5[1] = {5}, s22[2] = {2, 2};
    nt_tensor a = nt_tensor_random(d, NU_DTYPE_F32, 1, s4, 0, 0, 1, &seed);
    nt_tensor b = nt_tensor_random(d, NU_DTYPE_F32, 1, s5, 0, 0, 1, &seed);
    nt_tensor m = nt_tensor_random(d, NU_DTYPE_F32, 2, s22, 0, 0, 1, &seed);
    nt_tensor i = nt_tensor_random(d, NU_DTYPE_I32, 1, s4, 0, 0, 9, &seed);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add(c, &a.t, &a.t, &b.t)); /* 5 does not broadcast to 4 */
    assert_non_null(strstr(nu_error_message(NULL), "broadcast"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add(c, &i.t, &a.t, &a.t)); /* an I32 dst */
    assert_non_null(strstr(nu_error_message(NULL), "I32"));
    nu_tensor mt;
    NT_OK(nu_tensor_transpose(&m.t, 0, 1, &mt));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add(c, &mt, &m.t, &m.t)); /* a strided dst */
    nu_tensor shifted = a.t;
    shifted.shape[0] = 3;
    nu_tensor tail = shifted;
    tail.offset += 4;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add(c, &tail, &shifted, &shifted)); /* dst overlaps a */
    assert_non_null(strstr(nu_error_message(NULL), "overlaps"));
    nu_tensor past = a.t;
    past.offset = a.size;
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_op_add(c, &past, &a.t, &a.t));
    nu_tensor odd = a.t;
    odd.offset = 2;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add(c, &odd, &a.t, &a.t)); /* not a multiple of 4 bytes */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_binary(c, NU_BINARY_OP_COUNT, &a.t, &a.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add(NULL, &a.t, &a.t, &a.t));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_add(c, NULL, &a.t, &a.t));
    nu_commands_free(c);
    nt_tensor_free(&a);
    nt_tensor_free(&b);
    nt_tensor_free(&m);
    nt_tensor_free(&i);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(binary_ops_match_the_reference_for_every_dtype),
        cmocka_unit_test(binary_ops_broadcast_and_take_strided_views),
        cmocka_unit_test(binary_ops_run_in_place_and_at_large_sizes),
        cmocka_unit_test(binary_ops_refuse_bad_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
