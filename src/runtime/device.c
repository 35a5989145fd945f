/* device.c: opening and closing a device, which starts and stops every module in turn (see
 * nuvec/device.h). This is the top of the library: it includes every layer below. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/host.h"
#include "debug/capture.h"
#include "debug/trace.h"
#include "exec/commands.h"
#include "exec/submission.h"
#include "kernel/kernel.h"
#include "memory/buffer.h"
#include "memory/staged.h"
#include "nuvec.h"
#include "ops/op.h"
#include "vk/block.h"
#include "vk/device.h"
#include "vk/instance.h"
#include "vk/physical.h"
#include "vk/queue.h"

static void destroy(nu_device *d)
{
    nu__capture_fini(d); /* ends a running capture (needs the submitter), frees its state */
    if (d->device) {
        nu__trace_fini(d);   /* writes a running trace: needs the submitter */
        d->vkd.vkDeviceWaitIdle(d->device);
        nu__submitter_fini(d);
        nu__recorder_fini(d); /* after the submitter: completion hands freed command buffers back */
        nu__ops_fini(d); /* its kernels, before the kernel cache goes */
        nu__kernels_fini(d);
        nu__staged_fini(d);
        /* The pool first: releasing cached pieces drops guards, which returns buffer slots. */
        if (d->pool)
            nu__pool_destroy(d->pool);
        nu__buffer_slots_fini(d);
        nu__placeholder_fini(d);
        for (int i = 0; i < 2; i++)
            nu__queue_destroy(d, &d->queues[i]);
        d->vkd.vkDestroyDevice(d->device, NULL);
    }
    nu__mapping_device_fini(d);
    if (d->messenger)
        d->vki.vkDestroyDebugUtilsMessengerEXT(d->instance, d->messenger, NULL);
    if (d->instance)
        d->vki.vkDestroyInstance(d->instance, NULL);
    nu__progress_fini(d);
    pthread_mutex_destroy(&d->errors.lock);
    nu__free(d);
}

static uint64_t default_block_size(const nu_device *d, uint64_t asked)
{
    uint64_t heap = UINT64_MAX;
    for (int k = 0; k < NU__KIND_COUNT; k++) {
        uint64_t h = d->info.heaps[d->info.memory_types[d->memory_type[k]].heap].size;
        if (h < heap)
            heap = h;
    }
    uint64_t b = asked ? asked : 64ull << 20;
    while (b > (1ull << 20) && (b > heap / 8 || b > d->info.max_allocation_size))
        b >>= 1;
    /* A power of two, at least 1 MiB. */
    uint64_t p = 1ull << 20;
    while (p < b)
        p <<= 1;
    return p;
}

nu_status nu_device_open(const nu_device_desc *desc, nu_device **out)
{
    static const nu_device_desc defaults = {0};
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_device_open: NULL out");
    *out = NULL;
    if (!desc)
        desc = &defaults;
    if ((unsigned)desc->shared_memory > NU_SHARED_MEMORY_DEVICE)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_device_open: unknown shared_memory %d",
                        (int)desc->shared_memory);
    nu_device *d = nu__calloc(1, sizeof *d);
    if (!d)
        return nu__fail(NULL, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    pthread_mutex_init(&d->errors.lock, NULL);
    nu__progress_init(d);
    atomic_init(&d->validation_errors, 0);
    d->validation = desc->validation || nu__env_on("NUVEC_VALIDATION");

    nu__capture_prepare();
    nu_status st = nu__instance_create(d, d->validation, &d->instance, &d->vki, &d->has_debug_utils);
    if (st != NU_OK)
        goto fail;
    if ((st = nu__capture_attach(d)) != NU_OK)
        goto fail;
    if (d->validation && (st = nu__messenger_create(d)) != NU_OK)
        goto fail;

    VkPhysicalDevice *pds;
    nu_device_info *infos;
    uint32_t n;
    st = nu__physical_list(d, &d->vki, d->instance, &pds, &infos, &n);
    if (st != NU_OK)
        goto fail;
    const char *select = desc->select;
    const char *origin = "nu_device_desc.select";
    if (!select || !*select) {
        select = getenv("NUVEC_DEVICE");
        origin = "NUVEC_DEVICE";
    }
    uint32_t chosen = 0;
    st = nu__physical_choose(d, select, origin, infos, n, &chosen);
    if (st == NU_OK) {
        d->physical = pds[chosen];
        d->info = infos[chosen];
        d->info.features[NU_FEATURE_DEBUG_UTILS] = d->has_debug_utils;
    }
    nu__free(pds);
    nu__free(infos);
    if (st != NU_OK)
        goto fail;

    if ((st = nu__logical_create(d)) != NU_OK)
        goto fail;
    if ((st = nu__mapping_device_init(d)) != NU_OK)
        goto fail;
    if ((st = nu__queue_create(d, &d->queues[0], d->info.compute_queue_family, 0, "nuvec compute timeline")) != NU_OK)
        goto fail;
    d->compute = &d->queues[0];
    d->transfer = d->compute;
    if (d->info.separate_transfer_queue) {
        if ((st = nu__queue_create(d, &d->queues[1], d->info.transfer_queue_family, 1, "nuvec transfer timeline")) !=
            NU_OK)
            goto fail;
        d->transfer = &d->queues[1];
    }
    if ((st = nu__memory_types_choose(d, desc->shared_memory)) != NU_OK)
        goto fail;
    d->memory_type[NU__KIND_SHARED] = d->memory.shared_type;
    d->memory_type[NU__KIND_PRIVATE] = d->memory.private_type;
    d->kind_mapped[NU__KIND_SHARED] = true;
    d->kind_mapped[NU__KIND_PRIVATE] = false; /* private buffers have no CPU pointer */
    d->buffer_usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                      VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT;

    /* The default memory limit: the device-local heap private buffers use. */
    uint64_t heap = d->info.heaps[d->info.memory_types[d->memory.private_type].heap].size;
    long page = sysconf(_SC_PAGESIZE);
    nu__pool_config pc = {
        .block_size = default_block_size(d, desc->block_size),
        .first_block = 2ull << 20, /* 2, 4, ... up to block_size */
        .memory_limit = heap,
        .page_size = page > 0 ? (uint64_t)page : 4096,
    };
    nu__memory_backend backend = {.ctx = d, .allocate = nu__backend_allocate, .release = nu__backend_release};
    if ((st = nu__pool_create(&pc, &backend, &d->pool)) != NU_OK) {
        st = nu__fail(d, st, "out of host memory creating the allocator");
        goto fail;
    }
    if ((st = nu__buffer_slots_init(d)) != NU_OK)
        goto fail;
    if ((st = nu__staged_init(d)) != NU_OK || (st = nu__placeholder_init(d)) != NU_OK)
        goto fail;
    if ((st = nu__kernels_init(d)) != NU_OK)
        goto fail;
    if ((st = nu__ops_init(d)) != NU_OK)
        goto fail;
    if ((st = nu__recorder_init(d)) != NU_OK || (st = nu__submitter_init(d)) != NU_OK)
        goto fail;
    if ((st = nu__trace_init(d)) != NU_OK)
        goto fail;
    *out = d;
    return NU_OK;

fail:;
    /* Keep the message: destroy() must not lose it (the thread's copy survives). */
    destroy(d);
    return st;
}

nu_status nu_device_close(nu_device *device)
{
    if (device)
        destroy(device);
    return NU_OK;
}

/* Getters give NULL or 0 for NULL (nuvec/status.h). */
const nu_device_info *nu_device_get_info(const nu_device *device) { return device ? &device->info : NULL; }
const nu_memory_choice *nu_device_memory_choice(const nu_device *device) { return device ? &device->memory : NULL; }
nu_status nu_device_memory_budget(nu_device *device, nu_memory_budget *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!device || !out)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_device_memory_budget: NULL %s", device ? "out" : "device");
    out->heap_count = device->info.heap_count;
    if (!device->info.features[NU_FEATURE_MEMORY_BUDGET]) {
        for (uint32_t h = 0; h < out->heap_count; h++)
            out->budget[h] = device->info.heaps[h].size;
        return NU_OK;
    }
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &budget};
    device->vki.vkGetPhysicalDeviceMemoryProperties2(device->physical, &props);
    for (uint32_t h = 0; h < out->heap_count && h < NU_MAX_MEMORY_HEAPS; h++) {
        out->budget[h] = budget.heapBudget[h];
        out->usage[h] = budget.heapUsage[h];
    }
    out->from_driver = true;
    return NU_OK;
}

uint32_t nu_device_validation_errors(const nu_device *device)
{
    return device ? atomic_load(&((nu_device *)device)->validation_errors) : 0;
}
