/* mapped.h: what moves need of a mapped file (mapped.c): its pages, and buffers over chunks of
 * them. (Binding, checking and releasing a mapped buffer are in memory/buffer.h.) */
#ifndef NU_MEMORY_MAPPED_H
#define NU_MEMORY_MAPPED_H

#include <stdbool.h>
#include <stdint.h>

#include "memory/buffer.h"

/* A mapped file as moves see it (all zero for a buffer that is not a mapped file). */
typedef struct nu__file_view {
    const uint8_t *base; /* the first byte of its pages */
    uint64_t map_len;    /* bytes mapped (the size rounded up to the import alignment) */
    uint64_t file_size;
    const char *path;
    bool zero_copy;      /* the device imports its pages */
    bool imported;       /* the whole file is imported already (bound by GPU work) */
} nu__file_view;

nu__file_view nu__mapping_view(const nu_buffer *b);
/* The alignment of imported host pointers and sizes on d (whole pages at least). */
uint64_t nu__mapping_alignment(nu_device *d);
/* Chunk k of `file` (`len` bytes from `start`) as a read-only buffer over its pages, imported
 * now; the file stays mapped while the chunk lives. */
nu_status nu__mapping_chunk(nu_buffer *file, uint64_t start, uint64_t len, size_t k, nu_buffer **out);

#endif
