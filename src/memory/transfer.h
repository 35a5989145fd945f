/* transfer.h: immediate copies between a host pointer and a private buffer, through a staging
 * buffer and the transfer queue, waited for before returning (used by nu_buffer_read/write). */
#ifndef NU_TRANSFER_H
#define NU_TRANSFER_H

#include <stdbool.h>

#include "vk/device.h"

/* Copies `size` bytes between host memory and (buffer, offset): to the buffer when `upload`. */
nu_status nu__transfer_immediate(nu_device *d, VkBuffer buffer, VkDeviceSize offset, void *host,
                                 size_t size, bool upload);
/* Frees the staging resources (device close). */
void nu__transfer_fini(nu_device *d);

#endif
