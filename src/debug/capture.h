/* capture.h: RenderDoc captures' hooks for opening a device (capture.c). */
#ifndef NU_CAPTURE_H
#define NU_CAPTURE_H

#include <stdbool.h>

#include "vk/device.h"
#include "nuvec/capture.h"

/* Before the instance is created: NUVEC_CAPTURE=1 enables RenderDoc's implicit layer. */
void nu__capture_prepare(void);
/* After it is created: the device's capture state, and whether RenderDoc's layer came with it
 * (captures are then possible). */
nu_status nu__capture_attach(nu_device *d);
/* Whether a capture runs (recording then labels each dispatch). Any thread. */
bool nu__capture_running(nu_device *d);
/* At close: ends a capture still running (writing it), and forgets RenderDoc. */
void nu__capture_fini(nu_device *d);

#endif
