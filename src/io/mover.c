/* mover.c: moving byte ranges of a mapped file (or any buffer) into a buffer on the transfer
 * queue (nu_buffer_move_ranges, nu_buffer_move_to_device; see nuvec/mapped.h).
 *
 * Pinning pages costs about as much CPU time as the DMA of them takes on the bus, so several
 * threads prepare chunks while the transfer queue copies earlier ones. A chunk is an internal
 * buffer over its pages, imported (unpinned when its copy completes), or, where the device
 * cannot import them, a slot of one pinned staging buffer the threads copy the mapping into.
 * The moving thread records the copies with nu_commands_copy (hazard tracking orders them
 * against other GPU work on the destination), the chunks ready at that moment in one command
 * buffer, and keeps up to IN_FLIGHT_BYTES of chunks prepared or in flight: on the H200 a ring
 * of 10 chunks left the bus idle a third of the time, and a submission per chunk ~10 us
 * between copies. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/host.h"
#include "exec/commands.h"
#include "memory/buffer.h"
#include "memory/mapped.h"
#include "nuvec/command.h"
#include "nuvec/mapped.h"

/* Defaults measured on the H200 (bench/RESULTS.md, 2026-11-30), staged moves of a 16 GiB file
 * in the page cache: 8 threads with 4 MiB chunks 38.1 GB/s into an allocated buffer (0.93x the
 * pinned copy); end to end with the allocation, 8 threads 20.6-21.0 GB/s at 4-16 MiB chunks, 12
 * threads 22.2-23.7, 4 threads 12.2-15.4. */
#define DEFAULT_CHUNK (4ull << 20)
/* Import threads: 8 by default (no more than the CPUs), at most MAX_THREADS when asked. */
#define DEFAULT_THREADS 8u
#define MAX_THREADS 16u
/* Bytes per commit when the source needs no preparation (already on the GPU). */
#define COPY_GROUP (256ull << 20)
/* Copies in flight at least (the only bound when the source is on the GPU). */
#define COPIES_IN_FLIGHT 2u
/* Chunks prepared or in flight, as bytes: 128 MiB (32 chunks of 4 MiB) keeps the H200's bus
 * busy while threads stage the next chunks (a ring of 10 staging chunks moved 30.7 GB/s, 32 of
 * them 45.9 GB/s against 48.9 GB/s for a pinned copy; bench/RESULTS.md, 2026-11-30). At least
 * threads + COPIES_IN_FLIGHT chunks, at most MAX_SLOTS. */
#define IN_FLIGHT_BYTES (128ull << 20)
#define MAX_SLOTS 256u
/* Prepared chunks recorded into one command buffer, at most (and at most half the slots). */
#define MAX_BATCH_BYTES (32ull << 20)
/* While the mover waits for a chunk, completed copies are retired this often. */
#define RETIRE_POLL_NS 50000u

/* ---- moving ranges into a buffer ------------------------------------------------------ */

/* A piece of a range within one chunk. */
typedef struct piece {
    uint64_t src, dst, size;
} piece;

typedef struct mover {
    nu_device *d;
    nu_buffer *src, *dst;
    bool import;          /* chunks are prepared by import workers (imported, or read into staging) */
    uint64_t chunk;       /* bytes */
    uint64_t *chunks;     /* first byte of each chunk holding range bytes */
    size_t chunk_count;
    nu_range_copy *ranges; /* by source offset */
    size_t range_count;

    /* Import workers: chunk k is imported into ready[k] (or fails with status[k]). At most
     * `slots` chunks are imported but not yet copied and waited for, which bounds pinned memory. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    size_t next;          /* next chunk to import */
    unsigned outstanding, slots;
    bool stop;
    nu_buffer **ready;
    nu_status *status;
    bool *done;
    /* Where the device cannot import the file's pages: one pinned buffer of `slots` chunks,
     * chunk k staged in slot k % slots (free by then: chunks are taken and retired in order,
     * and at most `slots` are outstanding). */
    nu_buffer *staging;
} mover;

static int by_src(const void *a, const void *b)
{
    const nu_range_copy *x = a, *y = b;
    return x->src_offset < y->src_offset ? -1 : x->src_offset > y->src_offset;
}

static int by_dst(const void *a, const void *b)
{
    const nu_range_copy *x = a, *y = b;
    return x->dst_offset < y->dst_offset ? -1 : x->dst_offset > y->dst_offset;
}

/* Chunk k of the file as a buffer the transfer queue can copy from: an internal buffer over
 * its pages, imported now (zero-copy), or a pinned staging buffer the chunk is read into. */
static nu_status prepare_chunk(mover *mv, size_t k, nu_buffer **out)
{
    nu_buffer *src = mv->src;
    nu__file_view fm = nu__mapping_view(src);
    uint64_t start = mv->chunks[k], len = fm.map_len - start < mv->chunk ? fm.map_len - start : mv->chunk;
    nu_status st = nu__buffer_backing_check(src, "nu_buffer_move_ranges");
    if (st != NU_OK)
        return st;
    nu_buffer *b = NULL;
    if (!fm.zero_copy) {
        uint64_t bytes = fm.file_size - start < len ? fm.file_size - start : len;
        b = mv->staging;
        /* From the mapping rather than pread: 45.9 against 41.0 GB/s end to end on the H200
         * (8 threads, 32 chunks of 4 MiB). The file's size was checked just above; a file
         * truncated during the copy faults, as any read of the mapping would (nuvec/mapped.h). */
        memcpy((uint8_t *)b->alloc.mapped + (k % mv->slots) * mv->chunk, fm.base + start, (size_t)bytes);
        *out = b;
        return NU_OK;
    }
    return nu__mapping_chunk(src, start, len, k, out);
}

static void *import_worker(void *arg)
{
    mover *mv = arg;
    pthread_mutex_lock(&mv->lock);
    for (;;) {
        while (!mv->stop && mv->next < mv->chunk_count && mv->outstanding >= mv->slots)
            pthread_cond_wait(&mv->cond, &mv->lock);
        if (mv->stop || mv->next >= mv->chunk_count)
            break;
        size_t k = mv->next++;
        mv->outstanding++;
        pthread_mutex_unlock(&mv->lock);
        nu_buffer *b = NULL;
        nu_status st = prepare_chunk(mv, k, &b);
        pthread_mutex_lock(&mv->lock);
        mv->ready[k] = b;
        mv->status[k] = st;
        mv->done[k] = true;
        pthread_cond_broadcast(&mv->cond);
    }
    pthread_mutex_unlock(&mv->lock);
    return NULL;
}

/* Records into c the copies of chunk k's pieces from `from`, which holds the chunk's first
 * byte at offset `at`, adding their size to *bytes. *cursor walks the ranges sorted by source. */
static nu_status copy_chunk(mover *mv, size_t k, nu_buffer *from, uint64_t at, size_t *cursor, uint64_t *bytes,
                            nu_commands *c)
{
    uint64_t start = mv->chunks[k], end = start + mv->chunk;
    nu_status st = NU_OK;
    /* Ranges before the cursor ended before this chunk (chunks come in file order). */
    while (*cursor < mv->range_count && mv->ranges[*cursor].src_offset + mv->ranges[*cursor].size <= start)
        (*cursor)++;
    for (size_t i = *cursor; i < mv->range_count && st == NU_OK; i++) {
        const nu_range_copy *r = &mv->ranges[i];
        if (r->src_offset >= end)
            break;
        uint64_t a = r->src_offset > start ? r->src_offset : start;
        uint64_t b = r->src_offset + r->size < end ? r->src_offset + r->size : end;
        if (a < b) {
            st = nu_commands_copy(c, mv->dst, r->dst_offset + (a - r->src_offset), from, at + (a - start), b - a);
            *bytes += b - a;
        }
    }
    return st;
}

/* Copies committed and not yet retired, oldest first. */
typedef struct flights {
    nu_commands **c;
    uint64_t *bytes;
    unsigned *chunks;     /* chunks each copies */
    unsigned count, capacity;
} flights;

/* Waits for the oldest copy in flight, frees its chunk's slot and reports progress. */
static nu_status retire(mover *mv, flights *f, uint64_t *done, uint64_t total, const nu_move_options *o)
{
    nu_status st = nu_commands_wait(f->c[0], NU_WAIT_FOREVER);
    nu_commands_free(f->c[0]);
    *done += f->bytes[0];
    unsigned chunks = f->chunks[0];
    f->count--;
    memmove(f->c, f->c + 1, f->count * sizeof *f->c);
    memmove(f->bytes, f->bytes + 1, f->count * sizeof *f->bytes);
    memmove(f->chunks, f->chunks + 1, f->count * sizeof *f->chunks);
    if (mv->import) {
        pthread_mutex_lock(&mv->lock);
        mv->outstanding -= chunks;
        pthread_cond_broadcast(&mv->cond);
        pthread_mutex_unlock(&mv->lock);
    }
    if (st == NU_OK && o->progress)
        o->progress(o->user, *done, total);
    return st;
}

/* Retires the copies that have completed, without blocking. */
static nu_status retire_completed(mover *mv, flights *f, uint64_t *done, uint64_t total, const nu_move_options *o)
{
    nu_status st = NU_OK;
    while (st == NU_OK && f->count && nu__submission_reached(&f->c[0]->s))
        st = retire(mv, f, done, total, o);
    return st;
}

/* Takes chunk k once worker threads prepared it: waiting for it (retiring completed copies
 * meanwhile: their slots let the workers go on), or if `wait` is false, only if it is ready
 * (else *from stays NULL). */
static nu_status take_chunk(mover *mv, size_t k, bool wait, flights *f, uint64_t *done, uint64_t total,
                            const nu_move_options *o, nu_buffer **from)
{
    nu_status st = NU_OK;
    *from = NULL;
    pthread_mutex_lock(&mv->lock);
    if (!wait && !mv->done[k]) {
        pthread_mutex_unlock(&mv->lock);
        return NU_OK;
    }
    while (!mv->done[k] && st == NU_OK) {
        if (!f->count) {
            pthread_cond_wait(&mv->cond, &mv->lock);
            continue;
        }
        struct timespec ts = nu__deadline_after(CLOCK_REALTIME, RETIRE_POLL_NS);
        pthread_cond_timedwait(&mv->cond, &mv->lock, &ts);
        pthread_mutex_unlock(&mv->lock);
        st = retire_completed(mv, f, done, total, o);
        pthread_mutex_lock(&mv->lock);
    }
    if (st == NU_OK) {
        *from = mv->ready[k];
        mv->ready[k] = NULL;
        st = mv->status[k];
    }
    pthread_mutex_unlock(&mv->lock);
    return st;
}

static nu_status run_moves(mover *mv, uint64_t total, const nu_move_options *o)
{
    nu_status st = NU_OK;
    pthread_t threads[MAX_THREADS];
    unsigned nthreads = 0;
    /* Copies in flight: enough to keep the bus busy while chunks are prepared (bounded by
     * IN_FLIGHT_BYTES, at least two), or the group count when the source is on the GPU. */
    unsigned cap = COPIES_IN_FLIGHT;
    if (mv->import) {
        unsigned want = o->threads ? o->threads : DEFAULT_THREADS;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (!o->threads && cpus > 0 && (unsigned long)cpus < want)
            want = (unsigned)cpus;
        if (want > MAX_THREADS)
            want = MAX_THREADS;
        if ((size_t)want > mv->chunk_count)
            want = (unsigned)mv->chunk_count;
        uint64_t by_bytes = IN_FLIGHT_BYTES / mv->chunk;
        mv->slots = by_bytes > want + COPIES_IN_FLIGHT ? (unsigned)(by_bytes < MAX_SLOTS ? by_bytes : MAX_SLOTS)
                                                        : want + COPIES_IN_FLIGHT;
        if (mv->slots > mv->chunk_count)
            mv->slots = (unsigned)mv->chunk_count;
        cap = mv->slots;
        if (!nu__mapping_view(mv->src).zero_copy &&
            (st = nu__buffer_create(mv->d, (size_t)(mv->slots * mv->chunk), NU_STORAGE_SHARED, false, &mv->staging)) !=
                NU_OK)
            return st;
        if (mv->staging)
            snprintf(mv->staging->name, sizeof mv->staging->name, "file staging (%u chunks)", mv->slots);
        for (unsigned i = 0; i < want; i++)
            if (pthread_create(&threads[nthreads], NULL, import_worker, mv) == 0)
                nthreads++;
    }
    flights f = {.c = nu__malloc((cap + 1) * sizeof *f.c), .bytes = nu__malloc((cap + 1) * sizeof *f.bytes),
                 .chunks = nu__malloc((cap + 1) * sizeof *f.chunks), .capacity = cap};
    if (!f.c || !f.bytes || !f.chunks)
        st = nu__fail(mv->d, NU_ERROR_HOST_OUT_OF_MEMORY, "nu_buffer_move_ranges: out of host memory");
    /* Chunks prepared by the time one is committed go in the same command buffer: each
     * submission costs the transfer queue ~10 us of idle time between copies on the H200. */
    unsigned batch = 1;
    if (mv->import) {
        /* at most MAX_BATCH_BYTES, half the slots, and an eighth of the chunks (progress
         * is reported per command buffer: a small move still reports several times) */
        uint64_t b = MAX_BATCH_BYTES / mv->chunk;
        if (b > mv->slots / 2)
            b = mv->slots / 2;
        if (b > mv->chunk_count / 8)
            b = mv->chunk_count / 8;
        batch = b < 1 ? 1 : (unsigned)b;
    }
    uint64_t done = 0;
    size_t cursor = 0;
    for (size_t k = 0; k < mv->chunk_count && st == NU_OK;) {
        nu_commands *c;
        if ((st = nu_commands_new(mv->d, NU_QUEUE_TRANSFER, &c)) != NU_OK)
            break;
        nu_commands_set_name(c, "nu_buffer_move_ranges");
        uint64_t bytes = 0;
        unsigned n = 0;
        while (st == NU_OK && k < mv->chunk_count && n < batch) {
            nu_buffer *from = mv->src;
            uint64_t at = mv->chunks[k]; /* the file itself (on the GPU already) */
            if (mv->import) {
                if (nthreads) {
                    st = take_chunk(mv, k, n == 0, &f, &done, total, o, &from);
                    if (st == NU_OK && !from)
                        break; /* not prepared yet: commit what is recorded */
                } else { /* no thread could start: prepare here, once chunk k's slot is free */
                    while (st == NU_OK && mv->outstanding >= mv->slots && f.count)
                        st = retire(mv, &f, &done, total, o);
                    if (st != NU_OK)
                        break;
                    pthread_mutex_lock(&mv->lock);
                    mv->outstanding++;
                    pthread_mutex_unlock(&mv->lock);
                    st = prepare_chunk(mv, k, &from);
                }
                if (st != NU_OK)
                    break;
                at = from == mv->staging ? (k % mv->slots) * mv->chunk : 0;
            }
            st = copy_chunk(mv, k, from, at, &cursor, &bytes, c);
            if (mv->import && from != mv->staging)
                nu_buffer_free(from); /* unpinned when its copy completes */
            k++;
            n++;
        }
        if (st == NU_OK)
            st = nu_commands_commit(c);
        if (st != NU_OK) {
            nu_commands_free(c);
            break;
        }
        f.c[f.count] = c;
        f.bytes[f.count] = bytes;
        f.chunks[f.count++] = n;
        st = retire_completed(mv, &f, &done, total, o);
        if (st == NU_OK && f.count > f.capacity)
            st = retire(mv, &f, &done, total, o);
    }
    while (f.count) {
        nu_status s2 = retire(mv, &f, &done, total, o);
        if (st == NU_OK)
            st = s2;
    }
    nu__free(f.c);
    nu__free(f.bytes);
    nu__free(f.chunks);
    if (nthreads) {
        pthread_mutex_lock(&mv->lock);
        mv->stop = true;
        pthread_cond_broadcast(&mv->cond);
        pthread_mutex_unlock(&mv->lock);
        for (unsigned i = 0; i < nthreads; i++)
            pthread_join(threads[i], NULL);
        for (size_t k = 0; k < mv->chunk_count; k++)
            if (mv->ready[k] != mv->staging)
                nu_buffer_free(mv->ready[k]); /* imported after a failure, never copied */
    }
    nu_buffer_free(mv->staging); /* back to the cache when its last copy completes */
    return st;
}

nu_status nu_buffer_move_ranges(nu_buffer *dst, nu_buffer *src, const nu_range_copy *ranges, size_t count,
                                const nu_move_options *options)
{
    static const char fn[] = "nu_buffer_move_ranges";
    nu_status st;
    if ((st = nu__buffer_check(dst, fn)) != NU_OK || (st = nu__buffer_check(src, fn)) != NU_OK)
        return st;
    nu_device *d = dst->device;
    if (src->device != d)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the buffers belong to different devices", fn);
    if (dst->read_only)
        return nu__fail(d, NU_ERROR_READ_ONLY, "%s: the destination is read-only (a mapped file)", fn);
    if (count && !ranges)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL ranges", fn);
    nu_move_options o = options ? *options : (nu_move_options){0};
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++) {
        const nu_range_copy *r = &ranges[i];
        if (r->src_offset > src->size || r->size > src->size - r->src_offset || r->dst_offset > dst->size ||
            r->size > dst->size - r->dst_offset)
            return nu__fail(d, NU_ERROR_OUT_OF_RANGE,
                            "%s: range %zu (%llu bytes from %llu to %llu) is outside the source (%zu bytes) or the "
                            "destination (%zu bytes)", fn, i, (unsigned long long)r->size,
                            (unsigned long long)r->src_offset, (unsigned long long)r->dst_offset, src->size, dst->size);
        total += r->size;
    }
    if ((st = nu__buffer_backing_check(src, fn)) != NU_OK)
        return st;
    mover mv = {.d = d, .src = src, .dst = dst};
    mv.ranges = nu__malloc((count ? count : 1) * sizeof *mv.ranges);
    if (!mv.ranges)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", fn);
    if (count)
        memcpy(mv.ranges, ranges, count * sizeof *ranges);
    qsort(mv.ranges, count, sizeof *mv.ranges, by_dst);
    for (size_t i = 1; i < count; i++)
        if (mv.ranges[i - 1].size && mv.ranges[i - 1].dst_offset + mv.ranges[i - 1].size > mv.ranges[i].dst_offset) {
            unsigned long long at = mv.ranges[i].dst_offset;
            nu__free(mv.ranges);
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: destination ranges overlap (at byte %llu)", fn, at);
        }
    qsort(mv.ranges, count, sizeof *mv.ranges, by_src);
    mv.range_count = count;
    /* Chunks are imported from the file's pages (or read into staging buffers where the device
     * cannot import them) unless the whole file already is on the GPU (it was bound), or the
     * source is not a file. */
    nu__file_view file = nu__mapping_view(src);
    mv.import = src->mapping && !file.imported;
    uint64_t align = nu__mapping_alignment(d);
    uint64_t chunk = o.chunk_size ? o.chunk_size : DEFAULT_CHUNK;
    /* Without chunks to prepare, a commit per default-sized chunk would only add submissions:
     * unless asked otherwise, copies are grouped (progress is reported per group). */
    if (!mv.import && !o.chunk_size)
        chunk = COPY_GROUP;
    mv.chunk = (chunk + align - 1) / align * align;
    /* The chunks that hold range bytes, in file order. */
    size_t cap = 0;
    for (size_t i = 0; i < count; i++)
        if (mv.ranges[i].size)
            cap += (size_t)((mv.ranges[i].src_offset + mv.ranges[i].size - 1) / mv.chunk -
                            mv.ranges[i].src_offset / mv.chunk + 1);
    mv.chunks = nu__malloc((cap ? cap : 1) * sizeof *mv.chunks);
    mv.ready = nu__calloc(cap ? cap : 1, sizeof *mv.ready);
    mv.status = nu__calloc(cap ? cap : 1, sizeof *mv.status);
    mv.done = nu__calloc(cap ? cap : 1, sizeof *mv.done);
    if (!mv.chunks || !mv.ready || !mv.status || !mv.done) {
        st = nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", fn);
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        if (!mv.ranges[i].size)
            continue;
        uint64_t first = mv.ranges[i].src_offset / mv.chunk;
        uint64_t last = (mv.ranges[i].src_offset + mv.ranges[i].size - 1) / mv.chunk;
        for (uint64_t c = first; c <= last; c++)
            if (!mv.chunk_count || mv.chunks[mv.chunk_count - 1] < c * mv.chunk)
                mv.chunks[mv.chunk_count++] = c * mv.chunk;
    }
    pthread_mutex_init(&mv.lock, NULL);
    pthread_cond_init(&mv.cond, NULL);
    st = run_moves(&mv, total, &o);
    pthread_cond_destroy(&mv.cond);
    pthread_mutex_destroy(&mv.lock);
out:
    nu__free(mv.ranges);
    nu__free(mv.chunks);
    nu__free(mv.ready);
    nu__free(mv.status);
    nu__free(mv.done);
    return st;
}

nu_status nu_buffer_move_to_device(nu_buffer *src, size_t offset, size_t size, const nu_move_options *options,
                                   nu_buffer **out)
{
    static const char fn[] = "nu_buffer_move_to_device";
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL out", fn);
    *out = NULL;
    nu_status st = nu__buffer_check(src, fn);
    if (st != NU_OK)
        return st;
    if (offset > src->size || size > src->size - offset)
        return nu__fail(src->device, NU_ERROR_OUT_OF_RANGE, "%s: bytes %zu..%zu are outside the buffer of %zu bytes",
                        fn, offset, offset + size, src->size);
    nu_buffer *b;
    if ((st = nu_buffer_new(src->device, size, NU_STORAGE_PRIVATE, &b)) != NU_OK)
        return st;
    nu_range_copy r = {.src_offset = offset, .dst_offset = 0, .size = size};
    st = nu_buffer_move_ranges(b, src, &r, 1, options);
    if (st != NU_OK) {
        nu_buffer_free(b);
        return st;
    }
    *out = b;
    return NU_OK;
}
