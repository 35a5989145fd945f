/* test_mapped.c: mapped files (nu_buffer_map_file) and moving them into device memory
 * (nu_buffer_move_ranges): zero-copy proven, read-only refusals, memory-limit accounting,
 * release after the last GPU use, a file that shrank, bad input, the copy fallback, and DMA
 * results compared byte for byte. */
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/host.h"
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

static void path_for(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/mapped_%d_%s", nt_tmp_dir(), (int)getpid(), name);
}

/* Writes `size` pseudo-random bytes (seeded) to `path`; returns them (free()). */
static uint8_t *write_file(const char *path, size_t size, uint64_t seed)
{
    uint8_t *bytes = malloc(size ? size : 1);
    assert_non_null(bytes);
    for (size_t i = 0; i < size; i++)
        bytes[i] = (uint8_t)nt_rand(&seed);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
    return bytes;
}

static void poke(const char *path, off_t at, uint8_t value)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, &value, 1, at), 1);
    close(fd);
}

/* Whether /proc/self/maps shows `path` mapped at `addr`. */
static bool mapped_at(const void *addr, const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)addr >= lo && (uintptr_t)addr < hi)
            found = strstr(line, strrchr(path, '/')) != NULL;
    }
    fclose(f);
    return found;
}

static uint64_t active(void)
{
    nu_memory_stats s;
    nu_memory_get_stats(dev, &s);
    return s.active;
}

/* The buffer's bytes are the file's page-cache pages: a change made before mapping is seen,
 * one made after mapping is seen by the CPU and by the GPU, the pointer is the file's mapping,
 * and no allocator memory or host copy of the file's size is made. */
static void zero_copy(void **state)
{
    char path[512];
    path_for(path, sizeof path, "zc");
    const size_t size = 3 * 65536 + 123;
    uint8_t *bytes = write_file(path, size, 1);
    poke(path, 77, (uint8_t)~bytes[77]);
    bytes[77] = (uint8_t)~bytes[77];

    nu_memory_stats before, after;
    nu_memory_get_stats(dev, &before);
    nu__host_count(1);
    int64_t host_before = nu__host_live();
    uint64_t allocations_before = nu__host_allocations();
    nu_buffer *b;
    NT_OK(nu_buffer_map_file(dev, path, &b));
    nu_memory_get_stats(dev, &after);
    /* The GPU reads the file's pages where the device imports them (lavapipe does; NVIDIA's
     * driver refuses file-backed pages): then the message says why. */
    bool gpu_zero_copy = nu_buffer_is_zero_copy(b);
    if (!gpu_zero_copy)
        assert_non_null(strstr(nu_error_message(dev), "cannot import the file's pages"));
    assert_true(nu_buffer_is_mapped_file(b));
    assert_true(nu_buffer_is_read_only(b));
    assert_int_equal(nu_buffer_size(b), size);
    assert_int_equal(nu_buffer_storage(b), NU_STORAGE_SHARED);
    /* Counted against the limit (whole pages), but no block of device memory was allocated. */
    assert_true(after.active - before.active >= size && after.active - before.active < size + 65536);
    assert_int_equal(after.blocks, before.blocks);
    /* A handful of small host allocations (the handle, the path), no copy. */
    assert_true(nu__host_allocations() - allocations_before < 8);
    assert_true(nu__host_live() - host_before < 8);

    const uint8_t *p;
    NT_OK(nu_buffer_contents(b, (const void **)&p));
    assert_true(mapped_at(p, path));
    assert_memory_equal(p, bytes, size);
    poke(path, 5, (uint8_t)~bytes[5]);
    bytes[5] = (uint8_t)~bytes[5];
    assert_int_equal(p[5], bytes[5]); /* the same pages */

    /* The GPU reads the same pages: a write to the file after the import is visible to it
     * (where it reads a copy, the copy is made at the first GPU use: the same holds). */
    nu_buffer *dst;
    NT_OK(nu_buffer_new(dev, size, NU_STORAGE_PRIVATE, &dst));
    nu_commands *c;
    NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_commands_copy(c, dst, 0, b, 0, size)); /* imports the file's pages (or copies them) */
    if (gpu_zero_copy) {
        poke(path, 4096 + 9, (uint8_t)~bytes[4096 + 9]);
        bytes[4096 + 9] = (uint8_t)~bytes[4096 + 9];
    } else {
        print_message("the GPU reads a copy here, not the file's pages: %s\n", nu_error_message(dev));
    }
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    uint8_t *out = malloc(size);
    NT_OK(nu_buffer_read(dst, 0, out, size));
    assert_memory_equal(out, bytes, size);

    NT_OK(nu_buffer_free(dst));
    NT_OK(nu_buffer_free(b));
    NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));
    assert_false(mapped_at(p, path));
    nu_memory_stats end;
    nu_memory_get_stats(dev, &end);
    assert_int_equal(end.active, before.active);
    free(out);
    free(bytes);
    unlink(path);
}

/* CPU writes and GPU writes are refused; reads are fine. */
static void read_only(void **state)
{
    char path[512];
    path_for(path, sizeof path, "ro");
    uint8_t *bytes = write_file(path, 4096, 2);
    nu_buffer *b, *other;
    NT_OK(nu_buffer_map_file(dev, path, &b));
    NT_OK(nu_buffer_new(dev, 4096, NU_STORAGE_SHARED, &other));
    uint8_t x[16] = {0};
    NT_STATUS(NU_ERROR_READ_ONLY, nu_buffer_write(b, 0, x, sizeof x));
    void *w;
    NT_STATUS(NU_ERROR_READ_ONLY, nu_buffer_contents_mut(b, &w));
    assert_null(w);
    nu_commands *c;
    NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_READ_ONLY, nu_commands_copy(c, b, 0, other, 0, 64));
    NT_STATUS(NU_ERROR_READ_ONLY, nu_commands_fill(c, b, 0, 64, 7));
    NT_STATUS(NU_ERROR_READ_ONLY, nu_commands_upload(c, b, 0, x, sizeof x));
    nu_kernel *fill;
    NT_OK(nu_kernel_builtin(dev, "fill_u32", &fill));
    uint32_t groups[3] = {1, 1, 1}, push[2] = {0, 16};
    nu_binding bind = {b, NU_ACCESS_WRITE, 0, 0};
    NT_STATUS(NU_ERROR_READ_ONLY, nu_commands_dispatch(c, fill, groups, &bind, 1, push, sizeof push));
    NT_STATUS(NU_ERROR_READ_ONLY, nu_buffer_move_ranges(b, other, &(nu_range_copy){0, 0, 16}, 1, NULL));
    /* Reads work. */
    NT_OK(nu_commands_copy(c, other, 0, b, 0, 4096));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    nu_kernel_free(fill);
    uint8_t out[4096];
    NT_OK(nu_buffer_read(other, 0, out, sizeof out));
    assert_memory_equal(out, bytes, sizeof out);
    NT_OK(nu_buffer_read(b, 100, out, 100));
    assert_memory_equal(out, bytes + 100, 100);
    NT_OK(nu_buffer_free(other));
    NT_OK(nu_buffer_free(b));
    free(bytes);
    unlink(path);
}

/* The mapping counts against the memory limit and is released after its last GPU use, even
 * when the buffer is freed first. */
static void limit_and_release(void **state)
{
    char path[512];
    path_for(path, sizeof path, "limit");
    const size_t size = 1 << 20;
    uint8_t *bytes = write_file(path, size, 3);
    NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));
    nu_memory_clear_cache(dev);
    uint64_t base = active(), old;
    NT_OK(nu_memory_set_limit(dev, base + size / 2, &old));
    nu_buffer *b;
    NT_STATUS(NU_ERROR_OUT_OF_MEMORY, nu_buffer_map_file(dev, path, &b));
    assert_null(b);
    assert_non_null(strstr(nu_error_message(NULL), "limit"));
    assert_int_equal(active(), base);
    NT_OK(nu_memory_set_limit(dev, old, NULL));

    NT_OK(nu_buffer_map_file(dev, path, &b));
    assert_int_equal(active(), base + size);
    const void *p;
    NT_OK(nu_buffer_contents(b, &p));
    nu_buffer *dst;
    NT_OK(nu_buffer_new(dev, size, NU_STORAGE_PRIVATE, &dst));
    nu_commands *c;
    NT_OK(nu_commands_new(dev, NU_QUEUE_TRANSFER, &c));
    NT_OK(nu_commands_copy(c, dst, 0, b, 0, size));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_buffer_free(b)); /* the copy still reads it: the mapping stays until it completes */
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));
    assert_false(mapped_at(p, path));
    uint8_t *out = malloc(size);
    NT_OK(nu_buffer_read(dst, 0, out, size));
    assert_memory_equal(out, bytes, size);
    NT_OK(nu_buffer_free(dst));
    nu_memory_clear_cache(dev);
    assert_int_equal(active(), base);
    free(out);
    free(bytes);
    unlink(path);
}

static void bad_input(void **state)
{
    nu_buffer *b = (nu_buffer *)1;
    NT_STATUS(NU_ERROR_IO, nu_buffer_map_file(dev, "/nonexistent/weights.bin", &b));
    assert_null(b);
    assert_non_null(strstr(nu_error_message(NULL), "/nonexistent/weights.bin"));
    assert_non_null(strstr(nu_error_message(NULL), "No such file"));
    NT_STATUS(NU_ERROR_IO, nu_buffer_map_file(dev, nt_tmp_dir(), &b));
    assert_non_null(strstr(nu_error_message(NULL), "directory"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_map_file(dev, NULL, &b));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_map_file(NULL, "x", &b));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_map_file(dev, "x", NULL));

    /* An empty file gives an empty buffer. */
    char path[512];
    path_for(path, sizeof path, "empty");
    free(write_file(path, 0, 0));
    NT_OK(nu_buffer_map_file(dev, path, &b));
    assert_int_equal(nu_buffer_size(b), 0);
    assert_true(nu_buffer_is_read_only(b));
    const void *p = (void *)1;
    NT_OK(nu_buffer_contents(b, &p));
    assert_null(p);
    NT_OK(nu_buffer_free(b));
    unlink(path);
}

/* A file truncated after mapping is refused before anything reads past its end. */
static void shrunk_file(void **state)
{
    char path[512];
    path_for(path, sizeof path, "shrink");
    uint8_t *bytes = write_file(path, 65536, 4);
    nu_buffer *b, *dst;
    NT_OK(nu_buffer_map_file(dev, path, &b));
    NT_OK(nu_buffer_new(dev, 65536, NU_STORAGE_PRIVATE, &dst));
    assert_int_equal(truncate(path, 1000), 0);
    uint8_t out[16];
    NT_STATUS(NU_ERROR_IO, nu_buffer_read(b, 60000, out, sizeof out));
    assert_non_null(strstr(nu_error_message(NULL), "changed size"));
    const void *p;
    NT_STATUS(NU_ERROR_IO, nu_buffer_contents(b, &p));
    nu_commands *c;
    NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
    NT_STATUS(NU_ERROR_IO, nu_commands_copy(c, dst, 0, b, 0, 65536));
    nu_commands_free(c);
    NT_STATUS(NU_ERROR_IO, nu_buffer_move_ranges(dst, b, &(nu_range_copy){0, 0, 65536}, 1, NULL));
    NT_OK(nu_buffer_free(dst));
    NT_OK(nu_buffer_free(b));
    free(bytes);
    unlink(path);
}

typedef struct progress_log {
    uint64_t last, total;
    int calls;
} progress_log;

static void on_progress(void *user, uint64_t done, uint64_t total)
{
    progress_log *l = user;
    assert_true(done > l->last || (done == 0 && total == 0));
    assert_true(done <= total);
    l->last = done;
    l->total = total;
    l->calls++;
}

/* Ranges of a file moved into a private buffer, chunk by chunk with several import threads:
 * ranges straddling chunks, gaps, a zero-size range, an unaligned one; every byte compared. */
static void move_ranges(void **state)
{
    char path[512];
    path_for(path, sizeof path, "move");
    const size_t size = 5 * 65536 + 4097;
    uint8_t *bytes = write_file(path, size, 5);
    nu_range_copy r[] = {
        {.src_offset = 3 * 65536 + 100, .dst_offset = 0, .size = 65536 + 4097 - 100 + 0},
        {.src_offset = 0, .dst_offset = 70000, .size = 65536 * 2 + 17},
        {.src_offset = 12345, .dst_offset = 300000, .size = 0},
        {.src_offset = 65536 - 3, .dst_offset = 210001, .size = 6}, /* straddles a chunk boundary */
        {.src_offset = size - 5, .dst_offset = 250000, .size = 5},  /* the file's last bytes */
    };
    const size_t n = sizeof r / sizeof r[0];
    for (int mode = 0; mode < 3; mode++) {
        nu_buffer *b, *dst;
        NT_OK(nu_buffer_map_file(dev, path, &b));
        NT_OK(nu_buffer_new(dev, 400000, NU_STORAGE_PRIVATE, &dst));
        uint8_t *zero = calloc(1, 400000);
        NT_OK(nu_buffer_write(dst, 0, zero, 400000));
        if (mode == 2) { /* the whole file imported first: copies from it directly */
            nu_commands *c;
            NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
            NT_OK(nu_commands_copy(c, dst, 0, b, 0, 16));
            NT_OK(nu_commands_commit(c));
            NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
            nu_commands_free(c);
            NT_OK(nu_buffer_write(dst, 0, zero, 16));
        }
        progress_log log = {0};
        nu_move_options o = {.chunk_size = 65536, .threads = mode == 0 ? 3 : 1, .progress = on_progress, .user = &log};
        NT_OK(nu_buffer_move_ranges(dst, b, r, n, &o));
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += r[i].size;
        assert_int_equal(log.last, total);
        assert_int_equal(log.total, total);
        assert_true(log.calls >= 3);
        uint8_t *out = malloc(400000), *want = calloc(1, 400000);
        for (size_t i = 0; i < n; i++)
            memcpy(want + r[i].dst_offset, bytes + r[i].src_offset, r[i].size);
        NT_OK(nu_buffer_read(dst, 0, out, 400000));
        assert_memory_equal(out, want, 400000);
        free(out);
        free(want);
        free(zero);
        NT_OK(nu_buffer_free(dst));
        NT_OK(nu_buffer_free(b));
    }
    NT_OK(nu_device_wait_idle(dev, NU_WAIT_FOREVER));

    /* nu_buffer_move_to_device, and refusals. */
    nu_buffer *b, *p;
    NT_OK(nu_buffer_map_file(dev, path, &b));
    NT_OK(nu_buffer_move_to_device(b, 1000, size - 1000, NULL, &p));
    assert_int_equal(nu_buffer_storage(p), NU_STORAGE_PRIVATE);
    uint8_t *out = malloc(size);
    NT_OK(nu_buffer_read(p, 0, out, size - 1000));
    assert_memory_equal(out, bytes + 1000, size - 1000);
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_buffer_move_ranges(p, b, &(nu_range_copy){size - 10, 0, 11}, 1, NULL));
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_buffer_move_ranges(p, b, &(nu_range_copy){0, size - 1000, 1}, 1, NULL));
    nu_range_copy overlap[] = {{0, 0, 100}, {200, 50, 100}};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_move_ranges(p, b, overlap, 2, NULL));
    assert_non_null(strstr(nu_error_message(NULL), "overlap"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_buffer_move_ranges(p, b, NULL, 1, NULL));
    NT_OK(nu_buffer_move_ranges(p, b, NULL, 0, NULL));
    nu_buffer *none = (nu_buffer *)1;
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_buffer_move_to_device(b, 0, size + 1, NULL, &none));
    assert_null(none);
    NT_OK(nu_buffer_free(p));
    NT_OK(nu_buffer_free(b));
    free(out);
    free(bytes);
    unlink(path);
}

/* nu_buffer_move_ranges from a buffer that is not a mapped file (documented: copied on the
 * GPU), shared and private, after committed work that writes it. */
static void move_ranges_from_any_buffer(void **state)
{
    enum { SIZE = 3 * 65536 + 12 };
    uint8_t *bytes = malloc(SIZE), *out = malloc(SIZE), *want = calloc(1, SIZE);
    for (size_t i = 0; i < SIZE; i++)
        bytes[i] = (uint8_t)(i * 7 + 1);
    for (int storage = 0; storage < 2; storage++) {
        nu_buffer *src, *dst;
        NT_OK(nu_buffer_from(dev, bytes, SIZE, (nu_storage)storage, &src));
        NT_OK(nu_buffer_new(dev, SIZE, NU_STORAGE_PRIVATE, &dst));
        NT_OK(nu_buffer_write(dst, 0, want, SIZE));
        nu_commands *c;
        NT_OK(nu_commands_new(dev, NU_QUEUE_COMPUTE, &c));
        NT_OK(nu_commands_fill(c, src, 0, 64, 0x0a0a0a0au));
        NT_OK(nu_commands_commit(c)); /* not waited for: the move is ordered after it */
        nu_range_copy r[] = {{0, 100, 64}, {65536 - 3, 70000, 65536 + 9}, {SIZE - 5, SIZE - 5, 5}};
        NT_OK(nu_buffer_move_ranges(dst, src, r, 3, &(nu_move_options){.chunk_size = 65536}));
        uint8_t *now = malloc(SIZE);
        memcpy(now, bytes, SIZE);
        memset(now, 0x0a, 64);
        memset(want, 0, SIZE);
        for (size_t i = 0; i < 3; i++)
            memcpy(want + r[i].dst_offset, now + r[i].src_offset, r[i].size);
        NT_OK(nu_buffer_read(dst, 0, out, SIZE));
        assert_memory_equal(out, want, SIZE);
        free(now);
        NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
        nu_commands_free(c);
        NT_OK(nu_buffer_free(dst));
        NT_OK(nu_buffer_free(src));
        memset(want, 0, SIZE);
    }
    free(bytes);
    free(out);
    free(want);
}

/* A large sparse file (its pages are the kernel's zero pages until written) moved in several
 * chunks with a few real bytes at the ends of chunks. */
static void large_sparse(void **state)
{
    char path[512];
    path_for(path, sizeof path, "sparse");
    const off_t size = 96 << 20;
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, size), 0);
    for (off_t at = 0; at < size; at += 16 << 20) {
        uint64_t mark = (uint64_t)at ^ 0x5eed;
        assert_int_equal(pwrite(fd, &mark, sizeof mark, at + (16 << 20) - 8), 8);
    }
    close(fd);
    nu_buffer *b, *p;
    NT_OK(nu_buffer_map_file(dev, path, &b));
    NT_OK(nu_buffer_move_to_device(b, 0, (size_t)size, &(nu_move_options){.chunk_size = 16 << 20}, &p));
    for (off_t at = 0; at < size; at += 16 << 20) {
        uint64_t mark, zero;
        NT_OK(nu_buffer_read(p, (size_t)(at + (16 << 20) - 8), &mark, 8));
        NT_OK(nu_buffer_read(p, (size_t)at, &zero, 8));
        assert_int_equal(mark, (uint64_t)at ^ 0x5eed);
        assert_int_equal(zero, 0);
    }
    NT_OK(nu_buffer_free(p));
    NT_OK(nu_buffer_free(b));
    unlink(path);
}

/* Where the device cannot import a file's pages (NVIDIA's driver; NUVEC_NO_HOST_IMPORT=1 here),
 * the file is still mapped for the CPU, the device's message says why the GPU cannot read it in
 * place, GPU work reads a copy made at its first use, and moves go through staging buffers. */
static void copy_fallback(void **state)
{
    char path[512];
    path_for(path, sizeof path, "fallback");
    const size_t size = 100000;
    uint8_t *bytes = write_file(path, size, 6);
    setenv("NUVEC_NO_HOST_IMPORT", "1", 1);
    nu_device *d2 = nt_open();
    unsetenv("NUVEC_NO_HOST_IMPORT");
    nu_buffer *b, *p, *q;
    NT_OK(nu_buffer_map_file(d2, path, &b));
    assert_false(nu_buffer_is_zero_copy(b));
    assert_true(nu_buffer_is_mapped_file(b));
    assert_true(nu_buffer_is_read_only(b));
    assert_non_null(strstr(nu_error_message(d2), "cannot import the file's pages"));
    const void *c;
    NT_OK(nu_buffer_contents(b, &c));
    assert_true(mapped_at(c, path)); /* the CPU still reads the page cache */
    assert_memory_equal(c, bytes, size);
    uint8_t x = 0;
    NT_STATUS(NU_ERROR_READ_ONLY, nu_buffer_write(b, 0, &x, 1));
    /* Staged moves, several threads, chunks smaller than the file. */
    NT_OK(nu_buffer_move_to_device(b, 10, size - 10, &(nu_move_options){.chunk_size = 4096, .threads = 3}, &p));
    uint8_t *out = malloc(size);
    NT_OK(nu_buffer_read(p, 0, out, size - 10));
    assert_memory_equal(out, bytes + 10, size - 10);
    /* GPU work on the mapped buffer reads a copy, made now. */
    NT_OK(nu_buffer_new(d2, size, NU_STORAGE_PRIVATE, &q));
    nu_commands *cmd;
    NT_OK(nu_commands_new(d2, NU_QUEUE_COMPUTE, &cmd));
    NT_OK(nu_commands_copy(cmd, q, 0, b, 0, size));
    NT_OK(nu_commands_commit(cmd));
    NT_OK(nu_commands_wait(cmd, NU_WAIT_FOREVER));
    nu_commands_free(cmd);
    NT_OK(nu_buffer_read(q, 0, out, size));
    assert_memory_equal(out, bytes, size);
    /* Moves after that copy from it. */
    nu_buffer_free(p);
    NT_OK(nu_buffer_move_to_device(b, 0, size, NULL, &p));
    NT_OK(nu_buffer_read(p, 0, out, size));
    assert_memory_equal(out, bytes, size);
    free(out);
    NT_OK(nu_buffer_free(q));
    NT_OK(nu_buffer_free(p));
    NT_OK(nu_buffer_free(b));
    nt_close(d2);
    free(bytes);
    unlink(path);
}

/* Each buffer's backing (memory/backing.h): a pool buffer, an empty one, a mapped file's pages
 * (imported) or a copy (NUVEC_NO_HOST_IMPORT); a mapped file binds only once its first GPU use
 * was prepared, and preparing twice is harmless. */
static void backings_are_explicit(void **state)
{
    char path[512];
    path_for(path, sizeof path, "backing");
    uint8_t *bytes = write_file(path, 8192, 9);
    for (int copy = 0; copy < 2; copy++) {
        if (copy)
            setenv("NUVEC_NO_HOST_IMPORT", "1", 1);
        nu_device *d = nt_open();
        unsetenv("NUVEC_NO_HOST_IMPORT");
        nu_buffer *pool, *empty, *file;
        NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_PRIVATE, &pool));
        NT_OK(nu_buffer_new(d, 0, NU_STORAGE_PRIVATE, &empty));
        NT_OK(nu_buffer_map_file(d, path, &file));
        assert_int_equal(nu__buffer_backing(pool), NU__BACKING_POOL);
        assert_int_equal(nu__buffer_backing(empty), NU__BACKING_EMPTY);
        bool imports = nu_buffer_is_zero_copy(file);
        assert_int_equal(nu__buffer_backing(file), imports ? NU__BACKING_PAGES : NU__BACKING_FILE_COPY);
        if (copy)
            assert_false(imports);
        VkBuffer vb;
        VkDeviceSize off;
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu__buffer_binding(file, &vb, &off)); /* not prepared */
        NT_OK(nu__buffer_prepare(file));
        NT_OK(nu__buffer_prepare(file));
        NT_OK(nu__buffer_binding(file, &vb, &off));
        assert_true(vb != VK_NULL_HANDLE);
        assert_int_equal(off, 0);
        NT_OK(nu__buffer_prepare(pool)); /* nothing to do */
        NT_OK(nu__buffer_binding(pool, &vb, &off));
        NT_OK(nu_buffer_free(file));
        NT_OK(nu_buffer_free(empty));
        NT_OK(nu_buffer_free(pool));
        nt_close(d);
    }
    free(bytes);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zero_copy),         cmocka_unit_test(read_only),    cmocka_unit_test(limit_and_release),
        cmocka_unit_test(bad_input),         cmocka_unit_test(shrunk_file),  cmocka_unit_test(move_ranges),
        cmocka_unit_test(move_ranges_from_any_buffer),
        cmocka_unit_test(large_sparse),      cmocka_unit_test(copy_fallback),
        cmocka_unit_test(backings_are_explicit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
