/* physical.h: finding and describing physical devices (physical.c), choosing the memory types
 * buffers use (memory_types.c), and creating the logical device (logical.c). */
#ifndef NU_VK_PHYSICAL_H
#define NU_VK_PHYSICAL_H

#include "vk/device.h"

/* Every physical device of `instance` with its description (free both with nu__free). */
nu_status nu__physical_list(nu_device *d, const nu__vk_instance *vki, VkInstance instance,
                            VkPhysicalDevice **pds, nu_device_info **infos, uint32_t *count);
/* The device `select` names (an index or a name substring; `origin` says where it came from),
 * or the best usable one when select is NULL or empty. */
nu_status nu__physical_choose(nu_device *d, const char *select, const char *origin, const nu_device_info *infos,
                              uint32_t n, uint32_t *chosen);
/* Fills d->memory (the memory types of shared and private buffers, and why). */
nu_status nu__memory_types_choose(nu_device *d, nu_shared_memory want);
/* Creates d->device on d->physical and loads its function table. */
nu_status nu__logical_create(nu_device *d);

#endif
