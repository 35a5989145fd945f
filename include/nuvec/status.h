/* nuvec/status.h: status codes and error messages.
 *
 * Every nuvec call that can fail returns an nu_status and, on failure, clears its
 * out-parameters and records a message naming the problem. Messages are kept per thread
 * (the last failure on the calling thread) and per device (the last failure on that device).
 *
 * Thread safety: all functions here may be called from any thread. */
#ifndef NUVEC_STATUS_H
#define NUVEC_STATUS_H

/* Every public header wraps its declarations in these: C linkage for C++, and, while the
 * library itself is built, default visibility (the library exports what public headers
 * declare, nothing else). */
#ifdef __cplusplus
#define NU__EXTERN_C_BEGIN extern "C" {
#define NU__EXTERN_C_END }
#else
#define NU__EXTERN_C_BEGIN
#define NU__EXTERN_C_END
#endif
#if defined(NUVEC_BUILDING) && defined(__GNUC__)
#define NU_BEGIN_DECLS NU__EXTERN_C_BEGIN _Pragma("GCC visibility push(default)")
#define NU_END_DECLS _Pragma("GCC visibility pop") NU__EXTERN_C_END
#else
#define NU_BEGIN_DECLS NU__EXTERN_C_BEGIN
#define NU_END_DECLS NU__EXTERN_C_END
#endif

NU_BEGIN_DECLS

typedef struct nu_device nu_device;

typedef enum nu_status {
    NU_OK = 0,
    NU_ERROR_INVALID_ARGUMENT,   /* a NULL pointer, a bad flag, a size that overflows */
    NU_ERROR_INVALID_HANDLE,     /* a freed (or never valid) handle, such as a buffer freed twice */
    NU_ERROR_HOST_OUT_OF_MEMORY, /* a host (CPU) allocation failed */
    NU_ERROR_OUT_OF_MEMORY,      /* device memory: the memory limit or the device is exhausted */
    NU_ERROR_LIMIT,              /* a limit that cannot be set (below what is in use) */
    NU_ERROR_OUT_OF_RANGE,       /* a byte range outside a buffer */
    NU_ERROR_BUFFER_IN_USE,      /* CPU access refused while submitted GPU work uses the buffer */
    NU_ERROR_READ_ONLY,          /* a write to a read-only buffer (a mapped file) */
    NU_ERROR_NO_VULKAN,          /* the Vulkan loader (libvulkan.so.1) could not be loaded */
    NU_ERROR_NO_DEVICE,          /* no Vulkan device, or none matches NUVEC_DEVICE / the request */
    NU_ERROR_UNSUPPORTED,        /* the device lacks a feature nuvec needs for this call */
    NU_ERROR_DEVICE_LOST,        /* the device was lost; the device must be closed */
    NU_ERROR_TIMEOUT,            /* a bounded wait ran out */
    NU_ERROR_IO,                 /* a file could not be opened, read or written */
    NU_ERROR_FORMAT,             /* a file's contents are malformed */
    NU_ERROR_VULKAN,             /* any other Vulkan failure; the message names the VkResult */
    NU_ERROR_CAPTURE,            /* a GPU capture cannot be taken (see nuvec/capture.h) */
    NU_STATUS_COUNT
} nu_status;

/* A fixed English name for a status, such as "out of device memory". Never NULL. */
const char *nu_status_string(nu_status status);

/* The message of the last failed nuvec call on this thread, or "" if none failed.
 * With a device, the message of the last failure on that device (any thread). The text
 * stays valid until the next nuvec call on this thread. */
const char *nu_error_message(const nu_device *device);

NU_END_DECLS
#endif
