/* test_guard.c: the CPU-access state machine of buffers (src/guard.c), driven directly: its
 * GPU side (command buffers) arrives with the commands issue. */
#include "harness.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "memory/guard.h"

static nu__fence fence(uint64_t v) { return (nu__fence){.queue = 0, .value = v}; }

/* The reference's own test: a buffer that is never idle (as weights read by every pipelined
 * step) keeps only the fences of uses still pending, not one per command buffer since it was
 * idle. */
static void completed_fences_leave_buffers_that_stay_in_use(void **state)
{
    nu__guard g;
    NT_OK(nu__guard_init(&g, NULL));
    /* A long-running use keeps the buffer busy throughout. */
    nu__fence long_use = fence(1);
    nu__guard_acquire(&g, false);
    NT_OK(nu__guard_record(&g, long_use, false));
    nu__guard_committed(&g);
    nu__guard_submitted(&g, false);
    for (uint64_t i = 0; i < 1000; i++) {
        nu__fence f = fence(2 + i);
        nu__guard_acquire(&g, true);
        NT_OK(nu__guard_record(&g, f, true));
        nu__guard_committed(&g);
        nu__guard_submitted(&g, true);
        nu__guard_release_use(&g, true, &f);
    }
    bool writer;
    assert_int_equal(nu__guard_kept_fences(&g, &writer), 1);
    assert_false(writer);
    nu__guard_release_use(&g, false, &long_use);
    assert_true(nu__guard_idle(&g));
    nu__guard_fini(&g);
}

static void pending_fences_follow_reads_and_writes(void **state)
{
    nu__guard g;
    NT_OK(nu__guard_init(&g, NULL));
    nu__fence out[4];
    assert_int_equal(nu__guard_pending_fences(&g, true, out, 4), 0);
    /* A reader: later writes wait for it, later reads do not. */
    nu__guard_acquire(&g, false);
    NT_OK(nu__guard_record(&g, fence(10), false));
    assert_int_equal(nu__guard_pending_fences(&g, false, out, 4), 0);
    assert_int_equal(nu__guard_pending_fences(&g, true, out, 4), 1);
    assert_int_equal(out[0].value, 10);
    /* A writer: reads wait for the writer only; writes for everyone. */
    nu__guard_acquire(&g, true);
    NT_OK(nu__guard_record(&g, fence(11), true));
    assert_int_equal(nu__guard_pending_fences(&g, false, out, 4), 1);
    assert_int_equal(out[0].value, 11);
    assert_int_equal(nu__guard_pending_fences(&g, true, out, 4), 2);
    assert_true(nu__guard_has_writers(&g));
    size_t all, writing;
    nu__guard_unsubmitted(&g, &all, &writing);
    assert_int_equal(all, 2);
    assert_int_equal(writing, 1);
    assert_false(nu__guard_committed_uses(&g));
    nu__guard_committed(&g);
    nu__guard_committed(&g);
    assert_true(nu__guard_committed_uses(&g));
    nu__guard_submitted(&g, false);
    nu__guard_submitted(&g, true);
    nu__guard_unsubmitted(&g, &all, &writing);
    assert_int_equal(all + writing, 0);
    nu__fence f11 = fence(11), f10 = fence(10);
    nu__guard_release_use(&g, true, &f11);
    assert_false(nu__guard_has_writers(&g));
    assert_int_equal(nu__guard_pending_fences(&g, false, out, 4), 0);
    assert_false(nu__guard_idle(&g));
    nu__guard_release_use(&g, false, &f10);
    assert_true(nu__guard_idle(&g));
    assert_int_equal(nu__guard_pending_fences(&g, true, out, 4), 0);
    nu__guard_fini(&g);
}

struct later {
    nu__guard *g;
    nu__fence f;
};

static void *release_later(void *p)
{
    struct later *l = p;
    usleep(50 * 1000);
    nu__guard_release_use(l->g, true, &l->f);
    return NULL;
}

static void waits_are_bounded_and_wake_up(void **state)
{
    nu__guard g;
    NT_OK(nu__guard_init(&g, NULL));
    NT_OK(nu__guard_wait_idle(&g, 0)); /* idle: returns at once */
    nu__guard_acquire(&g, true);
    NT_OK(nu__guard_record(&g, fence(1), true));
    nu__guard_committed(&g);
    nu__guard_submitted(&g, true);
    NT_STATUS(NU_ERROR_TIMEOUT, nu__guard_wait_idle(&g, 1000000));
    struct later l = {&g, fence(1)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, &l), 0);
    NT_OK(nu__guard_wait_idle(&g, UINT64_MAX));
    assert_true(nu__guard_idle(&g));
    pthread_join(t, NULL);
    nu__guard_fini(&g);
}

static int destroyed;
static void on_destroy(nu__guard *g)
{
    destroyed++;
    nu__guard_fini(g);
}

static void references_destroy_once(void **state)
{
    nu__guard g;
    NT_OK(nu__guard_init(&g, on_destroy));
    nu__guard_retain(&g);
    nu__guard_release(&g);
    assert_int_equal(destroyed, 0);
    nu__guard_release(&g);
    assert_int_equal(destroyed, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(completed_fences_leave_buffers_that_stay_in_use),
        cmocka_unit_test(pending_fences_follow_reads_and_writes),
        cmocka_unit_test(waits_are_bounded_and_wake_up),
        cmocka_unit_test(references_destroy_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
