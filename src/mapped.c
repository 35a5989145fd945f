/* mapped.c: files as buffers without a copy, and moving them into device memory (see
 * nuvec/mapped.h and the reference's map_file).
 *
 * A mapped file is a shared, read-only buffer with no allocator memory: its CPU pointer is the
 * mapping, and its VkBuffer is created on first GPU use by importing the mapping's pages
 * (VK_EXT_external_memory_host), which pins them. Importing at first use rather than at
 * nu_buffer_map_file keeps mapping cheap and lets nu_buffer_move_ranges pin the file chunk by
 * chunk instead of all at once.
 *
 * Moving: pinning pages costs about as much CPU time as the DMA of them takes on the bus, so
 * several threads prepare chunks while the transfer queue copies earlier ones. A chunk is an
 * internal buffer over its pages, imported (unpinned when its copy completes), or, where the
 * device cannot import them, a slot of one pinned staging buffer the threads copy the mapping
 * into. The moving thread records the copies with nu_commands_copy (hazard tracking orders
 * them against other GPU work on the destination), the chunks ready at that moment in one
 * command buffer, and keeps up to IN_FLIGHT_BYTES of chunks prepared or in flight: on the H200
 * a ring of 10 chunks left the bus idle a third of the time, and a submission per chunk ~10 us
 * between copies. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buffer.h"
#include "error.h"
#include "host.h"
#include "nuvec/command.h"
#include "nuvec/mapped.h"
#include "submit.h"

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

typedef struct nu__mapping {
    nu_device *device;
    int fd;               /* kept open to check the file's size before each import (-1: a chunk) */
    char *path;           /* for messages */
    uint8_t *base;        /* first byte of the file's pages */
    uint64_t map_len;     /* bytes mapped: the file's size rounded up to the import alignment */
    uint64_t file_size;
    uint64_t tracked;     /* bytes counted against the memory limit */
    nu_buffer *parent;    /* a chunk's file: kept alive (mapped) while the chunk is imported */
    bool zero_copy;       /* the device imports these pages; otherwise GPU work reads a copy */
    pthread_mutex_t lock; /* the import on first GPU use */
    nu__vk_block *_Atomic import;
} nu__mapping;

static uint64_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uint64_t)p : 4096;
}

/* Alignment of imported pointers and sizes: whole pages at least. */
static uint64_t import_alignment(nu_device *d)
{
    uint64_t a = d->info.min_imported_host_pointer_alignment, p = page_size();
    return a > p ? a : p;
}

/* ---- importing host pages -------------------------------------------------------------- */

/* A VkBuffer over `size` bytes of host memory at `ptr` (aligned), without a copy. */
static nu_status import_pages(nu_device *d, const char *what, uint8_t *ptr, uint64_t size, uint64_t bind_size,
                              nu__vk_block **out)
{
    *out = NULL;
    if (!d->has_external_host_memory || !d->vkd.vkGetMemoryHostPointerPropertiesEXT)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: the device cannot import host memory (no %s)", what,
                        "VK_EXT_external_memory_host");
    const VkExternalMemoryHandleTypeFlagBits type = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    VkMemoryHostPointerPropertiesEXT hp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    VkResult r = d->vkd.vkGetMemoryHostPointerPropertiesEXT(d->device, type, ptr, &hp);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "%s: the driver refuses to import the file's pages (%s)", what,
                        nu__vk_result_name(r));
    nu__vk_block *b = nu__calloc(1, sizeof *b);
    if (!b)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", what);
    uint32_t families[2] = {d->info.compute_queue_family, d->info.transfer_queue_family};
    VkExternalMemoryBufferCreateInfo ext = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
                                            .handleTypes = type};
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = &ext, .size = bind_size,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                             .sharingMode = d->info.separate_transfer_queue ? VK_SHARING_MODE_CONCURRENT
                                                                            : VK_SHARING_MODE_EXCLUSIVE,
                             .queueFamilyIndexCount = d->info.separate_transfer_queue ? 2 : 0,
                             .pQueueFamilyIndices = families};
    nu_status st = NU_OK;
    r = d->vkd.vkCreateBuffer(d->device, &bi, NULL, &b->buffer);
    if (r != VK_SUCCESS) {
        st = nu__fail(d, nu__vk_status(r), "%s: vkCreateBuffer failed (%s)", what, nu__vk_result_name(r));
        goto fail;
    }
    VkMemoryRequirements req;
    d->vkd.vkGetBufferMemoryRequirements(d->device, b->buffer, &req);
    uint32_t bits = req.memoryTypeBits & hp.memoryTypeBits;
    if (!bits || req.size > size) {
        st = nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: no memory type can hold both a buffer and imported host pages",
                      what);
        goto fail;
    }
    VkImportMemoryHostPointerInfoEXT imp = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
                                            .handleType = type, .pHostPointer = ptr};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &imp,
                               .allocationSize = size, .memoryTypeIndex = (uint32_t)__builtin_ctz(bits)};
    r = d->vkd.vkAllocateMemory(d->device, &ai, NULL, &b->memory);
    if (r != VK_SUCCESS) {
        b->memory = VK_NULL_HANDLE; /* not necessarily left untouched by a failed call */
        char n[32];
        st = nu__fail(d, nu__vk_status(r), "%s: importing %s of the file's pages failed (%s)", what,
                      nu__bytes(n, sizeof n, size), nu__vk_result_name(r));
        goto fail;
    }
    r = d->vkd.vkBindBufferMemory(d->device, b->buffer, b->memory, 0);
    if (r != VK_SUCCESS) {
        st = nu__fail(d, nu__vk_status(r), "%s: vkBindBufferMemory failed (%s)", what, nu__vk_result_name(r));
        goto fail;
    }
    b->mapped = ptr;
    *out = b;
    return NU_OK;
fail:
    if (b->memory)
        d->vkd.vkFreeMemory(d->device, b->memory, NULL);
    if (b->buffer)
        d->vkd.vkDestroyBuffer(d->device, b->buffer, NULL);
    nu__free(b);
    return st;
}

/* Drivers known to refuse a file's pages are never asked (at device open). NVIDIA's (580, on the H200)
 * imports only writable anonymous memory, fails a file mapping's import with
 * VK_ERROR_OUT_OF_DEVICE_MEMORY, and after that refusal fails every device-local
 * vkAllocateMemory of the device (measured: bench/RESULTS.md, "Weights"). */
void nu__mapping_device_init(nu_device *d)
{
    atomic_init(&d->file_import, 0);
    if (d->info.vendor_id == 0x10de && strstr(d->info.driver_name, "NVIDIA")) {
        snprintf(d->file_import_refusal, sizeof d->file_import_refusal,
                 "NVIDIA's driver imports only writable anonymous memory; asking it for a file's pages fails and "
                 "breaks later device allocations");
        atomic_store(&d->file_import, -1);
    }
}

/* Whether the device imports the pages at `ptr`: memory alone is imported and freed. */
static nu_status probe_import(nu_device *d, const char *what, void *ptr, uint64_t size)
{
    const VkExternalMemoryHandleTypeFlagBits type = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    VkMemoryHostPointerPropertiesEXT hp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    VkResult r = d->vkd.vkGetMemoryHostPointerPropertiesEXT(d->device, type, ptr, &hp);
    if (r == VK_SUCCESS && !hp.memoryTypeBits)
        r = VK_ERROR_INVALID_EXTERNAL_HANDLE;
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "%s: the driver refuses to import the file's pages (%s)", what,
                        nu__vk_result_name(r));
    VkImportMemoryHostPointerInfoEXT imp = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
                                            .handleType = type, .pHostPointer = ptr};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &imp,
                               .allocationSize = size, .memoryTypeIndex = (uint32_t)__builtin_ctz(hp.memoryTypeBits)};
    VkDeviceMemory m = VK_NULL_HANDLE;
    r = d->vkd.vkAllocateMemory(d->device, &ai, NULL, &m);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "%s: the driver refuses to import the file's pages (%s)", what,
                        nu__vk_result_name(r));
    d->vkd.vkFreeMemory(d->device, m, NULL);
    return NU_OK;
}

static void free_import(nu_device *d, nu__vk_block *b)
{
    if (!b)
        return;
    d->vkd.vkDestroyBuffer(d->device, b->buffer, NULL);
    d->vkd.vkFreeMemory(d->device, b->memory, NULL); /* unpins the pages */
    nu__free(b);
}

nu_status nu__mapping_check(nu_buffer *b, const char *fn)
{
    nu__mapping *m = b->mapping->parent ? b->mapping->parent->mapping : b->mapping;
    struct stat s;
    if (fstat(m->fd, &s) != 0)
        return nu__fail(b->device, NU_ERROR_IO, "%s: %s: %s", fn, m->path, strerror(errno));
    if ((uint64_t)s.st_size != m->file_size)
        return nu__fail(b->device, NU_ERROR_IO,
                        "%s: %s changed size since it was mapped (%llu bytes, now %llu): reading it would fault",
                        fn, m->path, (unsigned long long)m->file_size, (unsigned long long)s.st_size);
    return NU_OK;
}

/* Reads `size` bytes at `offset` of the file into `dst`: NU_ERROR_IO if the file shrank. */
static nu_status read_file(nu_device *d, const nu__mapping *m, uint8_t *dst, uint64_t offset, uint64_t size)
{
    for (uint64_t done = 0; done < size;) {
        uint64_t want = size - done > (1u << 30) ? (1u << 30) : size - done;
        ssize_t n = pread(m->fd, dst + done, (size_t)want, (off_t)(offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return nu__fail(d, NU_ERROR_IO, "%s: %s", m->path, n < 0 ? strerror(errno) : "the file shrank while being read");
        done += (uint64_t)n;
    }
    return NU_OK;
}

/* Reads [offset, offset + size) of the file into dst on up to DEFAULT_THREADS threads, in
 * DEFAULT_CHUNK pieces (one thread copies from the page cache at ~5 GB/s on the H200). */
typedef struct reader {
    nu_device *d;
    const nu__mapping *m;
    uint8_t *dst;
    uint64_t offset, size;
    atomic_uint_fast64_t next;
    atomic_int failed;
} reader;

static void *read_pieces(void *arg)
{
    reader *r = arg;
    for (;;) {
        uint64_t at = atomic_fetch_add(&r->next, DEFAULT_CHUNK);
        if (at >= r->size || atomic_load(&r->failed))
            return NULL;
        uint64_t n = r->size - at < DEFAULT_CHUNK ? r->size - at : DEFAULT_CHUNK;
        if (read_file(r->d, r->m, r->dst + at, r->offset + at, n) != NU_OK)
            atomic_store(&r->failed, 1);
    }
}

static nu_status read_file_parallel(nu_device *d, const nu__mapping *m, uint8_t *dst, uint64_t offset, uint64_t size)
{
    reader r = {.d = d, .m = m, .dst = dst, .offset = offset, .size = size};
    atomic_init(&r.next, 0);
    atomic_init(&r.failed, 0);
    pthread_t t[DEFAULT_THREADS];
    unsigned n = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned want = cpus > 0 && (unsigned long)cpus < DEFAULT_THREADS ? (unsigned)cpus : DEFAULT_THREADS;
    while (n + 1 < want && (uint64_t)(n + 1) * DEFAULT_CHUNK < size && pthread_create(&t[n], NULL, read_pieces, &r) == 0)
        n++;
    read_pieces(&r); /* this thread reads too */
    for (unsigned i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    if (atomic_load(&r.failed)) /* the message was recorded by the failing read */
        return nu__fail(d, NU_ERROR_IO, "%s: reading the file failed: %s", m->path, nu_error_message(d));
    return NU_OK;
}

/* Where the device cannot import the file's pages: a copy of the file in host memory the
 * device allocates (pinned), made at the first GPU use. */
static nu_status copy_pages(nu_device *d, nu__mapping *m, nu__vk_block **out)
{
    void *memory, *mapped;
    nu_status st = nu__backend_allocate(d, NU__KIND_SHARED, m->map_len, &memory, &mapped);
    if (st != NU_OK) {
        char n[32];
        return nu__fail(d, st, "%s: no room for a copy of the file (%s) for GPU work: %s", m->path,
                        nu__bytes(n, sizeof n, m->map_len), nu_status_string(st));
    }
    nu__vk_block *b = memory;
    if (!mapped) { /* the shared kind is always host-visible; kept as a check */
        nu__backend_release(d, NU__KIND_SHARED, memory, m->map_len);
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: shared memory has no CPU pointer", m->path);
    }
    if ((st = read_file_parallel(d, m, mapped, 0, m->file_size)) != NU_OK) {
        nu__backend_release(d, NU__KIND_SHARED, memory, m->map_len);
        return st;
    }
    *out = b;
    return NU_OK;
}

nu_status nu__mapping_binding(nu_buffer *b, VkBuffer *buffer)
{
    nu__mapping *m = b->mapping;
    nu__vk_block *imp = atomic_load_explicit(&m->import, memory_order_acquire);
    if (!imp) {
        pthread_mutex_lock(&m->lock);
        imp = atomic_load_explicit(&m->import, memory_order_relaxed);
        nu_status st = NU_OK;
        if (!imp) {
            st = nu__mapping_check(b, "binding a mapped file");
            if (st == NU_OK)
                st = m->zero_copy ? import_pages(b->device, m->path, m->base, m->map_len, m->file_size, &imp)
                                  : copy_pages(b->device, m, &imp);
            if (st == NU_OK) {
                nu__device_name_object(b->device, VK_OBJECT_TYPE_BUFFER, (uint64_t)imp->buffer,
                                       b->name[0] ? b->name : m->path);
                atomic_store_explicit(&m->import, imp, memory_order_release);
            }
        }
        pthread_mutex_unlock(&m->lock);
        if (st != NU_OK)
            return st;
    }
    *buffer = imp->buffer;
    return NU_OK;
}

void nu__mapping_release(nu_buffer *b)
{
    nu__mapping *m = b->mapping;
    b->mapping = NULL;
    nu_device *d = b->device;
    free_import(d, atomic_load(&m->import));
    if (m->parent) {
        nu__guard_release(&m->parent->guard);
    } else {
        munmap(m->base, m->map_len);
        close(m->fd);
        nu__pool_untrack(d->pool, m->tracked);
    }
    pthread_mutex_destroy(&m->lock);
    nu__free(m->path);
    nu__free(m);
}

/* ---- nu_buffer_map_file -------------------------------------------------------------- */

/* The file's pages at an address aligned to `align`, followed (when the alignment is larger
 * than a page) by anonymous zero pages up to `map_len`, so that the whole range can be imported. */
static uint8_t *map_aligned(int fd, uint64_t file_size, uint64_t map_len, uint64_t align)
{
    uint64_t file_pages = (file_size + page_size() - 1) / page_size() * page_size();
    if (align <= page_size()) {
        void *p = mmap(NULL, map_len, PROT_READ, MAP_SHARED, fd, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    uint8_t *area = mmap(NULL, map_len + align, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED)
        return NULL;
    uint8_t *start = (uint8_t *)(((uintptr_t)area + align - 1) & ~(uintptr_t)(align - 1));
    if (start > area)
        munmap(area, (size_t)(start - area));
    munmap(start + map_len, (size_t)(area + map_len + align - (start + map_len)));
    if (mmap(start, file_pages, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        munmap(start, map_len);
        return NULL;
    }
    return start;
}

nu_status nu_buffer_map_file(nu_device *d, const char *path, nu_buffer **out)
{
    static const char fn[] = "nu_buffer_map_file";
    if (!out)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL out", fn);
    *out = NULL;
    if (!d || !path)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: NULL %s", fn, d ? "path" : "device");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nu__fail(d, NU_ERROR_IO, "%s: %s: %s", fn, path, strerror(errno));
    struct stat s;
    nu_status st = NU_OK;
    if (fstat(fd, &s) != 0)
        st = nu__fail(d, NU_ERROR_IO, "%s: %s: %s", fn, path, strerror(errno));
    else if (S_ISDIR(s.st_mode))
        st = nu__fail(d, NU_ERROR_IO, "%s: %s: is a directory", fn, path);
    else if (!S_ISREG(s.st_mode))
        st = nu__fail(d, NU_ERROR_IO, "%s: %s: not a regular file", fn, path);
    uint64_t size = st == NU_OK ? (uint64_t)s.st_size : 0;
    if (st != NU_OK || size == 0) {
        close(fd);
        if (st != NU_OK)
            return st;
        nu_buffer *b;
        if ((st = nu__buffer_create(d, 0, NU_STORAGE_SHARED, false, &b)) != NU_OK)
            return st;
        b->read_only = b->mapped_file = true;
        *out = b;
        return NU_OK;
    }
    uint64_t align = import_alignment(d);
    if (size > UINT64_MAX - align || size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return nu__fail(d, NU_ERROR_IO, "%s: %s: too large to map", fn, path);
    }
    uint64_t map_len = (size + align - 1) / align * align;
    char why[256];
    if ((st = nu__pool_track(d->pool, map_len, why, sizeof why)) != NU_OK) {
        close(fd);
        return nu__fail(d, st, "%s: %s: %s", fn, path, why);
    }
    nu__mapping *m = nu__calloc(1, sizeof *m);
    char *name = nu__strdup(path);
    nu_buffer *b = NULL;
    if (!m || !name || nu__buffer_create(d, 0, NU_STORAGE_SHARED, false, &b) != NU_OK) {
        st = nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", fn);
        goto fail;
    }
    uint8_t *base = map_aligned(fd, size, map_len, align);
    if (!base) {
        st = nu__fail(d, NU_ERROR_IO, "%s: %s: mmap failed: %s", fn, path, strerror(errno));
        goto fail;
    }
    /* Whether the device imports these pages: the first of them are imported now (once per
     * device: NVIDIA's driver refuses file-backed pages, anonymous memory only), so that GPU
     * work on a refused file reads a copy instead of failing. */
    bool zero_copy = false;
    int known = atomic_load(&d->file_import);
    const char *why_not = known < 0 ? d->file_import_refusal
                                    : "VK_EXT_external_memory_host is missing or turned off (NUVEC_NO_HOST_IMPORT)";
    if (d->has_external_host_memory && known >= 0) {
        uint64_t probe_len = map_len < align ? map_len : align;
        zero_copy = probe_import(d, path, base, probe_len) == NU_OK;
        atomic_store(&d->file_import, zero_copy ? 1 : -1);
        if (!zero_copy) {
            pthread_mutex_lock(&d->error_lock);
            snprintf(d->file_import_refusal, sizeof d->file_import_refusal, "%s", d->error);
            pthread_mutex_unlock(&d->error_lock);
            why_not = d->file_import_refusal;
        }
    }
    *m = (nu__mapping){.device = d, .fd = fd, .path = name, .base = base, .map_len = map_len,
                       .file_size = size, .tracked = map_len, .zero_copy = zero_copy};
    pthread_mutex_init(&m->lock, NULL);
    atomic_init(&m->import, NULL);
    b->size = size;
    b->alloc.mapped = base;
    b->mapping = m;
    b->read_only = b->mapped_file = true;
    if (!zero_copy) /* not an error: recorded so that nu_error_message(device) says why */
        nu__fail(d, NU_OK,
                 "%s: %s: mapped for the CPU, but the device cannot import the file's pages (%s): GPU work reads "
                 "a copy made at its first use, and moves to device memory copy through pinned staging memory",
                 fn, path, why_not);
    *out = b;
    return NU_OK;
fail:
    nu_buffer_free(b);
    nu__free(m);
    nu__free(name);
    nu__pool_untrack(d->pool, map_len);
    close(fd);
    return st;
}

bool nu_buffer_is_zero_copy(const nu_buffer *b) { return b && b->mapping && b->mapping->zero_copy; }
bool nu_buffer_is_mapped_file(const nu_buffer *b) { return b && b->mapped_file; }

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
    nu__mapping *fm = src->mapping;
    uint64_t start = mv->chunks[k], len = fm->map_len - start < mv->chunk ? fm->map_len - start : mv->chunk;
    nu_status st = nu__mapping_check(src, "nu_buffer_move_ranges");
    if (st != NU_OK)
        return st;
    nu_buffer *b = NULL;
    if (!fm->zero_copy) {
        uint64_t bytes = fm->file_size - start < len ? fm->file_size - start : len;
        b = mv->staging;
        /* From the mapping rather than pread: 45.9 against 41.0 GB/s end to end on the H200
         * (8 threads, 32 chunks of 4 MiB). The file's size was checked just above; a file
         * truncated during the copy faults, as any read of the mapping would (nuvec/mapped.h). */
        memcpy((uint8_t *)b->alloc.mapped + (k % mv->slots) * mv->chunk, fm->base + start, (size_t)bytes);
        *out = b;
        return NU_OK;
    }
    nu__mapping *m = nu__calloc(1, sizeof *m);
    if (!m || nu__buffer_create(mv->d, 0, NU_STORAGE_SHARED, false, &b) != NU_OK) {
        nu__free(m);
        return nu__fail(mv->d, NU_ERROR_HOST_OUT_OF_MEMORY, "nu_buffer_move_ranges: out of host memory");
    }
    nu__vk_block *imp;
    if ((st = import_pages(mv->d, fm->path, fm->base + start, len, len, &imp)) != NU_OK) {
        nu__free(m);
        nu_buffer_free(b);
        return st;
    }
    *m = (nu__mapping){.device = mv->d, .fd = -1, .base = fm->base + start, .map_len = len, .file_size = len,
                       .parent = src, .zero_copy = true};
    pthread_mutex_init(&m->lock, NULL);
    atomic_init(&m->import, imp);
    nu__guard_retain(&src->guard); /* the file stays mapped while its pages are imported */
    b->size = len;
    b->alloc.mapped = m->base;
    b->mapping = m;
    b->read_only = true;
    snprintf(b->name, sizeof b->name, "file chunk %zu", k);
    *out = b;
    return NU_OK;
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
    while (st == NU_OK && f->count && nu__commands_reached(f->c[0]))
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
        if (!mv->src->mapping->zero_copy &&
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
    if (src->mapping && (st = nu__mapping_check(src, fn)) != NU_OK)
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
    mv.import = src->mapping && !atomic_load(&src->mapping->import);
    uint64_t align = import_alignment(d);
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
