/* test_grid.c: persistent dispatches (src/ops/grid.h, kernels/graph/grid_sync.glsl) on lavapipe:
 * the chain kernel's dependent steps in one dispatch against a CPU model, with one workgroup
 * (workgroup barriers) and with several (the device-wide barrier, every step reading what other
 * workgroups wrote), in command buffers and in a graph launched again and again (the sync words
 * reset themselves); the timeout (a barrier waiting for workgroups that do not exist gives up
 * and the host gets NU_ERROR_TIMEOUT, never a hang; the words work again after the check);
 * lavapipe's co-residency (one workgroup more than nu_kernel_resident_groups times out), and bad
 * input. */
#include "harness.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/grid.h"
#include "vk/device.h"

/* Short spin bound for the tests that expect a timeout (polls: well under a second). */
#define SHORT_SPIN (1u << 14)

static nu_device *dev;
static nu_buffer *sync_words;

static int setup(void **state)
{
    dev = nt_open();
    NT_OK(nu__grid_sync_new(dev, &sync_words));
    return 0;
}

static int teardown(void **state)
{
    nu_buffer_free(sync_words);
    nu_memory_stats s;
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.active, 0);
    nt_close(dev);
    return 0;
}

static uint32_t resident(void)
{
    nu_kernel *k;
    NT_OK(nu__op_chain_kernel(dev, &k));
    uint32_t n = nu_kernel_resident_groups(k);
    assert_true(n >= 1);
    return n;
}

typedef struct chain_bufs {
    nu_buffer *in, *b, *x;
    uint32_t count;
} chain_bufs;

static float in_value(uint32_t i) { return 0.5f * (float)i; }
static float b_value(uint32_t i) { return (float)(i % 7) + 1.0f; }

static chain_bufs make(uint32_t count)
{
    chain_bufs c = {.count = count};
    float *v = malloc(count * sizeof *v), *w = malloc(count * sizeof *w);
    assert_non_null(v);
    assert_non_null(w);
    for (uint32_t i = 0; i < count; i++) {
        v[i] = in_value(i);
        w[i] = b_value(i);
    }
    NT_OK(nu_buffer_from(dev, v, count * sizeof *v, NU_STORAGE_SHARED, &c.in));
    NT_OK(nu_buffer_from(dev, w, count * sizeof *w, NU_STORAGE_SHARED, &c.b));
    NT_OK(nu_buffer_new(dev, 2 * (size_t)count * sizeof(float), NU_STORAGE_SHARED, &c.x));
    free(v);
    free(w);
    return c;
}

static void unmake(chain_bufs *c)
{
    nu_buffer_free(c->in);
    nu_buffer_free(c->b);
    nu_buffer_free(c->x);
}

static nu__chain desc(const chain_bufs *c, uint32_t steps, uint32_t shift, uint32_t groups)
{
    return (nu__chain){.in = c->in, .b = c->b, .x = c->x, .sync = sync_words, .count = c->count, .steps = steps,
                       .shift = shift, .groups = groups};
}

/* The result against the CPU model (every value an exact sum of halves). */
static void expect(const chain_bufs *c, uint32_t steps, uint32_t shift)
{
    uint32_t n = c->count;
    float *prev = malloc(n * sizeof *prev), *next = malloc(n * sizeof *next), *got = malloc(n * sizeof *got);
    assert_non_null(prev);
    assert_non_null(next);
    assert_non_null(got);
    for (uint32_t i = 0; i < n; i++)
        prev[i] = in_value(i);
    for (uint32_t s = 0; s < steps; s++) {
        for (uint32_t i = 0; i < n; i++)
            next[i] = prev[(i + shift) % n] + b_value(i);
        float *t = prev;
        prev = next;
        next = t;
    }
    NT_OK(nu_buffer_read(c->x, (size_t)((steps - 1) % 2) * n * sizeof(float), got, n * sizeof(float)));
    for (uint32_t i = 0; i < n; i++)
        if (got[i] != prev[i])
            fail_msg("count %u, %u steps, shift %u: element %u is %g, expected %g", n, steps, shift, i, got[i], prev[i]);
    free(prev);
    free(next);
    free(got);
}

/* Records and runs one chain, then checks the sync words: the status of nu__grid_check. */
static nu_status run(const nu__chain *ch)
{
    nu_commands *c;
    NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu__op_chain(c, ch));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    NT_OK(nu_commands_free(c));
    return nu__grid_check(ch->sync);
}

static void chain_one_workgroup(void **state)
{
    static const uint32_t counts[] = {1, 64, 1000};
    static const uint32_t steps[] = {1, 2, 7, 40};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        chain_bufs c = make(counts[i]);
        for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
            uint32_t shift = counts[i] > 17 ? 17 : 0;
            nu__chain ch = desc(&c, steps[s], shift, 1);
            NT_OK(run(&ch));
            expect(&c, steps[s], shift);
        }
        unmake(&c);
    }
}

static void chain_device_barrier(void **state)
{
    uint32_t g = resident();
    if (g < 2) {
        print_message("one workgroup resident on this device: the device barrier is not exercised\n");
        return;
    }
    if (g > 4)
        g = 4; /* each barrier waits for every thread: keep lavapipe's run short */
    /* 1: one workgroup with elements, the others with none; 64: slices of 32; 1000: several
     * elements a thread. A shift makes each step read other workgroups' elements. */
    static const uint32_t counts[] = {1, 64, 1000};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        chain_bufs c = make(counts[i]);
        for (uint32_t steps = 1; steps <= 33; steps += 16) {
            uint32_t shift = counts[i] > 1 ? counts[i] / 2 + 1 : 0;
            nu__chain ch = desc(&c, steps, shift, g);
            NT_OK(run(&ch));
            expect(&c, steps, shift);
        }
        unmake(&c);
    }
}

/* Recorded once, launched many times: the barrier's words are left ready by every launch. */
static void chain_in_a_graph(void **state)
{
    uint32_t g = resident() > 1 ? 2 : 1;
    chain_bufs c = make(64);
    nu_commands *rec;
    NT_OK(nu_graph_record(dev, &rec));
    nu__chain ch = desc(&c, 25, 5, g);
    NT_OK(nu__op_chain(rec, &ch));
    nu_graph *graph;
    NT_OK(nu_graph_new(rec, &graph));
    assert_int_equal(nu_graph_node_count(graph), 1);
    for (int i = 0; i < 6; i++) {
        NT_OK(nu_buffer_write(c.x, 0, (float[2]){-1, -1}, 8)); /* stale values would show */
        NT_OK(nu_graph_launch(graph));
        NT_OK(nu_graph_wait(graph, NU_WAIT_FOREVER));
        NT_OK(nu__grid_check(sync_words));
        expect(&c, 25, 5);
    }
    NT_OK(nu_graph_free(graph));
    unmake(&c);
}

/* Barriers that wait for one workgroup more than the dispatch has give up after the spin
 * bound: NU_ERROR_TIMEOUT with its message, and the words work again afterwards. */
static void timeout_instead_of_a_hang(void **state)
{
    chain_bufs c = make(64);
    uint32_t g = resident() > 1 ? 2 : 1;
    nu__chain ch = desc(&c, 6, 3, g);
    ch.sync_groups = g + 1;
    ch.spin_limit = SHORT_SPIN;
    NT_STATUS(NU_ERROR_TIMEOUT, run(&ch));
    assert_non_null(strstr(nu_error_message(dev), "grid barrier timed out: workgroups not co-resident"));
    NT_OK(nu__grid_check(sync_words)); /* the check zeroed the words */
    ch.sync_groups = 0;
    ch.spin_limit = 0;
    NT_OK(run(&ch));
    expect(&c, 6, 3);
    unmake(&c);
}

/* A timed-out barrier leaves the error word set: later dispatches fail at once (they never
 * count on the broken arrival count) until the host checks. */
static void error_is_sticky(void **state)
{
    chain_bufs c = make(64);
    nu__chain bad = desc(&c, 3, 0, 1);
    bad.sync_groups = 2;
    bad.spin_limit = SHORT_SPIN;
    nu__chain good = desc(&c, 3, 0, resident() > 1 ? 2 : 1);
    nu_commands *cmd;
    NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &cmd));
    NT_OK(nu__op_chain(cmd, &bad));
    NT_OK(nu__op_chain(cmd, &good));
    NT_OK(nu_commands_commit(cmd));
    NT_OK(nu_commands_wait(cmd, NU_WAIT_FOREVER));
    NT_OK(nu_commands_free(cmd));
    NT_STATUS(NU_ERROR_TIMEOUT, nu__grid_check(sync_words));
    NT_OK(run(&good));
    expect(&c, 3, 0);
    unmake(&c);
}

/* lavapipe runs a dispatch's workgroups on its compute threads, one at a time each: one
 * workgroup more than the threads cannot all be resident, and the barrier must time out. This
 * checks that nu_kernel_resident_groups's count for lavapipe is exact, not merely safe. Only
 * where the count came from the CPUs (all of them usable) and is below Mesa's thread cap. */
static void lavapipe_one_more_times_out(void **state)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    bool all_cpus = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == cpus; /* Mesa counts one way */
    if (!strstr(dev->info.driver_name, "llvmpipe") || getenv("LP_NUM_THREADS") || getenv("NUVEC_RESIDENT_GROUPS") ||
        cpus >= 16 || !all_cpus) {
        print_message("not lavapipe with its default threads: skipped\n");
        return;
    }
    uint32_t g = resident() + 1;
    char v[16];
    snprintf(v, sizeof v, "%u", g);
    setenv("NUVEC_RESIDENT_GROUPS", v, 1); /* let the op dispatch one more than the rule allows */
    assert_int_equal(resident(), g);
    chain_bufs c = make(64);
    nu__chain ch = desc(&c, 4, 1, g);
    ch.spin_limit = SHORT_SPIN;
    nu_status st = run(&ch);
    unsetenv("NUVEC_RESIDENT_GROUPS");
    NT_STATUS(NU_ERROR_TIMEOUT, st);
    ch.groups = g - 1;
    ch.spin_limit = 0;
    NT_OK(run(&ch));
    expect(&c, 4, 1);
    unmake(&c);
}

static void bad_input(void **state)
{
    chain_bufs c = make(64);
    nu_commands *cmd;
    NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &cmd));
    nu__chain ch = desc(&c, 4, 1, 1);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu__op_chain(NULL, &ch));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu__op_chain(cmd, NULL));
    nu__chain b = ch;
    b.sync = NULL;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu__op_chain(cmd, &b));
    b = ch;
    b.steps = 0;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu__op_chain(cmd, &b));
    b = ch;
    b.shift = 64;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu__op_chain(cmd, &b));
    b = ch;
    b.groups = 0;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu__op_chain(cmd, &b));
    b = ch;
    b.groups = resident() + 1; /* not co-resident: refused, not dispatched */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu__op_chain(cmd, &b));
    assert_non_null(strstr(nu_error_message(dev), "cannot be co-resident"));
    b = ch;
    b.groups = resident();
    b.sync_groups = b.groups - 1 + (b.groups == 1); /* below groups (or equal with 1) */
    if (b.groups > 1)
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu__op_chain(cmd, &b));
    b = ch;
    b.count = 65; /* more floats than the buffers hold */
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu__op_chain(cmd, &b));
    NT_OK(nu_commands_free(cmd));
    assert_int_equal(nu_kernel_resident_groups(NULL), 0);
    setenv("NUVEC_RESIDENT_GROUPS", "3", 1);
    assert_int_equal(resident(), 3);
    setenv("NUVEC_RESIDENT_GROUPS", "x", 1); /* not a number: the rule */
    uint32_t rule = resident();
    unsetenv("NUVEC_RESIDENT_GROUPS");
    assert_int_equal(resident(), rule);
    unmake(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chain_one_workgroup),
        cmocka_unit_test(chain_device_barrier),
        cmocka_unit_test(chain_in_a_graph),
        cmocka_unit_test(timeout_instead_of_a_hang),
        cmocka_unit_test(error_is_sticky),
        cmocka_unit_test(lavapipe_one_more_times_out),
        cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
