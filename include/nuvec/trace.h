/* nuvec/trace.h: timelines of what the GPU did.
 *
 * While a trace runs, every command buffer recorded on the device gets GPU timestamps around
 * each dispatch, copy, fill, upload, download and barrier, and nuvec notes CPU spans for
 * recording, commit and wait. nu_trace_stop writes a Chrome trace-event JSON file (open it in
 * Perfetto or chrome://tracing): one track per queue (compute, transfer) and one for the CPU,
 * GPU times placed on the CPU's clock. Graph launches are traced the same way: a launch while a
 * trace runs uses a copy of the graph encoded with timestamps around each of its commands
 * (encoded again when a trace starts or stops), so each launch adds an event per dispatch.
 * NUVEC_TRACE=FILE.json traces a device from open to close. When no trace runs, nuvec records
 * nothing extra (one branch per command).
 *
 * Thread safety: start and stop may be called from any thread, one at a time per device. */
#ifndef NUVEC_TRACE_H
#define NUVEC_TRACE_H

#include "status.h"

NU_BEGIN_DECLS

/* Starts a trace that nu_trace_stop writes to `path` (created or replaced; checked now: a path
 * that cannot be written fails with NU_ERROR_IO). Fails with NU_ERROR_INVALID_ARGUMENT while
 * another trace of the device runs. Command buffers recorded from now on, and graph launches
 * from now on, are traced. */
nu_status nu_trace_start(nu_device *device, const char *path);

/* Waits for the device's committed work, then writes the trace. Without a running trace it
 * does nothing (NU_OK). */
nu_status nu_trace_stop(nu_device *device);

NU_END_DECLS
#endif
