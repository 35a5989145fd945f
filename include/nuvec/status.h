/* nuvec/status.h: status codes and error messages.
 *
 * Every nuvec call that can fail returns an nu_status and, on failure, clears its
 * out-parameters and records a message naming the problem. Messages are kept per thread
 * (the last failure on the calling thread) and per device (the last failure on that device).
 *
 * Conventions of every header:
 *   Getters of a handle (calls that return a property of a device, buffer, kernel, command
 *     buffer or safetensors file rather than a status) accept NULL, and a freed buffer, and
 *     then return 0, "", NULL or false; they never fail and record no message. (Functions
 *     on value structs, such as nu_tensor's in nuvec/tensor.h, take valid pointers.)
 *   Free and close calls (nu_buffer_free, nu_commands_free, nu_kernel_free, nu_device_close,
 *     nu_safetensors_close) return an nu_status: NU_OK, NU_OK for NULL (ignored), and
 *     NU_ERROR_INVALID_HANDLE for a handle freed before where nuvec can tell (buffers: always,
 *     until the device closes). Ignoring the result is fine.
 *
 * Thread safety: all functions here may be called from any thread. */
#ifndef NUVEC_STATUS_H
#define NUVEC_STATUS_H

#include <stdint.h>

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

/* Every status, once: its name, the fixed English text nu_status_string() gives, and (in the
 * comment) when it is returned. The enum and the strings are both made from this list. */
#define NU_STATUS_MAP(X)                                                                       \
    X(OK, "success")                                                                           \
    X(ERROR_INVALID_ARGUMENT, "invalid argument")       /* a NULL pointer, a bad flag, a size that overflows */ \
    X(ERROR_INVALID_HANDLE, "invalid handle")           /* a freed (or never valid) handle, such as a buffer freed twice */ \
    X(ERROR_HOST_OUT_OF_MEMORY, "out of host memory")   /* a host (CPU) allocation failed */ \
    X(ERROR_OUT_OF_MEMORY, "out of device memory")      /* device memory: the memory limit or the device is exhausted */ \
    X(ERROR_LIMIT, "limit cannot be set")               /* a limit that cannot be set (below what is in use) */ \
    X(ERROR_OUT_OF_RANGE, "out of range")               /* a byte range outside a buffer */ \
    X(ERROR_BUFFER_IN_USE, "buffer in use by the GPU")  /* CPU access refused while submitted GPU work uses the buffer */ \
    X(ERROR_READ_ONLY, "buffer is read-only")           /* a write to a read-only buffer (a mapped file) */ \
    X(ERROR_NO_VULKAN, "Vulkan is not available")       /* the Vulkan loader (libvulkan.so.1) could not be loaded */ \
    X(ERROR_NO_DEVICE, "no such device")                /* no Vulkan device, or none matches NUVEC_DEVICE / the request */ \
    X(ERROR_UNSUPPORTED, "unsupported by the device")   /* the device lacks a feature nuvec needs for this call */ \
    X(ERROR_DEVICE_LOST, "device lost")                 /* the device was lost; the device must be closed */ \
    X(ERROR_TIMEOUT, "timed out")                       /* a bounded wait ran out */ \
    X(ERROR_IO, "input/output error")                   /* a file could not be opened, read or written */ \
    X(ERROR_FORMAT, "malformed data")                   /* a file's (or SPIR-V's) contents are malformed */ \
    X(ERROR_VULKAN, "Vulkan error")                     /* any other Vulkan failure; the message names the VkResult */ \
    X(ERROR_CAPTURE, "capture refused")                 /* a GPU capture cannot be taken (see nuvec/capture.h) */ \
    X(ERROR_BUSY, "all in use")                         /* every one of a fixed set is taken (a model's sequence slots) */

typedef enum nu_status {
#define NU__STATUS_ENUM(name, text) NU_##name,
    NU_STATUS_MAP(NU__STATUS_ENUM)
#undef NU__STATUS_ENUM
    NU_STATUS_COUNT
} nu_status;

/* A fixed English name for a status, such as "out of device memory". Never NULL. */
const char *nu_status_string(nu_status status);

/* How long a wait may block (nu_commands_wait, nu_device_wait_idle): for ever. */
#define NU_WAIT_FOREVER UINT64_MAX

/* The message of the last failed nuvec call on this thread, or "" if none failed.
 * With a device, the message of the last failure on that device (any thread). The text
 * stays valid until the next nuvec call on this thread. */
const char *nu_error_message(const nu_device *device);

NU_END_DECLS
#endif
