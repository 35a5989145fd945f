/* memory_types.c: which Vulkan memory types shared and private buffers use, and why (measured:
 * CPU reads of device-local host-visible memory can be very slow). */
#include "vk/physical.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "vk/block.h"

static int find_type(const nu_device_info *info, uint32_t want, uint32_t avoid, uint32_t prefer)
{
    int best = -1;
    uint64_t best_heap = 0;
    bool best_pref = false;
    for (uint32_t i = 0; i < info->memory_type_count; i++) {
        uint32_t f = info->memory_types[i].flags;
        if ((f & want) != want || (f & avoid) || (f & NU_MEMORY_PROTECTED))
            continue;
        bool pref = (f & prefer) == prefer;
        uint64_t heap = info->heaps[info->memory_types[i].heap].size;
        if (best < 0 || (pref && !best_pref) || (pref == best_pref && heap > best_heap)) {
            best = (int)i;
            best_heap = heap;
            best_pref = pref;
        }
    }
    return best;
}

/* CPU write and read bandwidth (GB/s, best of 3) of 4 MiB of memory type `type`; false if it
 * could not be allocated. */
static bool measure_type(nu_device *d, uint32_t type, double *write_gbps, double *read_gbps)
{
    enum { BYTES = 4 << 20 };
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = BYTES,
                               .memoryTypeIndex = type};
    VkDeviceMemory mem;
    if (d->vkd.vkAllocateMemory(d->device, &ai, NULL, &mem) != VK_SUCCESS)
        return false;
    void *p = NULL;
    uint8_t *host = nu__malloc(BYTES);
    if (!host || d->vkd.vkMapMemory(d->device, mem, 0, VK_WHOLE_SIZE, 0, &p) != VK_SUCCESS) {
        nu__free(host);
        d->vkd.vkFreeMemory(d->device, mem, NULL);
        return false;
    }
    double bw = 0, br = 0;
    memset(host, 1, BYTES);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = (double)nu__now_ns() * 1e-9;
        memcpy(p, host, BYTES);
        double t1 = (double)nu__now_ns() * 1e-9;
        memcpy(host, p, BYTES);
        double t2 = (double)nu__now_ns() * 1e-9;
        if (t1 > t0 && BYTES / (t1 - t0) > bw)
            bw = BYTES / (t1 - t0);
        if (t2 > t1 && BYTES / (t2 - t1) > br)
            br = BYTES / (t2 - t1);
    }
    d->vkd.vkUnmapMemory(d->device, mem);
    d->vkd.vkFreeMemory(d->device, mem, NULL);
    nu__free(host);
    *write_gbps = bw / 1e9;
    *read_gbps = br / 1e9;
    return true;
}

/* Chooses the memory types of shared and private buffers (see nu_memory_choice). */
nu_status nu__memory_types_choose(nu_device *d, nu_shared_memory want)
{
    const nu_device_info *info = &d->info;
    nu_memory_choice *m = &d->memory;
    const uint32_t HV = NU_MEMORY_HOST_VISIBLE | NU_MEMORY_HOST_COHERENT;
    int priv = find_type(info, NU_MEMORY_DEVICE_LOCAL, NU_MEMORY_HOST_VISIBLE, 0);
    if (priv < 0)
        priv = find_type(info, NU_MEMORY_DEVICE_LOCAL, 0, 0);
    if (priv < 0)
        priv = find_type(info, 0, 0, 0);
    int host = find_type(info, HV, NU_MEMORY_DEVICE_LOCAL, NU_MEMORY_HOST_CACHED);
    int dev = find_type(info, HV | NU_MEMORY_DEVICE_LOCAL, 0, NU_MEMORY_HOST_CACHED);
    if (priv < 0 || (host < 0 && dev < 0))
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "device %s has no host-visible coherent memory type", info->name);
    m->private_type = (uint32_t)priv;

    if (info->unified_memory || host < 0) {
        m->shared_type = (uint32_t)(dev >= 0 ? dev : host);
        m->shared_device_local = dev >= 0;
        snprintf(m->reason, sizeof m->reason, "%s: shared buffers use memory type %u (%s)",
                 info->unified_memory ? "unified memory" : "no host-only memory type", m->shared_type,
                 dev >= 0 ? "device-local, host-visible" : "host-visible");
        return NU_OK;
    }
    if (dev < 0) {
        m->shared_type = (uint32_t)host;
        snprintf(m->reason, sizeof m->reason,
                 "no device-local host-visible memory: shared buffers use host memory type %u", host);
        return NU_OK;
    }
    uint64_t bar = info->heaps[info->memory_types[dev].heap].size;
    char b[32];
    if (want == NU_SHARED_MEMORY_HOST || want == NU_SHARED_MEMORY_DEVICE) {
        m->shared_type = (uint32_t)(want == NU_SHARED_MEMORY_DEVICE ? dev : host);
        m->shared_device_local = want == NU_SHARED_MEMORY_DEVICE;
        snprintf(m->reason, sizeof m->reason, "as asked: shared buffers use %s memory type %u",
                 m->shared_device_local ? "device-local host-visible" : "host", m->shared_type);
        return NU_OK;
    }
    if (bar <= (256ull << 20)) {
        m->shared_type = (uint32_t)host;
        snprintf(m->reason, sizeof m->reason,
                 "device-local host-visible memory is a %s BAR window only: shared buffers use host memory type %d",
                 nu__bytes(b, sizeof b, bar), host);
        return NU_OK;
    }
    /* Resizable BAR: GPU access is fast; CPU reads may be very slow (uncached reads over the
     * bus). Measure both, and use it unless CPU access is more than 2x slower. */
    bool ok = measure_type(d, (uint32_t)host, &m->measured_write_gbps[0], &m->measured_read_gbps[0]) &&
              measure_type(d, (uint32_t)dev, &m->measured_write_gbps[1], &m->measured_read_gbps[1]);
    bool use = ok && m->measured_read_gbps[1] * 2 >= m->measured_read_gbps[0] &&
               m->measured_write_gbps[1] * 2 >= m->measured_write_gbps[0];
    m->shared_type = (uint32_t)(use ? dev : host);
    m->shared_device_local = use;
    snprintf(m->reason, sizeof m->reason,
             "resizable BAR (%s device-local host-visible): CPU read %.2f GB/s, write %.2f GB/s there "
             "against %.2f / %.2f GB/s in host memory: shared buffers use %s memory type %u",
             nu__bytes(b, sizeof b, bar), m->measured_read_gbps[1], m->measured_write_gbps[1],
             m->measured_read_gbps[0], m->measured_write_gbps[0], use ? "device-local" : "host", m->shared_type);
    return NU_OK;
}
