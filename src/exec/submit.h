/* submit.h: command buffers' internals, shared by recording (commands.c) and submission and
 * completion (submit.c). */
#ifndef NU_SUBMIT_H
#define NU_SUBMIT_H

#include <stdbool.h>

#include "memory/buffer.h"
#include "vk/device.h"
#include "exec/hazard.h"
#include "exec/use.h"
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

struct nu_commands {
    nu_device *device;
    nu__queue *queue;
    nu_queue kind;
    /* Written under the submitter's lock by completion (on the device's thread); atomic so
     * that the recording thread may read it without the lock (nu_commands_free, recording
     * calls on a committed command buffer): only it moves the state out of RECORDING. */
    _Atomic nu__state state;
    nu_status error;          /* a failed commit or completion */
    bool freed;               /* the user freed it: completion frees it */
    VkCommandPool pool;
    VkCommandBuffer cmd;
    bool ended;               /* vkEndCommandBuffer done */
    nu__hazards hazards;
    VkPipeline bound;         /* the pipeline bound last (not bound again) */
    uint32_t empty_bindings;  /* empty ranges bound so far (each takes the next placeholder slot) */

    nu__use *uses;
    uint32_t use_count, use_capacity;
    nu_kernel **kernels;      /* references held until completion */
    uint32_t kernel_count, kernel_capacity;
    nu_buffer **staging;      /* upload and download staging buffers, freed at completion */
    uint32_t staging_count, staging_capacity;
    nu__download *downloads;
    uint32_t download_count, download_capacity;

    uint64_t value;           /* the queue's timeline value that marks its completion */
    struct nu__trace_cmd *trace; /* GPU timestamps, when a trace runs (trace.c) */
    uint64_t record_start_ns;    /* when recording began, when a trace runs (else 0) */
    bool labels;                 /* a capture runs: label each dispatch (kernel and buffers) */
    nu_commands *next;        /* in the queue's in-flight list */
};

/* Per device: started at open, stopped at close (device.c calls these). */
nu_status nu__submitter_init(nu_device *d);
void nu__submitter_fini(nu_device *d);

/* Command pools are recycled per queue: one pool and one primary command buffer each. */
nu_status nu__submitter_take_pool(nu_device *d, nu__queue *q, VkCommandPool *pool, VkCommandBuffer *cmd);
void nu__submitter_give_pool(nu_device *d, nu__queue *q, VkCommandPool pool, VkCommandBuffer cmd);

/* nuvec's copy and fill kernels, created on first use. */
nu_status nu__submitter_builtin(nu_device *d, const char *name, nu_kernel **out);

/* Commits a recorded (and ended) command buffer: waits for conflicting earlier work, submits. */
nu_status nu__submit(nu_commands *c);
/* Releases everything a command buffer holds (uses, kernels, staging, its pool); `completed`
 * says whether its work ran (downloads are copied out) or was abandoned. */
void nu__commands_release(nu_commands *c, bool completed);
/* A command buffer object in its initial state (recording, empty), recycled when one is
 * spare, or NULL when host memory runs out. */
nu_commands *nu__commands_alloc(nu_device *d);
/* Frees the spare command buffer objects (how many are kept depends on how many were alive at
 * once: tests that count host allocations trim them first). */
void nu__submitter_trim(nu_device *d);
/* Frees the command buffer's own memory (after nu__commands_release), or keeps it as a spare. */
void nu__commands_destroy(nu_commands *c);
/* nu_commands_free of a committed command buffer: freed now if done, else at completion. */
void nu__commands_free_committed(nu_commands *c);
/* Whether the device was lost (every later submission fails). */
bool nu__device_lost(nu_device *d);
/* For tests: how long the idle completion thread keeps waiting on the queues before sleeping
 * (default 5 ms on GPUs, 0 on CPU devices). */
void nu__submitter_set_linger(nu_device *d, uint64_t ns);
/* For tests: behave as if the device were lost. */
void nu__device_simulate_loss(nu_device *d);

/* Whether committed work has completed (or failed, or its device was lost): a wait would not
 * block. Does not process completion; never reports an error. */
bool nu__commands_reached(nu_commands *c);

#endif
