/* backing.h: what holds a buffer's bytes (its backing), and the small set of operations every
 * backing answers, so that buffers (buffer.c) bind, check and release any of them without knowing
 * which:
 *   empty      no bytes (size 0): binds a slot of the device's placeholder (vk/block.h)
 *   pool       memory from the caching allocator (memory/allocator.h): buffer.c's own
 *   pages      a mapped file's pages imported into the device (VK_EXT_external_memory_host)
 *   file copy  a copy of a mapped file the device reads, where it cannot import the pages
 * A mapped file (mapped.c) becomes pages or a file copy at its first GPU use: that is the
 * `prepare` step, which recording calls for every buffer it binds (nu__buffer_prepare); binding
 * itself only reads. */
#ifndef NU_MEMORY_BACKING_H
#define NU_MEMORY_BACKING_H

#include "vk/device.h"

typedef enum nu__backing_kind {
    NU__BACKING_EMPTY,
    NU__BACKING_POOL,
    NU__BACKING_PAGES,
    NU__BACKING_FILE_COPY,
} nu__backing_kind;

struct nu_buffer;

/* A backing other than empty or pool (those are buffer.c's). Each function is thread-safe. */
typedef struct nu__backing_ops {
    nu__backing_kind (*kind)(const struct nu_buffer *b);
    /* Makes the bytes readable by GPU work (imports the pages, or copies the file); idempotent. */
    nu_status (*prepare)(struct nu_buffer *b);
    /* After prepare: the Vulkan buffer holding the bytes from offset 0 (VK_NULL_HANDLE before). */
    VkBuffer (*vk_buffer)(const struct nu_buffer *b);
    /* Before CPU access and moves: NU_ERROR_IO (naming `fn`) when the bytes cannot be trusted
     * (a mapped file that changed size). */
    nu_status (*check)(struct nu_buffer *b, const char *fn);
    /* The buffer's last reference went. */
    void (*release)(struct nu_buffer *b);
} nu__backing_ops;

#endif
