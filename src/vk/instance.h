/* instance.h: creating the Vulkan instance (instance.c). */
#ifndef NU_VK_INSTANCE_H
#define NU_VK_INSTANCE_H

#include <stdbool.h>

#include "vk/device.h"

/* Creates an instance; with validation, also the layer and synchronisation validation. Errors
 * are recorded on `d` (may be NULL). The drivers it loads stay loaded (vk.c). */
nu_status nu__instance_create(nu_device *d, bool validation, VkInstance *out, nu__vk_instance *vki,
                              bool *debug_utils);
/* The messenger reporting validation messages to d (counted, failing the device's calls). */
nu_status nu__messenger_create(nu_device *d);

#endif
