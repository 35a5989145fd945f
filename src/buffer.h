/* buffer.h: buffers' internals, for the modules that bind them or move their bytes. */
#ifndef NU_BUFFER_H
#define NU_BUFFER_H

#include "allocator.h"
#include "device.h"
#include "guard.h"
#include "nuvec/buffer.h"

#define NU__BUFFER_LIVE 0x6e756266u  /* "nubf" */
#define NU__BUFFER_FREED 0x64656164u /* "dead" */

struct nu_buffer {
    /* The guard comes first: its destroy callback gets the buffer back by a cast. Its
     * references are the user's (until nu_buffer_free) and those of GPU work using it. */
    nu__guard guard;
    atomic_uint magic;
    nu_device *device;
    size_t size;
    nu_storage storage;
    bool read_only;
    char name[32];    /* nu_buffer_set_name: shown in captures' labels */
    /* The memory; alloc.busy is the previous owner's guard when the memory was handed out
     * while committed GPU work still used it (a reference; cleared once that work is done). */
    nu__allocation alloc;
};

/* The Vulkan buffer and byte offset to bind (the placeholder for empty buffers). */
nu_status nu__buffer_binding(nu_buffer *b, VkBuffer *buffer, VkDeviceSize *offset);

/* Debug builds: where freed handles wait so that a second free is caught. */
nu_status nu__buffer_quarantine_init(nu_device *d);
void nu__buffer_quarantine_fini(nu_device *d);

#endif
