/* error.c: status names and failure messages (see error.h, nuvec/status.h). */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>


static _Thread_local char thread_message[1024];
static _Thread_local char device_copy[1024];

const char *nu_status_string(nu_status status)
{
    switch (status) {
#define NU__STATUS_TEXT(name, text) case NU_##name: return text;
    NU_STATUS_MAP(NU__STATUS_TEXT)
#undef NU__STATUS_TEXT
    case NU_STATUS_COUNT: break;
    }
    return "unknown status";
}

nu_status nu__fail(nu_device *device, nu_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_message, sizeof thread_message, fmt, ap);
    va_end(ap);
    if (device) {
        nu__error_slot *e = (nu__error_slot *)device;
        pthread_mutex_lock(&e->lock);
        memcpy(e->message, thread_message, sizeof e->message);
        e->message[sizeof e->message - 1] = 0;
        pthread_mutex_unlock(&e->lock);
    }
    return status;
}

const char *nu_error_message(const nu_device *device)
{
    if (!device)
        return thread_message;
    nu__error_slot *e = (nu__error_slot *)device; /* the lock is not part of the device's value */
    pthread_mutex_lock(&e->lock);
    memcpy(device_copy, e->message, sizeof device_copy < sizeof e->message ? sizeof device_copy : sizeof e->message);
    device_copy[sizeof device_copy - 1] = 0;
    pthread_mutex_unlock(&e->lock);
    return device_copy;
}

const char *nu__bytes(char *buf, unsigned size, unsigned long long bytes)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%llu B", bytes);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}
