/* submit.c: committing submissions, and processing their completion (see submission.h).
 *
 * Commit (under the device's commit lock, so that the waits it computes and the queue
 * positions it records are atomic with respect to other commits):
 *   1. For each buffer the command buffer uses, the queue positions of conflicting earlier
 *      work: the pending writer's for a read, every pending use's for a write, and for memory
 *      reused while its previous owner's work runs (nu_buffer_new_gpu), that owner's uses.
 *      The submission waits on each queue's timeline semaphore for the largest of them (also
 *      on its own queue: submissions on one queue are not ordered without it).
 *   2. It takes the next value of its queue's timeline, records it in every used buffer's
 *      guard, and submits, signalling that value.
 * Completion: a device thread waits on the queues' timelines and releases the uses of command
 * buffers that completed, in queue order: guards forget their positions, memory of freed
 * buffers becomes reusable, downloads are copied out. While work is in flight it waits for any
 * queue's oldest command buffer, and for an idle queue's next value (so that new work there
 * wakes it when it completes); with nothing in flight it lingers a few milliseconds the same
 * way (on GPUs), then sleeps on a condition variable that a commit signals. It is the only
 * thread that blocks in vkWaitSemaphores on a queue's timeline: a waiting user spins briefly,
 * then sleeps until the thread reports progress, and processes completions itself as soon as
 * it sees its value reached. */
#include "exec/submission.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/array.h"
#include "core/error.h"
#include "core/host.h"
#include "debug/trace.h"
#include "vk/queue.h"

typedef struct pool_entry {
    VkCommandPool pool;
    VkCommandBuffer cmd;
} pool_entry;

typedef struct nu__submitter {
    pthread_mutex_t commit_lock;
    pthread_mutex_t lock;          /* in-flight lists, states; completion runs under it */
    pthread_cond_t done;           /* broadcast after completions */
    pthread_cond_t work;           /* signalled when the in-flight lists stop being empty */
    nu__submission *head[2], *tail[2];
    pthread_t thread;
    bool thread_started, stop;
    bool sleeping;                 /* the thread waits on `work` (a submission must signal it) */
    bool kicked;                   /* a submission since the thread last looked (kick) */
    uint64_t linger_ns;            /* how long the idle thread keeps waiting on the queues */
    atomic_bool lost;
    pthread_mutex_t pool_lock;     /* the pools */
    pool_entry *pools[2];
    uint32_t pool_count[2], pool_capacity[2];
    pthread_mutex_t builtin_lock;
    nu_kernel *copy, *fill;
} nu__submitter;

static nu__submitter *S(nu_device *d) { return d->submitter; }

bool nu__device_lost(nu_device *d) { return d->submitter && atomic_load(&d->submitter->lost); }

/* ---- completion ------------------------------------------------------------------------ */

void nu__submission_release(nu__submission *c, bool completed)
{
    nu_device *d = c->device;
    bool committed = c->state != NU__RECORDING;
    nu__uses_end(c->uses, c->use_count, committed, (nu__fence){c->queue->index, c->value});
    c->use_count = 0;
    for (uint32_t i = 0; i < c->download_count; i++)
        if (completed)
            memcpy(c->downloads[i].dst, c->downloads[i].staging->alloc.mapped, c->downloads[i].size);
    c->download_count = 0;
    for (uint32_t i = 0; i < c->staging_count; i++)
        nu_buffer_free(c->staging[i]);
    c->staging_count = 0;
    for (uint32_t i = 0; i < c->kernel_count; i++)
        nu__kernel_release(c->kernels[i]);
    c->kernel_count = 0;
    nu__trace_command_done(c->trace, completed);
    c->trace = NULL;
    if (c->pool) {
        nu__submitter_give_pool(d, c->queue, c->pool, c->cmd);
        c->pool = VK_NULL_HANDLE;
    }
}

void nu__submission_fini(nu__submission *c)
{
    nu__free(c->uses);
    nu__free(c->kernels);
    nu__free(c->staging);
    nu__free(c->downloads);
}

static void complete(nu__submission *c, nu_status status)
{
    nu__submission_release(c, status == NU_OK);
    c->error = status;
    c->state = NU__DONE;
    if (c->freed && c->done)
        c->done(c);
}

/* Releases every command buffer whose queue position was reached (or all, once the device is
 * lost). Under s->lock. */
static void process_locked(nu_device *d)
{
    nu__submitter *s = S(d);
    bool any = false;
    for (int q = 0; q < 2; q++) {
        if (!s->head[q])
            continue;
        uint64_t v = 0;
        VkResult r = d->vkd.vkGetSemaphoreCounterValue(d->device, d->queues[q].timeline, &v);
        if (r == VK_ERROR_DEVICE_LOST)
            atomic_store(&s->lost, true);
        bool lost = atomic_load(&s->lost);
        while (s->head[q] && (lost || s->head[q]->value <= v)) {
            nu__submission *c = s->head[q];
            s->head[q] = c->next;
            if (!s->head[q])
                s->tail[q] = NULL;
            complete(c, lost && c->value > v ? NU_ERROR_DEVICE_LOST : NU_OK);
            any = true;
        }
    }
    if (any)
        pthread_cond_broadcast(&s->done);
}

static void *completion_thread(void *arg)
{
    nu_device *d = arg;
    nu__submitter *s = S(d);
    pthread_mutex_lock(&s->lock);
    bool linger = false;
    while (!s->stop) {
        if (!s->head[0] && !s->head[1] && !linger && !s->kicked) {
            s->sleeping = true;
            pthread_cond_wait(&s->work, &s->lock);
            s->sleeping = false;
            linger = s->linger_ns != 0;
            continue;
        }
        s->kicked = false;
        VkSemaphore sems[2];
        uint64_t values[2];
        uint32_t n = 0;
        bool untracked = false;
        for (int q = 0; q < 2; q++) {
            nu__queue *queue = &d->queues[q];
            if (!queue->timeline)
                continue;
            sems[n] = queue->timeline;
            if (s->head[q]) {
                values[n++] = s->head[q]->value;
            } else {
                /* Work no command buffer tracks (staged copies, the trace's calibration) is
                 * watched to its end, so that its waiters hear of it; an idle queue's next
                 * value wakes the thread when new work there completes. */
                uint64_t submitted = nu__queue_submitted(queue), reached = 0;
                nu__queue_counter(d, queue, &reached);
                untracked |= reached < submitted;
                values[n++] = reached < submitted ? submitted : submitted + 1;
            }
        }
        /* Bounded, so that a lost device is noticed even if its semaphores never move. With
         * nothing in flight it lingers (linger_ns) on the queues' next values before sleeping
         * on the condition variable: work committed meanwhile needs no wake-up, which keeps a
         * futex wake off the commit path of a loop of short round trips. */
        bool idle = !s->head[0] && !s->head[1] && !untracked;
        uint64_t timeout = idle ? s->linger_ns : 1000000000ull;
        pthread_mutex_unlock(&s->lock);
        VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                  .flags = VK_SEMAPHORE_WAIT_ANY_BIT, .semaphoreCount = n,
                                  .pSemaphores = sems, .pValues = values};
        VkResult r = d->vkd.vkWaitSemaphores(d->device, &wi, timeout);
        nu__queue_progress(d); /* waiters sleep until the watcher wakes (vk/queue.h) */
        pthread_mutex_lock(&s->lock);
        linger = !(idle && r == VK_TIMEOUT) && s->linger_ns != 0;
        if (r == VK_ERROR_DEVICE_LOST)
            atomic_store(&s->lost, true);
        process_locked(d);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Wakes the completion thread out of its semaphore wait (it may wait for each queue's next
 * value): an empty submission per queue signals that value. */
static void wake_by_empty_submissions(nu_device *d)
{
    for (int q = 0; q < 2; q++) {
        uint64_t value;
        if (d->queues[q].timeline)
            nu__queue_submit(d, &d->queues[q], NULL, 0, NULL, 0, NULL, NULL, &value);
    }
}

/* Every submission to the device's queues (vk/queue.c) tells the completion thread, which then
 * watches it: a sleeping thread is woken. */
static void kick(void *ctx)
{
    nu__submitter *s = S(ctx);
    pthread_mutex_lock(&s->lock);
    s->kicked = true;
    if (s->sleeping)
        pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
}

/* ---- commit ----------------------------------------------------------------------------- */

/* Under the queue's lock, before the submission (nu__queue_submit): the command buffer's uses
 * take the queue position it will signal. */
static void record_uses(void *ctx, uint64_t value)
{
    nu__submission *c = ctx;
    c->value = value; /* also where the submission fails: the uses are released at this position */
    nu__uses_commit(c->uses, c->use_count, (nu__fence){c->queue->index, value});
}

nu_status nu__submit(nu__submission *c)
{
    nu_device *d = c->device;
    nu__submitter *s = S(d);
    nu__queue *q = c->queue;
    if (atomic_load(&s->lost))
        return nu__fail(d, NU_ERROR_DEVICE_LOST, "nu_commands_commit: the device was lost");
    pthread_mutex_lock(&s->commit_lock);
    uint64_t waits[2] = {0, 0};
    nu_status st = nu__uses_waits(c->uses, c->use_count, waits);
    if (st != NU_OK) {
        pthread_mutex_unlock(&s->commit_lock);
        return nu__fail(d, st, "out of host memory committing a command buffer");
    }

    uint64_t value;
    VkResult r = nu__queue_submit(d, q, &c->cmd, 1, waits, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, record_uses, c, &value);
    (void)value; /* record_uses kept it in c->value */
    nu__uses_submitted(c->uses, c->use_count);
    c->state = NU__COMMITTED;

    pthread_mutex_lock(&s->lock);
    if (r == VK_SUCCESS) {
        if (s->tail[q->index])
            s->tail[q->index]->next = c;
        else
            s->head[q->index] = c;
        s->tail[q->index] = c;
        /* The submission's kick may have found the thread awake, about to sleep without c. */
        if (s->sleeping)
            pthread_cond_signal(&s->work);
    } else {
        if (r == VK_ERROR_DEVICE_LOST)
            atomic_store(&s->lost, true);
        /* Nothing was submitted: release the uses as if it had run, with no downloads. */
        complete(c, nu__vk_status(r));
    }
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&s->commit_lock);
    if (r != VK_SUCCESS)
        return nu__fail(d, nu__vk_status(r), "vkQueueSubmit failed: %s", nu__vk_result_name(r));
    return NU_OK;
}

/* ---- waiting ---------------------------------------------------------------------------- */

nu_status nu__submission_wait(nu__submission *c, uint64_t timeout_ns, const char *fn)
{
    nu_device *d = c->device;
    nu__submitter *s = S(d);
    pthread_mutex_lock(&s->lock);
    nu__state state = c->state;
    pthread_mutex_unlock(&s->lock);
    if (state == NU__RECORDING)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: the command buffer was not committed", fn);
    uint64_t traced = nu__trace_active(d) ? nu__trace_now() : 0;
    if (state != NU__DONE) {
        nu_status st = nu__queue_wait(d, c->queue, c->value, timeout_ns, &s->lost);
        if (st == NU_ERROR_TIMEOUT)
            return nu__fail(d, st, "%s: the work did not complete within %llu ns", fn,
                            (unsigned long long)timeout_ns);
        pthread_mutex_lock(&s->lock);
        process_locked(d);
        /* Reached (or lost): processing completed it, here or on the device's thread. */
        while (c->state != NU__DONE)
            pthread_cond_wait(&s->done, &s->lock);
        pthread_mutex_unlock(&s->lock);
    }
    if (traced)
        nu__trace_cpu(d, "wait", traced, nu__trace_now());
    if (c->error != NU_OK)
        return nu__fail(d, c->error, "%s: the command buffer failed: %s", fn, nu_status_string(c->error));
    return NU_OK;
}

nu_status nu__submit_wait_value(nu_device *d, nu__queue *q, uint64_t value, uint64_t timeout_ns, const char *fn)
{
    nu__submitter *s = S(d);
    nu_status st = nu__queue_wait(d, q, value, timeout_ns, &s->lost);
    if (st == NU_ERROR_TIMEOUT)
        return nu__fail(d, st, "%s: the work did not complete within %llu ns", fn, (unsigned long long)timeout_ns);
    pthread_mutex_lock(&s->lock);
    process_locked(d); /* reached (or lost): every submission up to `value` completes here */
    pthread_mutex_unlock(&s->lock);
    if (st == NU_OK && atomic_load(&s->lost))
        st = NU_ERROR_DEVICE_LOST;
    if (st != NU_OK)
        return nu__fail(d, st, "%s: %s", fn, nu_status_string(st));
    return NU_OK;
}

bool nu__submission_reached(nu__submission *c)
{
    nu_device *d = c->device;
    nu__submitter *s = S(d);
    pthread_mutex_lock(&s->lock);
    bool pending = c->state == NU__COMMITTED;
    pthread_mutex_unlock(&s->lock);
    if (!pending || atomic_load(&s->lost))
        return true;
    uint64_t v = 0;
    VkResult r = d->vkd.vkGetSemaphoreCounterValue(d->device, c->queue->timeline, &v);
    return r != VK_SUCCESS || v >= c->value;
}

nu_status nu_device_wait_idle(nu_device *d, uint64_t timeout_ns)
{
    if (!d)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_device_wait_idle: NULL device");
    for (int q = 0; q < 2; q++) {
        nu__queue *queue = &d->queues[q];
        if (!queue->timeline)
            continue;
        nu_status st = nu__queue_wait(d, queue, nu__queue_submitted(queue), timeout_ns, &S(d)->lost);
        if (st != NU_OK)
            return nu__fail(d, st, "nu_device_wait_idle: %s", nu_status_string(st));
    }
    pthread_mutex_lock(&S(d)->lock);
    process_locked(d);
    pthread_mutex_unlock(&S(d)->lock);
    return NU_OK;
}

void nu__submission_free_committed(nu__submission *c)
{
    nu__submitter *s = S(c->device);
    pthread_mutex_lock(&s->lock);
    bool done = c->state == NU__DONE;
    c->freed = true;
    pthread_mutex_unlock(&s->lock);
    if (done && c->done)
        c->done(c);
}

void nu__submitter_set_linger(nu_device *d, uint64_t ns)
{
    nu__submitter *s = S(d);
    pthread_mutex_lock(&s->lock);
    s->linger_ns = ns;
    pthread_mutex_unlock(&s->lock);
}

void nu__device_simulate_loss(nu_device *d)
{
    nu__submitter *s = S(d);
    /* A real loss ends the GPU's work; a simulated one lets it finish first, so that nothing
     * it still uses is reset underneath it. */
    d->vkd.vkDeviceWaitIdle(d->device);
    atomic_store(&s->lost, true);
    pthread_mutex_lock(&s->lock);
    process_locked(d);
    pthread_mutex_unlock(&s->lock);
}

/* ---- command pools and builtins ----------------------------------------------------------- */

nu_status nu__submitter_take_pool(nu_device *d, nu__queue *q, VkCommandPool *pool, VkCommandBuffer *cmd)
{
    nu__submitter *s = S(d);
    pthread_mutex_lock(&s->pool_lock);
    if (s->pool_count[q->index]) {
        pool_entry e = s->pools[q->index][--s->pool_count[q->index]];
        pthread_mutex_unlock(&s->pool_lock);
        *pool = e.pool;
        *cmd = e.cmd;
        return NU_OK;
    }
    pthread_mutex_unlock(&s->pool_lock);
    /* Transient: reset whole after each use (nu__submitter_give_pool). */
    return nu__queue_command_pool(d, q, VK_COMMAND_POOL_CREATE_TRANSIENT_BIT, "a command buffer", pool, cmd);
}

void nu__submitter_give_pool(nu_device *d, nu__queue *q, VkCommandPool pool, VkCommandBuffer cmd)
{
    nu__submitter *s = S(d);
    d->vkd.vkResetCommandPool(d->device, pool, 0);
    pthread_mutex_lock(&s->pool_lock);
    uint32_t i = q->index;
    if (NU__GROW32(s->pools[i], s->pool_capacity[i], s->pool_count[i] + 1, 8) != NU_OK) {
        pthread_mutex_unlock(&s->pool_lock);
        d->vkd.vkDestroyCommandPool(d->device, pool, NULL); /* not kept: no room */
        return;
    }
    s->pools[i][s->pool_count[i]++] = (pool_entry){pool, cmd};
    pthread_mutex_unlock(&s->pool_lock);
}

nu_status nu__submitter_builtin(nu_device *d, const char *name, nu_kernel **out)
{
    nu__submitter *s = S(d);
    nu_kernel **slot = strcmp(name, "copy_u32") == 0 ? &s->copy : &s->fill;
    pthread_mutex_lock(&s->builtin_lock);
    nu_status st = NU_OK;
    if (!*slot)
        st = nu_kernel_builtin(d, name, slot);
    *out = *slot;
    pthread_mutex_unlock(&s->builtin_lock);
    return st;
}

/* ---- the device's submitter ----------------------------------------------------------------- */

nu_status nu__submitter_init(nu_device *d)
{
    nu__submitter *s = nu__calloc(1, sizeof *s);
    if (!s)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    pthread_mutex_init(&s->commit_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->pool_lock, NULL);
    pthread_mutex_init(&s->builtin_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* waits time out by the monotonic clock */
    pthread_cond_init(&s->done, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&s->work, NULL);
    atomic_init(&s->lost, false);
    /* On a CPU device (lavapipe) the GPU's work runs on the cores a lingering thread would
     * take: there it sleeps at once. */
    s->linger_ns = d->info.type == NU_DEVICE_CPU ? 0 : 5000000u;
    d->submitter = s;
    if (pthread_create(&s->thread, NULL, completion_thread, d) != 0)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "cannot start the completion thread");
    s->thread_started = true;
    nu__queue_set_watcher(d, kick, d);
    return NU_OK;
}

void nu__submitter_fini(nu_device *d)
{
    nu__submitter *s = S(d);
    if (!s)
        return;
    if (s->thread_started) {
        nu__queue_set_watcher(d, NULL, NULL);
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->lock);
        wake_by_empty_submissions(d);
        pthread_join(s->thread, NULL);
        d->vkd.vkDeviceWaitIdle(d->device); /* the wake-up submissions too */
    }
    /* The device is idle (close waited): everything in flight completed. */
    pthread_mutex_lock(&s->lock);
    process_locked(d);
    pthread_mutex_unlock(&s->lock);
    if (s->copy)
        nu_kernel_free(s->copy);
    if (s->fill)
        nu_kernel_free(s->fill);
    for (int q = 0; q < 2; q++) {
        for (uint32_t i = 0; i < s->pool_count[q]; i++)
            d->vkd.vkDestroyCommandPool(d->device, s->pools[q][i].pool, NULL);
        nu__free(s->pools[q]);
    }
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->builtin_lock);
    pthread_mutex_destroy(&s->pool_lock);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->commit_lock);
    nu__free(s);
    d->submitter = NULL;
}
