/* test_host_oom.c: every host allocation site fails in turn (SQLite's test_malloc.c, libuv's
 * test-loop-oom.c). Each call that meets a failure must return an error status; afterwards
 * nothing has leaked (the wrapper's count of live allocations is back to its baseline) and
 * the device is still usable. Buffer work, device open, and mapped-file work (safetensors
 * open, moves to the device on the zero-copy and the staged paths, GPU use of a mapping). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/host.h"
#include "exec/commands.h"
#include "memory/buffer.h"

/* Work touching every allocating path of buffers and the allocator. Returns NU_OK or the
 * first failure's status; frees whatever it made either way. */
static nu_status scenario(nu_device *d)
{
    nu_buffer *b[6] = {0};
    static const size_t sizes[6] = {0, 100, 5000, 300000, 3 << 20, 40 << 20};
    nu_status st = NU_OK;
    uint8_t data[512];
    memset(data, 0x5A, sizeof data);
    for (int i = 0; i < 6 && st == NU_OK; i++)
        st = nu_buffer_new(d, sizes[i], i % 2 ? NU_STORAGE_PRIVATE : NU_STORAGE_SHARED, &b[i]);
    for (int i = 1; i < 6 && st == NU_OK; i++)
        st = nu_buffer_write(b[i], 0, data, sizeof data < sizes[i] ? sizeof data : sizes[i]);
    nu_buffer *c = NULL;
    if (st == NU_OK)
        st = nu_buffer_from(d, data, sizeof data, NU_STORAGE_PRIVATE, &c);
    uint8_t out[512];
    if (st == NU_OK)
        st = nu_buffer_read(c, 0, out, sizeof out);
    if (st == NU_OK && memcmp(out, data, sizeof out) != 0)
        st = NU_ERROR_VULKAN;
    nu_buffer_free(c);
    for (int i = 0; i < 6; i++)
        nu_buffer_free(b[i]);
    return st;
}

/* A graph: recorded (a fill, a dispatch with a parameter, one through a slot), built, bound,
 * launched several times and freed. The buffers are the caller's. */
static nu_status graph_scenario(nu_device *d, nu_buffer *x, nu_buffer *y, nu_buffer *z)
{
    nu_kernel *axpy = NULL, *add = NULL;
    nu_commands *c = NULL;
    nu_graph *g = NULL;
    uint32_t slot = 0, param = 0, count = 64;
    static const uint32_t groups[3] = {1, 1, 1};
    struct {
        float alpha;
        uint32_t count;
    } push = {1.0f, 64};
    nu_status st = nu_kernel_builtin(d, "axpy_f32", &axpy);
    if (st == NU_OK)
        st = nu_kernel_builtin(d, "add_f32", &add);
    if (st == NU_OK)
        st = nu_graph_record(d, &c);
    if (st == NU_OK)
        st = nu_commands_fill(c, y, 0, 256, 0);
    if (st == NU_OK) {
        nu_binding b[2] = {{y, NU_ACCESS_READ_WRITE, 0, 0}, {x, NU_ACCESS_READ, 0, 0}};
        st = nu_commands_dispatch(c, axpy, groups, b, 2, &push, sizeof push);
    }
    if (st == NU_OK)
        st = nu_graph_param(c, 0, 4, &param);
    if (st == NU_OK)
        st = nu_graph_slot(c, z, &slot);
    if (st == NU_OK) {
        nu_binding b[3] = {{z, NU_ACCESS_WRITE, 0, 0}, {y, NU_ACCESS_READ, 0, 0}, {x, NU_ACCESS_READ, 0, 0}};
        st = nu_commands_dispatch(c, add, groups, b, 3, &count, sizeof count);
    }
    if (st == NU_OK && (st = nu_graph_new(c, &g)) == NU_OK)
        c = NULL;
    for (int i = 0; i < 4 && st == NU_OK; i++) {
        float alpha = (float)(i + 1);
        st = nu_graph_set_param(g, param, &alpha, sizeof alpha);
        if (st == NU_OK)
            st = nu_graph_bind(g, slot, i % 2 ? y : z, 0);
        if (st == NU_OK)
            st = nu_graph_launch(g);
    }
    if (st == NU_OK)
        st = nu_graph_wait(g, NU_WAIT_FOREVER);
    float out[64];
    if (st == NU_OK)
        st = nu_buffer_read(z, 0, out, sizeof out);
    if (st == NU_OK && out[5] != 3 * 1.0f + 1.0f) /* launch 3 (alpha 3) wrote z = 3x + x, x = 1 */
        st = NU_ERROR_VULKAN;
    nu_graph_free(g);
    nu_commands_free(c);
    nu_kernel_free(axpy);
    nu_kernel_free(add);
    return st;
}

static void every_allocation_in_graph_work_fails_cleanly(void **state)
{
    nu_device *d = nt_open();
    nu_buffer *x, *y, *z;
    float ones[64];
    for (int i = 0; i < 64; i++)
        ones[i] = 1;
    NT_OK(nu_buffer_from(d, ones, sizeof ones, NU_STORAGE_SHARED, &x));
    NT_OK(nu_buffer_new(d, sizeof ones, NU_STORAGE_PRIVATE, &y));
    NT_OK(nu_buffer_new(d, sizeof ones, NU_STORAGE_SHARED, &z));
    /* Warm up: the kernels (and the one reading its push constants from memory) are cached. */
    NT_OK(graph_scenario(d, x, y, z));
    NT_OK(nu_device_wait_idle(d, NU_WAIT_FOREVER));
    nu__commands_trim(d);
    nu_memory_clear_cache(d);
    int64_t baseline = nu__host_live();
    int failures = 0;
    for (long k = 0;; k++) {
        nu__host_fail_after(k, 0);
        nu_status st = graph_scenario(d, x, y, z);
        int failed = nu__host_failed();
        nu__host_fail_after(-1, 0);
        NT_OK(nu_device_wait_idle(d, NU_WAIT_FOREVER));
        nu__commands_trim(d);
        nu_memory_clear_cache(d);
        if (!failed) {
            NT_OK(st);
            break;
        }
        failures++;
        if (st != NU_ERROR_HOST_OUT_OF_MEMORY)
            fail_msg("allocation %ld failed but the graph scenario returned %s: %s", k, nu_status_string(st),
                     nu_error_message(NULL));
        assert_int_equal(nu__host_live(), baseline);
        assert_false(nu_buffer_in_use(z));
    }
    print_message("graph work: %d allocation sites failed in turn\n", failures);
    assert_true(failures >= 5);
    NT_OK(graph_scenario(d, x, y, z));
    nu_buffer_free(x);
    nu_buffer_free(y);
    nu_buffer_free(z);
    nt_close(d);
}

static void usable(nu_device *d)
{
    NT_OK(scenario(d));
}

static void every_allocation_in_buffer_work_fails_cleanly(void **state)
{
    nu_device *d = nt_open();
    /* Warm up: lazily created parts (staging, placeholder, the allocator's tables, the first
     * chunk of buffer slots) exist before the baseline is taken. */
    for (int i = 0; i < 4; i++) {
        nu_buffer *e;
        NT_OK(nu_buffer_new(d, 0, NU_STORAGE_SHARED, &e));
        nu_buffer_free(e);
    }
    usable(d);
    nu_memory_clear_cache(d);
    int64_t baseline = nu__host_live();
    int failures = 0;
    for (long k = 0;; k++) {
        nu__host_fail_after(k, 0);
        nu_status st = scenario(d);
        int failed = nu__host_failed();
        nu__host_fail_after(-1, 0);
        nu_memory_clear_cache(d);
        if (!failed) {
            NT_OK(st);
            break;
        }
        failures++;
        if (st != NU_ERROR_HOST_OUT_OF_MEMORY)
            fail_msg("allocation %ld failed but the scenario returned %s: %s", k, nu_status_string(st),
                     nu_error_message(NULL));
        assert_int_equal(nu__host_live(), baseline);
        nu_memory_stats s;
        nu_memory_get_stats(d, &s);
        assert_int_equal(s.active, 0);
        assert_int_equal(s.buffers, 0);
        usable(d);
        nu_memory_clear_cache(d);
        assert_int_equal(nu__host_live(), baseline);
    }
    print_message("buffer work: %d allocation sites failed in turn\n", failures);
    assert_true(failures >= 3);
    nt_close(d);
}

/* The pool of buffer slots grows by chunks: a chunk that cannot be allocated fails the
 * buffer's creation cleanly, and the next try makes it. */
static void a_slot_chunk_that_cannot_be_allocated_fails_cleanly(void **state)
{
    nu_device *d = nt_open();
    size_t total, free_slots;
    nu_buffer *first;
    NT_OK(nu_buffer_new(d, 0, NU_STORAGE_SHARED, &first));
    nu__buffer_slots_count(d, &total, &free_slots);
    nu_buffer **b = calloc(free_slots + 1, sizeof *b);
    assert_non_null(b);
    size_t n = free_slots;
    for (size_t i = 0; i < n; i++)
        NT_OK(nu_buffer_new(d, 0, NU_STORAGE_SHARED, &b[i]));
    int64_t live = nu__host_live();
    nu_buffer *extra = (nu_buffer *)1;
    nu__host_fail_after(0, 0);
    nu_status st = nu_buffer_new(d, 0, NU_STORAGE_SHARED, &extra);
    nu__host_fail_after(-1, 0);
    NT_STATUS(NU_ERROR_HOST_OUT_OF_MEMORY, st);
    assert_null(extra);
    assert_non_null(strstr(nu_error_message(NULL), "buffer handle"));
    assert_int_equal(nu__host_live(), live);
    size_t total_now;
    nu__buffer_slots_count(d, &total_now, &free_slots);
    assert_int_equal(total_now, total);
    NT_OK(nu_buffer_new(d, 0, NU_STORAGE_SHARED, &extra)); /* now it is made */
    nu__buffer_slots_count(d, &total_now, &free_slots);
    assert_true(total_now > total);
    NT_OK(nu_buffer_free(extra));
    for (size_t i = 0; i < n; i++)
        NT_OK(nu_buffer_free(b[i]));
    NT_OK(nu_buffer_free(first));
    free(b);
    nt_close(d);
}

static void every_allocation_in_device_open_fails_cleanly(void **state)
{
    int64_t baseline = nu__host_live();
    int failures = 0;
    for (long k = 0;; k++) {
        nu_device *d = (nu_device *)1;
        nu_device_desc desc = {.validation = true};
        nu__host_fail_after(k, 0);
        nu_status st = nu_device_open(&desc, &d);
        int failed = nu__host_failed();
        nu__host_fail_after(-1, 0);
        if (!failed) {
            NT_OK(st);
            usable(d);
            nt_close(d);
            break;
        }
        failures++;
        if (st == NU_OK) {
            /* The failed allocation was optional (measured, and the device works). */
            usable(d);
            nt_close(d);
        } else {
            assert_null(d);
            assert_true(strlen(nu_error_message(NULL)) > 0);
        }
        assert_int_equal(nu__host_live(), baseline);
    }
    print_message("device open: %d allocation sites failed in turn\n", failures);
    assert_true(failures >= 3);
}

/* Mapped-file work: a safetensors file opened, its tensors moved to the device in small chunks
 * on two threads, the mapped file bound to a GPU copy; every byte checked. */
static const char *weights_path(void)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/oom_%d.safetensors", nt_tmp_dir(), (int)getpid());
    return path;
}

static nu_status mapped_scenario(nu_device *d, const uint8_t *want, size_t size)
{
    nu_safetensors *f = NULL;
    nu_buffer *dev = NULL, *copy = NULL;
    nu_commands *c = NULL;
    uint8_t *out = malloc(size);
    nu_status st = nu_safetensors_open(d, weights_path(), &f);
    uint64_t offsets[2];
    if (st == NU_OK)
        st = nu_safetensors_to_device(f, NULL, 0, &(nu_move_options){.chunk_size = 8192, .threads = 2}, &dev, offsets);
    if (st == NU_OK)
        st = nu_buffer_read(dev, offsets[0], out, size);
    if (st == NU_OK && memcmp(out, want, size) != 0)
        st = NU_ERROR_VULKAN;
    if (st == NU_OK)
        st = nu_buffer_new(d, size, NU_STORAGE_PRIVATE, &copy);
    if (st == NU_OK)
        st = nu_commands_new(d, NU_QUEUE_COMPUTE, &c);
    if (st == NU_OK)
        st = nu_commands_copy(c, copy, 0, nu_safetensors_buffer(f), nu_safetensors_tensor(f, 0)->offset, size);
    if (st == NU_OK)
        st = nu_commands_commit(c);
    if (st == NU_OK)
        st = nu_commands_wait(c, NU_WAIT_FOREVER);
    if (st == NU_OK)
        st = nu_buffer_read(copy, 0, out, size);
    if (st == NU_OK && memcmp(out, want, size) != 0)
        st = NU_ERROR_VULKAN;
    nu_commands_free(c);
    nu_buffer_free(copy);
    nu_buffer_free(dev);
    nu_safetensors_close(f);
    free(out);
    nu_device_wait_idle(d, NU_WAIT_FOREVER);
    return st;
}

static void mapped_files(nu_device *d, const char *what)
{
    enum { SIZE = 40000 };
    static uint8_t bytes[SIZE];
    uint64_t seed = 7;
    for (size_t i = 0; i < SIZE; i++)
        bytes[i] = (uint8_t)nt_rand(&seed);
    nu_tensor_write w[2] = {{.name = "a", .dtype = NU_DTYPE_U8, .rank = 1, .shape = {SIZE}, .data = bytes},
                            {.name = "b", .dtype = NU_DTYPE_F32, .rank = 2, .shape = {3, 5}, .data = bytes}};
    NT_OK(nu_safetensors_write(weights_path(), w, 2, NULL, NULL, 0));
    /* Warm-up (the first chunk of buffer slots is made), then the baseline. */
    for (int i = 0; i < 4; i++) {
        nu_buffer *e;
        NT_OK(nu_buffer_new(d, 0, NU_STORAGE_SHARED, &e));
        nu_buffer_free(e);
    }
    NT_OK(mapped_scenario(d, bytes, SIZE));
    nu_memory_clear_cache(d);
    nu__commands_trim(d); /* spare command objects: as many as were alive at once */
    int64_t baseline = nu__host_live();
    int failures = 0;
    for (long k = 0;; k++) {
        nu__host_fail_after(k, 0);
        nu_status st = mapped_scenario(d, bytes, SIZE);
        int failed = nu__host_failed();
        nu__host_fail_after(-1, 0);
        nu_memory_clear_cache(d);
        nu__commands_trim(d);
        if (!failed) {
            NT_OK(st);
            break;
        }
        failures++;
        if (st != NU_ERROR_HOST_OUT_OF_MEMORY)
            fail_msg("%s: allocation %ld failed but the scenario returned %s: %s", what, k, nu_status_string(st),
                     nu_error_message(NULL));
        /* Bookkeeping that grows with the most pieces alive at once (the allocator's entries,
         * guards' fence lists: concurrent moves vary with timing) may stay until the device
         * closes; the caller checks that closing returns every allocation. */
        if (nu__host_live() > baseline + 8)
            fail_msg("%s: after allocation %ld failed, %lld host allocations are live, %lld before", what, k,
                     (long long)nu__host_live(), (long long)baseline);
        nu_memory_stats s;
        nu_memory_get_stats(d, &s);
        assert_int_equal(s.active, 0);
        assert_int_equal(s.buffers, 0);
    }
    NT_OK(mapped_scenario(d, bytes, SIZE));
    print_message("%s: %d allocation sites failed in turn\n", what, failures);
    assert_true(failures >= 5);
    unlink(weights_path());
}

static void every_allocation_in_mapped_file_work_fails_cleanly(void **state)
{
    int64_t before = nu__host_live();
    nu_device *d = nt_open();
    mapped_files(d, nu_device_get_info(d)->features[NU_FEATURE_EXTERNAL_HOST_MEMORY] ? "mapped files (zero-copy)"
                                                                                   : "mapped files");
    nt_close(d);
    assert_int_equal(nu__host_live(), before); /* nothing leaked */
    setenv("NUVEC_NO_HOST_IMPORT", "1", 1);   /* the staged path */
    d = nt_open();
    unsetenv("NUVEC_NO_HOST_IMPORT");
    mapped_files(d, "mapped files (staged)");
    nt_close(d);
    assert_int_equal(nu__host_live(), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_allocation_in_buffer_work_fails_cleanly),
        cmocka_unit_test(a_slot_chunk_that_cannot_be_allocated_fails_cleanly),
        cmocka_unit_test(every_allocation_in_device_open_fails_cleanly),
        cmocka_unit_test(every_allocation_in_mapped_file_work_fails_cleanly),
        cmocka_unit_test(every_allocation_in_graph_work_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
