/* device.h: the device: its Vulkan objects and function tables, and each module's state. */
#ifndef NU_VK_DEVICE_H
#define NU_VK_DEVICE_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>

#include "core/error.h"
#include "core/memory_kind.h"
#include "nuvec/device.h"
#include "vk/vk.h"

struct nu__pool;
struct nu__vk_block;

/* One Vulkan queue with its timeline semaphore: a submission signals `submitted + 1`, so
 * "queue q reached value v" means every submission up to the v-th has completed. */
typedef struct nu__queue {
    VkQueue queue;
    uint32_t family;
    uint32_t index;         /* 0: compute, 1: transfer */
    VkSemaphore timeline;
    uint64_t submitted;     /* last value signalled by a submission (under `lock`) */
    pthread_mutex_t lock;   /* vkQueueSubmit needs the queue externally synchronised */
} nu__queue;

/* Progress on the device's queues (vk/queue.c): who blocks in vkWaitSemaphores on the timelines
 * (the watcher: the completion thread) says so here after each wake-up, and every other waiter
 * sleeps on it rather than blocking in the driver itself. */
typedef struct nu__progress {
    pthread_mutex_t lock;
    pthread_cond_t cond;      /* broadcast after the watcher's every wake-up */
    void (*kick)(void *ctx);  /* the watcher: told of every submission (NULL: none yet) */
    void *ctx;
} nu__progress;

struct nu_device {
    nu__error_slot errors; /* first: core/error.c reaches it through the device pointer */
    nu__vk_instance vki;
    nu__vk_device vkd;
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    VkDebugUtilsMessengerEXT messenger;
    bool validation;
    uint32_t validation_layer_version; /* the Khronos layer's specVersion (0 without validation) */
    atomic_uint validation_errors;

    nu_device_info info;
    nu_memory_choice memory;
    uint32_t memory_type[NU__KIND_COUNT]; /* Vulkan memory type per allocator kind */
    bool kind_mapped[NU__KIND_COUNT];     /* blocks of this kind have a CPU pointer */
    VkBufferUsageFlags buffer_usage;
    bool has_push_descriptor, has_external_host_memory, has_debug_utils;
    /* Storage buffer descriptors updated after they were bound (descriptor indexing's
     * UPDATE_AFTER_BIND): graphs rebind slots in recorded command buffers with them. */
    bool has_update_after_bind;
    /* VK_KHR_shader_bfloat16 enabled with BF16 cooperative matrices (logical.c): the BF16
     * matrix-unit kernels (kernel.h, nu__kernel_new_f16_as_bf16). */
    bool has_bf16_coopmat;
    uint32_t max_update_after_bind_buffers; /* per stage */

    nu__queue queues[2];
    nu__progress progress;
    nu__queue *compute;
    nu__queue *transfer; /* == compute without a separate transfer family */

    struct nu__pool *pool;

    /* Kernels (kernel/kernel.c): the in-memory cache of pipelines and the on-disk VkPipelineCache. */
    struct nu__kernel_cache *kernels;

    /* Recording's spare command buffers (exec/commands.c); submission and completion (submit.c). */
    struct nu__recorder *recorder;
    struct nu__submitter *submitter;

    /* Timelines (trace.c). */
    struct nu__trace *trace;

    struct nu__capture *capture; /* RenderDoc captures (debug/capture.c) */
    struct nu__ops *ops;         /* the kernel library's kernels (ops/op.c) */

    struct nu__placeholder *placeholder; /* bound for empty ranges (vk/block.c) */

    struct nu__staged *staged; /* blocking staged copies of private buffers (memory/staged.c) */

    /* Every nu_buffer struct's slot, until close (memory/buffer.c). */
    struct nu__buffer_slots *buffer_slots;

    struct nu__file_imports *file_imports; /* whether the device imports a file's pages (memory/mapped.c) */
};

_Static_assert(offsetof(struct nu_device, errors) == 0, "core/error.c reaches the errors at the device's address");

#endif
