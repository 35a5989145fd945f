/* test_buffer.c: buffers on a real device (lavapipe in CI): storage kinds, read/write, the
 * cache seen through buffers, limits and statistics, bad input, and the CPU access rules. */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/buffer.h"

static nu_device *dev;

static int setup(void **state)
{
    dev = nt_open();
    return 0;
}

static int teardown(void **state)
{
    nt_close(dev);
    return 0;
}

/* Each test starts from an empty allocator with default limits. */
static int reset(void **state)
{
    nu_memory_clear_cache(dev);
    nu_memory_set_cache_limit(dev, UINT64_MAX, NULL);
    nu_memory_reset_peak(dev);
    nu_memory_stats s;
    nu_memory_get_stats(dev, &s);
    assert_int_equal(s.active, 0);
    return 0;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)nt_rand(&seed);
}

static void roundtrip(nu_storage storage, size_t size)
{
    nu_buffer *b;
    NT_OK(nu_buffer_new(dev, size, storage, &b));
    assert_int_equal(nu_buffer_size(b), size);
    assert_int_equal(nu_buffer_storage(b), storage);
    assert_ptr_equal(nu_buffer_device(b), dev);
    uint8_t *in = malloc(size + 1), *out = malloc(size + 1);
    fill(in, size, size * 31 + storage);
    NT_OK(nu_buffer_write(b, 0, in, size));
    memset(out, 0xAA, size);
    NT_OK(nu_buffer_read(b, 0, out, size));
    assert_memory_equal(in, out, size);
    /* A part in the middle. */
    if (size > 64) {
        uint8_t part[32];
        fill(part, sizeof part, 99);
        NT_OK(nu_buffer_write(b, size / 2, part, sizeof part));
        memcpy(in + size / 2, part, sizeof part);
        NT_OK(nu_buffer_read(b, 0, out, size));
        assert_memory_equal(in, out, size);
        NT_OK(nu_buffer_read(b, size / 2 + 3, out, 7));
        assert_memory_equal(in + size / 2 + 3, out, 7);
    }
    free(in);
    free(out);
    NT_OK(nu_buffer_free(b));
}

static void shared_and_private_round_trip(void **state)
{
    static const size_t sizes[] = {1, 3, 256, 4097, 65536 + 5, (4 << 20) + 123, 9 << 20};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        roundtrip(NU_STORAGE_SHARED, sizes[i]);
        roundtrip(NU_STORAGE_PRIVATE, sizes[i]);
    }
}

static void shared_buffers_have_a_cpu_pointer(void **state)
{
    nu_buffer *s, *p;
    NT_OK(nu_buffer_new(dev, 1000, NU_STORAGE_SHARED, &s));
    NT_OK(nu_buffer_new(dev, 1000, NU_STORAGE_PRIVATE, &p));
    void *w;
    const void *r;
    NT_OK(nu_buffer_contents_mut(s, &w));
    memset(w, 7, 1000);
    NT_OK(nu_buffer_contents(s, &r));
    assert_ptr_equal(r, w);
    uint8_t out[1000];
    NT_OK(nu_buffer_read(s, 0, out, 1000));
    for (int i = 0; i < 1000; i++)
        assert_int_equal(out[i], 7);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_contents(p, &r));
    assert_null(r);
    assert_non_null(strstr(nu_error_message(NULL), "private"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_contents_mut(p, &w));
    NT_OK(nu_buffer_free(s));
    NT_OK(nu_buffer_free(p));
}

static void buffer_from_copies(void **state)
{
    const char text[] = "nuvec buffer_from";
    for (int s = 0; s < 2; s++) {
        nu_buffer *b;
        NT_OK(nu_buffer_from(dev, text, sizeof text, s ? NU_STORAGE_PRIVATE : NU_STORAGE_SHARED, &b));
        char out[sizeof text];
        NT_OK(nu_buffer_read(b, 0, out, sizeof out));
        assert_string_equal(out, text);
        NT_OK(nu_buffer_free(b));
    }
    nu_buffer *b = (nu_buffer *)1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_from(dev, NULL, 5, NU_STORAGE_SHARED, &b));
    assert_null(b);
}

static void empty_buffers_own_no_memory(void **state)
{
    nu_memory_stats before, after;
    nu_memory_get_stats(dev, &before);
    nu_buffer *e[2];
    NT_OK(nu_buffer_new(dev, 0, NU_STORAGE_SHARED, &e[0]));
    NT_OK(nu_buffer_new(dev, 0, NU_STORAGE_PRIVATE, &e[1]));
    nu_memory_get_stats(dev, &after);
    assert_int_equal(after.active, before.active);
    assert_int_equal(after.reserved, before.reserved);
    assert_int_equal(after.buffers, before.buffers + 2);
    assert_int_equal(nu_buffer_size(e[0]), 0);
    const void *p = (void *)1;
    NT_OK(nu_buffer_contents(e[0], &p));
    assert_null(p);
    NT_OK(nu_buffer_read(e[1], 0, NULL, 0));
    NT_OK(nu_buffer_write(e[1], 0, NULL, 0));
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_buffer_read(e[1], 0, (char[1]){0}, 1));
    /* Binding an empty buffer binds the device's placeholder. */
    VkBuffer vb0 = VK_NULL_HANDLE, vb1 = VK_NULL_HANDLE;
    VkDeviceSize off = 1;
    NT_OK(nu__buffer_binding(e[0], &vb0, &off));
    assert_true(vb0 != VK_NULL_HANDLE);
    assert_int_equal(off, 0);
    NT_OK(nu__buffer_binding(e[1], &vb1, &off));
    assert_true(vb0 == vb1);
    NT_OK(nu_buffer_free(e[0]));
    NT_OK(nu_buffer_free(e[1]));
}

static void out_of_range_is_refused(void **state)
{
    nu_buffer *b;
    NT_OK(nu_buffer_new(dev, 100, NU_STORAGE_PRIVATE, &b));
    uint8_t data[200] = {0};
    NT_OK(nu_buffer_write(b, 0, data, 100));
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_buffer_write(b, 1, data, 100));
    assert_non_null(strstr(nu_error_message(NULL), "outside the buffer of 100 bytes"));
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_buffer_read(b, 101, data, 0));
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_buffer_read(b, SIZE_MAX, data, 2));
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_buffer_read(b, 50, data, SIZE_MAX));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_read(b, 0, NULL, 5));
    NT_OK(nu_buffer_free(b));
    nu_buffer *c = (nu_buffer *)1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_new(dev, 5, (nu_storage)7, &c));
    assert_null(c);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_new(NULL, 5, NU_STORAGE_SHARED, &c));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_new(dev, 5, NU_STORAGE_SHARED, NULL));
}

static void freed_memory_is_reused_from_the_cache(void **state)
{
    nu_buffer *a, *b;
    NT_OK(nu_buffer_new(dev, 100000, NU_STORAGE_PRIVATE, &a));
    nu__allocation first = a->alloc;
    nu_memory_stats s;
    nu_memory_get_stats(dev, &s);
    uint64_t active = s.active, reserved = s.reserved;
    assert_true(active >= 100000);
    NT_OK(nu_buffer_free(a));
    nu_memory_get_stats(dev, &s);
    assert_int_equal(s.active, 0);
    assert_int_equal(s.cache, active);
    assert_int_equal(s.peak, active);
    /* A fitting size (here slightly smaller) reuses the same memory, no new device memory. */
    NT_OK(nu_buffer_new(dev, 99000, NU_STORAGE_PRIVATE, &b));
    assert_ptr_equal(b->alloc.memory, first.memory);
    assert_int_equal(b->alloc.offset, first.offset);
    nu_memory_get_stats(dev, &s);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.reserved, reserved);
    NT_OK(nu_buffer_free(b));
    /* Shared and private memory are kept apart. */
    NT_OK(nu_buffer_new(dev, 100000, NU_STORAGE_SHARED, &b));
    assert_true(b->alloc.memory != first.memory || b->alloc.offset != first.offset ||
                b->alloc.kind != first.kind);
    NT_OK(nu_buffer_free(b));
    nu_memory_clear_cache(dev);
    nu_memory_get_stats(dev, &s);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.reserved, 0);
    assert_int_equal(s.blocks, 0);
}

static void statistics_follow_mlx(void **state)
{
    nu_memory_reset_peak(dev);
    nu_buffer *b[4];
    for (int i = 0; i < 4; i++)
        NT_OK(nu_buffer_new(dev, 1 << 20, NU_STORAGE_SHARED, &b[i]));
    assert_int_equal(nu_memory_active(dev), 4 << 20);
    assert_int_equal(nu_memory_peak(dev), 4 << 20);
    for (int i = 0; i < 3; i++)
        NT_OK(nu_buffer_free(b[i]));
    assert_int_equal(nu_memory_active(dev), 1 << 20);
    assert_int_equal(nu_memory_cache(dev), 3 << 20);
    assert_int_equal(nu_memory_peak(dev), 4 << 20); /* the cache is never in active or peak */
    nu_memory_reset_peak(dev);
    assert_int_equal(nu_memory_peak(dev), 1 << 20);
    nu_memory_clear_cache(dev);
    assert_int_equal(nu_memory_cache(dev), 0);
    /* Cache limit 0 disables the cache. */
    uint64_t old;
    NT_OK(nu_memory_set_cache_limit(dev, 0, &old));
    NT_OK(nu_buffer_free(b[3]));
    assert_int_equal(nu_memory_cache(dev), 0);
    NT_OK(nu_memory_set_cache_limit(dev, old, NULL));
}

static void memory_limit_fails_cleanly_and_loses_nothing(void **state)
{
    nu_buffer *keep;
    const char text[] = "still here";
    NT_OK(nu_buffer_from(dev, text, sizeof text, NU_STORAGE_PRIVATE, &keep));
    uint64_t old;
    NT_OK(nu_memory_set_limit(dev, 4 << 20, &old));
    nu_buffer *big = (nu_buffer *)1;
    NT_STATUS(NU_ERROR_OUT_OF_MEMORY, nu_buffer_new(dev, 5 << 20, NU_STORAGE_PRIVATE, &big));
    assert_null(big);
    assert_non_null(strstr(nu_error_message(dev), "limit"));
    /* Memory freed to the cache is released and the request retried before failing. */
    nu_buffer *a, *b;
    NT_OK(nu_buffer_new(dev, 3 << 20, NU_STORAGE_SHARED, &a));
    NT_OK(nu_buffer_free(a));
    assert_true(nu_memory_cache(dev) >= (3u << 20));
    NT_OK(nu_buffer_new(dev, 3 << 20, NU_STORAGE_PRIVATE, &b));
    NT_OK(nu_buffer_free(b));
    /* A limit below what is in use is refused, and the old one kept. */
    NT_OK(nu_buffer_new(dev, 2 << 20, NU_STORAGE_PRIVATE, &b));
    uint64_t prev = 0;
    NT_STATUS(NU_ERROR_LIMIT, nu_memory_set_limit(dev, 1 << 20, &prev));
    assert_non_null(strstr(nu_error_message(dev), "below"));
    nu_memory_stats s;
    nu_memory_get_stats(dev, &s);
    assert_int_equal(s.memory_limit, 4 << 20);
    NT_OK(nu_buffer_free(b));
    char out[sizeof text];
    NT_OK(nu_buffer_read(keep, 0, out, sizeof out));
    assert_string_equal(out, text);
    NT_OK(nu_memory_set_limit(dev, old, NULL));
    NT_OK(nu_buffer_free(keep));
}

static void huge_sizes_fail_with_a_message(void **state)
{
    static const size_t sizes[] = {SIZE_MAX, SIZE_MAX / 2, (size_t)1 << 62, (size_t)1 << 50};
    for (unsigned i = 0; i < 4; i++) {
        nu_buffer *b = (nu_buffer *)1;
        NT_STATUS(NU_ERROR_OUT_OF_MEMORY, nu_buffer_new(dev, sizes[i], NU_STORAGE_PRIVATE, &b));
        assert_null(b);
        assert_true(strlen(nu_error_message(NULL)) > 10);
    }
    assert_int_equal(nu_memory_active(dev), 0);
}

/* In every build: the handle's slot outlives the buffer (memory/buffer.c), so a second free
 * and any call on the freed handle are caught without reading freed memory (ASan would say). */
static void double_free_is_caught(void **state)
{
    nu_buffer *b;
    NT_OK(nu_buffer_new(dev, 64, NU_STORAGE_SHARED, &b));
    NT_OK(nu_buffer_free(b));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_free(b));
    assert_non_null(strstr(nu_error_message(NULL), "already freed"));
    assert_non_null(strstr(nu_error_message(dev), "already freed"));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_free(b)); /* and a third */
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_read(b, 0, (char[1]){0}, 1));
    assert_int_equal(nu_memory_active(dev), 0);
    NT_OK(nu_buffer_free(NULL));
}

/* A buffer freed while GPU work still holds it is dead at once for the user: a second free is
 * caught, and its slot goes back to the pool only when the GPU's last reference goes. */
static void double_free_is_caught_while_gpu_work_holds_the_buffer(void **state)
{
    nu_buffer *b;
    NT_OK(nu_buffer_new(dev, 256, NU_STORAGE_PRIVATE, &b));
    size_t total, free_before, free_now;
    nu__buffer_slots_count(dev, &total, &free_before);
    nu__guard *g = &b->guard;
    nu__guard_retain(g); /* a "command buffer"'s reference */
    NT_OK(nu_buffer_free(b));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_free(b));
    assert_non_null(strstr(nu_error_message(NULL), "already freed"));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_write(b, 0, (char[1]){0}, 1));
    nu__buffer_slots_count(dev, &total, &free_now);
    assert_int_equal(free_now, free_before); /* still taken: the GPU holds it */
    nu__guard_release(g);
    nu__buffer_slots_count(dev, &total, &free_now);
    assert_int_equal(free_now, free_before + 1);
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_free(b));
}

/* Every call on a stale handle fails with INVALID_HANDLE and a message; getters give 0s. */
static void stale_handles_are_caught(void **state)
{
    nu_buffer *b, *other;
    NT_OK(nu_buffer_new(dev, 64, NU_STORAGE_SHARED, &b));
    NT_OK(nu_buffer_new(dev, 64, NU_STORAGE_SHARED, &other));
    NT_OK(nu_buffer_set_name(b, "stale"));
    NT_OK(nu_buffer_free(b));
    char x[8] = {0};
    const void *p = (void *)1;
    void *q = (void *)1;
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_read(b, 0, x, sizeof x));
    assert_non_null(strstr(nu_error_message(NULL), "nu_buffer_read: the buffer was freed"));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_write(b, 0, x, sizeof x));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_contents(b, &p));
    assert_null(p);
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_contents_mut(b, &q));
    assert_null(q);
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_set_name(b, "again"));
    assert_int_equal(nu_buffer_size(b), 0);
    assert_string_equal(nu_buffer_name(b), "");
    assert_null(nu_buffer_device(b));
    assert_false(nu_buffer_in_use(b));
    assert_false(nu_buffer_is_read_only(b));
    assert_false(nu_buffer_is_mapped_file(b));
    assert_false(nu_buffer_is_zero_copy(b));
    /* Recording with it is refused too (exec/commands.c). */
    nu_commands *c;
    NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_commands_copy(c, other, 0, b, 0, 8));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_commands_fill(c, b, 0, 8, 0));
    NT_OK(nu_commands_free(c));
    NT_OK(nu_buffer_free(other));
}

/* Freed slots are reused oldest first: a freed handle stays dead until every slot that was
 * free before it has been handed out again. */
static void slots_are_reused_oldest_freed_first(void **state)
{
    enum { N = 3 };
    NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));
    nu_buffer *b[N];
    for (int i = 0; i < N; i++)
        NT_OK(nu_buffer_new(dev, 16, NU_STORAGE_SHARED, &b[i]));
    size_t total, free_slots;
    nu__buffer_slots_count(dev, &total, &free_slots);
    const size_t before = free_slots; /* free before the three are freed */
    for (int i = 0; i < N; i++)
        NT_OK(nu_buffer_free(b[i]));
    /* The slots free before these three come first, and none of them is one of these. */
    nu_buffer **earlier = calloc(before + 1, sizeof *earlier);
    assert_non_null(earlier);
    for (size_t k = 0; k < before; k++) {
        NT_OK(nu_buffer_new(dev, 0, NU_STORAGE_SHARED, &earlier[k]));
        for (int i = 0; i < N; i++)
            assert_ptr_not_equal(earlier[k], b[i]);
        NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_buffer_free(b[k % N])); /* still dead */
    }
    /* Then the three, in the order they were freed. */
    nu_buffer *again[N];
    for (int i = 0; i < N; i++) {
        NT_OK(nu_buffer_new(dev, 0, NU_STORAGE_SHARED, &again[i]));
        assert_ptr_equal(again[i], b[i]);
    }
    size_t total_now;
    nu__buffer_slots_count(dev, &total_now, &free_slots);
    assert_int_equal(total_now, total); /* no new chunk was needed */
    assert_int_equal(free_slots, 0);
    for (int i = 0; i < N; i++)
        NT_OK(nu_buffer_free(again[i]));
    for (size_t k = 0; k < before; k++)
        NT_OK(nu_buffer_free(earlier[k]));
    nu__buffer_slots_count(dev, &total_now, &free_slots);
    assert_int_equal(free_slots, total);
    /* One more buffer than the pool has slots: a new chunk, and the old slots stay. */
    nu_buffer **many = calloc(total + 1, sizeof *many);
    assert_non_null(many);
    for (size_t k = 0; k <= total; k++)
        NT_OK(nu_buffer_new(dev, 0, NU_STORAGE_SHARED, &many[k]));
    nu__buffer_slots_count(dev, &total_now, &free_slots);
    assert_true(total_now > total);
    assert_int_equal(free_slots, total_now - total - 1);
    for (size_t k = 0; k <= total; k++)
        NT_OK(nu_buffer_free(many[k]));
    free(many);
    free(earlier);
}

/* Many threads create, use and free buffers at once (also under make tsan): every slot comes
 * back, no buffer is lost, and of two threads freeing one handle exactly one wins. */
#define THREADS 4
#define ROUNDS 300
static pthread_barrier_t race_start;
static nu_buffer *race_buffer;
static atomic_int race_wins;

static void *churn(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    nu_buffer *keep[8] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        nu_buffer *b;
        if (nu_buffer_new(dev, (size_t)(r % 5) * 64, r % 3 ? NU_STORAGE_SHARED : NU_STORAGE_PRIVATE, &b) != NU_OK)
            return (void *)1;
        uint32_t word = (uint32_t)(id << 16 | (unsigned)r), back = 0;
        if (nu_buffer_size(b) >= 4 && (nu_buffer_write(b, 0, &word, 4) != NU_OK || nu_buffer_read(b, 0, &back, 4) != NU_OK ||
                                       back != word))
            return (void *)2;
        /* Keep a few alive for a while, so that frees and creates interleave across threads. */
        nu_buffer *old = keep[r % 8];
        keep[r % 8] = b;
        if (old && nu_buffer_free(old) != NU_OK)
            return (void *)3;
    }
    for (int i = 0; i < 8; i++)
        if (keep[i] && nu_buffer_free(keep[i]) != NU_OK)
            return (void *)5;
    pthread_barrier_wait(&race_start);
    if (nu_buffer_free(race_buffer) == NU_OK)
        atomic_fetch_add(&race_wins, 1);
    return NULL;
}

static void many_threads_create_and_free(void **state)
{
    size_t total, free_after;
    NT_OK(nu_buffer_new(dev, 64, NU_STORAGE_SHARED, &race_buffer));
    atomic_init(&race_wins, 0);
    assert_int_equal(pthread_barrier_init(&race_start, NULL, THREADS), 0);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        if (rc)
            fail_msg("thread %d failed at step %d: %s", i, (int)(uintptr_t)rc, nu_error_message(NULL));
    }
    pthread_barrier_destroy(&race_start);
    assert_int_equal(atomic_load(&race_wins), 1);
    nu__buffer_slots_count(dev, &total, &free_after);
    assert_int_equal(free_after, total); /* every slot came back */
    nu_memory_stats s;
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.buffers, 0);
    assert_int_equal(s.active, 0);
}

/* The getters' NULL policy (nuvec/status.h): NULL gives 0, "", NULL or false. */
static void getters_accept_null(void **state)
{
    assert_int_equal(nu_buffer_size(NULL), 0);
    assert_int_equal(nu_buffer_storage(NULL), NU_STORAGE_SHARED);
    assert_null(nu_buffer_device(NULL));
    assert_false(nu_buffer_in_use(NULL));
    assert_false(nu_buffer_is_read_only(NULL));
    assert_string_equal(nu_buffer_name(NULL), "");
    assert_false(nu_buffer_is_zero_copy(NULL));
    assert_false(nu_buffer_is_mapped_file(NULL));
    assert_null(nu_device_get_info(NULL));
    assert_null(nu_device_memory_choice(NULL));
    assert_int_equal(nu_device_validation_errors(NULL), 0);
    assert_int_equal(nu_memory_active(NULL), 0);
    assert_int_equal(nu_memory_peak(NULL), 0);
    assert_int_equal(nu_memory_cache(NULL), 0);
    nu_memory_reset_peak(NULL);
    nu_memory_clear_cache(NULL);
    assert_string_equal(nu_kernel_name(NULL), "");
    assert_int_equal(nu_kernel_bindings(NULL), 0);
    assert_int_equal(nu_kernel_push_constant_size(NULL), 0);
    uint32_t wg[3] = {7, 7, 7};
    nu_kernel_workgroup_size(NULL, wg);
    assert_true(wg[0] == 0 && wg[1] == 0 && wg[2] == 0);
    assert_int_equal(nu_safetensors_count(NULL), 0);
    assert_null(nu_safetensors_tensor(NULL, 0));
    assert_null(nu_safetensors_find(NULL, "x"));
    assert_null(nu_safetensors_metadata(NULL, "x"));
    assert_int_equal(nu_safetensors_data_size(NULL), 0);
    assert_null(nu_safetensors_buffer(NULL));
    /* Free and close calls alike: NU_OK for NULL. */
    NT_OK(nu_buffer_free(NULL));
    NT_OK(nu_commands_free(NULL));
    NT_OK(nu_kernel_free(NULL));
    NT_OK(nu_safetensors_close(NULL));
    NT_OK(nu_device_close(NULL));
}

/* The CPU access rules, with the GPU side simulated through the guard (the commands issue
 * drives it from real command buffers). */
static void cpu_access_rules(void **state)
{
    nu_buffer *b;
    NT_OK(nu_buffer_new(dev, 64, NU_STORAGE_SHARED, &b));
    uint8_t x[64] = {1};
    const void *r;
    void *w;
    nu__fence f = {0, 1};
    /* GPU work only recorded (not committed) writes the buffer: it does not count, every CPU
     * access goes on (it is ordered before that work, committed later). */
    nu__guard_acquire(&b->guard, true);
    assert_false(nu_buffer_in_use(b));
    NT_OK(nu_buffer_read(b, 0, x, 64));
    NT_OK(nu_buffer_contents(b, &r));
    NT_OK(nu_buffer_write(b, 0, x, 64));
    NT_OK(nu_buffer_contents_mut(b, &w));
    /* Committed: now it does. */
    NT_OK(nu__guard_record(&b->guard, f, true));
    nu__guard_committed(&b->guard);
    nu__guard_submitted(&b->guard, true);
    assert_true(nu_buffer_in_use(b));
    NT_STATUS(NU_ERROR_BUFFER_IN_USE, nu_buffer_read(b, 0, x, 64));
    NT_STATUS(NU_ERROR_BUFFER_IN_USE, nu_buffer_write(b, 0, x, 64));
    nu__guard_release_use(&b->guard, true, &f);
    assert_false(nu_buffer_in_use(b));
    /* Submitted GPU work reads the buffer: CPU reads go on, writes are refused. */
    nu__guard_acquire(&b->guard, false);
    NT_OK(nu__guard_record(&b->guard, f, false));
    assert_true(nu_buffer_in_use(b));
    NT_OK(nu_buffer_read(b, 0, x, 64));
    NT_OK(nu_buffer_contents(b, &r));
    NT_STATUS(NU_ERROR_BUFFER_IN_USE, nu_buffer_write(b, 0, x, 64));
    NT_STATUS(NU_ERROR_BUFFER_IN_USE, nu_buffer_contents_mut(b, &w));
    assert_null(w);
    nu__guard_release_use(&b->guard, false, &f);
    /* Submitted GPU work writes it: CPU reads are refused too. */
    nu__guard_acquire(&b->guard, true);
    NT_OK(nu__guard_record(&b->guard, f, true));
    NT_STATUS(NU_ERROR_BUFFER_IN_USE, nu_buffer_read(b, 0, x, 64));
    assert_non_null(strstr(nu_error_message(NULL), "writes the buffer"));
    NT_STATUS(NU_ERROR_BUFFER_IN_USE, nu_buffer_contents(b, &r));
    NT_STATUS(NU_ERROR_BUFFER_IN_USE, nu_buffer_write(b, 0, x, 64));
    nu__guard_release_use(&b->guard, true, &f);
    assert_false(nu_buffer_in_use(b));
    NT_OK(nu_buffer_write(b, 0, x, 64));
    /* Read-only buffers (mapped files) refuse writes. */
    b->read_only = true;
    assert_true(nu_buffer_is_read_only(b));
    NT_STATUS(NU_ERROR_READ_ONLY, nu_buffer_write(b, 0, x, 1));
    NT_STATUS(NU_ERROR_READ_ONLY, nu_buffer_contents_mut(b, &w));
    NT_OK(nu_buffer_read(b, 0, x, 1));
    b->read_only = false;
    NT_OK(nu_buffer_free(b));
}

struct later {
    nu__guard *g;
    nu__fence f;
};

static void *finish_later(void *p)
{
    struct later *l = p;
    usleep(100 * 1000);
    nu__guard_release_use(l->g, true, &l->f);
    return NULL;
}

/* A buffer freed while GPU work still uses it: its memory is not handed to the CPU until that
 * work completes, and a buffer holding reused memory waits for the previous owner. */
static void memory_in_use_by_gpu_work_waits(void **state)
{
    nu_buffer *a, *b;
    NT_OK(nu_buffer_new(dev, 4096, NU_STORAGE_SHARED, &a));
    nu__allocation mem = a->alloc;
    nu__fence f = {0, 7};
    nu__guard_acquire(&a->guard, true);
    NT_OK(nu__guard_record(&a->guard, f, true));
    nu__guard_committed(&a->guard); /* committed and submitted: its position orders reuse */
    nu__guard_submitted(&a->guard, true);
    nu__guard *g = &a->guard;
    nu__guard_retain(g); /* the "command buffer"'s reference */
    NT_OK(nu_buffer_free(a));
    /* A CPU buffer never gets the busy memory. */
    NT_OK(nu_buffer_new(dev, 4096, NU_STORAGE_SHARED, &b));
    assert_false(b->alloc.memory == mem.memory && b->alloc.offset == mem.offset);
    NT_OK(nu_buffer_free(b));
    nu_memory_clear_cache(dev); /* idle cached pieces go; the busy one stays */
    /* ... but shows in the cache only once its last GPU use completes (nuvec/command.h). */
    assert_int_equal(nu_memory_cache(dev), 0);
    nu_memory_stats s;
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.active, 0);
    assert_true(s.reserved >= 4096);
    /* GPU reuse gets it, with the previous owner's guard; CPU access then waits for that work. */
    nu_buffer *c;
    NT_OK(nu_buffer_new(dev, 8, NU_STORAGE_SHARED, &c)); /* a handle to reuse the memory into */
    nu__pool_free(dev->pool, &c->alloc, NULL);
    char why[128];
    NT_OK(nu__pool_alloc(dev->pool, NU__KIND_SHARED, 4096, true, &c->alloc, why, sizeof why));
    assert_ptr_equal(c->alloc.memory, mem.memory);
    assert_int_equal(c->alloc.offset, mem.offset);
    assert_ptr_equal(c->alloc.busy, g);
    c->size = 4096;
    struct later l = {g, f};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, finish_later, &l), 0);
    uint8_t x[16];
    NT_OK(nu_buffer_read(c, 0, x, sizeof x)); /* blocks until the previous owner's work is done */
    assert_true(nu__guard_idle(g));
    /* The previous owner's guard stays referenced until the free: a commit on another thread may
     * be reading it (nu__uses_waits), so a CPU access does not drop it. */
    assert_ptr_equal(c->alloc.busy, g);
    pthread_join(t, NULL);
    nu__guard_release(g);
    NT_OK(nu_buffer_free(c));
}

/* A freed buffer's memory joins the cache when its last GPU use completes (nuvec/command.h),
 * not at the free; meanwhile it is in neither active nor cache, but in reserved. */
static void freed_memory_joins_the_cache_when_its_gpu_use_completes(void **state)
{
    nu_buffer *a;
    NT_OK(nu_buffer_new(dev, 4096, NU_STORAGE_PRIVATE, &a));
    nu__fence f = {0, 9};
    nu__guard_acquire(&a->guard, false);
    NT_OK(nu__guard_record(&a->guard, f, false));
    nu__guard_committed(&a->guard);
    nu__guard_submitted(&a->guard, false);
    nu__guard *g = &a->guard;
    nu__guard_retain(g); /* the "command buffer"'s reference */
    NT_OK(nu_buffer_free(a));
    nu_memory_stats s;
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.buffers, 0);
    assert_int_equal(s.active, 0);
    assert_int_equal(s.cache, 0);
    assert_int_equal(s.pending, 4096);
    assert_true(s.reserved >= 4096);
    nu__guard_release_use(g, false, &f); /* the work completed */
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.cache, 4096);
    assert_int_equal(s.pending, 0);
    assert_int_equal(nu_memory_cache(dev), 4096);
    nu__guard_release(g);
    nu_memory_clear_cache(dev);
    assert_int_equal(nu_memory_cache(dev), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(shared_and_private_round_trip, reset),
        cmocka_unit_test_setup(shared_buffers_have_a_cpu_pointer, reset),
        cmocka_unit_test_setup(buffer_from_copies, reset),
        cmocka_unit_test_setup(empty_buffers_own_no_memory, reset),
        cmocka_unit_test_setup(out_of_range_is_refused, reset),
        cmocka_unit_test_setup(freed_memory_is_reused_from_the_cache, reset),
        cmocka_unit_test_setup(statistics_follow_mlx, reset),
        cmocka_unit_test_setup(memory_limit_fails_cleanly_and_loses_nothing, reset),
        cmocka_unit_test_setup(huge_sizes_fail_with_a_message, reset),
        cmocka_unit_test_setup(double_free_is_caught, reset),
        cmocka_unit_test_setup(double_free_is_caught_while_gpu_work_holds_the_buffer, reset),
        cmocka_unit_test_setup(stale_handles_are_caught, reset),
        cmocka_unit_test_setup(slots_are_reused_oldest_freed_first, reset),
        cmocka_unit_test_setup(many_threads_create_and_free, reset),
        cmocka_unit_test_setup(getters_accept_null, reset),
        cmocka_unit_test_setup(cpu_access_rules, reset),
        cmocka_unit_test_setup(memory_in_use_by_gpu_work_waits, reset),
        cmocka_unit_test_setup(freed_memory_joins_the_cache_when_its_gpu_use_completes, reset),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
