/* buffer.h: buffers' internals, for the modules that bind them or move their bytes. */
#ifndef NU_BUFFER_H
#define NU_BUFFER_H

#include "memory/allocator.h"
#include "memory/backing.h"
#include "vk/device.h"
#include "memory/guard.h"
#include "nuvec/buffer.h"

#define NU__BUFFER_MAGIC 0x6e756266u /* "nubf": every slot of a device's buffer pool */

/* Every struct nu_buffer lives in a slot of its device's pool (buffer.c), which returns no
 * slot to malloc before nu_device_close: a freed or stale handle still points at a slot,
 * whose generation says it is dead, so it is caught without reading freed memory. */
struct nu_buffer {
    /* The guard comes first: its destroy callback gets the buffer back by a cast. Its
     * references are the user's (until nu_buffer_free) and those of GPU work using it. */
    nu__guard guard;
    uint32_t magic;        /* NU__BUFFER_MAGIC, written once when the slot is made */
    /* Odd while the user holds the buffer (from its creation to nu_buffer_free); bumped at
     * the free and again when the slot is handed out anew. */
    atomic_uint generation;
    bool taken;            /* the slot is out of the free list (under the pool's lock) */
    bool guard_made;       /* the guard's lock and condition exist (kept across reuses) */
    struct nu_buffer *next_free; /* the pool's FIFO of free slots */
    nu_device *device;     /* the pool's device: the same for every use of the slot */
    size_t size;
    nu_storage storage;
    bool read_only;
    bool mapped_file;  /* from nu_buffer_map_file */
    /* A backing other than the pool or empty (memory/backing.h), or NULL; with it, `mapping`
     * is the mapped file (mapped.c), and `alloc` is empty with `mapped` the file's mapping. */
    const nu__backing_ops *backing;
    struct nu__mapping *mapping;
    char name[32];    /* nu_buffer_set_name: shown in captures' labels */
    /* The memory; alloc.busy is the previous owner's guard when the memory was handed out
     * while committed GPU work still used it (a reference; cleared once that work is done). */
    nu__allocation alloc;
};

/* A buffer from the allocator (nu_buffer_new; nu_buffer_new_gpu with `gpu`). */
nu_status nu__buffer_create(nu_device *d, size_t size, nu_storage storage, bool gpu, nu_buffer **out);
/* A shared buffer of nuvec's own (staging for uploads and downloads): counted in neither the
 * user's `buffers` nor `active` (nuvec/memory.h), freed with nu_buffer_free. */
nu_status nu__buffer_create_staging(nu_device *d, size_t size, nu_buffer **out);
/* A private buffer of nuvec's own (a graph's launch parameters in device memory), counted the same. */
nu_status nu__buffer_create_internal_private(nu_device *d, size_t size, nu_buffer **out);

/* NU_OK for a live buffer; INVALID_ARGUMENT for NULL, INVALID_HANDLE for a freed one (the
 * message names `fn`). */
nu_status nu__buffer_check(const nu_buffer *b, const char *fn);

/* What holds the buffer's bytes (memory/backing.h). */
nu__backing_kind nu__buffer_backing(const nu_buffer *b);
/* The first GPU use's step: makes the bytes readable by GPU work (a mapped file's pages
 * imported, or the file copied); a no-op for the pool and empty buffers. Recording calls it for
 * every buffer it binds, before nu__buffer_binding. */
nu_status nu__buffer_prepare(nu_buffer *b);
/* The Vulkan buffer and byte offset to bind (a placeholder slot for empty buffers): reads only;
 * a mapped file not prepared yet is NU_ERROR_INVALID_ARGUMENT. */
nu_status nu__buffer_binding(nu_buffer *b, VkBuffer *buffer, VkDeviceSize *offset);
/* Before CPU access and moves: the backing's check (a mapped file's size unchanged). */
nu_status nu__buffer_backing_check(nu_buffer *b, const char *fn);

/* mapped.c: at device open, whether the driver is known to refuse a file's pages; at close. */
nu_status nu__mapping_device_init(nu_device *d);
void nu__mapping_device_fini(nu_device *d);

/* Whether the user still holds the buffer (not freed): one relaxed load, for hot paths that
 * already know `b` is a buffer (nu__buffer_check says why one is not). */
static inline bool nu__buffer_live(const nu_buffer *b)
{
    return atomic_load_explicit(&((nu_buffer *)b)->generation, memory_order_relaxed) & 1u;
}
/* The slot's generation (odd while live): a holder that keeps a buffer pointer across user
 * calls can record it and compare later, to tell a freed-and-reused slot from its buffer. */
static inline unsigned nu__buffer_generation(const nu_buffer *b)
{
    return atomic_load_explicit(&((nu_buffer *)b)->generation, memory_order_acquire);
}

/* The device's pool of buffer slots: made at open, and at close freed with every slot (the
 * guards of buffers never freed included). Opening fails only for want of host memory. */
nu_status nu__buffer_slots_init(nu_device *d);
void nu__buffer_slots_fini(nu_device *d);
/* For tests: slots made so far, and how many of them are in the free list. */
void nu__buffer_slots_count(nu_device *d, size_t *total, size_t *free);

#endif
