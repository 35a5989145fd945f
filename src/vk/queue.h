/* queue.h: a queue and its timeline semaphore (queue.c). */
#ifndef NU_VK_QUEUE_H
#define NU_VK_QUEUE_H

#include <pthread.h>
#include <stdint.h>

#include "vk/device.h"

/* Gets queue `family`'s first queue and creates its timeline (debug-named `name`). */
nu_status nu__queue_create(nu_device *d, nu__queue *q, uint32_t family, uint32_t index, const char *name);
/* Destroys the timeline (the queue must be idle). */
void nu__queue_destroy(nu_device *d, nu__queue *q);
/* Waits until `queue` reached `value`: spins briefly, then blocks; NU_ERROR_TIMEOUT after
 * timeout_ns, NU_ERROR_DEVICE_LOST if the device was lost. */
nu_status nu__queue_wait(nu_device *d, nu__queue *queue, uint64_t value, uint64_t timeout_ns);

#endif
