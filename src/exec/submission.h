/* submission.h: what recording hands to submission and completion (submit.c), and all they take:
 * a submission is a queue and a Vulkan command buffer, the uses of the buffers its work touches
 * (exec/use.h), the kernels, staging buffers and downloads kept until it completes, its trace
 * state, and the queue position it signals. Recording (exec/commands.h) builds one inside each
 * command buffer; submission and completion never see the recording's state (hazard tracking,
 * the pipeline bound last), so other recordings, such as a graph's launch, can be submitted the
 * same way. */
#ifndef NU_EXEC_SUBMISSION_H
#define NU_EXEC_SUBMISSION_H

#include <stdbool.h>

#include "memory/buffer.h"
#include "vk/device.h"
#include "exec/use.h"
#include "debug/trace.h"
#include "kernel/kernel.h"
#include "nuvec/command.h"

/* The most storage buffers one dispatch binds. */
#define NU__MAX_BINDINGS 16


/* A download's bytes, copied out of its staging buffer at completion. */
typedef struct nu__download {
    nu_buffer *staging;
    void *dst;
    size_t size;
} nu__download;

typedef enum nu__state {
    NU__RECORDING,
    NU__COMMITTED,
    NU__DONE,
} nu__state;

typedef struct nu__submission nu__submission;
struct nu__submission {
    nu_device *device;
    nu__queue *queue;
    /* Written under the submitter's lock by completion (on the device's thread); atomic so that
     * the recording thread may read it without the lock (a free, recording calls on committed
     * work): only it moves the state out of RECORDING. */
    _Atomic nu__state state;
    nu_status error;          /* a failed commit or completion */
    bool freed;               /* its owner let go: completion hands it back (done) */
    VkCommandPool pool;
    VkCommandBuffer cmd;

    nu__use *uses;
    uint32_t use_count, use_capacity;
    nu_kernel **kernels;      /* references held until completion */
    uint32_t kernel_count, kernel_capacity;
    nu_buffer **staging;      /* upload and download staging buffers, freed at completion */
    uint32_t staging_count, staging_capacity;
    nu__download *downloads;
    uint32_t download_count, download_capacity;

    uint64_t value;           /* the queue's timeline value that marks its completion */
    nu__trace_cmd *trace;     /* GPU timestamps, when a trace runs (trace.c) */
    nu__submission *next;     /* in the queue's in-flight list */
    /* Called once the submission is done and its owner freed it (under the submitter's lock):
     * the owner recycles or frees what holds it. */
    void (*done)(nu__submission *s);
};

/* Per device: started at open, stopped at close (runtime/device.c calls these). */
nu_status nu__submitter_init(nu_device *d);
void nu__submitter_fini(nu_device *d);

/* Command pools are recycled per queue: one pool and one primary command buffer each. */
nu_status nu__submitter_take_pool(nu_device *d, nu__queue *q, VkCommandPool *pool, VkCommandBuffer *cmd);
void nu__submitter_give_pool(nu_device *d, nu__queue *q, VkCommandPool pool, VkCommandBuffer cmd);

/* nuvec's copy and fill kernels, created on first use. */
nu_status nu__submitter_builtin(nu_device *d, const char *name, nu_kernel **out);

/* Commits a recorded (and ended) submission: waits for conflicting earlier work, submits. */
nu_status nu__submit(nu__submission *s);
/* Releases everything a submission holds (uses, kernels, staging, its pool); `completed` says
 * whether its work ran (downloads are copied out) or was abandoned. */
void nu__submission_release(nu__submission *s, bool completed);
/* Frees the arrays of a submission released before (its owner's memory is the owner's). */
void nu__submission_fini(nu__submission *s);
/* Waits until committed work completed: NU_OK, NU_ERROR_TIMEOUT, NU_ERROR_DEVICE_LOST, or the
 * error its submission met (`fn` names the caller in messages). */
nu_status nu__submission_wait(nu__submission *s, uint64_t timeout_ns, const char *fn);
/* Waits until queue q reached `value` (a submission's) and processes completions, so that every
 * submission up to it is done when it returns NU_OK: NU_ERROR_TIMEOUT, NU_ERROR_DEVICE_LOST. */
nu_status nu__submit_wait_value(nu_device *d, nu__queue *q, uint64_t value, uint64_t timeout_ns, const char *fn);
/* Its owner lets go of committed work: handed back (done) now if it completed, else at
 * completion. */
void nu__submission_free_committed(nu__submission *s);
/* Whether committed work has completed (or failed, or its device was lost): a wait would not
 * block. Does not process completion; never reports an error. */
bool nu__submission_reached(nu__submission *s);
/* Whether the device was lost (every later submission fails). */
bool nu__device_lost(nu_device *d);
/* For tests: how long the idle completion thread keeps waiting on the queues before sleeping
 * (default 5 ms on GPUs, 0 on CPU devices). */
void nu__submitter_set_linger(nu_device *d, uint64_t ns);
/* For tests: behave as if the device were lost. */
void nu__device_simulate_loss(nu_device *d);

#endif
