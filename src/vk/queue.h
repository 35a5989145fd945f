/* queue.h: a queue and its timeline semaphore (queue.c): the one owner of submitting to a queue
 * and of waiting for its timeline.
 *
 * Submission keeps the timeline's invariant in one place: under the queue's lock, a submission
 * signals value = submitted + 1 and, once vkQueueSubmit succeeded, submitted = value, so "queue q
 * reached v" means every submission up to the v-th has completed.
 *
 * Waiting has one policy: spin on the timeline's counter for up to 100 us (a blocking wait costs
 * tens to hundreds of microseconds, 590 us on the H200, where the work itself finishes in a few),
 * then sleep on the device's progress condition, checking the counter at least every millisecond.
 * Only the watcher (the completion thread, exec/submit.c) blocks in vkWaitSemaphores: with two
 * threads blocked on one timeline, NVIDIA's driver was seen waking one ~10 ms late. Every
 * submission tells the watcher (nu__progress.kick), so it watches work nuvec does not track as
 * command buffers too (staged copies, the trace's calibration), and the watcher broadcasts after
 * each wake-up (nu__queue_progress). */
#ifndef NU_VK_QUEUE_H
#define NU_VK_QUEUE_H

#include <pthread.h>
#include <stdint.h>

#include "vk/device.h"

/* Gets queue `family`'s first queue and creates its timeline (debug-named `name`). */
nu_status nu__queue_create(nu_device *d, nu__queue *q, uint32_t family, uint32_t index, const char *name);
/* Destroys the timeline (the queue must be idle). */
void nu__queue_destroy(nu_device *d, nu__queue *q);
/* The device's progress condition (at open and close). */
void nu__progress_init(nu_device *d);
void nu__progress_fini(nu_device *d);

/* Called under the queue's lock with the value the submission will signal, before it is
 * submitted (exec/ records it in the guards of the buffers the work uses). */
typedef void (*nu__queue_before_submit)(void *ctx, uint64_t value);

/* Submits `count` command buffers (0: an empty submission, which still signals), after waiting
 * for waits[i] on queue i's timeline where waits[i] > 0, stage `wait_stage`, and signals the
 * queue's next timeline value (*value). `before` (may be NULL) runs under the lock first. On
 * failure *value is 0 and nothing was submitted. The watcher is told. */
VkResult nu__queue_submit(nu_device *d, nu__queue *q, const VkCommandBuffer *cmds, uint32_t count,
                          const uint64_t waits[2], VkPipelineStageFlags wait_stage, nu__queue_before_submit before,
                          void *ctx, uint64_t *value);
/* A command pool for q's family (with `flags`) and one primary command buffer from it; on
 * failure nothing is left and the message names `what`. */
nu_status nu__queue_command_pool(nu_device *d, nu__queue *q, VkCommandPoolCreateFlags flags, const char *what,
                                 VkCommandPool *pool, VkCommandBuffer *cmd);
/* The last value submitted to q. */
uint64_t nu__queue_submitted(nu__queue *q);
/* The timeline's counter (VK_ERROR_DEVICE_LOST and other errors as vkGetSemaphoreCounterValue). */
VkResult nu__queue_counter(nu_device *d, nu__queue *q, uint64_t *value);
/* Waits until q reaches value, by the policy above: NU_ERROR_TIMEOUT after timeout_ns,
 * NU_ERROR_DEVICE_LOST (or another status) when the counter cannot be read; `lost` (may be NULL)
 * is checked too, so that a device known to be lost ends the wait. */
nu_status nu__queue_wait(nu_device *d, nu__queue *q, uint64_t value, uint64_t timeout_ns, _Atomic bool *lost);

/* The watcher registers itself (kick: called after every submission, from the submitting thread,
 * outside the queue's lock) and, after each wake-up from vkWaitSemaphores, broadcasts. */
void nu__queue_set_watcher(nu_device *d, void (*kick)(void *ctx), void *ctx);
void nu__queue_progress(nu_device *d);

#endif
