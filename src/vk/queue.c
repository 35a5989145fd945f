/* queue.c: a queue and its timeline semaphore (see queue.h). */
#include "vk/queue.h"

#include <stdatomic.h>
#include <stdbool.h>

#include "core/error.h"
#include "core/host.h"
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

void nu__progress_init(nu_device *d)
{
    pthread_mutex_init(&d->progress.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->progress.cond, &ca);
    pthread_condattr_destroy(&ca);
    d->progress.kick = NULL;
    d->progress.ctx = NULL;
}

void nu__progress_fini(nu_device *d)
{
    pthread_cond_destroy(&d->progress.cond);
    pthread_mutex_destroy(&d->progress.lock);
}

void nu__queue_set_watcher(nu_device *d, void (*kick)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&d->progress.lock);
    d->progress.kick = kick;
    d->progress.ctx = ctx;
    pthread_mutex_unlock(&d->progress.lock);
}

void nu__queue_progress(nu_device *d)
{
    pthread_mutex_lock(&d->progress.lock);
    pthread_cond_broadcast(&d->progress.cond);
    pthread_mutex_unlock(&d->progress.lock);
}

VkResult nu__queue_submit(nu_device *d, nu__queue *q, const VkCommandBuffer *cmds, uint32_t count,
                          const uint64_t waits[2], VkPipelineStageFlags wait_stage, nu__queue_before_submit before,
                          void *ctx, uint64_t *value)
{
    VkSemaphore wait_sems[2];
    uint64_t wait_values[2];
    VkPipelineStageFlags wait_stages[2];
    uint32_t nw = 0;
    for (int i = 0; waits && i < 2; i++) {
        if (waits[i]) {
            wait_sems[nw] = d->queues[i].timeline;
            wait_values[nw] = waits[i];
            wait_stages[nw++] = wait_stage;
        }
    }
    pthread_mutex_lock(&q->lock);
    uint64_t v = q->submitted + 1;
    if (before)
        before(ctx, v);
    VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = nw, .pWaitSemaphoreValues = wait_values,
                                        .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &v};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ti, .waitSemaphoreCount = nw,
                       .pWaitSemaphores = wait_sems, .pWaitDstStageMask = wait_stages,
                       .commandBufferCount = count, .pCommandBuffers = cmds, .signalSemaphoreCount = 1,
                       .pSignalSemaphores = &q->timeline};
    VkResult r = d->vkd.vkQueueSubmit(q->queue, 1, &si, VK_NULL_HANDLE);
    if (r == VK_SUCCESS)
        q->submitted = v;
    pthread_mutex_unlock(&q->lock);
    *value = r == VK_SUCCESS ? v : 0;
    if (r == VK_SUCCESS) {
        pthread_mutex_lock(&d->progress.lock);
        void (*kick)(void *) = d->progress.kick;
        void *kctx = d->progress.ctx;
        pthread_mutex_unlock(&d->progress.lock);
        if (kick)
            kick(kctx);
    }
    return r;
}

nu_status nu__queue_command_pool(nu_device *d, nu__queue *q, VkCommandPoolCreateFlags flags, const char *what,
                                 VkCommandPool *pool, VkCommandBuffer *cmd)
{
    *pool = VK_NULL_HANDLE;
    *cmd = VK_NULL_HANDLE;
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .flags = flags,
                                  .queueFamilyIndex = q->family};
    VkCommandPool p;
    VkResult r = d->vkd.vkCreateCommandPool(d->device, &pi, NULL, &p);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "creating %s's command pool: %s", what, nu__vk_result_name(r));
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = p,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    r = d->vkd.vkAllocateCommandBuffers(d->device, &ai, cmd);
    if (r != VK_SUCCESS) {
        d->vkd.vkDestroyCommandPool(d->device, p, NULL);
        *cmd = VK_NULL_HANDLE;
        return nu__fail(d, nu__vk_status(r), "allocating %s's command buffer: %s", what, nu__vk_result_name(r));
    }
    *pool = p;
    return NU_OK;
}

uint64_t nu__queue_submitted(nu__queue *q)
{
    pthread_mutex_lock(&q->lock);
    uint64_t v = q->submitted;
    pthread_mutex_unlock(&q->lock);
    return v;
}

VkResult nu__queue_counter(nu_device *d, nu__queue *q, uint64_t *value)
{
    *value = 0;
    return d->vkd.vkGetSemaphoreCounterValue(d->device, q->timeline, value);
}

/* How long a waiter spins before it sleeps, and the longest it sleeps between checks. */
#define SPIN_NS 100000u
#define SLICE_NS 1000000u

nu_status nu__queue_wait(nu_device *d, nu__queue *q, uint64_t value, uint64_t timeout_ns, _Atomic bool *lost)
{
    const char *name = q->index ? "transfer" : "compute";
    uint64_t start = nu__now_ns();
    bool locked = false;
    nu_status st;
    for (;;) {
        uint64_t v = 0;
        VkResult r = nu__queue_counter(d, q, &v);
        if (r == VK_ERROR_DEVICE_LOST || (lost && atomic_load(lost))) {
            if (lost)
                atomic_store(lost, true);
            st = nu__fail(d, NU_ERROR_DEVICE_LOST, "waiting for the %s queue: the device was lost", name);
            break;
        }
        if (r != VK_SUCCESS) {
            st = nu__fail(d, nu__vk_status(r), "waiting for the %s queue: %s", name, nu__vk_result_name(r));
            break;
        }
        if (v >= value) {
            st = NU_OK;
            break;
        }
        uint64_t spent = nu__now_ns() - start;
        if (spent >= timeout_ns) {
            st = nu__fail(d, NU_ERROR_TIMEOUT, "the %s queue did not reach %llu within %llu ns", name,
                          (unsigned long long)value, (unsigned long long)timeout_ns);
            break;
        }
        if (spent < SPIN_NS)
            continue;
        if (!locked) {
            pthread_mutex_lock(&d->progress.lock);
            locked = true;
            continue; /* check again under the lock: no broadcast is missed */
        }
        uint64_t slice = timeout_ns - spent < SLICE_NS ? timeout_ns - spent : SLICE_NS;
        struct timespec ts = nu__deadline_after(CLOCK_MONOTONIC, slice);
        pthread_cond_timedwait(&d->progress.cond, &d->progress.lock, &ts);
    }
    if (locked)
        pthread_mutex_unlock(&d->progress.lock);
    return st;
}
