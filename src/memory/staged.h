/* staged.h: blocking staged copies between a host pointer and a private buffer, through a staging
 * buffer and the transfer queue, waited for before returning (staged.c; nu_buffer_read/write).
 * (Not to be confused with the transfer queue itself, nor with moves of mapped files: io/mover.c.) */
#ifndef NU_MEMORY_STAGED_H
#define NU_MEMORY_STAGED_H

#include <stdbool.h>

#include "vk/device.h"

/* Copies `size` bytes between host memory and (buffer, offset): to the buffer when `upload`. */
nu_status nu__staged_copy(nu_device *d, VkBuffer buffer, VkDeviceSize offset, void *host, size_t size,
                          bool upload);
/* The device's staging state (open), created empty: its block and command buffer come with the
 * first copy. */
nu_status nu__staged_init(nu_device *d);
/* Frees the staging resources (device close). */
void nu__staged_fini(nu_device *d);

#endif
