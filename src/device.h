/* device.h: the device's internals, shared by the modules that use its Vulkan objects. */
#ifndef NU_DEVICE_H
#define NU_DEVICE_H

#include <pthread.h>
#include <stdatomic.h>

#include "allocator.h"
#include "nuvec/device.h"
#include "vk.h"

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

/* A block of device memory as the Vulkan backend allocates it: one VkBuffer over all of it. */
typedef struct nu__vk_block {
    VkDeviceMemory memory;
    VkBuffer buffer;
    void *mapped;
} nu__vk_block;

struct nu_device {
    nu__vk_instance vki;
    nu__vk_device vkd;
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    VkDebugUtilsMessengerEXT messenger;
    bool validation;
    atomic_uint validation_errors;

    nu_device_info info;
    nu_memory_choice memory;
    uint32_t memory_type[NU__KIND_COUNT]; /* Vulkan memory type per allocator kind */
    bool kind_mapped[NU__KIND_COUNT];     /* blocks of this kind have a CPU pointer */
    VkBufferUsageFlags buffer_usage;
    bool has_push_descriptor, has_external_host_memory, has_debug_utils;

    nu__queue queues[2];
    nu__queue *compute;
    nu__queue *transfer; /* == compute without a separate transfer family */

    nu__pool *pool;
    atomic_uint_fast64_t commits; /* command buffers committed (guards compare against it) */

    /* Kernels (kernel.c): the in-memory cache of pipelines and the on-disk VkPipelineCache. */
    struct nu__kernel_cache *kernels;
    VkPipelineCache pipeline_cache;

    /* Submission and completion (submit.c). */
    struct nu__submitter *submitter;

    /* Timelines (trace.c). */
    struct nu__trace *trace;

    /* RenderDoc captures (capture.c): its API when its layer came with the instance, and the
     * path of the running capture. */
    void *renderdoc;
    char *capture_path;
    uint32_t capture_count;

    pthread_mutex_t placeholder_lock;
    nu__vk_block *placeholder; /* bound for empty buffers; created on first use */

    /* Immediate copies for reading and writing private buffers (transfer.c). */
    pthread_mutex_t staging_lock;
    VkCommandPool staging_pool;
    VkCommandBuffer staging_cmd;
    nu__vk_block *staging;
    uint64_t staging_size;

    /* Debug builds keep freed buffer handles aside so that a second free is caught. */
    pthread_mutex_t handles_lock;
    struct nu_buffer **quarantine;
    unsigned quarantine_next, quarantine_count;

    pthread_mutex_t error_lock;
    char error[1024];

    /* Whether the device imports a file's pages (mapped.c): 0 not tried yet, 1 yes, -1 no (and
     * why: the message of the refused import). */
    atomic_int file_import;
    char file_import_refusal[1024];
};

/* Waits until `queue` reached `value`: spins briefly, then blocks; NU_ERROR_TIMEOUT after
 * timeout_ns, NU_ERROR_DEVICE_LOST if the device was lost. */
nu_status nu__queue_wait(nu_device *d, nu__queue *queue, uint64_t value, uint64_t timeout_ns);

/* The allocator's Vulkan backend (nu__memory_backend; ctx is the device): a VkDeviceMemory of
 * the kind's memory type with one VkBuffer over it, mapped for shared kinds. */
nu_status nu__backend_allocate(void *ctx, int kind, uint64_t size, void **memory, void **mapped);
void nu__backend_release(void *ctx, int kind, void *memory, uint64_t size);

/* The placeholder buffer bound for empty ranges: NU__PLACEHOLDER_SLOTS slots of
 * NU__PLACEHOLDER_SLOT bytes (a multiple of every storage buffer offset alignment), one per
 * empty binding of a command buffer in turn, so that unrelated empty bindings do not overlap
 * (commands.c). */
#define NU__PLACEHOLDER_SLOT 256u
#define NU__PLACEHOLDER_SLOTS 256u
nu_status nu__device_placeholder(nu_device *d, VkBuffer *out);

/* Gives a Vulkan object a debug name (no-op without VK_EXT_debug_utils). */
void nu__device_name_object(nu_device *d, VkObjectType type, uint64_t handle, const char *name);

#endif
