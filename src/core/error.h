/* error.h: recording failures (the status and a message naming the problem). */
#ifndef NU_ERROR_H
#define NU_ERROR_H

#include <pthread.h>

#include "nuvec/status.h"

/* A device's last failure message. It is the first member of struct nu_device (vk/device.h
 * checks), so that recording a failure needs only the device pointer, not the device. */
typedef struct nu__error_slot {
    pthread_mutex_t lock;
    char message[1024];
} nu__error_slot;

/* Records `fmt` as the message of a failure with `status` on this thread and, with a device,
 * on that device; returns `status`. Also usable for NU_OK-free warnings: never returns NU_OK
 * unless given it. */
nu_status nu__fail(nu_device *device, nu_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "1.5 GiB", "256 B": human-readable bytes into buf. */
const char *nu__bytes(char *buf, unsigned size, unsigned long long bytes);

#endif
