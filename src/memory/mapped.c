/* mapped.c: files as buffers without a copy (see nuvec/mapped.h and the reference's map_file);
 * io/mover.c moves them into device memory.
 *
 * A mapped file is a shared, read-only buffer with no allocator memory: its CPU pointer is the
 * mapping, and its VkBuffer is created on first GPU use by importing the mapping's pages
 * (VK_EXT_external_memory_host), which pins them. Importing at first use rather than at
 * nu_buffer_map_file keeps mapping cheap and lets nu_buffer_move_ranges pin the file chunk by
 * chunk instead of all at once. */
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

#include "memory/buffer.h"
#include "memory/mapped.h"
#include "core/error.h"
#include "core/host.h"
#include "nuvec/command.h"
#include "nuvec/mapped.h"
#include "vk/block.h"

/* The copy made at first GPU use (where the device cannot import a file's pages) reads the file
 * on up to READ_THREADS threads, READ_PIECE bytes at a time (as moves do: io/mover.c). */
#define READ_PIECE (4ull << 20)
#define READ_THREADS 8u

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
/* Whether the device imports a file's pages: `known` 0 not tried yet, 1 yes, -1 no (and why:
 * `refusal`, the message of the refused import). */
struct nu__file_imports {
    atomic_int known;
    char refusal[1024];
};

nu_status nu__mapping_device_init(nu_device *d)
{
    struct nu__file_imports *f = nu__calloc(1, sizeof *f);
    if (!f)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    atomic_init(&f->known, 0);
    if (d->info.vendor_id == 0x10de && strstr(d->info.driver_name, "NVIDIA")) {
        snprintf(f->refusal, sizeof f->refusal,
                 "NVIDIA's driver imports only writable anonymous memory; asking it for a file's pages fails and "
                 "breaks later device allocations");
        atomic_store(&f->known, -1);
    }
    d->file_imports = f;
    return NU_OK;
}

void nu__mapping_device_fini(nu_device *d)
{
    nu__free(d->file_imports);
    d->file_imports = NULL;
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

static nu_status mapping_check(nu_buffer *b, const char *fn)
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
        uint64_t at = atomic_fetch_add(&r->next, READ_PIECE);
        if (at >= r->size || atomic_load(&r->failed))
            return NULL;
        uint64_t n = r->size - at < READ_PIECE ? r->size - at : READ_PIECE;
        if (read_file(r->d, r->m, r->dst + at, r->offset + at, n) != NU_OK)
            atomic_store(&r->failed, 1);
    }
}

static nu_status read_file_parallel(nu_device *d, const nu__mapping *m, uint8_t *dst, uint64_t offset, uint64_t size)
{
    reader r = {.d = d, .m = m, .dst = dst, .offset = offset, .size = size};
    atomic_init(&r.next, 0);
    atomic_init(&r.failed, 0);
    pthread_t t[READ_THREADS];
    unsigned n = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned want = cpus > 0 && (unsigned long)cpus < READ_THREADS ? (unsigned)cpus : READ_THREADS;
    while (n + 1 < want && (uint64_t)(n + 1) * READ_PIECE < size && pthread_create(&t[n], NULL, read_pieces, &r) == 0)
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

/* The first GPU use (backing `prepare`): the pages imported, or the file copied. */
static nu_status mapping_prepare(nu_buffer *b)
{
    nu__mapping *m = b->mapping;
    if (atomic_load_explicit(&m->import, memory_order_acquire))
        return NU_OK;
    pthread_mutex_lock(&m->lock);
    nu__vk_block *imp = atomic_load_explicit(&m->import, memory_order_relaxed);
    nu_status st = NU_OK;
    if (!imp) {
        st = mapping_check(b, "binding a mapped file");
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
    return st;
}

static VkBuffer mapping_vk_buffer(const nu_buffer *b)
{
    nu__vk_block *imp = atomic_load_explicit(&b->mapping->import, memory_order_acquire);
    return imp ? imp->buffer : VK_NULL_HANDLE;
}

static nu__backing_kind mapping_kind(const nu_buffer *b)
{
    return b->mapping->zero_copy ? NU__BACKING_PAGES : NU__BACKING_FILE_COPY;
}

static void mapping_release(nu_buffer *b)
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

/* A mapped file's backing (memory/backing.h): its pages, or a copy of them. */
static const nu__backing_ops mapping_backing = {
    .kind = mapping_kind,
    .prepare = mapping_prepare,
    .vk_buffer = mapping_vk_buffer,
    .check = mapping_check,
    .release = mapping_release,
};

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
    struct nu__file_imports *fi = d->file_imports;
    int known = atomic_load(&fi->known);
    const char *why_not = known < 0 ? fi->refusal
                                    : "VK_EXT_external_memory_host is missing or turned off (NUVEC_NO_HOST_IMPORT)";
    if (d->has_external_host_memory && known >= 0) {
        uint64_t probe_len = map_len < align ? map_len : align;
        zero_copy = probe_import(d, path, base, probe_len) == NU_OK;
        atomic_store(&fi->known, zero_copy ? 1 : -1);
        if (!zero_copy) {
            snprintf(fi->refusal, sizeof fi->refusal, "%s", nu_error_message(d));
            why_not = fi->refusal;
        }
    }
    *m = (nu__mapping){.device = d, .fd = fd, .path = name, .base = base, .map_len = map_len,
                       .file_size = size, .tracked = map_len, .zero_copy = zero_copy};
    pthread_mutex_init(&m->lock, NULL);
    atomic_init(&m->import, NULL);
    b->size = size;
    b->alloc.mapped = base;
    b->mapping = m;
    b->backing = &mapping_backing;
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

bool nu_buffer_is_zero_copy(const nu_buffer *b)
{
    return b && nu__buffer_live(b) && b->mapping && b->mapping->zero_copy;
}
bool nu_buffer_is_mapped_file(const nu_buffer *b) { return b && nu__buffer_live(b) && b->mapped_file; }

nu_status nu__mapping_chunk(nu_buffer *file, uint64_t start, uint64_t len, size_t k, nu_buffer **out)
{
    nu_device *d = file->device;
    const nu__mapping *m_file = file->mapping;
    nu_buffer *b = NULL;
    nu_status st;
    nu__mapping *m = nu__calloc(1, sizeof *m);
    if (!m || nu__buffer_create(d, 0, NU_STORAGE_SHARED, false, &b) != NU_OK) {
        nu__free(m);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "nu_buffer_move_ranges: out of host memory");
    }
    nu__vk_block *imp;
    if ((st = import_pages(d, m_file->path, m_file->base + start, len, len, &imp)) != NU_OK) {
        nu__free(m);
        nu_buffer_free(b);
        return st;
    }
    *m = (nu__mapping){.device = d, .fd = -1, .base = m_file->base + start, .map_len = len, .file_size = len,
                       .parent = file, .zero_copy = true};
    pthread_mutex_init(&m->lock, NULL);
    atomic_init(&m->import, imp);
    nu__guard_retain(&file->guard); /* the file stays mapped while its pages are imported */
    b->size = len;
    b->alloc.mapped = m->base;
    b->mapping = m;
    b->backing = &mapping_backing;
    b->read_only = true;
    snprintf(b->name, sizeof b->name, "file chunk %zu", k);
    *out = b;
    return NU_OK;
}

nu__file_view nu__mapping_view(const nu_buffer *b)
{
    const nu__mapping *m = b->mapping;
    if (!m)
        return (nu__file_view){0};
    return (nu__file_view){.base = m->base, .map_len = m->map_len, .file_size = m->file_size, .path = m->path,
                           .zero_copy = m->zero_copy, .imported = atomic_load(&((nu__mapping *)m)->import) != NULL};
}

uint64_t nu__mapping_alignment(nu_device *d) { return import_alignment(d); }
