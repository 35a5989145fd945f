/* test_graph.c: graphs (nuvec/graph.h) on a real device (lavapipe, under synchronisation
 * validation): many launches checked against the CPU, dependency levels, slots rebound and
 * parameters changed per launch, launches ordered against ordinary command buffers, the CPU
 * access rules while a launch is in flight, bad input, freed buffers, a lost device, launches
 * from several threads (run under ThreadSanitizer by `make tsan`), and random graphs launched
 * many times with random rebinding, interleaved with ordinary command buffers, against a CPU
 * model. */
#include "harness.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/launch.h"
#include "exec/submission.h"
#include "vk/device.h"

#define N 64 /* floats per buffer */

static nu_device *dev;
static nu_kernel *add, *axpy, *fill_k;

static int setup(void **state)
{
    dev = nt_open();
    NT_OK(nu_kernel_builtin(dev, "add_f32", &add));
    NT_OK(nu_kernel_builtin(dev, "axpy_f32", &axpy));
    NT_OK(nu_kernel_builtin(dev, "fill_u32", &fill_k));
    return 0;
}

static int teardown(void **state)
{
    nu_kernel_free(add);
    nu_kernel_free(axpy);
    nu_kernel_free(fill_k);
    nu_memory_stats s;
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.active, 0); /* every test freed what it made */
    nt_close(dev);
    return 0;
}

static nu_buffer *floats(float first, float step)
{
    float v[N];
    for (int i = 0; i < N; i++)
        v[i] = first + step * (float)i;
    nu_buffer *b;
    NT_OK(nu_buffer_from(dev, v, sizeof v, NU_STORAGE_SHARED, &b));
    return b;
}

static void expect_floats(nu_buffer *b, float first, float step)
{
    float v[N];
    NT_OK(nu_buffer_read(b, 0, v, sizeof v));
    for (int i = 0; i < N; i++)
        if (v[i] != first + step * (float)i)
            fail_msg("float %d: %g, expected %g", i, v[i], first + step * (float)i);
}

static const uint32_t one_group[3] = {1, 1, 1};

static bool dev_update_after_bind(void) { return dev->has_update_after_bind; }

/* z = x + y */
static void rec_add(nu_commands *c, nu_buffer *z, nu_buffer *x, nu_buffer *y)
{
    uint32_t count = N;
    nu_binding b[3] = {{z, NU_ACCESS_WRITE, 0, 0}, {x, NU_ACCESS_READ, 0, 0}, {y, NU_ACCESS_READ, 0, 0}};
    NT_OK(nu_commands_dispatch(c, add, one_group, b, 3, &count, sizeof count));
}

/* y += alpha x */
static void rec_axpy(nu_commands *c, nu_buffer *y, nu_buffer *x, float alpha)
{
    struct {
        float alpha;
        uint32_t count;
    } push = {alpha, N};
    nu_binding b[2] = {{y, NU_ACCESS_READ_WRITE, 0, 0}, {x, NU_ACCESS_READ, 0, 0}};
    NT_OK(nu_commands_dispatch(c, axpy, one_group, b, 2, &push, sizeof push));
}

static nu_graph *build(nu_commands *c)
{
    nu_graph *g;
    NT_OK(nu_graph_new(c, &g));
    return g;
}

static nu_graph *build_with(nu_commands *c, const nu_graph_options *o)
{
    nu_graph *g;
    NT_OK(nu_graph_new_with(c, o, &g));
    return g;
}

/* Whether the developer override of the whole run takes every slow path (docs/knobs.md). */
static bool rerecord_run(void) { return getenv("NUVEC_GRAPH_RERECORD") != NULL; }

static void launch_many_times(void **state)
{
    nu_buffer *x = floats(1, 1), *y = floats(0, 0), *z = floats(0, 0);
    nu_commands *c;
    NT_OK(nu_graph_record(dev, &c));
    NT_OK(nu_commands_fill(c, y, 0, N * 4, 0)); /* y = 0 */
    rec_axpy(c, y, x, 1);                        /* a chain on y: levels 1, 2, 3 */
    rec_axpy(c, y, x, 1);
    rec_axpy(c, y, x, 1);
    rec_add(c, z, x, x); /* independent: level 0 */
    nu_graph *g = build(c);
    assert_int_equal(nu_graph_node_count(g), 5);
    assert_int_equal(nu_graph_level_count(g), 4);
    for (int i = 0; i < 8; i++) {
        NT_OK(nu_graph_launch(g));
        if (i % 3 == 2) {
            NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
            expect_floats(y, 3, 3);
            expect_floats(z, 2, 2);
        }
    }
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    expect_floats(y, 3, 3);
    /* Nothing changed: each of the recorded copies was recorded once. */
    assert_int_equal(nu__graph_recordings(g), 3);
    NT_OK(nu_graph_free(g));
    nu_buffer_free(x);
    nu_buffer_free(y);
    nu_buffer_free(z);
}

static void independent_nodes_share_a_level(void **state)
{
    nu_buffer *x = floats(1, 0), *o[4], *sum = floats(0, 0);
    nu_commands *c;
    NT_OK(nu_graph_record(dev, &c));
    for (int i = 0; i < 4; i++) {
        o[i] = floats(0, 0);
        rec_add(c, o[i], x, x); /* four independent: level 0 */
    }
    rec_add(c, sum, o[0], o[3]); /* level 1 */
    rec_axpy(c, o[1], x, 1);     /* rewrites o[1] (written at level 0): level 1 */
    rec_add(c, o[2], sum, x);    /* reads sum (level 1), rewrites o[2] (written at 0): level 2 */
    nu_graph *g = build(c);
    assert_int_equal(nu_graph_level_count(g), 3);
    NT_OK(nu_graph_launch(g));
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    expect_floats(sum, 4, 0);
    expect_floats(o[1], 3, 0);
    expect_floats(o[2], 5, 0);
    NT_OK(nu_graph_free(g));
    for (int i = 0; i < 4; i++)
        nu_buffer_free(o[i]);
    nu_buffer_free(x);
    nu_buffer_free(sum);
}

/* One graph, y = 0 then y += alpha x, with alpha a parameter: `recorded` says whether its push
 * constants are recorded (a change encodes the launched copy anew) or read from memory. */
static void parameters_pass(const nu_graph_options *o, bool recorded)
{
    nu_buffer *x = floats(1, 1), *y = floats(0, 0);
    nu_commands *c;
    NT_OK(nu_graph_record(dev, &c));
    uint32_t p;
    NT_OK(nu_commands_fill(c, y, 0, N * 4, 0));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_param(c, 0, 4, &p)); /* a fill has no parameters */
    rec_axpy(c, y, x, 1);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_param(c, 4, 4, &p)); /* the builtin's count */
    assert_non_null(strstr(nu_error_message(NULL), "element count"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_param(c, 2, 4, &p));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_param(c, 8, 4, &p));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_param(c, 0, 0, &p));
    NT_OK(nu_graph_param(c, 0, 4, &p)); /* alpha */
    assert_int_equal(p, 0);
    nu_graph *g = build_with(c, o);
    float alpha = 1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_set_param(g, 0, &alpha, 8));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_set_param(g, 1, &alpha, 4));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_set_param(g, 0, NULL, 4));
    for (int i = 1; i <= 5; i++) {
        alpha = (float)i;
        NT_OK(nu_graph_set_param(g, p, &alpha, sizeof alpha));
        NT_OK(nu_graph_launch(g));
        NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
        expect_floats(y, alpha, alpha);
    }
    /* Read from memory: each copy was encoded once; recorded push constants: at every change. */
    assert_int_equal(nu__graph_recordings(g), recorded ? 5 : 3);
    /* The same value again encodes nothing anew. */
    uint64_t before = nu__graph_recordings(g);
    NT_OK(nu_graph_set_param(g, p, &alpha, sizeof alpha));
    for (int i = 0; i < 3; i++)
        NT_OK(nu_graph_launch(g));
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    assert_true(nu__graph_recordings(g) <= before + 2); /* at most the copies not encoded at 5 */
    expect_floats(y, 5, 5);
    NT_OK(nu_graph_free(g));
    nu_buffer_free(x);
    nu_buffer_free(y);
}

/* Without the level pass (NU_GRAPH_SCHEDULE_IN_ORDER) a graph keeps its recording's order with
 * a command buffer's barriers: a node independent of the last level does not move up. */
static void in_order_schedule(void **state)
{
    nu_buffer *a = floats(1, 0), *b = floats(0, 0), *c1 = floats(0, 0), *d1 = floats(0, 0), *x = floats(2, 0);
    nu_graph_options in_order = {.schedule = NU_GRAPH_SCHEDULE_IN_ORDER};
    const nu_graph_options *ways[2] = {NULL, &in_order};
    for (int w = 0; w < 2; w++) {
        nu_commands *c;
        NT_OK(nu_graph_record(dev, &c));
        rec_add(c, a, x, x);   /* a = 4:                   level 0 */
        rec_add(c, c1, a, x);  /* c = a + 2 = 6:           level 1 */
        rec_add(c, b, x, x);   /* b = 4: levels 0, in order 1 (after the barrier) */
        rec_add(c, d1, b, x);  /* d = b + 2 = 6: levels 1, in order 2 */
        nu_graph *g = build_with(c, ways[w]);
        assert_int_equal(nu_graph_node_count(g), 4);
        assert_int_equal(nu_graph_level_count(g), w ? 3 : 2);
        for (int i = 0; i < 3; i++)
            NT_OK(nu_graph_launch(g));
        NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
        expect_floats(c1, 6, 0);
        expect_floats(d1, 6, 0);
        NT_OK(nu_graph_free(g));
    }
    nu_buffer *all[] = {a, b, c1, d1, x};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        nu_buffer_free(all[i]);
}

static void parameters_change_per_launch(void **state)
{
    parameters_pass(NULL, rerecord_run());
    parameters_pass(&(nu_graph_options){.params = NU_GRAPH_PARAMS_FROM_MEMORY}, rerecord_run());
    parameters_pass(&(nu_graph_options){.params = NU_GRAPH_PARAMS_RECORDED}, true);
    /* Copied into device memory at each launch's start (a discrete GPU's default), and read where
     * the CPU wrote them. */
    parameters_pass(&(nu_graph_options){.params = NU_GRAPH_PARAMS_IN_DEVICE_MEMORY}, rerecord_run());
    parameters_pass(&(nu_graph_options){.params = NU_GRAPH_PARAMS_IN_HOST_MEMORY}, rerecord_run());
    /* The developer override wins over the options. */
    if (!rerecord_run()) {
        setenv("NUVEC_GRAPH_RERECORD", "1", 1);
        parameters_pass(&(nu_graph_options){.params = NU_GRAPH_PARAMS_FROM_MEMORY}, true);
        unsetenv("NUVEC_GRAPH_RERECORD");
    }
}

/* A kernel-library op's push constant (nu_op_unary's alpha, bytes 12..15) as a parameter: its
 * kernel (with specialisation constants) reads it from memory, where the CPU wrote it or copied
 * into device memory by each launch; launches in flight with other values. */
static void op_parameter_with(const nu_graph_options *o)
{
    nu_buffer *x = floats(1, 1), *y = floats(0, 0);
    int64_t shape[1] = {N};
    nu_tensor tx = nu_tensor_make(x, 0, NU_DTYPE_F32, 1, shape), ty = nu_tensor_make(y, 0, NU_DTYPE_F32, 1, shape);
    nu_commands *c;
    NT_OK(nu_graph_record(dev, &c));
    NT_OK(nu_op_unary(c, NU_UNARY_SCALE, &ty, &tx, 1.0f));
    uint32_t p;
    NT_OK(nu_graph_param(c, 12, 4, &p));
    nu_graph *g = build_with(c, o);
    for (int i = 0; i < 6; i++) {
        float alpha = (float)(i % 3 + 2);
        NT_OK(nu_graph_set_param(g, p, &alpha, 4));
        NT_OK(nu_graph_launch(g));
        if (i % 2) {
            NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
            expect_floats(y, alpha, alpha);
        }
    }
    if (!rerecord_run())
        assert_true(nu__graph_recordings(g) <= 3);
    NT_OK(nu_graph_free(g));
    nu_buffer_free(x);
    nu_buffer_free(y);
}

static void op_parameter(void **state)
{
    op_parameter_with(NULL);
    op_parameter_with(&(nu_graph_options){.params = NU_GRAPH_PARAMS_IN_DEVICE_MEMORY});
    op_parameter_with(&(nu_graph_options){.params = NU_GRAPH_PARAMS_IN_HOST_MEMORY});
}

static void slots_rebind_pass(const nu_graph_options *o, bool sets)
{
    nu_buffer *a = floats(1, 1), *b = floats(10, 0), *z = floats(0, 0);
    nu_buffer *z1 = floats(0, 0), *z2 = floats(0, 0), *small, *big;
    NT_OK(nu_buffer_new(dev, N * 4 - 4, NU_STORAGE_SHARED, &small));
    NT_OK(nu_buffer_new(dev, 4096 + N * 4, NU_STORAGE_PRIVATE, &big));
    nu_commands *c;
    NT_OK(nu_graph_record(dev, &c));
    uint32_t sz, sa, again;
    NT_OK(nu_graph_slot(c, z, &sz));
    rec_add(c, z, a, b);
    NT_OK(nu_graph_slot(c, a, &sa));
    NT_OK(nu_graph_slot(c, z, &again));
    assert_int_equal(sz, 0);
    assert_int_equal(sa, 1);
    assert_int_equal(again, 0);
    nu_graph *g = build_with(c, o);
    for (int i = 0; i < 6; i++) {
        NT_OK(nu_graph_bind(g, sz, i % 2 ? z2 : z1, 0));
        NT_OK(nu_graph_bind(g, sa, i % 3 ? a : b, 0));
        NT_OK(nu_graph_launch(g));
        NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
        if (i % 3)
            expect_floats(i % 2 ? z2 : z1, 11, 1);
        else
            expect_floats(i % 2 ? z2 : z1, 20, 0);
    }
    expect_floats(z, 0, 0); /* never launched with its first binding */
    /* Rebound through descriptor sets where the device updates them after bind (each copy
     * encoded once), else encoded again (at each of the 6 launches: a slot changed each time). */
    assert_int_equal(nu__graph_recordings(g), sets ? 3 : 6);
    /* A larger buffer at an aligned offset fits. */
    size_t align = 256;
    NT_OK(nu_graph_bind(g, sz, big, align));
    NT_OK(nu_graph_bind(g, sa, a, 0));
    NT_OK(nu_graph_launch(g));
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    float v[N];
    NT_OK(nu_buffer_read(big, align, v, sizeof v));
    assert_true(v[0] == 11 && v[N - 1] == 10 + N);
    /* Wrong sizes, offsets and slots. */
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_graph_bind(g, sz, small, 0));
    assert_non_null(strstr(nu_error_message(NULL), "slot 0 takes"));
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_graph_bind(g, sz, big, 8192));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_bind(g, sz, big, 4));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_bind(g, 2, z, 0));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_bind(g, sz, NULL, 0));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_bind(NULL, sz, z, 0));
    NT_OK(nu_graph_free(g));
    nu_buffer *all[] = {a, b, z, z1, z2, small, big};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        nu_buffer_free(all[i]);
}

static void slots_rebind(void **state)
{
    bool sets_override = getenv("NUVEC_GRAPH_SETS") && !rerecord_run() && dev_update_after_bind();
    slots_rebind_pass(NULL, sets_override);
    /* Descriptor sets updated after bind (opt-in), where the device has them: else the option
     * falls back to encoding again. */
    bool sets = dev_update_after_bind() && !rerecord_run();
    if (!sets)
        print_message("no UPDATE_AFTER_BIND storage buffers here: slots rebind by encoding again only\n");
    slots_rebind_pass(&(nu_graph_options){.slots = NU_GRAPH_SLOTS_SETS}, sets);
    if (dev_update_after_bind() && !rerecord_run()) {
        /* And the developer override asks for them without the option. */
        setenv("NUVEC_GRAPH_SETS", "1", 1);
        slots_rebind_pass(NULL, true);
        unsetenv("NUVEC_GRAPH_SETS");
    }
}

/* Launches and commits alternate without waits: each is ordered after the conflicting work
 * committed before it (RAW and WAR on x, RAW and WAW on y). */
static void launches_ordered_with_commits(void **state)
{
    nu_buffer *x = floats(0, 0), *y;
    NT_OK(nu_buffer_new(dev, N * 4, NU_STORAGE_PRIVATE, &y));
    nu_commands *c;
    NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_commands_fill(c, y, 0, N * 4, 0));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_free(c));
    NT_OK(nu_graph_record(dev, &c));
    rec_axpy(c, y, x, 1); /* y += x */
    nu_graph *g = build(c);
    float total = 0;
    for (int i = 1; i <= 6; i++) {
        float v = (float)i;
        uint32_t bits;
        memcpy(&bits, &v, 4);
        NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
        NT_OK(nu_commands_fill(c, x, 0, N * 4, bits)); /* after the last launch read x */
        NT_OK(nu_commands_commit(c));
        NT_OK(nu_commands_free(c));
        NT_OK(nu_graph_launch(g));
        total += v;
    }
    /* In flight: the CPU may not read y (or the launch already completed). */
    float out[N];
    nu_status st = nu_buffer_read(y, 0, out, sizeof out);
    if (st == NU_ERROR_BUFFER_IN_USE)
        assert_true(nu_buffer_in_use(y) || nu_graph_wait(g, 0) == NU_OK);
    else
        NT_OK(st);
    st = nu_buffer_write(x, 0, out, sizeof out);
    assert_true(st == NU_ERROR_BUFFER_IN_USE || st == NU_OK);
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    assert_false(nu_buffer_in_use(y));
    NT_OK(nu_buffer_read(y, 0, out, sizeof out));
    for (int i = 0; i < N; i++)
        assert_true(out[i] == total);
    NT_OK(nu_graph_free(g));
    nu_buffer_free(x);
    nu_buffer_free(y);
}

static void ops_in_a_graph(void **state)
{
    nu_buffer *a = floats(1, 1), *b = floats(2, 0), *o = floats(0, 0);
    int64_t shape[1] = {N};
    nu_tensor ta = nu_tensor_make(a, 0, NU_DTYPE_F32, 1, shape), tb = nu_tensor_make(b, 0, NU_DTYPE_F32, 1, shape);
    nu_tensor to = nu_tensor_make(o, 0, NU_DTYPE_F32, 1, shape);
    nu_commands *c;
    NT_OK(nu_graph_record(dev, &c));
    NT_OK(nu_op_binary(c, NU_BINARY_MUL, &to, &ta, &tb)); /* o = 2a */
    NT_OK(nu_op_binary(c, NU_BINARY_ADD, &to, &to, &tb)); /* o = 2a + 2 */
    nu_graph *g = build(c);
    assert_int_equal(nu_graph_level_count(g), 2);
    for (int i = 0; i < 3; i++)
        NT_OK(nu_graph_launch(g));
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    expect_floats(o, 4, 2);
    NT_OK(nu_graph_free(g));
    nu_buffer_free(a);
    nu_buffer_free(b);
    nu_buffer_free(o);
}

static void freed_buffers(void **state)
{
    nu_buffer *x = floats(1, 1), *y = floats(0, 0), *s = floats(0, 0), *s2 = floats(0, 0);
    nu_commands *c;
    NT_OK(nu_graph_record(dev, &c));
    uint32_t slot;
    NT_OK(nu_graph_slot(c, s, &slot));
    rec_add(c, s, x, x);
    nu_graph *g = build(c);
    NT_OK(nu_buffer_free(s));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_graph_launch(g));
    assert_non_null(strstr(nu_error_message(NULL), "slot 0 was freed"));
    NT_OK(nu_graph_bind(g, slot, s2, 0));
    NT_OK(nu_graph_launch(g));
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    expect_floats(s2, 2, 2);
    NT_OK(nu_buffer_set_name(x, "x"));
    NT_OK(nu_buffer_free(x));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_graph_launch(g));
    assert_non_null(strstr(nu_error_message(NULL), "(\"x\") was freed"));
    NT_OK(nu_graph_free(g));
    /* Freed while recording: building refuses, the recording stays the caller's. */
    nu_buffer *t = floats(0, 0);
    NT_OK(nu_graph_record(dev, &c));
    rec_add(c, t, y, y);
    NT_OK(nu_buffer_free(t));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_graph_new(c, &g));
    assert_null(g);
    NT_OK(nu_commands_free(c));
    nu_buffer_free(y);
    nu_buffer_free(s2);
}

static void misuse(void **state)
{
    nu_buffer *x = floats(0, 0);
    nu_graph *g = (nu_graph *)1;
    nu_commands *c, *plain;
    uint32_t slot = 7;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_new(NULL, &g));
    assert_null(g);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_record(NULL, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_record(dev, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_launch(NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_wait(NULL, 0));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_set_param(NULL, 0, &slot, 4));
    NT_OK(nu_graph_free(NULL));
    assert_int_equal(nu_graph_node_count(NULL), 0);
    /* An ordinary command buffer, committed or not, is no graph recording. */
    NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &plain));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_new(plain, &g));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_slot(plain, x, &slot));
    assert_int_equal(slot, 0);
    NT_OK(nu_commands_fill(plain, x, 0, 16, 1));
    NT_OK(nu_commands_commit(plain));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_new(plain, &g));
    assert_non_null(strstr(nu_error_message(NULL), "nu_graph_record"));
    NT_OK(nu_commands_wait(plain, NU_WAIT_FOREVER));
    NT_OK(nu_commands_free(plain));
    /* A graph recording is not committed, takes no uploads or downloads. */
    NT_OK(nu_graph_record(dev, &c));
    uint32_t word = 0;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_upload(c, x, 0, &word, 4));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_download(c, x, 0, &word, 4));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_commit(c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_wait(c, 0));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_slot(c, NULL, &slot));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_slot(c, x, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_new(c, NULL));
    /* Unknown options: refused, the recording left as it was (it builds after). */
    NT_OK(nu_commands_fill(c, x, 0, 16, 2));
    g = (nu_graph *)1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_new_with(c, &(nu_graph_options){.params = 5}, &g));
    assert_null(g);
    assert_non_null(strstr(nu_error_message(NULL), "unknown options"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_new_with(c, &(nu_graph_options){.slots = -1}, &g));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_graph_new_with(c, &(nu_graph_options){.schedule = 3}, &g));
    NT_OK(nu_graph_new_with(c, &(nu_graph_options){0}, &g));
    assert_int_equal(nu_graph_node_count(g), 1);
    NT_OK(nu_graph_free(g));
    NT_OK(nu_graph_record(dev, &c));
    NT_OK(nu_commands_free(c)); /* freed unbuilt */
    /* An empty graph launches and does nothing. */
    NT_OK(nu_graph_record(dev, &c));
    NT_OK(nu_graph_new(c, &g));
    assert_int_equal(nu_graph_level_count(g), 0);
    NT_OK(nu_graph_wait(g, 0)); /* never launched */
    NT_OK(nu_graph_launch(g));
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    NT_OK(nu_graph_free(g));
    /* Freed with launches in flight: they complete and release what they use. */
    NT_OK(nu_graph_record(dev, &c));
    NT_OK(nu_commands_fill(c, x, 0, N * 4, 3));
    NT_OK(nu_graph_new(c, &g));
    for (int i = 0; i < 5; i++)
        NT_OK(nu_graph_launch(g));
    NT_OK(nu_graph_free(g));
    NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));
    assert_false(nu_buffer_in_use(x));
    uint32_t w;
    NT_OK(nu_buffer_read(x, 0, &w, 4));
    assert_int_equal(w, 3);
    nu_buffer_free(x);
}

static void lost_device(void **state)
{
    nu_device *d = nt_open();
    nu_buffer *b;
    NT_OK(nu_buffer_new(d, 256, NU_STORAGE_SHARED, &b));
    nu_commands *c;
    NT_OK(nu_graph_record(d, &c));
    NT_OK(nu_commands_fill(c, b, 0, 256, 1));
    nu_graph *g;
    NT_OK(nu_graph_new(c, &g));
    NT_OK(nu_graph_launch(g));
    nu__device_simulate_loss(d);
    NT_STATUS(NU_ERROR_DEVICE_LOST, nu_graph_launch(g));
    NT_STATUS(NU_ERROR_DEVICE_LOST, nu_graph_wait(g, NU_WAIT_FOREVER));
    NT_STATUS(NU_ERROR_DEVICE_LOST, nu_graph_record(d, &c));
    NT_OK(nu_graph_free(g));
    assert_false(nu_buffer_in_use(b));
    NT_OK(nu_buffer_free(b));
    nt_close(d);
}

/* ---- launches from several threads ------------------------------------------------------ */

enum { THREADS = 4, LAUNCHES = 12 };
static nu_graph *shared_graph;

static void *launcher(void *arg)
{
    for (int i = 0; i < LAUNCHES; i++) {
        if (nu_graph_launch(shared_graph) != NU_OK)
            return "launch failed";
        if (i % 4 == 3 && nu_graph_wait(shared_graph, NU_WAIT_FOREVER) != NU_OK)
            return "wait failed";
    }
    return NULL;
}

static void launches_from_threads(void **state)
{
    nu_buffer *x = floats(1, 0), *y = floats(0, 0);
    nu_commands *c;
    NT_OK(nu_graph_record(dev, &c));
    rec_axpy(c, y, x, 1);
    shared_graph = build(c);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, launcher, NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        void *err;
        pthread_join(t[i], &err);
        if (err)
            fail_msg("thread %d: %s: %s", i, (const char *)err, nu_error_message(NULL));
    }
    NT_OK(nu_graph_wait(shared_graph, NU_WAIT_FOREVER));
    expect_floats(y, THREADS * LAUNCHES, 0);
    NT_OK(nu_graph_free(shared_graph));
    nu_buffer_free(x);
    nu_buffer_free(y);
}

/* ---- random graphs against a CPU model -------------------------------------------------- */

/* Buffers of W words (integer-valued floats stay exact); graphs of fills, copies and adds over
 * them, some buffers bound through slots and rebound to random buffers of the pool before
 * launches, interleaved with ordinary command buffers doing the same kinds of work. The model
 * runs every graph launch and commit in program order; the device's bytes are compared after
 * each wait. */
enum { W = 64, POOL = 8, PROGRAMS = 6, NODES = 10, STEPS = 12 };

typedef struct model_node {
    int kind; /* 0 fill, 1 copy (dst, src), 2 add (dst = a + b) */
    int dst, a, b; /* operands: 0..POOL-1 a fixed buffer, POOL+s slot s */
    int lo, hi;    /* word range (fills and copies) */
    float value;
} model_node;

static float model[POOL][W];
static nu_buffer *pool[POOL];

static void model_run(const model_node *n, int count, const int *bound)
{
    for (int i = 0; i < count; i++) {
        const model_node *m = &n[i];
        int d = m->dst >= POOL ? bound[m->dst - POOL] : m->dst;
        int a = m->a >= POOL ? bound[m->a - POOL] : m->a;
        int b = m->b >= POOL ? bound[m->b - POOL] : m->b;
        if (m->kind == 0) {
            for (int w = m->lo; w < m->hi; w++)
                model[d][w] = m->value;
        } else if (m->kind == 1) {
            float tmp[W];
            memcpy(tmp, model[a], sizeof tmp);
            for (int w = m->lo; w < m->hi; w++)
                model[d][w] = tmp[w];
        } else {
            for (int w = 0; w < W; w++)
                model[d][w] = model[a][w] + model[b][w];
        }
    }
}

static nu_buffer *operand(int o, const int *bound) { return pool[o >= POOL ? bound[o - POOL] : o]; }

static void record_nodes(nu_commands *c, const model_node *n, int count, const int *bound)
{
    for (int i = 0; i < count; i++) {
        const model_node *m = &n[i];
        nu_buffer *d = operand(m->dst, bound), *a = operand(m->a, bound), *b = operand(m->b, bound);
        if (m->kind == 0) {
            uint32_t bits;
            memcpy(&bits, &m->value, 4);
            NT_OK(nu_commands_fill(c, d, (size_t)m->lo * 4, (size_t)(m->hi - m->lo) * 4, bits));
        } else if (m->kind == 1) {
            NT_OK(nu_commands_copy(c, d, (size_t)m->lo * 4, a, (size_t)m->lo * 4, (size_t)(m->hi - m->lo) * 4));
        } else {
            uint32_t count32 = W;
            nu_binding bind[3] = {{d, NU_ACCESS_WRITE, 0, 0}, {a, NU_ACCESS_READ, 0, 0}, {b, NU_ACCESS_READ, 0, 0}};
            NT_OK(nu_commands_dispatch(c, add, one_group, bind, 3, &count32, sizeof count32));
        }
    }
}

/* Random nodes over fixed buffers and `slots` slots; an add's operands are distinct buffers
 * and copies' too (a buffer may not be bound twice into one binding set when rebinding could
 * make them alias: slots are rebound only to buffers no other operand of the graph uses). */
static void random_nodes(uint64_t *seed, model_node *n, int count, int fixed, int slots)
{
    for (int i = 0; i < count; i++) {
        model_node *m = &n[i];
        int kinds = nt_rand(seed) % 3;
        m->kind = kinds;
        int ops = fixed + slots;
        m->dst = (int)(nt_rand(seed) % ops);
        do
            m->a = (int)(nt_rand(seed) % ops);
        while (m->a == m->dst);
        do
            m->b = (int)(nt_rand(seed) % ops);
        while (m->b == m->dst);
        /* Operands >= fixed are slots. */
        if (m->dst >= fixed)
            m->dst = POOL + (m->dst - fixed);
        if (m->a >= fixed)
            m->a = POOL + (m->a - fixed);
        if (m->b >= fixed)
            m->b = POOL + (m->b - fixed);
        m->lo = (int)(nt_rand(seed) % W);
        m->hi = m->lo + 1 + (int)(nt_rand(seed) % (W - m->lo));
        m->value = (float)(nt_rand(seed) % 100);
    }
}

static void check_pool(int program, int step)
{
    for (int p = 0; p < POOL; p++) {
        float v[W];
        NT_OK(nu_buffer_read(pool[p], 0, v, sizeof v));
        for (int w = 0; w < W; w++)
            if (v[w] != model[p][w])
                fail_msg("program %d step %d: buffer %d word %d: %g, the model says %g", program, step, p, w, v[w],
                         model[p][w]);
    }
}

static void random_graphs(uint64_t seed, const nu_graph_options *o)
{
    for (int p = 0; p < POOL; p++) {
        NT_OK(nu_buffer_new(dev, W * 4, p % 3 == 0 ? NU_STORAGE_PRIVATE : NU_STORAGE_SHARED, &pool[p]));
        for (int w = 0; w < W; w++)
            model[p][w] = (float)(p * 100 + w);
        NT_OK(nu_buffer_write(pool[p], 0, model[p], sizeof model[p]));
    }
    for (int prog = 0; prog < PROGRAMS; prog++) {
        /* Fixed operands are pool buffers 0..fixed-1; slots are bound to buffers fixed..POOL-1,
         * each slot to a different one, so that no binding aliases another. */
        int fixed = 3 + (int)(nt_rand(&seed) % 2), slots = 1 + (int)(nt_rand(&seed) % 2);
        model_node nodes[NODES];
        int count = 2 + (int)(nt_rand(&seed) % (NODES - 1));
        random_nodes(&seed, nodes, count, fixed, slots);
        int bound[2];
        for (int s = 0; s < slots; s++)
            bound[s] = fixed + s;
        nu_commands *c;
        NT_OK(nu_graph_record(dev, &c));
        uint32_t slot_ids[2];
        for (int s = 0; s < slots; s++)
            NT_OK(nu_graph_slot(c, pool[bound[s]], &slot_ids[s]));
        record_nodes(c, nodes, count, bound);
        nu_graph *g = build_with(c, o);
        for (int step = 0; step < STEPS; step++) {
            int what = (int)(nt_rand(&seed) % 4);
            if (what == 0) {
                /* Rebind the slots to distinct buffers of the slot range. */
                int first = (int)(nt_rand(&seed) % (POOL - fixed));
                for (int s = 0; s < slots; s++) {
                    bound[s] = fixed + (first + s) % (POOL - fixed);
                    NT_OK(nu_graph_bind(g, slot_ids[s], pool[bound[s]], 0));
                }
            }
            if (what <= 1) {
                NT_OK(nu_graph_launch(g));
                model_run(nodes, count, bound);
            } else if (what == 2) {
                /* An ordinary command buffer of random work over the whole pool. */
                model_node other[4];
                random_nodes(&seed, other, 4, POOL, 0);
                NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
                record_nodes(c, other, 4, bound);
                NT_OK(nu_commands_commit(c));
                NT_OK(nu_commands_free(c));
                model_run(other, 4, bound);
            } else {
                NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
                NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));
                check_pool(prog, step);
            }
        }
        NT_OK(nu_graph_free(g));
        NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));
        check_pool(prog, STEPS);
    }
    for (int p = 0; p < POOL; p++)
        nu_buffer_free(pool[p]);
}

static void random_graphs_against_a_model(void **state)
{
    random_graphs(12345, NULL);
    /* Without the level pass: the same programs' results in the recording's order. */
    random_graphs(12345, &(nu_graph_options){.schedule = NU_GRAPH_SCHEDULE_IN_ORDER});
    if (dev_update_after_bind() && !rerecord_run()) /* slots through descriptor sets */
        random_graphs(777, &(nu_graph_options){.slots = NU_GRAPH_SLOTS_SETS});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(launch_many_times),
        cmocka_unit_test(independent_nodes_share_a_level),
        cmocka_unit_test(in_order_schedule),
        cmocka_unit_test(parameters_change_per_launch),
        cmocka_unit_test(op_parameter),
        cmocka_unit_test(slots_rebind),
        cmocka_unit_test(launches_ordered_with_commits),
        cmocka_unit_test(ops_in_a_graph),
        cmocka_unit_test(freed_buffers),
        cmocka_unit_test(misuse),
        cmocka_unit_test(launches_from_threads),
        cmocka_unit_test(random_graphs_against_a_model),
        cmocka_unit_test(lost_device),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
