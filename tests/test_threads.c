/* test_threads.c: many threads allocating, writing, reading and freeing buffers of one device
 * at once (run under ThreadSanitizer by `make tsan`). */
#include "harness.h"

#include <pthread.h>
#include <string.h>

enum { THREADS = 8, ROUNDS = 300, LIVE = 12 };

static nu_device *dev;

static void *worker(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg * 7919 + 1;
    nu_buffer *live[LIVE] = {0};
    uint8_t tag[LIVE];
    for (int r = 0; r < ROUNDS; r++) {
        int i = (int)(nt_rand(&seed) % LIVE);
        if (live[i]) {
            /* Check the buffer still holds what this thread wrote, then free it. */
            uint8_t out[64];
            size_t n = nu_buffer_size(live[i]) < sizeof out ? nu_buffer_size(live[i]) : sizeof out;
            if (nu_buffer_read(live[i], 0, out, n) != NU_OK)
                return "read failed";
            for (size_t j = 0; j < n; j++)
                if (out[j] != tag[i])
                    return "a buffer's bytes changed under another thread";
            if (nu_buffer_free(live[i]) != NU_OK)
                return "free failed";
            live[i] = NULL;
        } else {
            size_t size = (size_t)(nt_rand(&seed) % (1 << (nt_rand(&seed) % 20)));
            nu_storage storage = nt_rand(&seed) % 4 == 0 ? NU_STORAGE_PRIVATE : NU_STORAGE_SHARED;
            if (nu_buffer_new(dev, size, storage, &live[i]) != NU_OK)
                return "allocation failed";
            tag[i] = (uint8_t)nt_rand(&seed);
            uint8_t in[64];
            memset(in, tag[i], sizeof in);
            if (nu_buffer_write(live[i], 0, in, size < sizeof in ? size : sizeof in) != NU_OK)
                return "write failed";
        }
        if (r % 97 == 0)
            nu_memory_clear_cache(dev);
    }
    for (int i = 0; i < LIVE; i++)
        nu_buffer_free(live[i]);
    return NULL;
}

static void threads_allocate_and_free_at_once(void **state)
{
    dev = nt_open();
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *err;
        pthread_join(t[i], &err);
        if (err)
            fail_msg("thread %d: %s: %s", i, (const char *)err, nu_error_message(NULL));
    }
    nu_memory_stats s;
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.active, 0);
    assert_int_equal(s.buffers, 0);
    assert_true(s.peak > 0);
    nu_memory_clear_cache(dev);
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.reserved, 0);
    nt_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_allocate_and_free_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
