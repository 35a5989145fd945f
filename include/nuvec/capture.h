/* nuvec/capture.h: GPU captures with RenderDoc (MLX's mx.metal.start_capture, the reference's
 * start_capture / stop_capture).
 *
 * The GPU work committed between nu_capture_start and nu_capture_stop is written as a RenderDoc
 * capture (.rdc) that RenderDoc's tools open (qrenderdoc, renderdoccmd). RenderDoc's layer must
 * be loaded before the device is opened: set NUVEC_CAPTURE=1 (nuvec then enables RenderDoc's
 * layer for the devices it opens) or RenderDoc's own ENABLE_VULKAN_RENDERDOC_CAPTURE=1, with
 * RenderDoc installed (Debian: librenderdoc). RenderDoc is opened at run time: nuvec runs without
 * it. Kernels carry their names, so a capture reads as the program's dispatches.
 *
 * Thread safety: one capture runs at a time in a process (RenderDoc's rule); start and stop may
 * be called from any thread. */
#ifndef NUVEC_CAPTURE_H
#define NUVEC_CAPTURE_H

#include "status.h"

NU_BEGIN_DECLS

/* Starts capturing the device's GPU work into `path`. Refused with NU_ERROR_CAPTURE when the
 * path does not end in ".rdc", when it exists, when captures are not enabled for the device
 * (the message says which variable to set), and while another capture runs. */
nu_status nu_capture_start(nu_device *device, const char *path);

/* Waits for the device's committed work, ends the capture and writes it at exactly the path
 * given to nu_capture_start. Without a running capture of the device it does nothing (NU_OK). */
nu_status nu_capture_stop(nu_device *device);

NU_END_DECLS
#endif
