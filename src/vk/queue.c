/* queue.c: a queue and its timeline semaphore (see queue.h). */
#include "vk/queue.h"

#include "core/error.h"
#include "vk/block.h"
#include "vk/device.h"

nu_status nu__queue_create(nu_device *d, nu__queue *q, uint32_t family, uint32_t index, const char *name)
{
    q->family = family;
    q->index = index;
    q->submitted = 0;
    d->vkd.vkGetDeviceQueue(d->device, family, 0, &q->queue);
    VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                    .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE, .initialValue = 0};
    VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
    VkResult r = d->vkd.vkCreateSemaphore(d->device, &si, NULL, &q->timeline);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "creating a timeline semaphore failed: %s", nu__vk_result_name(r));
    if (pthread_mutex_init(&q->lock, NULL) != 0) {
        d->vkd.vkDestroySemaphore(d->device, q->timeline, NULL);
        q->timeline = VK_NULL_HANDLE;
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory creating a queue lock");
    }
    nu__device_name_object(d, VK_OBJECT_TYPE_SEMAPHORE, (uint64_t)q->timeline, name);
    return NU_OK;
}

void nu__queue_destroy(nu_device *d, nu__queue *q)
{
    if (q->timeline) {
        d->vkd.vkDestroySemaphore(d->device, q->timeline, NULL);
        pthread_mutex_destroy(&q->lock);
        q->timeline = VK_NULL_HANDLE;
    }
}

nu_status nu__queue_wait(nu_device *d, nu__queue *q, uint64_t value, uint64_t timeout_ns)
{
    /* Spin briefly first: a blocking wait costs hundreds of microseconds on some drivers
     * (590 us on the H200) where the work itself finishes in a few. */
    uint64_t v = 0;
    VkResult r;
    for (int i = 0; i < 2000; i++) {
        r = d->vkd.vkGetSemaphoreCounterValue(d->device, q->timeline, &v);
        if (r != VK_SUCCESS)
            return nu__fail(d, nu__vk_status(r), "waiting for the %s queue: %s",
                            q->index ? "transfer" : "compute", nu__vk_result_name(r));
        if (v >= value)
            return NU_OK;
    }
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                              .pSemaphores = &q->timeline, .pValues = &value};
    r = d->vkd.vkWaitSemaphores(d->device, &wi, timeout_ns);
    if (r == VK_SUCCESS)
        return NU_OK;
    if (r == VK_TIMEOUT)
        return nu__fail(d, NU_ERROR_TIMEOUT, "the %s queue did not reach %llu within %llu ns",
                        q->index ? "transfer" : "compute", (unsigned long long)value, (unsigned long long)timeout_ns);
    return nu__fail(d, nu__vk_status(r), "waiting for the %s queue: %s", q->index ? "transfer" : "compute",
                    nu__vk_result_name(r));
}
