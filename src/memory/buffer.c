/* buffer.c: buffers and the CPU access rules (see nuvec/buffer.h, and the reference's Buffer). */
#include "memory/buffer.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "nuvec/command.h"
#include "memory/staged.h"
#include "vk/block.h"

/* ---- the slot pool -------------------------------------------------------------------------
 *
 * Every nu_buffer struct of a device lives in a slot of that device's pool (sokol_gfx's
 * resource pools, with the handle kept a pointer so that the ABI stays). Slots come in chunks
 * that go back to malloc only at nu_device_close, so a handle that was freed still points at
 * a slot: its generation, odd while the user holds the buffer and bumped by nu_buffer_free,
 * says it is dead, in every build, without reading freed memory. A slot returns to the free
 * list when its guard's last reference goes (the user's, or later that of GPU work still
 * using the freed buffer), at the back: slots are reused oldest-freed first, so a stale
 * handle meets a dead slot for as long as possible (until every other free slot was reused).
 * Once reused, a stale pointer is indistinguishable from the new buffer: that is the price of
 * keeping pointers (a sokol handle carries its generation; holders inside nuvec can compare
 * nu__buffer_generation). A spinlock guards the free list (a few pointer moves; chunks are
 * made outside it): one exchange and one store per create and per release, which keeps
 * nu_buffer_new + nu_buffer_free within a few nanoseconds of the malloc and free they replace
 * (bench alloc on lavapipe: 53 ns a pair against 51.5; a pthread mutex cost 12 ns more). */

#define FIRST_CHUNK 64    /* slots in the first chunk; each next chunk doubles, up to */
#define LARGEST_CHUNK 4096

typedef struct slot_chunk {
    struct slot_chunk *next;
    size_t count;
    nu_buffer slots[];
} slot_chunk;

struct nu__buffer_slots {
    atomic_bool busy;       /* the spinlock */
    nu_buffer *head, *tail; /* free slots: taken at the head, returned at the tail */
    slot_chunk *chunks;
    size_t next_chunk;      /* slots in the next chunk made */
    size_t total, free;
};

nu_status nu__buffer_slots_init(nu_device *d)
{
    struct nu__buffer_slots *s = nu__calloc(1, sizeof *s);
    if (!s)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    atomic_init(&s->busy, false);
    s->next_chunk = FIRST_CHUNK;
    d->buffer_slots = s;
    return NU_OK;
}

void nu__buffer_slots_fini(nu_device *d)
{
    struct nu__buffer_slots *s = d->buffer_slots;
    if (!s)
        return;
    for (slot_chunk *c = s->chunks, *next; c; c = next) {
        next = c->next;
        /* Every guard made (those of buffers never freed too: their handles become invalid,
         * nuvec/device.h). */
        for (size_t i = 0; i < c->count; i++)
            if (c->slots[i].guard_made)
                nu__guard_fini(&c->slots[i].guard);
        nu__free(c);
    }
    nu__free(s);
    d->buffer_slots = NULL;
}

static void lock(struct nu__buffer_slots *s)
{
    while (atomic_exchange_explicit(&s->busy, true, memory_order_acquire))
        while (atomic_load_explicit(&s->busy, memory_order_relaxed))
            sched_yield(); /* held for a few pointer moves: its holder was preempted */
}

static void unlock(struct nu__buffer_slots *s) { atomic_store_explicit(&s->busy, false, memory_order_release); }

void nu__buffer_slots_count(nu_device *d, size_t *total, size_t *free)
{
    struct nu__buffer_slots *s = d->buffer_slots;
    lock(s);
    *total = s->total;
    *free = s->free;
    unlock(s);
}

/* A new chunk's slots join the free list (made outside the lock: another thread may have
 * made one meanwhile, and then both are kept). */
static bool grow(nu_device *d, struct nu__buffer_slots *s)
{
    lock(s);
    size_t n = s->next_chunk;
    unlock(s);
    slot_chunk *c = nu__malloc(sizeof *c + n * sizeof c->slots[0]);
    if (!c)
        return false;
    c->count = n;
    for (size_t i = 0; i < n; i++) {
        nu_buffer *b = &c->slots[i];
        b->magic = NU__BUFFER_MAGIC;
        atomic_init(&b->generation, 0);
        b->taken = false;
        b->guard_made = false;
        b->device = d;
        b->next_free = i + 1 < n ? &c->slots[i + 1] : NULL;
    }
    lock(s);
    c->next = s->chunks;
    s->chunks = c;
    if (s->tail)
        s->tail->next_free = &c->slots[0];
    else
        s->head = &c->slots[0];
    s->tail = &c->slots[n - 1];
    s->total += n;
    s->free += n;
    if (n < LARGEST_CHUNK && s->next_chunk == n)
        s->next_chunk = n * 2;
    unlock(s);
    return true;
}

/* A free slot (the oldest freed), after making a chunk of them if none is left. */
static nu_buffer *take_slot(nu_device *d)
{
    struct nu__buffer_slots *s = d->buffer_slots;
    lock(s);
    while (!s->head) {
        unlock(s);
        if (!grow(d, s))
            return NULL;
        lock(s);
    }
    nu_buffer *b = s->head;
    s->head = b->next_free;
    if (!s->head)
        s->tail = NULL;
    s->free--;
    b->next_free = NULL;
    b->taken = true;
    unlock(s);
    return b;
}

/* The slot goes to the back of the free list (its generation is already even). */
static void return_slot(nu_buffer *b)
{
    struct nu__buffer_slots *s = b->device->buffer_slots;
    lock(s);
    b->taken = false;
    b->next_free = NULL;
    if (s->tail)
        s->tail->next_free = b;
    else
        s->head = b;
    s->tail = b;
    s->free++;
    unlock(s);
}

/* The last reference to the buffer's guard went: no GPU work and no user holds it. */
static void destroy(nu__guard *g)
{
    nu_buffer *b = (nu_buffer *)g;
    if (b->backing)
        b->backing->release(b);
    nu__guard_retire(g); /* its lock and condition stay for the slot's next buffer */
    return_slot(b);
}

nu_status nu__buffer_check(const nu_buffer *b, const char *fn)
{
    if (!b)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL buffer", fn);
    if (b->magic != NU__BUFFER_MAGIC)
        return nu__fail(NULL, NU_ERROR_INVALID_HANDLE, "%s: not a buffer", fn);
    if (!nu__buffer_live(b))
        return nu__fail(b->device, NU_ERROR_INVALID_HANDLE, "%s: the buffer was freed", fn);
    return NU_OK;
}

/* nu__buffer_create and nu__buffer_create_staging: `flags` are nu__pool_alloc's. */
static nu_status create(nu_device *d, size_t size, nu_storage storage, unsigned flags, nu_buffer **out)
{
    if (!out)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_buffer_new: NULL out");
    *out = NULL;
    if (!d)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_buffer_new: NULL device");
    if (storage != NU_STORAGE_SHARED && storage != NU_STORAGE_PRIVATE)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_buffer_new: unknown storage %d", (int)storage);
    nu_buffer *b = take_slot(d);
    if (!b)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for a buffer handle");
    if (b->guard_made) {
        nu__guard_reinit(&b->guard, destroy);
    } else if (nu__guard_init(&b->guard, destroy) == NU_OK) {
        b->guard_made = true;
    } else {
        return_slot(b);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for a buffer handle");
    }
    char why[256];
    int kind = storage == NU_STORAGE_PRIVATE ? NU__KIND_PRIVATE : NU__KIND_SHARED;
    nu_status st = nu__pool_alloc(d->pool, kind, size, flags, &b->alloc, why, sizeof why);
    if (st != NU_OK) {
        nu__guard_retire(&b->guard);
        return_slot(b);
        return nu__fail(d, st, "%s", why);
    }
    b->size = size;
    b->storage = storage;
    b->read_only = false;
    b->mapped_file = false;
    b->mapping = NULL;
    b->backing = NULL;
    b->name[0] = 0;
    /* Live (odd) last, with release: a thread that sees it live sees the fields above. */
    atomic_store_explicit(&b->generation, atomic_load_explicit(&b->generation, memory_order_relaxed) + 1,
                          memory_order_release);
    if (!b->alloc.internal)
        nu__pool_count_buffer(d->pool, 1);
    *out = b;
    return NU_OK;
}

nu_status nu__buffer_create(nu_device *d, size_t size, nu_storage storage, bool gpu, nu_buffer **out)
{
    return create(d, size, storage, gpu ? NU__ALLOC_GPU_REUSE : 0, out);
}

nu_status nu__buffer_create_staging(nu_device *d, size_t size, nu_buffer **out)
{
    return create(d, size, NU_STORAGE_SHARED, NU__ALLOC_INTERNAL, out);
}

nu_status nu__buffer_create_internal_private(nu_device *d, size_t size, nu_buffer **out)
{
    return create(d, size, NU_STORAGE_PRIVATE, NU__ALLOC_INTERNAL, out);
}

nu_status nu_buffer_new(nu_device *device, size_t size, nu_storage storage, nu_buffer **out)
{
    return nu__buffer_create(device, size, storage, false, out);
}

nu_status nu_buffer_new_gpu(nu_device *device, size_t size, nu_storage storage, nu_buffer **out)
{
    return nu__buffer_create(device, size, storage, true, out);
}

nu_status nu_buffer_from(nu_device *device, const void *bytes, size_t size, nu_storage storage, nu_buffer **out)
{
    if (size && !bytes) {
        if (out)
            *out = NULL;
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_buffer_from: NULL bytes");
    }
    nu_status st = nu__buffer_create(device, size, storage, false, out);
    if (st != NU_OK)
        return st;
    st = nu_buffer_write(*out, 0, bytes, size);
    if (st != NU_OK) {
        nu_buffer_free(*out);
        *out = NULL;
    }
    return st;
}

/* Drops the reference to the previous owner's guard once its work is done. */
static void forget_previous_if_idle(nu_buffer *b)
{
    if (b->alloc.busy && nu__guard_idle(b->alloc.busy)) {
        nu__guard_release(b->alloc.busy);
        b->alloc.busy = NULL;
    }
}

nu_status nu_buffer_free(nu_buffer *b)
{
    if (!b)
        return NU_OK;
    if (b->magic != NU__BUFFER_MAGIC)
        return nu__fail(NULL, NU_ERROR_INVALID_HANDLE, "nu_buffer_free: not a buffer");
    /* Live to dead at once, also while GPU work still holds the guard (the slot stays taken
     * until that work completes): a second free meets an even generation. The exchange makes
     * exactly one of two racing frees win. */
    unsigned gen = atomic_load_explicit(&b->generation, memory_order_relaxed);
    if (!(gen & 1u) || !atomic_compare_exchange_strong_explicit(&b->generation, &gen, gen + 1,
                                                                memory_order_acq_rel, memory_order_relaxed))
        return nu__fail(b->device, NU_ERROR_INVALID_HANDLE, "nu_buffer_free: the buffer was already freed");
    nu_device *d = b->device;
    /* GPU work on the memory runs after the previous owner's: while its own is pending, its
     * guard orders reuse; otherwise the previous owner's does, if still pending. */
    forget_previous_if_idle(b);
    nu__guard *busy = !nu__guard_idle(&b->guard) ? &b->guard : b->alloc.busy;
    nu__pool_free(d->pool, &b->alloc, busy);
    if (b->alloc.busy)
        nu__guard_release(b->alloc.busy);
    b->alloc.busy = NULL;
    if (!b->alloc.internal)
        nu__pool_count_buffer(d->pool, -1);
    /* The user's reference is the last unless GPU work holds the guard: then no other thread
     * can take a new one (that needs the handle), so the atomic decrement can be skipped. */
    if (atomic_load_explicit(&b->guard.refs, memory_order_acquire) == 1)
        destroy(&b->guard);
    else
        nu__guard_release(&b->guard);
    return NU_OK;
}

nu_status nu_buffer_set_name(nu_buffer *b, const char *name)
{
    nu_status st = nu__buffer_check(b, "nu_buffer_set_name");
    if (st == NU_OK)
        snprintf(b->name, sizeof b->name, "%s", name ? name : "");
    return st;
}

/* Getters: NULL and freed buffers give 0s (nuvec/status.h). A freed buffer's fields stay
 * readable (its slot is never returned to malloc before the device closes). */
static bool live(const nu_buffer *b) { return b && nu__buffer_live(b); }

const char *nu_buffer_name(const nu_buffer *b) { return live(b) ? b->name : ""; }
size_t nu_buffer_size(const nu_buffer *b) { return live(b) ? b->size : 0; }
uint64_t nu_buffer_accounted_bytes(const nu_buffer *b)
{
    return live(b) && b->size && nu__buffer_backing(b) == NU__BACKING_POOL ? nu__round_size(b->size) : 0;
}
nu_storage nu_buffer_storage(const nu_buffer *b) { return live(b) ? b->storage : NU_STORAGE_SHARED; }
nu_device *nu_buffer_device(const nu_buffer *b) { return live(b) ? b->device : NULL; }
bool nu_buffer_in_use(const nu_buffer *b) { return live(b) && !nu__guard_committed_idle(&b->guard, false); }
bool nu_buffer_is_read_only(const nu_buffer *b) { return live(b) && b->read_only; }

/* Blocks until the previous owner's GPU work on reused memory completed (it is committed,
 * so it does). The reference to that work's guard is kept until the buffer is freed: a commit on
 * another thread may be reading it (nu__uses_waits), so a CPU access must not drop it; an idle
 * guard adds no wait there. */
static nu_status wait_for_previous(nu_buffer *b)
{
    if (!b->alloc.busy)
        return NU_OK;
    return nu__guard_wait_idle(b->alloc.busy, UINT64_MAX);
}

static nu_status range(nu_buffer *b, const char *fn, size_t offset, size_t size)
{
    if (offset > b->size || size > b->size - offset)
        return nu__fail(b->device, NU_ERROR_OUT_OF_RANGE,
                        "%s: bytes %zu..%zu (%zu from offset %zu) are outside the buffer of %zu bytes", fn, offset,
                        offset + size, size, offset, b->size);
    return NU_OK;
}

/* CPU reads: refused while submitted (committed, not completed) GPU work writes the buffer.
 * Work only recorded does not count: the access comes before that work's commit, so before
 * the work in the program's order. */
static nu_status may_read(nu_buffer *b, const char *fn)
{
    nu_status st = nu__buffer_backing_check(b, fn);
    if (st == NU_OK)
        st = wait_for_previous(b);
    if (st != NU_OK)
        return st;
    if (!nu__guard_committed_idle(&b->guard, true))
        return nu__fail(b->device, NU_ERROR_BUFFER_IN_USE,
                        "%s: committed GPU work that has not completed writes the buffer: wait for its command "
                        "buffer (nu_commands_wait or nu_device_wait_idle) first", fn);
    return NU_OK;
}

/* CPU writes: refused for read-only buffers and while any submitted (committed, not
 * completed) GPU work uses it; work only recorded does not count, as for reads. */
static nu_status may_write(nu_buffer *b, const char *fn)
{
    if (b->read_only)
        return nu__fail(b->device, NU_ERROR_READ_ONLY, "%s: the buffer is read-only (a mapped file)", fn);
    if (!nu__guard_committed_idle(&b->guard, false))
        return nu__fail(b->device, NU_ERROR_BUFFER_IN_USE,
                        "%s: committed GPU work that has not completed uses the buffer: wait for its command "
                        "buffers (nu_commands_wait or nu_device_wait_idle) first", fn);
    return wait_for_previous(b);
}

static nu_status move(nu_buffer *b, size_t offset, void *host, size_t size, bool upload)
{
    if (b->storage == NU_STORAGE_SHARED) {
        if (upload)
            memcpy(b->alloc.mapped + offset, host, size);
        else
            memcpy(host, b->alloc.mapped + offset, size);
        return NU_OK;
    }
    VkBuffer vb;
    VkDeviceSize base;
    nu_status st = nu__buffer_binding(b, &vb, &base);
    if (st != NU_OK)
        return st;
    return nu__staged_copy(b->device, vb, base + offset, host, size, upload);
}

nu_status nu_buffer_read(nu_buffer *b, size_t offset, void *dst, size_t size)
{
    nu_status st = nu__buffer_check(b, "nu_buffer_read");
    if (st == NU_OK && size && !dst)
        st = nu__fail(b->device, NU_ERROR_INVALID_ARGUMENT, "nu_buffer_read: NULL destination");
    if (st == NU_OK)
        st = range(b, "nu_buffer_read", offset, size);
    if (st == NU_OK)
        st = may_read(b, "nu_buffer_read");
    if (st != NU_OK || size == 0)
        return st;
    return move(b, offset, dst, size, false);
}

nu_status nu_buffer_write(nu_buffer *b, size_t offset, const void *src, size_t size)
{
    nu_status st = nu__buffer_check(b, "nu_buffer_write");
    if (st == NU_OK && size && !src)
        st = nu__fail(b->device, NU_ERROR_INVALID_ARGUMENT, "nu_buffer_write: NULL source");
    if (st == NU_OK)
        st = range(b, "nu_buffer_write", offset, size);
    if (st == NU_OK)
        st = may_write(b, "nu_buffer_write");
    if (st != NU_OK || size == 0)
        return st;
    return move(b, offset, (void *)src, size, true);
}

static nu_status cpu_pointer(nu_buffer *b, const char *fn)
{
    if (b->storage != NU_STORAGE_SHARED)
        return nu__fail(b->device, NU_ERROR_INVALID_ARGUMENT,
                        "%s: private buffers have no CPU pointer: use nu_buffer_read / nu_buffer_write", fn);
    return NU_OK;
}

nu_status nu_buffer_contents(nu_buffer *b, const void **out)
{
    if (out)
        *out = NULL;
    nu_status st = nu__buffer_check(b, "nu_buffer_contents");
    if (st == NU_OK && !out)
        st = nu__fail(b->device, NU_ERROR_INVALID_ARGUMENT, "nu_buffer_contents: NULL out");
    if (st == NU_OK)
        st = cpu_pointer(b, "nu_buffer_contents");
    if (st == NU_OK)
        st = may_read(b, "nu_buffer_contents");
    if (st == NU_OK)
        *out = b->size ? b->alloc.mapped : NULL;
    return st;
}

nu_status nu_buffer_contents_mut(nu_buffer *b, void **out)
{
    if (out)
        *out = NULL;
    nu_status st = nu__buffer_check(b, "nu_buffer_contents_mut");
    if (st == NU_OK && !out)
        st = nu__fail(b->device, NU_ERROR_INVALID_ARGUMENT, "nu_buffer_contents_mut: NULL out");
    if (st == NU_OK)
        st = cpu_pointer(b, "nu_buffer_contents_mut");
    if (st == NU_OK)
        st = may_write(b, "nu_buffer_contents_mut");
    if (st == NU_OK)
        *out = b->size ? b->alloc.mapped : NULL;
    return st;
}

nu__backing_kind nu__buffer_backing(const nu_buffer *b)
{
    if (b->backing)
        return b->backing->kind(b);
    return b->alloc.block ? NU__BACKING_POOL : NU__BACKING_EMPTY;
}

nu_status nu__buffer_prepare(nu_buffer *b) { return b->backing ? b->backing->prepare(b) : NU_OK; }

nu_status nu__buffer_backing_check(nu_buffer *b, const char *fn)
{
    return b->backing ? b->backing->check(b, fn) : NU_OK;
}

nu_status nu__buffer_binding(nu_buffer *b, VkBuffer *buffer, VkDeviceSize *offset)
{
    if (b->backing) {
        *offset = 0;
        *buffer = b->backing->vk_buffer(b);
        if (!*buffer)
            return nu__fail(b->device, NU_ERROR_INVALID_ARGUMENT,
                            "binding a mapped file before its first GPU use was prepared (nu__buffer_prepare)");
        return NU_OK;
    }
    if (!b->alloc.block) {
        *offset = 0;
        return nu__device_placeholder(b->device, buffer);
    }
    *buffer = ((nu__vk_block *)b->alloc.memory)->buffer;
    *offset = b->alloc.offset;
    return NU_OK;
}
