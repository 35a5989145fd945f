/* test_commands.c: command buffers on a real device (lavapipe in CI, under synchronisation
 * validation): each hazard kind gets exactly the barrier it needs, the CPU access rules,
 * reuse of memory still used by GPU work, the transfer queue, commit order, bad input, and a
 * lost device. The randomized test (test_random.c) covers combinations. */
#include "harness.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/commands.h"

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

static nu_buffer *buffer(size_t size, nu_storage storage)
{
    nu_buffer *b;
    NT_OK(nu_buffer_new(dev, size, storage, &b));
    return b;
}

static nu_commands *commands(nu_queue q)
{
    nu_commands *c;
    NT_OK(nu_commands_new(dev, q, &c));
    return c;
}

static void run(nu_commands *c)
{
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
}

static void expect_words(nu_buffer *b, size_t offset, size_t count, uint32_t value)
{
    uint32_t *w = malloc(count * 4);
    NT_OK(nu_buffer_read(b, offset, w, count * 4));
    for (size_t i = 0; i < count; i++)
        if (w[i] != value)
            fail_msg("word %zu at byte %zu: %u, expected %u", i, offset + i * 4, w[i], value);
    free(w);
}

static void fill_copy_upload_download(void **state)
{
    for (int q = 0; q < 2; q++) {
        nu_buffer *a = buffer(4096, NU_STORAGE_PRIVATE), *b = buffer(4096, NU_STORAGE_SHARED);
        nu_commands *c = commands(q ? NU_QUEUE_TRANSFER : NU_QUEUE_COMPUTE);
        NT_OK(nu_commands_fill(c, a, 0, 4096, 7));
        NT_OK(nu_commands_copy(c, b, 0, a, 0, 4096));        /* read after write */
        uint32_t up[4] = {1, 2, 3, 4}, down[4] = {0};
        NT_OK(nu_commands_upload(c, a, 16, up, sizeof up));  /* write after read */
        NT_OK(nu_commands_download(c, a, 12, down, sizeof down));
        NT_OK(nu_commands_copy(c, b, 1, a, 17, 3));           /* unaligned: the copy engine */
        run(c);
        assert_int_equal(down[0], 7);
        assert_int_equal(down[1], 1);
        assert_int_equal(down[3], 3);
        expect_words(b, 8, 1000, 7);
        uint8_t head[4];
        NT_OK(nu_buffer_read(b, 0, head, 4));
        assert_int_equal(head[0], 7);
        assert_int_equal(head[1], 0); /* byte 1 of word 1 (= 1) */
        assert_int_equal(head[2], 0);
        assert_int_equal(head[3], 0);
        nu_commands_free(c);
        nu_buffer_free(a);
        nu_buffer_free(b);
    }
}

static uint32_t barriers(nu_commands *c) { return c->hazards.barriers; }

static void barriers_exactly_where_needed(void **state)
{
    nu_kernel *add;
    NT_OK(nu_kernel_builtin(dev, "add_f32", &add));
    nu_buffer *x = buffer(1024, NU_STORAGE_PRIVATE), *y = buffer(1024, NU_STORAGE_PRIVATE);
    nu_buffer *z[8];
    for (int i = 0; i < 8; i++)
        z[i] = buffer(1024, NU_STORAGE_PRIVATE);
    uint32_t n = 256, groups[3] = {1, 1, 1};
    nu_commands *c = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_fill(c, x, 0, 1024, 0x3f800000u)); /* 1.0f */
    NT_OK(nu_commands_fill(c, y, 0, 1024, 0x40000000u)); /* 2.0f: independent of the first */
    assert_int_equal(barriers(c), 0);
    /* Independent dispatches (reads after reads of x and y, writes to distinct z): one barrier
     * for the read-after-write of x and y, then none. */
    for (int i = 0; i < 8; i++) {
        nu_binding b[3] = {{z[i], NU_ACCESS_WRITE, 0, 0}, {x, NU_ACCESS_READ, 0, 0}, {y, NU_ACCESS_READ, 0, 0}};
        NT_OK(nu_commands_dispatch(c, add, groups, b, 3, &n, 4));
    }
    assert_int_equal(barriers(c), 1);
    /* A dependent chain: z[i+1] = z[i] + y, each a read after write. */
    for (int i = 0; i < 7; i++) {
        nu_binding b[3] = {{z[i + 1], NU_ACCESS_WRITE, 0, 0}, {z[i], NU_ACCESS_READ, 0, 0}, {y, NU_ACCESS_READ, 0, 0}};
        NT_OK(nu_commands_dispatch(c, add, groups, b, 3, &n, 4));
    }
    assert_int_equal(barriers(c), 8);
    /* Disjoint halves of one buffer written by two dispatches: no barrier between them. */
    uint32_t half = 128;
    nu_binding lo[3] = {{x, NU_ACCESS_WRITE, 0, 512}, {z[7], NU_ACCESS_READ, 0, 512}, {y, NU_ACCESS_READ, 0, 512}};
    nu_binding hi[3] = {{x, NU_ACCESS_WRITE, 512, 512}, {z[7], NU_ACCESS_READ, 512, 512}, {y, NU_ACCESS_READ, 512, 512}};
    NT_OK(nu_commands_dispatch(c, add, groups, lo, 3, &half, 4));
    uint32_t before = barriers(c);
    NT_OK(nu_commands_dispatch(c, add, groups, hi, 3, &half, 4));
    assert_int_equal(barriers(c), before);
    /* Write after read (y was read above): one barrier. */
    NT_OK(nu_commands_fill(c, y, 0, 1024, 0));
    assert_int_equal(barriers(c), before + 1);
    /* Write after write: one more. */
    NT_OK(nu_commands_fill(c, y, 0, 4, 0x40400000u)); /* 3.0f in y[0] */
    assert_int_equal(barriers(c), before + 2);
    run(c);
    expect_words(z[0], 0, 256, 0x40400000u); /* 1 + 2 = 3 */
    expect_words(z[7], 0, 256, 0x41880000u); /* 3 + 7 * 2 = 17 */
    expect_words(x, 0, 256, 0x41980000u);    /* 17 + 2 = 19 */
    nu_commands_free(c);
    for (int i = 0; i < 8; i++)
        nu_buffer_free(z[i]);
    nu_buffer_free(x);
    nu_buffer_free(y);
    nu_kernel_free(add);
}

/* Empty bindings touch no memory: not tracked, so dispatches writing unrelated empty buffers
 * (all bound as the device's placeholder) are not ordered against each other, and the empty
 * buffers are no use of the command buffer. */
static void empty_bindings_need_no_barrier(void **state)
{
    nu_kernel *fill, *add;
    NT_OK(nu_kernel_builtin(dev, "fill_u32", &fill));
    NT_OK(nu_kernel_builtin(dev, "add_f32", &add));
    nu_buffer *e[4], *x = buffer(1024, NU_STORAGE_PRIVATE);
    for (int i = 0; i < 4; i++)
        e[i] = buffer(0, i % 2 ? NU_STORAGE_SHARED : NU_STORAGE_PRIVATE);
    uint32_t zero[2] = {7, 0}, groups[3] = {1, 1, 1}, n = 0;
    nu_commands *c = commands(NU_QUEUE_COMPUTE);
    for (int i = 0; i < 4; i++) {
        nu_binding b = {e[i], NU_ACCESS_WRITE, 0, 0};
        NT_OK(nu_commands_dispatch(c, fill, groups, &b, 1, zero, sizeof zero));
    }
    /* An empty range of a buffer that is not empty is no access to it either. */
    nu_binding tail = {x, NU_ACCESS_WRITE, 1024, 0};
    NT_OK(nu_commands_dispatch(c, fill, groups, &tail, 1, zero, sizeof zero));
    nu_binding sum[3] = {{e[0], NU_ACCESS_WRITE, 0, 0}, {e[1], NU_ACCESS_READ, 0, 0}, {e[2], NU_ACCESS_READ, 0, 0}};
    NT_OK(nu_commands_dispatch(c, add, groups, sum, 3, &n, sizeof n));
    assert_int_equal(barriers(c), 0);
    assert_int_equal(c->s.use_count, 0);
    NT_OK(nu_buffer_write(x, 0, zero, sizeof zero));
    run(c);
    nu_commands_free(c);
    for (int i = 0; i < 4; i++)
        nu_buffer_free(e[i]);
    nu_buffer_free(x);
    nu_kernel_free(fill);
    nu_kernel_free(add);
}

/* CPU access is judged by committed work only (nuvec/buffer.h): work only recorded does not
 * block it, and the access is ordered before that work, which is committed after it. */
static void cpu_access_follows_committed_work_only(void **state)
{
    nu_buffer *a = buffer(256, NU_STORAGE_SHARED), *b = buffer(256, NU_STORAGE_SHARED);
    nu_buffer *p = buffer(256, NU_STORAGE_PRIVATE);
    uint8_t x[256], y[256], down[256];
    memset(x, 5, sizeof x);
    NT_OK(nu_buffer_write(p, 0, x, sizeof x));
    nu_commands *c = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_copy(c, b, 0, a, 0, 256)); /* reads a, writes b */
    NT_OK(nu_commands_download(c, p, 0, down, sizeof down));
    /* Only recorded: nothing is in use, every access goes on. */
    assert_false(nu_buffer_in_use(a));
    assert_false(nu_buffer_in_use(b));
    assert_false(nu_buffer_in_use(p));
    memset(x, 9, sizeof x);
    NT_OK(nu_buffer_write(a, 0, x, sizeof x));
    NT_OK(nu_buffer_read(b, 0, y, sizeof y));
    const void *r;
    void *w;
    NT_OK(nu_buffer_contents(b, &r));
    NT_OK(nu_buffer_contents_mut(b, &w));
    memset(w, 1, 256);
    memset(x, 7, sizeof x);
    NT_OK(nu_buffer_write(p, 0, x, sizeof x)); /* a private buffer: through the GPU */
    NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));
    NT_OK(nu_commands_commit(c));
    /* Committed: writes to a and reads of b are refused until the work completed (it may
     * already have, on a slow host; a write then stores the same bytes). */
    memset(y, 9, sizeof y);
    nu_status st = nu_buffer_write(a, 0, y, sizeof y);
    if (st == NU_ERROR_BUFFER_IN_USE) {
        assert_non_null(strstr(nu_error_message(NULL), "committed GPU work"));
    } else {
        NT_OK(st);
        NT_OK(nu_commands_wait(c, 0));
    }
    st = nu_buffer_read(b, 0, y, sizeof y);
    if (st != NU_ERROR_BUFFER_IN_USE) {
        NT_OK(st);
        NT_OK(nu_commands_wait(c, 0));
    }
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    assert_false(nu_buffer_in_use(a));
    /* The copy and the download saw what the CPU wrote before the commit. */
    expect_words(b, 0, 64, 0x09090909u);
    for (size_t i = 0; i < sizeof down; i++)
        assert_int_equal(down[i], 7);
    nu_commands_free(c);
    /* A recorded write orders after a CPU write made before its commit: the GPU's bytes win. */
    c = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_fill(c, a, 0, 256, 0x01010101u));
    NT_OK(nu_buffer_read(a, 0, y, sizeof y));
    assert_int_equal(y[0], 9);
    NT_OK(nu_buffer_write(a, 0, x, sizeof x));
    run(c);
    expect_words(a, 0, 64, 0x01010101u);
    nu_commands_free(c);
    /* An abandoned command buffer never blocked anything and releases its uses. */
    c = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_fill(c, a, 0, 256, 2));
    NT_OK(nu_buffer_read(a, 0, y, sizeof y));
    NT_OK(nu_buffer_write(a, 0, x, sizeof x));
    nu_commands_free(c);
    NT_OK(nu_buffer_read(a, 0, y, sizeof y));
    assert_int_equal(y[0], 7);
    nu_buffer_free(a);
    nu_buffer_free(b);
    nu_buffer_free(p);
}

static void commit_order_is_program_order(void **state)
{
    nu_buffer *a = buffer(64, NU_STORAGE_PRIVATE);
    nu_commands *first = commands(NU_QUEUE_COMPUTE), *second = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_fill(first, a, 0, 64, 1));
    NT_OK(nu_commands_fill(second, a, 0, 64, 2));
    NT_OK(nu_commands_commit(second));
    NT_OK(nu_commands_commit(first)); /* committed last: runs last */
    NT_OK(nu_commands_wait(first, NU_WAIT_FOREVER));
    NT_OK(nu_commands_wait(second, NU_WAIT_FOREVER));
    expect_words(a, 0, 16, 1);
    nu_commands_free(first);
    nu_commands_free(second);
    nu_buffer_free(a);
}

static void transfer_and_compute_queues_are_ordered(void **state)
{
    nu_buffer *a = buffer(1 << 20, NU_STORAGE_PRIVATE), *b = buffer(1 << 20, NU_STORAGE_PRIVATE);
    for (int round = 0; round < 3; round++) {
        nu_commands *t = commands(NU_QUEUE_TRANSFER), *c = commands(NU_QUEUE_COMPUTE);
        NT_OK(nu_commands_fill(t, a, 0, 1 << 20, 10u + round)); /* transfer writes a */
        NT_OK(nu_commands_copy(c, b, 0, a, 0, 1 << 20));        /* compute reads a, writes b */
        NT_OK(nu_commands_commit(t));
        NT_OK(nu_commands_commit(c));
        nu_commands *t2 = commands(NU_QUEUE_TRANSFER);
        NT_OK(nu_commands_fill(t2, a, 0, 1 << 20, 99)); /* write after the compute read */
        NT_OK(nu_commands_commit(t2));
        NT_OK(nu_commands_wait(t2, NU_WAIT_FOREVER));
        NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
        expect_words(b, 0, 1 << 18, 10u + round);
        expect_words(a, 0, 16, 99);
        nu_commands_free(t);
        nu_commands_free(c);
        nu_commands_free(t2);
    }
    nu_buffer_free(a);
    nu_buffer_free(b);
}

/* Memory of a buffer freed while committed work reads it goes to GPU work at once
 * (nu_buffer_new_gpu), ordered after that work; never to the CPU before it completes. */
static void in_flight_memory_is_reused_safely(void **state)
{
    const size_t size = 8 << 20;
    nu_buffer *a = buffer(size, NU_STORAGE_PRIVATE), *out = buffer(size, NU_STORAGE_PRIVATE);
    nu_commands *c1 = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_fill(c1, a, 0, size, 1));
    for (int i = 0; i < 4; i++)
        NT_OK(nu_commands_copy(c1, out, 0, a, 0, size)); /* long enough to still run below */
    NT_OK(nu_commands_commit(c1));
    nu__allocation mem = a->alloc;
    NT_OK(nu_buffer_free(a));
    nu_buffer *cpu = buffer(size, NU_STORAGE_PRIVATE);
    bool cpu_got_it = cpu->alloc.memory == mem.memory && cpu->alloc.offset == mem.offset;
    nu_buffer *b;
    NT_OK(nu_buffer_new_gpu(dev, size, NU_STORAGE_PRIVATE, &b));
    bool gpu_got_it = b->alloc.memory == mem.memory && b->alloc.offset == mem.offset;
    if (cpu_got_it)
        assert_int_equal(nu_commands_wait(c1, 0), NU_OK); /* only possible once c1 completed */
    nu_commands *c2 = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_fill(c2, b, 0, size, 2)); /* must wait for c1's reads of the memory */
    NT_OK(nu_commands_commit(c2));
    NT_OK(nu_commands_wait(c2, NU_WAIT_FOREVER));
    NT_OK(nu_commands_wait(c1, NU_WAIT_FOREVER));
    expect_words(out, 0, size / 4, 1);
    expect_words(b, 0, size / 4, 2);
    print_message("reuse: the GPU buffer %s the freed memory, the CPU one %s\n", gpu_got_it ? "got" : "did not get",
                  cpu_got_it ? "got" : "did not get");
    assert_true(gpu_got_it || cpu_got_it);
    nu_commands_free(c1);
    nu_commands_free(c2);
    nu_buffer_free(b);
    nu_buffer_free(cpu);
    nu_buffer_free(out);
}

/* CPU access to reused memory waits for the previous owner's work. */
static void cpu_access_to_reused_memory_waits(void **state)
{
    const size_t size = 8 << 20;
    nu_buffer *a = buffer(size, NU_STORAGE_SHARED), *out = buffer(size, NU_STORAGE_PRIVATE);
    nu_commands *c1 = commands(NU_QUEUE_COMPUTE);
    for (int i = 0; i < 8; i++)
        NT_OK(nu_commands_copy(c1, out, 0, a, 0, size));
    NT_OK(nu_commands_commit(c1));
    NT_OK(nu_buffer_free(a));
    nu_buffer *b;
    NT_OK(nu_buffer_new_gpu(dev, size, NU_STORAGE_SHARED, &b));
    void *p;
    NT_OK(nu_buffer_contents_mut(b, &p)); /* blocks until c1 no longer reads the memory */
    assert_int_equal(nu_commands_wait(c1, 0), NU_OK);
    memset(p, 0, 64);
    nu_commands_free(c1);
    nu_buffer_free(b);
    nu_buffer_free(out);
}

/* Memory returns to the cache for the CPU when its last GPU use completes, with nobody
 * waiting or polling. */
static void completion_needs_no_polling(void **state)
{
    nu_memory_clear_cache(dev);
    nu_buffer *a = buffer(1 << 20, NU_STORAGE_PRIVATE);
    nu__allocation mem = a->alloc;
    nu_commands *c = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_fill(c, a, 0, 1 << 20, 5));
    NT_OK(nu_commands_commit(c));
    nu_commands_free(c); /* nobody will wait */
    NT_OK(nu_buffer_free(a));
    /* New buffers are held (not freed) so that each takes another piece; the freed one comes
     * back once the completion thread released its use. */
    nu_buffer *held[200];
    int n = 0;
    bool reused = false;
    while (n < 200 && !reused) {
        held[n] = buffer(1 << 20, NU_STORAGE_PRIVATE);
        reused = held[n]->alloc.memory == mem.memory && held[n]->alloc.offset == mem.offset;
        n++;
        if (!reused)
            usleep(10000);
    }
    for (int i = 0; i < n; i++)
        nu_buffer_free(held[i]);
    assert_true(reused);
}

static void bad_input_is_refused(void **state)
{
    nu_kernel *add;
    NT_OK(nu_kernel_builtin(dev, "add_f32", &add));
    nu_buffer *a = buffer(1024, NU_STORAGE_PRIVATE), *freed = buffer(64, NU_STORAGE_PRIVATE);
    nu_buffer_free(freed);
    uint32_t n = 256, groups[3] = {1, 1, 1};
    nu_binding ok[3] = {{a, NU_ACCESS_WRITE, 0, 0}, {a, NU_ACCESS_READ, 0, 0}, {a, NU_ACCESS_READ, 0, 0}};
    nu_commands *c = commands(NU_QUEUE_COMPUTE);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_dispatch(c, add, groups, ok, 2, &n, 4));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_dispatch(c, add, groups, ok, 3, &n, 8));
    nu_binding range[3] = {{a, NU_ACCESS_WRITE, 1000, 100}, {a, NU_ACCESS_READ, 0, 0}, {a, NU_ACCESS_READ, 0, 0}};
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_commands_dispatch(c, add, groups, range, 3, &n, 4));
    nu_binding odd[3] = {{a, NU_ACCESS_WRITE, 4, 16}, {a, NU_ACCESS_READ, 0, 0}, {a, NU_ACCESS_READ, 0, 0}};
    if (nu_device_get_info(dev)->min_storage_buffer_offset_alignment > 4)
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_dispatch(c, add, groups, odd, 3, &n, 4));
    nu_binding none[3] = {{a, 0, 0, 0}, {a, NU_ACCESS_READ, 0, 0}, {a, NU_ACCESS_READ, 0, 0}};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_dispatch(c, add, groups, none, 3, &n, 4));
    uint32_t huge[3] = {UINT32_MAX, 1, 1};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_dispatch(c, add, huge, ok, 3, &n, 4));
    NT_STATUS(NU_ERROR_INVALID_HANDLE, nu_commands_fill(c, freed, 0, 4, 0));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_fill(c, a, 2, 4, 0));
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_commands_copy(c, a, 0, a, 1000, 100));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_copy(c, a, 0, a, 8, 100)); /* overlap */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_wait(c, 0));              /* not committed */
    a->read_only = true;
    NT_STATUS(NU_ERROR_READ_ONLY, nu_commands_fill(c, a, 0, 4, 0));
    a->read_only = false;
    run(c);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_commit(c)); /* twice */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_fill(c, a, 0, 4, 0));
    nu_commands_free(c);
    nu_commands *t = commands(NU_QUEUE_TRANSFER);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_dispatch(t, add, groups, ok, 3, &n, 4));
    nu_commands_free(t);
    nu_commands *x;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_commands_new(dev, (nu_queue)5, &x));
    assert_null(x);
    nu_buffer_free(a);
    nu_kernel_free(add);
}

typedef struct worker {
    int index;
    const char *error;
} worker;

static void *record_and_commit(void *arg)
{
    worker *w = arg;
    for (int round = 0; round < 20 && !w->error; round++) {
        nu_buffer *a, *b;
        nu_commands *c;
        uint32_t value = (uint32_t)(w->index * 1000 + round), got[64];
        if (nu_buffer_new(dev, 256, NU_STORAGE_PRIVATE, &a) || nu_buffer_new_gpu(dev, 256, NU_STORAGE_PRIVATE, &b) ||
            nu_commands_new(dev, round % 3 ? NU_QUEUE_COMPUTE : NU_QUEUE_TRANSFER, &c)) {
            w->error = "setup failed";
            break;
        }
        if (nu_commands_fill(c, a, 0, 256, value) || nu_commands_copy(c, b, 0, a, 0, 256) ||
            nu_commands_download(c, b, 0, got, 256) || nu_commands_commit(c) ||
            nu_commands_wait(c, NU_WAIT_FOREVER))
            w->error = "recording or running failed";
        for (int i = 0; i < 64 && !w->error; i++)
            if (got[i] != value)
                w->error = "wrong bytes";
        nu_commands_free(c);
        nu_buffer_free(a);
        nu_buffer_free(b);
    }
    return NULL;
}

/* The completion thread lingering on the queues between round trips (the default on GPUs):
 * round trips and background completion still work, and closing does not hang. */
static void a_lingering_completion_thread_works(void **state)
{
    nu__submitter_set_linger(dev, 2000000);
    nu_buffer *a = buffer(4096, NU_STORAGE_PRIVATE);
    for (int i = 0; i < 20; i++) {
        nu_commands *c = commands(i % 2 ? NU_QUEUE_TRANSFER : NU_QUEUE_COMPUTE);
        uint32_t got[4];
        NT_OK(nu_commands_fill(c, a, 0, 4096, (uint32_t)i));
        NT_OK(nu_commands_download(c, a, 0, got, sizeof got));
        run(c);
        assert_int_equal(got[3], i);
        nu_commands_free(c);
        if (i % 5 == 4)
            usleep(3000); /* past the linger: the thread sleeps, the next commit wakes it */
    }
    nu_buffer_free(a);
    nu__submitter_set_linger(dev, 0);
}

static void threads_record_and_commit_at_once(void **state)
{
    pthread_t t[8];
    worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (worker){i, NULL};
        assert_int_equal(pthread_create(&t[i], NULL, record_and_commit, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        if (w[i].error)
            fail_msg("thread %d: %s", i, w[i].error);
    }
}

/* nuvec knows what its own kernels touch: `count` elements of each binding. A range that
 * holds fewer (an empty one too) is refused, and nothing is recorded; other kernels are not
 * checked (nuvec cannot know what they touch). */
static void builtin_kernels_need_count_elements_in_each_binding(void **state)
{
    nu_kernel *add, *fill, *axpy;
    NT_OK(nu_kernel_builtin(dev, "add_f32", &add));
    NT_OK(nu_kernel_builtin(dev, "fill_u32", &fill));
    NT_OK(nu_kernel_builtin(dev, "axpy_f32", &axpy));
    nu_buffer *x = buffer(1024, NU_STORAGE_PRIVATE), *e = buffer(0, NU_STORAGE_PRIVATE);
    uint32_t n = 256, groups[3] = {1, 1, 1};
    nu_commands *c = commands(NU_QUEUE_COMPUTE);
    /* An empty binding where the count says 256 floats are read. */
    nu_binding b1[3] = {{x, NU_ACCESS_WRITE, 0, 0}, {e, NU_ACCESS_READ, 0, 0}, {x, NU_ACCESS_READ, 0, 0}};
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_commands_dispatch(c, add, groups, b1, 3, &n, 4));
    assert_non_null(strstr(nu_error_message(dev), "binding 1's range holds 0 bytes"));
    /* A range one element short, and an offset at the end (empty). */
    nu_binding b2[3] = {{x, NU_ACCESS_WRITE, 0, 1020}, {x, NU_ACCESS_READ, 0, 0}, {x, NU_ACCESS_READ, 0, 0}};
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_commands_dispatch(c, add, groups, b2, 3, &n, 4));
    uint32_t push[2] = {5, 1};
    nu_binding end = {x, NU_ACCESS_WRITE, 1024, 0};
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_commands_dispatch(c, fill, groups, &end, 1, push, sizeof push));
    /* axpy's count is its second push constant. */
    struct {
        float alpha;
        uint32_t count;
    } ax = {2.0f, 257};
    nu_binding b3[2] = {{x, NU_ACCESS_READ_WRITE, 0, 0}, {x, NU_ACCESS_READ, 0, 0}};
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_commands_dispatch(c, axpy, groups, b3, 2, &ax, sizeof ax));
    assert_int_equal(c->s.use_count, 0);
    /* Exactly enough, and none at all, are fine. */
    NT_OK(nu_commands_dispatch(c, fill, groups, &end, 1, (uint32_t[2]){5, 0}, 8));
    nu_binding last = {x, NU_ACCESS_WRITE, 768, 256};
    push[1] = 64;
    NT_OK(nu_commands_dispatch(c, fill, groups, &last, 1, push, sizeof push));
    run(c);
    expect_words(x, 768, 64, 5);
    nu_commands_free(c);
    nu_buffer_free(x);
    nu_buffer_free(e);
    nu_kernel_free(add);
    nu_kernel_free(fill);
    nu_kernel_free(axpy);
}

/* The staging memory of uploads and downloads is nuvec's, not the user's: it counts in
 * neither `buffers` nor `active` (nuvec/memory.h), while recorded, in flight or after. */
static void staging_is_not_in_the_users_statistics(void **state)
{
    nu_memory_clear_cache(dev);
    nu_memory_reset_peak(dev);
    nu_memory_stats before, s;
    NT_OK(nu_memory_get_stats(dev, &before));
    nu_buffer *a = buffer(65536, NU_STORAGE_PRIVATE);
    static uint8_t up[65536], down[65536];
    memset(up, 3, sizeof up);
    nu_commands *c = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_upload(c, a, 0, up, sizeof up));
    NT_OK(nu_commands_download(c, a, 0, down, sizeof down));
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.buffers, before.buffers + 1);
    assert_int_equal(s.active, before.active + 65536);
    assert_int_equal(s.peak, before.active + 65536);
    assert_int_equal(s.pending, before.pending + 2 * 65536);
    assert_true(s.reserved >= s.active + s.pending);
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.buffers, before.buffers + 1);
    assert_int_equal(s.active, before.active + 65536);
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    assert_int_equal(down[65535], 3);
    nu_commands_free(c);
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.buffers, before.buffers + 1);
    assert_int_equal(s.active, before.active + 65536);
    assert_int_equal(s.peak, before.active + 65536);
    assert_int_equal(s.pending, before.pending); /* freed at completion, into the cache */
    nu_buffer_free(a);
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.buffers, before.buffers);
    assert_int_equal(s.active, before.active);
}

/* Freeing a committed command buffer without waiting is documented use: completion (on the
 * device's thread) then frees it, and the state it writes there is not read unlocked by the
 * freeing thread (ThreadSanitizer, `make tsan`, watches). The work completes during the
 * pause, before the free, half the time. */
static void committed_work_freed_without_waiting(void **state)
{
    nu_buffer *a = buffer(1024, NU_STORAGE_PRIVATE);
    for (int i = 0; i < 40; i++) {
        nu_commands *c = commands(i % 4 == 3 ? NU_QUEUE_TRANSFER : NU_QUEUE_COMPUTE);
        NT_OK(nu_commands_fill(c, a, 0, 1024, (uint32_t)i));
        NT_OK(nu_commands_commit(c));
        if (i % 2)
            usleep(2000);
        nu_commands_free(c);
    }
    NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));
    expect_words(a, 0, 256, 39);
    nu_buffer_free(a);
}

/* Runs last: the device stays lost. */
static void a_lost_device_is_reported_and_nothing_hangs(void **state)
{
    nu_buffer *a = buffer(4096, NU_STORAGE_PRIVATE);
    nu_commands *c = commands(NU_QUEUE_COMPUTE), *d = commands(NU_QUEUE_COMPUTE);
    NT_OK(nu_commands_fill(c, a, 0, 4096, 1));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_fill(d, a, 0, 4096, 2));
    nu__device_simulate_loss(dev);
    NT_STATUS(NU_ERROR_DEVICE_LOST, nu_commands_commit(d));
    nu_status st = nu_commands_wait(c, NU_WAIT_FOREVER); /* completed before, or lost: no hang */
    assert_true(st == NU_OK || st == NU_ERROR_DEVICE_LOST);
    nu_commands *e;
    NT_STATUS(NU_ERROR_DEVICE_LOST, nu_commands_new(dev, NU_QUEUE_COMPUTE, &e));
    nu_commands_free(c);
    nu_commands_free(d);
    assert_false(nu_buffer_in_use(a));
    NT_OK(nu_buffer_free(a));
    nu_memory_stats s;
    NT_OK(nu_memory_get_stats(dev, &s));
    assert_int_equal(s.active, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fill_copy_upload_download),
        cmocka_unit_test(barriers_exactly_where_needed),
        cmocka_unit_test(empty_bindings_need_no_barrier),
        cmocka_unit_test(cpu_access_follows_committed_work_only),
        cmocka_unit_test(commit_order_is_program_order),
        cmocka_unit_test(transfer_and_compute_queues_are_ordered),
        cmocka_unit_test(in_flight_memory_is_reused_safely),
        cmocka_unit_test(cpu_access_to_reused_memory_waits),
        cmocka_unit_test(completion_needs_no_polling),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(a_lingering_completion_thread_works),
        cmocka_unit_test(threads_record_and_commit_at_once),
        cmocka_unit_test(builtin_kernels_need_count_elements_in_each_binding),
        cmocka_unit_test(staging_is_not_in_the_users_statistics),
        cmocka_unit_test(committed_work_freed_without_waiting),
        cmocka_unit_test(a_lost_device_is_reported_and_nothing_hangs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
